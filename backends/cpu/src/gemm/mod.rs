//! Weight-stationary single-precision GEMM: `C = epilogue(A · B + bias)`.
//!
//! The shape follows XNNPACK rather than BLIS, because inference multiplies small, varied
//! activations by weights that never change:
//!
//! - **`B` is the weights**, packed once at init ([`PackedB`]) into `NR`-column panels,
//!   each led by its `NR` bias values, so a tile's accumulators start as the bias.
//! - **`A` is the activations**, read in place and never packed: rows at a stride
//!   ([`Rows::Dense`], `M` = output rows or pixels) or through an indirection buffer
//!   ([`Rows::Indirect`]: one row pointer per output pixel and kernel tap, with a shared
//!   zero row for the padding), which is how a convolution runs without an im2col copy.
//! - **The epilogue runs in registers**: up to two strided adds (a residual, a broadcast
//!   row or column) and a clamp (Relu, Clip) are applied to the accumulators and the tile is
//!   stored straight to `C`, with masked stores for the last partial columns. There is no
//!   tile buffer and no second pass over `C`. An [`Activation`] (Sigmoid, SiLU, HardSwish,
//!   GELU, ...) is applied by the same kernel call, to the tile's vectors before the store
//!   (AVX-512, AVX2) or to the tile just stored while it is in L1 (NEON, portable, the
//!   matrix-vector forms), compiled for the kernel's vector width.
//! - **Cache blocking** (BLIS's loop order, without packing `A`): a deep product is cut
//!   into depth blocks whose slice of a weight panel (`KC x NR`) stays in L1 while it
//!   sweeps a block of rows, and the rows are cut into blocks whose `MC x KC` slice of
//!   `A` stays in L2 while it sweeps the panels. Each block after the first starts from
//!   the partial sums the previous one stored in `C`, and only the last block applies the
//!   epilogue; the sums are added in the same order as without blocking, so the bits are
//!   the same. Products of one depth block (most inference layers) run as before.
//! - **Threads** take 2-D blocks of tiles (rows x column panels); the sum of each element
//!   is computed in the same order whatever the split, so results are bit-identical for
//!   every thread count.
//!
//! Edge cases are part of the contract: `M`, `N` or `K` need not be multiples of anything,
//! any of them may be 0, and `K = 0` yields the epilogue applied to the bias.

pub(crate) mod activation;
mod kernels;
mod pack;

pub use activation::Activation;
pub use kernels::{simd_description, Isa, MicroKernel, ZERO_ROW};
pub use pack::{Indirection, IndirectionBuilder, PackedB};

use kernels::{GemvArgs, RawAdd, TileArgs};

use crate::pool::Pool;

/// A read-only strided matrix view: element `(i, j)` is `data[i * rs + j * cs]`. Used to
/// describe weights to pack (a transpose is `rs = 1, cs = rows`).
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

/// Where the rows of `A` are read.
#[derive(Clone, Copy, Debug)]
pub enum Rows<'a> {
    /// Row `i` is `data[i * lda..i * lda + k]`.
    Dense { data: &'a [f32], lda: usize },
    /// Row `i`, tap `t` is `kc` floats of `data` at the offset the indirection buffer
    /// gives, or zeros.
    Indirect {
        data: &'a [f32],
        ind: &'a Indirection,
    },
}

/// One add of the epilogue: element `(i, j)` of `C` gets `scale * data[i * rs + j * cs]`.
/// `cs` is 0 (one value per row) or 1 (a row of values); `rs` may be 0 (the same for all
/// rows).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Add<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
    pub scale: f32,
}

/// The fused operations applied to the accumulators before they are stored: the adds in
/// order, then a clamp to `[lo, hi]` that keeps NaN (Relu is `[0, inf]`), then an
/// activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Epilogue<'a> {
    adds: [Option<Add<'a>>; MAX_ADDS],
    lo: f32,
    hi: f32,
    act: Option<Activation>,
}

/// The most adds one epilogue holds (Gemm's `C` and a fused Add).
pub const MAX_ADDS: usize = 2;

impl Default for Epilogue<'_> {
    fn default() -> Self {
        Epilogue::new()
    }
}

