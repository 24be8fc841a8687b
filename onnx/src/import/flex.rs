//! FlexAttention (`ai.onnx.preview`, opset 26+ of the default domain), composed of IR ops
//! as ONNX's function body defines it:
//!
//! 1. grouped-query heads: `K` and `V` `[B, Hkv, S, *]` repeated to `[B, Hq, S, *]`
//!    (each key/value head serves `Hq / Hkv` consecutive query heads), by a Reshape to
//!    `[B, Hkv, 1, S, *]`, an Expand and a Reshape back;
//! 2. `scores = (Q √scale) (K √scale)ᵀ` in the operands' dtype (`scale` default
//!    `1 / sqrt(head size)`, its square root taken in f32), cast to the softmax precision
//!    (`softmax_precision`, an ONNX type code; default f64 for f64 operands, else f32);
//! 3. `score_mod`, a Softmax over the keys, then `prob_mod`: each modifier subgraph (one
//!    input, one output) becomes the branches of an If whose condition is the constant
//!    true, so that its outer-scope names and nested subgraphs are captured as for any
//!    If (see `control`), and the host's specialiser inlines it;
//! 4. `Y = probs V` in the softmax precision, cast back to the operands' dtype.
//!
//! The shapes of `Q`, `K` and `V` must be fixed (the head repetition is written with
//! their extents).

use baton_delegate_api::dtype::push_float;
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::super::proto::attribute_proto::AttributeType;
use super::super::proto::{AttributeProto, GraphProto, NodeProto};
use super::super::{baton_dtype, onnx_data_type};
use super::{Importer, OnnxError};

