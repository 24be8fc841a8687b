//! DeformConv: a convolution whose taps read the input at learned fractional offsets,
//! interpolated (bi)linearly.

use baton_delegate_api::shape::ConvGeometry;
use baton_delegate_api::{Node, TensorMut, TensorRef};

use super::given;
use crate::{data, shape_err, KernelError};

/// `y[n, m, o] = B[m] + sum over c in m's group, taps t of W[m, c', t] * mask[n, g, t, o] *
/// X[n, c](o * stride - pad_begin + t * dilation + offset[n, g, t, :, o])`, `g` the
/// offset group of channel `c`. A fractional position interpolates linearly along each
/// axis between its neighbours; neighbours outside `X` read 0 (ONNX's definition
/// samples with GridSample's `zeros` padding and aligned corners, i.e. in pixel
/// coordinates). Sums in f64, rounded once.
pub(super) fn deform_conv(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let g = ConvGeometry::new(node, x.shape, w.shape).map_err(|m| shape_err(node, m))?;
    let groups = node.attr_int("offset_group", 1).max(1) as usize;
    let r = g.in_spatial.len();
    let taps = data::all_indices(&g.window.kernel);
    let outs = data::all_indices(&g.out_spatial);
    let (nt, no) = (taps.len(), outs.len());
    let xs = data::load_f64(x);
    let ws = data::load_f64(w);
    let offsets = data::load_f64(&inputs[2]);
    let bias = given(inputs, 3).then(|| data::load_f64(&inputs[3]));
    let mask = given(inputs, 4).then(|| data::load_f64(&inputs[4]));
    let in_strides = data::strides(&g.in_spatial);
    let in_plane: usize = g.in_spatial.iter().product();
    let c_per_group = g.in_channels / g.group;
    let m_per_group = g.out_channels / g.group;
    let c_per_offset = g.in_channels / groups;
    let win = &g.window;
    let mut y = vec![0.0f64; g.batch * g.out_channels * no];
    for n in 0..g.batch {
        for og in 0..groups {
            for (oi, o) in outs.iter().enumerate() {
                for (ti, t) in taps.iter().enumerate() {
                    // Where this tap samples, and its interpolation corners.
                    let mut corners: Vec<(usize, f64)> = vec![(0, 1.0)];
                    for d in 0..r {
                        let ch = ((og * nt + ti) * r + d) * no + oi;
                        let p = (o[d] * win.strides[d] + t[d] * win.dilations[d]) as f64
                            - win.pad_begin[d] as f64
                            + offsets[n * groups * nt * r * no + ch];
                        let f = p.floor();
                        let frac = p - f;
                        let mut next = Vec::with_capacity(corners.len() * 2);
                        for (k, wt) in [(f, 1.0 - frac), (f + 1.0, frac)] {
                            if wt == 0.0 || k < 0.0 || k >= g.in_spatial[d] as f64 {
                                continue;
                            }
                            for &(off, cw) in &corners {
                                next.push((off + k as usize * in_strides[d], cw * wt));
                            }
                        }
                        corners = next;
                    }
                    let scale = match &mask {
                        Some(mk) => mk[(n * groups + og) * nt * no + ti * no + oi],
                        None => 1.0,
                    };
                    for c in og * c_per_offset..(og + 1) * c_per_offset {
                        let plane = &xs[(n * g.in_channels + c) * in_plane..][..in_plane];
                        let v: f64 = corners.iter().map(|&(off, cw)| plane[off] * cw).sum();
                        let grp = c / c_per_group;
                        for m in grp * m_per_group..(grp + 1) * m_per_group {
                            let wv = ws[(m * c_per_group + c % c_per_group) * nt + ti];
                            y[(n * g.out_channels + m) * no + oi] += wv * scale * v;
                        }
                    }
                }
            }
        }
    }
    if let Some(b) = &bias {
        for (i, v) in y.iter_mut().enumerate() {
            *v += b[(i / no) % g.out_channels];
        }
    }
    data::store_floats(out, &y, false);
    Ok(())
}
