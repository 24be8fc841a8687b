//! Activations applied in a product's epilogue (`gemm/activation.rs`): a Conv, MatMul or
//! Gemm whose only reader is a Sigmoid, SiLU, HardSwish, `x * HardSigmoid(x)`,
//! LeakyRelu, Gelu or Erf GELU writes the activated result in the same step. The fused
//! executable must give the bits of the unfused one (the same graph with each product's
//! result made a subgraph output too, which stops that fusion and only it), in fewer
//! steps, on every kernel family, at 1 and 2 threads.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::Rng;
use baton_delegate_api::Tensor;
use common::{constant, delegate_with, run_counting};

/// Every producer and activation pairing that fuses: a 3x3 conv with HardSwish; a 1x1
/// conv with SiLU; a depthwise conv with `x * HardSigmoid(x)` (no product: applied after
/// the depthwise kernel); a conv, BatchNormalization and LeakyRelu; a conv, residual Add
/// and Sigmoid written as a subgraph output (NCHW: the residual is added after the layout
/// change, the activation after it); MatMul, bias and Erf GELU (torch's five nodes, large
/// enough for several tiles and depth blocks); Gemm and Sigmoid; one row (the
/// matrix-vector form) and Gelu. With `expose`, each product's result is an output too,
/// so the activations run as steps of their own.
fn block(expose: bool) -> (Graph, Vec<Tensor>, usize) {
    let mut rng = Rng::new(11);
    let mut b = GraphBuilder::new("acts");
    let mut inputs = Vec::new();
    let mut input = |b: &mut GraphBuilder, name: &str, shape: &[usize], scale: f32| {
        let v: Vec<f32> = rng
            .vec(shape.iter().product())
            .iter()
            .map(|x| x * scale)
            .collect();
        inputs.push(Tensor::from_f32(shape, &v));
        b.input_fixed(name, DType::F32, shape)
    };
    let x = input(&mut b, "x", &[1, 6, 9, 9], 2.0);
    let y = input(&mut b, "y", &[1, 16, 9, 9], 1.0);
    let t = input(&mut b, "t", &[2, 37, 300], 1.0);
    let r = input(&mut b, "r", &[1, 300], 1.0);
    let mut rng = Rng::new(12);
    let pad = || ("pads", Attr::Ints(vec![1; 4]));
    let node = |b: &mut GraphBuilder, op: OpKind, ins: &[TensorId], attrs: &[(&str, Attr)]| {
        b.node(op, ins, attrs).unwrap()
    };
    // Conv 3x3 + HardSwish.
    let w1 = constant(&mut b, &mut rng, &[16, 6, 3, 3], 0.4);
    let b1 = constant(&mut b, &mut rng, &[16], 1.0);
    let c1 = node(&mut b, OpKind::Conv, &[x, w1, b1], &[pad()]);
    let a1 = node(&mut b, OpKind::HardSwish, &[c1], &[]);
    // Conv 1x1 + SiLU.
    let w2 = constant(&mut b, &mut rng, &[16, 16, 1, 1], 0.4);
    let c2 = node(&mut b, OpKind::Conv, &[a1, w2], &[]);
    let s2 = node(&mut b, OpKind::Sigmoid, &[c2], &[]);
    let a2 = node(&mut b, OpKind::Mul, &[c2, s2], &[]);
    // Depthwise + x * HardSigmoid(x).
    let wd = constant(&mut b, &mut rng, &[16, 1, 3, 3], 0.5);
    let group = ("group", Attr::Int(16));
    let dw = node(&mut b, OpKind::Conv, &[a2, wd], &[pad(), group]);
    let hs = node(&mut b, OpKind::HardSigmoid, &[dw], &[]);
    let ad = node(&mut b, OpKind::Mul, &[hs, dw], &[]);
    // Conv + BatchNormalization + LeakyRelu.
    let w3 = constant(&mut b, &mut rng, &[16, 16, 1, 1], 0.4);
    let c3 = node(&mut b, OpKind::Conv, &[ad, w3], &[]);
    let scale = constant(&mut b, &mut rng, &[16], 1.0);
    let shift = constant(&mut b, &mut rng, &[16], 1.0);
    let mean = constant(&mut b, &mut rng, &[16], 0.5);
    let var = b.constant_f32("var", &[16], &[0.7; 16]);
    let bn = node(
        &mut b,
        OpKind::BatchNormalization,
        &[c3, scale, shift, mean, var],
        &[],
    );
    let a3 = node(
        &mut b,
        OpKind::LeakyRelu,
        &[bn],
        &[("alpha", Attr::Float(0.1))],
    );
    // Conv + residual + Sigmoid, a subgraph output.
    let w4 = constant(&mut b, &mut rng, &[16, 16, 3, 3], 0.2);
    let c4 = node(&mut b, OpKind::Conv, &[a3, w4], &[pad()]);
    let s4 = node(&mut b, OpKind::Add, &[c4, y], &[]);
    let a4 = node(&mut b, OpKind::Sigmoid, &[s4], &[]);
    // MatMul + bias + Erf GELU.
    let wm = constant(&mut b, &mut rng, &[300, 70], 0.1);
    let bm = constant(&mut b, &mut rng, &[70], 1.0);
    let mm = node(&mut b, OpKind::MatMul, &[t, wm], &[]);
    let lm = node(&mut b, OpKind::Add, &[mm, bm], &[]);
    let sqrt2 = b.constant_f32("sqrt2", &[], &[std::f32::consts::SQRT_2]);
    let one = b.constant_f32("one", &[], &[1.0]);
    let half = b.constant_f32("half", &[], &[0.5]);
    let d = node(&mut b, OpKind::Div, &[lm, sqrt2], &[]);
    let e = node(&mut b, OpKind::Erf, &[d], &[]);
    let p = node(&mut b, OpKind::Add, &[e, one], &[]);
    let q = node(&mut b, OpKind::Mul, &[lm, p], &[]);
    let gelu = node(&mut b, OpKind::Mul, &[q, half], &[]);
    // Gemm + Sigmoid.
    let shape = b.constant_i64("shape", &[2], &[74, 70]);
    let flat = node(&mut b, OpKind::Reshape, &[gelu, shape], &[]);
    let wg = constant(&mut b, &mut rng, &[70, 24], 0.2);
    let cg = constant(&mut b, &mut rng, &[24], 1.0);
    let gm = node(&mut b, OpKind::Gemm, &[flat, wg, cg], &[]);
    let ag = node(&mut b, OpKind::Sigmoid, &[gm], &[]);
    // One row + Gelu.
    let wr = constant(&mut b, &mut rng, &[300, 40], 0.1);
    let mr = node(&mut b, OpKind::MatMul, &[r, wr], &[]);
    let ar = node(&mut b, OpKind::Gelu, &[mr], &[]);
    let mut outs = vec![a4, ag, ar];
    if expose {
        outs.extend([c1, c2, dw, bn, s4, lm, gm, mr]);
    }
    outs.into_iter().for_each(|t| b.output(t));
    // Fused: the 8 convolutions and products, each with its activation (the Reshape is a
    // view, no step). Unfused: the activations are 8 steps more.
    let steps = if expose { 16 } else { 8 };
    (b.finish().unwrap(), inputs, steps)
}

#[test]
fn activations_fused_in_products_keep_the_bits() {
    let (fused, inputs, fused_steps) = block(false);
    let (plain, _, plain_steps) = block(true);
    for isa in common::isas() {
        for threads in [1, 2] {
            let d = delegate_with(isa, threads);
            let (got, steps) = run_counting(&d, &fused, &inputs);
            let (want, unfused) = run_counting(&d, &plain, &inputs);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let same = g
                    .f32s()
                    .iter()
                    .zip(w.f32s())
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa}, {threads} threads: output {i} differs");
                assert!(
                    g.f32s().iter().any(|&v| v != 0.0),
                    "output {i} is all zeros"
                );
            }
            assert_eq!(steps, fused_steps, "{isa}, {threads} threads");
            assert_eq!(unfused, plain_steps, "{isa}, {threads} threads");
        }
    }
}
