//! HannWindow, HammingWindow and BlackmanWindow: cosine sums over one period.

use std::f64::consts::PI;

use baton_delegate_api::{Node, OpKind, TensorMut};

use crate::data;
use crate::KernelError;

/// Writes the window of `node`'s op over the output's length, in f64 rounded once
/// (integer outputs truncate toward zero, as Cast does).
pub(super) fn window(node: &Node, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let size = out.shape()[0];
    // A periodic window is one period of `size` points; a symmetric one spans `size - 1`
    // intervals (a single symmetric point is the window's peak, 1).
    let period = if node.attr_int("periodic", 1) != 0 {
        size
    } else {
        size.saturating_sub(1)
    };
    let coeffs: &[f64] = match node.op {
        OpKind::HannWindow => &[0.5, 0.5],
        OpKind::HammingWindow => &[25.0 / 46.0, 21.0 / 46.0],
        OpKind::BlackmanWindow => &[0.42, 0.5, 0.08],
        op => return Err(crate::unsupported(node, format!("{op} is not a window op"))),
    };
    let w: Vec<f64> = (0..size)
        .map(|n| {
            if period == 0 {
                return 1.0;
            }
            let t = 2.0 * PI * n as f64 / period as f64;
            coeffs
                .iter()
                .enumerate()
                .map(|(k, &c)| {
                    let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                    sign * c * (k as f64 * t).cos()
                })
                .sum()
        })
        .collect();
    if out.dtype.is_float() {
        data::store_floats(out, &w, false);
    } else {
        let ints: Vec<i128> = w.iter().map(|&v| v.trunc() as i128).collect();
        data::store_ints(out, &ints);
    }
    Ok(())
}
