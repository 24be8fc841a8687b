//! Cast and CastLike cases: every pair of the kit's dtypes, saturation of out-of-range
//! float-to-integer conversions, and the wide and narrow dtypes outside the kit's set.

use baton_delegate_api::DType::{Bool, F16, F32, I32, I64, I8, U8};
use baton_delegate_api::{Attr, DType, Tensor};

use super::super::gen::{dims, Draw, Fill, SPECIALS, SPECIALS_F16};
use super::super::KIT_DTYPES;
use super::{bools, int_fill, specials, Sink};
use crate::error::Result;

fn to(dtype: DType) -> [(&'static str, Attr); 1] {
    [("to", Attr::Int(dtype.onnx_code()))]
}

/// Every pair of dtypes on values inside the target's range (integer narrowing wraps,
/// which ONNX defines), then float-to-integer saturation and float specials.
pub(super) fn cast(s: &mut Sink) -> Result<()> {
    for from in KIT_DTYPES {
        for target in KIT_DTYPES {
            let fill = match (from, target) {
                (F32 | F16, F32 | F16 | Bool) => Fill::Mixed(SPECIALS_F16.to_vec(), -7e4, 7e4),
                // In range: truncation toward zero is the whole conversion.
                (F32 | F16, I8) => Fill::Range(-128.9, 127.9),
                (F32 | F16, U8) => Fill::Range(-0.9, 255.9),
                (F16, _) => Fill::Range(-65504.0, 65504.0),
                (F32, I32) => Fill::Range(-2e9, 2e9),
                (F32, _) => Fill::Range(-1e18, 1e18),
                // Integers over (most of) their range; narrowing wraps.
                _ => int_fill(from),
            };
            s.with(from, &format!("to_{}", target.name()), &to(target), |m| {
                let x = match from {
                    Bool => bools(&mut m.rng, &[33]),
                    _ => m.rng.tensor(from, &[33], &fill),
                };
                m.operand(x, false);
            })?;
        }
    }
    // ONNX leaves out-of-range float-to-integer conversions undefined; the reference
    // saturates (NaN to 0). These cases isolate that choice.
    for (from, values) in [(F32, &SPECIALS[..]), (F16, &SPECIALS_F16[..])] {
        let mut v = values.to_vec();
        v.extend([300.0, -300.0, 3e9, -3e9, 1e19, -1e19, 255.5, -128.5]);
        for target in [I8, U8, I32, I64] {
            let desc = format!("to_{}_saturate", target.name());
            s.one_with(
                from,
                &desc,
                (&[v.len()], &Fill::Cycle(v.clone())),
                &to(target),
            )?;
        }
    }
    for &shape in &[&[][..], &[0], &[2, 3, 4]] {
        let desc = format!("to_f16_{}", dims(shape));
        s.one_with(F32, &desc, (shape, &Fill::Range(-10.0, 10.0)), &to(F16))?;
    }
    s.one_with(F32, "to_f16_specials", (&[12], &specials()), &to(F16))?;
    wide_and_narrow_casts(s)
}

/// The dtypes outside [`KIT_DTYPES`], each from f32 (specials, values in range and, for
/// floats, beyond it; float8 also with `saturate = 0`) and back to f32.
fn wide_and_narrow_casts(s: &mut Sink) -> Result<()> {
    for target in DType::ALL.into_iter().filter(|d| !KIT_DTYPES.contains(d)) {
        let fill = match target.int_range() {
            // In range: truncation toward zero is the whole conversion.
            Some((lo, hi)) => Fill::Range(lo as f64 - 0.9, hi as f64 + 0.9),
            None => Fill::Mixed(SPECIALS.to_vec(), -500.0, 500.0),
        };
        let desc = format!("to_{}", target.name());
        s.one_with(F32, &desc, (&[33], &fill), &to(target))?;
        if target.name().starts_with("f8e") && target != DType::F8E8M0 {
            let [to_attr] = to(target);
            let attrs = [to_attr, ("saturate", Attr::Int(0))];
            s.one_with(F32, &format!("{desc}_no_saturate"), (&[33], &fill), &attrs)?;
        }
        s.with(target, "to_f32", &to(F32), |m| {
            let x = m.rng.tensor(target, &[33], &fill);
            m.operand(x, false);
        })?;
    }
    Ok(())
}

/// CastLike from f32 to the dtype of a constant one-element `like` operand.
pub(super) fn cast_like(s: &mut Sink) -> Result<()> {
    let targets = [
        F32,
        F16,
        I32,
        U8,
        Bool,
        DType::F64,
        DType::BF16,
        DType::F8E4M3FN,
        DType::I4,
    ];
    for target in targets {
        s.with(F32, &format!("like_{}", target.name()), &[], |m| {
            m.input(&[17], &Fill::Mixed(SPECIALS.to_vec(), -300.0, 300.0));
            m.operand(Tensor::zeros(target, &[1]), true);
        })?;
    }
    Ok(())
}

/// BitCast between dtypes of one width: floats to integers on specials (their bit
/// patterns include NaN and infinities), integers to floats on values whose patterns are
/// finite (a NaN's payload is the one thing a float comparison cannot check), bool to
/// and from bytes, the sub-byte types, and a scalar and an empty tensor.
pub(super) fn bit_cast(s: &mut Sink) -> Result<()> {
    use DType::{F64, I16, I2, I4, U16, U2, U32, U4};
    let pairs: [(DType, DType, Fill); 14] = [
        (F32, I32, specials()),
        (F32, U32, Fill::Range(-1e30, 1e30)),
        // 0 to 2e9 stays below 0x7F800000, the first non-finite f32 pattern.
        (I32, F32, Fill::Range(0.0, 2e9)),
        (F16, I16, Fill::Cycle(SPECIALS_F16.to_vec())),
        (U16, F16, Fill::Range(0.0, 31743.0)),
        (F64, I64, Fill::Range(-1e300, 1e300)),
        (I64, F64, Fill::Range(-4e18, 4e18)),
        (I8, U8, Fill::Range(-128.0, 127.0)),
        (U8, I8, Fill::Range(0.0, 255.0)),
        (Bool, U8, Fill::Range(0.0, 1.0)),
        (U8, Bool, Fill::Range(0.0, 1.0)),
        (I4, U4, Fill::Range(-8.0, 7.0)),
        (U4, I4, Fill::Range(0.0, 15.0)),
        (U2, I2, Fill::Range(0.0, 3.0)),
    ];
    for (from, target, fill) in pairs {
        s.with(from, &format!("to_{}", target.name()), &to(target), |m| {
            let x = match from {
                Bool => bools(&mut m.rng, &[33]),
                U8 if target == Bool => {
                    let b = bools(&mut m.rng, &[33]);
                    Tensor::from_bytes(U8, &[33], b.bytes())
                }
                _ => m.rng.tensor(from, &[33], &fill),
            };
            m.operand(x, false);
        })?;
    }
    for &shape in &[&[][..], &[0], &[2, 3, 4]] {
        let desc = format!("to_i32_{}", dims(shape));
        s.one_with(F32, &desc, (shape, &Fill::Range(-10.0, 10.0)), &to(I32))?;
    }
    Ok(())
}
