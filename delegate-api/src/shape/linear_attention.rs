//! The shape rule of LinearAttention (outputs `output` and `present_state`), with the
//! geometry the kernels read: every operand checked against the others once, here.

use super::Outputs;
use crate::ir::{DType, Node, OpKind};

/// The float dtypes the op is defined for (ONNX's three, and f64 as everywhere in Baton).
const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// The outputs of `node` if its op is LinearAttention, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
) -> Option<Result<Outputs, String>> {
    (node.op == OpKind::LinearAttention)
        .then(|| LinearAttentionGeometry::new(node, inputs).map(|g| g.outputs()))
}

/// How a LinearAttention state is updated per token (attribute `update_rule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateRule {
    /// `S += k ⊗ v`.
    Linear,
    /// `S = exp(g) S + k ⊗ v`.
    Gated,
    /// `S += k ⊗ β (v - Sᵀ k)`.
    Delta,
    /// `S' = exp(g) S`, `S = S' + k ⊗ β (v - S'ᵀ k)`.
    GatedDelta,
}

impl UpdateRule {
    /// Whether the state decays by `exp(decay)` before each update.
    pub fn gated(self) -> bool {
        matches!(self, UpdateRule::Gated | UpdateRule::GatedDelta)
    }

    /// Whether the written value is corrected by what the state already holds (`beta`).
    pub fn delta(self) -> bool {
        matches!(self, UpdateRule::Delta | UpdateRule::GatedDelta)
    }
}

/// The extents of one LinearAttention node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearAttentionGeometry {
    /// The dtype of query, key, value, decay and beta, and of `output`.
    pub dtype: DType,
    /// The dtype of `present_state`: past_state's, or query's without one.
    pub state_dtype: DType,
    /// The update rule.
    pub rule: UpdateRule,
    /// Batch size `B`.
    pub batch: usize,
    /// Tokens `T`.
    pub seq_len: usize,
    /// Query heads `Hq`.
    pub q_heads: usize,
    /// Key/value heads `Hkv` (a divisor of `Hq`), one state each.
    pub kv_heads: usize,
    /// Key size `d_k` (query's too).
    pub key_size: usize,
    /// Value size `d_v`.
    pub value_size: usize,
    /// Whether past_state (input 3) is given.
    pub past: bool,
    /// With `decay` given: whether it holds one gate per key dimension (`[B, T, Hkv*d_k]`)
    /// rather than one per head (`[B, T, Hkv]`).
    pub decay_per_key: Option<bool>,
    /// With `beta` given: its last extent, `Hkv` or 1 (shared by the heads).
    pub beta_heads: Option<usize>,
}

/// Whether optional input `i` is given: a 0-element operand stands for an omitted one.
fn present(inputs: &[(DType, Vec<usize>)], i: usize) -> bool {
    inputs
        .get(i)
        .is_some_and(|(_, s)| s.iter().product::<usize>() > 0)
}

