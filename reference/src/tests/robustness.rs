use std::panic::{catch_unwind, AssertUnwindSafe};

use baton_delegate_api::{QuantRef, TensorMut};

use super::super::supports;
use super::*;

#[test]
fn supports_answers_per_dtype() {
    assert!(supports(OpKind::Add, &[DType::I8, DType::I8]).is_ok());
    assert!(supports(OpKind::Div, &[DType::U8, DType::U8]).is_ok());
    assert!(supports(OpKind::Add, &[DType::Bool, DType::Bool]).is_err());
    assert!(supports(OpKind::Add, &[DType::F32, DType::F16]).is_err());
    assert!(supports(OpKind::Add, &[DType::F32]).is_err());
    assert!(supports(OpKind::Relu, &[DType::I64]).is_ok());
    assert!(supports(OpKind::Relu, &[DType::U8]).is_err());
    assert!(supports(OpKind::Clip, &[DType::F16, DType::F16, DType::F16]).is_ok());
    assert!(supports(OpKind::Sigmoid, &[DType::F16]).is_ok());
    assert!(supports(OpKind::Tanh, &[DType::I32]).is_err());
    assert!(supports(OpKind::MatMul, &[DType::F32, DType::F32]).is_ok());
    assert!(supports(OpKind::MatMul, &[DType::I32, DType::I32]).is_err());
    assert!(supports(OpKind::Conv, &[DType::F32, DType::F32, DType::F32]).is_ok());
    assert!(supports(OpKind::Conv, &[DType::F32]).is_err());
    assert!(supports(OpKind::Gemm, &[DType::F32; 4]).is_err());
    assert!(supports(OpKind::MaxPool, &[DType::I8]).is_ok());
    assert!(supports(OpKind::MaxPool, &[DType::Bool]).is_err());
    assert!(supports(OpKind::AveragePool, &[DType::U8]).is_err());
    assert!(supports(OpKind::Add, &[DType::U64, DType::U64]).is_ok());
    assert!(supports(OpKind::Add, &[DType::F8E4M3FN, DType::F8E4M3FN]).is_err());
    assert!(supports(OpKind::Sub, &[DType::I4, DType::I4]).is_err());
    for &d in &DType::ALL {
        assert!(supports(OpKind::Transpose, &[d]).is_ok(), "{d}");
        assert!(supports(OpKind::Flatten, &[d]).is_ok(), "{d}");
        assert!(supports(OpKind::Concat, &[d, d, d]).is_ok(), "{d}");
        assert!(supports(OpKind::Reshape, &[d, DType::I64]).is_ok(), "{d}");
    }
    assert!(supports(OpKind::Reshape, &[DType::F32, DType::I32]).is_err());
    assert!(supports(OpKind::Concat, &[]).is_err());
    let msg = supports(OpKind::Softmax, &[DType::I8]).unwrap_err();
    assert!(msg.contains("Softmax on i8"), "{msg}");
}

