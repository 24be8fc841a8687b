//! Shape rules of the indexing ops (GatherElements, ScatterElements, GatherND, ScatterND),
//! the running and masking ops (CumSum, Trilu, ReverseSequence), TensorScatter and the block rearrangements (DepthToSpace,
//! SpaceToDepth). None of them depends on operand values: CumSum's axis and Trilu's `k`
//! may be run-time tensors.

use super::{Operands, Outputs};
use crate::ir::{DType, Node, OpKind};
use crate::shape::normalize_axis;

fn index_dtype(op: OpKind, what: &str, d: DType) -> Result<(), String> {
    if matches!(d, DType::I32 | DType::I64) {
        Ok(())
    } else {
        Err(format!("{op} {what} must be i32 or i64, got {d}"))
    }
}

/// CumSum and CumProd: `x`'s shape; the axis (input 1) is one i32 or i64 value.
pub(super) fn cumsum(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let (dtype, x) = ops.x()?;
    let (ad, axis) = ops.input(1)?;
    index_dtype(op, "axis", *ad)?;
    if axis.iter().product::<usize>() != 1 || axis.len() > 1 {
        return Err(format!("{op} axis must be one value, got shape {axis:?}"));
    }
    if x.is_empty() {
        return Err(format!("{op} needs an input of rank >= 1, got a scalar"));
    }
    Ok(vec![(*dtype, x.clone())])
}

/// Trilu: a matrix or batch of matrices; `k` (input 1, optional) is one i64 value.
pub(super) fn trilu(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    if x.len() < 2 {
        return Err(format!("Trilu needs an input of rank >= 2, got {x:?}"));
    }
    if let Some((kd, k)) = ops.inputs.get(1) {
        if *kd != DType::I64 || k.iter().product::<usize>() > 1 {
            return Err(format!("Trilu k must be one i64 value, got {kd} {k:?}"));
        }
    }
    Ok(vec![(*dtype, x.clone())])
}

/// ReverseSequence: the input's shape; rank >= 2, `batch_axis` and `time_axis` 0 and 1 in
/// either order, and `sequence_lens` i64 `[batch]`.
pub(super) fn reverse_sequence(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    if ops.inputs.len() != 2 {
        return Err(format!(
            "ReverseSequence takes 2 inputs (input, sequence_lens), got {}",
            ops.inputs.len()
        ));
    }
    if x.len() < 2 {
        return Err(format!(
            "ReverseSequence needs an input of rank >= 2, got {x:?}"
        ));
    }
    let batch_axis = ops.node.attr_int("batch_axis", 1);
    let time_axis = ops.node.attr_int("time_axis", 0);
    if !matches!((batch_axis, time_axis), (0, 1) | (1, 0)) {
        return Err(format!(
            "ReverseSequence batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 in either order"
        ));
    }
    let (ld, l) = ops.input(1)?;
    let batch = x[batch_axis as usize];
    if *ld != DType::I64 || l[..] != [batch] {
        return Err(format!(
            "ReverseSequence sequence_lens must be i64 [{batch}], got {ld} {l:?}"
        ));
    }
    Ok(vec![(*dtype, x.clone())])
}

/// TensorScatter: the cache's shape; `update` of its dtype and rank, equal extents but
/// along `axis` (not 0), where it is at most the cache's; `write_indices` i64 `[batch]`
/// or omitted; `mode` `linear` or `circular`.
pub(super) fn tensor_scatter(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, past) = ops.x()?;
    if !(2..=3).contains(&ops.inputs.len()) {
        return Err(format!(
            "TensorScatter takes 2 or 3 inputs (past_cache, update, write_indices), got {}",
            ops.inputs.len()
        ));
    }
    let axis = tensor_scatter_axis(ops.node, past.len())?;
    let (du, update) = ops.input(1)?;
    let fits = update.len() == past.len()
        && update
            .iter()
            .zip(past)
            .enumerate()
            .all(|(i, (&u, &p))| if i == axis { u <= p } else { u == p });
    if du != dtype || !fits {
        return Err(format!(
            "TensorScatter update must be {dtype} shaped like past_cache {past:?} with at most {} steps on axis {axis}, got {du} {update:?}",
            past[axis]
        ));
    }
    if ops.inputs.len() == 3 && ops.inputs[2].1[..] != [0] {
        let (di, w) = ops.input(2)?;
        if *di != DType::I64 || w[..] != [past[0]] {
            return Err(format!(
                "TensorScatter write_indices must be i64 [{}], got {di} {w:?}",
                past[0]
            ));
        }
    }
    match ops.node.attr_str("mode", "linear") {
        "linear" | "circular" => Ok(vec![(*dtype, past.clone())]),
        m => Err(format!(
            "TensorScatter mode '{m}' is not linear or circular"
        )),
    }
}

/// TensorScatter's sequence axis for a cache of `rank`: `axis` (default -2) normalized;
/// it may not be 0, the batch axis the write indices are per.
pub fn tensor_scatter_axis(node: &Node, rank: usize) -> Result<usize, String> {
    if rank < 2 {
        return Err(format!(
            "TensorScatter needs a past_cache of rank >= 2 ([batch, ..., sequence, ...]), got rank {rank}"
        ));
    }
    let axis = normalize_axis(node.attr_int("axis", -2), rank)?;
    if axis == 0 {
        return Err("TensorScatter axis may not be 0, the batch axis".into());
    }
    Ok(axis)
}

