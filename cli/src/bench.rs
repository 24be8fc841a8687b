//! `baton bench`: a model timed, with inputs given or synthesised.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use baton_delegate_api::abi;
use baton_delegate_api::{DType, Dim, Tensor};
use baton_runtime_host::{default_config, Config, Engine};
use clap::Args;

use crate::config::ConfigArg;
use crate::dims;
use crate::inputs::given_inputs;
use crate::model_file::{ModelFile, ProgramArgs};

#[derive(Args)]
pub struct BenchArgs {
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
    /// After the timed runs, as many again with profiling on, and a table of where the
    /// time goes: each host node, delegated partition and plugin event (ABI 1.1 profile
    /// events) with its median wall time over those runs and its share of the run, then
    /// the totals per kind of work. The latencies above are measured without profiling.
    #[arg(long)]
    profile: bool,
}

/// Times `a.model` and prints the latencies, as text or one JSON line.
pub fn bench(a: BenchArgs) -> Result<()> {
    let mut model = ModelFile::open(&a.model, &a.program)?;
    let graph = model.graph.clone();
    let mut bindings = dims::parse(&a.dims, "--dim", "NAME=VALUE", &graph)?;
    let mut given = given_inputs(&graph, &a.inputs)?;
    // The files bind their inputs' dimensions first, so an input synthesised before one
    // given in the input order takes its extents too.
    bindings.extend(baton_runtime_host::inputs::bindings_by_name(&graph, &given));
    let mut inputs = Vec::new();
    let mut synthesised = Vec::new();
    let value_inputs = baton_runtime_host::values::value_inputs(&graph);
    for (k, &t) in graph.inputs.iter().enumerate() {
        let decl = &graph.tensors[t];
        if let Some(x) = given.remove(&decl.name) {
            inputs.push(x);
            continue;
        }
        if value_inputs.contains(&t) {
            // Made-up axes or pads would make up the model's shapes too.
            bail!(
                "input '{}' decides shapes in the model by its values, which cannot be made up: pass --input {}=FILE.npy",
                decl.name,
                decl.name
            );
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
    let values = baton_runtime_host::inputs::values(&graph, &inputs);
    let load_ms = model.load_ms(&engine, &bindings, &values, a.load_runs)?;
    let mut session = model.session(&engine, &bindings, &values)?;
    if !synthesised.is_empty() && !a.json {
        eprintln!("baton: synthesised inputs: {}", synthesised.join(", "));
    }
    let r = baton_runtime_host::bench::measure(&mut session, &inputs, a.warmup, a.runs)?;
    let profile = if a.profile {
        session.set_profiling(true);
        let mut p = Profile::default();
        for _ in 0..a.runs.max(1) {
            session.run(&inputs)?;
            p.add(session.timeline());
        }
        session.set_profiling(false);
        Some(p)
    } else {
        None
    };
    let per = session.nodes_per_backend();
    let held = session.held_bytes();
    let delegates = session.delegate_memory();
    let delegate_total = |field: fn(&abi::MemoryInfo) -> u64| -> u64 {
        delegates
            .iter()
            .filter_map(|m| m.memory.as_ref())
            .map(field)
            .sum()
    };
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
            "delegate_scratch_bytes": delegate_total(|m| m.scratch_bytes),
            "delegate_owned_bytes": delegate_total(|m| m.owned_bytes),
            "delegate_retained_bytes": delegate_total(|m| m.retained_bytes),
            "delegate_kept_blob_bytes": delegates.iter().map(|m| m.kept_blob_bytes).sum::<usize>(),
            "delegate_memory_unreported": delegates.iter().filter(|m| m.memory.is_none()).count(),
            "profile": profile.as_ref().map(Profile::json),
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
        if let Some(p) = &profile {
            p.print();
        }
    }
    Ok(())
}

/// Per-step and per-event wall times over several profiled runs, keyed by position in the
/// timeline: a session runs the same steps in the same order every time (a staged model's
/// regions, or an If's branch, may differ between runs, so rows are matched by name as
/// well).
#[derive(Default)]
struct Profile {
    runs: usize,
    rows: Vec<Row>,
    totals: Vec<u64>,
}

/// One step or plugin event of the timeline and the wall times seen, one per run.
struct Row {
    target: String,
    kind: String,
    name: String,
    /// How deep it sits: 0 a step of the session, 1 a plugin event of the step above or a
    /// step inside it (an If's branch), and so on.
    depth: u8,
    /// A plugin's event rather than a step the host timed.
    event: bool,
    /// Whether its time is counted per kind: plugin events and host steps with no steps
    /// inside them (an If's own row holds its branch's time, which its children count).
    leaf: bool,
    ns: Vec<u64>,
}

impl Profile {
    fn add(&mut self, steps: &[baton_runtime_host::trace::StepTiming]) {
        let mut k = 0;
        // The first run makes one row per step and event, even where two share a name.
        let first = self.runs == 0;
        Self::walk(&mut self.rows, &mut k, first, steps, 0);
        self.totals.push(steps.iter().map(|s| s.dur_ns).sum());
        self.runs += 1;
    }

    /// Adds the times of `steps`, their events and the steps inside them, depth first.
    fn walk(
        rows: &mut Vec<Row>,
        k: &mut usize,
        first: bool,
        steps: &[baton_runtime_host::trace::StepTiming],
        depth: u8,
    ) {
        for s in steps {
            let step = Row {
                target: s.target.clone(),
                kind: s.kind.clone(),
                name: s.name.clone(),
                depth,
                event: false,
                leaf: s.kind != "partition"
                    && s.target.starts_with("host")
                    && s.children.is_empty(),
                ns: Vec::new(),
            };
            Self::put(rows, k, first, step, s.dur_ns);
            for e in &s.events {
                let event = Row {
                    target: String::new(),
                    kind: e.kind.clone(),
                    name: e.name.clone(),
                    depth: depth + 1,
                    event: true,
                    leaf: true,
                    ns: Vec::new(),
                };
                Self::put(rows, k, first, event, e.wall_ns);
            }
            Self::walk(rows, k, first, &s.children, depth + 1);
        }
    }

    /// Records `ns` in the row like `row`: the next one where this run repeats the first,
    /// else the one of that name, else `row` itself, appended.
    fn put(rows: &mut Vec<Row>, k: &mut usize, first: bool, row: Row, ns: u64) {
        let like = |r: &Row| {
            r.name == row.name && r.kind == row.kind && r.depth == row.depth && r.event == row.event
        };
        if first || !rows.get(*k).is_some_and(like) {
            *k = match rows.iter().position(like).filter(|_| !first) {
                Some(at) => at,
                None => {
                    rows.push(row);
                    rows.len() - 1
                }
            };
        }
        rows[*k].ns.push(ns);
        *k += 1;
    }

    fn median(v: &[u64]) -> u64 {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }

    /// Median microseconds per kind of work over the plugin events and host steps (not the
    /// partitions, whose time their events already carry), largest first.
    fn per_kind(&self) -> Vec<(String, f64)> {
        let mut kinds: Vec<(String, f64)> = Vec::new();
        for r in self.rows.iter().filter(|r| r.leaf) {
            let us = Self::median(&r.ns) as f64 / 1e3;
            match kinds.iter_mut().find(|(k, _)| *k == r.kind) {
                Some((_, t)) => *t += us,
                None => kinds.push((r.kind.clone(), us)),
            }
        }
        kinds.sort_by(|a, b| b.1.total_cmp(&a.1));
        kinds
    }

    fn print(&self) {
        let total = Self::median(&self.totals) as f64 / 1e3;
        println!(
            "profile: median over {} profiled runs, run total {total:.1} us",
            self.runs
        );
        println!(
            "{:<16} {:<18} {:<48} {:>10} {:>7}",
            "target", "kind", "step", "median_us", "share"
        );
        for r in &self.rows {
            let us = Self::median(&r.ns) as f64 / 1e3;
            let name = format!("{:indent$}{}", "", r.name, indent = 2 * r.depth as usize);
            println!(
                "{:<16} {:<18} {name:<48} {us:>10.1} {:>6.1}%",
                r.target,
                r.kind,
                100.0 * us / total.max(1e-9)
            );
        }
        println!("per kind (plugin events and host nodes):");
        for (kind, us) in self.per_kind() {
            println!(
                "  {kind:<18} {us:>10.1} us {:>6.1}%",
                100.0 * us / total.max(1e-9)
            );
        }
    }

    fn json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "target": r.target, "kind": r.kind, "name": r.name,
                    "plugin_event": r.event, "depth": r.depth,
                    "median_us": Self::median(&r.ns) as f64 / 1e3,
                })
            })
            .collect();
        serde_json::json!({
            "runs": self.runs,
            "total_median_us": Self::median(&self.totals) as f64 / 1e3,
            "steps": rows,
            "per_kind_us": self
                .per_kind()
                .into_iter()
                .map(|(k, us)| (k, us.into()))
                .collect::<serde_json::Map<_, _>>(),
        })
    }
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
