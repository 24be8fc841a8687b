//! Lowering at init: a checked subgraph and its fusion plan become prepared steps, with
//! weights packed and every buffer allocated.

use std::borrow::Cow;

use baton_delegate_api::ir::{Graph, Node, NodeId, OpKind, Storage, TensorId};
use baton_delegate_api::shape::{normalize_axis, transpose_perm, ConvGeometry, PoolGeometry};
use baton_delegate_api::{Constants, DType, DelegateError};

mod attention;
mod bits;
mod half;
mod index;
mod integer;
mod ints;

use index::output_parts;
pub(crate) use signal::grid_sample_modes;
mod math;
mod ops;
mod quant;
mod signal;
mod tail;

use super::arena::{self, Lifetime};
use super::{CpuExecutable, IoDecl, Memory, Op, Step};
use crate::fusion::{chain_adds, matrix_view, Chain, FusedAdd, FusionPlan, Role};
use crate::gemm::{Activation, MicroKernel};
use crate::ops::affine_grid::AffineGridOp;
use crate::ops::bytes::{ByteMoveOp, Moved};
use crate::ops::causal_conv::CausalConvOp;
use crate::ops::col2im::Col2ImOp;
use crate::ops::conv::{ConvOp, ConvSpec};
use crate::ops::deform_conv::{DeformBias, DeformConvOp, DeformWeights};
use crate::ops::det::DetOp;
use crate::ops::elementwise::{Binary, BinaryOp, SoftmaxOp, Unary, UnaryOp};
use crate::ops::int::f16_to_f32;
use crate::ops::layout::{ConcatOp, TransposeOp};
use crate::ops::lstm::LstmOp;
use crate::ops::matmul::MatMulOp;
use crate::ops::max_unpool::MaxUnpoolOp;
use crate::ops::norm::{BlockOperand, LayerNormOp};
use crate::ops::pool::{GlobalAveragePoolOp, PoolKind, PoolOp};
use crate::ops::quant::ByteInputOp;
use crate::ops::roi_align::RoiAlignOp;
use crate::ops::select::BoolInputOp;
use crate::ops::sequence::ReverseSequenceOp;
use crate::ops::tensor::{
    reduced_axes, reduced_run, GatherOp, Indices, Reduce, ReduceMeanOp, SliceOp, SplitOp,
};
use crate::ops::{f32_view, EpOpSpec, EpilogueSpec, Operand, RunCtx, Slot, Src};
use crate::prepack::{Packs, Panel};
use crate::qgemm::QKernel;
use crate::quant::{
    find_bin_groups, find_concat_groups, find_groups, find_lut_groups, ints, QBinGroup, QCatGroup,
    QGroup, QLutGroup,
};
use crate::support::clip_bounds;

/// The int8 region of a graph and the layouts it and the f32 ops are held in.
struct Region {
    groups: Vec<QGroup>,
    bins: Vec<QBinGroup>,
    luts: Vec<QLutGroup>,
    cats: Vec<QCatGroup>,
    /// Per node: the group, element-wise group, table or join whose QuantizeLinear it is.
    group_at: Vec<Option<usize>>,
    bin_at: Vec<Option<usize>>,
    lut_at: Vec<Option<usize>>,
    cat_at: Vec<Option<usize>>,
    /// Per element-wise group: the table that gates it, and whether it is operand `b`.
    self_gate: Vec<Option<(usize, bool)>>,
    /// Per node: runs as part of another step (or not at all).
    absorbed: Vec<bool>,
    roles: Vec<Role>,
    /// Per node: lowered as part of an int8 group.
    qdq: Vec<bool>,
    /// Per tensor: the f32 tensors held NHWC (`layout.rs`), the 8-bit ones (`quant.rs`).
    nhwc: Vec<bool>,
    qnhwc: Vec<bool>,
}

