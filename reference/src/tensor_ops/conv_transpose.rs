//! ConvTranspose (any number of spatial axes; groups, strides, dilations, pads,
//! output_padding, output_shape, auto_pad, optional bias).

use baton_delegate_api::{Node, TensorMut, TensorRef};

use super::super::data::{all_indices, load_f32, store_f64, strides};
use super::super::{shape_err, KernelError};

/// Transposed convolution, written as a gather so every output is one f64 sum:
///
/// `y[n, m, o] = bias[m] + sum over c in m's group, taps t of
/// x[n, c, i] * w[c, m - group_start, t]`, over the input positions `i` with
/// `i * stride + t * dilation - pad_begin == o`: `o + pad_begin - t * dilation` must be
/// non-negative, a multiple of the stride and inside the input.
pub(super) fn conv_transpose(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let sp = x.shape.len() - 2;
    let (batch, channels) = (x.shape[0], x.shape[1]);
    let out_shape = out.shape().to_vec();
    let m_all = out_shape[1];
    let group = node.attr_int("group", 1).max(1) as usize;
    let (c_per_group, m_per_group) = (channels / group, m_all / group);
    let in_sp = &x.shape[2..];
    let out_sp = &out_shape[2..];
    let kernel = &w.shape[2..];
    let list = |name: &str, default: usize| -> Vec<usize> {
        match node.attr_ints(name) {
            // Strides and dilations of 0 never pass the shape rule; keep them away anyway.
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
    let pad_begin = pad_begin(node, in_sp, out_sp, kernel, &stride, &dilation, &out_pad);

    let xv = load_f32(x);
    let wv = load_f32(w);
    let bias = inputs.get(2).map(load_f32);
    let in_sp_strides = strides(in_sp);
    let in_sp_size: usize = in_sp.iter().product();
    let taps = all_indices(kernel);
    let positions = all_indices(out_sp);
    let mut r = Vec::with_capacity(batch * m_all * positions.len());
    for n in 0..batch {
        for m in 0..m_all {
            let g = m / m_per_group.max(1);
            for o in &positions {
                let mut acc = 0.0f64;
                for c in g * c_per_group..(g + 1) * c_per_group {
                    let x_plane = &xv[(n * channels + c) * in_sp_size..];
                    let w_taps = &wv[(c * m_per_group + m - g * m_per_group) * taps.len()..];
                    for (t_flat, t) in taps.iter().enumerate() {
                        if let Some(offset) =
                            source(o, t, &pad_begin, &stride, &dilation, in_sp, &in_sp_strides)
                        {
                            acc += x_plane[offset] as f64 * w_taps[t_flat] as f64;
                        }
                    }
                }
                if let Some(b) = &bias {
                    acc += b[m] as f64;
                }
                r.push(acc);
            }
        }
    }
    if r.len() != out_shape.iter().product::<usize>() {
        return Err(shape_err(
            node,
            "ConvTranspose output does not fit its operands",
        ));
    }
    store_f64(out, &r);
    Ok(())
}

/// The flat offset in an input plane that tap `t` carries to output position `o`, if any.
fn source(
    o: &[usize],
    t: &[usize],
    pad_begin: &[i64],
    stride: &[usize],
    dilation: &[usize],
    in_sp: &[usize],
    in_sp_strides: &[usize],
) -> Option<usize> {
    let mut offset = 0;
    for d in 0..o.len() {
        // i128: attribute values may be anything that still gives a valid output shape.
        let v = o[d] as i128 + pad_begin[d] as i128 - t[d] as i128 * dilation[d] as i128;
        let s = stride[d] as i128;
        if v < 0 || v % s != 0 || v / s >= in_sp[d] as i128 {
            return None;
        }
        offset += (v / s) as usize * in_sp_strides[d];
    }
    Some(offset)
}

/// The padding before each spatial axis. With `output_shape` or `SAME_*` auto-padding
/// it comes from the total `max(0, full - out)`, where `full` is the unpadded extent;
/// `SAME_UPPER` puts the smaller half first, the others the larger (ONNX's formula).
fn pad_begin(
    node: &Node,
    in_sp: &[usize],
    out_sp: &[usize],
    kernel: &[usize],
    stride: &[usize],
    dilation: &[usize],
    out_pad: &[usize],
) -> Vec<i64> {
    let auto_pad = node.attr_str("auto_pad", "NOTSET");
    let derived = node.attrs.contains_key("output_shape") || auto_pad.starts_with("SAME");
    (0..in_sp.len())
        .map(|i| {
            if derived {
                let full = (in_sp[i] as i128 - 1) * stride[i] as i128
                    + out_pad[i] as i128
                    + (kernel[i] as i128 - 1) * dilation[i] as i128
                    + 1;
                let total = (full - out_sp[i] as i128).max(0);
                let begin = match auto_pad {
                    "SAME_UPPER" => total / 2,
                    _ => total - total / 2,
                };
                begin.min(i64::MAX as i128) as i64
            } else if auto_pad == "VALID" {
                0
            } else {
                node.attr_ints("pads")
                    .and_then(|p| p.get(i).copied())
                    .unwrap_or(0)
            }
        })
        .collect()
}
