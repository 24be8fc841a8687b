//! Prints the speed of two CPU-plugin paths that a GEMM-shaped measurement misses, as
//! Markdown tables for the issue notes:
//!
//! - **M = 1 products** (a classifier's Gemm, a decoder step's MatMul): one activation row
//!   against packed constant weights, which is bound by reading the weights once, so the
//!   figure is GB/s of weight bytes. First each GEMM kernel of this build called directly,
//!   then a `Gemm` node (`transB = 1`, with bias) run through the host onto the plugin,
//!   then its QDQ form with int8 weights.
//! - **Depthwise convolutions** of MobileNet-like shapes, in GMAC/s: a chain of four
//!   stride-1 layers (so the layout changes at the partition's edges are a small part) or
//!   one stride-2 layer, each followed by Relu, run through the host onto the plugin; in
//!   f32, and in int8 as a QDQ exporter writes the same layers (per-channel int8 weights,
//!   u8 activations quantized after each Relu), which the plugin runs as integer ops.
//! - **Stems**: the first convolution of an image or a one-channel input (few input
//!   channels, which the int8 path computes over im2col rows), f32 and int8 as above, the
//!   input's conversion to channels-last included.
//!
//! The host-path rows load the CPU plugin built into the benches, or with `--plugin PATH`
//! a plugin library (for instance one built from an earlier commit, to measure a change
//! with the same harness); `--isa NAME` passes the plugin's `isa` option. One thread.
//!
//! `cargo run --release -p baton-benches --bin cpu-ops-report [-- --cpu-time] [--plugin
//! PATH] [--isa avx512f|avx2|portable]`
//!
//! `--cpu-time` times by the thread's CPU time instead of the wall clock, for a machine
//! shared with other work (the plugin runs on the calling thread at one thread).

use std::collections::BTreeMap;
use std::path::PathBuf;

use baton_backend_cpu::gemm::MicroKernel;
use baton_benches::{gemm_rate, values, GemmProblem};
use baton_delegate_api::sdk::ProfileEvent;
use baton_delegate_api::{Attr, DType, Graph, GraphBuilder, OpKind, Tensor, TensorData, TensorId};
use baton_runtime_host::config::PluginConfig;
use baton_runtime_host::{Config, Engine, Session};

/// `(n, k)`: output columns and depth of the M = 1 products (MobileNet's and a larger
/// classifier, a transformer's projection).
const GEMV_SHAPES: &[(usize, usize)] = &[(1000, 640), (1000, 1280), (1024, 1024), (4096, 1024)];

/// `(channels, spatial size, kernel, stride)` of the depthwise layers.
const DW_SHAPES: &[(usize, usize, usize, usize)] = &[
    (32, 112, 3, 1),
    (96, 112, 3, 2),
    (144, 56, 3, 1),
    (144, 56, 3, 2),
    (192, 28, 3, 1),
    (72, 28, 5, 1),
    (240, 28, 5, 2),
    (576, 14, 3, 1),
    (960, 7, 3, 1),
];

/// `(input channels, spatial size, kernel, stride, output channels)` of the stems: a
/// MobileNet's, a ResNet's, and a one-channel (grayscale, spectrogram) input's.
const STEM_SHAPES: &[(usize, usize, usize, usize, usize)] =
    &[(3, 224, 3, 2, 16), (3, 224, 7, 2, 64), (1, 128, 3, 1, 16)];

/// Stride-1 layers chained in one graph.
const CHAIN: usize = 4;

struct Args {
    cpu_time: bool,
    plugin: Option<PathBuf>,
    isa: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        cpu_time: false,
        plugin: None,
        isa: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--cpu-time" => args.cpu_time = true,
            "--plugin" => args.plugin = it.next().map(PathBuf::from),
            "--isa" => args.isa = it.next(),
            other => {
                eprintln!(
                    "cpu-ops-report: unknown argument {other:?} (takes --cpu-time, --plugin \
                     PATH, --isa NAME)"
                );
                std::process::exit(2);
            }
        }
    }
    args
}

