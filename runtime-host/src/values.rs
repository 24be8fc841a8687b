//! Sessions specialised per value: a model whose value inputs (inputs whose values decide
//! shapes, see [`baton_reference::values`]) change from run to run.
//!
//! A [`Session`] is specialised for one set of values, and refuses a run that gives
//! others. A [`SpecializingSession`] keeps one session per key — the dimensions the inputs
//! bind and the values of the value inputs — for the most recently used keys, as
//! [`crate::BoundedSession`] does per binding, so a stream of alternating values does not
//! recompile each run, and a run is never served by a session made for other values.

use std::collections::BTreeMap;

pub use baton_reference::values::{value_input_names, value_inputs, MAX_VALUE_ELEMENTS};

use baton_delegate_api::{DType, Graph, Tensor, TensorId};

use crate::engine::Engine;
use crate::error::{HostError, Result};
use crate::exec::Session;
use crate::inputs;

/// Specialised sessions kept by default (see [`SpecializingSession::with_capacity`]).
pub const DEFAULT_CACHED_SPECIALIZATIONS: usize = 8;

/// What a session is specialised for: the bound dimensions, and the dtype, shape and
/// bytes of each value input (in input order).
type Key = (BTreeMap<String, usize>, Vec<(DType, Vec<usize>, Vec<u8>)>);

/// A model run on any inputs, specialised (and compiled) once per key (see the module
/// docs).
pub struct SpecializingSession<'e> {
    engine: &'e Engine,
    graph: Graph,
    /// The value inputs' positions among the graph inputs.
    value_positions: Vec<usize>,
    /// Specialised sessions, least recently used first.
    cache: Vec<(Key, Session<'e>)>,
    capacity: usize,
    specializations: usize,
}

impl<'e> SpecializingSession<'e> {
    /// A session for `graph`; nothing is compiled until the first run.
    pub fn new(engine: &'e Engine, graph: &Graph) -> SpecializingSession<'e> {
        Self::with_capacity(engine, graph, DEFAULT_CACHED_SPECIALIZATIONS)
    }

    /// [`SpecializingSession::new`] keeping at most `capacity` (≥ 1) specialised sessions.
    pub fn with_capacity(
        engine: &'e Engine,
        graph: &Graph,
        capacity: usize,
    ) -> SpecializingSession<'e> {
        let value_inputs: Vec<TensorId> = baton_reference::values::value_inputs(graph);
        let value_positions = graph
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, t)| value_inputs.contains(t))
            .map(|(k, _)| k)
            .collect();
        SpecializingSession {
            engine,
            graph: graph.clone(),
            value_positions,
            cache: Vec::new(),
            capacity: capacity.max(1),
            specializations: 0,
        }
    }

    /// The names of the model's value inputs, in input order.
    pub fn value_inputs(&self) -> Vec<String> {
        self.value_positions
            .iter()
            .map(|&k| self.graph.tensors[self.graph.inputs[k]].name.clone())
            .collect()
    }

    /// How many sessions have been specialised (compiled) so far.
    pub fn specializations(&self) -> usize {
        self.specializations
    }

    /// Runs the model on `inputs` (graph input order), with the session specialised for
    /// their dimensions and values, built on a miss.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.session_for(inputs)?.run(inputs)
    }

    /// The session specialised for `inputs` (graph input order), most recently used;
    /// built on a miss.
    pub fn session_for(&mut self, inputs: &[Tensor]) -> Result<&mut Session<'e>> {
        if inputs.len() != self.graph.inputs.len() {
            return Err(HostError::InputCount {
                given: inputs.len(),
                expected: self.graph.inputs.len(),
                state: 0,
            });
        }
        let bindings = inputs::bindings(&self.graph, inputs);
        let values: Vec<(DType, Vec<usize>, Vec<u8>)> = self
            .value_positions
            .iter()
            .map(|&k| {
                let t = &inputs[k];
                (t.dtype, t.shape.clone(), t.bytes().to_vec())
            })
            .collect();
        let key = (bindings, values);
        if let Some(k) = self.cache.iter().position(|(c, _)| *c == key) {
            let entry = self.cache.remove(k);
            self.cache.push(entry);
        } else {
            let named = inputs::values(&self.graph, inputs);
            let session = Session::with_values(self.engine, &self.graph, &key.0, &named)?;
            self.specializations += 1;
            if self.cache.len() == self.capacity {
                self.cache.remove(0);
            }
            self.cache.push((key, session));
        }
        let (_, session) = self.cache.last_mut().expect("just pushed or moved last");
        Ok(session)
    }
}
