//! Convex partitioning of a Baton graph across backends, with a reason for every node.
//!
//! Given a graph, every backend's per-node support answers and a [`Policy`], [`partition`]
//! groups nodes into [`Partition`]s, each compiled and run by one backend, and leaves the
//! rest to the host. [`PartitionPlan::schedule`] orders the result for execution and
//! [`PartitionPlan::render`] explains it to a person.
//!
//! # How, and why this way
//!
//! 1. **Assign.** Each node goes to the first backend in `policy.priority` that supports it
//!    and that its pin (if any) allows. Preference is a user decision, so it is honoured
//!    node by node before any structural concern; structure can only push a node *down*
//!    the list, never up. Control flow (If, Loop) is the exception: it goes to the host
//!    whatever the backends answer or a pin says, since its subgraphs are whole graphs that
//!    the host plans on their own.
//! 2. **Merge along edges.** Nodes are visited in topological order and merged into the
//!    groups of their same-backend producers. Most models are long chains on one backend,
//!    and this pass turns them into one group cheaply: while visiting node `v`, every
//!    group that holds a node after `v` is still a singleton, so the cycle check (a
//!    depth-first search for a path leaving one group and entering the other) never needs
//!    to look past `v`.
//! 3. **Merge anything mergeable.** Every group is then offered every other group of its
//!    backend, adjacent or not: two parallel branches on one backend belong in one
//!    partition, since each partition costs a dispatch and a copy at its borders. Two groups
//!    may merge when no path of the contracted graph runs from one to the other through a
//!    third group; such a path would become a cycle, i.e. a partition that needs its own
//!    output as an input. One search from a group finds everything it may not merge with,
//!    so each attempt costs one pass over the graph. A group is re-offered after it grows;
//!    a pair that failed stays failed while neither side changes (the third group on the
//!    path between them is still there), so when every group has been offered once since
//!    it last grew, no two partitions of a backend can be merged: the result is maximal.
//!    Adjacent partners are preferred, which keeps producer/consumer pairs together when
//!    the choice matters.
//! 4. **Minimum size.** Partitions below `policy.min_partition_size` are dissolved: a tiny
//!    partition costs more in transfers than it saves. Their nodes move to their next
//!    supporting backend (or the host) and merging (step 3) runs again over all groups,
//!    because splitting a group can break the very path that kept two other groups apart.
//!    Backends are judged one at a time in priority order, since a small partition of a
//!    lower backend may still grow from the nodes that a higher one gives up. Nodes only
//!    move down their list and a judged backend never receives nodes again, so this ends
//!    after at most one round per backend.
//! 5. **Maximum count.** If more than `policy.max_partitions` remain, the largest are
//!    kept and the others go to the host (they are not retried on lower backends), then
//!    step 3 runs once more for the same reason as in step 4.
//!
//! Groups live in a union-find over nodes in its quick-find form: every node knows its
//! group directly and a union relabels the smaller group (`O(n log n)` over a whole run),
//! so the reachability searches read groups without mutating anything. Every step only
//! merges groups whose merge keeps the contracted graph acyclic, or splits groups (which
//! never creates a cycle), so every partition is convex and the plan can be scheduled.
//!
//! Every decision leaves a sentence in the node's [`NodeExplanation`], so a user can see
//! why a node did not run where they expected.

mod assign;
mod merge;
mod plan;

use baton_delegate_api::{Graph, IrError, NodeId, OpKind, Support};

/// Where a pin sends the nodes it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A backend by name; it must be in [`Policy::priority`].
    Backend(String),
    /// The host: the node is never delegated.
    Host,
}

/// A pin matches nodes by op (`op`), by node name (`node`), or both; it forces them to a
/// backend or to the host.
///
/// When several pins match a node, the first one in [`Policy::pins`] wins. A node pinned to
/// a backend that declines it runs on the host (with that backend's reason); it is never
/// moved to another backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub op: Option<OpKind>,
    pub node: Option<String>,
    pub target: Target,
}

