//! GatherND, and the scatters (ScatterElements, ScatterND) with their reductions, over
//! the word-held dtypes (f32, i32 and bool in one word, i64 in two) and the byte-held
//! ones (i8 and u8, and f16 without a reduction: its stored bytes move unchanged).
//!
//! As in the reference: indices may be negative (counted from the end of their axis),
//! one outside its axis is a run-time error naming it; updates apply in index order, so
//! without a reduction a repeated index keeps the last; float Add and Mul accumulate in
//! f64 and round once per output element, integers wrap, Max and Min propagate NaN.

use super::int::Held;
use super::layout::Strided;
use super::{RunCtx, Sources, Src};

/// `i` resolved against an axis of extent `dim`, `None` outside it.
#[inline(always)]
fn resolve(i: i64, dim: usize) -> Option<usize> {
    let r = if i < 0 { i.checked_add(dim as i64)? } else { i };
    (0..dim as i64).contains(&r).then_some(r as usize)
}

fn out_of_range(op: &str, i: i64, dim: usize) -> String {
    format!("{op} index {i} is out of range for extent {dim}")
}

/// The index tuples of GatherND and ScatterND: `k` coordinates each, addressing slices
/// of `addressed` (the data's dimensions after the batch ones), in `batches` groups of
/// `tuples`.
#[derive(Clone, Debug)]
pub(crate) struct Tuples {
    pub indices: Src,
    pub batches: usize,
    pub tuples: usize,
    pub addressed: Vec<usize>,
}

impl Tuples {
    /// The slice number (within all batches) of every tuple, in order, to `f(tuple,
    /// slice)`; the first out-of-range coordinate is an error.
    fn for_each(&self, idx: &[u8], mut f: impl FnMut(usize, usize)) -> Result<(), String> {
        let k = self.addressed.len();
        let per_batch: usize = self.addressed.iter().product();
        for b in 0..self.batches {
            for t in 0..self.tuples {
                let n = b * self.tuples + t;
                let mut flat = 0;
                for (d, &dim) in self.addressed.iter().enumerate() {
                    let i = Held::I64.int(idx, n * k + d);
                    let c = resolve(i, dim).ok_or_else(|| out_of_range("ND", i, dim))?;
                    flat = flat * dim + c;
                }
                f(n, b * per_batch + flat);
            }
        }
        Ok(())
    }
}

/// GatherND: each tuple's slice of `width` bytes as held (words, or the stored bytes of
/// 8- and 16-bit elements), in tuple order.
#[derive(Clone, Debug)]
pub(crate) struct GatherNdOp {
    pub x: Src,
    pub tuples: Tuples,
    pub width: usize,
}

impl GatherNdOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let x = sources.bytes(self.x);
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let w = self.width;
        self.tuples
            .for_each(sources.bytes(self.tuples.indices), |n, s| {
                out[n * w..(n + 1) * w].copy_from_slice(&x[s * w..(s + 1) * w]);
            })
            .map_err(|e| format!("GatherND: {e}"))
    }
}

/// How a scatter combines an update with the element it lands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    Replace,
    Add,
    Mul,
    Max,
    Min,
}

impl Combine {
    pub fn parse(s: &str) -> Option<Combine> {
        Some(match s {
            "none" => Combine::Replace,
            "add" => Combine::Add,
            "mul" => Combine::Mul,
            "max" => Combine::Max,
            "min" => Combine::Min,
            _ => return None,
        })
    }
}

/// Where a scatter's updates land.
#[derive(Clone, Debug)]
pub(crate) enum Targets {
    /// ScatterElements: over the indices' (and updates') shape, the data offsets without
    /// the axis term and the indices' offsets; the axis's extent and stride.
    Elements {
        walk: Strided<2>,
        dim: usize,
        stride: usize,
    },
    /// ScatterND: slices of `width` elements.
    Nd { tuples: Tuples, width: usize },
}

