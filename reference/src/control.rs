//! Control flow on the reference interpreter: If picks a branch, Loop iterates its body.
//!
//! Both run their subgraphs with [`run_graph`], so every shape inside is resolved from the
//! actual values as it runs: a branch may produce a shape the other does not, a loop-carried
//! value may change shape between iterations (ONNX allows both).
//!
//! # Conventions
//!
//! - A condition is a bool tensor of exactly one element (any rank).
//! - Loop's `M` and `cond` with **0 elements** count as omitted (the importer's encoding of
//!   an empty ONNX input name). `M` is i64 (or i32) with one element; a negative `M` runs
//!   no iteration. With neither, the loop runs until the body returns a false condition.
//! - The body receives the iteration number as an i64 and the condition as a bool, each
//!   shaped as the body declares it (`[]` or `[1]`).
//! - Scan outputs are stacked along a new leading axis; every iteration must give them
//!   one dtype and shape. After zero iterations a scan output has extent 0 on that axis
//!   and the body's declared shape for the rest (0 elements where that is not fixed).

use baton_delegate_api::ir::{Dim, Graph, Node, OpKind};
use baton_delegate_api::{DType, Tensor};

use super::graph::run_graph;
use super::{shape_err, unsupported, KernelError};

/// Runs an If or Loop node on owned operands (in `node.inputs` order); returns one tensor
/// per output the subgraphs produce.
pub(crate) fn run(node: &Node, inputs: &[&Tensor]) -> Result<Vec<Tensor>, KernelError> {
    match node.op {
        OpKind::If => run_if(node, inputs),
        OpKind::Loop => run_loop(node, inputs),
        op => Err(unsupported(node, format!("{op} is not control flow"))),
    }
}

/// Whether control-flow op `op` takes these operand dtypes; `None` for other ops.
pub(crate) fn supports(op: OpKind, input_dtypes: &[DType]) -> Option<Result<(), String>> {
    match op {
        OpKind::If => Some(match input_dtypes.first() {
            Some(DType::Bool) => Ok(()),
            Some(d) => Err(format!("If's condition must be bool, got {d}")),
            None => Err("If needs a condition".into()),
        }),
        OpKind::Loop => Some(if input_dtypes.len() < 2 {
            Err("Loop needs M and cond (0-element tensors when omitted)".into())
        } else {
            Ok(())
        }),
        _ => None,
    }
}

fn subgraph<'a>(node: &'a Node, name: &str) -> Result<&'a Graph, KernelError> {
    node.attr_graph(name)
        .ok_or_else(|| unsupported(node, format!("subgraph attribute '{name}' is missing")))
}

