//! Shape rules of the math family: element-wise math and activations, comparisons and
//! logic, Where, Cast and CastLike, the normalizations and the Reduce ops.
//!
//! Element-wise ops keep their operand's shape; binary and ternary ones broadcast with
//! numpy rules. Comparisons, IsNaN, IsInf, Not and And produce bool; Cast produces the dtype named by
//! its `to` attribute, CastLike that of its second operand. LayerNormalization lists three outputs (`Y`, `Mean`, `InvStdDev`),
//! the last two f32 with the normalized axes kept as extents of 1.

use super::{broadcast_shapes, normalize_axis, Outputs};
use crate::ir::{Attr, DType, Node, OpKind};

/// The element-wise math and activations whose one output has operand 0's dtype and shape.
const SAME_SHAPE: &[OpKind] = &[
    OpKind::Sqrt,
    OpKind::Exp,
    OpKind::Log,
    OpKind::Neg,
    OpKind::Abs,
    OpKind::Erf,
    OpKind::Ceil,
    OpKind::Floor,
    OpKind::Round,
    OpKind::Sign,
    OpKind::Reciprocal,
    OpKind::Sin,
    OpKind::Cos,
    OpKind::Tan,
    OpKind::Asin,
    OpKind::Acos,
    OpKind::Atan,
    OpKind::Sinh,
    OpKind::Cosh,
    OpKind::Asinh,
    OpKind::Acosh,
    OpKind::Atanh,
    OpKind::LeakyRelu,
    OpKind::HardSigmoid,
    OpKind::HardSwish,
    OpKind::Gelu,
];

/// The outputs of `node` if its op belongs to this family, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Option<Result<Outputs, String>> {
    let op = node.op;
    let r = match op {
        op if SAME_SHAPE.contains(&op) => same_as_input(op, inputs),
        OpKind::LogSoftmax => log_softmax(node, inputs),
        OpKind::Pow | OpKind::Mod => binary(op, inputs, None),
        OpKind::Equal
        | OpKind::Greater
        | OpKind::Less
        | OpKind::GreaterOrEqual
        | OpKind::LessOrEqual => binary(op, inputs, Some(DType::Bool)),
        OpKind::IsNaN | OpKind::IsInf => same_as_input(op, inputs).map(|mut o| {
            o[0].0 = DType::Bool;
            o
        }),
        OpKind::And | OpKind::Or | OpKind::Xor => {
            bool_operands(op, inputs, 2).and_then(|()| binary(op, inputs, Some(DType::Bool)))
        }
        OpKind::Hardmax => log_softmax(node, inputs),
        OpKind::BitwiseAnd | OpKind::BitwiseOr | OpKind::BitwiseXor | OpKind::BitShift => {
            int_operands(op, inputs, 2).and_then(|()| binary(op, inputs, None))
        }
        OpKind::BitwiseNot => int_operands(op, inputs, 1).and_then(|()| same_as_input(op, inputs)),
        OpKind::TopK => top_k(node, inputs, operand),
        OpKind::Not => bool_operands(op, inputs, 1)
            .and_then(|()| same_as_input(op, inputs))
            .map(|mut o| {
                o[0].0 = DType::Bool;
                o
            }),
        OpKind::Where => where_outputs(inputs),
        OpKind::Cast => cast(node, inputs),
        OpKind::CastLike => cast_like(inputs),
        OpKind::BitCast => bit_cast(node, inputs),
        OpKind::Det => det(inputs),
        OpKind::BatchNormalization => batch_norm(node, inputs),
        OpKind::LayerNormalization => layer_norm(node, inputs),
        OpKind::ReduceMean
        | OpKind::ReduceSum
        | OpKind::ReduceMax
        | OpKind::ReduceMin
        | OpKind::ReduceProd
        | OpKind::ReduceL1
        | OpKind::ReduceL2
        | OpKind::ReduceLogSumExp
        | OpKind::ReduceSumSquare => reduce(node, inputs, operand),
        OpKind::ArgMax | OpKind::ArgMin => arg_extreme(node, inputs),
        _ => return None,
    };
    Some(r)
}

