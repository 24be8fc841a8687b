//! If and Loop on the reference interpreter.

use baton_delegate_api::ir::{Dim, Graph, GraphBuilder};

use super::super::run_graph;
use super::*;

fn bool_t(v: &[u8]) -> Tensor {
    Tensor::from_bytes(DType::Bool, &[v.len()], v)
}

/// `x + k` (then) or `x * k` (else), with `x` captured from outside.
fn choose() -> Graph {
    let branch = |op| {
        let mut b = GraphBuilder::new("branch");
        let x = b.input_fixed("x", DType::F32, &[2]);
        let k = b.constant_f32("k", &[2], &[10.0, 3.0]);
        let y = b.node(op, &[x, k], &[]).unwrap();
        b.output(y);
        b.finish().unwrap()
    };
    let mut b = GraphBuilder::new("choose");
    let c = b.input("c", DType::Bool, &[Dim::Sym("c_len".into())]);
    let x = b.input_fixed("x", DType::F32, &[2]);
    let y = b
        .node(
            OpKind::If,
            &[c, x],
            &[
                ("then_branch", Attr::Graph(Box::new(branch(OpKind::Add)))),
                ("else_branch", Attr::Graph(Box::new(branch(OpKind::Mul)))),
            ],
        )
        .unwrap();
    b.output(y);
    b.finish().unwrap()
}

#[test]
fn if_runs_the_branch_its_condition_picks() {
    let g = choose();
    let x = Tensor::from_f32(&[2], &[1.0, -2.0]);
    let then = run_graph(&g, &[bool_t(&[1]), x.clone()]).unwrap();
    assert_eq!(then[0].f32s(), &[11.0, 1.0]);
    let other = run_graph(&g, &[bool_t(&[0]), x.clone()]).unwrap();
    assert_eq!(other[0].f32s(), &[10.0, -6.0]);
    let err = run_graph(&g, &[bool_t(&[1, 1]), x])
        .unwrap_err()
        .to_string();
    assert!(err.contains("one bool"), "{err}");
}

/// Sums `step` into `acc` while `acc < limit` (the body's condition), at most `M` times;
/// the scan output is `acc` before each step.
fn accumulate() -> Graph {
    let mut body = GraphBuilder::new("body");
    let i = body.input_fixed("i", DType::I64, &[]);
    let _cond = body.input_fixed("cond", DType::Bool, &[]);
    let acc = body.input_fixed("acc", DType::F32, &[1]);
    let step = body.input_fixed("step", DType::F32, &[1]);
    let limit = body.constant_f32("limit", &[1], &[4.5]);
    let next = body.node(OpKind::Add, &[acc, step], &[]).unwrap();
    let go = body.node(OpKind::Less, &[next, limit], &[]).unwrap();
    let go = body
        .node(OpKind::Squeeze, &[go], &[("axes", Attr::Ints(vec![0]))])
        .unwrap();
    body.output(go);
    body.output(next);
    body.output(acc);
    body.output(i);
    let body = body.finish().unwrap();

    let mut b = GraphBuilder::new("accumulate");
    let m = b.input("m", DType::I64, &[Dim::Sym("m_len".into())]);
    let c = b.input("c", DType::Bool, &[Dim::Sym("c_len".into())]);
    let acc = b.input_fixed("acc", DType::F32, &[1]);
    let step = b.input_fixed("step", DType::F32, &[1]);
    let outs = b
        .named_node_outputs(
            "loop",
            OpKind::Loop,
            &[m, c, acc, step],
            &[
                ("body", Attr::Graph(Box::new(body))),
                ("captures", Attr::Int(1)),
            ],
            3,
        )
        .unwrap();
    for o in outs {
        b.output(o);
    }
    b.finish().unwrap()
}

#[test]
fn loop_runs_until_its_trip_count_or_its_condition_ends_it() {
    let g = accumulate();
    let run = |m: &[i64], c: &[u8]| {
        let m = Tensor::from_i64(&[m.len()], m);
        let c = bool_t(c);
        let acc = Tensor::from_f32(&[1], &[0.0]);
        let step = Tensor::from_f32(&[1], &[1.0]);
        run_graph(&g, &[m, c, acc, step]).unwrap()
    };
    // M = 2 ends it first.
    let r = run(&[2], &[1]);
    assert_eq!(r[0].f32s(), &[2.0]);
    assert_eq!(
        (r[1].shape.clone(), r[1].f32s().to_vec()),
        (vec![2, 1], vec![0.0, 1.0])
    );
    assert_eq!(r[2].values::<i64>(), &[0, 1]);
    // No M: the body's condition (acc + 1 < 4.5) ends it after the step reaching 5.
    let r = run(&[], &[]);
    assert_eq!(r[0].f32s(), &[5.0]);
    assert_eq!(r[1].f32s(), &[0.0, 1.0, 2.0, 3.0, 4.0]);
    // A false initial condition runs nothing: the carried value is the initial one and the
    // scans are empty, shaped as the body declares them.
    let r = run(&[10], &[0]);
    assert_eq!(r[0].f32s(), &[0.0]);
    assert_eq!(r[1].shape, vec![0, 1]);
    assert_eq!(r[2].shape, vec![0]);
}
