//! Element-wise ops: unary activations, binary arithmetic, comparisons and logic with numpy
//! broadcasting, Softmax.
//!
//! Semantics at the edges follow IEEE and numpy: NaN propagates through every op
//! (including Relu, Clip and Softmax), division by zero gives ±Inf or NaN.

use super::layout::{broadcast_strides, Strided};
use super::math::{map, rows};
use super::{Sources, Src};
use crate::gemm::activation::{clamp01, gelu, gelu_erf, hard_swish, leaky_relu, sigmoid, silu};
use crate::gemm::{clip, relu, Activation, Isa};
use crate::pool::{Disjoint, Pool};

/// The one-input float ops that run as a [`Unary`] of their own (a Clip also needs
/// constant bounds): the lowering maps them, and a QDQ table chain may absorb them.
pub(crate) fn is_unary_op(op: baton_delegate_api::ir::OpKind) -> bool {
    use baton_delegate_api::ir::OpKind::*;
    matches!(
        op,
        Relu | Sigmoid
            | Tanh
            | Clip
            | Erf
            | Sqrt
            | Exp
            | Log
            | Neg
            | Abs
            | LeakyRelu
            | HardSigmoid
            | HardSwish
    )
}

/// A unary activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Unary {
    Relu,
    Clip {
        min: f32,
        max: f32,
    },
    Sigmoid,
    Tanh,
    Erf,
    Sqrt,
    Exp,
    Log,
    Neg,
    Abs,
    LeakyRelu {
        alpha: f32,
    },
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `x * clamp(x / 6 + 1/2, 0, 1)`, multiplying by `x` last as ONNX's function body does.
    HardSwish,
    /// An Erf GELU found by `patterns.rs`: `(x * (erf(x / c) + 1)) * 0.5`, or `x * c`
    /// inside the Erf when the graph multiplies.
    Gelu {
        divide: bool,
        c: f32,
    },
    /// `x * x`: Pow with the constant exponent 2 (exact, as the reference's f64 square
    /// of an f32 rounds once).
    Square,
    /// Pow with the constant exponent 0.5: `sqrt`, except that `pow(-0, 0.5)` is +0 and
    /// `pow(-inf, 0.5)` is +inf, as C's `pow` has them.
    PowHalf,
    /// Logical not of a bool held as 0.0/1.0 (any non-zero counts as true).
    Not,
    /// Cast to bool: `x != 0` as 0.0/1.0 (NaN is true).
    NonZero,
    /// Gelu with `approximate = none`: `(x / 2) (1 + erf(x / sqrt 2))`, halving first so
    /// that the largest finite inputs stay finite.
    GeluErf,
    /// Gelu with `approximate = tanh`: `x / (1 + exp(-2z))`, `z = sqrt(2/pi) (x + 0.044715
    /// x^3)`, the reference's form (`1 + tanh(z) = 2 / (1 + exp(-2z))` does not cancel
    /// for large negative `x`), with libm's `exp` so that it overflows to inf where the
    /// reference's does.
    GeluTanh,
    /// Rounds up to an integer.
    Ceil,
    /// Casts involving i32, whose bits an f32 slot holds: f32 to i32 truncates toward
    /// zero and saturates (NaN gives 0), i32 to f32 rounds to nearest, bool (0.0/1.0) to
    /// i32 gives 0 or 1, i32 to bool is `x != 0`.
    F32ToI32,
    I32ToF32,
    BoolToI32,
    I32ToBool,
    /// `x * HardSigmoid(x)` found by `patterns.rs`: `x * clamp(alpha * x + beta, 0, 1)`.
    HardSigmoidMul {
        alpha: f32,
        beta: f32,
    },
    /// `x * Sigmoid(x)` found by `patterns.rs` (SiLU, Swish).
    Silu,
    /// Rounds down to an integer.
    Floor,
    /// Rounds to the nearest integer, halves to even.
    Round,
    /// -1, 0 or 1 by the sign; both zeros give +0, NaN stays NaN (numpy's `sign`).
    Sign,
    /// `1 / x` (correctly rounded in f32, as the reference's f64 quotient rounded once).
    Reciprocal,
    /// Bool results (0.0/1.0): whether `x` is NaN, whether it is an infinity of a chosen
    /// sign.
    IsNaN,
    IsInf {
        negative: bool,
        positive: bool,
    },
    /// A trigonometric or hyperbolic function, in f64 rounded once, as the reference.
    Trig(Trig),
}

