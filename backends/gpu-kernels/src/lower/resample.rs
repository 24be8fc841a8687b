//! Lowering of the resampling ops: Resize and ConvTranspose.
//!
//! Both map each output position to a few input positions by rules that depend only on
//! the shapes and attributes, so the mapping is worked out here at compile time (in f64,
//! as the reference kernels do) and the kernels only gather and sum.

use super::*;
use baton_delegate_api::Attr;

/// The bytes of the constant optional input `i` of `node`, `None` when it is absent or
/// has no elements (ONNX's way of leaving an input out); declined when it is computed
/// at run time, since the tables below are made at compile time.
fn given<'a>(cx: &Context<'a>, node: &Node, i: usize, what: &str) -> Lowered<Option<&'a [u8]>> {
    let Some(&t) = node.inputs.get(i) else {
        return Ok(None);
    };
    let decl = &cx.graph.tensors[t];
    if decl.static_shape().is_some_and(|s| s.contains(&0)) {
        return Ok(None);
    }
    match cx.consts.bytes(t).filter(|_| decl.is_const()) {
        Some([]) => Ok(None),
        Some(b) => Ok(Some(b)),
        None => Err(Decline::new(
            DeclineReason::NotConstant,
            format!(
                "{}: {what} '{}' is computed at run time (the sampling tables are made at compile time)",
                node.label(),
                decl.name
            ),
        )),
    }
}

/// The values of the constant float input `i` as the reference reads them (through f32).
fn given_floats(cx: &Context<'_>, node: &Node, i: usize, what: &str) -> Lowered<Option<Vec<f64>>> {
    let Some(bytes) = given(cx, node, i, what)? else {
        return Ok(None);
    };
    let dtype = cx.graph.tensors[node.inputs[i]].dtype;
    if !matches!(dtype, DType::F32 | DType::F16) {
        return Err(Decline::new(
            DeclineReason::DType,
            format!("{}: {what} is {dtype}, not f32 or f16", node.label()),
        ));
    }
    let n = bytes.len() / dtype.size();
    Ok(Some(
        (0..n)
            .map(|k| baton_delegate_api::dtype::element_f64(dtype, bytes, k) as f32 as f64)
            .collect(),
    ))
}

/// Resize's interpolation.
#[derive(Clone, Copy)]
enum Mode {
    /// With the rounding of `nearest_mode`.
    Nearest(fn(f64) -> f64),
    Linear,
    /// With the cubic coefficient `a`.
    Cubic(f64),
}

/// The rounding of `nearest_mode`, applied to a coordinate between two elements.
fn nearest_rounding(mode: &str) -> Option<fn(f64) -> f64> {
    Some(match mode {
        "round_prefer_floor" => |c: f64| {
            if c - c.floor() <= 0.5 {
                c.floor()
            } else {
                c.ceil()
            }
        },
        "round_prefer_ceil" => |c: f64| {
            if c - c.floor() < 0.5 {
                c.floor()
            } else {
                c.ceil()
            }
        },
        "floor" => f64::floor,
        "ceil" => f64::ceil,
        _ => return None,
    })
}

