//! The direct depthwise kernel for the common shapes (3x3 and 5x5 windows, stride 1 or 2
//! on both axes, no dilation, one output channel per input channel), on channels-last
//! data with the channels in vector lanes.
//!
//! One call computes a band of output rows. For each row and block of channels, the
//! `kh x kw` weights of the block are loaded into registers once and the row's pixels are
//! swept: in the interior (every tap inside the image), `P` neighbouring output pixels at
//! a time, each input column of a window row loaded once and multiplied into every one of
//! the `P` accumulators whose window covers it (with stride 1 and a 3-wide window, 8
//! pixels read 10 columns instead of 24), so no tap branches and no weight is reloaded.
//! The few pixels at the left and right edges take a per-tap bounds test, and window rows
//! above or below the image read a row of zeros. Bias, clamp and store happen in
//! registers.
//!
//! Each output value is the bias plus the taps in row-major window order, with the
//! padding's taps adding a product with zero, exactly as the indirect kernel computes it,
//! so both give the same bits and threads never change the result.

use super::lanes::{Lanes, Plain, Plain4};
use crate::gemm::Isa;
use crate::ops::conv::Geom;

/// A direct kernel over a band of output rows.
///
/// # Safety
/// The pointers of the [`RowArgs`] cover the shapes it states, `y` from row `y_row0` to the
/// band's end, and the CPU runs the kernel's instruction set.
pub(super) type RowsFn = unsafe fn(&RowArgs, std::ops::Range<usize>);

/// The direct kernel for `g` on `isa`, if the shape has one: 3x3 or 5x5 windows, the same
/// stride 1 or 2 on both axes, no dilation, one output channel per input channel.
///
/// Pixels per interior step (`P`): as many as registers allow beside the window's weights
/// (AVX-512 has 32 vector registers, AVX2 16, NEON 32, the portable code is given 4).
pub(super) fn pick(isa: Isa, g: &Geom) -> Option<RowsFn> {
    if g.mg() != 1 || g.dh != 1 || g.dw != 1 || g.sh != g.sw || g.kh != g.kw {
        return None;
    }
    let f: RowsFn = match (isa, g.kh, g.sw) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512F, 3, 1) => x86::avx512::<3, 3, 9, 1, 8>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512F, 3, 2) => x86::avx512::<3, 3, 9, 2, 4>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512F, 5, 1) => x86::avx512::<5, 5, 25, 1, 4>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512F, 5, 2) => x86::avx512::<5, 5, 25, 2, 2>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, 3, 1) => x86::avx2::<3, 3, 9, 1, 4>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, 3, 2) => x86::avx2::<3, 3, 9, 2, 2>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, 5, 1) => x86::avx2::<5, 5, 25, 1, 2>,
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, 5, 2) => x86::avx2::<5, 5, 25, 2, 2>,
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, 3, 1) => arm::neon::<3, 3, 9, 1, 8>,
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, 3, 2) => arm::neon::<3, 3, 9, 2, 4>,
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, 5, 1) => arm::neon::<5, 5, 25, 1, 4>,
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, 5, 2) => arm::neon::<5, 5, 25, 2, 2>,
        (Isa::Portable, 3, 1) => portable::<3, 3, 9, 1, 4>,
        (Isa::Portable, 3, 2) => portable::<3, 3, 9, 2, 2>,
        (Isa::Portable, 5, 1) => portable::<5, 5, 25, 1, 2>,
        (Isa::Portable, 5, 2) => portable::<5, 5, 25, 2, 2>,
        _ => return None,
    };
    Some(f)
}

/// The portable kernel: four channels at a time, then one.
///
/// # Safety
/// As [`RowsFn`].
unsafe fn portable<
    const KH: usize,
    const KW: usize,
    const T: usize,
    const S: usize,
    const P: usize,
