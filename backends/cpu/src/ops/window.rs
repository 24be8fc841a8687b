//! The spectral generators: the window ops (HannWindow, HammingWindow, BlackmanWindow),
//! whose only operand (the size) is a constant, so they are computed once at init and
//! held as constants; and MelWeightMatrix, whose frequency edges may arrive at run time,
//! so it runs on every execute (a few hundred values, written without allocating).
//!
//! Both compute in f64 and round once, as the reference does (integer outputs truncate
//! toward zero, as Cast does).

use std::f64::consts::{LN_10, PI};

use baton_delegate_api::dtype::{push_float, push_int};
use baton_delegate_api::ir::{DType, OpKind};

use super::int::{f16_to_f32, f32_to_f16};
use super::{Sources, Src};

/// The cosine-sum coefficients `a0, a1, a2` of a window op: `w(t) = a0 - a1 cos t +
/// a2 cos 2t`. Hamming's are the exact 25/46 and 21/46 ONNX specifies (not 0.54 / 0.46).
fn coefficients(op: OpKind) -> Option<[f64; 3]> {
    match op {
        OpKind::HannWindow => Some([0.5, 0.5, 0.0]),
        OpKind::HammingWindow => Some([25.0 / 46.0, 21.0 / 46.0, 0.0]),
        OpKind::BlackmanWindow => Some([0.42, 0.5, 0.08]),
        _ => None,
    }
}

/// The stored bytes of a window op's output: `size` values of `dtype`. A periodic window
/// is one period of `size` points; a symmetric one spans `size - 1` intervals, and a
/// symmetric window of one point is its peak, 1.
pub(crate) fn window_bytes(
    op: OpKind,
    periodic: bool,
    size: usize,
    dtype: DType,
) -> Result<Vec<u8>, String> {
    let [a0, a1, a2] = coefficients(op).ok_or_else(|| format!("{op} is not a window op"))?;
    let period = if periodic {
        size
    } else {
        size.saturating_sub(1)
    };
    let mut out = Vec::with_capacity(size * dtype.size());
    for n in 0..size {
        let v = if period == 0 {
            1.0
        } else {
            let t = 2.0 * PI * n as f64 / period as f64;
            a0 - a1 * t.cos() + a2 * (2.0 * t).cos()
        };
        if dtype.is_float() {
            push_float(dtype, v, false, &mut out);
        } else {
            push_int(dtype, v.trunc() as i128, &mut out);
        }
    }
    Ok(out)
}

/// Hertz to mel, HTK's `2595 log10(1 + hz / 700)`.
fn mel(hz: f64) -> f64 {
    2595.0 * (hz / 700.0).ln_1p() / LN_10
}

/// Mel to hertz, the inverse of [`mel`].
fn hertz(m: f64) -> f64 {
    700.0 * (m / 2595.0 * LN_10).exp_m1()
}

/// A prepared MelWeightMatrix node: `[rows, cols]` triangular filters (`rows` =
/// `dft_length / 2 + 1` spectrum bins, `cols` mel bins) between two edges read at run time.
#[derive(Clone, Debug)]
pub(crate) struct MelOp {
    /// `lower_edge_hertz` and `upper_edge_hertz` with their dtypes (f32 or f16).
    pub low: (Src, DType),
    pub high: (Src, DType),
    pub rows: usize,
    pub cols: usize,
    pub dft_length: i64,
    pub sample_rate: i64,
    /// f32, f16 (held as stored bytes) or i32 (its bits in an f32 slot).
    pub out: DType,
}

impl MelOp {
    fn edge(sources: &Sources<'_>, (src, dtype): (Src, DType)) -> Result<f64, String> {
        let b = sources.bytes(src);
        match dtype {
            DType::F16 if b.len() >= 2 => {
                Ok(f64::from(f16_to_f32(u16::from_le_bytes([b[0], b[1]]))))
            }
            DType::F32 if b.len() >= 4 => {
                Ok(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            _ => Err(format!("MelWeightMatrix edge of {dtype} holds no value")),
        }
    }

    /// The FFT bin of mel point `k` of `cols + 2`, spaced evenly in mel from the lower
    /// edge by `step` (ONNX's reference spacing, `(high - low) / (cols + 2)`), rounded
    /// down; an error naming the point when it falls outside the spectrum (the last point
    /// may sit one bin past it: it only bounds the last filter).
    fn bin(&self, k: usize, low_mel: f64, step: f64) -> Result<usize, String> {
        let hz = hertz(k as f64 * step + low_mel);
        let bin = ((self.dft_length + 1) as f64 * hz / self.sample_rate as f64).floor();
        let end = if k == self.cols + 1 {
            self.rows + 1
        } else {
            self.rows
        };
        if !(0.0..end as f64).contains(&bin) {
            return Err(format!(
                "MelWeightMatrix mel point {k} ({hz} Hz) falls on FFT bin {bin}, outside \
                 the spectrum's {} bins",
                self.rows
            ));
        }
        Ok(bin as usize)
    }

    /// Column `i` rises linearly from point `i`'s bin to point `i + 1`'s (a single 1 when
    /// they share a bin) and falls to 0 at point `i + 2`'s; where the two edges meet, the
    /// falling one's value (1) is the one kept, as in ONNX's reference.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let (low, high) = (
            Self::edge(sources, self.low)?,
            Self::edge(sources, self.high)?,
        );
        let low_mel = mel(low);
        let step = (mel(high) - low_mel) / (self.cols + 2) as f64;
        // Every point is checked before anything is written.
        for k in 0..self.cols + 2 {
            self.bin(k, low_mel, step)?;
        }
        let cols = self.cols;
        if self.out == DType::F16 {
            bytemuck::cast_slice_mut::<f32, u8>(out).fill(0);
        } else {
            out.fill(0.0);
        }
        let mut set = |at: usize, v: f64| put(out, self.out, at, v);
        for i in 0..cols {
            let left = self.bin(i, low_mel, step)?;
            let center = self.bin(i + 1, low_mel, step)?;
            let right = self.bin(i + 2, low_mel, step)?;
            if left == center {
                set(center * cols + i, 1.0);
            } else {
                // Empty when the points run backwards (edges given high to low).
                for j in left..=center {
                    set(j * cols + i, (j - left) as f64 / (center - left) as f64);
                }
            }
            for j in center..right {
                set(j * cols + i, (right - j) as f64 / (right - center) as f64);
            }
        }
        Ok(())
    }
}

/// Writes `v` as element `at` of an output of `dtype` as the executable holds it: f16 as
/// stored bytes (through f32: the weights are ratios of small integers, for which the
/// double rounding matters only at ties, within the f16 tolerance), i32 as its bits in an
/// f32 slot (truncated), f32 rounded once.
fn put(out: &mut [f32], dtype: DType, at: usize, v: f64) {
    match dtype {
        DType::F16 => {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
            bytes[2 * at..2 * at + 2].copy_from_slice(&f32_to_f16(v as f32).to_le_bytes());
        }
        DType::I32 => out[at] = f32::from_bits(v.trunc() as i32 as u32),
        _ => out[at] = v as f32,
    }
}
