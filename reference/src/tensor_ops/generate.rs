//! Range and OneHot: outputs generated from a few operand values.

use baton_delegate_api::shape::{range_length_f64, range_length_i64};
use baton_delegate_api::{DType, Node, TensorMut, TensorRef};

use super::{axis_of, move_element};
use crate::data::{load_f64, load_ints, store_floats, store_ints};
use crate::KernelError;

/// The length of the Range `inputs` describe, from their values (any Range dtype; the
/// shape rules read only constant i64 operands).
pub(crate) fn range_length(node: &Node, inputs: &[TensorRef<'_>]) -> Result<usize, KernelError> {
    let dtype = inputs[0].dtype;
    let r = if dtype.is_int() {
        let v: Vec<i128> = inputs.iter().map(|t| first_int(t)).collect();
        let i = |k: usize| i64::try_from(v[k]).unwrap_or_default();
        range_length_i64(i(0), i(1), i(2))
    } else {
        let v: Vec<f64> = inputs.iter().map(|t| first_f64(t)).collect();
        range_length_f64(v[0], v[1], v[2])
    };
    r.map_err(|m| crate::shape_err(node, m))
}

fn first_int(t: &TensorRef<'_>) -> i128 {
    load_ints(t).first().copied().unwrap_or_default()
}

fn first_f64(t: &TensorRef<'_>) -> f64 {
    load_f64(t).first().copied().unwrap_or_default()
}

/// `start + i * delta`: integers exactly (wrapping to the dtype), floats in f64 rounded
/// once to the dtype.
pub(super) fn range(inputs: &[TensorRef<'_>], out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let n = out.len();
    if out.dtype.is_int() {
        let (start, delta) = (first_int(&inputs[0]), first_int(&inputs[2]));
        let v: Vec<i128> = (0..n).map(|i| start + i as i128 * delta).collect();
        store_ints(out, &v);
    } else {
        let (start, delta) = (first_f64(&inputs[0]), first_f64(&inputs[2]));
        let v: Vec<f64> = (0..n).map(|i| start + i as f64 * delta).collect();
        store_floats(out, &v, false);
    }
    Ok(())
}

/// One-hot lines along `axis`: `values[1]` where the position equals the index (negative
/// counting from `depth`; floats truncated), `values[0]` elsewhere.
pub(super) fn one_hot(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (idx, values) = (&inputs[0], &inputs[2]);
    let axis = axis_of(node, node.attr_int("axis", -1), idx.shape.len() + 1)?;
    let depth = out.shape()[axis] as i128;
    let indices: Vec<i128> = if idx.dtype.is_int() {
        load_ints(idx)
    } else {
        // Truncated toward zero, as ONNX casts to int64; NaN matches no position.
        load_f64(idx)
            .into_iter()
            .map(|v| {
                if v.is_finite() {
                    v.trunc() as i128
                } else {
                    i128::MIN
                }
            })
            .collect()
    };
    let inner: usize = idx.shape[axis..].iter().product();
    let size = out.dtype.size();
    let at = |o: usize, d: usize, i: usize| (o * depth as usize + d) * inner + i;
    for (k, &raw) in indices.iter().enumerate() {
        let (o, i) = (k / inner.max(1), k % inner.max(1));
        let hot = if raw < 0 { raw + depth } else { raw };
        for d in 0..depth as usize {
            let which = usize::from(hot == d as i128);
            move_element(out.data, at(o, d, i), values.data, which, size);
        }
    }
    Ok(())
}

/// The dtypes OneHot reads indices of: every integer and the usual floats.
pub(super) const ONE_HOT_INDICES: &[DType] = &[
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

/// The dtypes of Range.
pub(super) const RANGE: &[DType] = &[
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];
