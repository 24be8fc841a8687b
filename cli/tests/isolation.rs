//! `isolation = "process"` through the `baton` command, with files: a plugin that
//! segfaults, aborts or hangs is contained, the run falls back and succeeds with the
//! portable kernels' answer; a missing or broken helper binary is a plugin failure too.
#![cfg(target_os = "linux")]

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::common::{config, plugin, q};
use support::{baton, tinynet};

/// `baton run` on the example with `config_body`, its output written to `dir/out`.
fn run_example(dir: &Path, config_body: &str, env: &[(&str, &str)]) -> (Output, String) {
    let cfg = config(dir, config_body);
    let (model, image) = tinynet();
    let out = dir.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "run",
            model.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ])
        .arg(format!("--input=image={}", image.display()))
        .args(["--output-dir", out.to_str().unwrap()])
        .env("BATON_CACHE_DIR", dir.join("cache"))
        .envs(env.iter().copied())
        .output()
        .expect("run baton");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    (o, stderr)
}

/// The example's output as the portable kernels compute it (no plugin configured).
fn portable_output() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (o, stderr) = run_example(dir.path(), "", &[]);
    assert!(o.status.success(), "{stderr}");
    std::fs::read(dir.path().join("out/probabilities.npy")).unwrap()
}

fn faulty(action: &str, at: &str, when: &str) -> String {
    format!(
        "[[plugin]]\npath = {}\nisolation = \"process\"\ntimeout_ms = 400\n\
         options = {{ action = \"{action}\", at = \"{at}\", when = \"{when}\" }}\n",
        q(&plugin("baton_faulty_plugin"))
    )
}

#[test]
fn a_plugin_that_crashes_or_hangs_in_its_process_is_contained_and_the_run_succeeds() {
    let want = portable_output();
    for (action, at, expect, fallback) in [
        (
            "segfault",
            "execute",
            "died during execute: killed by signal 11 (SIGSEGV)",
            "faulty failed, running its partition on the portable kernels",
        ),
        (
            "abort",
            "compile",
            "died during compile: killed by signal 6 (SIGABRT)",
            "faulty dropped, re-partitioning",
        ),
        (
            "hang",
            "init",
            "init did not return within 400 ms (timeout_ms); the plugin process was killed",
            "faulty dropped, re-partitioning",
        ),
        (
            "hang",
            "execute",
            "execute did not return within 400 ms",
            "running its partition on the portable kernels",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (o, stderr) = run_example(dir.path(), &faulty(action, at, "after-probe"), &[]);
        assert!(o.status.success(), "{action} at {at}: {stderr}");
        assert!(
            stderr.contains(expect) && stderr.contains(fallback),
            "{action} at {at}: {stderr}"
        );
        assert!(
            stderr.contains("nodes run by: host 11"),
            "{action} at {at}: {stderr}"
        );
        let got = std::fs::read(dir.path().join("out/probabilities.npy")).unwrap();
        assert_eq!(
            got, want,
            "{action} at {at}: not the portable kernels' answer"
        );
    }
}

#[test]
fn baton_devices_survives_a_probe_that_segfaults() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &faulty("segfault", "execute", "always"));
    let o = baton(&["devices", "--config", cfg.to_str().unwrap()], dir.path());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("(isolation: process)"), "{stdout}");
    assert!(
        stdout.contains("probe: FAILED") && stdout.contains("SIGSEGV"),
        "{stdout}"
    );
}

#[test]
fn a_missing_or_broken_helper_is_a_plugin_failure_named_with_where_it_looked() {
    let want = portable_output();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing = d.join("no-such-helper");
    // A "helper" that answers with bytes that are not the protocol.
    let garbage = d.join("garbage-helper");
    std::fs::write(
        &garbage,
        "#!/bin/sh\nprintf 'this is not a Baton reply, not at all' >&3\nsleep 5\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &garbage,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for (helper, expect) in [
        (&missing, "is not a file".to_string()),
        (
            &garbage,
            "sent a malformed reply to load (bad magic".to_string(),
        ),
    ] {
        let body = faulty("none", "execute", "always");
        let (o, stderr) = run_example(d, &body, &[("BATON_PLUGIN_HOST", helper.to_str().unwrap())]);
        assert!(o.status.success(), "{stderr}");
        assert!(
            stderr.contains(&expect) && stderr.contains(&helper.display().to_string()),
            "{stderr}"
        );
        assert!(stderr.contains("not loaded"), "{stderr}");
        let got = std::fs::read(d.join("out/probabilities.npy")).unwrap();
        assert_eq!(got, want);
    }
}

#[test]
fn the_cpu_plugin_gives_the_same_files_in_both_modes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    // tinynet (f32) and mixed (int8 QDQ groups: per-axis quantization crosses too).
    for (model, image) in [
        (
            root.join("tinynet/tinynet.btir"),
            root.join("tinynet/image.npy"),
        ),
        (root.join("mixed/mixed.btir"), root.join("mixed/image.npy")),
    ] {
        let mut outputs = Vec::new();
        for isolation in ["in-process", "process"] {
            let dir = tempfile::tempdir().unwrap();
            let body = format!(
                "[[plugin]]\npath = {}\nisolation = \"{isolation}\"\n",
                q(&plugin("baton_backend_cpu"))
            );
            let cfg = config(dir.path(), &body);
            let out = dir.path().join("out");
            let o = baton(
                &[
                    "run",
                    model.to_str().unwrap(),
                    "--config",
                    cfg.to_str().unwrap(),
                    &format!("--input=image={}", image.display()),
                    "--output-dir",
                    out.to_str().unwrap(),
                ],
                dir.path(),
            );
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{isolation}: {stderr}");
            assert!(
                !stderr.contains("host"),
                "{isolation}: not all on the plugin: {stderr}"
            );
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect();
            files.sort();
            outputs.push(files);
        }
        assert!(!outputs[0].is_empty());
        assert_eq!(
            outputs[0],
            outputs[1],
            "{}: outputs differ between modes",
            model.display()
        );
    }
}

#[test]
fn a_program_without_the_helper_beside_it_names_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let lone = bin.join("baton");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_baton"), &lone).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_baton"), &lone).unwrap();
    }
    let cfg = config(dir.path(), &faulty("none", "execute", "always"));
    let (model, image) = tinynet();
    let o = Command::new(&lone)
        .args([
            "run",
            model.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ])
        .arg(format!("--input=image={}", image.display()))
        .env("BATON_CACHE_DIR", dir.path().join("cache"))
        .env_remove("BATON_PLUGIN_HOST")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let beside = bin.join("baton-plugin-host");
    let above = dir.path().join("baton-plugin-host");
    assert!(
        stderr.contains("`baton-plugin-host` was not found")
            && stderr.contains(&beside.display().to_string())
            && stderr.contains(&above.display().to_string())
            && stderr.contains("BATON_PLUGIN_HOST"),
        "{stderr}"
    );
}
