//! Shape rules of ConvTranspose, Resize, LSTM, GRU, RNN, QuantizeLinear and DequantizeLinear.

use super::{unique_axes, Operands, Outputs};
use crate::ir::{Attr, DType, OpKind};
use crate::shape::normalize_axis;

/// A per-spatial-axis list attribute of `n` values, each at least `min`.
fn spatial_list(
    ops: &Operands<'_>,
    name: &str,
    n: usize,
    default: usize,
    min: i64,
) -> Result<Vec<usize>, String> {
    match ops.node.attr_ints(name) {
        Some(v) if v.len() == n && v.iter().all(|&x| x >= min) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => Err(format!("{name} {v:?} must be {n} values >= {min}")),
        None => Ok(vec![default; n]),
    }
}

/// ConvTranspose: `X [N, C, spatial...]`, `W [C, M/group, kernel...]`, bias `[M]`.
///
/// Each output extent is `output_shape` when given, `in * stride` with `SAME_*`
/// auto-padding, else `stride * (in - 1) + output_padding + (k - 1) * dilation + 1 -
/// pad_begin - pad_end`.
pub(super) fn conv_transpose(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let (_, w) = ops.input(1)?;
    if x.len() < 3 || w.len() != x.len() {
        return Err(format!(
            "ConvTranspose needs X [N, C, spatial...] and W of its rank, got {x:?} and {w:?}"
        ));
    }
    let n = x.len() - 2;
    let group = ops.node.attr_int("group", 1);
    if group < 1 || w[0] != x[1] || x[1] % group as usize != 0 {
        return Err(format!(
            "ConvTranspose channels do not fit group {group}: X {x:?}, W {w:?}"
        ));
    }
    let m = w[1]
        .checked_mul(group as usize)
        .ok_or("ConvTranspose group too large")?;
    let kernel = &w[2..];
    if let Some(k) = ops.node.attr_ints("kernel_shape") {
        if k.iter().map(|&v| v as usize).ne(kernel.iter().copied()) {
            return Err(format!("kernel_shape {k:?} disagrees with W {w:?}"));
        }
    }
    if kernel.contains(&0) {
        return Err(format!("ConvTranspose W {w:?} has an empty kernel"));
    }
    let strides = spatial_list(ops, "strides", n, 1, 1)?;
    let dilations = spatial_list(ops, "dilations", n, 1, 1)?;
    let out_pad = spatial_list(ops, "output_padding", n, 0, 0)?;
    let pads = spatial_list(ops, "pads", 2 * n, 0, 0)?;
    if let Some((_, b)) = ops.inputs.get(2) {
        if b != &[m] {
            return Err(format!("ConvTranspose bias {b:?}, expected [{m}]"));
        }
    }
    let auto_pad = ops.node.attr_str("auto_pad", "NOTSET");
    let mut out = vec![x[0], m];
    if let Some(os) = ops.node.attr_ints("output_shape") {
        // Either the spatial extents or the whole output shape.
        let spatial = if os.len() == n + 2 { &os[2..] } else { os };
        if spatial.len() != n || spatial.iter().any(|&v| v < 0) {
            return Err(format!("output_shape {os:?} does not fit {n} spatial axes"));
        }
        out.extend(spatial.iter().map(|&v| v as usize));
        return Ok(vec![(*dtype, out)]);
    }
    for i in 0..n {
        let len = match auto_pad {
            "SAME_UPPER" | "SAME_LOWER" => x[2 + i].checked_mul(strides[i]),
            "NOTSET" | "" | "VALID" => {
                let (pb, pe) = match auto_pad {
                    "VALID" => (0, 0),
                    _ => (pads[i], pads[n + i]),
                };
                let full = (x[2 + i] as i128 - 1) * strides[i] as i128
                    + out_pad[i] as i128
                    + (kernel[i] as i128 - 1) * dilations[i] as i128
                    + 1;
                usize::try_from(full - pb as i128 - pe as i128).ok()
            }
            other => return Err(format!("unknown auto_pad '{other}'")),
        };
        out.push(len.ok_or_else(|| {
            format!("ConvTranspose spatial axis {i} of {x:?} has no valid output extent")
        })?);
    }
    Ok(vec![(*dtype, out)])
}

