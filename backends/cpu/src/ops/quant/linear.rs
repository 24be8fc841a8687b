//! The integer op of a QDQ group: Conv, MatMul or Gemm on stored bytes, requantized in
//! the GEMM's epilogue straight to bytes.
//!
//! Convolutions compute channels-last, like the f32 ones: output pixels are the GEMM's
//! rows, channels its columns, so the activations are read in place.
//! - a 1x1 convolution with stride 1 and no padding is a plain GEMM over the pixels;
//! - a convolution of few input channels (a model's 3-channel stem) is a plain GEMM over
//!   im2col rows written at run time, where a row packs its window's bytes tighter than
//!   the IGEMM's per-tap blocks of four (see [`im2col_stride`]);
//! - any other convolution is an IGEMM: the indirection table (input pixel per output
//!   pixel and tap, or the zero-point row for padding) is built at init;
//! - a depthwise convolution (one input and one output channel per group) runs directly,
//!   vectorized over the channels of each pixel.
//!
//! An input held NCHW (a partition's int8 edge) is converted into scratch first; an
//! output that must be NCHW is written to scratch and transposed.

use super::{stored_bias, Nhwc};
use crate::ops::conv::Geom;
use crate::ops::layout::{to_nchw, to_nhwc};
use crate::ops::{vec_bytes, RunCtx, Sources, Src};
use crate::pool::Pool;
use crate::qgemm::{
    padded_c, requant, to_byte, ARows, Indirection, PackedWeights, QGemm, QKernel, QOut, PAD, SLACK,
};
use std::sync::Mutex;

