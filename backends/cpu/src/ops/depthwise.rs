//! Depthwise convolution (one input channel per group) on channels-last data, computed
//! directly: for each output pixel, the `taps` input pixels it reads (from an offset table
//! made at init, with a zero row for the padding) are multiplied channel-wise by the tap's
//! weights and summed onto the bias, then clamped and stored. Channels are the vector
//! axis, so every load is contiguous whatever the stride, dilation or padding.
//!
//! The kernel body is plain Rust over fixed 16-channel blocks; it is compiled three times,
//! for AVX-512F, for AVX2+FMA and for NEON, and LLVM vectorizes each for its registers
//! (`mul_add` becomes the fused multiply-add of the target). Hand-written intrinsics
//! measured no faster here: the loop is bound by loads, not arithmetic.

use super::conv::Geom;
use super::vec_bytes;
use crate::gemm::{clip, Isa, ZERO_ROW};
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
    /// One past the last input float an offset reads.
    extent: usize,
    zero: Vec<f32>,
}

impl DepthwisePlan {
    /// Bytes of the offset table and the zero row (for the delegate's memory report).
    pub fn capacity_bytes(&self) -> usize {
        vec_bytes(&self.offs) + vec_bytes(&self.zero)
    }

    pub fn new(g: &Geom, isa: Isa) -> Result<DepthwisePlan, String> {
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
        })
    }

    /// Computes `y` (`pixels x M`, NHWC) from `x` (NHWC) and the packed weights `w` (`M`
    /// bias values, then `taps` rows of `M`), clamped to `bounds`.
    pub fn run(&self, pool: &Pool, x: &[f32], w: &[f32], y: &mut [f32], bounds: (f32, f32)) {
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
        let per = self.pixels.div_ceil(tasks);
        let out = Disjoint::new(&mut y[..self.pixels * m]);
        pool.run(tasks, &|task, _| {
            let p0 = (task * per).min(self.pixels);
            let p1 = ((task + 1) * per).min(self.pixels);
            // SAFETY: tasks write the disjoint pixel ranges p0..p1.
            let y = unsafe { out.range(p0 * m, (p1 - p0) * m) };
            let offs = &self.offs[p0 * self.taps..p1 * self.taps];
            self.rows(x, offs, w, y, bounds);
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
