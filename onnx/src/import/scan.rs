//! Scan, imported as a Loop.
//!
//! Scan runs its body once per slice of its scan inputs, carrying state variables from one
//! iteration to the next and stacking each iteration's scan output elements. That is a
//! Loop with a fixed trip count: the body written here as an ONNX graph takes the
//! iteration number `t`, takes slice `t` of every scan input with a Gather along the scan
//! axis (`-1 - t` for a reverse direction: Gather counts negative indices from the end),
//! runs the Scan body's nodes and returns its outputs. The scan inputs and whatever else
//! the body reads from outside become the Loop's captured values as they do for any Loop
//! body (see `control`), so outer-scope names and nested subgraphs behave the same. The
//! trip count is the first scan input's extent on its scan axis.
//!
//! - **Opset 9 and later**: the Loop stacks the scan outputs along a new leading axis,
//!   in iteration order. A scan output that is prepended (`scan_output_directions` 1) is
//!   that stack reversed (a Slice with step -1), and one accumulated along another axis
//!   (`scan_output_axes`) is that stack with the axis moved there (a Transpose).
//! - **Opset 8** has a batch axis 0 on every state and scan input (the scan axis is 1),
//!   `directions` for the scan inputs, and an optional `sequence_lens` input. It becomes
//!   a Loop over the batch whose body takes batch element `b` of every input and runs
//!   the Scan above over it; the outer Loop stacks the final states and scan outputs of
//!   all batch elements along axis 0. With `sequence_lens`, element `b` runs all of its
//!   scan axis but keeps its states unchanged from iteration `sequence_lens[b]` on (a
//!   Where), and a reverse scan input is read from position `sequence_lens[b] - 1` down:
//!   the states are exact, and the scan outputs past the sequence's length, which ONNX
//!   leaves undefined, are what the body gives for the padding.

use baton_delegate_api::{Attr, Dim, OpKind, Tensor};

use super::super::proto::attribute_proto::AttributeType;
use super::super::proto::tensor_proto::DataType;
use super::super::proto::{
    type_proto, AttributeProto, GraphProto, NodeProto, TensorProto, TypeProto, ValueInfoProto,
};
use super::{Importer, OnnxError};

/// How the Loop body reads one scan input: the outer value, its scan axis, and whether it
/// runs backwards.
struct ScanInput {
    outer: String,
    axis: i64,
    reverse: bool,
}

