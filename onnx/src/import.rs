//! ONNX `ModelProto` → Baton IR.
//!
//! The IR follows ONNX names and semantics, so most nodes translate one to one. The work
//! here is what ONNX leaves to the reader:
//! - **values by name**: initializers become constants, `Constant` nodes become constants,
//!   graph inputs that are also initializers are constants (old IR versions list them);
//! - **opset differences**: operands that later opsets moved from attributes to inputs
//!   (Clip's bounds, Resize's scales and sizes) are turned into attributes when they are
//!   constant; opsets 1 to 10 are rewritten into later forms by `legacy`; Scatter (opsets
//!   9 and 10) is read as ScatterElements, its later name;
//! - **ops and forms without an IR op** (Sum, LRN, Upsample, PRelu, Elu, Selu, Softplus,
//!   Max, Min, InstanceNormalization, Dropout's mask, Softmax flattened to 2-D before
//!   opset 13, batch-first LSTM/GRU/RNN) are rewritten into IR ops by `lower`, and Softsign,
//!   Mish, Celu, Shrink and ReduceLogSum by `activation`, RMSNormalization,
//!   LpNormalization and GroupNormalization by `norm`, the two losses by `loss`, Mean, GlobalMaxPool,
//!   MeanVarianceNormalization, LpPool, Swish, ThresholdedRelu, EyeLike, NonZero and CenterCropPad by `compose`;
//! - **omitted optional operands**: an empty name in the middle of a node's inputs becomes
//!   a 0-element constant (the kernels read a 0-element optional operand as absent);
//!   trailing empty names are dropped, and unused optional outputs get placeholder tensors;
//! - **shapes**: every value gets the dtype and shape the IR's shape rules infer. Where an
//!   input's symbolic dimension makes that impossible, the value keeps a provisional
//!   symbolic shape until the host binds the inputs and re-infers (see `session`).
//!
//! - **control flow**: If and Loop become IR nodes whose subgraphs are imported by child
//!   importers (see `control`); every outer value a subgraph reads becomes an explicit
//!   input of the node and of the subgraph. Scan becomes a Loop (see `scan`);
//!   FlexAttention (domain `ai.onnx.preview`) is composed of IR ops, its modifier
//!   subgraphs run through constant-true Ifs (see `flex`).
//!
//! Anything the IR cannot represent is an error naming the node, its op, the opset and the
//! attribute at fault.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use baton_delegate_api::ir::TensorData;
use baton_delegate_api::{
    shape, Attr, DType, Dim, Graph, Node, OpKind, Storage, Tensor, TensorDecl, TensorId,
};

use super::proto::attribute_proto::AttributeType;
use super::proto::{type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, ValueInfoProto};
use super::{baton_dtype, onnx_type_name, tensor_from_proto, OnnxError};

mod activation;
mod compose;
mod control;
mod flex;
mod legacy;
mod loss;
mod lower;
mod norm;
mod qlinear;
mod scan;

/// The oldest and newest default-domain opsets the importer accepts.
/// Opsets 1 to 6 are read through the rewrites of `legacy`.
pub const OPSETS: std::ops::RangeInclusive<i64> = 1..=27;

/// Converts a decoded model. `base_dir` is where external tensor data is looked up.
pub fn import(model: &ModelProto, base_dir: Option<&Path>) -> Result<Graph, OnnxError> {
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(1, |o| o.version);
    if !OPSETS.contains(&opset) {
        return Err(unsupported(format!(
            "the model uses opset {opset} of the default domain; Baton imports opsets {} to {}",
            OPSETS.start(),
            OPSETS.end()
        )));
    }
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| unsupported("the model has no graph".into()))?;
    let mut b = Importer::new(graph, opset, base_dir);
    b.graph(graph, &[])?;
    Ok(b.g)
}

fn unsupported(message: String) -> OnnxError {
    OnnxError::Unsupported { message }
}

