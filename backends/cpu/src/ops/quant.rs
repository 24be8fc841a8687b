//! Quantized ops on byte tensors: standalone QuantizeLinear / DequantizeLinear (the
//! reference's arithmetic, at the partition's int8 edges), the copy of integer subgraph
//! inputs into the arena, the element-wise Add/Mul of two int8 tensors, and (in
//! `linear.rs`) the integer Conv / MatMul / Gemm of a QDQ group.
//!
//! Every 8-bit tensor is stored as `u8` bytes, an `i8` one biased by 128 (see
//! `crate::qgemm`); [`stored_bias`] gives the bias of a dtype.

pub(crate) mod integer;
pub(crate) mod linear;

use baton_delegate_api::ir::DType;
use baton_delegate_api::shape::PoolGeometry;

use super::elementwise::split_out;
use super::layout::{nchw_pixels, nchw_to_nhwc, nhwc_to_nchw, pixels_to_nchw};
use super::{Sources, Src};
use crate::gemm::Isa;
use crate::pool::Pool;
use crate::qgemm::{clamp, to_byte};
use crate::quant::{int_range, QParams, POOL_ROW};

/// Defines `$name(isa, args..)`, which runs `$body(args..)` compiled for `isa`: the body
/// (`#[inline(always)]`) is inlined into a function with the ISA's features enabled, so
/// its loops vectorize for that width (as `math::map` does).
macro_rules! simd_fn {
    ($name:ident, ($($arg:ident: $ty:ty),*), $body:path) => {
        fn $name(isa: Isa, $($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
                fn avx512($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) {
                    $body($($arg),*)
                }
                match isa {
                    // SAFETY: an Avx512F kernel is only selected after AVX-512F was
                    // detected (such CPUs have AVX-512BW/VL and AVX2 too).
                    Isa::Avx512F => return unsafe { avx512($($arg),*) },
                    // SAFETY: likewise for AVX2 and FMA.
                    Isa::Avx2Fma => return unsafe { avx2($($arg),*) },
                    _ => {}
                }
            }
            let _ = isa;
            $body($($arg),*)
        }
    };
}

