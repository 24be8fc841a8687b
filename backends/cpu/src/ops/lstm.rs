//! LSTM (ONNX layout 0, default activations) on the GEMM path.
//!
//! Per direction, the input projection of *all* time steps is one GEMM,
//! `G = X · Wᵀ + (Wb + Rb)` (`[seq * batch, 4H]`, weights packed at init), since it does
//! not depend on the recurrence. Each step then adds `H_{t-1} · Rᵀ` (a GEMV over `Rᵀ`
//! stored in contiguous row-major panels of columns, so that the inner loop is a
//! contiguous, vectorized `axpy` over a register block) and applies the cell. Gate order in `W`, `R` and `B` is i, o, f, c:
//! `i = σ(.)`, `f = σ(.)`, `c~ = tanh(.)`, `C = f * C + i * c~`, `o = σ(.)`,
//! `H = o * tanh(C)`. With `sequence_lens` an entry runs its first `len` steps (the
//! reverse direction from `len - 1` down), its later `Y` rows are zero and `Y_h`, `Y_c`
//! are its last step's states, as `rnn.rs` does.
//!
//! `clip`, peepholes (`P = [Pi, Po, Pf]`) and `input_forget` take a second cell,
//! [`CellOptions::apply`], chosen once per recurrence: `i = σ(clip(gi + Pi C))`,
//! `f = σ(clip(gf + Pf C))` (or `1 - i`), `c~ = tanh(clip(gc))`, `C' = f C + i c~`,
//! `o = σ(clip(go + Po C'))`. A node without them runs the plain cell, with no added
//! work per step.
//!
//! The op writes `Y` (`[seq, dirs, batch, H]`), `Y_h` and `Y_c` (`[dirs, batch, H]`) one
//! after another into its buffer; the node's outputs are views of it.

use super::math::{sigmoid, tanh};
use super::rnn::SeqLens;
use super::{vec_bytes, RunCtx, Sources, Src};
use crate::gemm::{gemm_parallel, Epilogue, Isa, MatMut, MicroKernel, PackedB, Rows};
use crate::pool::{Disjoint, Pool, SpinBarrier};
use crate::prepack::Packs;

/// One direction's prepared weights.
#[derive(Clone, Debug)]
pub(crate) struct LstmDirection {
    /// `Wᵀ` (`[input, 4H]`), packed, with the summed biases `Wb + Rb` in the panels.
    w: PackedB,
    /// `Rᵀ` (`[H, 4H]`) in column panels of [`GEMV_BLOCK`] (the last one narrower), each
    /// panel row-major and contiguous: see [`gemv`].
    r_t: Vec<f32>,
    /// Whether this direction runs backwards in time.
    reverse: bool,
}

/// The LSTM attributes and input that change the cell: `clip`, `input_forget` and the
/// peepholes `P` (`[dirs, 3H]`, constant or computed).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LstmCellSpec {
    /// The `clip` attribute, when the node has one (its absolute value bounds the gates,
    /// as in the reference).
    pub clip: Option<f32>,
    pub input_forget: bool,
    pub peepholes: Option<Src>,
}

impl LstmCellSpec {
    /// Whether the cell is the plain one.
    fn is_plain(&self) -> bool {
        self.clip.is_none() && !self.input_forget && self.peepholes.is_none()
    }
}

/// A prepared LSTM node.
#[derive(Clone, Debug)]
pub(crate) struct LstmOp {
    x: Src,
    initial_h: Option<Src>,
    initial_c: Option<Src>,
    cell: LstmCellSpec,
    dirs: Vec<LstmDirection>,
    lens: SeqLens,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
}