/// GatherElements: the indices' shape, of the data's rank.
pub(super) fn gather_elements(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let (dtype, x) = ops.x()?;
    let (id, idx) = ops.input(1)?;
    index_dtype(op, "indices", *id)?;
    if idx.len() != x.len() || x.is_empty() {
        return Err(format!(
            "{op} indices {idx:?} must have data {x:?}'s rank (>= 1)"
        ));
    }
    normalize_axis(ops.node.attr_int("axis", 0), x.len())?;
    Ok(vec![(*dtype, idx.clone())])
}

/// ScatterElements: the data's shape; indices and updates share a shape of the data's rank.
pub(super) fn scatter_elements(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let (dtype, x) = ops.x()?;
    let (id, idx) = ops.input(1)?;
    let (ud, upd) = ops.input(2)?;
    index_dtype(op, "indices", *id)?;
    if idx.len() != x.len() || x.is_empty() || upd != idx {
        return Err(format!(
            "{op} indices {idx:?} and updates {upd:?} must share a shape of data {x:?}'s rank (>= 1)"
        ));
    }
    if ud != dtype {
        return Err(format!(
            "{op} updates are {ud}, data {dtype}; they must match"
        ));
    }
    normalize_axis(ops.node.attr_int("axis", 0), x.len())?;
    reduction(ops)?;
    Ok(vec![(*dtype, x.clone())])
}

fn reduction(ops: &Operands<'_>) -> Result<(), String> {
    match ops.node.attr_str("reduction", "none") {
        "none" | "add" | "mul" | "max" | "min" => Ok(()),
        other => Err(format!(
            "{} reduction '{other}' (expected none, add, mul, max or min)",
            ops.node.op
        )),
    }
}

/// The shape GatherND gives and ScatterND's updates have: `data[:b] + indices[b:-1] +
/// data[b + k:]`, with `k` the indices' last extent and `b` the batch dimensions.
fn nd_slices(op: OpKind, x: &[usize], idx: &[usize], batch: usize) -> Result<Vec<usize>, String> {
    let Some((&k, lead)) = idx.split_last() else {
        return Err(format!("{op} indices must have rank >= 1"));
    };
    if batch > lead.len() || batch > x.len() || x[..batch] != idx[..batch] {
        return Err(format!(
            "{op} batch_dims {batch} does not fit data {x:?} and indices {idx:?}"
        ));
    }
    if k < 1 || batch + k > x.len() {
        return Err(format!(
            "{op} indices' last extent {k} must be 1 to {} for data {x:?}",
            x.len() - batch
        ));
    }
    let mut out = lead.to_vec();
    out.extend(&x[batch + k..]);
    Ok(out)
}

pub(super) fn gather_nd(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let (dtype, x) = ops.x()?;
    let (id, idx) = ops.input(1)?;
    if *id != DType::I64 {
        return Err(format!("{op} indices must be i64, got {id}"));
    }
    let batch = usize::try_from(ops.node.attr_int("batch_dims", 0))
        .map_err(|_| format!("{op} batch_dims must not be negative"))?;
    Ok(vec![(*dtype, nd_slices(op, x, idx, batch)?)])
}

pub(super) fn scatter_nd(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let (dtype, x) = ops.x()?;
    let (id, idx) = ops.input(1)?;
    let (ud, upd) = ops.input(2)?;
    if *id != DType::I64 {
        return Err(format!("{op} indices must be i64, got {id}"));
    }
    if ud != dtype {
        return Err(format!(
            "{op} updates are {ud}, data {dtype}; they must match"
        ));
    }
    let want = nd_slices(op, x, idx, 0)?;
    if *upd != want {
        return Err(format!(
            "{op} updates have shape {upd:?}; data {x:?} and indices {idx:?} need {want:?}"
        ));
    }
    reduction(ops)?;
    Ok(vec![(*dtype, x.clone())])
}

/// DepthToSpace and SpaceToDepth: `[N, C, H, W]` with `blocksize` b; DepthToSpace gives
/// `[N, C / b², H b, W b]` (C divisible by b²), SpaceToDepth `[N, C b², H / b, W / b]`
/// (H and W divisible by b).
pub(super) fn depth_space(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let (dtype, x) = ops.x()?;
    let &[n, c, h, w] = x.as_slice() else {
        return Err(format!("{op} needs a 4-D input [N, C, H, W], got {x:?}"));
    };
    let b = usize::try_from(ops.node.attr_int("blocksize", 0))
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("{op} needs a positive blocksize"))?;
    let bb = b.checked_mul(b).ok_or("blocksize too large")?;
    let shape = if op == OpKind::DepthToSpace {
        match ops.node.attr_str("mode", "DCR") {
            "DCR" | "CRD" => {}
            m => return Err(format!("DepthToSpace mode '{m}' (expected DCR or CRD)")),
        }
        if c % bb != 0 {
            return Err(format!(
                "DepthToSpace channels {c} are not divisible by {bb}"
            ));
        }
        let hb = h.checked_mul(b).ok_or("output too large")?;
        let wb = w.checked_mul(b).ok_or("output too large")?;
        vec![n, c / bb, hb, wb]
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(format!(
                "SpaceToDepth extents {h}x{w} are not divisible by {b}"
            ));
        }
        let cb = c.checked_mul(bb).ok_or("output too large")?;
        vec![n, cb, h / b, w / b]
    };
    Ok(vec![(*dtype, shape)])
}