// Each runs over the output elements `start..start + out.len()` (`out` holds just those),
// so that the element-wise forms split among threads (see `split_out`).
simd_fn!(dequantize, (op: &DequantizeOp, s: &Sources<'_>, start: usize, out: &mut [f32]), DequantizeOp::run_inner);
simd_fn!(quantize_all, (op: &QuantizeOp, s: &Sources<'_>, start: usize, out: &mut [u8]), QuantizeOp::run_inner);
simd_fn!(binary, (op: &QBinaryOp, s: &Sources<'_>, start: usize, out: &mut [u8]), QBinaryOp::run_inner);

/// The most floats of a block of pixels that a layout-changing QuantizeLinear or
/// DequantizeLinear holds on its stack (16 KiB; tensors of more channels than this per
/// pixel take the element-wise paths).
const BLOCK: usize = 4096;

/// Whether the 8x8 tile transposes run for `isa` (see `layout.rs`).
fn tiles(isa: Isa) -> bool {
    matches!(isa, Isa::Avx2Fma | Isa::Avx512F)
}

/// `f(image, first, count, buf)` over blocks of whole pixels of the channels-last tensor
/// `l` (its first `n` elements), each at most [`BLOCK`] values and within one image,
/// with a buffer of [`BLOCK`] floats on the thread's stack; the pixels split among the
/// threads in contiguous parts when there are enough.
fn by_pixel_blocks(
    pool: &Pool,
    l: &Nhwc,
    n: usize,
    f: impl Fn(usize, usize, usize, &mut [f32; BLOCK]) + Sync,
) {
    let c = l.c.max(1);
    let pixels = n / c;
    let per_block = (BLOCK / c).max(1);
    let run = |p0: usize, p1: usize| {
        let mut buf = [0f32; BLOCK];
        let mut p = p0;
        while p < p1 {
            let (image, first) = (p / l.plane, p % l.plane);
            let count = (l.plane - first).min(p1 - p).min(per_block);
            f(image, first, count, &mut buf);
            p += count;
        }
    };
    let tasks = pool.threads().min(pixels);
    if n < 32 * 1024 || tasks < 2 {
        return run(0, pixels);
    }
    let per = pixels.div_ceil(tasks);
    pool.run(tasks, &|t, _| {
        run((t * per).min(pixels), ((t + 1) * per).min(pixels))
    });
}

/// [`quantize_stored`] (scale, stored zero point and range in `q`) of `x` in order into
/// `out`: 32 values a step with AVX2, the rest compiled for `isa`'s vectors.
fn quantize_run(isa: Isa, x: &[f32], q: (f32, i32, i32, i32), out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    let done = match tiles(isa) {
        // SAFETY: Avx2Fma and Avx512F are only selected after AVX2 was detected.
        true => unsafe { x86_quant::quantize(x, q, out) },
        false => 0,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    super::math::on_isa(
        isa,
        #[inline(always)]
        || {
            for (o, &v) in out[done..].iter_mut().zip(&x[done..]) {
                *o = quantize_stored(v, q.0, q.1, q.2, q.3);
            }
        },
    );
}

/// `(x - z) * s` of stored bytes in order, into `out`, compiled for `isa`'s vectors.
fn dequantize_run(isa: Isa, x: &[u8], (s, z): (f32, i32), out: &mut [f32]) {
    super::math::on_isa(
        isa,
        #[inline(always)]
        || {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = (v as i32 - z) as f32 * s;
            }
        },
    );
}

/// What is added to a value of `dtype` to store it as `u8`: 128 for `i8`, 0 for `u8`.
pub(crate) fn stored_bias(dtype: DType) -> i32 {
    if dtype == DType::I8 {
        128
    } else {
        0
    }
}

/// How per-axis parameters map onto a flat tensor viewed as `[outer, dim, inner]`.
#[derive(Clone, Debug)]
pub(crate) struct AxisLayout {
    pub dim: usize,
    pub inner: usize,
}

impl AxisLayout {
    /// The layout of `params` over a tensor of `shape`.
    pub fn new(params: &QParams, shape: &[usize]) -> AxisLayout {
        if params.scales.len() == 1 {
            return AxisLayout { dim: 1, inner: 1 };
        }
        AxisLayout {
            dim: shape[params.axis],
            inner: shape[params.axis + 1..].iter().product(),
        }
    }

    pub fn which(&self, k: usize) -> usize {
        (k / self.inner) % self.dim
    }
}

/// A rank-4 tensor held channels-last: `(batch, channels, plane)` of its NCHW shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Nhwc {
    pub batch: usize,
    pub c: usize,
    pub plane: usize,
}

impl Nhwc {
    /// The NHWC index of NCHW index `k`.
    #[inline]
    fn at(&self, k: usize) -> usize {
        let (b, rest) = (k / (self.c * self.plane), k % (self.c * self.plane));
        let (ch, p) = (rest / self.plane, rest % self.plane);
        (b * self.plane + p) * self.c + ch
    }
}

/// `x` rounded half to even, for `|x| < 2^22` (larger values are clamped there first:
/// every caller saturates them to 8 bits anyway); NaN stays NaN. Written as the
/// add-and-subtract of 1.5 * 2^23 so that it vectorizes without SSE4.1's `roundps`.
#[inline(always)]
pub(crate) fn round_even(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    let x = x.clamp(-4_194_304.0, 4_194_304.0);
    (x + MAGIC) - MAGIC
}

/// QuantizeLinear of one value to a stored byte: divide in f32, round half to even, add
/// the zero point, saturate (NaN gives the zero point), as the reference does.
#[inline(always)]
pub(crate) fn quantize_stored(v: f32, scale: f32, zp: i32, lo: i32, hi: i32) -> u8 {
    // In f32 throughout, NaN replaced by 0 with a select, so that the loops vectorize (an
    // `as i32` checks for NaN lane by lane); every value is an exact small integer.
    let r = round_even(v / scale);
    let r = if r.is_nan() { 0.0 } else { r };
    to_byte(clamp(r + zp as f32, lo as f32, hi as f32))
}

/// One value quantized as QuantizeLinear does, in the dtype's own range (clamp bounds).
pub(crate) fn quantize(v: f32, scale: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    ((round_even(v / scale) as i32) + zp).clamp(lo, hi)
}

/// DequantizeLinear: `(x - zp) * scale` in f32 (exact for 8-bit `x`: the product of a
/// 9-bit integer and an f32 rounds once, as the reference's f64 product rounded to f32).
#[derive(Debug)]
pub(crate) struct DequantizeOp {
    pub x: DqInput,
    pub params: QParams,
    pub layout: AxisLayout,
}

/// What a DequantizeLinear reads.
#[derive(Debug)]
pub(crate) enum DqInput {
    /// An 8-bit tensor computed at run time, stored as bytes, channels-last or not.
    Bytes {
        src: Src,
        len: usize,
        nhwc: Option<Nhwc>,
    },
    /// An i32 tensor computed at run time, its bits in a word each.
    Words { src: Src, len: usize },
    /// A constant, kept as integers: an i32 bias may not be exact in f32.
    Const(Vec<i32>),
}

impl DequantizeOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        match &self.x {
            // Element by element in order: split among the threads.
            DqInput::Bytes {
                len, nhwc: None, ..
            } if self.params.per_tensor().is_some() => {
                let n = (*len).min(out.len());
                split_out(pool, &mut out[..n], 1, |start, out| {
                    dequantize(isa, self, sources, start, out)
                })
            }
            // Channels-last back to NCHW: in blocks of pixels, dequantized in order and
            // moved while in cache, with the 8x8 tiles where they run.
            DqInput::Bytes {
                src,
                len,
                nhwc: Some(l),
            } if l.c <= BLOCK && tiles(isa) && self.params.per_tensor().is_some() => {
                let (s, z) = self.params.per_tensor().expect("checked");
                let z = z + stored_bias(self.params.dtype);
                let x = &sources.bytes(*src)[..*len];
                let n = (*len).min(out.len());
                let parts = crate::pool::Disjoint::new(&mut out[..n]);
                by_pixel_blocks(pool, l, n, |image, first, count, buf| {
                    let at = (image * l.plane + first) * l.c;
                    let buf = &mut buf[..count * l.c];
                    dequantize_run(isa, &x[at..at + count * l.c], (s, z), buf);
                    // SAFETY: these pixels are this block's alone.
                    unsafe {
                        pixels_to_nchw(isa, buf, (l.c, l.plane), (image, first, count), &parts)
                    };
                });
            }
            // Channels-last back to NCHW: in whole channel planes.
            DqInput::Bytes {
                len, nhwc: Some(l), ..
            } if self.params.per_tensor().is_some() => {
                let n = (*len).min(out.len());
                split_out(pool, &mut out[..n], l.plane, |start, out| {
                    dequantize(isa, self, sources, start, out)
                })
            }
            _ => dequantize(isa, self, sources, 0, out),
        }
    }

    /// As `run`, over the output elements `start..start + out.len()`; only the per-tensor
    /// forms are handed a part (`start > 0`; channels-last: whole channel planes).
    #[inline(always)]
    fn run_inner(&self, sources: &Sources<'_>, start: usize, out: &mut [f32]) {
        let p = &self.params;
        match &self.x {
            DqInput::Bytes { src, len, nhwc } => {
                let x = &sources.bytes(*src)[..*len];
                let bias = stored_bias(p.dtype);
                match (nhwc, p.per_tensor()) {
                    (None, Some((s, z))) => {
                        let z = z + bias;
                        for (o, &v) in out.iter_mut().zip(&x[start..]) {
                            *o = (v as i32 - z) as f32 * s;
                        }
                    }
                    // Channels-last back to NCHW while dequantizing (output elements
                    // `start..`, whole channel planes).
                    (Some(l), Some((s, z))) => {
                        let z = z + bias;
                        nhwc_to_nchw(x, (l.c, l.plane), start, out, |v| (v as i32 - z) as f32 * s)
                    }
                    _ => {
                        for (k, o) in out.iter_mut().enumerate() {
                            let i = self.layout.which(k);
                            let v = x[nhwc.map_or(k, |l| l.at(k))] as i32 - bias;
                            *o = ((v - p.zero_points[i]) as f64 * p.scales[i] as f64) as f32;
                        }
                    }
                }
            }
            // As the reference: the difference exact in f64, the product rounded once.
            DqInput::Words { src, len } => {
                let x = &sources.get(*src)[..*len];
                for (k, (o, &v)) in out.iter_mut().zip(x).enumerate() {
                    let i = self.layout.which(k);
                    let v = f64::from(v.to_bits() as i32);
                    *o = ((v - p.zero_points[i] as f64) * p.scales[i] as f64) as f32;
                }
            }
            DqInput::Const(x) => {
                for (k, (o, &v)) in out.iter_mut().zip(x).enumerate() {
                    let i = self.layout.which(k);
                    *o = ((v as f64 - p.zero_points[i] as f64) * p.scales[i] as f64) as f32;
                }
            }
        }
    }
}

/// QuantizeLinear of an f32 tensor (NCHW) into stored bytes, NCHW or channels-last; of
/// an i32 tensor (its bits in a word) converted to f32 first, as the reference divides
/// (an f16 one is widened to f32 before the op, see `exec/lower/half.rs`).
#[derive(Debug)]
pub(crate) struct QuantizeOp {
    pub x: Src,
    /// Whether `x` is i32.
    pub int_input: bool,
    pub params: QParams,
    pub layout: AxisLayout,
    /// The result is held NHWC (see `exec/lower/quant.rs`).
    pub nhwc: Option<Nhwc>,
}

impl QuantizeOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8], isa: Isa, pool: &Pool) {
        #[cfg(target_arch = "x86_64")]
        if let (Some((s, z)), None, false, Isa::Avx2Fma | Isa::Avx512F) =
            (self.params.per_tensor(), self.nhwc, self.int_input, isa)
        {
            // An f32 tensor in order: 32 values a step by hand, the rest as below. (Into
            // channels-last, the division's throughput bounds the map already: a model's
            // 3x224x224 image took 69-71 us either way.)
            let x = sources.get(self.x);
            let n = x.len().min(out.len());
            let bias = stored_bias(self.params.dtype);
            let (lo, hi) = int_range(self.params.dtype);
            let q = (s, z + bias, lo + bias, hi + bias);
            return split_out(pool, &mut out[..n], 1, |start, out| {
                // SAFETY: Avx2Fma and Avx512F are only selected after AVX2 was detected.
                let done = unsafe { x86_quant::quantize(&x[start..][..out.len()], q, out) };
                quantize_all(isa, self, sources, start + done, &mut out[done..])
            });
        }
        #[cfg(target_arch = "x86_64")]
        if let (Some((s, z)), Some(l), false, Isa::Avx2Fma | Isa::Avx512F) =
            (self.params.per_tensor(), self.nhwc, self.int_input, isa)
        {
            if l.c == 3 {
                // A 3-channel image into NHWC (a model's RGB input): see `quantize_nchw3`.
                let x = sources.get(self.x);
                let n = (l.batch * 3 * l.plane).min(out.len()).min(x.len());
                let bias = stored_bias(self.params.dtype);
                let (lo, hi) = int_range(self.params.dtype);
                let q = (s, z + bias, lo + bias, hi + bias);
                return split_out(pool, &mut out[..n], 3, |start, out| {
                    // SAFETY: Avx2Fma and Avx512F are only selected after AVX2 was detected.
                    unsafe { x86_quant::quantize_nchw3(x, l.plane, start / 3, q, out) }
                });
            }
        }
        if let (Some((s, z)), Some(l), false) =
            (self.params.per_tensor(), self.nhwc, self.int_input)
        {
            if l.c <= BLOCK {
                // Into NHWC in blocks of pixels: moved channels-last (by the 8x8 tiles
                // where they run), then quantized in order (32 values a step with AVX2;
                // value by value through the index map, a 64x80x80 map took 400 us).
                let x = sources.get(self.x);
                let n = (l.batch * l.c * l.plane).min(out.len()).min(x.len());
                let bias = stored_bias(self.params.dtype);
                let (lo, hi) = int_range(self.params.dtype);
                let q = (s, z + bias, lo + bias, hi + bias);
                let parts = crate::pool::Disjoint::new(&mut out[..n]);
                return by_pixel_blocks(pool, &l, n, |image, first, count, buf| {
                    let buf = &mut buf[..count * l.c];
                    nchw_pixels(isa, x, (l.c, l.plane), (image, first, count), buf);
                    let at = (image * l.plane + first) * l.c;
                    // SAFETY: these pixels are this block's alone.
                    let dst = unsafe { parts.range(at, count * l.c) };
                    quantize_run(isa, buf, q, dst);
                });
            }
        }
        if self.params.per_tensor().is_some() {
            // Element by element in order, or pixel by pixel into NHWC: split among the
            // threads (in whole pixels).
            let n = sources.get(self.x).len().min(out.len());
            let pixel = self.nhwc.map_or(1, |l| l.c);
            return split_out(pool, &mut out[..n], pixel, |start, out| {
                quantize_all(isa, self, sources, start, out)
            });
        }
        quantize_all(isa, self, sources, 0, out)
    }

    /// As `run`, over the output elements `start..start + out.len()`; only the
    /// per-tensor forms are handed a part (`start > 0`; NHWC: whole pixels).
    #[inline(always)]
    fn run_inner(&self, sources: &Sources<'_>, start: usize, out: &mut [u8]) {
        match self.int_input {
            true => self.quantize_from::<true>(sources, start, out),
            false => self.quantize_from::<false>(sources, start, out),
        }
    }

    /// The loops, compiled once for f32 and once for i32 words (`I32`), so that the f32
    /// path reads its values as they are.
    #[inline(always)]
    fn quantize_from<const I32: bool>(&self, sources: &Sources<'_>, start: usize, out: &mut [u8]) {
        let value = |v: f32| if I32 { v.to_bits() as i32 as f32 } else { v };
        let x = sources.get(self.x);
        let p = &self.params;
        let bias = stored_bias(p.dtype);
        let (lo, hi) = int_range(p.dtype);
        let (lo, hi) = (lo + bias, hi + bias);
        match (p.per_tensor(), self.nhwc) {
            (Some((s, z)), None) => {
                for (o, &v) in out.iter_mut().zip(&x[start..]) {
                    *o = quantize_stored(value(v), s, z + bias, lo, hi);
                }
            }
            // NCHW in, NHWC out (the output elements `start..`, whole pixels).
            (Some((s, z)), Some(l)) => {
                let q = |v: f32| quantize_stored(value(v), s, z + bias, lo, hi);
                nchw_to_nhwc(x, (l.c, l.plane), start, out, q)
            }
            (None, nhwc) => {
                for (k, &v) in x.iter().enumerate().take(out.len()) {
                    let i = self.layout.which(k);
                    let at = nhwc.map_or(k, |l| l.at(k));
                    let (s, z) = (p.scales[i], p.zero_points[i] + bias);
                    out[at] = quantize_stored(value(v), s, z, lo, hi);
                }
            }
        }
    }
}

