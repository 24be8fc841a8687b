//! Pooling: MaxPool and AveragePool over 1 to 3 spatial axes, GlobalAveragePool.
//!
//! A window's taps are `start + k * dilation` along each axis; those on the input are
//! folded, those in the padding are skipped (MaxPool) or, with `count_include_pad`,
//! counted in AveragePool's divisor, and those past the padded border (which only
//! `ceil_mode` windows reach) never count, as in the reference. A window with no tap on
//! the input gives -inf (MaxPool) or NaN (AveragePool without `count_include_pad`: 0/0).

use baton_delegate_api::shape::PoolGeometry;

use super::elementwise::nan_max;
use super::elementwise::split_out;
use super::math::on_isa;
use super::tensor::{column_sums, sum_f64};
use super::{Sources, Src};
use crate::gemm::Isa;
use crate::pool::Pool;

/// The pooling function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolKind {
    /// Maximum of the taps; NaN if any tap is NaN.
    Max,
    /// Mean of the taps; `include_pad` divides by the taps inside the padded input
    /// instead of the number of taps inside the input.
    Average { include_pad: bool },
}

/// A windowed pooling op, normalised to three spatial axes (missing ones have extent 1).
#[derive(Clone, Debug)]
pub(crate) struct PoolOp {
    x: Src,
    kind: PoolKind,
    /// Batch times channels.
    planes: usize,
    input: [usize; 3],
    output: [usize; 3],
    kernel: [usize; 3],
    strides: [usize; 3],
    dilations: [usize; 3],
    pad_begin: [usize; 3],
    pad_end: [usize; 3],
    /// The channel count when the input and the output are held channels-last (a 2-D
    /// MaxPool inside a conv chain, see `exec/layout.rs`).
    channels_last: Option<usize>,
    /// For each column tap of the window, the output columns whose input column is inside
    /// the row (`lo..hi`) and the tap's input offset from `o * stride` (see `max_2d`);
    /// made here, as execute allocates nothing.
    cols: Vec<(usize, usize, i64)>,
    /// The output columns that every column tap reaches (`cols`' ranges intersected).
    inner: (usize, usize),
    /// Each output column's taps (`taps(2, o)`, which divides), made here for the pools
    /// that go a pixel at a time.
    col_taps: Vec<Taps>,
}

/// The outputs a 2-D MaxPool keeps in registers across its taps: four AVX-512 vectors.
const MAX_BLOCK: usize = 64;

/// The fewest channels for which a strided NHWC MaxPool goes a pixel at a time (see
/// [`PoolOp::max_pixels`]); below, a tap's values are too few for vectors, and its
/// strided row is walked instead.
const PIXEL_CHANNELS: usize = 16;

/// The channels of an NHWC AveragePool summed together in registers: four AVX-512
/// vectors of f64.
const AVERAGE_BLOCK: usize = 32;

/// The taps of one window along one axis: `count` input positions from `first`, `step`
/// apart, and how many taps lie inside the padded input (AveragePool's
/// `count_include_pad` divisor).
#[derive(Clone, Copy, Debug)]
struct Taps {
    first: usize,
    count: usize,
    step: usize,
    padded: usize,
}

impl Taps {
    fn positions(self) -> impl Iterator<Item = usize> + Clone {
        (0..self.count).map(move |j| self.first + j * self.step)
    }
}

impl PoolOp {
    /// From the input shape `[N, C, spatial...]` (1 to 3 spatial axes) and its geometry.
    pub fn new(x: Src, kind: PoolKind, shape: &[usize], geom: &PoolGeometry) -> PoolOp {
        let spatial = shape.len() - 2;
        let pad3 = |v: &[usize], fill: usize| -> [usize; 3] {
            let mut out = [fill; 3];
            out[3 - spatial..].copy_from_slice(v);
            out
        };
        let w = &geom.window;
        PoolOp {
            x,
            kind,
            planes: shape[0] * shape[1],
            input: pad3(&shape[2..], 1),
            output: pad3(&geom.out_spatial, 1),
            kernel: pad3(&w.kernel, 1),
            strides: pad3(&w.strides, 1),
            dilations: pad3(&w.dilations, 1),
            pad_begin: pad3(&w.pad_begin, 0),
            pad_end: pad3(&w.pad_end, 0),
            channels_last: None,
            cols: Vec::new(),
            inner: (0, 0),
            col_taps: Vec::new(),
        }
        .with_cols()
    }

