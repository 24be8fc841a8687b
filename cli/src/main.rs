//! `baton`: run, plan and inspect models on the configured delegates.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use baton_delegate_api::{DType, Dim, Graph, Tensor};
use baton_runtime_host::error::TensorType;
use baton_runtime_host::{default_config, npy, trace, BoundedSession, Config, Engine, Session};
use clap::{Args, Parser, Subcommand};

mod builtins;
#[path = "cli/compile.rs"]
mod compile;
#[path = "cli/dims.rs"]
mod dims;
#[path = "cli/model_file.rs"]
mod model_file;
#[path = "cli/stream_run.rs"]
mod stream_run;

use model_file::{ModelFile, ProgramArgs};

/// Baton: on-device inference across backend delegates.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model and print or save its outputs.
    Run(RunArgs),
    /// Show how a model is split across backends, and why.
    Plan(PlanArgs),
    /// List the configured plugins, their devices and probe verdicts.
    Devices(ConfigArg),
    /// Time a model: warm-up runs, then timed runs; median, p90 and min latency.
    Bench(BenchArgs),
    /// Compile a model ahead of time into a .baton program for `run`, `plan` and `bench`.
    Compile(compile::CompileArgs),
}

#[derive(Args)]
struct BenchArgs {
    /// Model file (.btir or .onnx) or compiled program (.baton).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    program: ProgramArgs,
    /// Threads for every plugin with a `threads` option (default: the config's, else the
    /// plugin's own default).
    #[arg(long)]
    threads: Option<u32>,
    /// Timed runs.
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// An input as NAME=FILE.npy. Inputs not given are synthesised: floats uniform in
    /// [-1, 1) from a fixed seed, integers and bools zero (give real ones where values
    /// matter, e.g. token ids or a sample rate).
    #[arg(long = "input", short, value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Bind a symbolic dimension of a synthesised input, NAME=VALUE.
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    dims: Vec<String>,
    /// Print one JSON line instead of text.
    #[arg(long)]
    json: bool,
    /// Loads timed for `load_ms` (the median is reported).
    #[arg(long, default_value_t = 5)]
    load_runs: usize,
}