/// Copies an 8-bit subgraph input into the arena as stored bytes.
#[derive(Debug)]
pub(crate) struct ByteInputOp {
    pub input: usize,
    pub dtype: DType,
}

impl ByteInputOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8]) {
        let bytes = sources.input_bytes(self.input);
        let flip = if self.dtype == DType::I8 { 0x80 } else { 0 };
        for (o, &b) in out.iter_mut().zip(bytes) {
            *o = b ^ flip;
        }
    }
}

/// A table of 256 stored bytes applied to stored bytes: a QDQ chain of float ops of one
/// int8 tensor (`crate::quant::QLutGroup`), its table computed at init. Layout-blind, as
/// [`QBinaryOp`].
#[derive(Debug)]
pub(crate) struct QLutOp {
    pub x: Src,
    pub len: usize,
    pub lut: Box<[u8; 256]>,
}

impl QLutOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8], isa: Isa, pool: &Pool) {
        let x = &sources.bytes(self.x)[..self.len];
        split_out(pool, &mut out[..self.len], 1, |start, out| {
            lookup(isa, &self.lut, &x[start..start + out.len()], out)
        })
    }
}

/// A 2-D MaxPool of stored bytes (an i8 biased by 128 orders as its value, see
/// `crate::qgemm`), then `lut` where the pool's QuantizeLinear differs from its input's
/// parameters (ONNX Runtime's quantizer gives both the same). Separable: each output row
/// first takes the max of its window's input rows into a row of the stack (one run of
/// bytes when the whole row fits), then each pixel the max of its window's columns of
/// that row: 10 taps for a 5x5 window instead of 25.
#[derive(Clone, Debug)]
pub(crate) struct QMaxPoolOp {
    x: Src,
    /// Images of `channels` interleaved channels: `N` held NHWC, or `N * C` held NCHW
    /// (each plane an image of one channel).
    images: usize,
    channels: usize,
    input: [usize; 2],
    output: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    pad_begin: [usize; 2],
    lut: Option<Box<[u8; 256]>>,
    /// The stored byte of a window with no tap on the input: the float pool's -inf
    /// through the float ops after it, quantized (0, the lowest value, without any).
    empty: u8,
    /// The output columns whose windows have no column on the input.
    empty_cols: Vec<usize>,
}