impl Importer<'_> {
    /// Imports a Scan node (see the module docs).
    pub(super) fn scan_node(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let err = |s: &Self, message: String| s.node_error(name, n, message);
        let known = if self.opset < 9 {
            ["body", "num_scan_inputs", "directions"].as_slice()
        } else {
            [
                "body",
                "num_scan_inputs",
                "scan_input_axes",
                "scan_input_directions",
                "scan_output_axes",
                "scan_output_directions",
            ]
            .as_slice()
        };
        if let Some(a) = n
            .attribute
            .iter()
            .find(|a| !known.contains(&a.name.as_str()))
        {
            return Err(err(self, format!("unexpected attribute '{}'", a.name)));
        }
        let attr = |key: &str| n.attribute.iter().find(|a| a.name == key);
        let body = attr("body")
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| err(self, "attribute 'body' (a graph) is missing".into()))?;
        let m = match attr("num_scan_inputs") {
            Some(a) if a.i >= 1 => a.i as usize,
            Some(a) => {
                let message = format!("num_scan_inputs is {}; at least 1 is needed", a.i);
                return Err(err(self, message));
            }
            None => return Err(err(self, "attribute 'num_scan_inputs' is missing".into())),
        };
        // Opset 8 puts the optional sequence_lens first.
        let first = usize::from(self.opset < 9);
        let operands = n.input.get(first..).unwrap_or_default();
        let states = operands.len().checked_sub(m).ok_or_else(|| {
            let message = format!(
                "{} state and scan inputs cannot hold num_scan_inputs = {m}",
                operands.len()
            );
            err(self, message)
        })?;
        if body.input.len() != states + m {
            let message = format!(
                "the body takes {} inputs; the node passes {states} states and {m} scan inputs",
                body.input.len()
            );
            return Err(err(self, message));
        }
        if body.output.len() < states {
            let message = format!(
                "the body returns {} values, fewer than its {states} states",
                body.output.len()
            );
            return Err(err(self, message));
        }
        if let Some(k) = operands.iter().position(String::is_empty) {
            let message = format!("input {} (a state or scan input) is empty", first + k);
            return Err(err(self, message));
        }
        let k = body.output.len() - states;
        let ints = |key: &str, len: usize| -> Result<Vec<i64>, OnnxError> {
            match attr(key) {
                None => Ok(vec![0; len]),
                Some(a) if a.ints.len() == len => Ok(a.ints.clone()),
                Some(a) => Err(err(
                    self,
                    format!("{key} has {} entries for {len} values", a.ints.len()),
                )),
            }
        };
        let flags = |key: &str, len: usize| -> Result<Vec<bool>, OnnxError> {
            ints(key, len)?
                .into_iter()
                .map(|v| match v {
                    0 | 1 => Ok(v == 1),
                    _ => Err(err(self, format!("{key} holds {v}; directions are 0 or 1"))),
                })
                .collect()
        };
        if self.opset < 9 {
            let reverse = flags("directions", m)?;
            let sequence_lens = n.input.first().filter(|s| !s.is_empty()).cloned();
            return self.scan_batched(name, n, body, states, &reverse, sequence_lens);
        }
        let in_axes = ints("scan_input_axes", m)?;
        let in_reverse = flags("scan_input_directions", m)?;
        let out_axes = ints("scan_output_axes", k)?;
        let out_reverse = flags("scan_output_directions", k)?;
        let scans: Vec<ScanInput> = operands[states..]
            .iter()
            .zip(in_axes.iter().zip(&in_reverse))
            .map(|(outer, (&axis, &reverse))| ScanInput {
                outer: outer.clone(),
                axis,
                reverse,
            })
            .collect();
        let (trips, extent) = self.scan_trips(name, n, &scans[0])?;
        let loop_body = scan_loop_body(name, body, states, &scans, None);
        // The Loop's outputs: the final states, then the stacked scan outputs, which those
        // that need turning around or moving go through first.
        let mut outputs: Vec<String> = (0..states + k)
            .map(|i| n.output.get(i).cloned().unwrap_or_default())
            .collect();
        let mut finish = Vec::new();
        for j in 0..k {
            let out = &outputs[states + j];
            if !out.is_empty() && (out_reverse[j] || out_axes[j] != 0) {
                finish.push((j, out.clone()));
                outputs[states + j] = format!("{name}/stacked{j}");
            }
        }
        let mut inputs = vec![trips, String::new()];
        inputs.extend(operands[..states].iter().cloned());
        let lp = loop_node(name, inputs, outputs, loop_body);
        self.control_node(name, &lp)?;
        if let Some(extent) = extent {
            self.fix_trips(extent);
        }
        for (j, out) in finish {
            let mut value = format!("{name}/stacked{j}");
            let rank = self.rank_of(&value);
            if out_reverse[j] {
                let last = out_axes[j] == 0;
                let tag = format!("reversed{j}");
                let to = if last {
                    out.clone()
                } else {
                    format!("{name}/{tag}")
                };
                let attrs = [
                    ("starts", Attr::Ints(vec![-1])),
                    ("ends", Attr::Ints(vec![i64::MIN])),
                    ("axes", Attr::Ints(vec![0])),
                    ("steps", Attr::Ints(vec![-1])),
                ];
                let attrs = attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                self.add(
                    &to,
                    OpKind::Slice,
                    &[value],
                    std::slice::from_ref(&to),
                    attrs,
                    n,
                )?;
                value = to;
            }
            if out_axes[j] != 0 {
                let rank = rank.ok_or_else(|| {
                    let message = format!(
                        "scan output {j} goes along axis {}, but its rank is not known",
                        out_axes[j]
                    );
                    err(self, message)
                })?;
                let axis = normalize(out_axes[j], rank).ok_or_else(|| {
                    let message = format!(
                        "scan_output_axes[{j}] = {} is out of range for rank {rank}",
                        out_axes[j]
                    );
                    err(self, message)
                })?;
                // Output axis d reads stacked axis d + 1 before `axis`, the iteration
                // axis 0 at `axis`, and itself after.
                let perm: Vec<i64> = (0..rank as i64)
                    .map(|d| match d.cmp(&(axis as i64)) {
                        std::cmp::Ordering::Less => d + 1,
                        std::cmp::Ordering::Equal => 0,
                        std::cmp::Ordering::Greater => d,
                    })
                    .collect();
                let attrs = [("perm".to_string(), Attr::Ints(perm))].into();
                let transpose_name = format!("{name}/moved{j}");
                self.add(
                    &transpose_name,
                    OpKind::Transpose,
                    &[value],
                    &[out],
                    attrs,
                    n,
                )?;
            }
        }
        Ok(())
    }

    /// The trip count of a Scan: `input`'s extent along its scan axis, as an i64 scalar
    /// (a constant when that extent is fixed), and that extent when it is.
    fn scan_trips(
        &mut self,
        name: &str,
        n: &NodeProto,
        input: &ScanInput,
    ) -> Result<(String, Option<usize>), OnnxError> {
        let rank = self.rank_of(&input.outer);
        if let (Some(rank), Some(shape)) = (rank, self.static_shape_of(&input.outer)) {
            let axis = normalize(input.axis, rank).ok_or_else(|| {
                let message = format!(
                    "scan axis {} is out of range for '{}' of rank {rank}",
                    input.axis, input.outer
                );
                self.node_error(name, n, message)
            })?;
            let extent = Tensor::from_i64(&[], &[shape[axis] as i64]);
            return Ok((
                self.named_constant(name, "trips", extent),
                Some(shape[axis]),
            ));
        }
        let shape = self.emit(
            name,
            "scan_shape",
            OpKind::Shape,
            std::slice::from_ref(&input.outer),
            &[],
            n,
        )?;
        let axis = self.named_constant(name, "scan_axis", Tensor::from_i64(&[], &[input.axis]));
        let trips = self.emit(
            name,
            "trips",
            OpKind::Gather,
            &[shape, axis],
            &[("axis", Attr::Int(0))],
            n,
        )?;
        Ok((trips, None))
    }

    /// Gives the scan outputs of the Loop just added their leading extent, `trips`: the
    /// Loop's shape rule leaves it provisional (a trip count is a value), but a Scan's
    /// is the fixed extent of its first scan input.
    fn fix_trips(&mut self, trips: usize) {
        let Some(node) = self.g.nodes.last() else {
            return;
        };
        for &t in &node.outputs {
            let shape = &mut self.g.tensors[t].shape;
            if matches!(shape.first(), Some(Dim::Sym(s)) if s.ends_with("_trips?")) {
                shape[0] = Dim::Fixed(trips);
            }
        }
    }

    /// Imports an opset-8 Scan (see the module docs): a Loop over the batch around the
    /// unbatched Scan's Loop.
    fn scan_batched(
        &mut self,
        name: &str,
        n: &NodeProto,
        body: &GraphProto,
        states: usize,
        reverse: &[bool],
        sequence_lens: Option<String>,
    ) -> Result<(), OnnxError> {
        let operands = &n.input[1..];
        let batch = ScanInput {
            outer: operands[states].clone(),
            axis: 0,
            reverse: false,
        };
        let (batches, extent) = self.scan_trips(name, n, &batch)?;
        let b = format!("{name}/batch");
        let cond_in = format!("{name}/batch_cond");
        let cond_out = format!("{name}/batch_cond_out");
        let inner = format!("{name}/inner");
        let mut nodes = Vec::new();
        let take = |outer: &str, to: &str| {
            let inputs = vec![outer.to_string(), b.clone()];
            onnx_node(
                "Gather",
                inputs,
                vec![to.to_string()],
                vec![int_attr("axis", 0)],
            )
        };
        let mut loop_inputs = Vec::new();
        let mut scans = Vec::new();
        let mut outputs = Vec::new();
        for (i, state) in operands[..states].iter().enumerate() {
            let own = format!("{name}/state{i}");
            nodes.push(take(state, &own));
            loop_inputs.push(own);
            outputs.push(format!("{name}/final{i}"));
        }
        for (j, scan) in operands[states..].iter().enumerate() {
            let own = format!("{name}/sequence{j}");
            nodes.push(take(scan, &own));
            scans.push(ScanInput {
                outer: own,
                axis: 0,
                reverse: reverse[j],
            });
        }
        for j in 0..body.output.len() - states {
            outputs.push(format!("{name}/scanned{j}"));
        }
        // The inner trip count: the sequence's extent (axis 0 once the batch is taken).
        let shape = format!("{name}/sequence_shape");
        let zero = format!("{name}/zero");
        let steps = format!("{name}/steps");
        nodes.push(onnx_node(
            "Shape",
            vec![scans[0].outer.clone()],
            vec![shape.clone()],
            vec![],
        ));
        nodes.push(i64_constant(&zero, 0));
        nodes.push(onnx_node(
            "Gather",
            vec![shape, zero],
            vec![steps.clone()],
            vec![int_attr("axis", 0)],
        ));
        let limit = sequence_lens.map(|lens| {
            let limit = format!("{name}/length");
            nodes.push(take(&lens, &limit));
            limit
        });
        let inner_body = scan_loop_body(&inner, body, states, &scans, limit.as_deref());
        let mut inputs = vec![steps, String::new()];
        inputs.extend(loop_inputs);
        nodes.push(loop_node(&inner, inputs, outputs.clone(), inner_body));
        nodes.push(onnx_node(
            "Identity",
            vec![cond_in.clone()],
            vec![cond_out.clone()],
            vec![],
        ));
        let mut graph_outputs = vec![scalar_value(&cond_out, DataType::Bool)];
        graph_outputs.extend(outputs.iter().map(|o| untyped_value(o)));
        let outer_body = GraphProto {
            name: format!("{}_batched", body.name),
            node: nodes,
            input: vec![
                scalar_value(&b, DataType::Int64),
                scalar_value(&cond_in, DataType::Bool),
            ],
            output: graph_outputs,
            ..GraphProto::default()
        };
        // Every result, the final states included, is stacked over the batch.
        let lp = loop_node(
            name,
            vec![batches, String::new()],
            n.output.clone(),
            outer_body,
        );
        self.control_node(name, &lp)?;
        if let Some(extent) = extent {
            self.fix_trips(extent);
        }
        Ok(())
    }
}

