//! The int8 micro-kernels and their run-time dispatch.
//!
//! Each computes one `MR x NR` tile of raw dot products: `tile[r * NR + c] = sum over the
//! k4 blocks of a_panel[blk][r][0..4] . w_panel[blk][c][0..4]` (see the packing in the
//! parent module). Everything else (zero points, bias, requantization) is the driver's.
//!
//! | kernel | ISA | inner step |
//! | --- | --- | --- |
//! | `avx512-vnni` | x86-64 AVX-512 VNNI | `vpdpbusd` on 512 bits: two rows per register against the weight block repeated in both halves, offset as below |
//! | `avx-vnni` | x86-64 AVX-VNNI | `vpdpbusd`: u8 x i8 → i32, 4 products per lane; the signed activation is offset by 128 and the offset removed with the column sums |
//! | `avx2` | x86-64 AVX2 | sign-extend bytes to i16, `vpmaddwd` (no saturation: i16 products summed in pairs into i32) |
//! | `neon-i8mm` | aarch64 `i8mm` | `smmla` through `asm!` (the intrinsic is unstable) |
//! | `neon-dotprod` | aarch64 `dotprod` | `sdot` by element through `asm!` |
//! | `neon` | aarch64 NEON | `smull` + `sadalp` (i16 products, pairwise widening add) |
//! | `portable` | any | scalar i32 |
//!
//! `vpmaddubsw` is deliberately not used: its i16 pair sums saturate for u8 x i8 inputs
//! near the range ends, which would break exactness.

use super::{MR, NR};

/// The unsafe entry: `a` points to `k4 * MR * 4` bytes, `b` to `k4 * NR * 4`, `tile` to
/// `MR * NR` writable i32, and the CPU has the kernel's features.
type Entry = unsafe fn(k4: usize, a: *const i8, b: *const i8, tile: *mut i32);

/// Names the kernels, for tests and forcing one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QKernelId {
    Portable,
    Avx2,
    AvxVnni,
    Avx512Vnni,
    Neon,
    NeonDotprod,
    NeonI8mm,
}

/// One int8 micro-kernel. Obtained only through [`QKernel::select`] or
/// [`QKernel::available`], which check the CPU first: that makes [`QKernel::run`] safe.
#[derive(Debug)]
pub struct QKernel {
    id: QKernelId,
    name: &'static str,
    entry: Entry,
}

static PORTABLE: QKernel = QKernel {
    id: QKernelId::Portable,
    name: "int8 portable 4x8",
    entry: portable,
};

#[cfg(target_arch = "x86_64")]
static AVX2: QKernel = QKernel {
    id: QKernelId::Avx2,
    name: "int8 avx2 4x8 (vpmaddwd)",
    entry: x86::avx2,
};

#[cfg(target_arch = "x86_64")]
static AVX512_VNNI: QKernel = QKernel {
    id: QKernelId::Avx512Vnni,
    name: "int8 avx512-vnni 4x8 (vpdpbusd zmm)",
    entry: x86::avx512_vnni,
};

#[cfg(target_arch = "x86_64")]
static AVX_VNNI: QKernel = QKernel {
    id: QKernelId::AvxVnni,
    name: "int8 avx-vnni 4x8 (vpdpbusd)",
    entry: x86::avx_vnni,
};

#[cfg(target_arch = "aarch64")]
static NEON: QKernel = QKernel {
    id: QKernelId::Neon,
    name: "int8 neon 4x8 (smull+sadalp)",
    entry: arm::neon,
};

#[cfg(target_arch = "aarch64")]
static NEON_DOTPROD: QKernel = QKernel {
    id: QKernelId::NeonDotprod,
    name: "int8 neon dotprod 4x8 (sdot)",
    entry: arm::dotprod,
};

#[cfg(target_arch = "aarch64")]
static NEON_I8MM: QKernel = QKernel {
    id: QKernelId::NeonI8mm,
    name: "int8 neon i8mm 4x8 (smmla)",
    entry: arm::i8mm,
};

