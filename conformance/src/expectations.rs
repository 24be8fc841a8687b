//! Expected failures per device: known driver quirks declared as data, not deleted tests
//! (in the spirit of wgpu's `tests/src/expectations.rs`).
//!
//! A plugin's expectations file has one entry per line, `#` starting a comment:
//!
//! ```text
//! # case                      device      result     reason
//! MaxPool/f32/2d_specials     llvmpipe    mismatch   NaN compares folded without SignedZeroInfNanPreserve
//! Log/f32/*                   *           mismatch   ...
//! ```
//!
//! - `case`: a case id, or a prefix ending in `*`;
//! - `device`: text contained in one of the plugin's devices (`name (driver version)` as
//!   the report lists them), case-insensitive; `*` for any device;
//! - `result`: the class expected (`mismatch`, `exec-fail`, ...);
//! - `reason`: the rest of the line, required: why, and where it is tracked.
//!
//! A case that ends in the expected class on a matching device becomes `expected-fail`
//! (not a failure of the run) with the reason in its message. A case that *passes* while
//! an entry expects it to fail is reported as an unexpected pass, so stale entries are
//! found and removed; an entry that matches no case is reported too.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::outcome::Class;
use crate::report::Report;

/// One declared expected failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// A case id, or a prefix ending in `*`.
    pub case: String,
    /// Lower-cased text a device description must contain; empty for any device.
    pub device: String,
    /// The class the case is expected to end in.
    pub result: Class,
    /// Why.
    pub reason: String,
}

impl Expectation {
    fn matches_case(&self, id: &str) -> bool {
        match self.case.strip_suffix('*') {
            Some(prefix) => id.starts_with(prefix),
            None => id == self.case,
        }
    }

    fn matches_devices(&self, devices: &[String]) -> bool {
        self.device.is_empty()
            || devices
                .iter()
                .any(|d| d.to_lowercase().contains(&self.device))
    }
}

/// The entries of one expectations file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expectations {
    /// Where they were read from, for messages.
    pub source: PathBuf,
    pub entries: Vec<Expectation>,
}

/// What applying expectations to a report found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Cases reclassified as `expected-fail`.
    pub expected: Vec<String>,
    /// `(case, reason)` of cases that passed although an entry expects a failure.
    pub unexpected_passes: Vec<(String, String)>,
    /// `(case, expected, got)` of cases that failed in another class than expected;
    /// they stay failures.
    pub other_failures: Vec<(String, Class, Class)>,
    /// Entries (for this device) that matched no case of the run.
    pub unused: Vec<String>,
}

impl Expectations {
    /// Reads an expectations file.
    pub fn load(path: &Path) -> Result<Expectations> {
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Expectations::parse(&text, path)
    }

