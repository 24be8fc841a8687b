//! `Session::check` (`baton run --check`) on real plugins: an honest one is within the
//! kit's tolerance everywhere; one that writes NaN is past it, and the first node past
//! tolerance is found by running prefixes of its partition.

mod common;

use std::collections::BTreeMap;

use baton_delegate_api::{DType, GraphBuilder, OpKind, Tensor};
use baton_runtime_host::{sample, Config, Engine, Session};
use common::{config, plugin, q};

fn engine(body: &str) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::load(&config(dir.path(), body)).unwrap();
    (dir, Engine::new(cfg).unwrap())
}

#[test]
fn the_cpu_plugin_is_within_the_kit_tolerance_on_every_partition() {
    let body = format!("[[plugin]]\npath = {}\n", q(&plugin("baton_backend_cpu")));
    let (_d, e) = engine(&body);
    let graph = sample::tinynet();
    let inputs = vec![sample::tinynet_input()];
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let report = s.check(&inputs).unwrap();
    assert_eq!(report.len(), s.plan.partitions.len());
    assert!(!report.is_empty());
    for p in &report {
        assert_eq!(p.backend, "cpu");
        assert!(p.passed(), "{p:?}");
        assert!(p.first_node_past.is_none());
        for o in &p.outputs {
            assert!(o.elements > 0 && o.max_abs < 1e-4, "{o:?}");
        }
    }
}

#[test]
fn nan_outputs_are_past_tolerance_and_the_first_node_is_named() {
    // x -> Relu -> Add(y) -> Relu -> Add(y): one partition of four nodes on the faulty
    // plugin, which writes NaN on every graph but its probe's.
    let mut b = GraphBuilder::new("chain");
    let x = b.input_fixed("x", DType::F32, &[2, 5]);
    let y = b.input_fixed("y", DType::F32, &[2, 5]);
    let r1 = b.named_node("first_relu", OpKind::Relu, &[x], &[]).unwrap();
    let a1 = b
        .named_node("first_add", OpKind::Add, &[r1, y], &[])
        .unwrap();
    let r2 = b
        .named_node("second_relu", OpKind::Relu, &[a1], &[])
        .unwrap();
    let a2 = b
        .named_node("second_add", OpKind::Add, &[r2, y], &[])
        .unwrap();
    b.output(a2);
    let graph = b.finish().unwrap();
    let xs: Vec<f32> = (0..10).map(|i| i as f32 - 4.5).collect();
    let inputs = vec![
        Tensor::from_f32(&[2, 5], &xs),
        Tensor::from_f32(&[2, 5], &xs),
    ];
    let body = format!(
        "[[plugin]]\npath = {}\noptions = {{ action = \"nan\", at = \"execute\", when = \"after-probe\" }}\n",
        q(&plugin("baton_faulty_plugin"))
    );
    let (_d, e) = engine(&body);
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    assert_eq!(s.plan.partitions.len(), 1, "{}", s.plan.render(&s.graph));
    let report = s.check(&inputs).unwrap();
    let p = &report[0];
    assert_eq!((p.backend.as_str(), p.nodes), ("faulty", 4));
    assert!(!p.passed());
    assert_eq!(p.outputs[0].past, 10, "{:?}", p.outputs[0]);
    let first = p
        .first_node_past
        .as_ref()
        .expect("a first node past tolerance");
    assert_eq!((first.node.as_str(), first.position), ("first_relu", 0));
    assert_eq!(first.op, "Relu");
}

#[test]
fn a_quiet_precision_loss_inside_a_partition_is_narrowed_to_its_node() {
    // x -> Relu -> Relu -> Add(y) -> Relu: one partition of four nodes on the faulty plugin
    // with `drift`, whose Add keeps bfloat16's 8 significant bits while its Relu is exact.
    // The partition's output is past tolerance by a small relative error (no NaN, nothing
    // that a crash test would see), and the first node past is the Add, third of four:
    // the prefixes of one and two Relus are exact.
    let mut b = GraphBuilder::new("residual");
    let x = b.input_fixed("x", DType::F32, &[4, 8]);
    let y = b.input_fixed("y", DType::F32, &[4, 8]);
    let r1 = b.named_node("relu_a", OpKind::Relu, &[x], &[]).unwrap();
    let r2 = b.named_node("relu_b", OpKind::Relu, &[r1], &[]).unwrap();
    let add = b
        .named_node("residual_add", OpKind::Add, &[r2, y], &[])
        .unwrap();
    let out = b.named_node("relu_out", OpKind::Relu, &[add], &[]).unwrap();
    b.output(out);
    let graph = b.finish().unwrap();
    // Values with more significant bits than bfloat16 keeps, all positive after the Add.
    let xs: Vec<f32> = (0..32).map(|i| 1.0 + i as f32 * 0.123_456_7).collect();
    let ys: Vec<f32> = (0..32).map(|i| 0.5 + i as f32 * 0.010_203_04).collect();
    let inputs = vec![
        Tensor::from_f32(&[4, 8], &xs),
        Tensor::from_f32(&[4, 8], &ys),
    ];
    let body = format!(
        "[[plugin]]\npath = {}\noptions = {{ action = \"drift\", at = \"execute\", when = \"after-probe\" }}\n",
        q(&plugin("baton_faulty_plugin"))
    );
    let (_d, e) = engine(&body);
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    assert_eq!(s.plan.partitions.len(), 1, "{}", s.plan.render(&s.graph));
    let report = s.check(&inputs).unwrap();
    let p = &report[0];
    assert_eq!((p.backend.as_str(), p.nodes), ("faulty", 4));
    assert!(!p.passed(), "{p:?}");
    let o = &p.outputs[0];
    // bfloat16 rounding: a relative error of at most 2^-8 (half of an 8-bit ulp), far
    // above the f32 tolerance.
    assert!(o.max_rel > 1e-4 && o.max_rel <= 1.0 / 256.0, "{o:?}");
    assert!(o.max_abs.is_finite() && o.past > 0, "{o:?}");
    let first = p
        .first_node_past
        .as_ref()
        .expect("a first node past tolerance");
    assert_eq!((first.node.as_str(), first.position), ("residual_add", 2));
    assert_eq!(first.op, "Add");
}
