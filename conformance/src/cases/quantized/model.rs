//! [`QModel`]: a quantized case under construction (a graph of QDQ groups with its inputs,
//! scales and zero points drawn from the case's seeded generator).

use baton_delegate_api::{Attr, DType, GraphBuilder, OpKind, Tensor, TensorData, TensorId};

use super::super::gen::Rng;
use super::super::{Case, CaseBody};
use super::{Act, Spec, QUANTIZED};
use crate::error::{Error, Result};

/// A quantized case under construction.
pub(super) struct QModel {
    pub(super) id: String,
    pub(super) b: GraphBuilder,
    pub(super) rng: Rng,
    pub(super) inputs: Vec<Tensor>,
    pub(super) counter: usize,
}

impl QModel {
    pub(super) fn new(op: OpKind, spec: &Spec) -> QModel {
        Self::new_named(&format!("{}_{}", op.name(), spec.name), spec)
    }

    pub(super) fn new_named(desc: &str, spec: &Spec) -> QModel {
        let id = format!("{QUANTIZED}/{}/{desc}", spec.dtype.name());
        QModel {
            b: GraphBuilder::new(&id),
            rng: Rng::for_id(&id),
            id,
            inputs: Vec::new(),
            counter: 0,
        }
    }

    /// A number for unique constant names.
    pub(super) fn fresh(&mut self) -> usize {
        self.counter += 1;
        self.counter
    }

    pub(super) fn err(&self, message: String) -> Error {
        Error::Case {
            id: self.id.clone(),
            message,
        }
    }

    /// A scale near `base` and a zero point away from the middle of `dtype`'s range.
    pub(super) fn act_params(&mut self, dtype: DType, base: f64) -> (f64, i32) {
        let scale = base * self.rng.uniform(0.8, 1.25);
        let zp = match dtype {
            DType::U8 => self.rng.int(100, 150) as i32,
            _ => self.rng.int(-20, 20) as i32,
        };
        (scale, zp)
    }

    /// A graph input of integers uniform over `dtype`, dequantized; returns the f32 value.
    pub(super) fn qinput(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        scale: f64,
        zp: i32,
    ) -> Result<TensorId> {
        let n: usize = shape.iter().product();
        let (lo, hi) = range(dtype);
        let bytes: Vec<u8> = (0..n)
            .map(|_| int_byte(dtype, self.rng.int(lo, hi) as i32))
            .collect();
        self.inputs.push(Tensor::from_bytes(dtype, shape, &bytes));
        let x = self.b.input_fixed(name, dtype, shape);
        self.dq(x, dtype, scale, zp)
    }

    /// DequantizeLinear of `x` with one scale and zero point.
    pub(super) fn dq(
        &mut self,
        x: TensorId,
        dtype: DType,
        scale: f64,
        zp: i32,
    ) -> Result<TensorId> {
        let (s, z) = self.scalar_params(dtype, scale, zp);
        self.node(OpKind::DequantizeLinear, &[x, s, z], &[])
    }

    /// QuantizeLinear of `y` to `dtype` with one scale and zero point.
    pub(super) fn q(&mut self, y: TensorId, dtype: DType, scale: f64, zp: i32) -> Result<TensorId> {
        let (s, z) = self.scalar_params(dtype, scale, zp);
        self.node(OpKind::QuantizeLinear, &[y, s, z], &[])
    }

    /// The activation (if any), then QuantizeLinear: zero point 0 without an activation,
    /// the bottom of the range after ReLU/ReLU6 (the whole range is then non-negative).
    pub(super) fn activation_then_q(
        &mut self,
        y: TensorId,
        act: Act,
        dtype: DType,
        scale: f64,
    ) -> Result<TensorId> {
        let y = match act {
            Act::None => y,
            Act::Relu => self.node(OpKind::Relu, &[y], &[])?,
            Act::Clip6 => {
                let n = self.fresh();
                let lo = self.b.constant_f32(&format!("clip_lo{n}"), &[], &[0.0]);
                let hi = self.b.constant_f32(&format!("clip_hi{n}"), &[], &[6.0]);
                self.node(OpKind::Clip, &[y, lo, hi], &[])?
            }
        };
        let (lo, _) = range(dtype);
        let zp = match (act, dtype) {
            (Act::None, DType::U8) => 128,
            (Act::None, _) => 0,
            _ => lo as i32,
        };
        self.q(y, dtype, scale, zp)
    }

