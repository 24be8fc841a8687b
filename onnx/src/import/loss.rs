//! The losses of the default domain, which are inference ops too, rewritten into IR ops:
//!
//! - **NegativeLogLikelihoodLoss** (opset 12): `loss[n, d...] = -input[n, t, d...] * w[t]`
//!   with `t = target[n, d...]` (`w` the optional `weight`, else 1), as GatherElements on
//!   the class axis. A target equal to `ignore_index` gives 0 and counts no weight; it is
//!   replaced by class 0 before the gather so that an index outside the classes is never
//!   read. `reduction` `none` keeps the per-element losses, `sum` adds them and `mean`
//!   (the default) divides that sum by the sum of the weights counted (with no weight
//!   and no `ignore_index`, the element count);
//! - **SoftmaxCrossEntropyLoss** (opset 12): LogSoftmax along the class axis, whose
//!   result is the optional second output `log_prob`, then the loss above.

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::super::proto::NodeProto;
use super::super::OnnxError;
use super::Importer;

impl Importer<'_> {
    /// Imports a node whose op is rewritten here (see the module docs).
    pub(super) fn lower_loss(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        if self.opset < 12 {
            let m = format!("{} exists from opset 12", n.op_type);
            return Err(self.node_error(name, n, m));
        }
        let out = match n.output.first() {
            Some(o) if !o.is_empty() => o.clone(),
            _ => return Err(self.node_error(name, n, "the loss output is missing".into())),
        };
        let arg = |i: usize| n.input.get(i).filter(|s| !s.is_empty()).cloned();
        let (Some(x), Some(target)) = (arg(0), arg(1)) else {
            let m = format!("{} needs its scores and its target", n.op_type);
            return Err(self.node_error(name, n, m));
        };
        let dtype = self.dtype_of(&x);
        let tdtype = self.dtype_of(&target);
        let (Some(dtype), Some(tdtype @ (DType::I32 | DType::I64))) = (dtype, tdtype) else {
            let m = format!("{} needs float scores and an i32 or i64 target", n.op_type);
            return Err(self.node_error(name, n, m));
        };
        if !dtype.is_float() {
            let m = format!("{} scores must be a float tensor, got {dtype}", n.op_type);
            return Err(self.node_error(name, n, m));
        }
        let reduction = match attrs.get("reduction") {
            None => "mean",
            Some(Attr::Str(s)) if matches!(s.as_str(), "none" | "sum" | "mean") => s.as_str(),
            Some(other) => {
                let m = format!("reduction must be none, sum or mean, got {other:?}");
                return Err(self.node_error(name, n, m));
            }
        };
        let log_prob = if n.op_type == "SoftmaxCrossEntropyLoss" {
            let lp = match n.output.get(1) {
                Some(o) if !o.is_empty() => o.clone(),
                _ => format!("{name}/log_prob"),
            };
            let axis = BTreeMap::from([("axis".to_string(), Attr::Int(1))]);
            let lp_name = format!("{name}/log_softmax");
            self.add(
                &lp_name,
                OpKind::LogSoftmax,
                &[x],
                std::slice::from_ref(&lp),
                axis,
                n,
            )?;
            lp
        } else {
            x
        };
        // The target with ignored positions sent to class 0, and the mask that drops them.
        let int_const = |s: &mut Self, tag: &str, v: i64| {
            let t = match tdtype {
                DType::I32 => Tensor::from_bytes(DType::I32, &[], &(v as i32).to_le_bytes()),
                _ => Tensor::from_i64(&[], &[v]),
            };
            s.named_constant(name, tag, t)
        };
        let (index, kept) = match attrs.get("ignore_index") {
            Some(Attr::Int(ii)) => {
                let ii = int_const(self, "ignore_index", *ii);
                let zero = int_const(self, "class0", 0);
                let hit = self.emit(
                    name,
                    "ignored",
                    OpKind::Equal,
                    &[target.clone(), ii],
                    &[],
                    n,
                )?;
                let keep = self.emit(
                    name,
                    "kept",
                    OpKind::Not,
                    std::slice::from_ref(&hit),
                    &[],
                    n,
                )?;
                let safe = self.emit(
                    name,
                    "target_safe",
                    OpKind::Where,
                    &[hit, zero, target],
                    &[],
                    n,
                )?;
                let to = [("to", Attr::Int(dtype.onnx_code()))];
                let kept = self.emit(name, "kept_weight", OpKind::Cast, &[keep], &to, n)?;
                (safe, Some(kept))
            }
            _ => (target, None),
        };
        let axis1 = [("axes", Attr::Ints(vec![1]))];
        let idx = self.emit(
            name,
            "class_index",
            OpKind::Unsqueeze,
            std::slice::from_ref(&index),
            &axis1,
            n,
        )?;
        let gathered = [("axis", Attr::Int(1))];
        let picked = self.emit(
            name,
            "picked",
            OpKind::GatherElements,
            &[log_prob, idx],
            &gathered,
            n,
        )?;
        let picked = self.emit(name, "picked_line", OpKind::Squeeze, &[picked], &axis1, n)?;
        let mut weight = match n.input.get(2).filter(|s| !s.is_empty()) {
            Some(w) => {
                Some(self.emit(name, "weight", OpKind::Gather, &[w.clone(), index], &[], n)?)
            }
            None => None,
        };
        if let Some(k) = kept {
            weight = Some(match weight {
                Some(w) => self.emit(name, "weight_kept", OpKind::Mul, &[w, k], &[], n)?,
                None => k,
            });
        }
        let neg = self.emit(name, "negated", OpKind::Neg, &[picked], &[], n)?;
        let loss_tag = if reduction == "none" {
            None
        } else {
            Some("loss")
        };
        let all = [("keepdims", Attr::Int(0))];
        let loss = match (&weight, loss_tag) {
            (Some(w), Some(tag)) => self.emit(name, tag, OpKind::Mul, &[neg, w.clone()], &[], n)?,
            (Some(w), None) => {
                return self.add(
                    name,
                    OpKind::Mul,
                    &[neg, w.clone()],
                    &[out],
                    BTreeMap::new(),
                    n,
                )
            }
            (None, Some(_)) => neg,
            (None, None) => {
                return self.add(name, OpKind::Identity, &[neg], &[out], BTreeMap::new(), n)
            }
        };
        let to_map = |a: &[(&str, Attr)]| -> BTreeMap<String, Attr> {
            a.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
        };
        match (reduction, weight) {
            ("sum", _) => self.add(name, OpKind::ReduceSum, &[loss], &[out], to_map(&all), n),
            (_, None) => self.add(name, OpKind::ReduceMean, &[loss], &[out], to_map(&all), n),
            (_, Some(w)) => {
                let total = self.emit(name, "loss_sum", OpKind::ReduceSum, &[loss], &all, n)?;
                let wsum = self.emit(name, "weight_sum", OpKind::ReduceSum, &[w], &all, n)?;
                self.add(
                    name,
                    OpKind::Div,
                    &[total, wsum],
                    &[out],
                    BTreeMap::new(),
                    n,
                )
            }
        }
    }
}
