//! Lowering of "the tail" every real model carries besides its convolutions and GEMMs:
//! comparisons, logic and Where, Pow, Cast, BatchNormalization, ReduceSum/ReduceMax,
//! Pad, Expand, Tile, Resize and ConvTranspose.

use super::*;
use crate::ops::affine::{batch_norm_factors, AffineOp, RunStats};
use crate::ops::bits::{BitCastKind, BitCastOp};
use crate::ops::deconv::{DeconvGeom, DeconvOp};
use crate::ops::elementwise::PowIntOp;
use crate::ops::generate::range_bytes;
use crate::ops::gru::{GruOp, GruSpec};
use crate::ops::int::{CastOp, Held};
use crate::ops::pad::{axis_map, PadMode, PadOp};
use crate::ops::resize::{linear_taps, nearest_map, LinearResizeOp, ResizeMode, Rounding};
use crate::ops::rnn::{RnnOp, RnnSpec, SeqLens};
use crate::ops::select::{IntCompareOp, WhereOp};
use crate::ops::window::window_bytes;
use crate::patterns::{find_activations, find_gelus};
use baton_delegate_api::ir::{Attr, NodeId};
use baton_delegate_api::shape::rnn_activations;

/// A convolution's absorbed inference BatchNormalization, and the Relu or Clip after it.
#[derive(Clone, Debug)]
pub(super) struct BnFold {
    pub bn: NodeId,
    pub activation: Option<NodeId>,
    /// The last absorbed node, whose output the convolution writes.
    pub last: NodeId,
}

/// A multi-node activation run as one step: its input, its function and its nodes (the
/// first first).
pub(super) type SinglePass = (TensorId, Unary, Vec<NodeId>);

/// The activation a product applies in its epilogue: the last of its nodes (whose output
/// the product writes instead of its own) and the function.
#[derive(Clone, Debug)]
pub(super) struct ActFold {
    pub last: NodeId,
    pub f: Activation,
}

/// The bytes one element of `dtype` takes as held: its stored byte (8-bit), its 2 bytes
/// (f16, i16, u16), an i64's or u64's two words, else one word (f32, i32, u32, and bool
/// as 0.0/1.0).
pub(super) fn held_size(dtype: DType) -> usize {
    match dtype {
        DType::I8 | DType::U8 => 1,
        DType::F16 | DType::I16 | DType::U16 => 2,
        DType::I64 | DType::U64 => 8,
        _ => 4,
    }
}

