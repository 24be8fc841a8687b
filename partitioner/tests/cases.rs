//! Hand-built graphs whose right answer is known, including the traps a naive merge falls in.

use baton_delegate_api::{DType, DeclineReason, Graph, GraphBuilder, OpKind, Support};
use baton_partitioner::{
    partition, BackendAnswers, Decision, Partition, PartitionError, PartitionPlan, Pin, Policy,
    Step, Target,
};

// ---- the traps -------------------------------------------------------------------------

/// a -> b -> c plus a -> c, with a and c on backend X and b on the host. Merging a and c
/// would make a partition that feeds b and waits for b's output: a cycle.
#[test]
fn does_not_merge_around_a_host_node() {
    let g = graph(|b, x| {
        let a = b.named_node("a", OpKind::Relu, &[x], &[]).unwrap();
        let t = b.named_node("b", OpKind::Tanh, &[a], &[]).unwrap();
        b.named_node("c", OpKind::Add, &[a, t], &[]).unwrap()
    });
    let plan = run(
        &g,
        &[only("x", &g, &[OpKind::Relu, OpKind::Add])],
        &policy(&["x"]),
    );
    assert_eq!(parts(&plan), vec![("x", vec![0]), ("x", vec![2])]);
    assert_eq!(plan.nodes[1].decision, Decision::Host);
    assert_eq!(
        plan.schedule(&g),
        vec![Step::Partition(0), Step::Node(1), Step::Partition(1)]
    );
}

/// The same trap without the direct edge: a(X) -> b(host) -> c(X).
#[test]
fn does_not_merge_a_chain_through_the_host() {
    let g = graph(|b, x| {
        let a = b.named_node("a", OpKind::Relu, &[x], &[]).unwrap();
        let t = b.named_node("b", OpKind::Tanh, &[a], &[]).unwrap();
        b.named_node("c", OpKind::Relu, &[t], &[]).unwrap()
    });
    let plan = run(&g, &[only("x", &g, &[OpKind::Relu])], &policy(&["x"]));
    assert_eq!(parts(&plan), vec![("x", vec![0]), ("x", vec![2])]);
}

/// A diamond entirely on one backend is one partition.
#[test]
fn diamond_on_one_backend_is_one_partition() {
    let g = diamond();
    let plan = run(&g, &[all("x", &g)], &policy(&["x"]));
    assert_eq!(parts(&plan), vec![("x", vec![0, 1, 2, 3])]);
    assert_eq!(plan.schedule(&g), vec![Step::Partition(0)]);
}

/// A diamond with one arm on the host: the top and the bottom cannot be together, the other
/// arm may join either (it joins the top: producers are merged first).
#[test]
fn diamond_with_a_host_arm_splits_top_from_bottom() {
    let g = diamond();
    let plan = run(
        &g,
        &[only("x", &g, &[OpKind::Relu, OpKind::Sigmoid, OpKind::Add])],
        &policy(&["x"]),
    );
    assert_eq!(parts(&plan), vec![("x", vec![0, 2]), ("x", vec![3])]);
    assert_eq!(
        plan.schedule(&g),
        vec![Step::Partition(0), Step::Node(1), Step::Partition(1)]
    );
}

/// Two parallel branches on one backend, joined on the host, are merged although no edge
/// connects them.
#[test]
fn merges_parallel_branches_without_an_edge() {
    let g = graph(|b, x| {
        let a = b.named_node("a", OpKind::Relu, &[x], &[]).unwrap();
        let s = b.named_node("s", OpKind::Sigmoid, &[x], &[]).unwrap();
        b.named_node("join", OpKind::Add, &[a, s], &[]).unwrap()
    });
    let plan = run(
        &g,
        &[only("x", &g, &[OpKind::Relu, OpKind::Sigmoid])],
        &policy(&["x"]),
    );
    assert_eq!(parts(&plan), vec![("x", vec![0, 1])]);
}

