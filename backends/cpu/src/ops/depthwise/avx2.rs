//! The AVX2+FMA depthwise kernel: up to 4 rows x 16 columns in 8 `ymm` accumulators.

use std::arch::x86_64::{
    __m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256, _mm256_maskstore_ps,
    _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};

use super::{CHUNK, ROWS};

/// # Safety
/// For every tap `t`, row `r < n` and `x < ow.next_multiple_of(CHUNK)`,
/// `src + r * step + taps[t] + x` must be readable; `out` must hold `n * ow` writable
/// floats; `w.len() == taps.len()`; the CPU must support AVX2 and FMA.
pub(super) unsafe fn rows(
    src: *const f32,
    step: usize,
    taps: &[usize],
    w: &[f32],
    out: *mut f32,
    ow: usize,
    n: usize,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match n {
            4 => block::<4>(src, step, taps, w, out, ow),
            3 => block::<3>(src, step, taps, w, out, ow),
            2 => block::<2>(src, step, taps, w, out, ow),
            _ => block::<1>(src, step, taps, w, out, ow),
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn block<const R: usize>(
    src: *const f32,
    step: usize,
    taps: &[usize],
    w: &[f32],
    out: *mut f32,
    ow: usize,
) {
    const { assert!(R <= ROWS && CHUNK == 16) };
    for x in (0..ow).step_by(CHUNK) {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for (&off, &wt) in taps.iter().zip(w) {
            let wv = _mm256_set1_ps(wt);
            for (r, a) in acc.iter_mut().enumerate() {
                // SAFETY: in bounds by the contract (x + 15 < ow.next_multiple_of(16)).
                let p = unsafe { src.add(off + r * step + x) };
                let (v0, v1) = unsafe { (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))) };
                a[0] = _mm256_fmadd_ps(wv, v0, a[0]);
                a[1] = _mm256_fmadd_ps(wv, v1, a[1]);
            }
        }
        let len = CHUNK.min(ow - x);
        for (r, a) in acc.iter().enumerate() {
            // SAFETY: row r of `out` holds columns x..x + len.
            unsafe { store(out.add(r * ow + x), a, len) };
        }
    }
}

/// Lane masks: reading 8 lanes at `MASKS[8 - n..]` enables the first `n`.
static MASKS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// Stores the first `len` of 16 values. A partial chunk uses masked stores: the rows of
/// small planes (7, 14, 28 wide) end in one on every row, and a `memcpy` call there cost
/// more than the arithmetic.
#[target_feature(enable = "avx2")]
unsafe fn store(dst: *mut f32, v: &[__m256; 2], len: usize) {
    // SAFETY: `dst` holds `len` writable floats (the caller's contract); masked-off lanes
    // are neither read nor written; the mask loads stay inside MASKS (offsets 0..=8).
    unsafe {
        if len == CHUNK {
            _mm256_storeu_ps(dst, v[0]);
            _mm256_storeu_ps(dst.add(8), v[1]);
        } else {
            let lo = len.min(8);
            let hi = len.saturating_sub(8).min(8);
            let m0 = _mm256_loadu_si256(MASKS.as_ptr().add(8 - lo).cast());
            let m1 = _mm256_loadu_si256(MASKS.as_ptr().add(8 - hi).cast());
            _mm256_maskstore_ps(dst, m0, v[0]);
            _mm256_maskstore_ps(dst.add(8), m1, v[1]);
        }
    }
}
