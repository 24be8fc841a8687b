//! Per-channel affine maps: BatchNormalization at inference when it cannot be folded into
//! the convolution before it.
//!
//! `y = x * a[c] + b[c]` with `a = scale / sqrt(var + eps)` and `b = B - mean * a`
//! computed once at init in f64, or, when the statistics arrive at run time (a model that
//! computes them), at every execute into the run context's work space (`2C` floats,
//! sized at init). Channels-last tensors (the usual case after a convolution) are rows of
//! `C` values; NCHW ones are planes of one channel.

use super::elementwise::split;
use super::math::{map, rows};
use super::{vec_bytes, RunCtx, Sources, Src};

/// BatchNormalization's scale, bias, mean and variance read at run time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunStats {
    pub operands: [Src; 4],
    pub epsilon: f32,
}

/// A prepared per-channel affine map.
#[derive(Clone, Debug)]
pub(crate) struct AffineOp {
    pub x: Src,
    /// The factors computed at init (empty with `stats`).
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    /// Statistics to fold at every execute instead.
    pub stats: Option<RunStats>,
    pub channels: usize,
    /// The extent of everything after the channel axis (1 for channels-last).
    pub plane: usize,
    /// Whether the tensor is held channels-last (each pixel's `C` values contiguous).
    pub channels_last: bool,
}

/// One channel's folded factors `(a, b)`, in f64 and rounded once each.
#[inline]
fn fold(scale: f32, bias: f32, mean: f32, var: f32, eps: f32) -> (f32, f32) {
    let a = scale as f64 / (var as f64 + eps as f64).sqrt();
    (a as f32, (bias as f64 - mean as f64 * a) as f32)
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
        .map(|c| fold(scale[c], bias[c], mean[c], var[c], eps))
        .unzip()
}

impl AffineOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        vec_bytes(&self.a) + vec_bytes(&self.b)
    }

    /// Sizes the work space for factors folded at run time.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        if self.stats.is_some() {
            ctx.reserve_work(2 * self.channels);
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let c = self.channels;
        if c == 0 {
            return;
        }
        let RunCtx {
            kernel, pool, work, ..
        } = ctx;
        let isa = kernel.isa();
        let (a, b): (&[f32], &[f32]) = match self.stats {
            None => (&self.a, &self.b),
            Some(RunStats { operands, epsilon }) => {
                let [scale, bias, mean, var] = operands.map(|s| sources.get(s));
                let (a, rest) = work.split_at_mut(c);
                let b = &mut rest[..c];
                for k in 0..c {
                    (a[k], b[k]) = fold(scale[k], bias[k], mean[k], var[k], epsilon);
                }
                (a, b)
            }
        };
        if self.channels_last {
            split(pool, x, out, c, |x, out| {
                rows(
                    isa,
                    x,
                    out,
                    c,
                    #[inline(always)]
                    |xr, or| {
                        or.iter_mut()
                            .zip(xr)
                            .zip(a.iter().zip(b))
                            .for_each(|((o, &v), (&a, &b))| *o = v * a + b);
                    },
                )
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
                let (a, b) = (a[k % c], b[k % c]);
                map(isa, xp, op, |v| v * a + b);
            }
        });
    }
}
