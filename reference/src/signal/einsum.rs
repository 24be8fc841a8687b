//! Einsum: every product of operand elements summed into its output element.

use baton_delegate_api::shape::einsum;
use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::data;
use crate::KernelError;

pub(super) fn einsum(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.to_vec()).collect();
    let e = einsum::parse(node.attr_str("equation", ""), &shapes)
        .map_err(|m| crate::shape_err(node, m))?;
    // Per operand and label, how far one step of the label moves in the operand (0 where
    // the operand lacks the label or broadcasts it; a repeated label adds its strides).
    let steps: Vec<Vec<usize>> = e
        .inputs
        .iter()
        .zip(&shapes)
        .map(|(labels, shape)| {
            let strides = data::strides(shape);
            let mut step = vec![0; e.extents.len()];
            for ((&l, &s), &extent) in labels.iter().zip(&strides).zip(shape) {
                if extent > 1 || e.extents[l] == 1 {
                    step[l] += s;
                }
            }
            step
        })
        .collect();
    let summed: Vec<usize> = (0..e.extents.len())
        .filter(|l| !e.output.contains(l))
        .collect();
    let summed_shape: Vec<usize> = summed.iter().map(|&l| e.extents[l]).collect();
    let out_shape = e.output_shape();
    // Offsets of every operand for each output position and each summed position.
    let offsets = |labels: &[usize], shape: &[usize]| -> Vec<Vec<usize>> {
        data::all_indices(shape)
            .iter()
            .map(|idx| {
                steps
                    .iter()
                    .map(|step| labels.iter().zip(idx).map(|(&l, &i)| step[l] * i).sum())
                    .collect()
            })
            .collect()
    };
    let out_at = offsets(&e.output, &out_shape);
    let sum_at = offsets(&summed, &summed_shape);
    let at = |o: &[usize], s: &[usize], k: usize| o[k] + s[k];
    if out.dtype.is_float() {
        let values: Vec<Vec<f64>> = inputs.iter().map(data::load_f64).collect();
        let r: Vec<f64> = out_at
            .iter()
            .map(|o| {
                data::sum_f64(
                    sum_at
                        .iter()
                        .map(|s| (0..values.len()).fold(1.0, |p, k| p * values[k][at(o, s, k)])),
                )
            })
            .collect();
        data::store_floats(out, &r, false);
    } else {
        let values: Vec<Vec<i128>> = inputs.iter().map(data::load_ints).collect();
        let r: Vec<i128> = out_at
            .iter()
            .map(|o| {
                let sum = sum_at.iter().fold(0i64, |acc, s| {
                    let p = (0..values.len())
                        .fold(1i64, |p, k| p.wrapping_mul(values[k][at(o, s, k)] as i64));
                    acc.wrapping_add(p)
                });
                i128::from(sum)
            })
            .collect();
        data::store_ints(out, &r);
    }
    Ok(())
}
