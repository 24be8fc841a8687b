//! Depthwise convolution (one input channel per group) on channels-last data, computed
//! directly with the channels as the vector axis, so every load is contiguous whatever
//! the stride, dilation or padding.
//!
//! Two kernels:
//! - **Direct** ([`direct`]), for the shapes real networks use (3x3 and 5x5 windows, stride
//!   1 or 2, no dilation, no channel multiplier): a band of output rows at a time, the
//!   window's weights held in registers, several output pixels per step sharing their
//!   input loads, edges and padding handled outside the interior loop. Written once over
//!   [`lanes::Lanes`] and compiled for AVX-512F, AVX2+FMA, NEON and portable code.
//! - **Indirect**, for everything else: for each output pixel, the `taps` input pixels it
//!   reads (from an offset table made at init, with a zero row for the padding) are
//!   multiplied channel-wise by the tap's weights and summed onto the bias. Its body is
//!   plain Rust over fixed 16-channel blocks, compiled for each instruction set.
//!
//! Both sum each output in the same order (bias, then the taps in window order, a
//! padding tap adding a product with zero), so they give the same bits.

mod direct;
mod lanes;

use super::conv::Geom;
use super::vec_bytes;
use crate::gemm::{clip, Activation, Isa, ZERO_ROW};
use crate::pool::{Disjoint, Pool};

/// Channels one step of the kernel computes.
const BLOCK: usize = 16;

/// Multiply-adds below which a depthwise convolution runs on one thread.
const MIN_TASK_WORK: usize = 32 * 1024;

/// A depthwise convolution prepared at init.
#[derive(Clone, Debug)]
pub(crate) struct DepthwisePlan {
    isa: Isa,
    /// Output pixels (all images), taps, input channels, and output channels per input.
    pixels: usize,
    taps: usize,
    c: usize,
    mult: usize,
    /// For each output pixel and tap, the offset of the input pixel's channels, or
    /// [`ZERO_ROW`].
    offs: Vec<u32>,
    /// One past the last input float an offset reads (or the direct kernel's input size).
    extent: usize,
    /// A row of zeros: `c` floats for the indirect kernel, an input row for the direct one.
    zero: Vec<f32>,
    /// The direct kernel, where the shape has one (then `offs` is empty).
    direct: Option<Direct>,
}

/// The direct kernel chosen at init and the geometry it reads.
#[derive(Clone, Copy)]
struct Direct {
    rows: direct::RowsFn,
    /// Output rows over the whole batch, and the input and output geometry.
    out_rows: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    ph: usize,
    pw: usize,
    x_lo: usize,
    x_end: usize,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("out_rows", &self.out_rows)
            .field("x_lo", &self.x_lo)
            .field("x_end", &self.x_end)
            .finish_non_exhaustive()
    }
}

impl DepthwisePlan {
    /// Bytes of the offset table and the zero row (for the delegate's memory report).
    pub fn capacity_bytes(&self) -> usize {
        vec_bytes(&self.offs) + vec_bytes(&self.zero)
    }

    pub fn new(g: &Geom, isa: Isa) -> Result<DepthwisePlan, String> {
        let (pixels, taps) = (g.batch * g.out_plane(), g.kh * g.kw);
        if let Some(rows) = direct::pick(isa, g) {
            let len = [g.batch, g.h, g.w, g.c]
                .iter()
                .try_fold(1usize, |len, &d| len.checked_mul(d))
                .ok_or_else(|| "the depthwise convolution's input is too large".to_string())?;
            // Output columns whose window lies inside the input's columns.
            let (s, span) = (g.sw, (g.kw - 1) * g.dw);
            let x_lo = g.pw.div_ceil(s);
            let x_end = (g.w + g.pw)
                .checked_sub(span + 1)
                .map_or(0, |last| (last / s + 1).min(g.ow));
            return Ok(DepthwisePlan {
                isa,
                pixels,
                taps,
                c: g.c,
                mult: 1,
                offs: Vec::new(),
                extent: len,
                zero: vec![0.0; g.w * g.c],
                direct: Some(Direct {
                    rows,
                    out_rows: g.batch * g.oh,
                    h: g.h,
                    w: g.w,
                    oh: g.oh,
                    ow: g.ow,
                    ph: g.ph,
                    pw: g.pw,
                    x_lo,
                    x_end,
                }),
            });
        }
        DepthwisePlan::indirect(g, isa)
    }

