//! What the delegate takes of the tail ops (comparisons, logic, Where, Pow, Cast,
//! BatchNormalization, Pad, Resize, ConvTranspose) and the bool tensors they use.
//!
//! Bools are held as 0.0/1.0 floats, i32 as its bits in an f32 slot and i64 as its bytes
//! in two, so the data-movement ops carry them as they carry f32; i8, u8 and f16 are
//! held as stored bytes, which the views and the movers that walk element indices carry
//! too (nearest Resize included). Integer arithmetic, maps, reductions and Cast
//! between the held dtypes compute on them exactly (`crate::ops::int`). u32 and u64 are
//! held as i32 and i64 are, i16 and u16 as stored bytes, for Cast, the bitwise ops and
//! BitShift only (`crate::ops::bits`). f16 arithmetic and the other dtypes are declined
//! with the dtype as the reason.

use baton_delegate_api::ir::{Attr, DType, Graph, Node, OpKind};
use baton_delegate_api::{Constants, DeclineReason, Support};

use super::{require_const_operands, shape_no, Kind};
use crate::ops::layout::MAX_RANK;
use crate::ops::pad::{axis_map, PadMode};
use crate::ops::resize::{known_coordinate_mode, Rounding};

/// The attributes of the tail ops (see `super::known_attributes`).
pub(super) fn known_attributes(op: OpKind) -> &'static [(&'static str, Kind)] {
    use Kind::*;
    match op {
        OpKind::Cast => &[("to", Int), ("saturate", Int), ("round_mode", Str)],
        OpKind::BitCast => &[("to", Int)],
        OpKind::Shape => &[("start", Int), ("end", Int)],
        OpKind::ConstantOfShape => &[("value", Float), ("value_dtype", Int)],
        OpKind::CastLike => &[("saturate", Int), ("round_mode", Str)],
        OpKind::Gelu => &[("approximate", Str)],
        OpKind::Attention => &[
            ("is_causal", Int),
            ("kv_num_heads", Int),
            ("q_num_heads", Int),
            ("qk_matmul_output_mode", Int),
            ("scale", Float),
            ("softcap", Float),
            ("softmax_precision", Int),
        ],
        OpKind::Einsum => &[("equation", Str)],
        OpKind::GridSample => &[("mode", Str), ("padding_mode", Str), ("align_corners", Int)],
        OpKind::ReverseSequence => &[("batch_axis", Int), ("time_axis", Int)],
        OpKind::TensorScatter => &[("axis", Int), ("mode", Str)],
        OpKind::CausalConvWithState => &[("activation", Str)],
        OpKind::AffineGrid => &[("align_corners", Int)],
        OpKind::DFT => &[("inverse", Int), ("onesided", Int)],
        OpKind::STFT => &[("onesided", Int)],
        OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow => {
            &[("output_datatype", Int), ("periodic", Int)]
        }
        OpKind::MelWeightMatrix => &[("output_datatype", Int)],
        OpKind::LinearAttention => &[
            ("chunk_size", Int),
            ("kv_num_heads", Int),
            ("q_num_heads", Int),
            ("scale", Float),
            ("update_rule", Str),
        ],
        OpKind::DeformConv => &[
            ("dilations", Ints),
            ("group", Int),
            ("kernel_shape", Ints),
            ("offset_group", Int),
            ("pads", Ints),
            ("strides", Ints),
        ],
        OpKind::RoiAlign => &[
            ("coordinate_transformation_mode", Str),
            ("mode", Str),
            ("output_height", Int),
            ("output_width", Int),
            ("sampling_ratio", Int),
            ("spatial_scale", Float),
        ],
        OpKind::MaxUnpool => &[("kernel_shape", Ints), ("strides", Ints), ("pads", Ints)],
        OpKind::Col2Im => &[("dilations", Ints), ("pads", Ints), ("strides", Ints)],
        OpKind::RotaryEmbedding => &[
            ("interleaved", Int),
            ("num_heads", Int),
            ("rotary_embedding_dim", Int),
        ],
        OpKind::Mod => &[("fmod", Int)],
        OpKind::CumSum | OpKind::CumProd => &[("exclusive", Int), ("reverse", Int)],
        OpKind::BitShift => &[("direction", Str)],
        OpKind::OneHot => &[("axis", Int)],
        OpKind::Trilu => &[("upper", Int)],
        OpKind::Hardmax | OpKind::GatherElements => &[("axis", Int)],
        OpKind::TopK => &[("axis", Int), ("largest", Int), ("sorted", Int)],
        OpKind::DepthToSpace => &[("blocksize", Int), ("mode", Str)],
        OpKind::SpaceToDepth => &[("blocksize", Int)],
        OpKind::GatherND => &[("batch_dims", Int)],
        OpKind::ScatterND => &[("reduction", Str)],
        OpKind::ScatterElements => &[("axis", Int), ("reduction", Str)],
        OpKind::IsInf => &[("detect_negative", Int), ("detect_positive", Int)],
        OpKind::BatchNormalization => &[
            ("epsilon", Float),
            ("momentum", Float),
            ("training_mode", Int),
        ],
        OpKind::Pad => &[("mode", Str), ("pads", Ints), ("value", Float)],
        OpKind::Resize => &[
            ("mode", Str),
            ("coordinate_transformation_mode", Str),
            ("nearest_mode", Str),
            ("scales", Floats),
            ("sizes", Ints),
            ("axes", Ints),
            ("antialias", Int),
            ("exclude_outside", Int),
            ("cubic_coeff_a", Float),
            ("keep_aspect_ratio_policy", Str),
            ("extrapolation_value", Float),
        ],
        OpKind::RNN => &[
            ("activations", Str),
            ("activation_alpha", Floats),
            ("activation_beta", Floats),
            ("clip", Float),
            ("direction", Str),
            ("hidden_size", Int),
            ("layout", Int),
        ],
        OpKind::GRU => &[
            ("activations", Str),
            ("clip", Float),
            ("direction", Str),
            ("hidden_size", Int),
            ("layout", Int),
            ("linear_before_reset", Int),
        ],
        OpKind::ConvTranspose => &[
            ("auto_pad", Str),
            ("dilations", Ints),
            ("group", Int),
            ("kernel_shape", Ints),
            ("output_padding", Ints),
            ("output_shape", Ints),
            ("pads", Ints),
            ("strides", Ints),
        ],
        _ => &[],
    }
}

