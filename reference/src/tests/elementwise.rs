use super::*;

#[test]
fn add_broadcasts_2x1x3_with_4x1() {
    let a = f32t(&[2, 1, 3], &[1., 2., 3., 4., 5., 6.]);
    let b = f32t(&[4, 1], &[10., 20., 30., 40.]);
    let (shape, got) = run_f32(&node(OpKind::Add, 2, &[]), &[a, b]);
    assert_eq!(shape, vec![2, 4, 3]);
    #[rustfmt::skip]
    let want = [
        11., 12., 13., 21., 22., 23., 31., 32., 33., 41., 42., 43.,
        14., 15., 16., 24., 25., 26., 34., 35., 36., 44., 45., 46.,
    ];
    assert_bits(&got, &want);
}

#[test]
fn rank0_scalars_broadcast_on_either_side() {
    let s = f32t(&[], &[3.]);
    let m = f32t(&[2, 2], &[1., 2., 3., 4.]);
    let (shape, got) = run_f32(&node(OpKind::Mul, 2, &[]), &[s.clone(), m.clone()]);
    assert_eq!(shape, vec![2, 2]);
    assert_bits(&got, &[3., 6., 9., 12.]);
    // Operand order matters for Sub and Div.
    let ten = f32t(&[], &[10.]);
    let v = f32t(&[2], &[1., 4.]);
    let (_, got) = run_f32(&node(OpKind::Sub, 2, &[]), &[ten.clone(), v.clone()]);
    assert_bits(&got, &[9., 6.]);
    let (_, got) = run_f32(&node(OpKind::Div, 2, &[]), &[v, ten]);
    assert_bits(&got, &[0.1, 0.4]);
    // scalar op scalar is a scalar.
    let (shape, got) = run_f32(&node(OpKind::Add, 2, &[]), &[s.clone(), s]);
    assert_eq!(shape, Vec::<usize>::new());
    assert_bits(&got, &[6.]);
}

#[test]
fn empty_and_size1_dims_broadcast() {
    let (shape, got) = run_f32(
        &node(OpKind::Add, 2, &[]),
        &[f32t(&[0, 3], &[]), f32t(&[1, 3], &[1., 2., 3.])],
    );
    assert_eq!(shape, vec![0, 3]);
    assert!(got.is_empty());
    let (shape, _) = run_f32(
        &node(OpKind::Mul, 2, &[]),
        &[f32t(&[2, 0], &[]), f32t(&[2, 1], &[1., 2.])],
    );
    assert_eq!(shape, vec![2, 0]);
    let (shape, _) = run_f32(
        &node(OpKind::Sub, 2, &[]),
        &[f32t(&[1, 0], &[]), f32t(&[], &[1.])],
    );
    assert_eq!(shape, vec![1, 0]);
    // [3,1] - [1,2]: an outer difference.
    let (shape, got) = run_f32(
        &node(OpKind::Sub, 2, &[]),
        &[f32t(&[3, 1], &[1., 2., 3.]), f32t(&[1, 2], &[10., 20.])],
    );
    assert_eq!(shape, vec![3, 2]);
    assert_bits(&got, &[-9., -19., -8., -18., -7., -17.]);
}

