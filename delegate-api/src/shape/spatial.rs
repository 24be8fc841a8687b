//! Shape rules of the convolution relatives: CausalConvWithState.

use super::Outputs;
use crate::ir::{DType, Node, OpKind};

/// The outputs of `node` if its op belongs to this family, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    _operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Option<Result<Outputs, String>> {
    let r = match node.op {
        OpKind::CausalConvWithState => causal_conv(node, inputs),
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