/// The input counts (least, most) of the tail ops; one input for the others.
pub(super) fn arity(op: OpKind) -> (usize, usize) {
    match op {
        OpKind::Greater
        | OpKind::Less
        | OpKind::Equal
        | OpKind::And
        | OpKind::Pow
        | OpKind::CastLike
        | OpKind::GreaterOrEqual
        | OpKind::LessOrEqual
        | OpKind::Or
        | OpKind::Xor
        | OpKind::Mod
        | OpKind::CumSum
        | OpKind::CumProd
        | OpKind::TopK
        | OpKind::GatherElements
        | OpKind::BitwiseAnd
        | OpKind::BitwiseOr
        | OpKind::BitwiseXor
        | OpKind::BitShift => (2, 2),
        OpKind::Range | OpKind::OneHot => (3, 3),
        OpKind::Trilu => (1, 2),
        OpKind::GatherND => (2, 2),
        OpKind::ScatterElements | OpKind::ScatterND => (3, 3),
        OpKind::Where => (3, 3),
        OpKind::BatchNormalization => (5, 5),
        OpKind::ReduceSum
        | OpKind::ReduceMax
        | OpKind::ReduceMin
        | OpKind::ReduceProd
        | OpKind::ReduceL1
        | OpKind::ReduceL2
        | OpKind::ReduceLogSumExp
        | OpKind::ReduceSumSquare => (1, 2),
        OpKind::Pad | OpKind::Resize => (1, 4),
        OpKind::Expand | OpKind::Tile => (2, 2),
        OpKind::GRU | OpKind::RNN => (3, 6),
        OpKind::ConvTranspose => (2, 3),
        OpKind::Attention => (3, 7),
        OpKind::RotaryEmbedding => (3, 4),
        OpKind::Einsum => (1, usize::MAX),
        OpKind::GridSample => (2, 2),
        OpKind::MatMulInteger | OpKind::ConvInteger => (2, 4),
        OpKind::ReverseSequence => (2, 2),
        OpKind::TensorScatter => (2, 3),
        OpKind::CausalConvWithState => (2, 4),
        OpKind::AffineGrid => (2, 2),
        OpKind::DFT => (1, 3),
        OpKind::STFT => (2, 4),
        OpKind::MelWeightMatrix => (5, 5),
        OpKind::RoiAlign => (3, 3),
        OpKind::DeformConv => (3, 5),
        OpKind::LinearAttention => (3, 6),
        OpKind::MaxUnpool => (2, 3),
        OpKind::Col2Im => (3, 3),
        _ => (1, 1),
    }
}

/// The dtypes a Cast reads and writes: every dtype the executable holds (8-bit ones as
/// stored bytes, see `crate::ops::int`).
const CAST: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::Bool,
    DType::I32,
    DType::I64,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::U32,
    DType::U64,
];

/// The dtypes of integer arithmetic besides f32 (exact and wrapping, `crate::ops::int`).
const ARITH: &[DType] = &[DType::F32, DType::I32, DType::I64];

/// The dtypes the movers carry (Pad, Transpose, Slice, Split, Gather, Expand, Tile,
/// Concat, Where, nearest Resize): f32, bool (held as 0.0/1.0), i32 (its bits in an f32
/// slot), i64 (each element two slots moved together), and the 8-bit ones and f16,
/// moved as stored bytes (`crate::ops::bytes`).
const INDEXED: &[DType] = &[
    DType::F32,
    DType::Bool,
    DType::I32,
    DType::I64,
    DType::I8,
    DType::U8,
    DType::F16,
];

/// The dtypes of Relu, Clip and Abs: f32 and every integer held (`crate::ops::int`).
const INTS: &[DType] = &[DType::F32, DType::I32, DType::I64, DType::I8, DType::U8];

/// The dtypes of the bitwise ops: every integer held (`crate::ops::bits`).
const BITS: &[DType] = &[
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
];

/// The dtypes of BitShift: the unsigned integers.
const SHIFTS: &[DType] = &[DType::U8, DType::U16, DType::U32, DType::U64];

/// The dtypes of Range: those whose values the executable holds as a constant.
const RANGE: &[DType] = &[DType::F32, DType::F16, DType::I16, DType::I32, DType::I64];

/// The dtypes of OneHot's indices: the held numbers (floats are truncated).
const ONE_HOT_INDICES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::I32,
    DType::I64,
    DType::I8,
    DType::U8,
];

/// The dtypes the views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) carry: every
/// dtype held, whose bytes a view never reads.
const VIEWED: &[DType] = INDEXED;

