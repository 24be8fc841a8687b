//! Cases of the math family: element-wise math and activations, Neg/Abs, Pow,
//! comparisons, Not/And, Where, Cast, CastLike and BitCast, Det, LogSoftmax, the normalizations and the Reduce ops.
//!
//! The dtype in an id is that of the op's data operand (operand 0; for Where, `X`): the
//! comparisons and Not/And produce bool whatever it is, and Cast cases are named
//! `Cast/<from>/to_<to>`. Not and And take only bool operands, so their f32 cases are
//! small models that feed them from f32 comparisons (`Not(Equal(x, x))` is NaN
//! detection, `And(Greater, Less)` a range test); they are `Model` cases carrying the
//! op's name, since op cases hold exactly one node.

use baton_delegate_api::DType::{Bool, F16, F32, I32, I64, I8, U8};
use baton_delegate_api::{Attr, DType, GraphBuilder, IrError, OpKind, Tensor, TensorData};

use super::elementwise::UNARY_SHAPES;
use super::gen::{case_id, dims, tensor, Draw, Fill, Maker, Rng, SPECIALS, SPECIALS_F16};
use super::{Case, CaseBody, KIT_DTYPES};
use crate::error::{Error, Result};

mod arith;
mod bits;
mod cast;
mod reduce;

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let s = &mut Sink { op, out };
    match op {
        OpKind::Sqrt
        | OpKind::Exp
        | OpKind::Log
        | OpKind::Erf
        | OpKind::Ceil
        | OpKind::Floor
        | OpKind::Round
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
        | OpKind::LeakyRelu
        | OpKind::HardSigmoid
        | OpKind::HardSwish
        | OpKind::Gelu => float_unary(s),
        OpKind::Neg | OpKind::Abs | OpKind::Sign => neg_abs(s),
        OpKind::Pow => pow(s),
        OpKind::Mod => arith::modulo(s),
        OpKind::IsNaN | OpKind::IsInf => arith::classify(s),
        OpKind::Equal
        | OpKind::Greater
        | OpKind::Less
        | OpKind::GreaterOrEqual
        | OpKind::LessOrEqual => compare(s),
        OpKind::Not | OpKind::And | OpKind::Or | OpKind::Xor => logic(s),
        OpKind::TopK => arith::top_k(s),
        OpKind::BitwiseAnd
        | OpKind::BitwiseOr
        | OpKind::BitwiseXor
        | OpKind::BitwiseNot
        | OpKind::BitShift => bits::bits(s),
        OpKind::Hardmax => arith::hardmax(s),
        OpKind::Where => select(s),
        OpKind::Cast => cast::cast(s),
        OpKind::CastLike => cast::cast_like(s),
        OpKind::BitCast => cast::bit_cast(s),
        OpKind::Det => det(s),
        OpKind::LogSoftmax => log_softmax(s),
        OpKind::BatchNormalization => batch_norm(s),
        OpKind::LayerNormalization => layer_norm(s),
        OpKind::ReduceMean
        | OpKind::ReduceSum
        | OpKind::ReduceMax
        | OpKind::ReduceMin
        | OpKind::ReduceProd
        | OpKind::ReduceL1
        | OpKind::ReduceL2
        | OpKind::ReduceLogSumExp
        | OpKind::ReduceSumSquare => reduce::reduce(s),
        OpKind::ArgMax | OpKind::ArgMin => arith::arg_extreme(s),
        _ => Ok(()),
    }
}

type Attrs<'a> = &'a [(&'a str, Attr)];

/// Where the cases of one op go.
struct Sink<'a> {
    op: OpKind,
    out: &'a mut Vec<Case>,
}

impl Sink<'_> {
    /// A case on one input of `shape` filled by `fill`.
    fn one(&mut self, dtype: DType, desc: &str, shape: &[usize], fill: &Fill) -> Result<()> {
        self.with(dtype, desc, &[], |m| {
            m.input(shape, fill);
        })
    }

    /// [`Sink::one`] with attributes.
    fn one_with(&mut self, dtype: DType, desc: &str, x: (&[usize], &Fill), a: Attrs) -> Result<()> {
        self.with(dtype, desc, a, |m| {
            m.input(x.0, x.1);
        })
    }

    /// A case whose operands `add` puts on the maker (its generator is seeded by the id).
    fn with(
        &mut self,
        dtype: DType,
        desc: &str,
        a: Attrs,
        add: impl FnOnce(&mut Maker),
    ) -> Result<()> {
        let mut m = Maker::new(self.op, dtype, desc);
        add(&mut m);
        self.out.push(m.build(a)?);
        Ok(())
    }
}

