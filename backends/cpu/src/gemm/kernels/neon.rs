//! The NEON micro-kernel: an 8x8 tile in 16 `q` accumulators (two `float32x4_t` per row);
//! aarch64 has general-purpose registers for the eight row pointers. NEON has no masked
//! store, so a partial row goes through a small stack buffer.

use std::arch::aarch64::{
    float32x4_t, vdupq_n_f32, vfmaq_f32, vld1q_f32, vmaxq_f32, vminq_f32, vst1q_f32,
};

use super::{GemvArgs, TileArgs};
use crate::gemm::Activation;

pub(super) const MR: usize = 8;
pub(super) const NR: usize = 8;

/// # Safety
/// The contract of [`super::MicroKernel::run`], and the CPU must support NEON.
pub(super) unsafe fn kernel(t: &TileArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        // Fewer than `MR` rows compute only those (as in the x86 kernels): a product of a
        // few rows would otherwise spend up to eight times the FMAs on rows never stored.
        match t.rows {
            1 => tile::<1>(t),
            2 => tile::<2>(t),
            3 => tile::<3>(t),
            4 => tile::<4>(t),
            5 => tile::<5>(t),
            6 => tile::<6>(t),
            7 => tile::<7>(t),
            _ => tile::<MR>(t),
        }
        if let Some(f) = t.act {
            act(f, t.c, t.ldc, t.rows, t.cols);
        }
    }
}

/// [`super::act_tile`] compiled for NEON.
///
/// # Safety
/// As [`super::act_tile`], and the CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn act(f: Activation, c: *mut f32, ldc: usize, rows: usize, cols: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { super::act_tile::<16>(f, c, ldc, rows, cols) }
}

/// The tile of `R` rows (at most `MR`).
#[target_feature(enable = "neon")]
unsafe fn tile<const R: usize>(t: &TileArgs) {
    // SAFETY (whole body): the panel from `wo`, `kc` floats per row pointer, `ks * MR`
    // offsets, and the first `t.cols` elements of the stored rows of `C` (read too with
    // `accumulate`) and of each add (partial rows are copied through `buf`, never read or
    // written past `t.cols`).
    unsafe {
        let full = t.cols == NR;
        let load = |p: *const f32| -> [float32x4_t; 2] {
            if full {
                [vld1q_f32(p), vld1q_f32(p.add(4))]
            } else {
                let mut buf = [0f32; NR];
                std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), t.cols);
                [vld1q_f32(buf.as_ptr()), vld1q_f32(buf.as_ptr().add(4))]
            }
        };
        let mut acc: [[float32x4_t; 2]; R] = if t.accumulate {
            // Rows past `rows` repeat the last one: computed, never stored.
            std::array::from_fn(|i| load(t.c.add(i.min(t.rows - 1) * t.ldc)))
        } else {
            [[vld1q_f32(t.w), vld1q_f32(t.w.add(4))]; R]
        };
        let mut w = t.w.add(NR + t.wo);
        for tap in 0..t.ks {
            let a = t.tap_rows::<MR, R>(tap);
            for k in 0..t.kc {
                let (b0, b1) = (vld1q_f32(w), vld1q_f32(w.add(4)));
                w = w.add(NR);
                for i in 0..R {
                    let ai = vdupq_n_f32(*a[i].add(k));
                    // vfmaq_f32(acc, x, y) = acc + x * y.
                    acc[i][0] = vfmaq_f32(acc[i][0], b0, ai);
                    acc[i][1] = vfmaq_f32(acc[i][1], b1, ai);
                }
            }
        }
        let (lo, hi) = (vdupq_n_f32(t.lo), vdupq_n_f32(t.hi));
        for (i, acc) in acc.iter().enumerate() {
            if i >= t.rows {
                break;
            }
            let mut v = *acc;
            for add in &t.adds[..t.nadds] {
                let p = add.ptr.add(i * add.rs);
                let s = vdupq_n_f32(add.scale);
                let x = if add.cs == 0 {
                    let x = vdupq_n_f32(*p);
                    [x, x]
                } else {
                    load(p)
                };
                v[0] = vfmaq_f32(v[0], s, x[0]);
                v[1] = vfmaq_f32(v[1], s, x[1]);
            }
            // FMAX/FMIN return NaN when either input is NaN, so NaN propagates.
            let v = [
                vminq_f32(hi, vmaxq_f32(lo, v[0])),
                vminq_f32(hi, vmaxq_f32(lo, v[1])),
            ];
            let c = t.c.add(i * t.ldc);
            if full {
                vst1q_f32(c, v[0]);
                vst1q_f32(c.add(4), v[1]);
            } else {
                let mut buf = [0f32; NR];
                vst1q_f32(buf.as_mut_ptr(), v[0]);
                vst1q_f32(buf.as_mut_ptr().add(4), v[1]);
                std::ptr::copy_nonoverlapping(buf.as_ptr(), c, t.cols);
            }
        }
    }
}

