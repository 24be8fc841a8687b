//! ONNX backend test-data suites: the `node/`, `pytorch-operator/`, `pytorch-converted/`,
//! `simple/` and `light/` folders of `onnx/backend/test/data/` (see
//! `scripts/fetch-onnx-testdata.sh`).
//!
//! Two layouts are read (see [`SuiteCaseSource`]):
//! - a **case directory** with `model.onnx` and `test_data_set_*/` holding `input_N.pb`
//!   and `output_N.pb` (every folder but `light/`);
//! - a **light model**, a flat `light_NAME.onnx` beside `light_NAME_output_N.pb`. As ONNX's
//!   backend test runner does, each float input is fed `arange(n).reshape(shape) / n` in
//!   f32 (unknown dimensions taken as 1), and the tolerance is the model's `rtol`/`atol`
//!   from `../real/test_NAME/data.json` when that file exists.
//!
//! A case is imported with [`baton_onnx::load`], its constants folded with
//! [`baton_reference::fold::fold_constants`] (as the host loads a model), specialized for
//! its inputs with [`baton_reference::specialize()`], run on the reference with
//! [`baton_reference::run_graph`] and its outputs compared with the expected
//! ones: the importer and the reference alone, no host. Every case gets one [`SuiteClass`]; a [`Manifest`] lists the cases expected to
//! fail, with reasons.
//!
//! # Tolerance
//!
//! Float outputs pass under the looser of two policies: the kit's rule for the op and dtype
//! (from the tolerance files; whole-model rule for multi-node cases and ops outside the IR)
//! and ONNX's own test runner's `rtol = 1e-3`, `atol = 1e-7`. The two are merged into one
//! [`Rule`] with `abs = max(abs, 1e-7)`, `rel = max(rel, 1e-3)`, the kit's `ulp`, and the
//! sign of zero ignored (as `numpy.testing.assert_allclose` does). Integer and bool outputs
//! use the kit's rule (exact).

mod data;
pub mod manifest;
pub mod report;
pub mod user_path;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use baton_delegate_api::{DType, Graph, OpKind, Tensor};
use baton_onnx::{self as onnx, proto};
use baton_reference as reference;
use serde::Serialize;

use data::{bind, light_data_set, read_data_sets};
pub use manifest::Manifest;
pub use report::SuiteReport;

use crate::error::{Error, Result};
use crate::tolerance::{compare, format_value, Rule, Tolerances};

/// ONNX's backend test runner's relative tolerance.
pub const ONNX_RTOL: f64 = 1e-3;
/// ONNX's backend test runner's absolute tolerance.
pub const ONNX_ATOL: f64 = 1e-7;

/// Where a case's model and test data are.
#[derive(Clone, Debug, PartialEq)]
pub enum SuiteCaseSource {
    /// A directory with `model.onnx` and `test_data_set_*/`.
    Dir(PathBuf),
    /// A light model: `light_NAME.onnx`, generated inputs, expected outputs in
    /// `light_NAME_output_N.pb`.
    Light {
        /// The `.onnx` file.
        model: PathBuf,
        /// The expected outputs, in output order.
        outputs: Vec<PathBuf>,
        /// ONNX's `(rtol, atol)` for the model.
        onnx_tolerance: (f64, f64),
    },
}