/// Operand shape pairs of the binary ops: equal shapes, rank 0, numpy broadcasting both
/// ways, size-1 dims and empty tensors. Dtypes other than f32 take the first two.
const BINARY_SHAPES: &[(&str, &[usize], &[usize])] = &[
    ("same_33", &[33], &[33]),
    ("bcast_2x1x3_4x1", &[2, 1, 3], &[4, 1]),
    ("same_2x3x4", &[2, 3, 4], &[2, 3, 4]),
    ("rank0_rank0", &[], &[]),
    ("rank0_5", &[], &[5]),
    ("7_vs_1", &[7], &[1]),
    ("bcast_1x3x1x5_2x1x4x1", &[1, 3, 1, 5], &[2, 1, 4, 1]),
    ("empty_0x3_1x3", &[0, 3], &[1, 3]),
];

/// Signed zeros and subnormals.
const NEG_ZERO: [f64; 6] = [-0.0, 0.0, -1e-40, 1e-40, -0.0, 1.0];

fn specials() -> Fill {
    Fill::Cycle(SPECIALS.to_vec())
}

fn specials_f16() -> Fill {
    Fill::Cycle(SPECIALS_F16.to_vec())
}

fn float_unary(s: &mut Sink) -> Result<()> {
    let op = s.op;
    let fill = match op {
        OpKind::Sqrt => Fill::Range(0.0, 100.0),
        OpKind::Log => Fill::Range(1e-3, 100.0),
        OpKind::Exp => Fill::Range(-20.0, 20.0),
        OpKind::Erf => Fill::Range(-4.0, 4.0),
        OpKind::Asin | OpKind::Acos | OpKind::Atanh => Fill::Range(-1.0, 1.0),
        OpKind::Acosh => Fill::Range(1.0, 50.0),
        _ => Fill::Range(-8.0, 8.0),
    };
    let f = |name, v: f32| (name, Attr::Float(v));
    let approximate = |v: &str| vec![("approximate", Attr::Str(v.into()))];
    let variants: Vec<(&str, Vec<(&str, Attr)>)> = match op {
        OpKind::LeakyRelu => vec![
            ("alpha0.1", vec![f("alpha", 0.1)]),
            ("alpha0", vec![f("alpha", 0.0)]),
            ("alpha_neg1.5", vec![f("alpha", -1.5)]),
        ],
        OpKind::HardSigmoid => vec![
            ("alpha0.5_beta0.25", vec![f("alpha", 0.5), f("beta", 0.25)]),
            ("alpha_sixth", vec![f("alpha", 1.0 / 6.0), f("beta", 0.5)]),
        ],
        OpKind::Gelu => vec![("tanh", approximate("tanh")), ("none", approximate("none"))],
        _ => vec![],
    };
    for &shape in UNARY_SHAPES {
        s.one(F32, &dims(shape), shape, &fill)?;
    }
    s.one(F32, "specials", &[33], &specials())?;
    s.one(F32, "large_1e30", &[33], &Fill::Range(-1e30, 1e30))?;
    s.one(F32, "negzero", &[33], &Fill::Cycle(NEG_ZERO.to_vec()))?;
    s.one(F32, "wide_range", &[33], &Fill::Range(-100.0, 100.0))?;
    // Where each op turns over: Exp overflows and underflows (to subnormals), Gelu's and
    // the hard activations' tails and corners, Erf's saturation.
    let edges: Vec<f64> = match op {
        OpKind::Exp => vec![88.0, 88.7, 88.8, -87.0, -100.0, -103.0, -104.0, 0.0],
        OpKind::Gelu | OpKind::Erf => vec![-12.0, -9.0, -6.0, -5.5, -3.0, 3.0, 4.0, 6.0],
        OpKind::HardSigmoid => vec![-2.5, -2.4, 2.4, 2.5, 2.6, -2.6, 0.0, -0.0],
        OpKind::HardSwish => vec![-3.0, -2.9, 2.9, 3.0, 3.1, -3.1, 0.0, -0.0],
        // Halves (Round goes to even), just below integers, and the signed zeros.
        OpKind::Floor | OpKind::Round => vec![-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 2.9999998],
        // The domain's ends and poles.
        OpKind::Asin | OpKind::Acos | OpKind::Atanh | OpKind::Acosh => {
            vec![-1.0, 1.0, -1.0000001, 1.0000001, 0.0, -0.0, 0.9999999, 2.0]
        }
        OpKind::Reciprocal => vec![0.0, -0.0, 1e-39, -1e-39, 3e38, -3e38, 1e-30, 7.0],
        OpKind::Sinh | OpKind::Cosh => vec![88.0, 89.0, 710.0, -89.0, -710.0, 0.0, -0.0, 1e-8],
        _ => vec![1e-30, 1e-10, 1.0, 2.0, 10.0, 1e10, 1e30, 3e38],
    };
    s.one(F32, "edges", &[8], &Fill::Cycle(edges))?;
    for (name, attrs) in &variants {
        s.one_with(F32, &format!("{name}_33"), (&[33], &fill), attrs)?;
        s.one_with(
            F32,
            &format!("{name}_specials"),
            (&[12], &specials()),
            attrs,
        )?;
    }
    for (desc, fill) in [("33", fill), ("specials", specials_f16())] {
        s.one(F16, desc, &[33], &fill)?;
        if let Some((name, attrs)) = variants.first() {
            s.one_with(F16, &format!("{name}_{desc}"), (&[33], &fill), attrs)?;
        }
    }
    Ok(())
}

