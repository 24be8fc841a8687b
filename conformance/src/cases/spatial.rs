//! Cases of the convolution relatives: CausalConvWithState (prefill with and without a
//! past state and bias, a decode step, a kernel of one, the fused SiLU, f16), Col2Im and
//! MaxUnpool.

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
        OpKind::MaxUnpool => max_unpool(out),
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

/// MaxUnpool: the indices of a real MaxPool (each window's maximum, as the reference's
/// MaxPool gives them) in 2-D with and without an enlarging output_shape, 1-D with pads,
/// and f16; the indices as a graph input.
fn max_unpool(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::MaxUnpool;
    // (desc, dtype, X shape, kernel, strides, pads, output_shape)
    type Form = (
        &'static str,
        DType,
        &'static [usize],
        &'static [i64],
        &'static [i64],
        &'static [i64],
        Option<&'static [i64]>,
    );
    let forms: &[Form] = &[
        (
            "k2s2",
            F32,
            &[2, 3, 3, 4],
            &[2, 2],
            &[2, 2],
            &[0, 0, 0, 0],
            None,
        ),
        (
            "k2s2_output_shape",
            F32,
            &[1, 2, 2, 3],
            &[2, 2],
            &[2, 2],
            &[0, 0, 0, 0],
            Some(&[1, 2, 5, 7]),
        ),
        ("k3s2_pads_1d", F32, &[2, 2, 4], &[3], &[2], &[1, 1], None),
        (
            "k3s1_overlap",
            F32,
            &[1, 1, 3, 3],
            &[3, 3],
            &[1, 1],
            &[0, 0, 0, 0],
            None,
        ),
        (
            "k2s2",
            F16,
            &[1, 2, 2, 2],
            &[2, 2],
            &[2, 2],
            &[0, 0, 0, 0],
            None,
        ),
    ];
    for &(desc, dtype, shape, kernel, strides, pads, output_shape) in forms {
        let id = format!("{}/{}/{desc}", op.name(), dtype.name());
        let mut rng = Rng::for_id(&id);
        let x = rng.tensor(dtype, shape, &Fill::Range(-2.0, 2.0));
        // Each value goes to a position inside its own window: window start plus a drawn
        // offset, clamped into the unpooled extent.
        let r = shape.len() - 2;
        let unpooled: Vec<usize> = (0..r)
            .map(|d| {
                ((shape[2 + d] as i64 - 1) * strides[d] - pads[d] - pads[r + d] + kernel[d])
                    as usize
            })
            .collect();
        let plane: usize = unpooled.iter().product();
        let count: usize = shape.iter().product();
        let spatial: usize = shape[2..].iter().product();
        let mut idx = Vec::with_capacity(count);
        for flat in 0..count {
            let (line, mut rest) = (flat / spatial, flat % spatial);
            let mut pos = vec![0usize; r];
            for d in (0..r).rev() {
                let p = rest % shape[2 + d];
                rest /= shape[2 + d];
                let off = rng.int(0, kernel[d] - 1);
                let at = p as i64 * strides[d] - pads[d] + off;
                pos[d] = at.clamp(0, unpooled[d] as i64 - 1) as usize;
            }
            let within = pos.iter().zip(&unpooled).fold(0, |a, (&p, &u)| a * u + p);
            idx.push((line * plane + within) as f64);
        }
        let mut operands = vec![(x, false), (tensor(I64, shape, &idx), false)];
        if let Some(s) = output_shape {
            let v: Vec<f64> = s.iter().map(|&d| d as f64).collect();
            operands.push((tensor(I64, &[s.len()], &v), true));
        }
        let attrs = [
            ("kernel_shape", ints(kernel)),
            ("strides", ints(strides)),
            ("pads", ints(pads)),
        ];
        out.push(multi_output_case(&id, op, dtype, &operands, &attrs, 1)?);
    }
    Ok(())
}
