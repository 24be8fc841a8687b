//! LayerNormalization over the trailing block of dimensions from `axis`.

use super::tensor::sum_f64;
use super::{Sources, Src};

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
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.get(self.x);
        let scale = sources.get(self.scale.src);
        let bias = self.bias.as_ref().map(|b| (b, sources.get(b.src)));
        let (rows, n) = (self.rows, self.n);
        let (y, stats) = out.split_at_mut(rows * n);
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
