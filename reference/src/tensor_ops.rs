//! Reference kernels of the ONNX-milestone ops in this family (tensor_ops).
//!
//! # Conventions where ONNX is silent or implementations differ
//!
//! - **Data movement** (Squeeze, Unsqueeze, Split, Slice, Gather, Expand, Pad, Tile,
//!   Identity) moves bytes, so it works on every dtype and keeps every bit (NaN payloads,
//!   `-0.0`). Operands fixing the output shape must be i64.
//! - An optional operand with **0 elements** counts as omitted (the IR can only leave out
//!   trailing inputs): LSTM's `B` before `initial_h`, Resize's `roi` and `scales` before
//!   `sizes`, Pad's empty `constant_value`, Squeeze's empty `axes` (every extent-1 axis
//!   goes, as in ONNX Runtime).
//! - **Gather**: an index outside `[-dim, dim)` is a [`KernelError::Arithmetic`].
//! - **Pad**: negative pads crop first and the mode then pads the cropped extent (ONNX
//!   Runtime's order); `reflect` needs each pad below that extent and `edge` and `wrap`
//!   a non-empty one (`wrap` repeats the extent as often as the pads need). The constant is input 2 (its first element) or else the float attribute
//!   `value` converted to the dtype, else 0.
//! - **ConstantOfShape**: an integer `value` attribute (`Attr::Int`) is used exactly for
//!   integer dtypes; a float one converts with saturation (bool: non-zero is true).
//! - **ConvTranspose** with `output_shape` or `SAME_*` auto-padding takes the total
//!   padding `max(0, full - out)` and puts the smaller half first for `SAME_UPPER` and
//!   the larger half first otherwise (the ONNX specification's formula).
//! - **Resize** follows ONNX's reference implementation, whose results are the backend
//!   test data: coordinates in f64 from the fractional output extent `in * scale`
//!   (`align_corners` divides by it minus 1, where ONNX Runtime uses the integer extent),
//!   one axis resampled at a time in f64 (an axis whose extent and scale stay 1 is left
//!   alone), taps past the input reading the edge element, taps of weight exactly 0
//!   skipped (a NaN next to a sampled point does not leak in). Scales are the `scales`
//!   attribute or a run-time float operand 2; sizes likewise the attribute or operand 3.
//! - **LSTM/GRU/RNN** run in f64 throughout (state included) and round each output once.
//!   Default activations only. `sequence_lens` may vary per batch entry (1 to `seq`):
//!   steps past an entry's length leave `Y` at 0, and the reverse direction starts at the
//!   entry's last valid step.
//! - **QuantizeLinear** divides in f32 (as ONNX Runtime), rounds half to even, adds the
//!   zero point and saturates to the integer output type; NaN quantizes to the zero
//!   point. To a float8 or float4 output it adds the zero point to the quotient and
//!   converts as Cast does (honouring `saturate`). **DequantizeLinear** computes
//!   `(x - zero_point) * scale` exactly and rounds once to the output dtype. Both take
//!   per-tensor, per-axis and blocked (`block_size`) scales.
//! - **GatherElements, ScatterElements, GatherND, ScatterND**: an index outside its axis
//!   is a [`KernelError::Arithmetic`]; scatters apply updates in index order (a repeated
//!   index without a reduction keeps the last). **CumSum** sums in f64 (integers exactly,
//!   wrapping) and rounds each output once; **CumProd** likewise multiplies. **Trilu** zeroes with all-zero bytes (`+0`).
//! - **Range** computes `start + i * delta` exactly for integers (wrapping to the dtype)
//!   and in f64 for floats, rounded once; its length comes from the operand values of
//!   any dtype (the shared shape rule reads only constant i64 ones). A `delta` of 0 is a
//!   shape error. **OneHot** truncates float indices toward zero (a NaN or infinite one
//!   matches no position) and copies `values`' elements bit for bit.
//! - **NonMaxSuppression, Unique, Compress** are computed whole to learn their output
//!   extents. NonMaxSuppression computes overlaps in f32 (as ONNX Runtime does), keeps a
//!   box whose overlap with every kept one is at most `iou_threshold`, needs a score
//!   strictly above `score_threshold`, and breaks score ties by box order. Unique compares
//!   integers exactly and floats by value (`-0.0` equals `0.0`, NaNs equal one another and
//!   sort last); a slice (with `axis`) compares element by element. Compress refuses a
//!   condition longer than its axis.

mod conv_transpose;
mod generate;
mod index;
mod movement;
mod quantize;
mod recurrent;
mod resize;
mod select;

use baton_delegate_api::{DType, Node, OpKind, TensorMut, TensorRef};

use super::data;
use super::KernelError;
pub(crate) use generate::range_length;
pub(crate) use resize::with_operand_scales;
pub(crate) use select::compute as compute_value_dependent;