    /// [`PoolOp::cols`] from the geometry.
    fn with_cols(mut self) -> PoolOp {
        let (iw, ow) = (self.input[2], self.output[2]);
        let (sw, dw, pw) = (self.strides[2], self.dilations[2], self.pad_begin[2] as i64);
        self.cols = (0..self.kernel[2])
            .map(|kx| {
                let off = (kx * dw) as i64 - pw;
                let lo = (0..ow).find(|&o| (o * sw) as i64 + off >= 0).unwrap_or(ow);
                let hi = (lo..ow)
                    .find(|&o| (o * sw) as i64 + off >= iw as i64)
                    .unwrap_or(ow);
                (lo, hi, off)
            })
            .collect();
        self.inner = self
            .cols
            .iter()
            .fold((0, ow), |(a, b), &(lo, hi, _)| (a.max(lo), b.min(hi)));
        self.col_taps = (0..ow).map(|o| self.taps(2, o)).collect();
        self
    }

    /// The same pool over a tensor held channels-last (NHWC), as its result is.
    pub fn channels_last(mut self, c: usize) -> PoolOp {
        assert!(
            self.input[0] == 1 && self.kernel[0] == 1,
            "only 2-D pools run channels-last"
        );
        self.channels_last = Some(c);
        self
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        if let Some(c) = self.channels_last {
            let images = self.planes / c.max(1);
            return match self.kind {
                PoolKind::Max => self.max_2d(x, out, isa, pool, (images, c)),
                PoolKind::Average { include_pad } => {
                    self.average_nhwc(x, out, isa, pool, (images, c), include_pad)
                }
            };
        }
        if self.kind == PoolKind::Max && self.input[0] == 1 && self.kernel[0] == 1 {
            return self.max_2d(x, out, isa, pool, (self.planes, 1));
        }
        self.windows(x, out)
    }

    /// Every output by its own window (the general case: 1-D and 3-D pools, AveragePool,
    /// MaxPool over 3-D windows).
    fn windows(&self, x: &[f32], out: &mut [f32]) {
        let [id, ih, iw] = self.input;
        let [od, oh, ow] = self.output;
        let in_plane = id * ih * iw;
        let out_plane = od * oh * ow;
        for p in 0..self.planes {
            let xp = &x[p * in_plane..(p + 1) * in_plane];
            let op = &mut out[p * out_plane..(p + 1) * out_plane];
            let mut o = 0;
            for z in 0..od {
                let tz = self.taps(0, z);
                for y in 0..oh {
                    let ty = self.taps(1, y);
                    for xo in 0..ow {
                        let window = [tz, ty, self.taps(2, xo)];
                        op[o] = match self.kind {
                            PoolKind::Max => fold(xp, ih, iw, &window, f32::NEG_INFINITY, nan_max),
                            PoolKind::Average { include_pad } => {
                                let sum = fold(xp, ih, iw, &window, 0f64, |s, v| s + v as f64);
                                let divisor: usize = if include_pad {
                                    window.iter().map(|t| t.padded).product()
                                } else {
                                    window.iter().map(|t| t.count).product()
                                };
                                (sum / divisor as f64) as f32
                            }
                        };
                        o += 1;
                    }
                }
            }
        }
    }

