//! Shape rules of the signal and sampling family: Einsum and GridSample.

use super::einsum;
use super::Outputs;
use crate::ir::{DType, Node, OpKind};

/// The outputs of `node` if its op belongs to this family, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    _operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Option<Result<Outputs, String>> {
    let r = match node.op {
        OpKind::Einsum => einsum_rule(node, inputs),
        OpKind::GridSample => grid_sample(inputs),
        _ => return None,
    };
    Some(r)
}

/// Einsum: operands of one dtype; the output's shape from the equation.
fn einsum_rule(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let Some((dtype, _)) = inputs.first() else {
        return Err("Einsum needs at least one input".into());
    };
    if let Some((d, _)) = inputs.iter().find(|(d, _)| d != dtype) {
        return Err(format!(
            "Einsum operands must share a dtype, got {dtype} and {d}"
        ));
    }
    let equation = node.attr_str("equation", "");
    if equation.is_empty() {
        return Err("Einsum needs the string attribute 'equation'".into());
    }
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|(_, s)| s.clone()).collect();
    let e = einsum::parse(equation, &shapes)?;
    Ok(vec![(*dtype, e.output_shape())])
}

/// GridSample: `X` `[N, C, D1..Dr]` and `grid` `[N, H1..Hr, r]` give `[N, C, H1..Hr]`.
fn grid_sample(inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let [(dtype, x), (_, grid)] = inputs else {
        return Err(format!(
            "GridSample takes 2 inputs (X, grid), got {}",
            inputs.len()
        ));
    };
    if x.len() < 3 {
        return Err(format!(
            "GridSample needs X of rank >= 3 ([N, C, spatial...]), got {x:?}"
        ));
    }
    let r = x.len() - 2;
    if grid.len() != x.len() || grid[0] != x[0] || grid[grid.len() - 1] != r {
        return Err(format!(
            "GridSample grid must be [N, out spatial..., {r}] with N = {} for X {x:?}, got {grid:?}",
            x[0]
        ));
    }
    if x[2..].contains(&0) {
        return Err(format!("GridSample cannot sample an empty X {x:?}"));
    }
    let mut out = vec![x[0], x[1]];
    out.extend_from_slice(&grid[1..grid.len() - 1]);
    Ok(vec![(*dtype, out)])
}
