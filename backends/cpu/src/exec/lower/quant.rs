//! Lowering of the int8 region: QDQ groups, QDQ element-wise groups, tables (with their
//! byte pools and gathers), joins, standalone QuantizeLinear / DequantizeLinear, and
//! which 8-bit tensors are held channels-last.
//!
//! **Layout.** An 8-bit tensor is held NHWC when it is the rank-4 result of an int8
//! convolution, of an int8 Add/Mul, table, pool, gather or join of NHWC operands, or of a
//! standalone QuantizeLinear that an int8 convolution reads, or only standalone
//! DequantizeLinears, joins and tables (pass-through bytes, see [`Int8Layout`]); and
//! every step that reads it takes NHWC: an int8 2-D convolution, an int8 Add/Mul, table,
//! pool, gather or join whose result is NHWC, or a standalone DequantizeLinear (which
//! converts to NCHW while it dequantizes when its result is not held NHWC). Subgraph
//! outputs are NCHW. As in `layout.rs`, the set starts from every candidate and loses
//! those with a reader that does not take NHWC until nothing changes.

use baton_delegate_api::ir::{DType, Graph, Node, OpKind, TensorId};
use baton_delegate_api::shape::{ConvGeometry, PoolGeometry};

use super::Builder;
use crate::exec::Op;
use crate::ops::conv::Geom;
use crate::ops::quant::linear::{
    im2col_stride, indirection, pair_taps, stored_zero, zero_row, QLinearOp, QPath,
};
use crate::ops::quant::{
    quantize, quantize_stored, stored_bias, AxisLayout, BinaryParams, DequantizeOp, DqInput, Nhwc,
    QBinaryKind, QBinaryOp, QConcatOp, QGatherOp, QLutOp, QMaxPoolOp, QuantizeOp,
};
use crate::qgemm::{PackedWeights, QKernelId, QOut, Stage2, SLACK};
use crate::quant::{
    int_range, ints, scalar_operand, QBinGroup, QCatGroup, QGroup, QLutGroup, QParams,
};

/// Who reads an 8-bit tensor.
#[derive(Clone, Copy)]
enum Reader {
    Group(usize),
    Bin(usize),
    Lut(usize),
    Cat(usize),
    /// A standalone DequantizeLinear.
    Dq,
    /// Anything that needs NCHW (a subgraph output).
    Nchw,
}

/// The 8-bit tensors held channels-last (`nhwc`, one flag per tensor), and the
/// standalone QuantizeLinears whose results are candidates as pass-through bytes alone
/// (`passes`: input, result).
pub(super) struct Int8Layout {
    pub nhwc: Vec<bool>,
    pub passes: Vec<(TensorId, TensorId)>,
}

impl Int8Layout {
    /// The pass-through bytes whose QuantizeLinear's f32 input the f32 plan `f32` holds
    /// NCHW: the Q would convert, and what reads the bytes either converts back or is
    /// held NHWC for these bytes alone. The lowering plans both sides again without them
    /// as candidates, until none is left, which keeps the pairs between float ops that are
    /// channels-last for a reason (an int8 convolution's or element-wise group's result
    /// before them).
    pub fn ungrounded(&self, f32: &[bool]) -> Vec<TensorId> {
        self.passes
            .iter()
            .filter(|&&(x, y)| self.nhwc[y] && !f32[x])
            .map(|&(_, y)| y)
            .collect()
    }
}

