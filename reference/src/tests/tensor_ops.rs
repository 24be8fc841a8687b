//! Squeeze, Unsqueeze, Identity, Split, Slice, Gather, Expand, Pad, Tile, Shape, Size and
//! ConstantOfShape against hand-computed values.

use std::panic::{catch_unwind, AssertUnwindSafe};

use baton_delegate_api::ir::GraphBuilder;
use baton_delegate_api::TensorMut;

use super::super::{run_graph, supports};
use super::*;

fn i64t(shape: &[usize], values: &[i64]) -> Tensor {
    Tensor::from_i64(shape, values)
}

/// Runs `node` into the first `n` outputs its op produces.
pub(super) fn run_outputs(
    node: &Node,
    inputs: &[Tensor],
    n: usize,
) -> Result<Vec<Tensor>, KernelError> {
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    check_operands(node, &views)?;
    let expected = expected_outputs(node, &views)?;
    let mut outs: Vec<Tensor> = expected
        .iter()
        .take(n)
        .map(|(d, s)| Tensor::zeros(*d, s))
        .collect();
    let mut out_views: Vec<TensorMut<'_>> = outs.iter_mut().map(Tensor::view_mut).collect();
    run_node(node, &views, &mut out_views)?;
    drop(out_views);
    Ok(outs)
}