impl<'a> Epilogue<'a> {
    /// An empty epilogue: `C = A · B + bias`.
    pub fn new() -> Epilogue<'a> {
        Epilogue {
            adds: [None; MAX_ADDS],
            lo: f32::NEG_INFINITY,
            hi: f32::INFINITY,
            act: None,
        }
    }

    /// Appends an add. Panics past [`MAX_ADDS`] or with `cs` above 1: a plan made at init,
    /// never input-driven.
    pub fn add(&mut self, add: Add<'a>) {
        assert!(add.cs <= 1, "epilogue adds are per row or per column");
        let slot = self.adds.iter_mut().find(|a| a.is_none());
        *slot.expect("epilogue holds at most 2 adds") = Some(add);
    }

    /// Clamps the result to `[lo, hi]` (NaN kept; `lo > hi` gives `hi`, as ONNX Clip).
    pub fn clamp(&mut self, lo: f32, hi: f32) {
        self.lo = lo;
        self.hi = hi;
    }

    /// Applies `f` after the clamp (the last of the epilogue's operations).
    pub fn activate(&mut self, f: Option<Activation>) {
        self.act = f;
    }

    /// The activation after the clamp, if any.
    pub fn activation(&self) -> Option<Activation> {
        self.act
    }

    /// The adds, in order.
    pub fn adds(&self) -> impl Iterator<Item = &Add<'a>> {
        self.adds.iter().flatten()
    }

    /// The clamp bounds.
    pub fn bounds(&self) -> (f32, f32) {
        (self.lo, self.hi)
    }
}

/// Computes `C = epilogue(A · B + bias)` for `m` rows of `A` and the packed `b`, on the
/// calling thread.
///
/// Panics if a view is too small for its dimensions or `b` / an indirection buffer was
/// made for another kernel or shape: those are bugs of the caller, not bad input.
pub fn gemm(
    kernel: &MicroKernel,
    m: usize,
    a: Rows<'_>,
    b: &PackedB,
    c: MatMut<'_>,
    epilogue: &Epilogue<'_>,
) {
    let Some(job) = Job::new(kernel, m, a, b, c, epilogue) else {
        return;
    };
    job.run(0..job.row_tiles, 0..job.panels);
}

/// [`gemm`] with 2-D blocks of tiles spread over the threads of `pool`; products too
/// small to pay for waking the workers run on the caller alone.
pub(crate) fn gemm_parallel(
    pool: &Pool,
    kernel: &MicroKernel,
    m: usize,
    a: Rows<'_>,
    b: &PackedB,
    c: MatMut<'_>,
    epilogue: &Epilogue<'_>,
) {
    let Some(job) = Job::new(kernel, m, a, b, c, epilogue) else {
        return;
    };
    let (rt, pt) = (job.row_tiles, job.panels);
    let work = m.saturating_mul(b.n()).saturating_mul(b.depth().max(1));
    // Several tasks per thread: a worker the OS schedules late still finds work, and the
    // caller is not left waiting on one large straggler.
    let tasks = (TASKS_PER_THREAD * pool.threads())
        .min(work / MIN_TASK_WORK)
        .min(rt * pt);
    if tasks <= 1 {
        job.run(0..rt, 0..pt);
        return;
    }
    // Rows first (each task then reads only its rows of `A`); columns when there are
    // fewer row tiles than tasks.
    let row_blocks = rt.min(tasks);
    let col_blocks = tasks.div_ceil(row_blocks).min(pt);
    let (rb, cb) = (rt.div_ceil(row_blocks), pt.div_ceil(col_blocks));
    pool.run(row_blocks * col_blocks, &|task, _| {
        let (r, p) = (task / col_blocks, task % col_blocks);
        let rows = (r * rb).min(rt)..((r + 1) * rb).min(rt);
        let panels = (p * cb).min(pt)..((p + 1) * cb).min(pt);
        job.run(rows, panels);
    });
}

/// The rows of one block of [`gemm_row_blocks`] (whole row tiles, about `block`), and so
/// the floats of its scratch per pool thread: `rows * n`.
pub(crate) fn row_block(kernel: &MicroKernel, block: usize) -> usize {
    block.div_ceil(kernel.mr()).max(1) * kernel.mr()
}

