//! The AVX2+FMA micro-kernel: a 6x16 tile in 12 `ymm` accumulators, the widest tile that
//! leaves registers for the two `B` vectors and the broadcast `A` value.

use std::arch::x86_64::{
    _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};

pub(super) const MR: usize = 6;
pub(super) const NR: usize = 16;

/// # Safety
/// `a` must point to `kc * MR` readable floats, `b` to `kc * NR`, `tile` to `MR * NR`
/// writable ones, and the CPU must support AVX2 and FMA.
pub(super) unsafe fn kernel(kc: usize, a: *const f32, b: *const f32, tile: *mut f32) {
    // SAFETY: forwarded from the caller: lengths and CPU features as documented.
    unsafe { kernel_6x16(kc, a, b, tile) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_6x16(kc: usize, a: *const f32, b: *const f32, tile: *mut f32) {
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    for p in 0..kc {
        // SAFETY: p < kc, so the 16 floats at b + p*16 and the 6 at a + p*6 are in bounds.
        let (b0, b1) = unsafe {
            (
                _mm256_loadu_ps(b.add(p * NR)),
                _mm256_loadu_ps(b.add(p * NR + 8)),
            )
        };
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: i < MR, see above.
            let ai = unsafe { _mm256_broadcast_ss(&*a.add(p * MR + i)) };
            row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
            row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: the tile holds MR * NR floats.
        unsafe {
            _mm256_storeu_ps(tile.add(i * NR), row[0]);
            _mm256_storeu_ps(tile.add(i * NR + 8), row[1]);
        }
    }
}
