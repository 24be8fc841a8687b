//! Subgraph outputs written by their step straight into the caller's buffer (an f32
//! output whose slot no later step reads) and those copied from the arena (read later,
//! listed twice, a view of another tensor): every one holds its value, run after run.

mod common;

use baton_delegate_api::ir::{DType, GraphBuilder, OpKind};
use baton_delegate_api::testing::{execute, Hosted, Rng};
use baton_delegate_api::{Delegate, Tensor};
use common::delegate;

#[test]
fn outputs_hold_their_values_whether_written_in_place_or_copied() {
    let mut b = GraphBuilder::new("outs");
    let x = b.input_fixed("x", DType::F32, &[2, 3, 5]);
    // Read by two later nodes and an output itself: copied.
    let r = b.node(OpKind::Relu, &[x], &[]).unwrap();
    // Listed twice: copied.
    let s = b.node(OpKind::Sigmoid, &[r], &[]).unwrap();
    let a = b.node(OpKind::Add, &[r, x], &[]).unwrap();
    // A view of `a` (no step of its own).
    let shape = b.constant_i64("shape", &[2], &[6, 5]);
    let v = b.node(OpKind::Reshape, &[a, shape], &[]).unwrap();
    // Read by nothing else: written in place.
    let n = b.node(OpKind::Neg, &[a], &[]).unwrap();
    for t in [r, s, a, v, s, n] {
        b.output(t);
    }
    let g = b.finish().unwrap();
    let h = Hosted::new(&g);
    for simd in [true, false] {
        let d = delegate(simd);
        let blob = h.compile(&d).expect("compiles");
        let mut exec = d.init(0, &blob, &h.views()).expect("initialises");
        for seed in [1, 2] {
            let xv = Rng::new(seed).vec(30);
            let input = Tensor::from_f32(&[2, 3, 5], &xv);
            let outs = execute(&mut exec, &h.graph, &[input]).expect("runs");
            let relu: Vec<f32> = xv.iter().map(|&v| v.max(0.0)).collect();
            let sig: Vec<f32> = relu.iter().map(|&v| 1.0 / (1.0 + (-v).exp())).collect();
            let add: Vec<f32> = relu.iter().zip(&xv).map(|(r, x)| r + x).collect();
            assert_eq!(outs[0].f32s(), &relu[..], "simd {simd}, run {seed}");
            for (k, o) in [(1, &outs[1]), (4, &outs[4])] {
                for (g, w) in o.f32s().iter().zip(&sig) {
                    assert!((g - w).abs() < 1e-6, "output {k}, simd {simd}, run {seed}");
                }
            }
            assert_eq!(outs[2].f32s(), &add[..], "simd {simd}, run {seed}");
            assert_eq!(outs[3].f32s(), &add[..], "simd {simd}, run {seed}");
            let neg: Vec<f32> = add.iter().map(|v| -v).collect();
            assert_eq!(outs[5].f32s(), &neg[..], "simd {simd}, run {seed}");
        }
    }
}