impl SuiteCaseSource {
    /// The case's name: the directory's name, or the light model's file stem.
    pub fn name(&self) -> String {
        let path = match self {
            SuiteCaseSource::Dir(d) => d.as_path(),
            SuiteCaseSource::Light { model, .. } => model.as_path(),
        };
        path.file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub(crate) fn model_path(&self) -> PathBuf {
        match self {
            SuiteCaseSource::Dir(d) => d.join("model.onnx"),
            SuiteCaseSource::Light { model, .. } => model.clone(),
        }
    }

    fn onnx_tolerance(&self) -> (f64, f64) {
        match self {
            SuiteCaseSource::Dir(_) => (ONNX_RTOL, ONNX_ATOL),
            SuiteCaseSource::Light { onnx_tolerance, .. } => *onnx_tolerance,
        }
    }
}

/// The outcome class of a suite case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuiteClass {
    /// Imported, ran, and every output matched.
    Pass,
    /// The model could not be imported into the IR.
    FailImport,
    /// Imported, but running it (or reading its test data) failed.
    FailRun,
    /// Ran, but an output differs from the expected one.
    Mismatch,
    /// A tensor has an ONNX type with no Baton dtype (DOUBLE, STRING, ...).
    UnsupportedDtype,
    /// Failed, and the manifest lists it.
    ExpectedFailure,
    /// Passed, but the manifest lists it as failing (a warning: update the manifest).
    UnexpectedPass,
}

impl SuiteClass {
    /// Every class, in report order.
    pub const ALL: [SuiteClass; 7] = [
        SuiteClass::Pass,
        SuiteClass::FailImport,
        SuiteClass::FailRun,
        SuiteClass::Mismatch,
        SuiteClass::UnsupportedDtype,
        SuiteClass::ExpectedFailure,
        SuiteClass::UnexpectedPass,
    ];

    /// The class's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            SuiteClass::Pass => "pass",
            SuiteClass::FailImport => "fail-import",
            SuiteClass::FailRun => "fail-run",
            SuiteClass::Mismatch => "mismatch",
            SuiteClass::UnsupportedDtype => "unsupported-dtype",
            SuiteClass::ExpectedFailure => "expected-failure",
            SuiteClass::UnexpectedPass => "unexpected-pass",
        }
    }

    /// A failure that the manifest does not excuse.
    pub fn is_unexpected_failure(self) -> bool {
        matches!(
            self,
            SuiteClass::FailImport
                | SuiteClass::FailRun
                | SuiteClass::Mismatch
                | SuiteClass::UnsupportedDtype
        )
    }
}

impl std::fmt::Display for SuiteClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The result of one case.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteCase {
    /// The case directory's name (`test_add_bcast`).
    pub name: String,
    /// The op under test: the node's `op_type` for a single-node model, `(graph)` for
    /// several nodes, `(none)` for none, `(unreadable)` when the model does not decode.
    pub op: String,
    /// Whether `op` is an op of the IR ([`OpKind::from_name`]).
    pub op_in_ir: bool,
    /// The final class (after the manifest).
    pub class: SuiteClass,
    /// The class the case earned on its own (before the manifest).
    pub actual: SuiteClass,
    /// What went wrong (empty for a pass).
    pub message: String,
    /// The manifest's reason, when the case is listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Largest absolute error over the compared outputs (mismatches only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_abs_err: Option<f64>,
    /// Largest relative error over the compared outputs (mismatches only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rel_err: Option<f64>,
    /// An inference case on plain tensors (see [`plain_inference`]).
    pub plain_inference: bool,
}

/// How a case ended before the manifest is applied.
#[derive(Clone, Debug, PartialEq)]
pub struct RawOutcome {
    /// The op under test (see [`SuiteCase::op`]).
    pub op: String,
    /// Pass, FailImport, FailRun, Mismatch or UnsupportedDtype.
    pub class: SuiteClass,
    /// What went wrong.
    pub message: String,
    /// Worst errors, for mismatches.
    pub max_abs_err: Option<f64>,
    /// Worst relative error, for mismatches.
    pub max_rel_err: Option<f64>,
}

impl RawOutcome {
    fn new(op: &str, class: SuiteClass, message: impl Into<String>) -> RawOutcome {
        RawOutcome {
            op: op.to_string(),
            class,
            message: message.into(),
            max_abs_err: None,
            max_rel_err: None,
        }
    }
}

