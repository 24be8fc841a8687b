//! Process isolation end to end (`isolation = "process"`): the CPU plugin gives the same
//! bits as in the host's process, and a plugin that segfaults, aborts or hangs at any entry
//! point is contained (the watchdog bounds hangs with `timeout_ms`) and the fallback rules
//! apply as for any failing plugin.
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;

use baton_delegate_api::{DType, Graph, GraphBuilder, OpKind, Tensor};
use baton_reference as reference;
use baton_runtime_host::config::Isolation;
use baton_runtime_host::{sample, Config, Engine, Session};
use common::{config, plugin, q};

fn engine(body: &str) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::load(&config(dir.path(), body)).unwrap();
    let e = Engine::new(cfg).unwrap();
    (dir, e)
}

fn cpu(isolation: &str) -> String {
    format!(
        "[[plugin]]\npath = {}\nisolation = \"{isolation}\"\n",
        q(&plugin("baton_backend_cpu"))
    )
}

/// The faulty plugin acting out `action` at `at` (`when`: "always" or "after-probe"), with
/// a `timeout_ms` unless it is 0.
fn faulty(isolation: &str, action: &str, at: &str, when: &str, timeout_ms: u64) -> String {
    let timeout = match timeout_ms {
        0 => String::new(),
        ms => format!("timeout_ms = {ms}\n"),
    };
    format!(
        "[[plugin]]\npath = {}\nisolation = \"{isolation}\"\n{timeout}\
         options = {{ action = \"{action}\", at = \"{at}\", when = \"{when}\" }}\n",
        q(&plugin("baton_faulty_plugin"))
    )
}

/// x -> Relu -> Add(s) -> Relu -> Add(s): every node one the faulty plugin runs; the first
/// Add is also the next state `s_next` of input `s` when streamed.
fn chain() -> (Graph, Vec<Tensor>) {
    let mut b = GraphBuilder::new("chain");
    let x = b.input_fixed("x", DType::F32, &[2, 5]);
    let s = b.input_fixed("s", DType::F32, &[2, 5]);
    let r1 = b.node(OpKind::Relu, &[x], &[]).unwrap();
    let a1 = b.named_node("s_next", OpKind::Add, &[r1, s], &[]).unwrap();
    let r2 = b.node(OpKind::Relu, &[a1], &[]).unwrap();
    let a2 = b.node(OpKind::Add, &[r2, s], &[]).unwrap();
    b.output(a2);
    b.output(a1);
    let xs: Vec<f32> = (0..10).map(|i| i as f32 - 4.5).collect();
    let ss: Vec<f32> = (0..10).map(|i| 1.0 - 0.3 * i as f32).collect();
    (
        b.finish().unwrap(),
        vec![
            Tensor::from_f32(&[2, 5], &xs),
            Tensor::from_f32(&[2, 5], &ss),
        ],
    )
}

#[test]
fn the_cpu_plugin_in_a_process_gives_bit_identical_outputs_and_profiles() {
    let graph = sample::tinynet();
    let inputs = vec![sample::tinynet_input()];
    let mut results = Vec::new();
    for isolation in ["in-process", "process"] {
        let (_d, e) = engine(&cpu(isolation));
        let b = &e.backends[0];
        assert_eq!(b.ctx.lib.isolation().as_str(), isolation);
        assert!(b.verdict.passed, "{isolation}: {}", b.verdict.detail);
        let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
        assert_eq!(s.nodes_per_backend().get("cpu"), Some(&graph.nodes.len()));
        s.set_profiling(true);
        let first = s.run(&inputs).unwrap();
        let events: Vec<(String, String)> = s
            .profile()
            .iter()
            .flat_map(|p| p.events.iter().map(|e| (e.name.clone(), e.kind.clone())))
            .collect();
        // ABI 1.2 `memory` crosses too. In a process the plugin gets plain `init` (the
        // shared region holds a call's bytes only for the call), so it retains nothing.
        for m in s.delegate_memory() {
            let info = m.memory.expect("the CPU plugin reports its memory");
            assert!(
                info.scratch_bytes + info.owned_bytes > 0,
                "{isolation}: {info:?}"
            );
            if isolation == "process" {
                assert_eq!((info.retained_bytes, m.kept_blob_bytes), (0, 0), "{info:?}");
            }
        }
        // A second run reuses the shared region: same bits again.
        let second = s.run(&inputs).unwrap();
        assert_eq!(first[0].bytes(), second[0].bytes(), "{isolation}");
        results.push((first, events));
    }
    let (inproc, isolated) = (&results[0], &results[1]);
    assert_eq!(inproc.0.len(), isolated.0.len());
    for (a, b) in inproc.0.iter().zip(&isolated.0) {
        assert_eq!((a.dtype, &a.shape), (b.dtype, &b.shape));
        assert_eq!(
            a.bytes(),
            b.bytes(),
            "outputs differ between isolation modes"
        );
    }
    assert_eq!(
        inproc.1, isolated.1,
        "profile events differ between isolation modes"
    );
}

