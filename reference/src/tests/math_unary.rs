//! Element-wise math and activations, Neg/Abs and Pow. Expected values are written out
//! literally (f32 roundings of the exact values, computed independently).

use super::*;

const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

fn unary(op: OpKind, attrs: &[(&str, Attr)], values: &[f32]) -> Vec<f32> {
    let x = f32t(&[values.len()], values);
    run_f32(&node(op, 1, attrs), &[x]).1
}

#[test]
fn sqrt_exp_log_follow_ieee() {
    let got = unary(OpKind::Sqrt, &[], &[4., 2., 0., -0., -1., INF, NAN, 1e-40]);
    // sqrt(2) and the root of the subnormal f32 nearest 1e-40, rounded to f32.
    let want = [
        2.,
        std::f32::consts::SQRT_2,
        0.,
        -0.,
        NAN,
        INF,
        NAN,
        9.999_973e-21,
    ];
    assert_bits(&got, &want);
    let got = unary(
        OpKind::Exp,
        &[],
        &[0., 1., -1., 88.7, 89., -100., -104., -INF, INF, NAN],
    );
    let want = [
        1.,
        2.718_281_7,
        0.367_879_45,
        3.325_976_9e38,
        INF,
        3.8e-44,
        0.,
        0.,
        INF,
        NAN,
    ];
    assert_bits(&got, &want);
    let got = unary(
        OpKind::Log,
        &[],
        &[1., 2., 0.5, 0., -0., -1., INF, NAN, 1e-40],
    );
    let want = [
        0.,
        std::f32::consts::LN_2,
        -std::f32::consts::LN_2,
        -INF,
        -INF,
        NAN,
        INF,
        NAN,
        -92.103_41,
    ];
    assert_bits(&got, &want);
}

#[test]
fn f16_results_are_rounded_once_from_the_exact_value() {
    // exp(0.007297515869140625) = 1.0073242076...: nearest f16 is 1.0068359375, but
    // rounding to f32 first lands on the f16 midpoint 1.00732421875, which then rounds
    // (to even) up to 1.0078125.
    let x = f16t(&[2], &[1913. / 262_144., 1.0]);
    let out = run(&node(OpKind::Exp, 1, &[]), &[x]).unwrap();
    assert_eq!(f16_values(&out), vec![1031. / 1024., 2.71875]);
    // LeakyRelu: 0.01f32 * -8.940696716308594e-6 = -8.94e-8 is nearer -2^-24 than -2^-23,
    // while its f32 rounding is the midpoint.
    let x = f16t(&[1], &[-150. / 16_777_216.]);
    let out = run(&node(OpKind::LeakyRelu, 1, &[]), &[x]).unwrap();
    assert_eq!(f16_values(&out), vec![-5.960_464_5e-8]);
}

#[test]
fn f16_rounding_is_correct_at_every_midpoint() {
    use super::super::math::rounding::f16_bits;
    // Each pair of neighbouring non-negative f16 values (the last pair is 65504 and the
    // first value past the range, 2^16, which stands for inf), checked at the values,
    // at their midpoint (a tie: to the even bit pattern) and just either side of it.
    for lo_bits in 0u16..0x7c00 {
        let hi_bits = lo_bits + 1;
        let lo = f16::from_bits(lo_bits).to_f64();
        let hi = if hi_bits == 0x7c00 {
            65536.0
        } else {
            f16::from_bits(hi_bits).to_f64()
        };
        let mid = (lo + hi) / 2.0;
        let even = if lo_bits % 2 == 0 { lo_bits } else { hi_bits };
        let above = f64::from_bits(mid.to_bits() + 1);
        let below = f64::from_bits(mid.to_bits() - 1);
        for (v, want) in [
            (lo, lo_bits),
            (mid, even),
            (above, hi_bits),
            (below, lo_bits),
        ] {
            assert_eq!(f16_bits(v), want, "{v:e}");
            assert_eq!(f16_bits(-v), want | 0x8000, "{:e}", -v);
        }
    }
    assert_eq!(f16_bits(f64::INFINITY), 0x7c00);
    assert_eq!(f16_bits(1e300), 0x7c00);
    assert_eq!(f16_bits(-1e-300), 0x8000);
    assert_eq!(f16_bits(f64::from_bits(1)), 0);
    assert!(f16::from_bits(f16_bits(f64::NAN)).is_nan());
}

