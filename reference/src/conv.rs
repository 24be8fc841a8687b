//! Conv (any number of spatial axes; groups, dilations, strides, pads, auto_pad, optional
//! bias).

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::ConvGeometry;
use baton_delegate_api::{TensorMut, TensorRef};

use super::data::{all_indices, load_f32, store_f64, strides};
use super::{shape_err, KernelError};

/// Direct convolution (cross-correlation, as ONNX defines Conv):
///
/// `y[n, m, o] = bias[m] + sum over c in m's group, taps t of
///  x[n, c, o * stride + t * dilation - pad_begin] * w[m, c - group_start, t]`,
///
/// where taps falling in the padding are skipped (they read 0, and a non-finite weight
/// does not turn them into NaN). Each output's sum is accumulated in f64, in the order
/// of the formula (channels, then taps in row-major order), and the bias added last.
///
/// The loops run over whole output planes: for one channel and tap, the outputs whose
/// tap lands inside the input form a box, computed once, so the innermost loop is a
/// plain multiply-add along the last spatial axis. The per-output order of the sum is
/// unchanged by this, so the result is the formula's, bit for bit.
pub(crate) fn conv(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let g = ConvGeometry::new(node, x.shape, w.shape).map_err(|m| shape_err(node, m))?;
    let c_per_group = g.in_channels / g.group;
    let m_per_group = g.out_channels / g.group;
    let in_plane: usize = g.in_spatial.iter().product();
    let out_plane: usize = g.out_spatial.iter().product();
    let taps = all_indices(&g.window.kernel);
    let tap_boxes: Vec<Option<TapBox>> = taps.iter().map(|t| TapBox::new(&g, t)).collect();

    let xv: Vec<f64> = load_f32(x).into_iter().map(f64::from).collect();
    let wv = load_f32(w);
    let bias = inputs.get(2).map(load_f32);
    let mut r = vec![0.0f64; g.batch * g.out_channels * out_plane];
    for n in 0..g.batch {
        for m in 0..g.out_channels {
            let group_start = (m / m_per_group) * c_per_group;
            let acc = &mut r[(n * g.out_channels + m) * out_plane..][..out_plane];
            for c in 0..c_per_group {
                let x_plane = &xv[(n * g.in_channels + group_start + c) * in_plane..][..in_plane];
                let w_taps = &wv[(m * c_per_group + c) * taps.len()..][..taps.len()];
                for (tap_box, &wt) in tap_boxes.iter().zip(w_taps) {
                    if let Some(b) = tap_box {
                        b.accumulate(acc, x_plane, f64::from(wt));
                    }
                }
            }
            if let Some(b) = &bias {
                let b = f64::from(b[m]);
                acc.iter_mut().for_each(|v| *v += b);
            }
        }
    }
    store_f64(out, &r);
    Ok(())
}

/// For one kernel tap: the box of output positions whose tap lies inside the input, and
/// how output and input offsets step through it.
struct TapBox {
    /// Per spatial axis, the first and one-past-last output index inside the input.
    ranges: Vec<(usize, usize)>,
    /// Per spatial axis, the input index of output index 0 (may be negative).
    origin: Vec<i64>,
    /// Per spatial axis, the stride in the input.
    step: Vec<usize>,
    in_strides: Vec<usize>,
    out_strides: Vec<usize>,
}

impl TapBox {
    /// `None` when the tap lies in the padding for every output.
    fn new(g: &ConvGeometry, tap: &[usize]) -> Option<TapBox> {
        let win = &g.window;
        let mut ranges = Vec::with_capacity(tap.len());
        let mut origin = Vec::with_capacity(tap.len());
        for (d, &t) in tap.iter().enumerate() {
            // Input index of output o: o * stride + start.
            let start = (t * win.dilations[d]) as i64 - win.pad_begin[d] as i64;
            let stride = win.strides[d] as i64;
            let len = g.in_spatial[d] as i64;
            // Smallest o with o * stride + start >= 0; largest with it < len.
            let lo = if start >= 0 {
                0
            } else {
                (-start + stride - 1) / stride
            };
            let hi = if start >= len {
                0
            } else {
                ((len - 1 - start) / stride + 1).min(g.out_spatial[d] as i64)
            };
            if lo >= hi {
                return None;
            }
            ranges.push((lo as usize, hi as usize));
            origin.push(start);
        }
        Some(TapBox {
            ranges,
            origin,
            step: win.strides.clone(),
            in_strides: strides(&g.in_spatial),
            out_strides: strides(&g.out_spatial),
        })
    }

    /// `acc[o] += w * x[input index of o]` over the box.
    fn accumulate(&self, acc: &mut [f64], x: &[f64], w: f64) {
        let rank = self.ranges.len();
        let last = rank - 1;
        let (lo, hi) = self.ranges[last];
        let step = self.step[last];
        // Walk the outer axes with an odometer; the last axis is the inner loop.
        let mut idx: Vec<usize> = self.ranges.iter().map(|r| r.0).collect();
        loop {
            let mut out_off = 0;
            let mut in_off = 0i64;
            for (d, &i) in idx[..last].iter().enumerate() {
                out_off += i * self.out_strides[d];
                in_off +=
                    (i as i64 * self.step[d] as i64 + self.origin[d]) * self.in_strides[d] as i64;
            }
            let in_first = (in_off + lo as i64 * step as i64 + self.origin[last]) as usize;
            let row = &mut acc[out_off + lo..out_off + hi];
            if step == 1 {
                for (a, &v) in row.iter_mut().zip(&x[in_first..in_first + (hi - lo)]) {
                    *a += w * v;
                }
            } else {
                for (k, a) in row.iter_mut().enumerate() {
                    *a += w * x[in_first + k * step];
                }
            }
            // Next outer index.
            let mut d = last;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.ranges[d].1 {
                    break;
                }
                idx[d] = self.ranges[d].0;
            }
        }
    }
}