/// How many leading operands of `op` broadcast into its one output when the op is
/// element-wise (1: the output is shaped like operand 0), else `None`. Shape inference
/// uses it to carry symbolic dims through these ops before the inputs are bound, so an
/// importer rule that needs a rank (NonZero, Softmax of opset < 13) still sees one after a
/// comparison or a Cast on a model with a symbolic batch.
pub(crate) fn elementwise_operands(op: OpKind) -> Option<usize> {
    Some(match op {
        op if SAME_SHAPE.contains(&op) => 1,
        OpKind::LogSoftmax
        | OpKind::Hardmax
        | OpKind::IsNaN
        | OpKind::IsInf
        | OpKind::Not
        | OpKind::BitwiseNot
        | OpKind::Cast
        | OpKind::CastLike => 1,
        OpKind::Pow
        | OpKind::Mod
        | OpKind::Equal
        | OpKind::Greater
        | OpKind::Less
        | OpKind::GreaterOrEqual
        | OpKind::LessOrEqual
        | OpKind::And
        | OpKind::Or
        | OpKind::Xor
        | OpKind::BitwiseAnd
        | OpKind::BitwiseOr
        | OpKind::BitwiseXor
        | OpKind::BitShift => 2,
        OpKind::Where => 3,
        _ => return None,
    })
}

/// Operand `i`, or an error naming the op.
fn input(
    op: OpKind,
    inputs: &[(DType, Vec<usize>)],
    i: usize,
) -> Result<&(DType, Vec<usize>), String> {
    inputs
        .get(i)
        .ok_or_else(|| format!("{op} needs input {i}, got {} inputs", inputs.len()))
}

fn same_as_input(op: OpKind, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let (dtype, shape) = input(op, inputs, 0)?;
    Ok(vec![(*dtype, shape.clone())])
}

fn log_softmax(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let (dtype, shape) = input(node.op, inputs, 0)?;
    normalize_axis(node.attr_int("axis", -1), shape.len())?;
    Ok(vec![(*dtype, shape.clone())])
}

/// Two operands broadcast together. The output has dtype `out` when given (comparisons),
/// else operand 0's. Pow's exponent may have another numeric dtype; every other op needs
/// one dtype for both operands.
fn binary(
    op: OpKind,
    inputs: &[(DType, Vec<usize>)],
    out: Option<DType>,
) -> Result<Outputs, String> {
    let (da, a) = input(op, inputs, 0)?;
    let (db, b) = input(op, inputs, 1)?;
    if op != OpKind::Pow && da != db {
        return Err(format!("{op} operand dtypes differ: {da} and {db}"));
    }
    Ok(vec![(out.unwrap_or(*da), broadcast_shapes(a, b)?)])
}

fn bool_operands(op: OpKind, inputs: &[(DType, Vec<usize>)], n: usize) -> Result<(), String> {
    for i in 0..n {
        let (d, _) = input(op, inputs, i)?;
        if *d != DType::Bool {
            return Err(format!("{op} operand {i} must be bool, got {d}"));
        }
    }
    Ok(())
}

/// The bit ops' operands: integers (BitShift: unsigned ones).
fn int_operands(op: OpKind, inputs: &[(DType, Vec<usize>)], n: usize) -> Result<(), String> {
    for i in 0..n {
        let (d, _) = input(op, inputs, i)?;
        let ok = match op {
            OpKind::BitShift => matches!(d, DType::U8 | DType::U16 | DType::U32 | DType::U64),
            _ => d.is_int(),
        };
        if !ok {
            return Err(format!(
                "{op} operand {i} must be an integer of a bit op's type, got {d}"
            ));
        }
    }
    Ok(())
}

/// `condition`, `X`, `Y` broadcast three ways; the output has `X`'s dtype.
fn where_outputs(inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let op = OpKind::Where;
    let (dc, c) = input(op, inputs, 0)?;
    let (dx, x) = input(op, inputs, 1)?;
    let (dy, y) = input(op, inputs, 2)?;
    if *dc != DType::Bool {
        return Err(format!("Where's condition must be bool, got {dc}"));
    }
    if dx != dy {
        return Err(format!("Where's X and Y dtypes differ: {dx} and {dy}"));
    }
    let shape = broadcast_shapes(&broadcast_shapes(c, x)?, y)?;
    Ok(vec![(*dx, shape)])
}

fn cast(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let (_, shape) = input(node.op, inputs, 0)?;
    let to = match node.attrs.get("to") {
        Some(Attr::Int(code)) => *code,
        Some(other) => return Err(format!("Cast's 'to' must be an int, got {other:?}")),
        None => return Err("Cast needs the attribute 'to'".into()),
    };
    let dtype = DType::from_onnx(to).ok_or_else(|| {
        format!("Cast to ONNX data type {to} is not supported (the IR has no such dtype)")
    })?;
    Ok(vec![(dtype, shape.clone())])
}

