//! The Reduce ops: Sum, Mean, Max, Min, Prod, L1, L2, LogSumExp and SumSquare over f32,
//! f16, f64 (and bf16), Sum, Mean, Max, Min, Prod, L1 and SumSquare over i32 and i64, and
//! Max and Min over bool.

use baton_delegate_api::ir::{Node, OpKind};
use baton_delegate_api::shape::normalize_axis;
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::store_rounded;
use crate::data::{for_each_index, load, load_f64, load_ints, store_ints, strides};
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
    if x.dtype.is_float() {
        let r = reduce_floats(node.op, &load_f64(x), &target, out_len, count);
        store_rounded(out, &r);
        return Ok(());
    }
    // Integers and bool (0 and 1) in i128, wrapped to the dtype's bits on store; the
    // identities of Max and Min are the dtype's extremes.
    let (lo, hi) = x.dtype.int_range().unwrap_or((0, 1));
    let r = reduce_ints(node, &load_ints(x), &target, out_len, count, (lo, hi))?;
    store_ints(out, &r);
    Ok(())
}

/// Float reductions in f64. Sums start from +0.0 (mean = sum / count, so 0/0 = NaN for
/// nothing); Max and Min from -inf and +inf, NaN as soon as one element is NaN, the first
/// of equal values kept; Prod from 1. LogSumExp subtracts each output's maximum before
/// exponentiating, so it neither overflows nor underflows to `log(0)`; with an infinite
/// or NaN maximum the result is that maximum (of nothing: -inf).
fn reduce_floats(
    op: OpKind,
    v: &[f64],
    target: &[usize],
    out_len: usize,
    count: usize,
) -> Vec<f64> {
    let start = match op {
        OpKind::ReduceMax | OpKind::ReduceLogSumExp => f64::NEG_INFINITY,
        OpKind::ReduceMin => f64::INFINITY,
        OpKind::ReduceProd => 1.0,
        _ => 0.0,
    };
    let mut acc = vec![start; out_len];
    for (&e, &t) in v.iter().zip(target) {
        let a = &mut acc[t];
        match op {
            // `e > NaN` is false, so a NaN, once taken, stays.
            OpKind::ReduceMax | OpKind::ReduceLogSumExp if e.is_nan() || e > *a => *a = e,
            OpKind::ReduceMin if e.is_nan() || e < *a => *a = e,
            OpKind::ReduceMax | OpKind::ReduceMin | OpKind::ReduceLogSumExp => {}
            OpKind::ReduceProd => *a *= e,
            OpKind::ReduceL1 => *a += e.abs(),
            OpKind::ReduceL2 | OpKind::ReduceSumSquare => *a += e * e,
            _ => *a += e,
        }
    }
    match op {
        OpKind::ReduceMean => acc.iter_mut().for_each(|a| *a /= count as f64),
        OpKind::ReduceL2 => acc.iter_mut().for_each(|a| *a = a.sqrt()),
        OpKind::ReduceLogSumExp => {
            let max = acc;
            let mut sum = vec![0.0; out_len];
            for (&e, &t) in v.iter().zip(target) {
                if max[t].is_finite() {
                    sum[t] += (e - max[t]).exp();
                }
            }
            return max
                .iter()
                .zip(&sum)
                .map(|(&m, &s)| if m.is_finite() { m + s.ln() } else { m })
                .collect();
        }
        _ => {}
    }
    acc
}

/// Integer (and bool) reductions on exact values: Sum, Prod, L1 and SumSquare wrap (the
/// caller keeps the dtype's low bits, which is wrapping in the dtype), Mean is the exact
/// mean truncated toward zero, Max and Min start from the dtype's extremes `lo` and `hi`.
fn reduce_ints(
    node: &Node,
    v: &[i128],
    target: &[usize],
    out_len: usize,
    count: usize,
    (lo, hi): (i128, i128),
) -> Result<Vec<i128>, KernelError> {
    let op = node.op;
    if op == OpKind::ReduceMean && count == 0 && out_len > 0 {
        return Err(KernelError::Arithmetic {
            node: node.label(),
            message: "integer ReduceMean over an empty set is undefined".into(),
        });
    }
    let start = match op {
        OpKind::ReduceMax => lo,
        OpKind::ReduceMin => hi,
        OpKind::ReduceProd => 1,
        _ => 0,
    };
    // Wrapping in 64 bits then truncating to the dtype equals wrapping in the dtype, and
    // keeps every intermediate in range; Mean's sum (fewer than 2^64 i64 values) fits i128.
    let mut acc = vec![start; out_len];
    for (&e, &t) in v.iter().zip(target) {
        let a = &mut acc[t];
        *a = match op {
            OpKind::ReduceMax => (*a).max(e),
            OpKind::ReduceMin => (*a).min(e),
            OpKind::ReduceMean => *a + e,
            OpKind::ReduceProd => i128::from((*a as i64).wrapping_mul(e as i64)),
            OpKind::ReduceL1 => i128::from((*a as i64).wrapping_add((e as i64).wrapping_abs())),
            OpKind::ReduceSumSquare => {
                let sq = (e as i64).wrapping_mul(e as i64);
                i128::from((*a as i64).wrapping_add(sq))
            }
            _ => i128::from((*a as i64).wrapping_add(e as i64)),
        };
    }
    if op == OpKind::ReduceMean {
        acc.iter_mut().for_each(|a| *a /= count as i128);
    }
    Ok(acc)
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
