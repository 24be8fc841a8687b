//! Which backend each node is on, and the sentences explaining how it got there.
//!
//! Every node walks down the priority list: it sits on the first backend that supports it
//! (and that its pin allows), and each later step of the partitioner that rejects it
//! (partition too small, partition dropped) moves it further down. Each backend it passes
//! leaves a sentence in its history, so the explanation is written as the decisions are
//! made rather than reconstructed afterwards.

use std::collections::HashSet;

use baton_delegate_api::{Graph, NodeId, Support};

use crate::{BackendAnswers, PartitionError, Pin, Policy, Target};

/// Node placements during partitioning.
pub(crate) struct Placement {
    /// The backends of the priority list, in order; placements index into it.
    names: Vec<String>,
    /// `standing[node][backend]`: whether the backend may take the node, or why not.
    standing: Vec<Vec<Standing>>,
    /// `cursor[node]`: the first backend not yet passed over.
    cursor: Vec<usize>,
    /// `backend[node]`: the current backend, `None` for the host.
    pub(crate) backend: Vec<Option<usize>>,
    /// Why each backend passed over did not take the node, in priority order.
    history: Vec<Vec<String>>,
    /// For each node, what backends outside the priority list said (shown for host nodes).
    outside: Vec<Vec<String>>,
    /// Nodes a pin sends to the host: their one reason is the pin.
    pinned_to_host: Vec<bool>,
    /// Nodes that only the host can run (control flow), with the reason; no backend is
    /// considered for them, whatever it answered or a pin says.
    host_only: Vec<Option<String>>,
}

/// Whether one backend may take one node.
enum Standing {
    Supported,
    /// Declined by the backend or excluded by a pin; the sentence says which.
    Refused(String),
}

impl Placement {
    /// Checks the inputs and places every node on its first acceptable backend.
    pub(crate) fn new(
        graph: &Graph,
        answers: &[BackendAnswers],
        policy: &Policy,
    ) -> Result<Placement, PartitionError> {
        let by_backend = check_answers(graph, answers, policy)?;
        check_pins(graph, policy)?;

        let nodes = graph.nodes.len();
        let mut placement = Placement {
            names: policy.priority.clone(),
            standing: Vec::with_capacity(nodes),
            cursor: vec![0; nodes],
            backend: vec![None; nodes],
            history: vec![Vec::new(); nodes],
            outside: vec![Vec::new(); nodes],
            pinned_to_host: vec![false; nodes],
            host_only: vec![None; nodes],
        };
        for (n, node) in graph.nodes.iter().enumerate() {
            if node.op.is_control_flow() {
                let why = format!(
                    "{} is control flow, which always runs on the host (its subgraphs are planned as graphs of their own)",
                    node.op
                );
                placement.standing.push(
                    policy
                        .priority
                        .iter()
                        .map(|name| Standing::Refused(format!("{name} not considered: {why}")))
                        .collect(),
                );
                placement.host_only[n] = Some(why);
                placement.cursor[n] = policy.priority.len();
                continue;
            }
            let pin = policy.pins.iter().find(|p| p.matches(node.op, &node.name));
            placement.pinned_to_host[n] = pin.is_some_and(|p| p.target == Target::Host);
            let standing = policy
                .priority
                .iter()
                .zip(&by_backend)
                .map(|(name, answers)| standing(name, &answers[n], pin))
                .collect();
            placement.standing.push(standing);
            placement.outside[n] = answers
                .iter()
                .filter(|a| !policy.priority.contains(&a.backend))
                .map(|a| match &a.answers[n] {
                    Support::Yes => {
                        format!("{} supports it, but is not in the priority list", a.backend)
                    }
                    no => declined(&a.backend, no),
                })
                .collect();
            placement.advance(n);
        }
        Ok(placement)
    }

    /// The name of backend `b` (an index into the priority list).
    pub(crate) fn backend_name(&self, b: usize) -> &str {
        &self.names[b]
    }

    /// Rejects node `n` from its current backend for reason `why`; it moves to the next
    /// backend that supports it, or to the host.
    pub(crate) fn move_down(&mut self, n: NodeId, why: String) {
        self.history[n].push(why);
        self.cursor[n] += 1;
        self.advance(n);
    }

    /// Sends node `n` to the host for reason `why`, without trying lower backends. Their
    /// standing is still recorded, so the explanation covers every backend.
    pub(crate) fn drop_to_host(&mut self, n: NodeId, why: String) {
        self.history[n].push(why);
        for b in self.cursor[n] + 1..self.names.len() {
            let sentence = match &self.standing[n][b] {
                Standing::Supported => format!(
                    "{} supports it, but was not tried: nodes of partitions dropped by max_partitions go to the host",
                    self.names[b]
                ),
                Standing::Refused(why) => why.clone(),
            };
            self.history[n].push(sentence);
        }
        self.cursor[n] = self.names.len();
        self.backend[n] = None;
    }

