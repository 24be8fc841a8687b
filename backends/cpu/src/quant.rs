//! Quantization in the CPU delegate: the parameters of QuantizeLinear/DequantizeLinear
//! nodes, and the QDQ groups that run as integer kernels.
//!
//! **Standalone** QuantizeLinear and DequantizeLinear nodes are claimed as element-wise
//! ops with exactly the reference's arithmetic (dequantize `(q - zp) * scale` in f32;
//! quantize: divide in f32, round half to even, add the zero point, saturate). So a QDQ
//! model whose groups are incomplete still runs here, in f32 between Q and DQ, matching
//! the reference exactly.
//!
//! **Groups.** `DequantizeLinear(x) → Conv | MatMul | Gemm → [Relu | Clip] →
//! QuantizeLinear`, with a constant i8 weight dequantized with zero point 0 (per tensor or
//! per output channel) and, for Conv and Gemm, an optional constant i32 bias dequantized
//! with scale `x_scale * w_scale` and zero point 0, is lowered to one integer op: i8 GEMM,
//! integer requantization, the activation as a clamp. Intermediate tensors of a group must
//! have no other reader and must not be subgraph outputs (the DequantizeLinear of `x` and
//! of the weights may have other readers: they then also run on their own).
//!
//! Int8 and u8 tensors are stored as bytes in the executable's arena (an `i8` one biased
//! by 128, see `crate::qgemm`), channels-last between int8 convolutions: QuantizeLinear and
//! DequantizeLinear convert only at the int8 region's edges.
//!
//! Two more forms run as integer ops: `DequantizeLinear(a), DequantizeLinear(b) → Add |
//! Mul → [Relu | Clip] → QuantizeLinear` of two same-shape tensors ([`QBinGroup`]), and a
//! MatMul/Gemm group followed by `DequantizeLinear → Add(constant bias) → QuantizeLinear`
//! (the form ONNX Runtime's quantizer writes for a linear layer), folded into the group's
//! epilogue ([`PostAdd`]). A `DequantizeLinear → float ops of that one tensor →
//! QuantizeLinear` chain runs as a table of 256 bytes ([`QLutGroup`]), possibly after a
//! MaxPool or a nearest Resize that runs over the bytes, and `DequantizeLinear`s →
//! Concat → QuantizeLinear as a join of bytes ([`QCatGroup`]).

use baton_delegate_api::ir::{DType, Graph, Node, NodeId, OpKind, TensorId};
use baton_delegate_api::Constants;

use crate::support::clip_bounds;

/// The parameters of one QuantizeLinear or DequantizeLinear node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QParams {
    /// One scale, or one per index along `axis`.
    pub scales: Vec<f32>,
    /// As many zero points as scales.
    pub zero_points: Vec<i32>,
    /// The axis the parameters run along (meaningful when there are several).
    pub axis: usize,
    /// The integer dtype (of the input of DQ, of the output of Q).
    pub dtype: DType,
}

