//! Dynamic regions: a model whose shapes depend on tensor values runs in stages (a
//! static prefix, the value-dependent node on a plugin that takes bounded outputs or on
//! the host, the rest specialised per shape and cached), through the plain `Session` a
//! user gets.

mod common;
#[path = "common/nonzero_model.rs"]
mod nonzero_model;

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, DType, GraphBuilder, OpKind, Tensor};
use baton_runtime_host::{model, Session};
use nonzero_model::SIDE;

#[test]
fn nonzero_on_a_large_input_runs_in_stages_and_reuses_a_shape_seen_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nonzero.onnx");
    nonzero_model::write(&path);
    let graph = model::load(&path).unwrap();
    let engine = common::plugin_engine(true);
    let mut s = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
    assert!(!s.stages().is_empty(), "the model is staged");
    let mut compiled = Vec::new();
    // Two counts, then the first again: the third run's shapes were seen by the first.
    for (stride, offset) in [(5, 1), (3, 0), (5, 1)] {
        let x = nonzero_model::input(stride, offset);
        let got = s.run(&[Tensor::from_f32(&[SIDE, SIDE], &x)]).unwrap();
        let (coords, y) = nonzero_model::expected(&x);
        assert_eq!(got[0].shape, [2, coords.len() / 2]);
        assert_eq!(got[0].values::<i64>(), &coords[..]);
        assert_eq!(got[1].f32s(), &y[..]);
        // The reference interpreter agrees.
        let oracle =
            baton_reference::run_graph(&graph, &[Tensor::from_f32(&[SIDE, SIDE], &x)]).unwrap();
        assert_eq!(oracle[1].f32s(), &y[..]);
        compiled.push(s.stages()[0].counts);
    }
    assert_eq!(compiled[0].compiled, 1);
    assert_eq!(
        compiled[1].compiled, 2,
        "a new count compiles the rest again"
    );
    assert_eq!(
        compiled[2].compiled, 2,
        "a repeated count reuses its session"
    );
    assert_eq!(compiled[2].reused, 1);
    // The nested stage (the second NonZero) is listed after the first.
    assert_eq!(s.stages().len(), 2, "{:?}", s.stages());
    // The nodes after the dynamic ones were delegated to the CPU plugin.
    assert!(
        s.nodes_per_backend().contains_key("cpu"),
        "{:?}",
        s.nodes_per_backend()
    );
}

#[test]
fn nonzero_of_an_input_with_symbolic_rows_imports_and_runs_for_each_row_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nonzero_rows.onnx");
    nonzero_model::write_symbolic_rows(&path);
    let graph = model::load(&path).unwrap();
    let engine = common::plugin_engine(true);
    for rows in [3usize, 7] {
        // Positive at every fifth element from 1, negative at every fifth from 3.
        let x: Vec<f32> = (0..rows * SIDE)
            .map(|i| match i % 5 {
                1 => i as f32,
                3 => -(i as f32),
                _ => 0.0,
            })
            .collect();
        let dims = BTreeMap::from([("x_n0".to_string(), rows)]);
        let mut s = Session::new(&engine, &graph, &dims).unwrap();
        let got = s.run(&[Tensor::from_f32(&[rows, SIDE], &x)]).unwrap();
        let want = nonzero_model::positive_coords(&x);
        assert_eq!(got[0].shape, [2, want.len() / 2], "rows {rows}");
        assert_eq!(got[0].values::<i64>(), &want[..], "rows {rows}");
    }
}