/// The trigonometric and hyperbolic functions, in f64 rounded once as the reference: Sin,
/// Cos and Tan by the vectorizable reduction and polynomials of `math::sin_cos` (libm
/// beyond its range), the others by libm, one element at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trig {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
}

impl Trig {
    #[inline(always)]
    fn apply(self, x: f32) -> f32 {
        let v = x as f64;
        (match self {
            Trig::Sin => v.sin(),
            Trig::Cos => v.cos(),
            Trig::Tan => v.tan(),
            Trig::Asin => v.asin(),
            Trig::Acos => v.acos(),
            Trig::Atan => v.atan(),
            Trig::Sinh => v.sinh(),
            Trig::Cosh => v.cosh(),
            Trig::Asinh => v.asinh(),
            Trig::Acosh => v.acosh(),
            Trig::Atanh => v.atanh(),
        }) as f32
    }
}

/// See [`Unary::Sign`]: branch-free so that loops over it vectorize.
#[inline(always)]
fn sign(x: f32) -> f32 {
    let s = (x > 0.0) as u8 as f32 - (x < 0.0) as u8 as f32;
    if x.is_nan() {
        x
    } else {
        s
    }
}

/// See [`Unary::IsInf`].
#[inline(always)]
fn is_inf(x: f32, negative: bool, positive: bool) -> f32 {
    ((x == f32::NEG_INFINITY && negative) || (x == f32::INFINITY && positive)) as u8 as f32
}

impl Unary {
    /// The same function as a product's epilogue computes it, for those it can apply:
    /// a Conv, MatMul or Gemm whose only reader is this activation writes its result.
    pub(crate) fn activation(self) -> Option<Activation> {
        Some(match self {
            Unary::Sigmoid => Activation::Sigmoid,
            Unary::Silu => Activation::Silu,
            Unary::LeakyRelu { alpha } => Activation::LeakyRelu { alpha },
            Unary::HardSigmoid { alpha, beta } => Activation::HardSigmoid { alpha, beta },
            Unary::HardSwish => Activation::HardSwish,
            Unary::HardSigmoidMul { alpha, beta } => Activation::HardSigmoidMul { alpha, beta },
            Unary::Gelu { divide, c } => Activation::Gelu { divide, c },
            Unary::GeluErf => Activation::GeluErf,
            _ => return None,
        })
    }

    fn apply(self, x: f32) -> f32 {
        match self {
            Unary::Relu => relu(x),
            Unary::Clip { min, max } => clip(x, min, max),
            Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Unary::Tanh => x.tanh(),
            Unary::Erf => super::math::erf(x),
            Unary::Gelu { divide, c } => gelu(x, divide, c),
            Unary::Sqrt => x.sqrt(),
            // libm's, not the polynomial of `math.rs`: these are ops of their own, held to
            // the reference within an ulp or two, not activations inside a larger sum.
            Unary::Exp => x.exp(),
            Unary::Log => x.ln(),
            Unary::Neg => -x,
            Unary::Abs => x.abs(),
            Unary::LeakyRelu { alpha } => leaky_relu(x, alpha),
            Unary::HardSigmoid { alpha, beta } => clamp01(alpha * x + beta),
            Unary::HardSwish => hard_swish(x),
            Unary::Silu => silu(x),
            Unary::Square => x * x,
            Unary::PowHalf => pow_half(x),
            Unary::Not => (x == 0.0) as u8 as f32,
            Unary::NonZero => (x != 0.0) as u8 as f32,
            Unary::HardSigmoidMul { alpha, beta } => x * clamp01(alpha * x + beta),
            Unary::GeluTanh => gelu_tanh(x),
            Unary::GeluErf => gelu_erf(x),
            Unary::Ceil => x.ceil(),
            Unary::F32ToI32 => f32::from_bits(x as i32 as u32),
            Unary::I32ToF32 => x.to_bits() as i32 as f32,
            Unary::BoolToI32 => f32::from_bits((x != 0.0) as u32),
            Unary::I32ToBool => (x.to_bits() != 0) as u8 as f32,
            Unary::Floor => x.floor(),
            Unary::Round => x.round_ties_even(),
            Unary::Sign => sign(x),
            Unary::Reciprocal => 1.0 / x,
            Unary::IsNaN => x.is_nan() as u8 as f32,
            Unary::IsInf { negative, positive } => is_inf(x, negative, positive),
            Unary::Trig(t) => t.apply(x),
        }
    }
}

