//! LogSoftmax, BatchNormalization and LayerNormalization (all three outputs).

use baton_delegate_api::TensorMut;

use super::*;

const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

#[test]
fn log_softmax_values_axes_and_large_logits() {
    let x = f32t(&[3], &[1., 2., 3.]);
    let (_, got) = run_f32(&node(OpKind::LogSoftmax, 1, &[]), &[x]);
    // x - ln(e + e^2 + e^3) = x - 3.40760596...
    assert_close(&got, &[-2.407_606, -1.407_606, -0.407_605_98], 1e-7);
    let x = f32t(&[1, 2], &[1000., 1001.]);
    let (_, got) = run_f32(&node(OpKind::LogSoftmax, 1, &[]), &[x]);
    // -ln(1 + e) and -ln(1 + 1/e).
    assert_close(&got, &[-1.313_261_6, -0.313_261_7], 1e-7);
    // Axis 0 of [[0, 0], [0, ln 2]]: columns [0, 0] and [0, ln 2].
    let ln2 = std::f32::consts::LN_2;
    let x = f32t(&[2, 2], &[0., 0., 0., ln2]);
    let n = node(OpKind::LogSoftmax, 1, &[("axis", Attr::Int(0))]);
    let (_, got) = run_f32(&n, std::slice::from_ref(&x));
    assert_close(&got, &[-ln2, -1.098_612_3, -ln2, -0.405_465_1], 1e-7);
    let n = node(OpKind::LogSoftmax, 1, &[("axis", Attr::Int(-2))]);
    let (_, again) = run_f32(&n, &[x]);
    assert_bits(&again, &got);
}

