//! Criterion benchmarks: the measured FMA peak of each vector width, the CPU plugin's GEMM on
//! every micro-kernel this CPU runs next to the `gemm` crate, f32 and int8 (read as GFLOP/s
//! and GOP/s; the `gemm-report` binary prints the f32 figures as a table with % of peak),
//! convolutions and element-wise ops through the host's normal path onto the CPU plugin,
//! and the example model end to end on the CPU plugin against the portable reference
//! kernels alone.
//!
//! `cargo bench -p baton-benches --bench kernels` (one thread: the GEMM calls bypass the
//! pool; the engines use the CPU plugin's default thread count).

use std::collections::BTreeMap;
use std::hint::black_box;

use baton_backend_cpu::gemm::MicroKernel;
use baton_backend_cpu::qgemm::{ARows, PackedWeights, QGemm, QKernel, QOut};
use baton_benches::peak::{self, Width};
use baton_benches::{values, GemmProblem};
use baton_delegate_api::{Attr, DType, GraphBuilder, OpKind, Tensor};
use baton_reference as reference;
use baton_runtime_host::config::PluginConfig;
use baton_runtime_host::{sample, Config, Engine, Session};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn bench_gemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm_f32");
    for &(m, n, k) in &[
        (64, 64, 64),
        (128, 256, 64),
        (256, 256, 256),
        (49, 576, 192),
        (512, 512, 512),
    ] {
        let mut p = GemmProblem::new(m, n, k);
        group.throughput(Throughput::Elements(p.flops()));
        for kernel in MicroKernel::available() {
            let id = BenchmarkId::new(kernel.name(), format!("{m}x{n}x{k}"));
            let mut run = p.baton(kernel);
            group.bench_function(id, |bench| bench.iter(&mut run));
        }
        let mut run = p.yardstick();
        group.bench_function(
            BenchmarkId::new("gemm crate", format!("{m}x{n}x{k}")),
            |bench| bench.iter(&mut run),
        );
    }
    group.finish();
}

/// The FMA peak of each vector width, the ceiling the GEMM figures are read against.
fn bench_fma_peak(c: &mut Criterion) {
    let mut group = c.benchmark_group("fma_peak");
    const ITERS: u64 = 100_000;
    for width in Width::available() {
        group.throughput(Throughput::Elements(ITERS * peak::fma_loop(width, 1)));
        group.bench_function(width.name(), |bench| {
            bench.iter(|| black_box(peak::fma_loop(width, ITERS)))
        });
    }
    group.finish();
}

/// The int8 GEMM (u8 x i8 -> i32, requantized to u8 in the epilogue) at the f32 group's
/// shapes, for every int8 kernel this CPU runs: throughput in integer ops (2 per
/// multiply-add), comparable with `gemm_f32`'s GFLOP/s.
fn bench_qgemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm_i8");
    for &(m, n, k) in &[
        (64, 64, 64),
        (128, 256, 64),
        (256, 256, 256),
        (49, 576, 192),
        (512, 512, 512),
    ] {
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        let a: Vec<u8> = (0..m * k + 4).map(|i| (i * 7919 % 255) as u8).collect();
        let b: Vec<i8> = (0..k * n).map(|i| (i * 104_729 % 255) as i8).collect();
        let packed = PackedWeights::pack(1, k, n, |_, kk, j| b[kk * n + j]);
        let out = QOut {
            offset: packed.col_sums().iter().map(|&s| 100 - 3 * s).collect(),
            scale: vec![0.0004; n],
            zp: 126,
            lo: 0,
            hi: 255,
            stage2: None,
        };
        let mut y = vec![0u8; m * n];
        for kernel in QKernel::available() {
            let id = BenchmarkId::new(kernel.name(), format!("{m}x{n}x{k}"));
            let g = QGemm {
                m,
                a: ARows::Strided {
                    data: &a,
                    stride: k,
                },
                w: &packed,
                out: &out,
                ldo: n,
                ints: None,
            };
            group.bench_function(id, |bench| {
                bench.iter(|| {
                    g.run_on_caller(kernel, &mut y);
                    black_box(&y);
                })
            });
        }
    }
    group.finish();
}

fn bench_conv(c: &mut Criterion) {
    let mut group = c.benchmark_group("conv_f32");
    // (channels in, channels out, spatial, kernel, group): a stem, a pointwise and a depthwise layer.
    for &(ci, co, hw, kk, g) in &[(3, 16, 112, 3, 1), (32, 64, 28, 1, 1), (64, 64, 28, 3, 64)] {
        let mut b = GraphBuilder::new("conv");
        let x = b.input_fixed("x", DType::F32, &[1, ci, hw, hw]);
        let w = b.constant_f32("w", &[co, ci / g, kk, kk], &values(co * ci / g * kk * kk));
        let pad = (kk / 2) as i64;
        let y = b
            .node(
                OpKind::Conv,
                &[x, w],
                &[
                    ("pads", Attr::Ints(vec![pad; 4])),
                    ("group", Attr::Int(g as i64)),
                ],
            )
            .expect("valid conv");
        b.output(y);
        let graph = b.finish().expect("valid graph");
        let out_shape = graph.tensors[y].static_shape().expect("static");
        let flops = 2 * out_shape.iter().product::<usize>() * (ci / g) * kk * kk;
        group.throughput(Throughput::Elements(flops as u64));

        let engine = cpu_engine();
        let mut session = Session::new(&engine, &graph, &BTreeMap::new()).expect("session");
        assert_eq!(
            session.nodes_per_backend().get("cpu"),
            Some(&1),
            "the conv runs on the plugin"
        );
        let input = vec![Tensor::from_f32(&[1, ci, hw, hw], &values(ci * hw * hw))];
        let id = BenchmarkId::new("cpu_via_host", format!("{ci}to{co}_{hw}px_k{kk}_g{g}"));
        group.bench_function(id, |bench| {
            bench.iter(|| black_box(session.run(&input).expect("run")))
        });
    }
    group.finish();
}

