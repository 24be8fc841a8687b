//! Numeric debugging (`baton run --check`): how far each delegated partition's outputs are
//! from the reference executor's, and the first node where they part.
//!
//! A delegate that computes in another order, precision or approximation drifts from the
//! reference; over a whole model, that is a number at the end. This finds where it comes
//! from. The model runs once on the reference executor, keeping every tensor. Each
//! delegated partition is then cut out as a graph of its own and run on its plugin with
//! the reference's values of its inputs, so each partition's error is its own, not what
//! earlier partitions passed on. Its outputs are compared with the reference's: the
//! largest absolute and relative error and distance in ULPs, against the conformance
//! kit's `[model]` tolerance for the dtype (`conformance/tolerances/*.toml`: the same rule
//! the kit applies to whole models). Where a partition is past tolerance, prefixes of it
//! (its first node, its first two, ...) are run on the plugin in turn, and the first node
//! whose own outputs are past tolerance is named; a prefix the plugin declines is skipped.

use std::collections::BTreeSet;

use baton_delegate_api::ir::TensorData;
use baton_delegate_api::{DType, Graph, NodeId, Storage, Tensor, TensorId};
use serde::Serialize;

use crate::error::{HostError, Result};
use crate::exec::Session;
use crate::plugin::run_once;

/// The most prefixes of one partition run to find its first node past tolerance (one
/// compile each): past it, the search stops and says so.
const MAX_PREFIXES: usize = 512;

/// How far a delegate's value may be from the reference's: within `abs`, or within `rel`
/// of the reference's magnitude, or within `ulp` units in the last place.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
    pub ulp: u64,
}

impl Tolerance {
    /// The conformance kit's `[model]` rule for `dtype`: its f32, f16 or int file (bf16
    /// and f64 take the f16 and f32 rules; other dtypes must match exactly).
    pub fn kit(dtype: DType) -> Tolerance {
        let text = match dtype {
            DType::F32 | DType::F64 => include_str!("../../conformance/tolerances/f32.toml"),
            DType::F16 | DType::BF16 => include_str!("../../conformance/tolerances/f16.toml"),
            _ => include_str!("../../conformance/tolerances/int.toml"),
        };
        let exact = Tolerance {
            abs: 0.0,
            rel: 0.0,
            ulp: 0,
        };
        let Ok(table) = text.parse::<toml::Table>() else {
            return exact;
        };
        let Some(model) = table.get("model").and_then(|m| m.as_table()) else {
            return exact;
        };
        let float = |k: &str| model.get(k).and_then(|v| v.as_float()).unwrap_or(0.0);
        Tolerance {
            abs: float("abs"),
            rel: float("rel"),
            ulp: model
                .get("ulp")
                .and_then(|v| v.as_integer())
                .unwrap_or(0)
                .max(0) as u64,
        }
    }
}

/// One tensor of a delegate against the reference.
#[derive(Clone, Debug, Serialize)]
pub struct TensorError {
    /// The tensor's name in the model.
    pub tensor: String,
    pub dtype: String,
    pub elements: usize,
    pub max_abs: f64,
    /// The largest `|got - want| / |want|` over elements with `want` not zero.
    pub max_rel: f64,
    pub max_ulp: u64,
    /// Elements past the tolerance.
    pub past: usize,
    pub tolerance: Tolerance,
}

impl TensorError {
    pub fn passed(&self) -> bool {
        self.past == 0
    }
}

/// The first node of a partition whose own outputs, with every node before it in the
/// partition run on the plugin too, are past tolerance.
#[derive(Clone, Debug, Serialize)]
pub struct FirstNode {
    pub node: String,
    pub op: String,
    /// Its position in the partition (0 is the first node).
    pub position: usize,
    pub outputs: Vec<TensorError>,
}

/// One delegated partition against the reference.
#[derive(Clone, Debug, Serialize)]
pub struct PartitionCheck {
    pub partition: usize,
    pub backend: String,
    pub nodes: usize,
    pub outputs: Vec<TensorError>,
    /// `None` when every output is within tolerance, or no prefix showed where.
    pub first_node_past: Option<FirstNode>,
    /// What kept the check from being complete (a prefix declined, the search cut).
    pub notes: Vec<String>,
}

impl PartitionCheck {
    pub fn passed(&self) -> bool {
        self.outputs.iter().all(TensorError::passed)
    }
}