/// [`gemm`] in blocks of whole row tiles ([`row_block`] rows each) spread over the threads
/// of `pool`, each computed into its thread's part of `scratch` (`row_block * n` floats
/// per thread) and handed, still in that core's cache, to `then(rows, block)` on the same
/// thread (`block`: those rows of the product, `n` values each). A convolution writing
/// NCHW transposes its output this way block by block: through a whole NHWC result, the
/// product went through memory and back (its own pass over a buffer larger than L2).
///
/// Panics if `scratch` is too short (a bug of the caller).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_row_blocks(
    pool: &Pool,
    kernel: &MicroKernel,
    m: usize,
    a: Rows<'_>,
    b: &PackedB,
    scratch: &mut [f32],
    epilogue: &Epilogue<'_>,
    block: usize,
    then: &(dyn Fn(std::ops::Range<usize>, &[f32]) + Sync),
) {
    let (n, rows_per) = (b.n(), row_block(kernel, block));
    let slot = rows_per * n;
    assert!(
        scratch.len() >= pool.threads() * slot,
        "gemm_row_blocks: scratch too short"
    );
    // The product's own rows are never stored: each block goes to its thread's slot.
    let Some(job) = Job::checked(kernel, m, a, b, std::ptr::null_mut(), n, epilogue) else {
        return;
    };
    let (job, blocks) = (&job, m.div_ceil(rows_per));
    let slots = crate::pool::Disjoint::new(&mut scratch[..pool.threads() * slot]);
    let task = |t: usize, w: usize| {
        let rows = t * rows_per..((t + 1) * rows_per).min(m);
        // SAFETY: a thread runs one task at a time, and slot `w` is its alone.
        let buf = unsafe { slots.range(w * slot, slot) };
        // Row `rows.start` of this job is the slot's first (the tiles' addresses are
        // formed with `wrapping_add`, so the shifted base is never dereferenced).
        let local = Job {
            c: SendPtr(buf.as_mut_ptr().wrapping_sub(rows.start * n)),
            ..*job
        };
        let tiles = rows.start / kernel.mr()..rows.end.div_ceil(kernel.mr());
        local.run(tiles, 0..job.panels);
        then(rows.clone(), &buf[..rows.len() * n]);
    };
    let work = m.saturating_mul(n).saturating_mul(b.depth().max(1));
    if pool.threads() == 1 || blocks == 1 || work < 2 * MIN_TASK_WORK {
        (0..blocks).for_each(|t| task(t, 0));
    } else {
        pool.run(blocks, &|t, w| task(t, w));
    }
}

/// The least multiply-adds of one task: products below twice this run on the caller
/// alone, since waking a worker costs some microseconds.
const MIN_TASK_WORK: usize = 64 * 1024;

/// Tasks per thread when the product is large enough.
pub(crate) const TASKS_PER_THREAD: usize = 4;

/// One checked product, split into `MR x NR` tiles.
#[derive(Clone, Copy)]
struct Job<'a> {
    kernel: &'a MicroKernel,
    m: usize,
    a: Rows<'a>,
    b: &'a PackedB,
    c: SendPtr,
    ldc: usize,
    adds: [RawAdd; MAX_ADDS],
    nadds: usize,
    lo: f32,
    hi: f32,
    act: Option<Activation>,
    row_tiles: usize,
    panels: usize,
    /// Dense rows too far apart for `u32` offsets within one tile (a row of some hundred
    /// million floats): computed one row per kernel call.
    dense_by_row: bool,
}

/// `C`'s base pointer, shared by tasks that write disjoint tiles.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);

// SAFETY: tasks write disjoint tiles of `C` (see `gemm_parallel`), and `Pool::run` returns
// only when every task is done, while the `&mut` borrow of `C` is still held.
unsafe impl Sync for SendPtr {}
// SAFETY: as above.
unsafe impl Send for SendPtr {}
// SAFETY: the add pointers are only read, from data borrowed for the whole call.
unsafe impl Sync for Job<'_> {}

