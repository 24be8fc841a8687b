//! The ops whose output extents depend on operand values (NonMaxSuppression, Unique,
//! Compress), run with bounded outputs (ABI 1.3): each output arrives sized for the bound
//! of `shape::output_bounds`, and the op writes its result dense from the start and
//! reports the extents it produced with `TensorMut::set_shape`.
//!
//! Such a node is a partition of its own (the host plans what follows it once it has
//! run), so it does not go through the arena and the lowering: it reads the host's input
//! views and writes the output views directly, on the stored bytes of any dtype. These
//! ops move and compare data; they do not compute in bulk, so they are plain scalar code.

use std::cmp::Ordering;

use baton_delegate_api::dtype::{element_f64, element_int};
use baton_delegate_api::sdk::{Constants, DelegateError, TensorMut, TensorRef};
use baton_delegate_api::shape::{node_output_bounds, normalize_axis};
use baton_delegate_api::{DType, Graph, Node, OpKind};

/// A value-dependent node prepared at init: its attributes read, its constant operands
/// copied.
#[derive(Debug)]
pub(crate) struct DynamicNode {
    name: String,
    op: Op,
    /// Each output's dtype and bound, as the host must size it.
    outputs: Vec<(DType, Vec<usize>)>,
    /// Where each operand of the node comes from.
    operands: Vec<Operand>,
}

/// An operand: a constant (its dtype, shape and bytes, copied at init) or the graph input
/// at this index (one input may feed several operands).
#[derive(Debug)]
enum Operand {
    Constant(DType, Vec<usize>, Vec<u8>),
    Input(usize),
}

#[derive(Debug)]
enum Op {
    Compress { axis: Option<i64> },
    Unique { axis: Option<i64>, sorted: bool },
    Nms { center: bool },
}

/// Whether the CPU delegate takes this value-dependent node: `Err` says why not.
pub(crate) fn check(graph: &Graph, node: &Node, consts: &Constants<'_>) -> Result<(), String> {
    if graph.nodes.len() != 1 {
        return Err(format!(
            "{}'s output extents depend on its values: the CPU delegate runs it as a \
             partition of its own, with bounded outputs (ABI 1.3)",
            node.op
        ));
    }
    let needed = node_output_bounds(graph, node, consts)?
        .ok_or_else(|| format!("{} is not value-dependent", node.op))?;
    // The caller may bound more loosely than this (it may not read every constant); never
    // more tightly than what the op can write.
    for (&t, b) in node.outputs.iter().zip(&needed) {
        let d = &graph.tensors[t];
        let fits = d.dtype == b.dtype
            && d.static_shape().is_some_and(|s| {
                s.len() == b.bound.len()
                    && s.iter()
                        .zip(b.bound.iter().zip(&b.exact))
                        .all(|(&s, (&b, &exact))| if exact { s == b } else { s >= b })
            });
        if !fits {
            return Err(format!(
                "output '{}' must be declared at a bound of at least {} {:?} (ABI 1.3 \
                 bounded outputs), got {} {:?}",
                d.name, b.dtype, b.bound, d.dtype, d.shape
            ));
        }
    }
    match node.op {
        OpKind::Unique => {
            let dtype = graph.tensors[node.inputs[0]].dtype;
            if !(dtype.is_int()
                || matches!(
                    dtype,
                    DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::Bool
                ))
            {
                return Err(format!("Unique of {dtype}"));
            }
        }
        OpKind::NonMaxSuppression if !matches!(node.attr_int("center_point_box", 0), 0 | 1) => {
            return Err("center_point_box must be 0 or 1".into());
        }
        _ => {}
    }
    Ok(())
}

