//! LinearAttention: a recurrent state `[d_k, d_v]` per key/value head, updated token by
//! token (linear, gated, delta or gated-delta rule) and read by the group's queries;
//! threaded over (batch, key/value head) pairs, whose recurrences are independent.
//!
//! The state is kept in f64 across the whole sequence, as the reference keeps it: the
//! delta rules subtract what the state already holds from each new value, so an f32
//! state would drift from the reference over long sequences by more than one rounding.
//! Each pool thread owns one f64 state and one written-value row (the run context's
//! scratch, sized at init); `present_state` is the final state rounded once.

use std::sync::Mutex;

use baton_delegate_api::shape::UpdateRule;

use super::{RunCtx, Sources, Src};
use crate::pool::Disjoint;

/// The run context's LinearAttention scratch: one per pool thread.
pub(crate) type LinAttnWorkers = Vec<Mutex<Vec<f64>>>;

/// A prepared LinearAttention node. Query `[B, T, Hq * d_k]`, key `[B, T, Hkv * d_k]`,
/// value `[B, T, Hkv * d_v]`; the output `[B, T, Hq * d_v]` and the present state
/// `[B, Hkv, d_k, d_v]` share one buffer, in that order.
#[derive(Clone, Debug)]
pub(crate) struct LinearAttentionOp {
    pub q: Src,
    pub k: Src,
    pub v: Src,
    pub past: Option<Src>,
    /// The gates, and whether there is one per key dimension (else one per head).
    pub decay: Option<(Src, bool)>,
    /// The write rates, and their last extent (`Hkv`, or 1 shared by the heads).
    pub beta: Option<(Src, usize)>,
    pub rule: UpdateRule,
    pub batch: usize,
    pub tokens: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub dk: usize,
    pub dv: usize,
    pub scale: f64,
}

impl LinearAttentionOp {
    /// The lengths of the two outputs: `output`, then `present_state`.
    pub fn out_len(&self) -> (usize, usize) {
        (
            self.batch * self.tokens * self.q_heads * self.dv,
            self.batch * self.kv_heads * self.dk * self.dv,
        )
    }

    /// Sizes one state and one written-value row per pool thread.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        let threads = ctx.pool.threads();
        ctx.lin_attn
            .resize_with(threads.max(ctx.lin_attn.len()), Default::default);
        let len = self.dk * self.dv + self.dv;
        for s in &mut ctx.lin_attn {
            let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
            if s.len() < len {
                s.resize(len, 0.0);
            }
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let (q, k, v) = (
            sources.get(self.q),
            sources.get(self.k),
            sources.get(self.v),
        );
        let past = self.past.map(|p| sources.get(p));
        let decay = self.decay.map(|(d, per_key)| (sources.get(d), per_key));
        let beta = self.beta.map(|(b, heads)| (sources.get(b), heads));
        let (y_len, state_len) = self.out_len();
        let (y, present) = out.split_at_mut(y_len);
        let present = &mut present[..state_len];
        let (hq, hkv, dk, dv, tokens) =
            (self.q_heads, self.kv_heads, self.dk, self.dv, self.tokens);
        let group = hq / hkv;
        let RunCtx { pool, lin_attn, .. } = ctx;
        let workers = &*lin_attn;
        let (y, present) = (Disjoint::new(y), Disjoint::new(present));
        pool.run(self.batch * hkv, &|task, worker| {
            let (b, h) = (task / hkv, task % hkv);
            let mut guard = workers[worker].lock().unwrap_or_else(|e| e.into_inner());
            let (s, write) = guard.split_at_mut(dk * dv);
            let write = &mut write[..dv];
            match past {
                Some(p) => {
                    let p = &p[task * dk * dv..][..dk * dv];
                    s.iter_mut().zip(p).for_each(|(x, &v)| *x = f64::from(v));
                }
                None => s.fill(0.0),
            }
            for t in 0..tokens {
                let row = b * tokens + t;
                let key = &k[(row * hkv + h) * dk..][..dk];
                let value = &v[(row * hkv + h) * dv..][..dv];
                if let Some((gates, per_key)) = decay {
                    for (i, line) in s.chunks_exact_mut(dv).enumerate() {
                        let gate = if per_key {
                            gates[(row * hkv + h) * dk + i]
                        } else {
                            gates[row * hkv + h]
                        };
                        let factor = f64::from(gate).exp();
                        line.iter_mut().for_each(|x| *x *= factor);
                    }
                }
                match beta {
                    Some((rates, heads)) if self.rule.delta() => {
                        // β (v - Sᵀ k), the state already decayed.
                        let rate = f64::from(rates[row * heads + if heads == 1 { 0 } else { h }]);
                        write.fill(0.0);
                        for (line, &ki) in s.chunks_exact(dv).zip(key) {
                            let ki = f64::from(ki);
                            write.iter_mut().zip(line).for_each(|(w, &x)| *w += x * ki);
                        }
                        for (w, &vj) in write.iter_mut().zip(value) {
                            *w = rate * (f64::from(vj) - *w);
                        }
                    }
                    _ => write
                        .iter_mut()
                        .zip(value)
                        .for_each(|(w, &vj)| *w = f64::from(vj)),
                }
                for (line, &ki) in s.chunks_exact_mut(dv).zip(key) {
                    let ki = f64::from(ki);
                    line.iter_mut()
                        .zip(&*write)
                        .for_each(|(x, &w)| *x += ki * w);
                }
                for qh in h * group..(h + 1) * group {
                    let query = &q[(row * hq + qh) * dk..][..dk];
                    // SAFETY: each (token, query head) row is written by its head's task.
                    let o = unsafe { y.range((row * hq + qh) * dv, dv) };
                    // Sᵀ q, summed over the key dimension in f64 (the write row is free
                    // again: it serves as the accumulator).
                    write.fill(0.0);
                    for (line, &qi) in s.chunks_exact(dv).zip(query) {
                        let qi = f64::from(qi);
                        write.iter_mut().zip(line).for_each(|(a, &x)| *a += qi * x);
                    }
                    for (oj, &a) in o.iter_mut().zip(&*write) {
                        *oj = (self.scale * a) as f32;
                    }
                }
            }
            // SAFETY: each task writes its own head's state.
            let dst = unsafe { present.range(task * dk * dv, dk * dv) };
            dst.iter_mut().zip(&*s).for_each(|(d, &x)| *d = x as f32);
        });
    }
}