    /// Parses the text of an expectations file; errors name the file and line.
    pub fn parse(text: &str, source: &Path) -> Result<Expectations> {
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |m: &str| Error::Usage(format!("{}:{}: {m}", source.display(), n + 1));
            let mut words = line.split_whitespace();
            let (Some(case), Some(device), Some(result)) =
                (words.next(), words.next(), words.next())
            else {
                return Err(bad("expected `case device result reason`"));
            };
            let reason = words.collect::<Vec<_>>().join(" ");
            if reason.is_empty() {
                return Err(bad("an expectation needs a reason"));
            }
            let result = Class::ALL
                .into_iter()
                .find(|c| c.name() == result)
                .filter(|c| c.is_failure())
                .ok_or_else(|| bad(&format!("'{result}' is not a failing result class")))?;
            entries.push(Expectation {
                case: case.to_string(),
                device: if device == "*" {
                    String::new()
                } else {
                    device.to_lowercase()
                },
                result,
                reason,
            });
        }
        Ok(Expectations {
            source: source.to_path_buf(),
            entries,
        })
    }

    /// Reclassifies the report's cases by the entries that apply to its plugin's
    /// devices, then recounts the report.
    pub fn apply(&self, report: &mut Report) -> Applied {
        let devices = report.plugin.info.devices.clone();
        let active: Vec<&Expectation> = self
            .entries
            .iter()
            .filter(|e| e.matches_devices(&devices))
            .collect();
        let mut used = vec![false; active.len()];
        let mut applied = Applied::default();
        for case in &mut report.cases {
            let Some(i) = active.iter().position(|e| e.matches_case(&case.id)) else {
                continue;
            };
            used[i] = true;
            let e = active[i];
            if case.result == e.result {
                case.result = Class::ExpectedFail;
                case.message = format!("expected {} ({}): {}", e.result, e.reason, case.message);
                applied.expected.push(case.id.clone());
            } else if case.result.is_failure() {
                applied
                    .other_failures
                    .push((case.id.clone(), e.result, case.result));
            } else if case.result != Class::Unsupported {
                applied
                    .unexpected_passes
                    .push((case.id.clone(), e.reason.clone()));
            }
        }
        applied.unused = active
            .iter()
            .zip(&used)
            .filter(|(_, u)| !**u)
            .map(|(e, _)| e.case.clone())
            .collect();
        for (id, reason) in &applied.unexpected_passes {
            report.notes.push(format!(
                "unexpected pass: {id} was expected to fail ({reason}); remove its entry from {}",
                self.source.display()
            ));
        }
        report.recount();
        applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::CaseResult;

    fn case(id: &str, result: Class) -> CaseResult {
        let mut c: CaseResult = serde_json::from_value(serde_json::json!({
            "id": id, "op": "Log", "kind": "op", "dtype": null, "result": "pass", "message": "",
            "max_abs_err": null, "max_rel_err": null, "worst_index": null, "worst_output": null,
            "got": null, "expected": null, "failing_node": null, "delegated_nodes": null,
            "total_nodes": null, "signal": null, "exit_code": null, "stderr_tail": null,
            "duration_ms": 0
        }))
        .expect("a case result");
        c.result = result;
        c
    }

    fn report(devices: &[&str], cases: Vec<CaseResult>) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "kit_version": "", "host_version": "", "abi_version": "",
            "plugin": { "path": "p", "sha256": null, "options": [], "name": null, "version": null,
                        "build_id": null, "abi": null, "devices": devices, "load_error": null,
                        "create_error": null },
            "tolerances": [], "timeout_s": 1.0, "shard": null, "ops": null, "totals": {},
            "failed": false, "notes": [], "cases": []
        }))
        .expect("a report");
        r.cases = cases;
        r.recount();
        r
    }

    const FILE: &str = "# quirks\nLog/f32/specials  llvmpipe  mismatch  subnormal log\n\
                        Exp/*  *  mismatch  all devices\nTanh/f32/a  llvmpipe  mismatch  stale\n";

    #[test]
    fn expected_failures_are_not_failures_and_unexpected_passes_are_reported() {
        let e = Expectations::parse(FILE, Path::new("x.txt")).unwrap();
        let mut r = report(
            &["llvmpipe (LLVM 15.0.6, 256 bits) (Mesa)"],
            vec![
                case("Log/f32/specials", Class::Mismatch),
                case("Exp/f32/big", Class::Pass),
                case("Add/f32/a", Class::Pass),
            ],
        );
        assert!(r.failed);
        let a = e.apply(&mut r);
        assert!(!r.failed);
        assert_eq!(a.expected, ["Log/f32/specials"]);
        assert_eq!(r.cases[0].result, Class::ExpectedFail);
        assert_eq!(a.unexpected_passes.len(), 1);
        assert!(r.notes[0].contains("Exp/f32/big"));
        assert_eq!(a.unused, ["Tanh/f32/a"]);
        assert_eq!(r.totals["expected-fail"], 1);
    }

    #[test]
    fn entries_for_other_devices_do_not_apply() {
        let e = Expectations::parse(FILE, Path::new("x.txt")).unwrap();
        let mut r = report(
            &["NVIDIA H200 (570.0)"],
            vec![case("Log/f32/specials", Class::Mismatch)],
        );
        e.apply(&mut r);
        assert!(r.failed);
        assert_eq!(r.cases[0].result, Class::Mismatch);
    }

    #[test]
    fn malformed_lines_name_the_file_and_line() {
        let err = Expectations::parse("A/b llvmpipe mismatch\n", Path::new("q.txt")).unwrap_err();
        assert!(err.to_string().contains("q.txt:1"), "{err}");
        let err = Expectations::parse("A/b * pass because\n", Path::new("q.txt")).unwrap_err();
        assert!(
            err.to_string().contains("not a failing result class"),
            "{err}"
        );
    }
}