impl QParams {
    /// Reads the parameters of a Q or DQ `node`; `Err` says why they are not usable here.
    pub fn of(graph: &Graph, node: &Node, consts: &Constants<'_>) -> Result<QParams, String> {
        if node.attr_int("block_size", 0) != 0 {
            return Err("blocked quantization (block_size > 0) is not implemented".into());
        }
        let x = &graph.tensors[node.inputs[0]];
        let rank = x.shape.len();
        let int_t = match node.op {
            OpKind::DequantizeLinear => node.inputs[0],
            _ => node.outputs[0],
        };
        let dtype = graph.tensors[int_t].dtype;
        let scale_t = node.inputs[1];
        let bytes = consts
            .bytes(scale_t)
            .filter(|_| graph.tensors[scale_t].is_const())
            .ok_or_else(|| format!("scale '{}' is not a constant", graph.tensors[scale_t].name))?;
        // An f16 node's scale is f16 (widened exactly); other scales are f32.
        let scales: Vec<f32> = match graph.tensors[scale_t].dtype {
            DType::F32 => bytemuck::pod_collect_to_vec(bytes),
            DType::F16 => (0..bytes.len() / 2)
                .map(|i| baton_delegate_api::dtype::element_f64(DType::F16, bytes, i) as f32)
                .collect(),
            other => return Err(format!("a scale of {other} is not supported")),
        };
        let scale_rank = graph.tensors[scale_t].shape.len();
        if scale_rank > 1 {
            return Err("a scale of rank > 1 (blocked) is not implemented".into());
        }
        if scales.is_empty() || scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err("scales must be finite and positive".into());
        }
        // One scale is per tensor whatever its rank and `axis` say (ONNX Runtime writes
        // `[1]` scales with axis 1 on 1-D biases).
        let axis = if scale_rank == 1 && scales.len() > 1 {
            let a = node.attr_int("axis", 1);
            let a = if a < 0 { a + rank as i64 } else { a };
            if a < 0 || a as usize >= rank {
                return Err(format!("axis {a} is out of range for rank {rank}"));
            }
            let extent = x.static_shape().map(|s| s[a as usize]);
            if extent != Some(scales.len()) {
                return Err(format!(
                    "{} scales along axis {a} of a tensor of extent {extent:?}",
                    scales.len()
                ));
            }
            a as usize
        } else {
            0
        };
        let zero_points = match node.inputs.get(2) {
            None => vec![0; scales.len()],
            Some(&z) => {
                let zd = &graph.tensors[z];
                if zd.dtype != dtype {
                    return Err(format!(
                        "zero point '{}' is {}, not {dtype}",
                        zd.name, zd.dtype
                    ));
                }
                let b = consts
                    .bytes(z)
                    .filter(|_| zd.is_const())
                    .ok_or_else(|| format!("zero point '{}' is not a constant", zd.name))?;
                let zps = ints(dtype, b).ok_or("unreadable zero point")?;
                if zps.len() != scales.len() {
                    return Err("zero points and scales differ in count".into());
                }
                zps
            }
        };
        Ok(QParams {
            scales,
            zero_points,
            axis,
            dtype,
        })
    }

    /// One scale and zero point for the whole tensor.
    pub fn per_tensor(&self) -> Option<(f32, i32)> {
        (self.scales.len() == 1).then(|| (self.scales[0], self.zero_points[0]))
    }
}

/// The stored range of an integer dtype handled here.
pub(crate) fn int_range(dtype: DType) -> (i32, i32) {
    match dtype {
        DType::U8 => (0, 255),
        DType::I8 => (-128, 127),
        _ => (i32::MIN, i32::MAX),
    }
}

/// Little-endian integers of `dtype` (i8, u8, i32) as i32.
pub(crate) fn ints(dtype: DType, bytes: &[u8]) -> Option<Vec<i32>> {
    Some(match dtype {
        DType::I8 => bytes.iter().map(|&b| b as i8 as i32).collect(),
        DType::U8 => bytes.iter().map(|&b| b as i32).collect(),
        DType::I32 => bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        _ => return None,
    })
}

/// One QDQ group that runs as an integer op.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QGroup {
    pub anchor: NodeId,
    /// The DequantizeLinear of the activation, and whether the group absorbs it (it has
    /// no other reader).
    pub x_dq: (NodeId, bool),
    pub w_dq: (NodeId, bool),
    pub bias_dq: Option<(NodeId, bool)>,
    pub activation: Option<NodeId>,
    pub q: NodeId,
    /// The integer activation tensor (the input of `x_dq`).
    pub x: TensorId,
    pub x_params: (f32, i32, DType),
    /// Weight values `[..]` as stored (i8), and per-output-channel scales.
    pub w: TensorId,
    pub w_scales: Vec<f32>,
    /// The weight axis of the output channels.
    pub w_axis: usize,
    pub bias: Option<Vec<i32>>,
    pub y_params: (f32, i32, DType),
    /// The fused activation's bounds in real values.
    pub clamp: Option<(f32, f32)>,
    /// A following QDQ bias Add folded in; `q` and `y_params` are then its
    /// QuantizeLinear's, and `y_params` of the first stage are in `post.y1`.
    pub post: Option<PostAdd>,
}

