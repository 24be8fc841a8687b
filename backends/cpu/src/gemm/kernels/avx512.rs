//! The AVX-512F micro-kernel: a 6x32 tile in 12 `zmm` accumulators. Twelve independent
//! FMA chains cover the FMA latency (4 cycles) times the two FMA ports; six `A` rows are
//! six pointers, which the general-purpose registers hold beside the panel pointer (eight
//! rows would spill them). The `A` value is broadcast from memory, which the compiler
//! folds into the FMA's embedded broadcast operand. Tails are masked loads and stores,
//! which AVX-512 has for every width. A tile of at most 16 columns runs the same body over
//! one vector per row: early CNN layers have 8 to 16 output channels, where the full tile
//! spent half or more of its FMAs on padding columns (mobilenet_tiny's 3x3 stem and its
//! 8- and 12-channel 1x1 convs ran twice as fast with it).

use std::arch::x86_64::{
    __m512, __mmask16, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mask_storeu_ps,
    _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_min_ps, _mm512_set1_ps, _mm512_setzero_ps,
    _mm_prefetch, _MM_HINT_T0,
};

use super::{GemvArgs, TileArgs};
use crate::gemm::Activation;

pub(super) const MR: usize = 6;
pub(super) const NR: usize = 32;

/// # Safety
/// The contract of [`super::MicroKernel::run`], and the CPU must support AVX-512F.
pub(super) unsafe fn kernel(t: &TileArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        // A tile of at most 16 columns (a layer with 8, 12 or 16 output channels, or the
        // last 16 of 48) computes one vector per row: half the FMAs of the full tile, and
        // the same bits for the columns it stores.
        if t.cols <= 16 {
            rows::<1>(t)
        } else {
            rows::<2>(t)
        }
    }
}

/// The tile compiled for its number of rows: a tile of fewer than `MR` rows (a product of
/// a few rows, such as a convolution over a handful of positions or a short sequence, or
/// the last row tile of any product) computes only those, where the full tile would
/// spend `MR / rows` times the FMAs on rows it never stores. Each row's sum is the same
/// chain of FMAs either way, so the bits do not change.
///
/// # Safety
/// As [`kernel`].
#[inline(always)]
unsafe fn rows<const V: usize>(t: &TileArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match t.rows {
            1 => tile::<V, 1>(t),
            2 => tile::<V, 2>(t),
            3 => tile::<V, 3>(t),
            4 => tile::<V, 4>(t),
            5 => tile::<V, 5>(t),
            _ => tile::<V, MR>(t),
        }
    }
}

/// The activation over the tile's clamped values, still in their vectors (a copy on the
/// stack; the kernel's own accumulators stay in registers when there is none). Out of
/// line, so that the tile's code is the product loop alone whatever the activation (eight
/// functions inlined there would grow it several-fold).
#[inline(never)]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn act_regs<const V: usize, const R: usize>(f: Activation, x: &mut [[__m512; V]; R]) {
    // SAFETY: the array is `R * V` vectors of 16 floats.
    let flat = unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<f32>(), R * V * 16) };
    f.apply_slice(flat);
}

/// [`super::act_tile`] compiled for AVX-512F.
///
/// # Safety
/// As [`super::act_tile`], and the CPU must support AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn act(f: Activation, c: *mut f32, ldc: usize, rows: usize, cols: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { super::act_tile::<64>(f, c, ldc, rows, cols) }
}

/// The first `n` (0..=16) lanes.
fn mask(n: usize) -> __mmask16 {
    ((1u32 << n.min(16)) - 1) as __mmask16
}

