//! `summary.md`: the run at a glance, then a table of counts per op and class, then every
//! failure with its message (a load or create failure, which every case shares, once with
//! the number of cases).

use std::fmt::Write;

use super::Report;
use crate::outcome::{CaseResult, Class};

/// Renders the report as Markdown.
pub fn to_markdown(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Baton conformance: {}\n",
        cell(&report.plugin_label())
    );
    let verdict = if report.failed {
        "**FAILED**"
    } else {
        "**PASSED**"
    };
    let _ = writeln!(out, "{verdict}: {} cases.\n", report.cases.len());
    let p = &report.plugin;
    let _ = writeln!(out, "- plugin: `{}`", p.path);
    if let Some(h) = &p.sha256 {
        let _ = writeln!(out, "- sha256: `{h}`");
    }
    if !p.options.is_empty() {
        let _ = writeln!(out, "- options: `{}`", p.options.join(" "));
    }
    if let Some(e) = &p.info.load_error {
        let _ = writeln!(out, "- load error: {}", line(e));
    }
    if let Some(e) = &p.info.create_error {
        let _ = writeln!(out, "- create error: {}", line(e));
    }
    let _ = writeln!(
        out,
        "- host {} (ABI {}), kit {}; timeout {} s; shard {}",
        report.host_version,
        report.abi_version,
        report.kit_version,
        report.timeout_s,
        report.shard.as_deref().unwrap_or("all")
    );
    let _ = writeln!(out, "- tolerances: {}", report.tolerances.join(", "));
    for n in &report.notes {
        let _ = writeln!(out, "- note: {}", line(n));
    }

    // Columns: `pass` always, then every class that occurs.
    let columns: Vec<Class> = Class::ALL
        .into_iter()
        .filter(|c| *c == Class::Pass || report.cases.iter().any(|r| r.result == *c))
        .collect();
    out.push_str("\n## Results per op\n\n| op | cases |");
    for c in &columns {
        let _ = write!(out, " {} |", c.name());
    }
    out.push_str("\n|---|---:|");
    for _ in &columns {
        out.push_str("---:|");
    }
    out.push('\n');
    let groups = report.by_op();
    for (op, cases) in &groups {
        let _ = write!(out, "| {} | {} |", cell(op), cases.len());
        for c in &columns {
            let n = cases.iter().filter(|r| r.result == *c).count();
            let _ = write!(out, " {n} |");
        }
        out.push('\n');
    }
    let _ = write!(out, "| **total** | {} |", report.cases.len());
    for c in &columns {
        let _ = write!(
            out,
            " {} |",
            report.totals.get(c.name()).copied().unwrap_or(0)
        );
    }
    out.push('\n');

    let failures: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| c.result.is_failure())
        .collect();
    out.push_str("\n## Failures\n\n");
    if failures.is_empty() {
        out.push_str("None.\n");
    }
    // A plugin that does not load (or create) fails every case that needs it alike: each
    // such message is said once, with the number of cases it cost.
    let whole_plugin = |c: &CaseResult| matches!(c.result, Class::LoadFail | Class::CreateFail);
    let mut said: Vec<(Class, &str, usize)> = Vec::new();
    for c in failures.iter().filter(|c| whole_plugin(c)) {
        match said
            .iter_mut()
            .find(|(class, m, _)| *class == c.result && *m == c.message)
        {
            Some((_, _, n)) => *n += 1,
            None => said.push((c.result, &c.message, 1)),
        }
    }
    for (class, message, n) in &said {
        let _ = writeln!(out, "- {n} cases — **{class}**: {}", line(message));
    }
    if !said.is_empty() {
        out.push('\n');
    }
    for (op, cases) in &groups {
        let failed: Vec<&&CaseResult> = cases
            .iter()
            .filter(|c| c.result.is_failure() && !whole_plugin(c))
            .collect();
        if failed.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {}\n", cell(op));
        for c in failed {
            let _ = writeln!(out, "- `{}` — **{}**: {}", c.id, c.result, line(&c.message));
        }
        out.push('\n');
    }
    out
}

/// One line of text: newlines become spaces.
fn line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text safe inside a table cell.
fn cell(s: &str) -> String {
    line(s).replace('|', "\\|")
}
