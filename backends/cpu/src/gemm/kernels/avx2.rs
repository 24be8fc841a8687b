//! The AVX2+FMA micro-kernel: a 6x16 tile in 12 `ymm` accumulators, the widest tile that
//! leaves registers for the two `B` vectors and the broadcast `A` value. Tails use
//! `vmaskmov` with lane masks read from a sliding window of a constant table; whole vectors
//! use plain loads and stores, because AMD's cores execute a `vmaskmovps` store far more
//! slowly than a plain one (on a Zen 3 the masked stores of the full-width tiles were the
//! hottest instructions of mobilenet_tiny's 1x1 convs; mobilenet_tiny 3.8 -> 2.75 ms).

use std::arch::x86_64::{
    __m256, __m256i, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_max_ps, _mm256_min_ps, _mm256_set1_ps,
    _mm256_setzero_ps, _mm256_storeu_ps, _mm_prefetch, _MM_HINT_T0,
};

use super::{GemvArgs, TileArgs};
use crate::gemm::Activation;

pub(super) const MR: usize = 6;
pub(super) const NR: usize = 16;

/// Lane masks: reading 8 lanes at `MASKS[8 - n..]` enables the first `n`.
static MASKS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// # Safety
/// The contract of [`super::MicroKernel::run`], and the CPU must support AVX2 and FMA.
pub(super) unsafe fn kernel(t: &TileArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        // At most 8 columns: one vector per row, half the FMAs (as in the AVX-512 kernel).
        // Whole vectors store without masks (see the module docs), chosen per tile at
        // compile time: a run-time choice inside the tile made LLVM keep the accumulators
        // on the stack.
        match t.cols {
            0..=7 => rows::<1, false>(t),
            8 => rows::<1, true>(t),
            9..=15 => rows::<2, false>(t),
            _ => rows::<2, true>(t),
        }
    }
}

/// The tile compiled for its number of rows, as in the AVX-512 kernel: fewer than `MR`
/// rows compute only those.
///
/// # Safety
/// As [`kernel`].
#[inline(always)]
unsafe fn rows<const V: usize, const FULL: bool>(t: &TileArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match t.rows {
            1 => tile::<V, FULL, 1>(t),
            2 => tile::<V, FULL, 2>(t),
            3 => tile::<V, FULL, 3>(t),
            4 => tile::<V, FULL, 4>(t),
            5 => tile::<V, FULL, 5>(t),
            _ => tile::<V, FULL, MR>(t),
        }
    }
}

/// [`super::act_tile`] compiled for AVX2 and FMA.
///
/// # Safety
/// As [`super::act_tile`], and the CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn act(f: Activation, c: *mut f32, ldc: usize, rows: usize, cols: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { super::act_tile::<16>(f, c, ldc, rows, cols) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn mask(n: usize) -> __m256i {
    // SAFETY: 8 - n.min(8) is in 0..=8, so the 8 lanes read stay inside MASKS.
    unsafe { _mm256_loadu_si256(MASKS.as_ptr().add(8 - n.min(8)).cast()) }
}

/// 8 floats at `p`, or only the lanes of `m` unless `full`.
///
/// # Safety
/// The 8 floats (or the lanes of `m`) at `p` are readable.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn load(p: *const f32, m: __m256i, full: bool) -> __m256 {
    // SAFETY: forwarded.
    unsafe {
        if full {
            _mm256_loadu_ps(p)
        } else {
            _mm256_maskload_ps(p, m)
        }
    }
}

/// Stores `y` at `p`: all 8 lanes when `full`, else the lanes of `m`.
///
/// # Safety
/// The 8 floats (or the lanes of `m`) at `p` are writable.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn store(p: *mut f32, m: __m256i, full: bool, y: __m256) {
    // SAFETY: forwarded.
    unsafe {
        if full {
            _mm256_storeu_ps(p, y)
        } else {
            _mm256_maskstore_ps(p, m, y)
        }
    }
}

