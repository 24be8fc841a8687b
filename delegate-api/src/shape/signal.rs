//! Shape rules of the signal and sampling family: Einsum, GridSample, AffineGrid, DFT, STFT, the
//! window ops and MelWeightMatrix (whose shape-deciding scalars must be constant i64 values).

use super::Outputs;
use super::{einsum, spectral};
use crate::ir::{DType, Node, OpKind};

/// The outputs of `node` if its op belongs to this family, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Option<Result<Outputs, String>> {
    let r = match node.op {
        OpKind::Einsum => einsum_rule(node, inputs),
        OpKind::GridSample => grid_sample(inputs),
        OpKind::AffineGrid => affine_grid(inputs, operand),
        OpKind::DFT => dft(node, inputs, operand),
        OpKind::STFT => stft(node, inputs, operand),
        OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow => {
            window(node, inputs, operand)
        }
        OpKind::MelWeightMatrix => mel_weight_matrix(node, inputs, operand),
        _ => return None,
    };
    Some(r)
}

/// Einsum: operands of one dtype; the output's shape from the equation.
fn einsum_rule(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let Some((dtype, _)) = inputs.first() else {
        return Err("Einsum needs at least one input".into());
    };
    if let Some((d, _)) = inputs.iter().find(|(d, _)| d != dtype) {
        return Err(format!(
            "Einsum operands must share a dtype, got {dtype} and {d}"
        ));
    }
    let equation = node.attr_str("equation", "");
    if equation.is_empty() {
        return Err("Einsum needs the string attribute 'equation'".into());
    }
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|(_, s)| s.clone()).collect();
    let e = einsum::parse(equation, &shapes)?;
    Ok(vec![(*dtype, e.output_shape())])
}

/// GridSample: `X` `[N, C, D1..Dr]` and `grid` `[N, H1..Hr, r]` give `[N, C, H1..Hr]`.
fn grid_sample(inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let [(dtype, x), (_, grid)] = inputs else {
        return Err(format!(
            "GridSample takes 2 inputs (X, grid), got {}",
            inputs.len()
        ));
    };
    if x.len() < 3 {
        return Err(format!(
            "GridSample needs X of rank >= 3 ([N, C, spatial...]), got {x:?}"
        ));
    }
    let r = x.len() - 2;
    if grid.len() != x.len() || grid[0] != x[0] || grid[grid.len() - 1] != r {
        return Err(format!(
            "GridSample grid must be [N, out spatial..., {r}] with N = {} for X {x:?}, got {grid:?}",
            x[0]
        ));
    }
    if x[2..].contains(&0) {
        return Err(format!("GridSample cannot sample an empty X {x:?}"));
    }
    let mut out = vec![x[0], x[1]];
    out.extend_from_slice(&grid[1..grid.len() - 1]);
    Ok(vec![(*dtype, out)])
}

/// AffineGrid: `theta` `[N, r, r + 1]` (r 2 or 3) and the constant i64 `size`
/// `[N, C, spatial...]` (r spatial extents) give `[N, spatial..., r]` of theta's dtype.
fn affine_grid(
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let [(dtype, theta), (sd, ss)] = inputs else {
        return Err(format!(
            "AffineGrid takes 2 inputs (theta, size), got {}",
            inputs.len()
        ));
    };
    if !dtype.is_float() {
        return Err(format!(
            "AffineGrid theta must be a float tensor, got {dtype}"
        ));
    }
    let r = match theta[..] {
        [_, 2, 3] => 2,
        [_, 3, 4] => 3,
        _ => {
            return Err(format!(
                "AffineGrid theta must be [N, 2, 3] or [N, 3, 4], got {theta:?}"
            ))
        }
    };
    if *sd != DType::I64 || ss[..] != [r + 2] {
        return Err(format!(
            "AffineGrid size must be i64 [{}] for theta {theta:?}, got {sd} {ss:?}",
            r + 2
        ));
    }
    let size = operand(1).ok_or("AffineGrid size (input 1) must be a constant")?;
    let mut extents = Vec::with_capacity(r + 2);
    for &v in &size {
        extents.push(
            usize::try_from(v)
                .map_err(|_| format!("AffineGrid size {size:?} has a negative extent"))?,
        );
    }
    if extents[0] != theta[0] {
        return Err(format!(
            "AffineGrid size {size:?} names batch {} but theta has {}",
            extents[0], theta[0]
        ));
    }
    let mut out = vec![theta[0]];
    out.extend_from_slice(&extents[2..]);
    out.push(r);
    Ok(vec![(*dtype, out)])
}

