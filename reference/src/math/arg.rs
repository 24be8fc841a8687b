//! ArgMax and ArgMin (the i64 position of the largest or smallest element along `axis`),
//! Hardmax and TopK.

use std::cmp::Ordering;

use baton_delegate_api::ir::{Node, OpKind};
use baton_delegate_api::shape::normalize_axis;
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::store_rounded;
use crate::data::{load_f64, load_ints, store};
use crate::{shape_err, KernelError};

/// Scans each line along `axis`. Ties keep the first position, or the last with
/// `select_last_index`; a NaN beats every number (numpy's `argmax` and `argmin` both
/// return the first NaN), so a line holding one gives a NaN's position. An empty line
/// has no position: the shape rule refuses it.
pub(crate) fn arg_extreme(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let rank = x.shape.len();
    let axis = normalize_axis(node.attr_int("axis", 0), rank.max(1))
        .map_err(|m| shape_err(node, format!("axis: {m}")))?;
    let last = node.attr_int("select_last_index", 0) != 0;
    let max = node.op == OpKind::ArgMax;
    let n = x.shape.get(axis).copied().unwrap_or(1);
    let inner: usize = x.shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    let outer: usize = x.shape[..axis.min(rank)].iter().product();
    // Order every element by one key: floats as f64 with NaN above everything, integers
    // exactly; `better(a, b)` says whether `a` replaces the current best `b`.
    let keys: Vec<(bool, f64, i128)> = if x.dtype.is_float() {
        load_f64(x)
            .into_iter()
            .map(|v| (v.is_nan(), v, 0))
            .collect()
    } else {
        load_ints(x).into_iter().map(|v| (false, 0.0, v)).collect()
    };
    let better = |a: &(bool, f64, i128), b: &(bool, f64, i128)| -> bool {
        if b.0 {
            return last && a.0;
        }
        if a.0 {
            return true;
        }
        let ord = a.1.partial_cmp(&b.1).map(|o| o.then(a.2.cmp(&b.2)));
        match ord {
            Some(std::cmp::Ordering::Equal) => last,
            Some(o) => (o == std::cmp::Ordering::Greater) == max,
            None => false,
        }
    };
    let mut r = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let mut best = 0usize;
            for k in 1..n {
                if better(&keys[at(k)], &keys[at(best)]) {
                    best = k;
                }
            }
            r.push(best as i64);
        }
    }
    store(out, &r);
    Ok(())
}

/// The order TopK and Hardmax rank elements by: `a` before `b` when it is larger (or
/// smaller, for `largest` false), NaN counting as the largest value, equal values by
/// position (the caller sorts stably).
fn rank_order(largest: bool) -> impl Fn(&(bool, f64, i128), &(bool, f64, i128)) -> Ordering {
    move |a, b| {
        let ascending = match (a.0, b.0) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => {
                a.1.partial_cmp(&b.1)
                    .map_or(Ordering::Equal, |o| o.then(a.2.cmp(&b.2)))
            }
        };
        if largest {
            ascending.reverse()
        } else {
            ascending
        }
    }
}

/// Each element's sort key (see [`rank_order`]).
fn keys(x: &TensorRef<'_>) -> Vec<(bool, f64, i128)> {
    if x.dtype.is_float() {
        load_f64(x)
            .into_iter()
            .map(|v| (v.is_nan(), v, 0))
            .collect()
    } else {
        load_ints(x).into_iter().map(|v| (false, 0.0, v)).collect()
    }
}

/// The flat positions of each line along `axis` of `shape`, line by line.
fn lines(shape: &[usize], axis: usize) -> impl Iterator<Item = Vec<usize>> + '_ {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    (0..outer * inner).map(move |l| {
        let (o, i) = (l / inner.max(1), l % inner.max(1));
        (0..n).map(|k| (o * n + k) * inner + i).collect()
    })
}

/// Hardmax: 1 at the first largest element of each line along `axis`, else 0.
pub(crate) fn hardmax(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let axis = normalize_axis(node.attr_int("axis", -1), x.shape.len())
        .map_err(|m| shape_err(node, format!("axis: {m}")))?;
    let k = keys(x);
    let order = rank_order(true);
    let mut r = vec![0.0; x.len()];
    for line in lines(x.shape, axis) {
        // The first of the best: `min_by` keeps the first of equal elements.
        if let Some(&best) = line.iter().min_by(|&&a, &&b| order(&k[a], &k[b])) {
            r[best] = 1.0;
        }
    }
    store_rounded(out, &r);
    Ok(())
}

/// TopK: the first `k` elements of each line along `axis` in [`rank_order`], values
/// moved bit for bit, positions as i64.
pub(crate) fn top_k(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let axis = normalize_axis(node.attr_int("axis", -1), x.shape.len())
        .map_err(|m| shape_err(node, format!("axis: {m}")))?;
    let k = outputs[0].shape()[axis];
    let key = keys(x);
    let order = rank_order(node.attr_int("largest", 1) != 0);
    let size = x.dtype.size();
    let (mut values, mut positions) = (Vec::with_capacity(x.data.len()), Vec::new());
    for line in lines(x.shape, axis) {
        let mut ranked: Vec<usize> = (0..line.len()).collect();
        ranked.sort_by(|&a, &b| order(&key[line[a]], &key[line[b]]));
        ranked.truncate(k);
        for &r in &ranked {
            values.push(line[r]);
            positions.push(r as i64);
        }
    }
    // `values` and `positions` are in line order; the output's layout puts the `k`
    // results of a line along `axis`, so scatter them back to their places.
    let out_lines: Vec<Vec<usize>> = lines(outputs[0].shape(), axis).collect();
    let mut idx = vec![0i64; positions.len()];
    for (l, line) in out_lines.iter().enumerate() {
        for (j, &at) in line.iter().enumerate() {
            let src = values[l * k + j];
            outputs[0].data[at * size..(at + 1) * size]
                .copy_from_slice(&x.data[src * size..(src + 1) * size]);
            idx[at] = positions[l * k + j];
        }
    }
    if let Some(out) = outputs.get_mut(1) {
        store(out, &idx);
    }
    Ok(())
}