#[test]
fn compress_mid_graph_splits_a_delegated_prefix_from_a_delegated_rest() {
    // x [100, 4] -> mask = x[:, 0] > 0 -> Compress rows -> MatMul by w [4, 3] -> Relu.
    let mut b = GraphBuilder::new("rows");
    let x = b.input_fixed("x", DType::F32, &[100, 4]);
    let scaled = {
        let two = b.constant_f32("two", &[], &[2.0]);
        b.node(OpKind::Mul, &[x, two], &[]).unwrap()
    };
    let col = {
        let zero = b.constant_i64("col", &[], &[0]);
        b.node(OpKind::Gather, &[scaled, zero], &[("axis", Attr::Int(1))])
            .unwrap()
    };
    let zero = b.constant_f32("zero", &[], &[0.0]);
    let mask = b.node(OpKind::Greater, &[col, zero], &[]).unwrap();
    let rows = b
        .named_node(
            "keep",
            OpKind::Compress,
            &[scaled, mask],
            &[("axis", Attr::Int(0))],
        )
        .unwrap();
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    let w = b.constant_f32("w", &[4, 3], &w);
    let prod = b.node(OpKind::MatMul, &[rows, w], &[]).unwrap();
    let y = b.node(OpKind::Relu, &[prod], &[]).unwrap();
    b.output(y);
    let graph = b.finish().unwrap();
    let engine = common::plugin_engine(true);
    let mut s = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
    let stages = s.stages();
    assert_eq!(stages.len(), 1);
    assert_eq!(stages[0].prefix_nodes, 3);
    assert_eq!(stages[0].rest_nodes, 2);
    for shift in [0.0f32, 0.3, 0.0] {
        let x: Vec<f32> = (0..400)
            .map(|i| ((i * 7) % 13) as f32 / 6.0 - 1.0 + shift)
            .collect();
        let input = Tensor::from_f32(&[100, 4], &x);
        let got = s.run(std::slice::from_ref(&input)).unwrap();
        let want = baton_reference::run_graph(&graph, &[input]).unwrap();
        assert_eq!(got[0].shape, want[0].shape);
        // The plugin's MatMul sums in f32, the reference in f64.
        assert!(common::max_abs_diff(&got[0], &want[0]) < 1e-5);
    }
    let counts = s.stages()[0].counts;
    assert_eq!((counts.compiled, counts.reused), (2, 1));

    // What a user sees of the stages: memory, a timed run, and --check, stage by stage.
    let sessions = s.stage_sessions();
    assert_eq!(sessions.len(), 2, "the prefix and the last rest");
    let (_, arena) = s.held_bytes();
    let stage_arenas: usize = sessions.iter().map(|(_, t)| t.arena_plan.arena_size).sum();
    assert!(stage_arenas > 0);
    assert_eq!(arena, stage_arenas);
    assert_eq!(
        s.delegate_memory().len(),
        sessions
            .iter()
            .map(|(_, t)| t.plan.partitions.len())
            .sum::<usize>()
    );
    // Every third row kept (34): a count no earlier run had, so the rest compiles again
    // inside the timed run.
    let x: Vec<f32> = (0..400)
        .map(|i| if i % 12 == 0 { 1.0 } else { -0.5 })
        .collect();
    let input = Tensor::from_f32(&[100, 4], &x);
    s.set_profiling(true);
    s.run(std::slice::from_ref(&input)).unwrap();
    let steps = s.timeline();
    let names: Vec<&str> = steps.iter().map(|t| t.name.as_str()).collect();
    let at = |n: &str| names.iter().position(|m| m.contains(n));
    let (first, node, last) = (at("partition 0"), at("keep"), at("partition 1"));
    assert!(
        first.is_some() && node.is_some() && last.is_some(),
        "{names:?}"
    );
    let compile = at("compile the rest");
    assert!(
        first < node && node < compile && compile < last,
        "{names:?}"
    );
    // The CPU plugin takes bounded outputs (ABI 1.3): it ran the Compress itself.
    assert_eq!(steps[node.unwrap()].target, "cpu");
    assert_eq!(s.stages()[0].dynamic_target, "cpu");
    assert!(
        !s.nodes_per_backend().contains_key("host"),
        "{:?}",
        s.nodes_per_backend()
    );
    for w in steps.windows(2) {
        assert!(w[0].start_ns <= w[1].start_ns, "one clock: {steps:?}");
    }
    let profiled: Vec<usize> = s.profile().iter().map(|p| p.partition).collect();
    assert_eq!(profiled, [0, 1]);
    let report = s.check(std::slice::from_ref(&input)).unwrap();
    let parts: Vec<usize> = report.iter().map(|c| c.partition).collect();
    assert_eq!(parts, [0, 1], "{report:?}");
    assert!(report.iter().all(|c| c.passed()), "{report:?}");
    assert!(report[1]
        .notes
        .iter()
        .any(|n| n.contains("after the dynamic node keep")));
    // The rest's check ran on this run's rows: its output has one row per positive x[:, 0].
    let kept = (0..100).filter(|&r| x[4 * r] > 0.0).count();
    assert_eq!(report[1].outputs[0].elements, kept * 3);
}

#[test]
fn without_a_plugin_that_takes_bounded_outputs_the_dynamic_node_runs_on_the_host() {
    let mut b = GraphBuilder::new("unique");
    let x = b.input_fixed("x", DType::I64, &[12]);
    let u = b.named_node("distinct", OpKind::Unique, &[x], &[]).unwrap();
    let two = b.constant_i64("two", &[], &[2]);
    let y = b.node(OpKind::Mul, &[u, two], &[]).unwrap();
    b.output(y);
    let graph = b.finish().unwrap();
    let input = Tensor::from_i64(&[12], &[3, 1, 3, 2, 2, 7, 1, 0, 3, 7, 7, 5]);
    let want = baton_reference::run_graph(&graph, std::slice::from_ref(&input)).unwrap();
    assert_eq!(want[0].values::<i64>(), &[0, 2, 4, 6, 10, 14]);
    for with_cpu in [true, false] {
        let engine = common::plugin_engine(with_cpu);
        let mut s = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
        let got = s.run(std::slice::from_ref(&input)).unwrap();
        assert_eq!(got[0].shape, want[0].shape);
        assert_eq!(got[0].values::<i64>(), want[0].values::<i64>());
        let target = &s.stages()[0].dynamic_target;
        if with_cpu {
            assert_eq!(target, "cpu");
        } else {
            assert!(target.starts_with("host ("), "{target}");
        }
    }
}