#[test]
fn squeeze_and_unsqueeze_by_input_or_attribute() {
    let x = f32t(&[1, 3, 1, 2], &iota(6));
    // Input axes (opset 13), negative.
    let out = run(
        &node(OpKind::Squeeze, 2, &[]),
        &[x.clone(), i64t(&[1], &[-2])],
    )
    .unwrap();
    assert_eq!(out.shape, vec![1, 3, 2]);
    assert_bits(out.f32s(), &iota(6));
    // Attribute axes (opset 11) and no axes at all.
    let n = node(OpKind::Squeeze, 1, &[("axes", ints(&[0, 2]))]);
    assert_eq!(run(&n, std::slice::from_ref(&x)).unwrap().shape, vec![3, 2]);
    let out = run(&node(OpKind::Squeeze, 1, &[]), std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.shape, vec![3, 2]);
    let n = node(OpKind::Squeeze, 2, &[]);
    assert_eq!(
        run(&n, &[x.clone(), i64t(&[0], &[])]).unwrap().shape,
        vec![3, 2]
    );
    // An axis of extent 3 cannot go.
    let err = run(&node(OpKind::Squeeze, 2, &[]), &[x, i64t(&[1], &[1])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");

    // Unsqueeze: positions in the output, negative ones from its end.
    let x = typed(DType::I32, &[2, 3], &[1i32, 2, 3, 4, 5, 6]);
    let n = node(OpKind::Unsqueeze, 2, &[]);
    let out = run(&n, &[x.clone(), i64t(&[2], &[0, -1])]).unwrap();
    assert_eq!(out.shape, vec![1, 2, 3, 1]);
    assert_eq!(out.values::<i32>(), &[1, 2, 3, 4, 5, 6]);
    let n = node(OpKind::Unsqueeze, 1, &[("axes", ints(&[1]))]);
    assert_eq!(
        run(&n, std::slice::from_ref(&x)).unwrap().shape,
        vec![2, 1, 3]
    );
    let n = node(OpKind::Unsqueeze, 2, &[]);
    assert!(run(&n, &[x.clone(), i64t(&[2], &[1, 1])]).is_err());
    let out = run(
        &node(OpKind::Unsqueeze, 2, &[]),
        &[f32t(&[], &[5.]), i64t(&[1], &[0])],
    );
    assert_eq!(out.unwrap().shape, vec![1]);

    let out = run(&node(OpKind::Identity, 1, &[]), &[x]).unwrap();
    assert_eq!(out.values::<i32>(), &[1, 2, 3, 4, 5, 6]);
}

#[test]
fn split_by_sizes_num_outputs_and_output_count() {
    let x = f32t(&[2, 5], &iota(10));
    let n = node(OpKind::Split, 2, &[("axis", Attr::Int(-1))]);
    let outs = run_outputs(&n, &[x.clone(), i64t(&[3], &[2, 0, 3])], 3).unwrap();
    assert_eq!(outs[0].shape, vec![2, 2]);
    assert_bits(outs[0].f32s(), &[1., 2., 6., 7.]);
    assert_eq!(outs[1].shape, vec![2, 0]);
    assert_bits(outs[2].f32s(), &[3., 4., 5., 8., 9., 10.]);
    // num_outputs (opset 18): ceil(5 / 3) = 2, so 2, 2, 1.
    let n = node(
        OpKind::Split,
        1,
        &[("axis", Attr::Int(1)), ("num_outputs", Attr::Int(3))],
    );
    let outs = run_outputs(&n, std::slice::from_ref(&x), 3).unwrap();
    let widths: Vec<usize> = outs.iter().map(|t| t.shape[1]).collect();
    assert_eq!(widths, vec![2, 2, 1]);
    assert_bits(outs[2].f32s(), &[5., 10.]);
    // Only a prefix of the outputs.
    assert_eq!(
        run_outputs(&n, std::slice::from_ref(&x), 1).unwrap().len(),
        1
    );
    // Without either, the node's output count: one here, so the whole axis 0.
    let out = run(&node(OpKind::Split, 1, &[]), std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.shape, vec![2, 5]);
    // Sizes that do not add up.
    let n = node(OpKind::Split, 2, &[("axis", Attr::Int(1))]);
    assert!(run(&n, &[x, i64t(&[2], &[2, 2])]).is_err());
}

#[test]
fn split_in_a_graph_with_named_outputs() {
    let mut g = GraphBuilder::new("split");
    let x = g.input_fixed("x", DType::I64, &[6]);
    let parts = g
        .named_node_outputs(
            "s",
            OpKind::Split,
            &[x],
            &[("num_outputs", Attr::Int(3))],
            3,
        )
        .unwrap();
    let sum = g.node(OpKind::Add, &[parts[0], parts[2]], &[]).unwrap();
    g.output(sum);
    g.output(parts[1]);
    let graph = g.finish().unwrap();
    assert_eq!(graph.tensors[parts[2]].name, "s_out2");
    let outs = run_graph(&graph, &[i64t(&[6], &[1, 2, 3, 4, 5, 6])]).unwrap();
    assert_eq!(outs[0].values::<i64>(), &[6, 8]);
    assert_eq!(outs[1].values::<i64>(), &[3, 4]);
}

#[test]
fn slice_clamps_steps_and_empties() {
    let x = f32t(&[2, 5], &iota(10));
    let s = |starts: &[i64], ends: &[i64], axes: &[i64], steps: &[i64]| {
        let n = node(OpKind::Slice, 5, &[]);
        let k = starts.len();
        run(
            &n,
            &[
                x.clone(),
                i64t(&[k], starts),
                i64t(&[k], ends),
                i64t(&[k], axes),
                i64t(&[k], steps),
            ],
        )
        .map(|t| (t.shape.clone(), t.f32s().to_vec()))
    };
    // INT64_MAX end, negative start.
    let (shape, v) = s(&[-3], &[i64::MAX], &[1], &[1]).unwrap();
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&v, &[3., 4., 5., 8., 9., 10.]);
    // Reversal with INT64_MIN end, on both axes.
    let (shape, v) = s(&[-1, -1], &[i64::MIN, i64::MIN], &[0, 1], &[-1, -2]).unwrap();
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&v, &[10., 8., 6., 5., 3., 1.]);
    // Step 2 from 1, start past the end, empty.
    assert_bits(&s(&[1], &[5], &[-1], &[2]).unwrap().1, &[2., 4., 7., 9.]);
    assert_eq!(s(&[7], &[9], &[1], &[1]).unwrap().0, vec![2, 0]);
    assert_eq!(s(&[3], &[1], &[1], &[1]).unwrap().0, vec![2, 0]);
    assert!(s(&[0], &[1], &[1], &[0]).is_err());
    // Without axes and steps (3 inputs) and in the attribute form of opset 1.
    let n = node(OpKind::Slice, 3, &[]);
    let out = run(&n, &[x.clone(), i64t(&[1], &[1]), i64t(&[1], &[2])]).unwrap();
    assert_bits(out.f32s(), &[6., 7., 8., 9., 10.]);
    let n = node(
        OpKind::Slice,
        1,
        &[
            ("starts", ints(&[0])),
            ("ends", ints(&[2])),
            ("axes", ints(&[1])),
        ],
    );
    assert_bits(run(&n, &[x]).unwrap().f32s(), &[1., 2., 6., 7.]);
}

