//! Which ops the delegate computes in f32 for f16 tensors (`crate::exec`'s lowering
//! widens their f16 inputs and rounds their result back, see `exec/lower/half.rs`).

use baton_delegate_api::ir::{Node, OpKind};

/// The ops whose f16 nodes (one output) are computed by their f32 kernel between
/// conversions (`exec/lower/half.rs`): those whose lowering reads float operands at run
/// time, or as constants widened exactly (BatchNormalization's statistics, a constant
/// Pow exponent, Clip's bounds, ConvTranspose's weights).
pub(crate) fn half_computed(op: OpKind) -> bool {
    matches!(
        op,
        OpKind::Add
            | OpKind::Clip
            | OpKind::ConvTranspose
            | OpKind::Sub
            | OpKind::Mul
            | OpKind::Div
            | OpKind::Relu
            | OpKind::Sigmoid
            | OpKind::Tanh
            | OpKind::Softmax
            | OpKind::LogSoftmax
            | OpKind::Erf
            | OpKind::Sqrt
            | OpKind::Exp
            | OpKind::Log
            | OpKind::Neg
            | OpKind::Abs
            | OpKind::LeakyRelu
            | OpKind::HardSigmoid
            | OpKind::HardSwish
            | OpKind::Gelu
            | OpKind::Ceil
            | OpKind::Floor
            | OpKind::Round
            | OpKind::Sign
            | OpKind::Reciprocal
            | OpKind::Sin
            | OpKind::Cos
            | OpKind::Tan
            | OpKind::Asin
            | OpKind::Acos
            | OpKind::Atan
            | OpKind::Sinh
            | OpKind::Cosh
            | OpKind::Asinh
            | OpKind::Acosh
            | OpKind::Atanh
            | OpKind::Equal
            | OpKind::Greater
            | OpKind::Less
            | OpKind::GreaterOrEqual
            | OpKind::LessOrEqual
            | OpKind::Mod
            | OpKind::IsNaN
            | OpKind::IsInf
            | OpKind::ReduceMean
            | OpKind::ReduceSum
            | OpKind::ReduceMax
            | OpKind::ReduceMin
            | OpKind::ReduceProd
            | OpKind::ReduceL1
            | OpKind::ReduceL2
            | OpKind::ReduceLogSumExp
            | OpKind::ReduceSumSquare
            | OpKind::ArgMax
            | OpKind::ArgMin
            | OpKind::Hardmax
            | OpKind::TopK
            | OpKind::CumSum
            | OpKind::CumProd
            | OpKind::LayerNormalization
            | OpKind::BatchNormalization
            | OpKind::Pow
            | OpKind::Attention
            | OpKind::RotaryEmbedding
            | OpKind::Einsum
            | OpKind::GridSample
            | OpKind::RoiAlign
            | OpKind::LinearAttention
            | OpKind::DeformConv
            | OpKind::CausalConvWithState
            | OpKind::AffineGrid
            | OpKind::Det
            | OpKind::MaxUnpool
            | OpKind::Col2Im
            | OpKind::QuantizeLinear
    )
}

/// Whether input `i` of an `op` node is read as a constant at init, widened exactly
/// (`Builder::const_f32`), so the f16 compute needs no run-time widening step for it.
pub(crate) fn read_at_init(op: OpKind, i: usize) -> bool {
    match op {
        OpKind::Clip | OpKind::ConvTranspose | OpKind::BatchNormalization | OpKind::Resize => {
            i >= 1
        }
        // The scale (and the 8-bit zero point) are read into `QParams` at init.
        OpKind::QuantizeLinear => i >= 1,
        // Constant weights and bias, reordered at init (`crate::ops::deform_conv`).
        OpKind::DeformConv => i == 1 || i == 3,
        _ => false,
    }
}

/// Whether an f16 `node` runs as its f32 kernel between conversions: the ops of
/// [`half_computed`], and linear Resize (a nearest one moves the f16 bytes themselves).
pub(crate) fn half_computed_node(node: &Node) -> bool {
    half_computed(node.op)
        || node.op == OpKind::Resize && node.attr_str("mode", "nearest") == "linear"
}

/// The multi-output ops computed in f32 for f16 tensors: each f16 output is rounded from
/// its part of the f32 result (LayerNormalization's Y beside its f32 statistics, TopK's
/// values beside their i64 positions, Attention's Y, present keys, values and scores,
/// LinearAttention's output and present state).
pub(crate) fn half_multi_output(op: OpKind) -> bool {
    matches!(
        op,
        OpKind::LayerNormalization
            | OpKind::TopK
            | OpKind::Attention
            | OpKind::CausalConvWithState
            | OpKind::LinearAttention
    )
}
