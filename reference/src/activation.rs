//! Sigmoid, Tanh and Softmax (f32 and f16, evaluated in f64 and rounded once).

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::normalize_axis;
use baton_delegate_api::{TensorMut, TensorRef};

use super::data::{load_f32, load_f64, store_f64, sum_f64};
use super::{shape_err, KernelError};

/// `1 / (1 + exp(-x))`, in the form that cannot overflow for either sign. NaN stays NaN.
pub(crate) fn sigmoid(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let r: Vec<f64> = load_f32(x)
        .into_iter()
        .map(|v| {
            let v = v as f64;
            if v >= 0.0 {
                1.0 / (1.0 + (-v).exp())
            } else {
                // Also the NaN branch: exp(NaN) is NaN.
                let e = v.exp();
                e / (1.0 + e)
            }
        })
        .collect();
    store_f64(out, &r);
    Ok(())
}

/// Hyperbolic tangent.
pub(crate) fn tanh(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let r: Vec<f64> = load_f32(x).into_iter().map(|v| (v as f64).tanh()).collect();
    store_f64(out, &r);
    Ok(())
}

/// Softmax along `axis` (default -1; ONNX opset 13 semantics): for each line along the
/// axis, `exp(x - max) / sum(exp(x - max))` with the sum in f64. A line of all -inf, or
/// one holding +inf or NaN, comes out all NaN (ONNX Runtime's arithmetic gives the same).
pub(crate) fn softmax(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let r = softmax_lines(node, x, |d, sum| d.exp() / sum)?;
    store_f64(out, &r);
    Ok(())
}

/// The shared walk of Softmax and LogSoftmax: for each line along `axis` (default -1),
/// `f(x - max, sum(exp(x - max)))` per element, in f64. Subtracting the maximum first
/// keeps large logits finite; `>` skips NaN when finding it, and a NaN then poisons the
/// sum and so the whole line.
pub(crate) fn softmax_lines(
    node: &Node,
    x: &TensorRef<'_>,
    f: impl Fn(f64, f64) -> f64,
) -> Result<Vec<f64>, KernelError> {
    let shape = x.shape;
    let axis = normalize_axis(node.attr_int("axis", -1), shape.len())
        .map_err(|m| shape_err(node, format!("{}: {m}", node.op)))?;
    let outer: usize = shape[..axis].iter().product();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    // f64 holds every f16, f32 and f64 operand exactly.
    let v = load_f64(x);
    let mut r = vec![0.0f64; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let max = (0..n)
                .map(|k| v[at(k)])
                .fold(f64::NEG_INFINITY, |m, e| if e > m { e } else { m });
            let sum = sum_f64((0..n).map(|k| (v[at(k)] - max).exp()));
            for k in 0..n {
                r[at(k)] = f(v[at(k)] - max, sum);
            }
        }
    }
    Ok(r)
}