/// See [`Unary::GeluTanh`].
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2 / pi)
    let z = K * (x + 0.044_715 * x * x * x);
    x / (1.0 + (-2.0 * z).exp())
}

/// `pow(x, 0.5)` with C's edge cases (see [`Unary::PowHalf`]).
#[inline(always)]
fn pow_half(x: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        f32::INFINITY
    } else {
        x.sqrt() + 0.0
    }
}

/// `out = f(x)`.
#[derive(Clone, Debug)]
pub(crate) struct UnaryOp {
    pub x: Src,
    pub f: Unary,
}

impl UnaryOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        let f = self.f;
        split(pool, x, out, 1, |x, out| unary(f, isa, x, out));
    }
}

/// `out = f(x)` on the calling thread.
pub(crate) fn unary(f: Unary, isa: Isa, x: &[f32], out: &mut [f32]) {
    match f {
        // Monomorphized loops so the simple cases vectorize.
        Unary::Relu => map(isa, x, out, relu),
        Unary::Clip { min, max } => map(isa, x, out, |v| clip(v, min, max)),
        Unary::Erf => map(isa, x, out, super::math::erf),
        // The functions a product's epilogue may apply instead (`gemm/activation.rs`).
        Unary::Sigmoid => map(isa, x, out, sigmoid),
        Unary::Silu => map(isa, x, out, silu),
        Unary::Gelu { divide: true, c } => map(isa, x, out, |v| gelu(v, true, c)),
        Unary::Sqrt => map(isa, x, out, f32::sqrt),
        Unary::Neg => map(isa, x, out, |v| -v),
        Unary::Abs => map(isa, x, out, f32::abs),
        Unary::LeakyRelu { alpha } => map(isa, x, out, |v| leaky_relu(v, alpha)),
        Unary::HardSigmoid { alpha, beta } => map(isa, x, out, |v| clamp01(alpha * v + beta)),
        Unary::HardSwish => map(isa, x, out, hard_swish),
        Unary::Square => map(isa, x, out, |v| v * v),
        Unary::PowHalf => map(isa, x, out, pow_half),
        Unary::Not => map(isa, x, out, |v| (v == 0.0) as u8 as f32),
        Unary::NonZero => map(isa, x, out, |v| (v != 0.0) as u8 as f32),
        Unary::Ceil => map(isa, x, out, f32::ceil),
        Unary::Floor => map(isa, x, out, f32::floor),
        Unary::Round => map(isa, x, out, f32::round_ties_even),
        Unary::Sign => map(isa, x, out, sign),
        Unary::Reciprocal => map(isa, x, out, |v| 1.0 / v),
        Unary::IsNaN => map(isa, x, out, |v| v.is_nan() as u8 as f32),
        Unary::IsInf { negative, positive } => map(isa, x, out, |v| is_inf(v, negative, positive)),
        Unary::GeluErf => map(isa, x, out, gelu_erf),
        Unary::HardSigmoidMul { alpha, beta } => {
            map(isa, x, out, |v| v * clamp01(alpha * v + beta))
        }
        Unary::Trig(t @ (Trig::Sin | Trig::Cos | Trig::Tan)) => {
            use super::math::sin_cos;
            // One loop per function, each with its constant choice inlined.
            match t {
                Trig::Sin => map(isa, x, out, |v| sin_cos(v, 0)),
                Trig::Cos => map(isa, x, out, |v| sin_cos(v, 1)),
                _ => map(isa, x, out, |v| sin_cos(v, 2)),
            }
            // The few beyond the exact reduction (and infinities, NaN) by libm.
            for (o, &v) in out.iter_mut().zip(x) {
                if v.is_nan() || v.abs() > super::math::SIN_COS_RANGE {
                    *o = t.apply(v);
                }
            }
        }
        _ => map(isa, x, out, |v| f.apply(v)),
    }
}

/// Element-wise work below this many elements runs on the calling thread: waking the
/// pool for less costs more than the split saves (a few microseconds against about one
/// nanosecond per element).
const PARALLEL_MIN: usize = 32 * 1024;

