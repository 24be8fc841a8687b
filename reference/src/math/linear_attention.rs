//! LinearAttention, evaluated in f64 and rounded once per output.
//!
//! The recurrence runs token by token as ONNX defines it (its `chunk_size` only names a
//! parallel schedule with the same result): each key/value head's state `[d_k, d_v]` is
//! kept in f64 from the first token to the last, so `present_state` and every output
//! row carry no intermediate rounding, whatever the operands' dtype.

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::LinearAttentionGeometry;
use baton_delegate_api::{Attr, TensorMut, TensorRef};

use super::rounding::store_rounded;
use crate::data::load_f64;
use crate::{shape_err, KernelError};

/// LinearAttention into `output` and, when given, `present_state` (see
/// `OpKind::LinearAttention`).
pub(crate) fn linear_attention(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let typed: Vec<_> = inputs.iter().map(|t| (t.dtype, t.shape.to_vec())).collect();
    let g = LinearAttentionGeometry::new(node, &typed).map_err(|m| shape_err(node, m))?;
    let (tokens, hq, hkv, dk, dv) = (g.seq_len, g.q_heads, g.kv_heads, g.key_size, g.value_size);
    let q = load_f64(&inputs[0]);
    let k = load_f64(&inputs[1]);
    let v = load_f64(&inputs[2]);
    let mut state = if g.past {
        load_f64(&inputs[3])
    } else {
        vec![0.0; g.batch * hkv * dk * dv]
    };
    let decay = g.decay_per_key.map(|_| load_f64(&inputs[4]));
    let beta = g.beta_heads.map(|_| load_f64(&inputs[5]));
    let scale = match node.attrs.get("scale") {
        Some(Attr::Float(s)) if *s != 0.0 => f64::from(*s),
        _ => 1.0 / (dk as f64).sqrt(),
    };
    let group = hq / hkv;
    let mut out = vec![0.0f64; g.batch * tokens * hq * dv];
    let mut write = vec![0.0f64; dv];
    for b in 0..g.batch {
        for h in 0..hkv {
            let s = &mut state[(b * hkv + h) * dk * dv..][..dk * dv];
            for t in 0..tokens {
                // Token t of batch b: its row in the packed [B, T, heads * size] operands.
                let row = b * tokens + t;
                let key = &k[(row * hkv + h) * dk..][..dk];
                let value = &v[(row * hkv + h) * dv..][..dv];
                if let (Some(decay), Some(per_key)) = (&decay, g.decay_per_key) {
                    for (i, line) in s.chunks_exact_mut(dv).enumerate() {
                        let gate = if per_key {
                            decay[(row * hkv + h) * dk + i]
                        } else {
                            decay[row * hkv + h]
                        };
                        let factor = gate.exp();
                        line.iter_mut().for_each(|x| *x *= factor);
                    }
                }
                match (&beta, g.beta_heads) {
                    (Some(beta), Some(bh)) => {
                        // β (v - Sᵀ k), S already decayed.
                        let rate = beta[row * bh + if bh == 1 { 0 } else { h }];
                        for (j, w) in write.iter_mut().enumerate() {
                            let retrieved: f64 = (0..dk).map(|i| s[i * dv + j] * key[i]).sum();
                            *w = rate * (value[j] - retrieved);
                        }
                    }
                    _ => write.copy_from_slice(value),
                }
                for (line, &ki) in s.chunks_exact_mut(dv).zip(key) {
                    for (x, &w) in line.iter_mut().zip(&write) {
                        *x += ki * w;
                    }
                }
                for qh in h * group..(h + 1) * group {
                    let query = &q[(row * hq + qh) * dk..][..dk];
                    let o = &mut out[(row * hq + qh) * dv..][..dv];
                    for (j, oj) in o.iter_mut().enumerate() {
                        let read: f64 = (0..dk).map(|i| query[i] * s[i * dv + j]).sum();
                        *oj = scale * read;
                    }
                }
            }
        }
    }
    store_rounded(&mut outputs[0], &out);
    if let Some(present) = outputs.get_mut(1) {
        store_rounded(present, &state);
    }
    Ok(())
}
