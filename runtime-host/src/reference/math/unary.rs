//! Element-wise math and activations (Sqrt, Exp, Log, Erf, Ceil, LeakyRelu, HardSigmoid,
//! HardSwish, Gelu), Neg and Abs, and Pow.

use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_PI};

use baton_delegate_api::ir::{DType, Node, OpKind};
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::store_rounded;
use super::special::{erf, erfc};
use crate::reference::data::{broadcast_offsets, load, load_f32, store};
use crate::reference::{unsupported, KernelError};

/// The float-only element-wise ops: each f32 (or widened f16) value is mapped in f64 and
/// rounded once to the output dtype.
pub(crate) fn float_unary(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let f = scalar_fn(node)?;
    let r: Vec<f64> = load_f32(x).into_iter().map(|v| f(v as f64)).collect();
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
        DType::F16 => {
            let sign = 1u16 << 15;
            store(
                out,
                &map(x, |b: u16| if neg { b ^ sign } else { b & !sign }),
            )
        }
        DType::I8 => int!(i8),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        // Abs only (Neg refuses u8 in `supports`): every u8 is its own absolute value.
        DType::U8 if !neg => store(out, &load::<u8>(x)),
        d => return Err(unsupported(node, format!("{} on {d}", node.op))),
    }
    Ok(())
}

fn map<T: bytemuck::Pod>(x: &TensorRef<'_>, f: impl Fn(T) -> T) -> Vec<T> {
    load::<T>(x).into_iter().map(f).collect()
}

/// `base ^ exponent` broadcast to `out`'s shape. A float exponent goes through f64 `powf`
/// (C `pow` semantics); an integer exponent through [`pow_int`].
pub(crate) fn pow(
    base: &TensorRef<'_>,
    exponent: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let shape = out.shape().to_vec();
    let ib = broadcast_offsets(base.shape, &shape);
    let ie = broadcast_offsets(exponent.shape, &shape);
    let x = load_f32(base);
    let pairs = ib.iter().zip(&ie);
    let r: Vec<f64> = match exponent.dtype {
        DType::F32 | DType::F16 => {
            let y = load_f32(exponent);
            pairs
                .map(|(&i, &j)| (x[i] as f64).powf(y[j] as f64))
                .collect()
        }
        d => {
            let y = int_values(exponent, d);
            pairs.map(|(&i, &j)| pow_int(x[i] as f64, y[j])).collect()
        }
    };
    store_rounded(out, &r);
    Ok(())
}

/// The elements of an integer (or bool) tensor as i64, exactly.
pub(crate) fn int_values(t: &TensorRef<'_>, dtype: DType) -> Vec<i64> {
    match dtype {
        DType::I8 => load::<i8>(t).into_iter().map(i64::from).collect(),
        DType::U8 => load::<u8>(t).into_iter().map(i64::from).collect(),
        DType::Bool => load::<u8>(t).into_iter().map(|b| (b != 0) as i64).collect(),
        DType::I32 => load::<i32>(t).into_iter().map(i64::from).collect(),
        _ => load::<i64>(t),
    }
}

/// `x ^ n` for an integer `n`: the magnitude from `powf` and the sign from the exact
/// parity of `n` (an exponent beyond 2^53 is rounded by the f64 conversion, which may
/// change its parity; the magnitude is then 0, 1 or inf whatever the rounding).
fn pow_int(x: f64, n: i64) -> f64 {
    let magnitude = x.abs().powf(n as f64);
    if x.is_sign_negative() && n % 2 != 0 {
        -magnitude
    } else {
        magnitude
    }
}