#[test]
fn float_division_by_zero_is_ieee() {
    let (_, got) = run_f32(
        &node(OpKind::Div, 2, &[]),
        &[f32t(&[3], &[1., -1., 0.]), f32t(&[3], &[0., 0., 0.])],
    );
    assert_bits(&got, &[f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
}

#[test]
fn integer_div_truncates_toward_zero_and_wraps() {
    let a = typed(DType::I32, &[5], &[7i32, -7, 7, -7, i32::MIN]);
    let b = typed(DType::I32, &[5], &[2i32, 2, -2, -2, -1]);
    let out = run(&node(OpKind::Div, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.values::<i32>(), &[3, -3, -3, 3, i32::MIN]);

    let a = typed(DType::I64, &[2], &[-9i64, 9]);
    let b = typed(DType::I64, &[], &[4i64]);
    let out = run(&node(OpKind::Div, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.values::<i64>(), &[-2, 2]);

    let a = typed(DType::U8, &[2], &[200u8, 6]);
    let b = typed(DType::U8, &[2], &[7u8, 7]);
    let out = run(&node(OpKind::Div, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.values::<u8>(), &[28, 0]);
}

#[test]
fn integer_arithmetic_wraps() {
    let i8s = |v: &[i8]| typed(DType::I8, &[v.len()], v);
    let out = run(
        &node(OpKind::Add, 2, &[]),
        &[i8s(&[100, -100]), i8s(&[100, -100])],
    )
    .unwrap();
    assert_eq!(out.values::<i8>(), &[-56, 56]);
    let out = run(&node(OpKind::Mul, 2, &[]), &[i8s(&[16, -3]), i8s(&[16, 5])]).unwrap();
    assert_eq!(out.values::<i8>(), &[0, -15]);

    let u8s = |v: &[u8]| typed(DType::U8, &[v.len()], v);
    let out = run(&node(OpKind::Add, 2, &[]), &[u8s(&[250, 1]), u8s(&[10, 2])]).unwrap();
    assert_eq!(out.values::<u8>(), &[4, 3]);
    let out = run(&node(OpKind::Sub, 2, &[]), &[u8s(&[3, 9]), u8s(&[5, 4])]).unwrap();
    assert_eq!(out.values::<u8>(), &[254, 5]);

    let a = typed(DType::I64, &[2], &[i64::MAX, 3]);
    let b = typed(DType::I64, &[2], &[2i64, -4]);
    let out = run(&node(OpKind::Mul, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.values::<i64>(), &[-2, -12]);

    let a = typed(DType::I32, &[1], &[i32::MAX]);
    let b = typed(DType::I32, &[1], &[1i32]);
    let out = run(&node(OpKind::Add, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.values::<i32>(), &[i32::MIN]);
}

#[test]
fn integer_division_by_zero_is_an_error() {
    for dtype in [DType::I8, DType::U8, DType::I32, DType::I64] {
        let mut a = Tensor::zeros(dtype, &[2]);
        a.data.as_mut_slice()[0] = 5;
        let b = Tensor::zeros(dtype, &[]); // 0
        let err = run(&node(OpKind::Div, 2, &[]), &[a, b]).unwrap_err();
        assert!(
            matches!(err, KernelError::Arithmetic { .. }),
            "{dtype}: {err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains("test_div (Div)"), "{msg}");
        assert!(msg.contains("division by zero"), "{msg}");
    }
    // A zero divisor in a broadcast operand that is never read (empty output) is fine.
    let a = typed(DType::I32, &[0, 2], &[] as &[i32]);
    let b = typed(DType::I32, &[2], &[0i32, 0]);
    let out = run(&node(OpKind::Div, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.shape, vec![0, 2]);
}

#[test]
fn f16_arithmetic_rounds_once_to_f16() {
    let a = f16t(&[3], &[1.5, 2048., 0.1]);
    let b = f16t(&[3], &[2., 1., 3.]);
    let out = run(&node(OpKind::Mul, 2, &[]), &[a.clone(), b.clone()]).unwrap();
    // f16(0.1) = 0.0999755859375; * 3 = 0.2999267578125, a tie between f16
    // neighbours, to even: 0.2998046875.
    assert_eq!(f16_values(&out), vec![3., 2048., 1228. / 4096.]);
    let out = run(&node(OpKind::Add, 2, &[]), &[a, b]).unwrap();
    // 2048 + 1 is a tie between the f16 neighbours 2048 and 2050: to even, 2048.
    assert_eq!(f16_values(&out), vec![3.5, 2048., 1587. / 512.]);
}

#[test]
fn relu_keeps_nan_and_negative_zero() {
    let x = f32t(
        &[7],
        &[
            -1.,
            0.,
            2.5,
            -0.0,
            f32::NAN,
            f32::NEG_INFINITY,
            f32::INFINITY,
        ],
    );
    let (_, got) = run_f32(&node(OpKind::Relu, 1, &[]), &[x]);
    assert_bits(&got, &[0., 0., 2.5, -0.0, f32::NAN, 0., f32::INFINITY]);

    let x = typed(DType::I8, &[4], &[-128i8, -1, 0, 127]);
    let out = run(&node(OpKind::Relu, 1, &[]), &[x]).unwrap();
    assert_eq!(out.values::<i8>(), &[0, 0, 0, 127]);
    let x = typed(DType::I64, &[2], &[i64::MIN, 5]);
    let out = run(&node(OpKind::Relu, 1, &[]), &[x]).unwrap();
    assert_eq!(out.values::<i64>(), &[0, 5]);
    let x = f16t(&[2], &[-3., 3.]);
    let out = run(&node(OpKind::Relu, 1, &[]), &[x]).unwrap();
    assert_eq!(f16_values(&out), vec![0., 3.]);
}

#[test]
fn clip_attributes_nan_and_defaults() {
    let x = f32t(&[6], &[-2., -0.5, 0.5, 2., f32::NAN, -0.0]);
    let n = node(
        OpKind::Clip,
        1,
        &[("min", Attr::Float(-1.)), ("max", Attr::Float(1.))],
    );
    let (_, got) = run_f32(&n, std::slice::from_ref(&x));
    assert_bits(&got, &[-1., -0.5, 0.5, 1., f32::NAN, -0.0]);

    // No bounds: the lowest and highest finite f32 (ONNX's defaults) clip infinities.
    let y = f32t(&[3], &[f32::NEG_INFINITY, 1., f32::INFINITY]);
    let (_, got) = run_f32(&node(OpKind::Clip, 1, &[]), &[y]);
    assert_bits(&got, &[f32::MIN, 1., f32::MAX]);

    // min = 0 keeps -0.0 (it is not < 0); min > max gives max everywhere.
    let n = node(OpKind::Clip, 1, &[("min", Attr::Float(0.))]);
    let (_, got) = run_f32(&n, &[f32t(&[2], &[-0.0, -3.])]);
    assert_bits(&got, &[-0.0, 0.]);
    let n = node(
        OpKind::Clip,
        1,
        &[("min", Attr::Float(2.)), ("max", Attr::Float(1.))],
    );
    let (_, got) = run_f32(&n, &[f32t(&[3], &[0., 1.5, 5.])]);
    assert_bits(&got, &[1., 1., 1.]);
}

#[test]
fn clip_bounds_as_operands() {
    // Relu6 in the ONNX opset-11 form, with a [1] min and a rank-0 max.
    let x = f32t(&[4], &[-1., 3., 6.5, 6.]);
    let lo = f32t(&[1], &[0.]);
    let hi = f32t(&[], &[6.]);
    let (_, got) = run_f32(&node(OpKind::Clip, 3, &[]), &[x.clone(), lo, hi]);
    assert_bits(&got, &[0., 3., 6., 6.]);
    // An empty min operand means no lower bound.
    let (_, got) = run_f32(
        &node(OpKind::Clip, 3, &[]),
        &[x.clone(), f32t(&[0], &[]), f32t(&[], &[2.])],
    );
    assert_bits(&got, &[-1., 2., 2., 2.]);
    // A bound with two values is malformed.
    let err = run(&node(OpKind::Clip, 2, &[]), &[x, f32t(&[2], &[0., 1.])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
}

#[test]
fn clip_integers_rounds_float_bounds_inward() {
    let x = typed(DType::I32, &[5], &[-5i32, -1, 0, 2, 3]);
    let n = node(
        OpKind::Clip,
        1,
        &[("min", Attr::Float(-1.5)), ("max", Attr::Float(2.5))],
    );
    let out = run(&n, &[x]).unwrap();
    assert_eq!(out.values::<i32>(), &[-1, -1, 0, 2, 2]);

    // Bounds outside u8 saturate: [-3, 300] leaves every u8 alone.
    let x = typed(DType::U8, &[3], &[0u8, 200, 255]);
    let n = node(
        OpKind::Clip,
        1,
        &[("min", Attr::Float(-3.)), ("max", Attr::Float(300.))],
    );
    assert_eq!(
        run(&n, std::slice::from_ref(&x)).unwrap().values::<u8>(),
        &[0, 200, 255]
    );
    let n = node(OpKind::Clip, 1, &[("min", Attr::Int(10))]);
    assert_eq!(run(&n, &[x]).unwrap().values::<u8>(), &[10, 200, 255]);

    // An exact i64 bound beyond f32 precision.
    let big = (1i64 << 40) + 1;
    let x = typed(DType::I64, &[2], &[big + 5, -big]);
    let n = node(OpKind::Clip, 1, &[("max", Attr::Int(big))]);
    assert_eq!(run(&n, &[x]).unwrap().values::<i64>(), &[big, -big]);

    let x = typed(DType::I8, &[3], &[-100i8, 0, 100]);
    let lo = typed(DType::I8, &[], &[-10i8]);
    let hi = typed(DType::I8, &[], &[10i8]);
    let out = run(&node(OpKind::Clip, 3, &[]), &[x, lo, hi]).unwrap();
    assert_eq!(out.values::<i8>(), &[-10, 0, 10]);
}

#[test]
fn clip_f16_rounds_attribute_bounds_to_f16() {
    // f16(0.1) = 0.0999755859375, so values below 0.1 clip to that.
    let x = f16t(&[2], &[0., 1.]);
    let n = node(OpKind::Clip, 1, &[("min", Attr::Float(0.1))]);
    let out = run(&n, &[x]).unwrap();
    assert_eq!(f16_values(&out), vec![1638. / 16384., 1.]);
}
