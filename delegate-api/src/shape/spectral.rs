//! The geometry of the spectral ops (DFT, STFT), read against their operands: shared by
//! the shape rules and the kernels so that both size the output alike.

use crate::ir::Node;

/// How a DFT node transforms: the normalized axis and the transform length.
pub struct DftPlan {
    /// The signal axis of the input (never the last, complex, one).
    pub axis: usize,
    /// The transform's length `n`.
    pub length: usize,
    /// Inverse and one-sided: the input is half a Hermitian spectrum, the output real.
    pub real_output: bool,
    /// The output's shape.
    pub output: Vec<usize>,
}

/// Reads a DFT node against its input's shape: `length` is `dft_length` when given,
/// `axis` the value of input 2 (default -2).
pub fn dft_plan(
    node: &Node,
    x: &[usize],
    length: Option<i64>,
    axis: Option<i64>,
) -> Result<DftPlan, String> {
    let r = x.len();
    if r < 2 || !matches!(x[r - 1], 1 | 2) {
        return Err(format!(
            "DFT input must be [..., signal, 1 or 2] (real or complex), got {x:?}"
        ));
    }
    let a = axis.unwrap_or(-2);
    let axis = if a < 0 { a + r as i64 } else { a };
    if axis < 0 || axis >= r as i64 - 1 {
        return Err(format!(
            "DFT axis {a} is outside [-{r}, -2] and [0, {}] for rank {r}",
            r - 2
        ));
    }
    let axis = axis as usize;
    let inverse = node.attr_int("inverse", 0) != 0;
    let onesided = node.attr_int("onesided", 0) != 0;
    let real_output = inverse && onesided;
    let length = match length {
        Some(n) if n < 1 => return Err(format!("DFT dft_length must be positive, got {n}")),
        Some(n) => usize::try_from(n).map_err(|_| format!("DFT dft_length {n} is too large"))?,
        None if real_output => 2 * x[axis].saturating_sub(1),
        None => x[axis],
    };
    if length == 0 {
        return Err(format!("DFT over an empty axis {axis} of {x:?}"));
    }
    let mut output = x.to_vec();
    output[r - 1] = if real_output { 1 } else { 2 };
    output[axis] = if onesided && !inverse {
        length / 2 + 1
    } else {
        length
    };
    Ok(DftPlan {
        axis,
        length,
        real_output,
        output,
    })
}

/// How an STFT node frames its signal.
pub struct StftPlan {
    /// Samples between frame starts.
    pub step: usize,
    /// Samples per frame, the DFT length.
    pub frame_length: usize,
    /// `[batch, frames, bins, 2]`.
    pub output: Vec<usize>,
}

/// Reads an STFT node against its signal `[batch, length, 1 or 2]`, its `frame_step`, its
/// window's shape and its `frame_length` (either of the last two may be absent, not both).
pub fn stft_plan(
    node: &Node,
    x: &[usize],
    step: Option<i64>,
    window: Option<Vec<usize>>,
    frame_length: Option<i64>,
) -> Result<StftPlan, String> {
    if x.len() != 3 || !matches!(x[2], 1 | 2) {
        return Err(format!(
            "STFT signal must be [batch, length, 1 or 2], got {x:?}"
        ));
    }
    let step = match step {
        Some(s) if s >= 1 => s as usize,
        Some(s) => return Err(format!("STFT frame_step must be positive, got {s}")),
        None => return Err("STFT needs frame_step (input 1)".into()),
    };
    let from_window = match window.as_deref() {
        None => None,
        Some([w]) => Some(*w),
        Some(w) => return Err(format!("STFT window must be 1-D, got {w:?}")),
    };
    let frame_length = match (frame_length, from_window) {
        (Some(f), _) if f < 1 => {
            return Err(format!("STFT frame_length must be positive, got {f}"))
        }
        (Some(f), Some(w)) if f as u64 != w as u64 => {
            return Err(format!(
                "STFT frame_length {f} differs from the window's length {w}"
            ))
        }
        (Some(f), _) => f as usize,
        (None, Some(w)) if w > 0 => w,
        _ => return Err("STFT needs a window or frame_length (inputs 2, 3)".into()),
    };
    if frame_length > x[1] {
        return Err(format!(
            "STFT frame_length {frame_length} exceeds the signal's length {}",
            x[1]
        ));
    }
    let frames = (x[1] - frame_length) / step + 1;
    let bins = if node.attr_int("onesided", 1) != 0 {
        frame_length / 2 + 1
    } else {
        frame_length
    };
    Ok(StftPlan {
        step,
        frame_length,
        output: vec![x[0], frames, bins, 2],
    })
}