impl LinearAttentionGeometry {
    /// Checks the operands of a LinearAttention node (dtypes and shapes in `node.inputs`
    /// order; 0-element operands stand for omitted ones) and its attributes.
    pub fn new(node: &Node, inputs: &[(DType, Vec<usize>)]) -> Result<Self, String> {
        let op = "LinearAttention";
        if inputs.len() < 3 || inputs.len() > 6 {
            return Err(format!("{op} takes 3 to 6 inputs, got {}", inputs.len()));
        }
        let heads = |name: &str| match node.attr_int(name, 0) {
            n if n > 0 => Ok(n as usize),
            n => Err(format!("{op} needs a positive {name}, got {n}")),
        };
        let (q_heads, kv_heads) = (heads("q_num_heads")?, heads("kv_num_heads")?);
        if q_heads % kv_heads != 0 {
            return Err(format!(
                "{op} q_num_heads {q_heads} is not a multiple of kv_num_heads {kv_heads}"
            ));
        }
        let rule = match node.attr_str("update_rule", "gated_delta") {
            "linear" => UpdateRule::Linear,
            "gated" => UpdateRule::Gated,
            "delta" => UpdateRule::Delta,
            "gated_delta" => UpdateRule::GatedDelta,
            other => {
                return Err(format!(
                    "{op} update_rule '{other}' is not one of linear, gated, delta, gated_delta"
                ))
            }
        };
        let (dtype, q) = &inputs[0];
        if !FLOATS.contains(dtype) {
            return Err(format!("{op} of {dtype} is not defined (a float dtype)"));
        }
        let (kd, k) = &inputs[1];
        let (vd, v) = &inputs[2];
        if kd != dtype || vd != dtype {
            return Err(format!(
                "{op} query, key and value must share a dtype, got {dtype}, {kd} and {vd}"
            ));
        }
        let ([b, t, qh], [kb, kt, kh], [vb, vt, vh]) = (&q[..], &k[..], &v[..]) else {
            return Err(format!(
                "{op} query, key and value must be 3-D [B, T, heads * size], got {q:?}, \
                 {k:?} and {v:?}"
            ));
        };
        let (batch, seq_len) = (*b, *t);
        if (*kb, *kt) != (batch, seq_len) || (*vb, *vt) != (batch, seq_len) {
            return Err(format!(
                "{op} query {q:?}, key {k:?} and value {v:?} differ in batch or length"
            ));
        }
        if qh % q_heads != 0 || vh % kv_heads != 0 {
            return Err(format!(
                "{op} query {q:?} and value {v:?} do not split into {q_heads} and {kv_heads} heads"
            ));
        }
        let (key_size, value_size) = (qh / q_heads, vh / kv_heads);
        if *kh != kv_heads * key_size {
            return Err(format!(
                "{op} key {k:?} must hold {kv_heads} heads of the query's size {key_size}"
            ));
        }
        let state_shape = [batch, kv_heads, key_size, value_size];
        let past = present(inputs, 3);
        let state_dtype = if past {
            let (pd, p) = &inputs[3];
            if !FLOATS.contains(pd) || p[..] != state_shape {
                return Err(format!(
                    "{op} past_state must be a float {state_shape:?}, got {pd} {p:?}"
                ));
            }
            *pd
        } else {
            *dtype
        };
        let optional =
            |i: usize, name: &str, wanted: bool| -> Result<Option<&Vec<usize>>, String> {
                match (present(inputs, i), wanted) {
                    (true, true) => {
                        let (d, s) = &inputs[i];
                        if d != dtype {
                            return Err(format!("{op} {name} must be {dtype}, got {d}"));
                        }
                        Ok(Some(s))
                    }
                    (false, false) => Ok(None),
                    (true, false) => Err(format!(
                        "{op} update_rule {rule:?} takes no {name} (input {i})"
                    )),
                    (false, true) => Err(format!(
                        "{op} update_rule {rule:?} needs {name} (input {i})"
                    )),
                }
            };
        let decay_per_key = match optional(4, "decay", rule.gated())? {
            None => None,
            Some(s) if s[..] == [batch, seq_len, kv_heads * key_size] => Some(true),
            Some(s) if s[..] == [batch, seq_len, kv_heads] => Some(false),
            Some(s) => {
                return Err(format!(
                    "{op} decay must be [{batch}, {seq_len}, {}] or [{batch}, {seq_len}, \
                     {kv_heads}], got {s:?}",
                    kv_heads * key_size
                ))
            }
        };
        let beta_heads = match optional(5, "beta", rule.delta())? {
            None => None,
            Some(s)
                if s.len() == 3 && s[..2] == [batch, seq_len] && [kv_heads, 1].contains(&s[2]) =>
            {
                Some(s[2])
            }
            Some(s) => {
                return Err(format!(
                "{op} beta must be [{batch}, {seq_len}, {kv_heads}] or [{batch}, {seq_len}, 1], \
                     got {s:?}"
            ))
            }
        };
        Ok(Self {
            dtype: *dtype,
            state_dtype,
            rule,
            batch,
            seq_len,
            q_heads,
            kv_heads,
            key_size,
            value_size,
            past,
            decay_per_key,
            beta_heads,
        })
    }

