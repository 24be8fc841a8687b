//! QuantizeLinear and DequantizeLinear, per tensor, per axis or blocked.

use baton_delegate_api::{DType, Node, TensorMut, TensorRef};

use super::super::data::{load_f64, store_floats, store_ints};
use super::super::{unsupported, KernelError};
use super::{axis_of, present};

/// The integer types QuantizeLinear produces.
pub(super) const QUANT_INTS: &[DType] = &[
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I4,
    DType::U4,
    DType::I2,
    DType::U2,
];

/// The float formats QuantizeLinear produces.
pub(super) const QUANT_FLOATS: &[DType] = &[
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
    DType::F4E2M1,
];

/// Integer outputs: `y = saturate(round_half_even(x / scale) + zero_point)`. Float8 and
/// float4 outputs: `y = cast(x / scale + zero_point)` with Cast's rounding and the
/// `saturate` attribute (default 1). The division is f32 (as ONNX Runtime computes it);
/// NaN gives the zero point for integers.
pub(super) fn quantize(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let xv = load_f64(&inputs[0]);
    let p = params(node, inputs)?;
    let scaled = |k: usize| (xv[k] as f32 / p.scales[p.which(k)] as f32) as f64;
    if QUANT_FLOATS.contains(&out.dtype) {
        let saturate = node.attr_int("saturate", 1) != 0;
        let y: Vec<f64> = (0..xv.len())
            .map(|k| scaled(k) + p.zero_points[p.which(k)])
            .collect();
        store_floats(out, &y, saturate);
        return Ok(());
    }
    let Some((lo, hi)) = out
        .dtype
        .int_range()
        .filter(|_| QUANT_INTS.contains(&out.dtype))
    else {
        return Err(unsupported(
            node,
            format!("QuantizeLinear to {}", out.dtype),
        ));
    };
    let q: Vec<i128> = (0..xv.len())
        .map(|k| {
            let r = scaled(k).round_ties_even();
            let zp = p.zero_points[p.which(k)] as i128;
            match r.is_nan() {
                true => zp,
                // `as` saturates, so a huge quotient stays huge and clamps below.
                false => (r as i128).saturating_add(zp).clamp(lo, hi),
            }
        })
        .collect();
    store_ints(out, &q);
    Ok(())
}

/// `y = (x - zero_point) * scale`, the difference and the product exact in f64 and
/// rounded once to the output dtype.
pub(super) fn dequantize(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let xv = load_f64(&inputs[0]);
    let p = params(node, inputs)?;
    let y: Vec<f64> = (0..xv.len())
        .map(|k| {
            let i = p.which(k);
            (xv[k] - p.zero_points[i]) * p.scales[i]
        })
        .collect();
    store_floats(out, &y, false);
    Ok(())
}

/// The scales and zero points (0 when absent) of a node, and how an element of `x` finds
/// its own.
struct Params {
    scales: Vec<f64>,
    zero_points: Vec<f64>,
    layout: Layout,
}

/// Which scale applies to flat element `k` of `x`.
enum Layout {
    /// The one scale.
    PerTensor,
    /// The index along the axis: `(k / inner) % dim`.
    PerAxis { inner: usize, dim: usize },
    /// With `x` viewed as `[outer, dim, inner]`, the scale at
    /// `[outer, index / block, inner]` of the scale viewed as `[outer, blocks, inner]`.
    Blocked {
        inner: usize,
        dim: usize,
        block: usize,
        blocks: usize,
    },
}

impl Params {
    fn which(&self, k: usize) -> usize {
        match self.layout {
            Layout::PerTensor => 0,
            Layout::PerAxis { inner, dim } => (k / inner) % dim,
            Layout::Blocked {
                inner,
                dim,
                block,
                blocks,
            } => {
                let (outer, at, i) = (k / (dim * inner), (k / inner) % dim, k % inner);
                (outer * blocks + at / block) * inner + i
            }
        }
    }
}

fn params(node: &Node, inputs: &[TensorRef<'_>]) -> Result<Params, KernelError> {
    let x = &inputs[0];
    let scales = load_f64(&inputs[1]);
    let zero_points = match present(inputs, 2) {
        true => load_f64(&inputs[2]),
        false => vec![0.0; scales.len()],
    };
    let block = node.attr_int("block_size", 0).max(0) as usize;
    let layout = if block > 0 {
        let axis = axis_of(node, node.attr_int("axis", 1), x.shape.len())?;
        let dim = x.shape[axis];
        Layout::Blocked {
            inner: x.shape[axis + 1..].iter().product::<usize>().max(1),
            dim: dim.max(1),
            block,
            blocks: dim.div_ceil(block).max(1),
        }
    } else if scales.len() <= 1 {
        Layout::PerTensor
    } else {
        let axis = axis_of(node, node.attr_int("axis", 1), x.shape.len())?;
        Layout::PerAxis {
            inner: x.shape[axis + 1..].iter().product::<usize>().max(1),
            dim: x.shape[axis],
        }
    };
    Ok(Params {
        scales,
        zero_points,
        layout,
    })
}