#[test]
fn gather_negative_indices_both_index_dtypes() {
    let x = f32t(&[3, 2], &iota(6));
    let n = node(OpKind::Gather, 2, &[]);
    let out = run(&n, &[x.clone(), i64t(&[2, 2], &[2, -3, -1, 1])]).unwrap();
    assert_eq!(out.shape, vec![2, 2, 2]);
    assert_bits(out.f32s(), &[5., 6., 1., 2., 5., 6., 3., 4.]);
    let n = node(OpKind::Gather, 2, &[("axis", Attr::Int(-1))]);
    let idx = typed(DType::I32, &[], &[-1i32]);
    let out = run(&n, &[x.clone(), idx]).unwrap();
    assert_eq!(out.shape, vec![3]);
    assert_bits(out.f32s(), &[2., 4., 6.]);
    // Out of range, either way: an error naming the node.
    for bad in [3i64, -4] {
        let err = run(
            &node(OpKind::Gather, 2, &[]),
            &[x.clone(), i64t(&[1], &[bad])],
        );
        let err = err.unwrap_err();
        assert!(matches!(err, KernelError::Arithmetic { .. }), "{err:?}");
        assert!(err.to_string().contains("test_gather (Gather)"), "{err}");
    }
    // Empty indices, bool data.
    let b = typed(DType::Bool, &[2], &[1u8, 0]);
    let out = run(&node(OpKind::Gather, 2, &[]), &[b, i64t(&[0], &[])]).unwrap();
    assert_eq!(out.shape, vec![0]);
}

#[test]
fn expand_and_tile() {
    let x = typed(DType::I8, &[3, 1], &[1i8, 2, 3]);
    let n = node(OpKind::Expand, 2, &[]);
    let out = run(&n, &[x.clone(), i64t(&[3], &[2, 1, 2])]).unwrap();
    assert_eq!(out.shape, vec![2, 3, 2]);
    assert_eq!(out.values::<i8>(), &[1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3]);
    // The target may be smaller than the input (1 keeps the input's extent).
    let out = run(&n, &[x.clone(), i64t(&[1], &[1])]).unwrap();
    assert_eq!(out.shape, vec![3, 1]);
    assert!(run(&n, &[x.clone(), i64t(&[2], &[2, 2])]).is_err());

    let n = node(OpKind::Tile, 2, &[]);
    let out = run(&n, &[x.clone(), i64t(&[2], &[2, 3])]).unwrap();
    assert_eq!(out.shape, vec![6, 3]);
    let want: Vec<i8> = [1, 2, 3, 1, 2, 3].iter().flat_map(|&v| [v; 3]).collect();
    assert_eq!(out.values::<i8>(), want.as_slice());
    let out = run(&n, &[x.clone(), i64t(&[2], &[0, 1])]).unwrap();
    assert_eq!(out.shape, vec![0, 1]);
    assert!(run(&n, &[x, i64t(&[1], &[2])]).is_err());
}

