//! GridSample of a 4-D image or a 5-D volume: each output pixel interpolates `X` at the
//! position its grid entry gives (nearest, linear or cubic; zeros, border or reflection
//! padding).
//!
//! The taps of a grid entry (at most four per axis, each an offset in the plane or a
//! padding zero, with its weight) are worked out once per output pixel and then applied to
//! every channel, so the coordinate arithmetic is not repeated per channel. Coordinates
//! and weights are computed in f64 as the reference does them (a coordinate's floor
//! decides which pixels are read, so an f32 rounding could pick another one), and the
//! sums too.

use super::{Sources, Src};

/// The interpolation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SampleMode {
    Nearest,
    Linear,
    Cubic,
}

/// What a position outside the image reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SamplePadding {
    Zeros,
    Border,
    Reflection,
}

/// A prepared GridSample node (`X` `[N, C, H, W]` and grid `[N, Ho, Wo, 2]`, or `X`
/// `[N, C, D, H, W]` and grid `[N, Do, Ho, Wo, 3]`).
#[derive(Clone, Debug)]
pub(crate) struct GridSampleOp {
    pub x: Src,
    pub grid: Src,
    pub batch: usize,
    pub channels: usize,
    /// The spatial extents `[D, H, W]`, `D` = 1 for an image.
    pub spatial: [usize; 3],
    /// Spatial axes: 2 (an image) or 3 (a volume).
    pub rank: usize,
    /// Output pixels per image, `Ho * Wo` (or `Do * Ho * Wo`).
    pub points: usize,
    pub mode: SampleMode,
    pub padding: SamplePadding,
    pub align_corners: bool,
}

/// The taps of one axis: up to four (offset or a padding zero, weight).
#[derive(Clone)]
struct Taps {
    n: usize,
    at: [Option<usize>; 4],
    w: [f64; 4],
}

impl GridSampleOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.get(self.x);
        let grid = sources.get(self.grid);
        let [depth, height, width] = self.spatial;
        let (c_n, plane, points, r) = (
            self.channels,
            depth * height * width,
            self.points,
            self.rank,
        );
        // An image is a volume of one slice: its depth axis has one tap.
        let single = Taps {
            n: 1,
            at: [Some(0), None, None, None],
            w: [1.0, 0.0, 0.0, 0.0],
        };
        for b in 0..self.batch {
            for p in 0..points {
                let g = &grid[(b * points + p) * r..][..r];
                // The grid lists the innermost axis first (x, then y, then z).
                let tz = if r == 3 {
                    self.taps(f64::from(g[2]), depth)
                } else {
                    Some(single.clone())
                };
                let taps = tz
                    .zip(self.taps(f64::from(g[1]), height))
                    .zip(self.taps(f64::from(g[0]), width));
                for ch in 0..c_n {
                    let o = (b * c_n + ch) * points + p;
                    let Some(((tz, ty), tx)) = &taps else {
                        out[o] = f32::NAN;
                        continue;
                    };
                    let img = &x[(b * c_n + ch) * plane..][..plane];
                    let mut acc = 0.0f64;
                    for z in 0..tz.n {
                        let Some(slice) = tz.at[z] else { continue };
                        let mut area = 0.0f64;
                        for i in 0..ty.n {
                            let Some(row) = ty.at[i] else { continue };
                            let at = (slice * height + row) * width;
                            let mut line = 0.0f64;
                            for j in 0..tx.n {
                                if let Some(col) = tx.at[j] {
                                    line += tx.w[j] * f64::from(img[at + col]);
                                }
                            }
                            area += ty.w[i] * line;
                        }
                        acc += tz.w[z] * area;
                    }
                    out[o] = acc as f32;
                }
            }
        }
    }

    /// The taps of normalized coordinate `v` on an axis of extent `d`; `None` when the
    /// position is undefined (NaN, or an infinity reflected or clamped), which gives NaN.
    fn taps(&self, v: f64, d: usize) -> Option<Taps> {
        let align = self.align_corners;
        let last = d as f64 - 1.0;
        let mut c = if align {
            (v + 1.0) / 2.0 * last
        } else {
            ((v + 1.0) * d as f64 - 1.0) / 2.0
        };
        if self.mode == SampleMode::Nearest {
            c = c.round_ties_even();
        }
        // The valid span: pixel centres with `align_corners`, else their outer edges.
        let (lo, hi) = if align {
            (0.0, last)
        } else {
            (-0.5, d as f64 - 0.5)
        };
        if c < lo || c > hi {
            c = match self.padding {
                SamplePadding::Zeros => c,
                SamplePadding::Border => c.clamp(0.0, last),
                SamplePadding::Reflection => reflect(c, lo, hi),
            };
        }
        let mut taps = Taps {
            n: 0,
            at: [None; 4],
            w: [0.0; 4],
        };
        if !c.is_finite() {
            if c.is_nan() || self.padding != SamplePadding::Zeros {
                return None;
            }
            // An infinite coordinate with zero padding reads only zeros.
            taps.n = 1;
            taps.w[0] = 1.0;
            return Some(taps);
        }
        // Far-out coordinates read zeros (or the clamped edge) whatever their size.
        let c = c.clamp(-4.0 - d as f64, d as f64 + 4.0);
        let at = |k: f64| -> Option<usize> {
            let k = match self.padding {
                SamplePadding::Zeros if k < 0.0 || k > last => return None,
                SamplePadding::Zeros => k,
                SamplePadding::Border => k.clamp(0.0, last),
                SamplePadding::Reflection => reflect(k, lo, hi).trunc().clamp(0.0, last),
            };
            Some(k as usize)
        };
        let f = c.floor();
        let t = c - f;
        let mut push = |k: f64, w: f64| {
            taps.at[taps.n] = at(k);
            taps.w[taps.n] = w;
            taps.n += 1;
        };
        match self.mode {
            SampleMode::Nearest => push(c.trunc(), 1.0),
            SampleMode::Linear => {
                push(f, 1.0 - t);
                push(f + 1.0, t);
            }
            SampleMode::Cubic => {
                for (k, w) in cubic_weights(t).into_iter().enumerate() {
                    push(f - 1.0 + k as f64, w);
                }
            }
        }
        Some(taps)
    }
}

/// Reflects `c` off the ends of `[lo, hi]` until it lies within (a span of one point keeps
/// that point).
fn reflect(c: f64, lo: f64, hi: f64) -> f64 {
    let span = hi - lo;
    if span <= 0.0 {
        return lo;
    }
    let (dx, from_lo) = if c < lo {
        (lo - c, true)
    } else if c > hi {
        (c - hi, false)
    } else {
        return c;
    };
    let n = (dx / span).trunc();
    let rest = dx - n * span;
    // An even number of whole spans leaves the direction as it was.
    if (n % 2.0 == 0.0) == from_lo {
        lo + rest
    } else {
        hi - rest
    }
}

/// The cubic convolution weights (A = -0.75, as PyTorch's bicubic grid sampling) of the
/// taps at -1, 0, 1 and 2 from the floor of a coordinate `t` past it.
fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}