impl QMaxPoolOp {
    /// From the logical input shape `[N, C, H, W]` and the pool's geometry; `nhwc`: the
    /// input and the output held channels-last.
    pub fn new(
        x: Src,
        shape: &[usize],
        geom: &PoolGeometry,
        nhwc: bool,
        lut: Option<Box<[u8; 256]>>,
        empty: u8,
    ) -> QMaxPoolOp {
        let two = |v: &[usize]| [v[0], v[1]];
        let w = &geom.window;
        let (images, channels) = match nhwc {
            true => (shape[0], shape[1]),
            false => (shape[0] * shape[1], 1),
        };
        let mut op = QMaxPoolOp {
            x,
            images,
            channels,
            input: two(&shape[2..]),
            output: two(&geom.out_spatial),
            kernel: two(&w.kernel),
            strides: two(&w.strides),
            dilations: two(&w.dilations),
            pad_begin: two(&w.pad_begin),
            lut,
            empty,
            empty_cols: Vec::new(),
        };
        op.empty_cols = (0..op.output[1])
            .filter(|&ox| op.taps(1, ox).next().is_none())
            .collect();
        op
    }

    /// The input positions along `axis` of output position `o`'s window.
    fn taps(&self, axis: usize, o: usize) -> impl Iterator<Item = usize> + Clone {
        let start = (o * self.strides[axis]) as isize - self.pad_begin[axis] as isize;
        let (d, extent) = (self.dilations[axis] as isize, self.input[axis] as isize);
        (0..self.kernel[axis] as isize)
            .map(move |k| start + k * d)
            .filter(move |&i| i >= 0 && i < extent)
            .map(|i| i as usize)
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8], isa: Isa, pool: &Pool) {
        let ([ih, iw], [oh, ow], c) = (self.input, self.output, self.channels);
        let image = ih * iw * c;
        let x = &sources.bytes(self.x)[..self.images * image];
        let row = ow * c;
        split_out(
            pool,
            &mut out[..self.images * oh * row],
            row,
            |start, out| {
                let mut maxima = [0u8; POOL_ROW];
                for (r, o) in out.chunks_mut(row).enumerate() {
                    let (n, oy) = ((start / row + r) / oh, (start / row + r) % oh);
                    let x = &x[n * image..(n + 1) * image];
                    super::math::on_isa(
                        isa,
                        #[inline(always)]
                        || self.row(x, oy, &mut maxima, o),
                    );
                }
            },
        )
    }

    /// Output row `oy` of one image `x` into `o`.
    #[inline(always)]
    fn row(&self, x: &[u8], oy: usize, maxima: &mut [u8; POOL_ROW], o: &mut [u8]) {
        let (iw, c) = (self.input[1], self.channels);
        let rows = self.taps(0, oy);
        if rows.clone().next().is_none() {
            o.fill(self.empty);
            return;
        }
        // Channels per pass: as many as a row of maxima of `POOL_ROW` bytes holds (the
        // group's finder took only rows of at most that many pixels).
        let block = c.min(POOL_ROW / iw).max(1);
        for c0 in (0..c).step_by(block) {
            let width = block.min(c - c0);
            let maxima = &mut maxima[..iw * width];
            maxima.fill(0);
            let lines = rows.clone().map(|iy| &x[iy * iw * c..(iy + 1) * iw * c]);
            if width == c {
                max_of(maxima, lines);
                if self.strides[1] == 1 {
                    self.columns(maxima, o);
                    continue;
                }
            } else {
                for line in lines {
                    for (m, px) in maxima.chunks_exact_mut(width).zip(line.chunks_exact(c)) {
                        max_of(m, [&px[c0..c0 + width]]);
                    }
                }
            }
            for (ox, px) in o.chunks_exact_mut(c).enumerate() {
                let px = &mut px[c0..c0 + width];
                px.fill(0);
                let taps = self.taps(1, ox);
                let any = taps.clone().next().is_some();
                max_of(px, taps.map(|ix| &maxima[ix * width..(ix + 1) * width]));
                self.finish(px, any);
            }
        }
    }

    /// The window's columns of a row of `maxima` (all channels) into the output row `o`,
    /// at stride 1: each column tap is a run of bytes over the output pixels it reaches,
    /// so the pixels that every tap reaches take the max of all taps' runs at once (in
    /// registers), and the border pixels the runs of the taps that reach them.
    #[inline(always)]
    fn columns(&self, maxima: &[u8], o: &mut [u8]) {
        let (c, ow, iw) = (self.channels, self.output[1], self.input[1] as isize);
        o.fill(0);
        // Per tap: its offset and the output pixels `ox` with `0 <= ox + off < iw`.
        let reach = |k: usize| {
            let off = (k * self.dilations[1]) as isize - self.pad_begin[1] as isize;
            let lo = (-off).clamp(0, ow as isize) as usize;
            let hi = (iw - off).clamp(lo as isize, ow as isize) as usize;
            (off, lo, hi)
        };
        let taps = 0..self.kernel[1];
        let inner = taps
            .clone()
            .map(reach)
            .fold((0, ow), |(a, b), (_, lo, hi)| (a.max(lo), b.min(hi)));
        let (a, b) = (inner.0, inner.1.max(inner.0));
        let run = |off: isize, lo: usize, hi: usize| {
            let from = (lo as isize + off) as usize;
            &maxima[from * c..(from + hi - lo) * c]
        };
        // (None when the window is wider than the row.)
        if a < b {
            max_of(
                &mut o[a * c..b * c],
                taps.clone().map(reach).map(|(off, _, _)| run(off, a, b)),
            );
        }
        for (off, lo, hi) in taps.map(reach) {
            for (lo, hi) in [(lo, hi.min(a)), (lo.max(b), hi)] {
                if lo < hi {
                    max_of(&mut o[lo * c..hi * c], [run(off, lo, hi)]);
                }
            }
        }
        if let Some(lut) = &self.lut {
            o.iter_mut().for_each(|v| *v = lut[*v as usize]);
        }
        for &ox in &self.empty_cols {
            o[ox * c..(ox + 1) * c].fill(self.empty);
        }
    }

    /// A pixel's bytes after its maxima: through the table if there is one, or `empty`
    /// if its window has no tap on the input.
    #[inline(always)]
    fn finish(&self, px: &mut [u8], any: bool) {
        match (any, &self.lut) {
            (false, _) => px.fill(self.empty),
            (true, Some(lut)) => px.iter_mut().for_each(|v| *v = lut[*v as usize]),
            (true, None) => {}
        }
    }
}