/// `QuantizeLinear(y1) → DequantizeLinear → Add(DequantizeLinear(constant bias)) →
/// QuantizeLinear` after a linear group.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PostAdd {
    /// The first QuantizeLinear, the DequantizeLinear and the Add.
    pub nodes: [NodeId; 3],
    pub bias_dq: (NodeId, bool),
    /// The DequantizeLinear's scale, zero point and dtype.
    pub dq: (f32, i32, DType),
    /// The first stage's output parameters (its QuantizeLinear's).
    pub y1: (f32, i32, DType),
    /// The bias per column, dequantized as the reference does.
    pub bias: Vec<f32>,
}

/// `DequantizeLinear → element-wise f32 ops of that one run-time operand → QuantizeLinear`
/// (a QDQ activation such as Sigmoid, the `x / √2 → Erf` and `+ 1` of a quantized GELU,
/// a requantization): the output byte is a function of the input byte alone, so the chain
/// runs as a table of 256 bytes, computed at init by the ops themselves.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QLutGroup {
    pub dq: (NodeId, bool),
    /// An op of the dequantized tensor before the chain that runs over the bytes (ONNX
    /// Runtime's quantizer puts a Q -> DQ pair around each): a 2-D MaxPool (the
    /// dequantization is monotonic, so the max of dequantized bytes is the dequantized
    /// max of the bytes; a YOLO SPPF's pools) or a nearest Resize (a gather; a neck's
    /// upsampling).
    pub pre: Option<NodeId>,
    /// The float ops, first to last (possibly none).
    pub chain: Vec<NodeId>,
    pub q: NodeId,
    /// The 8-bit input and its parameters; the output's.
    pub x: TensorId,
    pub x_params: (f32, i32, DType),
    pub y_params: (f32, i32, DType),
}

impl QLutGroup {
    /// Every node the group covers, and whether it is absorbed.
    pub fn nodes(&self) -> Vec<(NodeId, bool)> {
        let mut v = vec![self.dq, (self.q, true)];
        v.extend(self.pre.iter().chain(&self.chain).map(|&n| (n, true)));
        v
    }
}

/// `DequantizeLinear`s of 8-bit tensors `-> Concat -> QuantizeLinear` (ONNX Runtime's
/// quantizer wraps every Concat so: YOLO's SPPF and C2f joins, necks, DenseNets): each
/// output byte is its input byte through a table of that input's DequantizeLinear and
/// the QuantizeLinear (none where they share parameters), so the join runs over the
/// stored bytes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QCatGroup {
    pub op: NodeId,
    /// Each input's DequantizeLinear, and whether it is absorbed.
    pub dqs: Vec<(NodeId, bool)>,
    pub q: NodeId,
    /// The 8-bit inputs and their parameters; the output's.
    pub xs: Vec<TensorId>,
    pub x_params: Vec<(f32, i32, DType)>,
    pub y_params: (f32, i32, DType),
}

impl QCatGroup {
    /// Every node the group covers, and whether it is absorbed.
    pub fn nodes(&self) -> Vec<(NodeId, bool)> {
        let mut v = vec![(self.op, true), (self.q, true)];
        v.extend(&self.dqs);
        v
    }
}

/// Finds every [`QCatGroup`]: a Concat of f32 tensors of static shape, each the result of
/// a per-tensor DequantizeLinear of a run-time 8-bit tensor, whose result only a
/// per-tensor 8-bit QuantizeLinear reads.
pub(crate) fn find_concat_groups(graph: &Graph, consts: &Constants<'_>) -> Vec<QCatGroup> {
    let producers = graph.producers();
    let consumers = graph.consumers();
    let mut out = Vec::new();
    for (op, node) in graph.nodes.iter().enumerate() {
        if node.op != OpKind::Concat || node.inputs.is_empty() {
            continue;
        }
        let group = (|| -> Option<QCatGroup> {
            let cat = node.outputs[0];
            let &[q] = &consumers[cat][..] else {
                return None;
            };
            let qn = &graph.nodes[q];
            if qn.op != OpKind::QuantizeLinear || graph.outputs.contains(&cat) {
                return None;
            }
            let y_params = per_tensor_8bit(graph, qn, consts)?;
            graph.tensors[cat].static_shape()?;
            let (mut dqs, mut xs, mut x_params) = (Vec::new(), Vec::new(), Vec::new());
            for &t in &node.inputs {
                let p = producers[t]?;
                let pn = &graph.nodes[p];
                let x = *pn.inputs.first()?;
                if pn.op != OpKind::DequantizeLinear
                    || graph.tensors[x].is_const()
                    || graph.tensors[t].dtype != DType::F32
                {
                    return None;
                }
                x_params.push(per_tensor_8bit(graph, pn, consts)?);
                let absorbed = consumers[t].len() == 1 && !graph.outputs.contains(&t);
                dqs.push((p, absorbed));
                xs.push(x);
            }
            Some(QCatGroup {
                op,
                dqs,
                q,
                xs,
                x_params,
                y_params,
            })
        })();
        out.extend(group);
    }
    out
}

