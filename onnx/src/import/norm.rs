//! Normalizations with no IR op of their own, rewritten into IR ops (so every delegate that
//! has those ops runs them at once):
//!
//! - **RMSNormalization** (opset 23) `x / sqrt(mean(x², axes) + epsilon) * scale` over the
//!   axes from `axis` (default -1) to the last, computed as ONNX's function body does: in
//!   f32 (`stash_type` 1, the default) for a narrower float input, then cast back before
//!   the scale is applied;
//! - **LpNormalization** `x / norm` with the L1 (`p` 1) or L2 (`p` 2, the default) norm
//!   along `axis` (default -1), kept as an axis of 1 so that it broadcasts; a zero norm
//!   leaves the zeros it normalizes at 0 (ONNX's reference divides by 1 there);
//! - **GroupNormalization** (opset 18): the mean and variance of each of `num_groups`
//!   channel groups of a fixed-shape `[N, C, ...]` input, in the input's dtype, then the
//!   per-channel `scale` and `bias` (opset 21; per group before).

use std::collections::BTreeMap;

use baton_delegate_api::dtype::push_float;
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::super::proto::NodeProto;
use super::super::OnnxError;
use super::Importer;

impl Importer<'_> {
    /// A scalar constant of float `dtype` named `{name}/{tag}`.
    fn typed_constant(&mut self, name: &str, tag: &str, dtype: DType, v: f64) -> String {
        let mut bytes = Vec::with_capacity(dtype.size());
        push_float(dtype, v, false, &mut bytes);
        self.named_constant(name, tag, Tensor::from_bytes(dtype, &[], &bytes))
    }

    /// Imports a node whose op is rewritten here (see the module docs).
    pub(super) fn lower_norm(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let x = n.input.first().cloned().unwrap_or_default();
        if n.op_type == "GroupNormalization" {
            return self.group_norm(name, n, attrs, x, out);
        }
        let (dtype, rank) = match (self.dtype_of(&x), self.rank_of(&x)) {
            (Some(d), Some(r))
                if matches!(d, DType::F32 | DType::F16 | DType::BF16 | DType::F64) =>
            {
                (d, r)
            }
            _ => {
                let m = format!("{} is supported on float inputs of known rank", n.op_type);
                return Err(self.node_error(name, n, m));
            }
        };
        let int = |k: &str, default: i64| match attrs.get(k) {
            Some(Attr::Int(v)) => *v,
            _ => default,
        };
        let axis = int("axis", -1);
        let axis = usize::try_from(if axis < 0 { axis + rank as i64 } else { axis })
            .ok()
            .filter(|&a| a < rank.max(1))
            .ok_or_else(|| {
                self.node_error(
                    name,
                    n,
                    format!("axis {axis} is out of range for rank {rank}"),
                )
            })?;
        if n.op_type == "LpNormalization" {
            let reduce = match int("p", 2) {
                1 => OpKind::ReduceL1,
                2 => OpKind::ReduceL2,
                p => return Err(self.node_error(name, n, format!("p must be 1 or 2, got {p}"))),
            };
            let keep = [
                ("axes", Attr::Ints(vec![axis as i64])),
                ("keepdims", Attr::Int(1)),
            ];
            let norm = self.emit(name, "norm", reduce, std::slice::from_ref(&x), &keep, n)?;
            // A zero norm divides by 1 instead (ONNX's result there is 0, not NaN).
            let zero = self.typed_constant(name, "zero", dtype, 0.0);
            let one = self.typed_constant(name, "one", dtype, 1.0);
            let at_zero = self.emit(
                name,
                "norm_is_zero",
                OpKind::Equal,
                &[norm.clone(), zero],
                &[],
                n,
            )?;
            let safe = self.emit(
                name,
                "norm_safe",
                OpKind::Where,
                &[at_zero, one, norm],
                &[],
                n,
            )?;
            return self.add(name, OpKind::Div, &[x, safe], &[out], BTreeMap::new(), n);
        }
        let scale = match n.input.get(1) {
            Some(s) if !s.is_empty() => s.clone(),
            _ => return Err(self.node_error(name, n, "RMSNormalization needs a scale".into())),
        };
        let epsilon = match attrs.get("epsilon") {
            Some(Attr::Float(v)) => *v,
            _ => 1e-5,
        };
        // ONNX computes in the stash type (f32 by default) and casts back before the scale.
        let stash = match int("stash_type", 1) {
            1 => DType::F32,
            t => DType::from_onnx(t)
                .filter(|d| d.is_float())
                .ok_or_else(|| {
                    self.node_error(name, n, format!("stash_type {t} is not a float"))
                })?,
        };
        let cast = |to: DType| [("to", Attr::Int(to.onnx_code()))];
        let xs = if stash == dtype {
            x
        } else {
            self.emit(name, "stash", OpKind::Cast, &[x], &cast(stash), n)?
        };
        let axes = [
            ("axes", Attr::Ints((axis as i64..rank as i64).collect())),
            ("keepdims", Attr::Int(1)),
        ];
        let sq = self.emit(
            name,
            "square",
            OpKind::Mul,
            &[xs.clone(), xs.clone()],
            &[],
            n,
        )?;
        let mean = self.emit(name, "mean_square", OpKind::ReduceMean, &[sq], &axes, n)?;
        let eps = self.typed_constant(name, "epsilon", stash, f64::from(epsilon));
        let var = self.emit(name, "plus_epsilon", OpKind::Add, &[mean, eps], &[], n)?;
        let rms = self.emit(name, "rms", OpKind::Sqrt, &[var], &[], n)?;
        let normed = self.emit(name, "normalized", OpKind::Div, &[xs, rms], &[], n)?;
        let normed = if stash == dtype {
            normed
        } else {
            self.emit(name, "unstash", OpKind::Cast, &[normed], &cast(dtype), n)?
        };
        self.add(
            name,
            OpKind::Mul,
            &[normed, scale],
            &[out],
            BTreeMap::new(),
            n,
        )
    }

    /// GroupNormalization over `[N, G, C / G * spatial]`, then the per-channel (opset 21)
    /// or, before opset 21, per-group scale and bias.
    fn group_norm(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
        x: String,
        out: String,
    ) -> Result<(), OnnxError> {
        let shape = self.static_shape_of(&x).filter(|s| s.len() >= 2);
        let groups = match attrs.get("num_groups") {
            Some(Attr::Int(g)) if *g > 0 => *g as usize,
            _ => return Err(self.node_error(name, n, "num_groups must be positive".into())),
        };
        let Some(shape) = shape.filter(|s| s[1] % groups == 0) else {
            let m =
                format!("needs an input [N, C, ...] of fixed shape with C a multiple of {groups}");
            return Err(self.node_error(name, n, m));
        };
        let (Some(scale), Some(bias)) = (
            n.input.get(1).filter(|s| !s.is_empty()).cloned(),
            n.input.get(2).filter(|s| !s.is_empty()).cloned(),
        ) else {
            return Err(self.node_error(name, n, "GroupNormalization needs scale and bias".into()));
        };
        let dtype = self.dtype_of(&x).unwrap_or(DType::F32);
        let epsilon = match attrs.get("epsilon") {
            Some(Attr::Float(v)) => f64::from(*v),
            _ => 1e-5,
        };
        let dims = |s: &mut Self, tag: &str, d: &[i64]| {
            s.named_constant(name, tag, Tensor::from_i64(&[d.len()], d))
        };
        let grouped = dims(self, "grouped_shape", &[shape[0] as i64, groups as i64, -1]);
        let xg = self.emit(name, "grouped", OpKind::Reshape, &[x, grouped], &[], n)?;
        let last = [("axes", Attr::Ints(vec![2])), ("keepdims", Attr::Int(1))];
        let mean = self.emit(
            name,
            "mean",
            OpKind::ReduceMean,
            std::slice::from_ref(&xg),
            &last,
            n,
        )?;
        let centred = self.emit(name, "centred", OpKind::Sub, &[xg, mean], &[], n)?;
        let sq = self.emit(
            name,
            "square",
            OpKind::Mul,
            &[centred.clone(), centred.clone()],
            &[],
            n,
        )?;
        let var = self.emit(name, "variance", OpKind::ReduceMean, &[sq], &last, n)?;
        let eps = self.typed_constant(name, "epsilon", dtype, epsilon);
        let var = self.emit(name, "plus_epsilon", OpKind::Add, &[var, eps], &[], n)?;
        let sd = self.emit(name, "std", OpKind::Sqrt, &[var], &[], n)?;
        let normed = self.emit(name, "normalized", OpKind::Div, &[centred, sd], &[], n)?;
        let full: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let full = dims(self, "shape", &full);
        // Per channel from opset 21, as [C, 1, ...]; per group before, as [G, 1] on the
        // grouped values.
        let (normed, affine) = if self.opset >= 21 {
            let back = self.emit(
                name,
                "ungrouped",
                OpKind::Reshape,
                &[normed, full.clone()],
                &[],
                n,
            )?;
            let mut per = vec![1i64; shape.len() - 1];
            per[0] = shape[1] as i64;
            (back, per)
        } else {
            (normed, vec![groups as i64, 1])
        };
        let affine = dims(self, "affine_shape", &affine);
        let s = self.emit(
            name,
            "scale",
            OpKind::Reshape,
            &[scale, affine.clone()],
            &[],
            n,
        )?;
        let b = self.emit(name, "bias", OpKind::Reshape, &[bias, affine], &[], n)?;
        let scaled = self.emit(name, "scaled", OpKind::Mul, &[normed, s], &[], n)?;
        if self.opset >= 21 {
            return self.add(name, OpKind::Add, &[scaled, b], &[out], BTreeMap::new(), n);
        }
        let shifted = self.emit(name, "shifted", OpKind::Add, &[scaled, b], &[], n)?;
        self.add(
            name,
            OpKind::Reshape,
            &[shifted, full],
            &[out],
            BTreeMap::new(),
            n,
        )
    }
}