#[test]
fn log_softmax_non_finite_lines() {
    let x = f32t(
        &[4, 3],
        &[-INF, 0., 0., -INF, -INF, -INF, INF, 0., 1., NAN, 0., 1.],
    );
    let (_, got) = run_f32(&node(OpKind::LogSoftmax, 1, &[]), &[x]);
    let l = -std::f32::consts::LN_2;
    assert_bits(
        &got,
        &[-INF, l, l, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN],
    );
    let out = run(&node(OpKind::LogSoftmax, 1, &[]), &[f16t(&[2], &[3., 3.])]).unwrap();
    assert_eq!(f16_values(&out), vec![-0.693_359_4, -0.693_359_4]);
    let (shape, _) = run_f32(&node(OpKind::LogSoftmax, 1, &[]), &[f32t(&[2, 0], &[])]);
    assert_eq!(shape, vec![2, 0]);
    let err = run(&node(OpKind::LogSoftmax, 1, &[]), &[f32t(&[], &[1.])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
}

/// BatchNormalization of X `[1, 2, 2]` with per-channel parameters.
fn bn(attrs: &[(&str, Attr)], x: Tensor) -> Result<Tensor, KernelError> {
    let p = |v: [f32; 2]| f32t(&[2], &v);
    let inputs = [x, p([1., 2.]), p([0., 1.]), p([1., 3.]), p([4., 0.25])];
    run(&node(OpKind::BatchNormalization, 5, attrs), &inputs)
}

#[test]
fn batch_norm_per_channel() {
    let x = f32t(&[1, 2, 2], &[1., 2., 3., 4.]);
    let eps0 = [("epsilon", Attr::Float(0.))];
    // Channel 0: (x - 1) / 2 * 1 + 0; channel 1: (x - 3) / 0.5 * 2 + 1.
    let out = bn(&eps0, x.clone()).unwrap();
    assert_bits(out.f32s(), &[0., 0.5, 1., 5.]);
    // Default epsilon 1e-5: (2 - 1) / sqrt(4.00001) = 0.49999937...
    let out = bn(&[], x).unwrap();
    assert_close(&out.f32s()[..2], &[0., 0.499_999_37], 1e-8);
    // Channel is dimension 1 of a 4-D X [2, 2, 1, 2].
    let x = f32t(&[2, 2, 1, 2], &[1., 3., 3., 5., 9., 1., 4., 3.]);
    let out = bn(&eps0, x).unwrap();
    assert_eq!(out.shape, vec![2, 2, 1, 2]);
    assert_bits(out.f32s(), &[0., 1., 1., 9., 4., 0., 5., 1.]);
    // An empty batch, NaN and inf.
    let out = bn(&eps0, f32t(&[0, 2, 3], &[])).unwrap();
    assert_eq!(out.shape, vec![0, 2, 3]);
    let out = bn(&eps0, f32t(&[1, 2, 1], &[NAN, INF])).unwrap();
    assert_bits(out.f32s(), &[NAN, INF]);
}

#[test]
fn batch_norm_rank1_f16_and_errors() {
    // Rank 1: one channel.
    let p = |v: f32| f32t(&[1], &[v]);
    let inputs = [f32t(&[3], &[0., 2., 4.]), p(2.), p(1.), p(2.), p(1.)];
    let eps0 = [("epsilon", Attr::Float(0.))];
    let (_, got) = run_f32(&node(OpKind::BatchNormalization, 5, &eps0), &inputs);
    assert_bits(&got, &[-3., 1., 5.]);
    // f16 X with f32 parameters gives f16.
    let out = bn(&eps0, f16t(&[1, 2, 1], &[2., 4.])).unwrap();
    assert_eq!(out.dtype, DType::F16);
    assert_eq!(f16_values(&out), vec![0.5, 5.]);
    // Three channels against two-element parameters; a scalar X.
    let err = bn(&eps0, f32t(&[1, 3], &[0.; 3])).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    let err = bn(&eps0, f32t(&[], &[0.])).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
}

#[test]
fn batch_norm_training_mode_uses_batch_statistics_and_updates_running_ones() {
    // X [2, 2, 1]: channel 0 holds 1 and 3, channel 1 holds 2 and 6.
    let x = f32t(&[2, 2, 1], &[1., 2., 3., 6.]);
    let p = |v: [f32; 2]| f32t(&[2], &v);
    let inputs = [x, p([1., 2.]), p([0., 1.]), p([10., 20.]), p([5., 6.])];
    let attrs = [
        ("training_mode", Attr::Int(1)),
        ("momentum", Attr::Float(0.75)),
        ("epsilon", Attr::Float(0.)),
    ];
    let n = Node {
        outputs: vec![10, 11, 12],
        ..node(OpKind::BatchNormalization, 5, &attrs)
    };
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    let shapes = expected_outputs(&n, &views).unwrap();
    assert_eq!(shapes[1].1, vec![2]);
    let mut outs: Vec<Tensor> = shapes.iter().map(|(d, s)| Tensor::zeros(*d, s)).collect();
    let mut out_views: Vec<TensorMut<'_>> = outs.iter_mut().map(Tensor::view_mut).collect();
    run_node(&n, &views, &mut out_views).unwrap();
    // Batch means 2 and 4, population variances 1 and 4: channel 0 (x - 2) / 1 * 1 + 0,
    // channel 1 (x - 4) / 2 * 2 + 1.
    assert_bits(outs[0].f32s(), &[-1., -1., 1., 3.]);
    // running = input * 0.75 + batch * 0.25.
    assert_bits(outs[1].f32s(), &[8., 16.]);
    assert_bits(outs[2].f32s(), &[4., 5.5]);
    // Without training_mode there is only Y.
    let inference = node(OpKind::BatchNormalization, 5, &attrs[2..]);
    assert_eq!(expected_outputs(&inference, &views).unwrap().len(), 1);
}

/// Runs LayerNormalization into all three outputs: `(Y, Mean, InvStdDev)`.
fn layer_norm(attrs: &[(&str, Attr)], inputs: &[Tensor]) -> Result<[Tensor; 3], KernelError> {
    let n = Node {
        outputs: vec![10, 11, 12],
        ..node(OpKind::LayerNormalization, inputs.len(), attrs)
    };
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    let outs = check_operands(&n, &views).and_then(|()| expected_outputs(&n, &views))?;
    let mut tensors = outs.iter().map(|(d, s)| Tensor::zeros(*d, s));
    let mut t = [(); 3].map(|()| tensors.next().unwrap());
    let mut views_out: Vec<TensorMut<'_>> = t.iter_mut().map(Tensor::view_mut).collect();
    run_node(&n, &views, &mut views_out)?;
    Ok(t)
}

#[test]
fn layer_norm_outputs_y_mean_and_inv_std_dev() {
    let x = f32t(&[2, 3], &[1., 2., 3., 2., 4., 6.]);
    let ones = f32t(&[3], &[1., 1., 1.]);
    let eps0 = [("epsilon", Attr::Float(0.))];
    let [y, mean, inv] = layer_norm(&eps0, &[x.clone(), ones.clone()]).unwrap();
    // Row 0: mean 2, var 2/3; row 1: mean 4, var 8/3. Both normalize to [-a, 0, a],
    // a = sqrt(1.5).
    let a = 1.224_744_9;
    assert_eq!(y.shape, vec![2, 3]);
    assert_close(y.f32s(), &[-a, 0., a, -a, 0., a], 1e-7);
    assert_eq!((mean.dtype, &mean.shape), (DType::F32, &vec![2, 1]));
    assert_bits(mean.f32s(), &[2., 4.]);
    assert_eq!(inv.shape, vec![2, 1]);
    assert_close(inv.f32s(), &[a, 0.612_372_46], 1e-7);

    // Default epsilon 1e-5 (as f32), Scale and B.
    let [y, _, inv] = layer_norm(&[], &[x.clone(), ones]).unwrap();
    assert_close(&y.f32s()[..3], &[-1.224_735_7, 0., 1.224_735_7], 1e-7);
    assert_close(inv.f32s(), &[1.224_735_7, 0.612_371_27], 1e-7);
    let scale = f32t(&[3], &[2., 1., 0.5]);
    let bias = f32t(&[3], &[1., 0., -1.]);
    let [y, ..] = layer_norm(&eps0, &[x.clone(), scale, bias]).unwrap();
    let row = [-1.449_489_7, 0., -0.387_627_57];
    assert_close(y.f32s(), &[row, row].concat(), 1e-7);

    // axis 0 normalizes everything: mean 3, var 8/3.
    let axis0 = [("axis", Attr::Int(0)), ("epsilon", Attr::Float(0.))];
    let all_ones = f32t(&[2, 3], &[1.; 6]);
    let [y, mean, inv] = layer_norm(&axis0, &[x.clone(), all_ones]).unwrap();
    let b = 0.612_372_46;
    assert_close(y.f32s(), &[-1.224_744_9, -b, 0., -b, b, 1.837_117_3], 1e-7);
    assert_eq!((mean.shape.clone(), mean.f32s()), (vec![1, 1], &[3.][..]));
    assert_close(inv.f32s(), &[b], 1e-7);

    // A Scale of one element broadcasts; axis -2 of a 2-D X is axis 0.
    let axis_neg = [("axis", Attr::Int(-2)), ("epsilon", Attr::Float(0.))];
    let [y2, ..] = layer_norm(&axis_neg, &[x, f32t(&[1], &[1.])]).unwrap();
    assert_bits(y2.f32s(), y.f32s());
}

#[test]
fn layer_norm_constant_rows_empty_blocks_f16_and_errors() {
    // A constant row has variance 0: Y is B, InvStdDev is 1/sqrt(epsilon).
    let x = f32t(&[1, 3], &[5., 5., 5.]);
    let [y, mean, inv] = layer_norm(
        &[],
        &[x.clone(), f32t(&[3], &[1.; 3]), f32t(&[3], &[0., -0., 2.])],
    )
    .unwrap();
    assert_bits(y.f32s(), &[0., 0., 2.]);
    assert_bits(mean.f32s(), &[5.]);
    assert_close(inv.f32s(), &[316.227_78], 1e-4);
    // Without B nothing is added, so the sign of a zero survives: (x - mean) * inv * -1.
    let [y, ..] = layer_norm(&[], &[x, f32t(&[3], &[-1.; 3])]).unwrap();
    assert_bits(y.f32s(), &[-0., -0., -0.]);
    // An empty normalized block: no Y elements, NaN statistics.
    let [y, mean, inv] = layer_norm(&[], &[f32t(&[2, 0], &[]), f32t(&[0], &[])]).unwrap();
    assert_eq!(
        (y.shape.clone(), mean.shape.clone()),
        (vec![2, 0], vec![2, 1])
    );
    assert_bits(mean.f32s(), &[NAN, NAN]);
    assert_bits(inv.f32s(), &[NAN, NAN]);
    // f16: Y is f16, the statistics f32.
    let [y, mean, _] = layer_norm(
        &[("epsilon", Attr::Float(0.))],
        &[f16t(&[2], &[1., 3.]), f16t(&[2], &[1., 1.])],
    )
    .unwrap();
    assert_eq!(f16_values(&y), vec![-1., 1.]);
    assert_eq!(mean.dtype, DType::F32);
    // Scale that does not broadcast to X, an axis out of range, mixed dtypes.
    let x = f32t(&[2, 3], &[0.; 6]);
    let err = layer_norm(&[], &[x.clone(), f32t(&[2], &[1., 1.])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    let err = layer_norm(&[("axis", Attr::Int(2))], &[x.clone(), f32t(&[1], &[1.])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    let err = layer_norm(&[], &[x, f16t(&[3], &[1.; 3])]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

#[test]
fn layer_norm_y_alone_is_a_valid_prefix() {
    let x = f32t(&[1, 2], &[0., 2.]);
    let n = node(
        OpKind::LayerNormalization,
        2,
        &[("epsilon", Attr::Float(0.))],
    );
    let (_, got) = run_f32(&n, &[x, f32t(&[2], &[1., 1.])]);
    assert_bits(&got, &[-1., 1.]);
}