/// Runs subgraph `name` of `node`, naming the node in any error from inside.
fn run_subgraph(
    node: &Node,
    name: &str,
    g: &Graph,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, KernelError> {
    run_graph(g, inputs).map_err(|e| shape_err(node, format!("in {name}: {e}")))
}

fn truth(node: &Node, what: &str, t: &Tensor) -> Result<bool, KernelError> {
    if t.dtype != DType::Bool || t.len() != 1 {
        return Err(shape_err(
            node,
            format!("{what} must be one bool, got {} {:?}", t.dtype, t.shape),
        ));
    }
    Ok(t.bytes()[0] != 0)
}

fn run_if(node: &Node, inputs: &[&Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let cond = inputs
        .first()
        .ok_or_else(|| unsupported(node, "If needs a condition"))?;
    let name = if truth(node, "the condition", cond)? {
        "then_branch"
    } else {
        "else_branch"
    };
    let branch = subgraph(node, name)?;
    let captured: Vec<Tensor> = inputs[1..].iter().map(|&t| t.clone()).collect();
    run_subgraph(node, name, branch, &captured)
}

fn run_loop(node: &Node, inputs: &[&Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let body = subgraph(node, "body")?;
    let captures = usize::try_from(node.attr_int("captures", 0)).unwrap_or(usize::MAX);
    let carried = inputs
        .len()
        .checked_sub(2)
        .and_then(|n| n.checked_sub(captures))
        .ok_or_else(|| {
            unsupported(
                node,
                format!(
                    "{} operands cannot hold M, cond and {captures} captures",
                    inputs.len()
                ),
            )
        })?;
    let max_trips = match inputs[0] {
        t if t.is_empty() => None,
        t if t.len() == 1 && t.dtype == DType::I64 => Some(t.values::<i64>()[0]),
        t if t.len() == 1 && t.dtype == DType::I32 => Some(t.values::<i32>()[0] as i64),
        t => {
            return Err(shape_err(
                node,
                format!("M must be one i64, got {} {:?}", t.dtype, t.shape),
            ))
        }
    };
    let mut cond = match inputs[1] {
        t if t.is_empty() => true,
        t => truth(node, "cond", t)?,
    };
    let mut values: Vec<Tensor> = inputs[2..2 + carried].iter().map(|&t| t.clone()).collect();
    let captured = &inputs[2 + carried..];
    let mut scans: Vec<Vec<Tensor>> = Vec::new();
    let mut i: i64 = 0;
    while cond && max_trips.is_none_or(|m| i < m) {
        let mut args = Vec::with_capacity(inputs.len());
        args.push(scalar_as_declared(body, 0, Tensor::from_i64(&[], &[i])));
        args.push(scalar_as_declared(
            body,
            1,
            Tensor::from_bytes(DType::Bool, &[], &[1]),
        ));
        args.append(&mut values);
        args.extend(captured.iter().map(|&t| t.clone()));
        let mut outs = run_subgraph(node, "body", body, &args)?.into_iter();
        let next_cond = outs
            .next()
            .ok_or_else(|| shape_err(node, "the body returns no condition"))?;
        cond = truth(node, "the body's condition", &next_cond)?;
        values = outs.by_ref().take(carried).collect();
        if values.len() != carried {
            return Err(shape_err(
                node,
                format!(
                    "the body returns {} of {carried} carried values",
                    values.len()
                ),
            ));
        }
        let step: Vec<Tensor> = outs.collect();
        if scans.is_empty() {
            scans = step.iter().map(|_| Vec::new()).collect();
        }
        for (k, (list, t)) in scans.iter_mut().zip(step).enumerate() {
            if let Some(first) = list.first() {
                if first.dtype != t.dtype || first.shape != t.shape {
                    return Err(shape_err(
                        node,
                        format!(
                            "scan output {k} is {} {:?} in iteration {i} but {} {:?} before",
                            t.dtype, t.shape, first.dtype, first.shape
                        ),
                    ));
                }
            }
            list.push(t);
        }
        i += 1;
    }
    let scan_count = body.outputs.len().saturating_sub(1 + carried);
    let mut result = values;
    for k in 0..scan_count {
        result.push(stack(
            body,
            1 + carried + k,
            scans.get(k).map_or(&[][..], |v| v),
        ));
    }
    Ok(result)
}

/// A one-element body input reshaped to the body's declaration (`[]` or `[1]`).
fn scalar_as_declared(body: &Graph, input: usize, t: Tensor) -> Tensor {
    let declared = body
        .inputs
        .get(input)
        .and_then(|&id| body.tensors[id].static_shape());
    match declared {
        Some(shape) if shape.iter().product::<usize>() == 1 => {
            Tensor::from_bytes(t.dtype, &shape, t.bytes())
        }
        _ => t,
    }
}

/// Scan values of every iteration along a new leading axis.
fn stack(body: &Graph, output: usize, values: &[Tensor]) -> Tensor {
    let Some(first) = values.first() else {
        let decl = &body.tensors[body.outputs[output]];
        let mut shape = vec![0];
        shape.extend(decl.shape.iter().map(|d| match d {
            Dim::Fixed(n) => *n,
            Dim::Sym(_) => 0,
        }));
        return Tensor::zeros(decl.dtype, &shape);
    };
    let mut shape = vec![values.len()];
    shape.extend(&first.shape);
    let mut bytes = Vec::with_capacity(first.bytes().len() * values.len());
    for v in values {
        bytes.extend_from_slice(v.bytes());
    }
    Tensor::from_bytes(first.dtype, &shape, &bytes)
}
