//! The run loop: a model loaded for execution (partitioned, compiled, initialised,
//! memory-planned) and run step by step over one arena, an explicit handle
//! ([`crate::memory::Arena`]). Compiling and loading are `program/`'s job, lifetimes and
//! placement `memory`'s; this module holds what a run needs.
//!
//!
//! Loading does all the work that can be done once: bind symbolic dimensions, ask every
//! usable backend what it supports, partition, compile and init each partition (on a
//! failure, re-partition without that backend), place every tensor that crosses a step
//! boundary in one arena, and prepare the ABI views of every delegate call. A run then
//! copies the inputs in, walks the steps and copies the outputs out; it allocates no tensor
//! memory, and delegate calls reuse their prepared views. An input that only delegates
//! read is not copied: for the run their views point at the caller's buffer instead (see
//! [`Session::run_views`]).
//!
//! Control flow runs on the host. An If's branches are sessions of their own, loaded once
//! (partitioned across the plugins like any model) and run when the condition picks them;
//! plugins never see an If, a Loop or a subgraph: they are asked about the graph with the
//! control-flow nodes cut out. A Loop's body runs on the reference interpreter.

use std::collections::{BTreeMap, HashMap};

use baton_delegate_api::abi;
use baton_delegate_api::ir::AlignedBytes;
use baton_delegate_api::sdk::{ProfileEvent, TensorRef};
use baton_delegate_api::{DType, Graph, NodeId, OpKind, Storage, Tensor, TensorId};
use baton_partitioner::{self as partitioner, PartitionPlan, Step};

use crate::engine::Engine;
use crate::error::{HostError, InputProblem, NodeProblem, Result, TensorType};
use crate::memory::{self, arena_tensors, Arena, ArenaPlan};
use crate::plugin::{view_of, PluginExecutable};
use crate::program::{self, MemoryLayout};
use crate::trace::StepTiming;

mod dynamic;
mod steps;

pub use dynamic::{StageCounts, StageInfo, DEFAULT_CACHED_STAGES};

/// Where [`Session::run_views`] hands each output: `(position among the outputs, dtype,
/// shape, bytes in the arena)`.
pub type OutputSink<'a> = dyn FnMut(usize, DType, &[usize], &[u8]) -> Result<()> + 'a;

/// A loaded model, ready to run.
pub struct Session<'e> {
    engine: &'e Engine,
    /// The graph with every dimension bound.
    pub graph: Graph,
    /// How the nodes were split across backends, with reasons.
    pub plan: PartitionPlan,
    /// Backend name of each partition of `plan`.
    pub partition_backends: Vec<String>,
    /// Where the arena tensors live and what that costs.
    pub arena_plan: ArenaPlan,
    /// What happened while loading (backends dropped, re-partitions), for the user.
    pub notes: Vec<String>,
    /// How many delegate calls failed and were run on the portable kernels instead.
    pub fallbacks: usize,
    /// Whether each run asks the plugins for their profile events (off by default: it
    /// costs two calls and some copies per partition per run).
    profiling: bool,
    /// Every step of the last run, timed, when profiling.
    timeline: Vec<StepTiming>,
    steps: Vec<ExecStep>,
    /// The control-flow nodes' runners, indexed by [`ExecStep::Control`].
    controls: Vec<Control<'e>>,
    slots: Vec<Slot>,
    shapes: Vec<Vec<usize>>,
    /// For each graph input, the delegate views (step, input) that read it where only
    /// delegates do: a run lends them the caller's buffer instead of copying it into the
    /// arena. `None` where a host node or control flow reads it, or it is also an output
    /// or listed twice (see [`lendable_inputs`]).
    lendable: Vec<Option<Vec<(usize, usize)>>>,
    /// For each graph output, the delegate output view (step, output) that writes it
    /// where nothing else reads it: [`Session::run_refs`] points that view at the
    /// `Tensor` it returns instead of copying the output out of the arena. `None` where
    /// a step reads it, or it is an input, listed twice, or the model has control flow
    /// (see [`lendable_outputs`]).
    lendable_out: Vec<Option<(usize, usize)>>,
    arena: Arena,
    /// Whether `arena` is shared with a [`crate::bounded::BoundedSession`], laid out by its
    /// plan at the bound.
    borrowed_arena: bool,
    /// For a model with a dynamic region (see `dynamic`), its stages, which then run the
    /// model: the fields above describe no nodes.
    staged: Option<Box<dynamic::Staged<'e>>>,
}

/// An arena planned once (at a dimension bound) for sessions specialised to smaller
/// bindings to reuse: its buffer and each arena tensor's offset, by tensor name.
pub(crate) struct ArenaReuse {
    pub layout: HashMap<String, usize>,
    pub arena: Arena,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Bytes at this arena offset.
    Arena(usize),
    /// A constant of the graph.
    Const,
    /// Lives only inside a delegate partition.
    Internal,
}

enum ExecStep {
    Host(NodeId),
    Delegate(Box<DelegateStep>),
    /// An index into `Session::controls`.
    Control(usize),
}

