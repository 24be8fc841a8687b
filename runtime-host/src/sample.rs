//! The bundled example model, built with the IR builder so its construction is readable
//! and reproducible: `cargo run -p baton-runtime-host --example make_tinynet` writes
//! `examples/tinynet/` and a test checks the committed files match this code.

use baton_delegate_api::{Attr, DType, Graph, GraphBuilder, OpKind, Tensor};

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
