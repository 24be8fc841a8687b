//! A small fork-join pool for the kernels: `threads - 1` workers plus the calling thread.
//!
//! Why not rayon: dispatching a job here allocates nothing (`execute` must not allocate;
//! rayon's scopes box their jobs), and idle workers sleep on a condition variable right
//! away, where rayon spins for a while first — on a phone, or on a machine shared with
//! other processes, that spinning burns a core between inferences. Tasks are claimed
//! from an atomic counter, so uneven tasks balance themselves.
//!
//! [`Pool::run`] blocks until every task has finished, which is what makes lending the
//! borrowed closure to the workers sound; a panic in a task is re-raised on the caller
//! once all workers have let go of the closure.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// A task body: `(task index, worker index)`; worker 0 is the calling thread.
type Task<'a> = dyn Fn(usize, usize) + Sync + 'a;

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
    next: AtomicUsize,
}

struct State {
    epoch: u64,
    /// The current job, lifetime erased: valid while `running > 0` (see `Pool::run`).
    job: Option<&'static Task<'static>>,
    tasks: usize,
    /// Workers that have not finished the current job.
    running: usize,
    panicked: bool,
    shutdown: bool,
}

impl Pool {
    /// A pool running tasks on `threads` threads (the caller and `threads - 1` workers).
    pub fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                epoch: 0,
                job: None,
                tasks: 0,
                running: 0,
                panicked: false,
                shutdown: false,
            }),
            start: Condvar::new(),
            finished: Condvar::new(),
            next: AtomicUsize::new(0),
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
        // SAFETY: the erased reference is only used by workers between here and the
        // wait below, which returns only when every worker has finished with it (also
        // when a task panics: the caller's panic is caught until then).
        let job: &'static Task<'static> = unsafe { std::mem::transmute(f) };
        {
            let mut s = lock(&self.shared.state);
            self.shared.next.store(0, Ordering::Relaxed);
            s.job = Some(job);
            s.tasks = tasks;
            s.running = self.workers.len();
            s.panicked = false;
            s.epoch += 1;
        }
        self.shared.start.notify_all();
        let mine = catch_unwind(AssertUnwindSafe(|| claim(&self.shared, tasks, job, 0)));
        let mut s = lock(&self.shared.state);
        while s.running > 0 {
            s = self
                .shared
                .finished
                .wait(s)
                .unwrap_or_else(|e| e.into_inner());
        }
        s.job = None;
        let worker_panicked = s.panicked;
        drop(s);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        assert!(!worker_panicked, "a CPU delegate worker panicked");
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.start.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Claims and runs tasks until none are left.
fn claim(shared: &Shared, tasks: usize, job: &Task<'_>, w: usize) {
    loop {
        let t = shared.next.fetch_add(1, Ordering::Relaxed);
        if t >= tasks {
            return;
        }
        job(t, w);
    }
}

fn worker(shared: &Shared, w: usize) {
    let mut seen = 0;
    loop {
        let (job, tasks) = {
            let mut s = lock(&shared.state);
            while s.epoch == seen && !s.shutdown {
                s = shared.start.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.shutdown {
                return;
            }
            seen = s.epoch;
            (s.job.expect("a job with a new epoch"), s.tasks)
        };
        let r = catch_unwind(AssertUnwindSafe(|| claim(shared, tasks, job, w)));
        let mut s = lock(&shared.state);
        s.panicked |= r.is_err();
        s.running -= 1;
        if s.running == 0 {
            shared.finished.notify_all();
        }
    }
}

/// A mutable slice shared by tasks that write disjoint parts of it.
pub(crate) struct Disjoint<'a> {
    ptr: *mut f32,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: tasks only touch disjoint ranges (the contract of `Disjoint::range`).
unsafe impl Sync for Disjoint<'_> {}

impl<'a> Disjoint<'a> {
    pub fn new(data: &'a mut [f32]) -> Disjoint<'a> {
        Disjoint {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// The elements `start..start + len`.
    ///
    /// # Safety
    /// No two live ranges may overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range(&self, start: usize, len: usize) -> &'a mut [f32] {
        assert!(start + len <= self.len, "Disjoint::range out of bounds");
        // SAFETY: in bounds (checked), and unaliased by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
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
