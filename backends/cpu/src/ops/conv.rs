//! Convolution (1-D and 2-D, grouped, dilated, strided, padded) on channels-last data,
//! lowered three ways, all on the weight-stationary GEMM's terms (rows of `A` = output
//! pixels, columns = output channels, weights packed once with the bias in their panels):
//!
//! - **pointwise** (1x1 kernel, stride 1, no padding): the NHWC input *is* `A`, read in
//!   place at a row stride of `C`;
//! - **indirect** (every other kernel): an indirection buffer made at init gives, for each
//!   output pixel and kernel tap, the input pixel read, or a zero row in the padding; no
//!   im2col copy is made;
//! - **depthwise** (one input channel per group, several groups): a direct kernel over
//!   channel vectors (`depthwise.rs`), since a per-channel GEMM would have `N = 1`.
//!
//! The executable keeps conv chains channels-last (see `exec/layout.rs`); where the input
//! or the output must be NCHW (a subgraph boundary, a reader that needs it), the op
//! converts it once into a scratch buffer. A 1-D convolution is a 2-D one of height 1.
//! A fused constant Add (a per-channel or scalar bias) is folded into the packed bias, and
//! the activation is the GEMM's clamp. A fused residual Add (a tensor of the output's
//! shape, held in the output's layout: see `exec/layout.rs`) is a strided add of the
//! GEMM's epilogue when the output is written channels-last in place; otherwise
//! (depthwise, or an NCHW output converted from scratch) it is one pass over the finished
//! output, which still saves the separate Add step and its buffer traffic.

use baton_delegate_api::shape::ConvGeometry;

use super::depthwise::DepthwisePlan;
use super::elementwise::activate;
use super::layout::{pixels_to_nchw, to_nchw_f32, to_nhwc_f32};
use super::{vec_bytes, RunCtx, Sources, Src};
use crate::gemm::{
    clip, gemm_parallel, gemm_row_blocks, row_block, Activation, Add, Epilogue, Indirection,
    MatMut, MicroKernel, PackedB, Rows, ZERO_ROW,
};
use crate::prepack::{Packs, Panel};

/// Conv geometry normalised to two spatial axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geom {
    pub(crate) batch: usize,
    pub(crate) c: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) m: usize,
    pub(crate) group: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) sh: usize,
    pub(crate) sw: usize,
    pub(crate) dh: usize,
    pub(crate) dw: usize,
    pub(crate) ph: usize,
    pub(crate) pw: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
}

impl Geom {
    pub(crate) fn new(g: &ConvGeometry) -> Geom {
        let w = &g.window;
        // 1-D: a leading spatial axis of extent 1 with a 1-tap window.
        let two = |v: &[usize], fill: usize| -> (usize, usize) {
            if v.len() == 2 {
                (v[0], v[1])
            } else {
                (fill, v[0])
            }
        };
        let (h, wd) = two(&g.in_spatial, 1);
        let (kh, kw) = two(&w.kernel, 1);
        let (sh, sw) = two(&w.strides, 1);
        let (dh, dw) = two(&w.dilations, 1);
        let (ph, pw) = two(&w.pad_begin, 0);
        let (oh, ow) = two(&g.out_spatial, 1);
        Geom {
            batch: g.batch,
            c: g.in_channels,
            h,
            w: wd,
            m: g.out_channels,
            group: g.group,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            ph,
            pw,
            oh,
            ow,
        }
    }

    /// Input channels per group.
    pub(crate) fn cg(&self) -> usize {
        self.c / self.group
    }

    /// Output channels per group.
    pub(crate) fn mg(&self) -> usize {
        self.m / self.group
    }

    pub(crate) fn in_plane(&self) -> usize {
        self.h * self.w
    }

    pub(crate) fn out_plane(&self) -> usize {
        self.oh * self.ow
    }