/// Resize: `X`, `roi`, `scales`, `sizes` (inputs 1-3 optional; a 0-element operand is
/// omitted). Scales must be the `scales` attribute (the host folds constant float
/// operands into it); sizes may be a constant i64 input 3 or the `sizes` attribute. An
/// extent is `floor(in * scale)` (computed in f64, as ONNX's reference does) or the size.
pub(super) fn resize(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let axes = match ops.node.attr_ints("axes") {
        Some(a) => unique_axes(a, x.len())?,
        None => (0..x.len()).collect(),
    };
    let scales = match ops.node.attrs.get("scales") {
        Some(Attr::Floats(v)) => Some(v.clone()),
        Some(_) => return Err("Resize `scales` must be a list of floats".into()),
        None if ops.present(2) => {
            return Err("Resize scales must be constant, given as the `scales` attribute".into())
        }
        None => None,
    };
    let sizes = match ops.present(3) {
        true => ops.ints(3, "sizes")?,
        false => ops.node.attr_ints("sizes").map(<[i64]>::to_vec),
    };
    let mut out = x.clone();
    match (scales, sizes) {
        (Some(s), None) => {
            if s.len() != axes.len() || s.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
                return Err(format!(
                    "Resize scales {s:?} must be {} positive values",
                    axes.len()
                ));
            }
            for (&a, &sc) in axes.iter().zip(&s) {
                let len = (x[a] as f64 * sc as f64).floor();
                if len >= usize::MAX as f64 {
                    return Err(format!("Resize scale {sc} is too large"));
                }
                out[a] = len as usize;
            }
        }
        (None, Some(sizes)) => {
            if sizes.len() != axes.len() || sizes.iter().any(|&v| v < 0) {
                return Err(format!(
                    "Resize sizes {sizes:?} must be {} extents",
                    axes.len()
                ));
            }
            let policy = ops.node.attr_str("keep_aspect_ratio_policy", "stretch");
            match keep_aspect_scale(policy, x, &axes, &sizes)? {
                // One scale for every resized axis, the extents rounded half up.
                Some(scale) => {
                    for &a in &axes {
                        out[a] = (scale * x[a] as f64 + 0.5).floor() as usize;
                    }
                }
                None => {
                    for (&a, &s) in axes.iter().zip(&sizes) {
                        out[a] = s as usize;
                    }
                }
            }
        }
        (Some(_), Some(_)) => return Err("Resize takes scales or sizes, not both".into()),
        (None, None) => return Err("Resize needs scales or sizes".into()),
    }
    Ok(vec![(*dtype, out)])
}

/// The single scale of `keep_aspect_ratio_policy` `not_larger` (the smallest of
/// `size / in`) or `not_smaller` (the largest); `None` for `stretch`.
pub(super) fn keep_aspect_scale(
    policy: &str,
    x: &[usize],
    axes: &[usize],
    sizes: &[i64],
) -> Result<Option<f64>, String> {
    let ratios = axes
        .iter()
        .zip(sizes)
        .map(|(&a, &s)| s as f64 / x[a] as f64);
    match policy {
        "stretch" => Ok(None),
        "not_larger" => Ok(Some(ratios.fold(f64::INFINITY, f64::min))),
        "not_smaller" => Ok(Some(ratios.fold(0.0, f64::max))),
        other => Err(format!("unknown keep_aspect_ratio_policy '{other}'")),
    }
    .and_then(|s| match s {
        Some(v) if !v.is_finite() => Err("Resize sizes of an empty axis".into()),
        s => Ok(s),
    })
}

