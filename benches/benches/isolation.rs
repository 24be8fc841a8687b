//! What process isolation costs per call: one `Session::run` of a one-node partition (a
//! Relu) on the CPU plugin file, loaded in the host's process and in a plugin process
//! (`isolation = "process"`), for a small tensor (the per-call overhead: two messages over
//! a socket, two context switches) and a 1 MiB one (plus the copies into and out of the
//! shared region).
//!
//! Needs the CPU plugin file and the helper of the same profile:
//! `cargo build --release -p baton-backend-cpu-plugin -p baton-runtime-host`, then
//! `cargo bench -p baton-benches --bench isolation`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};

use baton_delegate_api::{DType, GraphBuilder, OpKind, Tensor};
use baton_runtime_host::config::{Isolation, PluginConfig};
use baton_runtime_host::{Config, Engine, Session};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// `target/<profile>/libbaton_backend_cpu.so`, beside this bench's `deps/` folder.
fn cpu_plugin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join(format!(
        "{}baton_backend_cpu{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    p.is_file().then_some(p)
}

fn engine(plugin: &Path, isolation: Isolation) -> Engine {
    let mut cfg = Config {
        cache_dir: Some(std::env::temp_dir().join("baton-bench-cache")),
        ..Config::default()
    };
    cfg.plugins.push(PluginConfig {
        path: Some(plugin.to_path_buf()),
        isolation,
        ..Default::default()
    });
    Engine::new(cfg).expect("engine")
}

fn bench_isolation(c: &mut Criterion) {
    let Some(plugin) = cpu_plugin() else {
        eprintln!(
            "skipping: the CPU plugin file is not built for this profile \
             (cargo build --release -p baton-backend-cpu-plugin -p baton-runtime-host)"
        );
        return;
    };
    let mut group = c.benchmark_group("isolation");
    for (label, elements) in [("relu_256B", 64usize), ("relu_1MiB", 256 * 1024)] {
        let mut b = GraphBuilder::new("one_relu");
        let x = b.input_fixed("x", DType::F32, &[1, elements]);
        let y = b.node(OpKind::Relu, &[x], &[]).expect("relu");
        b.output(y);
        let graph = b.finish().expect("graph");
        let values: Vec<f32> = (0..elements).map(|i| (i % 7) as f32 - 3.0).collect();
        let input = vec![Tensor::from_f32(&[1, elements], &values)];
        for isolation in [Isolation::InProcess, Isolation::Process] {
            let engine = engine(&plugin, isolation);
            let backend = &engine.backends[0];
            assert!(
                backend.verdict.passed,
                "{}: {}",
                isolation.as_str(),
                backend.verdict.detail
            );
            let mut session = Session::new(&engine, &graph, &BTreeMap::new()).expect("session");
            assert_eq!(session.nodes_per_backend().get("cpu"), Some(&1));
            let id = BenchmarkId::new(label, isolation.as_str());
            group.bench_function(id, |b| {
                b.iter(|| black_box(session.run(&input).expect("run")))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_isolation);
criterion_main!(benches);
