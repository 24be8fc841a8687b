//! ONNX's integer-operator ("QOperator") form, imported as the QDQ form that the rest of
//! Baton already runs, so a model quantized either way reaches the same int8 kernels:
//!
//! - **QLinearMatMul** `Q(MatMul(DQ(a), DQ(b)), y_scale, y_zero_point)`, `a` per tensor
//!   or per row, `b` per tensor or per column;
//! - **QLinearConv** `Q(Conv(DQ(x), DQ(w), DQ(B, x_scale · w_scale)), y_scale,
//!   y_zero_point)` with Conv's attributes, `w` per tensor or per output channel, the i32
//!   bias dequantized by the product of the scales (zero point 0), as ONNX defines it;
//! - **DynamicQuantizeLinear** (u8): the range `[min(x, 0), max(x, 0)]` over the whole
//!   tensor, `scale = range / 255`, `zero_point = saturate(round(-min / scale))`, and
//!   `y = QuantizeLinear(x, scale, zero_point)`, ONNX's own function body.
//!
//! An f16 scale is widened to f32 first (exactly), so the dequantized values and the sums
//! are those of the f32 path; only the final rounding to the integer output differs from
//! an integer accumulation, and only where a value falls within f32 rounding of a tie.

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::super::proto::NodeProto;
use super::super::OnnxError;
use super::Importer;

