//! The aarch64 int8 kernels: `sdot` (the `dotprod` extension, Cortex-A55/A76 and later,
//! Neoverse) and plain NEON `smull` + `sadalp` for the cores without it (Cortex-A53/A72).
//!
//! **Signed activations.** Both instructions multiply signed bytes by signed bytes (the
//! `u8 x i8` forms, `usdot`, need `i8mm`). The activation bytes are flipped to `a - 128`
//! as they are loaded (one `eor` per 16 bytes), so the tile sums `sum (a - 128) * w`, and
//! the epilogue adds back `128 * colsum(w)`: integer arithmetic modulo 2^32, so the result
//! is the portable kernel's raw sum exactly, and the same requantization follows.
//!
//! **The shared packing fits both.** A weight block is `[NR][4]` bytes, four 16-byte
//! registers of four columns x four channels:
//! - `sdot vd.4s, vw.16b, va.4b[l]` adds to each column lane the dot product of its four
//!   weight bytes and the four activation bytes of lane `l`; one 16-byte activation load
//!   serves four blocks (lanes 0-3). A 4x16 tile holds 16 accumulators, plus 4 weight and 4
//!   activation registers, in the 32 vector registers.
//! - `smull` multiplies 8 bytes (two columns x four channels) into exact i16 products, and
//!   `sadalp` adds neighbouring i16 pairs into i32 lanes, two partial sums per column
//!   folded by one `addp` at the end. That is 8 accumulators per row, hence 2x16 tiles.
//!   Each product pair goes straight to i32: adding two products in i16 first (`smlal`)
//!   would halve the `sadalp`s but overflows when both are `(-128) * (-128)`, and the
//!   weights of real models do reach -128.
//!
//! **Requantization in registers**, on the last call of a tile: the same f32 operations as
//! the scalar `requant` (and `Stage2::apply`), in the same order and without fused
//! multiply-adds, so the bytes equal the portable kernel's. NEON has no masked store: a
//! partial row goes through a 16-byte stack buffer.
//!
//! Rust's `sdot` intrinsics are unstable (`stdarch_neon_dotprod`), so `sdot` is written
//! with `asm!` in a function compiled with `dotprod`.

use std::arch::aarch64::*;
use std::arch::asm;
use std::ops::Range;

use super::{drive, Fin, OutPtr, QGemm, MR_MAX, NR, TAPS_PER_CALL};

type Ptrs = [*const u8; TAPS_PER_CALL * MR_MAX];
type Acc = [i32; MR_MAX * NR];

/// Rows of the `sdot` tile.
pub(super) const DOT_MR: usize = 4;
/// Rows of the `smull` tile.
pub(super) const SMULL_MR: usize = 2;

/// # Safety
/// As `QKernel::tiles`; the CPU has NEON and `dotprod`.
pub(super) unsafe fn dot_tiles(
    g: &QGemm<'_>,
    rows: Range<usize>,
    panels: Range<usize>,
    out: OutPtr,
) {
    // SAFETY: forwarded.
    unsafe { dot_drive(g, rows, panels, out) }
}

#[target_feature(enable = "neon,dotprod")]
unsafe fn dot_drive(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr) {
    // SAFETY: forwarded; the tile reads what the driver hands it (bounds check).
    unsafe {
        drive::<DOT_MR, true>(g, rows, panels, out, |p, taps, c4, w, acc, init, fin| {
            dot_tile(p, taps, c4, w, acc, init, fin.map(|f| (f, g, out)))
        })
    }
}

/// # Safety
/// As `QKernel::tiles`; the CPU has NEON.
pub(super) unsafe fn smull_tiles(
    g: &QGemm<'_>,
    rows: Range<usize>,
    panels: Range<usize>,
    out: OutPtr,
) {
    // SAFETY: forwarded.
    unsafe { smull_drive(g, rows, panels, out) }
}

#[target_feature(enable = "neon")]
unsafe fn smull_drive(g: &QGemm<'_>, rows: Range<usize>, panels: Range<usize>, out: OutPtr) {
    // SAFETY: forwarded; the tile reads what the driver hands it (bounds check).
    unsafe {
        drive::<SMULL_MR, true>(g, rows, panels, out, |p, taps, c4, w, acc, init, fin| {
            smull_tile(p, taps, c4, w, acc, init, fin.map(|f| (f, g, out)))
        })
    }
}

