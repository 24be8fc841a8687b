//! The three reports of a run, written to one directory:
//!
//! - `report.json`: a [`Report`] (schema below), for machines and diffs;
//! - `junit.xml`: one `<testsuite>` per op, one `<testcase>` per case, for CI dashboards;
//! - `summary.md`: per-op counts and the failures, for people.
//!
//! `report.json` schema (version 1): an object with `schema_version`, `kit_version`,
//! `host_version`, `abi_version`, `plugin` (`path`, `sha256`, `options`, `name`,
//! `version`, `build_id`, `abi`, `devices`, `load_error`, `create_error`), `tolerances`
//! (the files used), `timeout_s`, `isolation` (`run`: one child process for the run,
//! `case`: one per case), `shard`, `ops`, `totals` (a count for every class name,
//! zeros included), `failed` (whether the exit code is 1), `notes`, and `cases`: an array
//! of [`CaseResult`] objects (`id`, `op`, `kind`, `dtype`, `result`, `message`,
//! `max_abs_err`, `max_rel_err`, `worst_index`, `worst_output`, `got`, `expected`,
//! `failing_node`, `delegated_nodes`, `total_nodes`, `signal`, `exit_code`, `stderr_tail`,
//! `duration_ms`; absent evidence is `null`).

mod junit;
mod markdown;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use junit::{to_junit, xml_escape};
pub use markdown::to_markdown;

use crate::error::{Error, Result};
use crate::outcome::{CaseResult, Class};
use crate::runner::protocol::PluginInfo;
use crate::runner::{RunConfig, RunOutcome};

/// Version of the `report.json` layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything a run found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub kit_version: String,
    pub host_version: String,
    pub abi_version: String,
    pub plugin: PluginSummary,
    pub tolerances: Vec<String>,
    pub timeout_s: f64,
    /// `run` or `case` (see [`crate::runner::Isolation`]); empty in reports of kits that
    /// had only the one-child-per-run mode.
    #[serde(default)]
    pub isolation: String,
    pub shard: Option<String>,
    pub ops: Option<Vec<String>>,
    pub totals: BTreeMap<String, usize>,
    pub failed: bool,
    pub notes: Vec<String>,
    pub cases: Vec<CaseResult>,
}

/// The plugin under test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PluginSummary {
    pub path: String,
    /// sha256 of the library file, computed by the parent (which never loads it).
    pub sha256: Option<String>,
    /// `key=value` options given.
    pub options: Vec<String>,
    #[serde(flatten)]
    pub info: PluginInfo,
}

/// The run parameters that go into a report beside the results.
#[derive(Clone, Debug, Default)]
pub struct RunMeta {
    pub tolerances: Vec<String>,
    pub shard: Option<String>,
    pub ops: Option<Vec<String>>,
}

/// Paths of the written reports.
#[derive(Clone, Debug)]
pub struct Written {
    pub json: PathBuf,
    pub junit: PathBuf,
    pub summary: PathBuf,
}

impl Report {
    /// Assembles a report from a finished run.
    pub fn new(config: &RunConfig, meta: RunMeta, outcome: RunOutcome) -> Report {
        let sha256 = std::fs::read(&config.plugin)
            .ok()
            .map(|b| baton_runtime_host::plugin::sha256_hex(&b));
        let plugin = PluginSummary {
            path: config.plugin.display().to_string(),
            sha256,
            options: config
                .options
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            info: outcome.plugin.unwrap_or_default(),
        };
        let mut totals: BTreeMap<String, usize> = Class::ALL
            .iter()
            .map(|c| (c.name().to_string(), 0))
            .collect();
        for r in &outcome.results {
            *totals.entry(r.result.name().to_string()).or_default() += 1;
        }
        let failed = outcome.results.iter().any(|r| r.result.is_failure());
        Report {
            schema_version: SCHEMA_VERSION,
            kit_version: crate::KIT_VERSION.into(),
            host_version: crate::HOST_VERSION.into(),
            abi_version: format!(
                "{}.{}",
                baton_delegate_api::abi::ABI_MAJOR,
                baton_delegate_api::abi::ABI_MINOR
            ),
            plugin,
            tolerances: meta.tolerances,
            timeout_s: config.timeout.as_secs_f64(),
            isolation: config.isolation.name().into(),
            shard: meta.shard,
            ops: meta.ops,
            totals,
            failed,
            notes: outcome.notes,
            cases: outcome.results,
        }
    }

    /// Recomputes `totals` and `failed` after cases were reclassified (by expectations).
    pub fn recount(&mut self) {
        for v in self.totals.values_mut() {
            *v = 0;
        }
        for r in &self.cases {
            *self.totals.entry(r.result.name().to_string()).or_default() += 1;
        }
        self.failed = self.cases.iter().any(|r| r.result.is_failure());
    }

    /// 0 when no case failed, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.failed)
    }

    /// Writes `report.json`, `junit.xml` and `summary.md` into `dir` (created if needed).
    pub fn write_all(&self, dir: &Path) -> Result<Written> {
        std::fs::create_dir_all(dir).map_err(|error| Error::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::Report(e.to_string()))?;
        let written = Written {
            json: dir.join("report.json"),
            junit: dir.join("junit.xml"),
            summary: dir.join("summary.md"),
        };
        write(&written.json, &json)?;
        write(&written.junit, &to_junit(self))?;
        write(&written.summary, &to_markdown(self))?;
        Ok(written)
    }

    /// Ops in order of first appearance, with their cases.
    pub fn by_op(&self) -> Vec<(&str, Vec<&CaseResult>)> {
        let mut out: Vec<(&str, Vec<&CaseResult>)> = Vec::new();
        for c in &self.cases {
            match out.iter_mut().find(|(op, _)| *op == c.op) {
                Some((_, v)) => v.push(c),
                None => out.push((&c.op, vec![c])),
            }
        }
        out
    }

    /// The plugin's `name version`, or its path when it never loaded.
    pub fn plugin_label(&self) -> String {
        match (&self.plugin.info.name, &self.plugin.info.version) {
            (Some(n), Some(v)) => format!("{n} {v}"),
            _ => self.plugin.path.clone(),
        }
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
    })
}