impl Region {
    fn plan(graph: &Graph, plan: &FusionPlan, consts: &Constants<'_>) -> Region {
        // QDQ groups run as integer ops at their QuantizeLinear; their other nodes are
        // absorbed (a DequantizeLinear with other readers also runs on its own).
        let groups = find_groups(graph, consts);
        let mut absorbed = vec![false; graph.nodes.len()];
        let group_at = claim(&groups, |g| (g.nodes(), g.q), &mut absorbed);
        // QDQ Add/Mul of two int8 tensors, where no linear group took their nodes.
        let bins: Vec<_> = find_bin_groups(graph, consts)
            .into_iter()
            .filter(|g| unclaimed(&g.nodes(), &absorbed, &[&group_at]))
            .collect();
        let bin_at = claim(&bins, |g| (g.nodes(), g.q), &mut absorbed);
        // QDQ chains of float ops of one int8 tensor, where no group took their nodes.
        let luts: Vec<_> = find_lut_groups(graph, consts)
            .into_iter()
            .filter(|g| unclaimed(&g.nodes(), &absorbed, &[&group_at, &bin_at]))
            .collect();
        let mut lut_at = claim(&luts, |g| (g.nodes(), g.q), &mut absorbed);
        // QDQ Concats of 8-bit tensors, where no other group took their nodes.
        let cats: Vec<_> = find_concat_groups(graph, consts)
            .into_iter()
            .filter(|g| unclaimed(&g.nodes(), &absorbed, &[&group_at, &bin_at, &lut_at]))
            .collect();
        let cat_at = claim(&cats, |g| (g.nodes(), g.q), &mut absorbed);
        // An Add or Mul of an int8 tensor and a table of that same tensor (a QDQ SiLU: `x *
        // Sigmoid(x)`) runs as one table; the gate's own table, read by nothing else, does
        // not run. Per binary group: the table's group, and whether it is operand `b`.
        let consumers = graph.consumers();
        let self_gate: Vec<Option<(usize, bool)>> = bins
            .iter()
            .map(|g| {
                let shape = |t: TensorId| graph.tensors[t].static_shape();
                let same = shape(g.a).is_some() && shape(g.a) == shape(g.b);
                luts.iter().enumerate().find_map(|(j, l)| {
                    let s = graph.nodes[l.q].outputs[0];
                    let gate_is_b = match (g.a == l.x && g.b == s, g.b == l.x && g.a == s) {
                        (true, _) => true,
                        (_, true) => false,
                        _ => return None,
                    };
                    let dq = if gate_is_b { g.b_dq } else { g.a_dq };
                    let sole = consumers[s] == [dq.0] && dq.1 && !graph.outputs.contains(&s);
                    // A pool's or gather's byte is another's: no table of x's byte alone.
                    (same && sole && l.pre.is_none()).then_some((j, gate_is_b))
                })
            })
            .collect();
        for &(j, _) in self_gate.iter().flatten() {
            lut_at[luts[j].q] = None;
        }
        // A DequantizeLinear that groups read through (their integer ops read its input
        // bytes) and that nothing else reads need not run either: a QDQ model's residual
        // branch point feeds a convolution and an Add, both integer, and the f32 copy made for
        // neither cost a pass over the tensor (with a layout change) at every branch.
        let mut through = vec![0usize; graph.nodes.len()];
        let listed = groups
            .iter()
            .flat_map(|g| g.nodes())
            .chain(bins.iter().flat_map(|g| g.nodes()))
            .chain(luts.iter().flat_map(|g| g.nodes()))
            .chain(cats.iter().flat_map(|g| g.nodes()));
        for (n, a) in listed {
            if !a && graph.nodes[n].op == OpKind::DequantizeLinear {
                through[n] += 1;
            }
        }
        for (n, &k) in through.iter().enumerate() {
            let t = graph.nodes[n].outputs[0];
            if k > 0 && consumers[t].len() == k && !graph.outputs.contains(&t) {
                absorbed[n] = true;
            }
        }
        let roles = plan.roles(graph);
        let qdq: Vec<bool> = (0..graph.nodes.len())
            .map(|n| {
                absorbed[n]
                    || group_at[n].is_some()
                    || bin_at[n].is_some()
                    || lut_at[n].is_some()
                    || cat_at[n].is_some()
            })
            .collect();
        let standalone: Vec<bool> = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                matches!(node.op, OpKind::DequantizeLinear | OpKind::QuantizeLinear) && !qdq[n]
            })
            .collect();
        let mut excluded = vec![false; graph.tensors.len()];
        let (nhwc, int8) = loop {
            let int8 = quant::int8_nhwc(
                graph,
                &groups,
                &bins,
                &luts,
                &cats,
                &standalone,
                &qdq,
                &excluded,
            );
            let nhwc = super::layout::channels_last(graph, plan, &roles, &qdq, &int8.nhwc, consts);
            let drop = int8.ungrounded(&nhwc);
            if drop.is_empty() {
                break (nhwc, int8);
            }
            drop.into_iter().for_each(|t| excluded[t] = true);
        };
        Region {
            groups,
            bins,
            luts,
            cats,
            group_at,
            bin_at,
            lut_at,
            cat_at,
            self_gate,
            absorbed,
            roles,
            qdq,
            nhwc,
            qnhwc: int8.nhwc,
        }
    }
}

/// Marks the nodes each of `groups` absorbs (`parts`: its nodes, with whether each is
/// absorbed, and its QuantizeLinear); per node, the group whose QuantizeLinear it is.
fn claim<G>(
    groups: &[G],
    parts: impl Fn(&G) -> (Vec<(NodeId, bool)>, NodeId),
    absorbed: &mut [bool],
) -> Vec<Option<usize>> {
    let mut at = vec![None; absorbed.len()];
    for (i, g) in groups.iter().enumerate() {
        let (nodes, q) = parts(g);
        for (n, a) in nodes {
            absorbed[n] |= a;
        }
        at[q] = Some(i);
    }
    at
}

/// Whether none of `nodes` is absorbed or the QuantizeLinear of a group in `ats`.
fn unclaimed(nodes: &[(NodeId, bool)], absorbed: &[bool], ats: &[&[Option<usize>]]) -> bool {
    nodes
        .iter()
        .all(|&(n, _)| !absorbed[n] && ats.iter().all(|at| at[n].is_none()))
}

/// The f32 and 8-bit layout flags the lowering of `graph` holds its tensors in.
#[cfg(test)]
pub(crate) fn layouts(graph: &Graph) -> (Vec<bool>, Vec<bool>) {
    let consts = Constants::new(graph, &[]);
    let plan = FusionPlan::plan(graph, &consts);
    let region = Region::plan(graph, &plan, &consts);
    (region.nhwc, region.qnhwc)
}

