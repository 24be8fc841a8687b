//! Data movement of narrow tensors: 8-bit ones, which the executable holds as stored
//! bytes (an i8 biased by 128, see `crate::qgemm`), and f16, held as its 2-byte
//! elements: the same index walks as for 4-byte elements, over bytes or 2-byte units.
//! 8-bit tensors are held NCHW wherever a mover reads them (the int8 channels-last
//! layout stays inside QDQ groups, `exec/lower/quant.rs`).

use super::layout::{ConcatOp, TransposeOp};
use super::pad::PadOp;
use super::select::WhereOp;
use super::tensor::{GatherOp, SliceOp, SplitOp};
use super::Sources;
use crate::qgemm::SLACK;

/// The movers that run over bytes.
#[derive(Clone, Debug)]
pub(crate) enum Moved {
    Gather(GatherOp),
    Slice(SliceOp),
    Transpose(TransposeOp),
    Concat(ConcatOp),
    /// Pad, Expand and Tile.
    Pad(PadOp),
    Where(WhereOp),
    /// Each part in its own whole words (see [`ByteMoveOp::split_words`]).
    Split(SplitOp),
}

/// A mover over a tensor of `len` elements of `size` bytes (1, 2, or 8 for an i64 Pad);
/// `fill` is Pad's value as held.
#[derive(Clone, Debug)]
pub(crate) struct ByteMoveOp {
    pub op: Moved,
    pub len: usize,
    pub size: usize,
    pub fill: u64,
}

impl ByteMoveOp {
    /// The words each output of a Split takes: its elements' bytes with the slack every
    /// 8-bit buffer has (`byte_words`), rounded up to whole words, so that each part is a word-aligned view of the one buffer.
    pub fn split_words(op: &SplitOp, size: usize) -> Vec<usize> {
        op.parts
            .iter()
            .map(|p| (p * op.outer * size).saturating_add(SLACK).div_ceil(4))
            .collect()
    }

    /// Fails only on a Gather index out of range.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        if let Moved::Split(op) = &self.op {
            self.split(op, sources.bytes(op.x), bytemuck::cast_slice_mut(out));
            return Ok(());
        }
        // The slot ends in slack bytes past the tensor (see `byte_words`): not written.
        let out = &mut bytemuck::cast_slice_mut::<f32, u8>(out)[..self.len * self.size];
        if self.size == 8 {
            // An i64 as its two words (slots and inputs are 4-byte aligned).
            let get = |s| match sources.bytes(s) {
                [] => &[][..],
                b => bytemuck::cast_slice::<u8, [u32; 2]>(b),
            };
            let out: &mut [[u32; 2]] = bytemuck::cast_slice_mut(out);
            let b = self.fill.to_le_bytes();
            let fill = [
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            ];
            // Lowering builds 8-byte moves for Pad only (other i64 movers run on words).
            return match &self.op {
                Moved::Pad(op) => {
                    op.run_t(get(op.x), out, fill);
                    Ok(())
                }
                _ => Err("an 8-byte move other than Pad".into()),
            };
        }
        if self.size == 2 {
            // Slots are 4-byte aligned and 16-bit subgraph inputs were checked to be
            // 2-byte aligned on entry (`check_inputs`).
            // (An empty input's pointer may be unaligned: nothing is read from it.)
            let get = |s| match sources.bytes(s) {
                [] => &[][..],
                b => bytemuck::cast_slice::<u8, u16>(b),
            };
            let out: &mut [u16] = bytemuck::cast_slice_mut(out);
            match &self.op {
                Moved::Gather(op) => return op.run_t(sources, get(op.x), out),
                Moved::Slice(op) => op.run_t(get(op.x), out),
                Moved::Transpose(op) => op.run_t(get(op.x), out),
                Moved::Concat(op) => op.run_t(get, out),
                Moved::Pad(op) => op.run_t(get(op.x), out, self.fill as u16),
                Moved::Where(op) => op.run_t(sources, get, out),
                // A Split ran above, over bytes.
                Moved::Split(_) => return Err("a Split reached the 2-byte path".into()),
            }
            return Ok(());
        }
        let fill = self.fill as u8;
        match &self.op {
            Moved::Gather(op) => return op.run_t(sources, sources.bytes(op.x), out),
            Moved::Slice(op) => op.run_t(sources.bytes(op.x), out),
            Moved::Transpose(op) => op.run_t(sources.bytes(op.x), out),
            Moved::Concat(op) => op.run_t(|s| sources.bytes(s), out),
            Moved::Pad(op) => op.run_t(sources.bytes(op.x), out, fill),
            Moved::Where(op) => op.run_t(sources, |s| sources.bytes(s), out),
            Moved::Split(_) => return Err("a Split reached the byte path".into()),
        }
        Ok(())
    }

    /// Split over bytes: each part's rows one after another from the start of its
    /// words.
    fn split(&self, op: &SplitOp, x: &[u8], out: &mut [u8]) {
        let size = self.size;
        let mut start = 0;
        let mut first = 0;
        for (&len, words) in op.parts.iter().zip(Self::split_words(op, size)) {
            let (n, mut pos) = (len * size, start);
            for o in 0..op.outer {
                let src = (o * op.row + first) * size;
                out[pos..pos + n].copy_from_slice(&x[src..src + n]);
                pos += n;
            }
            first += len;
            start += words * 4;
        }
    }
}
