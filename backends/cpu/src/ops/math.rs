//! Branch-free f32 approximations of `exp` and `erf`, written so that LLVM vectorizes
//! loops over them (the `std` functions are calls to libm, one element at a time), and
//! [`map`] and [`rows`], which compile such loops for the widest vectors the CPU runs.

use crate::gemm::Isa;

/// `e^x` to about 2 ulp: `x = n ln 2 + r` with `|r| <= ln 2 / 2`, `e^r` by a degree-6
/// minimax polynomial (Cephes' `expf` coefficients), `2^n` put into the exponent bits.
/// Inputs below -87.3 give about 1e-38 or less instead of subnormals; above 88.7 give
/// the largest finite powers instead of Inf; NaN stays NaN.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer, in registers.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.3, 88.7);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    // `t`'s low mantissa bits hold n as an integer (that is what adding 1.5 * 2^23 did),
    // so 2^n needs no float-to-int conversion, which would not vectorize. A NaN x makes
    // `er` NaN, and the product stays NaN.
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    er * f32::from_bits((ni.wrapping_add(127) as u32) << 23)
}

/// The error function to within 2e-7 absolute: for |x| >= 0.25 Abramowitz and Stegun 7.1.26,
/// `1 - t (a1 + t (a2 + ...)) e^{-x^2}` with `t = 1 / (1 + p |x|)`, odd in `x`
/// (so `erf(-0) = -0`); NaN stays NaN, `erf(±Inf) = ±1`.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_8) * t - 0.284_496_74) * t
        + 0.254_829_6)
        * t;
    let tail = (1.0 - poly * exp(-a * a)).copysign(x);
    // Near 0 the formula's 1e-9 residue at t = 1 would make erf(0) nonzero, and the
    // subtraction from 1 loses the relative precision of small results: there, the
    // Maclaurin series (error below 1e-10 for |x| < 0.25) is used instead.
    let x2 = x * x;
    let series = x
        * (std::f32::consts::FRAC_2_SQRT_PI
            * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0))))));
    if a < 0.25 {
        series
    } else {
        tail
    }
}

/// `tanh(x)` to about 1e-6 relative: the odd Taylor polynomial below |x| = 0.1 (where the
/// exp form would cancel), `1 - 2 / (e^{2|x|} + 1)` above, signed; branch-free so that
/// loops over it vectorize. NaN stays NaN, `tanh(±Inf) = ±1`.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let x2 = x * x;
    let series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
    let tail = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    if a < 0.1 {
        series
    } else {
        tail
    }
}

/// `1 / (1 + e^{-x})` with the polynomial `exp`, vectorizable.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// The largest |x| [`sin_cos`] reduces exactly: the quadrant number then has at most 20
/// bits, so its product with the 33-bit high part of pi/2 is exact in f64.
pub(crate) const SIN_COS_RANGE: f32 = 1_048_576.0;

