//! Graph building shared by the tests: QDQ graphs with random int8 data. It names
//! neither the plugin crate nor the host, so that each test binary links only what it
//! uses (two plugin rlibs in one binary would clash on the entry symbol).
#![allow(dead_code)]

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorData, TensorId};
use baton_delegate_api::testing::Rng;
use baton_delegate_api::Tensor;

/// A QDQ graph under construction, with its int8 inputs.
pub struct Qdq {
    pub b: GraphBuilder,
    pub inputs: Vec<Tensor>,
    pub rng: Rng,
    names: usize,
}

impl Qdq {
    pub fn new(name: &str, seed: u64) -> Qdq {
        Qdq {
            b: GraphBuilder::new(name),
            inputs: Vec::new(),
            rng: Rng::new(seed),
            names: 0,
        }
    }

    fn fresh(&mut self, base: &str) -> String {
        self.names += 1;
        format!("{base}_{}", self.names)
    }

    fn scalar_f32(&mut self, name: &str, v: f32) -> TensorId {
        self.b
            .constant(name, DType::F32, &[], TensorData::from_slice(&[v]))
    }

    fn scalar_i8(&mut self, name: &str, v: i8) -> TensorId {
        self.b
            .constant(name, DType::I8, &[], TensorData::from_slice(&[v]))
    }

    /// An int8 graph input with random values, and its dequantized f32 tensor.
    pub fn input(&mut self, name: &str, shape: &[usize], scale: f32, zp: i8) -> TensorId {
        let x = self.b.input_fixed(name, DType::I8, shape);
        let n: usize = shape.iter().product();
        let vals = self.rng.i8s(n);
        self.inputs.push(Tensor::from_bytes(
            DType::I8,
            shape,
            bytemuck::cast_slice(&vals),
        ));
        self.dequantize(x, scale, zp)
    }

    /// `DequantizeLinear(x)` with one scale and zero point.
    pub fn dequantize(&mut self, x: TensorId, scale: f32, zp: i8) -> TensorId {
        let (sn, zn) = (self.fresh("dq_scale"), self.fresh("dq_zp"));
        let s = self.scalar_f32(&sn, scale);
        let z = self.scalar_i8(&zn, zp);
        self.b
            .node(OpKind::DequantizeLinear, &[x, s, z], &[])
            .expect("dq")
    }

    /// `QuantizeLinear(y)` to int8.
    pub fn quantize(&mut self, y: TensorId, scale: f32, zp: i8) -> TensorId {
        let (sn, zn) = (self.fresh("q_scale"), self.fresh("q_zp"));
        let s = self.scalar_f32(&sn, scale);
        let z = self.scalar_i8(&zn, zp);
        self.b
            .node(OpKind::QuantizeLinear, &[y, s, z], &[])
            .expect("q")
    }

    /// Random int8 weights of `shape`, per-channel along `axis`, dequantized. Returns the
    /// f32 tensor and the scales.
    pub fn weights(&mut self, name: &str, shape: &[usize], axis: usize) -> (TensorId, Vec<f32>) {
        let n: usize = shape.iter().product();
        let vals: Vec<i8> = (0..n).map(|_| self.rng.int(-127, 127) as i8).collect();
        let w = self
            .b
            .constant(name, DType::I8, shape, TensorData::from_slice(&vals));
        let ch = shape[axis];
        let scales: Vec<f32> = (0..ch).map(|i| 0.002 + 0.0007 * (i % 5) as f32).collect();
        let s = self.b.constant(
            &format!("{name}_scale"),
            DType::F32,
            &[ch],
            TensorData::from_slice(&scales),
        );
        let z = self.b.constant(
            &format!("{name}_zp"),
            DType::I8,
            &[ch],
            TensorData::from_slice(&vec![0i8; ch]),
        );
        let dq = self
            .b
            .node(
                OpKind::DequantizeLinear,
                &[w, s, z],
                &[("axis", Attr::Int(axis as i64))],
            )
            .expect("dq weights");
        (dq, scales)
    }

