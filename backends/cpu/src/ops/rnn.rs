//! RNN (ONNX layout 0) on the GEMM path, as `gru.rs` runs GRU.
//!
//! Per direction, the input projection of all time steps is one GEMM,
//! `G = X · Wᵀ + (Wb + Rb)` (`[seq * batch, H]`, weights packed at init with the folded
//! bias in the panels). Each step adds `H · Rᵀ` (a GEMV over `Rᵀ` stored row-major,
//! contiguous `axpy`s), clips when the node has `clip`, and applies the direction's
//! activation: `H = f(clip(G_t + H · Rᵀ))`. With `sequence_lens` (constant, or read at
//! run time from its i32 bits and checked to lie in `1..=seq`), an entry runs its first
//! `len` steps (the reverse direction from `len - 1` down), its later `Y` rows are zero
//! and `Y_h` is its last step's state.
//!
//! The op writes `Y` (`[seq, dirs, batch, H]`) then `Y_h` (`[dirs, batch, H]`) into its
//! buffer; the node's outputs are views of it.

use baton_delegate_api::shape::RecurrentActivation;

use super::math::{sigmoid, tanh};
use super::{vec_bytes, RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, Epilogue, MatMut, MicroKernel, PackedB, Rows};
use crate::prepack::Packs;

/// One direction's prepared weights and activation.
#[derive(Clone, Debug)]
struct RnnDirection {
    /// `Wᵀ` (`[input, H]`), packed, with `Wb + Rb` in the panels.
    w: PackedB,
    /// `Rᵀ`, row-major `[H, H]`.
    r_t: Vec<f32>,
    act: RecurrentActivation,
    reverse: bool,
}

/// Where each batch entry's step count comes from.
#[derive(Clone, Debug)]
pub(crate) enum SeqLens {
    /// No `sequence_lens`: every entry runs the whole sequence.
    Full,
    /// Constant lengths, checked at init.
    Const(Vec<usize>),
    /// An i32 operand, checked at every run.
    Run(Src),
}

impl SeqLens {
    /// Bytes held (for the memory report).
    pub fn owned_bytes(&self) -> usize {
        match self {
            SeqLens::Const(v) => vec_bytes(v),
            _ => 0,
        }
    }

    /// Batch entry `b`'s step count, of a sequence of `seq` steps; a run-time length
    /// outside `1..=seq` is an error naming the `op` and the entry.
    pub fn len_of(
        &self,
        op: &str,
        seq: usize,
        sources: &Sources<'_>,
        b: usize,
    ) -> Result<usize, String> {
        match self {
            SeqLens::Full => Ok(seq),
            SeqLens::Const(v) => Ok(v[b]),
            SeqLens::Run(src) => {
                // An i32 is held as its bits.
                let raw = sources.get(*src)[b].to_bits() as i32;
                usize::try_from(raw)
                    .ok()
                    .filter(|l| (1..=seq).contains(l))
                    .ok_or_else(|| {
                        format!("{op} sequence_lens[{b}] = {raw} lies outside 1..={seq}")
                    })
            }
        }
    }
}

/// A prepared RNN node.
#[derive(Clone, Debug)]
pub(crate) struct RnnOp {
    x: Src,
    initial_h: Option<Src>,
    dirs: Vec<RnnDirection>,
    lens: SeqLens,
    clip: Option<f32>,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
}

/// The shapes and attributes of an RNN node.
pub(crate) struct RnnSpec<'a> {
    pub x_shape: &'a [usize],
    pub hidden: usize,
    pub direction: &'a str,
    /// One per direction.
    pub activations: Vec<RecurrentActivation>,
    pub clip: Option<f32>,
    /// `sequence_lens`; constant ones lie in `1..=seq` (checked by the lowering).
    pub lens: SeqLens,
}