impl Builder<'_> {
    /// The f32 slots one element of `t` takes: two for an i64 or u64, else one.
    pub(super) fn words(&self, t: TensorId) -> usize {
        if matches!(self.graph.tensors[t].dtype, DType::I64 | DType::U64) {
            2
        } else {
            1
        }
    }

    /// `t`'s shape as its slots hold it: an i64 or u64 gains a last axis of its two words.
    pub(super) fn held_shape(&self, t: TensorId) -> Vec<usize> {
        let mut s = self.shape(t);
        if self.words(t) == 2 {
            s.push(2);
        }
        s
    }

    /// The multi-node activations run as one pass, at their last node: `(input, function,
    /// nodes)`, the first node first. Their nodes are marked `absorbed`; those in fusion
    /// chains or QDQ groups, or whose input and output would not share a layout, are left
    /// alone.
    pub(super) fn single_passes(
        &self,
        roles: &[Role],
        qdq: &[bool],
        absorbed: &mut [bool],
    ) -> Vec<Option<SinglePass>> {
        let graph = self.graph;
        let mut at = vec![None; graph.nodes.len()];
        let gelus = find_gelus(graph, &self.consts).into_iter().map(|g| {
            let f = Unary::Gelu {
                divide: g.divide,
                c: g.c,
            };
            (g.nodes, g.last, g.x, f)
        });
        let others = find_activations(graph, &self.consts)
            .into_iter()
            .map(|a| (a.nodes, a.last, a.x, a.f));
        for (nodes, last, x, f) in gelus.chain(others) {
            let free = nodes
                .iter()
                .all(|&n| roles[n] == Role::Plain && !qdq[n] && !absorbed[n]);
            let out = graph.nodes[last].outputs[0];
            if free && self.nhwc[x] == self.nhwc[out] {
                for &n in &nodes {
                    absorbed[n] = true;
                }
                at[last] = Some((x, f, nodes));
            }
        }
        at
    }

    /// Per node: the activation a Conv, MatMul or Gemm applies in its product's epilogue
    /// (`gemm/activation.rs`), when it is the only reader of what the node's step writes
    /// (the node's output, or the last of its fusion chain or folded BatchNormalization):
    /// one node (Sigmoid, HardSwish, HardSigmoid, LeakyRelu, Gelu) or one of the
    /// multi-node activations of `single_passes` (Erf GELU, SiLU, `x * HardSigmoid(x)`),
    /// which are then taken from `unary_at`. The activation computes what its own step
    /// would, so the output's bits do not change. Its nodes are marked `absorbed`.
    pub(super) fn act_folds(
        &self,
        plan: &FusionPlan,
        roles: &[Role],
        qdq: &[bool],
        absorbed: &mut [bool],
        unary_at: &mut [Option<SinglePass>],
    ) -> Vec<Option<ActFold>> {
        let graph = self.graph;
        let consumers = graph.consumers();
        let mut owner = vec![None; graph.nodes.len()];
        for (last, pass) in unary_at.iter().enumerate() {
            for &n in pass.iter().flat_map(|p| &p.2) {
                owner[n] = Some(last);
            }
        }
        let f32_out = |n: NodeId| graph.tensors[graph.nodes[n].outputs[0]].dtype == DType::F32;
        let mut folds = vec![None; graph.nodes.len()];
        for (id, node) in graph.nodes.iter().enumerate() {
            if !matches!(node.op, OpKind::Conv | OpKind::MatMul | OpKind::Gemm)
                || qdq[id]
                || absorbed[id]
                || !f32_out(id)
                || node
                    .inputs
                    .iter()
                    .any(|&t| graph.tensors[t].dtype == DType::F16)
            {
                continue;
            }
            let last = match roles[id] {
                Role::Anchor(c) => plan.chains[c].last(),
                Role::Plain => self.bn_folds[id].as_ref().map_or(id, |f| f.last),
                Role::Absorbed => continue,
            };
            let t = graph.nodes[last].outputs[0];
            let mut readers = consumers[t].clone();
            readers.sort_unstable();
            readers.dedup();
            if readers.is_empty() || graph.outputs.contains(&t) {
                continue;
            }
            let found = match owner[readers[0]] {
                // A multi-node activation of `t` whose nodes are all of `t`'s readers.
                Some(l) => unary_at[l]
                    .as_ref()
                    .filter(|p| p.0 == t && readers.iter().all(|r| p.2.contains(r)))
                    .and_then(|p| Some((p.2.clone(), l, p.1.activation()?))),
                // One activation node, `t`'s only reader.
                None => match readers[..] {
                    [r] if roles[r] == Role::Plain && !qdq[r] && !absorbed[r] && f32_out(r) => {
                        let f = match graph.nodes[r].op {
                            OpKind::Gelu => (graph.nodes[r].attr_str("approximate", "none")
                                != "tanh")
                                .then_some(Unary::GeluErf),
                            _ => self.unary(&graph.nodes[r]),
                        };
                        f.and_then(|f| f.activation()).map(|f| (vec![r], r, f))
                    }
                    _ => None,
                },
            };
            let Some((nodes, act_last, f)) = found else {
                continue;
            };
            if self.nhwc[t] != self.nhwc[graph.nodes[act_last].outputs[0]] {
                continue;
            }
            for &n in &nodes {
                absorbed[n] = true;
            }
            unary_at[act_last] = None;
            folds[id] = Some(ActFold { last: act_last, f });
        }
        folds
    }

    /// Per node: the BatchNormalization (constant statistics, as `supports` requires) a
    /// convolution or transposed convolution with constant weights absorbs when it is its
    /// only reader, with (after a convolution) the Relu or Clip that is the
    /// BatchNormalization's only reader. The absorbed nodes are marked.
    pub(super) fn conv_bn_folds(
        &self,
        roles: &[Role],
        qdq: &[bool],
        absorbed: &mut [bool],
    ) -> Vec<Option<BnFold>> {
        let graph = self.graph;
        let consumers = graph.consumers();
        let sole = |t: TensorId| match consumers[t][..] {
            [n] if !graph.outputs.contains(&t) => Some(n),
            _ => None,
        };
        let free =
            |n: NodeId, absorbed: &[bool]| roles[n] == Role::Plain && !qdq[n] && !absorbed[n];
        let constant = |t: TensorId| graph.tensors[t].is_const() && self.consts.bytes(t).is_some();
        let mut folds = vec![None; graph.nodes.len()];
        for (id, node) in graph.nodes.iter().enumerate() {
            // (An f16 one is computed between conversions, `half.rs`, unfolded.)
            if !matches!(node.op, OpKind::Conv | OpKind::ConvTranspose)
                || graph.tensors[node.inputs[0]].dtype != DType::F32
                || !free(id, absorbed)
                || !node.inputs[1..].iter().all(|&t| constant(t))
            {
                continue;
            }
            let Some(bn) = sole(node.outputs[0])
                .filter(|&n| graph.nodes[n].op == OpKind::BatchNormalization && free(n, absorbed))
            else {
                continue;
            };
            // The transposed convolution has no epilogue clamp: its activation runs alone.
            let activation = sole(graph.nodes[bn].outputs[0]).filter(|&n| {
                node.op == OpKind::Conv
                    && matches!(graph.nodes[n].op, OpKind::Relu | OpKind::Clip)
                    && free(n, absorbed)
            });
            for n in [Some(bn), activation].into_iter().flatten() {
                absorbed[n] = true;
            }
            folds[id] = Some(BnFold {
                bn,
                activation,
                last: activation.unwrap_or(bn),
            });
        }
        folds
    }

    /// A convolution with its BatchNormalization (and activation) folded in.
    pub(super) fn conv_folded(
        &mut self,
        node: &Node,
        fold: &BnFold,
        act: Option<&ActFold>,
    ) -> Result<Op, String> {
        let shapes: Vec<Vec<usize>> = node.inputs.iter().map(|&t| self.shape(t)).collect();
        let (a, b) = self.bn_factors(&self.graph.nodes[fold.bn])?;
        let mut fused = match fold.activation {
            Some(n) => match self.activation(&self.graph.nodes[n])? {
                Unary::Relu => vec![EpOpSpec::Relu],
                Unary::Clip { min, max } => vec![EpOpSpec::Clip { min, max }],
                other => return Err(format!("{other:?} cannot be fused")),
            },
            None => Vec::new(),
        };
        let last = act.map_or(fold.last, |a| a.last);
        fused.extend(act.map(|a| EpOpSpec::Act(a.f)));
        let out = self.graph.nodes[last].outputs[0];
        if node.op == OpKind::ConvTranspose {
            let out_shape = self.shape(out);
            return self.conv_transpose(node, &shapes, &out_shape, Some((&a, &b)));
        }
        self.conv(node, &shapes, &fused, out, Some((&a, &b)))
    }

    /// The op of a tail node, `None` when `node.op` is not one of them.
    pub(super) fn lower_tail(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        out_shape: &[usize],
    ) -> Result<Option<Op>, String> {
        let input = |i: usize| node.inputs[i];
        Ok(Some(match node.op {
            OpKind::Greater | OpKind::Less | OpKind::Equal | OpKind::And | OpKind::Pow => {
                let e = self.graph.tensors[input(1)].dtype;
                // (An f16 exponent has been widened to f32, `half.rs`.)
                if node.op == OpKind::Pow && !matches!(e, DType::F32 | DType::F16) {
                    let held = Held::of(e).ok_or_else(|| format!("Pow by a {e} exponent"))?;
                    let (x, n) = (self.src(input(0))?, self.src(input(1))?);
                    return Ok(Some(Op::PowInt(PowIntOp::new(
                        (x, &shapes[0]),
                        (n, held, &shapes[1]),
                        out_shape,
                    ))));
                }
                if node.op == OpKind::Pow {
                    if let Some(f) = self.pow_rewrite(input(1)) {
                        return Ok(Some(Op::Unary(UnaryOp {
                            x: self.src(input(0))?,
                            f,
                        })));
                    }
                }
                let op = match node.op {
                    OpKind::Greater => Binary::Greater,
                    OpKind::Less => Binary::Less,
                    OpKind::Equal => Binary::Equal,
                    OpKind::And => Binary::And,
                    _ => Binary::Pow,
                };
                let dtype = self.graph.tensors[input(0)].dtype;
                if matches!(dtype, DType::I64 | DType::I32 | DType::I8 | DType::U8) {
                    let (a, b) = (self.int_src(input(0))?, self.int_src(input(1))?);
                    return Ok(Some(Op::IntCompare(IntCompareOp::new(
                        op,
                        (a, &shapes[0]),
                        (b, &shapes[1]),
                        out_shape,
                    ))));
                }
                let (a, b) = (self.src(input(0))?, self.src(input(1))?);
                Op::Binary(BinaryOp::new(op, a, &shapes[0], b, &shapes[1], out_shape))
            }
            OpKind::Not => Op::Unary(UnaryOp {
                x: self.src(input(0))?,
                f: Unary::Not,
            }),
            OpKind::Gelu => Op::Unary(UnaryOp {
                x: self.src(input(0))?,
                f: match node.attr_str("approximate", "none") {
                    "tanh" => Unary::GeluTanh,
                    _ => Unary::GeluErf,
                },
            }),
            OpKind::Ceil => Op::Unary(UnaryOp {
                x: self.src(input(0))?,
                f: Unary::Ceil,
            }),
            OpKind::BitCast => {
                let from = self.graph.tensors[input(0)].dtype;
                let to = self.graph.tensors[node.outputs[0]].dtype;
                let kind = bit_cast_kind(from, to)
                    .ok_or_else(|| format!("BitCast from {from} to {to}"))?;
                Op::BitCast(BitCastOp {
                    x: self.src(input(0))?,
                    kind,
                    len: out_shape.iter().product(),
                })
            }
            // Casts that change what a slot holds (the others are views).
            OpKind::Cast | OpKind::CastLike => {
                let from = self.graph.tensors[input(0)].dtype;
                let to = self.graph.tensors[node.outputs[0]].dtype;
                let f = match (from, to) {
                    (DType::F32, DType::Bool) => Unary::NonZero,
                    (DType::F32, DType::I32) => Unary::F32ToI32,
                    (DType::I32, DType::F32) => Unary::I32ToF32,
                    (DType::Bool, DType::I32) => Unary::BoolToI32,
                    (DType::I32, DType::Bool) => Unary::I32ToBool,
                    _ => {
                        let (Some(from), Some(to)) = (Held::of(from), Held::of(to)) else {
                            return Err(format!("Cast from {from} to {to}"));
                        };
                        return Ok(Some(Op::Cast(CastOp {
                            x: self.src(input(0))?,
                            from,
                            to,
                            len: out_shape.iter().product(),
                        })));
                    }
                };
                Op::Unary(UnaryOp {
                    x: self.src(input(0))?,
                    f,
                })
            }
            OpKind::Where => {
                let c = self.src(input(0))?;
                let x = self.src(input(1))?;
                let y = self.src(input(2))?;
                // i64 values: each element's two words picked by one condition.
                let mut cs = shapes[0].clone();
                if self.words(input(1)) == 2 {
                    cs.push(1);
                }
                let (xs, ys) = (self.held_shape(input(1)), self.held_shape(input(2)));
                let out = self.held_shape(node.outputs[0]);
                Op::Where(WhereOp::new([(c, &cs), (x, &xs), (y, &ys)], &out))
            }
            OpKind::BatchNormalization => {
                let constant = (1..5).all(|i| self.const_f32(input(i)).is_some());
                let ((a, b), stats) = if constant {
                    (self.bn_factors(node)?, None)
                } else {
                    let stats = RunStats {
                        operands: [
                            self.src(input(1))?,
                            self.src(input(2))?,
                            self.src(input(3))?,
                            self.src(input(4))?,
                        ],
                        epsilon: node.attr_float("epsilon", 1e-5),
                    };
                    ((Vec::new(), Vec::new()), Some(stats))
                };
                // An X of rank 1 is one channel (ONNX's shape rule, as the reference
                // reads it): its elements are the one plane.
                let (channels, plane) = match shapes[0][..] {
                    [n] => (1, n),
                    ref x => (x[1], x[2..].iter().product()),
                };
                Op::Affine(AffineOp {
                    x: self.src(input(0))?,
                    a,
                    b,
                    stats,
                    channels,
                    plane,
                    channels_last: self.nhwc[input(0)],
                })
            }
            op if super::ops::reduce_kind(op).is_some() => {
                let kind = super::ops::reduce_kind(op).ok_or("not a reduction")?;
                self.reduce(node, &shapes[0], out_shape, kind)?
            }
            OpKind::Pad => self.pad(node, &shapes[0])?,
            OpKind::Expand | OpKind::Tile => {
                let x = &shapes[0];
                // The input right-aligned to the output's rank, each output index of an
                // axis reading the input index it repeats.
                let mut in_shape = vec![1; out_shape.len() - x.len().min(out_shape.len())];
                in_shape.extend_from_slice(x);
                let mut maps: Vec<Vec<Option<usize>>> = in_shape
                    .iter()
                    .zip(out_shape)
                    .map(|(&n, &o)| (0..o).map(|i| (n > 0).then(|| i % n)).collect())
                    .collect();
                if self.words(input(0)) == 2 {
                    in_shape.push(2);
                    maps.push(vec![Some(0), Some(1)]);
                }
                Op::Pad(PadOp::new(self.src(input(0))?, &in_shape, maps, 0.0))
            }
            OpKind::Resize => self.resize(node, &shapes[0], out_shape)?,
            OpKind::ConvTranspose => self.conv_transpose(node, shapes, out_shape, None)?,
            OpKind::GRU => self.gru(node, shapes)?,
            OpKind::RNN => self.rnn(node, shapes)?,
            _ => return self.lower_math(node, shapes, out_shape),
        }))
    }

    /// The `sequence_lens` (input 4) of an LSTM, GRU or RNN node: constant ones read and
    /// checked here, run-time ones at every execute.
    pub(super) fn seq_lens(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
    ) -> Result<SeqLens, String> {
        let present = |i: usize| shapes.get(i).is_some_and(|s| !s.contains(&0));
        let seq = shapes[0][0];
        Ok(match node.inputs.get(4).copied() {
            Some(t) if present(4) && self.graph.tensors[t].is_const() => {
                let bytes = self.consts.bytes(t).ok_or("sequence_lens has no data")?;
                SeqLens::Const(
                    bytes
                        .chunks_exact(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .map(|l| usize::try_from(l).ok().filter(|l| (1..=seq).contains(l)))
                        .collect::<Option<Vec<usize>>>()
                        .ok_or_else(|| format!("sequence_lens must lie in 1..={seq}"))?,
                )
            }
            Some(t) if present(4) => SeqLens::Run(self.src(t)?),
            _ => SeqLens::Full,
        })
    }

    fn gru(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
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
        let x = self.src(node.inputs[0])?;
        let spec = GruSpec {
            x_shape: &shapes[0],
            dirs: shapes[1][0],
            hidden: shapes[2][2],
            direction: node.attr_str("direction", "forward"),
            linear_before_reset: node.attr_int("linear_before_reset", 0) != 0,
            clip: super::recurrent_clip(node)?,
            lens: self.seq_lens(node, shapes)?,
        };
        Ok(Op::Gru(GruOp::new(
            &mut self.packs,
            self.kernel,
            x,
            initial_h,
            &w,
            &r,
            b.as_deref(),
            spec,
        )))
    }

    fn rnn(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let present = |i: usize| shapes.get(i).is_some_and(|s| !s.contains(&0));
        let w = self.const_f32(node.inputs[1]).ok_or("W is not constant")?;
        let r = self.const_f32(node.inputs[2]).ok_or("R is not constant")?;
        let b = if present(3) {
            Some(self.const_f32(node.inputs[3]).ok_or("B is not constant")?)
        } else {
            None
        };
        let lens = self.seq_lens(node, shapes)?;
        let initial_h = if present(5) {
            Some(self.src(node.inputs[5])?)
        } else {
            None
        };
        let x = self.src(node.inputs[0])?;
        let dirs = shapes[1][0];
        let spec = RnnSpec {
            x_shape: &shapes[0],
            hidden: shapes[2][2],
            direction: node.attr_str("direction", "forward"),
            activations: rnn_activations(node, dirs)?,
            clip: super::recurrent_clip(node)?,
            lens,
        };
        Ok(Op::Rnn(RnnOp::new(
            &mut self.packs,
            self.kernel,
            x,
            initial_h,
            &w,
            &r,
            b.as_deref(),
            spec,
        )))
    }

    /// The words (f32 slots; two per i64) of a node whose output is known at init: Shape
    /// and Size of static shapes, ConstantOfShape of a constant shape, Range of constant
    /// operands. `None` for the other ops.
    pub(super) fn constant_node(&self, node: &Node) -> Result<Option<Vec<f32>>, String> {
        let wide = |v: &[i64]| -> Vec<f32> {
            v.iter()
                .flat_map(|&x| {
                    let b = x.to_le_bytes();
                    [
                        f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                        f32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                    ]
                })
                .collect()
        };
        Ok(Some(match node.op {
            OpKind::Shape => {
                let dims = self.shape(node.inputs[0]);
                let r = dims.len() as i64;
                let at = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
                let (s, e) = (at(node.attr_int("start", 0)), at(node.attr_int("end", r)));
                let v: Vec<i64> = dims[s..e.max(s)].iter().map(|&d| d as i64).collect();
                wide(&v)
            }
            OpKind::Size => wide(&[self.shape(node.inputs[0]).iter().product::<usize>() as i64]),
            OpKind::ConstantOfShape => {
                let n: usize = self.shape(node.outputs[0]).iter().product();
                let dtype = self.graph.tensors[node.outputs[0]].dtype;
                let one = constant_element(dtype, node.attrs.get("value"));
                held_words(dtype, &one.repeat(n))
            }
            OpKind::Range => {
                let n: usize = self.shape(node.outputs[0]).iter().product();
                let dtype = self.graph.tensors[node.outputs[0]].dtype;
                let operand = |i: usize| {
                    self.consts
                        .bytes(node.inputs[i])
                        .filter(|b| b.len() >= dtype.size())
                        .ok_or_else(|| format!("Range operand {i} is not a constant scalar"))
                };
                held_words(dtype, &range_bytes(dtype, operand(0)?, operand(2)?, n))
            }
            OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow => {
                let out = node.outputs[0];
                let size = self.shape(out).first().copied().unwrap_or(0);
                let dtype = self.graph.tensors[out].dtype;
                let periodic = node.attr_int("periodic", 1) != 0;
                held_words(dtype, &window_bytes(node.op, periodic, size, dtype)?)
            }
            _ => return Ok(None),
        }))
    }

    /// Pow by a constant 2 or 0.5, rewritten as a multiply or a square root.
    fn pow_rewrite(&self, exponent: TensorId) -> Option<Unary> {
        let e = self.const_f32(exponent)?;
        match e[..] {
            [2.0] => Some(Unary::Square),
            [0.5] => Some(Unary::PowHalf),
            _ => None,
        }
    }

    /// An inference BatchNormalization's per-channel `(a, b)` (`y = x * a + b`).
    pub(super) fn bn_factors(&self, node: &Node) -> Result<(Vec<f32>, Vec<f32>), String> {
        let p = |i: usize| {
            self.const_f32(node.inputs[i])
                .ok_or_else(|| format!("BatchNormalization operand {i} is not constant"))
        };
        let (scale, bias, mean, var) = (p(1)?, p(2)?, p(3)?, p(4)?);
        Ok(batch_norm_factors(
            &scale,
            &bias,
            &mean,
            &var,
            node.attr_float("epsilon", 1e-5),
        ))
    }

    fn pad(&mut self, node: &Node, x: &[usize]) -> Result<Op, String> {
        let (axes, pads) = self.pad_amounts(node, x.len())?;
        let mode = node.attr_str("mode", "constant");
        let mode = PadMode::parse(mode).ok_or_else(|| format!("Pad mode '{mode}'"))?;
        let mut maps: Vec<Vec<Option<usize>>> =
            x.iter().map(|&n| (0..n).map(Some).collect()).collect();
        for (k, &a) in axes.iter().enumerate() {
            maps[a] = axis_map(mode, x[a], pads[k], pads[k + axes.len()])?;
        }
        // (An i64 is padded as 8-byte units, `over_bytes`.)
        let mut x = x.to_vec();
        if self.nhwc[node.inputs[0]] {
            // Held channels-last (the layout plan's f32 rank-3/4 Pad): the same gather
            // with the channels innermost.
            maps[1..].rotate_left(1);
            x[1..].rotate_left(1);
        }
        let value = self.pad_value(node)?;
        Ok(Op::Pad(PadOp::new(
            self.src(node.inputs[0])?,
            &x,
            maps,
            value,
        )))
    }

    /// Pad's axes and amounts (the `pads` attribute of opset 2, or the constant operand
    /// over the `axes` operand's axes, all of them without it): `pads[k]` before axis
    /// `axes[k]`, `pads[k + axes.len()]` after it.
    fn pad_amounts(&self, node: &Node, rank: usize) -> Result<(Vec<usize>, Vec<i64>), String> {
        let operand = |b: &Self, i: usize| node.inputs.get(i).and_then(|&t| b.const_i64s(t));
        let pads = match node.attr_ints("pads") {
            Some(p) => p.to_vec(),
            None => operand(self, 1).ok_or("Pad pads are not constant")?,
        };
        let axes: Vec<usize> = match operand(self, 3) {
            Some(a) => a
                .iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<Result<_, _>>()?,
            None => (0..rank).collect(),
        };
        if pads.len() != 2 * axes.len() {
            return Err(format!("{} pads for {} axes", pads.len(), axes.len()));
        }
        Ok((axes, pads))
    }

    /// The value a constant Pad fills with (the operand, or the `value` attribute of
    /// opset 2).
    fn pad_value(&self, node: &Node) -> Result<f32, String> {
        Ok(match node.inputs.get(2) {
            Some(&t) if self.shape(t).iter().product::<usize>() > 0 => {
                let v = self.const_f32(t).ok_or("Pad value is not constant")?;
                v.first().copied().unwrap_or(0.0)
            }
            _ => node.attr_float("value", 0.0),
        })
    }

    /// Convolutions whose data input is a constant Pad of zeros (+0.0) on the spatial
    /// axes alone, which nothing else reads: the Pad's amounts join the convolution's
    /// own padding, which reads the same zeros, so the Pad neither runs nor is stored
    /// (Keras' ZeroPadding2D before strided convolutions, as tf2onnx exports it, and
    /// explicit pads of other exporters). Per node, the convolution as it runs: reading
    /// the Pad's input, its `pads` the sums. The Pads are marked absorbed.
    pub(super) fn pad_folds(&self, qdq: &[bool], absorbed: &mut [bool]) -> Vec<Option<Node>> {
        let graph = self.graph;
        let consumers = graph.consumers();
        let mut producer = vec![None; graph.tensors.len()];
        for (id, node) in graph.nodes.iter().enumerate() {
            for &t in &node.outputs {
                producer[t] = Some(id);
            }
        }
        let mut folds = vec![None; graph.nodes.len()];
        for (id, node) in graph.nodes.iter().enumerate() {
            if node.op != OpKind::Conv
                || qdq[id]
                || absorbed[id]
                || node.attr_str("auto_pad", "NOTSET") != "NOTSET"
            {
                continue;
            }
            let t = node.inputs[0];
            let Some(p) = producer[t].filter(|&p| {
                let pad = &graph.nodes[p];
                pad.op == OpKind::Pad
                    && !qdq[p]
                    && !absorbed[p]
                    && consumers[t][..] == [id]
                    && !node.inputs[1..].contains(&t)
                    && !graph.outputs.contains(&t)
                    && graph.tensors[pad.inputs[0]].dtype == DType::F32
                    && pad.attr_str("mode", "constant") == "constant"
                    && self.pad_value(pad).is_ok_and(|v| v.to_bits() == 0)
            }) else {
                continue;
            };
            let pad = &graph.nodes[p];
            let rank = self.shape(pad.inputs[0]).len();
            let Ok((axes, pads)) = self.pad_amounts(pad, rank) else {
                continue;
            };
            let spatial = rank.saturating_sub(2);
            let mut own: Vec<i64> = match node.attr_ints("pads") {
                Some(p) => p.to_vec(),
                None => vec![0; 2 * spatial],
            };
            let fits = rank >= 3
                && own.len() == 2 * spatial
                && axes.iter().enumerate().all(|(k, &a)| {
                    let (b, e) = (pads[k], pads[k + axes.len()]);
                    if a < 2 {
                        b == 0 && e == 0
                    } else {
                        b >= 0 && e >= 0
                    }
                });
            if !fits {
                continue;
            }
            for (k, &a) in axes.iter().enumerate() {
                if a >= 2 {
                    own[a - 2] += pads[k];
                    own[a - 2 + spatial] += pads[k + axes.len()];
                }
            }
            let mut conv = node.clone();
            conv.inputs[0] = pad.inputs[0];
            conv.attrs.insert("pads".into(), Attr::Ints(own));
            folds[id] = Some(conv);
            absorbed[p] = true;
        }
        folds
    }

    fn resize(&mut self, node: &Node, x: &[usize], out: &[usize]) -> Result<Op, String> {
        let coord = node.attr_str("coordinate_transformation_mode", "half_pixel");
        let mode = match node.attr_str("mode", "nearest") {
            "nearest" => {
                let r = node.attr_str("nearest_mode", "round_prefer_floor");
                ResizeMode::Nearest(Rounding::parse(r).ok_or("unknown nearest_mode")?)
            }
            _ => ResizeMode::Linear,
        };
        let scales = self.resize_scales(node, x, out)?;
        let src = self.src(node.inputs[0])?;
        match mode {
            ResizeMode::Nearest(_) => {
                let held = self.held_shape(node.inputs[0]);
                let nhwc = self.nhwc[node.inputs[0]];
                Ok(Op::Pad(self.nearest_gather(node, x, out, src, held, nhwc)?))
            }
            ResizeMode::Linear => {
                let r = x.len();
                let axis = |d: usize| {
                    if scales[d] == 1.0 && x[d] == out[d] {
                        (0..x[d]).map(|i| (i, i, 1.0, 0.0)).collect()
                    } else {
                        linear_taps(coord, x[d], out[d], scales[d])
                    }
                };
                let (rows, cols) = match r {
                    1 => (vec![(0, 0, 1.0, 0.0)], axis(0)),
                    _ => (axis(r - 2), axis(r - 1)),
                };
                let in_hw = match r {
                    1 => (1, x[0]),
                    _ => (x[r - 2], x[r - 1]),
                };
                // A volume: the third axis from the end is resampled too.
                let depth = (r >= 3 && (scales[r - 3] != 1.0 || x[r - 3] != out[r - 3]))
                    .then(|| (x[r - 3], axis(r - 3)));
                Ok(Op::LinearResize(LinearResizeOp {
                    x: src,
                    in_hw,
                    rows,
                    cols,
                    depth,
                    channels_last: self.nhwc[node.inputs[0]].then(|| x[1]),
                }))
            }
        }
    }

    /// A nearest Resize of `x` into `out` (logical shapes) as a gather of `src`, whose
    /// elements are held as `held` (a trailing axis of two for 2-word elements) and
    /// channels-last if `nhwc`: the f32 Resize, and an int8 one over its stored bytes
    /// (`lower/quant.rs`).
    pub(super) fn nearest_gather(
        &self,
        node: &Node,
        x: &[usize],
        out: &[usize],
        src: Src,
        mut held: Vec<usize>,
        nhwc: bool,
    ) -> Result<PadOp, String> {
        let coord = node.attr_str("coordinate_transformation_mode", "half_pixel");
        let r = node.attr_str("nearest_mode", "round_prefer_floor");
        let rounding = Rounding::parse(r).ok_or("unknown nearest_mode")?;
        let scales = self.resize_scales(node, x, out)?;
        let mut maps: Vec<Vec<Option<usize>>> = (0..x.len())
            .map(|d| {
                if scales[d] == 1.0 && x[d] == out[d] {
                    (0..x[d]).map(Some).collect()
                } else {
                    nearest_map(coord, rounding, x[d], out[d], scales[d])
                }
            })
            .collect();
        if held.len() > x.len() {
            maps.push(vec![Some(0), Some(1)]);
        }
        if nhwc {
            // Held NHWC (the layout plan's rank-4 Resize of H and W): the same gather
            // with the channels innermost, each pixel one copy.
            maps[1..].rotate_left(1);
            held[1..].rotate_left(1);
        }
        Ok(PadOp::new(src, &held, maps, 0.0))
    }

    /// The scale of every axis: from `scales` (attribute or constant input 2) on the
    /// resized axes, else `out / in` (sizes given), or with `keep_aspect_ratio_policy`
    /// one common scale.
    pub(super) fn resize_scales(
        &self,
        node: &Node,
        x: &[usize],
        out: &[usize],
    ) -> Result<Vec<f64>, String> {
        let rank = x.len();
        let axes: Vec<usize> = match node.attr_ints("axes") {
            Some(a) => a
                .iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<Result<_, _>>()?,
            None => (0..rank).collect(),
        };
        let given: Option<Vec<f32>> = match node.attrs.get("scales") {
            Some(Attr::Floats(s)) => Some(s.clone()),
            _ => node
                .inputs
                .get(2)
                .filter(|&&t| self.shape(t).iter().product::<usize>() > 0)
                .map(|&t| self.const_f32(t).map(|v| v.to_vec()))
                .map(|v| v.ok_or("Resize scales are not constant"))
                .transpose()?,
        };
        // With sizes, `keep_aspect_ratio_policy` not_larger / not_smaller resamples every
        // resized axis by one scale, the smallest / largest `size / in`: the output's
        // extents are that scale's rounded products, so `out / in` would differ from it.
        let policy = node.attr_str("keep_aspect_ratio_policy", "stretch");
        let common = match (&given, policy) {
            (None, "not_larger" | "not_smaller") => {
                let sizes = match node.attr_ints("sizes") {
                    Some(v) => v.to_vec(),
                    None => node
                        .inputs
                        .get(3)
                        .and_then(|&t| self.const_i64s(t))
                        .ok_or("Resize sizes are not constant")?,
                };
                if sizes.len() != axes.len() {
                    return Err(format!("Resize sizes {sizes:?} for {} axes", axes.len()));
                }
                let ratios = axes
                    .iter()
                    .zip(&sizes)
                    .map(|(&a, &s)| s as f64 / x[a] as f64);
                Some(match policy {
                    "not_larger" => ratios.fold(f64::INFINITY, f64::min),
                    _ => ratios.fold(0.0, f64::max),
                })
            }
            _ => None,
        };
        let mut scales = vec![1.0f64; rank];
        for (k, &a) in axes.iter().enumerate() {
            scales[a] = match (&given, common) {
                (Some(s), _) => *s.get(k).ok_or("fewer scales than axes")? as f64,
                (None, Some(c)) => c,
                (None, None) => out[a] as f64 / x[a] as f64,
            };
        }
        Ok(scales)
    }

    /// A transposed convolution, with a BatchNormalization's per-channel `(a, b)` folded
    /// into its weights and bias when `bn` is given.
    fn conv_transpose(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        out: &[usize],
        bn: Option<(&[f32], &[f32])>,
    ) -> Result<Op, String> {
        let (x, w) = (&shapes[0], &shapes[1]);
        let sp = x.len() - 2;
        let list = |name: &str, default: i64| -> Vec<i64> {
            match node.attr_ints(name) {
                Some(v) if v.len() == sp => v.to_vec(),
                _ => vec![default; sp],
            }
        };
        let (stride, dilation, out_pad) = (
            list("strides", 1),
            list("dilations", 1),
            list("output_padding", 0),
        );
        let auto_pad = node.attr_str("auto_pad", "NOTSET");
        let derived = node.attrs.contains_key("output_shape") || auto_pad.starts_with("SAME");
        let pads = node.attr_ints("pads");
        let pad: Vec<i64> = (0..sp)
            .map(|i| {
                if derived {
                    let full = (x[2 + i] as i64 - 1) * stride[i]
                        + out_pad[i]
                        + (w[2 + i] as i64 - 1) * dilation[i]
                        + 1;
                    let total = (full - out[2 + i] as i64).max(0);
                    match auto_pad {
                        "SAME_UPPER" => total / 2,
                        _ => total - total / 2,
                    }
                } else if auto_pad == "VALID" {
                    0
                } else {
                    pads.and_then(|p| p.get(i).copied()).unwrap_or(0)
                }
            })
            .collect();
        let group = node.attr_int("group", 1).max(1) as usize;
        let two = |v: &[i64], one: i64| -> (i64, i64) {
            match v {
                [a] => (one, *a),
                [a, b, ..] => (*a, *b),
                [] => (one, one),
            }
        };
        let (kh, kw) = match &w[2..] {
            [k] => (1, *k),
            [a, b] => (*a, *b),
            _ => return Err("only 1-D and 2-D ConvTranspose is implemented".into()),
        };
        let (ih, iw) = if sp == 1 { (1, x[2]) } else { (x[2], x[3]) };
        let (oh, ow) = if sp == 1 {
            (1, out[2])
        } else {
            (out[2], out[3])
        };
        let s = two(&stride, 1);
        let d = two(&dilation, 1);
        let p = two(&pad, 0);
        let geom = DeconvGeom {
            batch: x[0],
            group,
            cg: x[1] / group,
            mg: out[1] / group,
            ih,
            iw,
            oh,
            ow,
            kh,
            kw,
            stride: (s.0 as usize, s.1 as usize),
            dilation: (d.0 as usize, d.1 as usize),
            pad: p,
        };
        let mut weights = self
            .const_f32(node.inputs[1])
            .ok_or("ConvTranspose weights are not constant")?;
        let mut bias = match node.inputs.get(2) {
            Some(&t) => self
                .const_f32(t)
                .ok_or("ConvTranspose bias is not constant")?
                .to_vec(),
            None => vec![0.0; out[1]],
        };
        if let Some((a, b)) = bn {
            // W is [C, M/g, kernel]: row (c, ml) feeds output channel g * M/g + ml.
            let (cg, mg, taps) = (geom.cg.max(1), geom.mg, kh * kw);
            for (row, w) in weights.to_mut().chunks_exact_mut(taps).enumerate() {
                let (c, ml) = (row / mg.max(1), row % mg.max(1));
                let m = (c / cg) * mg + ml;
                w.iter_mut().for_each(|v| *v *= a[m]);
            }
            for (m, v) in bias.iter_mut().enumerate() {
                *v = *v * a[m] + b[m];
            }
        }
        Ok(Op::Deconv(DeconvOp::new(
            self.src(node.inputs[0])?,
            geom,
            &weights,
            bias,
        )))
    }
}

