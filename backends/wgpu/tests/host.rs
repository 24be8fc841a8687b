//! The wgpu plugin through the host: loaded as a cdylib, handshaken, probed; and, with
//! no usable device, refused with its reason so that the host falls back to the CPU.

mod common;

use std::collections::BTreeMap;

use baton_delegate_api::ir::{DType, Graph, GraphBuilder, OpKind};
use baton_delegate_api::testing::Rng;
use baton_delegate_api::Tensor;
use baton_reference as reference;
use baton_runtime_host::{Config, Engine, Session};

fn engine(wgpu_options: &str) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "cache_dir = {:?}\n[[plugin]]\npath = {:?}\npriority = 0\noptions = {{ {wgpu_options} }}\n\
         [[plugin]]\npath = {:?}\npriority = 1\n",
        dir.path().join("cache").display().to_string(),
        common::plugin_path().display().to_string(),
        cpu_plugin_path().display().to_string(),
    );
    let path = dir.path().join("baton.toml");
    std::fs::write(&path, body).unwrap();
    let e = Engine::new(Config::load(&path).unwrap()).unwrap();
    (dir, e)
}

/// The CPU plugin, built beside the wgpu one (the host links no backend of its own).
fn cpu_plugin_path() -> std::path::PathBuf {
    common::plugin_path().with_file_name(format!(
        "{}baton_backend_cpu{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
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
    assert!(e.backends.iter().all(|b| b.name != "wgpu"));
    let failed = e
        .failed
        .iter()
        .find(|f| f.label.contains("wgpu"))
        .expect("the wgpu plugin is recorded as failed");
    let why = failed.error.to_string();
    assert!(
        why.contains("no wgpu adapter") && why.contains("no-such-gpu"),
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
fn a_wgpu_adapter_passes_the_probe_and_runs_the_partition() {
    if common::plugin().is_none() {
        return;
    }
    let (_d, e) = engine("");
    let vk = e
        .backends
        .iter()
        .find(|b| b.name == "wgpu")
        .expect("wgpu loaded");
    assert!(vk.verdict.passed, "probe: {}", vk.verdict.detail);
    assert!(!vk.device.driver_version.is_empty());
    let (g, inputs) = mlp();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert_eq!(
        s.nodes_per_backend().get("wgpu"),
        Some(&3),
        "{}",
        s.plan.render(&s.graph)
    );
    assert_matches_reference(&mut s, &g, &inputs);
}