/// Neg, Abs and Sign: floats with specials and signed zeros, integers with their extremes.
fn neg_abs(s: &mut Sink) -> Result<()> {
    for &shape in &UNARY_SHAPES[..6] {
        s.one(F32, &dims(shape), shape, &Fill::Range(-10.0, 10.0))?;
    }
    s.one(F32, "specials", &[12], &specials())?;
    s.one(F32, "negzero", &[6], &Fill::Cycle(NEG_ZERO.to_vec()))?;
    s.one(F16, "specials", &[10], &specials_f16())?;
    let mut dtypes = vec![I8, I32, I64];
    if s.op != OpKind::Neg {
        dtypes.push(U8);
    }
    for dtype in dtypes {
        for &shape in &[&[33][..], &[], &[0]] {
            s.one(dtype, &dims(shape), shape, &int_fill(dtype))?;
        }
        // The extremes: Neg and Abs of MIN wrap to MIN.
        let (lo, hi) = int_limits(dtype);
        let x = int_tensor(dtype, &[6], &[lo, lo + 1, -1, 0, 1, hi]);
        s.with(dtype, "extremes", &[], |m| {
            m.operand(x, false);
        })?;
    }
    Ok(())
}

/// A fill over most of an integer dtype's range (i64's is kept to ±4e18: the generator
/// draws from the span `hi - lo`, which must fit an i64).
fn int_fill(dtype: DType) -> Fill {
    match dtype {
        I8 => Fill::Range(-128.0, 127.0),
        U8 => Fill::Range(0.0, 255.0),
        I32 => Fill::Range(i32::MIN as f64, i32::MAX as f64),
        _ => Fill::Range(-4e18, 4e18),
    }
}

/// The limits of an integer dtype.
fn int_limits(dtype: DType) -> (i64, i64) {
    match dtype {
        I8 => (i8::MIN as i64, i8::MAX as i64),
        U8 => (0, u8::MAX as i64),
        I32 => (i32::MIN as i64, i32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    }
}

/// An integer tensor from exact i64 values (`tensor` takes f64, which cannot hold every
/// i64); each value is converted with `as`.
fn int_tensor(dtype: DType, shape: &[usize], values: &[i64]) -> Tensor {
    let bytes: Vec<u8> = match dtype {
        I8 | U8 => values.iter().map(|&v| v as u8).collect(),
        I32 => values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect(),
        _ => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
    };
    Tensor::from_bytes(dtype, shape, &bytes)
}

/// Values drawn from -3..=3 (u8: 0..=6), so that equal pairs are frequent.
fn small_ints(rng: &mut Rng, dtype: DType, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    let lo = if dtype == U8 { 0 } else { -3 };
    let v: Vec<f64> = (0..n).map(|_| rng.int(lo, lo + 6) as f64).collect();
    tensor(dtype, shape, &v)
}

/// Random bools (bytes 0 and 1).
fn bools(rng: &mut Rng, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.int(0, 1) as f64).collect();
    tensor(Bool, shape, &v)
}

