//! Resize: the per-axis sampling tables (made at init, with the reference's coordinate
//! arithmetic in f64) and the linear kernel over the last two axes.
//!
//! `nearest` is a gather with one input index per output index and axis: it runs as the
//! index-map walk of `pad.rs`. `linear` resamples at most the last three axes (depth,
//! height and width; real models resize images and volumes): each output pixel is the
//! two-tap mix along the width of two two-tap mixes along the height (of two along the
//! depth, for a volume), in f32, outermost axis first as the reference's passes run.

use super::elementwise::split_out;
use super::math::on_isa;
use super::{vec_bytes, Sources, Src};
use crate::gemm::Isa;
use crate::pool::Pool;

/// Resize's interpolation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ResizeMode {
    /// `nearest` with its `nearest_mode`.
    Nearest(Rounding),
    Linear,
}

/// The rounding of `nearest_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rounding {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

impl Rounding {
    pub fn parse(s: &str) -> Option<Rounding> {
        Some(match s {
            "round_prefer_floor" => Rounding::RoundPreferFloor,
            "round_prefer_ceil" => Rounding::RoundPreferCeil,
            "floor" => Rounding::Floor,
            "ceil" => Rounding::Ceil,
            _ => return None,
        })
    }

    fn apply(self, c: f64) -> f64 {
        let f = c - c.floor();
        match self {
            Rounding::RoundPreferFloor if f <= 0.5 => c.floor(),
            Rounding::RoundPreferCeil if f < 0.5 => c.floor(),
            Rounding::Floor => c.floor(),
            _ => c.ceil(),
        }
    }
}

/// Whether `mode` is a `coordinate_transformation_mode` handled here.
pub(crate) fn known_coordinate_mode(mode: &str) -> bool {
    matches!(
        mode,
        "half_pixel"
            | "half_pixel_symmetric"
            | "pytorch_half_pixel"
            | "asymmetric"
            | "align_corners"
    )
}

/// The input coordinate of output index `y` on an axis of `len_in` elements resized to
/// `len_out` with `scale` (ONNX's formulas, as the reference computes them).
fn source(mode: &str, y: usize, len_in: usize, len_out: usize, scale: f64) -> f64 {
    let (y, len_in_f, s) = (y as f64, len_in as f64, scale);
    let len = len_in_f * s;
    match mode {
        "half_pixel_symmetric" => {
            let offset = len_in_f / 2.0 * (1.0 - len_out as f64 / len);
            offset + (y + 0.5) / s - 0.5
        }
        "pytorch_half_pixel" if len == 1.0 => -0.5,
        "asymmetric" => y / s,
        "align_corners" if len == 1.0 => 0.0,
        "align_corners" => y * (len_in_f - 1.0) / (len - 1.0),
        _ => (y + 0.5) / s - 0.5,
    }
}

/// Per output index of one axis: the input index (nearest).
pub(crate) fn nearest_map(
    mode: &str,
    rounding: Rounding,
    len_in: usize,
    len_out: usize,
    scale: f64,
) -> Vec<Option<usize>> {
    let last = len_in as i64 - 1;
    (0..len_out)
        .map(|y| {
            let c = source(mode, y, len_in, len_out, scale);
            let i = if c.fract() == 0.0 {
                c
            } else {
                rounding.apply(c)
            };
            Some((i as i64).clamp(0, last) as usize)
        })
        .collect()
}

/// Per output index of one axis: the two taps `(i0, i1, w0, w1)` of linear sampling
/// (`w1 = 0` on an element; indices clamped to the input).
pub(crate) fn linear_taps(
    mode: &str,
    len_in: usize,
    len_out: usize,
    scale: f64,
) -> Vec<(usize, usize, f32, f32)> {
    let clamp = |i: i64| i.clamp(0, len_in as i64 - 1) as usize;
    (0..len_out)
        .map(|y| {
            let c = source(mode, y, len_in, len_out, scale);
            // As the reference: a coordinate on an element is 1 past the one before.
            let ratio = if c.fract() == 0.0 { 1.0 } else { c - c.floor() };
            let base = (c - ratio).round() as i64;
            let (w0, w1) = ((1.0 - ratio).max(0.0), ratio);
            if w0 == 0.0 {
                (clamp(base + 1), clamp(base + 1), w1 as f32, 0.0)
            } else {
                (clamp(base), clamp(base + 1), w0 as f32, w1 as f32)
            }
        })
        .collect()
}

/// Two taps of linear sampling: input indices and weights.
pub(crate) type Taps = (usize, usize, f32, f32);

/// Linear Resize of the last two axes of a tensor seen as `[planes, h, w]`, or of the last
/// three of one seen as `[planes, d, h, w]` (the planes counted by the output's length).
#[derive(Clone, Debug)]
pub(crate) struct LinearResizeOp {
    pub x: Src,
    pub in_hw: (usize, usize),
    /// Per output row and per output column, the two taps.
    pub rows: Vec<Taps>,
    pub cols: Vec<Taps>,
    /// A volume's input depth and the taps per output slice.
    pub depth: Option<(usize, Vec<Taps>)>,
    /// The channel count when the input and the output are held channels-last (a 2-D
    /// resize inside a conv chain, see `exec/layout.rs`): the planes are then images of
    /// pixels `c` values wide.
    pub channels_last: Option<usize>,
}

