//! Streaming: a session whose state outputs feed its state inputs on the next call.
//!
//! Recurrent and streaming models (an LSTM's `h`/`c`, a VAD's `state`) take their previous
//! state as inputs and return the next one as outputs. A [`Stream`] pairs them by name and
//! carries the state between calls itself, so the caller passes only the new data. The
//! state is replaced only when a call succeeds: a failed call (bad input, a plugin error
//! under the `fail` rule) leaves it exactly as it was, so the stream can go on.

use baton_delegate_api::sdk::TensorRef;
use baton_delegate_api::Tensor;

use crate::error::{HostError, InputProblem, Result, TensorType};
use crate::exec::{OutputSink, Session};

/// A session driven step by step with carried state.
pub struct Stream<'s, 'e> {
    session: &'s mut Session<'e>,
    state: StreamState,
}

/// The carried state of a stream, apart from the session it belongs to: for embedders (the
/// C and Python APIs) that keep a session and its stream in one handle, where a borrow of
/// the session could not be held. It belongs to the session that made it
/// ([`Session::stream_state`]); [`Stream`] is the same with the session borrowed.
pub struct StreamState {
    /// For each state: (position among graph inputs, position among graph outputs).
    pairs: Vec<(usize, usize)>,
    /// The name of each state's input, for [`StreamState::state`] and errors.
    names: Vec<String>,
    state: Vec<Tensor>,
}

impl<'e> Session<'e> {
    /// Starts a stream. `pairs` names each state as `(input, output)`: the output of one
    /// step becomes that input of the next. The state starts at zeros.
    pub fn stream<'s>(&'s mut self, pairs: &[(&str, &str)]) -> Result<Stream<'s, 'e>> {
        let state = self.stream_state(pairs)?;
        Ok(Stream {
            session: self,
            state,
        })
    }

    /// The state of a stream over this session (see [`Session::stream`]), held apart.
    pub fn stream_state(&self, pairs: &[(&str, &str)]) -> Result<StreamState> {
        let position = |list: &[usize], name: &str| {
            list.iter()
                .position(|&t| self.graph.tensors[t].name == name)
        };
        let mut resolved = Vec::with_capacity(pairs.len());
        let mut state = Vec::with_capacity(pairs.len());
        for &(input, output) in pairs {
            let i = position(&self.graph.inputs, input)
                .ok_or_else(|| HostError::input(input, InputProblem::NoSuchInput))?;
            let o = position(&self.graph.outputs, output).ok_or_else(|| {
                HostError::input(
                    input,
                    InputProblem::NoSuchOutput {
                        output: output.to_string(),
                    },
                )
            })?;
            // One output feeds one state, and one input holds one: a second pair for
            // either would leave a state with no value after a step.
            if let Some(k) = resolved.iter().position(|&(_, ro)| ro == o) {
                return Err(HostError::input(
                    input,
                    InputProblem::OutputCarriedTwice {
                        output: output.to_string(),
                        state: pairs[k].0.to_string(),
                    },
                ));
            }
            if resolved.iter().any(|&(ri, _)| ri == i) {
                return Err(HostError::input(input, InputProblem::StateTwice));
            }
            let (ti, to) = (self.graph.inputs[i], self.graph.outputs[o]);
            let shape = self.input_shapes()[i].to_vec();
            let (din, dout) = (self.graph.tensors[ti].dtype, self.graph.tensors[to].dtype);
            let out_shape = self.graph.tensors[to].static_shape();
            if din != dout || out_shape.as_deref() != Some(&shape[..]) {
                return Err(HostError::input(
                    input,
                    InputProblem::StateMismatch {
                        output: output.to_string(),
                        input: TensorType::of(din, &shape),
                        output_type: TensorType::declared(dout, &self.graph.tensors[to].shape),
                    },
                ));
            }
            resolved.push((i, o));
            state.push(Tensor::zeros(din, &shape));
        }
        Ok(StreamState {
            names: pairs.iter().map(|(i, _)| i.to_string()).collect(),
            pairs: resolved,
            state,
        })
    }
}

impl Stream<'_, '_> {
    /// Replaces the state named by its input (e.g. to start from a saved state).
    pub fn set_state(&mut self, input: &str, value: Tensor) -> Result<()> {
        self.state.set_state(input, value)
    }

    /// The current state named by its input.
    pub fn state(&self, input: &str) -> Result<&Tensor> {
        self.state.state(input)
    }

    /// Runs one step. `inputs` are the model's inputs that are not state, in graph order;
    /// the result is the outputs that are not state, in graph order.
    pub fn step(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let views: Vec<TensorRef<'_>> = inputs.iter().map(|t| t.view()).collect();
        let mut rest = Vec::new();
        self.state
            .step_views(self.session, &views, &mut |_, dtype, shape, bytes| {
                rest.push(Tensor::from_bytes(dtype, shape, bytes));
                Ok(())
            })?;
        Ok(rest)
    }
}

