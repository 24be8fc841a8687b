//! Lowering of the integer ops of BTIR 1.4: the bitwise ops and BitShift
//! (`crate::ops::bits`), OneHot (`crate::ops::generate`); Range is a constant node
//! (`Builder::constant_node`).

use super::*;
use crate::ops::bits::{BitBinaryOp, BitLogic, BitNotOp, BitShiftOp, BitUnit, ShiftWidth};
use crate::ops::generate::OneHotOp;
use crate::ops::int::Held;

impl Builder<'_> {
    /// The op of one of this file's nodes, `None` when `node.op` is not one of them.
    pub(super) fn lower_bits(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        out_shape: &[usize],
    ) -> Result<Option<Op>, String> {
        let input = |i: usize| node.inputs[i];
        let dtype = self.graph.tensors[input(0)].dtype;
        // The unit the bitwise ops act on (an i64 as its two words).
        let unit = || match dtype {
            DType::I8 => Ok(BitUnit::Byte { flip: 0x80 }),
            DType::U8 => Ok(BitUnit::Byte { flip: 0 }),
            DType::I16 | DType::U16 => Ok(BitUnit::Half),
            DType::I32 | DType::U32 | DType::I64 | DType::U64 => Ok(BitUnit::Word),
            _ => Err(format!("{} of {dtype}", node.op)),
        };
        Ok(Some(match node.op {
            OpKind::BitwiseAnd | OpKind::BitwiseOr | OpKind::BitwiseXor => {
                let op = match node.op {
                    OpKind::BitwiseAnd => BitLogic::And,
                    OpKind::BitwiseOr => BitLogic::Or,
                    _ => BitLogic::Xor,
                };
                let (a, b) = (self.src(input(0))?, self.src(input(1))?);
                // Held shapes: the words of a 64-bit element broadcast as a last axis.
                let (sa, sb) = (self.held_shape(input(0)), self.held_shape(input(1)));
                let out = self.held_shape(node.outputs[0]);
                Op::BitBinary(BitBinaryOp::new(op, unit()?, (a, &sa), (b, &sb), &out))
            }
            OpKind::BitwiseNot => {
                let len = self.held_shape(input(0)).iter().product();
                Op::BitNot(BitNotOp {
                    x: self.src(input(0))?,
                    unit: unit()?,
                    len,
                })
            }
            OpKind::BitShift => {
                let width = match dtype {
                    DType::U8 => ShiftWidth::U8,
                    DType::U16 => ShiftWidth::U16,
                    DType::U32 => ShiftWidth::U32,
                    DType::U64 => ShiftWidth::U64,
                    _ => return Err(format!("BitShift of {dtype}")),
                };
                let (a, b) = (self.src(input(0))?, self.src(input(1))?);
                Op::BitShift(BitShiftOp::new(
                    node.attr_str("direction", "") == "LEFT",
                    width,
                    (a, &shapes[0]),
                    (b, &shapes[1]),
                    out_shape,
                ))
            }
            OpKind::OneHot => {
                let rank = out_shape.len();
                let axis = normalize_axis(node.attr_int("axis", -1), rank)?;
                let out_dtype = self.graph.tensors[node.outputs[0]].dtype;
                let index = self.graph.tensors[input(0)].dtype;
                let index = Held::of(index)
                    .filter(|h| *h != Held::Bool)
                    .ok_or_else(|| format!("OneHot of {index} indices"))?;
                // The bytes one element takes as held (a bool is a 0.0/1.0 word).
                let size = match out_dtype {
                    DType::Bool => 4,
                    d => d.size(),
                };
                Op::OneHot(OneHotOp {
                    indices: self.src(input(0))?,
                    index,
                    values: self.src(input(2))?,
                    size,
                    outer: out_shape[..axis].iter().product(),
                    depth: out_shape[axis],
                    inner: out_shape[axis + 1..].iter().product(),
                })
            }
            _ => return Ok(None),
        }))
    }
}
