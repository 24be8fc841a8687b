//! Cases for the ONNX-milestone ops of this family (tensor_ops): data movement in every
//! dtype (floats mixing in NaN, infinities and -0.0, which must survive bit for bit),
//! ConvTranspose, Resize, LSTM, GRU, RNN and Q/DQ. Operands that fix an output shape (axes,
//! pads, repeats, target shapes, split sizes, Resize sizes) are constants of the graph.
//! Split, LSTM, GRU and RNN nodes use several outputs, each a graph output.

use baton_delegate_api::{Attr, DType, GraphBuilder, OpKind, Tensor, TensorData};

use super::gen::{case_id, dims, ints, tensor, Draw, Fill, Maker, Rng, SPECIALS, SPECIALS_F16};
use super::{Case, CaseBody, KIT_DTYPES};
use crate::error::{Error, Result};

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::Squeeze | OpKind::Unsqueeze => squeeze_unsqueeze(op, out),
        OpKind::Identity | OpKind::Shape | OpKind::Size => whole_tensor(op, out),
        OpKind::Split => split(out),
        OpKind::Slice => slice(out),
        OpKind::Gather => gather(out),
        OpKind::Expand | OpKind::Tile => expand_tile(op, out),
        OpKind::Pad => pad(out),
        OpKind::ConstantOfShape => constant_of_shape(out),
        OpKind::ConvTranspose => conv_transpose(out),
        OpKind::Resize => resize(out),
        OpKind::LSTM | OpKind::GRU | OpKind::RNN => recurrent(op, out),
        OpKind::QuantizeLinear | OpKind::DequantizeLinear => quantize(op, out),
        _ => Ok(()),
    }
}

