//! Quantized (QDQ) cases: integer inputs → DequantizeLinear → op → [Relu/Clip] →
//! QuantizeLinear → integer outputs, the form ONNX Runtime's static quantization writes.
//!
//! A plugin with integer kernels recognises these groups and runs them in integer
//! arithmetic; the reference runs them as written (dequantize, f32 op, quantize). The two
//! may round differently at a half-step boundary, so outputs are judged by the
//! `[quantized]` rule of `int.toml`: within **one quantization step** (`ulp` = 1, the
//! integer difference of the stored values). A plugin that runs the graph in f32 with
//! plain Q/DQ kernels matches exactly.
//!
//! Every case has op [`QUANTIZED`] (select them with `--ops Quantized`) and id
//! `Quantized/<in dtype>/<Op>_<description>`, e.g. `Quantized/i8/Conv_3x3_s2_pad1`, so one
//! op's cases are found by id prefix. Conventions follow what ONNX Runtime emits:
//! - activations per tensor, with non-zero zero points (i8 and, in some cases, u8);
//! - constant i8 weights per output channel (`axis` 0 for Conv and transposed Gemm
//!   weights, 1 for MatMul) with zero points 0 (symmetric);
//! - i32 bias dequantized with `scale = x_scale * w_scale[c]`, zero point 0;
//! - Relu/Clip sit between the op and its QuantizeLinear (a plugin fuses them as a clamp);
//! - pools, Reshape and MaxPool keep the input's scale; Softmax's output scale is 1/256.
//!
//! Output scales are set from the expected spread of the op's result (±3 standard
//! deviations span the integer range), so a few outputs saturate, as in calibrated models.

use baton_delegate_api::{Attr, DType, OpKind, TensorId};

use super::gen::ints;
use super::Case;
use crate::error::Result;

mod model;
use model::QModel;
#[cfg(test)]
use {super::CaseBody, model::range};

/// The op label of every quantized case (`--ops Quantized`).
pub const QUANTIZED: &str = "Quantized";

/// Standard deviation of integers uniform in [-127, 127] (and, nearly, of an activation's
/// `q - zero_point` when `q` is uniform over its dtype).
const SIGMA_Q: f64 = 73.6;

/// Appends every quantized case.
pub fn all(out: &mut Vec<Case>) -> Result<()> {
    conv(out)?;
    linear(out)?;
    binary(out)?;
    pools(out)?;
    movement(out)?;
    softmax(out)?;
    out.push(small_net()?);
    Ok(())
}

/// A case's name (after the op) and the dtype of its integer inputs.
struct Spec {
    name: &'static str,
    dtype: DType,
}

