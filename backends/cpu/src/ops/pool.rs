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
use super::tensor::column_sums;
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
}

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
    fn positions(self) -> impl Iterator<Item = usize> {
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
        self
    }

    /// The same pool over a tensor held channels-last (NHWC), as its result is.
    pub fn channels_last(mut self, c: usize) -> PoolOp {
        assert!(
            self.kind == PoolKind::Max && self.input[0] == 1 && self.kernel[0] == 1,
            "only 2-D MaxPool runs channels-last"
        );
        self.channels_last = Some(c);
        self
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        if let Some(c) = self.channels_last {
            let images = self.planes / c.max(1);
            return self.max_2d(x, out, isa, pool, (images, c));
        }
        if self.kind == PoolKind::Max && self.input[0] == 1 && self.kernel[0] == 1 {
            return self.max_2d(x, out, isa, pool, (self.planes, 1));
        }
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
    /// pixel `c` values wide), one output row at a time: the row starts at -inf and takes
    /// the maximum with each window tap's shifted input row, taps in the window's
    /// row-major order, so that every output folds the same taps in the same order as
    /// [`fold`] does (the same bits, NaN and signed zeros included). At stride 1 a tap's
    /// shifted row is one contiguous run (`c` values a pixel), so the loops vectorize;
    /// compiled for the ISA and split among the threads by output rows. The
    /// window-at-a-time loop took 6.5 ms for a 5x5 pool over 32x80x80 (YOLO's SPPF has
    /// three in a row), 50 times ONNX Runtime's.
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
        let sw = self.strides[2];
        split_out(pool, &mut out[..n], row_out, |start, part| {
            on_isa(
                isa,
                #[inline(always)]
                || {
                    for (r, o) in part.chunks_exact_mut(row_out).enumerate() {
                        let row = start / row_out + r;
                        let (p, yo) = (row / oh, row % oh);
                        let plane = &x[p * ih * row_in..(p + 1) * ih * row_in];
                        o.fill(f32::NEG_INFINITY);
                        for ky in 0..self.kernel[1] {
                            let iy = (yo * self.strides[1] + ky * self.dilations[1])
                                .checked_sub(self.pad_begin[1])
                                .filter(|&iy| iy < ih);
                            let Some(iy) = iy else {
                                continue;
                            };
                            let xr = &plane[iy * row_in..(iy + 1) * row_in];
                            for &(lo, hi, off) in &self.cols {
                                if lo >= hi {
                                    continue;
                                }
                                let first = ((lo * sw) as i64 + off) as usize * c;
                                let dst = &mut o[lo * c..hi * c];
                                if sw == 1 {
                                    let src = &xr[first..first + dst.len()];
                                    for (a, &v) in dst.iter_mut().zip(src) {
                                        *a = nan_max(*a, v);
                                    }
                                } else {
                                    let src = xr[first..].chunks(c).step_by(sw);
                                    for (d, s) in dst.chunks_exact_mut(c).zip(src) {
                                        for (a, &v) in d.iter_mut().zip(s) {
                                            *a = nan_max(*a, v);
                                        }
                                    }
                                }
                            }
                        }
                    }
                },
            )
        });
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
        if let Some(c) = self.channels_last {
            // Pixel rows summed channel-wise (contiguous), then scaled.
            let images = self.planes / c.max(1);
            #[allow(clippy::redundant_closure)]
            column_sums::<f32>(
                isa,
                pool,
                x,
                (images, n, c),
                out,
                #[inline(always)]
                |a| a / n as f32,
            );
            return;
        }
        for (p, o) in out.iter_mut().enumerate().take(self.planes) {
            let sum: f64 = x[p * n..(p + 1) * n].iter().map(|&v| v as f64).sum();
            *o = (sum / n as f64) as f32;
        }
    }
}
