//! Quantized ops: standalone QuantizeLinear / DequantizeLinear (the reference's
//! arithmetic), the widening of integer subgraph inputs, and the integer Conv / MatMul /
//! Gemm of a QDQ group (see `crate::quant`).

use baton_delegate_api::ir::DType;

use super::conv::Geom;
use super::{RunCtx, Sources, Src};
use crate::qgemm::{padded_k, qgemm, PackedWeights, QEpilogue, QKernel, Requant, MR};
use crate::quant::{int_range, QParams};

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

    fn which(&self, k: usize) -> usize {
        (k / self.inner) % self.dim
    }
}

/// DequantizeLinear: `(x - zp) * scale`, exact in f64 and rounded once to f32.
#[derive(Debug)]
pub(crate) struct DequantizeOp {
    pub x: DqInput,
    pub params: QParams,
    pub layout: AxisLayout,
}

/// What a DequantizeLinear reads.
#[derive(Debug)]
pub(crate) enum DqInput {
    /// An 8-bit tensor computed at run time (exact in its f32 buffer).
    Src(Src),
    /// A constant, kept as integers: an i32 bias may not be exact in f32.
    Const(Vec<i32>),
}

impl DequantizeOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let one = |k: usize, v: f64| {
            let i = self.layout.which(k);
            ((v - self.params.zero_points[i] as f64) * self.params.scales[i] as f64) as f32
        };
        match &self.x {
            DqInput::Src(src) => {
                let x = sources.get(*src);
                for (k, (o, &v)) in out.iter_mut().zip(x).enumerate() {
                    *o = one(k, v as f64);
                }
            }
            DqInput::Const(x) => {
                for (k, (o, &v)) in out.iter_mut().zip(x).enumerate() {
                    *o = one(k, v as f64);
                }
            }
        }
    }
}

/// QuantizeLinear: divide in f32, round half to even, add the zero point, saturate (NaN
/// gives the zero point), as the reference does.
#[derive(Debug)]
pub(crate) struct QuantizeOp {
    pub x: Src,
    pub params: QParams,
    pub layout: AxisLayout,
}

impl QuantizeOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.get(self.x);
        let (lo, hi) = int_range(self.params.dtype);
        for (k, (o, &v)) in out.iter_mut().zip(x).enumerate() {
            let i = self.layout.which(k);
            let q = quantize(v, self.params.scales[i], self.params.zero_points[i], lo, hi);
            *o = q as f32;
        }
    }
}

/// One value quantized as QuantizeLinear does.
pub(crate) fn quantize(v: f32, scale: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    // `as` maps NaN to 0 and saturates infinities, so NaN gives the zero point.
    let r = (v / scale).round_ties_even() as i64;
    r.saturating_add(zp as i64).clamp(lo as i64, hi as i64) as i32
}

/// Copies an integer subgraph input into an f32 buffer (8-bit values are exact).
#[derive(Debug)]
pub(crate) struct WidenOp {
    pub input: usize,
    pub dtype: DType,
}

impl WidenOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let bytes = sources.input_bytes(self.input);
        match self.dtype {
            DType::U8 => out.iter_mut().zip(bytes).for_each(|(o, &b)| *o = b as f32),
            DType::I8 => out
                .iter_mut()
                .zip(bytes)
                .for_each(|(o, &b)| *o = b as i8 as f32),
            _ => {
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32;
                }
            }
        }
    }
}

/// The shape of an integer linear op.
#[derive(Debug)]
pub(crate) enum QShape {
    /// `rows x K` activation rows (all leading dimensions of a MatMul/Gemm input).
    Rows { rows: usize },
    /// A 1-D or 2-D convolution, one GEMM per batch item and group.
    Conv(Geom),
}

/// The integer op of a QDQ group: i8 GEMM (im2col for convolutions), requantization,
/// the fused activation as a clamp.
#[derive(Debug)]
pub(crate) struct QLinearOp {
    pub x: Src,
    pub shape: QShape,
    /// One packed weight matrix per group (one for MatMul and Gemm).
    pub weights: Vec<PackedWeights>,
    /// One epilogue per group.
    pub epilogues: Vec<QEpilogue>,
    /// Subtracted from each activation to make it i8: 0 for i8, 128 for u8 (the zero
    /// point in the epilogues is shifted the same way).
    pub x_offset: i32,
    pub kernel: &'static QKernel,
    /// Depthwise convolutions (one input and one output channel per group) keep their
    /// taps here, `[channel][kh * kw]`, and run directly: a GEMM with one column would
    /// waste most of every weight panel.
    pub depthwise: Option<Vec<i8>>,
}

