//! Running one op or model case in this process, and classifying it. The isolated runner
//! calls this inside its child; tests may call it directly with their own [`Oracle`].
//!
//! **Op cases** (one node): `supports` → declined is `unsupported`; then compile → init →
//! execute through `run_once` (an error is `compile-fail`, `init-fail` or `exec-fail`, a
//! wrong output shape is `exec-fail`); then the oracle's outputs are compared under the
//! op's tolerance rule (`pass` or `mismatch`).
//!
//! **Model cases**: when the plugin accepts every node, the whole graph runs on it and its
//! outputs are compared under the `model` rule. When it declines every node the case is
//! `unsupported`. When it declines some, the kit does not guess how a host would
//! partition: it evaluates the graph node by node on the oracle and runs **each accepted
//! node alone** on the plugin, fed the oracle's values for that node's inputs, comparing
//! its outputs under the node's op rule. The first node that fails decides the class
//! (`failing_node` names it); if none fails the case is `pass-partial`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use baton_delegate_api::{DType, DeclineReason, Graph, OpKind, Support, Tensor};
use baton_reference as reference;
use baton_runtime_host::plugin::{run_once, PluginContext};
use baton_runtime_host::program::plugin_view;
use baton_runtime_host::HostError;

use crate::cases::{Case, CaseKind, QUANTIZED};
use crate::outcome::{CaseResult, Class};
use crate::tolerance::{compare, format_value, Rule, Tolerances};

/// Computes expected outputs.
pub trait Oracle {
    /// The outputs of `graph` for `inputs` (in `graph.inputs` order).
    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String>;
}

/// The host's reference executor: the oracle of every real run.
pub struct Reference;

impl Oracle for Reference {
    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        reference::run_graph(graph, inputs).map_err(|e| e.to_string())
    }
}

/// What a case runs against.
pub struct Harness<'a> {
    pub ctx: &'a PluginContext,
    pub device: u32,
    pub tolerances: &'a Tolerances,
    pub oracle: &'a dyn Oracle,
}

/// Runs an op or model case and classifies it. (ABI checks are run by `runner::abi`.)
pub fn run_graph_case(h: &Harness<'_>, case: &Case) -> CaseResult {
    let start = Instant::now();
    let mut r = blank(case);
    match (case.kind(), case.graph()) {
        (CaseKind::Op, Some((graph, inputs))) => op_case(h, graph, inputs, &mut r),
        (CaseKind::Model, Some((graph, inputs))) => {
            let whole = if case.op == QUANTIZED {
                Judged::Quantized
            } else {
                Judged::Model
            };
            model_case(h, graph, inputs, whole, &mut r)
        }
        _ => set(
            &mut r,
            Class::ReferenceFail,
            "not an op or model case".into(),
        ),
    }
    r.duration_ms = crate::outcome::millis(start.elapsed());
    r
}

/// A result carrying the case's identity, class `pass` and no evidence yet.
pub fn blank(case: &Case) -> CaseResult {
    CaseResult::new(
        &case.id,
        &case.op,
        case.kind().name(),
        case.dtype.map(|d| d.name()),
        Class::Pass,
        "",
    )
}

/// The class of a failed plugin call.
pub fn call_class(e: &HostError) -> Class {
    match e {
        HostError::PluginCall { call, .. } => match *call {
            "create" => Class::CreateFail,
            "supports" => Class::SupportsFail,
            "compile" => Class::CompileFail,
            "init" | "init_retained" => Class::InitFail,
            _ => Class::ExecFail,
        },
        _ => Class::ExecFail,
    }
}