/// How a control-flow node runs.
pub(crate) struct Control<'e> {
    node: NodeId,
    /// An If's then and else branches as sessions, or why a branch cannot run for these
    /// input shapes (taking it is then an error); empty for a Loop, whose body runs on the
    /// reference interpreter.
    branches: Vec<std::result::Result<Session<'e>, String>>,
    /// The branch the last run took (0 then, 1 else), for the profile to show its steps.
    taken: Option<usize>,
}

/// The host memory one delegated partition holds, as its plugin reports it.
#[derive(Clone, Debug)]
pub struct PartitionMemory {
    pub partition: usize,
    pub backend: String,
    /// `None` where the plugin does not report memory.
    pub memory: Option<abi::MemoryInfo>,
    /// The blob the host keeps for the plugin to read in place (ABI 1.2
    /// `init_retained`); 0 when the plugin copied what it needed.
    pub kept_blob_bytes: usize,
}

struct DelegateStep {
    partition: usize,
    backend: String,
    nodes: Vec<NodeId>,
    /// The tensor each of `in_views` shows.
    inputs: Vec<TensorId>,
    outputs: Vec<TensorId>,
    exec: PluginExecutable,
    in_views: Vec<abi::TensorView>,
    out_views: Vec<abi::TensorView>,
    // The views point into these; they are never resized after construction.
    _in_shapes: Vec<Vec<i64>>,
    out_shapes: Vec<[i64; abi::MAX_RANK]>,
    expected_out: Vec<[i64; abi::MAX_RANK]>,
    /// The plugin's events of the last run, when profiling.
    events: Vec<ProfileEvent>,
    /// Whether the last run of this partition failed in the plugin and ran on the
    /// portable kernels instead.
    fell_back: bool,
}

/// What one partition's plugin reported about the last run (`baton run --profile`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionProfile {
    /// The partition's index in the plan.
    pub partition: usize,
    /// The backend that ran it.
    pub backend: String,
    /// The plugin's events, in the order it ran them; empty when it reports none (a 1.0
    /// plugin, or one without profiling) or the run fell back to the portable kernels.
    pub events: Vec<ProfileEvent>,
}

