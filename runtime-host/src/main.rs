//! `baton`: run, plan and inspect models on the configured delegates.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use baton_delegate_api::{Dim, Graph, Tensor};
use baton_runtime_host::{default_config, model, npy, Config, Engine, Session};
use clap::{Args, Parser, Subcommand};

#[path = "cli/stream_run.rs"]
mod stream_run;

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
}

#[derive(Args)]
struct ConfigArg {
    /// Config file (TOML). Default: the CPU plugin next to this executable.
    #[arg(long, short)]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct RunArgs {
    /// Model file (.btir or .onnx).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    /// An input as NAME=FILE.npy; repeat for each input.
    #[arg(long = "input", short, value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Write one .npy per output into this directory.
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Run step by step: an --input file with one more dimension than the model's input is
    /// a stack of chunks, fed one per step along its leading axis; other inputs are reused
    /// at every step. Outputs are stacked the same way, except state outputs, whose final
    /// value is written.
    #[arg(long)]
    stream: bool,
    /// With --stream: a state carried from output OUT of one step to input IN of the next.
    /// Inputs not given with --input are paired with the one output of their dtype and
    /// shape when this is not given. A state starts at zeros, or at the file given with
    /// --input IN=FILE.npy.
    #[arg(long = "state", value_name = "IN=OUT", requires = "stream")]
    states: Vec<String>,
}

#[derive(Args)]
struct PlanArgs {
    /// Model file (.btir or .onnx).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
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
    let graph = model::load(&a.model)?;
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
        return stream_run::run(&a, &graph, given);
    }
    let mut inputs = Vec::new();
    let mut bindings = BTreeMap::new();
    for &t in &graph.inputs {
        let decl = &graph.tensors[t];
        let tensor = given.remove(&decl.name).ok_or_else(|| {
            anyhow!(
                "missing input '{}': expected {} {}; pass --input {}=FILE.npy",
                decl.name,
                decl.dtype,
                baton_delegate_api::ir::shape_string(&decl.shape),
                decl.name
            )
        })?;
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
    let mut session = Session::new(&engine, &graph, &bindings)
        .with_context(|| format!("loading {}", a.model.display()))?;
    for n in &session.notes {
        eprintln!("baton: note: {n}");
    }
    let outputs = session.run(&inputs)?;
    let named: Vec<(String, Tensor)> = session
        .graph
        .outputs
        .iter()
        .map(|&t| session.graph.tensors[t].name.clone())
        .zip(outputs)
        .collect();
    write_outputs(a.output_dir.as_deref(), &named)?;
    report_targets(&session);
    Ok(())
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
    let per: Vec<String> = session
        .nodes_per_backend()
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    eprintln!("baton: nodes run by: {}", per.join(", "));
}

fn plan(a: PlanArgs) -> Result<()> {
    let graph = model::load(&a.model)?;
    let mut bindings = BTreeMap::new();
    for d in &a.dims {
        let (k, v) = d
            .split_once('=')
            .ok_or_else(|| anyhow!("--dim '{d}': expected NAME=VALUE"))?;
        bindings.insert(
            k.to_string(),
            v.parse().with_context(|| format!("--dim '{d}'"))?,
        );
    }
    let engine = engine(&a.config)?;
    let session = Session::new(&engine, &graph, &bindings)?;
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
        println!("{}: not loaded: {}", f.label, f.error);
    }
    if engine.backends.is_empty() && engine.failed.is_empty() {
        println!("no plugins configured: everything runs on the portable kernels");
    }
    Ok(())
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
