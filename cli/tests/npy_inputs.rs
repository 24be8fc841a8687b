//! `.npy` files of other dtypes than f32 through `baton run` and `baton plan`: an f16
//! model driven from files and writing `<f2` outputs, files fitted to an input's dtype
//! only when exact, and `baton plan --input` binding the dimensions of what it is given.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use baton_delegate_api::{wire, DType, Dim, GraphBuilder, OpKind, Tensor};
use baton_runtime_host::npy;
use support::baton;

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Writes a one-node model `y = op(x)`, `x` of `dtype` and shape `[n, 2]`.
fn model(dir: &Path, op: OpKind, dtype: DType) -> PathBuf {
    let mut b = GraphBuilder::new("m");
    let x = b.input("x", dtype, &[Dim::Sym("n".into()), Dim::Fixed(2)]);
    let y = b.node(op, &[x], &[]).unwrap();
    b.output(y);
    let (bytes, _) = wire::encode(&b.finish().unwrap(), wire::ConstMode::Inline);
    let path = dir.join(format!("{op:?}-{dtype}.btir"));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn file(dir: &Path, name: &str, t: &Tensor) -> String {
    let p = dir.join(name);
    npy::write(&p, t).unwrap();
    format!("x={}", p.display())
}

fn run(dir: &Path, model: &Path, input: &str) -> Output {
    let out = dir.join("out");
    baton(
        &[
            "run",
            model.to_str().unwrap(),
            "--input",
            input,
            "--output-dir",
            out.to_str().unwrap(),
        ],
        dir,
    )
}

#[test]
fn an_f16_model_reads_and_writes_float16_files() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path(), OpKind::Relu, DType::F16);
    let bits: Vec<u16> = [1.5f32, -2.0, 0.25, -0.0]
        .iter()
        .map(|&v| half::f16::from_f32(v).to_bits())
        .collect();
    let x = Tensor::from_bytes(DType::F16, &[2, 2], bytemuck::cast_slice(&bits));
    let o = run(dir.path(), &m, &file(dir.path(), "x.npy", &x));
    assert!(o.status.success(), "{}", text(&o));
    let out = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&out).unwrap();
    assert!(String::from_utf8_lossy(&bytes[..64]).contains("'descr': '<f2'"));
    let y = npy::read(&out).unwrap();
    assert_eq!((y.dtype, y.shape.clone()), (DType::F16, vec![2, 2]));
    assert_eq!(y.to_f64(), vec![1.5, 0.0, 0.25, 0.0]);
}

#[test]
fn a_file_feeds_another_dtype_only_when_exact() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path(), OpKind::Relu, DType::F32);
    // numpy's default float64, holding f32 values: fed.
    let exact = Tensor::from_bytes(DType::F64, &[1, 2], bytemuck::cast_slice(&[0.5f64, -3.0]));
    let o = run(dir.path(), &m, &file(dir.path(), "exact.npy", &exact));
    assert!(o.status.success(), "{}", text(&o));
    // 0.1 rounds in f32: refused, naming the input, the file and both dtypes.
    let inexact = Tensor::from_bytes(DType::F64, &[1, 2], bytemuck::cast_slice(&[0.5f64, 0.1]));
    let o = run(dir.path(), &m, &file(dir.path(), "inexact.npy", &inexact));
    let msg = text(&o);
    assert!(!o.status.success(), "{msg}");
    for part in [
        "inexact.npy",
        "input 'x' is f32",
        "the file holds f64",
        "element 1",
    ] {
        assert!(msg.contains(part), "'{part}' not in: {msg}");
    }
}

#[test]
fn plan_binds_the_dimensions_of_the_inputs_given() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path(), OpKind::Relu, DType::F32);
    let x = file(
        dir.path(),
        "x.npy",
        &Tensor::from_f32(&[3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
    );
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", m.to_str().unwrap()];
        args.extend_from_slice(extra);
        baton(&args, dir.path())
    };
    let o = plan(&["--input", &x]);
    assert!(o.status.success(), "{}", text(&o));
    let o = plan(&["--input", &x, "--dim", "n=3"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = plan(&["--input", &x, "--dim", "n=4"]);
    let msg = text(&o);
    assert!(!o.status.success(), "{msg}");
    assert!(msg.contains("--dim n=4") && msg.contains("n=3"), "{msg}");
    // Without a file or --dim, n is unbound.
    let o = plan(&[]);
    assert!(!o.status.success(), "{}", text(&o));
}
