//! Det: the determinant of each square matrix in the last two dimensions.

use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::data::{load_f64, store_floats};
use crate::KernelError;

/// The determinant of the row-major `n` x `n` matrix `a` (overwritten): Gaussian
/// elimination with partial pivoting, the pivots' product negated once per row swap.
fn determinant(a: &mut [f64], n: usize) -> f64 {
    let mut det = 1.0;
    for k in 0..n {
        // The largest magnitude at or below the diagonal (the first of equals; NaN never
        // wins a comparison, so a column of NaN keeps row k and the NaN propagates).
        let mut p = k;
        for r in k + 1..n {
            if a[r * n + k].abs() > a[p * n + k].abs() {
                p = r;
            }
        }
        let pivot = a[p * n + k];
        if pivot == 0.0 {
            return 0.0;
        }
        if p != k {
            for c in 0..n {
                a.swap(k * n + c, p * n + c);
            }
            det = -det;
        }
        det *= pivot;
        for r in k + 1..n {
            let f = a[r * n + k] / pivot;
            if f != 0.0 {
                for c in k + 1..n {
                    a[r * n + c] -= f * a[k * n + c];
                }
            }
        }
    }
    det
}

pub(super) fn det(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let r = x.shape.len();
    if r < 2 || x.shape[r - 1] != x.shape[r - 2] {
        return Err(KernelError::Shape {
            node: node.label(),
            message: format!("Det needs square matrices, got {:?}", x.shape),
        });
    }
    let n = x.shape[r - 1];
    let count: usize = x.shape[..r - 2].iter().product();
    let values = load_f64(x);
    let mut dets = Vec::with_capacity(count);
    for m in 0..count {
        let mut a = values[m * n * n..(m + 1) * n * n].to_vec();
        dets.push(determinant(&mut a, n));
    }
    if dets.len() != out.len() {
        return Err(KernelError::Shape {
            node: node.label(),
            message: format!("{} determinants for an output of {}", dets.len(), out.len()),
        });
    }
    store_floats(out, &dets, true);
    Ok(())
}
