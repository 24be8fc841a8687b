//! What this delegate claims, node by node, and why it declines the rest.
//!
//! Claiming a node is a promise to match the reference executor on every input, including
//! empty tensors, NaN and infinities; so every case whose meaning is unclear or not
//! implemented is declined with a reason code and a message naming the thing at fault.

use baton_delegate_api::ir::{Attr, DType, Graph, Node, OpKind};
use baton_delegate_api::shape::{
    has_value_dependent_shape, infer_outputs, normalize_axis, PoolGeometry,
};
use baton_delegate_api::{Constants, DeclineReason, Support};

use crate::ops::layout::MAX_RANK;

mod half;
mod tail;

pub(crate) use half::{half_computed, half_computed_node, half_multi_output, read_at_init};
pub(crate) use tail::int_clip_bounds;

/// The largest stride, dilation, pad or axis value accepted.
const MAX_EXTENT: u64 = 1 << 31;

/// Checks one node of `graph`.
pub(crate) fn check_node(graph: &Graph, node: &Node, consts: &Constants<'_>) -> Support {
    match check(graph, node, consts) {
        Ok(()) => Support::Yes,
        Err(no) => no,
    }
}

/// The bounds of a Clip node, from its attributes or constant inputs (ONNX defaults:
/// the lowest and highest finite f32).
pub(crate) fn clip_bounds(
    graph: &Graph,
    node: &Node,
    consts: &Constants<'_>,
) -> Result<(f32, f32), Support> {
    let has_attr = node.attrs.contains_key("min") || node.attrs.contains_key("max");
    if has_attr && node.inputs.len() > 1 {
        return Err(Support::no(
            DeclineReason::Attribute,
            "Clip bounds given both as attributes and as inputs",
        ));
    }
    let bound = |i: usize, attr: &str, default: f32| -> Result<f32, Support> {
        let v = match node.inputs.get(i) {
            None => node.attr_float(attr, default),
            Some(&t) => {
                let decl = &graph.tensors[t];
                let bytes = consts.bytes(t).filter(|_| decl.is_const());
                let Some(bytes) = bytes else {
                    return Err(Support::no(
                        DeclineReason::NotConstant,
                        format!(
                            "Clip {attr} '{}' is computed at run time; \
                             only constant bounds are supported",
                            decl.name
                        ),
                    ));
                };
                // An f16 Clip's bounds are f16 (exact in f32, `half_computed`).
                let values: Vec<f32> = match decl.dtype {
                    DType::F16 => bytes
                        .chunks_exact(2)
                        .map(|h| crate::ops::int::f16_to_f32(u16::from_le_bytes([h[0], h[1]])))
                        .collect(),
                    _ => bytemuck::pod_collect_to_vec::<u8, f32>(bytes),
                };
                match values[..] {
                    [v] => v,
                    _ => {
                        return Err(Support::no(
                            DeclineReason::Shape,
                            format!("Clip {attr} '{}' must hold exactly one value", decl.name),
                        ))
                    }
                }
            }
        };
        if v.is_nan() {
            return Err(Support::no(
                DeclineReason::Attribute,
                format!("Clip {attr} is NaN"),
            ));
        }
        Ok(v)
    };
    Ok((bound(1, "min", f32::MIN)?, bound(2, "max", f32::MAX)?))
}

/// The kinds of attribute values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    /// A float (an integer value is accepted too).
    Float,
    Ints,
    Floats,
    Str,
}

