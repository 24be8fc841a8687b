//! Col2Im: sums column blocks back into an image, the inverse arrangement of im2col.

use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::{data, KernelError};

/// `input` `[N, C * prod(block), L]` holds, for each of the `L` block positions (the
/// sliding positions of the dilated block over the padded image, row-major) and each
/// block element `e`, the value added to image element `pos * stride + e * dilation -
/// pad_begin` of channel `c` (elements that land in the padding are dropped).
pub(super) fn col2im(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let image: Vec<usize> = out.shape()[2..].to_vec();
    let block: Vec<usize> = data::load_ints(&inputs[2])
        .into_iter()
        .map(|v| v as usize)
        .collect();
    let g = baton_delegate_api::shape::col2im_geometry(node, x.shape, &image, &block)
        .map_err(|m| crate::shape_err(node, m))?;
    let (batch, channels) = (out.shape()[0], out.shape()[1]);
    let block_len: usize = block.iter().product();
    let positions: usize = g.positions.iter().product();
    let plane: usize = image.iter().product();
    let image_strides = data::strides(&image);
    let float = x.dtype.is_float();
    let (xf, xi) = if float {
        (data::load_f64(x), Vec::new())
    } else {
        (Vec::new(), data::load_ints(x))
    };
    let mut yf = vec![0.0f64; if float { batch * channels * plane } else { 0 }];
    let mut yi = vec![0i128; if float { 0 } else { batch * channels * plane }];
    let block_idx = data::all_indices(&block);
    let pos_idx = data::all_indices(&g.positions);
    for n in 0..batch {
        for c in 0..channels {
            for (e, be) in block_idx.iter().enumerate() {
                let row = ((n * channels + c) * block_len + e) * positions;
                for (p, bp) in pos_idx.iter().enumerate() {
                    let mut off = 0usize;
                    let mut inside = true;
                    for d in 0..image.len() {
                        let at = (bp[d] * g.strides[d] + be[d] * g.dilations[d]) as i64
                            - g.pad_begin[d] as i64;
                        if at < 0 || at >= image[d] as i64 {
                            inside = false;
                            break;
                        }
                        off += at as usize * image_strides[d];
                    }
                    if !inside {
                        continue;
                    }
                    let o = (n * channels + c) * plane + off;
                    if float {
                        yf[o] += xf[row + p];
                    } else {
                        yi[o] = yi[o].wrapping_add(xi[row + p]);
                    }
                }
            }
        }
    }
    if float {
        data::store_floats(out, &yf, false);
    } else {
        data::store_ints(out, &yi);
    }
    Ok(())
}