/// A Cast that keeps every value as held here (f32 to f32, bool to bool or to f32, whose
/// 0.0/1.0 already are the floats): a view like Reshape.
pub(super) fn is_view_cast(graph: &Graph, node: &Node) -> bool {
    let from = graph.tensors[node.inputs[0]].dtype;
    let to = graph.tensors[node.outputs[0]].dtype;
    match node.op {
        OpKind::Cast | OpKind::CastLike => from == to || (from == DType::Bool && to == DType::F32),
        OpKind::BitCast => {
            bit_cast_kind(from, to).is_some_and(|k| matches!(k, BitCastKind::Copy { .. }))
        }
        _ => false,
    }
}

/// How BitCast from `from` to `to` (of one width) changes what is held; `None` for a
/// dtype the executable does not hold.
pub(super) fn bit_cast_kind(from: DType, to: DType) -> Option<BitCastKind> {
    let flip = |d: DType| if d == DType::I8 { 0x80 } else { 0 };
    let word = |d: DType| matches!(d, DType::F32 | DType::I32 | DType::U32);
    let pair = |d: DType| matches!(d, DType::I64 | DType::U64);
    let half = |d: DType| matches!(d, DType::F16 | DType::I16 | DType::U16);
    let byte = |d: DType| matches!(d, DType::I8 | DType::U8);
    Some(match (from, to) {
        _ if from == to => BitCastKind::Copy {
            size: held_size(from),
        },
        _ if word(from) && word(to) => BitCastKind::Copy { size: 4 },
        _ if pair(from) && pair(to) => BitCastKind::Copy { size: 8 },
        _ if half(from) && half(to) => BitCastKind::Copy { size: 2 },
        _ if byte(from) && byte(to) => BitCastKind::FlipBias,
        (DType::Bool, _) if byte(to) => BitCastKind::FromBool { flip: flip(to) },
        (_, DType::Bool) if byte(from) => BitCastKind::ToBool { flip: flip(from) },
        _ => return None,
    })
}