/// The attributes each op may carry here, with their kinds.
fn known_attributes(op: OpKind) -> &'static [(&'static str, Kind)] {
    use Kind::*;
    const WINDOW: &[(&str, Kind)] = &[
        ("auto_pad", Str),
        ("ceil_mode", Int),
        ("count_include_pad", Int),
        ("dilations", Ints),
        ("kernel_shape", Ints),
        ("pads", Ints),
        ("storage_order", Int),
        ("strides", Ints),
    ];
    match op {
        OpKind::Gemm => &[
            ("alpha", Float),
            ("beta", Float),
            ("transA", Int),
            ("transB", Int),
        ],
        OpKind::Conv | OpKind::ConvInteger => &[
            ("auto_pad", Str),
            ("dilations", Ints),
            ("group", Int),
            ("kernel_shape", Ints),
            ("pads", Ints),
            ("strides", Ints),
        ],
        OpKind::MaxPool => WINDOW,
        OpKind::AveragePool => WINDOW,
        OpKind::Clip => &[("min", Float), ("max", Float)],
        OpKind::LeakyRelu => &[("alpha", Float)],
        OpKind::HardSigmoid => &[("alpha", Float), ("beta", Float)],
        OpKind::Softmax | OpKind::Concat | OpKind::Flatten => &[("axis", Int)],
        OpKind::Reshape => &[("allowzero", Int), ("shape", Ints)],
        OpKind::Transpose => &[("perm", Ints)],
        OpKind::ReduceMean
        | OpKind::ReduceSum
        | OpKind::ReduceMax
        | OpKind::ReduceMin
        | OpKind::ReduceProd
        | OpKind::ReduceL1
        | OpKind::ReduceL2
        | OpKind::ReduceLogSumExp
        | OpKind::ReduceSumSquare => &[
            ("axes", Ints),
            ("keepdims", Int),
            ("noop_with_empty_axes", Int),
        ],
        OpKind::LayerNormalization => &[("axis", Int), ("epsilon", Float), ("stash_type", Int)],
        OpKind::ArgMax | OpKind::ArgMin => {
            &[("axis", Int), ("keepdims", Int), ("select_last_index", Int)]
        }
        OpKind::LogSoftmax | OpKind::Gather => &[("axis", Int)],
        OpKind::Split => &[("axis", Int), ("split", Ints), ("num_outputs", Int)],
        OpKind::Squeeze | OpKind::Unsqueeze => &[("axes", Ints)],
        // Before opset 10, starts, ends and axes are attributes.
        OpKind::Slice => &[("starts", Ints), ("ends", Ints), ("axes", Ints)],
        OpKind::QuantizeLinear | OpKind::DequantizeLinear => {
            &[("axis", Int), ("block_size", Int), ("saturate", Int)]
        }
        OpKind::LSTM => &[
            ("activations", Str),
            ("clip", Float),
            ("direction", Str),
            ("hidden_size", Int),
            ("input_forget", Int),
            ("layout", Int),
        ],
        _ => tail::known_attributes(op),
    }
}

/// The ops this delegate has kernels for.
const IMPLEMENTED: &[OpKind] = &[
    OpKind::MatMul,
    OpKind::Gemm,
    OpKind::Conv,
    OpKind::Add,
    OpKind::Sub,
    OpKind::Mul,
    OpKind::Div,
    OpKind::Relu,
    OpKind::Clip,
    OpKind::Sigmoid,
    OpKind::Tanh,
    OpKind::Softmax,
    OpKind::MaxPool,
    OpKind::AveragePool,
    OpKind::GlobalAveragePool,
    OpKind::Reshape,
    OpKind::Transpose,
    OpKind::Concat,
    OpKind::Flatten,
    OpKind::ReduceMean,
    OpKind::LayerNormalization,
    OpKind::Erf,
    OpKind::Sqrt,
    OpKind::Exp,
    OpKind::Log,
    OpKind::Neg,
    OpKind::Abs,
    OpKind::LeakyRelu,
    OpKind::HardSigmoid,
    OpKind::HardSwish,
    OpKind::LogSoftmax,
    OpKind::Gather,
    OpKind::Split,
    OpKind::Slice,
    OpKind::Squeeze,
    OpKind::Unsqueeze,
    OpKind::LSTM,
    OpKind::QuantizeLinear,
    OpKind::DequantizeLinear,
    OpKind::Pow,
    OpKind::Equal,
    OpKind::Not,
    OpKind::Greater,
    OpKind::Less,
    OpKind::And,
    OpKind::Where,
    OpKind::Cast,
    OpKind::Identity,
    OpKind::BatchNormalization,
    OpKind::ReduceSum,
    OpKind::ReduceMax,
    OpKind::Pad,
    OpKind::Resize,
    OpKind::ConvTranspose,
    OpKind::Gelu,
    OpKind::Ceil,
    OpKind::CastLike,
    OpKind::Expand,
    OpKind::Tile,
    OpKind::GRU,
    OpKind::RNN,
    OpKind::Shape,
    OpKind::Size,
    OpKind::ConstantOfShape,
    OpKind::GreaterOrEqual,
    OpKind::LessOrEqual,
    OpKind::Or,
    OpKind::Xor,
    OpKind::Mod,
    OpKind::Floor,
    OpKind::Round,
    OpKind::Sign,
    OpKind::Reciprocal,
    OpKind::IsNaN,
    OpKind::IsInf,
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
    OpKind::ReduceMin,
    OpKind::ReduceProd,
    OpKind::ReduceL1,
    OpKind::ReduceL2,
    OpKind::ReduceLogSumExp,
    OpKind::ReduceSumSquare,
    OpKind::ArgMax,
    OpKind::ArgMin,
    OpKind::CumSum,
    OpKind::Trilu,
    OpKind::Hardmax,
    OpKind::TopK,
    OpKind::GatherElements,
    OpKind::DepthToSpace,
    OpKind::SpaceToDepth,
    OpKind::GatherND,
    OpKind::ScatterElements,
    OpKind::ScatterND,
    OpKind::Range,
    OpKind::OneHot,
    OpKind::BitwiseAnd,
    OpKind::BitwiseOr,
    OpKind::BitwiseXor,
    OpKind::BitwiseNot,
    OpKind::BitShift,
    OpKind::CumProd,
    OpKind::Attention,
    OpKind::RotaryEmbedding,
    OpKind::Einsum,
    OpKind::GridSample,
    OpKind::MatMulInteger,
    OpKind::ConvInteger,
    OpKind::ReverseSequence,
    OpKind::CausalConvWithState,
    OpKind::AffineGrid,
    OpKind::Det,
    OpKind::MaxUnpool,
    OpKind::Col2Im,
    OpKind::DFT,
    OpKind::STFT,
    OpKind::HannWindow,
    OpKind::HammingWindow,
    OpKind::BlackmanWindow,
    OpKind::MelWeightMatrix,
    OpKind::RoiAlign,
    OpKind::LinearAttention,
    OpKind::DeformConv,
    OpKind::TensorScatter,
    OpKind::BitCast,
];

