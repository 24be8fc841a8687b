use super::*;

#[test]
fn transpose_perm_and_default() {
    let x = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let n = node(OpKind::Transpose, 1, &[("perm", ints(&[1, 0]))]);
    let (shape, got) = run_f32(&n, std::slice::from_ref(&x));
    assert_eq!(shape, vec![3, 2]);
    assert_bits(&got, &[1., 4., 2., 5., 3., 6.]);
    let (shape, got) = run_f32(&node(OpKind::Transpose, 1, &[]), &[x]);
    assert_eq!(shape, vec![3, 2]);
    assert_bits(&got, &[1., 4., 2., 5., 3., 6.]);
    // perm [2,0,1] of [2,1,3]: out[k][i][0] = x[i][0][k] = 3i + k.
    let x = f32t(&[2, 1, 3], &[0., 1., 2., 3., 4., 5.]);
    let n = node(OpKind::Transpose, 1, &[("perm", ints(&[2, 0, 1]))]);
    let (shape, got) = run_f32(&n, &[x]);
    assert_eq!(shape, vec![3, 2, 1]);
    assert_bits(&got, &[0., 3., 1., 4., 2., 5.]);
    // Negative perm entries name axes from the end.
    let x = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let n = node(OpKind::Transpose, 1, &[("perm", ints(&[-1, 0]))]);
    let (_, got) = run_f32(&n, &[x]);
    assert_bits(&got, &[1., 4., 2., 5., 3., 6.]);
}

#[test]
fn transpose_moves_elements_of_every_size() {
    let n = node(OpKind::Transpose, 1, &[]);
    let x = typed(DType::I64, &[2, 2], &[1i64 << 40, 2, 3, -4]);
    assert_eq!(run(&n, &[x]).unwrap().values::<i64>(), &[1 << 40, 3, 2, -4]);
    let x = typed(DType::U8, &[2, 2], &[1u8, 2, 3, 4]);
    assert_eq!(run(&n, &[x]).unwrap().values::<u8>(), &[1, 3, 2, 4]);
    let x = typed(DType::Bool, &[1, 2], &[1u8, 0]);
    let out = run(&n, &[x]).unwrap();
    assert_eq!(out.shape, vec![2, 1]);
    assert_eq!(out.values::<u8>(), &[1, 0]);
    let out = run(&n, &[f16t(&[2, 2], &[1., 2., 3., 4.])]).unwrap();
    assert_eq!(f16_values(&out), vec![1., 3., 2., 4.]);
    // Rank 0 and empty tensors.
    let out = run(&n, &[f32t(&[], &[7.])]).unwrap();
    assert_eq!(out.f32s(), &[7.]);
    let out = run(&n, &[f32t(&[0, 3], &[])]).unwrap();
    assert_eq!(out.shape, vec![3, 0]);
}

#[test]
fn concat_on_negative_axis() {
    let a = f32t(&[2, 1], &[1., 2.]);
    let b = f32t(&[2, 2], &[3., 4., 5., 6.]);
    let empty = f32t(&[2, 0], &[]);
    let n = node(OpKind::Concat, 3, &[("axis", Attr::Int(-1))]);
    let (shape, got) = run_f32(&n, &[a, empty, b]);
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&got, &[1., 3., 4., 2., 5., 6.]);
}

#[test]
fn concat_axis0_integers_and_single_operand() {
    let a = typed(DType::I32, &[1, 2], &[1i32, 2]);
    let b = typed(DType::I32, &[2, 2], &[3i32, 4, 5, 6]);
    let out = run(&node(OpKind::Concat, 2, &[]), &[a.clone(), b]).unwrap();
    assert_eq!(out.shape, vec![3, 2]);
    assert_eq!(out.values::<i32>(), &[1, 2, 3, 4, 5, 6]);
    let out = run(&node(OpKind::Concat, 1, &[]), &[a]).unwrap();
    assert_eq!(out.values::<i32>(), &[1, 2]);
    // Middle axis of 3-D u8 operands.
    let a = typed(DType::U8, &[2, 1, 2], &[1u8, 2, 3, 4]);
    let b = typed(DType::U8, &[2, 2, 2], &[5u8, 6, 7, 8, 9, 10, 11, 12]);
    let n = node(OpKind::Concat, 2, &[("axis", Attr::Int(1))]);
    let out = run(&n, &[a, b]).unwrap();
    assert_eq!(out.shape, vec![2, 3, 2]);
    assert_eq!(out.values::<u8>(), &[1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12]);
    // Mixed dtypes are refused.
    let err = run(
        &node(OpKind::Concat, 2, &[]),
        &[f32t(&[1], &[1.]), typed(DType::I32, &[1], &[1i32])],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

#[test]
fn flatten_axes() {
    let x = f32t(&[2, 3], &iota(6));
    let n = node(OpKind::Flatten, 1, &[("axis", Attr::Int(0))]);
    let (shape, got) = run_f32(&n, &[x]);
    assert_eq!(shape, vec![1, 6]);
    assert_bits(&got, &iota(6));
    let x = f32t(&[2, 3, 4], &iota(24));
    let (shape, got) = run_f32(&node(OpKind::Flatten, 1, &[]), std::slice::from_ref(&x));
    assert_eq!(shape, vec![2, 12]);
    assert_bits(&got, &iota(24));
    let n = node(OpKind::Flatten, 1, &[("axis", Attr::Int(-1))]);
    let (shape, _) = run_f32(&n, std::slice::from_ref(&x));
    assert_eq!(shape, vec![6, 4]);
    let n = node(OpKind::Flatten, 1, &[("axis", Attr::Int(3))]);
    let (shape, _) = run_f32(&n, &[x]);
    assert_eq!(shape, vec![24, 1]);
}

#[test]
fn reshape_with_zero_and_minus_one() {
    let x = f32t(&[2, 3, 4], &iota(24));
    let target = Tensor::from_i64(&[2], &[0, -1]);
    let (shape, got) = run_f32(&node(OpKind::Reshape, 2, &[]), &[x.clone(), target]);
    assert_eq!(shape, vec![2, 12]);
    assert_bits(&got, &iota(24));
    let n = node(OpKind::Reshape, 1, &[("shape", ints(&[-1, 0, 2]))]);
    let (shape, got) = run_f32(&n, std::slice::from_ref(&x));
    assert_eq!(shape, vec![4, 3, 2]);
    assert_bits(&got, &iota(24));
    // An i32 shape operand is refused, not misread.
    let bad = typed(DType::I32, &[2], &[0i32, -1]);
    let err = run(&node(OpKind::Reshape, 2, &[]), &[x, bad]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    // Every dtype, and empty tensors with allowzero.
    let b = typed(DType::Bool, &[2, 2], &[1u8, 0, 0, 1]);
    let n = node(OpKind::Reshape, 1, &[("shape", ints(&[4]))]);
    assert_eq!(run(&n, &[b]).unwrap().values::<u8>(), &[1, 0, 0, 1]);
    let n = node(
        OpKind::Reshape,
        1,
        &[("shape", ints(&[0, 5])), ("allowzero", Attr::Int(1))],
    );
    let out = run(&n, &[f32t(&[5, 0], &[])]).unwrap();
    assert_eq!(out.shape, vec![0, 5]);
}
