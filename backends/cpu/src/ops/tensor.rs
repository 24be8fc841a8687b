//! Indexing and reduction: Gather, Slice, Split and ReduceMean, ReduceSum, ReduceMax over
//! a contiguous run of axes (the other reductions are in `reduce.rs`).
//!
//! Shapes, axes and slice bounds are resolved at init (they are constants); only Gather's
//! indices may arrive at execute time, as a subgraph input, and are then range-checked on
//! every run (an index outside `[-dim, dim)` is an error, as in the reference).

use baton_delegate_api::ir::{DType, Node, TensorId};
use baton_delegate_api::shape::normalize_axis;

use super::elementwise::nan_max;
use super::math::on_isa;
use super::{RunCtx, Sources, Src};

/// Gather's indices: constant, or an i32/i64 subgraph input read at execute time.
#[derive(Clone, Debug)]
pub(crate) enum Indices {
    Const(Vec<i64>),
    Input { index: usize, dtype: DType },
}

/// `out[o, i, j] = x[o, idx[i], j]` over `[outer, axis, inner]`.
#[derive(Clone, Debug)]
pub(crate) struct GatherOp {
    pub x: Src,
    pub indices: Indices,
    pub outer: usize,
    pub axis: usize,
    pub inner: usize,
}

impl GatherOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        self.run_t(sources, sources.get(self.x), out)
    }

    /// The gather of elements of any size: `x` is the data behind `self.x`.
    pub fn run_t<T: Copy>(
        &self,
        sources: &Sources<'_>,
        x: &[T],
        out: &mut [T],
    ) -> Result<(), String> {
        match &self.indices {
            Indices::Const(v) => self.gather(x, v.iter().copied(), out),
            Indices::Input { index, dtype } => {
                let bytes = sources.input_bytes(*index);
                if *dtype == DType::I32 {
                    let it = bytes
                        .chunks_exact(4)
                        .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64);
                    self.gather(x, it, out)
                } else {
                    let it = bytes
                        .chunks_exact(8)
                        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")));
                    self.gather(x, it, out)
                }
            }
        }
    }

    fn gather<T: Copy>(
        &self,
        x: &[T],
        indices: impl Iterator<Item = i64> + Clone,
        out: &mut [T],
    ) -> Result<(), String> {
        let (n, inner) = (self.axis as i64, self.inner);
        let count = indices.clone().count();
        for o in 0..self.outer {
            for (i, idx) in indices.clone().enumerate() {
                let k = if idx < 0 { idx + n } else { idx };
                if !(0..n).contains(&k) {
                    return Err(format!("Gather index {idx} is out of range for extent {n}"));
                }
                let src = ((o * self.axis) + k as usize) * inner;
                let dst = (o * count + i) * inner;
                out[dst..dst + inner].copy_from_slice(&x[src..src + inner]);
            }
        }
        Ok(())
    }
}

/// Slice (any steps, negative ones included), as a strided walk of the input: output
/// dimension `d` advances the input offset by `strides[d]` (signed).
#[derive(Clone, Debug)]
pub(crate) struct SliceOp {
    pub x: Src,
    pub start: usize,
    pub dims: Vec<usize>,
    pub strides: Vec<isize>,
}

impl SliceOp {
    /// `axes`: per sliced axis `(axis, first index, step, count)`, already clamped.
    pub fn new(x: Src, shape: &[usize], axes: &[(usize, i64, i64, usize)]) -> SliceOp {
        let mut step_of = vec![1isize; shape.len()];
        let mut dims = shape.to_vec();
        let mut start = 0isize;
        let mut elem = 1isize;
        let mut elem_strides = vec![0isize; shape.len()];
        for d in (0..shape.len()).rev() {
            elem_strides[d] = elem;
            elem *= shape[d] as isize;
        }
        for &(axis, first, step, count) in axes {
            dims[axis] = count;
            step_of[axis] = step as isize;
            if count > 0 {
                start += first as isize * elem_strides[axis];
            }
        }
        let strides = (0..shape.len())
            .map(|d| elem_strides[d] * step_of[d])
            .collect();
        SliceOp {
            x,
            start: start as usize,
            dims,
            strides,
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        self.run_t(sources.get(self.x), out);
    }

    /// The slice of elements of any size: `x` is the data behind `self.x`.
    pub fn run_t<T: Copy>(&self, x: &[T], out: &mut [T]) {
        strided_copy(x, self.start, &self.dims, &self.strides, out);
    }
}

/// Copies the elements at `start + sum(index[d] * strides[d])` for every index of `dims`,
/// in row-major order, into `out`.
fn strided_copy<T: Copy>(x: &[T], start: usize, dims: &[usize], strides: &[isize], out: &mut [T]) {
    if dims.contains(&0) || out.is_empty() {
        return;
    }
    let Some((&inner, outer)) = dims.split_last() else {
        out[0] = x[start];
        return;
    };
    let inner_stride = strides[dims.len() - 1];
    let mut index = [0usize; super::layout::MAX_RANK];
    let mut offset = start as isize;
    for row in out.chunks_exact_mut(inner) {
        if inner_stride == 1 {
            let o = offset as usize;
            row.copy_from_slice(&x[o..o + inner]);
        } else {
            for (j, v) in row.iter_mut().enumerate() {
                *v = x[(offset + j as isize * inner_stride) as usize];
            }
        }
        for d in (0..outer.len()).rev() {
            index[d] += 1;
            offset += strides[d];
            if index[d] < outer[d] {
                break;
            }
            offset -= strides[d] * outer[d] as isize;
            index[d] = 0;
        }
    }
}

/// Split along one axis: the parts are written one after another into one buffer.
#[derive(Clone, Debug)]
pub(crate) struct SplitOp {
    pub x: Src,
    pub outer: usize,
    /// The extent of the axis times the inner size: one outer row of the input.
    pub row: usize,
    /// Each part's extent times the inner size.
    pub parts: Vec<usize>,
}

impl SplitOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.get(self.x);
        let mut pos = 0;
        let mut first = 0;
        for &len in &self.parts {
            for o in 0..self.outer {
                let src = o * self.row + first;
                out[pos..pos + len].copy_from_slice(&x[src..src + len]);
                pos += len;
            }
            first += len;
        }
    }
}