impl LstmOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        self.dirs.iter().map(|d| vec_bytes(&d.r_t)).sum::<usize>()
            + vec_bytes(&self.dirs)
            + self.lens.owned_bytes()
    }

    /// The op with `sequence_lens` (constant ones lie in `1..=seq`, checked by the
    /// lowering).
    pub fn with_lens(self, lens: SeqLens) -> LstmOp {
        LstmOp { lens, ..self }
    }

    /// The op with `clip`, `input_forget` and peepholes (`P` of `[dirs, 3H]`, checked by
    /// the lowering).
    pub fn with_cell(self, cell: LstmCellSpec) -> LstmOp {
        LstmOp {
            cell: LstmCellSpec {
                clip: cell.clip.map(f32::abs),
                ..cell
            },
            ..self
        }
    }

    /// `w`: `[dirs, 4H, input]`, `r`: `[dirs, 4H, H]`, `b`: `[dirs, 8H]` when present.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        packs: &mut Packs<'_>,
        kernel: &MicroKernel,
        x: Src,
        x_shape: &[usize],
        w: &[f32],
        r: &[f32],
        b: Option<&[f32]>,
        initial: (Option<Src>, Option<Src>),
        direction: &str,
        dirs: usize,
        hidden: usize,
    ) -> LstmOp {
        let (seq, batch, input) = (x_shape[0], x_shape[1], x_shape[2]);
        let gh = 4 * hidden;
        let dirs = (0..dirs)
            .map(|d| {
                let wd = &w[d * gh * input..(d + 1) * gh * input];
                let rd = &r[d * gh * hidden..(d + 1) * gh * hidden];
                let mut r_t = vec![0f32; hidden * gh];
                for (n, row) in rd.chunks_exact(hidden.max(1)).enumerate().take(gh) {
                    let (j0, width) = panel_of(n, gh);
                    for (k, &v) in row.iter().enumerate() {
                        r_t[j0 * hidden + k * width + (n - j0)] = v;
                    }
                }
                let bias = match b {
                    Some(b) => {
                        let bd = &b[d * 2 * gh..(d + 1) * 2 * gh];
                        (0..gh).map(|j| bd[j] + bd[gh + j]).collect()
                    }
                    None => vec![0.0; gh],
                };
                LstmDirection {
                    // Wᵀ[k][n] = W[n][k].
                    w: PackedB::new_in(packs, kernel, 1, input, gh, Some(&bias), |k, n| {
                        wd[n * input + k]
                    }),
                    r_t,
                    reverse: direction == "reverse" || d == 1,
                }
            })
            .collect();
        LstmOp {
            x,
            initial_h: initial.0,
            initial_c: initial.1,
            cell: LstmCellSpec::default(),
            dirs,
            lens: SeqLens::Full,
            seq,
            batch,
            input,
            hidden,
        }
    }

    /// Floats of `Y`, `Y_h` and `Y_c` together.
    pub fn out_len(&self) -> (usize, usize) {
        let state = self.dirs.len() * self.batch * self.hidden;
        (self.seq * state, state)
    }

    pub fn reserve(&self, ctx: &mut RunCtx) {
        let gh = 4 * self.hidden;
        // G for all steps, then one step's gates, then H and C.
        ctx.reserve_work(self.seq * self.batch * gh + gh + 2 * self.hidden);
    }

    pub fn run(
        &self,
        sources: &Sources<'_>,
        out: &mut [f32],
        ctx: &mut RunCtx,
    ) -> Result<(), String> {
        let (seq, batch, hidden) = (self.seq, self.batch, self.hidden);
        if hidden == 0 || batch == 0 {
            return Ok(());
        }
        // Every length is checked before anything is written.
        for b in 0..batch {
            self.lens.len_of("LSTM", seq, sources, b)?;
        }
        let gh = 4 * hidden;
        let ndirs = self.dirs.len();
        let x = sources.get(self.x);
        let init_h = self.initial_h.map(|s| sources.get(s));
        let init_c = self.initial_c.map(|s| sources.get(s));
        let peepholes = self.cell.peepholes.map(|s| sources.get(s));
        let (y_len, state_len) = self.out_len();
        let (y, rest) = out.split_at_mut(y_len);
        let (y_h, y_c) = rest.split_at_mut(state_len);
        let RunCtx {
            kernel, pool, work, ..
        } = ctx;
        for (d, dir) in self.dirs.iter().enumerate() {
            let (g_all, rest) = work.split_at_mut(seq * batch * gh);
            let (gates, rest) = rest.split_at_mut(gh);
            let (h, rest) = rest.split_at_mut(hidden);
            let c = &mut rest[..hidden];
            let a = Rows::Dense {
                data: x,
                lda: self.input,
            };
            let g = MatMut {
                data: &mut g_all[..],
                rs: gh,
            };
            let m = seq * batch;
            gemm_parallel(pool, kernel, m, a, &dir.w, g, &Epilogue::new());
            for b in 0..batch {
                let at = (d * batch + b) * hidden;
                match init_h {
                    Some(v) => h.copy_from_slice(&v[at..at + hidden]),
                    None => h.fill(0.0),
                }
                match init_c {
                    Some(v) => c.copy_from_slice(&v[at..at + hidden]),
                    None => c.fill(0.0),
                }
                let len = self.lens.len_of("LSTM", seq, sources, b)?;
                let walk = Walk {
                    len,
                    batch,
                    ndirs,
                    d,
                    b,
                };
                let state = State {
                    gates: &mut *gates,
                    h: &mut *h,
                    c: &mut *c,
                };
                let cell = if self.cell.is_plain() {
                    None
                } else {
                    Some(CellOptions {
                        clip: self.cell.clip.unwrap_or(f32::INFINITY),
                        input_forget: self.cell.input_forget,
                        peepholes: peepholes.map(|p| &p[d * 3 * hidden..(d + 1) * 3 * hidden]),
                    })
                };
                // Enough work per step to share: each thread keeps its panels of Rᵀ (in its
                // own cache) and its hidden units across the steps.
                let threads = pool.threads().min(gh.div_ceil(GEMV_BLOCK)).min(hidden);
                if threads >= 2 && gh * hidden >= SHARED_STEP_MIN {
                    recurrence_shared(
                        pool,
                        threads,
                        kernel.isa(),
                        dir,
                        walk,
                        g_all,
                        state,
                        y,
                        cell,
                    );
                } else {
                    recurrence(kernel.isa(), dir, walk, g_all, state, y, cell);
                }
                // Steps past the entry's length are zero (the buffer is reused).
                for t in len..seq {
                    let o = ((t * ndirs + d) * batch + b) * hidden;
                    y[o..o + hidden].fill(0.0);
                }
                y_h[at..at + hidden].copy_from_slice(h);
                y_c[at..at + hidden].copy_from_slice(c);
            }
        }
        Ok(())
    }
}

