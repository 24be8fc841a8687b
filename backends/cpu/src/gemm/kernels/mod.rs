//! GEMM micro-kernels and their run-time dispatch.
//!
//! A micro-kernel computes one tile of at most `MR x NR` outputs over one block of the
//! depth: the accumulators start from the panel's bias (the first block) or from the
//! partial sums the previous block stored in `C` (`accumulate`), sum `ks` taps of `kc`
//! products each, then get the epilogue (up to two strided adds and a clamp) in registers
//! and are stored straight to `C`, the last partial column group with a masked store. The
//! driver gives the blocks before the last an empty epilogue, so what they store is the
//! raw sum; reloading an `f32` is exact, so a blocked product has the bits of an unblocked
//! one. An activation (`act`) is applied after the clamp: by the AVX-512 and AVX2 tiles to
//! their vectors before the store (through a copy on the stack, in a function of their
//! own so that the product loop's code and registers stay as they were), by the others
//! ([`act_tile`]) to the tile just stored, still in L1, in a function compiled for the
//! kernel's features.
//!
//! Row `i` of `A` for tap `t` is `a + offs[t * MR + i]` (or the zero row where that offset
//! is [`ZERO_ROW`]), so one kernel serves plain GEMM (one tap, row offsets `i * lda`) and
//! indirect convolution (one tap per kernel position, offsets from the indirection
//! buffer). Rows past `rows` repeat a valid offset and are computed but not stored.

mod portable;

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "aarch64")]
mod neon;

use super::Activation;

/// Applies `f` to the `rows x cols` tile of `C` the kernel has just stored, `BLOCK` values
/// at a time (see [`Activation::apply_blocks`]). Inlined into a `#[target_feature]`
/// function of each kernel's module, so that the loops are compiled for its vectors: the
/// tile is a few hundred bytes still in L1, and each function is branch-free, so this
/// costs the function's arithmetic, not a pass over memory.
///
/// # Safety
/// The first `cols` elements of `rows` rows of `C` from `c` at stride `ldc` are valid for
/// reads and writes.
#[inline(always)]
pub(super) unsafe fn act_tile<const BLOCK: usize>(
    f: Activation,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    // The tile's rows side by side, so that the function's blocks are whole and several
    // are in flight at once (one row at a time left each block's long chain of
    // dependent operations, a division among them, waiting on the last).
    const MOST: usize = 256;
    let mut buf = [0f32; MOST];
    if rows * cols > MOST || cols == 0 {
        for i in 0..rows {
            // SAFETY: within the rows this function's contract makes valid.
            f.apply_blocks::<BLOCK>(unsafe {
                std::slice::from_raw_parts_mut(c.add(i * ldc), cols)
            });
        }
        return;
    }
    for (i, b) in buf.chunks_exact_mut(cols).take(rows).enumerate() {
        // SAFETY: as above.
        b.copy_from_slice(unsafe { std::slice::from_raw_parts(c.add(i * ldc), cols) });
    }
    f.apply_blocks::<BLOCK>(&mut buf[..rows * cols]);
    for (i, b) in buf.chunks_exact(cols).take(rows).enumerate() {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), cols) }.copy_from_slice(b);
    }
}

/// The offset that stands for a row of zeros (a convolution tap in the padding).
pub const ZERO_ROW: u32 = u32::MAX;

/// One fused add of the epilogue, already positioned at the tile's first element:
/// element `(i, j)` of the tile gets `scale * ptr[i * rs + j * cs]`, `cs` being 0 or 1.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawAdd {
    pub ptr: *const f32,
    pub rs: usize,
    pub cs: usize,
    pub scale: f32,
}

/// Everything one kernel call needs. Built by the driver, which checks every bound.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TileArgs {
    /// Rows (`1..=MR`) and columns (`1..=NR`) of `C` to store.
    pub rows: usize,
    pub cols: usize,
    /// Taps, and the depth of each.
    pub ks: usize,
    pub kc: usize,
    /// `A`'s base, the `ks * MR` row offsets of this tile (in floats from `a`), and a row
    /// of `kc` zeros.
    pub a: *const f32,
    pub offs: *const u32,
    pub zero: *const f32,
    /// The packed panel: `NR` bias values, then groups of `NR` weights, this block's
    /// `ks * kc` groups starting `wo` floats after the bias.
    pub w: *const f32,
    pub wo: usize,
    /// Start from the `rows x cols` partial sums in `C` instead of the bias.
    pub accumulate: bool,
    /// The tile's first element and `C`'s row stride.
    pub c: *mut f32,
    pub ldc: usize,
    pub adds: [RawAdd; 2],
    pub nadds: usize,
    /// The clamp (`-inf, inf` when there is no activation).
    pub lo: f32,
    pub hi: f32,
    /// The activation after the clamp.
    pub act: Option<Activation>,
}

impl TileArgs {
    /// The first `R` of the `MR` row pointers of tap `tap`: `a + offs[tap * MR + i]`, or
    /// the zero row where the offset is [`ZERO_ROW`]. Shared by every kernel, so the
    /// indirection rule lives in one place.
    ///
    /// # Safety
    /// `offs` holds at least `(tap + 1) * MR` offsets (the kernels' contract), and
    /// `R <= MR`.
    #[inline(always)]
    pub(super) unsafe fn tap_rows<const MR: usize, const R: usize>(
        &self,
        tap: usize,
    ) -> [*const f32; R] {
        let mut rows = [self.zero; R];
        for (i, row) in rows.iter_mut().enumerate() {
            // SAFETY: in bounds by this function's contract.
            let off = unsafe { *self.offs.add(tap * MR + i) };
            if off != ZERO_ROW {
                // `wrapping_add`: the pointer is only dereferenced where the offset is valid.
                *row = self.a.wrapping_add(off as usize);
            }
        }
        rows
    }
}

