//! LayerNormalization over the trailing block of dimensions from `axis`.

use super::elementwise::split;
use super::math::rows as for_rows;
use super::tensor::sum_f64;
use super::{vec_bytes, Sources, Src};
use crate::gemm::Isa;
use crate::pool::Pool;

/// Where Scale or B comes from, and how a block element finds its value.
#[derive(Clone, Debug)]
pub(crate) struct BlockOperand {
    pub src: Src,
    /// The operand's offset for each element of the block, or `None` when the operand
    /// is exactly the block (the common `[n]` case).
    pub index: Option<Vec<usize>>,
}

impl BlockOperand {
    #[inline]
    fn at(&self, data: &[f32], k: usize) -> f32 {
        match &self.index {
            None => data[k],
            Some(ix) => data[ix[k]],
        }
    }
}

/// `Y = (x - mean) / sqrt(var + eps) * Scale + B` per block of `n` elements; with more
/// outputs, the `rows` means and then the `rows` inverse standard deviations follow `Y`
/// in the same buffer. Statistics in f64 (mean, then the mean squared deviation).
#[derive(Clone, Debug)]
pub(crate) struct LayerNormOp {
    pub x: Src,
    pub scale: BlockOperand,
    pub bias: Option<BlockOperand>,
    pub rows: usize,
    pub n: usize,
    pub epsilon: f64,
    pub stats: bool,
}

impl LayerNormOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        let index = |b: &BlockOperand| b.index.as_ref().map_or(0, vec_bytes);
        index(&self.scale) + self.bias.as_ref().map_or(0, index)
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        let scale = sources.get(self.scale.src);
        let bias = self.bias.as_ref().map(|b| (b, sources.get(b.src)));
        let (rows, n) = (self.rows, self.n);
        let (y, stats) = out.split_at_mut(rows * n);
        // The usual case (Scale and B of the block's shape, Y alone): one pass per row,
        // compiled for the CPU's vectors.
        let plain = |o: &BlockOperand, d: &[f32]| o.index.is_none() && d.len() == n;
        if !self.stats
            && n > 0
            && plain(&self.scale, scale)
            && bias.as_ref().is_none_or(|(bo, b)| plain(bo, b))
        {
            let bias = bias.map(|(_, b)| b);
            let eps = self.epsilon;
            split(pool, &x[..rows * n], y, n, |x, y| {
                for_rows(
                    isa,
                    x,
                    y,
                    n,
                    #[inline(always)]
                    |blk, dst| norm_row(blk, dst, scale, bias, eps),
                )
            });
            return;
        }
        for r in 0..rows {
            let block = &x[r * n..(r + 1) * n];
            let dst = &mut y[r * n..(r + 1) * n];
            // An empty block gives 0/0 = NaN statistics (and no Y elements).
            let mean = sum_f64(block) / n as f64;
            let var = block
                .iter()
                .map(|&v| (v as f64 - mean) * (v as f64 - mean))
                .sum::<f64>()
                / n as f64;
            let inv = 1.0 / (var + self.epsilon).sqrt();
            // In f64 like the statistics: x - mean cancels when x is near the mean.
            for (k, (d, &v)) in dst.iter_mut().zip(block).enumerate() {
                let mut e = (v as f64 - mean) * inv * self.scale.at(scale, k) as f64;
                if let Some((bo, b)) = &bias {
                    e += bo.at(b, k) as f64;
                }
                *d = e as f32;
            }
            if self.stats {
                stats[r] = mean as f32;
                if let Some(s) = stats.get_mut(rows + r) {
                    *s = inv as f32;
                }
            }
        }
    }
}

/// One row of LayerNormalization with per-element Scale and B, statistics in f64 as in
/// the general path; eight f64 lanes so that the sums vectorize.
#[inline(always)]
fn norm_row(x: &[f32], y: &mut [f32], scale: &[f32], bias: Option<&[f32]>, eps: f64) {
    let n = x.len() as f64;
    let mean = lanes(x, |v| v as f64) / n;
    let var = lanes(x, |v| (v as f64 - mean) * (v as f64 - mean)) / n;
    let inv = 1.0 / (var + eps).sqrt();
    match bias {
        Some(b) => {
            for (((d, &v), &s), &b) in y.iter_mut().zip(x).zip(scale).zip(b) {
                *d = ((v as f64 - mean) * inv * s as f64 + b as f64) as f32;
            }
        }
        None => {
            for ((d, &v), &s) in y.iter_mut().zip(x).zip(scale) {
                *d = ((v as f64 - mean) * inv * s as f64) as f32;
            }
        }
    }
}

/// `sum(f(v))` over `x` in eight independent f64 partial sums.
#[inline(always)]
fn lanes(x: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut acc = [0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        acc.iter_mut().zip(c).for_each(|(a, &v)| *a += f(v));
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| f(v)).sum();
    acc.iter().sum::<f64>() + tail
}
