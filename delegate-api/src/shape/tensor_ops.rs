//! Shape rules of the ONNX-milestone ops in this family (tensor_ops): the data-movement and
//! shape ops here, the layer ops (ConvTranspose, Resize, LSTM, GRU, RNN, Q/DQ) in `layers`.
//!
//! Operands that fix an output shape (axes, pads, repeats, target shapes) must be constant
//! i64 tensors or, where ONNX once had them as attributes, attributes of the same name.

mod generate;
mod index;
mod layers;

pub(crate) use generate::range_of_constants;
pub use generate::{range_length_f64, range_length_i64};
pub use index::tensor_scatter_axis;

use super::{broadcast_shapes, normalize_axis, Outputs};
use crate::abi::MAX_RANK;
use crate::ir::{DType, Node, OpKind};

/// The outputs of `node` if its op belongs to this family, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    operand: &dyn Fn(usize) -> Option<Vec<i64>>,
) -> Option<Result<Outputs, String>> {
    let ops = Operands {
        node,
        inputs,
        operand,
    };
    let r = match node.op {
        OpKind::Squeeze => squeeze(&ops),
        OpKind::Unsqueeze => unsqueeze(&ops),
        OpKind::Split => split(&ops),
        OpKind::Slice => slice(&ops),
        OpKind::Gather => gather(&ops),
        OpKind::Expand => expand(&ops),
        OpKind::Pad => pad(&ops),
        OpKind::Tile => tile(&ops),
        OpKind::Shape => shape_of(&ops),
        OpKind::Size => ops.x().map(|_| vec![(DType::I64, vec![])]),
        OpKind::Identity => ops.x().map(|(d, s)| vec![(*d, s.clone())]),
        OpKind::ConstantOfShape => constant_of_shape(&ops),
        OpKind::ConvTranspose => layers::conv_transpose(&ops),
        OpKind::Resize => layers::resize(&ops),
        OpKind::LSTM | OpKind::GRU | OpKind::RNN => layers::recurrent(&ops),
        OpKind::QuantizeLinear | OpKind::DequantizeLinear => layers::quantize(&ops),
        OpKind::CumSum | OpKind::CumProd => index::cumsum(&ops),
        OpKind::Trilu => index::trilu(&ops),
        OpKind::ReverseSequence => index::reverse_sequence(&ops),
        OpKind::TensorScatter => index::tensor_scatter(&ops),
        OpKind::GatherElements => index::gather_elements(&ops),
        OpKind::ScatterElements => index::scatter_elements(&ops),
        OpKind::GatherND => index::gather_nd(&ops),
        OpKind::ScatterND => index::scatter_nd(&ops),
        OpKind::DepthToSpace | OpKind::SpaceToDepth => index::depth_space(&ops),
        OpKind::Range => generate::range(&ops),
        OpKind::OneHot => generate::one_hot(&ops),
        _ => return None,
    };
    Some(r.and_then(check_outputs))
}

/// Where the rules read a node's operands from.
struct Operands<'a> {
    node: &'a Node,
    inputs: &'a [(DType, Vec<usize>)],
    operand: &'a dyn Fn(usize) -> Option<Vec<i64>>,
}

impl Operands<'_> {
    /// Input 0.
    fn x(&self) -> Result<&(DType, Vec<usize>), String> {
        self.input(0)
    }

    fn input(&self, i: usize) -> Result<&(DType, Vec<usize>), String> {
        self.inputs
            .get(i)
            .ok_or_else(|| format!("{} needs input {i}", self.node.op))
    }

    /// Whether optional input `i` is given with at least one element (a 0-element
    /// operand stands for an omitted one, since only trailing inputs can be left out).
    fn present(&self, i: usize) -> bool {
        self.inputs
            .get(i)
            .is_some_and(|(_, s)| s.iter().product::<usize>() > 0)
    }

    /// The values of input `i` (which must be a constant i64 tensor) or else of the
    /// integer-list attribute `attr`; `None` when neither is given.
    fn ints(&self, i: usize, attr: &str) -> Result<Option<Vec<i64>>, String> {
        if let Some((dtype, _)) = self.inputs.get(i) {
            if *dtype != DType::I64 {
                return Err(format!("{} input {i} ({attr}) must be i64", self.node.op));
            }
            return (self.operand)(i)
                .map(Some)
                .ok_or_else(|| format!("{} input {i} ({attr}) must be a constant", self.node.op));
        }
        Ok(self.node.attr_ints(attr).map(<[i64]>::to_vec))
    }

    /// Like [`Operands::ints`], but required.
    fn required_ints(&self, i: usize, attr: &str) -> Result<Vec<i64>, String> {
        self.ints(i, attr)?
            .ok_or_else(|| format!("{} needs {attr} (input {i})", self.node.op))
    }
}

