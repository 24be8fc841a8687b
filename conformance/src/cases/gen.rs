//! Deterministic values and the single-node case builder the generators share.

use baton_delegate_api::dtype::{push_float, push_int};
use baton_delegate_api::{Attr, DType, GraphBuilder, OpKind, Tensor, TensorData};

use super::{Case, CaseBody};
use crate::error::{Error, Result};

/// Special f32 values: signed zeros, huge, tiny (subnormal), infinities, NaN.
pub const SPECIALS: [f64; 12] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    1e30,
    -1e30,
    1e-40,
    -1e-40,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    3.0e38,
];

/// Special values that exist in f16 (65504 is its largest finite value).
pub const SPECIALS_F16: [f64; 10] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    65504.0,
    -65504.0,
    6e-8,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

/// How a tensor is filled.
#[derive(Clone, Debug)]
pub enum Fill {
    /// Uniform in `[lo, hi)` (integers: `[lo, hi]`).
    Range(f64, f64),
    /// Uniform in `[lo, hi)`, avoiding `|x| < min_abs` (safe divisors).
    Away(f64, f64, f64),
    /// These values, repeated in order.
    Cycle(Vec<f64>),
    /// Each element is one of `specials` with probability 1/3, else uniform in `[lo, hi)`.
    Mixed(Vec<f64>, f64, f64),
}

// The generator every case draws from, seeded by its id (`Rng::for_id`): the kit's inputs,
// and so the expected results, depend on its exact sequence. (A doc comment with an
// intra-doc link on this re-export crashes rustdoc 1.95, hence a plain comment.)
pub use baton_delegate_api::testing::Rng;

/// Filling tensors as [`Fill`] says, on top of the shared generator.
pub trait Draw {
    /// `n` values of `fill`.
    fn values(&mut self, n: usize, fill: &Fill, integer: bool) -> Vec<f64>;

    /// A tensor of `dtype` and `shape` filled by `fill`.
    fn tensor(&mut self, dtype: DType, shape: &[usize], fill: &Fill) -> Tensor;
}

impl Draw for Rng {
    fn values(&mut self, n: usize, fill: &Fill, integer: bool) -> Vec<f64> {
        let mut draw = |lo: f64, hi: f64| {
            if integer {
                self.int(lo as i64, hi as i64) as f64
            } else {
                self.uniform(lo, hi)
            }
        };
        match fill {
            Fill::Range(lo, hi) => (0..n).map(|_| draw(*lo, *hi)).collect(),
            Fill::Away(lo, hi, min_abs) => (0..n)
                .map(|_| loop {
                    let v = draw(*lo, *hi);
                    if v.abs() >= *min_abs {
                        break v;
                    }
                })
                .collect(),
            Fill::Cycle(v) => (0..n).map(|i| v[i % v.len()]).collect(),
            Fill::Mixed(specials, lo, hi) => (0..n)
                .map(|_| {
                    if self.next_u64().is_multiple_of(3) {
                        specials[(self.next_u64() % specials.len() as u64) as usize]
                    } else {
                        self.uniform(*lo, *hi)
                    }
                })
                .collect(),
        }
    }

    fn tensor(&mut self, dtype: DType, shape: &[usize], fill: &Fill) -> Tensor {
        let n = shape.iter().product();
        let integer = !dtype.is_float();
        let v = self.values(n, fill, integer);
        tensor(dtype, shape, &v)
    }
}

/// A tensor of `dtype` from f64 values (rounded to the dtype, float8 saturating;
/// integers truncate toward zero and saturate to the dtype's range; bool is `v != 0`).
pub fn tensor(dtype: DType, shape: &[usize], values: &[f64]) -> Tensor {
    let mut bytes = Vec::with_capacity(values.len() * dtype.size());
    for &v in values {
        match dtype.int_range() {
            Some((lo, hi)) => push_int(dtype, (v as i128).clamp(lo, hi), &mut bytes),
            None if dtype == DType::Bool => bytes.push((v != 0.0) as u8),
            None => push_float(dtype, v, true, &mut bytes),
        }
    }
    Tensor::from_bytes(dtype, shape, &bytes)
}

/// The id of an op case.
pub fn case_id(op: OpKind, dtype: DType, desc: &str) -> String {
    format!("{}/{}/{desc}", op.name(), dtype.name())
}

/// Builds one single-node case: operands are graph inputs or constants, in node order.
pub struct Maker {
    pub id: String,
    pub op: OpKind,
    pub dtype: DType,
    pub rng: Rng,
    operands: Vec<(Tensor, bool)>,
    /// How many of the op's outputs the node has (1 unless [`Maker::outputs`] says).
    outputs: usize,
}

impl Maker {
    /// A case `op/dtype/desc`; its generator is seeded by that id.
    pub fn new(op: OpKind, dtype: DType, desc: &str) -> Maker {
        let id = case_id(op, dtype, desc);
        Maker {
            rng: Rng::for_id(&id),
            id,
            op,
            dtype,
            operands: Vec::new(),
            outputs: 1,
        }
    }

    /// Gives the node its first `n` outputs (Unique's optional ones), each a graph output.
    pub fn outputs(&mut self, n: usize) -> &mut Maker {
        self.outputs = n;
        self
    }

    /// Adds a graph input of the case dtype filled by `fill`.
    pub fn input(&mut self, shape: &[usize], fill: &Fill) -> &mut Maker {
        let t = self.rng.tensor(self.dtype, shape, fill);
        self.operands.push((t, false));
        self
    }

    /// Adds a constant of the case dtype filled by `fill`.
    pub fn constant(&mut self, shape: &[usize], fill: &Fill) -> &mut Maker {
        let t = self.rng.tensor(self.dtype, shape, fill);
        self.operands.push((t, true));
        self
    }

    /// Adds a given tensor as a graph input (`constant = false`) or a constant.
    pub fn operand(&mut self, t: Tensor, constant: bool) -> &mut Maker {
        self.operands.push((t, constant));
        self
    }

    /// Builds the graph: one node of `self.op` with `attrs`, its output the graph output.
    pub fn build(&self, attrs: &[(&str, Attr)]) -> Result<Case> {
        let err = |message: String| Error::Case {
            id: self.id.clone(),
            message,
        };
        let mut b = GraphBuilder::new(&self.id);
        let mut ids = Vec::new();
        let mut inputs = Vec::new();
        for (i, (t, constant)) in self.operands.iter().enumerate() {
            let name = format!("in{i}");
            let id = if *constant {
                b.constant(&name, t.dtype, &t.shape, TensorData::from_bytes(t.bytes()))
            } else {
                inputs.push(t.clone());
                b.input_fixed(&name, t.dtype, &t.shape)
            };
            ids.push(id);
        }
        let name = format!("{}_0", self.op.name().to_lowercase());
        let outs = b
            .named_node_outputs(&name, self.op, &ids, attrs, self.outputs)
            .map_err(|e| err(e.to_string()))?;
        for (k, &out) in outs.iter().enumerate() {
            b.rename(
                out,
                &if k == 0 {
                    "out".to_string()
                } else {
                    format!("out{k}")
                },
            );
            b.output(out);
        }
        let graph = b.finish().map_err(|e| err(e.to_string()))?;
        Ok(Case {
            id: self.id.clone(),
            op: self.op.name().to_string(),
            dtype: Some(self.dtype),
            body: CaseBody::Op { graph, inputs },
        })
    }
}

/// `Attr::Ints` from a slice.
pub fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// Joins dims as `2x3x4` (`rank0` for a scalar).
pub fn dims(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "rank0".into();
    }
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    parts.join("x")
}
