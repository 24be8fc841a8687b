//! Cases of the transformer ops: Attention (4-D and 3-D operands, grouped-query heads,
//! causal and explicit masks of several ranks, a past key/value cache, softcap, every
//! `qk_matmul_output_mode`) and RotaryEmbedding (4-D and 3-D, halves and interleaved
//! pairs, a partial rotary dimension, with and without position ids), in f32 and f16.

use baton_delegate_api::DType::{Bool, F16, F32, I64};
use baton_delegate_api::{Attr, OpKind, Tensor};

use super::gen::{Draw, Fill, Rng};
use super::math::multi_output_case;
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it is one of these ops.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::Attention => attention(out),
        OpKind::RotaryEmbedding => rotary(out),
        _ => Ok(()),
    }
}

/// One Attention case's geometry and options.
struct Spec {
    desc: &'static str,
    /// Batch, query heads, key/value heads, query length, new keys, past keys, head
    /// size, value head size.
    dims: [usize; 8],
    /// 3-D operands (`[B, S, H * D]`).
    packed: bool,
    /// The mask's shape and whether it is bool.
    mask: Option<(&'static [usize], bool)>,
    attrs: &'static [(&'static str, AttrV)],
    /// How many outputs the node uses (1 to 4).
    outputs: usize,
}

/// An attribute value in a `const` table.
#[derive(Clone, Copy)]
enum AttrV {
    Int(i64),
    Float(f32),
}

const SPECS: &[Spec] = &[
    Spec {
        desc: "4d",
        dims: [2, 3, 3, 4, 6, 0, 8, 8],
        packed: false,
        mask: None,
        attrs: &[],
        outputs: 1,
    },
    Spec {
        desc: "4d_gqa",
        dims: [1, 6, 2, 3, 5, 0, 4, 4],
        packed: false,
        mask: None,
        attrs: &[],
        outputs: 1,
    },
    Spec {
        desc: "4d_diff_head_sizes_causal",
        dims: [2, 2, 2, 5, 5, 0, 4, 6],
        packed: false,
        mask: None,
        attrs: &[("is_causal", AttrV::Int(1))],
        outputs: 1,
    },
    Spec {
        desc: "4d_causal_short_queries",
        dims: [1, 2, 1, 3, 7, 0, 4, 4],
        packed: false,
        mask: None,
        attrs: &[("is_causal", AttrV::Int(1))],
        outputs: 1,
    },
    Spec {
        desc: "4d_mask2d_float",
        dims: [2, 2, 2, 3, 4, 0, 4, 4],
        packed: false,
        mask: Some((&[3, 4], false)),
        attrs: &[],
        outputs: 1,
    },
    Spec {
        desc: "4d_mask4d_bool_broadcast",
        dims: [2, 4, 2, 3, 5, 0, 4, 4],
        packed: false,
        mask: Some((&[2, 1, 3, 5], true)),
        attrs: &[],
        outputs: 1,
    },
    Spec {
        desc: "4d_mask3d_short_keys",
        dims: [1, 2, 2, 3, 6, 0, 4, 4],
        packed: false,
        mask: Some((&[2, 3, 4], false)),
        attrs: &[],
        outputs: 1,
    },
    Spec {
        desc: "4d_scale_softcap",
        dims: [1, 2, 1, 4, 4, 0, 8, 8],
        packed: false,
        mask: None,
        attrs: &[("scale", AttrV::Float(0.6)), ("softcap", AttrV::Float(2.5))],
        outputs: 1,
    },
    Spec {
        desc: "4d_past_causal_all_outputs",
        dims: [2, 4, 2, 2, 2, 3, 4, 6],
        packed: false,
        mask: None,
        attrs: &[("is_causal", AttrV::Int(1))],
        outputs: 4,
    },
    Spec {
        desc: "4d_past_mask_qk_with_bias",
        dims: [1, 2, 2, 2, 3, 2, 4, 4],
        packed: false,
        mask: Some((&[2, 5], false)),
        attrs: &[("qk_matmul_output_mode", AttrV::Int(1))],
        outputs: 4,
    },
    Spec {
        desc: "4d_softcap_qk_softmax",
        dims: [1, 2, 2, 3, 4, 0, 4, 4],
        packed: false,
        mask: Some((&[3, 4], true)),
        attrs: &[
            ("softcap", AttrV::Float(1.5)),
            ("qk_matmul_output_mode", AttrV::Int(3)),
        ],
        outputs: 4,
    },
    Spec {
        desc: "3d",
        dims: [2, 2, 2, 3, 4, 0, 4, 4],
        packed: true,
        mask: None,
        attrs: &[],
        outputs: 1,
    },
    Spec {
        desc: "3d_gqa_causal",
        dims: [1, 4, 2, 4, 4, 0, 2, 3],
        packed: true,
        mask: None,
        attrs: &[("is_causal", AttrV::Int(1))],
        outputs: 1,
    },
    Spec {
        desc: "3d_past_mask_qk",
        dims: [2, 3, 3, 2, 2, 2, 4, 4],
        packed: true,
        mask: Some((&[2, 4], false)),
        attrs: &[],
        outputs: 4,
    },
];

