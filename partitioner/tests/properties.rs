//! Properties of plans for random DAGs, random support and random policies, each checked
//! by brute force independently of the partitioner's own bookkeeping.

use std::collections::HashMap;
use std::time::Instant;

use baton_delegate_api::{DType, DeclineReason, Dim, Graph, Node, OpKind, Support, TensorDecl};
use baton_partitioner::{
    partition, BackendAnswers, Decision, PartitionPlan, Pin, Policy, Step, Target,
};
use proptest::prelude::*;

const BACKENDS: [&str; 3] = ["npu", "gpu", "cpu"];
const OPS: [OpKind; 3] = [OpKind::Add, OpKind::Relu, OpKind::Mul];

/// A random problem: a DAG given by each node's predecessors, support per backend, a policy.
#[derive(Debug, Clone)]
struct Case {
    /// `inputs[i]`: tensors node `i` reads; tensor 0 is the graph input, tensor `j + 1`
    /// the output of node `j`.
    inputs: Vec<Vec<usize>>,
    ops: Vec<usize>,
    /// `support[b][i]`: whether backend `BACKENDS[b]` supports node `i`.
    support: Vec<Vec<bool>>,
    policy: Policy,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn plans_are_sound_convex_acyclic_and_maximal(case in case()) {
        let graph = build_graph(&case);
        let answers = answers_for(&case);
        let plan = partition(&graph, &answers, &case.policy).unwrap();
        check_plan(&case, &graph, &plan);
    }
}

