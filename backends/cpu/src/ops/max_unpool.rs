//! MaxUnpool: each value of `X` placed at the position its index (MaxPool's `Indices`,
//! row-major over the whole unpooled tensor) names, every other element 0. An
//! `output_shape` larger than the unpooled tensor keeps it at the start of each axis: the
//! index is then re-laid with the output's strides. Indices are checked as they are read
//! (the output is the only thing written); the last value for a repeated index wins, as
//! in the reference.

use super::{Sources, Src};

/// A prepared MaxUnpool.
#[derive(Clone, Debug)]
pub(crate) struct MaxUnpoolOp {
    pub x: Src,
    /// The i64 indices, one per element of `x`.
    pub indices: Src,
    pub len: usize,
    /// The unpooled tensor's shape (what the indices count through).
    pub unpooled: Vec<usize>,
    /// The output's strides, where it differs from the unpooled tensor's shape.
    pub out_strides: Option<Vec<usize>>,
    pub out_len: usize,
}

impl MaxUnpoolOp {
    /// Fails on an index outside the unpooled tensor.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let x = &sources.get(self.x)[..self.len];
        let idx = sources.bytes(self.indices);
        let total: usize = self.unpooled.iter().product();
        let out = &mut out[..self.out_len];
        out.fill(0.0);
        for (k, &v) in x.iter().enumerate() {
            let i = i64::from_le_bytes(idx[8 * k..8 * k + 8].try_into().expect("8 bytes"));
            let at = usize::try_from(i)
                .ok()
                .filter(|&a| a < total)
                .ok_or_else(|| {
                    format!(
                        "index {i} is outside the unpooled tensor {:?}",
                        self.unpooled
                    )
                })?;
            let at = match &self.out_strides {
                None => at,
                Some(strides) => {
                    // The unpooled position's coordinates, innermost first, re-laid.
                    let (mut rest, mut dst) = (at, 0);
                    for (&d, &s) in self.unpooled.iter().zip(strides).rev() {
                        dst += (rest % d) * s;
                        rest /= d;
                    }
                    dst
                }
            };
            out[at] = v;
        }
        Ok(())
    }
}
