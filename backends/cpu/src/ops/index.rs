//! The running, masking, ranking and element-indexed ops of BTIR 1.3: CumSum, Trilu,
//! Hardmax, TopK and GatherElements. (DepthToSpace and SpaceToDepth are transposes of a
//! reshaped view, lowered to `layout.rs`'s transpose.)
//!
//! Each follows the reference: CumSum sums in f64 (integers wrapping) and rounds each
//! output once; Trilu zeroes with the dtype's zero as held; Hardmax and TopK count NaN as
//! the largest value and order equal values by position; an index outside its axis is
//! a run-time error naming it.

use super::int::Held;
use super::layout::Strided;
use super::reduce::arg_best;
use super::{RunCtx, Sources, Src};

/// Trilu: each `rows x cols` matrix keeps its upper (or lower) triangle from diagonal
/// `k`; the rest is set to `zero`, element by element of `size` bytes as held (an i8's
/// zero is the byte 0x80, see `crate::ops::int`).
#[derive(Clone, Debug)]
pub(crate) struct TriluOp {
    pub x: Src,
    pub batch: usize,
    pub rows: usize,
    pub cols: usize,
    pub size: usize,
    pub zero: u8,
    pub upper: bool,
    pub k: i64,
}

impl TriluOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.bytes(self.x);
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let (rows, cols, size) = (self.rows, self.cols, self.size);
        let n = self.batch * rows * cols * size;
        out[..n].copy_from_slice(&x[..n]);
        for (r, row) in out[..n].chunks_exact_mut(cols * size).enumerate() {
            // Element j is kept when j - i >= k (upper) or j - i <= k (lower).
            let edge = |t: i64| t.clamp(0, cols as i64) as usize;
            let i = (r % rows) as i64;
            let (lo, hi) = if self.upper {
                (0, edge(i.saturating_add(self.k)))
            } else {
                (edge(i.saturating_add(self.k).saturating_add(1)), cols)
            };
            row[lo * size..hi * size].fill(self.zero);
        }
    }
}

/// CumSum (or CumProd, `product`) along one axis of a tensor seen as `[outer, n, inner]`:
/// f32 running sums or products in f64 rounded at each output (vectorized across
/// `inner`), i32/i64 ones wrapping.
#[derive(Clone, Debug)]
pub(crate) struct CumSumOp {
    pub x: Src,
    pub held: Held,
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
    pub exclusive: bool,
    pub reverse: bool,
    /// Products (CumProd; an empty product is 1) instead of sums.
    pub product: bool,
}

impl CumSumOp {
    pub fn reserve(&self, ctx: &mut RunCtx) {
        ctx.reserve_acc(self.inner);
    }

    /// The position along the axis of the sum's `step`-th element.
    #[inline(always)]
    fn at(&self, step: usize) -> usize {
        if self.reverse {
            self.n - 1 - step
        } else {
            step
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let (n, inner) = (self.n, self.inner);
        if self.held == Held::F32 {
            let x = sources.get(self.x);
            let acc = &mut ctx.acc[..inner];
            for o in 0..self.outer {
                acc.fill(if self.product { 1.0 } else { 0.0 });
                for step in 0..n {
                    let start = (o * n + self.at(step)) * inner;
                    let (line, dst) = (&x[start..start + inner], &mut out[start..start + inner]);
                    if self.product && self.exclusive {
                        for ((a, d), &v) in acc.iter_mut().zip(dst.iter_mut()).zip(line) {
                            *d = *a as f32;
                            *a *= v as f64;
                        }
                    } else if self.product {
                        for ((a, d), &v) in acc.iter_mut().zip(dst.iter_mut()).zip(line) {
                            *a *= v as f64;
                            *d = *a as f32;
                        }
                    } else if self.exclusive {
                        for ((a, d), &v) in acc.iter_mut().zip(dst.iter_mut()).zip(line) {
                            *d = *a as f32;
                            *a += v as f64;
                        }
                    } else {
                        for ((a, d), &v) in acc.iter_mut().zip(dst.iter_mut()).zip(line) {
                            *a += v as f64;
                            *d = *a as f32;
                        }
                    }
                }
            }
            return;
        }
        let (x, held) = (sources.bytes(self.x), self.held);
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        for o in 0..self.outer {
            for i in 0..inner {
                let mut acc = self.product as i64;
                for step in 0..n {
                    let p = (o * n + self.at(step)) * inner + i;
                    let before = acc;
                    acc = if self.product {
                        acc.wrapping_mul(held.int(x, p))
                    } else {
                        acc.wrapping_add(held.int(x, p))
                    };
                    held.put_int(out, p, if self.exclusive { before } else { acc });
                }
            }
        }
    }
}

/// Hardmax: 1 at the position ArgMax gives (the first largest, NaN largest) of each line
/// along the axis of `[outer, n, inner]`, 0 elsewhere.
#[derive(Clone, Debug)]
pub(crate) struct HardmaxOp {
    pub x: Src,
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
}

impl HardmaxOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.get(self.x);
        let (n, inner) = (self.n, self.inner);
        out[..self.outer * n * inner].fill(0.0);
        if n == 0 {
            return;
        }
        for o in 0..self.outer {
            for i in 0..inner {
                let at = |k: usize| (o * n + k) * inner + i;
                let best = arg_best(n, |k| x[at(k)], true, false);
                out[at(best)] = 1.0;
            }
        }
    }
}

