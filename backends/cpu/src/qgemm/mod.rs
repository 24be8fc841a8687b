//! Integer GEMM: `u8 x i8 -> i32` with weights packed once and activations read in place,
//! requantized to `u8` in the same pass.
//!
//! **Activations are bytes.** Inside the delegate every 8-bit activation is stored as `u8`:
//! a `u8` tensor as is, an `i8` tensor biased by 128 (`q + 128`, with its zero point moved
//! by the same 128), so that one kernel serves both and every dot-product instruction can
//! take the activation as its unsigned operand (x86 `vpdpbusd` multiplies `u8 x i8`).
//!
//! **The product.** The ops compute `acc[m][n] = sum_k (a[m][k] - za) * w[k][n]`, with one
//! activation zero point `za` and symmetric constant weights (zero point 0, as ONNX Runtime
//! quantizes them). Expanded, `acc = sum_k a * w - za * colsum[n]`: the kernels form only
//! the raw dot products, and `bias - za * colsum` is one per-column offset folded at init.
//!
//! **Rows come through pointers.** A tile of [`MR_MAX`] or fewer output rows reads, for
//! each of `taps` taps, one pointer per row to `c` contiguous bytes: a GEMM has one tap
//! (the row itself), an indirect convolution (IGEMM) has one per kernel position, pointing
//! at an NHWC input pixel or at a row of zero-point bytes (the padding, real zero). Nothing
//! is copied or packed per call. The kernels read `4 * ceil(c / 4)` bytes from each
//! pointer: buffers carry 4 bytes of slack, and the weights are zero past `c`.
//!
//! **Weights** are packed per panel of [`NR`] columns as `[tap][c / 4][NR][4]` bytes (the
//! shape `vpdpbusd`, `sdot` and `vpmaddwd` pairs all want), once at compile: the packing
//! goes into the blob like the f32 panels (see `prepack.rs`).
//!
//! **Requantization** is in f32, per column: `y = zp + round_half_even((acc + offset) *
//! scale)`, clamped to the output's range narrowed by a fused Relu or Clip; an optional second
//! stage applies a following QDQ bias Add exactly as the graph writes it (see [`Stage2`]).
//! The reference rounds once from an f32 result; the integer path may land one step apart
//! at a half step, the quantized conformance tolerance.

pub(crate) mod kernels;

use crate::prepack::Panel;

pub use kernels::{QKernel, QKernelId};

/// Columns of a weight panel (and of every kernel's tile).
pub const NR: usize = 16;
/// The most rows of any kernel's tile.
pub const MR_MAX: usize = 8;
/// Taps handed to one kernel call; more are accumulated over several calls.
pub const TAPS_PER_CALL: usize = 32;
/// Bytes of slack every activation buffer carries past its end, for the 4-byte reads.
pub const SLACK: usize = 4;

/// `c` rounded up to the packing granularity (a multiple of four).
pub fn padded_c(c: usize) -> usize {
    c.div_ceil(4) * 4
}

/// Packed weights of one GEMM (or one convolution group): `taps x c` rows by `n` columns.
#[derive(Clone, Debug)]
pub struct PackedWeights {
    taps: usize,
    c: usize,
    n: usize,
    /// `ceil(n / NR)` panels of `taps * padded_c(c) * NR` bytes, held in f32 words so that
    /// a packing travels in the blob like the f32 ones (and, from a blob the host
    /// retains, is read in place: see `prepack.rs`).
    words: Panel,
    col_sums: Vec<i32>,
}

impl PackedWeights {
    /// The packed size in f32 words of `taps x c` by `n`.
    pub fn words(taps: usize, c: usize, n: usize) -> usize {
        (n.div_ceil(NR) * taps * padded_c(c) * NR).div_ceil(4)
    }

