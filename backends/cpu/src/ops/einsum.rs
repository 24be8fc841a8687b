//! Einsum of one or two operands.
//!
//! Two operands are one batched matrix product on the delegate's GEMM: every label is a
//! batch label (in both operands and the output), a row label (the first operand and the
//! output), a column label (the second and the output) or a summed one (the rest). A label
//! summed but found in one operand only is summed as a depth label the other operand does
//! not vary along (its stride is 0), so no label needs a pass of its own. The operands
//! are gathered into `[batch, M, K]` and `[batch, K, N]` (a transpose, with broadcast
//! axes read at stride 0), and the `[batch, M, N]` result is gathered into the output's
//! label order when that differs. One operand is a transpose followed by row sums.
//!
//! A label repeated within one operand (a diagonal, `ii->i`) needs no pass of its own
//! either: the gathers read it with the sum of its axes' strides. Three or more operands
//! are declined by `support`; the buffers are the run context's, sized at init.

use super::{RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, Epilogue, MatMut, Rows};

/// The most labels an equation may use here (the gather's index lives on the stack).
pub(crate) const MAX_LABELS: usize = 16;

/// A gather: the destination is contiguous in `extents` order, element `idx` read from
/// `sum(idx[d] * strides[d])` of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Walk {
    pub extents: Vec<usize>,
    pub strides: Vec<usize>,
}

impl Walk {
    fn len(&self) -> usize {
        self.extents.iter().product()
    }

    /// Whether the walk reads the source in order (a plain copy).
    fn is_identity(&self) -> bool {
        let mut step = 1;
        for (&e, &s) in self.extents.iter().zip(&self.strides).rev() {
            if e != 1 && s != step {
                return false;
            }
            step *= e;
        }
        true
    }

    /// Fills `dst` (of `self.len()` elements) from `src`.
    fn gather(&self, src: &[f32], dst: &mut [f32]) {
        let n = self.extents.len();
        if dst.is_empty() {
            return;
        }
        if n == 0 {
            dst[0] = src[0];
            return;
        }
        let (inner, step) = (self.extents[n - 1], self.strides[n - 1]);
        let mut idx = [0usize; MAX_LABELS];
        let mut base = 0usize;
        for row in dst.chunks_exact_mut(inner) {
            if step == 1 {
                row.copy_from_slice(&src[base..base + inner]);
            } else {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = src[base + j * step];
                }
            }
            // The next row: an odometer over the outer axes.
            let mut d = n - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                base += self.strides[d];
                if idx[d] < self.extents[d] {
                    break;
                }
                base -= self.strides[d] * self.extents[d];
                idx[d] = 0;
            }
        }
    }
}

/// A prepared Einsum node.
#[derive(Clone, Debug)]
pub(crate) enum EinsumOp {
    /// One operand: gathered into `[M, K]` (the output's labels, then the summed ones),
    /// each row summed.
    Reduce { x: Src, walk: Walk, k: usize },
    /// Two operands: `C[b] = A[b] · B[b]`, then `C` into the output's order (`out`, when
    /// that is not already `[batch, M, N]`).
    Product {
        a: Src,
        b: Src,
        a_walk: Walk,
        b_walk: Walk,
        batch: usize,
        m: usize,
        k: usize,
        n: usize,
        out: Option<Walk>,
    },
}

