//! The case catalogue: generated single-op cases for every op, small whole models, and ABI
//! behaviour checks.
//!
//! Ids are `Op/dtype/description` (`Conv/f32/2d_group2_dil2_pad1`, `Model/f32/small_cnn`)
//! and `ABI/description`. Inputs come from a xorshift generator seeded by the id, so a case
//! is the same in every run, on every machine, whatever else the catalogue contains.
//!
//! Quantized (QDQ) cases have op `Quantized` and ids `Quantized/<dtype>/<Op>_<desc>`
//! (see `quantized.rs`); they are judged in quantization steps.
//!
//! The catalogue order is fixed: ABI checks (when asked for), then op cases in
//! [`OpKind::ALL`] order, then models, then quantized cases. `--ops` filters by [`Case::op`] and `--shard i/n`
//! keeps every n-th case of what the filter left, starting at the i-th.

mod abi;
mod attention;
mod elementwise;
mod gen;
mod generate;
mod indexing;
mod linalg;
mod linear_attention;
mod math;
mod models;
mod movement;
mod pool;
mod quantized;
mod select;
mod signal;
mod spatial;
mod tensor_ops;

use std::str::FromStr;

use baton_delegate_api::{DType, Graph, OpKind, Tensor};

pub use abi::AbiCheck;
pub use quantized::QUANTIZED;

use crate::error::{Error, Result};

/// The dtypes the kit's dtype matrices (Cast from and to, Where, the data-movement ops)
/// run over: the ones plugins commonly implement. The wider and narrower dtypes of the IR
/// (f64, bf16, 16-bit and unsigned integers, float8, float4, sub-byte integers) get
/// dedicated Cast and CastLike cases instead, which keeps the catalogue's size in
/// proportion; the ONNX suite covers their other ops.
pub const KIT_DTYPES: [DType; 7] = [
    DType::F32,
    DType::F16,
    DType::I8,
    DType::U8,
    DType::I32,
    DType::I64,
    DType::Bool,
];

/// One conformance case.
pub struct Case {
    /// Stable id, unique in the catalogue.
    pub id: String,
    /// The op under test, `Model` or `ABI`.
    pub op: String,
    /// Element type of the case's output; `None` for ABI checks.
    pub dtype: Option<DType>,
    pub body: CaseBody,
}

/// What a case runs.
pub enum CaseBody {
    /// One node (plus constants) and its inputs, in `graph.inputs` order.
    Op { graph: Graph, inputs: Vec<Tensor> },
    /// A small model built with `GraphBuilder`.
    Model { graph: Graph, inputs: Vec<Tensor> },
    /// A check of the plugin's ABI behaviour, with sample graphs to exercise it on.
    Abi {
        check: AbiCheck,
        samples: Vec<(Graph, Vec<Tensor>)>,
    },
}

/// The kind of a case, as written in reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaseKind {
    Op,
    Model,
    Abi,
}

impl CaseKind {
    /// `op`, `model` or `abi`.
    pub fn name(self) -> &'static str {
        match self {
            CaseKind::Op => "op",
            CaseKind::Model => "model",
            CaseKind::Abi => "abi",
        }
    }
}

impl Case {
    /// The case's kind.
    pub fn kind(&self) -> CaseKind {
        match self.body {
            CaseBody::Op { .. } => CaseKind::Op,
            CaseBody::Model { .. } => CaseKind::Model,
            CaseBody::Abi { .. } => CaseKind::Abi,
        }
    }

    /// The graph and its inputs, for op and model cases.
    pub fn graph(&self) -> Option<(&Graph, &[Tensor])> {
        match &self.body {
            CaseBody::Op { graph, inputs } | CaseBody::Model { graph, inputs } => {
                Some((graph, inputs))
            }
            CaseBody::Abi { .. } => None,
        }
    }
}

