//! The `baton` command on bad input: every case ends in an error naming what is at fault
//! (a flag, a tensor, an output), never a panic, an abort or a wrong success.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use baton_delegate_api::{wire, DType, Dim, GraphBuilder, OpKind, Tensor};
use support::baton;
use support::common::{config, plugin, q};

/// Exit status and stderr of a run that must fail cleanly: status 1, no panic.
fn fails(o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn save(dir: &Path, name: &str, g: baton_delegate_api::Graph) -> PathBuf {
    let (bytes, _) = wire::encode(&g, wire::ConstMode::Inline);
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn npy(dir: &Path, name: &str, t: &Tensor) -> String {
    let p = dir.join(name);
    baton_runtime_host::npy::write(&p, t).unwrap();
    p.display().to_string()
}

/// `y = x + h`, `z = x + g`: two state inputs, two outputs that could carry them.
fn two_state_model(dir: &Path) -> PathBuf {
    let mut b = GraphBuilder::new("two_states");
    let x = b.input_fixed("x", DType::F32, &[1, 2]);
    let h = b.input_fixed("h", DType::F32, &[1, 2]);
    let g = b.input_fixed("g", DType::F32, &[1, 2]);
    let y = b.named_node("sum_h", OpKind::Add, &[x, h], &[]).unwrap();
    let z = b.named_node("sum_g", OpKind::Add, &[x, g], &[]).unwrap();
    b.rename(y, "y");
    b.rename(z, "z");
    b.output(y);
    b.output(z);
    save(dir, "two.btir", b.finish().unwrap())
}

#[test]
fn stream_refuses_zero_chunks_a_shared_state_output_and_a_stacked_initial_state() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = two_state_model(d);
    let model = model.to_str().unwrap();
    let chunks = npy(d, "x.npy", &Tensor::from_f32(&[3, 1, 2], &[1.0; 6]));
    let none = npy(d, "none.npy", &Tensor::zeros(DType::F32, &[0, 1, 2]));
    let stack = npy(d, "h_stack.npy", &Tensor::from_f32(&[2, 1, 2], &[5.0; 4]));
    let run = |extra: &[&str]| {
        let mut a = vec!["run", model, "--stream"];
        a.extend_from_slice(extra);
        baton(&a, d)
    };
    let states = ["--state", "h=y", "--state", "g=z"];

    let o = run(&[&["--input", &format!("x={none}")], &states[..]].concat());
    let e = fails(&o);
    assert!(e.contains("'x'") && e.contains("no chunks"), "{e}");

    let o = run(&[
        "--input",
        &format!("x={chunks}"),
        "--state",
        "h=y",
        "--state",
        "g=y",
    ]);
    let e = fails(&o);
    assert!(e.contains("'y'") && e.contains("one state"), "{e}");

    let o = run(&[
        &[
            "--input",
            &format!("x={chunks}"),
            "--input",
            &format!("h={stack}"),
        ],
        &states[..],
    ]
    .concat());
    let e = fails(&o);
    assert!(e.contains("'h'") && e.contains("state"), "{e}");

    let o = run(&[&["--input", &format!("x={chunks}")], &states[..]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `y = relu(x)`, `x: f32 [1, seq]`.
fn symbolic_model(dir: &Path) -> PathBuf {
    let mut b = GraphBuilder::new("sym");
    let x = b.input("x", DType::F32, &[Dim::Fixed(1), Dim::Sym("seq".into())]);
    let y = b.node(OpKind::Relu, &[x], &[]).unwrap();
    b.output(y);
    save(dir, "sym.btir", b.finish().unwrap())
}

#[test]
fn a_dim_the_model_does_not_have_is_refused_by_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = symbolic_model(d);
    let model = model.to_str().unwrap();
    let out = d.join("o.baton");
    let runs: [Vec<&str>; 3] = [
        vec!["plan", model, "--dim", "nope=4"],
        vec!["bench", model, "--dim", "nope=4", "--runs", "1"],
        vec![
            "compile",
            model,
            "--dim",
            "nope=4",
            "-o",
            out.to_str().unwrap(),
        ],
    ];
    for args in &runs {
        let e = fails(&baton(args, d));
        assert!(
            e.contains("--dim 'nope=4'") && e.contains("seq"),
            "{args:?}: {e}"
        );
    }
    let o = baton(&["plan", model, "--dim", "seq=4"], d);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn huge_dims_are_refused_not_wrapped_or_panicked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = symbolic_model(d);
    let model = model.to_str().unwrap();
    for seq in [
        "1000000000000",
        "4611686018427387904",
        "18446744073709551615",
    ] {
        let dim = format!("seq={seq}");
        let e = fails(&baton(&["plan", model, "--dim", &dim], d));
        assert!(
            e.contains("'x'") && e.contains("max_tensor_bytes"),
            "{seq}: {e}"
        );
    }
}

#[test]
fn the_nodes_run_by_summary_credits_the_host_after_an_execute_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut b = GraphBuilder::new("chain");
    let x = b.input_fixed("x", DType::F32, &[2, 5]);
    let y = b.input_fixed("y", DType::F32, &[2, 5]);
    let r1 = b.node(OpKind::Relu, &[x], &[]).unwrap();
    let a1 = b.node(OpKind::Add, &[r1, y], &[]).unwrap();
    let r2 = b.node(OpKind::Relu, &[a1], &[]).unwrap();
    let a2 = b.node(OpKind::Add, &[r2, y], &[]).unwrap();
    b.output(a2);
    let model = save(d, "chain.btir", b.finish().unwrap());
    let xs = npy(d, "x.npy", &Tensor::from_f32(&[2, 5], &[1.0; 10]));
    let ys = npy(d, "y.npy", &Tensor::from_f32(&[2, 5], &[-0.5; 10]));
    let cfg = config(
        d,
        &format!(
            "[[plugin]]\npath = {}\noptions = {{ fault = \"error-execute-large\" }}\n",
            q(&plugin("baton_faulty_plugin"))
        ),
    );
    let o = baton(
        &[
            "run",
            model.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
            "--input",
            &format!("x={xs}"),
            "--input",
            &format!("y={ys}"),
        ],
        d,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("faulty failed"), "{stderr}");
    assert!(stderr.contains("nodes run by: host 4\n"), "{stderr}");
}

#[test]
fn a_closed_stdout_ends_the_command_quietly_not_in_a_panic() {
    // `baton run ... | head -0`: the reader is gone before the first line is written.
    use std::process::{Command, Stdio};
    let cache = tempfile::tempdir().unwrap();
    let (model, image) = support::tinynet();
    let input = format!("image={}", image.display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["run", &model.display().to_string(), "--input", &input])
        .env("BATON_CACHE_DIR", cache.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run baton");
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Success, or the end by SIGPIPE that other command-line tools take; never the
    // status of a panic (101).
    assert_ne!(o.status.code(), Some(101), "{stderr}");
}