impl RnnOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        let per_dir = |d: &RnnDirection| vec_bytes(&d.r_t);
        self.dirs.iter().map(per_dir).sum::<usize>()
            + vec_bytes(&self.dirs)
            + self.lens.owned_bytes()
    }

    /// `w`: `[dirs, H, input]`, `r`: `[dirs, H, H]`, `b`: `[dirs, 2H]` when present.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        packs: &mut Packs<'_>,
        kernel: &MicroKernel,
        x: Src,
        initial_h: Option<Src>,
        w: &[f32],
        r: &[f32],
        b: Option<&[f32]>,
        spec: RnnSpec<'_>,
    ) -> RnnOp {
        let (seq, batch, input) = (spec.x_shape[0], spec.x_shape[1], spec.x_shape[2]);
        let hidden = spec.hidden;
        let dirs = spec
            .activations
            .iter()
            .enumerate()
            .map(|(d, &act)| {
                let wd = &w[d * hidden * input..(d + 1) * hidden * input];
                let rd = &r[d * hidden * hidden..(d + 1) * hidden * hidden];
                let mut r_t = vec![0f32; hidden * hidden];
                for (n, row) in rd.chunks_exact(hidden.max(1)).enumerate().take(hidden) {
                    for (k, &v) in row.iter().enumerate() {
                        r_t[k * hidden + n] = v;
                    }
                }
                let bias: Vec<f32> = match b {
                    Some(b) => {
                        let bd = &b[d * 2 * hidden..(d + 1) * 2 * hidden];
                        (0..hidden).map(|j| bd[j] + bd[hidden + j]).collect()
                    }
                    None => vec![0.0; hidden],
                };
                RnnDirection {
                    // Wᵀ[k][n] = W[n][k].
                    w: PackedB::new_in(packs, kernel, 1, input, hidden, Some(&bias), |k, n| {
                        wd[n * input + k]
                    }),
                    r_t,
                    act,
                    reverse: spec.direction == "reverse" || d == 1,
                }
            })
            .collect();
        RnnOp {
            x,
            initial_h,
            dirs,
            lens: spec.lens,
            clip: spec.clip.map(f32::abs),
            seq,
            batch,
            input,
            hidden,
        }
    }

    /// Floats of `Y` and of `Y_h`.
    pub fn out_len(&self) -> (usize, usize) {
        let state = self.dirs.len() * self.batch * self.hidden;
        (self.seq * state, state)
    }

    pub fn reserve(&self, ctx: &mut RunCtx) {
        // G for all steps and H.
        ctx.reserve_work(self.seq * self.batch * self.hidden + self.hidden);
    }

    /// Batch entry `b`'s step count.
    fn len_of(&self, sources: &Sources<'_>, b: usize) -> Result<usize, String> {
        self.lens.len_of("RNN", self.seq, sources, b)
    }

    pub fn run(
        &self,
        sources: &Sources<'_>,
        out: &mut [f32],
        ctx: &mut RunCtx,
    ) -> Result<(), String> {
        let (seq, batch, hn) = (self.seq, self.batch, self.hidden);
        if hn == 0 || batch == 0 {
            return Ok(());
        }
        // Every length is checked before anything is written.
        for b in 0..batch {
            self.len_of(sources, b)?;
        }
        let ndirs = self.dirs.len();
        let x = sources.get(self.x);
        let init_h = self.initial_h.map(|s| sources.get(s));
        let (y_len, state_len) = self.out_len();
        let (y, rest) = out.split_at_mut(y_len);
        let y_h = &mut rest[..state_len];
        let RunCtx {
            kernel, pool, work, ..
        } = ctx;
        for (d, dir) in self.dirs.iter().enumerate() {
            let (g_all, rest) = work.split_at_mut(seq * batch * hn);
            let h = &mut rest[..hn];
            let a = Rows::Dense {
                data: x,
                lda: self.input,
            };
            let g = MatMut {
                data: &mut g_all[..],
                rs: hn,
            };
            gemm_parallel(pool, kernel, seq * batch, a, &dir.w, g, &Epilogue::new());
            for b in 0..batch {
                let at = (d * batch + b) * hn;
                match init_h {
                    Some(v) => h.copy_from_slice(&v[at..at + hn]),
                    None => h.fill(0.0),
                }
                let len = self.len_of(sources, b)?;
                for step in 0..len {
                    let t = if dir.reverse { len - 1 - step } else { step };
                    // The step's gate, built in place in G (each row is read once).
                    let gate = &mut g_all[(t * batch + b) * hn..][..hn];
                    axpys(gate, h, &dir.r_t);
                    for (hv, &v) in h.iter_mut().zip(gate.iter()) {
                        let v = match self.clip {
                            Some(c) => v.clamp(-c, c),
                            None => v,
                        };
                        *hv = activate(dir.act, v);
                    }
                    let o = ((t * ndirs + d) * batch + b) * hn;
                    y[o..o + hn].copy_from_slice(h);
                }
                // Steps past the entry's length are zero (the buffer is reused).
                for t in len..seq {
                    let o = ((t * ndirs + d) * batch + b) * hn;
                    y[o..o + hn].fill(0.0);
                }
                y_h[at..at + hn].copy_from_slice(h);
            }
        }
        Ok(())
    }
}

/// `f(v)`: the delegate's f32 Tanh and Sigmoid (those of its Tanh and Sigmoid ops), the
/// others through the shared definition, in f64 and rounded once.
#[inline]
fn activate(f: RecurrentActivation, v: f32) -> f32 {
    match f {
        RecurrentActivation::Tanh => tanh(v),
        RecurrentActivation::Sigmoid => sigmoid(v),
        RecurrentActivation::Relu => v.max(0.0),
        other => other.apply(f64::from(v)) as f32,
    }
}

/// `acc += v · Rᵀ` over `Rᵀ` row-major with rows of `acc.len()`: one contiguous `axpy`
/// per element of `v`.
#[inline(always)]
fn axpys(acc: &mut [f32], v: &[f32], r_t: &[f32]) {
    let n = acc.len();
    for (k, &vk) in v.iter().enumerate() {
        let row = &r_t[k * n..(k + 1) * n];
        acc.iter_mut().zip(row).for_each(|(a, &r)| *a += vk * r);
    }
}