/// The dtypes at input `pos` (`None`: the output) of the tail ops and of the data
/// movement that carries bools; f32 elsewhere.
pub(super) fn expected_dtypes(op: OpKind, pos: Option<usize>) -> &'static [DType] {
    match (op, pos) {
        (OpKind::ReverseSequence | OpKind::AffineGrid, Some(1)) => &[DType::I64],
        // The scalars of DFT (dft_length, axis) and STFT (frame_step, frame_length): i64,
        // or an empty signal-typed tensor standing for an omitted one (`check_op`).
        (OpKind::DFT, Some(1 | 2)) | (OpKind::STFT, Some(1 | 3)) => &[DType::I64, DType::F32],
        // The window ops are constants computed at init, held as any of these; f64 is
        // not held.
        (OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow, Some(_)) => {
            &[DType::I64]
        }
        (OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow, None) => &[
            DType::F32,
            DType::F16,
            DType::I32,
            DType::I64,
            DType::I8,
            DType::U8,
        ],
        (OpKind::MelWeightMatrix, Some(0..=2)) | (OpKind::RoiAlign, Some(2)) => &[DType::I64],
        (OpKind::MelWeightMatrix, Some(_)) => &[DType::F32, DType::F16],
        (OpKind::MelWeightMatrix, None) => &[DType::F32, DType::F16, DType::I32],
        (OpKind::MaxUnpool, Some(1 | 2)) | (OpKind::Col2Im, Some(1 | 2)) => &[DType::I64],
        (OpKind::Col2Im, _) => &[DType::F32, DType::I32],
        (OpKind::ReverseSequence, _) => CAST,
        // The cache and update move as held bytes, like ReverseSequence's data.
        (OpKind::TensorScatter, Some(2)) => &[DType::I64],
        (OpKind::TensorScatter, _) => CAST,
        (OpKind::MatMulInteger | OpKind::ConvInteger, None) => &[DType::I32],
        (OpKind::MatMulInteger | OpKind::ConvInteger, Some(_)) => &[DType::I8, DType::U8],
        (OpKind::Greater | OpKind::Less | OpKind::Equal, None) => &[DType::Bool],
        (OpKind::GreaterOrEqual | OpKind::LessOrEqual | OpKind::IsNaN | OpKind::IsInf, None) => {
            &[DType::Bool]
        }
        (
            OpKind::Greater
            | OpKind::Less
            | OpKind::Equal
            | OpKind::GreaterOrEqual
            | OpKind::LessOrEqual,
            Some(_),
        ) => &[
            DType::F32,
            DType::Bool,
            DType::I64,
            DType::I32,
            DType::I8,
            DType::U8,
        ],
        (OpKind::Where, Some(1 | 2) | None) => INDEXED,
        (OpKind::And | OpKind::Or | OpKind::Xor | OpKind::Not, _) => &[DType::Bool],
        // An integer exponent of any held width (`PowIntOp`).
        (OpKind::Pow, Some(1)) => &[DType::F32, DType::I32, DType::I64, DType::I8, DType::U8],
        // Mod and Sign compute every held integer exactly (`crate::ops::int`).
        (OpKind::Mod | OpKind::Sign, _) => INTS,
        (OpKind::Where, Some(0)) => &[DType::Bool],
        (OpKind::Pad, Some(1 | 3)) | (OpKind::Expand | OpKind::Tile, Some(1)) => &[DType::I64],
        (OpKind::Resize, Some(3)) => &[DType::I64],
        // Nearest moves any element; linear takes f32 only (`check_resize`).
        (OpKind::Resize, Some(0) | None) => INDEXED,
        (
            OpKind::Identity
            | OpKind::Reshape
            | OpKind::Flatten
            | OpKind::Squeeze
            | OpKind::Unsqueeze,
            Some(0) | None,
        ) => VIEWED,
        (OpKind::Shape | OpKind::Size, Some(0)) => &[
            DType::F32,
            DType::F16,
            DType::Bool,
            DType::I8,
            DType::U8,
            DType::I32,
            DType::I64,
        ],
        (OpKind::Shape | OpKind::Size, None) | (OpKind::ConstantOfShape, Some(0)) => &[DType::I64],
        (OpKind::ConstantOfShape, None) => INDEXED,
        (OpKind::Cast, Some(0) | None) | (OpKind::CastLike, _) => CAST,
        // Every held dtype; the widths must agree (the shape rule checks).
        (OpKind::BitCast, _) => CAST,
        (OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div, _) => ARITH,
        (OpKind::Relu | OpKind::Abs | OpKind::Clip, _) => INTS,
        // Neg of an unsigned type is not an ONNX op (the reference refuses it).
        (OpKind::Neg, _) => &[DType::F32, DType::I32, DType::I64, DType::I8],
        (
            OpKind::ReduceSum
            | OpKind::ReduceMax
            | OpKind::ReduceMean
            | OpKind::ReduceMin
            | OpKind::ReduceProd
            | OpKind::ReduceL1
            | OpKind::ReduceSumSquare,
            _,
        ) => ARITH,
        (OpKind::CumSum, Some(1)) | (OpKind::GatherElements, Some(1)) => &[DType::I32, DType::I64],
        (OpKind::CumSum, Some(0) | None) => ARITH,
        // The 8-bit values compare exactly as integers (`Held::int`).
        (OpKind::TopK, Some(0) | None) => INTS,
        (OpKind::CumProd, Some(1)) => &[DType::I32, DType::I64],
        (OpKind::CumProd, Some(0) | None) => ARITH,
        (OpKind::BitwiseAnd | OpKind::BitwiseOr | OpKind::BitwiseXor | OpKind::BitwiseNot, _) => {
            BITS
        }
        (OpKind::BitShift, _) => SHIFTS,
        (OpKind::Range, _) => RANGE,
        (OpKind::OneHot, Some(0)) => ONE_HOT_INDICES,
        (OpKind::OneHot, Some(1)) => &[DType::I64],
        (OpKind::OneHot, Some(2) | None) => INDEXED,
        (OpKind::TopK | OpKind::Trilu, Some(1)) => &[DType::I64],
        (OpKind::Trilu | OpKind::DepthToSpace | OpKind::SpaceToDepth, Some(0) | None) => INDEXED,
        // One-word elements.
        (OpKind::GatherElements, Some(0) | None) => &[DType::F32, DType::I32, DType::Bool],
        (OpKind::ScatterElements, Some(1)) => &[DType::I32, DType::I64],
        (OpKind::GatherND | OpKind::ScatterND, Some(1)) => &[DType::I64],
        // GatherND moves held bytes: every dtype held.
        (OpKind::GatherND, _) => INDEXED,
        // Word-held elements (an i64 as its two words) and byte-held ones (an f16 without
        // a reduction, `check_op`).
        (OpKind::ScatterND | OpKind::ScatterElements, _) => &[
            DType::F32,
            DType::I32,
            DType::Bool,
            DType::I64,
            DType::I8,
            DType::U8,
            DType::F16,
        ],
        // ArgMax and ArgMin compare every held number exactly; positions are i64.
        (OpKind::ArgMax | OpKind::ArgMin, Some(_)) => INTS,
        (OpKind::ArgMax | OpKind::ArgMin, None) => &[DType::I64],
        (
            OpKind::Split
            | OpKind::Pad
            | OpKind::Transpose
            | OpKind::Slice
            | OpKind::Gather
            | OpKind::Expand
            | OpKind::Tile,
            Some(0) | None,
        ) => INDEXED,
        (OpKind::Pad, Some(2)) => &[
            DType::F32,
            DType::Bool,
            DType::I32,
            DType::I64,
            DType::I8,
            DType::U8,
            DType::F16,
        ],
        (OpKind::Concat, _) => INDEXED,
        // A bool or float mask; i64 lengths and positions.
        (OpKind::Attention, Some(3)) => &[DType::F32, DType::Bool],
        (OpKind::Attention, Some(6)) | (OpKind::RotaryEmbedding, Some(3)) => &[DType::I64],
        // The recurrences' sequence lengths.
        (OpKind::RNN | OpKind::GRU | OpKind::LSTM, Some(4)) => &[DType::I32],
        // Integer products accumulate exactly (`crate::ops::einsum`); f16 is widened.
        (OpKind::Einsum, _) => ARITH,
        _ => &[DType::F32],
    }
}

