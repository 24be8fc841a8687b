//! AffineGrid: the sampling grid of a batch of affine transforms, for GridSample.
//!
//! Each output point is `theta[n]` times the point's normalized coordinates `(x, y[, z],
//! 1)`. The coordinates depend only on the point's index along each axis, so they are
//! tabulated once per axis at init; at run time each point is `r` dot products of
//! `r + 1` terms. The sums are formed in f64, term by term in the order the reference
//! adds them (x, y, z, then the translation), and rounded once to f32: the result is the
//! reference's to the bit.

use super::{Sources, Src};

/// A prepared AffineGrid of `r` (2 or 3) spatial axes.
#[derive(Clone, Debug)]
pub(crate) struct AffineGridOp {
    pub theta: Src,
    pub batch: usize,
    pub r: usize,
    /// The output's spatial extents, outermost first (`[H, W]` or `[D, H, W]`).
    pub spatial: Vec<usize>,
    /// Per spatial axis (outermost first), the normalized coordinate of each index.
    pub coords: Vec<Vec<f64>>,
}

impl AffineGridOp {
    pub fn new(theta: Src, batch: usize, spatial: Vec<usize>, align_corners: bool) -> Self {
        let coords = spatial
            .iter()
            .map(|&n| (0..n).map(|i| coordinate(i, n, align_corners)).collect())
            .collect();
        AffineGridOp {
            theta,
            batch,
            r: spatial.len(),
            spatial,
            coords,
        }
    }

    /// Bytes of the coordinate tables (for the delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        self.coords.iter().map(super::vec_bytes).sum()
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let theta = sources.get(self.theta);
        let r = self.r;
        let points: usize = self.spatial.iter().product();
        let row_len = *self.spatial.last().unwrap_or(&1);
        // Every spatial axis but the last, flattened: one "row" of points each.
        let rows = points / row_len.max(1);
        let x_of = &self.coords[r - 1];
        for n in 0..self.batch {
            let tn = &theta[n * r * (r + 1)..(n + 1) * r * (r + 1)];
            for row in 0..rows {
                // The coordinates of the outer axes of this row: y (and z).
                let (y, z) = if r == 2 {
                    (self.coords[0][row], 0.0)
                } else {
                    let h = self.spatial[1];
                    (self.coords[1][row % h], self.coords[0][row / h])
                };
                let base = (n * points + row * row_len) * r;
                let dst = &mut out[base..base + row_len * r];
                for (o, &x) in dst.chunks_exact_mut(r).zip(x_of) {
                    for (k, v) in o.iter_mut().enumerate() {
                        let c = &tn[k * (r + 1)..(k + 1) * (r + 1)];
                        let mut s = c[0] as f64 * x;
                        s += c[1] as f64 * y;
                        if r == 3 {
                            s += c[2] as f64 * z;
                        }
                        s += c[r] as f64;
                        *v = s as f32;
                    }
                }
            }
        }
    }
}

/// The normalized coordinate of index `i` of `n` along one axis: with `align_corners`
/// `-1 + 2i / (n - 1)` (a lone index at -1), else `(2i + 1) / n - 1`.
fn coordinate(i: usize, n: usize, align_corners: bool) -> f64 {
    if align_corners {
        if n <= 1 {
            -1.0
        } else {
            -1.0 + 2.0 * i as f64 / (n - 1) as f64
        }
    } else {
        (2 * i + 1) as f64 / n as f64 - 1.0
    }
}
