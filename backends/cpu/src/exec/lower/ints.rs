//! Lowering of integer and byte data: integer arithmetic, maps and reductions
//! (`crate::ops::int`), the integer operands of comparisons, and movers of 8-bit tensors
//! (`crate::ops::bytes`).

use super::ops::reduce_kind;
use super::*;
use crate::ops::bytes::{ByteMoveOp, Moved};
use crate::ops::int::{Held, IntArith, IntBinaryOp, IntMap, IntReduceOp, IntUnaryOp};
use crate::ops::reduce::ReduceLayout;
use crate::ops::select::IntSrc;

impl Builder<'_> {
    /// Add, Sub, Mul or Div of two i32 or two i64 tensors, Mod of two integer tensors of
    /// any held width; `None` for other dtypes.
    pub(super) fn int_binary(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        out_shape: &[usize],
    ) -> Result<Option<Op>, String> {
        let held = match self.graph.tensors[node.inputs[0]].dtype {
            DType::I64 => Held::I64,
            DType::I32 => Held::I32,
            DType::I8 if node.op == OpKind::Mod => Held::I8,
            DType::U8 if node.op == OpKind::Mod => Held::U8,
            _ => return Ok(None),
        };
        let op = match node.op {
            OpKind::Add => IntArith::Add,
            OpKind::Sub => IntArith::Sub,
            OpKind::Mul => IntArith::Mul,
            OpKind::Mod => IntArith::Mod {
                floored: node.attr_int("fmod", 0) == 0,
            },
            _ => IntArith::Div,
        };
        let (a, b) = (self.src(node.inputs[0])?, self.src(node.inputs[1])?);
        Ok(Some(Op::IntBinary(IntBinaryOp::new(
            op,
            held,
            (a, &shapes[0]),
            (b, &shapes[1]),
            out_shape,
        ))))
    }

    /// Relu, Clip, Neg, Abs or Sign of an integer tensor, or a reduction of an i32 or i64 one
    /// (over any axes);
    /// `None` for other nodes and dtypes.
    pub(super) fn int_node(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
    ) -> Result<Option<Op>, String> {
        let dtype = self.graph.tensors[node.inputs[0]].dtype;
        let ints = |h: &Held| !matches!(h, Held::F32 | Held::F16 | Held::Bool);
        let Some(held) = Held::of(dtype).filter(ints) else {
            return Ok(None);
        };
        let x = &shapes[0];
        Ok(Some(match node.op {
            OpKind::Relu | OpKind::Neg | OpKind::Abs | OpKind::Clip | OpKind::Sign => {
                let f = match node.op {
                    OpKind::Relu => IntMap::Relu,
                    OpKind::Neg => IntMap::Neg,
                    OpKind::Abs => IntMap::Abs,
                    OpKind::Sign => IntMap::Sign,
                    _ => {
                        let (lo, hi) =
                            crate::support::int_clip_bounds(self.graph, node, &self.consts)
                                .map_err(|_| "Clip bounds are not constant".to_string())?;
                        IntMap::Clip { lo, hi }
                    }
                };
                Op::IntUnary(IntUnaryOp {
                    x: self.src(node.inputs[0])?,
                    f,
                    held,
                    len: x.iter().product(),
                })
            }
            op if reduce_kind(op).is_some() => {
                let kind = reduce_kind(op).ok_or("not a reduction")?;
                let flags = reduced_axes(node, x, |t| self.const_i64s(t))?;
                let src = self.src(node.inputs[0])?;
                let Some(flags) = flags.filter(|f| f.contains(&true) || !kind.keeps_one()) else {
                    return Ok(Some(Op::Copy(src)));
                };
                Op::IntReduce(IntReduceOp {
                    x: src,
                    held,
                    layout: ReduceLayout::new(x, &flags),
                    kind,
                })
            }
            _ => return Ok(None),
        }))
    }

    /// `op`, a mover of `node`'s data, made to move bytes when that data is 8-bit.
    pub(super) fn over_bytes(&self, node: &Node, op: Op) -> Result<Op, String> {
        let t = node.outputs[0];
        let dtype = self.graph.tensors[t].dtype;
        let mover = matches!(
            node.op,
            OpKind::Gather
                | OpKind::Slice
                | OpKind::Transpose
                | OpKind::Concat
                | OpKind::Pad
                | OpKind::Expand
                | OpKind::Tile
                | OpKind::Split
                | OpKind::Where
                | OpKind::Resize
                | OpKind::DepthToSpace
                | OpKind::SpaceToDepth
        );
        let size = match dtype {
            DType::I8 | DType::U8 => 1,
            DType::F16 => 2,
            // Pad alone: its value fills both words of an element.
            DType::I64 if node.op == OpKind::Pad => 8,
            _ => return Ok(op),
        };
        // A linear Resize of f16 computes in f32 between conversions (`half.rs`).
        if !mover || matches!(op, Op::LinearResize(_)) {
            return Ok(op);
        }
        // Pad's value as held (the default 0 of an i8 is the byte 0x80).
        let flip = if dtype == DType::I8 { 0x80 } else { 0 };
        let value = match node.inputs.get(2) {
            Some(&v) if node.op == OpKind::Pad => {
                self.consts.bytes(v).filter(|b| b.len() >= size).map(|b| {
                    let mut e = [0u8; 8];
                    e[..size].copy_from_slice(&b[..size]);
                    u64::from_le_bytes(e)
                })
            }
            _ => None,
        };
        let moved = match op {
            Op::Gather(op) => Moved::Gather(op),
            Op::Slice(op) => Moved::Slice(op),
            Op::Transpose(op) => Moved::Transpose(op),
            Op::Concat(op) => Moved::Concat(op),
            Op::Pad(op) => Moved::Pad(op),
            Op::Split(op) => Moved::Split(op),
            Op::Where(op) => Moved::Where(op),
            _ => return Err(format!("{} of {dtype} data", node.op)),
        };
        Ok(Op::ByteMove(ByteMoveOp {
            op: moved,
            len: self.shape(t).iter().product(),
            size,
            fill: value.unwrap_or(0) ^ flip,
        }))
    }

    /// An integer comparison operand, read as held.
    pub(super) fn int_src(&mut self, t: TensorId) -> Result<IntSrc, String> {
        let dtype = self.graph.tensors[t].dtype;
        let held = Held::of(dtype).ok_or_else(|| format!("a comparison of {dtype}"))?;
        Ok(IntSrc {
            src: self.src(t)?,
            held,
        })
    }
}
