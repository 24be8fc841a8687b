//! Using a plan: an execution order, and a report for people.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write;

use baton_delegate_api::Graph;

use crate::{count, Decision, PartitionPlan, Step};

impl PartitionPlan {
    /// A valid execution order: every partition as one step, every host node as one step,
    /// topologically sorted (a partition runs after all producers of its inputs). Among
    /// steps that are ready together, the one holding the earliest node goes first, so the
    /// order follows the graph's own order where it can.
    ///
    /// # Panics
    ///
    /// If the partitions, contracted to single steps, form a cycle. A plan returned by
    /// [`crate::partition`] for `graph` never does.
    pub fn schedule(&self, graph: &Graph) -> Vec<Step> {
        // Step ids: partition `i` is `i`; host node `v` is `partitions.len() + v`.
        let parts = self.partitions.len();
        let mut step_of: Vec<usize> = (0..graph.nodes.len()).map(|v| parts + v).collect();
        for (i, partition) in self.partitions.iter().enumerate() {
            for &v in &partition.nodes {
                step_of[v] = i;
            }
        }
        let steps = parts + graph.nodes.len();
        let in_use = |s: usize| s < parts || step_of[s - parts] == s;
        let first_node = |s: usize| {
            if s < parts {
                self.partitions[s].nodes.first().copied().unwrap_or(0)
            } else {
                s - parts
            }
        };

        let producers = graph.producers();
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); steps];
        for (v, node) in graph.nodes.iter().enumerate() {
            for u in node.inputs.iter().filter_map(|&t| producers[t]) {
                if step_of[u] != step_of[v] {
                    succ[step_of[u]].push(step_of[v]);
                }
            }
        }
        let mut waiting_on = vec![0usize; steps];
        for list in &mut succ {
            list.sort_unstable();
            list.dedup();
            for &s in list.iter() {
                waiting_on[s] += 1;
            }
        }

        let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..steps)
            .filter(|&s| in_use(s) && waiting_on[s] == 0)
            .map(|s| Reverse((first_node(s), s)))
            .collect();
        let mut order = Vec::new();
        while let Some(Reverse((_, s))) = ready.pop() {
            order.push(if s < parts {
                Step::Partition(s)
            } else {
                Step::Node(s - parts)
            });
            for &t in &succ[s] {
                waiting_on[t] -= 1;
                if waiting_on[t] == 0 {
                    ready.push(Reverse((first_node(t), t)));
                }
            }
        }
        let expected = (0..steps).filter(|&s| in_use(s)).count();
        assert_eq!(
            order.len(),
            expected,
            "the partitions of this plan form a cycle, so it cannot be scheduled"
        );
        order
    }

    /// Human-readable text: one block per partition (backend, node count, node names and
    /// ops), then a table of every node: name, op, where it runs, and the reasons.
    pub fn render(&self, graph: &Graph) -> String {
        let delegated = self
            .nodes
            .iter()
            .filter(|e| matches!(e.decision, Decision::Delegated { .. }))
            .count();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "partition plan for '{}': {}, {} of {} delegated",
            graph.name,
            count(self.partitions.len(), "partition"),
            delegated,
            count(self.nodes.len(), "node"),
        );
        for (i, partition) in self.partitions.iter().enumerate() {
            let _ = writeln!(
                out,
                "\npartition {i}: {}, {}",
                partition.backend,
                count(partition.nodes.len(), "node")
            );
            for &v in &partition.nodes {
                let _ = writeln!(out, "  {}", graph.nodes[v].label());
            }
        }

        let rows: Vec<[String; 4]> = self
            .nodes
            .iter()
            .map(|e| {
                let node = &graph.nodes[e.node];
                let place = match &e.decision {
                    Decision::Delegated { backend, partition } => {
                        format!("{backend} (partition {partition})")
                    }
                    Decision::Host => "host".to_string(),
                };
                [
                    node.name.clone(),
                    node.op.to_string(),
                    place,
                    e.reasons.join("; "),
                ]
            })
            .collect();
        let header = ["node", "op", "runs on", "reasons"].map(String::from);
        let mut width = [0usize; 3];
        for row in std::iter::once(&header).chain(&rows) {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        out.push('\n');
        for row in std::iter::once(&header).chain(&rows) {
            let _ = writeln!(
                out,
                "{:<w0$}  {:<w1$}  {:<w2$}  {}",
                row[0],
                row[1],
                row[2],
                row[3],
                w0 = width[0],
                w1 = width[1],
                w2 = width[2],
            );
        }
        out
    }
}
