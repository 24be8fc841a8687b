//! The portable micro-kernel: plain Rust over fixed-size arrays, which LLVM keeps in
//! registers and vectorizes for the baseline target (SSE2 on x86-64).

use super::TileArgs;
use crate::gemm::{clip, relu};

pub(super) const MR: usize = 4;
pub(super) const NR: usize = 8;

/// # Safety
/// The contract of [`super::MicroKernel::run`].
pub(super) unsafe fn kernel(t: &TileArgs) {
    let mut bias = [0f32; NR];
    // SAFETY (whole body): reads and writes stay inside what the caller's contract makes
    // valid: the panel from `wo`, `kc` floats per row pointer, `ks * MR` offsets, the
    // first `t.cols` elements of the stored rows of `C` (read too with `accumulate`) and
    // of each add.
    unsafe {
        bias.copy_from_slice(std::slice::from_raw_parts(t.w, NR));
        // Accumulators as 4-lane groups: LLVM maps each group onto one SSE/NEON register.
        // Plain [f32; 8] rows were scalarized into 32 stack slots (about 7 GFLOP/s).
        let lanes = |v: &[f32]| -> [[f32; 4]; 2] {
            [
                v[..4].try_into().expect("4"),
                v[4..8].try_into().expect("4"),
            ]
        };
        let mut acc4 = [lanes(&bias); MR];
        if t.accumulate {
            // Rows past `rows` repeat the last one: computed, never stored.
            for (i, acc) in acc4.iter_mut().enumerate() {
                let mut sums = [0f32; NR];
                let c = t.c.add(i.min(t.rows - 1) * t.ldc);
                sums[..t.cols].copy_from_slice(std::slice::from_raw_parts(c, t.cols));
                *acc = lanes(&sums);
            }
        }
        let mut w = t.w.add(NR + t.wo);
        for tap in 0..t.ks {
            let rows = t.tap_rows::<MR, MR>(tap);
            let panel = std::slice::from_raw_parts(w, t.kc * NR);
            for (k, b) in panel.chunks_exact(NR).enumerate() {
                let b = lanes(b);
                for (row, acc) in rows.iter().zip(acc4.iter_mut()) {
                    let ai = *row.add(k);
                    for (acc, b) in acc.iter_mut().zip(&b) {
                        madd4(acc, ai, b);
                    }
                }
            }
            w = w.add(t.kc * NR);
        }
        let acc: [[f32; NR]; MR] = std::array::from_fn(|i| {
            let mut r = [0f32; NR];
            r[..4].copy_from_slice(&acc4[i][0]);
            r[4..].copy_from_slice(&acc4[i][1]);
            r
        });
        for (i, acc) in acc.iter().enumerate().take(t.rows) {
            let c = std::slice::from_raw_parts_mut(t.c.add(i * t.ldc), t.cols);
            c.copy_from_slice(&acc[..t.cols]);
            for add in &t.adds[..t.nadds] {
                let p = add.ptr.add(i * add.rs);
                for (j, v) in c.iter_mut().enumerate() {
                    *v += add.scale * *p.add(j * add.cs);
                }
            }
            if t.lo == 0.0 && t.hi == f32::INFINITY {
                c.iter_mut().for_each(|v| *v = relu(*v));
            } else {
                c.iter_mut().for_each(|v| *v = clip(*v, t.lo, t.hi));
            }
        }
        if let Some(f) = t.act {
            super::act_tile::<16>(f, t.c, t.ldc, t.rows, t.cols);
        }
    }
}

/// `acc += a * b` on four lanes.
#[inline(always)]
fn madd4(acc: &mut [f32; 4], a: f32, b: &[f32; 4]) {
    for (c, &x) in acc.iter_mut().zip(b) {
        *c += a * x;
    }
}
