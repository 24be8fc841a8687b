//! What a vendor's CI reads from the kit: `--abi-checks` runs whatever `--ops` selects,
//! per-case timings are measured, a plugin that does not load is said once, `--isolate
//! case` gives every case its own child, and `--help` defines the result classes.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use baton_conformance::cases;
use baton_conformance::runner::{run_isolated, Isolation};
use baton_conformance::Class;
use serde_json::Value;

fn kit(args: &[&str]) -> Output {
    Command::new(common::kit_exe())
        .args(args)
        .output()
        .expect("kit runs")
}

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn abi_checks_run_whatever_ops_selects() {
    let out = kit(&["--ops", "Add,Sub,Mul", "--abi-checks", "--list"]);
    assert!(out.status.success());
    let ids = String::from_utf8(out.stdout).unwrap();
    let abi = ids.lines().filter(|l| l.starts_with("ABI/")).count();
    assert!(abi > 0, "no ABI check selected:\n{ids}");
    assert_eq!(abi, cases::abi_checks().unwrap().len());
    for id in ids.lines().filter(|l| !l.starts_with("ABI/")) {
        let op = id.split('/').next().unwrap();
        assert!(["Add", "Sub", "Mul"].contains(&op), "{id}");
    }
    // Without the flag, --ops alone selects no check.
    let ops = ["Add".to_string()];
    assert!(cases::selection(Some(&ops), false, None)
        .unwrap()
        .iter()
        .all(|c| c.op == "Add"));
}

#[test]
fn per_case_durations_are_measured_in_json_and_junit() {
    let plugin = common::faulty_plugin();
    let tmp = tempfile::tempdir().unwrap();
    let out = kit(&[
        "--plugin",
        plugin.to_str().unwrap(),
        "--ops",
        "Relu",
        "--shard",
        "1/4",
        "--report-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = report(tmp.path());
    let cases = json["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let ms = c["duration_ms"].as_f64().unwrap();
        assert!(ms > 0.0, "{c}");
    }
    let xml = std::fs::read_to_string(tmp.path().join("junit.xml")).unwrap();
    let root = common::parse_xml(&xml).unwrap();
    let case = &root.children[0].children[0];
    let time: f64 = case.attr("time").unwrap().parse().unwrap();
    assert!(time > 0.0, "{xml}");
}

#[test]
fn a_plugin_that_does_not_load_is_said_once() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = tmp.path().join("libnot_a_plugin.so");
    std::fs::write(&lib, b"not an ELF file").unwrap();
    let out = kit(&[
        "--plugin",
        lib.to_str().unwrap(),
        "--ops",
        "Relu",
        "--report-dir",
        tmp.path().join("r").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = stderr.lines().filter(|l| l.contains("load-fail ")).count();
    assert_eq!(lines, 1, "{stderr}");
    assert!(
        stderr.contains("more cases failed with the same message"),
        "{stderr}"
    );
    // Every case is still a load-fail in the report.
    let json = report(&tmp.path().join("r"));
    let n = json["cases"].as_array().unwrap().len();
    assert!(n > 1);
    assert_eq!(json["totals"]["load-fail"], n);
    // summary.md says it once, with the count.
    let summary = std::fs::read_to_string(tmp.path().join("r/summary.md")).unwrap();
    assert_eq!(summary.matches("**load-fail**").count(), 1, "{summary}");
    assert!(
        summary.contains(&format!("- {n} cases — **load-fail**")),
        "{summary}"
    );
}

#[test]
fn isolate_case_starts_a_child_per_case() {
    let plugin = common::faulty_plugin();
    let listed = kit(&["--ops", "Relu", "--list"]);
    let listed = String::from_utf8(listed.stdout).unwrap();
    let ids: Vec<&str> = listed.lines().take(3).collect();
    assert_eq!(ids.len(), 3, "{listed}");
    let cases = common::cases_by_id(&ids);
    let mut config = common::config(&plugin, &[], 10.0);
    let run = run_isolated(&config, &cases).unwrap();
    assert_eq!(run.children, 1);
    config.isolation = Isolation::Case;
    let per_case = run_isolated(&config, &cases).unwrap();
    assert_eq!(per_case.children, cases.len());
    for (a, b) in run.results.iter().zip(&per_case.results) {
        assert_eq!((&a.id, a.result), (&b.id, b.result));
        assert!(
            b.result == Class::Pass || b.result == Class::Unsupported,
            "{b:?}"
        );
    }

    // A crash costs its case alone in either mode, and the report says which mode ran.
    let tmp = tempfile::tempdir().unwrap();
    let out = kit(&[
        "--plugin",
        plugin.to_str().unwrap(),
        "--option",
        "fault=crash-execute",
        "--ops",
        "Relu",
        "--shard",
        "1/8",
        "--isolate",
        "case",
        "--report-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let json = report(tmp.path());
    assert_eq!(json["isolation"], "case");
    for c in json["cases"].as_array().unwrap() {
        assert!(
            ["crash", "unsupported"].contains(&c["result"].as_str().unwrap()),
            "{c}"
        );
    }
    assert!(!kit(&["--isolate", "process", "--list"]).status.success());
}

#[test]
fn help_defines_the_result_classes_and_the_isolation_default() {
    let out = kit(&["--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    for word in [
        "pass-partial",
        "declined some nodes",
        "--isolate",
        "[default: run]",
    ] {
        assert!(help.contains(word), "--help lacks '{word}':\n{help}");
    }
    assert!(!help.contains("pass-undelegated"), "{help}");
}