#[test]
fn mismatched_outputs_are_errors() {
    let n = node(OpKind::Add, 2, &[]);
    let a = f32t(&[2], &[1., 2.]);
    let views = [a.view(), a.view()];
    // Wrong shape.
    let mut out = Tensor::zeros(DType::F32, &[3]);
    let err = run_node(&n, &views, &mut [out.view_mut()]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    assert!(err.to_string().contains("test_add (Add)"), "{err}");
    // Wrong dtype.
    let mut out = Tensor::zeros(DType::I32, &[2]);
    let err = run_node(&n, &views, &mut [out.view_mut()]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    // Right shape, too few bytes.
    let mut bytes = [0u8; 4];
    let mut short = TensorMut::new(DType::F32, &[2], &mut bytes);
    let err = run_node(&n, &views, std::slice::from_mut(&mut short)).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    // No output, two outputs.
    let err = run_node(&n, &views, &mut []).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let (mut o1, mut o2) = (
        Tensor::zeros(DType::F32, &[2]),
        Tensor::zeros(DType::F32, &[2]),
    );
    let err = run_node(&n, &views, &mut [o1.view_mut(), o2.view_mut()]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

#[test]
fn malformed_inputs_are_errors() {
    let n = node(OpKind::Add, 2, &[]);
    let mut out = Tensor::zeros(DType::F32, &[2]);
    // Too few operands, none at all.
    let a = f32t(&[2], &[1., 2.]);
    let err = run_node(&n, &[a.view()], &mut [out.view_mut()]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let err = run_node(&node(OpKind::Relu, 0, &[]), &[], &mut [out.view_mut()]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    // Bytes that do not fit the declared shape.
    let short = TensorRef {
        dtype: DType::F32,
        shape: &[2],
        data: &[0u8; 7],
        quant: None,
    };
    let err = run_node(&n, &[a.view(), short], &mut [out.view_mut()]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    // Operands that do not broadcast.
    let b = f32t(&[3], &[1., 2., 3.]);
    let err = run_node(&n, &[a.view(), b.view()], &mut [out.view_mut()]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
}

#[test]
fn quantized_operands_only_pass_layout_ops() {
    let x = typed(DType::I8, &[2], &[1i8, 2]);
    let q = QuantRef::PerTensor {
        scale: 0.1,
        zero_point: 0,
    };
    let view = TensorRef {
        quant: Some(q),
        ..x.view()
    };
    let mut out = Tensor::zeros(DType::I8, &[2]);
    let err = run_node(
        &node(OpKind::Add, 2, &[]),
        &[view, view],
        &mut [out.view_mut()],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let mut out = Tensor::zeros(DType::I8, &[1, 2]);
    let n = node(OpKind::Reshape, 1, &[("shape", ints(&[1, 2]))]);
    run_node(&n, &[view], &mut [out.view_mut()]).unwrap();
    assert_eq!(out.values::<i8>(), &[1, 2]);
}

#[test]
fn unaligned_views_are_read_correctly() {
    // f32 values starting one byte into a buffer.
    // Backed by u32 words, so one byte in is certainly misaligned for f32.
    let mut words = [0u32; 4];
    let buf: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    for (i, v) in [1f32, -2., 3.].iter().enumerate() {
        buf[1 + 4 * i..5 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    let x = TensorRef {
        dtype: DType::F32,
        shape: &[3],
        data: &buf[1..13],
        quant: None,
    };
    let mut out_words = [0u32; 4];
    let out_buf: &mut [u8] = bytemuck::cast_slice_mut(&mut out_words);
    let mut out = TensorMut::new(DType::F32, &[3], &mut out_buf[1..13]);
    run_node(
        &node(OpKind::Relu, 1, &[]),
        &[x],
        std::slice::from_mut(&mut out),
    )
    .unwrap();
    let got: Vec<f32> = out_buf[1..13]
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, vec![1., 0., 3.]);
}

#[test]
fn degenerate_geometry_is_an_error_not_a_panic() {
    // SAME padding of an empty spatial axis.
    let n = node(
        OpKind::Conv,
        2,
        &[("auto_pad", Attr::Str("SAME_UPPER".into()))],
    );
    let err = run(&n, &[f32t(&[1, 1, 0], &[]), f32t(&[1, 1, 1], &[1.])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    let n = node(
        OpKind::MaxPool,
        1,
        &[
            ("kernel_shape", ints(&[1])),
            ("auto_pad", Attr::Str("SAME_LOWER".into())),
        ],
    );
    let err = run(&n, &[f32t(&[1, 1, 0], &[])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    // A Conv kernel of extent 0.
    let err = run(
        &node(OpKind::Conv, 2, &[]),
        &[f32t(&[1, 1, 3], &[0.; 3]), f32t(&[1, 1, 0], &[])],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
    // A window larger than the padded input.
    let n = node(OpKind::AveragePool, 1, &[("kernel_shape", ints(&[4]))]);
    let err = run(&n, &[f32t(&[1, 1, 3], &[0.; 3])]).unwrap_err();
    assert!(matches!(err, KernelError::Shape { .. }), "{err:?}");
}

/// Operand shape sets covering ranks 0-4, empty and size-1 dimensions.
fn shape_sets() -> Vec<Vec<Vec<usize>>> {
    let shapes: Vec<Vec<usize>> = vec![
        vec![],
        vec![0],
        vec![1],
        vec![3],
        vec![2, 3],
        vec![3, 2],
        vec![0, 3],
        vec![1, 1, 3],
        vec![1, 2, 3],
        vec![2, 2, 0],
        vec![1, 2, 4, 4],
        vec![1, 2, 0, 4],
        vec![2, 1, 3, 3],
        vec![0, 2, 3, 3],
        vec![2, 1, 2, 2],
    ];
    let mut sets: Vec<Vec<Vec<usize>>> = shapes.iter().map(|s| vec![s.clone()]).collect();
    for a in &shapes {
        for b in &shapes {
            sets.push(vec![a.clone(), b.clone()]);
            sets.push(vec![a.clone(), b.clone(), vec![2]]);
            sets.push(vec![a.clone(), b.clone(), vec![]]);
        }
    }
    sets
}

/// Attribute sets for each op, valid and invalid.
fn attr_sets(op: OpKind) -> Vec<Vec<(&'static str, Attr)>> {
    let s = |v: &str| Attr::Str(v.to_string());
    match op {
        OpKind::MaxPool | OpKind::AveragePool => vec![
            vec![],
            vec![("kernel_shape", ints(&[2]))],
            vec![("kernel_shape", ints(&[2, 2])), ("ceil_mode", Attr::Int(1))],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 1, 2, 2])),
                ("strides", ints(&[2, 2])),
                ("count_include_pad", Attr::Int(1)),
            ],
            vec![
                ("kernel_shape", ints(&[2, 2])),
                ("auto_pad", s("SAME_UPPER")),
            ],
            vec![
                ("kernel_shape", ints(&[1, 1])),
                ("pads", ints(&[3, 3, 3, 3])),
            ],
            vec![("kernel_shape", ints(&[0, 1]))],
        ],
        OpKind::Conv => vec![
            vec![],
            vec![("group", Attr::Int(2))],
            vec![("auto_pad", s("SAME_LOWER")), ("strides", ints(&[2, 2]))],
            vec![("pads", ints(&[1, 1, 1, 1])), ("dilations", ints(&[2, 2]))],
            vec![("pads", ints(&[1, 1]))],
            vec![("group", Attr::Int(0))],
        ],
        OpKind::Gemm => vec![
            vec![],
            vec![("transA", Attr::Int(1)), ("transB", Attr::Int(1))],
        ],
        OpKind::Softmax | OpKind::Concat | OpKind::Flatten => vec![
            vec![],
            vec![("axis", Attr::Int(-1))],
            vec![("axis", Attr::Int(1))],
            vec![("axis", Attr::Int(5))],
        ],
        OpKind::Transpose => vec![vec![], vec![("perm", ints(&[1, 0]))]],
        OpKind::Reshape => vec![
            vec![("shape", ints(&[-1]))],
            vec![("shape", ints(&[0, -1]))],
            vec![("shape", ints(&[3, -1]))],
        ],
        OpKind::Clip => vec![vec![("min", Attr::Float(0.5)), ("max", s("x"))]],
        _ => vec![vec![]],
    }
}

/// Every op, every dtype, many shapes and attributes: `run_node` may fail but never
/// panics. Outputs get the shape infer_static gives, or `[0]` when it gives none.
#[test]
fn run_node_never_panics() {
    let dtypes = [DType::F32, DType::F16, DType::I8, DType::I64, DType::Bool];
    let mut ran = 0;
    let mut succeeded = 0;
    for &op in OpKind::ALL {
        for attrs in attr_sets(op) {
            let n = node(op, 0, &attrs);
            for shapes in shape_sets() {
                for &dtype in &dtypes {
                    let inputs: Vec<Tensor> = shapes
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            let d = if op == OpKind::Reshape && i == 1 {
                                DType::I64
                            } else {
                                dtype
                            };
                            // Small non-zero values, so integer Div has divisors.
                            let mut t = Tensor::zeros(d, s);
                            for b in t.data.as_mut_slice().iter_mut().step_by(d.size()) {
                                *b = 1;
                            }
                            t
                        })
                        .collect();
                    let n = Node {
                        inputs: (0..inputs.len()).collect(),
                        outputs: vec![inputs.len()],
                        ..n.clone()
                    };
                    let result = catch_unwind(AssertUnwindSafe(|| run(&n, &inputs)));
                    match result {
                        Ok(r) => succeeded += r.is_ok() as usize,
                        Err(_) => panic!("{op} {attrs:?} on {dtype} {shapes:?} panicked"),
                    }
                    ran += 1;
                }
            }
        }
    }
    assert!(
        ran > 10_000 && succeeded > 500,
        "ran {ran}, succeeded {succeeded}"
    );
}