/// Op and model cases, in catalogue order.
pub fn all() -> Result<Vec<Case>> {
    let mut out = Vec::new();
    for &op in OpKind::ALL {
        match op {
            OpKind::MatMul => linalg::matmul(&mut out)?,
            OpKind::Gemm => linalg::gemm(&mut out)?,
            OpKind::Conv => linalg::conv(&mut out)?,
            OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => {
                elementwise::binary(op, &mut out)?
            }
            OpKind::Relu => elementwise::relu(&mut out)?,
            OpKind::Clip => elementwise::clip(&mut out)?,
            OpKind::Sigmoid | OpKind::Tanh => elementwise::smooth(op, &mut out)?,
            OpKind::Softmax => elementwise::softmax(&mut out)?,
            OpKind::MaxPool => pool::max_pool(&mut out)?,
            OpKind::AveragePool => pool::average_pool(&mut out)?,
            OpKind::GlobalAveragePool => pool::global_average_pool(&mut out)?,
            OpKind::Reshape => movement::reshape(&mut out)?,
            OpKind::Transpose => movement::transpose(&mut out)?,
            OpKind::Concat => movement::concat(&mut out)?,
            OpKind::Flatten => movement::flatten(&mut out)?,
            _ => {
                math::cases(op, &mut out)?;
                tensor_ops::cases(op, &mut out)?;
                indexing::cases(op, &mut out)?;
                generate::cases(op, &mut out)?;
                select::cases(op, &mut out)?;
                signal::cases(op, &mut out)?;
                spatial::cases(op, &mut out)?;
                attention::cases(op, &mut out)?;
                linear_attention::cases(op, &mut out)?;
            }
        }
    }
    models::all(&mut out)?;
    quantized::all(&mut out)?;
    check_unique(&out)?;
    Ok(out)
}

/// The ABI behaviour checks (op `ABI`), each with sample graphs: the first f32 case of
/// every op.
pub fn abi_checks() -> Result<Vec<Case>> {
    let cases = all()?;
    Ok(abi::checks(&cases))
}

/// The full catalogue: ABI checks first when `include_abi`, then [`all`].
pub fn catalogue(include_abi: bool) -> Result<Vec<Case>> {
    let cases = all()?;
    if !include_abi {
        return Ok(cases);
    }
    let mut out = abi::checks(&cases);
    out.extend(cases);
    Ok(out)
}

/// A `--shard i/n` value: run the cases whose position `p` (0-based, after filtering)
/// satisfies `p % n == i - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1-based shard index.
    pub index: usize,
    pub count: usize,
}

impl FromStr for Shard {
    type Err = Error;

    fn from_str(s: &str) -> Result<Shard> {
        let bad = || Error::Usage(format!("--shard '{s}': expected i/n with 1 <= i <= n"));
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Parses an `--ops` list (`Conv,Add,Model`): op names, `Model`, `Quantized` and `ABI`. Unknown names
/// are an error that lists the valid ones.
pub fn parse_ops(list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if OpKind::from_name(name).is_none()
            && name != "Model"
            && name != QUANTIZED
            && name != "ABI"
        {
            let valid: Vec<&str> = OpKind::ALL.iter().map(|o| o.name()).collect();
            return Err(Error::Usage(format!(
                "--ops: unknown op '{name}' (valid: {}, Model, Quantized, ABI)",
                valid.join(", ")
            )));
        }
        out.push(name.to_string());
    }
    if out.is_empty() {
        return Err(Error::Usage("--ops: the list is empty".into()));
    }
    Ok(out)
}

/// The cases a run takes: the catalogue (with the ABI checks when `abi_checks` or when
/// `ops` names `ABI`), filtered by `ops`, then the shard's share. `--abi-checks` asks for
/// the ABI checks whatever `--ops` lists, so with both the checks join the listed ops.
pub fn selection(
    ops: Option<&[String]>,
    abi_checks: bool,
    shard: Option<Shard>,
) -> Result<Vec<Case>> {
    let want_abi = abi_checks || ops.is_some_and(|o| o.iter().any(|s| s == "ABI"));
    let ops: Option<Vec<String>> = ops.map(|o| {
        let mut o = o.to_vec();
        if abi_checks && !o.iter().any(|s| s == "ABI") {
            o.push("ABI".into());
        }
        o
    });
    Ok(select(catalogue(want_abi)?, ops.as_deref(), shard))
}

/// Keeps the cases whose op is in `ops` (all when `None`), then the shard's share.
pub fn select(cases: Vec<Case>, ops: Option<&[String]>, shard: Option<Shard>) -> Vec<Case> {
    cases
        .into_iter()
        .filter(|c| ops.is_none_or(|ops| ops.contains(&c.op)))
        .enumerate()
        .filter(|(p, _)| shard.is_none_or(|s| p % s.count == s.index - 1))
        .map(|(_, c)| c)
        .collect()
}

fn check_unique(cases: &[Case]) -> Result<()> {
    let mut ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    match ids.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(Error::Case {
            id: w[0].to_string(),
            message: "duplicate case id".into(),
        }),
        None => Ok(()),
    }
}
