//! ReduceSum, ReduceMean and ReduceMax: axes as attribute or input, keepdims,
//! noop_with_empty_axes, empty reductions, NaN, signed zeros and integer rounding.

use super::*;

const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

/// Runs a Reduce node on `x`, with `axes` as the i64 input 1 when given.
fn reduce(
    op: OpKind,
    attrs: &[(&str, Attr)],
    x: &Tensor,
    axes: Option<&[i64]>,
) -> Result<Tensor, KernelError> {
    let mut inputs = vec![x.clone()];
    if let Some(a) = axes {
        inputs.push(Tensor::from_i64(&[a.len()], a));
    }
    run(&node(op, inputs.len(), attrs), &inputs)
}

fn keep(k: i64) -> (&'static str, Attr) {
    ("keepdims", Attr::Int(k))
}

/// `[[1, 2, 3], [4, 5, 6]]`.
fn x23() -> Tensor {
    f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.])
}

#[track_caller]
fn check(t: &Tensor, shape: &[usize], values: &[f32]) {
    assert_eq!(t.shape, shape);
    assert_bits(t.f32s(), values);
}

#[test]
fn axes_from_attribute_or_input_with_keepdims() {
    let x = x23();
    let sum = OpKind::ReduceSum;
    let by_attr = reduce(sum, &[("axes", ints(&[1]))], &x, None).unwrap();
    check(&by_attr, &[2, 1], &[6., 15.]);
    let by_input = reduce(sum, &[], &x, Some(&[1])).unwrap();
    check(&by_input, &[2, 1], &[6., 15.]);
    let dropped = reduce(sum, &[keep(0)], &x, Some(&[1])).unwrap();
    check(&dropped, &[2], &[6., 15.]);
    let negative = reduce(sum, &[("axes", ints(&[-2]))], &x, None).unwrap();
    check(&negative, &[1, 3], &[5., 7., 9.]);
    let both = reduce(sum, &[keep(0)], &x, Some(&[0, -1])).unwrap();
    check(&both, &[], &[21.]);
    // No axes: every dimension, kept as 1 or dropped.
    check(&reduce(sum, &[], &x, None).unwrap(), &[1, 1], &[21.]);
    check(&reduce(sum, &[keep(0)], &x, None).unwrap(), &[], &[21.]);
    // An empty axes input is the same as none.
    check(&reduce(sum, &[], &x, Some(&[])).unwrap(), &[1, 1], &[21.]);
    let mean = reduce(OpKind::ReduceMean, &[keep(0)], &x, Some(&[0])).unwrap();
    check(&mean, &[3], &[2.5, 3.5, 4.5]);
    let max = reduce(OpKind::ReduceMax, &[("axes", ints(&[1]))], &x, None).unwrap();
    check(&max, &[2, 1], &[3., 6.]);
    // Two non-adjacent axes of [2, 3, 2].
    let x = f32t(&[2, 3, 2], &iota(12));
    let got = reduce(sum, &[keep(0)], &x, Some(&[0, 2])).unwrap();
    // Column j sums 1+2 + 7+8 style pairs: (2j+1) + (2j+2) + (2j+7) + (2j+8).
    check(&got, &[3], &[18., 26., 34.]);
}

#[test]
fn noop_with_empty_axes_returns_the_input() {
    let x = x23();
    let noop = [("noop_with_empty_axes", Attr::Int(1))];
    for op in [OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax] {
        check(&reduce(op, &noop, &x, None).unwrap(), &[2, 3], x.f32s());
        check(
            &reduce(op, &noop, &x, Some(&[])).unwrap(),
            &[2, 3],
            x.f32s(),
        );
        // With axes given the flag changes nothing.
        let got = reduce(op, &[noop[0].clone(), keep(0)], &x, Some(&[0])).unwrap();
        assert_eq!(got.shape, vec![3], "{op}");
    }
    // A scalar reduces to itself.
    let s = f32t(&[], &[-2.5]);
    check(
        &reduce(OpKind::ReduceMean, &[], &s, None).unwrap(),
        &[],
        &[-2.5],
    );
}

#[test]
fn empty_reductions() {
    let x = f32t(&[2, 0], &[]);
    let axis1 = [("axes", ints(&[1]))];
    check(
        &reduce(OpKind::ReduceSum, &axis1, &x, None).unwrap(),
        &[2, 1],
        &[0., 0.],
    );
    check(
        &reduce(OpKind::ReduceMean, &axis1, &x, None).unwrap(),
        &[2, 1],
        &[NAN, NAN],
    );
    check(
        &reduce(OpKind::ReduceMax, &axis1, &x, None).unwrap(),
        &[2, 1],
        &[-INF, -INF],
    );
    // Reducing the non-empty axis leaves an empty result.
    let got = reduce(OpKind::ReduceMax, &[("axes", ints(&[0]))], &x, None).unwrap();
    check(&got, &[1, 0], &[]);
    let xi = typed(DType::I32, &[0, 3], &[0i32; 0]);
    let axis0 = [("axes", ints(&[0])), keep(0)];
    let got = reduce(OpKind::ReduceSum, &axis0, &xi, None).unwrap();
    assert_eq!(got.values::<i32>(), &[0, 0, 0]);
    let got = reduce(OpKind::ReduceMax, &axis0, &xi, None).unwrap();
    assert_eq!(got.values::<i32>(), &[i32::MIN; 3]);
    let err = reduce(OpKind::ReduceMean, &axis0, &xi, None).unwrap_err();
    assert!(matches!(err, KernelError::Arithmetic { .. }), "{err:?}");
    let xl = typed(DType::I64, &[0], &[0i64; 0]);
    let got = reduce(OpKind::ReduceMax, &[], &xl, None).unwrap();
    assert_eq!(got.values::<i64>(), &[i64::MIN]);
}

