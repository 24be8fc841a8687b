// A GPU delegate's plugin through the host: loaded as a cdylib, handshaken, probed; and,
// with no usable device, refused with its reason so that the host falls back to the CPU.
// `include!`d by each delegate's tests/host.rs after `mod common;` (whose `BACKEND`,
// `NO_DEVICE` and `EARLY_FAILURE` it reads), so every GPU delegate is held to the same.

use std::collections::BTreeMap;

use baton_delegate_api::ir::{DType, Graph, GraphBuilder, OpKind};
use baton_delegate_api::testing::Rng;
use baton_delegate_api::Tensor;
use baton_reference as reference;
use baton_runtime_host::{Config, Engine, Session};
use common::{BACKEND, EARLY_FAILURE, NO_DEVICE};

/// An engine with the GPU plugin (with `options`) first and the CPU plugin second.
fn engine(options: &str) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "cache_dir = {:?}\n[[plugin]]\npath = {:?}\npriority = 0\noptions = {{ {options} }}\n\
         [[plugin]]\npath = {:?}\npriority = 1\n",
        dir.path().join("cache").display().to_string(),
        common::plugin_path().display().to_string(),
        // The host links no backend of its own: the CPU plugin is built beside this one.
        common::sibling_plugin("baton_backend_cpu")
            .display()
            .to_string(),
    );
    let path = dir.path().join("baton.toml");
    std::fs::write(&path, body).unwrap();
    let e = Engine::new(Config::load(&path).unwrap()).unwrap();
    (dir, e)
}

fn mlp() -> (Graph, Vec<Tensor>) {
    let mut r = Rng::new(42);
    let mut b = GraphBuilder::new("mlp");
    let x = b.input_fixed("x", DType::F32, &[4, 16]);
    let w = b.constant_f32("w", &[16, 8], &r.vec(128));
    let m = b.node(OpKind::MatMul, &[x, w], &[]).unwrap();
    let a = b.node(OpKind::Relu, &[m], &[]).unwrap();
    let s = b.node(OpKind::Softmax, &[a], &[]).unwrap();
    b.output(s);
    (b.finish().unwrap(), vec![r.f32_tensor(&[4, 16])])
}

fn assert_matches_reference(s: &mut Session, g: &Graph, inputs: &[Tensor]) {
    let got = s.run(inputs).unwrap();
    let want = reference::run_graph(g, inputs).unwrap();
    for (x, y) in got[0].f32s().iter().zip(want[0].f32s()) {
        assert!((x - y).abs() <= 1e-5, "got {x}, expected {y}");
    }
}

#[test]
fn with_no_matching_device_the_host_falls_back_to_the_cpu() {
    let (_d, e) = engine("device_filter = \"no-such-gpu\"");
    assert!(e.backends.iter().all(|b| b.name != BACKEND));
    let failed = e
        .failed
        .iter()
        .find(|f| f.label.contains(BACKEND))
        .expect("the GPU plugin is recorded as failed");
    let why = failed.error.to_string();
    // On a machine without the plugin's runtime it fails one step earlier, with its own
    // reason; the fallback checked below is the same. CI (BATON_REQUIRE_VULKAN=1, lavapipe
    // installed) insists on the device filter's reason.
    let early = EARLY_FAILURE.is_some_and(|r| why.contains(r)) && !common::device_required();
    assert!(
        early || (why.contains(NO_DEVICE) && why.contains("no-such-gpu")),
        "{why}"
    );
    let (g, inputs) = mlp();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert_eq!(
        s.nodes_per_backend().get("cpu"),
        Some(&3),
        "{}",
        s.plan.render(&s.graph)
    );
    assert_matches_reference(&mut s, &g, &inputs);
}

#[test]
fn a_device_passes_the_probe_and_runs_the_partition() {
    if common::plugin().is_none() {
        return;
    }
    let (_d, e) = engine("");
    let gpu = e
        .backends
        .iter()
        .find(|b| b.name == BACKEND)
        .expect("the GPU plugin loaded");
    assert!(gpu.verdict.passed, "probe: {}", gpu.verdict.detail);
    assert!(!gpu.device.driver_version.is_empty());
    let (g, inputs) = mlp();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert_eq!(
        s.nodes_per_backend().get(BACKEND),
        Some(&3),
        "{}",
        s.plan.render(&s.graph)
    );
    assert_matches_reference(&mut s, &g, &inputs);
}
