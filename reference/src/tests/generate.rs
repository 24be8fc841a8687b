//! Range and OneHot against hand-computed values.

use super::*;

fn scalars<T: bytemuck::Pod>(dtype: DType, v: [T; 3]) -> Vec<Tensor> {
    v.iter().map(|x| typed(dtype, &[], &[*x])).collect()
}

#[test]
fn range_of_every_kind_of_step() {
    let range = node(OpKind::Range, 3, &[]);
    let r = run_f32(&range, &scalars(DType::F32, [1.0f32, 2.9, 0.5]));
    assert_eq!(r.0, [4]);
    assert_bits(&r.1, &[1.0, 1.5, 2.0, 2.5]);
    let r = run(&range, &scalars(DType::I32, [10i32, -4, -3])).unwrap();
    assert_eq!(r.values::<i32>(), &[10, 7, 4, 1, -2]);
    // Empty both ways: the wrong direction, and no distance at all.
    let r = run(&range, &scalars(DType::I64, [7i64, 2, 2])).unwrap();
    assert_eq!(r.shape, [0]);
    let r = run(&range, &scalars(DType::I16, [5i16, 5, 1])).unwrap();
    assert_eq!(r.shape, [0]);
    let r = run(&range, &scalars(DType::F64, [0.0f64, -1.0, -0.3])).unwrap();
    assert_eq!(r.values::<f64>(), &[0.0, -0.3, -0.6, -0.8999999999999999]);
}

#[test]
fn range_refuses_a_zero_delta_and_mixed_dtypes() {
    let range = node(OpKind::Range, 3, &[]);
    let e = run(&range, &scalars(DType::I64, [0i64, 4, 0])).unwrap_err();
    assert!(e.to_string().contains("delta must not be 0"), "{e}");
    let mixed = [
        typed(DType::I64, &[], &[0i64]),
        typed(DType::I32, &[], &[4i32]),
        typed(DType::I64, &[], &[1i64]),
    ];
    assert!(run(&range, &mixed).is_err());
}

#[test]
fn one_hot_at_every_axis_with_negative_and_outside_indices() {
    let idx = typed(DType::I64, &[3], &[1i64, -1, 5]);
    let depth = typed(DType::I64, &[], &[3i64]);
    let values = f32t(&[2], &[-1.0, 2.0]);
    let inputs = [idx, depth, values];
    let last = run_f32(&node(OpKind::OneHot, 3, &[]), &inputs);
    assert_eq!(last.0, [3, 3]);
    #[rustfmt::skip]
    let want = [-1., 2., -1.,   -1., -1., 2.,   -1., -1., -1.];
    assert_bits(&last.1, &want);
    let first = run_f32(&node(OpKind::OneHot, 3, &[("axis", Attr::Int(0))]), &inputs);
    assert_eq!(first.0, [3, 3]);
    #[rustfmt::skip]
    let want = [-1., -1., -1.,   2., -1., -1.,   -1., 2., -1.];
    assert_bits(&first.1, &want);
}

#[test]
fn one_hot_truncates_float_indices_and_copies_any_value_dtype() {
    let idx = f32t(&[2, 2], &[0.9, -0.5, 1.7, f32::NAN]);
    let depth = typed(DType::I64, &[1], &[2i64]);
    let values = typed(DType::I8, &[2], &[5i8, -7]);
    let r = run(&node(OpKind::OneHot, 3, &[]), &[idx, depth, values]).unwrap();
    assert_eq!(r.shape, [2, 2, 2]);
    assert_eq!(r.values::<i8>(), &[-7, 5, -7, 5, 5, -7, 5, 5]);
}
