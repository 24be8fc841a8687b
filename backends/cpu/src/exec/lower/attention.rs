//! Lowering of the transformer ops: Attention and RotaryEmbedding (`crate::ops::attention`),
//! and LinearAttention (`crate::ops::linear_attention`).

use baton_delegate_api::ir::Attr;
use baton_delegate_api::shape::{AttentionGeometry, LinearAttentionGeometry, RotaryGeometry};

use super::*;
use crate::ops::attention::{AttentionOp, AttnDims, MaskSpec, QkOut, RotaryOp};
use crate::ops::linear_attention::LinearAttentionOp;

impl Builder<'_> {
    /// The operands' dtypes and shapes, for the geometry rules shared with the reference.
    fn typed(&self, node: &Node, shapes: &[Vec<usize>]) -> Vec<(DType, Vec<usize>)> {
        node.inputs
            .iter()
            .zip(shapes)
            .map(|(&t, s)| (self.graph.tensors[t].dtype, s.clone()))
            .collect()
    }

    /// An optional input when given (a 0-element operand stands for an omitted one).
    fn given(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
        i: usize,
    ) -> Result<Option<Src>, String> {
        match (node.inputs.get(i), shapes.get(i)) {
            (Some(&t), Some(s)) if s.iter().product::<usize>() > 0 => Ok(Some(self.src(t)?)),
            _ => Ok(None),
        }
    }

    pub(super) fn attention(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let g = AttentionGeometry::new(node, &self.typed(node, shapes))?;
        let scale = match node.attrs.get("scale") {
            Some(Attr::Float(v)) => *v,
            _ => (1.0 / (g.head_size as f64).sqrt()) as f32,
        };
        let softcap = node.attr_float("softcap", 0.0);
        let mode = node.attr_int("qk_matmul_output_mode", 0);
        let q = self.src(node.inputs[0])?;
        let k = self.src(node.inputs[1])?;
        let v = self.src(node.inputs[2])?;
        let mask = match (self.given(node, shapes, 3)?, &g.mask_shape) {
            (Some(src), Some(shape)) => {
                Some(MaskSpec::new(src, g.mask_dtype == Some(DType::Bool), shape))
            }
            _ => None,
        };
        let past = match (self.given(node, shapes, 4)?, self.given(node, shapes, 5)?) {
            (Some(k), Some(v)) if g.past_len > 0 => Some((k, v)),
            _ => None,
        };
        let nonpad = if g.nonpad {
            self.given(node, shapes, 6)?
        } else {
            None
        };
        Ok(Op::Attention(AttentionOp {
            q,
            k,
            v,
            past,
            mask,
            nonpad,
            dims: AttnDims {
                packed: g.packed,
                batch: g.batch,
                q_heads: g.q_heads,
                kv_heads: g.kv_heads,
                q_len: g.q_len,
                kv_len: g.kv_len,
                past_len: g.past_len,
                head: g.head_size,
                v_head: g.v_head_size,
            },
            scale,
            softcap,
            causal: node.attr_int("is_causal", 0) != 0,
            qk: (node.outputs.len() > 3).then(|| QkOut::of(mode, softcap)),
        }))
    }

    pub(super) fn linear_attention(
        &mut self,
        node: &Node,
        shapes: &[Vec<usize>],
    ) -> Result<Op, String> {
        let g = LinearAttentionGeometry::new(node, &self.typed(node, shapes))?;
        let scale = match node.attrs.get("scale") {
            Some(Attr::Float(s)) if *s != 0.0 => f64::from(*s),
            _ => 1.0 / (g.key_size as f64).sqrt(),
        };
        let past = if g.past {
            self.given(node, shapes, 3)?
        } else {
            None
        };
        let decay = match g.decay_per_key {
            Some(per_key) => self.given(node, shapes, 4)?.map(|s| (s, per_key)),
            None => None,
        };
        let beta = match g.beta_heads {
            Some(heads) => self.given(node, shapes, 5)?.map(|s| (s, heads)),
            None => None,
        };
        Ok(Op::LinearAttention(LinearAttentionOp {
            q: self.src(node.inputs[0])?,
            k: self.src(node.inputs[1])?,
            v: self.src(node.inputs[2])?,
            past,
            decay,
            beta,
            rule: g.rule,
            batch: g.batch,
            tokens: g.seq_len,
            q_heads: g.q_heads,
            kv_heads: g.kv_heads,
            dk: g.key_size,
            dv: g.value_size,
            scale,
        }))
    }

    pub(super) fn rotary(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let g = RotaryGeometry::new(node, &self.typed(node, shapes))?;
        let positions = if g.position_ids {
            self.given(node, shapes, 3)?
        } else {
            None
        };
        Ok(Op::Rotary(RotaryOp {
            x: self.src(node.inputs[0])?,
            cos: self.src(node.inputs[1])?,
            sin: self.src(node.inputs[2])?,
            positions,
            packed: g.packed,
            batch: g.batch,
            heads: g.heads,
            seq: g.seq_len,
            head: g.head_size,
            half: g.rotary_dim / 2,
            interleaved: node.attr_int("interleaved", 0) != 0,
            max_position: g.max_position,
        }))
    }
}