// Table rows, described where the tables are.
#[rustfmt::skip]
type SplitRow = (&'static str, &'static [usize], i64, Option<&'static [i64]>, bool, usize);
type SliceRow = (&'static str, &'static [usize], [&'static [i64]; 4]);
#[rustfmt::skip]
type GatherRow = (&'static str, &'static [usize], i64, &'static [usize], &'static [i64]);
#[rustfmt::skip]
type PadRow = (&'static str, &'static [usize], &'static [i64], &'static str, bool, Option<&'static [i64]>);
#[rustfmt::skip]
type ConvTransposeRow = (&'static str, &'static [usize], &'static [usize], bool, Vec<(&'static str, Attr)>);
#[rustfmt::skip]
type QuantizeRow = (&'static str, DType, &'static [usize], &'static [usize], Option<DType>, i64);

/// A constant 1-D i64 operand.
fn i64s(values: &[i64]) -> Tensor {
    Tensor::from_i64(&[values.len()], values)
}

/// Values of `dtype` that cover its range and, for floats, its special values.
fn fill(dtype: DType) -> Fill {
    match dtype {
        DType::F32 => Fill::Mixed(SPECIALS.to_vec(), -10.0, 10.0),
        DType::F16 => Fill::Mixed(SPECIALS_F16.to_vec(), -10.0, 10.0),
        DType::I8 => Fill::Range(-128.0, 127.0),
        DType::U8 => Fill::Range(0.0, 255.0),
        DType::I32 => Fill::Range(-2e9, 2e9),
        DType::I64 => Fill::Range(-1e15, 1e15),
        DType::Bool => Fill::Range(0.0, 1.0),
        d => match d.int_range() {
            Some((lo, hi)) => Fill::Range(lo as f64, hi as f64),
            None => Fill::Range(-10.0, 10.0),
        },
    }
}

fn s(v: &str) -> Attr {
    Attr::Str(v.to_string())
}

/// `-3` as `neg3`, for ids.
fn num(v: i64) -> String {
    v.to_string().replace('-', "neg")
}

/// A data-movement case: one input of `dtype` and `shape` filled by [`fill`], then
/// constant i64 operands.
fn movement(
    op: OpKind,
    dtype: DType,
    desc: &str,
    shape: &[usize],
    consts: &[&[i64]],
    attrs: &[(&str, Attr)],
) -> Result<Case> {
    let mut m = Maker::new(op, dtype, desc);
    m.input(shape, &fill(dtype));
    for c in consts {
        m.operand(i64s(c), true);
    }
    m.build(attrs)
}

/// Squeeze and Unsqueeze: axes as a constant input (opset 13) or an attribute (opset
/// 11), negative axes, rank 0 and empty tensors, every dtype.
fn squeeze_unsqueeze(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    type Row = (&'static str, &'static [usize], Option<&'static [i64]>, bool);
    let rows: &[Row] = match op {
        OpKind::Squeeze => &[
            ("input_axes_neg2", &[1, 3, 1, 2], Some(&[-2]), true),
            ("attr_axes_0_2", &[1, 3, 1, 2], Some(&[0, 2]), false),
            ("no_axes_all_ones", &[1, 3, 1, 1], None, false),
            ("no_axes_to_rank0", &[1, 1], None, false),
            ("empty_0x1x3_axis1", &[0, 1, 3], Some(&[1]), true),
        ],
        _ => &[
            ("input_axes_0_neg1", &[2, 3], Some(&[0, -1]), true),
            ("attr_axes_1", &[2, 3], Some(&[1]), false),
            ("rank0_axis0", &[], Some(&[0]), true),
            ("middle_1_2", &[2, 3], Some(&[1, 2]), true),
            ("empty_0x3_axis0", &[0, 3], Some(&[0]), true),
        ],
    };
    for dtype in KIT_DTYPES {
        for &(desc, shape, axes, as_input) in rows {
            let case = match (axes, as_input) {
                (Some(a), true) => movement(op, dtype, desc, shape, &[a], &[])?,
                (Some(a), false) => movement(op, dtype, desc, shape, &[], &[("axes", ints(a))])?,
                (None, _) => movement(op, dtype, desc, shape, &[], &[])?,
            };
            out.push(case);
        }
    }
    Ok(())
}

/// Identity, Shape (with `start`/`end`) and Size over ranks 0 to 4 and empty tensors.
fn whole_tensor(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let shapes: &[&[usize]] = &[&[2, 3], &[], &[0, 4], &[7], &[1, 2, 3, 4]];
    for dtype in KIT_DTYPES {
        for &shape in shapes {
            out.push(movement(op, dtype, &dims(shape), shape, &[], &[])?);
        }
    }
    if op == OpKind::Shape {
        for (start, end) in [(1, 3), (-2, -1), (0, 0), (-10, 10), (2, 1)] {
            let desc = format!("2x3x4_start{}_end{}", num(start), num(end));
            let attrs = [("start", Attr::Int(start)), ("end", Attr::Int(end))];
            out.push(movement(op, DType::F32, &desc, &[2, 3, 4], &[], &attrs)?);
        }
    }
    Ok(())
}

/// A one-node case whose node uses its first `n_out` outputs, all graph outputs (the
/// shared `Maker` builds single-output nodes). `operands` are `(tensor, constant)`.
fn multi_output(
    op: OpKind,
    dtype: DType,
    desc: &str,
    operands: Vec<(Tensor, bool)>,
    attrs: &[(&str, Attr)],
    n_out: usize,
) -> Result<Case> {
    let id = case_id(op, dtype, desc);
    let err = |e: baton_delegate_api::IrError| Error::Case {
        id: id.clone(),
        message: e.to_string(),
    };
    let mut b = GraphBuilder::new(&id);
    let mut ids = Vec::new();
    let mut inputs = Vec::new();
    for (i, (t, constant)) in operands.into_iter().enumerate() {
        let name = format!("in{i}");
        ids.push(if constant {
            b.constant(&name, t.dtype, &t.shape, TensorData::from_bytes(t.bytes()))
        } else {
            let id = b.input_fixed(&name, t.dtype, &t.shape);
            inputs.push(t);
            id
        });
    }
    let name = op.name().to_lowercase();
    let outs = b
        .named_node_outputs(&name, op, &ids, attrs, n_out)
        .map_err(err)?;
    for (k, &o) in outs.iter().enumerate() {
        b.rename(o, &format!("out{k}"));
        b.output(o);
    }
    let graph = b.finish().map_err(err)?;
    Ok(Case {
        id,
        op: op.name().to_string(),
        dtype: Some(dtype),
        body: CaseBody::Op { graph, inputs },
    })
}

/// Split by constant sizes (input or attribute), by `num_outputs` (uneven last part),
/// zero-sized parts, a prefix of the outputs; every dtype.
fn split(out: &mut Vec<Case>) -> Result<()> {
    // (desc, shape, axis, split sizes, sizes as an input, outputs used); without sizes,
    // `num_outputs` is the number of outputs used.
    #[rustfmt::skip]
    let rows: &[SplitRow] = &[
        ("input_2_0_3_axis_neg1", &[2, 5], -1, Some(&[2, 0, 3]), true, 3),
        ("input_1_5_axis0", &[6, 2], 0, Some(&[1, 5]), true, 2),
        ("attr_1_3", &[4], 0, Some(&[1, 3]), false, 2),
        ("num_outputs3_uneven_7", &[7, 2], 0, None, false, 3),
        ("num_outputs2_axis1", &[3, 4, 2], 1, None, false, 2),
        ("empty_rows_0x4", &[0, 4], 1, Some(&[3, 1]), true, 2),
        ("first_of_two", &[4, 3], 0, Some(&[1, 3]), true, 1),
    ];
    for dtype in KIT_DTYPES {
        for &(desc, shape, axis, sizes, as_input, n_out) in rows {
            let mut rng = Rng::for_id(&case_id(OpKind::Split, dtype, desc));
            let mut operands = vec![(rng.tensor(dtype, shape, &fill(dtype)), false)];
            let mut attrs = vec![("axis", Attr::Int(axis))];
            match (sizes, as_input) {
                (Some(v), true) => operands.push((i64s(v), true)),
                (Some(v), false) => attrs.push(("split", ints(v))),
                (None, _) => attrs.push(("num_outputs", Attr::Int(n_out as i64))),
            }
            let case = multi_output(OpKind::Split, dtype, desc, operands, &attrs, n_out)?;
            out.push(case);
        }
    }
    Ok(())
}

/// Slice: INT64_MAX/MIN ends, negative starts and steps, clamping, empty results, the
/// 3-input and attribute (opset 1) forms; every dtype.
fn slice(out: &mut Vec<Case>) -> Result<()> {
    const MAX: i64 = i64::MAX;
    const MIN: i64 = i64::MIN;
    // (desc, shape, [starts, ends, axes, steps])
    #[rustfmt::skip]
    let rows: &[SliceRow] = &[
        ("neg_start_max_end", &[2, 5], [&[-3], &[MAX], &[1], &[1]]),
        ("reverse_both_min_end", &[2, 5], [&[-1, -1], &[MIN, MIN], &[0, 1], &[-1, -2]]),
        ("step2_axis_neg1", &[3, 7], [&[1], &[7], &[-1], &[2]]),
        ("start_past_end_empty", &[2, 5], [&[7], &[9], &[1], &[1]]),
        ("backward_range_empty", &[2, 5], [&[3], &[1], &[1], &[1]]),
        ("rank3_three_axes", &[2, 3, 4], [&[0, 3, -1], &[2, -4, 0], &[0, 2, 1], &[1, -1, -1]]),
        ("step_neg3_clamped", &[9], [&[100], &[-100], &[0], &[-3]]),
        ("empty_input", &[0, 3], [&[0], &[2], &[1], &[1]]),
    ];
    for dtype in KIT_DTYPES {
        for &(desc, shape, operands) in rows {
            out.push(movement(OpKind::Slice, dtype, desc, shape, &operands, &[])?);
        }
    }
    // Without axes and steps, and the attribute form of opset 1.
    let (op, f32, x) = (OpKind::Slice, DType::F32, &[4, 3]);
    out.push(movement(op, f32, "three_inputs", x, &[&[1], &[3]], &[])?);
    let attrs = [
        ("starts", ints(&[0, 1])),
        ("ends", ints(&[2, MAX])),
        ("axes", ints(&[-1, 0])),
    ];
    out.push(movement(op, f32, "attr_form", x, &[], &attrs)?);
    Ok(())
}

/// Gather along several axes with i64 and i32 indices (negative ones included), a scalar
/// index, empty indices; every dtype.
fn gather(out: &mut Vec<Case>) -> Result<()> {
    // (desc, data shape, axis, indices shape, indices)
    #[rustfmt::skip]
    let rows: &[GatherRow] = &[
        ("axis0_2x2_neg", &[5, 3], 0, &[2, 2], &[4, -5, -1, 0]),
        ("axis1_3", &[3, 4], 1, &[3], &[3, -4, 1]),
        ("axis_neg1_scalar", &[2, 3, 4], -1, &[], &[-2]),
        ("axis1_repeat", &[2, 3, 2], 1, &[4], &[2, 2, 0, -3]),
        ("empty_indices", &[4, 3], 0, &[0], &[]),
        ("rank1_2x3", &[7], 0, &[2, 3], &[0, 6, -7, 3, 3, -1]),
    ];
    for dtype in KIT_DTYPES {
        for (k, &(desc, shape, axis, idx_shape, idx)) in rows.iter().enumerate() {
            // Alternate the index dtype; both appear for every data dtype.
            let (tag, indices) = match k % 2 {
                0 => ("i64", Tensor::from_i64(idx_shape, idx)),
                _ => {
                    let v: Vec<f64> = idx.iter().map(|&i| i as f64).collect();
                    ("i32", tensor(DType::I32, idx_shape, &v))
                }
            };
            let desc = format!("{desc}_{tag}");
            let mut m = Maker::new(OpKind::Gather, dtype, &desc);
            m.input(shape, &fill(dtype)).operand(indices, false);
            out.push(m.build(&[("axis", Attr::Int(axis))])?);
        }
    }
    Ok(())
}

/// Expand (two-way broadcasting, a smaller target, rank 0, empty) and Tile (zero and
/// several repeats, rank 0); every dtype.
fn expand_tile(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    type Row = (&'static str, &'static [usize], &'static [i64]);
    let rows: &[Row] = match op {
        OpKind::Expand => &[
            ("3x1_to_2x1x4", &[3, 1], &[2, 1, 4]),
            ("4_to_3x4", &[4], &[3, 4]),
            ("2x3_target_1", &[2, 3], &[1]),
            ("rank0_to_2x2", &[], &[2, 2]),
            ("1x3_to_0x3", &[1, 3], &[0, 3]),
        ],
        _ => &[
            ("2x3_by_2x1", &[2, 3], &[2, 1]),
            ("3_by_4", &[3], &[4]),
            ("2x1x2_by_1x3x2", &[2, 1, 2], &[1, 3, 2]),
            ("2x2_by_0x2", &[2, 2], &[0, 2]),
            ("rank0", &[], &[]),
        ],
    };
    for dtype in KIT_DTYPES {
        for &(desc, shape, target) in rows {
            out.push(movement(op, dtype, desc, shape, &[target], &[])?);
        }
    }
    Ok(())
}

/// Pad: constant (value input, default, attribute form), reflect, edge, negative pads
/// (crop), opset-18 axes, NCHW spatial padding; every dtype.
fn pad(out: &mut Vec<Case>) -> Result<()> {
    // (desc, shape, pads, mode, constant value given, axes)
    #[rustfmt::skip]
    let rows: &[PadRow] = &[
        ("constant_value", &[2, 3], &[1, 0, 0, 2], "constant", true, None),
        ("constant_default", &[2, 3], &[0, 1, 1, 0], "constant", false, None),
        ("reflect", &[3, 4], &[1, 2, 2, 1], "reflect", false, None),
        ("edge", &[3, 4], &[2, 0, 0, 3], "edge", false, None),
        ("negative_crop", &[4, 5], &[-1, 1, 0, -2], "constant", true, None),
        ("edge_crop_then_pad", &[4, 5], &[0, -2, 1, 2], "edge", false, None),
        ("axes_neg1", &[2, 3, 4], &[1, 2], "constant", true, Some(&[-1])),
        ("nchw_reflect", &[1, 2, 3, 3], &[0, 0, 1, 2, 0, 0, 2, 1], "reflect", false, None),
        ("empty_axis_constant", &[0, 2], &[1, 0, 1, 1], "constant", true, None),
    ];
    for dtype in KIT_DTYPES {
        for &(desc, shape, pads, mode, value, axes) in rows {
            let mut m = Maker::new(OpKind::Pad, dtype, desc);
            m.input(shape, &fill(dtype)).operand(i64s(pads), true);
            if value || axes.is_some() {
                let v = m.rng.tensor(dtype, &[], &fill(dtype));
                m.operand(v, true);
            }
            if let Some(a) = axes {
                m.operand(i64s(a), true);
            }
            out.push(m.build(&[("mode", s(mode))])?);
        }
    }
    let attrs = [("pads", ints(&[1, 0, 0, 1])), ("value", Attr::Float(2.5))];
    out.push(movement(
        OpKind::Pad,
        DType::F32,
        "attr_form",
        &[2, 2],
        &[],
        &attrs,
    )?);
    Ok(())
}

/// ConstantOfShape in every output dtype, with the default value, float and integer
/// values, a rank-0 and an empty result. The graph has no inputs: the shape is constant.
fn constant_of_shape(out: &mut Vec<Case>) -> Result<()> {
    let value = |d: DType| match d {
        DType::F32 => Attr::Float(-1.5e30),
        DType::F16 => Attr::Float(-2.5),
        DType::I64 => Attr::Int(1 << 40),
        DType::I32 => Attr::Int(-7),
        DType::I8 => Attr::Int(-128),
        DType::U8 => Attr::Int(200),
        DType::Bool => Attr::Int(1),
        d if d.is_float() => Attr::Float(1.5),
        _ => Attr::Int(1),
    };
    let code = |d: DType| d.onnx_code();
    let shapes: &[(&str, &[i64])] = &[
        ("2x3", &[2, 3]),
        ("rank0", &[]),
        ("0x3", &[0, 3]),
        ("1x2x1x2", &[1, 2, 1, 2]),
    ];
    for dtype in KIT_DTYPES {
        for (i, &(desc, shape)) in shapes.iter().enumerate() {
            let mut m = Maker::new(OpKind::ConstantOfShape, dtype, &format!("{desc}_value"));
            m.operand(i64s(shape), true);
            let mut attrs = vec![("value_dtype", Attr::Int(code(dtype)))];
            // The first shape also runs with the default value (0).
            attrs.push(("value", value(dtype)));
            out.push(m.build(&attrs)?);
            if i == 0 {
                let mut m = Maker::new(OpKind::ConstantOfShape, dtype, &format!("{desc}_default"));
                m.operand(i64s(shape), true);
                out.push(m.build(&attrs[..1])?);
            }
        }
    }
    Ok(())
}

/// ConvTranspose, 1-D and 2-D: strides, pads, dilations, groups, output_padding,
/// output_shape, SAME_* auto-padding, bias; weights scaled by 1/sqrt(fan-in).
fn conv_transpose(out: &mut Vec<Case>) -> Result<()> {
    let (st, pads, g) = (
        |v: &[i64]| ("strides", ints(v)),
        |v: &[i64]| ("pads", ints(v)),
        |v| ("group", Attr::Int(v)),
    );
    // (desc, x, w, bias, attributes)
    #[rustfmt::skip]
    let rows: Vec<ConvTransposeRow> = vec![
        ("2d_basic", &[1, 2, 4, 4], &[2, 3, 3, 3], false, vec![]),
        ("2d_bias_stride2_pad1", &[1, 3, 5, 5], &[3, 4, 3, 3], true, vec![st(&[2, 2]), pads(&[1, 1, 1, 1])]),
        ("2d_outpad1_stride2", &[2, 2, 3, 4], &[2, 2, 3, 3], true, vec![st(&[2, 2]), ("output_padding", ints(&[1, 1]))]),
        ("2d_group2_dil2", &[1, 4, 4, 4], &[4, 3, 2, 2], true, vec![g(2), ("dilations", ints(&[2, 2]))]),
        ("2d_asym_pads_stride3x2", &[1, 2, 3, 3], &[2, 2, 3, 2], false, vec![st(&[3, 2]), pads(&[0, 1, 2, 0])]),
        ("2d_output_shape", &[1, 2, 3, 3], &[2, 2, 3, 3], true, vec![st(&[2, 2]), ("output_shape", ints(&[6, 5]))]),
        ("2d_same_upper", &[1, 2, 3, 3], &[2, 2, 3, 3], false, vec![st(&[2, 2]), ("auto_pad", s("SAME_UPPER"))]),
        ("2d_same_lower", &[1, 2, 3, 3], &[2, 2, 4, 4], false, vec![st(&[2, 2]), ("auto_pad", s("SAME_LOWER"))]),
        ("1d_stride3_k5", &[2, 3, 7], &[3, 2, 5], true, vec![st(&[3])]),
        ("1d_depthwise_group3", &[1, 3, 6], &[3, 1, 3], true, vec![g(3), pads(&[1, 1])]),
    ];
    for dtype in [DType::F32, DType::F16] {
        for (k, (desc, x, w, bias, attrs)) in rows.iter().enumerate() {
            // f16 takes every third configuration.
            if dtype == DType::F16 && k % 3 != 1 {
                continue;
            }
            let mut m = Maker::new(OpKind::ConvTranspose, dtype, desc);
            let sc = 1.0 / (w[2..].iter().product::<usize>() as f64).sqrt();
            m.input(x, &Fill::Range(-1.0, 1.0));
            m.constant(w, &Fill::Range(-sc, sc));
            if *bias {
                // M = W's second extent times the group count.
                let group = attrs.iter().find_map(|(n, a)| match (*n, a) {
                    ("group", Attr::Int(v)) => Some(*v as usize),
                    _ => None,
                });
                m.constant(&[w[1] * group.unwrap_or(1)], &Fill::Range(-1.0, 1.0));
            }
            out.push(m.build(attrs)?);
        }
    }
    Ok(())
}

/// Resize: nearest in every `nearest_mode` and coordinate mode, up and down, by scales
/// (the attribute the host folds constant scales into) and by sizes (a constant input 3
/// after 0-element `roi` and `scales`); linear (bilinear on NCHW, 1-D, trilinear);
/// opset-18 `axes` and `keep_aspect_ratio_policy`; nearest on other dtypes. Inputs are
/// finite: the NaN behaviour of interpolation is not part of the contract.
fn resize(out: &mut Vec<Case>) -> Result<()> {
    let (up, down) = (Scales(&[1., 1., 2., 3.]), Scales(&[1., 1., 0.6, 0.6]));
    // (desc, shape, target, "mode coordinate_transformation_mode [nearest_mode]"); the
    // pytorch_half_pixel row leaves nearest_mode at its default.
    #[rustfmt::skip]
    let rows: Vec<(&str, &[usize], Target, &str)> = vec![
        ("nearest_up_2x3", &[1, 1, 2, 2], up, "nearest half_pixel round_prefer_floor"),
        ("nearest_down_0.6", &[1, 1, 2, 4], down, "nearest half_pixel round_prefer_floor"),
        ("nearest_sizes_ceil_half_pixel", &[1, 2, 4, 4], Sizes(&[1, 2, 7, 8]), "nearest half_pixel ceil"),
        ("nearest_sizes_floor_align_corners", &[1, 1, 4, 4], Sizes(&[1, 1, 8, 3]), "nearest align_corners floor"),
        ("nearest_prefer_ceil_asymmetric", &[1, 1, 3, 4], Sizes(&[1, 1, 6, 8]), "nearest asymmetric round_prefer_ceil"),
        ("nearest_prefer_floor_asymmetric", &[1, 1, 3, 4], Scales(&[1., 1., 2.5, 1.5]), "nearest asymmetric round_prefer_floor"),
        ("nearest_pytorch_half_pixel_to1", &[2, 3, 5], Sizes(&[2, 1, 9]), "nearest pytorch_half_pixel"),
        ("linear_up2_half_pixel", &[1, 2, 3, 4], Scales(&[1., 1., 2., 2.]), "linear half_pixel"),
        ("linear_down_0.6_half_pixel", &[1, 1, 5, 7], down, "linear half_pixel"),
        ("linear_align_corners_sizes", &[1, 1, 3, 4], Sizes(&[1, 1, 7, 5]), "linear align_corners"),
        ("linear_asymmetric_up1.5", &[1, 1, 4, 4], Scales(&[1., 1., 1.5, 1.5]), "linear asymmetric"),
        ("linear_pytorch_half_pixel", &[1, 2, 1, 6], Sizes(&[1, 2, 1, 4]), "linear pytorch_half_pixel"),
        ("linear_1d", &[6], Scales(&[1.75]), "linear half_pixel"),
        ("trilinear", &[1, 1, 2, 3, 4], Sizes(&[1, 1, 3, 5, 2]), "linear half_pixel"),
    ];
    for (desc, shape, target, modes) in rows {
        let mut m = Maker::new(OpKind::Resize, DType::F32, desc);
        m.input(shape, &Fill::Range(-10.0, 10.0));
        let names = ["mode", "coordinate_transformation_mode", "nearest_mode"];
        let mut attrs: Vec<(&str, Attr)> = names.into_iter().zip(modes.split(' ').map(s)).collect();
        match target {
            Scales(v) => attrs.push(("scales", Attr::Floats(v.to_vec()))),
            Sizes(v) => {
                let empty = Tensor::from_f32(&[0], &[]);
                m.operand(empty.clone(), true).operand(empty, true);
                m.operand(i64s(v), true);
            }
        }
        out.push(m.build(&attrs)?);
    }
    // Opset 18: axes and keep_aspect_ratio_policy (sizes as an attribute here).
    let hw = ("axes", ints(&[2, 3]));
    let six = ("sizes", ints(&[6, 6]));
    let policy = |p: &str| ("keep_aspect_ratio_policy", s(p));
    #[rustfmt::skip]
    let extra: [(&str, Vec<(&str, Attr)>); 3] = [
        ("axes_hw_linear", vec![("mode", s("linear")), hw.clone(), ("scales", Attr::Floats(vec![2., 0.5]))]),
        ("not_larger_nearest", vec![hw.clone(), six.clone(), policy("not_larger")]),
        ("not_smaller_linear", vec![("mode", s("linear")), hw, six, policy("not_smaller")]),
    ];
    for (desc, attrs) in extra {
        let mut m = Maker::new(OpKind::Resize, DType::F32, desc);
        m.input(&[1, 1, 3, 4], &Fill::Range(-10.0, 10.0));
        out.push(m.build(&attrs)?);
    }
    // Nearest moves bytes of any dtype; linear also runs in f16.
    let scales = |v: &[f32]| ("scales", Attr::Floats(v.to_vec()));
    for dtype in [
        DType::U8,
        DType::I8,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::F16,
    ] {
        let mut m = Maker::new(OpKind::Resize, dtype, "nearest_up_2x1.5");
        m.input(&[1, 2, 3, 2], &fill(dtype));
        out.push(m.build(&[scales(&[1., 1., 2., 1.5])])?);
    }
    let mut m = Maker::new(OpKind::Resize, DType::F16, "linear_up2");
    m.input(&[1, 1, 3, 3], &Fill::Range(-2.0, 2.0));
    out.push(m.build(&[("mode", s("linear")), scales(&[1., 1., 2., 2.])])?);
    Ok(())
}

/// Resize's target.
#[derive(Clone, Copy)]
enum Target {
    Scales(&'static [f32]),
    Sizes(&'static [i64]),
}
use Target::{Scales, Sizes};

/// One LSTM, GRU or RNN configuration.
struct Rnn {
    desc: &'static str,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    direction: &'static str,
    bias: bool,
    initial: bool,
    lens: Option<&'static [i32]>,
    peephole: bool,
    attrs: Vec<(&'static str, Attr)>,
}

impl Rnn {
    /// Sequence 3, batch 1, input 4, hidden 5, with bias, nothing else.
    fn new(desc: &'static str, direction: &'static str) -> Rnn {
        #[rustfmt::skip]
        let r = Rnn {
            desc, seq: 3, batch: 1, input: 4, hidden: 5, direction, bias: true, initial: false,
            lens: None, peephole: false, attrs: vec![],
        };
        r
    }
}

/// LSTM, GRU and RNN: forward, reverse and bidirectional, with and without bias and
/// initial states (the batch-1 streaming case), peepholes, clip, input_forget, per-entry
/// sequence lengths, GRU's `linear_before_reset`, and every activation RNN takes (with
/// and without `activation_alpha`/`activation_beta`, one per direction). Weights are
/// scaled by 1/sqrt(hidden). Batch-first models (`layout` 1) are not IR nodes: the
/// importer transposes around a layout-0 node, so the kit has no layout-1 case.
fn recurrent(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let lstm = op == OpKind::LSTM;
    let base = Rnn::new;
    let lbr = || vec![("linear_before_reset", Attr::Int(1))];
    #[rustfmt::skip]
    let mut rows = vec![
        base("forward", "forward"),
        Rnn { bias: false, ..base("forward_no_bias", "forward") },
        Rnn { initial: true, ..base("reverse_initial_states", "reverse") },
        Rnn { initial: true, seq: 4, ..base("bidirectional_initial_states_batch1", "bidirectional") },
        Rnn { batch: 3, lens: Some(&[3, 1, 2]), initial: true, ..base("bidirectional_batch3_lens", "bidirectional") },
        Rnn { seq: 1, hidden: 1, input: 1, ..base("seq1_hidden1", "forward") },
        Rnn { attrs: vec![("clip", Attr::Float(0.5))], ..base("clip0.5", "forward") },
    ];
    let acts = |names: &str, alpha: &[f32], beta: &[f32]| {
        let mut a = vec![("activations", s(names))];
        if !alpha.is_empty() {
            a.push(("activation_alpha", Attr::Floats(alpha.to_vec())));
        }
        if !beta.is_empty() {
            a.push(("activation_beta", Attr::Floats(beta.to_vec())));
        }
        a
    };
    #[rustfmt::skip]
    rows.extend(match op {
        OpKind::LSTM => vec![
            Rnn { peephole: true, initial: true, ..base("peepholes", "forward") },
            Rnn { attrs: vec![("input_forget", Attr::Int(1))], ..base("input_forget", "bidirectional") },
        ],
        OpKind::RNN => vec![
            Rnn { attrs: acts("Relu", &[], &[]), ..base("relu", "forward") },
            Rnn { attrs: acts("Sigmoid,Affine", &[0.7], &[0.2]), ..base("sigmoid_affine", "bidirectional") },
            Rnn { attrs: acts("LeakyRelu,ThresholdedRelu", &[0.1, 0.2], &[]), ..base("leakyrelu_thresholdedrelu", "bidirectional") },
            Rnn { attrs: acts("ScaledTanh,HardSigmoid", &[1.2, 0.3], &[0.8, 0.4]), ..base("scaledtanh_hardsigmoid", "bidirectional") },
            Rnn { attrs: acts("Elu,Softsign", &[0.9], &[]), initial: true, ..base("elu_softsign", "bidirectional") },
            Rnn { attrs: acts("Softplus", &[], &[]), batch: 3, lens: Some(&[2, 3, 1]), ..base("softplus_lens", "reverse") },
            Rnn { attrs: acts("HardSigmoid", &[], &[]), ..base("hardsigmoid_defaults", "forward") },
            Rnn { attrs: vec![("clip", Attr::Float(0.5)), ("activations", s("Relu,Tanh"))], bias: false, ..base("clip_relu_no_bias", "bidirectional") },
        ],
        _ => vec![
            Rnn { initial: true, attrs: lbr(), ..base("linear_before_reset", "forward") },
            Rnn { attrs: lbr(), ..base("linear_before_reset_bidirectional", "bidirectional") },
        ],
    });
    let gates = match op {
        OpKind::LSTM => 4,
        OpKind::GRU => 3,
        _ => 1,
    };
    for r in rows {
        let mut rng = Rng::for_id(&case_id(op, DType::F32, r.desc));
        let mut t =
            |shape: &[usize], lo: f64, hi: f64| rng.tensor(DType::F32, shape, &Fill::Range(lo, hi));
        let dirs = if r.direction == "bidirectional" { 2 } else { 1 };
        let (sc, gh) = (1.0 / (r.hidden as f64).sqrt(), gates * r.hidden);
        let state = [dirs, r.batch, r.hidden];
        let mut operands = vec![
            (t(&[r.seq, r.batch, r.input], -2.0, 2.0), false),
            (t(&[dirs, gh, r.input], -sc, sc), true),
            (t(&[dirs, gh, r.hidden], -sc, sc), true),
        ];
        // An optional operand before a given one is a 0-element stand-in.
        let later = r.initial || r.peephole;
        if r.bias || later || r.lens.is_some() {
            let b = match r.bias {
                true => t(&[dirs, 2 * gh], -sc, sc),
                false => Tensor::zeros(DType::F32, &[0]),
            };
            operands.push((b, true));
        }
        let lens: Vec<f64> = r.lens.unwrap_or(&[]).iter().map(|&v| v as f64).collect();
        if r.lens.is_some() || later {
            operands.push((tensor(DType::I32, &[lens.len()], &lens), false));
        }
        let n_states = if lstm { 2 } else { 1 };
        for _ in 0..n_states {
            match (r.initial, r.peephole) {
                (true, _) => operands.push((t(&state, -1.0, 1.0), false)),
                (false, true) => operands.push((Tensor::zeros(DType::F32, &[0]), false)),
                _ => {}
            }
        }
        if r.peephole {
            operands.push((t(&[dirs, 3 * r.hidden], -0.5, 0.5), true));
        }
        let mut attrs = vec![
            ("hidden_size", Attr::Int(r.hidden as i64)),
            ("direction", s(r.direction)),
        ];
        attrs.extend(r.attrs);
        let n_out = if lstm { 3 } else { 2 };
        out.push(multi_output(
            op,
            DType::F32,
            r.desc,
            operands,
            &attrs,
            n_out,
        )?);
    }
    Ok(())
}

/// QuantizeLinear (f32, f16 and i32 inputs into u8 and i8, per tensor and per axis,
/// halfway values, saturation, infinities; not NaN, which ONNX leaves undefined) and
/// DequantizeLinear (u8, i8, i32, per tensor and per axis). Case dtypes name the float
/// side: the input of Quantize, the output of Dequantize.
fn quantize(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let (f32, u8, i8, i32) = (DType::F32, DType::U8, DType::I8, DType::I32);
    // Multiples of a quarter step hit every rounding tie; the large ones saturate.
    let ties = Fill::Cycle(vec![
        -2.5,
        -1.5,
        -0.5,
        0.5,
        1.5,
        2.5,
        0.25,
        -0.75,
        100.0,
        -100.0,
        1e9,
        31.75,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]);
    // (desc, x dtype, x shape, scale shape, zero point dtype, axis)
    #[rustfmt::skip]
    let rows: &[QuantizeRow] = match op {
        OpKind::QuantizeLinear => &[
            ("to_u8_per_tensor", f32, &[3, 5], &[], Some(u8), 1),
            ("to_i8_per_tensor", f32, &[15], &[1], Some(i8), 1),
            ("no_zero_point", f32, &[2, 15], &[], None, 1),
            ("to_i8_per_axis1", f32, &[2, 3, 5], &[3], Some(i8), 1),
            ("to_u8_per_axis_neg1", f32, &[3, 5], &[5], Some(u8), -1),
            ("from_f16_to_u8", DType::F16, &[15], &[], Some(u8), 1),
            ("from_i32_to_i8", i32, &[4, 5], &[], Some(i8), 1),
        ],
        _ => &[
            ("u8_per_tensor", u8, &[3, 5], &[], Some(u8), 1),
            ("i8_per_tensor", i8, &[20], &[1], Some(i8), 1),
            ("u8_no_zero_point", u8, &[2, 7], &[], None, 1),
            ("i8_per_axis0", i8, &[4, 6], &[4], Some(i8), 0),
            ("u8_per_axis1", u8, &[2, 3, 4], &[3], Some(u8), 1),
            ("i32_no_zero_point", i32, &[9], &[], None, 1),
        ],
    };
    for &(desc, xd, shape, scale_shape, zp, axis) in rows {
        let quantize = op == OpKind::QuantizeLinear;
        let mut m = Maker::new(op, if quantize { xd } else { f32 }, desc);
        let x_fill = match (quantize, xd) {
            (true, DType::I32) => Fill::Range(-400.0, 400.0),
            (true, _) => ties.clone(),
            _ => fill(xd),
        };
        let x = m.rng.tensor(xd, shape, &x_fill);
        // Powers of two: x / scale is exact in any precision, so ties stay ties.
        let n: usize = scale_shape.iter().product();
        let scales: Vec<f64> = (0..n).map(|i| [0.5, 0.25, 2.0, 0.125][i % 4]).collect();
        m.operand(x, false)
            .operand(tensor(f32, scale_shape, &scales), true);
        if let Some(zd) = zp {
            let range = match zd {
                DType::U8 => Fill::Range(100.0, 156.0),
                _ => Fill::Range(-20.0, 20.0),
            };
            let z = m.rng.tensor(zd, scale_shape, &range);
            m.operand(z, true);
        }
        out.push(m.build(&[("axis", Attr::Int(axis))])?);
    }
    Ok(())
}
