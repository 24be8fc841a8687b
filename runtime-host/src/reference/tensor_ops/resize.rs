//! Resize: `nearest` (every dtype, by moving bytes) and `linear` (f32/f16, N-linear).

use baton_delegate_api::{Node, TensorMut, TensorRef};

use super::super::data::{for_each_index, load_f32, store_f64, strides};
use super::super::{shape_err, unsupported, KernelError};
use super::{axis_of, ints, move_element, present};

/// Resizes `X` to the output view's shape (the shape rule has resolved `scales`/`sizes`).
///
/// Each output coordinate `x` on an axis maps to the input coordinate given by
/// `coordinate_transformation_mode`, with `scale` the `scales` value, or `out / in` when
/// sizes were given (one common scale under `keep_aspect_ratio_policy`):
/// `half_pixel` `(x + 0.5) / scale - 0.5`, `pytorch_half_pixel` the same but 0 when the
/// output extent is 1, `asymmetric` `x / scale`, `align_corners`
/// `x * (in - 1) / (out - 1)` (0 when the output extent is 1; `out` is the integer output
/// extent, as the specification words it and ONNX Runtime computes it, where ONNX's
/// backend test data uses the fractional `in * scale`).
pub(super) fn resize(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let rank = x.shape.len();
    let out_shape = out.shape().to_vec();
    let mode = node.attr_str("mode", "nearest");
    let coord_mode = node.attr_str("coordinate_transformation_mode", "half_pixel");
    if !matches!(
        coord_mode,
        "half_pixel" | "pytorch_half_pixel" | "asymmetric" | "align_corners"
    ) {
        return Err(unsupported(
            node,
            format!("coordinate_transformation_mode '{coord_mode}'"),
        ));
    }
    let scales = axis_scales(node, inputs, &out_shape)?;
    if (0..rank).any(|d| x.shape[d] == 0 && out_shape[d] > 0) {
        return Err(shape_err(
            node,
            "Resize of an empty axis to a non-empty one",
        ));
    }
    // Per axis, per output coordinate: the (clamped) input coordinate.
    let coords: Vec<Vec<f32>> = (0..rank)
        .map(|d| {
            let (len_in, len_out, s) = (x.shape[d] as f32, out_shape[d] as f32, scales[d]);
            (0..out_shape[d])
                .map(|o| {
                    let o = o as f32;
                    match coord_mode {
                        "asymmetric" => o / s,
                        "align_corners" if len_out == 1.0 => 0.0,
                        "align_corners" => o * (len_in - 1.0) / (len_out - 1.0),
                        "pytorch_half_pixel" if len_out == 1.0 => 0.0,
                        _ => (o + 0.5) / s - 0.5,
                    }
                })
                .collect()
        })
        .collect();
    match mode {
        "nearest" => nearest(node, x, &coords, out),
        "linear" if x.dtype.is_float() => {
            if node.attr_int("antialias", 0) != 0 && scales.iter().any(|&s| s < 1.0) {
                return Err(unsupported(node, "antialiased linear downsampling"));
            }
            linear(x, &coords, out);
            Ok(())
        }
        "linear" => Err(unsupported(node, format!("linear Resize of {}", x.dtype))),
        other => Err(unsupported(node, format!("Resize mode '{other}'"))),
    }
}