/// TopK along the axis of `[outer, n, inner]`: the `k` largest (or smallest) of each
/// line, sorted, NaN counting as the largest and equal values by position; values
/// moved as held (f32, i32 or i64), then the positions as i64, in one buffer.
#[derive(Clone, Debug)]
pub(crate) struct TopKOp {
    pub x: Src,
    pub held: Held,
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
    pub k: usize,
    pub largest: bool,
}

impl TopKOp {
    /// The words of the values and of the positions.
    pub fn out_len(&self) -> (usize, usize) {
        let count = self.outer * self.k * self.inner;
        let values = match self.held {
            Held::I64 => count * 2,
            // Stored bytes, with the slack every byte buffer carries.
            Held::I8 | Held::U8 => (count + crate::qgemm::SLACK).div_ceil(4),
            _ => count,
        };
        (values, count * 2)
    }

    pub fn reserve(&self, ctx: &mut RunCtx) {
        ctx.reserve_work(self.n);
        ctx.reserve_acc(self.n);
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let (n, inner, k) = (self.n, self.inner, self.k);
        let (values_len, _) = self.out_len();
        let (values, positions) = out.split_at_mut(values_len);
        let values: &mut [u8] = bytemuck::cast_slice_mut(values);
        let positions: &mut [u8] = bytemuck::cast_slice_mut(positions);
        // The line's positions, ranked in place (the work space holds them as u32 bits).
        let order: &mut [u32] = bytemuck::cast_slice_mut(&mut ctx.work[..n]);
        let bytes = sources.bytes(self.x);
        if self.held == Held::F32 {
            let x = sources.get(self.x);
            // One u64 per element orders the line: rank key above, position below.
            let ranks: &mut [u64] = bytemuck::cast_slice_mut(&mut ctx.acc[..n]);
            for o in 0..self.outer {
                for i in 0..inner {
                    let at = |p: usize| (o * n + p) * inner + i;
                    for (p, r) in ranks.iter_mut().enumerate() {
                        let key = rank_key(x[at(p)]);
                        let key = if self.largest { !key } else { key };
                        *r = (key as u64) << 32 | p as u64;
                    }
                    if k > 0 && k < n {
                        ranks.select_nth_unstable(k - 1);
                    }
                    ranks[..k].sort_unstable();
                    for (j, &r) in ranks[..k].iter().enumerate() {
                        let (p, dst) = ((r & 0xffff_ffff) as usize, (o * k + j) * inner + i);
                        values[dst * 4..dst * 4 + 4].copy_from_slice(&x[at(p)].to_le_bytes());
                        Held::I64.put_int(positions, dst, p as i64);
                    }
                }
            }
            return;
        }
        let floats = (self.held == Held::F32).then(|| sources.get(self.x));
        for o in 0..self.outer {
            for i in 0..inner {
                let at = |p: u32| (o * n + p as usize) * inner + i;
                order
                    .iter_mut()
                    .enumerate()
                    .for_each(|(p, v)| *v = p as u32);
                // Ascending by rank: the wanted elements first; ties by position.
                let rank = |a: &u32, b: &u32| {
                    let by_value = match floats {
                        Some(x) => {
                            let (u, v) = (x[at(*a)], x[at(*b)]);
                            // NaN above everything; NaNs equal among themselves.
                            (u.is_nan(), u)
                                .partial_cmp(&(v.is_nan(), v))
                                .unwrap_or(std::cmp::Ordering::Equal)
                        }
                        None => self
                            .held
                            .int(bytes, at(*a))
                            .cmp(&self.held.int(bytes, at(*b))),
                    };
                    let by_value = if self.largest {
                        by_value.reverse()
                    } else {
                        by_value
                    };
                    by_value.then(a.cmp(b))
                };
                if k > 0 && k < n {
                    order.select_nth_unstable_by(k - 1, rank);
                }
                order[..k].sort_unstable_by(rank);
                for (j, &p) in order[..k].iter().enumerate() {
                    let dst = (o * k + j) * inner + i;
                    match floats {
                        Some(x) => {
                            values[dst * 4..dst * 4 + 4].copy_from_slice(&x[at(p)].to_le_bytes())
                        }
                        None => self.held.put_int(values, dst, self.held.int(bytes, at(p))),
                    }
                    Held::I64.put_int(positions, dst, p as i64);
                }
            }
        }
    }
}

