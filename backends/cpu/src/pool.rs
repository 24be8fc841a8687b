//! A small fork-join pool for the kernels: `threads - 1` workers plus the calling thread.
//!
//! Why not rayon: dispatching a job here allocates nothing (`execute` must not allocate;
//! rayon's scopes box their jobs), and idle workers go to sleep after a short spin, where
//! rayon spins much longer — on a phone, or on a machine shared with other processes,
//! that burns a core between inferences.
//!
//! Each thread first runs its own contiguous share of a job's tasks (thread `w` of `n`
//! owns tasks `w * T / n ..`), front to back, then takes what is left of the others'
//! shares from their back ends (pthreadpool's ranges with stealing), so uneven tasks
//! still balance themselves. The kernels number their tasks in output order, so thread
//! `w` computes the same part of every op's output while nothing is stolen: what one op
//! writes, the next reads on the core whose cache holds it. With tasks claimed from one
//! shared counter instead, the parts interleaved between the threads from op to op, and
//! an element-wise op read half its input from the other core's cache (a gate's Mul over
//! 120x28x28 after a depthwise conv: 45 us on one thread of two against 13 alone).
//!
//! Between the ops of one inference a worker waits by spinning ([`SPIN`], pthreadpool's
//! approach): the next op's job arrives within microseconds, and waking a sleeping thread
//! through the kernel costs more than a small op. Only after the spin does it sleep on a
//! condition variable, which the caller signals only when someone sleeps.
//!
//! The caller never waits for a worker that has not joined the job: it waits until every
//! *task* is done, then closes the job and waits only for the workers inside it. A worker
//! that the OS did not schedule in time (two cores shared with other work) costs nothing
//! but its share, which the caller has taken instead. That is what keeps two threads from
//! being slower than one on a busy machine.
//!
//! [`Pool::run`] returns only when no worker still holds the borrowed closure, which is
//! what makes lending it to the workers sound; a panic in a task is re-raised on the
//! caller after that.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A task body: `(task index, worker index)`; worker 0 is the calling thread.
type Task<'a> = dyn Fn(usize, usize) + Sync + 'a;

/// How long an idle worker spins for the next job before it sleeps.
const SPIN: Duration = Duration::from_micros(100);

/// A pool of worker threads; see the module docs.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} threads)", self.threads())
    }
}

struct Shared {
    state: Mutex<State>,
    start: Condvar,
    finished: Condvar,
    /// The job's number, readable without the lock by spinning workers.
    epoch: AtomicU64,
    /// Each thread's share of the job's tasks, and the tasks finished.
    shares: Vec<Share>,
    done: AtomicUsize,
    panicked: AtomicBool,
}

/// The tasks `front..back` of one thread's share not yet claimed: its owner takes them
/// from the front, the other threads from the back. `left` counts them down first, so
/// that no more are taken than there are and the two ends never cross.
#[repr(align(64))]
struct Share {
    front: AtomicUsize,
    back: AtomicUsize,
    left: std::sync::atomic::AtomicIsize,
}

impl Share {
    /// Sets the share to the tasks `start..end` (before the job is published).
    fn set(&self, start: usize, end: usize) {
        self.front.store(start, Ordering::Relaxed);
        self.back.store(end, Ordering::Relaxed);
        self.left.store((end - start) as isize, Ordering::Relaxed);
    }

    /// One unclaimed task, from the front (`own`) or the back.
    fn take(&self, own: bool) -> Option<usize> {
        if self.left.fetch_sub(1, Ordering::Relaxed) <= 0 {
            return None;
        }
        Some(match own {
            true => self.front.fetch_add(1, Ordering::Relaxed),
            false => self.back.fetch_sub(1, Ordering::Relaxed) - 1,
        })
    }
}

struct State {
    /// The current job, lifetime erased: valid while it is `Some` or `active > 0` (see
    /// `Pool::run`).
    job: Option<&'static Task<'static>>,
    /// Workers inside the current job.
    active: usize,
    /// Workers asleep on `start`.
    sleeping: usize,
    shutdown: bool,
}

