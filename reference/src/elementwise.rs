//! Add, Sub, Mul, Div (numpy broadcasting), Relu and Clip.

use baton_delegate_api::ir::{Attr, DType, Node, OpKind};
use baton_delegate_api::{TensorMut, TensorRef};
use half::f16;

use super::data::{broadcast_offsets, load, load_f32, load_f64, store, store_f32, store_floats};
use super::{shape_err, unsupported, KernelError};

/// Add/Sub/Mul/Div of two operands of one dtype, broadcast to `out`'s shape. Floats follow
/// IEEE arithmetic (f16 computed in f32, bf16 in f64, each rounded once); integers of
/// every width and signedness wrap, Div truncates toward zero and a zero divisor is an
/// error.
pub(crate) fn binary(
    node: &Node,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let out_shape = out.shape().to_vec();
    let ia = broadcast_offsets(a.shape, &out_shape);
    let ib = broadcast_offsets(b.shape, &out_shape);
    match a.dtype {
        DType::F32 | DType::F16 => {
            let op = float_op(node.op);
            let (x, y) = (load_f32(a), load_f32(b));
            let r: Vec<f32> = ia.iter().zip(&ib).map(|(&i, &j)| op(x[i], y[j])).collect();
            store_f32(out, &r);
            Ok(())
        }
        DType::F64 | DType::BF16 => {
            // f64 arithmetic, rounded once to the dtype: exact for f64 itself, and for
            // bf16 the single rounding of the f64 result (sums and products of two bf16
            // values are exact in f64).
            let op = f64_op(node.op);
            let (x, y) = (load_f64(a), load_f64(b));
            let r: Vec<f64> = ia.iter().zip(&ib).map(|(&i, &j)| op(x[i], y[j])).collect();
            store_floats(out, &r, false);
            Ok(())
        }
        DType::I8 => int_binary::<i8>(node, a, b, &ia, &ib, out),
        DType::U8 => int_binary::<u8>(node, a, b, &ia, &ib, out),
        DType::I16 => int_binary::<i16>(node, a, b, &ia, &ib, out),
        DType::U16 => int_binary::<u16>(node, a, b, &ia, &ib, out),
        DType::I32 => int_binary::<i32>(node, a, b, &ia, &ib, out),
        DType::U32 => int_binary::<u32>(node, a, b, &ia, &ib, out),
        DType::I64 => int_binary::<i64>(node, a, b, &ia, &ib, out),
        DType::U64 => int_binary::<u64>(node, a, b, &ia, &ib, out),
        d => Err(unsupported(node, format!("arithmetic on {d}"))),
    }
}

/// `max(x, 0)` as `if x < 0 { 0 } else { x }`: NaN and -0.0 pass through (see the module
/// docs of `reference`).
pub(crate) fn relu(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    fn relu_of<T: PartialOrd + Copy>(v: T, zero: T) -> T {
        if v < zero {
            zero
        } else {
            v
        }
    }
    match x.dtype {
        DType::F32 | DType::F16 => {
            let r: Vec<f32> = load_f32(x).into_iter().map(|v| relu_of(v, 0.0)).collect();
            store_f32(out, &r);
        }
        DType::I8 => store(out, &map(x, |v: i8| relu_of(v, 0))),
        DType::U8 => store(out, &load::<u8>(x)),
        DType::I32 => store(out, &map(x, |v: i32| relu_of(v, 0))),
        DType::I64 => store(out, &map(x, |v: i64| relu_of(v, 0))),
        d => return Err(unsupported(node, format!("Relu on {d}"))),
    }
    Ok(())
}

/// Clip to `[min, max]` from inputs 1 and 2 or the `min`/`max` attributes (see the module
/// docs of `reference` for NaN, bounds and integer rounding).
pub(crate) fn clip(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    match x.dtype {
        DType::F32 | DType::F16 => {
            // ONNX: absent bounds are the type's lowest and highest finite values, so
            // infinities are clipped to them (as ONNX Runtime does).
            let (lowest, highest) = if x.dtype == DType::F16 {
                (half::f16::MIN.to_f32(), half::f16::MAX.to_f32())
            } else {
                (f32::MIN, f32::MAX)
            };
            let lo = float_bound(node, inputs, 1, "min", lowest)?;
            let hi = float_bound(node, inputs, 2, "max", highest)?;
            let r: Vec<f32> = load_f32(x).into_iter().map(|v| clamp(v, lo, hi)).collect();
            store_f32(out, &r);
            Ok(())
        }
        DType::I8 => int_clip::<i8>(node, inputs, out),
        DType::U8 => int_clip::<u8>(node, inputs, out),
        DType::I32 => int_clip::<i32>(node, inputs, out),
        DType::I16 => int_clip::<i16>(node, inputs, out),
        DType::U16 => int_clip::<u16>(node, inputs, out),
        DType::U32 => int_clip::<u32>(node, inputs, out),
        DType::I64 => int_clip::<i64>(node, inputs, out),
        DType::U64 => int_clip::<u64>(node, inputs, out),
        d => Err(unsupported(node, format!("Clip on {d}"))),
    }
}

/// `min(max(x, lo), hi)` written with the comparisons that let NaN through.
fn clamp<T: PartialOrd + Copy>(v: T, lo: T, hi: T) -> T {
    let v = if v < lo { lo } else { v };
    if v > hi {
        hi
    } else {
        v
    }
}

fn map<T: bytemuck::Pod>(x: &TensorRef<'_>, f: impl Fn(T) -> T) -> Vec<T> {
    load::<T>(x).into_iter().map(f).collect()
}

