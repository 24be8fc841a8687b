//! Einsum of any number of operands, in f32, i32 or i64.
//!
//! Two operands are one batched matrix product: every label is a batch label (in both
//! operands and the output), a row label (the first operand and the output), a column
//! label (the second and the output) or a summed one (the rest). A label summed but found
//! in one operand only is summed as a depth label the other operand does not vary along
//! (its stride is 0), so no label needs a pass of its own. The operands are gathered into
//! `[batch, M, K]` and `[batch, K, N]` (a transpose, with broadcast axes read at stride
//! 0), and the `[batch, M, N]` result is gathered into the output's label order when that
//! differs. One operand is a transpose followed by row sums.
//!
//! Three or more operands are contracted a pair at a time, in an order chosen at init:
//! each time the pair whose result is smallest, a pair's result keeping only the labels
//! that the output or another remaining operand still uses. Each intermediate has its
//! own region of the run context's work space, sized at init, so `run` allocates nothing.
//!
//! A label repeated within one operand (a diagonal, `ii->i`) needs no pass of its own
//! either: the gathers read it with the sum of its axes' strides.
//!
//! f32 products run on the delegate's GEMM. Integer ones accumulate exactly, wrapping as
//! the reference and numpy do (i32 in i32, i64 in i64: the low bits of a wrapped sum do
//! not depend on the width it was summed in), on the pool's threads a block of rows per
//! task. An i32 is held as its bits in a word and an i64 as its 8 bytes in two words, so
//! the gathers move words and an i64 walk has a last axis of its two words.

use super::{RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, Epilogue, MatMut, MicroKernel, PackedB, Rows};
use crate::pool::{Disjoint, Pool};

/// The most labels an equation may use here (the gather's index lives on the stack).
pub(crate) const MAX_LABELS: usize = 16;

/// The element type an Einsum computes in (f16 is widened to f32 around the op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EinsumType {
    F32,
    I32,
    I64,
}