/// BitCast: input 0's shape in the dtype `to` names, which must have the input's bit
/// width (a bool counts as its byte, as ONNX stores it).
fn bit_cast(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let (from, shape) = input(node.op, inputs, 0)?;
    if inputs.len() != 1 {
        return Err(format!("BitCast takes 1 input, got {}", inputs.len()));
    }
    let to = match node.attrs.get("to") {
        Some(Attr::Int(code)) => *code,
        Some(other) => return Err(format!("BitCast's 'to' must be an int, got {other:?}")),
        None => return Err("BitCast needs the attribute 'to'".into()),
    };
    let dtype = DType::from_onnx(to).ok_or_else(|| {
        format!("BitCast to ONNX data type {to} is not supported (the IR has no such dtype)")
    })?;
    let (a, b) = (bit_cast_width(*from), bit_cast_width(dtype));
    if a != b {
        return Err(format!(
            "BitCast from {from} ({a} bits) to {dtype} ({b} bits): the widths must be equal"
        ));
    }
    Ok(vec![(dtype, shape.clone())])
}

/// The width BitCast compares: the value bits, except a bool's, which is a byte.
pub fn bit_cast_width(dtype: DType) -> u32 {
    if dtype == DType::Bool {
        8
    } else {
        dtype.bits()
    }
}

/// Det: a float `[..., M, M]` gives `[...]`.
fn det(inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let [(dtype, x)] = inputs else {
        return Err(format!("Det takes 1 input, got {}", inputs.len()));
    };
    if !dtype.is_float() {
        return Err(format!("Det needs a float input, got {dtype}"));
    }
    match x[..] {
        [.., m, n] if m == n => Ok(vec![(*dtype, x[..x.len() - 2].to_vec())]),
        _ => Err(format!(
            "Det needs square matrices in the last two dimensions, got {x:?}"
        )),
    }
}

/// CastLike: input 0's shape in input 1's dtype.
fn cast_like(inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let (_, shape) = input(OpKind::CastLike, inputs, 0)?;
    let (dtype, _) = input(OpKind::CastLike, inputs, 1)?;
    Ok(vec![(*dtype, shape.clone())])
}

/// `X` `[N, C, ...]` (rank 1 counts as `C = 1`, as in ONNX) and four `[C]` parameters.
/// `Y` like `X`; with `training_mode` also the updated `running_mean` and `running_var`,
/// one value per channel.
fn batch_norm(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let op = OpKind::BatchNormalization;
    let (dtype, x) = input(op, inputs, 0)?;
    let channels = match x.len() {
        0 => return Err("BatchNormalization needs X of rank >= 1, got a scalar".into()),
        1 => 1,
        _ => x[1],
    };
    for (i, name) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
        let (_, s) = input(op, inputs, i)?;
        if s.as_slice() != [channels] {
            return Err(format!(
                "BatchNormalization {name} has shape {s:?}, expected [{channels}] for X {x:?}"
            ));
        }
    }
    let mut outs = vec![(*dtype, x.clone())];
    if node.attr_int("training_mode", 0) != 0 {
        outs.push((*dtype, vec![channels]));
        outs.push((*dtype, vec![channels]));
    }
    Ok(outs)
}

/// `Y` like `X`; `Mean` and `InvStdDev` (f32) with the normalized axes as extents of 1.
/// `Scale` and the optional `B` must broadcast to `X`'s shape (ONNX's function body
/// multiplies and adds them with numpy broadcasting; `Y` keeps `X`'s shape).
fn layer_norm(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let op = node.op;
    let (dtype, x) = input(op, inputs, 0)?;
    let axis = normalize_axis(node.attr_int("axis", -1), x.len())?;
    for (i, name) in [(1, "Scale"), (2, "B")] {
        let Some((_, s)) = inputs.get(i) else {
            if i == 1 {
                return Err("LayerNormalization needs Scale (input 1)".into());
            }
            continue;
        };
        if broadcast_shapes(x, s).ok().as_ref() != Some(x) {
            return Err(format!(
                "LayerNormalization {name} {s:?} does not broadcast to X {x:?}"
            ));
        }
    }
    let mut stats = x.clone();
    stats[axis..].fill(1);
    Ok(vec![
        (*dtype, x.clone()),
        (DType::F32, stats.clone()),
        (DType::F32, stats),
    ])
}