fn main() {
    let args = parse_args();
    if args.cpu_time && !baton_benches::use_thread_cpu_time() {
        eprintln!("cpu-ops-report: this system does not give a thread's CPU time");
        std::process::exit(2);
    }
    println!("CPU: {}", baton_backend_cpu::gemm::simd_description());
    if args.cpu_time {
        println!("clock: the thread's CPU time");
    }
    match &args.plugin {
        Some(p) => println!("host-path rows: plugin {}", p.display()),
        None => println!("host-path rows: the built-in CPU plugin"),
    }

    println!("\nM = 1 products, GB/s of weights (GFLOP/s), kernels called directly:\n");
    let kernels = MicroKernel::available();
    print!("| 1 x n x k |");
    for k in &kernels {
        print!(" {} |", k.name());
    }
    println!();
    println!("|---|{}", "---|".repeat(kernels.len()));
    for &(n, k) in GEMV_SHAPES {
        let mut p = GemmProblem::new(1, n, k);
        let flops = p.flops();
        print!("| 1x{n}x{k} |");
        for kernel in &kernels {
            let gflops = gemm_rate(flops, p.baton(kernel));
            print!(" {:.1} ({gflops:.1}) |", gflops * 2.0);
        }
        println!();
    }

    let engine = engine(&args);
    println!("\nM = 1 Gemm nodes (transB, bias) through the host, GB/s of weights:\n");
    println!("| 1 x n x k | GB/s | us per run |");
    println!("|---|---|---|");
    for &(n, k) in GEMV_SHAPES {
        let graph = gemv_graph(n, k);
        let input = vec![Tensor::from_f32(&[1, k], &values(k))];
        let secs = seconds_per_run(&engine, &graph, &input);
        let bytes = (4 * n * k) as f64;
        println!(
            "| 1x{n}x{k} | {:.1} | {:.1} |",
            bytes / secs / 1e9,
            secs * 1e6
        );
    }

    println!(
        "\nM = 1 QDQ Gemm nodes (int8 weights, transB) through the host, the Gemm node's own \
         time from the plugin's profile events (median of {PROFILED_RUNS} runs), GB/s of int8 \
         weights:\n"
    );
    println!("| 1 x n x k | GB/s | us per run |");
    println!("|---|---|---|");
    for &(n, k) in GEMV_SHAPES {
        let graph = qgemv_graph(n, k);
        let input = vec![Tensor::from_f32(&[1, k], &values(k))];
        let secs = profiled_seconds(&engine, &graph, &input, |events| {
            let gemm = events.iter().filter(|e| e.name.ends_with("(Gemm)"));
            gemm.map(|e| e.wall_ns).sum()
        });
        println!(
            "| 1x{n}x{k} | {:.1} | {:.1} |",
            (n * k) as f64 / secs / 1e9,
            secs * 1e6
        );
    }

    println!(
        "\nDepthwise Conv + Relu through the host, GMAC/s (stride 1: {CHAIN} layers chained), \
         the Conv nodes' own time from the plugin's profile events (median of {PROFILED_RUNS} \
         runs; the layout changes at the edges, in an uncounted layer before and after, and \
         the copies in and out left out):\n"
    );
    println!(
        "| channels x size, kernel, stride | f32 GMAC/s | us per layer | int8 GMAC/s | us per \
         layer | int8 / f32 speed |"
    );
    println!("|---|---|---|---|---|---|");
    for &(c, hw, kk, s) in DW_SHAPES {
        let layers = if s == 1 { CHAIN } else { 1 };
        let input = vec![Tensor::from_f32(&[1, c, hw, hw], &values(c * hw * hw))];
        let [f32_secs, int8_secs] = [false, true].map(|int8| {
            let (graph, _) = dw_graph(c, hw, kk, s, layers, int8);
            conv_seconds_per_run(&engine, &graph, &input)
        });
        let (_, macs) = dw_graph(c, hw, kk, s, layers, false);
        let rate = |secs: f64| macs as f64 / secs / 1e9;
        let per_layer = |secs: f64| secs * 1e6 / layers as f64;
        println!(
            "| {c} x {hw}x{hw}, {kk}x{kk}, {s} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
            rate(f32_secs),
            per_layer(f32_secs),
            rate(int8_secs),
            per_layer(int8_secs),
            f32_secs / int8_secs
        );
    }

    println!(
        "\nFirst convolutions of few input channels (an image's stem: the input converted to \
         channels-last included, for int8 its QuantizeLinear), Conv + Relu through the host, \
         from the plugin's profile events (median of {PROFILED_RUNS} runs):\n"
    );
    println!("| input, kernel, stride, outputs | f32 us | int8 us | int8 / f32 speed |");
    println!("|---|---|---|---|");
    for &(c, hw, kk, s, m) in STEM_SHAPES {
        let input = vec![Tensor::from_f32(&[1, c, hw, hw], &values(c * hw * hw))];
        let [f32_secs, int8_secs] = [false, true].map(|int8| {
            let graph = stem_graph(c, hw, kk, s, m, int8);
            stem_seconds_per_run(&engine, &graph, &input)
        });
        println!(
            "| {c} x {hw}x{hw}, {kk}x{kk}, {s}, {m} | {:.1} | {:.1} | {:.2} |",
            f32_secs * 1e6,
            int8_secs * 1e6,
            f32_secs / int8_secs
        );
    }
}