/// The widest input row (in pixels) a byte MaxPool takes: it keeps a row of maxima of
/// that many bytes on the stack (`ops::quant::QMaxPoolOp`).
pub(crate) const POOL_ROW: usize = 16384;

/// The most float ops one table absorbs (the search stops there).
const LUT_CHAIN: usize = 16;

/// Finds every [`QLutGroup`]: walking up from each QuantizeLinear through float ops of
/// one run-time operand (one-input ops, and Add/Sub/Mul/Div with a one-element constant)
/// to a DequantizeLinear of a run-time 8-bit tensor, all of one shape, each intermediate
/// read by the next op alone; or to a 2-D MaxPool or a nearest Resize of such a
/// DequantizeLinear's result.
pub(crate) fn find_lut_groups(graph: &Graph, consts: &Constants<'_>) -> Vec<QLutGroup> {
    let producers = graph.producers();
    let consumers = graph.consumers();
    let mut out = Vec::new();
    for (q, qn) in graph.nodes.iter().enumerate() {
        if qn.op != OpKind::QuantizeLinear {
            continue;
        }
        let group = (|| -> Option<QLutGroup> {
            let y_params = per_tensor_8bit(graph, qn, consts)?;
            let mut t = qn.inputs[0];
            let shape = graph.tensors[t].static_shape()?;
            let mut chain = Vec::new();
            let mut pre = None;
            loop {
                let p = producers[t]?;
                let pn = &graph.nodes[p];
                if pn.op == OpKind::DequantizeLinear {
                    if graph.tensors[pn.inputs[0]].is_const() {
                        return None;
                    }
                    let x_params = per_tensor_8bit(graph, pn, consts)?;
                    let absorbed = consumers[t].len() == 1 && !graph.outputs.contains(&t);
                    chain.reverse();
                    return Some(QLutGroup {
                        dq: (p, absorbed),
                        pre,
                        chain,
                        q,
                        x: pn.inputs[0],
                        x_params,
                        y_params,
                    });
                }
                let sole = consumers[t].len() == 1 && !graph.outputs.contains(&t);
                if !sole || chain.len() == LUT_CHAIN || graph.tensors[t].dtype != DType::F32 {
                    return None;
                }
                // Only the DequantizeLinear comes before a pool or a gather.
                if pre.is_some() {
                    return None;
                }
                if byte_pool(graph, pn, &shape) || byte_gather(graph, pn, &shape) {
                    pre = Some(p);
                    t = pn.inputs[0];
                    continue;
                }
                t = lut_operand(graph, consts, pn, &shape)?;
                chain.push(p);
            }
        })();
        out.extend(group);
    }
    out
}

/// Whether `node` is a MaxPool a [`QLutGroup`] runs over bytes: 2-D, f32, no indices
/// output, its result of `shape`, its input rows at most [`POOL_ROW`] pixels wide, no
/// extent 0.
fn byte_pool(graph: &Graph, node: &Node, shape: &[usize]) -> bool {
    let Some(x) = graph.tensors[node.inputs[0]].static_shape() else {
        return false;
    };
    node.op == OpKind::MaxPool
        && node.outputs.len() == 1
        && graph.tensors[node.outputs[0]].static_shape().as_deref() == Some(shape)
        && graph.tensors[node.inputs[0]].dtype == DType::F32
        && x.len() == 4
        && x[3] <= POOL_ROW
        && x.iter().chain(shape).all(|&d| d > 0)
        && baton_delegate_api::shape::PoolGeometry::new(node, &x).is_ok()
}

