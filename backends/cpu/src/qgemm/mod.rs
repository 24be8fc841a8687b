//! Integer GEMM: `i8 x i8 -> i32` with packed weights, and integer requantization.
//!
//! The quantized ops compute `acc[m][n] = sum_k (a[m][k] - za) * w[k][n]`, where `a` is
//! an activation with one zero point `za` (per tensor) and `w` a constant weight with
//! zero point 0 (symmetric, as ONNX Runtime quantizes weights). Expanding the product,
//! `acc = sum_k a * w - za * colsum[n]`, so the kernels only form the raw dot products
//! and the per-column sums of the weights are computed once, when the weights are packed.
//!
//! **Layout.** Both operands are packed in groups of four `k`: a weight panel holds
//! [`NR`] columns as `k/4` blocks of `NR x 4` bytes; an activation panel holds [`MR`]
//! rows as `k/4` blocks of `MR x 4` bytes. `K` is padded to a multiple of four with zeros
//! (which add nothing). This is the shape every dot-product instruction wants: one
//! 32-bit lane accumulates four byte products (Arm `sdot`, x86 `vpdpbusd`), and the
//! plain SIMD paths (x86 `vpmaddwd` on sign-extended bytes, Arm `smull` + `sadalp`) sum
//! pairs inside the same block.
//!
//! **Requantization** (see [`Requant`]) is integer-only: a per-channel multiplier in Q31
//! and a right shift, rounding to nearest with ties toward +infinity, then the output zero
//! point, then a clamp that also implements a fused Relu or Clip.

mod kernels;

pub use kernels::{QKernel, QKernelId};

/// Rows of an activation panel (and of every kernel's tile).
pub const MR: usize = 4;
/// Columns of a weight panel (and of every kernel's tile).
pub const NR: usize = 8;

/// `k` rounded up to the packing granularity (a multiple of four).
pub fn padded_k(k: usize) -> usize {
    k.div_ceil(4) * 4
}

/// Weights packed for the kernels, with their column sums.
#[derive(Clone, Debug)]
pub struct PackedWeights {
    k: usize,
    n: usize,
    /// `ceil(n / NR)` panels of `padded_k(k) * NR` bytes.
    data: Vec<i8>,
    /// `sum_k w[k][n]` for each column.
    col_sums: Vec<i32>,
}

impl PackedWeights {
    /// Packs a `k x n` weight matrix whose element `(k, n)` is `w(k, n)`. The closure lets
    /// callers pack any layout (`[K, N]`, `[N, K]`, Conv's `[M, C/g, kh, kw]`) in one pass.
    pub fn pack(k: usize, n: usize, w: impl Fn(usize, usize) -> i8) -> PackedWeights {
        let kp = padded_k(k);
        let panels = n.div_ceil(NR);
        let mut data = vec![0i8; panels * kp * NR];
        let mut col_sums = vec![0i32; n];
        for (j, sum) in col_sums.iter_mut().enumerate() {
            let (panel, c) = (j / NR, j % NR);
            let base = panel * kp * NR;
            for kk in 0..k {
                let v = w(kk, j);
                data[base + (kk / 4) * NR * 4 + c * 4 + kk % 4] = v;
                *sum += v as i32;
            }
        }
        PackedWeights {
            k,
            n,
            data,
            col_sums,
        }
    }

    /// The depth `K`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The number of columns `N`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The column sums, for the zero-point correction.
    pub fn col_sums(&self) -> &[i32] {
        &self.col_sums
    }

    fn panel(&self, p: usize) -> &[i8] {
        let len = padded_k(self.k) * NR;
        &self.data[p * len..(p + 1) * len]
    }
}

/// Packs `rows <= MR` activation rows into `panel` (`padded_k(k) * MR` bytes); row `r`'s
/// element `k` is `a(r, k)`. Missing rows and the `K` padding are zero.
pub fn pack_rows(panel: &mut [i8], k: usize, rows: usize, a: impl Fn(usize, usize) -> i8) {
    let kp = padded_k(k);
    let panel = &mut panel[..kp * MR];
    let rows = rows.min(MR);
    if rows < MR || k < kp {
        panel.fill(0);
    }
    // Whole blocks of four first (no division in the loop), then the tail block.
    let full = k / 4;
    for (blk, chunk) in panel.chunks_exact_mut(MR * 4).enumerate().take(full) {
        for r in 0..rows {
            for i in 0..4 {
                chunk[r * 4 + i] = a(r, blk * 4 + i);
            }
        }
    }
    for kk in full * 4..k {
        for r in 0..rows {
            panel[(kk / 4) * MR * 4 + r * 4 + kk % 4] = a(r, kk);
        }
    }
}

/// Integer requantization of one output channel: `y = clamp(round(acc * real) + zp)`.
///
/// `real` (the input scale times the weight scale over the output scale) is written as
/// `multiplier * 2^-shift` with `multiplier` in `[2^30, 2^31)`; the product is formed in
/// i64 and shifted right with rounding to nearest, ties toward +infinity (add half, then
/// an arithmetic shift, which floors). The reference divides in f32 and rounds ties to
/// even, so at most a value at a half step may land one step apart — the one-step
/// tolerance of the quantized conformance cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requant {
    pub multiplier: i32,
    /// Right shift, 1..=62.
    pub shift: u32,
}

