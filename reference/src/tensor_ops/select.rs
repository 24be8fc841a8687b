//! The ops whose output extents depend on operand values: NonMaxSuppression, Unique and
//! Compress. Each is computed whole into owned tensors, which gives the output shapes
//! ([`crate::expected_outputs`]) and then the bytes ([`crate::run_node`]).

use std::cmp::Ordering;

use baton_delegate_api::{dtype, DType, Node, OpKind, Tensor, TensorRef};

use super::{axis_of, data};
use crate::{shape_err, KernelError};

/// The outputs of a value-dependent `node` (operands checked by `supports`), or `None`
/// for any other op.
pub(crate) fn compute(
    node: &Node,
    inputs: &[TensorRef<'_>],
) -> Option<Result<Vec<Tensor>, KernelError>> {
    let r = match node.op {
        OpKind::NonMaxSuppression => nms(node, inputs),
        OpKind::Unique => unique(node, &inputs[0]),
        OpKind::Compress => compress(node, &inputs[0], &inputs[1]),
        _ => return None,
    };
    Some(r)
}

/// One optional one-element operand, `None` when omitted (absent or 0 elements).
fn scalar<T: bytemuck::Pod>(inputs: &[TensorRef<'_>], i: usize) -> Option<T> {
    inputs
        .get(i)
        .filter(|t| !t.is_empty())
        .and_then(|t| data::load::<T>(t).first().copied())
}

/// Greedy non-maximum suppression per batch and class (see `OpKind::NonMaxSuppression`).
/// Overlaps are computed in f32, as ONNX Runtime does, so boxes at the threshold land on
/// the same side.
fn nms(node: &Node, inputs: &[TensorRef<'_>]) -> Result<Vec<Tensor>, KernelError> {
    let (boxes, scores) = (&inputs[0], &inputs[1]);
    let (batches, n) = match (boxes.shape, scores.shape) {
        ([b, n, 4], [sb, _, sn]) if sb == b && sn == n => (*b, *n),
        _ => {
            return Err(shape_err(
                node,
                format!(
                "boxes {:?} and scores {:?} must be [batch, boxes, 4] and [batch, classes, boxes]",
                boxes.shape, scores.shape
            ),
            ))
        }
    };
    let classes = scores.shape[1];
    let max_out = scalar::<i64>(inputs, 2).unwrap_or(0).max(0) as usize;
    let iou_threshold = scalar::<f32>(inputs, 3).unwrap_or(0.0);
    let score_threshold = scalar::<f32>(inputs, 4);
    let center = match node.attr_int("center_point_box", 0) {
        0 => false,
        1 => true,
        v => {
            return Err(shape_err(
                node,
                format!("center_point_box must be 0 or 1, got {v}"),
            ))
        }
    };
    let b = data::load::<f32>(boxes);
    let s = data::load::<f32>(scores);
    // Each box as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
    let corners = |batch: usize, i: usize| -> [f32; 4] {
        let v = &b[(batch * n + i) * 4..][..4];
        if center {
            let (xc, yc, w, h) = (v[0], v[1], v[2], v[3]);
            [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
        } else {
            [
                v[0].min(v[2]),
                v[1].min(v[3]),
                v[0].max(v[2]),
                v[1].max(v[3]),
            ]
        }
    };
    let mut rows: Vec<i64> = Vec::new();
    for batch in 0..batches {
        let all: Vec<[f32; 4]> = (0..n).map(|i| corners(batch, i)).collect();
        for class in 0..classes {
            let sc = &s[(batch * classes + class) * n..][..n];
            let mut order: Vec<usize> = (0..n)
                .filter(|&i| score_threshold.is_none_or(|t| sc[i] > t))
                .collect();
            // Best score first; the sort is stable, so equal scores keep box order.
            order.sort_by(|&i, &j| sc[j].total_cmp(&sc[i]));
            let mut kept: Vec<usize> = Vec::new();
            for i in order {
                if kept.len() >= max_out {
                    break;
                }
                if kept.iter().all(|&k| iou(&all[k], &all[i]) <= iou_threshold) {
                    kept.push(i);
                }
            }
            for i in kept {
                rows.extend([batch as i64, class as i64, i as i64]);
            }
        }
    }
    let count = rows.len() / 3;
    Ok(vec![Tensor::from_bytes(
        DType::I64,
        &[count, 3],
        bytemuck::cast_slice(&rows),
    )])
}

/// Intersection over union of two boxes in corner form; 0 when either has no area.
fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let area = |r: &[f32; 4]| (r[2] - r[0]) * (r[3] - r[1]);
    let (aa, ab) = (area(a), area(b));
    if aa <= 0.0 || ab <= 0.0 {
        return 0.0;
    }
    let h = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let w = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = h * w;
    inter / (aa + ab - inter)
}

/// `x` seen as `[outer, extent, inner]` around an axis (or flattened: `[1, len, 1]`).
struct Slices<'a> {
    x: &'a TensorRef<'a>,
    outer: usize,
    extent: usize,
    inner: usize,
}

impl Slices<'_> {
    /// The element indices of slice `j`, in row-major order.
    fn elements(&self, j: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.outer).flat_map(move |o| {
            let base = (o * self.extent + j) * self.inner;
            base..base + self.inner
        })
    }

    /// The bytes of the slices `picked`, in that order, laid out as `x` with the axis
    /// holding `picked.len()` entries.
    fn gather(&self, picked: &[usize]) -> Vec<u8> {
        let es = self.x.dtype.size();
        let row = self.inner * es;
        let mut out = Vec::with_capacity(self.outer * picked.len() * row);
        for o in 0..self.outer {
            for &j in picked {
                let at = (o * self.extent + j) * row;
                out.extend_from_slice(&self.x.data[at..at + row]);
            }
        }
        out
    }
}