    /// A constant i8 weight, integers uniform in [-127, 127], per-channel scales along
    /// `axis`, zero points 0, dequantized. Returns the f32 value and the scales.
    pub(super) fn weight(
        &mut self,
        name: &str,
        shape: &[usize],
        axis: usize,
    ) -> Result<(TensorId, Vec<f64>)> {
        let n: usize = shape.iter().product();
        let bytes: Vec<u8> = (0..n)
            .map(|_| int_byte(DType::I8, self.rng.int(-127, 127) as i32))
            .collect();
        let w = self
            .b
            .constant(name, DType::I8, shape, TensorData::from_bytes(&bytes));
        let channels = shape[axis];
        let scales: Vec<f64> = (0..channels)
            .map(|_| self.rng.uniform(0.002, 0.02))
            .collect();
        let s32: Vec<f32> = scales.iter().map(|&s| s as f32).collect();
        let s = self
            .b
            .constant_f32(&format!("{name}_scale"), &[channels], &s32);
        let z = self.b.constant(
            &format!("{name}_zero_point"),
            DType::I8,
            &[channels],
            TensorData::from_bytes(&vec![0u8; channels]),
        );
        let axis_attr = [("axis", Attr::Int(axis as i64))];
        let d = self.node(OpKind::DequantizeLinear, &[w, s, z], &axis_attr)?;
        // The scales as stored (f32), so output scales are computed from what runs.
        Ok((d, s32.iter().map(|&s| s as f64).collect()))
    }

    /// A constant i32 bias, dequantized with `x_scale * w_scale[c]` (zero point 0): the
    /// real bias is around ±0.5 of the output's spread, as trained biases are.
    pub(super) fn bias(&mut self, name: &str, x_scale: f64, w_scales: &[f64]) -> Result<TensorId> {
        let n = w_scales.len();
        let vals: Vec<i32> = (0..n).map(|_| self.rng.int(-4000, 4000) as i32).collect();
        let b = self
            .b
            .constant(name, DType::I32, &[n], TensorData::from_slice(&vals));
        let s32: Vec<f32> = w_scales
            .iter()
            .map(|&w| (x_scale as f32) * (w as f32))
            .collect();
        let s = self.b.constant_f32(&format!("{name}_scale"), &[n], &s32);
        let z = self.b.constant(
            &format!("{name}_zero_point"),
            DType::I32,
            &[n],
            TensorData::from_slice(&vec![0i32; n]),
        );
        self.node(
            OpKind::DequantizeLinear,
            &[b, s, z],
            &[("axis", Attr::Int(0))],
        )
    }

    pub(super) fn scalar_params(
        &mut self,
        dtype: DType,
        scale: f64,
        zp: i32,
    ) -> (TensorId, TensorId) {
        let n = self.fresh();
        let s = self
            .b
            .constant_f32(&format!("scale{n}"), &[], &[scale as f32]);
        let z = self.b.constant(
            &format!("zero_point{n}"),
            dtype,
            &[],
            TensorData::from_bytes(&[int_byte(dtype, zp)]),
        );
        (s, z)
    }

    pub(super) fn node(
        &mut self,
        op: OpKind,
        inputs: &[TensorId],
        attrs: &[(&str, Attr)],
    ) -> Result<TensorId> {
        self.b
            .node(op, inputs, attrs)
            .map_err(|e| self.err(e.to_string()))
    }

    pub(super) fn finish(self, outputs: &[TensorId]) -> Result<Case> {
        let QModel {
            id, mut b, inputs, ..
        } = self;
        let dtype = inputs.first().map(|t| t.dtype);
        for (i, &o) in outputs.iter().enumerate() {
            b.rename(o, &format!("out{i}"));
            b.output(o);
        }
        let graph = b.finish().map_err(|e| Error::Case {
            id: id.clone(),
            message: e.to_string(),
        })?;
        Ok(Case {
            id,
            op: QUANTIZED.into(),
            dtype,
            body: CaseBody::Model { graph, inputs },
        })
    }
}

pub(super) fn range(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::U8 => (0, 255),
        _ => (-128, 127),
    }
}

fn int_byte(dtype: DType, v: i32) -> u8 {
    match dtype {
        DType::U8 => v.clamp(0, 255) as u8,
        _ => v.clamp(-128, 127) as i8 as u8,
    }
}
