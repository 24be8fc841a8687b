//! Tolerances as data, and the comparison that applies them.
//!
//! One TOML file per dtype class: `f32.toml` (f32 and f64), `f16.toml` (f16, bf16 and the
//! float8/float4 formats) and `int.toml` (every integer type and bool). Each has one table per op family — `elementwise` (Add, Sub, Mul, Div),
//! `activation` (Relu, Clip, Sigmoid, Tanh), `reduction` (Softmax and the pools),
//! `linalg` (MatMul, Gemm, Conv), `data_movement` (Reshape, Transpose, Concat, Flatten) and
//! `model` (whole-model outputs) — with `abs`, `rel`, `ulp` and optionally
//! `signed_zero`, plus optional per-op overrides under `[ops.<Op>]` and an optional
//! `quantized` table for the outputs of quantized (QDQ) cases (`int.toml` allows one
//! quantization step there: `ulp = 1`).
//!
//! An element passes when:
//! - the expected value is NaN: the plugin's value is NaN (any payload), and vice versa;
//! - either is infinite: both are the same infinity;
//! - both are zero: equal, unless the rule says `signed_zero = true`, then the sign bits
//!   must match too;
//! - otherwise: `|got - exp| <= abs` OR `|got - exp| <= rel * |exp|` OR the distance in
//!   units in the last place of the dtype is `<= ulp` (integers: the integer difference).
//!
//! Files are found in `--tolerances DIR`, else in the crate's `tolerances/` folder when it
//! exists (a source checkout), else the copies compiled into the binary. A DIR that lacks
//! some of the three files uses the compiled-in copy for those, and the report says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_delegate_api::minifloat::{self, E8M0Rounding};
use baton_delegate_api::{DType, OpKind, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The comparison rule of one family (or op) for one dtype class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub abs: f64,
    pub rel: f64,
    pub ulp: u64,
    #[serde(default)]
    pub signed_zero: bool,
}

/// The op families of the tolerance files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    Elementwise,
    Activation,
    Reduction,
    Linalg,
    DataMovement,
    Model,
}

