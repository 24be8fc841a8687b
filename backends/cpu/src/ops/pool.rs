//! Pooling: MaxPool and AveragePool over 1 to 3 spatial axes, GlobalAveragePool.
//!
//! Windows are clipped to the input; what the clipped taps mean is settled by the support
//! check, which declines the cases where that is ambiguous (dilated windows, pads as large
//! as the kernel, `ceil_mode` with `count_include_pad`), so every window here holds at
//! least one input element.

use baton_delegate_api::shape::PoolGeometry;

use super::elementwise::nan_max;
use super::{Sources, Src};

/// The pooling function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolKind {
    /// Maximum of the taps; NaN if any tap is NaN.
    Max,
    /// Mean of the taps; `include_pad` divides by the whole kernel size instead of the
    /// number of taps inside the input.
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
    pad_begin: [usize; 3],
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
            pad_begin: pad3(&w.pad_begin, 0),
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.get(self.x);
        let [id, ih, iw] = self.input;
        let [od, oh, ow] = self.output;
        let in_plane = id * ih * iw;
        let out_plane = od * oh * ow;
        let kernel_size: usize = self.kernel.iter().product();
        for p in 0..self.planes {
            let xp = &x[p * in_plane..(p + 1) * in_plane];
            let op = &mut out[p * out_plane..(p + 1) * out_plane];
            let mut o = 0;
            for z in 0..od {
                let rz = self.range(0, z);
                for y in 0..oh {
                    let ry = self.range(1, y);
                    for xo in 0..ow {
                        let rx = self.range(2, xo);
                        let window = [rz.clone(), ry.clone(), rx];
                        op[o] = match self.kind {
                            PoolKind::Max => fold(xp, ih, iw, &window, f32::NEG_INFINITY, nan_max),
                            PoolKind::Average { include_pad } => {
                                let (sum, count) =
                                    fold(xp, ih, iw, &window, (0f64, 0usize), |(s, n), v| {
                                        (s + v as f64, n + 1)
                                    });
                                let divisor = if include_pad { kernel_size } else { count };
                                (sum / divisor as f64) as f32
                            }
                        };
                        o += 1;
                    }
                }
            }
        }
    }

    /// The input indices of window `o` along axis `axis`, clipped to the input.
    fn range(&self, axis: usize, o: usize) -> std::ops::Range<usize> {
        let start = (o * self.strides[axis]) as isize - self.pad_begin[axis] as isize;
        let end = start + self.kernel[axis] as isize;
        let clamp = |v: isize| v.clamp(0, self.input[axis] as isize) as usize;
        clamp(start)..clamp(end)
    }
}

/// Folds `f` over the taps of `window` (ranges along depth, height, width) in one plane.
fn fold<T>(
    plane: &[f32],
    ih: usize,
    iw: usize,
    window: &[std::ops::Range<usize>; 3],
    init: T,
    f: impl Fn(T, f32) -> T,
) -> T {
    let mut acc = init;
    for a in window[0].clone() {
        for b in window[1].clone() {
            let row = &plane[(a * ih + b) * iw..(a * ih + b + 1) * iw];
            for &v in &row[window[2].clone()] {
                acc = f(acc, v);
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
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.get(self.x);
        let n = self.plane_len;
        if let Some(c) = self.channels_last {
            // Sum pixel rows channel-wise (contiguous, vectorizes), then scale.
            let out = &mut out[..self.planes];
            out.fill(0.0);
            for (image, acc) in out.chunks_exact_mut(c.max(1)).enumerate() {
                for pixel in x[image * n * c..(image + 1) * n * c].chunks_exact(c) {
                    acc.iter_mut().zip(pixel).for_each(|(a, &v)| *a += v);
                }
                acc.iter_mut().for_each(|a| *a /= n as f32);
            }
            return;
        }
        for (p, o) in out.iter_mut().enumerate().take(self.planes) {
            let sum: f64 = x[p * n..(p + 1) * n].iter().map(|&v| v as f64).sum();
            *o = (sum / n as f64) as f32;
        }
    }
}