fn check_plan(case: &Case, graph: &Graph, plan: &PartitionPlan) {
    let n = case.inputs.len();
    let edges = edges(case);
    let policy = &case.policy;

    // Partitions are non-empty, sorted, disjoint, and agree with the decisions.
    let mut owner: Vec<Option<usize>> = vec![None; n];
    for (i, p) in plan.partitions.iter().enumerate() {
        assert!(!p.nodes.is_empty());
        assert!(p.nodes.windows(2).all(|w| w[0] < w[1]), "unsorted {p:?}");
        for &v in &p.nodes {
            assert_eq!(owner[v], None, "node {v} in two partitions");
            owner[v] = Some(i);
        }
    }
    assert_eq!(plan.nodes.len(), n);
    for (v, e) in plan.nodes.iter().enumerate() {
        assert_eq!(e.node, v);
        assert!(!e.reasons.is_empty(), "node {v} has no reason");
        match (&e.decision, owner[v]) {
            (Decision::Host, None) => {}
            (Decision::Delegated { backend, partition }, Some(p)) => {
                assert_eq!(*partition, p);
                assert_eq!(*backend, plan.partitions[p].backend);
            }
            (d, o) => panic!("node {v}: decision {d:?} but partition {o:?}"),
        }
    }

    // Every delegated node is supported by its backend, which is in the priority list, and
    // the reasons account for every backend preferred to it.
    for p in &plan.partitions {
        let rank = policy
            .priority
            .iter()
            .position(|b| *b == p.backend)
            .unwrap();
        let b = BACKENDS.iter().position(|b| *b == p.backend).unwrap();
        for &v in &p.nodes {
            assert!(case.support[b][v], "node {v} on {} unsupported", p.backend);
            let reasons = &plan.nodes[v].reasons;
            assert_eq!(
                reasons[0],
                format!("taken by {} (priority {})", p.backend, rank + 1)
            );
            for higher in &policy.priority[..rank] {
                assert!(
                    reasons[1..].iter().any(|r| r.starts_with(higher.as_str())),
                    "node {v}: no reason for {higher} in {reasons:?}"
                );
            }
        }
    }

    // A host node's reasons cover every backend of the priority list, unless a pin sent it
    // there.
    for (v, node) in graph.nodes.iter().enumerate() {
        let pin = policy.pins.iter().find(|p| p.matches(node.op, &node.name));
        let reasons = &plan.nodes[v].reasons;
        if pin.is_some_and(|p| p.target == Target::Host) {
            assert_eq!(reasons, &vec!["pinned to host by config".to_string()]);
        } else if owner[v].is_none() {
            for b in &policy.priority {
                assert!(
                    reasons.iter().any(|r| r.starts_with(b.as_str())),
                    "host node {v}: no reason for {b} in {reasons:?}"
                );
            }
        }
    }

    // Pins are obeyed: the first matching pin decides.
    for (v, node) in graph.nodes.iter().enumerate() {
        let Some(pin) = policy.pins.iter().find(|p| p.matches(node.op, &node.name)) else {
            continue;
        };
        match (&pin.target, &plan.nodes[v].decision) {
            (_, Decision::Host) => {}
            (Target::Backend(to), Decision::Delegated { backend, .. }) => assert_eq!(to, backend),
            (Target::Host, d) => panic!("node {v} pinned to host but {d:?}"),
        }
    }

    // Limits.
    for p in &plan.partitions {
        assert!(p.nodes.len() >= policy.min_partition_size.max(1));
    }
    if let Some(max) = policy.max_partitions {
        assert!(plan.partitions.len() <= max);
    }

    // Convexity, by brute-force reachability.
    let reach = reachability(n, &edges);
    for p in &plan.partitions {
        let inside: u64 = p.nodes.iter().map(|&v| 1u64 << v).sum();
        for x in (0..n).filter(|&x| inside & (1 << x) == 0) {
            let from_inside = p.nodes.iter().any(|&v| reach[v] & (1 << x) != 0);
            let back_inside = reach[x] & inside != 0;
            assert!(
                !(from_inside && back_inside),
                "{p:?} not convex around node {x}"
            );
        }
    }

    // The contracted graph (partitions and host nodes as single vertices) is acyclic.
    let group: Vec<usize> = (0..n)
        .map(|v| owner[v].unwrap_or(plan.partitions.len() + v))
        .collect();
    assert!(acyclic(&edges, &group), "contracted graph has a cycle");

    // Maximality: merging any two partitions of one backend would create a cycle.
    for (i, p) in plan.partitions.iter().enumerate() {
        for (j, q) in plan.partitions.iter().enumerate().skip(i + 1) {
            if p.backend != q.backend {
                continue;
            }
            let merged: Vec<usize> = group.iter().map(|&g| if g == j { i } else { g }).collect();
            assert!(
                !acyclic(&edges, &merged),
                "partitions {i} and {j} could merge: {p:?} {q:?}"
            );
        }
    }

    // The schedule runs every node exactly once, each after its producers.
    let schedule = plan.schedule(graph);
    let mut when: Vec<Option<usize>> = vec![None; n];
    for (t, step) in schedule.iter().enumerate() {
        let nodes = match *step {
            Step::Partition(i) => plan.partitions[i].nodes.clone(),
            Step::Node(v) => {
                assert_eq!(owner[v], None, "delegated node {v} scheduled alone");
                vec![v]
            }
        };
        for v in nodes {
            assert_eq!(when[v], None, "node {v} scheduled twice");
            when[v] = Some(t);
        }
    }
    let when: Vec<usize> = when
        .into_iter()
        .map(|w| w.expect("node not scheduled"))
        .collect();
    for &(u, v) in &edges {
        if group[u] != group[v] {
            assert!(when[u] < when[v], "edge {u}->{v} runs backwards");
        }
    }
}