/// 16 activation bytes at `p`, flipped to signed `a - 128`.
///
/// # Safety
/// `p` is readable for 16 bytes.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn load16(p: *const u8) -> int8x16_t {
    // SAFETY: by the contract.
    vreinterpretq_s8_u8(veorq_u8(unsafe { vld1q_u8(p) }, vdupq_n_u8(0x80)))
}

/// The 4 activation bytes at `p`, flipped to signed, in every 32-bit lane.
///
/// # Safety
/// `p` is readable for 4 bytes.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn load4(p: *const u8) -> int8x16_t {
    // SAFETY: by the contract; `read_unaligned` since rows start at any byte.
    let x = unsafe { (p as *const u32).read_unaligned() };
    vreinterpretq_s8_u8(veorq_u8(
        vreinterpretq_u8_u32(vdupq_n_u32(x)),
        vdupq_n_u8(0x80),
    ))
}

/// One weight block at `wb` against lane `L` of each row's activations: 16 `sdot`s.
///
/// # Safety
/// `wb` is readable for `NR * 4` bytes.
#[target_feature(enable = "neon,dotprod")]
#[inline]
unsafe fn dot_block<const L: i32>(
    v: &mut [[int32x4_t; 4]; DOT_MR],
    wb: *const i8,
    a: &[int8x16_t; DOT_MR],
) {
    // SAFETY: by the contract.
    let w = unsafe {
        [
            vld1q_s8(wb),
            vld1q_s8(wb.add(16)),
            vld1q_s8(wb.add(32)),
            vld1q_s8(wb.add(48)),
        ]
    };
    for (vr, &ar) in v.iter_mut().zip(a) {
        for (acc, &wq) in vr.iter_mut().zip(&w) {
            // SAFETY: registers only; `dotprod` is enabled on this function.
            unsafe {
                asm!(
                    "sdot {acc:v}.4s, {w:v}.16b, {a:v}.4b[{l}]",
                    acc = inout(vreg) *acc,
                    w = in(vreg) wq,
                    a = in(vreg) ar,
                    l = const L,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
        }
    }
}

/// The `sdot` tile: 4 rows x 16 columns, `v[r][q]` holding columns `4q..4q + 4` of row `r`.
///
/// # Safety
/// The driver's contract: each of the `taps * DOT_MR` pointers reads `4 * c4` bytes, the
/// panel `taps * c4` blocks; `fin`'s tile is inside the checked output.
#[target_feature(enable = "neon,dotprod")]
unsafe fn dot_tile(
    ptrs: &Ptrs,
    taps: usize,
    c4: usize,
    w: *const i8,
    acc: &mut Acc,
    init: bool,
    fin: Option<(Fin, &QGemm<'_>, OutPtr)>,
) -> bool {
    let mut v = [[vdupq_n_s32(0); 4]; DOT_MR];
    if !init {
        for (r, vr) in v.iter_mut().enumerate() {
            for (q, x) in vr.iter_mut().enumerate() {
                // SAFETY: inside `acc`.
                *x = unsafe { vld1q_s32(acc.as_ptr().add(r * NR + 4 * q)) };
            }
        }
    }
    let mut wb = w;
    // SAFETY (loads): the pointers reach `4 * c4` bytes and the panel `taps * c4` blocks
    // of `NR * 4` bytes; a 16-byte load is made only where four whole blocks remain.
    for t in 0..taps {
        let p: [*const u8; DOT_MR] = std::array::from_fn(|r| ptrs[t * DOT_MR + r]);
        let mut b = 0;
        while b + 4 <= c4 {
            // SAFETY: see above.
            unsafe {
                let a = p.map(|p| load16(p.add(4 * b)));
                dot_block::<0>(&mut v, wb, &a);
                dot_block::<1>(&mut v, wb.add(NR * 4), &a);
                dot_block::<2>(&mut v, wb.add(2 * NR * 4), &a);
                dot_block::<3>(&mut v, wb.add(3 * NR * 4), &a);
                wb = wb.add(4 * NR * 4);
            }
            b += 4;
        }
        while b < c4 {
            // SAFETY: see above.
            unsafe {
                let a = p.map(|p| load4(p.add(4 * b)));
                dot_block::<0>(&mut v, wb, &a);
                wb = wb.add(NR * 4);
            }
            b += 1;
        }
    }
    // SAFETY: forwarded.
    unsafe { finish_or_keep(v, acc, fin) }
}

/// The `smull` tile: 2 rows x 16 columns, `v[r][2q]` holding columns `4q, 4q + 1` and
/// `v[r][2q + 1]` columns `4q + 2, 4q + 3`, each column as two partial sums.
///
/// # Safety
/// As [`dot_tile`].
#[target_feature(enable = "neon")]
unsafe fn smull_tile(
    ptrs: &Ptrs,
    taps: usize,
    c4: usize,
    w: *const i8,
    acc: &mut Acc,
    init: bool,
    fin: Option<(Fin, &QGemm<'_>, OutPtr)>,
) -> bool {
    let zero = vdupq_n_s32(0);
    let mut v = [[zero; 8]; SMULL_MR];
    if !init {
        // A column's running sum goes in its first partial lane.
        for (r, vr) in v.iter_mut().enumerate() {
            for q in 0..4 {
                // SAFETY: inside `acc`.
                let s = unsafe { vld1q_s32(acc.as_ptr().add(r * NR + 4 * q)) };
                vr[2 * q] = vzip1q_s32(s, zero);
                vr[2 * q + 1] = vzip2q_s32(s, zero);
            }
        }
    }
    let mut wb = w;
    for t in 0..taps {
        let p: [*const u8; SMULL_MR] = std::array::from_fn(|r| ptrs[t * SMULL_MR + r]);
        for b in 0..c4 {
            // SAFETY: the pointers reach `4 * c4` bytes, the panel `taps * c4` blocks.
            let (wq, a) = unsafe {
                let wq = [
                    vld1q_s8(wb),
                    vld1q_s8(wb.add(16)),
                    vld1q_s8(wb.add(32)),
                    vld1q_s8(wb.add(48)),
                ];
                wb = wb.add(NR * 4);
                (wq, p.map(|p| load4(p.add(4 * b))))
            };
            for (vr, &ar) in v.iter_mut().zip(&a) {
                for (q, &wv) in wq.iter().enumerate() {
                    let lo = vmull_s8(vget_low_s8(wv), vget_low_s8(ar));
                    let hi = vmull_high_s8(wv, ar);
                    vr[2 * q] = vpadalq_s16(vr[2 * q], lo);
                    vr[2 * q + 1] = vpadalq_s16(vr[2 * q + 1], hi);
                }
            }
        }
    }
    let sums: [[int32x4_t; 4]; SMULL_MR] =
        v.map(|vr| std::array::from_fn(|q| vpaddq_s32(vr[2 * q], vr[2 * q + 1])));
    // SAFETY: forwarded.
    unsafe { finish_or_keep(sums, acc, fin) }
}

/// Requantizes and stores the finished tile `v` when this is the tile's last call (and
/// returns `true`), else keeps the sums in `acc` for the next call.
///
/// Out of line, taking the tile by value: its rows are indexed by a run-time count here,
/// and inlined that made the compiler keep the tile's accumulators in memory too, storing
/// each one after every `sdot` of the loop.
///
/// # Safety
/// `fin`'s rows and columns are inside the checked output.
#[target_feature(enable = "neon")]
#[inline(never)]
unsafe fn finish_or_keep<const MR: usize>(
    v: [[int32x4_t; 4]; MR],
    acc: &mut Acc,
    fin: Option<(Fin, &QGemm<'_>, OutPtr)>,
) -> bool {
    let Some((f, g, out)) = fin else {
        for (r, vr) in v.iter().enumerate() {
            for (q, &x) in vr.iter().enumerate() {
                // SAFETY: inside `acc`.
                unsafe { vst1q_s32(acc.as_mut_ptr().add(r * NR + 4 * q), x) };
            }
        }
        return false;
    };
    let q = g.out;
    let sums = g.w.col_sums();
    // The per-column parameters in full-width arrays (zero past `cols`): the offset plus
    // the `128 * colsum` the signed activations took out.
    let (mut off, mut sc, mut bias) = ([0i32; NR], [0f32; NR], [0f32; NR]);
    for c in 0..f.cols {
        off[c] = q.offset[f.j0 + c].wrapping_add(sums[f.j0 + c].wrapping_mul(128));
        sc[c] = q.scale[f.j0 + c];
    }
    if let Some(s) = &q.stage2 {
        for (c, b) in bias.iter_mut().take(f.cols).enumerate() {
            *b = s.bias[f.j0 + c];
        }
    }
    // SAFETY: four lanes at `4 * k` of 16-element arrays.
    let off: [int32x4_t; 4] =
        std::array::from_fn(|k| unsafe { vld1q_s32(off.as_ptr().add(4 * k)) });
    // SAFETY: as above.
    let sc: [float32x4_t; 4] =
        std::array::from_fn(|k| unsafe { vld1q_f32(sc.as_ptr().add(4 * k)) });
    // SAFETY: as above.
    let bias: [float32x4_t; 4] =
        std::array::from_fn(|k| unsafe { vld1q_f32(bias.as_ptr().add(4 * k)) });
    let rq = Requant::new(q);
    for (r, vr) in v.iter().enumerate().take(f.rows) {
        let y: [float32x4_t; 4] = std::array::from_fn(|k| {
            let y = rq.first(vaddq_s32(vr[k], off[k]), sc[k]);
            match &rq.stage2 {
                None => y,
                Some(s) => s.apply(y, bias[k]),
            }
        });
        let bytes = to_bytes(y);
        // SAFETY: row `r0 + r`, columns `j0..j0 + cols` are inside the checked output.
        unsafe {
            let dst = out.0.add((f.r0 + r) * g.ldo + f.j0);
            if f.cols == NR {
                vst1q_u8(dst, bytes);
            } else {
                let mut buf = [0u8; NR];
                vst1q_u8(buf.as_mut_ptr(), bytes);
                for (c, &b) in buf.iter().enumerate().take(f.cols) {
                    *dst.add(c) = b;
                }
            }
        }
    }
    true
}

/// `QOut`'s scalars in registers.
struct Requant {
    zp: float32x4_t,
    lo: float32x4_t,
    hi: float32x4_t,
    stage2: Option<Stage2Regs>,
}

/// `Stage2`'s scalars in registers.
struct Stage2Regs {
    s1: float32x4_t,
    z1: float32x4_t,
    s2: float32x4_t,
    z2: float32x4_t,
    lo: float32x4_t,
    hi: float32x4_t,
}

/// The bound `requant` clamps to before rounding (`2^22`).
const BOUND: f32 = 4_194_304.0;
/// `1.5 * 2^23`: adding and subtracting it rounds half to even.
const MAGIC: f32 = 12_582_912.0;

impl Requant {
    #[target_feature(enable = "neon")]
    #[inline]
    fn new(q: &crate::qgemm::QOut) -> Requant {
        Requant {
            zp: vdupq_n_f32(q.zp as f32),
            lo: vdupq_n_f32(q.lo as f32),
            hi: vdupq_n_f32(q.hi as f32),
            stage2: q.stage2.as_ref().map(|s| Stage2Regs {
                s1: vdupq_n_f32(s.s1),
                z1: vdupq_n_f32(s.z1 as f32),
                s2: vdupq_n_f32(s.s2),
                z2: vdupq_n_f32(s.z2 as f32),
                lo: vdupq_n_f32(s.lo as f32),
                hi: vdupq_n_f32(s.hi as f32),
            }),
        }
    }

    /// `requant(acc, scale, zp, lo, hi)` on four lanes. `fmax`/`fmin` equal the scalar
    /// compare-and-select `clamp` here: nothing is NaN (`scale` is finite).
    #[target_feature(enable = "neon")]
    #[inline]
    fn first(&self, acc: int32x4_t, scale: float32x4_t) -> float32x4_t {
        let v = vmulq_f32(vcvtq_f32_s32(acc), scale);
        let v = vminq_f32(vmaxq_f32(v, vdupq_n_f32(-BOUND)), vdupq_n_f32(BOUND));
        let y = vaddq_f32(round_even(v), self.zp);
        vminq_f32(vmaxq_f32(y, self.lo), self.hi)
    }
}

impl Stage2Regs {
    /// `Stage2::apply` on four lanes, before the conversion to bytes.
    #[target_feature(enable = "neon")]
    #[inline]
    fn apply(&self, y1: float32x4_t, bias: float32x4_t) -> float32x4_t {
        let f = vaddq_f32(vmulq_f32(vsubq_f32(y1, self.z1), self.s1), bias);
        let x = vdivq_f32(f, self.s2);
        let x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-BOUND)), vdupq_n_f32(BOUND));
        let y = vaddq_f32(round_even(x), self.z2);
        vminq_f32(vmaxq_f32(y, self.lo), self.hi)
    }
}

/// `round_even_small` on four lanes.
#[target_feature(enable = "neon")]
#[inline]
fn round_even(x: float32x4_t) -> float32x4_t {
    let m = vdupq_n_f32(MAGIC);
    vsubq_f32(vaddq_f32(x, m), m)
}

/// `to_byte` on sixteen lanes: the low byte of `y + 2^23`.
#[target_feature(enable = "neon")]
#[inline]
fn to_bytes(y: [float32x4_t; 4]) -> uint8x16_t {
    let b = y.map(|y| {
        vmovn_u32(vreinterpretq_u32_f32(vaddq_f32(
            y,
            vdupq_n_f32(8_388_608.0),
        )))
    });
    let lo = vmovn_u16(vcombine_u16(b[0], b[1]));
    let hi = vmovn_u16(vcombine_u16(b[2], b[3]));
    vcombine_u8(lo, hi)
}

#[cfg(test)]
mod tests {
    use std::arch::aarch64::*;

    use baton_delegate_api::testing::Rng;

    use super::{to_bytes, Requant, NR};
    use crate::qgemm::{QOut, Stage2};

    /// The GEMM tests see a few thousand stored values, too few to meet the rare inputs
    /// where a reordered or fused float operation changes the rounding. This runs the
    /// register epilogue on a million random lanes against `QOut::finish`.
    #[test]
    fn the_register_epilogue_stores_the_scalar_epilogues_bytes() {
        // SAFETY: every aarch64 CPU has NEON.
        unsafe { epilogue_against_scalar() }
    }

    /// Second stages where a fused multiply-add would round differently from the graph's
    /// separate multiply and add (found by a random search; about 2 inputs in a million
    /// are such): the register epilogue must not fuse them.
    #[test]
    fn the_second_stage_multiplies_and_adds_apart_as_the_graph_does() {
        // SAFETY: every aarch64 CPU has NEON.
        unsafe { second_stage_unfused() }
    }

    /// The register epilogue of `q` on one row of raw sums (the kernels' path from
    /// `finish_or_keep`, less the `128 * colsum` which is integer and exact).
    #[target_feature(enable = "neon")]
    fn epilogue(q: &QOut, acc: &[i32; NR]) -> [u8; NR] {
        let rq = Requant::new(q);
        let zero = [0f32; NR];
        let bias = q.stage2.as_ref().map_or(&zero[..], |s| &s.bias[..]);
        let y: [float32x4_t; 4] = std::array::from_fn(|k| {
            let a = vaddq_s32(i32x4(&acc[4 * k..]), i32x4(&q.offset[4 * k..]));
            let y = rq.first(a, f32x4(&q.scale[4 * k..]));
            match &rq.stage2 {
                None => y,
                Some(s) => s.apply(y, f32x4(&bias[4 * k..])),
            }
        });
        let mut got = [0u8; NR];
        // SAFETY: 16 writable bytes.
        unsafe { vst1q_u8(got.as_mut_ptr(), to_bytes(y)) };
        got
    }

    #[target_feature(enable = "neon")]
    fn i32x4(x: &[i32]) -> int32x4_t {
        let x: &[i32; 4] = x[..4].try_into().expect("four lanes");
        // SAFETY: four readable lanes.
        unsafe { vld1q_s32(x.as_ptr()) }
    }

    #[target_feature(enable = "neon")]
    fn f32x4(x: &[f32]) -> float32x4_t {
        let x: &[f32; 4] = x[..4].try_into().expect("four lanes");
        // SAFETY: four readable lanes.
        unsafe { vld1q_f32(x.as_ptr()) }
    }

    #[target_feature(enable = "neon")]
    fn epilogue_against_scalar() {
        let mut rng = Rng::new(0x0e91_1095);
        for round in 0..4000 {
            let scale = |rng: &mut Rng| match rng.below(8) {
                0 => f32::MAX,
                1 => rng.f32_in(1.0, 1e6),
                _ => rng.f32_in(1e-6, 0.05),
            };
            let zp = rng.int(0, 255) as i32;
            let lo = rng.int(0, 100) as i32;
            let q = QOut {
                offset: (0..NR).map(|_| rng.int(-1 << 20, 1 << 20) as i32).collect(),
                scale: (0..NR).map(|_| scale(&mut rng)).collect(),
                zp,
                lo,
                hi: rng.int(lo as i64, 255) as i32,
                // Scales that keep most second-stage results inside the byte range,
                // where the rounding is seen.
                stage2: (round % 2 == 1).then(|| Stage2 {
                    s1: rng.f32_in(1e-3, 0.1),
                    z1: zp,
                    bias: rng.vec_in(NR, -2.0, 2.0),
                    s2: rng.f32_in(0.02, 0.3),
                    z2: rng.int(0, 255) as i32,
                    lo: rng.int(0, 20) as i32,
                    hi: rng.int(200, 255) as i32,
                }),
            };
            for _ in 0..16 {
                // Mostly sums whose first stage lands near the byte range (else nearly
                // all saturate), some anywhere.
                let acc: [i32; NR] = std::array::from_fn(|j| match rng.below(4) {
                    0 => rng.next_u64() as i32,
                    _ => {
                        let target = rng.uniform(-300.0, 300.0) / q.scale[j] as f64;
                        (target as i32).wrapping_sub(q.offset[j])
                    }
                });
                let want: [u8; NR] = std::array::from_fn(|j| q.finish(acc[j], j));
                assert_eq!(
                    epilogue(&q, &acc),
                    want,
                    "round {round}, accumulators {acc:?}, {q:?}"
                );
            }
        }
    }

    #[target_feature(enable = "neon")]
    fn second_stage_unfused() {
        // (y1, z1, and the bits of s1, bias, s2).
        const CASES: [(i32, i32, u32, u32, u32); 8] = [
            (25, 58, 0x3d93df8b, 0xbe172a75, 0x3d20afce),
            (137, 63, 0x3d24fc28, 0xbf905bff, 0x3e0c8b54),
            (228, 6, 0x3ca4e38d, 0xbf35a697, 0x3e5bf24c),
            (83, 216, 0x3d9de1c6, 0xbeae35b8, 0x3e73c3fc),
            (26, 111, 0x3c1b2329, 0x3e80b913, 0x3e62b040),
            (86, 12, 0x3dc2b884, 0x3fb1cea1, 0x3e10fe64),
            (83, 127, 0x3dcb29e2, 0x3fca955f, 0x3cc3a280),
            (134, 42, 0x3d750bc1, 0xbe150d8b, 0x3e23ca89),
        ];
        for (y1, z1, s1, bias, s2) in CASES {
            let (s1, bias, s2) = (f32::from_bits(s1), f32::from_bits(bias), f32::from_bits(s2));
            let d = (y1 - z1) as f32;
            let fused = (d.mul_add(s1, bias) / s2).round_ties_even();
            let apart = ((d * s1 + bias) / s2).round_ties_even();
            assert_ne!(
                fused, apart,
                "not a case that tells them apart: y1 {y1}, z1 {z1}"
            );
            // A first stage that passes `y1` through (scale 1, zero point 0).
            let q = QOut {
                offset: vec![0; NR],
                scale: vec![1.0; NR],
                zp: 0,
                lo: 0,
                hi: 255,
                stage2: Some(Stage2 {
                    s1,
                    z1,
                    bias: vec![bias; NR],
                    s2,
                    z2: 128,
                    lo: 0,
                    hi: 255,
                }),
            };
            let acc = [y1; NR];
            let want = q.finish(y1, 0);
            assert_eq!(want as f32, apart + 128.0, "the scalar second stage");
            assert_eq!(epilogue(&q, &acc), [want; NR], "y1 {y1}, z1 {z1}");
        }
    }
}
