//! The packed weights and the indirection buffer, both made at init.
//!
//! A [`PackedB`] holds `ceil(N / NR)` panels; panel `p` is `NR` bias values followed, for
//! each tap `t` and depth `k`, by the `NR` weights of columns `p*NR..p*NR+NR` (zero past
//! the last column), which is the order the micro-kernel reads them in.
//!
//! An [`Indirection`] holds, for each tile of `MR` output rows and each tap, the `MR`
//! offsets of the `A` rows the kernel reads, [`ZERO_ROW`] for taps in the padding; rows
//! past the last repeat it, so every tile is full.

use super::{MatRef, MicroKernel, ZERO_ROW};
use crate::prepack::{Packs, Panel};

/// Weights (`K x N`, `K = taps x kc`) packed into bias-led `NR`-column panels.
#[derive(Clone, Debug, Default)]
pub struct PackedB {
    nr: usize,
    taps: usize,
    kc: usize,
    n: usize,
    data: Panel,
}

impl PackedB {
    /// Packs `w(k, j)` for `k < taps * kc` (tap-major), `j < n`, with an optional per-column
    /// `bias` of `n` values.
    pub fn new(
        kernel: &MicroKernel,
        taps: usize,
        kc: usize,
        n: usize,
        bias: Option<&[f32]>,
        w: impl Fn(usize, usize) -> f32,
    ) -> PackedB {
        let mut p = PackedB::default();
        p.pack(kernel, taps, kc, n, bias, w);
        p
    }

    /// Packs the `k x n` matrix `b` (one tap).
    pub fn from_matrix(
        kernel: &MicroKernel,
        b: MatRef<'_>,
        k: usize,
        n: usize,
        bias: Option<&[f32]>,
    ) -> PackedB {
        PackedB::new(kernel, 1, k, n, bias, |i, j| b.data[i * b.rs + j * b.cs])
    }

    /// Floats a `taps x kc x n` packing takes with `kernel`.
    pub fn len_for(kernel: &MicroKernel, taps: usize, kc: usize, n: usize) -> usize {
        n.div_ceil(kernel.nr()) * kernel.nr() * (1 + taps * kc)
    }

    /// Repacks in place (weights that arrive at run time: no allocation once the buffer
    /// has grown to [`PackedB::len_for`] the shape, which `reserve` does at init).
    pub fn pack(
        &mut self,
        kernel: &MicroKernel,
        taps: usize,
        kc: usize,
        n: usize,
        bias: Option<&[f32]>,
        w: impl Fn(usize, usize) -> f32,
    ) {
        let nr = kernel.nr();
        let len = PackedB::len_for(kernel, taps, kc, n);
        let data = self.data.make_mut();
        data.clear();
        data.resize(len, 0.0);
        fill_panels(data, nr, taps * kc, n, bias, w);
        *self = PackedB {
            nr,
            taps,
            kc,
            n,
            data: std::mem::take(&mut self.data),
        };
    }

    /// [`PackedB::new`] through `packs`: the blob's packing when it holds one.
    pub(crate) fn new_in(
        packs: &mut Packs<'_>,
        kernel: &MicroKernel,
        taps: usize,
        kc: usize,
        n: usize,
        bias: Option<&[f32]>,
        w: impl Fn(usize, usize) -> f32,
    ) -> PackedB {
        let nr = kernel.nr();
        let len = PackedB::len_for(kernel, taps, kc, n);
        let data = packs.take(len, |dst| fill_panels(dst, nr, taps * kc, n, bias, w));
        PackedB {
            nr,
            taps,
            kc,
            n,
            data,
        }
    }

