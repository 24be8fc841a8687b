//! Lowering of the running, masking, ranking, element-indexed and block-moving ops of
//! BTIR 1.3: CumSum, Trilu, Hardmax, TopK, GatherElements, GatherND, ScatterElements,
//! ScatterND, DepthToSpace and SpaceToDepth; and TensorScatter (opset 24).

use super::*;
use crate::ops::index::{CumSumOp, GatherElementsOp, HardmaxOp, TopKOp, TriluOp};
use crate::ops::int::Held;
use crate::ops::layout::{broadcast_strides, Strided};
use crate::ops::scatter::{Combine, GatherNdOp, ScatterOp, Targets, Tuples};
use crate::ops::sequence::TensorScatterOp;

impl Builder<'_> {
    /// The op of one of this file's nodes, `None` when `node.op` is not one of them.
    pub(super) fn lower_index(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        out_shape: &[usize],
    ) -> Result<Option<Op>, String> {
        let x = &shapes[0];
        let input = |i: usize| node.inputs[i];
        let dtype = self.graph.tensors[input(0)].dtype;
        // `[outer, n, inner]` around an axis.
        let around = |axis: usize| {
            (
                x[..axis].iter().product::<usize>(),
                x[axis],
                x[axis + 1..].iter().product::<usize>(),
            )
        };
        // An f16 input has been widened to f32 (`half.rs`).
        let held = || match Held::of(dtype) {
            Some(Held::F16) => Ok(Held::F32),
            Some(h) => Ok(h),
            None => Err(format!("{} of {dtype}", node.op)),
        };
        Ok(Some(match node.op {
            OpKind::Trilu => {
                let r = x.len();
                if r < 2 {
                    return Err(format!("Trilu of a rank-{r} tensor"));
                }
                let k = match node.inputs.get(1) {
                    Some(&t) if self.shape(t).iter().product::<usize>() > 0 => {
                        let v = self.const_i64s(t).ok_or("Trilu k is not constant")?;
                        *v.first().ok_or("Trilu k is empty")?
                    }
                    _ => 0,
                };
                let size = match dtype {
                    // Bools are held as 0.0/1.0 words, i64 as two words.
                    DType::Bool => 4,
                    _ => dtype.size(),
                };
                Op::Trilu(TriluOp {
                    x: self.src(input(0))?,
                    batch: x[..r - 2].iter().product(),
                    rows: x[r - 2],
                    cols: x[r - 1],
                    size,
                    zero: if dtype == DType::I8 { 0x80 } else { 0 },
                    upper: node.attr_int("upper", 1) != 0,
                    k,
                })
            }
            OpKind::CumSum | OpKind::CumProd => {
                let t = input(1);
                let a = match self.graph.tensors[t].dtype {
                    DType::I32 => self
                        .consts
                        .bytes(t)
                        .filter(|b| b.len() >= 4)
                        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64),
                    _ => self.const_i64s(t).and_then(|v| v.first().copied()),
                }
                .ok_or("the axis is not constant")?;
                let axis = normalize_axis(a, x.len())?;
                let (outer, n, inner) = around(axis);
                Op::CumSum(CumSumOp {
                    x: self.src(input(0))?,
                    held: held()?,
                    outer,
                    n,
                    inner,
                    exclusive: node.attr_int("exclusive", 0) != 0,
                    reverse: node.attr_int("reverse", 0) != 0,
                    product: node.op == OpKind::CumProd,
                })
            }
            OpKind::Hardmax => {
                let axis = normalize_axis(node.attr_int("axis", -1), x.len())?;
                let (outer, n, inner) = around(axis);
                Op::Hardmax(HardmaxOp {
                    x: self.src(input(0))?,
                    outer,
                    n,
                    inner,
                })
            }
            OpKind::TopK => {
                let axis = normalize_axis(node.attr_int("axis", -1), x.len())?;
                let (outer, n, inner) = around(axis);
                let k = out_shape[axis];
                if k > n {
                    return Err(format!("TopK k = {k} of an axis of {n}"));
                }
                Op::TopK(TopKOp {
                    x: self.src(input(0))?,
                    held: held()?,
                    outer,
                    n,
                    inner,
                    k,
                    largest: node.attr_int("largest", 1) != 0,
                })
            }
            OpKind::GatherElements => {
                let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
                let (walk, dim, stride) = self.element_walk(x, &shapes[1], axis);
                let it = input(1);
                let index_held = Held::of(self.graph.tensors[it].dtype)
                    .ok_or("GatherElements indices of an unheld dtype")?;
                Op::GatherElements(GatherElementsOp {
                    x: self.src(input(0))?,
                    indices: self.src(it)?,
                    index_held,
                    dim,
                    stride,
                    walk,
                })
            }
            OpKind::GatherND => {
                let b = node.attr_int("batch_dims", 0).max(0) as usize;
                let ishape = &shapes[1];
                let k = *ishape.last().ok_or("GatherND indices of rank 0")?;
                if b + k > x.len() || ishape.len() < b + 1 {
                    return Err(format!("GatherND of {x:?} by {ishape:?}"));
                }
                let tuples = Tuples {
                    indices: self.src(input(1))?,
                    batches: x[..b].iter().product(),
                    tuples: ishape[b..ishape.len() - 1].iter().product(),
                    addressed: x[b..b + k].to_vec(),
                };
                // Bytes per element as held: a word each (two for an i64), the stored
                // bytes of the 8- and 16-bit dtypes.
                let size = match dtype {
                    DType::I8 | DType::U8 | DType::F16 => dtype.size(),
                    _ => 4 * self.words(input(0)),
                };
                Op::GatherNd(GatherNdOp {
                    x: self.src(input(0))?,
                    tuples,
                    width: x[b + k..].iter().product::<usize>() * size,
                })
            }
            OpKind::ScatterElements | OpKind::ScatterND => {
                let combine = node.attr_str("reduction", "none");
                let combine =
                    Combine::parse(combine).ok_or_else(|| format!("reduction '{combine}'"))?;
                let ishape = &shapes[1];
                let targets = if node.op == OpKind::ScatterND {
                    let k = *ishape.last().ok_or("ScatterND indices of rank 0")?;
                    if k > x.len() {
                        return Err(format!("ScatterND of {x:?} by {ishape:?}"));
                    }
                    Targets::Nd {
                        tuples: Tuples {
                            indices: self.src(input(1))?,
                            batches: 1,
                            tuples: ishape[..ishape.len() - 1].iter().product(),
                            addressed: x[..k].to_vec(),
                        },
                        width: x[k..].iter().product(),
                    }
                } else {
                    let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
                    let (walk, dim, stride) = self.element_walk(x, ishape, axis);
                    Targets::Elements { walk, dim, stride }
                };
                let it = input(1);
                Op::Scatter(ScatterOp {
                    x: self.src(input(0))?,
                    updates: self.src(input(2))?,
                    indices: self.src(it)?,
                    index_held: Held::of(self.graph.tensors[it].dtype)
                        .ok_or("indices of an unheld dtype")?,
                    targets,
                    combine,
                    // Not widened: an f16 scatter only moves stored bytes.
                    held: Held::of(dtype).ok_or_else(|| format!("{} of {dtype}", node.op))?,
                    len: x.iter().product(),
                })
            }
            OpKind::DepthToSpace | OpKind::SpaceToDepth => {
                let [n, c, h, w] = x[..] else {
                    return Err(format!("{} of a rank-{} tensor", node.op, x.len()));
                };
                let b = node.attr_int("blocksize", 1).max(1) as usize;
                // A reshape of the input and a transpose of it give the output.
                let (view, mut perm) = match node.op {
                    OpKind::DepthToSpace if node.attr_str("mode", "DCR") == "CRD" => {
                        let oc = c / (b * b);
                        (vec![n, oc, b, b, h, w], vec![0, 1, 4, 2, 5, 3])
                    }
                    OpKind::DepthToSpace => {
                        let oc = c / (b * b);
                        (vec![n, b, b, oc, h, w], vec![0, 3, 4, 1, 5, 2])
                    }
                    _ => (vec![n, c, h / b, b, w / b, b], vec![0, 3, 5, 1, 2, 4]),
                };
                let mut view = view;
                if self.words(input(0)) == 2 {
                    // An i64's two words stay together, last.
                    view.push(2);
                    perm.push(6);
                }
                Op::Transpose(TransposeOp::new(self.src(input(0))?, &view, &perm))
            }
            OpKind::TensorScatter => {
                let axis = baton_delegate_api::shape::tensor_scatter_axis(node, x.len())?;
                let steps = shapes[1][axis];
                // Omitted write indices (absent, or an empty placeholder) are all 0.
                let starts = match node.inputs.get(2) {
                    Some(&t) if shapes[2].iter().product::<usize>() > 0 => Some(self.src(t)?),
                    _ => None,
                };
                Op::TensorScatter(TensorScatterOp {
                    past: self.src(input(0))?,
                    update: self.src(input(1))?,
                    starts,
                    batch: x[0],
                    lines: x[1..axis].iter().product(),
                    cache_len: x[axis],
                    steps,
                    circular: node.attr_str("mode", "linear") == "circular",
                    run: x[axis + 1..].iter().product::<usize>() * tail::held_size(dtype),
                })
            }
            _ => return self.lower_bits(node, shapes, out_shape),
        }))
    }

    /// The walk of GatherElements and ScatterElements over the indices' shape: data
    /// offsets without the axis term and the indices' (and updates') offsets; with the
    /// axis's extent and data stride.
    fn element_walk(
        &self,
        x: &[usize],
        ishape: &[usize],
        axis: usize,
    ) -> (Strided<2>, usize, usize) {
        let mut strides = vec![1usize; x.len()];
        for d in (0..x.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * x[d + 1];
        }
        let stride = strides[axis];
        strides[axis] = 0;
        let index_strides = broadcast_strides(ishape, ishape.len());
        let walk: Vec<[usize; 2]> = strides
            .iter()
            .zip(&index_strides)
            .map(|(&a, &b)| [a, b])
            .collect();
        (Strided::new(ishape, &walk), x[axis], stride)
    }
}