impl<'a> Job<'a> {
    /// Checks every bound the kernels rely on; `None` when there is nothing to compute.
    fn new(
        kernel: &'a MicroKernel,
        m: usize,
        a: Rows<'a>,
        b: &'a PackedB,
        c: MatMut<'a>,
        ep: &Epilogue<'a>,
    ) -> Option<Job<'a>> {
        let n = b.n();
        if m == 0 || n == 0 {
            return None;
        }
        assert!(
            c.rs >= n && (m - 1) * c.rs + n <= c.data.len(),
            "gemm: C view too small"
        );
        Job::checked(kernel, m, a, b, c.data.as_mut_ptr(), c.rs, ep)
    }

    /// [`Job::new`] with `C` at `c`, of row stride `ldc`, which the caller vouches for.
    fn checked(
        kernel: &'a MicroKernel,
        m: usize,
        a: Rows<'a>,
        b: &'a PackedB,
        c: *mut f32,
        ldc: usize,
        ep: &Epilogue<'a>,
    ) -> Option<Job<'a>> {
        let n = b.n();
        assert!(b.fits(kernel), "gemm: B was packed for another kernel");
        if m == 0 || n == 0 {
            return None;
        }
        match a {
            Rows::Dense { data, lda } => {
                assert_eq!(b.taps(), 1, "gemm: dense rows with a multi-tap B");
                assert!(
                    b.kc() == 0 || (m - 1) * lda + b.kc() <= data.len(),
                    "gemm: A view too small"
                );
            }
            Rows::Indirect { data, ind } => assert!(
                ind.fits(kernel, m, b.taps(), b.kc()) && ind.extent() <= data.len(),
                "gemm: indirection buffer made for another shape"
            ),
        }
        let mut adds = [RawAdd {
            ptr: std::ptr::null(),
            rs: 0,
            cs: 0,
            scale: 0.0,
        }; MAX_ADDS];
        let mut nadds = 0;
        for add in ep.adds() {
            let last = (m - 1) * add.rs + (n - 1) * add.cs;
            assert!(last < add.data.len(), "gemm: epilogue operand too small");
            adds[nadds] = RawAdd {
                ptr: add.data.as_ptr(),
                rs: add.rs,
                cs: add.cs,
                scale: add.scale,
            };
            nadds += 1;
        }
        Some(Job {
            kernel,
            m,
            a,
            b,
            c: SendPtr(c),
            ldc,
            adds,
            nadds,
            lo: ep.lo,
            hi: ep.hi,
            act: ep.act,
            row_tiles: m.div_ceil(kernel.mr()),
            panels: n.div_ceil(kernel.nr()),
            dense_by_row: match a {
                Rows::Dense { lda, .. } => (kernel.mr() - 1)
                    .checked_mul(lda)
                    .is_none_or(|far| far >= ZERO_ROW as usize),
                Rows::Indirect { .. } => false,
            },
        })
    }

    /// Computes the tiles of row tiles `rows` and column panels `panels`, block by block
    /// (see the module docs): row blocks, then depth blocks, then panels, then the row
    /// tiles of the block.
    fn run(&self, rows: std::ops::Range<usize>, panels: std::ops::Range<usize>) {
        if let Rows::Dense { data, .. } = self.a {
            if self.m == 1 && self.b.taps() == 1 && self.kernel.has_gemv() {
                return self.run_gemv(data, panels);
            }
        }
        let depth = self.b.depth();
        let blocks = DepthBlocks::new(self.b.taps(), self.b.kc(), self.kernel.nr());
        if blocks.count <= 1 {
            return self.run_block(rows, panels, DepthBlock::whole(self.b.taps(), self.b.kc()));
        }
        let row_block = (L2_BLOCK_BYTES / (blocks.size(depth) * size_of::<f32>()))
            .div_ceil(self.kernel.mr())
            .max(1);
        let mut r0 = rows.start;
        while r0 < rows.end {
            let r1 = (r0 + row_block).min(rows.end);
            for b in 0..blocks.count {
                self.run_block(r0..r1, panels.clone(), blocks.block(b));
            }
            r0 = r1;
        }
    }

    /// One row of `A` against the column panels `panels`, through the kernel's
    /// matrix-vector form: the weights are streamed once, with no depth blocking (nothing
    /// is reused from cache) and without computing `MR` copies of the row. Each column is
    /// summed in the tile kernel's order, so the bits are those of the tiled product.
    fn run_gemv(&self, a: &[f32], panels: std::ops::Range<usize>) {
        if panels.is_empty() {
            return;
        }
        let j0 = panels.start * self.kernel.nr();
        let cols = (panels.end * self.kernel.nr()).min(self.b.n()) - j0;
        let mut adds = self.adds;
        for add in &mut adds[..self.nadds] {
            add.ptr = add.ptr.wrapping_add(j0 * add.cs);
        }
        let g = GemvArgs {
            k: self.b.kc(),
            a: a.as_ptr(),
            w: self.b.panels_from(panels.start).as_ptr(),
            panels: panels.len(),
            cols,
            c: self.c.0.wrapping_add(j0),
            adds,
            nadds: self.nadds,
            lo: self.lo,
            hi: self.hi,
            act: self.act,
        };
        // SAFETY: `Job::new` checked that the row holds `kc` floats, that the panels are
        // this kernel's (`panels_from` holds the panels from `panels.start` on), and that
        // `C` and every add cover the row's `n` columns; `run` checked that the kernel has
        // a matrix-vector form.
        unsafe { self.kernel.gemv(&g) };
    }

    /// Computes depth block `blk` of the tiles of row tiles `rows` and panels `panels`.
    fn run_block(
        &self,
        rows: std::ops::Range<usize>,
        panels: std::ops::Range<usize>,
        blk: DepthBlock,
    ) {
        let (mr, nr) = (self.kernel.mr(), self.kernel.nr());
        let n = self.b.n();
        let mut dense_offs = [0u32; MAX_MR];
        let (base, zero) = match self.a {
            Rows::Dense { data, .. } => (data.as_ptr(), data.as_ptr()),
            Rows::Indirect { data, ind } => (data.as_ptr(), ind.zero().as_ptr()),
        };
        // The block's slice of every row (and of the zero row) starts `k0` floats in.
        let (base, zero) = (base.wrapping_add(blk.k0), zero.wrapping_add(blk.k0));
        // One argument block, updated field by field per tile: rebuilding it by copy
        // after writing the add pointers stalled on store forwarding (measured: ~10% of
        // small-`K` products).
        // Blocks before the last store raw sums: no adds, a clamp that changes nothing, no
        // activation.
        let (nadds, lo, hi, act) = if blk.last {
            (self.nadds, self.lo, self.hi, self.act)
        } else {
            (0, f32::NEG_INFINITY, f32::INFINITY, None)
        };
        let mut t = TileArgs {
            rows: 0,
            cols: 0,
            ks: blk.taps,
            kc: blk.kc,
            a: base,
            offs: dense_offs.as_ptr(),
            zero,
            w: base,
            wo: blk.wo * nr,
            accumulate: !blk.first,
            c: self.c.0,
            ldc: self.ldc,
            adds: self.adds,
            nadds,
            lo,
            hi,
            act,
        };
        for p in panels {
            let j0 = p * nr;
            t.cols = nr.min(n - j0);
            t.w = self.b.panel(p).as_ptr();
            for r in rows.clone() {
                let (i0, count) = (r * mr, mr.min(self.m - r * mr));
                match self.a {
                    Rows::Indirect { ind, .. } => {
                        t.offs = ind.tile(r)[blk.t0 * mr..].as_ptr();
                    }
                    Rows::Dense { lda, .. } if self.dense_by_row => {
                        self.dense_rows_singly(&mut t, base, lda, i0, count, j0);
                        continue;
                    }
                    // Offsets from the tile's first row, so that they stay small; rows
                    // past the edge repeat the last one: computed, not stored.
                    Rows::Dense { lda, .. } => {
                        for (i, o) in dense_offs[..mr].iter_mut().enumerate() {
                            *o = (i.min(count - 1) * lda) as u32;
                        }
                        t.a = base.wrapping_add(i0 * lda);
                        t.offs = dense_offs.as_ptr();
                    }
                }
                self.tile(&mut t, i0, count, j0);
            }
        }
    }

    /// Dense rows too far apart for `u32` offsets: one row per call, every lane reading
    /// it (each element is summed in the same order either way).
    #[cold]
    #[inline(never)]
    fn dense_rows_singly(
        &self,
        t: &mut TileArgs,
        base: *const f32,
        lda: usize,
        i0: usize,
        count: usize,
        j0: usize,
    ) {
        static EVERY_LANE_THE_ROW: [u32; MAX_MR] = [0; MAX_MR];
        t.offs = EVERY_LANE_THE_ROW.as_ptr();
        for i in i0..i0 + count {
            t.a = base.wrapping_add(i * lda);
            self.tile(t, i, 1, j0);
        }
    }

    /// Computes the tile of `rows` rows from row `i0` and columns from `j0`, whose `a`,
    /// `offs`, `cols` and `w` are set.
    #[inline(always)]
    fn tile(&self, t: &mut TileArgs, i0: usize, rows: usize, j0: usize) {
        t.rows = rows;
        for (dst, src) in t.adds.iter_mut().zip(&self.adds[..t.nadds]) {
            dst.ptr = src.ptr.wrapping_add(i0 * src.rs + j0 * src.cs);
        }
        t.c = self.c.0.wrapping_add(i0 * self.ldc + j0);
        // SAFETY: `Job::new` checked that `A`'s rows (or every indirection offset, and the
        // zero row) hold `kc` floats, that the panel is this kernel's, and that `C` and
        // every add cover `m x n` at their strides; this tile lies inside those.
        unsafe { self.kernel.run(t) };
    }
}

