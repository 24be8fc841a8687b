//! The three reports: required JSON fields, well-formed and escaped JUnit, Markdown tables.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use baton_conformance::report::{to_junit, to_markdown, xml_escape, RunMeta};
use baton_conformance::runner::protocol::PluginInfo;
use baton_conformance::{CaseResult, Class, Report, RunConfig, RunOutcome};
use serde_json::Value;

const NASTY: &str = "bad <tag> & \"quotes\" 'apos' ]]> \u{1}\u{7}ctl | pipe\nsecond line";

fn synthetic() -> Report {
    let mut results = Vec::new();
    for (i, class) in Class::ALL.iter().enumerate() {
        let op = if i % 2 == 0 { "Conv" } else { "Add<&>" };
        let mut r = CaseResult::new(
            &format!("{op}/f32/case_{i}_{NASTY}"),
            op,
            "op",
            Some("f32"),
            *class,
            format!("{} {NASTY}", class.name()),
        );
        if *class == Class::Mismatch {
            r.max_abs_err = Some(1.5);
            r.max_rel_err = Some(0.25);
            r.worst_index = Some(vec![0, 3]);
            r.got = Some("NaN".into());
            r.expected = Some("-0.0".into());
        }
        if *class == Class::Crash {
            r.signal = Some("SIGSEGV".into());
            r.stderr_tail = Some(NASTY.into());
        }
        r.duration_ms = 12.5;
        results.push(r);
    }
    let config = RunConfig {
        child_exe: PathBuf::from("/bin/true"),
        plugin: PathBuf::from("/nonexistent/lib<x>.so"),
        options: vec![("fault".into(), "a&b".into())],
        timeout: Duration::from_secs(10),
        tolerances_dir: None,
        isolation: Default::default(),
    };
    let outcome = RunOutcome {
        plugin: Some(PluginInfo {
            name: Some("vendor & co".into()),
            version: Some("1.<2>".into()),
            ..PluginInfo::default()
        }),
        results,
        children: 1,
        notes: vec![NASTY.into()],
    };
    Report::new(
        &config,
        RunMeta {
            tolerances: vec!["built-in:f32.toml".into()],
            shard: Some("1/1".into()),
            ops: None,
        },
        outcome,
    )
}