/// The CPU plugin (built in, or the library given), one thread.
fn engine(args: &Args) -> Engine {
    let mut cfg = Config {
        cache_dir: Some(std::env::temp_dir().join("baton-bench-cache")),
        ..Config::default()
    };
    let mut options = BTreeMap::new();
    options.insert("threads".to_string(), toml::Value::Integer(1));
    if let Some(isa) = &args.isa {
        options.insert("isa".to_string(), toml::Value::String(isa.clone()));
    }
    cfg.plugins.push(PluginConfig {
        builtin: args.plugin.is_none().then(|| "cpu".into()),
        path: args.plugin.clone(),
        options,
        required: true,
        ..Default::default()
    });
    Engine::new(cfg).expect("engine")
}

/// `y = x · Wᵀ + b` with `x: [1, k]`, `W: [n, k]`.
fn gemv_graph(n: usize, k: usize) -> Graph {
    let mut b = GraphBuilder::new("gemv");
    let x = b.input_fixed("x", DType::F32, &[1, k]);
    let w = b.constant_f32("w", &[n, k], &values(n * k));
    let bias = b.constant_f32("b", &[n], &values(n));
    let y = b
        .node(OpKind::Gemm, &[x, w, bias], &[("transB", Attr::Int(1))])
        .expect("valid gemm");
    b.output(y);
    b.finish().expect("valid graph")
}

/// `x` through QuantizeLinear or DequantizeLinear (`op`) with u8 parameters: scale 0.02
/// and zero point `zp`, constants named after `name`.
fn qdq(b: &mut GraphBuilder, op: OpKind, x: TensorId, name: &str, zp: u8) -> TensorId {
    let s = b.constant_f32(&format!("{name}_s"), &[], &[0.02]);
    let z = b.constant(
        &format!("{name}_z"),
        DType::U8,
        &[],
        TensorData::from_bytes(&[zp]),
    );
    b.node(op, &[x, s, z], &[]).expect("valid (de)quantization")
}

/// Int8 weights of `shape` (scale 0.01 per output channel, the first dimension), through
/// their DequantizeLinear, as a QDQ exporter writes a layer's weights.
fn int8_weights(b: &mut GraphBuilder, name: &str, shape: &[usize]) -> TensorId {
    let (m, n) = (shape[0], shape.iter().product());
    let wq: Vec<i8> = values(n).iter().map(|&v| (v * 100.0) as i8).collect();
    let w = b.constant(name, DType::I8, shape, TensorData::from_slice(&wq));
    let ws = b.constant_f32(&format!("{name}_s"), &[m], &vec![0.01; m]);
    let wz = b.constant(
        &format!("{name}_z"),
        DType::I8,
        &[m],
        TensorData::from_bytes(&vec![0; m]),
    );
    b.node(
        OpKind::DequantizeLinear,
        &[w, ws, wz],
        &[("axis", Attr::Int(0))],
    )
    .expect("valid dq")
}