/// How the op reads its input and computes.
#[derive(Debug)]
pub(crate) enum QPath {
    /// `rows x K` activation rows (MatMul/Gemm, or a pointwise convolution's pixels).
    Gemm { rows: usize },
    /// An indirect convolution: `table[pixel * taps + tap]` is the byte offset of the
    /// NHWC input pixel (or `PAD`); `zero` is `cg` zero-point bytes and slack.
    Igemm { table: Indirection, zero: Vec<u8> },
    /// A GEMM over im2col rows `stride` bytes apart (see [`im2col_stride`]), written
    /// into the shared scratch at run time.
    Im2col { stride: usize },
    /// A depthwise convolution: `taps[tap * c + ch]`; for the AVX2 and VNNI row kernels
    /// also the taps in horizontal pairs (`pairs`, see [`pair_taps`]) and per channel
    /// `zoff = offset - za * sum(taps)` (wrapping, as the kernels' i32 sums), which they
    /// add to their plain sums `x * w`.
    Depthwise {
        taps: Vec<i16>,
        pairs: Vec<i32>,
        zoff: Vec<i32>,
    },
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
            QPath::Gemm { .. } | QPath::Im2col { .. } => 0,
            QPath::Igemm { table, zero } => table.capacity_bytes() + vec_bytes(zero),
            QPath::Depthwise { taps, pairs, zoff } => {
                vec_bytes(taps) + vec_bytes(pairs) + vec_bytes(zoff)
            }
        };
        path + self.outs.iter().map(QOut::capacity_bytes).sum::<usize>()
    }

    /// Sizes the shared scratch: the converted input and output, the im2col rows, and a
    /// depthwise convolution's rings of input rows.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        if let (QPath::Im2col { stride }, Some(g)) = (&self.path, &self.geom) {
            let len = g.batch * g.out_plane() * stride + SLACK;
            if ctx.qcol.len() < len {
                ctx.qcol.resize(len, 0);
            }
        }
        if let (QPath::Depthwise { .. }, Some(g)) = (&self.path, &self.geom) {
            if RowRing::fits(g) {
                let threads = ctx.pool.threads();
                ctx.qdw
                    .resize_with(threads.max(ctx.qdw.len()), Default::default);
                for ring in &mut ctx.qdw {
                    let ring = ring.get_mut().unwrap_or_else(|e| e.into_inner());
                    if ring.len() < ring_len(g) {
                        ring.resize(ring_len(g), 0.0);
                    }
                }
            }
        }
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
            to_nhwc(
                &ctx.pool,
                &x[..self.x_len],
                (shape.batch, shape.c, shape.plane),
                &mut ctx.qin[..self.x_len],
            );
            &ctx.qin[..self.x_len + SLACK]
        } else {
            x
        };
        let dst = if self.out_nchw {
            &mut ctx.qout[..]
        } else {
            &mut out[..]
        };
        self.conv(&g, x, dst, &ctx.pool, &ctx.qdw, &mut ctx.qcol);
        if self.out_nchw {
            let shape = Nhwc {
                batch: g.batch,
                c: g.m,
                plane: g.out_plane(),
            };
            let n = shape.batch * shape.c * shape.plane;
            to_nchw(
                &ctx.pool,
                &ctx.qout[..n],
                (shape.batch, shape.c, shape.plane),
                out,
            );
        }
    }

    /// The convolution, NHWC bytes to NHWC bytes.
    fn conv(
        &self,
        g: &Geom,
        x: &[u8],
        out: &mut [u8],
        pool: &Pool,
        rings: &[Mutex<Vec<f32>>],
        col: &mut [u8],
    ) {
        let pixels = g.batch * g.out_plane();
        match &self.path {
            &QPath::Im2col { stride } => {
                let col = &mut col[..pixels * stride + SLACK];
                im2col(g, x, self.za as u8, stride, col, pool);
                let gemm = QGemm {
                    m: pixels,
                    a: ARows::Strided { data: col, stride },
                    w: &self.weights[0],
                    out: &self.outs[0],
                    ldo: g.m,
                    ints: None,
                };
                gemm.run(self.kernel, pool, out);
            }
            QPath::Depthwise { taps, pairs, zoff } => {
                let dw = Depthwise {
                    kernel: self.kernel,
                    g,
                    taps,
                    pairs,
                    zoff,
                    za: self.za,
                    q: &self.outs[0],
                };
                dw.run(x, out, pool, rings);
            }
            path => {
                let (cg, mg) = (g.cg(), g.mg());
                for grp in 0..g.group {
                    let data = &x[grp * cg..];
                    let a = match path {
                        QPath::Gemm { .. } => ARows::Strided { data, stride: g.c },
                        QPath::Igemm { table, zero } => ARows::Indirect { data, table, zero },
                        QPath::Depthwise { .. } | QPath::Im2col { .. } => {
                            unreachable!("handled above")
                        }
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

/// The most bytes of im2col rows one convolution writes (past it, the IGEMM reads the
/// input in place).
const IM2COL_MAX_BYTES: usize = 16 << 20;

/// The bytes between im2col rows where `g` is computed over them, or `None` where the
/// IGEMM is kept. An im2col row holds an output pixel's window, tap by tap, in `(ky, kx,
/// ch)` order (as the weights are packed for it), padded to four bytes as a whole where the
/// IGEMM pads each tap: a 3x3 window of 3 channels is 7 blocks instead of 9, of one
/// channel 3 instead of 9, a 7x7 one of 3 channels 37 instead of 49. Measured on the AVX2
/// kernel (this Zen 3, 1 thread; strided GEMM against the IGEMM of the same products):
/// 12544 pixels x 16 x 3x3x3 179 against 278 us, x 16 x 3x3x1 145 against 278, 3136 x 32
/// x 3x3x5 159 against 291, 12544 x 64 x 7x7x3 2.2-3.4 against 4.9-6.4 ms, an audio
/// model's first 1-D layer (3199 x 512 x 10x1) 0.9-1.2 against 2.4 ms; writing the rows
/// costs a few cycles a pixel. Taken for one group without horizontal dilation (a
/// window row is then one run of input bytes), where the rows take at least an eighth
/// fewer blocks and fit [`IM2COL_MAX_BYTES`]. Rows are apart by room for a window row's
/// last run copied in whole 16-byte pieces, so that no row's copies reach the next row
/// (tasks write rows side by side).
pub(crate) fn im2col_stride(g: &Geom) -> Option<usize> {
    let (cg, taps) = (g.cg(), g.kh * g.kw);
    // At least an eighth fewer blocks: the copy costs a pass over the window's bytes,
    // and a block or two fewer in many (3x3 windows of 7 or of 99 channels) was not
    // measured to repay it, so those keep reading in place.
    let fewer = padded_c(taps * cg) * 8 <= taps * padded_c(cg) * 7;
    if g.group != 1 || g.dw != 1 || !fewer {
        return None;
    }
    let run = g.kw * cg;
    let stride = padded_c((g.kh.max(1) - 1) * run + run.div_ceil(16) * 16);
    let bytes = (g.batch * g.out_plane()).checked_mul(stride)?;
    (bytes <= IM2COL_MAX_BYTES).then_some(stride)
}

/// Writes the im2col rows of `g`'s convolution of the NHWC bytes `x` (one group), `stride`
/// bytes apart into `col` (see [`im2col_stride`]), zero points `za` where a window leaves
/// the input; split among the threads by output rows. Each input row a window row reads is
/// first copied between columns of zero points, so that every window row is one run of
/// whole 16-byte pieces of that copy.
fn im2col(g: &Geom, x: &[u8], za: u8, stride: usize, col: &mut [u8], pool: &Pool) {
    let (c, run) = (g.c, g.kw * g.c);
    let pieces = run.div_ceil(16);
    assert!(
        g.group == 1 && g.dw == 1 && stride >= (g.kh.max(1) - 1) * run + pieces * 16,
        "im2col rows too close"
    );
    let rows = g.batch * g.oh;
    let row_len = g.ow * stride;
    assert!(col.len() >= rows * row_len, "im2col rows too short");
    assert!(
        x.len() >= g.batch * g.in_plane() * c,
        "im2col input too short"
    );
    // Input columns of the padded copy: as far as the windows reach.
    let reach = (g.ow.max(1) - 1) * g.sw + g.kw;
    let cols = (g.pw + g.w).max(reach);
    let dst = RowsOut(col.as_mut_ptr(), col.len());
    let task = |range: std::ops::Range<usize>| {
        // SAFETY: rows in `range` are this task's alone.
        let out = unsafe { dst.range(range.start * row_len, range.len() * row_len) };
        let zeros = vec![za; cols * c + 16];
        let mut padded = zeros.clone();
        for row in range.clone() {
            let (b, oy) = (row / g.oh, row % g.oh);
            let out = &mut out[(row - range.start) * row_len..][..row_len];
            for ky in 0..g.kh {
                let iy = (oy * g.sh + ky * g.dh)
                    .checked_sub(g.ph)
                    .filter(|&v| v < g.h);
                let src = match iy {
                    Some(iy) => {
                        let wc = g.w * c;
                        padded[g.pw * c..][..wc].copy_from_slice(&x[(b * g.h + iy) * wc..][..wc]);
                        &padded
                    }
                    None => &zeros,
                };
                copy_runs(src, g.sw * c, &mut out[ky * run..], stride, g.ow, pieces);
            }
        }
    };
    let work = rows * row_len;
    let tasks = (crate::gemm::TASKS_PER_THREAD * pool.threads())
        .min(work / (64 * 1024))
        .min(rows);
    if tasks <= 1 {
        return task(0..rows);
    }
    let per = rows.div_ceil(tasks);
    pool.run(tasks, &|t, _| {
        task((t * per).min(rows)..((t + 1) * per).min(rows))
    });
}

/// Copies `n` runs of `pieces` 16-byte pieces, run `i` from `src[i * step..]` to
/// `dst[i * stride..]`: the window rows of one output row's pixels. By pointers, the
/// bounds checked once: with a slice per piece the loop kept its state on the stack and
/// took ~11 cycles a piece.
#[inline]
fn copy_runs(src: &[u8], step: usize, dst: &mut [u8], stride: usize, n: usize, pieces: usize) {
    if n == 0 {
        return;
    }
    assert!(
        (n - 1) * step + 16 * pieces <= src.len() && (n - 1) * stride + 16 * pieces <= dst.len(),
        "im2col copies out of bounds"
    );
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    for i in 0..n {
        for p in 0..pieces {
            // SAFETY: inside both slices (checked above); `src` and `dst` do not overlap
            // (a shared and a mutable borrow).
            unsafe {
                let piece = std::ptr::read_unaligned(s.add(i * step + 16 * p) as *const [u8; 16]);
                std::ptr::write_unaligned(d.add(i * stride + 16 * p) as *mut [u8; 16], piece);
            }
        }
    }
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

/// A direct depthwise convolution on NHWC bytes.
struct Depthwise<'a> {
    /// Picks the x86 row kernels (elsewhere unread, as `pairs` and `zoff`).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    kernel: &'a QKernel,
    g: &'a Geom,
    /// `taps[tap * c + ch]`.
    taps: &'a [i16],
    /// See [`QPath::Depthwise`].
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pairs: &'a [i32],
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    zoff: &'a [i32],
    /// The input's stored zero point.
    za: i32,
    q: &'a QOut,
}

impl Depthwise<'_> {
    /// The convolution, split by output rows over the pool; `rings` are the pool threads'
    /// f32 input rows (empty where the kernel reads bytes).
    fn run(&self, x: &[u8], out: &mut [u8], pool: &Pool, rings: &[Mutex<Vec<f32>>]) {
        let g = self.g;
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
        let run = |range: std::ops::Range<usize>, worker: usize| {
            // SAFETY: rows in `range` are this task's alone.
            let o = unsafe { dst.range(range.start * row_len, range.len() * row_len) };
            // Each pool thread owns its ring; the lock is never contended.
            let mut ring = rings
                .get(worker)
                .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()));
            let ring = ring.as_deref_mut().map_or(&mut [][..], Vec::as_mut_slice);
            self.rows(x, range, o, ring);
        };
        if tasks <= 1 {
            run(0..rows, 0);
            return;
        }
        let per = rows.div_ceil(tasks);
        pool.run(tasks, &|t, worker| {
            run((t * per).min(rows)..((t + 1) * per).min(rows), worker)
        });
    }

    /// Output rows `rows` under the kernel's instruction set, so that the channel loops
    /// vectorize.
    fn rows(&self, x: &[u8], rows: std::ops::Range<usize>, out: &mut [u8], ring: &mut [f32]) {
        let Depthwise { g, taps, za, q, .. } = *self;
        #[cfg(target_arch = "x86_64")]
        {
            use crate::qgemm::QKernelId;
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
            fn avx512(dw: &Depthwise<'_>, x: &[u8], r: std::ops::Range<usize>, o: &mut [u8]) {
                dw_body::<true>(dw.g, x, dw.taps, dw.za, dw.q, r, o)
            }
            #[target_feature(enable = "avx2,fma")]
            fn avx2(dw: &Depthwise<'_>, x: &[u8], r: std::ops::Range<usize>, o: &mut [u8]) {
                dw_body::<false>(dw.g, x, dw.taps, dw.za, dw.q, r, o)
            }
            let pairs = RowRing::fits(g) && ring.len() >= x86dw::PairRing::len(g);
            let w = (self.pairs, self.zoff);
            match self.kernel.id() {
                QKernelId::Avx512Vnni if pairs => {
                    // SAFETY: the kernel exists only where its features were detected.
                    return unsafe { x86dw::rows_vnni(g, x, w, za, q, rows, out, ring) };
                }
                QKernelId::Avx2 if pairs => {
                    // SAFETY: as above.
                    return unsafe { x86dw::rows_avx2(g, x, w, za, q, rows, out, ring) };
                }
                // SAFETY: as above.
                QKernelId::Avx512Vnni => return unsafe { avx512(self, x, rows, out) },
                // SAFETY: as above.
                QKernelId::Avx2 => return unsafe { avx2(self, x, rows, out) },
                QKernelId::Portable | QKernelId::Neon | QKernelId::NeonDot => {}
            }
        }
        if RowRing::fits(g) && ring.len() >= RowRing::len(g) {
            // NEON has fused multiply-adds in its baseline; x86's portable kernel does not.
            return ring_body::<8, { cfg!(target_arch = "aarch64") }>(self, x, rows, out, ring);
        }
        dw_body::<false>(g, x, taps, za, q, rows, out)
    }
}

/// The most taps the row kernels keep widened weights for.
const MAX_TAPS: usize = 25;
/// The most input rows one output row's window may span in the row kernels.
const MAX_SPAN: usize = 32;

/// A task's input rows widened to f32 for the row kernels of a depthwise convolution.
///
/// The input rows an output row's window spans are widened once, into slot `iy % span`
/// (the rows of one window are distinct slots), and stay there while later output rows
/// need them: a 3x3 stride-1 window reads each input byte 9 times, which byte loads paid a
/// widening and a conversion each. The kernels then sum `x * w` in f32 and subtract
/// `za * sum(w)` once: every product (at most 255 * 128) and every partial sum (at most
/// [`MAX_TAPS`] of them, under 2^20) is an integer f32 holds exactly, so the result is the
/// integer sum, bit for bit, whether or not the multiply-adds are fused. Taps in the
/// padding read the zero point, so the same subtraction cancels them.
struct RowRing<'a> {
    g: &'a Geom,
    x: &'a [u8],
    ring: &'a mut [f32],
    /// The input row (`b * h + iy`) each slot holds.
    held: [usize; MAX_SPAN],
    span: usize,
}

impl<'a> RowRing<'a> {
    /// f32 values per cache line: the ring starts on one, so that a pixel of 16 channels
    /// is one line, not two halves (a split load each; measured: the AVX-512 depthwise time
    /// varied by a quarter with where the allocator put the ring).
    const ALIGN: usize = 16;

    /// Whether the row kernels take `g`.
    fn fits(g: &Geom) -> bool {
        g.kh * g.kw <= MAX_TAPS && Self::span(g) <= MAX_SPAN
    }

    /// f32 values of one task's ring (with room to start it on a cache line).
    fn len(g: &Geom) -> usize {
        Self::span(g) * g.w * g.c + Self::ALIGN
    }

    /// Input rows one output row's window spans.
    fn span(g: &Geom) -> usize {
        (g.kh.max(1) - 1) * g.dh + 1
    }

    fn new(g: &'a Geom, x: &'a [u8], ring: &'a mut [f32]) -> Self {
        assert!(Self::fits(g), "too many depthwise taps for the row kernels");
        assert!(ring.len() >= Self::len(g), "depthwise row ring too short");
        let skip = ring.as_ptr().align_offset(Self::ALIGN * 4).min(Self::ALIGN);
        assert!(
            x.len() >= g.batch * g.h * g.w * g.c,
            "depthwise input too short"
        );
        RowRing {
            g,
            x,
            ring: &mut ring[skip..],
            held: [usize::MAX; MAX_SPAN],
            span: Self::span(g),
        }
    }

    /// Widens the rows the window of output row `oy` of image `b` spans (those not held
    /// yet), and returns each window row's offset into [`Self::values`] (`None`: in the
    /// padding).
    #[inline(always)]
    fn fill(&mut self, b: usize, oy: usize) -> [Option<usize>; MAX_SPAN] {
        let g = self.g;
        let wc = g.w * g.c;
        let mut roff = [None; MAX_SPAN];
        for (ki, r) in roff.iter_mut().enumerate().take(g.kh) {
            let Some((slot, src)) = window_row(g, self.span, (b, oy), ki) else {
                continue;
            };
            if self.held[slot] != src {
                let dst = &mut self.ring[slot * wc..][..wc];
                for (d, &s) in dst.iter_mut().zip(&self.x[src * wc..][..wc]) {
                    *d = s as f32;
                }
                self.held[slot] = src;
            }
            *r = Some(slot * wc);
        }
        roff
    }

    /// The widened rows.
    fn values(&self) -> &[f32] {
        self.ring
    }
}

/// Row `ki` of output row `oy`'s window in image `b`, for a ring of `span` slots: the slot
/// that holds it and the input row (`b * h + iy`), or `None` in the padding.
#[inline(always)]
fn window_row(g: &Geom, span: usize, (b, oy): (usize, usize), ki: usize) -> Option<(usize, usize)> {
    let iy = (oy * g.sh + ki * g.dh)
        .checked_sub(g.ph)
        .filter(|&v| v < g.h)?;
    Some((iy % span, b * g.h + iy))
}

/// f32 words of one task's depthwise scratch: a [`RowRing`], or on x86 the longer of
/// that and the AVX2 kernel's `PairRing`, which lives in the same scratch.
fn ring_len(g: &Geom) -> usize {
    #[cfg(target_arch = "x86_64")]
    return RowRing::len(g).max(x86dw::PairRing::len(g));
    #[cfg(not(target_arch = "x86_64"))]
    RowRing::len(g)
}

/// The depthwise taps `taps[tap * c + ch]` of a `kh x kw` kernel in horizontal pairs
/// for the AVX2 row kernel: `pairs[(ki * kw.div_ceil(2) + p) * c + ch]` holds the taps at
/// `kx = 2p` and `2p + 1` of row `ki` as the low and high 16-bit halves (the second 0
/// past an odd kernel's last column), as `vpmaddwd` multiplies them with a pair of
/// input values.
pub(crate) fn pair_taps(taps: &[i16], c: usize, kh: usize, kw: usize) -> Vec<i32> {
    let np = kw.div_ceil(2);
    let mut pairs = vec![0i32; kh * np * c];
    for ki in 0..kh {
        for p in 0..np {
            for ch in 0..c {
                let tap = |kx: usize| match kx < kw {
                    true => taps[(ki * kw + kx) * c + ch] as u16 as u32,
                    false => 0,
                };
                pairs[(ki * np + p) * c + ch] = (tap(2 * p) | tap(2 * p + 1) << 16) as i32;
            }
        }
    }
    pairs
}

/// The row kernel in plain arrays of `L` channels, for instruction sets without a
/// hand-written one (x86's `isa=portable`, NEON): the compiler vectorizes the lane loops
/// (NEON: `L = 8`, two registers of four). `FMA`: fused multiply-adds (the caller enables
/// them; the sums are exact integers either way, so fused or not gives the same bits).
/// Channels past the last full block go through the same sums with fewer lanes.
///
/// No closures in here: a closure does not inherit its caller's target features, and one
/// the compiler does not inline runs without them (`mul_add` then became a library call).
#[inline(always)]
fn ring_body<const L: usize, const FMA: bool>(
    dw: &Depthwise<'_>,
    x: &[u8],
    rows: std::ops::Range<usize>,
    out: &mut [u8],
    ring: &mut [f32],
) {
    let g = dw.g;
    let c = g.c;
    let start = rows.start;
    let full = c / L * L;
    let mut ring = RowRing::new(g, x, ring);
    let mut wf = [[0f32; L]; MAX_TAPS];
    for row in rows {
        let (b, oy) = (row / g.oh, row % g.oh);
        let roff = ring.fill(b, oy);
        let o = (row - start) * g.ow * c;
        let dst = &mut out[o..o + g.ow * c];
        for c0 in (0..full).step_by(L) {
            ring_block::<L, FMA, true>(dw, ring.values(), &roff, c0, L, &mut wf, dst);
        }
        if full < c {
            ring_block::<L, FMA, false>(dw, ring.values(), &roff, full, c - full, &mut wf, dst);
        }
    }
}

/// The integer an f32 holds exactly, `|v| < 2^22` (a window sum: at most 25 products of
/// at most 255 * 128), from its bits after adding 1.5 * 2^23: plain arithmetic, so the lane
/// loops vectorize (an `as` cast checks NaN and saturates lane by lane).
#[inline(always)]
fn exact_int(v: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32
}

/// `a * b + acc`, fused where `FMA` (the caller has the instruction: without it `mul_add`
/// is a library call).
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, acc: f32) -> f32 {
    if FMA {
        a.mul_add(b, acc)
    } else {
        a * b + acc
    }
}

