//! The int8 micro-kernels, the tile driver each is compiled into, and their dispatch.
//!
//! A kernel computes one `MR x NR` tile of raw dot products `sum a_u8 * w_i8` over the
//! taps and 4-byte channel blocks of its row pointers (see the parent module). The driver
//! around it walks row tiles and weight panels, fills the row pointers once per row tile,
//! and requantizes the tile to bytes while it is hot in L1. Driver and kernel are compiled
//! together under the kernel's target features, so the epilogue's f32 loop is vectorized
//! with the same instructions.
//!
//! | kernel | ISA | inner step |
//! | --- | --- | --- |
//! | `avx512-vnni 8x16` | x86-64 AVX-512 VNNI | per row, the 4 activation bytes broadcast, one `vpdpbusd` against 16 columns x 4 bytes; products of 1 to 4 rows in tiles of 1, 2 or 4; short products in a driver of their own, as AVX2's |
//! | `avx2 4x16` | x86-64 AVX2 | activations widened to i16 once per row tile, `vpmaddwd` (exact: i16 pair sums into i32), two 8-column halves; short products (16 blocks of 4 bytes or fewer) in a driver of their own that runs every row tile of a half in one loop |
//! | `neon-dotprod 4x16` | aarch64 `dotprod` | `sdot` by lane, one activation load per 4 blocks |
//! | `neon 2x16` | aarch64 NEON | `smull` (exact i16 products), `sadalp` into i32 |
//! | `portable 4x16` | any | scalar i32 |
//!
//! `vpmaddubsw` is deliberately not used: its i16 pair sums saturate for `u8 x i8` inputs
//! near the range ends, which would break exactness. Every kernel requantizes with the
//! same f32 operations as `requant`, so all of them store the same bytes.

use std::ops::Range;

use super::{
    clamp, padded_c, requant, round_even_small, to_byte, ARows, IntOut, OutPtr, QGemm, MR_MAX, NR,
    PAD, TAPS_PER_CALL,
};

/// The tile driver of one kernel: row tiles `rows` by panels `panels` of `g`, written
/// through `out`.
type Tiles = unsafe fn(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr);

/// Names the kernels, for tests and forcing one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QKernelId {
    Portable,
    Avx2,
    Avx512Vnni,
    /// aarch64 NEON, `smull` + `sadalp`.
    Neon,
    /// aarch64 `dotprod`, `sdot`.
    NeonDot,
}

/// One int8 kernel. Obtained only through [`QKernel::for_isa`] or [`QKernel::available`],
/// which check the CPU first: that makes running its tiles sound.
#[derive(Debug)]
pub struct QKernel {
    id: QKernelId,
    name: &'static str,
    mr: usize,
    tiles: Tiles,
}

static PORTABLE: QKernel = QKernel {
    id: QKernelId::Portable,
    name: "int8 portable 4x16",
    mr: 4,
    tiles: portable_tiles,
};

#[cfg(target_arch = "x86_64")]
static AVX2: QKernel = QKernel {
    id: QKernelId::Avx2,
    name: "int8 avx2 4x16 (vpmaddwd)",
    mr: x86::AVX2_MR,
    tiles: x86::avx2_tiles,
};

#[cfg(target_arch = "x86_64")]
static AVX512_VNNI: QKernel = QKernel {
    id: QKernelId::Avx512Vnni,
    name: "int8 avx512-vnni 8x16 (vpdpbusd)",
    mr: 8,
    tiles: x86::vnni_tiles,
};

#[cfg(target_arch = "aarch64")]
static NEON_DOT: QKernel = QKernel {
    id: QKernelId::NeonDot,
    name: "int8 neon-dotprod 4x16 (sdot)",
    mr: neon::DOT_MR,
    tiles: neon::dot_tiles,
};

#[cfg(target_arch = "aarch64")]
static NEON: QKernel = QKernel {
    id: QKernelId::Neon,
    name: "int8 neon 2x16 (smull+sadalp)",
    mr: neon::SMULL_MR,
    tiles: neon::smull_tiles,
};

impl QKernel {
    /// Every kernel this CPU runs, best first (the portable one last).
    pub fn available() -> Vec<&'static QKernel> {
        #[cfg(target_arch = "x86_64")]
        let simd: Vec<&'static QKernel> = [
            (
                is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"),
                &AVX512_VNNI,
            ),
            (is_x86_feature_detected!("avx2"), &AVX2),
        ]
        .into_iter()
        .filter_map(|(has, k)| has.then_some(k))
        .collect();
        #[cfg(target_arch = "aarch64")]
        let simd: Vec<&'static QKernel> = {
            use std::arch::is_aarch64_feature_detected as has;
            [(has!("dotprod"), &NEON_DOT), (has!("neon"), &NEON)]
                .into_iter()
                .filter_map(|(has, k)| has.then_some(k))
                .collect()
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let simd: Vec<&'static QKernel> = Vec::new();
        simd.into_iter().chain([&PORTABLE]).collect()
    }

    /// The int8 kernel that goes with the f32 kernels' instruction set: the best this CPU
    /// runs within it (`Avx512F` takes VNNI where the CPU has it, else AVX2; `Neon` takes
    /// `sdot` where the CPU has `dotprod`, else `smull`).
    pub fn for_isa(isa: crate::gemm::Isa) -> &'static QKernel {
        use crate::gemm::Isa;
        let want = match isa {
            Isa::Avx512F => [QKernelId::Avx512Vnni, QKernelId::Avx2],
            Isa::Avx2Fma => [QKernelId::Avx2, QKernelId::Avx2],
            Isa::Neon => [QKernelId::NeonDot, QKernelId::Neon],
            Isa::Portable => [QKernelId::Portable, QKernelId::Portable],
        };
        let available = QKernel::available();
        want.iter()
            .find_map(|id| available.iter().find(|k| k.id == *id))
            .copied()
            .unwrap_or(&PORTABLE)
    }

    /// Which kernel this is.
    pub fn id(&self) -> QKernelId {
        self.id
    }

    /// A short name with the instruction it is built on.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Rows of its tile.
    pub fn mr(&self) -> usize {
        self.mr
    }

    /// Runs row tiles `rows` by panels `panels` of `g`.
    ///
    /// # Safety
    /// `g` passed [`QGemm`]'s bounds check against the buffer behind `out`, and no other
    /// thread writes the same tiles.
    pub(crate) unsafe fn tiles(
        &self,
        g: &QGemm<'_>,
        rows: Range<usize>,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        // SAFETY: forwarded; `self` exists only for CPUs with its features.
        unsafe { (self.tiles)(g, rows, panels, out) }
    }
}

/// The row pointers of taps `t0..t0 + tn` for row tile `rt`, as `[tap][MR]`; rows past
/// `m` repeat the last row (their results are discarded).
///
/// # Safety
/// `g` passed its bounds check.
#[inline(always)]
unsafe fn fill_ptrs<const MR: usize>(
    g: &QGemm<'_>,
    rt: usize,
    t0: usize,
    tn: usize,
    ptrs: &mut [*const u8; TAPS_PER_CALL * MR_MAX],
) {
    let r0 = rt * MR;
    let last = g.m - 1;
    let taps = g.w.taps;
    for t in 0..tn {
        for r in 0..MR {
            let row = (r0 + r).min(last);
            ptrs[t * MR + r] = match g.a {
                // SAFETY: in bounds by the check.
                ARows::Strided { data, stride } => unsafe { data.as_ptr().add(row * stride) },
                ARows::Indirect { data, table, zero } => {
                    let o = table.offsets()[row * taps + t0 + t];
                    if o == PAD {
                        zero.as_ptr()
                    } else {
                        // SAFETY: in bounds by the check.
                        unsafe { data.as_ptr().add(o as usize) }
                    }
                }
            };
        }
    }
}