/// (name, input dtype, A's shape, N, with bias, activation).
type MatMulCase = (&'static str, DType, &'static [usize], usize, bool, Act);
/// (op, name, dtype, A's shape, B's shape, activation).
type BinaryCase = (
    OpKind,
    &'static str,
    DType,
    &'static [usize],
    &'static [usize],
    Act,
);
/// (op, name, dtype, input shape, attributes).
type PoolCase = (
    OpKind,
    &'static str,
    DType,
    &'static [usize],
    Vec<(&'static str, Attr)>,
);

/// The activation between an op and its QuantizeLinear.
#[derive(Clone, Copy, PartialEq)]
enum Act {
    None,
    Relu,
    /// Clip(0, 6), ReLU6.
    Clip6,
}

fn conv(out: &mut Vec<Case>) -> Result<()> {
    type C = (
        &'static str,
        DType,
        [usize; 4],
        usize,
        [usize; 2],
        i64,
        i64,
        i64,
        Act,
    );
    // (name, dtype, input NCHW, out channels, kernel, stride, pad, group, activation)
    let cases: [C; 12] = [
        // 40 channels: two 16-channel blocks and a remainder in a channel-blocked kernel.
        (
            "depthwise_3x3_s2_40ch_u8",
            DType::U8,
            [1, 40, 7, 6],
            40,
            [3, 3],
            2,
            1,
            40,
            Act::Clip6,
        ),
        (
            "3x3_pad1",
            DType::I8,
            [1, 8, 9, 9],
            16,
            [3, 3],
            1,
            1,
            1,
            Act::None,
        ),
        (
            "3x3_s2_pad1",
            DType::I8,
            [1, 5, 11, 7],
            7,
            [3, 3],
            2,
            1,
            1,
            Act::None,
        ),
        (
            "3x3_nopad_batch2",
            DType::I8,
            [2, 3, 8, 6],
            5,
            [3, 3],
            1,
            0,
            1,
            Act::None,
        ),
        (
            "1x1",
            DType::I8,
            [1, 16, 6, 6],
            24,
            [1, 1],
            1,
            0,
            1,
            Act::None,
        ),
        (
            "1x1_s2_odd",
            DType::I8,
            [1, 13, 7, 9],
            11,
            [1, 1],
            2,
            0,
            1,
            Act::None,
        ),
        (
            "depthwise_3x3_pad1",
            DType::I8,
            [1, 12, 8, 8],
            12,
            [3, 3],
            1,
            1,
            12,
            Act::Relu,
        ),
        (
            "depthwise_3x3_s2",
            DType::I8,
            [1, 9, 9, 9],
            9,
            [3, 3],
            2,
            1,
            9,
            Act::None,
        ),
        (
            "group2_3x3",
            DType::I8,
            [1, 8, 7, 7],
            8,
            [3, 3],
            1,
            1,
            2,
            Act::None,
        ),
        (
            "3x3_relu",
            DType::I8,
            [1, 6, 8, 8],
            10,
            [3, 3],
            1,
            1,
            1,
            Act::Relu,
        ),
        (
            "1x1_clip6",
            DType::I8,
            [1, 10, 5, 5],
            12,
            [1, 1],
            1,
            0,
            1,
            Act::Clip6,
        ),
        (
            "3x3_u8",
            DType::U8,
            [1, 4, 7, 7],
            6,
            [3, 3],
            1,
            1,
            1,
            Act::None,
        ),
    ];
    for (name, dtype, x_shape, cout, k, stride, pad, group, act) in cases {
        let spec = Spec { name, dtype };
        let mut m = QModel::new(OpKind::Conv, &spec);
        let cin = x_shape[1];
        let (xs, xz) = m.act_params(dtype, 0.02);
        let x = m.qinput("x", dtype, &x_shape, xs, xz)?;
        let fan_in = cin / group as usize * k[0] * k[1];
        let w_shape = [cout, cin / group as usize, k[0], k[1]];
        let (w, w_scales) = m.weight("w", &w_shape, 0)?;
        let b = m.bias("b", xs, &w_scales)?;
        let attrs = [
            ("kernel_shape", ints(&[k[0] as i64, k[1] as i64])),
            ("strides", ints(&[stride, stride])),
            ("pads", ints(&[pad, pad, pad, pad])),
            ("group", Attr::Int(group)),
        ];
        let y = m.node(OpKind::Conv, &[x, w, b], &attrs)?;
        let ys = out_scale(xs, &w_scales, fan_in, act);
        let q = m.activation_then_q(y, act, dtype, ys)?;
        out.push(m.finish(&[q])?);
    }
    // A conv without bias.
    let spec = Spec {
        name: "3x3_no_bias",
        dtype: DType::I8,
    };
    let mut m = QModel::new(OpKind::Conv, &spec);
    let (xs, xz) = m.act_params(DType::I8, 0.03);
    let x = m.qinput("x", DType::I8, &[1, 4, 6, 6], xs, xz)?;
    let (w, w_scales) = m.weight("w", &[6, 4, 3, 3], 0)?;
    let attrs = [
        ("kernel_shape", ints(&[3, 3])),
        ("pads", ints(&[1, 1, 1, 1])),
    ];
    let y = m.node(OpKind::Conv, &[x, w], &attrs)?;
    let q = m.activation_then_q(
        y,
        Act::None,
        DType::I8,
        out_scale(xs, &w_scales, 36, Act::None),
    )?;
    out.push(m.finish(&[q])?);
    Ok(())
}

fn linear(out: &mut Vec<Case>) -> Result<()> {
    // MatMul with constant [K, N] weights, per channel along axis 1, then Add of a
    // dequantized i32 bias (ORT's MatMul form has no bias input).
    let mm: [MatMulCase; 5] = [
        ("5x37_37x19", DType::I8, &[5, 37], 19, false, Act::None),
        (
            "batched_2x3x33_33x10",
            DType::I8,
            &[2, 3, 33],
            10,
            false,
            Act::None,
        ),
        ("1x64_64x48_bias", DType::I8, &[1, 64], 48, true, Act::None),
        ("7x20_20x9_relu", DType::I8, &[7, 20], 9, false, Act::Relu),
        ("4x24_24x16_u8", DType::U8, &[4, 24], 16, false, Act::None),
    ];
    for (name, dtype, a_shape, n, bias, act) in mm {
        let spec = Spec { name, dtype };
        let mut m = QModel::new(OpKind::MatMul, &spec);
        let k = *a_shape.last().unwrap_or(&1);
        let (xs, xz) = m.act_params(dtype, 0.02);
        let x = m.qinput("x", dtype, a_shape, xs, xz)?;
        let (w, w_scales) = m.weight("w", &[k, n], 1)?;
        let mut y = m.node(OpKind::MatMul, &[x, w], &[])?;
        if bias {
            let b = m.bias("b", xs, &w_scales)?;
            y = m.node(OpKind::Add, &[y, b], &[])?;
        }
        let q = m.activation_then_q(y, act, dtype, out_scale(xs, &w_scales, k, act))?;
        out.push(m.finish(&[q])?);
    }
    // ONNX Runtime's form of a linear layer: MatMul -> Q -> DQ, then Add of a dequantized
    // constant i8 bias -> Q (a plugin may fold the Add into the MatMul's epilogue; the
    // output scale is the wider, so one step of the first Q is at most one step here).
    let spec = Spec {
        name: "2x3x32_32x24_qdq_bias_add",
        dtype: DType::I8,
    };
    let mut m = QModel::new(OpKind::MatMul, &spec);
    let (xs, xz) = m.act_params(DType::I8, 0.02);
    let x = m.qinput("x", DType::I8, &[2, 3, 32], xs, xz)?;
    let (w, w_scales) = m.weight("w", &[32, 24], 1)?;
    let y = m.node(OpKind::MatMul, &[x, w], &[])?;
    let ys = out_scale(xs, &w_scales, 32, Act::None);
    let yq = m.q(y, DType::I8, ys, 0)?;
    let yd = m.dq(yq, DType::I8, ys, 0)?;
    let (b, _) = m.weight("b", &[24], 0)?;
    let sum = m.node(OpKind::Add, &[yd, b], &[])?;
    let q = m.q(sum, DType::I8, ys * 1.25, 3)?;
    out.push(m.finish(&[q])?);
    // Gemm with transB = 1 ([N, K] weights, per channel along axis 0) and a bias input.
    let gemm: [(&str, usize, usize, usize, bool, Act); 3] = [
        ("7x40_24x40t", 7, 40, 24, true, Act::None),
        ("3x17_5x17t_no_bias", 3, 17, 5, false, Act::None),
        ("2x64_32x64t_relu", 2, 64, 32, true, Act::Relu),
    ];
    for (name, rows, k, n, bias, act) in gemm {
        let spec = Spec {
            name,
            dtype: DType::I8,
        };
        let mut m = QModel::new(OpKind::Gemm, &spec);
        let (xs, xz) = m.act_params(DType::I8, 0.02);
        let x = m.qinput("x", DType::I8, &[rows, k], xs, xz)?;
        let (w, w_scales) = m.weight("w", &[n, k], 0)?;
        let mut ins = vec![x, w];
        if bias {
            ins.push(m.bias("b", xs, &w_scales)?);
        }
        let y = m.node(OpKind::Gemm, &ins, &[("transB", Attr::Int(1))])?;
        let q = m.activation_then_q(y, act, DType::I8, out_scale(xs, &w_scales, k, act))?;
        out.push(m.finish(&[q])?);
    }
    Ok(())
}

fn binary(out: &mut Vec<Case>) -> Result<()> {
    let cases: [BinaryCase; 5] = [
        (
            OpKind::Add,
            "two_scales",
            DType::I8,
            &[1, 6, 5, 5],
            &[1, 6, 5, 5],
            Act::None,
        ),
        (
            OpKind::Add,
            "two_scales_relu",
            DType::I8,
            &[2, 3, 4, 7],
            &[2, 3, 4, 7],
            Act::Relu,
        ),
        (
            OpKind::Add,
            "bcast_channel",
            DType::I8,
            &[1, 4, 3, 3],
            &[1, 4, 1, 1],
            Act::None,
        ),
        (
            OpKind::Add,
            "two_scales_u8",
            DType::U8,
            &[3, 17],
            &[3, 17],
            Act::None,
        ),
        (
            OpKind::Mul,
            "two_scales",
            DType::I8,
            &[2, 5, 6],
            &[2, 5, 6],
            Act::None,
        ),
    ];
    for (op, name, dtype, sa, sb, act) in cases {
        let spec = Spec { name, dtype };
        let mut m = QModel::new(op, &spec);
        let (a_s, a_z) = m.act_params(dtype, 0.05);
        let (b_s, b_z) = m.act_params(dtype, 0.011);
        let a = m.qinput("a", dtype, sa, a_s, a_z)?;
        let b = m.qinput("b", dtype, sb, b_s, b_z)?;
        let y = m.node(op, &[a, b], &[])?;
        let spread = match op {
            OpKind::Mul => a_s * b_s * SIGMA_Q * SIGMA_Q,
            _ => (a_s * a_s + b_s * b_s).sqrt() * SIGMA_Q,
        };
        let ys = scale_for(spread, act);
        let q = m.activation_then_q(y, act, dtype, ys)?;
        out.push(m.finish(&[q])?);
    }
    Ok(())
}

fn pools(out: &mut Vec<Case>) -> Result<()> {
    let k3 = || ("kernel_shape", ints(&[3, 3]));
    let cases: [PoolCase; 5] = [
        (
            OpKind::MaxPool,
            "3x3_s2_pad1",
            DType::I8,
            &[1, 6, 9, 9],
            vec![
                k3(),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            OpKind::MaxPool,
            "2x2_s2_u8",
            DType::U8,
            &[1, 3, 8, 8],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        ),
        (
            OpKind::AveragePool,
            "3x3_pad1",
            DType::I8,
            &[1, 5, 7, 7],
            vec![k3(), ("pads", ints(&[1, 1, 1, 1]))],
        ),
        (
            OpKind::AveragePool,
            "2x2_s2",
            DType::I8,
            &[2, 3, 6, 6],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        ),
        (
            OpKind::GlobalAveragePool,
            "7x7",
            DType::I8,
            &[1, 16, 7, 7],
            vec![],
        ),
    ];
    for (op, name, dtype, shape, attrs) in cases {
        let spec = Spec { name, dtype };
        let mut m = QModel::new(op, &spec);
        let (xs, xz) = m.act_params(dtype, 0.04);
        let x = m.qinput("x", dtype, shape, xs, xz)?;
        let y = m.node(op, &[x], &attrs)?;
        // MaxPool keeps the input's parameters (ORT requires it); averages get their own.
        let (ys, yz) = match op {
            OpKind::MaxPool => (xs, xz),
            _ => {
                let (_, z) = m.act_params(dtype, 1.0);
                (xs * 0.6, z)
            }
        };
        let q = m.q(y, dtype, ys, yz)?;
        out.push(m.finish(&[q])?);
    }
    Ok(())
}

fn movement(out: &mut Vec<Case>) -> Result<()> {
    // Concat of two inputs with different parameters, requantized to a third.
    let spec = Spec {
        name: "axis1_two_scales",
        dtype: DType::I8,
    };
    let mut m = QModel::new(OpKind::Concat, &spec);
    let (a_s, a_z) = m.act_params(DType::I8, 0.03);
    let (b_s, b_z) = m.act_params(DType::I8, 0.05);
    let a = m.qinput("a", DType::I8, &[1, 3, 4, 4], a_s, a_z)?;
    let b = m.qinput("b", DType::I8, &[1, 5, 4, 4], b_s, b_z)?;
    let y = m.node(OpKind::Concat, &[a, b], &[("axis", Attr::Int(1))])?;
    // Both inputs' ranges fit, with a margin: the wider one's scale, a little larger.
    let q = m.q(y, DType::I8, a_s.max(b_s) * 1.1, 0)?;
    out.push(m.finish(&[q])?);

    // Concat with one shared scale and zero point (a pure copy of integers).
    let spec = Spec {
        name: "axis1_shared_scale",
        dtype: DType::I8,
    };
    let mut m = QModel::new(OpKind::Concat, &spec);
    let (s, z) = m.act_params(DType::I8, 0.03);
    let a = m.qinput("a", DType::I8, &[2, 2, 3], s, z)?;
    let b = m.qinput("b", DType::I8, &[2, 4, 3], s, z)?;
    let y = m.node(OpKind::Concat, &[a, b], &[("axis", Attr::Int(1))])?;
    let q = m.q(y, DType::I8, s, z)?;
    out.push(m.finish(&[q])?);

    // Reshape keeps the parameters.
    let spec = Spec {
        name: "to_2d",
        dtype: DType::I8,
    };
    let mut m = QModel::new(OpKind::Reshape, &spec);
    let (s, z) = m.act_params(DType::I8, 0.03);
    let x = m.qinput("x", DType::I8, &[1, 4, 3, 5], s, z)?;
    let shape = m.b.constant_i64("shape", &[2], &[4, 15]);
    let y = m.node(OpKind::Reshape, &[x, shape], &[])?;
    let q = m.q(y, DType::I8, s, z)?;
    out.push(m.finish(&[q])?);
    Ok(())
}

fn softmax(out: &mut Vec<Case>) -> Result<()> {
    for (name, dtype, zp) in [
        ("last_axis", DType::I8, -128),
        ("last_axis_u8", DType::U8, 0),
    ] {
        let spec = Spec { name, dtype };
        let mut m = QModel::new(OpKind::Softmax, &spec);
        let (s, z) = m.act_params(dtype, 0.05);
        let x = m.qinput("x", dtype, &[3, 10], s, z)?;
        let y = m.node(OpKind::Softmax, &[x], &[("axis", Attr::Int(-1))])?;
        let q = m.q(y, dtype, 1.0 / 256.0, zp)?;
        out.push(m.finish(&[q])?);
    }
    Ok(())
}

/// A small quantized CNN, every layer in QDQ form: conv 3x3/2 + ReLU, depthwise 3x3 +
/// ReLU6, pointwise 1x1, a residual Add, global average pool, Reshape, Gemm.
fn small_net() -> Result<Case> {
    let spec = Spec {
        name: "small_cnn",
        dtype: DType::I8,
    };
    let mut m = QModel::new_named("Model_small_cnn", &spec);
    let dt = DType::I8;
    let (xs, xz) = m.act_params(dt, 0.02);
    let x = m.qinput("x", dt, &[1, 3, 16, 16], xs, xz)?;

    let conv = |m: &mut QModel,
                x: TensorId,
                xs: f64,
                cin: usize,
                cout: usize,
                k: usize,
                stride: i64,
                group: usize,
                act: Act,
                tag: &str|
     -> Result<(TensorId, f64)> {
        let (w, w_scales) = m.weight(&format!("{tag}_w"), &[cout, cin / group, k, k], 0)?;
        let b = m.bias(&format!("{tag}_b"), xs, &w_scales)?;
        let pad = (k / 2) as i64;
        let attrs = [
            ("kernel_shape", ints(&[k as i64, k as i64])),
            ("strides", ints(&[stride, stride])),
            ("pads", ints(&[pad, pad, pad, pad])),
            ("group", Attr::Int(group as i64)),
        ];
        let y = m.node(OpKind::Conv, &[x, w, b], &attrs)?;
        let ys = out_scale(xs, &w_scales, cin / group * k * k, act);
        let q = m.activation_then_q(y, act, dt, ys)?;
        let zp = if act == Act::None { 0 } else { -128 };
        let d = m.dq(q, dt, ys, zp)?;
        Ok((d, ys))
    };
    let (h1, s1) = conv(&mut m, x, xs, 3, 8, 3, 2, 1, Act::Relu, "c1")?;
    let (h2, s2) = conv(&mut m, h1, s1, 8, 8, 3, 1, 8, Act::Clip6, "dw")?;
    let (h3, s3) = conv(&mut m, h2, s2, 8, 8, 1, 1, 1, Act::None, "pw")?;
    let (h4, s4) = conv(&mut m, h3, s3, 8, 8, 1, 1, 1, Act::None, "pw2")?;
    // Residual: h3 + h4 requantized, then pooled.
    let sum = m.node(OpKind::Add, &[h3, h4], &[])?;
    let ss = (s3 * s3 + s4 * s4).sqrt() * 127.0 / 3.0 / 1.5;
    let sq = m.q(sum, dt, ss, 0)?;
    let sd = m.dq(sq, dt, ss, 0)?;
    let p = m.node(OpKind::GlobalAveragePool, &[sd], &[])?;
    let ps = ss * 0.5;
    let pq = m.q(p, dt, ps, 0)?;
    let pd = m.dq(pq, dt, ps, 0)?;
    let shape = m.b.constant_i64("flat_shape", &[2], &[1, 8]);
    let flat = m.node(OpKind::Reshape, &[pd, shape], &[])?;
    let (w, w_scales) = m.weight("fc_w", &[5, 8], 0)?;
    let b = m.bias("fc_b", ps, &w_scales)?;
    let y = m.node(OpKind::Gemm, &[flat, w, b], &[("transB", Attr::Int(1))])?;
    let q = m.activation_then_q(y, Act::None, dt, out_scale(ps, &w_scales, 8, Act::None))?;
    m.finish(&[q])
}

/// The output scale that spans ±3 standard deviations of a linear op's result (ReLU
/// outputs: 0 to +3 deviations over the whole range), for activations and weights as the
/// cases draw them.
fn out_scale(x_scale: f64, w_scales: &[f64], fan_in: usize, act: Act) -> f64 {
    let w_mean = w_scales.iter().sum::<f64>() / w_scales.len().max(1) as f64;
    let spread = x_scale * w_mean * SIGMA_Q * SIGMA_Q * (fan_in as f64).sqrt();
    scale_for(spread, act)
}

fn scale_for(spread: f64, act: Act) -> f64 {
    match act {
        Act::None => 3.0 * spread / 127.0,
        Act::Relu | Act::Clip6 => 3.0 * spread / 255.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference runs every case, and its outputs use the integer range the way a
    /// calibrated model's do: many distinct values, few saturated ones. (A case whose
    /// output is nearly all one value would pass with a wrong kernel.)
    #[test]
    fn reference_outputs_spread_over_the_range() {
        let mut cases = Vec::new();
        all(&mut cases).unwrap();
        for c in &cases {
            let CaseBody::Model { graph, inputs } = &c.body else {
                panic!("{}: not a model case", c.id);
            };
            let outs = baton_reference::run_graph(graph, inputs)
                .unwrap_or_else(|e| panic!("{}: {e}", c.id));
            for o in outs {
                assert!(!o.dtype.is_float(), "{}: float output", c.id);
                let v = o.to_f64();
                let (lo, hi) = range(o.dtype);
                let sat = v
                    .iter()
                    .filter(|&&x| x == lo as f64 || x == hi as f64)
                    .count();
                let mut distinct: Vec<i64> = v.iter().map(|&x| x as i64).collect();
                distinct.sort_unstable();
                distinct.dedup();
                let min_distinct = 8.min(v.len() / 2);
                assert!(
                    distinct.len() >= min_distinct,
                    "{}: only {} distinct values",
                    c.id,
                    distinct.len()
                );
                // Relu cases saturate at the bottom by design (every negative value).
                let relu_bottom = v.iter().filter(|&&x| x == lo as f64).count();
                let top = sat - relu_bottom;
                assert!(
                    top * 10 <= v.len(),
                    "{}: {top} of {} outputs saturate at the top",
                    c.id,
                    v.len()
                );
            }
        }
    }
}
