//! The AVX-512F micro-kernel: a 12x32 tile in 24 `zmm` accumulators. Thirty-two vector
//! registers leave room for the two `B` vectors and a broadcast `A` value beside the
//! accumulators, and 24 independent chains cover the FMA latency (4 cycles) times the two
//! FMA ports with room to spare. The `A` value is broadcast from memory, which the compiler
//! folds into the FMA's embedded broadcast operand.

use std::arch::x86_64::{
    _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
};

pub(super) const MR: usize = 12;
pub(super) const NR: usize = 32;

/// # Safety
/// `a` must point to `kc * MR` readable floats, `b` to `kc * NR`, `tile` to `MR * NR`
/// writable ones, and the CPU must support AVX-512F.
pub(super) unsafe fn kernel(kc: usize, a: *const f32, b: *const f32, tile: *mut f32) {
    // SAFETY: forwarded from the caller: lengths and CPU features as documented.
    unsafe { kernel_12x32(kc, a, b, tile) }
}

#[target_feature(enable = "avx512f")]
unsafe fn kernel_12x32(kc: usize, a: *const f32, b: *const f32, tile: *mut f32) {
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    for p in 0..kc {
        // SAFETY: p < kc, so the 32 floats at b + p*32 and the 12 at a + p*12 are in bounds.
        let (b0, b1) = unsafe {
            (
                _mm512_loadu_ps(b.add(p * NR)),
                _mm512_loadu_ps(b.add(p * NR + 16)),
            )
        };
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: i < MR, see above.
            let ai = _mm512_set1_ps(unsafe { *a.add(p * MR + i) });
            row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
            row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: the tile holds MR * NR floats.
        unsafe {
            _mm512_storeu_ps(tile.add(i * NR), row[0]);
            _mm512_storeu_ps(tile.add(i * NR + 16), row[1]);
        }
    }
}
