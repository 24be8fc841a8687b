// The op cases every GPU delegate is held to, each against the host's reference
// executor: `include!`d by backends/vulkan/tests/ops.rs and backends/wgpu/tests/ops.rs
// after they import `check` (their own plugin's) and the IR builders, so both delegates
// run exactly the same cases.

/// A node's attributes.
type Attrs = Vec<(&'static str, Attr)>;

const LINALG: (f64, f64) = (1e-4, 1e-5);
const TIGHT: (f64, f64) = (1e-5, 1e-6);

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

#[test]
fn matmul_batched_broadcast_and_vectors() {
    let mut r = Rng::new(1);
    for (a, b) in [
        (vec![37, 53], vec![53, 29]),
        (vec![3, 17, 40], vec![3, 40, 9]),
        (vec![2, 3, 5, 8], vec![8, 33]),
        (vec![64], vec![64, 20]),
        (vec![5, 16], vec![16]),
    ] {
        let mut g = GraphBuilder::new("matmul");
        let x = g.input_fixed("a", DType::F32, &a);
        let y = g.input_fixed("b", DType::F32, &b);
        let z = g.node(OpKind::MatMul, &[x, y], &[]).unwrap();
        g.output(z);
        check(
            &g.finish().unwrap(),
            &[r.f32_tensor(&a), r.f32_tensor(&b)],
            LINALG.0,
            LINALG.1,
        );
    }
}

#[test]
fn gemm_transposes_alpha_beta_bias_and_fused_relu() {
    let mut r = Rng::new(2);
    for (ta, tb, c_shape) in [
        (0, 0, vec![24]),
        (1, 0, vec![19, 1]),
        (0, 1, vec![19, 24]),
        (1, 1, vec![1]),
    ] {
        let (m, k, n) = (19, 33, 24);
        let a_shape = if ta == 1 { vec![k, m] } else { vec![m, k] };
        let b_shape = if tb == 1 { vec![n, k] } else { vec![k, n] };
        let mut g = GraphBuilder::new("gemm");
        let a = g.input_fixed("a", DType::F32, &a_shape);
        let w = g.constant_f32("w", &b_shape, &r.vec(k * n));
        let c = g.constant_f32("c", &c_shape, &r.vec(c_shape.iter().product()));
        let y = g
            .node(
                OpKind::Gemm,
                &[a, w, c],
                &[
                    ("transA", Attr::Int(ta)),
                    ("transB", Attr::Int(tb)),
                    ("alpha", Attr::Float(0.7)),
                    ("beta", Attr::Float(1.3)),
                ],
            )
            .unwrap();
        let z = g.node(OpKind::Relu, &[y], &[]).unwrap();
        g.output(z);
        check(
            &g.finish().unwrap(),
            &[r.f32_tensor(&a_shape)],
            LINALG.0,
            LINALG.1,
        );
    }
}

#[test]
fn conv_general_strided_dilated_grouped_and_depthwise() {
    let mut r = Rng::new(3);
    // (x shape, w shape, attrs)
    let cases: Vec<(Vec<usize>, Vec<usize>, Attrs)> = vec![
        (
            vec![1, 3, 11, 9],
            vec![8, 3, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        ),
        (
            vec![2, 4, 12, 12],
            vec![6, 2, 3, 2],
            vec![
                ("group", Attr::Int(2)),
                ("strides", ints(&[2, 1])),
                ("dilations", ints(&[1, 2])),
                ("pads", ints(&[0, 1, 2, 1])),
            ],
        ),
        (
            vec![1, 8, 10, 10],
            vec![8, 1, 3, 3],
            vec![("group", Attr::Int(8)), ("pads", ints(&[1, 1, 1, 1]))],
        ),
        (
            vec![1, 6, 9, 9],
            vec![6, 1, 5, 5],
            vec![
                ("group", Attr::Int(6)),
                ("strides", ints(&[2, 2])),
                ("auto_pad", Attr::Str("SAME_UPPER".into())),
            ],
        ),
        (
            vec![2, 3, 20],
            vec![5, 3, 4],
            vec![("strides", ints(&[3])), ("pads", ints(&[2, 1]))],
        ),
    ];
    for (xs, ws, attrs) in cases {
        let mut g = GraphBuilder::new("conv");
        let x = g.input_fixed("x", DType::F32, &xs);
        let w = g.constant_f32("w", &ws, &r.vec(ws.iter().product()));
        let b = g.constant_f32("b", &[ws[0]], &r.vec(ws[0]));
        let y = g.node(OpKind::Conv, &[x, w, b], &attrs).unwrap();
        let z = g
            .node(
                OpKind::Clip,
                &[y],
                &[("min", Attr::Float(-0.5)), ("max", Attr::Float(0.75))],
            )
            .unwrap();
        g.output(z);
        check(
            &g.finish().unwrap(),
            &[r.f32_tensor(&xs)],
            LINALG.0,
            LINALG.1,
        );
    }
}

#[test]
fn binary_elementwise_with_broadcasting() {
    let mut r = Rng::new(4);
    for op in [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div] {
        for (a, b) in [
            (vec![4, 5, 6], vec![4, 5, 6]),
            (vec![2, 3, 4, 5], vec![3, 1, 5]),
            (vec![7, 1], vec![1, 9]),
            (vec![3, 4], vec![1]),
        ] {
            let mut g = GraphBuilder::new(op.name());
            let x = g.input_fixed("a", DType::F32, &a);
            let y = g.input_fixed("b", DType::F32, &b);
            let z = g.node(op, &[x, y], &[]).unwrap();
            g.output(z);
            check(
                &g.finish().unwrap(),
                &[r.f32_tensor(&a), r.f32_tensor(&b)],
                TIGHT.0,
                1e-6,
            );
        }
    }
}

#[test]
fn fused_binary_activation_chain() {
    let mut r = Rng::new(5);
    let mut g = GraphBuilder::new("chain");
    let x = g.input_fixed("x", DType::F32, &[3, 50]);
    let y = g.input_fixed("y", DType::F32, &[50]);
    let a = g.node(OpKind::Add, &[x, y], &[]).unwrap();
    let s = g.node(OpKind::Sigmoid, &[a], &[]).unwrap();
    let m = g.node(OpKind::Mul, &[s, x], &[]).unwrap();
    let t = g.node(OpKind::Tanh, &[m], &[]).unwrap();
    g.output(t);
    g.output(a); // an intermediate that is also an output is not fused away
    check(
        &g.finish().unwrap(),
        &[r.f32_tensor(&[3, 50]), r.f32_tensor(&[50])],
        TIGHT.0,
        TIGHT.1,
    );
}

#[test]
fn unary_activations_including_specials() {
    let mut r = Rng::new(6);
    let mut values: Vec<f32> = r.vec(200).into_iter().map(|v| v * 6.0).collect();
    values.extend([
        0.0,
        -0.0,
        1e-4,
        -1e-4,
        30.0,
        -30.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    let n = values.len();
    let ops: Vec<(OpKind, Attrs)> = vec![
        (OpKind::Relu, vec![]),
        (OpKind::Sigmoid, vec![]),
        (OpKind::Tanh, vec![]),
        (OpKind::Gelu, vec![]),
        (
            OpKind::Gelu,
            vec![("approximate", Attr::Str("tanh".into()))],
        ),
        (OpKind::LeakyRelu, vec![("alpha", Attr::Float(0.1))]),
        (OpKind::HardSigmoid, vec![]),
        (OpKind::HardSwish, vec![]),
        (
            OpKind::Clip,
            vec![("min", Attr::Float(-1.0)), ("max", Attr::Float(2.0))],
        ),
        (OpKind::Exp, vec![]),
        (OpKind::Neg, vec![]),
        (OpKind::Abs, vec![]),
        (OpKind::Erf, vec![]),
        (OpKind::Ceil, vec![]),
    ];
    for (op, attrs) in ops {
        let mut g = GraphBuilder::new(op.name());
        let x = g.input_fixed("x", DType::F32, &[n]);
        let y = g.node(op, &[x], &attrs).unwrap();
        g.output(y);
        check(
            &g.finish().unwrap(),
            &[Tensor::from_f32(&[n], &values)],
            1e-5,
            1e-6,
        );
    }
    let positive: Vec<f32> = values.iter().map(|v| v.abs() + 1e-3).collect();
    for op in [OpKind::Log, OpKind::Sqrt] {
        let mut g = GraphBuilder::new(op.name());
        let x = g.input_fixed("x", DType::F32, &[n]);
        let y = g.node(op, &[x], &[]).unwrap();
        g.output(y);
        check(
            &g.finish().unwrap(),
            &[Tensor::from_f32(&[n], &positive)],
            1e-5,
            1e-6,
        );
    }
}

#[test]
fn pooling() {
    let mut r = Rng::new(7);
    let cases: Vec<(OpKind, Vec<usize>, Attrs)> = vec![
        (
            OpKind::MaxPool,
            vec![2, 3, 9, 9],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            OpKind::MaxPool,
            vec![1, 2, 10, 7],
            vec![
                ("kernel_shape", ints(&[2, 3])),
                ("ceil_mode", Attr::Int(1)),
                ("strides", ints(&[2, 2])),
            ],
        ),
        (
            OpKind::AveragePool,
            vec![2, 3, 8, 8],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            OpKind::AveragePool,
            vec![2, 3, 8, 8],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 1, 1, 1])),
                ("count_include_pad", Attr::Int(1)),
            ],
        ),
        (
            OpKind::AveragePool,
            vec![1, 4, 15],
            vec![("kernel_shape", ints(&[4])), ("strides", ints(&[3]))],
        ),
        (OpKind::GlobalAveragePool, vec![2, 5, 7, 6], vec![]),
    ];
    for (op, xs, attrs) in cases {
        let mut g = GraphBuilder::new(op.name());
        let x = g.input_fixed("x", DType::F32, &xs);
        let y = g.node(op, &[x], &attrs).unwrap();
        g.output(y);
        check(&g.finish().unwrap(), &[r.f32_tensor(&xs)], TIGHT.0, TIGHT.1);
    }
}

