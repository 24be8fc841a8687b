//! Reference kernels of the math family: element-wise math and activations, Pow,
//! comparisons and logic, Where, Cast, LogSoftmax, the normalizations, the Reduce ops,
//! Attention, LinearAttention and RotaryEmbedding.
//!
//! Float ops widen their operands to f64 (exactly: f16, bf16, f32 and f64), evaluate in
//! f64 and round once to the output dtype (to f16 through [`rounding`], as `half`'s own
//! f64 conversion can round twice); sums accumulate in f64 from +0.0. The choices made where ONNX is silent:
//!
//! - **Sqrt, Exp, Log** follow IEEE: `sqrt(-0) = -0`, `sqrt(x < 0) = NaN`, `log(0) = -inf`,
//!   `log(x < 0) = NaN`. **Erf** is `±1` at `±inf` and keeps the sign of zero.
//! - **Neg** and **Abs** only touch the sign bit of floats (`Neg(0) = -0`, `Abs(-0) = 0`,
//!   NaN stays NaN); on integers they wrap (`Neg(MIN) = Abs(MIN) = MIN`).
//! - **LeakyRelu** is `if x < 0 { alpha * x } else { x }`: NaN and `-0` pass through.
//!   **HardSigmoid** and the clamp inside **HardSwish** let NaN through, and HardSwish
//!   uses `x / 6 + 1/2` exactly as the IR states. **HardSwish** and **Gelu** multiply by
//!   `x` last, as ONNX's function bodies (and ONNX Runtime) do, so `HardSwish(-inf)` and
//!   `Gelu(-inf)` (both modes) are `-inf * 0 = NaN`, although the limit is 0.
//! - **Gelu** (`approximate = none`) is evaluated as `x/2 * erfc(-x/√2)`, which equals
//!   `x/2 * (1 + erf(x/√2))` without its cancellation for large negative `x`; the `tanh`
//!   form uses the identity `1 + tanh(z) = 2 / (1 + exp(-2z))` for the same reason.
//! - **Pow** follows C's `pow` (`pow(x, ±0) = 1` even for NaN, `pow(1, y) = 1`, a negative
//!   base with a non-integer exponent is NaN). An integer exponent is applied exactly:
//!   the sign of a negative base's power comes from the exponent's parity, which an f64
//!   conversion of an i64 beyond 2^53 would lose. An integer base (i32, i64) with an
//!   integer exponent is exact, wrapping integer arithmetic (a negative exponent gives
//!   `1 / base` truncated: 0 unless the base is ±1); with a float exponent the f64 power
//!   is truncated toward zero and saturated to the base's type, as numpy's
//!   `power(...).astype(...)` does.
//! - **Equal, Greater, Less** compare exact values: floats of any width as f64 (NaN is
//!   unequal to everything, `-0 == 0`), integers of any width as i128; a bool operand
//!   byte counts as true when non-zero (also in Not, And, Where's condition and Cast
//!   from bool). **Where** copies the chosen elements bit for bit.
//! - **Cast** (and **CastLike**, which takes the target dtype from its second operand)
//!   follows ONNX's rules: float to float rounds once to nearest-even (out of range: ±inf
//!   in the IEEE formats; in float8 the largest finite value with `saturate` (the
//!   default), else inf in E5M2 and NaN in the others; float4 always saturates; E8M0
//!   rounds per `round_mode`, see `baton_delegate_api::minifloat`); integer to integer
//!   keeps the low bits (two's complement wrap, also into 4- and 2-bit types); anything
//!   to bool is `x != 0` (NaN is true); bool to anything is 0 or 1. ONNX leaves float to
//!   integer undefined out of range: here it truncates toward zero and **saturates** to
//!   the target's range, and NaN becomes 0 (Rust's `as`, also the behaviour of ARM's
//!   conversion instructions); into the 4- and 2-bit types the truncated value **wraps**
//!   instead, as ONNX's test data has it (`-9.0` to int4 is 7).
//! - **BitCast** keeps each element's bits (wider types byte for byte; the sub-byte ones
//!   their low bits, re-extended as the target stores values) and refuses a result byte
//!   that is no bool, rather than read it as true.
//! - **Det** factors each matrix in f64 (LU with partial pivoting: the largest remaining
//!   magnitude in the column, the first on ties) and multiplies the pivots, negated once
//!   per row swap; a zero column gives 0.
//! - **LogSoftmax** is `x - max - ln(sum(exp(x - max)))` with Softmax's non-finite rules:
//!   a line of all -inf, or one holding +inf or NaN, is all NaN; other -inf entries
//!   stay -inf.
//! - **BatchNormalization** is the inference form `(x - mean) / sqrt(var + epsilon) *
//!   scale + B`; with `training_mode` the batch's statistics (population variance) and the
//!   updated running ones (outputs 1 and 2). An X of rank 1 has one channel.
//! - **LayerNormalization** normalizes over the axes from `axis` to the end with the
//!   variance taken as the mean of squared deviations (equal to ONNX's `E[x²] - E[x]²`
//!   without its cancellation). `stash_type` is ignored: everything is computed in f64.
//!   An empty normalized extent gives NaN `Mean` and `InvStdDev`.
//! - **ReduceSum** of nothing is 0 and **ReduceMean** of nothing is NaN (0/0); integer
//!   ReduceMean is the exact mean truncated toward zero, and of nothing it is an
//!   arithmetic error. **ReduceMax** of nothing is -inf for floats and the type's minimum
//!   for integers (ONNX opset 18). ReduceMax is NaN when any reduced element is NaN
//!   (numpy's rule, which ONNX's reference follows; ONNX Runtime's CPU result depends on
//!   where the NaN sits), and of equal values keeps the first, so the maximum of
//!   `[-0, 0]` is `-0`. Integer ReduceSum wraps. ReduceMax of bool is "any", and of
//!   nothing false.
//! - **ReduceMin** mirrors ReduceMax (of nothing: +inf, the type's maximum, or true for
//!   bool). **ReduceProd** of nothing is 1, **ReduceL1**, **ReduceL2** and
//!   **ReduceSumSquare** of nothing 0; integer Prod, L1 and SumSquare wrap like Sum.
//!   **ReduceLogSumExp** is `max + ln(sum(exp(x - max)))` (of nothing: -inf; an infinite or
//!   NaN maximum is the result). **ArgMax** and **ArgMin** count NaN as found before any
//!   number (numpy's rule) and break ties by `select_last_index`. **BitShift** by the
//!   width or more gives 0 (ONNX Runtime's and numpy's result on the usual machines). **Hardmax** marks the
//!   position ArgMax gives; **TopK** orders by value, NaN counting as the largest,
//!   equal values by position, and always returns its results sorted.
//! - **Floor**, **Round** (halves to even) and the trigonometric and hyperbolic functions
//!   are f64's, rounded once; **Reciprocal** is `1 / x` (`±inf` at `±0`). **Sign** gives
//!   `+0` for both zeros and NaN for NaN (numpy's `sign`). **GreaterOrEqual** and
//!   **LessOrEqual** are false when a NaN is involved, as the other comparisons.
//! - **Mod** with `fmod` 0 takes the divisor's sign (numpy's `mod`, also for floats,
//!   where ONNX requires `fmod` 1 but its reference computes numpy's `mod`), with `fmod`
//!   1 the dividend's (C's `fmod`). Both are exact. An integer remainder by zero is an
//!   arithmetic error; a float one is NaN.
//! - **IsNaN** and **IsInf** read every float width exactly, so a NaN or infinity of any
//!   format is found.
//! - **Attention** takes its scores, softmax and products in f64 whatever
//!   `softmax_precision` says, with ONNX's reference order: softcap, then the bias (mask,
//!   causal triangle, `nonpad_kv_seqlen` padding), then softmax; a query with every key
//!   masked gets NaN. **RotaryEmbedding** rotates in f64; a position id outside the caches
//!   is an arithmetic error.
//! - **LinearAttention** runs its recurrence token by token with the state in f64 (ONNX's
//!   reference keeps it in f32), rounding only `output` and `present_state`.

