//! The runner survives crashing and hanging plugins and still writes all three reports,
//! through the real command line.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs the CLI; returns (exit code, report.json).
fn run_cli(dir: &Path, args: &[&str]) -> (i32, Value) {
    let out = Command::new(common::kit_exe())
        .args(args)
        .arg("--report-dir")
        .arg(dir)
        .output()
        .expect("kit runs");
    let code = out.status.code().expect("exit code");
    for f in ["report.json", "junit.xml", "summary.md"] {
        assert!(
            dir.join(f).is_file(),
            "{f} missing after {args:?}; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
            .expect("report.json parses");
    (code, json)
}

fn listed(args: &[&str]) -> Vec<String> {
    let out = Command::new(common::kit_exe())
        .args(args)
        .arg("--list")
        .output()
        .expect("kit runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn check_survived(fault: &str, class: &str) {
    let plugin = common::faulty_plugin();
    let tmp = tempfile::tempdir().unwrap();
    let option = format!("fault={fault}");
    let selection = ["--ops", "Relu", "--shard", "1/8"];
    let ids = listed(&selection);
    assert_eq!(ids.len(), 3, "{ids:?}");
    let mut args = vec![
        "--plugin",
        plugin.to_str().unwrap(),
        "--option",
        &option,
        "--timeout",
        "2",
    ];
    args.extend(selection);
    let (code, json) = run_cli(tmp.path(), &args);
    assert_eq!(code, 1, "failing cases give exit code 1");
    let cases = json["cases"].as_array().expect("cases array");
    let got: Vec<&str> = cases.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(got, ids, "every selected case has a result, in order");
    // Each case is judged on its own, by a fresh child after each death: the f32 cases
    // the plugin takes die or hang one by one, the rest stay unsupported.
    let mut hit = 0;
    for c in cases {
        if c["dtype"] == "f32" {
            assert_eq!(c["result"], class, "{c}");
            hit += 1;
        } else {
            assert_eq!(c["result"], "unsupported", "{c}");
        }
    }
    assert_eq!(hit, 2, "{ids:?}");
    assert_eq!(json["totals"][class], hit);
    assert_eq!(json["failed"], true);
    let junit = std::fs::read_to_string(tmp.path().join("junit.xml")).unwrap();
    let root = common::parse_xml(&junit).expect("junit.xml is well formed");
    assert_eq!(root.attr("failures"), Some("2"));
    let summary = std::fs::read_to_string(tmp.path().join("summary.md")).unwrap();
    assert!(summary.contains(&format!("**{class}**")), "{summary}");
}

#[test]
fn survives_a_crashing_plugin() {
    check_survived("crash-execute", "crash");
}

#[test]
fn survives_a_hanging_plugin() {
    check_survived("hang-execute", "timeout");
}

#[test]
fn a_plugin_that_is_not_a_library_fails_every_case_and_still_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("libnot_a_plugin.so");
    std::fs::write(&fake, b"this is not an ELF file").unwrap();
    let dir = tmp.path().join("reports");
    let (code, json) = run_cli(
        &dir,
        &[
            "--plugin",
            fake.to_str().unwrap(),
            "--ops",
            "ABI,Add",
            "--shard",
            "1/10",
        ],
    );
    assert_eq!(code, 1);
    for c in json["cases"].as_array().unwrap() {
        assert_eq!(c["result"], "load-fail", "{c}");
        assert!(
            c["message"]
                .as_str()
                .unwrap()
                .contains("libnot_a_plugin.so"),
            "{c}"
        );
    }
    assert!(json["plugin"]["load_error"].is_string());
}

#[test]
fn usage_errors_exit_2() {
    let plugin = common::faulty_plugin();
    let p = plugin.to_str().unwrap();
    for args in [
        vec!["--plugin", p, "--shard", "0/3"],
        vec!["--plugin", p, "--shard", "4/3"],
        vec!["--plugin", p, "--ops", "Conv,NoSuchOp"],
        vec!["--plugin", p, "--option", "novalue"],
        vec!["--plugin", p, "--timeout", "-1"],
        vec!["--plugin", "/nonexistent/libx.so", "--ops", "Relu"],
        vec!["--plugin", p, "--tolerances", "/nonexistent/dir"],
        vec!["--ops", "Relu"],
    ] {
        let out = Command::new(common::kit_exe())
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn help_works_everywhere() {
    let out = Command::new(common::kit_exe())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--plugin",
        "--option",
        "--ops",
        "--report-dir",
        "--shard",
        "--timeout",
        "--tolerances",
        "--abi-checks",
        "--list",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}");
    }
    assert!(
        !text.contains("__child"),
        "the child subcommand stays hidden"
    );
    let out = Command::new(common::kit_exe())
        .args(["__child", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
}
