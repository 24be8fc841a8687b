//! Shape rules of the convolution relatives: CausalConvWithState, Col2Im, DeformConv,
//! MaxUnpool, ConvInteger, MatMulInteger and RoiAlign.

use super::Outputs;
use crate::ir::{DType, Node, OpKind};

/// The outputs of `node` if its op belongs to this family, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Option<Result<Outputs, String>> {
    let r = match node.op {
        OpKind::CausalConvWithState => causal_conv(node, inputs),
        OpKind::Col2Im => col2im(node, inputs, operand),
        OpKind::DeformConv => deform_conv(node, inputs),
        OpKind::MaxUnpool => max_unpool(node, inputs, operand),
        OpKind::ConvInteger | OpKind::MatMulInteger => integer_product(node, inputs),
        OpKind::RoiAlign => roi_align(node, inputs),
        _ => return None,
    };
    Some(r)
}

/// Whether optional operand `i` is given: present and not the 1-D 0-element stand-in
/// the importer puts in place of an omitted one.
fn given(inputs: &[(DType, Vec<usize>)], i: usize) -> bool {
    inputs.get(i).is_some_and(|(_, s)| s[..] != [0])
}

/// CausalConvWithState: `input` `[B, C, L]`, `weight` `[C, 1, K]`, optional `bias`
/// `[C]` and `past_state` `[B, C, K-1]` give `output` `[B, C, L]` and `present_state`
/// `[B, C, K-1]`, all of the input's float dtype.
fn causal_conv(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    if inputs.len() < 2 || inputs.len() > 4 {
        return Err(format!(
            "CausalConvWithState takes 2 to 4 inputs (input, weight, bias, past_state), got {}",
            inputs.len()
        ));
    }
    let (dtype, x) = &inputs[0];
    if !dtype.is_float() {
        return Err(format!(
            "CausalConvWithState input must be a float, got {dtype}"
        ));
    }
    if let Some((d, _)) = inputs.iter().find(|(d, _)| d != dtype) {
        return Err(format!(
            "CausalConvWithState operands must share the input's dtype {dtype}, got {d}"
        ));
    }
    let [b, c, l] = x[..] else {
        return Err(format!(
            "CausalConvWithState input must be [B, C, L], got {x:?}"
        ));
    };
    let w = &inputs[1].1;
    if w.len() != 3 || w[0] != c || w[1] != 1 || w[2] == 0 {
        return Err(format!(
            "CausalConvWithState weight must be [{c}, 1, K] with K >= 1, got {w:?}"
        ));
    }
    let k = w[2];
    if given(inputs, 2) && inputs[2].1 != [c] {
        return Err(format!(
            "CausalConvWithState bias must be [{c}], got {:?}",
            inputs[2].1
        ));
    }
    if given(inputs, 3) && inputs[3].1 != [b, c, k - 1] {
        return Err(format!(
            "CausalConvWithState past_state must be [{b}, {c}, {}], got {:?}",
            k - 1,
            inputs[3].1
        ));
    }
    match node.attr_str("activation", "none") {
        "none" | "silu" | "swish" => {}
        a => {
            return Err(format!(
                "CausalConvWithState activation '{a}' is not none, silu or swish"
            ))
        }
    }
    Ok(vec![(*dtype, vec![b, c, l]), (*dtype, vec![b, c, k - 1])])
}

/// Where Col2Im's blocks lie: per spatial axis, the number of block positions, and the
/// strides, dilations and leading padding of the block grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Col2ImGeometry {
    /// Block positions along each spatial axis; their product is the input's last extent.
    pub positions: Vec<usize>,
    /// Step between block positions per axis (attribute `strides`, default 1).
    pub strides: Vec<usize>,
    /// Step between block elements per axis (attribute `dilations`, default 1).
    pub dilations: Vec<usize>,
    /// Padding before each axis (the first half of `pads`).
    pub pad_begin: Vec<usize>,
}

