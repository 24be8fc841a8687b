//! Reference kernels of the signal and sampling family: Einsum, GridSample, AffineGrid,
//! DFT, STFT, the window ops and MelWeightMatrix.
//!
//! # Conventions
//!
//! - **Einsum** reads its equation with [`baton_delegate_api::shape::einsum`] and sums
//!   every product of operand elements into each output element in f64 (floats, rounded
//!   once to the output dtype) or in wrapping 64-bit integers, in the order of the
//!   summed labels' row-major positions.
//! - **GridSample** follows ONNX's reference implementation, whose results are the
//!   backend test data: coordinates in f64; `nearest` rounds half to even before the
//!   padding mode moves an outside coordinate (`border` clamps it to the pixel centres,
//!   `reflection` mirrors it off the span's ends); each interpolation tap outside `X`
//!   then reads 0 (`zeros`), the clamped edge (`border`) or its mirror (`reflection`).
//!   `cubic` uses the a = -0.75 kernel on the 4 taps around a coordinate. A NaN
//!   coordinate gives NaN; so does an infinite one except with `zeros` padding (0).
//! - **AffineGrid** computes each point's normalized coordinates and its product with
//!   theta in f64 and rounds once.
//! - **DFT** and **STFT** sum directly in f64 (no fast transform), twiddles reduced
//!   modulo the length, and round each output once. A one-sided inverse DFT follows
//!   numpy's `irfft`: bins past the input are 0 and the imaginary parts of bin 0 and of
//!   bin `N/2` (even `N`) do not count.
//! - **The window ops** compute in f64 and round once (integer outputs truncate).
//! - **MelWeightMatrix** follows ONNX's reference implementation: the mel points and their
//!   FFT bins in f64 (the bins by floor), then each column's rising and falling edges as
//!   exact ratios of bin distances, rounded once (integer outputs truncate).

mod affine_grid;
mod einsum;
mod grid_sample;
mod mel;
mod spectral;
mod window;

use baton_delegate_api::{DType, Node, OpKind, TensorMut, TensorRef};

use super::KernelError;

/// The dtypes Einsum sums in.
const EINSUM: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U32,
    DType::U64,
];

/// The dtypes GridSample reads (its `X` and `grid`) and interpolates in f64, and those
/// DFT and STFT transform.
const SAMPLED: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::BF16];

/// Whether this family implements `op` for these operand dtypes; `None` if `op` is not
/// one of this family's ops.
pub(crate) fn supports(op: OpKind, input_dtypes: &[DType]) -> Option<Result<(), String>> {
    let r = match op {
        OpKind::Einsum => match input_dtypes.first() {
            None => Err("Einsum takes at least 1 input, got 0".to_string()),
            Some(d) if !EINSUM.contains(d) => Err(format!(
                "Einsum on {d} is not implemented (reference kernels: {})",
                names(EINSUM)
            )),
            Some(d) => match input_dtypes.iter().find(|x| *x != d) {
                Some(x) => Err(format!(
                    "Einsum operands must share a dtype, got {d} and {x}"
                )),
                None => Ok(()),
            },
        },
        OpKind::GridSample => match input_dtypes {
            [x, g] if SAMPLED.contains(x) && SAMPLED.contains(g) => Ok(()),
            [_, _] => Err(format!(
                "GridSample takes X and grid of {}, got {input_dtypes:?}",
                names(SAMPLED)
            )),
            _ => Err(format!(
                "GridSample takes 2 inputs, got {}",
                input_dtypes.len()
            )),
        },
        OpKind::AffineGrid => match input_dtypes {
            [t, DType::I64] if SAMPLED.contains(t) => Ok(()),
            _ => Err(format!(
                "AffineGrid takes theta of {} and an i64 size, got {input_dtypes:?}",
                names(SAMPLED)
            )),
        },
        OpKind::DFT => spectral_signature(op, input_dtypes, 1, &[1, 2]),
        OpKind::STFT => spectral_signature(op, input_dtypes, 2, &[1, 3]),
        OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow => match input_dtypes {
            [DType::I64] => Ok(()),
            _ => Err(format!(
                "{op} takes one i64 input (the size), got {input_dtypes:?}"
            )),
        },
        OpKind::MelWeightMatrix => match input_dtypes {
            [DType::I64, DType::I64, DType::I64, l, u]
                if SAMPLED.contains(l) && SAMPLED.contains(u) =>
            {
                Ok(())
            }
            _ => Err(format!(
                "MelWeightMatrix takes three i64 scalars and two edges of {}, got {input_dtypes:?}",
                names(SAMPLED)
            )),
        },
        _ => return None,
    };
    Some(r)
}

/// DFT and STFT: a float signal (an STFT window of its dtype), i64 scalars at `scalars`,
/// at least `min` operands.
fn spectral_signature(
    op: OpKind,
    dtypes: &[DType],
    min: usize,
    scalars: &[usize],
) -> Result<(), String> {
    let max = if op == OpKind::DFT { 3 } else { 4 };
    if dtypes.len() < min || dtypes.len() > max {
        return Err(format!(
            "{op} takes {min} to {max} inputs, got {}",
            dtypes.len()
        ));
    }
    if !SAMPLED.contains(&dtypes[0]) {
        return Err(format!(
            "{op} on {} is not implemented (reference kernels: {})",
            dtypes[0],
            names(SAMPLED)
        ));
    }
    for (i, &d) in dtypes.iter().enumerate().skip(1) {
        // An omitted optional operand arrives as an empty tensor of the signal's dtype
        // (the shape rule checks that a given scalar is i64); STFT's window has it too.
        if d != DType::I64 && d != dtypes[0] {
            let what = if scalars.contains(&i) {
                "i64"
            } else {
                "the signal's dtype"
            };
            return Err(format!("{op} operand {i} is {d}; it must be {what}"));
        }
    }
    Ok(())
}

/// Runs `node` if its op belongs to this family (operands already checked by
/// [`supports`], output views already checked against the shape rules), else `None`.
pub(crate) fn run(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Option<Result<(), KernelError>> {
    let r = match node.op {
        OpKind::Einsum => einsum::einsum(node, inputs, &mut outputs[0]),
        OpKind::GridSample => grid_sample::grid_sample(node, inputs, &mut outputs[0]),
        OpKind::AffineGrid => affine_grid::affine_grid(node, inputs, &mut outputs[0]),
        OpKind::DFT => spectral::dft(node, inputs, &mut outputs[0]),
        OpKind::STFT => spectral::stft(node, inputs, &mut outputs[0]),
        OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow => {
            window::window(node, &mut outputs[0])
        }
        OpKind::MelWeightMatrix => mel::mel_weight_matrix(node, inputs, &mut outputs[0]),
        _ => return None,
    };
    Some(r)
}

fn names(dtypes: &[DType]) -> String {
    dtypes
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ")
}
