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
//! partition: it evaluates the graph node by node on the oracle, groups the accepted nodes
//! into partitions as a host does (`baton_partitioner`), and runs **each partition** on
//! the plugin, fed the oracle's values for its inputs, comparing its outputs under the
//! op's rule (one node) or the case's (more). The first partition that fails decides the
//! class (`failing_node` names it); if none fails the case is `pass-partial`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use baton_delegate_api::shape::{bound_graph, has_value_dependent_shape};
use baton_delegate_api::{DType, Decline, DeclineReason, Graph, OpKind, Support, Tensor};
use baton_partitioner::{partition, BackendAnswers, Policy};
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
    // As a host does: a plugin that takes bounded outputs (ABI 1.3) is asked with the
    // value-dependent nodes' outputs at their bounds (as `run_once` compiles them); any
    // other is never given such a node.
    let bounded = ctx.lib.bounded_outputs();
    let bounded_graph = match bounded {
        true => bound_graph(graph).map(|(g, _)| g).ok(),
        false => None,
    };
    let graph = bounded_graph.as_ref().unwrap_or(graph);
    let (view, positions) = plugin_view(graph, ctx.lib.btir_minor());
    let positions = positions.into_iter().zip(&graph.nodes).map(|(p, node)| {
        if !bounded && has_value_dependent_shape(node.op) {
            Err(Decline {
                reason: DeclineReason::Shape,
                message: format!(
                    "{}'s output extents depend on its values: only a plugin that takes \
                     bounded outputs (ABI 1.3 BATON_CAP_BOUNDED_OUTPUTS) is given it",
                    node.op
                ),
            })
        } else {
            p
        }
    });
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
    mixed_model(h, graph, inputs, &answers, whole, r);
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
            "the plugin took {taken} of {} nodes, each partition of them matched as a host runs it: {}; declined: {}",
            graph.nodes.len(),
            took.join(", "),
            declined_list(graph, &answers, 3)
        );
    }
}

/// The oracle runs the graph node by node; the accepted nodes are then grouped into
/// partitions as a host groups them (`baton_partitioner`, no size limits), and each
/// partition runs on the plugin as one subgraph, fed the oracle's values for its inputs.
/// A plugin that claims only whole groups (a QDQ group on an NPU) is judged on what a
/// host would hand it, not on pieces it never sees alone. A one-node partition is
/// judged under its op's rule, a larger one under the case's rule (`whole`).
fn mixed_model(
    h: &Harness<'_>,
    graph: &Graph,
    inputs: &[Tensor],
    answers: &[Support],
    whole: Judged,
    r: &mut CaseResult,
) {
    let Some(values) = oracle_values(h, graph, inputs, r) else {
        return;
    };
    let policy = Policy {
        priority: vec![PLUGIN.into()],
        ..Policy::default()
    };
    let plan = match partition(
        graph,
        &[BackendAnswers {
            backend: PLUGIN.into(),
            answers: answers.to_vec(),
        }],
        &policy,
    ) {
        Ok(p) => p,
        Err(e) => return set(r, Class::ReferenceFail, format!("partitioning: {e}")),
    };
    let (mut max_abs, mut max_rel) = (0.0f64, 0.0f64);
    for part in &plan.partitions {
        let (sub, map) = graph.extract(&part.nodes);
        if sub.outputs.is_empty() {
            continue;
        }
        let (name, label) = partition_label(graph, &part.nodes);
        let sub_inputs: Option<Vec<Tensor>> =
            sub.inputs.iter().map(|&t| values[map[t]].clone()).collect();
        let expected: Option<Vec<Tensor>> = sub
            .outputs
            .iter()
            .map(|&t| values[map[t]].clone())
            .collect();
        let (Some(sub_inputs), Some(expected)) = (sub_inputs, expected) else {
            r.failing_node = Some(name);
            return set(
                r,
                Class::ReferenceFail,
                format!("{label}: a value was never computed"),
            );
        };
        let got = match run_once(h.ctx, h.device, &sub, &sub_inputs) {
            Ok(g) => g,
            Err(e) => {
                r.failing_node = Some(name);
                return set(r, call_class(&e), format!("{label}: {e}"));
            }
        };
        let rule = match part.nodes[..] {
            [n] => Judged::Op(graph.nodes[n].op),
            _ => whole,
        };
        judge(h.tolerances, rule, &got, &expected, r);
        max_abs = max_abs.max(r.max_abs_err.unwrap_or(0.0));
        max_rel = max_rel.max(r.max_rel_err.unwrap_or(0.0));
        r.max_abs_err = Some(max_abs);
        r.max_rel_err = Some(max_rel);
        if r.result != Class::Pass {
            r.message = format!("{label}: {}", r.message);
            r.failing_node = Some(name);
            return;
        }
    }
}

/// The backend name the kit's one plugin goes by when it partitions.
const PLUGIN: &str = "plugin";

/// What names a partition in a report: `(failing_node, message prefix)`, i.e.
/// `("X (Op)", "node X (Op)")` for one node and `("X (Op) to Y (Op)", "partition of N
/// nodes from X (Op) to Y (Op)")` for more.
fn partition_label(graph: &Graph, nodes: &[usize]) -> (String, String) {
    match nodes {
        [first, .., last] => {
            let span = format!(
                "{} to {}",
                graph.nodes[*first].label(),
                graph.nodes[*last].label()
            );
            let prefix = format!("partition of {} nodes from {span}", nodes.len());
            (span, prefix)
        }
        [n] => (
            graph.nodes[*n].label(),
            format!("node {}", graph.nodes[*n].label()),
        ),
        [] => ("empty partition".into(), "empty partition".into()),
    }
}

/// Every tensor's value on the oracle, computed node by node (so that a reference failure
/// names its node); `None` (with `r` set) when a node fails.
fn oracle_values(
    h: &Harness<'_>,
    graph: &Graph,
    inputs: &[Tensor],
    r: &mut CaseResult,
) -> Option<Vec<Option<Tensor>>> {
    let mut values: Vec<Option<Tensor>> = vec![None; graph.tensors.len()];
    for (&t, v) in graph.inputs.iter().zip(inputs) {
        values[t] = Some(v.clone());
    }
    for (n, node) in graph.nodes.iter().enumerate() {
        let (sub, map) = graph.extract(&[n]);
        let sub_inputs: Option<Vec<Tensor>> =
            sub.inputs.iter().map(|&t| values[map[t]].clone()).collect();
        let Some(sub_inputs) = sub_inputs else {
            r.failing_node = Some(node.label());
            set(
                r,
                Class::ReferenceFail,
                "an input of the node was never computed".into(),
            );
            return None;
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
                set(r, Class::ReferenceFail, message);
                return None;
            }
        };
        for (&t, v) in sub.outputs.iter().zip(expected) {
            values[map[t]] = Some(v);
        }
    }
    Some(values)
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
