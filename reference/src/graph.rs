//! A whole-graph interpreter over the reference kernels, for oracles and probes.

use std::collections::BTreeMap;

use baton_delegate_api::abi::MAX_RANK;
use baton_delegate_api::ir::{shape_string, DType, Dim, Graph, Node, Storage, TensorId};
use baton_delegate_api::shape::is_provisional;
use baton_delegate_api::{QuantRef, Tensor, TensorRef};

use super::{
    check_operands, control, expected_outputs, run_node, shape_err, unsupported, KernelError,
};

/// Runs `graph` on `inputs` (in `graph.inputs` order) and returns `graph.outputs` in order.
///
/// Control flow (If, Loop) runs its subgraphs here too, recursively. A declared shape that
/// is provisional (one symbol ending in `?`: a value whose rank was unknown when the model
/// was imported) accepts any shape.
///
/// Symbolic dimensions of the graph inputs are bound from the given shapes (one value per
/// symbol across all inputs); every node's output shape is then inferred from its actual
/// operands (a value-dependent shape, declared as the importer's provisional `[name?]`,
/// takes whatever its values give), and each intermediate is an owned [`Tensor`]. Constants must be
/// [`Storage::Inline`]; an [`Storage::External`] constant that a node or output reads is
/// an error. Quantization parameters declared on tensors travel with the operand views
/// (so arithmetic on quantized tensors is refused).
pub fn run_graph(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let fail = |message: String| KernelError::Graph {
        graph: graph.name.clone(),
        message,
    };
    graph.validate().map_err(|e| fail(e.to_string()))?;
    if inputs.len() != graph.inputs.len() {
        return Err(fail(format!(
            "{} inputs given, the graph takes {}",
            inputs.len(),
            graph.inputs.len()
        )));
    }

    let mut values: Vec<Option<Tensor>> = (0..graph.tensors.len()).map(|_| None).collect();
    let mut symbols: BTreeMap<&str, usize> = BTreeMap::new();
    for (&id, t) in graph.inputs.iter().zip(inputs) {
        let decl = &graph.tensors[id];
        let what = format!("input '{}'", decl.name);
        if t.dtype != decl.dtype {
            return Err(fail(format!(
                "{what} is {}, declared {}",
                t.dtype, decl.dtype
            )));
        }
        let mismatch = || {
            fail(format!(
                "{what} has shape {:?}, declared {}",
                t.shape,
                shape_string(&decl.shape)
            ))
        };
        if is_provisional(&decl.shape) {
            values[id] = Some(t.clone());
            continue;
        }
        if t.shape.len() != decl.shape.len() {
            return Err(mismatch());
        }
        for (dim, &given) in decl.shape.iter().zip(&t.shape) {
            match dim {
                Dim::Fixed(n) if *n != given => return Err(mismatch()),
                Dim::Fixed(_) => {}
                Dim::Sym(s) => {
                    let bound = *symbols.entry(s.as_str()).or_insert(given);
                    if bound != given {
                        return Err(fail(format!(
                            "{what} binds {s} = {given}, an earlier input bound {s} = {bound}"
                        )));
                    }
                }
            }
        }
        let bytes = t.shape.iter().product::<usize>() * t.dtype.size();
        if t.data.len() != bytes {
            return Err(fail(format!(
                "{what} holds {} bytes, shape {:?} of {} needs {bytes}",
                t.data.len(),
                t.shape,
                t.dtype
            )));
        }
        values[id] = Some(t.clone());
    }
    for (id, decl) in graph.tensors.iter().enumerate() {
        let Some(Storage::Inline(data)) = &decl.data else {
            continue;
        };
        if values[id].is_some() {
            continue; // a graph input with a default value: the given input wins
        }
        let shape = decl
            .static_shape()
            .ok_or_else(|| fail(format!("constant '{}' has a symbolic shape", decl.name)))?;
        let bytes = shape.iter().product::<usize>() * decl.dtype.size();
        if data.bytes().len() != bytes {
            return Err(fail(format!(
                "constant '{}' holds {} bytes, shape {shape:?} of {} needs {bytes}",
                decl.name,
                data.bytes().len(),
                decl.dtype
            )));
        }
        values[id] = Some(Tensor::from_bytes(decl.dtype, &shape, data.bytes()));
    }
    // Names the reason a tensor has no value (only external constants can lack one once
    // the graph has validated).
    let missing = |id: TensorId| {
        let decl = &graph.tensors[id];
        match decl.data {
            Some(Storage::External(i)) => fail(format!(
                "constant '{}' is stored externally (view {i}); run_graph needs inline data",
                decl.name
            )),
            _ => fail(format!("tensor '{}' has no value", decl.name)),
        }
    };

    for node in &graph.nodes {
        if node.op.is_control_flow() {
            let operands: Vec<&Tensor> = node
                .inputs
                .iter()
                .map(|&i| values[i].as_ref().ok_or_else(|| missing(i)))
                .collect::<Result<_, _>>()?;
            let results = control::run(node, &operands)?;
            if results.len() < node.outputs.len() {
                return Err(shape_err(
                    node,
                    format!(
                        "its subgraph returns {} values for {} outputs",
                        results.len(),
                        node.outputs.len()
                    ),
                ));
            }
            for (&out_id, t) in node.outputs.iter().zip(results) {
                agrees_with_declaration(graph, node, out_id, t.dtype, &t.shape)?;
                values[out_id] = Some(t);
            }
            continue;
        }
        let results = {
            let mut refs: Vec<TensorRef<'_>> = Vec::with_capacity(node.inputs.len());
            for &i in &node.inputs {
                let t = values[i].as_ref().ok_or_else(|| missing(i))?;
                refs.push(TensorRef {
                    dtype: t.dtype,
                    shape: &t.shape,
                    data: t.bytes(),
                    quant: graph.tensors[i].quant.as_ref().map(QuantRef::from_quant),
                });
            }
            check_operands(node, &refs)?;
            let expected = expected_outputs(node, &refs)?;
            if node.outputs.is_empty() || node.outputs.len() > expected.len() {
                return Err(unsupported(
                    node,
                    format!(
                        "{} outputs; {} produces 1 to {}",
                        node.outputs.len(),
                        node.op,
                        expected.len()
                    ),
                ));
            }
            let mut results = Vec::with_capacity(node.outputs.len());
            for (&out_id, (dtype, shape)) in node.outputs.iter().zip(&expected) {
                agrees_with_declaration(graph, node, out_id, *dtype, shape)?;
                if shape.len() > MAX_RANK {
                    return Err(unsupported(
                        node,
                        format!("output rank {} exceeds {MAX_RANK}", shape.len()),
                    ));
                }
                let out = Tensor::try_zeros(*dtype, shape).ok_or_else(|| KernelError::Shape {
                    node: node.label(),
                    message: format!(
                        "output '{}' ({dtype} {shape:?}) is too large to allocate",
                        graph.tensors[out_id].name
                    ),
                })?;
                results.push(out);
            }
            let mut views: Vec<_> = results.iter_mut().map(|t| t.view_mut()).collect();
            run_node(node, &refs, &mut views)?;
            drop(views);
            results
        };
        for (&out_id, t) in node.outputs.iter().zip(results) {
            values[out_id] = Some(t);
        }
    }

    graph
        .outputs
        .iter()
        .map(|&o| values[o].clone().ok_or_else(|| missing(o)))
        .collect()
}

/// Checks a computed output against its declaration: same dtype, and the same rank and
/// fixed extents unless the declaration is provisional.
fn agrees_with_declaration(
    graph: &Graph,
    node: &Node,
    out_id: TensorId,
    dtype: DType,
    shape: &[usize],
) -> Result<(), KernelError> {
    let decl = &graph.tensors[out_id];
    let agrees = is_provisional(&decl.shape)
        || (decl.shape.len() == shape.len()
            && decl
                .shape
                .iter()
                .zip(shape)
                .all(|(d, &s)| d.fixed().is_none_or(|f| f == s)));
    if !agrees || decl.dtype != dtype {
        return Err(shape_err(
            node,
            format!(
                "computes {dtype} {shape:?}, but output '{}' is declared {} {}",
                decl.name,
                decl.dtype,
                shape_string(&decl.shape)
            ),
        ));
    }
    Ok(())
}
