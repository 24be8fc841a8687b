//! The suite's reports: `suite.json` (every case) and `suite.md` (counts per class and
//! per op, then the unexpected results).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{SuiteCase, SuiteClass};

/// The result of a suite run.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// The suite directory.
    pub suite: String,
    /// The tolerance policy, in words.
    pub tolerance_policy: String,
    /// Number of cases.
    pub total: usize,
    /// Cases per class (every class, zeros included).
    pub totals: BTreeMap<String, usize>,
    /// Per op (node op_type): cases per class.
    pub per_op: BTreeMap<String, BTreeMap<String, usize>>,
    /// Cases whose op is an op of the IR, and how many of them pass.
    pub ir_ops: IrOpStats,
    /// Cases whose op is one of [`MODEL_OPS`], and how many of them pass.
    pub model_ops: IrOpStats,
    /// Inference cases on plain tensors ([`super::plain_inference`]), and how many pass:
    /// the cases a user can drive with `.npy` files.
    pub plain_inference: IrOpStats,
    /// How the cases were run: `kit` (importer and reference alone) or `user path` (as
    /// `baton run` runs a model on `.npy` files).
    pub mode: String,
    /// Cases that failed and are not in the manifest.
    pub unexpected_failures: Vec<String>,
    /// Cases that passed although the manifest lists them.
    pub unexpected_passes: Vec<String>,
    /// Manifest entries that name no case of this suite.
    pub stale_manifest_entries: Vec<String>,
    /// Wall time of the run, in seconds.
    pub wall_s: f64,
    /// Whether the run failed (any unexpected failure).
    pub failed: bool,
    /// Every case.
    pub cases: Vec<SuiteCase>,
}

/// Pass counts restricted to cases whose op is in `OpKind::ALL`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IrOpStats {
    /// Cases whose op is an IR op.
    pub cases: usize,
    /// Of those, the ones that passed (pass or unexpected-pass).
    pub passed: usize,
}

/// The ops that models exported from PyTorch use (the union of the op histograms of the
/// peer models, silero VAD and the light models, plus quantization): the reference's pass
/// rate on their cases is the figure that says whether it can judge real models.
pub const MODEL_OPS: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "BatchNormalization",
    "LayerNormalization",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Sqrt",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Erf",
    "Relu",
    "LeakyRelu",
    "Clip",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Gelu",
    "Softmax",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "Reshape",
    "Flatten",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "Expand",
    "Pad",
    "Tile",
    "Where",
    "Cast",
    "Equal",
    "Not",
    "Greater",
    "Less",
    "And",
    "Shape",
    "Size",
    "Identity",
    "If",
    "Loop",
    "LSTM",
    "GRU",
    "Resize",
    "QuantizeLinear",
    "DequantizeLinear",
];

/// The files [`SuiteReport::write_all`] wrote.
#[derive(Clone, Debug)]
pub struct SuiteWritten {
    /// `suite.json`.
    pub json: PathBuf,
    /// `suite.md`.
    pub summary: PathBuf,
}

impl SuiteReport {
    /// Summarises `cases`.
    pub fn new(dir: &Path, cases: Vec<SuiteCase>, stale: Vec<String>, wall_s: f64) -> Self {
        let mut totals: BTreeMap<String, usize> = SuiteClass::ALL
            .iter()
            .map(|c| (c.name().to_string(), 0))
            .collect();
        let mut per_op: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        let mut ir_ops = IrOpStats::default();
        let mut model_ops = IrOpStats::default();
        let mut plain_inference = IrOpStats::default();
        let mut unexpected_failures = Vec::new();
        let mut unexpected_passes = Vec::new();
        for c in &cases {
            *totals.entry(c.class.name().to_string()).or_default() += 1;
            *per_op
                .entry(c.op.clone())
                .or_default()
                .entry(c.class.name().to_string())
                .or_default() += 1;
            let passed = matches!(c.class, SuiteClass::Pass | SuiteClass::UnexpectedPass);
            if c.op_in_ir {
                ir_ops.cases += 1;
                ir_ops.passed += usize::from(passed);
            }
            if MODEL_OPS.contains(&c.op.as_str()) {
                model_ops.cases += 1;
                model_ops.passed += usize::from(passed);
            }
            if c.plain_inference {
                plain_inference.cases += 1;
                plain_inference.passed += usize::from(passed);
            }
            if c.class.is_unexpected_failure() {
                unexpected_failures.push(c.name.clone());
            }
            if c.class == SuiteClass::UnexpectedPass {
                unexpected_passes.push(c.name.clone());
            }
        }
        SuiteReport {
            suite: dir.display().to_string(),
            tolerance_policy: format!(
                "float outputs: the looser of the kit's rule (op family / dtype) and ONNX's \
                 rtol={:e}, atol={:e} (light models: the rtol/atol of their data.json), sign of \
                 zero ignored; integer and bool outputs: the kit's rule",
                super::ONNX_RTOL,
                super::ONNX_ATOL
            ),
            total: cases.len(),
            failed: !unexpected_failures.is_empty(),
            totals,
            per_op,
            ir_ops,
            model_ops,
            plain_inference,
            mode: "kit".into(),
            unexpected_failures,
            unexpected_passes,
            stale_manifest_entries: stale,
            wall_s,
            cases,
        }
    }

