//! Growing groups of same-backend nodes without ever making the contracted graph cyclic.
//!
//! See the crate documentation for why the passes are what they are.

use baton_delegate_api::{Graph, NodeId};

/// The node-level dataflow graph: an edge `u -> v` when `v` reads a tensor `u` writes.
pub(crate) struct Dag {
    succ: Vec<Vec<NodeId>>,
    pred: Vec<Vec<NodeId>>,
}

impl Dag {
    /// The edges of `graph`, each listed once.
    pub(crate) fn new(graph: &Graph) -> Dag {
        let producers = graph.producers();
        let n = graph.nodes.len();
        let mut dag = Dag {
            succ: vec![Vec::new(); n],
            pred: vec![Vec::new(); n],
        };
        for (v, node) in graph.nodes.iter().enumerate() {
            for &t in &node.inputs {
                if let Some(u) = producers[t] {
                    if !dag.pred[v].contains(&u) {
                        dag.pred[v].push(u);
                        dag.succ[u].push(v);
                    }
                }
            }
        }
        dag
    }
}

/// A partition of the nodes into groups: one per host node, one or more per backend.
///
/// A union-find in quick-find form: `group[n]` is the representative of `n`'s group and
/// unions relabel the smaller side.
pub(crate) struct Groups {
    /// Each node's group, named by its representative node.
    group: Vec<usize>,
    /// At each representative, the members of its group (unordered).
    members: Vec<Vec<NodeId>>,
    /// At each representative, the smallest member.
    first: Vec<NodeId>,
    /// Each node's backend (an index into the priority list), `None` for the host.
    backend: Vec<Option<usize>>,
    /// Scratch marks for the searches: groups one edge away ...
    near: Marks,
    /// ... and groups two or more edges away.
    far: Marks,
}

impl Groups {
    /// Every node in a group of its own.
    pub(crate) fn singletons(backend: &[Option<usize>]) -> Groups {
        let n = backend.len();
        Groups {
            group: (0..n).collect(),
            members: (0..n).map(|m| vec![m]).collect(),
            first: (0..n).collect(),
            backend: backend.to_vec(),
            near: Marks::new(n),
            far: Marks::new(n),
        }
    }

    /// Every node of `backend` alone, except that each of `kept` (which must be convex
    /// and, together, acyclic: earlier partitions) is one group again.
    pub(crate) fn regroup(backend: &[Option<usize>], kept: &[(usize, Vec<NodeId>)]) -> Groups {
        let mut groups = Groups::singletons(backend);
        for (b, nodes) in kept {
            for &m in nodes {
                debug_assert_eq!(groups.backend[m], Some(*b));
                let (a, c) = (groups.group[nodes[0]], groups.group[m]);
                if a != c {
                    groups.union(a, c);
                }
            }
        }
        groups
    }

    /// The groups of backends, as `(backend, nodes ascending)`, ordered by first node.
    pub(crate) fn partitions(&self) -> Vec<(usize, Vec<NodeId>)> {
        let mut parts: Vec<(usize, Vec<NodeId>)> = (0..self.group.len())
            .filter(|&g| self.group[g] == g)
            .filter_map(|g| {
                let backend = self.backend[g]?;
                let mut nodes = self.members[g].clone();
                nodes.sort_unstable();
                Some((backend, nodes))
            })
            .collect();
        parts.sort_by_key(|(_, nodes)| nodes[0]);
        parts
    }

    /// Pass 2 of the algorithm: visits nodes in topological order and merges each into
    /// the groups of its same-backend producers where that keeps the contracted graph
    /// acyclic.
    ///
    /// Must run on singletons. While node `v` is visited, every group holding a node after
    /// `v` is a singleton whose edges only lead further on, so the cycle searches ignore
    /// nodes after `v`.
    pub(crate) fn merge_along_edges(&mut self, dag: &Dag) {
        for v in 0..self.group.len() {
            if self.backend[v].is_none() {
                continue;
            }
            for &p in &dag.pred[v] {
                let (a, b) = (self.group[p], self.group[v]);
                if a != b && self.backend[p] == self.backend[v] && !self.would_cycle(dag, a, b, v) {
                    self.union(a, b);
                }
            }
        }
    }