/// ScatterElements or ScatterND: the data, with each update combined into its target.
#[derive(Clone, Debug)]
pub(crate) struct ScatterOp {
    pub x: Src,
    pub updates: Src,
    pub indices: Src,
    pub index_held: Held,
    pub targets: Targets,
    pub combine: Combine,
    /// The dtype of data and updates (F32, I32, Bool, I64, I8, U8; F16 replaced only).
    pub held: Held,
    /// The output's elements.
    pub len: usize,
}

impl ScatterOp {
    /// Whether the combination accumulates in f64 (float Add and Mul).
    fn wide(&self) -> bool {
        self.held == Held::F32 && matches!(self.combine, Combine::Add | Combine::Mul)
    }

    pub fn reserve(&self, ctx: &mut RunCtx) {
        if self.wide() {
            ctx.reserve_acc(self.len);
        }
    }

    pub fn run(
        &self,
        sources: &Sources<'_>,
        out: &mut [f32],
        ctx: &mut RunCtx,
    ) -> Result<(), String> {
        // Bytes per element as held.
        let size = match self.held {
            Held::I64 => 8,
            Held::I8 | Held::U8 => 1,
            Held::F16 => 2,
            _ => 4,
        };
        let n = self.len * size;
        let x = sources.get(self.x);
        let x_bytes = sources.bytes(self.x);
        bytemuck::cast_slice_mut::<f32, u8>(out)[..n].copy_from_slice(&x_bytes[..n]);
        let idx = sources.bytes(self.indices);
        let (wide, acc) = (self.wide(), &mut ctx.acc);
        if wide {
            acc[..self.len]
                .iter_mut()
                .zip(&x[..self.len])
                .for_each(|(a, &v)| *a = v as f64);
        }
        let upd = sources.bytes(self.updates);
        let upd_words = if size == 4 {
            sources.get(self.updates)
        } else {
            &[]
        };
        // Combines update element `s` into output element `t`.
        let mut apply = |out: &mut [f32], t: usize, s: usize| match (self.combine, self.held) {
            (Combine::Replace, _) => bytemuck::cast_slice_mut::<f32, u8>(out)
                [t * size..(t + 1) * size]
                .copy_from_slice(&upd[s * size..(s + 1) * size]),
            (Combine::Add, Held::F32) => acc[t] += upd_words[s] as f64,
            (Combine::Mul, Held::F32) => acc[t] *= upd_words[s] as f64,
            (Combine::Max, Held::F32) => {
                let u = upd_words[s];
                if u > out[t] || u.is_nan() {
                    out[t] = u;
                }
            }
            (Combine::Min, Held::F32) => {
                let u = upd_words[s];
                if u < out[t] || u.is_nan() {
                    out[t] = u;
                }
            }
            (c, held) => {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
                let (a, u) = (held.int(bytes, t), held.int(upd, s));
                let v = match c {
                    Combine::Add => a.wrapping_add(u),
                    Combine::Mul => a.wrapping_mul(u),
                    Combine::Max => a.max(u),
                    _ => a.min(u),
                };
                held.put_int(bytes, t, v);
            }
        };
        match &self.targets {
            Targets::Elements { walk, dim, stride } => {
                let mut bad = None;
                walk.for_each_row(|_, [ix, ii], len, [sx, si]| {
                    for j in 0..len {
                        let i = self.index_held.int(idx, ii + j * si);
                        match resolve(i, *dim) {
                            Some(r) => apply(out, ix + j * sx + r * stride, ii + j * si),
                            None => {
                                bad.get_or_insert(i);
                            }
                        }
                    }
                });
                if let Some(i) = bad {
                    return Err(out_of_range("ScatterElements", i, *dim));
                }
            }
            Targets::Nd { tuples, width } => {
                let w = *width;
                tuples
                    .for_each(idx, |n, slice| {
                        for e in 0..w {
                            apply(out, slice * w + e, n * w + e);
                        }
                    })
                    .map_err(|e| format!("ScatterND: {e}"))?;
            }
        }
        if wide {
            out[..self.len]
                .iter_mut()
                .zip(&ctx.acc[..self.len])
                .for_each(|(o, &a)| *o = a as f32);
        }
        Ok(())
    }
}
