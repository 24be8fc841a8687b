//! Shape rules of the ops whose output extent comes from operand values: Range (its length
//! from `start`, `limit` and `delta`) and OneHot (its new axis from `depth`). Both read
//! those values as constant i64 operands; where they are not constants (a run-time input,
//! a float Range) the shape is unknown until the values are, and the rule says so.

use super::{Operands, Outputs};
use crate::dtype::{element_f64, element_int};
use crate::ir::{DType, OpKind};
use crate::shape::normalize_axis;

/// The dtypes Range produces: ONNX's integer and float types.
const RANGE_DTYPES: [DType; 7] = [
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

/// Range: 1-D, of the operands' dtype, its length from the constant i64 operands.
pub(super) fn range(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, _) = ops.x()?;
    if !RANGE_DTYPES.contains(dtype) {
        return Err(format!("Range of {dtype} is not defined"));
    }
    let mut v = [0i64; 3];
    for (i, what) in ["start", "limit", "delta"].iter().enumerate() {
        let (d, s) = ops.input(i)?;
        if d != dtype || s.iter().product::<usize>() != 1 || s.len() > 1 {
            return Err(format!(
                "Range {what} must be one {dtype} value, got {d} {s:?}"
            ));
        }
        if *dtype != DType::I64 {
            return Err(format!(
                "Range of {dtype}: start, limit and delta must be constant (its length \
                 depends on their values)"
            ));
        }
        v[i] = (ops.operand)(i)
            .and_then(|x| x.first().copied())
            .ok_or_else(|| format!("Range {what} (input {i}) must be a constant"))?;
    }
    Ok(vec![(*dtype, vec![range_length_i64(v[0], v[1], v[2])?])])
}

/// The length of a Range whose three operands (`inputs`, each one element) are the
/// constants `values` (their bytes), of any Range dtype.
pub(crate) fn range_of_constants(
    inputs: &[(DType, Vec<usize>)],
    values: [&[u8]; 3],
) -> Result<usize, String> {
    let dtype = inputs
        .first()
        .map(|(d, _)| *d)
        .ok_or("Range needs input 0")?;
    if !RANGE_DTYPES.contains(&dtype) {
        return Err(format!("Range of {dtype} is not defined"));
    }
    for (i, what) in ["start", "limit", "delta"].iter().enumerate() {
        match inputs.get(i) {
            Some((d, s)) if *d == dtype && s.len() <= 1 && s.iter().product::<usize>() == 1 => {}
            other => {
                return Err(format!(
                    "Range {what} must be one {dtype} value, got {other:?}"
                ))
            }
        }
    }
    if dtype.is_int() {
        let v = values.map(|b| element_int(dtype, b, 0).and_then(|v| i64::try_from(v).ok()));
        match v {
            [Some(s), Some(l), Some(d)] => range_length_i64(s, l, d),
            _ => Err("Range operands are not integers".into()),
        }
    } else {
        let v = values.map(|b| element_f64(dtype, b, 0));
        range_length_f64(v[0], v[1], v[2])
    }
}

/// The length of an integer Range: `max(ceil((limit - start) / delta), 0)`, exactly.
pub fn range_length_i64(start: i64, limit: i64, delta: i64) -> Result<usize, String> {
    if delta == 0 {
        return Err("Range delta must not be 0".into());
    }
    let (span, step) = (i128::from(limit) - i128::from(start), i128::from(delta));
    // Truncating division, one up where the exact quotient is positive and not whole.
    let (q, r) = (span / step, span % step);
    let n = q + i128::from(r != 0 && (r > 0) == (step > 0));
    usize::try_from(n.max(0)).map_err(|_| format!("Range of {n} elements is too long"))
}

/// The length of a float Range: `max(ceil((limit - start) / delta), 0)` in f64, as ONNX's
/// reference (numpy's `arange`) computes it.
pub fn range_length_f64(start: f64, limit: f64, delta: f64) -> Result<usize, String> {
    if delta == 0.0 {
        return Err("Range delta must not be 0".into());
    }
    let n = ((limit - start) / delta).ceil();
    if n.is_nan() || n >= usize::MAX as f64 {
        return Err(format!(
            "Range from {start} to {limit} by {delta} has no finite length"
        ));
    }
    Ok(n.max(0.0) as usize)
}

/// OneHot: the indices' shape with `depth` inserted at `axis`, of `values`' dtype.
pub(super) fn one_hot(ops: &Operands<'_>) -> Result<Outputs, String> {
    let op = OpKind::OneHot;
    let (id, idx) = ops.x()?;
    if !(id.is_int() || id.is_float()) {
        return Err(format!("{op} indices must be numeric, got {id}"));
    }
    let (dd, ds) = ops.input(1)?;
    if *dd != DType::I64 || ds.iter().product::<usize>() != 1 || ds.len() > 1 {
        return Err(format!("{op} depth must be one i64 value, got {dd} {ds:?}"));
    }
    let depth = (ops.operand)(1)
        .and_then(|v| v.first().copied())
        .ok_or_else(|| format!("{op} depth (input 1) must be a constant"))?;
    let depth = usize::try_from(depth)
        .ok()
        .filter(|&d| d > 0)
        .ok_or_else(|| format!("{op} depth must be positive, got {depth}"))?;
    let (vd, vs) = ops.input(2)?;
    if vs.iter().product::<usize>() != 2 || vs.len() != 1 {
        return Err(format!("{op} values must be [off, on], got shape {vs:?}"));
    }
    let axis = normalize_axis(ops.node.attr_int("axis", -1), idx.len() + 1)?;
    let mut shape = idx.clone();
    shape.insert(axis, depth);
    Ok(vec![(*vd, shape)])
}
