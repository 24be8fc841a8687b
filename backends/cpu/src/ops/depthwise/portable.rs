//! The portable depthwise kernel: fixed-size arrays LLVM vectorizes for the baseline
//! target.

use super::{CHUNK, ROWS};

/// See `super::rows`; `n` rows, bounds already checked by the caller (and again here).
pub(super) fn rows(
    src: &[f32],
    step: usize,
    taps: &[usize],
    w: &[f32],
    out: &mut [f32],
    ow: usize,
    n: usize,
) {
    match n {
        4 => block::<4>(src, step, taps, w, out, ow),
        3 => block::<3>(src, step, taps, w, out, ow),
        2 => block::<2>(src, step, taps, w, out, ow),
        _ => block::<1>(src, step, taps, w, out, ow),
    }
}

fn block<const R: usize>(
    src: &[f32],
    step: usize,
    taps: &[usize],
    w: &[f32],
    out: &mut [f32],
    ow: usize,
) {
    const { assert!(R <= ROWS) };
    for x in (0..ow).step_by(CHUNK) {
        let mut acc = [[0f32; CHUNK]; R];
        for (&off, &wt) in taps.iter().zip(w) {
            for (r, a) in acc.iter_mut().enumerate() {
                let s: &[f32; CHUNK] = src[off + r * step + x..][..CHUNK]
                    .try_into()
                    .expect("CHUNK floats");
                for (a, &v) in a.iter_mut().zip(s) {
                    *a += wt * v;
                }
            }
        }
        let len = CHUNK.min(ow - x);
        for (r, a) in acc.iter().enumerate() {
            out[r * ow + x..r * ow + x + len].copy_from_slice(&a[..len]);
        }
    }
}
