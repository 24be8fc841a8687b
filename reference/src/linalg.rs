//! MatMul (numpy `matmul`) and Gemm, with f64 inner products.

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::broadcast_shapes;
use baton_delegate_api::{TensorMut, TensorRef};

use super::data::{broadcast_offsets, load_f32, load_f64, store_f64, sum_f64};
use super::{shape_err, KernelError};

/// numpy `matmul`: a 1-D `a` is a row `[1, K]` and a 1-D `b` a column `[K, 1]` (the
/// added dimension is dropped from the result); leading batch dimensions broadcast.
pub(crate) fn matmul(
    node: &Node,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let a2: Vec<usize> = match a.shape {
        [k] => vec![1, *k],
        s => s.to_vec(),
    };
    let b2: Vec<usize> = match b.shape {
        [k] => vec![*k, 1],
        s => s.to_vec(),
    };
    // Ranks >= 2 here: infer_static has rejected rank-0 operands.
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let n = b2[b2.len() - 1];
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast_shapes(a_batch, b_batch).map_err(|e| shape_err(node, e))?;
    let a_of = broadcast_offsets(a_batch, &batch);
    let b_of = broadcast_offsets(b_batch, &batch);
    // f64 holds every f16, f32 and f64 operand exactly.
    let (x, y) = (load_f64(a), load_f64(b));
    let mut r = Vec::with_capacity(a_of.len() * m * n);
    for (&ab, &bb) in a_of.iter().zip(&b_of) {
        let a_mat = &x[ab * m * k..(ab + 1) * m * k];
        let b_mat = &y[bb * k * n..(bb + 1) * k * n];
        for i in 0..m {
            for j in 0..n {
                let dot = sum_f64((0..k).map(|p| a_mat[i * k + p] * b_mat[p * n + j]));
                r.push(dot);
            }
        }
    }
    store_f64(out, &r);
    Ok(())
}

/// `Y = alpha * A' * B' + beta * C`, where `A'`/`B'` are transposed per `transA`/`transB`
/// and the optional `C` broadcasts to `[M, N]`. With `beta == 0` C is not read.
pub(crate) fn gemm(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (a, b) = (&inputs[0], &inputs[1]);
    let trans_a = node.attr_int("transA", 0) != 0;
    let trans_b = node.attr_int("transB", 0) != 0;
    let alpha = node.attr_float("alpha", 1.0) as f64;
    let beta = node.attr_float("beta", 1.0) as f64;
    let (m, n) = (out.shape()[0], out.shape()[1]);
    let k = if trans_a { a.shape[0] } else { a.shape[1] };
    let (x, y) = (load_f32(a), load_f32(b));
    // Element (i, p) of A' and (p, j) of B', reading the stored row-major layouts.
    let a_at = |i: usize, p: usize| {
        if trans_a {
            x[p * m + i]
        } else {
            x[i * k + p]
        }
    };
    let b_at = |p: usize, j: usize| {
        if trans_b {
            y[j * k + p]
        } else {
            y[p * n + j]
        }
    };
    let c = match inputs.get(2) {
        Some(c) if beta != 0.0 => Some((load_f32(c), broadcast_offsets(c.shape, &[m, n]))),
        _ => None,
    };
    let mut r = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let dot = sum_f64((0..k).map(|p| a_at(i, p) as f64 * b_at(p, j) as f64));
            let mut v = alpha * dot;
            if let Some((cv, co)) = &c {
                v += beta * cv[co[i * n + j]] as f64;
            }
            r.push(v);
        }
    }
    store_f64(out, &r);
    Ok(())
}