impl QKernel {
    /// Every kernel this CPU runs, best first (the portable one last).
    pub fn available() -> Vec<&'static QKernel> {
        #[allow(unused_mut)]
        let mut out: Vec<&'static QKernel> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni") {
                out.push(&AVX512_VNNI);
            }
            if is_x86_feature_detected!("avxvnni") && is_x86_feature_detected!("avx2") {
                out.push(&AVX_VNNI);
            }
            if is_x86_feature_detected!("avx2") {
                out.push(&AVX2);
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            use std::arch::is_aarch64_feature_detected as has;
            if has!("i8mm") {
                out.push(&NEON_I8MM);
            }
            if has!("dotprod") {
                out.push(&NEON_DOTPROD);
            }
            if has!("neon") {
                out.push(&NEON);
            }
        }
        out.push(&PORTABLE);
        out
    }

    /// The best kernel of this CPU, or the portable one when `allow_simd` is false.
    pub fn select(allow_simd: bool) -> &'static QKernel {
        if allow_simd {
            QKernel::available()[0]
        } else {
            &PORTABLE
        }
    }

    /// Which kernel this is.
    pub fn id(&self) -> QKernelId {
        self.id
    }

    /// A short name with the instruction it is built on (`"int8 avx2 4x8 (vpmaddwd)"`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// One tile; panics if a slice is shorter than the kernel reads or writes.
    pub fn run(&self, k4: usize, a: &[i8], b: &[i8], tile: &mut [i32; MR * NR]) {
        assert!(a.len() >= k4 * MR * 4, "activation panel too short");
        assert!(b.len() >= k4 * NR * 4, "weight panel too short");
        // SAFETY: lengths checked above; `self` is a static handed out only after its CPU
        // features were detected.
        unsafe { (self.entry)(k4, a.as_ptr(), b.as_ptr(), tile.as_mut_ptr()) }
    }
}