/// `dst = max(dst, every one of srcs)` byte by byte (stored bytes order as their values),
/// each of at least `dst`'s length: 64 bytes at a time, up to eight sources at once, the
/// running maxima in registers (one store per 64 bytes for all eight, not one per source).
#[inline(always)]
fn max_of<'a>(dst: &mut [u8], srcs: impl IntoIterator<Item = &'a [u8]>) {
    let mut group: [&[u8]; 8] = [&[]; 8];
    let mut k = 0;
    for s in srcs {
        group[k] = s;
        k += 1;
        if k == group.len() {
            max_group(dst, &group);
            k = 0;
        }
    }
    if k > 0 {
        max_group(dst, &group[..k]);
    }
}

#[inline(always)]
fn max_group(dst: &mut [u8], srcs: &[&[u8]]) {
    let n = dst.len();
    let whole = n - n % 64;
    for (i, d) in dst[..whole].chunks_exact_mut(64).enumerate() {
        let mut m = [0u8; 64];
        m.copy_from_slice(d);
        for s in srcs {
            let s = &s[i * 64..i * 64 + 64];
            for j in 0..64 {
                m[j] = m[j].max(s[j]);
            }
        }
        d.copy_from_slice(&m);
    }
    for s in srcs {
        for (d, &v) in dst[whole..].iter_mut().zip(&s[whole..n]) {
            *d = (*d).max(v);
        }
    }
}

/// A QDQ nearest Resize over stored bytes: the gather of the f32 Resize (whole pixels
/// when held channels-last), then the table where the Q's parameters differ from the
/// DQ's (ONNX Runtime's quantizer gives both the same).
#[derive(Clone, Debug)]
pub(crate) struct QGatherOp {
    pub gather: super::pad::PadOp,
    /// The output's elements.
    pub len: usize,
    pub lut: Option<Box<[u8; 256]>>,
}

impl QGatherOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8]) {
        let out = &mut out[..self.len];
        self.gather.run_t(sources.bytes(self.gather.x), out, 0);
        if let Some(lut) = &self.lut {
            out.iter_mut().for_each(|v| *v = lut[*v as usize]);
        }
    }
}

/// A QDQ Concat over stored bytes: each part copied, or looked up in its table where its
/// DequantizeLinear and the QuantizeLinear differ in parameters.
#[derive(Clone, Debug)]
pub(crate) struct QConcatOp {
    pub cat: super::layout::ConcatOp,
    pub luts: Vec<Option<Box<[u8; 256]>>>,
}

impl QConcatOp {
    /// Split among the threads by outer rows, as the f32 join. A part with a table is
    /// looked up a block of rows at a time into the stack (its chunks are one run in
    /// its input) and copied out a chunk a row: a channels-last join has a row per pixel
    /// and a chunk of a few dozen bytes, too short for a lookup call each.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8], isa: Isa, pool: &Pool) {
        const BLOCK: usize = 4096;
        let (outer, parts) = self.cat.parts();
        let row = self.cat.row();
        if row == 0 {
            return;
        }
        let n = (outer * row).min(out.len());
        split_out(pool, &mut out[..n], row, |start, out| {
            let (first, rows) = (start / row, out.len() / row);
            let mut pos = 0;
            let mut buf = [0u8; BLOCK];
            for (&(src, chunk), lut) in parts.iter().zip(&self.luts) {
                let x = &sources.bytes(src)[first * chunk..(first + rows) * chunk];
                let at = pos;
                let dst = out
                    .chunks_exact_mut(row)
                    .map(move |r| &mut r[at..at + chunk]);
                pos += chunk;
                let Some(lut) = lut.as_deref().filter(|_| chunk > 0 && chunk <= BLOCK) else {
                    for (d, x) in dst.zip(x.chunks_exact(chunk.max(1))) {
                        match lut {
                            Some(lut) => lookup(isa, lut, x, d),
                            None => copy_bytes(x, d),
                        }
                    }
                    continue;
                };
                let per = BLOCK / chunk;
                let mut dst = dst;
                for block in x.chunks(per * chunk) {
                    let looked = &mut buf[..block.len()];
                    lookup(isa, lut, block, looked);
                    // The block's rows first: a zip that asked `dst` first would drop
                    // the row after the block.
                    for (x, d) in looked.chunks_exact(chunk).zip(&mut dst) {
                        copy_bytes(x, d);
                    }
                }
            }
        })
    }
}

/// `dst = x`, 16 bytes a move: a channels-last join copies a few dozen bytes a pixel per
/// part, where a `memcpy` call per chunk cost more than the copy.
#[inline]
fn copy_bytes(x: &[u8], dst: &mut [u8]) {
    let (mut d, mut s) = (dst.chunks_exact_mut(16), x.chunks_exact(16));
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    for (d, &v) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = v;
    }
}