/// The block grid of a Col2Im node whose input is `x` `[N, C * prod(block), L]`, image
/// `image` and block `block`; an error unless `L` is the number of positions the
/// attributes give and the input's channels are a multiple of the block's size.
pub fn col2im_geometry(
    node: &Node,
    x: &[usize],
    image: &[usize],
    block: &[usize],
) -> Result<Col2ImGeometry, String> {
    let r = image.len();
    if r == 0 || block.len() != r {
        return Err(format!(
            "Col2Im image_shape {image:?} and block_shape {block:?} must list the same number (>= 1) of spatial axes"
        ));
    }
    if block.contains(&0) {
        return Err(format!("Col2Im block_shape {block:?} has an empty axis"));
    }
    let [_, cb, l] = x[..] else {
        return Err(format!(
            "Col2Im input must be [N, C * prod(block), L], got {x:?}"
        ));
    };
    let list = |name: &str, len: usize, default: usize| -> Result<Vec<usize>, String> {
        match node.attr_ints(name) {
            Some(v) if v.len() == len && v.iter().all(|&x| x >= i64::from(default == 1)) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(format!("Col2Im {name} {v:?} must be {len} values")),
            None => Ok(vec![default; len]),
        }
    };
    let strides = list("strides", r, 1)?;
    let dilations = list("dilations", r, 1)?;
    let pads = list("pads", 2 * r, 0)?;
    let mut positions = Vec::with_capacity(r);
    for i in 0..r {
        let span = (block[i] - 1)
            .checked_mul(dilations[i])
            .and_then(|s| s.checked_add(1))
            .ok_or("Col2Im dilated block overflows")?;
        let padded = image[i]
            .checked_add(pads[i])
            .and_then(|p| p.checked_add(pads[r + i]))
            .ok_or("Col2Im padded image overflows")?;
        if padded < span {
            return Err(format!(
                "Col2Im block {} (dilated {span}) does not fit the padded image extent {padded} on axis {i}",
                block[i]
            ));
        }
        positions.push((padded - span) / strides[i] + 1);
    }
    let block_len = block
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or("Col2Im block_shape overflows")?;
    if cb % block_len != 0 {
        return Err(format!(
            "Col2Im input channels {cb} are not a multiple of the block's {block_len} elements"
        ));
    }
    let count = positions
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or("Col2Im block positions overflow")?;
    if count != l {
        return Err(format!(
            "Col2Im input has {l} columns; the image, block and attributes give {positions:?} = {count} block positions"
        ));
    }
    Ok(Col2ImGeometry {
        positions,
        strides,
        dilations,
        pad_begin: pads[..r].to_vec(),
    })
}

/// Col2Im: `[N, C, image...]` of the input's dtype; image and block shapes are constant
/// i64 vectors (inputs 1 and 2).
fn col2im(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    let [(dtype, x), (d1, s1), (d2, s2)] = inputs else {
        return Err(format!(
            "Col2Im takes 3 inputs (input, image_shape, block_shape), got {}",
            inputs.len()
        ));
    };
    if *d1 != DType::I64 || *d2 != DType::I64 || s1.len() != 1 || s2.len() != 1 {
        return Err(format!(
            "Col2Im image_shape and block_shape must be 1-D i64, got {d1} {s1:?} and {d2} {s2:?}"
        ));
    }
    let dims = |i: usize, what: &str| -> Result<Vec<usize>, String> {
        let v =
            operand(i).ok_or_else(|| format!("Col2Im {what} (input {i}) must be a constant"))?;
        v.iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| format!("Col2Im {what} {v:?} has a negative value"))
            })
            .collect()
    };
    let image = dims(1, "image_shape")?;
    let block = dims(2, "block_shape")?;
    col2im_geometry(node, x, &image, &block)?;
    let block_len: usize = block.iter().product();
    let mut out = vec![x[0], x[1] / block_len];
    out.extend_from_slice(&image);
    Ok(vec![(*dtype, out)])
}

