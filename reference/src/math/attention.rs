//! Attention and RotaryEmbedding, evaluated in f64 and rounded once per output.
//!
//! Attention follows ONNX's reference: the mask, the causal triangle and the padding of
//! `nonpad_kv_seqlen` are one additive bias (0 or -inf, or the float mask's values), the
//! softcap comes before the bias (so a masked key stays at -inf), and a query whose keys
//! are all masked gets NaN weights (numpy's softmax of all -inf). `softmax_precision` is
//! read as a floor: everything here is computed in f64 whatever it says.

use baton_delegate_api::ir::{DType, Node};
use baton_delegate_api::shape::{AttentionGeometry, RotaryGeometry};
use baton_delegate_api::{Attr, TensorMut, TensorRef};

use super::rounding::store_rounded;
use crate::data::{load, load_f64, sum_f64};
use crate::{shape_err, KernelError};

/// Attention into as many of `Y`, `present_key`, `present_value`, `qk_matmul_output` as
/// given (see `OpKind::Attention`).
pub(crate) fn attention(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let typed: Vec<(DType, Vec<usize>)> =
        inputs.iter().map(|t| (t.dtype, t.shape.to_vec())).collect();
    let g = AttentionGeometry::new(node, &typed).map_err(|m| shape_err(node, m))?;
    let mode = node.attr_int("qk_matmul_output_mode", 0);
    if !(0..=3).contains(&mode) {
        return Err(shape_err(
            node,
            format!("qk_matmul_output_mode {mode} is not one of 0 to 3"),
        ));
    }
    let (hq, hkv, s, p, d, dv) = (
        g.q_heads,
        g.kv_heads,
        g.q_len,
        g.past_len,
        g.head_size,
        g.v_head_size,
    );
    let t = g.total_len();
    let q = load_f64(&inputs[0]);
    let present_k = concat_past(&g, inputs, 1, 4, d);
    let present_v = concat_past(&g, inputs, 2, 5, dv);
    let scale = match node.attrs.get("scale") {
        Some(Attr::Float(v)) => f64::from(*v),
        _ => 1.0 / (d as f64).sqrt(),
    };
    let softcap = f64::from(node.attr_float("softcap", 0.0));
    let causal = node.attr_int("is_causal", 0) != 0;
    let mask = g.mask_shape.as_ref().map(|shape| {
        let values: Vec<f64> = if g.mask_dtype == Some(DType::Bool) {
            inputs[3]
                .data
                .iter()
                .map(|&b| if b != 0 { 0.0 } else { f64::NEG_INFINITY })
                .collect()
        } else {
            load_f64(&inputs[3])
        };
        (values, shape.clone())
    });
    let nonpad: Option<Vec<i64>> = g.nonpad.then(|| load::<i64>(&inputs[6]));
    let group = hq / hkv;
    let q_at = |b: usize, h: usize, i: usize, e: usize| {
        q[if g.packed {
            ((b * s + i) * hq + h) * d + e
        } else {
            ((b * hq + h) * s + i) * d + e
        }]
    };
    let mut y = vec![0.0f64; g.batch * hq * s * dv];
    // The scores of every query and key are kept only when the node asks for them: for a
    // long sequence they dwarf every other buffer.
    let want_qk = outputs.len() > 3;
    let mut qk_out = vec![0.0f64; if want_qk { g.batch * hq * s * t } else { 0 }];
    let mut scores = vec![0.0f64; t];
    for b in 0..g.batch {
        // Keys before `offset + i + 1` are visible to query `i` under the causal mask.
        let offset: i64 = match &nonpad {
            _ if p > 0 => p as i64,
            Some(n) => n[b] - s as i64,
            None => 0,
        };
        for h in 0..hq {
            let kv = b * hkv + h / group;
            for i in 0..s {
                for (j, score) in scores.iter_mut().enumerate() {
                    let krow = &present_k[(kv * t + j) * d..][..d];
                    let dot = sum_f64((0..d).map(|e| q_at(b, h, i, e) * krow[e]));
                    let mut v = dot * scale;
                    if softcap > 0.0 {
                        v = softcap * (v / softcap).tanh();
                    }
                    let raw = v;
                    let mut bias = 0.0;
                    if let Some((values, shape)) = &mask {
                        bias += mask_value(values, shape, [b, h, i, j]);
                    }
                    if causal && j as i64 > i as i64 + offset {
                        bias += f64::NEG_INFINITY;
                    }
                    if nonpad.as_ref().is_some_and(|n| j as i64 >= n[b]) {
                        bias += f64::NEG_INFINITY;
                    }
                    *score = v + bias;
                    if want_qk {
                        // Mode 1 with a softcap gives the capped scores without the bias,
                        // as ONNX's reference (and its test data) has it.
                        let with_bias = mode == 2 || (mode == 1 && softcap <= 0.0);
                        qk_out[((b * hq + h) * s + i) * t + j] =
                            if with_bias { *score } else { raw };
                    }
                }
                softmax(&mut scores);
                if want_qk && mode == 3 {
                    let at = ((b * hq + h) * s + i) * t;
                    qk_out[at..at + t].copy_from_slice(&scores);
                }
                for e in 0..dv {
                    let acc = sum_f64(
                        scores
                            .iter()
                            .enumerate()
                            .map(|(j, &w)| w * present_v[(kv * t + j) * dv + e]),
                    );
                    let at = if g.packed {
                        ((b * s + i) * hq + h) * dv + e
                    } else {
                        ((b * hq + h) * s + i) * dv + e
                    };
                    y[at] = acc;
                }
            }
        }
    }
    let results = [y, present_k, present_v, qk_out];
    for (out, values) in outputs.iter_mut().zip(&results) {
        store_rounded(out, values);
    }
    Ok(())
}