/// Runs the oracle, turning a panic into an error.
pub fn run_oracle(
    oracle: &dyn Oracle,
    graph: &Graph,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, String> {
    match catch_unwind(AssertUnwindSafe(|| oracle.run(graph, inputs))) {
        Ok(r) => r,
        Err(payload) => Err(format!("panicked: {}", panic_text(&*payload))),
    }
}

/// The plugin's answers for `graph` as a host gets them: a node it cannot read (an op code
/// or dtype of a later BTIR minor than its `btir_minor`) is declined without asking it,
/// and it is asked about a graph without such nodes
/// ([`baton_runtime_host::program::plugin_view`]).
pub fn host_supports(ctx: &PluginContext, graph: &Graph) -> Result<Vec<Support>, HostError> {
    let (view, positions) = plugin_view(graph, ctx.lib.btir_minor());
    let asked = if view.nodes.is_empty() {
        Vec::new()
    } else {
        ctx.supports(&view)?
    };
    Ok(positions
        .into_iter()
        .map(|p| match p {
            Ok(i) => asked
                .get(i)
                .cloned()
                .unwrap_or_else(|| Support::no(DeclineReason::Other, "the plugin gave no answer")),
            Err(decline) => Support::No(decline),
        })
        .collect())
}

fn op_case(h: &Harness<'_>, graph: &Graph, inputs: &[Tensor], r: &mut CaseResult) {
    let answers = match host_supports(h.ctx, graph) {
        Ok(a) => a,
        Err(e) => return set(r, call_class(&e), e.to_string()),
    };
    r.total_nodes = Some(graph.nodes.len());
    if let Some(Support::No(d)) = answers.first() {
        r.delegated_nodes = Some(0);
        return set(
            r,
            Class::Unsupported,
            format!("declined ({}): {}", d.reason.name(), d.message),
        );
    }
    r.delegated_nodes = Some(graph.nodes.len());
    let got = match run_once(h.ctx, h.device, graph, inputs) {
        Ok(g) => g,
        Err(e) => return set(r, call_class(&e), e.to_string()),
    };
    let expected = match run_oracle(h.oracle, graph, inputs) {
        Ok(e) => e,
        Err(e) => return set(r, Class::ReferenceFail, format!("reference: {e}")),
    };
    let op = graph.nodes.first().map(|n| n.op);
    let judged = op.map_or(Judged::Model, Judged::Op);
    judge(h.tolerances, judged, &got, &expected, r);
}

/// Which tolerance rule judges an output.
#[derive(Clone, Copy)]
enum Judged {
    /// The rule of the op that produced it.
    Op(OpKind),
    /// A whole model's output: the `model` rule.
    Model,
    /// A whole quantized (QDQ) case's output: the `quantized` rule (quantization steps).
    Quantized,
}

fn model_case(
    h: &Harness<'_>,
    graph: &Graph,
    inputs: &[Tensor],
    whole: Judged,
    r: &mut CaseResult,
) {
    let answers = match host_supports(h.ctx, graph) {
        Ok(a) => a,
        Err(e) => return set(r, call_class(&e), e.to_string()),
    };
    let accepted: Vec<bool> = answers.iter().map(|a| *a == Support::Yes).collect();
    let taken = accepted.iter().filter(|&&a| a).count();
    r.total_nodes = Some(graph.nodes.len());
    r.delegated_nodes = Some(taken);
    if taken == 0 {
        let first = declined_list(graph, &answers, 1);
        return set(
            r,
            Class::Unsupported,
            format!("declined every node ({first})"),
        );
    }
    if taken == graph.nodes.len() {
        let got = match run_once(h.ctx, h.device, graph, inputs) {
            Ok(g) => g,
            Err(e) => return set(r, call_class(&e), e.to_string()),
        };
        let expected = match run_oracle(h.oracle, graph, inputs) {
            Ok(e) => e,
            Err(e) => return set(r, Class::ReferenceFail, format!("reference: {e}")),
        };
        return judge(h.tolerances, whole, &got, &expected, r);
    }
    mixed_model(h, graph, inputs, &accepted, r);
    if r.result == Class::Pass {
        r.result = Class::PassPartial;
        let took: Vec<String> = graph
            .nodes
            .iter()
            .zip(&accepted)
            .filter(|(_, &a)| a)
            .map(|(n, _)| n.label())
            .collect();
        r.message = format!(
            "the plugin took {taken} of {} nodes, each matched when run alone: {}; declined: {}",
            graph.nodes.len(),
            took.join(", "),
            declined_list(graph, &answers, 3)
        );
    }
}

/// Node by node on the oracle; each accepted node also alone on the plugin.
fn mixed_model(
    h: &Harness<'_>,
    graph: &Graph,
    inputs: &[Tensor],
    accepted: &[bool],
    r: &mut CaseResult,
) {
    let mut values: Vec<Option<Tensor>> = vec![None; graph.tensors.len()];
    for (&t, v) in graph.inputs.iter().zip(inputs) {
        values[t] = Some(v.clone());
    }
    let (mut max_abs, mut max_rel) = (0.0f64, 0.0f64);
    for (n, node) in graph.nodes.iter().enumerate() {
        let (sub, map) = graph.extract(&[n]);
        let sub_inputs: Option<Vec<Tensor>> =
            sub.inputs.iter().map(|&t| values[map[t]].clone()).collect();
        let Some(sub_inputs) = sub_inputs else {
            r.failing_node = Some(node.label());
            return set(
                r,
                Class::ReferenceFail,
                "an input of the node was never computed".into(),
            );
        };
        let expected = match run_oracle(h.oracle, &sub, &sub_inputs) {
            Ok(e) => e,
            Err(e) => {
                let label = node.label();
                // The reference kernels' errors already start with the node's label.
                let message = if e.starts_with(&format!("node {label}")) {
                    format!("reference: {e}")
                } else {
                    format!("reference on node {label}: {e}")
                };
                r.failing_node = Some(label);
                return set(r, Class::ReferenceFail, message);
            }
        };
        if accepted[n] && !sub.outputs.is_empty() {
            let got = match run_once(h.ctx, h.device, &sub, &sub_inputs) {
                Ok(g) => g,
                Err(e) => {
                    r.failing_node = Some(node.label());
                    return set(r, call_class(&e), format!("node {}: {e}", node.label()));
                }
            };
            judge(h.tolerances, Judged::Op(node.op), &got, &expected, r);
            max_abs = max_abs.max(r.max_abs_err.unwrap_or(0.0));
            max_rel = max_rel.max(r.max_rel_err.unwrap_or(0.0));
            r.max_abs_err = Some(max_abs);
            r.max_rel_err = Some(max_rel);
            if r.result != Class::Pass {
                r.failing_node = Some(node.label());
                r.message = format!("node {}: {}", node.label(), r.message);
                return;
            }
        }
        for (&t, v) in sub.outputs.iter().zip(expected) {
            values[map[t]] = Some(v);
        }
    }
}

/// Compares every output under the rule `judged` names and records the
/// evidence: `pass`, or `mismatch` with the worst element of the first failing output.
fn judge(
    tol: &Tolerances,
    judged: Judged,
    got: &[Tensor],
    expected: &[Tensor],
    r: &mut CaseResult,
) {
    if got.len() != expected.len() {
        return set(
            r,
            Class::Mismatch,
            format!(
                "{} outputs, the reference has {}",
                got.len(),
                expected.len()
            ),
        );
    }
    let (mut max_abs, mut max_rel) = (0.0f64, 0.0f64);
    let mut first_failure: Option<String> = None;
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let rule = match judged {
            Judged::Op(op) => tol.rule(e.dtype, Some(op)),
            Judged::Model => tol.rule(e.dtype, None),
            Judged::Quantized => tol.quantized_rule(e.dtype),
        };
        let c = compare(g, e, &rule);
        max_abs = max_abs.max(c.max_abs_err);
        max_rel = max_rel.max(c.max_rel_err);
        if c.ok || first_failure.is_some() {
            continue;
        }
        if let Some(s) = c.structural {
            first_failure = Some(format!("output {i}: {s}"));
            continue;
        }
        if let Some(w) = &c.worst {
            r.worst_index = Some(w.index.clone());
            r.worst_output = Some(i);
            r.got = Some(format_value(e.dtype, w.got));
            r.expected = Some(format_value(e.dtype, w.expected));
            first_failure = Some(format!(
                "output {i}: {} of {} elements outside tolerance ({}); worst at {:?}: got {}, expected {}",
                c.failures,
                e.len(),
                describe(&rule, e.dtype),
                w.index,
                format_value(e.dtype, w.got),
                format_value(e.dtype, w.expected),
            ));
        }
    }
    r.max_abs_err = Some(max_abs);
    r.max_rel_err = Some(max_rel);
    match first_failure {
        Some(msg) => set(
            r,
            Class::Mismatch,
            format!("{msg}; max abs err {max_abs:e}, max rel err {max_rel:e}"),
        ),
        None => set(r, Class::Pass, String::new()),
    }
}

/// The rule in words; for integer outputs `ulp` is written as quantization steps.
fn describe(rule: &Rule, dtype: DType) -> String {
    let unit = if dtype.is_float() { "ulp" } else { "steps" };
    format!(
        "abs {:e}, rel {:e}, {unit} {}{}",
        rule.abs,
        rule.rel,
        rule.ulp,
        if rule.signed_zero {
            ", signed zero"
        } else {
            ""
        }
    )
}

fn declined_list(graph: &Graph, answers: &[Support], limit: usize) -> String {
    let declined: Vec<String> = graph
        .nodes
        .iter()
        .zip(answers)
        .filter_map(|(n, a)| match a {
            Support::Yes => None,
            Support::No(d) => Some(format!(
                "{} ({}: {})",
                n.label(),
                d.reason.name(),
                d.message
            )),
        })
        .collect();
    let more = declined.len().saturating_sub(limit);
    let mut s = declined
        .into_iter()
        .take(limit)
        .collect::<Vec<_>>()
        .join("; ");
    if more > 0 {
        s.push_str(&format!("; and {more} more"));
    }
    s
}

fn set(r: &mut CaseResult, class: Class, message: String) {
    r.result = class;
    r.message = message;
}

/// The text of a panic payload.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}
