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
/// do no index arithmetic. Each output position accumulates all its output channels at
/// once (taps in order, then input channels), reading `x` with the channels innermost and
/// `w` with the output channels innermost: the multiply-adds are contiguous and
/// independent, and vectorize (summing one output at a time, a chain of dependent f64
/// adds, made this op a trap for any model that fell back to it).
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
    let positions: usize = out_sp.iter().product();
    // x as [n, pixel, c] and w as [group, tap, c in group, m in group], in f64.
    let xv = load_f32(x);
    let mut xt = vec![0f64; xv.len()];
    for n in 0..batch {
        for c in 0..channels {
            for p in 0..in_size {
                xt[(n * in_size + p) * channels + c] = xv[(n * channels + c) * in_size + p] as f64;
            }
        }
    }
    let (cg, mg) = (c_per_group, m_per_group);
    let wv = load_f32(w);
    let mut wt = vec![0f64; wv.len()];
    for g in 0..group {
        for cl in 0..cg {
            for ml in 0..mg {
                for t in 0..taps {
                    let from = ((g * cg + cl) * mg + ml) * taps + t;
                    wt[((g * taps + t) * cg + cl) * mg + ml] = wv[from] as f64;
                }
            }
        }
    }
    let bias = inputs.get(2).map(load_f32);
    let sources = Sources::new(in_sp, out_sp, kernel, &pad_begin, &stride, &dilation);
    let mut r = vec![0f64; expected];
    const LANES: usize = 8;
    let mut acc = vec![0f64; m_all];
    for n in 0..batch {
        for (o, pairs) in sources.iter().enumerate() {
            for g in 0..group {
                // Eight output channels at a time, held in registers across the sum.
                for m0 in (0..mg).step_by(LANES) {
                    let len = LANES.min(mg - m0);
                    let mut a = [0f64; LANES];
                    for &(t, p) in pairs {
                        let xs = &xt[(n * in_size + p) * channels + g * cg..][..cg];
                        let ws = &wt[(g * taps + t) * cg * mg..][..cg * mg];
                        for (cl, &xv) in xs.iter().enumerate() {
                            let row = &ws[cl * mg + m0..][..len];
                            match <&[f64; LANES]>::try_from(row) {
                                Ok(row) => (0..LANES).for_each(|k| a[k] += xv * row[k]),
                                Err(_) => (0..len).for_each(|k| a[k] += xv * row[k]),
                            }
                        }
                    }
                    acc[g * mg + m0..][..len].copy_from_slice(&a[..len]);
                }
            }
            for (m, &a) in acc.iter().enumerate() {
                let b = bias.as_ref().map_or(0.0, |b| b[m] as f64);
                r[(n * m_all + m) * positions + o] = a + b;
            }
        }
    }
    store_f64(out, &r);
    Ok(())
}

/// For each output position (row-major), the `(tap, input position)` pairs that reach it,
/// taps in row-major order: position `o`'s pairs are `pairs[starts[o]..starts[o + 1]]`.
struct Sources {
    starts: Vec<usize>,
    pairs: Vec<(usize, usize)>,
}

impl Sources {
    fn new(
        in_sp: &[usize],
        out_sp: &[usize],
        kernel: &[usize],
        pad_begin: &[i64],
        stride: &[usize],
        dilation: &[usize],
    ) -> Sources {
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
        let mut starts = Vec::with_capacity(out_sp.iter().product::<usize>() + 1);
        let mut pairs = Vec::new();
        let mut pick = vec![0usize; out_sp.len()];
        for_each_index(out_sp, |o| {
            starts.push(pairs.len());
            if (0..o.len()).any(|d| axes[d][o[d]].is_empty()) {
                return;
            }
            // Every combination of one (tap, input index) pair per axis, in row-major order.
            pick.iter_mut().for_each(|k| *k = 0);
            loop {
                let (mut t, mut p) = (0, 0);
                for d in 0..o.len() {
                    let (k, i) = axes[d][o[d]][pick[d]];
                    t += k * k_strides[d];
                    p += i * in_strides[d];
                }
                pairs.push((t, p));
                let Some(d) = (0..o.len())
                    .rev()
                    .find(|&d| pick[d] + 1 < axes[d][o[d]].len())
                else {
                    break;
                };
                pick[d] += 1;
                pick[d + 1..].iter_mut().for_each(|k| *k = 0);
            }
        });
        starts.push(pairs.len());
        Sources { starts, pairs }
    }

    /// The pairs of every output position, in order.
    fn iter(&self) -> impl Iterator<Item = &[(usize, usize)]> {
        self.starts.windows(2).map(|w| &self.pairs[w[0]..w[1]])
    }
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