/// Past keys (or values) followed by the new ones, as `[B, Hkv, P + L, width]`; the new
/// ones (operand `new`) are read from their 3-D or 4-D layout, the past (operand `past`)
/// when given.
fn concat_past(
    g: &AttentionGeometry,
    inputs: &[TensorRef<'_>],
    new: usize,
    past: usize,
    width: usize,
) -> Vec<f64> {
    let (hkv, l, p) = (g.kv_heads, g.kv_len, g.past_len);
    let t = p + l;
    let fresh = load_f64(&inputs[new]);
    let old = if p > 0 {
        load_f64(&inputs[past])
    } else {
        Vec::new()
    };
    let mut out = vec![0.0f64; g.batch * hkv * t * width];
    for b in 0..g.batch {
        for h in 0..hkv {
            for j in 0..t {
                let dst = &mut out[((b * hkv + h) * t + j) * width..][..width];
                if j < p {
                    dst.copy_from_slice(&old[((b * hkv + h) * p + j) * width..][..width]);
                } else {
                    let r = j - p;
                    let src = if g.packed {
                        ((b * l + r) * hkv + h) * width
                    } else {
                        ((b * hkv + h) * l + r) * width
                    };
                    dst.copy_from_slice(&fresh[src..src + width]);
                }
            }
        }
    }
    out
}

/// The mask's bias at `[b, h, i, j]`: its shape broadcasts from the right onto
/// `[B, Hq, S, T]`, except that keys past its last extent are masked (-inf), as ONNX's
/// reference pads a short mask.
fn mask_value(values: &[f64], shape: &[usize], index: [usize; 4]) -> f64 {
    let rank = shape.len();
    if rank > 0 && index[3] >= shape[rank - 1] {
        return f64::NEG_INFINITY;
    }
    let mut at = 0;
    for (k, &e) in shape.iter().enumerate() {
        let i = index[4 - rank + k];
        at = at * e + if e == 1 { 0 } else { i };
    }
    values[at]
}

/// Softmax of one line in place, as numpy evaluates `exp(x - max) / sum`: a line whose
/// maximum is -inf, +inf or NaN becomes NaN.
fn softmax(line: &mut [f64]) {
    let max = if line.iter().any(|v| v.is_nan()) {
        f64::NAN
    } else {
        line.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    };
    for v in line.iter_mut() {
        *v = (*v - max).exp();
    }
    let sum = sum_f64(line.iter().copied());
    for v in line.iter_mut() {
        *v /= sum;
    }
}

/// RotaryEmbedding (see `OpKind::RotaryEmbedding`). A position id outside the caches is
/// an arithmetic error naming it.
pub(crate) fn rotary_embedding(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let typed: Vec<(DType, Vec<usize>)> =
        inputs.iter().map(|t| (t.dtype, t.shape.to_vec())).collect();
    let g = RotaryGeometry::new(node, &typed).map_err(|m| shape_err(node, m))?;
    let interleaved = node.attr_int("interleaved", 0) != 0;
    let x = load_f64(&inputs[0]);
    let (cos, sin) = (load_f64(&inputs[1]), load_f64(&inputs[2]));
    let positions: Option<Vec<i64>> = g.position_ids.then(|| load::<i64>(&inputs[3]));
    let (h_n, s_n, d_n, half) = (g.heads, g.seq_len, g.head_size, g.rotary_dim / 2);
    let mut y = x.clone();
    for b in 0..g.batch {
        for i in 0..s_n {
            let row = match &positions {
                Some(p) => {
                    let pos = p[b * s_n + i];
                    if pos < 0 || pos as usize >= g.max_position {
                        return Err(KernelError::Arithmetic {
                            node: node.label(),
                            message: format!(
                                "RotaryEmbedding position id {pos} is outside the caches' {} \
                                 positions",
                                g.max_position
                            ),
                        });
                    }
                    pos as usize * half
                }
                None => (b * s_n + i) * half,
            };
            for h in 0..h_n {
                let base = if g.packed {
                    ((b * s_n + i) * h_n + h) * d_n
                } else {
                    ((b * h_n + h) * s_n + i) * d_n
                };
                for k in 0..half {
                    let (a, c) = if interleaved {
                        (base + 2 * k, base + 2 * k + 1)
                    } else {
                        (base + k, base + k + half)
                    };
                    let (x1, x2) = (x[a], x[c]);
                    let (co, si) = (cos[row + k], sin[row + k]);
                    y[a] = x1 * co - x2 * si;
                    y[c] = x1 * si + x2 * co;
                }
            }
        }
    }
    store_rounded(out, &y);
    Ok(())
}