    /// For each output row `r` (`(n * oh + oy) * ow + ox`), in order, calls `f` with the
    /// offsets of the input pixels its taps (`ki * kw + kj`) read, `pixel * scale` with
    /// `pixel = (n * h + iy) * w + ix`, or [`ZERO_ROW`] for a tap in the padding.
    ///
    /// The offsets are `u32` (the tables are the largest thing a convolution keeps after
    /// its weights); an input of `u32::MAX` elements or more is an error, before any call.
    ///
    /// The coordinates are stepped, not divided out of `r` and `t`: this builds the
    /// indirection tables at init, where per-element divisions were most of a model's
    /// load time.
    pub(crate) fn tap_rows(&self, scale: usize, mut f: impl FnMut(&[u32])) -> Result<(), String> {
        let len = [self.h, self.w, scale]
            .iter()
            .try_fold(self.batch, |len, &d| len.checked_mul(d));
        if len.is_none_or(|len| len >= ZERO_ROW as usize) {
            return Err(format!(
                "the input of {} x {} x {} x {scale} elements is too large for a convolution's \
                 32-bit offsets",
                self.batch, self.h, self.w
            ));
        }
        let taps = self.kh * self.kw;
        let mut row = vec![ZERO_ROW; taps];
        let inside = |o: usize, k: usize, s: usize, d: usize, p: usize, n: usize| {
            (o * s + k * d).checked_sub(p).filter(|&i| i < n)
        };
        for n in 0..self.batch {
            for oy in 0..self.oh {
                for ox in 0..self.ow {
                    for ki in 0..self.kh {
                        let iy = inside(oy, ki, self.sh, self.dh, self.ph, self.h);
                        for kj in 0..self.kw {
                            let ix = inside(ox, kj, self.sw, self.dw, self.pw, self.w);
                            row[ki * self.kw + kj] = match (iy, ix) {
                                // Below `len`, checked above to fit.
                                (Some(y), Some(x)) => {
                                    (((n * self.h + y) * self.w + x) * scale) as u32
                                }
                                _ => ZERO_ROW,
                            };
                        }
                    }
                    f(&row);
                }
            }
        }
        Ok(())
    }
}

/// How a convolution is computed.
#[derive(Clone, Debug)]
enum Path {
    Pointwise,
    Indirect(Indirection),
    Depthwise(DepthwisePlan),
}

/// The weights and bias: packed at init when both are constant, else packed on every call.
#[derive(Clone, Debug)]
enum Weights {
    /// One packing per group (GEMM paths) or the depthwise layout.
    Packed(Vec<PackedB>),
    Depthwise(Panel),
    Runtime {
        w: WeightData,
        /// The run-time bias; the constant part is in `ConvOp::bias`.
        bias: Option<Src>,
    },
}

/// Weights that are packed per call: constant (with a run-time bias) or run-time.
#[derive(Clone, Debug)]
enum WeightData {
    Const(Vec<f32>),
    Runtime(Src),
}

/// A prepared convolution.
#[derive(Clone, Debug)]
pub(crate) struct ConvOp {
    geom: Geom,
    path: Path,
    x: Src,
    /// Whether the input and the output are held channels-last by the executable.
    in_nhwc: bool,
    out_nhwc: bool,
    weights: Weights,
    /// The constant bias (conv bias and fused Add), `M` values.
    bias: Vec<f32>,
    /// A fused residual, in the output's layout.
    residual: Option<Src>,
    lo: f32,
    hi: f32,
    /// The activation after the clamp.
    act: Option<Activation>,
}

/// What lowering knows of a convolution's operands.
pub(crate) struct ConvSpec<'a> {
    pub x: Src,
    pub in_nhwc: bool,
    pub out_nhwc: bool,
    /// Constant weights, or where to read them.
    pub w: Result<&'a [f32], Src>,
    /// The constant bias of `M` values (zeros when none), and a run-time bias.
    pub bias: Vec<f32>,
    pub runtime_bias: Option<Src>,
    /// A fused residual Add's operand, held in the output's layout.
    pub residual: Option<Src>,
    /// The clamp of the fused activation (`-inf, inf` when none).
    pub bounds: (f32, f32),
    /// An activation after the clamp.
    pub act: Option<Activation>,
}