impl DynamicNode {
    /// Prepares `graph`'s one node (checked by [`check`]).
    pub(crate) fn new(graph: &Graph, consts: &Constants<'_>) -> Result<DynamicNode, DelegateError> {
        let node = &graph.nodes[0];
        check(graph, node, consts).map_err(DelegateError::unsupported)?;
        let axis = node
            .attrs
            .contains_key("axis")
            .then(|| node.attr_int("axis", 0));
        let op = match node.op {
            OpKind::Compress => Op::Compress { axis },
            OpKind::Unique => Op::Unique {
                axis,
                sorted: node.attr_int("sorted", 1) != 0,
            },
            _ => Op::Nms {
                center: node.attr_int("center_point_box", 0) == 1,
            },
        };
        let operands = node
            .inputs
            .iter()
            .map(|&t| {
                let d = &graph.tensors[t];
                if let Some(b) = consts.bytes(t) {
                    let shape = d.static_shape().unwrap_or_default();
                    return Ok(Operand::Constant(d.dtype, shape, b.to_vec()));
                }
                let i = graph.inputs.iter().position(|&g| g == t).ok_or_else(|| {
                    DelegateError::invalid(format!(
                        "operand '{}' of {} is neither a constant nor a graph input",
                        d.name,
                        node.label()
                    ))
                })?;
                Ok(Operand::Input(i))
            })
            .collect::<Result<_, DelegateError>>()?;
        let outputs = node
            .outputs
            .iter()
            .map(|&t| {
                let d = &graph.tensors[t];
                (d.dtype, d.static_shape().unwrap_or_default())
            })
            .collect();
        Ok(DynamicNode {
            name: node.label(),
            op,
            outputs,
            operands,
        })
    }

    /// `execute` for this node: the output views checked against the bounds, then the run
    /// (inputs were checked by the caller).
    pub(crate) fn execute(
        &self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        if outputs.len() != self.outputs.len() {
            return Err(DelegateError::invalid(format!(
                "expected {} outputs, got {}",
                self.outputs.len(),
                outputs.len()
            )));
        }
        for (i, (t, (dtype, bound))) in outputs.iter().zip(&self.outputs).enumerate() {
            let bytes = bound.iter().product::<usize>() * dtype.size();
            if t.dtype != *dtype || t.shape() != &bound[..] || t.data.len() != bytes {
                return Err(DelegateError::invalid(format!(
                    "output {i}: expected {dtype} {bound:?} (its bound), got {} {:?}",
                    t.dtype,
                    t.shape()
                )));
            }
            // Typed writes (i64 rows, counts) need the ABI's alignment.
            if !t.data.is_empty() && t.data.as_ptr().align_offset(8) != 0 {
                return Err(DelegateError::invalid(format!(
                    "output {i}: data is not 8-byte aligned"
                )));
            }
        }
        self.run(inputs, outputs)
            .map_err(|e| DelegateError::new(format!("node {}: {e}", self.name)))
    }

    /// Runs the node on the host's views (inputs in graph-input order).
    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<(), String> {
        let operands: Vec<TensorRef<'_>> = self
            .operands
            .iter()
            .map(|o| match o {
                Operand::Constant(dtype, shape, bytes) => Some(TensorRef {
                    dtype: *dtype,
                    shape,
                    data: bytes,
                    quant: None,
                }),
                Operand::Input(i) => inputs.get(*i).copied(),
            })
            .collect::<Option<_>>()
            .ok_or("fewer inputs than the node reads")?;
        match self.op {
            Op::Compress { axis } => compress(&operands[0], &operands[1], axis, &mut outputs[0]),
            Op::Unique { axis, sorted } => unique(&operands[0], axis, sorted, outputs),
            Op::Nms { center } => nms(&operands, center, &mut outputs[0]),
        }
    }
}

/// `x` as `[outer, extent, inner]` around `axis`, or flattened (`[1, len, 1]`).
fn around(
    x: &TensorRef<'_>,
    axis: Option<i64>,
) -> Result<(usize, usize, usize, Option<usize>), String> {
    Ok(match axis {
        None => (1, x.len(), 1, None),
        Some(a) => {
            let a = normalize_axis(a, x.shape.len())?;
            (
                x.shape[..a].iter().product(),
                x.shape[a],
                x.shape[a + 1..].iter().product(),
                Some(a),
            )
        }
    })
}

