//! DeformConv on the GEMM: per image and group, the deformed columns (each kernel tap of
//! each input channel, sampled (bi)linearly at its learned offset and scaled by its mask)
//! are packed straight into the run-time `B` panels, then the group's weights multiply
//! them with the bias added in the epilogue.
//!
//! The usual convolution layout is turned around here (weights as `A`, columns as `B`):
//! the output is NCHW, `[out channels, pixels]` per image, which is exactly the GEMM's `C`
//! this way, so no transposition follows; and the columns, which change with every image,
//! are written once into the packing rather than into an im2col buffer and again into
//! panels. The weights are reordered at init so that their depth runs tap-major, the
//! packing's order. Each sample is interpolated in f64 (as the reference does) and
//! rounded once to f32 before the product.

use super::{RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, Add, Epilogue, MatMut, Rows};

/// The most spatial axes handled (1-D and 2-D convolutions, and 3-D).
const MAX_AXES: usize = 3;

/// The run-time operands of one execute.
#[derive(Clone, Copy)]
struct Operands<'a> {
    x: &'a [f32],
    offsets: &'a [f32],
    mask: Option<&'a [f32]>,
}

/// DeformConv's weights: reordered at init when constant, else reordered on every execute
/// into the run context's work space (the graph's `[M, C / group, kernel...]` layout).
#[derive(Clone, Debug)]
pub(crate) enum DeformWeights {
    Reordered(Vec<f32>),
    Runtime(Src),
}

/// DeformConv's bias: a constant, or read at run time.
#[derive(Clone, Debug)]
pub(crate) enum DeformBias {
    Const(Vec<f32>),
    Runtime(Src),
}

/// A prepared DeformConv node.
#[derive(Clone, Debug)]
pub(crate) struct DeformConvOp {
    pub x: Src,
    pub offsets: Src,
    pub mask: Option<Src>,
    /// Per group, `[out channels of the group, taps * in channels of the group]`, the
    /// depth tap-major (see [`DeformConvOp::reorder`]).
    pub weights: DeformWeights,
    pub bias: Option<DeformBias>,
    pub batch: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub group: usize,
    pub offset_groups: usize,
    pub in_spatial: Vec<usize>,
    pub out_spatial: Vec<usize>,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pad_begin: Vec<usize>,
}

impl DeformConvOp {
    fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    fn pixels(&self) -> usize {
        self.out_spatial.iter().product()
    }

    /// Reorders `w` (`[M, C / group, kernel...]`) into `out`, the per-group tap-major rows.
    pub fn reorder(w: &[f32], m: usize, c_per_group: usize, taps: usize, out: &mut [f32]) {
        for mi in 0..m {
            for c in 0..c_per_group {
                for t in 0..taps {
                    out[mi * c_per_group * taps + t * c_per_group + c] =
                        w[(mi * c_per_group + c) * taps + t];
                }
            }
        }
    }

    pub fn owned_bytes(&self) -> usize {
        let w = match &self.weights {
            DeformWeights::Reordered(v) => super::vec_bytes(v),
            DeformWeights::Runtime(_) => 0,
        };
        let b = match &self.bias {
            Some(DeformBias::Const(v)) => super::vec_bytes(v),
            _ => 0,
        };
        w + b
    }

    fn weights_len(&self) -> usize {
        self.out_channels * (self.in_channels / self.group) * self.taps()
    }

    pub fn reserve(&self, ctx: &mut RunCtx) {
        let cg = self.in_channels / self.group;
        ctx.rhs
            .reserve(ctx.kernel, 1, self.taps() * cg, self.pixels());
        if let DeformWeights::Runtime(_) = self.weights {
            ctx.reserve_work(self.weights_len());
        }
    }