    /// MaxPool over 2-D planes (`(planes, 1)`), or over NHWC images (`(images, c)`: each
    /// pixel `c` values wide), one output row at a time (see [`PoolOp::max_row`]), compiled
    /// for the ISA and split among the threads by output rows. Each thread looks for a
    /// NaN in the input rows its outputs read: until it has seen one, the taps are folded
    /// with the plain `v > acc` maximum, which is one `maxps` a vector and gives the bits
    /// of [`nan_max`] on such input (the first of equal taps); with one, [`nan_max`]
    /// itself (two compares and a blend). The window-at-a-time loop took 6.5 ms for a
    /// 5x5 pool over 32x80x80 (YOLO's SPPF has three in a row), 50 times ONNX Runtime's.
    fn max_2d(
        &self,
        x: &[f32],
        out: &mut [f32],
        isa: Isa,
        pool: &Pool,
        (planes, c): (usize, usize),
    ) {
        let [_, ih, iw] = self.input;
        let [_, oh, ow] = self.output;
        let c = c.max(1);
        let (row_in, row_out) = (iw * c, ow * c);
        if row_out == 0 || oh == 0 {
            return;
        }
        let n = (planes * oh * row_out).min(out.len());
        assert!(x.len() >= planes * ih * row_in, "pool input too short");
        split_out(pool, &mut out[..n], row_out, |start, part| {
            on_isa(
                isa,
                #[inline(always)]
                || {
                    let first = start / row_out;
                    // Whether an input row read so far holds a NaN, and how far the rows
                    // of which plane have been looked at: each output row looks at the
                    // input rows its windows reach past those (all of them at a plane's
                    // or the part's first row) just before it reads them, while they
                    // are in cache (a pass over the whole input first cost as much
                    // again as the pool over a 3.2 MB one).
                    let mut nan = false;
                    let mut seen: Option<(usize, usize)> = None;
                    for (r, o) in part.chunks_exact_mut(row_out).enumerate() {
                        let row = first + r;
                        let (p, yo) = (row / oh, row % oh);
                        let plane = &x[p * ih * row_in..(p + 1) * ih * row_in];
                        let (lo, hi) = self.input_rows(yo);
                        let from = match seen {
                            Some((q, end)) if q == p => end.max(lo),
                            _ => lo,
                        };
                        if !nan && from < hi {
                            nan = has_nan(&plane[from * row_in..hi * row_in]);
                        }
                        seen = Some((p, hi.max(from)));
                        if nan {
                            self.max_row(plane, yo, c, o, nan_max);
                        } else {
                            self.max_row(plane, yo, c, o, plain_max);
                        }
                    }
                },
            )
        });
    }

    /// [`PoolOp::max_row`] one output pixel at a time, for NHWC rows at strides above 1
    /// (a ResNet stem's 3x3 stride-2 pool), where a tap's shifted row is not contiguous:
    /// each pixel folds its window's taps in row-major order, its channels in blocks of
    /// [`MAX_BLOCK`] kept in registers (the last overlapping the one before), or, with
    /// fewer channels than a block, folded into the output pixel in memory.
    #[inline(always)]
    fn max_pixels(
        &self,
        plane: &[f32],
        yo: usize,
        c: usize,
        o: &mut [f32],
        max: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let ty = self.taps(1, yo);
        for (xo, o) in o.chunks_exact_mut(c).enumerate() {
            let taps = self.pixel_taps(ty, xo, c);
            if c < MAX_BLOCK {
                o.fill(f32::NEG_INFINITY);
                for t in taps {
                    for (a, &v) in o.iter_mut().zip(&plane[t..t + c]) {
                        *a = max(*a, v);
                    }
                }
                continue;
            }
            let mut ch = 0;
            while ch < c {
                let at = ch.min(c - MAX_BLOCK);
                let mut acc = [f32::NEG_INFINITY; MAX_BLOCK];
                for t in taps.clone() {
                    let src: &[f32; MAX_BLOCK] =
                        plane[t + at..t + at + MAX_BLOCK].try_into().unwrap();
                    acc = std::array::from_fn(|i| max(acc[i], src[i]));
                }
                for (d, &v) in o[at..at + MAX_BLOCK].iter_mut().zip(&acc) {
                    *d = v;
                }
                ch += MAX_BLOCK;
            }
        }
    }

