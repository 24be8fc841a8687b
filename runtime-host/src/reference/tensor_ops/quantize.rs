//! QuantizeLinear and DequantizeLinear, per tensor or per axis.

use baton_delegate_api::{DType, Node, TensorMut, TensorRef};

use super::super::data::{load, load_f32, store};
use super::super::KernelError;
use super::{axis_of, present};

/// `y = saturate(round_half_even(x / scale) + zero_point)` into the output's dtype (u8 or
/// i8). The division is f32 (as ONNX Runtime computes it); NaN gives the zero point.
pub(super) fn quantize(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let xv: Vec<f32> = match x.dtype {
        DType::I32 => load::<i32>(x).into_iter().map(|v| v as f32).collect(),
        _ => load_f32(x),
    };
    let (scales, zps, which) = params(node, inputs)?;
    let (lo, hi) = match out.dtype {
        DType::I8 => (i8::MIN as f32, i8::MAX as f32),
        _ => (u8::MIN as f32, u8::MAX as f32),
    };
    let q: Vec<i64> =
        xv.iter()
            .enumerate()
            .map(|(k, &v)| {
                let p = which(k);
                let r = (v / scales[p]).round_ties_even();
                match r.is_nan() {
                    true => zps[p],
                    // Saturate before adding the zero point so huge values stay exact.
                    false => ((r.clamp(lo - 256.0, hi + 256.0) as i64) + zps[p])
                        .clamp(lo as i64, hi as i64),
                }
            })
            .collect();
    match out.dtype {
        DType::I8 => store(out, &q.iter().map(|&v| v as i8).collect::<Vec<_>>()),
        _ => store(out, &q.iter().map(|&v| v as u8).collect::<Vec<_>>()),
    }
    Ok(())
}

/// `y = (x - zero_point) * scale`, the difference exact and the product rounded once to
/// f32.
pub(super) fn dequantize(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let xv = integers(x);
    let (scales, zps, which) = params(node, inputs)?;
    let y: Vec<f32> = xv
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            let p = which(k);
            ((v - zps[p]) as f64 * scales[p] as f64) as f32
        })
        .collect();
    store(out, &y);
    Ok(())
}

/// The elements of an i8, u8 or i32 tensor as i64.
fn integers(t: &TensorRef<'_>) -> Vec<i64> {
    match t.dtype {
        DType::I8 => t.data.iter().map(|&b| b as i8 as i64).collect(),
        DType::U8 => t.data.iter().map(|&b| b as i64).collect(),
        _ => load::<i32>(t).into_iter().map(i64::from).collect(),
    }
}

type Params = (Vec<f32>, Vec<i64>, Box<dyn Fn(usize) -> usize>);

/// The scales, the zero points (0 when absent) and, for each flat element index of `x`,
/// which of them applies: always the first per tensor, the index along `axis` per axis.
fn params(node: &Node, inputs: &[TensorRef<'_>]) -> Result<Params, KernelError> {
    let x = &inputs[0];
    let scales = load_f32(&inputs[1]);
    let zps = match present(inputs, 2) {
        true => integers(&inputs[2]),
        false => vec![0; scales.len()],
    };
    if scales.len() <= 1 {
        return Ok((scales, zps, Box::new(|_| 0)));
    }
    let axis = axis_of(node, node.attr_int("axis", 1), x.shape.len())?;
    let dim = x.shape[axis];
    let inner: usize = x.shape[axis + 1..].iter().product();
    Ok((scales, zps, Box::new(move |k| (k / inner.max(1)) % dim)))
}