/// Refuses outputs of a rank past [`MAX_RANK`] or of more bytes than memory can address,
/// so that no caller allocates or views them.
fn check_outputs(outs: Outputs) -> Result<Outputs, String> {
    for (dtype, shape) in &outs {
        if shape.len() > MAX_RANK {
            return Err(format!(
                "output rank {} exceeds the maximum {MAX_RANK}",
                shape.len()
            ));
        }
        let bytes = shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .filter(|&b| b <= isize::MAX as usize);
        if bytes.is_none() {
            return Err(format!("output shape {shape:?} is too large"));
        }
    }
    Ok(outs)
}

/// Normalizes a list of axes for `rank`, refusing repeats.
pub(super) fn unique_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::with_capacity(axes.len());
    for &a in axes {
        let ax = normalize_axis(a, rank)?;
        if out.contains(&ax) {
            return Err(format!("axis {a} is repeated in {axes:?}"));
        }
        out.push(ax);
    }
    Ok(out)
}

/// A non-negative extent from an i64 operand value.
fn extent(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} value {v} is negative"))
}

fn squeeze(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    // An empty axes operand counts as omitted, as ONNX Runtime reads it.
    let given = ops.inputs.len() < 2 || ops.present(1);
    let out = match given.then(|| ops.ints(1, "axes")).transpose()?.flatten() {
        // No axes: every extent-1 dimension goes.
        None => x.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) => {
            let axes = unique_axes(&axes, x.len())?;
            if let Some(&a) = axes.iter().find(|&&a| x[a] != 1) {
                return Err(format!("Squeeze axis {a} of {x:?} is not of extent 1"));
            }
            x.iter()
                .enumerate()
                .filter(|(d, _)| !axes.contains(d))
                .map(|(_, &e)| e)
                .collect()
        }
    };
    Ok(vec![(*dtype, out)])
}

fn unsqueeze(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let axes = ops.required_ints(1, "axes")?;
    // The axes name positions in the output, whose rank is known up front.
    let axes = unique_axes(&axes, x.len() + axes.len())?;
    let mut rest = x.iter();
    let out = (0..x.len() + axes.len())
        .map(|d| match axes.contains(&d) {
            true => 1,
            false => *rest.next().unwrap_or(&1),
        })
        .collect();
    Ok(vec![(*dtype, out)])
}

fn split(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let axis = normalize_axis(ops.node.attr_int("axis", 0), x.len())?;
    let dim = x[axis];
    let sizes: Vec<usize> = match ops.ints(1, "split")? {
        Some(split) => {
            let sizes = split
                .iter()
                .map(|&v| extent(v, "split"))
                .collect::<Result<Vec<_>, _>>()?;
            if sizes.iter().sum::<usize>() != dim {
                return Err(format!("split {split:?} does not add up to extent {dim}"));
            }
            sizes
        }
        None => {
            // Opset 18 `num_outputs`: parts of ceil(dim / n), the last one smaller.
            // Without it (opset 13) the node's own output count gives equal parts.
            let (n, uneven_ok) = match ops.node.attrs.contains_key("num_outputs") {
                true => (ops.node.attr_int("num_outputs", 0), true),
                false => (ops.node.outputs.len() as i64, false),
            };
            if n < 1 {
                return Err("Split needs `split`, `num_outputs` or at least one output".into());
            }
            // More parts than elements leave empty parts; a bound keeps the list sane.
            if n as u64 > dim.max(MAX_EMPTY_PARTS) as u64 {
                return Err(format!("extent {dim} does not split into {n} parts"));
            }
            let n = n as usize;
            let part = dim.div_ceil(n);
            if (!uneven_ok && dim % n != 0) || part * (n - 1) > dim {
                return Err(format!("extent {dim} does not split into {n} parts"));
            }
            let mut sizes = vec![part; n];
            sizes[n - 1] = dim - part * (n - 1);
            sizes
        }
    };
    Ok(sizes
        .into_iter()
        .map(|s| {
            let mut shape = x.clone();
            shape[axis] = s;
            (*dtype, shape)
        })
        .collect())
}

/// The most parts Split makes of an extent smaller than the part count.
const MAX_EMPTY_PARTS: usize = 1024;

