//! End-to-end latency of the peer models (mobilenet_tiny, transformer_enc2, stream_asr) on
//! the CPU plugin through the normal host path, at 1 and 2 threads, with the inputs the
//! peers were measured on (`../shared/peers/PEERS.md` beside the repository has their figures).
//!
//! The models are read from `../shared/peers/models` beside the repository (or from
//! `$BATON_PEER_MODELS`); a model that is not there is skipped with a message.
//!
//! `cargo bench -p baton-benches --bench models`

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};

// Linked so that it registers itself as the built-in `cpu` backend the engine asks for.
use baton_backend_cpu as _;
use baton_delegate_api::Tensor;
use baton_runtime_host::config::PluginConfig;
use baton_runtime_host::{model, npy, Config, Engine, Session};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// Each model: its folder and file stem, and its inputs (name, file) in graph order.
const MODELS: &[(&str, &[(&str, &str)])] = &[
    ("mobilenet_tiny", &[("image", "input_image.npy")]),
    ("transformer_enc2", &[("input_ids", "input_input_ids.npy")]),
    (
        "stream_asr",
        &[
            ("feats", "input_feats.npy"),
            ("h0", "input_h0.npy"),
            ("c0", "input_c0.npy"),
        ],
    ),
];

fn models_dir() -> PathBuf {
    match std::env::var_os("BATON_PEER_MODELS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/models"),
    }
}

/// The CPU plugin alone, with `threads` threads.
fn cpu_engine(threads: u32) -> Engine {
    let mut cfg = Config {
        cache_dir: Some(std::env::temp_dir().join("baton-bench-cache")),
        threads: Some(threads),
        ..Config::default()
    };
    cfg.plugins.push(PluginConfig {
        builtin: Some("cpu".into()),
        ..Default::default()
    });
    Engine::new(cfg).expect("engine")
}

fn bench_models(c: &mut Criterion) {
    let dir = models_dir();
    let mut group = c.benchmark_group("model");
    group.sample_size(30);
    for &(name, inputs) in MODELS {
        let path = dir.join(name).join(format!("{name}.onnx"));
        if !path.exists() {
            eprintln!("skipping {name}: {} not found", path.display());
            continue;
        }
        let graph = model::load(&path).expect("model loads");
        let tensors: Vec<Tensor> = inputs
            .iter()
            .map(|(_, file)| npy::read(&dir.join(name).join(file)).expect("input .npy"))
            .collect();
        for threads in [1, 2] {
            let engine = cpu_engine(threads);
            let mut session = Session::new(&engine, &graph, &BTreeMap::new()).expect("session");
            let id = BenchmarkId::new(name, format!("{threads}t"));
            group.bench_function(id, |b| {
                b.iter(|| black_box(session.run(&tensors).expect("run")))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_models);
criterion_main!(benches);