    /// A 2-D AveragePool over NHWC images (`(images, c)`), one output pixel at a time,
    /// its channels in blocks of [`AVERAGE_BLOCK`] kept in registers across the window's
    /// taps (the last block overlapping the one before; fewer channels than a block, one
    /// at a time). Each channel sums its taps in f64 in the window's row-major order and
    /// divides as [`PoolOp::windows`] does, so the bits are its bits; compiled for the
    /// ISA and split among the threads by output rows. DenseNet's transitions and the
    /// shortcuts of Paddle's ResNet-vd pool 2x2 at stride 2 between convolutions, Inception
    /// 3x3 at stride 1: held NHWC, the chain no longer converts around them.
    fn average_nhwc(
        &self,
        x: &[f32],
        out: &mut [f32],
        isa: Isa,
        pool: &Pool,
        (images, c): (usize, usize),
        include_pad: bool,
    ) {
        let [_, ih, iw] = self.input;
        let [_, oh, ow] = self.output;
        let row_out = ow * c;
        if row_out == 0 || oh == 0 {
            return;
        }
        let n = (images * oh * row_out).min(out.len());
        assert!(x.len() >= images * ih * iw * c, "pool input too short");
        split_out(pool, &mut out[..n], row_out, |start, part| {
            on_isa(
                isa,
                #[inline(always)]
                || {
                    for (r, o) in part.chunks_exact_mut(row_out).enumerate() {
                        let row = start / row_out + r;
                        let (p, yo) = (row / oh, row % oh);
                        let image = &x[p * ih * iw * c..(p + 1) * ih * iw * c];
                        let ty = self.taps(1, yo);
                        for (xo, o) in o.chunks_exact_mut(c).enumerate() {
                            let tx = self.col_taps[xo];
                            let divisor = match include_pad {
                                true => ty.padded * tx.padded,
                                false => ty.count * tx.count,
                            } as f64;
                            let taps = self.pixel_taps(ty, xo, c);
                            if c < AVERAGE_BLOCK {
                                for (ch, o) in o.iter_mut().enumerate() {
                                    let sum =
                                        taps.clone().fold(0f64, |s, t| s + image[t + ch] as f64);
                                    *o = (sum / divisor) as f32;
                                }
                                continue;
                            }
                            let mut ch = 0;
                            while ch < c {
                                let at = ch.min(c - AVERAGE_BLOCK);
                                let mut acc = [0f64; AVERAGE_BLOCK];
                                for t in taps.clone() {
                                    let src: &[f32; AVERAGE_BLOCK] =
                                        image[t + at..t + at + AVERAGE_BLOCK].try_into().unwrap();
                                    // A new value each tap (see `max_row`).
                                    acc = std::array::from_fn(|i| acc[i] + src[i] as f64);
                                }
                                for (o, &a) in o[at..at + AVERAGE_BLOCK].iter_mut().zip(&acc) {
                                    *o = (a / divisor) as f32;
                                }
                                ch += AVERAGE_BLOCK;
                            }
                        }
                    }
                },
            )
        });
    }

    /// The input rows `lo..hi` from output row `yo`'s first tap row to its last.
    fn input_rows(&self, yo: usize) -> (usize, usize) {
        let t = self.taps(1, yo);
        match t.count {
            0 => (t.first, t.first),
            n => (t.first, t.first + (n - 1) * t.step + 1),
        }
    }

    /// The offsets in an NHWC image (`c` values a pixel) of the taps of output pixel `xo`
    /// in a row whose row taps are `ty`, in the window's row-major order.
    fn pixel_taps(&self, ty: Taps, xo: usize, c: usize) -> impl Iterator<Item = usize> + Clone {
        let (iw, tx) = (self.input[2], self.col_taps[xo]);
        ty.positions()
            .flat_map(move |iy| tx.positions().map(move |ix| (iy * iw + ix) * c))
    }