impl<'e> Session<'e> {
    /// Turns collecting the plugins' profile events on or off for the following runs.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
        if let Some(s) = &mut self.staged {
            s.set_profiling(on);
        }
        for c in &mut self.controls {
            for b in c.branches.iter_mut().flatten() {
                b.set_profiling(on);
            }
        }
    }

    /// Every step of the last run (host nodes, delegated partitions with their plugins'
    /// events, control flow) with its start and wall time, as the host measured them; empty
    /// unless [`Session::set_profiling`] is on.
    pub fn timeline(&self) -> &[StepTiming] {
        match &self.staged {
            Some(s) => s.timeline(),
            None => &self.timeline,
        }
    }

    /// The profile of the last run, one entry per delegated partition in execution order
    /// (empty unless [`Session::set_profiling`] is on).
    pub fn profile(&self) -> Vec<PartitionProfile> {
        if !self.profiling {
            return Vec::new();
        }
        if let Some(s) = &self.staged {
            return s.profile();
        }
        self.steps
            .iter()
            .filter_map(|s| match s {
                ExecStep::Delegate(d) => Some(PartitionProfile {
                    partition: d.partition,
                    backend: d.backend.clone(),
                    events: d.events.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// Loads `graph` on `engine`. `bindings` gives values to symbolic dimensions.
    ///
    /// This is [`program::compile`] followed by [`program::load`] with the program kept in
    /// memory: the same path as a `.baton` file, so both give the same outputs.
    pub fn new(
        engine: &'e Engine,
        graph: &Graph,
        bindings: &BTreeMap<String, usize>,
    ) -> Result<Session<'e>> {
        Session::new_reusing(engine, graph, bindings, None)
    }

    /// [`Session::new`] for a model with value inputs (inputs whose values decide shapes,
    /// see [`baton_reference::values`]): each is made a constant holding its entry of
    /// `values` (by input name; other entries are ignored, so all of a run's inputs may be
    /// given) before the model is specialised. The session keeps them as inputs and
    /// refuses a run that gives other values ([`crate::SpecializingSession`] builds one
    /// session per set of values instead).
    pub fn with_values(
        engine: &'e Engine,
        graph: &Graph,
        bindings: &BTreeMap<String, usize>,
        values: &BTreeMap<String, Tensor>,
    ) -> Result<Session<'e>> {
        let bound = crate::specialize::bind_values(graph, values)?;
        Session::new_reusing(engine, &bound, bindings, None)
    }

    /// [`Session::new`], placing the arena tensors at the offsets of `reuse` inside its
    /// shared buffer when that layout is valid for this binding (every tensor found,
    /// fitting, and no two tensors live at the same step sharing bytes); otherwise the
    /// session plans and owns an arena of its own.
    pub(crate) fn new_reusing(
        engine: &'e Engine,
        graph: &Graph,
        bindings: &BTreeMap<String, usize>,
        reuse: Option<ArenaReuse>,
    ) -> Result<Session<'e>> {
        if let Some(staged) = Session::staged(engine, graph, bindings)? {
            return Ok(staged);
        }
        let program = program::compile_specialised(engine, graph, bindings)?;
        let arena = match reuse {
            Some(r) => ArenaChoice::Lent(r),
            None => ArenaChoice::Planned,
        };
        program::load_with(engine, program, &program::LoadOptions::default(), arena)
    }

    /// A session run in stages when `graph` has a dynamic region (a node whose output
    /// extents depend on values, see `dynamic`) once `bindings` are applied; `None` when
    /// every shape is static. A model with value inputs not yet bound to values is
    /// specialised per value instead ([`Session::with_values`]), so it is never staged.
    fn staged(
        engine: &'e Engine,
        graph: &Graph,
        bindings: &BTreeMap<String, usize>,
    ) -> Result<Option<Session<'e>>> {
        if !crate::values::value_input_names(graph).is_empty() {
            return Ok(None);
        }
        let (g, node, rest) = match baton_reference::split(graph, bindings) {
            Ok(baton_reference::Split::Dynamic { graph, node, rest }) => (graph, node, rest),
            // Static, or an error `compile_specialised` reports in its own words.
            _ => return Ok(None),
        };
        let staged = dynamic::Staged::new(engine, g.clone(), node, rest)?;
        let n = g.tensors.len();
        Ok(Some(Session {
            engine,
            graph: g,
            plan: PartitionPlan {
                partitions: Vec::new(),
                nodes: Vec::new(),
            },
            partition_backends: Vec::new(),
            arena_plan: ArenaPlan {
                offsets: Vec::new(),
                arena_size: 0,
                naive_size: 0,
                lower_bound: 0,
            },
            notes: Vec::new(),
            fallbacks: 0,
            profiling: false,
            timeline: Vec::new(),
            steps: Vec::new(),
            controls: Vec::new(),
            slots: vec![Slot::Internal; n],
            shapes: vec![Vec::new(); n],
            lendable: Vec::new(),
            lendable_out: Vec::new(),
            arena: Arena::new(AlignedBytes::try_zeroed(0).expect("an empty buffer")),
            borrowed_arena: false,
            staged: Some(Box::new(staged)),
        }))
    }

    /// The stages of a model with dynamic regions, outermost first (those nested in the
    /// rest as of its last run); empty for a static model.
    pub fn stages(&self) -> Vec<StageInfo> {
        self.staged.as_ref().map_or_else(Vec::new, |s| s.info())
    }

    /// For a staged model, the sessions its stages hold, each with a label: the static
    /// prefix's and the rest's as compiled for the last run's shapes (nested stages are
    /// those sessions' own); empty for a static model.
    pub fn stage_sessions(&self) -> Vec<(String, &Session<'e>)> {
        self.staged.as_ref().map_or_else(Vec::new, |s| s.sessions())
    }

    /// The stages of a staged model, to run or check them.
    pub(crate) fn staged_mut(&mut self) -> Option<&mut dynamic::Staged<'e>> {
        self.staged.as_deref_mut()
    }

    /// The sessions this one holds: its If branches' and its stages'.
    fn sub_sessions(&self) -> Vec<&Session<'e>> {
        let branches = self.branches().into_iter().filter_map(|(_, b)| b.ok());
        let stages = self.stage_sessions().into_iter().map(|(_, s)| s);
        branches.chain(stages).collect()
    }

    /// Bytes of the constants (the weights the session holds or maps) and of the arenas,
    /// the If branches' sessions included: what a load must hold before any plugin's own.
    pub fn held_bytes(&self) -> (usize, usize) {
        let mut weights: usize = (0..self.graph.tensors.len())
            .filter(|&t| self.slots[t] == Slot::Const)
            .map(|t| const_bytes(&self.graph, t).len())
            .sum();
        let mut arena = self.arena_plan.arena_size;
        for b in self.sub_sessions() {
            let (w, a) = b.held_bytes();
            weights += w;
            arena += a;
        }
        (weights, arena)
    }

    /// What each delegated partition's plugin holds in host memory (ABI 1.2 `memory`),
    /// in partition order, the If branches' sessions included; `None` where the plugin
    /// does not say (an older plugin, or one that does not know).
    pub fn delegate_memory(&self) -> Vec<PartitionMemory> {
        let mut all: Vec<PartitionMemory> = self
            .steps
            .iter()
            .filter_map(|s| match s {
                ExecStep::Delegate(d) => Some(PartitionMemory {
                    partition: d.partition,
                    backend: d.backend.clone(),
                    memory: d.exec.memory(),
                    kept_blob_bytes: d.exec.kept_blob_bytes(),
                }),
                _ => None,
            })
            .collect();
        for b in self.sub_sessions() {
            all.extend(b.delegate_memory());
        }
        all
    }

    /// The engine this session runs on.
    pub(crate) fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// The bytes of constant `t` of `self.graph`, wherever they are held.
    pub(crate) fn constant_bytes(&self, t: TensorId) -> &[u8] {
        const_bytes(&self.graph, t)
    }

    /// Shape of each graph input, in order.
    pub fn input_shapes(&self) -> Vec<&[usize]> {
        self.graph
            .inputs
            .iter()
            .map(|&t| self.shapes[t].as_slice())
            .collect()
    }

    /// Runs the model. `inputs` follow the graph's input order.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        self.run_refs(&refs)
    }

    /// [`Session::run`] over borrowed inputs (streams pass their state without copying it).
    ///
    /// An output that one delegate writes and nothing else reads is written by it straight
    /// into the `Tensor` returned (allocated zero-filled, so that a plugin that leaves
    /// bytes unwritten exposes zeros, not old memory); the others are copied out of the
    /// arena. A large output (a segmentation map, an image) was otherwise written to the
    /// arena and copied once more, in one thread.
    pub fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let views: Vec<TensorRef<'_>> = inputs.iter().map(|t| t.view()).collect();
        let mut lent = self.lend_outputs();
        let mut outputs = Vec::with_capacity(self.graph.outputs.len());
        let ran = self.run_views(&views, &mut |pos, dtype, shape, bytes| {
            outputs.push(match lent[pos].take() {
                Some(t) => t,
                None => Tensor::from_bytes(dtype, shape, bytes),
            });
            Ok(())
        });
        // Whatever happened, no view keeps a pointer to the tensors handed out.
        self.unlend_outputs();
        ran?;
        Ok(outputs)
    }

    /// A zero-filled `Tensor` for each output that may be lent (see
    /// [`Session::lendable_out`]), its delegate view pointed at it; `None` for the others
    /// (and for all of a staged model's, whose stages run as sessions of their own).
    fn lend_outputs(&mut self) -> Vec<Option<Tensor>> {
        let mut lent = Vec::with_capacity(self.graph.outputs.len());
        for (k, &t) in self.graph.outputs.iter().enumerate() {
            let at = self.lendable_out.get(k).copied().flatten();
            let tensor = at.filter(|_| self.staged.is_none()).and_then(|(i, j)| {
                let ExecStep::Delegate(d) = &mut self.steps[i] else {
                    return None;
                };
                let dtype = self.graph.tensors[t].dtype;
                let mut tensor = Tensor::try_zeros(dtype, &self.shapes[t])?;
                let data = tensor.data.as_mut_slice();
                if data.len() != d.out_views[j].byte_len as usize {
                    return None;
                }
                d.out_views[j].data = data.as_mut_ptr().cast();
                Some(tensor)
            });
            lent.push(tensor);
        }
        lent
    }

    /// Points every lent output view back at its tensor's arena bytes.
    fn unlend_outputs(&mut self) {
        let arena = self.arena.clone();
        let mut buf = arena.lock();
        let base = buf.as_mut_slice().as_mut_ptr();
        for (at, &t) in self.lendable_out.iter().zip(&self.graph.outputs) {
            let (Some((i, j)), Slot::Arena(off)) = (*at, self.slots[t]) else {
                continue;
            };
            if let ExecStep::Delegate(d) = &mut self.steps[i] {
                // SAFETY: in bounds of the arena by construction of the plan.
                d.out_views[j].data = unsafe { base.add(off) }.cast();
            }
        }
    }

    /// Runs the model on borrowed input bytes and hands each output's bytes, in graph
    /// order, to `sink` as `(position, dtype, shape, bytes)` straight from the arena.
    ///
    /// This is the path of the embedding APIs (C, Python): the caller's input buffers are
    /// read once, and each output is copied once, from the arena into wherever `sink` puts
    /// it (a caller-owned buffer), with no tensor allocated in between. An input that only
    /// delegates read, given 64-byte aligned as every `Tensor` is, is read by them in
    /// place for the run (its views are pointed back at the arena before this returns);
    /// others are copied into the arena. An error from `sink` ends the run with that error.
    pub fn run_views(&mut self, inputs: &[TensorRef<'_>], sink: &mut OutputSink<'_>) -> Result<()> {
        if inputs.len() != self.graph.inputs.len() {
            return Err(HostError::InputCount {
                given: inputs.len(),
                expected: self.graph.inputs.len(),
                state: 0,
            });
        }
        if let Some(staged) = &mut self.staged {
            for (&t, given) in self.graph.inputs.iter().zip(inputs) {
                let decl = &self.graph.tensors[t];
                let shape = decl.static_shape().unwrap_or_default();
                let len = byte_len(decl.dtype, &shape);
                if given.dtype != decl.dtype || given.shape != shape || given.data.len() != len {
                    return Err(HostError::input(
                        &decl.name,
                        InputProblem::WrongType {
                            expected: TensorType::of(decl.dtype, &shape),
                            got: TensorType::of(given.dtype, given.shape),
                        },
                    ));
                }
            }
            let outputs = staged.run(inputs)?;
            for (k, t) in outputs.iter().enumerate() {
                sink(k, t.dtype, &t.shape, t.bytes())?;
            }
            return Ok(());
        }
        // Held for the whole run: the delegates' views use the bytes too (see `Arena`).
        let arena = self.arena.clone();
        let mut buf = arena.lock();
        let ran = self.run_lending(inputs, &mut buf);
        // Whatever happened, no view keeps a pointer to the caller's buffers.
        self.unlend(&mut buf);
        ran?;
        for (pos, &t) in self.graph.outputs.iter().enumerate() {
            let dtype = self.graph.tensors[t].dtype;
            sink(pos, dtype, &self.shapes[t], self.bytes(t, &buf))?;
        }
        Ok(())
    }

    /// Checks and places the inputs (lent or copied) and runs every step.
    fn run_lending(&mut self, inputs: &[TensorRef<'_>], buf: &mut AlignedBytes) -> Result<()> {
        for (k, (&t, given)) in self.graph.inputs.iter().zip(inputs).enumerate() {
            let decl = &self.graph.tensors[t];
            // A view's bytes are not tied to its shape the way a `Tensor`'s are: a buffer
            // of another length is refused rather than read past.
            let len = byte_len(decl.dtype, &self.shapes[t]);
            if given.dtype != decl.dtype || given.shape != self.shapes[t] {
                return Err(HostError::input(
                    &decl.name,
                    InputProblem::WrongType {
                        expected: TensorType::of(decl.dtype, &self.shapes[t]),
                        got: TensorType::of(given.dtype, given.shape),
                    },
                ));
            }
            if given.data.len() != len {
                return Err(HostError::input(
                    &decl.name,
                    InputProblem::BufferSize {
                        expected: len,
                        got: given.data.len(),
                    },
                ));
            }
            match self.slots[t] {
                Slot::Arena(_)
                    if lend(self.lendable[k].as_deref(), &mut self.steps, given.data) => {}
                Slot::Arena(off) => {
                    buf.as_mut_slice()[off..off + len].copy_from_slice(given.data);
                }
                // A value input the session was specialised for: the run must give the
                // same values, or the shapes planned would be wrong.
                Slot::Const if given.data != const_bytes(&self.graph, t) => {
                    let bytes = const_bytes(&self.graph, t);
                    let expected = Tensor::from_bytes(decl.dtype, &self.shapes[t], bytes);
                    return Err(HostError::input(
                        &decl.name,
                        InputProblem::ValueChanged {
                            expected: value_list(&expected),
                            got: value_list(&Tensor::from_bytes(
                                given.dtype,
                                given.shape,
                                given.data,
                            )),
                        },
                    ));
                }
                _ => {}
            }
        }
        if self.profiling {
            self.run_steps_timed(buf)
        } else {
            (0..self.steps.len()).try_for_each(|i| self.run_step(i, buf))
        }
    }

    /// Points every lent view back at the input's arena bytes.
    fn unlend(&mut self, buf: &mut AlignedBytes) {
        let base = buf.as_mut_slice().as_mut_ptr();
        for (views, &t) in self.lendable.iter().zip(&self.graph.inputs) {
            let (Some(views), Slot::Arena(off)) = (views, self.slots[t]) else {
                continue;
            };
            for &(i, j) in views {
                if let ExecStep::Delegate(d) = &mut self.steps[i] {
                    // SAFETY: in bounds of the arena by construction of the plan.
                    d.in_views[j].data = unsafe { base.add(off) }.cast();
                }
            }
        }
    }

    /// Offset of every arena tensor, by name: the layout other bindings can reuse.
    pub(crate) fn arena_layout(&self) -> HashMap<String, usize> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(t, s)| match s {
                Slot::Arena(off) => Some((self.graph.tensors[t].name.clone(), *off)),
                _ => None,
            })
            .collect()
    }

    /// Whether the arena is a lent buffer (see [`Session::new_reusing`]).
    pub(crate) fn borrows_arena(&self) -> bool {
        self.borrowed_arena
    }

    /// The handle of the buffer the arena tensors live in, for a bounded session to share
    /// with the sessions it specialises.
    pub(crate) fn arena(&self) -> &Arena {
        &self.arena
    }

    /// Estimated floating-point operations each target runs ([`crate::flops`]), counted
    /// as [`Session::nodes_per_backend`] counts nodes.
    pub fn flops_per_backend(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for e in &self.plan.nodes {
            let k = match &e.decision {
                partitioner::Decision::Delegated { backend, .. } => backend.clone(),
                partitioner::Decision::Host => "host".to_string(),
            };
            let flops = crate::flops::node_flops(&self.graph, &self.graph.nodes[e.node]);
            *m.entry(k).or_insert(0) += flops;
        }
        for b in self.sub_sessions() {
            for (k, v) in b.flops_per_backend() {
                *m.entry(k).or_insert(0) += v;
            }
        }
        if let Some(s) = &self.staged {
            *m.entry(s.node_target().to_string()).or_insert(0) += s.node_flops();
        }
        m
    }

    /// Number of nodes each target runs ("host" for the portable kernels), the nodes of
    /// every If branch included: as planned, except that a partition whose plugin failed
    /// in the last run and was run on the portable kernels instead counts as "host".
    pub fn nodes_per_backend(&self) -> BTreeMap<String, usize> {
        if let Some(s) = &self.staged {
            return s.nodes_per_backend();
        }
        let fell_back: Vec<usize> = self
            .steps
            .iter()
            .filter_map(|s| match s {
                ExecStep::Delegate(d) if d.fell_back => Some(d.partition),
                _ => None,
            })
            .collect();
        let mut m = BTreeMap::new();
        for e in &self.plan.nodes {
            let k = match &e.decision {
                partitioner::Decision::Delegated { partition, .. }
                    if fell_back.contains(partition) =>
                {
                    "host".to_string()
                }
                partitioner::Decision::Delegated { backend, .. } => backend.clone(),
                partitioner::Decision::Host => "host".to_string(),
            };
            *m.entry(k).or_insert(0) += 1;
        }
        for (_, branch) in self.branches() {
            let Ok(branch) = branch else {
                continue;
            };
            for (k, v) in branch.nodes_per_backend() {
                *m.entry(k).or_insert(0) += v;
            }
        }
        m
    }

    /// The sessions of the If branches, each with a label (`node If_0 (If), then_branch`),
    /// or why a branch cannot run for these input shapes.
    pub fn branches(&self) -> Vec<(String, std::result::Result<&Session<'e>, &str>)> {
        let mut out = Vec::new();
        for c in &self.controls {
            let node = &self.graph.nodes[c.node];
            for (name, b) in ["then_branch", "else_branch"].iter().zip(&c.branches) {
                let b = b.as_ref().map_err(String::as_str);
                out.push((format!("node {}, {name}", node.label()), b));
            }
        }
        out
    }

    /// The bytes of `t`: in `arena` (the locked buffer of this session's arena), a
    /// constant, or none for a partition's internal tensor.
    fn bytes<'s>(&'s self, t: TensorId, arena: &'s AlignedBytes) -> &'s [u8] {
        let len = byte_len(self.graph.tensors[t].dtype, &self.shapes[t]);
        match self.slots[t] {
            Slot::Arena(off) => &arena.as_slice()[off..off + len],
            Slot::Const => const_bytes(&self.graph, t),
            Slot::Internal => &[],
        }
    }
}