/// One flag per tensor: an 8-bit tensor held channels-last. `standalone[n]`: node `n` is
/// a QuantizeLinear or DequantizeLinear that runs on its own (a QuantizeLinear writes
/// NHWC while it quantizes when every reader takes it so, sparing the first int8
/// convolution its conversion). `qdq[n]`: node `n` belongs to a group; every other
/// reader (a Cast, data movement of bytes) reads NCHW. `excluded[t]`: no candidate as
/// pass-through bytes (see [`Int8Layout::ungrounded`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn int8_nhwc(
    graph: &Graph,
    groups: &[QGroup],
    bins: &[QBinGroup],
    luts: &[QLutGroup],
    cats: &[QCatGroup],
    standalone: &[bool],
    qdq: &[bool],
    excluded: &[bool],
) -> Int8Layout {
    let rank4 = |t: TensorId| graph.tensors[t].shape.len() == 4;
    let mut readers: Vec<Vec<Reader>> = vec![Vec::new(); graph.tensors.len()];
    for (i, g) in groups.iter().enumerate() {
        readers[g.x].push(Reader::Group(i));
    }
    for (i, g) in bins.iter().enumerate() {
        readers[g.a].push(Reader::Bin(i));
        readers[g.b].push(Reader::Bin(i));
    }
    for (i, g) in luts.iter().enumerate() {
        readers[g.x].push(Reader::Lut(i));
    }
    for (i, g) in cats.iter().enumerate() {
        for &x in &g.xs {
            readers[x].push(Reader::Cat(i));
        }
    }
    for (n, node) in graph.nodes.iter().enumerate() {
        if standalone[n] && node.op == OpKind::DequantizeLinear {
            readers[node.inputs[0]].push(Reader::Dq);
        }
    }
    for &t in &graph.outputs {
        readers[t].push(Reader::Nchw);
    }
    for (n, node) in graph.nodes.iter().enumerate() {
        if !qdq[n] && !standalone[n] {
            for &t in &node.inputs {
                readers[t].push(Reader::Nchw);
            }
        }
    }
    let out_of = |q: usize| graph.nodes[q].outputs[0];
    let conv2d = |g: &QGroup| graph.nodes[g.anchor].op == OpKind::Conv && rank4(g.x);
    let mut nhwc = vec![false; graph.tensors.len()];
    for g in groups {
        let y = out_of(g.q);
        nhwc[y] = conv2d(g) && rank4(y);
    }
    for g in bins {
        nhwc[out_of(g.q)] = rank4(out_of(g.q));
    }
    for g in luts {
        nhwc[out_of(g.q)] = rank4(out_of(g.q));
    }
    for g in cats {
        nhwc[out_of(g.q)] = rank4(out_of(g.q));
    }
    let mut passes = Vec::new();
    // A QuantizeLinear when an int8 convolution reads it (otherwise NHWC would only add
    // a conversion back), or when only standalone DequantizeLinears, joins and tables
    // do: the Q -> DQ pair ONNX Runtime's quantizer puts after a float op it leaves in
    // floats (Resize, Split) or before one that runs over bytes (Concat, MaxPool). A
    // DequantizeLinear converts as its f32 side is held, so NHWC bytes let the f32 layout
    // plan keep the float ops on both sides channels-last; the lowering excludes those
    // whose f32 input is not held so (`Int8Layout::ungrounded`), where they would only
    // add conversions.
    for (n, node) in graph.nodes.iter().enumerate() {
        let y = node.outputs[0];
        if standalone[n] && node.op == OpKind::QuantizeLinear {
            let by_conv = readers[y]
                .iter()
                .any(|r| matches!(*r, Reader::Group(i) if conv2d(&groups[i])));
            let through = !by_conv && passes_through(&readers[y]) && !excluded[y];
            nhwc[y] = rank4(y) && (by_conv || through);
            if nhwc[y] && through {
                passes.push((node.inputs[0], y));
            }
        }
    }
    loop {
        let mut changed = false;
        for t in 0..nhwc.len() {
            if !nhwc[t] {
                continue;
            }
            let readers_ok = readers[t].iter().all(|r| match *r {
                Reader::Group(i) => conv2d(&groups[i]),
                Reader::Bin(i) => nhwc[out_of(bins[i].q)],
                Reader::Lut(i) => nhwc[out_of(luts[i].q)],
                Reader::Cat(i) => nhwc[out_of(cats[i].q)],
                Reader::Dq => true,
                Reader::Nchw => false,
            });
            let inputs_ok = bins
                .iter()
                .find(|g| out_of(g.q) == t)
                .is_none_or(|g| nhwc[g.a] && nhwc[g.b])
                && luts
                    .iter()
                    .find(|g| out_of(g.q) == t)
                    .is_none_or(|g| nhwc[g.x])
                && cats
                    .iter()
                    .find(|g| out_of(g.q) == t)
                    .is_none_or(|g| g.xs.iter().all(|&x| nhwc[x]));
            if !(readers_ok && inputs_ok) {
                nhwc[t] = false;
                changed = true;
            }
        }
        if !changed {
            passes.retain(|&(_, y)| nhwc[y]);
            return Int8Layout { nhwc, passes };
        }
    }
}

