//! CausalConvWithState against hand-computed values.

use super::*;

fn run_all(node: &Node, inputs: &[Tensor], outputs: usize) -> Result<Vec<Tensor>, KernelError> {
    let node = Node {
        outputs: (0..outputs).map(|k| 100 + k).collect(),
        ..node.clone()
    };
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    check_operands(&node, &views)?;
    let expected = expected_outputs(&node, &views)?;
    let mut outs: Vec<Tensor> = expected
        .iter()
        .take(outputs)
        .map(|(d, s)| Tensor::zeros(*d, s))
        .collect();
    let mut muts: Vec<_> = outs.iter_mut().map(Tensor::view_mut).collect();
    run_node(&node, &views, &mut muts)?;
    drop(muts);
    Ok(outs)
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.values::<f32>().to_vec()
}

/// Two channels of three steps; kernels of 3: channel 0 `[0.5, 1, 2]`, channel 1
/// `[1, -1, 1]`.
fn causal_operands() -> (Tensor, Tensor) {
    (
        f32t(&[1, 2, 3], &[1., 2., 3., 4., 5., 6.]),
        f32t(&[2, 1, 3], &[0.5, 1., 2., 1., -1., 1.]),
    )
}

#[test]
fn causal_conv_zero_state_bias_and_past_state() {
    let (x, w) = causal_operands();
    let n = node(OpKind::CausalConvWithState, 2, &[]);
    let outs = run_all(&n, &[x.clone(), w.clone()], 2).unwrap();
    // Channel 0 reads [0, 0, 1, 2, 3]: 2, 1 + 4, 0.5 + 2 + 6; channel 1 [0, 0, 4, 5, 6].
    assert_eq!(outs[0].shape, vec![1, 2, 3]);
    assert_bits(&f32s(&outs[0]), &[2., 5., 8.5, 4., 1., 5.]);
    assert_eq!(outs[1].shape, vec![1, 2, 2]);
    assert_bits(&f32s(&outs[1]), &[2., 3., 5., 6.]);
    // The bias is added per channel; an omitted bias (0 elements) before a past state.
    let b = f32t(&[2], &[1., -1.]);
    let n = node(OpKind::CausalConvWithState, 3, &[]);
    let outs = run_all(&n, &[x.clone(), w.clone(), b], 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[3., 6., 9.5, 3., 0., 4.]);
    let past = f32t(&[1, 2, 2], &[10., 20., 1., 1.]);
    let n = node(OpKind::CausalConvWithState, 4, &[]);
    let outs = run_all(&n, &[x, w, f32t(&[0], &[]), past], 2).unwrap();
    // Channel 0 reads [10, 20, 1, 2, 3]: 5 + 20 + 2, 10 + 1 + 4, 8.5.
    assert_bits(&f32s(&outs[0]), &[27., 15., 8.5, 4., 2., 5.]);
    assert_bits(&f32s(&outs[1]), &[2., 3., 5., 6.]);
}

#[test]
fn causal_conv_silu_and_kernel_of_one() {
    let (x, w) = causal_operands();
    for name in ["silu", "swish"] {
        let n = node(
            OpKind::CausalConvWithState,
            2,
            &[("activation", Attr::Str(name.into()))],
        );
        let outs = run_all(&n, &[x.clone(), w.clone()], 2).unwrap();
        // v / (1 + e^-v) of the plain outputs 2, 5, 8.5, 4, 1, 5.
        let want = [
            1.761_594_2,
            4.966_535_7,
            8.498_271,
            3.928_055_2,
            0.731_058_6,
            4.966_535_7,
        ];
        assert_close(&f32s(&outs[0]), &want, 1e-6);
    }
    let n = node(OpKind::CausalConvWithState, 2, &[]);
    let outs = run_all(&n, &[x.clone(), f32t(&[2, 1, 1], &[2., 3.])], 2).unwrap();
    assert_bits(&f32s(&outs[0]), &[2., 4., 6., 12., 15., 18.]);
    assert_eq!(outs[1].shape, vec![1, 2, 0]);
    let bad = node(
        OpKind::CausalConvWithState,
        2,
        &[("activation", Attr::Str("relu".into()))],
    );
    assert!(run_all(&bad, &[x.clone(), w.clone()], 1).is_err());
    // A weight whose channels differ from the input's is refused, not read out of bounds.
    assert!(run_all(&n, &[x, f32t(&[3, 1, 1], &[1., 1., 1.])], 1).is_err());
}

#[test]
fn causal_conv_f16() {
    let x = f16t(&[1, 1, 2], &[1.0, 3.0]);
    let w = f16t(&[1, 1, 2], &[0.1, 0.2]);
    let n = node(OpKind::CausalConvWithState, 2, &[]);
    let outs = run_all(&n, &[x, w], 2).unwrap();
    // f16(0.1) = 0.0999755859375, f16(0.2) = 0.199951171875: 0.19995 and
    // 0.09998 + 0.59985 = 0.69983 rounded to f16.
    assert_eq!(outs[0].dtype, DType::F16);
    assert_close(&f16_values(&outs[0]), &[0.199_951_17, 0.699_707_03], 1e-7);
    assert_close(&f16_values(&outs[1]), &[3.0], 0.0);
}
