//! ReverseSequence: within each batch entry, the first `sequence_lens[b]` steps along the
//! time axis in reverse order, the rest in place; and TensorScatter, which writes steps
//! into a KV cache along its sequence axis.
//!
//! The batch and time axes are the first two (in either order), so every step of every
//! entry is one contiguous run of the trailing axes: the op is one copy per `(axis 0,
//! axis 1)` pair, over the held bytes of any dtype (4-byte words, an i64's 8 bytes, the
//! stored bytes of 8- and 16-bit tensors), each a `memcpy`. The lengths are read at run
//! time and checked, before anything is written, against the time extent.

use super::{Sources, Src};
use crate::pool::{Disjoint, Pool};

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

/// Lines below this many output bytes in all are copied on the calling thread: a pool
/// dispatch costs more than copying a small cache.
const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// A prepared TensorScatter (the KV-cache update of opset 24).
///
/// The cache `[batch, ..., sequence, ...]` is copied to the output and, for every batch
/// entry `b` and every line (the positions of the axes between the batch and sequence
/// axes, the heads of a KV cache), the update's steps land on steps `write_indices[b] + s`
/// of that line (modulo the cache's length when `circular`). Each step of a line is one
/// contiguous run of the trailing axes, so the op is a `memcpy` per line and per step over
/// the held bytes of any dtype, with `batch x lines` independent lines split over the
/// pool when the cache is large (a decoder's caches are megabytes per layer). The write
/// indices are read and checked at run time, before anything is written.
#[derive(Clone, Debug)]
pub(crate) struct TensorScatterOp {
    pub past: Src,
    pub update: Src,
    /// The i64 write indices, one per batch entry; `None` when omitted (all 0).
    pub starts: Option<Src>,
    pub batch: usize,
    /// Lines per batch entry: the product of the extents between axis 0 and the axis.
    pub lines: usize,
    /// The cache's and the update's extents along the sequence axis.
    pub cache_len: usize,
    pub steps: usize,
    pub circular: bool,
    /// Bytes of one step: the trailing axes' elements times the held element size.
    pub run: usize,
}

impl TensorScatterOp {
    /// The write index of batch entry `b`.
    fn start(&self, starts: Option<&[u8]>, b: usize) -> i64 {
        starts.map_or(0, |s| {
            i64::from_le_bytes(s[8 * b..8 * b + 8].try_into().expect("8 bytes"))
        })
    }

    /// Fails on a negative write index, or (mode linear) one whose update runs past the
    /// end of the cache.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], pool: &Pool) -> Result<(), String> {
        let starts = self.starts.map(|s| sources.bytes(s));
        for b in 0..self.batch {
            let start = self.start(starts, b);
            if start < 0 {
                return Err(format!("write_indices[{b}] is {start}; it must be >= 0"));
            }
            if !self.circular && start as u64 + self.steps as u64 > self.cache_len as u64 {
                return Err(format!(
                    "write_indices[{b}] {start} plus {} update steps passes the cache's {} \
                     (mode linear)",
                    self.steps, self.cache_len
                ));
            }
        }
        let (past, update) = (sources.bytes(self.past), sources.bytes(self.update));
        let line_bytes = self.cache_len * self.run;
        let total = self.batch * self.lines;
        let tasks = if total * line_bytes < PARALLEL_MIN_BYTES {
            1
        } else {
            pool.threads().min(total)
        };
        let per = total.div_ceil(tasks.max(1));
        let parts = Disjoint::new(out);
        let task = |task: usize, _| {
            let (l0, l1) = ((task * per).min(total), ((task + 1) * per).min(total));
            // SAFETY: the tasks' line ranges are disjoint.
            let dst = unsafe { parts.bytes(l0 * line_bytes, (l1 - l0) * line_bytes) };
            for (line, dst) in (l0..l1).zip(dst.chunks_exact_mut(line_bytes.max(1))) {
                dst.copy_from_slice(&past[line * line_bytes..(line + 1) * line_bytes]);
                // Checked above: not negative, and (linear) not past the end.
                let start = self.start(starts, line / self.lines) as u64;
                for s in 0..self.steps {
                    let at = if self.circular {
                        ((start + s as u64) % self.cache_len as u64) as usize
                    } else {
                        start as usize + s
                    };
                    let src = (line * self.steps + s) * self.run;
                    dst[at * self.run..(at + 1) * self.run]
                        .copy_from_slice(&update[src..src + self.run]);
                }
            }
        };
        pool.run(tasks, &task);
        Ok(())
    }
}