/// Whether the 8-bit tensor read by `readers` goes only into standalone
/// DequantizeLinears, joins and tables (the pass-through bytes of a Q -> DQ pair).
fn passes_through(readers: &[Reader]) -> bool {
    !readers.is_empty()
        && readers
            .iter()
            .all(|r| matches!(r, Reader::Dq | Reader::Cat(_) | Reader::Lut(_)))
}

/// The requantization of one output column block: `x_scale * w_scale / y_scale`, the
/// offset `bias - za * colsum` and the stored clamp.
struct Requant<'a> {
    xs: f32,
    za: i32,
    w_scales: &'a [f32],
    bias: Option<&'a [i32]>,
    y: (f32, i32, DType),
    clamp: Option<(f32, f32)>,
}

impl Requant<'_> {
    fn out(&self, col_sums: Option<&[i32]>, stage2: Option<Stage2>) -> QOut {
        let (ys, yz, ydt) = self.y;
        let (mut lo, mut hi) = int_range(ydt);
        if let Some((a, b)) = self.clamp {
            // Q is monotonic, so Q(clip(v, a, b)) = clamp(Q(v), Q(a), Q(b)).
            lo = lo.max(quantize(a, ys, yz, lo, hi));
            hi = hi.min(quantize(b, ys, yz, lo, hi));
        }
        let bias = stored_bias(ydt);
        let n = self.w_scales.len();
        QOut {
            offset: (0..n)
                .map(|j| {
                    let b = self.bias.map_or(0, |b| b[j]);
                    let cs = col_sums.map_or(0, |c| c[j]);
                    b.wrapping_sub(self.za.wrapping_mul(cs))
                })
                .collect(),
            scale: self
                .w_scales
                .iter()
                .map(|&ws| ((self.xs as f64 * ws as f64 / ys as f64) as f32).min(f32::MAX))
                .collect(),
            zp: yz + bias,
            lo: lo + bias,
            hi: hi + bias,
            stage2,
        }
    }
}

impl<'g> Builder<'g> {
    /// The length in f32 words of an 8-bit tensor of `n` elements, with the slack.
    pub(super) fn byte_words(n: usize) -> usize {
        n.saturating_add(SLACK).div_ceil(4)
    }

    /// An 8-bit (or f16) constant as stored bytes in a slot.
    pub(super) fn byte_const(&self, t: TensorId) -> Option<Vec<f32>> {
        let d = &self.graph.tensors[t];
        let bytes = self.consts.bytes(t)?;
        let flip = if d.dtype == DType::I8 { 0x80 } else { 0 };
        let mut words = vec![0.0f32; Self::byte_words(bytes.len())];
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        for (o, &b) in dst.iter_mut().zip(bytes) {
            *o = b ^ flip;
        }
        Some(words)
    }

    fn nhwc_of(&self, t: TensorId) -> Option<Nhwc> {
        let s = self.shape(t);
        (self.qnhwc[t] && s.len() == 4).then(|| Nhwc {
            batch: s[0],
            c: s[1],
            plane: s[2] * s[3],
        })
    }

    /// Folds a DequantizeLinear of a constant into a constant slot holding its f32 result
    /// (what the reference computes); `false` when `node` is not one.
    pub(super) fn fold_dequantize(&mut self, node: &Node) -> bool {
        let t = node.inputs[0];
        if node.op != OpKind::DequantizeLinear || !self.graph.tensors[t].is_const() {
            return false;
        }
        let Some(bytes) = self.consts.bytes(t) else {
            return false;
        };
        let Ok(params) = QParams::of(self.graph, node, &self.consts) else {
            return false;
        };
        let Some(values) = ints(params.dtype, bytes) else {
            return false;
        };
        let layout = AxisLayout::new(&params, &self.shape(t));
        let out: Vec<f32> = values
            .iter()
            .enumerate()
            .map(|(k, &v)| {
                let i = layout.which(k);
                ((v as f64 - params.zero_points[i] as f64) * params.scales[i] as f64) as f32
            })
            .collect();
        let slot = self.slots.len();
        let panel = self.packs.constant(None, std::borrow::Cow::Owned(out));
        self.slots.push(super::Pending::Const(panel));
        self.srcs[node.outputs[0]] = Some(crate::ops::Src::Slot(slot));
        true
    }