impl ConvOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        let table = match &self.path {
            Path::Indirect(ind) => ind.capacity_bytes(),
            Path::Depthwise(plan) => plan.capacity_bytes(),
            Path::Pointwise => 0,
        };
        let copied = match &self.weights {
            Weights::Runtime {
                w: WeightData::Const(w),
                ..
            } => vec_bytes(w),
            _ => 0,
        };
        table + copied + vec_bytes(&self.bias)
    }

    pub fn new(
        packs: &mut Packs<'_>,
        kernel: &MicroKernel,
        geometry: &ConvGeometry,
        spec: ConvSpec<'_>,
    ) -> Result<ConvOp, String> {
        let g = Geom::new(geometry);
        let path = if g.group > 1 && g.group == g.c {
            Path::Depthwise(DepthwisePlan::new(&g, kernel.isa())?)
        } else if g.kh == 1
            && g.kw == 1
            && g.sh == 1
            && g.sw == 1
            && g.ph == 0
            && g.pw == 0
            && g.oh == g.h
            && g.ow == g.w
        {
            Path::Pointwise
        } else {
            // Filled in place, pixel by pixel, in the order the tiles want.
            let (m, taps) = (g.batch * g.out_plane(), g.kh * g.kw);
            let mut table = Indirection::builder(kernel, m, taps, g.cg());
            g.tap_rows(g.c, |row| table.push(row))?;
            Path::Indirect(table.finish())
        };
        let weights = match (spec.w, spec.runtime_bias) {
            (Ok(w), None) => match &path {
                Path::Depthwise(_) => {
                    let len = g.m * (1 + g.kh * g.kw);
                    Weights::Depthwise(packs.take(len, |p| depthwise_layout(&g, w, &spec.bias, p)))
                }
                _ => Weights::Packed(
                    (0..g.group)
                        .map(|grp| {
                            let (mg, cg, taps) = (g.mg(), g.cg(), g.kh * g.kw);
                            let bias = &spec.bias[grp * mg..(grp + 1) * mg];
                            PackedB::new_in(packs, kernel, taps, cg, mg, Some(bias), |kk, j| {
                                group_weight(&g, w, grp, kk, j)
                            })
                        })
                        .collect(),
                ),
            },
            (w, bias) => Weights::Runtime {
                w: match w {
                    Ok(w) => WeightData::Const(w.to_vec()),
                    Err(src) => WeightData::Runtime(src),
                },
                bias,
            },
        };
        Ok(ConvOp {
            geom: g,
            path,
            x: spec.x,
            in_nhwc: spec.in_nhwc,
            out_nhwc: spec.out_nhwc,
            weights,
            bias: spec.bias,
            residual: spec.residual,
            lo: spec.bounds.0,
            hi: spec.bounds.1,
            act: spec.act,
        })
    }

    /// Whether the product writes NCHW block by block (`gemm_row_blocks`): one group, and
    /// nothing to add after the layout change.
    fn blocked_nchw(&self) -> bool {
        !self.out_nhwc
            && self.geom.group == 1
            && self.residual.is_none()
            && !matches!(self.path, Path::Depthwise(_))
    }

    /// Grows the scratch buffers this op needs.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        let g = &self.geom;
        if !self.in_nhwc {
            grow(&mut ctx.nhwc_in, g.batch * g.c * g.in_plane());
        }
        if self.blocked_nchw() {
            let rows = row_block(ctx.kernel, nchw_block(g.m));
            grow(&mut ctx.nhwc_out, ctx.pool.threads() * rows * g.m);
        } else if !self.out_nhwc {
            grow(&mut ctx.nhwc_out, g.batch * g.m * g.out_plane());
        }
        if let Weights::Runtime { .. } = self.weights {
            ctx.reserve_work(g.m);
            match self.path {
                Path::Depthwise(_) => grow(&mut ctx.dw_weights, g.m * (1 + g.kh * g.kw)),
                _ => ctx.rhs.reserve(ctx.kernel, g.kh * g.kw, g.cg(), g.mg()),
            }
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let g = &self.geom;
        let RunCtx {
            kernel,
            pool,
            rhs,
            work,
            nhwc_in,
            nhwc_out,
            dw_weights,
            ..
        } = ctx;
        let (in_len, out_len) = (g.batch * g.c * g.in_plane(), g.batch * g.m * g.out_plane());
        let x = if self.in_nhwc {
            sources.get(self.x)
        } else {
            let x = &mut nhwc_in[..in_len];
            to_nhwc_f32(
                pool,
                kernel.isa(),
                sources.get(self.x),
                (g.batch, g.c, g.in_plane()),
                x,
            );
            &*x
        };
        // The bias of a run-time packing: the constant part plus the run-time one.
        let (w, bias): (&[f32], &[f32]) = match &self.weights {
            Weights::Runtime { w, bias } => {
                let b = &mut work[..g.m];
                b.copy_from_slice(&self.bias);
                if let Some(src) = bias {
                    b.iter_mut()
                        .zip(sources.get(*src))
                        .for_each(|(b, v)| *b += v);
                }
                let w = match w {
                    WeightData::Const(w) => &w[..],
                    WeightData::Runtime(src) => sources.get(*src),
                };
                (w, &*b)
            }
            _ => (&[], &[]),
        };
        let m = g.batch * g.out_plane();
        // The residual goes in the GEMM's epilogue when the GEMM writes the final output.
        let in_gemm = self.out_nhwc && !matches!(self.path, Path::Depthwise(_));
        let after = self.residual.filter(|_| !in_gemm).map(|r| sources.get(r));
        let (lo, hi) = match after {
            Some(_) => (f32::NEG_INFINITY, f32::INFINITY),
            None => (self.lo, self.hi),
        };
        let mut ep = Epilogue::new();
        ep.clamp(lo, hi);
        // The activation in the product's epilogue (or the depthwise kernel's tasks),
        // unless something follows its store: a residual added after the layout change.
        let act_in_kernel = after.is_none();
        if act_in_kernel {
            ep.activate(self.act);
        }
        if self.blocked_nchw() {
            // One group, no residual after: each block of output pixels goes to its NCHW
            // places as soon as it is computed, from the NHWC scratch.
            let b = match &self.weights {
                Weights::Packed(p) => &p[0],
                _ => {
                    pack_group(kernel, g, 0, w, bias, rhs);
                    &*rhs
                }
            };
            let a = match &self.path {
                Path::Indirect(ind) => Rows::Indirect { data: x, ind },
                _ => Rows::Dense { data: x, lda: g.c },
            };
            let parts = crate::pool::Disjoint::new(&mut out[..out_len]);
            let (isa, plane) = (kernel.isa(), g.out_plane());
            let move_block = |rows: std::ops::Range<usize>, c_rows: &[f32]| {
                let mut p = rows.start;
                while p < rows.end {
                    let (image, first) = (p / plane, p % plane);
                    let n = (plane - first).min(rows.end - p);
                    let src = &c_rows[(p - rows.start) * g.m..];
                    // SAFETY: the pixels of `rows` are this block's alone.
                    unsafe { pixels_to_nchw(isa, src, (g.m, plane), (image, first, n), &parts) };
                    p += n;
                }
            };
            let block = nchw_block(g.m);
            gemm_row_blocks(pool, kernel, m, a, b, nhwc_out, &ep, block, &move_block);
            return;
        }
        let y: &mut [f32] = if self.out_nhwc {
            &mut out[..out_len]
        } else {
            &mut nhwc_out[..out_len]
        };
        match (&self.path, &self.weights) {
            (Path::Depthwise(plan), weights) => {
                let packed: &[f32] = match weights {
                    Weights::Depthwise(p) => p,
                    _ => {
                        let len = g.m * (1 + g.kh * g.kw);
                        let dst = &mut dw_weights[..len];
                        depthwise_layout(g, w, bias, dst);
                        &*dst
                    }
                };
                plan.run(pool, x, packed, y, (lo, hi), ep.activation());
            }
            (path, weights) => {
                for grp in 0..g.group {
                    let b = match weights {
                        Weights::Packed(p) => &p[grp],
                        _ => {
                            pack_group(kernel, g, grp, w, bias, rhs);
                            &*rhs
                        }
                    };
                    let data = &x[grp * g.cg()..];
                    let a = match path {
                        Path::Indirect(ind) => Rows::Indirect { data, ind },
                        _ => Rows::Dense { data, lda: g.c },
                    };
                    let c = MatMut {
                        data: &mut y[grp * g.mg()..],
                        rs: g.m,
                    };
                    let mut ep = ep;
                    if let Some(r) = self.residual.filter(|_| in_gemm) {
                        ep.add(Add {
                            data: &sources.get(r)[grp * g.mg()..],
                            rs: g.m,
                            cs: 1,
                            scale: 1.0,
                        });
                    }
                    gemm_parallel(pool, kernel, m, a, b, c, &ep);
                }
            }
        }
        if !self.out_nhwc {
            to_nchw_f32(
                pool,
                kernel.isa(),
                &nhwc_out[..out_len],
                (g.batch, g.m, g.out_plane()),
                out,
            );
        }
        if let Some(r) = after {
            for (o, &r) in out[..out_len].iter_mut().zip(r) {
                *o = clip(*o + r, self.lo, self.hi);
            }
        }
        if let Some(f) = self.act.filter(|_| !act_in_kernel) {
            activate(f, kernel.isa(), pool, &mut out[..out_len]);
        }
    }
}