    /// Packs into `dst` (of [`PackedWeights::words`] words, zeroed) the weights whose
    /// element at (tap, channel, column) is `w(t, c, n)`.
    pub fn fill(
        dst: &mut [f32],
        taps: usize,
        c: usize,
        n: usize,
        w: impl Fn(usize, usize, usize) -> i8,
    ) {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let cp = padded_c(c);
        let panel = taps * cp * NR;
        for j in 0..n {
            let (p, col) = (j / NR, j % NR);
            for t in 0..taps {
                for ch in 0..c {
                    let at = p * panel + (t * cp + (ch & !3)) * NR + col * 4 + (ch & 3);
                    bytes[at] = w(t, ch, j) as u8;
                }
            }
        }
    }

    /// Wraps a packing made by [`PackedWeights::fill`] (here or at compile), computing
    /// the column sums from it.
    pub fn from_words(taps: usize, c: usize, n: usize, words: Vec<f32>) -> PackedWeights {
        Self::from_panel(taps, c, n, Panel::Owned(words))
    }

    /// As [`PackedWeights::from_words`], for a packing owned or read in place.
    pub(crate) fn from_panel(taps: usize, c: usize, n: usize, words: Panel) -> PackedWeights {
        let mut col_sums = vec![0i32; n];
        {
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            let cp = padded_c(c);
            let panel = taps * cp * NR;
            for (j, sum) in col_sums.iter_mut().enumerate() {
                let (p, col) = (j / NR, j % NR);
                for blk in 0..taps * cp / 4 {
                    for i in 0..4 {
                        *sum += bytes[p * panel + blk * NR * 4 + col * 4 + i] as i8 as i32;
                    }
                }
            }
        }
        PackedWeights {
            taps,
            c,
            n,
            words,
            col_sums,
        }
    }

    /// Packs directly (tests, benches).
    pub fn pack(
        taps: usize,
        c: usize,
        n: usize,
        w: impl Fn(usize, usize, usize) -> i8,
    ) -> PackedWeights {
        let mut words = vec![0.0; Self::words(taps, c, n)];
        Self::fill(&mut words, taps, c, n, w);
        Self::from_words(taps, c, n, words)
    }

    pub fn taps(&self) -> usize {
        self.taps
    }

    pub fn c(&self) -> usize {
        self.c
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// `sum` over taps and channels of each column.
    pub fn col_sums(&self) -> &[i32] {
        &self.col_sums
    }

    fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }

    fn panel(&self, p: usize) -> &[i8] {
        let len = self.taps * padded_c(self.c) * NR;
        let bytes: &[i8] = bytemuck::cast_slice(&self.words);
        &bytes[p * len..(p + 1) * len]
    }
}

/// A following `DequantizeLinear -> Add(constant bias) -> QuantizeLinear`, applied to the
/// stored value `y1` of the first stage exactly as the reference computes it: `(y1 - z1) *
/// s1` in f32, plus the f32 bias, divided by `s2`, rounded half to even, plus `z2`,
/// saturated. (ONNX Runtime fuses the same MatMul + bias form.)
#[derive(Clone, Debug)]
pub struct Stage2 {
    /// The first stage's scale and (stored, biased) zero point.
    pub s1: f32,
    pub z1: i32,
    /// Per column, the dequantized bias.
    pub bias: Vec<f32>,
    pub s2: f32,
    /// The output's stored zero point and range.
    pub z2: i32,
    pub lo: i32,
    pub hi: i32,
}

/// How accumulators become stored bytes, per output column.
#[derive(Clone, Debug)]
pub struct QOut {
    /// `bias - za * colsum` per column.
    pub offset: Vec<i32>,
    /// `x_scale * w_scale / y_scale` per column; finite (an overflowing ratio is stored
    /// as `f32::MAX`: every non-zero accumulator then saturates, as the reference does).
    pub scale: Vec<f32>,
    /// The stored (biased) output zero point.
    pub zp: i32,
    /// The clamp in stored values: the dtype's range narrowed by a fused Relu or Clip.
    pub lo: i32,
    pub hi: i32,
    pub stage2: Option<Stage2>,
}