    /// 0 when nothing failed unexpectedly (unexpected passes are only warnings), else 1.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.failed)
    }

    /// Cases with this class.
    pub fn count(&self, class: SuiteClass) -> usize {
        self.totals.get(class.name()).copied().unwrap_or(0)
    }

    /// The case named `name`.
    pub fn case(&self, name: &str) -> Option<&SuiteCase> {
        self.cases.iter().find(|c| c.name == name)
    }

    /// A manifest listing every failing case of this run, grouped under a comment per
    /// cause (`# op Foo is not in the IR`, `# DOUBLE tensors have no Baton dtype`, ...), with
    /// the existing manifest's reason where the case had one, else a short reason derived
    /// from the failure message.
    pub fn manifest_text(&self) -> String {
        let mut groups: BTreeMap<(SuiteClass, String), Vec<(&str, String)>> = BTreeMap::new();
        for c in &self.cases {
            if matches!(c.actual, SuiteClass::Pass) {
                continue;
            }
            let (group, derived) = short_reason(c);
            let reason = c.reason.clone().unwrap_or(derived);
            groups
                .entry((c.actual, group))
                .or_default()
                .push((c.name.as_str(), reason));
        }
        let mut s = String::new();
        for ((_, group), cases) in groups {
            let _ = writeln!(s, "# {group}");
            for (name, reason) in cases {
                let _ = writeln!(s, "{name}  {reason}");
            }
            s.push('\n');
        }
        s
    }

    /// The Markdown summary.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# ONNX test-data suite: `{}`\n", self.suite);
        let _ = writeln!(
            s,
            "**{}** — {} cases in {:.1} s, run in {} mode; tolerance: {}.\n",
            if self.failed { "FAILED" } else { "passed" },
            self.total,
            self.wall_s,
            self.mode,
            self.tolerance_policy
        );
        let pct = |n: usize, d: usize| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let _ = writeln!(
            s,
            "Cases whose op is an IR op: {} of {} pass ({:.1}%).\n",
            self.ir_ops.passed,
            self.ir_ops.cases,
            pct(self.ir_ops.passed, self.ir_ops.cases)
        );
        let _ = writeln!(
            s,
            "Cases of the ops exported models use (`MODEL_OPS`): {} of {} pass ({:.1}%).\n",
            self.model_ops.passed,
            self.model_ops.cases,
            pct(self.model_ops.passed, self.model_ops.cases)
        );
        let _ = writeln!(
            s,
            "Inference cases on plain tensors (numpy element types; no sequence, map or optional; no training op): {} of {} pass ({:.1}%).\n",
            self.plain_inference.passed,
            self.plain_inference.cases,
            pct(self.plain_inference.passed, self.plain_inference.cases)
        );
        s.push_str("| class | cases |\n|---|---:|\n");
        for c in SuiteClass::ALL {
            let _ = writeln!(s, "| {c} | {} |", self.count(c));
        }
        s.push_str("\n## Per op\n\n| op | cases |");
        for c in SuiteClass::ALL {
            let _ = write!(s, " {c} |");
        }
        s.push_str("\n|---|---:|");
        for _ in SuiteClass::ALL {
            s.push_str("---:|");
        }
        s.push('\n');
        for (op, counts) in &self.per_op {
            let total: usize = counts.values().sum();
            let _ = write!(s, "| {op} | {total} |");
            for c in SuiteClass::ALL {
                let _ = write!(s, " {} |", counts.get(c.name()).copied().unwrap_or(0));
            }
            s.push('\n');
        }
        let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
        for c in self.cases.iter().filter(|c| c.actual != SuiteClass::Pass) {
            *by_reason.entry(short_reason(c).0).or_default() += 1;
        }
        if !by_reason.is_empty() {
            let mut rows: Vec<(String, usize)> = by_reason.into_iter().collect();
            rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            s.push_str("\n## Failures by reason\n\n| reason | cases |\n|---|---:|\n");
            for (reason, n) in rows {
                let _ = writeln!(s, "| {} | {n} |", reason.replace('|', "\\|"));
            }
        }
        let unexpected: Vec<&SuiteCase> = self
            .cases
            .iter()
            .filter(|c| c.class.is_unexpected_failure() || c.class == SuiteClass::UnexpectedPass)
            .collect();
        if !unexpected.is_empty() {
            s.push_str(
                "\n## Unexpected results\n\n| case | op | class | message |\n|---|---|---|---|\n",
            );
            for c in unexpected {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} |",
                    c.name,
                    c.op,
                    c.class,
                    one_line(&c.message).replace('|', "\\|")
                );
            }
        }
        if !self.stale_manifest_entries.is_empty() {
            s.push_str("\n## Manifest entries naming no case\n\n");
            for n in &self.stale_manifest_entries {
                let _ = writeln!(s, "- {n}");
            }
        }
        s
    }

    /// Writes `suite.json` and `suite.md` into `dir` (created if needed).
    pub fn write_all(&self, dir: &Path) -> std::io::Result<SuiteWritten> {
        std::fs::create_dir_all(dir)?;
        let json = dir.join("suite.json");
        let summary = dir.join("suite.md");
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&json, text)?;
        std::fs::write(&summary, self.markdown())?;
        Ok(SuiteWritten { json, summary })
    }
}

