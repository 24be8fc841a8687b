//! Specialization (a graph made concrete for its inputs' shapes) lives with the reference
//! executor, whose kernels fold the constants it finds
//! ([`baton_reference::specialize()`]); the host calls it with its own errors, which name the
//! input, node or tensor at fault as every other host error does.

use std::collections::BTreeMap;

use baton_delegate_api::Graph;
use baton_reference::SpecializeError;

use crate::error::{HostError, InputProblem, NodeProblem, Result};

/// Binds symbolic dimensions of the inputs and re-infers every node's output shape,
/// folding constants and inlining Ifs whose condition becomes constant.
pub fn specialize(graph: &Graph, bindings: &BTreeMap<String, usize>) -> Result<Graph> {
    baton_reference::specialize(graph, bindings).map_err(HostError::from)
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
        }
    }
}