/// `x`'s shape with `count` along `axis`, or `[count]` flattened.
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

/// Writes slices `picked` of `x` (seen as `[outer, extent, inner]`) into `out`, in order.
fn gather_slices(
    x: &TensorRef<'_>,
    (outer, extent, inner): (usize, usize, usize),
    picked: &[usize],
    out: &mut [u8],
) {
    let row = inner * x.dtype.size();
    let mut at = 0;
    for o in 0..outer {
        for &j in picked {
            let from = (o * extent + j) * row;
            out[at..at + row].copy_from_slice(&x.data[from..from + row]);
            at += row;
        }
    }
}

fn compress(
    x: &TensorRef<'_>,
    cond: &TensorRef<'_>,
    axis: Option<i64>,
    out: &mut TensorMut<'_>,
) -> Result<(), String> {
    let (outer, extent, inner, axis) = around(x, axis)?;
    if cond.shape.len() != 1 || cond.len() > extent {
        return Err(format!(
            "condition {:?} must be 1-D with at most {extent} entries",
            cond.shape
        ));
    }
    let picked: Vec<usize> = (0..cond.len()).filter(|&j| cond.data[j] != 0).collect();
    gather_slices(x, (outer, extent, inner), &picked, out.data);
    out.set_shape(&shape_with(x.shape, axis, picked.len()));
    Ok(())
}

/// A key per element that orders as the reference compares values: integers exactly,
/// floats by value with `-0.0 == 0.0` and every NaN equal and above every number.
fn key(x: &TensorRef<'_>, i: usize) -> i128 {
    if let Some(v) = element_int(x.dtype, x.data, i) {
        return v;
    }
    let v = element_f64(x.dtype, x.data, i);
    if v.is_nan() {
        return i128::MAX;
    }
    // IEEE order as signed integers: flip the magnitude bits of negatives.
    let b = (if v == 0.0 { 0.0f64 } else { v }).to_bits() as i64;
    i128::from(b ^ (((b >> 63) as u64) >> 1) as i64)
}

