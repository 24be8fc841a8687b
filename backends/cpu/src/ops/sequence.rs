//! ReverseSequence: within each batch entry, the first `sequence_lens[b]` steps along the
//! time axis in reverse order, the rest in place.
//!
//! The batch and time axes are the first two (in either order), so every step of every
//! entry is one contiguous run of the trailing axes: the op is one copy per `(axis 0,
//! axis 1)` pair, over the held bytes of any dtype (4-byte words, an i64's 8 bytes, the
//! stored bytes of 8- and 16-bit tensors), each a `memcpy`. The lengths are read at run
//! time and checked, before anything is written, against the time extent.

use super::{Sources, Src};

/// A prepared ReverseSequence.
#[derive(Clone, Debug)]
pub(crate) struct ReverseSequenceOp {
    pub x: Src,
    /// The i64 lengths, one per batch entry.
    pub lens: Src,
    /// The extents of axes 0 and 1.
    pub d0: usize,
    pub d1: usize,
    /// Axis 0 is the batch axis (else axis 1 is).
    pub batch_major: bool,
    /// Bytes of one step: the trailing axes' elements times the held element size.
    pub run: usize,
}

impl ReverseSequenceOp {
    /// Fails on a length outside `0..=time`.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let (batch, time) = if self.batch_major {
            (self.d0, self.d1)
        } else {
            (self.d1, self.d0)
        };
        let lens = sources.bytes(self.lens);
        let len_of = |b: usize| {
            let at = 8 * b;
            i64::from_le_bytes(lens[at..at + 8].try_into().expect("8 bytes"))
        };
        if let Some(bad) = (0..batch)
            .map(len_of)
            .find(|&l| l < 0 || l as u64 > time as u64)
        {
            return Err(format!("sequence length {bad} is outside 0..={time}"));
        }
        let x = sources.bytes(self.x);
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let run = self.run;
        for i in 0..self.d0 {
            for j in 0..self.d1 {
                let (b, t) = if self.batch_major { (i, j) } else { (j, i) };
                let len = len_of(b) as usize;
                let src_t = if t < len { len - 1 - t } else { t };
                let (si, sj) = if self.batch_major {
                    (i, src_t)
                } else {
                    (src_t, j)
                };
                let dst = (i * self.d1 + j) * run;
                let src = (si * self.d1 + sj) * run;
                out[dst..dst + run].copy_from_slice(&x[src..src + run]);
            }
        }
        Ok(())
    }
}