/// One output row of [`ring_body`] for the `n` channels from `c0` (`FULL`: `n == L`, known
/// to the compiler): the block's weights widened into `wf`, then every pixel's window sum
/// and requantization into `dst` (the output row).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn ring_block<const L: usize, const FMA: bool, const FULL: bool>(
    dw: &Depthwise<'_>,
    v: &[f32],
    roff: &[Option<usize>; MAX_SPAN],
    c0: usize,
    n: usize,
    wf: &mut [[f32; L]; MAX_TAPS],
    dst: &mut [u8],
) {
    let Depthwise { g, taps, za, q, .. } = *dw;
    let n = if FULL { L } else { n };
    let (c, nt) = (g.c, g.kh * g.kw);
    let (zp, lo, hi) = (q.zp as f32, q.lo as f32, q.hi as f32);
    let zaf = za as f32;
    let mut wsum = [0i32; L];
    for t in 0..nt {
        let ws = &taps[t * c + c0..][..n];
        for l in 0..n {
            wf[t][l] = ws[l] as f32;
            wsum[l] += ws[l] as i32;
        }
    }
    let (off, scale) = (&q.offset[c0..][..n], &q.scale[c0..][..n]);
    for ox in 0..g.ow {
        let mut acc = [0f32; L];
        for (ki, r) in roff.iter().enumerate().take(g.kh) {
            for kj in 0..g.kw {
                let w = &wf[ki * g.kw + kj];
                let ix = (ox * g.sw + kj * g.dw)
                    .checked_sub(g.pw)
                    .filter(|&i| i < g.w);
                if let (Some(r), Some(ix)) = (r, ix) {
                    let xs = &v[r + ix * c + c0..][..n];
                    for l in 0..n {
                        acc[l] = madd::<FMA>(xs[l], w[l], acc[l]);
                    }
                } else {
                    for l in 0..n {
                        acc[l] = madd::<FMA>(zaf, w[l], acc[l]);
                    }
                }
            }
        }
        let d = &mut dst[ox * c + c0..][..n];
        for l in 0..n {
            let a = (exact_int(acc[l]) - za * wsum[l]).wrapping_add(off[l]);
            d[l] = to_byte(requant(a, scale[l], zp, lo, hi));
        }
    }
}

