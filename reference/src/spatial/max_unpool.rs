//! MaxUnpool: scatters the pooled values to the positions their indices name; everything
//! else is zero.

use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::{data, KernelError};

/// Each index is a position in the row-major order of the whole unpooled tensor (the
/// shape the attributes give), as MaxPool's `Indices` output counts them. With a larger
/// `output_shape` that tensor sits at the start of every axis (ONNX's reference does
/// so). A later value at a repeated index overwrites an earlier one.
pub(super) fn max_unpool(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let inferred = baton_delegate_api::shape::max_unpool_shape(node, x.shape)
        .map_err(|m| crate::shape_err(node, m))?;
    let total: usize = inferred.iter().product();
    let xs = data::load_f64(x);
    let idx = data::load::<i64>(&inputs[1]);
    let mut y = vec![0.0f64; total];
    for (&v, &i) in xs.iter().zip(&idx) {
        let at = usize::try_from(i)
            .ok()
            .filter(|&a| a < total)
            .ok_or_else(|| {
                crate::unsupported(
                    node,
                    format!("index {i} is outside the unpooled tensor {inferred:?}"),
                )
            })?;
        y[at] = v;
    }
    let shape = out.shape().to_vec();
    if shape == inferred {
        data::store_floats(out, &y, false);
        return Ok(());
    }
    let mut full = vec![0.0f64; shape.iter().product()];
    let out_strides = data::strides(&shape);
    let mut src = 0;
    data::for_each_index(&inferred, |pos| {
        let dst: usize = pos.iter().zip(&out_strides).map(|(p, s)| p * s).sum();
        full[dst] = y[src];
        src += 1;
    });
    data::store_floats(out, &full, false);
    Ok(())
}