impl QOut {
    /// Bytes of the per-column tables (for the delegate's memory report).
    pub fn capacity_bytes(&self) -> usize {
        let stage2 = self.stage2.as_ref().map_or(0, |s| s.bias.capacity());
        self.offset.capacity() * size_of::<i32>()
            + (self.scale.capacity() + stage2) * size_of::<f32>()
    }

    /// The stored value of column `j` for the raw dot product `acc`.
    #[inline(always)]
    pub fn finish(&self, acc: i32, j: usize) -> u8 {
        let y = requant(
            acc.wrapping_add(self.offset[j]),
            self.scale[j],
            self.zp as f32,
            self.lo as f32,
            self.hi as f32,
        );
        match &self.stage2 {
            None => to_byte(y),
            Some(s) => s.apply(y, j),
        }
    }
}

/// `x` rounded half to even, for `|x| <= 2^22` (the callers clamp first): the add and
/// subtract of 1.5 * 2^23, which vectorizes without SSE4.1's `roundps`.
#[inline(always)]
pub(crate) fn round_even_small(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC) - MAGIC
}

/// `clamp(zp + round_half_even(acc * scale), lo, hi)` as an integral f32. Branch-free and
/// NaN-free (`scale` is finite, see [`QOut::scale`]), so the callers' loops vectorize.
#[inline(always)]
pub(crate) fn requant(acc: i32, scale: f32, zp: f32, lo: f32, hi: f32) -> f32 {
    let v = clamp(acc as f32 * scale, -4_194_304.0, 4_194_304.0);
    clamp(round_even_small(v) + zp, lo, hi)
}

/// `min(max(x, lo), hi)` for a non-NaN `x`, written as compares and selects: they compile
/// to bare `maxps`/`minps` (`f32::clamp` and `f32::max` also order NaN, which costs
/// compare-and-blend instructions in every lane).
#[inline(always)]
pub(crate) fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x > lo { x } else { lo };
    if x < hi {
        x
    } else {
        hi
    }
}

/// An integral f32 in `[0, 255]` (a clamped result of [`requant`]) as a byte.
#[inline(always)]
pub(crate) fn to_byte(y: f32) -> u8 {
    debug_assert!((0.0..=255.0).contains(&y) && y.fract() == 0.0);
    // For an integer `0 <= y < 2^23`, `y + 2^23` has exponent 23 and mantissa `y`: its low
    // bits are `y`. Plain bit operations, so the conversion vectorizes (an `as` cast
    // checks for NaN and saturates lane by lane).
    (y + 8_388_608.0).to_bits() as u8
}

impl Stage2 {
    /// The second stage of the stored first-stage value `y1` (an integral f32).
    #[inline(always)]
    pub(crate) fn apply(&self, y1: f32, j: usize) -> u8 {
        let f = (y1 - self.z1 as f32) * self.s1 + self.bias[j];
        let x = clamp(f / self.s2, -4_194_304.0, 4_194_304.0);
        to_byte(clamp(
            round_even_small(x) + self.z2 as f32,
            self.lo as f32,
            self.hi as f32,
        ))
    }
}

/// Where a GEMM's rows are read.
#[derive(Clone, Copy, Debug)]
pub enum ARows<'a> {
    /// Row `r` is `c` bytes at `r * stride` of `data` (one tap).
    Strided { data: &'a [u8], stride: usize },
    /// Row `r`'s tap `t` is at offset `table[r * taps + t]` of `data`, or the zero row
    /// when that is [`PAD`].
    Indirect {
        data: &'a [u8],
        table: &'a Indirection,
        zero: &'a [u8],
    },
}

/// An indirection table and its largest offset, found once when it is built so that each
/// product checks its reads in constant time.
#[derive(Clone, Debug)]
pub struct Indirection {
    offsets: Vec<u32>,
    max: Option<u32>,
}

