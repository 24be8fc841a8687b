//! The bundled example model, built with the IR builder so its construction is readable
//! and reproducible: `cargo run -p baton-runtime-host --example make_tinynet` writes
//! `examples/tinynet/` and a test checks the committed files match this code.

use baton_delegate_api::{Attr, DType, Graph, GraphBuilder, OpKind, Tensor, TensorData};

/// A small image classifier in the MobileNet style: conv, depthwise conv, pointwise conv,
/// pooling and a classifier head, over a 1x3x32x32 image.
pub fn tinynet() -> Graph {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut b = GraphBuilder::new("tinynet");
    let x = b.input_fixed("image", DType::F32, &[1, 3, 32, 32]);
    let w1 = b.constant_f32("stem.weight", &[8, 3, 3, 3], &rng.weights(8 * 27, 27));
    let b1 = b.constant_f32("stem.bias", &[8], &rng.weights(8, 4));
    let c1 = conv(&mut b, "stem", &[x, w1, b1], 1, &[1, 1, 1, 1], 2);
    let r1 = b
        .named_node("stem.relu", OpKind::Relu, &[c1], &[])
        .expect("valid");
    let wd = b.constant_f32("dw.weight", &[8, 1, 3, 3], &rng.weights(72, 9));
    let cd = conv(&mut b, "dw", &[r1, wd], 8, &[1, 1, 1, 1], 1);
    let clip = b
        .named_node(
            "dw.relu6",
            OpKind::Clip,
            &[cd],
            &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
        )
        .expect("valid");
    let wp = b.constant_f32("pw.weight", &[16, 8, 1, 1], &rng.weights(128, 8));
    let bp = b.constant_f32("pw.bias", &[16], &rng.weights(16, 4));
    let cp = conv(&mut b, "pw", &[clip, wp, bp], 1, &[0, 0, 0, 0], 1);
    let rp = b
        .named_node("pw.relu", OpKind::Relu, &[cp], &[])
        .expect("valid");
    let skip = b
        .named_node(
            "pool",
            OpKind::MaxPool,
            &[rp],
            &[
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
            ],
        )
        .expect("valid");
    let gap = b
        .named_node("gap", OpKind::GlobalAveragePool, &[skip], &[])
        .expect("valid");
    let flat = b
        .named_node("flatten", OpKind::Flatten, &[gap], &[])
        .expect("valid");
    let wf = b.constant_f32("fc.weight", &[10, 16], &rng.weights(160, 16));
    let bf = b.constant_f32("fc.bias", &[10], &rng.weights(10, 4));
    let fc = b
        .named_node(
            "fc",
            OpKind::Gemm,
            &[flat, wf, bf],
            &[("transB", Attr::Int(1))],
        )
        .expect("valid");
    let probs = b
        .named_node("softmax", OpKind::Softmax, &[fc], &[])
        .expect("valid");
    b.rename(probs, "probabilities");
    b.output(probs);
    b.finish().expect("tinynet is well formed")
}

/// The example input: a smooth synthetic image (deterministic).
pub fn tinynet_input() -> Tensor {
    let mut v = Vec::with_capacity(3 * 32 * 32);
    for c in 0..3 {
        for y in 0..32 {
            for x in 0..32 {
                let (fx, fy) = (x as f32 / 31.0, y as f32 / 31.0);
                v.push(((fx * 3.0 + c as f32).sin() * (fy * 2.0).cos() + 0.1 * c as f32) * 0.8);
            }
        }
    }
    Tensor::from_f32(&[1, 3, 32, 32], &v)
}

fn conv(
    b: &mut GraphBuilder,
    name: &str,
    inputs: &[usize],
    group: i64,
    pads: &[i64],
    stride: i64,
) -> usize {
    b.named_node(
        name,
        OpKind::Conv,
        inputs,
        &[
            ("group", Attr::Int(group)),
            ("pads", Attr::Ints(pads.to_vec())),
            ("strides", Attr::Ints(vec![stride, stride])),
        ],
    )
    .expect("valid")
}

/// A tiny deterministic generator for example weights (no `rand` dependency for this).
struct XorShift(u64);