mod arg;
mod arith;
mod attention;
mod cast;
mod det;
mod linear_attention;
mod logic;
mod norm;
mod reduce;
// Visible to the reference's tests, which check the f16 rounding exhaustively.
pub(super) mod rounding;
mod special;
mod unary;

use baton_delegate_api::{DType, Node, OpKind, TensorMut, TensorRef};

use super::KernelError;

/// Whether this family implements `op` for these operand dtypes; `None` if `op` is not
/// one of this family's ops.
pub(crate) fn supports(op: OpKind, input_dtypes: &[DType]) -> Option<Result<(), String>> {
    let sig = signature(op)?;
    Some(sig.check(op, input_dtypes))
}

/// Runs `node` if its op belongs to this family (operands already checked by
/// [`supports`], output views already checked against the shape rules), else `None`.
pub(crate) fn run(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Option<Result<(), KernelError>> {
    signature(node.op)?;
    match node.op {
        OpKind::LayerNormalization => return Some(norm::layer_norm(node, inputs, outputs)),
        OpKind::BatchNormalization => return Some(norm::batch_norm(node, inputs, outputs)),
        OpKind::Attention => return Some(attention::attention(node, inputs, outputs)),
        OpKind::LinearAttention => {
            return Some(linear_attention::linear_attention(node, inputs, outputs))
        }
        OpKind::RotaryEmbedding => {
            return Some(attention::rotary_embedding(node, inputs, &mut outputs[0]))
        }
        _ => {}
    }
    if node.op == OpKind::TopK {
        return Some(arg::top_k(node, inputs, outputs));
    }
    let x = &inputs[0];
    let out = &mut outputs[0];
    Some(match node.op {
        OpKind::Neg | OpKind::Abs => unary::neg_abs(node, x, out),
        OpKind::Pow => unary::pow(x, &inputs[1], out),
        OpKind::Equal
        | OpKind::Greater
        | OpKind::Less
        | OpKind::GreaterOrEqual
        | OpKind::LessOrEqual => logic::compare(node, x, &inputs[1], out),
        OpKind::Sign => arith::sign(x, out),
        OpKind::Mod => arith::modulo(node, x, &inputs[1], out),
        OpKind::IsNaN | OpKind::IsInf => {
            arith::classify(node, x, out);
            Ok(())
        }
        OpKind::Not => logic::not(x, out),
        OpKind::And | OpKind::Or | OpKind::Xor => logic::and(node.op, x, &inputs[1], out),
        OpKind::BitwiseNot => logic::bitwise_not(x, out),
        OpKind::BitwiseAnd | OpKind::BitwiseOr | OpKind::BitwiseXor | OpKind::BitShift => {
            logic::bitwise(node, x, &inputs[1], out)
        }
        OpKind::Hardmax => arg::hardmax(node, x, out),
        OpKind::Where => logic::select(inputs, out),
        OpKind::Cast | OpKind::CastLike => cast::cast(node, x, out),
        OpKind::BitCast => cast::bit_cast(node, x, out),
        OpKind::Det => det::det(node, x, out),
        OpKind::LogSoftmax => norm::log_softmax(node, x, out),
        OpKind::ReduceMean
        | OpKind::ReduceSum
        | OpKind::ReduceMax
        | OpKind::ReduceMin
        | OpKind::ReduceProd
        | OpKind::ReduceL1
        | OpKind::ReduceL2
        | OpKind::ReduceLogSumExp
        | OpKind::ReduceSumSquare => reduce::reduce(node, inputs, out),
        OpKind::ArgMax | OpKind::ArgMin => arg::arg_extreme(node, x, out),
        _ => unary::float_unary(node, x, out),
    })
}

const FLOATS: &[DType] = &[DType::F32, DType::F16];
/// The element-wise float ops evaluate in f64, so any standard float width works.
const ANY_FLOAT: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::BF16];
/// IsNaN and IsInf read every float format, the 8- and 4-bit ones included.
const ALL_FLOAT: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::BF16,
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
];
const NUMERIC: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::BF16,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
];
/// The integer dtypes the bit ops take.
const INTEGERS: &[DType] = &[
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
];
const UNSIGNED: &[DType] = &[DType::U8, DType::U16, DType::U32, DType::U64];
const SIGNED: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::BF16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
];
/// ONNX Pow's base types.
const POW_BASE: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::BF16,
    DType::I32,
    DType::I64,
];
/// Everything with an order: every dtype but bool (floats compare as exact f64 values,
/// integers as exact i128 values).
const ORDERED: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::I8,
    DType::U8,
    DType::I32,
    DType::I64,
    DType::F64,
    DType::BF16,
    DType::I16,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
    DType::F8E8M0,
    DType::F4E2M1,
    DType::I4,
    DType::U4,
    DType::I2,
    DType::U2,
];
const REDUCIBLE: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::I32, DType::I64];
/// ReduceMax also takes bool (any element true).
const MAX_REDUCIBLE: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::Bool,
];
const BOOL: &[DType] = &[DType::Bool];
/// An Attention mask: bool (true attends) or an additive float bias.
const MASK: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::BF16, DType::Bool];
const I64: &[DType] = &[DType::I64];