/// # Safety
/// Pointers as documented on [`Entry`].
unsafe fn portable(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
    // SAFETY: the caller guarantees these lengths.
    let (a, b, tile) = unsafe {
        (
            std::slice::from_raw_parts(a, k4 * MR * 4),
            std::slice::from_raw_parts(b, k4 * NR * 4),
            std::slice::from_raw_parts_mut(tile, MR * NR),
        )
    };
    let mut acc = [0i32; MR * NR];
    for (ab, bb) in a.chunks_exact(MR * 4).zip(b.chunks_exact(NR * 4)) {
        for r in 0..MR {
            let ar = &ab[r * 4..r * 4 + 4];
            for c in 0..NR {
                let bc = &bb[c * 4..c * 4 + 4];
                let dot: i32 = ar.iter().zip(bc).map(|(&x, &y)| x as i32 * y as i32).sum();
                acc[r * NR + c] += dot;
            }
        }
    }
    tile.copy_from_slice(&acc);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{MR, NR};

    /// # Safety
    /// Pointers as documented on `Entry`; the CPU has AVX2.
    pub(super) unsafe fn avx2(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // SAFETY: forwarded from the caller.
        unsafe { avx2_impl(k4, a, b, tile) }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn avx2_impl(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // Per row, two accumulators: columns 0-3 and 4-7, each column as two partial
        // sums (k0+k1, k2+k3) in neighbouring lanes.
        let mut lo = [_mm256_setzero_si256(); MR];
        let mut hi = [_mm256_setzero_si256(); MR];
        for blk in 0..k4 {
            // SAFETY: blk < k4: the 32 weight bytes and 16 activation bytes are in bounds.
            let (b_lo, b_hi, ab) = unsafe {
                let bp = b.add(blk * NR * 4);
                (
                    _mm256_cvtepi8_epi16(_mm_loadu_si128(bp as *const __m128i)),
                    _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.add(16) as *const __m128i)),
                    a.add(blk * MR * 4),
                )
            };
            for r in 0..MR {
                // SAFETY: row r's 4 bytes of this block are in bounds (r < MR).
                let four = unsafe { (ab.add(r * 4) as *const i32).read_unaligned() };
                let av = _mm256_cvtepi8_epi16(_mm_set1_epi32(four));
                lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(av, b_lo));
                hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(av, b_hi));
            }
        }
        for r in 0..MR {
            // hadd gives [c0 c1 c4 c5 | c2 c3 c6 c7]; the permute restores column order.
            let sums = _mm256_hadd_epi32(lo[r], hi[r]);
            let ordered = _mm256_permute4x64_epi64::<0b11_01_10_00>(sums);
            // SAFETY: the tile holds MR * NR i32.
            unsafe { _mm256_storeu_si256(tile.add(r * NR) as *mut __m256i, ordered) };
        }
    }

    /// # Safety
    /// Pointers as documented on `Entry`; the CPU has AVX-512F and AVX-512 VNNI.
    pub(super) unsafe fn avx512_vnni(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // SAFETY: forwarded from the caller.
        unsafe { avx512_vnni_impl(k4, a, b, tile) }
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn avx512_vnni_impl(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // As avx_vnni below, with rows 2p and 2p+1 in the low and high halves of one
        // register, so each vpdpbusd does two rows of eight columns.
        let flip = _mm512_set1_epi8(-128);
        let mut acc = [_mm512_setzero_si512(); MR / 2];
        let mut bias = _mm512_setzero_si512();
        for blk in 0..k4 {
            // SAFETY: blk < k4: 32 weight bytes and 16 activation bytes are in bounds.
            let (bv, ab) = unsafe {
                let half = _mm256_loadu_si256(b.add(blk * NR * 4) as *const __m256i);
                (_mm512_broadcast_i64x4(half), a.add(blk * MR * 4))
            };
            bias = _mm512_dpbusd_epi32(bias, flip, bv);
            for (p, acc) in acc.iter_mut().enumerate() {
                // SAFETY: rows 2p and 2p+1 of this block are in bounds (2p + 1 < MR).
                let (r0, r1) = unsafe {
                    (
                        (ab.add(p * 8) as *const i32).read_unaligned(),
                        (ab.add(p * 8 + 4) as *const i32).read_unaligned(),
                    )
                };
                let av = _mm512_inserti64x4::<1>(_mm512_set1_epi32(r0), _mm256_set1_epi32(r1));
                *acc = _mm512_dpbusd_epi32(*acc, _mm512_xor_si512(av, flip), bv);
            }
        }
        for (p, acc) in acc.iter().enumerate() {
            let raw = _mm512_sub_epi32(*acc, bias);
            // SAFETY: rows 2p and 2p+1 are 16 consecutive i32 of the MR * NR tile.
            unsafe { _mm512_storeu_si512(tile.add(p * 16) as *mut _, raw) };
        }
    }

    /// # Safety
    /// Pointers as documented on `Entry`; the CPU has AVX2 and AVX-VNNI.
    pub(super) unsafe fn avx_vnni(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // SAFETY: forwarded from the caller.
        unsafe { avx_vnni_impl(k4, a, b, tile) }
    }

    #[target_feature(enable = "avx2,avxvnni")]
    unsafe fn avx_vnni_impl(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // vpdpbusd multiplies unsigned by signed bytes: the activation a is fed as a + 128
        // (xor of the sign bit), which adds 128 * (sum of w) to each column. That sum is
        // accumulated alongside as dpbusd(128s, w) and subtracted at the end, so the
        // kernel's contract stays "raw a . w".
        let flip = _mm256_set1_epi8(-128);
        let mut acc = [_mm256_setzero_si256(); MR];
        let mut bias = _mm256_setzero_si256();
        for blk in 0..k4 {
            // SAFETY: blk < k4: 32 weight bytes and 16 activation bytes are in bounds.
            let (bv, ab) = unsafe {
                (
                    _mm256_loadu_si256(b.add(blk * NR * 4) as *const __m256i),
                    a.add(blk * MR * 4),
                )
            };
            bias = _mm256_dpbusd_avx_epi32(bias, flip, bv);
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row r's 4 bytes of this block are in bounds (r < MR).
                let four = unsafe { (ab.add(r * 4) as *const i32).read_unaligned() };
                let au = _mm256_xor_si256(_mm256_set1_epi32(four), flip);
                *acc = _mm256_dpbusd_avx_epi32(*acc, au, bv);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let raw = _mm256_sub_epi32(*acc, bias);
            // SAFETY: the tile holds MR * NR i32.
            unsafe { _mm256_storeu_si256(tile.add(r * NR) as *mut __m256i, raw) };
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::*;
    use std::arch::asm;

    use super::{MR, NR};

    /// # Safety
    /// Pointers as documented on `Entry`; the CPU has NEON.
    pub(super) unsafe fn neon(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // SAFETY: forwarded from the caller.
        unsafe { neon_impl(k4, a, b, tile) }
    }

    #[target_feature(enable = "neon")]
    unsafe fn neon_impl(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // acc[r][j] holds columns 2j and 2j+1, each as two partial sums.
        let mut acc = [[vdupq_n_s32(0); 4]; MR];
        for blk in 0..k4 {
            // SAFETY: blk < k4: 32 weight bytes and 16 activation bytes are in bounds.
            let (bq, ab) = unsafe {
                let bp = b.add(blk * NR * 4);
                (
                    [
                        vld1_s8(bp),
                        vld1_s8(bp.add(8)),
                        vld1_s8(bp.add(16)),
                        vld1_s8(bp.add(24)),
                    ],
                    a.add(blk * MR * 4),
                )
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row r's 4 bytes of this block are in bounds (r < MR).
                let four = unsafe { (ab.add(r * 4) as *const i32).read_unaligned() };
                // The row's four bytes twice: matches two columns of four bytes.
                let av = vreinterpret_s8_s32(vdup_n_s32(four));
                for j in 0..4 {
                    acc[j] = vpadalq_s16(acc[j], vmull_s8(av, bq[j]));
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let c0 = vpaddq_s32(acc[0], acc[1]);
            let c1 = vpaddq_s32(acc[2], acc[3]);
            // SAFETY: the tile holds MR * NR i32.
            unsafe {
                vst1q_s32(tile.add(r * NR), c0);
                vst1q_s32(tile.add(r * NR + 4), c1);
            }
        }
    }

    /// # Safety
    /// Pointers as documented on `Entry`; the CPU has NEON and dotprod.
    pub(super) unsafe fn dotprod(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // SAFETY: forwarded from the caller.
        unsafe { dotprod_impl(k4, a, b, tile) }
    }

    #[target_feature(enable = "neon,dotprod")]
    unsafe fn dotprod_impl(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        let mut acc = [[vdupq_n_s32(0); 2]; MR];
        for blk in 0..k4 {
            // SAFETY: blk < k4: 32 weight bytes and 16 activation bytes are in bounds.
            let (b0, b1, av) = unsafe {
                let bp = b.add(blk * NR * 4);
                (
                    vld1q_s8(bp),
                    vld1q_s8(bp.add(16)),
                    vld1q_s8(a.add(blk * MR * 4)),
                )
            };
            // sdot by element: lane r of `av` holds row r's four bytes.
            macro_rules! row {
                ($r:literal) => {
                    // SAFETY: register-only instructions; dotprod is enabled on this fn.
                    unsafe {
                        asm!(
                            concat!("sdot {c0:v}.4s, {b0:v}.16b, {a:v}.4b[", $r, "]"),
                            concat!("sdot {c1:v}.4s, {b1:v}.16b, {a:v}.4b[", $r, "]"),
                            c0 = inout(vreg) acc[$r][0],
                            c1 = inout(vreg) acc[$r][1],
                            b0 = in(vreg) b0,
                            b1 = in(vreg) b1,
                            a = in(vreg) av,
                            options(pure, nomem, nostack),
                        );
                    }
                };
            }
            row!(0);
            row!(1);
            row!(2);
            row!(3);
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: the tile holds MR * NR i32.
            unsafe {
                vst1q_s32(tile.add(r * NR), acc[0]);
                vst1q_s32(tile.add(r * NR + 4), acc[1]);
            }
        }
    }

    /// # Safety
    /// Pointers as documented on `Entry`; the CPU has NEON and i8mm.
    pub(super) unsafe fn i8mm(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // SAFETY: forwarded from the caller.
        unsafe { i8mm_impl(k4, a, b, tile) }
    }

    /// `smmla vd.4s, vn.16b, vm.16b` multiplies a 2x8 by an 8x2 byte matrix (both given
    /// row-major as two rows of eight) into a 2x2 i32 block. Two consecutive k4 blocks
    /// give eight `k`; rows (r, r+1) and columns (c, c+1) are gathered by zipping the
    /// 32-bit groups of the panels.
    #[target_feature(enable = "neon,i8mm")]
    unsafe fn i8mm_impl(k4: usize, a: *const i8, b: *const i8, tile: *mut i32) {
        // acc[rp][cp]: rows 2rp, 2rp+1 x columns 2cp, 2cp+1 as [r0c0, r0c1, r1c0, r1c1].
        let mut acc = [[vdupq_n_s32(0); NR / 2]; MR / 2];
        let zero = vdupq_n_s8(0);
        let mut blk = 0;
        while blk < k4 {
            // SAFETY: blk < k4; the second block is read only when it exists (else zeros).
            let (a0, a1, b0, b1) = unsafe {
                let next = blk + 1 < k4;
                let ld = |p: *const i8, ok: bool| if ok { vld1q_s8(p) } else { zero };
                let ap = a.add(blk * MR * 4);
                let bp = b.add(blk * NR * 4);
                (
                    ld(ap, true),
                    ld(ap.add(MR * 4), next),
                    [ld(bp, true), ld(bp.add(16), true)],
                    [ld(bp.add(NR * 4), next), ld(bp.add(NR * 4 + 16), next)],
                )
            };
            // a0 = [r0 k0-3, r1 k0-3, r2 k0-3, r3 k0-3], a1 the same for k4-7. zip1 of
            // the 32-bit lanes gives [r0 k0-3, r0 k4-7, r1 k0-3, r1 k4-7]: rows 0-1 as
            // two rows of eight; zip2 gives rows 2-3.
            let (a32, a32n) = (vreinterpretq_s32_s8(a0), vreinterpretq_s32_s8(a1));
            let arows = [
                vreinterpretq_s8_s32(vzip1q_s32(a32, a32n)),
                vreinterpretq_s8_s32(vzip2q_s32(a32, a32n)),
            ];
            let mut bcols = [zero; NR / 2];
            for h in 0..2 {
                let (x, y) = (vreinterpretq_s32_s8(b0[h]), vreinterpretq_s32_s8(b1[h]));
                bcols[2 * h] = vreinterpretq_s8_s32(vzip1q_s32(x, y));
                bcols[2 * h + 1] = vreinterpretq_s8_s32(vzip2q_s32(x, y));
            }
            for (rp, arow) in arows.iter().enumerate() {
                for (cp, bcol) in bcols.iter().enumerate() {
                    // SAFETY: register-only instruction; i8mm is enabled on this fn.
                    unsafe {
                        asm!(
                            "smmla {c:v}.4s, {a:v}.16b, {b:v}.16b",
                            c = inout(vreg) acc[rp][cp],
                            a = in(vreg) *arow,
                            b = in(vreg) *bcol,
                            options(pure, nomem, nostack),
                        );
                    }
                }
            }
            blk += 2;
        }
        for (rp, row) in acc.iter().enumerate() {
            for (cp, v) in row.iter().enumerate() {
                let mut out = [0i32; 4];
                // SAFETY: `out` holds four i32.
                unsafe { vst1q_s32(out.as_mut_ptr(), *v) };
                for (i, &x) in out.iter().enumerate() {
                    let (r, c) = (2 * rp + i / 2, 2 * cp + i % 2);
                    // SAFETY: r < MR and c < NR, inside the tile.
                    unsafe { *tile.add(r * NR + c) = x };
                }
            }
        }
    }
}
