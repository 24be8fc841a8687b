//! The vector types the direct depthwise kernel is written over: one trait, implemented
//! once per register width, so one kernel body compiles to AVX-512, AVX2+FMA, NEON and
//! portable code. Every method is `#[inline(always)]`: inlined into a function compiled
//! with the target's features, the intrinsics inside are inlined too (a method compiled
//! on its own, without those features, would call each intrinsic out of line).
//!
//! `mul_add` is fused on the SIMD targets and a separate multiply and add on the portable
//! one (where a fused multiply-add would be a slow library call), which is what the
//! indirect depthwise kernel computes on each, so both paths give the same bits.

/// `N` channels of `f32`, in registers.
///
/// # Safety
/// Implementations use only the instructions of their type's instruction set; every
/// method may only be called where the CPU has it (inside the kernel entry compiled for
/// it, selected after detection).
pub(super) unsafe trait Lanes: Copy {
    /// Channels per value.
    const N: usize;
    /// # Safety
    /// As the trait; and `p` is valid for reading `N` floats.
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// As the trait; and `p` is valid for writing `N` floats.
    unsafe fn store(self, p: *mut f32);
    unsafe fn zero() -> Self;
    unsafe fn splat(v: f32) -> Self;
    /// `self * b + c`.
    unsafe fn mul_add(self, b: Self, c: Self) -> Self;
    /// `min(max(self, lo), hi)` keeping NaN, as [`crate::gemm::clip`].
    unsafe fn clamp(self, lo: Self, hi: Self) -> Self;
}

/// One channel, fused multiply-add (on targets that have it).
#[derive(Clone, Copy)]
pub(super) struct Fused(f32);

/// One channel, multiply then add.
#[derive(Clone, Copy)]
pub(super) struct Plain(f32);

/// Four channels, multiply then add: LLVM maps the array onto one SSE or NEON register.
#[derive(Clone, Copy)]
pub(super) struct Plain4([f32; 4]);

unsafe impl Lanes for Fused {
    const N: usize = 1;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller's contract.
        Fused(unsafe { *p })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller's contract.
        unsafe { *p = self.0 }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        Fused(0.0)
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Fused(v)
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        Fused(self.0.mul_add(b.0, c.0))
    }
    #[inline(always)]
    unsafe fn clamp(self, lo: Self, hi: Self) -> Self {
        Fused(crate::gemm::clip(self.0, lo.0, hi.0))
    }
}

unsafe impl Lanes for Plain {
    const N: usize = 1;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller's contract.
        Plain(unsafe { *p })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller's contract.
        unsafe { *p = self.0 }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        Plain(0.0)
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Plain(v)
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        Plain(self.0 * b.0 + c.0)
    }
    #[inline(always)]
    unsafe fn clamp(self, lo: Self, hi: Self) -> Self {
        Plain(crate::gemm::clip(self.0, lo.0, hi.0))
    }
}

