//! Which ops the delegate computes in f32 for f16 tensors (`crate::exec`'s lowering
//! widens their f16 inputs and rounds their result back, see `exec/lower/half.rs`).

use baton_delegate_api::ir::OpKind;

/// The ops whose f16 nodes (one output) are computed by their f32 kernel between
/// conversions (`exec/lower/half.rs`): those whose lowering reads float operands at run
/// time, or as constants widened exactly (BatchNormalization's statistics, a constant
/// Pow exponent); not Clip, whose bounds `supports` reads as f32.
pub(crate) fn half_computed(op: OpKind) -> bool {
    matches!(
        op,
        OpKind::Add
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
            | OpKind::CumSum
            | OpKind::CumProd
            | OpKind::LayerNormalization
            | OpKind::BatchNormalization
            | OpKind::Pow
    )
}