/// Where one (direction, batch) recurrence reads and writes.
#[derive(Clone, Copy)]
struct Walk {
    /// The entry's step count (`sequence_lens`, or the whole sequence).
    len: usize,
    batch: usize,
    ndirs: usize,
    d: usize,
    b: usize,
}

/// The recurrence's mutable state: one step's gates, and H and C.
struct State<'a> {
    gates: &'a mut [f32],
    h: &'a mut [f32],
    c: &'a mut [f32],
}

/// The time steps of one (direction, batch) pair: `gates = G[t] + H·Rᵀ`, then the cell
/// (the plain one when `opts` is `None`), compiled for the CPU's vectors. The sequential
/// dependency on H leaves no parallelism across steps; within a step the work is a GEMV
/// and the cell, both element-parallel.
fn recurrence(
    isa: Isa,
    dir: &LstmDirection,
    at: Walk,
    g: &[f32],
    s: State<'_>,
    y: &mut [f32],
    opts: Option<CellOptions<'_>>,
) {
    match isa {
        // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512F => unsafe { recurrence_avx512(dir, at, g, s, y, opts) },
        // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { recurrence_avx2(dir, at, g, s, y, opts) },
        // NEON has a fused multiply-add too; only the portable kernels go without.
        Isa::Neon => steps::<true>(dir, at, g, s, y, opts),
        _ => steps::<false>(dir, at, g, s, y, opts),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn recurrence_avx512(
    dir: &LstmDirection,
    at: Walk,
    g: &[f32],
    s: State<'_>,
    y: &mut [f32],
    opts: Option<CellOptions<'_>>,
) {
    steps::<true>(dir, at, g, s, y, opts)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn recurrence_avx2(
    dir: &LstmDirection,
    at: Walk,
    g: &[f32],
    s: State<'_>,
    y: &mut [f32],
    opts: Option<CellOptions<'_>>,
) {
    steps::<true>(dir, at, g, s, y, opts)
}

/// Picks the cell once, outside the step loop, so that each loop is compiled with its
/// own cell inlined. The cell is chosen by a const parameter and called directly: passed
/// as a function value it was called through a shim compiled without the caller's target
/// features, and the plain cell ran at SSE2 width (stream_asr's LSTMs 78 -> 89 us).
#[inline(always)]
fn steps<const FMA: bool>(
    dir: &LstmDirection,
    at: Walk,
    g_all: &[f32],
    s: State<'_>,
    y: &mut [f32],
    opts: Option<CellOptions<'_>>,
) {
    match opts {
        None => step_loop::<FMA, true>(dir, at, g_all, s, y, None),
        Some(o) => step_loop::<FMA, false>(dir, at, g_all, s, y, Some(o)),
    }
}

#[inline(always)]
fn step_loop<const FMA: bool, const PLAIN: bool>(
    dir: &LstmDirection,
    at: Walk,
    g_all: &[f32],
    s: State<'_>,
    y: &mut [f32],
    opts: Option<CellOptions<'_>>,
) {
    let State { gates, h, c } = s;
    let (gh, hidden) = (gates.len(), h.len());
    for step in 0..at.len {
        let t = if dir.reverse { at.len - 1 - step } else { step };
        gates.copy_from_slice(&g_all[(t * at.batch + at.b) * gh..][..gh]);
        gemv::<FMA>(gates, h, &dir.r_t);
        match (PLAIN, &opts) {
            (false, Some(o)) => o.apply(gates, h, c),
            _ => cell(gates, h, c),
        }
        let o = ((t * at.ndirs + at.d) * at.batch + at.b) * hidden;
        y[o..o + hidden].copy_from_slice(h);
    }
}

/// The least multiply-adds of one step's GEMV for which the steps are shared among the
/// threads: two meetings of the threads per step cost some hundred nanoseconds.
const SHARED_STEP_MIN: usize = 32 * 1024;

/// [`recurrence`] on `threads` threads at once, meeting twice per step: each computes the
/// gates of its own panels of `Rᵀ` (the same panels every step, so they stay in its
/// cache: Rᵀ is 590 KB at H = 192), then, once all gates are in, the cell of its own
/// hidden units. Every value is computed as one thread computes it, in the same order:
/// the results are the same bits.
#[allow(clippy::too_many_arguments)]
fn recurrence_shared(
    pool: &Pool,
    threads: usize,
    isa: Isa,
    dir: &LstmDirection,
    at: Walk,
    g_all: &[f32],
    s: State<'_>,
    y: &mut [f32],
    opts: Option<CellOptions<'_>>,
) {
    let State { gates, h, c } = s;
    let (gh, hidden) = (gates.len(), h.len());
    let panels = gh.div_ceil(GEMV_BLOCK);
    let shared = Shared {
        gates: Disjoint::new(gates),
        h: Disjoint::new(h),
        c: Disjoint::new(c),
        y: Disjoint::new(y),
        barrier: SpinBarrier::new(threads),
        gh,
        hidden,
    };
    pool.run(threads, &|t, _| {
        let part = Part {
            cols: ((t * panels / threads) * GEMV_BLOCK).min(gh)
                ..(((t + 1) * panels / threads) * GEMV_BLOCK).min(gh),
            units: t * hidden / threads..(t + 1) * hidden / threads,
        };
        let body = || match isa {
            // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512F => unsafe { shared_avx512(dir, at, g_all, &shared, &part, opts) },
            // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { shared_avx2(dir, at, g_all, &shared, &part, opts) },
            Isa::Neon => shared_steps::<true>(dir, at, g_all, &shared, &part, opts),
            _ => shared_steps::<false>(dir, at, g_all, &shared, &part, opts),
        };
        // A panicking thread must not leave the others waiting for it.
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
            shared.barrier.poison();
            std::panic::resume_unwind(panic);
        }
    });
}

/// The buffers the threads of [`recurrence_shared`] share, and their barrier.
struct Shared<'a> {
    gates: Disjoint<'a>,
    h: Disjoint<'a>,
    c: Disjoint<'a>,
    y: Disjoint<'a>,
    barrier: SpinBarrier,
    gh: usize,
    hidden: usize,
}

/// One thread's share: its columns of the gates and its hidden units.
struct Part {
    cols: std::ops::Range<usize>,
    units: std::ops::Range<usize>,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn shared_avx512(
    dir: &LstmDirection,
    at: Walk,
    g_all: &[f32],
    sh: &Shared<'_>,
    part: &Part,
    opts: Option<CellOptions<'_>>,
) {
    shared_steps::<true>(dir, at, g_all, sh, part, opts)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn shared_avx2(
    dir: &LstmDirection,
    at: Walk,
    g_all: &[f32],
    sh: &Shared<'_>,
    part: &Part,
    opts: Option<CellOptions<'_>>,
) {
    shared_steps::<true>(dir, at, g_all, sh, part, opts)
}

/// One thread's steps of [`recurrence_shared`], its cell picked once as in [`steps`].
#[inline(always)]
fn shared_steps<const FMA: bool>(
    dir: &LstmDirection,
    at: Walk,
    g_all: &[f32],
    sh: &Shared<'_>,
    part: &Part,
    opts: Option<CellOptions<'_>>,
) {
    match opts {
        None => shared_loop::<FMA, true>(dir, at, g_all, sh, part, None),
        Some(o) => shared_loop::<FMA, false>(dir, at, g_all, sh, part, Some(o)),
    }
}

#[inline(always)]
fn shared_loop<const FMA: bool, const PLAIN: bool>(
    dir: &LstmDirection,
    at: Walk,
    g_all: &[f32],
    sh: &Shared<'_>,
    part: &Part,
    opts: Option<CellOptions<'_>>,
) {
    let (gh, hidden) = (sh.gh, sh.hidden);
    let (cols, units) = (part.cols.clone(), part.units.clone());
    for step in 0..at.len {
        let t = if dir.reverse { at.len - 1 - step } else { step };
        {
            // SAFETY: between two meetings this thread alone writes its columns of the
            // gates, and nobody writes H (see the meetings below).
            let (gates, h) = unsafe {
                (
                    sh.gates.range(cols.start, cols.len()),
                    sh.h.shared(0, hidden),
                )
            };
            gates.copy_from_slice(&g_all[(t * at.batch + at.b) * gh + cols.start..][..cols.len()]);
            gemv_cols::<FMA>(gates, cols.start, gh, h, &dir.r_t);
        }
        if !sh.barrier.wait() {
            return;
        }
        {
            let o = ((t * at.ndirs + at.d) * at.batch + at.b) * hidden;
            // SAFETY: every gate is written and nobody writes them until the next
            // meeting; this thread alone writes its units of H, C and this step's Y row.
            let (gates, h, c, y) = unsafe {
                (
                    sh.gates.shared(0, gh),
                    sh.h.range(units.start, units.len()),
                    sh.c.range(units.start, units.len()),
                    sh.y.range(o + units.start, units.len()),
                )
            };
            match (PLAIN, &opts) {
                (false, Some(op)) => op.apply_units(gates, hidden, units.start, h, c),
                _ => cell_units(gates, hidden, units.start, h, c),
            }
            y.copy_from_slice(h);
        }
        if !sh.barrier.wait() {
            return;
        }
    }
}

/// Columns of `Rᵀ` one pass of [`gemv`] keeps in registers (four AVX-512 vectors).
const GEMV_BLOCK: usize = 64;

/// The first column and the width of the panel holding column `n` of a `gh`-wide `Rᵀ`.
fn panel_of(n: usize, gh: usize) -> (usize, usize) {
    let j0 = n - n % GEMV_BLOCK;
    (j0, GEMV_BLOCK.min(gh - j0))
}

/// `gates += h · Rᵀ`, a panel of columns at a time held in registers over all of `h`:
/// streaming `gates` through memory once per element of `h` made the recurrence load- and
/// store-bound. `Rᵀ` is stored panel by panel, so each pass reads one contiguous stream
/// (a model's `Rᵀ` is larger than L1: 590 KB at H = 192); row-major `[H, 4H]` made every
/// pass jump `16 H` bytes between rows, which ran the step at about half the speed.
#[inline(always)]
fn gemv<const FMA: bool>(gates: &mut [f32], h: &[f32], r_t: &[f32]) {
    let gh = gates.len();
    gemv_cols::<FMA>(gates, 0, gh, h, r_t)
}

/// [`gemv`] over the columns `j_begin..j_begin + gates.len()` of a `gh`-wide `Rᵀ`
/// (`j_begin` a multiple of [`GEMV_BLOCK`], the range whole panels or ending at `gh`).
#[inline(always)]
fn gemv_cols<const FMA: bool>(
    gates: &mut [f32],
    j_begin: usize,
    gh: usize,
    h: &[f32],
    r_t: &[f32],
) {
    let hidden = h.len();
    let end = j_begin + gates.len();
    let madd = |acc: &mut f32, hk: f32, r: f32| {
        *acc = if FMA {
            hk.mul_add(r, *acc)
        } else {
            *acc + hk * r
        }
    };
    let mut j0 = j_begin;
    while j0 + GEMV_BLOCK <= end {
        let panel = &r_t[j0 * hidden..(j0 + GEMV_BLOCK) * hidden];
        let mut acc = [0f32; GEMV_BLOCK];
        let g = j0 - j_begin;
        acc.copy_from_slice(&gates[g..g + GEMV_BLOCK]);
        for (&hk, row) in h.iter().zip(panel.chunks_exact(GEMV_BLOCK)) {
            let row: &[f32; GEMV_BLOCK] = row.try_into().expect("a full block");
            acc.iter_mut().zip(row).for_each(|(a, &r)| madd(a, hk, r));
        }
        gates[g..g + GEMV_BLOCK].copy_from_slice(&acc);
        j0 += GEMV_BLOCK;
    }
    let width = end - j0;
    if width > 0 {
        // Only the last panel is narrower than a block: it ends at `gh`.
        debug_assert_eq!(end, gh);
        let panel = &r_t[j0 * hidden..];
        for (&hk, row) in h.iter().zip(panel.chunks_exact(width)) {
            let tail = gates[j0 - j_begin..].iter_mut().zip(row);
            tail.for_each(|(a, &r)| madd(a, hk, r));
        }
    }
}

/// One LSTM cell update from the pre-activation `gates` (i, o, f, c blocks of `H`), with
/// the polynomial sigmoid and tanh so that it vectorizes with the recurrence around it.
#[inline(always)]
fn cell(gates: &[f32], h: &mut [f32], c: &mut [f32]) {
    cell_units(gates, h.len(), 0, h, c)
}

/// [`cell`] for the hidden units `u0..u0 + h.len()` of `hidden`, reading their gates in
/// the full `gates` (what one thread of [`recurrence_shared`] updates).
#[inline(always)]
fn cell_units(gates: &[f32], hidden: usize, u0: usize, h: &mut [f32], c: &mut [f32]) {
    let n = h.len();
    let at = |g: usize| &gates[g * hidden + u0..g * hidden + u0 + n];
    let (i, o, f, cand) = (at(0), at(1), at(2), at(3));
    let gates = i.iter().zip(o).zip(f.iter().zip(cand));
    for ((h, c), ((&i, &o), (&f, &g))) in h.iter_mut().zip(c.iter_mut()).zip(gates) {
        let c_new = sigmoid(f) * *c + sigmoid(i) * tanh(g);
        *c = c_new;
        *h = sigmoid(o) * tanh(c_new);
    }
}

/// One direction's `clip`, `input_forget` and peepholes, for [`CellOptions::apply`].
#[derive(Clone, Copy)]
struct CellOptions<'a> {
    /// The bound on every gate's pre-activation (infinite without `clip`).
    clip: f32,
    input_forget: bool,
    /// This direction's `[Pi, Po, Pf]` (`3H`).
    peepholes: Option<&'a [f32]>,
}

impl CellOptions<'_> {
    /// The cell of [`cell`] with the options: the peephole terms read the old cell state
    /// for i and f and the new one for o, and `input_forget` couples f to i after i's
    /// clip, as ONNX defines them.
    #[inline(always)]
    fn apply(&self, gates: &[f32], h: &mut [f32], c: &mut [f32]) {
        self.apply_units(gates, h.len(), 0, h, c)
    }

    /// [`CellOptions::apply`] for the hidden units `u0..u0 + h.len()` of `hidden`.
    #[inline(always)]
    fn apply_units(&self, gates: &[f32], hidden: usize, u0: usize, h: &mut [f32], c: &mut [f32]) {
        let n = h.len();
        let at = |g: usize| &gates[g * hidden + u0..g * hidden + u0 + n];
        let (i, o, f, cand) = (at(0), at(1), at(2), at(3));
        let bound = self.clip;
        let clip = |v: f32| v.clamp(-bound, bound);
        let p = |k: usize, j: usize| self.peepholes.map_or(0.0, |p| p[k * hidden + u0 + j]);
        for j in 0..n {
            let old = c[j];
            let ig = sigmoid(clip(i[j] + p(0, j) * old));
            let fg = if self.input_forget {
                1.0 - ig
            } else {
                sigmoid(clip(f[j] + p(2, j) * old))
            };
            let c_new = fg * old + ig * tanh(clip(cand[j]));
            c[j] = c_new;
            h[j] = sigmoid(clip(o[j] + p(1, j) * c_new)) * tanh(c_new);
        }
    }
}
