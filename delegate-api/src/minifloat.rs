//! Conversions of the narrow float formats (bf16, f16, the float8 formats, float4 E2M1
//! and E8M0) to and from `f64`, with the rounding and overflow rules of ONNX's Cast.
//!
//! Written here rather than taken from a crate: the `float8` crate covers only E4M3FN and
//! E5M2 (no FNUZ variants, no E8M0, no float4) and has no notion of ONNX's `saturate`
//! flag, and the one crate that covers every format (`microfloat`) was a few weeks old
//! at version 0.1. One description per format (`Format`) drives one decoder and one
//! encoder, so each format is a line of parameters, tested against the bit patterns the
//! ONNX specification lists.
//!
//! Encoding rounds once, to nearest with ties to even, from the exact `f64` value (an f32
//! or f16 source widens exactly, so its conversion is correctly rounded too).
//! `half::f16::from_f64` is not used for the same reason the reference kernels avoid it:
//! it can round twice.

use crate::dtype::DType;

/// Bits of `v` in a 16-bit float format (`F16` or `BF16`), rounded to nearest-even;
/// out of range gives ±inf, NaN a quiet NaN of the same sign. `None` for other dtypes.
pub fn encode16(dtype: DType, v: f64) -> Option<u16> {
    let f = match dtype {
        DType::F16 => F16,
        DType::BF16 => BF16,
        _ => return None,
    };
    Some(f.encode(v, false) as u16)
}

/// The value of a one-byte float element (`f8*`, `f4e2m1` in the low four bits, or
/// `f8e8m0`); `None` for other dtypes.
pub fn decode(dtype: DType, bits: u8) -> Option<f64> {
    if dtype == DType::F8E8M0 {
        return Some(match bits {
            0xff => f64::NAN,
            b => pow2(b as i32 - 127),
        });
    }
    Some(format_of(dtype)?.decode(bits as u32))
}

/// The bits of `v` in a float8 or float4 format (`f4e2m1` in the low four bits), rounded
/// to nearest-even. Out of range (and ±inf): with `saturate`, the largest finite value of
/// the sign; without it, ±inf in E5M2 and NaN in the formats without infinities. float4
/// has neither infinities nor NaN: it always saturates, and NaN gives +6 (see
/// [`F4_NAN`]). `None` for other dtypes (E8M0 has [`encode_e8m0`]).
pub fn encode(dtype: DType, v: f64, saturate: bool) -> Option<u8> {
    Some(format_of(dtype)?.encode(v, saturate) as u8)
}

/// What float4 E2M1, which has no NaN, stores for NaN: `0x8`, the pattern of -0, as in
/// ONNX's backend test data (`test_cast_FLOAT_to_FLOAT4E2M1`); the specification leaves
/// it open.
pub const F4_NAN: u8 = 0x8;

/// How a value between two powers of two is rounded to E8M0 (ONNX Cast's `round_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum E8M0Rounding {
    /// To the larger power of two (`up`, ONNX's default).
    Up,
    /// To the smaller power of two (`down`).
    Down,
    /// To the nearer one, a tie (`1.5 * 2^e`) going up (`nearest`).
    Nearest,
}

impl E8M0Rounding {
    /// The mode an ONNX `round_mode` string names.
    pub fn from_onnx(mode: &str) -> Option<E8M0Rounding> {
        match mode {
            "up" => Some(E8M0Rounding::Up),
            "down" => Some(E8M0Rounding::Down),
            "nearest" => Some(E8M0Rounding::Nearest),
            _ => None,
        }
    }
}