/// Per sliced axis: (axis, first index, step, count), ONNX's clamping applied.
pub(super) type SliceAxes = Vec<(usize, i64, i64, usize)>;

/// Resolves Slice's `starts`, `ends`, `axes` and `steps` against the input shape `x`.
///
/// As in ONNX: negative starts and ends count from the end; then for a positive step
/// both clamp to `[0, dim]`, for a negative step `start` clamps to `[0, dim - 1]` and `end`
/// to `[-1, dim - 1]`; the count is `ceil((end - start) / step)` or 0.
fn slice_axes(ops: &Operands<'_>, x: &[usize]) -> Result<SliceAxes, String> {
    let starts = ops.required_ints(1, "starts")?;
    let ends = ops.required_ints(2, "ends")?;
    let n = starts.len();
    let axes = match ops.ints(3, "axes")? {
        Some(a) => unique_axes(&a, x.len())?,
        None => (0..n.min(x.len())).collect(),
    };
    let steps = ops.ints(4, "steps")?.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(format!(
            "Slice starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} differ in length"
        ));
    }
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let (axis, step) = (axes[k], steps[k]);
        let dim = x[axis] as i64;
        let from_end = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (start, end) = (from_end(starts[k]), from_end(ends[k]));
        let (start, count) = match step {
            0 => return Err("Slice step 0".into()),
            s if s > 0 => {
                let (b, e) = (start.clamp(0, dim), end.clamp(0, dim));
                (b, if e > b { (e - b - 1) / s + 1 } else { 0 })
            }
            _ if dim == 0 => (0, 0),
            s => {
                let (b, e) = (start.clamp(0, dim - 1), end.clamp(-1, dim - 1));
                // -s may overflow only for i64::MIN, which any extent fits into once.
                let stride = s.checked_neg().unwrap_or(i64::MAX);
                (b, if b > e { (b - e - 1) / stride + 1 } else { 0 })
            }
        };
        out.push((axis, start, step, count as usize));
    }
    Ok(out)
}

fn slice(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let mut out = x.clone();
    for (axis, _, _, count) in slice_axes(ops, x)? {
        out[axis] = count;
    }
    Ok(vec![(*dtype, out)])
}

fn gather(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let (idx_dtype, indices) = ops.input(1)?;
    if !matches!(idx_dtype, DType::I32 | DType::I64) {
        return Err(format!(
            "Gather indices must be i32 or i64, got {idx_dtype}"
        ));
    }
    let axis = normalize_axis(ops.node.attr_int("axis", 0), x.len())?;
    let mut out = x[..axis].to_vec();
    out.extend(indices);
    out.extend(&x[axis + 1..]);
    Ok(vec![(*dtype, out)])
}

fn expand(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let target = ops
        .required_ints(1, "shape")?
        .iter()
        .map(|&v| extent(v, "Expand shape"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![(*dtype, broadcast_shapes(x, &target)?)])
}

/// Pad's begin and end amounts (negative crops) for every axis of `x`.
fn pad_amounts(ops: &Operands<'_>, x: &[usize]) -> Result<(Vec<i64>, Vec<i64>), String> {
    let pads = ops.required_ints(1, "pads")?;
    let axes = match ops.ints(3, "axes")? {
        Some(a) => unique_axes(&a, x.len())?,
        None => (0..x.len()).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!(
            "pads {pads:?} must hold 2 values per padded axis ({})",
            axes.len()
        ));
    }
    let (mut begin, mut end) = (vec![0; x.len()], vec![0; x.len()]);
    for (k, &a) in axes.iter().enumerate() {
        begin[a] = pads[k];
        end[a] = pads[k + axes.len()];
    }
    Ok((begin, end))
}

fn pad(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let (begin, end) = pad_amounts(ops, x)?;
    let mode = ops.node.attr_str("mode", "constant");
    let mut out = Vec::with_capacity(x.len());
    for (d, &len) in x.iter().enumerate() {
        // Negative pads crop first; the mode then pads the cropped extent.
        let kept = (len as i64)
            .saturating_add(begin[d].min(0))
            .saturating_add(end[d].min(0));
        let grow = begin[d].max(0).max(end[d].max(0));
        if kept < 0 {
            return Err(format!("pads crop more than the extent {len} of axis {d}"));
        }
        match mode {
            "constant" => {}
            "edge" | "wrap" if grow > 0 && kept == 0 => {
                return Err(format!("{mode} padding of the empty axis {d}"));
            }
            "reflect" if grow > 0 && grow >= kept => {
                return Err(format!(
                    "reflect padding {grow} on axis {d} needs an extent above it, got {kept}"
                ));
            }
            "edge" | "reflect" | "wrap" => {}
            other => return Err(format!("unknown Pad mode '{other}'")),
        }
        out.push(extent(
            kept.saturating_add(begin[d].max(0))
                .saturating_add(end[d].max(0)),
            "padded extent",
        )?);
    }
    Ok(vec![(*dtype, out)])
}