#[test]
fn erf_values_and_limits() {
    let got = unary(
        OpKind::Erf,
        &[],
        &[0., -0., 0.5, -1., 2., 3., 1e-3, 4.5, 10., INF, -INF, NAN],
    );
    let want = [
        0.,
        -0.,
        0.520_499_9,
        -0.842_700_8,
        0.995_322_3,
        0.999_977_9,
        0.001_128_378_8,
        1.,
        1.,
        1.,
        -1.,
        NAN,
    ];
    assert_bits(&got, &want);
}

#[test]
fn neg_and_abs_flip_only_the_sign_of_floats() {
    let x = [0., -0., 1.5, -INF, NAN, -1e-40];
    assert_bits(
        &unary(OpKind::Neg, &[], &x),
        &[-0., 0., -1.5, INF, NAN, 1e-40],
    );
    assert_bits(
        &unary(OpKind::Abs, &[], &x),
        &[0., 0., 1.5, INF, NAN, 1e-40],
    );
    // A NaN payload survives (the sign bit aside).
    let payload = f32::from_bits(0x7fc0_1234);
    let got = unary(OpKind::Neg, &[], &[payload]);
    assert_eq!(got[0].to_bits(), 0xffc0_1234);
    let out = run(
        &node(OpKind::Neg, 1, &[]),
        &[f16t(&[3], &[65504., -0., 2.5])],
    )
    .unwrap();
    assert_bits(&f16_values(&out), &[-65504., 0., -2.5]);
}