impl EinsumType {
    /// Words (f32 slots) per element.
    fn words(self) -> usize {
        match self {
            EinsumType::I64 => 2,
            _ => 1,
        }
    }
}

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

    /// The walk over elements of `words` words: strides in words, and the words of each
    /// element as a last axis.
    fn in_words(mut self, words: usize) -> Walk {
        if words > 1 {
            self.strides.iter_mut().for_each(|s| *s *= words);
            self.extents.push(words);
            self.strides.push(1);
        }
        self
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

    /// Fills `dst` (of `self.len()` words) from `src`, moving each word's bits as they
    /// are.
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
        // One more axis than labels: an i64 walk's words.
        let mut idx = [0usize; MAX_LABELS + 1];
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

/// One pairwise product, `C[b] = A[b] · B[b]` over `[batch, M, K]` and `[batch, K, N]`
/// gathers of its operands, then `C` into its destination's order (`out`, when that is
/// not already `[batch, M, N]`). The sizes count elements, the walks words (see
/// [`Walk::in_words`]).
#[derive(Clone, Debug)]
struct Contraction {
    a_walk: Walk,
    b_walk: Walk,
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    out: Option<Walk>,
}

impl Contraction {
    /// Elements of work space `run` takes: both gathers, and `C` when it is permuted.
    fn scratch(&self) -> usize {
        let c = if self.out.is_some() {
            self.batch * self.m * self.n
        } else {
            0
        };
        self.batch * self.m * self.k + self.batch * self.k * self.n + c
    }

    /// Writes the product of `a` and `b` into `dst`, with `scratch` of at least
    /// [`Contraction::scratch`] elements (in words).
    fn run(
        &self,
        ty: EinsumType,
        a: &[f32],
        b: &[f32],
        dst: &mut [f32],
        scratch: &mut [f32],
        gemm: (&MicroKernel, &Pool, &mut PackedB),
    ) {
        let (nb, m, k, n) = (self.batch, self.m, self.k, self.n);
        let w = ty.words();
        if k == 0 {
            // A sum over an empty extent: 0 in every type's bits.
            return dst.fill(0.0);
        }
        let (abuf, rest) = scratch.split_at_mut(nb * m * k * w);
        let (bbuf, rest) = rest.split_at_mut(nb * k * n * w);
        self.a_walk.gather(a, abuf);
        self.b_walk.gather(b, bbuf);
        let c: &mut [f32] = match self.out {
            Some(_) => &mut rest[..nb * m * n * w],
            None => &mut *dst,
        };
        let (kernel, pool, rhs) = gemm;
        if m > 0 && n > 0 {
            match ty {
                EinsumType::F32 => {
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
                EinsumType::I32 => int_product::<i32>(pool, abuf, bbuf, c, (nb, m, k, n)),
                EinsumType::I64 => int_product::<i64>(pool, abuf, bbuf, c, (nb, m, k, n)),
            }
        }
        if let Some(walk) = &self.out {
            let c = &rest[..nb * m * n * w];
            walk.gather(c, dst);
        }
    }
}

/// A word read as an integer of the held form: i32 from one word's bits, i64 from two.
trait HeldInt: Copy {
    const WORDS: usize;
    const ZERO: Self;
    fn read(words: &[f32]) -> Self;
    fn write(self, words: &mut [f32]);
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn plus(self, a: Self) -> Self;
}

impl HeldInt for i32 {
    const WORDS: usize = 1;
    const ZERO: i32 = 0;
    #[inline(always)]
    fn read(words: &[f32]) -> i32 {
        words[0].to_bits() as i32
    }
    #[inline(always)]
    fn write(self, words: &mut [f32]) {
        words[0] = f32::from_bits(self as u32);
    }
    #[inline(always)]
    fn mul_add(self, a: i32, b: i32) -> i32 {
        self.wrapping_add(a.wrapping_mul(b))
    }
    #[inline(always)]
    fn plus(self, a: i32) -> i32 {
        self.wrapping_add(a)
    }
}

impl HeldInt for i64 {
    const WORDS: usize = 2;
    const ZERO: i64 = 0;
    /// The 8 little-endian bytes: the low word first.
    #[inline(always)]
    fn read(words: &[f32]) -> i64 {
        (u64::from(words[0].to_bits()) | u64::from(words[1].to_bits()) << 32) as i64
    }
    #[inline(always)]
    fn write(self, words: &mut [f32]) {
        words[0] = f32::from_bits(self as u32);
        words[1] = f32::from_bits((self as u64 >> 32) as u32);
    }
    #[inline(always)]
    fn mul_add(self, a: i64, b: i64) -> i64 {
        self.wrapping_add(a.wrapping_mul(b))
    }
    #[inline(always)]
    fn plus(self, a: i64) -> i64 {
        self.wrapping_add(a)
    }
}

/// `C[b] = A[b] · B[b]` in wrapping integer arithmetic over the held words of
/// `[nb, m, k]` and `[nb, k, n]`, blocks of C's rows spread over the pool.
fn int_product<T: HeldInt>(
    pool: &Pool,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    (nb, m, k, n): (usize, usize, usize, usize),
) {
    let w = T::WORDS;
    let rows = nb * m;
    // A few blocks per thread, so that uneven rows still balance.
    let per = rows.div_ceil(pool.threads() * 4).max(1);
    let c = Disjoint::new(c);
    pool.run(rows.div_ceil(per), &|task, _| {
        let first = task * per;
        let last = rows.min(first + per);
        // SAFETY: each task writes only its own block of rows.
        let block = unsafe { c.range(first * n * w, (last - first) * n * w) };
        for (row, out) in (first..last).zip(block.chunks_exact_mut(n * w)) {
            let lhs = &a[row * k * w..(row + 1) * k * w];
            let rhs = &b[(row / m) * k * n * w..][..k * n * w];
            for (j, o) in out.chunks_exact_mut(w).enumerate() {
                let mut acc = T::ZERO;
                for (kk, x) in lhs.chunks_exact(w).enumerate() {
                    let y = &rhs[(kk * n + j) * w..];
                    acc = acc.mul_add(T::read(x), T::read(y));
                }
                acc.write(o);
            }
        }
    });
}

/// Wrapping sums of the `k`-element rows of `rows` into `out`.
fn int_row_sums<T: HeldInt>(rows: &[f32], k: usize, out: &mut [f32]) {
    let w = T::WORDS;
    for (o, row) in out.chunks_exact_mut(w).zip(rows.chunks_exact(k * w)) {
        let sum = row
            .chunks_exact(w)
            .fold(T::ZERO, |acc, x| acc.plus(T::read(x)));
        sum.write(o);
    }
}

/// Where a contraction reads an operand: a node input, or an earlier contraction's result
/// at `(offset, words)` of the intermediates' region.
#[derive(Clone, Copy, Debug)]
enum Operand {
    Input(Src),
    Temp(usize, usize),
}

/// One contraction of a chain, into the intermediate at `dst` (an offset into the
/// intermediates' region) or, for the last one, the output.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    a: Operand,
    b: Operand,
    pair: Contraction,
    dst: Option<usize>,
}

/// An operand while the chain is planned: its labels (unique, in layout order for an
/// intermediate), each label's stride in elements (0 where it does not vary), and where
/// it is read.
struct Term {
    labels: Vec<usize>,
    strides: Vec<usize>,
    at: Operand,
}

/// A prepared Einsum node.
#[derive(Clone, Debug)]
pub(crate) enum EinsumOp {
    /// One operand: gathered into `[M, K]` (the output's labels, then the summed ones;
    /// a walk over words), each row summed.
    Reduce {
        ty: EinsumType,
        x: Src,
        walk: Walk,
        k: usize,
    },
    /// Two or more operands: contractions in order, the intermediates first in the work
    /// space (`temps` words), then one contraction's scratch.
    Chain {
        ty: EinsumType,
        steps: Vec<Step>,
        temps: usize,
    },
}

impl EinsumOp {
    /// Plans the einsum of `inputs` (each operand's labels) into `output` labels, with
    /// label `extents`; `shapes` are the operands' shapes (an axis of extent 1
    /// broadcasts, read at stride 0).
    pub fn new(
        ty: EinsumType,
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
        if srcs.is_empty() || srcs.len() != inputs.len() || inputs.len() != shapes.len() {
            return Err(format!(
                "Einsum of {} operands for an equation of {}",
                srcs.len(),
                inputs.len()
            ));
        }
        let w = ty.words();
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
        let product = |labels: &[usize]| labels.iter().map(|&l| extents[l]).product::<usize>();
        let walk = |t: &Term, labels: &[usize]| Walk {
            extents: labels.iter().map(|&l| extents[l]).collect(),
            strides: labels.iter().map(|&l| t.strides[l]).collect(),
        };
        let mut terms: Vec<Term> = (0..inputs.len())
            .map(|i| {
                let mut labels = inputs[i].clone();
                labels.sort_unstable();
                labels.dedup();
                Term {
                    labels,
                    strides: (0..extents.len()).map(|l| stride(i, l)).collect(),
                    at: Operand::Input(srcs[i]),
                }
            })
            .collect();
        if let [x] = &terms[..] {
            let summed: Vec<usize> = x
                .labels
                .iter()
                .copied()
                .filter(|l| !output.contains(l))
                .collect();
            let order: Vec<usize> = output.iter().chain(&summed).copied().collect();
            return Ok(EinsumOp::Reduce {
                ty,
                x: srcs[0],
                walk: walk(x, &order).in_words(w),
                k: product(&summed),
            });
        }
        let mut steps = Vec::with_capacity(terms.len() - 1);
        let mut temps = 0;
        while terms.len() > 1 {
            let last = terms.len() == 2;
            // The labels the result of contracting terms i and j keeps: for the last
            // contraction the output's, in its order; else those the output or another
            // term still uses.
            let keep = |i: usize, j: usize| -> Vec<usize> {
                if last {
                    return output.to_vec();
                }
                let mut ls: Vec<usize> = terms[i]
                    .labels
                    .iter()
                    .chain(&terms[j].labels)
                    .copied()
                    .filter(|l| {
                        output.contains(l)
                            || (0..terms.len())
                                .any(|t| t != i && t != j && terms[t].labels.contains(l))
                    })
                    .collect();
                ls.sort_unstable();
                ls.dedup();
                ls
            };
            // The pair with the smallest result (the first of equals).
            let mut best = (0, 1, usize::MAX);
            for i in 0..terms.len() {
                for j in i + 1..terms.len() {
                    let size = product(&keep(i, j));
                    if size < best.2 {
                        best = (i, j, size);
                    }
                }
            }
            let (i, j, _) = best;
            let kept = keep(i, j);
            let tb = terms.remove(j);
            let ta = terms.remove(i);
            let (la, lb) = (&ta.labels, &tb.labels);
            let group = |in_a: bool, in_b: bool| -> Vec<usize> {
                kept.iter()
                    .copied()
                    .filter(|l| la.contains(l) == in_a && lb.contains(l) == in_b)
                    .collect()
            };
            let (batch, rows, cols) = (group(true, true), group(true, false), group(false, true));
            let summed: Vec<usize> = la
                .iter()
                .chain(lb.iter().filter(|l| !la.contains(l)))
                .copied()
                .filter(|l| !kept.contains(l))
                .collect();
            let cat = |x: &[usize], y: &[usize], z: &[usize]| -> Vec<usize> {
                x.iter().chain(y).chain(z).copied().collect()
            };
            let a_walk = walk(&ta, &cat(&batch, &rows, &summed));
            let b_walk = walk(&tb, &cat(&batch, &summed, &cols));
            // C's strides, per label.
            let c_order = cat(&batch, &rows, &cols);
            let mut c_stride = vec![0; extents.len()];
            let mut step = 1;
            for &l in c_order.iter().rev() {
                c_stride[l] = step;
                step *= extents[l];
            }
            let out = if last {
                let out = Walk {
                    extents: output.iter().map(|&l| extents[l]).collect(),
                    strides: output.iter().map(|&l| c_stride[l]).collect(),
                };
                (!out.is_identity()).then(|| out.in_words(w))
            } else {
                None
            };
            let pair = Contraction {
                a_walk: a_walk.in_words(w),
                b_walk: b_walk.in_words(w),
                batch: product(&batch),
                m: product(&rows),
                k: product(&summed),
                n: product(&cols),
                out,
            };
            let dst = (!last).then_some(temps);
            if !last {
                let len = product(&c_order) * w;
                terms.push(Term {
                    labels: c_order,
                    strides: c_stride,
                    at: Operand::Temp(temps, len),
                });
                temps += len;
            }
            steps.push(Step {
                a: ta.at,
                b: tb.at,
                pair,
                dst,
            });
        }
        Ok(EinsumOp::Chain { ty, steps, temps })
    }

    /// Sizes the context's work space and run-time packing.
    pub fn reserve(&self, ctx: &mut RunCtx) {
        match self {
            EinsumOp::Reduce { walk, k, .. } => {
                if *k != 1 {
                    ctx.reserve_work(walk.len());
                }
            }
            EinsumOp::Chain { ty, steps, temps } => {
                let scratch = steps.iter().map(|s| s.pair.scratch()).max().unwrap_or(0);
                ctx.reserve_work(temps + scratch * ty.words());
                if *ty == EinsumType::F32 {
                    for s in steps {
                        ctx.rhs.reserve(ctx.kernel, 1, s.pair.k, s.pair.n);
                    }
                }
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
            EinsumOp::Reduce { ty, x, walk, k } => {
                let x = sources.get(*x);
                if *k == 1 {
                    return walk.gather(x, out);
                }
                if *k == 0 {
                    // A sum over an empty extent: 0 in every type's bits.
                    return out.fill(0.0);
                }
                let rows = &mut work[..walk.len()];
                walk.gather(x, rows);
                match ty {
                    EinsumType::F32 => {
                        for (o, row) in out.iter_mut().zip(rows.chunks_exact(*k)) {
                            *o = row.iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
                        }
                    }
                    EinsumType::I32 => int_row_sums::<i32>(rows, *k, out),
                    EinsumType::I64 => int_row_sums::<i64>(rows, *k, out),
                }
            }
            EinsumOp::Chain { ty, steps, temps } => {
                let (inter, scratch) = work.split_at_mut(*temps);
                for step in steps {
                    // Intermediates lie in step order, so every one this step reads lies
                    // before its own.
                    let split = step.dst.unwrap_or(*temps);
                    let (done, rest) = inter.split_at_mut(split);
                    let read = |o: Operand| match o {
                        Operand::Input(s) => sources.get(s),
                        Operand::Temp(at, len) => &done[at..at + len],
                    };
                    let (a, b) = (read(step.a), read(step.b));
                    let dst: &mut [f32] = match step.dst {
                        Some(_) => {
                            let len = step.pair.batch * step.pair.m * step.pair.n * ty.words();
                            &mut rest[..len]
                        }
                        None => &mut *out,
                    };
                    step.pair
                        .run(*ty, a, b, dst, scratch, (*kernel, &*pool, &mut *rhs));
                }
            }
        }
    }
}
