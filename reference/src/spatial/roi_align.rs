//! RoiAlign: each output bin pools a grid of bilinear samples taken inside its region of
//! interest, in f64.

use baton_delegate_api::shape::{roi_align_params, RoiAlignParams};
use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::{data, KernelError};

/// One sample's four corner offsets into an `H x W` plane and their bilinear weights, or
/// `None` for a sample more than one pixel outside the plane (it contributes 0).
type Taps = Option<([usize; 4], [f64; 4])>;

/// The corners and weights of the sample at (`y`, `x`). As ONNX's reference (and the
/// Detectron kernel it follows) does, a coordinate in `[-1, 0)` reads the edge pixel and
/// one at or past the last pixel centre clamps to it.
fn taps(h: usize, w: usize, y: f64, x: f64) -> Taps {
    if y < -1.0 || y > h as f64 || x < -1.0 || x > w as f64 {
        return None;
    }
    let axis = |v: f64, len: usize| -> (usize, usize, f64) {
        let v = v.max(0.0);
        let low = v.floor() as usize;
        if low >= len - 1 {
            (len - 1, len - 1, 0.0)
        } else {
            (low, low + 1, v - low as f64)
        }
    };
    let (y0, y1, ly) = axis(y, h);
    let (x0, x1, lx) = axis(x, w);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    Some((
        [y0 * w + x0, y0 * w + x1, y1 * w + x0, y1 * w + x1],
        [hy * hx, hy * lx, ly * hx, ly * lx],
    ))
}

/// The sample grid of one ROI: every sample's taps, bin by bin in row-major order, each
/// bin's samples row-major within it, and the samples per bin.
fn roi_samples(p: &RoiAlignParams, roi: &[f64], h: usize, w: usize) -> (Vec<Taps>, usize) {
    let scale = f64::from(p.spatial_scale);
    let offset = if p.half_pixel { 0.5 } else { 0.0 };
    let [x1, y1, x2, y2] = [0, 1, 2, 3].map(|i| roi[i] * scale - offset);
    let (mut roi_w, mut roi_h) = (x2 - x1, y2 - y1);
    if !p.half_pixel {
        // output_half_pixel makes a malformed (smaller than a pixel) box 1 x 1.
        roi_w = roi_w.max(1.0);
        roi_h = roi_h.max(1.0);
    }
    let [bins_h, bins_w] = p.bins;
    let (bin_h, bin_w) = (roi_h / bins_h as f64, roi_w / bins_w as f64);
    // Adaptive grids: ceil(extent / bins), none for an empty or inverted box.
    let grid = |bin: f64| -> usize {
        if p.sampling_ratio > 0 {
            p.sampling_ratio
        } else if bin.is_finite() && bin > 0.0 {
            bin.ceil() as usize
        } else {
            0
        }
    };
    let (grid_h, grid_w) = (grid(bin_h), grid(bin_w));
    let mut out = Vec::with_capacity(bins_h * bins_w * grid_h * grid_w);
    for ph in 0..bins_h {
        for pw in 0..bins_w {
            for iy in 0..grid_h {
                let y = y1 + ph as f64 * bin_h + (iy as f64 + 0.5) * bin_h / grid_h as f64;
                for ix in 0..grid_w {
                    let x = x1 + pw as f64 * bin_w + (ix as f64 + 0.5) * bin_w / grid_w as f64;
                    out.push(taps(h, w, y, x));
                }
            }
        }
    }
    (out, grid_h * grid_w)
}

/// `avg` divides each bin's sum of interpolated samples by the sample count (at least
/// 1); `max` takes, over the bin's samples, the largest of each sample's four weighted
/// corner terms, which is what ONNX's reference computes and its test data holds. A bin
/// with no samples is 0.
pub(super) fn roi_align(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let p = roi_align_params(node).map_err(|m| crate::shape_err(node, m))?;
    let (x, rois, idx) = (&inputs[0], &inputs[1], &inputs[2]);
    let [n, c, h, w] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let xs = data::load_f64(x);
    let boxes = data::load_f64(rois);
    let batch = data::load::<i64>(idx);
    let plane = h * w;
    let bins = p.bins[0] * p.bins[1];
    let mut y = vec![0.0f64; batch.len() * c * bins];
    for (r, &b) in batch.iter().enumerate() {
        let b = usize::try_from(b).ok().filter(|&b| b < n).ok_or_else(|| {
            crate::unsupported(
                node,
                format!("batch_indices[{r}] is {b}, outside X's batch of {n}"),
            )
        })?;
        if plane == 0 {
            continue;
        }
        let (samples, per_bin) = roi_samples(&p, &boxes[r * 4..r * 4 + 4], h, w);
        for ch in 0..c {
            let img = &xs[(b * c + ch) * plane..][..plane];
            let dst = &mut y[(r * c + ch) * bins..][..bins];
            for (bin, v) in dst.iter_mut().enumerate() {
                let terms = samples[bin * per_bin..][..per_bin].iter().map(|t| match t {
                    None => [0.0; 4],
                    Some((at, wt)) => [0, 1, 2, 3].map(|k| wt[k] * img[at[k]]),
                });
                *v = if p.max {
                    terms
                        .map(|t| t.into_iter().fold(f64::NEG_INFINITY, f64::max))
                        .reduce(f64::max)
                        .unwrap_or(0.0)
                } else {
                    data::sum_f64(terms.map(|t| t.into_iter().sum::<f64>())) / per_bin.max(1) as f64
                };
            }
        }
    }
    data::store_floats(out, &y, false);
    Ok(())
}