/// Builds the executable of `graph`, whose nodes have all been checked as supported and
/// whose plan has been validated, taking its packed weights from `packs` (see
/// `prepack.rs`), which is handed back for the blob or the replay's check.
pub(crate) fn build<'g>(
    graph: &'g Graph,
    plan: &FusionPlan,
    consts: Constants<'g>,
    packs: Packs<'g>,
    kernel: &'static MicroKernel,
    qkernel: &'static QKernel,
    threads: usize,
) -> Result<(CpuExecutable, Packs<'g>), DelegateError> {
    let mut b = Builder {
        graph,
        consts,
        packs,
        kernel,
        qkernel,
        srcs: vec![None; graph.tensors.len()],
        slots: Vec::new(),
        step: 0,
        nhwc: Vec::new(),
        qnhwc: Vec::new(),
        bn_folds: Vec::new(),
    };
    if let [node] = &graph.nodes[..] {
        if baton_delegate_api::shape::has_value_dependent_shape(node.op) {
            // A partition of its own with bounded outputs: no arena, no steps.
            let dynamic = crate::ops::dynamic::DynamicNode::new(graph, &b.consts)?;
            let inputs = graph
                .inputs
                .iter()
                .map(|&t| b.decl(t))
                .collect::<Result<Vec<_>, _>>()?;
            let memory = Memory {
                slots: Vec::new(),
                arena: Vec::new(),
                lower_bound: 0,
            };
            let mut exec = CpuExecutable::new(
                inputs,
                Vec::new(),
                Vec::new(),
                memory,
                RunCtx::new(kernel, 1),
            );
            exec.dynamic = Some(Box::new(dynamic));
            return Ok((exec, b.packs));
        }
    }
    let mut inputs = Vec::with_capacity(graph.inputs.len());
    let mut steps = Vec::with_capacity(graph.nodes.len());
    for (i, &t) in graph.inputs.iter().enumerate() {
        let decl = b.decl(t)?;
        b.srcs[t] = Some(Src::Input(i));
        b.step = steps.len();
        // Bool inputs are widened to 0.0/1.0; 8-bit inputs are copied into the arena as
        // stored bytes (see `crate::qgemm`).
        if decl.dtype == DType::Bool {
            let out = b.output(t)?;
            steps.push(Step {
                op: Op::BoolInput(BoolInputOp { input: i }),
                out,
                node: format!("input '{}'", decl.name),
                direct: None,
            });
        } else if matches!(decl.dtype, DType::I8 | DType::U8) {
            let out = b.output(t)?;
            steps.push(Step {
                op: Op::ByteInput(ByteInputOp {
                    input: i,
                    dtype: decl.dtype,
                }),
                out,
                node: format!("input '{}'", decl.name),
                direct: None,
            });
        }
        inputs.push(decl);
    }
    let Region {
        groups,
        bins,
        luts,
        cats,
        group_at,
        bin_at,
        lut_at,
        cat_at,
        self_gate,
        mut absorbed,
        roles,
        qdq,
        nhwc,
        qnhwc,
    } = Region::plan(graph, plan, &b.consts);
    (b.nhwc, b.qnhwc) = (nhwc, qnhwc);
    // Multi-node activations (Erf GELUs, `patterns.rs`) outside fusion chains and QDQ
    // groups run as one pass at their last node; convolutions absorb the inference
    // BatchNormalization after them (and its activation); products apply the activation
    // that is the only reader of their result in their epilogue.
    let pad_folds = b.pad_folds(&qdq, &mut absorbed);
    let mut unary_at = b.single_passes(&roles, &qdq, &mut absorbed);
    b.bn_folds = b.conv_bn_folds(&roles, &qdq, &mut absorbed);
    let mut act_folds = b.act_folds(plan, &roles, &qdq, &mut absorbed, &mut unary_at);
    for (id, node) in graph.nodes.iter().enumerate() {
        // A convolution that takes in the Pad before it runs as its fold.
        let node = pad_folds[id].as_ref().unwrap_or(node);
        // Reads and writes recorded while lowering this node belong to the next step.
        b.step = steps.len();
        // An int8 group, element-wise group, join or table runs at its QuantizeLinear,
        // named after the node that starts it.
        let int8 = if let Some(i) = group_at[id] {
            Some((b.qlinear(&groups[i]), groups[i].anchor))
        } else if let Some(i) = bin_at[id] {
            let op = match self_gate[i] {
                Some((j, gate_is_b)) => b.qself_gate(&bins[i], &luts[j], gate_is_b),
                None => b.qbinary(&bins[i]),
            };
            Some((op, bins[i].op))
        } else if let Some(i) = cat_at[id] {
            Some((b.qconcat(&cats[i]), cats[i].op))
        } else if let Some(i) = lut_at[id] {
            let g = &luts[i];
            let first = g.pre.or(g.chain.first().copied()).unwrap_or(g.q);
            Some((b.qlut(g), first))
        } else {
            None
        };
        if let Some((op, first)) = int8 {
            let op =
                op.map_err(|e| DelegateError::invalid(format!("node {}: {e}", node.label())))?;
            let out = b.output(node.outputs[0])?;
            steps.push(Step {
                op,
                out,
                node: graph.nodes[first].label(),
                direct: None,
            });
            continue;
        }
        if let Some((x, f, nodes)) = unary_at[id].take() {
            let x = b
                .src(x)
                .map_err(|e| DelegateError::invalid(format!("node {}: {e}", node.label())))?;
            let out = b.output(node.outputs[0])?;
            steps.push(Step {
                op: Op::Unary(UnaryOp { x, f }),
                out,
                node: graph.nodes[nodes[0]].label(),
                direct: None,
            });
            continue;
        }
        if absorbed[id] {
            continue;
        }
        // A DequantizeLinear of a constant is a constant: computed here, once.
        if b.fold_dequantize(node) {
            continue;
        }
        if let Some(words) = b
            .constant_node(node)
            .map_err(|e| DelegateError::invalid(format!("node {}: {e}", node.label())))?
        {
            // Known at init: a constant slot, no step.
            let slot = b.slots.len();
            b.slots.push(Pending::Const(Panel::Owned(words)));
            b.srcs[node.outputs[0]] = Some(Src::Slot(slot));
            continue;
        }
        let reshape = matches!(
            node.op,
            OpKind::Reshape
                | OpKind::Flatten
                | OpKind::Squeeze
                | OpKind::Unsqueeze
                | OpKind::Identity
        ) || tail::is_view_cast(graph, node)
            || (node.op == OpKind::Transpose
                && super::layout::transpose_is_view(graph, id, &b.nhwc));
        if reshape && roles[id] == Role::Plain {
            // The data is unchanged: the output is a view of the input, no step, no copy.
            // The view reads nothing itself (its readers keep the data alive): a read
            // here kept the slot of a model's last step alive past it, so an output that
            // is a view of it (a Reshape or Transpose at the end) was copied out instead
            // of written in place.
            let src = match b.srcs[node.inputs[0]] {
                Some(src) => src,
                None => b
                    .src(node.inputs[0])
                    .map_err(|e| DelegateError::invalid(format!("node {}: {e}", node.label())))?,
            };
            b.srcs[node.outputs[0]] = Some(src);
            continue;
        }
        let act = act_folds[id].take();
        let plain = roles[id] == Role::Plain && b.bn_folds[id].is_none() && act.is_none();
        if plain && b.half_node(node, &mut steps)? {
            continue;
        }
        // A fused activation's last node is the step's last.
        let act_op = act.as_ref().map(|a| EpOpSpec::Act(a.f));
        let (op, last) = match roles[id] {
            Role::Absorbed => continue,
            Role::Plain => match b.bn_folds[id].take() {
                Some(fold) => (
                    b.conv_folded(node, &fold, act.as_ref()),
                    act.as_ref().map_or(fold.last, |a| a.last),
                ),
                None => {
                    let last = act.as_ref().map_or(id, |a| a.last);
                    let out = graph.nodes[last].outputs[0];
                    (b.lower(node, act_op.into_iter().collect(), out), last)
                }
            },
            Role::Anchor(c) => {
                let chain = plan.chains[c];
                let last = act.as_ref().map_or(chain.last(), |a| a.last);
                let fused = b.fused_ops(&chain).map(|mut f| {
                    f.extend(act_op);
                    f
                });
                let out = graph.nodes[last].outputs[0];
                (fused.and_then(|f| b.lower(node, f, out)), last)
            }
        };
        let op = op.map_err(|e| DelegateError::invalid(format!("node {}: {e}", node.label())))?;
        let out = match output_parts(&op) {
            Some(parts) => b.multi_output(&graph.nodes[last].outputs, &parts)?,
            None => b.output(graph.nodes[last].outputs[0])?,
        };
        steps.push(Step {
            op,
            out,
            node: node.label(),
            direct: None,
        });
    }
    // An f32 output whose slot one step writes and nothing else reads (no later step, no
    // other output) is written by that step straight into the caller's buffer (checked
    // before the reads below extend the slots' lifetimes to the end).
    for (k, &t) in graph.outputs.iter().enumerate() {
        let Some(Src::Slot(s)) = b.srcs[t] else {
            continue;
        };
        let Pending::Inter(life) = &b.slots[s] else {
            continue;
        };
        // Not when another output (the same tensor listed twice, a view) reads the slot.
        let once = graph
            .outputs
            .iter()
            .filter(|&&u| b.srcs[u] == Some(Src::Slot(s)))
            .count()
            == 1;
        if graph.tensors[t].dtype == DType::F32 && life.first == life.last && once {
            if let Some(step) = steps.get_mut(life.first).filter(|st| st.out == s) {
                step.direct = step.direct.or(Some(k));
            }
        }
    }
    let mut outputs = Vec::with_capacity(graph.outputs.len());
    for &t in &graph.outputs {
        let decl = b.decl(t)?;
        // i64 outputs are views of inputs or constants (two slots per element).
        let held = [
            DType::F32,
            DType::I8,
            DType::U8,
            DType::Bool,
            DType::I32,
            DType::I64,
            DType::F16,
            DType::U32,
            DType::U64,
            DType::I16,
            DType::U16,
        ];
        if !held.contains(&decl.dtype) {
            return Err(DelegateError::invalid(format!(
                "output '{}' is {}, not f32, f16, i8, u8, bool, i16, u16, i32, u32, i64 or u64",
                decl.name, decl.dtype
            )));
        }
        // The outputs are read after the last step.
        b.step = steps.len();
        let src = b.src(t).map_err(DelegateError::invalid)?;
        outputs.push((decl, src));
    }
    let memory = b.memory()?;
    let mut ctx = RunCtx::new(kernel, threads);
    for step in &steps {
        match &step.op {
            Op::MatMul(op) => op.reserve(&mut ctx),
            Op::Conv(op) => op.reserve(&mut ctx),
            Op::FloatReduce(op) => op.reserve(&mut ctx),
            Op::CumSum(op) => op.reserve(&mut ctx),
            Op::TopK(op) => op.reserve(&mut ctx),
            Op::Scatter(op) => op.reserve(&mut ctx),
            Op::Lstm(op) => op.reserve(&mut ctx),
            Op::QLinear(op) => op.reserve(&mut ctx),
            Op::Deconv(op) => op.reserve(&mut ctx),
            Op::Gru(op) => op.reserve(&mut ctx),
            Op::Rnn(op) => op.reserve(&mut ctx),
            Op::Attention(op) => op.reserve(&mut ctx),
            Op::Einsum(op) => op.reserve(&mut ctx),
            Op::IntProduct(op) => op.reserve(&mut ctx),
            Op::Det(op) => op.reserve(&mut ctx),
            Op::Col2Im(op) => op.reserve(&mut ctx),
            Op::Dft(op) => op.reserve(&mut ctx),
            Op::Stft(op) => op.reserve(&mut ctx),
            Op::LinearAttention(op) => op.reserve(&mut ctx),
            Op::DeformConv(op) => op.reserve(&mut ctx),
            Op::Affine(op) => op.reserve(&mut ctx),
            _ => {}
        }
    }
    let exec = CpuExecutable::new(inputs, outputs, steps, memory, ctx);
    Ok((exec, b.packs))
}