fn bench_end_to_end(c: &mut Criterion) {
    let mut group = c.benchmark_group("tinynet_end_to_end");
    let graph = sample::tinynet();
    let input = vec![sample::tinynet_input()];
    let engine = cpu_engine();
    let mut session = Session::new(&engine, &graph, &BTreeMap::new()).expect("session");
    group.bench_function("cpu_plugin", |bench| {
        bench.iter(|| black_box(session.run(&input).expect("run")))
    });
    group.bench_function("reference_only", |bench| {
        bench.iter(|| black_box(reference::run_graph(&graph, &input).expect("run")))
    });
    group.finish();
}

/// Element-wise integer ops (the shape and index arithmetic exporters emit, at a size
/// where the kernel dominates), a bitwise op and an inverse trigonometric function, each
/// one node on the CPU plugin through the host.
fn bench_elementwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("elementwise");
    const ROWS: usize = 256;
    const COLS: usize = 1024;
    let n = ROWS * COLS;
    let ints = |dtype: DType, shape: &[usize], nonzero: bool| -> Tensor {
        let len: usize = shape.iter().product();
        let v: Vec<i64> = (0..len as i64)
            .map(|i| {
                let v = (i * 7919) % 2001 - 1000;
                if nonzero && v == 0 {
                    1
                } else {
                    v
                }
            })
            .collect();
        match dtype {
            DType::I32 => {
                let w: Vec<u8> = v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect();
                Tensor::from_bytes(dtype, shape, &w)
            }
            _ => Tensor::from_i64(shape, &v),
        }
    };
    // (name, op, dtype, the second operand's shape, empty for a unary op)
    let cases: [(&str, OpKind, DType, &[usize]); 7] = [
        ("add_i32_bcast", OpKind::Add, DType::I32, &[COLS]),
        ("mul_i64", OpKind::Mul, DType::I64, &[ROWS, COLS]),
        ("sub_i64_bcast", OpKind::Sub, DType::I64, &[COLS]),
        ("mod_i32", OpKind::Mod, DType::I32, &[ROWS, COLS]),
        ("abs_i32", OpKind::Abs, DType::I32, &[]),
        ("and_i64_bcast", OpKind::BitwiseAnd, DType::I64, &[COLS]),
        ("asin_f32", OpKind::Asin, DType::F32, &[]),
    ];
    for (name, op, dtype, other) in cases {
        let mut b = GraphBuilder::new(name);
        let x = b.input_fixed("x", dtype, &[ROWS, COLS]);
        let mut inputs = vec![match dtype {
            DType::F32 => Tensor::from_f32(
                &[ROWS, COLS],
                &(0..n)
                    .map(|i| (i % 2001) as f32 / 1000.0 - 1.0)
                    .collect::<Vec<_>>(),
            ),
            _ => ints(dtype, &[ROWS, COLS], false),
        }];
        let mut operands = vec![x];
        if !other.is_empty() {
            operands.push(b.input_fixed("y", dtype, other));
            inputs.push(ints(dtype, other, true));
        }
        let y = b.node(op, &operands, &[]).expect("valid node");
        b.output(y);
        let graph = b.finish().expect("valid graph");
        group.throughput(Throughput::Elements(n as u64));
        let engine = cpu_engine();
        let mut session = Session::new(&engine, &graph, &BTreeMap::new()).expect("session");
        assert_eq!(
            session.nodes_per_backend().get("cpu"),
            Some(&1),
            "{name} runs on the plugin"
        );
        group.bench_function(name, |bench| {
            bench.iter(|| black_box(session.run(&inputs).expect("run")))
        });
    }
    group.finish();
}

/// The built-in CPU backend through the normal host path (handshake, probe, partition).
fn cpu_engine() -> Engine {
    let mut cfg = Config {
        cache_dir: Some(std::env::temp_dir().join("baton-bench-cache")),
        ..Config::default()
    };
    cfg.plugins.push(PluginConfig {
        builtin: Some("cpu".into()),
        ..Default::default()
    });
    Engine::new(cfg).expect("engine")
}

criterion_group!(
    benches,
    bench_fma_peak,
    bench_gemm,
    bench_qgemm,
    bench_conv,
    bench_elementwise,
    bench_end_to_end
);
criterion_main!(benches);