/// The E8M0 bits of `v`: its binary exponent (bias 127), taken as ONNX defines it from
/// the f32 bit pattern of `|v|` (an f64 source is first rounded to f32): the exponent
/// field, plus one when `rounding` goes up. E8M0 has no zero and no sign, so 0 and f32
/// subnormals map to the smallest code, 0 (`2^-127`), or 1 when rounded up. NaN is
/// `0xFF`; ±inf and a code past `0xFE` are `0xFE` (`2^127`) with `saturate`, else NaN.
pub fn encode_e8m0(v: f64, saturate: bool, rounding: E8M0Rounding) -> u8 {
    if v.is_nan() {
        return 0xff;
    }
    let overflow = if saturate { 0xfe } else { 0xff };
    if v.is_infinite() {
        return overflow;
    }
    let bits = (v.abs() as f32).to_bits();
    let (exp, man) = (bits >> 23, bits & 0x7f_ffff);
    if exp == 0xff {
        // A finite f64 beyond f32's range.
        return overflow;
    }
    let up = match rounding {
        E8M0Rounding::Up => man != 0,
        E8M0Rounding::Down => false,
        E8M0Rounding::Nearest => man >= 0x40_0000,
    };
    match exp + up as u32 {
        0xff => overflow,
        code => code as u8,
    }
}

/// A binary float format: sign, `exp_bits` of exponent with `bias`, `man_bits` of
/// significand, and where it keeps its special values.
#[derive(Clone, Copy, Debug)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    special: Special,
}

/// Where a format keeps infinities and NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Special {
    /// IEEE: the top exponent is ±inf (significand 0) or NaN (f16, bf16, E5M2).
    Ieee,
    /// Only the all-ones pattern of either sign is NaN; no infinities (E4M3FN).
    AllOnesNan,
    /// The pattern of -0 is the one NaN; no infinities and no -0 (the FNUZ formats).
    NegZeroNan,
    /// Every pattern is finite (float4 E2M1).
    Finite,
}

const F16: Format = Format::new(5, 10, 15, Special::Ieee);
const BF16: Format = Format::new(8, 7, 127, Special::Ieee);
const E4M3FN: Format = Format::new(4, 3, 7, Special::AllOnesNan);
const E4M3FNUZ: Format = Format::new(4, 3, 8, Special::NegZeroNan);
const E5M2: Format = Format::new(5, 2, 15, Special::Ieee);
const E5M2FNUZ: Format = Format::new(5, 2, 16, Special::NegZeroNan);
const E2M1: Format = Format::new(2, 1, 1, Special::Finite);

fn format_of(dtype: DType) -> Option<Format> {
    Some(match dtype {
        DType::F16 => F16,
        DType::BF16 => BF16,
        DType::F8E4M3FN => E4M3FN,
        DType::F8E4M3FNUZ => E4M3FNUZ,
        DType::F8E5M2 => E5M2,
        DType::F8E5M2FNUZ => E5M2FNUZ,
        DType::F4E2M1 => E2M1,
        _ => return None,
    })
}

impl Format {
    const fn new(exp_bits: u32, man_bits: u32, bias: i32, special: Special) -> Format {
        Format {
            exp_bits,
            man_bits,
            bias,
            special,
        }
    }

    fn sign_bit(self) -> u32 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn exp_max(self) -> u32 {
        (1 << self.exp_bits) - 1
    }

    fn man_mask(self) -> u32 {
        (1 << self.man_bits) - 1
    }