/// `out[i] = lut[x[i]]`.
pub(crate) fn lookup(isa: Isa, lut: &[u8; 256], x: &[u8], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512F
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
    {
        // SAFETY: AVX-512F (the isa), BW and VBMI were detected.
        return unsafe { x86_lookup::lookup_vbmi(lut, x, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx2Fma | Isa::Avx512F) {
        // SAFETY: an Avx2Fma or Avx512F kernel is only selected after AVX2 was detected.
        return unsafe { x86_lookup::lookup_avx2(lut, x, out) };
    }
    let _ = isa;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = lut[v as usize];
    }
}

#[cfg(target_arch = "x86_64")]
mod x86_lookup {
    use std::arch::x86_64::*;

    /// [`super::lookup`], 64 bytes at a time with AVX-512 VBMI: the table is four
    /// registers, two byte permutes across register pairs look each byte up in its half
    /// (by its low seven bits), and its high bit picks the half: four instructions per 64
    /// bytes, against 48 per 32 for [`lookup_avx2`]. The last bytes under a mask.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) fn lookup_vbmi(lut: &[u8; 256], x: &[u8], out: &mut [u8]) {
        let n = x.len().min(out.len());
        // SAFETY: 64 bytes at 0, 64, 128 and 192 of the 256-byte table.
        let t: [__m512i; 4] = std::array::from_fn(|k| unsafe {
            _mm512_loadu_si512(lut.as_ptr().add(64 * k) as *const _)
        });
        let map = |v: __m512i| {
            let lo = _mm512_permutex2var_epi8(t[0], v, t[1]);
            let hi = _mm512_permutex2var_epi8(t[2], v, t[3]);
            _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi)
        };
        let mut i = 0;
        while i + 64 <= n {
            // SAFETY: bytes `i..i + 64` of both slices (loop bound).
            unsafe {
                let v = _mm512_loadu_si512(x.as_ptr().add(i) as *const _);
                _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut _, map(v));
            }
            i += 64;
        }
        if i < n {
            let m: __mmask64 = (1u64 << (n - i)) - 1;
            // SAFETY: the mask covers bytes `i..n` of both slices alone (masked lanes are
            // neither read nor written).
            unsafe {
                let v = _mm512_maskz_loadu_epi8(m, x.as_ptr().add(i) as *const i8);
                _mm512_mask_storeu_epi8(out.as_mut_ptr().add(i) as *mut i8, m, map(v));
            }
        }
    }

    /// [`super::lookup`], 32 bytes at a time: the table as 16 rows of 16 bytes, each row
    /// looked up by the bytes' low nibbles at once (`vpshufb`) and kept where the high
    /// nibble picks that row. 48 vector instructions per 32 bytes, where the scalar loop
    /// spent a load, a table load and a store per byte.
    #[target_feature(enable = "avx2")]
    pub(super) fn lookup_avx2(lut: &[u8; 256], x: &[u8], out: &mut [u8]) {
        let n = x.len().min(out.len());
        // SAFETY: 16 bytes from each row of the table.
        let rows: [__m256i; 16] = std::array::from_fn(|h| unsafe {
            _mm256_broadcastsi128_si256(_mm_loadu_si128(lut.as_ptr().add(16 * h) as *const _))
        });
        let nibble = _mm256_set1_epi8(0x0F);
        let mut i = 0;
        while i + 32 <= n {
            // SAFETY: bytes `i..i + 32` of both slices (loop bound).
            unsafe {
                let v = _mm256_loadu_si256(x.as_ptr().add(i) as *const _);
                let lo = _mm256_and_si256(v, nibble);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
                let mut r = _mm256_setzero_si256();
                let mut h = _mm256_setzero_si256();
                for row in &rows {
                    let t = _mm256_shuffle_epi8(*row, lo);
                    r = _mm256_blendv_epi8(r, t, _mm256_cmpeq_epi8(hi, h));
                    h = _mm256_add_epi8(h, _mm256_set1_epi8(1));
                }
                _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut _, r);
            }
            i += 32;
        }
        for (o, &v) in out[i..n].iter_mut().zip(&x[i..n]) {
            *o = lut[v as usize];
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86_quant {
    use std::arch::x86_64::*;

    use super::{BinaryParams, QBinaryKind};
    use crate::qgemm::kernels::x86::pack4x8;

    /// [`super::quantize_stored`] in 8 lanes: the same operations on the same values, in
    /// another order. NaN is replaced by 0 first (the scalar replaces the rounded NaN);
    /// the clamp to the stored range `[lo - zp, hi - zp]` comes before the rounding
    /// (rounding is monotonic and keeps integers, so `round(clamp(q)) = clamp(round(q))`
    /// for integer bounds), where it also takes the place of the scalar's clamp to `2^22`;
    /// the zero point is added in integers.
    #[derive(Clone, Copy)]
    struct Quant8 {
        s: __m256,
        lo: __m256,
        hi: __m256,
        zp: __m256i,
    }

    impl Quant8 {
        #[target_feature(enable = "avx2")]
        fn new((s, zp, lo, hi): (f32, i32, i32, i32)) -> Quant8 {
            Quant8 {
                s: _mm256_set1_ps(s),
                lo: _mm256_set1_ps((lo - zp) as f32),
                hi: _mm256_set1_ps((hi - zp) as f32),
                zp: _mm256_set1_epi32(zp),
            }
        }

        /// The stored values of `v` as i32 lanes.
        #[target_feature(enable = "avx2")]
        #[inline]
        fn lanes(&self, v: __m256) -> __m256i {
            let q = _mm256_div_ps(v, self.s);
            let q = _mm256_and_ps(q, _mm256_cmp_ps::<_CMP_ORD_Q>(q, q));
            let q = _mm256_min_ps(_mm256_max_ps(q, self.lo), self.hi);
            let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(q);
            _mm256_add_epi32(_mm256_cvttps_epi32(r), self.zp)
        }
    }

    /// [`super::quantize_stored`] (scale, stored zero point and range in `q`) of the
    /// longest prefix of `x` that is whole steps of 32 values, into `out`; returns its
    /// length. The compiler's loop of the scalar took 8 values a step, each through its
    /// division's whole latency, and stored them with two shuffles; here four divisions
    /// are in flight and the bytes are packed once.
    #[target_feature(enable = "avx2")]
    pub(super) fn quantize(x: &[f32], q: (f32, i32, i32, i32), out: &mut [u8]) -> usize {
        let n = x.len().min(out.len()) / 32 * 32;
        let q = Quant8::new(q);
        let mut i = 0;
        while i < n {
            let mut y = [_mm256_setzero_si256(); 4];
            for (j, y) in y.iter_mut().enumerate() {
                // SAFETY: values `i..i + 32` of `x` (loop bound).
                *y = q.lanes(unsafe { _mm256_loadu_ps(x.as_ptr().add(i + 8 * j)) });
            }
            // SAFETY: bytes `i..i + 32` of `out` (loop bound).
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut _, pack4x8(y)) };
            i += 32;
        }
        n
    }

    /// [`super::quantize_stored`] (scale, stored zero point and range in `q`) of a
    /// 3-channel NCHW image `x` (`plane` pixels a channel) into the NHWC bytes of pixels
    /// `first..first + out.len() / 3`, 32 pixels a step: each channel's values quantized as
    /// [`quantize`] does, then the three channels' bytes interleaved by `pshufb` (with the
    /// compiler's byte-by-byte interleave, a model's 3x224x224 image took 62 us, most of
    /// it the interleave); the pixels of an image that do not fill a step one by one.
    #[target_feature(enable = "avx2")]
    pub(super) fn quantize_nchw3(
        x: &[f32],
        plane: usize,
        first: usize,
        q: (f32, i32, i32, i32),
        out: &mut [u8],
    ) {
        let pixels = out.len() / 3;
        assert!(
            plane > 0 && (first + pixels).div_ceil(plane) * 3 * plane <= x.len(),
            "quantize_nchw3 out of bounds"
        );
        let quant = Quant8::new(q);
        let masks: [[__m128i; 3]; 3] = std::array::from_fn(|k| {
            // SAFETY: 16 bytes of the table.
            std::array::from_fn(|ch| unsafe {
                _mm_loadu_si128(INTERLEAVE3[k][ch].as_ptr() as *const __m128i)
            })
        });
        let mut px = first;
        while px < first + pixels {
            let (b, p0) = (px / plane, px % plane);
            let n = (plane - p0).min(first + pixels - px);
            let src = &x[b * 3 * plane..(b + 1) * 3 * plane];
            let dst = &mut out[(px - first) * 3..(px - first + n) * 3];
            let mut i = 0;
            while i + 32 <= n {
                let bytes: [__m256i; 3] = std::array::from_fn(|ch| {
                    let mut y = [_mm256_setzero_si256(); 4];
                    for (j, y) in y.iter_mut().enumerate() {
                        let v = &src[ch * plane + p0 + i + 8 * j..][..8];
                        // SAFETY: the 8 values of the checked slice.
                        *y = quant.lanes(unsafe { _mm256_loadu_ps(v.as_ptr()) });
                    }
                    pack4x8(y)
                });
                for h in 0..2 {
                    let part = |v: __m256i| match h {
                        0 => _mm256_castsi256_si128(v),
                        _ => _mm256_extracti128_si256::<1>(v),
                    };
                    let abc = [part(bytes[0]), part(bytes[1]), part(bytes[2])];
                    let d = &mut dst[(i + 16 * h) * 3..][..48];
                    for (k, m) in masks.iter().enumerate() {
                        let o = _mm_or_si128(
                            _mm_or_si128(
                                _mm_shuffle_epi8(abc[0], m[0]),
                                _mm_shuffle_epi8(abc[1], m[1]),
                            ),
                            _mm_shuffle_epi8(abc[2], m[2]),
                        );
                        // SAFETY: bytes `16 k..16 k + 16` of the checked 48.
                        unsafe { _mm_storeu_si128(d.as_mut_ptr().add(16 * k) as *mut __m128i, o) };
                    }
                }
                i += 32;
            }
            for p in i..n {
                for ch in 0..3 {
                    let v = src[ch * plane + p0 + p];
                    dst[p * 3 + ch] = super::quantize_stored(v, q.0, q.1, q.2, q.3);
                }
            }
            px += n;
        }
    }

    /// `pshufb` masks that interleave three 16-byte channels into 48 pixel bytes: byte `j`
    /// of output part `k` is byte `(16 k + j) / 3` of channel `(16 k + j) % 3` (0x80, a zero,
    /// from the other two).
    static INTERLEAVE3: [[[u8; 16]; 3]; 3] = {
        let mut t = [[[0x80u8; 16]; 3]; 3];
        let mut g = 0;
        while g < 48 {
            t[g / 16][g % 3][g % 16] = (g / 3) as u8;
            g += 1;
        }
        t
    };

    /// [`BinaryParams::stored`] of `a` and `b` over the longest prefix that is whole
    /// steps of 32 bytes, into `out`; returns its length. Per lane the scalar's operations
    /// in its order: each operand's zero point subtracted in integers, converted and
    /// scaled, the two added or multiplied, clamped with NaN kept (`max(cl, v)` and
    /// `min(ch, v)` return `v` when it is NaN, as the scalar's compares do), then
    /// quantized as [`quantize`].
    #[target_feature(enable = "avx2")]
    pub(super) fn binary(a: &[u8], b: &[u8], op: &BinaryParams, out: &mut [u8]) -> usize {
        let n = a.len().min(b.len()).min(out.len()) / 32 * 32;
        let q = Quant8::new(op.y);
        let real = |(s, z): (f32, i32)| (_mm256_set1_ps(s), _mm256_set1_epi32(z));
        let ((sa, za), (sb, zb)) = (real(op.a), real(op.b));
        let (cl, ch) = (_mm256_set1_ps(op.clamp.0), _mm256_set1_ps(op.clamp.1));
        let mut i = 0;
        while i < n {
            let mut y = [_mm256_setzero_si256(); 4];
            for (j, y) in y.iter_mut().enumerate() {
                // SAFETY: bytes `i..i + 32` of `a` and `b` (loop bound), 8 at a time.
                let (x, w) = unsafe {
                    (
                        _mm256_cvtepu8_epi32(
                            _mm_loadl_epi64(a.as_ptr().add(i + 8 * j) as *const _),
                        ),
                        _mm256_cvtepu8_epi32(
                            _mm_loadl_epi64(b.as_ptr().add(i + 8 * j) as *const _),
                        ),
                    )
                };
                let fa = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(x, za)), sa);
                let fb = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(w, zb)), sb);
                let v = match op.kind {
                    QBinaryKind::Add => _mm256_add_ps(fa, fb),
                    QBinaryKind::Mul => _mm256_mul_ps(fa, fb),
                };
                *y = q.lanes(_mm256_min_ps(ch, _mm256_max_ps(cl, v)));
            }
            // SAFETY: bytes `i..i + 32` of `out` (loop bound).
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut _, pack4x8(y)) };
            i += 32;
        }
        n
    }
}

