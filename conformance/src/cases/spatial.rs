//! Cases of the convolution relatives: CausalConvWithState (prefill with and without a
//! past state and bias, a decode step, a kernel of one, the fused SiLU, f16), Col2Im and
//! DeformConv, MaxUnpool, ConvInteger, MatMulInteger and RoiAlign.

use baton_delegate_api::DType::{F16, F32, I32, I64, I8, U8};
use baton_delegate_api::{Attr, DType, GraphBuilder, IrError, OpKind, Tensor, TensorData};

use super::gen::{case_id, ints, tensor, Draw, Fill, Maker, Rng};
use super::math::multi_output_case;
use super::{Case, CaseBody};
use crate::error::{Error, Result};

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::CausalConvWithState => causal_conv(out),
        OpKind::Col2Im => col2im(out),
        OpKind::DeformConv => deform_conv(out),
        OpKind::MaxUnpool => max_unpool(out),
        OpKind::ConvInteger | OpKind::MatMulInteger => integer_products(op, out),
        OpKind::RoiAlign => roi_align(out),
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

/// An 8-bit tensor of `dtype` drawn over its whole range.
fn eight_bit(rng: &mut Rng, dtype: DType, shape: &[usize]) -> Tensor {
    let (lo, hi) = if dtype == U8 {
        (0.0, 255.0)
    } else {
        (-128.0, 127.0)
    };
    let n = shape.iter().product();
    let v = rng.values(n, &Fill::Range(lo, hi), true);
    tensor(dtype, shape, &v)
}

/// ConvInteger and MatMulInteger: u8 and i8 operands in each combination, scalar and
/// per-line zero points, none, padding, strides and groups, batched products.
fn integer_products(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    // (desc, a dtype, b dtype, a shape, b shape, a zero point, b zero point, attrs)
    type Form = (
        &'static str,
        DType,
        DType,
        &'static [usize],
        &'static [usize],
        Option<usize>,
        Option<usize>,
        &'static [(&'static str, &'static [i64])],
    );
    let conv: &[Form] = &[
        (
            "u8_u8_scalar_zp",
            U8,
            U8,
            &[1, 2, 5, 5],
            &[3, 2, 3, 3],
            Some(1),
            Some(1),
            &[],
        ),
        (
            "i8_u8_per_channel_pads",
            I8,
            U8,
            &[2, 3, 6, 5],
            &[4, 3, 2, 3],
            Some(1),
            Some(4),
            &[("pads", &[1, 0, 1, 2])],
        ),
        (
            "u8_i8_strides_groups",
            U8,
            I8,
            &[1, 4, 7, 7],
            &[6, 2, 3, 3],
            Some(1),
            Some(6),
            &[("strides", &[2, 2]), ("group", &[2])],
        ),
        (
            "u8_u8_no_zp_1d",
            U8,
            U8,
            &[2, 3, 9],
            &[2, 3, 4],
            None,
            None,
            &[("dilations", &[2])],
        ),
    ];
    let matmul: &[Form] = &[
        (
            "u8_u8_scalar_zp",
            U8,
            U8,
            &[4, 6],
            &[6, 5],
            Some(1),
            Some(1),
            &[],
        ),
        (
            "u8_i8_per_row_column",
            U8,
            I8,
            &[3, 7],
            &[7, 4],
            Some(3),
            Some(4),
            &[],
        ),
        (
            "i8_i8_batched",
            I8,
            I8,
            &[2, 3, 8],
            &[8, 2],
            Some(1),
            None,
            &[],
        ),
        (
            "u8_u8_no_zp_vector",
            U8,
            U8,
            &[9],
            &[2, 9, 3],
            None,
            None,
            &[],
        ),
    ];
    let forms = if op == OpKind::ConvInteger {
        conv
    } else {
        matmul
    };
    for &(desc, da, db, a, b, az, bz, attrs) in forms {
        let id = format!("{}/{}/{desc}", op.name(), da.name());
        let mut rng = Rng::for_id(&id);
        let mut operands = vec![
            (eight_bit(&mut rng, da, a), false),
            (eight_bit(&mut rng, db, b), true),
        ];
        match az {
            Some(n) => operands.push((eight_bit(&mut rng, da, &[n]), true)),
            None if bz.is_some() => operands.push((Tensor::from_bytes(da, &[0], &[]), true)),
            None => {}
        }
        if let Some(n) = bz {
            operands.push((eight_bit(&mut rng, db, &[n]), true));
        }
        // `group` is one int; the rest are lists.
        let attrs: Vec<(&str, Attr)> = attrs
            .iter()
            .map(|&(k, v)| {
                (
                    k,
                    if k == "group" {
                        Attr::Int(v[0])
                    } else {
                        ints(v)
                    },
                )
            })
            .collect();
        out.push(multi_output_case(&id, op, da, &operands, &attrs, 1)?);
    }
    out.push(integer_f32_case(op)?);
    Ok(())
}

