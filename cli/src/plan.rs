//! `baton plan`: how a model is split across the backends, and why.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::config::{engine, ConfigArg};
use crate::dims;
use crate::inputs::given_inputs;
use crate::model_file::{ModelFile, ProgramArgs};

#[derive(Args)]
pub struct PlanArgs {
    /// Model file (.btir or .onnx) or compiled program (.baton).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    program: ProgramArgs,
    /// Bind a symbolic dimension, NAME=VALUE (inputs given with --input bind theirs).
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    dims: Vec<String>,
    /// An input as NAME=FILE.npy, as `baton run` takes it: its extents bind the symbolic
    /// dimensions of that input, and an input whose values decide shapes (a value input:
    /// the axes of a Reduce, the pads of a Pad) specialises the plan for its values.
    /// Other inputs need no file.
    #[arg(long = "input", short, value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
}

/// Prints the partition plan of `a.model`, its branches' plans and its memory plan.
pub fn plan(a: PlanArgs) -> Result<()> {
    let mut model = ModelFile::open(&a.model, &a.program)?;
    let mut bindings = dims::parse(&a.dims, "--dim", "NAME=VALUE", &model.graph)?;
    let given = given_inputs(&model.graph, &a.inputs)?;
    for (dim, v) in baton_runtime_host::inputs::bindings_by_name(&model.graph, &given) {
        match bindings.get(&dim) {
            Some(&d) if d != v => {
                bail!("--dim {dim}={d} disagrees with the inputs given, which bind {dim}={v}")
            }
            _ => {
                bindings.insert(dim, v);
            }
        }
    }
    let engine = engine(&a.config)?;
    // Inputs whose values decide shapes specialise the model for the values given.
    let values = baton_runtime_host::inputs::values_by_name(&model.graph, &given);
    let session = model.session(&engine, &bindings, &values)?;
    println!(
        "model {} ({} nodes)",
        a.model.display(),
        session.graph.nodes.len()
    );
    for n in &session.notes {
        println!("note: {n}");
    }
    let stages = session.stages();
    print_stages(&stages);
    if stages.is_empty() {
        print!("{}", session.plan.render(&session.graph));
    }
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
    println!("{}", host_summary(&session));
    // A staged model's arenas are its stages' (the rest's only once a run compiled it).
    let mut plans = vec![&session.arena_plan];
    plans.extend(session.stage_sessions().iter().map(|(_, s)| &s.arena_plan));
    let sum = |f: fn(&baton_runtime_host::memory::ArenaPlan) -> usize| -> usize {
        plans.iter().map(|p| f(p)).sum()
    };
    println!(
        "memory: arena {} bytes; naive (one buffer per tensor) {} bytes; lower bound (peak live) {} bytes{}",
        sum(|p| p.arena_size),
        sum(|p| p.naive_size),
        sum(|p| p.lower_bound),
        if stages.is_empty() {
            ""
        } else {
            " (the static prefix; what follows a dynamic node is planned per shape at run time)"
        }
    );
    print_memory(&session);
    Ok(())
}

/// The stages of a model with dynamic regions (nodes whose output extents depend on
/// values): each static prefix with its plan, the node the host runs, and what is
/// specialised per shape at run time.
fn print_stages(stages: &[baton_runtime_host::exec::StageInfo]) {
    if stages.is_empty() {
        return;
    }
    println!(
        "dynamic regions: the model runs in {} stages (shapes after each dynamic node are known only at run time)",
        2 * stages.len() + 1
    );
    for (k, s) in stages.iter().enumerate() {
        println!(
            "stage {}: static prefix of {} nodes, planned now{}",
            2 * k + 1,
            s.prefix_nodes,
            if s.prefix_plan.is_some() { ":" } else { "" }
        );
        for line in s.prefix_plan.iter().flat_map(|p| p.lines()) {
            println!("  {line}");
        }
        println!(
            "stage {}: node {} runs on {} (dynamic: its output shapes come from its values)",
            2 * k + 2,
            s.dynamic_node,
            s.dynamic_target
        );
    }
    let last = stages.last().expect("not empty");
    println!(
        "stage {}: the remaining {} nodes, planned and compiled per shape seen at run time (the {} most recent kept)",
        2 * stages.len() + 1,
        last.rest_nodes,
        baton_runtime_host::exec::DEFAULT_CACHED_STAGES
    );
}

/// The whole model's memory: the host's constants and arenas, the blobs it keeps for
/// delegates that read them in place, and what each delegate reports (ABI 1.2 `memory`).
/// Bytes a delegate reads in place are counted once, where they live.
fn print_memory(session: &baton_runtime_host::Session<'_>) {
    let (weights, arena) = session.held_bytes();
    let (mut scratch, mut owned, mut blobs, mut unknown) = (0u64, 0u64, 0u64, Vec::new());
    for m in session.delegate_memory() {
        blobs += m.kept_blob_bytes as u64;
        let Some(info) = m.memory else {
            unknown.push(format!("partition {} ({})", m.partition, m.backend));
            continue;
        };
        println!(
            "memory: partition {} ({}): scratch {} bytes, own copies {} bytes, read in place {} bytes (its blob, {} bytes, kept by the host; the model's constants)",
            m.partition,
            m.backend,
            info.scratch_bytes,
            info.owned_bytes,
            info.retained_bytes,
            m.kept_blob_bytes
        );
        scratch += info.scratch_bytes;
        owned += info.owned_bytes;
    }
    let unknown = if unknown.is_empty() {
        String::new()
    } else {
        format!(
            " (not counting what {} hold: not reported)",
            unknown.join(", ")
        )
    };
    println!(
        "memory: total {} bytes = host constants {weights} + host arenas {arena} + delegate blobs kept {blobs} + delegate scratch {scratch} + delegate copies {owned}{unknown}",
        weights as u64 + arena as u64 + blobs + scratch + owned
    );
}

/// How much of the model the host runs on its portable kernels: its node count (control
/// flow apart, which always runs there) and its share of the model's estimated FLOPs.
fn host_summary(session: &baton_runtime_host::Session) -> String {
    let nodes = session.nodes_per_backend();
    let flops = session.flops_per_backend();
    let host_nodes = nodes.get("host").copied().unwrap_or(0);
    let control = control_flow_nodes(session);
    let total: u64 = flops.values().sum();
    let host_flops = flops.get("host").copied().unwrap_or(0);
    let share = if total == 0 {
        0.0
    } else {
        100.0 * host_flops as f64 / total as f64
    };
    format!(
        "host: {host_nodes} nodes ({control} of them control flow), {share:.1}% of the \
         model's estimated {:.3} MFLOP",
        total as f64 / 1e6
    )
}

/// The If and Loop nodes the host runs, in `session` and in its branches.
fn control_flow_nodes(session: &baton_runtime_host::Session) -> usize {
    let own = session
        .plan
        .nodes
        .iter()
        .filter(|e| session.graph.nodes[e.node].op.is_control_flow())
        .count();
    let inner: usize = session
        .branches()
        .into_iter()
        .filter_map(|(_, b)| b.ok().map(control_flow_nodes))
        .sum();
    own + inner
}