/// Which element-wise op of two int8 tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QBinaryKind {
    Add,
    Mul,
}

/// `Q(act(DQ(a) op DQ(b)))` of two same-shape int8 tensors, per element in f32 exactly as
/// the reference computes the QDQ form (so bit-identical to it), bytes in and out. The
/// operation is layout-blind: operands and result share whatever layout they are held in.
#[derive(Debug)]
pub(crate) struct QBinaryOp {
    pub kind: QBinaryKind,
    pub a: Src,
    pub b: Src,
    pub len: usize,
    /// Per operand: scale and stored zero point.
    pub a_params: (f32, i32),
    pub b_params: (f32, i32),
    /// Output scale and stored zero point.
    pub y_params: (f32, i32),
    /// A fused Relu or Clip, in real values.
    pub clamp: Option<(f32, f32)>,
    /// The stored output range.
    pub lo: i32,
    pub hi: i32,
}

impl QBinaryOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8], isa: Isa, pool: &Pool) {
        #[cfg(target_arch = "x86_64")]
        if matches!(isa, Isa::Avx2Fma | Isa::Avx512F) {
            // 32 elements a step by hand, the rest as below.
            let (a, b) = (sources.bytes(self.a), sources.bytes(self.b));
            let op = self.params();
            return split_out(pool, &mut out[..self.len], 1, |start, out| {
                let range = start..start + out.len();
                let (a, b) = (&a[..self.len][range.clone()], &b[..self.len][range]);
                // SAFETY: Avx2Fma and Avx512F are only selected after AVX2 was detected.
                let done = unsafe { x86_quant::binary(a, b, &op, out) };
                binary(isa, self, sources, start + done, &mut out[done..])
            });
        }
        split_out(pool, &mut out[..self.len], 1, |start, out| {
            binary(isa, self, sources, start, out)
        })
    }

    /// Over the elements `start..start + out.len()`.
    #[inline(always)]
    fn run_inner(&self, sources: &Sources<'_>, start: usize, out: &mut [u8]) {
        let range = start..start + out.len();
        let a = &sources.bytes(self.a)[..self.len][range.clone()];
        let b = &sources.bytes(self.b)[..self.len][range];
        let op = self.params();
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = op.stored(x, y);
        }
    }

    pub(crate) fn params(&self) -> BinaryParams {
        BinaryParams {
            kind: self.kind,
            a: self.a_params,
            b: self.b_params,
            clamp: self.clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY)),
            y: (self.y_params.0, self.y_params.1, self.lo, self.hi),
        }
    }
}