#[test]
fn pad_modes() {
    let x = f32t(&[2, 3], &iota(6));
    let pad = |mode: &str, pads: &[i64], extra: Option<Tensor>| {
        let mut inputs = vec![x.clone(), i64t(&[pads.len()], pads)];
        inputs.extend(extra);
        let n = node(
            OpKind::Pad,
            inputs.len(),
            &[("mode", Attr::Str(mode.into()))],
        );
        run(&n, &inputs).map(|t| (t.shape.clone(), t.f32s().to_vec()))
    };
    // Constant with a value, rows before and columns after.
    let (shape, v) = pad("constant", &[1, 0, 0, 1], Some(f32t(&[], &[-1.]))).unwrap();
    assert_eq!(shape, vec![3, 4]);
    assert_bits(&v, &[-1., -1., -1., -1., 1., 2., 3., -1., 4., 5., 6., -1.]);
    // Default 0 and an empty constant operand.
    let (_, v) = pad("constant", &[0, 1, 0, 0], Some(f32t(&[0], &[]))).unwrap();
    assert_bits(&v, &[0., 1., 2., 3., 0., 4., 5., 6.]);
    // Reflect excludes the edge; edge repeats it.
    let (_, v) = pad("reflect", &[0, 2, 0, 1], None).unwrap();
    assert_bits(&v, &[3., 2., 1., 2., 3., 2., 6., 5., 4., 5., 6., 5.]);
    let (_, v) = pad("edge", &[1, 1, 0, 0], None).unwrap();
    assert_bits(&v, &[1., 1., 2., 3., 1., 1., 2., 3., 4., 4., 5., 6.]);
    // Negative pads crop, and the mode pads what is left.
    let (shape, v) = pad("edge", &[0, -1, 0, 1], None).unwrap();
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&v, &[2., 3., 3., 5., 6., 6.]);
    // Reflect needs pads below the extent; cropping past it fails.
    assert!(pad("reflect", &[0, 3, 0, 0], None).is_err());
    assert!(pad("constant", &[0, -2, 0, -2], None).is_err());
    // Wrap continues from the other end, as often as the pads need.
    let (_, v) = pad("wrap", &[0, 1, 0, 4], None).unwrap();
    #[rustfmt::skip]
    assert_bits(&v, &[3., 1., 2., 3., 1., 2., 3., 1., 6., 4., 5., 6., 4., 5., 6., 4.]);
    // Axes (opset 18) with a u8 constant, and the attribute form.
    let u = typed(DType::U8, &[2, 2], &[1u8, 2, 3, 4]);
    let n = node(OpKind::Pad, 4, &[]);
    let inputs = [
        u.clone(),
        i64t(&[2], &[1, 0]),
        typed(DType::U8, &[1], &[9u8]),
        i64t(&[1], &[-1]),
    ];
    assert_eq!(
        run(&n, &inputs).unwrap().values::<u8>(),
        &[9, 1, 2, 9, 3, 4]
    );
    let n = node(
        OpKind::Pad,
        1,
        &[("pads", ints(&[0, 0, 1, 0])), ("value", Attr::Float(7.0))],
    );
    assert_eq!(run(&n, &[u]).unwrap().values::<u8>(), &[1, 2, 3, 4, 7, 7]);
}

#[test]
fn shape_size_and_constant_of_shape() {
    let x = f16t(&[2, 3, 4], &[0.; 24]);
    let out = run(&node(OpKind::Shape, 1, &[]), std::slice::from_ref(&x)).unwrap();
    assert_eq!(out.dtype, DType::I64);
    assert_eq!(out.values::<i64>(), &[2, 3, 4]);
    let n = node(
        OpKind::Shape,
        1,
        &[("start", Attr::Int(-2)), ("end", Attr::Int(10))],
    );
    assert_eq!(
        run(&n, std::slice::from_ref(&x)).unwrap().values::<i64>(),
        &[3, 4]
    );
    let n = node(
        OpKind::Shape,
        1,
        &[("start", Attr::Int(2)), ("end", Attr::Int(1))],
    );
    assert_eq!(run(&n, std::slice::from_ref(&x)).unwrap().shape, vec![0]);
    let out = run(&node(OpKind::Size, 1, &[]), &[x]).unwrap();
    assert_eq!(
        (out.shape.clone(), out.values::<i64>()),
        (vec![], &[24i64][..])
    );

    let n = node(OpKind::ConstantOfShape, 1, &[]);
    let out = run(&n, &[i64t(&[2], &[2, 1])]).unwrap();
    assert_eq!((out.dtype, out.shape.clone()), (DType::F32, vec![2, 1]));
    assert_bits(out.f32s(), &[0., 0.]);
    let n = node(
        OpKind::ConstantOfShape,
        1,
        &[("value", Attr::Int(1 << 40)), ("value_dtype", Attr::Int(7))],
    );
    let out = run(&n, &[i64t(&[1], &[3])]).unwrap();
    assert_eq!(out.values::<i64>(), &[1 << 40; 3]);
    let n = node(
        OpKind::ConstantOfShape,
        1,
        &[("value", Attr::Float(-2.5)), ("value_dtype", Attr::Int(10))],
    );
    let out = run(&n, &[i64t(&[0], &[])]).unwrap();
    assert_eq!(out.shape, Vec::<usize>::new());
    assert_eq!(f16_values(&out), vec![-2.5]);
    assert!(run(&n, &[i64t(&[1], &[-1])]).is_err());
}