#[test]
fn reduce_max_nan_and_signed_zero() {
    // NaN wins wherever it sits in the line.
    let x = f32t(&[3, 3], &[1., NAN, 3., NAN, 2., 1., 4., 5., NAN]);
    let got = reduce(OpKind::ReduceMax, &[keep(0)], &x, Some(&[1])).unwrap();
    check(&got, &[3], &[NAN, NAN, NAN]);
    // Of equal values the first is kept.
    let x = f32t(&[2, 2], &[-0., 0., 0., -0.]);
    let got = reduce(OpKind::ReduceMax, &[keep(0)], &x, Some(&[1])).unwrap();
    check(&got, &[2], &[-0., 0.]);
    let x = f32t(&[3], &[-INF, -1e30, -INF]);
    check(
        &reduce(OpKind::ReduceMax, &[], &x, None).unwrap(),
        &[1],
        &[-1e30],
    );
    // Sum and mean propagate NaN and infinities; inf - inf is NaN.
    let x = f32t(&[2, 2], &[INF, 1., INF, -INF]);
    let got = reduce(OpKind::ReduceSum, &[keep(0)], &x, Some(&[1])).unwrap();
    check(&got, &[2], &[INF, NAN]);
}

#[test]
fn float_sums_accumulate_in_f64_and_round_once() {
    // In f32, 1e8 + 1 = 1e8 and the 1 is lost.
    let x = f32t(&[3], &[1e8, 1., -1e8]);
    check(
        &reduce(OpKind::ReduceSum, &[], &x, None).unwrap(),
        &[1],
        &[1.],
    );
    // 2^24 + 1 + 1 = 16777218 exactly; / 3 = 5592406.
    let x = f32t(&[3], &[16_777_216., 1., 1.]);
    check(
        &reduce(OpKind::ReduceMean, &[], &x, None).unwrap(),
        &[1],
        &[5_592_406.],
    );
    // A partial sum beyond f32's range does not overflow in f64.
    let x = f32t(&[3], &[3e38, 3e38, -3e38]);
    check(
        &reduce(OpKind::ReduceSum, &[], &x, None).unwrap(),
        &[1],
        &[3e38],
    );
    // Sums start from +0.0: a sum of -0.0 is +0.0.
    let x = f32t(&[2], &[-0., -0.]);
    check(
        &reduce(OpKind::ReduceSum, &[], &x, None).unwrap(),
        &[1],
        &[0.],
    );
    // f16: 2048 + 1 + 1 = 2050 exactly (adding in f16 would stay at 2048).
    let x = f16t(&[3], &[2048., 1., 1.]);
    let out = reduce(OpKind::ReduceSum, &[], &x, None).unwrap();
    assert_eq!(f16_values(&out), vec![2050.]);
    let out = reduce(OpKind::ReduceMean, &[keep(0)], &f16t(&[2], &[1., 2.]), None).unwrap();
    assert_eq!(f16_values(&out), vec![1.5]);
}

#[test]
fn integer_reductions_wrap_and_truncate() {
    let x = typed(DType::I32, &[2, 2], &[i32::MAX, 1, i32::MAX, i32::MAX]);
    let sum = reduce(OpKind::ReduceSum, &[keep(0)], &x, Some(&[1])).unwrap();
    assert_eq!(sum.values::<i32>(), &[i32::MIN, -2]);
    // The mean is exact (no overflow in the sum) and truncated toward zero.
    let mean = reduce(OpKind::ReduceMean, &[keep(0)], &x, Some(&[1])).unwrap();
    assert_eq!(mean.values::<i32>(), &[1 << 30, i32::MAX]);
    let x = typed(DType::I64, &[3, 2], &[-3i64, -4, 7, 8, i64::MIN, i64::MIN]);
    let mean = reduce(OpKind::ReduceMean, &[keep(0)], &x, Some(&[1])).unwrap();
    assert_eq!(mean.values::<i64>(), &[-3, 7, i64::MIN]);
    let sum = reduce(OpKind::ReduceSum, &[keep(0)], &x, Some(&[1])).unwrap();
    assert_eq!(sum.values::<i64>(), &[-7, 15, 0]);
    let max = reduce(OpKind::ReduceMax, &[keep(0)], &x, Some(&[0])).unwrap();
    assert_eq!(max.values::<i64>(), &[7, 8]);
}

#[test]
fn bad_axes_and_dtypes_are_errors() {
    let x = x23();
    let sum = OpKind::ReduceSum;
    for axes in [&[2i64][..], &[-3], &[1, -1]] {
        let err = reduce(sum, &[], &x, Some(axes)).unwrap_err();
        assert!(
            matches!(err, KernelError::Shape { .. }),
            "{axes:?}: {err:?}"
        );
    }
    let err = reduce(sum, &[("axes", ints(&[0]))], &x, Some(&[1])).unwrap_err();
    assert!(err.to_string().contains("both"), "{err}");
    // Axes as i32, reductions of i8, u64 or bf16: not implemented.
    let axes32 = typed(DType::I32, &[1], &[0i32]);
    let err = run(&node(sum, 2, &[]), &[x.clone(), axes32]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    for d in [DType::I8, DType::U64, DType::BF16] {
        let t = Tensor::zeros(d, &[2]);
        let err = run(&node(OpKind::ReduceMax, 1, &[]), &[t]).unwrap_err();
        assert!(
            matches!(err, KernelError::Unsupported { .. }),
            "{d}: {err:?}"
        );
    }
}
