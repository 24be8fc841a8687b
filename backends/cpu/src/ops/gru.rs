//! GRU (ONNX layout 0, default activations) on the GEMM path, as `lstm.rs` runs LSTM.
//!
//! Per direction, the input projection of all time steps is one GEMM,
//! `G = X · Wᵀ + bias` (`[seq * batch, 3H]`, weights packed at init; the bias holds
//! `Wb + Rb` for z and r, and for h `Wbh + Rbh`, or `Wbh` alone with
//! `linear_before_reset`, whose `Rbh` stays inside the reset product). Each step adds
//! `H · Rᵀ` for z and r (a GEMV over `Rᵀ` stored row-major, contiguous `axpy`s), then
//! the candidate's recurrent term: `(r ⊙ H) · Rhᵀ`, or `r ⊙ (H · Rhᵀ + Rbh)` with
//! `linear_before_reset`. Gate order z, r, h: `z = σ(.)`, `r = σ(.)`, `h~ = tanh(.)`,
//! `H = (1 - z) h~ + z H`. With `clip` every pre-activation is clamped to `[-clip, clip]`
//! before its σ or tanh (a pass over the gates only then). With `sequence_lens` an entry runs its first `len` steps (the
//! reverse direction from `len - 1` down), its later `Y` rows are zero and `Y_h` is its
//! last step's state, as `rnn.rs` does.
//!
//! The op writes `Y` (`[seq, dirs, batch, H]`) then `Y_h` (`[dirs, batch, H]`) into its
//! buffer; the node's outputs are views of it.

use super::math::{sigmoid, tanh};
use super::rnn::SeqLens;
use super::{vec_bytes, RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, Epilogue, MatMut, MicroKernel, PackedB, Rows};
use crate::prepack::Packs;

/// One direction's prepared weights.
#[derive(Clone, Debug)]
struct GruDirection {
    /// `Wᵀ` (`[input, 3H]`), packed, with the folded biases in the panels.
    w: PackedB,
    /// `Rᵀ`, row-major `[H, 3H]`.
    r_t: Vec<f32>,
    /// `Rbh` (`linear_before_reset` only; zeros otherwise).
    rbh: Vec<f32>,
    reverse: bool,
}

/// A prepared GRU node.
#[derive(Clone, Debug)]
pub(crate) struct GruOp {
    x: Src,
    initial_h: Option<Src>,
    dirs: Vec<GruDirection>,
    lens: SeqLens,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    linear_before_reset: bool,
    /// `clip`'s bound (its absolute value, as the reference takes it) on every gate's
    /// pre-activation; `None` leaves the step loop without the clamping passes.
    clip: Option<f32>,
}

/// The shapes and attributes of a GRU node.
pub(crate) struct GruSpec<'a> {
    pub x_shape: &'a [usize],
    pub dirs: usize,
    pub hidden: usize,
    pub direction: &'a str,
    pub linear_before_reset: bool,
    /// The `clip` attribute, when the node has one.
    pub clip: Option<f32>,
    /// `sequence_lens`; constant ones lie in `1..=seq` (checked by the lowering).
    pub lens: SeqLens,
}

