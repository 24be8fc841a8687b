//! RoiAlign: each output bin pools a grid of bilinear samples inside its region of
//! interest, threaded over (ROI, channel) pairs.
//!
//! The boxes arrive at run time, so an adaptive grid's size (`ceil` of the bin's extent)
//! is only known then: each sample's corners and weights are worked out as it is taken
//! rather than tabled, which keeps execute free of allocation. Coordinates, weights and
//! sums are f64 as the reference computes them, rounded once per output. `max` takes the
//! largest of each sample's four weighted corner terms (ONNX's reference rule, which its
//! test data holds), not the largest interpolated value.

use baton_delegate_api::shape::RoiAlignParams;

use super::{Sources, Src};
use crate::pool::{Disjoint, Pool};

/// A prepared RoiAlign node: `X` `[n, c, h, w]` (NCHW, as the graph holds it), `rois`
/// `[r, 4]`, i64 `batch_indices` `[r]`; the output `[r, c, bins_h, bins_w]`.
#[derive(Clone, Debug)]
pub(crate) struct RoiAlignOp {
    pub x: Src,
    pub rois: Src,
    pub indices: Src,
    pub dims: [usize; 4],
    pub count: usize,
    pub params: RoiAlignParams,
}

/// One axis of a sample: its two pixels and the weight of the second, or `None` more than
/// a pixel outside. A coordinate in `[-1, 0)` reads the edge pixel; one at or past the
/// last pixel centre clamps to it.
fn axis(v: f64, len: usize) -> Option<(usize, usize, f64)> {
    if v < -1.0 || v > len as f64 {
        return None;
    }
    let v = v.max(0.0);
    let low = v.floor() as usize;
    Some(if low >= len - 1 {
        (len - 1, len - 1, 0.0)
    } else {
        (low, low + 1, v - low as f64)
    })
}

impl RoiAlignOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], pool: &Pool) -> Result<(), String> {
        let [n, c, h, w] = self.dims;
        let (x, rois) = (sources.get(self.x), sources.get(self.rois));
        let idx = sources.bytes(self.indices);
        let index = |r: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&idx[r * 8..r * 8 + 8]);
            i64::from_le_bytes(b)
        };
        if idx.len() < self.count * 8 {
            return Err("RoiAlign batch_indices holds too few values".into());
        }
        for r in 0..self.count {
            let b = index(r);
            if !(0..n as i64).contains(&b) {
                return Err(format!(
                    "RoiAlign batch_indices[{r}] is {b}, outside X's batch of {n}"
                ));
            }
        }
        let plane = h * w;
        if plane == 0 {
            out.fill(0.0);
            return Ok(());
        }
        let p = &self.params;
        let [bins_h, bins_w] = p.bins;
        let bins = bins_h * bins_w;
        let out = Disjoint::new(out);
        pool.run(self.count * c, &|task, _| {
            let (r, ch) = (task / c, task % c);
            let img = &x[(index(r) as usize * c + ch) * plane..][..plane];
            // SAFETY: each task writes its own (ROI, channel) block.
            let dst = unsafe { out.range(task * bins, bins) };
            let scale = f64::from(p.spatial_scale);
            let offset = if p.half_pixel { 0.5 } else { 0.0 };
            let [x1, y1, x2, y2] =
                [0, 1, 2, 3].map(|i| f64::from(rois[r * 4 + i]) * scale - offset);
            let (mut roi_w, mut roi_h) = (x2 - x1, y2 - y1);
            if !p.half_pixel {
                // output_half_pixel makes a box smaller than a pixel 1 x 1.
                roi_w = roi_w.max(1.0);
                roi_h = roi_h.max(1.0);
            }
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
            let per_bin = grid_h * grid_w;
            for ph in 0..bins_h {
                for pw in 0..bins_w {
                    let (mut sum, mut max) = (0.0f64, f64::NEG_INFINITY);
                    for iy in 0..grid_h {
                        let y = y1 + ph as f64 * bin_h + (iy as f64 + 0.5) * bin_h / grid_h as f64;
                        let ty = axis(y, h);
                        for ix in 0..grid_w {
                            let xc =
                                x1 + pw as f64 * bin_w + (ix as f64 + 0.5) * bin_w / grid_w as f64;
                            // Both axes inside, or the sample contributes four zero terms.
                            let terms = match (ty, axis(xc, w)) {
                                (Some((ya, yb, ly)), Some((xa, xb, lx))) => {
                                    let (hy, hx) = (1.0 - ly, 1.0 - lx);
                                    let v = |yy: usize, xx: usize| f64::from(img[yy * w + xx]);
                                    [
                                        hy * hx * v(ya, xa),
                                        hy * lx * v(ya, xb),
                                        ly * hx * v(yb, xa),
                                        ly * lx * v(yb, xb),
                                    ]
                                }
                                _ => [0.0; 4],
                            };
                            if p.max {
                                max = terms.into_iter().fold(max, f64::max);
                            } else {
                                sum += terms.into_iter().sum::<f64>();
                            }
                        }
                    }
                    dst[ph * bins_w + pw] = if p.max {
                        if per_bin == 0 {
                            0.0
                        } else {
                            max as f32
                        }
                    } else {
                        (sum / per_bin.max(1) as f64) as f32
                    };
                }
            }
        });
        Ok(())
    }
}