impl Pin {
    /// A pin matching every node of op `op`.
    pub fn op(op: OpKind, target: Target) -> Pin {
        Pin {
            op: Some(op),
            node: None,
            target,
        }
    }

    /// A pin matching the node called `name`.
    pub fn node(name: &str, target: Target) -> Pin {
        Pin {
            op: None,
            node: Some(name.to_string()),
            target,
        }
    }

    /// Whether the pin applies to a node of op `op` called `name`.
    pub fn matches(&self, op: OpKind, name: &str) -> bool {
        self.op.is_none_or(|o| o == op) && self.node.as_deref().is_none_or(|n| n == name)
    }
}

/// How to partition: which backends, in which order, and the limits on the result.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Backends in order of preference; a backend absent here is never used.
    pub priority: Vec<String>,
    /// Partitions with fewer nodes are dissolved: their nodes go to the next backend in
    /// priority that supports them, else to the host. Merging runs again afterwards, so
    /// moved nodes join that backend's partitions where they can (and may in turn be
    /// dissolved there). 0 or 1 means no minimum.
    pub min_partition_size: usize,
    /// Keep only the largest N partitions (by node count, ties broken by the earlier first
    /// node); the nodes of the others run on the host.
    pub max_partitions: Option<usize>,
    /// Forced placements; the first matching pin wins.
    pub pins: Vec<Pin>,
}

/// One backend's answers to "do you support this node?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendAnswers {
    pub backend: String,
    /// `answers[i]` is for `graph.nodes[i]`.
    pub answers: Vec<Support>,
}

/// A convex set of nodes run by one backend as one compiled unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub backend: String,
    /// Ascending, hence in topological order.
    pub nodes: Vec<NodeId>,
}

/// Where a node runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// In `partitions[partition]`, run by `backend`.
    Delegated { backend: String, partition: usize },
    /// On the host.
    Host,
}

/// Where a node runs and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeExplanation {
    pub node: NodeId,
    pub decision: Decision,
    /// Sentences for a user. For a delegated node the first says which backend took it
    /// and the others why each backend of higher priority did not; for a host node, one
    /// per backend, or only the pin that sent it there.
    pub reasons: Vec<String>,
}

/// The result of [`partition`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionPlan {
    /// Ordered by first node.
    pub partitions: Vec<Partition>,
    /// One per graph node, in node order.
    pub nodes: Vec<NodeExplanation>,
}

/// One step of a [`PartitionPlan::schedule`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Run `partitions[i]`.
    Partition(usize),
    /// Run this node on the host.
    Node(NodeId),
}

/// Inputs that cannot be partitioned.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum PartitionError {
    // Not `#[from]`: that would make the IR error a source as well as part of the
    // message, and a reporter printing the chain would say it twice.
    #[error("cannot partition an invalid graph: {0}")]
    InvalidGraph(IrError),
    #[error("backend '{backend}' gave {got} support answers, but the graph has {expected} nodes")]
    AnswerCount {
        backend: String,
        got: usize,
        expected: usize,
    },
    #[error("backend '{0}' has more than one set of support answers")]
    DuplicateAnswers(String),
    #[error("backend '{0}' is listed more than once in the priority list")]
    DuplicatePriority(String),
    #[error("backend '{0}' is in the priority list, but no support answers were given for it")]
    MissingAnswers(String),
    #[error("pin {index} names node '{node}', which is not in the graph")]
    UnknownPinNode { index: usize, node: String },
    #[error("pin {index} sends nodes to backend '{backend}', which is not in the priority list")]
    PinBackendNotInPriority { index: usize, backend: String },
    #[error("pin {index} gives neither an op nor a node name, so it would match every node")]
    EmptyPin { index: usize },
}

impl From<IrError> for PartitionError {
    fn from(e: IrError) -> PartitionError {
        PartitionError::InvalidGraph(e)
    }
}

