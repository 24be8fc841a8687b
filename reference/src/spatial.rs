//! Reference kernels of the convolution relatives: CausalConvWithState, Col2Im and
//! DeformConv, MaxUnpool (which only moves values), ConvInteger, MatMulInteger and
//! RoiAlign.
//!
//! # Conventions
//!
//! - **CausalConvWithState** sums each output's taps in f64 in kernel order, adds the
//!   bias last, and rounds once to the dtype; with a fused SiLU the sum is first rounded
//!   to the dtype (ONNX's definition applies the activation to the convolution's output
//!   in the tensor's type), then `x * sigmoid(x)` is taken in f64 and rounded again.
//! - **Col2Im** adds each image element's contributions in f64 (floats) or wrapping
//!   integers, block element by block element, and rounds once.
//! - **DeformConv** interpolates each tap's sample in f64 (the corners inside `X`, in
//!   row-major order) and sums taps by offset group, tap, then channel; the bias last.
//! - **ConvInteger** and **MatMulInteger** take the zero points away in i64, sum the
//!   products exactly and wrap the sum to i32.
//! - **RoiAlign** follows ONNX's reference implementation, whose results are the backend
//!   test data: box, bin and sample coordinates in f64 (the ROI's values widened
//!   exactly), each sample's four corner terms `weight * pixel`, summed per sample and
//!   over a bin's samples in row-major order then divided by the count (`avg`), or the
//!   largest term of any sample (`max`); rounded once.

mod causal_conv;
mod col2im;
mod deform_conv;
mod integer;
mod max_unpool;
mod roi_align;

use baton_delegate_api::{DType, Node, OpKind, TensorMut, TensorRef};

use super::KernelError;

/// The float dtypes these kernels compute in f64.
const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::BF16];

/// The integer dtypes Col2Im sums in wrapping arithmetic.
const INTS: &[DType] = &[
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
];

/// Whether this family implements `op` for these operand dtypes; `None` if `op` is not
/// one of this family's ops.
pub(crate) fn supports(op: OpKind, input_dtypes: &[DType]) -> Option<Result<(), String>> {
    let r = match op {
        OpKind::CausalConvWithState => match input_dtypes {
            [d, rest @ ..] if (1..=3).contains(&rest.len()) && FLOATS.contains(d) => {
                match rest.iter().find(|x| *x != d) {
                    Some(x) => Err(format!(
                        "CausalConvWithState operands must share a dtype, got {d} and {x}"
                    )),
                    None => Ok(()),
                }
            }
            [d, ..] if !FLOATS.contains(d) => Err(format!(
                "CausalConvWithState on {d} is not implemented (reference kernels: {})",
                names(FLOATS)
            )),
            _ => Err(format!(
                "CausalConvWithState takes 2 to 4 inputs, got {}",
                input_dtypes.len()
            )),
        },
        OpKind::Col2Im => match input_dtypes {
            [d, DType::I64, DType::I64] if FLOATS.contains(d) || INTS.contains(d) => Ok(()),
            [d, _, _] if !FLOATS.contains(d) && !INTS.contains(d) => Err(format!(
                "Col2Im on {d} is not implemented (reference kernels: {}, {})",
                names(FLOATS),
                names(INTS)
            )),
            _ => Err(format!(
                "Col2Im takes input, then image_shape and block_shape as i64, got {input_dtypes:?}"
            )),
        },
        OpKind::DeformConv => match input_dtypes {
            [d, rest @ ..] if (2..=4).contains(&rest.len()) && FLOATS.contains(d) => {
                match rest.iter().find(|x| *x != d) {
                    Some(x) => Err(format!(
                        "DeformConv operands must share a dtype, got {d} and {x}"
                    )),
                    None => Ok(()),
                }
            }
            _ => Err(format!(
                "DeformConv takes 3 to 5 operands of one of {}, got {input_dtypes:?}",
                names(FLOATS)
            )),
        },
        OpKind::MaxUnpool => match input_dtypes {
            [d, DType::I64] | [d, DType::I64, DType::I64] if FLOATS.contains(d) => Ok(()),
            _ => Err(format!(
                "MaxUnpool takes X of {}, i64 indices and an optional i64 output_shape, got {input_dtypes:?}",
                names(FLOATS)
            )),
        },
        OpKind::RoiAlign => match input_dtypes {
            [x, r, DType::I64] if FLOATS.contains(x) && r == x => Ok(()),
            _ => Err(format!(
                "RoiAlign takes X and rois of one of {} and i64 batch_indices, got {input_dtypes:?}",
                names(FLOATS)
            )),
        },
        OpKind::ConvInteger | OpKind::MatMulInteger => {
            let eight = |d: &DType| matches!(d, DType::U8 | DType::I8);
            match input_dtypes {
                [a, b, ..] if input_dtypes.len() <= 4 && eight(a) && eight(b) => Ok(()),
                _ => Err(format!(
                    "{op} takes two u8 or i8 operands and their optional zero points, got {input_dtypes:?}"
                )),
            }
        }
        _ => return None,
    };
    Some(r)
}

/// Runs `node` if its op belongs to this family (operands already checked by
/// [`supports`], output views already checked against the shape rules), else `None`.
pub(crate) fn run(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Option<Result<(), KernelError>> {
    let r = match node.op {
        OpKind::CausalConvWithState => causal_conv::causal_conv(node, inputs, outputs),
        OpKind::Col2Im => col2im::col2im(node, inputs, &mut outputs[0]),
        OpKind::DeformConv => deform_conv::deform_conv(node, inputs, &mut outputs[0]),
        OpKind::MaxUnpool => max_unpool::max_unpool(node, inputs, &mut outputs[0]),
        OpKind::ConvInteger => integer::conv_integer(node, inputs, &mut outputs[0]),
        OpKind::MatMulInteger => integer::matmul_integer(node, inputs, &mut outputs[0]),
        OpKind::RoiAlign => roi_align::roi_align(node, inputs, &mut outputs[0]),
        _ => return None,
    };
    Some(r)
}

/// Whether optional operand `i` is given (present, and not the 1-D 0-element stand-in
/// for an omitted one).
fn given(inputs: &[TensorRef<'_>], i: usize) -> bool {
    inputs.get(i).is_some_and(|t| t.shape != [0])
}

fn names(dtypes: &[DType]) -> String {
    dtypes
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ")
}