/// The f32 case of ConvInteger or MatMulInteger: `Cast(op(Cast(x) to u8, w, zero points))
/// to f32`, `x` whole numbers in u8's range. A `Model` case carrying the op's name, as op
/// cases hold one node.
fn integer_f32_case(op: OpKind) -> Result<Case> {
    let id = case_id(op, F32, "via_cast_u8");
    let err = |e: IrError| Error::Case {
        id: id.clone(),
        message: e.to_string(),
    };
    let mut rng = Rng::for_id(&id);
    let (x_shape, w_shape, w_zp): (&[usize], &[usize], usize) = if op == OpKind::ConvInteger {
        (&[1, 2, 5, 6], &[3, 2, 2, 2], 3)
    } else {
        (&[3, 5], &[5, 4], 4)
    };
    let x = rng.values(x_shape.iter().product(), &Fill::Range(0.0, 255.0), true);
    let x = tensor(F32, x_shape, &x);
    let mut b = GraphBuilder::new(&id);
    let constant = |b: &mut GraphBuilder, name: &str, t: Tensor| {
        b.constant(name, t.dtype, &t.shape, TensorData::from_bytes(t.bytes()))
    };
    let xi = b.input_fixed("x", F32, x_shape);
    let to = |d: DType| [("to", Attr::Int(d.onnx_code()))];
    let xc = b.node(OpKind::Cast, &[xi], &to(U8)).map_err(err)?;
    let w = eight_bit(&mut rng, U8, w_shape);
    let wi = constant(&mut b, "w", w);
    let xz = eight_bit(&mut rng, U8, &[1]);
    let xzi = constant(&mut b, "x_zero_point", xz);
    let wz = eight_bit(&mut rng, U8, &[w_zp]);
    let wzi = constant(&mut b, "w_zero_point", wz);
    let y = b.node(op, &[xc, wi, xzi, wzi], &[]).map_err(err)?;
    let y = b.node(OpKind::Cast, &[y], &to(F32)).map_err(err)?;
    b.rename(y, "out");
    b.output(y);
    let graph = b.finish().map_err(err)?;
    Ok(Case {
        id: id.clone(),
        op: op.name().to_string(),
        dtype: Some(F32),
        body: CaseBody::Model {
            graph,
            inputs: vec![x],
        },
    })
}

