//! Det: the determinant of each square matrix in the last two axes, by LU factorisation
//! with partial pivoting in f64 (the reference's algorithm, step for step: the pivot is
//! the first largest magnitude at or below the diagonal, a zero pivot gives 0, rows are
//! eliminated from the pivot row), rounded once to f32. Each matrix is factored in the
//! run context's f64 scratch, sized at init; the elimination of a row is a contiguous
//! axpy that vectorizes.

use super::{RunCtx, Sources, Src};

/// A prepared Det of `count` matrices of `n x n`.
#[derive(Clone, Debug)]
pub(crate) struct DetOp {
    pub x: Src,
    pub count: usize,
    pub n: usize,
}

impl DetOp {
    pub fn reserve(&self, ctx: &mut RunCtx) {
        ctx.reserve_acc(self.n * self.n);
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let (count, n) = (self.count, self.n);
        let x = sources.get(self.x);
        let a = &mut ctx.acc[..n * n];
        for (m, o) in out[..count].iter_mut().enumerate() {
            for (d, &v) in a.iter_mut().zip(&x[m * n * n..(m + 1) * n * n]) {
                *d = v as f64;
            }
            *o = determinant(a, n) as f32;
        }
    }
}

/// The determinant of the `n x n` row-major `a`, which it overwrites (a 0 x 0 matrix has
/// determinant 1).
fn determinant(a: &mut [f64], n: usize) -> f64 {
    let mut det = 1.0;
    for k in 0..n {
        // The first largest magnitude; NaN never wins, so a NaN column keeps row k and
        // the NaN reaches the result.
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
        let (top, rest) = a.split_at_mut((k + 1) * n);
        let pivot_row = &top[k * n + k + 1..(k + 1) * n];
        for row in rest.chunks_exact_mut(n) {
            let f = row[k] / pivot;
            if f != 0.0 {
                for (v, &u) in row[k + 1..].iter_mut().zip(pivot_row) {
                    *v -= f * u;
                }
            }
        }
    }
    det
}

#[cfg(test)]
mod tests {
    use super::determinant;

    #[test]
    fn determinants_by_hand() {
        // [[2, 1], [4, 3]]: 2 * 3 - 1 * 4 = 2 (pivoting on 4 swaps the rows once).
        assert_eq!(determinant(&mut [2.0, 1.0, 4.0, 3.0], 2), 2.0);
        // [[0, 1, 2], [1, 0, 3], [4, -3, 8]]: 0 - 1 * (8 - 12) + 2 * (-3 - 0) = -2.
        let mut a = [0.0, 1.0, 2.0, 1.0, 0.0, 3.0, 4.0, -3.0, 8.0];
        assert!((determinant(&mut a, 3) + 2.0).abs() < 1e-12);
        // Singular (two equal rows), and the empty matrix.
        assert_eq!(determinant(&mut [1.0, 2.0, 1.0, 2.0], 2), 0.0);
        assert_eq!(determinant(&mut [], 0), 1.0);
    }
}