fn check(graph: &Graph, node: &Node, consts: &Constants<'_>) -> Result<(), Support> {
    if has_value_dependent_shape(node.op) {
        // Run alone with bounded outputs (ABI 1.3): the host sizes each output for its
        // bound and takes the extents the node reports.
        return crate::ops::dynamic::check(graph, node, consts).map_err(|m| shape_no(node, m));
    }
    if !IMPLEMENTED.contains(&node.op) {
        return Err(Support::no(
            DeclineReason::Op,
            format!("{} is not implemented by the CPU delegate", node.op),
        ));
    }
    check_attributes(node)?;
    check_arity(node)?;
    let shapes = check_tensors(graph, node)?;
    check_op(graph, node, &shapes, consts)?;
    if node.op == OpKind::Range {
        // Its length comes from the constants of any Range dtype (the generic rule reads
        // i64 operands only).
        return tail::check_range_length(graph, node, consts);
    }
    let shape_operand = |i: usize| {
        let t = *node.inputs.get(i)?;
        consts.bytes(t)?;
        consts.i64s(t)
    };
    let typed: Vec<(DType, Vec<usize>)> = node
        .inputs
        .iter()
        .zip(&shapes)
        .map(|(&t, s)| (graph.tensors[t].dtype, s.clone()))
        .collect();
    let inferred = infer_outputs(node, &typed, shape_operand).map_err(|e| shape_no(node, e))?;
    for (k, &t) in node.outputs.iter().enumerate() {
        let decl = &graph.tensors[t];
        let declared = decl.static_shape();
        match inferred.get(k) {
            Some((dtype, shape)) if *dtype == decl.dtype && declared.as_ref() == Some(shape) => {}
            other => {
                return Err(shape_no(
                    node,
                    format!(
                        "declared output {k} ('{}') {} {declared:?} differs from the inferred \
                         {other:?}",
                        decl.name, decl.dtype
                    ),
                ))
            }
        }
    }
    Ok(())
}

pub(crate) fn shape_no(node: &Node, message: String) -> Support {
    Support::no(DeclineReason::Shape, format!("{}: {message}", node.op))
}

fn check_attributes(node: &Node) -> Result<(), Support> {
    let known = known_attributes(node.op);
    for (name, value) in &node.attrs {
        let Some(&(_, kind)) = known.iter().find(|(n, _)| n == name) else {
            return Err(Support::no(
                DeclineReason::Attribute,
                format!("{} attribute '{name}' is not supported", node.op),
            ));
        };
        let fits = matches!(
            (kind, value),
            (Kind::Int, Attr::Int(_))
                | (Kind::Float, Attr::Float(_) | Attr::Int(_))
                | (Kind::Ints, Attr::Ints(_))
                | (Kind::Floats, Attr::Floats(_))
                | (Kind::Str, Attr::Str(_))
        );
        if !fits {
            return Err(Support::no(
                DeclineReason::Attribute,
                format!(
                    "{} attribute '{name}' has the wrong type ({value:?})",
                    node.op
                ),
            ));
        }
        // Window arithmetic (kernel x dilation + pads) must not overflow. (Slice clamps
        // its bounds, which exporters give as the i64 extremes for "to the end".)
        if let (Attr::Ints(v), false) = (value, node.op == OpKind::Slice) {
            if v.iter().any(|x| x.unsigned_abs() > MAX_EXTENT) {
                return Err(Support::no(
                    DeclineReason::Attribute,
                    format!("{} attribute '{name}' = {v:?} is out of range", node.op),
                ));
            }
        }
    }
    Ok(())
}

