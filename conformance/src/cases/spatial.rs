//! Cases of the convolution relatives: CausalConvWithState (prefill with and without a
//! past state and bias, a decode step, a kernel of one, the fused SiLU, f16) and Col2Im.

use baton_delegate_api::DType::{F16, F32, I32, I64};
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::gen::{ints, tensor, Draw, Fill, Maker, Rng};
use super::math::multi_output_case;
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::CausalConvWithState => causal_conv(out),
        OpKind::Col2Im => col2im(out),
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

/// Col2Im: 2-D with overlaps, strides, dilations and pads, 3-D, several channels, f16
/// and i32; image and block shapes as constants.
fn col2im(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Col2Im;
    // (desc, dtype, [N, C], image, block, strides, dilations, pads)
    type Form = (
        &'static str,
        DType,
        [usize; 2],
        &'static [usize],
        &'static [usize],
        &'static [i64],
        &'static [i64],
        &'static [i64],
    );
    let forms: &[Form] = &[
        (
            "overlap",
            F32,
            [1, 1],
            &[5, 5],
            &[3, 3],
            &[1, 1],
            &[1, 1],
            &[0, 0, 0, 0],
        ),
        (
            "strides",
            F32,
            [2, 3],
            &[6, 5],
            &[2, 2],
            &[2, 1],
            &[1, 1],
            &[0, 0, 0, 0],
        ),
        (
            "dilations",
            F32,
            [1, 2],
            &[5, 7],
            &[2, 3],
            &[1, 1],
            &[2, 3],
            &[0, 0, 0, 0],
        ),
        (
            "pads",
            F32,
            [1, 1],
            &[4, 5],
            &[3, 3],
            &[1, 2],
            &[1, 1],
            &[1, 0, 2, 1],
        ),
        (
            "volume",
            F32,
            [1, 2],
            &[3, 4, 3],
            &[2, 2, 2],
            &[1, 2, 1],
            &[1, 1, 1],
            &[0, 0, 1, 0, 1, 0],
        ),
        ("line", F32, [2, 2], &[9], &[3], &[2], &[2], &[1, 2]),
        (
            "overlap",
            F16,
            [1, 2],
            &[4, 4],
            &[2, 2],
            &[1, 1],
            &[1, 1],
            &[0, 0, 0, 0],
        ),
        (
            "overlap",
            I32,
            [1, 2],
            &[4, 4],
            &[2, 2],
            &[1, 1],
            &[1, 1],
            &[1, 1, 1, 1],
        ),
    ];
    for &(desc, dtype, [n, c], image, block, strides, dilations, pads) in forms {
        let r = image.len();
        let positions: usize = (0..r)
            .map(|i| {
                let span = (block[i] - 1) * dilations[i] as usize + 1;
                let padded = image[i] + (pads[i] + pads[r + i]) as usize;
                (padded - span) / strides[i] as usize + 1
            })
            .product();
        let rows = c * block.iter().product::<usize>();
        let fill = if dtype.is_float() {
            Fill::Range(-1.0, 1.0)
        } else {
            Fill::Range(-50.0, 50.0)
        };
        let mut m = Maker::new(op, dtype, desc);
        m.input(&[n, rows, positions], &fill);
        let dims = |v: &[usize]| {
            let v: Vec<f64> = v.iter().map(|&d| d as f64).collect();
            tensor(I64, &[v.len()], &v)
        };
        m.operand(dims(image), true).operand(dims(block), true);
        out.push(m.build(&[
            ("strides", ints(strides)),
            ("dilations", ints(dilations)),
            ("pads", ints(pads)),
        ])?);
    }
    Ok(())
}
