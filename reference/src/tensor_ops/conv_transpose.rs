//! ConvTranspose (any number of spatial axes; groups, strides, dilations, pads,
//! output_padding, output_shape, auto_pad, optional bias).

use baton_delegate_api::{Node, TensorMut, TensorRef};

use super::super::data::{for_each_index, load_f32, store_f64, strides};
use super::super::{shape_err, KernelError};

/// Transposed convolution, written as a gather so every output is one f64 sum:
///
/// `y[n, m, o] = bias[m] + sum over taps t, c in m's group of
/// x[n, c, i] * w[c, m - group_start, t]`, over the input positions `i` with
/// `i * stride + t * dilation - pad_begin == o`: `o + pad_begin - t * dilation` must be
/// non-negative, a multiple of the stride and inside the input.
///
/// Which input position each tap carries to each output position is worked out once per
/// axis (`axis_sources`) and combined into one list per output position, so the sums
/// do no index arithmetic; they run over the group's channels, contiguous in a copy of
/// `x` with the channels innermost (and of `w` likewise), in four running partial sums
/// (a single chain of dependent f64 adds made this op a trap for any model that fell
/// back to it).
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
    let expected = batch * m_all * out_sp.iter().product::<usize>();
    if out.data.len() / out.dtype.size().max(1) != expected
        || w.shape[0] != channels
        || w.shape[1] != m_per_group
    {
        return Err(shape_err(
            node,
            "ConvTranspose output does not fit its operands",
        ));
    }

    let in_size: usize = in_sp.iter().product();
    let taps: usize = kernel.iter().product();
    // x as [n, pixel, c] and w as [m, tap, c in group], in f64.
    let xv = load_f32(x);
    let mut xt = vec![0f64; xv.len()];
    for n in 0..batch {
        for c in 0..channels {
            for p in 0..in_size {
                xt[(n * in_size + p) * channels + c] = xv[(n * channels + c) * in_size + p] as f64;
            }
        }
    }
    let wv = load_f32(w);
    let mut wt = vec![0f64; m_all * taps * c_per_group];
    for m in 0..m_all {
        let g = m / m_per_group.max(1);
        for t in 0..taps {
            for cl in 0..c_per_group {
                let c = g * c_per_group + cl;
                let from = (c * m_per_group + m - g * m_per_group) * taps + t;
                wt[(m * taps + t) * c_per_group + cl] = wv[from] as f64;
            }
        }
    }
    let bias = inputs.get(2).map(load_f32);
    let sources = position_sources(in_sp, out_sp, kernel, &pad_begin, &stride, &dilation);
    let mut r = Vec::with_capacity(expected);
    for n in 0..batch {
        for m in 0..m_all {
            let g = m / m_per_group.max(1);
            let c0 = g * c_per_group;
            for pairs in &sources {
                let mut acc = 0.0f64;
                for &(t, p) in pairs {
                    let xs = &xt[(n * in_size + p) * channels + c0..][..c_per_group];
                    let ws = &wt[(m * taps + t) * c_per_group..][..c_per_group];
                    acc += dot(xs, ws);
                }
                if let Some(b) = &bias {
                    acc += b[m] as f64;
                }
                r.push(acc);
            }
        }
    }
    store_f64(out, &r);
    Ok(())
}

/// `sum a[i] * b[i]` in f64, in four interleaved partial sums.
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            lanes[k] += x[k] * y[k];
        }
    }
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + tail
}

/// For each output position (row-major), the `(tap, input position)` pairs that reach it,
/// taps in row-major order.
fn position_sources(
    in_sp: &[usize],
    out_sp: &[usize],
    kernel: &[usize],
    pad_begin: &[i64],
    stride: &[usize],
    dilation: &[usize],
) -> Vec<Vec<(usize, usize)>> {
    let axes: Vec<Vec<Vec<(usize, usize)>>> = (0..out_sp.len())
        .map(|d| {
            axis_sources(
                in_sp[d],
                out_sp[d],
                kernel[d],
                pad_begin[d],
                stride[d],
                dilation[d],
            )
        })
        .collect();
    let in_strides = strides(in_sp);
    let k_strides = strides(kernel);
    let mut all = Vec::with_capacity(out_sp.iter().product());
    for_each_index(out_sp, |o| {
        // The cartesian product of each axis's (tap, input index) pairs.
        let mut pairs = vec![(0usize, 0usize)];
        for (d, &od) in o.iter().enumerate() {
            let here = &axes[d][od];
            let (ks, is) = (k_strides[d], in_strides[d]);
            pairs = pairs
                .iter()
                .flat_map(|&(t, p)| here.iter().map(move |&(k, i)| (t + k * ks, p + i * is)))
                .collect();
        }
        all.push(pairs);
    });
    all
}

/// For one axis, per output index `o`: the `(tap, input index)` pairs with
/// `i * stride + tap * dilation - pad_begin == o`, taps ascending. Overflowing i64 means
/// an index far outside the input, so it is no pair.
fn axis_sources(
    len_in: usize,
    len_out: usize,
    kernel: usize,
    pad_begin: i64,
    stride: usize,
    dilation: usize,
) -> Vec<Vec<(usize, usize)>> {
    let source = |o: usize, k: usize| -> Option<usize> {
        let reach = i64::try_from(k)
            .ok()?
            .checked_mul(i64::try_from(dilation).ok()?)?;
        let v = i64::try_from(o)
            .ok()?
            .checked_add(pad_begin)?
            .checked_sub(reach)?;
        let s = i64::try_from(stride).ok()?;
        (v >= 0 && v % s == 0 && v / s < len_in as i64).then(|| (v / s) as usize)
    };
    (0..len_out)
        .map(|o| {
            (0..kernel)
                .filter_map(|k| source(o, k).map(|i| (k, i)))
                .collect()
        })
        .collect()
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