pub(super) struct Importer<'a> {
    pub(super) g: Graph,
    pub(super) names: HashMap<String, TensorId>,
    pub(super) opset: i64,
    pub(super) base_dir: Option<&'a Path>,
    value_info: HashMap<String, ValueInfoProto>,
    /// Whether this imports a subgraph, whose inputs may omit their shapes (ONNX allows
    /// it there): they get provisional ones.
    subgraph: bool,
    /// Types for a subgraph's own inputs where it omits them (ONNX lets a Loop body leave
    /// them to inference): by input name.
    input_types: HashMap<String, (DType, Vec<Dim>)>,
}

impl<'a> Importer<'a> {
    /// An importer for `graph` (the model's, or a subgraph's: each has its own names).
    pub(super) fn new(graph: &GraphProto, opset: i64, base_dir: Option<&'a Path>) -> Self {
        Importer {
            g: Graph {
                name: if graph.name.is_empty() {
                    "onnx".into()
                } else {
                    graph.name.clone()
                },
                ..Graph::default()
            },
            names: HashMap::new(),
            opset,
            base_dir,
            value_info: graph
                .value_info
                .iter()
                .chain(&graph.output)
                .map(|v| (v.name.clone(), v.clone()))
                .collect(),
            subgraph: false,
            input_types: HashMap::new(),
        }
    }

    /// Imports `graph`. `outer` lists the values of enclosing graphs that a subgraph reads
    /// (empty at the top level): constants among them are copied in, the others become
    /// graph inputs after the graph's own. Returns the names of those captured inputs, in
    /// order.
    pub(super) fn graph(
        &mut self,
        graph: &GraphProto,
        outer: &[(String, TensorDecl)],
    ) -> Result<Vec<String>, OnnxError> {
        for init in &graph.initializer {
            let t = tensor_from_proto(init, self.base_dir)?;
            self.constant(&init.name, t);
        }
        for input in &graph.input {
            if self.names.contains_key(&input.name) {
                continue; // an initializer listed as an input (IR version < 4)
            }
            let hint = self.input_types.get(&input.name);
            let (dtype, shape) = match (value_type(input), tensor_dtype(input), hint) {
                (Ok(t), ..) => t,
                (Err(_), Some(dtype), _) if self.subgraph => {
                    (dtype, vec![Dim::Sym(format!("{}?", input.name))])
                }
                (Err(_), None, Some(t)) if !has_type(input) => t.clone(),
                (Err(e), ..) => return Err(e),
            };
            let id = self.push(&input.name, dtype, shape, None);
            self.g.inputs.push(id);
        }
        let mut captured = Vec::new();
        for (name, decl) in outer {
            if self.names.contains_key(name) {
                continue; // shadowed by a value of this graph
            }
            let id = self.push(name, decl.dtype, decl.shape.clone(), decl.data.clone());
            if decl.data.is_none() {
                self.g.inputs.push(id);
                captured.push(name.clone());
            }
        }
        for (i, node) in graph.node.iter().enumerate() {
            self.node(i, node)?;
        }
        for out in &graph.output {
            let &id = self.names.get(&out.name).ok_or_else(|| {
                unsupported(format!(
                    "graph output '{}' is not produced by any node",
                    out.name
                ))
            })?;
            self.g.outputs.push(id);
        }
        self.g.validate().map_err(|e| unsupported(e.to_string()))?;
        Ok(captured)
    }

