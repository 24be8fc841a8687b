//! Specialization: a graph made concrete for the shapes of its actual inputs.
//!
//! The host binds the inputs' symbolic dimensions, then walks the nodes once, in order:
//! each node's outputs are re-inferred from its (now fixed) inputs and the node is folded
//! away when its operands are constant. Doing both in one walk matters for control flow:
//! exported models guard shape arithmetic with Ifs whose conditions become constant only
//! once shapes are known (silero VAD's `Squeeze` if the rank is 3), and a later node's
//! shape depends on which branch that is. So:
//!
//! - an **If or Loop** first has its subgraphs specialized for the types of the values the
//!   node passes them (recursively); its outputs then follow from the subgraphs' outputs;
//! - an **If with a constant condition** is replaced by its branch's nodes
//!   ([`fold::inline_if`]), which are then walked like any other.
//!
//! What stays symbolic is value-dependent (an If on a run-time input whose branches give
//! different extents, a Loop's trip count): [`specialize`] refuses it and names the tensor.

use std::collections::{BTreeMap, VecDeque};

use baton_delegate_api::{shape, DType, Dim, Graph, IrError, Node, OpKind};

use crate::{fold, values};

/// Why a graph could not be specialized. The host maps each variant onto its own error
/// (naming the input, node or tensor); the conformance kit reports it as it is.
#[derive(Debug, thiserror::Error)]
pub enum SpecializeError {
    /// An input's symbolic dimension has no binding.
    #[error("input '{input}': dimension '{dim}' is not bound")]
    Unbound { input: String, dim: String },
    /// A control-flow node passes its subgraph another number of values than it takes.
    #[error("subgraph '{graph}': takes {expected} inputs, given {given}")]
    SubgraphArity {
        graph: String,
        expected: usize,
        given: usize,
    },
    /// A node declares outputs its op does not produce (or none at all).
    #[error("node {node} ({op}): declares {outputs} outputs, the op produces {produced}")]
    OutputCount {
        node: String,
        op: OpKind,
        outputs: usize,
        produced: usize,
    },
    /// A node's shape rule refused its operands.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A tensor whose shape still depends on run-time values.
    #[error("tensor '{tensor}': shape {shape:?} is still symbolic after binding the inputs")]
    SymbolicShape { tensor: String, shape: Vec<Dim> },
    /// A value input (see [`crate::values`]) with no value given.
    #[error("input '{input}': its values decide shapes in the model, so a session needs them to specialise it; give the input's value ({because})")]
    MissingValue { input: String, because: String },
    /// A value input given with another dtype or shape than the model declares.
    #[error("input '{input}': value input declared {expected:?}, given {got:?}")]
    ValueType {
        input: String,
        expected: (DType, Vec<Dim>),
        got: (DType, Vec<usize>),
    },
    /// A tensor too large to be a value input feeds a shape operand.
    #[error("input '{input}': its values decide shapes in the model, but it has {elements} elements; a value input holds at most {max}", max = crate::values::MAX_VALUE_ELEMENTS)]
    ValueTooLarge { input: String, elements: usize },
}

type Result<T> = std::result::Result<T, SpecializeError>;

/// Binds symbolic dimensions of the inputs and re-infers every node's output shape,
/// folding constants and inlining Ifs whose condition becomes constant.
pub fn specialize(graph: &Graph, bindings: &BTreeMap<String, usize>) -> Result<Graph> {
    let mut g = bind_inputs(graph, bindings)?;
    refine(&mut g, false).map_err(|e| name_missing_value(graph, e))?;
    // Nodes that read only constants folded above; this catches Shape/Size of values
    // whose shapes were fixed after their readers were walked (none in a valid order) and
    // keeps the two passes' results identical.
    fold::fold_constants(&mut g);
    for t in &g.tensors {
        if t.static_shape().is_none() {
            let e = SpecializeError::SymbolicShape {
                tensor: t.name.clone(),
                shape: t.shape.clone(),
            };
            return Err(name_missing_value(graph, e));
        }
    }
    Ok(g)
}

/// A graph specialised as far as shapes allow (see [`split`]).
#[derive(Debug)]
pub enum Split {
    /// Every shape is known: the graph [`specialize`] gives.
    Static(Graph),
    /// The walk stopped at `node`, whose output extents depend on values (a
    /// NonMaxSuppression, a Loop that may stop early, a TopK whose `k` is computed).
    Dynamic {
        /// Every tensor, those before `node` specialised; its nodes are those before
        /// `node`, whose shapes are all static.
        graph: Graph,
        /// The value-dependent node, its inputs static.
        node: Node,
        /// The nodes after it, in order, declared as imported.
        rest: Vec<Node>,
    },
}

