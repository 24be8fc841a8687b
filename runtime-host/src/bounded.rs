//! Dynamic shapes within declared bounds: one memory plan, many bindings.
//!
//! A model with symbolic dimensions (a sequence length, a batch) is usually run at many
//! sizes. A [`BoundedSession`] is given an upper bound for every symbolic dimension of the
//! inputs. At load it specialises the model at the bounds and plans the arena there, once;
//! the arena is allocated at that size and never grows. Each run binds the dimensions from
//! the actual inputs (a dimension above its bound is refused, naming the input and the
//! dimension), and runs a session specialised to that binding whose arena tensors sit at
//! the offsets planned at the bound: a tensor is never larger at a smaller binding and
//! lives over the same steps, so the placement stays valid. [`crate::memory::is_valid`]
//! checks that instead of assuming it (a binding can change which nodes a plugin takes, and
//! with it the steps); a binding whose layout does not fit gets its own plan, counted in
//! [`BoundedStats::replans`].
//!
//! Specialised sessions (partitions compiled for those shapes) are kept for the most
//! recently used bindings, so a stream of alternating sizes does not recompile each call.

use std::collections::BTreeMap;

use baton_delegate_api::{Dim, Graph, Tensor};

use crate::engine::Engine;
use crate::error::{HostError, InputProblem, Result, TensorType};
use crate::exec::{ArenaReuse, Session};
use crate::memory::{Arena, ArenaPlan};

/// Specialised sessions kept by default (see [`BoundedSession::with_capacity`]).
pub const DEFAULT_CACHED_BINDINGS: usize = 8;

/// A model loaded for every binding of its symbolic dimensions up to declared bounds.
pub struct BoundedSession<'e> {
    engine: &'e Engine,
    graph: Graph,
    bounds: BTreeMap<String, usize>,
    layout: std::collections::HashMap<String, usize>,
    /// The arena planned at the bounds, shared with every specialised session whose
    /// binding fits its layout.
    arena: Arena,
    arena_plan: ArenaPlan,
    /// Specialised sessions, least recently used first.
    cache: Vec<(BTreeMap<String, usize>, Session<'e>)>,
    capacity: usize,
    stats: BoundedStats,
}

/// What the bounded session did, for tests and for the user.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoundedStats {
    /// Sessions specialised (partitions compiled) for a new binding.
    pub specializations: usize,
    /// Bindings whose arena layout could not reuse the one planned at the bounds.
    pub replans: usize,
    /// Runs.
    pub runs: usize,
}

