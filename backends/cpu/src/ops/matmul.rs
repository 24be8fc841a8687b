//! MatMul (numpy semantics, batched and broadcast) and Gemm, both lowered to [`gemm`].

use baton_delegate_api::shape::broadcast_shapes;

use super::layout::broadcast_strides;
use super::{EpOpSpec, EpilogueSpec, Operand, RunCtx, Sources, Src};
use crate::gemm::{gemm, gemm_parallel, Add, Epilogue, MatMut, MatRef, MicroKernel, PackedB, Rows};
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
            if self.parallel_batches(ctx.pool.threads()).is_some() {
                let threads = ctx.pool.threads();
                ctx.rhs_workers.resize_with(threads, || {
                    std::sync::Mutex::new((usize::MAX, PackedB::default()))
                });
                for w in &ctx.rhs_workers {
                    let mut g = w.lock().unwrap_or_else(|e| e.into_inner());
                    g.1.reserve(ctx.kernel, 1, self.k, self.n);
                }
            }
        }
        if self.a_transposed {
            ctx.reserve_work(self.m * self.k);
        }
    }

    /// `A` as `[M, K]` rows: in place, or a transposed `A` (Gemm's `transA`, `[K, M]`,
    /// whose columns are A's rows) copied into `work`.
    fn lhs<'s>(&self, sources: &Sources<'s>, work: &'s mut [f32]) -> &'s [f32] {
        let a = sources.get(self.a);
        if !self.a_transposed {
            return a;
        }
        let (m, k) = (self.m, self.k);
        for (i, row) in work[..m * k].chunks_exact_mut(k.max(1)).enumerate() {
            for (p, v) in row.iter_mut().enumerate() {
                *v = a[p * m + i];
            }
        }
        &work[..m * k]
    }

    /// How many row blocks each batch is cut into when the batches of a product whose
    /// `B` arrives at run time run in parallel, or `None` to run batch after batch, each
    /// spread over the threads. Attention's per-head products (say 128 x 64 x 128) are
    /// each too small to split well, and packing `B` before each one is a serial step
    /// between two waits on the workers: in parallel, each task packs its batch's `B`
    /// into its own thread's buffer and computes its rows alone.
    fn parallel_batches(&self, threads: usize) -> Option<usize> {
        let batches = self.batches.len();
        let per_batch = self.m.saturating_mul(self.n).saturating_mul(self.k.max(1));
        if threads < 2 || batches < 2 || per_batch.saturating_mul(batches) < 2 * MIN_TASK_WORK {
            return None;
        }
        // Enough tasks to balance the threads (two per thread), each worth waking for.
        let want = (2 * threads).div_ceil(batches);
        let most = (per_batch / MIN_TASK_WORK).max(1);
        Some(want.min(most).min(self.m.max(1)))
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        if let (RhsSpec::Runtime { .. }, Some(parts)) =
            (&self.b, self.parallel_batches(ctx.pool.threads()))
        {
            if ctx.rhs_workers.len() >= ctx.pool.threads() {
                return self.run_parallel_batches(sources, out, ctx, parts);
            }
        }
        let RunCtx {
            kernel,
            pool,
            rhs,
            work,
            ..
        } = ctx;
        let a = self.lhs(sources, work);
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

    /// [`MatMulOp::run`] with the batches spread over the pool (see
    /// [`MatMulOp::parallel_batches`]): `parts` row blocks per batch, one task each.
    fn run_parallel_batches(
        &self,
        sources: &Sources<'_>,
        out: &mut [f32],
        ctx: &mut RunCtx,
        parts: usize,
    ) {
        let RunCtx {
            kernel,
            pool,
            rhs_workers,
            work,
            ..
        } = ctx;
        let RhsSpec::Runtime { src, rs, cs } = self.b else {
            unreachable!("checked by the caller");
        };
        let a = self.lhs(sources, work);
        let b = sources.get(src);
        let epilogue = self.epilogue.resolve(sources);
        // This run's B: nothing packed by an earlier run is valid.
        for w in rhs_workers.iter() {
            w.lock().unwrap_or_else(|e| e.into_inner()).0 = usize::MAX;
        }
        // Row blocks of whole micro-kernel tiles.
        let mr = kernel.mr();
        let block = self.m.div_ceil(parts).div_ceil(mr) * mr;
        let (m, n, k) = (self.m, self.n, self.k);
        let c_len = out.len();
        let c_base = OutPtr(out.as_mut_ptr());
        let kernel: &MicroKernel = kernel;
        pool.run(self.batches.len() * parts, &|task, worker| {
            let (bi, part) = (task / parts, task % parts);
            let batch = &self.batches[bi];
            let (r0, r1) = ((part * block).min(m), ((part + 1) * block).min(m));
            if r0 == r1 {
                return;
            }
            let mut guard = rhs_workers[worker]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let (packed_batch, packed) = &mut *guard;
            if *packed_batch != batch.b {
                let offset = batch.b * k * n;
                packed.pack_strided(kernel, k, n, &b[offset.min(b.len())..], rs, cs, self.alpha);
                *packed_batch = batch.b;
            }
            let start = (batch.a + r0 * self.a_rs).min(a.len());
            let lhs = Rows::Dense {
                data: &a[start..],
                lda: self.a_rs,
            };
            // Rows r0..r1 of this batch's C: disjoint from every other task's.
            let at = (batch.c + r0 * n).min(c_len);
            let len = ((r1 - r0) * n).min(c_len - at);
            // SAFETY: tasks write disjoint row blocks of distinct batches' C (batches
            // have distinct `c` offsets, blocks distinct rows); `pool.run` returns only
            // when every task is done, while `out` is still mutably borrowed.
            let c = unsafe { std::slice::from_raw_parts_mut(c_base.get().add(at), len) };
            // The epilogue's per-row operands, from this block's first row.
            let mut e = Epilogue::new();
            for add in epilogue.adds() {
                let skip = (r0 * add.rs).min(add.data.len());
                e.add(Add {
                    data: &add.data[skip..],
                    ..*add
                });
            }
            let (lo, hi) = epilogue.bounds();
            e.clamp(lo, hi);
            e.activate(epilogue.activation());
            gemm(kernel, r1 - r0, lhs, packed, MatMut { data: c, rs: n }, &e);
        });
    }
}

/// The output's base pointer, shared by tasks that write disjoint row blocks.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);

impl OutPtr {
    /// The pointer (a method, so that a closure captures the `Sync` wrapper, not the
    /// field).
    fn get(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: see `run_parallel_batches`: disjoint writes, joined before the borrow ends.
unsafe impl Sync for OutPtr {}
// SAFETY: as above.
unsafe impl Send for OutPtr {}

/// The least multiply-adds worth a task of its own (as in `gemm_parallel`).
const MIN_TASK_WORK: usize = 64 * 1024;