>(
    a: &RowArgs,
    band: std::ops::Range<usize>,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let c = rows::<Plain4, KH, KW, T, S, P>(a, band.clone(), 0);
        rows::<Plain, KH, KW, T, S, P>(a, band, c);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::lanes::{Fused, X4, Y8, Z16};
    use super::{rows, RowArgs};

    /// AVX-512F: sixteen channels at a time, then eight, four and one.
    ///
    /// # Safety
    /// As [`super::RowsFn`]; the CPU has AVX-512F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512<
        const KH: usize,
        const KW: usize,
        const T: usize,
        const S: usize,
        const P: usize,
    >(
        a: &RowArgs,
        band: std::ops::Range<usize>,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            let c = rows::<Z16, KH, KW, T, S, P>(a, band.clone(), 0);
            let c = rows::<Y8, KH, KW, T, S, 4>(a, band.clone(), c);
            let c = rows::<X4, KH, KW, T, S, 4>(a, band.clone(), c);
            rows::<Fused, KH, KW, T, S, 4>(a, band, c);
        }
    }

    /// AVX2+FMA: eight channels at a time, then four and one.
    ///
    /// # Safety
    /// As [`super::RowsFn`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2<
        const KH: usize,
        const KW: usize,
        const T: usize,
        const S: usize,
        const P: usize,
    >(
        a: &RowArgs,
        band: std::ops::Range<usize>,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            let c = rows::<Y8, KH, KW, T, S, P>(a, band.clone(), 0);
            let c = rows::<X4, KH, KW, T, S, P>(a, band.clone(), c);
            rows::<Fused, KH, KW, T, S, P>(a, band, c);
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use super::super::lanes::{Fused, Q4};
    use super::{rows, RowArgs};

    /// NEON: four channels at a time, then one.
    ///
    /// # Safety
    /// As [`super::RowsFn`]; the CPU has NEON.
    #[target_feature(enable = "neon")]
    pub(super) unsafe fn neon<
        const KH: usize,
        const KW: usize,
        const T: usize,
        const S: usize,
        const P: usize,
    >(
        a: &RowArgs,
        band: std::ops::Range<usize>,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            let c = rows::<Q4, KH, KW, T, S, P>(a, band.clone(), 0);
            rows::<Fused, KH, KW, T, S, P>(a, band, c);
        }
    }
}

/// The shape and operands of one run, checked by the caller.
pub(super) struct RowArgs {
    /// Input (`batch x h x w x c`), the packed weights (`c` bias values, then `kh * kw`
    /// rows of `c`), the output (`batch x oh x ow x c`) and a row of `w * c` zeros.
    pub x: *const f32,
    pub wt: *const f32,
    pub y: *mut f32,
    /// The output row `y` points at (a thread's band starts there).
    pub y_row0: usize,
    pub zero: *const f32,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    /// Padding before the first row and column.
    pub ph: usize,
    pub pw: usize,
    /// Output columns `x_lo..x_end` have their whole window inside the input's columns.
    pub x_lo: usize,
    pub x_end: usize,
    pub lo: f32,
    pub hi: f32,
}

/// Output rows `rows` (numbered over the whole batch), channels `c0..` in blocks of
/// `V::N` while whole blocks fit; returns where they stop.
///
/// # Safety
/// The CPU has `V`'s features; the pointers of `a` cover the shapes it states.
#[inline(always)]
unsafe fn rows<
    V: Lanes,
    const KH: usize,
    const KW: usize,
    const T: usize,
    const S: usize,
    const P: usize,
>(
    a: &RowArgs,
    rows: std::ops::Range<usize>,
    c0: usize,
) -> usize {
    const { assert!(T == KH * KW && P >= 1 && S >= 1) };
    let mut end = c0;
    for r in rows {
        let mut cb = c0;
        while cb + V::N <= a.c {
            // SAFETY: forwarded; `cb + V::N <= c`.
            unsafe { row::<V, KH, KW, T, S, P>(a, r, cb) };
            cb += V::N;
        }
        end = cb;
    }
    end
}

/// Output row `r`, channels `c0..c0 + V::N`.
#[inline(always)]
unsafe fn row<
    V: Lanes,
    const KH: usize,
    const KW: usize,
    const T: usize,
    const S: usize,
    const P: usize,
