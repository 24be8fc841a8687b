//! MatMul (numpy semantics, batched and broadcast) and Gemm, both lowered to [`gemm`].

use baton_delegate_api::shape::broadcast_shapes;

use super::layout::broadcast_strides;
use super::{EpOpSpec, EpilogueSpec, Operand, RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, MatMut, MatRef, MicroKernel, PackedB, Rows};
use crate::prepack::Packs;

/// A batch of independent products `C[c..] = A[a..] · B[b]`.
#[derive(Clone, Copy, Debug)]
struct Batch {
    /// Offset of this batch's `A` matrix.
    a: usize,
    /// Index of this batch's `B` matrix.
    b: usize,
    /// Offset of this batch's `C` matrix.
    c: usize,
}

/// The right operand: packed once if constant (with `alpha` folded in), else packed on
/// every call into the context's buffer.
#[derive(Clone, Debug)]
enum RhsSpec {
    Packed(Vec<PackedB>),
    Runtime { src: Src, rs: usize, cs: usize },
}

/// One or more `m x k` by `k x n` products with a fused epilogue.
#[derive(Clone, Debug)]
pub(crate) struct MatMulOp {
    m: usize,
    n: usize,
    k: usize,
    a: Src,
    /// `A` is read as `[M, K]` rows at this stride; a transposed `A` (Gemm's `transA`) is
    /// copied into the context's buffer first.
    a_rs: usize,
    a_transposed: bool,
    alpha: f32,
    b: RhsSpec,
    batches: Vec<Batch>,
    epilogue: EpilogueSpec,
}

impl MatMulOp {
    /// MatMul of `a` and `b` (numpy rules: 1-D operands promoted, batch dims broadcast).
    /// Epilogue adds address the `[M, N]` matrix of one batch.
    pub fn matmul(
        packs: &mut Packs<'_>,
        kernel: &MicroKernel,
        a: Src,
        a_shape: &[usize],
        b: Operand<'_>,
        b_shape: &[usize],
        epilogue: EpilogueSpec,
    ) -> MatMulOp {
        let a2: Vec<usize> = match a_shape {
            [k] => vec![1, *k],
            s => s.to_vec(),
        };
        let b2: Vec<usize> = match b_shape {
            [k] => vec![*k, 1],
            s => s.to_vec(),
        };
        let (a_batch, a_mat) = a2.split_at(a2.len() - 2);
        let (b_batch, b_mat) = b2.split_at(b2.len() - 2);
        let (m, k, n) = (a_mat[0], a_mat[1], b_mat[1]);
        let out_batch = broadcast_shapes(a_batch, b_batch).unwrap_or_default();
        let batch_count: usize = out_batch.iter().product();
        let b_count: usize = b_batch.iter().product();

        // With one B matrix and epilogue operands that do not vary by row, the batch is
        // folded into M: one large product instead of many small ones.
        let fold = b_count == 1 && (m == 1 || epilogue.rows_uniform());
        let (m_eff, batches) = if fold {
            (batch_count * m, vec![Batch { a: 0, b: 0, c: 0 }])
        } else {
            let rank = out_batch.len();
            let (sa, sb) = (
                broadcast_strides(a_batch, rank),
                broadcast_strides(b_batch, rank),
            );
            let batches = (0..batch_count)
                .map(|i| {
                    let (mut ia, mut ib, mut rest) = (0, 0, i);
                    for d in (0..rank).rev() {
                        let idx = rest % out_batch[d];
                        rest /= out_batch[d];
                        ia += idx * sa[d];
                        ib += idx * sb[d];
                    }
                    Batch {
                        a: ia * m * k,
                        b: ib,
                        c: i * m * n,
                    }
                })
                .collect();
            (m, batches)
        };
        let b = match b {
            Operand::Const(data) => RhsSpec::Packed(
                (0..b_count)
                    .map(|i| {
                        let view = MatRef {
                            data: &data[i * k * n..],
                            rs: n,
                            cs: 1,
                        };
                        PackedB::new_in(packs, kernel, 1, k, n, None, |i, j| {
                            view.data[i * view.rs + j * view.cs]
                        })
                    })
                    .collect(),
            ),
            Operand::Runtime(src) => RhsSpec::Runtime { src, rs: n, cs: 1 },
        };
        MatMulOp {
            m: m_eff,
            n,
            k,
            a,
            a_rs: k,
            a_transposed: false,
            alpha: 1.0,
            b,
            batches,
            epilogue,
        }
    }