/// The largest `MR` of any kernel.
const MAX_MR: usize = 8;

/// Bytes of one depth block of a weight panel (`KC x NR` floats): what stays in L1 while
/// the block sweeps its rows, with room left there for the `A` rows and `C` tile.
const L1_BLOCK_BYTES: usize = 32 * 1024;

/// Bytes of `A` one row block reads per depth block (`MC x KC` floats): what stays in L2
/// while it sweeps the panels. Far below L2's size because `A` is not packed: its rows
/// sit at the tensor's row stride, often a power of two, and a few hundred such rows
/// land in the same L2 sets (measured on AVX-512 at 1024 x 1024 x 1024: about a fifth
/// slower with 512 KiB blocks than with 128 KiB).
const L2_BLOCK_BYTES: usize = 128 * 1024;

/// How the depth (`taps x kc`) is cut: into tap groups when there are several taps (a
/// convolution: each block whole taps), else into runs of the one tap's `kc`. Blocks are
/// of equal size, so no thin last block is left.
#[derive(Clone, Copy, Debug)]
struct DepthBlocks {
    taps: usize,
    kc: usize,
    /// Blocks, and taps (or depth, with one tap) per block.
    count: usize,
    step: usize,
}

/// One block: taps `t0..t0 + taps`, depth `k0..k0 + kc` of each, weights `wo` groups of
/// `NR` after the panel's bias.
#[derive(Clone, Copy, Debug)]
struct DepthBlock {
    t0: usize,
    taps: usize,
    k0: usize,
    kc: usize,
    wo: usize,
    first: bool,
    last: bool,
}

