//! The C API driven through its extern functions, as a C program calls them: results
//! against the Rust API, streaming, bounded sessions, plan rows, and the error paths
//! (NULLs, wrong handles, wrong sizes, typos) that must be statuses, never crashes.

use std::collections::BTreeMap;
use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use baton::*;
use baton_delegate_api::wire::{self, ConstMode};
use baton_delegate_api::{DType, Dim, GraphBuilder, OpKind, Tensor};
use baton_runtime_host::{model, Config, Engine, Session};

fn last_error() -> String {
    unsafe { CStr::from_ptr(baton_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// `status` is `expected`, and the message holds each of `words`.
fn assert_fails(status: BatonResult, expected: BatonResult, words: &[&str]) {
    let msg = last_error();
    assert_eq!(status, expected, "status {status}, message: {msg}");
    for w in words {
        assert!(msg.contains(w), "'{w}' not in: {msg}");
    }
}

fn ok(status: BatonResult) {
    assert_eq!(status, BATON_OK, "{}", last_error());
}

/// `y = x + b` and `s = x + b` over `x: f32[n]`, `b: f32[n]` written to a `.btir` file.
fn add_model(dir: &Path) -> PathBuf {
    let mut g = GraphBuilder::new("add");
    let x = g.input("x", DType::F32, &[Dim::Sym("n".into())]);
    let b = g.input("b", DType::F32, &[Dim::Sym("n".into())]);
    let y = g.named_node("y_node", OpKind::Add, &[x, b], &[]).unwrap();
    let s = g.named_node("s_node", OpKind::Add, &[x, b], &[]).unwrap();
    g.rename(y, "y");
    g.rename(s, "s");
    g.output(y);
    g.output(s);
    let graph = g.finish().unwrap();
    let path = dir.join("add.btir");
    std::fs::write(&path, wire::encode(&graph, ConstMode::Inline).0).unwrap();
    path
}

fn engine() -> *mut BatonEngine {
    let mut e = ptr::null_mut();
    ok(unsafe { baton_engine_create(ptr::null(), &mut e) });
    e
}

fn load(path: &Path) -> *mut BatonModel {
    let mut m = ptr::null_mut();
    let p = c(path.to_str().unwrap());
    ok(unsafe { baton_model_load(p.as_ptr(), &mut m) });
    m
}

fn tensor_in(shape: &[i64], data: &[f32]) -> BatonTensor {
    let mut t = BatonTensor {
        dtype: DType::F32.code(),
        rank: shape.len() as u32,
        shape: [0; MAX_RANK],
        data: data.as_ptr() as *mut c_void,
        size: std::mem::size_of_val(data),
    };
    t.shape[..shape.len()].copy_from_slice(shape);
    t
}

fn tensor_out(buf: &mut [f32]) -> BatonTensor {
    BatonTensor {
        dtype: 0,
        rank: 0,
        shape: [0; MAX_RANK],
        data: buf.as_mut_ptr() as *mut c_void,
        size: std::mem::size_of_val(buf),
    }
}

fn session(e: *mut BatonEngine, m: *mut BatonModel, n: i64) -> *mut BatonSession {
    let name = c("n");
    let dims = [BatonDim {
        name: name.as_ptr(),
        value: n,
    }];
    let mut s = ptr::null_mut();
    ok(unsafe { baton_session_create(e, m, dims.as_ptr(), 1, &mut s) });
    s
}

#[test]
fn version_matches_the_header() {
    let header =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/baton.h"))
            .unwrap();
    let define = |name: &str| -> i64 {
        let line = header
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} not in baton.h"));
        let v = line
            .split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches('u');
        v.parse().unwrap()
    };
    assert_eq!(
        baton_api_version(),
        (define("BATON_API_MAJOR") as u32) << 16 | define("BATON_API_MINOR") as u32
    );
    assert_eq!(define("BATON_MAX_RANK") as usize, MAX_RANK);
    for (name, v) in [
        ("BATON_OK", BATON_OK),
        ("BATON_ERROR_INVALID_ARGUMENT", BATON_ERROR_INVALID_ARGUMENT),
        ("BATON_ERROR_CONFIG", BATON_ERROR_CONFIG),
        ("BATON_ERROR_MODEL", BATON_ERROR_MODEL),
        ("BATON_ERROR_INPUT", BATON_ERROR_INPUT),
        ("BATON_ERROR_BUFFER_TOO_SMALL", BATON_ERROR_BUFFER_TOO_SMALL),
        ("BATON_ERROR_PLUGIN", BATON_ERROR_PLUGIN),
        ("BATON_ERROR_RUNTIME", BATON_ERROR_RUNTIME),
        ("BATON_ERROR_INTERNAL", BATON_ERROR_INTERNAL),
    ] {
        assert_eq!(define(name), v as i64, "{name}");
    }
    for code in 1..=13u32 {
        let dt = DType::from_code(code).unwrap();
        let name = format!("BATON_DTYPE_{}", format!("{dt:?}").to_uppercase());
        assert_eq!(define(&name), code as i64, "{name}");
    }
}

#[test]
fn runs_on_caller_buffers_as_the_rust_api_does() {
    let tinynet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tinynet/tinynet.btir");
    let graph = model::load(&tinynet).unwrap();
    let decl = &graph.tensors[graph.inputs[0]];
    let shape = decl.static_shape().unwrap();
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let rust_engine = Engine::new(Config::default()).unwrap();
    let mut rust = Session::new(&rust_engine, &graph, &BTreeMap::new()).unwrap();
    let expected = rust.run(&[Tensor::from_f32(&shape, &values)]).unwrap();

    let (e, m) = (engine(), load(&tinynet));
    let mut s = ptr::null_mut();
    ok(unsafe { baton_session_create(e, m, ptr::null(), 0, &mut s) });
    // The engine and model handles may go before the session.
    unsafe {
        baton_engine_free(e);
        baton_model_free(m);
    }
    let shape_i: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let input = tensor_in(&shape_i, &values);
    let mut buf = vec![0f32; expected[0].len()];
    let mut out = [tensor_out(&mut buf)];
    ok(unsafe { baton_session_run(s, &input, 1, out.as_mut_ptr(), 1) });
    assert_eq!(out[0].size, expected[0].bytes().len());
    assert_eq!(out[0].dtype, expected[0].dtype.code());
    let got_shape: Vec<usize> = out[0].shape[..out[0].rank as usize]
        .iter()
        .map(|&d| d as usize)
        .collect();
    assert_eq!(got_shape, expected[0].shape);
    assert_eq!(bytemuck_f32(&buf), expected[0].bytes());
    unsafe { baton_session_free(s) };
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn model_and_session_describe_their_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let (e, m) = (engine(), load(&add_model(dir.path())));
    let mut count = 0;
    ok(unsafe { baton_model_input_count(m, &mut count) });
    assert_eq!(count, 2);
    let mut info: BatonTensorInfo = unsafe { std::mem::zeroed() };
    ok(unsafe { baton_model_input(m, 1, &mut info) });
    assert_eq!(unsafe { CStr::from_ptr(info.name) }.to_str().unwrap(), "b");
    assert_eq!((info.rank, info.shape[0]), (1, -1));
    assert_eq!(
        unsafe { CStr::from_ptr(info.dim_names[0]) }
            .to_str()
            .unwrap(),
        "n"
    );
    assert_fails(
        unsafe { baton_model_output(m, 2, &mut info) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["output index 2", "there are 2"],
    );

    let s = session(e, m, 3);
    ok(unsafe { baton_session_output(s, 0, &mut info) });
    assert_eq!(unsafe { CStr::from_ptr(info.name) }.to_str().unwrap(), "y");
    assert_eq!(
        (info.rank, info.shape[0], info.dim_names[0]),
        (1, 3, ptr::null())
    );
    let mut rows = 0;
    ok(unsafe { baton_session_plan_size(s, &mut rows) });
    assert_eq!(rows, 2);
    let mut row: BatonPlanRow = unsafe { std::mem::zeroed() };
    ok(unsafe { baton_session_plan_row(s, 1, &mut row) });
    assert_eq!(
        unsafe { CStr::from_ptr(row.node) }.to_str().unwrap(),
        "s_node"
    );
    assert_eq!(unsafe { CStr::from_ptr(row.op) }.to_str().unwrap(), "Add");
    assert_eq!(
        unsafe { CStr::from_ptr(row.target) }.to_str().unwrap(),
        "host"
    );
    assert_eq!(row.partition, -1);
    unsafe {
        baton_session_free(s);
        baton_model_free(m);
        baton_engine_free(e);
    }
}

#[test]
fn wrong_inputs_and_short_buffers_are_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let (e, m) = (engine(), load(&add_model(dir.path())));
    let s = session(e, m, 3);
    let (x, b) = ([1.0f32, 2.0, 3.0], [10.0f32, 20.0, 30.0]);
    let inputs = [tensor_in(&[3], &x), tensor_in(&[3], &b)];
    let (mut y, mut z) = ([0f32; 3], [0f32; 3]);
    let mut outs = [tensor_out(&mut y), tensor_out(&mut z)];
    ok(unsafe { baton_session_run(s, inputs.as_ptr(), 2, outs.as_mut_ptr(), 2) });
    assert_eq!(y, [11.0, 22.0, 33.0]);
    assert_eq!(z, y);

    // A buffer shorter than its shape: refused, not read past.
    let mut short = inputs;
    short[1].size = 8;
    let mut outs = [tensor_out(&mut y), tensor_out(&mut z)];
    assert_fails(
        unsafe { baton_session_run(s, short.as_ptr(), 2, outs.as_mut_ptr(), 2) },
        BATON_ERROR_INPUT,
        &["'b'", "8 bytes", "12"],
    );
    // A shape the session was not compiled for.
    let mut wrong = inputs;
    wrong[0].shape[0] = 2;
    wrong[0].size = 8;
    assert_fails(
        unsafe { baton_session_run(s, wrong.as_ptr(), 2, outs.as_mut_ptr(), 2) },
        BATON_ERROR_INPUT,
        &["'x'"],
    );
    // An unknown dtype code.
    let mut bad = inputs;
    bad[0].dtype = 999;
    assert_fails(
        unsafe { baton_session_run(s, bad.as_ptr(), 2, outs.as_mut_ptr(), 2) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["dtype code 999"],
    );
    // Too few outputs, then one too small: its size says what it needs.
    assert_fails(
        unsafe { baton_session_run(s, inputs.as_ptr(), 2, outs.as_mut_ptr(), 1) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["1 outputs given", "gives 2"],
    );
    let mut small = [0f32; 2];
    let mut outs = [tensor_out(&mut y), tensor_out(&mut small)];
    assert_fails(
        unsafe { baton_session_run(s, inputs.as_ptr(), 2, outs.as_mut_ptr(), 2) },
        BATON_ERROR_BUFFER_TOO_SMALL,
        &["'s'", "12 bytes", "holds 8"],
    );
    assert_eq!(outs[1].size, 12);
    // NULLs.
    assert_fails(
        unsafe { baton_session_run(s, ptr::null(), 2, outs.as_mut_ptr(), 2) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["inputs is NULL"],
    );
    assert_fails(
        unsafe { baton_session_run(ptr::null_mut(), inputs.as_ptr(), 2, outs.as_mut_ptr(), 2) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["session is NULL"],
    );
    unsafe {
        baton_session_free(s);
        baton_model_free(m);
        baton_engine_free(e);
    }
}

#[test]
fn bad_handles_files_dims_and_configs_are_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let (e, m) = (engine(), load(&add_model(dir.path())));
    // A model where an engine belongs.
    let mut n = 0;
    assert_fails(
        unsafe { baton_engine_device_count(m as *const BatonEngine, &mut n) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["not a live BatonEngine"],
    );
    assert_fails(
        unsafe { baton_engine_device_count(e, ptr::null_mut()) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["out is NULL"],
    );
    // A dimension the model does not have, and a negative one.
    let (typo, n_name) = (c("m"), c("n"));
    let mut s = ptr::null_mut();
    let dims = [BatonDim {
        name: typo.as_ptr(),
        value: 3,
    }];
    assert_fails(
        unsafe { baton_session_create(e, m, dims.as_ptr(), 1, &mut s) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["'m'", "n"],
    );
    let dims = [BatonDim {
        name: n_name.as_ptr(),
        value: -1,
    }];
    assert_fails(
        unsafe { baton_session_create(e, m, dims.as_ptr(), 1, &mut s) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["negative"],
    );
    assert!(s.is_null());
    // Files.
    let mut m2 = ptr::null_mut();
    let missing = c(dir.path().join("nope.onnx").to_str().unwrap());
    assert_fails(
        unsafe { baton_model_load(missing.as_ptr(), &mut m2) },
        BATON_ERROR_MODEL,
        &["nope.onnx"],
    );
    assert_fails(
        unsafe { baton_model_load(ptr::null(), &mut m2) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["path is NULL"],
    );
    let garbage = dir.path().join("garbage.btir");
    std::fs::write(&garbage, b"BTIR\x01\x00garbage").unwrap();
    let garbage = c(garbage.to_str().unwrap());
    assert_fails(
        unsafe { baton_model_load(garbage.as_ptr(), &mut m2) },
        BATON_ERROR_MODEL,
        &["garbage.btir"],
    );
    assert!(m2.is_null());
    // Configs: a typo is refused; a plugin file that is not there is a device row.
    let mut e2 = ptr::null_mut();
    let typo = c("[[plugin]]\npaht = \"x.so\"\n");
    assert_fails(
        unsafe { baton_engine_create_from_string(typo.as_ptr(), ptr::null(), &mut e2) },
        BATON_ERROR_CONFIG,
        &["paht"],
    );
    let absent = c("[[plugin]]\npath = \"no-such-plugin.so\"\n");
    ok(unsafe { baton_engine_create_from_string(absent.as_ptr(), ptr::null(), &mut e2) });
    ok(unsafe { baton_engine_device_count(e2, &mut n) });
    assert_eq!(n, 1);
    let mut d: BatonDeviceRow = unsafe { std::mem::zeroed() };
    ok(unsafe { baton_engine_device(e2, 0, &mut d) });
    assert_eq!(d.usable, 0);
    assert!(unsafe { CStr::from_ptr(d.detail) }
        .to_str()
        .unwrap()
        .contains("no-such-plugin.so"));
    assert_fails(
        unsafe { baton_engine_device(e2, 1, &mut d) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["device index 1"],
    );
    unsafe {
        baton_engine_free(e2);
        baton_model_free(m);
        baton_engine_free(e);
        // NULL is ignored by every free.
        baton_engine_free(ptr::null_mut());
        baton_session_free(ptr::null_mut());
    }
}

#[test]
fn streams_carry_state_and_a_failed_step_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let (e, m) = (engine(), load(&add_model(dir.path())));
    let s = session(e, m, 2);
    let step_without_stream = unsafe { baton_session_step(s, ptr::null(), 0, ptr::null_mut(), 0) };
    assert_fails(
        step_without_stream,
        BATON_ERROR_INVALID_ARGUMENT,
        &["baton_session_stream first"],
    );
    // `b` carries `s`: each step adds x to the running sum, which `y` shows.
    let (b, s_name) = (c("b"), c("s"));
    let pairs = [BatonStatePair {
        input: b.as_ptr(),
        output: s_name.as_ptr(),
    }];
    ok(unsafe { baton_session_stream(s, pairs.as_ptr(), 1) });
    let x = [1.0f32, 2.0];
    let input = tensor_in(&[2], &x);
    let mut y = [0f32; 2];
    for k in 1..=3 {
        let mut out = [tensor_out(&mut y)];
        ok(unsafe { baton_session_step(s, &input, 1, out.as_mut_ptr(), 1) });
        assert_eq!(y, [k as f32, 2.0 * k as f32]);
    }
    let mut short = input;
    short.size = 4;
    let mut out = [tensor_out(&mut y)];
    assert_fails(
        unsafe { baton_session_step(s, &short, 1, out.as_mut_ptr(), 1) },
        BATON_ERROR_INPUT,
        &["'x'"],
    );
    let mut out = [tensor_out(&mut y)];
    ok(unsafe { baton_session_step(s, &input, 1, out.as_mut_ptr(), 1) });
    assert_eq!(y, [4.0, 8.0], "the failed step left the state as it was");
    ok(unsafe { baton_session_reset_state(s) });
    let mut out = [tensor_out(&mut y)];
    ok(unsafe { baton_session_step(s, &input, 1, out.as_mut_ptr(), 1) });
    assert_eq!(y, [1.0, 2.0]);
    // An output that is not one, as a state.
    let nope = c("nope");
    let pairs = [BatonStatePair {
        input: b.as_ptr(),
        output: nope.as_ptr(),
    }];
    assert_fails(
        unsafe { baton_session_stream(s, pairs.as_ptr(), 1) },
        BATON_ERROR_INPUT,
        &["nope"],
    );
    unsafe {
        baton_session_free(s);
        baton_model_free(m);
        baton_engine_free(e);
    }
}

#[test]
fn bounded_sessions_take_any_extents_within_their_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let (e, m) = (engine(), load(&add_model(dir.path())));
    let n = c("n");
    let bounds = [BatonDim {
        name: n.as_ptr(),
        value: 4,
    }];
    let mut s = ptr::null_mut();
    ok(unsafe { baton_session_create_bounded(e, m, bounds.as_ptr(), 1, &mut s) });
    for len in [2usize, 4, 3] {
        let x: Vec<f32> = (0..len).map(|i| i as f32).collect();
        let inputs = [tensor_in(&[len as i64], &x), tensor_in(&[len as i64], &x)];
        let (mut y, mut z) = (vec![0f32; 4], vec![0f32; 4]);
        let mut outs = [tensor_out(&mut y), tensor_out(&mut z)];
        ok(unsafe { baton_session_run(s, inputs.as_ptr(), 2, outs.as_mut_ptr(), 2) });
        assert_eq!(
            (outs[0].rank, outs[0].shape[0], outs[0].size),
            (1, len as i64, 4 * len)
        );
        let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        assert_eq!(&y[..len], &want[..]);
    }
    let x = [0f32; 5];
    let inputs = [tensor_in(&[5], &x), tensor_in(&[5], &x)];
    let (mut y, mut z) = ([0f32; 5], [0f32; 5]);
    let mut outs = [tensor_out(&mut y), tensor_out(&mut z)];
    assert_fails(
        unsafe { baton_session_run(s, inputs.as_ptr(), 2, outs.as_mut_ptr(), 2) },
        BATON_ERROR_INPUT,
        &["bound 4"],
    );
    let mut rows = 0;
    assert_fails(
        unsafe { baton_session_plan_size(s, &mut rows) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["per binding"],
    );
    unsafe {
        baton_session_free(s);
        baton_model_free(m);
        baton_engine_free(e);
    }
}

/// A plugin file of the workspace, next to this test's directory (`cargo build` puts it
/// there; scripts/test.sh builds the workspace first).
fn workspace_plugin(stem: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let name = format!(
        "{}{stem}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace`)",
        path.display()
    );
    path
}

#[test]
fn check_rows_compare_each_partition_with_the_reference() {
    let tinynet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tinynet/tinynet.btir");
    let m = load(&tinynet);
    let values: Vec<f32> = (0..3 * 32 * 32)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let input = tensor_in(&[1, 3, 32, 32], &values);
    // Host only: nothing delegated, no rows.
    let e = engine();
    let mut s = ptr::null_mut();
    ok(unsafe { baton_session_create(e, m, ptr::null(), 0, &mut s) });
    let mut rows = 99;
    ok(unsafe { baton_session_check(s, &input, 1, &mut rows) });
    assert_eq!(rows, 0);
    unsafe { baton_session_free(s) };
    // The CPU plugin: every partition's output within the kit's tolerance.
    let dir = tempfile::tempdir().unwrap();
    let cfg = c(&format!(
        "cache_dir = {:?}\n[[plugin]]\npath = {:?}\n",
        dir.path().display().to_string(),
        workspace_plugin("baton_backend_cpu").display().to_string()
    ));
    let mut cpu = ptr::null_mut();
    ok(unsafe { baton_engine_create_from_string(cfg.as_ptr(), ptr::null(), &mut cpu) });
    ok(unsafe { baton_session_create(cpu, m, ptr::null(), 0, &mut s) });
    ok(unsafe { baton_session_check(s, &input, 1, &mut rows) });
    assert!(rows > 0);
    for k in 0..rows {
        let mut r: BatonCheckRow = unsafe { std::mem::zeroed() };
        ok(unsafe { baton_session_check_row(s, k, &mut r) });
        assert_eq!(
            unsafe { CStr::from_ptr(r.backend) }.to_str().unwrap(),
            "cpu"
        );
        assert_eq!(
            (r.passed, r.past, r.dtype),
            (1, 0, DType::F32.code()),
            "{r:?}"
        );
        assert!(
            r.elements > 0 && r.max_abs < 1e-4 && r.tolerance_ulp > 0,
            "{r:?}"
        );
        assert!(r.first_node.is_null());
    }
    let mut r: BatonCheckRow = unsafe { std::mem::zeroed() };
    assert_fails(
        unsafe { baton_session_check_row(s, rows, &mut r) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["check row index"],
    );
    assert_fails(
        unsafe { baton_session_check(s, &input, 1, ptr::null_mut()) },
        BATON_ERROR_INVALID_ARGUMENT,
        &["n_rows is NULL"],
    );
    unsafe {
        baton_session_free(s);
        baton_model_free(m);
        baton_engine_free(cpu);
        baton_engine_free(e);
    }
}

#[test]
fn a_model_with_a_dynamic_region_runs_into_a_buffer_of_its_capacity_and_checks_each_stage() {
    // y = Relu(Compress(2x, x[:, 0] > 0) · w): how many rows y has depends on x's values.
    let rows = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/dynamic/rows.btir");
    let graph = model::load(&rows).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = c(&format!(
        "cache_dir = {:?}\n[[plugin]]\npath = {:?}\n",
        dir.path().display().to_string(),
        workspace_plugin("baton_backend_cpu").display().to_string()
    ));
    let mut e = ptr::null_mut();
    ok(unsafe { baton_engine_create_from_string(cfg.as_ptr(), ptr::null(), &mut e) });
    let m = load(&rows);
    let mut s = ptr::null_mut();
    ok(unsafe { baton_session_create(e, m, ptr::null(), 0, &mut s) });
    let rust_engine = Engine::new(Config::default()).unwrap();
    for positive_every in [3usize, 4] {
        let values: Vec<f32> = (0..400)
            .map(|i| {
                if (i / 4) % positive_every == 0 {
                    0.5
                } else {
                    -0.25
                }
            })
            .collect();
        let input = tensor_in(&[100, 4], &values);
        // The caller lends the most y can be (every row kept); the run says what it wrote.
        let mut buf = vec![f32::NAN; 100 * 3];
        let mut out = [tensor_out(&mut buf)];
        ok(unsafe { baton_session_run(s, &input, 1, out.as_mut_ptr(), 1) });
        let kept = 100usize.div_ceil(positive_every);
        assert_eq!(out[0].rank, 2);
        assert_eq!(&out[0].shape[..2], &[kept as i64, 3]);
        assert_eq!(out[0].size, kept * 3 * 4);
        let mut rust = Session::new(&rust_engine, &graph, &BTreeMap::new()).unwrap();
        let want = rust.run(&[Tensor::from_f32(&[100, 4], &values)]).unwrap();
        let got = &buf[..kept * 3];
        for (g, w) in got.iter().zip(want[0].f32s()) {
            assert!((g - w).abs() <= 1e-5, "{g} vs {w}");
        }
        let mut n_rows = 0;
        ok(unsafe { baton_session_check(s, &input, 1, &mut n_rows) });
        let mut partitions = Vec::new();
        for k in 0..n_rows {
            let mut r: BatonCheckRow = unsafe { std::mem::zeroed() };
            ok(unsafe { baton_session_check_row(s, k, &mut r) });
            assert_eq!(r.passed, 1, "{r:?}");
            partitions.push(r.partition);
        }
        partitions.dedup();
        assert_eq!(partitions, [0, 1], "the prefix's partition and the rest's");
    }
    unsafe {
        baton_session_free(s);
        baton_model_free(m);
        baton_engine_free(e);
    }
}
