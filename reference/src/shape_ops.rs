//! Reshape, Flatten, Transpose and Concat: byte moves by element size, for every dtype.

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::{normalize_axis, transpose_perm};
use baton_delegate_api::{TensorMut, TensorRef};

use super::data::{for_each_index, strides};
use super::{shape_err, KernelError};

/// Reshape and Flatten: the row-major element order is unchanged, so the bytes are copied.
pub(crate) fn copy(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    out.data.copy_from_slice(x.data);
    Ok(())
}

/// `out[i_0, ..., i_r] = x[j]` where `j[perm[d]] = i_d` (default perm reverses the axes).
pub(crate) fn transpose(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let perm = transpose_perm(node, x.shape.len()).map_err(|m| shape_err(node, m))?;
    let size = x.dtype.size();
    let in_strides = strides(x.shape);
    let out_shape: Vec<usize> = out.shape().to_vec();
    let mut k = 0;
    for_each_index(&out_shape, |idx| {
        let src: usize = idx
            .iter()
            .zip(&perm)
            .map(|(&i, &p)| i * in_strides[p])
            .sum();
        out.data[k * size..(k + 1) * size].copy_from_slice(&x.data[src * size..(src + 1) * size]);
        k += 1;
    });
    Ok(())
}

/// Concatenation along `axis` (default 0, may be negative): for each index of the axes
/// before `axis`, the operands' blocks one after another.
pub(crate) fn concat(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let shape = out.shape().to_vec();
    let axis =
        normalize_axis(node.attr_int("axis", 0), shape.len()).map_err(|m| shape_err(node, m))?;
    let outer: usize = shape[..axis].iter().product();
    let inner_bytes: usize = shape[axis + 1..].iter().product::<usize>() * out.dtype.size();
    let mut at = 0;
    for o in 0..outer {
        for t in inputs {
            let block = t.shape[axis] * inner_bytes;
            out.data[at..at + block].copy_from_slice(&t.data[o * block..(o + 1) * block]);
            at += block;
        }
    }
    Ok(())
}