fn slices<'a>(
    node: &Node,
    x: &'a TensorRef<'a>,
    axis: Option<i64>,
) -> Result<(Slices<'a>, Option<usize>), KernelError> {
    Ok(match axis {
        None => (
            Slices {
                x,
                outer: 1,
                extent: x.len(),
                inner: 1,
            },
            None,
        ),
        Some(a) => {
            let axis = axis_of(node, a, x.shape.len())?;
            (
                Slices {
                    x,
                    outer: x.shape[..axis].iter().product(),
                    extent: x.shape[axis],
                    inner: x.shape[axis + 1..].iter().product(),
                },
                Some(axis),
            )
        }
    })
}

/// The output shape: `x`'s with `count` along `axis`, or `[count]` flattened.
fn shape_with(x: &[usize], axis: Option<usize>, count: usize) -> Vec<usize> {
    match axis {
        None => vec![count],
        Some(a) => {
            let mut s = x.to_vec();
            s[a] = count;
            s
        }
    }
}

/// Compares elements `i` and `j` of `x` by value: integers exactly, floats with NaN
/// above every number (NaNs equal one another) and `-0.0` equal to `0.0`.
fn compare(x: &TensorRef<'_>, i: usize, j: usize) -> Ordering {
    if let (Some(a), Some(b)) = (
        dtype::element_int(x.dtype, x.data, i),
        dtype::element_int(x.dtype, x.data, j),
    ) {
        return a.cmp(&b);
    }
    let (a, b) = (
        dtype::element_f64(x.dtype, x.data, i),
        dtype::element_f64(x.dtype, x.data, j),
    );
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// Unique (see `OpKind::Unique`): distinct values or slices, sorted or in order of first
/// occurrence, with their first positions, each input's position among them, and counts.
fn unique(node: &Node, x: &TensorRef<'_>) -> Result<Vec<Tensor>, KernelError> {
    let axis = node
        .attrs
        .contains_key("axis")
        .then(|| node.attr_int("axis", 0));
    let (sl, axis) = slices(node, x, axis)?;
    let cmp_slices = |i: usize, j: usize| -> Ordering {
        sl.elements(i)
            .zip(sl.elements(j))
            .map(|(a, b)| compare(x, a, b))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    // Distinct slices as first positions, in order of first occurrence.
    let mut firsts: Vec<usize> = Vec::new();
    let mut inverse_first: Vec<usize> = Vec::with_capacity(sl.extent);
    // Sorting the positions (stable) groups equal slices with the first one leading.
    let mut order: Vec<usize> = (0..sl.extent).collect();
    order.sort_by(|&i, &j| cmp_slices(i, j));
    let mut group_first = vec![0usize; sl.extent];
    for (k, &j) in order.iter().enumerate() {
        let prev = k.checked_sub(1).map(|p| order[p]);
        group_first[j] = match prev {
            Some(p) if cmp_slices(p, j).is_eq() => group_first[p],
            _ => j,
        };
    }
    for (j, &first) in group_first.iter().enumerate() {
        if first == j {
            firsts.push(j);
        }
        inverse_first.push(first);
    }
    if node.attr_int("sorted", 1) != 0 {
        firsts.sort_by(|&i, &j| cmp_slices(i, j));
    }
    let mut rank_of = vec![0usize; sl.extent];
    for (r, &f) in firsts.iter().enumerate() {
        rank_of[f] = r;
    }
    let inverse: Vec<i64> = inverse_first.iter().map(|&f| rank_of[f] as i64).collect();
    let mut counts = vec![0i64; firsts.len()];
    for &r in &inverse {
        counts[r as usize] += 1;
    }
    let u = firsts.len();
    let indices: Vec<i64> = firsts.iter().map(|&f| f as i64).collect();
    Ok(vec![
        Tensor::from_bytes(x.dtype, &shape_with(x.shape, axis, u), &sl.gather(&firsts)),
        Tensor::from_bytes(DType::I64, &[u], bytemuck::cast_slice(&indices)),
        Tensor::from_bytes(DType::I64, &[inverse.len()], bytemuck::cast_slice(&inverse)),
        Tensor::from_bytes(DType::I64, &[u], bytemuck::cast_slice(&counts)),
    ])
}

/// Compress (see `OpKind::Compress`): the slices (or elements) where `condition` is true.
fn compress(
    node: &Node,
    x: &TensorRef<'_>,
    condition: &TensorRef<'_>,
) -> Result<Vec<Tensor>, KernelError> {
    let axis = node
        .attrs
        .contains_key("axis")
        .then(|| node.attr_int("axis", 0));
    let (sl, axis) = slices(node, x, axis)?;
    if condition.shape.len() != 1 || condition.len() > sl.extent {
        return Err(shape_err(
            node,
            format!(
                "condition {:?} must be 1-D with at most {} entries",
                condition.shape, sl.extent
            ),
        ));
    }
    let picked: Vec<usize> = condition
        .data
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c != 0)
        .map(|(j, _)| j)
        .collect();
    Ok(vec![Tensor::from_bytes(
        x.dtype,
        &shape_with(x.shape, axis, picked.len()),
        &sl.gather(&picked),
    )])
}
