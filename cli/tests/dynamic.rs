//! Dynamic regions through the CLI, as a user runs them: `baton run MODEL --input
//! x=x.npy` on a model whose shapes depend on values (NonZero on 256 elements), with the
//! CPU plugin, and `baton plan` showing the stages.

mod support;

#[path = "../../runtime-host/tests/common/nonzero_model.rs"]
mod nonzero_model;

use std::path::{Path, PathBuf};
use std::process::Output;

use baton_delegate_api::Tensor;
use baton_runtime_host::npy;
use nonzero_model::SIDE;
use support::baton;

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `baton run MODEL --input x=x-TAG.npy` with `x` `[rows, SIDE]`; returns its output dir.
fn run_to(model: &Path, dir: &Path, tag: &str, rows: usize, x: &[f32]) -> PathBuf {
    let input = dir.join(format!("x-{tag}.npy"));
    npy::write(&input, &Tensor::from_f32(&[rows, SIDE], x)).unwrap();
    let out = dir.join(format!("out-{tag}"));
    let o = baton(
        &[
            "run",
            model.to_str().unwrap(),
            "--input",
            &format!("x={}", input.display()),
            "--output-dir",
            out.to_str().unwrap(),
        ],
        &dir.join("cache"),
    );
    assert!(o.status.success(), "{}", text(&o));
    out
}

fn run(model: &Path, dir: &Path, tag: &str, x: &[f32]) -> (Tensor, Tensor) {
    let out = run_to(model, dir, tag, SIDE, x);
    (
        npy::read(&out.join("coords.npy")).unwrap(),
        npy::read(&out.join("y.npy")).unwrap(),
    )
}

#[test]
fn baton_run_gives_each_count_of_non_zeros_its_own_shape() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("nonzero.onnx");
    nonzero_model::write(&model);
    for (tag, stride, offset) in [("a", 5, 1), ("b", 3, 0), ("none", 1000, 999)] {
        let x = nonzero_model::input(stride, offset);
        let (coords, y) = run(&model, dir.path(), tag, &x);
        let (want_coords, want_y) = nonzero_model::expected(&x);
        assert_eq!(coords.shape, [2, want_coords.len() / 2], "{tag}");
        assert_eq!(coords.values::<i64>(), &want_coords[..], "{tag}");
        assert_eq!(y.f32s(), &want_y[..], "{tag}");
        // The reference interpreter on the same model agrees.
        let graph = baton_runtime_host::model::load(&model).unwrap();
        let oracle =
            baton_reference::run_graph(&graph, &[Tensor::from_f32(&[SIDE, SIDE], &x)]).unwrap();
        assert_eq!(oracle[0].values::<i64>(), coords.values::<i64>(), "{tag}");
        assert_eq!(oracle[1].f32s(), y.f32s(), "{tag}");
    }
}

#[test]
fn baton_plan_shows_which_part_is_dynamic() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("nonzero.onnx");
    nonzero_model::write(&model);
    let o = baton(
        &["plan", model.to_str().unwrap()],
        &dir.path().join("cache"),
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("dynamic regions: the model runs in 3 stages"),
        "{t}"
    );
    // The CPU delegate takes bounded outputs (ABI 1.3): it runs the Compress itself.
    assert!(t.contains("(Compress) runs on cpu (dynamic"), "{t}");
    assert!(
        t.contains("planned and compiled per shape seen at run time"),
        "{t}"
    );
}

#[test]
fn baton_run_takes_nonzero_of_an_input_whose_rows_are_symbolic() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("nonzero_rows.onnx");
    nonzero_model::write_symbolic_rows(&model);
    let rows = 5;
    let x: Vec<f32> = (0..rows * SIDE)
        .map(|i| if i % 7 == 2 { 1.5 } else { -1.0 })
        .collect();
    let out = run_to(&model, dir.path(), "rows", rows, &x);
    let coords = npy::read(&out.join("coords.npy")).unwrap();
    let want = nonzero_model::positive_coords(&x);
    assert_eq!(coords.shape, [2, want.len() / 2]);
    assert_eq!(coords.values::<i64>(), &want[..]);
}

#[test]
fn profile_trace_and_check_cover_every_stage() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("nonzero.onnx");
    nonzero_model::write(&model);
    let input = dir.path().join("x.npy");
    let x = nonzero_model::input(5, 1);
    npy::write(&input, &Tensor::from_f32(&[SIDE, SIDE], &x)).unwrap();
    let trace = dir.path().join("trace.json");
    let o = baton(
        &[
            "run",
            model.to_str().unwrap(),
            "--input",
            &format!("x={}", input.display()),
            "--profile",
            "--trace",
            trace.to_str().unwrap(),
            "--check",
        ],
        &dir.path().join("cache"),
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // The dynamic nodes ran on the CPU delegate (bounded outputs), none on the host.
    assert!(!t.contains("host (dynamic)"), "{t}");
    assert!(t.contains("compile the rest after"), "{t}");
    assert!(!t.contains("no delegated partitions"), "{t}");
    assert!(t.contains("compiled for this run's shapes"), "{t}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let names: Vec<&str> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(
        names
            .iter()
            .filter(|n| n.ends_with("/selected (Compress)"))
            .count()
            == 2,
        "both dynamic nodes (each NonZero's Compress) are in the trace: {names:?}"
    );
}