/// [`gemv_graph`] in the QDQ form (per-row int8 weights, u8 activations, no bias).
fn qgemv_graph(n: usize, k: usize) -> Graph {
    let mut b = GraphBuilder::new("qgemv");
    let x = b.input_fixed("x", DType::F32, &[1, k]);
    let x = qdq(&mut b, OpKind::QuantizeLinear, x, "in", 128);
    let x = qdq(&mut b, OpKind::DequantizeLinear, x, "in_dq", 128);
    let w = int8_weights(&mut b, "w", &[n, k]);
    let y = b
        .node(OpKind::Gemm, &[x, w], &[("transB", Attr::Int(1))])
        .expect("valid gemm");
    let y = qdq(&mut b, OpKind::QuantizeLinear, y, "out", 128);
    let y = qdq(&mut b, OpKind::DequantizeLinear, y, "out_dq", 128);
    b.output(y);
    b.finish().expect("valid graph")
}

/// `layers` depthwise convolutions (`c` channels, `kk x kk`, stride `s`, same padding)
/// each followed by Relu, and their multiply-adds; between two more stride-1 layers,
/// which take the layout changes at the partition's edges (f32 converts inside the first
/// and last Conv; int8 in the QuantizeLinear before and DequantizeLinear after) and are
/// not counted (see [`conv_seconds_per_run`]). `int8`: the QDQ form of the same layers
/// (u8 activations, the input's zero point 128 and every Relu's 0), the input quantized
/// first and the result dequantized last.
fn dw_graph(c: usize, hw: usize, kk: usize, s: usize, layers: usize, int8: bool) -> (Graph, usize) {
    let mut b = GraphBuilder::new("depthwise");
    let mut x = b.input_fixed("x", DType::F32, &[1, c, hw, hw]);
    if int8 {
        x = qdq(&mut b, OpKind::QuantizeLinear, x, "in", 128);
    }
    let pad = (kk / 2) as i64;
    let mut macs = 0;
    let mut size = hw;
    for layer in 0..layers + 2 {
        let measured = (1..=layers).contains(&layer);
        let s = if measured { s } else { 1 };
        let attrs = [
            ("pads", Attr::Ints(vec![pad; 4])),
            ("strides", Attr::Ints(vec![s as i64; 2])),
            ("group", Attr::Int(c as i64)),
        ];
        let shape = [c, 1, kk, kk];
        let y = if int8 {
            let zp = if layer == 0 { 128 } else { 0 };
            let xd = qdq(
                &mut b,
                OpKind::DequantizeLinear,
                x,
                &format!("dq{layer}"),
                zp,
            );
            let w = int8_weights(&mut b, &format!("w{layer}"), &shape);
            b.node(OpKind::Conv, &[xd, w], &attrs).expect("valid conv")
        } else {
            let w = b.constant_f32(&format!("w{layer}"), &shape, &values(c * kk * kk));
            let bias = b.constant_f32(&format!("b{layer}"), &[c], &values(c));
            b.node(OpKind::Conv, &[x, w, bias], &attrs)
                .expect("valid conv")
        };
        size = (size + 2 * pad as usize - kk) / s + 1;
        if measured {
            macs += c * size * size * kk * kk;
        }
        x = b.node(OpKind::Relu, &[y], &[]).expect("valid relu");
        if int8 {
            x = qdq(&mut b, OpKind::QuantizeLinear, x, &format!("q{layer}"), 0);
        }
    }
    if int8 {
        x = qdq(&mut b, OpKind::DequantizeLinear, x, "out", 0);
    }
    b.output(x);
    (b.finish().expect("valid graph"), macs)
}

/// A stem, `c` input channels, `kk x kk`, stride `s`, `m` outputs, same padding, and
/// Relu, followed by a 1x1 convolution that keeps its output channels-last as a model's
/// next layer does (uncounted). `int8`: the QDQ form of both, as in [`dw_graph`].
fn stem_graph(c: usize, hw: usize, kk: usize, s: usize, m: usize, int8: bool) -> Graph {
    let mut b = GraphBuilder::new("stem");
    let mut x = b.input_fixed("x", DType::F32, &[1, c, hw, hw]);
    if int8 {
        x = qdq(&mut b, OpKind::QuantizeLinear, x, "in", 128);
    }
    for (layer, (ci, k, st, zp)) in [(c, kk, s, 128), (m, 1, 1, 0)].into_iter().enumerate() {
        let pad = (k / 2) as i64;
        let attrs = [
            ("pads", Attr::Ints(vec![pad; 4])),
            ("strides", Attr::Ints(vec![st as i64; 2])),
        ];
        let shape = [m, ci, k, k];
        let w = if int8 {
            x = qdq(
                &mut b,
                OpKind::DequantizeLinear,
                x,
                &format!("dq{layer}"),
                zp,
            );
            int8_weights(&mut b, &format!("w{layer}"), &shape)
        } else {
            b.constant_f32(&format!("w{layer}"), &shape, &values(m * ci * k * k))
        };
        let y = b.node(OpKind::Conv, &[x, w], &attrs).expect("valid conv");
        x = b.node(OpKind::Relu, &[y], &[]).expect("valid relu");
        if int8 {
            x = qdq(&mut b, OpKind::QuantizeLinear, x, &format!("q{layer}"), 0);
        }
    }
    if int8 {
        x = qdq(&mut b, OpKind::DequantizeLinear, x, "out", 0);
    }
    b.output(x);
    b.finish().expect("valid graph")
}