impl Family {
    /// The family of an op.
    pub fn of(op: OpKind) -> Family {
        match op {
            OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => Family::Elementwise,
            OpKind::Relu | OpKind::Clip | OpKind::Sigmoid | OpKind::Tanh => Family::Activation,
            // RoiAlign averages (or takes the largest of) bilinear samples, as a pool does.
            OpKind::Softmax
            | OpKind::MaxPool
            | OpKind::AveragePool
            | OpKind::GlobalAveragePool
            | OpKind::RoiAlign => Family::Reduction,
            OpKind::MatMul | OpKind::Gemm | OpKind::Conv => Family::Linalg,
            // Exact integer sums: judged like the other exact integer ops.
            OpKind::ConvInteger | OpKind::MatMulInteger => Family::Elementwise,
            OpKind::Reshape | OpKind::Transpose | OpKind::Concat | OpKind::Flatten => {
                Family::DataMovement
            }
            OpKind::Neg
            | OpKind::Abs
            | OpKind::Equal
            | OpKind::Greater
            | OpKind::Less
            | OpKind::And
            | OpKind::Or
            | OpKind::Xor
            | OpKind::BitwiseAnd
            | OpKind::BitwiseOr
            | OpKind::BitwiseXor
            | OpKind::BitwiseNot
            | OpKind::BitShift
            | OpKind::TopK
            | OpKind::Hardmax
            | OpKind::Not
            | OpKind::Where
            | OpKind::Cast
            | OpKind::CastLike
            | OpKind::Ceil
            | OpKind::Floor
            | OpKind::Round
            | OpKind::Sign
            | OpKind::Mod
            | OpKind::IsNaN
            | OpKind::IsInf
            | OpKind::GreaterOrEqual
            | OpKind::LessOrEqual
            | OpKind::QuantizeLinear
            | OpKind::DequantizeLinear => Family::Elementwise,
            OpKind::Pow
            | OpKind::Sqrt
            | OpKind::Exp
            | OpKind::Log
            | OpKind::Erf
            | OpKind::LeakyRelu
            | OpKind::HardSigmoid
            | OpKind::HardSwish
            | OpKind::Gelu
            | OpKind::Reciprocal
            | OpKind::Sin
            | OpKind::Cos
            | OpKind::Tan
            | OpKind::Asin
            | OpKind::Acos
            | OpKind::Atan
            | OpKind::Sinh
            | OpKind::Cosh
            | OpKind::Asinh
            | OpKind::Acosh
            | OpKind::Atanh
            | OpKind::Resize
            | OpKind::GridSample
            | OpKind::AffineGrid
            | OpKind::HannWindow
            | OpKind::HammingWindow
            | OpKind::BlackmanWindow
            | OpKind::MelWeightMatrix
            | OpKind::Range => Family::Activation,
            OpKind::LogSoftmax
            | OpKind::BatchNormalization
            | OpKind::LayerNormalization
            | OpKind::ReduceMean
            | OpKind::ReduceSum
            | OpKind::ReduceMax
            | OpKind::ReduceMin
            | OpKind::ReduceProd
            | OpKind::ReduceL1
            | OpKind::ReduceL2
            | OpKind::ReduceLogSumExp
            | OpKind::ReduceSumSquare
            | OpKind::ArgMax
            | OpKind::ArgMin => Family::Reduction,
            // Einsum's contractions are matrix products; Attention is two matrix products
            // around a softmax, LinearAttention a recurrence of outer and inner products,
            // and RotaryEmbedding's products of two terms are judged likewise.
            OpKind::ConvTranspose
            | OpKind::LSTM
            | OpKind::GRU
            | OpKind::RNN
            | OpKind::Einsum
            | OpKind::Det
            | OpKind::DFT
            | OpKind::STFT
            | OpKind::Attention
            | OpKind::RotaryEmbedding
            | OpKind::LinearAttention
            | OpKind::CausalConvWithState
            | OpKind::DeformConv => Family::Linalg,
            OpKind::Squeeze
            | OpKind::Unsqueeze
            | OpKind::Split
            | OpKind::Slice
            | OpKind::Gather
            | OpKind::Expand
            | OpKind::Pad
            | OpKind::Tile
            | OpKind::Shape
            | OpKind::Size
            | OpKind::Identity
            | OpKind::ConstantOfShape
            | OpKind::Trilu
            | OpKind::GatherElements
            | OpKind::GatherND
            | OpKind::DepthToSpace
            | OpKind::SpaceToDepth
            | OpKind::OneHot
            | OpKind::NonMaxSuppression
            | OpKind::Unique
            | OpKind::Compress
            | OpKind::MaxUnpool
            | OpKind::ReverseSequence
            | OpKind::TensorScatter
            | OpKind::BitCast => Family::DataMovement,
            // Reductions (add, mul) of repeated indices, running sums.
            OpKind::ScatterElements
            | OpKind::ScatterND
            | OpKind::CumSum
            | OpKind::CumProd
            | OpKind::Col2Im => Family::Reduction,
            // Control flow computes whatever its subgraphs do: judged as a model.
            OpKind::If | OpKind::Loop => Family::Model,
        }
    }

    /// The table name in the TOML files.
    pub fn key(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Activation => "activation",
            Family::Reduction => "reduction",
            Family::Linalg => "linalg",
            Family::DataMovement => "data_movement",
            Family::Model => "model",
        }
    }
}

/// All loaded tolerance files.
#[derive(Clone, Debug)]
pub struct Tolerances {
    files: BTreeMap<&'static str, DtypeTolerances>,
    /// Where each file came from (`/path/f32.toml` or `built-in:f32.toml`), in
    /// `f32, f16, int` order.
    pub sources: Vec<String>,
}

/// One file's rules.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct DtypeTolerances {
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    elementwise: Rule,
    activation: Rule,
    reduction: Rule,
    linalg: Rule,
    data_movement: Rule,
    model: Rule,
    /// Outputs of quantized (QDQ) cases, whose integer kernels may round a half step the
    /// other way from dequantize → f32 → quantize; absent: the `model` rule.
    #[serde(default)]
    quantized: Option<Rule>,
    #[serde(default)]
    ops: BTreeMap<String, Rule>,
}

/// The three file names, with their compiled-in copies.
const FILES: [(&str, &str); 3] = [
    ("f32", include_str!("../tolerances/f32.toml")),
    ("f16", include_str!("../tolerances/f16.toml")),
    ("int", include_str!("../tolerances/int.toml")),
];

impl Tolerances {
    /// Loads from `dir`, or from the default location (see the module docs).
    pub fn load(dir: Option<&Path>) -> Result<Tolerances> {
        match dir {
            Some(d) => Self::load_dir(d, true),
            None => {
                let d = Self::default_dir();
                if d.is_dir() {
                    Self::load_dir(&d, false)
                } else {
                    Self::builtin()
                }
            }
        }
    }

