//! Storing f64 results with a single rounding to the output dtype.
//!
//! `half::f16::from_f64` is not correctly rounded: on x86 with F16C it converts through
//! f32 (two roundings), and its software path ignores the low 32 bits of the f64
//! significand. Either can land on an f16 midpoint that the exact value is not on, and
//! then round the wrong way (about one value in a few thousand). The family's kernels
//! therefore round f64 to f16 here.

use baton_delegate_api::ir::DType;
use baton_delegate_api::TensorMut;

use crate::data::{store, store_floats};

/// Overwrites a float output with `values`, each rounded once to nearest-even.
pub(crate) fn store_rounded(out: &mut TensorMut<'_>, values: &[f64]) {
    match out.dtype {
        DType::F16 => {
            let bits: Vec<u16> = values.iter().map(|&v| f16_bits(v)).collect();
            store(out, &bits);
        }
        DType::F32 => {
            // `as` from f64 to f32 rounds to nearest-even (overflow to ±inf).
            let v: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            store(out, &v);
        }
        _ => store_floats(out, values, false),
    }
}

/// The bits of the f16 nearest to `v` (ties to even; beyond the range ±inf; NaN a quiet
/// NaN of the same sign).
pub(crate) fn f16_bits(v: f64) -> u16 {
    let sign: u16 = if v.is_sign_negative() { 0x8000 } else { 0 };
    if v.is_nan() {
        return sign | 0x7e00;
    }
    let a = v.abs();
    // 65520 is the midpoint between the largest f16, 65504 (odd significand), and 2^16:
    // the tie goes to the even side, infinity.
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // The binade exponent of `a`, no lower than f16's smallest normal exponent (-14), so
    // that subnormals share its quantum 2^-24. An f64 subnormal reads as -1023 here.
    let biased = ((a.to_bits() >> 52) & 0x7ff) as i32;
    let e = (biased - 1023).max(-14);
    // `a` in units of the f16 quantum of its binade: dividing by a power of two is exact,
    // so `round_ties_even` is the only rounding. `r` lies in 0..=2048; 2048 carries into
    // the next binade through the addition below.
    let r = (a / 2f64.powi(e - 10)).round_ties_even() as i32;
    let bits = ((e + 15) << 10) + r - 1024;
    sign | bits as u16
}