fn attention(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Attention;
    for spec in SPECS {
        for dtype in [F32, F16] {
            // The f16 cases: one per form is enough to check the widening and rounding.
            if dtype == F16 && !matches!(spec.desc, "4d" | "4d_past_causal_all_outputs" | "3d") {
                continue;
            }
            let id = format!("{}/{}/{}", op.name(), dtype.name(), spec.desc);
            let mut rng = Rng::for_id(&id);
            let [b, hq, hkv, s, l, p, d, dv] = spec.dims;
            let fill = Fill::Range(-1.5, 1.5);
            let (q, k, v) = if spec.packed {
                (
                    vec![b, s, hq * d],
                    vec![b, l, hkv * d],
                    vec![b, l, hkv * dv],
                )
            } else {
                (vec![b, hq, s, d], vec![b, hkv, l, d], vec![b, hkv, l, dv])
            };
            let mut operands: Vec<(Tensor, bool)> = [q, k, v]
                .iter()
                .map(|shape| (rng.tensor(dtype, shape, &fill), false))
                .collect();
            let absent = || (Tensor::from_bytes(dtype, &[0], &[]), true);
            match spec.mask {
                Some((shape, true)) => {
                    // Every line keeps its first key, so no query sees only masked keys.
                    let mut m = rng.tensor(Bool, shape, &Fill::Cycle(vec![1.0, 0.0, 1.0, 1.0]));
                    let last = *shape.last().unwrap_or(&1);
                    let bytes: Vec<u8> = m
                        .bytes()
                        .iter()
                        .enumerate()
                        .map(|(i, &x)| u8::from(i % last == 0 || x != 0))
                        .collect();
                    m = Tensor::from_bytes(Bool, shape, &bytes);
                    operands.push((m, false));
                }
                Some((shape, false)) => {
                    operands.push((rng.tensor(dtype, shape, &Fill::Range(-2.0, 1.0)), false))
                }
                None if p > 0 => operands.push(absent()),
                None => {}
            }
            if p > 0 {
                operands.push((rng.tensor(dtype, &[b, hkv, p, d], &fill), false));
                operands.push((rng.tensor(dtype, &[b, hkv, p, dv], &fill), false));
            }
            let mut attrs: Vec<(&str, Attr)> = spec
                .attrs
                .iter()
                .map(|&(k, v)| {
                    let v = match v {
                        AttrV::Int(i) => Attr::Int(i),
                        AttrV::Float(f) => Attr::Float(f),
                    };
                    (k, v)
                })
                .collect();
            if spec.packed {
                attrs.push(("q_num_heads", Attr::Int(hq as i64)));
                attrs.push(("kv_num_heads", Attr::Int(hkv as i64)));
            }
            out.push(multi_output_case(
                &id,
                op,
                dtype,
                &operands,
                &attrs,
                spec.outputs,
            )?);
        }
    }
    Ok(())
}

/// A RotaryEmbedding case: description, X shape, num_heads (for 3-D X), rotary dim,
/// interleaved, with position ids.
type RotarySpec = (&'static str, &'static [usize], i64, usize, bool, bool);

fn rotary(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::RotaryEmbedding;
    let specs: [RotarySpec; 6] = [
        ("4d_positions", &[2, 3, 4, 8], 0, 0, false, true),
        ("4d_interleaved_positions", &[1, 2, 5, 6], 0, 0, true, true),
        ("4d_no_positions", &[2, 2, 3, 8], 0, 0, false, false),
        ("4d_partial_interleaved", &[1, 3, 4, 10], 0, 4, true, false),
        ("3d_positions", &[2, 4, 12], 3, 0, false, true),
        ("3d_partial", &[1, 3, 16], 2, 6, false, true),
    ];
    let max_position = 9;
    for (desc, shape, heads, rot, interleaved, positions) in specs {
        for dtype in [F32, F16] {
            if dtype == F16 && !desc.starts_with("4d_positions") && desc != "3d_partial" {
                continue;
            }
            let id = format!("{}/{}/{desc}", op.name(), dtype.name());
            let mut rng = Rng::for_id(&id);
            let (batch, seq, head) = if shape.len() == 4 {
                (shape[0], shape[2], shape[3])
            } else {
                (shape[0], shape[1], shape[2] / heads as usize)
            };
            let half = if rot == 0 { head / 2 } else { rot / 2 };
            let cache_shape = if positions {
                vec![max_position, half]
            } else {
                vec![batch, seq, half]
            };
            // Angles in [0, 2π) give caches of a real rotation.
            let turn = Fill::Range(0.0, std::f64::consts::TAU);
            let angles = rng.values(cache_shape.iter().product(), &turn, false);
            let cos: Vec<f64> = angles.iter().map(|a| a.cos()).collect();
            let sin: Vec<f64> = angles.iter().map(|a| a.sin()).collect();
            let x = rng.tensor(dtype, shape, &Fill::Range(-2.0, 2.0));
            let mut operands = vec![
                (x, false),
                (super::gen::tensor(dtype, &cache_shape, &cos), true),
                (super::gen::tensor(dtype, &cache_shape, &sin), true),
            ];
            if positions {
                let ids = rng.tensor(
                    I64,
                    &[batch, seq],
                    &Fill::Range(0.0, (max_position - 1) as f64),
                );
                operands.push((ids, false));
            }
            let mut attrs = vec![("interleaved", Attr::Int(i64::from(interleaved)))];
            if heads > 0 {
                attrs.push(("num_heads", Attr::Int(heads)));
            }
            if rot > 0 {
                attrs.push(("rotary_embedding_dim", Attr::Int(rot as i64)));
            }
            out.push(multi_output_case(&id, op, dtype, &operands, &attrs, 1)?);
        }
    }
    Ok(())
}