/// Requantizes rows `r0..r0 + rows` of a finished tile into columns `j0..j0 + cols`: the
/// per-column parameters are copied into full-width arrays once, so that the per-row loop
/// runs over all `NR` lanes with a constant trip count and vectorizes.
///
/// # Safety
/// The output range is inside the buffer (bounds check).
#[inline(always)]
unsafe fn store_tile(
    g: &QGemm<'_>,
    acc: &[i32; MR_MAX * NR],
    r0: usize,
    rows: usize,
    j0: usize,
    cols: usize,
    out: OutPtr,
) {
    let q = g.out;
    let (mut off, mut sc) = ([0i32; NR], [0f32; NR]);
    // Element by element: a variable-length `copy_from_slice` is a `memcpy` call.
    for (c, (o, s)) in off.iter_mut().zip(&mut sc).take(cols).enumerate() {
        *o = q.offset[j0 + c];
        *s = q.scale[j0 + c];
    }
    let (zp, lo, hi) = (q.zp as f32, q.lo as f32, q.hi as f32);
    let mut y = [0f32; NR];
    let mut bytes = [0u8; NR];
    for r in 0..rows {
        let a = &acc[r * NR..(r + 1) * NR];
        for c in 0..NR {
            y[c] = requant(a[c].wrapping_add(off[c]), sc[c], zp, lo, hi);
        }
        match &q.stage2 {
            None => {
                for c in 0..NR {
                    bytes[c] = to_byte(y[c]);
                }
            }
            Some(s) => {
                // `Stage2::apply` over all lanes, its parameters hoisted.
                let mut bias = [0f32; NR];
                for (c, b) in bias.iter_mut().take(cols).enumerate() {
                    *b = s.bias[j0 + c];
                }
                let (z1, z2) = (s.z1 as f32, s.z2 as f32);
                let (lo2, hi2) = (s.lo as f32, s.hi as f32);
                for c in 0..NR {
                    let f = (y[c] - z1) * s.s1 + bias[c];
                    let x = clamp(f / s.s2, -4_194_304.0, 4_194_304.0);
                    bytes[c] = to_byte(clamp(round_even_small(x) + z2, lo2, hi2));
                }
            }
        }
        // SAFETY: inside the checked output.
        let dst = unsafe { std::slice::from_raw_parts_mut(out.0.add((r0 + r) * g.ldo + j0), cols) };
        // A whole tile row is one 16-byte store; a variable-length copy would be a call.
        if let Ok(d) = <&mut [u8; NR]>::try_from(&mut *dst) {
            *d = bytes;
        } else {
            for (d, &b) in dst.iter_mut().zip(&bytes) {
                *d = b;
            }
        }
    }
}

/// The sums of the bytes of rows `r0..r0 + rows` over every tap (`c` bytes each; a
/// padding tap reads the zero-point row), for [`IntOut`]'s zero-point correction. Each
/// tap's sum fits in u32 (`c * 255`) and is vectorized as such; taps add wrapping, as the
/// correction does.
#[inline(always)]
fn row_sums(g: &QGemm<'_>, r0: usize, rows: usize) -> [i32; MR_MAX] {
    let (c, taps) = (g.w.c, g.w.taps);
    let sum = |s: &[u8]| s.iter().map(|&b| b as u32).sum::<u32>() as i32;
    let mut sums = [0i32; MR_MAX];
    for (r, out) in sums.iter_mut().enumerate().take(rows) {
        let row = r0 + r;
        *out = match g.a {
            ARows::Strided { data, stride } => sum(&data[row * stride..][..c]),
            ARows::Indirect { data, table, zero } => {
                let offsets = &table.offsets()[row * taps..(row + 1) * taps];
                offsets.iter().fold(0i32, |acc, &o| {
                    let s = if o == PAD {
                        sum(&zero[..c])
                    } else {
                        sum(&data[o as usize..][..c])
                    };
                    acc.wrapping_add(s)
                })
            }
        };
    }
    sums
}

/// Stores rows `r0..r0 + rows`, columns `j0..j0 + cols` of a finished tile as exact i32
/// (see [`IntOut`]). `signed`: the kernel summed `(a - 128) * w` (the NEON kernels read
/// activation bytes as signed), so `128 * colsum` is added back first, wrapping like
/// every other step, which gives the unsigned kernels' raw sum exactly.
///
/// # Safety
/// Every element written is inside the buffer behind `out` (bounds check).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_ints(
    io: &IntOut<'_>,
    g: &QGemm<'_>,
    signed: bool,
    acc: &[i32; MR_MAX * NR],
    sums: &[i32; MR_MAX],
    (r0, rows): (usize, usize),
    (j0, cols): (usize, usize),
    out: OutPtr,
) {
    let (mut ccol, mut zw) = ([0i32; NR], [0i32; NR]);
    let mut back = [0i32; NR];
    // Element by element, as in `store_tile`: a variable-length copy is a call.
    for (c, (cc, z)) in ccol.iter_mut().zip(&mut zw).take(cols).enumerate() {
        *cc = io.ccol[j0 + c];
        *z = io.zw[j0 + c];
        if signed {
            back[c] = g.w.col_sums()[j0 + c].wrapping_mul(128);
        }
    }
    let dst = out.0 as *mut i32;
    let mut y = [0i32; NR];
    for r in 0..rows {
        let row = r0 + r;
        let za = io.za[row % io.za.len()];
        let a = &acc[r * NR..(r + 1) * NR];
        for c in 0..NR {
            y[c] = a[c]
                .wrapping_add(back[c])
                .wrapping_sub(za.wrapping_mul(ccol[c]))
                .wrapping_sub(zw[c].wrapping_mul(sums[r]));
        }
        if io.layout.col_stride == 1 {
            let at = io.layout.at(row, j0);
            // SAFETY: inside the checked output; the arena's words may be read unaligned.
            unsafe {
                std::ptr::copy_nonoverlapping(y.as_ptr(), dst.add(at), cols);
            }
        } else {
            for (c, &v) in y.iter().enumerate().take(cols) {
                // SAFETY: as above.
                unsafe { dst.add(io.layout.at(row, j0 + c)).write_unaligned(v) };
            }
        }
    }
}

/// Where a tile's last call may store its finished rows itself (requantized in
/// registers): rows `r0..r0 + rows`, columns `j0..j0 + cols`.
#[derive(Clone, Copy)]
// The x86 VNNI and the aarch64 kernels store their own tiles; elsewhere the driver does.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
struct Fin {
    r0: usize,
    rows: usize,
    j0: usize,
    cols: usize,
}

/// The generic driver: `tile(ptrs, taps, c4, w, acc, init, fin)` computes one tile into
/// `acc`, or, given `fin`, may requantize and store it itself (then it returns `true`).
///
/// # Safety
/// As [`QKernel::tiles`]; `tile` is safe to call on the pointers handed to it.
#[inline(always)]
unsafe fn drive<const MR: usize, const SIGNED: bool>(
    g: &QGemm<'_>,
    rows: Range<usize>,
    panels: Range<usize>,
    out: OutPtr,
    tile: impl Fn(
        &[*const u8; TAPS_PER_CALL * MR_MAX],
        usize,
        usize,
        *const i8,
        &mut [i32; MR_MAX * NR],
        bool,
        Option<Fin>,
    ) -> bool,
) {
    // SAFETY: forwarded.
    unsafe { drive_prep::<MR, SIGNED>(g, rows, panels, out, |_, _, _| {}, tile) }
}