    /// A standalone QuantizeLinear or DequantizeLinear.
    pub(super) fn quant_node(&mut self, node: &Node, x_shape: &[usize]) -> Result<Op, String> {
        let params = QParams::of(self.graph, node, &self.consts)?;
        let layout = AxisLayout::new(&params, x_shape);
        let t = node.inputs[0];
        if node.op == OpKind::QuantizeLinear {
            // An input held NHWC (see `layout.rs`) is in the order of an NHWC result:
            // quantized element by element.
            let nhwc = match self.nhwc[t] {
                true => None,
                false => self.nhwc_of(node.outputs[0]),
            };
            return Ok(Op::Quantize(QuantizeOp {
                x: self.src(t)?,
                int_input: self.graph.tensors[t].dtype == DType::I32,
                params,
                layout,
                nhwc,
            }));
        }
        let x = match self.consts.bytes(t) {
            Some(bytes) if self.graph.tensors[t].is_const() => {
                DqInput::Const(ints(params.dtype, bytes).ok_or("unreadable constant")?)
            }
            _ if self.graph.tensors[t].dtype == DType::I32 => DqInput::Words {
                src: self.src(t)?,
                len: x_shape.iter().product(),
            },
            _ => DqInput::Bytes {
                src: self.src(t)?,
                len: x_shape.iter().product(),
                // A result held NHWC takes the NHWC bytes in their order.
                nhwc: match self.nhwc[node.outputs[0]] {
                    true => None,
                    false => self.nhwc_of(t),
                },
            },
        };
        Ok(Op::Dequantize(DequantizeOp { x, params, layout }))
    }

    /// The op of a QDQ element-wise group.
    pub(super) fn qbinary(&mut self, g: &QBinGroup) -> Result<Op, String> {
        let operands = (self.src(g.a)?, self.src(g.b)?);
        Ok(Op::QBinary(self.binary_op(g, operands)))
    }

    /// The integer op of a QDQ Add or Mul group reading `operands`.
    fn binary_op(&self, g: &QBinGroup, (a, b): (crate::ops::Src, crate::ops::Src)) -> QBinaryOp {
        let p = self.binary_params(g);
        QBinaryOp {
            kind: p.kind,
            a,
            b,
            len: self
                .shape(self.graph.nodes[g.op].outputs[0])
                .iter()
                .product(),
            a_params: p.a,
            b_params: p.b,
            y_params: (p.y.0, p.y.1),
            clamp: g.clamp,
            lo: p.y.2,
            hi: p.y.3,
        }
    }

