//! The Reduce ops beyond the fast Mean, Sum and Max of `tensor.rs` (Min, Prod, L1, L2,
//! LogSumExp, SumSquare, and every kind over axes that are not one contiguous run), and
//! ArgMax/ArgMin.
//!
//! The arithmetic is the reference's: sums and products in f64 rounded once, Max and
//! Min propagating NaN, LogSumExp as `max + ln(sum(exp(x - max)))` with an infinite or
//! NaN maximum as the result. The empty reductions give the identities (Min +inf, Prod
//! 1, L1/L2/SumSquare 0, LogSumExp -inf).

use super::elementwise::nan_max;
use super::int::Held;
use super::tensor::Reduce;
use super::{RunCtx, Sources, Src};
#[cfg(target_arch = "x86_64")]
use crate::gemm::Isa;

/// Where the elements of each output of a reduction are: the input seen as `[outer,
/// count, inner]` when the reduced axes are one run, else every output's first element
/// and the offsets of its set from there.
#[derive(Clone, Debug)]
pub(crate) enum ReduceLayout {
    Run {
        outer: usize,
        count: usize,
        inner: usize,
    },
    Scattered {
        /// Per output element (in output order), the input index of its first element.
        base: Vec<usize>,
        /// The offsets of the reduced set, in input order.
        offsets: Vec<usize>,
    },
}

impl ReduceLayout {
    /// The layout of reducing `x` over the flagged axes.
    pub fn new(x: &[usize], flags: &[bool]) -> ReduceLayout {
        if let Some((first, last)) = super::tensor::reduced_run(x, flags) {
            return ReduceLayout::Run {
                outer: x[..first].iter().product(),
                count: x[first..=last].iter().product(),
                inner: x[last + 1..].iter().product(),
            };
        }
        let mut strides = vec![1usize; x.len()];
        for d in (0..x.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * x[d + 1];
        }
        // The input indices of every combination of the chosen axes, odometer order.
        let walk = |reduced: bool| -> Vec<usize> {
            let dims: Vec<usize> = (0..x.len()).filter(|&d| flags[d] == reduced).collect();
            let n: usize = dims.iter().map(|&d| x[d]).product();
            let mut out = Vec::with_capacity(n);
            let mut index = vec![0usize; dims.len()];
            for _ in 0..n {
                out.push(index.iter().zip(&dims).map(|(i, &d)| i * strides[d]).sum());
                for k in (0..dims.len()).rev() {
                    index[k] += 1;
                    if index[k] < x[dims[k]] {
                        break;
                    }
                    index[k] = 0;
                }
            }
            out
        };
        ReduceLayout::Scattered {
            base: walk(false),
            offsets: walk(true),
        }
    }

    /// The number of elements each output reduces.
    pub fn count(&self) -> usize {
        match self {
            ReduceLayout::Run { count, .. } => *count,
            ReduceLayout::Scattered { offsets, .. } => offsets.len(),
        }
    }

    /// The number of outputs.
    pub fn outputs(&self) -> usize {
        match self {
            ReduceLayout::Run { outer, inner, .. } => outer * inner,
            ReduceLayout::Scattered { base, .. } => base.len(),
        }
    }

    /// The input indices output `o` reduces, in input order.
    #[inline]
    pub fn set(&self, o: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        let (first, step) = match self {
            ReduceLayout::Run { count, inner, .. } => {
                let inner = (*inner).max(1);
                ((o / inner) * count * inner + o % inner, inner)
            }
            ReduceLayout::Scattered { base, .. } => (base[o], 0),
        };
        (0..self.count()).map(move |k| match self {
            ReduceLayout::Scattered { offsets, .. } => first + offsets[k],
            _ => first + k * step,
        })
    }

    /// The bytes of the tables built at init.
    pub fn owned_bytes(&self) -> usize {
        match self {
            ReduceLayout::Run { .. } => 0,
            ReduceLayout::Scattered { base, offsets } => {
                super::vec_bytes(base) + super::vec_bytes(offsets)
            }
        }
    }
}

/// A float reduction of any kind over any set of axes.
#[derive(Clone, Debug)]
pub(crate) struct FloatReduceOp {
    pub x: Src,
    pub layout: ReduceLayout,
    pub kind: Reduce,
}