/// `sin(x)`, `cos(x)` or `tan(x)` (by `f`: 0, 1, 2) of an f32 with |x| <= [`SIN_COS_RANGE`],
/// in f64 and rounded once, branch-free so that loops over it vectorize: `x = n pi/2 + r`
/// with |r| <= pi/4 (pi/2 in two parts, so that `r` keeps f64 precision even next to a
/// multiple of pi/2), Taylor polynomials of `sin r` and `cos r` to below 1e-16 relative,
/// and the quadrant `n mod 4` choosing among `±sin r`, `±cos r`. The result is within an
/// ulp of the correctly rounded one (the reference's libm f64 rounded to f32); larger
/// and non-finite inputs are the caller's to send to libm.
#[inline(always)]
pub(crate) fn sin_cos(x: f32, f: u8) -> f32 {
    const PIO2_HI: f64 = 1.570_796_326_734_125_6;
    const PIO2_LO: f64 = 6.077_100_506_506_192e-11;
    // 1.5 * 2^52: adding it rounds to an integer whose low bits sit in the mantissa.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    let v = x as f64;
    let t = v * std::f64::consts::FRAC_2_PI + ROUND;
    let n = t - ROUND;
    let q = t.to_bits() & 3;
    let r = (v - n * PIO2_HI) - n * PIO2_LO;
    let r2 = r * r;
    // 1/3!, 1/5!, ..., 1/15! and 1/2!, 1/4!, ..., 1/16!, alternating in Horner form.
    const S: [f64; 7] = [
        1.0 / 6.0,
        1.0 / 120.0,
        1.0 / 5040.0,
        1.0 / 362_880.0,
        1.0 / 39_916_800.0,
        1.0 / 6_227_020_800.0,
        1.0 / 1_307_674_368_000.0,
    ];
    const C: [f64; 8] = [
        1.0 / 2.0,
        1.0 / 24.0,
        1.0 / 720.0,
        1.0 / 40_320.0,
        1.0 / 3_628_800.0,
        1.0 / 479_001_600.0,
        1.0 / 87_178_291_200.0,
        1.0 / 20_922_789_888_000.0,
    ];
    let mut ps = S[6];
    for k in (0..6).rev() {
        ps = S[k] - r2 * ps;
    }
    let s = r * (1.0 - r2 * ps);
    let mut pc = C[7];
    for k in (0..7).rev() {
        pc = C[k] - r2 * pc;
    }
    let c = 1.0 - r2 * pc;
    // sin x = (s, c, -s, -c)[q], cos x = (c, -s, -c, s)[q]: an odd quadrant swaps the
    // two, and bit 1 of q (of q + 1 for the cosine) flips the sign; selects, no branch.
    let odd = q & 1 == 1;
    let (a, b) = if odd { (c, s) } else { (s, c) };
    let sin = f64::from_bits(a.to_bits() ^ ((q & 2) << 62));
    let cos = f64::from_bits(b.to_bits() ^ (((q + 1) & 2) << 62));
    (match f {
        0 => sin,
        1 => cos,
        _ => sin / cos,
    }) as f32
}

/// `out[i] = f(x[i])`, compiled for the vector width of `isa`. LLVM vectorizes plain
/// loops only for the baseline target (SSE2 on x86-64) unless they sit in a function with
/// wider features enabled: the loop is inside one such function per instruction set, so
/// that the small `f` is inlined into it.
#[inline(always)]
pub(crate) fn map(isa: Isa, x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    #[inline(always)]
    fn body(x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
        out.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
    }
    match isa {
        // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512F => unsafe { map_avx512(x, out, f) },
        // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { map_avx2(x, out, f) },
        _ => body(x, out, f),
    }
}

