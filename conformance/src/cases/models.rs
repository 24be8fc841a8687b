//! Model-level cases built with `GraphBuilder`: a small CNN, an MLP, a residual block, a
//! data-movement chain and an element-wise chain, and two CNN pieces spelled as
//! tf2onnx and Paddle2ONNX export them (BatchNormalization after Conv and
//! ConvTranspose, LeakyRelu as `Max(x, alpha x)`, `x * HardSigmoid(x)`, Pad, Resize, the
//! tanh GELU with `Pow(x, 3)`),
//! each with seeded weights and inputs.

use baton_delegate_api::{Attr, DType, GraphBuilder, IrError, OpKind, TensorId};

use super::gen::{ints, Draw, Fill, Rng};
use super::{Case, CaseBody};
use crate::error::{Error, Result};

/// Appends every model case.
pub fn all(out: &mut Vec<Case>) -> Result<()> {
    out.push(small_cnn("small_cnn", 1)?);
    out.push(small_cnn("small_cnn_batch2", 2)?);
    out.push(mlp("mlp", 4)?);
    out.push(mlp("mlp_batch1", 1)?);
    out.push(residual("residual_block")?);
    out.push(movement_chain("transpose_reshape_concat_chain")?);
    out.push(relu_add_chain("relu_add_chain")?);
    out.push(conv_bn_leaky("conv_bn_relu_max_leaky")?);
    out.push(decoder("deconv_bn_hardswish_pad_resize")?);
    out.push(tanh_gelu("matmul_gelu_tanh_pow")?);
    Ok(())
}

/// A model under construction: a builder, its seeded generator and its inputs.
struct Model {
    id: String,
    b: GraphBuilder,
    rng: Rng,
    inputs: Vec<baton_delegate_api::Tensor>,
}

impl Model {
    fn new(name: &str) -> Model {
        let id = format!("Model/f32/{name}");
        Model {
            b: GraphBuilder::new(&id),
            rng: Rng::for_id(&id),
            id,
            inputs: Vec::new(),
        }
    }

    fn input(&mut self, name: &str, shape: &[usize]) -> TensorId {
        let t = self.rng.tensor(DType::F32, shape, &Fill::Range(-1.0, 1.0));
        self.inputs.push(t);
        self.b.input_fixed(name, DType::F32, shape)
    }

    /// A constant uniform in `[lo, hi)`.
    fn uniform(&mut self, name: &str, shape: &[usize], lo: f64, hi: f64) -> TensorId {
        let n = shape.iter().product();
        let v: Vec<f32> = self
            .rng
            .values(n, &Fill::Range(lo, hi), false)
            .into_iter()
            .map(|x| x as f32)
            .collect();
        self.b.constant_f32(name, shape, &v)
    }

    /// An inference BatchNormalization of `x` over `c` channels.
    fn batch_norm(&mut self, name: &str, x: TensorId, c: usize) -> Result<TensorId> {
        let scale = self.uniform(&format!("{name}_scale"), &[c], 0.5, 1.5);
        let bias = self.uniform(&format!("{name}_bias"), &[c], -0.2, 0.2);
        let mean = self.uniform(&format!("{name}_mean"), &[c], -0.2, 0.2);
        let var = self.uniform(&format!("{name}_var"), &[c], 0.5, 1.5);
        self.node(
            OpKind::BatchNormalization,
            &[x, scale, bias, mean, var],
            &[],
        )
    }

    /// A constant uniform in ±1/sqrt(fan_in).
    fn weight(&mut self, name: &str, shape: &[usize], fan_in: usize) -> TensorId {
        let s = 1.0 / (fan_in as f64).sqrt();
        let n = shape.iter().product();
        let v: Vec<f32> = self
            .rng
            .values(n, &Fill::Range(-s, s), false)
            .into_iter()
            .map(|x| x as f32)
            .collect();
        self.b.constant_f32(name, shape, &v)
    }

    fn node(
        &mut self,
        op: OpKind,
        inputs: &[TensorId],
        attrs: &[(&str, Attr)],
    ) -> Result<TensorId> {
        let id = self.id.clone();
        self.b.node(op, inputs, attrs).map_err(|e| ir_err(&id, e))
    }

    fn finish(self, output: TensorId) -> Result<Case> {
        let Model {
            id, mut b, inputs, ..
        } = self;
        b.output(output);
        let graph = b.finish().map_err(|e| ir_err(&id, e))?;
        Ok(Case {
            id,
            op: "Model".into(),
            dtype: Some(DType::F32),
            body: CaseBody::Model { graph, inputs },
        })
    }
}