/// Everything one matrix-vector call needs: one row of `A` against `panels` consecutive
/// packed panels, `C[j] = epilogue(bias[j] + sum over k of a[k] * B[k, j])`. The weights
/// are read once, so the call streams them; the driver uses it for `M = 1` (a classifier,
/// a decoder step), where a tile kernel would compute `MR` copies of the one row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemvArgs {
    /// The depth, and the row of `A` (`k` floats).
    pub k: usize,
    pub a: *const f32,
    /// The first panel (`NR` bias values, then `k` groups of `NR` weights), and how many
    /// consecutive panels to compute.
    pub w: *const f32,
    pub panels: usize,
    /// Columns of `C` from the first panel's first column: `NR` per panel, the last panel
    /// possibly fewer.
    pub cols: usize,
    /// The first column's element of `C`, and the adds positioned there.
    pub c: *mut f32,
    pub adds: [RawAdd; 2],
    pub nadds: usize,
    pub lo: f32,
    pub hi: f32,
    pub act: Option<Activation>,
}

/// The unsafe entry of a matrix-vector kernel. Contract: every pointer of the arguments is
/// valid for what [`GemvArgs`] says is read or written, and the CPU has the kernel's
/// features.
type GemvFn = unsafe fn(g: &GemvArgs);

/// The unsafe entry of a kernel. Contract: every pointer of `t` is valid for what the
/// module docs say is read or written, and the CPU has the kernel's features.
type KernelFn = unsafe fn(t: &TileArgs);

/// A micro-kernel: its tile shape and entry point.
///
/// Values are only obtained from [`MicroKernel::best`] and friends, which check the CPU's
/// features first; that is what makes the driver's calls through it sound.
#[derive(Debug)]
pub struct MicroKernel {
    name: &'static str,
    mr: usize,
    nr: usize,
    entry: KernelFn,
    /// The matrix-vector kernel over the same panels, where there is one.
    gemv: Option<GemvFn>,
    isa: Isa,
}

/// The instruction set a kernel uses; the other SIMD kernels (depthwise, element-wise)
/// follow the GEMM kernel's choice, so `isa = "portable"` turns them all off together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Portable,
    /// AVX2 with FMA (x86-64).
    Avx2Fma,
    /// AVX-512F (x86-64). Such CPUs also have AVX2 and FMA, so the kernels without an
    /// AVX-512 version use their AVX2 one.
    Avx512F,
    /// NEON (aarch64).
    Neon,
}

static PORTABLE: MicroKernel = MicroKernel {
    name: "portable 4x8",
    mr: portable::MR,
    nr: portable::NR,
    entry: portable::kernel,
    gemv: None,
    isa: Isa::Portable,
};

#[cfg(target_arch = "x86_64")]
static AVX2_FMA: MicroKernel = MicroKernel {
    name: "avx2+fma 6x16",
    mr: avx2::MR,
    nr: avx2::NR,
    entry: avx2::kernel,
    gemv: Some(avx2::gemv),
    isa: Isa::Avx2Fma,
};

#[cfg(target_arch = "x86_64")]
static AVX512F: MicroKernel = MicroKernel {
    name: "avx512f 6x32",
    mr: avx512::MR,
    nr: avx512::NR,
    entry: avx512::kernel,
    gemv: Some(avx512::gemv),
    isa: Isa::Avx512F,
};

#[cfg(target_arch = "aarch64")]
static NEON: MicroKernel = MicroKernel {
    name: "neon 8x8",
    mr: neon::MR,
    nr: neon::NR,
    entry: neon::kernel,
    gemv: Some(neon::gemv),
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

    /// Tile columns: the width of a packed weight panel.
    pub fn nr(&self) -> usize {
        self.nr
    }

    /// Runs the kernel on one tile.
    ///
    /// # Safety
    /// The pointers of `t` must be valid for what the module docs say the kernel reads and
    /// writes: `ks * MR` offsets, each row (or the zero row) `kc` floats long, a panel of
    /// `NR + wo + NR * ks * kc` floats, `rows x cols` writable (and with `accumulate`,
    /// readable) elements of `C` at stride `ldc`, and the `rows x cols` elements each add
    /// reads.
    pub(crate) unsafe fn run(&self, t: &TileArgs) {
        debug_assert!((1..=self.mr).contains(&t.rows) && (1..=self.nr).contains(&t.cols));
        // SAFETY: forwarded from the caller; the CPU features were checked when `self`
        // was handed out.
        unsafe { (self.entry)(t) }
    }
}

impl MicroKernel {
    /// Whether this kernel has a matrix-vector form.
    pub(crate) fn has_gemv(&self) -> bool {
        self.gemv.is_some()
    }

    /// Runs the matrix-vector form on a row of panels.
    ///
    /// # Safety
    /// [`MicroKernel::has_gemv`], and the pointers of `g` are valid for what [`GemvArgs`]
    /// says is read or written: `k` floats of `a`, `panels` whole panels of this kernel's
    /// width from `w`, and the first `cols` elements of `C` and of each add (`cs = 1`; one
    /// element with `cs = 0`).
    pub(crate) unsafe fn gemv(&self, g: &GemvArgs) {
        debug_assert!(g.cols > (g.panels.max(1) - 1) * self.nr && g.cols <= g.panels * self.nr);
        if let Some(f) = self.gemv {
            // SAFETY: forwarded from the caller; the CPU features were checked when `self`
            // was handed out.
            unsafe { f(g) }
        }
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