/// An attribute decline with `message`.
fn attr_no_support(message: String) -> Support {
    Support::no(DeclineReason::Attribute, message)
}

/// Einsum as implemented (`crate::ops::einsum`): any number of operands (a label may
/// repeat within one: a diagonal), at most `MAX_LABELS` labels, every operand of the
/// output's dtype (as ONNX requires; the reference refuses a mix).
fn check_einsum(graph: &Graph, node: &Node, shapes: &[Vec<usize>]) -> Result<(), Support> {
    let e = baton_delegate_api::shape::einsum::parse(node.attr_str("equation", ""), shapes)
        .map_err(|m| shape_no(node, m))?;
    let other = |m: String| {
        Err(Support::no(
            DeclineReason::Other,
            format!("{}: {m}", node.label()),
        ))
    };
    let out = graph.tensors[node.outputs[0]].dtype;
    if let Some(&t) = node.inputs.iter().find(|&&t| graph.tensors[t].dtype != out) {
        return Err(Support::no(
            DeclineReason::DType,
            format!(
                "{}: operand '{}' is {} but the output is {out}",
                node.label(),
                graph.tensors[t].name,
                graph.tensors[t].dtype
            ),
        ));
    }
    let max = crate::ops::einsum::MAX_LABELS;
    if e.extents.len() > max {
        return other(format!(
            "Einsum with {} labels is not implemented (at most {max})",
            e.extents.len()
        ));
    }
    Ok(())
}

