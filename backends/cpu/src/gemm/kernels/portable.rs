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
    // valid: the panel, `kc` floats per row pointer, `ks * MR` offsets, the first
    // `t.cols` elements of the stored rows of `C` and of each add.
    unsafe {
        bias.copy_from_slice(std::slice::from_raw_parts(t.w, NR));
        let mut acc = [bias; MR];
        let mut w = t.w.add(NR);
        for tap in 0..t.ks {
            let rows = t
                .tap_rows::<MR>(tap)
                .map(|p| std::slice::from_raw_parts(p, t.kc));
            let panel = std::slice::from_raw_parts(w, t.kc * NR);
            for (k, b) in panel.chunks_exact(NR).enumerate() {
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    let ai = row[k];
                    for (c, &bj) in acc.iter_mut().zip(b) {
                        *c += ai * bj;
                    }
                }
            }
            w = w.add(t.kc * NR);
        }
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
    }
}
