//! The NEON micro-kernel: an 8x8 tile in 16 `q` accumulators (two `float32x4_t` per row).

use std::arch::aarch64::{vdupq_n_f32, vfmaq_f32, vld1q_f32, vst1q_f32};

pub(super) const MR: usize = 8;
pub(super) const NR: usize = 8;

/// # Safety
/// `a` must point to `kc * MR` readable floats, `b` to `kc * NR`, `tile` to `MR * NR`
/// writable ones, and the CPU must support NEON.
pub(super) unsafe fn kernel(kc: usize, a: *const f32, b: *const f32, tile: *mut f32) {
    // SAFETY: forwarded from the caller: lengths and CPU features as documented.
    unsafe { kernel_8x8(kc, a, b, tile) }
}

#[target_feature(enable = "neon")]
unsafe fn kernel_8x8(kc: usize, a: *const f32, b: *const f32, tile: *mut f32) {
    let mut acc = [[vdupq_n_f32(0.0); 2]; MR];
    for p in 0..kc {
        // SAFETY: p < kc, so the 8 floats at b + p*8 and the 8 at a + p*8 are in bounds.
        let (b0, b1) = unsafe { (vld1q_f32(b.add(p * NR)), vld1q_f32(b.add(p * NR + 4))) };
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: i < MR, see above.
            let ai = vdupq_n_f32(unsafe { *a.add(p * MR + i) });
            // vfmaq_f32(acc, x, y) = acc + x * y.
            row[0] = vfmaq_f32(row[0], b0, ai);
            row[1] = vfmaq_f32(row[1], b1, ai);
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: the tile holds MR * NR floats.
        unsafe {
            vst1q_f32(tile.add(i * NR), row[0]);
            vst1q_f32(tile.add(i * NR + 4), row[1]);
        }
    }
}