/// A slot while lowering: a copied constant, or an intermediate whose lifetime grows as
/// steps read it, placed in the arena once every step is known.
enum Pending {
    Const(Panel),
    Inter(Lifetime),
}

struct Builder<'g> {
    graph: &'g Graph,
    consts: Constants<'g>,
    packs: Packs<'g>,
    kernel: &'static MicroKernel,
    qkernel: &'static QKernel,
    /// Where each tensor is found at execute time, once known.
    srcs: Vec<Option<Src>>,
    slots: Vec<Pending>,
    /// The index of the step being lowered: intermediates' lifetimes are counted in steps.
    step: usize,
    /// Per tensor: held channels-last (see `layout.rs`).
    nhwc: Vec<bool>,
    /// Per 8-bit tensor: held channels-last (see `quant.rs`).
    qnhwc: Vec<bool>,
    /// Per node: the BatchNormalization (and activation) a convolution or transposed
    /// convolution absorbs.
    bn_folds: Vec<Option<tail::BnFold>>,
}

impl<'g> Builder<'g> {
    fn shape(&self, t: TensorId) -> Vec<usize> {
        self.graph.tensors[t].static_shape().unwrap_or_default()
    }

    fn decl(&self, t: TensorId) -> Result<IoDecl, DelegateError> {
        let d = &self.graph.tensors[t];
        let shape = d.static_shape().ok_or_else(|| {
            DelegateError::invalid(format!("tensor '{}' has a symbolic shape", d.name))
        })?;
        Ok(IoDecl {
            name: d.name.clone(),
            dtype: d.dtype,
            shape,
        })
    }

