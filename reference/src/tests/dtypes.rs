//! The wide and narrow dtypes: Cast to and from float8, float4 and the sub-byte integers,
//! arithmetic and comparisons on 16-bit, unsigned and f64 operands, integer MaxPool, bool
//! ReduceMax and QuantizeLinear/DequantizeLinear beyond 8 bits (blocked, float8).

use super::*;

fn cast(to: DType, saturate: i64) -> Node {
    let attrs = [
        ("to", Attr::Int(to.onnx_code())),
        ("saturate", Attr::Int(saturate)),
    ];
    node(OpKind::Cast, 1, &attrs)
}

#[test]
fn cast_to_float8_rounds_to_even_and_saturates_per_attribute() {
    let x = f32t(&[6], &[1.0, 464.0, 500.0, -1e9, f32::INFINITY, f32::NAN]);
    let sat = run(&cast(DType::F8E4M3FN, 1), std::slice::from_ref(&x)).unwrap();
    assert_eq!(sat.bytes(), &[0x38, 0x7e, 0x7e, 0xfe, 0x7e, 0x7f]);
    let nosat = run(&cast(DType::F8E4M3FN, 0), std::slice::from_ref(&x)).unwrap();
    assert_eq!(nosat.bytes(), &[0x38, 0x7e, 0x7f, 0xff, 0x7f, 0x7f]);
    // E5M2 has infinities: without saturation, overflow goes there.
    let e5 = run(&cast(DType::F8E5M2, 0), std::slice::from_ref(&x)).unwrap();
    assert_eq!(&e5.bytes()[3..5], &[0xfc, 0x7c]);
    // And back: every value of the format widens exactly.
    let back = run(&cast(DType::F32, 1), &[sat]).unwrap();
    assert_eq!(&back.f32s()[..5], &[1.0, 448.0, 448.0, -448.0, 448.0]);
    assert!(back.f32s()[5].is_nan());
}

#[test]
fn cast_into_sub_byte_integers_wraps_and_out_of_them_sign_extends() {
    let x = f32t(&[5], &[-9.0, -8.5, 7.9, 8.0, 15.0]);
    let i4 = run(&cast(DType::I4, 1), std::slice::from_ref(&x)).unwrap();
    assert_eq!(i4.values::<i8>(), &[7, -8, 7, -8, -1]);
    let u2 = run(&cast(DType::U2, 1), &[x]).unwrap();
    assert_eq!(u2.values::<u8>(), &[3, 0, 3, 0, 3]);
    let wide = run(&cast(DType::I32, 1), &[i4]).unwrap();
    assert_eq!(wide.values::<i32>(), &[7, -8, 7, -8, -1]);
}

#[test]
fn cast_like_takes_the_dtype_of_its_second_operand() {
    let x = f32t(&[3], &[1.5, -2.5, 300.0]);
    let like = Tensor::zeros(DType::BF16, &[1]);
    let out = run(&node(OpKind::CastLike, 2, &[]), &[x, like]).unwrap();
    assert_eq!(out.dtype, DType::BF16);
    assert_eq!(out.values::<u16>(), &[0x3fc0, 0xc020, 0x4396]);
}

#[test]
fn arithmetic_on_wide_and_unsigned_types_wraps_and_f64_stays_exact() {
    let a = typed(DType::U16, &[3], &[65535u16, 3, 7]);
    let b = typed(DType::U16, &[3], &[2u16, 5, 2]);
    assert_eq!(
        run(&node(OpKind::Add, 2, &[]), &[a.clone(), b.clone()])
            .unwrap()
            .values::<u16>(),
        &[1, 8, 9]
    );
    assert_eq!(
        run(&node(OpKind::Sub, 2, &[]), &[b.clone(), a.clone()])
            .unwrap()
            .values::<u16>(),
        &[3, 2, 65531]
    );
    assert_eq!(
        run(&node(OpKind::Div, 2, &[]), &[a, b])
            .unwrap()
            .values::<u16>(),
        &[32767, 0, 3]
    );
    // 0.1 + 0.2 in f64 is not 0.3 (an f32 detour would make it so).
    let x = typed(DType::F64, &[1], &[0.1f64]);
    let y = typed(DType::F64, &[1], &[0.2f64]);
    let s = run(&node(OpKind::Add, 2, &[]), &[x, y]).unwrap();
    assert_eq!(s.values::<f64>(), &[0.1 + 0.2]);
    assert_ne!(s.values::<f64>()[0], 0.3);
}