/// `f(x_part, out_part)` over one contiguous part of `x` and `out` per thread, split at
/// multiples of `row` elements; on the calling thread alone when the work is small.
pub(crate) fn split(
    pool: &Pool,
    x: &[f32],
    out: &mut [f32],
    row: usize,
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) {
    let n = out.len().min(x.len());
    split_out(pool, &mut out[..n], row, |start, out| {
        f(&x[start..start + out.len()], out)
    });
}

/// `f(start, out_part)` over one contiguous part of `out` per thread (`start`: the index
/// of its first element), split at multiples of `row` elements (the last part takes any
/// rest); `f(0, out)` on the calling thread alone when the work is small.
pub(crate) fn split_out<T: Send>(
    pool: &Pool,
    out: &mut [T],
    row: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let (n, row) = (out.len(), row.max(1));
    let rows = n / row;
    let tasks = pool.threads().min(rows);
    if n < PARALLEL_MIN || tasks < 2 {
        return f(0, out);
    }
    let per = rows.div_ceil(tasks);
    let parts = Disjoint::new(out);
    pool.run(tasks, &|task, _| {
        let start = (task * per).min(rows) * row;
        let end = if task + 1 == tasks {
            n
        } else {
            ((task + 1) * per).min(rows) * row
        };
        // SAFETY: the tasks' ranges are disjoint.
        let out = unsafe { parts.range(start, end - start) };
        f(start, out);
    });
}

/// `x = f(x)` over a convolution's output whose last step could not apply `f` (see
/// `ConvOp`), split over the threads as a unary step is.
pub(crate) fn activate(f: Activation, isa: Isa, pool: &Pool, x: &mut [f32]) {
    split_out(pool, x, 1, |_, part| f.run(isa, part));
}

/// A binary element-wise op. Bools are held as 0.0 and 1.0 (any non-zero reads as true):
/// the comparisons write them, And reads and writes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    /// C's `pow` in f64, rounded once: the reference's arithmetic exactly.
    Pow,
    Greater,
    Less,
    Equal,
    GreaterOrEqual,
    LessOrEqual,
    And,
    Or,
    Xor,
    /// The remainder, exact: with the divisor's sign when `floored` (numpy's `mod`, Mod's
    /// `fmod = 0`), else the dividend's (C's `fmod`).
    Mod {
        floored: bool,
    },
}

/// `out = a (op) b` with numpy broadcasting.
#[derive(Clone, Debug)]
pub(crate) struct BinaryOp {
    op: Binary,
    a: Src,
    b: Src,
    walk: Strided<2>,
}

impl BinaryOp {
    pub fn new(
        op: Binary,
        a: Src,
        a_shape: &[usize],
        b: Src,
        b_shape: &[usize],
        out_shape: &[usize],
    ) -> BinaryOp {
        let rank = out_shape.len();
        let (sa, sb) = (
            broadcast_strides(a_shape, rank),
            broadcast_strides(b_shape, rank),
        );
        let strides: Vec<[usize; 2]> = sa.iter().zip(&sb).map(|(&x, &y)| [x, y]).collect();
        BinaryOp {
            op,
            a,
            b,
            walk: Strided::new(out_shape, &strides),
        }
    }