    /// The compiled-in files.
    pub fn builtin() -> Result<Tolerances> {
        let mut files = BTreeMap::new();
        let mut sources = Vec::new();
        for (name, text) in FILES {
            let label = format!("built-in:{name}.toml");
            files.insert(name, parse(&label, text)?);
            sources.push(label);
        }
        Ok(Tolerances { files, sources })
    }

    /// The `tolerances/` folder of the crate's source checkout.
    pub fn default_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tolerances")
    }

    /// The rule for an output of `dtype` produced by `op` (`None`: a whole-model output).
    pub fn rule(&self, dtype: DType, op: Option<OpKind>) -> Rule {
        let file = &self.files[file_key(dtype)];
        let Some(op) = op else {
            return file.model;
        };
        if let Some(r) = file.ops.get(op.name()) {
            return *r;
        }
        match Family::of(op) {
            Family::Elementwise => file.elementwise,
            Family::Activation => file.activation,
            Family::Reduction => file.reduction,
            Family::Linalg => file.linalg,
            Family::DataMovement => file.data_movement,
            Family::Model => file.model,
        }
    }

    /// The rule for an output of `dtype` of a quantized (QDQ) case: the file's
    /// `[quantized]` table, else its `[model]` table. For integer outputs `ulp` counts
    /// quantization steps.
    pub fn quantized_rule(&self, dtype: DType) -> Rule {
        let file = &self.files[file_key(dtype)];
        file.quantized.unwrap_or(file.model)
    }

    fn load_dir(dir: &Path, explicit: bool) -> Result<Tolerances> {
        if !dir.is_dir() {
            return Err(Error::Tolerance {
                path: dir.display().to_string(),
                message: "not a directory".into(),
            });
        }
        let mut files = BTreeMap::new();
        let mut sources = Vec::new();
        let mut found = 0;
        for (name, text) in FILES {
            let path = dir.join(format!("{name}.toml"));
            if path.is_file() {
                let content = std::fs::read_to_string(&path).map_err(|e| Error::Tolerance {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
                let label = path.display().to_string();
                files.insert(name, parse(&label, &content)?);
                sources.push(label);
                found += 1;
            } else {
                let label = format!("built-in:{name}.toml");
                files.insert(name, parse(&label, text)?);
                sources.push(label);
            }
        }
        if explicit && found == 0 {
            return Err(Error::Tolerance {
                path: dir.display().to_string(),
                message: "contains none of f32.toml, f16.toml, int.toml".into(),
            });
        }
        Ok(Tolerances { files, sources })
    }
}

impl Rule {
    /// Whether `got` is acceptable for `exp`, both values of `dtype` widened to f64.
    pub fn accepts(&self, dtype: DType, got: f64, exp: f64) -> bool {
        if exp.is_nan() || got.is_nan() {
            return exp.is_nan() && got.is_nan();
        }
        if exp.is_infinite() || got.is_infinite() {
            return exp == got;
        }
        if exp == 0.0 && got == 0.0 {
            return !self.signed_zero || exp.is_sign_negative() == got.is_sign_negative();
        }
        let diff = (got - exp).abs();
        diff <= self.abs
            || diff <= self.rel * exp.abs()
            || ulp_distance(dtype, got, exp) <= self.ulp
    }
}

/// Distance between two finite values in units in the last place of `dtype` (`+0` and
/// `-0` are 0 apart); for integer dtypes, the integer difference.
pub fn ulp_distance(dtype: DType, a: f64, b: f64) -> u64 {
    fn ordered(bits: u64, sign: u64) -> i128 {
        if bits & sign != 0 {
            -((bits & !sign) as i128)
        } else {
            bits as i128
        }
    }
    let (oa, ob) = match dtype {
        DType::F32 => (
            ordered((a as f32).to_bits() as u64, 1 << 31),
            ordered((b as f32).to_bits() as u64, 1 << 31),
        ),
        DType::F16 => (
            ordered(half::f16::from_f64(a).to_bits() as u64, 1 << 15),
            ordered(half::f16::from_f64(b).to_bits() as u64, 1 << 15),
        ),
        DType::F64 => (ordered(a.to_bits(), 1 << 63), ordered(b.to_bits(), 1 << 63)),
        DType::BF16 => {
            let bits = |v| minifloat::encode16(DType::BF16, v).unwrap_or(0) as u64;
            (ordered(bits(a), 1 << 15), ordered(bits(b), 1 << 15))
        }
        // E8M0 is unsigned: its code is already in value order.
        DType::F8E8M0 => {
            let code = |v| minifloat::encode_e8m0(v, true, E8M0Rounding::Nearest) as i128;
            (code(a), code(b))
        }
        d if d.is_float() => {
            let sign = 1u64 << (d.bits() - 1);
            let bits = |v| minifloat::encode(d, v, true).unwrap_or(0) as u64;
            (ordered(bits(a), sign), ordered(bits(b), sign))
        }
        _ => (a as i128, b as i128),
    };
    (oa - ob).unsigned_abs().min(u64::MAX as u128) as u64
}

/// The outcome of comparing one output with its reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Whether every element passed.
    pub ok: bool,
    /// Elements that failed.
    pub failures: usize,
    /// Largest |got - exp| over elements where both are finite.
    pub max_abs_err: f64,
    /// Largest |got - exp| / |exp| over finite elements with exp != 0.
    pub max_rel_err: f64,
    /// The failing element with the largest error (non-finite disagreements first).
    pub worst: Option<Worst>,
    /// Set when shapes or dtypes differ (then nothing else is compared).
    pub structural: Option<String>,
}

