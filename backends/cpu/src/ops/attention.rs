//! Attention (ONNX opset 23) and RotaryEmbedding.
//!
//! Attention runs one task per (batch, query head) on the pool: the head's scores
//! `scale · Q·Kᵀ` and its output `P·V` are two products of the delegate's GEMM, whose
//! right operands (the keys transposed, the values) arrive at run time and are packed
//! into the worker's own buffers; between them the row softmax is the vectorized one of
//! Softmax. The softcap, the mask, the causal triangle and `nonpad_kv_seqlen` are applied
//! to the scores in place, as one additive bias like ONNX's reference (0 or -inf, or the
//! float mask's values), so a query whose keys are all masked gets NaN weights as there.
//!
//! Every buffer is sized at init: the op's outputs (`Y`, `present_key`, `present_value`
//! and, when asked for, `qk_matmul_output`) share one arena buffer, and the per-worker
//! scratch (two packings, the scores, the weights, the head's output) lives in the run
//! context, one set per pool thread, each behind an uncontended lock its worker takes.

use std::sync::Mutex;

use super::elementwise::softmax_row;
use super::math::rows;
use super::{RunCtx, Sources, Src};
use crate::gemm::{gemm, Epilogue, MatMut, PackedB, Rows};
use crate::pool::Disjoint;

/// The extents of one Attention node (see `AttentionGeometry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AttnDims {
    /// 3-D operands: `[B, S, H * D]`, heads interleaved in each row.
    pub packed: bool,
    pub batch: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    /// Query length `S`.
    pub q_len: usize,
    /// New keys `L`.
    pub kv_len: usize,
    /// Past keys `P`.
    pub past_len: usize,
    /// Q and K head size `D`.
    pub head: usize,
    /// V head size `Dv`.
    pub v_head: usize,
}

impl AttnDims {
    /// Keys each query sees: `P + L`.
    fn total(&self) -> usize {
        self.past_len + self.kv_len
    }
}

/// The attention mask as read at run time: held as floats (a bool mask as 0.0/1.0),
/// broadcast onto `[B, Hq, S, T]` by `strides` (0 along broadcast axes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaskSpec {
    pub src: Src,
    pub bool: bool,
    pub strides: [usize; 4],
    /// The mask's last extent: keys at or past it are masked, as ONNX pads a short mask.
    pub keys: usize,
}

impl MaskSpec {
    /// The mask of `shape` (rank at most 4, already checked to broadcast).
    pub fn new(src: Src, bool: bool, shape: &[usize]) -> MaskSpec {
        let rank = shape.len();
        let mut strides = [0; 4];
        let mut step = 1;
        for k in (0..rank).rev() {
            strides[4 - rank + k] = if shape[k] == 1 { 0 } else { step };
            step *= shape[k];
        }
        MaskSpec {
            src,
            bool,
            strides,
            keys: shape.last().copied().unwrap_or(usize::MAX),
        }
    }
}

/// What `qk_matmul_output` holds, by `qk_matmul_output_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QkOut {
    /// The scaled (and softcapped) scores, before the mask.
    Raw,
    /// The scores with the mask's bias added.
    Biased,
    /// The softmax weights.
    Weights,
}

impl QkOut {
    /// The output of `mode` (0 to 3) with `softcap`: as ONNX's reference has it, mode 1
    /// with a softcap gives the capped scores without the bias.
    pub fn of(mode: i64, softcap: f32) -> QkOut {
        match mode {
            3 => QkOut::Weights,
            2 => QkOut::Biased,
            1 if softcap <= 0.0 => QkOut::Biased,
            _ => QkOut::Raw,
        }
    }
}

/// One worker's scratch for attention, sized at init for the largest head.
#[derive(Debug, Default)]
pub(crate) struct AttnScratch {
    keys: PackedB,
    values: PackedB,
    scores: Vec<f32>,
    weights: Vec<f32>,
    head_out: Vec<f32>,
}

impl AttnScratch {
    /// Bytes this scratch allocated.
    pub fn bytes(&self) -> usize {
        self.keys.capacity_bytes()
            + self.values.capacity_bytes()
            + (self.scores.capacity() + self.weights.capacity() + self.head_out.capacity())
                * size_of::<f32>()
    }
}

