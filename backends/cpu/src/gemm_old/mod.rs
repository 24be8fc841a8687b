//! The convolutions' GEMM, until they move to the weight-stationary one (`crate::gemm`).
//!
//! Packed, cache-blocked single-precision GEMM: `C = epilogue(A · B)`.
//!
//! The structure is the classic BLIS/XNNPACK one, so that faster micro-kernels and threads
//! can be added without touching the rest:
//!
//! - **Blocking.** The `N` dimension is cut into blocks of `NC` columns, `K` into blocks
//!   of `KC` (per kernel: [`MicroKernel::kc`]), `M` into blocks of `MC` rows (both multiples of the micro-kernel's tile).
//!   For each `(NC, KC)` block, `B` is packed into `NR`-column panels; for each `MC` block,
//!   `A` is packed into `MR`-row panels. Then every `MR x NR` tile is computed by the
//!   [`MicroKernel`].
//! - **Packing.** A panel holds, for each `k`, `MR` (or `NR`) consecutive values, zero
//!   padded past the edge of the matrix, so the micro-kernel never sees a partial tile.
//!   Constant operands (weights) are packed once, at init, into [`PackedLhs`] or
//!   [`PackedRhs`], whose layout is exactly that of the per-block packing laid end to end.
//! - **Epilogue.** The micro-kernel only accumulates. When the last `KC` block of a tile
//!   is done, the [`Epilogue`] (scale, bias or residual adds, activation) is applied to the
//!   tile while it is stored, so fused operations cost no extra pass over `C`.
//! - **Dispatch.** [`MicroKernel::select`] picks the best kernel the CPU supports at run
//!   time (AVX2+FMA on x86-64, NEON on aarch64) or the portable one.
//!
//! Edge cases are part of the contract: `M`, `N` or `K` need not be multiples of anything,
//! any of them may be 0, and `K = 0` yields the epilogue applied to zeros.

#![allow(dead_code)]

mod epilogue;
mod kernels;
mod pack;

pub use epilogue::{EpOp, Epilogue};
pub use kernels::MicroKernel;
pub use pack::{PackedLhs, PackedRhs};

use crate::pool::{Disjoint, Pool};

/// A read-only strided matrix view: element `(i, j)` is `data[i * rs + j * cs]`.
///
/// Strides make transposes free (`rs = 1, cs = rows`) and broadcasting cheap (a stride
/// of 0 repeats a row or column).
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

/// A writable row-major output view: element `(i, j)` is `data[i * rs + j]`.
#[derive(Debug)]
pub struct MatMut<'a> {
    pub data: &'a mut [f32],
    pub rs: usize,
}