/// Partitions `graph` between the backends of `policy.priority` and the host.
///
/// `answers` holds one entry per backend (entries for backends not in the priority list
/// are allowed: they only show up in the explanations). See the crate documentation for
/// the algorithm.
pub fn partition(
    graph: &Graph,
    answers: &[BackendAnswers],
    policy: &Policy,
) -> Result<PartitionPlan, PartitionError> {
    graph.validate()?;
    let mut placement = assign::Placement::new(graph, answers, policy)?;
    let dag = merge::Dag::new(graph);

    let mut groups = merge::Groups::singletons(&placement.backend);
    groups.merge_along_edges(&dag);
    groups.merge_all(&dag);
    enforce_min_size(&dag, &mut placement, &mut groups, policy.min_partition_size);
    if let Some(max) = policy.max_partitions {
        enforce_max_count(&dag, &mut placement, &mut groups, max);
    }
    Ok(build_plan(&placement, groups.partitions()))
}

/// Step 4: dissolves partitions of fewer than `min` nodes, moving their nodes down their
/// priority lists, and merges again.
fn enforce_min_size(
    dag: &merge::Dag,
    placement: &mut assign::Placement,
    groups: &mut merge::Groups,
    min: usize,
) {
    loop {
        let parts = groups.partitions();
        let too_small = |nodes: &Vec<NodeId>| nodes.len() < min;
        // Only the most preferred backend with small partitions is judged in a round:
        // a lower backend's partition may still grow from the nodes dissolved here.
        let Some(judged) = parts.iter().filter(|p| too_small(&p.1)).map(|p| p.0).min() else {
            break;
        };
        let (small, kept): (Vec<_>, Vec<_>) = parts
            .into_iter()
            .partition(|(b, nodes)| *b == judged && too_small(nodes));
        for (backend, nodes) in &small {
            let why = format!(
                "{} supports it, but its partition of {} is below min_partition_size {}",
                placement.backend_name(*backend),
                count(nodes.len(), "node"),
                min
            );
            for &n in nodes {
                placement.move_down(n, why.clone());
            }
        }
        *groups = merge::Groups::regroup(&placement.backend, &kept);
        groups.merge_all(dag);
    }
}

/// Step 5: sends the nodes of all but the `max` largest partitions to the host, and
/// merges again.
fn enforce_max_count(
    dag: &merge::Dag,
    placement: &mut assign::Placement,
    groups: &mut merge::Groups,
    max: usize,
) {
    let mut parts = groups.partitions();
    if parts.len() > max {
        // Largest first; among equals the one that starts earlier.
        parts.sort_by_key(|(_, nodes)| (std::cmp::Reverse(nodes.len()), nodes[0]));
        for (backend, nodes) in &parts[max..] {
            let why = format!(
                "{} supports it, but dropped: max_partitions {max} keeps larger partitions",
                placement.backend_name(*backend)
            );
            for &n in nodes {
                placement.drop_to_host(n, why.clone());
            }
        }
        *groups = merge::Groups::regroup(&placement.backend, &parts[..max]);
        groups.merge_all(dag);
    }
}

/// Turns the final groups into the public plan, partitions ordered by first node.
fn build_plan(placement: &assign::Placement, groups: Vec<(usize, Vec<NodeId>)>) -> PartitionPlan {
    let mut decisions = vec![Decision::Host; placement.backend.len()];
    let partitions: Vec<Partition> = groups
        .into_iter()
        .enumerate()
        .map(|(index, (backend, nodes))| {
            let name = placement.backend_name(backend).to_string();
            for &n in &nodes {
                decisions[n] = Decision::Delegated {
                    backend: name.clone(),
                    partition: index,
                };
            }
            Partition {
                backend: name,
                nodes,
            }
        })
        .collect();
    let nodes = decisions
        .into_iter()
        .enumerate()
        .map(|(node, decision)| NodeExplanation {
            node,
            decision,
            reasons: placement.reasons(node),
        })
        .collect();
    PartitionPlan { partitions, nodes }
}

/// `1 node`, `3 nodes`.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