    /// Each output element depends on its own operands only, so the output is split among
    /// the threads in contiguous parts, whatever the broadcasting.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let (a, b) = (sources.get(self.a), sources.get(self.b));
        let n = self.walk.len().min(out.len());
        split_out(pool, &mut out[..n], 1, |start, out| match isa {
            // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512F => unsafe { self.run_avx512(a, b, start, out) },
            // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { self.run_avx2(a, b, start, out) },
            _ => self.run_any(a, b, start, out),
        })
    }

    /// The loops, inlined into one function per vector width (see `math::map`), over the
    /// output elements `start..start + out.len()` (`out` holds just those).
    #[inline(always)]
    fn run_any(&self, a: &[f32], b: &[f32], start: usize, out: &mut [f32]) {
        let o = (start, out);
        match self.op {
            Binary::Add => self.apply(a, b, o, |x, y| x + y),
            Binary::Sub => self.apply(a, b, o, |x, y| x - y),
            Binary::Mul => self.apply(a, b, o, |x, y| x * y),
            Binary::Div => self.apply(a, b, o, |x, y| x / y),
            Binary::Pow => self.apply(a, b, o, |x, y| (x as f64).powf(y as f64) as f32),
            Binary::Greater => self.apply(a, b, o, |x, y| (x > y) as u8 as f32),
            Binary::Less => self.apply(a, b, o, |x, y| (x < y) as u8 as f32),
            Binary::Equal => self.apply(a, b, o, |x, y| (x == y) as u8 as f32),
            Binary::GreaterOrEqual => self.apply(a, b, o, |x, y| (x >= y) as u8 as f32),
            Binary::LessOrEqual => self.apply(a, b, o, |x, y| (x <= y) as u8 as f32),
            Binary::And => self.apply(a, b, o, |x, y| (x != 0.0 && y != 0.0) as u8 as f32),
            Binary::Or => self.apply(a, b, o, |x, y| (x != 0.0 || y != 0.0) as u8 as f32),
            Binary::Xor => self.apply(a, b, o, |x, y| ((x != 0.0) != (y != 0.0)) as u8 as f32),
            Binary::Mod { floored } => self.apply(a, b, o, |x, y| float_mod(x, y, floored)),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn run_avx512(&self, a: &[f32], b: &[f32], start: usize, out: &mut [f32]) {
        self.run_any(a, b, start, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self, a: &[f32], b: &[f32], start: usize, out: &mut [f32]) {
        self.run_any(a, b, start, out)
    }

    #[inline(always)]
    fn apply(
        &self,
        a: &[f32],
        b: &[f32],
        (start, out): (usize, &mut [f32]),
        f: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let range = start..start + out.len();
        self.walk
            .for_each_row_in(range, |o, [ia, ib], len, [sa, sb]| {
                let dst = &mut out[o - start..o - start + len];
                match (sa, sb) {
                    (1, 1) => dst
                        .iter_mut()
                        .zip(&a[ia..ia + len])
                        .zip(&b[ib..ib + len])
                        .for_each(|((d, &x), &y)| *d = f(x, y)),
                    (1, 0) => {
                        let y = b[ib];
                        dst.iter_mut()
                            .zip(&a[ia..ia + len])
                            .for_each(|(d, &x)| *d = f(x, y));
                    }
                    (0, 1) => {
                        let x = a[ia];
                        dst.iter_mut()
                            .zip(&b[ib..ib + len])
                            .for_each(|(d, &y)| *d = f(x, y));
                    }
                    _ => dst
                        .iter_mut()
                        .enumerate()
                        .for_each(|(j, d)| *d = f(a[ia + j * sa], b[ib + j * sb])),
                }
            });
    }
}

/// Pow of an f32 base by an integer exponent (any held integer dtype), with numpy
/// broadcasting, as the reference: the magnitude `|x|^n` by C's `pow` in f64, the sign
/// negative for a negative base (-0 included) and an odd `n`, rounded once.
#[derive(Clone, Debug)]
pub(crate) struct PowIntOp {
    base: Src,
    exponent: Src,
    held: super::int::Held,
    walk: Strided<2>,
}

impl PowIntOp {
    pub fn new(
        (base, base_shape): (Src, &[usize]),
        (exponent, held, exponent_shape): (Src, super::int::Held, &[usize]),
        out_shape: &[usize],
    ) -> PowIntOp {
        let rank = out_shape.len();
        let (sa, sb) = (
            broadcast_strides(base_shape, rank),
            broadcast_strides(exponent_shape, rank),
        );
        let strides: Vec<[usize; 2]> = sa.iter().zip(&sb).map(|(&x, &y)| [x, y]).collect();
        PowIntOp {
            base,
            exponent,
            held,
            walk: Strided::new(out_shape, &strides),
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let (x, e) = (sources.get(self.base), sources.bytes(self.exponent));
        self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
            for (j, d) in out[o..o + len].iter_mut().enumerate() {
                let (v, n) = (x[ia + j * sa] as f64, self.held.int(e, ib + j * sb));
                let m = v.abs().powf(n as f64);
                *d = (if v.is_sign_negative() && n % 2 != 0 {
                    -m
                } else {
                    m
                }) as f32;
            }
        });
    }
}

/// See [`Binary::Mod`]. `%` of two floats is exact, and so is moving a remainder of the
/// wrong sign by one divisor in f64 before the one rounding, which is the reference's
/// arithmetic: an infinite divisor then gives the divisor, a zero one NaN.
#[inline(always)]
fn float_mod(x: f32, y: f32, floored: bool) -> f32 {
    let r = x % y;
    if floored && r != 0.0 && (r < 0.0) != (y < 0.0) {
        (r as f64 + y as f64) as f32
    } else {
        r
    }
}

/// Softmax (or LogSoftmax) along one axis of a tensor seen as `[outer, axis, inner]`.
#[derive(Clone, Debug)]
pub(crate) struct SoftmaxOp {
    x: Src,
    log: bool,
    outer: usize,
    axis: usize,
    inner: usize,
}

impl SoftmaxOp {
    pub fn new(x: Src, shape: &[usize], axis: usize, log: bool) -> SoftmaxOp {
        SoftmaxOp {
            x,
            log,
            outer: shape[..axis].iter().product(),
            axis: shape[axis],
            inner: shape[axis + 1..].iter().product(),
        }
    }

    /// `exp(x - max) / sum(exp(x - max))`, the sum in f64. A NaN anywhere on the axis
    /// makes the whole slice NaN, and so does `+Inf` (as `Inf - Inf` is NaN), as in numpy.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        let (n, inner) = (self.axis, self.inner);
        if inner == 1 && n > 0 && !self.log {
            // The usual case (the last axis): contiguous rows, vectorized exp, the rows
            // shared among the threads.
            split(pool, x, out, n, |x, out| {
                // A closure, not the function item: see `rows`.
                #[allow(clippy::redundant_closure)]
                rows(
                    isa,
                    x,
                    out,
                    n,
                    #[inline(always)]
                    |r, o| softmax_row(r, o),
                )
            });
            return;
        }
        for o in 0..self.outer {
            for i in 0..inner {
                let base = o * n * inner + i;
                let at = |j: usize| base + j * inner;
                let max = (0..n).map(|j| x[at(j)]).fold(f32::NEG_INFINITY, nan_max);
                if self.log {
                    // x - max - ln(sum(exp(x - max))).
                    let d = |j: usize| x[at(j)] as f64 - max as f64;
                    let ln = (0..n).map(|j| d(j).exp()).sum::<f64>().ln();
                    for j in 0..n {
                        out[at(j)] = (d(j) - ln) as f32;
                    }
                    continue;
                }
                let mut sum = 0f64;
                for j in 0..n {
                    let e = (x[at(j)] - max).exp();
                    out[at(j)] = e;
                    sum += e as f64;
                }
                for j in 0..n {
                    out[at(j)] = (out[at(j)] as f64 / sum) as f32;
                }
            }
        }
    }
}