/// `[1, -1]`: a value input's values as a user writes them.
fn value_list(t: &Tensor) -> String {
    let v: Vec<String> = t.to_f64().iter().map(|x| x.to_string()).collect();
    format!("[{}]", v.join(", "))
}

fn byte_len(dtype: baton_delegate_api::DType, shape: &[usize]) -> usize {
    shape.iter().product::<usize>() * dtype.size()
}

fn const_bytes(graph: &Graph, t: TensorId) -> &[u8] {
    match &graph.tensors[t].data {
        Some(Storage::Inline(d)) => d.bytes(),
        _ => &[],
    }
}

/// Loads the branches of every If as sessions of their own (a Loop needs nothing): from
/// the program's compiled branches, or compiled now where the program has none.
pub(crate) fn load_controls<'e>(
    engine: &'e Engine,
    graph: &Graph,
    mut compiled: BTreeMap<(usize, usize), program::Program>,
    options: &program::LoadOptions,
) -> Result<Vec<Control<'e>>> {
    let mut controls = Vec::new();
    for (n, node) in graph.nodes.iter().enumerate() {
        if !node.op.is_control_flow() {
            continue;
        }
        let mut branches = Vec::new();
        if node.op == OpKind::If {
            for (k, name) in ["then_branch", "else_branch"].iter().enumerate() {
                let branch = node.attr_graph(name).ok_or_else(|| {
                    HostError::node(node, NodeProblem::MissingSubgraph { attr: name })
                })?;
                let loaded = match compiled.remove(&(n, k)) {
                    Some(p) => program::load(engine, p, options),
                    None => Session::new(engine, branch, &BTreeMap::new()),
                };
                branches.push(loaded.map_err(|e| e.to_string()));
            }
            if branches.iter().all(|b| b.is_err()) {
                let reasons: Vec<String> = branches.into_iter().filter_map(|b| b.err()).collect();
                return Err(HostError::node(
                    node,
                    NodeProblem::NoBranchLoads { reasons },
                ));
            }
        }
        controls.push(Control {
            node: n,
            branches,
            taken: None,
        });
    }
    Ok(controls)
}