/// The shape MaxUnpool's attributes give for `x` `[N, C, spatial...]`: per spatial axis
/// `(in - 1) * stride - pad_begin - pad_end + kernel`.
pub fn max_unpool_shape(node: &Node, x: &[usize]) -> Result<Vec<usize>, String> {
    if x.len() < 3 {
        return Err(format!("MaxUnpool needs X [N, C, spatial...], got {x:?}"));
    }
    let r = x.len() - 2;
    let kernel = node
        .attr_ints("kernel_shape")
        .ok_or("MaxUnpool needs the attribute kernel_shape")?;
    let list = |name: &str, len: usize, min: i64, default: i64| -> Result<Vec<i64>, String> {
        match node.attr_ints(name) {
            Some(v) if v.len() == len && v.iter().all(|&x| x >= min) => Ok(v.to_vec()),
            Some(v) => Err(format!(
                "MaxUnpool {name} {v:?} must be {len} values >= {min}"
            )),
            None => Ok(vec![default; len]),
        }
    };
    if kernel.len() != r || kernel.iter().any(|&k| k < 1) {
        return Err(format!(
            "MaxUnpool kernel_shape {kernel:?} must be {r} positive values for X {x:?}"
        ));
    }
    let strides = list("strides", r, 1, 1)?;
    let pads = list("pads", 2 * r, 0, 0)?;
    let mut out = x[..2].to_vec();
    for i in 0..r {
        let len = (x[2 + i] as i64 - 1)
            .checked_mul(strides[i])
            .and_then(|v| v.checked_add(kernel[i]))
            .and_then(|v| v.checked_sub(pads[i] + pads[r + i]))
            .ok_or("MaxUnpool output extent overflows")?;
        if x[2 + i] == 0 || len < 1 {
            return Err(format!(
                "MaxUnpool gives no output on spatial axis {i} for X {x:?}"
            ));
        }
        out.push(len as usize);
    }
    Ok(out)
}

/// MaxUnpool: the shape the attributes give, or the constant `output_shape` (input 2),
/// which may only enlarge the spatial axes (the unpooled values keep their places at the
/// start of each axis, as ONNX's reference and test data have it).
fn max_unpool(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    if inputs.len() < 2 || inputs.len() > 3 {
        return Err(format!(
            "MaxUnpool takes 2 or 3 inputs (X, I, output_shape), got {}",
            inputs.len()
        ));
    }
    let (dtype, x) = &inputs[0];
    if !dtype.is_float() {
        return Err(format!("MaxUnpool X must be a float, got {dtype}"));
    }
    let (di, i) = &inputs[1];
    if *di != DType::I64 || i != x {
        return Err(format!(
            "MaxUnpool indices must be i64 shaped like X {x:?}, got {di} {i:?}"
        ));
    }
    let inferred = max_unpool_shape(node, x)?;
    if !given(inputs, 2) {
        return Ok(vec![(*dtype, inferred)]);
    }
    let (d2, s2) = &inputs[2];
    if *d2 != DType::I64 || s2[..] != [x.len()] {
        return Err(format!(
            "MaxUnpool output_shape must be {} i64 values, got {d2} {s2:?}",
            x.len()
        ));
    }
    let want = operand(2).ok_or("MaxUnpool output_shape (input 2) must be a constant")?;
    let fits = want[..2]
        .iter()
        .zip(&inferred)
        .all(|(&w, &i)| w == i as i64)
        && want[2..]
            .iter()
            .zip(&inferred[2..])
            .all(|(&w, &i)| w >= i as i64);
    if !fits {
        return Err(format!(
            "MaxUnpool output_shape {want:?} must keep N and C and not shrink the unpooled {inferred:?}"
        ));
    }
    Ok(vec![(*dtype, want.iter().map(|&d| d as usize).collect())])
}

