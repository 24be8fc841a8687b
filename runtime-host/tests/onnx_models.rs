//! Real models exported from PyTorch (`shared/peers/models`, beside the repository): each is
//! imported, run on the reference kernels alone and with the CPU plugin, and compared with
//! the outputs eager PyTorch gave (which ONNX Runtime, ExecuTorch and tract matched within
//! 2e-6).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_delegate_api::{Dim, Tensor};
use baton_runtime_host::config::PluginConfig;
use baton_runtime_host::{model, npy, Config, Engine, Session};

/// Element-wise tolerance: |got - want| <= ABS + REL * |want|.
const ABS: f64 = 1e-4;
const REL: f64 = 1e-4;

fn models_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/models");
    assert!(
        d.is_dir(),
        "{} is missing: the peer models live in shared/ beside the repository",
        d.display()
    );
    d
}

fn engine(with_cpu: bool) -> Engine {
    let mut cfg = Config {
        cache_dir: Some(std::env::temp_dir().join("baton-test-cache")),
        ..Config::default()
    };
    if with_cpu {
        cfg.plugins.push(PluginConfig {
            builtin: Some("cpu".into()),
            ..Default::default()
        });
    }
    Engine::new(cfg).unwrap()
}

/// Runs `name` and returns the worst error relative to the tolerance, per output.
fn run_model(name: &str, with_cpu: bool) -> Vec<(String, f64)> {
    let dir = models_dir().join(name);
    let graph = model::load(&dir.join(format!("{name}.onnx"))).unwrap_or_else(|e| panic!("{e}"));
    let mut inputs = Vec::new();
    let mut bindings = BTreeMap::new();
    for &t in &graph.inputs {
        let decl = &graph.tensors[t];
        let x = npy::read(&dir.join(format!("input_{}.npy", decl.name))).unwrap();
        for (d, &v) in decl.shape.iter().zip(&x.shape) {
            if let Dim::Sym(s) = d {
                bindings.insert(s.clone(), v);
            }
        }
        inputs.push(x);
    }
    let engine = engine(with_cpu);
    let mut session =
        Session::new(&engine, &graph, &bindings).unwrap_or_else(|e| panic!("{name}: {e}"));
    let outputs = session
        .run(&inputs)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut report = Vec::new();
    for (&t, got) in session.graph.outputs.iter().zip(&outputs) {
        let oname = session.graph.tensors[t].name.clone();
        let want = npy::read(&dir.join(format!("expected_{oname}.npy"))).unwrap();
        let max_abs = got
            .to_f64()
            .iter()
            .zip(want.to_f64())
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f64::max);
        eprintln!("  {name} {oname}: max abs error {max_abs:.2e}");
        report.push((oname, worst(got, &want)));
    }
    eprintln!(
        "{name} ({}): {report:?}, nodes per target {:?}",
        if with_cpu { "cpu plugin" } else { "reference" },
        session.nodes_per_backend()
    );
    report
}

/// The largest |got - want| / (ABS + REL |want|): at most 1 passes.
fn worst(got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.shape, want.shape);
    got.to_f64()
        .iter()
        .zip(want.to_f64())
        .map(|(g, w)| {
            let e = (g - w).abs() / (ABS + REL * w.abs());
            if e.is_nan() {
                f64::INFINITY
            } else {
                e
            }
        })
        .fold(0.0, f64::max)
}

fn check(name: &str) {
    for with_cpu in [false, true] {
        for (output, e) in run_model(name, with_cpu) {
            assert!(
                e <= 1.0,
                "{name} output {output}: error {e} x tolerance (cpu plugin: {with_cpu})"
            );
        }
    }
}

#[test]
fn mobilenet_tiny_matches_pytorch() {
    check("mobilenet_tiny");
}

#[test]
fn transformer_enc2_matches_pytorch() {
    check("transformer_enc2");
}

#[test]
fn stream_asr_matches_pytorch() {
    check("stream_asr");
}