/// Every pair of special values, by broadcasting a column against a row.
fn special_pairs(s: &mut Sink) -> Result<()> {
    for (dtype, values) in [(F32, &SPECIALS[..]), (F16, &SPECIALS_F16[..])] {
        let (n, fill) = (values.len(), Fill::Cycle(values.to_vec()));
        s.with(dtype, "special_pairs", &[], |m| {
            m.input(&[n, 1], &fill).input(&[1, n], &fill);
        })?;
    }
    Ok(())
}

fn pow(s: &mut Sink) -> Result<()> {
    let (base, exponent) = (Fill::Range(0.1, 4.0), Fill::Range(-3.0, 3.0));
    for &(name, a, b) in BINARY_SHAPES {
        s.with(F32, name, &[], |m| {
            m.input(a, &base).input(b, &exponent);
        })?;
    }
    // Negative bases with integral float exponents, and the common constant square.
    let integral = Fill::Cycle(vec![-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]);
    s.with(F32, "negative_base_integral_exp", &[], |m| {
        m.input(&[4, 1], &Fill::Range(-4.0, 4.0))
            .input(&[1, 7], &integral);
    })?;
    s.with(F32, "const_exp_2", &[], |m| {
        let two = tensor(F32, &[], &[2.0]);
        m.input(&[2, 3, 4], &Fill::Range(-10.0, 10.0))
            .operand(two, true);
    })?;
    special_pairs(s)?;
    // Exponents of every other dtype, with negative bases.
    for exp_dtype in [F16, I8, U8, I32, I64] {
        s.with(F32, &format!("exp_{}", exp_dtype.name()), &[], |m| {
            m.input(&[3, 5], &Fill::Range(-3.0, 3.0));
            let v = m.rng.values(5, &Fill::Range(0.0, 4.0), true);
            m.operand(tensor(exp_dtype, &[5], &v), false);
        })?;
    }
    s.with(F16, "33", &[], |m| {
        m.input(&[33], &base).input(&[33], &exponent);
    })
}

fn compare(s: &mut Sink) -> Result<()> {
    let mut dtypes = vec![F32, F16, I8, U8, I32, I64];
    if s.op == OpKind::Equal {
        dtypes.push(Bool);
    }
    for &dtype in &dtypes {
        let shapes = if dtype == F32 {
            BINARY_SHAPES
        } else {
            &BINARY_SHAPES[..2]
        };
        for &(name, a, b) in shapes {
            s.with(dtype, name, &[], |m| {
                let (x, y) = if dtype == Bool {
                    (bools(&mut m.rng, a), bools(&mut m.rng, b))
                } else {
                    let x = small_ints(&mut m.rng, dtype, a);
                    (x, small_ints(&mut m.rng, dtype, b))
                };
                m.operand(x, false).operand(y, false);
            })?;
        }
    }
    special_pairs(s)?;
    s.with(F32, "uniform_const_rhs", &[], |m| {
        let zero = tensor(F32, &[], &[0.0]);
        m.input(&[4, 5], &Fill::Range(-1.0, 1.0))
            .operand(zero, true);
    })?;
    // Integers that an f32 (2^24 + 1) or f64 (2^53 + 1) comparison would confuse.
    for (dtype, big) in [(I32, (1 << 24) + 1), (I64, (1i64 << 53) + 1)] {
        let (lo, hi) = int_limits(dtype);
        let edges = [lo, hi, big, big - 1, -big, 0];
        s.with(dtype, "extremes", &[], |m| {
            m.operand(int_tensor(dtype, &[6, 1], &edges), false)
                .operand(int_tensor(dtype, &[1, 6], &edges), false);
        })?;
    }
    Ok(())
}