/// ConvInteger and MatMulInteger: 8-bit operands and their optional zero points give i32.
/// A zero point is one value, or one per output channel (ConvInteger's `w`), per row
/// (MatMulInteger's `A`, `M` values) or per column (its `B`, `N` values).
fn integer_product(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let op = node.op;
    if inputs.len() < 2 || inputs.len() > 4 {
        return Err(format!(
            "{op} takes 2 to 4 inputs (two operands, then their zero points), got {}",
            inputs.len()
        ));
    }
    let eight_bit = |d: DType| matches!(d, DType::U8 | DType::I8);
    let ((da, a), (db, b)) = (&inputs[0], &inputs[1]);
    if !eight_bit(*da) || !eight_bit(*db) {
        return Err(format!("{op} operands must be u8 or i8, got {da} and {db}"));
    }
    let shape = if op == OpKind::ConvInteger {
        let g = super::ConvGeometry::new(node, a, b)?;
        let mut out = vec![g.batch, g.out_channels];
        out.extend(&g.out_spatial);
        out
    } else {
        super::matmul_shape(a, b)?
    };
    // The extents a per-line zero point may have: M output channels for ConvInteger's
    // w; A's rows and B's columns for MatMulInteger.
    let rows = if a.len() >= 2 { a[a.len() - 2] } else { 1 };
    let lines = [
        if op == OpKind::ConvInteger { 1 } else { rows },
        if op == OpKind::ConvInteger {
            b[0]
        } else {
            b[b.len() - 1]
        },
    ];
    for (k, operand_dtype, per_line) in [(2, *da, lines[0]), (3, *db, lines[1])] {
        if !given(inputs, k) {
            continue;
        }
        let (d, s) = &inputs[k];
        let n: usize = s.iter().product();
        if *d != operand_dtype || s.len() > 1 || !(n == 1 || n == per_line) {
            return Err(format!(
                "{op} zero point {k} must be {operand_dtype} with one value or {per_line}, got {d} {s:?}"
            ));
        }
    }
    Ok(vec![(DType::I32, shape)])
}

/// DeformConv: `[N, oC, out...]` as [`super::ConvGeometry`] gives it, with `offset`
/// `[N, offset_group * prod(kernel) * r, out...]`, the optional `B` `[oC]` and `mask`
/// `[N, offset_group * prod(kernel), out...]` checked against it.
fn deform_conv(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    if inputs.len() < 3 || inputs.len() > 5 {
        return Err(format!(
            "DeformConv takes 3 to 5 inputs (X, W, offset, B, mask), got {}",
            inputs.len()
        ));
    }
    let (dtype, x) = &inputs[0];
    if !dtype.is_float() {
        return Err(format!("DeformConv X must be a float, got {dtype}"));
    }
    if let Some((d, _)) = inputs.iter().find(|(d, _)| d != dtype) {
        return Err(format!(
            "DeformConv operands must share X's dtype {dtype}, got {d}"
        ));
    }
    let g = super::ConvGeometry::new(node, x, &inputs[1].1)?;
    let r = g.in_spatial.len();
    let groups = node.attr_int("offset_group", 1);
    let groups = usize::try_from(groups)
        .ok()
        .filter(|&o| o >= 1 && g.in_channels % o == 0)
        .ok_or_else(|| {
            format!(
                "DeformConv offset_group {groups} must be >= 1 and divide the {} input channels",
                g.in_channels
            )
        })?;
    let taps: usize = g.window.kernel.iter().product();
    let mut out = vec![g.batch, g.out_channels];
    out.extend(&g.out_spatial);
    let mut want = vec![g.batch, groups * taps * r];
    want.extend(&g.out_spatial);
    if inputs[2].1 != want {
        return Err(format!(
            "DeformConv offset must be {want:?}, got {:?}",
            inputs[2].1
        ));
    }
    if given(inputs, 3) && inputs[3].1 != [g.out_channels] {
        return Err(format!(
            "DeformConv B must be [{}], got {:?}",
            g.out_channels, inputs[3].1
        ));
    }
    want[1] = groups * taps;
    if given(inputs, 4) && inputs[4].1 != want {
        return Err(format!(
            "DeformConv mask must be {want:?}, got {:?}",
            inputs[4].1
        ));
    }
    Ok(vec![(*dtype, out)])
}