/// Thousands of nodes partition in well under a second (the bound here is loose, to hold
/// on slow machines, but a quadratic-per-merge algorithm blows through it).
#[test]
fn large_graphs_partition_into_valid_plans() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |m: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % m as u64) as usize
    };
    let n = 4000;
    // Mostly a chain with short skips, like real models; a sprinkle of unsupported nodes.
    let inputs: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            let mut ins = vec![i];
            if i > 4 && next(3) == 0 {
                ins.push(i - next(4));
            }
            ins
        })
        .collect();
    let support = vec![
        (0..n).map(|_| next(10) != 0).collect(),
        (0..n).map(|_| next(4) != 0).collect(),
        (0..n).map(|_| true).collect(),
    ];
    let case = Case {
        ops: vec![0; n],
        inputs,
        support,
        policy: Policy {
            priority: BACKENDS.iter().map(|s| s.to_string()).collect(),
            min_partition_size: 3,
            max_partitions: Some(50),
            pins: Vec::new(),
        },
    };
    let graph = build_graph(&case);
    let answers = answers_for(&case);
    let start = Instant::now();
    let plan = partition(&graph, &answers, &case.policy).unwrap();
    let elapsed = start.elapsed();
    assert!(!plan.schedule(&graph).is_empty());
    eprintln!(
        "{n} nodes, {} partitions: {elapsed:?}",
        plan.partitions.len()
    );

    // A wide random DAG with two interleaved backends: long searches, many groups.
    let wide = Case {
        inputs: (0..n)
            .map(|i| (0..2).map(|_| i - next(50.min(i + 1))).collect())
            .collect(),
        support: vec![
            (0..n).map(|_| next(2) == 0).collect(),
            (0..n).map(|_| next(2) == 0).collect(),
        ],
        policy: Policy {
            priority: BACKENDS[..2].iter().map(|s| s.to_string()).collect(),
            ..Policy::default()
        },
        ops: vec![0; n],
    };
    let graph = build_graph(&wide);
    let answers = answers_for(&wide);
    let start = Instant::now();
    let plan = partition(&graph, &answers, &wide.policy).unwrap();
    let elapsed = start.elapsed();
    eprintln!(
        "{n} nodes wide: {} partitions, {elapsed:?}",
        plan.partitions.len()
    );

    // Worst case for the number of groups: a chain alternating between one backend and
    // the host, so no two groups can merge.
    let alternating = Case {
        support: vec![(0..n).map(|i| i % 2 == 0).collect()],
        policy: Policy {
            priority: vec![BACKENDS[0].to_string()],
            ..Policy::default()
        },
        ops: vec![0; n],
        inputs: (0..n).map(|i| vec![i]).collect(),
    };
    let graph = build_graph(&alternating);
    let answers = answers_for(&alternating);
    let start = Instant::now();
    let plan = partition(&graph, &answers, &alternating.policy).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(plan.partitions.len(), n / 2);
    eprintln!("{n} nodes alternating: {elapsed:?}");
}

// ---- strategies ------------------------------------------------------------------------

fn case() -> impl Strategy<Value = Case> {
    (1usize..60).prop_flat_map(|n| {
        let inputs: Vec<_> = (0..n)
            .map(|i| proptest::collection::vec(0..=i, 1..=3))
            .collect();
        let ops = proptest::collection::vec(0..OPS.len(), n);
        let support = proptest::collection::vec(
            proptest::collection::vec(proptest::bool::weighted(0.7), n),
            BACKENDS.len(),
        );
        let priority = Just((0..BACKENDS.len()).collect::<Vec<_>>())
            .prop_shuffle()
            .prop_flat_map(|order| (Just(order), 0..=BACKENDS.len()));
        let pins = proptest::collection::vec((0..n + OPS.len(), 0..=BACKENDS.len()), 0..3);
        let limits = (0usize..4, proptest::option::of(0usize..5));
        (inputs, ops, support, priority, pins, limits).prop_map(
            |(inputs, ops, support, (order, k), pins, (min, max))| {
                let priority: Vec<String> = order[..k]
                    .iter()
                    .map(|&b| BACKENDS[b].to_string())
                    .collect();
                let n = inputs.len();
                let pins = pins
                    .into_iter()
                    .map(|(what, to)| {
                        let target = if to == 0 || priority.is_empty() {
                            Target::Host
                        } else {
                            Target::Backend(priority[(to - 1) % priority.len()].clone())
                        };
                        if what < n {
                            Pin::node(&format!("n{what}"), target)
                        } else {
                            Pin::op(OPS[what - n], target)
                        }
                    })
                    .collect();
                Case {
                    inputs,
                    ops,
                    support,
                    policy: Policy {
                        priority,
                        min_partition_size: min,
                        max_partitions: max,
                        pins,
                    },
                }
            },
        )
    })
}

