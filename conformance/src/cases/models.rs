//! Model-level cases built with `GraphBuilder`: a small CNN, an MLP, a residual block, a
//! data-movement chain and an element-wise chain, each with seeded weights and inputs.

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

fn ir_err(id: &str, e: IrError) -> Error {
    Error::Case {
        id: id.to_string(),
        message: e.to_string(),
    }
}