/// The tile of `R` rows (at most `MR`) over `V` (1 or 2) vectors of 8 columns each;
/// `FULL`: all `8 * V` columns are stored.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const V: usize, const FULL: bool, const R: usize>(t: &TileArgs) {
    // SAFETY (whole body): as in the AVX-512 kernel: the panel from `wo`, `kc` floats per
    // row pointer, `ks * MR` offsets, and the first `t.cols` elements of the stored rows of
    // `C` (read too with `accumulate`) and of each add; masked-off lanes are not accessed.
    unsafe {
        let m: [__m256i; V] = std::array::from_fn(|v| mask(t.cols.saturating_sub(8 * v)));
        let mut acc: [[__m256; V]; R] = if t.accumulate {
            // Rows past `rows` repeat the last one: computed, never stored.
            std::array::from_fn(|i| {
                let c = t.c.wrapping_add(i.min(t.rows - 1) * t.ldc);
                std::array::from_fn(|v| load(c.wrapping_add(8 * v), m[v], FULL))
            })
        } else {
            [std::array::from_fn(|v| _mm256_loadu_ps(t.w.add(8 * v))); R]
        };
        let mut w = t.w.add(NR + t.wo);
        for tap in 0..t.ks {
            let a = t.tap_rows::<MR, R>(tap);
            for k in 0..t.kc {
                let b: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(w.add(8 * v)));
                w = w.add(NR);
                for i in 0..R {
                    let ai = _mm256_broadcast_ss(&*a[i].add(k));
                    for v in 0..V {
                        acc[i][v] = _mm256_fmadd_ps(ai, b[v], acc[i][v]);
                    }
                }
            }
        }
        let (lo, hi) = (_mm256_set1_ps(t.lo), _mm256_set1_ps(t.hi));
        let mut out = acc;
        for (i, acc) in acc.iter().enumerate() {
            if i >= t.rows {
                break;
            }
            let mut x: [__m256; V] = *acc;
            for add in &t.adds[..t.nadds] {
                let p = add.ptr.wrapping_add(i * add.rs);
                let s = _mm256_set1_ps(add.scale);
                for v in 0..V {
                    let y = if add.cs == 0 {
                        _mm256_set1_ps(*p)
                    } else {
                        load(p.wrapping_add(8 * v), m[v], FULL)
                    };
                    x[v] = _mm256_fmadd_ps(s, y, x[v]);
                }
            }
            // max(lo, v) then min(hi, v): with `v` second, a NaN in `v` is what comes out.
            for v in 0..V {
                out[i][v] = _mm256_min_ps(hi, _mm256_max_ps(lo, x[v]));
            }
        }
        if let Some(f) = t.act {
            let mut y = out;
            act_regs(f, &mut y);
            out = y;
        }
        for (i, out) in out.iter().enumerate() {
            if i >= t.rows {
                break;
            }
            let c = t.c.wrapping_add(i * t.ldc);
            for v in 0..V {
                store(c.wrapping_add(8 * v), m[v], FULL, out[v]);
            }
        }
    }
}

/// The activation over the tile's clamped values, as in the AVX-512 kernel.
#[inline(never)]
#[target_feature(enable = "avx2,fma")]
unsafe fn act_regs<const V: usize, const R: usize>(f: Activation, x: &mut [[__m256; V]; R]) {
    // SAFETY: the array is `R * V` vectors of 8 floats.
    let flat = unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<f32>(), R * V * 8) };
    f.apply_blocks::<16>(flat);
}

/// Panels one matrix-vector step reads side by side: eight accumulator chains (two per
/// panel) cover the FMA latency on both ports, and leave registers for the loads.
const GEMV_GROUP: usize = 4;

/// How far ahead of the loads the weights are prefetched, in floats (16 cache lines of
/// one panel's stream).
const GEMV_PREFETCH: usize = 16 * 16;

/// # Safety
/// The contract of [`super::MicroKernel::gemv`], and the CPU must support AVX2 and FMA.
pub(super) unsafe fn gemv(g: &GemvArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemv_all(g);
        if let Some(f) = g.act {
            act(f, g.c, 0, 1, g.cols);
        }
    }
}

#[target_feature(enable = "avx2,fma")]
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
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_panels<const G: usize>(g: &GemvArgs, p0: usize) {
    // SAFETY (whole body): as in the AVX-512 kernel: whole panels of weights, `k` floats
    // of `a`, and the first `g.cols - p * NR` columns of `C` and of each add per panel
    // (masked lanes are not accessed).
    unsafe {
        let stride = NR * (1 + g.k);
        let mut w = [g.w; G];
        let mut acc = [[_mm256_setzero_ps(); 2]; G];
        for q in 0..G {
            w[q] = g.w.add((p0 + q) * stride);
            acc[q] = [_mm256_loadu_ps(w[q]), _mm256_loadu_ps(w[q].add(8))];
            w[q] = w[q].add(NR);
        }
        for k in 0..g.k {
            let a = _mm256_broadcast_ss(&*g.a.add(k));
            for q in 0..G {
                let r = w[q].add(k * NR);
                _mm_prefetch::<_MM_HINT_T0>(r.wrapping_add(GEMV_PREFETCH).cast());
                acc[q][0] = _mm256_fmadd_ps(a, _mm256_loadu_ps(r), acc[q][0]);
                acc[q][1] = _mm256_fmadd_ps(a, _mm256_loadu_ps(r.add(8)), acc[q][1]);
            }
        }
        let (lo, hi) = (_mm256_set1_ps(g.lo), _mm256_set1_ps(g.hi));
        for (q, acc) in acc.iter().enumerate() {
            let j0 = (p0 + q) * NR;
            let cols = g.cols - j0;
            let (m0, m1) = (mask(cols), mask(cols.saturating_sub(8)));
            // Plain loads and stores only for a whole panel, as in the tile.
            let full = cols >= 16;
            let mut v = *acc;
            for add in &g.adds[..g.nadds] {
                let p = add.ptr.wrapping_add(j0 * add.cs);
                let s = _mm256_set1_ps(add.scale);
                let x = if add.cs == 0 {
                    let x = _mm256_set1_ps(*p);
                    [x, x]
                } else {
                    [load(p, m0, full), load(p.wrapping_add(8), m1, full)]
                };
                v[0] = _mm256_fmadd_ps(s, x[0], v[0]);
                v[1] = _mm256_fmadd_ps(s, x[1], v[1]);
            }
            let c = g.c.wrapping_add(j0);
            store(c, m0, full, _mm256_min_ps(hi, _mm256_max_ps(lo, v[0])));
            store(
                c.wrapping_add(8),
                m1,
                full,
                _mm256_min_ps(hi, _mm256_max_ps(lo, v[1])),
            );
        }
    }
}
