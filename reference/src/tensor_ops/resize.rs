//! Resize: `nearest` (every dtype, by moving bytes), `linear` and `cubic` (f32/f16, one
//! axis at a time in f64, optionally antialiased), every coordinate transformation mode.

use baton_delegate_api::ir::Attr;
use baton_delegate_api::{DType, Node, TensorMut, TensorRef};
use half::f16;

use super::super::data::{for_each_index, load_f32, store_f64, strides};
use super::super::{shape_err, unsupported, KernelError};
use super::{axis_of, ints, move_element, present};

/// A copy of `node` with run-time `scales` (a float operand 2) as the `scales`
/// attribute, so that the shape rule, which reads only integer operands, can size the
/// output; `None` when the scales are not a run-time operand.
pub(crate) fn with_operand_scales(node: &Node, inputs: &[TensorRef<'_>]) -> Option<Node> {
    if node.attrs.contains_key("scales") || !present(inputs, 2) || !inputs[2].dtype.is_float() {
        return None;
    }
    let mut n = node.clone();
    n.attrs
        .insert("scales".into(), Attr::Floats(load_f32(&inputs[2])));
    Some(n)
}

/// Resizes `X` to the output view's shape (the shape rule has resolved scales or sizes).
///
/// Each axis is resampled on its own, as ONNX's reference implementation does. Output
/// index `y` maps to the input coordinate `x` of `coordinate_transformation_mode`, with
/// `scale` the axis's scale (`out / in` when sizes were given, one common scale under
/// `keep_aspect_ratio_policy`) and `len = in * scale` the fractional output extent:
/// `half_pixel` `(y + 0.5) / scale - 0.5`; `half_pixel_symmetric` the same shifted by
/// `in / 2 * (1 - out / len)`; `pytorch_half_pixel` the same but -0.5 when `len` is 1;
/// `asymmetric` `y / scale`; `align_corners` `y * (in - 1) / (len - 1)` (0 when `len` is
/// 1; ONNX's backend test data divides by the fractional extent where ONNX Runtime uses
/// the integer one); `tf_crop_and_resize` `roi_start * (in - 1) + y * (roi_end -
/// roi_start) * (in - 1) / (len - 1)`, an output whose `x` lies outside `[0, in - 1]` on
/// any axis being `extrapolation_value`.
///
/// `nearest` rounds `x` per `nearest_mode` and clamps it to the input. `linear` and
/// `cubic` weigh the taps around `x` with the triangle or the cubic kernel (coefficient
/// `cubic_coeff_a`), stretched by `1 / scale` and normalized when `antialias` is set and
/// the axis shrinks; taps past the input read the edge element, or with
/// `exclude_outside` get weight 0 (the rest renormalized). Sums are in f64, taps of
/// weight exactly 0 are skipped (a NaN beside a sampled point does not leak in), and
/// the result is rounded once.
pub(super) fn resize(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let out_shape = out.shape().to_vec();
    if (0..x.shape.len()).any(|d| x.shape[d] == 0 && out_shape[d] > 0) {
        return Err(shape_err(
            node,
            "Resize of an empty axis to a non-empty one",
        ));
    }
    let plan = Plan::new(node, inputs, &out_shape)?;
    match plan.mode {
        Mode::Nearest(_) => nearest(node, x, &plan, out),
        Mode::Linear | Mode::Cubic(_) if x.dtype.is_float() => {
            interpolate(x, &plan, out);
            Ok(())
        }
        _ => Err(unsupported(
            node,
            format!("{} Resize of {}", plan.mode.name(), x.dtype),
        )),
    }
}

/// The interpolation of a Resize node.
#[derive(Clone, Copy)]
enum Mode {
    Nearest(fn(f64) -> f64),
    Linear,
    /// With the cubic coefficient `a`.
    Cubic(f64),
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Nearest(_) => "nearest",
            Mode::Linear => "linear",
            Mode::Cubic(_) => "cubic",
        }
    }
}

/// Per axis, per output index: the input taps and their weights, or `None` for an
/// extrapolated output.
type AxisTaps = Vec<Option<Vec<(usize, f64)>>>;

/// Everything the sampling needs, resolved from the node and its operands.
struct Plan {
    mode: Mode,
    extrapolation_value: f64,
    /// Per axis: `None` when the axis is left as it is.
    taps: Vec<Option<AxisTaps>>,
}