/// The output rows (pixels) of `m` channels a convolution writing NCHW computes before
/// moving them (`gemm_row_blocks`): about 32 KiB, which the move reads back from L1 or
/// L2 while they are there.
fn nchw_block(m: usize) -> usize {
    (32 * 1024 / (4 * m.max(1))).max(1)
}

fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

/// Packs group `grp`'s weights (`[M, C/group, kh, kw]`) tap-major for the GEMM, with its
/// slice of `bias`.
fn pack_group(
    kernel: &MicroKernel,
    g: &Geom,
    grp: usize,
    w: &[f32],
    bias: &[f32],
    dst: &mut PackedB,
) {
    let (mg, cg, taps) = (g.mg(), g.cg(), g.kh * g.kw);
    let bias = &bias[grp * mg..(grp + 1) * mg];
    dst.pack(kernel, taps, cg, mg, Some(bias), |kk, j| {
        group_weight(g, w, grp, kk, j)
    });
}

/// Weight `(kk, j)` of group `grp`'s GEMM operand: depth `kk` is tap-major
/// (`tap * C/group + channel`), column `j` the group's output channel.
fn group_weight(g: &Geom, w: &[f32], grp: usize, kk: usize, j: usize) -> f32 {
    let (mg, cg, taps) = (g.mg(), g.cg(), g.kh * g.kw);
    let (t, c) = (kk / cg, kk % cg);
    w[((grp * mg + j) * cg + c) * taps + t]
}