/// The window ops: `[size]` of the ONNX dtype `output_datatype` (default 1, f32), the
/// size one i64 value (a constant: the output's extent depends on it).
fn window(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let op = node.op;
    match inputs {
        [(DType::I64, s)] if s.iter().product::<usize>() == 1 => {}
        _ => {
            return Err(format!(
                "{op} takes one input, the size as one i64 value, got {inputs:?}"
            ))
        }
    }
    let code = node.attr_int("output_datatype", 1);
    let dtype = DType::from_onnx(code)
        .filter(|d| d.is_float() || d.is_int())
        .ok_or_else(|| format!("{op} output_datatype {code} is not a numeric type Baton has"))?;
    let size = operand(0).ok_or_else(|| format!("{op} size (input 0) must be a constant"))?[0];
    let size = usize::try_from(size).map_err(|_| format!("{op} size must be >= 0, got {size}"))?;
    Ok(vec![(dtype, vec![size])])
}

/// MelWeightMatrix: `[dft_length / 2 + 1, num_mel_bins]` of the ONNX dtype
/// `output_datatype` (default 1, f32); `num_mel_bins` (input 0) and `dft_length` (input 1)
/// constant i64 scalars, `sample_rate` (input 2) an i64 scalar, the two edges (inputs 3
/// and 4) float scalars.
fn mel_weight_matrix(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let one = |s: &[usize]| s.len() <= 1 && s.iter().product::<usize>() == 1;
    match inputs {
        [(DType::I64, a), (DType::I64, b), (DType::I64, c), (l, d), (u, e)]
            if one(a) && one(b) && one(c) && one(d) && one(e) && l.is_float() && u.is_float() => {}
        _ => {
            return Err(format!(
                "MelWeightMatrix takes num_mel_bins, dft_length and sample_rate (i64 scalars), then lower_edge_hertz and upper_edge_hertz (float scalars), got {inputs:?}"
            ))
        }
    }
    let code = node.attr_int("output_datatype", 1);
    let dtype = DType::from_onnx(code)
        .filter(|d| d.is_float() || d.is_int())
        .ok_or_else(|| {
            format!("MelWeightMatrix output_datatype {code} is not a numeric type Baton has")
        })?;
    let value = |i: usize, what: &str, min: i64| -> Result<usize, String> {
        let v = operand(i)
            .ok_or_else(|| format!("MelWeightMatrix {what} (input {i}) must be a constant"))?[0];
        usize::try_from(v)
            .ok()
            .filter(|&v| v as i64 >= min)
            .ok_or_else(|| format!("MelWeightMatrix {what} must be >= {min}, got {v}"))
    };
    let bins = value(0, "num_mel_bins", 1)?;
    let dft_length = value(1, "dft_length", 1)?;
    Ok(vec![(dtype, vec![dft_length / 2 + 1, bins])])
}

/// The value of optional scalar input `i`: `None` when absent (or 0 elements), an error
/// unless it is one constant i64 value.
fn scalar(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
    i: usize,
    what: &str,
) -> Result<Option<i64>, String> {
    let op = node.op;
    match inputs.get(i) {
        None => Ok(None),
        Some((_, s)) if s.iter().product::<usize>() == 0 => Ok(None),
        Some((DType::I64, s)) if s.iter().product::<usize>() == 1 => match operand(i) {
            Some(v) => Ok(Some(v[0])),
            None => Err(format!("{op} {what} (input {i}) must be a constant")),
        },
        Some((d, s)) => Err(format!(
            "{op} {what} (input {i}) must be one i64 value, got {d} {s:?}"
        )),
    }
}

/// DFT: the input's shape with the transformed axis resized and the last axis 2 (or 1
/// for a one-sided inverse).
fn dft(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let Some((dtype, x)) = inputs.first() else {
        return Err("DFT needs an input".into());
    };
    if inputs.len() > 3 {
        return Err(format!("DFT takes 1 to 3 inputs, got {}", inputs.len()));
    }
    let length = scalar(node, inputs, operand, 1, "dft_length")?;
    let axis = scalar(node, inputs, operand, 2, "axis")?;
    let plan = spectral::dft_plan(node, x, length, axis)?;
    Ok(vec![(*dtype, plan.output)])
}

/// STFT: `[batch, frames, bins, 2]` of the signal's dtype.
fn stft(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let Some((dtype, x)) = inputs.first() else {
        return Err("STFT needs a signal".into());
    };
    if inputs.len() > 4 {
        return Err(format!("STFT takes 2 to 4 inputs, got {}", inputs.len()));
    }
    let step = scalar(node, inputs, operand, 1, "frame_step")?;
    let window = inputs
        .get(2)
        .filter(|(_, s)| s.iter().product::<usize>() > 0)
        .map(|(d, s)| {
            if d == dtype {
                Ok(s.clone())
            } else {
                Err(format!("STFT window is {d}, the signal {dtype}"))
            }
        })
        .transpose()?;
    let frame_length = scalar(node, inputs, operand, 3, "frame_length")?;
    let plan = spectral::stft_plan(node, x, step, window, frame_length)?;
    Ok(vec![(*dtype, plan.output)])
}