    /// The deformed, masked sample of channel `c` of image `n` for tap `t` at output
    /// pixel `o`: `x` interpolated linearly along each axis between the neighbours of the
    /// offset position, neighbours outside the image reading 0.
    fn sample(&self, data: &Operands<'_>, n: usize, c: usize, t: usize, o: usize) -> f32 {
        let Operands { x, offsets, mask } = *data;
        let r = self.in_spatial.len();
        let (taps, pixels) = (self.taps(), self.pixels());
        let og = c / (self.in_channels / self.offset_groups);
        // The multi-indices of the tap and the output pixel, last axis fastest.
        let (mut ti, mut oi) = ([0usize; MAX_AXES], [0usize; MAX_AXES]);
        let (mut tr, mut or) = (t, o);
        for d in (0..r).rev() {
            ti[d] = tr % self.kernel[d];
            tr /= self.kernel[d];
            oi[d] = or % self.out_spatial[d];
            or /= self.out_spatial[d];
        }
        // Corners as (offset in the plane, weight), up to 2^r of them.
        let mut corners = [(0usize, 1.0f64); 1 << MAX_AXES];
        let mut count = 1;
        let mut stride = self.in_spatial.iter().product::<usize>();
        for d in 0..r {
            stride /= self.in_spatial[d];
            let at = (((n * self.offset_groups + og) * taps + t) * r + d) * pixels + o;
            let p = (oi[d] * self.strides[d] + ti[d] * self.dilations[d]) as f64
                - self.pad_begin[d] as f64
                + f64::from(offsets[at]);
            let f = p.floor();
            let frac = p - f;
            let mut next = [(0usize, 0.0f64); 1 << MAX_AXES];
            let mut kept = 0;
            for (k, wt) in [(f, 1.0 - frac), (f + 1.0, frac)] {
                if wt == 0.0 || k < 0.0 || k >= self.in_spatial[d] as f64 {
                    continue;
                }
                for &(off, cw) in &corners[..count] {
                    next[kept] = (off + k as usize * stride, cw * wt);
                    kept += 1;
                }
            }
            corners = next;
            count = kept;
        }
        let plane_len: usize = self.in_spatial.iter().product();
        let plane = &x[(n * self.in_channels + c) * plane_len..][..plane_len];
        let v: f64 = corners[..count]
            .iter()
            .map(|&(off, cw)| f64::from(plane[off]) * cw)
            .sum();
        let scale = mask.map_or(1.0, |m| {
            f64::from(m[((n * self.offset_groups + og) * taps + t) * pixels + o])
        });
        (scale * v) as f32
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let data = Operands {
            x: sources.get(self.x),
            offsets: sources.get(self.offsets),
            mask: self.mask.map(|m| sources.get(m)),
        };
        let (taps, pixels) = (self.taps(), self.pixels());
        let (cg, mg) = (
            self.in_channels / self.group,
            self.out_channels / self.group,
        );
        let depth = taps * cg;
        let RunCtx {
            kernel,
            pool,
            rhs,
            work,
            ..
        } = ctx;
        let weights: &[f32] = match &self.weights {
            DeformWeights::Reordered(v) => v,
            DeformWeights::Runtime(src) => {
                let out = &mut work[..self.weights_len()];
                Self::reorder(sources.get(*src), self.out_channels, cg, taps, out);
                out
            }
        };
        let bias: Option<&[f32]> = match &self.bias {
            Some(DeformBias::Const(v)) => Some(v),
            Some(DeformBias::Runtime(src)) => Some(sources.get(*src)),
            None => None,
        };
        for n in 0..self.batch {
            for g in 0..self.group {
                // One tap of depth `taps * cg` (dense rows of `A`), tap-major within.
                rhs.pack(kernel, 1, depth, pixels, None, |k, o| {
                    let (t, c) = (k / cg, g * cg + k % cg);
                    self.sample(&data, n, c, t, o)
                });
                let mut epilogue = Epilogue::new();
                if let Some(b) = bias {
                    epilogue.add(Add {
                        data: &b[g * mg..][..mg],
                        rs: 1,
                        cs: 0,
                        scale: 1.0,
                    });
                }
                let c = MatMut {
                    data: &mut out[(n * self.out_channels + g * mg) * pixels..][..mg * pixels],
                    rs: pixels,
                };
                let a = Rows::Dense {
                    data: &weights[g * mg * depth..][..mg * depth],
                    lda: depth,
                };
                gemm_parallel(pool, kernel, mg, a, rhs, c, &epilogue);
            }
        }
    }
}