    /// The indirect kernel's plan, whatever the shape.
    fn indirect(g: &Geom, isa: Isa) -> Result<DepthwisePlan, String> {
        let (pixels, taps) = (g.batch * g.out_plane(), g.kh * g.kw);
        let mut offs = Vec::with_capacity(pixels * taps);
        g.tap_rows(g.c, |row| offs.extend_from_slice(row))?;
        let extent = offs
            .iter()
            .filter(|&&o| o != ZERO_ROW)
            .max()
            .map_or(0, |&o| o as usize + g.c);
        Ok(DepthwisePlan {
            isa,
            pixels,
            taps,
            c: g.c,
            mult: g.mg(),
            offs,
            extent,
            zero: vec![0.0; g.c],
            direct: None,
        })
    }

    /// Computes `y` (`pixels x M`, NHWC) from `x` (NHWC) and the packed weights `w` (`M`
    /// bias values, then `taps` rows of `M`), clamped to `bounds`, then through `act`
    /// (each task over the rows it has just written, while they are in cache).
    pub fn run(
        &self,
        pool: &Pool,
        x: &[f32],
        w: &[f32],
        y: &mut [f32],
        bounds: (f32, f32),
        act: Option<Activation>,
    ) {
        let m = self.c * self.mult;
        assert!(
            w.len() >= m * (1 + self.taps),
            "depthwise: weights too short"
        );
        assert!(y.len() >= self.pixels * m, "depthwise: output too short");
        assert!(self.extent <= x.len(), "depthwise: input too short");
        let work = self.pixels * self.taps * m;
        let tasks = (crate::gemm::TASKS_PER_THREAD * pool.threads())
            .min(work / MIN_TASK_WORK)
            .max(1);
        if let Some(d) = &self.direct {
            return self.run_direct(d, pool, tasks, x, w, y, bounds, act);
        }
        let per = self.pixels.div_ceil(tasks);
        let out = Disjoint::new(&mut y[..self.pixels * m]);
        pool.run(tasks, &|task, _| {
            let p0 = (task * per).min(self.pixels);
            let p1 = ((task + 1) * per).min(self.pixels);
            // SAFETY: tasks write the disjoint pixel ranges p0..p1.
            let y = unsafe { out.range(p0 * m, (p1 - p0) * m) };
            let offs = &self.offs[p0 * self.taps..p1 * self.taps];
            self.rows(x, offs, w, y, bounds);
            if let Some(f) = act {
                f.run(self.isa, y);
            }
        });
    }

    /// The direct kernel, threads taking bands of output rows.
    #[allow(clippy::too_many_arguments)]
    fn run_direct(
        &self,
        d: &Direct,
        pool: &Pool,
        tasks: usize,
        x: &[f32],
        w: &[f32],
        y: &mut [f32],
        bounds: (f32, f32),
        act: Option<Activation>,
    ) {
        let row_len = d.ow * self.c;
        let tasks = tasks.min(d.out_rows).max(1);
        let per = d.out_rows.div_ceil(tasks);
        let out = Disjoint::new(&mut y[..d.out_rows * row_len]);
        pool.run(tasks, &|task, _| {
            let r0 = (task * per).min(d.out_rows);
            let r1 = ((task + 1) * per).min(d.out_rows);
            // SAFETY: tasks write the disjoint row bands r0..r1.
            let y = unsafe { out.range(r0 * row_len, (r1 - r0) * row_len) };
            let args = direct::RowArgs {
                x: x.as_ptr(),
                wt: w.as_ptr(),
                y: y.as_mut_ptr(),
                y_row0: r0,
                zero: self.zero.as_ptr(),
                c: self.c,
                h: d.h,
                w: d.w,
                oh: d.oh,
                ow: d.ow,
                ph: d.ph,
                pw: d.pw,
                x_lo: d.x_lo,
                x_end: d.x_end,
                lo: bounds.0,
                hi: bounds.1,
            };
            // SAFETY: `run` checked that `x` holds the whole input (`extent`), `w` the bias
            // and `taps` weight rows of `c`, and `y` every output row; `zero` is an input
            // row long; `pick` chose a kernel this CPU runs.
            unsafe { (d.rows)(&args, r0..r1) };
            if let Some(f) = act {
                f.run(self.isa, y);
            }
        });
    }