    /// A constant's values (borrowed when aligned, else copied).
    fn const_f32(&self, t: TensorId) -> Option<Cow<'g, [f32]>> {
        if !self.graph.tensors[t].is_const() {
            return None;
        }
        let bytes = self.consts.bytes(t)?;
        let dtype = self.graph.tensors[t].dtype;
        if dtype == DType::Bool {
            // Bools are held as 0.0/1.0 (see `ops/select.rs`).
            return Some(Cow::Owned(
                bytes.iter().map(|&b| (b != 0) as u8 as f32).collect(),
            ));
        }
        if dtype == DType::F16 {
            // Widened exactly (f16 compute, `half.rs`).
            let v = bytes.chunks_exact(2);
            return Some(Cow::Owned(
                v.map(|h| f16_to_f32(u16::from_le_bytes([h[0], h[1]])))
                    .collect(),
            ));
        }
        if matches!(dtype, DType::I8 | DType::U8) {
            let v = ints(dtype, bytes)?;
            return Some(Cow::Owned(v.into_iter().map(|x| x as f32).collect()));
        }
        Some(match f32_view(bytes) {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(bytemuck::pod_collect_to_vec(bytes)),
        })
    }

    /// `t` as an operand an op may pack: its constant values, or where to read it.
    fn operand(&mut self, t: TensorId) -> Result<Operand<'g>, String> {
        if let Some(data) = self.const_f32(t) {
            return Ok(Operand::Const(data));
        }
        // A folded constant (a dequantized weight) is packed like one.
        if let Some(Src::Slot(s)) = self.srcs[t] {
            if let Pending::Const(data) = &self.slots[s] {
                return Ok(Operand::Const(Cow::Owned(data.to_vec())));
            }
        }
        Ok(Operand::Runtime(self.src(t)?))
    }

    /// Where `t` is read from at execute time; a constant is copied into a slot the first
    /// time it is asked for. An intermediate read here stays live until this step.
    fn src(&mut self, t: TensorId) -> Result<Src, String> {
        if let Some(s) = self.srcs[t] {
            self.read(s);
            return Ok(s);
        }
        let name = &self.graph.tensors[t].name;
        let data = if matches!(
            self.graph.tensors[t].dtype,
            DType::I8 | DType::U8 | DType::F16 | DType::I16 | DType::U16
        ) {
            self.byte_const(t).map(Cow::Owned)
        } else {
            self.const_f32(t)
        }
        .ok_or_else(|| format!("tensor '{name}' is read before it is written"))?;
        let view = match self.graph.tensors[t].data {
            Some(Storage::External(i)) => Some(i),
            _ => None,
        };
        let data = self.packs.constant(view, data);
        let slot = self.slots.len();
        self.slots.push(Pending::Const(data));
        self.srcs[t] = Some(Src::Slot(slot));
        Ok(Src::Slot(slot))
    }

    /// Extends the lifetime of the intermediate behind `src` to the current step.
    fn read(&mut self, src: Src) {
        let (Src::Slot(slot) | Src::Part { slot, .. }) = src else {
            return;
        };
        if let Pending::Inter(life) = &mut self.slots[slot] {
            life.last = life.last.max(self.step);
        }
    }

    /// A new intermediate of `len` floats, written by the current step.
    fn intermediate(&mut self, len: usize) -> usize {
        let slot = self.slots.len();
        self.slots.push(Pending::Inter(Lifetime {
            len,
            first: self.step,
            last: self.step,
        }));
        slot
    }

    /// The arena buffer for the output tensor `t`.
    fn output(&mut self, t: TensorId) -> Result<usize, DelegateError> {
        // 8- and 16-bit tensors are held as their stored bytes.
        let narrow = match self.graph.tensors[t].dtype {
            DType::I8 | DType::U8 => Some(1),
            DType::F16 | DType::I16 | DType::U16 => Some(2),
            _ => None,
        };
        let len = checked_len(&self.held_shape(t))
            .and_then(|n| match narrow {
                Some(size) => n.checked_mul(size).map(Self::byte_words),
                None => Some(n),
            })
            .ok_or_else(|| {
                DelegateError::new(format!(
                    "tensor '{}' is too large to address",
                    self.graph.tensors[t].name
                ))
            })?;
        let slot = self.intermediate(len);
        self.srcs[t] = Some(Src::Slot(slot));
        Ok(slot)
    }

    /// One arena buffer holding all the `parts` of a multi-output op; the node's
    /// `outputs` (a prefix of its possible outputs) become views of their parts.
    fn multi_output(
        &mut self,
        outputs: &[TensorId],
        parts: &[usize],
    ) -> Result<usize, DelegateError> {
        let len = parts
            .iter()
            .try_fold(0usize, |a, &p| a.checked_add(p))
            .ok_or_else(|| DelegateError::new("a multi-output op too large to address"))?;
        let slot = self.intermediate(len);
        let mut offset = 0;
        for (&t, &len) in outputs.iter().zip(parts) {
            self.srcs[t] = Some(Src::Part { slot, offset, len });
            offset += len;
        }
        Ok(slot)
    }

    /// Places the intermediates in one arena and allocates it.
    fn memory(&mut self) -> Result<Memory, DelegateError> {
        let lives: Vec<Lifetime> = self
            .slots
            .iter()
            .filter_map(|s| match s {
                Pending::Inter(l) => Some(*l),
                Pending::Const(_) => None,
            })
            .collect();
        let plan = arena::plan(&lives)
            .ok_or_else(|| DelegateError::new("the intermediates are too large to address"))?;
        let mut arena = Vec::new();
        arena.try_reserve_exact(plan.len).map_err(|_| {
            DelegateError::new(format!(
                "cannot allocate an arena of {} bytes",
                plan.len.saturating_mul(4)
            ))
        })?;
        // Debug builds fill the arena with NaN so that an op relying on a zeroed or
        // stale output shows up in every test; release builds take zeroed pages.
        arena.resize(
            plan.len,
            if cfg!(debug_assertions) {
                f32::NAN
            } else {
                0.0
            },
        );
        let mut offsets = plan.offsets.iter();
        let slots = std::mem::take(&mut self.slots)
            .into_iter()
            .map(|s| match s {
                Pending::Const(data) => Slot::Const(data),
                Pending::Inter(l) => Slot::Arena {
                    offset: *offsets.next().expect("one offset per intermediate"),
                    len: l.len,
                },
            })
            .collect();
        Ok(Memory {
            slots,
            arena,
            lower_bound: plan.lower_bound,
        })
    }

    /// A constant's i64 values.
    fn const_i64s(&self, t: TensorId) -> Option<Vec<i64>> {
        self.consts.bytes(t)?;
        self.consts.i64s(t)
    }

    /// The epilogue ops of a chain's fused Add and activation.
    fn fused_ops(&mut self, chain: &Chain) -> Result<Vec<EpOpSpec>, String> {
        let mut ops = Vec::new();
        for add in chain_adds(self.graph, chain, &self.consts).ok_or("no fused Add")? {
            ops.push(match add {
                FusedAdd::Bias(c, rs, cs) => EpOpSpec::Add {
                    src: self.src(c)?,
                    rs,
                    cs,
                    scale: 1.0,
                },
                FusedAdd::Residual(t) => EpOpSpec::Residual {
                    src: self.src(t)?,
                    rs: *self.shape(t).last().ok_or("a rank-0 residual")?,
                },
            });
        }
        if let Some(act) = chain.activation {
            ops.push(match self.activation(&self.graph.nodes[act])? {
                Unary::Relu => EpOpSpec::Relu,
                Unary::Clip { min, max } => EpOpSpec::Clip { min, max },
                other => return Err(format!("{other:?} cannot be fused")),
            });
        }
        Ok(ops)
    }

    /// The element-wise function of a one-input float op, as its step computes it
    /// (`None` for other ops, and for a Clip whose bounds are not constant).
    pub(super) fn unary(&self, node: &Node) -> Option<Unary> {
        if !crate::ops::elementwise::is_unary_op(node.op) {
            return None;
        }
        Some(match node.op {
            OpKind::Relu | OpKind::Sigmoid | OpKind::Tanh | OpKind::Clip => {
                self.activation(node).ok()?
            }
            OpKind::Erf => Unary::Erf,
            OpKind::Sqrt => Unary::Sqrt,
            OpKind::Exp => Unary::Exp,
            OpKind::Log => Unary::Log,
            OpKind::Neg => Unary::Neg,
            OpKind::Abs => Unary::Abs,
            OpKind::LeakyRelu => Unary::LeakyRelu {
                alpha: node.attr_float("alpha", 0.01),
            },
            OpKind::HardSigmoid => Unary::HardSigmoid {
                alpha: node.attr_float("alpha", 0.2),
                beta: node.attr_float("beta", 0.5),
            },
            OpKind::HardSwish => Unary::HardSwish,
            _ => return None,
        })
    }

    fn activation(&self, node: &Node) -> Result<Unary, String> {
        Ok(match node.op {
            OpKind::Relu => Unary::Relu,
            OpKind::Sigmoid => Unary::Sigmoid,
            OpKind::Tanh => Unary::Tanh,
            _ => {
                let (min, max) = clip_bounds(self.graph, node, &self.consts)
                    .map_err(|_| "Clip bounds are not constant".to_string())?;
                Unary::Clip { min, max }
            }
        })
    }

    /// Prepares one node, with `fused` ops appended to its epilogue; `out` is the tensor
    /// the op writes (the last of its chain).
    fn lower(&mut self, node: &Node, fused: Vec<EpOpSpec>, out: TensorId) -> Result<Op, String> {
        let op = self.lower_op(node, fused, out)?;
        self.over_bytes(node, op)
    }

    fn lower_op(&mut self, node: &Node, fused: Vec<EpOpSpec>, out: TensorId) -> Result<Op, String> {
        let shapes: Vec<Vec<usize>> = node.inputs.iter().map(|&t| self.shape(t)).collect();
        let out_shape = self.shape(node.outputs[0]);
        if let Some(op) = self.int_node(node, &shapes)? {
            return Ok(op);
        }
        let input = |i: usize| node.inputs[i];
        Ok(match node.op {
            OpKind::MatMul => {
                let a = self.src(input(0))?;
                let b = self.operand(input(1))?;
                let epilogue = EpilogueSpec { ops: fused };
                Op::MatMul(MatMulOp::matmul(
                    &mut self.packs,
                    self.kernel,
                    a,
                    &shapes[0],
                    b,
                    &shapes[1],
                    epilogue,
                ))
            }
            OpKind::Gemm => {
                let a = self.src(input(0))?;
                let b = self.operand(input(1))?;
                // With beta = 0, C is not read at all (as the reference and ONNX Runtime do),
                // so a NaN or Inf in C cannot leak into the result.
                let beta = node.attr_float("beta", 1.0);
                let c = match node.inputs.get(2) {
                    Some(&t) if beta != 0.0 => {
                        let (rs, cs) = matrix_view(&out_shape, &shapes[2])
                            .ok_or("C does not broadcast to [M, N]")?;
                        Some((self.src(t)?, rs, cs, beta))
                    }
                    _ => None,
                };
                Op::MatMul(MatMulOp::gemm(
                    &mut self.packs,
                    self.kernel,
                    a,
                    &shapes[0],
                    node.attr_int("transA", 0) != 0,
                    b,
                    &shapes[1],
                    node.attr_int("transB", 0) != 0,
                    node.attr_float("alpha", 1.0),
                    c,
                    &fused,
                ))
            }
            OpKind::Conv => self.conv(node, &shapes, &fused, out, None)?,
            OpKind::DeformConv => {
                let g = ConvGeometry::new(node, &shapes[0], &shapes[1])?;
                let taps: usize = g.window.kernel.iter().product();
                let cg = g.in_channels / g.group;
                let weights = match self.const_f32(input(1)) {
                    Some(w) => {
                        let mut v = vec![0.0; w.len()];
                        DeformConvOp::reorder(&w, g.out_channels, cg, taps, &mut v);
                        DeformWeights::Reordered(v)
                    }
                    None => DeformWeights::Runtime(self.src(input(1))?),
                };
                let bias = match node.inputs.get(3) {
                    Some(&t) if shapes[3].iter().product::<usize>() > 0 => {
                        Some(match self.const_f32(t) {
                            Some(b) => DeformBias::Const(b.into_owned()),
                            None => DeformBias::Runtime(self.src(t)?),
                        })
                    }
                    _ => None,
                };
                let mask = match node.inputs.get(4) {
                    Some(&t) if shapes[4].iter().product::<usize>() > 0 => Some(self.src(t)?),
                    _ => None,
                };
                Op::DeformConv(DeformConvOp {
                    x: self.src(input(0))?,
                    offsets: self.src(input(2))?,
                    mask,
                    weights,
                    bias,
                    batch: g.batch,
                    in_channels: g.in_channels,
                    out_channels: g.out_channels,
                    group: g.group,
                    offset_groups: node.attr_int("offset_group", 1).max(1) as usize,
                    in_spatial: g.in_spatial.clone(),
                    out_spatial: g.out_spatial.clone(),
                    kernel: g.window.kernel.clone(),
                    strides: g.window.strides.clone(),
                    dilations: g.window.dilations.clone(),
                    pad_begin: g.window.pad_begin.clone(),
                })
            }
            OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => {
                if let Some(op) = self.int_binary(node, &shapes, &out_shape)? {
                    return Ok(op);
                }
                let op = match node.op {
                    OpKind::Add => Binary::Add,
                    OpKind::Sub => Binary::Sub,
                    OpKind::Mul => Binary::Mul,
                    _ => Binary::Div,
                };
                let (a, b) = (self.src(input(0))?, self.src(input(1))?);
                if self.nhwc[node.outputs[0]] {
                    // Held channels-last: an operand broadcast over the channels or the
                    // pixels alone is walked at the strides of that layout.
                    let rank = out_shape.len();
                    let nhwc = |s: &[usize]| super::layout::nhwc_shape(s, rank);
                    let (sa, sb) = (nhwc(&shapes[0]), nhwc(&shapes[1]));
                    Op::Binary(BinaryOp::new(op, a, &sa, b, &sb, &nhwc(&out_shape)))
                } else {
                    Op::Binary(BinaryOp::new(op, a, &shapes[0], b, &shapes[1], &out_shape))
                }
            }
            OpKind::Relu | OpKind::Clip | OpKind::Sigmoid | OpKind::Tanh => Op::Unary(UnaryOp {
                x: self.src(input(0))?,
                f: self.activation(node)?,
            }),
            OpKind::Softmax | OpKind::LogSoftmax => {
                let axis = normalize_axis(node.attr_int("axis", -1), shapes[0].len())?;
                let log = node.op == OpKind::LogSoftmax;
                Op::Softmax(SoftmaxOp::new(self.src(input(0))?, &shapes[0], axis, log))
            }
            OpKind::Erf
            | OpKind::Sqrt
            | OpKind::Exp
            | OpKind::Log
            | OpKind::Neg
            | OpKind::Abs
            | OpKind::LeakyRelu
            | OpKind::HardSigmoid
            | OpKind::HardSwish => Op::Unary(UnaryOp {
                x: self.src(input(0))?,
                f: self.unary(node).ok_or("not a unary op")?,
            }),
            OpKind::QuantizeLinear | OpKind::DequantizeLinear => {
                self.quant_node(node, &shapes[0])?
            }
            OpKind::ReduceMean => self.reduce(node, &shapes[0], &out_shape, Reduce::Mean)?,
            OpKind::LayerNormalization => self.layer_norm(node, &shapes)?,
            OpKind::Gather => {
                let x = &shapes[0];
                let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
                let t = input(1);
                let dtype = self.graph.tensors[t].dtype;
                let constant = self.graph.tensors[t].is_const();
                let indices = match self.consts.bytes(t) {
                    Some(bytes) if constant && dtype == DType::I32 => Indices::Const(
                        bytes
                            .chunks_exact(4)
                            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64)
                            .collect(),
                    ),
                    Some(_) if constant => {
                        Indices::Const(self.const_i64s(t).ok_or("unreadable Gather indices")?)
                    }
                    _ => match self.srcs[t] {
                        Some(Src::Input(index)) => Indices::Input {
                            index,
                            dtype: self.graph.tensors[t].dtype,
                        },
                        _ => return Err("Gather indices are neither constant nor an input".into()),
                    },
                };
                Op::Gather(GatherOp {
                    x: self.src(input(0))?,
                    indices,
                    outer: x[..axis].iter().product(),
                    axis: x[axis],
                    inner: x[axis + 1..].iter().product::<usize>() * self.words(input(0)),
                })
            }
            OpKind::Slice => {
                let mut axes = self.slice_axes(node, &shapes[0])?;
                let mut x = self.held_shape(input(0));
                // Held NHWC (the layout plan's f32 rank-3/4 Slice): the same slice of
                // the tensor as held, along the axes where the logical ones lie.
                if self.nhwc[input(0)] {
                    let rank = x.len();
                    axes.iter_mut().for_each(|a| a.0 = nhwc_axis(a.0, rank));
                    x[1..].rotate_left(1);
                }
                Op::Slice(SliceOp::new(self.src(input(0))?, &x, &axes))
            }
            OpKind::Split => {
                let mut x = shapes[0].clone();
                let logical = normalize_axis(node.attr_int("axis", 0), x.len())?;
                let mut axis = logical;
                // Held NHWC, as Slice: YOLOv8's C2f blocks split a conv's channels.
                if self.nhwc[input(0)] {
                    axis = nhwc_axis(axis, x.len());
                    x[1..].rotate_left(1);
                }
                let inner = x[axis + 1..].iter().product::<usize>() * self.words(input(0));
                let parts = node
                    .outputs
                    .iter()
                    .map(|&t| self.shape(t)[logical] * inner)
                    .collect();
                Op::Split(SplitOp {
                    x: self.src(input(0))?,
                    outer: x[..axis].iter().product(),
                    row: x[axis] * inner,
                    parts,
                })
            }
            OpKind::LSTM => self.lstm(node, &shapes)?,
            OpKind::MaxPool | OpKind::AveragePool => {
                let geometry = PoolGeometry::new(node, &shapes[0])?;
                let kind = if node.op == OpKind::MaxPool {
                    PoolKind::Max
                } else {
                    PoolKind::Average {
                        include_pad: geometry.count_include_pad,
                    }
                };
                let op = PoolOp::new(self.src(input(0))?, kind, &shapes[0], &geometry);
                // The layout plan holds a 2-D pool's input and output NHWC together.
                Op::Pool(match self.nhwc[input(0)] {
                    true => op.channels_last(shapes[0][1]),
                    false => op,
                })
            }
            OpKind::GlobalAveragePool => Op::GlobalAveragePool(GlobalAveragePoolOp {
                x: self.src(input(0))?,
                planes: shapes[0][..2].iter().product(),
                plane_len: shapes[0][2..].iter().product(),
                channels_last: self.nhwc[input(0)].then_some(shapes[0][1]),
            }),
            OpKind::Transpose => {
                let mut perm = transpose_perm(node, shapes[0].len())?;
                if self.words(input(0)) == 2 {
                    // An i64's two words stay together, last.
                    perm.push(perm.len());
                }
                let x = self.held_shape(input(0));
                Op::Transpose(TransposeOp::new(self.src(input(0))?, &x, &perm))
            }
            OpKind::Concat => {
                let rank = shapes[0].len();
                let mut axis = normalize_axis(node.attr_int("axis", 0), rank)?;
                // Held NHWC (the layout plan holds all of a Concat's tensors so, or none):
                // the same concatenation of the tensors as they are held, along the axis
                // where the logical one lies (channels last, the spatial axes one earlier).
                let nhwc = self.nhwc[node.outputs[0]];
                let held = |b: &Self, t: TensorId| {
                    let s = b.held_shape(t);
                    match nhwc {
                        true => [&s[..1], &s[2..], &s[1..2]].concat(),
                        false => s,
                    }
                };
                if nhwc {
                    axis = nhwc_axis(axis, rank);
                }
                let parts = node
                    .inputs
                    .iter()
                    .map(|&t| Ok((self.src(t)?, held(self, t))))
                    .collect::<Result<Vec<_>, String>>()?;
                Op::Concat(ConcatOp::new(&parts, axis))
            }
            OpKind::Attention => self.attention(node, &shapes)?,
            OpKind::LinearAttention => self.linear_attention(node, &shapes)?,
            OpKind::RotaryEmbedding => self.rotary(node, &shapes)?,
            OpKind::Einsum => self.einsum(node, &shapes)?,
            OpKind::GridSample => self.grid_sample(node, &shapes)?,
            OpKind::DFT => self.dft(node, &shapes)?,
            OpKind::STFT => self.stft(node, &shapes)?,
            OpKind::MelWeightMatrix => self.mel_weight_matrix(node, &out_shape)?,
            OpKind::RoiAlign => {
                let x = &shapes[0];
                Op::RoiAlign(RoiAlignOp {
                    x: self.src(input(0))?,
                    rois: self.src(input(1))?,
                    indices: self.src(input(2))?,
                    dims: [x[0], x[1], x[2], x[3]],
                    count: shapes[1][0],
                    params: baton_delegate_api::shape::roi_align_params(node)?,
                })
            }
            OpKind::MatMulInteger | OpKind::ConvInteger => self.int_product(node, &shapes)?,
            OpKind::Col2Im => {
                let image = &out_shape[2..];
                let block: Vec<usize> = self
                    .const_i64s(input(2))
                    .ok_or("Col2Im block_shape is not a constant")?
                    .iter()
                    .map(|&b| b as usize)
                    .collect();
                let g =
                    baton_delegate_api::shape::col2im_geometry(node, &shapes[0], image, &block)?;
                let ints = self.graph.tensors[input(0)].dtype == DType::I32;
                Op::Col2Im(Col2ImOp::new(
                    self.src(input(0))?,
                    out_shape[0] * out_shape[1],
                    image,
                    &block,
                    &g,
                    ints,
                )?)
            }
            OpKind::MaxUnpool => {
                let unpooled = baton_delegate_api::shape::max_unpool_shape(node, &shapes[0])?;
                let out_strides = (unpooled != out_shape).then(|| {
                    let mut s = vec![1; out_shape.len()];
                    for d in (0..out_shape.len().saturating_sub(1)).rev() {
                        s[d] = s[d + 1] * out_shape[d + 1];
                    }
                    s
                });
                Op::MaxUnpool(MaxUnpoolOp {
                    x: self.src(input(0))?,
                    indices: self.src(input(1))?,
                    len: shapes[0].iter().product(),
                    unpooled,
                    out_strides,
                    out_len: out_shape.iter().product(),
                })
            }
            OpKind::Det => {
                let x = &shapes[0];
                let n = x[x.len() - 1];
                Op::Det(DetOp {
                    x: self.src(input(0))?,
                    count: x[..x.len() - 2].iter().product(),
                    n,
                })
            }
            OpKind::AffineGrid => {
                // The output [N, spatial..., r]: its shape carries the constant size.
                let r = shapes[0][1];
                let spatial = out_shape[1..=r].to_vec();
                Op::AffineGrid(AffineGridOp::new(
                    self.src(input(0))?,
                    shapes[0][0],
                    spatial,
                    node.attr_int("align_corners", 0) != 0,
                ))
            }
            OpKind::CausalConvWithState => {
                let (x, w) = (&shapes[0], &shapes[1]);
                // A 0-element operand stands for an omitted one.
                let given = |i: usize| {
                    shapes
                        .get(i)
                        .filter(|s| s.iter().product::<usize>() > 0)
                        .map(|_| node.inputs[i])
                };
                let (bias, past) = (given(2), given(3));
                Op::CausalConv(CausalConvOp {
                    x: self.src(input(0))?,
                    w: self.src(input(1))?,
                    bias: bias.map(|t| self.src(t)).transpose()?,
                    past: past.map(|t| self.src(t)).transpose()?,
                    lines: x[0] * x[1],
                    channels: x[1],
                    len: x[2],
                    k: w[2],
                    silu: node.attr_str("activation", "none") != "none",
                })
            }
            OpKind::ReverseSequence => {
                let x = &shapes[0];
                let (xt, lt) = (node.inputs[0], node.inputs[1]);
                let size = tail::held_size(self.graph.tensors[xt].dtype);
                Op::ReverseSequence(ReverseSequenceOp {
                    x: self.src(xt)?,
                    lens: self.src(lt)?,
                    d0: x[0],
                    d1: x[1],
                    batch_major: node.attr_int("batch_axis", 1) == 0,
                    run: x[2..].iter().product::<usize>() * size,
                })
            }
            _ => match self.lower_tail(node, &shapes, &out_shape)? {
                Some(op) => op,
                None => {
                    return Err(format!(
                        "{} is not implemented by the CPU delegate",
                        node.op
                    ))
                }
            },
        })
    }
}

/// The element count of a shape, `None` when it overflows.
fn checked_len(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// The `clip` attribute of an LSTM, GRU or RNN (its absolute value bounds the gates, as in
/// the reference), or `None` without one; a NaN bound is refused here, where it names the
/// node, rather than reaching the kernels' clamps.
fn recurrent_clip(node: &Node) -> Result<Option<f32>, String> {
    if !node.attrs.contains_key("clip") {
        return Ok(None);
    }
    let clip = node.attr_float("clip", 0.0);
    if clip.is_nan() {
        return Err(format!("{}: clip is NaN", node.label()));
    }
    Ok(Some(clip.abs()))
}

/// Where logical axis `axis` of a rank-`rank` tensor held channels-last lies: the
/// channels last, the spatial axes one earlier.
pub(super) fn nhwc_axis(axis: usize, rank: usize) -> usize {
    match axis {
        0 => 0,
        1 => rank - 1,
        a => a - 1,
    }
}