impl Pool {
    /// A pool running tasks on `threads` threads (the caller and `threads - 1` workers).
    pub fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                job: None,
                active: 0,
                sleeping: 0,
                shutdown: false,
            }),
            start: Condvar::new(),
            finished: Condvar::new(),
            epoch: AtomicU64::new(0),
            shares: (0..threads.max(1))
                .map(|_| Share {
                    front: AtomicUsize::new(0),
                    back: AtomicUsize::new(0),
                    left: std::sync::atomic::AtomicIsize::new(0),
                })
                .collect(),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        });
        let workers = (1..threads.max(1))
            .map(|w| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("baton-cpu-{w}"))
                    .spawn(move || worker(&shared, w))
                    .expect("spawn a CPU delegate worker")
            })
            .collect();
        Pool { shared, workers }
    }

    /// Threads that run tasks, the caller included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f(task, worker)` for every task in `0..tasks`, spread over the threads;
    /// returns when all are done.
    pub fn run(&self, tasks: usize, f: &Task<'_>) {
        if self.workers.is_empty() || tasks <= 1 {
            (0..tasks).for_each(|t| f(t, 0));
            return;
        }
        let sh = &*self.shared;
        // SAFETY: the erased reference is only used by workers that joined the job under
        // the lock while it was published; it is withdrawn below, and this function
        // returns only when every worker that joined has left (also when a task panics:
        // panics are caught per task).
        let job: &'static Task<'static> = unsafe { std::mem::transmute(f) };
        {
            let mut s = lock(&sh.state);
            let n = sh.shares.len();
            for (w, share) in sh.shares.iter().enumerate() {
                share.set(w * tasks / n, (w + 1) * tasks / n);
            }
            sh.done.store(0, Ordering::Relaxed);
            sh.panicked.store(false, Ordering::Relaxed);
            s.job = Some(job);
            sh.epoch.fetch_add(1, Ordering::Release);
            if s.sleeping > 0 {
                self.shared.start.notify_all();
            }
        }
        let mine = claim(sh, job, 0);
        // Tasks claimed by workers are running; wait for them, spinning first (they are
        // short), then yielding the core to them.
        let t0 = Instant::now();
        while sh.done.load(Ordering::Acquire) < tasks {
            if t0.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let mut s = lock(&sh.state);
        s.job = None;
        while s.active > 0 {
            s = sh.finished.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        drop(s);
        if let Some(p) = mine {
            resume_unwind(p);
        }
        assert!(
            !sh.panicked.load(Ordering::Relaxed),
            "a CPU delegate worker panicked"
        );
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.epoch.fetch_add(1, Ordering::Release);
        self.shared.start.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Claims and runs tasks until none are left, its own share first (see the module docs),
/// counting each as done even when it panics; returns the first panic of this thread.
fn claim(shared: &Shared, job: &Task<'_>, w: usize) -> Option<Box<dyn std::any::Any + Send>> {
    let mut first = None;
    let n = shared.shares.len();
    // Its own share, then the next threads' in turn.
    for v in (w..n).chain(0..w) {
        while let Some(t) = shared.shares[v].take(v == w) {
            let r = catch_unwind(AssertUnwindSafe(|| job(t, w)));
            if let Err(p) = r {
                shared.panicked.store(true, Ordering::Relaxed);
                first.get_or_insert(p);
            }
            shared.done.fetch_add(1, Ordering::Release);
        }
    }
    first
}

fn worker(shared: &Shared, w: usize) {
    let mut seen = 0;
    loop {
        // Spin for the next job, then sleep.
        let t0 = Instant::now();
        while shared.epoch.load(Ordering::Acquire) == seen && t0.elapsed() < SPIN {
            std::hint::spin_loop();
        }
        let job = {
            let mut s = lock(&shared.state);
            while shared.epoch.load(Ordering::Acquire) == seen && !s.shutdown {
                s.sleeping += 1;
                s = shared.start.wait(s).unwrap_or_else(|e| e.into_inner());
                s.sleeping -= 1;
            }
            if s.shutdown {
                return;
            }
            seen = shared.epoch.load(Ordering::Acquire);
            // A job already closed (its tasks all done by others) is not joined.
            let Some(job) = s.job else { continue };
            s.active += 1;
            job
        };
        // A worker's panic is recorded in `panicked`; the caller raises it.
        let _ = claim(shared, job, w);
        let mut s = lock(&shared.state);
        s.active -= 1;
        if s.active == 0 {
            shared.finished.notify_all();
        }
    }
}

/// A mutable slice shared by tasks that write disjoint parts of it.
pub(crate) struct Disjoint<'a, T = f32> {
    ptr: *mut T,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: tasks only touch disjoint ranges (the contract of `Disjoint::range`), and the
// elements may move between threads.
unsafe impl<T: Send> Sync for Disjoint<'_, T> {}

impl<'a, T> Disjoint<'a, T> {
    pub fn new(data: &'a mut [T]) -> Disjoint<'a, T> {
        Disjoint {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The first element, for tasks whose parts are not one run (strided blocks): each
    /// must write only its own elements, and within the `len` elements.
    pub fn ptr(&self) -> *mut T {
        self.ptr
    }

    /// The elements `start..start + len`.
    ///
    /// # Safety
    /// No two live ranges may overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range(&self, start: usize, len: usize) -> &'a mut [T] {
        assert!(start + len <= self.len, "Disjoint::range out of bounds");
        // SAFETY: in bounds (checked), and unaliased by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

impl<'a> Disjoint<'a, f32> {
    /// The elements `start..start + len`, shared.
    ///
    /// # Safety
    /// No live mutable range may overlap it.
    pub unsafe fn shared(&self, start: usize, len: usize) -> &'a [f32] {
        assert!(start + len <= self.len, "Disjoint::shared out of bounds");
        // SAFETY: in bounds (checked), and not written meanwhile by the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.add(start), len) }
    }

    /// The bytes `start..start + len` of the buffer, for ops that move the stored bytes
    /// of 8- and 16-bit elements (whose runs need not be whole words).
    ///
    /// # Safety
    /// No two live ranges (of bytes or elements) may overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes(&self, start: usize, len: usize) -> &'a mut [u8] {
        assert!(
            start + len <= self.len * size_of::<f32>(),
            "Disjoint::bytes out of bounds"
        );
        // SAFETY: in bounds (checked), and unaliased by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u8>().add(start), len) }
    }
}

/// A barrier for the tasks of one [`Pool::run`] job that must all run at once (one per
/// thread) and meet many times within it, as the steps of a recurrence shared among the
/// threads do: waking through the kernel at every step would cost more than a step.
/// Waiters spin, then yield the core (the machine may be shared). A task that panics
/// calls [`SpinBarrier::poison`] so that the others stop waiting instead of spinning
/// forever.
pub(crate) struct SpinBarrier {
    parties: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    poisoned: AtomicBool,
}

impl SpinBarrier {
    pub fn new(parties: usize) -> SpinBarrier {
        SpinBarrier {
            parties,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Waits until every party has arrived; `false` if the barrier was poisoned (stop).
    /// Everything a party wrote before arriving is visible to every party after.
    pub fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return !self.poisoned.load(Ordering::Acquire);
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Acquire) {
                return false;
            }
            if spins < 1 << 14 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        !self.poisoned.load(Ordering::Acquire)
    }

    /// Releases every waiter for good (a party failed).
    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_on_every_pool_size() {
        for threads in 1..=4 {
            let pool = Pool::new(threads);
            for tasks in [0, 1, 3, 17] {
                let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                pool.run(tasks, &|t, w| {
                    assert!(w < threads);
                    hits[t].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }

    /// Each thread runs its share front to back, and the others take what is left of it
    /// from the back: the caller, whose tasks are instant, takes the worker's share from
    /// the back while the worker is held in its first task until the caller has run
    /// seven (or takes all of it if the worker joins too late).
    #[test]
    fn threads_run_their_own_share_first_and_take_the_rest_from_the_back() {
        let pool = Pool::new(2);
        let runs = Mutex::new(Vec::new());
        let callers = AtomicUsize::new(0);
        pool.run(8, &|t, w| {
            let t0 = Instant::now();
            while w != 0
                && callers.load(Ordering::Acquire) < 7
                && t0.elapsed() < Duration::from_secs(10)
            {
                std::thread::yield_now();
            }
            lock_runs(&runs).push((t, w));
            if w == 0 {
                callers.fetch_add(1, Ordering::Release);
            }
        });
        let runs = lock_runs(&runs).clone();
        let by =
            |w: usize| -> Vec<usize> { runs.iter().filter(|r| r.1 == w).map(|r| r.0).collect() };
        let (caller, worker) = (by(0), by(1));
        assert_eq!(
            caller[..4],
            [0, 1, 2, 3],
            "the caller's share first: {runs:?}"
        );
        match worker[..] {
            [] => assert_eq!(caller[4..], [7, 6, 5, 4], "{runs:?}"),
            _ => assert_eq!((&caller[4..], &worker[..]), (&[7, 6, 5][..], &[4][..])),
        }
    }

    fn lock_runs<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn a_panicking_task_panics_the_caller_and_the_pool_survives() {
        let pool = Pool::new(3);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(8, &|t, _| assert!(t != 5, "task 5 fails"));
        }));
        assert!(r.is_err());
        let count = AtomicUsize::new(0);
        pool.run(6, &|_, _| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 6);
    }
}
