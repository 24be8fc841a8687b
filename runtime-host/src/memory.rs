//! Memory planning: every tensor that crosses a step boundary gets an offset in one arena,
//! decided before the first run from the tensors' lifetimes, so a run allocates no tensor
//! memory.
//!
//! Placement is greedy by size (largest first, each at the lowest offset that overlaps no
//! already-placed tensor whose lifetime intersects its own), the heuristic TFLite's arena
//! planner and others use: near-optimal on the chain-like graphs of inference and
//! `O(n^2)` in the number of tensors, which is small. Beside the arena size the plan
//! reports the naive sum (one buffer per tensor) and the lower bound (the most bytes live
//! at any one step), so its quality is visible.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use baton_delegate_api::ir::AlignedBytes;
use baton_delegate_api::{Graph, NodeId, TensorId};
use baton_partitioner::{PartitionPlan, Step};

/// Alignment of every arena offset: a cache line and the widest SIMD load.
pub const ALIGN: usize = 64;

/// A tensor to place: its size and the steps during which it must stay intact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    pub bytes: usize,
    /// First step that writes it (0 for graph inputs).
    pub first: usize,
    /// Last step that reads it (inclusive).
    pub last: usize,
}

/// The result of planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaPlan {
    /// Offset of each tensor, in input order.
    pub offsets: Vec<usize>,
    /// Bytes the arena needs.
    pub arena_size: usize,
    /// Bytes one buffer per tensor would need.
    pub naive_size: usize,
    /// The most bytes live at any one step: no plan can use less.
    pub lower_bound: usize,
}

/// Places `tensors` in one arena.
pub fn plan(tensors: &[Lifetime]) -> ArenaPlan {
    let size = |t: &Lifetime| t.bytes.next_multiple_of(ALIGN);
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(size(&tensors[i])), tensors[i].first, i));

    let mut offsets = vec![0; tensors.len()];
    let mut placed: Vec<usize> = Vec::new();
    for &i in &order {
        let t = &tensors[i];
        let need = size(t);
        // Intervals of memory already taken during t's lifetime, sorted by offset.
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|&&j| overlaps(t, &tensors[j]))
            .map(|&j| (offsets[j], offsets[j] + size(&tensors[j])))
            .collect();
        busy.sort_unstable();
        let mut candidate = 0;
        for (start, end) in busy {
            if start >= candidate + need {
                break;
            }
            candidate = candidate.max(end);
        }
        offsets[i] = candidate;
        placed.push(i);
    }
    let arena_size = tensors
        .iter()
        .zip(&offsets)
        .map(|(t, &o)| o + size(t))
        .max()
        .unwrap_or(0);
    evaluate(tensors, offsets, arena_size)
}

/// Whether `offsets` place `tensors` inside an arena of `arena_size` bytes with no two
/// tensors live at the same step sharing a byte. A layout planned for larger tensors with
/// the same lifetimes always passes; the check makes reusing one safe whatever changed.
pub fn is_valid(tensors: &[Lifetime], offsets: &[usize], arena_size: usize) -> bool {
    if offsets.len() != tensors.len() {
        return false;
    }
    let fits = tensors
        .iter()
        .zip(offsets)
        .all(|(t, &o)| o % ALIGN == 0 && o + t.bytes <= arena_size);
    fits && (0..tensors.len()).all(|i| {
        (0..i).all(|j| {
            let (a, b) = (&tensors[i], &tensors[j]);
            !overlaps(a, b)
                || offsets[i] + a.bytes <= offsets[j]
                || offsets[j] + b.bytes <= offsets[i]
        })
    })
}