#[test]
fn neg_and_abs_wrap_integers() {
    let i8s = typed(DType::I8, &[4], &[i8::MIN, -1, 0, 127]);
    let out = run(&node(OpKind::Neg, 1, &[]), std::slice::from_ref(&i8s)).unwrap();
    assert_eq!(out.values::<i8>(), &[i8::MIN, 1, 0, -127]);
    let out = run(&node(OpKind::Abs, 1, &[]), &[i8s]).unwrap();
    assert_eq!(out.values::<i8>(), &[i8::MIN, 1, 0, 127]);
    let x = typed(DType::I32, &[3], &[i32::MIN, -7, i32::MAX]);
    let out = run(&node(OpKind::Neg, 1, &[]), &[x]).unwrap();
    assert_eq!(out.values::<i32>(), &[i32::MIN, 7, -i32::MAX]);
    let x = typed(DType::I64, &[2], &[i64::MIN, -5]);
    let out = run(&node(OpKind::Abs, 1, &[]), &[x]).unwrap();
    assert_eq!(out.values::<i64>(), &[i64::MIN, 5]);
    let x = typed(DType::U8, &[2], &[0u8, 255]);
    let out = run(&node(OpKind::Abs, 1, &[]), std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.values::<u8>(), &[0, 255]);
    let err = run(&node(OpKind::Neg, 1, &[]), &[x]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let b = typed(DType::Bool, &[1], &[1u8]);
    let err = run(&node(OpKind::Abs, 1, &[]), &[b]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

#[test]
fn leaky_relu_alpha() {
    let x = [-2., -0., 0., 3., NAN, -INF];
    // 0.01f32 * -2 = -0.019999999552965164, which is the f32 nearest -0.02.
    let want = [-0.02, -0., 0., 3., NAN, -INF];
    assert_bits(&unary(OpKind::LeakyRelu, &[], &x), &want);
    let got = unary(
        OpKind::LeakyRelu,
        &[("alpha", Attr::Float(0.1))],
        &[-3., 2.],
    );
    assert_bits(&got, &[-0.3, 2.]);
    // An integer attribute is read as a float.
    let got = unary(OpKind::LeakyRelu, &[("alpha", Attr::Int(2))], &[-3., 2.]);
    assert_bits(&got, &[-6., 2.]);
}

#[test]
fn hard_sigmoid_and_hard_swish() {
    let x = [-3., -2.5, 0., 1., -1., 2.5, 3., NAN, INF, -INF];
    // 0.2f32 * x + 0.5, clamped to [0, 1].
    let want = [0., 0., 0.5, 0.7, 0.3, 1., 1., NAN, 1., 0.];
    assert_bits(&unary(OpKind::HardSigmoid, &[], &x), &want);
    let attrs = [("alpha", Attr::Float(0.5)), ("beta", Attr::Float(0.25))];
    let got = unary(OpKind::HardSigmoid, &attrs, &[1., -1., 0.5, 1.5]);
    assert_bits(&got, &[0.75, 0., 0.5, 1.]);

    let x = [-4., -3., -1., 0., 0.5, 1., 2., 3., 4., NAN, INF, -INF];
    // x * clamp(x/6 + 1/2): -1 -> -1/3, 0.5 -> 7/24, 2 -> 5/3; -inf * 0 is NaN.
    let want = [
        -0.,
        -0.,
        -0.333_333_34,
        0.,
        0.291_666_66,
        0.666_666_7,
        1.666_666_6,
        3.,
        4.,
        NAN,
        INF,
        NAN,
    ];
    assert_bits(&unary(OpKind::HardSwish, &[], &x), &want);
}

#[test]
fn gelu_exact_and_tanh() {
    let x = [0., -0., 1., -1., 3., -3., 0.5, -10., INF, -INF, NAN];
    // 0.5 x (1 + erf(x / sqrt 2)); at -10 the value is -7.6e-23, which the naive
    // formula loses to cancellation. -inf * 0 is NaN, as in ONNX's function body.
    let want = [
        0.,
        -0.,
        0.841_344_8,
        -0.158_655_26,
        2.995_950_2,
        -0.004_049_694,
        0.345_731_23,
        -7.619_853e-23,
        INF,
        NAN,
        NAN,
    ];
    assert_bits(&unary(OpKind::Gelu, &[], &x), &want);
    let none = [("approximate", Attr::Str("none".into()))];
    assert_bits(&unary(OpKind::Gelu, &none, &x), &want);

    let tanh = [("approximate", Attr::Str("tanh".into()))];
    let want = [
        0.,
        -0.,
        0.841_192,
        -0.158_808_01,
        2.996_362_7,
        -0.003_637_392,
        0.345_714,
        -1.204_092_4e-37,
        INF,
        NAN,
        NAN,
    ];
    assert_bits(&unary(OpKind::Gelu, &tanh, &x), &want);

    let bad = [("approximate", Attr::Str("fast".into()))];
    let err = run(&node(OpKind::Gelu, 1, &bad), &[f32t(&[1], &[1.])]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("fast"), "{err}");
}

#[test]
fn float_unary_ops_keep_empty_and_rank0_shapes_and_refuse_integers() {
    for op in [
        OpKind::Sqrt,
        OpKind::Exp,
        OpKind::Log,
        OpKind::Erf,
        OpKind::Ceil,
        OpKind::LeakyRelu,
        OpKind::HardSigmoid,
        OpKind::HardSwish,
        OpKind::Gelu,
    ] {
        let (shape, got) = run_f32(&node(op, 1, &[]), &[f32t(&[2, 0, 3], &[])]);
        assert_eq!((shape, got.len()), (vec![2, 0, 3], 0), "{op}");
        let (shape, got) = run_f32(&node(op, 1, &[]), &[f32t(&[], &[1.])]);
        assert_eq!((shape, got.len()), (vec![], 1), "{op}");
        let x = typed(DType::I32, &[1], &[1i32]);
        let err = run(&node(op, 1, &[]), &[x]).unwrap_err();
        assert!(
            matches!(err, KernelError::Unsupported { .. }),
            "{op}: {err:?}"
        );
    }
}

#[test]
fn pow_special_values_and_broadcasting() {
    let base = f32t(&[8], &[2., -2., -8., 0., -0., NAN, 1., 4.]);
    let exp = f32t(&[8], &[3., 3., 1. / 3., -1., -1., 0., NAN, 0.5]);
    let (_, got) = run_f32(&node(OpKind::Pow, 2, &[]), &[base, exp]);
    assert_bits(&got, &[8., -8., NAN, INF, -INF, 1., 1., 2.]);
    // [2, 1] ^ [3] -> [2, 3].
    let base = f32t(&[2, 1], &[2., 3.]);
    let exp = f32t(&[3], &[0., 1., 2.]);
    let (shape, got) = run_f32(&node(OpKind::Pow, 2, &[]), &[base, exp]);
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&got, &[1., 2., 4., 1., 3., 9.]);
    let (shape, _) = run_f32(
        &node(OpKind::Pow, 2, &[]),
        &[f32t(&[0, 3], &[]), f32t(&[1], &[2.])],
    );
    assert_eq!(shape, vec![0, 3]);
}

#[test]
fn pow_integer_exponents_are_exact() {
    // 2^53 + 1 is odd; as an f64 it would be 2^53, even, and the signs below would flip.
    let big_odd = (1i64 << 53) + 1;
    let base = f32t(&[5], &[-2., -1., -1., 2., -3.]);
    let exp = typed(DType::I64, &[5], &[big_odd, big_odd, 1 << 53, -2, 3]);
    let (_, got) = run_f32(&node(OpKind::Pow, 2, &[]), &[base, exp]);
    assert_bits(&got, &[-INF, -1., 1., 0.25, -27.]);
    let base = f32t(&[3], &[-0., 0., NAN]);
    let exp = typed(DType::I32, &[3], &[-1i32, -1, 0]);
    let (_, got) = run_f32(&node(OpKind::Pow, 2, &[]), &[base, exp]);
    assert_bits(&got, &[-INF, INF, 1.]);
    let exp = typed(DType::U8, &[1], &[200u8]);
    let (_, got) = run_f32(&node(OpKind::Pow, 2, &[]), &[f32t(&[1], &[-1.]), exp]);
    assert_bits(&got, &[1.]);
    // f16 base, f32 exponent: an f16 result. 3^-1 rounds to 0.333251953125.
    let out = run(
        &node(OpKind::Pow, 2, &[]),
        &[f16t(&[2], &[3., 300.]), f32t(&[1], &[-1.])],
    )
    .unwrap();
    assert_eq!(out.dtype, DType::F16);
    assert_eq!(f16_values(&out)[0], 1365. / 4096.);
    // A u8 base is not an ONNX Pow type.
    let x = typed(DType::U8, &[1], &[2u8]);
    let err = run(&node(OpKind::Pow, 2, &[]), &[x.clone(), x]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

#[test]
fn pow_with_an_integer_base_wraps_and_truncates() {
    let pow = node(OpKind::Pow, 2, &[]);
    // Integer exponents: exact, wrapping in the base's type; negative exponents give
    // the truncated reciprocal.
    let x = typed(DType::I32, &[6], &[2i32, -3, 2, 1, -1, 5]);
    let y = typed(DType::I64, &[6], &[10i64, 3, 31, -4, -3, -1]);
    let out = run(&pow, &[x, y]).unwrap();
    assert_eq!(out.dtype, DType::I32);
    assert_eq!(out.values::<i32>(), &[1024, -27, i32::MIN, 1, -1, 0]);
    // A float exponent: the f64 power truncated toward zero and saturated.
    let x = typed(DType::I64, &[4], &[4i64, 2, -8, 10]);
    let y = f32t(&[4], &[0.5, 0.5, 1. / 3., 30.]);
    let out = run(&pow, &[x, y]).unwrap();
    // 2^0.5 = 1.41 truncates to 1; (-8)^(1/3) is NaN in C's pow, which becomes 0.
    assert_eq!(out.values::<i64>(), &[2, 1, 0, i64::MAX]);
}

#[test]
fn ceil_rounds_up_keeping_signed_zero_and_non_finite_values() {
    let got = unary(
        OpKind::Ceil,
        &[],
        &[1.2, -1.2, -0.5, 2.0, 0.0, 1e30, 8388607.5, INF, -INF, NAN],
    );
    assert_eq!(
        &got[..9],
        &[2.0, -1.0, -0.0, 2.0, 0.0, 1e30, 8388608.0, INF, -INF]
    );
    assert!(got[4].is_sign_positive() && got[2].is_sign_negative());
    assert!(got[9].is_nan());
}