/// `axis` (negative counts from the back) as an index below `rank`.
fn normalize(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a).ok().filter(|&a| a < rank)
}

/// The Loop body that runs Scan body `body` (with `states` state variables) on slice `t`
/// of each of `scans`; with `limit` (a sequence length), the states stop changing from
/// iteration `limit` on and a reverse scan input starts at `limit - 1`.
fn scan_loop_body(
    name: &str,
    body: &GraphProto,
    states: usize,
    scans: &[ScanInput],
    limit: Option<&str>,
) -> GraphProto {
    let t = format!("{name}/iteration");
    let cond_in = format!("{name}/cond");
    let cond_out = format!("{name}/cond_out");
    let mut nodes = Vec::new();
    let mut input = vec![
        scalar_value(&t, DataType::Int64),
        scalar_value(&cond_in, DataType::Bool),
    ];
    input.extend(body.input[..states].iter().cloned());
    if scans.iter().any(|s| s.reverse) {
        // Backwards from the end: -1 - t, or limit - 1 - t.
        let last = format!("{name}/last");
        match limit {
            None => nodes.push(i64_constant(&last, -1)),
            Some(limit) => {
                let one = format!("{name}/one");
                nodes.push(i64_constant(&one, 1));
                nodes.push(onnx_node(
                    "Sub",
                    vec![limit.to_string(), one],
                    vec![last.clone()],
                    vec![],
                ));
            }
        }
        nodes.push(onnx_node(
            "Sub",
            vec![last, t.clone()],
            vec![format!("{name}/backwards")],
            vec![],
        ));
    }
    for (j, scan) in scans.iter().enumerate() {
        let index = if scan.reverse {
            format!("{name}/backwards")
        } else {
            t.clone()
        };
        nodes.push(onnx_node(
            "Gather",
            vec![scan.outer.clone(), index],
            vec![body.input[states + j].name.clone()],
            vec![int_attr("axis", scan.axis)],
        ));
    }
    nodes.extend(body.node.iter().cloned());
    nodes.push(onnx_node(
        "Identity",
        vec![cond_in],
        vec![cond_out.clone()],
        vec![],
    ));
    let mut output = vec![scalar_value(&cond_out, DataType::Bool)];
    let mut value_info = body.value_info.clone();
    match limit {
        None => output.extend(body.output.iter().cloned()),
        Some(limit) => {
            let running = format!("{name}/running");
            nodes.push(onnx_node(
                "Less",
                vec![t, limit.to_string()],
                vec![running.clone()],
                vec![],
            ));
            for (i, out) in body.output.iter().enumerate() {
                if i >= states {
                    output.push(out.clone());
                    continue;
                }
                let kept = format!("{name}/kept{i}");
                nodes.push(onnx_node(
                    "Where",
                    vec![
                        running.clone(),
                        out.name.clone(),
                        body.input[i].name.clone(),
                    ],
                    vec![kept.clone()],
                    vec![],
                ));
                value_info.push(out.clone());
                output.push(ValueInfoProto {
                    name: kept,
                    ..out.clone()
                });
            }
        }
    }
    GraphProto {
        name: body.name.clone(),
        node: nodes,
        initializer: body.initializer.clone(),
        input,
        output,
        value_info,
        ..GraphProto::default()
    }
}

