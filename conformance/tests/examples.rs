//! The example plugins of `examples/plugins/` pass the kit on the ops they claim: the C one
//! built here with gcc as its header comment says, the Rust one as the workspace builds it.

mod common;

use std::path::Path;
use std::process::Command;

use baton_conformance::cases::{self};
use baton_conformance::runner::run_isolated;
use baton_conformance::Class;

/// Runs the Add, Sub, Mul and model cases and the ABI checks; every case must pass or be
/// declined, and every Add/Sub/Mul f32 case must be taken.
fn proves(plugin: &Path) {
    let ops: Vec<String> = ["Add", "Sub", "Mul", "Model"].map(String::from).to_vec();
    let selected = cases::selection(Some(&ops), true, None).unwrap();
    let run = run_isolated(&common::config(plugin, &[], 20.0), &selected).unwrap();
    let failed: Vec<String> = run
        .results
        .iter()
        .filter(|r| r.result.is_failure())
        .map(|r| format!("{} {}: {}", r.result, r.id, r.message))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let f32_ops = run
        .results
        .iter()
        .filter(|r| ["Add", "Sub", "Mul"].contains(&r.op.as_str()))
        .filter(|r| r.dtype.as_deref() == Some("f32"));
    for r in f32_ops {
        assert_eq!(r.result, Class::Pass, "{r:?}");
    }
    assert!(run.results.iter().any(|r| r.result == Class::PassPartial));
}

#[test]
fn c_addmul_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = tmp.path().join("libc_addmul.so");
    let src = common::workspace_root().join("examples/plugins/c-addmul/addmul.c");
    let include = common::workspace_root().join("delegate-api/include");
    let out = Command::new("gcc")
        .args([
            "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .arg("-I")
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&lib)
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    proves(&lib);
}

#[test]
fn rust_addmul_passes() {
    proves(&common::cdylib("rust_addmul"));
}