/// What a reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    /// The f64 sum divided once by the count (`count = 0` gives NaN, 0/0).
    Mean,
    /// The f64 sum, rounded once.
    Sum,
    /// The maximum from -inf, NaN as soon as one element is NaN.
    Max,
    /// The minimum from +inf, NaN as soon as one element is NaN.
    Min,
    /// The f64 product in input order, rounded once.
    Prod,
    /// The f64 sum of absolute values, of squares, and that sum's square root.
    L1,
    SumSquare,
    L2,
    /// `max + ln(sum(exp(x - max)))` in f64; an infinite or NaN maximum is the result.
    LogSumExp,
}

impl Reduce {
    /// Whether the reduction of one element is that element (not so for L1, L2 and
    /// SumSquare, which map it).
    pub fn keeps_one(self) -> bool {
        !matches!(self, Reduce::L1 | Reduce::L2 | Reduce::SumSquare)
    }
}

/// ReduceMean, ReduceSum or ReduceMax over a contiguous run of axes: the input seen as
/// `[outer, count, inner]`, sums in f64 (as the reference).
#[derive(Clone, Debug)]
pub(crate) struct ReduceMeanOp {
    pub x: Src,
    pub outer: usize,
    pub count: usize,
    pub inner: usize,
    pub kind: Reduce,
}

impl ReduceMeanOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let (count, inner) = (self.count, self.inner);
        if inner == 0 {
            return;
        }
        if self.kind == Reduce::Max {
            return self.run_max(x, out);
        }
        let n = if self.kind == Reduce::Mean {
            count as f64
        } else {
            1.0
        };
        if inner == 1 {
            for (o, dst) in out.iter_mut().enumerate().take(self.outer) {
                *dst = (sum_f64(&x[o * count..(o + 1) * count]) / n) as f32;
            }
            return;
        }
        let shape = (self.outer, count, inner);
        column_sums(
            ctx.kernel.isa(),
            &ctx.pool,
            x,
            shape,
            out,
            #[inline(always)]
            |a| (a / n) as f32,
        );
    }

    /// The maximum: sixteen running lanes along a contiguous run, else line by line
    /// into the output row.
    fn run_max(&self, x: &[f32], out: &mut [f32]) {
        let (count, inner) = (self.count, self.inner);
        for o in 0..self.outer {
            let block = &x[o * count * inner..(o + 1) * count * inner];
            let dst = &mut out[o * inner..(o + 1) * inner];
            if inner == 1 {
                let mut lanes = [f32::NEG_INFINITY; 16];
                let mut chunks = block.chunks_exact(16);
                for c in &mut chunks {
                    lanes
                        .iter_mut()
                        .zip(c)
                        .for_each(|(l, &v)| *l = nan_max(*l, v));
                }
                dst[0] = chunks
                    .remainder()
                    .iter()
                    .chain(&lanes)
                    .copied()
                    .fold(f32::NEG_INFINITY, nan_max);
                continue;
            }
            dst.fill(f32::NEG_INFINITY);
            for line in block.chunks_exact(inner) {
                dst.iter_mut()
                    .zip(line)
                    .for_each(|(d, &v)| *d = nan_max(*d, v));
            }
        }
    }
}

