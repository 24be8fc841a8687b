//! Small ops written as compositions of IR ops:
//!
//! - **Mean** of its inputs: their broadcast sum (as `Sum` is lowered) divided by their
//!   count;
//! - **GlobalMaxPool**: ReduceMax over the spatial axes (2 and after), kept as 1;
//! - **MeanVarianceNormalization** `(x - mean) / sqrt(mean(x²) - mean² + 1e-9)` over
//!   `axes` (default `[0, 2, 3]`), ONNX's own function body;
//! - **LpPool** `(sum over each window of |x|^p)^(1/p)` (`p` default 2), the sum being
//!   AveragePool's zero-padded mean (`count_include_pad` 1) times the window's volume;
//! - **Swish** (opset 24) `x * sigmoid(alpha * x)` (`alpha` default 1);
//! - **ThresholdedRelu** `x > alpha ? x : 0` (`alpha` default 1);
//! - **EyeLike** (opset 9): a constant of its 2-D input's fixed shape, 1 on the `k`-th
//!   diagonal (default 0) and 0 elsewhere, of `dtype` (default the input's);
//! - **NonZero** (opset 9) of an input of fixed shape: the flat positions `Range(0, n)`
//!   compressed by the input cast to bool, each split into its coordinates (divided by
//!   the axis' stride, modulo its extent) and stacked as `[rank, count]` i64. The count
//!   depends on the values, so what follows runs in a dynamic region.
//! - **CenterCropPad** (opset 18) of `x` to the i64 `shape` along `axes` (default all):
//!   ONNX's function body, with its Max as a Where: the extents `s` of `x` there, padded
//!   by `max(shape - s, 0)` (half before, rounded down, the rest after), then sliced from
//!   `(padded - shape) / 2` for `shape` elements. `shape` may be a run-time value: Pad's
//!   and Slice's operands are then value inputs, and the session specialises on them.

use std::collections::BTreeMap;

use baton_delegate_api::dtype::{push_float, push_int};
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::super::proto::NodeProto;
use super::super::OnnxError;
use super::Importer;