    /// Gemm: `alpha * A' · B' + beta * C` then `extra` (fused ops), with `A' = A` or `Aᵀ`
    /// and likewise for `B`. `c` is `C`'s source and its `(rs, cs)` view on `[M, N]`.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        packs: &mut Packs<'_>,
        kernel: &MicroKernel,
        a: Src,
        a_shape: &[usize],
        trans_a: bool,
        b: Operand<'_>,
        b_shape: &[usize],
        trans_b: bool,
        alpha: f32,
        c: Option<(Src, usize, usize, f32)>,
        extra: &[EpOpSpec],
    ) -> MatMulOp {
        let (m, k) = if trans_a {
            (a_shape[1], a_shape[0])
        } else {
            (a_shape[0], a_shape[1])
        };
        let (n, b_rs, b_cs) = if trans_b {
            (b_shape[0], 1, b_shape[1])
        } else {
            (b_shape[1], b_shape[1], 1)
        };
        let mut epilogue = EpilogueSpec::default();
        if let Some((src, rs, cs, beta)) = c {
            epilogue.ops.push(EpOpSpec::Add {
                src,
                rs,
                cs,
                scale: beta,
            });
        }
        epilogue.ops.extend_from_slice(extra);
        let b = match b {
            Operand::Const(data) => RhsSpec::Packed(vec![PackedB::new_in(
                packs,
                kernel,
                1,
                k,
                n,
                None,
                |i, j| alpha * data[i * b_rs + j * b_cs],
            )]),
            Operand::Runtime(src) => RhsSpec::Runtime {
                src,
                rs: b_rs,
                cs: b_cs,
            },
        };
        MatMulOp {
            m,
            n,
            k,
            a,
            a_rs: k,
            a_transposed: trans_a,
            alpha,
            b,
            batches: vec![Batch { a: 0, b: 0, c: 0 }],
            epilogue,
        }
    }

    /// Grows the scratch buffers this op needs.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        if let RhsSpec::Runtime { .. } = self.b {
            ctx.rhs.reserve(ctx.kernel, 1, self.k, self.n);
        }
        if self.a_transposed {
            ctx.reserve_work(self.m * self.k);
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
        let mut a = sources.get(self.a);
        if self.a_transposed {
            // Aᵀ is [K, M]: its columns are A's rows.
            let (m, k) = (self.m, self.k);
            for (i, row) in work[..m * k].chunks_exact_mut(k.max(1)).enumerate() {
                for (p, v) in row.iter_mut().enumerate() {
                    *v = a[p * m + i];
                }
            }
            a = &work[..m * k];
        }
        let epilogue = self.epilogue.resolve(sources);
        for batch in &self.batches {
            let lhs = Rows::Dense {
                data: &a[batch.a.min(a.len())..],
                lda: self.a_rs,
            };
            let packed = match &self.b {
                RhsSpec::Packed(p) => &p[batch.b],
                RhsSpec::Runtime { src, rs, cs } => {
                    let b = sources.get(*src);
                    let offset = batch.b * self.k * self.n;
                    let (rs, cs, alpha) = (*rs, *cs, self.alpha);
                    let b = &b[offset.min(b.len())..];
                    rhs.pack_strided(kernel, self.k, self.n, b, rs, cs, alpha);
                    &*rhs
                }
            };
            let c = MatMut {
                data: &mut out[batch.c..],
                rs: self.n,
            };
            gemm_parallel(pool, kernel, self.m, lhs, packed, c, &epilogue);
        }
    }
}