/// Softmax of one contiguous row: `exp` by the polynomial of `math.rs` (vectorizes), the
/// sum in f64 as in the general path.
#[inline(always)]
pub(crate) fn softmax_row(x: &[f32], out: &mut [f32]) {
    // Sixteen running maxima: one chain of dependent compare-and-selects over the row was
    // a third of a transformer's Softmax time.
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        lanes
            .iter_mut()
            .zip(c)
            .for_each(|(l, &v)| *l = nan_max(*l, v));
    }
    let max = chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .copied()
        .fold(f32::NEG_INFINITY, nan_max);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = super::math::exp(v - max);
    }
    // Eight partial sums: independent adds instead of one chain of dependent ones.
    let mut lanes = [0f64; 8];
    let mut chunks = out.chunks_exact(8);
    for c in &mut chunks {
        lanes.iter_mut().zip(c).for_each(|(l, &e)| *l += e as f64);
    }
    let rest: f64 = chunks.remainder().iter().map(|&e| e as f64).sum();
    let sum = lanes.iter().sum::<f64>() + rest;
    // `x - max` is NaN for every element when max is NaN or +Inf: the row stays NaN.
    let inv = 1.0 / sum;
    out.iter_mut().for_each(|o| *o = (*o as f64 * inv) as f32);
}

/// The larger of two values, NaN if either is NaN.
#[inline]
pub(crate) fn nan_max(acc: f32, v: f32) -> f32 {
    if v > acc || v.is_nan() {
        v
    } else {
        acc
    }
}