/// The cases under `dir`, sorted by name: each subdirectory holding a `model.onnx` (or
/// `dir` itself when it holds one), then each `light_*.onnx` file with its expected
/// outputs.
pub fn cases(dir: &Path) -> Result<Vec<SuiteCaseSource>> {
    if dir.join("model.onnx").is_file() {
        return Ok(vec![SuiteCaseSource::Dir(dir.to_path_buf())]);
    }
    let read = std::fs::read_dir(dir)
        .map_err(|e| Error::Usage(format!("--suite {}: {e}", dir.display())))?;
    let mut found = Vec::new();
    for path in read.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.join("model.onnx").is_file() {
            found.push(SuiteCaseSource::Dir(path));
            continue;
        }
        let Some(stem) = light_stem(&path) else {
            continue;
        };
        let outputs = (0..)
            .map(|i| dir.join(format!("{stem}_output_{i}.pb")))
            .take_while(|p| p.is_file())
            .collect();
        let onnx_tolerance = light_tolerance(dir, &stem).unwrap_or((ONNX_RTOL, ONNX_ATOL));
        found.push(SuiteCaseSource::Light {
            model: path,
            outputs,
            onnx_tolerance,
        });
    }
    found.sort_by_key(SuiteCaseSource::name);
    Ok(found)
}

/// `light_NAME` for a file `light_NAME.onnx`.
fn light_stem(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let stem = file.strip_suffix(".onnx")?;
    (stem.starts_with("light_") && path.is_file()).then(|| stem.to_string())
}

/// The `(rtol, atol)` ONNX's runner uses for a light model: from
/// `../real/test_NAME/data.json`, the file that points the runner at the model.
fn light_tolerance(dir: &Path, stem: &str) -> Option<(f64, f64)> {
    let name = stem.strip_prefix("light_")?;
    let file = dir
        .join("..")
        .join("real")
        .join(format!("test_{name}"))
        .join("data.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
    let get = |k: &str, default: f64| json.get(k).and_then(|v| v.as_f64()).unwrap_or(default);
    Some((get("rtol", ONNX_RTOL), get("atol", ONNX_ATOL)))
}

/// How a suite's cases are run.
pub enum SuiteMode<'e> {
    /// The importer and the reference alone: inputs bound as tensors, constants folded,
    /// the graph run with [`reference::run_graph`].
    Kit,
    /// As `baton run` runs a model on `.npy` files, on this engine (see [`user_path`]).
    User(&'e baton_runtime_host::Engine),
}

/// Runs every case under `dir` in `mode` and applies `manifest`. `progress` sees each
/// case as it finishes.
pub fn run_suite(
    dir: &Path,
    manifest: &Manifest,
    tolerances: &Tolerances,
    mode: &SuiteMode<'_>,
    progress: &mut dyn FnMut(&SuiteCase),
) -> Result<SuiteReport> {
    let start = Instant::now();
    let sources = cases(dir)?;
    if sources.is_empty() {
        return Err(Error::Usage(format!(
            "--suite {}: no case directories (with model.onnx) or light_*.onnx models found",
            dir.display()
        )));
    }
    let scratch =
        match mode {
            SuiteMode::Kit => None,
            SuiteMode::User(_) => Some(tempfile::tempdir().map_err(|e| {
                Error::Usage(format!("a scratch directory for the input files: {e}"))
            })?),
        };
    let mut cases = Vec::with_capacity(sources.len());
    for source in &sources {
        let name = source.name();
        let raw = match (mode, &scratch) {
            (SuiteMode::User(engine), Some(dir)) => {
                guarded(|| user_path::run_case(source, tolerances, engine, dir.path()))
            }
            _ => run_case(source, tolerances),
        };
        let mut case = apply_manifest(name, raw, manifest);
        case.plain_inference = plain_inference(source);
        progress(&case);
        cases.push(case);
    }
    let names: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    let stale = manifest
        .entries
        .keys()
        .filter(|k| !names.contains(k.as_str()))
        .cloned()
        .collect();
    let mut report = SuiteReport::new(dir, cases, stale, start.elapsed().as_secs_f64());
    if let SuiteMode::User(_) = mode {
        report.mode = "user path".into();
    }
    Ok(report)
}

/// Gives a case its final class.
pub fn apply_manifest(name: String, raw: RawOutcome, manifest: &Manifest) -> SuiteCase {
    let reason = manifest.reason(&name).map(str::to_string);
    let class = match (&reason, raw.class) {
        (Some(_), SuiteClass::Pass) => SuiteClass::UnexpectedPass,
        (Some(_), _) => SuiteClass::ExpectedFailure,
        (None, c) => c,
    };
    SuiteCase {
        op_in_ir: OpKind::from_name(&raw.op).is_some(),
        name,
        op: raw.op,
        class,
        actual: raw.class,
        message: raw.message,
        reason,
        max_abs_err: raw.max_abs_err,
        max_rel_err: raw.max_rel_err,
        plain_inference: false,
    }
}

/// Runs one case (panics in the importer or the kernels become `fail-run`).
pub fn run_case(source: &SuiteCaseSource, tolerances: &Tolerances) -> RawOutcome {
    guarded(|| run_case_inner(source, tolerances))
}

/// Whether a case is an inference case on plain tensors: every graph input and output a
/// tensor (no sequence, map or optional) of an element type numpy has (no string,
/// complex, bfloat16, float8, 4- or 2-bit type), and no node of the training domain.
/// These are the cases a user can drive with `.npy` files; an unreadable model is not
/// one.
pub fn plain_inference(source: &SuiteCaseSource) -> bool {
    use proto::tensor_proto::DataType as T;
    use proto::type_proto::Value;
    const NUMPY: [T; 12] = [
        T::Float,
        T::Float16,
        T::Double,
        T::Int8,
        T::Int16,
        T::Int32,
        T::Int64,
        T::Uint8,
        T::Uint16,
        T::Uint32,
        T::Uint64,
        T::Bool,
    ];
    let Ok(model) = onnx::read_model(&source.model_path()) else {
        return false;
    };
    let Some(g) = model.graph.as_ref() else {
        return false;
    };
    let plain = |v: &proto::ValueInfoProto| match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(Value::TensorType(t)) => NUMPY.iter().any(|&d| d as i32 == t.elem_type),
        _ => false,
    };
    g.input.iter().chain(&g.output).all(plain)
        && !g
            .node
            .iter()
            .any(|n| n.domain == "ai.onnx.preview.training")
}