impl Plan {
    fn new(
        node: &Node,
        inputs: &[TensorRef<'_>],
        out_shape: &[usize],
    ) -> Result<Plan, KernelError> {
        let x = &inputs[0];
        let rank = x.shape.len();
        let mode = match node.attr_str("mode", "nearest") {
            "nearest" => Mode::Nearest(nearest_rounding(node)?),
            "linear" => Mode::Linear,
            "cubic" => Mode::Cubic(node.attr_float("cubic_coeff_a", -0.75) as f64),
            other => return Err(unsupported(node, format!("Resize mode '{other}'"))),
        };
        let coord_mode = node.attr_str("coordinate_transformation_mode", "half_pixel");
        let axes: Vec<usize> = match node.attr_ints("axes") {
            Some(a) => a
                .iter()
                .map(|&a| axis_of(node, a, rank))
                .collect::<Result<_, _>>()?,
            None => (0..rank).collect(),
        };
        let scales = axis_scales(node, inputs, &axes, out_shape)?;
        let roi = axis_roi(node, inputs, &axes, rank)?;
        let antialias = node.attr_int("antialias", 0) != 0;
        let exclude_outside = node.attr_int("exclude_outside", 0) != 0;
        let mut taps = Vec::with_capacity(rank);
        for d in 0..rank {
            let (len_in, len_out, scale) = (x.shape[d], out_shape[d], scales[d]);
            let trivial_roi = roi[d] == (0.0, 1.0);
            if (scale - 1.0).abs() <= 1e-9 && len_out == len_in && trivial_roi {
                taps.push(None);
                continue;
            }
            let axis = AxisMap {
                len_in,
                len_out,
                scale,
                roi: roi[d],
            };
            let per_out = (0..len_out)
                .map(|y| {
                    let c = axis.source(coord_mode, y).ok_or_else(|| {
                        unsupported(
                            node,
                            format!("coordinate_transformation_mode '{coord_mode}'"),
                        )
                    })?;
                    if coord_mode == "tf_crop_and_resize" && (c < 0.0 || c > len_in as f64 - 1.0) {
                        return Ok(None);
                    }
                    Ok(Some(tap_weights(
                        mode,
                        c,
                        len_in,
                        scale,
                        antialias,
                        exclude_outside,
                    )))
                })
                .collect::<Result<AxisTaps, KernelError>>()?;
            taps.push(Some(per_out));
        }
        Ok(Plan {
            mode,
            extrapolation_value: node.attr_float("extrapolation_value", 0.0) as f64,
            taps,
        })
    }
}

/// One axis's extents, scale and region of interest.
struct AxisMap {
    len_in: usize,
    len_out: usize,
    scale: f64,
    roi: (f64, f64),
}

impl AxisMap {
    /// The input coordinate of output index `y`; `None` for an unknown mode.
    fn source(&self, mode: &str, y: usize) -> Option<f64> {
        let (y, len_in, s) = (y as f64, self.len_in as f64, self.scale);
        let len = len_in * s;
        Some(match mode {
            "half_pixel" => (y + 0.5) / s - 0.5,
            "half_pixel_symmetric" => {
                let offset = len_in / 2.0 * (1.0 - self.len_out as f64 / len);
                offset + (y + 0.5) / s - 0.5
            }
            "pytorch_half_pixel" if len == 1.0 => -0.5,
            "pytorch_half_pixel" => (y + 0.5) / s - 0.5,
            "asymmetric" => y / s,
            "align_corners" if len == 1.0 => 0.0,
            "align_corners" => y * (len_in - 1.0) / (len - 1.0),
            "tf_crop_and_resize" => {
                let (start, end) = self.roi;
                let c = if len == 1.0 {
                    (end - start) * (len_in - 1.0) / 2.0
                } else {
                    y * (end - start) * (len_in - 1.0) / (len - 1.0)
                };
                c + start * (len_in - 1.0)
            }
            _ => return None,
        })
    }
}

/// The taps of one output coordinate `c` on an axis of `len_in` elements, as (input
/// index, weight), indices clamped to the input.
fn tap_weights(
    mode: Mode,
    c: f64,
    len_in: usize,
    scale: f64,
    antialias: bool,
    exclude_outside: bool,
) -> Vec<(usize, f64)> {
    let clamp = |i: i64| i.clamp(0, len_in as i64 - 1) as usize;
    // `ratio` in (0, 1]: a coordinate on an element counts as 1 past the one before.
    let ratio = if c.fract() == 0.0 { 1.0 } else { c - c.floor() };
    let base = (c - ratio).round() as i64;
    let (radius, kernel): (f64, Box<dyn Fn(f64) -> f64>) = match mode {
        Mode::Nearest(round) => {
            let i = if ratio == 1.0 { c } else { round(c) };
            return vec![(clamp(i as i64), 1.0)];
        }
        Mode::Linear => (1.0, Box::new(|d: f64| (1.0 - d.abs()).max(0.0))),
        Mode::Cubic(a) => (2.0, Box::new(move |d: f64| cubic(a, d))),
    };
    let stretch = if antialias { scale.min(1.0) } else { 1.0 };
    let start = (-radius / stretch).floor() as i64 + 1;
    let count = 2 - 2 * start;
    let mut taps: Vec<(i64, f64)> = (0..count)
        .map(|j| {
            let offset = start + j;
            (base + offset, kernel((offset as f64 - ratio) * stretch))
        })
        .collect();
    if antialias {
        normalize(&mut taps);
    }
    if exclude_outside {
        for t in &mut taps {
            if t.0 < 0 || t.0 >= len_in as i64 {
                t.1 = 0.0;
            }
        }
        normalize(&mut taps);
    }
    taps.into_iter()
        .filter(|&(_, w)| w != 0.0)
        .map(|(i, w)| (clamp(i), w))
        .collect()
}

/// The cubic convolution kernel with coefficient `a` at distance `d`.
fn cubic(a: f64, d: f64) -> f64 {
    let d = d.abs();
    if d <= 1.0 {
        ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
    } else if d < 2.0 {
        ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
    } else {
        0.0
    }
}

fn normalize(taps: &mut [(i64, f64)]) {
    let sum: f64 = taps.iter().map(|t| t.1).sum();
    if sum != 0.0 {
        taps.iter_mut().for_each(|t| t.1 /= sum);
    }
}

/// The rounding of `nearest_mode`, applied to a coordinate between two elements.
fn nearest_rounding(node: &Node) -> Result<fn(f64) -> f64, KernelError> {
    Ok(match node.attr_str("nearest_mode", "round_prefer_floor") {
        "round_prefer_floor" => |c| {
            if c - c.floor() <= 0.5 {
                c.floor()
            } else {
                c.ceil()
            }
        },
        "round_prefer_ceil" => |c| {
            if c - c.floor() < 0.5 {
                c.floor()
            } else {
                c.ceil()
            }
        },
        "floor" => f64::floor,
        "ceil" => f64::ceil,
        other => return Err(unsupported(node, format!("nearest_mode '{other}'"))),
    })
}

/// The scale of every axis (1 on axes not resized).
fn axis_scales(
    node: &Node,
    inputs: &[TensorRef<'_>],
    axes: &[usize],
    out_shape: &[usize],
) -> Result<Vec<f64>, KernelError> {
    let x = &inputs[0];
    let mut scales = vec![1.0f64; x.shape.len()];
    let given = match node.attrs.get("scales") {
        Some(Attr::Floats(s)) => Some(s.clone()),
        _ if present(inputs, 2) => Some(load_f32(&inputs[2])),
        _ => None,
    };
    if let Some(s) = given {
        for (&a, &v) in axes.iter().zip(&s) {
            scales[a] = v as f64;
        }
        return Ok(scales);
    }
    let sizes = match present(inputs, 3) {
        true => ints(node, inputs, 3, "sizes"),
        false => node.attr_ints("sizes").map(<[i64]>::to_vec),
    }
    .ok_or_else(|| shape_err(node, "Resize needs scales or sizes"))?;
    let ratios = axes
        .iter()
        .zip(&sizes)
        .map(|(&a, &s)| s as f64 / x.shape[a] as f64);
    let common = match node.attr_str("keep_aspect_ratio_policy", "stretch") {
        "not_larger" => Some(ratios.fold(f64::INFINITY, f64::min)),
        "not_smaller" => Some(ratios.fold(0.0, f64::max)),
        _ => None,
    };
    for &a in axes {
        scales[a] = common.unwrap_or(out_shape[a] as f64 / x.shape[a] as f64);
    }
    Ok(scales)
}

/// The `(start, end)` region of interest of every axis, from operand 1 (starts then ends
/// of the resized axes); `(0, 1)` when absent.
fn axis_roi(
    node: &Node,
    inputs: &[TensorRef<'_>],
    axes: &[usize],
    rank: usize,
) -> Result<Vec<(f64, f64)>, KernelError> {
    let mut roi = vec![(0.0, 1.0); rank];
    if !present(inputs, 1) {
        return Ok(roi);
    }
    let v = load_f32(&inputs[1]);
    if v.len() != 2 * axes.len() {
        return Err(shape_err(
            node,
            format!(
                "roi has {} values; {} resized axes need {}",
                v.len(),
                axes.len(),
                2 * axes.len()
            ),
        ));
    }
    for (k, &a) in axes.iter().enumerate() {
        roi[a] = (v[k] as f64, v[k + axes.len()] as f64);
    }
    Ok(roi)
}

/// Nearest: each output element copies one input element (or, extrapolated, takes the
/// extrapolation value, which needs a float dtype).
fn nearest(
    node: &Node,
    x: &TensorRef<'_>,
    plan: &Plan,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let in_strides = strides(x.shape);
    let size = x.dtype.size();
    let out_shape = out.shape().to_vec();
    // Per axis, per output index: the input index, or None when extrapolated.
    let index: Vec<Vec<Option<usize>>> = plan
        .taps
        .iter()
        .enumerate()
        .map(|(d, t)| match t {
            None => (0..out_shape[d]).map(Some).collect(),
            Some(per_out) => per_out
                .iter()
                .map(|taps| taps.as_ref().map(|t| t[0].0))
                .collect(),
        })
        .collect();
    let extrapolates = index.iter().flatten().any(Option::is_none);
    if extrapolates && !x.dtype.is_float() {
        return Err(unsupported(
            node,
            format!("extrapolation_value for a {} Resize", x.dtype),
        ));
    }
    let fill = match x.dtype {
        DType::F16 => f16::from_f64(plan.extrapolation_value)
            .to_bits()
            .to_le_bytes()
            .to_vec(),
        _ => (plan.extrapolation_value as f32).to_le_bytes().to_vec(),
    };
    let mut k = 0;
    for_each_index(&out_shape, |idx| {
        let src: Option<usize> = (0..idx.len())
            .map(|d| index[d][idx[d]].map(|i| i * in_strides[d]))
            .sum();
        match src {
            Some(src) => move_element(out.data, k, x.data, src, size),
            None => out.data[k * size..(k + 1) * size].copy_from_slice(&fill),
        }
        k += 1;
    });
    Ok(())
}

/// Linear and cubic: one f64 pass per resized axis, rounded once at the end.
fn interpolate(x: &TensorRef<'_>, plan: &Plan, out: &mut TensorMut<'_>) {
    let mut shape = x.shape.to_vec();
    let mut data: Vec<f64> = load_f32(x).into_iter().map(f64::from).collect();
    for (d, taps) in plan.taps.iter().enumerate() {
        let Some(taps) = taps else {
            continue;
        };
        let outer: usize = shape[..d].iter().product();
        let inner: usize = shape[d + 1..].iter().product();
        let (len_in, len_out) = (shape[d], taps.len());
        let mut next = vec![0.0f64; outer * len_out * inner];
        for o in 0..outer {
            let src = &data[o * len_in * inner..(o + 1) * len_in * inner];
            let dst = &mut next[o * len_out * inner..(o + 1) * len_out * inner];
            for (y, t) in taps.iter().enumerate() {
                let row = &mut dst[y * inner..(y + 1) * inner];
                match t {
                    None => row.fill(plan.extrapolation_value),
                    Some(t) => {
                        for (i, v) in row.iter_mut().enumerate() {
                            *v = t
                                .iter()
                                .fold(0.0, |acc, &(k, w)| acc + w * src[k * inner + i]);
                        }
                    }
                }
            }
        }
        shape[d] = len_out;
        data = next;
    }
    store_f64(out, &data);
}