/// DeformConv: offsets within a few pixels (some taps leave the image), with and without
/// mask and bias, padding, strides, dilations, groups, offset groups, 1-D, and f16.
fn deform_conv(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::DeformConv;
    // (desc, dtype, X, W, out spatial, bias, mask, offset_group, attrs)
    type Form = (
        &'static str,
        DType,
        &'static [usize],
        &'static [usize],
        &'static [usize],
        bool,
        bool,
        usize,
        &'static [(&'static str, &'static [i64])],
    );
    let forms: &[Form] = &[
        (
            "basic",
            F32,
            &[1, 2, 5, 5],
            &[3, 2, 3, 3],
            &[3, 3],
            false,
            false,
            1,
            &[],
        ),
        (
            "mask_bias",
            F32,
            &[2, 2, 4, 5],
            &[2, 2, 2, 2],
            &[3, 4],
            true,
            true,
            1,
            &[],
        ),
        (
            "pads_strides",
            F32,
            &[1, 3, 6, 6],
            &[2, 3, 3, 3],
            &[3, 3],
            true,
            false,
            1,
            &[("pads", &[1, 1, 1, 1]), ("strides", &[2, 2])],
        ),
        (
            "dilations",
            F32,
            &[1, 1, 6, 7],
            &[2, 1, 2, 2],
            &[4, 5],
            false,
            true,
            1,
            &[("dilations", &[2, 2])],
        ),
        (
            "groups_offset_groups",
            F32,
            &[1, 4, 5, 5],
            &[4, 2, 2, 2],
            &[4, 4],
            true,
            true,
            2,
            &[("group", &[2])],
        ),
        (
            "line",
            F32,
            &[2, 2, 9],
            &[3, 2, 3],
            &[7],
            true,
            true,
            2,
            &[],
        ),
        (
            "mask_bias",
            F16,
            &[1, 2, 4, 4],
            &[2, 2, 2, 2],
            &[3, 3],
            true,
            true,
            1,
            &[],
        ),
    ];
    for &(desc, dtype, x, w, spatial, bias, mask, groups, attrs) in forms {
        let id = format!("{}/{}/{desc}", op.name(), dtype.name());
        let mut rng = Rng::for_id(&id);
        let taps: usize = w[2..].iter().product();
        let r = spatial.len();
        let with = |c: usize| {
            let mut s = vec![x[0], c];
            s.extend_from_slice(spatial);
            s
        };
        let mut operands = vec![
            (rng.tensor(dtype, x, &Fill::Range(-1.0, 1.0)), false),
            (rng.tensor(dtype, w, &Fill::Range(-1.0, 1.0)), true),
            (
                rng.tensor(dtype, &with(groups * taps * r), &Fill::Range(-2.5, 2.5)),
                false,
            ),
        ];
        if bias {
            operands.push((rng.tensor(dtype, &[w[0]], &Fill::Range(-1.0, 1.0)), true));
        } else if mask {
            operands.push((Tensor::from_bytes(dtype, &[0], &[]), true));
        }
        if mask {
            operands.push((
                rng.tensor(dtype, &with(groups * taps), &Fill::Range(0.0, 1.0)),
                false,
            ));
        }
        let mut attrs: Vec<(&str, Attr)> = attrs
            .iter()
            .map(|&(k, v)| {
                (
                    k,
                    if k == "group" {
                        Attr::Int(v[0])
                    } else {
                        ints(v)
                    },
                )
            })
            .collect();
        attrs.push(("offset_group", Attr::Int(groups as i64)));
        out.push(multi_output_case(&id, op, dtype, &operands, &attrs, 1)?);
    }
    Ok(())
}