#[test]
fn data_movement_takes_every_dtype_and_checks_operand_dtypes() {
    for &d in &DType::ALL {
        assert!(supports(OpKind::Squeeze, &[d, DType::I64]).is_ok(), "{d}");
        assert!(supports(OpKind::Gather, &[d, DType::I32]).is_ok(), "{d}");
        assert!(
            supports(OpKind::Pad, &[d, DType::I64, d, DType::I64]).is_ok(),
            "{d}"
        );
        assert!(supports(OpKind::Shape, &[d]).is_ok(), "{d}");
        // Moving bytes keeps every bit, f16 included.
        let x = Tensor::from_bytes(d, &[2, 1], &vec![0x81; 2 * d.size()]);
        let out = run(&node(OpKind::Tile, 2, &[]), &[x, i64t(&[2], &[1, 2])]).unwrap();
        assert_eq!(out.bytes(), vec![0x81; 4 * d.size()].as_slice());
    }
    assert!(supports(OpKind::Gather, &[DType::F32, DType::F32]).is_err());
    assert!(supports(OpKind::Expand, &[DType::F32, DType::I32]).is_err());
    assert!(supports(OpKind::Pad, &[DType::F32, DType::I64, DType::I32]).is_err());
    assert!(supports(OpKind::Tile, &[DType::F32]).is_err());
    let msg = supports(OpKind::ConvTranspose, &[DType::I8, DType::I8]).unwrap_err();
    assert!(msg.contains("ConvTranspose operand 0 is i8"), "{msg}");
}

