use baton_delegate_api::ir::{Dim, GraphBuilder, Quant, Storage};

use super::super::run_graph;
use super::*;

/// Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm on a 1x1x3x3 input.
fn small_cnn() -> baton_delegate_api::Graph {
    let mut g = GraphBuilder::new("small_cnn");
    let x = g.input_fixed("x", DType::F32, &[1, 1, 3, 3]);
    // Filter 0 picks the window's top-left element; filter 1 is minus its bottom-right.
    let w = g.constant_f32("w", &[2, 1, 2, 2], &[1., 0., 0., 0., 0., 0., 0., -1.]);
    let b = g.constant_f32("b", &[2], &[0., 1.]);
    let conv = g.node(OpKind::Conv, &[x, w, b], &[]).unwrap();
    let relu = g.node(OpKind::Relu, &[conv], &[]).unwrap();
    let gap = g.node(OpKind::GlobalAveragePool, &[relu], &[]).unwrap();
    let flat = g.node(OpKind::Flatten, &[gap], &[]).unwrap();
    // B stored as [N, K] = [3, 2] and read transposed.
    let bm = g.constant_f32("bm", &[3, 2], &[1., 0., 0., 1., 1., 1.]);
    let c = g.constant_f32("c", &[3], &[0.5, 0., -0.5]);
    let y = g
        .node(OpKind::Gemm, &[flat, bm, c], &[("transB", Attr::Int(1))])
        .unwrap();
    g.output(y);
    g.output(gap);
    g.finish().unwrap()
}

#[test]
fn run_graph_small_cnn() {
    let graph = small_cnn();
    let x = f32t(&[1, 1, 3, 3], &[1., -2., 3., -4., 5., -6., 7., -8., 9.]);
    let outs = run_graph(&graph, &[x]).unwrap();
    assert_eq!(outs.len(), 2);
    // Conv: filter 0 -> [1, -2, -4, 5]; filter 1 -> 1 - [5, -6, -8, 9] = [-4, 7, 9, -8].
    // Relu -> [1, 0, 0, 5] and [0, 7, 9, 0]; means 1.5 and 4.
    assert_eq!(outs[1].shape, vec![1, 2, 1, 1]);
    assert_bits(outs[1].f32s(), &[1.5, 4.]);
    // Gemm: [1.5, 4] . rows [1,0], [0,1], [1,1] = [1.5, 4, 5.5], plus C.
    assert_eq!(outs[0].shape, vec![1, 3]);
    assert_bits(outs[0].f32s(), &[2., 4., 5.]);
}

#[test]
fn run_graph_binds_symbolic_dims() {
    let mut g = GraphBuilder::new("sym");
    let x = g.input("x", DType::F32, &[Dim::Sym("N".into()), Dim::Fixed(2)]);
    let y = g.input("y", DType::F32, &[Dim::Sym("N".into()), Dim::Fixed(1)]);
    let r = g.node(OpKind::Relu, &[x], &[]).unwrap();
    let bias = g.constant_f32("bias", &[2], &[10., 20.]);
    let s = g.node(OpKind::Add, &[r, bias], &[]).unwrap();
    let out = g.node(OpKind::Mul, &[s, y], &[]).unwrap();
    g.output(out);
    let graph = g.finish().unwrap();

    let outs = run_graph(
        &graph,
        &[
            f32t(&[3, 2], &[-1., 1., 2., -2., 3., 3.]),
            f32t(&[3, 1], &[1., 2., -1.]),
        ],
    )
    .unwrap();
    assert_eq!(outs[0].shape, vec![3, 2]);
    assert_bits(outs[0].f32s(), &[10., 21., 24., 40., -13., -23.]);

    let outs = run_graph(&graph, &[f32t(&[0, 2], &[]), f32t(&[0, 1], &[])]).unwrap();
    assert_eq!(outs[0].shape, vec![0, 2]);

    // N bound to 3 by x and to 2 by y.
    let err = run_graph(&graph, &[f32t(&[3, 2], &[0.; 6]), f32t(&[2, 1], &[0.; 2])]).unwrap_err();
    assert!(matches!(err, KernelError::Graph { .. }), "{err:?}");
    assert!(err.to_string().contains("binds N = 2"), "{err}");
}

#[test]
fn run_graph_rejects_bad_inputs() {
    let graph = small_cnn();
    let err = run_graph(&graph, &[]).unwrap_err();
    assert!(err.to_string().contains("0 inputs given"), "{err}");
    let err = run_graph(&graph, &[f32t(&[1, 1, 3, 4], &[0.; 12])]).unwrap_err();
    assert!(err.to_string().contains("declared [1,1,3,3]"), "{err}");
    let i = typed(DType::I32, &[1, 1, 3, 3], &[0i32; 9]);
    let err = run_graph(&graph, &[i]).unwrap_err();
    assert!(matches!(err, KernelError::Graph { .. }), "{err:?}");
}

#[test]
fn run_graph_refuses_external_constants() {
    let mut graph = small_cnn();
    let w = graph.tensor_by_name("w").unwrap();
    graph.tensors[w].data = Some(Storage::External(0));
    let err = run_graph(&graph, &[f32t(&[1, 1, 3, 3], &[0.; 9])]).unwrap_err();
    assert!(matches!(err, KernelError::Graph { .. }), "{err:?}");
    assert!(
        err.to_string().contains("'w' is stored externally"),
        "{err}"
    );
}

#[test]
fn run_graph_passes_quantization_to_kernels() {
    let mut g = GraphBuilder::new("quant");
    let x = g.input_fixed("x", DType::I8, &[2]);
    g.set_quant(
        x,
        Quant::PerTensor {
            scale: 0.5,
            zero_point: 3,
        },
    );
    let r = g
        .node(OpKind::Reshape, &[x], &[("shape", ints(&[2, 1]))])
        .unwrap();
    let y = g.node(OpKind::Relu, &[x], &[]).unwrap();
    g.output(r);
    g.output(y);
    let graph = g.finish().unwrap();
    let err = run_graph(&graph, &[typed(DType::I8, &[2], &[-1i8, 1])]).unwrap_err();
    // Reshape moves the bytes; Relu on a quantized tensor is refused.
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("relu_1 (Relu)"), "{err}");
}
