//! What happened to one case: its [`Class`] and the evidence, as one [`CaseResult`].
//!
//! The same struct is streamed by the child process (one JSON line per case) and stored in
//! `report.json`, so the report schema is this file.

use serde::{Deserialize, Serialize};

/// The classification of a finished case.
///
/// | class | meaning |
/// |---|---|
/// | `pass` | the plugin ran every node and matched the reference within tolerance |
/// | `pass-partial` | a model case the plugin ran only part of: it declined some nodes (the reference ran them) and every partition of the nodes it accepted (grouped as a host groups them) matched when run on their own, fed the reference's values; `delegated_nodes` of `total_nodes` says how much; earlier kits called it `pass-undelegated` |
/// | `unsupported` | the plugin declined the case's node (op cases), every node (model cases) or the check's subject |
/// | `load-fail` | the library failed to load or refused the ABI handshake |
/// | `create-fail` | creating a context (or querying its devices) failed |
/// | `supports-fail` | the `supports` call returned an error |
/// | `compile-fail` / `init-fail` / `exec-fail` | that call returned an error (exec-fail includes a wrong output shape) |
/// | `mismatch` | outputs differ from the reference beyond tolerance |
/// | `crash` | the child process died (a signal or a non-zero exit) while running the case |
/// | `timeout` | the case ran longer than the timeout; the child was killed |
/// | `reference-fail` | the reference executor itself failed on the case: the kit could not judge the plugin |
/// | `expected-fail` | a failure of the class an `--expectations` entry declares for this case and device (a known driver quirk); not a failure of the run |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    Pass,
    /// Written `pass-undelegated` by earlier kits, which read the same.
    #[serde(alias = "pass-undelegated")]
    PassPartial,
    Unsupported,
    LoadFail,
    CreateFail,
    SupportsFail,
    CompileFail,
    InitFail,
    ExecFail,
    Mismatch,
    Crash,
    Timeout,
    ReferenceFail,
    ExpectedFail,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 14] = [
        Class::Pass,
        Class::PassPartial,
        Class::Unsupported,
        Class::LoadFail,
        Class::CreateFail,
        Class::SupportsFail,
        Class::CompileFail,
        Class::InitFail,
        Class::ExecFail,
        Class::Mismatch,
        Class::Crash,
        Class::Timeout,
        Class::ReferenceFail,
        Class::ExpectedFail,
    ];

    /// The string used in reports (`pass-partial`, `exec-fail`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Class::Pass => "pass",
            Class::PassPartial => "pass-partial",
            Class::Unsupported => "unsupported",
            Class::LoadFail => "load-fail",
            Class::CreateFail => "create-fail",
            Class::SupportsFail => "supports-fail",
            Class::CompileFail => "compile-fail",
            Class::InitFail => "init-fail",
            Class::ExecFail => "exec-fail",
            Class::Mismatch => "mismatch",
            Class::Crash => "crash",
            Class::Timeout => "timeout",
            Class::ReferenceFail => "reference-fail",
            Class::ExpectedFail => "expected-fail",
        }
    }

    /// Whether the class makes the run fail (exit code 1): everything but `pass`,
    /// `pass-partial`, `unsupported` and `expected-fail`.
    pub fn is_failure(self) -> bool {
        !matches!(
            self,
            Class::Pass | Class::PassPartial | Class::Unsupported | Class::ExpectedFail
        )
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One finished case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// Stable case id, `Op/dtype/description`.
    pub id: String,
    /// The op name, `Model` or `ABI`.
    pub op: String,
    /// `op`, `model` or `abi`.
    pub kind: String,
    /// The case's element type (`f32`, `i64`, ...); null for ABI checks.
    pub dtype: Option<String>,
    pub result: Class,
    /// What happened, in words (the plugin's error text, the mismatch, the signal, ...).
    pub message: String,
    /// Largest |got - expected| over elements where both are finite; null when no
    /// comparison took place.
    pub max_abs_err: Option<f64>,
    /// Largest |got - expected| / |expected| over finite elements with expected != 0.
    pub max_rel_err: Option<f64>,
    /// Multi-index of the worst failing element (mismatch only).
    pub worst_index: Option<Vec<usize>>,
    /// Which output the worst element is in.
    pub worst_output: Option<usize>,
    /// The plugin's value there, formatted in the output dtype (`NaN`, `-inf`, `-0.0`, ...).
    pub got: Option<String>,
    /// The reference value there.
    pub expected: Option<String>,
    /// Model cases: the node, or the partition (first and last node), that failed (see
    /// `runner::exec`).
    pub failing_node: Option<String>,
    /// Nodes the plugin accepted / nodes in the graph.
    pub delegated_nodes: Option<usize>,
    pub total_nodes: Option<usize>,
    /// Crash: the signal (`SIGSEGV`) or the exit code of the child.
    pub signal: Option<String>,
    pub exit_code: Option<i32>,
    /// Crash and timeout: the last lines the child wrote to stderr.
    pub stderr_tail: Option<String>,
    /// Wall time of the case in milliseconds (fractional: most op cases take well under
    /// one), as the child measured it from the start of the case to its verdict; for a
    /// crash or a timeout, as the parent measured it until the child died or was killed.
    pub duration_ms: f64,
}

/// A duration in milliseconds, to the microsecond: what `duration_ms` holds.
pub fn millis(d: std::time::Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

impl CaseResult {
    /// A result with only the identity, class and message set.
    pub fn new(
        id: &str,
        op: &str,
        kind: &str,
        dtype: Option<&str>,
        result: Class,
        message: impl Into<String>,
    ) -> CaseResult {
        CaseResult {
            id: id.to_string(),
            op: op.to_string(),
            kind: kind.to_string(),
            dtype: dtype.map(str::to_string),
            result,
            message: message.into(),
            max_abs_err: None,
            max_rel_err: None,
            worst_index: None,
            worst_output: None,
            got: None,
            expected: None,
            failing_node: None,
            delegated_nodes: None,
            total_nodes: None,
            signal: None,
            exit_code: None,
            stderr_tail: None,
            duration_ms: 0.0,
        }
    }
}