/// An initialised partition and where its subgraph's inputs and outputs live in the graph.
pub(crate) struct Instantiated {
    pub exec: PluginExecutable,
    pub sub_inputs: Vec<TensorId>,
    pub sub_outputs: Vec<TensorId>,
}

/// Where a session's arena comes from.
pub(crate) enum ArenaChoice {
    /// Planned now.
    Planned,
    /// The program's stored layout, used if it is valid for this graph and plan.
    Stored(MemoryLayout),
    /// A buffer lent by a bounded session (see [`Session::new_reusing`]).
    Lent(ArenaReuse),
}

/// Builds the session: places the arena, prepares every delegate call's views.
pub(crate) fn assemble<'e>(
    engine: &'e Engine,
    graph: Graph,
    plan: PartitionPlan,
    delegates: Vec<Instantiated>,
    controls: Vec<Control<'e>>,
    mut notes: Vec<String>,
    arena: ArenaChoice,
) -> Result<Session<'e>> {
    let partition_backends = plan.partitions.iter().map(|p| p.backend.clone()).collect();
    let shapes: Vec<Vec<usize>> = graph
        .tensors
        .iter()
        .map(|t| t.static_shape().expect("specialized"))
        .collect();
    let schedule = plan.schedule(&graph);
    let (placed, lifetimes) = arena_tensors(&graph, &plan);
    let nt = graph.tensors.len();
    let mut slots = vec![Slot::Internal; nt];
    for (t, decl) in graph.tensors.iter().enumerate() {
        if decl.is_const() {
            slots[t] = Slot::Const;
        }
    }
    let mut borrowed_arena = false;
    let chosen = match arena {
        ArenaChoice::Planned => None,
        ArenaChoice::Stored(m) => {
            let offsets: Vec<usize> = m.placed.iter().map(|&(_, o)| o).collect();
            let same = m.placed.iter().map(|&(t, _)| t).eq(placed.iter().copied());
            if same && memory::is_valid(&lifetimes, &offsets, m.arena_size) {
                Some((
                    memory::evaluate(&lifetimes, offsets, m.arena_size),
                    Arena::new(new_arena(engine, &graph, m.arena_size)?),
                ))
            } else {
                notes.push("the program's arena layout does not fit its plan; planned anew".into());
                None
            }
        }
        // A lent layout is used only if it is valid for these lifetimes and sizes.
        ArenaChoice::Lent(r) => {
            let offsets: Option<Vec<usize>> = placed
                .iter()
                .map(|&t| r.layout.get(&graph.tensors[t].name).copied())
                .collect();
            match offsets {
                Some(o) if memory::is_valid(&lifetimes, &o, r.arena.len()) => {
                    borrowed_arena = true;
                    Some((memory::evaluate(&lifetimes, o, r.arena.len()), r.arena))
                }
                _ => {
                    notes.push(
                        "the arena layout planned at the dimension bounds does not fit this binding; planned anew"
                            .into(),
                    );
                    None
                }
            }
        }
    };
    let (arena_plan, arena) = match chosen {
        Some(l) => l,
        None => {
            let p = memory::plan(&lifetimes);
            let a = Arena::new(new_arena(engine, &graph, p.arena_size)?);
            (p, a)
        }
    };
    for (&t, &off) in placed.iter().zip(&arena_plan.offsets) {
        slots[t] = Slot::Arena(off);
    }

    // The buffer never moves while the handle lives (see `Arena`): the views stay valid.
    let base = arena.lock().as_mut_slice().as_mut_ptr();
    let mut delegates: Vec<Option<Instantiated>> = delegates.into_iter().map(Some).collect();
    let steps = schedule
        .iter()
        .map(|s| match s {
            Step::Node(n) if graph.nodes[*n].op.is_control_flow() => ExecStep::Control(
                controls
                    .iter()
                    .position(|c| c.node == *n)
                    .expect("every control-flow node has a runner"),
            ),
            Step::Node(n) => ExecStep::Host(*n),
            Step::Partition(p) => {
                let inst = delegates[*p].take().expect("each partition scheduled once");
                let view = |t: TensorId, shape: &[i64]| {
                    let decl = &graph.tensors[t];
                    let len = byte_len(decl.dtype, &shapes[t]);
                    let ptr = match slots[t] {
                        // SAFETY: in bounds of the arena by construction of the plan.
                        Slot::Arena(off) => unsafe { base.add(off) },
                        Slot::Const => const_bytes(&graph, t).as_ptr() as *mut u8,
                        Slot::Internal => std::ptr::null_mut(),
                    };
                    view_of(decl.dtype.code(), ptr, len, shape, decl.quant.as_ref())
                };
                let in_shapes: Vec<Vec<i64>> = inst
                    .sub_inputs
                    .iter()
                    .map(|&t| shapes[t].iter().map(|&d| d as i64).collect())
                    .collect();
                let in_views = inst
                    .sub_inputs
                    .iter()
                    .zip(&in_shapes)
                    .map(|(&t, s)| view(t, s))
                    .collect();
                let expected_out: Vec<[i64; abi::MAX_RANK]> = inst
                    .sub_outputs
                    .iter()
                    .map(|&t| {
                        let mut a = [0i64; abi::MAX_RANK];
                        for (d, &v) in a.iter_mut().zip(&shapes[t]) {
                            *d = v as i64;
                        }
                        a
                    })
                    .collect();
                let out_shapes = expected_out.clone();
                let out_views = inst
                    .sub_outputs
                    .iter()
                    .zip(&out_shapes)
                    .map(|(&t, s)| view(t, &s[..shapes[t].len()]))
                    .collect();
                ExecStep::Delegate(Box::new(DelegateStep {
                    partition: *p,
                    backend: plan.partitions[*p].backend.clone(),
                    nodes: plan.partitions[*p].nodes.clone(),
                    inputs: inst.sub_inputs,
                    outputs: inst.sub_outputs,
                    exec: inst.exec,
                    in_views,
                    out_views,
                    _in_shapes: in_shapes,
                    out_shapes,
                    expected_out,
                    events: Vec::new(),
                    fell_back: false,
                }))
            }
        })
        .collect::<Vec<ExecStep>>();
    let lendable = lendable_inputs(&graph, &slots, &steps);
    let lendable_out = lendable_outputs(&graph, &slots, &steps);
    Ok(Session {
        engine,
        graph,
        plan,
        partition_backends,
        arena_plan,
        notes,
        fallbacks: 0,
        profiling: false,
        timeline: Vec::new(),
        steps,
        controls,
        slots,
        shapes,
        lendable,
        lendable_out,
        arena,
        borrowed_arena,
        staged: None,
    })
}

