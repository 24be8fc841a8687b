//! Conv (1-D and 2-D; groups, dilations, strides, pads, auto_pad, optional bias).

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::ConvGeometry;
use baton_delegate_api::{TensorMut, TensorRef};

use super::data::{all_indices, load_f32, store_f64, strides, tap_position};
use super::{shape_err, KernelError};

/// Direct convolution (cross-correlation, as ONNX defines Conv):
///
/// `y[n, m, o] = bias[m] + sum over c in m's group, taps t of
///  x[n, c, o * stride + t * dilation - pad_begin] * w[m, c - group_start, t]`,
///
/// where taps falling in the padding read 0. The sum is accumulated in f64.
pub(crate) fn conv(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let g = ConvGeometry::new(node, x.shape, w.shape).map_err(|m| shape_err(node, m))?;
    let win = &g.window;
    let c_per_group = g.in_channels / g.group;
    let m_per_group = g.out_channels / g.group;
    let in_sp = &g.in_spatial;
    let in_sp_strides = strides(in_sp);
    let in_sp_size: usize = in_sp.iter().product();
    let taps = all_indices(&win.kernel);
    let positions = all_indices(&g.out_spatial);

    let xv = load_f32(x);
    let wv = load_f32(w);
    let bias = inputs.get(2).map(load_f32);
    let mut r = Vec::with_capacity(g.batch * g.out_channels * positions.len());
    for n in 0..g.batch {
        for m in 0..g.out_channels {
            let group_start = (m / m_per_group) * c_per_group;
            for o in &positions {
                let mut acc = 0.0f64;
                for c in 0..c_per_group {
                    let x_plane = &xv[(n * g.in_channels + group_start + c) * in_sp_size..];
                    let w_taps = &wv[(m * c_per_group + c) * taps.len()..];
                    for (t_flat, t) in taps.iter().enumerate() {
                        // Flat offset of the tap in the input plane, or None in the padding.
                        let mut offset = 0;
                        let mut inside = true;
                        for d in 0..in_sp.len() {
                            let p = tap_position(
                                o[d],
                                t[d],
                                win.strides[d],
                                win.dilations[d],
                                win.pad_begin[d],
                            );
                            if p < 0 || p >= in_sp[d] as i64 {
                                inside = false;
                                break;
                            }
                            offset += p as usize * in_sp_strides[d];
                        }
                        if inside {
                            acc += x_plane[offset] as f64 * w_taps[t_flat] as f64;
                        }
                    }
                }
                if let Some(b) = &bias {
                    acc += b[m] as f64;
                }
                r.push(acc);
            }
        }
    }
    store_f64(out, &r);
    Ok(())
}