/// What the builder knows of a group, in real terms.
pub(crate) struct QLinearSpec<'a> {
    pub x: Src,
    pub shape: QShape,
    /// `(k, n, w(g, k, n))`: the GEMM depth and width of one group and its weights.
    pub k: usize,
    pub n: usize,
    pub groups: usize,
    pub weight: &'a dyn Fn(usize, usize, usize) -> i8,
    pub x_params: (f32, i32, DType),
    pub w_scales: &'a [f32],
    pub bias: Option<&'a [i32]>,
    pub y_params: (f32, i32, DType),
    pub clamp: Option<(f32, f32)>,
    pub kernel: &'static QKernel,
}

impl QLinearOp {
    /// Packs the weights and computes the requantization of every output channel.
    pub fn new(spec: QLinearSpec<'_>) -> QLinearOp {
        let (xs, xz, xdt) = spec.x_params;
        let (ys, yz, ydt) = spec.y_params;
        let x_offset = if xdt == DType::U8 { 128 } else { 0 };
        let (mut lo, mut hi) = int_range(ydt);
        if let Some((a, b)) = spec.clamp {
            // Q is monotonic, so Q(clip(v, a, b)) = clamp(Q(v), Q(a), Q(b)).
            lo = lo.max(quantize(a, ys, yz, lo, hi));
            hi = hi.min(quantize(b, ys, yz, lo, hi));
        }
        let mut weights = Vec::with_capacity(spec.groups);
        let mut epilogues = Vec::with_capacity(spec.groups);
        for g in 0..spec.groups {
            let channels = g * spec.n..(g + 1) * spec.n;
            weights.push(PackedWeights::pack(spec.k, spec.n, |k, n| {
                (spec.weight)(g, k, n)
            }));
            epilogues.push(QEpilogue {
                a_zero_point: xz - x_offset,
                bias: spec
                    .bias
                    .map(|b| b[channels.clone()].to_vec())
                    .unwrap_or_default(),
                requant: spec.w_scales[channels]
                    .iter()
                    .map(|&ws| Requant::new(xs as f64 * ws as f64 / ys as f64))
                    .collect(),
                out_zero_point: yz,
                lo,
                hi,
            });
        }
        let depthwise = match &spec.shape {
            QShape::Conv(g) if g.cg() == 1 && g.mg() == 1 => Some(
                (0..spec.groups)
                    .flat_map(|c| (0..spec.k).map(move |k| (c, k)))
                    .map(|(c, k)| (spec.weight)(c, k, 0))
                    .collect(),
            ),
            _ => None,
        };
        QLinearOp {
            x: spec.x,
            shape: spec.shape,
            weights,
            epilogues,
            x_offset,
            kernel: spec.kernel,
            depthwise,
        }
    }