/// The depthwise loop: per output pixel, `acc[ch] = sum over taps inside the input of
/// (x - za) * w` (padding is real zero and adds nothing), then the channel's epilogue.
/// Products and sums are in i32 lanes (one `vpmulld` per 16 channels and tap on AVX-512;
/// i16 products, though exact, vectorized worse). Channels go in blocks of [`LANES`] held
/// in registers over all taps, then one block's epilogue; the channels past the last full
/// block one by one.
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

    use super::{Geom, Pixel, RowRing, LANES, MAX_SPAN, MAX_TAPS};
    use crate::qgemm::kernels::x86::{
        clamp_bytes, pack4x8, pack8, requant16, store4x8, store_bytes, Requant8,
    };
    use crate::qgemm::QOut;

    /// Channels of one AVX2 register block.
    const LANES8: usize = 8;

    /// The depthwise row kernel for AVX2: blocks of 8 channels summed in 32-bit integers,
    /// two horizontal taps per `vpmaddwd` from a [`PairRing`], every pixel an interior one
    /// (the ring is padded): in groups of [`P`], the rest one by one, with no edge path (on
    /// a 14x14 image the edges were a quarter of the pixels, each tap tested). A 3x3 window
    /// is 6 loads and 6 products where f32 sums took 9 loads and 9 FMAs; the sums are the
    /// integers themselves, so the same bytes as every other kernel through the same
    /// requantization in 8 lanes ([`Requant8`]). The weights come paired at init (`pairs`,
    /// see [`super::pair_taps`]) and the zero point's term `za * sum(w)` folded into the
    /// offsets (`zoff`, see [`super::QPath::Depthwise`]): set up per row and block, they
    /// cost as much as the sums on small images with many channels. Short channel blocks
    /// load with lane masks and store byte by byte (AVX2 has no masked byte store).
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rows_avx2(
        g: &Geom,
        x: &[u8],
        (pairs, zoff): (&[i32], &[i32]),
        za: i32,
        q: &QOut,
        rows: std::ops::Range<usize>,
        out: &mut [u8],
        ring: &mut [f32],
    ) {
        let (c, np) = (g.c, g.kw.div_ceil(2));
        let nt = g.kh * np;
        assert!(
            pairs.len() >= nt * c && zoff.len() >= c,
            "depthwise weights too short"
        );
        let mut ring = PairRing::new(g, x, ring, za);
        let start = rows.start;
        for row in rows {
            let (b, oy) = (row / g.oh, row % g.oh);
            let (toff, far) = pair_offsets(g, &ring.fill(b, oy));
            let ring = ring.values();
            for c0 in (0..c).step_by(LANES8) {
                let lanes = LANES8.min(c - c0);
                let m = lane_mask(lanes);
                let (off, sc) = (&zoff[c0..][..lanes], &q.scale[c0..][..lanes]);
                // SAFETY: masked to the `lanes` elements of the checked slices.
                let rq = unsafe {
                    let off = _mm256_maskload_epi32(off.as_ptr(), m);
                    Requant8::new(off, _mm256_maskload_ps(sc.as_ptr(), m), q)
                };
                let window = PairWindow {
                    ring,
                    toff: &toff[..nt],
                    far,
                    wt: &pairs[c0..],
                    c,
                    step: g.sw * c,
                    lanes,
                };
                let o = (row - start) * g.ow * c + c0;
                // A whole group's clamp may be left to the packs and the bytes.
                let late = rq.unclamped_is_exact();
                let mut ox = 0;
                while ox + P <= g.ow {
                    let base = ox * g.sw * c + c0;
                    if lanes == LANES8 {
                        // A whole group: the four pixels' bytes packed together and
                        // stored as four words.
                        let acc = window.sum::<P, true>(base);
                        // (No closure: one not inlined would run without AVX2.)
                        let mut y = [_mm256_setzero_si256(); P];
                        for (y, &acc) in y.iter_mut().zip(&acc) {
                            *y = if late {
                                rq.unclamped(acc)
                            } else {
                                rq.lanes(acc)
                            };
                        }
                        let mut y = pack4x8(y);
                        if late {
                            y = clamp_bytes(y, q);
                        }
                        let d = &mut out[o + ox * c..][..(P - 1) * c + LANES8];
                        // SAFETY: pixel p's 8 bytes at `p * c`, inside `d` (checked above).
                        unsafe { store4x8(d.as_mut_ptr(), c, y) };
                    } else {
                        let acc = window.sum::<P, false>(base);
                        for (p, &acc) in acc.iter().enumerate() {
                            store8(out, o + (ox + p) * c, lanes, pack8(rq.lanes(acc)));
                        }
                    }
                    ox += P;
                }
                while ox < g.ow {
                    let [acc] = window.sum::<1, false>(ox * g.sw * c + c0);
                    store8(out, o + ox * c, lanes, pack8(rq.lanes(acc)));
                    ox += 1;
                }
            }
        }
    }

    /// [`rows_avx2`] in blocks of 16 channels for AVX-512 VNNI: the same [`PairRing`],
    /// paired taps and folded offsets, each pair's two products added to the i32 sums by
    /// one `vpdpwssd` (i16 x i16, exact as `vpmaddwd`, and no separate addition), then
    /// [`requant16`] and a masked byte store per pixel. It replaced f32 sums over a ring of
    /// widened rows (one FMA per tap, then a conversion back to integers), which ran the
    /// QDQ mobilenet_tiny's depthwise layers at up to twice the f32 model's time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rows_vnni(
        g: &Geom,
        x: &[u8],
        (pairs, zoff): (&[i32], &[i32]),
        za: i32,
        q: &QOut,
        rows: std::ops::Range<usize>,
        out: &mut [u8],
        ring: &mut [f32],
    ) {
        let (c, np) = (g.c, g.kw.div_ceil(2));
        let nt = g.kh * np;
        assert!(
            pairs.len() >= nt * c && zoff.len() >= c,
            "depthwise weights too short"
        );
        let mut ring = PairRing::new(g, x, ring, za);
        let start = rows.start;
        for row in rows {
            let (b, oy) = (row / g.oh, row % g.oh);
            let (toff, far) = pair_offsets(g, &ring.fill(b, oy));
            let ring = ring.values();
            for c0 in (0..c).step_by(LANES) {
                let lanes = LANES.min(c - c0);
                let k: u16 = if lanes == LANES { !0 } else { (1 << lanes) - 1 };
                let (off, sc) = (&zoff[c0..][..lanes], &q.scale[c0..][..lanes]);
                // SAFETY: masked to the `lanes` elements of the checked slices.
                let (off, sc) = unsafe {
                    (
                        _mm512_maskz_loadu_epi32(k, off.as_ptr()),
                        _mm512_maskz_loadu_ps(k, sc.as_ptr()),
                    )
                };
                let window = PairWindow {
                    ring,
                    toff: &toff[..nt],
                    far,
                    wt: &pairs[c0..],
                    c,
                    step: g.sw * c,
                    lanes,
                };
                let o = (row - start) * g.ow * c + c0;
                let mut ox = 0;
                while ox + P <= g.ow {
                    let base = ox * g.sw * c + c0;
                    let acc = if lanes == LANES {
                        window.sum16::<P, true>(base)
                    } else {
                        window.sum16::<P, false>(base)
                    };
                    for (p, &acc) in acc.iter().enumerate() {
                        store(out, o + (ox + p) * c, k, requant16(acc, off, sc, q));
                    }
                    ox += P;
                }
                while ox < g.ow {
                    let [acc] = window.sum16::<1, false>(ox * g.sw * c + c0);
                    store(out, o + ox * c, k, requant16(acc, off, sc, q));
                    ox += 1;
                }
            }
        }
    }

    /// Each pair's offset in a [`PairRing`] from its window's left column (padded
    /// coordinates), for the window rows at `roff`, and the farthest of them (for the
    /// windows' bounds check: once per row; per group of pixels, its reduction cost as
    /// much as the sums).
    #[inline(always)]
    fn pair_offsets(g: &Geom, roff: &[usize; MAX_SPAN]) -> ([usize; MAX_TAPS], usize) {
        let np = g.kw.div_ceil(2);
        let mut toff = [0usize; MAX_TAPS];
        for ki in 0..g.kh {
            for p in 0..np {
                toff[ki * np + p] = roff[ki] + 2 * p * g.dw * g.c;
            }
        }
        let far = toff[..g.kh * np].iter().copied().max().unwrap_or(0);
        (toff, far)
    }

    /// A task's input rows for [`rows_avx2`] and [`rows_vnni`], in horizontal pairs: slot
    /// column `j`, channel `ch` holds the padded row's values at columns `j` and `j + dw`
    /// as two 16-bit halves, so that one `vpmaddwd` with a pair of taps (`w[kx]`,
    /// `w[kx + 1]`) sums both taps' products for 8 channels. Padding columns hold the zero
    /// point, as do the slot past the last (handed out for window rows above or below the
    /// input) and the value past a row's end that an odd kernel's last pair reads (its
    /// weight is 0). Each row is paired once ([`pair_row`]) and kept while later output rows
    /// need it, as [`RowRing`] keeps its f32 rows; it lives in the same scratch.
    pub(super) struct PairRing<'a> {
        g: &'a Geom,
        x: &'a [u8],
        ring: &'a mut [u32],
        /// The ends of the padded row being paired (see [`pair_row`]).
        stage: &'a mut [u8],
        /// The stored zero point.
        za: u8,
        /// The input row (`b * h + iy`) each slot holds.
        held: [usize; MAX_SPAN],
        span: usize,
        /// Columns of a slot (padding included) and of the left padding.
        cols: usize,
        left: usize,
    }

    impl<'a> PairRing<'a> {
        /// f32 words of the scratch a task's ring takes (see [`super::ring_len`]).
        pub(super) fn len(g: &Geom) -> usize {
            let (cols, _) = Self::cols(g);
            (RowRing::span(g) + 1) * cols * g.c + Self::stage_len(g).div_ceil(4) + RowRing::ALIGN
        }

        /// Bytes of the stage: the longer end of a padded row and a dilation's reach.
        fn stage_len(g: &Geom) -> usize {
            let (cols, _) = Self::cols(g);
            (cols - g.w + 2 * g.dw) * g.c
        }

        /// Columns of a slot and of its left padding: as many as the windows reach past
        /// the input on either side.
        fn cols(g: &Geom) -> (usize, usize) {
            let reach = (g.ow.max(1) - 1) * g.sw + (g.kw.max(1) - 1) * g.dw + 1;
            let right = reach.saturating_sub(g.pw + g.w);
            (g.pw + g.w + right, g.pw)
        }

        fn new(g: &'a Geom, x: &'a [u8], scratch: &'a mut [f32], za: i32) -> Self {
            assert!(
                RowRing::fits(g),
                "too many depthwise taps for the row kernels"
            );
            assert!(
                scratch.len() >= Self::len(g),
                "depthwise pair ring too short"
            );
            assert!(
                x.len() >= g.batch * g.h * g.w * g.c,
                "depthwise input too short"
            );
            let skip = scratch
                .as_ptr()
                .align_offset(RowRing::ALIGN * 4)
                .min(RowRing::ALIGN);
            let words = &mut scratch[skip..];
            // SAFETY: u32 has f32's size and alignment, and every bit pattern is valid for
            // both; the scratch is borrowed mutably for the ring's lifetime.
            let words: &'a mut [u32] = unsafe {
                std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u32, words.len())
            };
            let (cols, left) = Self::cols(g);
            let span = RowRing::span(g);
            let (ring, rest) = words.split_at_mut((span + 1) * cols * g.c);
            // SAFETY: as above, bytes of the rest of the scratch.
            let rest: &'a mut [u8] = unsafe {
                std::slice::from_raw_parts_mut(rest.as_mut_ptr() as *mut u8, rest.len() * 4)
            };
            let stage = &mut rest[..Self::stage_len(g)];
            let za = za as u8;
            ring[span * cols * g.c..].fill(u32::from(za) * 0x0001_0001);
            PairRing {
                g,
                x,
                ring,
                stage,
                za,
                held: [usize::MAX; MAX_SPAN],
                span,
                cols,
                left,
            }
        }

        /// Pairs the rows the window of output row `oy` of image `b` spans (those not
        /// held yet), and returns each window row's offset into [`Self::values`] (the
        /// slot of zero points for rows outside the input).
        #[inline(always)]
        fn fill(&mut self, b: usize, oy: usize) -> [usize; MAX_SPAN] {
            let g = self.g;
            let (n, wc) = (self.cols * g.c, g.w * g.c);
            let mut roff = [self.span * n; MAX_SPAN];
            for (ki, r) in roff.iter_mut().enumerate().take(g.kh) {
                let Some((slot, src)) = super::window_row(g, self.span, (b, oy), ki) else {
                    continue;
                };
                if self.held[slot] != src {
                    let row = &self.x[src * wc..][..wc];
                    let dst = &mut self.ring[slot * n..][..n];
                    pair_row(row, (self.left * g.c, g.dw * g.c), self.za, self.stage, dst);
                    self.held[slot] = src;
                }
                *r = slot * n;
            }
            roff
        }

        /// The paired rows.
        fn values(&self) -> &[u32] {
            self.ring
        }
    }

    /// Pairs input row `x` (`wc` bytes) into `dst` (`n` words): `dst[k]` holds bytes `k`
    /// and `k + dwc` of the padded row (`lc` zero points, `x`, zero points) as its low and
    /// high halves. Where both are in `x` they are read in place; the two ends through
    /// `stage`, a padded copy of just those bytes (a whole padded copy first cost a
    /// `memcpy` of every row).
    #[inline(always)]
    fn pair_row(x: &[u8], (lc, dwc): (usize, usize), za: u8, stage: &mut [u8], dst: &mut [u32]) {
        let wc = x.len();
        // The middle: from `lc` to where the high byte leaves `x`.
        let s = lc + wc.saturating_sub(dwc);
        pair_into(&x[..s - lc], &x[dwc.min(wc)..], &mut dst[lc..s]);
        let (left, rest) = dst.split_at_mut(s);
        for (a, d) in [(0, &mut left[..lc]), (s, rest)] {
            let len = d.len() + dwc;
            let st = &mut stage[..len];
            // Bytes `a..a + len` of the padded row.
            let (xs, xe) = (lc.clamp(a, a + len), (lc + wc).clamp(a, a + len));
            st[..xs - a].fill(za);
            st[xs - a..xe - a].copy_from_slice(&x[xs - lc..xe - lc]);
            st[xe - a..].fill(za);
            pair_into(st, &st[dwc..], d);
        }
    }

    /// `d[k] = lo[k] | hi[k] << 16` over `d`.
    #[inline(always)]
    fn pair_into(lo: &[u8], hi: &[u8], d: &mut [u32]) {
        for ((d, &a), &b) in d.iter_mut().zip(lo).zip(hi) {
            *d = u32::from(a) | u32::from(b) << 16;
        }
    }

    /// A load mask of the low `lanes` (at most 8) 32-bit lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn lane_mask(lanes: usize) -> __m256i {
        let n = _mm256_set1_epi32(lanes as i32);
        _mm256_cmpgt_epi32(n, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
    }

    /// Stores the low `lanes` bytes of `y` (lane order) at `out[o..]`, as whole words
    /// (`store_bytes`; a copy of variable length is a `memcpy` call: perf showed 8% of
    /// the QDQ mobilenet in it).
    #[inline(always)]
    fn store8(out: &mut [u8], o: usize, lanes: usize, y: u64) {
        let d = &mut out[o..o + lanes.min(LANES8)];
        // SAFETY: `d` holds the bytes written (checked by the slice above).
        unsafe { store_bytes(d.as_mut_ptr(), y, d.len()) };
    }

    /// One output row's channel block in a [`PairRing`]: its pairs' offsets and weights.
    struct PairWindow<'a> {
        ring: &'a [u32],
        /// Each pair's offset in `ring` from its window's left column.
        toff: &'a [usize],
        /// The largest of `toff`.
        far: usize,
        /// The block's paired weights: pair `t` at `wt[t * c..]`, `lanes` of them.
        wt: &'a [i32],
        c: usize,
        /// Ring values between consecutive output pixels.
        step: usize,
        lanes: usize,
    }

    impl PairWindow<'_> {
        /// The i32 sums `x * w` over the windows of `N` consecutive output pixels, the
        /// first at column offset `base` (channel block included); `FULL`: 8 lanes, so
        /// the loads need no mask.
        #[target_feature(enable = "avx2")]
        #[inline]
        fn sum<const N: usize, const FULL: bool>(&self, base: usize) -> [__m256i; N] {
            let m = lane_mask(self.lanes);
            let last = base + (N - 1) * self.step + self.far + self.lanes;
            assert!(last <= self.ring.len(), "depthwise window outside the ring");
            let pairs = self.toff.len();
            assert!(
                pairs == 0 || (pairs - 1) * self.c + self.lanes <= self.wt.len(),
                "depthwise weights outside the taps"
            );
            assert!(!FULL || self.lanes == LANES8, "a full block has 8 lanes");
            let (p0, w0) = (self.ring.as_ptr() as *const i32, self.wt.as_ptr());
            let mut acc = [_mm256_setzero_si256(); N];
            for (t, &to) in self.toff.iter().enumerate() {
                // SAFETY: within the weights (checked above), masked to `lanes` values
                // unless all 8 are in; likewise the inputs, up to `last`.
                unsafe {
                    let at = w0.add(t * self.c);
                    let w = if FULL {
                        _mm256_loadu_si256(at as *const __m256i)
                    } else {
                        _mm256_maskload_epi32(at, m)
                    };
                    for (p, acc) in acc.iter_mut().enumerate() {
                        let at = p0.add(base + p * self.step + to);
                        let xv = if FULL {
                            _mm256_loadu_si256(at as *const __m256i)
                        } else {
                            _mm256_maskload_epi32(at, m)
                        };
                        *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(xv, w));
                    }
                }
            }
            acc
        }

        /// [`Self::sum`] in 16 lanes, with `vpdpwssd`; `FULL`: 16 lanes.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
        #[inline]
        fn sum16<const N: usize, const FULL: bool>(&self, base: usize) -> [__m512i; N] {
            let k: u16 = if self.lanes >= LANES {
                !0
            } else {
                (1 << self.lanes) - 1
            };
            let last = base + (N - 1) * self.step + self.far + self.lanes;
            assert!(last <= self.ring.len(), "depthwise window outside the ring");
            let pairs = self.toff.len();
            assert!(
                pairs == 0 || (pairs - 1) * self.c + self.lanes <= self.wt.len(),
                "depthwise weights outside the taps"
            );
            assert!(!FULL || self.lanes == LANES, "a full block has 16 lanes");
            let (p0, w0) = (self.ring.as_ptr() as *const i32, self.wt.as_ptr());
            let mut acc = [_mm512_setzero_si512(); N];
            for (t, &to) in self.toff.iter().enumerate() {
                // SAFETY: within the weights (checked above), masked to `lanes` values
                // unless all 16 are in; likewise the inputs, up to `last`.
                unsafe {
                    let at = w0.add(t * self.c);
                    let w = if FULL {
                        _mm512_loadu_si512(at as *const _)
                    } else {
                        _mm512_maskz_loadu_epi32(k, at)
                    };
                    for (p, acc) in acc.iter_mut().enumerate() {
                        let at = p0.add(base + p * self.step + to);
                        let xv = if FULL {
                            _mm512_loadu_si512(at as *const _)
                        } else {
                            _mm512_maskz_loadu_epi32(k, at)
                        };
                        *acc = _mm512_dpwssd_epi32(*acc, xv, w);
                    }
                }
            }
            acc
        }
    }

    /// Pixels per group in [`rows_avx2`] (which packs a group's bytes four vectors at a
    /// time) and [`rows_vnni`].
    const P: usize = 4;
    const _: () = assert!(P == 4);

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
