//! A small harness for single-graph cases: build with random inputs, then check every
//! output against naive values with SIMD and portable kernels.

use baton_delegate_api::ir::{DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::{ir::Attr, Tensor};

use super::delegate;
use baton_delegate_api::testing::{assert_close_labelled, run, Rng};

/// Every multi-index of `shape`, in row-major order.
pub fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = shape.iter().product();
    (0..total)
        .map(|mut i| {
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = i % shape[d];
                i /= shape[d];
            }
            idx
        })
        .collect()
}

/// Row-major offset of `idx` in `shape`, broadcasting size-1 axes (right-aligned).
pub fn offset(shape: &[usize], idx: &[usize]) -> usize {
    let shift = idx.len() - shape.len();
    shape.iter().enumerate().fold(0, |acc, (d, &n)| {
        acc * n + if n == 1 { 0 } else { idx[shift + d] }
    })
}

/// A graph builder with inputs and the tensors fed to them.
pub struct Case {
    pub g: GraphBuilder,
    pub inputs: Vec<Tensor>,
    pub rng: Rng,
}

impl Case {
    pub fn new(seed: u64) -> Case {
        Case {
            g: GraphBuilder::new("case"),
            inputs: Vec::new(),
            rng: Rng::new(seed),
        }
    }

    /// A run-time input of random values (scaled by `scale`).
    pub fn input(&mut self, shape: &[usize], scale: f32) -> (TensorId, Vec<f32>) {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = self.rng.vec(n).into_iter().map(|x| x * scale).collect();
        self.input_values(shape, v)
    }

    pub fn input_values(&mut self, shape: &[usize], v: Vec<f32>) -> (TensorId, Vec<f32>) {
        let id = self
            .g
            .input_fixed(&format!("in{}", self.inputs.len()), DType::F32, shape);
        self.inputs.push(Tensor::from_f32(shape, &v));
        (id, v)
    }

    pub fn constant(&mut self, shape: &[usize]) -> (TensorId, Vec<f32>) {
        let v = self.rng.vec(shape.iter().product());
        (self.g.constant_f32("c", shape, &v), v)
    }

    pub fn node(&mut self, op: OpKind, ins: &[TensorId], attrs: &[(&str, Attr)]) -> TensorId {
        self.g.node(op, ins, attrs).expect("valid node")
    }

    /// Marks `outs` as outputs and finishes the graph.
    pub fn finish(self, outs: &[TensorId]) -> Done {
        let mut g = self.g;
        outs.iter().for_each(|&o| g.output(o));
        Done {
            graph: g.finish().unwrap(),
            inputs: self.inputs,
            outs: outs.to_vec(),
        }
    }

    /// Finishes with outputs `outs` and checks them against `want`.
    pub fn check(self, outs: &[TensorId], want: &[Vec<f64>], rtol: f64, what: &str) {
        self.finish(outs).check(want, rtol, what);
    }
}

/// A finished case.
pub struct Done {
    graph: Graph,
    inputs: Vec<Tensor>,
    outs: Vec<TensorId>,
}

impl Done {
    pub fn shape(&self, t: TensorId) -> Vec<usize> {
        self.graph.tensors[t].static_shape().unwrap()
    }

    /// Runs with SIMD and portable kernels; each output must match `want`.
    pub fn check(&self, want: &[Vec<f64>], rtol: f64, what: &str) {
        for simd in [true, false] {
            let got = run(&delegate(simd), &self.graph, &self.inputs).expect("run");
            for (i, (t, w)) in got.iter().zip(want).enumerate() {
                assert_eq!(t.shape, self.shape(self.outs[i]));
                assert_close_labelled(
                    &format!("{what} output {i} simd={simd}"),
                    t.f32s(),
                    w,
                    1e-6,
                    rtol,
                );
            }
        }
    }
}