#[test]
fn json_has_the_required_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let report = synthetic();
    let written = report.write_all(tmp.path()).expect("reports written");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&written.json).unwrap())
        .expect("report.json parses");
    for key in [
        "schema_version",
        "kit_version",
        "host_version",
        "abi_version",
        "plugin",
        "tolerances",
        "totals",
        "cases",
        "failed",
    ] {
        assert!(json.get(key).is_some(), "report.json lacks {key}");
    }
    for key in ["name", "version", "path", "sha256", "options"] {
        assert!(json["plugin"].get(key).is_some(), "plugin lacks {key}");
    }
    for class in Class::ALL {
        assert_eq!(json["totals"][class.name()], 1, "totals of {class}");
    }
    let cases = json["cases"].as_array().unwrap();
    assert_eq!(cases.len(), Class::ALL.len());
    let names: Vec<&str> = Class::ALL.iter().map(|c| c.name()).collect();
    for c in cases {
        for key in [
            "id",
            "op",
            "result",
            "dtype",
            "max_abs_err",
            "max_rel_err",
            "message",
            "duration_ms",
        ] {
            assert!(c.get(key).is_some(), "case lacks {key}: {c}");
        }
        assert!(names.contains(&c["result"].as_str().unwrap()));
    }
    let mismatch = cases.iter().find(|c| c["result"] == "mismatch").unwrap();
    assert_eq!(mismatch["max_abs_err"], 1.5);
    assert_eq!(mismatch["worst_index"], serde_json::json!([0, 3]));
    assert_eq!(mismatch["got"], "NaN");
    let pass = cases.iter().find(|c| c["result"] == "pass").unwrap();
    assert!(pass["max_rel_err"].is_null());
    // Round trip through the typed form.
    let back: Report = serde_json::from_value(json).expect("typed round trip");
    assert_eq!(back, report);
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn junit_is_well_formed_and_escaped() {
    let report = synthetic();
    let xml = to_junit(&report);
    let root = common::parse_xml(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    assert_eq!(root.name, "testsuites");
    assert_eq!(root.children.len(), 2, "one testsuite per op");
    let conv = &root.children[0];
    assert_eq!(conv.attr("name"), Some("Conv"));
    assert_eq!(
        root.children[1].attr("name"),
        Some("Add<&>"),
        "names decode back"
    );
    let mut failures = 0;
    let mut skipped = 0;
    let mut errors = 0;
    for suite in &root.children {
        assert_eq!(suite.name, "testsuite");
        let n: usize = suite.attr("tests").unwrap().parse().unwrap();
        assert_eq!(n, suite.children.len());
        for case in &suite.children {
            assert_eq!(case.name, "testcase");
            let id = case.attr("name").unwrap();
            assert!(
                id.contains(NASTY.replace(['\u{1}', '\u{7}'], "\u{FFFD}").as_str()),
                "{id:?}"
            );
            for child in &case.children {
                match child.name.as_str() {
                    "failure" => failures += 1,
                    "skipped" => skipped += 1,
                    "error" => errors += 1,
                    "system-out" => {}
                    other => panic!("unexpected <{other}>"),
                }
            }
        }
    }
    // mismatch, crash, timeout, load/create/supports/compile/init/exec-fail
    assert_eq!(failures, 9);
    assert_eq!(skipped, 2, "unsupported and expected-fail are skipped");
    assert_eq!(errors, 1, "reference-fail is an error");
    assert_eq!(root.attr("failures"), Some("9"));
}

#[test]
fn escaping_covers_every_special_character() {
    assert_eq!(
        xml_escape("<a & 'b' \"c\">"),
        "&lt;a &amp; &apos;b&apos; &quot;c&quot;&gt;"
    );
    assert_eq!(xml_escape("tab\tnl\nnul\u{0}"), "tab\tnl\nnul\u{FFFD}");
}

#[test]
fn summary_has_a_table_per_op_and_the_failures() {
    let md = to_markdown(&synthetic());
    assert!(md.contains("| op | cases | pass |"), "{md}");
    assert!(md.contains("| Conv | 7 |"), "{md}");
    assert!(md.contains("| Add<&> | 7 |"), "{md}");
    assert!(md.contains("## Failures"));
    assert!(md.contains("**mismatch**"));
    assert!(
        !md.contains("**pass**"),
        "passing cases are not listed as failures"
    );
    for line in md.lines().filter(|l| l.starts_with("| ")) {
        assert!(
            !line.contains(" | pipe"),
            "pipes in cells are escaped: {line}"
        );
    }
}

#[test]
fn junit_times_are_the_cases_durations_in_seconds() {
    let report = synthetic();
    let root = common::parse_xml(&to_junit(&report)).unwrap();
    let case = &root.children[0].children[0];
    // 12.5 ms: a sub-second time is written, not rounded to 0.
    assert_eq!(case.attr("time"), Some("0.012500"));
    let total: f64 = root.attr("time").unwrap().parse().unwrap();
    assert!(
        (total - 0.0125 * report.cases.len() as f64).abs() < 1e-9,
        "{total}"
    );
}

#[test]
fn reports_of_earlier_kits_still_read() {
    // `pass-undelegated` was the name of `pass-partial`; durations were whole milliseconds.
    let old: Class = serde_json::from_str("\"pass-undelegated\"").unwrap();
    assert_eq!(old, Class::PassPartial);
    let mut json = serde_json::to_value(synthetic()).unwrap();
    json.as_object_mut().unwrap().remove("isolation");
    json["cases"][0]["duration_ms"] = serde_json::json!(3);
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back.cases[0].duration_ms, 3.0);
    assert_eq!(back.isolation, "");
}
