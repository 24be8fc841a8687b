//! Criterion benchmarks of Baton live in `benches/`; run them with `cargo bench -p baton-benches`.
//! This library holds what they share: the measured FMA peak ([`peak`]) and the GEMM
//! throughput measurement the `gemm-report` binary prints as a table ([`gemm_rate`]).

pub mod peak;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use baton_backend_cpu::gemm::{self, Epilogue, MatMut, MatRef, MicroKernel, PackedB, Rows};

/// Deterministic values in [-0.5, 0.5).
pub fn values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1e-3)
        .collect()
}

/// A GEMM problem: `C[m x n] = A[m x k] * B[k x n]`, row-major, B packed once (as the
/// CPU plugin does for weights), A read in place.
pub struct GemmProblem {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// The shared dimension.
    pub k: usize,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

impl GemmProblem {
    /// A problem of the given shape with deterministic operands.
    pub fn new(m: usize, n: usize, k: usize) -> GemmProblem {
        GemmProblem {
            m,
            n,
            k,
            a: values(m * k),
            b: values(k * n),
            c: vec![0.0; m * n],
        }
    }

    /// Floating-point operations of one product.
    pub fn flops(&self) -> u64 {
        2 * (self.m * self.n * self.k) as u64
    }

    /// A closure running the product once with Baton's GEMM on `kernel`, B prepacked.
    pub fn baton<'p>(&'p mut self, kernel: &'static MicroKernel) -> impl FnMut() + 'p {
        let (m, n, k) = (self.m, self.n, self.k);
        let view = MatRef {
            data: &self.b,
            rs: n,
            cs: 1,
        };
        let packed = PackedB::from_matrix(kernel, view, k, n, None);
        let (a, c) = (&self.a, &mut self.c);
        move || {
            gemm::gemm(
                kernel,
                m,
                Rows::Dense { data: a, lda: k },
                &packed,
                MatMut { data: c, rs: n },
                &Epilogue::new(),
            );
            std::hint::black_box(&*c);
        }
    }

    /// A closure running the product once with the `gemm` crate (one thread), the
    /// yardstick: a well-tuned pure-Rust GEMM that packs both operands on every call.
    pub fn yardstick(&mut self) -> impl FnMut() + '_ {
        let (m, n, k) = (self.m, self.n, self.k);
        let (a, b, c) = (&self.a, &self.b, &mut self.c);
        move || {
            // SAFETY: the pointers and strides describe the row-major m x k, k x n and
            // m x n buffers above, which outlive the call; `c` is not aliased.
            unsafe {
                ::gemm::gemm(
                    m,
                    n,
                    k,
                    c.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    a.as_ptr(),
                    1,
                    k as isize,
                    b.as_ptr(),
                    1,
                    n as isize,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    ::gemm::Parallelism::None,
                );
            }
            std::hint::black_box(&*c);
        }
    }
}

static THREAD_TIME: AtomicBool = AtomicBool::new(false);

/// Times the reports by the calling thread's CPU time instead of the wall clock: on a
/// machine shared with other work, the wall clock counts the time the thread waited for a
/// core, which says nothing about the code (caches shared with the other work still
/// count). Unix only; `false` where the thread's CPU time cannot be read.
pub fn use_thread_cpu_time() -> bool {
    let ok = thread_cpu_time().is_some();
    THREAD_TIME.store(ok, Ordering::Relaxed);
    ok
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, nanosecond resolution; the
/// figure in `/proc/thread-self/schedstat` only moves at scheduler ticks, too coarse for
/// 10 ms batches).
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// A start point on the clock the reports use (see [`use_thread_cpu_time`]).
#[derive(Clone, Copy)]
pub enum Stamp {
    Wall(Instant),
    Thread(Duration),
}

impl Stamp {
    /// Now.
    pub fn now() -> Stamp {
        if THREAD_TIME.load(Ordering::Relaxed) {
            if let Some(t) = thread_cpu_time() {
                return Stamp::Thread(t);
            }
        }
        Stamp::Wall(Instant::now())
    }

    /// Seconds since this stamp, on its clock.
    pub fn elapsed_secs(&self) -> f64 {
        match self {
            Stamp::Wall(t) => t.elapsed().as_secs_f64(),
            Stamp::Thread(t) => {
                thread_cpu_time().map_or(0.0, |now| now.saturating_sub(*t).as_secs_f64())
            }
        }
    }
}

/// GFLOP/s of `run` on a problem of `flops`: the median of 15 timed batches (each about
/// 10 ms) after a warm-up batch.
pub fn gemm_rate(flops: u64, mut run: impl FnMut()) -> f64 {
    let t = Stamp::now();
    run();
    let once = t.elapsed_secs().max(1e-7);
    let reps = ((0.01 / once) as usize).clamp(1, 10_000);
    for _ in 0..reps {
        run();
    }
    let mut rates: Vec<f64> = (0..15)
        .map(|_| {
            let t = Stamp::now();
            for _ in 0..reps {
                run();
            }
            (flops * reps as u64) as f64 / t.elapsed_secs().max(1e-9) / 1e9
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}