/// Whether `node` is a Resize a [`QLutGroup`] runs over bytes: nearest, of a rank-4 f32
/// tensor of static shape into `shape`, no extent 0.
fn byte_gather(graph: &Graph, node: &Node, shape: &[usize]) -> bool {
    let x = graph.tensors[node.inputs[0]].static_shape();
    node.op == OpKind::Resize
        && node.attr_str("mode", "nearest") == "nearest"
        && node.outputs.len() == 1
        && graph.tensors[node.outputs[0]].static_shape().as_deref() == Some(shape)
        && graph.tensors[node.inputs[0]].dtype == DType::F32
        && x.is_some_and(|x| x.len() == 4 && x.iter().chain(shape).all(|&d| d > 0))
}

/// The run-time operand of a float op a table can absorb (see [`find_lut_groups`]), whose
/// input and output have `shape`.
fn lut_operand(
    graph: &Graph,
    consts: &Constants<'_>,
    node: &Node,
    shape: &[usize],
) -> Option<TensorId> {
    let f32_of = |t: TensorId| {
        let d = &graph.tensors[t];
        d.dtype == DType::F32 && d.static_shape().as_deref() == Some(shape)
    };
    if !f32_of(node.outputs[0]) {
        return None;
    }
    let x = match node.op {
        OpKind::Clip => {
            clip_bounds(graph, node, consts).ok()?;
            node.inputs[0]
        }
        op if crate::ops::elementwise::is_unary_op(op) => node.inputs[0],
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div if node.inputs.len() == 2 => {
            let scalar = |t: TensorId| scalar_operand(graph, consts, t).is_some();
            match (scalar(node.inputs[0]), scalar(node.inputs[1])) {
                (false, true) => node.inputs[0],
                (true, false) => node.inputs[1],
                _ => return None,
            }
        }
        _ => return None,
    };
    f32_of(x).then_some(x)
}

/// The value of a one-element float constant: an f32 initializer, or a DequantizeLinear
/// of an integer initializer (its value as the reference computes it: the difference
/// exact, the product in f64, rounded once, as `fold_dequantize` does).
pub(crate) fn scalar_operand(graph: &Graph, consts: &Constants<'_>, t: TensorId) -> Option<f32> {
    let d = &graph.tensors[t];
    if d.static_shape()?.iter().product::<usize>() != 1 || d.dtype != DType::F32 {
        return None;
    }
    if d.is_const() {
        let b: [u8; 4] = consts.bytes(t)?.try_into().ok()?;
        return Some(f32::from_le_bytes(b));
    }
    let node = &graph.nodes[graph.producers()[t]?];
    let q = node.inputs[0];
    if node.op != OpKind::DequantizeLinear || !graph.tensors[q].is_const() {
        return None;
    }
    let p = QParams::of(graph, node, consts).ok()?;
    let v = *ints(p.dtype, consts.bytes(q)?)?.first()?;
    Some(((v as f64 - p.zero_points[0] as f64) * p.scales[0] as f64) as f32)
}

/// One QDQ element-wise Add or Mul of two run-time int8 tensors of one shape.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QBinGroup {
    pub op: NodeId,
    pub a_dq: (NodeId, bool),
    pub b_dq: (NodeId, bool),
    pub activation: Option<NodeId>,
    pub q: NodeId,
    /// The integer operands and their parameters.
    pub a: TensorId,
    pub b: TensorId,
    pub a_params: (f32, i32, DType),
    pub b_params: (f32, i32, DType),
    pub y_params: (f32, i32, DType),
    pub clamp: Option<(f32, f32)>,
}

impl QBinGroup {
    /// Every node the group covers, and whether it is absorbed.
    pub fn nodes(&self) -> Vec<(NodeId, bool)> {
        let mut v = vec![(self.op, true), self.a_dq, self.b_dq, (self.q, true)];
        v.extend(self.activation.map(|a| (a, true)));
        v
    }
}