fn unique(
    x: &TensorRef<'_>,
    axis: Option<i64>,
    sorted: bool,
    outputs: &mut [TensorMut<'_>],
) -> Result<(), String> {
    let (outer, extent, inner, axis) = around(x, axis)?;
    // Slice j's element keys, contiguous, in row-major order of its elements.
    let per = outer * inner;
    let mut keys = vec![0i128; extent * per];
    for o in 0..outer {
        for j in 0..extent {
            for i in 0..inner {
                keys[j * per + o * inner + i] = key(x, (o * extent + j) * inner + i);
            }
        }
    }
    let slice = |j: usize| &keys[j * per..(j + 1) * per];
    let cmp = |i: &usize, j: &usize| -> Ordering { slice(*i).cmp(slice(*j)) };
    // A stable sort groups equal slices, the first occurrence leading each group.
    let mut order: Vec<usize> = (0..extent).collect();
    order.sort_by(cmp);
    let mut group_first = vec![0usize; extent];
    for k in 0..order.len() {
        let j = order[k];
        group_first[j] = match k.checked_sub(1).map(|p| order[p]) {
            Some(p) if slice(p) == slice(j) => group_first[p],
            _ => j,
        };
    }
    let mut firsts: Vec<usize> = (0..extent).filter(|&j| group_first[j] == j).collect();
    if sorted {
        firsts.sort_by(cmp);
    }
    let mut rank_of = vec![0usize; extent];
    for (r, &f) in firsts.iter().enumerate() {
        rank_of[f] = r;
    }
    let u = firsts.len();
    // Y, then the optional indices, inverse_indices and counts, as many as the node has.
    let mut outs = outputs.iter_mut();
    if let Some(y) = outs.next() {
        gather_slices(x, (outer, extent, inner), &firsts, y.data);
        y.set_shape(&shape_with(x.shape, axis, u));
    }
    if let Some(indices) = outs.next() {
        for (v, &f) in indices.values_mut::<i64>().iter_mut().zip(&firsts) {
            *v = f as i64;
        }
        indices.set_shape(&[u]);
    }
    let inverse: Vec<usize> = (0..extent).map(|j| rank_of[group_first[j]]).collect();
    if let Some(inv) = outs.next() {
        for (v, &r) in inv.values_mut::<i64>().iter_mut().zip(&inverse) {
            *v = r as i64;
        }
    }
    if let Some(counts) = outs.next() {
        let cnt: &mut [i64] = counts.values_mut();
        cnt[..u].fill(0);
        for &r in &inverse {
            cnt[r] += 1;
        }
        counts.set_shape(&[u]);
    }
    Ok(())
}

/// One optional one-element operand, `None` when omitted (absent or 0 elements).
fn scalar<T: bytemuck::Pod>(inputs: &[TensorRef<'_>], i: usize) -> Option<T> {
    let t = inputs.get(i).filter(|t| !t.is_empty())?;
    Some(bytemuck::pod_read_unaligned(
        t.data.get(..std::mem::size_of::<T>())?,
    ))
}

/// Greedy non-maximum suppression per batch and class: boxes by descending score (equal
/// scores in box order), a box kept unless it overlaps a kept one by more than the
/// threshold, at most `max_output_boxes_per_class` per class. Overlaps in f32, so that a
/// box at the threshold lands on the same side as in ONNX Runtime and the reference.
fn nms(inputs: &[TensorRef<'_>], center: bool, out: &mut TensorMut<'_>) -> Result<(), String> {
    let (boxes, scores) = (&inputs[0], &inputs[1]);
    let (batches, n, classes) = match (boxes.shape, scores.shape) {
        ([b, n, 4], [sb, c, sn]) if sb == b && sn == n => (*b, *n, *c),
        _ => {
            return Err(format!(
                "boxes {:?} and scores {:?} must be [batch, boxes, 4] and [batch, classes, boxes]",
                boxes.shape, scores.shape
            ))
        }
    };
    let max_out = scalar::<i64>(inputs, 2).unwrap_or(0).max(0) as usize;
    let iou_threshold = scalar::<f32>(inputs, 3).unwrap_or(0.0);
    let score_threshold = scalar::<f32>(inputs, 4);
    let b: Vec<f32> = boxes
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let s: Vec<f32> = scores
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let rows: &mut [i64] = out.values_mut();
    let mut written = 0;
    let mut order: Vec<usize> = Vec::with_capacity(n);
    let mut kept: Vec<usize> = Vec::new();
    for batch in 0..batches {
        // Each box as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
        let corners: Vec<[f32; 4]> = (0..n)
            .map(|i| {
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
            })
            .collect();
        for class in 0..classes {
            let sc = &s[(batch * classes + class) * n..][..n];
            order.clear();
            order.extend((0..n).filter(|&i| score_threshold.is_none_or(|t| sc[i] > t)));
            order.sort_by(|&i, &j| sc[j].total_cmp(&sc[i]));
            kept.clear();
            for &i in &order {
                if kept.len() >= max_out {
                    break;
                }
                if kept
                    .iter()
                    .all(|&k| iou(&corners[k], &corners[i]) <= iou_threshold)
                {
                    kept.push(i);
                }
            }
            for &i in &kept {
                rows[written * 3..written * 3 + 3].copy_from_slice(&[
                    batch as i64,
                    class as i64,
                    i as i64,
                ]);
                written += 1;
            }
        }
    }
    out.set_shape(&[written, 3]);
    Ok(())
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
