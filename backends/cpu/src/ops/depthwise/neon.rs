//! The NEON depthwise kernel: up to 4 rows x 16 columns in 16 `q` accumulators.

use std::arch::aarch64::{float32x4_t, vdupq_n_f32, vfmaq_f32, vld1q_f32, vst1q_f32};

use super::{CHUNK, ROWS};

/// # Safety
/// For every tap `t`, row `r < n` and `x < ow.next_multiple_of(CHUNK)`,
/// `src + r * step + taps[t] + x` must be readable; `out` must hold `n * ow` writable
/// floats; `w.len() == taps.len()`; the CPU must support NEON.
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

#[target_feature(enable = "neon")]
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
        let mut acc = [[vdupq_n_f32(0.0); 4]; R];
        for (&off, &wt) in taps.iter().zip(w) {
            let wv = vdupq_n_f32(wt);
            for (r, a) in acc.iter_mut().enumerate() {
                // SAFETY: in bounds by the contract (x + 15 < ow.next_multiple_of(16)).
                let p = unsafe { src.add(off + r * step + x) };
                for (q, lane) in a.iter_mut().enumerate() {
                    // vfmaq_f32(acc, x, y) = acc + x * y.
                    *lane = vfmaq_f32(*lane, wv, unsafe { vld1q_f32(p.add(4 * q)) });
                }
            }
        }
        let len = CHUNK.min(ow - x);
        for (r, a) in acc.iter().enumerate() {
            // SAFETY: row r of `out` holds columns x..x + len.
            unsafe { store(out.add(r * ow + x), a, len) };
        }
    }
}

/// Stores the first `len` of 16 values.
#[target_feature(enable = "neon")]
unsafe fn store(dst: *mut f32, v: &[float32x4_t; 4], len: usize) {
    let mut tmp = [0f32; CHUNK];
    for (q, lane) in v.iter().enumerate() {
        // SAFETY: tmp holds 16 floats.
        unsafe { vst1q_f32(tmp.as_mut_ptr().add(4 * q), *lane) };
    }
    // SAFETY: `dst` holds `len` writable floats (the caller's contract).
    unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, len) };
}
