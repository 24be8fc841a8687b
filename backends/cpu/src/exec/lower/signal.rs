//! Lowering of Einsum (`crate::ops::einsum`) and GridSample (`crate::ops::grid_sample`).

use baton_delegate_api::shape::einsum;

use super::*;
use crate::ops::einsum::EinsumOp;
use crate::ops::grid_sample::{GridSampleOp, SampleMode, SamplePadding};

impl Builder<'_> {
    pub(super) fn einsum(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let e = einsum::parse(node.attr_str("equation", ""), shapes)?;
        let srcs = node
            .inputs
            .iter()
            .map(|&t| self.src(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Op::Einsum(EinsumOp::new(
            &srcs, &e.inputs, shapes, &e.output, &e.extents,
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