/// The scale of every axis as f32 (1 on axes not resized).
fn axis_scales(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out_shape: &[usize],
) -> Result<Vec<f32>, KernelError> {
    let x = &inputs[0];
    let rank = x.shape.len();
    let axes: Vec<usize> = match node.attr_ints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| axis_of(node, a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let mut scales = vec![1.0f32; rank];
    if let Some(baton_delegate_api::ir::Attr::Floats(s)) = node.attrs.get("scales") {
        for (&a, &v) in axes.iter().zip(s) {
            scales[a] = v;
        }
        return Ok(scales);
    }
    let sizes = match present(inputs, 3) {
        true => ints(node, inputs, 3, "sizes"),
        false => node.attr_ints("sizes").map(<[i64]>::to_vec),
    }
    .ok_or_else(|| shape_err(node, "Resize needs scales or sizes"))?;
    let policy = node.attr_str("keep_aspect_ratio_policy", "stretch");
    let common = match policy {
        "not_larger" | "not_smaller" => {
            let ratios = axes
                .iter()
                .zip(&sizes)
                .map(|(&a, &s)| s as f64 / x.shape[a] as f64);
            Some(match policy {
                "not_larger" => ratios.fold(f64::INFINITY, f64::min),
                _ => ratios.fold(0.0, f64::max),
            } as f32)
        }
        _ => None,
    };
    for &a in &axes {
        // ONNX Runtime divides the extents as f32.
        scales[a] = common.unwrap_or(out_shape[a] as f32 / x.shape[a] as f32);
    }
    Ok(scales)
}

/// Nearest: the coordinate rounds per `nearest_mode`, then clamps to the input.
fn nearest(
    node: &Node,
    x: &TensorRef<'_>,
    coords: &[Vec<f32>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let mode = node.attr_str("nearest_mode", "round_prefer_floor");
    let round: fn(f32) -> f32 = match mode {
        "round_prefer_floor" => |c| {
            if c - c.floor() == 0.5 {
                c.floor()
            } else {
                c.round()
            }
        },
        "round_prefer_ceil" => |c| {
            if c - c.floor() == 0.5 {
                c.ceil()
            } else {
                c.round()
            }
        },
        "floor" => f32::floor,
        "ceil" => f32::ceil,
        other => return Err(unsupported(node, format!("nearest_mode '{other}'"))),
    };
    let index: Vec<Vec<usize>> = coords
        .iter()
        .zip(x.shape)
        .map(|(cs, &len)| {
            cs.iter()
                .map(|&c| (round(c) as i64).clamp(0, len.max(1) as i64 - 1) as usize)
                .collect()
        })
        .collect();
    let in_strides = strides(x.shape);
    let size = x.dtype.size();
    let out_shape = out.shape().to_vec();
    let mut k = 0;
    for_each_index(&out_shape, |idx| {
        let src: usize = (0..idx.len())
            .map(|d| index[d][idx[d]] * in_strides[d])
            .sum();
        move_element(out.data, k, x.data, src, size);
        k += 1;
    });
    Ok(())
}

/// N-linear: per axis the clamped coordinate `c` reads `floor(c)` with weight
/// `1 - frac(c)` and the next index (clamped) with `frac(c)`; the output is the f64 sum of
/// the products of weights over all corners, skipping corners of weight 0.
fn linear(x: &TensorRef<'_>, coords: &[Vec<f32>], out: &mut TensorMut<'_>) {
    // Per axis, per output coordinate: one or two (input index, weight) taps.
    let taps: Vec<Vec<Vec<(usize, f64)>>> = coords
        .iter()
        .zip(x.shape)
        .map(|(cs, &len)| {
            cs.iter()
                .map(|&c| {
                    let c = c.clamp(0.0, len as f32 - 1.0) as f64;
                    let i0 = (c.floor() as usize).min(len - 1);
                    let i1 = (i0 + 1).min(len - 1);
                    let w1 = c - i0 as f64;
                    match w1 > 0.0 && i1 != i0 {
                        true => vec![(i0, 1.0 - w1), (i1, w1)],
                        false => vec![(i0, 1.0)],
                    }
                })
                .collect()
        })
        .collect();
    let xv = load_f32(x);
    let in_strides = &strides(x.shape);
    let out_shape = out.shape().to_vec();
    let mut r = Vec::with_capacity(out_shape.iter().product());
    for_each_index(&out_shape, |idx| {
        // Walk the corners as (offset, weight) pairs, one axis at a time.
        let mut corners = vec![(0usize, 1.0f64)];
        for d in 0..idx.len() {
            corners = corners
                .iter()
                .flat_map(|&(off, w)| {
                    taps[d][idx[d]]
                        .iter()
                        .map(move |&(i, tw)| (off + i * in_strides[d], w * tw))
                })
                .collect();
        }
        r.push(
            corners
                .iter()
                .fold(0.0, |acc, &(off, w)| acc + w * xv[off] as f64),
        );
    });
    store_f64(out, &r);
}