    /// Pass 3: offers every backend group every other group of its backend, until no two
    /// can be merged. Merges with an adjacent group (an edge between them) are preferred,
    /// then the partner that starts earliest.
    pub(crate) fn merge_all(&mut self, dag: &Dag) {
        let reps: Vec<usize> = (0..self.group.len())
            .filter(|&g| self.group[g] == g && self.backend[g].is_some())
            .collect();
        for rep in reps {
            if self.group[rep] != rep {
                continue; // absorbed by an earlier group, and offered as part of it
            }
            let mut a = rep;
            while let Some(b) = self.partner(dag, a) {
                a = self.union(a, b);
            }
        }
    }

    /// Whether merging groups `a` and `b` would create a cycle: whether a path runs from
    /// one to the other through a third group. Nodes above `limit` are not searched.
    fn would_cycle(&mut self, dag: &Dag, a: usize, b: usize, limit: usize) -> bool {
        self.near.clear();
        self.far.clear();
        if self.search_far(&dag.succ, a, limit, Some(b)) {
            return true;
        }
        self.near.clear();
        self.far.clear();
        self.search_far(&dag.succ, b, limit, Some(a))
    }

    /// A group of `a`'s backend that `a` can merge with, if any.
    fn partner(&mut self, dag: &Dag, a: usize) -> Option<usize> {
        let backend = self.backend[a]?;
        let candidates: Vec<usize> = (0..self.group.len())
            .filter(|&g| g != a && self.group[g] == g && self.backend[g] == Some(backend))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        // One set of marks serves both directions: in an acyclic contracted graph nothing
        // is both before and after `a`.
        self.near.clear();
        self.far.clear();
        self.search_far(&dag.succ, a, usize::MAX, None);
        self.search_far(&dag.pred, a, usize::MAX, None);
        candidates
            .into_iter()
            .filter(|&g| !self.far.contains(g))
            .min_by_key(|&g| (!self.near.contains(g), self.first[g]))
    }

    /// Marks in `far` every group reachable from group `from` along `edges` through at
    /// least one other group, and in `near` the groups one edge away; never enters nodes
    /// above `limit`. Returns `true` as soon as `target` is marked far.
    fn search_far(
        &mut self,
        edges: &[Vec<NodeId>],
        from: usize,
        limit: usize,
        target: Option<usize>,
    ) -> bool {
        let Groups {
            group,
            members,
            near,
            far,
            ..
        } = self;
        let mut first_hop = Vec::new();
        for &m in &members[from] {
            for &t in &edges[m] {
                let g = group[t];
                if t <= limit && g != from && near.insert(g) {
                    first_hop.push(g);
                }
            }
        }
        let mut stack = Vec::new();
        let mut expand = |g: usize, stack: &mut Vec<usize>| -> bool {
            for &m in &members[g] {
                for &t in &edges[m] {
                    let h = group[t];
                    if t <= limit && h != g && far.insert(h) {
                        debug_assert_ne!(h, from, "the contracted graph has a cycle");
                        if Some(h) == target {
                            return true;
                        }
                        stack.push(h);
                    }
                }
            }
            false
        };
        for g in first_hop {
            if expand(g, &mut stack) {
                return true;
            }
        }
        while let Some(g) = stack.pop() {
            if expand(g, &mut stack) {
                return true;
            }
        }
        false
    }

    /// Merges groups `a` and `b` (distinct representatives); returns the new representative.
    fn union(&mut self, a: usize, b: usize) -> usize {
        let (big, small) = if self.members[a].len() >= self.members[b].len() {
            (a, b)
        } else {
            (b, a)
        };
        let moved = std::mem::take(&mut self.members[small]);
        for &m in &moved {
            self.group[m] = big;
        }
        self.members[big].extend(moved);
        self.first[big] = self.first[big].min(self.first[small]);
        big
    }
}

/// A set of indices that clears in constant time.
struct Marks {
    stamp: Vec<u32>,
    now: u32,
}

impl Marks {
    fn new(n: usize) -> Marks {
        Marks {
            stamp: vec![0; n],
            now: 1,
        }
    }

    fn clear(&mut self) {
        if self.now == u32::MAX {
            self.stamp.fill(0);
            self.now = 0;
        }
        self.now += 1;
    }

    /// Adds `i`; whether it was absent.
    fn insert(&mut self, i: usize) -> bool {
        let fresh = self.stamp[i] != self.now;
        self.stamp[i] = self.now;
        fresh
    }

    fn contains(&self, i: usize) -> bool {
        self.stamp[i] == self.now
    }
}
