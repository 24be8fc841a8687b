//! The AVX2+FMA micro-kernel: a 6x16 tile in 12 `ymm` accumulators, the widest tile that
//! leaves registers for the two `B` vectors and the broadcast `A` value. Tails use
//! `vmaskmov` with lane masks read from a sliding window of a constant table.

use std::arch::x86_64::{
    __m256, __m256i, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_max_ps, _mm256_min_ps, _mm256_set1_ps,
};

use super::TileArgs;

pub(super) const MR: usize = 6;
pub(super) const NR: usize = 16;

/// Lane masks: reading 8 lanes at `MASKS[8 - n..]` enables the first `n`.
static MASKS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// # Safety
/// The contract of [`super::MicroKernel::run`], and the CPU must support AVX2 and FMA.
pub(super) unsafe fn kernel(t: &TileArgs) {
    // SAFETY: forwarded from the caller.
    unsafe { tile(t) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn mask(n: usize) -> __m256i {
    // SAFETY: 8 - n.min(8) is in 0..=8, so the 8 lanes read stay inside MASKS.
    unsafe { _mm256_loadu_si256(MASKS.as_ptr().add(8 - n.min(8)).cast()) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn tile(t: &TileArgs) {
    // SAFETY (whole body): as in the AVX-512 kernel: the panel from `wo`, `kc` floats per
    // row pointer, `ks * MR` offsets, and the first `t.cols` elements of the stored rows of
    // `C` (read too with `accumulate`) and of each add; masked-off lanes are not accessed.
    unsafe {
        let (m0, m1) = (mask(t.cols), mask(t.cols.saturating_sub(8)));
        let mut acc = if t.accumulate {
            // Rows past `rows` repeat the last one: computed, never stored.
            std::array::from_fn(|i| {
                let c = t.c.wrapping_add(i.min(t.rows - 1) * t.ldc);
                [
                    _mm256_maskload_ps(c, m0),
                    _mm256_maskload_ps(c.wrapping_add(8), m1),
                ]
            })
        } else {
            [[_mm256_loadu_ps(t.w), _mm256_loadu_ps(t.w.add(8))]; MR]
        };
        let mut w = t.w.add(NR + t.wo);
        for tap in 0..t.ks {
            let a = t.tap_rows::<MR>(tap);
            for k in 0..t.kc {
                let b0 = _mm256_loadu_ps(w);
                let b1 = _mm256_loadu_ps(w.add(8));
                w = w.add(NR);
                for i in 0..MR {
                    let ai = _mm256_broadcast_ss(&*a[i].add(k));
                    acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
                    acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
                }
            }
        }
        let (lo, hi) = (_mm256_set1_ps(t.lo), _mm256_set1_ps(t.hi));
        for (i, acc) in acc.iter().enumerate() {
            if i >= t.rows {
                break;
            }
            let mut v: [__m256; 2] = *acc;
            for add in &t.adds[..t.nadds] {
                let p = add.ptr.wrapping_add(i * add.rs);
                let s = _mm256_set1_ps(add.scale);
                let x = if add.cs == 0 {
                    let x = _mm256_set1_ps(*p);
                    [x, x]
                } else {
                    [
                        _mm256_maskload_ps(p, m0),
                        _mm256_maskload_ps(p.wrapping_add(8), m1),
                    ]
                };
                v[0] = _mm256_fmadd_ps(s, x[0], v[0]);
                v[1] = _mm256_fmadd_ps(s, x[1], v[1]);
            }
            // max(lo, v) then min(hi, v): with `v` second, a NaN in `v` is what comes out.
            let c = t.c.wrapping_add(i * t.ldc);
            _mm256_maskstore_ps(c, m0, _mm256_min_ps(hi, _mm256_max_ps(lo, v[0])));
            _mm256_maskstore_ps(
                c.wrapping_add(8),
                m1,
                _mm256_min_ps(hi, _mm256_max_ps(lo, v[1])),
            );
        }
    }
}
