//! Element-wise math and activations (Sqrt, Exp, Log, Erf, Ceil, Floor, Round, Reciprocal,
//! the trigonometric and hyperbolic functions, LeakyRelu, HardSigmoid, HardSwish, Gelu),
//! Neg and Abs, and Pow.

use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_PI};

use baton_delegate_api::ir::{DType, Node, OpKind};
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::store_rounded;
use super::special::{erf, erfc};
use crate::data::{broadcast_offsets, load, load_f64, load_ints, store, store_ints};
use crate::{unsupported, KernelError};

/// The float-only element-wise ops: each f32 (or widened f16) value is mapped in f64 and
/// rounded once to the output dtype.
pub(crate) fn float_unary(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let f = scalar_fn(node)?;
    let r: Vec<f64> = load_f64(x).into_iter().map(f).collect();
    store_rounded(out, &r);
    Ok(())
}

/// The f64 function of a float-only element-wise op, with its attributes bound.
fn scalar_fn(node: &Node) -> Result<Box<dyn Fn(f64) -> f64>, KernelError> {
    // Attribute values are f32; widening keeps them exact, and products of an f32 (or
    // f16) value with them are exact in f64, so the final rounding is the only one.
    let attr = |name: &str, default: f32| node.attr_float(name, default) as f64;
    Ok(match node.op {
        OpKind::Sqrt => Box::new(f64::sqrt),
        OpKind::Exp => Box::new(f64::exp),
        OpKind::Log => Box::new(f64::ln),
        OpKind::Erf => Box::new(erf),
        OpKind::Ceil => Box::new(f64::ceil),
        OpKind::Floor => Box::new(f64::floor),
        OpKind::Round => Box::new(f64::round_ties_even),
        OpKind::Reciprocal => Box::new(|v| 1.0 / v),
        OpKind::Sin => Box::new(f64::sin),
        OpKind::Cos => Box::new(f64::cos),
        OpKind::Tan => Box::new(f64::tan),
        OpKind::Asin => Box::new(f64::asin),
        OpKind::Acos => Box::new(f64::acos),
        OpKind::Atan => Box::new(f64::atan),
        OpKind::Sinh => Box::new(f64::sinh),
        OpKind::Cosh => Box::new(f64::cosh),
        OpKind::Asinh => Box::new(f64::asinh),
        OpKind::Acosh => Box::new(f64::acosh),
        OpKind::Atanh => Box::new(f64::atanh),
        OpKind::LeakyRelu => {
            let alpha = attr("alpha", 0.01);
            Box::new(move |v| if v < 0.0 { alpha * v } else { v })
        }
        OpKind::HardSigmoid => {
            let (alpha, beta) = (attr("alpha", 0.2), attr("beta", 0.5));
            Box::new(move |v| clamp01(alpha * v + beta))
        }
        OpKind::HardSwish => Box::new(|v| v * clamp01(v / 6.0 + 0.5)),
        OpKind::Gelu => match node.attr_str("approximate", "none") {
            // x * Phi(x), with 1 + erf(x/√2) written as erfc(-x/√2) so that the result
            // keeps its precision where Phi(x) is tiny.
            "none" => Box::new(|v| 0.5 * v * erfc(-v * FRAC_1_SQRT_2)),
            // 0.5x(1 + tanh(z)) = x / (1 + exp(-2z)), z = sqrt(2/pi)(x + 0.044715x^3).
            "tanh" => Box::new(|v| {
                let z = FRAC_2_PI.sqrt() * (v + 0.044715 * v * v * v);
                v / (1.0 + (-2.0 * z).exp())
            }),
            other => {
                return Err(unsupported(
                    node,
                    format!("Gelu approximate '{other}' (expected 'none' or 'tanh')"),
                ))
            }
        },
        op => {
            return Err(unsupported(
                node,
                format!("{op} is not an element-wise float op"),
            ))
        }
    })
}

/// `max(0, min(1, v))`; `f64::clamp` lets NaN (and -0) through.
fn clamp01(v: f64) -> f64 {
    v.clamp(0.0, 1.0)
}

