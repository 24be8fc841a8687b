//! Specialization (a graph made concrete for its inputs' shapes) lives with the reference
//! executor, whose kernels fold the constants it finds
//! ([`baton_reference::specialize()`]); the host calls it with its own errors, which name the
//! input, node or tensor at fault as every other host error does.

use std::collections::BTreeMap;

use baton_delegate_api::{Graph, Tensor};
use baton_reference::SpecializeError;

use crate::error::{HostError, InputProblem, NodeProblem, Result, TensorType};

/// Binds symbolic dimensions of the inputs and re-infers every node's output shape,
/// folding constants and inlining Ifs whose condition becomes constant.
pub fn specialize(graph: &Graph, bindings: &BTreeMap<String, usize>) -> Result<Graph> {
    baton_reference::specialize(graph, bindings).map_err(HostError::from)
}

/// `graph` with its value inputs (inputs whose values decide shapes, see
/// [`baton_reference::values`]) made constants holding their entries of `values`, by
/// input name; entries for other inputs are ignored.
pub fn bind_values(graph: &Graph, values: &BTreeMap<String, Tensor>) -> Result<Graph> {
    baton_reference::values::bind_values(graph, values).map_err(HostError::from)
}

impl From<SpecializeError> for HostError {
    fn from(e: SpecializeError) -> HostError {
        match e {
            SpecializeError::Unbound { input, dim } => {
                HostError::input(input, InputProblem::Unbound { dim })
            }
            SpecializeError::SubgraphArity {
                graph,
                expected,
                given,
            } => HostError::input(graph, InputProblem::SubgraphArity { expected, given }),
            SpecializeError::OutputCount {
                node,
                op,
                outputs,
                produced,
            } => HostError::Node {
                node,
                op,
                problem: NodeProblem::OutputCount { outputs, produced },
            },
            SpecializeError::Ir(e) => HostError::Ir(e),
            SpecializeError::SymbolicShape { tensor, shape } => {
                HostError::SymbolicShape { tensor, shape }
            }
            SpecializeError::MissingValue { input, because } => {
                HostError::input(input, InputProblem::MissingValue { because })
            }
            SpecializeError::ValueType {
                input,
                expected,
                got,
            } => HostError::input(
                input,
                InputProblem::WrongType {
                    expected: TensorType::declared(expected.0, &expected.1),
                    got: TensorType::of(got.0, &got.1),
                },
            ),
            SpecializeError::ValueTooLarge { input, elements } => HostError::input(
                input,
                InputProblem::ValueTooLarge {
                    elements,
                    max: baton_reference::values::MAX_VALUE_ELEMENTS,
                },
            ),
        }
    }
}
