//! ReduceSum, ReduceMean and ReduceMax over f32, f16, f64, i32 and i64, and ReduceMax over
//! bool.

use baton_delegate_api::ir::{DType, Node, OpKind};
use baton_delegate_api::shape::normalize_axis;
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::store_rounded;
use crate::data::{for_each_index, load, load_f64, load_ints, store, strides};
use crate::{shape_err, KernelError};

/// Reduces `inputs[0]` over the node's axes (see the family's module docs for empty
/// reductions, NaN and integer rounding). `out` already has the shape the shape rule gives
/// for `keepdims`; the values are the same either way, in the same order.
pub(crate) fn reduce(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let Some(reduced) = reduced_axes(node, inputs)? else {
        // Empty axes with noop_with_empty_axes: the input, unchanged.
        out.data.copy_from_slice(x.data);
        return Ok(());
    };
    // Each input element's output element: the flat index in the keepdims shape, with the
    // reduced dimensions' coordinates dropped.
    let kept: Vec<usize> = x
        .shape
        .iter()
        .zip(&reduced)
        .map(|(&n, &r)| if r { 1 } else { n })
        .collect();
    let out_strides = strides(&kept);
    let mut target = Vec::with_capacity(x.len());
    for_each_index(x.shape, |idx| {
        let t = (0..idx.len())
            .filter(|&d| !reduced[d])
            .map(|d| idx[d] * out_strides[d])
            .sum::<usize>();
        target.push(t);
    });
    let out_len: usize = kept.iter().product();
    let count: usize = x
        .shape
        .iter()
        .zip(&reduced)
        .filter(|(_, &r)| r)
        .map(|(&n, _)| n)
        .product();
    match x.dtype {
        DType::F32 | DType::F16 | DType::F64 => {
            let r = reduce_floats(node.op, &load_f64(x), &target, out_len, count);
            store_rounded(out, &r);
            Ok(())
        }
        DType::Bool => {
            // Only ReduceMax takes bool (`supports`): the maximum of 0/1 is "any".
            let r = reduce_ints(node, &small_ints(x), &target, out_len, count, 0)?;
            let r: Vec<u8> = r.into_iter().map(|v| v as u8).collect();
            store(out, &r);
            Ok(())
        }
        DType::I32 => {
            let r = reduce_ints(
                node,
                &small_ints(x),
                &target,
                out_len,
                count,
                i32::MIN as i64,
            )?;
            let r: Vec<i32> = r.into_iter().map(|v| v as i32).collect();
            store(out, &r);
            Ok(())
        }
        _ => {
            let r = reduce_ints(node, &load::<i64>(x), &target, out_len, count, i64::MIN)?;
            store(out, &r);
            Ok(())
        }
    }
}

/// The elements of an i32 or bool tensor as i64.
fn small_ints(x: &TensorRef<'_>) -> Vec<i64> {
    load_ints(x).into_iter().map(|v| v as i64).collect()
}

/// Sum and mean in f64 from +0.0 (mean = sum / count, so 0/0 = NaN for nothing); max
/// from -inf, NaN as soon as one element is NaN, the first of equal values kept.
fn reduce_floats(
    op: OpKind,
    v: &[f64],
    target: &[usize],
    out_len: usize,
    count: usize,
) -> Vec<f64> {
    let start = if op == OpKind::ReduceMax {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    let mut acc = vec![start; out_len];
    for (&e, &t) in v.iter().zip(target) {
        let a = &mut acc[t];
        if op != OpKind::ReduceMax {
            *a += e;
        } else if e.is_nan() || e > *a {
            // `e > NaN` is false, so a NaN, once taken, stays.
            *a = e;
        }
    }
    if op == OpKind::ReduceMean {
        for a in &mut acc {
            *a /= count as f64;
        }
    }
    acc
}

/// Integer reductions on values widened to i64: Sum wraps (the caller truncates to the
/// dtype, which keeps the wrapped sum modulo 2^bits), Mean is the exact mean truncated
/// toward zero, Max starts from the dtype's minimum `lowest`.
fn reduce_ints(
    node: &Node,
    v: &[i64],
    target: &[usize],
    out_len: usize,
    count: usize,
    lowest: i64,
) -> Result<Vec<i64>, KernelError> {
    match node.op {
        OpKind::ReduceMax => {
            let mut acc = vec![lowest; out_len];
            for (&e, &t) in v.iter().zip(target) {
                acc[t] = acc[t].max(e);
            }
            Ok(acc)
        }
        OpKind::ReduceSum => {
            let mut acc = vec![0i64; out_len];
            for (&e, &t) in v.iter().zip(target) {
                acc[t] = acc[t].wrapping_add(e);
            }
            Ok(acc)
        }
        _ => {
            if count == 0 && out_len > 0 {
                return Err(KernelError::Arithmetic {
                    node: node.label(),
                    message: "integer ReduceMean over an empty set is undefined".into(),
                });
            }
            // i128 holds any sum of fewer than 2^64 i64 values exactly.
            let mut acc = vec![0i128; out_len];
            for (&e, &t) in v.iter().zip(target) {
                acc[t] += e as i128;
            }
            Ok(acc
                .into_iter()
                .map(|s| (s / count as i128) as i64)
                .collect())
        }
    }
}

/// One flag per input dimension (reduced or not), or `None` for a no-op. The shape rule
/// has already validated the axes (range, repeats, a single source); this re-reads them
/// from the constant input 1 or the `axes` attribute.
fn reduced_axes(node: &Node, inputs: &[TensorRef<'_>]) -> Result<Option<Vec<bool>>, KernelError> {
    let rank = inputs[0].shape.len();
    let axes: Vec<i64> = match inputs.get(1) {
        Some(t) => load::<i64>(t),
        None => node.attr_ints("axes").unwrap_or_default().to_vec(),
    };
    if axes.is_empty() {
        return Ok((node.attr_int("noop_with_empty_axes", 0) == 0).then(|| vec![true; rank]));
    }
    let mut flags = vec![false; rank];
    for a in axes {
        let d = normalize_axis(a, rank).map_err(|m| shape_err(node, format!("axes: {m}")))?;
        flags[d] = true;
    }
    Ok(Some(flags))
}