/// RoiAlign: both coordinate modes, avg and max, fixed and adaptive sampling grids, a
/// spatial scale, several images and channels, and boxes that reach past the image,
/// lie wholly outside it, are thinner than a pixel or inverted (x2 < x1); f32 and f16.
fn roi_align(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::RoiAlign;
    // (desc, dtype, X [N, C, H, W], rois, batch indices, attributes)
    type Form = (
        &'static str,
        DType,
        [usize; 4],
        &'static [f64],
        &'static [i64],
        &'static [(&'static str, RoiAttr)],
    );
    #[derive(Clone, Copy)]
    enum RoiAttr {
        Int(i64),
        Float(f32),
        Str(&'static str),
    }
    use RoiAttr::{Float as F, Int as I, Str as S};
    const INSIDE: &[f64] = &[0., 0., 5., 4., 1.5, 0.5, 4.25, 3.75];
    const EDGES: &[f64] = &[
        -2., -1.5, 3., 2., // reaches past the top-left corner
        4., 3., 9., 8., // past the bottom-right corner
        -6., -6., -3., -2.5, // wholly outside
        2., 2., 2.25, 2.1, // thinner than a pixel
        4., 3., 1., 1., // inverted
    ];
    let forms: &[Form] = &[
        (
            "half_pixel_avg_sr2",
            F32,
            [1, 3, 6, 7],
            INSIDE,
            &[0, 0],
            &[
                ("output_height", I(3)),
                ("output_width", I(2)),
                ("sampling_ratio", I(2)),
            ],
        ),
        (
            "output_half_pixel_avg_sr2",
            F32,
            [1, 3, 6, 7],
            INSIDE,
            &[0, 0],
            &[
                ("coordinate_transformation_mode", S("output_half_pixel")),
                ("output_height", I(3)),
                ("output_width", I(2)),
                ("sampling_ratio", I(2)),
            ],
        ),
        (
            "half_pixel_avg_adaptive_scale",
            F32,
            [2, 2, 5, 6],
            &[0., 0., 11., 9., 2., 3., 10., 7., 5., 1., 8., 9.5],
            &[1, 0, 1],
            &[
                ("output_height", I(2)),
                ("output_width", I(3)),
                ("spatial_scale", F(0.5)),
            ],
        ),
        (
            "half_pixel_max_sr3",
            F32,
            [1, 2, 6, 6],
            INSIDE,
            &[0, 0],
            &[
                ("mode", S("max")),
                ("output_height", I(2)),
                ("output_width", I(2)),
                ("sampling_ratio", I(3)),
            ],
        ),
        (
            "output_half_pixel_max_adaptive",
            F32,
            [2, 2, 6, 5],
            INSIDE,
            &[1, 0],
            &[
                ("coordinate_transformation_mode", S("output_half_pixel")),
                ("mode", S("max")),
                ("output_height", I(2)),
                ("output_width", I(2)),
            ],
        ),
        (
            "edges_half_pixel_avg",
            F32,
            [1, 2, 5, 5],
            EDGES,
            &[0, 0, 0, 0, 0],
            &[("output_height", I(2)), ("output_width", I(2))],
        ),
        (
            "edges_output_half_pixel_avg_sr2",
            F32,
            [1, 2, 5, 5],
            EDGES,
            &[0, 0, 0, 0, 0],
            &[
                ("coordinate_transformation_mode", S("output_half_pixel")),
                ("output_height", I(2)),
                ("output_width", I(2)),
                ("sampling_ratio", I(2)),
            ],
        ),
        (
            "edges_output_half_pixel_max",
            F32,
            [1, 2, 5, 5],
            EDGES,
            &[0, 0, 0, 0, 0],
            &[
                ("coordinate_transformation_mode", S("output_half_pixel")),
                ("mode", S("max")),
                ("output_height", I(3)),
                ("output_width", I(3)),
            ],
        ),
        (
            "one_pixel_image_1x1_bins",
            F32,
            [1, 2, 1, 1],
            INSIDE,
            &[0, 0],
            &[],
        ),
        (
            "half_pixel_avg_sr2",
            F16,
            [1, 3, 6, 7],
            INSIDE,
            &[0, 0],
            &[
                ("output_height", I(3)),
                ("output_width", I(2)),
                ("sampling_ratio", I(2)),
            ],
        ),
        (
            "output_half_pixel_max_adaptive",
            F16,
            [2, 2, 6, 5],
            INSIDE,
            &[1, 0],
            &[
                ("coordinate_transformation_mode", S("output_half_pixel")),
                ("mode", S("max")),
                ("output_height", I(2)),
                ("output_width", I(2)),
            ],
        ),
    ];
    for &(desc, dtype, x_shape, rois, batch, attrs) in forms {
        let id = case_id(op, dtype, desc);
        let mut rng = Rng::for_id(&id);
        let x = rng.tensor(dtype, &x_shape, &Fill::Range(-2.0, 2.0));
        let r = batch.len();
        let idx: Vec<f64> = batch.iter().map(|&b| b as f64).collect();
        let operands = [
            (x, false),
            (tensor(dtype, &[r, 4], rois), false),
            (tensor(I64, &[r], &idx), false),
        ];
        let attrs: Vec<(&str, Attr)> = attrs
            .iter()
            .map(|&(k, v)| {
                let v = match v {
                    RoiAttr::Int(i) => Attr::Int(i),
                    RoiAttr::Float(f) => Attr::Float(f),
                    RoiAttr::Str(s) => Attr::Str(s.into()),
                };
                (k, v)
            })
            .collect();
        out.push(multi_output_case(&id, op, dtype, &operands, &attrs, 1)?);
    }
    Ok(())
}
