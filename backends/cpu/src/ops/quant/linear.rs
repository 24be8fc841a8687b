//! The integer op of a QDQ group: Conv, MatMul or Gemm on stored bytes, requantized in
//! the GEMM's epilogue straight to bytes.
//!
//! Convolutions compute channels-last, like the f32 ones: output pixels are the GEMM's
//! rows, channels its columns, so the activations are read in place.
//! - a 1x1 convolution with stride 1 and no padding is a plain GEMM over the pixels;
//! - any other convolution is an IGEMM: the indirection table (input pixel per output
//!   pixel and tap, or the zero-point row for padding) is built at init;
//! - a depthwise convolution (one input and one output channel per group) runs directly,
//!   vectorized over the channels of each pixel.
//!
//! An input held NCHW (a partition's int8 edge) is converted into scratch first; an
//! output that must be NCHW is written to scratch and transposed.

use super::{stored_bias, Nhwc};
use crate::ops::conv::Geom;
use crate::ops::{vec_bytes, RunCtx, Sources, Src};
use crate::pool::Pool;
use crate::qgemm::{
    requant, to_byte, ARows, Indirection, PackedWeights, QGemm, QKernel, QKernelId, QOut, PAD,
    SLACK,
};

/// How the op reads its input and computes.
#[derive(Debug)]
pub(crate) enum QPath {
    /// `rows x K` activation rows (MatMul/Gemm, or a pointwise convolution's pixels).
    Gemm { rows: usize },
    /// An indirect convolution: `table[pixel * taps + tap]` is the byte offset of the
    /// NHWC input pixel (or `PAD`); `zero` is `cg` zero-point bytes and slack.
    Igemm { table: Indirection, zero: Vec<u8> },
    /// A depthwise convolution: `taps[tap * c + ch]`.
    Depthwise { taps: Vec<i16> },
}

/// The integer op of a QDQ group.
#[derive(Debug)]
pub(crate) struct QLinearOp {
    pub x: Src,
    /// Bytes of the input tensor.
    pub x_len: usize,
    /// The convolution geometry (`None`: MatMul/Gemm).
    pub geom: Option<Geom>,
    /// The input is held NCHW and is converted first.
    pub in_nchw: bool,
    /// The output must be NCHW: it is computed into scratch and transposed.
    pub out_nchw: bool,
    pub path: QPath,
    /// One packing and one requantization per group (depthwise: one requantization, no
    /// packing).
    pub weights: Vec<PackedWeights>,
    pub outs: Vec<QOut>,
    /// The input's stored zero point (depthwise subtracts it per tap).
    pub za: i32,
    pub kernel: &'static QKernel,
}

impl QLinearOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        let path = match &self.path {
            QPath::Gemm { .. } => 0,
            QPath::Igemm { table, zero } => table.capacity_bytes() + vec_bytes(zero),
            QPath::Depthwise { taps } => vec_bytes(taps),
        };
        path + self.outs.iter().map(QOut::capacity_bytes).sum::<usize>()
    }

    /// Sizes the shared scratch: the converted input and output.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        if self.in_nchw && ctx.qin.len() < self.x_len + SLACK {
            ctx.qin.resize(self.x_len + SLACK, 0);
        }
        if let (true, Some(g)) = (self.out_nchw, &self.geom) {
            let len = g.batch * g.out_plane() * g.m;
            if ctx.qout.len() < len {
                ctx.qout.resize(len, 0);
            }
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8], ctx: &mut RunCtx) {
        let x = &sources.bytes(self.x)[..self.x_len + SLACK];
        let Some(g) = self.geom else {
            let QPath::Gemm { rows } = self.path else {
                unreachable!("a MatMul is a GEMM")
            };
            let w = &self.weights[0];
            let gemm = QGemm {
                m: rows,
                a: ARows::Strided {
                    data: x,
                    stride: w.c(),
                },
                w,
                out: &self.outs[0],
                ldo: w.n(),
                ints: None,
            };
            gemm.run(self.kernel, &ctx.pool, out);
            return;
        };
        let x: &[u8] = if self.in_nchw {
            let shape = Nhwc {
                batch: g.batch,
                c: g.c,
                plane: g.in_plane(),
            };
            to_nhwc(&x[..self.x_len], shape, &mut ctx.qin[..self.x_len]);
            &ctx.qin[..self.x_len + SLACK]
        } else {
            x
        };
        let (dst, pool) = if self.out_nchw {
            (&mut ctx.qout[..], &ctx.pool)
        } else {
            (&mut out[..], &ctx.pool)
        };
        self.conv(&g, x, dst, pool);
        if self.out_nchw {
            let shape = Nhwc {
                batch: g.batch,
                c: g.m,
                plane: g.out_plane(),
            };
            to_nchw(&ctx.qout[..shape.batch * shape.c * shape.plane], shape, out);
        }
    }

    /// The convolution, NHWC bytes to NHWC bytes.
    fn conv(&self, g: &Geom, x: &[u8], out: &mut [u8], pool: &Pool) {
        let pixels = g.batch * g.out_plane();
        match &self.path {
            QPath::Depthwise { taps } => {
                depthwise(self.kernel, g, x, taps, self.za, &self.outs[0], out, pool);
            }
            path => {
                let (cg, mg) = (g.cg(), g.mg());
                for grp in 0..g.group {
                    let data = &x[grp * cg..];
                    let a = match path {
                        QPath::Gemm { .. } => ARows::Strided { data, stride: g.c },
                        QPath::Igemm { table, zero } => ARows::Indirect { data, table, zero },
                        QPath::Depthwise { .. } => unreachable!("handled above"),
                    };
                    let gemm = QGemm {
                        m: pixels,
                        a,
                        w: &self.weights[grp],
                        out: &self.outs[grp],
                        ldo: g.m,
                        ints: None,
                    };
                    gemm.run(self.kernel, pool, &mut out[grp * mg..]);
                }
            }
        }
    }
}