fn check_arity(node: &Node) -> Result<(), Support> {
    let (min, max) = match node.op {
        OpKind::Gemm | OpKind::Conv => (2, 3),
        OpKind::QuantizeLinear | OpKind::DequantizeLinear => (2, 3),
        OpKind::MatMul | OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => (2, 2),
        OpKind::Clip => (1, 3),
        OpKind::Reshape => (1, 2),
        OpKind::Concat => (1, usize::MAX),
        OpKind::ReduceMean | OpKind::Split | OpKind::Squeeze | OpKind::Unsqueeze => (1, 2),
        OpKind::LayerNormalization => (2, 3),
        OpKind::Gather => (2, 2),
        OpKind::Slice if node.attrs.contains_key("starts") => (1, 1),
        OpKind::Slice => (3, 5),
        OpKind::LSTM => (3, 8),
        op => tail::arity(op),
    };
    let max_outputs = match node.op {
        OpKind::Split => usize::MAX,
        OpKind::LayerNormalization | OpKind::LSTM => 3,
        OpKind::Attention => 4,
        OpKind::GRU | OpKind::RNN | OpKind::TopK | OpKind::CausalConvWithState => 2,
        OpKind::LinearAttention => 2,
        _ => 1,
    };
    let n = node.inputs.len();
    if n < min || n > max {
        return Err(Support::no(
            DeclineReason::Other,
            format!("{} with {n} inputs is not supported", node.op),
        ));
    }
    if node.outputs.is_empty() || node.outputs.len() > max_outputs {
        return Err(Support::no(
            DeclineReason::Other,
            format!(
                "{} with {} outputs is not supported (1 to {max_outputs})",
                node.op,
                node.outputs.len()
            ),
        ));
    }
    Ok(())
}

/// Checks dtypes, static shapes, ranks and sizes of every operand; returns input shapes.
fn check_tensors(graph: &Graph, node: &Node) -> Result<Vec<Vec<usize>>, Support> {
    let mut shapes = Vec::with_capacity(node.inputs.len());
    let tensors = node.inputs.iter().enumerate().map(|(i, &t)| (Some(i), t));
    for (pos, t) in tensors.chain(node.outputs.iter().map(|&t| (None, t))) {
        let decl = &graph.tensors[t];
        let expected = expected_dtypes(node.op, pos);
        let absent = pos.is_some() && decl.static_shape().is_some_and(|s| s.contains(&0));
        let recurrent = matches!(node.op, OpKind::LSTM | OpKind::GRU | OpKind::RNN);
        let optional = recurrent && pos.is_some_and(|p| p >= 3);
        // f16 where f32 is read, for the ops computed in f32 (`exec/lower/half.rs`).
        let half = decl.dtype == DType::F16
            && half_computed(node.op)
            && (node.outputs.len() == 1 || half_multi_output(node.op))
            && expected.contains(&DType::F32);
        if !(expected.contains(&decl.dtype) || half || absent && optional) {
            return Err(Support::no(
                DeclineReason::DType,
                format!(
                    "{}: tensor '{}' is {}; the CPU delegate handles {expected:?} here",
                    node.op, decl.name, decl.dtype
                ),
            ));
        }
        let Some(shape) = decl.static_shape() else {
            return Err(Support::no(
                DeclineReason::Shape,
                format!(
                    "{}: tensor '{}' has a symbolic dimension {}",
                    node.op,
                    decl.name,
                    baton_delegate_api::ir::shape_string(&decl.shape)
                ),
            ));
        };
        if shape.len() > MAX_RANK {
            return Err(Support::no(
                DeclineReason::Shape,
                format!(
                    "{}: tensor '{}' has rank {} (at most {MAX_RANK} supported)",
                    node.op,
                    decl.name,
                    shape.len()
                ),
            ));
        }
        let bytes = shape
            .iter()
            .try_fold(decl.dtype.size(), |a, &d| a.checked_mul(d))
            .filter(|&b| b <= isize::MAX as usize);
        if bytes.is_none() {
            return Err(Support::no(
                DeclineReason::Resource,
                format!(
                    "{}: tensor '{}' of shape {shape:?} is too large",
                    node.op, decl.name
                ),
            ));
        }
        if pos.is_some() {
            shapes.push(shape);
        }
    }
    Ok(shapes)
}

