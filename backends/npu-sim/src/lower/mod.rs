//! Recognising quantized groups and lowering them to commands.
//!
//! In a QDQ model every quantized op sits between DequantizeLinear and QuantizeLinear
//! nodes: `DQ(x int8) [+ DQ(weights int8) + DQ(bias int32)] → op [→ Relu/Clip] → Q`. The
//! NPU claims such a *group* whole, so the tensors at its partition boundaries are int8
//! and the f32 tensors inside a group never exist: they are folded into integer
//! requantization. [`analyse`] finds the groups of a graph and answers for every node;
//! `supports` reports its answers and `compile` lowers the groups it found.

use std::collections::BTreeSet;

mod groups;

use baton_delegate_api::ir::{DType, Graph, Node, NodeId, OpKind, TensorId};
use baton_delegate_api::shape::normalize_axis;
use baton_delegate_api::{Constants, Decline, DeclineReason, Support};

use crate::blob::Machine;
use crate::command::Body;
use crate::quant::quantize_like_reference;

/// A refusal (the SDK's one [`Decline`] type), for the many places below that build one.
fn no(reason: DeclineReason, message: impl Into<String>) -> Decline {
    Decline::new(reason, message)
}

/// A recognised group and the command it lowers to.
#[derive(Clone, Debug)]
pub struct Group {
    /// The op node the group is built around.
    pub anchor: NodeId,
    /// Every node of the group (DQs, the op, a bias Add, a Relu/Clip, the Q).
    pub nodes: Vec<NodeId>,
    /// The int8 tensors it reads, in the command's input order.
    pub inputs: Vec<TensorId>,
    /// The int8 tensor it writes.
    pub output: TensorId,
    /// The command's opcode.
    pub op: u16,
    /// The command's body.
    pub body: Body,
    /// The output clamp.
    pub lo: i32,
    /// Upper end of the output clamp.
    pub hi: i32,
}

/// Per-node answers and the groups they come from.
pub struct Analysis {
    /// One answer per node.
    pub answers: Vec<Support>,
    /// The claimed groups, in execution (anchor) order.
    pub groups: Vec<Group>,
}

/// The most elements along any dimension (Ethos-U's 16-bit extent fields).
pub const MAX_EXTENT: usize = 65_536;
/// The largest kernel side.
pub const MAX_KERNEL: usize = 64;
/// The largest convolution and pooling stride.
pub const MAX_STRIDE: usize = 3;
/// The largest dilation.
pub const MAX_DILATION: usize = 2;