#[derive(Args)]
struct ConfigArg {
    /// Config file (TOML). Default: the CPU plugin next to this executable.
    #[arg(long, short)]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct RunArgs {
    /// Model file (.btir or .onnx) or compiled program (.baton).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    program: ProgramArgs,
    /// An input as NAME=FILE.npy; repeat for each input.
    #[arg(long = "input", short, value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Write one .npy per output into this directory.
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Declare the upper bound of a symbolic dimension, NAME=MAX (adds to or overrides the
    /// config's `[bounds]`). With bounds, memory is planned once at the bounds and an input
    /// above one is refused.
    #[arg(long = "bound", value_name = "NAME=MAX")]
    bounds: Vec<String>,
    /// Run step by step: an --input file with one more dimension than the model's input is
    /// a stack of chunks, fed one per step along its leading axis; other inputs are reused
    /// at every step. Outputs are stacked the same way, except state outputs, whose final
    /// value is written.
    #[arg(long)]
    stream: bool,
    /// With --stream: a state carried from output OUT of one step to input IN of the next.
    /// Inputs not given with --input are paired with the one output of their dtype and
    /// shape when this is not given. A state starts at zeros, or at the file given with
    /// --input IN=FILE.npy, which holds one value of the input's own shape (a stack of
    /// chunks, one dimension more, is refused: the initial state is one value, not one per
    /// step). One output carries one state.
    #[arg(long = "state", value_name = "IN=OUT", requires = "stream")]
    states: Vec<String>,
    /// Print where the run's time went, as a table: every host node and delegated partition
    /// as the host timed it, with each plugin's own events (ABI 1.1 profile events:
    /// command, estimated cycles, wall time) under its partition.
    #[arg(long)]
    profile: bool,
    /// Write the same timeline as a Chrome trace (JSON; open it in Perfetto or
    /// chrome://tracing).
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
}

#[derive(Args)]
struct PlanArgs {
    /// Model file (.btir or .onnx) or compiled program (.baton).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    program: ProgramArgs,
    /// Bind a symbolic dimension, NAME=VALUE (inputs given with --input bind theirs).
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    dims: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => run(a),
        Command::Plan(a) => plan(a),
        Command::Devices(a) => devices(a),
        Command::Bench(a) => bench(a),
        Command::Compile(a) => compile::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("baton: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn engine(arg: &ConfigArg) -> Result<Engine> {
    let config = match &arg.config {
        Some(p) => Config::load(p)?,
        None => {
            let (cfg, note) = default_config();
            if let Some(n) = note {
                eprintln!("baton: note: {n}");
            }
            cfg
        }
    };
    Ok(Engine::new(config)?)
}

fn run(a: RunArgs) -> Result<()> {
    let mut model = ModelFile::open(&a.model, &a.program)?;
    let graph = model.graph.clone();
    let mut given: BTreeMap<String, Tensor> = BTreeMap::new();
    for spec in &a.inputs {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("--input '{spec}': expected NAME=FILE.npy"))?;
        if graph.inputs.iter().all(|&t| graph.tensors[t].name != name) {
            bail!(
                "--input '{name}': the model has no such input (inputs: {})",
                input_list(&graph)
            );
        }
        given.insert(name.to_string(), npy::read(Path::new(file))?);
    }
    if a.stream {
        return stream_run::run(&a, &mut model, given);
    }
    let mut inputs = Vec::new();
    let mut bindings = BTreeMap::new();
    for &t in &graph.inputs {
        let decl = &graph.tensors[t];
        let tensor = given.remove(&decl.name).ok_or_else(|| {
            anyhow!(
                "missing input '{}': expected {}; pass --input {}=FILE.npy",
                decl.name,
                TensorType::declared(decl.dtype, &decl.shape),
                decl.name
            )
        })?;
        // numpy's default float64 feeds an f32 input, narrowed (a convenience kept from
        // before the IR had f64).
        let tensor = if tensor.dtype == DType::F64 && decl.dtype == DType::F32 {
            let v: Vec<f32> = tensor.to_f64().into_iter().map(|x| x as f32).collect();
            Tensor::from_f32(&tensor.shape, &v)
        } else {
            tensor
        };
        if tensor.shape.len() == decl.shape.len() {
            for (d, &v) in decl.shape.iter().zip(&tensor.shape) {
                if let Dim::Sym(s) = d {
                    bindings.insert(s.clone(), v);
                }
            }
        }
        inputs.push(tensor);
    }
    let engine = engine(&a.config)?;
    let mut bounds = engine.config.bounds.clone();
    bounds.extend(model.bounds());
    for spec in &a.bounds {
        let (k, v) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("--bound '{spec}': expected NAME=MAX"))?;
        bounds.insert(
            k.to_string(),
            v.parse().with_context(|| format!("--bound '{spec}'"))?,
        );
    }
    let (outputs, per_backend) = if bounds.is_empty() {
        let mut session = model.session(&engine, &bindings)?;
        for n in &session.notes {
            eprintln!("baton: note: {n}");
        }
        session.set_profiling(a.profile || a.trace.is_some());
        let outputs = session.run(&inputs)?;
        if a.profile {
            print_profile(session.timeline());
        }
        if let Some(path) = &a.trace {
            let model = a.model.display().to_string();
            trace::write_chrome_trace(path, &model, session.timeline())
                .with_context(|| format!("writing the trace {}", path.display()))?;
            eprintln!("baton: trace written to {}", path.display());
        }
        (outputs, session.nodes_per_backend())
    } else {
        if a.profile || a.trace.is_some() {
            eprintln!(
                "baton: note: --profile and --trace are not available with --bound yet; ignored"
            );
        }
        let mut session = BoundedSession::new(&engine, &graph, &bounds)
            .with_context(|| format!("loading {}", a.model.display()))?;
        let p = session.arena_plan();
        eprintln!(
            "baton: memory planned at the bounds {}: arena {} B (naive {} B, lower bound {} B)",
            bound_list(&bounds),
            p.arena_size,
            p.naive_size,
            p.lower_bound
        );
        let outputs = session.run(&inputs)?;
        (outputs, session.last_nodes_per_backend())
    };
    let named: Vec<(String, Tensor)> = graph
        .outputs
        .iter()
        .map(|&t| graph.tensors[t].name.clone())
        .zip(outputs)
        .collect();
    write_outputs(a.output_dir.as_deref(), &named)?;
    report_per_backend(&per_backend);
    Ok(())
}

