//! Squeeze, Unsqueeze, Identity, Split, Slice, Gather, Expand, Tile, Pad, Shape and
//! ConstantOfShape: byte moves by element size, for every dtype. Where the output view's
//! shape already says what a parameter resolved to (Split's parts, Expand's and Tile's
//! targets) the kernel reads it from there rather than resolving it a second time.

use baton_delegate_api::dtype::{push_float, push_int};
use baton_delegate_api::ir::Attr;
use baton_delegate_api::{DType, Node, TensorMut, TensorRef};

use super::super::data::{broadcast_offsets, for_each_index, load, store, strides};
use super::super::{shape_err, KernelError};
use super::{axis_of, ints, move_element, present};

/// Squeeze, Unsqueeze and Identity: the row-major element order is unchanged.
pub(super) fn copy(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    if out.data.len() != x.data.len() {
        return Err(shape_err(node, "output and input sizes differ"));
    }
    out.data.copy_from_slice(x.data);
    Ok(())
}

/// Split along `axis`: output `k` takes the next `outputs[k].shape()[axis]` entries.
pub(super) fn split(
    node: &Node,
    x: &TensorRef<'_>,
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let axis = axis_of(node, node.attr_int("axis", 0), x.shape.len())?;
    let outer: usize = x.shape[..axis].iter().product();
    let inner_bytes = x.shape[axis + 1..].iter().product::<usize>() * x.dtype.size();
    let row = x.shape[axis] * inner_bytes;
    let mut at = 0; // bytes into each row of the input where the next part starts
    for out in outputs.iter_mut() {
        let block = out.shape()[axis] * inner_bytes;
        if at + block > row {
            return Err(shape_err(node, "the parts exceed the split axis"));
        }
        for o in 0..outer {
            let src = o * row + at;
            out.data[o * block..(o + 1) * block].copy_from_slice(&x.data[src..src + block]);
        }
        at += block;
    }
    Ok(())
}

/// Slice: `out[i] = x[start + i * step]` on each sliced axis, `x[i]` on the others.
pub(super) fn slice(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let rank = x.shape.len();
    let missing = |what: &str| shape_err(node, format!("Slice needs {what}"));
    let starts = ints(node, inputs, 1, "starts").ok_or_else(|| missing("starts"))?;
    let ends = ints(node, inputs, 2, "ends").ok_or_else(|| missing("ends"))?;
    let axes = ints(node, inputs, 3, "axes").unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = ints(node, inputs, 4, "steps").unwrap_or_else(|| vec![1; starts.len()]);
    // Per input axis: the first index read and the step (identity on unsliced axes).
    let mut first = vec![0i64; rank];
    let mut step = vec![1i64; rank];
    for k in 0..starts
        .len()
        .min(ends.len())
        .min(axes.len())
        .min(steps.len())
    {
        let a = axis_of(node, axes[k], rank)?;
        let dim = x.shape[a] as i64;
        let start = if starts[k] < 0 {
            starts[k].saturating_add(dim)
        } else {
            starts[k]
        };
        // The end only bounds the count, which the output shape already carries.
        first[a] = match steps[k] {
            s if s > 0 => start.clamp(0, dim),
            _ if dim == 0 => 0,
            _ => start.clamp(0, dim - 1),
        };
        step[a] = steps[k];
    }
    let in_strides = strides(x.shape);
    let size = x.dtype.size();
    let out_shape = out.shape().to_vec();
    let mut k = 0;
    let mut bad = false;
    for_each_index(&out_shape, |idx| {
        let mut src = 0i64;
        for d in 0..rank {
            let i = first[d].saturating_add((idx[d] as i64).saturating_mul(step[d]));
            bad |= i < 0 || i >= x.shape[d] as i64;
            src = src.saturating_add(i.saturating_mul(in_strides[d] as i64));
        }
        if !bad {
            move_element(out.data, k, x.data, src as usize, size);
        }
        k += 1;
    });
    if bad {
        return Err(shape_err(node, "Slice parameters disagree with the output"));
    }
    Ok(())
}

/// Gather along `axis`: `out[a, j, b] = x[a, indices[j], b]`, negative indices counting
/// from the end. Every index is checked before anything is written.
pub(super) fn gather(
    node: &Node,
    x: &TensorRef<'_>,
    indices: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let axis = axis_of(node, node.attr_int("axis", 0), x.shape.len())?;
    let dim = x.shape[axis];
    let raw: Vec<i64> = match indices.dtype {
        DType::I32 => load::<i32>(indices).into_iter().map(i64::from).collect(),
        _ => load::<i64>(indices),
    };
    let mut rows = Vec::with_capacity(raw.len());
    for &i in &raw {
        let r = if i < 0 { i + dim as i64 } else { i };
        if r < 0 || r >= dim as i64 {
            return Err(KernelError::Arithmetic {
                node: node.label(),
                message: format!("Gather index {i} is out of range for extent {dim}"),
            });
        }
        rows.push(r as usize);
    }
    let outer: usize = x.shape[..axis].iter().product();
    let inner_bytes = x.shape[axis + 1..].iter().product::<usize>() * x.dtype.size();
    let mut at = 0;
    for o in 0..outer {
        for &r in &rows {
            let src = (o * dim + r) * inner_bytes;
            out.data[at..at + inner_bytes].copy_from_slice(&x.data[src..src + inner_bytes]);
            at += inner_bytes;
        }
    }
    Ok(())
}