impl Indirection {
    pub fn new(offsets: Vec<u32>) -> Indirection {
        let max = offsets.iter().copied().filter(|&o| o != PAD).max();
        Indirection { offsets, max }
    }

    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// Bytes the table allocated (for the delegate's memory report).
    pub fn capacity_bytes(&self) -> usize {
        self.offsets.capacity() * size_of::<u32>()
    }
}

/// An indirection entry that reads the zero row (padding).
pub const PAD: u32 = u32::MAX;

/// One integer GEMM: `m` rows of `a` against `w`, written as bytes at `out[r * ldo + j]`,
/// or, with `ints`, as exact i32 values where [`IntOut`] places them (then `out` and `ldo`
/// are not read).
pub struct QGemm<'a> {
    pub m: usize,
    pub a: ARows<'a>,
    pub w: &'a PackedWeights,
    pub out: &'a QOut,
    pub ldo: usize,
    pub ints: Option<&'a IntOut<'a>>,
}

/// The exact i32 result of an integer product with its zero points taken away
/// (MatMulInteger, ConvInteger), instead of a requantized byte.
///
/// With stored operands `a` (bytes) and `w` (i8) and stored zero points `za` (per row)
/// and `zw` (per column), `sum_k (a - za) * (w - zw)` expands to `acc - za * ccol[j] -
/// zw[j] * rowsum[r]` where `acc` is the kernels' raw dot product, `rowsum` the sum of the
/// row's bytes over every tap (padding taps read the zero-point row, which the expansion
/// cancels) and `ccol[j] = colsum[j] - K * zw[j]`, fixed at init. Every step wraps at 32
/// bits, and the kernels never saturate (see `kernels.rs`), so the result is the exact
/// sum wrapped to i32, as the reference computes it.
#[derive(Clone, Copy, Debug)]
pub struct IntOut<'a> {
    /// Per row `r`, the stored zero point `za[r % za.len()]` (one value, or one per row
    /// of a matrix that the GEMM's rows repeat).
    pub za: &'a [i32],
    /// Per column: `colsum - K * zw`.
    pub ccol: &'a [i32],
    /// Per column: the stored weight zero point; when all are 0 no row sums are formed.
    pub zw: &'a [i32],
    pub row_sums: bool,
    pub layout: IntLayout,
}

/// Where element `(r, j)` of an i32 product goes, in i32 units: `(r / block) *
/// block_stride + (r % block) * row_stride + j * col_stride`. A matrix product is
/// row-major (`block` covers every row); a convolution's rows are NHWC pixels written to
/// an NCHW output (`block` the output plane, `col_stride` the plane too).
#[derive(Clone, Copy, Debug)]
pub struct IntLayout {
    pub block: usize,
    pub block_stride: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl IntLayout {
    #[inline(always)]
    pub fn at(&self, r: usize, j: usize) -> usize {
        (r / self.block) * self.block_stride
            + (r % self.block) * self.row_stride
            + j * self.col_stride
    }
}

/// The output pointer, shared by tasks that write disjoint tiles.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub *mut u8);
// SAFETY: tasks write disjoint tiles (see `QGemm::run_tiles`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

impl QGemm<'_> {
    /// Checks that every read and write stays inside its buffer; panics otherwise (a bug
    /// in lowering, never input data).
    fn check(&self, out_len: usize) {
        let (c, taps, n) = (self.w.c, self.w.taps, self.w.n);
        let reach = padded_c(c);
        if self.m == 0 || n == 0 {
            return;
        }
        match self.ints {
            // The placement grows with both `r` and `j`: the last element is the furthest.
            Some(io) => {
                assert!(io.layout.block > 0, "an i32 layout has rows");
                assert!(
                    (io.layout.at(self.m - 1, n - 1) + 1) * 4 <= out_len,
                    "qgemm i32 output too short"
                );
                assert!(
                    !io.za.is_empty() && io.ccol.len() >= n && io.zw.len() >= n,
                    "qgemm zero-point tables too short"
                );
            }
            None => assert!(
                (self.m - 1) * self.ldo + n <= out_len,
                "qgemm output too short"
            ),
        }
        match self.a {
            ARows::Strided { data, stride } => {
                assert_eq!(taps, 1, "a strided GEMM has one tap");
                assert!(
                    (self.m - 1) * stride + reach <= data.len(),
                    "qgemm rows too short"
                );
            }
            ARows::Indirect { data, table, zero } => {
                assert!(
                    table.offsets.len() >= self.m * taps,
                    "indirection table too short"
                );
                assert!(zero.len() >= reach, "zero row too short");
                if let Some(o) = table.max {
                    assert!(o as usize + reach <= data.len(), "indirect rows too short");
                }
            }
        }
    }