fn f64_op(op: OpKind) -> fn(f64, f64) -> f64 {
    match op {
        OpKind::Sub => |a, b| a - b,
        OpKind::Mul => |a, b| a * b,
        OpKind::Div => |a, b| a / b,
        _ => |a, b| a + b,
    }
}

fn float_op(op: OpKind) -> fn(f32, f32) -> f32 {
    match op {
        OpKind::Sub => |a, b| a - b,
        OpKind::Mul => |a, b| a * b,
        OpKind::Div => |a, b| a / b,
        _ => |a, b| a + b,
    }
}

/// The integer element types of the arithmetic ops.
trait Int: bytemuck::Pod + PartialOrd {
    const LOWEST: i128;
    const HIGHEST: i128;
    /// `v`, which lies in `LOWEST..=HIGHEST`.
    fn from_i128(v: i128) -> Self;
    fn is_zero(self) -> bool;
    fn wrapping(op: OpKind, a: Self, b: Self) -> Self;
}

macro_rules! int_impl {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const LOWEST: i128 = <$t>::MIN as i128;
            const HIGHEST: i128 = <$t>::MAX as i128;
            fn from_i128(v: i128) -> Self {
                v as $t
            }
            fn is_zero(self) -> bool {
                self == 0
            }
            /// Wrapping arithmetic; Div truncates toward zero (`b` is not zero).
            fn wrapping(op: OpKind, a: Self, b: Self) -> Self {
                match op {
                    OpKind::Sub => a.wrapping_sub(b),
                    OpKind::Mul => a.wrapping_mul(b),
                    OpKind::Div => a.wrapping_div(b),
                    _ => a.wrapping_add(b),
                }
            }
        }
    )*};
}
int_impl!(i8, u8, i16, u16, i32, u32, i64, u64);

fn int_binary<T: Int>(
    node: &Node,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    ia: &[usize],
    ib: &[usize],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, y) = (load::<T>(a), load::<T>(b));
    let mut r = Vec::with_capacity(ia.len());
    for (k, (&i, &j)) in ia.iter().zip(ib).enumerate() {
        if node.op == OpKind::Div && y[j].is_zero() {
            return Err(KernelError::Arithmetic {
                node: node.label(),
                message: format!(
                    "integer division by zero (divisor element {j}, output element {k})"
                ),
            });
        }
        r.push(T::wrapping(node.op, x[i], y[j]));
    }
    store(out, &r);
    Ok(())
}

/// The single value of bound operand `index` if given and non-empty.
fn bound_operand<'a>(
    node: &Node,
    inputs: &'a [TensorRef<'a>],
    index: usize,
) -> Result<Option<&'a TensorRef<'a>>, KernelError> {
    match inputs.get(index) {
        Some(t) if t.len() == 1 => Ok(Some(t)),
        Some(t) if t.is_empty() => Ok(None),
        Some(t) => Err(shape_err(
            node,
            format!(
                "Clip bound operand {index} must hold one value, has shape {:?}",
                t.shape
            ),
        )),
        None => Ok(None),
    }
}

/// A bound attribute as f64 (`None` when absent).
fn bound_attr(node: &Node, name: &str) -> Result<Option<f64>, KernelError> {
    match node.attrs.get(name) {
        None => Ok(None),
        Some(Attr::Float(v)) => Ok(Some(*v as f64)),
        Some(Attr::Int(v)) => Ok(Some(*v as f64)),
        Some(other) => Err(shape_err(
            node,
            format!("attribute {name} must be a number, got {other:?}"),
        )),
    }
}

fn float_bound<'a>(
    node: &Node,
    inputs: &'a [TensorRef<'a>],
    index: usize,
    name: &str,
    default: f32,
) -> Result<f32, KernelError> {
    if let Some(t) = bound_operand(node, inputs, index)? {
        return Ok(load_f32(t)[0]);
    }
    let v = match node.attrs.get(name) {
        Some(Attr::Int(i)) => *i as f32,
        _ => bound_attr(node, name)?.map_or(default, |v| v as f32),
    };
    Ok(if inputs[0].dtype == DType::F16 {
        f16::from_f32(v).to_f32()
    } else {
        v
    })
}

/// An integer bound: operand value, exact integer attribute, or a float attribute rounded
/// inward (`ceil` for min, `floor` for max), saturated to `T`'s range.
fn int_bound<'a, T: Int>(
    node: &Node,
    inputs: &'a [TensorRef<'a>],
    index: usize,
    name: &str,
    is_min: bool,
) -> Result<T, KernelError> {
    if let Some(t) = bound_operand(node, inputs, index)? {
        return Ok(load::<T>(t)[0]);
    }
    let unbounded = if is_min { T::LOWEST } else { T::HIGHEST };
    let wide: i128 = match node.attrs.get(name) {
        Some(Attr::Int(v)) => *v as i128,
        _ => match bound_attr(node, name)? {
            Some(f) if f.is_nan() => unbounded,
            // `as` from f64 saturates (±inf to the i128 limits).
            Some(f) if is_min => f.ceil() as i128,
            Some(f) => f.floor() as i128,
            None => unbounded,
        },
    };
    Ok(T::from_i128(wide.clamp(T::LOWEST, T::HIGHEST)))
}

fn int_clip<T: Int>(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let lo = int_bound::<T>(node, inputs, 1, "min", true)?;
    let hi = int_bound::<T>(node, inputs, 2, "max", false)?;
    store(out, &map(&inputs[0], |v: T| clamp(v, lo, hi)));
    Ok(())
}