/// Builds the IGEMM indirection of `g` (byte offsets into an NHWC input), or an error when
/// the input is too large for 32-bit offsets.
pub(crate) fn indirection(g: &Geom) -> Result<Indirection, String> {
    // `tap_rows` marks the padding with the f32 tables' sentinel, which is `PAD`.
    const _: () = assert!(PAD == crate::gemm::ZERO_ROW);
    let mut table = Vec::with_capacity(g.batch * g.out_plane() * g.kh * g.kw);
    g.tap_rows(g.c, |row| table.extend_from_slice(row))
        .map_err(|e| format!("int8 indirect convolution: {e}"))?;
    Ok(Indirection::new(table))
}

/// The stored zero point of an input of `dtype` with zero point `zp`, as a row of `c`
/// bytes and slack (the IGEMM's padding: real zero).
pub(crate) fn zero_row(zp: i32, c: usize) -> Vec<u8> {
    vec![zp as u8; c + SLACK]
}

/// The input's stored zero point.
pub(crate) fn stored_zero(zp: i32, dtype: baton_delegate_api::ir::DType) -> i32 {
    zp + stored_bias(dtype)
}

/// NCHW bytes to NHWC.
pub(super) fn to_nhwc(x: &[u8], s: Nhwc, out: &mut [u8]) {
    for b in 0..s.batch {
        let src = &x[b * s.c * s.plane..(b + 1) * s.c * s.plane];
        let dst = &mut out[b * s.c * s.plane..(b + 1) * s.c * s.plane];
        for (ch, plane) in src.chunks_exact(s.plane.max(1)).enumerate() {
            for (p, &v) in plane.iter().enumerate() {
                dst[p * s.c + ch] = v;
            }
        }
    }
}

/// NHWC bytes to NCHW.
fn to_nchw(x: &[u8], s: Nhwc, out: &mut [u8]) {
    for b in 0..s.batch {
        let src = &x[b * s.c * s.plane..(b + 1) * s.c * s.plane];
        let dst = &mut out[b * s.c * s.plane..(b + 1) * s.c * s.plane];
        for (p, pixel) in src.chunks_exact(s.c.max(1)).enumerate() {
            for (ch, &v) in pixel.iter().enumerate() {
                dst[ch * s.plane + p] = v;
            }
        }
    }
}

/// The output pointer of the depthwise rows, shared by tasks writing disjoint rows.
struct RowsOut(*mut u8, usize);
// SAFETY: tasks write disjoint output rows.
unsafe impl Sync for RowsOut {}

impl RowsOut {
    /// `len` bytes from `start`.
    ///
    /// # Safety
    /// In bounds, and no two live ranges overlap.
    #[allow(clippy::mut_from_ref)]
    unsafe fn range(&self, start: usize, len: usize) -> &mut [u8] {
        assert!(start + len <= self.1, "depthwise rows out of bounds");
        // SAFETY: in bounds (checked), unaliased by the contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(start), len) }
    }
}