    fn decode(self, bits: u32) -> f64 {
        let bits = bits & (self.sign_bit() * 2 - 1);
        let negative = bits & self.sign_bit() != 0;
        let e = (bits >> self.man_bits) & self.exp_max();
        let m = bits & self.man_mask();
        match self.special {
            Special::NegZeroNan if bits == self.sign_bit() => return f64::NAN,
            Special::Ieee if e == self.exp_max() && m == 0 => {
                return if negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            Special::Ieee if e == self.exp_max() => return f64::NAN,
            Special::AllOnesNan if e == self.exp_max() && m == self.man_mask() => return f64::NAN,
            _ => {}
        }
        // A subnormal has the exponent of the smallest normal and no implicit leading 1.
        let (significand, exp) = match e {
            0 => (m, 1 - self.bias),
            _ => (m | (1 << self.man_bits), e as i32 - self.bias),
        };
        let magnitude = significand as f64 * pow2(exp - self.man_bits as i32);
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The bits of the largest finite positive value.
    fn max_bits(self) -> u32 {
        match self.special {
            Special::Ieee => ((self.exp_max() - 1) << self.man_bits) | self.man_mask(),
            Special::AllOnesNan => (self.exp_max() << self.man_bits) | (self.man_mask() - 1),
            Special::NegZeroNan | Special::Finite => {
                (self.exp_max() << self.man_bits) | self.man_mask()
            }
        }
    }

    /// The bits of NaN with sign bits `sign` (formats without signed NaN ignore it).
    fn nan_bits(self, sign: u32) -> u32 {
        match self.special {
            // A quiet NaN: the top significand bit set.
            Special::Ieee => sign | (self.exp_max() << self.man_bits) | (1 << (self.man_bits - 1)),
            Special::AllOnesNan => sign | (self.exp_max() << self.man_bits) | self.man_mask(),
            Special::NegZeroNan => self.sign_bit(),
            Special::Finite => F4_NAN as u32,
        }
    }

    fn encode(self, v: f64, saturate: bool) -> u32 {
        let sign = if v.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        if v.is_nan() {
            return self.nan_bits(sign);
        }
        let overflow = match self.special {
            _ if saturate => sign | self.max_bits(),
            Special::Finite => sign | self.max_bits(),
            Special::Ieee => sign | (self.exp_max() << self.man_bits),
            _ => self.nan_bits(sign),
        };
        if v.is_infinite() {
            return overflow;
        }
        let a = v.abs();
        // The binade exponent of `a`, no lower than the smallest normal exponent, so that
        // subnormals share its quantum. An f64 subnormal reads as -1023 here.
        let e_min = 1 - self.bias;
        let e = (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(e_min);
        let quantum = e - self.man_bits as i32;
        // `a` in units of the quantum: scaling by a power of two is exact, so
        // `round_ties_even` is the only rounding. `r` lies in 0..=2^(man_bits+1).
        let r = (a * pow2(-quantum)).round_ties_even();
        if r * pow2(quantum) > self.decode(self.max_bits()) {
            return overflow;
        }
        if r == 0.0 {
            return match self.special {
                Special::NegZeroNan => 0,
                _ => sign,
            };
        }
        // Normal: ((e + bias) << man_bits) | (r - 2^man_bits); a subnormal (e = e_min,
        // r < 2^man_bits) has exponent field 0; r = 2^(man_bits+1) carries into the next
        // binade. One sum covers all three.
        let biased = (e + self.bias - 1) as u32;
        sign | ((biased << self.man_bits) + r as u32)
    }
}

/// `2^k` exactly, for `k` in f64's range (subnormals included).
fn pow2(k: i32) -> f64 {
    if k >= -1022 {
        f64::from_bits(((k + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (k + 1074))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(d: DType, v: f64) -> u8 {
        encode(d, v, true).unwrap()
    }

    fn enc_nosat(d: DType, v: f64) -> u8 {
        encode(d, v, false).unwrap()
    }

    fn dec(d: DType, b: u8) -> f64 {
        decode(d, b).unwrap()
    }

    #[test]
    fn e4m3fn_known_patterns() {
        let d = DType::F8E4M3FN;
        assert_eq!(dec(d, 0x7e), 448.0); // largest normal S.1111.110
        assert_eq!(dec(d, 0xfe), -448.0);
        assert!(dec(d, 0x7f).is_nan() && dec(d, 0xff).is_nan());
        assert_eq!(dec(d, 0x08), 2f64.powi(-6)); // smallest normal
        assert_eq!(dec(d, 0x01), 2f64.powi(-9)); // smallest subnormal
        assert_eq!(dec(d, 0x07), 7.0 * 2f64.powi(-9)); // largest subnormal
        assert_eq!(dec(d, 0x78), 256.0); // 1111.000 is a normal number, not inf
        assert_eq!(enc(d, 448.0), 0x7e);
        assert_eq!(enc(d, 1.0), 0x38);
        assert_eq!(enc(d, -0.0), 0x80);
        // 464 is the midpoint of 448 (even significand) and the would-be 480: to even.
        assert_eq!(enc_nosat(d, 464.0), 0x7e);
        assert_eq!(enc_nosat(d, 465.0), 0x7f);
        assert_eq!(enc_nosat(d, f64::INFINITY), 0x7f);
        assert_eq!(enc_nosat(d, f64::NEG_INFINITY), 0xff);
        assert_eq!(enc(d, 1e9), 0x7e);
        assert_eq!(enc(d, f64::NEG_INFINITY), 0xfe);
        assert_eq!(enc(d, f64::NAN), 0x7f);
        // Ties to even among subnormals: 1.5 and 2.5 quanta.
        assert_eq!(enc(d, 1.5 * 2f64.powi(-9)), 0x02);
        assert_eq!(enc(d, 2.5 * 2f64.powi(-9)), 0x02);
        // Half the smallest subnormal rounds to (signed) zero.
        assert_eq!(enc(d, -0.5 * 2f64.powi(-9)), 0x80);
        // The largest subnormal rounds up into the smallest normal.
        assert_eq!(enc(d, 7.5 * 2f64.powi(-9)), 0x08);
    }

    #[test]
    fn e4m3fnuz_known_patterns() {
        let d = DType::F8E4M3FNUZ;
        assert_eq!(dec(d, 0x7f), 240.0);
        assert_eq!(dec(d, 0xff), -240.0);
        assert!(dec(d, 0x80).is_nan());
        assert_eq!(dec(d, 0x01), 2f64.powi(-10));
        assert_eq!(dec(d, 0x08), 2f64.powi(-7));
        assert_eq!(enc(d, -0.0), 0x00); // no negative zero
        assert_eq!(enc(d, -1e-9), 0x00);
        assert_eq!(enc(d, 1.0), 0x40);
        assert_eq!(enc(d, 1e4), 0x7f);
        assert_eq!(enc(d, -1e4), 0xff);
        assert_eq!(enc_nosat(d, 1e4), 0x80);
        assert_eq!(enc_nosat(d, f64::NEG_INFINITY), 0x80);
        assert_eq!(enc(d, f64::NAN), 0x80);
    }

    #[test]
    fn e5m2_known_patterns() {
        let d = DType::F8E5M2;
        assert_eq!(dec(d, 0x7b), 57344.0);
        assert_eq!(dec(d, 0x7c), f64::INFINITY);
        assert_eq!(dec(d, 0xfc), f64::NEG_INFINITY);
        assert!(dec(d, 0x7d).is_nan() && dec(d, 0xff).is_nan());
        assert_eq!(dec(d, 0x01), 2f64.powi(-16));
        assert_eq!(dec(d, 0x04), 2f64.powi(-14));
        assert_eq!(enc(d, 1.0), 0x3c); // the high byte of f16 1.0 (0x3c00)
        assert_eq!(enc_nosat(d, 1e6), 0x7c);
        assert_eq!(enc_nosat(d, f64::NEG_INFINITY), 0xfc);
        assert_eq!(enc(d, f64::INFINITY), 0x7b);
        assert_eq!(enc(d, -1e6), 0xfb);
        // 61440 is the midpoint of 57344 (odd significand 11) and 65536: to even, inf.
        assert_eq!(enc_nosat(d, 61440.0), 0x7c);
        assert_eq!(enc_nosat(d, 61439.0), 0x7b);
        assert!(dec(d, enc(d, f64::NAN)).is_nan());
    }

    #[test]
    fn e5m2fnuz_known_patterns() {
        let d = DType::F8E5M2FNUZ;
        assert_eq!(dec(d, 0x7f), 57344.0);
        assert!(dec(d, 0x80).is_nan());
        assert_eq!(dec(d, 0x01), 2f64.powi(-17));
        assert_eq!(dec(d, 0x7c), 32768.0); // no infinities: the top exponent is normal
        assert_eq!(enc(d, 1.0), 0x40);
        assert_eq!(enc_nosat(d, f64::INFINITY), 0x80);
        assert_eq!(enc(d, f64::INFINITY), 0x7f);
        assert_eq!(enc(d, -0.0), 0x00);
    }

    #[test]
    fn e2m1_values_and_saturation() {
        let d = DType::F4E2M1;
        let all: Vec<f64> = (0..8).map(|b| dec(d, b)).collect();
        assert_eq!(all, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(dec(d, 0xf), -6.0);
        assert_eq!(dec(d, 0x8), -0.0);
        assert!(dec(d, 0x8).is_sign_negative());
        // 5 is the midpoint of 4 (significand 0) and 6: to even, 4. 2.5 likewise to 2.
        assert_eq!(enc(d, 5.0), 0x6);
        assert_eq!(enc(d, 2.5), 0x4);
        assert_eq!(enc(d, 0.25), 0x0);
        assert_eq!(enc(d, 0.26), 0x1);
        assert_eq!(enc_nosat(d, 100.0), 0x7);
        assert_eq!(enc_nosat(d, f64::NEG_INFINITY), 0xf);
        assert_eq!(enc(d, f64::NAN), 0x8); // as ONNX's test data has it
    }

    #[test]
    fn bf16_and_f16_round_once_to_even() {
        assert_eq!(encode16(DType::BF16, 1.0), Some(0x3f80));
        assert_eq!(encode16(DType::BF16, -2.0), Some(0xc000));
        // 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7: to even, 1.
        assert_eq!(encode16(DType::BF16, 1.0 + 2f64.powi(-8)), Some(0x3f80));
        // A hair above the midpoint rounds up, which an f32 detour would lose.
        let above = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(encode16(DType::BF16, above), Some(0x3f81));
        assert_eq!(encode16(DType::BF16, f64::MAX), Some(0x7f80));
        assert_eq!(encode16(DType::BF16, f64::NAN), Some(0x7fc0));
        assert_eq!(encode16(DType::F16, 65504.0), Some(0x7bff));
        assert_eq!(encode16(DType::F16, 65520.0), Some(0x7c00));
        assert_eq!(encode16(DType::F16, 2f64.powi(-24)), Some(0x0001));
        assert_eq!(encode16(DType::F16, -0.0), Some(0x8000));
        assert_eq!(encode16(DType::I8, 1.0), None);
    }

    #[test]
    fn every_pattern_round_trips() {
        for d in [
            DType::F8E4M3FN,
            DType::F8E4M3FNUZ,
            DType::F8E5M2,
            DType::F8E5M2FNUZ,
        ] {
            for b in 0..=255u8 {
                let v = dec(d, b);
                if !v.is_nan() {
                    assert_eq!(encode(d, v, false), Some(b), "{d} {b:#04x} = {v}");
                }
            }
        }
    }

    #[test]
    fn e8m0_rounding_modes() {
        let up = E8M0Rounding::Up;
        assert_eq!(encode_e8m0(1.0, true, up), 127);
        assert_eq!(encode_e8m0(1.5, true, up), 128);
        assert_eq!(encode_e8m0(1.5, true, E8M0Rounding::Down), 127);
        assert_eq!(encode_e8m0(1.5, true, E8M0Rounding::Nearest), 128);
        assert_eq!(encode_e8m0(1.49, true, E8M0Rounding::Nearest), 127);
        assert_eq!(encode_e8m0(-4.0, true, up), 129);
        assert_eq!(encode_e8m0(f64::NAN, true, up), 0xff);
        assert_eq!(encode_e8m0(f64::INFINITY, true, up), 0xfe);
        assert_eq!(encode_e8m0(f64::INFINITY, false, up), 0xff);
        assert_eq!(encode_e8m0(3e38, true, up), 0xfe);
        assert_eq!(encode_e8m0(3e38, false, up), 0xff);
        assert_eq!(encode_e8m0(0.0, true, up), 0);
        assert_eq!(decode(DType::F8E8M0, 127), Some(1.0));
        assert_eq!(decode(DType::F8E8M0, 0), Some(2f64.powi(-127)));
        assert_eq!(decode(DType::F8E8M0, 254), Some(2f64.powi(127)));
        assert!(decode(DType::F8E8M0, 255).unwrap().is_nan());
    }
}