/// RoiAlign's attributes, checked: what the shape rule and every kernel read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoiAlignParams {
    /// Output bins per ROI along y and x (`output_height`, `output_width`).
    pub bins: [usize; 2],
    /// Samples per bin along each axis; 0 picks `ceil(roi extent / bins)` per ROI.
    pub sampling_ratio: usize,
    /// The factor from ROI coordinates to `X`'s pixel coordinates.
    pub spatial_scale: f32,
    /// `true` for `half_pixel` (the box shifted by -0.5), `false` for
    /// `output_half_pixel` (no shift, and a box at least 1 x 1).
    pub half_pixel: bool,
    /// `true` for `max`, `false` for `avg`.
    pub max: bool,
}

/// Reads and checks RoiAlign's attributes; the defaults are opset 16's (the importer writes
/// `output_half_pixel` for opset 10, whose only behaviour it was).
pub fn roi_align_params(node: &Node) -> Result<RoiAlignParams, String> {
    let positive = |name: &str| -> Result<usize, String> {
        let v = node.attr_int(name, 1);
        usize::try_from(v)
            .ok()
            .filter(|&v| v >= 1)
            .ok_or_else(|| format!("RoiAlign {name} must be >= 1, got {v}"))
    };
    let bins = [positive("output_height")?, positive("output_width")?];
    let ratio = node.attr_int("sampling_ratio", 0);
    let sampling_ratio = usize::try_from(ratio)
        .map_err(|_| format!("RoiAlign sampling_ratio must be >= 0, got {ratio}"))?;
    let spatial_scale = node.attr_float("spatial_scale", 1.0);
    if !spatial_scale.is_finite() {
        return Err(format!(
            "RoiAlign spatial_scale must be finite, got {spatial_scale}"
        ));
    }
    let half_pixel = match node.attr_str("coordinate_transformation_mode", "half_pixel") {
        "half_pixel" => true,
        "output_half_pixel" => false,
        m => {
            let modes = "half_pixel or output_half_pixel";
            return Err(format!(
                "RoiAlign coordinate_transformation_mode '{m}' is not {modes}"
            ));
        }
    };
    let max = match node.attr_str("mode", "avg") {
        "avg" => false,
        "max" => true,
        m => return Err(format!("RoiAlign mode '{m}' is not avg or max")),
    };
    Ok(RoiAlignParams {
        bins,
        sampling_ratio,
        spatial_scale,
        half_pixel,
        max,
    })
}

/// RoiAlign: `X` `[N, C, H, W]`, `rois` `[R, 4]` of X's float dtype and i64
/// `batch_indices` `[R]` give `[R, C, output_height, output_width]`.
fn roi_align(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Outputs, String> {
    let [(dtype, x), (dr, rois), (di, idx)] = inputs else {
        return Err(format!(
            "RoiAlign takes 3 inputs (X, rois, batch_indices), got {}",
            inputs.len()
        ));
    };
    if !dtype.is_float() || x.len() != 4 {
        return Err(format!(
            "RoiAlign X must be a float [N, C, H, W], got {dtype} {x:?}"
        ));
    }
    if dr != dtype || rois.len() != 2 || rois[1] != 4 {
        return Err(format!(
            "RoiAlign rois must be {dtype} [num_rois, 4], got {dr} {rois:?}"
        ));
    }
    if *di != DType::I64 || idx[..] != [rois[0]] {
        return Err(format!(
            "RoiAlign batch_indices must be i64 [{}], got {di} {idx:?}",
            rois[0]
        ));
    }
    let p = roi_align_params(node)?;
    Ok(vec![(*dtype, vec![rois[0], x[1], p.bins[0], p.bins[1]])])
}