/// [`drive`], calling `prep(ptrs, taps, c4)` each time it has filled the row pointers
/// (once per row tile when the taps fit one call), before the tiles that read them: a
/// kernel converts the rows there once for every panel.
///
/// # Safety
/// As [`drive`]; `prep` is safe to call on the pointers handed to it.
#[inline(always)]
unsafe fn drive_prep<const MR: usize, const SIGNED: bool>(
    g: &QGemm<'_>,
    rows: Range<usize>,
    panels: Range<usize>,
    out: OutPtr,
    mut prep: impl FnMut(&[*const u8; TAPS_PER_CALL * MR_MAX], usize, usize),
    tile: impl Fn(
        &[*const u8; TAPS_PER_CALL * MR_MAX],
        usize,
        usize,
        *const i8,
        &mut [i32; MR_MAX * NR],
        bool,
        Option<Fin>,
    ) -> bool,
) {
    let w = g.w;
    let (taps, n) = (w.taps, w.n);
    let c4 = padded_c(w.c) / 4;
    let mut ptrs = [std::ptr::null::<u8>(); TAPS_PER_CALL * MR_MAX];
    let mut acc = [0i32; MR_MAX * NR];
    let once = taps <= TAPS_PER_CALL;
    for rt in rows {
        let r0 = rt * MR;
        let live = MR.min(g.m - r0);
        let sums = match g.ints {
            Some(io) if io.row_sums => row_sums(g, r0, live),
            _ => [0; MR_MAX],
        };
        if once {
            // SAFETY: forwarded.
            unsafe { fill_ptrs::<MR>(g, rt, 0, taps, &mut ptrs) };
            prep(&ptrs, taps, c4);
        }
        for p in panels.clone() {
            let panel = w.panel(p).as_ptr();
            let (j0, mut stored) = (p * NR, false);
            let mut t0 = 0;
            while t0 < taps {
                let tn = TAPS_PER_CALL.min(taps - t0);
                if !once {
                    // SAFETY: forwarded.
                    unsafe { fill_ptrs::<MR>(g, rt, t0, tn, &mut ptrs) };
                    prep(&ptrs, tn, c4);
                }
                // SAFETY: the panel holds `taps * c4` blocks of `NR * 4` bytes.
                let wp = unsafe { panel.add(t0 * c4 * NR * 4) };
                // An i32 product is stored by the driver (the kernels store bytes).
                let fin = (t0 + tn == taps && g.ints.is_none()).then_some(Fin {
                    r0,
                    rows: live,
                    j0,
                    cols: NR.min(n - j0),
                });
                stored = tile(&ptrs, tn, c4, wp, &mut acc, t0 == 0, fin);
                t0 += tn;
            }
            if !stored {
                let cols = NR.min(n - j0);
                // SAFETY: forwarded.
                unsafe {
                    match g.ints {
                        Some(io) => {
                            store_ints(io, g, SIGNED, &acc, &sums, (r0, live), (j0, cols), out)
                        }
                        None => store_tile(g, &acc, r0, live, j0, cols, out),
                    }
                }
            }
        }
    }
}

/// # Safety
/// As [`QKernel::tiles`].
unsafe fn portable_tiles(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr) {
    // SAFETY: forwarded; the tile reads `4 * c4` bytes per pointer (bounds check).
    unsafe {
        drive::<4, false>(g, rows, panels, out, |ptrs, taps, c4, w, acc, init, _| {
            let mut a = [0i32; 4 * NR];
            if !init {
                a.copy_from_slice(&acc[..4 * NR]);
            }
            for t in 0..taps {
                for b in 0..c4 {
                    let wb = std::slice::from_raw_parts(w.add((t * c4 + b) * NR * 4), NR * 4);
                    for r in 0..4 {
                        let x = std::slice::from_raw_parts(ptrs[t * 4 + r].add(4 * b), 4);
                        for c in 0..NR {
                            let mut s = 0i32;
                            for i in 0..4 {
                                s += x[i] as i32 * wb[c * 4 + i] as i32;
                            }
                            a[r * NR + c] = a[r * NR + c].wrapping_add(s);
                        }
                    }
                }
            }
            acc[..4 * NR].copy_from_slice(&a);
            false
        })
    }
}