/// `f`'s outcome, a panic becoming `fail-run` with its message.
fn guarded(f: impl FnOnce() -> RawOutcome) -> RawOutcome {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            RawOutcome::new("(panic)", SuiteClass::FailRun, format!("panicked: {msg}"))
        }
    }
}

/// One data set of a case: its name, inputs and expected outputs.
pub(crate) type DataSet = (String, Vec<(String, Tensor)>, Vec<(String, Tensor)>);

/// A case's model read and checked, before it is imported.
pub(crate) struct Prepared {
    /// The op under test (see [`SuiteCase::op`]).
    pub op: String,
    /// The model as decoded.
    pub model: proto::ModelProto,
    /// The graph's inputs that are not initializers, in order.
    pub onnx_inputs: Vec<String>,
    /// The graph's outputs, in order.
    pub onnx_outputs: Vec<String>,
}

impl Prepared {
    /// Reads the model of `source`: an unreadable model, one without a graph, or one with
    /// a dtype Baton lacks is the case's outcome.
    pub fn read(source: &SuiteCaseSource) -> std::result::Result<Prepared, RawOutcome> {
        let model = onnx::read_model(&source.model_path())
            .map_err(|e| RawOutcome::new("(unreadable)", SuiteClass::FailImport, e.to_string()))?;
        let Some(g) = model.graph.as_ref() else {
            return Err(RawOutcome::new(
                "(none)",
                SuiteClass::FailImport,
                "no graph",
            ));
        };
        let op = match g.node.as_slice() {
            [] => "(none)".to_string(),
            [n] => n.op_type.clone(),
            _ => "(graph)".to_string(),
        };
        if let Some(msg) = unsupported_dtype(g) {
            return Err(RawOutcome::new(&op, SuiteClass::UnsupportedDtype, msg));
        }
        let initializers: std::collections::HashSet<&str> =
            g.initializer.iter().map(|t| t.name.as_str()).collect();
        let onnx_inputs = g
            .input
            .iter()
            .map(|v| v.name.clone())
            .filter(|n| !initializers.contains(n.as_str()))
            .collect();
        let onnx_outputs = g.output.iter().map(|v| v.name.clone()).collect();
        Ok(Prepared {
            op,
            onnx_inputs,
            onnx_outputs,
            model,
        })
    }