fn one_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("");
    if l.chars().count() > 300 {
        let cut: String = l.chars().take(300).collect();
        format!("{cut}...")
    } else {
        l.to_string()
    }
}

/// A group comment and a one-line reason for a failing case.
fn short_reason(c: &SuiteCase) -> (String, String) {
    // Drop the `model <path>: <path>: ` prefix the importer's errors carry.
    let line = c.message.lines().next().unwrap_or("");
    let msg = line
        .rsplit("model.onnx: ")
        .next()
        .unwrap_or(line)
        .to_string();
    if let Some(i) = msg.find("op ") {
        if let Some(op) = msg[i + 3..].strip_suffix(" is not in the Baton IR") {
            return (
                format!("op {op} is not in the IR"),
                format!("op {op} not in the IR"),
            );
        }
    }
    if c.actual == SuiteClass::UnsupportedDtype {
        let ty = msg
            .split(|ch: char| !(ch.is_ascii_alphanumeric()))
            .find(|w| {
                w.len() > 2
                    && w.chars()
                        .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit())
                    && w.chars().next().is_some_and(|ch| ch.is_ascii_uppercase())
                    && *w != "ONNX"
            })
            .unwrap_or("unknown-type");
        let what = msg.split(", which").next().unwrap_or(&msg).to_string();
        return (format!("{ty} tensors have no Baton dtype"), what);
    }
    if let Some(group) = user_path_group(&msg) {
        let short: String = msg.chars().take(200).collect();
        return (group.to_string(), short);
    }
    if msg.contains("the model uses opset") {
        let reason = msg
            .split(';')
            .next()
            .unwrap_or(&msg)
            .replace("the model uses ", "");
        let range = baton_onnx::OPSETS;
        return (
            format!(
                "opsets the importer does not take (default domain: {} to {})",
                range.start(),
                range.end()
            ),
            reason,
        );
    }
    let short: String = msg.chars().take(200).collect();
    (format!("{}: {}", c.actual, c.op), short)
}

/// The group of a failure only the user's path meets (see [`super::user_path`]), by its
/// message.
fn user_path_group(msg: &str) -> Option<&'static str> {
    const NOT_NUMPY: [&str; 11] = [
        "bf16",
        "f8e4m3fn",
        "f8e4m3fnuz",
        "f8e5m2",
        "f8e5m2fnuz",
        "f8e8m0",
        "f4e2m1",
        "i4",
        "u4",
        "i2",
        "u2",
    ];
    if msg.contains("must be a constant")
        || msg.contains("must be constant")
        || msg.contains("needs a constant")
    {
        return Some("a shape-valued input given at run time (sessions do not specialise on input values yet)");
    }
    if msg.contains("is still symbolic after binding the inputs")
        || msg.contains("has a symbolic shape")
    {
        return Some("shapes known only at run time");
    }
    let lacks = |d: &&str| {
        msg.contains(&format!("does not feed a {d} input"))
            || msg.contains(&format!("expected {d} ["))
    };
    if NOT_NUMPY.iter().any(lacks) {
        return Some(
            "a dtype numpy lacks (bfloat16, float8, 4- and 2-bit): no .npy file carries it",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, op: &str, class: SuiteClass) -> SuiteCase {
        SuiteCase {
            name: name.into(),
            op: op.into(),
            op_in_ir: op != "Sign",
            class,
            actual: class,
            message: String::new(),
            reason: None,
            max_abs_err: None,
            max_rel_err: None,
            plain_inference: op != "(graph)",
        }
    }

    #[test]
    fn model_op_cases_are_counted_apart_from_other_ops() {
        let cases = vec![
            case("test_conv", "Conv", SuiteClass::Pass),
            case("test_if_seq", "If", SuiteClass::ExpectedFailure),
            case("test_sign", "Sign", SuiteClass::Pass),
            case("test_graph", "(graph)", SuiteClass::Pass),
        ];
        let r = SuiteReport::new(Path::new("node"), cases, Vec::new(), 0.0);
        assert_eq!((r.model_ops.passed, r.model_ops.cases), (1, 2));
        assert_eq!(r.total, 4);
        assert!(r.markdown().contains("1 of 2 pass (50.0%)"));
        assert_eq!((r.plain_inference.passed, r.plain_inference.cases), (2, 3));
        assert!(r.markdown().contains(
            "plain tensors (numpy element types; no sequence, map or optional; no training op): 2 of 3 pass (66.7%)"
        ));
    }
}
