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

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "aarch64")]
mod neon;

/// The largest tile (`MR * NR`) of any kernel; the driver's tile buffer has this size.
pub(super) const MAX_TILE: usize = 384;

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
    /// Depth of a `K` block: an `MR x KC` panel of `A` plus a `KC x NR` panel of `B`
    /// stay in L1 (6x256 + 256x16 floats = 22 KiB for the AVX2 kernel).
    kc: usize,
    /// Target rows of an `A` block (rounded down to a multiple of `mr`): fits L2 with `KC`.
    mc_target: usize,
    /// Target columns of a `B` block (rounded down to a multiple of `nr`): fits L3.
    nc_target: usize,
    entry: KernelFn,
    isa: Isa,
}

pub use crate::gemm::Isa;

static PORTABLE: MicroKernel = MicroKernel {
    name: "portable 4x8",
    mr: portable::MR,
    nr: portable::NR,
    kc: 256,
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
    kc: 256,
    mc_target: 126,
    nc_target: 1024,
    entry: avx2::kernel,
    isa: Isa::Avx2Fma,
};

#[cfg(target_arch = "x86_64")]
static AVX512F: MicroKernel = MicroKernel {
    name: "avx512f 12x32",
    mr: avx512::MR,
    nr: avx512::NR,
    // 12x192 + 192x32 floats = 33 KiB: a 32-wide B panel at depth 256 alone fills 32 KiB.
    kc: 192,
    mc_target: 144,
    nc_target: 1024,
    entry: avx512::kernel,
    isa: Isa::Avx512F,
};

#[cfg(target_arch = "aarch64")]
static NEON: MicroKernel = MicroKernel {
    name: "neon 8x8",
    mr: neon::MR,
    nr: neon::NR,
    kc: 256,
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

    /// The best kernel this CPU supports, detected at run time: the widest vectors.
    pub fn best() -> &'static MicroKernel {
        MicroKernel::available()
            .last()
            .copied()
            .unwrap_or(&PORTABLE)
    }

    /// Every kernel this CPU can run, portable first, then by increasing vector width.
    /// Tests run each of them; the `isa` option of the delegate picks one by [`Isa`].
    pub fn available() -> Vec<&'static MicroKernel> {
        let mut out = vec![&PORTABLE];
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            out.push(&AVX2_FMA);
            if is_x86_feature_detected!("avx512f") {
                out.push(&AVX512F);
            }
        }
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("neon") {
            out.push(&NEON);
        }
        out
    }

    /// The kernel of instruction set `isa`, if this CPU runs it.
    pub fn for_isa(isa: Isa) -> Option<&'static MicroKernel> {
        MicroKernel::available().into_iter().find(|k| k.isa == isa)
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

    /// Depth of a `K` block.
    pub fn kc(&self) -> usize {
        self.kc
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