impl Importer<'_> {
    /// Imports a node whose op is composed here (see the module docs).
    pub(super) fn compose(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let x = n.input.first().cloned().unwrap_or_default();
        if n.op_type == "EyeLike" {
            return self.eye_like(name, n, attrs, &x, &out);
        }
        if n.op_type == "NonZero" {
            return self.non_zero(name, n, &x, &out);
        }
        if n.op_type == "CenterCropPad" {
            return self.center_crop_pad(name, n, attrs, &x, &out);
        }
        let dtype = match self.dtype_of(&x) {
            Some(d) if d.is_float() => d,
            _ => {
                let m = format!("{} is supported on float inputs", n.op_type);
                return Err(self.node_error(name, n, m));
            }
        };
        let constant = |s: &mut Self, tag: &str, v: f64| {
            let mut bytes = Vec::with_capacity(dtype.size());
            push_float(dtype, v, false, &mut bytes);
            s.named_constant(name, tag, Tensor::from_bytes(dtype, &[], &bytes))
        };
        let alpha = match attrs.get("alpha") {
            Some(Attr::Float(v)) => f64::from(*v),
            _ => 1.0,
        };
        let none = BTreeMap::new;
        match n.op_type.as_str() {
            "Mean" => {
                let count = n.input.len();
                if count == 0 {
                    return Err(self.node_error(name, n, "Mean needs an input".into()));
                }
                let mut acc = x;
                for (k, operand) in n.input[1..].iter().enumerate() {
                    let tag = format!("sum{k}");
                    acc = self.emit(name, &tag, OpKind::Add, &[acc, operand.clone()], &[], n)?;
                }
                let c = constant(self, "count", count as f64);
                self.add(name, OpKind::Div, &[acc, c], &[out], none(), n)
            }
            "GlobalMaxPool" => {
                let rank = self.rank_of(&x).filter(|&r| r >= 3).ok_or_else(|| {
                    let m = "GlobalMaxPool needs an input [N, C, spatial...] of known rank";
                    self.node_error(name, n, m.into())
                })?;
                let axes = BTreeMap::from([
                    ("axes".to_string(), Attr::Ints((2..rank as i64).collect())),
                    ("keepdims".to_string(), Attr::Int(1)),
                ]);
                self.add(name, OpKind::ReduceMax, &[x], &[out], axes, n)
            }
            "MeanVarianceNormalization" => {
                let axes = match attrs.get("axes") {
                    Some(Attr::Ints(a)) => a.clone(),
                    _ => vec![0, 2, 3],
                };
                let keep = [("axes", Attr::Ints(axes)), ("keepdims", Attr::Int(1))];
                let mean = self.emit(
                    name,
                    "mean",
                    OpKind::ReduceMean,
                    std::slice::from_ref(&x),
                    &keep,
                    n,
                )?;
                let sq = self.emit(name, "square", OpKind::Mul, &[x.clone(), x.clone()], &[], n)?;
                let msq = self.emit(name, "mean_square", OpKind::ReduceMean, &[sq], &keep, n)?;
                let m2 = self.emit(
                    name,
                    "mean_sq",
                    OpKind::Mul,
                    &[mean.clone(), mean.clone()],
                    &[],
                    n,
                )?;
                let var = self.emit(name, "variance", OpKind::Sub, &[msq, m2], &[], n)?;
                let eps = constant(self, "epsilon", 1e-9);
                let var = self.emit(name, "plus_epsilon", OpKind::Add, &[var, eps], &[], n)?;
                let sd = self.emit(name, "std", OpKind::Sqrt, &[var], &[], n)?;
                let centred = self.emit(name, "centred", OpKind::Sub, &[x, mean], &[], n)?;
                self.add(name, OpKind::Div, &[centred, sd], &[out], none(), n)
            }
            "LpPool" => {
                // The window sum of |x|^p is the zero-padded window mean times its volume.
                let p = match attrs.get("p") {
                    Some(Attr::Int(p)) if *p > 0 => *p as f64,
                    None => 2.0,
                    Some(other) => {
                        let m = format!("p must be a positive integer, got {other:?}");
                        return Err(self.node_error(name, n, m));
                    }
                };
                let volume = match attrs.get("kernel_shape") {
                    Some(Attr::Ints(k)) if k.iter().all(|&d| d > 0) => {
                        k.iter().try_fold(1i64, |a, &d| a.checked_mul(d))
                    }
                    _ => None,
                };
                let volume = match volume {
                    Some(v) => v,
                    None => {
                        let m = "LpPool needs a positive kernel_shape".to_string();
                        return Err(self.node_error(name, n, m));
                    }
                };
                let mut pool = attrs.clone();
                pool.remove("p");
                pool.insert("count_include_pad".into(), Attr::Int(1));
                let pool: Vec<(&str, Attr)> =
                    pool.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
                let pc = constant(self, "p", p);
                let abs = self.emit(name, "abs", OpKind::Abs, std::slice::from_ref(&x), &[], n)?;
                let pw = self.emit(name, "pow", OpKind::Pow, &[abs, pc], &[], n)?;
                let mean = self.emit(name, "window_mean", OpKind::AveragePool, &[pw], &pool, n)?;
                let vol = constant(self, "volume", volume as f64);
                let sum = self.emit(name, "window_sum", OpKind::Mul, &[mean, vol], &[], n)?;
                let inv = constant(self, "inverse_p", 1.0 / p);
                self.add(name, OpKind::Pow, &[sum, inv], &[out], none(), n)
            }
            "Swish" => {
                let a = constant(self, "alpha", alpha);
                let ax = self.emit(name, "scaled", OpKind::Mul, &[x.clone(), a], &[], n)?;
                let s = self.emit(name, "sigmoid", OpKind::Sigmoid, &[ax], &[], n)?;
                self.add(name, OpKind::Mul, &[x, s], &[out], none(), n)
            }
            _ => {
                // ThresholdedRelu
                let a = constant(self, "alpha", alpha);
                let zero = constant(self, "zero", 0.0);
                let above = self.emit(name, "above", OpKind::Greater, &[x.clone(), a], &[], n)?;
                self.add(name, OpKind::Where, &[above, x, zero], &[out], none(), n)
            }
        }
    }

    /// EyeLike: a constant, since it reads only its input's (fixed) shape.
    fn eye_like(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
        x: &str,
        out: &str,
    ) -> Result<(), OnnxError> {
        let Some([rows, cols]) = self
            .static_shape_of(x)
            .and_then(|s| <[usize; 2]>::try_from(s).ok())
        else {
            let m = "EyeLike needs a 2-D input of fixed shape".to_string();
            return Err(self.node_error(name, n, m));
        };
        let dtype = match attrs.get("dtype") {
            Some(Attr::Int(code)) => DType::from_onnx(*code),
            _ => self.dtype_of(x),
        };
        let Some(dtype) = dtype.filter(|d| d.is_float() || d.is_int() || *d == DType::Bool) else {
            return Err(self.node_error(name, n, "EyeLike's dtype is not numeric".into()));
        };
        let k = match attrs.get("k") {
            Some(Attr::Int(k)) => *k,
            _ => 0,
        };
        let mut bytes = Vec::with_capacity(rows * cols * dtype.size());
        for i in 0..rows as i64 {
            for j in 0..cols as i64 {
                let v = i128::from(j - i == k);
                if dtype.is_float() {
                    push_float(dtype, v as f64, false, &mut bytes);
                } else {
                    push_int(dtype, v, &mut bytes);
                }
            }
        }
        self.constant(out, Tensor::from_bytes(dtype, &[rows, cols], &bytes));
        Ok(())
    }

    fn non_zero(&mut self, name: &str, n: &NodeProto, x: &str, out: &str) -> Result<(), OnnxError> {
        if self.opset < 9 {
            return Err(self.node_error(name, n, "NonZero exists from opset 9".into()));
        }
        let Some(rank) = self.rank_of(x).filter(|&r| r >= 1) else {
            let m = "NonZero needs an input of known rank >= 1".to_string();
            return Err(self.node_error(name, n, m));
        };
        let scalar = |s: &mut Self, tag: &str, v: i64| {
            s.named_constant(name, tag, Tensor::from_i64(&[], &[v]))
        };
        // Each axis' extent and stride as scalar i64 tensors: constants when the input's
        // shape is fixed, else read from `Shape(x)` at run time (a session that binds the
        // dims folds them back to constants), so a model with a symbolic batch imports too.
        let (extents, strides, count) = match self.static_shape_of(x) {
            Some(shape) => {
                let count = shape
                    .iter()
                    .try_fold(1i64, |a, &d| a.checked_mul(i64::try_from(d).ok()?));
                let Some(count) = count else {
                    let m = format!("input of shape {shape:?} is too large");
                    return Err(self.node_error(name, n, m));
                };
                let mut strides = vec![1i64; rank];
                for d in (0..rank.saturating_sub(1)).rev() {
                    strides[d] = strides[d + 1].saturating_mul(shape[d + 1] as i64);
                }
                let extents = (0..rank)
                    .map(|d| Some(scalar(self, &format!("extent{d}"), shape[d] as i64)))
                    .collect::<Vec<_>>();
                let strides = (0..rank)
                    .map(|d| {
                        (strides[d] != 1).then(|| scalar(self, &format!("stride{d}"), strides[d]))
                    })
                    .collect::<Vec<_>>();
                (extents, strides, scalar(self, "limit", count))
            }
            None => {
                let shape = self.emit(name, "shape", OpKind::Shape, &[x.to_string()], &[], n)?;
                let axis0 = [("axis", Attr::Int(0))];
                let mut extents = Vec::with_capacity(rank);
                for d in 0..rank {
                    let i = scalar(self, &format!("axis{d}"), d as i64);
                    let e = self.emit(
                        name,
                        &format!("extent{d}"),
                        OpKind::Gather,
                        &[shape.clone(), i],
                        &axis0,
                        n,
                    )?;
                    extents.push(Some(e));
                }
                // stride[d] = extent[d + 1] * ... * extent[rank - 1]; the last is 1 (none).
                let mut strides: Vec<Option<String>> = vec![None; rank];
                for d in (0..rank - 1).rev() {
                    let next = extents[d + 1].clone().unwrap_or_default();
                    strides[d] = Some(match strides[d + 1].clone() {
                        None => next,
                        Some(s) => {
                            let tag = format!("stride{d}");
                            self.emit(name, &tag, OpKind::Mul, &[s, next], &[], n)?
                        }
                    });
                }
                let e0 = extents[0].clone().unwrap_or_default();
                let count = match strides[0].clone() {
                    None => e0,
                    Some(s) => self.emit(name, "limit", OpKind::Mul, &[s, e0], &[], n)?,
                };
                (extents, strides, count)
            }
        };
        let flat = if rank == 1 {
            x.to_string()
        } else {
            let target = self.named_constant(name, "flat_shape", Tensor::from_i64(&[1], &[-1]));
            self.emit(
                name,
                "flat",
                OpKind::Reshape,
                &[x.to_string(), target],
                &[],
                n,
            )?
        };
        let to_bool = [("to", Attr::Int(DType::Bool.onnx_code()))];
        let mask = self.emit(name, "mask", OpKind::Cast, &[flat], &to_bool, n)?;
        let range = [scalar(self, "start", 0), count, scalar(self, "delta", 1)];
        let positions = self.emit(name, "positions", OpKind::Range, &range, &[], n)?;
        let axis0 = [("axis", Attr::Int(0))];
        let flat_idx = self.emit(
            name,
            "selected",
            OpKind::Compress,
            &[positions, mask],
            &axis0,
            n,
        )?;
        let axes = self.named_constant(name, "axes", Tensor::from_i64(&[1], &[0]));
        let none = BTreeMap::new;
        if rank == 1 {
            return self.add(
                name,
                OpKind::Unsqueeze,
                &[flat_idx, axes],
                &[out.to_string()],
                none(),
                n,
            );
        }
        let mut rows = Vec::with_capacity(rank);
        for d in 0..rank {
            let mut v = flat_idx.clone();
            if let Some(s) = strides[d].clone() {
                v = self.emit(name, &format!("div{d}"), OpKind::Div, &[v, s], &[], n)?;
            }
            if d > 0 {
                let e = extents[d].clone().unwrap_or_default();
                v = self.emit(name, &format!("mod{d}"), OpKind::Mod, &[v, e], &[], n)?;
            }
            rows.push(self.emit(
                name,
                &format!("row{d}"),
                OpKind::Unsqueeze,
                &[v, axes.clone()],
                &[],
                n,
            )?);
        }
        self.add(
            name,
            OpKind::Concat,
            &rows,
            &[out.to_string()],
            BTreeMap::from([("axis".to_string(), Attr::Int(0))]),
            n,
        )
    }

    fn center_crop_pad(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
        x: &str,
        out: &str,
    ) -> Result<(), OnnxError> {
        if self.opset < 18 {
            return Err(self.node_error(name, n, "CenterCropPad exists from opset 18".into()));
        }
        let Some(shape) = n.input.get(1).filter(|s| !s.is_empty()).cloned() else {
            let m = "CenterCropPad needs the input 'shape'".to_string();
            return Err(self.node_error(name, n, m));
        };
        let Some(rank) = self.rank_of(x) else {
            let m = "CenterCropPad needs an input of known rank".to_string();
            return Err(self.node_error(name, n, m));
        };
        let axes: Vec<i64> = match attrs.get("axes") {
            Some(Attr::Ints(a)) => a.clone(),
            _ => (0..rank as i64).collect(),
        };
        let mut normal = Vec::with_capacity(axes.len());
        for &a in &axes {
            let r = rank as i64;
            let v = if a < 0 { a + r } else { a };
            if !(0..r).contains(&v) || normal.contains(&v) {
                let m = format!("axes {axes:?} do not name distinct axes of a rank-{rank} input");
                return Err(self.node_error(name, n, m));
            }
            normal.push(v);
        }
        let axes_t = Tensor::from_i64(&[normal.len()], &normal);
        let axes_c = self.named_constant(name, "axes", axes_t);
        let two = self.named_constant(name, "two", Tensor::from_i64(&[1], &[2]));
        let all = self.emit(name, "x_shape", OpKind::Shape, &[x.to_string()], &[], n)?;
        let sizes = self.emit(
            name,
            "x_extents",
            OpKind::Gather,
            &[all, axes_c.clone()],
            &[],
            n,
        )?;
        let grows = self.emit(
            name,
            "grows",
            OpKind::Greater,
            &[shape.clone(), sizes.clone()],
            &[],
            n,
        )?;
        let padded = self.emit(
            name,
            "padded_extents",
            OpKind::Where,
            &[grows, shape.clone(), sizes.clone()],
            &[],
            n,
        )?;
        let pad = self.emit(name, "pad", OpKind::Sub, &[padded.clone(), sizes], &[], n)?;
        let before = self.emit(
            name,
            "pad_before",
            OpKind::Div,
            &[pad.clone(), two.clone()],
            &[],
            n,
        )?;
        let after = self.emit(
            name,
            "pad_after",
            OpKind::Sub,
            &[pad, before.clone()],
            &[],
            n,
        )?;
        let axis0 = [("axis", Attr::Int(0))];
        let pads = self.emit(name, "pads", OpKind::Concat, &[before, after], &axis0, n)?;
        let padded_x = self.emit(
            name,
            "padded",
            OpKind::Pad,
            &[x.to_string(), pads, String::new(), axes_c.clone()],
            &[],
            n,
        )?;
        let excess = self.emit(
            name,
            "excess",
            OpKind::Sub,
            &[padded, shape.clone()],
            &[],
            n,
        )?;
        let starts = self.emit(name, "starts", OpKind::Div, &[excess, two], &[], n)?;
        let ends = self.emit(name, "ends", OpKind::Add, &[starts.clone(), shape], &[], n)?;
        self.add(
            name,
            OpKind::Slice,
            &[padded_x, starts, ends, axes_c],
            &[out.to_string()],
            BTreeMap::new(),
            n,
        )
    }
}