    /// Repacks `alpha * B` for a `k x n` matrix `b` with element `(i, j)` at
    /// `i * rs + j * cs`: weights that arrive at run time (attention's `Q·Kᵀ` and `P·V`).
    ///
    /// Rows (`cs == 1`) and columns (`rs == 1`) are copied as runs instead of through a
    /// per-element closure, which was most of what packing at run time cost.
    #[allow(clippy::too_many_arguments)]
    pub fn pack_strided(
        &mut self,
        kernel: &MicroKernel,
        k: usize,
        n: usize,
        b: &[f32],
        rs: usize,
        cs: usize,
        alpha: f32,
    ) {
        if cs != 1 && rs != 1 {
            return self.pack(kernel, 1, k, n, None, |i, j| alpha * b[i * rs + j * cs]);
        }
        let nr = kernel.nr();
        let len = PackedB::len_for(kernel, 1, k, n);
        let data = self.data.make_mut();
        data.clear();
        data.resize(len, 0.0);
        for (p, panel) in data.chunks_exact_mut(nr * (1 + k)).enumerate() {
            let (j0, cols) = (p * nr, nr.min(n - p * nr));
            let body = &mut panel[nr..];
            if cs == 1 {
                for (i, row) in body.chunks_exact_mut(nr).enumerate() {
                    let src = &b[i * rs + j0..i * rs + j0 + cols];
                    row[..cols]
                        .iter_mut()
                        .zip(src)
                        .for_each(|(d, &v)| *d = alpha * v);
                }
            } else {
                for j in 0..cols {
                    let src = &b[(j0 + j) * cs..(j0 + j) * cs + k];
                    for (i, &v) in src.iter().enumerate() {
                        body[i * nr + j] = alpha * v;
                    }
                }
            }
        }
        *self = PackedB {
            nr,
            taps: 1,
            kc: k,
            n,
            data: std::mem::take(&mut self.data),
        };
    }

    /// Grows the buffer so that packing a `taps x kc x n` operand allocates nothing.
    pub fn reserve(&mut self, kernel: &MicroKernel, taps: usize, kc: usize, n: usize) {
        let len = PackedB::len_for(kernel, taps, kc, n);
        let data = self.data.make_mut();
        data.reserve(len.saturating_sub(data.len()));
    }

    /// Bytes this packing allocated (none when read in place from a retained blob).
    pub fn capacity_bytes(&self) -> usize {
        self.data.bytes().0
    }

    /// Output columns.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Kernel taps (1 for a plain GEMM).
    pub fn taps(&self) -> usize {
        self.taps
    }

    /// Depth of one tap.
    pub fn kc(&self) -> usize {
        self.kc
    }

    /// The whole depth, `taps * kc`.
    pub fn depth(&self) -> usize {
        self.taps * self.kc
    }

    pub(super) fn fits(&self, kernel: &MicroKernel) -> bool {
        self.nr == kernel.nr() || self.n == 0
    }

    /// Panels `p..`, contiguous.
    pub(super) fn panels_from(&self, p: usize) -> &[f32] {
        let len = self.nr * (1 + self.depth());
        &self.data[p * len..]
    }

    /// Panel `p`.
    pub(super) fn panel(&self, p: usize) -> &[f32] {
        let len = self.nr * (1 + self.depth());
        &self.data[p * len..(p + 1) * len]
    }
}

/// Writes the bias-led `nr`-column panels of `w(k, j)` (`k < depth`, `j < n`) into the
/// zeroed `dst`.
fn fill_panels(
    dst: &mut [f32],
    nr: usize,
    depth: usize,
    n: usize,
    bias: Option<&[f32]>,
    w: impl Fn(usize, usize) -> f32,
) {
    for (p, panel) in dst.chunks_exact_mut(nr * (1 + depth)).enumerate() {
        let cols = nr.min(n - p * nr);
        let (head, body) = panel.split_at_mut(nr);
        if let Some(bias) = bias {
            head[..cols].copy_from_slice(&bias[p * nr..p * nr + cols]);
        }
        for (kk, row) in body.chunks_exact_mut(nr).enumerate() {
            for (j, v) in row[..cols].iter_mut().enumerate() {
                *v = w(kk, p * nr + j);
            }
        }
    }
}

/// The rows an indirect GEMM reads, for each tile of output rows and each tap.
///
/// Offsets are `u32`: half the memory of `usize` offsets, and these tables are the
/// largest thing a convolution keeps besides its weights (one offset per output pixel
/// and tap). An input of `u32::MAX` floats or more cannot be indexed this way: the
/// convolution that builds a table refuses it at init instead.
#[derive(Clone, Debug, Default)]
pub struct Indirection {
    mr: usize,
    m: usize,
    taps: usize,
    kc: usize,
    /// One past the last float any offset reads.
    extent: usize,
    offs: Vec<u32>,
    zero: Vec<f32>,
}