    /// Runs the whole product on `kernel` on the calling thread (tests and benches);
    /// panics if a buffer is too short for the product.
    pub fn run_on_caller(&self, kernel: &QKernel, out: &mut [u8]) {
        self.check(out.len());
        let (rt, pt) = (self.m.div_ceil(kernel.mr()), self.w.panels());
        // SAFETY: bounds checked above; one task writes everything.
        unsafe { kernel.tiles(self, 0..rt, 0..pt, OutPtr(out.as_mut_ptr())) };
    }

    /// Runs the whole product on `kernel`, split over `pool`'s threads when large enough.
    pub(crate) fn run(&self, kernel: &QKernel, pool: &crate::pool::Pool, out: &mut [u8]) {
        self.check(out.len());
        let mr = kernel.mr();
        let (rt, pt) = (self.m.div_ceil(mr), self.w.panels());
        let work = self.m * self.w.n * self.w.taps * self.w.c;
        let tasks = (crate::gemm::TASKS_PER_THREAD * pool.threads())
            .min(work / (256 * 1024))
            .min(rt * pt);
        let ptr = OutPtr(out.as_mut_ptr());
        if tasks <= 1 {
            // SAFETY: bounds checked above; one task writes everything.
            unsafe { kernel.tiles(self, 0..rt, 0..pt, ptr) };
            return;
        }
        let row_blocks = rt.min(tasks);
        let col_blocks = tasks.div_ceil(row_blocks).min(pt);
        let (rb, cb) = (rt.div_ceil(row_blocks), pt.div_ceil(col_blocks));
        pool.run(row_blocks * col_blocks, &|task, _| {
            let (r, p) = (task / col_blocks, task % col_blocks);
            let rows = (r * rb).min(rt)..((r + 1) * rb).min(rt);
            let panels = (p * cb).min(pt)..((p + 1) * cb).min(pt);
            // SAFETY: bounds checked above; tasks own disjoint tiles.
            unsafe { kernel.tiles(self, rows, panels, ptr) };
        });
    }
}

/// The same computation in plain scalar code, the kernels' oracle in tests: row `r`, tap
/// `t`, channel `ch` of the activation is `a(r, t, ch)` (already `u8`).
pub fn qgemm_reference(
    m: usize,
    w: &PackedWeights,
    w_at: impl Fn(usize, usize, usize) -> i8,
    a: impl Fn(usize, usize, usize) -> u8,
    za: i32,
    out: &QOut,
) -> Vec<u8> {
    let n = w.n;
    let mut y = vec![0u8; m * n];
    for r in 0..m {
        for j in 0..n {
            let mut acc = 0i32;
            for t in 0..w.taps {
                for ch in 0..w.c {
                    acc += (a(r, t, ch) as i32 - za) * w_at(t, ch, j) as i32;
                }
            }
            // `finish` takes the raw product and subtracts `za * colsum` itself (through
            // `offset`), so hand it the raw product.
            y[r * n + j] = out.finish(acc.wrapping_add(za.wrapping_mul(w.col_sums[j])), j);
        }
    }
    y
}