/// Not and And: bool op cases, plus the f32 models described in the module docs.
fn logic(s: &mut Sink) -> Result<()> {
    let op = s.op;
    if op == OpKind::Not {
        for &shape in &[&[7][..], &[33], &[2, 3, 4], &[], &[0], &[1, 1, 5]] {
            s.with(Bool, &dims(shape), &[], |m| {
                let x = bools(&mut m.rng, shape);
                m.operand(x, false);
            })?;
        }
    } else {
        for &(name, a, b) in BINARY_SHAPES {
            s.with(Bool, name, &[], |m| {
                let (x, y) = (bools(&mut m.rng, a), bools(&mut m.rng, b));
                m.operand(x, false).operand(y, false);
            })?;
        }
    }
    for (desc, shape) in [
        ("33", &[33][..]),
        ("2x3x4", &[2, 3, 4]),
        ("empty_0x4", &[0, 4]),
    ] {
        s.out.push(logic_model(op, desc, shape)?);
    }
    Ok(())
}

/// `Not(Equal(x, x))` (true exactly at NaN) or `And(Greater(x, -0.5), Less(x, 0.5))` on
/// an f32 `x` with special values.
fn logic_model(op: OpKind, desc: &str, shape: &[usize]) -> Result<Case> {
    let id = case_id(op, F32, desc);
    let err = |e: IrError| Error::Case {
        id: id.clone(),
        message: e.to_string(),
    };
    let mut rng = Rng::for_id(&id);
    let x = rng.tensor(F32, shape, &Fill::Mixed(SPECIALS.to_vec(), -1.0, 1.0));
    let mut b = GraphBuilder::new(&id);
    let xi = b.input_fixed("x", F32, shape);
    let y = if op == OpKind::Not {
        let eq = b.node(OpKind::Equal, &[xi, xi], &[]).map_err(err)?;
        b.node(OpKind::Not, &[eq], &[]).map_err(err)?
    } else {
        let lo = b.constant_f32("lo", &[], &[-0.5]);
        let hi = b.constant_f32("hi", &[], &[0.5]);
        let above = b.node(OpKind::Greater, &[xi, lo], &[]).map_err(err)?;
        let below = b.node(OpKind::Less, &[xi, hi], &[]).map_err(err)?;
        b.node(op, &[above, below], &[]).map_err(err)?
    };
    b.rename(y, "out");
    b.output(y);
    let graph = b.finish().map_err(err)?;
    let inputs = vec![x];
    Ok(Case {
        id: id.clone(),
        op: op.name().to_string(),
        dtype: Some(F32),
        body: CaseBody::Model { graph, inputs },
    })
}

fn select(s: &mut Sink) -> Result<()> {
    // (description, condition, X, Y); dtypes other than f32 take the first two.
    type Shapes = (
        &'static str,
        &'static [usize],
        &'static [usize],
        &'static [usize],
    );
    let shapes: &[Shapes] = &[
        ("same_33", &[33], &[33], &[33]),
        ("bcast_2x1x3_4x1_3", &[2, 1, 3], &[4, 1], &[3]),
        ("cond_rank0", &[], &[5], &[5]),
        ("xy_rank0", &[7], &[], &[]),
        ("bcast_1x4_3x1_1", &[1, 4], &[3, 1], &[1]),
        ("empty_0x3_1x3_3", &[0, 3], &[1, 3], &[3]),
    ];
    for dtype in KIT_DTYPES {
        let shapes = if dtype == F32 { shapes } else { &shapes[..2] };
        for &(name, c, x, y) in shapes {
            s.with(dtype, name, &[], |m| {
                let cond = bools(&mut m.rng, c);
                let fill = if dtype.is_float() {
                    Fill::Range(-10.0, 10.0)
                } else {
                    int_fill(dtype)
                };
                let mut data = |shape: &[usize]| match dtype {
                    Bool => bools(&mut m.rng, shape),
                    _ => m.rng.tensor(dtype, shape, &fill),
                };
                let (tx, ty) = (data(x), data(y));
                m.operand(cond, false).operand(tx, false).operand(ty, false);
            })?;
        }
    }
    // Special values pass through bit for bit; a constant condition.
    s.with(F32, "specials_const_cond", &[], |m| {
        let cond = bools(&mut m.rng, &[12]);
        m.operand(cond, true)
            .input(&[12], &specials())
            .input(&[12], &Fill::Cycle(NEG_ZERO.to_vec()));
    })
}