// ---- building the inputs ---------------------------------------------------------------

/// The graph of `case`, built directly (shapes are all `[1]`, ops are not checked).
fn build_graph(case: &Case) -> Graph {
    let tensor = |name: String| TensorDecl {
        name,
        dtype: DType::F32,
        shape: vec![Dim::Fixed(1)],
        quant: None,
        data: None,
    };
    let n = case.inputs.len();
    let mut tensors = vec![tensor("x".to_string())];
    tensors.extend((0..n).map(|i| tensor(format!("t{i}"))));
    let nodes = (0..n)
        .map(|i| Node {
            name: format!("n{i}"),
            op: OPS[case.ops[i]],
            inputs: case.inputs[i].clone(),
            outputs: vec![i + 1],
            attrs: Default::default(),
        })
        .collect();
    let graph = Graph {
        name: "random".to_string(),
        tensors,
        nodes,
        inputs: vec![0],
        outputs: vec![n],
    };
    graph.validate().unwrap();
    graph
}

fn answers_for(case: &Case) -> Vec<BackendAnswers> {
    case.support
        .iter()
        .enumerate()
        .map(|(b, yes)| BackendAnswers {
            backend: BACKENDS[b].to_string(),
            answers: yes
                .iter()
                .enumerate()
                .map(|(i, &yes)| {
                    if yes {
                        Support::Yes
                    } else {
                        Support::no(
                            DeclineReason::Other,
                            format!("{} refuses n{i}", BACKENDS[b]),
                        )
                    }
                })
                .collect(),
        })
        .collect()
}

// ---- brute-force graph facts -----------------------------------------------------------

/// Node-level edges `(producer, consumer)`, deduplicated.
fn edges(case: &Case) -> Vec<(usize, usize)> {
    let mut edges: Vec<(usize, usize)> = case
        .inputs
        .iter()
        .enumerate()
        .flat_map(|(v, ins)| ins.iter().filter(|&&t| t > 0).map(move |&t| (t - 1, v)))
        .collect();
    edges.sort_unstable();
    edges.dedup();
    edges
}

/// `reach[u]`: bit set of nodes reachable from `u` by one or more edges (fewer than 64 nodes).
fn reachability(n: usize, edges: &[(usize, usize)]) -> Vec<u64> {
    let mut reach = vec![0u64; n];
    for u in (0..n).rev() {
        for &(a, b) in edges {
            if a == u {
                reach[u] |= (1 << b) | reach[b];
            }
        }
    }
    reach
}

/// Whether the graph with each node replaced by `group[node]` has no cycle (Kahn).
fn acyclic(edges: &[(usize, usize)], group: &[usize]) -> bool {
    let mut succ: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut indegree: HashMap<usize, usize> = group.iter().map(|&g| (g, 0)).collect();
    let mut contracted: Vec<(usize, usize)> = edges
        .iter()
        .map(|&(u, v)| (group[u], group[v]))
        .filter(|(a, b)| a != b)
        .collect();
    contracted.sort_unstable();
    contracted.dedup();
    for &(a, b) in &contracted {
        succ.entry(a).or_default().push(b);
        *indegree.get_mut(&b).unwrap() += 1;
    }
    let mut ready: Vec<usize> = indegree
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&g, _)| g)
        .collect();
    let mut seen = 0;
    while let Some(g) = ready.pop() {
        seen += 1;
        for &h in succ.get(&g).into_iter().flatten() {
            let d = indegree.get_mut(&h).unwrap();
            *d -= 1;
            if *d == 0 {
                ready.push(h);
            }
        }
    }
    seen == indegree.len()
}