/// The plan record of a given placement: its size next to the naive sum and lower bound.
pub fn evaluate(tensors: &[Lifetime], offsets: Vec<usize>, arena_size: usize) -> ArenaPlan {
    let size = |t: &Lifetime| t.bytes.next_multiple_of(ALIGN);
    let naive_size = tensors.iter().map(size).sum();
    let steps = tensors.iter().map(|t| t.last + 1).max().unwrap_or(0);
    let lower_bound = (0..steps)
        .map(|s| {
            tensors
                .iter()
                .filter(|t| t.first <= s && s <= t.last)
                .map(size)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    ArenaPlan {
        offsets,
        arena_size,
        naive_size,
        lower_bound,
    }
}

fn overlaps(a: &Lifetime, b: &Lifetime) -> bool {
    a.first <= b.last && b.first <= a.last
}

/// The tensors that need an arena slot (neither constant nor living inside one partition),
/// with their lifetimes over the plan's schedule, in the order the session places them.
pub fn arena_tensors(graph: &Graph, plan: &PartitionPlan) -> (Vec<TensorId>, Vec<Lifetime>) {
    let shapes: Vec<Vec<usize>> = graph
        .tensors
        .iter()
        .map(|t| t.static_shape().expect("specialized"))
        .collect();
    let schedule = plan.schedule(graph);
    let nt = graph.tensors.len();
    let mut first: Vec<Option<usize>> = vec![None; nt];
    let mut last: Vec<Option<usize>> = vec![None; nt];
    let mut in_partition: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for (pi, p) in plan.partitions.iter().enumerate() {
        for &n in &p.nodes {
            in_partition[n] = Some(pi);
        }
    }
    let step_nodes = |s: &Step| -> Vec<NodeId> {
        match s {
            Step::Partition(p) => plan.partitions[*p].nodes.clone(),
            Step::Node(n) => vec![*n],
        }
    };
    for &i in &graph.inputs {
        first[i] = Some(0);
        last[i] = Some(0);
    }
    for (si, s) in schedule.iter().enumerate() {
        for n in step_nodes(s) {
            for &o in &graph.nodes[n].outputs {
                first[o] = Some(si);
                last[o] = Some(last[o].unwrap_or(si).max(si));
            }
            for &i in &graph.nodes[n].inputs {
                last[i] = Some(last[i].unwrap_or(si).max(si));
            }
        }
    }
    let end = schedule.len().saturating_sub(1);
    for &o in &graph.outputs {
        last[o] = Some(end);
    }
    let consumers = graph.consumers();
    let producers = graph.producers();
    let mut lifetimes = Vec::new();
    let mut placed = Vec::new();
    for t in 0..nt {
        if graph.tensors[t].is_const() {
            continue;
        }
        let home = producers[t].and_then(|p| in_partition[p]);
        let internal = home.is_some()
            && !graph.outputs.contains(&t)
            && consumers[t].iter().all(|&c| in_partition[c] == home);
        if internal || first[t].is_none() {
            continue;
        }
        lifetimes.push(Lifetime {
            bytes: shapes[t].iter().product::<usize>() * graph.tensors[t].dtype.size(),
            first: first[t].unwrap_or(0),
            last: last[t].unwrap_or(0),
        });
        placed.push(t);
    }
    (placed, lifetimes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_chain_reuses_memory() {
        // a -> b -> c -> d, each 1 KiB: two buffers suffice.
        let t: Vec<Lifetime> = (0..4)
            .map(|i| Lifetime {
                bytes: 1024,
                first: i,
                last: i + 1,
            })
            .collect();
        let p = plan(&t);
        assert_eq!(p.arena_size, 2048);
        assert_eq!(p.naive_size, 4096);
        assert_eq!(p.lower_bound, 2048);
    }

    proptest! {
        #[test]
        fn live_tensors_never_share_bytes(
            specs in prop::collection::vec((1usize..5000, 0usize..20, 0usize..6), 0..40)
        ) {
            let t: Vec<Lifetime> = specs
                .iter()
                .map(|&(bytes, first, len)| Lifetime { bytes, first, last: first + len })
                .collect();
            let p = plan(&t);
            for i in 0..t.len() {
                prop_assert_eq!(p.offsets[i] % ALIGN, 0);
                prop_assert!(p.offsets[i] + t[i].bytes <= p.arena_size);
                for j in 0..i {
                    if overlaps(&t[i], &t[j]) {
                        let (a0, a1) = (p.offsets[i], p.offsets[i] + t[i].bytes);
                        let (b0, b1) = (p.offsets[j], p.offsets[j] + t[j].bytes);
                        prop_assert!(a1 <= b0 || b1 <= a0, "tensors {} and {} overlap", i, j);
                    }
                }
            }
            prop_assert!(p.lower_bound <= p.arena_size);
            prop_assert!(p.arena_size <= p.naive_size);
        }
    }
}

/// The buffer a session's arena tensors live in, as a shared handle.
///
/// The delegates' tensor views are made once, at load, as pointers into this buffer, so the
/// buffer must stay where it is for as long as any session using it lives: the handle owns
/// it (sessions of one bounded model share one, each holding a clone) and never moves or
/// resizes it. A run holds the lock for its whole duration, which is what makes the views'
/// use of the bytes exclusive, whichever session sharing the buffer runs.
#[derive(Clone)]
pub struct Arena(Arc<Mutex<AlignedBytes>>);

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // try_lock: printing during a run must not wait for the run.
        match self.0.try_lock() {
            Ok(b) => write!(f, "Arena({} bytes)", b.len()),
            Err(_) => write!(f, "Arena(in use)"),
        }
    }
}

impl Arena {
    /// A handle owning `bytes`.
    pub fn new(bytes: AlignedBytes) -> Arena {
        Arena(Arc::new(Mutex::new(bytes)))
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the buffer is empty (a model with no arena tensors).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Exclusive access to the bytes, for one run. A run that panicked leaves the bytes as
    /// they were; the next run overwrites what it reads, so the poison is ignored.
    pub fn lock(&self) -> MutexGuard<'_, AlignedBytes> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
