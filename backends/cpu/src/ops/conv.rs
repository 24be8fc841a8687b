//! Convolution (1-D and 2-D, grouped, dilated, strided, padded), lowered three ways:
//!
//! - **pointwise** (1x1 kernel, stride 1, no padding): the input plane *is* the `K x N`
//!   right operand of a GEMM, so no copy is made;
//! - **im2col**: the receptive fields are unrolled into a scratch matrix (zeros where the
//!   window overhangs the padding), then one GEMM per group;
//! - **depthwise** (one input channel per group, several groups): a direct kernel, since
//!   a per-channel GEMM would have `M = 1`.
//!
//! In the GEMM forms the weights are the left operand (`M = out channels / group`,
//! `K = in channels / group * kernel size`), packed once at init when constant, and the bias
//! and fused activation run in the GEMM epilogue. A 1-D convolution is a 2-D one of
//! height 1.

use baton_delegate_api::shape::ConvGeometry;

use super::depthwise::{DepthwisePlan, DwShape};
use super::{EpilogueSpec, Operand, RunCtx, Sources, Src};
use crate::gemm_old::{gemm_parallel, Lhs, MatMut, MatRef, MicroKernel, PackedLhs, Rhs};
use crate::pool::Disjoint;

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

    /// The GEMM depth: one group's receptive field.
    pub(crate) fn kg(&self) -> usize {
        self.cg() * self.kh * self.kw
    }

    pub(crate) fn in_plane(&self) -> usize {
        self.h * self.w
    }

    pub(crate) fn out_plane(&self) -> usize {
        self.oh * self.ow
    }
}

/// How a convolution is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Pointwise,
    Im2col,
    Depthwise,
}

/// The weights: packed per group when constant and used by a GEMM, else raw.
#[derive(Clone, Debug)]
enum Weights {
    Packed(Vec<PackedLhs>),
    Owned(Vec<f32>),
    Runtime(Src),
}

/// A prepared convolution.
#[derive(Clone, Debug)]
pub(crate) struct ConvOp {
    geom: Geom,
    path: Path,
    x: Src,
    weights: Weights,
    /// Rows are output channels, columns output pixels.
    epilogue: EpilogueSpec,
    /// The direct kernel's plan, on the depthwise path.
    depthwise: Option<DepthwisePlan>,
}

impl ConvOp {
    pub fn new(
        kernel: &MicroKernel,
        geometry: &ConvGeometry,
        x: Src,
        w: Operand<'_>,
        epilogue: EpilogueSpec,
    ) -> ConvOp {
        let geom = Geom::new(geometry);
        let path = if geom.group > 1 && geom.group == geom.c {
            Path::Depthwise
        } else if geom.kh == 1
            && geom.kw == 1
            && geom.sh == 1
            && geom.sw == 1
            && geom.ph == 0
            && geom.pw == 0
            && geom.oh == geom.h
            && geom.ow == geom.w
        {
            Path::Pointwise
        } else {
            Path::Im2col
        };
        let weights = match (w, path) {
            (Operand::Runtime(src), _) => Weights::Runtime(src),
            (Operand::Const(data), Path::Depthwise) => Weights::Owned(data.into_owned()),
            (Operand::Const(data), _) => {
                let (mg, kg) = (geom.mg(), geom.kg());
                let packed = (0..geom.group)
                    .map(|g| {
                        let view = MatRef {
                            data: &data[g * mg * kg..],
                            rs: kg,
                            cs: 1,
                        };
                        PackedLhs::new(kernel, view, mg, kg)
                    })
                    .collect();
                Weights::Packed(packed)
            }
        };
        let depthwise = (path == Path::Depthwise).then(|| {
            let g = &geom;
            let shape = DwShape {
                h: g.h,
                w: g.w,
                kh: g.kh,
                kw: g.kw,
                sh: g.sh,
                sw: g.sw,
                dh: g.dh,
                dw: g.dw,
                ph: g.ph,
                pw: g.pw,
                oh: g.oh,
                ow: g.ow,
            };
            DepthwisePlan::new(shape, kernel.isa())
        });
        ConvOp {
            geom,
            path,
            x,
            weights,
            epilogue,
            depthwise,
        }
    }