impl DepthBlock {
    fn whole(taps: usize, kc: usize) -> DepthBlock {
        DepthBlock {
            t0: 0,
            taps,
            k0: 0,
            kc,
            wo: 0,
            first: true,
            last: true,
        }
    }
}

impl DepthBlocks {
    fn new(taps: usize, kc: usize, nr: usize) -> DepthBlocks {
        let kc_max = (L1_BLOCK_BYTES / (nr * size_of::<f32>())).max(1);
        let (units, per_unit) = if taps > 1 { (taps, kc) } else { (kc, 1) };
        if units == 0 || per_unit == 0 {
            return DepthBlocks {
                taps,
                kc,
                count: 1,
                step: units,
            };
        }
        let max_units = (kc_max / per_unit).max(1);
        // Equal blocks of at most `max_units`; the count is then what that size needs.
        let step = units.div_ceil(units.div_ceil(max_units));
        DepthBlocks {
            taps,
            kc,
            count: units.div_ceil(step),
            step,
        }
    }

    /// The depth of one block (the last may be shorter).
    fn size(&self, depth: usize) -> usize {
        depth.div_ceil(self.count).max(1)
    }

    fn block(&self, b: usize) -> DepthBlock {
        let last = b + 1 == self.count;
        if self.taps > 1 {
            let t0 = b * self.step;
            let taps = self.step.min(self.taps - t0);
            DepthBlock {
                t0,
                taps,
                k0: 0,
                kc: self.kc,
                wo: t0 * self.kc,
                first: b == 0,
                last,
            }
        } else {
            let k0 = b * self.step;
            DepthBlock {
                t0: 0,
                taps: self.taps,
                k0,
                kc: self.step.min(self.kc - k0),
                wo: k0,
                first: b == 0,
                last,
            }
        }
    }
}

/// `max(x, 0)` keeping NaN (and `-0.0`, which equals 0).
#[inline]
pub(crate) fn relu(x: f32) -> f32 {
    if x < 0.0 {
        0.0
    } else {
        x
    }
}

