//! Recognising quantized groups and lowering them to commands.
//!
//! In a QDQ model every quantized op sits between DequantizeLinear and QuantizeLinear
//! nodes: `DQ(x int8) [+ DQ(weights int8) + DQ(bias int32)] → op [→ Relu/Clip] → Q`. The
//! NPU claims such a *group* whole, so the tensors at its partition boundaries are int8
//! and the f32 tensors inside a group never exist: they are folded into integer
//! requantization. [`analyse`] finds the groups of a graph and answers for every node;
//! `supports` reports its answers and `compile` lowers the groups it found.

use std::collections::BTreeSet;

use baton_delegate_api::abi::reason;
use baton_delegate_api::ir::{DType, Graph, Node, NodeId, OpKind, TensorId};
use baton_delegate_api::shape::{normalize_axis, ConvGeometry, PoolGeometry};
use baton_delegate_api::{Constants, Support};

use crate::blob::Machine;
use crate::command::{opcode, Add, Body, Concat, ConcatPart, Conv, Fc, Pool, Rescale, Softmax};
use crate::quant::{quantize_like_reference, Requant};
use crate::tiling;

/// Why a node is declined: an `abi::reason` code and a message.
#[derive(Clone, Debug, PartialEq)]
pub struct Decline {
    /// An [`reason`] code.
    pub reason: u32,
    /// The explanation.
    pub message: String,
}

