//! GEMM micro-kernels and their run-time dispatch.
//!
//! A micro-kernel computes one `MR x NR` tile: given `kc`, an `A` panel (`kc` groups of
//! `MR` values) and a `B` panel (`kc` groups of `NR` values), it writes the `MR x NR` sums
//! `tile[i * NR + j] = sum_k a[k * MR + i] * b[k * NR + j]`. It does nothing else: packing,
//! edges and the epilogue live in the driver, so a new kernel (AVX-512, int8 dot products)
//! is one function and one [`MicroKernel`] entry here.

mod portable;

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(target_arch = "aarch64")]
mod neon;

/// The largest tile (`MR * NR`) of any kernel; the driver's tile buffer has this size.
pub(super) const MAX_TILE: usize = 256;

/// The unsafe entry of a kernel. Contract: `a` points to `kc * MR` readable floats, `b` to
/// `kc * NR`, `tile` to `MR * NR` writable ones, and the CPU has the kernel's features.
type KernelFn = unsafe fn(kc: usize, a: *const f32, b: *const f32, tile: *mut f32);

/// A micro-kernel: its tile shape and entry point.
///
/// Values are only obtained from [`MicroKernel::select`] and friends, which check the CPU's
/// features first; that is what makes [`MicroKernel::run`] safe to call.
#[derive(Debug)]
pub struct MicroKernel {
    name: &'static str,
    mr: usize,
    nr: usize,
    /// Target rows of an `A` block (rounded down to a multiple of `mr`): fits L2 with `KC`.
    mc_target: usize,
    /// Target columns of a `B` block (rounded down to a multiple of `nr`): fits L3.
    nc_target: usize,
    entry: KernelFn,
    isa: Isa,
}

/// The instruction set a kernel uses; the other SIMD kernels (depthwise, element-wise)
/// follow the GEMM kernel's choice, so `disable_simd` turns them all off together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Portable,
    /// AVX2 with FMA (x86-64).
    Avx2Fma,
    /// NEON (aarch64).
    Neon,
}

static PORTABLE: MicroKernel = MicroKernel {
    name: "portable 4x8",
    mr: portable::MR,
    nr: portable::NR,
    mc_target: 128,
    nc_target: 1024,
    entry: portable::kernel,
    isa: Isa::Portable,
};

#[cfg(target_arch = "x86_64")]
static AVX2_FMA: MicroKernel = MicroKernel {
    name: "avx2+fma 6x16",
    mr: avx2::MR,
    nr: avx2::NR,
    mc_target: 126,
    nc_target: 1024,
    entry: avx2::kernel,
    isa: Isa::Avx2Fma,
};

#[cfg(target_arch = "aarch64")]
static NEON: MicroKernel = MicroKernel {
    name: "neon 8x8",
    mr: neon::MR,
    nr: neon::NR,
    mc_target: 128,
    nc_target: 1024,
    entry: neon::kernel,
    isa: Isa::Neon,
};

impl MicroKernel {
    /// The best kernel this CPU runs, or the portable one when `allow_simd` is false.
    pub fn select(allow_simd: bool) -> &'static MicroKernel {
        if allow_simd {
            MicroKernel::best()
        } else {
            MicroKernel::portable()
        }
    }

    /// The portable kernel (plain Rust, auto-vectorized for the baseline target).
    pub fn portable() -> &'static MicroKernel {
        &PORTABLE
    }

    /// The best kernel this CPU supports, detected at run time.
    pub fn best() -> &'static MicroKernel {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return &AVX2_FMA;
        }
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("neon") {
            return &NEON;
        }
        &PORTABLE
    }

    /// A short name (`"avx2+fma 6x16"`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The instruction set of this kernel, which the other kernels of an executable use
    /// too.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Tile rows.
    pub fn mr(&self) -> usize {
        self.mr
    }

    /// Tile columns.
    pub fn nr(&self) -> usize {
        self.nr
    }

    /// Rows of an `A` block.
    pub(super) fn mc(&self) -> usize {
        (self.mc_target / self.mr).max(1) * self.mr
    }

    /// Columns of a `B` block.
    pub(super) fn nc(&self) -> usize {
        (self.nc_target / self.nr).max(1) * self.nr
    }

    /// Computes one tile (see the module docs). Panics if a slice is shorter than the
    /// kernel reads or writes.
    pub fn run(&self, kc: usize, a: &[f32], b: &[f32], tile: &mut [f32]) {
        assert!(a.len() >= kc * self.mr, "A panel too short");
        assert!(b.len() >= kc * self.nr, "B panel too short");
        assert!(tile.len() >= self.mr * self.nr, "tile too short");
        // SAFETY: the lengths are checked above, and `self` is one of the statics above,
        // handed out only after the CPU was found to support its features.
        unsafe { (self.entry)(kc, a.as_ptr(), b.as_ptr(), tile.as_mut_ptr()) }
    }
}

/// The SIMD features detected on this machine, for the device description
/// (`"x86_64 avx2+fma"`, `"aarch64 neon"`, `"x86_64 sse2"`). Stable for a given machine.
pub fn simd_description() -> String {
    let mut features: Vec<&str> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") {
            features.push("avx2");
        }
        if is_x86_feature_detected!("fma") {
            features.push("fma");
        }
        if is_x86_feature_detected!("avx512f") {
            features.push("avx512f");
        }
        if features.is_empty() {
            features.push("sse2");
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            features.push("neon");
        }
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            features.push("dotprod");
        }
        if std::arch::is_aarch64_feature_detected!("i8mm") {
            features.push("i8mm");
        }
    }
    if features.is_empty() {
        features.push("portable");
    }
    format!("{} {}", std::env::consts::ARCH, features.join("+"))
}