    /// Grows the scratch buffers this op needs.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        let g = &self.geom;
        if self.path == Path::Im2col {
            let len = g.kg() * g.out_plane();
            if ctx.im2col.len() < len {
                ctx.im2col.resize(len, 0.0);
            }
        }
        match &self.depthwise {
            Some(plan) => ctx.reserve_depthwise(plan.scratch_len()),
            None => ctx.reserve_gemm(g.mg(), g.out_plane(), g.kg()),
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let g = &self.geom;
        let x = sources.get(self.x);
        let w: &[f32] = match &self.weights {
            Weights::Packed(_) => &[],
            Weights::Owned(w) => w,
            Weights::Runtime(src) => sources.get(*src),
        };
        let epilogue = self.epilogue.resolve_old(sources);
        if let Some(plan) = &self.depthwise {
            let (mult, ks, p) = (g.mg(), g.kh * g.kw, g.out_plane());
            let out = Disjoint::new(out);
            let scratch = &ctx.depthwise;
            // One task per input channel (and its `mult` output channels).
            ctx.pool.run(g.batch * g.c, &|task, worker| {
                let (n, ic) = (task / g.c, task % g.c);
                let plane = &x[(n * g.c + ic) * g.in_plane()..][..g.in_plane()];
                let oc = ic * mult;
                let filters = &w[oc * ks..(oc + mult) * ks];
                // SAFETY: each task writes the planes of its own output channels.
                let dst = unsafe { out.range((n * g.m + oc) * p, mult * p) };
                let mut s = scratch[worker].lock().unwrap_or_else(|e| e.into_inner());
                plan.run_channel(plane, filters, dst, oc, &epilogue, &mut s);
            });
            return;
        }
        let (mg, kg, p) = (g.mg(), g.kg(), g.out_plane());
        let RunCtx {
            conv_kernel: kernel,
            pool,
            gemm: scratch,
            im2col: cols,
            ..
        } = ctx;
        for n in 0..g.batch {
            for grp in 0..g.group {
                let x_off = ((n * g.c + grp * g.cg()) * g.in_plane()).min(x.len());
                let rhs = match self.path {
                    Path::Pointwise => Rhs::Strided(MatRef {
                        data: &x[x_off..],
                        rs: g.in_plane(),
                        cs: 1,
                    }),
                    _ => {
                        im2col(g, &x[x_off..], &mut cols[..kg * p]);
                        Rhs::Strided(MatRef {
                            data: &cols[..kg * p],
                            rs: p,
                            cs: 1,
                        })
                    }
                };
                let lhs = match &self.weights {
                    Weights::Packed(packed) => Lhs::Packed(&packed[grp]),
                    _ => Lhs::Strided(MatRef {
                        data: &w[(grp * mg * kg).min(w.len())..],
                        rs: kg,
                        cs: 1,
                    }),
                };
                let c = MatMut {
                    data: &mut out[(n * g.m + grp * mg) * p..],
                    rs: p,
                };
                let ep = epilogue.at_row(grp * mg);
                gemm_parallel(pool, scratch, kernel, mg, p, kg, lhs, rhs, c, &ep);
            }
        }
    }
}

/// Unrolls one group's receptive fields: row `(ci, ki, kj)`, column `(oy, ox)` holds the
/// input tap of that output pixel, or 0 where the window lies in the padding.
fn im2col(g: &Geom, x: &[f32], cols: &mut [f32]) {
    let p = g.out_plane();
    let mut rows = cols.chunks_exact_mut(p.max(1));
    for ci in 0..g.cg() {
        let plane = &x[ci * g.in_plane()..(ci + 1) * g.in_plane()];
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let Some(row) = rows.next() else { return };
                // Output columns whose tap falls inside the input row: ox_lo..ox_hi.
                let offset = (kj * g.dw) as isize - g.pw as isize;
                let ox_lo = ceil_div_nonneg(-offset, g.sw).min(g.ow);
                let ox_hi = ceil_div_nonneg(g.w as isize - offset, g.sw).clamp(ox_lo, g.ow);
                for oy in 0..g.oh {
                    let dst = &mut row[oy * g.ow..(oy + 1) * g.ow];
                    let iy = (oy * g.sh + ki * g.dh) as isize - g.ph as isize;
                    if iy < 0 || iy >= g.h as isize {
                        dst.fill(0.0);
                        continue;
                    }
                    let src = &plane[iy as usize * g.w..(iy as usize + 1) * g.w];
                    dst[..ox_lo].fill(0.0);
                    dst[ox_hi..].fill(0.0);
                    for (ox, d) in (ox_lo..ox_hi).zip(&mut dst[ox_lo..ox_hi]) {
                        *d = src[(ox as isize * g.sw as isize + offset) as usize];
                    }
                }
            }
        }
    }
}

/// `ceil(v / d)` for `v` possibly negative, floored at 0.
fn ceil_div_nonneg(v: isize, d: usize) -> usize {
    if v <= 0 {
        0
    } else {
        (v as usize).div_ceil(d)
    }
}