/// Points `views` (an input's entry of [`Session::lendable`]) at `data` for this run,
/// where the input may be lent and `data` has the alignment views promise; whether it did.
/// `data` has the input's length (checked by the caller).
fn lend(views: Option<&[(usize, usize)]>, steps: &mut [ExecStep], data: &[u8]) -> bool {
    let Some(views) = views else {
        return false;
    };
    if !(data.as_ptr() as usize).is_multiple_of(abi::DATA_ALIGNMENT) {
        return false;
    }
    for &(i, j) in views {
        if let ExecStep::Delegate(d) = &mut steps[i] {
            // Read-only to the plugin (ABI): `mut` only because outputs share the type.
            d.in_views[j].data = data.as_ptr() as *mut std::ffi::c_void;
        }
    }
    true
}

/// Copies between the arena and the buffers lent to `views` (showing `tensors`) for this
/// run, where a view does not point at its tensor's arena bytes: into the arena
/// (`into_arena`: lent inputs, which a partition's fallback to the portable kernels reads
/// there) or out of it (lent outputs, which the fallback wrote there).
fn copy_lent(
    views: &[abi::TensorView],
    tensors: &[TensorId],
    slots: &[Slot],
    buf: &mut AlignedBytes,
    into_arena: bool,
) {
    let base = buf.as_mut_slice().as_mut_ptr();
    for (v, &t) in views.iter().zip(tensors) {
        let Slot::Arena(off) = slots[t] else {
            continue;
        };
        // SAFETY: `off` is in bounds of the arena (the plan); a view not pointing there is
        // lent, `byte_len` bytes (the slot's length) of the caller's input or of the
        // `Tensor` `run_refs` returns, alive for the run.
        unsafe {
            let (arena, lent) = (base.add(off), v.data.cast::<u8>());
            if lent != arena {
                let n = v.byte_len as usize;
                match into_arena {
                    true => std::ptr::copy_nonoverlapping(lent.cast_const(), arena, n),
                    false => std::ptr::copy_nonoverlapping(arena.cast_const(), lent, n),
                }
            }
        }
    }
}