/// Conv → Relu → MaxPool → Conv(depthwise) → Clip → GlobalAveragePool → Flatten → Gemm →
/// Softmax.
fn small_cnn(name: &str, batch: usize) -> Result<Case> {
    let mut m = Model::new(name);
    let x = m.input("image", &[batch, 3, 16, 16]);
    let w1 = m.weight("conv1_w", &[8, 3, 3, 3], 27);
    let b1 = m.weight("conv1_b", &[8], 27);
    let pad1 = ("pads", ints(&[1, 1, 1, 1]));
    let c1 = m.node(OpKind::Conv, &[x, w1, b1], std::slice::from_ref(&pad1))?;
    let r1 = m.node(OpKind::Relu, &[c1], &[])?;
    let p1 = m.node(
        OpKind::MaxPool,
        &[r1],
        &[("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
    )?;
    let w2 = m.weight("dw_w", &[8, 1, 3, 3], 9);
    let b2 = m.weight("dw_b", &[8], 9);
    let c2 = m.node(
        OpKind::Conv,
        &[p1, w2, b2],
        &[pad1, ("group", Attr::Int(8))],
    )?;
    let r2 = m.node(
        OpKind::Clip,
        &[c2],
        &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
    )?;
    let g = m.node(OpKind::GlobalAveragePool, &[r2], &[])?;
    let f = m.node(OpKind::Flatten, &[g], &[("axis", Attr::Int(1))])?;
    let w3 = m.weight("fc_w", &[10, 8], 8);
    let b3 = m.weight("fc_b", &[10], 8);
    let fc = m.node(OpKind::Gemm, &[f, w3, b3], &[("transB", Attr::Int(1))])?;
    let sm = m.node(OpKind::Softmax, &[fc], &[("axis", Attr::Int(-1))])?;
    m.finish(sm)
}

/// (MatMul → Add(bias) → Relu) × 3.
fn mlp(name: &str, batch: usize) -> Result<Case> {
    let mut m = Model::new(name);
    let mut h = m.input("x", &[batch, 32]);
    for (i, (k, n)) in [(32, 64), (64, 64), (64, 10)].into_iter().enumerate() {
        let w = m.weight(&format!("w{i}"), &[k, n], k);
        let b = m.weight(&format!("b{i}"), &[n], k);
        let mm = m.node(OpKind::MatMul, &[h, w], &[])?;
        let a = m.node(OpKind::Add, &[mm, b], &[])?;
        h = m.node(OpKind::Relu, &[a], &[])?;
    }
    m.finish(h)
}

/// Conv → Relu → Conv → Add(skip).
fn residual(name: &str) -> Result<Case> {
    let mut m = Model::new(name);
    let x = m.input("x", &[1, 4, 9, 9]);
    let pad = ("pads", ints(&[1, 1, 1, 1]));
    let w1 = m.weight("w1", &[4, 4, 3, 3], 36);
    let b1 = m.weight("b1", &[4], 36);
    let c1 = m.node(OpKind::Conv, &[x, w1, b1], std::slice::from_ref(&pad))?;
    let r = m.node(OpKind::Relu, &[c1], &[])?;
    let w2 = m.weight("w2", &[4, 4, 3, 3], 36);
    let b2 = m.weight("b2", &[4], 36);
    let c2 = m.node(OpKind::Conv, &[r, w2, b2], &[pad])?;
    let sum = m.node(OpKind::Add, &[c2, x], &[])?;
    m.finish(sum)
}

/// Transpose → Reshape(0, -1) → Concat(with a second input) → Reshape(const) → Flatten.
fn movement_chain(name: &str) -> Result<Case> {
    let mut m = Model::new(name);
    let x = m.input("x", &[2, 3, 4]);
    let y = m.input("y", &[2, 5]);
    let t = m.node(OpKind::Transpose, &[x], &[("perm", ints(&[0, 2, 1]))])?;
    let r = m.node(OpKind::Reshape, &[t], &[("shape", ints(&[0, -1]))])?;
    let c = m.node(OpKind::Concat, &[r, y], &[("axis", Attr::Int(-1))])?;
    let target = m.b.constant_i64("target", &[3], &[2, 17, 1]);
    let r2 = m.node(OpKind::Reshape, &[c, target], &[])?;
    let t2 = m.node(OpKind::Transpose, &[r2], &[])?;
    let f = m.node(OpKind::Flatten, &[t2], &[("axis", Attr::Int(2))])?;
    m.finish(f)
}

/// Relu → Add(same shape) → Relu: small enough for the simplest plugin to take whole.
fn relu_add_chain(name: &str) -> Result<Case> {
    let mut m = Model::new(name);
    let x = m.input("x", &[3, 11]);
    let y = m.input("y", &[3, 11]);
    let r = m.node(OpKind::Relu, &[x], &[])?;
    let a = m.node(OpKind::Add, &[r, y], &[])?;
    let out = m.node(OpKind::Relu, &[a], &[])?;
    m.finish(out)
}

/// tf2onnx: Conv → BatchNormalization → Relu → Conv → BatchNormalization → LeakyRelu
/// written as `Max(x, 0.1 x)` (imported as `Where(Greater(x, 0.1 x), x, 0.1 x)`).
fn conv_bn_leaky(name: &str) -> Result<Case> {
    let mut m = Model::new(name);
    let x = m.input("x", &[1, 4, 10, 10]);
    let pad = ("pads", ints(&[1, 1, 1, 1]));
    let w1 = m.weight("w1", &[8, 4, 3, 3], 36);
    let b1 = m.weight("b1", &[8], 36);
    let c1 = m.node(OpKind::Conv, &[x, w1, b1], std::slice::from_ref(&pad))?;
    let n1 = m.batch_norm("bn1", c1, 8)?;
    let r1 = m.node(OpKind::Relu, &[n1], &[])?;
    let w2 = m.weight("w2", &[8, 8, 3, 3], 72);
    let c2 = m.node(OpKind::Conv, &[r1, w2], &[pad])?;
    let n2 = m.batch_norm("bn2", c2, 8)?;
    let alpha = m.b.constant_f32("alpha", &[], &[0.1]);
    let scaled = m.node(OpKind::Mul, &[n2, alpha], &[])?;
    let pick = m.node(OpKind::Greater, &[n2, scaled], &[])?;
    let y = m.node(OpKind::Where, &[pick, n2, scaled], &[])?;
    m.finish(y)
}

/// Paddle2ONNX: ConvTranspose (stride 2) → BatchNormalization → `x * HardSigmoid(x)` →
/// Pad (reflect) → Resize (linear, half_pixel).
fn decoder(name: &str) -> Result<Case> {
    let mut m = Model::new(name);
    let x = m.input("x", &[1, 6, 5, 5]);
    let w = m.weight("wt", &[6, 4, 4, 4], 96);
    let b = m.weight("bt", &[4], 96);
    let d = m.node(
        OpKind::ConvTranspose,
        &[x, w, b],
        &[("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))],
    )?;
    let n = m.batch_norm("bn", d, 4)?;
    let h = m.node(
        OpKind::HardSigmoid,
        &[n],
        &[
            ("alpha", Attr::Float(1.0 / 6.0)),
            ("beta", Attr::Float(0.5)),
        ],
    )?;
    let hs = m.node(OpKind::Mul, &[n, h], &[])?;
    let pads = m.b.constant_i64("pads", &[8], &[0, 0, 1, 2, 0, 0, 1, 2]);
    let p = m.node(
        OpKind::Pad,
        &[hs, pads],
        &[("mode", Attr::Str("reflect".into()))],
    )?;
    let r = m.node(
        OpKind::Resize,
        &[p],
        &[
            ("mode", Attr::Str("linear".into())),
            ("sizes", ints(&[1, 4, 17, 19])),
        ],
    )?;
    m.finish(r)
}

/// tf2onnx's GELU (tanh form, the cube as `Pow(x, 3)`) after a MatMul.
fn tanh_gelu(name: &str) -> Result<Case> {
    let mut m = Model::new(name);
    let x = m.input("x", &[4, 16]);
    let w = m.weight("w", &[16, 24], 16);
    let h = m.node(OpKind::MatMul, &[x, w], &[])?;
    let scalar = |m: &mut Model, n: &str, v: f32| m.b.constant_f32(n, &[], &[v]);
    let three = scalar(&mut m, "three", 3.0);
    let k3 = scalar(&mut m, "k3", 0.044_715);
    let k = scalar(&mut m, "k", 0.797_884_6);
    let one = scalar(&mut m, "one", 1.0);
    let half = scalar(&mut m, "half", 0.5);
    let cube = m.node(OpKind::Pow, &[h, three], &[])?;
    let a = m.node(OpKind::Mul, &[cube, k3], &[])?;
    let b = m.node(OpKind::Add, &[h, a], &[])?;
    let s = m.node(OpKind::Mul, &[b, k], &[])?;
    let t = m.node(OpKind::Tanh, &[s], &[])?;
    let d = m.node(OpKind::Add, &[t, one], &[])?;
    let e = m.node(OpKind::Mul, &[h, d], &[])?;
    let y = m.node(OpKind::Mul, &[e, half], &[])?;
    m.finish(y)
}

fn ir_err(id: &str, e: IrError) -> Error {
    Error::Case {
        id: id.to_string(),
        message: e.to_string(),
    }
}
