use super::*;

#[test]
fn sigmoid_values_and_extremes() {
    let x = f32t(&[6], &[0., 2., -2., 100., -100., f32::NAN]);
    let (_, got) = run_f32(&node(OpKind::Sigmoid, 1, &[]), &[x]);
    // 1/(1+e^-2) = 0.8807970779778823; e^-100 = 3.720075976020836e-44 (an f32 subnormal).
    assert_close(&got[..5], &[0.5, 0.880_797_1, 0.119_202_92, 1.0, 0.0], 1e-7);
    assert!(
        got[4] > 0.0 && (got[4] as f64 - 3.720_075_976_020_836e-44).abs() < 2e-45,
        "{}",
        got[4]
    );
    assert!(got[5].is_nan());
}

#[test]
fn tanh_values() {
    let x = f32t(&[5], &[0., 1., -1., 20., f32::NEG_INFINITY]);
    let (_, got) = run_f32(&node(OpKind::Tanh, 1, &[]), &[x]);
    assert_close(&got, &[0., 0.761_594_2, -0.761_594_2, 1., -1.], 1e-7);
    let out = run(&node(OpKind::Tanh, 1, &[]), &[f16t(&[1], &[0.5])]).unwrap();
    // tanh(0.5) = 0.46211715726; nearest f16 (spacing 2^-12) is 0.462158203125.
    assert_eq!(f16_values(&out), vec![1893. / 4096.]);
}

#[test]
fn softmax_of_large_values_stays_finite() {
    let x = f32t(&[1, 2], &[1000., 1001.]);
    let (_, got) = run_f32(&node(OpKind::Softmax, 1, &[]), &[x]);
    // 1/(1+e), e/(1+e)
    assert_close(&got, &[0.268_941_43, 0.731_058_6], 1e-7);
    let x = f32t(&[3], &[-1000., 0., -1000.]);
    let (_, got) = run_f32(&node(OpKind::Softmax, 1, &[]), &[x]);
    assert_close(&got, &[0., 1., 0.], 0.);
}

#[test]
fn softmax_axis_selects_the_reduced_dimension() {
    let x = f32t(&[2, 2], &[1., 2., 3., 4.]);
    // Default axis -1: rows [1,2] and [3,4] each give [1/(1+e), e/(1+e)].
    let (_, got) = run_f32(&node(OpKind::Softmax, 1, &[]), std::slice::from_ref(&x));
    assert_close(
        &got,
        &[0.268_941_43, 0.731_058_6, 0.268_941_43, 0.731_058_6],
        1e-7,
    );
    // Axis 0: columns [1,3] and [2,4] each give [1/(1+e^2), e^2/(1+e^2)].
    let n = node(OpKind::Softmax, 1, &[("axis", Attr::Int(0))]);
    let (_, got) = run_f32(&n, &[x]);
    assert_close(
        &got,
        &[0.119_202_92, 0.119_202_92, 0.880_797_1, 0.880_797_1],
        1e-7,
    );
    // A middle axis of [1,3,2]: column 0 is [0,0,0], column 1 is [0,0,ln 2].
    let ln2 = std::f32::consts::LN_2;
    let x = f32t(&[1, 3, 2], &[0., 0., 0., 0., 0., ln2]);
    let n = node(OpKind::Softmax, 1, &[("axis", Attr::Int(1))]);
    let (_, got) = run_f32(&n, &[x]);
    let third = 1. / 3.;
    assert_close(&got, &[third, 0.25, third, 0.25, third, 0.5], 1e-7);
}

#[test]
fn softmax_non_finite_rows() {
    let inf = f32::INFINITY;
    let x = f32t(&[4, 2], &[-inf, -inf, -inf, 0., inf, 0., f32::NAN, 1.]);
    let (_, got) = run_f32(&node(OpKind::Softmax, 1, &[]), &[x]);
    let nan = f32::NAN;
    assert_bits(&got, &[nan, nan, 0., 1., nan, nan, nan, nan]);
}

#[test]
fn softmax_f16_empty_and_bad_axis() {
    let out = run(&node(OpKind::Softmax, 1, &[]), &[f16t(&[2], &[3., 3.])]).unwrap();
    assert_eq!(f16_values(&out), vec![0.5, 0.5]);
    let (shape, got) = run_f32(&node(OpKind::Softmax, 1, &[]), &[f32t(&[2, 0], &[])]);
    assert_eq!(shape, vec![2, 0]);
    assert!(got.is_empty());
    let (shape, _) = run_f32(&node(OpKind::Softmax, 1, &[]), &[f32t(&[0, 3], &[])]);
    assert_eq!(shape, vec![0, 3]);
    let n = node(OpKind::Softmax, 1, &[("axis", Attr::Int(2))]);
    let err = run(&n, &[f32t(&[2, 2], &[0.; 4])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    let err = run(&node(OpKind::Softmax, 1, &[]), &[f32t(&[], &[1.])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
}

#[test]
fn transcendental_ops_refuse_integers() {
    let x = typed(DType::I32, &[1], &[1i32]);
    for op in [OpKind::Sigmoid, OpKind::Tanh, OpKind::Softmax] {
        let err = run(&node(op, 1, &[]), std::slice::from_ref(&x)).unwrap_err();
        assert!(
            matches!(err, KernelError::Unsupported { .. }),
            "{op}: {err:?}"
        );
    }
}