/// The left operand (`M x K`).
#[derive(Clone, Copy, Debug)]
pub enum Lhs<'a> {
    /// Packed on the fly, block by block.
    Strided(MatRef<'a>),
    /// Packed once (weights).
    Packed(&'a PackedLhs),
}

/// The right operand (`K x N`).
#[derive(Clone, Copy, Debug)]
pub enum Rhs<'a> {
    /// Packed on the fly, block by block.
    Strided(MatRef<'a>),
    /// Packed once (weights).
    Packed(&'a PackedRhs),
}

/// Packing buffers, allocated once (at init) and reused by every call.
#[derive(Clone, Debug, Default)]
pub struct GemmScratch {
    a: Vec<f32>,
    b: Vec<f32>,
}

impl GemmScratch {
    /// Grows the buffers so that an `m x n x k` product with `kernel` needs no allocation.
    pub fn reserve(&mut self, kernel: &MicroKernel, m: usize, n: usize, k: usize) {
        let (a, b) = scratch_lens(kernel, m, n, k);
        if self.a.len() < a {
            self.a.resize(a, 0.0);
        }
        if self.b.len() < b {
            self.b.resize(b, 0.0);
        }
    }
}

/// Packing buffer lengths (A, B) an `m x n x k` product needs with `kernel`.
fn scratch_lens(kernel: &MicroKernel, m: usize, n: usize, k: usize) -> (usize, usize) {
    let kc = k.min(kernel.kc());
    let mc = kernel.mc().min(m.next_multiple_of(kernel.mr()));
    let nc = kernel.nc().min(n.next_multiple_of(kernel.nr()));
    (mc * kc, kc * nc)
}

/// Computes `C = epilogue(A · B)` for `A: m x k`, `B: k x n`, `C: m x n`.
///
/// Epilogue ops index their operands by the row and column of `C` in this call.
/// Panics if a view is too small for its dimensions or a packed operand was packed for
/// another kernel or shape: those are bugs of the caller, not bad input.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    kernel: &MicroKernel,
    m: usize,
    n: usize,
    k: usize,
    a: Lhs<'_>,
    b: Rhs<'_>,
    c: MatMut<'_>,
    epilogue: &Epilogue<'_>,
    scratch: &mut GemmScratch,
) {
    gemm_rows(kernel, 0..m, m, n, k, a, b, c, epilogue, scratch);
}

/// [`gemm`] with the rows of `C` split over the threads of `pool` (in multiples of the
/// kernel's `MR`, so packed operands stay aligned). Each thread packs its own panels in
/// `scratch[worker]`; the result is bit-identical to [`gemm`]'s, whatever the thread
/// count, since every element is summed in the same order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_parallel(
    pool: &Pool,
    scratch: &[std::sync::Mutex<GemmScratch>],
    kernel: &MicroKernel,
    m: usize,
    n: usize,
    k: usize,
    a: Lhs<'_>,
    b: Rhs<'_>,
    c: MatMut<'_>,
    epilogue: &Epilogue<'_>,
) {
    let tiles = m.div_ceil(kernel.mr());
    // Small products are not worth waking the workers for.
    let work = m.saturating_mul(n).saturating_mul(k.max(1));
    let tasks = pool.threads().min(tiles).min(work / MIN_TASK_WORK + 1);
    let mut s0 = lock_scratch(&scratch[0]);
    if tasks <= 1 {
        gemm(kernel, m, n, k, a, b, c, epilogue, &mut s0);
        return;
    }
    drop(s0);
    let rows_per = tiles.div_ceil(tasks) * kernel.mr();
    let rs = c.rs;
    assert!(
        rs >= n && (m - 1) * rs + n <= c.data.len(),
        "gemm: C view too small"
    );
    let data = Disjoint::new(c.data);
    pool.run(tasks, &|t, w| {
        let r0 = (t * rows_per).min(m);
        let r1 = ((t + 1) * rows_per).min(m);
        if r0 == r1 {
            return;
        }
        // SAFETY: tasks own disjoint row ranges r0..r1 of C; the last row of a range ends
        // before the next range's first row starts (n <= rs).
        let rows = unsafe { data.range(r0 * rs, (r1 - 1 - r0) * rs + n) };
        let c = MatMut { data: rows, rs };
        let mut s = lock_scratch(&scratch[w]);
        gemm_rows(kernel, r0..r1, m, n, k, a, b, c, epilogue, &mut s);
    });
}

/// Products below this many multiply-adds run on one thread.
const MIN_TASK_WORK: usize = 32 * 1024;

fn lock_scratch(m: &std::sync::Mutex<GemmScratch>) -> std::sync::MutexGuard<'_, GemmScratch> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rows `rows` of `C = epilogue(A · B)`; `c` starts at row `rows.start`.
#[allow(clippy::too_many_arguments)]
fn gemm_rows(
    kernel: &MicroKernel,
    rows: std::ops::Range<usize>,
    m: usize,
    n: usize,
    k: usize,
    a: Lhs<'_>,
    b: Rhs<'_>,
    c: MatMut<'_>,
    epilogue: &Epilogue<'_>,
    scratch: &mut GemmScratch,
) {
    if rows.is_empty() || n == 0 {
        return;
    }
    let count = rows.end - rows.start;
    assert!(
        (count - 1) * c.rs + n <= c.data.len(),
        "gemm: C view too small"
    );
    if k == 0 {
        for i in 0..count {
            let row = &mut c.data[i * c.rs..i * c.rs + n];
            row.fill(0.0);
            epilogue.apply_row(rows.start + i, 0, row);
        }
        return;
    }
    check_lhs(kernel, &a, m, k);
    check_rhs(kernel, &b, k, n);
    scratch.reserve(kernel, count, n, k);
    let GemmScratch { a: a_buf, b: b_buf } = scratch;
    let (mr, nr) = (kernel.mr(), kernel.nr());
    let (mc, nc) = (kernel.mc(), kernel.nc());
    let mut c = c;
    for jc in (0..n).step_by(nc) {
        let nc_len = nc.min(n - jc);
        for pc in (0..k).step_by(kernel.kc()) {
            let kc_len = kernel.kc().min(k - pc);
            let b_block: &[f32] = match b {
                Rhs::Packed(p) => p.block(pc, jc, kc_len, nc_len),
                Rhs::Strided(s) => {
                    let len = kc_len * nc_len.next_multiple_of(nr);
                    pack::pack_rhs(s, pc, jc, kc_len, nc_len, nr, &mut b_buf[..len]);
                    &b_buf[..len]
                }
            };
            for ic in rows.clone().step_by(mc) {
                let mc_len = mc.min(rows.end - ic);
                let a_block: &[f32] = match a {
                    Lhs::Packed(p) => p.block(pc, ic, kc_len, mc_len),
                    Lhs::Strided(s) => {
                        let len = kc_len * mc_len.next_multiple_of(mr);
                        pack::pack_lhs(s, ic, pc, mc_len, kc_len, mr, &mut a_buf[..len]);
                        &a_buf[..len]
                    }
                };
                let block = Block {
                    row0: ic,
                    c_row0: rows.start,
                    col0: jc,
                    rows: mc_len,
                    cols: nc_len,
                    kc: kc_len,
                    first: pc == 0,
                    last: pc + kc_len == k,
                };
                macro_kernel(kernel, &block, a_block, b_block, &mut c, epilogue);
            }
        }
    }
}

