//! npu-sim inside the host, through dlopen and a TOML config listing npu-sim then the CPU
//! plugin: with the device present it proves itself on the quantized probe and runs a
//! whole quantized net, profiled; absent, its probe fails and the host re-partitions the
//! model to the CPU plugin and the portable kernels.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use baton_delegate_api::Tensor;
use baton_reference as reference;
use baton_runtime_host::plugin::PluginLibrary;
use baton_runtime_host::{probe, Config, Engine, Session};

fn plugin_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().expect("deps").join(format!(
        "{}baton_backend_npu_sim{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

/// The CPU plugin, built beside the NPU one (the host links no backend of its own).
fn cpu_plugin_path() -> PathBuf {
    plugin_path().with_file_name(format!(
        "{}baton_backend_cpu{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

fn engine(dir: &std::path::Path, present: bool) -> Engine {
    let text = format!(
        "cache_dir = {:?}\n\
         [[plugin]]\npath = {:?}\npriority = 0\noptions = {{ present = {present}, macs = 256, sram_kib = 384, clock_mhz = 500 }}\n\
         [[plugin]]\npath = {:?}\npriority = 1\n",
        dir.join("cache").display().to_string(),
        plugin_path().display().to_string(),
        cpu_plugin_path().display().to_string(),
    );
    let file = dir.join("baton.toml");
    std::fs::write(&file, text).unwrap();
    Engine::new(Config::load(&file).unwrap()).unwrap()
}

fn within_one_step(got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape, want.shape);
    for (k, (&a, &b)) in got
        .values::<i8>()
        .iter()
        .zip(want.values::<i8>())
        .enumerate()
    {
        assert!(
            (a as i32 - b as i32).abs() <= 1,
            "element {k}: {a} vs reference {b}"
        );
    }
}

#[test]
fn present_npu_proves_itself_and_runs_the_whole_net_with_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path(), true);
    let npu = e
        .backends
        .iter()
        .find(|b| b.name == "npu-sim")
        .expect("npu-sim loaded");
    assert!(npu.verdict.passed, "probe: {}", npu.verdict.detail);
    assert!(
        npu.verdict.detail.contains("int8 QDQ Conv"),
        "{}",
        npu.verdict.detail
    );
    assert_eq!(npu.device.kind, 2);

    let (g, inputs) = common::small_net();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert_eq!(
        s.nodes_per_backend().get("npu-sim"),
        Some(&g.nodes.len()),
        "{}",
        s.plan.render(&s.graph)
    );
    s.set_profiling(true);
    let got = s.run(&inputs).unwrap();
    within_one_step(&got[0], &reference::run_graph(&g, &inputs).unwrap()[0]);
    let profile = s.profile();
    assert_eq!(profile.len(), 1);
    assert_eq!(profile[0].backend, "npu-sim");
    assert_eq!(profile[0].events.len(), 7);
    assert!(profile[0].events.iter().all(|e| e.cycles > 0));
}

#[test]
fn absent_npu_fails_its_probe_and_the_host_repartitions_to_the_cpu() {
    // The probe itself, on an absent device's context.
    let lib = PluginLibrary::load(&plugin_path(), None).unwrap();
    let ctx = lib.create(&[("present".into(), "false".into())]).unwrap();
    assert!(!ctx.available_hint());
    assert!(ctx.devices().unwrap().is_empty());
    let v = probe::probe(&ctx, 0);
    assert!(!v.passed);
    assert!(v.detail.contains("no NPU present"), "{}", v.detail);

    // The engine leaves it out; the model runs on the CPU plugin and the portable kernels.
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path(), false);
    assert!(e.usable().all(|b| b.name != "npu-sim"));
    assert!(
        e.failed
            .iter()
            .any(|f| f.error.to_string().contains("no device 0")),
        "{:?}",
        e.failed
    );
    let (g, inputs) = common::small_net();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    let per = s.nodes_per_backend();
    assert_eq!(per.get("npu-sim"), None, "{per:?}");
    assert!(per.get("cpu").copied().unwrap_or(0) > 0, "{per:?}");
    assert!(
        s.notes.iter().any(|n| n.contains("npu-sim")),
        "{:?}",
        s.notes
    );
    let got = s.run(&inputs).unwrap();
    within_one_step(&got[0], &reference::run_graph(&g, &inputs).unwrap()[0]);
}