impl EinsumOp {
    /// Plans the einsum of `inputs` (each operand's labels, one or two operands) into `output` labels, with label `extents`; `shapes` are the
    /// operands' shapes (an axis of extent 1 broadcasts, read at stride 0).
    pub fn new(
        srcs: &[Src],
        inputs: &[Vec<usize>],
        shapes: &[Vec<usize>],
        output: &[usize],
        extents: &[usize],
    ) -> Result<EinsumOp, String> {
        if extents.len() > MAX_LABELS {
            return Err(format!(
                "Einsum with {} labels (at most {MAX_LABELS})",
                extents.len()
            ));
        }
        // The stride of label `l` in operand `i`: 0 where it does not vary; a label on
        // several axes (a diagonal) steps along all of them at once, the sum of their
        // strides.
        let stride = |i: usize, l: usize| -> usize {
            let (labels, shape) = (&inputs[i], &shapes[i]);
            (0..labels.len())
                .filter(|&axis| labels[axis] == l && shape[axis] != 1)
                .map(|axis| shape[axis + 1..].iter().product::<usize>())
                .sum()
        };
        let walk = |i: usize, labels: &[usize]| Walk {
            extents: labels.iter().map(|&l| extents[l]).collect(),
            strides: labels.iter().map(|&l| stride(i, l)).collect(),
        };
        let product = |labels: &[usize]| labels.iter().map(|&l| extents[l]).product::<usize>();
        let summed: Vec<usize> = (0..extents.len())
            .filter(|l| !output.contains(l))
            .filter(|l| inputs.iter().any(|t| t.contains(l)))
            .collect();
        match (srcs, inputs) {
            ([x], [_]) => {
                let order: Vec<usize> = output.iter().chain(&summed).copied().collect();
                Ok(EinsumOp::Reduce {
                    x: *x,
                    walk: walk(0, &order),
                    k: product(&summed),
                })
            }
            ([a, b], [la, lb]) => {
                let group = |in_a: bool, in_b: bool| -> Vec<usize> {
                    output
                        .iter()
                        .copied()
                        .filter(|l| la.contains(l) == in_a && lb.contains(l) == in_b)
                        .collect()
                };
                let (batch, rows, cols) =
                    (group(true, true), group(true, false), group(false, true));
                let cat = |x: &[usize], y: &[usize], z: &[usize]| -> Vec<usize> {
                    x.iter().chain(y).chain(z).copied().collect()
                };
                let a_walk = walk(0, &cat(&batch, &rows, &summed));
                let b_walk = walk(1, &cat(&batch, &summed, &cols));
                let (nb, m, k, n) = (
                    product(&batch),
                    product(&rows),
                    product(&summed),
                    product(&cols),
                );
                // C's strides, per label, for the output's gather.
                let c_order = cat(&batch, &rows, &cols);
                let mut c_stride = vec![0; extents.len()];
                let mut step = 1;
                for &l in c_order.iter().rev() {
                    c_stride[l] = step;
                    step *= extents[l];
                }
                let out = Walk {
                    extents: output.iter().map(|&l| extents[l]).collect(),
                    strides: output.iter().map(|&l| c_stride[l]).collect(),
                };
                Ok(EinsumOp::Product {
                    a: *a,
                    b: *b,
                    a_walk,
                    b_walk,
                    batch: nb,
                    m,
                    k,
                    n,
                    out: (!out.is_identity()).then_some(out),
                })
            }
            _ => Err(format!(
                "Einsum of {} operands (one or two implemented)",
                inputs.len()
            )),
        }
    }

    /// Sizes the context's work space and run-time packing.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        match self {
            EinsumOp::Reduce { walk, k, .. } => {
                if *k != 1 {
                    ctx.reserve_work(walk.len());
                }
            }
            EinsumOp::Product {
                batch,
                m,
                k,
                n,
                out,
                ..
            } => {
                let c = if out.is_some() { batch * m * n } else { 0 };
                ctx.reserve_work(batch * m * k + batch * k * n + c);
                ctx.rhs.reserve(ctx.kernel, 1, *k, *n);
            }
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let RunCtx {
            kernel,
            pool,
            rhs,
            work,
            ..
        } = ctx;
        match self {
            EinsumOp::Reduce { x, walk, k } => {
                let x = sources.get(*x);
                if *k == 1 {
                    return walk.gather(x, out);
                }
                if *k == 0 {
                    // A sum over an empty extent.
                    return out.fill(0.0);
                }
                let rows = &mut work[..walk.len()];
                walk.gather(x, rows);
                for (o, row) in out.iter_mut().zip(rows.chunks_exact(*k)) {
                    *o = row.iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
                }
            }
            EinsumOp::Product {
                a,
                b,
                a_walk,
                b_walk,
                batch,
                m,
                k,
                n,
                out: permute,
            } => {
                let (nb, m, k, n) = (*batch, *m, *k, *n);
                if k == 0 {
                    return out.fill(0.0);
                }
                let (abuf, rest) = work.split_at_mut(nb * m * k);
                let (bbuf, rest) = rest.split_at_mut(nb * k * n);
                a_walk.gather(sources.get(*a), abuf);
                b_walk.gather(sources.get(*b), bbuf);
                let c: &mut [f32] = match permute {
                    Some(_) => &mut rest[..nb * m * n],
                    None => &mut *out,
                };
                if m > 0 && n > 0 {
                    for i in 0..nb {
                        rhs.pack_strided(kernel, k, n, &bbuf[i * k * n..], n, 1, 1.0);
                        let lhs = Rows::Dense {
                            data: &abuf[i * m * k..],
                            lda: k,
                        };
                        let c = MatMut {
                            data: &mut c[i * m * n..],
                            rs: n,
                        };
                        gemm_parallel(pool, kernel, m, lhs, rhs, c, &Epilogue::new());
                    }
                }
                if let Some(walk) = permute {
                    walk.gather(&rest[..nb * m * n], out);
                }
            }
        }
    }
}
