//! BatchNormalization (inference) as a per-channel affine map, `y = x * s[c] + t[c]`,
//! with `s = scale / sqrt(var + epsilon)` and `t = B - mean * s` computed once at compile
//! time (in f64, rounded once to f32) from the constant parameters, so the kernel does
//! one multiply and one add an element.

use baton_delegate_api::ir::{DType, Node, TensorId};
use baton_delegate_api::{Decline, DeclineReason};

use super::{pad6, Activation, Context, Draft, Lowered};

/// The elementwise op code of `x * b[ib] + b[ib + 1]` (elementwise.wgsl).
const AFFINE: u32 = 6;

/// A constant parameter of `node` (input `i`) as f64s: f32 or f16, `channels` long.
fn parameter(cx: &Context<'_>, node: &Node, i: usize, channels: usize) -> Lowered<Vec<f64>> {
    let t = node.inputs[i];
    let decl = &cx.graph.tensors[t];
    let Some(bytes) = cx.consts.bytes(t).filter(|_| decl.is_const()) else {
        return Err(Decline::new(
            DeclineReason::NotConstant,
            format!(
                "{}: parameter '{}' is computed at run time (its scale and shift are \
                 folded at compile time)",
                node.label(),
                decl.name
            ),
        ));
    };
    if !matches!(decl.dtype, DType::F32 | DType::F16) || bytes.len() != channels * decl.dtype.size()
    {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{}: parameter '{}' must be {channels} f32 or f16 values",
                node.label(),
                decl.name
            ),
        ));
    }
    Ok((0..channels)
        .map(|k| baton_delegate_api::dtype::element_f64(decl.dtype, bytes, k))
        .collect())
}

/// The per-channel scale and shift of a BatchNormalization node over `channels`
/// channels, interleaved `[s0, t0, s1, t1, ...]`.
pub fn batch_norm_affine(cx: &Context<'_>, node: &Node, channels: usize) -> Lowered<Vec<f32>> {
    if node.attr_int("training_mode", 0) != 0 {
        return Err(Decline::new(
            DeclineReason::Attribute,
            format!(
                "{}: training_mode = 1 (batch statistics) is not implemented",
                node.label()
            ),
        ));
    }
    if node.inputs.len() != 5 {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{} has {} inputs (5 expected)",
                node.label(),
                node.inputs.len()
            ),
        ));
    }
    let eps = f64::from(node.attr_float("epsilon", 1e-5));
    let scale = parameter(cx, node, 1, channels)?;
    let bias = parameter(cx, node, 2, channels)?;
    let mean = parameter(cx, node, 3, channels)?;
    let var = parameter(cx, node, 4, channels)?;
    let mut st = Vec::with_capacity(2 * channels);
    for c in 0..channels {
        let s = scale[c] / (var[c] + eps).sqrt();
        st.push(s as f32);
        st.push((bias[c] - mean[c] * s) as f32);
    }
    Ok(st)
}

/// BatchNormalization as one element-wise dispatch reading its folded parameters.
pub fn batch_norm(
    cx: &Context<'_>,
    node: &Node,
    act: Activation,
    out: TensorId,
    y: &[usize],
) -> Lowered<Draft> {
    let x = node.inputs[0];
    cx.f32_tensor(x)?;
    // An X of rank 1 has a single channel (ONNX's shape rule); else dimension 1.
    let channels = if y.len() > 1 { y[1] } else { 1 };
    let st = batch_norm_affine(cx, node, channels)?;
    let n: usize = y.iter().product();
    let mut p = vec![n as u32, AFFINE, act.code, act.a.to_bits(), act.b.to_bits()];
    p.extend(pad6(y, 1));
    p.extend(pad6(&super::strides(y), 0));
    // The parameters' index is 2c: stride 2 on the channel dimension, 0 elsewhere.
    let b_strides: Vec<usize> = (0..y.len())
        .map(|d| if d == 1 && y.len() > 1 { 2 } else { 0 })
        .collect();
    p.extend(pad6(&b_strides, 0));
    let mut d = cx.one_dimensional("elementwise", n, [Some(x), None, None, Some(out)], p)?;
    d.made = vec![(1, st.iter().flat_map(|v| v.to_le_bytes()).collect())];
    Ok(d)
}
