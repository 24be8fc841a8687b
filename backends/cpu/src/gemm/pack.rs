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
#[derive(Clone, Debug, Default)]
pub struct Indirection {
    mr: usize,
    m: usize,
    taps: usize,
    kc: usize,
    /// One past the last float any offset reads.
    extent: usize,
    offs: Vec<usize>,
    zero: Vec<f32>,
}

impl Indirection {
    /// The indirection of `m` output rows, each reading `taps` rows of `kc` floats:
    /// `row(i, t)` is the offset of row `i`'s tap `t`, `None` for a row of zeros.
    pub fn new(
        kernel: &MicroKernel,
        m: usize,
        taps: usize,
        kc: usize,
        row: impl Fn(usize, usize) -> Option<usize>,
    ) -> Indirection {
        let mr = kernel.mr();
        let tiles = m.div_ceil(mr);
        let mut offs = vec![ZERO_ROW; tiles * taps * mr];
        let mut extent = 0;
        for tile in 0..tiles {
            for t in 0..taps {
                for i in 0..mr {
                    let r = (tile * mr + i).min(m - 1);
                    if let Some(o) = row(r, t) {
                        extent = extent.max(o + kc);
                        offs[(tile * taps + t) * mr + i] = o;
                    }
                }
            }
        }
        Indirection {
            mr,
            m,
            taps,
            kc,
            extent,
            offs,
            zero: vec![0.0; kc],
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
    pub(super) fn tile(&self, r: usize) -> &[usize] {
        let len = self.taps * self.mr;
        &self.offs[r * len..(r + 1) * len]
    }

    /// A row of `kc` zeros.
    pub(super) fn zero(&self) -> &[f32] {
        &self.zero
    }
}
