//! `baton run`: a model run once on given inputs (or step by step, see [`stream`]).

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use baton_delegate_api::Tensor;
use baton_runtime_host::{trace, BoundedSession};
use clap::Args;

use crate::config::{engine, ConfigArg};
use crate::inputs::given_inputs;
use crate::model_file::{ModelFile, ProgramArgs};
use crate::outputs::{report_per_backend, write_outputs};

mod check;
mod stream;

#[derive(Args)]
pub struct RunArgs {
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
    /// Also run each delegated partition on the reference executor with the same inputs
    /// and print, per partition and output, the max abs/rel error and ULPs against the
    /// conformance kit's tolerances, and the first node past tolerance (found by running
    /// prefixes of the partition on its plugin).
    #[arg(long, conflicts_with = "stream")]
    check: bool,
    /// With --check: print the report as JSON, alone on stdout (the outputs are then
    /// written only with --output-dir).
    #[arg(long, requires = "check")]
    json: bool,
}

/// Runs `a.model` on the inputs given and writes or prints its outputs.
pub fn run(a: RunArgs) -> Result<()> {
    let mut model = ModelFile::open(&a.model, &a.program)?;
    let graph = model.graph.clone();
    let mut given = given_inputs(&graph, &a.inputs)?;
    if a.stream {
        return stream::run(&a, &mut model, given);
    }
    let mut inputs = Vec::new();
    for &t in &graph.inputs {
        let decl = &graph.tensors[t];
        inputs.push(given.remove(&decl.name).ok_or_else(|| {
            anyhow!(
                "missing input '{}': expected {}; pass --input {}=FILE.npy",
                decl.name,
                baton_runtime_host::error::TensorType::declared(decl.dtype, &decl.shape),
                decl.name
            )
        })?);
    }
    let bindings = baton_runtime_host::inputs::bindings(&graph, &inputs);
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
        let values = baton_runtime_host::inputs::values(&graph, &inputs);
        let mut session = model.session(&engine, &bindings, &values)?;
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
        if a.check {
            let report = session
                .check(&inputs)
                .with_context(|| format!("checking {}", a.model.display()))?;
            check::print(&report, a.json)?;
        }
        (outputs, session.nodes_per_backend())
    } else {
        if a.profile || a.trace.is_some() || a.check {
            eprintln!(
                "baton: note: --profile, --trace and --check are not available with --bound yet; ignored"
            );
        }
        let mut session = BoundedSession::new(&engine, &graph, &bounds)
            .with_context(|| format!("loading {}", a.model.display()))?;
        let p = session.arena_plan();
        eprintln!(
            "baton: memory planned at the bounds {}: arena {} B (naive {} B, lower bound {} B)",
            crate::dims::bound_list(&bounds),
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
    if !(a.json && a.output_dir.is_none()) {
        write_outputs(a.output_dir.as_deref(), &named)?;
    }
    report_per_backend(&per_backend);
    Ok(())
}

/// Prints the run's timeline: one row per host step, one per delegated partition followed
/// by its plugin's events, an If's branch steps under it, and the total the host measured.
fn print_profile(steps: &[trace::StepTiming]) {
    println!(
        "{:<24} {:<18} {:<48} {:>12} {:>10}",
        "target", "kind", "step", "cycles", "wall_us"
    );
    print_steps(steps, 0);
    let total: u64 = steps.iter().map(|s| s.dur_ns).sum();
    println!(
        "{:<24} {:<18} {:<48} {:>12} {:>10.1}",
        "total",
        "",
        format!(
            "{} steps, {:.1} us on the host",
            steps.len(),
            host_ns(steps) as f64 / 1e3
        ),
        "",
        total as f64 / 1e3
    );
}

/// The rows of `steps`, indented by `depth`, with what ran inside each below it.
fn print_steps(steps: &[trace::StepTiming], depth: usize) {
    let us = |ns: u64| ns as f64 / 1e3;
    let pad = |name: &str, depth: usize| format!("{:indent$}{name}", "", indent = 2 * depth);
    for s in steps {
        println!(
            "{:<24} {:<18} {:<48} {:>12} {:>10.1}",
            s.target,
            s.kind,
            pad(&s.name, depth),
            "",
            us(s.dur_ns)
        );
        for e in &s.events {
            println!(
                "{:<24} {:<18} {:<48} {:>12} {:>10.1}",
                "",
                e.kind,
                pad(&e.name, depth + 1),
                e.cycles,
                us(e.wall_ns)
            );
        }
        if s.kind == "partition" && s.events.is_empty() {
            println!(
                "{:<24} {:<18} {:<48}",
                "",
                "",
                pad("(no events reported)", depth + 1)
            );
        }
        print_steps(&s.children, depth + 1);
    }
}

/// Time on the host's own kernels: host steps, and inside an If the host steps of its
/// branch (the If's span holds its branch's delegated partitions too).
fn host_ns(steps: &[trace::StepTiming]) -> u64 {
    steps
        .iter()
        .filter(|s| s.target.starts_with("host"))
        .map(|s| {
            if s.children.is_empty() {
                s.dur_ns
            } else {
                host_ns(&s.children)
            }
        })
        .sum()
}