    /// Sizes the shared scratch (im2col columns and one activation panel).
    pub fn reserve(&self, ctx: &mut RunCtx) {
        let k = self.weights[0].k();
        let panel = padded_k(k) * MR;
        if ctx.qpanel.len() < panel {
            ctx.qpanel.resize(panel, 0);
        }
        if let (QShape::Conv(g), Some(_)) = (&self.shape, &self.depthwise) {
            let (hp, wp) = padded_plane(g);
            let len = hp * wp + g.ow;
            if ctx.qwork.len() < len {
                ctx.qwork.resize(len, 0);
            }
        }
        if let QShape::Conv(g) = &self.shape {
            let cols = g.kg() * g.out_plane();
            if ctx.qcols.len() < cols {
                ctx.qcols.resize(cols, 0);
            }
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let off = self.x_offset;
        let to_i8 = |v: f32| (v as i32 - off) as i8;
        match &self.shape {
            QShape::Rows { rows } => {
                let (w, ep) = (&self.weights[0], &self.epilogues[0]);
                let (k, n) = (w.k(), w.n());
                qgemm(
                    self.kernel,
                    *rows,
                    w,
                    |r, kk| to_i8(x[r * k + kk]),
                    ep,
                    &mut ctx.qpanel,
                    |r, j, y| out[r * n + j] = y as f32,
                );
            }
            QShape::Conv(g) if self.depthwise.is_some() => {
                let taps = self.depthwise.as_deref().unwrap_or_default();
                self.run_depthwise(g, x, taps, out, &mut ctx.qwork);
            }
            QShape::Conv(g) => {
                let pad = (self.epilogues[0].a_zero_point) as i8;
                let p = g.out_plane();
                let kg = g.kg();
                for b in 0..g.batch {
                    for grp in 0..g.group {
                        let c0 = b * g.c + grp * g.cg();
                        let planes = &x[c0 * g.in_plane()..(c0 + g.cg()) * g.in_plane()];
                        let cols = &mut ctx.qcols[..kg * p];
                        im2col_i8(g, planes, pad, off, cols);
                        let cols = &ctx.qcols[..kg * p];
                        let m0 = b * g.m + grp * g.mg();
                        qgemm(
                            self.kernel,
                            p,
                            &self.weights[grp],
                            |r, kk| cols[r * kg + kk],
                            &self.epilogues[grp],
                            &mut ctx.qpanel,
                            |r, j, y| out[(m0 + j) * p + r] = y as f32,
                        );
                    }
                }
            }
        }
    }
}

/// The extents of a depthwise channel plane padded so that every tap of every output
/// is inside it: `(rows, columns)`.
fn padded_plane(g: &Geom) -> (usize, usize) {
    let hp = (g.oh.max(1) - 1) * g.sh + (g.kh - 1) * g.dh + 1;
    let wp = (g.ow.max(1) - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    (hp, wp)
}

impl QLinearOp {
    /// Direct depthwise convolution, per channel: the plane is widened once into `a - za`
    /// with zeros around it (real zero: the padding), so the tap loops run without bounds
    /// checks over whole output rows (and vectorize at stride 1); then the channel's
    /// epilogue.
    fn run_depthwise(&self, g: &Geom, x: &[f32], taps: &[i8], out: &mut [f32], work: &mut [i32]) {
        let (kh, kw) = (g.kh, g.kw);
        let (hp, wp) = padded_plane(g);
        let p = g.out_plane();
        let (plane_buf, acc) = work.split_at_mut(hp * wp);
        let acc = &mut acc[..g.ow];
        for b in 0..g.batch {
            for c in 0..g.c {
                let ep = &self.epilogues[c];
                let za = ep.a_zero_point + self.x_offset;
                let plane = &x[(b * g.c + c) * g.in_plane()..(b * g.c + c + 1) * g.in_plane()];
                for (py, prow) in plane_buf.chunks_exact_mut(wp).enumerate() {
                    let iy = py as isize - g.ph as isize;
                    if iy < 0 || iy >= g.h as isize {
                        prow.fill(0);
                        continue;
                    }
                    let src = &plane[iy as usize * g.w..(iy as usize + 1) * g.w];
                    for (px, d) in prow.iter_mut().enumerate() {
                        let ix = px as isize - g.pw as isize;
                        *d = if ix < 0 || ix >= g.w as isize {
                            0
                        } else {
                            src[ix as usize] as i32 - za
                        };
                    }
                }
                let w = &taps[c * kh * kw..(c + 1) * kh * kw];
                let dst = &mut out[(b * g.m + c) * p..(b * g.m + c + 1) * p];
                for oy in 0..g.oh {
                    acc.fill(0);
                    for ki in 0..kh {
                        for kj in 0..kw {
                            let wt = w[ki * kw + kj] as i32;
                            let base = (oy * g.sh + ki * g.dh) * wp + kj * g.dw;
                            if g.sw == 1 {
                                let src = &plane_buf[base..base + g.ow];
                                for (a, &v) in acc.iter_mut().zip(src) {
                                    *a += v * wt;
                                }
                            } else {
                                for (ox, a) in acc.iter_mut().enumerate() {
                                    *a += plane_buf[base + ox * g.sw] * wt;
                                }
                            }
                        }
                    }
                    // The zero point is already taken off: no column-sum correction.
                    for (d, &a) in dst[oy * g.ow..(oy + 1) * g.ow].iter_mut().zip(acc.iter()) {
                        *d = ep.finish(a, 0, 0) as f32;
                    }
                }
            }
        }
    }
}

/// Unfolds one group's input planes into activation rows `cols[pixel][k]` (k = channel,
/// tap), as i8: row-major, so the GEMM packs each row from contiguous bytes. Taps outside
/// the input read `pad` (the zero point: real zero). Pixel-outer, so each row is written
/// once, in order, from a few neighbouring input rows.
fn im2col_i8(g: &Geom, x: &[f32], pad: i8, off: i32, cols: &mut [i8]) {
    let kg = g.kg();
    let taps = g.kh * g.kw;
    for oy in 0..g.oh {
        for ox in 0..g.ow {
            let row = &mut cols[(oy * g.ow + ox) * kg..(oy * g.ow + ox + 1) * kg];
            for ki in 0..g.kh {
                let iy = (oy * g.sh + ki * g.dh) as isize - g.ph as isize;
                let inside_y = iy >= 0 && iy < g.h as isize;
                for kj in 0..g.kw {
                    let ix = (ox * g.sw + kj * g.dw) as isize - g.pw as isize;
                    let tap = ki * g.kw + kj;
                    if !inside_y || ix < 0 || ix >= g.w as isize {
                        for ci in 0..g.cg() {
                            row[ci * taps + tap] = pad;
                        }
                        continue;
                    }
                    let at = iy as usize * g.w + ix as usize;
                    for ci in 0..g.cg() {
                        row[ci * taps + tap] = (x[ci * g.in_plane() + at] as i32 - off) as i8;
                    }
                }
            }
        }
    }
}