/// Direct depthwise convolution on NHWC bytes, split by output rows over the pool.
#[allow(clippy::too_many_arguments)]
fn depthwise(
    kernel: &QKernel,
    g: &Geom,
    x: &[u8],
    taps: &[i16],
    za: i32,
    q: &QOut,
    out: &mut [u8],
    pool: &Pool,
) {
    let rows = g.batch * g.oh;
    let row_len = g.ow * g.m;
    assert!(out.len() >= rows * row_len, "depthwise output too short");
    assert!(
        x.len() >= g.batch * g.in_plane() * g.c,
        "depthwise input too short"
    );
    let dst = RowsOut(out.as_mut_ptr(), out.len());
    let work = rows * row_len * g.kh * g.kw;
    let tasks = (crate::gemm::TASKS_PER_THREAD * pool.threads())
        .min(work / (64 * 1024))
        .min(rows);
    let run = |range: std::ops::Range<usize>| {
        // SAFETY: rows in `range` are this task's alone.
        let o = unsafe { dst.range(range.start * row_len, range.len() * row_len) };
        dw_rows(kernel.id(), g, x, taps, za, q, range, o);
    };
    if tasks <= 1 {
        run(0..rows);
        return;
    }
    let per = rows.div_ceil(tasks);
    pool.run(tasks, &|t, _| {
        run((t * per).min(rows)..((t + 1) * per).min(rows))
    });
}

/// Depthwise rows under the kernel's instruction set, so that the channel loops vectorize.
#[allow(clippy::too_many_arguments)]
fn dw_rows(
    id: QKernelId,
    g: &Geom,
    x: &[u8],
    taps: &[i16],
    za: i32,
    q: &QOut,
    rows: std::ops::Range<usize>,
    out: &mut [u8],
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
        #[allow(clippy::too_many_arguments)]
        fn avx512(
            g: &Geom,
            x: &[u8],
            t: &[i16],
            za: i32,
            q: &QOut,
            r: std::ops::Range<usize>,
            o: &mut [u8],
        ) {
            dw_body::<true>(g, x, t, za, q, r, o)
        }
        #[target_feature(enable = "avx2,fma")]
        #[allow(clippy::too_many_arguments)]
        fn avx2(
            g: &Geom,
            x: &[u8],
            t: &[i16],
            za: i32,
            q: &QOut,
            r: std::ops::Range<usize>,
            o: &mut [u8],
        ) {
            dw_body::<false>(g, x, t, za, q, r, o)
        }
        match id {
            // SAFETY: the kernel exists only where its features were detected.
            QKernelId::Avx512Vnni if g.kh * g.kw <= x86dw::MAX_TAPS => {
                // SAFETY: as below.
                return unsafe { x86dw::rows(g, x, taps, za, q, rows, out) };
            }
            QKernelId::Avx512Vnni => return unsafe { avx512(g, x, taps, za, q, rows, out) },
            // SAFETY: as above.
            QKernelId::Avx2 => return unsafe { avx2(g, x, taps, za, q, rows, out) },
            QKernelId::Portable | QKernelId::Neon | QKernelId::NeonDot => {}
        }
    }
    let _ = id;
    dw_body::<false>(g, x, taps, za, q, rows, out)
}