/// Runs whose profile [`conv_seconds_per_run`] takes the median of.
const PROFILED_RUNS: usize = 200;

/// Seconds per run that the Conv nodes of `graph` but its first and last take on
/// `engine` (every node on the plugin), as the plugin's profile events report them: the
/// median over [`PROFILED_RUNS`] runs of their sum.
fn conv_seconds_per_run(engine: &Engine, graph: &Graph, input: &[Tensor]) -> f64 {
    profiled_seconds(engine, graph, input, |events| {
        let convs: Vec<u64> = events
            .iter()
            .filter(|e| e.name.ends_with("(Conv)"))
            .map(|e| e.wall_ns)
            .collect();
        assert!(convs.len() > 2, "the plugin reports every Conv node");
        convs[1..convs.len() - 1].iter().sum()
    })
}

/// Seconds per run of the first Conv node of `graph` on `engine` and of the
/// QuantizeLinear nodes before it (an int8 stem's input conversion, which the f32 stem
/// does inside its Conv), from the plugin's profile events as [`conv_seconds_per_run`].
fn stem_seconds_per_run(engine: &Engine, graph: &Graph, input: &[Tensor]) -> f64 {
    profiled_seconds(engine, graph, input, |events| {
        let conv = events
            .iter()
            .position(|e| e.name.ends_with("(Conv)"))
            .expect("the plugin reports every Conv node");
        let quant = events[..conv]
            .iter()
            .filter(|e| e.name.ends_with("(QuantizeLinear)"));
        events[conv].wall_ns + quant.map(|e| e.wall_ns).sum::<u64>()
    })
}

/// The median over [`PROFILED_RUNS`] runs of `graph` on `engine` (every node on the
/// plugin) of the nanoseconds `pick` sums from the run's profile events, in seconds.
fn profiled_seconds(
    engine: &Engine,
    graph: &Graph,
    input: &[Tensor],
    pick: impl Fn(&[ProfileEvent]) -> u64,
) -> f64 {
    let mut session = Session::new(engine, graph, &BTreeMap::new()).expect("session");
    assert_eq!(
        session.nodes_per_backend().get("cpu"),
        Some(&graph.nodes.len()),
        "every node runs on the plugin"
    );
    session.set_profiling(true);
    let mut times: Vec<u64> = (0..PROFILED_RUNS + 5)
        .map(|_| {
            std::hint::black_box(session.run(input).expect("run"));
            let events: Vec<ProfileEvent> = session
                .profile()
                .into_iter()
                .flat_map(|p| p.events)
                .collect();
            pick(&events)
        })
        .skip(5)
        .collect();
    times.sort_unstable();
    assert!(times[0] > 0, "the plugin reports its nodes' time");
    times[times.len() / 2] as f64 * 1e-9
}

/// Seconds per run of `graph` on `engine`, every node on the plugin: the median of the
/// rates [`gemm_rate`] measures (a run counted as one operation).
fn seconds_per_run(engine: &Engine, graph: &Graph, input: &[Tensor]) -> f64 {
    let mut session = Session::new(engine, graph, &BTreeMap::new()).expect("session");
    let nodes = graph.nodes.len();
    assert_eq!(
        session.nodes_per_backend().get("cpu"),
        Some(&nodes),
        "every node runs on the plugin"
    );
    let runs_per_sec = gemm_rate(1_000_000_000, || {
        std::hint::black_box(session.run(input).expect("run"));
    });
    1.0 / runs_per_sec
}
