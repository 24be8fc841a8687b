//! Depthwise convolution (one input channel per group), computed directly.
//!
//! A per-channel GEMM would have `M = 1`, so instead each input plane is copied once into
//! a scratch *phase plane*: padded with zeros on every side it is read, and with each row
//! split into `stride_w` phases (phase `r` holds the padded row's elements `r, r + s,
//! r + 2s, ...`). In that layout the input tap of output column `ox` for kernel column
//! `kj` is `phase[(kj * dw) % s][(kj * dw) / s + ox]`: contiguous in `ox` for every
//! stride, dilation and padding. The kernels therefore only ever do
//! `out[ox..ox + 16] += w * src[offset + ox..]`, over up to four output rows at once
//! (eight independent FMA chains on AVX2, enough to hide the FMA latency on the narrow
//! 7- and 14-wide rows of small feature maps), and never test a bound.
//!
//! Every phase row carries [`CHUNK`] floats of zero slack, so the last, partial chunk of
//! a row reads in bounds; only the first `ow` results are stored. The epilogue (bias,
//! activation, residual) runs on each block of rows while it is in L1.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "aarch64")]
mod neon;
mod portable;

use crate::gemm::Isa;
use crate::gemm_old::Epilogue;

/// Output columns one kernel step produces per row, and the slack after each phase row.
pub(crate) const CHUNK: usize = 16;

/// Output rows one kernel call produces.
pub(crate) const ROWS: usize = 4;

/// The geometry of one depthwise convolution, normalised to two spatial axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DwShape {
    pub h: usize,
    pub w: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub dh: usize,
    pub dw: usize,
    pub ph: usize,
    pub pw: usize,
    pub oh: usize,
    pub ow: usize,
}

/// A depthwise convolution prepared at init: the phase-plane layout and the offset of
/// each kernel tap in it.
#[derive(Clone, Debug)]
pub(crate) struct DepthwisePlan {
    shape: DwShape,
    isa: Isa,
    /// Length of one phase row: the padded row's elements of one phase, plus slack.
    phase_len: usize,
    /// Padded rows kept: those some output row reads.
    rows: usize,
    /// Offset of tap `(ki, kj)` relative to the first element an output row reads.
    taps: Vec<usize>,
}

impl DepthwisePlan {
    pub fn new(shape: DwShape, isa: Isa) -> DepthwisePlan {
        let s = shape;
        // The padded extents some output reads (at least one, for empty outputs).
        let rows = ((s.oh.max(1) - 1) * s.sh + (s.kh - 1) * s.dh + 1).max(1);
        let cols = ((s.ow.max(1) - 1) * s.sw + (s.kw - 1) * s.dw + 1).max(1);
        let phase_len = cols.div_ceil(s.sw) + CHUNK;
        let row_stride = s.sw * phase_len;
        let mut taps = Vec::with_capacity(s.kh * s.kw);
        for ki in 0..s.kh {
            for kj in 0..s.kw {
                let x = kj * s.dw;
                taps.push(ki * s.dh * row_stride + (x % s.sw) * phase_len + x / s.sw);
            }
        }
        DepthwisePlan {
            shape,
            isa,
            phase_len,
            rows,
            taps,
        }
    }

    /// Floats of scratch one channel needs (per thread).
    pub fn scratch_len(&self) -> usize {
        self.rows * self.row_stride()
    }

    fn row_stride(&self) -> usize {
        self.shape.sw * self.phase_len
    }

    /// Convolves one input plane with the `taps`-long filters of `out.len() / (oh * ow)`
    /// output channels (the channel multiplier), writing those output planes and running
    /// the epilogue on them with rows numbered from `first_row`.
    pub fn run_channel(
        &self,
        plane: &[f32],
        filters: &[f32],
        out: &mut [f32],
        first_row: usize,
        epilogue: &Epilogue<'_>,
        scratch: &mut [f32],
    ) {
        let s = &self.shape;
        let out_plane = s.oh * s.ow;
        if out_plane == 0 {
            return;
        }
        let scratch = &mut scratch[..self.scratch_len()];
        self.fill(plane, scratch);
        let ksize = self.taps.len();
        let step = s.sh * self.row_stride();
        for (j, dst) in out.chunks_exact_mut(out_plane).enumerate() {
            let w = &filters[j * ksize..(j + 1) * ksize];
            for (b, block) in dst.chunks_mut(ROWS * s.ow).enumerate() {
                let oy = b * ROWS;
                rows(
                    self.isa,
                    &scratch[oy * step..],
                    step,
                    &self.taps,
                    w,
                    block,
                    s.ow,
                );
                epilogue.apply_row(first_row + j, oy * s.ow, block);
            }
        }
    }

    /// Writes the phase plane of `plane` (zeros in the padding) into `scratch`.
    fn fill(&self, plane: &[f32], scratch: &mut [f32]) {
        let s = &self.shape;
        let (stride, len) = (self.row_stride(), self.phase_len);
        // Padded columns kept: those before the slack of each phase.
        let cols = (len - CHUNK) * s.sw;
        for (py, row) in scratch.chunks_exact_mut(stride).enumerate() {
            row.fill(0.0);
            let Some(y) = py.checked_sub(s.ph).filter(|&y| y < s.h) else {
                continue;
            };
            let src = &plane[y * s.w..(y + 1) * s.w];
            // Input columns x land at padded column x + pw, kept while below `cols`.
            let n = s.w.min(cols.saturating_sub(s.pw));
            if s.sw == 1 {
                row[s.pw..s.pw + n].copy_from_slice(&src[..n]);
            } else {
                // Phase r holds padded columns r + sw * t, i.e. input columns
                // r + sw * t - pw, for the t that land inside 0..n.
                for r in 0..s.sw {
                    let t0 = s.pw.saturating_sub(r).div_ceil(s.sw);
                    let t1 = (n + s.pw).saturating_sub(r).div_ceil(s.sw);
                    if t1 <= t0 {
                        continue;
                    }
                    let x0 = r + s.sw * t0 - s.pw;
                    let dst = &mut row[r * len + t0..r * len + t1];
                    for (d, &v) in dst.iter_mut().zip(src[x0..n].iter().step_by(s.sw)) {
                        *d = v;
                    }
                }
            }
        }
    }
}

/// Computes `out.len() / ow` (1 to [`ROWS`]) output rows: row `r`, column `x` is
/// `sum_t w[t] * src[r * step + taps[t] + x]`, taps summed in order.
fn rows(isa: Isa, src: &[f32], step: usize, taps: &[usize], w: &[f32], out: &mut [f32], ow: usize) {
    let n = out.len() / ow;
    assert!(
        (1..=ROWS).contains(&n) && out.len() == n * ow,
        "depthwise: bad row block"
    );
    assert_eq!(taps.len(), w.len(), "depthwise: one weight per tap");
    let last = taps.iter().max().map_or(0, |&t| t + (n - 1) * step);
    assert!(
        last + ow.next_multiple_of(CHUNK) <= src.len(),
        "depthwise: phase plane too short"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the reads are in bounds (checked above), `out` holds n * ow floats, and an
        // Avx2Fma or Avx512F kernel is only selected after AVX2 and FMA were detected.
        Isa::Avx2Fma | Isa::Avx512F => unsafe {
            avx2::rows(src.as_ptr(), step, taps, w, out.as_mut_ptr(), ow, n)
        },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: as above, with NEON detected.
        Isa::Neon => unsafe { neon::rows(src.as_ptr(), step, taps, w, out.as_mut_ptr(), ow, n) },
        _ => portable::rows(src, step, taps, w, out, ow, n),
    }
}
