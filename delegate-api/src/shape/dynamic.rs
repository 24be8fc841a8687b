//! Shape rules of the ops whose output extents depend on operand values
//! (NonMaxSuppression, Unique, Compress). The rules check the operands and fix every
//! extent that follows from shapes alone; the value-dependent extent is a symbol ending in
//! `?` (`{node}_count?`), which only running the node settles. A session runs such a node
//! on the host and plans what follows it for the extents seen (see the host's dynamic
//! regions).

use crate::ir::{DType, Dim, Node, OpKind};
use crate::shape::normalize_axis;

/// Each output's dtype and shape, value-dependent extents symbolic.
type DimOutputs = Vec<(DType, Vec<Dim>)>;

/// Whether `op`'s output extents depend on its operands' values, not only their shapes.
pub fn has_value_dependent_shape(op: OpKind) -> bool {
    matches!(
        op,
        OpKind::NonMaxSuppression | OpKind::Unique | OpKind::Compress
    )
}

/// The outputs of `node` if its op is one of this family's, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
) -> Option<Result<DimOutputs, String>> {
    let count = Dim::Sym(format!("{}_count?", node.name));
    let r = match node.op {
        OpKind::NonMaxSuppression => {
            nms(inputs).map(|()| vec![(DType::I64, vec![count, Dim::Fixed(3)])])
        }
        OpKind::Unique => unique(node, inputs, count),
        OpKind::Compress => compress(node, inputs, count),
        _ => return None,
    };
    Some(r)
}

/// The message of [`crate::shape::infer_outputs`] for these ops, which answers concrete
/// shapes only.
pub(crate) fn not_static(op: OpKind) -> String {
    format!("{op}: an output extent depends on the operand values, known only when the node runs")
}

fn input(
    inputs: &[(DType, Vec<usize>)],
    op: OpKind,
    i: usize,
) -> Result<&(DType, Vec<usize>), String> {
    inputs.get(i).ok_or_else(|| format!("{op} needs input {i}"))
}

/// NonMaxSuppression: boxes `[B, N, 4]` and scores `[B, C, N]` of f32; the optional
/// scalars (a 0-element operand stands for an omitted one) hold one value each.
fn nms(inputs: &[(DType, Vec<usize>)]) -> Result<(), String> {
    let op = OpKind::NonMaxSuppression;
    let (bd, boxes) = input(inputs, op, 0)?;
    let (sd, scores) = input(inputs, op, 1)?;
    if *bd != DType::F32 || *sd != DType::F32 {
        return Err(format!(
            "{op} boxes and scores must be f32, got {bd} and {sd}"
        ));
    }
    if boxes.len() != 3 || boxes[2] != 4 {
        return Err(format!(
            "{op} boxes must be [batch, boxes, 4], got {boxes:?}"
        ));
    }
    if scores.len() != 3 || scores[0] != boxes[0] || scores[2] != boxes[1] {
        return Err(format!(
            "{op} scores must be [batch, classes, boxes] = [{}, _, {}], got {scores:?}",
            boxes[0], boxes[1]
        ));
    }
    let wants = [
        (2, "max_output_boxes_per_class", DType::I64),
        (3, "iou_threshold", DType::F32),
        (4, "score_threshold", DType::F32),
    ];
    for (i, what, dtype) in wants {
        let Some((d, s)) = inputs.get(i) else { break };
        let n: usize = s.iter().product();
        if n == 0 {
            continue;
        }
        if *d != dtype || n != 1 || s.len() > 1 {
            return Err(format!(
                "{op} {what} must be one {dtype} value, got {d} {s:?}"
            ));
        }
    }
    if inputs.len() > 5 {
        return Err(format!("{op} takes 2 to 5 inputs, got {}", inputs.len()));
    }
    Ok(())
}

/// Unique: `Y` (flattened, or `x`'s shape with the count along `axis`), then the i64
/// `indices`, `inverse_indices` and `counts`.
fn unique(node: &Node, inputs: &[(DType, Vec<usize>)], count: Dim) -> Result<DimOutputs, String> {
    let (dtype, x) = input(inputs, node.op, 0)?;
    if inputs.len() != 1 {
        return Err(format!("Unique takes one input, got {}", inputs.len()));
    }
    let (y, inverse) = match node.attrs.get("axis") {
        None => (vec![count.clone()], x.iter().product::<usize>()),
        Some(_) => {
            let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
            let mut y: Vec<Dim> = x.iter().map(|&d| Dim::Fixed(d)).collect();
            y[axis] = count.clone();
            (y, x[axis])
        }
    };
    Ok(vec![
        (*dtype, y),
        (DType::I64, vec![count.clone()]),
        (DType::I64, vec![Dim::Fixed(inverse)]),
        (DType::I64, vec![count]),
    ])
}

/// Compress: `x` (flattened without `axis`) with the count of trues along the axis; the
/// condition is a 1-D bool no longer than that axis.
fn compress(node: &Node, inputs: &[(DType, Vec<usize>)], count: Dim) -> Result<DimOutputs, String> {
    let (dtype, x) = input(inputs, node.op, 0)?;
    let (cd, cond) = input(inputs, node.op, 1)?;
    if inputs.len() != 2 {
        return Err(format!("Compress takes two inputs, got {}", inputs.len()));
    }
    if *cd != DType::Bool || cond.len() != 1 {
        return Err(format!(
            "Compress condition must be a 1-D bool, got {cd} {cond:?}"
        ));
    }
    let (out, extent) = match node.attrs.get("axis") {
        None => (vec![count], x.iter().product::<usize>()),
        Some(_) => {
            let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
            let mut y: Vec<Dim> = x.iter().map(|&d| Dim::Fixed(d)).collect();
            y[axis] = count;
            (y, x[axis])
        }
    };
    if cond[0] > extent {
        return Err(format!(
            "Compress condition has {} entries, more than the {extent} it selects from",
            cond[0]
        ));
    }
    Ok(vec![(*dtype, out)])
}