/// Fills an [`Indirection`] one output row at a time, in order, straight into its tiles:
/// a convolution visits its output pixels in that order, so no per-pixel table is built
/// first and copied.
#[derive(Debug)]
pub struct IndirectionBuilder {
    ind: Indirection,
    rows: usize,
}

impl Indirection {
    /// The indirection of `m` output rows, each reading `taps` rows of `kc` floats:
    /// `row(i, t)` is the offset of row `i`'s tap `t`, `None` (or [`ZERO_ROW`]) for a row
    /// of zeros.
    pub fn new(
        kernel: &MicroKernel,
        m: usize,
        taps: usize,
        kc: usize,
        row: impl Fn(usize, usize) -> Option<u32>,
    ) -> Indirection {
        let mut builder = Indirection::builder(kernel, m, taps, kc);
        let mut offsets = vec![ZERO_ROW; taps];
        for i in 0..m {
            for (t, o) in offsets.iter_mut().enumerate() {
                *o = row(i, t).unwrap_or(ZERO_ROW);
            }
            builder.push(&offsets);
        }
        builder.finish()
    }

    /// An empty indirection of `m` rows of `taps` taps of `kc` floats, to be filled by
    /// [`IndirectionBuilder::push`] (rows `0..m` in order).
    pub fn builder(kernel: &MicroKernel, m: usize, taps: usize, kc: usize) -> IndirectionBuilder {
        let mr = kernel.mr();
        IndirectionBuilder {
            ind: Indirection {
                mr,
                m,
                taps,
                kc,
                extent: 0,
                offs: vec![ZERO_ROW; m.div_ceil(mr) * taps * mr],
                zero: vec![0.0; kc],
            },
            rows: 0,
        }
    }

    pub(super) fn fits(&self, kernel: &MicroKernel, m: usize, taps: usize, kc: usize) -> bool {
        self.mr == kernel.mr() && self.m == m && self.taps == taps && self.kc == kc
    }

    /// One past the last float of `A` read.
    pub(super) fn extent(&self) -> usize {
        self.extent
    }

    /// The `taps * MR` offsets of row tile `r`.
    pub(super) fn tile(&self, r: usize) -> &[u32] {
        let len = self.taps * self.mr;
        &self.offs[r * len..(r + 1) * len]
    }

    /// A row of `kc` zeros.
    pub(super) fn zero(&self) -> &[f32] {
        &self.zero
    }

    /// Bytes this table allocated (for the delegate's memory report).
    pub fn capacity_bytes(&self) -> usize {
        self.offs.capacity() * size_of::<u32>() + self.zero.capacity() * size_of::<f32>()
    }
}

impl IndirectionBuilder {
    /// Sets the next row's `taps` offsets ([`ZERO_ROW`] for a row of zeros). Panics past
    /// the `m` rows or with another number of taps: a plan made at init, never input.
    pub fn push(&mut self, offsets: &[u32]) {
        let ind = &mut self.ind;
        assert_eq!(offsets.len(), ind.taps, "indirection: one offset per tap");
        assert!(self.rows < ind.m, "indirection: more rows than planned");
        let (tile, lane) = (self.rows / ind.mr, self.rows % ind.mr);
        for (t, &o) in offsets.iter().enumerate() {
            if o != ZERO_ROW {
                ind.extent = ind.extent.max(o as usize + ind.kc);
            }
            ind.offs[(tile * ind.taps + t) * ind.mr + lane] = o;
        }
        self.rows += 1;
    }

    /// The filled table; rows past the last repeat it, so every tile is full. Panics
    /// unless all `m` rows were pushed.
    pub fn finish(mut self) -> Indirection {
        let ind = &mut self.ind;
        assert_eq!(self.rows, ind.m, "indirection: rows missing");
        if let Some(last) = ind.m.checked_sub(1) {
            let (tile, lane) = (last / ind.mr, last % ind.mr);
            for t in 0..ind.taps {
                let at = (tile * ind.taps + t) * ind.mr;
                let o = ind.offs[at + lane];
                ind.offs[at + lane + 1..at + ind.mr].fill(o);
            }
        }
        self.ind
    }
}