#[test]
fn comparisons_of_u64_beyond_i64_and_f64_are_exact() {
    let a = typed(DType::U64, &[2], &[u64::MAX, 1]);
    let b = typed(DType::U64, &[2], &[u64::MAX - 1, 1]);
    let g = run(&node(OpKind::Greater, 2, &[]), &[a.clone(), b.clone()]).unwrap();
    assert_eq!(g.bytes(), &[1, 0]);
    let e = run(&node(OpKind::Equal, 2, &[]), &[a, b]).unwrap();
    assert_eq!(e.bytes(), &[0, 1]);
    // Two f64 values that round to the same f32.
    let x = typed(DType::F64, &[1], &[1.0f64 + 1e-12]);
    let y = typed(DType::F64, &[1], &[1.0f64]);
    let l = run(&node(OpKind::Less, 2, &[]), &[y, x]).unwrap();
    assert_eq!(l.bytes(), &[1]);
}

#[test]
fn integer_max_pool_and_bool_reduce_max() {
    let attrs = [("kernel_shape", ints(&[2]))];
    let x = typed(DType::U8, &[1, 1, 4], &[200u8, 255, 0, 7]);
    let out = run(&node(OpKind::MaxPool, 1, &attrs), &[x]).unwrap();
    assert_eq!(out.values::<u8>(), &[255, 255, 7]);
    let x = typed(DType::I8, &[1, 1, 3], &[-128i8, -5, -7]);
    let out = run(&node(OpKind::MaxPool, 1, &attrs), &[x]).unwrap();
    assert_eq!(out.values::<i8>(), &[-5, -5]);
    let b = typed(DType::Bool, &[2, 2], &[0u8, 1, 0, 0]);
    let axes = [("axes", ints(&[1])), ("keepdims", Attr::Int(0))];
    let out = run(&node(OpKind::ReduceMax, 1, &axes), &[b]).unwrap();
    assert_eq!((out.dtype, out.bytes()), (DType::Bool, &[1u8, 0][..]));
}

#[test]
fn blocked_quantization_gives_each_block_its_scale() {
    // x [2, 4], blocks of 2 along axis 1: scales [2, 2].
    let x = f32t(&[2, 4], &[1., 2., 30., 40., -1., -2., 5., 6.]);
    let scale = f32t(&[2, 2], &[1., 10., 0.5, 2.]);
    let zp = typed(DType::I16, &[2, 2], &[0i16, 100, 0, -1000]);
    let attrs = [("axis", Attr::Int(1)), ("block_size", Attr::Int(2))];
    let q = run(
        &node(OpKind::QuantizeLinear, 3, &attrs),
        &[x, scale.clone(), zp.clone()],
    )
    .unwrap();
    assert_eq!(q.dtype, DType::I16);
    // Row 0: 1/1, 2/1, 30/10 + 100, 40/10 + 100; row 1: -2, -4, 2.5 -> 2 (to even) - 1000, 3 - 1000.
    assert_eq!(q.values::<i16>(), &[1, 2, 103, 104, -2, -4, -998, -997]);
    let dq = run(&node(OpKind::DequantizeLinear, 3, &attrs), &[q, scale, zp]).unwrap();
    assert_eq!(dq.f32s(), &[1., 2., 30., 40., -1., -2., 4., 6.]);
}

#[test]
fn quantize_to_int4_saturates_and_to_float8_rounds() {
    let x = f32t(&[4], &[3.0, 100.0, -100.0, 0.7]);
    let scale = f32t(&[], &[1.0]);
    let zp4 = typed(DType::I4, &[], &[1i8]);
    let q = run(
        &node(OpKind::QuantizeLinear, 3, &[]),
        &[x.clone(), scale.clone(), zp4],
    )
    .unwrap();
    assert_eq!(q.values::<i8>(), &[4, 7, -8, 2]);
    let zp8 = Tensor::zeros(DType::F8E4M3FN, &[]);
    let q = run(
        &node(OpKind::QuantizeLinear, 3, &[]),
        &[x, scale.clone(), zp8.clone()],
    )
    .unwrap();
    // 3.0, 100 -> 96 (the nearest E4M3 value), -100 -> -96, 0.7 -> 0.6875.
    assert_eq!(q.bytes(), &[0x44, 0x6c, 0xec, 0x33]);
    let dq = run(&node(OpKind::DequantizeLinear, 3, &[]), &[q, scale, zp8]).unwrap();
    assert_eq!(dq.f32s(), &[3.0, 96.0, -96.0, 0.6875]);
}