/// One `MC x NC` block of `C` for one `KC` slice of the sum.
struct Block {
    row0: usize,
    /// The row of `C` the view's first row is.
    c_row0: usize,
    col0: usize,
    rows: usize,
    cols: usize,
    kc: usize,
    /// The first `KC` slice: the tile overwrites `C` instead of adding to it.
    first: bool,
    /// The last `KC` slice: the epilogue runs as the tile is stored.
    last: bool,
}

/// Runs the micro-kernel over every tile of a block and stores the tiles.
fn macro_kernel(
    kernel: &MicroKernel,
    block: &Block,
    a_block: &[f32],
    b_block: &[f32],
    c: &mut MatMut<'_>,
    epilogue: &Epilogue<'_>,
) {
    let (mr, nr, kc) = (kernel.mr(), kernel.nr(), block.kc);
    let mut tile = [0f32; kernels::MAX_TILE];
    for jr in (0..block.cols).step_by(nr) {
        let b_panel = &b_block[jr * kc..(jr + nr) * kc];
        for ir in (0..block.rows).step_by(mr) {
            let a_panel = &a_block[ir * kc..(ir + mr) * kc];
            kernel.run(kc, a_panel, b_panel, &mut tile[..mr * nr]);
            let rows = mr.min(block.rows - ir);
            let cols = nr.min(block.cols - jr);
            let (row0, col0) = (block.row0 + ir, block.col0 + jr);
            if block.first && block.last {
                // The whole sum is in the tile: finish it there (in L1) and write C once.
                epilogue.apply_tile(row0, col0, &mut tile, nr, rows, cols);
                for i in 0..rows {
                    let at = (row0 + i - block.c_row0) * c.rs + col0;
                    pack::copy_short(&mut c.data[at..at + cols], &tile[i * nr..i * nr + cols]);
                }
                continue;
            }
            for i in 0..rows {
                let row = block.row0 + ir + i;
                let col = block.col0 + jr;
                let at = (row - block.c_row0) * c.rs + col;
                let dst = &mut c.data[at..at + cols];
                let src = &tile[i * nr..i * nr + cols];
                if block.first {
                    pack::copy_short(dst, src);
                } else {
                    dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
                }
                if block.last {
                    epilogue.apply_row(row, col, dst);
                }
            }
        }
    }
}

fn check_lhs(kernel: &MicroKernel, a: &Lhs<'_>, m: usize, k: usize) {
    match a {
        Lhs::Strided(s) => assert!(
            (m - 1) * s.rs + (k - 1) * s.cs < s.data.len(),
            "gemm: A view too small for {m}x{k}"
        ),
        Lhs::Packed(p) => assert!(
            p.fits(kernel, m, k),
            "gemm: A was packed for another kernel or shape"
        ),
    }
}

fn check_rhs(kernel: &MicroKernel, b: &Rhs<'_>, k: usize, n: usize) {
    match b {
        Rhs::Strided(s) => assert!(
            (k - 1) * s.rs + (n - 1) * s.cs < s.data.len(),
            "gemm: B view too small for {k}x{n}"
        ),
        Rhs::Packed(p) => assert!(
            p.fits(kernel, k, n),
            "gemm: B was packed for another kernel or shape"
        ),
    }
}
