//! MelWeightMatrix: triangular mel filters over the bins of a one-sided spectrum.

use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::{data, KernelError};

/// Hertz to mel (HTK's formula, `2595 * log10(1 + hz / 700)`) and back.
fn mel(hz: f64) -> f64 {
    2595.0 * (hz / 700.0).ln_1p() / std::f64::consts::LN_10
}

fn hertz(mel: f64) -> f64 {
    700.0 * (mel / 2595.0 * std::f64::consts::LN_10).exp_m1()
}

/// The output's `[bins, mel_bins]` is already sized from `num_mel_bins` and `dft_length`;
/// the FFT bin of each of the `mel_bins + 2` points is computed as ONNX's reference does
/// (which spaces the points by `(high - low) / (mel_bins + 2)` in mel and rounds each bin
/// down). Column `i` rises linearly from point `i` to point `i + 1` (a single 1 when they
/// share a bin) and falls to 0 at point `i + 2`; later writes win where the two meet.
pub(super) fn mel_weight_matrix(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (rows, cols) = (out.shape()[0], out.shape()[1]);
    let scalar = |i: usize| data::load_f64(&inputs[i])[0];
    let dft_length = data::load::<i64>(&inputs[1])[0];
    let sample_rate = data::load::<i64>(&inputs[2])[0];
    if sample_rate <= 0 {
        return Err(crate::unsupported(
            node,
            format!("sample_rate must be > 0, got {sample_rate}"),
        ));
    }
    let (low, high) = (scalar(3), scalar(4));
    let (low_mel, high_mel) = (mel(low), mel(high));
    let points = cols + 2;
    let step = (high_mel - low_mel) / points as f64;
    let mut bins = Vec::with_capacity(points);
    for k in 0..points {
        let hz = hertz(k as f64 * step + low_mel);
        let bin = ((dft_length + 1) as f64 * hz / sample_rate as f64).floor();
        // The last point only bounds the last column's falling edge (it is not written).
        let end = if k + 1 == points { rows + 1 } else { rows };
        if !(0.0..end as f64).contains(&bin) {
            return Err(crate::unsupported(
                node,
                format!(
                    "mel point {k} ({hz} Hz) falls on FFT bin {bin}, outside the spectrum's {rows} bins (lower_edge_hertz {low}, upper_edge_hertz {high})"
                ),
            ));
        }
        bins.push(bin as usize);
    }
    let mut w = vec![0.0f64; rows * cols];
    for i in 0..cols {
        let (left, center, right) = (bins[i], bins[i + 1], bins[i + 2]);
        if left == center {
            w[center * cols + i] = 1.0;
        } else {
            // An empty range when the points run backwards (only for edges given high to
            // low), as in ONNX's reference.
            for j in left..=center {
                w[j * cols + i] = (j - left) as f64 / (center - left) as f64;
            }
        }
        for j in center..right {
            w[j * cols + i] = (right - j) as f64 / (right - center) as f64;
        }
    }
    if out.dtype.is_float() {
        data::store_floats(out, &w, false);
    } else {
        let ints: Vec<i128> = w.iter().map(|&v| v.trunc() as i128).collect();
        data::store_ints(out, &ints);
    }
    Ok(())
}