impl Importer<'_> {
    /// Imports a FlexAttention node (see the module docs).
    pub(super) fn flex_attention(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let err = |s: &Self, message: String| s.node_error(name, n, message);
        if let Some(a) = n.attribute.iter().find(|a| {
            !matches!(
                a.name.as_str(),
                "score_mod" | "prob_mod" | "scale" | "softmax_precision"
            )
        }) {
            return Err(err(self, format!("unexpected attribute '{}'", a.name)));
        }
        let attr = |key: &str| n.attribute.iter().find(|a| a.name == key);
        let ([q, k, v], [out]) = (&n.input[..], &n.output[..]) else {
            let message = format!(
                "takes Q, K and V and gives Y; the node has {} inputs and {} outputs",
                n.input.len(),
                n.output.len()
            );
            return Err(err(self, message));
        };
        let dtype = self.dtype_of(q).unwrap_or(DType::F32);
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
            return Err(err(
                self,
                format!("FlexAttention of {dtype} is not defined"),
            ));
        }
        if self.dtype_of(k) != Some(dtype) || self.dtype_of(v) != Some(dtype) {
            return Err(err(self, format!("Q, K and V must all be {dtype}")));
        }
        let shapes = [q, k, v].map(|t| self.static_shape_of(t).filter(|s| s.len() == 4));
        let [Some(qs), Some(ks), Some(vs)] = shapes else {
            let message = "Q, K and V must be 4-D of fixed shapes".to_string();
            return Err(err(self, message));
        };
        let (b, hq, e) = (qs[0], qs[1], qs[3]);
        let hkv = ks[1];
        if ks[0] != b || ks[3] != e || vs[..3] != ks[..3] || hkv == 0 || hq % hkv != 0 {
            let message = format!(
                "Q {qs:?}, K {ks:?} and V {vs:?} disagree (the query heads must be a \
                 multiple of the key/value heads)"
            );
            return Err(err(self, message));
        }
        let precision = match attr("softmax_precision") {
            Some(a) => match i32::try_from(a.i).ok().and_then(baton_dtype) {
                Some(d @ (DType::F32 | DType::F16 | DType::BF16 | DType::F64)) => d,
                _ => {
                    let message = format!("softmax_precision {} is not a float type", a.i);
                    return Err(err(self, message));
                }
            },
            None if dtype == DType::F64 => DType::F64,
            None => DType::F32,
        };
        let scale = match attr("scale") {
            Some(a) => a.f,
            None => 1.0 / (e as f32).sqrt(),
        };
        let mut root = Vec::new();
        push_float(dtype, f64::from(scale.sqrt()), false, &mut root);
        let root = self.named_constant(name, "scale_root", Tensor::from_bytes(dtype, &[], &root));
        let (k, v) = if hq == hkv {
            (k.clone(), v.clone())
        } else {
            let group = hq / hkv;
            (
                self.repeat_heads(name, n, k, &ks, group, "key")?,
                self.repeat_heads(name, n, v, &vs, group, "value")?,
            )
        };
        let none = &[];
        let q_scaled = self.emit(
            name,
            "q_scaled",
            OpKind::Mul,
            &[q.clone(), root.clone()],
            none,
            n,
        )?;
        let k_scaled = self.emit(name, "k_scaled", OpKind::Mul, &[k, root], none, n)?;
        let perm = [("perm", Attr::Ints(vec![0, 1, 3, 2]))];
        let k_t = self.emit(
            name,
            "k_transposed",
            OpKind::Transpose,
            &[k_scaled],
            &perm,
            n,
        )?;
        let scores = self.emit(name, "scores", OpKind::MatMul, &[q_scaled, k_t], none, n)?;
        let scores = self.cast_to(name, n, "scores_cast", scores, dtype, precision)?;
        let scores = match attr("score_mod") {
            Some(a) => self.modifier(name, n, a, &scores)?,
            None => scores,
        };
        let axis = [("axis", Attr::Int(3))];
        let probs = self.emit(name, "probs", OpKind::Softmax, &[scores], &axis, n)?;
        let probs = match attr("prob_mod") {
            Some(a) => self.modifier(name, n, a, &probs)?,
            None => probs,
        };
        let v = self.cast_to(name, n, "v_cast", v, dtype, precision)?;
        if precision == dtype {
            let inputs = [probs, v];
            return self.add(
                name,
                OpKind::MatMul,
                &inputs,
                std::slice::from_ref(out),
                Default::default(),
                n,
            );
        }
        let y = self.emit(name, "y", OpKind::MatMul, &[probs, v], none, n)?;
        let to = [("to".to_string(), Attr::Int(onnx_data_type(dtype) as i64))].into();
        self.add(name, OpKind::Cast, &[y], std::slice::from_ref(out), to, n)
    }

    /// `x` `[B, Hkv, S, D]` with each head repeated `group` times in a row: `[B, Hkv *
    /// group, S, D]`.
    fn repeat_heads(
        &mut self,
        name: &str,
        n: &NodeProto,
        x: &str,
        shape: &[usize],
        group: usize,
        tag: &str,
    ) -> Result<String, OnnxError> {
        let [b, h, s, d] = [shape[0], shape[1], shape[2], shape[3]].map(|v| v as i64);
        let g = group as i64;
        let dims = |s: &mut Self, what: &str, v: &[i64]| {
            s.named_constant(
                name,
                &format!("{tag}_{what}_shape"),
                Tensor::from_i64(&[v.len()], v),
            )
        };
        let split = dims(self, "split", &[b, h, 1, s, d]);
        let wide = dims(self, "wide", &[b, h, g, s, d]);
        let merged = dims(self, "merged", &[b, h * g, s, d]);
        let none = &[];
        let x = self.emit(
            name,
            &format!("{tag}_split"),
            OpKind::Reshape,
            &[x.to_string(), split],
            none,
            n,
        )?;
        let x = self.emit(
            name,
            &format!("{tag}_wide"),
            OpKind::Expand,
            &[x, wide],
            none,
            n,
        )?;
        self.emit(
            name,
            &format!("{tag}_repeated"),
            OpKind::Reshape,
            &[x, merged],
            none,
            n,
        )
    }

    /// `x` cast from `from` to `to` (unchanged when they are equal).
    fn cast_to(
        &mut self,
        name: &str,
        n: &NodeProto,
        tag: &str,
        x: String,
        from: DType,
        to: DType,
    ) -> Result<String, OnnxError> {
        if from == to {
            return Ok(x);
        }
        let code = [("to", Attr::Int(onnx_data_type(to) as i64))];
        self.emit(name, tag, OpKind::Cast, &[x], &code, n)
    }

    /// Applies modifier subgraph `a` (one input, one output) to `x` through an If on the
    /// constant true (see the module docs); returns the result's name.
    fn modifier(
        &mut self,
        name: &str,
        n: &NodeProto,
        a: &AttributeProto,
        x: &str,
    ) -> Result<String, OnnxError> {
        let key = a.name.as_str();
        let g = a
            .g
            .as_ref()
            .ok_or_else(|| self.node_error(name, n, format!("attribute '{key}' is not a graph")))?;
        if g.input.len() != 1 || g.output.len() != 1 {
            let message = format!(
                "{key} takes {} inputs and gives {} outputs; it must take and give one",
                g.input.len(),
                g.output.len()
            );
            return Err(self.node_error(name, n, message));
        }
        let out = format!("{name}/{key}");
        let mut node = vec![NodeProto {
            name: format!("{out}_input"),
            op_type: "Identity".into(),
            input: vec![x.to_string()],
            output: vec![g.input[0].name.clone()],
            ..NodeProto::default()
        }];
        node.extend(g.node.iter().cloned());
        let branch = GraphProto {
            name: g.name.clone(),
            node,
            initializer: g.initializer.clone(),
            output: g.output.clone(),
            value_info: g.value_info.clone(),
            ..GraphProto::default()
        };
        let graph = |key: &str| AttributeProto {
            name: key.to_string(),
            r#type: AttributeType::Graph as i32,
            g: Some(branch.clone()),
            ..AttributeProto::default()
        };
        let always = Tensor::from_bytes(DType::Bool, &[], &[1]);
        let cond = self.named_constant(name, &format!("{key}_always"), always);
        let node = NodeProto {
            name: out.clone(),
            op_type: "If".into(),
            input: vec![cond],
            output: vec![out.clone()],
            attribute: vec![graph("then_branch"), graph("else_branch")],
            ..NodeProto::default()
        };
        self.control_node(&out, &node)?;
        Ok(out)
    }
}
