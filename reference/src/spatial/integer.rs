//! ConvInteger and MatMulInteger: exact integer products of 8-bit operands less their
//! zero points, summed in i64 and wrapped to i32 (ONNX lets the accumulation overflow only
//! at 32 bits).

use baton_delegate_api::shape::{broadcast_shapes, ConvGeometry};
use baton_delegate_api::{Node, TensorMut, TensorRef};

use super::given;
use crate::{data, shape_err, KernelError};

/// Operand `k`'s values less the zero point at `zp` (one value, or one per line, the
/// line of element `i` being `line(i)`).
fn centred(
    inputs: &[TensorRef<'_>],
    k: usize,
    zp: usize,
    line: impl Fn(usize) -> usize,
) -> Vec<i64> {
    let v = data::load_ints(&inputs[k]);
    let z: Vec<i128> = if given(inputs, zp) {
        data::load_ints(&inputs[zp])
    } else {
        vec![0]
    };
    v.iter()
        .enumerate()
        .map(|(i, &x)| (x - if z.len() == 1 { z[0] } else { z[line(i)] }) as i64)
        .collect()
}

pub(super) fn conv_integer(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let g = ConvGeometry::new(node, x.shape, w.shape).map_err(|m| shape_err(node, m))?;
    let per_channel: usize = w.shape[1..].iter().product();
    let xs = centred(inputs, 0, 2, |_| 0);
    let ws = centred(inputs, 1, 3, |i| i / per_channel.max(1));
    let c_per_group = g.in_channels / g.group;
    let m_per_group = g.out_channels / g.group;
    let taps = data::all_indices(&g.window.kernel);
    let outs = data::all_indices(&g.out_spatial);
    let in_strides = data::strides(&g.in_spatial);
    let in_plane: usize = g.in_spatial.iter().product();
    let mut y = Vec::with_capacity(g.batch * g.out_channels * outs.len());
    let w_ = &g.window;
    for n in 0..g.batch {
        for m in 0..g.out_channels {
            let first = (m / m_per_group) * c_per_group;
            for o in &outs {
                let mut acc: i64 = 0;
                for c in 0..c_per_group {
                    let plane = (n * g.in_channels + first + c) * in_plane;
                    let wbase = (m * c_per_group + c) * taps.len();
                    for (t, tap) in taps.iter().enumerate() {
                        let mut off = 0usize;
                        let mut inside = true;
                        for d in 0..tap.len() {
                            let at = (o[d] * w_.strides[d] + tap[d] * w_.dilations[d]) as i64
                                - w_.pad_begin[d] as i64;
                            if at < 0 || at >= g.in_spatial[d] as i64 {
                                inside = false;
                                break;
                            }
                            off += at as usize * in_strides[d];
                        }
                        if inside {
                            acc = acc.wrapping_add(xs[plane + off] * ws[wbase + t]);
                        }
                    }
                }
                y.push(i128::from(acc));
            }
        }
    }
    data::store_ints(out, &y);
    Ok(())
}

pub(super) fn matmul_integer(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let a2: Vec<usize> = match inputs[0].shape {
        [k] => vec![1, *k],
        s => s.to_vec(),
    };
    let b2: Vec<usize> = match inputs[1].shape {
        [k] => vec![*k, 1],
        s => s.to_vec(),
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let n = b2[b2.len() - 1];
    // A's zero point per row, B's per column.
    let a = centred(inputs, 0, 2, |i| (i / k.max(1)) % m.max(1));
    let b = centred(inputs, 1, 3, |i| i % n.max(1));
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast_shapes(a_batch, b_batch).map_err(|e| shape_err(node, e))?;
    let a_of = data::broadcast_offsets(a_batch, &batch);
    let b_of = data::broadcast_offsets(b_batch, &batch);
    let mut y = Vec::with_capacity(a_of.len() * m * n);
    for (&ab, &bb) in a_of.iter().zip(&b_of) {
        let am = &a[ab * m * k..][..m * k];
        let bm = &b[bb * k * n..][..k * n];
        for i in 0..m {
            for j in 0..n {
                let dot = (0..k).fold(0i64, |s, p| s.wrapping_add(am[i * k + p] * bm[p * n + j]));
                y.push(i128::from(dot));
            }
        }
    }
    data::store_ints(out, &y);
    Ok(())
}
