//! Shape rules of the transformer ops: Attention (outputs `Y`, `present_key`,
//! `present_value`, `qk_matmul_output`) and RotaryEmbedding (its input's shape).
//!
//! Both take 4-D `[batch, heads, sequence, head size]` operands or 3-D
//! `[batch, sequence, heads * head size]` ones split by a head-count attribute, so the
//! geometry both rules agree on is worked out once, in [`AttentionGeometry`], which the
//! kernels read too.

use super::Outputs;
use crate::ir::{DType, Node, OpKind};

/// The float dtypes the two ops are defined for.
const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// The outputs of `node` if its op is Attention or RotaryEmbedding, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
) -> Option<Result<Outputs, String>> {
    match node.op {
        OpKind::Attention => Some(
            AttentionGeometry::new(node, inputs)
                .map(|g| g.outputs())
                .and_then(addressable),
        ),
        OpKind::RotaryEmbedding => Some(RotaryGeometry::new(node, inputs).map(|_| {
            let (dtype, shape) = &inputs[0];
            vec![(*dtype, shape.clone())]
        })),
        _ => None,
    }
}

/// Refuses outputs of more bytes than memory can address (Attention's scores grow with
/// the square of the sequence), so that no caller sizes a buffer by an overflowed product.
fn addressable(outs: Outputs) -> Result<Outputs, String> {
    for (dtype, shape) in &outs {
        let bytes = shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .filter(|&b| b <= isize::MAX as usize);
        if bytes.is_none() {
            return Err(format!("an output of {dtype} {shape:?} is too large"));
        }
    }
    Ok(outs)
}

/// Whether optional input `i` is given: a 0-element operand stands for an omitted one.
fn present(inputs: &[(DType, Vec<usize>)], i: usize) -> bool {
    inputs
        .get(i)
        .is_some_and(|(_, s)| s.iter().product::<usize>() > 0)
}

/// A positive head-count attribute, or `None` when absent or 0.
fn heads_attr(node: &Node, name: &str) -> Result<Option<usize>, String> {
    match node.attr_int(name, 0) {
        0 => Ok(None),
        n if n > 0 => Ok(Some(n as usize)),
        n => Err(format!("{} {name} must be positive, got {n}", node.op)),
    }
}

/// The extents of one Attention node, every operand checked against the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionGeometry {
    /// The operands' float dtype (Q's).
    pub dtype: DType,
    /// Whether Q, K and V are 3-D (`[B, S, H * D]`); `Y` is then 3-D too.
    pub packed: bool,
    /// Batch size `B`.
    pub batch: usize,
    /// Query heads `Hq`.
    pub q_heads: usize,
    /// Key/value heads `Hkv` (a divisor of `Hq`).
    pub kv_heads: usize,
    /// Query sequence length `S`.
    pub q_len: usize,
    /// New keys and values `L` (K's sequence length).
    pub kv_len: usize,
    /// Past keys and values `P` (0 without a past).
    pub past_len: usize,
    /// Q and K head size `D`.
    pub head_size: usize,
    /// V head size `Dv`.
    pub v_head_size: usize,
    /// The mask's shape when a mask is given (bool or of `dtype`: see `mask_dtype`).
    pub mask_shape: Option<Vec<usize>>,
    /// The mask's dtype when a mask is given.
    pub mask_dtype: Option<DType>,
    /// Whether `nonpad_kv_seqlen` (input 6) is given.
    pub nonpad: bool,
}