/// What an op accepts: an operand count range, the dtypes of each operand (the last
/// entry also covers any later operands) and pairs of operands that must share a dtype.
struct Signature {
    arity: (usize, usize),
    dtypes: &'static [&'static [DType]],
    same: &'static [(usize, usize)],
}

fn signature(op: OpKind) -> Option<Signature> {
    let sig = |arity, dtypes, same| {
        Some(Signature {
            arity,
            dtypes,
            same,
        })
    };
    match op {
        OpKind::Sqrt
        | OpKind::Exp
        | OpKind::Log
        | OpKind::Erf
        | OpKind::Ceil
        | OpKind::Floor
        | OpKind::Round
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
        | OpKind::LeakyRelu
        | OpKind::HardSigmoid
        | OpKind::HardSwish
        | OpKind::Gelu => sig((1, 1), &[ANY_FLOAT], &[]),
        OpKind::IsNaN | OpKind::IsInf => sig((1, 1), &[ALL_FLOAT], &[]),
        OpKind::Sign => sig((1, 1), &[NUMERIC], &[]),
        OpKind::Mod => sig((2, 2), &[NUMERIC], &[(0, 1)]),
        OpKind::LogSoftmax => sig((1, 1), &[FLOATS], &[]),
        OpKind::Neg => sig((1, 1), &[SIGNED], &[]),
        OpKind::Abs => sig((1, 1), &[NUMERIC], &[]),
        // ONNX lets the exponent have any numeric dtype, independent of the base's.
        OpKind::Pow => sig((2, 2), &[POW_BASE, NUMERIC], &[]),
        OpKind::Equal => sig((2, 2), &[&DType::ALL], &[(0, 1)]),
        OpKind::Greater | OpKind::Less | OpKind::GreaterOrEqual | OpKind::LessOrEqual => {
            sig((2, 2), &[ORDERED], &[(0, 1)])
        }
        OpKind::Not => sig((1, 1), &[BOOL], &[]),
        OpKind::And | OpKind::Or | OpKind::Xor => sig((2, 2), &[BOOL], &[]),
        OpKind::BitwiseAnd | OpKind::BitwiseOr | OpKind::BitwiseXor => {
            sig((2, 2), &[INTEGERS], &[(0, 1)])
        }
        OpKind::BitwiseNot => sig((1, 1), &[INTEGERS], &[]),
        OpKind::BitShift => sig((2, 2), &[UNSIGNED], &[(0, 1)]),
        OpKind::Hardmax => sig((1, 1), &[ANY_FLOAT], &[]),
        OpKind::TopK => sig((1, 2), &[ORDERED, I64], &[]),
        OpKind::Where => sig((3, 3), &[BOOL, &DType::ALL], &[(1, 2)]),
        OpKind::Cast | OpKind::BitCast => sig((1, 1), &[&DType::ALL], &[]),
        OpKind::Det => sig((1, 1), &[ANY_FLOAT], &[]),
        OpKind::CastLike => sig((2, 2), &[&DType::ALL], &[]),
        // ONNX (opset 15) gives scale/B and mean/var type parameters of their own.
        OpKind::BatchNormalization => sig((5, 5), &[FLOATS], &[]),
        OpKind::LayerNormalization => sig((2, 3), &[FLOATS], &[(0, 1), (0, 2)]),
        // Q, K, V, attn_mask (bool or Q's dtype), past_key, past_value, nonpad_kv_seqlen.
        OpKind::Attention => sig(
            (3, 7),
            &[
                ANY_FLOAT, ANY_FLOAT, ANY_FLOAT, MASK, ANY_FLOAT, ANY_FLOAT, I64,
            ],
            &[(0, 1), (0, 2), (0, 4), (0, 5)],
        ),
        // query, key, value, past_state (a float of its own), decay, beta.
        OpKind::LinearAttention => sig((3, 6), &[ANY_FLOAT], &[(0, 1), (0, 2), (0, 4), (0, 5)]),
        OpKind::RotaryEmbedding => sig(
            (3, 4),
            &[ANY_FLOAT, ANY_FLOAT, ANY_FLOAT, I64],
            &[(0, 1), (0, 2)],
        ),
        OpKind::ReduceMean | OpKind::ReduceSum => sig((1, 2), &[REDUCIBLE, I64], &[]),
        OpKind::ReduceMax | OpKind::ReduceMin => sig((1, 2), &[MAX_REDUCIBLE, I64], &[]),
        OpKind::ReduceProd | OpKind::ReduceL1 | OpKind::ReduceSumSquare => {
            sig((1, 2), &[REDUCIBLE, I64], &[])
        }
        OpKind::ReduceL2 | OpKind::ReduceLogSumExp => sig((1, 2), &[ANY_FLOAT, I64], &[]),
        OpKind::ArgMax | OpKind::ArgMin => sig((1, 1), &[ORDERED], &[]),
        _ => None,
    }
}

impl Signature {
    fn check(&self, op: OpKind, dtypes: &[DType]) -> Result<(), String> {
        let (min, max) = self.arity;
        if dtypes.len() < min || dtypes.len() > max {
            let want = if min == max {
                format!("{min}")
            } else {
                format!("{min} to {max}")
            };
            return Err(format!("{op} takes {want} inputs, got {}", dtypes.len()));
        }
        for (i, &d) in dtypes.iter().enumerate() {
            let allowed = self.dtypes[i.min(self.dtypes.len() - 1)];
            if !allowed.contains(&d) {
                let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
                let what = if i == 0 {
                    format!("{op} on {d}")
                } else {
                    format!("{op} with operand {i} of {d}")
                };
                return Err(format!(
                    "{what} is not implemented (reference kernels: {})",
                    names.join(", ")
                ));
            }
        }
        for &(a, b) in self.same {
            if let (Some(da), Some(db)) = (dtypes.get(a), dtypes.get(b)) {
                if da != db {
                    return Err(format!(
                        "{op} operand {b} is {db} but operand {a} is {da}; they must share a dtype"
                    ));
                }
            }
        }
        Ok(())
    }
}