/// Writes the depthwise layout into `dst`: `M` bias values, then for each tap the `M`
/// channel weights.
fn depthwise_layout(g: &Geom, w: &[f32], bias: &[f32], dst: &mut [f32]) {
    let taps = g.kh * g.kw;
    let (head, body) = dst.split_at_mut(g.m);
    head.copy_from_slice(bias);
    for (t, row) in body.chunks_exact_mut(g.m.max(1)).enumerate().take(taps) {
        for (oc, v) in row.iter_mut().enumerate() {
            *v = w[oc * taps + t];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1x1-output convolution whose two dilated taps per axis read the first and the
    /// last input pixel of a `1 x h x w x 1` input.
    fn corners(h: usize, w: usize) -> Geom {
        Geom {
            batch: 1,
            c: 1,
            h,
            w,
            m: 1,
            group: 1,
            kh: 2,
            kw: 2,
            sh: 1,
            sw: 1,
            dh: h - 1,
            dw: w - 1,
            ph: 0,
            pw: 0,
            oh: 1,
            ow: 1,
        }
    }

    /// The largest input whose offsets fit in 32 bits gets them exactly, up to its last
    /// pixel; one more column is refused before any table is built, not wrapped.
    #[test]
    fn offsets_are_exact_up_to_the_32_bit_limit_and_refused_past_it() {
        let (h, w) = (65_536, 65_535);
        let mut rows = Vec::new();
        corners(h, w)
            .tap_rows(1, |row| rows.push(row.to_vec()))
            .expect("fits");
        let last = (h * w - 1) as u32;
        assert_eq!(
            rows,
            vec![vec![0, w as u32 - 1, ((h - 1) * w) as u32, last]]
        );
        assert!(last < ZERO_ROW);
        let mut called = false;
        let err = corners(h, w + 1)
            .tap_rows(1, |_| called = true)
            .expect_err("too large");
        assert!(err.contains("32-bit"), "{err}");
        assert!(!called);
    }
}
