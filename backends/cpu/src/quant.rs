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
//! Int8 and u8 tensors travel between steps in the executable's f32 buffers (every 8-bit
//! integer is exact in f32); the integer ops convert when they pack their operands.

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
        let scales: Vec<f32> = bytemuck::pod_collect_to_vec(bytes);
        let scale_rank = graph.tensors[scale_t].shape.len();
        if scale_rank > 1 {
            return Err("a scale of rank > 1 (blocked) is not implemented".into());
        }
        if scales.is_empty() || scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err("scales must be finite and positive".into());
        }
        let axis = if scale_rank == 1 {
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
}

impl QGroup {
    /// Every node the group covers, and whether it is absorbed (`false`: the node also
    /// runs on its own, for its other readers).
    pub fn nodes(&self) -> Vec<(NodeId, bool)> {
        let mut v = vec![(self.anchor, true), self.x_dq, self.w_dq, (self.q, true)];
        v.extend(self.bias_dq);
        v.extend(self.activation.map(|a| (a, true)));
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
            })
        })();
        groups.extend(group);
    }
    groups
}
