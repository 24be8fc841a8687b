//! `junit.xml`: one `<testsuite>` per op, one `<testcase>` per case.
//!
//! `<failure>` for mismatch, crash, timeout and every `*-fail` class of the plugin;
//! `<error>` for `reference-fail` (the kit could not judge); `<skipped>` for
//! `unsupported`; `pass-partial` passes with its explanation in `<system-out>`.
//! Every attribute and text is escaped, and characters XML 1.0 forbids are replaced.

use std::fmt::Write;

use super::Report;
use crate::outcome::{CaseResult, Class};

/// Renders the report as JUnit XML.
pub fn to_junit(report: &Report) -> String {
    let groups = report.by_op();
    let all: Vec<&CaseResult> = report.cases.iter().collect();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let (t, f, e, s, time) = counts(&all);
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{time:.6}\">",
        xml_escape(&format!("baton-conformance {}", report.plugin_label()))
    );
    for (op, cases) in &groups {
        let (t, f, e, s, time) = counts(cases);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{time:.6}\">",
            xml_escape(op)
        );
        for c in cases {
            testcase(&mut out, c);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn testcase(out: &mut String, c: &CaseResult) {
    let _ = write!(
        out,
        "    <testcase classname=\"baton-conformance.{}\" name=\"{}\" time=\"{:.6}\"",
        xml_escape(&c.op),
        xml_escape(&c.id),
        c.duration_ms / 1000.0
    );
    let body = details(c);
    match c.result {
        Class::Pass => out.push_str("/>\n"),
        Class::PassPartial => {
            let _ = writeln!(
                out,
                ">\n      <system-out>{}</system-out>\n    </testcase>",
                xml_escape(&c.message)
            );
        }
        // An expected failure (a declared driver quirk) is skipped, as xfail is in other
        // runners' JUnit, with the reason and the evidence kept.
        Class::Unsupported | Class::ExpectedFail => {
            let _ = writeln!(
                out,
                ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                xml_escape(&c.message)
            );
        }
        class => {
            let tag = if class == Class::ReferenceFail {
                "error"
            } else {
                "failure"
            };
            let _ = writeln!(
                out,
                ">\n      <{tag} type=\"{}\" message=\"{}\">{}</{tag}>\n    </testcase>",
                class.name(),
                xml_escape(&c.message),
                xml_escape(&body)
            );
        }
    }
}

/// The failure text: the message and every piece of evidence present.
fn details(c: &CaseResult) -> String {
    let mut s = format!("{}: {}", c.result, c.message);
    let mut field = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            let _ = write!(s, "\n{name}: {v}");
        }
    };
    field("max_abs_err", c.max_abs_err.map(|v| format!("{v:e}")));
    field("max_rel_err", c.max_rel_err.map(|v| format!("{v:e}")));
    field(
        "worst_index",
        c.worst_index.as_ref().map(|v| format!("{v:?}")),
    );
    field("got", c.got.clone());
    field("expected", c.expected.clone());
    field("failing_node", c.failing_node.clone());
    field("signal", c.signal.clone());
    field("exit_code", c.exit_code.map(|v| v.to_string()));
    field("stderr_tail", c.stderr_tail.clone());
    s
}

/// (tests, failures, errors, skipped, seconds)
fn counts(cases: &[&CaseResult]) -> (usize, usize, usize, usize, f64) {
    let f = cases
        .iter()
        .filter(|c| c.result.is_failure() && c.result != Class::ReferenceFail)
        .count();
    let e = cases
        .iter()
        .filter(|c| c.result == Class::ReferenceFail)
        .count();
    let s = cases
        .iter()
        .filter(|c| matches!(c.result, Class::Unsupported | Class::ExpectedFail))
        .count();
    let time = cases.iter().map(|c| c.duration_ms / 1000.0).sum();
    (cases.len(), f, e, s, time)
}

/// Escapes text for XML attributes and content. Characters that XML 1.0 does not allow
/// (control characters other than tab, newline and carriage return) become U+FFFD.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}
