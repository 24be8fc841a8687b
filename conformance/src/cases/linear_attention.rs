//! Cases of LinearAttention: the four update rules, decay per key dimension and per head,
//! beta per head and shared, grouped- and multi-query heads, a past state or none, an
//! explicit scale, a one-token decode step, with and without `present_state`, in f32 and
//! f16 (one f16 case keeping an f32 state).

use baton_delegate_api::DType::{F16, F32};
use baton_delegate_api::{Attr, OpKind, Tensor};

use super::gen::{Draw, Fill, Rng};
use super::math::multi_output_case;
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it is LinearAttention.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::LinearAttention => linear_attention(out),
        _ => Ok(()),
    }
}

/// How a case gives decay or beta.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    None,
    /// One per head (`[B, T, Hkv]`).
    PerHead,
    /// Decay: one per key dimension (`[B, T, Hkv*d_k]`); beta: one shared (`[B, T, 1]`).
    Fine,
}

/// One case: description, update rule, `[B, T, Hq, Hkv, d_k, d_v]`, whether a past state
/// is given, decay, beta, scale (0: the default) and outputs used.
struct Spec {
    desc: &'static str,
    rule: &'static str,
    dims: [usize; 6],
    past: bool,
    decay: Gate,
    beta: Gate,
    scale: f32,
    outputs: usize,
}

const fn spec(
    desc: &'static str,
    rule: &'static str,
    dims: [usize; 6],
    past: bool,
    decay: Gate,
    beta: Gate,
) -> Spec {
    Spec {
        desc,
        rule,
        dims,
        past,
        decay,
        beta,
        scale: 0.0,
        outputs: 2,
    }
}

const SPECS: &[Spec] = &[
    spec(
        "linear",
        "linear",
        [2, 3, 2, 2, 4, 3],
        false,
        Gate::None,
        Gate::None,
    ),
    spec(
        "linear_decode_past",
        "linear",
        [2, 1, 2, 2, 4, 4],
        true,
        Gate::None,
        Gate::None,
    ),
    spec(
        "gated_per_key",
        "gated",
        [2, 4, 2, 2, 4, 4],
        true,
        Gate::Fine,
        Gate::None,
    ),
    Spec {
        outputs: 1,
        ..spec(
            "gated_per_head_output_only",
            "gated",
            [1, 3, 2, 2, 3, 5],
            false,
            Gate::PerHead,
            Gate::None,
        )
    },
    spec(
        "delta",
        "delta",
        [2, 3, 2, 2, 4, 4],
        false,
        Gate::None,
        Gate::PerHead,
    ),
    spec(
        "delta_shared_beta",
        "delta",
        [1, 4, 3, 3, 2, 3],
        true,
        Gate::None,
        Gate::Fine,
    ),
    spec(
        "gated_delta",
        "gated_delta",
        [2, 4, 2, 2, 4, 4],
        true,
        Gate::Fine,
        Gate::PerHead,
    ),
    spec(
        "gated_delta_per_head_no_past",
        "gated_delta",
        [2, 3, 2, 2, 4, 2],
        false,
        Gate::PerHead,
        Gate::PerHead,
    ),
    spec(
        "gated_delta_gqa",
        "gated_delta",
        [2, 3, 4, 2, 4, 4],
        true,
        Gate::Fine,
        Gate::PerHead,
    ),
    spec(
        "gated_delta_mqa",
        "gated_delta",
        [1, 3, 4, 1, 4, 4],
        false,
        Gate::Fine,
        Gate::Fine,
    ),
    Spec {
        scale: 0.3,
        ..spec(
            "gated_delta_scale",
            "gated_delta",
            [1, 3, 2, 2, 4, 4],
            true,
            Gate::Fine,
            Gate::PerHead,
        )
    },
    spec(
        "gated_delta_decode",
        "gated_delta",
        [2, 1, 2, 2, 4, 4],
        true,
        Gate::Fine,
        Gate::PerHead,
    ),
];

fn linear_attention(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::LinearAttention;
    for spec in SPECS {
        for dtype in [F32, F16] {
            // In f16, one case per rule family, the past state staying f32 in one.
            if dtype == F16 && !matches!(spec.desc, "linear" | "gated_delta" | "delta") {
                continue;
            }
            let id = format!("{}/{}/{}", op.name(), dtype.name(), spec.desc);
            let mut rng = Rng::for_id(&id);
            let [b, t, hq, hkv, dk, dv] = spec.dims;
            let unit = Fill::Range(-1.0, 1.0);
            let mut operands: Vec<(Tensor, bool)> = vec![
                (rng.tensor(dtype, &[b, t, hq * dk], &unit), false),
                // Small keys keep the delta rules' corrections contracting.
                (
                    rng.tensor(dtype, &[b, t, hkv * dk], &Fill::Range(-0.5, 0.5)),
                    false,
                ),
                (rng.tensor(dtype, &[b, t, hkv * dv], &unit), false),
            ];
            let absent = || (Tensor::from_bytes(dtype, &[0], &[]), true);
            let later = spec.decay != Gate::None || spec.beta != Gate::None;
            if spec.past {
                // One f16 case keeps its state in f32 ("S" may differ from "T").
                let state = if dtype == F16 && spec.desc == "gated_delta" {
                    F32
                } else {
                    dtype
                };
                operands.push((rng.tensor(state, &[b, hkv, dk, dv], &unit), false));
            } else if later {
                operands.push(absent());
            }
            match spec.decay {
                // Gates in log space: decays between e^-1 and 1.
                Gate::PerHead => operands.push((
                    rng.tensor(dtype, &[b, t, hkv], &Fill::Range(-1.0, 0.0)),
                    false,
                )),
                Gate::Fine => operands.push((
                    rng.tensor(dtype, &[b, t, hkv * dk], &Fill::Range(-1.0, 0.0)),
                    false,
                )),
                Gate::None if spec.beta != Gate::None => operands.push(absent()),
                Gate::None => {}
            }
            let beta_heads = match spec.beta {
                Gate::PerHead => Some(hkv),
                Gate::Fine => Some(1),
                Gate::None => None,
            };
            if let Some(h) = beta_heads {
                operands.push((rng.tensor(dtype, &[b, t, h], &Fill::Range(0.0, 1.0)), false));
            }
            let mut attrs = vec![
                ("q_num_heads", Attr::Int(hq as i64)),
                ("kv_num_heads", Attr::Int(hkv as i64)),
                ("update_rule", Attr::Str(spec.rule.into())),
            ];
            if spec.scale != 0.0 {
                attrs.push(("scale", Attr::Float(spec.scale)));
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