    fn rows(&self, x: &[f32], offs: &[u32], w: &[f32], y: &mut [f32], bounds: (f32, f32)) {
        let k = Body {
            x,
            offs,
            zero: &self.zero,
            w,
            taps: self.taps,
            c: self.c,
            mult: self.mult,
            lo: bounds.0,
            hi: bounds.1,
        };
        match self.isa {
            // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512F => unsafe { avx512(&k, y) },
            // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { avx2(&k, y) },
            // SAFETY: a Neon kernel is only selected after NEON was detected.
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => unsafe { neon(&k, y) },
            _ => k.run::<false>(y),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn avx512(k: &Body<'_>, y: &mut [f32]) {
    k.run::<true>(y)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2(k: &Body<'_>, y: &mut [f32]) {
    k.run::<true>(y)
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
unsafe fn neon(k: &Body<'_>, y: &mut [f32]) {
    k.run::<true>(y)
}

/// The operands of one run over a range of output pixels.
struct Body<'a> {
    x: &'a [f32],
    offs: &'a [u32],
    zero: &'a [f32],
    w: &'a [f32],
    taps: usize,
    c: usize,
    mult: usize,
    lo: f32,
    hi: f32,
}

impl Body<'_> {
    /// `FMA`: fused multiply-adds (only where the target has them: elsewhere `mul_add` is a
    /// slow library call).
    #[inline(always)]
    fn run<const FMA: bool>(&self, y: &mut [f32]) {
        let m = self.c * self.mult;
        let (bias, w) = self.w.split_at(m);
        let mut rows = [self.zero.as_ptr(); MAX_TAPS];
        for (p, out) in y.chunks_exact_mut(m).enumerate() {
            let offs = &self.offs[p * self.taps..(p + 1) * self.taps];
            if self.mult != 1 || self.taps > MAX_TAPS {
                self.pixel_slow::<FMA>(offs, bias, w, out);
                continue;
            }
            for (r, &o) in rows.iter_mut().zip(offs) {
                *r = match o {
                    ZERO_ROW => self.zero.as_ptr(),
                    o => self.x[o as usize..o as usize + self.c].as_ptr(),
                };
            }
            let rows = &rows[..self.taps];
            let mut c0 = 0;
            while c0 + BLOCK <= m {
                self.block::<BLOCK, FMA>(rows, c0, bias, w, out);
                c0 += BLOCK;
            }
            // Narrower blocks for the last channels (24 = 16 + 8, 40 = 2 * 16 + 8, ...).
            if c0 + 8 <= m {
                self.block::<8, FMA>(rows, c0, bias, w, out);
                c0 += 8;
            }
            if c0 + 4 <= m {
                self.block::<4, FMA>(rows, c0, bias, w, out);
                c0 += 4;
            }
            while c0 < m {
                self.block::<1, FMA>(rows, c0, bias, w, out);
                c0 += 1;
            }
        }
    }

    /// Output channels `c0..c0 + B` of one pixel whose tap rows are `rows`.
    #[inline(always)]
    fn block<const B: usize, const FMA: bool>(
        &self,
        rows: &[*const f32],
        c0: usize,
        bias: &[f32],
        w: &[f32],
        out: &mut [f32],
    ) {
        let m = out.len();
        assert!(
            c0 + B <= m && w.len() >= rows.len() * m,
            "depthwise: block out of range"
        );
        let mut acc: [f32; B] = bias[c0..c0 + B].try_into().expect("block");
        for (t, &row) in rows.iter().enumerate() {
            // SAFETY: `row` is the start of `c` readable floats (an input pixel, checked
            // when the pointers were made, or the zero row), and c0 + B <= m = c (mult is 1
            // here); the weights hold `taps` rows of `m` values (asserted above).
            let (xs, ws) = unsafe {
                (
                    &*row.add(c0).cast::<[f32; B]>(),
                    &*w.as_ptr().add(t * m + c0).cast::<[f32; B]>(),
                )
            };
            for l in 0..B {
                acc[l] = fma::<FMA>(ws[l], xs[l], acc[l]);
            }
        }
        for (o, a) in out[c0..c0 + B].iter_mut().zip(acc) {
            *o = clip(a, self.lo, self.hi);
        }
    }

    /// One output pixel with a channel multiplier (output channel `oc` reads input channel
    /// `oc / mult`) or more taps than the fast path holds.
    fn pixel_slow<const FMA: bool>(&self, offs: &[u32], bias: &[f32], w: &[f32], out: &mut [f32]) {
        let m = out.len();
        for (oc, o) in out.iter_mut().enumerate() {
            let mut acc = bias[oc];
            for (t, &off) in offs.iter().enumerate() {
                let row = match off {
                    ZERO_ROW => self.zero,
                    o => &self.x[o as usize..o as usize + self.c],
                };
                acc = fma::<FMA>(w[t * m + oc], row[oc / self.mult], acc);
            }
            *o = clip(acc, self.lo, self.hi);
        }
    }
}

/// Taps the fast path keeps row pointers for (a 7x7 kernel has 49).
const MAX_TAPS: usize = 64;

#[inline(always)]
fn fma<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::MicroKernel;

    /// A depthwise geometry: `c` channels of `h x w`, a `k x k` window at stride `s`, `pad`
    /// before and `pad_end` after on both axes.
    #[allow(clippy::too_many_arguments)]
    fn geom(
        batch: usize,
        c: usize,
        h: usize,
        w: usize,
        k: usize,
        s: usize,
        pad: usize,
        pad_end: usize,
    ) -> Geom {
        Geom {
            batch,
            c,
            h,
            w,
            m: c,
            group: c,
            kh: k,
            kw: k,
            sh: s,
            sw: s,
            dh: 1,
            dw: 1,
            ph: pad,
            pw: pad,
            oh: (h + pad + pad_end - k) / s + 1,
            ow: (w + pad + pad_end - k) / s + 1,
        }
    }

    fn value(i: usize) -> f32 {
        ((i * 7919 % 1013) as f32 - 506.0) / 97.0
    }

    /// `y` computed from the definition, in f64: the bias plus every in-bounds tap.
    fn naive(g: &Geom, x: &[f32], packed: &[f32], bounds: (f32, f32)) -> Vec<f32> {
        let (c, taps) = (g.c, g.kh * g.kw);
        let mut y = vec![0f32; g.batch * g.oh * g.ow * c];
        for n in 0..g.batch {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    for ch in 0..c {
                        let mut acc = packed[ch] as f64;
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let (iy, ix) = (oy * g.sh + ky, ox * g.sw + kx);
                                if iy < g.ph || ix < g.pw || iy - g.ph >= g.h || ix - g.pw >= g.w {
                                    continue;
                                }
                                let xi = ((n * g.h + iy - g.ph) * g.w + ix - g.pw) * c + ch;
                                let wt = packed[(1 + ky * g.kw + kx) * c + ch];
                                acc += x[xi] as f64 * wt as f64;
                            }
                        }
                        let _ = taps;
                        y[((n * g.oh + oy) * g.ow + ox) * c + ch] =
                            (acc as f32).clamp(bounds.0, bounds.1);
                    }
                }
            }
        }
        y
    }

    /// The direct kernel against the indirect one on every instruction set this CPU runs:
    /// channel counts that leave every tail width, windows reaching past each edge,
    /// asymmetric padding, stride 1 and 2, 3x3 and 5x5, one and several threads: the same
    /// bits, and both within rounding of the sum in f64.
    #[test]
    fn direct_kernel_matches_the_indirect_one_bit_for_bit() {
        let pools = [Pool::new(1), Pool::new(3)];
        let shapes = [
            // batch, c, h, w, k, s, pad, pad_end
            (1, 16, 8, 8, 3, 1, 1, 1),
            (2, 29, 7, 11, 3, 1, 1, 1),
            (1, 37, 9, 6, 3, 2, 1, 1),
            (1, 24, 10, 10, 3, 2, 0, 1),
            (1, 5, 3, 3, 3, 1, 1, 1),
            (1, 3, 1, 1, 3, 1, 1, 1),
            (1, 16, 3, 13, 3, 1, 0, 0),
            (1, 19, 12, 12, 5, 1, 2, 2),
            (2, 40, 11, 9, 5, 2, 2, 2),
            (1, 8, 4, 4, 5, 2, 1, 3),
            (1, 33, 20, 20, 3, 1, 1, 1),
        ];
        for kernel in MicroKernel::available() {
            let isa = kernel.isa();
            for &(batch, c, h, w, k, s, pad, pad_end) in &shapes {
                let g = geom(batch, c, h, w, k, s, pad, pad_end);
                let direct = DepthwisePlan::new(&g, isa).expect("plan");
                assert!(
                    direct.direct.is_some(),
                    "{isa:?} {g:?}: has a direct kernel"
                );
                let indirect = DepthwisePlan::indirect(&g, isa).expect("plan");
                let x: Vec<f32> = (0..batch * h * w * c).map(value).collect();
                let packed: Vec<f32> = (0..c * (1 + k * k)).map(|i| value(i + 17) / 4.0).collect();
                let len = batch * g.oh * g.ow * c;
                for bounds in [(f32::NEG_INFINITY, f32::INFINITY), (0.0, 6.0)] {
                    let want = naive(&g, &x, &packed, bounds);
                    let mut reference = vec![f32::NAN; len];
                    indirect.run(&pools[0], &x, &packed, &mut reference, bounds, None);
                    for pool in &pools {
                        let mut y = vec![f32::NAN; len];
                        direct.run(pool, &x, &packed, &mut y, bounds, None);
                        for (i, (a, b)) in y.iter().zip(&reference).enumerate() {
                            assert_eq!(
                                a.to_bits(),
                                b.to_bits(),
                                "{isa:?} {g:?} {bounds:?}, {} threads: element {i}: {a} vs {b}",
                                pool.threads()
                            );
                        }
                        for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                            assert!(
                                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                                "{isa:?} {g:?}: element {i}: {a} vs {b} from the definition"
                            );
                        }
                        // An activation after the clamp: the function of each value, on
                        // both kernels.
                        let f = Activation::HardSwish;
                        for plan in [&direct, &indirect] {
                            let mut z = vec![f32::NAN; len];
                            plan.run(pool, &x, &packed, &mut z, bounds, Some(f));
                            for (i, (a, b)) in z.iter().zip(&reference).enumerate() {
                                assert_eq!(a.to_bits(), f.apply(*b).to_bits(), "{isa:?} {i}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Shapes without a direct kernel (dilation, a channel multiplier, unequal strides, a
    /// 7x7 window) keep the indirect one.
    #[test]
    fn other_shapes_take_the_indirect_kernel() {
        let isa = MicroKernel::best().isa();
        let mut dilated = geom(1, 8, 9, 9, 3, 1, 2, 2);
        dilated.dh = 2;
        dilated.dw = 2;
        dilated.oh = 9;
        dilated.ow = 9;
        let mut multiplier = geom(1, 8, 9, 9, 3, 1, 1, 1);
        multiplier.m = 16;
        let mut strides = geom(1, 8, 9, 9, 3, 1, 1, 1);
        strides.sw = 2;
        strides.ow = 5;
        let wide = geom(1, 8, 9, 9, 7, 1, 3, 3);
        for g in [dilated, multiplier, strides, wide] {
            let plan = DepthwisePlan::new(&g, isa).expect("plan");
            assert!(plan.direct.is_none(), "{g:?}");
        }
    }
}