/// The op-specific checks of the tail ops.
pub(super) fn check_op(
    graph: &Graph,
    node: &Node,
    shapes: &[Vec<usize>],
    consts: &Constants<'_>,
) -> Result<(), Support> {
    let x = &shapes[0];
    let is_const = |i: usize| {
        node.inputs
            .get(i)
            .is_some_and(|&t| graph.tensors[t].is_const() && consts.bytes(t).is_some())
    };
    let present = |i: usize| {
        node.inputs.get(i).is_some_and(|&t| {
            shapes[i].iter().product::<usize>() > 0 || !graph.tensors[t].is_const()
        })
    };
    let attr_no = |m: String| {
        Err(Support::no(
            DeclineReason::Attribute,
            format!("{}: {m}", node.label()),
        ))
    };
    let out = &graph.tensors[node.outputs[0]];
    let moves = matches!(
        node.op,
        OpKind::Pad
            | OpKind::Transpose
            | OpKind::Slice
            | OpKind::Split
            | OpKind::Gather
            | OpKind::Expand
            | OpKind::Tile
            | OpKind::Concat
            | OpKind::Where
            | OpKind::Resize
            | OpKind::BitwiseAnd
            | OpKind::BitwiseOr
            | OpKind::BitwiseXor
    );
    if moves && matches!(out.dtype, DType::I64 | DType::U64) {
        // Held with an extra axis of its two words.
        let rank = out.static_shape().map_or(0, |s| s.len()).max(x.len());
        if rank >= MAX_RANK {
            return Err(shape_no(
                node,
                format!(
                    "an i64 tensor of rank {rank} (at most {} here)",
                    MAX_RANK - 1
                ),
            ));
        }
        if node.op == OpKind::Pad && node.attrs.contains_key("value") {
            return attr_no("a 'value' attribute for an i64 tensor is not supported".into());
        }
    }
    let x_dtype = graph.tensors[node.inputs[0]].dtype;
    if node.op == OpKind::Pad && node.attrs.contains_key("value") && x_dtype != DType::F32 {
        return attr_no(format!(
            "a 'value' attribute for a {x_dtype} tensor is not supported"
        ));
    }
    match node.op {
        OpKind::Greater
        | OpKind::Less
        | OpKind::Equal
        | OpKind::GreaterOrEqual
        | OpKind::LessOrEqual
        | OpKind::Mod
        | OpKind::BitwiseAnd
        | OpKind::BitwiseOr
        | OpKind::BitwiseXor
        | OpKind::BitShift
            if x_dtype != graph.tensors[node.inputs[1]].dtype =>
        {
            return Err(Support::no(
                DeclineReason::DType,
                format!(
                    "{}: operands of {x_dtype} and {}",
                    node.label(),
                    graph.tensors[node.inputs[1]].dtype
                ),
            ));
        }
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => {
            // Integers only with their own kind (no promotion in ONNX).
            if let Some(&t) = node
                .inputs
                .iter()
                .find(|&&t| graph.tensors[t].dtype != out.dtype)
            {
                return Err(Support::no(
                    DeclineReason::DType,
                    format!(
                        "{}: operand '{}' is {}, the result {}",
                        node.label(),
                        graph.tensors[t].name,
                        graph.tensors[t].dtype,
                        out.dtype
                    ),
                ));
            }
        }
        OpKind::BatchNormalization => {
            if node.attr_int("training_mode", 0) != 0 {
                return attr_no("training_mode (batch statistics) is not supported".into());
            }
            // Rank 1 is a single channel; a scalar has no channel at all.
            if x.is_empty() {
                return Err(shape_no(node, format!("input {x:?} has no channel axis")));
            }
        }
        OpKind::Pad => {
            require_const_operands(graph, node, consts)?;
            if let Some(&v) = node.inputs.get(2).filter(|_| present(2)) {
                if graph.tensors[v].dtype != x_dtype {
                    return attr_no(format!(
                        "a {} pad value for a {x_dtype} tensor",
                        graph.tensors[v].dtype
                    ));
                }
            }
            let mode = node.attr_str("mode", "constant");
            let Some(mode) = PadMode::parse(mode) else {
                return attr_no(format!("mode '{mode}' is not supported"));
            };
            let operand = |i: usize| node.inputs.get(i).and_then(|&t| consts.i64s(t));
            let pads = match node.attr_ints("pads") {
                Some(p) => p.to_vec(),
                None => operand(1).unwrap_or_default(),
            };
            let axes: Vec<i64> = operand(3).unwrap_or_else(|| (0..x.len() as i64).collect());
            if pads.len() != 2 * axes.len() {
                return Err(shape_no(
                    node,
                    format!("{} pads for {} axes", pads.len(), axes.len()),
                ));
            }
            for (k, &a) in axes.iter().enumerate() {
                let d = baton_delegate_api::shape::normalize_axis(a, x.len())
                    .map_err(|e| shape_no(node, e))?;
                axis_map(mode, x[d], pads[k], pads[k + axes.len()])
                    .map_err(|e| shape_no(node, e))?;
            }
        }
        OpKind::Expand
        | OpKind::Tile
        | OpKind::CumSum
        | OpKind::CumProd
        | OpKind::Trilu
        | OpKind::TopK => require_const_operands(graph, node, consts)?,
        OpKind::BitShift => {
            let d = node.attr_str("direction", "");
            if !matches!(d, "LEFT" | "RIGHT") {
                return attr_no(format!("direction '{d}' is not LEFT or RIGHT"));
            }
        }
        OpKind::Range => {
            // The length depends on the values: known at init only from constants.
            if let Some(i) = (0..3).find(|&i| !is_const(i)) {
                return Err(Support::no(
                    DeclineReason::NotConstant,
                    format!(
                        "{}: operand {i} is computed at run time; only constant start, limit \
                         and delta are supported",
                        node.label()
                    ),
                ));
            }
            if let Some(i) = (0..3).find(|&i| shapes[i].iter().product::<usize>() != 1) {
                return Err(shape_no(
                    node,
                    format!("operand {i} of shape {:?} is not a scalar", shapes[i]),
                ));
            }
            if (1..3).any(|i| graph.tensors[node.inputs[i]].dtype != x_dtype) {
                return Err(Support::no(
                    DeclineReason::DType,
                    format!("{}: operands of different dtypes", node.label()),
                ));
            }
        }
        OpKind::OneHot => {
            if !is_const(1) {
                return Err(Support::no(
                    DeclineReason::NotConstant,
                    format!(
                        "{}: depth is computed at run time; only a constant depth is \
                         supported",
                        node.label()
                    ),
                ));
            }
            if shapes[2].iter().product::<usize>() != 2 {
                return Err(shape_no(
                    node,
                    format!("values of shape {:?} are not two elements", shapes[2]),
                ));
            }
            let v = graph.tensors[node.inputs[2]].dtype;
            if v != out.dtype {
                return Err(Support::no(
                    DeclineReason::DType,
                    format!("{}: {v} values for a {} output", node.label(), out.dtype),
                ));
            }
        }
        OpKind::ScatterElements | OpKind::ScatterND => {
            let r = node.attr_str("reduction", "none");
            if crate::ops::scatter::Combine::parse(r).is_none() {
                return attr_no(format!("reduction '{r}' is not supported"));
            }
            if r != "none" && matches!(x_dtype, DType::Bool | DType::F16) {
                return attr_no(format!("reduction '{r}' of {x_dtype} is not supported"));
            }
        }
        OpKind::DepthToSpace if !matches!(node.attr_str("mode", "DCR"), "DCR" | "CRD") => {
            return attr_no(format!(
                "mode '{}' is not supported",
                node.attr_str("mode", "DCR")
            ));
        }
        OpKind::ConstantOfShape if !is_const(0) => {
            return Err(Support::no(
                DeclineReason::NotConstant,
                format!("{}: the shape is computed at run time", node.label()),
            ));
        }
        OpKind::GRU => {
            super::recurrent_clip(node)?;
            check_gru(graph, node, shapes, consts)?
        }
        OpKind::RNN => {
            super::recurrent_clip(node)?;
            check_rnn(graph, node, shapes, consts)?
        }
        OpKind::Resize => check_resize(graph, node, shapes, consts, &present)?,
        OpKind::Einsum => check_einsum(graph, node, shapes)?,
        OpKind::DeformConv => {
            if !(3..=5).contains(&x.len()) {
                return Err(shape_no(
                    node,
                    format!("input {x:?}: 1 to 3 spatial axes are implemented"),
                ));
            }
            let groups = node.attr_int("offset_group", 1);
            if groups < 1 || x.get(1).is_some_and(|&c| c % groups as usize != 0) {
                return attr_no(format!(
                    "offset_group {groups} does not divide the {} input channels",
                    x.get(1).copied().unwrap_or(0)
                ));
            }
        }
        OpKind::MelWeightMatrix => {
            let t = node.inputs[2];
            let rate = consts.i64s(t).filter(|_| is_const(2));
            match rate.as_deref() {
                Some(&[r]) if r > 0 => {}
                Some(r) => {
                    return Err(shape_no(
                        node,
                        format!("sample_rate {r:?} is not one value > 0"),
                    ))
                }
                None => {
                    return Err(Support::no(
                        DeclineReason::NotConstant,
                        format!(
                            "{}: sample_rate '{}' is computed at run time; only a constant \
                             is supported",
                            node.label(),
                            graph.tensors[t].name
                        ),
                    ))
                }
            }
        }
        OpKind::DFT | OpKind::STFT => {
            let scalars: &[usize] = if node.op == OpKind::DFT {
                &[1, 2]
            } else {
                &[1, 3]
            };
            for &i in scalars.iter().filter(|&&i| i < shapes.len()) {
                let t = &graph.tensors[node.inputs[i]];
                let given = shapes[i].iter().product::<usize>() > 0;
                if given && (t.dtype != DType::I64 || !is_const(i)) {
                    return Err(Support::no(
                        DeclineReason::NotConstant,
                        format!(
                            "{}: operand {i} ('{}') must be a constant i64 scalar (it sizes \
                             the transform)",
                            node.label(),
                            t.name
                        ),
                    ));
                }
            }
        }
        OpKind::GridSample => {
            if !(4..=5).contains(&x.len()) {
                return Err(shape_no(
                    node,
                    format!("input {x:?}: GridSample of an image (4-D) or a volume (5-D)"),
                ));
            }
            if x[2..].contains(&0) {
                return Err(shape_no(
                    node,
                    format!("input {x:?}: sampling an empty image"),
                ));
            }
            crate::exec::grid_sample_modes(node).map_err(attr_no_support)?;
        }
        OpKind::Attention => {
            let mode = node.attr_int("qk_matmul_output_mode", 0);
            if !(0..=3).contains(&mode) {
                return attr_no(format!("qk_matmul_output_mode {mode} is not one of 0 to 3"));
            }
        }
        OpKind::Gelu => {
            let a = node.attr_str("approximate", "none");
            if !matches!(a, "none" | "tanh") {
                return attr_no(format!("approximate '{a}' is not supported"));
            }
        }
        OpKind::ConvTranspose => {
            if !(3..=4).contains(&x.len()) {
                return Err(shape_no(
                    node,
                    format!(
                        "input {x:?}: only 1-D and 2-D transposed convolutions are implemented"
                    ),
                ));
            }
            if let Some(i) = (1..node.inputs.len()).find(|&i| !is_const(i)) {
                return Err(Support::no(
                    DeclineReason::NotConstant,
                    format!(
                        "{}: operand {i} is computed at run time; only constant weights and \
                         bias are supported",
                        node.label()
                    ),
                ));
            }
            let w = &shapes[1];
            if w.len() != x.len() || w[2..].contains(&0) {
                return Err(shape_no(
                    node,
                    format!("weight shape {w:?} has an empty kernel"),
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Range's declared output: 1-D, of the operands' dtype, as long as its constant
/// operands make it (`check_op` made sure they are constant scalars of one dtype).
pub(super) fn check_range_length(
    graph: &Graph,
    node: &Node,
    consts: &Constants<'_>,
) -> Result<(), Support> {
    use baton_delegate_api::dtype::{element_f64, element_int};
    use baton_delegate_api::shape::{range_length_f64, range_length_i64};
    let dtype = graph.tensors[node.inputs[0]].dtype;
    let bytes = |i: usize| consts.bytes(node.inputs[i]).unwrap_or_default();
    let ints: Option<Vec<i64>> = (0..3)
        .map(|i| element_int(dtype, bytes(i), 0).and_then(|v| i64::try_from(v).ok()))
        .collect();
    let n = match ints {
        Some(v) => range_length_i64(v[0], v[1], v[2]),
        None => {
            let v: Vec<f64> = (0..3).map(|i| element_f64(dtype, bytes(i), 0)).collect();
            range_length_f64(v[0], v[1], v[2])
        }
    }
    .map_err(|e| shape_no(node, e))?;
    let out = &graph.tensors[node.outputs[0]];
    if out.dtype != dtype || out.static_shape() != Some(vec![n]) {
        return Err(shape_no(
            node,
            format!(
                "declared output '{}' {} {:?} differs from the {dtype} [{n}] of its operands",
                out.name,
                out.dtype,
                out.static_shape()
            ),
        ));
    }
    Ok(())
}

/// GRU as implemented: layout 0, default activations, `clip`, `sequence_lens` (constant or
/// not), and constant weights (packed at init).
fn check_gru(
    graph: &Graph,
    node: &Node,
    shapes: &[Vec<usize>],
    consts: &Constants<'_>,
) -> Result<(), Support> {
    let attr_no = |m: String| Err(Support::no(DeclineReason::Attribute, format!("GRU {m}")));
    if node.attr_int("layout", 0) != 0 {
        return attr_no("layout 1 (batch first) is not supported".into());
    }
    if let Some(a) = node.attrs.get("activations") {
        let baton_delegate_api::ir::Attr::Str(s) = a else {
            return attr_no(format!("activations {a:?} are not supported"));
        };
        let s = s.to_ascii_lowercase().replace(' ', "");
        let parts: Vec<&str> = s.split(',').collect();
        if !parts.chunks(2).all(|c| c.join(",") == "sigmoid,tanh") {
            return attr_no(format!("activations '{s}': only sigmoid,tanh"));
        }
    }
    let direction = node.attr_str("direction", "forward");
    if !matches!(direction, "forward" | "reverse" | "bidirectional") {
        return attr_no(format!("direction '{direction}' is not supported"));
    }
    let present = |i: usize| shapes.get(i).is_some_and(|s| !s.contains(&0));
    for i in [1, 2, 3] {
        if present(i) && consts.bytes(node.inputs[i]).is_none() {
            return Err(Support::no(
                DeclineReason::NotConstant,
                format!(
                    "GRU weight '{}' is computed at run time; only constant W, R and B are \
                     supported",
                    graph.tensors[node.inputs[i]].name
                ),
            ));
        }
    }
    Ok(())
}

/// RNN as implemented (`crate::ops::rnn`): layout 0, any of its activations, clip,
/// `sequence_lens` (constant or not), and constant weights (packed at init).
fn check_rnn(
    graph: &Graph,
    node: &Node,
    shapes: &[Vec<usize>],
    consts: &Constants<'_>,
) -> Result<(), Support> {
    let attr_no = |m: String| Err(Support::no(DeclineReason::Attribute, format!("RNN {m}")));
    if node.attr_int("layout", 0) != 0 {
        return attr_no("layout 1 (batch first) is not supported".into());
    }
    let dirs = match node.attr_str("direction", "forward") {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => return attr_no(format!("direction '{other}' is not supported")),
    };
    if let Err(e) = baton_delegate_api::shape::rnn_activations(node, dirs) {
        return attr_no(e);
    }
    let present = |i: usize| shapes.get(i).is_some_and(|s| !s.contains(&0));
    for (i, what) in [(1, "W"), (2, "R"), (3, "B")] {
        if present(i) && consts.bytes(node.inputs[i]).is_none() {
            return Err(Support::no(
                DeclineReason::NotConstant,
                format!(
                    "RNN {what} '{}' is computed at run time; only constant W, R and B are \
                     supported",
                    graph.tensors[node.inputs[i]].name
                ),
            ));
        }
    }
    Ok(())
}

fn check_resize(
    graph: &Graph,
    node: &Node,
    shapes: &[Vec<usize>],
    consts: &Constants<'_>,
    present: &dyn Fn(usize) -> bool,
) -> Result<(), Support> {
    let x = &shapes[0];
    let attr_no = |m: String| {
        Err(Support::no(
            DeclineReason::Attribute,
            format!("{}: {m}", node.label()),
        ))
    };
    for i in 1..node.inputs.len() {
        let t = node.inputs[i];
        if present(i) && consts.bytes(t).is_none() {
            return Err(Support::no(
                DeclineReason::NotConstant,
                format!(
                    "{}: operand '{}' is computed at run time; only constant scales and sizes \
                     are supported",
                    node.label(),
                    graph.tensors[t].name
                ),
            ));
        }
    }
    let mode = node.attr_str("mode", "nearest");
    let coord = node.attr_str("coordinate_transformation_mode", "half_pixel");
    if !known_coordinate_mode(coord) {
        return attr_no(format!(
            "coordinate_transformation_mode '{coord}' is not supported"
        ));
    }
    let policy = node.attr_str("keep_aspect_ratio_policy", "stretch");
    if !matches!(policy, "stretch" | "not_larger" | "not_smaller") {
        return attr_no(format!(
            "keep_aspect_ratio_policy '{policy}' is not supported"
        ));
    }
    if present(1) {
        return attr_no("a region of interest is not supported".into());
    }
    let out = graph.tensors[node.outputs[0]]
        .static_shape()
        .unwrap_or_default();
    if out.len() != x.len() || (0..x.len()).any(|d| x[d] == 0 && out[d] > 0) {
        return Err(shape_no(node, format!("Resize of {x:?} to {out:?}")));
    }
    match mode {
        "nearest" => {
            let r = node.attr_str("nearest_mode", "round_prefer_floor");
            if Rounding::parse(r).is_none() {
                return attr_no(format!("nearest_mode '{r}' is not supported"));
            }
        }
        "linear" => {
            // f16 is computed in f32 between conversions (`half_computed_node`).
            let dtype = graph.tensors[node.inputs[0]].dtype;
            if !matches!(dtype, DType::F32 | DType::F16) {
                return Err(Support::no(
                    DeclineReason::DType,
                    format!(
                        "{}: linear Resize of {dtype}: f32 and f16 only",
                        node.label()
                    ),
                ));
            }
            if node.attr_int("antialias", 0) != 0 || node.attr_int("exclude_outside", 0) != 0 {
                return attr_no("linear with antialias or exclude_outside is not supported".into());
            }
            // Only the last three axes may change (the scales of the others are then 1 or
            // their extent would change too).
            let r = x.len();
            if (0..r.saturating_sub(3)).any(|d| x[d] != out[d]) {
                return Err(shape_no(
                    node,
                    format!("linear Resize of {x:?} to {out:?}: only the last three axes are resampled here"),
                ));
            }
            let scales: Option<Vec<f32>> = match node.attrs.get("scales") {
                Some(baton_delegate_api::ir::Attr::Floats(s)) => Some(s.clone()),
                _ if present(2) => consts
                    .bytes(node.inputs[2])
                    .map(bytemuck::pod_collect_to_vec::<u8, f32>),
                _ => None,
            };
            let axes: Vec<i64> = node
                .attr_ints("axes")
                .map_or_else(|| (0..r as i64).collect(), <[i64]>::to_vec);
            if let Some(s) = scales {
                for (&a, &v) in axes.iter().zip(&s) {
                    let d = baton_delegate_api::shape::normalize_axis(a, r)
                        .map_err(|e| shape_no(node, e))?;
                    if d + 3 < r && v != 1.0 {
                        return Err(shape_no(
                            node,
                            format!("linear Resize scales {s:?}: only the last three axes are resampled here"),
                        ));
                    }
                }
            }
        }
        other => return attr_no(format!("mode '{other}' is not supported")),
    }
    Ok(())
}

/// The bounds of an integer Clip, in the range of its dtype, as the reference reads them:
/// a constant one-element operand of the input's dtype (an empty one is absent), or the
/// `min`/`max` attribute (a float is rounded inward, NaN means none); absent, the
/// dtype's limits.
pub(crate) fn int_clip_bounds(
    graph: &Graph,
    node: &Node,
    consts: &Constants<'_>,
) -> Result<(i64, i64), Support> {
    let dtype = graph.tensors[node.inputs[0]].dtype;
    let (lowest, highest): (i64, i64) = match dtype {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    };
    let has_attr = node.attrs.contains_key("min") || node.attrs.contains_key("max");
    if has_attr && node.inputs.len() > 1 {
        return Err(Support::no(
            DeclineReason::Attribute,
            "Clip bounds given both as attributes and as inputs",
        ));
    }
    let bound = |i: usize, name: &str, is_min: bool| -> Result<i64, Support> {
        let unbounded = if is_min { lowest } else { highest };
        if let Some(&t) = node.inputs.get(i) {
            let decl = &graph.tensors[t];
            if decl.dtype != dtype {
                return Err(Support::no(
                    DeclineReason::DType,
                    format!(
                        "Clip {name} '{}' is {}, the input {dtype}",
                        decl.name, decl.dtype
                    ),
                ));
            }
            let Some(bytes) = consts.bytes(t).filter(|_| decl.is_const()) else {
                return Err(Support::no(
                    DeclineReason::NotConstant,
                    format!(
                        "Clip {name} '{}' is computed at run time; only constant bounds are \
                         supported",
                        decl.name
                    ),
                ));
            };
            let size = dtype.size();
            return match bytes.len() / size {
                0 => Ok(unbounded),
                1 => {
                    let mut b = [0u8; 8];
                    b[..size].copy_from_slice(&bytes[..size]);
                    Ok(match dtype {
                        DType::I8 => b[0] as i8 as i64,
                        DType::U8 => b[0] as i64,
                        DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
                        _ => i64::from_le_bytes(b),
                    })
                }
                _ => Err(Support::no(
                    DeclineReason::Shape,
                    format!("Clip {name} '{}' must hold exactly one value", decl.name),
                )),
            };
        }
        let wide: i128 = match node.attrs.get(name) {
            Some(Attr::Int(v)) => *v as i128,
            Some(Attr::Float(f)) if f.is_nan() => unbounded as i128,
            // `as` saturates (infinities to the i128 limits).
            Some(Attr::Float(f)) if is_min => f.ceil() as i128,
            Some(Attr::Float(f)) => f.floor() as i128,
            _ => unbounded as i128,
        };
        Ok(wide.clamp(lowest as i128, highest as i128) as i64)
    };
    Ok((bound(1, "min", true)?, bound(2, "max", false)?))
}