impl QGroup {
    /// Every node the group covers, and whether it is absorbed (`false`: the node also
    /// runs on its own, for its other readers).
    pub fn nodes(&self) -> Vec<(NodeId, bool)> {
        let mut v = vec![(self.anchor, true), self.x_dq, self.w_dq, (self.q, true)];
        v.extend(self.bias_dq);
        v.extend(self.activation.map(|a| (a, true)));
        if let Some(p) = &self.post {
            v.extend(p.nodes.iter().map(|&n| (n, true)));
            v.push(p.bias_dq);
        }
        v
    }
}

/// Finds every QDQ group of `graph` (each Q node is the end of at most one).
pub(crate) fn find_groups(graph: &Graph, consts: &Constants<'_>) -> Vec<QGroup> {
    let producers = graph.producers();
    let consumers = graph.consumers();
    let is_output = |t: TensorId| graph.outputs.contains(&t);
    // The node producing `t`, when `t` is read by exactly one node and is not an output.
    let sole = |t: TensorId| -> Option<NodeId> {
        let p = producers[t]?;
        (consumers[t].len() == 1 && !is_output(t)).then_some(p)
    };
    let dq_of = |t: TensorId| -> Option<(NodeId, bool)> {
        let p = producers[t]?;
        (graph.nodes[p].op == OpKind::DequantizeLinear)
            .then(|| (p, consumers[t].len() == 1 && !is_output(t)))
    };
    let mut groups = Vec::new();
    for (q, qn) in graph.nodes.iter().enumerate() {
        if qn.op != OpKind::QuantizeLinear {
            continue;
        }
        let group = (|| -> Option<QGroup> {
            if !f32_side(graph, qn) {
                return None;
            }
            let yp = QParams::of(graph, qn, consts).ok()?;
            let (ys, yz) = yp.per_tensor()?;
            if !matches!(yp.dtype, DType::I8 | DType::U8) {
                return None;
            }
            let mut cur = sole(qn.inputs[0])?;
            let mut activation = None;
            let mut clamp = None;
            match graph.nodes[cur].op {
                OpKind::Relu => {
                    activation = Some(cur);
                    clamp = Some((0.0, f32::INFINITY));
                }
                OpKind::Clip => {
                    activation = Some(cur);
                    clamp = Some(clip_bounds(graph, &graph.nodes[cur], consts).ok()?);
                }
                _ => {}
            }
            if activation.is_some() {
                cur = sole(graph.nodes[cur].inputs[0])?;
            }
            let anchor = &graph.nodes[cur];
            let w_axis = match anchor.op {
                OpKind::Conv => 0,
                OpKind::MatMul => 1,
                OpKind::Gemm => {
                    let plain = anchor.attr_int("transA", 0) == 0
                        && anchor.attr_float("alpha", 1.0) == 1.0
                        && anchor.attr_float("beta", 1.0) == 1.0;
                    if !plain {
                        return None;
                    }
                    if anchor.attr_int("transB", 0) != 0 {
                        0
                    } else {
                        1
                    }
                }
                _ => return None,
            };
            let x_dq = dq_of(anchor.inputs[0])?;
            if !f32_side(graph, &graph.nodes[x_dq.0]) {
                return None;
            }
            let xp = QParams::of(graph, &graph.nodes[x_dq.0], consts).ok()?;
            let (xs, xz) = xp.per_tensor()?;
            if !matches!(xp.dtype, DType::I8 | DType::U8) {
                return None;
            }
            let w_dq = dq_of(anchor.inputs[1])?;
            let wn = &graph.nodes[w_dq.0];
            let w = wn.inputs[0];
            let wd = &graph.tensors[w];
            if wd.dtype != DType::I8 || !wd.is_const() || consts.bytes(w).is_none() {
                return None;
            }
            let w_shape = wd.static_shape()?;
            if anchor.op != OpKind::Conv && w_shape.len() != 2 {
                return None;
            }
            let wp = QParams::of(graph, wn, consts).ok()?;
            if wp.zero_points.iter().any(|&z| z != 0) {
                return None;
            }
            let channels = w_shape[w_axis];
            let w_scales = match wp.scales.len() {
                1 => vec![wp.scales[0]; channels],
                n if n == channels && wp.axis == w_axis => wp.scales.clone(),
                _ => return None,
            };
            let mut bias_dq = None;
            let mut bias = None;
            if let Some(&b) = anchor.inputs.get(2) {
                let d = dq_of(b)?;
                let bn = &graph.nodes[d.0];
                let bt = bn.inputs[0];
                let bd = &graph.tensors[bt];
                if bd.dtype != DType::I32 || !bd.is_const() || bd.shape.len() != 1 {
                    return None;
                }
                let bp = QParams::of(graph, bn, consts).ok()?;
                let values = ints(DType::I32, consts.bytes(bt)?)?;
                if values.len() != channels || bp.zero_points.iter().any(|&z| z != 0) {
                    return None;
                }
                // The bias must be in the accumulator's scale, x_scale * w_scale[c].
                for (c, &ws) in w_scales.iter().enumerate() {
                    let s = bp.scales[if bp.scales.len() == 1 { 0 } else { c }];
                    let want = xs * ws;
                    if (s - want).abs() > want * 1e-6 {
                        return None;
                    }
                }
                bias_dq = Some(d);
                bias = Some(values);
            }
            Some(QGroup {
                anchor: cur,
                x_dq,
                w_dq,
                bias_dq,
                activation,
                q,
                x: graph.nodes[x_dq.0].inputs[0],
                x_params: (xs, xz, xp.dtype),
                w,
                w_scales,
                w_axis,
                bias,
                y_params: (ys, yz, yp.dtype),
                clamp,
                post: None,
            })
        })();
        groups.extend(group.map(|mut g| {
            if matches!(graph.nodes[g.anchor].op, OpKind::MatMul | OpKind::Gemm) {
                if let Some((post, q2, y2)) = post_add(graph, consts, &g) {
                    g.post = Some(PostAdd {
                        y1: g.y_params,
                        ..post
                    });
                    g.q = q2;
                    g.y_params = y2;
                }
            }
            g
        }));
    }
    groups
}