    /// The case's data sets (see [`read_data_sets`] and [`light_data_set`]).
    pub fn data_sets(
        &self,
        source: &SuiteCaseSource,
    ) -> std::result::Result<Vec<DataSet>, RawOutcome> {
        match source {
            SuiteCaseSource::Dir(dir) => read_data_sets(dir, &self.op),
            SuiteCaseSource::Light { outputs, .. } => {
                let g = self.model.graph.as_ref().expect("checked by read");
                light_data_set(g, outputs, &self.op)
            }
        }
    }

    /// Orders a data set's tensors as `graph`'s inputs or outputs (see [`bind`]).
    pub fn bind(
        &self,
        graph: &Graph,
        data: Vec<(String, Tensor)>,
        output: bool,
    ) -> std::result::Result<Vec<Tensor>, String> {
        let (ids, names, what) = if output {
            (&graph.outputs, &self.onnx_outputs, "output")
        } else {
            (&graph.inputs, &self.onnx_inputs, "input")
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        bind(graph, ids, &names, data, what)
    }
}

fn run_case_inner(source: &SuiteCaseSource, tolerances: &Tolerances) -> RawOutcome {
    let prepared = match Prepared::read(source) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let op = prepared.op.as_str();
    // Imported and folded as the host loads a model, with the importer and the reference
    // alone: the suite checks those two, not the host.
    let graph = match baton_onnx::load(&source.model_path()) {
        Ok(mut g) => {
            reference::fold::fold_constants(&mut g);
            g
        }
        Err(e) => return import_failure(op, e.to_string()),
    };
    let sets = match prepared.data_sets(source) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut worst = Worst::default();
    for (set_name, inputs, expected) in sets {
        let bound = match prepared.bind(&graph, inputs, false) {
            Ok(b) => b,
            Err(m) => return RawOutcome::new(op, SuiteClass::FailRun, format!("{set_name}: {m}")),
        };
        // Bind the inputs' symbolic dimensions and re-infer every shape (folding shape
        // arithmetic), as the host does before running; a graph whose shapes depend on
        // values keeps its import-time shapes and is checked by run_graph as it runs.
        let bindings = baton_runtime_host::inputs::bindings(&graph, &bound);
        let specialized = reference::specialize(&graph, &bindings).ok();
        let got = match reference::run_graph(specialized.as_ref().unwrap_or(&graph), &bound) {
            Ok(o) => o,
            Err(e) => return RawOutcome::new(op, SuiteClass::FailRun, format!("{set_name}: {e}")),
        };
        let expected = match prepared.bind(&graph, expected, true) {
            Ok(b) => b,
            Err(m) => return RawOutcome::new(op, SuiteClass::Mismatch, format!("{set_name}: {m}")),
        };
        let check = OutputCheck {
            graph: &graph,
            op,
            source,
            tolerances,
            set_name: &set_name,
        };
        if let Some(r) = check.compare(&got, &expected, &mut worst) {
            return r;
        }
    }
    RawOutcome::new(op, SuiteClass::Pass, "")
}

/// The outcome of an import error: `unsupported-dtype` when the importer met a type
/// Baton lacks, else `fail-import`.
pub(crate) fn import_failure(op: &str, msg: String) -> RawOutcome {
    let class = if msg.contains("has no Baton dtype") {
        SuiteClass::UnsupportedDtype
    } else {
        SuiteClass::FailImport
    };
    RawOutcome::new(op, class, msg)
}

/// The worst errors seen over a case's data sets.
#[derive(Default)]
pub(crate) struct Worst {
    abs: f64,
    rel: f64,
}

/// What one data set's outputs are compared in.
pub(crate) struct OutputCheck<'a> {
    pub graph: &'a Graph,
    pub op: &'a str,
    pub source: &'a SuiteCaseSource,
    pub tolerances: &'a Tolerances,
    pub set_name: &'a str,
}