/// The axes a Reduce node reduces, as one flag per dimension of an input of rank `rank`,
/// or `None` when the node is a no-op (empty axes with `noop_with_empty_axes`).
///
/// Axes come from the constant i64 input 1 (ONNX opset 18; ReduceSum from 13) or from the
/// `axes` attribute (earlier opsets), not both. Absent or empty axes reduce every
/// dimension unless `noop_with_empty_axes` is non-zero. Negative axes count from the
/// end; a repeated axis is an error.
fn reduce_axes(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Option<Vec<bool>>, String> {
    let op = node.op;
    let (_, x) = input(op, inputs, 0)?;
    let axes: Vec<i64> = match (inputs.get(1), node.attr_ints("axes")) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{op} has both an axes input and an axes attribute; give one"
            ))
        }
        (Some((d, s)), None) => {
            if *d != DType::I64 || s.len() > 1 {
                return Err(format!(
                    "{op} axes (input 1) must be a 1-D i64 tensor, got {d} {s:?}"
                ));
            }
            operand(1).ok_or_else(|| format!("{op} axes (input 1) must be a constant"))?
        }
        (None, Some(a)) => a.to_vec(),
        (None, None) => Vec::new(),
    };
    if axes.is_empty() {
        if node.attr_int("noop_with_empty_axes", 0) != 0 {
            return Ok(None);
        }
        return Ok(Some(vec![true; x.len()]));
    }
    let mut flags = vec![false; x.len()];
    for &a in &axes {
        let d = normalize_axis(a, x.len()).map_err(|m| format!("{op} axes: {m}"))?;
        if std::mem::replace(&mut flags[d], true) {
            return Err(format!("{op} axes {axes:?} name dimension {d} twice"));
        }
    }
    Ok(Some(flags))
}

fn reduce(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let (dtype, x) = input(node.op, inputs, 0)?;
    let Some(flags) = reduce_axes(node, inputs, operand)? else {
        return Ok(vec![(*dtype, x.clone())]);
    };
    let keep = node.attr_int("keepdims", 1) != 0;
    let shape = x
        .iter()
        .zip(&flags)
        .filter_map(|(&n, &reduced)| match (reduced, keep) {
            (false, _) => Some(n),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    Ok(vec![(*dtype, shape)])
}

/// ArgMax and ArgMin: i64 positions, `axis` kept as 1 or dropped. A scalar has no axis
/// and an empty one no position, so both are errors.
fn arg_extreme(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let op = node.op;
    let (_, x) = input(op, inputs, 0)?;
    if x.is_empty() {
        return Err(format!("{op} needs an input of rank >= 1, got a scalar"));
    }
    let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
    if x[axis] == 0 {
        return Err(format!(
            "{op} along axis {axis} of extent 0 has no position to give"
        ));
    }
    let mut shape = x.clone();
    if node.attr_int("keepdims", 1) != 0 {
        shape[axis] = 1;
    } else {
        shape.remove(axis);
    }
    Ok(vec![(DType::I64, shape)])
}

/// TopK: `Values` in the input's dtype and `Indices` (i64), both the input's shape with
/// `k` along `axis`. `k` is the constant input 1 or the attribute `k` (before opset 10).
fn top_k(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let (dtype, x) = input(node.op, inputs, 0)?;
    if x.is_empty() {
        return Err("TopK needs an input of rank >= 1, got a scalar".into());
    }
    let axis = normalize_axis(node.attr_int("axis", -1), x.len())?;
    let k = match inputs.get(1) {
        Some((DType::I64, s)) if s.iter().product::<usize>() == 1 => operand(1)
            .and_then(|v| v.first().copied())
            .ok_or("TopK k (input 1) must be a constant")?,
        Some((d, s)) => return Err(format!("TopK k must be one i64 value, got {d} {s:?}")),
        None => node.attr_int("k", -1),
    };
    let k = usize::try_from(k).map_err(|_| format!("TopK k {k} must not be negative"))?;
    if k > x[axis] {
        return Err(format!("TopK k {k} exceeds the axis extent {}", x[axis]));
    }
    let mut shape = x.clone();
    shape[axis] = k;
    Ok(vec![(*dtype, shape.clone()), (DType::I64, shape)])
}