    /// A random int32 bias with scales `x_scale * w_scales`, dequantized.
    pub fn bias(&mut self, name: &str, x_scale: f32, w_scales: &[f32]) -> TensorId {
        let n = w_scales.len();
        let vals: Vec<i32> = (0..n).map(|_| self.rng.int(-3000, 3000) as i32).collect();
        let b = self
            .b
            .constant(name, DType::I32, &[n], TensorData::from_slice(&vals));
        let scales: Vec<f32> = w_scales.iter().map(|w| w * x_scale).collect();
        let s = self.b.constant(
            &format!("{name}_scale"),
            DType::F32,
            &[n],
            TensorData::from_slice(&scales),
        );
        let z = self.b.constant(
            &format!("{name}_zp"),
            DType::I32,
            &[n],
            TensorData::from_slice(&vec![0i32; n]),
        );
        self.b
            .node(
                OpKind::DequantizeLinear,
                &[b, s, z],
                &[("axis", Attr::Int(0))],
            )
            .expect("dq bias")
    }

    pub fn op(&mut self, op: OpKind, inputs: &[TensorId], attrs: &[(&str, Attr)]) -> TensorId {
        self.b.node(op, inputs, attrs).expect("node")
    }

    pub fn output(mut self, t: TensorId) -> (Graph, Vec<Tensor>) {
        self.b.output(t);
        (self.b.finish().expect("valid graph"), self.inputs)
    }
}

/// A small quantized conv net on a 1×3×32×32 image: Conv 3×3 (8) + Relu, depthwise 3×3
/// stride 2 + Relu, Conv 1×1 (16) + Relu, GlobalAveragePool, Flatten, FC (10), Softmax:
/// seven NPU commands.
pub fn small_net() -> (Graph, Vec<Tensor>) {
    let mut q = Qdq::new("small_net", 21);
    let pad1 = || ("pads", Attr::Ints(vec![1, 1, 1, 1]));
    let x = q.input("image", &[1, 3, 32, 32], 0.02, 0);
    let (w, ws) = q.weights("w1", &[8, 3, 3, 3], 0);
    let b = q.bias("b1", 0.02, &ws);
    let y = q.op(OpKind::Conv, &[x, w, b], &[pad1()]);
    let y = q.op(OpKind::Relu, &[y], &[]);
    let y = q.quantize(y, 0.03, -128);
    let x = q.dequantize(y, 0.03, -128);
    let (w, ws) = q.weights("w2", &[8, 1, 3, 3], 0);
    let b = q.bias("b2", 0.03, &ws);
    let y = q.op(
        OpKind::Conv,
        &[x, w, b],
        &[
            pad1(),
            ("group", Attr::Int(8)),
            ("strides", Attr::Ints(vec![2, 2])),
        ],
    );
    let y = q.op(OpKind::Relu, &[y], &[]);
    let y = q.quantize(y, 0.02, -128);
    let x = q.dequantize(y, 0.02, -128);
    let (w, ws) = q.weights("w3", &[16, 8, 1, 1], 0);
    let b = q.bias("b3", 0.02, &ws);
    let y = q.op(OpKind::Conv, &[x, w, b], &[]);
    let y = q.op(OpKind::Relu, &[y], &[]);
    let y = q.quantize(y, 0.01, -128);
    let x = q.dequantize(y, 0.01, -128);
    let y = q.op(OpKind::GlobalAveragePool, &[x], &[]);
    let y = q.quantize(y, 0.005, -128);
    let x = q.dequantize(y, 0.005, -128);
    let y = q.op(OpKind::Flatten, &[x], &[]);
    let y = q.quantize(y, 0.005, -128);
    let x = q.dequantize(y, 0.005, -128);
    let (w, ws) = q.weights("w4", &[16, 10], 1);
    let mm = q.op(OpKind::MatMul, &[x, w], &[]);
    let b = q.bias("b4", 0.005, &ws);
    let y = q.op(OpKind::Add, &[mm, b], &[]);
    let y = q.quantize(y, 0.002, 0);
    let x = q.dequantize(y, 0.002, 0);
    let y = q.op(OpKind::Softmax, &[x], &[]);
    let out = q.quantize(y, 1.0 / 256.0, -128);
    q.output(out)
}
