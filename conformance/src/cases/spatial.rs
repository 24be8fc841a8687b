//! Cases of the convolution relatives: CausalConvWithState (prefill with and without a
//! past state and bias, a decode step, a kernel of one, the fused SiLU, f16).

use baton_delegate_api::DType::{F16, F32};
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::gen::{Draw, Fill, Rng};
use super::math::multi_output_case;
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::CausalConvWithState => causal_conv(out),
        _ => Ok(()),
    }
}

/// One CausalConvWithState case: description, dtype, `[B, C, L]`, K, bias, past state,
/// activation.
type CausalSpec = (
    &'static str,
    DType,
    [usize; 3],
    usize,
    bool,
    bool,
    &'static str,
);

fn causal_conv(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::CausalConvWithState;
    let specs: &[CausalSpec] = &[
        ("prefill", F32, [2, 4, 8], 4, false, false, "none"),
        ("bias", F32, [2, 4, 8], 4, true, false, "none"),
        ("past_state", F32, [2, 3, 6], 3, false, true, "none"),
        (
            "decode_step_bias_past",
            F32,
            [2, 5, 1],
            4,
            true,
            true,
            "none",
        ),
        ("kernel_one", F32, [1, 3, 5], 1, true, false, "none"),
        ("short_input", F32, [1, 2, 2], 5, false, false, "none"),
        ("silu_bias_past", F32, [2, 4, 6], 4, true, true, "silu"),
        ("swish", F32, [1, 3, 7], 3, false, false, "swish"),
        ("prefill", F16, [2, 4, 8], 4, true, false, "none"),
        ("silu_past", F16, [1, 4, 5], 4, false, true, "silu"),
    ];
    for &(desc, dtype, [b, c, l], k, bias, past, activation) in specs {
        let id = format!("{}/{}/{desc}", op.name(), dtype.name());
        let mut rng = Rng::for_id(&id);
        let fill = Fill::Range(-2.0, 2.0);
        let mut operands: Vec<(Tensor, bool)> = vec![
            (rng.tensor(dtype, &[b, c, l], &fill), false),
            (rng.tensor(dtype, &[c, 1, k], &Fill::Range(-1.0, 1.0)), true),
        ];
        if bias {
            operands.push((rng.tensor(dtype, &[c], &fill), true));
        } else if past {
            operands.push((Tensor::from_bytes(dtype, &[0], &[]), true));
        }
        if past {
            operands.push((rng.tensor(dtype, &[b, c, k - 1], &fill), false));
        }
        let attrs = [("activation", Attr::Str(activation.into()))];
        out.push(multi_output_case(&id, op, dtype, &operands, &attrs, 2)?);
    }
    Ok(())
}