/// `min(max(x, lo), hi)` keeping NaN.
#[inline]
pub(crate) fn clip(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if y > hi {
        hi
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The one-row-per-call path of dense rows too far apart for `u32` offsets (which
    /// only a tensor of gigabytes reaches) against the tiled path, on every kernel and on
    /// partial tiles and a fused add: the same bits.
    #[test]
    fn dense_rows_one_per_call_match_the_tiled_product() {
        let (m, n, k, lda) = (19, 21, 13, 17);
        let value = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 97.0;
        let a: Vec<f32> = (0..(m - 1) * lda + k).map(value).collect();
        let b: Vec<f32> = (0..k * n).map(|i| value(i + 5)).collect();
        let bias: Vec<f32> = (0..n).map(|i| value(i + 11)).collect();
        let residual: Vec<f32> = (0..m * n).map(|i| value(i + 3)).collect();
        let mut ep = Epilogue::new();
        ep.add(Add {
            data: &residual,
            rs: n,
            cs: 1,
            scale: 0.5,
        });
        ep.clamp(-3.0, 3.0);
        for kernel in MicroKernel::available() {
            let pb = PackedB::new(kernel, 1, k, n, Some(&bias), |i, j| b[i * n + j]);
            let product = |by_row: bool| {
                let mut c = vec![0f32; m * n];
                let rows = Rows::Dense { data: &a, lda };
                let c_view = MatMut {
                    data: &mut c,
                    rs: n,
                };
                let mut job = Job::new(kernel, m, rows, &pb, c_view, &ep).expect("a product");
                assert!(!job.dense_by_row, "small rows take the tiled path");
                job.dense_by_row = by_row;
                job.run(0..job.row_tiles, 0..job.panels);
                c
            };
            let (tiled, by_row) = (product(false), product(true));
            assert!(tiled.iter().any(|&v| v != 0.0), "{}", kernel.name());
            let same = tiled
                .iter()
                .zip(&by_row)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "{}: rows one per call differ", kernel.name());
        }
    }

    /// The epilogue tests' epilogue: the residual (rows of `n`) added, a clamp to
    /// [-6, 7], then `f`.
    fn residual_epilogue(residual: &[f32], n: usize, f: Option<Activation>) -> Epilogue<'_> {
        let mut ep = Epilogue::new();
        ep.add(Add {
            data: residual,
            rs: n,
            cs: 1,
            scale: 1.0,
        });
        ep.clamp(-6.0, 7.0);
        ep.activate(f);
        ep
    }

    /// `A` (`m x k`), `B` packed with a bias (`k x n`) and a residual (`m x n`, scaled by
    /// `residual`) of deterministic awkward values, for the epilogue tests.
    fn operands(
        kernel: &MicroKernel,
        (m, n, k): (usize, usize, usize),
        residual: f32,
    ) -> (Vec<f32>, PackedB, Vec<f32>) {
        let value = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 97.0;
        let a: Vec<f32> = (0..m * k).map(value).collect();
        let b: Vec<f32> = (0..k * n).map(|i| value(i + 5) / 8.0).collect();
        let bias: Vec<f32> = (0..n).map(|i| value(i + 11)).collect();
        let r: Vec<f32> = (0..m * n).map(|i| residual * value(i + 3)).collect();
        let pb = PackedB::new(kernel, 1, k, n, Some(&bias), |i, j| b[i * n + j]);
        (a, pb, r)
    }

    /// The product in row blocks, each handed on from its thread's slot, against the
    /// whole product: every row handed on once, with the bits of `gemm`, for one row,
    /// partial tiles and blocks, blocks of one tile and of many, depths past one cache
    /// block, a residual add indexed by the product's rows and an activation, at 1 and 3
    /// threads, on every kernel.
    #[test]
    fn row_blocks_hand_on_the_bits_of_the_whole_product() {
        let pools = [Pool::new(1), Pool::new(3)];
        for kernel in MicroKernel::available() {
            for &(m, n, k, block) in &[
                (1, 40, 9, 8),
                (50, 33, 70, 1),
                (301, 64, 200, 20),
                (301, 16, 1100, 64),
                (700, 70, 90, 100),
            ] {
                let (a, pb, residual) = operands(kernel, (m, n, k), 1.0);
                let ep = residual_epilogue(&residual, n, Some(Activation::Silu));
                let rows = Rows::Dense { data: &a, lda: k };
                let mut want = vec![0f32; m * n];
                let c = MatMut {
                    data: &mut want,
                    rs: n,
                };
                gemm(kernel, m, rows, &pb, c, &ep);
                for pool in &pools {
                    let got = Mutex::new(vec![f32::NAN; m * n]);
                    let seen = Mutex::new(vec![0u8; m]);
                    let slot = row_block(kernel, block) * n;
                    let mut scratch = vec![0f32; pool.threads() * slot];
                    let then = |r: std::ops::Range<usize>, part: &[f32]| {
                        assert_eq!(part.len(), r.len() * n);
                        got.lock().unwrap()[r.start * n..r.end * n].copy_from_slice(part);
                        seen.lock().unwrap()[r].iter_mut().for_each(|s| *s += 1);
                    };
                    gemm_row_blocks(pool, kernel, m, rows, &pb, &mut scratch, &ep, block, &then);
                    let at = (kernel.name(), m, n, k, block, pool.threads());
                    assert!(seen.into_inner().unwrap().iter().all(|&s| s == 1), "{at:?}");
                    let got = got.into_inner().unwrap();
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{at:?}: blocks differ from the whole product");
                }
            }
        }
    }

    /// An activation in the epilogue against the same product without it, the function
    /// then applied to each stored value: the same bits, on every kernel, for one row (the
    /// matrix-vector form), partial tiles, and depths of several cache blocks (only the
    /// last may apply it), after a residual add and a clamp.
    #[test]
    fn the_epilogue_activation_is_the_function_of_the_stored_result() {
        for kernel in MicroKernel::available() {
            for &(m, n, k) in &[
                (1, 40, 9),
                (1, 259, 1100),
                (4, 40, 9),
                (5, 33, 1100),
                (7, 33, 5),
                (13, 70, 1100),
            ] {
                let (a, pb, residual) = operands(kernel, (m, n, k), 4.0);
                let product = |f: Option<Activation>| {
                    let ep = residual_epilogue(&residual, n, f);
                    let mut c = vec![0f32; m * n];
                    let rows = Rows::Dense { data: &a, lda: k };
                    gemm(
                        kernel,
                        m,
                        rows,
                        &pb,
                        MatMut {
                            data: &mut c,
                            rs: n,
                        },
                        &ep,
                    );
                    c
                };
                let plain = product(None);
                for f in activation::every() {
                    let fused = product(Some(f));
                    for (i, (&p, &g)) in plain.iter().zip(&fused).enumerate() {
                        let want = f.apply(p);
                        assert!(
                            g.to_bits() == want.to_bits(),
                            "{} {m}x{n}x{k} {f:?} at {i}: {g}, want {want}",
                            kernel.name()
                        );
                    }
                }
            }
        }
    }

    /// One row through the matrix-vector form against the same row computed by the tile
    /// kernel (a two-row product whose rows are the same data): the same bits, on every
    /// kernel, for column counts that leave a partial last panel and a partial group of
    /// panels, depths past one cache block, per-column and per-row adds, and a clamp.
    #[test]
    fn one_row_through_gemv_matches_the_tiled_product() {
        let value = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 97.0;
        for kernel in MicroKernel::available() {
            // 12 and 40: a last panel of 12 and of 8 columns (whole vectors and short ones
            // are stored differently).
            let shapes = [
                (1, 1),
                (7, 3),
                (12, 5),
                (40, 9),
                (33, 17),
                (100, 300),
                (259, 1100),
                (64, 0),
            ];
            for &(n, k) in &shapes {
                let a: Vec<f32> = (0..k).map(value).collect();
                let b: Vec<f32> = (0..k * n).map(|i| value(i + 5) / 8.0).collect();
                let bias: Vec<f32> = (0..n).map(|i| value(i + 11)).collect();
                let column: Vec<f32> = (0..n).map(|i| value(i + 3)).collect();
                let scalar = [0.75f32];
                let mut ep = Epilogue::new();
                ep.add(Add {
                    data: &column,
                    rs: 0,
                    cs: 1,
                    scale: 0.5,
                });
                ep.add(Add {
                    data: &scalar,
                    rs: 0,
                    cs: 0,
                    scale: -1.0,
                });
                ep.clamp(-2.0, 2.5);
                let pb = PackedB::new(kernel, 1, k, n, Some(&bias), |i, j| b[i * n + j]);
                let product = |m: usize| {
                    // Past the output, a guard that nothing may write.
                    let mut c = vec![f32::NAN; m * n + 16];
                    let rows = Rows::Dense { data: &a, lda: 0 };
                    gemm(
                        kernel,
                        m,
                        rows,
                        &pb,
                        MatMut {
                            data: &mut c[..m * n],
                            rs: n,
                        },
                        &ep,
                    );
                    assert!(
                        c[m * n..].iter().all(|v| v.is_nan()),
                        "{} {n}x{k}: written past the output",
                        kernel.name()
                    );
                    c.truncate(n);
                    c
                };
                let (one, two) = (product(1), product(2));
                for (j, (x, y)) in one.iter().zip(&two).enumerate() {
                    assert_eq!(
                        x.to_bits(),
                        y.to_bits(),
                        "{} {n}x{k}: column {j}: {x} vs {y}",
                        kernel.name()
                    );
                }
                // And the value, from the definition.
                for j in 0..n {
                    let dot: f64 = (0..k).map(|p| a[p] as f64 * b[p * n + j] as f64).sum();
                    let want =
                        (bias[j] as f64 + dot + 0.5 * column[j] as f64 - 0.75).clamp(-2.0, 2.5);
                    assert!(
                        (one[j] as f64 - want).abs() <= 1e-3 * (1.0 + want.abs()),
                        "{} {n}x{k}: column {j}: {} vs {want}",
                        kernel.name(),
                        one[j]
                    );
                }
            }
        }
    }
}
