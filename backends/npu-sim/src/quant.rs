//! Fixed-point requantization, the integer arithmetic every command ends with.
//!
//! A real multiplier `M > 0` (such as `x_scale * w_scale / y_scale`) is stored as a pair
//! `(m, shift)` with `m` a 31-bit integer in `[2^30, 2^31)` and `M ≈ m · 2^-shift`. It is
//! applied to an integer `v` as
//!
//! ```text
//! apply(v) = round_half_away_from_zero(v · m / 2^shift)
//! ```
//!
//! computed exactly in 128-bit integers: one multiplication and one rounding shift. This
//! is the single-rounding form of TOSA `RESCALE` (`double_round = false`) rather than
//! TFLite's reference kernels, which round twice (a doubling high multiply, then a
//! rounding shift); single rounding is never further from the exact real product and is
//! what Ethos-U class hardware implements. The only errors against the float reference
//! are the multiplier's own quantization (relative 2^-31) and the tie rule (the
//! reference's QuantizeLinear rounds half to even), so results agree within one step.

/// A real multiplier as a 31-bit mantissa and a right shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requant {
    /// The mantissa, in `[2^30, 2^31)`, or 0 for a multiplier too small to matter.
    pub mult: i32,
    /// The right shift, `0..=MAX_SHIFT`.
    pub shift: u8,
}

/// The largest shift a command may carry; larger ones would only produce zeros.
pub const MAX_SHIFT: u8 = 62;

impl Requant {
    /// The nearest representable multiplier to `real`, or `None` when `real` is not a
    /// finite positive number below 2^31 (no real layer needs one).
    pub fn from_real(real: f64) -> Option<Requant> {
        if !real.is_finite() || real < 0.0 || real >= (1u64 << 31) as f64 {
            return None;
        }
        if real == 0.0 {
            return Some(Requant { mult: 0, shift: 0 });
        }
        // real = f · 2^e with f in [0.5, 1).
        let mut e = real.log2().floor() as i32 + 1;
        let mut f = real / 2f64.powi(e);
        if f >= 1.0 {
            f /= 2.0;
            e += 1;
        }
        if f < 0.5 {
            f *= 2.0;
            e -= 1;
        }
        let mut m = (f * (1u64 << 31) as f64).round() as i64;
        if m == 1 << 31 {
            m >>= 1;
            e += 1;
        }
        let shift = 31 - e;
        if shift > MAX_SHIFT as i32 {
            return Some(Requant { mult: 0, shift: 0 });
        }
        if shift < 0 {
            return None;
        }
        Some(Requant {
            mult: m as i32,
            shift: shift as u8,
        })
    }

    /// `round_half_away_from_zero(v · mult / 2^shift)`.
    pub fn apply(self, v: i64) -> i64 {
        shift_round(v as i128 * self.mult as i128, self.shift) as i64
    }
}

/// `round_half_away_from_zero(v / 2^shift)`.
pub fn shift_round(v: i128, shift: u8) -> i128 {
    if shift == 0 {
        return v;
    }
    let half = 1i128 << (shift - 1);
    if v >= 0 {
        (v + half) >> shift
    } else {
        -((-v + half) >> shift)
    }
}

/// `round_half_away_from_zero(num / den)` for `den > 0`.
pub fn div_round(num: i128, den: i128) -> i128 {
    if num >= 0 {
        (num + den / 2) / den
    } else {
        -((-num + den / 2) / den)
    }
}

/// What the reference's QuantizeLinear gives for the real value `v`: f32 division, round
/// half to even, zero point added, saturated to int8. Used only at compile time, to turn
/// Relu/Clip bounds into integer clamps (Q is monotonic, so `Q(clamp(v, a, b))` equals
/// `clamp(Q(v), Q(a), Q(b))` exactly).
pub fn quantize_like_reference(v: f32, scale: f32, zero_point: i32) -> i32 {
    let r = (v / scale).round_ties_even();
    if r.is_nan() {
        return zero_point;
    }
    (r as i64 + zero_point as i64).clamp(-128, 127) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipliers_round_trip() {
        for real in [1.0, 0.5, 0.75, 1e-3, 3.3e-5, 123.456, 2.0f64.powi(-30)] {
            let r = Requant::from_real(real).unwrap();
            let back = r.mult as f64 * 2f64.powi(-(r.shift as i32));
            assert!(
                (back - real).abs() <= real * 1e-9,
                "{real}: {r:?} gives {back}"
            );
            assert!(r.mult >= 1 << 30);
        }
        assert_eq!(Requant::from_real(0.0).unwrap().mult, 0);
        // Below 2^-31 the product of any int32 with it rounds to zero.
        assert_eq!(Requant::from_real(2.0f64.powi(-40)).unwrap().mult, 0);
        assert!(Requant::from_real(-1.0).is_none());
        assert!(Requant::from_real(f64::NAN).is_none());
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(shift_round(3, 1), 2); // 1.5 -> 2
        assert_eq!(shift_round(-3, 1), -2); // -1.5 -> -2
        assert_eq!(shift_round(5, 2), 1); // 1.25 -> 1
        assert_eq!(shift_round(-5, 2), -1);
        assert_eq!(div_round(7, 2), 4);
        assert_eq!(div_round(-7, 2), -4);
        let half = Requant::from_real(0.5).unwrap();
        assert_eq!(half.apply(3), 2);
        assert_eq!(half.apply(-3), -2);
    }
}
