//! Packing of GEMM operands into micro-kernel panels.
//!
//! An `A` block of `mc x kc` becomes `ceil(mc / MR)` panels; panel `p` holds, for each `k`
//! in `0..kc`, the `MR` values of rows `p*MR..p*MR+MR` (zero past the last row). A `B`
//! block of `kc x nc` becomes `ceil(nc / NR)` panels of, for each `k`, `NR` values.
//!
//! A whole pre-packed matrix is those blocks laid end to end, one per `KC` slice of `K`,
//! each covering all of `M` (or `N`). The block of slice `pc` therefore starts at
//! `pc * M_padded`, and the panels of rows `ic..` at `ic * kc` inside it, which is what
//! [`PackedLhs::block`] and [`PackedRhs::block`] compute.

use super::{MatRef, MicroKernel};

/// A left operand (`M x K`) packed once into `MR`-row panels.
#[derive(Clone, Debug)]
pub struct PackedLhs {
    mr: usize,
    /// The kernel's `K` block depth the panels were cut at.
    kc: usize,
    m: usize,
    k: usize,
    data: Vec<f32>,
}

impl PackedLhs {
    /// Packs the `m x k` matrix `a` for `kernel`.
    pub fn new(kernel: &MicroKernel, a: MatRef<'_>, m: usize, k: usize) -> PackedLhs {
        let (mr, kc_max) = (kernel.mr(), kernel.kc());
        let m_pad = m.next_multiple_of(mr);
        let mut data = vec![0.0; m_pad * k];
        if m > 0 {
            for pc in (0..k).step_by(kc_max) {
                let kc = kc_max.min(k - pc);
                let block = &mut data[pc * m_pad..pc * m_pad + kc * m_pad];
                pack_lhs(a, 0, pc, m, kc, mr, block);
            }
        }
        PackedLhs {
            mr,
            kc: kc_max,
            m,
            k,
            data,
        }
    }

    /// Whether this was packed for `kernel` as an `m x k` matrix.
    pub(super) fn fits(&self, kernel: &MicroKernel, m: usize, k: usize) -> bool {
        self.mr == kernel.mr() && self.kc == kernel.kc() && self.m == m && self.k == k
    }

    /// The packed panels of rows `ic..ic+mc` for the `KC` slice starting at `pc`.
    pub(super) fn block(&self, pc: usize, ic: usize, kc: usize, mc: usize) -> &[f32] {
        let start = pc * self.m.next_multiple_of(self.mr) + ic * kc;
        &self.data[start..start + kc * mc.next_multiple_of(self.mr)]
    }
}

/// A right operand (`K x N`) packed once into `NR`-column panels.
#[derive(Clone, Debug)]
pub struct PackedRhs {
    nr: usize,
    /// The kernel's `K` block depth the panels were cut at.
    kc: usize,
    k: usize,
    n: usize,
    data: Vec<f32>,
}

impl PackedRhs {
    /// Packs the `k x n` matrix `b` for `kernel`.
    pub fn new(kernel: &MicroKernel, b: MatRef<'_>, k: usize, n: usize) -> PackedRhs {
        let (nr, kc_max) = (kernel.nr(), kernel.kc());
        let n_pad = n.next_multiple_of(nr);
        let mut data = vec![0.0; n_pad * k];
        if n > 0 {
            for pc in (0..k).step_by(kc_max) {
                let kc = kc_max.min(k - pc);
                let block = &mut data[pc * n_pad..pc * n_pad + kc * n_pad];
                pack_rhs(b, pc, 0, kc, n, nr, block);
            }
        }
        PackedRhs {
            nr,
            kc: kc_max,
            k,
            n,
            data,
        }
    }

    /// Whether this was packed for `kernel` as a `k x n` matrix.
    pub(super) fn fits(&self, kernel: &MicroKernel, k: usize, n: usize) -> bool {
        self.nr == kernel.nr() && self.kc == kernel.kc() && self.k == k && self.n == n
    }

    /// The packed panels of columns `jc..jc+nc` for the `KC` slice starting at `pc`.
    pub(super) fn block(&self, pc: usize, jc: usize, kc: usize, nc: usize) -> &[f32] {
        let start = pc * self.n.next_multiple_of(self.nr) + jc * kc;
        &self.data[start..start + kc * nc.next_multiple_of(self.nr)]
    }
}

/// Packs rows `ic..ic+mc`, columns `pc..pc+kc` of `a` into `dst` (`ceil(mc/mr)*mr*kc`).
pub(super) fn pack_lhs(
    a: MatRef<'_>,
    ic: usize,
    pc: usize,
    mc: usize,
    kc: usize,
    mr: usize,
    dst: &mut [f32],
) {
    for (p, panel) in dst.chunks_exact_mut(mr * kc).enumerate() {
        let row0 = p * mr;
        let rows = mr.min(mc - row0);
        for (kk, out) in panel.chunks_exact_mut(mr).enumerate() {
            let col = (pc + kk) * a.cs;
            for (i, o) in out[..rows].iter_mut().enumerate() {
                *o = a.data[(ic + row0 + i) * a.rs + col];
            }
            out[rows..].fill(0.0);
        }
    }
}

/// Packs rows `pc..pc+kc`, columns `jc..jc+nc` of `b` into `dst` (`ceil(nc/nr)*nr*kc`).
pub(super) fn pack_rhs(
    b: MatRef<'_>,
    pc: usize,
    jc: usize,
    kc: usize,
    nc: usize,
    nr: usize,
    dst: &mut [f32],
) {
    for (p, panel) in dst.chunks_exact_mut(nr * kc).enumerate() {
        let col0 = p * nr;
        let cols = nr.min(nc - col0);
        for (kk, out) in panel.chunks_exact_mut(nr).enumerate() {
            let row = (pc + kk) * b.rs;
            if b.cs == 1 {
                let start = row + jc + col0;
                copy_short(&mut out[..cols], &b.data[start..start + cols]);
            } else {
                for (j, o) in out[..cols].iter_mut().enumerate() {
                    *o = b.data[row + (jc + col0 + j) * b.cs];
                }
            }
            out[cols..].fill(0.0);
        }
    }
}

/// `dst.copy_from_slice(src)` for the short rows of a panel: the full-width cases are
/// fixed-size copies (a few vector moves) instead of a call to `memcpy`, which dominated
/// the packing of wide, shallow operands (pointwise convolutions).
#[inline]
pub(super) fn copy_short(dst: &mut [f32], src: &[f32]) {
    fn fixed<const N: usize>(dst: &mut [f32], src: &[f32]) {
        let d: &mut [f32; N] = dst.try_into().expect("N floats");
        let s: &[f32; N] = src.try_into().expect("N floats");
        *d = *s;
    }
    match dst.len() {
        32 => fixed::<32>(dst, src),
        16 => fixed::<16>(dst, src),
        8 => fixed::<8>(dst, src),
        _ => dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s),
    }
}