#[test]
fn softmax_and_log_softmax_on_every_axis() {
    let mut r = Rng::new(8);
    for op in [OpKind::Softmax, OpKind::LogSoftmax] {
        for axis in [-1i64, 0, 1] {
            let mut g = GraphBuilder::new(op.name());
            let x = g.input_fixed("x", DType::F32, &[3, 300, 5]);
            let y = g.node(op, &[x], &[("axis", Attr::Int(axis))]).unwrap();
            g.output(y);
            let xs: Vec<f32> = r.vec(4500).into_iter().map(|v| v * 10.0).collect();
            check(
                &g.finish().unwrap(),
                &[Tensor::from_f32(&[3, 300, 5], &xs)],
                1e-5,
                1e-6,
            );
        }
    }
}

#[test]
fn layer_normalization() {
    let mut r = Rng::new(9);
    for (shape, axis) in [(vec![4, 7, 96], -1i64), (vec![2, 3, 4, 5], 2)] {
        let norm: Vec<usize> = shape[(shape.len() as i64 + axis) as usize % shape.len()..].to_vec();
        let d: usize = norm.iter().product();
        let mut g = GraphBuilder::new("layernorm");
        let x = g.input_fixed("x", DType::F32, &shape);
        let s = g.constant_f32("scale", &norm, &r.vec(d));
        let b = g.constant_f32("bias", &norm, &r.vec(d));
        let y = g
            .node(
                OpKind::LayerNormalization,
                &[x, s, b],
                &[("axis", Attr::Int(axis)), ("epsilon", Attr::Float(1e-3))],
            )
            .unwrap();
        g.output(y);
        check(&g.finish().unwrap(), &[r.f32_tensor(&shape)], 1e-4, 1e-5);
    }
}

#[test]
fn reshape_flatten_transpose_concat() {
    let mut r = Rng::new(10);
    let mut g = GraphBuilder::new("layout");
    let x = g.input_fixed("x", DType::F32, &[2, 3, 4, 5]);
    let c = g.constant_f32("c", &[2, 3, 1, 5], &r.vec(30));
    let t = g
        .node(OpKind::Transpose, &[x], &[("perm", ints(&[0, 2, 3, 1]))])
        .unwrap();
    let shape = g.constant_i64("shape", &[2], &[8, -1]);
    let rs = g.node(OpKind::Reshape, &[t, shape], &[]).unwrap();
    let f = g
        .node(OpKind::Flatten, &[x], &[("axis", Attr::Int(2))])
        .unwrap();
    let cat = g
        .node(OpKind::Concat, &[x, c, x], &[("axis", Attr::Int(2))])
        .unwrap();
    let tr = g.node(OpKind::Transpose, &[cat], &[]).unwrap();
    g.output(rs);
    g.output(f);
    g.output(tr);
    check(
        &g.finish().unwrap(),
        &[r.f32_tensor(&[2, 3, 4, 5])],
        0.0,
        0.0,
    );
}