/// The input coordinate of output index `y` on one axis under the coordinate
/// transformation `mode`; `None` for a mode ONNX does not define. `len` is the
/// fractional output extent `len_in * scale`, which the ONNX formulas divide by.
fn source(
    mode: &str,
    y: usize,
    len_in: usize,
    len_out: usize,
    scale: f64,
    roi: (f64, f64),
) -> Option<f64> {
    let (y, len_in, s) = (y as f64, len_in as f64, scale);
    let len = len_in * s;
    Some(match mode {
        "half_pixel" => (y + 0.5) / s - 0.5,
        "half_pixel_symmetric" => {
            let offset = len_in / 2.0 * (1.0 - len_out as f64 / len);
            offset + (y + 0.5) / s - 0.5
        }
        "pytorch_half_pixel" if len == 1.0 => -0.5,
        "pytorch_half_pixel" => (y + 0.5) / s - 0.5,
        "asymmetric" => y / s,
        "align_corners" if len == 1.0 => 0.0,
        "align_corners" => y * (len_in - 1.0) / (len - 1.0),
        "tf_crop_and_resize" => {
            let (start, end) = roi;
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

/// The taps of input coordinate `c` on an axis of `len_in` elements as (input index,
/// weight), indices clamped to the input, taps of weight exactly 0 left out (so a NaN
/// beside a sampled point does not leak in): the reference's rules, in f64.
fn taps(
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
    let radius = match mode {
        Mode::Nearest(round) => {
            let i = if ratio == 1.0 { c } else { round(c) };
            return vec![(clamp(i as i64), 1.0)];
        }
        Mode::Linear => 1.0,
        Mode::Cubic(_) => 2.0,
    };
    let kernel = |d: f64| match mode {
        Mode::Cubic(a) => cubic(a, d),
        _ => (1.0 - d.abs()).max(0.0),
    };
    // Antialiasing widens the kernel by 1 / scale where the axis shrinks.
    let stretch = if antialias { scale.min(1.0) } else { 1.0 };
    let start = (-radius / stretch).floor() as i64 + 1;
    let count = 2 - 2 * start;
    let mut t: Vec<(i64, f64)> = (0..count)
        .map(|j| {
            let offset = start + j;
            (base + offset, kernel((offset as f64 - ratio) * stretch))
        })
        .collect();
    if antialias {
        normalize(&mut t);
    }
    if exclude_outside {
        for tap in &mut t {
            if tap.0 < 0 || tap.0 >= len_in as i64 {
                tap.1 = 0.0;
            }
        }
        normalize(&mut t);
    }
    t.into_iter()
        .filter(|&(_, w)| w != 0.0)
        .map(|(i, w)| (clamp(i), w))
        .collect()
}

/// One output index's taps: (input index, weight).
type Taps = Vec<(usize, f64)>;

/// How the Resize kernel holds the elements (see resize.wgsl's `kind`).
#[derive(Clone, Copy)]
enum Kind {
    /// f32, one word an element, interpolated.
    Interpolate,
    /// Moved unchanged, this many words an element.
    Words(u32),
    /// Packed into words (`size` bytes an element); f16 interpolated when `half`.
    Packed { size: usize, half: bool },
}

/// What marks an extrapolated output index in the table (its tap count).
const OUTSIDE: u32 = u32::MAX;

/// The largest tap table a Resize may make (in 32-bit words): a bound on what a node
/// uploads, far above what real models need (a 4x antialiased shrink of a 4K image
/// takes about 100 000 words).
const MAX_TABLE_WORDS: usize = 1 << 24;

/// Resize with constant scales or sizes (attributes or constant inputs) and a constant
/// roi: f32 and f16 in every mode; in `nearest` every dtype of 1, 2, 4 or 8 bytes, its
/// bits moved unchanged (those of 1 or 2 bytes packed into words).
///
/// Every axis gets a table, per output index, of its input taps: (element offset, f32
/// weight). The kernel sums the products of one tap per axis over every combination:
/// the separable sum the reference computes axis by axis, in f32 with the weights
/// worked out (in f64) here. Axes left as they are have one tap of weight 1, so nearest
/// and those axes move values unchanged.
pub(super) fn resize(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let xt = node.inputs[0];
    let x = cx.fits(xt)?;
    let y = cx.fits(out)?;
    let y = y.as_slice();
    let attr = |e: String| Decline::new(DeclineReason::Attribute, format!("{}: {e}", node.label()));
    let mode = match node.attr_str("mode", "nearest") {
        "nearest" => {
            let m = node.attr_str("nearest_mode", "round_prefer_floor");
            Mode::Nearest(nearest_rounding(m).ok_or_else(|| attr(format!("nearest_mode '{m}'")))?)
        }
        "linear" => Mode::Linear,
        "cubic" => Mode::Cubic(f64::from(node.attr_float("cubic_coeff_a", -0.75))),
        other => return Err(attr(format!("mode '{other}'"))),
    };
    // Nearest moves bits, so it takes every dtype of 1, 2, 4 or 8 bytes; the
    // interpolations compute in f32 (f16 widened on load, rounded once on store).
    let dtype = cx.graph.tensors[xt].dtype;
    let interpolate = !matches!(mode, Mode::Nearest(_));
    let kind = match (interpolate, dtype) {
        (true, DType::F32) => Kind::Interpolate,
        (true, DType::F16) => Kind::Packed {
            size: 2,
            half: true,
        },
        // Bool is held a byte an element; the sub-byte dtypes are packed, and not moved.
        (false, d) if d == DType::Bool || d.bits() == 8 => Kind::Packed {
            size: 1,
            half: false,
        },
        (false, d) if d.bits() == 16 => Kind::Packed {
            size: 2,
            half: false,
        },
        (false, d) if d.bits() == 32 => Kind::Words(1),
        (false, d) if d.bits() == 64 => Kind::Words(2),
        _ => {
            let which = if interpolate {
                "f32 and f16"
            } else {
                "dtypes of 1, 2, 4 or 8 bytes"
            };
            return Err(Decline::new(
                DeclineReason::DType,
                format!(
                    "{}: tensor '{}' is {dtype}: this Resize mode runs on {which} here",
                    node.label(),
                    cx.graph.tensors[xt].name
                ),
            ));
        }
    };
    if cx.graph.tensors[out].dtype != dtype {
        return Err(Decline::new(
            DeclineReason::DType,
            format!("{}: output is not {dtype}", node.label()),
        ));
    }
    let rank = x.len();
    let axes: Vec<usize> = match node.attr_ints("axes") {
        Some(a) => a
            .iter()
            .map(|&v| normalize_axis(v, rank))
            .collect::<Result<_, _>>()
            .map_err(attr)?,
        None => (0..rank).collect(),
    };
    // Scales: the attribute, else input 2; else from sizes (input 3 or the attribute),
    // one common ratio under keep_aspect_ratio_policy.
    let mut scales = vec![1.0f64; rank];
    let given_scales = match node.attrs.get("scales") {
        Some(Attr::Floats(s)) => Some(s.iter().map(|&v| f64::from(v)).collect()),
        _ => given_floats(cx, node, 2, "scales")?,
    };
    if let Some(s) = given_scales {
        for (&a, &v) in axes.iter().zip(&s) {
            scales[a] = v;
        }
    } else {
        let sizes = match given(cx, node, 3, "sizes")? {
            Some(_) => cx.consts.i64s(node.inputs[3]).ok_or_else(|| {
                Decline::new(
                    DeclineReason::DType,
                    format!("{}: sizes must be i64", node.label()),
                )
            })?,
            None => node
                .attr_ints("sizes")
                .map(<[i64]>::to_vec)
                .ok_or_else(|| attr("neither scales nor sizes".into()))?,
        };
        let ratios = axes
            .iter()
            .zip(&sizes)
            .map(|(&a, &s)| s as f64 / x[a] as f64);
        let common = match node.attr_str("keep_aspect_ratio_policy", "stretch") {
            "not_larger" => Some(ratios.fold(f64::INFINITY, f64::min)),
            "not_smaller" => Some(ratios.fold(0.0, f64::max)),
            _ => None,
        };
        for &a in &axes {
            scales[a] = common.unwrap_or(y[a] as f64 / x[a] as f64);
        }
    }
    let mut roi = vec![(0.0, 1.0); rank];
    if let Some(v) = given_floats(cx, node, 1, "roi")? {
        if v.len() != 2 * axes.len() {
            return Err(Decline::new(
                DeclineReason::Shape,
                format!(
                    "{}: roi has {} values; {} resized axes need {}",
                    node.label(),
                    v.len(),
                    axes.len(),
                    2 * axes.len()
                ),
            ));
        }
        for (k, &a) in axes.iter().enumerate() {
            roi[a] = (v[k], v[k + axes.len()]);
        }
    }
    // After the operands are read, so run-time scales or sizes are declined as such
    // rather than by the shape rule, which cannot size the output without them.
    let expected = infer(cx, node)?;
    if expected != y {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{}: declared output {y:?}, the op gives {expected:?}",
                node.label()
            ),
        ));
    }
    let coord = node.attr_str("coordinate_transformation_mode", "half_pixel");
    let antialias = node.attr_int("antialias", 0) != 0;
    let exclude_outside = node.attr_int("exclude_outside", 0) != 0;
    let xs = strides(&x);
    // Per axis, per output index: its taps, or None where extrapolated.
    let mut per_axis: Vec<Vec<Option<Taps>>> = Vec::with_capacity(rank);
    for d in 0..rank {
        let (len_in, len_out, scale) = (x[d], y[d], scales[d]);
        if (scale - 1.0).abs() <= 1e-9 && len_out == len_in && roi[d] == (0.0, 1.0) {
            per_axis.push((0..len_out).map(|o| Some(vec![(o, 1.0)])).collect());
            continue;
        }
        let mut axis = Vec::with_capacity(len_out);
        for o in 0..len_out {
            let c = source(coord, o, len_in, len_out, scale, roi[d])
                .ok_or_else(|| attr(format!("coordinate_transformation_mode '{coord}'")))?;
            if coord == "tf_crop_and_resize" && (c < 0.0 || c > len_in as f64 - 1.0) {
                axis.push(None);
            } else {
                axis.push(Some(taps(
                    mode,
                    c,
                    len_in,
                    scale,
                    antialias,
                    exclude_outside,
                )));
            }
        }
        per_axis.push(axis);
    }
    let extrapolates = per_axis.iter().flatten().any(Option::is_none);
    if extrapolates && !matches!(dtype, DType::F32 | DType::F16) {
        return Err(attr(format!(
            "extrapolation_value for a {dtype} Resize (tf_crop_and_resize samples outside the input)"
        )));
    }
    // The table: every axis's headers (first tap word, tap count) in output order, then
    // the taps as (element offset along the input, f32 weight bits).
    let headers: usize = y.iter().map(|&l| 2 * l).sum();
    let tap_words: usize = per_axis
        .iter()
        .flatten()
        .flatten()
        .map(|t| 2 * t.len())
        .sum();
    let table_bytes = 4 * (headers + tap_words + 4) as u64;
    if headers + tap_words > MAX_TABLE_WORDS || table_bytes > cx.limits.max_storage_range {
        return Err(Decline::new(
            DeclineReason::Resource,
            format!(
                "{}: the sampling table would take {table_bytes} bytes (at most {} words, \
                 and the device's maxStorageBufferRange of {} bytes)",
                node.label(),
                MAX_TABLE_WORDS,
                cx.limits.max_storage_range
            ),
        ));
    }
    let mut table: Vec<u32> = Vec::with_capacity(headers + tap_words);
    let mut taps_table: Vec<u32> = Vec::with_capacity(tap_words);
    let mut bases = Vec::with_capacity(rank);
    for (d, axis) in per_axis.iter().enumerate() {
        bases.push(table.len());
        for o in axis {
            match o {
                None => table.extend([0, OUTSIDE]),
                Some(t) => {
                    table.extend([(headers + taps_table.len()) as u32, t.len() as u32]);
                    for &(i, w) in t {
                        taps_table.extend([(i * xs[d]) as u32, (w as f32).to_bits()]);
                    }
                }
            }
        }
    }
    table.extend(taps_table);
    let elements: usize = y.iter().product();
    let value = node.attr_float("extrapolation_value", 0.0);
    let (n, code, extrapolation) = match kind {
        Kind::Interpolate => (elements, 0, value.to_bits()),
        Kind::Words(w) => (elements, w, value.to_bits()),
        Kind::Packed { size, half } => {
            // The f16 the reference stores: the value rounded once to nearest even.
            let mut b = Vec::new();
            baton_delegate_api::dtype::push_float(DType::F16, f64::from(value), false, &mut b);
            let bits = u32::from(u16::from_le_bytes([b[0], b[1]]));
            (
                (elements * size).div_ceil(4),
                if half { 4 } else { 3 },
                bits,
            )
        }
    };
    let mut p = vec![n as u32, code, extrapolation];
    p.extend(pad6(y, 1));
    // Leading (absent) axes point at a header of one tap of offset 0 and weight 1,
    // appended after the taps.
    let unit = table.len();
    table.extend([(unit + 2) as u32, 1, 0, 1f32.to_bits()]);
    p.extend(std::iter::repeat_n(unit as u32, MAX_RANK - rank));
    p.extend(bases.iter().map(|&b| b as u32));
    let size = match kind {
        Kind::Packed { size, .. } => size,
        _ => 4,
    };
    p.extend([size as u32, elements as u32]);
    let mut d = cx.one_dimensional("resize", n, [Some(xt), None, None, Some(out)], p)?;
    d.made = vec![(1, table.iter().flat_map(|w| w.to_le_bytes()).collect())];
    Ok(d)
}

/// ConvTranspose with 1 to 3 spatial axes, written as a gather: each output element
/// sums, over the taps and the input channels of its group, the input elements that
/// tap carries onto it (`i * stride + tap * dilation - pad_begin == o`), so there are
/// no atomics and every run sums in the same order. The weights stay in the graph's
/// `[C, M / group, k...]` layout (bound from the weights buffer like Conv's), and an
/// activation after it is applied as the result is stored.
pub(super) fn conv_transpose(
    cx: &Context<'_>,
    node: &Node,
    act: Activation,
    out: TensorId,
    y: &[usize],
) -> Lowered<Draft> {
    // f32, or f16 where the device runs the f16 variant (f32 sums, one rounding).
    let x = cx.operand(node.inputs[0], out)?;
    let w = cx.operand(node.inputs[1], out)?;
    let bias = node.inputs.get(2).copied();
    if let Some(t) = bias {
        cx.operand(t, out)?;
    }
    let shape = |e: String| Decline::new(DeclineReason::Shape, format!("{}: {e}", node.label()));
    let sp = x.len().saturating_sub(2);
    if !(1..=3).contains(&sp) || w.len() != x.len() || y.len() != x.len() {
        return Err(shape(format!(
            "ConvTranspose of input {x:?} with weights {w:?} (1 to 3 spatial axes here)"
        )));
    }
    let group = usize::try_from(node.attr_int("group", 1))
        .ok()
        .filter(|&g| g >= 1 && x[1] % g == 0)
        .ok_or_else(|| {
            shape(format!(
                "group {} for {} channels",
                node.attr_int("group", 1),
                x[1]
            ))
        })?;
    let (channels, m_all) = (x[1], y[1]);
    if w[0] != channels || w[1] * group != m_all || y[0] != x[0] {
        return Err(shape(format!(
            "input {x:?}, weights {w:?} and output {y:?} do not fit (group {group})"
        )));
    }
    let list = |name: &str, default: usize| -> Vec<usize> {
        match node.attr_ints(name) {
            Some(v) if v.len() == sp => v
                .iter()
                .map(|&s| s.max(default.min(1) as i64) as usize)
                .collect(),
            _ => vec![default; sp],
        }
    };
    let (stride, dilation, out_pad) = (
        list("strides", 1),
        list("dilations", 1),
        list("output_padding", 0),
    );
    let (in_sp, out_sp, kernel) = (&x[2..], &y[2..], &w[2..]);
    // The padding before each axis, as the reference takes it: from `pads`, 0 under
    // VALID, or (with output_shape or SAME_*) from the total `full - out`, SAME_UPPER
    // putting the smaller half first and the others the larger.
    let auto_pad = node.attr_str("auto_pad", "NOTSET");
    let derived = node.attrs.contains_key("output_shape") || auto_pad.starts_with("SAME");
    let mut pad_begin = Vec::with_capacity(sp);
    for i in 0..sp {
        let p = if derived {
            let full = (in_sp[i] as i128 - 1) * stride[i] as i128
                + out_pad[i] as i128
                + (kernel[i] as i128 - 1) * dilation[i] as i128
                + 1;
            let total = (full - out_sp[i] as i128).max(0);
            match auto_pad {
                "SAME_UPPER" => total / 2,
                _ => total - total / 2,
            }
        } else if auto_pad == "VALID" {
            0
        } else {
            node.attr_ints("pads")
                .and_then(|p| p.get(i).copied())
                .unwrap_or(0)
                .into()
        };
        pad_begin.push(i32::try_from(p).map_err(|_| shape(format!("pads {p}")))?);
    }
    // The kernel's signed position arithmetic must not overflow i32.
    let far = (0..sp).all(|i| {
        let reach = (out_sp[i] as i128)
            + (pad_begin[i] as i128).abs()
            + (kernel[i] as i128) * dilation[i] as i128;
        reach < i32::MAX as i128 && stride[i] < i32::MAX as usize
    });
    if !far {
        return Err(shape("extents too large for 32-bit positions".into()));
    }
    let three = |v: &[usize], fill: usize| -> Vec<u32> {
        let mut o = vec![fill as u32; 3 - v.len()];
        o.extend(v.iter().map(|&d| d as u32));
        o
    };
    let n: usize = y.iter().product();
    let mut p = vec![n as u32, channels as u32, m_all as u32, group as u32];
    p.extend(three(in_sp, 1));
    p.extend(three(out_sp, 1));
    p.extend(three(kernel, 1));
    p.extend(three(&stride, 1));
    p.extend(three(&dilation, 1));
    let mut pads = vec![0u32; 3 - sp];
    pads.extend(pad_begin.iter().map(|&v| v as u32));
    p.extend(pads);
    p.extend([
        u32::from(bias.is_some()),
        act.code,
        act.a.to_bits(),
        act.b.to_bits(),
    ]);
    cx.one_dimensional(
        cx.variant("conv_transpose", "conv_transpose_f16", out),
        n,
        [Some(node.inputs[0]), Some(node.inputs[1]), bias, Some(out)],
        p,
    )
}

/// A ConvTranspose with the BatchNormalization `bn` that alone reads its result folded
/// into its weights and bias, as for Conv (see `linalg::conv_batch_norm`): output
/// channel `m` of group `g` is weighed by `W[c, m - g M/group, ...]` for the input
/// channels `c` of `g`, so those weights are scaled by `s[m]`, and `B'[m] = B[m] s[m] +
/// t[m]`. f32 only (the caller checks); declines unless the weights, the bias and BN's
/// parameters are constants, and the two are then lowered apart.
pub(super) fn conv_transpose_batch_norm(
    cx: &Context<'_>,
    node: &Node,
    bn: &Node,
    act: Activation,
    out: TensorId,
) -> Lowered<Draft> {
    let own = *node.outputs.first().ok_or_else(|| {
        Decline::new(
            DeclineReason::Shape,
            format!("{} has no output", node.label()),
        )
    })?;
    let y = cx.f32_tensor(own)?;
    let expected = infer(cx, node)?;
    if expected != y || cx.shape(out)? != y {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{}: declared output {y:?}, the op gives {expected:?}",
                node.label()
            ),
        ));
    }
    let mut d = conv_transpose(cx, node, act, out, &y)?;
    // C and group as the lowering read them (params 1 and 3).
    let (channels_in, m_all, group) = (d.params[1] as usize, y[1], d.params[3] as usize);
    let st = super::norm::batch_norm_affine(cx, bn, m_all)?;
    let mut weights = super::linalg::constant_f32s(cx, node, node.inputs[1])?;
    let b = match node.inputs.get(2) {
        Some(&t) => super::linalg::constant_f32s(cx, node, t)?,
        None => vec![0.0; m_all],
    };
    let (cpg, mpg) = (channels_in / group, m_all / group);
    let per = weights.len() / (channels_in * mpg).max(1);
    for (k, w) in weights.iter_mut().enumerate() {
        let (c, ml) = (k / per / mpg, k / per % mpg);
        let m = (c / cpg) * mpg + ml;
        *w = (f64::from(*w) * f64::from(st[2 * m])) as f32;
    }
    let folded_bias: Vec<f32> = (0..m_all)
        .map(|m| (f64::from(b[m]) * f64::from(st[2 * m]) + f64::from(st[2 * m + 1])) as f32)
        .collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    d.bindings[1] = None;
    d.bindings[2] = None;
    d.params[22] = 1; // has_bias
    d.made = vec![(1, bytes(&weights)), (2, bytes(&folded_bias))];
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::ir::GraphBuilder;

    fn limits() -> Limits {
        Limits::for_tests()
    }

    fn lowered(g: &Graph) -> Lowered<Vec<Draft>> {
        let consts = Constants::new(g, &[]);
        let cx = Context {
            graph: g,
            consts: &consts,
            limits: limits(),
        };
        lower(&cx, &g.nodes[0], Activation::default(), g.outputs[0])
    }

    fn resize_graph(shape: &[usize], dtype: DType, attrs: &[(&str, Attr)], roi: &[f32]) -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", dtype, shape);
        let roi = b.constant_f32("roi", &[roi.len()], roi);
        let y = b.node(OpKind::Resize, &[x, roi], attrs).unwrap();
        b.output(y);
        b.finish().unwrap()
    }

    /// The table's taps of output index `o` on the axis whose first header is `base`.
    fn taps_of(table: &[u32], base: u32, o: usize) -> Option<Vec<(u32, f32)>> {
        let h = base as usize + 2 * o;
        let (first, count) = (table[h] as usize, table[h + 1]);
        (count != OUTSIDE).then(|| {
            (0..count as usize)
                .map(|k| {
                    let e = first + 2 * k;
                    (table[e], f32::from_bits(table[e + 1]))
                })
                .collect()
        })
    }

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn bilinear_half_pixel_taps_clamp_at_the_edges() {
        let attrs = [
            ("mode", Attr::Str("linear".into())),
            ("scales", Attr::Floats(vec![1.0, 1.0, 2.0, 2.0])),
        ];
        let g = resize_graph(&[1, 1, 2, 2], DType::F32, &attrs, &[]);
        let d = lowered(&g).unwrap();
        assert_eq!(d[0].kernel, "resize");
        let p = &d[0].params;
        assert_eq!(p[..3], [16, 0, 0]);
        assert_eq!(p[3..9], [1, 1, 1, 1, 4, 4]);
        let table = words(&d[0].made[0].1);
        // Axis 2 (stride 2): sources (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25; the
        // taps below 0 and past 1 read the edge rows.
        let want = [
            vec![(0, 0.25), (0, 0.75)],
            vec![(0, 0.75), (2, 0.25)],
            vec![(0, 0.25), (2, 0.75)],
            vec![(2, 0.75), (2, 0.25)],
        ];
        for (o, w) in want.iter().enumerate() {
            assert_eq!(taps_of(&table, p[13], o).as_ref(), Some(w));
        }
        // Axis 1 is left as it is: one tap of weight 1; the absent leading axes point
        // at a unit tap too.
        assert_eq!(taps_of(&table, p[12], 0), Some(vec![(0, 1.0)]));
        assert_eq!(taps_of(&table, p[9], 0), Some(vec![(0, 1.0)]));
    }

    #[test]
    fn nearest_moves_words_and_crop_and_resize_marks_extrapolation() {
        let attrs = [
            (
                "coordinate_transformation_mode",
                Attr::Str("tf_crop_and_resize".into()),
            ),
            ("scales", Attr::Floats(vec![2.0])),
            ("extrapolation_value", Attr::Float(7.5)),
        ];
        // roi [-0.5, 1] on 3 elements, 6 outputs: sources 0.6 o - 1 = -1, -0.4 (outside),
        // 0.2, 0.8, 1.4 (round_prefer_floor: 0, 1, 1) and 2 (on an element: 2).
        let g = resize_graph(&[3], DType::F32, &attrs, &[-0.5, 1.0]);
        let d = lowered(&g).unwrap();
        let (p, table) = (&d[0].params, words(&d[0].made[0].1));
        assert_eq!(p[1], 1);
        assert_eq!(p[2], 7.5f32.to_bits());
        let got: Vec<_> = (0..6).map(|o| taps_of(&table, p[14], o)).collect();
        let one = |i| Some(vec![(i, 1.0)]);
        assert_eq!(got, [None, None, one(0), one(1), one(1), one(2)]);
        // i64 moves two words; with extrapolation it has no value to take.
        let scales = [("scales", Attr::Floats(vec![1.0, 2.0]))];
        let g = resize_graph(&[2, 3], DType::I64, &scales, &[]);
        assert_eq!(lowered(&g).unwrap()[0].params[1], 2);
        let g = resize_graph(&[3], DType::I64, &attrs, &[-0.5, 1.0]);
        let e = lowered(&g).unwrap_err();
        assert_eq!(e.reason, DeclineReason::Attribute);
        assert!(e.message.contains("extrapolation_value"), "{}", e.message);
        let linear = [
            ("mode", Attr::Str("linear".into())),
            ("scales", Attr::Floats(vec![2.0])),
        ];
        let g = resize_graph(&[3], DType::I32, &linear, &[]);
        assert_eq!(lowered(&g).unwrap_err().reason, DeclineReason::DType);
    }

    #[test]
    fn bytes_and_halves_are_packed_a_word_per_invocation() {
        let nearest = [("scales", Attr::Floats(vec![1.0, 2.0, 1.5]))];
        // u8 [1, 3, 2] -> [1, 6, 3]: 18 elements, 5 words.
        let g = resize_graph(&[1, 3, 2], DType::U8, &nearest, &[]);
        let p = lowered(&g).unwrap()[0].params.clone();
        assert_eq!(p[..2], [5, 3]);
        assert_eq!(p[15..17], [1, 18]);
        // f16 linear: 9 halves, 5 words; the extrapolation value as f16 bits
        // (-3.25 = -1.625 * 2^1: sign, exponent 16, mantissa 0.625 * 1024 = 0x280).
        let attrs = [
            ("mode", Attr::Str("linear".into())),
            (
                "coordinate_transformation_mode",
                Attr::Str("tf_crop_and_resize".into()),
            ),
            ("scales", Attr::Floats(vec![3.0])),
            ("extrapolation_value", Attr::Float(-3.25)),
        ];
        let g = resize_graph(&[3], DType::F16, &attrs, &[-0.5, 1.0]);
        let p = lowered(&g).unwrap()[0].params.clone();
        assert_eq!(p[..3], [5, 4, 0xc280]);
        assert_eq!(p[15..17], [2, 9]);
        // bf16 has no f32 widening here: interpolating it is declined, moving it is not.
        let g = resize_graph(&[3], DType::BF16, &attrs[..3], &[]);
        assert_eq!(lowered(&g).unwrap_err().reason, DeclineReason::DType);
        let g = resize_graph(&[1, 3, 2], DType::BF16, &nearest, &[]);
        assert_eq!(lowered(&g).unwrap()[0].params[1], 3);
        // A float8 is a byte like u8; a packed 4-bit dtype has no element to move.
        let g = resize_graph(&[1, 3, 2], DType::F8E4M3FN, &nearest, &[]);
        assert_eq!(lowered(&g).unwrap()[0].params[15], 1);
        let g = resize_graph(&[1, 3, 2], DType::I4, &nearest, &[]);
        assert_eq!(lowered(&g).unwrap_err().reason, DeclineReason::DType);
    }

    #[test]
    fn run_time_sizes_are_declined_naming_the_input() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 1, 2, 2]);
        let roi = b.constant_f32("roi", &[0], &[]);
        let scales = b.constant_f32("scales", &[0], &[]);
        let sizes = b.constant_i64("sizes", &[4], &[1, 1, 3, 3]);
        let y = b
            .node(OpKind::Resize, &[x, roi, scales, sizes], &[])
            .unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        assert!(lowered(&g).is_ok());
        // The same node with sizes computed at run time (no data): declined as such,
        // before the shape rule, which cannot size the output without them.
        g.tensors[sizes].data = None;
        let e = lowered(&g).unwrap_err();
        assert_eq!(e.reason, DeclineReason::NotConstant);
        assert!(e.message.contains("sizes 'sizes'"), "{}", e.message);
    }

    #[test]
    fn conv_transpose_same_padding_splits_the_total_as_onnx_does() {
        for (pad, begin) in [("SAME_UPPER", 0), ("SAME_LOWER", 1)] {
            let mut b = GraphBuilder::new("g");
            let x = b.input_fixed("x", DType::F32, &[1, 2, 3, 3]);
            let w = b.constant_f32("w", &[2, 3, 3, 3], &[0.5; 54]);
            let attrs = [
                ("strides", Attr::Ints(vec![2, 2])),
                ("auto_pad", Attr::Str(pad.into())),
            ];
            let y = b.node(OpKind::ConvTranspose, &[x, w], &attrs).unwrap();
            b.output(y);
            let g = b.finish().unwrap();
            let d = lowered(&g).unwrap();
            let p = &d[0].params;
            assert_eq!(d[0].kernel, "conv_transpose");
            // Out 3 * 2 = 6 of a full (3 - 1) * 2 + (3 - 1) + 1 = 7: 1 padded in all.
            assert_eq!(p[..4], [108, 2, 3, 1]);
            assert_eq!(p[7..10], [1, 6, 6]);
            assert_eq!(p[19..22], [0, begin, begin]);
            assert_eq!(p[22], 0);
        }
    }
}