/// For each of `outer` blocks of `count` lines of `inner` values in `x`, each column's sum
/// over the lines in f64, added in the order [`sum_f64`] adds a contiguous run (four
/// running sums by line index modulo 4, the lines past the last whole four apart), and
/// mapped by `fin` into `out[o * inner + column]`: a mean over the pixels then has the
/// same bits whether the image is held channels-first (a run per channel) or
/// channels-last (a column per channel), so a layout plan never changes a result.
/// Compiled for `isa`'s vectors (plain loops ran at the baseline's SSE2 width: a
/// tf2onnx-style classifier's mean over 112x112x64 took 137 us), and split among the
/// pool's threads by blocks of columns, so that every column's sum is one sequence of
/// additions whatever the thread count: the bits do not depend on it.
#[inline(always)]
pub(crate) fn column_sums(
    isa: crate::gemm::Isa,
    pool: &crate::pool::Pool,
    x: &[f32],
    (outer, count, inner): (usize, usize, usize),
    out: &mut [f32],
    fin: impl Fn(f64) -> f32 + Sync,
) {
    /// The most columns one task sums (its accumulators are on its stack).
    const MOST: usize = 256;
    if inner == 0 || outer == 0 {
        return;
    }
    assert!(
        x.len() >= outer * count * inner && out.len() >= outer * inner,
        "column sums out of bounds"
    );
    // Blocks of whole vectors, as many as threads where there is enough work.
    let work = outer * count * inner;
    let threads = if work >= 64 * 1024 { pool.threads() } else { 1 };
    let width = inner
        .div_ceil(threads)
        .next_multiple_of(16)
        .clamp(16, MOST)
        .min(inner);
    let blocks = inner.div_ceil(width);
    let whole = count - count % 4;
    let dst = crate::pool::Disjoint::new(&mut out[..outer * inner]);
    let task = |t: usize| {
        let (o, c0) = (t / blocks, (t % blocks) * width);
        let len = width.min(inner - c0);
        // SAFETY: task `t` alone writes columns `c0..c0 + len` of block `o`.
        let dst = unsafe { dst.range(o * inner + c0, len) };
        let block = &x[o * count * inner..(o + 1) * count * inner];
        on_isa(
            isa,
            #[inline(always)]
            || {
                let mut acc = [[0f64; MOST]; 5];
                for (i, line) in block.chunks_exact(inner).enumerate() {
                    let a = &mut acc[if i < whole { i % 4 } else { 4 }][..len];
                    a.iter_mut()
                        .zip(&line[c0..c0 + len])
                        .for_each(|(a, &v)| *a += v as f64);
                }
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = fin((acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]) + acc[4][j]);
                }
            },
        );
    };
    let tasks = outer * blocks;
    if threads == 1 || tasks == 1 {
        (0..tasks).for_each(task);
    } else {
        pool.run(tasks, &|t, _| task(t));
    }
}

/// A sum in f64 with four independent accumulators (element `i` of the first `len - len
/// % 4` in accumulator `i % 4`), the rest summed apart: `(a0 + a1) + (a2 + a3) + rest`.
pub(crate) fn sum_f64(v: &[f32]) -> f64 {
    let mut acc = [0f64; 4];
    let chunks = v.chunks_exact(4);
    let tail = chunks.remainder().iter().fold(0.0, |s, &x| s + x as f64);
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += x as f64;
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// The axes a ReduceMean node reduces (one flag per dimension of `x`), or `None` when it
/// is a no-op (empty axes with `noop_with_empty_axes`). Axes come from the constant input
/// 1 or the `axes` attribute; none at all means every axis.
pub(crate) fn reduced_axes(
    node: &Node,
    x: &[usize],
    consts: impl Fn(TensorId) -> Option<Vec<i64>>,
) -> Result<Option<Vec<bool>>, String> {
    let axes: Vec<i64> = match (node.inputs.get(1), node.attr_ints("axes")) {
        (Some(&t), _) => consts(t).ok_or("ReduceMean axes are not constant")?,
        (None, Some(a)) => a.to_vec(),
        (None, None) => Vec::new(),
    };
    if axes.is_empty() {
        if node.attr_int("noop_with_empty_axes", 0) != 0 {
            return Ok(None);
        }
        return Ok(Some(vec![true; x.len()]));
    }
    let mut flags = vec![false; x.len()];
    for &a in &axes {
        flags[normalize_axis(a, x.len())?] = true;
    }
    Ok(Some(flags))
}

/// The first and last reduced axis when every axis between them is reduced or of extent
/// 1 (so the input is `[outer, count, inner]`); `None` otherwise. With no reduced axis of
/// extent above 1, the run is the first flagged axis alone (or axis 0 for a scalar).
pub(crate) fn reduced_run(x: &[usize], flags: &[bool]) -> Option<(usize, usize)> {
    let flagged: Vec<usize> = (0..x.len()).filter(|&d| flags[d]).collect();
    let (&first, &last) = (flagged.first()?, flagged.last()?);
    (first..=last)
        .all(|d| flags[d] || x[d] == 1)
        .then_some((first, last))
}