/// Prints the run's timeline: one row per host step, one per delegated partition followed
/// by its plugin's events, and the total the host measured.
fn print_profile(steps: &[trace::StepTiming]) {
    println!(
        "{:<24} {:<18} {:<48} {:>12} {:>10}",
        "target", "kind", "step", "cycles", "wall_us"
    );
    let us = |ns: u64| ns as f64 / 1e3;
    for s in steps {
        println!(
            "{:<24} {:<18} {:<48} {:>12} {:>10.1}",
            s.target,
            s.kind,
            s.name,
            "",
            us(s.dur_ns)
        );
        for e in &s.events {
            println!(
                "{:<24} {:<18} {:<48} {:>12} {:>10.1}",
                "",
                e.kind,
                format!("  {}", e.name),
                e.cycles,
                us(e.wall_ns)
            );
        }
        if s.kind == "partition" && s.events.is_empty() {
            println!("{:<24} {:<18} {:<48}", "", "", "  (no events reported)");
        }
    }
    let total: u64 = steps.iter().map(|s| s.dur_ns).sum();
    let host: u64 = steps
        .iter()
        .filter(|s| s.target.starts_with("host"))
        .map(|s| s.dur_ns)
        .sum();
    println!(
        "{:<24} {:<18} {:<48} {:>12} {:>10.1}",
        "total",
        "",
        format!("{} steps, {:.1} us on the host", steps.len(), us(host)),
        "",
        us(total)
    );
}

/// Writes each output as `DIR/NAME.npy`, or prints a summary of it without a directory.
fn write_outputs(dir: Option<&Path>, outputs: &[(String, Tensor)]) -> Result<()> {
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for (name, out) in outputs {
        match dir {
            Some(dir) => {
                let path = dir.join(format!("{}.npy", file_safe(name)));
                npy::write(&path, out)?;
                println!(
                    "{name}: {} {:?} -> {}",
                    out.dtype,
                    out.shape,
                    path.display()
                );
            }
            None => println!("{}", summary(name, out)),
        }
    }
    Ok(())
}

fn report_targets(session: &Session<'_>) {
    report_per_backend(&session.nodes_per_backend());
}

fn report_per_backend(per: &BTreeMap<String, usize>) {
    let per: Vec<String> = per.iter().map(|(k, v)| format!("{k} {v}")).collect();
    eprintln!("baton: nodes run by: {}", per.join(", "));
}

fn plan(a: PlanArgs) -> Result<()> {
    let mut model = ModelFile::open(&a.model, &a.program)?;
    let bindings = dims::parse(&a.dims, "--dim", "NAME=VALUE", &model.graph)?;
    let engine = engine(&a.config)?;
    let session = model.session(&engine, &bindings)?;
    println!(
        "model {} ({} nodes)",
        a.model.display(),
        session.graph.nodes.len()
    );
    for n in &session.notes {
        println!("note: {n}");
    }
    print!("{}", session.plan.render(&session.graph));
    for (label, branch) in session.branches() {
        match branch {
            Ok(b) => {
                println!("{label} (a session of its own):");
                for line in b.plan.render(&b.graph).lines() {
                    println!("  {line}");
                }
            }
            Err(why) => println!("{label}: cannot run for these input shapes: {why}"),
        }
    }
    let per: Vec<String> = session
        .nodes_per_backend()
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!("nodes per target: {}", per.join(", "));
    let p = &session.arena_plan;
    println!(
        "memory: arena {} bytes; naive (one buffer per tensor) {} bytes; lower bound (peak live) {} bytes",
        p.arena_size, p.naive_size, p.lower_bound
    );
    Ok(())
}

