//! The backends `baton` links by cargo feature register themselves, and a config's
//! `builtin = "…"` reaches them through the same handshake and probe as a plugin file.

use std::collections::BTreeMap;

// As in src/builtins.rs: linking a backend is what registers it.
#[cfg(feature = "cpu")]
use baton_backend_cpu as _;
#[cfg(feature = "npu-sim")]
use baton_backend_npu_sim as _;
#[cfg(feature = "vulkan")]
use baton_backend_vulkan as _;
use baton_runtime_host::plugin::builtin_names;
use baton_runtime_host::{sample, Config, Engine, Session};

#[test]
fn the_builtins_are_exactly_the_enabled_features() {
    let mut got = builtin_names();
    got.sort_unstable();
    let mut want: Vec<&str> = [
        (cfg!(feature = "cpu"), "cpu"),
        (cfg!(feature = "npu-sim"), "npu-sim"),
        (cfg!(feature = "vulkan"), "vulkan"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    want.sort_unstable();
    assert_eq!(got, want);
}

#[cfg(feature = "cpu")]
#[test]
fn the_builtin_cpu_backend_goes_through_the_same_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("baton.toml");
    let body = format!(
        "cache_dir = {:?}\n[[plugin]]\nbuiltin = \"cpu\"\n",
        dir.path().join("cache").display().to_string()
    );
    std::fs::write(&file, body).unwrap();
    let e = Engine::new(Config::load(&file).unwrap()).unwrap();
    let cpu = &e.backends[0];
    assert!(cpu.verdict.passed, "probe: {}", cpu.verdict.detail);
    let graph = sample::tinynet();
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let got = s.run(&[sample::tinynet_input()]).unwrap();
    let want = baton_reference::run_graph(&graph, &[sample::tinynet_input()]).unwrap();
    let diff = got[0]
        .f32s()
        .iter()
        .zip(want[0].f32s())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 1e-5, "max |cpu - reference| = {diff}");
}