    /// `output` `[B, T, Hq*d_v]` and `present_state` `[B, Hkv, d_k, d_v]`.
    pub fn outputs(&self) -> Outputs {
        vec![
            (
                self.dtype,
                vec![self.batch, self.seq_len, self.q_heads * self.value_size],
            ),
            (
                self.state_dtype,
                vec![self.batch, self.kv_heads, self.key_size, self.value_size],
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Attr;
    use DType::{F16, F32};

    fn run(inputs: &[(DType, Vec<usize>)], attrs: &[(&str, Attr)]) -> Result<Outputs, String> {
        let node = Node {
            name: "la".into(),
            op: OpKind::LinearAttention,
            inputs: (0..inputs.len()).collect(),
            outputs: vec![],
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        };
        infer(&node, inputs).expect("LinearAttention has a rule")
    }

    fn heads(q: i64, kv: i64, rule: &str) -> Vec<(&'static str, Attr)> {
        vec![
            ("q_num_heads", Attr::Int(q)),
            ("kv_num_heads", Attr::Int(kv)),
            ("update_rule", Attr::Str(rule.into())),
        ]
    }

    #[test]
    fn outputs_follow_heads_sizes_and_state_dtype() {
        // GQA: 8 query heads of size 4 over 2 key/value heads, d_v 3; B 2, T 5.
        let q = (F32, vec![2, 5, 32]);
        let k = (F32, vec![2, 5, 8]);
        let v = (F32, vec![2, 5, 6]);
        let none = (F32, vec![0]);
        let out = run(&[q.clone(), k.clone(), v.clone()], &heads(8, 2, "linear")).unwrap();
        assert_eq!(out, vec![(F32, vec![2, 5, 24]), (F32, vec![2, 2, 4, 3])]);
        // past_state of another dtype sets present_state's; per-head decay, shared beta.
        let past = (F16, vec![2, 2, 4, 3]);
        let decay = (F32, vec![2, 5, 2]);
        let beta = (F32, vec![2, 5, 1]);
        let all = [q.clone(), k.clone(), v.clone(), past, decay, beta.clone()];
        let out = run(&all, &heads(8, 2, "gated_delta")).unwrap();
        assert_eq!(out[1], (F16, vec![2, 2, 4, 3]));
        // delta without past and decay: both omitted as 0-element operands.
        let delta = [q.clone(), k.clone(), v.clone(), none.clone(), none, beta];
        assert!(run(&delta, &heads(8, 2, "delta")).is_ok());
    }

    #[test]
    fn bad_operands_and_attributes_are_refused() {
        let q = (F32, vec![1, 2, 8]);
        let k = (F32, vec![1, 2, 8]);
        let v = (F32, vec![1, 2, 8]);
        let none = (F32, vec![0]);
        let base = [q.clone(), k.clone(), v.clone()];
        // 3 query heads do not divide into 2 key/value heads.
        assert!(run(&base, &heads(3, 2, "linear")).is_err());
        assert!(run(&base, &heads(2, 2, "sideways")).is_err());
        // gated needs decay; linear forbids it.
        assert!(run(&base, &heads(2, 2, "gated")).is_err());
        let decay = (F32, vec![1, 2, 8]);
        let gated = [q.clone(), k.clone(), v.clone(), none.clone(), decay.clone()];
        assert!(run(&gated, &heads(2, 2, "gated")).is_ok());
        assert!(run(&gated, &heads(2, 2, "linear")).is_err());
        // decay of neither form, beta of a third head count.
        let odd = [
            q.clone(),
            k.clone(),
            v.clone(),
            none.clone(),
            (F32, vec![1, 2, 3]),
        ];
        assert!(run(&odd, &heads(2, 2, "gated")).is_err());
        let beta3 = [
            q.clone(),
            k.clone(),
            v.clone(),
            none.clone(),
            none.clone(),
            (F32, vec![1, 2, 3]),
        ];
        assert!(run(&beta3, &heads(2, 2, "delta")).is_err());
        // past_state of the wrong shape; key heads of a size other than the query's.
        let past = [q.clone(), k, v.clone(), (F32, vec![1, 2, 4, 3])];
        assert!(run(&past, &heads(2, 2, "linear")).is_err());
        let short_key = [q, (F32, vec![1, 2, 6]), v];
        assert!(run(&short_key, &heads(2, 2, "linear")).is_err());
    }
}