#[test]
fn hostile_parameters_are_errors_not_panics() {
    let (max, min) = (i64::MAX, i64::MIN);
    let x = f32t(&[2, 3], &iota(6));
    let big = |v: &[i64]| i64t(&[v.len()], v);
    let cases: Vec<(Node, Vec<Tensor>, bool)> = vec![
        (
            node(OpKind::Pad, 2, &[]),
            vec![x.clone(), big(&[min, max, 0, 0])],
            false,
        ),
        (
            node(OpKind::Pad, 2, &[]),
            vec![x.clone(), big(&[0, max, 0, max])],
            false,
        ),
        (
            node(OpKind::Tile, 2, &[]),
            vec![x.clone(), big(&[max, 2])],
            false,
        ),
        (
            node(OpKind::Expand, 2, &[]),
            vec![x.clone(), big(&[max, 1, 1])],
            false,
        ),
        (
            node(OpKind::ConstantOfShape, 1, &[]),
            vec![big(&[1 << 40, 1 << 40])],
            false,
        ),
        (
            node(OpKind::Unsqueeze, 2, &[]),
            vec![x.clone(), big(&[min])],
            false,
        ),
        (
            node(OpKind::Squeeze, 2, &[]),
            vec![x.clone(), big(&[max])],
            false,
        ),
        (
            node(OpKind::Gather, 2, &[]),
            vec![x.clone(), big(&[min])],
            false,
        ),
        (
            node(OpKind::Split, 1, &[("num_outputs", Attr::Int(max))]),
            vec![f32t(&[0], &[])],
            false,
        ),
        (
            node(OpKind::Slice, 5, &[]),
            vec![x.clone(), big(&[max]), big(&[min]), big(&[-1]), big(&[min])],
            true,
        ),
        (
            node(
                OpKind::Shape,
                1,
                &[("start", Attr::Int(min)), ("end", Attr::Int(max))],
            ),
            vec![x.clone()],
            true,
        ),
        (
            node(
                OpKind::Resize,
                1,
                &[("scales", Attr::Floats(vec![1e30, 1.0]))],
            ),
            vec![x.clone()],
            false,
        ),
        (
            node(OpKind::LSTM, 3, &[("hidden_size", Attr::Int(max))]),
            vec![
                f32t(&[1, 1, 1], &[1.]),
                f32t(&[1, 4, 1], &[0.; 4]),
                f32t(&[1, 4, 1], &[0.; 4]),
            ],
            false,
        ),
        // Absurd strides and dilations still give the requested output shape.
        (
            node(
                OpKind::ConvTranspose,
                2,
                &[
                    ("strides", ints(&[max])),
                    ("dilations", ints(&[max])),
                    ("output_shape", ints(&[3])),
                ],
            ),
            vec![f32t(&[1, 1, 2], &[1., 2.]), f32t(&[1, 1, 2], &[1., 1.])],
            true,
        ),
    ];
    for (n, inputs, ok) in cases {
        let r = catch_unwind(AssertUnwindSafe(|| run(&n, &inputs)));
        let r = r.unwrap_or_else(|_| panic!("{} panicked", n.op));
        assert_eq!(r.is_ok(), ok, "{}: {r:?}", n.op);
    }
}

#[test]
fn reverse_sequence_time_and_batch_major() {
    // ONNX's own example, checked with numpy: time-major [T, B] with lengths 4, 3, 2, 1.
    let x: Vec<f32> = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]
        .iter()
        .map(|&v| v as f32)
        .collect();
    let n = node(
        OpKind::ReverseSequence,
        2,
        &[("batch_axis", Attr::Int(1)), ("time_axis", Attr::Int(0))],
    );
    let (shape, y) = run_f32(&n, &[f32t(&[4, 4], &x), i64t(&[4], &[4, 3, 2, 1])]);
    assert_eq!(shape, vec![4, 4]);
    let want = [3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15];
    assert_eq!(y, want.map(|v| v as f32));
    // Batch-major [B, T, F] of i64: length 3 reverses whole rows of features, 0 keeps them.
    let n = node(
        OpKind::ReverseSequence,
        2,
        &[("batch_axis", Attr::Int(0)), ("time_axis", Attr::Int(1))],
    );
    let x = i64t(&[2, 3, 2], &(0..12).collect::<Vec<_>>());
    let out = run(&n, &[x, i64t(&[2], &[3, 0])]).unwrap();
    assert_eq!(out.values::<i64>(), [4, 5, 2, 3, 0, 1, 6, 7, 8, 9, 10, 11]);
}

#[test]
fn reverse_sequence_refuses_bad_lengths_and_axes() {
    let n = node(OpKind::ReverseSequence, 2, &[]);
    let x = f32t(&[3, 2], &[0.; 6]);
    let err = run(&n, &[x.clone(), i64t(&[2], &[4, 1])])
        .unwrap_err()
        .to_string();
    assert!(err.contains("sequence length 4 is outside 0..=3"), "{err}");
    let err = run(&n, &[x.clone(), i64t(&[3], &[1, 1, 1])])
        .unwrap_err()
        .to_string();
    assert!(err.contains("sequence_lens must be i64 [2]"), "{err}");
    let same = node(
        OpKind::ReverseSequence,
        2,
        &[("batch_axis", Attr::Int(0)), ("time_axis", Attr::Int(0))],
    );
    assert!(run(&same, &[x, i64t(&[3], &[1, 1, 1])]).is_err());
}

