//! The `baton` command as a user types it.

mod support;

use std::process::Output;

use baton_delegate_api::{wire, DType, GraphBuilder, OpKind, Tensor};
use support::common::{config, plugin, q};
use support::{baton, tinynet as example};

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn run_writes_one_npy_per_output() {
    let dir = tempfile::tempdir().unwrap();
    let (model, image) = example();
    let out = dir.path().join("out");
    let o = baton(
        &[
            "run",
            model.to_str().unwrap(),
            "--input",
            &format!("image={}", image.display()),
            "--output-dir",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    let probs = baton_runtime_host::npy::read(&out.join("probabilities.npy")).unwrap();
    assert_eq!(probs.shape, vec![1, 10]);
    let sum: f32 = probs.f32s().iter().sum();
    assert!((sum - 1.0).abs() < 1e-5, "softmax sums to {sum}");
    assert!(stderr.contains("cpu"), "{stderr}");
}

#[test]
fn run_without_output_dir_prints_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (model, image) = example();
    let o = baton(
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            &format!("image={}", image.display()),
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("probabilities: f32 [1, 10]") && stdout.contains("argmax"),
        "{stdout}"
    );
}

#[test]
fn output_file_names_are_sanitized() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new("names");
    let x = b.input_fixed("x", DType::F32, &[3]);
    let y = b.node(OpKind::Relu, &[x], &[]).unwrap();
    b.rename(y, "scores/out:0 é");
    b.output(y);
    let model = dir.path().join("m.btir");
    std::fs::write(
        &model,
        wire::encode(&b.finish().unwrap(), wire::ConstMode::Inline).0,
    )
    .unwrap();
    let input = dir.path().join("x.npy");
    baton_runtime_host::npy::write(&input, &Tensor::from_f32(&[3], &[-1.0, 0.5, 2.0])).unwrap();
    let out = dir.path().join("o");
    let o = baton(
        &[
            "run",
            model.to_str().unwrap(),
            "--input",
            &format!("x={}", input.display()),
            "--output-dir",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let t = baton_runtime_host::npy::read(&out.join("scores_out_0__.npy")).unwrap();
    assert_eq!(t.f32s(), &[0.0, 0.5, 2.0]);
}

#[test]
fn a_missing_input_names_it_with_dtype_and_shape() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = example();
    let o = baton(&["run", model.to_str().unwrap()], dir.path());
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(
        stderr.contains("missing input 'image'")
            && stderr.contains("f32")
            && stderr.contains("expected f32[1, 3, 32, 32]"),
        "{stderr}"
    );
}

#[test]
fn bad_files_are_errors_that_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.btir");
    std::fs::write(&junk, b"BTIR\x01\x00garbage").unwrap();
    let o = baton(&["plan", junk.to_str().unwrap()], dir.path());
    assert!(!o.status.success());
    assert!(text(&o).1.contains("junk.btir"), "{:?}", text(&o));
    let o = baton(&["run", "no/such/model.btir"], dir.path());
    assert!(!o.status.success());
    assert!(text(&o).1.contains("no/such/model.btir"));
}

#[test]
fn plan_shows_partitions_reasons_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = example();
    let cfg = config(
        dir.path(),
        &format!(
            "[[plugin]]\npath = {}\n[policy]\npin = [{{ op = \"Softmax\", target = \"host\" }}]\n",
            q(&plugin("baton_backend_cpu"))
        ),
    );
    let o = baton(
        &[
            "plan",
            model.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("cpu") && stdout.contains("host"),
        "{stdout}"
    );
    assert!(
        stdout.contains("pinned"),
        "the pin is given as the reason: {stdout}"
    );
    assert!(stdout.contains("memory: arena"), "{stdout}");
}

#[test]
fn devices_reads_the_probe_verdict_from_the_cache_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &format!("[[plugin]]\npath = {}\n", q(&plugin("baton_backend_cpu"))),
    );
    let first = baton(&["devices", "--config", cfg.to_str().unwrap()], dir.path());
    let (s1, e1) = text(&first);
    assert!(first.status.success(), "{e1}");
    assert!(s1.contains("probe: passed (measured now)"), "{s1}");
    let second = baton(&["devices", "--config", cfg.to_str().unwrap()], dir.path());
    assert!(
        text(&second).0.contains("probe: passed (from cache)"),
        "{:?}",
        text(&second)
    );
}