fn onnx_node(
    op: &str,
    input: Vec<String>,
    output: Vec<String>,
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        name: output.first().cloned().unwrap_or_default(),
        op_type: op.to_string(),
        input,
        output,
        attribute,
        ..NodeProto::default()
    }
}

fn loop_node(name: &str, input: Vec<String>, output: Vec<String>, body: GraphProto) -> NodeProto {
    let attribute = vec![AttributeProto {
        name: "body".into(),
        r#type: AttributeType::Graph as i32,
        g: Some(body),
        ..AttributeProto::default()
    }];
    NodeProto {
        name: name.to_string(),
        ..onnx_node("Loop", input, output, attribute)
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Int as i32,
        i,
        ..AttributeProto::default()
    }
}

fn i64_constant(name: &str, v: i64) -> NodeProto {
    let value = AttributeProto {
        name: "value".into(),
        r#type: AttributeType::Tensor as i32,
        t: Some(TensorProto {
            data_type: DataType::Int64 as i32,
            int64_data: vec![v],
            ..TensorProto::default()
        }),
        ..AttributeProto::default()
    };
    onnx_node("Constant", vec![], vec![name.to_string()], vec![value])
}

/// A scalar graph input or output of ONNX element type `dtype`.
fn scalar_value(name: &str, dtype: DataType) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: dtype as i32,
                shape: Some(Default::default()),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// A graph output left to inference.
fn untyped_value(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        ..ValueInfoProto::default()
    }
}
