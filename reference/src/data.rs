//! Reading and writing tensor views element-wise, and index arithmetic shared by the
//! kernels. Reads copy into owned vectors, so views of any alignment are fine.

use baton_delegate_api::dtype;
use baton_delegate_api::ir::DType;
use baton_delegate_api::{TensorMut, TensorRef};
use half::f16;

/// The elements of `t` as `T` (the caller has checked the dtype and byte length).
pub(crate) fn load<T: bytemuck::Pod>(t: &TensorRef<'_>) -> Vec<T> {
    bytemuck::pod_collect_to_vec(t.data)
}

/// The elements of an f32 or f16 tensor as f32 (f16 widens exactly).
pub(crate) fn load_f32(t: &TensorRef<'_>) -> Vec<f32> {
    match t.dtype {
        DType::F16 => load::<u16>(t)
            .into_iter()
            .map(|b| f16::from_bits(b).to_f32())
            .collect(),
        _ => load::<f32>(t),
    }
}

/// Every element of `t` as f64: exact for every float dtype (and integers up to 2^53).
pub(crate) fn load_f64(t: &TensorRef<'_>) -> Vec<f64> {
    (0..t.len())
        .map(|i| dtype::element_f64(t.dtype, t.data, i))
        .collect()
}

/// Every element of an integer or bool tensor as i128, exactly (bool as 0 or 1).
pub(crate) fn load_ints(t: &TensorRef<'_>) -> Vec<i128> {
    (0..t.len())
        .map(|i| dtype::element_int(t.dtype, t.data, i).unwrap_or_default())
        .collect()
}

/// Overwrites an integer (or bool) output with `values`, each wrapped to the dtype's bits.
pub(crate) fn store_ints(out: &mut TensorMut<'_>, values: &[i128]) {
    let mut bytes = Vec::with_capacity(out.data.len());
    for &v in values {
        dtype::push_int(out.dtype, v, &mut bytes);
    }
    out.data.copy_from_slice(&bytes);
}

/// Overwrites a float output with `values`, each rounded once to the dtype (float8
/// out-of-range values per `saturate`, as in Cast).
pub(crate) fn store_floats(out: &mut TensorMut<'_>, values: &[f64], saturate: bool) {
    let mut bytes = Vec::with_capacity(out.data.len());
    for &v in values {
        dtype::push_float(out.dtype, v, saturate, &mut bytes);
    }
    out.data.copy_from_slice(&bytes);
}

/// Overwrites `out` with `values` (exactly `out`'s element count, of its dtype).
pub(crate) fn store<T: bytemuck::Pod>(out: &mut TensorMut<'_>, values: &[T]) {
    out.data.copy_from_slice(bytemuck::cast_slice(values));
}

/// Overwrites an f32 or f16 output, rounding each value once to the output's dtype.
pub(crate) fn store_f32(out: &mut TensorMut<'_>, values: &[f32]) {
    match out.dtype {
        DType::F16 => {
            let bits: Vec<u16> = values.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
            store(out, &bits);
        }
        _ => store(out, values),
    }
}

/// Overwrites an f32 or f16 output from f64 results, rounding each value once.
pub(crate) fn store_f64(out: &mut TensorMut<'_>, values: &[f64]) {
    match out.dtype {
        DType::F16 => {
            let bits: Vec<u16> = values.iter().map(|&v| f16::from_f64(v).to_bits()).collect();
            store(out, &bits);
        }
        DType::F64 => store(out, values),
        _ => {
            let v: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            store(out, &v);
        }
    }
}

/// The sum of `values` in order, starting from +0.0 as BLAS and numpy accumulators do
/// (`Iterator::sum` starts from -0.0, which would make an empty sum -0.0).
pub(crate) fn sum_f64(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |acc, v| acc + v)
}

/// Row-major strides (in elements) of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `f` with every multi-index of `shape`, in row-major order (once with the empty
/// index for rank 0, never if any extent is 0).
pub(crate) fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    let count: usize = shape.iter().product();
    let mut idx = vec![0; shape.len()];
    for _ in 0..count {
        f(&idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Every multi-index of `shape`, in row-major order (for small shapes: kernels and
/// spatial extents).
pub(crate) fn all_indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for_each_index(shape, |idx| out.push(idx.to_vec()));
    out
}

/// For each element of `out_shape` in row-major order, the flat offset of the element of
/// `in_shape` it reads under numpy broadcasting: shapes are right-aligned, missing leading
/// dimensions and extents of 1 repeat. The caller has checked that `in_shape` broadcasts
/// to `out_shape`.
pub(crate) fn broadcast_offsets(in_shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let lead = out_shape.len() - in_shape.len();
    let in_strides = strides(in_shape);
    let bstrides: Vec<usize> = (0..out_shape.len())
        .map(|d| match d.checked_sub(lead) {
            Some(i) if in_shape[i] != 1 => in_strides[i],
            _ => 0,
        })
        .collect();
    let mut offsets = Vec::with_capacity(out_shape.iter().product());
    for_each_index(out_shape, |idx| {
        offsets.push(idx.iter().zip(&bstrides).map(|(i, s)| i * s).sum());
    });
    offsets
}

/// The input coordinate of window tap `tap` for output position `out` on one spatial
/// axis: `out * stride + tap * dilation - pad_begin` (may lie in the padding: negative or
/// past the input).
pub(crate) fn tap_position(
    out: usize,
    tap: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
) -> i64 {
    (out * stride + tap * dilation) as i64 - pad_begin as i64
}
