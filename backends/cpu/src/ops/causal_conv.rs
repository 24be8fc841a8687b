//! CausalConvWithState: the stateful depthwise causal 1-D convolution of streaming
//! models (Mamba-style blocks), `y[b, c, t] = bias[c] + sum_k P[t + k] * w[c, k]` over
//! `P`, the past state `[K - 1]` followed by the input line, then SiLU when asked; the
//! next state is the last `K - 1` positions of `P`.
//!
//! Each `(batch, channel)` line is independent, so lines are split over the pool. Within a
//! line the sum runs tap by tap as an axpy over all output positions: for tap `k`, the
//! first `K - 1 - k` positions read the past state and the rest read the input, two
//! contiguous runs that vectorize (compiled per instruction set like `math::map`). The
//! SiLU uses the vectorizable polynomial `exp`. `P` is never materialised.

use super::math::exp;
use super::{Sources, Src};
use crate::gemm::Isa;
use crate::pool::{Disjoint, Pool};

/// A prepared CausalConvWithState: `x` `[B, C, L]`, `w` `[C, 1, K]`, an optional bias
/// `[C]` and past state `[B, C, K - 1]`. Its output buffer holds `y` `[B, C, L]`, then
/// the present state `[B, C, K - 1]`.
#[derive(Clone, Debug)]
pub(crate) struct CausalConvOp {
    pub x: Src,
    pub w: Src,
    pub bias: Option<Src>,
    pub past: Option<Src>,
    pub lines: usize,
    pub channels: usize,
    pub len: usize,
    pub k: usize,
    pub silu: bool,
}

/// Lines below this many output values in all run on the calling thread.
const PARALLEL_MIN: usize = 16 * 1024;

impl CausalConvOp {
    /// The lengths of the two outputs.
    pub fn out_len(&self) -> (usize, usize) {
        (self.lines * self.len, self.lines * (self.k - 1))
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let (y_len, state_len) = self.out_len();
        let parts = Disjoint::new(&mut out[..y_len + state_len]);
        let x = sources.get(self.x);
        let w = sources.get(self.w);
        let bias = self.bias.map(|s| sources.get(s));
        let past = self.past.map(|s| sources.get(s));
        let tasks = if y_len < PARALLEL_MIN {
            1
        } else {
            pool.threads().min(self.lines)
        };
        let per = self.lines.div_ceil(tasks.max(1));
        let h = self.k - 1;
        let task = |task: usize, _| {
            let (l0, l1) = (
                (task * per).min(self.lines),
                ((task + 1) * per).min(self.lines),
            );
            // SAFETY: the tasks' line ranges are disjoint, and `y` and the state are
            // disjoint parts of the buffer.
            let (y, state) = unsafe {
                (
                    parts.range(l0 * self.len, (l1 - l0) * self.len),
                    parts.range(y_len + l0 * h, (l1 - l0) * h),
                )
            };
            let lines = Lines {
                x: &x[l0 * self.len..l1 * self.len],
                w,
                bias,
                past: past.map(|p| &p[l0 * h..l1 * h]),
                first: l0,
                op: self,
            };
            run_lines(isa, &lines, y, state);
        };
        pool.run(tasks, &task);
    }
}

/// The lines one task computes, from line `first` on.
struct Lines<'a> {
    x: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    past: Option<&'a [f32]>,
    first: usize,
    op: &'a CausalConvOp,
}

/// Runs [`lines`] compiled for `isa`'s vector width.
fn run_lines(isa: Isa, l: &Lines<'_>, y: &mut [f32], state: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn avx512(l: &Lines<'_>, y: &mut [f32], state: &mut [f32]) {
            lines(l, y, state)
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2(l: &Lines<'_>, y: &mut [f32], state: &mut [f32]) {
            lines(l, y, state)
        }
        match isa {
            // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
            Isa::Avx512F => return unsafe { avx512(l, y, state) },
            // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
            Isa::Avx2Fma => return unsafe { avx2(l, y, state) },
            _ => {}
        }
    }
    let _ = isa;
    lines(l, y, state)
}

#[inline(always)]
fn lines(l: &Lines<'_>, y: &mut [f32], state: &mut [f32]) {
    let (len, k) = (l.op.len, l.op.k);
    let h = k - 1;
    let count = y.len() / len.max(1);
    let count = if len == 0 {
        state.len() / h.max(1)
    } else {
        count
    };
    for i in 0..count {
        let c = (l.first + i) % l.op.channels;
        let x = &l.x[i * len..(i + 1) * len];
        let w = &l.w[c * k..(c + 1) * k];
        let past = l.past.map(|p| &p[i * h..(i + 1) * h]);
        let y = &mut y[i * len..(i + 1) * len];
        y.fill(l.bias.map_or(0.0, |b| b[c]));
        for (j, &wj) in w.iter().enumerate() {
            // Position t reads P[t + j]: the past state while t + j < h, then x[t + j - h].
            let split = (h - j).min(len);
            if let Some(p) = past {
                for (o, &v) in y[..split].iter_mut().zip(&p[j..]) {
                    *o += v * wj;
                }
            }
            if split < len {
                for (o, &v) in y[split..].iter_mut().zip(&x[split + j - h..]) {
                    *o += v * wj;
                }
            }
        }
        if l.op.silu {
            for v in y.iter_mut() {
                *v /= 1.0 + exp(-*v);
            }
        }
        // The next state: P[len..len + h], the past's tail while len + i < h.
        let state = &mut state[i * h..(i + 1) * h];
        for (s, o) in state.iter_mut().enumerate() {
            let p = len + s;
            *o = if p < h {
                past.map_or(0.0, |q| q[p])
            } else {
                x[p - h]
            };
        }
    }
}