impl StreamState {
    /// Replaces the state named by its input (e.g. to start from a saved state).
    pub fn set_state(&mut self, input: &str, value: Tensor) -> Result<()> {
        let k = self.state_index(input)?;
        let current = &self.state[k];
        if value.dtype != current.dtype || value.shape != current.shape {
            return Err(HostError::input(
                input,
                InputProblem::WrongType {
                    expected: TensorType::of(current.dtype, &current.shape),
                    got: TensorType::of(value.dtype, &value.shape),
                },
            ));
        }
        self.state[k] = value;
        Ok(())
    }

    /// The current state named by its input.
    pub fn state(&self, input: &str) -> Result<&Tensor> {
        Ok(&self.state[self.state_index(input)?])
    }

    /// Puts every state back to zeros (a new utterance on the same session).
    pub fn reset(&mut self) {
        for t in &mut self.state {
            *t = Tensor::zeros(t.dtype, &t.shape);
        }
    }

    /// Runs one step of `session` (the session this state was made by): `inputs` are the
    /// model's inputs that are not state, in graph order; each output that is not state
    /// goes to `sink` as [`Session::run_views`] gives it, numbered among those outputs.
    /// The state changes only once the whole call, `sink` included, has succeeded.
    pub fn step_views(
        &mut self,
        session: &mut Session<'_>,
        inputs: &[TensorRef<'_>],
        sink: &mut OutputSink<'_>,
    ) -> Result<()> {
        let graph_inputs = session.graph.inputs.len();
        let mut free = inputs.iter();
        let mut all: Vec<TensorRef<'_>> = Vec::with_capacity(graph_inputs);
        for pos in 0..graph_inputs {
            match self.pairs.iter().position(|&(i, _)| i == pos) {
                Some(k) => all.push(self.state[k].view()),
                None => all.push(
                    *free
                        .next()
                        .ok_or_else(|| self.arity_error(graph_inputs, inputs.len()))?,
                ),
            }
        }
        if free.next().is_some() {
            return Err(self.arity_error(graph_inputs, inputs.len()));
        }
        let mut next: Vec<Option<Tensor>> = self.state.iter().map(|_| None).collect();
        let mut rest = 0;
        session.run_views(&all, &mut |pos, dtype, shape, bytes| {
            match self.pairs.iter().position(|&(_, o)| o == pos) {
                Some(k) => next[k] = Some(Tensor::from_bytes(dtype, shape, bytes)),
                None => {
                    sink(rest, dtype, shape, bytes)?;
                    rest += 1;
                }
            }
            Ok(())
        })?;
        for (slot, t) in self.state.iter_mut().zip(next) {
            *slot = t.expect("every state output is produced by a successful run");
        }
        Ok(())
    }

    fn state_index(&self, input: &str) -> Result<usize> {
        self.names
            .iter()
            .position(|n| n == input)
            .ok_or_else(|| HostError::input(input, InputProblem::NotState))
    }

    fn arity_error(&self, graph_inputs: usize, given: usize) -> HostError {
        HostError::InputCount {
            given,
            expected: graph_inputs - self.pairs.len(),
            state: self.pairs.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use baton_delegate_api::{DType, GraphBuilder, OpKind, Tensor};

    use crate::{Config, Engine, Session};

    #[test]
    fn one_output_carried_into_two_states_is_refused_by_name() {
        let mut b = GraphBuilder::new("two_states");
        let h1 = b.input_fixed("h1", DType::F32, &[2]);
        let h2 = b.input_fixed("h2", DType::F32, &[2]);
        let x = b.input_fixed("x", DType::F32, &[2]);
        let y = b.node(OpKind::Add, &[x, h1], &[]).unwrap();
        let z = b.node(OpKind::Add, &[x, h2], &[]).unwrap();
        b.output(y);
        b.output(z);
        let g = b.finish().unwrap();
        let (y_name, z_name) = (g.tensors[y].name.clone(), g.tensors[z].name.clone());
        let engine = Engine::new(Config::default()).unwrap();
        let mut session = Session::new(&engine, &g, &BTreeMap::new()).unwrap();
        let e = match session.stream(&[("h1", &y_name), ("h2", &y_name)]) {
            Ok(mut s) => {
                // Before the check, the second state was left without a value here.
                let _ = s.step(&[Tensor::from_f32(&[2], &[1.0, 2.0])]);
                panic!("two states carried from one output were accepted");
            }
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(&y_name) && e.contains("h1") && e.contains("h2"),
            "{e}"
        );
        let e = session
            .stream(&[("h1", &y_name), ("h1", &z_name)])
            .err()
            .expect("a state given twice is refused")
            .to_string();
        assert!(e.contains("h1") && e.contains("twice"), "{e}");
    }
}