/// LSTM, GRU and RNN (layout 0): `X [seq, batch, input]`, `W [dirs, G*H, input]`,
/// `R [dirs, G*H, H]`, then optional `B [dirs, 2*G*H]`, `sequence_lens [batch]`,
/// `initial_h [dirs, batch, H]` and, for LSTM, `initial_c` and `P [dirs, 3*H]`; `G` is
/// 4 gates for LSTM, 3 for GRU and 1 for RNN, whose activations are checked here too so
/// that a bad list fails at import rather than at run time. Outputs `Y [seq, dirs, batch, H]`, `Y_h [dirs,
/// batch, H]` and, for LSTM, `Y_c` of the same shape.
pub(super) fn recurrent(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let gates = match op {
        OpKind::LSTM => 4,
        OpKind::GRU => 3,
        _ => 1,
    };
    let (dtype, x) = ops.x()?;
    let (_, w) = ops.input(1)?;
    let (_, r) = ops.input(2)?;
    if ops.node.attr_int("layout", 0) != 0 {
        return Err(format!("{op} layout 1 (batch first) is not supported"));
    }
    let dirs = match ops.node.attr_str("direction", "forward") {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => return Err(format!("unknown {op} direction '{other}'")),
    };
    if op == OpKind::RNN {
        crate::shape::rnn_activations(ops.node, dirs).map_err(|e| format!("{op} {e}"))?;
    }
    if x.len() != 3 || w.len() != 3 || r.len() != 3 {
        return Err(format!(
            "{op} needs 3-D X, W and R, got {x:?}, {w:?}, {r:?}"
        ));
    }
    let (seq, batch, input) = (x[0], x[1], x[2]);
    let hidden = match ops.node.attrs.get("hidden_size") {
        Some(_) => usize::try_from(ops.node.attr_int("hidden_size", 0))
            .map_err(|_| format!("{op} hidden_size must be non-negative"))?,
        None => r[2],
    };
    let gh = hidden.checked_mul(gates).ok_or("hidden_size too large")?;
    let expect = |i: usize, what: &str, want: Vec<usize>| -> Result<(), String> {
        match ops.inputs.get(i) {
            Some((_, s)) if ops.present(i) && *s != want => {
                Err(format!("{op} {what} has shape {s:?}, expected {want:?}"))
            }
            _ => Ok(()),
        }
    };
    if w != &[dirs, gh, input] || r != &[dirs, gh, hidden] {
        return Err(format!(
            "{op} W {w:?} and R {r:?} must be [{dirs}, {gh}, {input}] and [{dirs}, {gh}, {hidden}]"
        ));
    }
    expect(3, "B", vec![dirs, 2 * gh])?;
    expect(4, "sequence_lens", vec![batch])?;
    expect(5, "initial_h", vec![dirs, batch, hidden])?;
    if op == OpKind::LSTM {
        expect(6, "initial_c", vec![dirs, batch, hidden])?;
        expect(7, "P", vec![dirs, 3 * hidden])?;
    }
    let state = (*dtype, vec![dirs, batch, hidden]);
    let mut outs = vec![(*dtype, vec![seq, dirs, batch, hidden]), state.clone()];
    if op == OpKind::LSTM {
        outs.push(state);
    }
    Ok(outs)
}

/// QuantizeLinear and DequantizeLinear. The scale is one value (rank 0 or one element),
/// per axis a 1-D tensor as long as the input's extent along `axis` (default 1), or with
/// `block_size` > 0 a tensor of the input's rank that matches it except along `axis`,
/// where it has `ceil(extent / block_size)`. The optional zero point has the scale's
/// shape. QuantizeLinear's output has the zero point's dtype, else the `output_dtype`
/// attribute's, else u8; DequantizeLinear's the `output_dtype` attribute's, else the
/// scale's.
pub(super) fn quantize(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = ops.node.op;
    let (_, x) = ops.x()?;
    let (scale_dtype, scale) = ops.input(1)?;
    let block = ops.node.attr_int("block_size", 0);
    let count = |s: &[usize]| s.iter().product::<usize>();
    let per_tensor = scale.len() <= 1 && count(scale) == 1;
    if block < 0 {
        return Err(format!("{op} block_size {block} is negative"));
    }
    if block > 0 {
        let axis = normalize_axis(ops.node.attr_int("axis", 1), x.len())?;
        let fits = scale.len() == x.len()
            && (0..x.len()).all(|d| match d == axis {
                true => scale[d] == x[d].div_ceil(block as usize),
                false => scale[d] == x[d],
            });
        if !fits {
            return Err(format!(
                "{op} scale {scale:?} does not block input {x:?} by {block} along axis {axis}"
            ));
        }
    } else if !per_tensor {
        let axis = normalize_axis(ops.node.attr_int("axis", 1), x.len())?;
        if scale.len() != 1 || scale[0] != x[axis] {
            return Err(format!(
                "{op} scale {scale:?} is neither one value nor one per index of axis {axis} of {x:?}"
            ));
        }
    }
    let zero_point = ops.inputs.get(2).filter(|(_, s)| count(s) > 0);
    if let Some((_, zp)) = zero_point {
        let same = zp == scale || (per_tensor && count(zp) == 1 && zp.len() <= 1);
        if !same {
            return Err(format!(
                "{op} zero point {zp:?} does not match scale {scale:?}"
            ));
        }
    }
    let named = match ops.node.attr_int("output_dtype", 0) {
        0 => None,
        code => Some(
            DType::from_onnx(code)
                .ok_or_else(|| format!("{op} output_dtype {code} is not a dtype of the IR"))?,
        ),
    };
    let out = match op {
        OpKind::QuantizeLinear => match (zero_point, named) {
            (Some((z, _)), Some(n)) if *z != n => {
                return Err(format!(
                    "{op} output_dtype {n} disagrees with the zero point's dtype {z}"
                ))
            }
            (Some((z, _)), _) => *z,
            (None, n) => n.unwrap_or(DType::U8),
        },
        _ => named.unwrap_or(*scale_dtype),
    };
    Ok(vec![(out, x.clone())])
}
