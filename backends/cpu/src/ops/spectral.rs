//! DFT and STFT on the FFT of `fft.rs`, threaded over the transformed lines (DFT) or
//! over batch × frames (STFT).
//!
//! The reference sums directly in f64 and rounds each output once; the FFT computes in
//! f64 too, so its reordered sums differ from the reference's by a few f64 ulps, far below
//! an f32 output's rounding. Each pool thread transforms in its own scratch (one line of
//! the transform length plus Bluestein's work space), sized at init in the run context.

use std::sync::Mutex;

use super::fft::{Fft, C64};
use super::{RunCtx, Sources, Src};
use crate::pool::Disjoint;

/// The run context's FFT scratch: one per pool thread.
pub(crate) type FftWorkers = Vec<Mutex<Vec<C64>>>;

/// Grows every thread's scratch to hold a line of `fft` and its work space.
fn reserve(ctx: &mut RunCtx, fft: &Fft) {
    let threads = ctx.pool.threads();
    ctx.fft
        .resize_with(threads.max(ctx.fft.len()), Default::default);
    let len = fft.len() + fft.scratch_len();
    for s in &mut ctx.fft {
        let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
        if s.len() < len {
            s.resize(len, [0.0; 2]);
        }
    }
}

/// The complex value at element `at` of a signal whose last axis holds `parts` (1: real,
/// 2: complex) values.
fn value(x: &[f32], at: usize, parts: usize) -> C64 {
    let at = at * parts;
    let im = if parts == 2 { x[at + 1] } else { 0.0 };
    [f64::from(x[at]), f64::from(im)]
}

/// A prepared DFT node: each line along `axis` of `X` `[outer, len, inner, parts]`,
/// zero-padded or cut to `n`, is transformed to `bins` values.
#[derive(Clone, Debug)]
pub(crate) struct DftOp {
    pub x: Src,
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub parts: usize,
    /// Output extent of the axis: `n`, or `n / 2 + 1` one-sided forward.
    pub bins: usize,
    pub inverse: bool,
    /// Inverse and one-sided: `X` is the first half of a Hermitian spectrum, the output
    /// the real signal (numpy's `irfft`).
    pub real_output: bool,
    pub fft: Fft,
}

impl DftOp {
    pub fn reserve(&self, ctx: &mut RunCtx) {
        reserve(ctx, &self.fft);
    }

    pub fn owned_bytes(&self) -> usize {
        self.fft.bytes()
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let (len, inner, parts, n) = (self.len, self.inner, self.parts, self.fft.len());
        let RunCtx { pool, fft, .. } = ctx;
        let workers = &*fft;
        let out_parts = if self.real_output { 1 } else { 2 };
        let out = Disjoint::new(out);
        pool.run(self.outer * inner, &|task, worker| {
            let mut guard = workers[worker].lock().unwrap_or_else(|e| e.into_inner());
            let (buf, scratch) = guard.split_at_mut(n);
            let (o, i) = (task / inner, task % inner);
            let first = o * len * inner + i;
            let at = |k: usize| value(x, first + k * inner, parts);
            if self.real_output {
                // The whole spectrum from its first half: bin n - k is the conjugate of
                // bin k; bins past the input are 0; bins 0 and n/2 count as real.
                let bin = |k: usize| if k < len { at(k) } else { [0.0; 2] };
                for (k, v) in buf.iter_mut().enumerate() {
                    *v = if k == 0 {
                        [bin(0)[0], 0.0]
                    } else if 2 * k < n {
                        bin(k)
                    } else if 2 * k == n {
                        [bin(k)[0], 0.0]
                    } else {
                        let b = bin(n - k);
                        [b[0], -b[1]]
                    };
                }
            } else {
                for (k, v) in buf.iter_mut().enumerate() {
                    *v = if k < len { at(k) } else { [0.0; 2] };
                }
            }
            self.fft.run(buf, scratch, self.inverse);
            let base = o * self.bins * inner + i;
            for (k, v) in buf[..self.bins].iter().enumerate() {
                let at = (base + k * inner) * out_parts;
                // SAFETY: each (line, bin) pair is written by one task only.
                let dst = unsafe { out.range(at, out_parts) };
                dst[0] = v[0] as f32;
                if out_parts == 2 {
                    dst[1] = v[1] as f32;
                }
            }
        });
    }
}

/// A prepared STFT node: frames of `n` samples every `step` of each signal
/// `[batch, len, parts]`, windowed, each transformed to `bins` values.
#[derive(Clone, Debug)]
pub(crate) struct StftOp {
    pub x: Src,
    pub window: Option<Src>,
    pub batch: usize,
    pub len: usize,
    pub parts: usize,
    pub step: usize,
    pub frames: usize,
    pub bins: usize,
    pub fft: Fft,
}

impl StftOp {
    pub fn reserve(&self, ctx: &mut RunCtx) {
        reserve(ctx, &self.fft);
    }

    pub fn owned_bytes(&self) -> usize {
        self.fft.bytes()
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let window = self.window.map(|w| sources.get(w));
        let n = self.fft.len();
        let RunCtx { pool, fft, .. } = ctx;
        let workers = &*fft;
        let out = Disjoint::new(out);
        pool.run(self.batch * self.frames, &|task, worker| {
            let mut guard = workers[worker].lock().unwrap_or_else(|e| e.into_inner());
            let (buf, scratch) = guard.split_at_mut(n);
            let (b, f) = (task / self.frames, task % self.frames);
            let first = b * self.len + f * self.step;
            for (j, v) in buf.iter_mut().enumerate() {
                let z = value(x, first + j, self.parts);
                let g = window.map_or(1.0, |w| f64::from(w[j]));
                *v = if window.is_some() {
                    [z[0] * g, z[1] * g]
                } else {
                    z
                };
            }
            self.fft.run(buf, scratch, false);
            // SAFETY: each task writes its own frame's bins.
            let dst = unsafe { out.range(task * self.bins * 2, self.bins * 2) };
            for (d, v) in dst.chunks_exact_mut(2).zip(&buf[..self.bins]) {
                d[0] = v[0] as f32;
                d[1] = v[1] as f32;
            }
        });
    }
}