/// What a contained fault's message says, per action.
fn death(action: &str) -> &'static str {
    match action {
        "segfault" => "killed by signal 11 (SIGSEGV)",
        "abort" => "killed by signal 6 (SIGABRT)",
        "hang" => "did not return within 300 ms (timeout_ms); the plugin process was killed",
        other => panic!("no death for {other}"),
    }
}

#[test]
fn crashes_and_hangs_at_every_entry_point_are_contained_and_fall_back() {
    let (graph, inputs) = chain();
    let want = reference::run_graph(&graph, &inputs).unwrap();
    // (where the fault strikes, `at`, `when`)
    let points = [
        ("create", "create", "always"),
        ("devices", "devices", "always"),
        ("probe", "execute", "always"),
        ("supports", "supports", "after-probe"),
        ("compile", "compile", "after-probe"),
        ("init", "init", "after-probe"),
        ("execute", "execute", "after-probe"),
    ];
    for action in ["segfault", "abort", "hang"] {
        for (point, at, when) in points {
            let case = format!("{action} at {point}");
            let (_d, e) = engine(&faulty("process", action, at, when, 300));
            let expect = death(action);
            match point {
                "create" | "devices" => {
                    assert!(e.backends.is_empty(), "{case}");
                    let err = e.failed[0].error.to_string();
                    assert!(
                        err.contains("create failed") && err.contains(expect),
                        "{case}: {err}"
                    );
                }
                "probe" => {
                    let v = &e.backends[0].verdict;
                    assert!(!v.passed, "{case}");
                    assert!(v.detail.contains(expect), "{case}: {}", v.detail);
                }
                _ => assert!(e.backends[0].verdict.passed, "{case}"),
            }
            let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
            if matches!(point, "supports" | "compile" | "init") {
                assert!(
                    s.notes
                        .iter()
                        .any(|n| n.contains("faulty dropped") && n.contains(expect)),
                    "{case}: {:?}",
                    s.notes
                );
            }
            let planned = s.nodes_per_backend();
            let got = s.run(&inputs).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.bytes(), w.bytes(), "{case}: the host's answer differs");
            }
            if point == "execute" {
                assert_eq!(planned.get("faulty"), Some(&4), "{case}");
                // The partition ran on the host, and keeps doing so with the process gone.
                assert_eq!(s.nodes_per_backend().get("host"), Some(&4), "{case}");
                let again = s.run(&inputs).unwrap();
                assert_eq!(again[0].bytes(), want[0].bytes(), "{case}");
                let why = e.backends[0].ctx.lib.process_failure().unwrap();
                assert!(why.contains(expect), "{case}: {why}");
            } else {
                assert_eq!(planned.get("host"), Some(&4), "{case}");
            }
        }
    }
}

