//! Mod, IsNaN and IsInf cases. Mod divisors avoid zero for integers (a remainder by zero
//! is an error there, not a value); float cases include zero and infinite divisors and
//! both `fmod` forms, and every sign combination of dividend and divisor.

use baton_delegate_api::DType::{F16, F32, I32, I64, I8, U8};
use baton_delegate_api::{Attr, DType};

use super::super::gen::{dims, tensor, Fill, SPECIALS, SPECIALS_F16};
use super::{specials, specials_f16, Sink, BINARY_SHAPES, UNARY_SHAPES};
use crate::error::Result;

fn fmod(v: i64) -> [(&'static str, Attr); 1] {
    [("fmod", Attr::Int(v))]
}

pub(super) fn modulo(s: &mut Sink) -> Result<()> {
    let (dividend, divisor) = (Fill::Range(-20.0, 20.0), Fill::Away(-6.0, 6.0, 0.5));
    for &(name, a, b) in &BINARY_SHAPES[..7] {
        for form in [0, 1] {
            s.with(F32, &format!("{name}_fmod{form}"), &fmod(form), |m| {
                m.input(a, &dividend).input(b, &divisor);
            })?;
        }
    }
    // Every special value against every other (zero and infinite divisors included).
    for (dtype, values) in [(F32, &SPECIALS[..]), (F16, &SPECIALS_F16[..])] {
        let (n, fill) = (values.len(), Fill::Cycle(values.to_vec()));
        for form in [0, 1] {
            s.with(
                dtype,
                &format!("special_pairs_fmod{form}"),
                &fmod(form),
                |m| {
                    m.input(&[n, 1], &fill).input(&[1, n], &fill);
                },
            )?;
        }
    }
    // Integers: the four sign combinations, both forms, divisors never zero.
    let signs = Fill::Cycle(vec![7.0, -7.0, 7.0, -7.0, 6.0, -6.0, 0.0, 1.0]);
    let divisors = Fill::Cycle(vec![3.0, 3.0, -3.0, -3.0, 3.0, -3.0, -5.0, -1.0]);
    for dtype in [I8, I32, I64, U8] {
        for form in [0, 1] {
            s.with(dtype, &format!("signs_fmod{form}"), &fmod(form), |m| {
                if dtype == U8 {
                    m.input(&[8], &Fill::Range(0.0, 255.0))
                        .input(&[8], &Fill::Range(1.0, 17.0));
                } else {
                    m.input(&[8], &signs).input(&[8], &divisors);
                }
            })?;
        }
        s.with(dtype, "bcast_2x1x3_4x1", &[], |m| {
            let lo = if dtype == U8 { 0.0 } else { -100.0 };
            m.input(&[2, 1, 3], &Fill::Range(lo, 100.0))
                .input(&[4, 1], &Fill::Range(1.0, 9.0));
        })?;
    }
    // The integer extremes: MIN % -1 is 0, MIN % MAX and MAX % MIN keep their exact values.
    for (dtype, lo, hi) in [
        (I32, i32::MIN as f64, i32::MAX as f64),
        (I64, -9.0e18, 9.0e18),
    ] {
        let x = tensor(dtype, &[4], &[lo, hi, lo, hi]);
        let y = tensor(dtype, &[4], &[-1.0, lo, hi, -1.0]);
        s.with(dtype, "extremes", &fmod(0), |m| {
            m.operand(x, false).operand(y, false);
        })?;
    }
    Ok(())
}

/// IsNaN and IsInf: ordinary values of every unary shape, the special values of f32 and
/// f16, and IsInf's `detect_negative` / `detect_positive` choices.
pub(super) fn classify(s: &mut Sink) -> Result<()> {
    for &shape in &UNARY_SHAPES[..6] {
        s.one(F32, &dims(shape), shape, &Fill::Range(-1e30, 1e30))?;
    }
    s.one(F32, "specials", &[12], &specials())?;
    s.one(F16, "specials", &[10], &specials_f16())?;
    s.one(DType::F64, "specials", &[12], &specials())?;
    if s.op == baton_delegate_api::OpKind::IsInf {
        for (name, neg, pos) in [
            ("negative_only", 1, 0),
            ("positive_only", 0, 1),
            ("neither", 0, 0),
        ] {
            let attrs = [
                ("detect_negative", Attr::Int(neg)),
                ("detect_positive", Attr::Int(pos)),
            ];
            s.one_with(F32, name, (&[12], &specials()), &attrs)?;
        }
    }
    Ok(())
}

/// ArgMax and ArgMin: each axis, both `keepdims`, ties broken either way (small integers
/// make ties frequent), NaN and infinities, and the integer dtypes.
pub(super) fn arg_extreme(s: &mut Sink) -> Result<()> {
    let ties = Fill::Cycle(vec![1.0, 3.0, 3.0, -2.0, 3.0, 0.0, -2.0]);
    for axis in [0i64, 1, 2, -1] {
        for keep in [1i64, 0] {
            for last in [0i64, 1] {
                let attrs = [
                    ("axis", Attr::Int(axis)),
                    ("keepdims", Attr::Int(keep)),
                    ("select_last_index", Attr::Int(last)),
                ];
                let a = if axis < 0 {
                    format!("neg{}", -axis)
                } else {
                    axis.to_string()
                };
                let desc = format!("3x4x5_axis{a}_keep{keep}_last{last}");
                s.one_with(F32, &desc, (&[3, 4, 5], &ties), &attrs)?;
            }
        }
    }
    s.one(F32, "random_1x33", &[1, 33], &Fill::Range(-10.0, 10.0))?;
    for last in [0i64, 1] {
        let attrs = [
            ("axis", Attr::Int(1)),
            ("select_last_index", Attr::Int(last)),
        ];
        s.one_with(
            F32,
            &format!("specials_last{last}"),
            (&[4, 12], &specials()),
            &attrs,
        )?;
    }
    s.one_with(
        F16,
        "specials",
        (&[2, 10], &specials_f16()),
        &[("axis", Attr::Int(1))],
    )?;
    for dtype in [I8, U8, I32, I64] {
        s.one_with(
            dtype,
            "ties_3x4x5_axis1",
            (&[3, 4, 5], &ties),
            &[("axis", Attr::Int(1))],
        )?;
    }
    Ok(())
}

/// Hardmax along each axis, with ties (small integers) and special values.
pub(super) fn hardmax(s: &mut Sink) -> Result<()> {
    let ties = Fill::Cycle(vec![1.0, 3.0, 3.0, -2.0, 3.0, 0.0, -2.0]);
    for axis in [0i64, 1, -1] {
        let a = if axis < 0 {
            format!("neg{}", -axis)
        } else {
            axis.to_string()
        };
        let attrs = [("axis", Attr::Int(axis))];
        s.one_with(F32, &format!("3x4x5_axis{a}"), (&[3, 4, 5], &ties), &attrs)?;
    }
    s.one(F32, "random_2x33", &[2, 33], &Fill::Range(-10.0, 10.0))?;
    s.one(F32, "specials", &[4, 12], &specials())?;
    s.one(F16, "specials", &[2, 10], &specials_f16())?;
    Ok(())
}

/// TopK: both outputs, largest and smallest, every axis, ties, specials, k of 0 and of
/// the whole axis, and integer dtypes.
pub(super) fn top_k(s: &mut Sink) -> Result<()> {
    let ties = Fill::Cycle(vec![1.0, 3.0, 3.0, -2.0, 3.0, 0.0, -2.0]);
    let mut case =
        |dtype: DType, desc: &str, shape: &[usize], fill: &Fill, k: i64, attrs: &[(&str, Attr)]| {
            let id = super::super::gen::case_id(s.op, dtype, desc);
            let mut rng = super::super::gen::Rng::for_id(&id);
            let x = super::super::gen::Draw::tensor(&mut rng, dtype, shape, fill);
            let kt = baton_delegate_api::Tensor::from_i64(&[1], &[k]);
            let c =
                super::multi_output_case(&id, s.op, dtype, &[(x, false), (kt, true)], attrs, 2)?;
            s.out.push(c);
            Ok::<(), crate::error::Error>(())
        };
    for axis in [0i64, 1, -1] {
        for largest in [1i64, 0] {
            let a = if axis < 0 {
                format!("neg{}", -axis)
            } else {
                axis.to_string()
            };
            let attrs = [("axis", Attr::Int(axis)), ("largest", Attr::Int(largest))];
            let desc = format!("3x4x5_axis{a}_largest{largest}_k2");
            case(F32, &desc, &[3, 4, 5], &ties, 2, &attrs)?;
        }
    }
    case(F32, "specials_k5", &[2, 12], &specials(), 5, &[])?;
    case(F32, "k0", &[3, 4], &Fill::Range(-1.0, 1.0), 0, &[])?;
    case(F32, "k_all", &[3, 4], &Fill::Range(-1.0, 1.0), 4, &[])?;
    case(F16, "k3", &[2, 10], &specials_f16(), 3, &[])?;
    for dtype in [I8, U8, I32, I64] {
        case(dtype, "ties_k3", &[3, 7], &ties, 3, &[])?;
    }
    Ok(())
}
