//! MatMulInteger and ConvInteger: exact i32 products of 8-bit operands less their zero
//! points, on the int8 GEMM engine (`crate::qgemm`) with its i32 epilogue ([`IntOut`]).
//!
//! This is the form ONNX Runtime's dynamic quantization writes into transformers
//! (`DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul`), so it runs on the same
//! kernels as the QDQ groups: the activation is read in place as stored bytes, the
//! constant weights are packed once at init (a `u8` weight biased by -128 into `i8`, its
//! zero point with it), and the zero points are taken away by the per-row and per-column
//! correction that [`IntOut`] describes, with the column terms computed at init. Every
//! sum wraps at 32 bits and no kernel saturates, so the result is the reference's i64 sum
//! wrapped to i32, on every instruction set.
//!
//! ConvInteger computes channels-last like the int8 QDQ convolution: the NCHW input is
//! converted to NHWC bytes in scratch, a pointwise convolution is a plain GEMM over the
//! pixels and any other an IGEMM whose padding taps read a row of the input's zero point
//! (ONNX pads after taking the zero point away, so padding contributes exactly 0); each
//! group's i32 result is written straight to its NCHW place.

use super::Nhwc;
use crate::ops::conv::Geom;
use crate::ops::layout::to_nhwc;
use crate::ops::{vec_bytes, RunCtx, Sources, Src};
use crate::qgemm::{
    ARows, Indirection, IntLayout, IntOut, PackedWeights, QGemm, QKernel, QOut, SLACK,
};

/// The requantization a QGemm carries but an i32 product never reads.
static NO_REQUANT: QOut = QOut {
    offset: Vec::new(),
    scale: Vec::new(),
    zp: 0,
    lo: 0,
    hi: 0,
    stage2: None,
};

/// One GEMM of a (batched) MatMulInteger: `m` rows of `A` from row `a_row`, against
/// weight matrix `w`, written from element `out` of the result.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IntBatch {
    pub a_row: usize,
    pub w: usize,
    pub out: usize,
}

/// How an integer product reads its input.
#[derive(Debug)]
pub(crate) enum IntPath {
    /// MatMulInteger: `m` rows of `k` bytes per batch entry.
    MatMul {
        m: usize,
        k: usize,
        batches: Vec<IntBatch>,
    },
    /// ConvInteger, pointwise with unit strides and no padding: a GEMM over the pixels.
    ConvGemm { geom: Geom },
    /// ConvInteger by indirection: `zero` is `cg` bytes of the input's zero point and
    /// slack.
    ConvIgemm {
        geom: Geom,
        table: Indirection,
        zero: Vec<u8>,
    },
}

/// A prepared MatMulInteger or ConvInteger.
#[derive(Debug)]
pub(crate) struct IntProductOp {
    pub x: Src,
    /// Bytes of the input tensor.
    pub x_len: usize,
    pub path: IntPath,
    /// One packing per weight matrix (MatMulInteger) or group (ConvInteger).
    pub weights: Vec<PackedWeights>,
    /// The input's stored zero points: one, or one per row of A.
    pub za: Vec<i32>,
    /// The weights' stored zero points, one per output column (or channel).
    pub zw: Vec<i32>,
    /// Per packing, per column: `colsum - K * zw`.
    pub ccol: Vec<Vec<i32>>,
    pub kernel: &'static QKernel,
}

impl IntProductOp {
    /// Builds the per-column corrections of `weights`, whose columns' zero points are
    /// `zw[p * n..]` for packing `p` when `per_packing` (ConvInteger's groups), else `zw`.
    pub fn corrections(weights: &[PackedWeights], zw: &[i32], per_packing: bool) -> Vec<Vec<i32>> {
        weights
            .iter()
            .enumerate()
            .map(|(p, w)| {
                let k = (w.taps() * w.c()) as i32;
                let base = if per_packing { p * w.n() } else { 0 };
                w.col_sums()
                    .iter()
                    .enumerate()
                    .map(|(j, &s)| s.wrapping_sub(k.wrapping_mul(zw[base + j])))
                    .collect()
            })
            .collect()
    }

    /// Bytes this op allocated at init beyond the packings `Packs` tallies.
    pub fn owned_bytes(&self) -> usize {
        let path = match &self.path {
            IntPath::MatMul { batches, .. } => vec_bytes(batches),
            IntPath::ConvGemm { .. } => 0,
            IntPath::ConvIgemm { table, zero, .. } => table.capacity_bytes() + vec_bytes(zero),
        };
        path + vec_bytes(&self.za)
            + vec_bytes(&self.zw)
            + self.ccol.iter().map(vec_bytes).sum::<usize>()
    }

    /// Sizes the shared scratch: a convolution's input converted to NHWC.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        let conv = !matches!(self.path, IntPath::MatMul { .. });
        if conv && ctx.qin.len() < self.x_len + SLACK {
            ctx.qin.resize(self.x_len + SLACK, 0);
        }
    }

    /// Runs the product into `out`, the i32 result's bytes.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [u8], ctx: &mut RunCtx) {
        let x = &sources.bytes(self.x)[..self.x_len + SLACK];
        let row_sums = self.zw.iter().any(|&z| z != 0);
        match &self.path {
            IntPath::MatMul { m, k, batches } => {
                let n = self.weights.first().map_or(0, PackedWeights::n);
                for b in batches {
                    let io = IntOut {
                        za: &self.za,
                        ccol: &self.ccol[b.w],
                        zw: &self.zw,
                        row_sums,
                        layout: IntLayout {
                            block: *m,
                            block_stride: m * n,
                            row_stride: n,
                            col_stride: 1,
                        },
                    };
                    let gemm = QGemm {
                        m: *m,
                        a: ARows::Strided {
                            data: &x[b.a_row * k..],
                            stride: *k,
                        },
                        w: &self.weights[b.w],
                        out: &NO_REQUANT,
                        ldo: n,
                        ints: Some(&io),
                    };
                    gemm.run(self.kernel, &ctx.pool, &mut out[b.out * 4..]);
                }
            }
            IntPath::ConvGemm { geom } | IntPath::ConvIgemm { geom, .. } => {
                let g = geom;
                let shape = Nhwc {
                    batch: g.batch,
                    c: g.c,
                    plane: g.in_plane(),
                };
                to_nhwc(
                    &ctx.pool,
                    &x[..self.x_len],
                    (shape.batch, shape.c, shape.plane),
                    &mut ctx.qin[..self.x_len],
                );
                let x = &ctx.qin[..self.x_len + SLACK];
                let (cg, mg, plane) = (g.cg(), g.mg(), g.out_plane());
                for grp in 0..g.group {
                    let data = &x[grp * cg..];
                    let a = match &self.path {
                        IntPath::ConvIgemm { table, zero, .. } => {
                            ARows::Indirect { data, table, zero }
                        }
                        _ => ARows::Strided { data, stride: g.c },
                    };
                    let io = IntOut {
                        za: &self.za,
                        ccol: &self.ccol[grp],
                        zw: &self.zw[grp * mg..(grp + 1) * mg],
                        row_sums,
                        layout: IntLayout {
                            block: plane.max(1),
                            block_stride: g.m * plane,
                            row_stride: 1,
                            col_stride: plane,
                        },
                    };
                    let gemm = QGemm {
                        m: g.batch * plane,
                        a,
                        w: &self.weights[grp],
                        out: &NO_REQUANT,
                        ldo: 0,
                        ints: Some(&io),
                    };
                    gemm.run(self.kernel, &ctx.pool, &mut out[grp * mg * plane * 4..]);
                }
            }
        }
    }
}
