//! ConvTranspose (1-D and 2-D) as a GEMM and a col2im on the engine.
//!
//! For each batch item and group, `cols = Wᵀ · X`: `Wᵀ` is `[M/g x kernel] x C/g` (the
//! weights transposed once at init, the GEMM's rows), `X` the group's `C/g x pixels`
//! input planes (packed at run time, as a MatMul of two activations). Row `(m, tap)` of
//! `cols` holds what every input pixel sends through that tap; the col2im adds it into
//! output channel `m` at `pixel * stride + tap * dilation - pad`, a contiguous run of
//! input pixels landing on a strided run of output pixels. The output starts from the
//! bias. Each output channel's col2im is independent, so they are shared among the
//! pool's threads.

use super::{vec_bytes, RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, Epilogue, MatMut, Rows};
use crate::pool::Disjoint;

/// The geometry of a 1-D or 2-D transposed convolution (1-D as a height of 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeconvGeom {
    pub batch: usize,
    pub group: usize,
    /// Input channels per group and output channels per group.
    pub cg: usize,
    pub mg: usize,
    /// Input and output extents, and the kernel's.
    pub ih: usize,
    pub iw: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
    pub pad: (i64, i64),
}

impl DeconvGeom {
    fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// The rows of the GEMM (per group): every output channel's taps.
    fn rows(&self) -> usize {
        self.mg * self.taps()
    }

    fn pixels(&self) -> usize {
        self.ih * self.iw
    }
}

/// A prepared ConvTranspose.
#[derive(Debug)]
pub(crate) struct DeconvOp {
    x: Src,
    g: DeconvGeom,
    /// Per group, `Wᵀ`: row `m * taps + t` holds the `C/g` weights of output channel `m`,
    /// tap `t`.
    wt: Vec<f32>,
    /// One value per output channel.
    bias: Vec<f32>,
}

impl DeconvOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        vec_bytes(&self.wt) + vec_bytes(&self.bias)
    }

    /// `w` is the ONNX weight `[C, M/g, kernel...]`, `bias` `M` values.
    pub fn new(x: Src, g: DeconvGeom, w: &[f32], bias: Vec<f32>) -> DeconvOp {
        let (rows, cg) = (g.rows(), g.cg);
        let mut wt = vec![0f32; g.group * rows * cg];
        for grp in 0..g.group {
            for c in 0..cg {
                let src = &w[(grp * cg + c) * rows..(grp * cg + c + 1) * rows];
                for (r, &v) in src.iter().enumerate() {
                    wt[(grp * rows + r) * cg + c] = v;
                }
            }
        }
        debug_assert_eq!(bias.len(), g.group * g.mg);
        DeconvOp { x, g, wt, bias }
    }

    /// Grows the run-time packing and the columns buffer.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        let g = &self.g;
        ctx.rhs.reserve(ctx.kernel, 1, g.cg, g.pixels());
        ctx.reserve_work(g.rows() * g.pixels());
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let g = self.g;
        let RunCtx {
            kernel,
            pool,
            rhs,
            work,
            ..
        } = ctx;
        let (rows, pixels, cg) = (g.rows(), g.pixels(), g.cg);
        let plane = g.oh * g.ow;
        let cols = &mut work[..rows * pixels];
        for n in 0..g.batch {
            for grp in 0..g.group {
                let x0 = (n * g.group + grp) * cg * pixels;
                let m0 = (n * g.group + grp) * g.mg;
                if plane == 0 {
                    continue;
                }
                let y = &mut out[m0 * plane..(m0 + g.mg) * plane];
                for (m, ch) in y.chunks_exact_mut(plane).enumerate() {
                    ch.fill(self.bias[grp * g.mg + m]);
                }
                if pixels == 0 || rows == 0 || cg == 0 {
                    continue;
                }
                rhs.pack_strided(kernel, cg, pixels, &x[x0..x0 + cg * pixels], pixels, 1, 1.0);
                let a = Rows::Dense {
                    data: &self.wt[grp * rows * cg..(grp + 1) * rows * cg],
                    lda: cg,
                };
                let c = MatMut {
                    data: &mut cols[..],
                    rs: pixels,
                };
                gemm_parallel(pool, kernel, rows, a, rhs, c, &Epilogue::new());
                col2im(pool, &g, cols, y);
            }
        }
    }
}

/// Adds each row of `cols` into its output channel of `y` (`M/g` planes).
fn col2im(pool: &crate::pool::Pool, g: &DeconvGeom, cols: &[f32], y: &mut [f32]) {
    let plane = g.oh * g.ow;
    let (taps, pixels) = (g.taps(), g.pixels());
    let channel = |m: usize, dst: &mut [f32]| {
        for t in 0..taps {
            let (ty, tx) = (t / g.kw, t % g.kw);
            let row = &cols[(m * taps + t) * pixels..(m * taps + t + 1) * pixels];
            let dy = (ty * g.dilation.0) as i64 - g.pad.0;
            let dx = (tx * g.dilation.1) as i64 - g.pad.1;
            // The input columns whose output column is inside the output.
            let (sx, ow) = (g.stride.1 as i64, g.ow as i64);
            let first = if dx >= 0 { 0 } else { (-dx + sx - 1) / sx };
            let end = if dx >= ow {
                0
            } else {
                ((ow - dx + sx - 1) / sx).min(g.iw as i64)
            };
            if first >= end {
                continue;
            }
            let (first, end) = (first as usize, end as usize);
            for iy in 0..g.ih {
                let oy = (iy * g.stride.0) as i64 + dy;
                if oy < 0 || oy >= g.oh as i64 {
                    continue;
                }
                let src = &row[iy * g.iw + first..iy * g.iw + end];
                let base = (oy as usize) * g.ow;
                let ox0 = (first as i64 * sx + dx) as usize;
                if g.stride.1 == 1 {
                    dst[base + ox0..base + ox0 + src.len()]
                        .iter_mut()
                        .zip(src)
                        .for_each(|(d, &v)| *d += v);
                } else {
                    for (j, &v) in src.iter().enumerate() {
                        dst[base + ox0 + j * g.stride.1] += v;
                    }
                }
            }
        }
    };
    let tasks = pool.threads().min(g.mg);
    if tasks < 2 || g.mg * taps * pixels < 32 * 1024 {
        for (m, dst) in y.chunks_exact_mut(plane).enumerate() {
            channel(m, dst);
        }
        return;
    }
    let per = g.mg.div_ceil(tasks);
    let parts = Disjoint::new(y);
    pool.run(tasks, &|task, _| {
        for m in (task * per).min(g.mg)..((task + 1) * per).min(g.mg) {
            // SAFETY: each task writes the planes of its own channels.
            let dst = unsafe { parts.range(m * plane, plane) };
            channel(m, dst);
        }
    });
}
