//! Comparisons, Not, And, the bit ops, Where and Cast.

use super::*;

const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

fn bools(t: &Tensor) -> Vec<u8> {
    assert_eq!(t.dtype, DType::Bool);
    t.values::<u8>().to_vec()
}

fn cast_to(code: i64) -> Node {
    node(OpKind::Cast, 1, &[("to", Attr::Int(code))])
}

#[test]
fn comparisons_of_floats_broadcast_and_treat_nan_as_unordered() {
    let a = f32t(&[3, 1], &[0., NAN, 1.]);
    let b = f32t(&[4], &[-0., NAN, 1., INF]);
    let run_cmp = |op| {
        let out = run(&node(op, 2, &[]), &[a.clone(), b.clone()]).unwrap();
        assert_eq!(out.shape, vec![3, 4]);
        bools(&out)
    };
    #[rustfmt::skip]
    let (eq, gt, lt) = (
        [1, 0, 0, 0,  0, 0, 0, 0,  0, 0, 1, 0],
        [0, 0, 0, 0,  0, 0, 0, 0,  1, 0, 0, 0],
        [0, 0, 1, 1,  0, 0, 0, 0,  0, 0, 0, 1],
    );
    assert_eq!(run_cmp(OpKind::Equal), eq);
    assert_eq!(run_cmp(OpKind::Greater), gt);
    assert_eq!(run_cmp(OpKind::Less), lt);
    let out = run(
        &node(OpKind::Less, 2, &[]),
        &[f16t(&[2], &[1., -INF]), f16t(&[], &[0.5])],
    )
    .unwrap();
    assert_eq!(bools(&out), [0, 1]);
}

