//! The machine's measured f32 FMA peak, the yardstick GEMM throughput is read against.
//!
//! A datasheet peak assumes a clock the VM may not run at, so it is measured: a loop of
//! independent fused multiply-adds on as many accumulators as hide the FMA latency, with
//! no loads or stores, one thread. What it reaches is the most any GEMM kernel of that
//! vector width can reach on this core.

use crate::Stamp;

/// The vector widths a peak can be measured at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 256-bit AVX2 + FMA (x86-64).
    Avx2,
    /// 512-bit AVX-512F (x86-64).
    Avx512,
    /// 128-bit NEON (aarch64).
    Neon,
}

impl Width {
    /// Every width this CPU runs.
    pub fn available() -> Vec<Width> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                out.push(Width::Avx2);
            }
            if is_x86_feature_detected!("avx512f") {
                out.push(Width::Avx512);
            }
        }
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("neon") {
            out.push(Width::Neon);
        }
        out
    }

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Width::Avx2 => "avx2+fma",
            Width::Avx512 => "avx512f",
            Width::Neon => "neon",
        }
    }
}

/// Runs `iters` iterations of the FMA loop at `width` and returns the flops done (two per
/// lane per FMA). Panics if the CPU lacks the width (see [`Width::available`]).
pub fn fma_loop(width: Width, iters: u64) -> u64 {
    assert!(
        Width::available().contains(&width),
        "{width:?} not on this CPU"
    );
    match width {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the feature was detected just above.
        Width::Avx2 => unsafe { x86::avx2(iters) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Width::Avx512 => unsafe { x86::avx512(iters) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: as above.
        Width::Neon => unsafe { arm::neon(iters) },
        #[allow(unreachable_patterns)]
        _ => unreachable!("checked by Width::available"),
    }
}

/// The measured peak in GFLOP/s at `width`, one thread: the best of a few timed runs of
/// about 20 ms each.
pub fn peak_gflops(width: Width) -> f64 {
    best_rate(|iters| fma_loop(width, iters))
}

/// The best of five timed runs of `run(5_000_000)` after a warm-up, in G per second of
/// what `run` returns (flops, multiply-adds).
fn best_rate(run: impl Fn(u64) -> u64) -> f64 {
    run(1_000_000); // warm up the clock
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = Stamp::now();
        let done = run(5_000_000);
        best = best.max(done as f64 / t.elapsed_secs().max(1e-9) / 1e9);
    }
    best
}

/// The measured peaks of AVX2's exact int8 product, `vpmaddwd` (16 multiply-adds of i16
/// pairs into i32 per instruction, as the CPU delegate's AVX2 int8 GEMM uses), in G
/// multiply-adds per second, one thread, as [`peak_gflops`] measures FMAs: read against
/// half the FMA GFLOP/s (one multiply-add is two flops), they say how many more products
/// an int8 kernel can make than an f32 one on this core. `None` without AVX2.
pub fn int8_peaks() -> Option<Int8Peaks> {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 detected just above.
        return Some(Int8Peaks {
            madd: best_rate(|iters| unsafe { x86::madd(iters) }),
            madd_add: best_rate(|iters| unsafe { x86::madd_add(iters) }),
        });
    }
    None
}

/// See [`int8_peaks`].
#[derive(Clone, Copy, Debug)]
pub struct Int8Peaks {
    /// `vpmaddwd` alone, chained into itself: what the multiplier pipes can issue.
    pub madd: f64,
    /// `vpmaddwd` with the `vpaddd` that accumulates each product into an i32 sum, as
    /// a GEMM's inner step needs (AVX2 has no fused form; AVX-VNNI's `vpdpwssd` is one):
    /// the ceiling of an exact AVX2 int8 kernel. On a Zen 3 the add shares the
    /// multiplier's pipes, and this is well under `madd`.
    pub madd_add: f64,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// Twelve accumulators: FMA latency 4 x two ports = 8 in flight, with margin.
    const ACC: usize = 12;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(iters: u64) -> u64 {
        let mut acc = [_mm256_set1_ps(1.0); ACC];
        let (a, b) = (
            _mm256_set1_ps(black_box(0.999_999)),
            _mm256_set1_ps(black_box(1e-7)),
        );
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        black_box(acc);
        iters * (ACC * 8 * 2) as u64
    }

    /// Runs `iters` iterations of `vpmaddwd` into independent accumulators; returns the
    /// multiply-adds done (16 per instruction).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn madd(iters: u64) -> u64 {
        let mut acc = [_mm256_set1_epi16(1); ACC];
        let a = _mm256_set1_epi16(black_box(3));
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = _mm256_madd_epi16(*x, a);
            }
        }
        black_box(acc);
        iters * (ACC * 16) as u64
    }

    /// Runs `iters` steps of a GEMM's inner loop: two weight vectors loaded (from a
    /// small panel in L1, as a kernel's) times four rows, each `vpmaddwd` added into its
    /// own accumulator; returns the multiply-adds done.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn madd_add(iters: u64) -> u64 {
        const PANEL: usize = 64;
        let panel: Vec<i16> = (0..PANEL * 32).map(|i| (i % 61) as i16 - 30).collect();
        let mut acc = [_mm256_setzero_si256(); 8];
        let x: [__m256i; 4] = std::array::from_fn(|r| _mm256_set1_epi16(black_box(r as i16)));
        for i in 0..iters {
            let at = (i as usize % PANEL) * 32;
            // SAFETY: 32 values from `at`, inside the panel.
            let w = unsafe {
                let p = panel.as_ptr().add(at) as *const __m256i;
                [_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))]
            };
            for (r, &x) in x.iter().enumerate() {
                for (h, &w) in w.iter().enumerate() {
                    let a = &mut acc[2 * r + h];
                    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(x, w));
                }
            }
        }
        black_box(acc);
        iters * (8 * 16) as u64
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512(iters: u64) -> u64 {
        let mut acc = [_mm512_set1_ps(1.0); ACC];
        let (a, b) = (
            _mm512_set1_ps(black_box(0.999_999)),
            _mm512_set1_ps(black_box(1e-7)),
        );
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        black_box(acc);
        iters * (ACC * 16 * 2) as u64
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::*;
    use std::hint::black_box;

    /// Sixteen accumulators: FMA latency 4 x up to four pipes.
    const ACC: usize = 16;

    #[target_feature(enable = "neon")]
    pub(super) unsafe fn neon(iters: u64) -> u64 {
        let mut acc = [vdupq_n_f32(1.0); ACC];
        let (a, b) = (
            vdupq_n_f32(black_box(0.999_999)),
            vdupq_n_f32(black_box(1e-7)),
        );
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = vfmaq_f32(b, *x, a);
            }
        }
        black_box(acc);
        iters * (ACC * 4 * 2) as u64
    }
}