/// Per-tensor parameters of an 8-bit tensor: scale, zero point, dtype.
type Params8 = (f32, i32, DType);

/// Whether the float side of a Q or DQ node (Q's input, DQ's output) is f32: the integer
/// groups stand for f32 graphs (an f16 Q or DQ runs on its own, its f16 widened).
fn f32_side(graph: &Graph, node: &Node) -> bool {
    let t = match node.op {
        OpKind::QuantizeLinear => node.inputs[0],
        _ => node.outputs[0],
    };
    graph.tensors[t].dtype == DType::F32
}

/// The per-tensor 8-bit parameters of a Q or DQ node.
fn per_tensor_8bit(
    graph: &Graph,
    node: &Node,
    consts: &Constants<'_>,
) -> Option<(f32, i32, DType)> {
    if !f32_side(graph, node) {
        return None;
    }
    let p = QParams::of(graph, node, consts).ok()?;
    let (s, z) = p.per_tensor()?;
    matches!(p.dtype, DType::I8 | DType::U8).then_some((s, z, p.dtype))
}

/// The QDQ bias Add after group `g`: the extension, its final QuantizeLinear and that
/// node's parameters.
fn post_add(
    graph: &Graph,
    consts: &Constants<'_>,
    g: &QGroup,
) -> Option<(PostAdd, NodeId, (f32, i32, DType))> {
    let consumers = graph.consumers();
    let sole_reader = |t: TensorId| -> Option<NodeId> {
        (consumers[t].len() == 1 && !graph.outputs.contains(&t)).then(|| consumers[t][0])
    };
    let y1 = graph.nodes[g.q].outputs[0];
    let dq = sole_reader(y1)?;
    let dqn = &graph.nodes[dq];
    if dqn.op != OpKind::DequantizeLinear {
        return None;
    }
    let dq_params = per_tensor_8bit(graph, dqn, consts)?;
    let add = sole_reader(dqn.outputs[0])?;
    let addn = &graph.nodes[add];
    if addn.op != OpKind::Add || addn.inputs.len() != 2 {
        return None;
    }
    let other = *addn.inputs.iter().find(|&&t| t != dqn.outputs[0])?;
    let out_shape = graph.tensors[addn.outputs[0]].static_shape()?;
    if graph.tensors[dqn.outputs[0]].static_shape()? != out_shape {
        return None;
    }
    let n = *out_shape.last()?;
    let bias_node = graph.producers()[other]?;
    let bn = &graph.nodes[bias_node];
    let bt = bn.inputs[0];
    let bd = &graph.tensors[bt];
    if bn.op != OpKind::DequantizeLinear || !bd.is_const() || bd.static_shape()? != [n] {
        return None;
    }
    let bp = QParams::of(graph, bn, consts).ok()?;
    let values = ints(bd.dtype, consts.bytes(bt)?)?;
    let bias = values
        .iter()
        .enumerate()
        .map(|(c, &v)| {
            let i = if bp.scales.len() == 1 { 0 } else { c };
            ((v as f64 - bp.zero_points[i] as f64) * bp.scales[i] as f64) as f32
        })
        .collect();
    let q2 = sole_reader(addn.outputs[0])?;
    let q2n = &graph.nodes[q2];
    if q2n.op != OpKind::QuantizeLinear {
        return None;
    }
    let y2 = per_tensor_8bit(graph, q2n, consts)?;
    let bias_readers = consumers[other].len() == 1 && !graph.outputs.contains(&other);
    Some((
        PostAdd {
            nodes: [g.q, dq, add],
            bias_dq: (bias_node, bias_readers),
            dq: dq_params,
            y1: g.y_params,
            bias,
        },
        q2,
        y2,
    ))
}