#[cfg(target_arch = "aarch64")]
mod neon;

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use super::{drive, drive_prep, ARows, Fin, OutPtr, QGemm, MR_MAX, NR, PAD, TAPS_PER_CALL};
    use crate::qgemm::{QOut, Stage2};

    type Ptrs = [*const u8; TAPS_PER_CALL * MR_MAX];

    /// # Safety
    /// As `QKernel::tiles`; the CPU has AVX-512F and AVX-512 VNNI.
    pub(super) unsafe fn vnni_tiles(
        g: &QGemm<'_>,
        rows: Range<usize>,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        // SAFETY: forwarded.
        unsafe { vnni_drive(g, rows, panels, out) }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    unsafe fn vnni_drive(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr) {
        let c4 = super::padded_c(g.w.c) / 4;
        if g.ints.is_none() && g.out.stage2.is_none() && g.w.taps * c4 <= NARROW_BLOCKS {
            // SAFETY: forwarded.
            unsafe { vnni_narrow(g, rows, panels, out) };
            return;
        }
        // Fewer rows than a tile (a classifier's Gemm, a decoder step's MatMul): a tile of
        // just those (rounded up to 4), as the AVX2 driver does; the only row tile is tile
        // 0 in either size.
        // SAFETY: forwarded.
        unsafe {
            match g.m {
                1 => vnni_drive_mr::<1>(g, rows, panels, out),
                2 => vnni_drive_mr::<2>(g, rows, panels, out),
                3 | 4 => vnni_drive_mr::<4>(g, rows, panels, out),
                _ => vnni_drive_mr::<VNNI_MR>(g, rows, panels, out),
            }
        }
    }

    /// Rows of the VNNI tile.
    const VNNI_MR: usize = 8;

    /// [`vnni_drive`] in tiles of `MR` rows (at most [`VNNI_MR`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    #[inline]
    unsafe fn vnni_drive_mr<const MR: usize>(
        g: &QGemm<'_>,
        rows: Range<usize>,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        const { assert!(MR <= VNNI_MR) };
        // SAFETY: forwarded.
        unsafe {
            drive::<MR, false>(g, rows, panels, out, |p, taps, c4, w, acc, init, fin| {
                // The folded bias Add's second stage goes through `store_tile`.
                let fin = fin.filter(|_| g.out.stage2.is_none());
                vnni_tile::<MR>(p, taps, c4, w, acc, init, fin.map(|f| (f, g, out)))
            })
        }
    }

    /// Short products for the VNNI kernel, as [`avx2_narrow`] for AVX2: panel by panel,
    /// the requantization's vectors loaded once, then every row tile in one loop whose
    /// 8 rows' sums stay in registers and are requantized and stored there. Through the
    /// tile driver, the fixed cost per row tile took as long as the products: the
    /// 12544x8x16 and 12544x48x8 layers of mobilenet_tiny ran at half the AVX2 kernel's
    /// speed.
    ///
    /// # Safety
    /// As `QKernel::tiles`; `g` has a byte output without a second stage, and the CPU has
    /// AVX-512 VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    unsafe fn vnni_narrow(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr) {
        match g.a {
            ARows::Strided { data, stride } => {
                let base = data.as_ptr();
                // SAFETY: forwarded; rows up to `m - 1` are in bounds (bounds check).
                unsafe { vnni_narrow_rows(g, rows, panels, out, |row, _| base.add(row * stride)) }
            }
            ARows::Indirect { data, table, zero } => {
                let (base, offsets, taps) = (data.as_ptr(), table.offsets(), g.w.taps);
                // SAFETY: as above; each offset but `PAD` reaches its row (bounds check).
                unsafe {
                    vnni_narrow_rows(g, rows, panels, out, |row, t| {
                        match *offsets.get_unchecked(row * taps + t) {
                            PAD => zero.as_ptr(),
                            o => base.add(o as usize),
                        }
                    })
                }
            }
        }
    }

    /// [`vnni_narrow`] with row `r`'s tap `t` at `row_at(r, t)`.
    ///
    /// # Safety
    /// As [`vnni_narrow`]; `row_at` gives, for every row below `m` and tap, a pointer that
    /// reaches `4 * c4` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    #[inline]
    unsafe fn vnni_narrow_rows(
        g: &QGemm<'_>,
        rows: Range<usize>,
        panels: Range<usize>,
        out: OutPtr,
        row_at: impl Fn(usize, usize) -> *const u8,
    ) {
        const MR: usize = VNNI_MR;
        let (w, q) = (g.w, g.out);
        let (taps, n) = (w.taps, w.n);
        let c4 = super::padded_c(w.c) / 4;
        let last = g.m - 1;
        for p in panels {
            let panel = w.panel(p).as_ptr();
            let j0 = p * NR;
            let cols = NR.min(n - j0);
            let k: u16 = if cols == NR { !0 } else { (1 << cols) - 1 };
            // SAFETY: the bounds check covered `j0 + cols` columns of the per-column
            // vectors and of every row written; the panel holds `taps * c4` blocks of
            // `NR * 4` bytes; rows past `m` repeat the last (their sums are not stored).
            unsafe {
                let off = _mm512_maskz_loadu_epi32(k, q.offset.as_ptr().add(j0));
                let sc = _mm512_maskz_loadu_ps(k, q.scale.as_ptr().add(j0));
                for rt in rows.clone() {
                    let r0 = rt * MR;
                    let live = MR.min(g.m - r0);
                    let mut acc = [_mm512_setzero_si512(); MR];
                    let mut wb = panel;
                    for t in 0..taps {
                        let p: [*const u8; MR] =
                            std::array::from_fn(|r| row_at((r0 + r).min(last), t));
                        for b in 0..c4 {
                            let wv = _mm512_loadu_si512(wb as *const _);
                            for (acc, &p) in acc.iter_mut().zip(&p) {
                                *acc = _mm512_dpbusd_epi32(*acc, bcast512(p, b), wv);
                            }
                            wb = wb.add(NR * 4);
                        }
                    }
                    for (r, &acc) in acc.iter().enumerate().take(live) {
                        let y = requant16(acc, off, sc, q);
                        let dst = out.0.add((r0 + r) * g.ldo + j0);
                        _mm_mask_storeu_epi8(dst as *mut i8, k, y);
                    }
                }
            }
        }
    }

    /// Loads 4 activation bytes at `p + 4 * b`, broadcast to every lane.
    #[inline(always)]
    unsafe fn bcast512(p: *const u8, b: usize) -> __m512i {
        // SAFETY: within the row's reach (bounds check).
        _mm512_set1_epi32(unsafe { (p.add(4 * b) as *const i32).read_unaligned() })
    }

    /// One `MR x 16` tile: per 4-byte block, one weight load and, per row, a broadcast
    /// and a `vpdpbusd`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn vnni_tile<const MR: usize>(
        ptrs: &Ptrs,
        taps: usize,
        c4: usize,
        w: *const i8,
        acc: &mut [i32; MR_MAX * NR],
        init: bool,
        fin: Option<(Fin, &QGemm<'_>, OutPtr)>,
    ) -> bool {
        let a = acc.as_mut_ptr();
        // SAFETY: `acc` holds `MR_MAX >= MR` rows of 16 i32; the pointers reach `4 * c4`
        // bytes and the panel `taps * c4` blocks of 64 bytes (bounds check).
        unsafe {
            let mut v = [_mm512_setzero_si512(); MR];
            if !init {
                for (r, v) in v.iter_mut().enumerate() {
                    *v = _mm512_loadu_si512(a.add(r * NR) as *const _);
                }
            }
            let mut wb = w;
            for t in 0..taps {
                let p = &ptrs[t * MR..t * MR + MR];
                for b in 0..c4 {
                    let wv = _mm512_loadu_si512(wb as *const _);
                    for (v, &p) in v.iter_mut().zip(p) {
                        *v = _mm512_dpbusd_epi32(*v, bcast512(p, b), wv);
                    }
                    wb = wb.add(NR * 4);
                }
            }
            if let Some((f, g, out)) = fin {
                // Requantized in registers, stored with a column mask: no tile round trip.
                let q = g.out;
                let k: u16 = if f.cols == NR { !0 } else { (1 << f.cols) - 1 };
                // The bounds check covered `j0 + cols` columns of the per-column vectors
                // and of every row written.
                let off = _mm512_maskz_loadu_epi32(k, q.offset.as_ptr().add(f.j0));
                let sc = _mm512_maskz_loadu_ps(k, q.scale.as_ptr().add(f.j0));
                for (r, &v) in v.iter().enumerate().take(f.rows) {
                    let y = requant16(v, off, sc, q);
                    let dst = out.0.add((f.r0 + r) * g.ldo + f.j0);
                    _mm_mask_storeu_epi8(dst as *mut i8, k, y);
                }
                return true;
            }
            for (r, v) in v.into_iter().enumerate() {
                _mm512_storeu_si512(a.add(r * NR) as *mut _, v);
            }
        }
        false
    }

    /// `to_byte(requant(acc + off, sc, ..))` on 16 lanes, bit-identical to the scalar
    /// `requant` (so to the portable path) in 8 instructions instead of its 13: the clamp
    /// moves before the rounding (`round(clamp(v, a, b)) = clamp(round(v), a, b)` for
    /// integer bounds, as rounding is monotonic and keeps integers), where it also bounds
    /// what the conversion's rounding sees, and the zero point is added in integers.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    pub(crate) fn requant16(acc: __m512i, off: __m512i, sc: __m512, q: &QOut) -> __m128i {
        let v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc, off)), sc);
        let lo = _mm512_set1_ps((q.lo - q.zp) as f32);
        let hi = _mm512_set1_ps((q.hi - q.zp) as f32);
        let v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        // Round half to even, as the scalar path's magic-number rounding.
        let r = _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
        _mm512_cvtepi32_epi8(_mm512_add_epi32(r, _mm512_set1_epi32(q.zp)))
    }

    /// `requant(acc + off, sc, ..)` on 8 lanes for AVX2, as [`requant16`] (the clamp
    /// before the rounding, the zero point in integers), its operands as vectors, made
    /// once for a block of 8 columns and used for each of its rows (made per row, they
    /// were reloaded from `QOut` after every row's store, which may alias it, and
    /// converted again). The rounding is explicit (half to even) rather than the MXCSR's,
    /// which a host process may have changed. [`pack8`] makes the bytes.
    #[derive(Clone, Copy)]
    pub(crate) struct Requant8 {
        off: __m256i,
        sc: __m256,
        lo: __m256,
        hi: __m256,
        zp: __m256i,
    }

    impl Requant8 {
        #[target_feature(enable = "avx2")]
        #[inline]
        pub(crate) fn new(off: __m256i, sc: __m256, q: &QOut) -> Requant8 {
            Requant8 {
                off,
                sc,
                lo: _mm256_set1_ps((q.lo - q.zp) as f32),
                hi: _mm256_set1_ps((q.hi - q.zp) as f32),
                zp: _mm256_set1_epi32(q.zp),
            }
        }

        /// The stored values as i32 lanes (before the packing).
        #[target_feature(enable = "avx2")]
        #[inline]
        pub(crate) fn lanes(&self, acc: __m256i) -> __m256i {
            let v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc, self.off)), self.sc);
            let v = _mm256_min_ps(_mm256_max_ps(v, self.lo), self.hi);
            let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            _mm256_add_epi32(_mm256_cvttps_epi32(r), self.zp)
        }

        /// Whether every scale is at most 0.5 in magnitude (and not NaN), where
        /// [`Requant8::unclamped`] is exact.
        #[target_feature(enable = "avx2")]
        #[inline]
        pub(crate) fn unclamped_is_exact(&self) -> bool {
            let a = _mm256_andnot_ps(_mm256_set1_ps(-0.0), self.sc);
            _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NLE_UQ>(a, _mm256_set1_ps(0.5))) == 0
        }

        /// [`Requant8::lanes`] without the clamp, which the bytes then take from the
        /// saturating packs and a byte clamp ([`clamp_bytes`]): saturation is monotonic
        /// and keeps `[0, 255]`, so clamping after it to bounds inside that range is the
        /// same as before it. Exact when [`Requant8::unclamped_is_exact`]: a sum times a
        /// scale of at most 0.5 is at most 2^30, so the conversion neither overflows nor
        /// wraps with the zero point added.
        #[target_feature(enable = "avx2")]
        #[inline]
        pub(crate) fn unclamped(&self, acc: __m256i) -> __m256i {
            let v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc, self.off)), self.sc);
            let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            _mm256_add_epi32(_mm256_cvttps_epi32(r), self.zp)
        }
    }

    /// Bytes `b` clamped to the output's stored range `[q.lo, q.hi]`.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn clamp_bytes(b: __m256i, q: &QOut) -> __m256i {
        let lo = _mm256_set1_epi8(q.lo as u8 as i8);
        let hi = _mm256_set1_epi8(q.hi as u8 as i8);
        _mm256_min_epu8(_mm256_max_epu8(b, lo), hi)
    }

    /// `Stage2::apply` on 8 lanes, its operands as vectors for a block of 8 columns, bit-
    /// identical to it: the same f32 steps (a multiply and an add, not a fused one; a
    /// true division), its clamps as `max` then `min` (which give the lower bound for a
    /// NaN, as `clamp` does), the rounding explicit.
    #[derive(Clone, Copy)]
    pub(crate) struct Stage2x8 {
        z1: __m256,
        s1: __m256,
        bias: __m256,
        s2: __m256,
        z2: __m256i,
        lo: __m256i,
        hi: __m256i,
    }

    impl Stage2x8 {
        /// For columns whose dequantized biases are `bias`.
        #[target_feature(enable = "avx2")]
        #[inline]
        pub(crate) fn new(bias: __m256, s: &Stage2) -> Stage2x8 {
            Stage2x8 {
                z1: _mm256_set1_ps(s.z1 as f32),
                s1: _mm256_set1_ps(s.s1),
                bias,
                s2: _mm256_set1_ps(s.s2),
                z2: _mm256_set1_epi32(s.z2),
                lo: _mm256_set1_epi32(s.lo),
                hi: _mm256_set1_epi32(s.hi),
            }
        }

        /// The stored values of first-stage values `y1` (i32 lanes in `[0, 255]`).
        #[target_feature(enable = "avx2")]
        #[inline]
        pub(crate) fn lanes(&self, y1: __m256i) -> __m256i {
            let f = _mm256_sub_ps(_mm256_cvtepi32_ps(y1), self.z1);
            let f = _mm256_add_ps(_mm256_mul_ps(f, self.s1), self.bias);
            let x = _mm256_div_ps(f, self.s2);
            let x = _mm256_max_ps(x, _mm256_set1_ps(-4_194_304.0));
            let x = _mm256_min_ps(x, _mm256_set1_ps(4_194_304.0));
            let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
            let y = _mm256_add_epi32(_mm256_cvttps_epi32(r), self.z2);
            _mm256_min_epi32(_mm256_max_epi32(y, self.lo), self.hi)
        }
    }

    /// Stores the first `n` (at most 8) bytes of `y`, in order, at `d`: whole words, no
    /// byte loop through the stack.
    ///
    /// # Safety
    /// `d` reaches `n` bytes.
    #[inline(always)]
    pub(crate) unsafe fn store_bytes(d: *mut u8, y: u64, n: usize) {
        // SAFETY: each write stays within the first `n` bytes.
        unsafe {
            if n == 8 {
                (d as *mut u64).write_unaligned(y.to_le());
                return;
            }
            let (mut d, mut y) = (d, y);
            if n & 4 != 0 {
                (d as *mut u32).write_unaligned((y as u32).to_le());
                (d, y) = (d.add(4), y >> 32);
            }
            if n & 2 != 0 {
                (d as *mut u16).write_unaligned((y as u16).to_le());
                (d, y) = (d.add(2), y >> 16);
            }
            if n & 1 != 0 {
                d.write(y as u8);
            }
        }
    }

    /// Byte 0 of each i32 lane (values in `[0, 255]`), as the 8 bytes of a `u64` in lane
    /// order.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn pack8(y: __m256i) -> u64 {
        let pick = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, //
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let b = _mm256_shuffle_epi8(y, pick);
        let b = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
        _mm_cvtsi128_si64(b) as u64
    }

    /// Byte 0 of each i32 lane (values in `[0, 255]`) of four vectors, packed together:
    /// 64-bit lane `r` of the result holds vector `r`'s 8 bytes in lane order (two
    /// `vpackssdw`, one `vpackuswb`, one cross-lane permute: four rows for the price of
    /// one and a half [`pack8`]s).
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn pack4x8(y: [__m256i; 4]) -> __m256i {
        let b = _mm256_packus_epi16(
            _mm256_packs_epi32(y[0], y[1]),
            _mm256_packs_epi32(y[2], y[3]),
        );
        // 32-bit lane r: bytes 0-3 of vector r; lane 4 + r: its bytes 4-7.
        _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }

    /// Quads 1 and 2 of `v` swapped: the columns of a row's `hadd`ed sums, in the order
    /// [0 1 4 5 | 2 3 6 7], to column order and back. (A function rather than a closure
    /// in the tile: a closure the optimizer does not inline runs without AVX2.)
    #[target_feature(enable = "avx2")]
    #[inline]
    fn swap(v: __m256i) -> __m256i {
        _mm256_permute4x64_epi64::<0xD8>(v)
    }

    /// [`swap`] of f32 lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn swap_ps(v: __m256) -> __m256 {
        _mm256_castsi256_ps(swap(_mm256_castps_si256(v)))
    }

    /// Stores 64-bit lane `r` of `b` (a [`pack4x8`]) at `d + r * stride`.
    ///
    /// # Safety
    /// The four 8-byte ranges are writable.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) unsafe fn store4x8(d: *mut u8, stride: usize, b: __m256i) {
        let (b01, b23) = (_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
        // SAFETY: as the function's contract.
        unsafe {
            _mm_storel_epi64(d as *mut __m128i, b01);
            _mm_storeh_pd(d.add(stride) as *mut f64, _mm_castsi128_pd(b01));
            _mm_storel_epi64(d.add(2 * stride) as *mut __m128i, b23);
            _mm_storeh_pd(d.add(3 * stride) as *mut f64, _mm_castsi128_pd(b23));
        }
    }

    /// # Safety
    /// As `QKernel::tiles`; the CPU has AVX2.
    pub(super) unsafe fn avx2_tiles(
        g: &QGemm<'_>,
        rows: Range<usize>,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        // SAFETY: forwarded.
        unsafe { avx2_drive(g, rows, panels, out) }
    }

    /// Rows of the AVX2 tile.
    pub(super) const AVX2_MR: usize = 4;
    /// The most activation values per row that the AVX2 driver widens once per row tile
    /// (`taps * 4 * c4` of one call); longer rows are widened inside the tile, per panel.
    const WIDE_ROW: usize = 2048;

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_drive(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr) {
        let c4 = super::padded_c(g.w.c) / 4;
        if g.ints.is_none() && g.w.taps * c4 <= NARROW_BLOCKS {
            // SAFETY: forwarded.
            unsafe { avx2_narrow(g, rows, panels, out) };
            return;
        }
        // Fewer rows than a tile (a classifier's Gemm, a decoder step's MatMul, of one to
        // three rows): a tile of just those, whose broadcasts and products are theirs (the
        // 4-row tile repeats the last row in the rest). The only row tile is tile 0 in
        // either size.
        // SAFETY: forwarded.
        unsafe {
            match g.m {
                1 => avx2_drive_mr::<1>(g, rows, panels, out),
                2 => avx2_drive_mr::<2>(g, rows, panels, out),
                3 => avx2_drive_mr::<3>(g, rows, panels, out),
                _ => avx2_drive_mr::<AVX2_MR>(g, rows, panels, out),
            }
        }
    }

    /// [`avx2_drive`] in tiles of `MR` rows (at most [`AVX2_MR`]).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn avx2_drive_mr<const MR: usize>(
        g: &QGemm<'_>,
        rows: Range<usize>,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        const { assert!(MR <= AVX2_MR) };
        let c4 = super::padded_c(g.w.c) / 4;
        let stride = g.w.taps.min(TAPS_PER_CALL) * c4 * 4;
        if stride > WIDE_ROW {
            // SAFETY: forwarded.
            unsafe {
                drive::<MR, false>(g, rows, panels, out, |p, taps, c4, w, acc, init, fin| {
                    let fin = fin.map(|f| (f, g, out));
                    avx2_tile::<MR, false>(p, std::ptr::null(), 0, taps, c4, w, acc, init, fin)
                })
            }
            return;
        }
        // Every panel of a row tile multiplies the same activations: they are widened to
        // i16 once, here, instead of once per panel and half inside the tile (where the
        // widening and broadcast shuffles outnumbered the multiplies). Not initialized:
        // the tiles read only what `widen` wrote for their row tile.
        let mut wide = [std::mem::MaybeUninit::<i16>::uninit(); AVX2_MR * WIDE_ROW];
        let wp = wide.as_mut_ptr() as *mut i16;
        // SAFETY: forwarded; `widen` writes `taps * 4 * c4 <= stride` values per row.
        unsafe {
            drive_prep::<MR, false>(
                g,
                rows,
                panels,
                out,
                |p, taps, c4| widen::<MR>(p, taps, c4, wp, stride),
                |p, taps, c4, w, acc, init, fin| {
                    let fin = fin.map(|f| (f, g, out));
                    avx2_tile::<MR, true>(p, wp, stride, taps, c4, w, acc, init, fin)
                },
            )
        }
    }

    /// Widens the `4 * c4` bytes behind each of the tile's `taps x MR` pointers to i16,
    /// row `r`'s taps one after another from `dst + r * stride`.
    ///
    /// # Safety
    /// The pointers reach `4 * c4` bytes; `dst` holds `MR * stride` values and
    /// `taps * 4 * c4 <= stride`.
    #[target_feature(enable = "avx2")]
    unsafe fn widen<const MR: usize>(
        ptrs: &Ptrs,
        taps: usize,
        c4: usize,
        dst: *mut i16,
        stride: usize,
    ) {
        let n = 4 * c4;
        for r in 0..MR {
            for t in 0..taps {
                let src = ptrs[t * MR + r];
                // SAFETY: as the function's contract.
                unsafe {
                    let d = dst.add(r * stride + t * n);
                    let mut i = 0;
                    while i + 16 <= n {
                        let x = _mm_loadu_si128(src.add(i) as *const _);
                        _mm256_storeu_si256(d.add(i) as *mut _, _mm256_cvtepu8_epi16(x));
                        i += 16;
                    }
                    if i + 8 <= n {
                        let x = _mm_loadl_epi64(src.add(i) as *const _);
                        _mm_storeu_si128(d.add(i) as *mut _, _mm_cvtepu8_epi16(x));
                        i += 8;
                    }
                    if i < n {
                        let x = (src.add(i) as *const i32).read_unaligned();
                        let x = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(x));
                        _mm_storel_epi64(d.add(i) as *mut _, x);
                    }
                }
            }
        }
    }

    /// 4 activation bytes widened to i16 and repeated in every 64-bit lane.
    #[inline(always)]
    unsafe fn bcast256(p: *const u8, b: usize) -> __m256i {
        // SAFETY: within the row's reach (bounds check).
        let x = unsafe { (p.add(4 * b) as *const i32).read_unaligned() };
        _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(x)))
    }

    /// One MR x 16 tile into `acc`, or, given `fin`, requantized in registers and stored
    /// (then it returns `true`), as the VNNI tile does. With `WIDE`, the activations come
    /// widened from `wide` (row `r` at `wide + r * stride`, see [`widen`]), else from the
    /// pointers.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2_tile<const MR: usize, const WIDE: bool>(
        ptrs: &Ptrs,
        wide: *const i16,
        stride: usize,
        taps: usize,
        c4: usize,
        w: *const i8,
        acc: &mut [i32; MR_MAX * NR],
        init: bool,
        fin: Option<(Fin, &QGemm<'_>, OutPtr)>,
    ) -> bool {
        let a = acc.as_mut_ptr();
        // Two passes of 8 columns; per row, columns 0-3 and 4-7 of the half, each column as
        // two partial sums (k0*w0 + k1*w1, k2*w2 + k3*w3) in neighbouring lanes.
        // A stored panel of 8 columns or fewer (the last of `n`) needs no second half.
        let halves = match fin {
            Some((f, ..)) if f.cols <= 8 => 1,
            _ => 2,
        };
        for half in 0..halves {
            // SAFETY: as for the VNNI tile; `wide` holds `taps * 4 * c4` values per row.
            unsafe {
                let mut lo = [_mm256_setzero_si256(); MR];
                let mut hi = [_mm256_setzero_si256(); MR];
                let mut wb = w.add(half * 32);
                for t in 0..taps {
                    let p = &ptrs[t * MR..t * MR + MR];
                    for b in 0..c4 {
                        let w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wb as *const _));
                        let w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wb.add(16) as *const _));
                        for r in 0..MR {
                            let x = if WIDE {
                                let at = wide.add(r * stride + (t * c4 + b) * 4);
                                _mm256_set1_epi64x((at as *const i64).read_unaligned())
                            } else {
                                bcast256(p[r], b)
                            };
                            lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(x, w0));
                            hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(x, w1));
                        }
                        wb = wb.add(NR * 4);
                    }
                }
                let Some((f, g, out)) = fin else {
                    // Raw sums for a later call or for the driver: in column order.
                    for r in 0..MR {
                        let s = swap(_mm256_hadd_epi32(lo[r], hi[r]));
                        let dst = a.add(r * NR + half * 8) as *mut __m256i;
                        let s = if init {
                            s
                        } else {
                            _mm256_add_epi32(s, _mm256_loadu_si256(dst))
                        };
                        _mm256_storeu_si256(dst, s);
                    }
                    continue;
                };
                // The columns of this half that the output has. The bounds check covered
                // `j0 + cols` columns of the per-column vectors; a half past them reads
                // none (`cols` 0, every lane masked).
                let cols = f.cols.saturating_sub(half * 8).min(8);
                let ho = HalfOut::new(g, (f.j0 + half * 8).min(f.j0 + f.cols), cols);
                let mut sums = [_mm256_setzero_si256(); MR];
                for (r, s) in sums.iter_mut().enumerate() {
                    *s = _mm256_hadd_epi32(lo[r], hi[r]);
                    if !init {
                        let prev = a.add(r * NR + half * 8) as *const __m256i;
                        *s = _mm256_add_epi32(*s, swap(_mm256_loadu_si256(prev)));
                    }
                }
                let d = out.0.add(f.r0 * g.ldo + f.j0 + half * 8);
                // (Rows past `MR` are zeros that `store` leaves unstored: `f.rows <= MR`.)
                let mut four = [_mm256_setzero_si256(); AVX2_MR];
                four[..MR].copy_from_slice(&sums);
                ho.store(&four, d, g.ldo, f.rows);
            }
        }
        fin.is_some()
    }

    /// The requantization of one 8-column half of a panel: its per-column parameters as
    /// vectors, put once in the order that `hadd` leaves a row's sums in ([0 1 4 5 | 2 3
    /// 6 7], see [`swap`]) instead of each row's sums being put in column order.
    struct HalfOut<'a> {
        rq: Requant8,
        /// A folded bias Add's second stage (its biases are per column too).
        s2: Option<Stage2x8>,
        /// Columns of the half that the output has (at most 8; 0 stores nothing).
        cols: usize,
        /// The clamp is left to the saturating packs and the bytes (see
        /// [`Requant8::unclamped`]): no second stage, and small scales.
        late_clamp: bool,
        q: &'a QOut,
    }

    impl<'a> HalfOut<'a> {
        /// For columns `j..j + cols` of `g`'s output, their parameters loaded under a lane
        /// mask.
        ///
        /// # Safety
        /// `g` passed its bounds check, which covers columns `j..j + cols`.
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn new(g: &QGemm<'a>, j: usize, cols: usize) -> HalfOut<'a> {
            let m = _mm256_cmpgt_epi32(
                _mm256_set1_epi32(cols as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            );
            // SAFETY: masked lanes are not read; the others are inside the checked columns.
            unsafe {
                let off = swap(_mm256_maskload_epi32(g.out.offset.as_ptr().add(j), m));
                let sc = swap_ps(_mm256_maskload_ps(g.out.scale.as_ptr().add(j), m));
                let s2 = g.out.stage2.as_ref().map(|s| {
                    let bias = swap_ps(_mm256_maskload_ps(s.bias.as_ptr().add(j), m));
                    Stage2x8::new(bias, s)
                });
                let rq = Requant8::new(off, sc, g.out);
                HalfOut {
                    late_clamp: s2.is_none() && rq.unclamped_is_exact(),
                    rq,
                    s2,
                    cols,
                    q: g.out,
                }
            }
        }

        /// Requantizes the `hadd`ed sums of `rows` (at most 4) rows, in the swapped column
        /// order, and stores row `r`'s bytes at `d + r * ldo`.
        ///
        /// # Safety
        /// Each of the `rows` rows at `d` reaches `cols` writable bytes.
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn store(&self, sums: &[__m256i; 4], d: *mut u8, ldo: usize, rows: usize) {
            let mut ys = [_mm256_setzero_si256(); 4];
            for (y, &s) in ys.iter_mut().zip(sums) {
                *y = if self.late_clamp {
                    self.rq.unclamped(s)
                } else {
                    let y = self.rq.lanes(s);
                    match &self.s2 {
                        Some(s2) => s2.lanes(y),
                        None => y,
                    }
                };
            }
            // Packed to bytes together (saturating), each row's bytes then put in column
            // order.
            let order = _mm256_setr_epi8(
                0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15, //
                0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15,
            );
            let mut b = _mm256_shuffle_epi8(pack4x8(ys), order);
            if self.late_clamp {
                b = clamp_bytes(b, self.q);
            }
            // SAFETY: as the function's contract.
            unsafe {
                if rows == 4 && self.cols == 8 {
                    store4x8(d, ldo, b);
                    return;
                }
                // Fewer rows or columns: row by row, `cols` bytes each.
                let mut words = [0u64; 4];
                _mm256_storeu_si256(words.as_mut_ptr() as *mut __m256i, b);
                if self.cols > 0 {
                    for (r, &w) in words.iter().enumerate().take(rows) {
                        store_bytes(d.add(r * ldo), u64::from_le(w), self.cols);
                    }
                }
            }
        }
    }

    /// The most 4-byte blocks (`taps * c4`) of a product that [`avx2_narrow`] runs: below
    /// it the tile driver's fixed cost per row tile (filling the pointer table, widening
    /// the rows, the call, the requantization's parameters) outweighed the products.
    const NARROW_BLOCKS: usize = 16;

    /// Short products (mobile CNNs' narrow 1x1 layers, a 3-channel stem's taps): panel by
    /// panel and half by half, its requantization parameters made once, then every row
    /// tile in one tight loop that finds its rows by arithmetic (or the table) and reads
    /// and widens each 4-byte block where it multiplies it. Sums over every tap in
    /// registers; bytes out.
    ///
    /// # Safety
    /// As `QKernel::tiles`; `g` has a byte output and the CPU has AVX2.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_narrow(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr) {
        match g.a {
            ARows::Strided { data, stride } => {
                let base = data.as_ptr();
                // SAFETY: forwarded; rows up to `m - 1` are in bounds (bounds check).
                unsafe { narrow_rows(g, rows, panels, out, |row, _| base.add(row * stride)) }
            }
            ARows::Indirect { data, table, zero } => {
                let (base, offsets, taps) = (data.as_ptr(), table.offsets(), g.w.taps);
                // SAFETY: as above; each offset but `PAD` reaches its row (bounds check).
                unsafe {
                    narrow_rows(g, rows, panels, out, |row, t| {
                        match *offsets.get_unchecked(row * taps + t) {
                            PAD => zero.as_ptr(),
                            o => base.add(o as usize),
                        }
                    })
                }
            }
        }
    }

    /// [`avx2_narrow`] with row `r`'s tap `t` at `row_at(r, t)`.
    ///
    /// # Safety
    /// As [`avx2_narrow`]; `row_at` gives, for every row below `m` and tap, a pointer that
    /// reaches `4 * c4` bytes.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn narrow_rows(
        g: &QGemm<'_>,
        rows: Range<usize>,
        panels: Range<usize>,
        out: OutPtr,
        row_at: impl Fn(usize, usize) -> *const u8,
    ) {
        const MR: usize = AVX2_MR;
        let w = g.w;
        let (taps, n) = (w.taps, w.n);
        let c4 = super::padded_c(w.c) / 4;
        let last = g.m - 1;
        for p in panels {
            let panel = w.panel(p).as_ptr();
            let j0 = p * NR;
            let cols_p = NR.min(n - j0);
            for half in 0..cols_p.div_ceil(8) {
                let cols = (cols_p - half * 8).min(8);
                // SAFETY: columns `j0 + half * 8..` up to `n` are checked.
                let ho = unsafe { HalfOut::new(g, j0 + half * 8, cols) };
                for rt in rows.clone() {
                    let r0 = rt * MR;
                    let live = MR.min(g.m - r0);
                    let mut lo = [_mm256_setzero_si256(); MR];
                    let mut hi = [_mm256_setzero_si256(); MR];
                    // SAFETY: the panel holds `taps * c4` blocks of `NR * 4` bytes; rows
                    // past `m` repeat the last (their sums are not stored).
                    unsafe {
                        let mut wb = panel.add(half * 32);
                        for t in 0..taps {
                            let p: [*const u8; MR] =
                                std::array::from_fn(|r| row_at((r0 + r).min(last), t));
                            for b in 0..c4 {
                                let w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wb as *const _));
                                let w1 =
                                    _mm256_cvtepi8_epi16(_mm_loadu_si128(wb.add(16) as *const _));
                                for r in 0..MR {
                                    let x = bcast4(p[r], b);
                                    lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(x, w0));
                                    hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(x, w1));
                                }
                                wb = wb.add(NR * 4);
                            }
                        }
                        // A loop, not `array::from_fn`: a closure the optimizer does not
                        // inline runs without AVX2.
                        let mut sums = [_mm256_setzero_si256(); MR];
                        for (r, s) in sums.iter_mut().enumerate() {
                            *s = _mm256_hadd_epi32(lo[r], hi[r]);
                        }
                        let d = out.0.add(r0 * g.ldo + j0 + half * 8);
                        ho.store(&sums, d, g.ldo, live);
                    }
                }
            }
        }
    }

    /// The 4 activation bytes at `p + 4 * b` widened to i16 and repeated in every 64-bit
    /// lane: a broadcast load and one widening (the widening of four copies is the
    /// broadcast of the widened four).
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn bcast4(p: *const u8, b: usize) -> __m256i {
        // SAFETY: within the row's reach (bounds check).
        let x = unsafe { (p.add(4 * b) as *const i32).read_unaligned() };
        _mm256_cvtepu8_epi16(_mm_set1_epi32(x))
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::arch::x86_64::*;

    use super::x86::{clamp_bytes, pack4x8, pack8, requant16, Requant8, Stage2x8};
    use crate::qgemm::{requant, to_byte, QOut, Stage2};

    /// The vector requantizations reorder the scalar one's steps (clamp before rounding,
    /// the zero point in integers); they must still give the same byte for every input:
    /// halfway ties (scale 0.5 and odd sums), both clamps, a saturating scale, and sums
    /// at the ends of i32. `vector(accs, scale, q, out)` requantizes up to `L` sums.
    fn agrees_with_scalar<const L: usize>(vector: impl Fn(&[i32; L], f32, &QOut, &mut [u8; L])) {
        let mut accs: Vec<i32> = (-300..300).collect();
        accs.extend([
            i32::MIN,
            i32::MIN + 1,
            i32::MAX,
            1 << 24,
            (1 << 24) + 1,
            -(1 << 23) - 3,
        ]);
        let mut seed = 0x9e37_79b9_u32;
        accs.extend((0..2000).map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as i32 >> (seed % 24)
        }));
        let outs = [
            (128, 0, 255),
            (3, 3, 255),
            (200, 0, 250),
            (0, 0, 255),
            (255, 17, 255),
        ];
        let scales = [0.5, 0.25, 1.0, 0.0123, 3.7e-5, 1.5, f32::MAX, 0.0];
        for &(zp, lo, hi) in &outs {
            for &scale in &scales {
                let q = QOut {
                    offset: vec![0; 16],
                    scale: vec![scale; 16],
                    zp,
                    lo,
                    hi,
                    stage2: None,
                };
                for block in accs.chunks(L) {
                    let mut a = [0i32; L];
                    a[..block.len()].copy_from_slice(block);
                    let mut got = [0u8; L];
                    vector(&a, scale, &q, &mut got);
                    for (l, &acc) in a.iter().enumerate() {
                        let want = to_byte(requant(acc, scale, zp as f32, lo as f32, hi as f32));
                        assert_eq!(got[l], want, "acc {acc} scale {scale} zp {zp} [{lo}, {hi}]");
                    }
                }
            }
        }
    }

    #[test]
    fn requant16_is_the_scalar_requantization_bit_for_bit() {
        if !is_x86_feature_detected!("avx512bw") || !is_x86_feature_detected!("avx512vl") {
            eprintln!("no AVX-512BW/VL here: the 16-lane requantization is not used");
            return;
        }
        agrees_with_scalar::<16>(|a, scale, q, got| {
            // SAFETY: AVX-512BW/VL detected above; 16 lanes in and out.
            unsafe {
                let y = requant16(
                    _mm512_loadu_si512(a.as_ptr() as *const _),
                    _mm512_setzero_si512(),
                    _mm512_set1_ps(scale),
                    q,
                );
                _mm_storeu_si128(got.as_mut_ptr() as *mut __m128i, y);
            }
        });
    }

    #[test]
    fn requant8_is_the_scalar_requantization_bit_for_bit() {
        if !is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 here: the 8-lane requantization is not used");
            return;
        }
        agrees_with_scalar::<8>(|a, scale, q, got| {
            // SAFETY: AVX2 detected above; 8 lanes in and out.
            let y = unsafe {
                let rq = Requant8::new(_mm256_setzero_si256(), _mm256_set1_ps(scale), q);
                pack8(rq.lanes(_mm256_loadu_si256(a.as_ptr() as *const _)))
            };
            *got = y.to_le_bytes();
        });
    }

    #[test]
    fn the_late_clamp_is_the_scalar_requantization_where_it_is_taken() {
        if !is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 here: the 8-lane requantization is not used");
            return;
        }
        let taken = std::cell::RefCell::new(Vec::new());
        agrees_with_scalar::<8>(|a, scale, q, got| {
            // SAFETY: AVX2 detected above; 8 lanes in and out.
            let y = unsafe {
                let rq = Requant8::new(_mm256_setzero_si256(), _mm256_set1_ps(scale), q);
                let acc = _mm256_loadu_si256(a.as_ptr() as *const _);
                if rq.unclamped_is_exact() {
                    taken.borrow_mut().push(scale.to_bits());
                    let y = rq.unclamped(acc);
                    let b = clamp_bytes(pack4x8([y, y, y, y]), q);
                    _mm256_extract_epi64::<0>(b) as u64
                } else {
                    pack8(rq.lanes(acc))
                }
            };
            *got = y.to_le_bytes();
        });
        // The clamp is left late up to scale 0.5 (and at 0), and not above it, where a
        // sum at the end of i32 times the scale leaves i32.
        let taken = taken.into_inner();
        for (scale, late) in [(0.5f32, true), (0.0123, true), (0.0, true), (1.0, false)] {
            assert_eq!(taken.contains(&scale.to_bits()), late, "scale {scale}");
        }
        assert!(!taken.contains(&f32::MAX.to_bits()) && !taken.contains(&1.5f32.to_bits()));
    }

    #[test]
    fn the_8_lane_second_stage_is_stage2_apply_bit_for_bit() {
        if !is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 here: the 8-lane second stage is not used");
            return;
        }
        // Biases at halfway points of small and large scales, both clamps, a NaN and an
        // infinity (the scalar clamps send a NaN to the lower bound).
        let mut biases = vec![
            0.0,
            0.5,
            -0.5,
            1.25,
            -3.75,
            1e9,
            -1e9,
            f32::INFINITY,
            f32::NAN,
        ];
        let mut seed = 0x2545_f491_u32;
        biases.extend((0..600).map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed as i32 as f32) * 1e-7
        }));
        let params = [
            // (s1, z1, s2, z2, lo, hi)
            (0.5, 128, 0.5, 128, 0, 255),
            (0.02, 3, 0.03, 7, 0, 255),
            (1.0, 0, 2.0, 0, 0, 255),
            (0.1, 200, 0.07, 13, 13, 250),
            (3.7e-5, 128, 1.1e-5, 255, 0, 255),
        ];
        for &(s1, z1, s2, z2, lo, hi) in &params {
            let y1_at = |y0: i32, l: usize| (y0 + l as i32 * 37) % 256;
            // Biases that put the sum within an ulp or two of a halfway point of `s2`,
            // where a multiply by `1 / s2` would round the other way.
            let ties = (0..256).step_by(8).map(|y0| {
                std::array::from_fn(|l| {
                    let k = (l as i32 * 11 + y0) % 61 - 30;
                    (k as f32 + 0.5) * s2 - (y1_at(y0, l) - z1) as f32 * s1
                })
            });
            let blocks = biases.chunks(8).map(|b| {
                let mut bias = [0f32; 8];
                bias[..b.len()].copy_from_slice(b);
                bias
            });
            for bias in blocks.chain(ties) {
                let st = Stage2 {
                    s1,
                    z1,
                    bias: bias.to_vec(),
                    s2,
                    z2,
                    lo,
                    hi,
                };
                for y0 in (0..256).step_by(8) {
                    let y1: [i32; 8] = std::array::from_fn(|l| y1_at(y0, l));
                    let mut got = [0i32; 8];
                    // SAFETY: AVX2 detected above; 8 lanes in and out.
                    unsafe {
                        let s2 = Stage2x8::new(_mm256_loadu_ps(bias.as_ptr()), &st);
                        let y = s2.lanes(_mm256_loadu_si256(y1.as_ptr() as *const _));
                        _mm256_storeu_si256(got.as_mut_ptr() as *mut _, y);
                    }
                    for l in 0..8 {
                        let want = st.apply(y1[l] as f32, l);
                        assert_eq!(got[l], want as i32, "y1 {} bias {} {st:?}", y1[l], bias[l]);
                    }
                }
            }
        }
    }
}