/// Whether this family implements `op` for these operand dtypes; `None` if `op` is not
/// one of this family's ops.
pub(crate) fn supports(op: OpKind, input_dtypes: &[DType]) -> Option<Result<(), String>> {
    use Rule::*;
    const ANY: &[DType] = &DType::ALL;
    const FLOAT: &[DType] = &[DType::F32, DType::F16];
    const I64: &[DType] = &[DType::I64];
    const SCALE: &[DType] = &[DType::F32, DType::F16, DType::BF16];
    const INDEX: &[DType] = &[DType::I32, DType::I64];
    const SUMMABLE: &[DType] = &[
        DType::F32,
        DType::F16,
        DType::F64,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U32,
        DType::U64,
    ];
    // `quantize::QUANT_INTS` and `quantize::QUANT_FLOATS` (checked in a test), plus i32
    // for DequantizeLinear.
    const QUANTIZED: &[DType] = &[
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F4E2M1,
    ];
    const DEQUANTIZABLE: &[DType] = &[
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F4E2M1,
        DType::I32,
    ];
    // Per operand position: what it may be. The minimum operand count comes first.
    let (min, rules): (usize, &[Rule]) = match op {
        OpKind::Squeeze | OpKind::Unsqueeze | OpKind::Split => (1, &[Of(ANY), Of(I64)]),
        OpKind::Slice => (1, &[Of(ANY), Of(I64), Of(I64), Of(I64), Of(I64)]),
        OpKind::Gather => (2, &[Of(ANY), Of(&[DType::I32, DType::I64])]),
        OpKind::Expand | OpKind::Tile => (2, &[Of(ANY), Of(I64)]),
        OpKind::Pad => (1, &[Of(ANY), Of(I64), Same, Of(I64)]),
        OpKind::Shape | OpKind::Size | OpKind::Identity => (1, &[Of(ANY)]),
        OpKind::ConstantOfShape => (1, &[Of(I64)]),
        OpKind::ConvTranspose => (2, &[Of(FLOAT), Same, Same]),
        OpKind::Resize => (1, &[Of(ANY), Of(FLOAT), Of(FLOAT), Of(I64)]),
        OpKind::LSTM => (
            3,
            &[
                Of(FLOAT),
                Same,
                Same,
                Same,
                Of(&[DType::I32]),
                Same,
                Same,
                Same,
            ],
        ),
        OpKind::GRU | OpKind::RNN => (3, &[Of(FLOAT), Same, Same, Same, Of(&[DType::I32]), Same]),
        OpKind::QuantizeLinear => (
            2,
            &[
                Of(&[DType::F32, DType::F16, DType::BF16, DType::I32]),
                Of(SCALE),
                Of(QUANTIZED),
            ],
        ),
        OpKind::DequantizeLinear => (2, &[Of(DEQUANTIZABLE), Of(SCALE), Same]),
        OpKind::CumSum | OpKind::CumProd => (2, &[Of(SUMMABLE), Of(INDEX)]),
        OpKind::Trilu => (1, &[Of(ANY), Of(I64)]),
        OpKind::ReverseSequence => (2, &[Of(ANY), Of(I64)]),
        OpKind::TensorScatter => (2, &[Of(ANY), Same, Of(I64)]),
        OpKind::GatherElements => (2, &[Of(ANY), Of(INDEX)]),
        OpKind::ScatterElements => (3, &[Of(ANY), Of(INDEX), Same]),
        OpKind::GatherND => (2, &[Of(ANY), Of(I64)]),
        OpKind::ScatterND => (3, &[Of(ANY), Of(I64), Same]),
        OpKind::DepthToSpace | OpKind::SpaceToDepth => (1, &[Of(ANY)]),
        OpKind::Range => (3, &[Of(generate::RANGE), Same, Same]),
        OpKind::OneHot => (3, &[Of(generate::ONE_HOT_INDICES), Of(I64), Of(ANY)]),
        OpKind::NonMaxSuppression => (
            2,
            &[
                Of(&[DType::F32]),
                Same,
                Of(I64),
                Of(&[DType::F32]),
                Of(&[DType::F32]),
            ],
        ),
        OpKind::Unique => (1, &[Of(ANY)]),
        OpKind::Compress => (2, &[Of(ANY), Of(&[DType::Bool])]),
        _ => return None,
    };
    Some(check_signature(op, input_dtypes, min, rules))
}