/// For each graph output, the delegate output view that may be lent the returned
/// `Tensor`'s buffer (see [`Session::lendable_out`]): an arena tensor that a delegate
/// writes and no step reads, once among the outputs and not an input. A model with
/// control flow lends nothing (a branch may read an outer tensor implicitly).
fn lendable_outputs(
    graph: &Graph,
    slots: &[Slot],
    steps: &[ExecStep],
) -> Vec<Option<(usize, usize)>> {
    let control = steps.iter().any(|s| matches!(s, ExecStep::Control(_)));
    graph
        .outputs
        .iter()
        .map(|&t| {
            if !lend_candidate(t, &graph.outputs, &graph.inputs, slots, control) {
                return None;
            }
            let mut writer = None;
            for (i, step) in steps.iter().enumerate() {
                match step {
                    ExecStep::Host(n) if graph.nodes[*n].inputs.contains(&t) => return None,
                    ExecStep::Host(n) if graph.nodes[*n].outputs.contains(&t) => return None,
                    ExecStep::Delegate(d) if d.inputs.contains(&t) => return None,
                    ExecStep::Delegate(d) => {
                        if let Some(j) = d.outputs.iter().position(|&u| u == t) {
                            writer = Some((i, j));
                        }
                    }
                    _ => {}
                }
            }
            writer
        })
        .collect()
}