/// The dtypes the CPU delegate reads at input `pos` (`None`: an output) of an `op` node:
/// f32 data, and i64 (or i32) shape, axis and index operands.
fn expected_dtypes(op: OpKind, pos: Option<usize>) -> &'static [DType] {
    match (op, pos) {
        (
            OpKind::Reshape
            | OpKind::ReduceMean
            | OpKind::Split
            | OpKind::Squeeze
            | OpKind::Unsqueeze
            | OpKind::Slice,
            Some(1..),
        ) => &[DType::I64],
        (OpKind::Gather, Some(1)) => &[DType::I64, DType::I32],
        (OpKind::DequantizeLinear, Some(0 | 2)) => &[DType::I8, DType::U8, DType::I32],
        (OpKind::QuantizeLinear, Some(2) | None) => &[DType::I8, DType::U8],
        // f16 is widened to f32 before the op (`half_computed`).
        (OpKind::QuantizeLinear, Some(0)) => &[DType::F32, DType::I32],
        (
            OpKind::ReduceSum
            | OpKind::ReduceMax
            | OpKind::ReduceMin
            | OpKind::ReduceProd
            | OpKind::ReduceL1
            | OpKind::ReduceL2
            | OpKind::ReduceLogSumExp
            | OpKind::ReduceSumSquare,
            Some(1..),
        ) => &[DType::I64],
        _ => tail::expected_dtypes(op, pos),
    }
}

