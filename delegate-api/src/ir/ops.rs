//! The operator set: each op's code, name and documented semantics.
//!
//! Kept apart from the rest of the IR because the list only grows: every BTIR minor adds
//! codes here (see `delegate-api/docs/btir.md`, section 7, for which minor added which).

macro_rules! ops {
    ($($(#[$doc:meta])* $name:ident = $code:expr),* $(,)?) => {
        /// The operator set. Codes are part of the wire format and never reused.
        ///
        /// Each op follows the ONNX operator of the same name: its inputs come in ONNX's
        /// order and its attributes carry ONNX's names and defaults, except where a
        /// variant's documentation says otherwise. Ops with several outputs (Split, LSTM, If...) say so.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum OpKind { $($(#[$doc])* $name = $code),* }

        impl OpKind {
            /// Every op, in code order.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$name),*];

            /// The ONNX-style name (`Conv`, `MatMul`, ...).
            pub fn name(self) -> &'static str {
                match self { $(OpKind::$name => stringify!($name)),* }
            }

            /// Looks an op up by its name.
            pub fn from_name(name: &str) -> Option<OpKind> {
                match name { $(stringify!($name) => Some(OpKind::$name),)* _ => None }
            }
        }
    };
}

ops! {
    /// Matrix product of `A` and `B` with numpy `matmul` rules: a 1-D operand is promoted
    /// to a matrix and its added dimension dropped from the result, and leading (batch)
    /// dimensions broadcast. No attributes.
    MatMul = 1,
    /// `Y = alpha * A' * B' + beta * C` for 2-D `A` and `B`, where `A'` is `A` transposed
    /// when `transA` is non-zero (likewise `B'` with `transB`). The optional `C` must
    /// broadcast to `[M, N]`. Attributes: `alpha` and `beta` (floats, default 1.0),
    /// `transA` and `transB` (ints, default 0). With `beta` 0, `C` is ignored entirely.
    Gemm = 2,
    /// Convolution (cross-correlation, as in ONNX) of `X` `[N, C, spatial...]` with
    /// weights `W` `[M, C/group, kernel...]`, plus the optional bias `B` `[M]`. Any number
    /// of spatial dimensions (plugins commonly take one or two). Attributes: `group` (default 1), `kernel_shape` (must agree
    /// with `W`), `strides`, `dilations`, `pads` (all begins, then all ends) and
    /// `auto_pad` (`NOTSET`, `VALID`, `SAME_UPPER`, `SAME_LOWER`); see
    /// [`crate::shape::ConvGeometry`].
    Conv = 3,
    /// `A + B`, element-wise with numpy broadcasting; both operands have the same dtype.
    /// Integer arithmetic wraps on overflow.
    Add = 4,
    /// `A - B`, element-wise with numpy broadcasting, like [`OpKind::Add`].
    Sub = 5,
    /// `A * B`, element-wise with numpy broadcasting, like [`OpKind::Add`].
    Mul = 6,
    /// `A / B`, element-wise with numpy broadcasting. Integer division truncates toward
    /// zero; an integer division by zero is an error, not a value.
    Div = 7,
    /// `max(X, 0)` element-wise; NaN stays NaN.
    Relu = 8,
    /// Clamps `X` to `[min, max]`. As in ONNX (opset 11 and later) the bounds may be the
    /// optional one-element inputs 1 and 2; unlike ONNX they may instead be the float
    /// attributes `min` and `max`, since real models always give them as constants. An
    /// absent bound is the lowest (or highest) finite value of the dtype.
    Clip = 9,
    /// The logistic function `1 / (1 + exp(-X))`, element-wise.
    Sigmoid = 10,
    /// Hyperbolic tangent, element-wise.
    Tanh = 11,
    /// `exp(X) / sum(exp(X))` along the single dimension `axis` (opset 13 semantics;
    /// default -1, negative values count from the end).
    Softmax = 12,
    /// Maximum over each window of `X` `[N, C, spatial...]`. Attributes: `kernel_shape`
    /// (required), `strides`, `dilations`, `pads`, `auto_pad`, `ceil_mode` (round the
    /// output size up) and `storage_order`; see [`crate::shape::PoolGeometry`]. The
    /// optional second output `Indices` (i64) holds each maximum's flat index in `X`,
    /// with the spatial axes in column-major order when `storage_order` is 1.
    MaxPool = 13,
    /// Mean over each window of `X` `[N, C, spatial...]`, with MaxPool's window attributes
    /// plus `count_include_pad` (default 0: the divisor counts only elements inside the
    /// input).
    AveragePool = 14,
    /// Mean over all spatial dimensions of `X` `[N, C, spatial...]`, giving
    /// `[N, C, 1, ...]` with the input's rank. No attributes.
    GlobalAveragePool = 15,
    /// The same elements under a new shape. The target comes from the `shape` attribute
    /// (an IR addition) or, as in ONNX, from a constant `i64` input 1. In the target, -1
    /// (at most once) is inferred from the element count and 0 copies the input's extent
    /// at that position unless the `allowzero` attribute is non-zero.
    Reshape = 16,
    /// Permutes the dimensions: output dimension `i` is input dimension `perm[i]`. Without
    /// `perm` the dimensions are reversed.
    Transpose = 17,
    /// Joins its inputs along `axis` (negative counts from the end); they must agree on
    /// every other dimension.
    Concat = 18,
    /// Reshapes to 2-D: `[product of dims before axis, product of the rest]`. `axis`
    /// defaults to 1 and may equal the rank (giving `[all, 1]`).
    Flatten = 19,
    /// `A ^ B` element-wise with numpy broadcasting (float; the exponent may be any numeric dtype).
    Pow = 20,
    /// Square root, element-wise (float).
    Sqrt = 21,
    /// `e^x`, element-wise (float).
    Exp = 22,
    /// Natural logarithm, element-wise (float; `log(0) = -inf`, negative inputs give NaN).
    Log = 23,
    /// `-x`, element-wise (float and signed integers; integers wrap).
    Neg = 24,
    /// `|x|`, element-wise (float and integers; integers wrap at the minimum).
    Abs = 25,
    /// The error function, element-wise (float).
    Erf = 26,
    /// `x < 0 ? alpha * x : x`; attribute `alpha` (default 0.01).
    LeakyRelu = 27,
    /// `max(0, min(1, alpha * x + beta))`; attributes `alpha` (default 0.2) and `beta` (default 0.5).
    HardSigmoid = 28,
    /// `x * max(0, min(1, x / 6 + 1/2))`.
    HardSwish = 29,
    /// Gaussian error linear unit; attribute `approximate` (`none` or `tanh`, default `none`).
    Gelu = 30,
    /// `log(softmax(x))` along `axis` (default -1), computed stably.
    LogSoftmax = 31,
    /// Batch normalization of `X` `[N, C, ...]` with `scale`, `B`, `mean`, `var` (each `[C]`); attributes `epsilon` (default 1e-5), `training_mode` (default 0) and `momentum` (default 0.9). In inference `Y` uses `mean` and `var`; with `training_mode` it uses the batch's per-channel mean and (population) variance, and two more outputs give `running_mean = mean * momentum + batch_mean * (1 - momentum)` and likewise `running_var`.
    BatchNormalization = 32,
    /// Normalization over the axes from `axis` (default -1) to the end, then `* scale (+ B)`; attribute `epsilon` (default 1e-5). Outputs: `Y`, optionally `Mean` and `InvStdDev`.
    LayerNormalization = 33,
    /// Mean over `axes` (attribute or constant i64 input 1; all axes when absent unless `noop_with_empty_axes`); `keepdims` defaults to 1.
    ReduceMean = 34,
    /// Sum over `axes`, with the same rules as [`OpKind::ReduceMean`].
    ReduceSum = 35,
    /// Maximum over `axes`, with the same rules as [`OpKind::ReduceMean`].
    ReduceMax = 36,
    /// `A == B` with numpy broadcasting; the output is bool.
    Equal = 37,
    /// Logical not of a bool tensor.
    Not = 38,
    /// `A > B` with numpy broadcasting; the output is bool.
    Greater = 39,
    /// `A < B` with numpy broadcasting; the output is bool.
    Less = 40,
    /// Logical and of two bool tensors with numpy broadcasting.
    And = 41,
    /// `condition ? X : Y` with three-way numpy broadcasting; `condition` is bool.
    Where = 42,
    /// Converts to the dtype named by attribute `to` (an ONNX TensorProto data type code).
    /// `saturate` (default 1) governs out-of-range values of the float8 targets, and
    /// `round_mode` (`up`, `down`, `nearest`; default `up`) the rounding to E8M0.
    Cast = 43,
    /// Rounds up to the nearest integer, element-wise (float; `-0.5` gives `-0.0`, NaN and
    /// infinities pass through).
    Ceil = 44,
    /// Removes size-1 dimensions listed in `axes` (attribute or constant i64 input 1; all size-1 dimensions when absent).
    Squeeze = 50,
    /// Inserts size-1 dimensions at `axes` (attribute or constant i64 input 1), positions in the output.
    Unsqueeze = 51,
    /// Splits along `axis` (default 0) into parts given by `split` (attribute or constant i64 input 1) or into `num_outputs` equal parts (the last may be smaller); several outputs.
    Split = 52,
    /// Slices with `starts`, `ends`, optional `axes` and `steps` (constant i64 inputs 1-4 or attributes of those names), clamped as in ONNX.
    Slice = 53,
    /// Takes entries of `data` along `axis` (default 0) at integer `indices` (negative counts from the end); output shape is `data[:axis] + indices + data[axis+1:]`.
    Gather = 54,
    /// Broadcasts the input to a shape given by a constant i64 input 1 (numpy rules, either side may be 1).
    Expand = 55,
    /// Pads with `pads` (constant i64 input 1 or attribute: all begins then all ends, negative crops), `mode` `constant` (value from optional input 2, default 0), `reflect`, `edge` or `wrap`.
    Pad = 56,
    /// Repeats the input `repeats[i]` times along each axis (constant i64 input 1).
    Tile = 57,
    /// The input's shape as an i64 vector; attributes `start`/`end` select a range of axes.
    Shape = 58,
    /// The input's element count as an i64 scalar.
    Size = 59,
    /// A copy of the input.
    Identity = 60,
    /// A tensor of the shape given by constant i64 input 0, filled with the attribute `value` (a one-element tensor stored as `value` (float) and `value_dtype` (int code); default f32 0).
    ConstantOfShape = 61,
    /// Transposed convolution of `X` `[N, C, spatial...]` with `W` `[C, M/group, kernel...]` and optional bias `[M]`; attributes `strides`, `pads`, `dilations`, `group`, `output_padding`, `output_shape`, `auto_pad`.
    ConvTranspose = 62,
    /// Resizes the spatial dimensions; attributes `mode` (`nearest`, `linear`), `coordinate_transformation_mode`, `nearest_mode`, and the target as `scales` (floats) or `sizes` (ints) attributes or constant inputs 2/3.
    Resize = 63,
    /// A long short-term memory layer (ONNX LSTM: gates i, o, f, c; `direction` forward, reverse or bidirectional; `hidden_size`; optional bias, sequence lengths, initial h and c, peepholes). Outputs `Y`, `Y_h`, `Y_c`.
    LSTM = 64,
    /// A gated recurrent unit layer (ONNX GRU: gates z, r, h; `linear_before_reset`; `direction`; `hidden_size`). Outputs `Y`, `Y_h`.
    GRU = 65,
    /// `saturate(round_half_even(x / scale) + zero_point)` in the output dtype: the zero
    /// point's, else the one the `output_dtype` attribute names (an ONNX type code), else
    /// u8. Integer outputs of 2 to 16 bits, or a float8/float4 format (no rounding to an
    /// integer; `saturate` as in Cast). The scale is one value (per tensor), a 1-D tensor
    /// along `axis` (per axis, default 1), or, with `block_size` > 0, a tensor of the
    /// input's rank whose extent along `axis` is the input's divided by `block_size`
    /// (rounded up): each run of `block_size` elements along `axis` shares one scale.
    QuantizeLinear = 66,
    /// `(x - zero_point) * scale` in the scale's dtype (or the one named by the
    /// `output_dtype` attribute, an ONNX type code); per-tensor, per-axis (`axis`) or
    /// blocked (`axis` and `block_size`), as in QuantizeLinear.
    DequantizeLinear = 67,
    /// Runs one of two subgraphs: `then_branch` when the one-element bool input 0 is true,
    /// else `else_branch` (both [`Attr::Graph`](crate::ir::Attr::Graph)). Inputs 1.. are the outer values the
    /// branches read (see [`OpKind::is_control_flow`] for how captures work); both branches
    /// take all of them, in that order, and produce as many outputs as the node has.
    If = 68,
    /// A loop (ONNX `Loop`, opsets 11-16, tensors only). Inputs: the trip count `M` (i64,
    /// one element, or 0 elements for none), the condition `cond` (bool, one element, or 0
    /// elements for none), the `N` loop-carried initial values, then the `captures`
    /// (attribute, default 0) outer values the body reads. The `body` graph takes
    /// `(iteration i64 [], cond bool [], N carried..., captures...)` and returns
    /// `(cond, N carried..., K scan values...)`; the node's outputs are the `N` final carried
    /// values, then the `K` scan values stacked along a new leading axis.
    Loop = 69,
    /// Converts input 0 to the dtype of input 1 (whose values are not read); attributes
    /// `saturate` and `round_mode` as in Cast.
    CastLike = 70,
    /// `A >= B` with numpy broadcasting; the output is bool (false when either is NaN).
    GreaterOrEqual = 71,
    /// `A <= B` with numpy broadcasting; the output is bool (false when either is NaN).
    LessOrEqual = 72,
    /// Rounds down to the nearest integer, element-wise (float; NaN and infinities pass
    /// through, the sign of zero is kept).
    Floor = 73,
    /// Rounds to the nearest integer, halves to even (`2.5` gives `2`), element-wise (float).
    Round = 74,
    /// `-1`, `0` or `1` by the sign of `x`, element-wise (any numeric dtype; both zeros
    /// give `+0`, NaN gives NaN).
    Sign = 75,
    /// `1 / x`, element-wise (float).
    Reciprocal = 76,
    /// The remainder of `A / B` with numpy broadcasting. With `fmod` 0 (the default) it
    /// takes the divisor's sign (Python's `%`, numpy's `mod`); with `fmod` 1 the
    /// dividend's (C's `fmod`). Integer remainders by zero are an error, not a value.
    Mod = 77,
    /// Whether `x` is NaN, element-wise (float in, bool out).
    IsNaN = 78,
    /// Whether `x` is infinite, element-wise (float in, bool out); attributes
    /// `detect_negative` and `detect_positive` (default 1) choose which infinities count.
    IsInf = 79,
    /// Sine, element-wise (float, radians).
    Sin = 80,
    /// Cosine, element-wise (float).
    Cos = 81,
    /// Tangent, element-wise (float).
    Tan = 82,
    /// Arcsine, element-wise (float; NaN outside `[-1, 1]`).
    Asin = 83,
    /// Arccosine, element-wise (float; NaN outside `[-1, 1]`).
    Acos = 84,
    /// Arctangent, element-wise (float).
    Atan = 85,
    /// Hyperbolic sine, element-wise (float).
    Sinh = 86,
    /// Hyperbolic cosine, element-wise (float).
    Cosh = 87,
    /// Inverse hyperbolic sine, element-wise (float).
    Asinh = 88,
    /// Inverse hyperbolic cosine, element-wise (float; NaN below 1).
    Acosh = 89,
    /// Inverse hyperbolic tangent, element-wise (float; `±inf` at `±1`, NaN beyond).
    Atanh = 90,
    /// The i64 position of the largest element along `axis` (default 0; negative counts
    /// from the end), the axis kept as an extent of 1 unless `keepdims` is 0. Ties give
    /// the first position, or the last with `select_last_index`; NaN counts as the
    /// largest value. The axis must not be empty.
    ArgMax = 91,
    /// The position of the smallest element, with [`OpKind::ArgMax`]'s rules (NaN still
    /// counts as found first).
    ArgMin = 92,
    /// Minimum over `axes`, with the rules of [`OpKind::ReduceMean`]; of nothing it is
    /// `+inf` (the type's maximum for integers, true for bool).
    ReduceMin = 93,
    /// Product over `axes` (of nothing: 1), with the rules of [`OpKind::ReduceMean`].
    ReduceProd = 94,
    /// Sum of absolute values over `axes` (of nothing: 0).
    ReduceL1 = 95,
    /// Square root of the sum of squares over `axes` (of nothing: 0).
    ReduceL2 = 96,
    /// `log(sum(exp(x)))` over `axes`, computed stably (of nothing: `-inf`).
    ReduceLogSumExp = 97,
    /// Sum of squares over `axes` (of nothing: 0).
    ReduceSumSquare = 98,
    /// Running sums of `x` along the axis given by input 1 (one i32 or i64 value, which
    /// may be computed at run time). `exclusive` 1 leaves each element out of its own
    /// sum; `reverse` 1 sums from the end. Integer sums wrap.
    CumSum = 99,
    /// The upper (`upper` 1, the default) or lower triangle of each matrix in the last two
    /// dimensions, from the `k`-th diagonal (optional i64 input 1, default 0; positive is
    /// above the main diagonal); other elements become 0.
    Trilu = 100,
    /// `out[i][j]... = data[...][index]...` with the `axis` (default 0) coordinate taken
    /// from `indices` (i32 or i64, negative counts from the end); `indices` has the data's
    /// rank and gives the output's shape.
    GatherElements = 101,
    /// The data with `updates` written at the positions GatherElements would read
    /// (`indices` and `updates` share a shape). `reduction` (`none`, `add`, `mul`, `max`,
    /// `min`) combines each update with the current value, in index order.
    ScatterElements = 102,
    /// Slices of `data` addressed by the index tuples in the last dimension of
    /// `indices` (i64), after `batch_dims` leading dimensions shared by both.
    GatherND = 103,
    /// The data with `updates` written at the slices GatherND would read (no batch
    /// dimensions); `reduction` as in [`OpKind::ScatterElements`].
    ScatterND = 104,
    /// `[N, C, H, W]` to `[N, C / b², H b, W b]` for `blocksize` b, the channels split in
    /// `mode` `DCR` (depth-column-row, the default) or `CRD` order.
    DepthToSpace = 105,
    /// `[N, C, H, W]` to `[N, C b², H / b, W / b]` for `blocksize` b, the inverse of
    /// DepthToSpace's `DCR` mode.
    SpaceToDepth = 106,
    /// Logical or of two bool tensors with numpy broadcasting.
    Or = 107,
    /// Logical exclusive or of two bool tensors with numpy broadcasting.
    Xor = 108,
    /// The `k` largest (`largest` 1, the default) or smallest elements along `axis`
    /// (default -1) and their i64 positions: outputs `Values` and `Indices`. `k` is a
    /// constant one-element i64 input 1 (or, before opset 10, the attribute `k`). Results
    /// are in order (best first) whatever `sorted` says; equal values keep the lower
    /// position first, and NaN counts as the largest value.
    TopK = 109,
    /// 1 at the first largest element along `axis` (default -1; NaN counts as largest),
    /// 0 elsewhere, in the input's dtype (opset 13 semantics).
    Hardmax = 110,
    /// `start + i * delta` for `i` in `0..max(ceil((limit - start) / delta), 0)`: a 1-D
    /// tensor from three scalar inputs `start`, `limit`, `delta` of one dtype (an integer
    /// or float dtype). The length depends on the values, so its shape is known where the
    /// three are constants (a shape rule reads i64 operands; the reference any dtype). A
    /// `delta` of 0 is an error.
    Range = 111,
    /// One-hot encoding: `indices` (any numeric dtype, truncated toward zero; negative
    /// counts from `depth`) with a new axis of extent `depth` inserted at `axis` (default
    /// -1, the last of the output), holding `values[1]` where the axis position equals the
    /// index and `values[0]` elsewhere (an index outside `[-depth, depth)` gives a line of
    /// `values[0]`). `depth` is a one-element i64 input 1 (the importer casts other
    /// dtypes, as ONNX does); `values` is a two-element input 2 of the output's dtype.
    OneHot = 112,
    /// Bitwise and of two integer tensors of one dtype, with numpy broadcasting.
    BitwiseAnd = 113,
    /// Bitwise or, like [`OpKind::BitwiseAnd`].
    BitwiseOr = 114,
    /// Bitwise exclusive or, like [`OpKind::BitwiseAnd`].
    BitwiseXor = 115,
    /// Bitwise complement of an integer tensor.
    BitwiseNot = 116,
    /// `X << Y` (`direction` `LEFT`) or `X >> Y` (`RIGHT`, logical) of two unsigned
    /// integer tensors of one dtype, with numpy broadcasting; a shift by the width or more
    /// gives 0.
    BitShift = 117,
    /// Running products of `x` along the axis given by input 1, with the attributes and
    /// rules of [`OpKind::CumSum`] (an empty product is 1). Integer products wrap.
    CumProd = 118,
    /// Scaled dot-product attention (ONNX Attention, opset 23 and 24). Inputs: `Q`, `K`,
    /// `V`, then the optional `attn_mask`, `past_key`, `past_value` and `nonpad_kv_seqlen`
    /// (a 0-element operand stands for an omitted one). `Q` is `[B, Hq, S, D]` and `K`,
    /// `V` are `[B, Hkv, L, D]` and `[B, Hkv, L, Dv]`; or all three are 3-D
    /// `[B, S, Hq*D]`, `[B, L, Hkv*D]`, `[B, L, Hkv*Dv]`, split into heads by the
    /// attributes `q_num_heads` and `kv_num_heads` (required then). `past_key` and
    /// `past_value` (`[B, Hkv, P, D]`, `[B, Hkv, P, Dv]`) are concatenated before `K` and
    /// `V` along the sequence axis, giving `T = P + L` keys. Hq must be a multiple of Hkv
    /// (grouped-query attention: query head `h` reads key/value head `h / (Hq / Hkv)`).
    ///
    /// Per head: `s = (Q Kᵀ) * scale` (`scale` default `1 / sqrt(D)`), then
    /// `softcap * tanh(s / softcap)` when `softcap` > 0, then the bias is added and a
    /// softmax taken over the `T` keys, and `Y = softmax · V`. The bias is the sum of:
    /// `attn_mask` broadcast (numpy rules) to `[B, Hq, S, T]` (a float mask is added, a bool
    /// one gives 0 where true and -inf where false; a last extent shorter than `T` is padded
    /// with -inf / false); with `is_causal` non-zero, -inf where key `j > i + offset` for
    /// query `i` (`offset` = P, or `nonpad_kv_seqlen[b] - S` when that is given without a
    /// past, else 0); and with `nonpad_kv_seqlen` (i64 `[B]`, opset 24), -inf where
    /// `j >= nonpad_kv_seqlen[b]`. A line of keys that are all masked gives NaN, as ONNX's
    /// reference does.
    ///
    /// Outputs: `Y` (`[B, Hq, S, Dv]`, or `[B, S, Hq*Dv]` for 3-D inputs), `present_key`
    /// and `present_value` (the concatenated 4-D keys and values) and `qk_matmul_output`
    /// `[B, Hq, S, T]`: by `qk_matmul_output_mode` the scaled (and softcapped) scores (0,
    /// the default), the same plus the bias (1; but with a softcap, the capped scores
    /// without the bias, as ONNX's reference and test data have it), the softcapped
    /// scores plus the bias (2; the softcap precedes the bias) or the softmax (3). `softmax_precision` only names the precision
    /// of the softmax, which Baton's kernels may raise. Every operand and output has Q's
    /// float dtype except the mask (bool or Q's dtype) and `nonpad_kv_seqlen`.
    Attention = 119,
    /// Rotary position embedding (ONNX RotaryEmbedding, opset 23) of `X`,
    /// `[B, H, S, D]` or `[B, S, H*D]` (3-D needs the attribute `num_heads`). The first
    /// `rotary_embedding_dim` (default 0: all of `D`) elements of each head are rotated in
    /// pairs `(x1, x2)` (`interleaved` 1: adjacent elements `2i, 2i+1`; else the two
    /// halves `i, i + R/2`) by `x1' = x1 cos - x2 sin`, `x2' = x1 sin + x2 cos`, the rest
    /// copied. `cos_cache` and `sin_cache` are `[max_position, R/2]` indexed by the i64
    /// `position_ids` `[B, S]` (optional input 3), or without position ids
    /// `[B, S, R/2]` directly. The output has X's shape and dtype.
    RotaryEmbedding = 120,
    /// Samples `X` `[N, C, D1..Dr]` at the positions `grid` `[N, H1..Hr, r]` holds,
    /// giving `[N, C, H1..Hr]`. Grid entries are normalized to `[-1, 1]` and list the
    /// innermost axis first (x, then y, ...). Attributes: `mode` (`linear`, the default,
    /// `nearest` or `cubic`; opset 16's `bilinear` and `bicubic` mean the same),
    /// `padding_mode` (`zeros`, the default, `border` or `reflection`: what positions
    /// outside `X` read) and `align_corners` (0: -1 and 1 are the outer edges of the edge
    /// pixels; 1: their centres). `X` and `grid` are float tensors whose dtypes may
    /// differ; the output has `X`'s.
    GridSample = 121,
    /// The sampling grid of an affine transform (opset 20), for GridSample: `theta`
    /// `[N, 2, 3]` (2-D) or `[N, 3, 4]` (3-D), float, and `size` `[N, C, H, W]` or
    /// `[N, C, D, H, W]` (i64, a constant: it decides the output's shape) give `[N, H, W, 2]` or
    /// `[N, D, H, W, 3]` of theta's dtype. Each output point is `theta[n]` times the point's
    /// normalized coordinates `(x, y[, z], 1)`, `x` running along W: with `align_corners` 1
    /// `-1 + 2i / (n - 1)` (the corner pixels' centres at ±1; a lone pixel is at -1), else
    /// `(2i + 1) / n - 1` (the pixels' centres with their outer edges at ±1).
    AffineGrid = 122,
    /// Rearranges column blocks into an image (ONNX Col2Im, opset 18; PyTorch's `fold`):
    /// `input` `[N, C * prod(block), L]`, `image_shape` and `block_shape` (1-D i64, one
    /// value per spatial axis; constants, or values known at run time, as the output's
    /// shape depends on them) give `[N, C, image...]`. The `L` columns are the positions
    /// of the block (dilated by `dilations`) sliding by `strides` over the image padded by
    /// `pads` (all begins, then all ends), row-major; row `c * prod(block) + e` of a column
    /// is added to the image element that block element `e` covers there. Overlaps add,
    /// elements in the padding are dropped.
    Col2Im = 123,
    /// The discrete Fourier transform of `input` `[..., signal..., 1 or 2]` (real, or
    /// complex as real and imaginary parts on the last axis) along one signal axis:
    /// `y[k] = sum_n x[n] e^(-2 pi i k n / N)`, or with `inverse` `1/N sum_k` of the
    /// conjugate kernel. Input 1, `dft_length` (one i64 value, optional), sets `N`
    /// (the signal is zero-padded or cut to it; default its extent); input 2, `axis` (one
    /// i64 value, optional, default -2; negative counts from the end, the last axis
    /// excluded), picks the axis (ONNX opset 20's form; the importer makes opset 17's
    /// attribute this input). With `onesided` a forward transform keeps the bins
    /// `0..=N/2`; an inverse one reads the input as those bins of a Hermitian spectrum
    /// (`N` defaults to `2 * (extent - 1)`) and gives the real signal `[..., N, ..., 1]`.
    /// Both shape-deciding inputs must be constants (value inputs at run time).
    DFT = 125,
    /// Short-time Fourier transform of `signal` `[batch, length, 1 or 2]`: frames of
    /// `frame_length` samples every `frame_step` (input 1, one i64 value), each multiplied
    /// by the optional `window` (input 2, `[frame_length]`, the signal's dtype) and
    /// transformed as [`OpKind::DFT`] does, giving `[batch, frames, bins, 2]` with
    /// `frames = (length - frame_length) / frame_step + 1`. `frame_length` is input 3
    /// (one i64 value) or else the window's length. `onesided` (default 1) keeps the bins
    /// `0..=frame_length/2`. The step and length must be constants.
    STFT = 126,
    /// The Hann window `0.5 - 0.5 cos(2 pi n / N)` for `n` in `0..size`, `size` one i64
    /// value (a constant), `N = size` when `periodic` (default 1) else `size - 1` (a
    /// single symmetric point is 1). The output's dtype is the ONNX type code
    /// `output_datatype` (default 1, f32); an integer one truncates.
    HannWindow = 127,
    /// The Hamming window `25/46 - 21/46 cos(2 pi n / N)`, like [`OpKind::HannWindow`].
    HammingWindow = 128,
    /// The Blackman window `0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)`, like
    /// [`OpKind::HannWindow`].
    BlackmanWindow = 129,
    /// Einstein summation over any number of operands of one numeric dtype, as numpy's
    /// `einsum` reads the string attribute `equation` (see [`crate::shape::einsum`]):
    /// a term per operand, an optional `->` output term (else the labels used once, in
    /// ASCII order, after any `...` axes), `...` for broadcast leading axes, a label
    /// repeated within a term for a diagonal, and a sum over every label left out of the
    /// output. Integer sums wrap.
    Einsum = 130,
    /// Non-maximum suppression (opset 10/11): `boxes` f32 `[B, N, 4]`, `scores` f32
    /// `[B, C, N]`, then the optional one-element inputs `max_output_boxes_per_class`
    /// (i64, default 0: no box is selected), `iou_threshold` and `score_threshold` (f32).
    /// Per batch and class, boxes with a score above `score_threshold` are taken best score
    /// first (equal scores: lower box index first), each dropping the later boxes whose
    /// intersection over union with it exceeds `iou_threshold`, up to the maximum. Boxes
    /// are corners `[y1, x1, y2, x2]` in either order (`center_point_box` 0, the default)
    /// or `[x_center, y_center, width, height]` (1). Output `[n, 3]` i64 rows `[batch,
    /// class, box]`, by batch, then class, then selection order: `n` depends on the values.
    NonMaxSuppression = 131,
    /// The distinct elements of `x` (flattened, or the distinct slices along `axis` when
    /// given), sorted ascending (`sorted` 1, the default; slices compare
    /// lexicographically) or in order of first occurrence (0). Four outputs: `Y` (the
    /// distinct values, `[u]` or `x`'s shape with `u` along the axis), `indices` (i64 `[u]`,
    /// each one's first occurrence), `inverse_indices` (i64, for each input element or
    /// slice, its position in `Y`) and `counts` (i64 `[u]`). `u` depends on the values.
    Unique = 132,
    /// The slices of `x` along `axis` (or its elements, flattened, without one) where the
    /// bool `condition` (1-D, possibly shorter than the axis: missing entries count as
    /// false) is true. The output's extent there is the number of trues, which depends on
    /// the values.
    Compress = 133,
    /// Linear attention (ONNX LinearAttention, opset 27): per batch and key/value head a
    /// recurrent state `S` `[d_k, d_v]`, updated once per token. Inputs: `query`
    /// `[B, T, Hq*d_k]`, `key` `[B, T, Hkv*d_k]`, `value` `[B, T, Hkv*d_v]`, then the
    /// optional `past_state` `[B, Hkv, d_k, d_v]` (the initial `S`, default zeros),
    /// `decay` (the gate `g` in log space: `[B, T, Hkv*d_k]`, one per key dimension, or
    /// `[B, T, Hkv]`, one per head) and `beta` (`[B, T, Hkv]` or `[B, T, 1]`, shared by
    /// the heads); a 0-element operand stands for an omitted one. Attributes:
    /// `q_num_heads` and `kv_num_heads` (required; `Hq` a multiple of `Hkv`: query head
    /// `h` reads the state of head `h / (Hq / Hkv)`), `update_rule` and `scale` (default
    /// 0: `1 / sqrt(d_k)`); `chunk_size` is a tuning hint that changes no result.
    ///
    /// Per token, with `k`, `v`, `q` the head's vectors, `⊗` the outer product and
    /// `exp(g)` scaling the rows (the `d_k` index) of `S`: `linear` `S += k ⊗ v`;
    /// `gated` `S = exp(g) S + k ⊗ v`; `delta` `S += k ⊗ β (v - Sᵀ k)`; `gated_delta`
    /// (the default) `S' = exp(g) S`, `S = S' + k ⊗ β (v - S'ᵀ k)`. Then
    /// `o = scale · qᵀ S`. `decay` is given exactly for the gated rules and `beta` exactly
    /// for the delta rules. Outputs: `output` `[B, T, Hq*d_v]` of query's dtype and
    /// `present_state` (the final `S`) of past_state's dtype, or query's without one. The
    /// float operands share query's dtype, except `past_state`, which may differ.
    LinearAttention = 134,
    /// Stateful causal depthwise 1-D convolution (ONNX CausalConvWithState, opset 27):
    /// `input` `[B, C, L]` and `weight` `[C, 1, K]`, then the optional `bias` `[C]` and
    /// `past_state` `[B, C, K-1]` (a 0-element operand stands for an omitted one; an
    /// omitted past state is zeros). With `P` the past state followed by the input along
    /// the last axis, `output[b, c, t] = bias[c] + sum_k P[b, c, t + k] * weight[c, 0, k]`
    /// (`[B, C, L]`), then `x * sigmoid(x)` when `activation` is `silu` or `swish` (the
    /// default `none` leaves it); the second output, `present_state` `[B, C, K-1]`, is
    /// the last `K - 1` positions of `P`, the state of the next call. Float dtypes.
    CausalConvWithState = 136,
    /// Deformable convolution (ONNX DeformConv, opset 19/22): a [`OpKind::Conv`] over `X`
    /// with weights `W` (attributes `group`, `kernel_shape`, `strides`, `dilations`,
    /// `pads`; no `auto_pad`) whose every tap reads `X` at its regular position plus a
    /// fractional displacement from `offset` `[N, offset_group * prod(kernel) * r, out...]`
    /// (per offset group, then tap, then spatial axis, outermost first), interpolated
    /// linearly along each axis, with positions outside `X` reading 0; each tap's product
    /// is scaled by the optional `mask` `[N, offset_group * prod(kernel), out...]`, and the
    /// optional bias `B` `[oC]` is added (input 3; a 0-element operand stands for an
    /// omitted one). Input channel `c` uses offset group `c / (C / offset_group)`
    /// (attribute `offset_group`, default 1). Float dtypes.
    DeformConv = 137,
    /// The partial inverse of MaxPool (ONNX MaxUnpool, opset 9/11/22): `X`
    /// `[N, C, spatial...]` (float) and the i64 `I` of X's shape, as MaxPool's `Indices`
    /// output gives them, place each value of `X` at the position its index names in the
    /// row-major order of the whole unpooled tensor `[N, C, (in - 1) * stride - pad_begin
    /// - pad_end + kernel ...]` (attributes `kernel_shape`, required, `strides` and
    /// `pads`); every other element is 0. The optional input 2, `output_shape` (i64, one
    /// value per axis; a constant or a value known at run time), may enlarge the spatial
    /// axes: the unpooled tensor then sits at the start of each axis and the rest is 0,
    /// as ONNX's reference and test data have it. An index outside the unpooled tensor is
    /// an error.
    MaxUnpool = 138,
    /// Integer convolution (ONNX ConvInteger, opset 10): `x` and `w` (u8 or i8, either
    /// may differ) minus their optional zero points (input 2, x's dtype, one value; input
    /// 3, w's dtype, one value or one per output channel), convolved as
    /// [`OpKind::Conv`] is with its attributes (no bias), giving i32. Padding contributes
    /// 0 after the zero point is taken away. Sums wrap at 32 bits.
    ConvInteger = 139,
    /// Integer matrix product (ONNX MatMulInteger, opset 10): `A` and `B` (u8 or i8) minus
    /// their optional zero points (input 2, A's dtype, one value or one per row of `A`;
    /// input 3, B's dtype, one value or one per column of `B`), multiplied as
    /// [`OpKind::MatMul`] does, giving i32. Sums wrap at 32 bits.
    MatMulInteger = 140,
    /// Region-of-interest pooling by bilinear sampling (ONNX RoiAlign, opsets 10 and 16):
    /// `X` `[N, C, H, W]` (float), `rois` `[R, 4]` (`x1, y1, x2, y2` in input coordinates
    /// before `spatial_scale`, X's dtype) and `batch_indices` `[R]` (i64, each in `0..N`)
    /// give `[R, C, output_height, output_width]` (attributes, default 1). Each output bin
    /// averages (`mode` `avg`, the default) or takes the largest of (`max`) a grid of
    /// `sampling_ratio` x `sampling_ratio` samples (0, the default: `ceil(roi / bins)` per
    /// axis). `coordinate_transformation_mode` `half_pixel` (the default, opset 16)
    /// shifts the scaled box by -0.5; `output_half_pixel` (opset 10's only behaviour, which
    /// the importer writes for it) does not and makes a box at least 1 x 1. `max` follows
    /// ONNX's reference and test data: each sample contributes the largest of its four
    /// weighted corner terms, not its interpolated value. A sample more than one pixel
    /// outside `X` contributes 0.
    RoiAlign = 141,
    /// The determinant of each square matrix in the last two dimensions of a float `X`
    /// `[..., M, M]`, giving `[...]` (a 0 x 0 matrix has determinant 1). Kernels may factor
    /// the matrix (LU with partial pivoting) rather than expand it.
    Det = 142,
    /// Reverses the first `sequence_lens[b]` entries along `time_axis` (default 0) of each
    /// batch entry `b` along `batch_axis` (default 1), leaving the rest in place; the two axes
    /// are 0 and 1 in either order and the input has rank >= 2. `sequence_lens` is i64
    /// `[batch]`, each in `0..=time` (0 and 1 leave the entry as it is).
    ReverseSequence = 143,
    /// Writes `update` into `past_cache` along the sequence axis `axis` (default -2; not
    /// 0, the batch axis), giving the new cache (ONNX TensorScatter, opset 24, a KV cache's
    /// in-place update): the two have one dtype and rank and equal extents except along
    /// `axis`, where `update`'s is at most the cache's. Every position before `axis` of
    /// batch entry `b` gets `update`'s steps at `write_indices[b] + step` (input 2, i64
    /// `[batch]`, optional: all 0 when omitted); `mode` `linear` (the default) needs
    /// those inside the cache and `circular` wraps them modulo its length. The rest of
    /// the cache is copied. Write indices must be >= 0.
    TensorScatter = 144,
    /// Reinterprets the bits of each element as the dtype named by the attribute `to` (an ONNX
    /// type code): the output has the input's shape, and each element the same bit pattern
    /// (little-endian), which Cast would instead convert by value. The two dtypes must have the
    /// same bit width, a bool counting as 8 bits (ONNX stores it in a byte); among the sub-byte
    /// types (stored one to a byte, see [`crate::dtype`]) the low bits are kept and extended as
    /// the target's signedness asks. A bool must come out 0 or 1: other bytes are an error.
    BitCast = 145,
    /// A simple (Elman) recurrent layer (ONNX RNN, opset 7/14/22): per step
    /// `H' = f(clip(Xt.W^T + H.R^T + Wb + Rb))`. Inputs `X` `[seq, batch, input]`, `W`
    /// `[dirs, H, input]`, `R` `[dirs, H, H]`, then optional `B` `[dirs, 2*H]` (`Wb` then
    /// `Rb`), `sequence_lens` (i32 `[batch]`, each in `1..=seq`; steps past an entry's
    /// length leave `Y` zero and `Y_h` at its last step) and `initial_h` `[dirs, batch, H]`;
    /// a 0-element operand stands for an omitted one. Attributes as LSTM and GRU keep
    /// them: `hidden_size`, `direction` (`forward`, `reverse`, `bidirectional`), `clip`
    /// (bounds the activation's input to `[-clip, clip]` when present), layout 0 only (the
    /// importer transposes batch-first models around the node), and `activations` as one
    /// comma-separated string (the IR has no string lists), one name per direction, default
    /// `Tanh`: `Relu`, `Tanh`, `Sigmoid`, `Affine`, `LeakyRelu`, `ThresholdedRelu`,
    /// `ScaledTanh`, `HardSigmoid`, `Elu`, `Softsign` or `Softplus` (any letter case).
    /// `activation_alpha` and `activation_beta` (floats) are taken in order by the
    /// activations that read them, as ONNX Runtime does (alpha: Affine, LeakyRelu,
    /// ThresholdedRelu, ScaledTanh, HardSigmoid, Elu; beta: Affine, ScaledTanh,
    /// HardSigmoid); a missing one is the ONNX operator's default. Outputs `Y`
    /// `[seq, dirs, batch, H]` and `Y_h` `[dirs, batch, H]`. Float dtypes.
    RNN = 146,
    /// The matrix that maps a linear-frequency magnitude spectrum to mel bands (ONNX
    /// MelWeightMatrix, opset 17): inputs `num_mel_bins`, `dft_length` and `sample_rate`
    /// (i64 scalars; the first two are constants or values known at run time, since they
    /// give the output's shape) and `lower_edge_hertz`, `upper_edge_hertz` (float
    /// scalars) give `[dft_length / 2 + 1, num_mel_bins]` of the ONNX dtype
    /// `output_datatype` (default 1, f32). Column `i` is a triangle over the FFT bins
    /// between the mel points `i` and `i + 2` of `num_mel_bins + 2` points spaced evenly
    /// in mel from the lower edge (the upper edge divided into `num_mel_bins + 2` steps,
    /// as ONNX's reference has it), each point mapped to the bin
    /// `floor((dft_length + 1) * hertz / sample_rate)`. A point outside the spectrum is
    /// an error.
    MelWeightMatrix = 147,
}