/// Whether graph input or output `t` may be lent a buffer at all: listed once in `own`
/// (the inputs or the outputs) and not in `other`, held in the arena, in a model without
/// control flow.
fn lend_candidate(
    t: TensorId,
    own: &[TensorId],
    other: &[TensorId],
    slots: &[Slot],
    control: bool,
) -> bool {
    let once = own.iter().filter(|&&u| u == t).count() == 1;
    !control && once && !other.contains(&t) && matches!(slots[t], Slot::Arena(_))
}

/// For each graph input, the delegate views that may be lent the caller's buffer (see
/// [`Session::lendable`]): an arena input read by delegates alone, once among the inputs
/// and not an output. Inputs are read-only to plugins (ABI), so nothing writes the lent
/// buffer; the arena bytes that would have held the input are simply not used. A model
/// with control flow lends nothing (a branch may read an outer tensor implicitly).
fn lendable_inputs(
    graph: &Graph,
    slots: &[Slot],
    steps: &[ExecStep],
) -> Vec<Option<Vec<(usize, usize)>>> {
    let control = steps.iter().any(|s| matches!(s, ExecStep::Control(_)));
    graph
        .inputs
        .iter()
        .map(|&t| {
            if !lend_candidate(t, &graph.inputs, &graph.outputs, slots, control) {
                return None;
            }
            let mut views = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                match step {
                    ExecStep::Host(n) if graph.nodes[*n].inputs.contains(&t) => return None,
                    ExecStep::Delegate(d) => views.extend(
                        d.inputs
                            .iter()
                            .enumerate()
                            .filter(|&(_, &u)| u == t)
                            .map(|(j, _)| (i, j)),
                    ),
                    _ => {}
                }
            }
            (!views.is_empty()).then_some(views)
        })
        .collect()
}

/// The arena of `bytes` for `graph`, within the config's `max_arena_bytes` and allocated
/// fallibly (its size comes from the model and the bindings).
fn new_arena(engine: &Engine, graph: &Graph, bytes: usize) -> Result<AlignedBytes> {
    let what = format!("graph '{}'", graph.name);
    let limits = engine.config.limits();
    limits.arena(&what, Some(bytes))?;
    AlignedBytes::try_zeroed(bytes).ok_or_else(|| HostError::TooLarge {
        what: format!("{what}: the arena (the allocation failed)"),
        needed: Some(bytes),
        limit: limits.max_arena_bytes,
        key: "max_arena_bytes",
    })
}
