//! DFT and STFT: direct sums in f64 over twiddles reduced modulo the length.

use std::f64::consts::PI;

use baton_delegate_api::shape::spectral;
use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::data;
use crate::KernelError;

/// `e^{-2 pi i k / n}` for `k` in `0..n`, as (cos, sin) pairs of the negative angle.
fn twiddles(n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|k| {
            let a = -2.0 * PI * k as f64 / n as f64;
            (a.cos(), a.sin())
        })
        .collect()
}

/// The complex values of a line of `len` elements starting at `start` with stride
/// `stride` in an input whose last axis holds 1 (real) or 2 (complex) parts.
fn line(v: &[f64], parts: usize, start: usize, stride: usize, len: usize) -> Vec<(f64, f64)> {
    (0..len)
        .map(|j| {
            let at = (start + j * stride) * parts;
            (v[at], if parts == 2 { v[at + 1] } else { 0.0 })
        })
        .collect()
}

/// The transform of `x` (zero-padded or cut to `n`) at the bins `0..bins`.
fn transform(
    x: &[(f64, f64)],
    n: usize,
    bins: usize,
    inverse: bool,
    w: &[(f64, f64)],
) -> Vec<(f64, f64)> {
    let sign = if inverse { -1.0 } else { 1.0 };
    let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
    (0..bins)
        .map(|k| {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, &(a, b)) in x.iter().take(n).enumerate() {
                let (c, s) = w[(j * k) % n];
                let s = sign * s;
                re += a * c - b * s;
                im += a * s + b * c;
            }
            (re * scale, im * scale)
        })
        .collect()
}

/// The real signal of length `n` whose spectrum's first half is `x` (numpy's `irfft`:
/// bins past `x` are 0, and the imaginary parts of bin 0 and, for even `n`, bin `n / 2`
/// do not count).
fn inverse_real(x: &[(f64, f64)], n: usize, w: &[(f64, f64)]) -> Vec<f64> {
    let half = n / 2;
    let bin = |k: usize| x.get(k).copied().unwrap_or((0.0, 0.0));
    (0..n)
        .map(|t| {
            let mut acc = bin(0).0;
            for k in 1..n.div_ceil(2) {
                let (a, b) = bin(k);
                // Re((a + ib) e^{+2 pi i k t / n}), the twiddle's angle negated.
                let (c, s) = w[(k * t) % n];
                acc += 2.0 * (a * c + b * s);
            }
            if n.is_multiple_of(2) {
                let (a, _) = bin(half);
                acc += if t.is_multiple_of(2) { a } else { -a };
            }
            acc / n as f64
        })
        .collect()
}

pub(super) fn dft(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let scalar = |i: usize| {
        inputs
            .get(i)
            .filter(|t| !t.is_empty())
            .map(|t| data::load_ints(t)[0] as i64)
    };
    let plan = spectral::dft_plan(node, x.shape, scalar(1), scalar(2))
        .map_err(|m| crate::shape_err(node, m))?;
    let r = x.shape.len();
    let parts = x.shape[r - 1];
    let inverse = node.attr_int("inverse", 0) != 0;
    let len = x.shape[plan.axis];
    let inner: usize = x.shape[plan.axis + 1..r - 1].iter().product();
    let outer: usize = x.shape[..plan.axis].iter().product();
    let bins = plan.output[plan.axis];
    let out_parts = plan.output[r - 1];
    let v = data::load_f64(x);
    let w = twiddles(plan.length);
    let mut y = vec![0.0; plan.output.iter().product()];
    for o in 0..outer {
        for i in 0..inner {
            let xs = line(&v, parts, o * len * inner + i, inner, len);
            let base = o * bins * inner + i;
            if plan.real_output {
                for (k, val) in inverse_real(&xs, plan.length, &w).into_iter().enumerate() {
                    y[base + k * inner] = val;
                }
            } else {
                for (k, (re, im)) in transform(&xs, plan.length, bins, inverse, &w)
                    .into_iter()
                    .enumerate()
                {
                    let at = (base + k * inner) * out_parts;
                    y[at] = re;
                    y[at + 1] = im;
                }
            }
        }
    }
    data::store_floats(out, &y, false);
    Ok(())
}

pub(super) fn stft(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let scalar = |i: usize| {
        inputs
            .get(i)
            .filter(|t| !t.is_empty())
            .map(|t| data::load_ints(t)[0] as i64)
    };
    let window = inputs.get(2).filter(|t| !t.is_empty());
    let plan = spectral::stft_plan(
        node,
        x.shape,
        scalar(1),
        window.map(|w| w.shape.to_vec()),
        scalar(3),
    )
    .map_err(|m| crate::shape_err(node, m))?;
    let parts = x.shape[2];
    let len = x.shape[1];
    let v = data::load_f64(x);
    let win = window.map(data::load_f64);
    let w = twiddles(plan.frame_length);
    let [batch, frames, bins, _] = plan.output[..] else {
        unreachable!("an STFT output has rank 4");
    };
    let mut y = vec![0.0; batch * frames * bins * 2];
    for b in 0..batch {
        for f in 0..frames {
            let mut frame = line(&v, parts, b * len + f * plan.step, 1, plan.frame_length);
            if let Some(win) = &win {
                for (z, &g) in frame.iter_mut().zip(win) {
                    *z = (z.0 * g, z.1 * g);
                }
            }
            let spectrum = transform(&frame, plan.frame_length, bins, false, &w);
            for (k, (re, im)) in spectrum.into_iter().enumerate() {
                let at = ((b * frames + f) * bins + k) * 2;
                y[at] = re;
                y[at + 1] = im;
            }
        }
    }
    data::store_floats(out, &y, false);
    Ok(())
}
