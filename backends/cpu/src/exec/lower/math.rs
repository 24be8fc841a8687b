//! Lowering of the element-wise ops BTIR 1.3 added: GreaterOrEqual and LessOrEqual, Or
//! and Xor, Mod, Floor, Round, Sign, Reciprocal, IsNaN, IsInf and the trigonometric and
//! hyperbolic functions; and ArgMax/ArgMin.

use super::*;
use crate::ops::elementwise::Trig;
use crate::ops::int::Held;
use crate::ops::reduce::ArgOp;
use crate::ops::select::IntCompareOp;

impl Builder<'_> {
    /// The op of one of this file's nodes, `None` when `node.op` is not one of them.
    pub(super) fn lower_math(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        out_shape: &[usize],
    ) -> Result<Option<Op>, String> {
        let input = |i: usize| node.inputs[i];
        if matches!(node.op, OpKind::ArgMax | OpKind::ArgMin) {
            let x = &shapes[0];
            let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
            let dtype = self.graph.tensors[input(0)].dtype;
            // An f16 input has been widened to f32 (`half.rs`).
            let held = match Held::of(dtype) {
                Some(Held::F16) => Held::F32,
                Some(h) => h,
                None => return Err(format!("{} of {dtype}", node.op)),
            };
            return Ok(Some(Op::Arg(ArgOp {
                x: self.src(input(0))?,
                held,
                max: node.op == OpKind::ArgMax,
                last: node.attr_int("select_last_index", 0) != 0,
                outer: x[..axis].iter().product(),
                n: x[axis],
                inner: x[axis + 1..].iter().product(),
            })));
        }
        let binary = match node.op {
            OpKind::GreaterOrEqual => Some(Binary::GreaterOrEqual),
            OpKind::LessOrEqual => Some(Binary::LessOrEqual),
            OpKind::Or => Some(Binary::Or),
            OpKind::Xor => Some(Binary::Xor),
            OpKind::Mod => Some(Binary::Mod {
                floored: node.attr_int("fmod", 0) == 0,
            }),
            _ => None,
        };
        if let Some(op) = binary {
            let dtype = self.graph.tensors[input(0)].dtype;
            let ints = matches!(dtype, DType::I64 | DType::I32 | DType::I8 | DType::U8);
            if ints && node.op == OpKind::Mod {
                return self.int_binary(node, shapes, out_shape);
            }
            if ints {
                let (a, b) = (self.int_src(input(0))?, self.int_src(input(1))?);
                return Ok(Some(Op::IntCompare(IntCompareOp::new(
                    op,
                    (a, &shapes[0]),
                    (b, &shapes[1]),
                    out_shape,
                ))));
            }
            let (a, b) = (self.src(input(0))?, self.src(input(1))?);
            return Ok(Some(Op::Binary(BinaryOp::new(
                op, a, &shapes[0], b, &shapes[1], out_shape,
            ))));
        }
        let f = match node.op {
            OpKind::Floor => Unary::Floor,
            OpKind::Round => Unary::Round,
            OpKind::Sign => Unary::Sign,
            OpKind::Reciprocal => Unary::Reciprocal,
            OpKind::IsNaN => Unary::IsNaN,
            OpKind::IsInf => Unary::IsInf {
                negative: node.attr_int("detect_negative", 1) != 0,
                positive: node.attr_int("detect_positive", 1) != 0,
            },
            OpKind::Sin => Unary::Trig(Trig::Sin),
            OpKind::Cos => Unary::Trig(Trig::Cos),
            OpKind::Tan => Unary::Trig(Trig::Tan),
            OpKind::Asin => Unary::Trig(Trig::Asin),
            OpKind::Acos => Unary::Trig(Trig::Acos),
            OpKind::Atan => Unary::Trig(Trig::Atan),
            OpKind::Sinh => Unary::Trig(Trig::Sinh),
            OpKind::Cosh => Unary::Trig(Trig::Cosh),
            OpKind::Asinh => Unary::Trig(Trig::Asinh),
            OpKind::Acosh => Unary::Trig(Trig::Acosh),
            OpKind::Atanh => Unary::Trig(Trig::Atanh),
            _ => return self.lower_index(node, shapes, out_shape),
        };
        Ok(Some(Op::Unary(UnaryOp {
            x: self.src(input(0))?,
            f,
        })))
    }
}