impl Session<'_> {
    /// Runs every delegated partition of this session also on the reference with the same
    /// inputs (see the module's text); `inputs` are the model's, in graph order.
    ///
    /// A staged model (see [`Session::stages`]) is checked stage by stage: the rest's
    /// partitions as compiled for these inputs' shapes, numbered after the prefix's.
    pub fn check(&mut self, inputs: &[Tensor]) -> Result<Vec<PartitionCheck>> {
        if let Some(s) = self.staged_mut() {
            return s.check(inputs);
        }
        self.check_static(inputs)
    }

    fn check_static(&self, inputs: &[Tensor]) -> Result<Vec<PartitionCheck>> {
        let graph = inline_constants(self);
        let values = reference_values(&graph, inputs)?;
        let mut report = Vec::new();
        for (k, p) in self.plan.partitions.iter().enumerate() {
            let Some(backend) = self.engine().backends.iter().find(|b| b.name == p.backend) else {
                continue;
            };
            let run = |nodes: &[NodeId]| -> Result<(Graph, Vec<TensorId>, Vec<Tensor>)> {
                let (sub, back) = graph.extract(nodes);
                let given: Vec<Tensor> = sub
                    .inputs
                    .iter()
                    .map(|&t| value(&values, back[t], &graph))
                    .collect::<Result<_>>()?;
                let got = run_once(&backend.ctx, backend.device.index, &sub, &given)?;
                Ok((sub, back, got))
            };
            let (sub, back, got) = run(&p.nodes)?;
            let compare =
                |sub: &Graph, back: &[TensorId], got: &[Tensor], only: Option<&[TensorId]>| {
                    sub.outputs
                        .iter()
                        .zip(got)
                        .filter(|(&t, _)| only.is_none_or(|o| o.contains(&back[t])))
                        .map(|(&t, g)| {
                            let want = value(&values, back[t], &graph)?;
                            Ok(tensor_error(&graph.tensors[back[t]].name, g, &want))
                        })
                        .collect::<Result<Vec<TensorError>>>()
                };
            let outputs = compare(&sub, &back, &got, None)?;
            let mut check = PartitionCheck {
                partition: k,
                backend: p.backend.clone(),
                nodes: p.nodes.len(),
                outputs,
                first_node_past: None,
                notes: Vec::new(),
            };
            if !check.passed() {
                let mut declined = 0;
                for end in 1..=p.nodes.len().min(MAX_PREFIXES) {
                    let last = p.nodes[end - 1];
                    let node = &graph.nodes[last];
                    let Ok((sub, back, got)) = run(&p.nodes[..end]) else {
                        declined += 1;
                        continue;
                    };
                    let errors = compare(&sub, &back, &got, Some(&node.outputs))?;
                    if errors.iter().any(|e| !e.passed()) {
                        check.first_node_past = Some(FirstNode {
                            node: node.name.clone(),
                            op: node.op.to_string(),
                            position: end - 1,
                            outputs: errors,
                        });
                        break;
                    }
                }
                if declined > 0 {
                    check.notes.push(format!(
                        "{declined} prefixes of the partition did not run on {} (declined or failed) and were skipped",
                        p.backend
                    ));
                }
                if check.first_node_past.is_none() && p.nodes.len() > MAX_PREFIXES {
                    check.notes.push(format!(
                        "the search for the first node past tolerance stopped after {MAX_PREFIXES} of {} nodes",
                        p.nodes.len()
                    ));
                }
            }
            report.push(check);
        }
        Ok(report)
    }
}

/// The session's graph with every constant's bytes inline (a loaded program's are held
/// beside the graph), for the reference and for the partitions cut out of it.
fn inline_constants(session: &Session<'_>) -> Graph {
    let mut graph = session.graph.clone();
    for t in 0..graph.tensors.len() {
        if matches!(graph.tensors[t].data, Some(Storage::External(_))) {
            let bytes = session.constant_bytes(t).to_vec();
            graph.tensors[t].data = Some(Storage::Inline(TensorData::from_bytes(&bytes)));
        }
    }
    graph
}

/// Every tensor the top-level nodes produce, on the reference, by id.
fn reference_values(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    let mut all = graph.clone();
    let mut seen = BTreeSet::new();
    all.outputs = graph
        .nodes
        .iter()
        .flat_map(|n| n.outputs.iter().copied())
        .filter(|&t| seen.insert(t))
        .collect();
    let got = baton_reference::run_graph(&all, inputs).map_err(|e| HostError::PluginCall {
        plugin: "reference".into(),
        call: "check",
        status: 0,
        message: format!("the reference could not run the model: {e}"),
    })?;
    let mut values: Vec<Option<Tensor>> = (0..graph.tensors.len()).map(|_| None).collect();
    for (&t, v) in all.outputs.iter().zip(got) {
        values[t] = Some(v);
    }
    for (&t, v) in graph.inputs.iter().zip(inputs) {
        values[t] = Some(v.clone());
    }
    Ok(values)
}