/// TensorScatter's operands: a cache `[2, 1, 4, 2]` holding 0..16 and an update of two
/// steps holding -1..=-8.
fn scatter_operands() -> (Tensor, Tensor) {
    let past: Vec<f32> = (0..16).map(|v| v as f32).collect();
    let update: Vec<f32> = (1..=8).map(|v| -v as f32).collect();
    (f32t(&[2, 1, 4, 2], &past), f32t(&[2, 1, 2, 2], &update))
}

// Expected values from ONNX's reference implementation of TensorScatter, run separately.
#[test]
fn tensor_scatter_linear_circular_and_default_indices() {
    let (past, update) = scatter_operands();
    let n = node(OpKind::TensorScatter, 3, &[]);
    let (shape, y) = run_f32(&n, &[past.clone(), update.clone(), i64t(&[2], &[2, 0])]);
    assert_eq!(shape, vec![2, 1, 4, 2]);
    #[rustfmt::skip]
    let want = [0., 1., 2., 3., -1., -2., -3., -4., -5., -6., -7., -8., 12., 13., 14., 15.];
    assert_eq!(y, want);
    let circular = node(
        OpKind::TensorScatter,
        3,
        &[("mode", Attr::Str("circular".into()))],
    );
    let (_, y) = run_f32(
        &circular,
        &[past.clone(), update.clone(), i64t(&[2], &[3, 1])],
    );
    #[rustfmt::skip]
    let want = [-3., -4., 2., 3., 4., 5., -1., -2., 8., 9., -5., -6., -7., -8., 14., 15.];
    assert_eq!(y, want);
    // Without write indices every batch entry writes from step 0.
    let n = node(OpKind::TensorScatter, 2, &[]);
    let (_, y) = run_f32(&n, &[past, update]);
    #[rustfmt::skip]
    let want = [-1., -2., -3., -4., 4., 5., 6., 7., -5., -6., -7., -8., 12., 13., 14., 15.];
    assert_eq!(y, want);
    // The last axis of a 3-D cache of i64, one step per row.
    let n = node(OpKind::TensorScatter, 3, &[("axis", Attr::Int(-1))]);
    let past = i64t(&[2, 3, 2], &(0..12).collect::<Vec<_>>());
    let update = i64t(&[2, 3, 1], &[100, 101, 102, 200, 201, 202]);
    let out = run(&n, &[past, update, i64t(&[2], &[1, 0])]).unwrap();
    assert_eq!(
        out.values::<i64>(),
        [0, 100, 2, 101, 4, 102, 200, 7, 201, 9, 202, 11]
    );
}

#[test]
fn tensor_scatter_refuses_bad_indices_shapes_and_axes() {
    let (past, update) = scatter_operands();
    let n = node(OpKind::TensorScatter, 3, &[]);
    // Linear writes may not pass the end; no index may be negative.
    let err = run(&n, &[past.clone(), update.clone(), i64t(&[2], &[3, 0])])
        .unwrap_err()
        .to_string();
    assert!(err.contains("passes the cache's 4"), "{err}");
    assert!(run(&n, &[past.clone(), update.clone(), i64t(&[2], &[0, -1])]).is_err());
    // Write indices per batch entry, an update longer than the cache, axis 0, a bad mode.
    assert!(run(&n, &[past.clone(), update.clone(), i64t(&[3], &[0, 0, 0])]).is_err());
    let long = f32t(&[2, 1, 5, 2], &[0.; 20]);
    assert!(run(&n, &[past.clone(), long, i64t(&[2], &[0, 0])]).is_err());
    let batch_axis = node(OpKind::TensorScatter, 2, &[("axis", Attr::Int(0))]);
    assert!(run(&batch_axis, &[past.clone(), update.clone()]).is_err());
    let mode = node(
        OpKind::TensorScatter,
        2,
        &[("mode", Attr::Str("ring".into()))],
    );
    assert!(run(&mode, &[past, update]).is_err());
}