#[test]
fn a_small_network_runs_as_one_partition() {
    let mut r = Rng::new(11);
    let mut g = GraphBuilder::new("net");
    let x = g.input_fixed("image", DType::F32, &[1, 3, 16, 16]);
    let w1 = g.constant_f32("w1", &[8, 3, 3, 3], &r.vec(216));
    let b1 = g.constant_f32("b1", &[8], &r.vec(8));
    let c1 = g
        .node(OpKind::Conv, &[x, w1, b1], &[("pads", ints(&[1, 1, 1, 1]))])
        .unwrap();
    let a1 = g.node(OpKind::Relu, &[c1], &[]).unwrap();
    let p1 = g
        .node(
            OpKind::MaxPool,
            &[a1],
            &[("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        )
        .unwrap();
    let wd = g.constant_f32("wd", &[8, 1, 3, 3], &r.vec(72));
    let d1 = g
        .node(
            OpKind::Conv,
            &[p1, wd],
            &[("group", Attr::Int(8)), ("pads", ints(&[1, 1, 1, 1]))],
        )
        .unwrap();
    let gp = g.node(OpKind::GlobalAveragePool, &[d1], &[]).unwrap();
    let fl = g.node(OpKind::Flatten, &[gp], &[]).unwrap();
    let wf = g.constant_f32("wf", &[8, 10], &r.vec(80));
    let bf = g.constant_f32("bf", &[10], &r.vec(10));
    let fc = g.node(OpKind::Gemm, &[fl, wf, bf], &[]).unwrap();
    let sm = g.node(OpKind::Softmax, &[fc], &[]).unwrap();
    g.output(sm);
    check(
        &g.finish().unwrap(),
        &[r.f32_tensor(&[1, 3, 16, 16])],
        LINALG.0,
        LINALG.1,
    );
}

#[test]
fn reductions_over_a_block_of_axes_and_expand() {
    let mut r = Rng::new(12);
    for op in [
        OpKind::ReduceSum,
        OpKind::ReduceMean,
        OpKind::ReduceMax,
        OpKind::ReduceMin,
    ] {
        for (axes, keep) in [(vec![1i64, 2], 1i64), (vec![-1], 0), (vec![0], 1)] {
            let mut g = GraphBuilder::new(op.name());
            let x = g.input_fixed("x", DType::F32, &[3, 40, 7, 5]);
            let y = g
                .node(
                    op,
                    &[x],
                    &[("axes", ints(&axes)), ("keepdims", Attr::Int(keep))],
                )
                .unwrap();
            g.output(y);
            check(
                &g.finish().unwrap(),
                &[r.f32_tensor(&[3, 40, 7, 5])],
                1e-5,
                1e-5,
            );
        }
    }
    let mut g = GraphBuilder::new("expand");
    let x = g.input_fixed("x", DType::F32, &[3, 1]);
    let shape = g.constant_i64("shape", &[3], &[2, 3, 4]);
    let y = g.node(OpKind::Expand, &[x, shape], &[]).unwrap();
    g.output(y);
    check(&g.finish().unwrap(), &[r.f32_tensor(&[3, 1])], 0.0, 0.0);
}

/// f16 tensors of `values` (rounded to nearest even).
fn f16_tensor(shape: &[usize], values: &[f32]) -> Tensor {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    Tensor::from_bytes(DType::F16, shape, &bytes)
}

/// The f16 kernels compute in f32 and round once; the reference does the same, so they
/// differ by at most one f16 ulp (2^-10 relative) where the f32 math rounds differently.
const F16_TOL: (f64, f64) = (1e-3, 1e-5);

#[test]
fn f16_binary_broadcasting_with_fused_activations() {
    let mut r = Rng::new(20);
    // Odd element counts: f16 ranges end off a 4-byte boundary.
    for op in [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div] {
        for (a, b) in [(vec![3, 5, 7], vec![5, 1]), (vec![7, 1], vec![1, 9])] {
            let mut g = GraphBuilder::new(op.name());
            let x = g.input_fixed("a", DType::F16, &a);
            let y = g.input_fixed("b", DType::F16, &b);
            let z = g.node(op, &[x, y], &[]).unwrap();
            let s = g.node(OpKind::Sigmoid, &[z], &[]).unwrap();
            g.output(s);
            g.output(z);
            let av = r.vec(a.iter().product());
            let bv: Vec<f32> = r.vec(b.iter().product()).iter().map(|v| v + 2.0).collect();
            check(
                &g.finish().unwrap(),
                &[f16_tensor(&a, &av), f16_tensor(&b, &bv)],
                F16_TOL.0,
                F16_TOL.1,
            );
        }
    }
}

#[test]
fn f16_unary_activations_including_specials() {
    let mut r = Rng::new(21);
    let mut values: Vec<f32> = r.vec(201).into_iter().map(|v| v * 6.0).collect();
    values.extend([
        0.0,
        -0.0,
        1e-4,
        70000.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    let n = values.len();
    let ops: Vec<(OpKind, Attrs)> = vec![
        (OpKind::Relu, vec![]),
        (OpKind::Sigmoid, vec![]),
        (OpKind::Tanh, vec![]),
        (OpKind::Gelu, vec![]),
        (OpKind::LeakyRelu, vec![("alpha", Attr::Float(0.1))]),
        (OpKind::HardSwish, vec![]),
        (
            OpKind::Clip,
            vec![("min", Attr::Float(-1.0)), ("max", Attr::Float(2.0))],
        ),
        (OpKind::Exp, vec![]),
        (OpKind::Neg, vec![]),
        (OpKind::Abs, vec![]),
        (OpKind::Ceil, vec![]),
    ];
    for (op, attrs) in ops {
        let mut g = GraphBuilder::new(op.name());
        let x = g.input_fixed("x", DType::F16, &[n]);
        let y = g.node(op, &[x], &attrs).unwrap();
        g.output(y);
        check(
            &g.finish().unwrap(),
            &[f16_tensor(&[n], &values)],
            F16_TOL.0,
            F16_TOL.1,
        );
    }
}

#[test]
fn f16_reshape_transpose_concat_copy_bits() {
    let mut r = Rng::new(22);
    let mut g = GraphBuilder::new("layout_f16");
    let x = g.input_fixed("x", DType::F16, &[3, 1, 5]);
    let y = g.input_fixed("y", DType::F16, &[3, 2, 5]);
    let t = g
        .node(OpKind::Transpose, &[x], &[("perm", ints(&[2, 0, 1]))])
        .unwrap();
    let shape = g.constant_i64("shape", &[1], &[-1]);
    let rs = g.node(OpKind::Reshape, &[t, shape], &[]).unwrap();
    let cat = g
        .node(OpKind::Concat, &[x, y, x], &[("axis", Attr::Int(1))])
        .unwrap();
    g.output(rs);
    g.output(cat);
    check(
        &g.finish().unwrap(),
        &[
            f16_tensor(&[3, 1, 5], &r.vec(15)),
            f16_tensor(&[3, 2, 5], &r.vec(30)),
        ],
        0.0,
        0.0,
    );
}

#[test]
fn f16_pools_and_softmax() {
    let mut r = Rng::new(23);
    let shape = [1, 3, 7, 9];
    let values: Vec<f32> = r.vec(189).iter().map(|v| v * 4.0).collect();
    let ops: Vec<(OpKind, Attrs)> = vec![
        (
            OpKind::MaxPool,
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            OpKind::AveragePool,
            vec![("kernel_shape", ints(&[2, 3])), ("strides", ints(&[2, 2]))],
        ),
        (OpKind::GlobalAveragePool, vec![]),
        (OpKind::Softmax, vec![("axis", Attr::Int(-1))]),
        (OpKind::LogSoftmax, vec![("axis", Attr::Int(1))]),
    ];
    for (op, attrs) in ops {
        let mut g = GraphBuilder::new(op.name());
        let x = g.input_fixed("x", DType::F16, &shape);
        let y = g.node(op, &[x], &attrs).unwrap();
        g.output(y);
        check(
            &g.finish().unwrap(),
            &[f16_tensor(&shape, &values)],
            F16_TOL.0,
            F16_TOL.1,
        );
    }
}

#[test]
fn f16_matmul_and_gemm_accumulate_in_f32() {
    let mut r = Rng::new(24);
    for (a, b) in [(vec![13, 70], vec![70, 9]), (vec![2, 5, 33], vec![33, 7])] {
        let mut g = GraphBuilder::new("matmul_f16");
        let x = g.input_fixed("a", DType::F16, &a);
        let y = g.input_fixed("b", DType::F16, &b);
        let z = g.node(OpKind::MatMul, &[x, y], &[]).unwrap();
        let z = g.node(OpKind::Relu, &[z], &[]).unwrap();
        g.output(z);
        check(
            &g.finish().unwrap(),
            &[
                f16_tensor(&a, &r.vec(a.iter().product())),
                f16_tensor(&b, &r.vec(b.iter().product())),
            ],
            F16_TOL.0,
            1e-3,
        );
    }
}

fn f32_values(shape: &[usize], values: &[f32]) -> Tensor {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    Tensor::from_bytes(DType::F32, shape, &bytes)
}

/// Casts among f32, i32, i64 and bool, on the values that turn over: NaN, infinities,
/// signed zeros, subnormals, the saturation limits and integers an f32 rounds (odd 33
/// elements: the bool outputs end inside a word).
#[test]
fn casts_saturate_round_and_pack_bools() {
    let values = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1e-40,
        -1e-40,
        0.5,
        -0.5,
        1.9,
        -1.9,
        2147483520.0,
        2147483648.0,
        -2147483648.0,
        -2147483904.0,
        3e9,
        -3e9,
        9.2233715e18,
        9.223372e18,
        -9.223372e18,
        -9.223373e18,
        1e19,
        -1e19,
        16777217.0,
        -123456.75,
        65535.5,
        4294967296.0,
        -4294967296.0,
        1.2345679e17,
        -1.2345679e17,
        7.0,
        -7.0,
        1.0,
    ];
    let shape = [values.len()];
    let to = |d: DType| vec![("to", Attr::Int(d.onnx_code()))];
    let mut g = GraphBuilder::new("casts");
    let x = g.input_fixed("x", DType::F32, &shape);
    for target in [DType::I32, DType::I64, DType::Bool, DType::F32] {
        let y = g.node(OpKind::Cast, &[x], &to(target)).unwrap();
        g.output(y);
        for back in [DType::F32, DType::I32, DType::I64, DType::Bool] {
            let z = g.node(OpKind::Cast, &[y], &to(back)).unwrap();
            g.output(z);
        }
    }
    check(
        &g.finish().unwrap(),
        &[f32_values(&shape, &values)],
        0.0,
        0.0,
    );
}

/// The comparisons with broadcasting on f32 (NaN unordered, -0 = +0), i32 and i64
/// (integers an f32 comparison would confuse), and Where selecting each dtype.
#[test]
fn comparisons_and_where_broadcast() {
    let specials = [
        f32::NAN,
        -0.0,
        0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        1e-40,
        16777216.0,
    ];
    let mut g = GraphBuilder::new("compare");
    let a = g.input_fixed("a", DType::F32, &[8, 1]);
    let b = g.input_fixed("b", DType::F32, &[1, 8]);
    let ai = g
        .node(
            OpKind::Cast,
            &[a],
            &[("to", Attr::Int(DType::I64.onnx_code()))],
        )
        .unwrap();
    let big = g.constant_i64("big", &[3], &[(1 << 53) + 1, 1 << 53, -(1 << 40) - 1]);
    let bi = g.node(OpKind::Mul, &[a, a], &[]).unwrap();
    let bi = g
        .node(
            OpKind::Cast,
            &[bi],
            &[("to", Attr::Int(DType::I32.onnx_code()))],
        )
        .unwrap();
    let bj = g
        .node(
            OpKind::Cast,
            &[b],
            &[("to", Attr::Int(DType::I32.onnx_code()))],
        )
        .unwrap();
    for op in [
        OpKind::Equal,
        OpKind::Less,
        OpKind::Greater,
        OpKind::LessOrEqual,
        OpKind::GreaterOrEqual,
    ] {
        let c = g.node(op, &[a, b], &[]).unwrap();
        g.output(c);
        let w = g.node(OpKind::Where, &[c, a, b], &[]).unwrap();
        g.output(w);
        let ci = g.node(op, &[bi, bj], &[]).unwrap();
        g.output(ci);
        let wi = g.node(OpKind::Where, &[ci, bi, bj], &[]).unwrap();
        g.output(wi);
        let cl = g.node(op, &[big, ai], &[]).unwrap();
        g.output(cl);
        let big_col = g.constant_i64(&format!("big_{}", op.name()), &[1, 3], &[7, -7, 1 << 60]);
        let wl = g.node(OpKind::Where, &[cl, big_col, ai], &[]).unwrap();
        g.output(wl);
    }
    check(
        &g.finish().unwrap(),
        &[
            f32_values(&[8, 1], &specials),
            f32_values(&[1, 8], &specials),
        ],
        0.0,
        0.0,
    );
}

/// Pow on every pair of special values (C pow's rules: x^0 = 1^y = 1 even for NaN, a
/// negative base with an odd or even integral exponent or a fractional one), on
/// negative bases with integral exponents, and with a Relu fused into it.
#[test]
fn pow_special_pairs_negative_bases_and_fused() {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -2.0,
        3.0,
        -3.0,
        0.5,
        1e30,
        -1e30,
        1e-40,
        -1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        3.0e38,
        16777217.0,
    ];
    let n = specials.len();
    let mut g = GraphBuilder::new("pow");
    let a = g.input_fixed("a", DType::F32, &[n, 1]);
    let b = g.input_fixed("b", DType::F32, &[1, n]);
    let y = g.node(OpKind::Pow, &[a, b], &[]).unwrap();
    g.output(y);
    let z = g.node(OpKind::Pow, &[b, a], &[]).unwrap();
    let r = g.node(OpKind::Relu, &[z], &[]).unwrap();
    g.output(r);
    check(
        &g.finish().unwrap(),
        &[
            f32_values(&[n, 1], &specials),
            f32_values(&[1, n], &specials),
        ],
        1e-5,
        1.2e-38,
    );
    let mut rng = Rng::new(30);
    let mut g = GraphBuilder::new("pow_negative_bases");
    let a = g.input_fixed("a", DType::F32, &[5, 1]);
    let e = g.constant_f32("e", &[1, 7], &[-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]);
    let y = g.node(OpKind::Pow, &[a, e], &[]).unwrap();
    g.output(y);
    let x = rng.vec_in(5, -4.0, 4.0);
    check(&g.finish().unwrap(), &[f32_values(&[5, 1], &x)], 1e-5, 1e-6);
}

/// BatchNormalization with constant parameters, as its per-channel scale and shift
/// folded at compile time, alone and with a Relu fused into it.
#[test]
fn batch_normalization_folded_to_scale_and_shift() {
    let mut r = Rng::new(31);
    for (shape, relu) in [
        (vec![2, 3, 4, 5], false),
        (vec![1, 4, 7], true),
        (vec![6], false),
    ] {
        let c = if shape.len() > 1 { shape[1] } else { 1 };
        let mut g = GraphBuilder::new("batchnorm");
        let x = g.input_fixed("x", DType::F32, &shape);
        let scale = g.constant_f32("scale", &[c], &r.vec_in(c, -2.0, 2.0));
        let bias = g.constant_f32("bias", &[c], &r.vec_in(c, -1.0, 1.0));
        let mean = g.constant_f32("mean", &[c], &r.vec_in(c, -1.0, 1.0));
        let var = g.constant_f32("var", &[c], &r.vec_in(c, 0.1, 3.0));
        let mut y = g
            .node(
                OpKind::BatchNormalization,
                &[x, scale, bias, mean, var],
                &[("epsilon", Attr::Float(1e-3))],
            )
            .unwrap();
        if relu {
            y = g.node(OpKind::Relu, &[y], &[]).unwrap();
        }
        g.output(y);
        let xv = r.vec_in(shape.iter().product(), -5.0, 5.0);
        check(&g.finish().unwrap(), &[f32_values(&shape, &xv)], 1e-5, 2e-6);
    }
}

/// A BatchNormalization folded into the Conv before it (with and without a bias, and
/// with the Relu after it), and one that cannot be (the Conv's result is also an
/// output), against the reference's Conv then BN.
#[test]
fn conv_with_batch_normalization_folded_in() {
    let mut r = Rng::new(32);
    for (with_bias, relu, conv_out) in [
        (true, true, false),
        (false, false, false),
        (true, false, true),
    ] {
        let (xs, ws) = ([1, 3, 9, 8], [5, 3, 3, 3]);
        let mut g = GraphBuilder::new("conv_bn");
        let x = g.input_fixed("x", DType::F32, &xs);
        let w = g.constant_f32("w", &ws, &r.vec(ws.iter().product()));
        let mut ins = vec![x, w];
        if with_bias {
            ins.push(g.constant_f32("b", &[5], &r.vec(5)));
        }
        let y = g
            .node(OpKind::Conv, &ins, &[("pads", ints(&[1, 1, 1, 1]))])
            .unwrap();
        let scale = g.constant_f32("scale", &[5], &r.vec_in(5, -2.0, 2.0));
        let bias = g.constant_f32("bias", &[5], &r.vec_in(5, -1.0, 1.0));
        let mean = g.constant_f32("mean", &[5], &r.vec_in(5, -1.0, 1.0));
        let var = g.constant_f32("var", &[5], &r.vec_in(5, 0.1, 3.0));
        let mut z = g
            .node(
                OpKind::BatchNormalization,
                &[y, scale, bias, mean, var],
                &[],
            )
            .unwrap();
        if relu {
            z = g.node(OpKind::Relu, &[z], &[]).unwrap();
        }
        g.output(z);
        if conv_out {
            g.output(y);
        }
        check(
            &g.finish().unwrap(),
            &[r.f32_tensor(&xs)],
            LINALG.0,
            LINALG.1,
        );
    }
}

/// Slice with negative starts, ends past the extent, negative steps (a negative stride
/// in the copy kernel's wrapping u32 arithmetic) and defaulted axes, and Split into
/// uneven parts along a negative axis.
#[test]
fn slice_with_negative_steps_and_split() {
    let mut r = Rng::new(33);
    let shape = [4, 5, 6];
    for (starts, ends, axes, steps) in [
        (vec![-1, 4], vec![i64::MIN, -7], vec![0, 2], vec![-1, -2]),
        (vec![1, 0, 5], vec![3, 9, 0], vec![2, 1, -3], vec![1, 2, -3]),
        (vec![i64::MAX], vec![i64::MIN], vec![1], vec![-1]),
    ] {
        let mut g = GraphBuilder::new("slice");
        let x = g.input_fixed("x", DType::F32, &shape);
        let n = starts.len();
        let s = g.constant_i64("starts", &[n], &starts);
        let e = g.constant_i64("ends", &[n], &ends);
        let a = g.constant_i64("axes", &[n], &axes);
        let st = g.constant_i64("steps", &[n], &steps);
        let y = g.node(OpKind::Slice, &[x, s, e, a, st], &[]).unwrap();
        g.output(y);
        check(&g.finish().unwrap(), &[r.f32_tensor(&shape)], 0.0, 0.0);
    }
    let mut g = GraphBuilder::new("split");
    let x = g.input_fixed("x", DType::F32, &shape);
    let parts = g.constant_i64("split", &[3], &[1, 3, 2]);
    let ys = g
        .named_node_outputs(
            "split",
            OpKind::Split,
            &[x, parts],
            &[("axis", Attr::Int(-1))],
            3,
        )
        .unwrap();
    for y in ys {
        g.output(y);
    }
    check(&g.finish().unwrap(), &[r.f32_tensor(&shape)], 0.0, 0.0);
}

/// Gather along every axis with run-time i32 indices (negative ones included) and
/// constant i64 ones, feeding a computation after it.
#[test]
fn gather_on_every_axis_with_run_time_and_constant_indices() {
    let mut r = Rng::new(34);
    let shape = [3, 4, 5];
    for axis in [0i64, 1, -1] {
        let mut g = GraphBuilder::new("gather");
        let x = g.input_fixed("x", DType::F32, &shape);
        let idx = g.input_fixed("idx", DType::I32, &[2, 2]);
        let y = g
            .node(OpKind::Gather, &[x, idx], &[("axis", Attr::Int(axis))])
            .unwrap();
        g.output(y);
        let c = g.constant_i64("c", &[3], &[-1, 0, 2]);
        let z = g
            .node(OpKind::Gather, &[x, c], &[("axis", Attr::Int(axis))])
            .unwrap();
        let z = g.node(OpKind::Relu, &[z], &[]).unwrap();
        g.output(z);
        let values: [i32; 4] = [-3, 2, 0, -1];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        check(
            &g.finish().unwrap(),
            &[
                r.f32_tensor(&shape),
                Tensor::from_bytes(DType::I32, &[2, 2], &bytes),
            ],
            0.0,
            0.0,
        );
    }
}

/// Pad in every mode with constant amounts, including negative ones (crops) and an
/// axes input, and the constant mode's value.
#[test]
fn pad_in_every_mode_with_crops() {
    let mut r = Rng::new(35);
    let shape = [2, 3, 4];
    for mode in ["constant", "reflect", "edge", "wrap"] {
        for (pads, axes) in [
            (vec![0, 2, 2, 1, 1, -1], None),
            (vec![1, -1, 2, 1], Some(vec![-1, 1])),
        ] {
            let mut g = GraphBuilder::new("pad");
            let x = g.input_fixed("x", DType::F32, &shape);
            let p = g.constant_i64("pads", &[pads.len()], &pads);
            let v = g.constant_f32("value", &[], &[-2.5]);
            let mut ins = vec![x, p, v];
            if let Some(a) = &axes {
                ins.push(g.constant_i64("axes", &[a.len()], a));
            }
            let y = g
                .node(OpKind::Pad, &ins, &[("mode", Attr::Str(mode.into()))])
                .unwrap();
            g.output(y);
            check(&g.finish().unwrap(), &[r.f32_tensor(&shape)], 0.0, 0.0);
        }
    }
}

/// Resize in every mode and coordinate transformation, up and down, by scales and by
/// sizes: nearest in every rounding (and on i64, moved as words), linear on the two
/// inner axes and on three, cubic with and without exclude_outside, antialiased
/// shrinks, and tf_crop_and_resize with a roi and an extrapolation value.
#[test]
fn resize_in_every_mode_and_coordinate_transformation() {
    let mut r = Rng::new(36);
    let s = |v: &str| Attr::Str(v.into());
    let shape = [1, 2, 5, 6];
    let up = [1.0, 1.0, 1.6, 2.0];
    let down = [1.0, 1.0, 0.6, 0.5];
    let mut rows: Vec<(Attrs, [f32; 4], Option<[f32; 8]>)> = Vec::new();
    for coord in [
        "half_pixel",
        "half_pixel_symmetric",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
    ] {
        for scales in [up, down] {
            for nearest in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"] {
                let attrs = vec![
                    ("mode", s("nearest")),
                    ("coordinate_transformation_mode", s(coord)),
                    ("nearest_mode", s(nearest)),
                ];
                rows.push((attrs, scales, None));
            }
            rows.push((
                vec![("mode", s("linear")), ("coordinate_transformation_mode", s(coord))],
                scales,
                None,
            ));
            for exclude in [0, 1] {
                rows.push((
                    vec![
                        ("mode", s("cubic")),
                        ("coordinate_transformation_mode", s(coord)),
                        ("exclude_outside", Attr::Int(exclude)),
                        ("cubic_coeff_a", Attr::Float(-0.5)),
                    ],
                    scales,
                    None,
                ));
            }
        }
    }
    for mode in ["linear", "cubic"] {
        rows.push((
            vec![("mode", s(mode)), ("antialias", Attr::Int(1))],
            [1.0, 1.0, 0.4, 0.35],
            None,
        ));
    }
    for mode in ["nearest", "linear", "cubic"] {
        rows.push((
            vec![
                ("mode", s(mode)),
                ("coordinate_transformation_mode", s("tf_crop_and_resize")),
                ("extrapolation_value", Attr::Float(-3.25)),
            ],
            [1.0, 1.0, 1.4, 1.5],
            Some([0.0, 0.0, -0.2, 0.1, 1.0, 1.0, 0.7, 1.3]),
        ));
    }
    for (attrs, scales, roi) in rows {
        let mut g = GraphBuilder::new("resize");
        let x = g.input_fixed("x", DType::F32, &shape);
        let roi = match roi {
            Some(v) => g.constant_f32("roi", &[8], &v),
            None => g.constant_f32("roi", &[0], &[]),
        };
        let sizes: Vec<i64> = shape
            .iter()
            .zip(scales)
            .map(|(&d, s)| (d as f32 * s).floor() as i64)
            .collect();
        let mut attrs = attrs;
        attrs.push(("scales", Attr::Floats(scales.to_vec())));
        // Scales as the attribute (what the host folds constant scales into).
        let y = g.node(OpKind::Resize, &[x, roi], &attrs).unwrap();
        g.output(y);
        check(&g.finish().unwrap(), &[r.f32_tensor(&shape)], 1e-5, 1e-5);
        // The same target by sizes.
        attrs.pop();
        let mut g = GraphBuilder::new("resize_sizes");
        let x = g.input_fixed("x", DType::F32, &shape);
        let roi = g.constant_f32("roi", &[0], &[]);
        let sc = g.constant_f32("scales", &[0], &[]);
        let sz = g.constant_i64("sizes", &[4], &sizes);
        let y = g.node(OpKind::Resize, &[x, roi, sc, sz], &attrs).unwrap();
        g.output(y);
        check(&g.finish().unwrap(), &[r.f32_tensor(&shape)], 1e-5, 1e-5);
    }
    // Trilinear, and nearest on i64.
    let mut g = GraphBuilder::new("resize_trilinear");
    let x = g.input_fixed("x", DType::F32, &[1, 1, 3, 4, 5]);
    let attrs = vec![
        ("mode", s("linear")),
        ("scales", Attr::Floats(vec![1.0, 1.0, 1.5, 0.5, 2.2])),
    ];
    let y = g.node(OpKind::Resize, &[x], &attrs).unwrap();
    g.output(y);
    check(&g.finish().unwrap(), &[r.f32_tensor(&[1, 1, 3, 4, 5])], 1e-5, 1e-5);
    let mut g = GraphBuilder::new("resize_i64");
    let x = g.input_fixed("x", DType::I64, &[2, 3, 4]);
    let y = g
        .node(
            OpKind::Resize,
            &[x],
            &[("scales", Attr::Floats(vec![1.0, 2.0, 0.75]))],
        )
        .unwrap();
    g.output(y);
    let values: Vec<i64> = (0..24).map(|v| (v - 12) * 1_000_000_007).collect();
    check(
        &g.finish().unwrap(),
        &[Tensor::from_i64(&[2, 3, 4], &values)],
        0.0,
        0.0,
    );
}

/// Resize on the dtypes packed into words: nearest moves bytes (u8, bool) and halves
/// (f16, i16) whose rows end inside a word, and f16 interpolates in f32, rounded once.
#[test]
fn resize_packs_bytes_and_halves() {
    let mut r = Rng::new(38);
    let s = |v: &str| Attr::Str(v.into());
    let shape = [1, 2, 3, 5];
    let elements: usize = shape.iter().product();
    let bytes: Vec<u8> = (0..elements).map(|i| (i * 37 % 251) as u8).collect();
    let values: Vec<f32> = r.vec(elements).iter().map(|v| v * 4.0).collect();
    let halves = f16_tensor(&shape, &values).bytes().to_vec();
    let bools: Vec<u8> = bytes.iter().map(|b| b % 2).collect();
    let nearest: Attrs = vec![("scales", Attr::Floats(vec![1.0, 1.0, 1.7, 1.4]))];
    let cases: Vec<(DType, &[u8], Attrs)> = vec![
        (DType::U8, &bytes, nearest.clone()),
        (DType::Bool, &bools, nearest.clone()),
        (DType::I16, &halves, nearest.clone()),
        (DType::F16, &halves, nearest),
        (
            DType::F16,
            &halves,
            vec![("mode", s("linear")), ("scales", Attr::Floats(vec![1.0, 1.0, 2.0, 0.6]))],
        ),
        (
            DType::F16,
            &halves,
            vec![
                ("mode", s("cubic")),
                ("coordinate_transformation_mode", s("tf_crop_and_resize")),
                ("extrapolation_value", Attr::Float(1.5)),
                ("scales", Attr::Floats(vec![1.0, 1.0, 1.5, 1.2])),
            ],
        ),
    ];
    for (dtype, data, attrs) in cases {
        let mut g = GraphBuilder::new("resize_packed");
        let x = g.input_fixed("x", dtype, &shape);
        let roi = g.constant_f32("roi", &[8], &[0.0, 0.0, -0.3, 0.1, 1.0, 1.0, 0.9, 1.2]);
        let y = g.node(OpKind::Resize, &[x, roi], &attrs).unwrap();
        g.output(y);
        let tol = if dtype == DType::F16 { 2e-3 } else { 0.0 };
        check(
            &g.finish().unwrap(),
            &[Tensor::from_bytes(dtype, &shape, data)],
            tol,
            tol,
        );
    }
}

/// ConvTranspose with 1, 2 and 3 spatial axes: strides, dilations, groups (depthwise
/// too), explicit and asymmetric pads, output_padding, output_shape, every auto_pad, a
/// bias, and a Relu fused into it.
#[test]
fn conv_transpose_strided_dilated_grouped_padded_and_fused() {
    let mut r = Rng::new(37);
    let s = |v: &str| Attr::Str(v.into());
    #[rustfmt::skip]
    let rows: Vec<(Vec<usize>, Vec<usize>, bool, Attrs)> = vec![
        (vec![1, 2, 4, 4], vec![2, 3, 3, 3], false, vec![]),
        (vec![2, 3, 5, 5], vec![3, 4, 3, 3], true, vec![("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))]),
        (vec![1, 2, 3, 4], vec![2, 2, 3, 3], true, vec![("strides", ints(&[2, 2])), ("output_padding", ints(&[1, 1]))]),
        (vec![1, 4, 4, 4], vec![4, 3, 2, 2], true, vec![("group", Attr::Int(2)), ("dilations", ints(&[2, 2]))]),
        (vec![1, 2, 3, 3], vec![2, 2, 3, 2], false, vec![("strides", ints(&[3, 2])), ("pads", ints(&[0, 1, 2, 0]))]),
        (vec![1, 2, 3, 3], vec![2, 2, 3, 3], true, vec![("strides", ints(&[2, 2])), ("output_shape", ints(&[6, 5]))]),
        (vec![1, 2, 3, 3], vec![2, 2, 3, 3], false, vec![("strides", ints(&[2, 2])), ("auto_pad", s("SAME_UPPER"))]),
        (vec![1, 2, 3, 3], vec![2, 2, 4, 4], false, vec![("strides", ints(&[2, 2])), ("auto_pad", s("SAME_LOWER"))]),
        (vec![1, 2, 3, 3], vec![2, 2, 2, 2], false, vec![("auto_pad", s("VALID")), ("strides", ints(&[2, 1]))]),
        (vec![2, 3, 7], vec![3, 2, 5], true, vec![("strides", ints(&[3]))]),
        (vec![1, 3, 6], vec![3, 1, 3], true, vec![("group", Attr::Int(3)), ("pads", ints(&[1, 1]))]),
        (vec![1, 2, 3, 2, 3], vec![2, 2, 2, 3, 2], true, vec![("strides", ints(&[2, 1, 2])), ("pads", ints(&[0, 1, 1, 1, 0, 0]))]),
    ];
    for (k, (x_shape, w_shape, bias, attrs)) in rows.into_iter().enumerate() {
        let mut g = GraphBuilder::new("conv_transpose");
        let x = g.input_fixed("x", DType::F32, &x_shape);
        let w = g.constant_f32("w", &w_shape, &r.vec(w_shape.iter().product()));
        let mut ins = vec![x, w];
        if bias {
            let group = attrs.iter().find_map(|(n, a)| match (*n, a) {
                ("group", Attr::Int(v)) => Some(*v as usize),
                _ => None,
            });
            let m = w_shape[1] * group.unwrap_or(1);
            ins.push(g.constant_f32("b", &[m], &r.vec(m)));
        }
        let mut y = g.node(OpKind::ConvTranspose, &ins, &attrs).unwrap();
        // Every other configuration ends in a Relu, which the kernel applies.
        if k % 2 == 1 {
            y = g.node(OpKind::Relu, &[y], &[]).unwrap();
        }
        g.output(y);
        check(
            &g.finish().unwrap(),
            &[r.f32_tensor(&x_shape)],
            LINALG.0,
            LINALG.1,
        );
    }
}

/// ConvTranspose in f16 (the f16 variant sums in f32 and rounds once), strided and
/// grouped, with a bias and a fused Relu.
#[test]
fn f16_conv_transpose_sums_in_f32() {
    let mut r = Rng::new(39);
    let (xs, ws) = ([1, 4, 3, 4], [4, 2, 3, 3]);
    let mut g = GraphBuilder::new("conv_transpose_f16");
    let x = g.input_fixed("x", DType::F16, &xs);
    let w = g.input_fixed("w", DType::F16, &ws);
    let b = g.input_fixed("b", DType::F16, &[4]);
    let attrs = [
        ("strides", ints(&[2, 2])),
        ("group", Attr::Int(2)),
        ("pads", ints(&[1, 0, 0, 1])),
    ];
    let y = g.node(OpKind::ConvTranspose, &[x, w, b], &attrs).unwrap();
    let y = g.node(OpKind::Relu, &[y], &[]).unwrap();
    g.output(y);
    check(
        &g.finish().unwrap(),
        &[
            f16_tensor(&xs, &r.vec(xs.iter().product())),
            f16_tensor(&ws, &r.vec(ws.iter().product())),
            f16_tensor(&[4], &r.vec(4)),
        ],
        F16_TOL.0,
        1e-3,
    );
}

/// A BatchNormalization (and a Relu) after a grouped ConvTranspose, folded into its
/// weights and bias: one dispatch, checked against the three nodes run apart.
#[test]
fn conv_transpose_with_a_batch_norm_folded_in() {
    let mut r = Rng::new(40);
    let (xs, ws) = ([2, 4, 3, 3], [4, 3, 3, 3]);
    for bias in [false, true] {
        let mut g = GraphBuilder::new("conv_transpose_bn");
        let x = g.input_fixed("x", DType::F32, &xs);
        let w = g.constant_f32("w", &ws, &r.vec(ws.iter().product()));
        let mut ins = vec![x, w];
        if bias {
            ins.push(g.constant_f32("b", &[6], &r.vec(6)));
        }
        let attrs = [
            ("strides", ints(&[2, 2])),
            ("group", Attr::Int(2)),
            ("pads", ints(&[1, 1, 0, 0])),
        ];
        let y = g.node(OpKind::ConvTranspose, &ins, &attrs).unwrap();
        let scale = g.constant_f32("scale", &[6], &r.vec(6));
        let shift = g.constant_f32("shift", &[6], &r.vec(6));
        let mean = g.constant_f32("mean", &[6], &r.vec(6));
        let var: Vec<f32> = r.vec(6).iter().map(|v| v.abs() + 0.5).collect();
        let var = g.constant_f32("var", &[6], &var);
        let z = g
            .node(
                OpKind::BatchNormalization,
                &[y, scale, shift, mean, var],
                &[],
            )
            .unwrap();
        let z = g.node(OpKind::Relu, &[z], &[]).unwrap();
        g.output(z);
        check(
            &g.finish().unwrap(),
            &[r.f32_tensor(&xs)],
            LINALG.0,
            LINALG.1,
        );
    }
}

/// lavapipe (Mesa's llvmpipe) has subgroup arithmetic in compute shaders, so there the
/// row kernels (Softmax, LayerNormalization, the Reduce ops) must be planned as their
/// `_sg` variants and still match the reference: a device check that stopped seeing the
/// capability would otherwise fall back to the shared-memory kernels unnoticed. Other
/// devices only get the comparison.
#[test]
fn row_kernels_use_subgroups_where_the_device_has_them() {
    let Some(ctx) = common::plugin() else { return };
    let device = ctx.devices().expect("devices").remove(0);
    let mut r = Rng::new(31);
    let mut g = GraphBuilder::new("rows");
    let x = g.input_fixed("x", DType::F32, &[6, 257]);
    let s = g.constant_f32("scale", &[257], &r.vec(257));
    let sm = g
        .node(OpKind::Softmax, &[x], &[("axis", Attr::Int(-1))])
        .unwrap();
    let ln = g.node(OpKind::LayerNormalization, &[sm, s], &[]).unwrap();
    let rs = g
        .node(
            OpKind::ReduceSum,
            &[ln],
            &[("axes", ints(&[1])), ("keepdims", Attr::Int(0))],
        )
        .unwrap();
    let rm = g
        .node(
            OpKind::ReduceMax,
            &[x],
            &[("axes", ints(&[1])), ("keepdims", Attr::Int(0))],
        )
        .unwrap();
    let rn = g
        .node(
            OpKind::ReduceMin,
            &[x],
            &[("axes", ints(&[1])), ("keepdims", Attr::Int(0))],
        )
        .unwrap();
    g.output(rs);
    g.output(rm);
    g.output(rn);
    let g = g.finish().unwrap();
    let blob = ctx.compile(0, &g).expect("compile");
    let plan = baton_gpu_kernels::blob::decode(blob.bytes()).expect("the blob decodes");
    let kernels: Vec<&str> = plan.steps.iter().map(|s| s.kernel.as_str()).collect();
    eprintln!(
        "{}: subgroup size {}, subgroup arithmetic {}, f16 {}",
        device.name, plan.limits.subgroup, plan.limits.subgroups, plan.limits.float16
    );
    if device.name.contains("llvmpipe") {
        assert!(
            plan.limits.subgroups,
            "{}: lavapipe has subgroup arithmetic, but the plugin did not see it",
            device.name
        );
    }
    let want: &[&str] = if plan.limits.subgroups {
        &["softmax_sg", "layernorm_sg", "reduce_sg", "reduce_sg", "reduce_sg"]
    } else {
        &["softmax", "layernorm", "reduce", "reduce", "reduce"]
    };
    assert_eq!(kernels, want, "{}", device.name);
    let xs: Vec<f32> = r.vec(6 * 257).into_iter().map(|v| v * 10.0).collect();
    check(&g, &[Tensor::from_f32(&[6, 257], &xs)], 1e-4, 1e-4);
}

/// f16 Conv (with bias and a fused Relu), LayerNormalization and the reductions: f16
/// storage, f32 sums inside the kernels, one rounding per stored element.
#[test]
fn f16_conv_layer_norm_and_reductions_accumulate_in_f32() {
    let mut r = Rng::new(32);
    let f16_vec = |r: &mut Rng, n: usize, scale: f32| -> Vec<f32> {
        r.vec(n).iter().map(|v| v * scale).collect()
    };
    // Conv 2-D, grouped, with bias, then Relu (fused into the conv's epilogue).
    let (xs, ws) = ([1, 4, 9, 8], [6, 2, 3, 3]);
    let mut g = GraphBuilder::new("conv_f16");
    let x = g.input_fixed("x", DType::F16, &xs);
    let w = g.input_fixed("w", DType::F16, &ws);
    let b = g.input_fixed("b", DType::F16, &[6]);
    let c = g
        .node(
            OpKind::Conv,
            &[x, w, b],
            &[
                ("group", Attr::Int(2)),
                ("pads", ints(&[1, 0, 1, 2])),
                ("strides", ints(&[1, 2])),
            ],
        )
        .unwrap();
    let y = g.node(OpKind::Relu, &[c], &[]).unwrap();
    g.output(y);
    check(
        &g.finish().unwrap(),
        &[
            f16_tensor(&xs, &f16_vec(&mut r, 288, 2.0)),
            f16_tensor(&ws, &f16_vec(&mut r, 108, 1.0)),
            f16_tensor(&[6], &f16_vec(&mut r, 6, 1.0)),
        ],
        F16_TOL.0,
        F16_TOL.1,
    );
    // LayerNormalization over the last two axes, with Mean and InvStdDev (f32).
    let mut g = GraphBuilder::new("layernorm_f16");
    let x = g.input_fixed("x", DType::F16, &[3, 5, 40]);
    let s = g.input_fixed("scale", DType::F16, &[5, 40]);
    let b = g.input_fixed("bias", DType::F16, &[5, 40]);
    let y = g
        .node(
            OpKind::LayerNormalization,
            &[x, s, b],
            &[("axis", Attr::Int(1))],
        )
        .unwrap();
    g.output(y);
    check(
        &g.finish().unwrap(),
        &[
            f16_tensor(&[3, 5, 40], &f16_vec(&mut r, 600, 3.0)),
            f16_tensor(&[5, 40], &f16_vec(&mut r, 200, 1.0)),
            f16_tensor(&[5, 40], &f16_vec(&mut r, 200, 1.0)),
        ],
        // The normalized values are near 1, so an f16 ulp is about 1e-3.
        2e-3,
        2e-3,
    );
    // The reductions, over a middle block of axes and over all of them.
    for op in [
        OpKind::ReduceSum,
        OpKind::ReduceMean,
        OpKind::ReduceMax,
        OpKind::ReduceMin,
    ] {
        for axes in [&[1i64, 2][..], &[0, 1, 2, 3]] {
            let shape = [2, 3, 50, 4];
            let mut g = GraphBuilder::new(op.name());
            let x = g.input_fixed("x", DType::F16, &shape);
            let y = g.node(op, &[x], &[("axes", ints(axes))]).unwrap();
            g.output(y);
            check(
                &g.finish().unwrap(),
                &[f16_tensor(&shape, &f16_vec(&mut r, 1200, 1.0))],
                F16_TOL.0,
                // A sum of 600 values of about 1: its f16 ulp is up to 2^-5.
                0.05,
            );
        }
    }
}