/// The reference's value of `t`: computed, given, or a constant.
fn value(values: &[Option<Tensor>], t: TensorId, graph: &Graph) -> Result<Tensor> {
    if let Some(v) = &values[t] {
        return Ok(v.clone());
    }
    let decl = &graph.tensors[t];
    match (&decl.data, decl.static_shape()) {
        (Some(Storage::Inline(d)), Some(shape)) => {
            Ok(Tensor::from_bytes(decl.dtype, &shape, d.bytes()))
        }
        _ => Err(HostError::SymbolicShape {
            tensor: decl.name.clone(),
            shape: decl.shape.clone(),
        }),
    }
}

/// `got` against `want`, element by element, under the kit's tolerance for the dtype.
fn tensor_error(name: &str, got: &Tensor, want: &Tensor) -> TensorError {
    let tolerance = Tolerance::kit(want.dtype);
    let mut e = TensorError {
        tensor: name.to_string(),
        dtype: want.dtype.name().to_string(),
        elements: want.len(),
        max_abs: 0.0,
        max_rel: 0.0,
        max_ulp: 0,
        past: 0,
        tolerance,
    };
    if got.dtype != want.dtype || got.shape != want.shape {
        e.past = want.len().max(1);
        e.max_abs = f64::INFINITY;
        return e;
    }
    let (g, w) = (got.to_f64(), want.to_f64());
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        if a.is_nan() && b.is_nan() {
            continue;
        }
        let d = (a - b).abs();
        let d = if d.is_nan() { f64::INFINITY } else { d };
        let ulps = ulp_distance(want.dtype, got.bytes(), want.bytes(), i);
        e.max_abs = e.max_abs.max(d);
        if b != 0.0 {
            e.max_rel = e.max_rel.max(d / b.abs());
        }
        e.max_ulp = e.max_ulp.max(ulps);
        let ok = d <= tolerance.abs || d <= tolerance.rel * b.abs() || ulps <= tolerance.ulp;
        if !ok {
            e.past += 1;
        }
    }
    e
}

/// Units in the last place between element `i` of `a` and of `b` (floats ordered by their
/// bit patterns; integers by value).
fn ulp_distance(dtype: DType, a: &[u8], b: &[u8], i: usize) -> u64 {
    let ordered = |bits: i64, width: u32| -> i64 {
        let sign = 1i64 << (width - 1);
        if bits & sign != 0 {
            -(bits & (sign - 1))
        } else {
            bits
        }
    };
    let word = |bytes: &[u8], size: usize| -> i64 {
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
        i64::from_le_bytes(v)
    };
    match dtype {
        DType::F32 => (ordered(word(a, 4), 32) - ordered(word(b, 4), 32)).unsigned_abs(),
        DType::F16 | DType::BF16 => {
            (ordered(word(a, 2), 16) - ordered(word(b, 2), 16)).unsigned_abs()
        }
        DType::F64 => {
            let (x, y) = (word(a, 8), word(b, 8));
            let o = |v: i64| if v < 0 { -(v & i64::MAX) } else { v };
            (o(x) as i128 - o(y) as i128)
                .unsigned_abs()
                .min(u64::MAX as u128) as u64
        }
        _ => {
            let x = baton_delegate_api::dtype::element_f64(dtype, a, i);
            let y = baton_delegate_api::dtype::element_f64(dtype, b, i);
            (x - y).abs().min(u64::MAX as f64) as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulps_count_representable_floats_between_two_values() {
        let one = 1.0f32.to_le_bytes();
        let next = f32::from_bits(1.0f32.to_bits() + 3).to_le_bytes();
        assert_eq!(ulp_distance(DType::F32, &next, &one, 0), 3);
        // Across zero: -0.0 and +0.0 are the same place; the smallest values on each side
        // are two apart.
        let neg = f32::from_bits(0x8000_0001).to_le_bytes();
        let pos = f32::from_bits(1).to_le_bytes();
        assert_eq!(ulp_distance(DType::F32, &neg, &pos, 0), 2);
        assert_eq!(
            ulp_distance(
                DType::F32,
                &(-0.0f32).to_le_bytes(),
                &0.0f32.to_le_bytes(),
                0
            ),
            0
        );
    }

    #[test]
    fn the_kit_rules_are_read_and_applied() {
        let t = Tolerance::kit(DType::F32);
        assert!(t.abs > 0.0 && t.rel > 0.0 && t.ulp > 0, "{t:?}");
        assert_eq!(Tolerance::kit(DType::I32).abs, 0.0);
        let want = Tensor::from_f32(&[3], &[1.0, 100.0, 0.0]);
        let close = Tensor::from_f32(&[3], &[1.0 + 1e-6, 100.0, 0.0]);
        let far = Tensor::from_f32(&[3], &[1.0, 100.5, 0.0]);
        assert!(tensor_error("y", &close, &want).passed());
        let e = tensor_error("y", &far, &want);
        assert_eq!(e.past, 1);
        assert!(
            (e.max_abs - 0.5).abs() < 1e-9 && (e.max_rel - 0.005).abs() < 1e-9,
            "{e:?}"
        );
    }
}