/// Edges 0->3, 1->2, 1->3, all on X: after {1,2} and {0,3} form, an edge inside {0,3}
/// must not be mistaken for a path through a third group.
#[test]
fn edges_inside_a_group_are_not_paths_through_it() {
    let g = graph(|b, x| {
        let a = b.named_node("a", OpKind::Relu, &[x], &[]).unwrap();
        let c = b.named_node("c", OpKind::Relu, &[x], &[]).unwrap();
        b.named_node("d", OpKind::Relu, &[c], &[]).unwrap();
        b.named_node("e", OpKind::Add, &[a, c], &[]).unwrap()
    });
    let plan = run(&g, &[all("x", &g)], &policy(&["x"]));
    assert_eq!(parts(&plan), vec![("x", vec![0, 1, 2, 3])]);
}

// ---- priority and reasons --------------------------------------------------------------

/// vulkan only does Relu; cpu does everything. relu -> tanh -> relu: vulkan takes each
/// relu, but they cannot share a partition because the tanh between them runs on cpu.
#[test]
fn priority_order_with_two_backends() {
    let g = relu_tanh_relu();
    let answers = [vulkan_relu_only(&g), all("cpu", &g)];
    let plan = run(&g, &answers, &policy(&["vulkan", "cpu"]));
    assert_eq!(
        parts(&plan),
        vec![("vulkan", vec![0]), ("cpu", vec![1]), ("vulkan", vec![2])]
    );
    assert_eq!(plan.nodes[0].reasons, vec!["taken by vulkan (priority 1)"]);
    assert_eq!(
        plan.nodes[1].reasons,
        vec![
            "taken by cpu (priority 2)",
            "vulkan declined: op: Tanh is not implemented",
        ]
    );
    // Reversing the priority hands everything to cpu.
    let plan = run(&g, &answers, &policy(&["cpu", "vulkan"]));
    assert_eq!(parts(&plan), vec![("cpu", vec![0, 1, 2])]);
}

#[test]
fn host_nodes_carry_every_backends_message() {
    let g = relu_tanh_relu();
    let cpu = BackendAnswers {
        backend: "cpu".into(),
        answers: g
            .nodes
            .iter()
            .map(|n| match n.op {
                OpKind::Tanh => Support::no(DeclineReason::DType, "f64 not supported"),
                _ => Support::Yes,
            })
            .collect(),
    };
    let plan = run(
        &g,
        &[vulkan_relu_only(&g), cpu],
        &policy(&["vulkan", "cpu"]),
    );
    assert_eq!(plan.nodes[1].decision, Decision::Host);
    assert_eq!(
        plan.nodes[1].reasons,
        vec![
            "vulkan declined: op: Tanh is not implemented",
            "cpu declined: dtype: f64 not supported",
        ]
    );
}

#[test]
fn backends_outside_the_priority_list_are_never_used() {
    let g = relu_tanh_relu();
    let answers = [vulkan_relu_only(&g), all("metal", &g)];
    let plan = run(&g, &answers, &policy(&["vulkan"]));
    assert!(plan.partitions.iter().all(|p| p.backend == "vulkan"));
    assert_eq!(plan.nodes[1].decision, Decision::Host);
    assert!(plan.nodes[1]
        .reasons
        .contains(&"metal supports it, but is not in the priority list".to_string()));
}

#[test]
fn an_empty_graph_has_an_empty_plan() {
    let g = graph(|_, x| x);
    let plan = run(&g, &[all("x", &g)], &policy(&["x"]));
    assert!(plan.partitions.is_empty() && plan.nodes.is_empty());
    assert!(plan.schedule(&g).is_empty());
    assert!(plan
        .render(&g)
        .contains("0 partitions, 0 of 0 nodes delegated"));
}

#[test]
fn an_empty_priority_list_leaves_everything_on_the_host_and_says_so() {
    let g = relu_tanh_relu();
    let plan = run(&g, &[], &Policy::default());
    assert!(plan.partitions.is_empty());
    for e in &plan.nodes {
        assert_eq!(e.decision, Decision::Host);
        assert_eq!(e.reasons, vec!["no backend is in the priority list"]);
    }
    assert_eq!(
        plan.schedule(&g),
        vec![Step::Node(0), Step::Node(1), Step::Node(2)]
    );
}

