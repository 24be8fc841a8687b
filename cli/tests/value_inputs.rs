//! Value inputs through the CLI, as a user runs them: a ReduceSum whose axes are a model
//! input, given as an `.npy` file to `baton run`, `baton plan` and a compiled program.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use baton_delegate_api::ir::TensorDecl;
use baton_delegate_api::{wire, Attr, DType, Dim, Graph, Node, OpKind, Tensor};
use baton_runtime_host::npy;
use support::baton;

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn decl(name: &str, dtype: DType, shape: Vec<Dim>) -> TensorDecl {
    TensorDecl {
        name: name.into(),
        dtype,
        shape,
        quant: None,
        data: None,
    }
}

/// `y = ReduceSum(x [2,3,4], axes [n], keepdims=1)`, written as `dir/reduce.btir`. The
/// output's shape is provisional: it is known once the axes' values are.
fn model(dir: &Path) -> PathBuf {
    let g = Graph {
        name: "reduce".into(),
        tensors: vec![
            decl(
                "x",
                DType::F32,
                vec![Dim::Fixed(2), Dim::Fixed(3), Dim::Fixed(4)],
            ),
            decl("axes", DType::I64, vec![Dim::Sym("n".into())]),
            decl("y", DType::F32, vec![Dim::Sym("y?".into())]),
        ],
        nodes: vec![Node {
            name: "sum".into(),
            op: OpKind::ReduceSum,
            inputs: vec![0, 1],
            outputs: vec![2],
            attrs: BTreeMap::from([("keepdims".to_string(), Attr::Int(1))]),
        }],
        inputs: vec![0, 1],
        outputs: vec![2],
    };
    let (bytes, _) = wire::encode(&g, wire::ConstMode::Inline);
    let path = dir.join("reduce.btir");
    std::fs::write(&path, bytes).unwrap();
    path
}

fn x_values() -> Vec<f32> {
    (0..24).map(|i| i as f32 - 7.0).collect()
}

/// Writes `x.npy` and `axes-{tag}.npy`; returns the two `--input` arguments.
fn inputs(dir: &Path, axes: &[i64], tag: &str) -> [String; 2] {
    let x = dir.join("x.npy");
    npy::write(&x, &Tensor::from_f32(&[2, 3, 4], &x_values())).unwrap();
    let a = dir.join(format!("axes-{tag}.npy"));
    npy::write(&a, &Tensor::from_i64(&[axes.len()], axes)).unwrap();
    [
        format!("x={}", x.display()),
        format!("axes={}", a.display()),
    ]
}

/// ReduceSum of `x_values()` as `[2,3,4]` over `axes`, keepdims, computed here.
fn expected(axes: &[usize]) -> (Vec<usize>, Vec<f32>) {
    let v = x_values();
    let mut dims = [2usize, 3, 4];
    for &a in axes {
        dims[a] = 1;
    }
    let mut out = vec![0.0f32; dims.iter().product()];
    for (flat, &x) in v.iter().enumerate() {
        let mut o = [flat / 12, flat / 4 % 3, flat % 4];
        for &a in axes {
            o[a] = 0;
        }
        out[(o[0] * dims[1] + o[1]) * dims[2] + o[2]] += x;
    }
    (dims.to_vec(), out)
}

fn run(dir: &Path, model: &Path, args: &[String], out: &str) -> (Output, PathBuf) {
    let out_dir = dir.join(out);
    let mut all = vec!["run".to_string(), model.display().to_string()];
    for a in args {
        all.push("--input".into());
        all.push(a.clone());
    }
    all.push("--output-dir".into());
    all.push(out_dir.display().to_string());
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    (baton(&refs, dir), out_dir.join("y.npy"))
}

#[test]
fn baton_run_takes_the_axes_from_a_file_and_each_value_gives_its_own_result() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    for (axes, norm, tag) in [
        (&[1i64][..], &[1usize][..], "a"),
        (&[0, -1][..], &[0, 2][..], "b"),
    ] {
        let (o, y) = run(dir.path(), &m, &inputs(dir.path(), axes, tag), tag);
        assert!(o.status.success(), "{}", text(&o));
        let got = npy::read(&y).unwrap();
        let (shape, want) = expected(norm);
        assert_eq!(got.shape, shape, "axes {axes:?}");
        assert_eq!(got.f32s(), want, "axes {axes:?}");
    }
}

#[test]
fn a_missing_value_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    let [x, _] = inputs(dir.path(), &[1], "a");
    let (o, _) = run(dir.path(), &m, std::slice::from_ref(&x), "out");
    assert!(!o.status.success());
    assert!(text(&o).contains("missing input 'axes'"), "{}", text(&o));
    // `baton plan` needs no data input, but does need the values that decide shapes.
    let o = baton(&["plan", m.to_str().unwrap(), "--dim", "n=1"], dir.path());
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("input 'axes'") && t.contains("decide shapes"),
        "{t}"
    );
    // `baton bench` makes up the inputs not given, but not values that decide shapes.
    let o = baton(&["bench", m.to_str().unwrap(), "--input", &x], dir.path());
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("input 'axes' decides shapes"), "{t}");
}

#[test]
fn baton_plan_specialises_for_the_values_given() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    let [_, axes] = inputs(dir.path(), &[0, 1, 2], "all");
    let o = baton(&["plan", m.to_str().unwrap(), "--input", &axes], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ReduceSum"), "{}", text(&o));
}

#[test]
fn a_compiled_program_keeps_the_value_input_and_runs_each_value() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    let prog = dir.path().join("reduce.baton");
    let o = baton(
        &["compile", m.to_str().unwrap(), "-o", prog.to_str().unwrap()],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("value inputs axes"), "{}", text(&o));
    for (axes, norm, tag) in [(&[2i64][..], &[2usize][..], "c"), (&[0][..], &[0][..], "d")] {
        let (o, y) = run(dir.path(), &prog, &inputs(dir.path(), axes, tag), tag);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(npy::read(&y).unwrap().f32s(), expected(norm).1);
    }
}