/// The depthwise loop: per output pixel, `acc[ch] = sum over taps inside the input of
/// (x - za) * w` (padding is real zero and adds nothing), then the channel's epilogue.
/// Products and sums are in i32 lanes (one `vpmulld` per 16 channels and tap on AVX-512;
/// i16 products, though exact, vectorized worse). Channels go in blocks of [`LANES`] held in registers over
/// all taps, then one block's epilogue; the channels past the last full block one by one.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dw_body<const AVX512: bool>(
    g: &Geom,
    x: &[u8],
    taps: &[i16],
    za: i32,
    q: &QOut,
    rows: std::ops::Range<usize>,
    out: &mut [u8],
) {
    let c = g.c;
    let (zp, lo, hi) = (q.zp as f32, q.lo as f32, q.hi as f32);
    let start = rows.start;
    let full = c / LANES * LANES;
    for row in rows {
        let (b, oy) = (row / g.oh, row % g.oh);
        for ox in 0..g.ow {
            let at = Pixel { b, oy, ox };
            let o = ((row - start) * g.ow + ox) * c;
            let dst = &mut out[o..o + c];
            #[cfg(target_arch = "x86_64")]
            if AVX512 {
                for c0 in (0..c).step_by(LANES) {
                    let d = &mut dst[c0..(c0 + LANES).min(c)];
                    // SAFETY: `AVX512` is set only by the wrapper compiled for AVX-512,
                    // called only where the CPU has it.
                    unsafe { x86dw::block(g, x, taps, za, q, at, c0, d) };
                }
                continue;
            }
            for c0 in (0..full).step_by(LANES) {
                let d: &mut [u8; LANES] = (&mut dst[c0..c0 + LANES]).try_into().expect("lanes");
                let mut acc = [0i32; LANES];
                at.each_tap(g, |px, t| {
                    let xs: &[u8; LANES] = x[px * c + c0..][..LANES].try_into().expect("lanes");
                    let ws: &[i16; LANES] = taps[t * c + c0..][..LANES].try_into().expect("lanes");
                    for l in 0..LANES {
                        acc[l] += (xs[l] as i32 - za) * ws[l] as i32;
                    }
                });
                for l in 0..LANES {
                    let a = acc[l].wrapping_add(q.offset[c0 + l]);
                    d[l] = to_byte(requant(a, q.scale[c0 + l], zp, lo, hi));
                }
            }
            for ch in full..c {
                let mut acc = 0i32;
                at.each_tap(g, |px, t| {
                    acc += (x[px * c + ch] as i32 - za) * taps[t * c + ch] as i32;
                });
                let y = requant(acc.wrapping_add(q.offset[ch]), q.scale[ch], zp, lo, hi);
                dst[ch] = to_byte(y);
            }
        }
    }
}

/// One output pixel of a depthwise convolution.
#[derive(Clone, Copy)]
struct Pixel {
    b: usize,
    oy: usize,
    ox: usize,
}