/// Op-specific limits, checked before shape inference (which assumes sane operands).
fn check_op(
    graph: &Graph,
    node: &Node,
    shapes: &[Vec<usize>],
    consts: &Constants<'_>,
) -> Result<(), Support> {
    let x = &shapes[0];
    match node.op {
        OpKind::QuantizeLinear | OpKind::DequantizeLinear => {
            // A run-time i32 tensor is read as words (`crate::ops::quant`), a constant
            // one folded at init; 8-bit ones are stored bytes.
            crate::quant::QParams::of(graph, node, consts)
                .map_err(|m| Support::no(DeclineReason::Other, format!("{}: {m}", node.label())))?;
        }
        OpKind::Conv => {
            let w = &shapes[1];
            if x.len() > 4 {
                return Err(shape_no(
                    node,
                    format!("input {x:?}: only 1-D and 2-D convolutions are implemented"),
                ));
            }
            if w.len() < 3 || w[2..].contains(&0) {
                return Err(shape_no(
                    node,
                    format!("weight shape {w:?} has an empty kernel"),
                ));
            }
            let same = node.attr_str("auto_pad", "NOTSET").starts_with("SAME");
            if same && x.len() > 2 && x[2..].contains(&0) {
                return Err(shape_no(
                    node,
                    format!("auto_pad SAME on empty input {x:?}"),
                ));
            }
        }
        OpKind::MaxPool | OpKind::AveragePool => check_pool(node, x)?,
        OpKind::MatMulInteger | OpKind::ConvInteger => {
            check_int_product(graph, node, shapes, consts)?
        }
        OpKind::Col2Im => {
            require_const_operands(graph, node, consts)?;
            let image = consts.i64s(node.inputs[1]).unwrap_or_default();
            let block = consts.i64s(node.inputs[2]).unwrap_or_default();
            if image.iter().chain(&block).any(|&v| v < 0) {
                return Err(shape_no(
                    node,
                    format!("image_shape {image:?} or block_shape {block:?} is negative"),
                ));
            }
            let image: Vec<usize> = image.iter().map(|&v| v as usize).collect();
            let block: Vec<usize> = block.iter().map(|&v| v as usize).collect();
            baton_delegate_api::shape::col2im_geometry(node, x, &image, &block)
                .map_err(|e| shape_no(node, e))?;
        }
        OpKind::MaxUnpool => {
            let unpooled = baton_delegate_api::shape::max_unpool_shape(node, x)
                .map_err(|e| shape_no(node, e))?;
            let out = graph.tensors[node.outputs[0]].static_shape();
            let fits = out.as_ref().is_some_and(|o| {
                o.len() == unpooled.len() && o.iter().zip(&unpooled).all(|(a, b)| a >= b)
            });
            if !fits || shapes[1] != *x {
                return Err(shape_no(
                    node,
                    format!(
                        "indices {:?} for X {x:?}, or output {out:?} smaller than the \
                         unpooled {unpooled:?}",
                        shapes[1]
                    ),
                ));
            }
        }
        OpKind::Det => {
            let r = x.len();
            if r < 2 || x[r - 1] != x[r - 2] {
                return Err(shape_no(
                    node,
                    format!("input {x:?} is not square matrices"),
                ));
            }
        }
        OpKind::AffineGrid => {
            let r = x.get(1).copied().unwrap_or(0);
            if !(x.len() == 3 && (r == 2 || r == 3) && x[2] == r + 1) {
                return Err(shape_no(
                    node,
                    format!("theta {x:?} is not [N, 2, 3] or [N, 3, 4]"),
                ));
            }
            let size = node.inputs[1];
            if !(graph.tensors[size].is_const() && consts.bytes(size).is_some()) {
                return Err(Support::no(
                    DeclineReason::NotConstant,
                    format!(
                        "{}: size '{}' is computed at run time; it decides the output's shape",
                        node.label(),
                        graph.tensors[size].name
                    ),
                ));
            }
        }
        OpKind::CausalConvWithState => {
            let act = node.attr_str("activation", "none");
            if !matches!(act, "none" | "silu" | "swish") {
                return Err(Support::no(
                    DeclineReason::Attribute,
                    format!(
                        "{}: activation '{act}' is not none, silu or swish",
                        node.label()
                    ),
                ));
            }
            let w = &shapes[1];
            if x.len() != 3 || w.len() != 3 || w[2] == 0 || w[1] != 1 || w[0] != x[1] {
                return Err(shape_no(
                    node,
                    format!("input {x:?} and weight {w:?} are not [B, C, L] and [C, 1, K >= 1]"),
                ));
            }
            let want = [vec![x[1]], vec![x[0], x[1], w[2] - 1]];
            for (i, want) in (2..shapes.len()).zip(want) {
                let s = &shapes[i];
                if s.iter().product::<usize>() > 0 && *s != want {
                    return Err(shape_no(
                        node,
                        format!("operand {i} {s:?} is not {want:?} (or 0 elements)"),
                    ));
                }
            }
        }
        OpKind::ReverseSequence => {
            let axes = (
                node.attr_int("batch_axis", 1),
                node.attr_int("time_axis", 0),
            );
            if !matches!(axes, (0, 1) | (1, 0)) {
                return Err(Support::no(
                    DeclineReason::Attribute,
                    format!(
                        "{}: batch_axis {} and time_axis {} are not 0 and 1",
                        node.label(),
                        axes.0,
                        axes.1
                    ),
                ));
            }
            if x.len() < 2 {
                return Err(shape_no(node, format!("input {x:?} has rank below 2")));
            }
            let batch = x[usize::from(axes.0 == 1)];
            if shapes[1] != [batch] {
                return Err(shape_no(
                    node,
                    format!("sequence_lens {:?} is not [{batch}]", shapes[1]),
                ));
            }
        }
        OpKind::GlobalAveragePool if x.len() >= 3 && x[2..].contains(&0) => {
            return Err(shape_no(
                node,
                format!("the mean of an empty spatial extent ({x:?}) is undefined"),
            ));
        }
        OpKind::Clip => {
            let dtype = graph.tensors[node.inputs[0]].dtype;
            if let Some(&t) = node.inputs[1..]
                .iter()
                .find(|&&t| graph.tensors[t].dtype != dtype)
            {
                return Err(Support::no(
                    DeclineReason::DType,
                    format!(
                        "Clip bound '{}' is {}, the input {dtype}",
                        graph.tensors[t].name, graph.tensors[t].dtype
                    ),
                ));
            }
            if matches!(dtype, DType::F32 | DType::F16) {
                clip_bounds(graph, node, consts)?;
            } else {
                int_clip_bounds(graph, node, consts)?;
            }
        }
        OpKind::Slice => {
            let by_attr = ["starts", "ends", "axes"].map(|a| node.attrs.contains_key(a));
            if by_attr[0] != by_attr[1] || by_attr[2] && !by_attr[0] {
                return Err(Support::no(
                    DeclineReason::Attribute,
                    "Slice with some of starts, ends and axes as attributes and the others \
                     as inputs",
                ));
            }
            require_const_operands(graph, node, consts)?
        }
        OpKind::Split | OpKind::Squeeze | OpKind::Unsqueeze => {
            require_const_operands(graph, node, consts)?
        }
        OpKind::LSTM => {
            recurrent_clip(node)?;
            check_lstm(graph, node, consts)?
        }
        OpKind::ReduceMean
        | OpKind::ReduceSum
        | OpKind::ReduceMax
        | OpKind::ReduceMin
        | OpKind::ReduceProd
        | OpKind::ReduceL1
        | OpKind::ReduceL2
        | OpKind::ReduceLogSumExp
        | OpKind::ReduceSumSquare => {
            // Any set of axes (scattered ones through per-output offset tables).
            require_const_operands(graph, node, consts)?;
            let values = |t| consts.bytes(t).and_then(|_| consts.i64s(t));
            crate::exec::reduced_axes(node, x, values).map_err(|e| shape_no(node, e))?;
        }
        OpKind::LayerNormalization => {
            let axis = normalize_axis(node.attr_int("axis", -1), x.len())
                .map_err(|e| shape_no(node, e))?;
            for s in &shapes[1..] {
                // Right-aligned to X, the operand must not vary before `axis`.
                let lead =
                    (x.len() - s.len().min(x.len())..axis).all(|d| s[d + s.len() - x.len()] == 1);
                if s.len() > x.len() || !lead {
                    return Err(shape_no(
                        node,
                        format!("Scale/B {s:?} varies across the normalized rows of {x:?}"),
                    ));
                }
            }
        }
        OpKind::Reshape => {
            let by_attr = node.attrs.contains_key("shape");
            match (by_attr, node.inputs.get(1)) {
                (true, Some(_)) => {
                    return Err(Support::no(
                        DeclineReason::Attribute,
                        "Reshape target given both as the 'shape' attribute and as an input",
                    ))
                }
                (false, None) => {
                    return Err(Support::no(
                        DeclineReason::Other,
                        "Reshape without a target shape",
                    ))
                }
                (false, Some(&t)) if consts.bytes(t).is_none() => {
                    return Err(Support::no(
                        DeclineReason::NotConstant,
                        "Reshape target shape is computed at run time; \
                         only constant shapes are supported",
                    ))
                }
                (false, Some(&t)) => {
                    let values = consts.i64s(t).unwrap_or_default();
                    if shapes[1].len() != 1 || values.len() != shapes[1][0] {
                        return Err(shape_no(
                            node,
                            format!("target shape operand {:?} is not a 1-D list", shapes[1]),
                        ));
                    }
                }
                (true, None) => {}
            }
        }
        _ => tail::check_op(graph, node, shapes, consts)?,
    }
    Ok(())
}

