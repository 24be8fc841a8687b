//! The group builders: for each NPU operation, the checks that decide whether a group
//! can run and the lowering of its constants into a command body.

use baton_delegate_api::ir::{DType, Node, NodeId, OpKind, TensorId};
use baton_delegate_api::shape::{normalize_axis, ConvGeometry, PoolGeometry};
use baton_delegate_api::{Decline, DeclineReason};

use super::{no, ActIn, Cx, Group, QParams, Tail, MAX_DILATION, MAX_KERNEL, MAX_STRIDE};
use crate::command::{opcode, Add, Body, Concat, ConcatPart, Conv, Fc, Pool, Rescale, Softmax};
use crate::quant::{quantize_like_reference, Requant};
use crate::tiling;

impl Cx<'_> {
    pub(super) fn conv(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let x = self.act_in(node, node.inputs[0])?;
        let (wdq, wv, wq, wshape) = self.const_in(node, node.inputs[1], DType::I8)?;
        if x.shape.len() != 4 {
            return Err(no(
                DeclineReason::Shape,
                format!("{}: only 2-D convolution (rank 4)", node.label()),
            ));
        }
        let geo = ConvGeometry::new(node, &x.shape, &wshape)
            .map_err(|e| no(DeclineReason::Attribute, format!("{}: {e}", node.label())))?;
        let win = &geo.window;
        let (c, m) = (geo.in_channels, geo.out_channels);
        let depthwise = geo.group == c && geo.group > 1;
        if geo.group != 1 && !depthwise {
            return Err(no(
                DeclineReason::Attribute,
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
            .map_err(|e| no(DeclineReason::Resource, format!("{}: {e}", node.label())))?;
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
    pub(super) fn fc_input(&self, node: &Node) -> Result<(ActIn, Option<NodeId>), Decline> {
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

    pub(super) fn fc(&self, anchor: NodeId) -> Result<Group, Decline> {
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
                DeclineReason::Attribute,
                format!("{}: only transA=0, alpha=1, beta=1", node.label()),
            ));
        }
        if wshape.len() != 2 || x.shape.is_empty() {
            return Err(no(
                DeclineReason::Shape,
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
                DeclineReason::Shape,
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
                        DeclineReason::Shape,
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
            .map_err(|e| no(DeclineReason::Resource, format!("{}: {e}", node.label())))?;
        Ok(self.finish(anchor, tail, vec![x.tensor], opcode::FC, Body::Fc(body)))
    }

    pub(super) fn add(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let a = self.act_in(node, node.inputs[0])?;
        let b = self.act_in(node, node.inputs[1])?;
        if a.shape != b.shape {
            return Err(no(
                DeclineReason::Shape,
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
                DeclineReason::Other,
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

    pub(super) fn pool(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        if node.outputs.len() > 1 {
            return Err(no(
                DeclineReason::Other,
                format!("{}: MaxPool Indices output", node.label()),
            ));
        }
        let x = self.act_in(node, node.inputs[0])?;
        if x.shape.len() != 4 {
            return Err(no(
                DeclineReason::Shape,
                format!("{}: only 2-D pooling (rank 4)", node.label()),
            ));
        }
        let (h, w) = (x.shape[2], x.shape[3]);
        let (kernel, strides, pads, out, include) = if node.op == OpKind::GlobalAveragePool {
            (vec![h, w], vec![1, 1], vec![0; 4], vec![1, 1], false)
        } else {
            let geo = PoolGeometry::new(node, &x.shape)
                .map_err(|e| no(DeclineReason::Attribute, format!("{}: {e}", node.label())))?;
            let win = &geo.window;
            if win.dilations.iter().any(|&d| d != 1) {
                return Err(no(
                    DeclineReason::Attribute,
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
                DeclineReason::Shape,
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
            .map_err(|e| no(DeclineReason::Resource, format!("{}: {e}", node.label())))?;
        let op = if max {
            opcode::MAXPOOL
        } else {
            opcode::AVGPOOL
        };
        Ok(self.finish(anchor, tail, vec![x.tensor], op, Body::Pool(body)))
    }

    /// Relu, Clip, Reshape, Flatten: element order is unchanged, so one requantization.
    pub(super) fn rescale(&self, anchor: NodeId) -> Result<Group, Decline> {
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

    pub(super) fn concat(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let ins: Vec<ActIn> = node
            .inputs
            .iter()
            .map(|&t| self.act_in(node, t))
            .collect::<Result<_, _>>()?;
        let out_shape = self.shape(node.outputs[0])?;
        let axis = normalize_axis(node.attr_int("axis", 0), out_shape.len())
            .map_err(|e| no(DeclineReason::Attribute, format!("{}: {e}", node.label())))?;
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
                DeclineReason::Resource,
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

    pub(super) fn softmax(&self, anchor: NodeId) -> Result<Group, Decline> {
        let node = &self.g.nodes[anchor];
        let x = self.act_in(node, node.inputs[0])?;
        let axis = normalize_axis(node.attr_int("axis", -1), x.shape.len())
            .map_err(|e| no(DeclineReason::Attribute, format!("{}: {e}", node.label())))?;
        let mut nodes = vec![x.dq, anchor];
        let tail = self.tail(node, node.outputs[0], &mut nodes)?;
        let axis_len = x.shape[axis];
        if 2 * axis_len + 256 * 4 > self.machine.sram_bytes as usize {
            return Err(no(
                DeclineReason::Resource,
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
                DeclineReason::Other,
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
                DeclineReason::Shape,
                format!("{}: kernel {kernel:?} above {MAX_KERNEL}", node.label()),
            ));
        }
        if strides.iter().any(|&s| s > MAX_STRIDE) {
            return Err(no(
                DeclineReason::Attribute,
                format!("{}: strides {strides:?} above {MAX_STRIDE}", node.label()),
            ));
        }
        if dil.iter().any(|&d| d > MAX_DILATION) {
            return Err(no(
                DeclineReason::Attribute,
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
                DeclineReason::Other,
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
                DeclineReason::Other,
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
                    DeclineReason::Shape,
                    format!("{}: {} biases for {m} outputs", node.label(), bv.len()),
                ));
            }
            for j in 0..m {
                // Exact when the bias scale is x_scale * w_scale, as QDQ exporters make it.
                let acc_scale = x_scale as f64 * w_scales[j] as f64;
                let v = (bv[j] as f64 * bs[j] as f64 / acc_scale).round();
                if v.abs() >= 2f64.powi(31) {
                    return Err(no(
                        DeclineReason::Other,
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
}

/// Hardware accumulators are 32-bit: refuse a reduction long enough to overflow them
/// (worst case |x - zp| ≤ 255 times |w| ≤ 128 per term).
fn check_accumulator(node: &Node, k_len: usize) -> Result<(), Decline> {
    if (k_len as u64) * 255 * 128 >= 1 << 31 {
        return Err(no(
            DeclineReason::Resource,
            format!(
                "{}: a reduction of {k_len} terms could overflow the 32-bit accumulator",
                node.label()
            ),
        ));
    }
    Ok(())
}