impl Pixel {
    /// Calls `f(input pixel, tap)` for every tap of the window inside the input (the
    /// padding is real zero and adds nothing).
    #[inline(always)]
    fn each_tap(self, g: &Geom, mut f: impl FnMut(usize, usize)) {
        for ki in 0..g.kh {
            let Some(iy) = (self.oy * g.sh + ki * g.dh).checked_sub(g.ph) else {
                continue;
            };
            if iy >= g.h {
                continue;
            }
            for kj in 0..g.kw {
                let Some(ix) = (self.ox * g.sw + kj * g.dw).checked_sub(g.pw) else {
                    continue;
                };
                if ix < g.w {
                    f((self.b * g.h + iy) * g.w + ix, ki * g.kw + kj);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86dw {
    use std::arch::x86_64::*;

    use super::{Geom, Pixel, LANES};
    use crate::qgemm::kernels::x86::requant16;
    use crate::qgemm::QOut;

    /// The most taps whose widened weights [`rows`] keeps for a whole output row.
    pub(super) const MAX_TAPS: usize = 25;

    /// Output rows `rows`, each as blocks of 16 channels: a block's taps are widened once
    /// and kept for the whole output row, then every pixel of the row sums its taps
    /// inside the input. The requantization is `block`'s.
    ///
    /// Pixels whose window is inside the input sum `x * w` in f32 with one FMA per tap and
    /// subtract `za * sum(w)` once: every product (at most 255 * 128) and every partial
    /// sum (at most [`MAX_TAPS`] of them, under 2^20) is an integer f32 holds exactly, so
    /// the result is the integer sum, bit for bit, at about half the instructions of
    /// widening, subtracting, `vpmulld` and adding per tap. Edge pixels read the zero
    /// point for the taps in the padding, so the same subtraction cancels them.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rows(
        g: &Geom,
        x: &[u8],
        taps: &[i16],
        za: i32,
        q: &QOut,
        rows: std::ops::Range<usize>,
        out: &mut [u8],
    ) {
        let (c, nt) = (g.c, g.kh * g.kw);
        assert!(nt <= MAX_TAPS, "too many depthwise taps for the row kernel");
        let zav = _mm512_set1_epi32(za);
        let zaf = _mm512_set1_ps(za as f32);
        let start = rows.start;
        let mut wf = [_mm512_setzero_ps(); MAX_TAPS];
        // Each tap's byte offset from the window's top-left pixel, for the pixels whose
        // whole window is inside the input (no per-tap bounds).
        let mut toff = [0usize; MAX_TAPS];
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                toff[ki * g.kw + kj] = (ki * g.dh * g.w + kj * g.dw) * c;
            }
        }
        let inside = |o: usize, s: usize, p: usize, k: usize, d: usize, n: usize| {
            o * s >= p && o * s - p + (k - 1) * d < n
        };
        for row in rows {
            let (b, oy) = (row / g.oh, row % g.oh);
            let row_in = inside(oy, g.sh, g.ph, g.kh, g.dh, g.h);
            for c0 in (0..c).step_by(LANES) {
                let lanes = LANES.min(c - c0);
                let k: u16 = if lanes == LANES { !0 } else { (1 << lanes) - 1 };
                let mut wsum = _mm512_setzero_si512();
                for t in 0..nt {
                    let ws = &taps[t * c + c0..][..lanes];
                    // SAFETY: masked to the `lanes` elements of the checked slice.
                    let wv =
                        _mm512_cvtepi16_epi32(unsafe { _mm256_maskz_loadu_epi16(k, ws.as_ptr()) });
                    wf[t] = _mm512_cvtepi32_ps(wv);
                    wsum = _mm512_add_epi32(wsum, wv);
                }
                let zw = _mm512_mullo_epi32(zav, wsum);
                let (off, sc) = (&q.offset[c0..][..lanes], &q.scale[c0..][..lanes]);
                // SAFETY: masked to the `lanes` elements of the checked slices.
                let (off, sc) = unsafe {
                    (
                        _mm512_maskz_loadu_epi32(k, off.as_ptr()),
                        _mm512_maskz_loadu_ps(k, sc.as_ptr()),
                    )
                };
                // Interior pixels (whole window inside the input) come in groups of
                // `P`: each tap's weights serve `P` independent accumulators, which hides
                // the FMA latency that one pixel's chain of taps exposes.
                let (lo_x, hi_x) = interior(g, row_in);
                let mut ox = 0;
                while ox < g.ow {
                    if ox >= lo_x && ox + P <= hi_x {
                        let f =
                            sum_window::<P>(g, x, &toff[..nt], &wf[..nt], (b, oy, ox), c0, lanes);
                        for (p, f) in f.iter().enumerate() {
                            let acc = _mm512_sub_epi32(_mm512_cvtps_epi32(*f), zw);
                            store(
                                out,
                                ((row - start) * g.ow + ox + p) * c + c0,
                                k,
                                requant16(acc, off, sc, q),
                            );
                        }
                        ox += P;
                        continue;
                    }
                    let acc = if ox >= lo_x && ox < hi_x {
                        let [f] =
                            sum_window::<1>(g, x, &toff[..nt], &wf[..nt], (b, oy, ox), c0, lanes);
                        _mm512_sub_epi32(_mm512_cvtps_epi32(f), zw)
                    } else {
                        // A tap in the padding reads the zero point, whose term
                        // `(za - za) * w` is the zero the padding contributes.
                        let mut f = _mm512_setzero_ps();
                        for ki in 0..g.kh {
                            let iy = (oy * g.sh + ki * g.dh)
                                .checked_sub(g.ph)
                                .filter(|&v| v < g.h);
                            for kj in 0..g.kw {
                                let ix = (ox * g.sw + kj * g.dw)
                                    .checked_sub(g.pw)
                                    .filter(|&v| v < g.w);
                                let xv = match (iy, ix) {
                                    (Some(iy), Some(ix)) => {
                                        let xs =
                                            &x[((b * g.h + iy) * g.w + ix) * c + c0..][..lanes];
                                        // SAFETY: masked to the `lanes` elements of the checked slice.
                                        let xv = unsafe {
                                            _mm_maskz_loadu_epi8(k, xs.as_ptr() as *const i8)
                                        };
                                        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(xv))
                                    }
                                    _ => zaf,
                                };
                                f = _mm512_fmadd_ps(xv, wf[ki * g.kw + kj], f);
                            }
                        }
                        _mm512_sub_epi32(_mm512_cvtps_epi32(f), zw)
                    };
                    store(
                        out,
                        ((row - start) * g.ow + ox) * c + c0,
                        k,
                        requant16(acc, off, sc, q),
                    );
                    ox += 1;
                }
            }
        }
    }

    /// Interior pixels per group in [`rows`].
    const P: usize = 4;

    /// The output columns `lo..hi` whose window is inside the input along x (empty when
    /// the row's window is not inside along y).
    fn interior(g: &Geom, row_in: bool) -> (usize, usize) {
        if !row_in || g.w + g.pw < (g.kw - 1) * g.dw + 1 {
            return (0, 0);
        }
        let lo = g.pw.div_ceil(g.sw);
        // The last column whose window ends inside: ox * sw - pw + (kw - 1) * dw < w.
        let reach = g.w + g.pw - (g.kw - 1) * g.dw;
        let hi = reach.div_ceil(g.sw).min(g.ow);
        (lo.min(hi), hi)
    }

    /// The f32 sums `x * w` over the window of `N` consecutive output pixels from `ox`,
    /// for the `lanes` channels from `c0`, every window inside the input.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    fn sum_window<const N: usize>(
        g: &Geom,
        x: &[u8],
        toff: &[usize],
        wf: &[__m512],
        (b, oy, ox): (usize, usize, usize),
        c0: usize,
        lanes: usize,
    ) -> [__m512; N] {
        let c = g.c;
        let k: u16 = if lanes == LANES { !0 } else { (1 << lanes) - 1 };
        let base = ((b * g.h + oy * g.sh - g.ph) * g.w + ox * g.sw - g.pw) * c + c0;
        let step = g.sw * c;
        // The furthest byte read: the last pixel's last tap's `lanes` channels.
        let last = base + (N - 1) * step + toff.last().copied().unwrap_or(0) + lanes;
        assert!(last <= x.len(), "depthwise window outside the input");
        let mut f = [_mm512_setzero_ps(); N];
        for (&to, &w) in toff.iter().zip(wf) {
            for (p, f) in f.iter_mut().enumerate() {
                // SAFETY: at most `last` (checked above) and masked to `lanes` bytes.
                let xv = unsafe {
                    _mm_maskz_loadu_epi8(k, x.as_ptr().add(base + p * step + to) as *const i8)
                };
                *f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(xv)), w, *f);
            }
        }
        f
    }

    /// Stores the masked bytes of `y` at `out[o..]`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    fn store(out: &mut [u8], o: usize, k: u16, y: __m128i) {
        let d = &mut out[o..o + (k.count_ones() as usize)];
        // SAFETY: masked to the `k.count_ones()` bytes of the checked slice (the mask is
        // the low lanes).
        unsafe { _mm_mask_storeu_epi8(d.as_mut_ptr() as *mut i8, k, y) };
    }

    /// One pixel's block of `d.len()` (at most 16) channels from `c0`: the taps' products
    /// summed in one register (masked loads and store for a short block), then the same
    /// requantization as `requant` and `to_byte`, operation for operation (so
    /// bit-identical to the portable path).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn block(
        g: &Geom,
        x: &[u8],
        taps: &[i16],
        za: i32,
        q: &QOut,
        at: Pixel,
        c0: usize,
        d: &mut [u8],
    ) {
        let (c, lanes) = (g.c, d.len().min(LANES));
        let k: u16 = if lanes == LANES { !0 } else { (1 << lanes) - 1 };
        let mut acc = _mm512_setzero_si512();
        let zav = _mm512_set1_epi32(za);
        at.each_tap(g, |px, t| {
            let xs = &x[px * c + c0..][..lanes];
            let ws = &taps[t * c + c0..][..lanes];
            // SAFETY: masked to the `lanes` elements of the checked slices.
            let (xv, wv) = unsafe {
                (
                    _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, xs.as_ptr() as *const i8)),
                    _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(k, ws.as_ptr())),
                )
            };
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_sub_epi32(xv, zav), wv));
        });
        let off = &q.offset[c0..][..lanes];
        let sc = &q.scale[c0..][..lanes];
        // SAFETY: masked to the `lanes` elements of the checked slices.
        unsafe {
            let off = _mm512_maskz_loadu_epi32(k, off.as_ptr());
            let sc = _mm512_maskz_loadu_ps(k, sc.as_ptr());
            let y = requant16(acc, off, sc, q);
            _mm_mask_storeu_epi8(d.as_mut_ptr() as *mut i8, k, y);
        }
    }
}

/// Channels of one depthwise register block.
const LANES: usize = 16;