    fn node(&mut self, index: usize, n: &NodeProto) -> Result<(), OnnxError> {
        let name = if n.name.is_empty() {
            format!("{}_{index}", n.op_type)
        } else {
            n.name.clone()
        };
        let opset = self.opset;
        let at = |message: String| {
            unsupported(format!(
                "node '{name}' ({}, opset {opset}): {message}",
                n.op_type
            ))
        };
        if n.domain == "ai.onnx.preview" && n.op_type == "FlexAttention" {
            return self.flex_attention(&name, n);
        }
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Err(at(format!("domain '{}' is not supported", n.domain)));
        }
        if matches!(n.op_type.as_str(), "If" | "Loop") {
            return self.control_node(&name, n);
        }
        if n.op_type == "Scan" {
            return self.scan_node(&name, n);
        }
        let mut attrs = BTreeMap::new();
        for a in &n.attribute {
            if n.op_type == "Constant" && a.name == "value" {
                continue; // read whole by `constant_node`
            }
            if let Some(v) = self.attribute(a).map_err(&at)? {
                attrs.insert(a.name.clone(), v);
            }
        }
        match n.op_type.as_str() {
            "Constant" => return self.constant_node(n, &attrs).map_err(&at),
            "Dropout" => return self.dropout(&name, n),
            "OptionalHasElement" | "OptionalGetElement" => return self.optional(&name, n),
            "Sum"
            | "LRN"
            | "Upsample"
            | "PRelu"
            | "Elu"
            | "Selu"
            | "Softplus"
            | "Max"
            | "Min"
            | "InstanceNormalization" => return self.lower(&name, n, &attrs),
            "Softsign" | "Mish" | "Celu" | "Shrink" | "ReduceLogSum" => {
                return self.lower_activation(&name, n, &attrs)
            }
            "RMSNormalization" if self.opset < 23 => {
                return Err(at("RMSNormalization exists from opset 23".into()))
            }
            "GroupNormalization" if self.opset < 18 => {
                return Err(at("GroupNormalization exists from opset 18".into()))
            }
            "RMSNormalization" | "LpNormalization" | "GroupNormalization" => {
                return self.lower_norm(&name, n, &attrs)
            }
            "Swish" if self.opset < 24 => return Err(at("Swish exists from opset 24".into())),
            "Mean"
            | "GlobalMaxPool"
            | "MeanVarianceNormalization"
            | "Swish"
            | "ThresholdedRelu"
            | "LpPool"
            | "EyeLike"
            | "NonZero"
            | "CenterCropPad" => return self.compose(&name, n, &attrs),
            "QLinearMatMul" | "QLinearConv" | "DynamicQuantizeLinear" => {
                return self.qlinear(&name, n, &attrs)
            }
            "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
                return self.lower_loss(&name, n, &attrs)
            }
            "Softmax" | "LogSoftmax" | "Hardmax" if self.opset < 13 => {
                return self.softmax_2d(&name, n, attrs);
            }
            _ => {}
        }
        // Scatter (opsets 9 and 10) is ScatterElements under its first name: opset 11
        // renamed it and deprecated the old name, with the same inputs and `axis`.
        let op_name = match n.op_type.as_str() {
            "Scatter" if self.opset >= 11 => {
                return Err(at(
                    "Scatter was replaced by ScatterElements in opset 11".into()
                ))
            }
            "Scatter" => "ScatterElements",
            other => other,
        };
        let op = OpKind::from_name(op_name)
            .ok_or_else(|| at(format!("op {} is not in the Baton IR", n.op_type)))?;
        if let Some(since) = first_opset(op).filter(|&v| self.opset < v) {
            return Err(at(format!(
                "{op} exists from opset {since}; the model declares opset {}",
                self.opset
            )));
        }
        if matches!(op, OpKind::LSTM | OpKind::GRU | OpKind::RNN)
            && attrs.get("layout") == Some(&Attr::Int(1))
        {
            return self.recurrent_batch_first(&name, op, n, attrs);
        }
        if op == OpKind::Attention
            && self.opset < 24
            && n.input.get(6).is_some_and(|s| !s.is_empty())
        {
            return Err(at(
                "Attention's nonpad_kv_seqlen (input 6) exists from opset 24".into(),
            ));
        }
        let mut inputs: Vec<String> = n.input.clone();
        if op == OpKind::OneHot {
            self.one_hot_depth(&name, &mut inputs, n)?;
        }
        if matches!(
            op,
            OpKind::DFT
                | OpKind::STFT
                | OpKind::HannWindow
                | OpKind::HammingWindow
                | OpKind::BlackmanWindow
                | OpKind::MelWeightMatrix
        ) {
            self.spectral_operands(&name, op, &mut inputs, &mut attrs, n)?;
        }
        if self.opset < 11 {
            self.adapt_legacy(&name, op, &mut inputs, &mut attrs, n)?;
        }
        self.adapt(op, &mut inputs, &mut attrs).map_err(&at)?;
        self.add(&name, op, &inputs, &n.output, attrs, n)
    }

    /// Rewrites operands and attributes where opsets differ from the IR's form.
    fn adapt(
        &mut self,
        op: OpKind,
        inputs: &mut Vec<String>,
        attrs: &mut BTreeMap<String, Attr>,
    ) -> Result<(), String> {
        match op {
            // Opset 10's RoiAlign had no coordinate_transformation_mode: it behaved as
            // opset 16's `output_half_pixel`, while the IR's default is opset 16's.
            OpKind::RoiAlign if self.opset < 16 => {
                attrs.insert(
                    "coordinate_transformation_mode".into(),
                    Attr::Str("output_half_pixel".into()),
                );
            }
            OpKind::Clip if inputs.len() > 1 => {
                // Opset 11+: bounds as inputs. Constant bounds become attributes.
                let bounds: Vec<Option<Option<f32>>> = inputs[1..]
                    .iter()
                    .map(|s| {
                        if s.is_empty() {
                            Some(None)
                        } else {
                            self.scalar_f32(s).map(Some)
                        }
                    })
                    .collect();
                if bounds.iter().all(Option::is_some) {
                    for (k, b) in ["min", "max"].iter().zip(bounds) {
                        if let Some(Some(v)) = b {
                            attrs.insert(k.to_string(), Attr::Float(v));
                        }
                    }
                    inputs.truncate(1);
                }
            }
            OpKind::Resize => {
                // Inputs: X, roi, scales, sizes (opset 11+) or X, scales (opset 10, whose
                // coordinates were `asymmetric` and nearest rounding `floor`). Constant
                // scales and sizes become attributes; run-time ones stay operands (the
                // output shape is then known once their values are).
                if self.opset < 11 {
                    inputs.insert(1, String::new());
                    for (k, v) in [
                        ("coordinate_transformation_mode", "asymmetric"),
                        ("nearest_mode", "floor"),
                    ] {
                        attrs.insert(k.into(), Attr::Str(v.into()));
                    }
                }
                if let Some(s) = inputs.get(2).filter(|s| !s.is_empty()) {
                    if let Some(v) = self.const_f32s(s) {
                        if !v.is_empty() {
                            attrs.insert("scales".into(), Attr::Floats(v));
                        }
                        inputs[2] = String::new();
                    }
                }
                if let Some(s) = inputs.get(3).filter(|s| !s.is_empty()) {
                    if let Some(v) = self.const_i64s(s) {
                        attrs.insert("sizes".into(), Attr::Ints(v));
                        inputs[3] = String::new();
                    }
                }
            }
            OpKind::ConstantOfShape => {
                // The fill value arrives as a one-element tensor: the IR keeps its value and
                // its ONNX type code (see `OpKind::ConstantOfShape`).
                if let Some(Attr::Floats(v)) = attrs.remove("value") {
                    attrs.insert("value".into(), Attr::Float(v[0]));
                    attrs.insert("value_dtype".into(), Attr::Int(v[1] as i64));
                }
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) fn add(
        &mut self,
        name: &str,
        op: OpKind,
        inputs: &[String],
        outputs: &[String],
        attrs: BTreeMap<String, Attr>,
        n: &NodeProto,
    ) -> Result<(), OnnxError> {
        let opset = self.opset;
        let at = |message: String| {
            unsupported(format!(
                "node '{name}' ({}, opset {opset}): {message}",
                n.op_type
            ))
        };
        let used = inputs
            .iter()
            .rposition(|s| !s.is_empty())
            .map_or(0, |p| p + 1);
        let first_dtype = inputs
            .first()
            .and_then(|s| self.names.get(s))
            .map_or(DType::F32, |&t| self.g.tensors[t].dtype);
        let mut ids = Vec::with_capacity(used);
        for (i, s) in inputs[..used].iter().enumerate() {
            if s.is_empty() {
                // An omitted optional operand: a 0-element constant (sequence lengths of
                // recurrent ops are integers).
                let dtype = if matches!(op, OpKind::LSTM | OpKind::GRU | OpKind::RNN) && i == 4 {
                    DType::I32
                } else if op == OpKind::NonMaxSuppression {
                    // max_output_boxes_per_class is i64, the thresholds f32.
                    [DType::I64, DType::F32][usize::from(i != 2)]
                } else {
                    first_dtype
                };
                let id = self.push(
                    &format!("{name}_absent{i}"),
                    dtype,
                    vec![Dim::Fixed(0)],
                    Some(Storage::Inline(TensorData::from_bytes(&[]))),
                );
                ids.push(id);
            } else {
                ids.push(
                    *self
                        .names
                        .get(s)
                        .ok_or_else(|| at(format!("input '{s}' is not defined before use")))?,
                );
            }
        }
        let n_out = outputs
            .iter()
            .rposition(|s| !s.is_empty())
            .map_or(0, |p| p + 1);
        if n_out == 0 {
            return Err(at("the node has no output".into()));
        }
        let mut node = Node {
            name: name.to_string(),
            op,
            inputs: ids,
            outputs: Vec::new(),
            attrs,
        };
        let inferred = shape::infer_node(&self.g, &node).ok();
        if let Some(inf) = &inferred {
            if inf.len() < n_out {
                return Err(at(format!(
                    "{n_out} outputs used, the op produces {}",
                    inf.len()
                )));
            }
        }
        for (k, out) in outputs[..n_out].iter().enumerate() {
            let (dtype, dims) = match &inferred {
                Some(inf) => inf[k].clone(),
                None => self.provisional(out, provisional_dtype(&self.g, &node, first_dtype)),
            };
            let tname = if out.is_empty() {
                format!("{name}_unused{k}")
            } else {
                out.clone()
            };
            if !out.is_empty() && self.names.contains_key(out) {
                return Err(at(format!("value '{out}' is defined twice")));
            }
            node.outputs.push(self.push(&tname, dtype, dims, None));
        }
        self.g.nodes.push(node);
        Ok(())
    }

    /// A shape for a value whose inputs have symbolic dimensions: from the model's
    /// value_info when it has one, else one symbolic dimension per unknown. The host
    /// re-infers every shape once the inputs are bound.
    fn provisional(&self, name: &str, dtype: DType) -> (DType, Vec<Dim>) {
        match self.value_info.get(name).map(value_type) {
            Some(Ok((d, shape))) => (d, shape),
            _ => (dtype, vec![Dim::Sym(format!("{name}?"))]),
        }
    }

    fn constant_node(
        &mut self,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), String> {
        let out = n.output.first().ok_or("Constant without an output")?;
        let tensor = if let Some(a) = n.attribute.iter().find(|a| a.name == "value") {
            let t = a.t.as_ref().ok_or("Constant 'value' is not a tensor")?;
            tensor_from_proto(t, self.base_dir).map_err(|e| e.to_string())?
        } else {
            match (
                attrs.get("value_float"),
                attrs.get("value_floats"),
                attrs.get("value_int"),
                attrs.get("value_ints"),
            ) {
                (Some(Attr::Float(v)), ..) => Tensor::from_f32(&[], &[*v]),
                (_, Some(Attr::Floats(v)), ..) => Tensor::from_f32(&[v.len()], v),
                (_, _, Some(Attr::Int(v)), _) => Tensor::from_i64(&[], &[*v]),
                (_, _, _, Some(Attr::Ints(v))) => Tensor::from_i64(&[v.len()], v),
                _ => return Err("Constant value kind is not supported (sparse or string)".into()),
            }
        };
        self.constant(out, tensor);
        Ok(())
    }

    /// Converts an attribute; `Ok(None)` for attributes that carry nothing for the IR.
    fn attribute(&self, a: &AttributeProto) -> Result<Option<Attr>, String> {
        let kind = AttributeType::try_from(a.r#type).unwrap_or(AttributeType::Undefined);
        Ok(Some(match kind {
            AttributeType::Float => Attr::Float(a.f),
            AttributeType::Int => Attr::Int(a.i),
            AttributeType::Floats => Attr::Floats(a.floats.clone()),
            AttributeType::Ints => Attr::Ints(a.ints.clone()),
            AttributeType::String => Attr::Str(
                String::from_utf8(a.s.clone())
                    .map_err(|_| format!("attribute '{}' is not UTF-8", a.name))?,
            ),
            // The IR has no string lists: the recurrent ops' `activations` travel as one
            // comma-separated string (function names contain no commas).
            AttributeType::Strings if a.name == "activations" => {
                let names = a
                    .strings
                    .iter()
                    .map(|s| String::from_utf8(s.clone()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| format!("attribute '{}' is not UTF-8", a.name))?;
                Attr::Str(names.join(","))
            }
            AttributeType::Tensor => {
                // Only one-element tensors (ConstantOfShape's `value`; Constant reads its
                // own): stored as the value and its ONNX type code.
                let t =
                    a.t.as_ref()
                        .ok_or_else(|| format!("attribute '{}' has no tensor", a.name))?;
                let v = tensor_from_proto(t, self.base_dir).map_err(|e| e.to_string())?;
                if v.len() != 1 {
                    return Err(format!(
                        "attribute '{}': only one-element tensors are supported",
                        a.name
                    ));
                }
                return Ok(Some(Attr::Floats(vec![
                    v.to_f64()[0] as f32,
                    t.data_type as f32,
                ])));
            }
            AttributeType::Graph | AttributeType::Graphs => {
                return Err(format!(
                    "attribute '{}' is a subgraph; only If, Loop and Scan take subgraphs",
                    a.name
                ))
            }
            _ => {
                return Err(format!(
                    "attribute '{}' has an unsupported kind ({kind:?})",
                    a.name
                ))
            }
        }))
    }

    fn constant(&mut self, name: &str, t: Tensor) {
        let dims = t.shape.iter().map(|&d| Dim::Fixed(d)).collect();
        let data = Storage::Inline(TensorData::from_bytes(t.bytes()));
        self.push(name, t.dtype, dims, Some(data));
    }

    fn push(
        &mut self,
        name: &str,
        dtype: DType,
        shape: Vec<Dim>,
        data: Option<Storage>,
    ) -> TensorId {
        self.g.tensors.push(TensorDecl {
            name: name.to_string(),
            dtype,
            shape,
            quant: None,
            data,
        });
        let id = self.g.tensors.len() - 1;
        self.names.insert(name.to_string(), id);
        id
    }

    /// An [`OnnxError::Unsupported`] naming the node, its op and the opset.
    fn node_error(&self, name: &str, n: &NodeProto, message: String) -> OnnxError {
        unsupported(format!(
            "node '{name}' ({}, opset {}): {message}",
            n.op_type, self.opset
        ))
    }

    /// Adds a helper node of a rewrite, named and with its one output named
    /// `{name}/{tag}`; returns the output's name.
    fn emit(
        &mut self,
        name: &str,
        tag: &str,
        op: OpKind,
        inputs: &[String],
        attrs: &[(&str, Attr)],
        n: &NodeProto,
    ) -> Result<String, OnnxError> {
        let out = format!("{name}/{tag}");
        let attrs = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        self.add(&out, op, inputs, std::slice::from_ref(&out), attrs, n)?;
        Ok(out)
    }

    /// OneHot's `depth` as the IR takes it, one i64 value: ONNX casts a depth of any other
    /// numeric type to int64 (truncating a float), so a Cast does that here.
    fn one_hot_depth(
        &mut self,
        name: &str,
        inputs: &mut [String],
        n: &NodeProto,
    ) -> Result<(), OnnxError> {
        let Some(depth) = inputs.get(1).filter(|s| !s.is_empty()).cloned() else {
            return Ok(()); // the shape rule names the missing input
        };
        if self.dtype_of(&depth).is_some_and(|d| d != DType::I64) {
            let to = [("to", Attr::Int(7))]; // TensorProto.INT64
            inputs[1] = self.emit(name, "depth_i64", OpKind::Cast, &[depth], &to, n)?;
        }
        Ok(())
    }

    /// The operands of the spectral ops as the IR takes them: the shape-deciding scalars
    /// (DFT's `dft_length` and `axis`, STFT's `frame_step` and `frame_length`, a window's
    /// size) as i64, which ONNX also allows as int32 (a Cast does that here), and DFT's
    /// `axis` as input 2 (before opset 20 it was an attribute, default 1).
    fn spectral_operands(
        &mut self,
        name: &str,
        op: OpKind,
        inputs: &mut Vec<String>,
        attrs: &mut BTreeMap<String, Attr>,
        n: &NodeProto,
    ) -> Result<(), OnnxError> {
        if op == OpKind::DFT && self.opset < 20 {
            let axis = match attrs.remove("axis") {
                Some(Attr::Int(a)) => a,
                _ => 1,
            };
            inputs.resize(2, String::new());
            inputs.push(self.named_constant(name, "axis", Tensor::from_i64(&[], &[axis])));
        }
        let scalars: &[usize] = match op {
            OpKind::DFT => &[1, 2],
            OpKind::STFT => &[1, 3],
            OpKind::MelWeightMatrix => &[0, 1, 2],
            _ => &[0],
        };
        for &i in scalars {
            let Some(s) = inputs.get(i).filter(|s| !s.is_empty()).cloned() else {
                continue;
            };
            if self.dtype_of(&s).is_some_and(|d| d != DType::I64) {
                let to = [("to", Attr::Int(7))]; // TensorProto.INT64
                inputs[i] =
                    self.emit(name, &format!("input{i}_i64"), OpKind::Cast, &[s], &to, n)?;
            }
        }
        Ok(())
    }

    /// Adds a constant of a rewrite named `{name}/{tag}`; returns its name.
    fn named_constant(&mut self, name: &str, tag: &str, t: Tensor) -> String {
        let full = format!("{name}/{tag}");
        self.constant(&full, t);
        full
    }

    fn dtype_of(&self, name: &str) -> Option<DType> {
        Some(self.g.tensors[*self.names.get(name)?].dtype)
    }

    fn static_shape_of(&self, name: &str) -> Option<Vec<usize>> {
        self.g.tensors[*self.names.get(name)?].static_shape()
    }

    fn const_bytes(&self, name: &str) -> Option<(DType, &[u8])> {
        let t = &self.g.tensors[*self.names.get(name)?];
        match &t.data {
            Some(Storage::Inline(d)) => Some((t.dtype, d.bytes())),
            _ => None,
        }
    }

    fn const_f32s(&self, name: &str) -> Option<Vec<f32>> {
        match self.const_bytes(name)? {
            (DType::F32, b) => Some(bytemuck::pod_collect_to_vec(b)),
            _ => None,
        }
    }

    fn const_i64s(&self, name: &str) -> Option<Vec<i64>> {
        match self.const_bytes(name)? {
            (DType::I64, b) => Some(bytemuck::pod_collect_to_vec(b)),
            _ => None,
        }
    }

    fn scalar_f32(&self, name: &str) -> Option<f32> {
        match self.const_f32s(name)?[..] {
            [v] => Some(v),
            _ => None,
        }
    }

    fn rank_of(&self, name: &str) -> Option<usize> {
        let t = &self.g.tensors[*self.names.get(name)?];
        let provisional = matches!(&t.shape[..], [Dim::Sym(s)] if s.ends_with('?'));
        (!provisional).then_some(t.shape.len())
    }
}

/// The dtype of an output whose shape cannot be inferred yet (it depends on values, or on
/// an input's symbolic shape), for the ops whose output dtype is not their first input's:
/// a later node (a Loop body's carried value) is typed from it before the host re-infers.
fn provisional_dtype(g: &Graph, node: &Node, first: DType) -> DType {
    let code = |key: &str| match node.attrs.get(key) {
        Some(Attr::Int(c)) => i32::try_from(*c).ok().and_then(baton_dtype),
        _ => None,
    };
    match node.op {
        // ONNX's default fill is a float 0.
        OpKind::ConstantOfShape => code("value_dtype").unwrap_or(DType::F32),
        OpKind::Cast => code("to").unwrap_or(first),
        OpKind::CastLike => node.inputs.get(1).map_or(first, |&t| g.tensors[t].dtype),
        OpKind::Shape | OpKind::Size | OpKind::ArgMax | OpKind::ArgMin => DType::I64,
        OpKind::Equal
        | OpKind::Less
        | OpKind::Greater
        | OpKind::LessOrEqual
        | OpKind::GreaterOrEqual
        | OpKind::IsNaN
        | OpKind::IsInf => DType::Bool,
        _ => first,
    }
}

/// Whether `v` declares a type at all.
fn has_type(v: &ValueInfoProto) -> bool {
    v.r#type.as_ref().is_some_and(|t| t.value.is_some())
}

/// The element type of `v` if it is a tensor of a type Baton has (its shape may be missing).
fn tensor_dtype(v: &ValueInfoProto) -> Option<DType> {
    match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => baton_dtype(t.elem_type),
        _ => None,
    }
}

/// Dtype and shape of a graph input or output from its declared type.
fn value_type(v: &ValueInfoProto) -> Result<(DType, Vec<Dim>), OnnxError> {
    let t = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => t,
        _ => return Err(unsupported(format!("value '{}' is not a tensor", v.name))),
    };
    let dtype = baton_dtype(t.elem_type).ok_or_else(|| {
        unsupported(format!(
            "value '{}' has element type {}, which Baton does not support",
            v.name,
            onnx_type_name(t.elem_type)
        ))
    })?;
    let dims = match &t.shape {
        None => {
            return Err(unsupported(format!(
                "value '{}' has no declared shape",
                v.name
            )))
        }
        Some(s) => s
            .dim
            .iter()
            .enumerate()
            .map(|(i, d)| {
                use super::proto::tensor_shape_proto::dimension::Value;
                match &d.value {
                    Some(Value::DimValue(n)) if *n >= 0 => Dim::Fixed(*n as usize),
                    Some(Value::DimParam(p)) if !p.is_empty() => Dim::Sym(p.clone()),
                    _ => Dim::Sym(format!("{}_dim{i}", v.name)),
                }
            })
            .collect(),
    };
    Ok((dtype, dims))
}

/// The opset that introduced `op`, for the ops added after opset 1: a node of an older
/// opset is not valid ONNX, and guessing what its writer meant would be wrong.
fn first_opset(op: OpKind) -> Option<i64> {
    Some(match op {
        OpKind::GreaterOrEqual | OpKind::LessOrEqual | OpKind::Einsum => 12,
        OpKind::CumProd | OpKind::BitCast => 26,
        OpKind::LinearAttention => 27,
        OpKind::Unique | OpKind::Det => 11,
        OpKind::ReverseSequence | OpKind::RoiAlign => 10,
        OpKind::NonMaxSuppression => 10,
        OpKind::Compress => 9,
        OpKind::GridSample => 16,
        OpKind::AffineGrid => 20,
        OpKind::DFT
        | OpKind::STFT
        | OpKind::HannWindow
        | OpKind::HammingWindow
        | OpKind::BlackmanWindow
        | OpKind::MelWeightMatrix => 17,
        OpKind::Attention | OpKind::RotaryEmbedding => 23,
        OpKind::TensorScatter => 24,
        OpKind::CausalConvWithState => 27,
        OpKind::Col2Im => 18,
        OpKind::MaxUnpool => 9,
        OpKind::DeformConv => 19,
        OpKind::ConvInteger | OpKind::MatMulInteger => 10,
        OpKind::BitwiseAnd | OpKind::BitwiseOr | OpKind::BitwiseXor | OpKind::BitwiseNot => 18,
        OpKind::Round | OpKind::Range | OpKind::BitShift => 11,
        OpKind::Mod | OpKind::IsInf => 10,
        OpKind::Sign
        | OpKind::OneHot
        | OpKind::IsNaN
        | OpKind::Sinh
        | OpKind::Cosh
        | OpKind::Asinh
        | OpKind::Acosh
        | OpKind::Atanh => 9,
        OpKind::Sin | OpKind::Cos | OpKind::Tan | OpKind::Asin | OpKind::Acos | OpKind::Atan => 7,
        _ => return None,
    })
}
