//! CausalConvWithState: a depthwise 1-D convolution over the past state followed by the
//! input, which also hands back the last `K - 1` positions as the next state.

use baton_delegate_api::{dtype, DType, Node, TensorMut, TensorRef};

use super::given;
use crate::{data, KernelError};

pub(super) fn causal_conv(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let silu = match node.attr_str("activation", "none") {
        "none" => false,
        "silu" | "swish" => true,
        a => {
            return Err(crate::unsupported(
                node,
                format!("activation '{a}' is not none, silu or swish"),
            ))
        }
    };
    let x = &inputs[0];
    let (batch, channels, len) = (x.shape[0], x.shape[1], x.shape[2]);
    let k = inputs[1].shape[2];
    let xs = data::load_f64(x);
    let ws = data::load_f64(&inputs[1]);
    let bias = given(inputs, 2).then(|| data::load_f64(&inputs[2]));
    let past = given(inputs, 3).then(|| data::load_f64(&inputs[3]));
    // The padded sequence of one (batch, channel) line: K - 1 past positions, then L.
    let padded_len = len + k - 1;
    let mut y = Vec::with_capacity(batch * channels * len);
    let mut state = Vec::with_capacity(batch * channels * (k - 1));
    let mut line = vec![0.0; padded_len];
    for b in 0..batch {
        for c in 0..channels {
            let at = b * channels + c;
            match &past {
                Some(p) => line[..k - 1].copy_from_slice(&p[at * (k - 1)..][..k - 1]),
                None => line[..k - 1].fill(0.0),
            }
            line[k - 1..].copy_from_slice(&xs[at * len..][..len]);
            let w = &ws[c * k..][..k];
            for t in 0..len {
                let mut acc = data::sum_f64((0..k).map(|j| line[t + j] * w[j]));
                if let Some(bias) = &bias {
                    acc += bias[c];
                }
                if silu {
                    let v = round_to(x.dtype, acc);
                    acc = v / (1.0 + (-v).exp());
                }
                y.push(acc);
            }
            state.extend_from_slice(&line[padded_len - (k - 1)..]);
        }
    }
    data::store_floats(&mut outputs[0], &y, false);
    if let Some(out) = outputs.get_mut(1) {
        data::store_floats(out, &state, false);
    }
    Ok(())
}

/// `v` rounded to the precision of the float dtype `d`.
fn round_to(d: DType, v: f64) -> f64 {
    let mut bytes = Vec::with_capacity(d.size());
    dtype::push_float(d, v, false, &mut bytes);
    dtype::element_f64(d, &bytes, 0)
}