/// A prepared Attention node.
#[derive(Clone, Debug)]
pub(crate) struct AttentionOp {
    pub q: Src,
    pub k: Src,
    pub v: Src,
    /// `past_key` and `past_value`, when the node has a past.
    pub past: Option<(Src, Src)>,
    pub mask: Option<MaskSpec>,
    /// `nonpad_kv_seqlen` (i64, one per batch).
    pub nonpad: Option<Src>,
    pub dims: AttnDims,
    pub scale: f32,
    /// 0: none.
    pub softcap: f32,
    pub causal: bool,
    /// `qk_matmul_output` when the node uses it.
    pub qk: Option<QkOut>,
}

impl AttentionOp {
    /// The lengths of `Y`, `present_key`, `present_value` and `qk_matmul_output` (0 when
    /// not asked for), in the order they sit in the op's buffer.
    pub fn out_len(&self) -> [usize; 4] {
        let d = &self.dims;
        let t = d.total();
        [
            d.batch * d.q_heads * d.q_len * d.v_head,
            d.batch * d.kv_heads * t * d.head,
            d.batch * d.kv_heads * t * d.v_head,
            if self.qk.is_some() {
                d.batch * d.q_heads * d.q_len * t
            } else {
                0
            },
        ]
    }

    /// Sizes one scratch per pool thread for this node's heads.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        let d = &self.dims;
        let (s, t) = (d.q_len, d.total());
        let threads = ctx.pool.threads();
        ctx.attn
            .resize_with(threads.max(ctx.attn.len()), Default::default);
        for scratch in &mut ctx.attn {
            let sc = scratch.get_mut().unwrap_or_else(|e| e.into_inner());
            sc.keys.reserve(ctx.kernel, 1, d.head, t);
            sc.values.reserve(ctx.kernel, 1, t, d.v_head);
            grow(&mut sc.scores, s * t);
            grow(&mut sc.weights, s * t);
            grow(&mut sc.head_out, s * d.v_head);
        }
    }

    pub fn run(
        &self,
        sources: &Sources<'_>,
        out: &mut [f32],
        ctx: &mut RunCtx,
    ) -> Result<(), String> {
        let d = self.dims;
        let (s, t, p) = (d.q_len, d.total(), d.past_len);
        let [y_len, pk_len, pv_len, qk_len] = self.out_len();
        let (y, rest) = out.split_at_mut(y_len);
        let (pk, rest) = rest.split_at_mut(pk_len);
        let (pv, rest) = rest.split_at_mut(pv_len);
        let qk = &mut rest[..qk_len];
        let past = self.past.map(|(k, v)| (sources.get(k), sources.get(v)));
        self.present(pk, sources.get(self.k), past.map(|p| p.0), d.head);
        self.present(pv, sources.get(self.v), past.map(|p| p.1), d.v_head);
        let nonpad = match self.nonpad {
            Some(src) => {
                let bytes = sources.bytes(src);
                if bytes.len() < d.batch * 8 {
                    return Err("nonpad_kv_seqlen holds too few values".into());
                }
                Some(bytes)
            }
            None => None,
        };
        let seqlen = |b: usize| {
            nonpad.map(|n| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&n[b * 8..b * 8 + 8]);
                i64::from_le_bytes(w)
            })
        };
        if s == 0 || d.v_head == 0 && self.qk.is_none() {
            return Ok(());
        }
        if t == 0 {
            // No keys: the weights are an empty softmax, the output an empty sum.
            y.fill(0.0);
            return Ok(());
        }
        let q = sources.get(self.q);
        let mask = self.mask.map(|m| (m, sources.get(m.src)));
        let RunCtx {
            kernel, pool, attn, ..
        } = ctx;
        let (kernel, attn) = (*kernel, &*attn);
        let isa = kernel.isa();
        let (pk, pv) = (&*pk, &*pv);
        let y = Disjoint::new(y);
        let qk = Disjoint::new(qk);
        let group = d.q_heads / d.kv_heads;
        pool.run(d.batch * d.q_heads, &|task, worker| {
            let (b, h) = (task / d.q_heads, task % d.q_heads);
            let kv = b * d.kv_heads + h / group;
            let mut guard = attn[worker].lock().unwrap_or_else(|e| e.into_inner());
            let sc = &mut *guard;
            let scores = &mut sc.scores[..s * t];
            // scale · Q·Kᵀ: the keys are packed transposed, the scale folded in.
            let keys = &pk[kv * t * d.head..(kv + 1) * t * d.head];
            sc.keys
                .pack_strided(kernel, d.head, t, keys, 1, d.head, self.scale);
            let (q_at, lda) = if d.packed {
                ((b * s * d.q_heads + h) * d.head, d.q_heads * d.head)
            } else {
                ((b * d.q_heads + h) * s * d.head, d.head)
            };
            let lhs = Rows::Dense {
                data: &q[q_at.min(q.len())..],
                lda,
            };
            let c = MatMut {
                data: scores,
                rs: t,
            };
            gemm(kernel, s, lhs, &sc.keys, c, &Epilogue::new());
            // Keys before `offset + i + 1` are visible to query `i` under the causal mask.
            let nonpad = seqlen(b);
            let offset = match nonpad {
                _ if p > 0 => p as i64,
                Some(n) => n - s as i64,
                None => 0,
            };
            let qk_row = |i: usize| {
                // SAFETY: the row of (b, h, i) is written by this task alone.
                unsafe { qk.range(((b * d.q_heads + h) * s + i) * t, t) }
            };
            for (i, row) in sc.scores[..s * t].chunks_exact_mut(t).enumerate() {
                if self.softcap > 0.0 {
                    let cap = self.softcap;
                    row.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
                }
                if self.qk == Some(QkOut::Raw) {
                    qk_row(i).copy_from_slice(row);
                }
                if let Some((m, values)) = mask {
                    let base = b * m.strides[0] + h * m.strides[1] + i * m.strides[2];
                    for (j, v) in row.iter_mut().enumerate() {
                        *v += if j >= m.keys {
                            f32::NEG_INFINITY
                        } else {
                            let x = values[base + j * m.strides[3]];
                            match m.bool {
                                true if x != 0.0 => 0.0,
                                true => f32::NEG_INFINITY,
                                false => x,
                            }
                        };
                    }
                }
                if self.causal {
                    let first = (i as i64 + offset + 1).clamp(0, t as i64) as usize;
                    row[first..]
                        .iter_mut()
                        .for_each(|v| *v += f32::NEG_INFINITY);
                }
                if let Some(n) = nonpad {
                    let first = n.clamp(0, t as i64) as usize;
                    row[first..]
                        .iter_mut()
                        .for_each(|v| *v += f32::NEG_INFINITY);
                }
                if self.qk == Some(QkOut::Biased) {
                    qk_row(i).copy_from_slice(row);
                }
            }
            let weights = &mut sc.weights[..s * t];
            // A closure, not the function item: see `rows`.
            #[allow(clippy::redundant_closure)]
            rows(
                isa,
                &sc.scores[..s * t],
                weights,
                t,
                #[inline(always)]
                |r, o| softmax_row(r, o),
            );
            if self.qk == Some(QkOut::Weights) {
                for (i, row) in weights.chunks_exact(t).enumerate() {
                    qk_row(i).copy_from_slice(row);
                }
            }
            if d.v_head == 0 {
                return;
            }
            // P·V into the head's scratch, then into its rows of Y.
            let values = &pv[kv * t * d.v_head..(kv + 1) * t * d.v_head];
            sc.values
                .pack_strided(kernel, t, d.v_head, values, d.v_head, 1, 1.0);
            let head_out = &mut sc.head_out[..s * d.v_head];
            let lhs = Rows::Dense {
                data: &sc.weights[..s * t],
                lda: t,
            };
            let c = MatMut {
                data: head_out,
                rs: d.v_head,
            };
            gemm(kernel, s, lhs, &sc.values, c, &Epilogue::new());
            for (i, row) in sc.head_out[..s * d.v_head]
                .chunks_exact(d.v_head)
                .enumerate()
            {
                let at = if d.packed {
                    ((b * s + i) * d.q_heads + h) * d.v_head
                } else {
                    ((b * d.q_heads + h) * s + i) * d.v_head
                };
                // SAFETY: the row of (b, h, i) is written by this task alone.
                unsafe { y.range(at, d.v_head) }.copy_from_slice(row);
            }
        });
        Ok(())
    }

    /// Past keys (or values) followed by the new ones, as `[B, Hkv, P + L, width]`; the
    /// new ones read from their 3-D or 4-D layout.
    fn present(&self, out: &mut [f32], fresh: &[f32], past: Option<&[f32]>, width: usize) {
        let d = &self.dims;
        let (l, p) = (d.kv_len, d.past_len);
        let t = p + l;
        if width == 0 {
            return;
        }
        for (bh, block) in out.chunks_exact_mut(t * width).enumerate() {
            let (b, h) = (bh / d.kv_heads, bh % d.kv_heads);
            let (old, new) = block.split_at_mut(p * width);
            if let Some(past) = past {
                old.copy_from_slice(&past[bh * p * width..(bh + 1) * p * width]);
            }
            if d.packed {
                for (r, row) in new.chunks_exact_mut(width).enumerate() {
                    let at = ((b * l + r) * d.kv_heads + h) * width;
                    row.copy_from_slice(&fresh[at..at + width]);
                }
            } else {
                new.copy_from_slice(&fresh[bh * l * width..(bh + 1) * l * width]);
            }
        }
    }
}