impl LinearResizeOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        let depth = self.depth.as_ref().map_or(0, |(_, t)| vec_bytes(t));
        vec_bytes(&self.rows) + vec_bytes(&self.cols) + depth
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa, pool: &Pool) {
        let x = sources.get(self.x);
        let (ih, iw) = self.in_hw;
        let (oh, ow) = (self.rows.len(), self.cols.len());
        if ih * iw == 0 || oh * ow == 0 {
            return;
        }
        if let Some((id, slices)) = &self.depth {
            return self.run_volume(x, *id, slices, out);
        }
        if let Some(c) = self.channels_last {
            return self.run_nhwc(x, c, out, isa, pool);
        }
        for (p, dst) in out.chunks_exact_mut(oh * ow).enumerate() {
            let src = &x[p * ih * iw..(p + 1) * ih * iw];
            for (&(y0, y1, a0, a1), drow) in self.rows.iter().zip(dst.chunks_exact_mut(ow)) {
                let (r0, r1) = (&src[y0 * iw..(y0 + 1) * iw], &src[y1 * iw..(y1 + 1) * iw]);
                for (d, &(x0, x1, b0, b1)) in drow.iter_mut().zip(&self.cols) {
                    // Height first, then width, as the reference's axis order; a tap of
                    // weight 0 is left out so that a NaN beside the point cannot leak in.
                    let v0 = tap(r0[x0], a0, r1[x0], a1);
                    let v1 = tap(r0[x1], a0, r1[x1], a1);
                    *d = tap(v0, b0, v1, b1);
                }
            }
        }
    }
}

impl LinearResizeOp {
    /// [`LinearResizeOp::run`] over NHWC images: each output pixel mixes four input
    /// pixels channel by channel (contiguous, so the loop vectorizes), each channel in the
    /// order the planes' loop mixes it, so the bits are the same; compiled for the ISA
    /// and split among the threads by output rows.
    fn run_nhwc(&self, x: &[f32], c: usize, out: &mut [f32], isa: Isa, pool: &Pool) {
        let (ih, iw) = self.in_hw;
        let (oh, ow) = (self.rows.len(), self.cols.len());
        let (row_in, row_out) = (iw * c, ow * c);
        if row_out == 0 {
            return;
        }
        let n = out.len() / (oh * row_out) * (oh * row_out);
        split_out(pool, &mut out[..n], row_out, |start, part| {
            on_isa(isa, || {
                for (r, drow) in part.chunks_exact_mut(row_out).enumerate() {
                    let row = start / row_out + r;
                    let (p, (y0, y1, a0, a1)) = (row / oh, self.rows[row % oh]);
                    let src = &x[p * ih * row_in..(p + 1) * ih * row_in];
                    let r0 = &src[y0 * row_in..(y0 + 1) * row_in];
                    let r1 = &src[y1 * row_in..(y1 + 1) * row_in];
                    for (d, &(x0, x1, b0, b1)) in drow.chunks_exact_mut(c).zip(&self.cols) {
                        let (p00, p10) = (&r0[x0 * c..][..c], &r1[x0 * c..][..c]);
                        let (p01, p11) = (&r0[x1 * c..][..c], &r1[x1 * c..][..c]);
                        for (i, d) in d.iter_mut().enumerate() {
                            let v0 = tap(p00[i], a0, p10[i], a1);
                            let v1 = tap(p01[i], a0, p11[i], a1);
                            *d = tap(v0, b0, v1, b1);
                        }
                    }
                }
            })
        });
    }

    /// The volume case: depth first, then height, then width.
    fn run_volume(&self, x: &[f32], id: usize, slices: &[Taps], out: &mut [f32]) {
        let (ih, iw) = self.in_hw;
        let (od, oh, ow) = (slices.len(), self.rows.len(), self.cols.len());
        let plane = ih * iw;
        if id * od == 0 {
            return;
        }
        for (p, dst) in out.chunks_exact_mut(od * oh * ow).enumerate() {
            let src = &x[p * id * plane..(p + 1) * id * plane];
            for (&(z0, z1, c0, c1), dslice) in slices.iter().zip(dst.chunks_exact_mut(oh * ow)) {
                let (s0, s1) = (
                    &src[z0 * plane..(z0 + 1) * plane],
                    &src[z1 * plane..(z1 + 1) * plane],
                );
                // The depth mix of element `i` of a slice.
                let d = |i: usize| tap(s0[i], c0, s1[i], c1);
                for (&(y0, y1, a0, a1), drow) in self.rows.iter().zip(dslice.chunks_exact_mut(ow)) {
                    for (o, &(x0, x1, b0, b1)) in drow.iter_mut().zip(&self.cols) {
                        let v0 = tap(d(y0 * iw + x0), a0, d(y1 * iw + x0), a1);
                        let v1 = tap(d(y0 * iw + x1), a0, d(y1 * iw + x1), a1);
                        *o = tap(v0, b0, v1, b1);
                    }
                }
            }
        }
    }
}

/// `a * wa + b * wb`, without `b` when its weight is 0.
#[inline(always)]
fn tap(a: f32, wa: f32, b: f32, wb: f32) -> f32 {
    if wb == 0.0 {
        a * wa
    } else {
        a * wa + b * wb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_follow_the_coordinate_modes() {
        // x2 upsampling of 2 elements, half_pixel: -0.25, 0.25, 0.75, 1.25.
        let t = linear_taps("half_pixel", 2, 4, 2.0);
        assert_eq!(t[0], (0, 0, 0.25, 0.75));
        assert_eq!(t[1], (0, 1, 0.75, 0.25));
        assert_eq!(
            nearest_map("asymmetric", Rounding::Floor, 2, 4, 2.0),
            [Some(0), Some(0), Some(1), Some(1)]
        );
        assert_eq!(
            nearest_map("half_pixel", Rounding::RoundPreferCeil, 3, 1, 1.0 / 3.0),
            [Some(1)]
        );
    }
}