#[test]
fn comparisons_of_integers_and_bools_are_exact() {
    // 2^53 and 2^53 + 1 are one f64; compared as integers they differ.
    let big = 1i64 << 53;
    let a = typed(DType::I64, &[2], &[big, -1]);
    let b = typed(DType::I64, &[2], &[big + 1, -1]);
    let out = run(&node(OpKind::Equal, 2, &[]), &[a.clone(), b.clone()]).unwrap();
    assert_eq!(bools(&out), [0, 1]);
    let out = run(&node(OpKind::Less, 2, &[]), &[a, b]).unwrap();
    assert_eq!(bools(&out), [1, 0]);
    // u8 200 is greater than 100 (it would be -56 as i8).
    let a = typed(DType::U8, &[2], &[200u8, 5]);
    let b = typed(DType::U8, &[1], &[100u8]);
    let out = run(&node(OpKind::Greater, 2, &[]), &[a, b]).unwrap();
    assert_eq!(bools(&out), [1, 0]);
    let a = typed(DType::I8, &[2], &[-128i8, 127]);
    let out = run(&node(OpKind::Greater, 2, &[]), &[a.clone(), a]).unwrap();
    assert_eq!(bools(&out), [0, 0]);
    // Bools compare as truth values: a stray byte 2 is true.
    let a = typed(DType::Bool, &[3], &[1u8, 0, 2]);
    let b = typed(DType::Bool, &[3], &[1u8, 1, 1]);
    let out = run(&node(OpKind::Equal, 2, &[]), &[a.clone(), b]).unwrap();
    assert_eq!(bools(&out), [1, 0, 1]);
    let err = run(&node(OpKind::Greater, 2, &[]), &[a.clone(), a]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let err = run(
        &node(OpKind::Equal, 2, &[]),
        &[f32t(&[1], &[1.]), f16t(&[1], &[1.])],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let out = run(
        &node(OpKind::Equal, 2, &[]),
        &[f32t(&[0, 2], &[]), f32t(&[2], &[1., 2.])],
    )
    .unwrap();
    assert_eq!((out.shape.clone(), out.len()), (vec![0, 2], 0));
}

#[test]
fn not_and_and() {
    let x = typed(DType::Bool, &[3], &[1u8, 0, 2]);
    let out = run(&node(OpKind::Not, 1, &[]), &[x]).unwrap();
    assert_eq!(bools(&out), [0, 1, 0]);
    let a = typed(DType::Bool, &[2, 1], &[0u8, 1]);
    let b = typed(DType::Bool, &[2], &[0u8, 1]);
    let out = run(&node(OpKind::And, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.shape, vec![2, 2]);
    assert_eq!(bools(&out), [0, 0, 0, 1]);
    let err = run(&node(OpKind::Not, 1, &[]), &[f32t(&[1], &[0.])]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let i = typed(DType::I32, &[1], &[1i32]);
    let err = run(&node(OpKind::And, 2, &[]), &[i.clone(), i]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

#[test]
fn where_selects_bit_exact_values_with_three_way_broadcasting() {
    let cond = typed(DType::Bool, &[2, 1], &[1u8, 0]);
    let x = f32t(&[3], &[-0., NAN, 1.]);
    let y = f32t(&[], &[7.]);
    let (shape, got) = run_f32(&node(OpKind::Where, 3, &[]), &[cond, x, y]);
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&got, &[-0., NAN, 1., 7., 7., 7.]);
    // i64 operands and a condition that broadcasts along the last axis.
    let cond = typed(DType::Bool, &[2], &[0u8, 3]);
    let x = typed(DType::I64, &[2, 2], &[1i64, 2, 3, i64::MAX]);
    let y = typed(DType::I64, &[2, 1], &[-1i64, i64::MIN]);
    let out = run(&node(OpKind::Where, 3, &[]), &[cond, x, y]).unwrap();
    assert_eq!(out.values::<i64>(), &[-1, 2, i64::MIN, i64::MAX]);
    let cond = typed(DType::Bool, &[1], &[1u8]);
    let b = typed(DType::Bool, &[2], &[0u8, 1]);
    let out = run(&node(OpKind::Where, 3, &[]), &[cond, b.clone(), b]).unwrap();
    assert_eq!(bools(&out), [0, 1]);
    // The condition must be bool; X and Y must share a dtype.
    let f = f32t(&[1], &[1.]);
    let err = run(&node(OpKind::Where, 3, &[]), &[f.clone(), f.clone(), f]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let c = typed(DType::Bool, &[1], &[1u8]);
    let err = run(
        &node(OpKind::Where, 3, &[]),
        &[c, f32t(&[1], &[1.]), f16t(&[1], &[1.])],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

#[test]
fn cast_float_to_integer_truncates_and_saturates() {
    let x = f32t(
        &[11],
        &[
            1.9, -1.9, 127.5, 128., -129., 300., -1e30, NAN, INF, -INF, -0.,
        ],
    );
    let out = run(&cast_to(3), std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        out.values::<i8>(),
        &[1, -1, 127, 127, -128, 127, -128, 0, 127, -128, 0]
    );
    let out = run(&cast_to(2), &[x]).unwrap();
    assert_eq!(
        out.values::<u8>(),
        &[1, 0, 127, 128, 0, 255, 0, 0, 255, 0, 0]
    );
    // 2147483647 is not an f32: the literal is 2^31, which saturates.
    let x = f32t(&[5], &[2_147_483_647., -3e9, 1e10, -2.5, 1e18]);
    let out = run(&cast_to(6), std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        out.values::<i32>(),
        &[i32::MAX, i32::MIN, i32::MAX, -2, i32::MAX]
    );
    let out = run(&cast_to(7), &[x]).unwrap();
    assert_eq!(
        out.values::<i64>(),
        &[
            2_147_483_648,
            -3_000_000_000,
            10_000_000_000,
            -2,
            999_999_984_306_749_440
        ]
    );
    let x = f32t(&[3], &[9.3e18, -9.3e18, NAN]);
    let out = run(&cast_to(7), &[x]).unwrap();
    assert_eq!(out.values::<i64>(), &[i64::MAX, i64::MIN, 0]);
    let x = f16t(&[3], &[-65504., 300.5, NAN]);
    let out = run(&cast_to(3), &[x]).unwrap();
    assert_eq!(out.values::<i8>(), &[-128, 127, 0]);
}

#[test]
fn cast_between_floats_rounds_to_nearest_even() {
    let x = f32t(
        &[8],
        &[65504., 65519., 65520., 1e-8, 3e-8, -0., 1. / 3., NAN],
    );
    let out = run(&cast_to(10), &[x]).unwrap();
    assert_eq!(out.dtype, DType::F16);
    // 65520 is the midpoint to the next (infinite) binade; 3e-8 is just above half the
    // smallest subnormal 2^-24.
    assert_bits(
        &f16_values(&out),
        &[
            65504.,
            65504.,
            INF,
            0.,
            5.960_464_5e-8,
            -0.,
            0.333_251_95,
            NAN,
        ],
    );
    let x = f16t(&[3], &[65504., 5.960_464_5e-8, -2.5]);
    let (_, got) = run_f32(&cast_to(1), &[x]);
    assert_bits(&got, &[65504., 5.960_464_5e-8, -2.5]);
    // Casting to the own dtype keeps NaN payloads.
    let x = f32t(&[1], &[f32::from_bits(0x7fc0_0001)]);
    let (_, got) = run_f32(&cast_to(1), &[x]);
    assert_eq!(got[0].to_bits(), 0x7fc0_0001);
}

#[test]
fn cast_between_integers_wraps() {
    let x = typed(DType::I32, &[5], &[200i32, -200, 256, 127, -129]);
    let out = run(&cast_to(3), &[x]).unwrap();
    assert_eq!(out.values::<i8>(), &[-56, 56, 0, 127, 127]);
    let x = typed(DType::I64, &[3], &[(1i64 << 32) + 5, -1, 1 << 31]);
    let out = run(&cast_to(6), &[x]).unwrap();
    assert_eq!(out.values::<i32>(), &[5, -1, i32::MIN]);
    let x = typed(DType::U8, &[2], &[200u8, 127]);
    let out = run(&cast_to(3), &[x]).unwrap();
    assert_eq!(out.values::<i8>(), &[-56, 127]);
    let x = typed(DType::I8, &[2], &[-1i8, -128]);
    let out = run(&cast_to(2), std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.values::<u8>(), &[255, 128]);
    let out = run(&cast_to(7), &[x]).unwrap();
    assert_eq!(out.values::<i64>(), &[-1, -128]);
}

#[test]
fn cast_integer_to_float_rounds_once() {
    let x = typed(DType::I64, &[3], &[(1i64 << 24) + 1, (1 << 53) + 1, -7]);
    let (_, got) = run_f32(&cast_to(1), &[x]);
    assert_bits(&got, &[16_777_216., 9_007_199_254_740_992., -7.]);
    // f16 spacing is 2 in [2048, 4096) and 32 at the top of the range.
    let x = typed(DType::I64, &[5], &[65519i64, 65520, 2049, 2051, i64::MIN]);
    let out = run(&cast_to(10), &[x]).unwrap();
    assert_bits(&f16_values(&out), &[65504., INF, 2048., 2052., -INF]);
    let x = typed(DType::I32, &[2], &[-70000i32, 3]);
    let out = run(&cast_to(10), &[x]).unwrap();
    assert_bits(&f16_values(&out), &[-INF, 3.]);
    let x = typed(DType::U8, &[1], &[255u8]);
    let (_, got) = run_f32(&cast_to(1), &[x]);
    assert_bits(&got, &[255.]);
}

#[test]
fn cast_to_and_from_bool() {
    let x = f32t(&[6], &[0., -0., NAN, 0.1, -INF, 1e-40]);
    let out = run(&cast_to(9), &[x]).unwrap();
    assert_eq!(bools(&out), [0, 0, 1, 1, 1, 1]);
    let x = typed(DType::I64, &[3], &[0i64, 5, i64::MIN]);
    let out = run(&cast_to(9), &[x]).unwrap();
    assert_eq!(bools(&out), [0, 1, 1]);
    // A stray bool byte 2 counts as true, and Cast to bool rewrites it as 1.
    let b = typed(DType::Bool, &[3], &[1u8, 0, 2]);
    let (_, got) = run_f32(&cast_to(1), std::slice::from_ref(&b));
    assert_bits(&got, &[1., 0., 1.]);
    let out = run(&cast_to(10), std::slice::from_ref(&b)).unwrap();
    assert_bits(&f16_values(&out), &[1., 0., 1.]);
    let out = run(&cast_to(7), std::slice::from_ref(&b)).unwrap();
    assert_eq!(out.values::<i64>(), &[1, 0, 1]);
    let out = run(&cast_to(9), &[b]).unwrap();
    assert_eq!(bools(&out), [1, 0, 1]);
}

#[test]
fn cast_to_an_unknown_type_names_the_code() {
    let x = f32t(&[1], &[1.]);
    // 8 is STRING, which the IR does not have.
    let err = run(&cast_to(8), std::slice::from_ref(&x)).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    assert!(err.to_string().contains("data type 8"), "{err}");
    let err = run(&node(OpKind::Cast, 1, &[]), std::slice::from_ref(&x)).unwrap_err();
    assert!(err.to_string().contains("'to'"), "{err}");
    let (shape, got) = run_f32(&cast_to(1), &[typed(DType::I8, &[0, 2], &[0i8; 0])]);
    assert_eq!((shape, got.len()), (vec![0, 2], 0));
}

#[test]
fn bitwise_ops_work_on_the_twos_complement_bits() {
    let a = typed(DType::I8, &[4], &[-1i8, 0x55, -128, 7]);
    let b = typed(DType::I8, &[4], &[0x0Fi8, 0x0F, -1, -8]);
    let run2 = |op| run(&node(op, 2, &[]), &[a.clone(), b.clone()]).unwrap();
    assert_eq!(
        run2(OpKind::BitwiseAnd).values::<i8>(),
        &[0x0F, 0x05, -128, 0]
    );
    assert_eq!(run2(OpKind::BitwiseOr).values::<i8>(), &[-1, 0x5F, -1, -1]);
    assert_eq!(
        run2(OpKind::BitwiseXor).values::<i8>(),
        &[-16, 0x5A, 127, -1]
    );
    let not = run(&node(OpKind::BitwiseNot, 1, &[]), std::slice::from_ref(&a)).unwrap();
    assert_eq!(not.values::<i8>(), &[0, -0x56, 127, -8]);
    let u = typed(DType::U64, &[1], &[u64::MAX]);
    let not = run(&node(OpKind::BitwiseNot, 1, &[]), &[u]).unwrap();
    assert_eq!(not.values::<u64>(), &[0]);
}

#[test]
fn bit_shifts_past_the_width_give_zero() {
    let x = typed(DType::U8, &[4], &[0b1011_0001u8, 1, 255, 128]);
    let by = typed(DType::U8, &[4], &[1u8, 7, 8, 200]);
    let shift = |dir: &str| {
        let attrs = [("direction", Attr::Str(dir.into()))];
        run(&node(OpKind::BitShift, 2, &attrs), &[x.clone(), by.clone()]).unwrap()
    };
    assert_eq!(shift("LEFT").values::<u8>(), &[0b0110_0010, 128, 0, 0]);
    assert_eq!(shift("RIGHT").values::<u8>(), &[0b0101_1000, 0, 0, 0]);
    let attrs = [("direction", Attr::Str("UP".into()))];
    assert!(run(&node(OpKind::BitShift, 2, &attrs), &[x.clone(), by.clone()]).is_err());
    let signed = typed(DType::I32, &[1], &[1i32]);
    assert!(run(&node(OpKind::BitShift, 2, &[]), &[signed.clone(), signed]).is_err());
}

fn bit_cast_to(code: i64) -> Node {
    node(OpKind::BitCast, 1, &[("to", Attr::Int(code))])
}

#[test]
fn bit_cast_keeps_the_bits_of_wide_types() {
    // Values from numpy's `view`: 1.0f32 is 0x3F800000, -2.5 is 0xC0200000.
    let x = f32t(&[3], &[1.0, -2.5, 3.75]);
    let out = run(&bit_cast_to(6), &[x]).unwrap();
    assert_eq!((out.dtype, out.shape.clone()), (DType::I32, vec![3]));
    assert_eq!(out.values::<i32>(), [1065353216, -1071644672, 1081081856]);
    let x = typed(DType::F64, &[2], &[1.0f64, -2.5]);
    let out = run(&bit_cast_to(7), &[x]).unwrap();
    assert_eq!(
        out.values::<i64>(),
        [4607182418800017408, -4610560118520545280]
    );
    let x = typed(DType::U16, &[2], &[32768u16, 65535]);
    assert_eq!(
        run(&bit_cast_to(5), &[x]).unwrap().values::<i16>(),
        [-32768, -1]
    );
    // 0x3C00 is 1.0 in f16; a NaN payload survives (Cast would not promise that).
    let x = typed(DType::U16, &[2], &[0x3C00u16, 0x7E01]);
    let out = run(&bit_cast_to(10), &[x]).unwrap();
    assert_eq!(out.dtype, DType::F16);
    assert_eq!(out.values::<u16>(), [0x3C00, 0x7E01]);
    let x = typed(DType::I8, &[], &[-128i8]);
    let out = run(&bit_cast_to(2), &[x]).unwrap();
    assert_eq!((out.shape.len(), out.values::<u8>()), (0, &[128u8][..]));
}

#[test]
fn bit_cast_of_bools_and_sub_byte_types() {
    let x = typed(DType::Bool, &[3], &[1u8, 0, 1]);
    assert_eq!(
        run(&bit_cast_to(2), &[x]).unwrap().values::<u8>(),
        [1, 0, 1]
    );
    let x = typed(DType::U8, &[2], &[0u8, 1]);
    assert_eq!(bools(&run(&bit_cast_to(9), &[x]).unwrap()), [0, 1]);
    // A byte of 2 has no bool meaning.
    let x = typed(DType::U8, &[2], &[1u8, 2]);
    let err = run(&bit_cast_to(9), &[x]).unwrap_err().to_string();
    assert!(err.contains("byte 2"), "{err}");
    // i4 -1 is the nibble 1111: u4 15; u4 8 (1000) is i4 -8, stored sign-extended.
    let x = typed(DType::I4, &[2], &[-1i8, 7]);
    assert_eq!(run(&bit_cast_to(21), &[x]).unwrap().values::<u8>(), [15, 7]);
    let x = typed(DType::U4, &[2], &[8u8, 3]);
    assert_eq!(run(&bit_cast_to(22), &[x]).unwrap().values::<i8>(), [-8, 3]);
    // u2 3 is i2 -1; u4 9 is the float4 pattern 1001 (-0.5), kept in the low bits.
    let x = typed(DType::U2, &[1], &[3u8]);
    assert_eq!(run(&bit_cast_to(26), &[x]).unwrap().values::<i8>(), [-1]);
    let x = typed(DType::U4, &[1], &[9u8]);
    assert_eq!(run(&bit_cast_to(23), &[x]).unwrap().values::<u8>(), [9]);
}

#[test]
fn bit_cast_refuses_different_widths() {
    let n = bit_cast_to(7);
    let err = baton_delegate_api::shape::infer_outputs(&n, &[(DType::F32, vec![2])], |_| None)
        .unwrap_err();
    assert!(err.contains("f32 (32 bits) to i64 (64 bits)"), "{err}");
    let err = baton_delegate_api::shape::infer_outputs(&n, &[(DType::Bool, vec![2])], |_| None)
        .unwrap_err();
    assert!(err.contains("8 bits"), "{err}");
    let missing = node(OpKind::BitCast, 1, &[]);
    assert!(
        baton_delegate_api::shape::infer_outputs(&missing, &[(DType::U8, vec![1])], |_| None)
            .is_err()
    );
}

#[test]
fn det_of_batches_pivots_and_singular_matrices() {
    let det = node(OpKind::Det, 1, &[]);
    // 6(-14 - 40) - 1(28 - 10) + 1(32 + 4) = -306, as numpy.linalg.det gives.
    let x = f32t(&[3, 3], &[6., 1., 1., 4., -2., 5., 2., 8., 7.]);
    let (shape, y) = run_f32(&det, &[x]);
    assert_eq!(shape, Vec::<usize>::new());
    assert_close(&y, &[-306.], 1e-4);
    // A zero first pivot needs a row swap (det -1); a singular matrix gives 0.
    let x = f32t(&[2, 2, 2], &[0., 1., 1., 0., 1., 2., 2., 4.]);
    let (shape, y) = run_f32(&det, &[x]);
    assert_eq!(shape, vec![2]);
    assert_eq!(y, [-1., 0.]);
    // f16 in, f16 out; a batch of 0 x 0 matrices has determinant 1.
    let out = run(&det, &[f16t(&[2, 2], &[1., 2., 3., 4.])]).unwrap();
    assert_eq!(f16_values(&out), [-2.]);
    let (shape, y) = run_f32(&det, &[f32t(&[3, 0, 0], &[])]);
    assert_eq!((shape, y), (vec![3], vec![1., 1., 1.]));
}

#[test]
fn det_refuses_non_square_and_integer_inputs() {
    let det = node(OpKind::Det, 1, &[]);
    assert!(run(&det, &[f32t(&[2, 3], &[0.; 6])]).is_err());
    assert!(run(&det, &[f32t(&[3], &[0.; 3])]).is_err());
    assert!(run(&det, &[typed(DType::I32, &[2, 2], &[1i32, 2, 3, 4])]).is_err());
}