unsafe impl Lanes for Plain4 {
    const N: usize = 4;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller's contract.
        Plain4(unsafe { p.cast::<[f32; 4]>().read_unaligned() })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller's contract.
        unsafe { p.cast::<[f32; 4]>().write_unaligned(self.0) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        Plain4([0.0; 4])
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Plain4([v; 4])
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        let (a, b, c) = (self.0, b.0, c.0);
        Plain4([
            a[0] * b[0] + c[0],
            a[1] * b[1] + c[1],
            a[2] * b[2] + c[2],
            a[3] * b[3] + c[3],
        ])
    }
    #[inline(always)]
    unsafe fn clamp(self, lo: Self, hi: Self) -> Self {
        let clip = crate::gemm::clip;
        let (a, l, h) = (self.0, lo.0, hi.0);
        Plain4([
            clip(a[0], l[0], h[0]),
            clip(a[1], l[1], h[1]),
            clip(a[2], l[2], h[2]),
            clip(a[3], l[3], h[3]),
        ])
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) use x86::{X4, Y8, Z16};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128, __m256, __m512, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_max_ps, _mm256_min_ps,
        _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps, _mm512_fmadd_ps, _mm512_loadu_ps,
        _mm512_max_ps, _mm512_min_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
        _mm_fmadd_ps, _mm_loadu_ps, _mm_max_ps, _mm_min_ps, _mm_set1_ps, _mm_setzero_ps,
        _mm_storeu_ps,
    };

    use super::Lanes;

    /// Sixteen channels in a `zmm` register (AVX-512F).
    #[derive(Clone, Copy)]
    pub(in super::super) struct Z16(__m512);

    /// Eight channels in a `ymm` register (AVX2+FMA).
    #[derive(Clone, Copy)]
    pub(in super::super) struct Y8(__m256);

    /// Four channels in an `xmm` register (FMA).
    #[derive(Clone, Copy)]
    pub(in super::super) struct X4(__m128);

    // SAFETY (all three): these values are only made inside functions compiled for (and
    // run after detecting) the features their intrinsics need; `max(lo, v)` then
    // `min(hi, v)` with `v` second returns `v` when it is NaN, which is `clip`'s rule.
    macro_rules! x86_lanes {
        ($t:ident, $n:expr, $load:ident, $store:ident, $zero:ident, $splat:ident, $fma:ident,
         $max:ident, $min:ident) => {
            unsafe impl Lanes for $t {
                const N: usize = $n;
                #[inline(always)]
                unsafe fn load(p: *const f32) -> Self {
                    // SAFETY: see above and the caller's contract.
                    $t(unsafe { $load(p) })
                }
                #[inline(always)]
                unsafe fn store(self, p: *mut f32) {
                    // SAFETY: see above and the caller's contract.
                    unsafe { $store(p, self.0) }
                }
                #[inline(always)]
                unsafe fn zero() -> Self {
                    // SAFETY: see above.
                    $t(unsafe { $zero() })
                }
                #[inline(always)]
                unsafe fn splat(v: f32) -> Self {
                    // SAFETY: see above.
                    $t(unsafe { $splat(v) })
                }
                #[inline(always)]
                unsafe fn mul_add(self, b: Self, c: Self) -> Self {
                    // SAFETY: see above.
                    $t(unsafe { $fma(self.0, b.0, c.0) })
                }
                #[inline(always)]
                unsafe fn clamp(self, lo: Self, hi: Self) -> Self {
                    // SAFETY: see above.
                    $t(unsafe { $min(hi.0, $max(lo.0, self.0)) })
                }
            }
        };
    }

    x86_lanes!(
        Z16,
        16,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_setzero_ps,
        _mm512_set1_ps,
        _mm512_fmadd_ps,
        _mm512_max_ps,
        _mm512_min_ps
    );
    x86_lanes!(
        Y8,
        8,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_setzero_ps,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_max_ps,
        _mm256_min_ps
    );
    x86_lanes!(
        X4,
        4,
        _mm_loadu_ps,
        _mm_storeu_ps,
        _mm_setzero_ps,
        _mm_set1_ps,
        _mm_fmadd_ps,
        _mm_max_ps,
        _mm_min_ps
    );
}

#[cfg(target_arch = "aarch64")]
pub(super) use arm::Q4;

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::{
        float32x4_t, vbslq_f32, vcgtq_f32, vcltq_f32, vdupq_n_f32, vfmaq_f32, vld1q_f32, vst1q_f32,
    };

    use super::Lanes;

    /// Four channels in a `q` register (NEON).
    #[derive(Clone, Copy)]
    pub(in super::super) struct Q4(float32x4_t);

    // SAFETY (whole impl): NEON is part of every aarch64 target this crate builds for, and
    // these values are only made in functions that checked it.
    unsafe impl Lanes for Q4 {
        const N: usize = 4;
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: see above and the caller's contract.
            Q4(unsafe { vld1q_f32(p) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            // SAFETY: see above and the caller's contract.
            unsafe { vst1q_f32(p, self.0) }
        }
        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: see above.
            Q4(unsafe { vdupq_n_f32(0.0) })
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            // SAFETY: see above.
            Q4(unsafe { vdupq_n_f32(v) })
        }
        #[inline(always)]
        unsafe fn mul_add(self, b: Self, c: Self) -> Self {
            // SAFETY: see above. vfmaq_f32(c, a, b) = c + a * b, fused.
            Q4(unsafe { vfmaq_f32(c.0, self.0, b.0) })
        }
        #[inline(always)]
        unsafe fn clamp(self, lo: Self, hi: Self) -> Self {
            // Compare and select rather than FMAX/FMIN, which order -0 below +0 where
            // `clip` keeps the input's zero: `x < lo ? lo : x`, then `y > hi ? hi : y`
            // (comparisons with NaN are false, so NaN passes through).
            // SAFETY: see above.
            unsafe {
                let y = vbslq_f32(vcltq_f32(self.0, lo.0), lo.0, self.0);
                Q4(vbslq_f32(vcgtq_f32(y, hi.0), hi.0, y))
            }
        }
    }
}
