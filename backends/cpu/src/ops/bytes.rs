//! Data movement of 8-bit tensors, which the executable holds as stored bytes (an i8
//! biased by 128, see `crate::qgemm`): the same index walks as for 4-byte elements,
//! over bytes. Such tensors are held NCHW wherever a mover reads them (the int8
//! channels-last layout stays inside QDQ groups, `exec/lower/quant.rs`).

use super::layout::{ConcatOp, TransposeOp};
use super::pad::PadOp;
use super::tensor::{GatherOp, SliceOp};
use super::Sources;

/// The movers that run over bytes.
#[derive(Clone, Debug)]
pub(crate) enum Moved {
    Gather(GatherOp),
    Slice(SliceOp),
    Transpose(TransposeOp),
    Concat(ConcatOp),
    /// Pad, Expand and Tile.
    Pad(PadOp),
}

/// A mover over an 8-bit tensor of `len` elements; `fill` is Pad's value as held.
#[derive(Clone, Debug)]
pub(crate) struct ByteMoveOp {
    pub op: Moved,
    pub len: usize,
    pub fill: u8,
}

impl ByteMoveOp {
    /// Fails only on a Gather index out of range.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        // The slot ends in slack bytes past the tensor (see `byte_words`): not written.
        let out = &mut bytemuck::cast_slice_mut::<f32, u8>(out)[..self.len];
        match &self.op {
            Moved::Gather(op) => return op.run_t(sources, sources.bytes(op.x), out),
            Moved::Slice(op) => op.run_t(sources.bytes(op.x), out),
            Moved::Transpose(op) => op.run_t(sources.bytes(op.x), out),
            Moved::Concat(op) => op.run_t(|s| sources.bytes(s), out),
            Moved::Pad(op) => op.run_t(sources.bytes(op.x), out, self.fill),
        }
        Ok(())
    }
}