impl AttentionGeometry {
    /// Checks the operands of an Attention node (dtypes and shapes in `node.inputs` order;
    /// 0-element operands stand for omitted ones) and its head-count attributes.
    pub fn new(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Self, String> {
        let get = |i: usize, what: &str| {
            inputs
                .get(i)
                .ok_or_else(|| format!("Attention needs {what} (input {i})"))
        };
        let (dtype, q) = get(0, "Q")?;
        let (kd, k) = get(1, "K")?;
        let (vd, v) = get(2, "V")?;
        if !FLOATS.contains(dtype) {
            return Err(format!(
                "Attention of {dtype} is not defined (a float dtype)"
            ));
        }
        if kd != dtype || vd != dtype {
            return Err(format!(
                "Attention Q, K and V must share a dtype, got {dtype}, {kd} and {vd}"
            ));
        }
        if q.len() != k.len() || q.len() != v.len() || !(q.len() == 3 || q.len() == 4) {
            return Err(format!(
                "Attention Q, K and V must all be 3-D or all 4-D, got {q:?}, {k:?} and {v:?}"
            ));
        }
        let q_attr = heads_attr(node, "q_num_heads")?;
        let kv_attr = heads_attr(node, "kv_num_heads")?;
        let packed = q.len() == 3;
        let (batch, q_heads, q_len, head_size, kv_heads, kv_len, k_size, v_size);
        if packed {
            let (Some(hq), Some(hkv)) = (q_attr, kv_attr) else {
                return Err("3-D Attention needs q_num_heads and kv_num_heads".into());
            };
            for (what, hidden, h) in [("Q", q[2], hq), ("K", k[2], hkv), ("V", v[2], hkv)] {
                if hidden % h != 0 {
                    return Err(format!(
                        "Attention {what} hidden size {hidden} is not a multiple of {h} heads"
                    ));
                }
            }
            (batch, q_len, q_heads, head_size) = (q[0], q[1], hq, q[2] / hq);
            (kv_heads, kv_len, k_size, v_size) = (hkv, k[1], k[2] / hkv, v[2] / hkv);
            if v[1] != kv_len {
                return Err(format!("Attention K {k:?} and V {v:?} differ in length"));
            }
        } else {
            (batch, q_heads, q_len, head_size) = (q[0], q[1], q[2], q[3]);
            (kv_heads, kv_len, k_size, v_size) = (k[1], k[2], k[3], v[3]);
            if v[1] != kv_heads || v[2] != kv_len {
                return Err(format!("Attention K {k:?} and V {v:?} disagree"));
            }
            for (what, attr, h) in [("q", q_attr, q_heads), ("kv", kv_attr, kv_heads)] {
                if attr.is_some_and(|a| a != h) {
                    return Err(format!(
                        "Attention {what}_num_heads {} disagrees with the operands' {h} heads",
                        attr.unwrap_or_default()
                    ));
                }
            }
        }
        if k[0] != batch || v[0] != batch {
            return Err(format!(
                "Attention Q, K and V differ in batch: {q:?}, {k:?}, {v:?}"
            ));
        }
        if k_size != head_size {
            return Err(format!(
                "Attention Q and K head sizes differ: {head_size} and {k_size}"
            ));
        }
        if kv_heads == 0 || q_heads % kv_heads != 0 {
            return Err(format!(
                "Attention query heads {q_heads} are not a multiple of key/value heads {kv_heads}"
            ));
        }
        let past_len = match (present(inputs, 4), present(inputs, 5)) {
            (false, false) => 0,
            (true, true) => {
                let (pkd, pk) = &inputs[4];
                let (pvd, pv) = &inputs[5];
                let want_k = [batch, kv_heads, pk.get(2).copied().unwrap_or(0), head_size];
                let want_v = [batch, kv_heads, want_k[2], v_size];
                if pkd != dtype || pvd != dtype || pk[..] != want_k || pv[..] != want_v {
                    return Err(format!(
                        "Attention past_key {pkd} {pk:?} and past_value {pvd} {pv:?} must be \
                         {dtype} {want_k:?} and {want_v:?}"
                    ));
                }
                want_k[2]
            }
            _ => return Err("Attention needs both past_key and past_value, or neither".into()),
        };
        let total = past_len + kv_len;
        let (mask_shape, mask_dtype) = if present(inputs, 3) {
            let (md, m) = &inputs[3];
            if *md != DType::Bool && md != dtype {
                return Err(format!(
                    "Attention attn_mask must be bool or {dtype}, got {md}"
                ));
            }
            let target = [batch, q_heads, q_len, total];
            let fits = m.len() <= 4
                && m.iter()
                    .rev()
                    .zip(target.iter().rev())
                    .enumerate()
                    .all(|(i, (&e, &t))| {
                        // The key axis may be short (padded with masked keys), not broadcast.
                        if i == 0 {
                            e <= t
                        } else {
                            e == t || e == 1
                        }
                    });
            if !fits {
                return Err(format!(
                    "Attention attn_mask {m:?} does not broadcast to {target:?}"
                ));
            }
            (Some(m.clone()), Some(*md))
        } else {
            (None, None)
        };
        let nonpad = present(inputs, 6);
        if nonpad {
            let (nd, n) = &inputs[6];
            if *nd != DType::I64 || n[..] != [batch] {
                return Err(format!(
                    "Attention nonpad_kv_seqlen must be i64 [{batch}], got {nd} {n:?}"
                ));
            }
        }
        Ok(Self {
            dtype: *dtype,
            packed,
            batch,
            q_heads,
            kv_heads,
            q_len,
            kv_len,
            past_len,
            head_size,
            v_head_size: v_size,
            mask_shape,
            mask_dtype,
            nonpad,
        })
    }

    /// The number of keys each query sees: past and new.
    pub fn total_len(&self) -> usize {
        self.past_len + self.kv_len
    }

    /// `Y`, `present_key`, `present_value`, `qk_matmul_output`.
    pub fn outputs(&self) -> Outputs {
        let (b, t) = (self.batch, self.total_len());
        let y = if self.packed {
            vec![b, self.q_len, self.q_heads * self.v_head_size]
        } else {
            vec![b, self.q_heads, self.q_len, self.v_head_size]
        };
        vec![
            (self.dtype, y),
            (self.dtype, vec![b, self.kv_heads, t, self.head_size]),
            (self.dtype, vec![b, self.kv_heads, t, self.v_head_size]),
            (self.dtype, vec![b, self.q_heads, self.q_len, t]),
        ]
    }
}

/// The extents of one RotaryEmbedding node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotaryGeometry {
    /// Whether X is 3-D (`[B, S, H * D]`) rather than `[B, H, S, D]`.
    pub packed: bool,
    /// Batch size `B`.
    pub batch: usize,
    /// Heads `H`.
    pub heads: usize,
    /// Sequence length `S`.
    pub seq_len: usize,
    /// Head size `D`.
    pub head_size: usize,
    /// The rotated prefix `R` of each head (even, at most `D`).
    pub rotary_dim: usize,
    /// Whether `position_ids` (input 3) index the caches.
    pub position_ids: bool,
    /// The caches' first extent when `position_ids` index them.
    pub max_position: usize,
}