/// Relu -> If -> Relu where the backend claims everything, If included, and a pin even
/// sends If to it: control flow stays on the host all the same, and says why.
#[test]
fn control_flow_always_runs_on_the_host() {
    let g = graph(|b, x| {
        let a = b.named_node("a", OpKind::Relu, &[x], &[]).unwrap();
        let branch = {
            let mut s = GraphBuilder::new("branch");
            let v = s.input_fixed("v", DType::F32, &[4]);
            let r = s.node(OpKind::Relu, &[v], &[]).unwrap();
            s.output(r);
            baton_delegate_api::Attr::Graph(Box::new(s.finish().unwrap()))
        };
        let c = b.input_fixed("c", DType::Bool, &[]);
        let i = b
            .named_node(
                "if",
                OpKind::If,
                &[c, a],
                &[("then_branch", branch.clone()), ("else_branch", branch)],
            )
            .unwrap();
        b.named_node("c", OpKind::Relu, &[i], &[]).unwrap()
    });
    let mut p = policy(&["cpu"]);
    p.pins
        .push(Pin::op(OpKind::If, Target::Backend("cpu".into())));
    let plan = run(&g, &[all("cpu", &g)], &p);
    assert_eq!(parts(&plan), vec![("cpu", vec![0]), ("cpu", vec![2])]);
    assert_eq!(plan.nodes[1].decision, Decision::Host);
    assert_eq!(
        plan.nodes[1].reasons,
        vec!["If is control flow, which always runs on the host (its subgraphs are planned as graphs of their own)"]
    );
}

// ---- pins ------------------------------------------------------------------------------

#[test]
fn pin_by_op_to_host() {
    let g = relu_tanh_relu();
    let mut p = policy(&["cpu"]);
    p.pins.push(Pin::op(OpKind::Tanh, Target::Host));
    let plan = run(&g, &[all("cpu", &g)], &p);
    assert_eq!(parts(&plan), vec![("cpu", vec![0]), ("cpu", vec![2])]);
    assert_eq!(plan.nodes[1].reasons, vec!["pinned to host by config"]);
}

#[test]
fn pin_by_name_to_a_lower_backend() {
    let g = relu_tanh_relu();
    let mut p = policy(&["vulkan", "cpu"]);
    p.pins.push(Pin::node("r0", Target::Backend("cpu".into())));
    let plan = run(&g, &[vulkan_relu_only(&g), all("cpu", &g)], &p);
    assert_eq!(parts(&plan), vec![("cpu", vec![0, 1]), ("vulkan", vec![2])]);
    assert_eq!(
        plan.nodes[0].reasons,
        vec![
            "taken by cpu (priority 2)",
            "vulkan not considered: pinned to cpu by config",
        ]
    );
}

#[test]
fn pin_by_op_and_name_needs_both_to_match() {
    let g = relu_tanh_relu();
    let mut p = policy(&["cpu"]);
    p.pins.push(Pin {
        op: Some(OpKind::Relu),
        node: Some("r2".into()),
        target: Target::Host,
    });
    let plan = run(&g, &[all("cpu", &g)], &p);
    assert_eq!(parts(&plan), vec![("cpu", vec![0, 1])]);
    assert_eq!(plan.nodes[2].decision, Decision::Host);
}

#[test]
fn first_matching_pin_wins_and_a_pin_to_a_declining_backend_means_host() {
    let g = relu_tanh_relu();
    let mut p = policy(&["vulkan", "cpu"]);
    p.pins
        .push(Pin::node("t1", Target::Backend("vulkan".into())));
    p.pins
        .push(Pin::op(OpKind::Tanh, Target::Backend("cpu".into())));
    let plan = run(&g, &[vulkan_relu_only(&g), all("cpu", &g)], &p);
    assert_eq!(plan.nodes[1].decision, Decision::Host);
    assert_eq!(
        plan.nodes[1].reasons,
        vec![
            "vulkan declined: op: Tanh is not implemented",
            "cpu not considered: pinned to vulkan by config",
        ]
    );
}