impl Requant {
    /// The fixed-point form of `real` (> 0). Multipliers too small to represent become 0
    /// (every output is then the zero point), too large ones saturate.
    pub fn new(real: f64) -> Requant {
        if real.is_nan() || real <= 0.0 || !real.is_finite() {
            return Requant {
                multiplier: 0,
                shift: 1,
            };
        }
        // real = f * 2^e with f in [0.5, 1).
        let e = real.log2().floor() as i32 + 1;
        let f = real / 2f64.powi(e);
        let mut m = (f * (1u64 << 31) as f64).round() as i64;
        let mut shift = 31 - e;
        if m == 1 << 31 {
            m /= 2;
            shift -= 1;
        }
        if shift > 62 {
            return Requant {
                multiplier: 0,
                shift: 1,
            };
        }
        if shift < 1 {
            return Requant {
                multiplier: i32::MAX,
                shift: 1,
            };
        }
        Requant {
            multiplier: m as i32,
            shift: shift as u32,
        }
    }

    /// `round(acc * real)`, before the zero point.
    #[inline]
    pub fn apply(&self, acc: i32) -> i64 {
        let p = acc as i64 * self.multiplier as i64;
        (p + (1i64 << (self.shift - 1))) >> self.shift
    }
}

/// How accumulators become stored integers, per output column.
#[derive(Clone, Debug)]
pub struct QEpilogue {
    /// `za`, subtracted through the column sums.
    pub a_zero_point: i32,
    /// Per-column integer bias (already in the accumulator's scale), or empty.
    pub bias: Vec<i32>,
    /// Per-column requantization (one entry: shared by every column).
    pub requant: Vec<Requant>,
    pub out_zero_point: i32,
    /// The clamp: the output dtype's range narrowed by a fused Relu or Clip.
    pub lo: i32,
    pub hi: i32,
}

impl QEpilogue {
    /// The stored value of column `n` for the raw dot product `raw`.
    #[inline]
    pub fn finish(&self, raw: i32, n: usize, col_sum: i32) -> i32 {
        let mut acc = raw.wrapping_sub(self.a_zero_point.wrapping_mul(col_sum));
        if let Some(b) = self.bias.get(n) {
            acc = acc.wrapping_add(*b);
        }
        let rq = self.requant[if self.requant.len() == 1 { 0 } else { n }];
        let y = rq.apply(acc) + self.out_zero_point as i64;
        y.clamp(self.lo as i64, self.hi as i64) as i32
    }
}

/// `C = requant(A * W)` for `m` rows: `a(r, k)` reads activation row `r`, and `store(r,
/// n, y)` receives each finished output. `panel` is scratch of at least `padded_k(k) *
/// MR` bytes.
pub fn qgemm(
    kernel: &QKernel,
    m: usize,
    w: &PackedWeights,
    a: impl Fn(usize, usize) -> i8,
    ep: &QEpilogue,
    panel: &mut [i8],
    mut store: impl FnMut(usize, usize, i32),
) {
    let (k, n) = (w.k, w.n);
    let k4 = padded_k(k) / 4;
    let mut tile = [0i32; MR * NR];
    // Per column, once per call: the accumulator offset (bias minus the zero-point
    // correction) and the requantization, so the store loop does no lookups.
    let panels = n.div_ceil(NR);
    let mut offset = [0i32; NR];
    let mut rq = [Requant {
        multiplier: 0,
        shift: 1,
    }; NR];
    for r0 in (0..m).step_by(MR) {
        let rows = (m - r0).min(MR);
        pack_rows(panel, k, rows, |r, kk| a(r0 + r, kk));
        for p in 0..panels {
            kernel.run(k4, panel, w.panel(p), &mut tile);
            let cols = (n - p * NR).min(NR);
            for c in 0..cols {
                let j = p * NR + c;
                let bias = ep.bias.get(j).copied().unwrap_or(0);
                offset[c] = bias.wrapping_sub(ep.a_zero_point.wrapping_mul(w.col_sums[j]));
                rq[c] = ep.requant[if ep.requant.len() == 1 { 0 } else { j }];
            }
            for r in 0..rows {
                for c in 0..cols {
                    let acc = tile[r * NR + c].wrapping_add(offset[c]);
                    let y = rq[c].apply(acc) + ep.out_zero_point as i64;
                    store(
                        r0 + r,
                        p * NR + c,
                        y.clamp(ep.lo as i64, ep.hi as i64) as i32,
                    );
                }
            }
        }
    }
}

/// The same computation as [`qgemm`] in plain scalar code, the kernels' oracle in tests.
pub fn qgemm_reference(
    m: usize,
    k: usize,
    n: usize,
    a: impl Fn(usize, usize) -> i8,
    w: impl Fn(usize, usize) -> i8,
    ep: &QEpilogue,
) -> Vec<i32> {
    let mut out = vec![0; m * n];
    for r in 0..m {
        for j in 0..n {
            let mut acc = 0i32;
            let mut col = 0i32;
            for kk in 0..k {
                acc += a(r, kk) as i32 * w(kk, j) as i32;
                col += w(kk, j) as i32;
            }
            out[r * n + j] = ep.finish(acc, j, col);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requant_matches_the_real_product() {
        for &real in &[0.75, 0.001234, 3.5e-5, 0.5, 1.0, 2.9, 1e-9] {
            let rq = Requant::new(real);
            for acc in [-100_000, -3, 0, 7, 12_345, 1_000_000] {
                let want = (acc as f64 * real).round();
                let got = rq.apply(acc) as f64;
                assert!(
                    (got - want).abs() <= 1.0,
                    "real {real} acc {acc}: {got} vs {want}"
                );
            }
        }
    }
}