/// Finds every group of `g` and answers for every node.
pub fn analyse(g: &Graph, c: Constants<'_>, machine: Machine) -> Analysis {
    let cx = Cx::new(g, c, machine);
    let mut attempts: Vec<(NodeId, Result<Group, Decline>)> = Vec::new();
    for (id, node) in g.nodes.iter().enumerate() {
        if cx.is_anchor(node) {
            attempts.push((id, cx.group(id)));
        }
    }
    // A dequantized tensor may be claimed only if every node reading it is claimed too:
    // otherwise an f32 tensor would cross the partition boundary. Drop groups until the
    // claimed set is closed under that rule.
    loop {
        let claimed: BTreeSet<NodeId> = attempts
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .flat_map(|gr| gr.nodes.iter().copied())
            .collect();
        let mut changed = false;
        for (_, r) in attempts.iter_mut() {
            let Ok(gr) = r else { continue };
            let leak = gr.nodes.iter().find_map(|&n| {
                let node = &g.nodes[n];
                if node.op != OpKind::DequantizeLinear {
                    return None;
                }
                let out = node.outputs[0];
                if g.outputs.contains(&out) {
                    return Some(format!("{} is a graph output", g.tensors[out].name));
                }
                cx.consumers[out]
                    .iter()
                    .find(|k| !claimed.contains(k))
                    .map(|&k| {
                        format!(
                            "dequantized tensor {} also feeds {}, which the NPU does not run",
                            g.tensors[out].name,
                            g.nodes[k].label()
                        )
                    })
            });
            if let Some(m) = leak {
                *r = Err(no(DeclineReason::Other, m));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut answers: Vec<Option<Support>> = vec![None; g.nodes.len()];
    let mut groups = Vec::new();
    // Refusals first: a node that failed as an anchor may still belong to another group
    // (a Reshape folded into the FC after it), and then it is claimed.
    for (anchor, r) in &attempts {
        if let Err(d) = r {
            answers[*anchor] = Some(d.clone().into_support());
        }
    }
    for (_, r) in &attempts {
        if let Ok(gr) = r {
            for &n in &gr.nodes {
                answers[n] = Some(Support::Yes);
            }
            groups.push(gr.clone());
        }
    }
    // Nodes that belong to no claimed group: say why, naming what they hang off.
    let answers = answers
        .into_iter()
        .enumerate()
        .map(|(id, a)| match a {
            Some(Support::Yes) => Support::Yes,
            Some(s) => s,
            None => cx.explain(id, &attempts),
        })
        .collect();
    Analysis { answers, groups }
}

/// The graph with its producer and consumer indices.
struct Cx<'a> {
    g: &'a Graph,
    c: Constants<'a>,
    machine: Machine,
    producers: Vec<Option<NodeId>>,
    consumers: Vec<Vec<NodeId>>,
}

/// Quantization parameters read from a Q or DQ node's scale and zero-point operands.
struct QParams {
    scales: Vec<f32>,
    zero_points: Vec<i32>,
    axis: usize,
}

/// An int8 activation entering a group through its DequantizeLinear.
struct ActIn {
    dq: NodeId,
    tensor: TensorId,
    scale: f32,
    zp: i32,
    shape: Vec<usize>,
}

/// The end of a group: `[Relu/Clip] → Q`.
struct Tail {
    nodes: Vec<NodeId>,
    output: TensorId,
    scale: f32,
    zp: i32,
    lo: i32,
    hi: i32,
}

impl<'a> Cx<'a> {
    fn new(g: &'a Graph, c: Constants<'a>, machine: Machine) -> Cx<'a> {
        Cx {
            g,
            c,
            machine,
            producers: g.producers(),
            consumers: g.consumers(),
        }
    }

    fn node_of(&self, t: TensorId) -> Option<&'a Node> {
        self.producers[t].map(|n| &self.g.nodes[n])
    }

    /// Whether a node is the op of a group (rather than a DQ, Q, fused activation or
    /// bias Add that belongs to one).
    fn is_anchor(&self, node: &Node) -> bool {
        let from_dq = |t: TensorId| {
            self.node_of(t)
                .is_some_and(|p| p.op == OpKind::DequantizeLinear)
        };
        match node.op {
            OpKind::Conv
            | OpKind::MatMul
            | OpKind::Gemm
            | OpKind::MaxPool
            | OpKind::AveragePool
            | OpKind::GlobalAveragePool
            | OpKind::Reshape
            | OpKind::Flatten
            | OpKind::Concat
            | OpKind::Softmax => true,
            // Standalone only when reading a dequantized tensor; else fused.
            OpKind::Relu | OpKind::Clip => node.inputs.first().is_some_and(|&t| from_dq(t)),
            // A bias Add belongs to the MatMul before it.
            OpKind::Add => !self.is_bias_add(node),
            _ => false,
        }
    }

    fn is_bias_add(&self, node: &Node) -> bool {
        node.op == OpKind::Add
            && node.inputs.iter().any(|&t| {
                self.node_of(t).is_some_and(|p| {
                    p.op == OpKind::DequantizeLinear
                        && self.g.tensors[p.inputs[0]].is_const()
                        && self.g.tensors[p.inputs[0]].dtype == DType::I32
                })
            })
            && node.inputs.iter().any(|&t| {
                self.node_of(t)
                    .is_some_and(|p| matches!(p.op, OpKind::MatMul | OpKind::Gemm))
            })
    }

    fn shape(&self, t: TensorId) -> Result<Vec<usize>, Decline> {
        let d = &self.g.tensors[t];
        let s = d.static_shape().ok_or_else(|| {
            no(
                DeclineReason::Shape,
                format!(
                    "tensor {} has a dynamic shape {}: the NPU needs fixed shapes",
                    d.name,
                    baton_delegate_api::ir::shape_string(&d.shape)
                ),
            )
        })?;
        if let Some(&big) = s.iter().find(|&&e| e > MAX_EXTENT) {
            return Err(no(
                DeclineReason::Shape,
                format!(
                    "tensor {} has an extent of {big}, above the NPU's limit of {MAX_EXTENT}",
                    d.name
                ),
            ));
        }
        Ok(s)
    }

    fn const_ints(&self, t: TensorId) -> Result<Vec<i32>, Decline> {
        let d = &self.g.tensors[t];
        let bytes = self.c.bytes(t).ok_or_else(|| {
            no(
                DeclineReason::NotConstant,
                format!("{} must be a constant", d.name),
            )
        })?;
        match d.dtype {
            DType::I8 => Ok(bytes.iter().map(|&b| b as i8 as i32).collect()),
            DType::I32 if bytes.len() % 4 == 0 => Ok(bytes
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect()),
            other => Err(no(
                DeclineReason::DType,
                format!(
                    "{} is {other}: the NPU takes int8 data and int32 biases",
                    d.name
                ),
            )),
        }
    }

    fn const_f32s(&self, t: TensorId) -> Result<Vec<f32>, Decline> {
        let d = &self.g.tensors[t];
        if !d.is_const() {
            return Err(no(
                DeclineReason::NotConstant,
                format!("{} must be a constant", d.name),
            ));
        }
        self.c.f32s(t).map(<[f32]>::to_vec).ok_or_else(|| {
            no(
                DeclineReason::DType,
                format!("scale {} must be f32, not {}", d.name, d.dtype),
            )
        })
    }

    /// The scale and zero point operands of a Q or DQ node.
    fn qparams(&self, node: &Node, rank: usize) -> Result<QParams, Decline> {
        if node.attr_int("block_size", 0) != 0 {
            return Err(no(
                DeclineReason::Attribute,
                format!("{}: blocked quantization", node.label()),
            ));
        }
        let scales = self.const_f32s(node.inputs[1])?;
        if scales.is_empty() || scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(no(
                DeclineReason::Other,
                format!("{}: scales must be finite and positive", node.label()),
            ));
        }
        let zero_points = match node.inputs.get(2) {
            Some(&z) => self.const_ints(z)?,
            None => vec![0; scales.len()],
        };
        if zero_points.len() != scales.len() {
            return Err(no(
                DeclineReason::Shape,
                format!("{}: scale and zero point lengths differ", node.label()),
            ));
        }
        let axis = normalize_axis(node.attr_int("axis", 1), rank.max(1))
            .map_err(|e| no(DeclineReason::Attribute, format!("{}: {e}", node.label())))?;
        Ok(QParams {
            scales,
            zero_points,
            axis,
        })
    }

    /// `t` (an f32 operand of the op) must come from a DQ of a run-time int8 tensor with
    /// one scale.
    fn act_in(&self, op: &Node, t: TensorId) -> Result<ActIn, Decline> {
        let decl = &self.g.tensors[t];
        let Some(dq) =
            self.producers[t].filter(|&p| self.g.nodes[p].op == OpKind::DequantizeLinear)
        else {
            return Err(self.not_quantized(op, t));
        };
        let dqn = &self.g.nodes[dq];
        let x = dqn.inputs[0];
        let xd = &self.g.tensors[x];
        if xd.dtype != DType::I8 {
            return Err(no(
                DeclineReason::DType,
                format!(
                    "{}: input {} is {}, the NPU takes int8",
                    op.label(),
                    xd.name,
                    xd.dtype
                ),
            ));
        }
        if xd.is_const() {
            return Err(no(
                DeclineReason::Other,
                format!("{}: constant activation {}", op.label(), xd.name),
            ));
        }
        let shape = self.shape(x)?;
        let q = self.qparams(dqn, shape.len())?;
        if q.scales.len() != 1 {
            return Err(no(
                DeclineReason::Other,
                format!(
                    "{}: activation {} is quantized per axis; the NPU takes one scale per activation",
                    op.label(),
                    decl.name
                ),
            ));
        }
        Ok(ActIn {
            dq,
            tensor: x,
            scale: q.scales[0],
            zp: q.zero_points[0],
            shape,
        })
    }

    fn not_quantized(&self, op: &Node, t: TensorId) -> Decline {
        let d = &self.g.tensors[t];
        no(
            DeclineReason::DType,
            format!(
                "{}: operand {} is {} without a DequantizeLinear: the NPU runs only statically quantized int8 (QDQ) groups",
                op.label(),
                d.name,
                d.dtype
            ),
        )
    }

    /// A constant operand through its DQ: (dq node, int values, scales, axis).
    fn const_in(
        &self,
        op: &Node,
        t: TensorId,
        dtype: DType,
    ) -> Result<(NodeId, Vec<i32>, QParams, Vec<usize>), Decline> {
        let Some(dq) =
            self.producers[t].filter(|&p| self.g.nodes[p].op == OpKind::DequantizeLinear)
        else {
            return Err(self.not_quantized(op, t));
        };
        let dqn = &self.g.nodes[dq];
        let x = dqn.inputs[0];
        let xd = &self.g.tensors[x];
        if !xd.is_const() {
            return Err(no(
                DeclineReason::NotConstant,
                format!("{}: {} must be constant for the NPU", op.label(), xd.name),
            ));
        }
        if xd.dtype != dtype {
            return Err(no(
                DeclineReason::DType,
                format!(
                    "{}: {} is {}, the NPU needs {dtype}",
                    op.label(),
                    xd.name,
                    xd.dtype
                ),
            ));
        }
        let shape = self.shape(x)?;
        let values = self.const_ints(x)?;
        let q = self.qparams(dqn, shape.len())?;
        if q.zero_points.iter().any(|&z| z != 0) {
            return Err(no(
                DeclineReason::Other,
                format!(
                    "{}: {} has a non-zero zero point; the NPU takes symmetric weights and biases",
                    op.label(),
                    xd.name
                ),
            ));
        }
        Ok((dq, values, q, shape))
    }

    /// Follows the op's f32 output through an optional Relu/Clip to its QuantizeLinear.
    fn tail(&self, op: &Node, mut t: TensorId, nodes: &mut Vec<NodeId>) -> Result<Tail, Decline> {
        let mut bounds: Option<(f32, f32)> = None;
        loop {
            if self.g.outputs.contains(&t) {
                return Err(no(
                    DeclineReason::Other,
                    format!(
                        "{}: the f32 tensor {} is a graph output; the NPU writes only int8",
                        op.label(),
                        self.g.tensors[t].name
                    ),
                ));
            }
            let [k] = self.consumers[t][..] else {
                return Err(no(
                    DeclineReason::Other,
                    format!("{}: the f32 tensor {} must feed exactly one QuantizeLinear (or Relu/Clip then QuantizeLinear)", op.label(), self.g.tensors[t].name),
                ));
            };
            let next = &self.g.nodes[k];
            match next.op {
                OpKind::Relu | OpKind::Clip if bounds.is_none() => {
                    bounds = Some(self.clamp_bounds(next)?);
                    nodes.push(k);
                    t = next.outputs[0];
                }
                OpKind::QuantizeLinear => {
                    let out = next.outputs[0];
                    let od = &self.g.tensors[out];
                    if od.dtype != DType::I8 {
                        return Err(no(
                            DeclineReason::DType,
                            format!(
                                "{}: quantizes to {}, the NPU writes int8",
                                next.label(),
                                od.dtype
                            ),
                        ));
                    }
                    let q = self.qparams(next, self.shape(out)?.len())?;
                    if q.scales.len() != 1 {
                        return Err(no(
                            DeclineReason::Other,
                            format!("{}: per-axis output quantization", next.label()),
                        ));
                    }
                    let (scale, zp) = (q.scales[0], q.zero_points[0]);
                    let (mut lo, mut hi) = (-128, 127);
                    if let Some((a, b)) = bounds {
                        lo = lo.max(quantize_like_reference(a, scale, zp));
                        hi = hi.min(quantize_like_reference(b, scale, zp));
                    }
                    nodes.push(k);
                    return Ok(Tail {
                        nodes: nodes.clone(),
                        output: out,
                        scale,
                        zp,
                        lo,
                        hi: hi.max(lo),
                    });
                }
                _ => {
                    return Err(no(
                        DeclineReason::Other,
                        format!(
                            "{}: its f32 output feeds {}, not a QuantizeLinear",
                            op.label(),
                            next.label()
                        ),
                    ))
                }
            }
        }
    }

    /// Relu is `[0, +inf)`; Clip's bounds come from constant inputs or attributes.
    fn clamp_bounds(&self, node: &Node) -> Result<(f32, f32), Decline> {
        if node.op == OpKind::Relu {
            return Ok((0.0, f32::INFINITY));
        }
        let bound = |i: usize, attr: &str, default: f32| -> Result<f32, Decline> {
            match node.inputs.get(i) {
                Some(&t) => {
                    let v = self.const_f32s(t)?;
                    v.first().copied().ok_or_else(|| {
                        no(
                            DeclineReason::Shape,
                            format!("{}: empty bound", node.label()),
                        )
                    })
                }
                None => Ok(node.attr_float(attr, default)),
            }
        };
        Ok((
            bound(1, "min", f32::NEG_INFINITY)?,
            bound(2, "max", f32::INFINITY)?,
        ))
    }

    /// Recognises and lowers the group around `anchor`.
    fn group(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        for &t in node.inputs.iter().chain(&node.outputs) {
            self.shape(t)?;
        }
        match node.op {
            OpKind::Conv => self.conv(anchor),
            OpKind::MatMul | OpKind::Gemm => self.fc(anchor),
            OpKind::Add => self.add(anchor),
            OpKind::MaxPool | OpKind::AveragePool | OpKind::GlobalAveragePool => self.pool(anchor),
            OpKind::Relu | OpKind::Clip | OpKind::Reshape | OpKind::Flatten => self.rescale(anchor),
            OpKind::Concat => self.concat(anchor),
            OpKind::Softmax => self.softmax(anchor),
            _ => Err(no(
                DeclineReason::Op,
                format!("{}: not an NPU operation", node.label()),
            )),
        }
    }

    /// Why a node outside every claimed group is declined.
    fn explain(&self, id: NodeId, attempts: &[(NodeId, Result<Group, Decline>)]) -> Support {
        let node = &self.g.nodes[id];
        // A member of a failed group: repeat the group's reason.
        for (anchor, r) in attempts {
            if let Err(d) = r {
                if self.related(id, *anchor) {
                    return Support::no(
                        d.reason,
                        format!(
                            "part of the group of {}, declined: {}",
                            self.g.nodes[*anchor].label(),
                            d.message
                        ),
                    );
                }
            }
        }
        match node.op {
            OpKind::QuantizeLinear | OpKind::DequantizeLinear => Support::no(
                DeclineReason::Other,
                format!("{}: not part of a quantized group the NPU runs", node.label()),
            ),
            op if self.is_anchor(node) || matches!(op, OpKind::Relu | OpKind::Clip | OpKind::Add) => {
                Support::no(DeclineReason::DType, format!("{}: float op outside a QDQ group; the NPU runs only statically quantized int8", node.label()))
            }
            _ => Support::no(DeclineReason::Op, format!("{}: {} is not an NPU operation", node.label(), node.op)),
        }
    }

    /// Whether node `n` would have belonged to the group of `anchor`: a DQ feeding it, or
    /// a bias Add, Relu/Clip or the Q on the chain that follows it.
    fn related(&self, n: NodeId, anchor: NodeId) -> bool {
        let a = &self.g.nodes[anchor];
        let node = &self.g.nodes[n];
        if node.op == OpKind::DequantizeLinear {
            return node.outputs.iter().any(|t| a.inputs.contains(t));
        }
        let mut t = a.outputs[0];
        for _ in 0..3 {
            let [k] = self.consumers[t][..] else { break };
            let next = &self.g.nodes[k];
            if !matches!(
                next.op,
                OpKind::Relu | OpKind::Clip | OpKind::Add | OpKind::QuantizeLinear
            ) {
                break;
            }
            if k == n {
                return true;
            }
            if next.op == OpKind::QuantizeLinear {
                break;
            }
            t = next.outputs[0];
        }
        false
    }
}