fn devices(a: ConfigArg) -> Result<()> {
    let engine = engine(&a)?;
    println!(
        "probe cache: {}",
        baton_runtime_host::probe::cache_file(&engine.cache_dir).display()
    );
    for b in &engine.backends {
        let lib = &b.ctx.lib;
        println!(
            "{} (plugin {} {}, ABI 1.{}, build {}) from {}",
            b.name, lib.name, lib.version, lib.abi_minor, lib.build_id, lib.source
        );
        println!(
            "  device {}: {} [driver {}]",
            b.device.index, b.device.name, b.device.driver_version
        );
        println!(
            "  probe: {} ({}) - {}; plugin claims available: {}",
            if b.verdict.passed { "passed" } else { "FAILED" },
            if b.verdict.from_cache {
                "from cache"
            } else {
                "measured now"
            },
            b.verdict.detail,
            b.verdict.claimed_available
        );
    }
    for f in &engine.failed {
        // Plugin errors name the file or plugin; the label is said only when they do not.
        let error = f.error.to_string();
        if error.contains(&f.label) {
            println!("not loaded: {error}");
        } else {
            println!("{}: not loaded: {error}", f.label);
        }
    }
    if engine.backends.is_empty() && engine.failed.is_empty() {
        println!("no plugins configured: everything runs on the portable kernels");
    }
    Ok(())
}