    /// One output row `o` of a 2-D MaxPool over `plane` (`c` values a pixel), each output
    /// folding its window's taps with `max` in the window's row-major order, so that with
    /// [`nan_max`] every output has the bits of [`fold`]'s (NaN and signed zeros
    /// included). Where every column tap is on the input (and the stride is 1), blocks
    /// of outputs stay in registers across all the taps, one load per tap and block and
    /// one store at the end; the rest folds each tap's shifted input row into the output
    /// row in memory.
    #[inline(always)]
    fn max_row(
        &self,
        plane: &[f32],
        yo: usize,
        c: usize,
        o: &mut [f32],
        max: impl Fn(f32, f32) -> f32 + Copy,
    ) {
        let row_in = self.input[2] * c;
        let sw = self.strides[2];
        if sw > 1 && c >= PIXEL_CHANNELS {
            return self.max_pixels(plane, yo, c, o, max);
        }
        let rows = (self.taps(1, yo).positions()).map(|iy| &plane[iy * row_in..(iy + 1) * row_in]);
        let (a, b) = self.inner;
        let blocked = sw == 1 && b > a && (b - a) * c >= MAX_BLOCK;
        let (a, b) = if blocked { (a * c, b * c) } else { (0, 0) };
        let mut j = a;
        while j < b {
            // The last block overlaps the one before instead of running short: the same
            // maximum, computed twice.
            let at = j.min(b - MAX_BLOCK);
            let mut acc = [f32::NEG_INFINITY; MAX_BLOCK];
            for xr in rows.clone() {
                for &(_, _, off) in &self.cols {
                    let first = (at as i64 + off * c as i64) as usize;
                    let src: &[f32; MAX_BLOCK] = xr[first..first + MAX_BLOCK].try_into().unwrap();
                    // A whole new value each tap, not stores into the old: stored into,
                    // the block stayed in memory (masked stores, each read back by the
                    // next tap).
                    acc = std::array::from_fn(|i| max(acc[i], src[i]));
                }
            }
            for (d, &v) in o[at..at + MAX_BLOCK].iter_mut().zip(&acc) {
                *d = v;
            }
            j += MAX_BLOCK;
        }
        o[..a].fill(f32::NEG_INFINITY);
        o[b..].fill(f32::NEG_INFINITY);
        for xr in rows {
            for &(lo, hi, off) in &self.cols {
                for (lo, hi) in [(lo, hi.min(a / c)), (lo.max(b / c), hi)] {
                    if lo >= hi {
                        continue;
                    }
                    let first = ((lo * sw) as i64 + off) as usize * c;
                    let dst = &mut o[lo * c..hi * c];
                    if sw == 1 {
                        let src = &xr[first..first + dst.len()];
                        for (a, &v) in dst.iter_mut().zip(src) {
                            *a = max(*a, v);
                        }
                    } else {
                        let src = xr[first..].chunks(c).step_by(sw);
                        for (d, s) in dst.chunks_exact_mut(c).zip(src) {
                            for (a, &v) in d.iter_mut().zip(s) {
                                *a = max(*a, v);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The taps of window `o` along axis `axis`.
    fn taps(&self, axis: usize, o: usize) -> Taps {
        let (k, d) = (self.kernel[axis] as i64, self.dilations[axis] as i64);
        let start = (o * self.strides[axis]) as i64 - self.pad_begin[axis] as i64;
        let len = self.input[axis] as i64;
        // Taps `j` with `lo <= start + j * d < hi`, as a range of `j` within the kernel.
        let within = |lo: i64, hi: i64| {
            let first = if start >= lo {
                0
            } else {
                (lo - start + d - 1) / d
            };
            let end = if start >= hi {
                0
            } else {
                ((hi - start + d - 1) / d).min(k)
            };
            (first.min(k), end.max(first.min(k)))
        };
        let (a, b) = within(0, len);
        let (pa, pb) = within(
            -(self.pad_begin[axis] as i64),
            len + self.pad_end[axis] as i64,
        );
        Taps {
            first: (start + a * d).max(0) as usize,
            count: (b - a) as usize,
            step: d as usize,
            padded: (pb - pa) as usize,
        }
    }
}

/// `v > acc ? v : acc`: [`nan_max`] on input without NaN, one `maxps` a vector (its
/// operand order keeps the first of equal values, as `nan_max` does).
#[inline(always)]
fn plain_max(acc: f32, v: f32) -> f32 {
    if v > acc {
        v
    } else {
        acc
    }
}

/// Whether `x` holds a NaN, a block of values at a time so that the loop vectorizes.
#[inline(always)]
fn has_nan(x: &[f32]) -> bool {
    let mut blocks = x.chunks_exact(MAX_BLOCK);
    let nan = blocks.any(|b| b.iter().fold(false, |n, v| n | v.is_nan()));
    nan || blocks.remainder().iter().any(|v| v.is_nan())
}

/// Folds `f` over the taps of `window` (along depth, height, width) in one plane.
fn fold<T>(
    plane: &[f32],
    ih: usize,
    iw: usize,
    window: &[Taps; 3],
    init: T,
    f: impl Fn(T, f32) -> T,
) -> T {
    let mut acc = init;
    for a in window[0].positions() {
        for b in window[1].positions() {
            let row = &plane[(a * ih + b) * iw..(a * ih + b + 1) * iw];
            for c in window[2].positions() {
                acc = f(acc, row[c]);
            }
        }
    }
    acc
}

/// GlobalAveragePool: the mean of each `[N, C]` plane, summed in f64.
#[derive(Clone, Debug)]
pub(crate) struct GlobalAveragePoolOp {
    pub x: Src,
    /// Images x channels, and pixels per image.
    pub planes: usize,
    pub plane_len: usize,
    /// The channel count when the input is held channels-last.
    pub channels_last: Option<usize>,
}

impl GlobalAveragePoolOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        let n = self.plane_len;
        // Either layout sums each channel's pixels in the same order (`sum_f64`'s), so
        // the bits do not depend on the layout plan.
        if let Some(c) = self.channels_last {
            let images = self.planes / c.max(1);
            column_sums(
                isa,
                pool,
                x,
                (images, n, c),
                out,
                #[inline(always)]
                |a| (a / n as f64) as f32,
            );
            return;
        }
        for (p, o) in out.iter_mut().enumerate().take(self.planes) {
            *o = (sum_f64(&x[p * n..(p + 1) * n]) / n as f64) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::MicroKernel;
    use baton_delegate_api::shape::Window;
    use baton_delegate_api::testing::Rng;

    /// A 2-D MaxPool over `[1, c, h, w]`: `(kernel, stride, dilation, pad_begin, pad_end)`
    /// the same along both axes.
    fn max_pool(c: usize, h: usize, w: usize, g: (usize, usize, usize, usize, usize)) -> PoolOp {
        pool_of(PoolKind::Max, false, c, h, w, g)
    }

    /// A 2-D pool over `[1, c, h, w]`, as [`max_pool`], with `ceil_mode`.
    fn pool_of(
        kind: PoolKind,
        ceil: bool,
        c: usize,
        h: usize,
        w: usize,
        g: (usize, usize, usize, usize, usize),
    ) -> PoolOp {
        let (k, s, d, pb, pe) = g;
        let window = Window {
            kernel: vec![k; 2],
            strides: vec![s; 2],
            dilations: vec![d; 2],
            pad_begin: vec![pb; 2],
            pad_end: vec![pe; 2],
        };
        let out_spatial = vec![
            window.out_len(0, h, ceil).unwrap(),
            window.out_len(1, w, ceil).unwrap(),
        ];
        let geom = PoolGeometry {
            window,
            out_spatial,
            count_include_pad: false,
        };
        PoolOp::new(Src::Input(0), kind, &[1, c, h, w], &geom)
    }

    /// The row-at-a-time MaxPool, over NCHW planes and over the NHWC tensor, gives the
    /// bits of the window-at-a-time fold at 1 and 2 threads: registers kept across the
    /// taps (and the overlapping last block), the edges beside them, strides, dilations
    /// and pads, ties of +0 and -0 (the first tap wins), -inf, and NaNs, in some rows
    /// only, so that the threads whose rows read none take the plain maximum.
    #[test]
    fn rows_give_the_bits_of_the_window_fold() {
        let isa = MicroKernel::best().isa();
        let mut rng = Rng::new(38);
        let pools = [Pool::new(1), Pool::new(2)];
        let cases = [
            (32, 20, 80, (5, 1, 1, 2, 2)),
            (1, 9, 150, (5, 1, 1, 2, 2)),
            (3, 11, 40, (3, 1, 1, 1, 1)),
            (16, 7, 9, (3, 1, 2, 2, 1)),
            (40, 12, 13, (3, 2, 1, 1, 1)),
            (64, 11, 12, (3, 2, 1, 1, 1)),
            (72, 9, 9, (3, 2, 2, 1, 0)),
            (8, 9, 9, (3, 2, 1, 1, 1)),
            (24, 8, 70, (2, 1, 1, 0, 1)),
            (8, 6, 6, (7, 1, 1, 3, 3)),
        ];
        for (c, h, w, g) in cases {
            let op = max_pool(c, h, w, g);
            let [_, oh, ow] = op.output;
            let mut x: Vec<f32> = rng
                .vec(c * h * w)
                .iter()
                .map(|v| (v * 3.0).round() * 0.5)
                .collect();
            x[5] = f32::NEG_INFINITY;
            for nan in [false, true] {
                if nan {
                    x[c * h * w / 3] = f32::NAN;
                    x[c * h * w - 2] = -f32::NAN;
                }
                let mut want = vec![0f32; c * oh * ow];
                op.windows(&x, &mut want);
                let nhwc: Vec<f32> = (0..h * w * c).map(|i| x[(i % c) * h * w + i / c]).collect();
                for pool in &pools {
                    let mut planes = vec![1f32; c * oh * ow];
                    op.max_2d(&x, &mut planes, isa, pool, (c, 1));
                    let mut held = vec![1f32; c * oh * ow];
                    op.clone()
                        .channels_last(c)
                        .max_2d(&nhwc, &mut held, isa, pool, (1, c));
                    for (i, want) in want.iter().enumerate() {
                        let at = (c, h, w, g, nan, pool.threads(), i);
                        assert_eq!(planes[i].to_bits(), want.to_bits(), "planes {at:?}");
                        let (ch, p) = (i / (oh * ow), i % (oh * ow));
                        assert_eq!(held[p * c + ch].to_bits(), want.to_bits(), "NHWC {at:?}");
                    }
                }
            }
        }
    }

    /// The NHWC AveragePool gives the bits of the window-at-a-time fold over the NCHW
    /// tensor at 1 and 2 threads: channel blocks in registers (and the overlapping last
    /// block), fewer channels than a block, strides, pads counted or not, and `ceil_mode`
    /// windows past the padded end (which count in neither divisor).
    #[test]
    fn nhwc_averages_give_the_bits_of_the_window_fold() {
        let isa = MicroKernel::best().isa();
        let mut rng = Rng::new(39);
        let pools = [Pool::new(1), Pool::new(2)];
        let cases = [
            (64, 12, 14, (2, 2, 1, 0, 0), true),
            (40, 13, 11, (2, 2, 1, 0, 0), true),
            (32, 9, 10, (3, 1, 1, 1, 1), false),
            (8, 7, 9, (3, 2, 1, 1, 1), true),
            (48, 8, 8, (3, 2, 2, 2, 1), false),
        ];
        for (c, h, w, g, ceil) in cases {
            for include_pad in [false, true] {
                let op = pool_of(PoolKind::Average { include_pad }, ceil, c, h, w, g);
                let [_, oh, ow] = op.output;
                let x = rng.vec(c * h * w);
                let mut want = vec![0f32; c * oh * ow];
                op.windows(&x, &mut want);
                let nhwc: Vec<f32> = (0..h * w * c).map(|i| x[(i % c) * h * w + i / c]).collect();
                let held = op.clone().channels_last(c);
                for pool in &pools {
                    let mut got = vec![1f32; c * oh * ow];
                    held.average_nhwc(&nhwc, &mut got, isa, pool, (1, c), include_pad);
                    for (i, want) in want.iter().enumerate() {
                        let at = (c, h, w, g, ceil, include_pad, pool.threads(), i);
                        let (ch, p) = (i / (oh * ow), i % (oh * ow));
                        assert_eq!(got[p * c + ch].to_bits(), want.to_bits(), "{at:?}");
                    }
                }
            }
        }
    }
}