/// Panels one matrix-vector step reads side by side: eight accumulator chains (two per
/// panel) cover the FMA latency on two pipes.
const GEMV_GROUP: usize = 4;

/// # Safety
/// The contract of [`super::MicroKernel::gemv`], and the CPU must support NEON.
pub(super) unsafe fn gemv(g: &GemvArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemv_all(g);
        if let Some(f) = g.act {
            act(f, g.c, 0, 1, g.cols);
        }
    }
}

#[target_feature(enable = "neon")]
unsafe fn gemv_all(g: &GemvArgs) {
    let mut p = 0;
    // SAFETY: panels below `g.panels`, within the caller's contract.
    unsafe {
        while p + GEMV_GROUP <= g.panels {
            gemv_panels::<GEMV_GROUP>(g, p);
            p += GEMV_GROUP;
        }
        while p < g.panels {
            gemv_panels::<1>(g, p);
            p += 1;
        }
    }
}

/// Panels `p0..p0 + G`: each column's sum is the bias plus the products in depth order,
/// one fused multiply-add each, as the tile kernel computes it, so the bits are the same.
#[target_feature(enable = "neon")]
unsafe fn gemv_panels<const G: usize>(g: &GemvArgs, p0: usize) {
    // SAFETY (whole body): whole panels of weights, `k` floats of `a`, and the first
    // `g.cols - p * NR` columns of `C` and of each add per panel (partial panels go through
    // a stack buffer, never past those columns).
    unsafe {
        let stride = NR * (1 + g.k);
        let mut w = [g.w; G];
        let mut acc = [[vdupq_n_f32(0.0); 2]; G];
        for q in 0..G {
            w[q] = g.w.add((p0 + q) * stride);
            acc[q] = [vld1q_f32(w[q]), vld1q_f32(w[q].add(4))];
            w[q] = w[q].add(NR);
        }
        for k in 0..g.k {
            let a = vdupq_n_f32(*g.a.add(k));
            for q in 0..G {
                let r = w[q].add(k * NR);
                acc[q][0] = vfmaq_f32(acc[q][0], vld1q_f32(r), a);
                acc[q][1] = vfmaq_f32(acc[q][1], vld1q_f32(r.add(4)), a);
            }
        }
        let (lo, hi) = (vdupq_n_f32(g.lo), vdupq_n_f32(g.hi));
        for (q, acc) in acc.iter().enumerate() {
            let j0 = (p0 + q) * NR;
            let cols = (g.cols - j0).min(NR);
            let load = |p: *const f32| -> [float32x4_t; 2] {
                let mut buf = [0f32; NR];
                std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), cols);
                [vld1q_f32(buf.as_ptr()), vld1q_f32(buf.as_ptr().add(4))]
            };
            let mut v = *acc;
            for add in &g.adds[..g.nadds] {
                let p = add.ptr.wrapping_add(j0 * add.cs);
                let s = vdupq_n_f32(add.scale);
                let x = if add.cs == 0 {
                    let x = vdupq_n_f32(*p);
                    [x, x]
                } else {
                    load(p)
                };
                v[0] = vfmaq_f32(v[0], s, x[0]);
                v[1] = vfmaq_f32(v[1], s, x[1]);
            }
            let v = [
                vminq_f32(hi, vmaxq_f32(lo, v[0])),
                vminq_f32(hi, vmaxq_f32(lo, v[1])),
            ];
            let mut buf = [0f32; NR];
            vst1q_f32(buf.as_mut_ptr(), v[0]);
            vst1q_f32(buf.as_mut_ptr().add(4), v[1]);
            std::ptr::copy_nonoverlapping(buf.as_ptr(), g.c.wrapping_add(j0), cols);
        }
    }
}