impl RotaryGeometry {
    /// Checks the operands of a RotaryEmbedding node and its attributes.
    pub fn new(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Self, String> {
        let get = |i: usize, what: &str| {
            inputs
                .get(i)
                .ok_or_else(|| format!("RotaryEmbedding needs {what} (input {i})"))
        };
        let (dtype, x) = get(0, "X")?;
        let (cd, cos) = get(1, "cos_cache")?;
        let (sd, sin) = get(2, "sin_cache")?;
        if !FLOATS.contains(dtype) {
            return Err(format!(
                "RotaryEmbedding of {dtype} is not defined (a float dtype)"
            ));
        }
        if cd != dtype || sd != dtype {
            return Err(format!(
                "RotaryEmbedding caches must be {dtype}, got {cd} and {sd}"
            ));
        }
        let heads_attr = heads_attr(node, "num_heads")?;
        let (packed, batch, heads, seq_len, head_size) = match x[..] {
            [b, h, s, d] => {
                if heads_attr.is_some_and(|a| a != h) {
                    return Err(format!("RotaryEmbedding num_heads disagrees with X {x:?}"));
                }
                (false, b, h, s, d)
            }
            [b, s, hidden] => {
                let h = heads_attr.ok_or("3-D RotaryEmbedding needs num_heads")?;
                if hidden % h != 0 {
                    return Err(format!(
                        "RotaryEmbedding hidden size {hidden} is not a multiple of {h} heads"
                    ));
                }
                (true, b, h, s, hidden / h)
            }
            _ => return Err(format!("RotaryEmbedding X must be 3-D or 4-D, got {x:?}")),
        };
        let rotary_dim = match node.attr_int("rotary_embedding_dim", 0) {
            0 => head_size,
            r if r > 0 && r as usize <= head_size && r % 2 == 0 => r as usize,
            r => {
                return Err(format!(
                    "RotaryEmbedding rotary_embedding_dim {r} must be even and at most the \
                     head size {head_size}"
                ))
            }
        };
        if rotary_dim % 2 != 0 {
            return Err(format!(
                "RotaryEmbedding rotates pairs: head size {head_size} is odd"
            ));
        }
        let half = rotary_dim / 2;
        let position_ids = present(inputs, 3);
        let max_position = if position_ids {
            let (pd, p) = &inputs[3];
            if *pd != DType::I64 || p[..] != [batch, seq_len] {
                return Err(format!(
                    "RotaryEmbedding position_ids must be i64 [{batch}, {seq_len}], got {pd} {p:?}"
                ));
            }
            if cos.len() != 2 || cos[1] != half {
                return Err(format!(
                    "RotaryEmbedding cos_cache must be [max_position, {half}], got {cos:?}"
                ));
            }
            cos[0]
        } else {
            if cos[..] != [batch, seq_len, half] {
                return Err(format!(
                    "RotaryEmbedding without position_ids needs cos_cache [{batch}, {seq_len}, \
                     {half}], got {cos:?}"
                ));
            }
            0
        };
        if sin != cos {
            return Err(format!(
                "RotaryEmbedding sin_cache {sin:?} differs from cos_cache {cos:?}"
            ));
        }
        Ok(Self {
            packed,
            batch,
            heads,
            seq_len,
            head_size,
            rotary_dim,
            position_ids,
            max_position,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Attr;
    use DType::{Bool, F16, F32, I64};

    fn run(
        op: OpKind,
        inputs: &[(DType, Vec<usize>)],
        attrs: &[(&str, Attr)],
    ) -> Result<Outputs, String> {
        let node = Node {
            name: "n".into(),
            op,
            inputs: (0..inputs.len()).collect(),
            outputs: vec![inputs.len()],
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        };
        infer(&node, inputs).unwrap()
    }

    #[test]
    fn attention_outputs_4d_3d_gqa_and_past() {
        // 4-D: Y [B, Hq, S, Dv], present [B, Hkv, T, D|Dv], scores [B, Hq, S, T].
        let q = (F32, vec![2, 6, 3, 8]);
        let k = (F32, vec![2, 2, 5, 8]);
        let v = (F32, vec![2, 2, 5, 4]);
        let out = run(OpKind::Attention, &[q.clone(), k.clone(), v.clone()], &[]).unwrap();
        assert_eq!(
            out,
            vec![
                (F32, vec![2, 6, 3, 4]),
                (F32, vec![2, 2, 5, 8]),
                (F32, vec![2, 2, 5, 4]),
                (F32, vec![2, 6, 3, 5]),
            ]
        );
        // A past of 7 keys lengthens T to 12; an omitted mask is a 0-element operand.
        let past = [
            q,
            k,
            v,
            (F32, vec![0]),
            (F32, vec![2, 2, 7, 8]),
            (F32, vec![2, 2, 7, 4]),
        ];
        let out = run(OpKind::Attention, &past, &[]).unwrap();
        assert_eq!(out[1].1, vec![2, 2, 12, 8]);
        assert_eq!(out[3].1, vec![2, 6, 3, 12]);
        // 3-D operands are split by the head counts; Y is merged back.
        let heads = [
            ("q_num_heads", Attr::Int(4)),
            ("kv_num_heads", Attr::Int(2)),
        ];
        let packed = [
            (F16, vec![1, 3, 16]),
            (F16, vec![1, 5, 8]),
            (F16, vec![1, 5, 6]),
        ];
        let out = run(OpKind::Attention, &packed, &heads).unwrap();
        assert_eq!(out[0], (F16, vec![1, 3, 12]));
        assert_eq!(out[2], (F16, vec![1, 2, 5, 3]));
        assert!(run(OpKind::Attention, &packed, &heads[..1]).is_err());
    }

    #[test]
    fn attention_refuses_operands_that_do_not_fit() {
        let qkv = [
            (F32, vec![1, 3, 2, 4]),
            (F32, vec![1, 2, 5, 4]),
            (F32, vec![1, 2, 5, 4]),
        ];
        // Three query heads do not group over two key/value heads.
        assert!(run(OpKind::Attention, &qkv, &[]).is_err());
        let qkv = [
            (F32, vec![1, 4, 2, 4]),
            (F32, vec![1, 2, 5, 4]),
            (F32, vec![1, 2, 5, 4]),
        ];
        let with = |mask: (DType, Vec<usize>)| {
            let mut v = qkv.to_vec();
            v.push(mask);
            run(OpKind::Attention, &v, &[])
        };
        // Masks broadcast from the right; the key axis may be short, not long.
        assert!(with((Bool, vec![2, 5])).is_ok());
        assert!(with((F32, vec![1, 4, 1, 3])).is_ok());
        assert!(with((F32, vec![2, 6])).is_err());
        assert!(with((F32, vec![3, 5])).is_err());
        assert!(with((I64, vec![2, 5])).is_err());
        // Scores of 2^31 queries by 2^31 keys in 2^31 heads cannot be addressed.
        let n = 1usize << 31;
        let huge = [
            (F32, vec![1, n, n, 1]),
            (F32, vec![1, 1, n, 1]),
            (F32, vec![1, 1, n, 1]),
        ];
        assert!(run(OpKind::Attention, &huge, &[])
            .unwrap_err()
            .contains("too large"));
        // Q and K must share a head size.
        let bad = [
            (F32, vec![1, 2, 2, 4]),
            (F32, vec![1, 2, 5, 3]),
            (F32, vec![1, 2, 5, 4]),
        ];
        assert!(run(OpKind::Attention, &bad, &[]).is_err());
    }

    #[test]
    fn rotary_embedding_shapes() {
        let x = (F32, vec![2, 3, 4, 8]);
        let cache = (F32, vec![16, 4]);
        let ids = (I64, vec![2, 4]);
        let out = run(
            OpKind::RotaryEmbedding,
            &[x.clone(), cache.clone(), cache.clone(), ids.clone()],
            &[],
        );
        assert_eq!(out.unwrap(), vec![x.clone()]);
        // Without position ids the caches are [B, S, R/2].
        let direct = (F32, vec![2, 4, 4]);
        assert!(run(
            OpKind::RotaryEmbedding,
            &[x.clone(), direct.clone(), direct],
            &[]
        )
        .is_ok());
        // A rotary dim of 4 needs caches of 2 columns.
        let rot = [("rotary_embedding_dim", Attr::Int(4))];
        assert!(run(
            OpKind::RotaryEmbedding,
            &[x.clone(), cache.clone(), cache.clone(), ids.clone()],
            &rot
        )
        .is_err());
        let small = (F32, vec![16, 2]);
        assert!(run(
            OpKind::RotaryEmbedding,
            &[x.clone(), small.clone(), small, ids.clone()],
            &rot
        )
        .is_ok());
        // An odd rotary dim cannot be split into pairs; 3-D X needs num_heads.
        let odd = [("rotary_embedding_dim", Attr::Int(3))];
        assert!(run(
            OpKind::RotaryEmbedding,
            &[x, cache.clone(), cache.clone(), ids.clone()],
            &odd
        )
        .is_err());
        let x3 = (F32, vec![2, 4, 24]);
        assert!(run(
            OpKind::RotaryEmbedding,
            &[x3.clone(), cache.clone(), cache.clone(), ids.clone()],
            &[]
        )
        .is_err());
        let heads = [("num_heads", Attr::Int(3))];
        assert!(run(
            OpKind::RotaryEmbedding,
            &[x3, cache.clone(), cache, ids],
            &heads
        )
        .is_ok());
    }
}