/// An f32's place in TopK's order as an integer: NaN above everything, -0 equal to +0,
/// the others by value (negative bit patterns reversed, positive ones above them).
#[inline(always)]
fn rank_key(v: f32) -> u32 {
    let b = (v + 0.0).to_bits();
    if v.is_nan() {
        u32::MAX
    } else if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// GatherElements of one-word elements (f32, i32 or bool as held): each output element
/// is the data element at its own coordinates with the axis one replaced by its index.
#[derive(Clone, Debug)]
pub(crate) struct GatherElementsOp {
    pub x: Src,
    pub indices: Src,
    pub index_held: Held,
    /// The axis's extent and stride in the data.
    pub dim: usize,
    pub stride: usize,
    /// Over the output's (the indices') shape: the data offsets without the axis term,
    /// and the indices' offsets.
    pub walk: Strided<2>,
}

impl GatherElementsOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let x = sources.get(self.x);
        let idx = sources.bytes(self.indices);
        let dim = self.dim as i64;
        let mut bad = None;
        self.walk.for_each_row(|o, [ix, ii], len, [sx, si]| {
            for j in 0..len {
                let i = self.index_held.int(idx, ii + j * si);
                let r = if i < 0 { i + dim } else { i };
                out[o + j] = if (0..dim).contains(&r) {
                    x[ix + j * sx + r as usize * self.stride]
                } else {
                    bad.get_or_insert(i);
                    0.0
                };
            }
        });
        match bad {
            Some(i) => Err(format!(
                "GatherElements index {i} is out of range for extent {dim}"
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Slot;
    use crate::prepack::Panel;

    fn sources(slots: &[Slot]) -> Sources<'_> {
        // SAFETY: the arena is empty and never read.
        unsafe { Sources::new(&[], slots, std::ptr::null(), (0, 0)) }
    }

    #[test]
    fn trilu_keeps_the_chosen_triangle() {
        let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
        let slots = [Slot::Const(Panel::Owned(x))];
        let op = |upper, k| {
            let op = TriluOp {
                x: Src::Slot(0),
                batch: 1,
                rows: 3,
                cols: 4,
                size: 4,
                zero: 0,
                upper,
                k,
            };
            let mut out = [0f32; 12];
            op.run(&sources(&slots), &mut out);
            out
        };
        let upper = op(true, 1);
        assert_eq!(upper, [0., 2., 3., 4., 0., 0., 7., 8., 0., 0., 0., 12.]);
        let lower = op(false, -1);
        assert_eq!(lower, [0., 0., 0., 0., 5., 0., 0., 0., 9., 10., 0., 0.]);
        let all: Vec<f32> = (1..=12).map(|v| v as f32).collect();
        assert_eq!(op(true, i64::MIN)[..], all[..]);
        assert_eq!(op(false, 3)[..], all[..]);
    }
}