#[test]
fn every_command_has_help() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["plan", "--help"],
        vec!["devices", "--help"],
    ] {
        let o = baton(&args, dir.path());
        assert!(
            o.status.success() && text(&o).0.contains("Usage"),
            "{args:?}"
        );
    }
    let o = baton(&["frobnicate"], dir.path());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn run_with_a_bound_refuses_an_input_beyond_it_and_runs_one_within() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new("dyn");
    let x = b.input(
        "x",
        DType::F32,
        &[
            baton_delegate_api::Dim::Sym("n".into()),
            baton_delegate_api::Dim::Fixed(3),
        ],
    );
    let y = b.node(OpKind::Relu, &[x], &[]).unwrap();
    b.output(y);
    let (bytes, _) = wire::encode(&b.finish().unwrap(), wire::ConstMode::Inline);
    let model = dir.path().join("dyn.btir");
    std::fs::write(&model, bytes).unwrap();
    let run = |n: usize, bound: &str| {
        let input = dir.path().join(format!("x{n}.npy"));
        let v: Vec<f32> = (0..n * 3).map(|i| i as f32 - 4.0).collect();
        baton_runtime_host::npy::write(&input, &Tensor::from_f32(&[n, 3], &v)).unwrap();
        baton(
            &[
                "run",
                model.to_str().unwrap(),
                "--bound",
                bound,
                "--input",
                &format!("x={}", input.display()),
            ],
            dir.path(),
        )
    };
    let o = run(4, "n=4");
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("memory planned at the bounds"), "{stderr}");
    assert!(stdout.contains("[4, 3]"), "{stdout}");
    let o = run(5, "n=4");
    let (stdout, stderr) = text(&o);
    assert!(!o.status.success(), "{stdout}");
    assert!(
        stderr.contains("'x'")
            && stderr.contains("'n'")
            && stderr.contains("above its declared bound 4"),
        "{stderr}"
    );
}