impl Importer<'_> {
    /// Imports QLinearMatMul, QLinearConv or DynamicQuantizeLinear (see the module docs).
    pub(super) fn qlinear(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let input = |k: usize| n.input.get(k).filter(|s| !s.is_empty()).cloned();
        let needed = |s: &Self, k: usize, what: &str| {
            input(k).ok_or_else(|| s.node_error(name, n, format!("input {k} ({what}) is required")))
        };
        match n.op_type.as_str() {
            "DynamicQuantizeLinear" => self.dynamic_quantize(name, n),
            "QLinearMatMul" => {
                let out = self.single_output(name, n)?;
                let a = needed(self, 0, "a")?;
                let b = needed(self, 3, "b")?;
                let a_rank = self.rank_of(&a).unwrap_or(2).max(2) as i64;
                let b_rank = self.rank_of(&b).unwrap_or(2).max(2) as i64;
                let qa = [
                    needed(self, 1, "a_scale")?,
                    needed(self, 2, "a_zero_point")?,
                ];
                let qb = [
                    needed(self, 4, "b_scale")?,
                    needed(self, 5, "b_zero_point")?,
                ];
                let qy = [
                    needed(self, 6, "y_scale")?,
                    needed(self, 7, "y_zero_point")?,
                ];
                let da = self.dequantize(name, "a", n, &a, &qa, a_rank - 2)?;
                let db = self.dequantize(name, "b", n, &b, &qb, b_rank - 1)?;
                let y = self.emit(name, "matmul", OpKind::MatMul, &[da, db], &[], n)?;
                self.requantize(name, n, y, &qy, out)
            }
            "QLinearConv" => {
                let out = self.single_output(name, n)?;
                let x = needed(self, 0, "x")?;
                let w = needed(self, 3, "w")?;
                let qx = [
                    needed(self, 1, "x_scale")?,
                    needed(self, 2, "x_zero_point")?,
                ];
                let qw = [
                    needed(self, 4, "w_scale")?,
                    needed(self, 5, "w_zero_point")?,
                ];
                let qy = [
                    needed(self, 6, "y_scale")?,
                    needed(self, 7, "y_zero_point")?,
                ];
                let dx = self.dequantize(name, "x", n, &x, &qx, 1)?;
                let dw = self.dequantize(name, "w", n, &w, &qw, 0)?;
                let mut operands = vec![dx, dw];
                if let Some(bias) = input(8) {
                    // ONNX: the i32 bias is quantized with scale x_scale · w_scale, zero
                    // point 0 (per output channel where w is).
                    let xs = self.scale_f32(name, "x", n, &qx[0])?;
                    let ws = self.scale_f32(name, "w", n, &qw[0])?;
                    let bs = self.emit(name, "bias_scale", OpKind::Mul, &[xs, ws], &[], n)?;
                    let per_channel = self.elements(&qw[0]).is_none_or(|e| e != 1);
                    let axis: &[(&str, Attr)] = if per_channel {
                        &[("axis", Attr::Int(0))]
                    } else {
                        &[]
                    };
                    let db = self.emit(
                        name,
                        "bias_dq",
                        OpKind::DequantizeLinear,
                        &[bias, bs],
                        axis,
                        n,
                    )?;
                    operands.push(db);
                }
                let conv_attrs: Vec<(&str, Attr)> =
                    attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
                let y = self.emit(name, "conv", OpKind::Conv, &operands, &conv_attrs, n)?;
                self.requantize(name, n, y, &qy, out)
            }
            other => Err(self.node_error(name, n, format!("{other} is not an integer op"))),
        }
    }

    /// `DQ(t, scale, zero_point)` in f32, per tensor when the scale has one element and
    /// along `axis` otherwise.
    fn dequantize(
        &mut self,
        name: &str,
        tag: &str,
        n: &NodeProto,
        t: &str,
        [scale, zero_point]: &[String; 2],
        axis: i64,
    ) -> Result<String, OnnxError> {
        let s = self.scale_f32(name, tag, n, scale)?;
        let per_axis = self.elements(scale).is_none_or(|e| e != 1);
        let attrs: &[(&str, Attr)] = if per_axis {
            &[("axis", Attr::Int(axis))]
        } else {
            &[]
        };
        let operands = [t.to_string(), s, zero_point.clone()];
        let out = format!("{tag}_dq");
        self.emit(name, &out, OpKind::DequantizeLinear, &operands, attrs, n)
    }

    /// `Q(y, scale, zero_point)` into `out`; the output scale must be one value (ONNX
    /// allows nothing else for these ops' outputs).
    fn requantize(
        &mut self,
        name: &str,
        n: &NodeProto,
        y: String,
        [scale, zero_point]: &[String; 2],
        out: String,
    ) -> Result<(), OnnxError> {
        if self.elements(scale).is_some_and(|e| e != 1) {
            let m = "y_scale must be one value (per-tensor output quantization)";
            return Err(self.node_error(name, n, m.into()));
        }
        let s = self.scale_f32(name, "y", n, scale)?;
        let operands = [y, s, zero_point.clone()];
        let none = BTreeMap::new();
        self.add(name, OpKind::QuantizeLinear, &operands, &[out], none, n)
    }

    /// `scale` as f32: itself, or widened by a Cast (exact) when it is f16.
    fn scale_f32(
        &mut self,
        name: &str,
        tag: &str,
        n: &NodeProto,
        scale: &str,
    ) -> Result<String, OnnxError> {
        match self.dtype_of(scale) {
            Some(DType::F32) => Ok(scale.to_string()),
            Some(d) if d.is_float() => {
                let to = [("to", Attr::Int(DType::F32.onnx_code()))];
                let tag = format!("{tag}_scale_f32");
                self.emit(name, &tag, OpKind::Cast, &[scale.to_string()], &to, n)
            }
            d => Err(self.node_error(
                name,
                n,
                format!("scale '{scale}' must be a float tensor, not {d:?}"),
            )),
        }
    }

    /// The element count of `t` where its shape is fixed.
    fn elements(&self, t: &str) -> Option<usize> {
        self.static_shape_of(t).map(|s| s.iter().product())
    }

    fn dynamic_quantize(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let x = n
            .input
            .first()
            .filter(|s| !s.is_empty())
            .cloned()
            .ok_or_else(|| self.node_error(name, n, "input 0 (x) is required".into()))?;
        if self.dtype_of(&x) != Some(DType::F32) {
            let m = "DynamicQuantizeLinear takes an f32 input".to_string();
            return Err(self.node_error(name, n, m));
        }
        let [y, y_scale, y_zero_point] = match &n.output[..] {
            [a, b, c] => [a.clone(), b.clone(), c.clone()],
            _ => {
                let m = "DynamicQuantizeLinear has three outputs (y, y_scale, y_zero_point)";
                return Err(self.node_error(name, n, m.into()));
            }
        };
        let all = [("keepdims", Attr::Int(0))];
        let lo = self.emit(
            name,
            "min",
            OpKind::ReduceMin,
            std::slice::from_ref(&x),
            &all,
            n,
        )?;
        let hi = self.emit(
            name,
            "max",
            OpKind::ReduceMax,
            std::slice::from_ref(&x),
            &all,
            n,
        )?;
        // The range always holds 0, so that 0 is exactly representable.
        let lo = self.emit(
            name,
            "min0",
            OpKind::Clip,
            &[lo],
            &[("max", Attr::Float(0.0))],
            n,
        )?;
        let hi = self.emit(
            name,
            "max0",
            OpKind::Clip,
            &[hi],
            &[("min", Attr::Float(0.0))],
            n,
        )?;
        let levels = self.named_constant(name, "levels", Tensor::from_f32(&[], &[255.0]));
        let range = self.emit(name, "range", OpKind::Sub, &[hi, lo.clone()], &[], n)?;
        let none = || BTreeMap::new();
        self.add(
            name,
            OpKind::Div,
            &[range, levels],
            std::slice::from_ref(&y_scale),
            none(),
            n,
        )?;
        let ratio = self.emit(name, "ratio", OpKind::Div, &[lo, y_scale.clone()], &[], n)?;
        let neg = self.emit(name, "neg", OpKind::Neg, &[ratio], &[], n)?;
        let rounded = self.emit(name, "round", OpKind::Round, &[neg], &[], n)?;
        let bounds = [("min", Attr::Float(0.0)), ("max", Attr::Float(255.0))];
        let clipped = self.emit(name, "saturate", OpKind::Clip, &[rounded], &bounds, n)?;
        let to_u8 = BTreeMap::from([("to".to_string(), Attr::Int(DType::U8.onnx_code()))]);
        self.add(
            name,
            OpKind::Cast,
            &[clipped],
            std::slice::from_ref(&y_zero_point),
            to_u8,
            n,
        )?;
        let operands = [x, y_scale, y_zero_point];
        self.add(name, OpKind::QuantizeLinear, &operands, &[y], none(), n)
    }
}