fn log_softmax(s: &mut Sink) -> Result<()> {
    let plain: &[(&[usize], Option<i64>)] = &[
        (&[7], None),
        (&[2, 13], Some(-1)),
        (&[2, 13], Some(0)),
        (&[3, 4, 5], Some(1)),
        (&[3, 4, 5], Some(-3)),
        (&[2, 33], Some(1)),
        (&[4, 1], Some(-1)),
        (&[0, 5], Some(-1)),
        (&[3, 0], Some(-1)),
    ];
    let fill = Fill::Range(-5.0, 5.0);
    for &(shape, axis) in plain {
        let desc = match axis {
            None => format!("{}_default_axis", dims(shape)),
            Some(a) => format!("{}_axis{a}", dims(shape)).replace('-', "neg"),
        };
        let attrs: Vec<(&str, Attr)> = axis.map(|a| ("axis", Attr::Int(a))).into_iter().collect();
        s.one_with(F32, &desc, (shape, &fill), &attrs)?;
    }
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    s.one(F32, "large_logits", &[2, 13], &Fill::Range(-1000.0, 1000.0))?;
    let rows = [
        -inf, 1.0, 2.0, -inf, -inf, -inf, -inf, -inf, 0.0, 5.0, 0.0, -inf,
    ];
    s.one(F32, "neg_inf", &[3, 4], &Fill::Cycle(rows.to_vec()))?;
    let rows = [inf, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0];
    s.one(F32, "pos_inf", &[2, 4], &Fill::Cycle(rows.to_vec()))?;
    let rows = [nan, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0];
    s.one(F32, "nan", &[2, 4], &Fill::Cycle(rows.to_vec()))?;
    s.one(F16, "2x13", &[2, 13], &fill)
}