#[test]
fn an_execute_crash_in_a_stream_keeps_the_state_on_the_host() {
    let (graph, inputs) = chain();
    let x = inputs[0].clone();
    let mut finals = Vec::new();
    for body in [
        String::new(),
        faulty("process", "segfault", "execute", "after-probe", 0),
    ] {
        let (_d, e) = engine(&body);
        let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
        let mut st = s.stream(&[("s", "s_next_out")]).unwrap();
        let mut outs = Vec::new();
        for _ in 0..4 {
            outs.push(st.step(std::slice::from_ref(&x)).unwrap()[0].clone());
        }
        finals.push((outs, st.state("s").unwrap().clone()));
    }
    // The plugin died at the first step; every step ran on the host, from the carried state.
    assert_eq!(finals[0].0.len(), finals[1].0.len());
    for (a, b) in finals[0].0.iter().zip(&finals[1].0) {
        assert_eq!(a.bytes(), b.bytes());
    }
    assert_eq!(finals[0].1.bytes(), finals[1].1.bytes());
}

#[test]
fn errors_and_panics_read_the_same_in_both_modes() {
    let (graph, inputs) = chain();
    for action in ["error", "panic"] {
        let mut messages = Vec::new();
        for isolation in ["in-process", "process"] {
            let body = format!(
                "{}[fallback]\non_execute_error = \"fail\"\n",
                faulty(isolation, action, "execute", "after-probe", 5000)
            );
            let (_d, e) = engine(&body);
            let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
            messages.push(s.run(&inputs).unwrap_err().to_string());
            // A plugin error leaves the process running: the handle is still usable.
            assert_eq!(e.backends[0].ctx.lib.process_failure(), None);
        }
        assert_eq!(messages[0], messages[1], "{action}");
        assert!(messages[0].contains("deliberate"), "{}", messages[0]);
    }
}

#[test]
fn the_in_process_probe_is_bounded_by_timeout_ms() {
    let (graph, inputs) = chain();
    let (_d, e) = engine(&faulty("in-process", "hang", "execute", "always", 300));
    assert!(e.backends.is_empty());
    let err = e.failed[0].error.to_string();
    assert!(
        err.contains("probe failed") && err.contains("did not finish within 300 ms"),
        "{err}"
    );
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let got = s.run(&inputs).unwrap();
    assert_eq!(
        got[0].bytes(),
        reference::run_graph(&graph, &inputs).unwrap()[0].bytes()
    );
}

#[test]
fn verdicts_are_keyed_by_isolation_and_the_watchdogs_are_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    let load = |body: &str| Engine::new(Config::load(&config(dir.path(), body)).unwrap()).unwrap();
    let inproc = load(&cpu("in-process"));
    assert!(!inproc.backends[0].verdict.from_cache);
    let isolated = load(&cpu("process"));
    assert_eq!(isolated.backends[0].ctx.lib.isolation(), Isolation::Process);
    assert!(
        !isolated.backends[0].verdict.from_cache,
        "cached across isolation modes"
    );
    assert!(load(&cpu("process")).backends[0].verdict.from_cache);
    // A probe the watchdog decided is probed again next time.
    let crash = faulty("process", "segfault", "execute", "always", 0);
    for _ in 0..2 {
        let v = &load(&crash).backends[0].verdict;
        assert!(!v.passed && !v.from_cache, "{}", v.detail);
    }
}

#[test]
fn the_process_loads_with_the_hosts_checks() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(plugin("baton_faulty_plugin")).unwrap();
    let cut = dir.path().join("libcut.so");
    // Inside the first loaded segment, past the program headers.
    std::fs::write(&cut, &bytes[..4096]).unwrap();
    let pinned = "0".repeat(64);
    for (path, pin, expect) in [
        (cut.as_path(), None, "not loadable on this host"),
        (
            plugin("baton_faulty_plugin").as_path(),
            Some(&pinned),
            "does not match the pinned",
        ),
    ] {
        let pin = pin
            .map(|p| format!("sha256 = \"{p}\"\n"))
            .unwrap_or_default();
        let body = format!(
            "[[plugin]]\npath = {}\nisolation = \"process\"\n{pin}",
            q(path)
        );
        let e = Engine::new(Config::load(&config(dir.path(), &body)).unwrap()).unwrap();
        let err = e.failed[0].error.to_string();
        assert!(err.contains(expect), "{err}");
        // Said once: the process's message is not wrapped in a second copy of the path.
        assert_eq!(err.matches(&path.display().to_string()).count(), 1, "{err}");
    }
}