/// Runs `node` if its op belongs to this family (operands already checked by
/// [`supports`], output views already checked against the shape rules), else `None`.
pub(crate) fn run(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Option<Result<(), KernelError>> {
    let x = &inputs[0];
    let r = match node.op {
        OpKind::Squeeze | OpKind::Unsqueeze | OpKind::Identity => {
            movement::copy(node, x, &mut outputs[0])
        }
        OpKind::Split => movement::split(node, x, outputs),
        OpKind::Slice => movement::slice(node, inputs, &mut outputs[0]),
        OpKind::Gather => movement::gather(node, x, &inputs[1], &mut outputs[0]),
        OpKind::Expand => movement::expand(x, &mut outputs[0]),
        OpKind::Tile => movement::tile(x, &mut outputs[0]),
        OpKind::Pad => movement::pad(node, inputs, &mut outputs[0]),
        OpKind::Shape => movement::shape(node, x, &mut outputs[0]),
        OpKind::Size => {
            data::store(&mut outputs[0], &[x.len() as i64]);
            Ok(())
        }
        OpKind::ConstantOfShape => movement::constant_of_shape(node, &mut outputs[0]),
        OpKind::ConvTranspose => conv_transpose::conv_transpose(node, inputs, &mut outputs[0]),
        OpKind::Resize => resize::resize(node, inputs, &mut outputs[0]),
        OpKind::LSTM | OpKind::GRU | OpKind::RNN => recurrent::recurrent(node, inputs, outputs),
        OpKind::QuantizeLinear => quantize::quantize(node, inputs, &mut outputs[0]),
        OpKind::DequantizeLinear => quantize::dequantize(node, inputs, &mut outputs[0]),
        OpKind::CumSum | OpKind::CumProd => index::cumsum(node, inputs, &mut outputs[0]),
        OpKind::Trilu => index::trilu(node, inputs, &mut outputs[0]),
        OpKind::ReverseSequence => index::reverse_sequence(node, inputs, &mut outputs[0]),
        OpKind::TensorScatter => index::tensor_scatter(node, inputs, &mut outputs[0]),
        OpKind::GatherElements => index::gather_elements(node, x, &inputs[1], &mut outputs[0]),
        OpKind::ScatterElements => index::scatter_elements(node, inputs, &mut outputs[0]),
        OpKind::GatherND => index::gather_nd(node, x, &inputs[1], &mut outputs[0]),
        OpKind::ScatterND => index::scatter_nd(node, inputs, &mut outputs[0]),
        OpKind::DepthToSpace | OpKind::SpaceToDepth => index::depth_space(node, x, &mut outputs[0]),
        OpKind::Range => generate::range(inputs, &mut outputs[0]),
        OpKind::OneHot => generate::one_hot(node, inputs, &mut outputs[0]),
        OpKind::NonMaxSuppression | OpKind::Unique | OpKind::Compress => {
            select::compute(node, inputs).map(|r| {
                r.map(|results| {
                    for (out, t) in outputs.iter_mut().zip(results) {
                        out.data.copy_from_slice(t.bytes());
                    }
                })
            })?
        }
        _ => return None,
    };
    Some(r)
}

/// What one operand position accepts.
enum Rule {
    /// One of these dtypes.
    Of(&'static [DType]),
    /// Operand 0's dtype.
    Same,
}

fn check_signature(op: OpKind, dtypes: &[DType], min: usize, rules: &[Rule]) -> Result<(), String> {
    if dtypes.len() < min || dtypes.len() > rules.len() {
        return Err(format!(
            "{op} takes {min} to {} inputs, got {}",
            rules.len(),
            dtypes.len()
        ));
    }
    for (i, (&d, rule)) in dtypes.iter().zip(rules).enumerate() {
        match rule {
            Rule::Of(allowed) if !allowed.contains(&d) => {
                let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
                return Err(format!(
                    "{op} operand {i} is {d}; the reference kernels take {}",
                    names.join(", ")
                ));
            }
            Rule::Same if d != dtypes[0] => {
                return Err(format!(
                    "{op} operand {i} is {d} but operand 0 is {}; they must match",
                    dtypes[0]
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The values of i64 input `i` when given, else of the integer-list attribute `attr`.
fn ints(node: &Node, inputs: &[TensorRef<'_>], i: usize, attr: &str) -> Option<Vec<i64>> {
    match inputs.get(i) {
        Some(t) => Some(data::load::<i64>(t)),
        None => node.attr_ints(attr).map(<[i64]>::to_vec),
    }
}

/// Whether optional input `i` is given with at least one element.
fn present(inputs: &[TensorRef<'_>], i: usize) -> bool {
    inputs.get(i).is_some_and(|t| !t.is_empty())
}

/// Normalizes `axis` for `rank` (negative counts from the end), as a kernel error.
fn axis_of(node: &Node, axis: i64, rank: usize) -> Result<usize, KernelError> {
    baton_delegate_api::shape::normalize_axis(axis, rank).map_err(|m| super::shape_err(node, m))
}

/// Copies element `src` of `from` onto element `dst` of `to` (both `size` bytes wide).
fn move_element(to: &mut [u8], dst: usize, from: &[u8], src: usize, size: usize) {
    to[dst * size..(dst + 1) * size].copy_from_slice(&from[src * size..(src + 1) * size]);
}