fn batch_norm(s: &mut Sink) -> Result<()> {
    let eps = |v: f32| vec![("epsilon", Attr::Float(v))];
    // (X shape, description suffix, attributes, parameters as constants); f16 takes the
    // variants without a suffix.
    type Variant = (
        &'static [usize],
        &'static str,
        Vec<(&'static str, Attr)>,
        bool,
    );
    let variants: [Variant; 9] = [
        (&[2, 3, 4, 5], "", vec![], true),
        (&[2, 3, 4, 5], "_inputs", vec![], false),
        (&[2, 3, 4, 5], "_eps0.001", eps(1e-3), true),
        (&[1, 3], "", vec![], true),
        (&[2, 1, 7], "_eps0", eps(0.0), true),
        (&[1, 4, 1, 1], "", vec![], true),
        (&[3, 5, 33], "", vec![], true),
        (&[0, 3, 2], "", vec![], true),
        (&[6], "_rank1", vec![], true),
    ];
    for dtype in [F32, F16] {
        for (shape, suffix, attrs, constant) in &variants {
            if dtype == F16 && !suffix.is_empty() {
                continue;
            }
            let c = if shape.len() > 1 { shape[1] } else { 1 };
            s.with(dtype, &format!("{}{suffix}", dims(shape)), attrs, |m| {
                m.input(shape, &Fill::Range(-5.0, 5.0));
                // scale, B, mean, var (positive); f32, as exported models have them.
                for (lo, hi) in [(-2.0, 2.0), (-1.0, 1.0), (-1.0, 1.0), (0.1, 3.0)] {
                    let t = m.rng.tensor(F32, &[c], &Fill::Range(lo, hi));
                    m.operand(t, *constant);
                }
            })?;
        }
    }
    Ok(())
}

/// LayerNormalization cases take all three outputs (Y, Mean, InvStdDev) unless the
/// description says `y_only`.
fn layer_norm(s: &mut Sink) -> Result<()> {
    let op = s.op;
    // (description, X shape, axis, Scale shape, with B, epsilon); f16 takes the first
    // three.
    type Variant = (
        &'static str,
        &'static [usize],
        Option<i64>,
        &'static [usize],
        bool,
    );
    let variants: &[(Variant, Option<f32>)] = &[
        (("2x5", &[2, 5], None, &[5], true), None),
        (("3x4x5_axis1", &[3, 4, 5], Some(1), &[4, 5], true), None),
        (("2x5_y_only", &[2, 5], None, &[5], true), None),
        (("2x5_no_bias", &[2, 5], None, &[5], false), None),
        (("3x4x5_axisneg1", &[3, 4, 5], Some(-1), &[5], true), None),
        (("3x4x5_axis0", &[3, 4, 5], Some(0), &[3, 4, 5], true), None),
        (
            ("3x4x5_axisneg2_scale1", &[3, 4, 5], Some(-2), &[1], false),
            None,
        ),
        (("1x33_eps0.001", &[1, 33], None, &[33], true), Some(1e-3)),
        (("4x1_single", &[4, 1], None, &[1], true), None),
        (("empty_0x4", &[0, 4], None, &[4], true), None),
        (("offset_100", &[2, 16], None, &[16], true), None),
    ];
    for dtype in [F32, F16] {
        let variants = if dtype == F32 {
            variants
        } else {
            &variants[..3]
        };
        for &((desc, shape, axis, scale, bias), epsilon) in variants {
            let id = case_id(op, dtype, desc);
            let mut rng = Rng::for_id(&id);
            // Values around 100 with spread 1 expose a variance taken as E[x²] - E[x]².
            let fill = match desc {
                "offset_100" => Fill::Range(99.5, 100.5),
                _ => Fill::Range(-3.0, 3.0),
            };
            let mut operands = vec![
                (rng.tensor(dtype, shape, &fill), false),
                (rng.tensor(dtype, scale, &Fill::Range(-2.0, 2.0)), true),
            ];
            if bias {
                operands.push((rng.tensor(dtype, scale, &Fill::Range(-1.0, 1.0)), true));
            }
            let mut attrs = Vec::new();
            attrs.extend(axis.map(|a| ("axis", Attr::Int(a))));
            attrs.extend(epsilon.map(|e| ("epsilon", Attr::Float(e))));
            let outputs = if desc.ends_with("y_only") { 1 } else { 3 };
            s.out.push(multi_output_case(
                &id, op, dtype, &operands, &attrs, outputs,
            )?);
        }
    }
    Ok(())
}

/// One node with `outputs` outputs, all of them graph outputs (`out`, `out1`, ...).
pub(super) fn multi_output_case(
    id: &str,
    op: OpKind,
    dtype: DType,
    operands: &[(Tensor, bool)],
    attrs: Attrs,
    outputs: usize,
) -> Result<Case> {
    let err = |e: IrError| Error::Case {
        id: id.to_string(),
        message: e.to_string(),
    };
    let mut b = GraphBuilder::new(id);
    let mut ids = Vec::new();
    let mut inputs = Vec::new();
    for (i, (t, constant)) in operands.iter().enumerate() {
        let name = format!("in{i}");
        ids.push(if *constant {
            b.constant(&name, t.dtype, &t.shape, TensorData::from_bytes(t.bytes()))
        } else {
            inputs.push(t.clone());
            b.input_fixed(&name, t.dtype, &t.shape)
        });
    }
    let outs = b
        .named_node_outputs("node", op, &ids, attrs, outputs)
        .map_err(err)?;
    for (i, &o) in outs.iter().enumerate() {
        let name = if i == 0 {
            "out".to_string()
        } else {
            format!("out{i}")
        };
        b.rename(o, &name);
        b.output(o);
    }
    let graph = b.finish().map_err(err)?;
    Ok(Case {
        id: id.to_string(),
        op: op.name().to_string(),
        dtype: Some(dtype),
        body: CaseBody::Op { graph, inputs },
    })
}

/// Det: single and batched matrices of several sizes (a 1 x 1 one is its element), f16,
/// and 0 x 0 matrices (determinant 1).
fn det(s: &mut Sink) -> Result<()> {
    let shapes: [&[usize]; 6] = [
        &[3, 3],
        &[2, 4, 4],
        &[6, 6],
        &[2, 3, 1, 1],
        &[0, 0],
        &[2, 0, 0],
    ];
    for shape in shapes {
        s.one(F32, &dims(shape), shape, &Fill::Range(-2.0, 2.0))?;
    }
    s.one(F16, "2x3x3", &[2, 3, 3], &Fill::Range(-2.0, 2.0))
}