// ---- minimum size and maximum count ----------------------------------------------------

#[test]
fn min_size_moves_small_partitions_to_the_next_backend_and_merges_there() {
    let g = relu_tanh_relu();
    let mut p = policy(&["vulkan", "cpu"]);
    p.min_partition_size = 2;
    let plan = run(&g, &[vulkan_relu_only(&g), all("cpu", &g)], &p);
    assert_eq!(parts(&plan), vec![("cpu", vec![0, 1, 2])]);
    assert_eq!(
        plan.nodes[0].reasons,
        vec![
            "taken by cpu (priority 2)",
            "vulkan supports it, but its partition of 1 node is below min_partition_size 2",
        ]
    );
}

#[test]
fn min_size_falls_back_to_the_host() {
    let g = relu_tanh_relu();
    let mut p = policy(&["x"]);
    p.min_partition_size = 2;
    let plan = run(&g, &[only("x", &g, &[OpKind::Relu])], &p);
    assert!(plan.partitions.is_empty());
    assert_eq!(
        plan.nodes[2].reasons,
        vec!["x supports it, but its partition of 1 node is below min_partition_size 2"]
    );
}

#[test]
fn min_size_zero_and_one_mean_no_minimum() {
    let g = relu_tanh_relu();
    for min in [0, 1] {
        let mut p = policy(&["x"]);
        p.min_partition_size = min;
        let plan = run(&g, &[only("x", &g, &[OpKind::Relu])], &p);
        assert_eq!(plan.partitions.len(), 2);
    }
}

/// Relu chains of lengths 1, 3 and 2 separated by host Tanh nodes.
#[test]
fn max_partitions_keeps_the_largest() {
    let g = chains(&[1, 3, 2]);
    let answers = [only("x", &g, &[OpKind::Relu])];
    let mut p = policy(&["x"]);
    p.max_partitions = Some(2);
    let plan = run(&g, &answers, &p);
    assert_eq!(parts(&plan), vec![("x", vec![2, 3, 4]), ("x", vec![6, 7])]);
    assert_eq!(
        plan.nodes[0].reasons,
        vec!["x supports it, but dropped: max_partitions 2 keeps larger partitions"]
    );
    assert_eq!(plan.nodes[0].decision, Decision::Host);

    p.max_partitions = Some(0);
    assert!(run(&g, &answers, &p).partitions.is_empty());
}

#[test]
fn max_partitions_breaks_ties_by_first_node() {
    let g = chains(&[2, 2, 2]);
    let mut p = policy(&["x"]);
    p.max_partitions = Some(1);
    let plan = run(&g, &[only("x", &g, &[OpKind::Relu])], &p);
    assert_eq!(parts(&plan), vec![("x", vec![0, 1])]);
}

/// The dropped partition sits between the two kept ones and moves to the host; the plan
/// stays schedulable.
#[test]
fn dropped_partitions_keep_the_plan_schedulable() {
    let g = chains(&[2, 1, 2]);
    let mut p = policy(&["x"]);
    p.max_partitions = Some(2);
    let plan = run(&g, &[only("x", &g, &[OpKind::Relu])], &p);
    assert_eq!(parts(&plan), vec![("x", vec![0, 1]), ("x", vec![5, 6])]);
    assert_eq!(plan.schedule(&g).len(), 2 + 3);
}