impl<'e> BoundedSession<'e> {
    /// Loads `graph` for every binding with each symbolic input dimension at most its bound.
    /// Every symbolic dimension of the inputs needs a bound; bounds of names the model does
    /// not use are refused too, since they are most likely a typo.
    pub fn new(
        engine: &'e Engine,
        graph: &Graph,
        bounds: &BTreeMap<String, usize>,
    ) -> Result<BoundedSession<'e>> {
        Self::with_capacity(engine, graph, bounds, DEFAULT_CACHED_BINDINGS)
    }

    /// [`BoundedSession::new`] keeping at most `capacity` (≥ 1) specialised sessions.
    pub fn with_capacity(
        engine: &'e Engine,
        graph: &Graph,
        bounds: &BTreeMap<String, usize>,
        capacity: usize,
    ) -> Result<BoundedSession<'e>> {
        // The arena is planned once, at the bounds, before any run: a model whose shapes
        // also follow the values of some inputs has no shapes to plan until a run gives
        // them.
        if let Some(name) = crate::values::value_input_names(graph).into_iter().next() {
            return Err(HostError::input(name, InputProblem::ValueInputBounded));
        }
        let mut used = BTreeMap::new();
        for &t in &graph.inputs {
            let decl = &graph.tensors[t];
            for d in &decl.shape {
                if let Dim::Sym(s) = d {
                    used.entry(s.clone()).or_insert_with(|| decl.name.clone());
                }
            }
        }
        for (dim, input) in &used {
            match bounds.get(dim) {
                None => {
                    return Err(HostError::input(
                        input,
                        InputProblem::Unbounded { dim: dim.clone() },
                    ))
                }
                Some(0) => {
                    return Err(HostError::input(
                        input,
                        InputProblem::ZeroBound { dim: dim.clone() },
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = bounds.keys().find(|k| !used.contains_key(*k)) {
            return Err(HostError::UnusedBound {
                dim: extra.clone(),
                symbolic: used.keys().cloned().collect(),
            });
        }
        let at_bound = Session::new(engine, graph, bounds)?;
        if let Some(stage) = at_bound.stages().first() {
            return Err(HostError::DynamicUnderBounds {
                node: stage.dynamic_node.clone(),
            });
        }
        let layout = at_bound.arena_layout();
        let arena_plan = at_bound.arena_plan.clone();
        let arena = at_bound.arena().clone();
        Ok(BoundedSession {
            engine,
            graph: graph.clone(),
            bounds: bounds.clone(),
            layout,
            arena,
            arena_plan,
            cache: Vec::new(),
            capacity: capacity.max(1),
            stats: BoundedStats::default(),
        })
    }

    /// The arena plan made at the bounds: the memory every run uses.
    pub fn arena_plan(&self) -> &ArenaPlan {
        &self.arena_plan
    }

    /// What has happened so far.
    pub fn stats(&self) -> BoundedStats {
        self.stats
    }

    /// Nodes per target of the most recently run binding (empty before the first run).
    pub fn last_nodes_per_backend(&self) -> BTreeMap<String, usize> {
        self.cache
            .last()
            .map(|(_, s)| s.nodes_per_backend())
            .unwrap_or_default()
    }

    /// The declared bounds.
    pub fn bounds(&self) -> &BTreeMap<String, usize> {
        &self.bounds
    }

    /// Binds the symbolic dimensions from `inputs` (graph input order), checking ranks,
    /// fixed extents, consistency between inputs and the bounds.
    pub fn bind(&self, inputs: &[&Tensor]) -> Result<BTreeMap<String, usize>> {
        if inputs.len() != self.graph.inputs.len() {
            return Err(HostError::InputCount {
                given: inputs.len(),
                expected: self.graph.inputs.len(),
                state: 0,
            });
        }
        let mut binding: BTreeMap<String, usize> = BTreeMap::new();
        for (&t, given) in self.graph.inputs.iter().zip(inputs) {
            let decl = &self.graph.tensors[t];
            let err = |problem: InputProblem| HostError::input(&decl.name, problem);
            if given.dtype != decl.dtype || given.shape.len() != decl.shape.len() {
                return Err(err(InputProblem::WrongType {
                    expected: TensorType::declared(decl.dtype, &decl.shape),
                    got: TensorType::of(given.dtype, &given.shape),
                }));
            }
            for (axis, (d, &v)) in decl.shape.iter().zip(&given.shape).enumerate() {
                match d {
                    Dim::Fixed(f) if *f != v => {
                        return Err(err(InputProblem::FixedExtent {
                            axis,
                            got: v,
                            fixed: *f,
                        }))
                    }
                    Dim::Fixed(_) => {}
                    Dim::Sym(s) => {
                        let bound = self.bounds[s];
                        if v > bound {
                            return Err(err(InputProblem::AboveBound {
                                dim: s.clone(),
                                axis,
                                got: v,
                                bound,
                            }));
                        }
                        if let Some(&prev) = binding.get(s) {
                            if prev != v {
                                return Err(err(InputProblem::Inconsistent {
                                    dim: s.clone(),
                                    axis,
                                    got: v,
                                    bound_to: prev,
                                }));
                            }
                        }
                        binding.insert(s.clone(), v);
                    }
                }
            }
        }
        Ok(binding)
    }

    /// Runs the model on `inputs` (graph input order).
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        self.run_refs(&refs)
    }

    /// [`BoundedSession::run`] over borrowed inputs.
    pub fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let binding = self.bind(inputs)?;
        let k = self.session_for(binding)?;
        self.stats.runs += 1;
        let (_, session) = &mut self.cache[k];
        session.run_refs(inputs)
    }

    /// The session specialised to `binding`, most recently used last; loads it on a miss.
    fn session_for(&mut self, binding: BTreeMap<String, usize>) -> Result<usize> {
        if let Some(k) = self.cache.iter().position(|(b, _)| *b == binding) {
            let entry = self.cache.remove(k);
            self.cache.push(entry);
            return Ok(self.cache.len() - 1);
        }
        if self.cache.len() == self.capacity {
            self.cache.remove(0);
        }
        let reuse = ArenaReuse {
            layout: self.layout.clone(),
            arena: self.arena.clone(),
        };
        let loaded = Session::new_reusing(self.engine, &self.graph, &binding, Some(reuse));
        let session = loaded?;
        self.stats.specializations += 1;
        if !session.borrows_arena() {
            self.stats.replans += 1;
        }
        self.cache.push((binding, session));
        Ok(self.cache.len() - 1)
    }
}
