//! Real models exported from PyTorch (`shared/peers/models`, beside the repository): each is
//! imported, run on the reference kernels alone and with the CPU plugin, and compared with
//! the outputs eager PyTorch gave (which ONNX Runtime, ExecuTorch and tract matched within
//! 2e-6).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_delegate_api::{Dim, Tensor};
use baton_runtime_host::{model, npy, Session};

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
    let engine = common::plugin_engine(with_cpu);
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

/// stream_asr as a stream: `h0`/`c0` carried from `h1`/`c1`. Two steps through the stream
/// equal two explicit runs feeding the state by hand, and a failed step (a wrong input)
/// leaves the state as it was.
#[test]
fn stream_asr_streams_its_lstm_state() {
    let dir = models_dir().join("stream_asr");
    let graph = model::load(&dir.join("stream_asr.onnx")).unwrap();
    let feats = npy::read(&dir.join("input_feats.npy")).unwrap();
    let h0 = npy::read(&dir.join("input_h0.npy")).unwrap();
    let c0 = npy::read(&dir.join("input_c0.npy")).unwrap();
    let engine = common::plugin_engine(true);

    // By hand: run, then feed h1/c1 back as h0/c0.
    let mut plain = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
    let first = plain.run(&[feats.clone(), h0.clone(), c0.clone()]).unwrap();
    let second = plain
        .run(&[feats.clone(), first[1].clone(), first[2].clone()])
        .unwrap();

    let mut session = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
    let mut stream = session.stream(&[("h0", "h1"), ("c0", "c1")]).unwrap();
    stream.set_state("h0", h0).unwrap();
    stream.set_state("c0", c0).unwrap();
    let s1 = stream.step(std::slice::from_ref(&feats)).unwrap();
    assert_eq!(
        s1.len(),
        1,
        "only logprobs is returned; the state stays inside"
    );
    assert_eq!(s1[0].bytes(), first[0].bytes());
    let before = stream.state("h0").unwrap().clone();
    let bad = Tensor::from_f32(&[1, 2], &[0.0, 0.0]);
    let err = stream.step(&[bad]).unwrap_err().to_string();
    assert!(err.contains("feats"), "{err}");
    assert_eq!(
        stream.state("h0").unwrap().bytes(),
        before.bytes(),
        "a failed step keeps the state"
    );
    let s2 = stream.step(std::slice::from_ref(&feats)).unwrap();
    assert_eq!(s2[0].bytes(), second[0].bytes());
    assert_eq!(stream.state("h0").unwrap().bytes(), second[1].bytes());
    assert_ne!(
        s2[0].bytes(),
        s1[0].bytes(),
        "the carried state changes the output"
    );
}
