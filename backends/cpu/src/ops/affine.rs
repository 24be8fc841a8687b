//! Per-channel affine maps: BatchNormalization at inference when it cannot be folded into
//! the convolution before it.
//!
//! `y = x * a[c] + b[c]` with `a = scale / sqrt(var + eps)` and `b = B - mean * a`
//! computed once at init in f64. Channels-last tensors (the usual case after a
//! convolution) are rows of `C` values; NCHW ones are planes of one channel.

use super::elementwise::split;
use super::math::{map, rows};
use super::{vec_bytes, Sources, Src};
use crate::gemm::Isa;
use crate::pool::Pool;

/// A prepared per-channel affine map.
#[derive(Clone, Debug)]
pub(crate) struct AffineOp {
    pub x: Src,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    /// The extent of everything after the channel axis (1 for channels-last).
    pub plane: usize,
    /// Whether the tensor is held channels-last (each pixel's `C` values contiguous).
    pub channels_last: bool,
}

/// The folded factors of an inference BatchNormalization: `(a, b)` per channel.
pub(crate) fn batch_norm_factors(
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    eps: f32,
) -> (Vec<f32>, Vec<f32>) {
    (0..scale.len())
        .map(|c| {
            let a = scale[c] as f64 / (var[c] as f64 + eps as f64).sqrt();
            (a as f32, (bias[c] as f64 - mean[c] as f64 * a) as f32)
        })
        .unzip()
}

impl AffineOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        vec_bytes(&self.a) + vec_bytes(&self.b)
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        let c = self.a.len();
        if c == 0 {
            return;
        }
        if self.channels_last {
            let (a, b) = (&self.a[..], &self.b[..]);
            split(pool, x, out, c, |x, out| {
                rows(isa, x, out, c, |xr, or| {
                    or.iter_mut()
                        .zip(xr)
                        .zip(a.iter().zip(b))
                        .for_each(|((o, &v), (&a, &b))| *o = v * a + b);
                })
            });
            return;
        }
        let plane = self.plane;
        if plane == 0 {
            return;
        }
        // One plane per (batch, channel): the row length of the split is a whole batch
        // item, so that the channel of a plane is its index modulo C.
        split(pool, x, out, plane * c, |x, out| {
            for (k, (xp, op)) in x
                .chunks_exact(plane)
                .zip(out.chunks_exact_mut(plane))
                .enumerate()
            {
                let (a, b) = (self.a[k % c], self.b[k % c]);
                map(isa, xp, op, |v| v * a + b);
            }
        });
    }
}
