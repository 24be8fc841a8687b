//! LogSoftmax, BatchNormalization and LayerNormalization, evaluated in
//! f64 and rounded once.

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::normalize_axis;
use baton_delegate_api::{TensorMut, TensorRef};

use super::rounding::store_rounded;
use crate::data::{broadcast_offsets, load_f32, store_f32, sum_f64};
use crate::{shape_err, KernelError};

/// LogSoftmax along `axis` (default -1): `x - max - ln(sum(exp(x - max)))` per line,
/// the sum in f64. Subtracting the maximum first keeps large logits finite.
pub(crate) fn log_softmax(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let r = crate::activation::softmax_lines(node, x, |d, sum| d - sum.ln())?;
    store_rounded(out, &r);
    Ok(())
}

/// BatchNormalization: `(x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c]` for
/// the channel `c` (dimension 1) of each element. With `training_mode`, `mean` and `var`
/// are the batch's (over every dimension but 1; the variance as the mean squared
/// deviation, as ONNX's reference computes it) and the outputs 1 and 2, when given, are
/// `running = input * momentum + batch * (1 - momentum)` for the mean and the variance.
pub(crate) fn batch_norm(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let eps = node.attr_float("epsilon", 1e-5) as f64;
    let x = &inputs[0];
    let param =
        |i: usize| -> Vec<f64> { load_f32(&inputs[i]).into_iter().map(f64::from).collect() };
    let (scale, bias, mut mean, mut var) = (param(1), param(2), param(3), param(4));
    // An X of rank 1 has a single channel (ONNX's shape rule).
    let (channels, inner) = match x.shape {
        [_, c, rest @ ..] => (*c, rest.iter().product::<usize>()),
        _ => (1, 1),
    };
    let xv = load_f32(x);
    // Only reached when X has elements, so `inner` and `channels` are not 0.
    let channel = |k: usize| (k / inner) % channels;
    if node.attr_int("training_mode", 0) != 0 {
        let momentum = node.attr_float("momentum", 0.9) as f64;
        let mut sum = vec![0.0f64; channels];
        let mut count = vec![0usize; channels];
        for (k, &v) in xv.iter().enumerate() {
            sum[channel(k)] += v as f64;
            count[channel(k)] += 1;
        }
        let batch_mean: Vec<f64> = sum.iter().zip(&count).map(|(s, &n)| s / n as f64).collect();
        let mut sq = vec![0.0f64; channels];
        for (k, &v) in xv.iter().enumerate() {
            sq[channel(k)] += (v as f64 - batch_mean[channel(k)]).powi(2);
        }
        let batch_var: Vec<f64> = sq.iter().zip(&count).map(|(s, &n)| s / n as f64).collect();
        let running = |input: &[f64], batch: &[f64]| -> Vec<f64> {
            input
                .iter()
                .zip(batch)
                .map(|(i, b)| i * momentum + b * (1.0 - momentum))
                .collect()
        };
        let (running_mean, running_var) = (running(&mean, &batch_mean), running(&var, &batch_var));
        if let Some(out) = outputs.get_mut(1) {
            store_rounded(out, &running_mean);
        }
        if let Some(out) = outputs.get_mut(2) {
            store_rounded(out, &running_var);
        }
        (mean, var) = (batch_mean, batch_var);
    }
    let r: Vec<f64> = xv
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            let c = channel(k);
            (v as f64 - mean[c]) / (var[c] + eps).sqrt() * scale[c] + bias[c]
        })
        .collect();
    store_rounded(&mut outputs[0], &r);
    Ok(())
}

/// LayerNormalization over the dimensions from `axis` (default -1) to the end: for each
/// leading index, `mean` and `var` of the normalized block (var as the mean squared
/// deviation), `inv = 1 / sqrt(var + epsilon)`, `Y = (x - mean) * inv * Scale + B` with
/// Scale and B broadcast to X. Writes as many of `Y`, `Mean`, `InvStdDev` as given.
pub(crate) fn layer_norm(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let axis = normalize_axis(node.attr_int("axis", -1), x.shape.len())
        .map_err(|m| shape_err(node, format!("LayerNormalization: {m}")))?;
    let eps = node.attr_float("epsilon", 1e-5) as f64;
    let n: usize = x.shape[axis..].iter().product();
    let rows: usize = x.shape[..axis].iter().product();
    let v: Vec<f64> = load_f32(x).into_iter().map(f64::from).collect();
    let scale = load_f32(&inputs[1]);
    let is = broadcast_offsets(inputs[1].shape, x.shape);
    // Without B nothing is added (ONNX's function body skips the Add), so -0 stays -0.
    let bias = inputs
        .get(2)
        .map(|b| (load_f32(b), broadcast_offsets(b.shape, x.shape)));
    let mut y = vec![0.0f64; v.len()];
    let mut means = Vec::with_capacity(rows);
    let mut inv_std = Vec::with_capacity(rows);
    for row in 0..rows {
        let block = row * n..(row + 1) * n;
        // An empty block gives 0/0 = NaN statistics (and no Y elements).
        let mean = sum_f64(v[block.clone()].iter().copied()) / n as f64;
        let var = sum_f64(v[block.clone()].iter().map(|&e| (e - mean) * (e - mean))) / n as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for k in block {
            y[k] = (v[k] - mean) * inv * scale[is[k]] as f64;
            if let Some((b, ib)) = &bias {
                y[k] += b[ib[k]] as f64;
            }
        }
        means.push(mean as f32);
        inv_std.push(inv as f32);
    }
    store_rounded(&mut outputs[0], &y);
    if let Some(out) = outputs.get_mut(1) {
        store_f32(out, &means);
    }
    if let Some(out) = outputs.get_mut(2) {
        store_f32(out, &inv_std);
    }
    Ok(())
}