/// P = three Relu on x; D = {d2 = Tanh(x), d1 = Add(P, d2)} on y; Q = three Relu on d2.
/// The contracted path P -> D -> Q keeps P and Q apart, though no node path joins them.
/// Once D is dissolved (too small, or dropped), P and Q must be merged.
#[test]
fn dissolving_a_partition_lets_its_neighbours_merge() {
    let g = graph(|b, x| {
        let mut p = x;
        for _ in 0..3 {
            p = b.node(OpKind::Relu, &[p], &[]).unwrap();
        }
        let d2 = b.node(OpKind::Tanh, &[x], &[]).unwrap();
        let d1 = b.node(OpKind::Add, &[p, d2], &[]).unwrap();
        let mut q = d2;
        for _ in 0..3 {
            q = b.node(OpKind::Relu, &[q], &[]).unwrap();
        }
        b.node(OpKind::Mul, &[d1, q], &[]).unwrap()
    });
    let answers = [
        only("x", &g, &[OpKind::Relu]),
        only("y", &g, &[OpKind::Tanh, OpKind::Add]),
    ];
    let mut p = policy(&["x", "y"]);
    let plan = run(&g, &answers, &p);
    assert_eq!(
        parts(&plan),
        vec![
            ("x", vec![0, 1, 2]),
            ("y", vec![3, 4]),
            ("x", vec![5, 6, 7])
        ]
    );

    p.max_partitions = Some(2);
    let plan = run(&g, &answers, &p);
    assert_eq!(parts(&plan), vec![("x", vec![0, 1, 2, 5, 6, 7])]);

    p.max_partitions = None;
    p.min_partition_size = 3;
    let plan = run(&g, &answers, &p);
    assert_eq!(parts(&plan), vec![("x", vec![0, 1, 2, 5, 6, 7])]);
}

// ---- errors ----------------------------------------------------------------------------

#[test]
fn rejects_bad_inputs_naming_the_culprit() {
    let g = relu_tanh_relu();
    let short = BackendAnswers {
        backend: "vulkan".into(),
        answers: vec![Support::Yes],
    };
    let err = partition(&g, &[short], &policy(&["vulkan"])).unwrap_err();
    assert_eq!(
        err,
        PartitionError::AnswerCount {
            backend: "vulkan".into(),
            got: 1,
            expected: 3
        }
    );
    assert!(err.to_string().contains("vulkan"));

    let cpu = [all("cpu", &g)];
    let twice = [cpu[0].clone(), cpu[0].clone()];
    let err = partition(&g, &twice, &policy(&["cpu"])).unwrap_err();
    assert_eq!(err, PartitionError::DuplicateAnswers("cpu".into()));

    let err = partition(&g, &cpu, &policy(&["cpu", "cpu"])).unwrap_err();
    assert_eq!(err, PartitionError::DuplicatePriority("cpu".into()));

    let err = partition(&g, &cpu, &policy(&["cpu", "npu"])).unwrap_err();
    assert_eq!(err, PartitionError::MissingAnswers("npu".into()));

    let mut p = policy(&["cpu"]);
    p.pins.push(Pin::node("nope", Target::Host));
    let err = partition(&g, &cpu, &p).unwrap_err();
    assert!(matches!(err, PartitionError::UnknownPinNode { index: 0, ref node } if node == "nope"));

    let mut p = policy(&["cpu"]);
    p.pins
        .push(Pin::op(OpKind::Relu, Target::Backend("metal".into())));
    let err = partition(&g, &cpu, &p).unwrap_err();
    assert!(
        matches!(err, PartitionError::PinBackendNotInPriority { ref backend, .. } if backend == "metal")
    );

    let mut p = policy(&["cpu"]);
    p.pins.push(Pin {
        op: None,
        node: None,
        target: Target::Host,
    });
    let err = partition(&g, &cpu, &p).unwrap_err();
    assert_eq!(err, PartitionError::EmptyPin { index: 0 });
}

#[test]
fn rejects_an_invalid_graph() {
    let mut g = relu_tanh_relu();
    g.nodes.swap(0, 2);
    let err = partition(&g, &[], &Policy::default()).unwrap_err();
    assert!(matches!(err, PartitionError::InvalidGraph(_)));
}

// ---- report ----------------------------------------------------------------------------