impl XorShift {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `n` weights scaled like He initialisation for `fan_in` inputs.
    fn weights(&mut self, n: usize, fan_in: usize) -> Vec<f32> {
        let scale = (2.0 / fan_in as f32).sqrt();
        (0..n).map(|_| self.next_f32() * scale).collect()
    }
}

/// A model for one graph over three kinds of backend: a statically quantized (QDQ, int8)
/// convolutional front — for an integer NPU — and a float head — for a GPU or the CPU.
///
/// `image` f32 `[1,3,32,32]` is quantized (per tensor), then three quantized blocks run
/// (conv 3x3 stride 2 + Relu, depthwise 3x3 + Relu, pointwise 1x1): each is
/// `DequantizeLinear → Conv → [Relu] → QuantizeLinear` with int8 weights quantized per
/// output channel (symmetric), int32 biases at scale `x_scale * w_scale`, as ONNX
/// Runtime's QDQ format lays them out. The last activation is dequantized and the float
/// head runs: GlobalAveragePool, Flatten, MatMul + Add, LayerNormalization, a GELU written
/// out with Erf, MatMul, Softmax → `probabilities` `[1,10]`. The last int8 activation is a
/// second output, `features_q` `[1,32,16,16]`, so that the integer part can be checked in
/// quantization steps.
///
/// Activation scales come from a real calibration: the float model with the same weights
/// is run on [`mixed_input`] and each quantized tensor's scale is its largest magnitude
/// over 127 (MinMax, symmetric, zero point 0).
pub fn mixed() -> Graph {
    let weights = MixedWeights::new();
    let calib = build_mixed(&weights, None);
    let outs = baton_reference::run_graph(&calib, &[mixed_input()])
        .expect("the float calibration model runs on the reference");
    let scales: Vec<f32> = outs
        .iter()
        .map(|t| t.f32s().iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6) / 127.0)
        .collect();
    build_mixed(&weights, Some(&scales))
}

/// A model with control flow: an If on input `c` (bool scalar) over `x` (f32 [2, 3]) whose
/// branches hold weights of their own: then `relu(x) * w`, else `x + w`.
pub fn branchy() -> Graph {
    let branch = |op: OpKind, relu: bool| {
        let mut g = GraphBuilder::new("branch");
        let x = g.input_fixed("x", DType::F32, &[2, 3]);
        let w = g.constant_f32("w", &[2, 3], &[1.5, -2.0, 0.5, 3.0, -1.0, 2.5]);
        let x = if relu {
            g.node(OpKind::Relu, &[x], &[]).expect("valid")
        } else {
            x
        };
        let y = g.node(op, &[x, w], &[]).expect("valid");
        g.output(y);
        Attr::Graph(Box::new(g.finish().expect("valid")))
    };
    let mut b = GraphBuilder::new("branchy");
    let c = b.input_fixed("c", DType::Bool, &[]);
    let x = b.input_fixed("x", DType::F32, &[2, 3]);
    let y = b
        .named_node(
            "pick",
            OpKind::If,
            &[c, x],
            &[
                ("then_branch", branch(OpKind::Mul, true)),
                ("else_branch", branch(OpKind::Add, false)),
            ],
        )
        .expect("valid");
    b.output(y);
    b.finish().expect("valid")
}

/// The input of [`mixed`]: the example image.
pub fn mixed_input() -> Tensor {
    tinynet_input()
}

