//! Cast between every pair of F32, F16, I8, U8, I32, I64 and Bool (rules in the family's
//! module docs).

use baton_delegate_api::ir::DType;
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::f16_bits;
use super::unary::int_values;
use crate::reference::data::{load_f32, store};
use crate::reference::KernelError;

/// The source elements in a form that holds each of them exactly.
enum Source {
    /// f32, or f16 widened.
    Float(Vec<f32>),
    /// Integers, and bools as 0 or 1.
    Int(Vec<i64>),
}

/// Converts `x` to `out`'s dtype element by element.
pub(crate) fn cast(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    if x.dtype == out.dtype && x.dtype != DType::Bool {
        // The identity keeps every bit, NaN payloads included. (Bool is rewritten as 0/1.)
        out.data.copy_from_slice(x.data);
        return Ok(());
    }
    let src = if x.dtype.is_float() {
        Source::Float(load_f32(x))
    } else {
        Source::Int(int_values(x, x.dtype))
    };
    // Float to integer with Rust's `as`: truncation toward zero, saturation at the
    // target's limits, NaN to 0. Integer to integer with `as`: the low bits, i.e. a
    // two's complement wrap, as ONNX specifies.
    macro_rules! to {
        ($t:ty, $from_float:expr, $from_int:expr) => {{
            let v: Vec<$t> = match &src {
                Source::Float(v) => v.iter().map(|&f| $from_float(f)).collect(),
                Source::Int(v) => v.iter().map(|&i| $from_int(i)).collect(),
            };
            store(out, &v)
        }};
    }
    match out.dtype {
        DType::F32 => to!(f32, |f| f, |i| i as f32),
        // An i64 beyond 2^53 is rounded by the f64 conversion, but any value that large is
        // far beyond f16's range (65504) and rounds to ±inf either way, so the result is
        // rounded once.
        DType::F16 => to!(u16, |f| f16_bits(f as f64), |i| f16_bits(i as f64)),
        DType::I8 => to!(i8, |f| f as i8, |i| i as i8),
        DType::U8 => to!(u8, |f| f as u8, |i| i as u8),
        DType::I32 => to!(i32, |f| f as i32, |i| i as i32),
        DType::I64 => to!(i64, |f| f as i64, |i| i),
        DType::Bool => to!(u8, |f| (f != 0.0) as u8, |i| (i != 0) as u8),
    }
    Ok(())
}
