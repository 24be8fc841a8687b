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

pub mod manifest;
pub mod report;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use baton_delegate_api::{DType, Graph, OpKind, Tensor};
use baton_onnx::{self as onnx, proto, OnnxError};
use baton_reference as reference;
use serde::Serialize;

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

    fn model_path(&self) -> PathBuf {
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

/// Runs every case under `dir` and applies `manifest`. `progress` sees each case as it
/// finishes.
pub fn run_suite(
    dir: &Path,
    manifest: &Manifest,
    tolerances: &Tolerances,
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
    let mut cases = Vec::with_capacity(sources.len());
    for source in &sources {
        let name = source.name();
        let raw = run_case(source, tolerances);
        let case = apply_manifest(name, raw, manifest);
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
    Ok(SuiteReport::new(
        dir,
        cases,
        stale,
        start.elapsed().as_secs_f64(),
    ))
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
    }
}

/// Runs one case (panics in the importer or the kernels become `fail-run`).
pub fn run_case(source: &SuiteCaseSource, tolerances: &Tolerances) -> RawOutcome {
    match catch_unwind(AssertUnwindSafe(|| run_case_inner(source, tolerances))) {
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
type DataSet = (String, Vec<(String, Tensor)>, Vec<(String, Tensor)>);

fn run_case_inner(source: &SuiteCaseSource, tolerances: &Tolerances) -> RawOutcome {
    let model_path = source.model_path();
    let model = match onnx::read_model(&model_path) {
        Ok(m) => m,
        Err(e) => return RawOutcome::new("(unreadable)", SuiteClass::FailImport, e.to_string()),
    };
    let Some(g) = model.graph.as_ref() else {
        return RawOutcome::new("(none)", SuiteClass::FailImport, "no graph");
    };
    let op = match g.node.as_slice() {
        [] => "(none)".to_string(),
        [n] => n.op_type.clone(),
        _ => "(graph)".to_string(),
    };
    let op_kind = OpKind::from_name(&op);
    if let Some(msg) = unsupported_dtype(g) {
        return RawOutcome::new(&op, SuiteClass::UnsupportedDtype, msg);
    }
    // Imported and folded as the host loads a model, with the importer and the reference
    // alone: the suite checks those two, not the host.
    let graph = match baton_onnx::load(&model_path) {
        Ok(mut g) => {
            reference::fold::fold_constants(&mut g);
            g
        }
        Err(e) => {
            let msg = e.to_string();
            let class = if msg.contains("has no Baton dtype") {
                SuiteClass::UnsupportedDtype
            } else {
                SuiteClass::FailImport
            };
            return RawOutcome::new(&op, class, msg);
        }
    };
    let initializers: std::collections::HashSet<&str> =
        g.initializer.iter().map(|t| t.name.as_str()).collect();
    let onnx_inputs: Vec<&str> = g
        .input
        .iter()
        .map(|v| v.name.as_str())
        .filter(|n| !initializers.contains(n))
        .collect();
    let onnx_outputs: Vec<&str> = g.output.iter().map(|v| v.name.as_str()).collect();

    let sets = match source {
        SuiteCaseSource::Dir(dir) => read_data_sets(dir, &op),
        SuiteCaseSource::Light { outputs, .. } => light_data_set(g, outputs, &op),
    };
    let sets = match sets {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut worst_abs = 0.0f64;
    let mut worst_rel = 0.0f64;
    for (set_name, inputs, expected) in sets {
        let bound = match bind(&graph, &graph.inputs, &onnx_inputs, inputs, "input") {
            Ok(b) => b,
            Err(m) => return RawOutcome::new(&op, SuiteClass::FailRun, format!("{set_name}: {m}")),
        };
        // Bind the inputs' symbolic dimensions and re-infer every shape (folding shape
        // arithmetic), as the host does before running; a graph whose shapes depend on
        // values keeps its import-time shapes and is checked by run_graph as it runs.
        let mut bindings = std::collections::BTreeMap::new();
        for (&t, x) in graph.inputs.iter().zip(&bound) {
            for (d, &v) in graph.tensors[t].shape.iter().zip(&x.shape) {
                if let baton_delegate_api::Dim::Sym(s) = d {
                    bindings.insert(s.clone(), v);
                }
            }
        }
        let specialized = reference::specialize(&graph, &bindings).ok();
        let got = match reference::run_graph(specialized.as_ref().unwrap_or(&graph), &bound) {
            Ok(o) => o,
            Err(e) => return RawOutcome::new(&op, SuiteClass::FailRun, format!("{set_name}: {e}")),
        };
        let expected = match bind(&graph, &graph.outputs, &onnx_outputs, expected, "output") {
            Ok(b) => b,
            Err(m) => {
                return RawOutcome::new(&op, SuiteClass::Mismatch, format!("{set_name}: {m}"))
            }
        };
        let mut problems = Vec::new();
        for ((&id, g_t), e_t) in graph.outputs.iter().zip(&got).zip(&expected) {
            let out_name = &graph.tensors[id].name;
            let rule = suite_rule(tolerances, e_t.dtype, op_kind, source.onnx_tolerance());
            let c = compare(g_t, e_t, &rule);
            if c.ok {
                continue;
            }
            if let Some(s) = c.structural {
                problems.push(format!("output '{out_name}': {s}"));
                continue;
            }
            worst_abs = worst_abs.max(c.max_abs_err);
            worst_rel = worst_rel.max(c.max_rel_err);
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
        if !problems.is_empty() {
            let mut r = RawOutcome::new(
                &op,
                SuiteClass::Mismatch,
                format!("{set_name}: {}", problems.join("; ")),
            );
            r.max_abs_err = Some(worst_abs);
            r.max_rel_err = Some(worst_rel);
            return r;
        }
    }
    RawOutcome::new(&op, SuiteClass::Pass, "")
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

fn is_dtype_error(e: &OnnxError) -> bool {
    match e {
        OnnxError::UnsupportedDtype { .. } => true,
        OnnxError::InFile { source, .. } => is_dtype_error(source),
        _ => false,
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

/// Reads every `test_data_set_*` of a case directory.
fn read_data_sets(dir: &Path, op: &str) -> std::result::Result<Vec<DataSet>, RawOutcome> {
    let sets = match data_sets(dir) {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => {
            return Err(RawOutcome::new(
                op,
                SuiteClass::FailRun,
                "no test_data_set_* directory",
            ))
        }
        Err(e) => return Err(RawOutcome::new(op, SuiteClass::FailRun, e)),
    };
    let mut out = Vec::with_capacity(sets.len());
    for set in &sets {
        let set_name = set
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let read = |prefix: &str| {
            let files =
                numbered(set, prefix).map_err(|e| RawOutcome::new(op, SuiteClass::FailRun, e))?;
            read_tensors(&files, op)
        };
        out.push((set_name, read("input_")?, read("output_")?));
    }
    Ok(out)
}

/// The one data set of a light model: generated inputs (see the module docs) and the
/// stored outputs.
fn light_data_set(
    g: &proto::GraphProto,
    outputs: &[PathBuf],
    op: &str,
) -> std::result::Result<Vec<DataSet>, RawOutcome> {
    use proto::type_proto::Value;
    let initializers: std::collections::HashSet<&str> =
        g.initializer.iter().map(|t| t.name.as_str()).collect();
    let mut inputs = Vec::new();
    for v in g
        .input
        .iter()
        .filter(|v| !initializers.contains(v.name.as_str()))
    {
        let t = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(Value::TensorType(t))
                if t.elem_type == proto::tensor_proto::DataType::Float as i32 =>
            {
                t
            }
            _ => {
                return Err(RawOutcome::new(
                    op,
                    SuiteClass::FailRun,
                    format!("input '{}': light models are fed float inputs only", v.name),
                ))
            }
        };
        let shape: Vec<usize> = t
            .shape
            .iter()
            .flat_map(|s| &s.dim)
            .map(|d| match d.value {
                Some(proto::tensor_shape_proto::dimension::Value::DimValue(n)) if n >= 0 => {
                    n as usize
                }
                _ => 1,
            })
            .collect();
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|i| (i as f64 / n as f64) as f32).collect();
        inputs.push((v.name.clone(), Tensor::from_f32(&shape, &values)));
    }
    if outputs.is_empty() {
        return Err(RawOutcome::new(
            op,
            SuiteClass::FailRun,
            "no light_*_output_N.pb file",
        ));
    }
    let expected = read_tensors(outputs, op)?;
    Ok(vec![("generated inputs".to_string(), inputs, expected)])
}

/// Reads `.pb` tensor files; an ONNX type with no Baton dtype is `unsupported-dtype`.
fn read_tensors(
    files: &[PathBuf],
    op: &str,
) -> std::result::Result<Vec<(String, Tensor)>, RawOutcome> {
    files
        .iter()
        .map(|f| {
            onnx::read_tensor_pb(f).map_err(|e| {
                let class = if is_dtype_error(&e) {
                    SuiteClass::UnsupportedDtype
                } else {
                    SuiteClass::FailRun
                };
                RawOutcome::new(op, class, e.to_string())
            })
        })
        .collect()
}

/// The `test_data_set_*` directories of a case, sorted by number.
fn data_sets(dir: &Path) -> std::result::Result<Vec<PathBuf>, String> {
    let mut sets: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| {
            let n = p
                .file_name()?
                .to_str()?
                .strip_prefix("test_data_set_")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    sets.sort();
    Ok(sets.into_iter().map(|(_, p)| p).collect())
}

/// `<prefix>N.pb` files of a data set, sorted by N.
fn numbered(dir: &Path, prefix: &str) -> std::result::Result<Vec<PathBuf>, String> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let n = p
                .file_name()?
                .to_str()?
                .strip_prefix(prefix)?
                .strip_suffix(".pb")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// Orders test-data tensors as the Baton graph's `ids`: by the `.pb` tensor names where
/// they are given, else by position in the ONNX graph's inputs (or outputs).
fn bind(
    graph: &Graph,
    ids: &[usize],
    onnx_order: &[&str],
    data: Vec<(String, Tensor)>,
    what: &str,
) -> std::result::Result<Vec<Tensor>, String> {
    let mut by_name: BTreeMap<String, Tensor> = BTreeMap::new();
    for (i, (name, t)) in data.into_iter().enumerate() {
        let key = if name.is_empty() {
            match onnx_order.get(i) {
                Some(n) => n.to_string(),
                None => {
                    return Err(format!(
                        "{what}_{i}.pb has no name and no matching graph {what}"
                    ))
                }
            }
        } else {
            name
        };
        by_name.insert(key, t);
    }
    ids.iter()
        .map(|&id| {
            let name = &graph.tensors[id].name;
            by_name
                .remove(name)
                .ok_or_else(|| format!("no {what} data for graph {what} '{name}'"))
        })
        .collect()
}
