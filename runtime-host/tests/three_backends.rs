//! One model over three backends through the same ABI: the bundled `examples/mixed` model
//! (an int8 QDQ conv front, a float head) with the policy npu-sim > GPU > cpu, the GPU
//! delegate being the one on vulkano and, in turn, the one on wgpu. The
//! integer convolutions go to the NPU simulator, float work to the GPU (lavapipe in CI)
//! where it can, the rest to the CPU plugin or the host; the outputs match the reference
//! (int8 within one quantization step). With the NPU absent, or no Vulkan device, the same
//! model re-partitions onto what is left and still matches.
//!
//! Without a Vulkan device the GPU's share goes to the CPU; `BATON_REQUIRE_VULKAN=1` (set in
//! CI, where lavapipe is installed) turns that into a failure.

mod common;

use std::collections::BTreeMap;

use baton_delegate_api::OpKind;
use baton_partitioner::Decision;
use baton_reference as reference;
use baton_runtime_host::{sample, Config, Engine, Session};
use common::{config, plugin, q};

/// The GPU delegates, by backend name and plugin crate name.
const GPUS: [(&str, &str); 2] = [
    ("vulkan", "baton_backend_vulkan"),
    ("wgpu", "baton_backend_wgpu"),
];

fn engine(dir: &std::path::Path, npu_present: bool, gpu_plugin: &str) -> Engine {
    let body = format!(
        "[[plugin]]\npath = {}\npriority = 0\noptions = {{ present = {npu_present} }}\n\
         [[plugin]]\npath = {}\npriority = 1\n\
         [[plugin]]\npath = {}\npriority = 2\noptions = {{ threads = 1 }}\n",
        q(&plugin("baton_backend_npu_sim")),
        q(&plugin(gpu_plugin)),
        q(&plugin("baton_backend_cpu")),
    );
    Engine::new(Config::load(&config(dir, &body)).unwrap()).unwrap()
}

fn vulkan_required() -> bool {
    std::env::var("BATON_REQUIRE_VULKAN").is_ok_and(|v| v == "1")
}

/// Runs the model and checks both outputs: `features_q` (int8) within one step of the
/// reference, `probabilities` within what one step of the features can move them.
fn run_and_check(s: &mut Session) {
    let graph = sample::mixed();
    let input = sample::mixed_input();
    let want = reference::run_graph(&graph, std::slice::from_ref(&input)).unwrap();
    let got = s.run(&[input]).unwrap();
    let (p, f) = (&got[0], &got[1]);
    assert_eq!(f.shape, want[1].shape);
    let steps = f
        .values::<i8>()
        .iter()
        .zip(want[1].values::<i8>())
        .map(|(&a, &b)| (a as i32 - b as i32).abs())
        .max()
        .unwrap();
    assert!(steps <= 1, "features_q off by {steps} steps");
    let worst = p
        .f32s()
        .iter()
        .zip(want[0].f32s())
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-2, "probabilities off by {worst}");
}

fn count(counts: &BTreeMap<String, usize>, name: &str) -> usize {
    counts.get(name).copied().unwrap_or(0)
}

#[test]
fn npu_gpu_and_cpu_share_the_mixed_model() {
    for (gpu, gpu_plugin) in GPUS {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(dir.path(), true, gpu_plugin);
        let graph = sample::mixed();
        let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
        let plan = s.plan.render(&s.graph);
        let counts = s.nodes_per_backend();
        // Every Conv is an int8 group on the NPU.
        for (i, n) in s.graph.nodes.iter().enumerate() {
            if n.op == OpKind::Conv {
                let on_npu = matches!(
                    &s.plan.nodes[i].decision,
                    Decision::Delegated { backend, .. } if backend == "npu-sim"
                );
                assert!(on_npu, "{} not on the NPU:\n{plan}", n.name);
            }
        }
        let gpu_up = e.backends.iter().any(|b| b.name == gpu && b.verdict.passed);
        if vulkan_required() {
            assert!(
                gpu_up,
                "BATON_REQUIRE_VULKAN=1 but the {gpu} backend did not prove itself"
            );
        }
        if gpu_up {
            assert!(
                count(&counts, gpu) > 0,
                "no float work on the GPU ({gpu}):\n{plan}"
            );
        } else {
            eprintln!("three_backends: no {gpu} device here; the float head runs on the CPU");
            assert!(count(&counts, "cpu") > 0, "{plan}");
        }
        run_and_check(&mut s);
    }
}

#[test]
fn without_the_npu_the_model_runs_on_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path(), false, "baton_backend_vulkan");
    // An absent NPU lists no device: the host records the plugin as failed, with why.
    assert!(
        !e.backends.iter().any(|b| b.name == "npu-sim" && b.usable()),
        "an absent NPU must not be usable"
    );
    let why: Vec<String> = e
        .failed
        .iter()
        .map(|f| format!("{}: {}", f.label, f.error))
        .collect();
    assert!(
        why.iter().any(|w| w.contains("npu")),
        "the absent NPU is not reported: {why:?}"
    );
    let graph = sample::mixed();
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let counts = s.nodes_per_backend();
    assert_eq!(count(&counts, "npu-sim"), 0);
    run_and_check(&mut s);
}