#[test]
fn bench_prints_one_json_line_with_the_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (model, image) = example();
    let o = baton(
        &[
            "bench",
            model.to_str().unwrap(),
            "--input",
            &format!("image={}", image.display()),
            "--runs",
            "7",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--json",
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let (min, median, p90) = (
        v["min_ms"].as_f64().unwrap(),
        v["median_ms"].as_f64().unwrap(),
        v["p90_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= median && median <= p90, "{v}");
    assert_eq!(v["runs"], 7);
    assert_eq!(v["threads"], 1);
    let per = v["nodes_per_backend"].as_object().unwrap();
    let total: u64 = per.values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(total, 11, "tinynet has 11 nodes: {v}");

    // Without --input, float inputs are synthesised and the run still works.
    let o = baton(
        &["bench", model.to_str().unwrap(), "--runs", "2"],
        dir.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("synthesised inputs: image"), "{stderr}");
    assert!(stdout.contains("median"), "{stdout}");
}

/// `bench --profile` runs again with profiling on and reports each step and plugin event
/// with its median time; the latency figures stay those of the unprofiled runs.
#[test]
fn bench_profile_reports_steps_and_plugin_events() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = example();
    let args = |json: bool| {
        let mut v = vec![
            "bench",
            model.to_str().unwrap(),
            "--runs",
            "3",
            "--warmup",
            "1",
            "--profile",
        ];
        if json {
            v.push("--json");
        }
        baton(&v, dir.path())
    };
    let o = args(true);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let p = &v["profile"];
    assert_eq!(p["runs"], 3, "{v}");
    let steps = p["steps"].as_array().unwrap();
    let partitions: Vec<_> = steps.iter().filter(|s| s["kind"] == "partition").collect();
    assert!(!partitions.is_empty(), "{p}");
    assert!(partitions.iter().all(|s| s["target"] == "cpu"), "{p}");
    let events: Vec<_> = steps.iter().filter(|s| s["plugin_event"] == true).collect();
    assert!(!events.is_empty(), "the CPU plugin reports its ops: {p}");
    assert!(
        events
            .iter()
            .all(|e| e["median_us"].as_f64().unwrap() >= 0.0
                && !e["name"].as_str().unwrap().is_empty()),
        "{p}"
    );
    let kinds = p["per_kind_us"].as_object().unwrap();
    assert!(!kinds.is_empty() && !kinds.contains_key("partition"), "{p}");
    assert!(p["total_median_us"].as_f64().unwrap() > 0.0, "{p}");

    let o = args(false);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("profile: median over 3 profiled runs"),
        "{stdout}"
    );
    assert!(stdout.contains("per kind"), "{stdout}");
}

/// `y = x + h`, `h_next = y * 1`: a running sum with its state carried by `--stream`.
#[test]
fn run_stream_iterates_chunks_carries_state_and_stacks_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new("running_sum");
    let x = b.input_fixed("x", DType::F32, &[1, 2]);
    let h = b.input_fixed("h", DType::F32, &[1, 2]);
    let y = b.named_node("sum", OpKind::Add, &[x, h], &[]).unwrap();
    let one = b.constant_f32("one", &[1], &[1.0]);
    let next = b.named_node("keep", OpKind::Mul, &[y, one], &[]).unwrap();
    b.rename(y, "y");
    b.rename(next, "h_next");
    b.output(y);
    b.output(next);
    let (bytes, _) = wire::encode(&b.finish().unwrap(), wire::ConstMode::Inline);
    let model = dir.path().join("sum.btir");
    std::fs::write(&model, bytes).unwrap();
    let chunks = dir.path().join("chunks.npy");
    let values = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0];
    baton_runtime_host::npy::write(&chunks, &Tensor::from_f32(&[3, 1, 2], &values)).unwrap();
    let h0 = dir.path().join("h0.npy");
    baton_runtime_host::npy::write(&h0, &Tensor::from_f32(&[1, 2], &[100.0, 0.0])).unwrap();
    let out = dir.path().join("out");
    let args = |extra: &[&str]| {
        let mut v = vec![
            "run".to_string(),
            model.display().to_string(),
            "--stream".into(),
            "--input".into(),
            format!("x={}", chunks.display()),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        baton(&a, dir.path())
    };

    // Both outputs fit `h`: the pairing must be said.
    let o = run(&[]);
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(stderr.contains("--state h=OUTPUT"), "{stderr}");

    let o = run(&[
        "--state",
        "h=h_next",
        "--input",
        &format!("h={}", h0.display()),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("3 steps, states carried: h_next -> h"),
        "{stderr}"
    );
    let y = baton_runtime_host::npy::read(&out.join("y.npy")).unwrap();
    assert_eq!(y.shape, vec![3, 1, 2]);
    assert_eq!(y.f32s(), &[101.0, 10.0, 103.0, 30.0, 106.0, 60.0]);
    let h = baton_runtime_host::npy::read(&out.join("h_next.npy")).unwrap();
    assert_eq!(
        (h.shape.clone(), h.f32s().to_vec()),
        (vec![1, 2], vec![106.0, 60.0])
    );

    // Without an initial file the state starts at zeros.
    let o = run(&["--state", "h=h_next", "--output-dir", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    let y = baton_runtime_host::npy::read(&out.join("y.npy")).unwrap();
    assert_eq!(y.f32s(), &[1.0, 10.0, 3.0, 30.0, 6.0, 60.0]);
}

#[test]
fn run_profile_and_trace_show_every_step_host_and_delegated() {
    let dir = tempfile::tempdir().unwrap();
    let (model, image) = example();
    // Softmax pinned to the host: the run has a delegated partition and a host node.
    let cfg = config(
        dir.path(),
        &format!(
            "[[plugin]]\npath = {}\n[policy]\npin = [{{ op = \"Softmax\", target = \"host\" }}]\n",
            q(&plugin("baton_backend_cpu"))
        ),
    );
    let trace = dir.path().join("run.trace.json");
    let o = baton(
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            &format!("image={}", image.display()),
            "--config",
            cfg.to_str().unwrap(),
            "--profile",
            "--trace",
            trace.to_str().unwrap(),
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let rows: Vec<&str> = stdout.lines().collect();
    assert!(rows[0].contains("wall_us"), "{stdout}");
    assert!(
        rows.iter()
            .any(|r| r.starts_with("cpu ") && r.contains("partition 0")),
        "{stdout}"
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("host ") && r.contains("(Softmax)")),
        "{stdout}"
    );
    assert!(rows.iter().any(|r| r.starts_with("total")), "{stdout}");
    // The trace is Chrome's event format: complete events with microsecond times, one per
    // step on the steps track, in run order and not overlapping.
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let steps: Vec<&serde_json::Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == 1)
        .collect();
    assert_eq!(steps.len(), 2, "{doc}");
    assert_eq!(steps[0]["cat"], "cpu");
    assert_eq!(steps[1]["cat"], "host");
    assert_eq!(steps[1]["args"]["op"], "Softmax");
    let end0 = steps[0]["ts"].as_f64().unwrap() + steps[0]["dur"].as_f64().unwrap();
    assert!(steps[1]["ts"].as_f64().unwrap() >= end0, "{doc}");
    assert!(
        steps.iter().all(|e| e["dur"].as_f64().unwrap() > 0.0),
        "{doc}"
    );
}

/// The sample model with an If (`baton_runtime_host::sample::branchy`: then `relu(x) * w`,
/// else `x + w`), a model whose work sits in a branch, written as a `.btir` in `dir`, with
/// `c` (true) and `x` as `.npy` files beside it; the arguments that give them.
fn branching_model(dir: &std::path::Path) -> (std::path::PathBuf, Vec<String>) {
    let (bytes, _) = wire::encode(
        &baton_runtime_host::sample::branchy(),
        wire::ConstMode::Inline,
    );
    let model = dir.join("branchy.btir");
    std::fs::write(&model, bytes).unwrap();
    let (cf, xf) = (dir.join("c.npy"), dir.join("x.npy"));
    baton_runtime_host::npy::write(&cf, &Tensor::from_bytes(DType::Bool, &[], &[1])).unwrap();
    baton_runtime_host::npy::write(&xf, &Tensor::from_f32(&[2, 3], &[0.5; 6])).unwrap();
    let inputs = ["c", "x"].iter().zip([cf, xf]);
    let inputs = inputs.flat_map(|(n, f)| ["--input".to_string(), format!("{n}={}", f.display())]);
    (model, inputs.collect())
}

/// `bench --profile`, `run --profile` and `run --trace` show what ran inside an If: the
/// taken branch's partition and its plugin's events, below the If, whose own time is not
/// counted again per kind.
#[test]
fn profile_and_trace_show_the_steps_inside_an_if() {
    let dir = tempfile::tempdir().unwrap();
    let (model, inputs) = branching_model(dir.path());
    let run = |args: &[&str]| {
        let mut v: Vec<&str> = vec![args[0], model.to_str().unwrap()];
        v.extend(&args[1..]);
        v.extend(inputs.iter().map(String::as_str));
        let o = baton(&v, dir.path());
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "{stdout}\n{stderr}");
        stdout
    };
    let stdout = run(&[
        "bench",
        "--runs",
        "3",
        "--warmup",
        "1",
        "--profile",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let steps = v["profile"]["steps"].as_array().unwrap();
    let at = |name: &str| {
        steps
            .iter()
            .position(|s| s["name"].as_str().unwrap().contains(name))
            .unwrap_or_else(|| panic!("no row for {name}: {v}"))
    };
    let (pick, branch) = (at("pick"), at("then_branch: partition 0"));
    assert!(branch > pick, "{v}");
    assert_eq!(
        (&steps[pick]["depth"], &steps[branch]["depth"]),
        (&0.into(), &1.into())
    );
    assert_eq!(steps[branch]["target"], "cpu", "{v}");
    let relu = at("(Relu)");
    assert_eq!(
        (&steps[relu]["plugin_event"], &steps[relu]["depth"]),
        (&true.into(), &2.into())
    );
    let kinds = v["profile"]["per_kind_us"].as_object().unwrap();
    assert!(!kinds.contains_key("If") && !kinds.is_empty(), "{v}");

    let trace = dir.path().join("if.trace.json");
    let stdout = run(&["run", "--profile", "--trace", trace.to_str().unwrap()]);
    assert!(
        stdout
            .lines()
            .any(|r| r.starts_with("cpu ") && r.contains("  then_branch: partition 0")),
        "{stdout}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let span = |name: &str| {
        let e = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ph"] == "X" && e["name"].as_str().unwrap().contains(name))
            .unwrap_or_else(|| panic!("no event for {name}: {doc}"));
        let ts = e["ts"].as_f64().unwrap();
        (ts, ts + e["dur"].as_f64().unwrap())
    };
    let (outer, inner) = (span("pick"), span("then_branch: partition 0"));
    assert!(inner.0 >= outer.0 && inner.1 <= outer.1 + 1e-3, "{doc}");
}

#[test]
fn compile_then_run_the_program_gives_the_same_bytes_as_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (model, image) = example();
    // Another extension: the program is told by its magic bytes.
    let program = dir.path().join("tinynet.bin");
    let o = baton(
        &[
            "compile",
            model.to_str().unwrap(),
            "-o",
            program.to_str().unwrap(),
        ],
        dir.path(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("partitions: cpu"), "{stdout}");
    let input = format!("image={}", image.display());
    let mut outputs = Vec::new();
    for (m, out) in [(&model, "from-model"), (&program, "from-program")] {
        let out = dir.path().join(out);
        let o = baton(
            &[
                "run",
                m.to_str().unwrap(),
                "--input",
                &input,
                "--output-dir",
                out.to_str().unwrap(),
            ],
            dir.path(),
        );
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "{stdout}\n{stderr}");
        outputs.push(std::fs::read(out.join("probabilities.npy")).unwrap());
    }
    assert!(outputs[0] == outputs[1], "the program's output differs");

    let o = baton(&["plan", program.to_str().unwrap()], dir.path());
    let (stdout, stderr) = text(&o);
    assert!(
        o.status.success() && stdout.contains("arena"),
        "{stdout}\n{stderr}"
    );

    // One corrupted byte in the middle of the file: refused, naming a section.
    let mut bytes = std::fs::read(&program).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&program, &bytes).unwrap();
    let o = baton(
        &["run", program.to_str().unwrap(), "--input", &input],
        dir.path(),
    );
    let (_, stderr) = text(&o);
    assert!(!o.status.success(), "a corrupted program ran");
    assert!(
        stderr.contains("section") && stderr.contains("corrupted"),
        "{stderr}"
    );
}

#[test]
fn compile_names_an_unbound_symbolic_dimension() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new("sym");
    let x = b.input("x", DType::F32, &[baton_delegate_api::Dim::Sym("n".into())]);
    let r = b.node(OpKind::Relu, &[x], &[]).unwrap();
    b.output(r);
    let model = dir.path().join("sym.btir");
    let (bytes, _) = wire::encode(&b.finish().unwrap(), wire::ConstMode::Inline);
    std::fs::write(&model, bytes).unwrap();
    let out = dir.path().join("sym.baton");
    let o = baton(
        &[
            "compile",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(stderr.contains("--dim n=VALUE"), "{stderr}");
    let o = baton(
        &[
            "compile",
            model.to_str().unwrap(),
            "--dim",
            "n=4",
            "-o",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(baton_runtime_host::program::is_program(&out));
}

/// A bounded program cannot also fix dimensions, and needs a bound for every symbolic
/// one: both were accepted by compile and failed only when the program was loaded.
#[test]
fn compile_refuses_a_bounded_program_that_could_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new("sym2");
    let sym = |s: &str| baton_delegate_api::Dim::Sym(s.into());
    let x = b.input("x", DType::F32, &[sym("a"), sym("n")]);
    let r = b.node(OpKind::Relu, &[x], &[]).unwrap();
    b.output(r);
    let model = dir.path().join("sym2.btir");
    let (bytes, _) = wire::encode(&b.finish().unwrap(), wire::ConstMode::Inline);
    std::fs::write(&model, bytes).unwrap();
    let out = dir.path().join("sym2.baton");
    let compile = |extra: &[&str]| {
        let mut args = vec!["compile", model.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", out.to_str().unwrap()]);
        baton(&args, dir.path())
    };
    let o = compile(&["--dim", "a=1", "--bound", "n=8"]);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("--bound a=MAX"), "{}", text(&o).1);
    let o = compile(&["--bound", "n=8"]);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("'a' and no bound"), "{}", text(&o).1);
    let o = compile(&["--bound", "a=2", "--bound", "n=8"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let x = dir.path().join("x.npy");
    baton_runtime_host::npy::write(&x, &Tensor::from_f32(&[1, 5], &[-1.0, 2.0, -3.0, 4.0, 5.0]))
        .unwrap();
    let o = baton(
        &[
            "run",
            out.to_str().unwrap(),
            "--input",
            &format!("x={}", x.display()),
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o).1);
}

#[test]
fn run_check_compares_each_partition_with_the_reference_as_a_table_and_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let (model, image) = example();
    let input = format!("image={}", image.display());
    let args = ["run", model.to_str().unwrap(), "--input", &input, "--check"];
    let o = baton(&args, dir.path());
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("max_ulp") && stdout.contains("probabilities"),
        "{stdout}"
    );
    assert!(
        stdout.contains(" ok") && !stdout.contains("PAST"),
        "{stdout}"
    );

    let o = baton(&[&args[..], &["--json"]].concat(), dir.path());
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    // The report alone on stdout (the outputs' summary is not printed with --json).
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    let partitions = report.as_array().expect("a list of partitions");
    assert!(!partitions.is_empty(), "{stdout}");
    for p in partitions {
        assert_eq!(p["backend"], "cpu", "{p}");
        assert!(p["first_node_past"].is_null(), "{p}");
        for out in p["outputs"].as_array().unwrap() {
            assert_eq!(out["past"], 0, "{out}");
            assert!(out["max_abs"].as_f64().unwrap() < 1e-4, "{out}");
            assert!(out["tolerance"]["ulp"].as_u64().unwrap() > 0, "{out}");
        }
    }
    // --json without --check is refused, naming --check.
    let o = baton(
        &["run", model.to_str().unwrap(), "--input", &input, "--json"],
        dir.path(),
    );
    assert!(
        !o.status.success() && text(&o).1.contains("--check"),
        "{}",
        text(&o).1
    );
}