/// One element of `dtype` holding ConstantOfShape's `value` (absent: 0), as stored: an
/// integer attribute exactly where the dtype holds it, else saturated; a float one
/// truncated toward zero into integers, rounded to nearest into floats.
fn constant_element(dtype: DType, value: Option<&Attr>) -> Vec<u8> {
    use baton_delegate_api::dtype::{push_float, push_int};
    let (int, float) = match value {
        Some(Attr::Int(i)) => (Some(*i), *i as f64),
        Some(Attr::Float(f)) => (None, *f as f64),
        _ => (Some(0), 0.0),
    };
    let mut bytes = Vec::with_capacity(dtype.size());
    match dtype.int_range() {
        Some((lo, hi)) => {
            let v = int.map_or(float as i128, i128::from).clamp(lo, hi);
            push_int(dtype, v, &mut bytes);
        }
        None if dtype == DType::Bool => bytes.push(u8::from(float != 0.0)),
        None => push_float(dtype, float, true, &mut bytes),
    }
    bytes
}

/// Stored bytes of a `dtype` tensor as the executable holds them: bools widened to
/// 0.0/1.0, 8- and 16-bit data as bytes (an i8 biased by 128) padded to whole words with
/// slack, the others as their words.
fn held_words(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        DType::Bool => bytes.iter().map(|&b| (b != 0) as u8 as f32).collect(),
        DType::I8 | DType::U8 | DType::F16 | DType::I16 | DType::U16 => {
            let flip = if dtype == DType::I8 { 0x80 } else { 0 };
            let mut words = vec![0.0f32; Builder::byte_words(bytes.len())];
            let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
            for (o, &b) in dst.iter_mut().zip(bytes) {
                *o = b ^ flip;
            }
            words
        }
        _ => bytemuck::pod_collect_to_vec(bytes),
    }
}