impl OutputCheck<'_> {
    /// Compares `got` with `expected` (both in the graph's output order): `None` when
    /// every output matches, else the case's mismatch.
    pub fn compare(
        &self,
        got: &[Tensor],
        expected: &[Tensor],
        worst: &mut Worst,
    ) -> Option<RawOutcome> {
        let op_kind = OpKind::from_name(self.op);
        let mut problems = Vec::new();
        for ((&id, g_t), e_t) in self.graph.outputs.iter().zip(got).zip(expected) {
            let out_name = &self.graph.tensors[id].name;
            let rule = suite_rule(
                self.tolerances,
                e_t.dtype,
                op_kind,
                self.source.onnx_tolerance(),
            );
            let c = compare(g_t, e_t, &rule);
            if c.ok {
                continue;
            }
            if let Some(s) = c.structural {
                problems.push(format!("output '{out_name}': {s}"));
                continue;
            }
            worst.abs = worst.abs.max(c.max_abs_err);
            worst.rel = worst.rel.max(c.max_rel_err);
            let mut m = format!(
                "output '{out_name}': {} of {} elements off, max abs err {:.3e}, max rel err {:.3e}",
                c.failures,
                e_t.len(),
                c.max_abs_err,
                c.max_rel_err
            );
            if let Some(w) = c.worst {
                m.push_str(&format!(
                    "; worst at {:?}: got {}, expected {}",
                    w.index,
                    format_value(e_t.dtype, w.got),
                    format_value(e_t.dtype, w.expected)
                ));
            }
            problems.push(m);
        }
        if problems.is_empty() {
            return None;
        }
        let mut r = RawOutcome::new(
            self.op,
            SuiteClass::Mismatch,
            format!("{}: {}", self.set_name, problems.join("; ")),
        );
        r.max_abs_err = Some(worst.abs);
        r.max_rel_err = Some(worst.rel);
        Some(r)
    }
}

/// The comparison rule of the suite: the looser of the kit's rule and ONNX's
/// `(rtol, atol)` (see the module docs).
pub fn suite_rule(
    tolerances: &Tolerances,
    dtype: DType,
    op: Option<OpKind>,
    (rtol, atol): (f64, f64),
) -> Rule {
    let kit = tolerances.rule(dtype, op);
    match dtype {
        d if d.is_float() => Rule {
            abs: kit.abs.max(atol),
            rel: kit.rel.max(rtol),
            ulp: kit.ulp,
            signed_zero: false,
        },
        _ => kit,
    }
}

/// The first graph input, output or initializer whose element type has no Baton dtype.
fn unsupported_dtype(g: &proto::GraphProto) -> Option<String> {
    use proto::type_proto::Value;
    let values = g
        .input
        .iter()
        .map(|v| ("input", v))
        .chain(g.output.iter().map(|v| ("output", v)));
    for (what, v) in values {
        if let Some(Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            if t.elem_type != 0 && onnx::baton_dtype(t.elem_type).is_none() {
                return Some(format!(
                    "{what} '{}' is {}, which has no Baton dtype",
                    v.name,
                    onnx::onnx_type_name(t.elem_type)
                ));
            }
        }
    }
    g.initializer
        .iter()
        .find(|t| onnx::baton_dtype(t.data_type).is_none())
        .map(|t| {
            format!(
                "initializer '{}' is {}, which has no Baton dtype",
                t.name,
                onnx::onnx_type_name(t.data_type)
            )
        })
}