fn bench(a: BenchArgs) -> Result<()> {
    let mut model = ModelFile::open(&a.model, &a.program)?;
    let graph = model.graph.clone();
    let mut bindings = dims::parse(&a.dims, "--dim", "NAME=VALUE", &graph)?;
    let mut given: BTreeMap<String, Tensor> = BTreeMap::new();
    for spec in &a.inputs {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("--input '{spec}': expected NAME=FILE.npy"))?;
        if graph.inputs.iter().all(|&t| graph.tensors[t].name != name) {
            bail!(
                "--input '{name}': the model has no such input (inputs: {})",
                input_list(&graph)
            );
        }
        given.insert(name.to_string(), npy::read(Path::new(file))?);
    }
    let mut inputs = Vec::new();
    let mut synthesised = Vec::new();
    for (k, &t) in graph.inputs.iter().enumerate() {
        let decl = &graph.tensors[t];
        if let Some(x) = given.remove(&decl.name) {
            if x.shape.len() == decl.shape.len() {
                for (d, &v) in decl.shape.iter().zip(&x.shape) {
                    if let Dim::Sym(s) = d {
                        bindings.insert(s.clone(), v);
                    }
                }
            }
            inputs.push(x);
            continue;
        }
        let shape: Vec<usize> = decl
            .shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(v) => Ok(*v),
                Dim::Sym(s) => bindings.get(s).copied().ok_or_else(|| {
                    anyhow!(
                        "input '{}' has symbolic dimension '{s}': pass --dim {s}=VALUE or --input {}=FILE.npy",
                        decl.name,
                        decl.name
                    )
                }),
            })
            .collect::<Result<_>>()?;
        inputs.push(synthetic(decl.dtype, &shape, k as u64));
        synthesised.push(decl.name.clone());
    }
    let mut config = match &a.config.config {
        Some(p) => Config::load(p)?,
        None => {
            let (cfg, note) = default_config();
            if let Some(n) = note {
                eprintln!("baton: note: {n}");
            }
            cfg
        }
    };
    if a.threads.is_some() {
        config.threads = a.threads;
    }
    let threads = config.threads;
    let engine = Engine::new(config)?;
    let load_ms = model.load_ms(&engine, &bindings, a.load_runs)?;
    let mut session = model.session(&engine, &bindings)?;
    if !synthesised.is_empty() && !a.json {
        eprintln!("baton: synthesised inputs: {}", synthesised.join(", "));
    }
    let r = baton_runtime_host::bench::measure(&mut session, &inputs, a.warmup, a.runs)?;
    let per = session.nodes_per_backend();
    let held = session.held_bytes();
    // The threads each plugin was actually created with, as its options say; "default"
    // where neither the config nor the command line set them.
    let threads_text = threads.map_or("default".to_string(), |n| n.to_string());
    if a.json {
        let line = serde_json::json!({
            "model": a.model.display().to_string(),
            "median_ms": r.median_ms,
            "p90_ms": r.p90_ms,
            "min_ms": r.min_ms,
            "max_ms": r.max_ms,
            "mean_ms": r.mean_ms,
            "runs": r.samples_ms.len(),
            "warmup": r.warmup,
            "threads": threads.map_or(serde_json::Value::Null, |n| n.into()),
            "nodes_per_backend": per,
            "synthesised_inputs": synthesised,
            "load_ms": load_ms,
            "load_runs": a.load_runs.max(1),
            "weights_bytes": held.0,
            "arena_bytes": held.1,
        });
        println!("{line}");
    } else {
        println!(
            "{}: median {:.4} ms, p90 {:.4} ms, min {:.4} ms, max {:.4} ms over {} runs (after {} warm-up), threads {threads_text}",
            a.model.display(),
            r.median_ms,
            r.p90_ms,
            r.min_ms,
            r.max_ms,
            r.samples_ms.len(),
            r.warmup
        );
        let per: Vec<String> = per.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("nodes run by: {}", per.join(", "));
        println!(
            "load: median {load_ms:.3} ms over {} loads (from opening the file to a session ready to run)",
            a.load_runs.max(1)
        );
    }
    Ok(())
}

/// A deterministic input: floats uniform in [-1, 1) (a small LCG, seeded per input), every
/// other dtype zero.
fn synthetic(dtype: baton_delegate_api::DType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    match dtype {
        DType::F32 => Tensor::from_f32(shape, &(0..n).map(|_| next()).collect::<Vec<_>>()),
        DType::F16 => {
            let v: Vec<u16> = (0..n)
                .map(|_| half::f16::from_f32(next()).to_bits())
                .collect();
            Tensor::from_bytes(dtype, shape, bytemuck::cast_slice(&v))
        }
        _ => Tensor::zeros(dtype, shape),
    }
}

fn input_list(g: &Graph) -> String {
    g.inputs
        .iter()
        .map(|&t| g.tensors[t].name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Output file names: every character outside `[A-Za-z0-9_.-]` becomes `_`.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn summary(name: &str, t: &Tensor) -> String {
    let v = t.to_f64();
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let (min, max) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let mean = if finite.is_empty() {
        f64::NAN
    } else {
        finite.iter().sum::<f64>() / finite.len() as f64
    };
    let head: Vec<String> = v.iter().take(6).map(|x| format!("{x:.5}")).collect();
    let argmax = v
        .iter()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |(bi, bv), (i, &x)| {
            if x > bv {
                (i, x)
            } else {
                (bi, bv)
            }
        })
        .0;
    format!(
        "{name}: {} {:?} min {min:.5} max {max:.5} mean {mean:.5} argmax {argmax} first [{}{}]",
        t.dtype,
        t.shape,
        head.join(", "),
        if v.len() > 6 { ", ..." } else { "" }
    )
}

/// `seq=512, batch=4`: bounds as they are given on the command line.
fn bound_list(bounds: &BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = bounds.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(", ")
}
