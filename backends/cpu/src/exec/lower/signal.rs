//! Lowering of Einsum (`crate::ops::einsum`), GridSample (`crate::ops::grid_sample`), DFT
//! and STFT (`crate::ops::spectral`), and MelWeightMatrix (`crate::ops::window`).

use baton_delegate_api::shape::{einsum, spectral};

use super::*;
use crate::ops::einsum::{EinsumOp, EinsumType};
use crate::ops::fft::Fft;
use crate::ops::grid_sample::{GridSampleOp, SampleMode, SamplePadding};
use crate::ops::spectral::{DftOp, StftOp};
use crate::ops::window::MelOp;

impl Builder<'_> {
    /// The value of optional scalar operand `i` (absent, or 0 elements: `None`), a
    /// constant i64 (the support check made sure).
    fn scalar_operand(&self, node: &Node, i: usize) -> Result<Option<i64>, String> {
        let Some(&t) = node.inputs.get(i) else {
            return Ok(None);
        };
        if self.shape(t).iter().product::<usize>() == 0 {
            return Ok(None);
        }
        match self.const_i64s(t).as_deref() {
            Some(&[v]) => Ok(Some(v)),
            _ => Err(format!(
                "{} operand {i} ('{}') is not one constant i64 value",
                node.op, self.graph.tensors[t].name
            )),
        }
    }

    pub(super) fn dft(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let x = &shapes[0];
        let (length, axis) = (self.scalar_operand(node, 1)?, self.scalar_operand(node, 2)?);
        let plan = spectral::dft_plan(node, x, length, axis)?;
        let r = x.len();
        Ok(Op::Dft(DftOp {
            x: self.src(node.inputs[0])?,
            outer: x[..plan.axis].iter().product(),
            len: x[plan.axis],
            inner: x[plan.axis + 1..r - 1].iter().product(),
            parts: x[r - 1],
            bins: plan.output[plan.axis],
            inverse: node.attr_int("inverse", 0) != 0,
            real_output: plan.real_output,
            fft: Fft::new(plan.length),
        }))
    }

    pub(super) fn mel_weight_matrix(&mut self, node: &Node, out: &[usize]) -> Result<Op, String> {
        let [rows, cols] = out[..] else {
            return Err(format!("MelWeightMatrix output {out:?} is not 2-D"));
        };
        let scalar = |i: usize| {
            self.scalar_operand(node, i)?
                .ok_or_else(|| format!("MelWeightMatrix operand {i} is empty"))
        };
        let (dft_length, sample_rate) = (scalar(1)?, scalar(2)?);
        let edge = |b: &mut Self, i: usize| -> Result<(Src, DType), String> {
            let t = node.inputs[i];
            Ok((b.src(t)?, b.graph.tensors[t].dtype))
        };
        Ok(Op::MelWeightMatrix(MelOp {
            low: edge(self, 3)?,
            high: edge(self, 4)?,
            rows,
            cols,
            dft_length,
            sample_rate,
            out: self.graph.tensors[node.outputs[0]].dtype,
        }))
    }

    pub(super) fn stft(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let x = &shapes[0];
        let step = self.scalar_operand(node, 1)?;
        let frame_length = self.scalar_operand(node, 3)?;
        let window = node
            .inputs
            .get(2)
            .copied()
            .filter(|&t| self.shape(t).iter().product::<usize>() > 0);
        let plan = spectral::stft_plan(node, x, step, window.map(|t| self.shape(t)), frame_length)?;
        let [batch, frames, bins, _] = plan.output[..] else {
            return Err(format!("STFT output {:?} is not 4-D", plan.output));
        };
        Ok(Op::Stft(StftOp {
            x: self.src(node.inputs[0])?,
            window: window.map(|t| self.src(t)).transpose()?,
            batch,
            len: x[1],
            parts: x[2],
            step: plan.step,
            frames,
            bins,
            fft: Fft::new(plan.frame_length),
        }))
    }

    pub(super) fn einsum(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let e = einsum::parse(node.attr_str("equation", ""), shapes)?;
        let srcs = node
            .inputs
            .iter()
            .map(|&t| self.src(t))
            .collect::<Result<Vec<_>, _>>()?;
        // f16 is widened to f32 around the op (`half.rs`); the integers are exact.
        let ty = match self.graph.tensors[node.outputs[0]].dtype {
            DType::I32 => EinsumType::I32,
            DType::I64 => EinsumType::I64,
            _ => EinsumType::F32,
        };
        Ok(Op::Einsum(EinsumOp::new(
            ty, &srcs, &e.inputs, shapes, &e.output, &e.extents,
        )?))
    }

    pub(super) fn grid_sample(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let (x, grid) = (&shapes[0], &shapes[1]);
        let (batch, channels, spatial) = match x[..] {
            [n, c, h, w] => (n, c, [1, h, w]),
            [n, c, d, h, w] => (n, c, [d, h, w]),
            _ => return Err(format!("GridSample of a {}-D input (4-D or 5-D)", x.len())),
        };
        let (mode, padding) = grid_sample_modes(node)?;
        Ok(Op::GridSample(GridSampleOp {
            x: self.src(node.inputs[0])?,
            grid: self.src(node.inputs[1])?,
            batch,
            channels,
            spatial,
            rank: x.len() - 2,
            points: grid[1..grid.len() - 1].iter().product(),
            mode,
            padding,
            align_corners: node.attr_int("align_corners", 0) != 0,
        }))
    }
}

/// GridSample's `mode` (opset 20's names or opset 16's) and `padding_mode`.
pub(crate) fn grid_sample_modes(node: &Node) -> Result<(SampleMode, SamplePadding), String> {
    let mode = match node.attr_str("mode", "linear") {
        "nearest" => SampleMode::Nearest,
        "linear" | "bilinear" => SampleMode::Linear,
        "cubic" | "bicubic" => SampleMode::Cubic,
        m => {
            return Err(format!(
                "GridSample mode '{m}' is not nearest, linear or cubic"
            ))
        }
    };
    let padding = match node.attr_str("padding_mode", "zeros") {
        "zeros" => SamplePadding::Zeros,
        "border" => SamplePadding::Border,
        "reflection" => SamplePadding::Reflection,
        m => {
            return Err(format!(
                "GridSample padding_mode '{m}' is not zeros, border or reflection"
            ))
        }
    };
    Ok((mode, padding))
}
