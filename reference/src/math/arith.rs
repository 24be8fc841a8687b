//! Sign, Mod, IsNaN and IsInf: the element-wise ops whose integer and float forms differ
//! in more than width, or whose output is bool.

use baton_delegate_api::ir::{Node, OpKind};
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::store_rounded;
use crate::data::{broadcast_offsets, load_f64, load_ints, store, store_ints};
use crate::KernelError;

/// `-1`, `0` or `1`; floats keep NaN and give `+0` for both zeros (numpy's `sign`).
pub(crate) fn sign(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    if x.dtype.is_float() {
        let r: Vec<f64> = load_f64(x)
            .into_iter()
            .map(|v| {
                if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else if v == 0.0 {
                    0.0
                } else {
                    v
                }
            })
            .collect();
        store_rounded(out, &r);
    } else {
        let r: Vec<i128> = load_ints(x).into_iter().map(i128::signum).collect();
        store_ints(out, &r);
    }
    Ok(())
}

/// The remainder with numpy broadcasting. `fmod` 0 takes the divisor's sign (floored
/// division), `fmod` 1 the dividend's (truncated division). Integers are exact (the
/// remainder's magnitude is below the divisor's, so it fits the operands' type); floats
/// are exact too, as `%` on f64 values of f32 or f16 operands is.
pub(crate) fn modulo(
    node: &Node,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let floored = node.attr_int("fmod", 0) == 0;
    let shape = out.shape().to_vec();
    let ia = broadcast_offsets(a.shape, &shape);
    let ib = broadcast_offsets(b.shape, &shape);
    if a.dtype.is_float() {
        let (x, y) = (load_f64(a), load_f64(b));
        let r: Vec<f64> = ia
            .iter()
            .zip(&ib)
            .map(|(&i, &j)| {
                let (n, d) = (x[i], y[j]);
                let r = n % d;
                // A non-zero remainder whose sign differs from the divisor's moves by
                // one divisor; an infinite divisor then gives the divisor (numpy does).
                if floored && r != 0.0 && (r < 0.0) != (d < 0.0) {
                    r + d
                } else {
                    r
                }
            })
            .collect();
        store_rounded(out, &r);
        return Ok(());
    }
    let (x, y) = (load_ints(a), load_ints(b));
    let mut r = Vec::with_capacity(ia.len());
    for (k, (&i, &j)) in ia.iter().zip(&ib).enumerate() {
        let (n, d) = (x[i], y[j]);
        if d == 0 {
            return Err(KernelError::Arithmetic {
                node: node.label(),
                message: format!(
                    "integer remainder by zero (divisor element {j}, output element {k})"
                ),
            });
        }
        // i128 holds every operand type's values, so neither form overflows.
        let rem = n % d;
        r.push(if floored && rem != 0 && (rem < 0) != (d < 0) {
            rem + d
        } else {
            rem
        });
    }
    store_ints(out, &r);
    Ok(())
}

/// IsNaN, or IsInf with its `detect_negative` and `detect_positive` attributes, into bool.
pub(crate) fn classify(node: &Node, x: &TensorRef<'_>, out: &mut TensorMut<'_>) {
    let (neg, pos) = (
        node.attr_int("detect_negative", 1) != 0,
        node.attr_int("detect_positive", 1) != 0,
    );
    let test = |v: f64| match node.op {
        OpKind::IsNaN => v.is_nan(),
        _ => v.is_infinite() && if v < 0.0 { neg } else { pos },
    };
    let r: Vec<u8> = load_f64(x).into_iter().map(|v| u8::from(test(v))).collect();
    store(out, &r);
}