/// Runs `f` compiled for the vector width of `isa`, as [`map`] runs its loop: `f` must be
/// a closure marked `#[inline(always)]`, calling only `#[inline(always)]` functions, so
/// that its loops are inlined into the function with the features enabled (see [`rows`]).
#[inline(always)]
pub(crate) fn on_isa(isa: Isa, f: impl FnOnce()) {
    match isa {
        // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512F => unsafe { on_avx512(f) },
        // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { on_avx2(f) },
        _ => f(),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn on_avx512(f: impl FnOnce()) {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn on_avx2(f: impl FnOnce()) {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn map_avx512(x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    out.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn map_avx2(x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    out.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
}

/// `f(row, out_row)` for each `n`-long row of `x` and `out`, compiled for the vector
/// width of `isa` like [`map`].
///
/// `f` must be a closure marked `#[inline(always)]` (`rows(isa, x, out, n,
/// #[inline(always)] |r, o| ...)`): only inlined into the `#[target_feature]` loops below
/// is its body compiled for the CPU's vectors. Passed as a function item, or as a closure
/// the optimizer chose not to inline, it ran through a call compiled for the baseline
/// (SSE2: a transformer's Softmax and LayerNorm at a quarter of the AVX-512 width).
#[inline(always)]
pub(crate) fn rows(isa: Isa, x: &[f32], out: &mut [f32], n: usize, f: impl Fn(&[f32], &mut [f32])) {
    match isa {
        // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512F => unsafe { rows_avx512(x, out, n, f) },
        // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { rows_avx2(x, out, n, f) },
        _ => x
            .chunks_exact(n)
            .zip(out.chunks_exact_mut(n))
            .for_each(|(r, o)| f(r, o)),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_avx512(x: &[f32], out: &mut [f32], n: usize, f: impl Fn(&[f32], &mut [f32])) {
    x.chunks_exact(n)
        .zip(out.chunks_exact_mut(n))
        .for_each(|(r, o)| f(r, o));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2(x: &[f32], out: &mut [f32], n: usize, f: impl Fn(&[f32], &mut [f32])) {
    x.chunks_exact(n)
        .zip(out.chunks_exact_mut(n))
        .for_each(|(r, o)| f(r, o));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_a_few_ulp_of_libm() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let (got, want) = (exp(x), (x as f64).exp());
            let rel = ((got as f64 - want) / want).abs();
            assert!(rel < 3e-7, "exp({x}) = {got}, libm {want}");
            x += 0.037;
        }
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-200.0) < 1e-37);
    }

    #[test]
    fn tanh_and_sigmoid_are_close_to_libm() {
        let mut x = -12.0f32;
        while x < 12.0 {
            let want = (x as f64).tanh();
            let got = tanh(x) as f64;
            assert!(
                (got - want).abs() <= 2e-7 + 1e-6 * want.abs(),
                "tanh({x}) = {got}, libm {want}"
            );
            let want = 1.0 / (1.0 + (-x as f64).exp());
            assert!((sigmoid(x) as f64 - want).abs() < 2e-7, "sigmoid({x})");
            x += 0.0137;
        }
        assert!(tanh(f32::NAN).is_nan());
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert!(tanh(-0.0) == 0.0 && tanh(-0.0).is_sign_negative());
        assert!((tanh(1e-4) - 1e-4).abs() < 1e-11);
    }

    #[test]
    fn sin_cos_tan_are_within_an_ulp_of_libm() {
        let ulps = |a: f32, b: f32| (a.to_bits() as i64 - b.to_bits() as i64).abs();
        let check = |x: f32| {
            for (f, want) in [
                (0, (x as f64).sin()),
                (1, (x as f64).cos()),
                (2, (x as f64).tan()),
            ] {
                let got = sin_cos(x, f);
                assert!(
                    ulps(got, want as f32) <= 1,
                    "f{f}({x}) = {got}, libm {want}"
                );
            }
        };
        // Every 0.0137 in [-10, 10], then geometrically (0.01% apart) to the range's end.
        (0..1460).for_each(|i| check(-10.0 + i as f32 * 0.0137));
        let mut x = 10.0f32;
        while x <= SIN_COS_RANGE {
            check(x);
            check(-x);
            x *= 1.0001;
        }
        // Next to multiples of pi/2, where the reduction must keep its precision.
        for x in [
            std::f32::consts::FRAC_PI_2,
            std::f32::consts::PI,
            355.0,
            103_993.0,
            1e6,
        ] {
            for f in 0..3 {
                let want = match f {
                    0 => (x as f64).sin(),
                    1 => (x as f64).cos(),
                    _ => (x as f64).tan(),
                };
                assert!(ulps(sin_cos(x, f), want as f32) <= 1, "f{f}({x})");
            }
        }
    }

    #[test]
    fn erf_matches_known_values() {
        // erf(0.5), erf(1), erf(2) from tables.
        for (x, want) in [
            (0.5f32, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 3e-7, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + want).abs() < 3e-7);
        }
        assert_eq!(erf(6.0), 1.0);
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert!(erf(f32::NAN).is_nan());
        assert!(erf(-0.0) == 0.0 && erf(-0.0).is_sign_negative());
        assert!((erf(1e-3) - 1.128_378_8e-3).abs() < 3e-10, "{}", erf(1e-3));
    }
}
