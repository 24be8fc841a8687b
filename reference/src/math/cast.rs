//! Cast and CastLike between every pair of dtypes (rules in the family's module docs).

use baton_delegate_api::dtype::{push_float, push_int};
use baton_delegate_api::ir::{DType, Node};
use baton_delegate_api::minifloat::{encode_e8m0, E8M0Rounding};
use baton_delegate_api::{TensorMut, TensorRef};

use crate::data::{load_f64, load_ints};
use crate::{unsupported, KernelError};

/// Converts `x` to `out`'s dtype element by element (CastLike's second operand only
/// fixed that dtype).
pub(crate) fn cast(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    if x.dtype == out.dtype && x.dtype != DType::Bool {
        // The identity keeps every bit, NaN payloads included. (Bool is rewritten as 0/1.)
        out.data.copy_from_slice(x.data);
        return Ok(());
    }
    let saturate = node.attr_int("saturate", 1) != 0;
    let mode = node.attr_str("round_mode", "up");
    let rounding = E8M0Rounding::from_onnx(mode).ok_or_else(|| {
        unsupported(
            node,
            format!("round_mode '{mode}' (expected 'up', 'down' or 'nearest')"),
        )
    })?;
    let to = out.dtype;
    let mut bytes = Vec::with_capacity(out.data.len());
    if x.dtype.is_float() {
        for v in load_f64(x) {
            match to {
                DType::Bool => bytes.push((v != 0.0) as u8),
                DType::F8E8M0 => bytes.push(encode_e8m0(v, saturate, rounding)),
                d if d.is_float() => push_float(d, v, saturate, &mut bytes),
                // Truncation toward zero (`as` from f64 to i128 saturates and maps NaN
                // to 0), then into the 4- and 2-bit types the low bits (ONNX's test
                // data wraps), into the others saturation to the range.
                d if d.bits() < 8 => push_int(d, v as i128, &mut bytes),
                d => {
                    let (lo, hi) = d.int_range().expect("an integer dtype");
                    push_int(d, (v as i128).clamp(lo, hi), &mut bytes);
                }
            }
        }
    } else {
        for i in load_ints(x) {
            match to {
                // `as` from i128 to f32 rounds once. For the narrower floats the f64 step
                // is exact up to 2^53, and larger integers are beyond their range (bf16
                // aside, where a second rounding can differ in the last place).
                DType::F32 => bytes.extend_from_slice(&(i as f32).to_le_bytes()),
                DType::F8E8M0 => bytes.push(encode_e8m0(i as f64, saturate, rounding)),
                d if d.is_float() => push_float(d, i as f64, saturate, &mut bytes),
                // Integer to integer keeps the low bits: a two's complement wrap.
                d => push_int(d, i, &mut bytes),
            }
        }
    }
    out.data.copy_from_slice(&bytes);
    Ok(())
}

/// BitCast: each element's bit pattern under `out`'s dtype (same width, checked by the
/// shape rule). Byte-wide and wider types keep their bytes; the sub-byte types keep the
/// low bits of their byte and re-extend them as the target stores its values (signed
/// ints sign-extended, the others zero-extended). A bool must come out 0 or 1.
pub(crate) fn bit_cast(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let width = baton_delegate_api::shape::bit_cast_width(x.dtype);
    if width != baton_delegate_api::shape::bit_cast_width(out.dtype)
        || x.data.len() != out.data.len()
    {
        return Err(KernelError::Shape {
            node: node.label(),
            message: format!(
                "BitCast from {} to {}: the widths differ",
                x.dtype, out.dtype
            ),
        });
    }
    if width >= 8 {
        out.data.copy_from_slice(x.data);
    } else {
        let mask = (1u8 << width) - 1;
        let mut bytes = Vec::with_capacity(x.data.len());
        for &b in x.data {
            let bits = b & mask;
            match out.dtype {
                DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
                    push_int(out.dtype, i128::from(bits), &mut bytes)
                }
                _ => bytes.push(bits), // f4e2m1: the pattern in the low bits
            }
        }
        out.data.copy_from_slice(&bytes);
    }
    if out.dtype == DType::Bool {
        if let Some(b) = out.data.iter().find(|&&b| b > 1) {
            return Err(KernelError::Arithmetic {
                node: node.label(),
                message: format!(
                    "BitCast from {} gives the byte {b}, which is no bool (only 0 and 1 are)",
                    x.dtype
                ),
            });
        }
    }
    Ok(())
}