/// What one element of a [`QBinaryOp`] needs: each operand's scale and stored zero point,
/// the activation's clamp in real values (infinite without one), and the output's scale,
/// stored zero point and stored range.
pub(crate) struct BinaryParams {
    pub kind: QBinaryKind,
    pub a: (f32, i32),
    pub b: (f32, i32),
    pub clamp: (f32, f32),
    pub y: (f32, i32, i32, i32),
}

impl BinaryParams {
    /// The stored result of stored operands `x` and `y`.
    #[inline(always)]
    pub(crate) fn stored(&self, x: u8, y: u8) -> u8 {
        let ((sa, za), (sb, zb), (cl, ch)) = (self.a, self.b, self.clamp);
        let (sy, zy, lo, hi) = self.y;
        let fa = (x as i32 - za) as f32 * sa;
        let fb = (y as i32 - zb) as f32 * sb;
        let v = match self.kind {
            QBinaryKind::Add => fa + fb,
            QBinaryKind::Mul => fa * fb,
        };
        // The reference's Relu is max(v, 0) and Clip min(max(v, lo), hi); both keep NaN,
        // which quantizes to the zero point.
        let v = if v < cl {
            cl
        } else if v > ch {
            ch
        } else {
            v
        };
        quantize_stored(v, sy, zy, lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::lookup;
    #[cfg(target_arch = "x86_64")]
    use super::{quantize_stored, BinaryParams, QBinaryKind};

    /// The AVX2 Add and Mul of two int8 tensors store [`BinaryParams::stored`]'s bytes for
    /// every pair of operand bytes: with no clamp, a Relu and a Clip, u8 and i8 zero
    /// points, and an output scale of 0 (every sum infinite or NaN, which quantizes to the
    /// zero point or the range's ends).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_binary_stores_the_scalar_bytes() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let a: Vec<u8> = (0..65536u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..65536u32).map(|i| (i >> 8) as u8).collect();
        let inf = f32::INFINITY;
        for kind in [QBinaryKind::Add, QBinaryKind::Mul] {
            for clamp in [(-inf, inf), (0.0, inf), (-1.0, 1.5)] {
                for (y, a_p, b_p) in [
                    ((0.031f32, 128, 0, 255), (0.05f32, 128), (0.011f32, 121)),
                    ((0.2, 3, 0, 255), (0.013, 0), (0.07, 255)),
                    ((0.0, 128, 0, 255), (0.05, 128), (0.011, 128)),
                ] {
                    let op = BinaryParams {
                        kind,
                        a: a_p,
                        b: b_p,
                        clamp,
                        y,
                    };
                    let mut got = vec![0u8; a.len()];
                    // SAFETY: AVX2 was detected above.
                    let done = unsafe { super::x86_quant::binary(&a, &b, &op, &mut got) };
                    assert_eq!(done, a.len());
                    for i in 0..a.len() {
                        let want = op.stored(a[i], b[i]);
                        assert_eq!(got[i], want, "{kind:?} {} {}, {clamp:?}, {y:?}", a[i], b[i]);
                    }
                }
            }
        }
    }

    /// The AVX2 QuantizeLinear stores the scalar's bytes: values on and next to the
    /// rounding ties (`(k + 0.5) * s` and one f32 step either side), beyond the stored
    /// range, huge, infinite, NaN and signed zeros, for u8 and i8 ranges (stored biased)
    /// and narrower ones, zero points at and inside the range's ends, and lengths past
    /// whole steps.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_quantize_stores_the_scalar_bytes() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        // The special values first, inside the whole steps.
        let mut x = vec![
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
        ];
        x.extend([
            3e38,
            -3e38,
            1e-40,
            -1e-40,
            4_194_304.0,
            -4_194_305.0,
            1e9,
            -1e9,
        ]);
        for s in [0.02f32, 0.1, 1.0 / 3.0, 7.5e-4] {
            for k in -300..300 {
                let tie = (k as f32 + 0.5) * s;
                let next = |d: i32| f32::from_bits((tie.to_bits() as i32 + d) as u32);
                x.extend([tie, next(1), next(-1), k as f32 * s]);
            }
        }
        for (s, zp, lo, hi) in [
            (0.02f32, 128, 0, 255),
            (0.1, 0, 0, 255),
            (1.0 / 3.0, 255, 0, 255),
            (7.5e-4, 128 - 5, 0, 255),
            (0.02, 128 - 128, 0, 255),
            // A stored range inside the bytes (4-bit types): the clamp is the kernel's.
            (0.1, 8, 0, 15),
            (0.02, 3, 1, 14),
        ] {
            for len in [0, 31, 32, 33, 100, x.len()] {
                let x = &x[..len];
                let mut got = vec![7u8; len];
                // SAFETY: AVX2 was detected above.
                let done = unsafe { super::x86_quant::quantize(x, (s, zp, lo, hi), &mut got) };
                assert_eq!(done, len / 32 * 32);
                for (i, (&g, &v)) in got.iter().zip(x).enumerate().take(done) {
                    let want = quantize_stored(v, s, zp, lo, hi);
                    assert_eq!(
                        g, want,
                        "value {v:e} (index {i}), scale {s}, zero point {zp}"
                    );
                }
                assert!(got[done..].iter().all(|&b| b == 7), "past the whole steps");
            }
        }
    }

    /// Every isa's table lookup (AVX-512 with VBMI where this CPU has it) stores the
    /// scalar lookup's bytes: every byte value, at every offset of a vector, with tails of
    /// every length.
    #[test]
    fn table_lookups_agree_with_the_scalar_one() {
        let lut: [u8; 256] = std::array::from_fn(|i| (i as u8).wrapping_mul(97).wrapping_add(13));
        let x: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 256) as u8).collect();
        for isa in crate::gemm::MicroKernel::available()
            .iter()
            .map(|k| k.isa())
        {
            for len in [0, 1, 31, 32, 33, 63, 64, 65, 127, 255, 256, 999, 1000] {
                let mut got = vec![0u8; len];
                lookup(isa, &lut, &x[..len], &mut got);
                let want: Vec<u8> = x[..len].iter().map(|&v| lut[v as usize]).collect();
                assert_eq!(got, want, "{isa:?}, {len} bytes");
            }
        }
    }
}