fn no(reason: u32, message: impl Into<String>) -> Decline {
    Decline {
        reason,
        message: message.into(),
    }
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
                *r = Err(no(reason::OTHER, m));
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
            answers[*anchor] = Some(Support::no(d.reason, d.message.clone()));
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
                reason::SHAPE,
                format!(
                    "tensor {} has a dynamic shape {}: the NPU needs fixed shapes",
                    d.name,
                    baton_delegate_api::ir::shape_string(&d.shape)
                ),
            )
        })?;
        if let Some(&big) = s.iter().find(|&&e| e > MAX_EXTENT) {
            return Err(no(
                reason::SHAPE,
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
                reason::NOT_CONSTANT,
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
                reason::DTYPE,
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
                reason::NOT_CONSTANT,
                format!("{} must be a constant", d.name),
            ));
        }
        self.c.f32s(t).map(<[f32]>::to_vec).ok_or_else(|| {
            no(
                reason::DTYPE,
                format!("scale {} must be f32, not {}", d.name, d.dtype),
            )
        })
    }

    /// The scale and zero point operands of a Q or DQ node.
    fn qparams(&self, node: &Node, rank: usize) -> Result<QParams, Decline> {
        if node.attr_int("block_size", 0) != 0 {
            return Err(no(
                reason::ATTRIBUTE,
                format!("{}: blocked quantization", node.label()),
            ));
        }
        let scales = self.const_f32s(node.inputs[1])?;
        if scales.is_empty() || scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(no(
                reason::OTHER,
                format!("{}: scales must be finite and positive", node.label()),
            ));
        }
        let zero_points = match node.inputs.get(2) {
            Some(&z) => self.const_ints(z)?,
            None => vec![0; scales.len()],
        };
        if zero_points.len() != scales.len() {
            return Err(no(
                reason::SHAPE,
                format!("{}: scale and zero point lengths differ", node.label()),
            ));
        }
        let axis = normalize_axis(node.attr_int("axis", 1), rank.max(1))
            .map_err(|e| no(reason::ATTRIBUTE, format!("{}: {e}", node.label())))?;
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
                reason::DTYPE,
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
                reason::OTHER,
                format!("{}: constant activation {}", op.label(), xd.name),
            ));
        }
        let shape = self.shape(x)?;
        let q = self.qparams(dqn, shape.len())?;
        if q.scales.len() != 1 {
            return Err(no(
                reason::OTHER,
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
            reason::DTYPE,
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
                reason::NOT_CONSTANT,
                format!("{}: {} must be constant for the NPU", op.label(), xd.name),
            ));
        }
        if xd.dtype != dtype {
            return Err(no(
                reason::DTYPE,
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
                reason::OTHER,
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
                    reason::OTHER,
                    format!(
                        "{}: the f32 tensor {} is a graph output; the NPU writes only int8",
                        op.label(),
                        self.g.tensors[t].name
                    ),
                ));
            }
            let [k] = self.consumers[t][..] else {
                return Err(no(
                    reason::OTHER,
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
                            reason::DTYPE,
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
                            reason::OTHER,
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
                        reason::OTHER,
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
                    v.first()
                        .copied()
                        .ok_or_else(|| no(reason::SHAPE, format!("{}: empty bound", node.label())))
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
                reason::OP,
                format!("{}: not an NPU operation", node.label()),
            )),
        }
    }

    fn conv(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let x = self.act_in(node, node.inputs[0])?;
        let (wdq, wv, wq, wshape) = self.const_in(node, node.inputs[1], DType::I8)?;
        if x.shape.len() != 4 {
            return Err(no(
                reason::SHAPE,
                format!("{}: only 2-D convolution (rank 4)", node.label()),
            ));
        }
        let geo = ConvGeometry::new(node, &x.shape, &wshape)
            .map_err(|e| no(reason::ATTRIBUTE, format!("{}: {e}", node.label())))?;
        let win = &geo.window;
        let (c, m) = (geo.in_channels, geo.out_channels);
        let depthwise = geo.group == c && geo.group > 1;
        if geo.group != 1 && !depthwise {
            return Err(no(
                reason::ATTRIBUTE,
                format!(
                    "{}: grouped convolution (group {}) is neither plain nor depthwise",
                    node.label(),
                    geo.group
                ),
            ));
        }
        self.window_limits(node, &win.kernel, &win.strides, &win.dilations)?;
        let per_ch = self.per_channel(node, &wq, m, 0)?;
        let mut nodes = vec![x.dq, wdq, anchor];
        let bias = match node.inputs.get(2) {
            Some(&b) => {
                let (bdq, bv, bq, _) = self.const_in(node, b, DType::I32)?;
                nodes.push(bdq);
                Some((bv, self.per_channel(node, &bq, m, 0)?))
            }
            None => None,
        };
        let tail = self.tail(node, node.outputs[0], &mut nodes)?;
        let k_len = (c / geo.group) * win.kernel[0] * win.kernel[1];
        check_accumulator(node, k_len)?;
        let (bias, requant) = self.requant_params(node, x.scale, &per_ch, bias, tail.scale, m)?;
        let mut body = Conv {
            n: geo.batch as u32,
            c: c as u32,
            h: x.shape[2] as u32,
            w: x.shape[3] as u32,
            m: m as u32,
            oh: geo.out_spatial[0] as u32,
            ow: geo.out_spatial[1] as u32,
            kh: win.kernel[0] as u32,
            kw: win.kernel[1] as u32,
            sh: win.strides[0] as u32,
            sw: win.strides[1] as u32,
            dh: win.dilations[0] as u32,
            dw: win.dilations[1] as u32,
            pt: win.pad_begin[0] as u32,
            pl: win.pad_begin[1] as u32,
            in_zp: x.zp,
            out_zp: tail.zp,
            weights: wv.iter().map(|&v| v as i8).collect(),
            bias,
            requant,
            tile_rows: 1,
            tile_ch: 1,
        };
        tiling::plan_conv(&mut body, depthwise, self.machine.sram_bytes as usize)
            .map_err(|e| no(reason::RESOURCE, format!("{}: {e}", node.label())))?;
        let op = if depthwise {
            opcode::DEPTHWISE
        } else {
            opcode::CONV2D
        };
        Ok(self.finish(anchor, tail, vec![x.tensor], op, Body::Conv(body)))
    }

    /// The FC's input: a dequantized activation, possibly through a Reshape or Flatten
    /// that only this FC reads (row-major reshaping moves no data, so the FC reads the
    /// int8 buffer as the reshaped shape). Returns the folded reshape node, if any.
    fn fc_input(&self, node: &Node) -> Result<(ActIn, Option<NodeId>), Decline> {
        let t = node.inputs[0];
        if let Some(p) = self.producers[t] {
            let pn = &self.g.nodes[p];
            let only_reader = self.consumers[t].len() == 1 && !self.g.outputs.contains(&t);
            if matches!(pn.op, OpKind::Reshape | OpKind::Flatten) && only_reader {
                let mut x = self.act_in(pn, pn.inputs[0])?;
                x.shape = self.shape(t)?;
                return Ok((x, Some(p)));
            }
        }
        Ok((self.act_in(node, t)?, None))
    }

    fn fc(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let (x, reshape) = self.fc_input(node)?;
        let (wdq, wv, wq, wshape) = self.const_in(node, node.inputs[1], DType::I8)?;
        let trans_b = node.op == OpKind::Gemm && node.attr_int("transB", 0) != 0;
        if node.op == OpKind::Gemm
            && (node.attr_int("transA", 0) != 0
                || node.attr_float("alpha", 1.0) != 1.0
                || node.attr_float("beta", 1.0) != 1.0)
        {
            return Err(no(
                reason::ATTRIBUTE,
                format!("{}: only transA=0, alpha=1, beta=1", node.label()),
            ));
        }
        if wshape.len() != 2 || x.shape.is_empty() {
            return Err(no(
                reason::SHAPE,
                format!(
                    "{}: weights must be 2-D and the input at least 1-D",
                    node.label()
                ),
            ));
        }
        let (k, n) = if trans_b {
            (wshape[1], wshape[0])
        } else {
            (wshape[0], wshape[1])
        };
        if *x.shape.last().expect("non-empty") != k
            || (node.op == OpKind::Gemm && x.shape.len() != 2)
        {
            return Err(no(
                reason::SHAPE,
                format!(
                    "{}: input {:?} does not meet weights {:?}",
                    node.label(),
                    x.shape,
                    wshape
                ),
            ));
        }
        let rows: usize = x.shape[..x.shape.len() - 1].iter().product();
        let per_ch = self.per_channel(node, &wq, n, if trans_b { 0 } else { 1 })?;
        let mut nodes = vec![x.dq, wdq, anchor];
        nodes.extend(reshape);
        let mut bias = None;
        if node.op == OpKind::Gemm {
            if let Some(&b) = node.inputs.get(2) {
                let (bdq, bv, bq, _) = self.const_in(node, b, DType::I32)?;
                nodes.push(bdq);
                bias = Some((bv, self.per_channel(node, &bq, n, 0)?));
            }
        }
        let mut out = node.outputs[0];
        // MatMul + Add(DQ(int32 bias)) is one FC with a bias.
        if let [k2] = self.consumers[out][..] {
            let add = &self.g.nodes[k2];
            if self.is_bias_add(add) && bias.is_none() && !self.g.outputs.contains(&out) {
                let other = if add.inputs[0] == out {
                    add.inputs[1]
                } else {
                    add.inputs[0]
                };
                let (bdq, bv, bq, bshape) = self.const_in(add, other, DType::I32)?;
                if bshape.iter().product::<usize>() != n || bshape.last() != Some(&n) {
                    return Err(no(
                        reason::SHAPE,
                        format!(
                            "{}: bias {:?} is not one value per output column",
                            add.label(),
                            bshape
                        ),
                    ));
                }
                nodes.extend([bdq, k2]);
                bias = Some((bv, self.per_channel(add, &bq, n, 0)?));
                out = add.outputs[0];
            }
        }
        let tail = self.tail(node, out, &mut nodes)?;
        check_accumulator(node, k)?;
        let (bias, requant) = self.requant_params(node, x.scale, &per_ch, bias, tail.scale, n)?;
        // Output-major weights: row j holds the k weights of output column j.
        let weights = (0..n)
            .flat_map(|j| (0..k).map(move |i| (i, j)))
            .map(|(i, j)| if trans_b { wv[j * k + i] } else { wv[i * n + j] } as i8)
            .collect();
        let mut body = Fc {
            rows: rows as u32,
            k: k as u32,
            n: n as u32,
            in_zp: x.zp,
            out_zp: tail.zp,
            weights,
            bias,
            requant,
            tile_rows: 1,
            tile_cols: 1,
        };
        tiling::plan_fc(&mut body, self.machine.sram_bytes as usize)
            .map_err(|e| no(reason::RESOURCE, format!("{}: {e}", node.label())))?;
        Ok(self.finish(anchor, tail, vec![x.tensor], opcode::FC, Body::Fc(body)))
    }

    fn add(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let a = self.act_in(node, node.inputs[0])?;
        let b = self.act_in(node, node.inputs[1])?;
        if a.shape != b.shape {
            return Err(no(
                reason::SHAPE,
                format!(
                    "{}: broadcasting {:?} + {:?}; the NPU adds equal shapes",
                    node.label(),
                    a.shape,
                    b.shape
                ),
            ));
        }
        let mut nodes = vec![a.dq, b.dq, anchor];
        let tail = self.tail(node, node.outputs[0], &mut nodes)?;
        let ma = a.scale as f64 / tail.scale as f64;
        let mb = b.scale as f64 / tail.scale as f64;
        // One shift for both, chosen so the larger multiplier has 30 bits.
        let top = ma.max(mb);
        let shift = (30 - top.log2().ceil() as i32).clamp(0, 62);
        let fix = |m: f64| (m * 2f64.powi(shift)).round();
        if fix(top) >= (1u64 << 31) as f64 {
            return Err(no(
                reason::OTHER,
                format!(
                    "{}: input/output scale ratio {top} is out of range",
                    node.label()
                ),
            ));
        }
        let body = Add {
            len: a.shape.iter().product::<usize>() as u32,
            a_zp: a.zp,
            b_zp: b.zp,
            a_mult: fix(ma) as i32,
            b_mult: fix(mb) as i32,
            shift: shift as u8,
            out_zp: tail.zp,
            tile_len: tiling::stream_tile(self.machine.sram_bytes as usize, 3),
        };
        Ok(self.finish(
            anchor,
            tail,
            vec![a.tensor, b.tensor],
            opcode::ADD,
            Body::Add(body),
        ))
    }

    fn pool(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        if node.outputs.len() > 1 {
            return Err(no(
                reason::OTHER,
                format!("{}: MaxPool Indices output", node.label()),
            ));
        }
        let x = self.act_in(node, node.inputs[0])?;
        if x.shape.len() != 4 {
            return Err(no(
                reason::SHAPE,
                format!("{}: only 2-D pooling (rank 4)", node.label()),
            ));
        }
        let (h, w) = (x.shape[2], x.shape[3]);
        let (kernel, strides, pads, out, include) = if node.op == OpKind::GlobalAveragePool {
            (vec![h, w], vec![1, 1], vec![0; 4], vec![1, 1], false)
        } else {
            let geo = PoolGeometry::new(node, &x.shape)
                .map_err(|e| no(reason::ATTRIBUTE, format!("{}: {e}", node.label())))?;
            let win = &geo.window;
            if win.dilations.iter().any(|&d| d != 1) {
                return Err(no(
                    reason::ATTRIBUTE,
                    format!("{}: dilated pooling", node.label()),
                ));
            }
            self.window_limits(node, &win.kernel, &win.strides, &win.dilations)?;
            let pads = vec![
                win.pad_begin[0],
                win.pad_begin[1],
                win.pad_end[0],
                win.pad_end[1],
            ];
            (
                win.kernel.clone(),
                win.strides.clone(),
                pads,
                geo.out_spatial.clone(),
                geo.count_include_pad,
            )
        };
        let mut nodes = vec![x.dq, anchor];
        let tail = self.tail(node, node.outputs[0], &mut nodes)?;
        let ratio = x.scale as f64 / tail.scale as f64;
        let max = node.op == OpKind::MaxPool;
        let window = kernel[0] * kernel[1];
        if !max && window > 4096 {
            return Err(no(
                reason::SHAPE,
                format!(
                    "{}: averaging window of {window} elements, above 4096",
                    node.label()
                ),
            ));
        }
        let requant = if max {
            vec![self.multiplier(node, ratio)?]
        } else {
            (1..=window)
                .map(|count| self.multiplier(node, ratio / count as f64))
                .collect::<Result<_, _>>()?
        };
        let mut body = Pool {
            n: x.shape[0] as u32,
            c: x.shape[1] as u32,
            h: h as u32,
            w: w as u32,
            oh: out[0] as u32,
            ow: out[1] as u32,
            kh: kernel[0] as u32,
            kw: kernel[1] as u32,
            sh: strides[0] as u32,
            sw: strides[1] as u32,
            pt: pads[0] as u32,
            pl: pads[1] as u32,
            pb: pads[2] as u32,
            pr: pads[3] as u32,
            count_include_pad: include as u8,
            in_zp: x.zp,
            out_zp: tail.zp,
            requant,
            tile_rows: 1,
        };
        tiling::plan_pool(&mut body, self.machine.sram_bytes as usize)
            .map_err(|e| no(reason::RESOURCE, format!("{}: {e}", node.label())))?;
        let op = if max {
            opcode::MAXPOOL
        } else {
            opcode::AVGPOOL
        };
        Ok(self.finish(anchor, tail, vec![x.tensor], op, Body::Pool(body)))
    }

    /// Relu, Clip, Reshape, Flatten: element order is unchanged, so one requantization.
    fn rescale(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let x = self.act_in(node, node.inputs[0])?;
        let mut nodes = vec![x.dq, anchor];
        let (op, tail) = match node.op {
            OpKind::Relu | OpKind::Clip => {
                // The activation itself is the group's op: run tail() from its input side.
                let (a, b) = self.clamp_bounds(node)?;
                let mut t = self.tail(node, node.outputs[0], &mut nodes)?;
                t.lo = t.lo.max(quantize_like_reference(a, t.scale, t.zp));
                t.hi =
                    t.hi.min(quantize_like_reference(b, t.scale, t.zp))
                        .max(t.lo);
                (opcode::CLAMP, t)
            }
            _ => (
                opcode::RESHAPE,
                self.tail(node, node.outputs[0], &mut nodes)?,
            ),
        };
        let body = Rescale {
            len: x.shape.iter().product::<usize>() as u32,
            in_zp: x.zp,
            out_zp: tail.zp,
            requant: self.multiplier(node, x.scale as f64 / tail.scale as f64)?,
            tile_len: tiling::stream_tile(self.machine.sram_bytes as usize, 2),
        };
        Ok(self.finish(anchor, tail, vec![x.tensor], op, Body::Rescale(body)))
    }

    fn concat(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let ins: Vec<ActIn> = node
            .inputs
            .iter()
            .map(|&t| self.act_in(node, t))
            .collect::<Result<_, _>>()?;
        let out_shape = self.shape(node.outputs[0])?;
        let axis = normalize_axis(node.attr_int("axis", 0), out_shape.len())
            .map_err(|e| no(reason::ATTRIBUTE, format!("{}: {e}", node.label())))?;
        let mut nodes: Vec<NodeId> = ins.iter().map(|a| a.dq).collect();
        nodes.push(anchor);
        let tail = self.tail(node, node.outputs[0], &mut nodes)?;
        let outer: usize = out_shape[..axis].iter().product();
        let parts = ins
            .iter()
            .map(|a| {
                Ok(ConcatPart {
                    inner: a.shape[axis..].iter().product::<usize>() as u32,
                    in_zp: a.zp,
                    requant: self.multiplier(node, a.scale as f64 / tail.scale as f64)?,
                })
            })
            .collect::<Result<Vec<_>, Decline>>()?;
        let row: usize = parts.iter().map(|p| p.inner as usize).sum();
        if 2 * row > self.machine.sram_bytes as usize {
            return Err(no(
                reason::RESOURCE,
                format!(
                    "{}: a concatenated row of {row} bytes does not fit the SRAM twice",
                    node.label()
                ),
            ));
        }
        let inputs = ins.iter().map(|a| a.tensor).collect();
        let body = Concat {
            outer: outer as u32,
            out_zp: tail.zp,
            parts,
        };
        Ok(self.finish(anchor, tail, inputs, opcode::CONCAT, Body::Concat(body)))
    }

    fn softmax(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let x = self.act_in(node, node.inputs[0])?;
        let axis = normalize_axis(node.attr_int("axis", -1), x.shape.len())
            .map_err(|e| no(reason::ATTRIBUTE, format!("{}: {e}", node.label())))?;
        let mut nodes = vec![x.dq, anchor];
        let tail = self.tail(node, node.outputs[0], &mut nodes)?;
        let axis_len = x.shape[axis];
        if 2 * axis_len + 256 * 4 > self.machine.sram_bytes as usize {
            return Err(no(
                reason::RESOURCE,
                format!(
                    "{}: a softmax row of {axis_len} and its table do not fit the SRAM",
                    node.label()
                ),
            ));
        }
        let lut = (0..256)
            .map(|d| ((-(x.scale as f64) * d as f64).exp() * (1u64 << 30) as f64).round() as i32)
            .collect();
        let k = ((1u64 << 32) as f64 / tail.scale as f64).round();
        if !(k >= 1.0 && k < 2f64.powi(62)) {
            return Err(no(
                reason::OTHER,
                format!("{}: output scale {} out of range", node.label(), tail.scale),
            ));
        }
        let body = Softmax {
            outer: x.shape[..axis].iter().product::<usize>() as u32,
            axis_len: axis_len as u32,
            inner: x.shape[axis + 1..].iter().product::<usize>() as u32,
            out_zp: tail.zp,
            lut,
            k: k as u64,
        };
        Ok(self.finish(
            anchor,
            tail,
            vec![x.tensor],
            opcode::SOFTMAX,
            Body::Softmax(body),
        ))
    }

    fn finish(
        &self,
        anchor: NodeId,
        tail: Tail,
        inputs: Vec<TensorId>,
        op: u16,
        body: Body,
    ) -> Group {
        let mut nodes = tail.nodes;
        nodes.sort_unstable();
        nodes.dedup();
        Group {
            anchor,
            nodes,
            inputs,
            output: tail.output,
            op,
            body,
            lo: tail.lo,
            hi: tail.hi,
        }
    }

    fn window_limits(
        &self,
        node: &Node,
        kernel: &[usize],
        strides: &[usize],
        dil: &[usize],
    ) -> Result<(), Decline> {
        if kernel.iter().any(|&k| k > MAX_KERNEL) {
            return Err(no(
                reason::SHAPE,
                format!("{}: kernel {kernel:?} above {MAX_KERNEL}", node.label()),
            ));
        }
        if strides.iter().any(|&s| s > MAX_STRIDE) {
            return Err(no(
                reason::ATTRIBUTE,
                format!("{}: strides {strides:?} above {MAX_STRIDE}", node.label()),
            ));
        }
        if dil.iter().any(|&d| d > MAX_DILATION) {
            return Err(no(
                reason::ATTRIBUTE,
                format!("{}: dilations {dil:?} above {MAX_DILATION}", node.label()),
            ));
        }
        Ok(())
    }

    /// One scale per output channel, from per-tensor or per-axis parameters along `axis`.
    fn per_channel(
        &self,
        node: &Node,
        q: &QParams,
        m: usize,
        axis: usize,
    ) -> Result<Vec<f32>, Decline> {
        match q.scales.len() {
            1 => Ok(vec![q.scales[0]; m]),
            n if n == m && q.axis == axis => Ok(q.scales.clone()),
            n => Err(no(
                reason::OTHER,
                format!(
                    "{}: {n} scales along axis {}, expected 1 or {m} along axis {axis}",
                    node.label(),
                    q.axis
                ),
            )),
        }
    }

    fn multiplier(&self, node: &Node, real: f64) -> Result<Requant, Decline> {
        Requant::from_real(real).ok_or_else(|| {
            no(
                reason::OTHER,
                format!(
                    "{}: requantization multiplier {real} out of range",
                    node.label()
                ),
            )
        })
    }

    /// Biases in accumulator units and per-channel multipliers.
    fn requant_params(
        &self,
        node: &Node,
        x_scale: f32,
        w_scales: &[f32],
        bias: Option<(Vec<i32>, Vec<f32>)>,
        y_scale: f32,
        m: usize,
    ) -> Result<(Vec<i32>, Vec<Requant>), Decline> {
        let mut acc_bias = vec![0i32; m];
        if let Some((bv, bs)) = bias {
            if bv.len() != m {
                return Err(no(
                    reason::SHAPE,
                    format!("{}: {} biases for {m} outputs", node.label(), bv.len()),
                ));
            }
            for j in 0..m {
                // Exact when the bias scale is x_scale * w_scale, as QDQ exporters make it.
                let acc_scale = x_scale as f64 * w_scales[j] as f64;
                let v = (bv[j] as f64 * bs[j] as f64 / acc_scale).round();
                if v.abs() >= 2f64.powi(31) {
                    return Err(no(
                        reason::OTHER,
                        format!(
                            "{}: bias {j} overflows the 32-bit accumulator",
                            node.label()
                        ),
                    ));
                }
                acc_bias[j] = v as i32;
            }
        }
        let requant = w_scales
            .iter()
            .map(|&ws| self.multiplier(node, x_scale as f64 * ws as f64 / y_scale as f64))
            .collect::<Result<_, _>>()?;
        Ok((acc_bias, requant))
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
                reason::OTHER,
                format!("{}: not part of a quantized group the NPU runs", node.label()),
            ),
            op if self.is_anchor(node) || matches!(op, OpKind::Relu | OpKind::Clip | OpKind::Add) => {
                Support::no(reason::DTYPE, format!("{}: float op outside a QDQ group; the NPU runs only statically quantized int8", node.label()))
            }
            _ => Support::no(reason::OP, format!("{}: {} is not an NPU operation", node.label(), node.op)),
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

/// Hardware accumulators are 32-bit: refuse a reduction long enough to overflow them
/// (worst case |x - zp| ≤ 255 times |w| ≤ 128 per term).
fn check_accumulator(node: &Node, k_len: usize) -> Result<(), Decline> {
    if (k_len as u64) * 255 * 128 >= 1 << 31 {
        return Err(no(
            reason::RESOURCE,
            format!(
                "{}: a reduction of {k_len} terms could overflow the 32-bit accumulator",
                node.label()
            ),
        ));
    }
    Ok(())
}