    /// The explanation of node `n`'s current placement.
    pub(crate) fn reasons(&self, n: NodeId) -> Vec<String> {
        match self.backend[n] {
            Some(b) => {
                let mut reasons = vec![format!("taken by {} (priority {})", self.names[b], b + 1)];
                reasons.extend(self.history[n].iter().cloned());
                reasons
            }
            None if self.host_only[n].is_some() => {
                vec![self.host_only[n].clone().unwrap_or_default()]
            }
            None if self.pinned_to_host[n] => vec!["pinned to host by config".to_string()],
            None => {
                let mut reasons = self.history[n].clone();
                reasons.extend(self.outside[n].iter().cloned());
                if reasons.is_empty() {
                    reasons.push("no backend is in the priority list".to_string());
                }
                reasons
            }
        }
    }

    /// Places node `n` on the first backend from its cursor on that may take it, recording
    /// why each one before it may not; the host if none may.
    fn advance(&mut self, n: NodeId) {
        while let Some(standing) = self.standing[n].get(self.cursor[n]) {
            match standing {
                Standing::Supported => {
                    self.backend[n] = Some(self.cursor[n]);
                    return;
                }
                Standing::Refused(why) => {
                    self.history[n].push(why.clone());
                    self.cursor[n] += 1;
                }
            }
        }
        self.backend[n] = None;
    }
}

/// Backend `name`'s standing for a node it answered `answer` for, under `pin`.
fn standing(name: &str, answer: &Support, pin: Option<&Pin>) -> Standing {
    match pin.map(|p| &p.target) {
        Some(Target::Host) => {
            return Standing::Refused(format!("{name} not considered: pinned to host by config"))
        }
        Some(Target::Backend(to)) if to != name => {
            return Standing::Refused(format!("{name} not considered: pinned to {to} by config"))
        }
        _ => {}
    }
    match answer {
        Support::Yes => Standing::Supported,
        no => Standing::Refused(declined(name, no)),
    }
}

/// `vulkan declined: dtype: f64 not supported`.
fn declined(name: &str, answer: &Support) -> String {
    match answer {
        Support::Yes => format!("{name} supports it"),
        Support::No(d) if d.message.is_empty() => {
            format!("{name} declined: {}", d.reason.name())
        }
        Support::No(d) => format!("{name} declined: {}: {}", d.reason.name(), d.message),
    }
}

/// Checks the answer sets and returns those of the priority list, in its order.
fn check_answers<'a>(
    graph: &Graph,
    answers: &'a [BackendAnswers],
    policy: &Policy,
) -> Result<Vec<&'a [Support]>, PartitionError> {
    let mut seen = HashSet::new();
    for a in answers {
        if !seen.insert(a.backend.as_str()) {
            return Err(PartitionError::DuplicateAnswers(a.backend.clone()));
        }
        if a.answers.len() != graph.nodes.len() {
            return Err(PartitionError::AnswerCount {
                backend: a.backend.clone(),
                got: a.answers.len(),
                expected: graph.nodes.len(),
            });
        }
    }
    let mut listed = HashSet::new();
    policy
        .priority
        .iter()
        .map(|name| {
            if !listed.insert(name.as_str()) {
                return Err(PartitionError::DuplicatePriority(name.clone()));
            }
            answers
                .iter()
                .find(|a| &a.backend == name)
                .map(|a| a.answers.as_slice())
                .ok_or_else(|| PartitionError::MissingAnswers(name.clone()))
        })
        .collect()
}

/// Checks that every pin can match something and targets a usable place.
fn check_pins(graph: &Graph, policy: &Policy) -> Result<(), PartitionError> {
    for (index, pin) in policy.pins.iter().enumerate() {
        if pin.op.is_none() && pin.node.is_none() {
            return Err(PartitionError::EmptyPin { index });
        }
        if let Some(node) = &pin.node {
            if !graph.nodes.iter().any(|n| &n.name == node) {
                return Err(PartitionError::UnknownPinNode {
                    index,
                    node: node.clone(),
                });
            }
        }
        if let Target::Backend(backend) = &pin.target {
            if !policy.priority.contains(backend) {
                return Err(PartitionError::PinBackendNotInPriority {
                    index,
                    backend: backend.clone(),
                });
            }
        }
    }
    Ok(())
}