/// MatMulInteger and ConvInteger: constant weights (packed at init) and zero points of
/// the operand's dtype, one value or one per row of A / column of B / output channel;
/// 1-D and 2-D convolutions.
fn check_int_product(
    graph: &Graph,
    node: &Node,
    shapes: &[Vec<usize>],
    consts: &Constants<'_>,
) -> Result<(), Support> {
    let w = &graph.tensors[node.inputs[1]];
    if !(w.is_const() && consts.bytes(node.inputs[1]).is_some()) {
        return Err(Support::no(
            DeclineReason::NotConstant,
            format!(
                "{}: weights '{}' are computed at run time; only constant weights are \
                 packed for the int8 kernels",
                node.label(),
                w.name
            ),
        ));
    }
    let (x, ws) = (&shapes[0], &shapes[1]);
    let conv = node.op == OpKind::ConvInteger;
    if x.is_empty() || ws.is_empty() {
        return Err(shape_no(node, "a rank-0 operand".into()));
    }
    // The lines a zero point may be given per: rows of A, columns of B, output channels.
    let lines = |i: usize| -> usize {
        match (conv, i) {
            (true, 2) => 1,
            (true, _) => ws[0],
            (false, 2) if x.len() >= 2 => x[x.len() - 2],
            (false, 2) => 1,
            (false, _) if ws.len() >= 2 => ws[ws.len() - 1],
            (false, _) => 1,
        }
    };
    for (i, (&t, shape)) in node.inputs.iter().zip(shapes).enumerate().skip(2) {
        let decl = &graph.tensors[t];
        let operand = graph.tensors[node.inputs[i - 2]].dtype;
        if !(decl.is_const() && consts.bytes(t).is_some()) {
            return Err(Support::no(
                DeclineReason::NotConstant,
                format!(
                    "{}: zero point '{}' is computed at run time; only constant zero points \
                     are supported",
                    node.label(),
                    decl.name
                ),
            ));
        }
        let n: usize = shape.iter().product();
        if n > 0 && decl.dtype != operand {
            return Err(Support::no(
                DeclineReason::DType,
                format!(
                    "{}: zero point '{}' is {}, its operand {operand}",
                    node.label(),
                    decl.name,
                    decl.dtype
                ),
            ));
        }
        if shape.len() > 1 || !(n <= 1 || n == lines(i)) {
            return Err(shape_no(
                node,
                format!(
                    "zero point '{}' of shape {:?}: one value or {} expected",
                    decl.name,
                    shape,
                    lines(i)
                ),
            ));
        }
    }
    if conv {
        if x.len() > 4 {
            return Err(shape_no(
                node,
                format!("input {x:?}: only 1-D and 2-D convolutions are implemented"),
            ));
        }
        if ws.len() < 3 || ws[2..].contains(&0) {
            return Err(shape_no(
                node,
                format!("weight shape {ws:?} has an empty kernel"),
            ));
        }
        let same = node.attr_str("auto_pad", "NOTSET").starts_with("SAME");
        if same && x.len() > 2 && x[2..].contains(&0) {
            return Err(shape_no(
                node,
                format!("auto_pad SAME on empty input {x:?}"),
            ));
        }
    }
    Ok(())
}