>(
    a: &RowArgs,
    r: usize,
    c0: usize,
) {
    // SAFETY (whole body): every input read is at a column below `w` of a row below `h`
    // of image `n` (or of the zero row, `w * c` long), at channels `c0..c0 + V::N <= c`;
    // every write is at a pixel below `ow` of output row `r`; the weights hold `1 + T`
    // rows of `c`. The interior's columns `ox * S - pw + j` for `j < (P - 1) * S + KW`
    // stay inside `0..w` because `ox + P <= x_end`.
    unsafe {
        let (n, oy) = (r / a.oh, r % a.oh);
        let mut src = [a.zero; KH];
        for (ky, s) in src.iter_mut().enumerate() {
            if let Some(iy) = (oy * S + ky).checked_sub(a.ph).filter(|&iy| iy < a.h) {
                *s = a.x.add((n * a.h + iy) * a.w * a.c);
            }
        }
        let mut wt = [V::zero(); T];
        for (t, w) in wt.iter_mut().enumerate() {
            *w = V::load(a.wt.add((1 + t) * a.c + c0));
        }
        let bias = a.wt.add(c0);
        let (lo, hi) = (V::splat(a.lo), V::splat(a.hi));
        let out = a.y.add((r - a.y_row0) * a.ow * a.c + c0);
        let mut ox = 0;
        while ox < a.x_lo.min(a.ow) {
            edge::<V, KH, KW, T, S>(a, &src, &wt, bias, lo, hi, out, ox, c0);
            ox += 1;
        }
        while ox + P <= a.x_end {
            interior::<V, KH, KW, T, S, P>(a, &src, &wt, bias, lo, hi, out, ox, c0);
            ox += P;
        }
        while ox < a.x_end {
            interior::<V, KH, KW, T, S, 1>(a, &src, &wt, bias, lo, hi, out, ox, c0);
            ox += 1;
        }
        while ox < a.ow {
            edge::<V, KH, KW, T, S>(a, &src, &wt, bias, lo, hi, out, ox, c0);
            ox += 1;
        }
    }
}

/// Output pixels `ox..ox + P`, whose windows are inside the input's columns.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn interior<
    V: Lanes,
    const KH: usize,
    const KW: usize,
    const T: usize,
    const S: usize,
    const P: usize,
>(
    a: &RowArgs,
    src: &[*const f32; KH],
    wt: &[V; T],
    bias: *const f32,
    lo: V,
    hi: V,
    out: *mut f32,
    ox: usize,
    c0: usize,
) {
    // SAFETY: see `row`.
    unsafe {
        let b = V::load(bias);
        let mut acc = [b; P];
        let x0 = (ox * S - a.pw) * a.c + c0;
        for ky in 0..KH {
            let s = src[ky].add(x0);
            // Input column `j` of the group feeds pixel `p` as tap `j - p * S`.
            for j in 0..(P - 1) * S + KW {
                let v = V::load(s.add(j * a.c));
                for (p, acc) in acc.iter_mut().enumerate() {
                    if j >= p * S && j - p * S < KW {
                        *acc = v.mul_add(wt[ky * KW + j - p * S], *acc);
                    }
                }
            }
        }
        for (p, acc) in acc.iter().enumerate() {
            acc.clamp(lo, hi).store(out.add((ox + p) * a.c));
        }
    }
}

/// Output pixel `ox`, whose window may reach past the left or right edge.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn edge<V: Lanes, const KH: usize, const KW: usize, const T: usize, const S: usize>(
    a: &RowArgs,
    src: &[*const f32; KH],
    wt: &[V; T],
    bias: *const f32,
    lo: V,
    hi: V,
    out: *mut f32,
    ox: usize,
    c0: usize,
) {
    // SAFETY: see `row`; columns outside `0..w` are not read.
    unsafe {
        let mut acc = V::load(bias);
        for ky in 0..KH {
            for kx in 0..KW {
                let v = match (ox * S + kx).checked_sub(a.pw).filter(|&ix| ix < a.w) {
                    Some(ix) => V::load(src[ky].add(ix * a.c + c0)),
                    None => V::zero(),
                };
                acc = v.mul_add(wt[ky * KW + kx], acc);
            }
        }
        acc.clamp(lo, hi).store(out.add(ox * a.c));
    }
}