    /// The element function of a QDQ Add or Mul group, over stored bytes.
    fn binary_params(&self, g: &QBinGroup) -> BinaryParams {
        let stored = |p: (f32, i32, DType)| (p.0, p.1 + stored_bias(p.2));
        let (ys, yz, ydt) = g.y_params;
        let (lo, hi) = int_range(ydt);
        let bias = stored_bias(ydt);
        BinaryParams {
            kind: match self.graph.nodes[g.op].op {
                OpKind::Add => QBinaryKind::Add,
                _ => QBinaryKind::Mul,
            },
            a: stored(g.a_params),
            b: stored(g.b_params),
            clamp: g.clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY)),
            y: (ys, yz + bias, lo + bias, hi + bias),
        }
    }

    /// The table of a QDQ chain of float ops: every stored input byte dequantized as
    /// `DequantizeOp` does, taken through the chain's ops by the same functions their
    /// steps run (so the table holds the bytes the steps would store), and quantized as
    /// `QuantizeOp` does.
    pub(super) fn qlut(&mut self, g: &QLutGroup) -> Result<Op, String> {
        let lut = self.lut_table(g)?;
        let out = self.graph.nodes[g.q].outputs[0];
        let identity = lut.iter().enumerate().all(|(i, &v)| v as usize == i);
        let graph = self.graph;
        let pre = g.pre.map(|p| &graph.nodes[p]);
        if let Some(node) = pre.filter(|n| n.op == OpKind::Resize) {
            let (x, y) = (self.shape(g.x), self.shape(out));
            let (nhwc, src) = (self.qnhwc[g.x], self.src(g.x)?);
            let gather = self.nearest_gather(node, &x, &y, src, x.clone(), nhwc)?;
            return Ok(Op::QGather(QGatherOp {
                gather,
                len: y.iter().product(),
                lut: (!identity).then_some(lut),
            }));
        }
        if let Some(node) = pre {
            let shape = self.shape(g.x);
            let geom = PoolGeometry::new(node, &shape)?;
            // A window with no tap on the input: the float pool's -inf, through the chain.
            let empty = self.stored_through(vec![f32::NEG_INFINITY], &g.chain, g.y_params)?[0];
            return Ok(Op::QMaxPool(QMaxPoolOp::new(
                self.src(g.x)?,
                &shape,
                &geom,
                self.qnhwc[g.x],
                (!identity).then_some(lut),
                empty,
            )));
        }
        Ok(Op::QLut(QLutOp {
            x: self.src(g.x)?,
            len: self.shape(out).iter().product(),
            lut,
        }))
    }

    /// The op of a QDQ Concat: the inputs' stored bytes joined along the axis where the
    /// logical one is held, each through its table unless that is the identity.
    pub(super) fn qconcat(&mut self, g: &QCatGroup) -> Result<Op, String> {
        let node = &self.graph.nodes[g.op];
        let out = self.graph.nodes[g.q].outputs[0];
        let rank = self.shape(out).len();
        let logical = baton_delegate_api::shape::normalize_axis(node.attr_int("axis", 0), rank)?;
        let nhwc = self.qnhwc[out];
        let axis = if nhwc {
            super::nhwc_axis(logical, rank)
        } else {
            logical
        };
        let mut inputs = Vec::with_capacity(g.xs.len());
        let mut luts = Vec::with_capacity(g.xs.len());
        for (&x, &params) in g.xs.iter().zip(&g.x_params) {
            let mut shape = self.shape(x);
            if nhwc {
                shape[1..].rotate_left(1);
            }
            inputs.push((self.src(x)?, shape));
            let lut = self.table(params, &[], g.y_params)?;
            let identity = lut.iter().enumerate().all(|(i, &v)| v as usize == i);
            luts.push((!identity).then_some(lut));
        }
        Ok(Op::QConcat(QConcatOp {
            cat: crate::ops::layout::ConcatOp::new(&inputs, axis),
            luts,
        }))
    }

    /// A QDQ Add or Mul of an int8 tensor and a table of the same tensor (`gate`, its
    /// operand `b` if `gate_is_b`), as a QDQ SiLU is (`x * Sigmoid(x)` with the Sigmoid
    /// quantized between): every output byte is a function of the tensor's byte alone, so
    /// the two run as one table, composed at init from the table and the binary op's own
    /// element function (the bytes the two steps would store).
    pub(super) fn qself_gate(
        &mut self,
        g: &QBinGroup,
        gate: &QLutGroup,
        gate_is_b: bool,
    ) -> Result<Op, String> {
        let t = self.lut_table(gate)?;
        let params = self.binary_params(g);
        let mut lut = Box::new([0u8; 256]);
        for (x, l) in lut.iter_mut().enumerate() {
            let (x, s) = (x as u8, t[x]);
            *l = match gate_is_b {
                true => params.stored(x, s),
                false => params.stored(s, x),
            };
        }
        let out = self.graph.nodes[g.q].outputs[0];
        Ok(Op::QLut(QLutOp {
            x: self.src(gate.x)?,
            len: self.shape(out).iter().product(),
            lut,
        }))
    }

    /// The 256 stored bytes of a [`QLutGroup`], as [`Self::qlut`] runs them.
    fn lut_table(&mut self, g: &QLutGroup) -> Result<Box<[u8; 256]>, String> {
        self.table(g.x_params, &g.chain, g.y_params)
    }

    /// The stored bytes of every stored input byte of parameters `x_params` dequantized,
    /// taken through the float ops `chain` and quantized with `y_params`.
    fn table(
        &mut self,
        (xs, xz, xdt): (f32, i32, DType),
        chain: &[baton_delegate_api::ir::NodeId],
        y_params: (f32, i32, DType),
    ) -> Result<Box<[u8; 256]>, String> {
        let z = xz + stored_bias(xdt);
        let v: Vec<f32> = (0..256).map(|b| (b - z) as f32 * xs).collect();
        let mut lut = Box::new([0u8; 256]);
        lut.copy_from_slice(&self.stored_through(v, chain, y_params)?);
        Ok(lut)
    }

    /// The stored bytes of the f32 values `v` taken through the float ops `chain` and
    /// quantized with `y_params`.
    fn stored_through(
        &mut self,
        mut v: Vec<f32>,
        chain: &[baton_delegate_api::ir::NodeId],
        (ys, yz, ydt): (f32, i32, DType),
    ) -> Result<Vec<u8>, String> {
        let mut tmp = vec![0f32; v.len()];
        for &n in chain {
            let node = &self.graph.nodes[n];
            if let Some(f) = self.unary(node) {
                crate::ops::elementwise::unary(f, self.kernel.isa(), &v, &mut tmp);
                std::mem::swap(&mut v, &mut tmp);
                continue;
            }
            let (a, b) = (node.inputs[0], node.inputs[1]);
            let constant = |t: TensorId| scalar_operand(self.graph, &self.consts, t);
            // One operand is the one-element constant (the group's finder checked).
            let (c, x_first) = match (constant(a), constant(b)) {
                (None, Some(c)) => (c, true),
                (Some(c), None) => (c, false),
                _ => return Err(format!("node {}: no scalar operand", node.label())),
            };
            for x in &mut v {
                let (l, r) = if x_first { (*x, c) } else { (c, *x) };
                *x = match node.op {
                    OpKind::Add => l + r,
                    OpKind::Sub => l - r,
                    OpKind::Mul => l * r,
                    OpKind::Div => l / r,
                    other => return Err(format!("{other:?} in a table chain")),
                };
            }
        }
        let (lo, hi) = int_range(ydt);
        let bias = stored_bias(ydt);
        Ok(v.iter()
            .map(|&x| quantize_stored(x, ys, yz + bias, lo + bias, hi + bias))
            .collect())
    }

    /// The integer op of a QDQ group.
    pub(super) fn qlinear(&mut self, g: &QGroup) -> Result<Op, String> {
        let anchor = &self.graph.nodes[g.anchor];
        let x = self.src(g.x)?;
        let x_shape = self.shape(g.x);
        let w_shape = self.shape(g.w);
        let bytes = self
            .consts
            .bytes(g.w)
            .ok_or("the weights are not readable")?;
        let w: &[i8] = bytemuck::cast_slice(bytes);
        let (xs, xz, xdt) = g.x_params;
        let za = stored_zero(xz, xdt);
        let y1 = g.post.as_ref().map_or(g.y_params, |p| p.y1);
        let stage2 = g.post.as_ref().map(|p| {
            let (s2, z2, dt2) = g.y_params;
            let (lo, hi) = int_range(dt2);
            let b2 = stored_bias(dt2);
            Stage2 {
                s1: p.dq.0,
                z1: p.dq.1 + stored_bias(p.dq.2),
                bias: p.bias.clone(),
                s2,
                z2: z2 + b2,
                lo: lo + b2,
                hi: hi + b2,
            }
        });
        let x_len: usize = x_shape.iter().product();
        let y_nhwc = self.qnhwc[self.graph.nodes[g.q].outputs[0]];
        let x_nhwc = self.qnhwc[g.x];
        let rq = |cols: std::ops::Range<usize>| Requant {
            xs,
            za,
            w_scales: &g.w_scales[cols.clone()],
            bias: g.bias.as_deref().map(|b| &b[cols]),
            y: y1,
            clamp: g.clamp,
        };
        if anchor.op != OpKind::Conv {
            let k = *x_shape.last().ok_or("a rank-0 input")?;
            let rows = x_len / k.max(1);
            let n = w_shape[g.w_axis];
            let at = |_: usize, kk: usize, j: usize| {
                if g.w_axis == 1 {
                    w[kk * n + j]
                } else {
                    w[j * k + kk]
                }
            };
            let packed = self.pack_q(1, k, n, at);
            let out = rq(0..n).out(Some(packed.col_sums()), stage2);
            return Ok(Op::QLinear(QLinearOp {
                x,
                x_len,
                geom: None,
                in_nchw: false,
                out_nchw: false,
                path: QPath::Gemm { rows },
                weights: vec![packed],
                outs: vec![out],
                za,
                kernel: self.qkernel,
            }));
        }
        if x_shape.len() > 4 {
            return Err("only 1-D and 2-D convolutions are implemented".into());
        }
        let geom = Geom::new(&ConvGeometry::new(anchor, &x_shape, &w_shape)?);
        let (cg, mg, taps) = (geom.cg(), geom.mg(), geom.kh * geom.kw);
        // A 1-D convolution is NCHW on both sides (only rank-4 tensors are held NHWC).
        let (in_nchw, out_nchw) = (!x_nhwc, !y_nhwc);
        // ONNX weights: [M, C/g, kh, kw].
        let weight =
            |grp: usize, t: usize, ch: usize, j: usize| w[((grp * mg + j) * cg + ch) * taps + t];
        let kernel = self.qkernel;
        let op = |path, weights, outs| QLinearOp {
            x,
            x_len,
            geom: Some(geom),
            in_nchw,
            out_nchw,
            path,
            weights,
            outs,
            za,
            kernel,
        };
        if cg == 1 && mg == 1 && geom.group > 1 {
            let c = geom.c;
            let mut dw = vec![0i16; taps * c];
            for ch in 0..c {
                for t in 0..taps {
                    dw[t * c + ch] = weight(ch, t, 0, 0) as i16;
                }
            }
            let out = rq(0..c).out(None, None);
            // Only the AVX2 and VNNI row kernels read the taps in pairs.
            let pairs = match kernel.id() {
                QKernelId::Avx2 | QKernelId::Avx512Vnni => pair_taps(&dw, c, geom.kh, geom.kw),
                _ => Vec::new(),
            };
            let zoff = (0..c)
                .map(|ch| {
                    let sum = (0..taps).fold(0i32, |s, t| s.wrapping_add(dw[t * c + ch] as i32));
                    out.offset[ch].wrapping_sub(za.wrapping_mul(sum))
                })
                .collect();
            return Ok(Op::QLinear(op(
                QPath::Depthwise {
                    taps: dw,
                    pairs,
                    zoff,
                },
                Vec::new(),
                vec![out],
            )));
        }
        if let Some(stride) = im2col_stride(&geom) {
            // One group: the weights in the im2col rows' `(tap, channel)` order.
            let k = taps * cg;
            let packed = self.pack_q(1, k, mg, |_, kk, j| weight(0, kk / cg, kk % cg, j));
            let out = rq(0..mg).out(Some(packed.col_sums()), None);
            return Ok(Op::QLinear(op(
                QPath::Im2col { stride },
                vec![packed],
                vec![out],
            )));
        }
        let pointwise = taps == 1
            && (geom.sh, geom.sw, geom.ph, geom.pw) == (1, 1, 0, 0)
            && (geom.oh, geom.ow) == (geom.h, geom.w);
        let mut weights = Vec::with_capacity(geom.group);
        let mut outs = Vec::with_capacity(geom.group);
        for grp in 0..geom.group {
            let packed = self.pack_q(taps, cg, mg, |t, ch, j| weight(grp, t, ch, j));
            outs.push(rq(grp * mg..(grp + 1) * mg).out(Some(packed.col_sums()), None));
            weights.push(packed);
        }
        let path = if pointwise {
            QPath::Gemm {
                rows: geom.batch * geom.out_plane(),
            }
        } else {
            QPath::Igemm {
                table: indirection(&geom)?,
                zero: zero_row(za, cg),
            }
        };
        Ok(Op::QLinear(op(path, weights, outs)))
    }

    /// Int8 weights packed for the kernels, through the blob's packings (see
    /// `prepack.rs`): the bytes travel as f32 words.
    pub(super) fn pack_q(
        &mut self,
        taps: usize,
        c: usize,
        n: usize,
        w: impl Fn(usize, usize, usize) -> i8,
    ) -> PackedWeights {
        let words = self.packs.take(PackedWeights::words(taps, c, n), |dst| {
            PackedWeights::fill(dst, taps, c, n, &w)
        });
        PackedWeights::from_panel(taps, c, n, words)
    }
}