/// The tile of `R` rows (at most `MR`) over `V` (1 or 2) vectors of 16 columns each.
#[target_feature(enable = "avx512f")]
unsafe fn tile<const V: usize, const R: usize>(t: &TileArgs) {
    // SAFETY (whole body): every read and write stays inside what the caller's contract
    // makes valid: the panel (`NR` bias, then `ks * kc * NR` weights from `wo`), `kc`
    // floats of each row pointer, `ks * MR` offsets, and for rows below `t.rows` the first
    // `t.cols` elements of that row of `C` and of each add (masked lanes are not accessed; their addresses
    // are formed with `wrapping_add` so no out-of-bounds pointer is created).
    unsafe {
        let m: [__mmask16; V] = std::array::from_fn(|v| mask(t.cols.saturating_sub(16 * v)));
        let mut acc: [[__m512; V]; R] = if t.accumulate {
            // Rows past `rows` repeat the last one: computed, never stored.
            std::array::from_fn(|i| {
                let c = t.c.wrapping_add(i.min(t.rows - 1) * t.ldc);
                std::array::from_fn(|v| _mm512_maskz_loadu_ps(m[v], c.wrapping_add(16 * v)))
            })
        } else {
            [std::array::from_fn(|v| _mm512_loadu_ps(t.w.add(16 * v))); R]
        };
        let mut w = t.w.add(NR + t.wo);
        for tap in 0..t.ks {
            let a = t.tap_rows::<MR, R>(tap);
            for k in 0..t.kc {
                let b: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(w.add(16 * v)));
                w = w.add(NR);
                for i in 0..R {
                    let ai = _mm512_set1_ps(*a[i].add(k));
                    for v in 0..V {
                        acc[i][v] = _mm512_fmadd_ps(ai, b[v], acc[i][v]);
                    }
                }
            }
        }
        let (lo, hi) = (_mm512_set1_ps(t.lo), _mm512_set1_ps(t.hi));
        // A constant trip count keeps `acc` in registers (a variable index would not).
        let mut out = acc;
        for (i, acc) in acc.iter().enumerate() {
            if i >= t.rows {
                break;
            }
            let mut x: [__m512; V] = *acc;
            for add in &t.adds[..t.nadds] {
                let p = add.ptr.wrapping_add(i * add.rs);
                let s = _mm512_set1_ps(add.scale);
                for v in 0..V {
                    let y = if add.cs == 0 {
                        _mm512_set1_ps(*p)
                    } else {
                        _mm512_maskz_loadu_ps(m[v], p.wrapping_add(16 * v))
                    };
                    x[v] = _mm512_fmadd_ps(s, y, x[v]);
                }
            }
            // max(lo, v) then min(hi, v): with `v` second, a NaN in `v` is what comes out.
            for v in 0..V {
                out[i][v] = _mm512_min_ps(hi, _mm512_max_ps(lo, x[v]));
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
                _mm512_mask_storeu_ps(c.wrapping_add(16 * v), m[v], out[v]);
            }
        }
    }
}

/// Panels one matrix-vector step reads side by side: eight accumulator chains (two per
/// panel) keep both FMA ports busy over their 4-cycle latency, and four streams are what
/// the hardware prefetchers follow well.
const GEMV_GROUP: usize = 4;

/// How far ahead of the loads the weights are prefetched, in floats (16 cache lines of
/// one panel's stream).
const GEMV_PREFETCH: usize = 16 * 16;

/// # Safety
/// The contract of [`super::MicroKernel::gemv`], and the CPU must support AVX-512F.
pub(super) unsafe fn gemv(g: &GemvArgs) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemv_all(g);
        if let Some(f) = g.act {
            act(f, g.c, 0, 1, g.cols);
        }
    }
}

#[target_feature(enable = "avx512f")]
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
#[target_feature(enable = "avx512f")]
unsafe fn gemv_panels<const G: usize>(g: &GemvArgs, p0: usize) {
    // SAFETY (whole body): panel `p` is `NR * (1 + k)` floats from `g.w`; `a` holds `k`
    // floats; of `C` and each add only the first `g.cols - p * NR` columns of the panel are
    // touched (masked lanes are not accessed; prefetches do not fault and their addresses
    // are formed with `wrapping_add`).
    unsafe {
        let stride = NR * (1 + g.k);
        let mut w = [g.w; G];
        let mut acc = [[_mm512_setzero_ps(); 2]; G];
        for q in 0..G {
            w[q] = g.w.add((p0 + q) * stride);
            acc[q] = [_mm512_loadu_ps(w[q]), _mm512_loadu_ps(w[q].add(16))];
            w[q] = w[q].add(NR);
        }
        for k in 0..g.k {
            let a = _mm512_set1_ps(*g.a.add(k));
            for q in 0..G {
                let r = w[q].add(k * NR);
                let ahead = r.wrapping_add(GEMV_PREFETCH);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(16).cast());
                acc[q][0] = _mm512_fmadd_ps(a, _mm512_loadu_ps(r), acc[q][0]);
                acc[q][1] = _mm512_fmadd_ps(a, _mm512_loadu_ps(r.add(16)), acc[q][1]);
            }
        }
        let (lo, hi) = (_mm512_set1_ps(g.lo), _mm512_set1_ps(g.hi));
        for (q, acc) in acc.iter().enumerate() {
            let j0 = (p0 + q) * NR;
            let cols = g.cols - j0;
            let (m0, m1) = (mask(cols), mask(cols.saturating_sub(16)));
            let mut v = *acc;
            for add in &g.adds[..g.nadds] {
                let p = add.ptr.wrapping_add(j0 * add.cs);
                let s = _mm512_set1_ps(add.scale);
                let x = if add.cs == 0 {
                    let x = _mm512_set1_ps(*p);
                    [x, x]
                } else {
                    [
                        _mm512_maskz_loadu_ps(m0, p),
                        _mm512_maskz_loadu_ps(m1, p.wrapping_add(16)),
                    ]
                };
                v[0] = _mm512_fmadd_ps(s, x[0], v[0]);
                v[1] = _mm512_fmadd_ps(s, x[1], v[1]);
            }
            let c = g.c.wrapping_add(j0);
            _mm512_mask_storeu_ps(c, m0, _mm512_min_ps(hi, _mm512_max_ps(lo, v[0])));
            _mm512_mask_storeu_ps(
                c.wrapping_add(16),
                m1,
                _mm512_min_ps(hi, _mm512_max_ps(lo, v[1])),
            );
        }
    }
}
