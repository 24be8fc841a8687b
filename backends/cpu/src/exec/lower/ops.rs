//! Lowering of the ops whose preparation takes more than a line or two: convolution,
//! the reductions, LayerNormalization, Slice's axes and LSTM.

use super::*;
use crate::ops::lstm::LstmCellSpec;
use crate::ops::reduce::{FloatReduceOp, ReduceLayout};

/// The reduction an op computes, `None` for the other ops.
pub(super) fn reduce_kind(op: OpKind) -> Option<Reduce> {
    Some(match op {
        OpKind::ReduceSum => Reduce::Sum,
        OpKind::ReduceMean => Reduce::Mean,
        OpKind::ReduceMax => Reduce::Max,
        OpKind::ReduceMin => Reduce::Min,
        OpKind::ReduceProd => Reduce::Prod,
        OpKind::ReduceL1 => Reduce::L1,
        OpKind::ReduceL2 => Reduce::L2,
        OpKind::ReduceLogSumExp => Reduce::LogSumExp,
        OpKind::ReduceSumSquare => Reduce::SumSquare,
        _ => return None,
    })
}

impl Builder<'_> {
    /// A convolution with its fused ops: constant adds folded into the bias, the
    /// activation as the clamp, and a BatchNormalization's per-channel `(a, b)` (`bn`)
    /// into the weights (times `a`) and the bias (`bias * a + b`).
    pub(super) fn conv(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        fused: &[EpOpSpec],
        out: TensorId,
        bn: Option<(&[f32], &[f32])>,
    ) -> Result<Op, String> {
        let geometry = ConvGeometry::new(node, &shapes[0], &shapes[1])?;
        let m = geometry.out_channels;
        let mut bias = vec![0f32; m];
        let mut runtime_bias = None;
        if let Some(&t) = node.inputs.get(2) {
            match self.const_f32(t) {
                Some(b) => bias.copy_from_slice(&b[..m]),
                None => runtime_bias = Some(self.src(t)?),
            }
        }
        let (mut bounds, mut residual, mut act) = ((f32::NEG_INFINITY, f32::INFINITY), None, None);
        for op in fused {
            match *op {
                // Fused conv adds are constants per channel (rs = 1) or scalars.
                EpOpSpec::Add { src, rs, cs, scale } => {
                    let data = self.slot_data(src).ok_or("a fused add is not constant")?;
                    if cs != 0 {
                        return Err("a fused add varies along the pixels".into());
                    }
                    for (c, b) in bias.iter_mut().enumerate() {
                        *b += scale * data[c * rs];
                    }
                }
                EpOpSpec::Residual { src, .. } => residual = Some(src),
                EpOpSpec::Relu => bounds = (0.0, f32::INFINITY),
                EpOpSpec::Clip { min, max } => bounds = (min, max),
                EpOpSpec::Act(f) => act = Some(f),
            }
        }
        let mut w_data = self.const_f32(node.inputs[1]);
        if let (Some((a, b)), Some(w)) = (bn, &mut w_data) {
            let per = w.len() / m.max(1);
            let w = w.to_mut();
            for (c, row) in w.chunks_exact_mut(per.max(1)).enumerate() {
                row.iter_mut().for_each(|v| *v *= a[c]);
            }
            for (c, v) in bias.iter_mut().enumerate() {
                *v = *v * a[c] + b[c];
            }
        }
        let w = match &w_data {
            Some(w) => Ok(&w[..]),
            None => Err(self.src(node.inputs[1])?),
        };
        let spec = ConvSpec {
            x: self.src(node.inputs[0])?,
            in_nhwc: self.nhwc[node.inputs[0]],
            out_nhwc: self.nhwc[out],
            w,
            bias,
            runtime_bias,
            residual,
            bounds,
            act,
        };
        Ok(Op::Conv(ConvOp::new(
            &mut self.packs,
            self.kernel,
            &geometry,
            spec,
        )?))
    }

    /// The data of a slot holding a copied constant.
    pub(super) fn slot_data(&self, src: Src) -> Option<&[f32]> {
        match src {
            Src::Slot(s) => match &self.slots[s] {
                Pending::Const(data) => Some(data),
                Pending::Inter(_) => None,
            },
            _ => None,
        }
    }

    /// A float reduction: ReduceMean, ReduceSum or ReduceMax over a contiguous run of axes
    /// by the fast kernels of `tensor.rs`, the others (and those over scattered axes) by
    /// `reduce.rs`.
    pub(super) fn reduce(
        &mut self,
        node: &Node,
        x: &[usize],
        out: &[usize],
        kind: Reduce,
    ) -> Result<Op, String> {
        let x_src = self.src(node.inputs[0])?;
        if self.nhwc[node.inputs[0]] && kind == Reduce::Mean {
            // The layout plan takes only spatial means of channels-last tensors.
            return Ok(Op::GlobalAveragePool(GlobalAveragePoolOp {
                x: x_src,
                planes: x[..2].iter().product(),
                plane_len: x[2..].iter().product(),
                channels_last: Some(x[1]),
            }));
        }
        let flags = reduced_axes(node, x, |t| self.const_i64s(t))?;
        // No axis (`noop_with_empty_axes`, or a scalar): the data, unless each element
        // maps to something else (L1, L2, SumSquare).
        let Some(flags) = flags.filter(|f| f.contains(&true) || !kind.keeps_one()) else {
            return Ok(Op::Copy(x_src));
        };
        let run = reduced_run(x, &flags)
            .filter(|_| matches!(kind, Reduce::Mean | Reduce::Sum | Reduce::Max));
        let Some((first, last)) = run else {
            // The other kinds, and any kind over scattered axes.
            return Ok(Op::FloatReduce(FloatReduceOp {
                x: x_src,
                layout: ReduceLayout::new(x, &flags),
                kind,
            }));
        };
        let count: usize = x[first..=last].iter().product();
        let outer: usize = x[..first].iter().product();
        let inner: usize = x[last + 1..].iter().product();
        debug_assert_eq!(outer * inner, out.iter().product::<usize>());
        Ok(Op::ReduceMean(ReduceMeanOp {
            x: x_src,
            outer,
            count,
            inner,
            kind,
        }))
    }

    pub(super) fn layer_norm(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let x = &shapes[0];
        let axis = normalize_axis(node.attr_int("axis", -1), x.len())?;
        let block = &x[axis..];
        let operand = |b: &mut Self, i: usize| -> Result<BlockOperand, String> {
            let src = b.src(node.inputs[i])?;
            let s = &shapes[i];
            let n: usize = block.iter().product();
            let index = if s.iter().product::<usize>() == n && n > 0 {
                None
            } else {
                // Broadcast strides of the operand over the block's dimensions.
                let strides = crate::ops::layout::broadcast_strides(s, x.len());
                let mut index = Vec::with_capacity(n);
                let mut idx = vec![0usize; block.len()];
                for _ in 0..n {
                    index.push(idx.iter().zip(&strides[axis..]).map(|(i, s)| i * s).sum());
                    for d in (0..block.len()).rev() {
                        idx[d] += 1;
                        if idx[d] < block[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
                Some(index)
            };
            Ok(BlockOperand { src, index })
        };
        let scale = operand(self, 1)?;
        let bias = match node.inputs.get(2) {
            Some(_) => Some(operand(self, 2)?),
            None => None,
        };
        Ok(Op::LayerNorm(LayerNormOp {
            x: self.src(node.inputs[0])?,
            scale,
            bias,
            rows: x[..axis].iter().product(),
            n: block.iter().product(),
            epsilon: node.attr_float("epsilon", 1e-5) as f64,
            stats: node.outputs.len() > 1,
        }))
    }

    /// Slice's `(axis, first, step, count)` per sliced axis, clamped as ONNX says.
    pub(super) fn slice_axes(
        &self,
        node: &Node,
        x: &[usize],
    ) -> Result<Vec<(usize, i64, i64, usize)>, String> {
        // The operands, or (before opset 10) the attributes of the same names.
        let ints = |i: usize| match node.inputs.get(i) {
            Some(&t) => self.const_i64s(t),
            None => ["", "starts", "ends", "axes"]
                .get(i)
                .and_then(|name| node.attr_ints(name))
                .map(<[i64]>::to_vec),
        };
        let starts = ints(1).ok_or("Slice starts are not constant")?;
        let ends = ints(2).ok_or("Slice ends are not constant")?;
        let n = starts.len();
        let axes: Vec<usize> = match ints(3) {
            Some(a) => a
                .iter()
                .map(|&a| normalize_axis(a, x.len()))
                .collect::<Result<_, _>>()?,
            None => (0..n).collect(),
        };
        let steps = ints(4).unwrap_or_else(|| vec![1; n]);
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            let (axis, step) = (axes[k], steps[k]);
            let dim = x[axis] as i64;
            let from_end = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
            let (start, end) = (from_end(starts[k]), from_end(ends[k]));
            let (first, count) = if step > 0 {
                let (b, e) = (start.clamp(0, dim), end.clamp(0, dim));
                (b, if e > b { (e - b - 1) / step + 1 } else { 0 })
            } else if dim == 0 {
                (0, 0)
            } else {
                let (b, e) = (start.clamp(0, dim - 1), end.clamp(-1, dim - 1));
                let stride = step.checked_neg().unwrap_or(i64::MAX);
                (b, if b > e { (b - e - 1) / stride + 1 } else { 0 })
            };
            out.push((axis, first, step, count as usize));
        }
        Ok(out)
    }

    pub(super) fn lstm(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let present = |i: usize| shapes.get(i).is_some_and(|s| !s.contains(&0));
        let w = self.const_f32(node.inputs[1]).ok_or("W is not constant")?;
        let r = self.const_f32(node.inputs[2]).ok_or("R is not constant")?;
        let b = if present(3) {
            Some(self.const_f32(node.inputs[3]).ok_or("B is not constant")?)
        } else {
            None
        };
        let initial_h = if present(5) {
            Some(self.src(node.inputs[5])?)
        } else {
            None
        };
        let initial_c = if present(6) {
            Some(self.src(node.inputs[6])?)
        } else {
            None
        };
        let x = self.src(node.inputs[0])?;
        let lens = self.seq_lens(node, shapes)?;
        let (dirs, hidden) = (shapes[1][0], shapes[2][2]);
        let peepholes = if present(7) {
            if shapes[7] != [dirs, 3 * hidden] {
                return Err(format!(
                    "LSTM peepholes P of shape {:?}, expected [{dirs}, {}]",
                    shapes[7],
                    3 * hidden
                ));
            }
            Some(self.src(node.inputs[7])?)
        } else {
            None
        };
        let cell = LstmCellSpec {
            clip: super::recurrent_clip(node)?,
            input_forget: node.attr_int("input_forget", 0) != 0,
            peepholes,
        };
        Ok(Op::Lstm(
            LstmOp::new(
                &mut self.packs,
                self.kernel,
                x,
                &shapes[0],
                &w,
                &r,
                b.as_deref(),
                (initial_h, initial_c),
                node.attr_str("direction", "forward"),
                shapes[1][0],
                shapes[2][2],
            )
            .with_lens(lens)
            .with_cell(cell),
        ))
    }
}
