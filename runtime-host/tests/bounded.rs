//! Dynamic shapes within declared bounds: one arena planned at the bounds serves every
//! smaller binding, on the reference alone and with the CPU plugin taking partitions, and
//! an input beyond a bound is refused by name.

mod common;

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, DType, Dim, Graph, GraphBuilder, OpKind, Tensor};
use baton_reference as reference;
use baton_runtime_host::specialize::specialize;
use baton_runtime_host::BoundedSession;

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            ((s >> 8) as f32 / (1u32 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// x[n,8] @ w + b -> Relu -> (+ y[n,16]) and Softmax -> Transpose: a symbolic row count
/// that flows through a GEMM partition, the host and a layout change.
fn model() -> Graph {
    let mut b = GraphBuilder::new("bounded");
    let n = Dim::Sym("n".into());
    let x = b.input("x", DType::F32, &[n.clone(), Dim::Fixed(8)]);
    let y = b.input("y", DType::F32, &[n, Dim::Fixed(16)]);
    let w = b.constant_f32("w", &[8, 16], &values(128, 1));
    let bias = b.constant_f32("b", &[16], &values(16, 2));
    let h = b.node(OpKind::MatMul, &[x, w], &[]).unwrap();
    let h = b.node(OpKind::Add, &[h, bias], &[]).unwrap();
    let r = b.node(OpKind::Relu, &[h], &[]).unwrap();
    let sum = b.node(OpKind::Add, &[r, y], &[]).unwrap();
    let s = b
        .node(OpKind::Softmax, &[r], &[("axis", Attr::Int(1))])
        .unwrap();
    let t = b
        .node(OpKind::Transpose, &[s], &[("perm", Attr::Ints(vec![1, 0]))])
        .unwrap();
    b.output(sum);
    b.output(t);
    b.finish().unwrap()
}

fn inputs(n: usize) -> Vec<Tensor> {
    vec![
        Tensor::from_f32(&[n, 8], &values(n * 8, 10 + n as u32)),
        Tensor::from_f32(&[n, 16], &values(n * 16, 20 + n as u32)),
    ]
}

fn bounds(n: usize) -> BTreeMap<String, usize> {
    BTreeMap::from([("n".to_string(), n)])
}

fn assert_close(got: &[Tensor], want: &[Tensor]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.shape, w.shape);
        for (a, b) in g.to_f64().iter().zip(w.to_f64()) {
            assert!((a - b).abs() <= 1e-5 + 1e-5 * b.abs(), "{a} vs {b}");
        }
    }
}

fn every_binding_up_to_the_bound_matches_the_reference(with_cpu: bool) {
    let e = common::plugin_engine(with_cpu);
    let g = model();
    let mut s = BoundedSession::new(&e, &g, &bounds(16)).unwrap();
    let arena = s.arena_plan().arena_size;
    assert!(arena > 0);
    // Sizes in an order that revisits bindings, including the bound itself and 1.
    let order = [5, 16, 1, 5, 9, 16, 3];
    for &n in &order {
        let x = inputs(n);
        let got = s.run(&x).unwrap();
        let want = reference::run_graph(&specialize(&g, &bounds(n)).unwrap(), &x).unwrap();
        assert_close(&got, &want);
        assert_eq!(got[0].shape, vec![n, 16]);
        assert_eq!(got[1].shape, vec![16, n]);
        assert_eq!(s.arena_plan().arena_size, arena, "the arena never grows");
    }
    let st = s.stats();
    assert_eq!(st.runs, order.len());
    assert_eq!(
        st.specializations, 5,
        "5, 16, 1, 9, 3: revisited bindings are cached"
    );
    assert_eq!(
        st.replans, 0,
        "every binding reuses the layout planned at the bound"
    );
    if with_cpu {
        let per = s.last_nodes_per_backend();
        assert!(per.get("cpu").copied().unwrap_or(0) > 0, "{per:?}");
    }
}

#[test]
fn bindings_up_to_the_bound_share_one_arena_on_the_reference() {
    every_binding_up_to_the_bound_matches_the_reference(false);
}

#[test]
fn bindings_up_to_the_bound_share_one_arena_with_the_cpu_plugin() {
    every_binding_up_to_the_bound_matches_the_reference(true);
}

#[test]
fn an_input_beyond_its_bound_is_refused_by_name_and_the_session_goes_on() {
    let e = common::plugin_engine(true);
    let g = model();
    let mut s = BoundedSession::new(&e, &g, &bounds(8)).unwrap();
    let err = s.run(&inputs(9)).unwrap_err().to_string();
    assert!(
        err.contains("'x'") && err.contains("'n'") && err.contains("9") && err.contains("bound 8"),
        "{err}"
    );
    let x = inputs(8);
    let want = reference::run_graph(&specialize(&g, &bounds(8)).unwrap(), &x).unwrap();
    assert_close(&s.run(&x).unwrap(), &want);
}

#[test]
fn inconsistent_bindings_and_missing_or_stray_bounds_are_errors() {
    let e = common::plugin_engine(false);
    let g = model();
    let mut s = BoundedSession::new(&e, &g, &bounds(8)).unwrap();
    let mut x = inputs(4);
    x[1] = inputs(5).remove(1);
    let err = s.run(&x).unwrap_err().to_string();
    assert!(
        err.contains("'y'") && err.contains("bound it to 4"),
        "{err}"
    );

    let err = BoundedSession::new(&e, &g, &BTreeMap::new())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("'n'") && err.contains("no declared bound"),
        "{err}"
    );

    let mut stray = bounds(8);
    stray.insert("seq".into(), 4);
    let err = BoundedSession::new(&e, &g, &stray)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("'seq'"), "{err}");
}