impl FloatReduceOp {
    pub fn reserve(&self, ctx: &mut RunCtx) {
        if let ReduceLayout::Run { inner, .. } = self.layout {
            ctx.reserve_acc(inner);
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let acc = &mut ctx.acc;
        match ctx.kernel.isa() {
            // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512F => unsafe { self.run_avx512(x, out, acc) },
            // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { self.run_avx2(x, out, acc) },
            _ => self.run_any(x, out, acc),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn run_avx512(&self, x: &[f32], out: &mut [f32], acc: &mut [f64]) {
        self.run_any(x, out, acc)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self, x: &[f32], out: &mut [f32], acc: &mut [f64]) {
        self.run_any(x, out, acc)
    }

    /// The loops, inlined into one function per vector width (see `math::map`): the
    /// lanes of a contiguous row and the accumulators of whole lines vectorize.
    #[inline(always)]
    fn run_any(&self, x: &[f32], out: &mut [f32], acc: &mut [f64]) {
        let kind = self.kind;
        match self.layout {
            // Contiguous sets: one row per output.
            ReduceLayout::Run {
                count, inner: 1, ..
            } if count > 0 => {
                for (d, row) in out.iter_mut().zip(x.chunks_exact(count)) {
                    *d = reduce_row(kind, row);
                }
            }
            // The reduced axes before the last: whole lines of `inner` outputs at a time.
            ReduceLayout::Run {
                outer,
                count,
                inner,
            } if inner > 1 && !matches!(kind, Reduce::LogSumExp) => {
                let acc = &mut acc[..inner];
                for o in 0..outer {
                    let block = &x[o * count * inner..(o + 1) * count * inner];
                    acc.fill(identity(kind));
                    for line in block.chunks_exact(inner) {
                        acc.iter_mut()
                            .zip(line)
                            .for_each(|(a, &v)| *a = step(kind, *a, v));
                    }
                    let dst = &mut out[o * inner..(o + 1) * inner];
                    dst.iter_mut()
                        .zip(acc.iter())
                        .for_each(|(d, &a)| *d = finish(kind, a, count));
                }
            }
            _ => {
                for (o, d) in out.iter_mut().enumerate().take(self.layout.outputs()) {
                    *d = reduce_set(kind, self.layout.set(o).map(|i| x[i]), self.layout.count());
                }
            }
        }
    }
}

/// The start of an accumulation (f64; Max and Min hold f32 values exactly).
#[inline(always)]
fn identity(kind: Reduce) -> f64 {
    match kind {
        Reduce::Max | Reduce::LogSumExp => f64::NEG_INFINITY,
        Reduce::Min => f64::INFINITY,
        Reduce::Prod => 1.0,
        _ => 0.0,
    }
}

/// One element into the accumulation (LogSumExp's first pass is its maximum).
#[inline(always)]
fn step(kind: Reduce, a: f64, v: f32) -> f64 {
    let v = v as f64;
    match kind {
        Reduce::Max | Reduce::LogSumExp => {
            if v > a || v.is_nan() {
                v
            } else {
                a
            }
        }
        Reduce::Min => {
            if v < a || v.is_nan() {
                v
            } else {
                a
            }
        }
        Reduce::Prod => a * v,
        Reduce::L1 => a + v.abs(),
        Reduce::L2 | Reduce::SumSquare => a + v * v,
        Reduce::Sum | Reduce::Mean => a + v,
    }
}

/// The result from the accumulation of `count` elements (not LogSumExp's).
#[inline(always)]
fn finish(kind: Reduce, a: f64, count: usize) -> f32 {
    match kind {
        Reduce::Mean => (a / count as f64) as f32,
        Reduce::L2 => a.sqrt() as f32,
        _ => a as f32,
    }
}

/// The reduction of one set of `count` elements, in input order.
#[inline]
fn reduce_set(kind: Reduce, set: impl Iterator<Item = f32> + Clone, count: usize) -> f32 {
    let a = set.clone().fold(identity(kind), |a, v| step(kind, a, v));
    if kind != Reduce::LogSumExp {
        return finish(kind, a, count);
    }
    if !a.is_finite() {
        return a as f32;
    }
    let sum: f64 = set.map(|v| (v as f64 - a).exp()).sum();
    (a + sum.ln()) as f32
}

/// [`reduce_set`] of a contiguous row, with independent lanes where the kind allows the
/// reordering (sums in f64, and the exact Max and Min); products stay in order, as the
/// reference rounds them.
#[inline(always)]
fn reduce_row(kind: Reduce, row: &[f32]) -> f32 {
    match kind {
        Reduce::Sum | Reduce::Mean | Reduce::L1 | Reduce::L2 | Reduce::SumSquare => {
            let mut lanes = [0f64; 8];
            let mut chunks = row.chunks_exact(8);
            for c in &mut chunks {
                lanes
                    .iter_mut()
                    .zip(c)
                    .for_each(|(l, &v)| *l = step(kind, *l, v));
            }
            let rest = chunks
                .remainder()
                .iter()
                .fold(0.0, |a, &v| step(kind, a, v));
            let a = (lanes[0] + lanes[1] + lanes[2] + lanes[3])
                + (lanes[4] + lanes[5] + lanes[6] + lanes[7])
                + rest;
            finish(kind, a, row.len())
        }
        Reduce::Max | Reduce::Min | Reduce::LogSumExp => {
            let extreme = if kind == Reduce::Min {
                let mut lanes = [f32::INFINITY; 16];
                let mut chunks = row.chunks_exact(16);
                for c in &mut chunks {
                    lanes
                        .iter_mut()
                        .zip(c)
                        .for_each(|(l, &v)| *l = nan_min(*l, v));
                }
                let rest = chunks.remainder().iter().chain(&lanes).copied();
                rest.fold(f32::INFINITY, nan_min)
            } else {
                let mut lanes = [f32::NEG_INFINITY; 16];
                let mut chunks = row.chunks_exact(16);
                for c in &mut chunks {
                    lanes
                        .iter_mut()
                        .zip(c)
                        .for_each(|(l, &v)| *l = nan_max(*l, v));
                }
                let rest = chunks.remainder().iter().chain(&lanes).copied();
                rest.fold(f32::NEG_INFINITY, nan_max)
            };
            if kind != Reduce::LogSumExp || !extreme.is_finite() {
                return extreme;
            }
            let m = extreme as f64;
            let sum: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            (m + sum.ln()) as f32
        }
        Reduce::Prod => reduce_set(kind, row.iter().copied(), row.len()),
    }
}

/// The smaller of two values, NaN if either is NaN.
#[inline(always)]
fn nan_min(acc: f32, v: f32) -> f32 {
    if v < acc || v.is_nan() {
        v
    } else {
        acc
    }
}

/// ArgMax or ArgMin along one axis (the input seen as `[outer, n, inner]`) into i64
/// positions, as the reference: NaN beats every number (the first NaN is found, or the
/// last with `last`), ties keep the first position (the last with `last`).
#[derive(Clone, Debug)]
pub(crate) struct ArgOp {
    pub x: Src,
    pub held: Held,
    pub max: bool,
    pub last: bool,
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
}

impl ArgOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let (n, inner) = (self.n, self.inner);
        match self.held {
            // Contiguous lines (the last axis): the extreme by running lanes, then its
            // first (or last) position.
            Held::F32 if inner == 1 && n > 0 => {
                let x = sources.get(self.x);
                for (o, line) in x[..self.outer * n].chunks_exact(n).enumerate() {
                    let best = line_extreme(line, self.max, self.last);
                    Held::I64.put_int(out, o, best as i64);
                }
            }
            Held::F32 => {
                let x = sources.get(self.x);
                let (max, last) = (self.max, self.last);
                self.scan(out, |i| x[i], |a, b| better_f32(a, b, max, last));
            }
            held => {
                let x = sources.bytes(self.x);
                let better = |a: i64, b: i64| {
                    if a == b {
                        self.last
                    } else {
                        (a > b) == self.max
                    }
                };
                self.scan(out, |i| held.int(x, i), better);
            }
        }
        debug_assert!(out.len() >= self.outer * inner * 8 || n == 0);
    }

    /// The best position of each line by `better(candidate, best)`.
    #[inline(always)]
    fn scan<T: Copy>(
        &self,
        out: &mut [u8],
        get: impl Fn(usize) -> T,
        better: impl Fn(T, T) -> bool,
    ) {
        let (n, inner) = (self.n, self.inner);
        for o in 0..self.outer {
            for i in 0..inner {
                let at = |k: usize| (o * n + k) * inner + i;
                let mut best = 0usize;
                let mut value = get(at(0));
                for k in 1..n {
                    let v = get(at(k));
                    if better(v, value) {
                        (best, value) = (k, v);
                    }
                }
                Held::I64.put_int(out, o * inner + i, best as i64);
            }
        }
    }
}

/// Whether `a` replaces the best `b` so far in ArgMax (`max`) or ArgMin: NaN beats every
/// number, and a later NaN replaces a NaN only with `last`; equal values too.
#[inline(always)]
fn better_f32(a: f32, b: f32, max: bool, last: bool) -> bool {
    if b.is_nan() {
        return last && a.is_nan();
    }
    if a.is_nan() {
        return true;
    }
    if a == b {
        last
    } else {
        (a > b) == max
    }
}

/// The position ArgMax (`max`) or ArgMin gives in a non-empty contiguous line: the
/// extreme (NaN if there is one) by sixteen independent lanes, then the first (or, with
/// `last`, the last) element equal to it, which is [`better_f32`]'s choice: equal values
/// (-0 and +0 included) tie, and a NaN beats every number.
#[inline]
fn line_extreme(line: &[f32], max: bool, last: bool) -> usize {
    let pick = |a: f32, v: f32| -> f32 {
        let wins = if max { v > a } else { v < a };
        if wins || v.is_nan() {
            v
        } else {
            a
        }
    };
    let start = if max {
        f32::NEG_INFINITY
    } else {
        f32::INFINITY
    };
    let mut lanes = [start; 16];
    let mut chunks = line.chunks_exact(16);
    for c in &mut chunks {
        lanes.iter_mut().zip(c).for_each(|(l, &v)| *l = pick(*l, v));
    }
    let m = chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(start, |a, &v| pick(a, v));
    let hit = |v: &f32| if m.is_nan() { v.is_nan() } else { *v == m };
    let found = if last {
        line.iter().rposition(hit)
    } else {
        line.iter().position(hit)
    };
    found.unwrap_or(0)
}

/// The position ArgMax (`max`) or ArgMin gives among `n > 0` values `get(0..n)`.
#[inline]
pub(crate) fn arg_best(n: usize, get: impl Fn(usize) -> f32, max: bool, last: bool) -> usize {
    let (mut best, mut value) = (0, get(0));
    for k in 1..n {
        let v = get(k);
        if better_f32(v, value, max, last) {
            (best, value) = (k, v);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scattered_sets_list_every_reduced_element() {
        // [3, 4, 5] over axes 0 and 2: output j reads x[a, j, c] for every a and c.
        let layout = ReduceLayout::new(&[3, 4, 5], &[true, false, true]);
        assert_eq!(layout.outputs(), 4);
        assert_eq!(layout.count(), 15);
        let set: Vec<usize> = layout.set(2).collect();
        assert_eq!(set[..6], [10, 11, 12, 13, 14, 30]);
        assert_eq!(set[14], 40 + 10 + 4);
        // A run: [2, 3, 4] over axis 1.
        let run = ReduceLayout::new(&[2, 3, 4], &[false, true, false]);
        assert_eq!(run.set(5).collect::<Vec<_>>(), [13, 17, 21]);
    }

    #[test]
    fn rows_match_sets_and_empty_sets_give_identities() {
        let row: Vec<f32> = (0..37).map(|i| (i as f32 - 17.5) * 0.25).collect();
        for kind in [
            Reduce::Sum,
            Reduce::Mean,
            Reduce::Max,
            Reduce::Min,
            Reduce::Prod,
            Reduce::L1,
            Reduce::L2,
            Reduce::LogSumExp,
            Reduce::SumSquare,
        ] {
            let (a, b) = (
                reduce_row(kind, &row),
                reduce_set(kind, row.iter().copied(), row.len()),
            );
            assert!((a - b).abs() <= 1e-6 * b.abs(), "{kind:?}: {a} vs {b}");
        }
        let empty = |k| reduce_set(k, std::iter::empty(), 0);
        assert_eq!(empty(Reduce::Min), f32::INFINITY);
        assert_eq!(empty(Reduce::Prod), 1.0);
        assert_eq!(empty(Reduce::L2), 0.0);
        assert_eq!(empty(Reduce::LogSumExp), f32::NEG_INFINITY);
        let nan = [1.0, f32::NAN, 3.0];
        assert!(reduce_row(Reduce::Min, &nan).is_nan());
        assert!(reduce_row(Reduce::LogSumExp, &nan).is_nan());
        assert_eq!(
            reduce_row(Reduce::LogSumExp, &[f32::INFINITY, 1.0]),
            f32::INFINITY
        );
    }
}