/// Expand: numpy broadcasting of `x` to the output's shape.
pub(super) fn expand(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let size = x.dtype.size();
    let offsets = broadcast_offsets(x.shape, out.shape());
    for (k, &src) in offsets.iter().enumerate() {
        move_element(out.data, k, x.data, src, size);
    }
    Ok(())
}

/// Tile: `out[i] = x[i mod in_shape]` on every axis.
pub(super) fn tile(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let size = x.dtype.size();
    let in_strides = strides(x.shape);
    let out_shape = out.shape().to_vec();
    let mut k = 0;
    for_each_index(&out_shape, |idx| {
        let src: usize = (0..idx.len())
            .map(|d| (idx[d] % x.shape[d]) * in_strides[d])
            .sum();
        move_element(out.data, k, x.data, src, size);
        k += 1;
    });
    Ok(())
}

/// Pad: each output coordinate maps into the cropped input (negative pads crop first),
/// and coordinates outside it take the constant, the edge, the reflection or (`wrap`)
/// the element a whole number of extents away.
pub(super) fn pad(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let rank = x.shape.len();
    let pads = ints(node, inputs, 1, "pads").ok_or_else(|| shape_err(node, "Pad needs pads"))?;
    let axes: Vec<i64> =
        ints(node, inputs, 3, "axes").unwrap_or_else(|| (0..rank as i64).collect());
    if pads.len() != 2 * axes.len() {
        return Err(shape_err(node, "pads do not fit the axes"));
    }
    // Per axis: the first kept input index, the kept extent and the padding before it.
    let mut crop = vec![0usize; rank];
    let mut kept: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    let mut before = vec![0i64; rank];
    for (k, &a) in axes.iter().enumerate() {
        let a = axis_of(node, a, rank)?;
        let (b, e) = (pads[k], pads[k + axes.len()]);
        crop[a] = b.min(0).unsigned_abs() as usize;
        kept[a] += b.min(0) + e.min(0);
        before[a] = b.max(0);
    }
    let mode = node.attr_str("mode", "constant");
    let size = x.dtype.size();
    let value = pad_value(node, inputs, x.dtype);
    let in_strides = strides(x.shape);
    let out_shape = out.shape().to_vec();
    let mut k = 0;
    let mut bad = false;
    for_each_index(&out_shape, |idx| {
        let mut src = Some(0usize);
        for d in 0..rank {
            let n = kept[d];
            let c = idx[d] as i64 - before[d];
            let c = match mode {
                _ if (0..n).contains(&c) => c,
                "edge" if n > 0 => c.clamp(0, n - 1),
                "reflect" if c < 0 => -c,
                "reflect" => 2 * (n - 1) - c,
                "wrap" if n > 0 => c.rem_euclid(n),
                _ => -1,
            };
            if !(0..n).contains(&c) {
                bad |= mode != "constant";
                src = None;
                break;
            }
            src = src.map(|s| s + (crop[d] + c as usize) * in_strides[d]);
        }
        match src {
            Some(s) => move_element(out.data, k, x.data, s, size),
            None => out.data[k * size..(k + 1) * size].copy_from_slice(&value),
        }
        k += 1;
    });
    if bad {
        return Err(shape_err(
            node,
            format!("Pad mode '{mode}' does not fit the pads"),
        ));
    }
    Ok(())
}

/// Pad's constant as the bytes of one element of `dtype`.
fn pad_value(node: &Node, inputs: &[TensorRef<'_>], dtype: DType) -> Vec<u8> {
    if present(inputs, 2) {
        return inputs[2].data[..dtype.size()].to_vec();
    }
    scalar_bytes(dtype, node.attrs.get("value"))
}

/// Shape: the input's extents from `start` to `end` as i64.
pub(super) fn shape(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let r = x.shape.len() as i64;
    let at = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
    let start = at(node.attr_int("start", 0));
    let end = at(node.attr_int("end", r)).max(start);
    let dims: Vec<i64> = x.shape[start..end].iter().map(|&d| d as i64).collect();
    if dims.len() != out.shape().iter().product::<usize>() {
        return Err(shape_err(node, "Shape output does not fit start/end"));
    }
    store(out, &dims);
    Ok(())
}

/// ConstantOfShape: every element is the `value` attribute (default 0).
pub(super) fn constant_of_shape(node: &Node, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let value = scalar_bytes(out.dtype, node.attrs.get("value"));
    for chunk in out.data.chunks_exact_mut(value.len()) {
        chunk.copy_from_slice(&value);
    }
    Ok(())
}

/// One element of `dtype` holding the attribute value `v` (absent: 0). Integer
/// attributes convert exactly where the dtype holds them; everything saturates.
fn scalar_bytes(dtype: DType, v: Option<&Attr>) -> Vec<u8> {
    let (int, float) = match v {
        Some(Attr::Int(i)) => (Some(*i), *i as f64),
        Some(Attr::Float(f)) => (None, *f as f64),
        _ => (Some(0), 0.0),
    };
    let mut bytes = Vec::with_capacity(dtype.size());
    match dtype.int_range() {
        // Float-to-int `as` casts saturate (NaN gives 0); integers clamp to the range.
        Some((lo, hi)) => {
            let wide = int.map_or(float as i128, i128::from).clamp(lo, hi);
            push_int(dtype, wide, &mut bytes);
        }
        None if dtype == DType::Bool => bytes.push(u8::from(float != 0.0)),
        None => push_float(dtype, float, true, &mut bytes),
    }
    bytes
}