/// [`specialize`], stopping at the first node whose outputs' extents depend on values
/// rather than failing: the host runs that node itself and specialises the rest for the
/// shapes it gives (a *dynamic region*). A node counts as value-dependent when its inputs
/// are static and either its shape rule leaves an output symbolic or the rule cannot read
/// a shape operand computed at run time.
pub fn split(graph: &Graph, bindings: &BTreeMap<String, usize>) -> Result<Split> {
    let mut g = bind_inputs(graph, bindings)?;
    match refine(&mut g, true).map_err(|e| name_missing_value(graph, e))? {
        None => specialize(graph, bindings).map(Split::Static),
        Some((node, rest)) => Ok(Split::Dynamic {
            graph: g,
            node,
            rest,
        }),
    }
}

/// `graph` with its inputs' symbolic dimensions bound.
fn bind_inputs(graph: &Graph, bindings: &BTreeMap<String, usize>) -> Result<Graph> {
    let mut g = graph.clone();
    for &i in &g.inputs.clone() {
        let decl = &mut g.tensors[i];
        for d in &mut decl.shape {
            if let Dim::Sym(s) = d {
                let v = *bindings
                    .get(s.as_str())
                    .ok_or_else(|| SpecializeError::Unbound {
                        input: decl.name.clone(),
                        dim: s.clone(),
                    })?;
                *d = Dim::Fixed(v);
            }
        }
    }
    Ok(g)
}

/// A failure to specialise, most likely from a shape operand computed from a value input
/// given no value: named by that input rather than by the node.
fn name_missing_value(graph: &Graph, e: SpecializeError) -> SpecializeError {
    match values::value_input_names(graph).into_iter().next() {
        Some(input) => SpecializeError::MissingValue {
            input,
            because: e.to_string(),
        },
        None => e,
    }
}

/// Specializes subgraph `g` for inputs of the given types (in `g.inputs` order).
fn specialize_subgraph(g: &Graph, inputs: &[(DType, Vec<usize>)]) -> Result<Graph> {
    let mut g = g.clone();
    if inputs.len() != g.inputs.len() {
        return Err(SpecializeError::SubgraphArity {
            graph: g.name.clone(),
            expected: g.inputs.len(),
            given: inputs.len(),
        });
    }
    for (&t, (dtype, dims)) in g.inputs.clone().iter().zip(inputs) {
        g.tensors[t].dtype = *dtype;
        g.tensors[t].shape = dims.iter().map(|&d| Dim::Fixed(d)).collect();
    }
    refine(&mut g, false)?;
    Ok(g)
}

/// The nodes left when [`refine`] stops: the value-dependent one and those after it.
type Stopped = Option<(Node, Vec<Node>)>;

/// The one walk described in the module documentation. With `stop`, the walk ends at the
/// first value-dependent node (see [`split`]), which it returns with the nodes after it;
/// `g` then holds the nodes before it.
fn refine(g: &mut Graph, stop: bool) -> Result<Stopped> {
    let mut queue: VecDeque<Node> = std::mem::take(&mut g.nodes).into();
    let mut kept = Vec::with_capacity(queue.len());
    while let Some(mut node) = queue.pop_front() {
        // Before anything else: the branch not taken need not even fit these shapes.
        if let Some(inlined) = fold::inline_if(g, &node) {
            for n in inlined.into_iter().rev() {
                queue.push_front(n);
            }
            continue;
        }
        crate::values::resize_scales_to_attr(g, &mut node);
        let single = if node.op.is_control_flow() {
            specialize_subgraphs(g, &mut node)
        } else {
            None
        };
        let static_inputs = node
            .inputs
            .iter()
            .all(|&t| g.tensors[t].static_shape().is_some());
        let mut inferred = match single {
            Some(types) => types,
            None => match shape::infer_node(g, &node) {
                Ok(types) => types,
                // A shape operand computed at run time: its values decide the shape.
                Err(_) if stop && static_inputs && !values::shape_operands(&node).is_empty() => {
                    g.nodes = kept;
                    return Ok(Some((node, queue.into())));
                }
                Err(e) => return Err(e.into()),
            },
        };
        if let Some(trips) = (node.op == OpKind::Loop)
            .then(|| values::loop_trips(g, &node))
            .flatten()
        {
            // The scan outputs' provisional leading dimension (see `shape::control`).
            for (_, dims) in &mut inferred {
                if matches!(dims.first(), Some(Dim::Sym(s)) if s.ends_with("_trips?")) {
                    dims[0] = Dim::Fixed(trips);
                }
            }
        }
        if node.outputs.is_empty() || node.outputs.len() > inferred.len() {
            return Err(SpecializeError::OutputCount {
                node: node.name.clone(),
                op: node.op,
                outputs: node.outputs.len(),
                produced: inferred.len(),
            });
        }
        for (&out, (dtype, dims)) in node.outputs.iter().zip(inferred) {
            g.tensors[out].dtype = dtype;
            g.tensors[out].shape = dims;
        }
        let dynamic = node
            .outputs
            .iter()
            .any(|&t| g.tensors[t].static_shape().is_none());
        if stop && static_inputs && dynamic {
            g.nodes = kept;
            return Ok(Some((node, queue.into())));
        }
        match fold::fold_node(g, &node) {
            Some(values) => fold::set_constants(g, &node, values),
            None => kept.push(node),
        }
    }
    g.nodes = kept;
    Ok(None)
}