/// The worst failing element.
#[derive(Clone, Debug, PartialEq)]
pub struct Worst {
    pub flat: usize,
    pub index: Vec<usize>,
    pub got: f64,
    pub expected: f64,
}

/// Compares `got` with `expected` element by element under `rule`.
pub fn compare(got: &Tensor, expected: &Tensor, rule: &Rule) -> Comparison {
    let mut c = Comparison {
        ok: true,
        failures: 0,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        worst: None,
        structural: None,
    };
    if got.dtype != expected.dtype || got.shape != expected.shape {
        c.ok = false;
        c.structural = Some(format!(
            "got {} {:?}, expected {} {:?}",
            got.dtype, got.shape, expected.dtype, expected.shape
        ));
        return c;
    }
    let (g, e) = (got.to_f64(), expected.to_f64());
    let mut worst_score = f64::NEG_INFINITY;
    for (i, (&gv, &ev)) in g.iter().zip(&e).enumerate() {
        let finite = gv.is_finite() && ev.is_finite();
        let diff = (gv - ev).abs();
        if finite {
            c.max_abs_err = c.max_abs_err.max(diff);
            if ev != 0.0 {
                c.max_rel_err = c.max_rel_err.max(diff / ev.abs());
            }
        }
        if !rule.accepts(got.dtype, gv, ev) {
            c.ok = false;
            c.failures += 1;
            let score = if finite { diff } else { f64::INFINITY };
            if score > worst_score {
                worst_score = score;
                c.worst = Some(Worst {
                    flat: i,
                    index: unravel(i, &got.shape),
                    got: gv,
                    expected: ev,
                });
            }
        }
    }
    c
}

/// Formats an element of `dtype` for a report: floats as the shortest round-tripping
/// decimal of their own width (`-0.0`, `NaN`, `inf`), integers as integers.
pub fn format_value(dtype: DType, v: f64) -> String {
    match dtype {
        DType::F32 => format!("{:?}", v as f32),
        DType::F16 => format!("{:?}", half::f16::from_f64(v).to_f32()),
        d if d.is_float() => format!("{v:?}"),
        _ => format!("{}", v as i128),
    }
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            idx[d] = flat % n;
            flat /= n;
        }
    }
    idx
}

/// The tolerance file of a dtype: f64 is judged as f32, the other narrow floats as f16.
fn file_key(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 | DType::F64 => "f32",
        d if d.is_float() => "f16",
        _ => "int",
    }
}

fn parse(label: &str, text: &str) -> Result<DtypeTolerances> {
    let t: DtypeTolerances = toml::from_str(text).map_err(|e| Error::Tolerance {
        path: label.to_string(),
        message: e.to_string(),
    })?;
    let bad = |message: String| Error::Tolerance {
        path: label.to_string(),
        message,
    };
    for op in t.ops.keys() {
        if OpKind::from_name(op).is_none() {
            return Err(bad(format!("[ops.{op}]: no such op")));
        }
    }
    let named = [
        ("elementwise", &t.elementwise),
        ("activation", &t.activation),
        ("reduction", &t.reduction),
        ("linalg", &t.linalg),
        ("data_movement", &t.data_movement),
        ("model", &t.model),
    ];
    let quantized = t.quantized.iter().map(|r| ("quantized", r));
    for (name, r) in named
        .into_iter()
        .chain(quantized)
        .chain(t.ops.iter().map(|(k, v)| (k.as_str(), v)))
    {
        if !(r.abs >= 0.0 && r.rel >= 0.0) {
            return Err(bad(format!("{name}: abs and rel must be >= 0")));
        }
    }
    Ok(t)
}