impl GruOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        let per_dir = |d: &GruDirection| vec_bytes(&d.r_t) + vec_bytes(&d.rbh);
        self.dirs.iter().map(per_dir).sum::<usize>()
            + vec_bytes(&self.dirs)
            + self.lens.owned_bytes()
    }

    /// `w`: `[dirs, 3H, input]`, `r`: `[dirs, 3H, H]`, `b`: `[dirs, 6H]` when present.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        packs: &mut Packs<'_>,
        kernel: &MicroKernel,
        x: Src,
        initial_h: Option<Src>,
        w: &[f32],
        r: &[f32],
        b: Option<&[f32]>,
        spec: GruSpec<'_>,
    ) -> GruOp {
        let (seq, batch, input) = (spec.x_shape[0], spec.x_shape[1], spec.x_shape[2]);
        let hidden = spec.hidden;
        let gh = 3 * hidden;
        let lbr = spec.linear_before_reset;
        let dirs = (0..spec.dirs)
            .map(|d| {
                let wd = &w[d * gh * input..(d + 1) * gh * input];
                let rd = &r[d * gh * hidden..(d + 1) * gh * hidden];
                let mut r_t = vec![0f32; hidden * gh];
                for (n, row) in rd.chunks_exact(hidden.max(1)).enumerate().take(gh) {
                    for (k, &v) in row.iter().enumerate() {
                        r_t[k * gh + n] = v;
                    }
                }
                let zeros = vec![0f32; 2 * gh];
                let bd = b.map_or(&zeros[..], |b| &b[d * 2 * gh..(d + 1) * 2 * gh]);
                let bias: Vec<f32> = (0..gh)
                    .map(|j| {
                        let inside = lbr && j >= 2 * hidden;
                        bd[j] + if inside { 0.0 } else { bd[gh + j] }
                    })
                    .collect();
                let rbh = if lbr {
                    bd[gh + 2 * hidden..2 * gh].to_vec()
                } else {
                    vec![0.0; hidden]
                };
                GruDirection {
                    // Wᵀ[k][n] = W[n][k].
                    w: PackedB::new_in(packs, kernel, 1, input, gh, Some(&bias), |k, n| {
                        wd[n * input + k]
                    }),
                    r_t,
                    rbh,
                    reverse: spec.direction == "reverse" || d == 1,
                }
            })
            .collect();
        GruOp {
            x,
            initial_h,
            dirs,
            lens: spec.lens,
            seq,
            batch,
            input,
            hidden,
            linear_before_reset: lbr,
            clip: spec.clip.map(f32::abs),
        }
    }

    /// Floats of `Y` and of `Y_h`.
    pub fn out_len(&self) -> (usize, usize) {
        let state = self.dirs.len() * self.batch * self.hidden;
        (self.seq * state, state)
    }

    pub fn reserve(&self, ctx: &mut RunCtx) {
        let gh = 3 * self.hidden;
        // G for all steps, one step's gates, the recurrent term, H and r ⊙ H.
        ctx.reserve_work(self.seq * self.batch * gh + gh + self.hidden * 3);
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
            self.lens.len_of("GRU", seq, sources, b)?;
        }
        let gh = 3 * hn;
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
            let (g_all, rest) = work.split_at_mut(seq * batch * gh);
            let (gates, rest) = rest.split_at_mut(gh);
            let (rec, rest) = rest.split_at_mut(hn);
            let (h, rest) = rest.split_at_mut(hn);
            let rh = &mut rest[..hn];
            let a = Rows::Dense {
                data: x,
                lda: self.input,
            };
            let g = MatMut {
                data: &mut g_all[..],
                rs: gh,
            };
            gemm_parallel(pool, kernel, seq * batch, a, &dir.w, g, &Epilogue::new());
            for b in 0..batch {
                let at = (d * batch + b) * hn;
                match init_h {
                    Some(v) => h.copy_from_slice(&v[at..at + hn]),
                    None => h.fill(0.0),
                }
                let len = self.lens.len_of("GRU", seq, sources, b)?;
                for step in 0..len {
                    let t = if dir.reverse { len - 1 - step } else { step };
                    gates.copy_from_slice(&g_all[(t * batch + b) * gh..][..gh]);
                    // z and r: + H · R_zrᵀ.
                    axpys(&mut gates[..2 * hn], h, &dir.r_t, gh, 0);
                    let (zr, cand) = gates.split_at_mut(2 * hn);
                    if let Some(bound) = self.clip {
                        zr.iter_mut().for_each(|v| *v = v.clamp(-bound, bound));
                    }
                    let (z, r) = zr.split_at_mut(hn);
                    z.iter_mut().for_each(|v| *v = sigmoid(*v));
                    r.iter_mut().for_each(|v| *v = sigmoid(*v));
                    if self.linear_before_reset {
                        rec.copy_from_slice(&dir.rbh);
                        axpys(rec, h, &dir.r_t, gh, 2 * hn);
                        cand.iter_mut()
                            .zip(r.iter().zip(rec.iter()))
                            .for_each(|(c, (&r, &v))| *c += r * v);
                    } else {
                        rh.iter_mut()
                            .zip(r.iter().zip(h.iter()))
                            .for_each(|(o, (&r, &h))| *o = r * h);
                        axpys(cand, rh, &dir.r_t, gh, 2 * hn);
                    }
                    if let Some(bound) = self.clip {
                        cand.iter_mut().for_each(|v| *v = v.clamp(-bound, bound));
                    }
                    for ((hv, &z), &c) in h.iter_mut().zip(z.iter()).zip(cand.iter()) {
                        *hv = (1.0 - z) * tanh(c) + z * *hv;
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

/// `acc += v · Rᵀ[:, c0..c0 + acc.len()]` over `Rᵀ` row-major with rows of `stride`: one
/// contiguous `axpy` per element of `v`.
#[inline(always)]
fn axpys(acc: &mut [f32], v: &[f32], r_t: &[f32], stride: usize, c0: usize) {
    let n = acc.len();
    for (k, &vk) in v.iter().enumerate() {
        let row = &r_t[k * stride + c0..k * stride + c0 + n];
        acc.iter_mut().zip(row).for_each(|(a, &r)| *a += vk * r);
    }
}