/// One quantized conv block: name, weight shape, weights, bias, group, pad, stride.
type ConvBlock = (&'static str, Vec<usize>, Vec<f32>, Vec<f32>, i64, i64, i64);

struct MixedWeights {
    convs: Vec<ConvBlock>,
    fc1: (Vec<f32>, Vec<f32>),
    fc2: Vec<f32>,
    ln: (Vec<f32>, Vec<f32>),
}

impl MixedWeights {
    fn new() -> MixedWeights {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        // (name, weight shape, weights, bias, group, pad, stride)
        let convs = vec![
            (
                "q1.conv",
                vec![16, 3, 3, 3],
                rng.weights(16 * 27, 27),
                rng.weights(16, 8),
                1,
                1,
                2,
            ),
            (
                "q2.dw",
                vec![16, 1, 3, 3],
                rng.weights(16 * 9, 9),
                rng.weights(16, 8),
                16,
                1,
                1,
            ),
            (
                "q3.pw",
                vec![32, 16, 1, 1],
                rng.weights(32 * 16, 16),
                rng.weights(32, 8),
                1,
                0,
                1,
            ),
        ];
        MixedWeights {
            convs,
            fc1: (rng.weights(32 * 64, 32), rng.weights(64, 16)),
            fc2: rng.weights(64 * 10, 64),
            ln: (
                (0..64).map(|i| 1.0 + 0.01 * i as f32).collect(),
                rng.weights(64, 64),
            ),
        }
    }
}

/// Builds [`mixed`]: with `scales`, the QDQ model (one scale per quantized activation:
/// the input, then each block's output); without, the float model whose outputs are
/// exactly the tensors those scales are calibrated on.
fn build_mixed(w: &MixedWeights, scales: Option<&[f32]>) -> Graph {
    let mut b = GraphBuilder::new(if scales.is_some() {
        "mixed"
    } else {
        "mixed_calibration"
    });
    let image = b.input_fixed("image", DType::F32, &[1, 3, 32, 32]);
    let mut calib_outputs = Vec::new();
    let mut last_q = None;
    let mut act = |b: &mut GraphBuilder, t: usize, i: usize, name: &str| -> usize {
        match scales {
            None => {
                calib_outputs.push(t);
                t
            }
            Some(s) => {
                let (q, dq) = qdq(b, t, s[i], name);
                last_q = Some(q);
                dq
            }
        }
    };
    let mut x = act(&mut b, image, 0, "image");
    let mut x_scale = scales.map(|s| s[0]);
    for (i, (name, shape, wv, bv, group, pad, stride)) in w.convs.iter().enumerate() {
        let oc = shape[0];
        let (wt, bt) = match x_scale {
            None => (
                b.constant_f32(&format!("{name}.weight"), shape, wv),
                b.constant_f32(&format!("{name}.bias"), &[oc], bv),
            ),
            Some(sx) => quantized_weights(&mut b, name, shape, wv, bv, sx),
        };
        let c = conv(&mut b, name, &[x, wt, bt], *group, &[*pad; 4], *stride);
        let y = if i < 2 {
            b.named_node(&format!("{name}.relu"), OpKind::Relu, &[c], &[])
                .expect("valid")
        } else {
            c
        };
        x = act(&mut b, y, i + 1, name);
        x_scale = scales.map(|s| s[i + 1]);
    }
    let features = last_q;
    if scales.is_none() {
        for t in calib_outputs {
            b.output(t);
        }
        return b.finish().expect("the calibration model is well formed");
    }
    let node =
        |b: &mut GraphBuilder, name: &str, op: OpKind, ins: &[usize], attrs: &[(&str, Attr)]| {
            b.named_node(name, op, ins, attrs).expect("valid")
        };
    let gap = node(&mut b, "head.gap", OpKind::GlobalAveragePool, &[x], &[]);
    let flat = node(&mut b, "head.flatten", OpKind::Flatten, &[gap], &[]);
    let w1 = b.constant_f32("head.fc1.weight", &[32, 64], &w.fc1.0);
    let b1 = b.constant_f32("head.fc1.bias", &[64], &w.fc1.1);
    let m1 = node(&mut b, "head.fc1", OpKind::MatMul, &[flat, w1], &[]);
    let a1 = node(&mut b, "head.fc1.add", OpKind::Add, &[m1, b1], &[]);
    let g = b.constant_f32("head.ln.scale", &[64], &w.ln.0);
    let beta = b.constant_f32("head.ln.bias", &[64], &w.ln.1);
    let ln = node(
        &mut b,
        "head.ln",
        OpKind::LayerNormalization,
        &[a1, g, beta],
        &[("axis", Attr::Int(-1))],
    );
    // GELU(x) = 0.5 * x * (1 + erf(x / sqrt 2)), as exporters write it.
    let inv_sqrt2 = b.constant_f32(
        "head.gelu.inv_sqrt2",
        &[],
        &[std::f32::consts::FRAC_1_SQRT_2],
    );
    let one = b.constant_f32("head.gelu.one", &[], &[1.0]);
    let half = b.constant_f32("head.gelu.half", &[], &[0.5]);
    let s = node(
        &mut b,
        "head.gelu.scale",
        OpKind::Mul,
        &[ln, inv_sqrt2],
        &[],
    );
    let e = node(&mut b, "head.gelu.erf", OpKind::Erf, &[s], &[]);
    let p = node(&mut b, "head.gelu.plus1", OpKind::Add, &[e, one], &[]);
    let xm = node(&mut b, "head.gelu.mul", OpKind::Mul, &[ln, p], &[]);
    let gl = node(&mut b, "head.gelu.half", OpKind::Mul, &[xm, half], &[]);
    let w2 = b.constant_f32("head.fc2.weight", &[64, 10], &w.fc2);
    let m2 = node(&mut b, "head.fc2", OpKind::MatMul, &[gl, w2], &[]);
    let probs = node(&mut b, "head.softmax", OpKind::Softmax, &[m2], &[]);
    b.rename(probs, "probabilities");
    b.output(probs);
    let features = features.expect("three quantized blocks");
    b.rename(features, "features_q");
    b.output(features);
    b.finish().expect("the mixed model is well formed")
}

/// `QuantizeLinear → DequantizeLinear` of `t` at `scale` (int8, zero point 0): the
/// quantized tensor between them is what an integer backend reads and writes.
fn qdq(b: &mut GraphBuilder, t: usize, scale: f32, name: &str) -> (usize, usize) {
    let s = b.constant_f32(&format!("{name}.q.scale"), &[], &[scale]);
    let z = b.constant(
        &format!("{name}.q.zero_point"),
        DType::I8,
        &[],
        TensorData::from_slice(&[0i8]),
    );
    let q = b
        .named_node(
            &format!("{name}.quantize"),
            OpKind::QuantizeLinear,
            &[t, s, z],
            &[],
        )
        .expect("valid");
    let dq = b
        .named_node(
            &format!("{name}.dequantize"),
            OpKind::DequantizeLinear,
            &[q, s, z],
            &[],
        )
        .expect("valid");
    (q, dq)
}

/// Int8 weights per output channel (symmetric) and an int32 bias at `x_scale * w_scale`,
/// each behind a `DequantizeLinear` along axis 0. Returns the dequantized (weight, bias).
fn quantized_weights(
    b: &mut GraphBuilder,
    name: &str,
    shape: &[usize],
    w: &[f32],
    bias: &[f32],
    x_scale: f32,
) -> (usize, usize) {
    let oc = shape[0];
    let per = w.len() / oc;
    let w_scales: Vec<f32> = w
        .chunks(per)
        .map(|c| c.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-8) / 127.0)
        .collect();
    let wq: Vec<i8> = w
        .iter()
        .enumerate()
        .map(|(i, v)| (v / w_scales[i / per]).round().clamp(-127.0, 127.0) as i8)
        .collect();
    let b_scales: Vec<f32> = w_scales.iter().map(|s| s * x_scale).collect();
    let bq: Vec<i32> = bias
        .iter()
        .zip(&b_scales)
        .map(|(v, s)| (v / s).round() as i32)
        .collect();
    let wt = b.constant(
        &format!("{name}.weight_q"),
        DType::I8,
        shape,
        TensorData::from_slice(&wq),
    );
    let ws = b.constant_f32(&format!("{name}.weight_scale"), &[oc], &w_scales);
    let wz = b.constant(
        &format!("{name}.weight_zero_point"),
        DType::I8,
        &[oc],
        TensorData::from_slice(&vec![0i8; oc]),
    );
    let axis0 = [("axis", Attr::Int(0))];
    let wd = b
        .named_node(
            &format!("{name}.weight_dq"),
            OpKind::DequantizeLinear,
            &[wt, ws, wz],
            &axis0,
        )
        .expect("valid");
    let bt = b.constant(
        &format!("{name}.bias_q"),
        DType::I32,
        &[oc],
        TensorData::from_slice(&bq),
    );
    let bs = b.constant_f32(&format!("{name}.bias_scale"), &[oc], &b_scales);
    let bd = b
        .named_node(
            &format!("{name}.bias_dq"),
            OpKind::DequantizeLinear,
            &[bt, bs],
            &axis0,
        )
        .expect("valid");
    (wd, bd)
}