/// Grows `v` to at least `len` elements.
fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

/// The run context's attention scratch: one per pool thread.
pub(crate) type AttnWorkers = Vec<Mutex<AttnScratch>>;

/// A prepared RotaryEmbedding node: `X` with the first `2 · half` values of each head
/// rotated by the angle of its position (the caches hold its cosine and sine).
#[derive(Clone, Debug)]
pub(crate) struct RotaryOp {
    pub x: Src,
    pub cos: Src,
    pub sin: Src,
    /// `position_ids` (i64 `[B, S]`), indexing the caches' rows.
    pub positions: Option<Src>,
    pub packed: bool,
    pub batch: usize,
    pub heads: usize,
    pub seq: usize,
    pub head: usize,
    /// Half the rotated prefix of each head.
    pub half: usize,
    pub interleaved: bool,
    /// The caches' rows when positions index them.
    pub max_position: usize,
}

impl RotaryOp {
    /// Rotates pairs `(x[k], x[k + half])` (or `(x[2k], x[2k + 1])` interleaved) of each
    /// head: `(x1 cos - x2 sin, x1 sin + x2 cos)`; the rest of the head is copied. A
    /// position id outside the caches is an error naming it.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let x = sources.get(self.x);
        let (cos, sin) = (sources.get(self.cos), sources.get(self.sin));
        let positions = self.positions.map(|p| sources.bytes(p));
        out.copy_from_slice(&x[..out.len()]);
        let (hn, s, dn, half) = (self.heads, self.seq, self.head, self.half);
        if half == 0 {
            return Ok(());
        }
        for b in 0..self.batch {
            for i in 0..s {
                let row = match positions {
                    Some(ids) => {
                        let at = (b * s + i) * 8;
                        let mut w = [0u8; 8];
                        w.copy_from_slice(ids.get(at..at + 8).ok_or("too few position ids")?);
                        let pos = i64::from_le_bytes(w);
                        if pos < 0 || pos as u64 >= self.max_position as u64 {
                            return Err(format!(
                                "RotaryEmbedding position id {pos} is outside the caches' {} \
                                 positions",
                                self.max_position
                            ));
                        }
                        pos as usize * half
                    }
                    None => (b * s + i) * half,
                };
                let (c, sn) = (&cos[row..row + half], &sin[row..row + half]);
                for h in 0..hn {
                    let base = if self.packed {
                        ((b * s + i) * hn + h) * dn
                    } else {
                        ((b * hn + h) * s + i) * dn
                    };
                    let src = &x[base..base + 2 * half];
                    let dst = &mut out[base..base + 2 * half];
                    if self.interleaved {
                        let pairs = dst.chunks_exact_mut(2).zip(src.chunks_exact(2));
                        for ((o, v), (&co, &si)) in pairs.zip(c.iter().zip(sn)) {
                            o[0] = v[0] * co - v[1] * si;
                            o[1] = v[0] * si + v[1] * co;
                        }
                    } else {
                        let (x1, x2) = src.split_at(half);
                        let (o1, o2) = dst.split_at_mut(half);
                        for k in 0..half {
                            o1[k] = x1[k] * c[k] - x2[k] * sn[k];
                            o2[k] = x1[k] * sn[k] + x2[k] * c[k];
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