fn check_pool(node: &Node, x: &[usize]) -> Result<(), Support> {
    if !(3..=5).contains(&x.len()) {
        return Err(shape_no(
            node,
            format!("input {x:?}: 1 to 3 spatial axes supported"),
        ));
    }
    if x[2..].contains(&0) {
        return Err(shape_no(
            node,
            format!("empty spatial extent in input {x:?}"),
        ));
    }
    if node.attr_int("storage_order", 0) != 0 {
        return Err(Support::no(
            DeclineReason::Attribute,
            "MaxPool attribute 'storage_order' = 1 is not supported",
        ));
    }
    // Windows wholly in the padding are well defined (-inf, or NaN for 0/0), as in the
    // reference; only the geometry itself may be refused.
    PoolGeometry::new(node, x).map_err(|e| shape_no(node, e))?;
    Ok(())
}

/// LSTM as implemented: layout 0, default activations, `clip`, `input_forget`, peepholes
/// (constant or not), and constant weights (packed at init); `sequence_lens` constant or
/// not.
fn check_lstm(graph: &Graph, node: &Node, consts: &Constants<'_>) -> Result<(), Support> {
    let attr_no = |m: String| Err(Support::no(DeclineReason::Attribute, format!("LSTM {m}")));
    if node.attr_int("layout", 0) != 0 {
        return attr_no("layout 1 (batch first) is not supported".into());
    }
    if let Some(a) = node.attrs.get("activations") {
        let Attr::Str(s) = a else {
            return attr_no(format!("activations {a:?} are not supported"));
        };
        let s = s.to_ascii_lowercase().replace(' ', "");
        if !s
            .split(',')
            .collect::<Vec<_>>()
            .chunks(3)
            .all(|c| c.join(",") == "sigmoid,tanh,tanh")
        {
            return attr_no(format!("activations '{s}': only sigmoid,tanh,tanh"));
        }
    }
    let direction = node.attr_str("direction", "forward");
    if !matches!(direction, "forward" | "reverse" | "bidirectional") {
        return attr_no(format!("direction '{direction}' is not supported"));
    }
    let present = |i: usize| {
        node.inputs.get(i).is_some_and(|&t| {
            graph.tensors[t]
                .static_shape()
                .is_some_and(|s| !s.contains(&0))
        })
    };
    for i in [1, 2, 3] {
        if present(i) && consts.bytes(node.inputs[i]).is_none() {
            return Err(Support::no(
                DeclineReason::NotConstant,
                format!(
                    "LSTM weight '{}' is computed at run time; only constant W, R and B are \
                     supported",
                    graph.tensors[node.inputs[i]].name
                ),
            ));
        }
    }
    Ok(())
}

/// Axis, shape and bound operands (inputs 1 on) must be constants: they fix shapes.
pub(crate) fn require_const_operands(
    graph: &Graph,
    node: &Node,
    consts: &Constants<'_>,
) -> Result<(), Support> {
    for &t in &node.inputs[1..] {
        if consts.bytes(t).is_none() {
            return Err(Support::no(
                DeclineReason::NotConstant,
                format!(
                    "{} operand '{}' is computed at run time; only constants are supported",
                    node.op, graph.tensors[t].name
                ),
            ));
        }
    }
    Ok(())
}

/// An LSTM, GRU or RNN `clip` the kernels can clamp with: not NaN (the lowering refuses it
/// too, `exec/lower`'s `recurrent_clip`).
pub(crate) fn recurrent_clip(node: &Node) -> Result<(), Support> {
    if node.attrs.contains_key("clip") && node.attr_float("clip", 0.0).is_nan() {
        return Err(Support::no(
            DeclineReason::Attribute,
            format!("{}: clip is NaN", node.label()),
        ));
    }
    Ok(())
}
