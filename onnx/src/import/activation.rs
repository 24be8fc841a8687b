//! More ONNX ops with no IR op of their own (see `lower` for the others), rewritten into
//! IR ops with the same result on f32:
//!
//! - **Softsign** `x / (1 + |x|)`;
//! - **Mish** `x * tanh(softplus(x))`, softplus written as in `lower`
//!   (`relu(x) + log(1 + exp(-|x|))`, which does not overflow);
//! - **Celu** `x > 0 ? x : alpha * (exp(x / alpha) - 1)`, which equals ONNX's
//!   `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))` (the second term is never
//!   positive) and keeps NaN;
//! - **Shrink** `x < -lambd ? x + bias : (x > lambd ? x - bias : 0)`;
//! - **ReduceLogSum** `log(ReduceSum(x))` with the node's own axes, `keepdims` and
//!   `noop_with_empty_axes` (of nothing: `log(0) = -inf`, as ONNX defines).

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, OpKind, Tensor};

use super::super::proto::NodeProto;
use super::super::OnnxError;
use super::Importer;

impl Importer<'_> {
    /// Imports a node whose op is rewritten here (see the module docs).
    pub(super) fn lower_activation(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        if n.op_type == "ReduceLogSum" {
            let sum = self.emit_with(name, "sum", OpKind::ReduceSum, &n.input, attrs, n)?;
            return self.add(name, OpKind::Log, &[sum], &[out], BTreeMap::new(), n);
        }
        let (x, _) = self.f32_operand(name, n)?;
        let float = |k: &str, default: f32| match attrs.get(k) {
            Some(Attr::Float(v)) => *v,
            _ => default,
        };
        let scalar = |s: &mut Self, tag: &str, v: f32| {
            s.named_constant(name, tag, Tensor::from_f32(&[], &[v]))
        };
        let one_x = std::slice::from_ref(&x);
        match n.op_type.as_str() {
            "Softsign" => {
                let one = scalar(self, "one", 1.0);
                let abs = self.emit(name, "abs", OpKind::Abs, one_x, &[], n)?;
                let den = self.emit(name, "one_plus_abs", OpKind::Add, &[abs, one], &[], n)?;
                self.add(name, OpKind::Div, &[x, den], &[out], BTreeMap::new(), n)
            }
            "Mish" => {
                let one = scalar(self, "one", 1.0);
                let abs = self.emit(name, "abs", OpKind::Abs, one_x, &[], n)?;
                let neg = self.emit(name, "neg_abs", OpKind::Neg, &[abs], &[], n)?;
                let e = self.emit(name, "exp", OpKind::Exp, &[neg], &[], n)?;
                let sum = self.emit(name, "one_plus", OpKind::Add, &[e, one], &[], n)?;
                let log = self.emit(name, "log", OpKind::Log, &[sum], &[], n)?;
                let relu = self.emit(name, "relu", OpKind::Relu, one_x, &[], n)?;
                let sp = self.emit(name, "softplus", OpKind::Add, &[relu, log], &[], n)?;
                let t = self.emit(name, "tanh", OpKind::Tanh, &[sp], &[], n)?;
                self.add(name, OpKind::Mul, &[x, t], &[out], BTreeMap::new(), n)
            }
            "Celu" => {
                let alpha = float("alpha", 1.0);
                let zero = scalar(self, "zero", 0.0);
                let one = scalar(self, "one", 1.0);
                let a = scalar(self, "alpha", alpha);
                let pos = self.emit(
                    name,
                    "positive",
                    OpKind::Greater,
                    &[x.clone(), zero],
                    &[],
                    n,
                )?;
                let scaled =
                    self.emit(name, "scaled", OpKind::Div, &[x.clone(), a.clone()], &[], n)?;
                let e = self.emit(name, "exp", OpKind::Exp, &[scaled], &[], n)?;
                let em1 = self.emit(name, "exp_minus_1", OpKind::Sub, &[e, one], &[], n)?;
                let neg = self.emit(name, "negative", OpKind::Mul, &[em1, a], &[], n)?;
                self.add(
                    name,
                    OpKind::Where,
                    &[pos, x, neg],
                    &[out],
                    BTreeMap::new(),
                    n,
                )
            }
            _ => {
                // Shrink
                let (lambd, bias) = (float("lambd", 0.5), float("bias", 0.0));
                let zero = scalar(self, "zero", 0.0);
                let lo = scalar(self, "neg_lambd", -lambd);
                let hi = scalar(self, "lambd", lambd);
                let b = scalar(self, "bias", bias);
                let below = self.emit(name, "below", OpKind::Less, &[x.clone(), lo], &[], n)?;
                let above = self.emit(name, "above", OpKind::Greater, &[x.clone(), hi], &[], n)?;
                let plus = self.emit(
                    name,
                    "plus_bias",
                    OpKind::Add,
                    &[x.clone(), b.clone()],
                    &[],
                    n,
                )?;
                let minus = self.emit(name, "minus_bias", OpKind::Sub, &[x, b], &[], n)?;
                let upper =
                    self.emit(name, "upper", OpKind::Where, &[above, minus, zero], &[], n)?;
                self.add(
                    name,
                    OpKind::Where,
                    &[below, plus, upper],
                    &[out],
                    BTreeMap::new(),
                    n,
                )
            }
        }
    }

    /// [`Importer::emit`] with the node's attributes as they are.
    fn emit_with(
        &mut self,
        name: &str,
        tag: &str,
        op: OpKind,
        inputs: &[String],
        attrs: &BTreeMap<String, Attr>,
        n: &NodeProto,
    ) -> Result<String, OnnxError> {
        let out = format!("{name}/{tag}");
        self.add(
            &out,
            op,
            inputs,
            std::slice::from_ref(&out),
            attrs.clone(),
            n,
        )?;
        Ok(out)
    }
}