fn tile(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (dtype, x) = ops.x()?;
    let repeats = ops.required_ints(1, "repeats")?;
    if repeats.len() != x.len() {
        return Err(format!("repeats {repeats:?} do not match rank {}", x.len()));
    }
    let out = x
        .iter()
        .zip(&repeats)
        .map(|(&d, &r)| {
            d.checked_mul(extent(r, "repeats")?)
                .ok_or_else(|| "Tile output too large".to_string())
        })
        .collect::<Result<_, _>>()?;
    Ok(vec![(*dtype, out)])
}

/// The axes Shape reports: `start` and `end` count from the end when negative and clamp
/// to `[0, rank]`.
pub(super) fn shape_range(node: &Node, rank: usize) -> (usize, usize) {
    let r = rank as i64;
    let at = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
    let start = at(node.attr_int("start", 0));
    let end = at(node.attr_int("end", r));
    (start, end.max(start))
}

fn shape_of(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (_, x) = ops.x()?;
    let (start, end) = shape_range(ops.node, x.len());
    Ok(vec![(DType::I64, vec![end - start])])
}

/// The dtype of an ONNX `TensorProto` data type code, for those the IR has.
pub(super) fn onnx_dtype(code: i64) -> Result<DType, String> {
    Ok(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        _ => return Err(format!("ONNX data type {code} has no IR dtype")),
    })
}

fn constant_of_shape(ops: &Operands<'_>) -> Result<Outputs, String> {
    let (_, s) = ops.x()?;
    if s.len() != 1 {
        return Err(format!(
            "ConstantOfShape needs a 1-D shape operand, got {s:?}"
        ));
    }
    let shape = ops
        .required_ints(0, "shape")?
        .iter()
        .map(|&v| extent(v, "ConstantOfShape shape"))
        .collect::<Result<_, _>>()?;
    let dtype = onnx_dtype(ops.node.attr_int("value_dtype", 1))?;
    Ok(vec![(dtype, shape)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Attr;

    fn run(
        op: OpKind,
        inputs: &[(DType, Vec<usize>)],
        consts: &[(usize, Vec<i64>)],
        attrs: &[(&str, Attr)],
    ) -> Result<Outputs, String> {
        let node = Node {
            name: "n".into(),
            op,
            inputs: (0..inputs.len()).collect(),
            outputs: vec![inputs.len()],
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        };
        let operand = |i: usize| consts.iter().find(|(j, _)| *j == i).map(|(_, v)| v.clone());
        infer(&node, inputs, &operand).unwrap()
    }

    #[test]
    fn slice_clamps_like_onnx() {
        let x = (DType::F32, vec![5]);
        let i1 = (DType::I64, vec![1]);
        let shape = |start: i64, end: i64, step: i64| {
            let consts = [
                (1, vec![start]),
                (2, vec![end]),
                (3, vec![0]),
                (4, vec![step]),
            ];
            let ins = [x.clone(), i1.clone(), i1.clone(), i1.clone(), i1.clone()];
            run(OpKind::Slice, &ins, &consts, &[]).map(|o| o[0].1[0])
        };
        assert_eq!(shape(1, i64::MAX, 1), Ok(4));
        assert_eq!(shape(-1, i64::MIN, -1), Ok(5));
        assert_eq!(shape(i64::MAX, i64::MIN, -2), Ok(3));
        assert_eq!(shape(3, 1, 1), Ok(0));
        assert_eq!(shape(0, 5, 2), Ok(3));
        assert!(shape(0, 5, 0).is_err());
    }

    #[test]
    fn split_parts_and_rank_limit() {
        let x = (DType::F32, vec![7, 2]);
        let outs = run(OpKind::Split, &[x], &[], &[("num_outputs", Attr::Int(3))]).unwrap();
        let parts: Vec<usize> = outs.iter().map(|(_, s)| s[0]).collect();
        assert_eq!(parts, vec![3, 3, 1]);
        let ones = (DType::I64, vec![9]);
        let r = run(OpKind::ConstantOfShape, &[ones], &[(0, vec![1; 9])], &[]);
        assert!(r.unwrap_err().contains("rank"));
    }
}