/// The lengths of the outputs of a multi-output op, in the order it writes them into its
/// one buffer; `None` for single-output ops.
pub(super) fn output_parts(op: &Op) -> Option<Vec<usize>> {
    match op {
        Op::Split(s) => Some(s.parts.iter().map(|p| p * s.outer).collect()),
        Op::ByteMove(ByteMoveOp {
            op: Moved::Split(s),
            size,
            ..
        }) => Some(ByteMoveOp::split_words(s, *size)),
        Op::LayerNorm(l) => Some(vec![l.rows * l.n, l.rows, l.rows]),
        Op::Lstm(l) => {
            let (y, state) = l.out_len();
            Some(vec![y, state, state])
        }
        Op::Gru(g) => {
            let (y, state) = g.out_len();
            Some(vec![y, state])
        }
        Op::Rnn(g) => {
            let (y, state) = g.out_len();
            Some(vec![y, state])
        }
        Op::TopK(t) => {
            let (values, positions) = t.out_len();
            Some(vec![values, positions])
        }
        Op::Attention(a) => Some(a.out_len().to_vec()),
        Op::LinearAttention(a) => {
            let (y, state) = a.out_len();
            Some(vec![y, state])
        }
        Op::CausalConv(c) => {
            let (y, state) = c.out_len();
            Some(vec![y, state])
        }
        _ => None,
    }
}