#[test]
fn render_lists_partitions_and_every_node_with_reasons() {
    let g = relu_tanh_relu();
    let plan = run(
        &g,
        &[vulkan_relu_only(&g), all("cpu", &g)],
        &policy(&["vulkan", "cpu"]),
    );
    let text = plan.render(&g);
    assert!(
        text.contains("3 partitions, 3 of 3 nodes delegated"),
        "{text}"
    );
    assert!(
        text.contains("partition 1: cpu, 1 node\n  t1 (Tanh)"),
        "{text}"
    );
    let row = text.lines().find(|l| l.starts_with("t1 ")).expect(&text);
    assert!(row.contains("cpu (partition 1)"), "{row}");
    assert!(
        row.contains("taken by cpu (priority 2); vulkan declined: op: Tanh is not implemented"),
        "{row}"
    );
}

// ---- helpers ---------------------------------------------------------------------------

fn run(g: &Graph, answers: &[BackendAnswers], policy: &Policy) -> PartitionPlan {
    let plan = partition(g, answers, policy).unwrap();
    for (i, Partition { backend, nodes }) in plan.partitions.iter().enumerate() {
        for &n in nodes {
            let expected = Decision::Delegated {
                backend: backend.clone(),
                partition: i,
            };
            assert_eq!(plan.nodes[n].decision, expected);
        }
    }
    plan
}

fn parts(plan: &PartitionPlan) -> Vec<(&str, Vec<usize>)> {
    plan.partitions
        .iter()
        .map(|p| (p.backend.as_str(), p.nodes.clone()))
        .collect()
}

fn policy(priority: &[&str]) -> Policy {
    Policy {
        priority: priority.iter().map(|s| s.to_string()).collect(),
        ..Policy::default()
    }
}

/// A graph over one input `x` of shape [4], finished by `body`, which returns the output.
fn graph(body: impl FnOnce(&mut GraphBuilder, usize) -> usize) -> Graph {
    let mut b = GraphBuilder::new("test");
    let x = b.input_fixed("x", DType::F32, &[4]);
    let out = body(&mut b, x);
    b.output(out);
    b.finish().unwrap()
}

/// a = Relu(x); b = Tanh(a); c = Sigmoid(a); d = Add(b, c).
fn diamond() -> Graph {
    graph(|b, x| {
        let a = b.named_node("a", OpKind::Relu, &[x], &[]).unwrap();
        let l = b.named_node("b", OpKind::Tanh, &[a], &[]).unwrap();
        let r = b.named_node("c", OpKind::Sigmoid, &[a], &[]).unwrap();
        b.named_node("d", OpKind::Add, &[l, r], &[]).unwrap()
    })
}

/// r0 = Relu(x); t1 = Tanh(r0); r2 = Relu(t1).
fn relu_tanh_relu() -> Graph {
    graph(|b, x| {
        let r = b.named_node("r0", OpKind::Relu, &[x], &[]).unwrap();
        let t = b.named_node("t1", OpKind::Tanh, &[r], &[]).unwrap();
        b.named_node("r2", OpKind::Relu, &[t], &[]).unwrap()
    })
}

/// Chains of Relu of the given lengths, one after the other, separated by single Tanh.
fn chains(lengths: &[usize]) -> Graph {
    graph(|b, x| {
        let mut t = x;
        for (i, &len) in lengths.iter().enumerate() {
            if i > 0 {
                t = b.node(OpKind::Tanh, &[t], &[]).unwrap();
            }
            for _ in 0..len {
                t = b.node(OpKind::Relu, &[t], &[]).unwrap();
            }
        }
        t
    })
}

fn all(name: &str, g: &Graph) -> BackendAnswers {
    only(name, g, OpKind::ALL)
}

/// A backend that supports exactly the ops `ops`.
fn only(name: &str, g: &Graph, ops: &[OpKind]) -> BackendAnswers {
    BackendAnswers {
        backend: name.into(),
        answers: g
            .nodes
            .iter()
            .map(|n| {
                if ops.contains(&n.op) {
                    Support::Yes
                } else {
                    Support::no(DeclineReason::Op, format!("{} is not implemented", n.op))
                }
            })
            .collect(),
    }
}

fn vulkan_relu_only(g: &Graph) -> BackendAnswers {
    only("vulkan", g, &[OpKind::Relu])
}