/// Specializes the subgraphs of control-flow `node` for the values it passes them. A
/// subgraph that cannot be specialized keeps its import-time declarations, which leaves
/// the node's outputs as value-dependent as they were, with one exception: when exactly
/// one branch of an If fails, that branch cannot run for these shapes at all (it would
/// fail at run time, as ONNX Runtime's does: silero's 8 kHz branch on a 16 kHz chunk), so
/// the node's outputs are the other branch's, returned here. Taking that branch is then a
/// run-time error.
fn specialize_subgraphs(g: &Graph, node: &mut Node) -> Option<Vec<(DType, Vec<Dim>)>> {
    let types: Option<Vec<(DType, Vec<usize>)>> = node
        .inputs
        .iter()
        .map(|&t| Some((g.tensors[t].dtype, g.tensors[t].static_shape()?)))
        .collect();
    let types = types?;
    let (names, passed): (&[&str], Vec<(DType, Vec<usize>)>) = match node.op {
        OpKind::If => (&["then_branch", "else_branch"], types[1..].to_vec()),
        OpKind::Loop => {
            let body = node.attr_graph("body")?;
            // The iteration number and condition as the body declares them ([] or [1]).
            let scalar = |k: usize, dtype: DType| {
                let declared = body
                    .inputs
                    .get(k)
                    .and_then(|&t| body.tensors[t].static_shape());
                (
                    dtype,
                    declared
                        .filter(|s| s.iter().product::<usize>() == 1)
                        .unwrap_or_default(),
                )
            };
            let mut passed = vec![scalar(0, DType::I64), scalar(1, DType::Bool)];
            passed.extend(types.iter().skip(2).cloned());
            (&["body"], passed)
        }
        _ => return None,
    };
    let mut usable = Vec::new();
    for &name in names {
        let Some(sub) = node.attr_graph(name) else {
            continue;
        };
        let Ok(specialized) = specialize_subgraph(sub, &passed) else {
            continue;
        };
        let captures = usize::try_from(node.attr_int("captures", 0)).unwrap_or(usize::MAX);
        if node.op == OpKind::Loop && !carried_shapes_hold(&specialized, &passed, captures) {
            continue; // the carried values change shape between iterations
        }
        usable.push(
            specialized
                .outputs
                .iter()
                .map(|&o| {
                    let t = &specialized.tensors[o];
                    (t.dtype, t.shape.clone())
                })
                .collect(),
        );
        node.attrs.insert(
            name.to_string(),
            baton_delegate_api::Attr::Graph(Box::new(specialized)),
        );
    }
    match (node.op, usable.len()) {
        (OpKind::If, 1) => usable.pop(),
        _ => None,
    }
}

/// Whether a specialized Loop body returns every carried value with the type it took
/// (`passed`: iteration, condition, carried values, captures).
fn carried_shapes_hold(body: &Graph, passed: &[(DType, Vec<usize>)], captures: usize) -> bool {
    let carried = passed.len().saturating_sub(2 + captures);
    (0..carried).all(|k| {
        let Some(&o) = body.outputs.get(1 + k) else {
            return false;
        };
        let decl = &body.tensors[o];
        let (dtype, dims) = &passed[2 + k];
        decl.dtype == *dtype && decl.static_shape().as_deref() == Some(&dims[..])
    })
}