/// Finds every QDQ Add/Mul of two run-time 8-bit tensors of the output's shape.
pub(crate) fn find_bin_groups(graph: &Graph, consts: &Constants<'_>) -> Vec<QBinGroup> {
    let producers = graph.producers();
    let consumers = graph.consumers();
    let sole = |t: TensorId| -> Option<NodeId> {
        let p = producers[t]?;
        (consumers[t].len() == 1 && !graph.outputs.contains(&t)).then_some(p)
    };
    let mut out = Vec::new();
    for (q, qn) in graph.nodes.iter().enumerate() {
        if qn.op != OpKind::QuantizeLinear {
            continue;
        }
        let group = (|| -> Option<QBinGroup> {
            let y_params = per_tensor_8bit(graph, qn, consts)?;
            let mut cur = sole(qn.inputs[0])?;
            let (mut activation, mut clamp) = (None, None);
            match graph.nodes[cur].op {
                OpKind::Relu => {
                    activation = Some(cur);
                    clamp = Some((0.0, f32::INFINITY));
                }
                OpKind::Clip => {
                    activation = Some(cur);
                    clamp = Some(clip_bounds(graph, &graph.nodes[cur], consts).ok()?);
                }
                _ => {}
            }
            if activation.is_some() {
                cur = sole(graph.nodes[cur].inputs[0])?;
            }
            let op = &graph.nodes[cur];
            if !matches!(op.op, OpKind::Add | OpKind::Mul) || op.inputs.len() != 2 {
                return None;
            }
            let shape = graph.tensors[op.outputs[0]].static_shape()?;
            let operand = |t: TensorId| -> Option<((NodeId, bool), TensorId, Params8)> {
                let d = producers[t]?;
                let dn = &graph.nodes[d];
                if dn.op != OpKind::DequantizeLinear
                    || graph.tensors[t].static_shape()? != shape
                    || graph.tensors[dn.inputs[0]].is_const()
                {
                    return None;
                }
                let absorbed = consumers[t].len() == 1 && !graph.outputs.contains(&t);
                Some((
                    (d, absorbed),
                    dn.inputs[0],
                    per_tensor_8bit(graph, dn, consts)?,
                ))
            };
            let (a_dq, a, a_params) = operand(op.inputs[0])?;
            let (b_dq, b, b_params) = operand(op.inputs[1])?;
            if a_dq.0 == b_dq.0 {
                return None;
            }
            Some(QBinGroup {
                op: cur,
                a_dq,
                b_dq,
                activation,
                q,
                a,
                b,
                a_params,
                b_params,
                y_params,
                clamp,
            })
        })();
        out.extend(group);
    }
    out
}