/// Neg and Abs. Floats change only the sign bit (exact for f16 too, and NaN payloads
/// survive); integers wrap.
pub(crate) fn neg_abs(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let neg = node.op == OpKind::Neg;
    macro_rules! int {
        ($t:ty) => {{
            let f = if neg {
                <$t>::wrapping_neg
            } else {
                <$t>::wrapping_abs
            };
            store(out, &map(x, f))
        }};
    }
    match x.dtype {
        DType::F32 => {
            let sign = 1u32 << 31;
            store(
                out,
                &map(x, |b: u32| if neg { b ^ sign } else { b & !sign }),
            )
        }
        DType::F64 => {
            let sign = 1u64 << 63;
            store(
                out,
                &map(x, |b: u64| if neg { b ^ sign } else { b & !sign }),
            )
        }
        DType::F16 | DType::BF16 => {
            let sign = 1u16 << 15;
            store(
                out,
                &map(x, |b: u16| if neg { b ^ sign } else { b & !sign }),
            )
        }
        DType::I8 => int!(i8),
        DType::I16 => int!(i16),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        // Abs only (Neg refuses unsigned types in `supports`): every unsigned value is
        // its own absolute value.
        DType::U8 | DType::U16 | DType::U32 | DType::U64 if !neg => {
            out.data.copy_from_slice(x.data)
        }
        d => return Err(unsupported(node, format!("{} on {d}", node.op))),
    }
    Ok(())
}

fn map<T: bytemuck::Pod>(x: &TensorRef<'_>, f: impl Fn(T) -> T) -> Vec<T> {
    load::<T>(x).into_iter().map(f).collect()
}

/// `base ^ exponent` broadcast to `out`'s shape. A float base with a float exponent goes
/// through f64 `powf` (C `pow` semantics), with an integer exponent through [`pow_int`];
/// an integer base through [`int_pow`] (see the family's module docs).
pub(crate) fn pow(
    base: &TensorRef<'_>,
    exponent: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let shape = out.shape().to_vec();
    let ib = broadcast_offsets(base.shape, &shape);
    let ie = broadcast_offsets(exponent.shape, &shape);
    let pairs = ib.iter().zip(&ie);
    if base.dtype.is_int() {
        let x = load_ints(base);
        let r: Vec<i128> = if exponent.dtype.is_float() {
            let y = load_f64(exponent);
            let (lo, hi) = base.dtype.int_range().expect("an integer dtype");
            // `as` truncates toward zero and saturates (NaN to 0).
            pairs
                .map(|(&i, &j)| ((x[i] as f64).powf(y[j]) as i128).clamp(lo, hi))
                .collect()
        } else {
            let y = load_ints(exponent);
            pairs.map(|(&i, &j)| int_pow(x[i], y[j])).collect()
        };
        store_ints(out, &r);
        return Ok(());
    }
    let x = load_f64(base);
    let r: Vec<f64> = if exponent.dtype.is_float() {
        let y = load_f64(exponent);
        pairs.map(|(&i, &j)| x[i].powf(y[j])).collect()
    } else {
        let y = load_ints(exponent);
        pairs.map(|(&i, &j)| pow_int(x[i], y[j])).collect()
    };
    store_rounded(out, &r);
    Ok(())
}

/// `x ^ n` in wrapping 64-bit integer arithmetic (the caller keeps the low bits of the
/// base's type, so the result is the same as wrapping in that type). A negative `n`
/// gives `1 / x^|n|` truncated: ±1 for a base of ±1, 0 otherwise (and for 0, whose
/// reciprocal is undefined, 0 as well).
fn int_pow(x: i128, n: i128) -> i128 {
    if n < 0 {
        return match x {
            1 => 1,
            -1 => 1 - 2 * (n & 1),
            _ => 0,
        };
    }
    let (mut base, mut e, mut acc) = (x as i64, n as u128, 1i64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc as i128
}

/// `x ^ n` for an integer `n`: the magnitude from `powf` and the sign from the exact
/// parity of `n` (an exponent beyond 2^53 is rounded by the f64 conversion, which may
/// change its parity; the magnitude is then 0, 1 or inf whatever the rounding).
fn pow_int(x: f64, n: i128) -> f64 {
    let magnitude = x.abs().powf(n as f64);
    if x.is_sign_negative() && n % 2 != 0 {
        -magnitude
    } else {
        magnitude
    }
}
