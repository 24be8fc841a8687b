//! ArgMax and ArgMin: the i64 position of the largest (smallest) element along `axis`.

use baton_delegate_api::ir::{Node, OpKind};
use baton_delegate_api::shape::normalize_axis;
use baton_delegate_api::{TensorMut, TensorRef};

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