#[cfg(test)]
mod tests {
    use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind, TensorData, TensorId};

    use crate::exec::lower::layouts;

    /// A QuantizeLinear and its DequantizeLinear of one scale: (bytes, floats).
    fn qdq(b: &mut GraphBuilder, t: TensorId, name: &str) -> (TensorId, TensorId) {
        let s = b.constant_f32(&format!("{name}_s"), &[], &[0.05]);
        let z = b.constant(
            &format!("{name}_z"),
            DType::U8,
            &[],
            TensorData::from_bytes(&[128]),
        );
        let q = b.node(OpKind::QuantizeLinear, &[t, s, z], &[]).unwrap();
        (
            q,
            b.node(OpKind::DequantizeLinear, &[q, s, z], &[]).unwrap(),
        )
    }

    /// An int8 1x1 convolution of `x` (dequantized bytes) to `m` channels.
    fn conv(b: &mut GraphBuilder, x: TensorId, c: usize, m: usize, name: &str) -> TensorId {
        let w = b.constant(
            name,
            DType::I8,
            &[m, c, 1, 1],
            TensorData::from_slice(&vec![1i8; m * c]),
        );
        let s = b.constant_f32(&format!("{name}_ws"), &[], &[0.01]);
        let z = b.constant(
            &format!("{name}_wz"),
            DType::I8,
            &[],
            TensorData::from_bytes(&[0]),
        );
        let wd = b.node(OpKind::DequantizeLinear, &[w, s, z], &[]).unwrap();
        b.node(OpKind::Conv, &[x, wd], &[]).unwrap()
    }

    /// A YOLO neck as ONNX Runtime's quantizer writes it: an int8 convolution's result
    /// dequantized once for a second int8 convolution and a nearest Resize, the Resize's
    /// own Q -> DQ pair, a Concat of it with a linear Resize of the same (each in its
    /// pair), and an int8 convolution of the Concat. The nearest Resize and the Concat
    /// run over the bytes, channels-last; the linear Resize stays in floats between its
    /// DequantizeLinear (read by it and the join) and its Q, whose bytes only the join
    /// reads: held NHWC, so the linear Resize is channels-last too.
    #[test]
    fn float_ops_between_pass_through_pairs_stay_channels_last() {
        let mut b = GraphBuilder::new("neck");
        let x = b.input_fixed("x", DType::F32, &[1, 4, 6, 6]);
        let (_, dx) = qdq(&mut b, x, "x");
        let a = conv(&mut b, dx, 4, 4, "a");
        let (qa, da) = qdq(&mut b, a, "a");
        let side = conv(&mut b, da, 4, 4, "side");
        let scales = Attr::Floats(vec![1.0, 1.0, 2.0, 2.0]);
        let up = b
            .node(OpKind::Resize, &[da], &[("scales", scales)])
            .unwrap();
        let (qu, du) = qdq(&mut b, up, "u");
        let linear = [
            ("mode", Attr::Str("linear".into())),
            ("scales", Attr::Floats(vec![1.0, 1.0, 1.0, 1.0])),
        ];
        let lin = b.node(OpKind::Resize, &[du], &linear).unwrap();
        let (qp, dp) = qdq(&mut b, lin, "p");
        let cat = b
            .node(OpKind::Concat, &[du, dp], &[("axis", Attr::Int(1))])
            .unwrap();
        let (qc, dc) = qdq(&mut b, cat, "c");
        let y = conv(&mut b, dc, 8, 4, "y");
        for t in [y, side] {
            let (_, d) = qdq(&mut b, t, &format!("out{t}"));
            b.output(d);
        }
        let g = b.finish().unwrap();
        let (f32, int8) = layouts(&g);
        assert!(int8[qa] && int8[qu] && int8[qp] && int8[qc]);
        assert!(f32[du] && f32[lin]);
        // The nearest Resize and the join read the bytes: no f32 Resize or Concat, and
        // the DequantizeLinears before them run only for other readers (the linear
        // Resize).
        assert!(!f32[up] && !f32[da] && !f32[cat] && !f32[dp]);
    }

    /// Pairs with nothing channels-last on either side (a float input quantized, average
    /// pooled and flattened) keep NCHW bytes, or the pairs would convert layouts there and back:
    /// the second pair's float input looks channels-last only while the first pair's
    /// bytes are, so the plan is made again after the first is dropped.
    #[test]
    fn pass_through_pairs_without_a_channels_last_side_stay_nchw() {
        let mut b = GraphBuilder::new("flat");
        let x = b.input_fixed("x", DType::F32, &[1, 4, 6, 6]);
        let (q1, d1) = qdq(&mut b, x, "x");
        let pool_attrs = [
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("strides", Attr::Ints(vec![2, 2])),
        ];
        let pool = b.node(OpKind::AveragePool, &[d1], &pool_attrs).unwrap();
        let (q2, d2) = qdq(&mut b, pool, "p");
        let flat = b.node(OpKind::Flatten, &[d2], &[]).unwrap();
        b.output(flat);
        let g = b.finish().unwrap();
        let (f32, int8) = layouts(&g);
        assert!(!int8[q1] && !int8[q2]);
        assert!(!f32[d1] && !f32[pool] && !f32[d2]);
    }
}
