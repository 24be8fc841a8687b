//! Making a [`Program`]: specialise, partition across the usable backends, have each
//! plugin compile its partitions, and plan the arena.
//!
//! A backend whose `supports` or `compile` fails is dropped and the graph partitioned
//! again without it, so compiling ends: every round removes a backend, and with none left
//! the host runs everything.

use std::collections::{BTreeMap, BTreeSet};

use baton_delegate_api::{abi, Graph, OpKind, Support};
use baton_partitioner::{self as partitioner, BackendAnswers, PartitionPlan};
use baton_reference as reference;

use super::{CompiledPartition, MemoryLayout, PluginIdentity, Program};
use crate::engine::{Backend, Engine};
use crate::error::{HostError, NodeProblem, Result};
use crate::memory;
use crate::memory::arena_tensors;
use crate::specialize::specialize;

/// Compiles `graph` for `engine`'s plugins, binding its symbolic input dimensions to
/// `bindings`. With `bounds`, the program is bounded instead: the graph is kept as given
/// and compiled per binding at run time. So is a graph with value inputs (inputs whose
/// values decide shapes, see [`baton_reference::values`]): its shapes are known only
/// once a run gives those values, so the program keeps them as inputs and is specialised
/// and compiled per value when run ([`crate::Session::with_values`],
/// [`crate::SpecializingSession`]).
pub fn compile(
    engine: &Engine,
    graph: &Graph,
    bindings: &BTreeMap<String, usize>,
    bounds: &BTreeMap<String, usize>,
) -> Result<Program> {
    if bounds.is_empty() && reference::values::value_inputs(graph).is_empty() {
        return compile_specialised(engine, graph, bindings);
    }
    Ok(Program {
        graph: graph.clone(),
        bindings: bindings.clone(),
        bounds: bounds.clone(),
        plan: PartitionPlan {
            partitions: Vec::new(),
            nodes: Vec::new(),
        },
        partitions: Vec::new(),
        memory: None,
        branches: BTreeMap::new(),
        notes: Vec::new(),
        pages: None,
    })
}

/// Specialises `graph` for `bindings` and compiles it: [`compile`] without the bounded
/// or per-value forms. A value input given no value fails here, naming the input.
pub(crate) fn compile_specialised(
    engine: &Engine,
    graph: &Graph,
    bindings: &BTreeMap<String, usize>,
) -> Result<Program> {
    let limits = engine.config.limits();
    limits.check_inputs(graph, bindings)?;
    let graph = specialize(graph, bindings)?;
    limits.check_graph(&graph)?;
    check_portable(&graph)?;
    let (excluded, _) = usable_backends(engine);
    let mut notes = Vec::new();
    let (plan, partitions) = partition_and_compile(engine, &graph, excluded, &mut notes)?;
    let memory = Some(layout(&graph, &plan));
    let branches = compile_branches(engine, &graph);
    Ok(Program {
        graph,
        bindings: bindings.clone(),
        bounds: BTreeMap::new(),
        plan,
        partitions,
        memory,
        branches,
        notes,
        pages: None,
    })
}

/// Compiles both branches of every If. A branch that cannot be compiled for these shapes
/// is left out: the load tries it again and keeps the reason for when it is picked.
fn compile_branches(engine: &Engine, graph: &Graph) -> BTreeMap<(usize, usize), Program> {
    let mut out = BTreeMap::new();
    for (n, node) in graph.nodes.iter().enumerate() {
        if node.op != OpKind::If {
            continue;
        }
        for (k, name) in ["then_branch", "else_branch"].iter().enumerate() {
            let compiled = node
                .attr_graph(name)
                .map(|g| compile_specialised(engine, g, &BTreeMap::new()));
            if let Some(Ok(p)) = compiled {
                out.insert((n, k), p);
            }
        }
    }
    out
}

/// The backends partitions may not go to (probe failed), with a note for each, and a
/// note for each plugin that did not load.
pub(crate) fn usable_backends(engine: &Engine) -> (BTreeSet<String>, Vec<String>) {
    let mut notes = Vec::new();
    let mut excluded = BTreeSet::new();
    for b in &engine.backends {
        if !b.usable() {
            notes.push(format!(
                "{} skipped: probe failed: {}",
                b.name, b.verdict.detail
            ));
            excluded.insert(b.name.clone());
        }
    }
    for f in &engine.failed {
        notes.push(format!("{} not loaded: {}", f.label, f.error));
    }
    (excluded, notes)
}

/// Every node must have a portable kernel: it is where a failed partition runs.
pub(crate) fn check_portable(graph: &Graph) -> Result<()> {
    for node in &graph.nodes {
        let dtypes: Vec<_> = node
            .inputs
            .iter()
            .map(|&t| graph.tensors[t].dtype)
            .collect();
        reference::supports(node.op, &dtypes)
            .map_err(|reason| HostError::node(node, NodeProblem::NoPortableKernel { reason }))?;
    }
    Ok(())
}

/// Partitions the specialised `graph` across the usable backends not in `excluded` and
/// compiles every partition, dropping (with a note) each backend that fails either step.
pub(crate) fn partition_and_compile(
    engine: &Engine,
    graph: &Graph,
    mut excluded: BTreeSet<String>,
    notes: &mut Vec<String>,
) -> Result<(PartitionPlan, Vec<CompiledPartition>)> {
    'retry: loop {
        let plan = match partition_with(engine, graph, &excluded)? {
            Ok(plan) => plan,
            Err((name, why)) => {
                notes.push(format!("{name} dropped: {why}"));
                excluded.insert(name);
                continue;
            }
        };
        let mut compiled = Vec::new();
        for p in &plan.partitions {
            let backend = backend(engine, &p.backend);
            let (sub, _) = graph.extract(&p.nodes);
            match backend.ctx.compile(backend.device.index, &sub) {
                Ok(blob) => compiled.push(CompiledPartition {
                    backend: backend.name.clone(),
                    plugin: identity(backend),
                    blob,
                    from_file: false,
                }),
                Err(e) => {
                    if engine.config.fallback.on_init_error == crate::config::OnInitError::Fail {
                        return Err(e);
                    }
                    notes.push(format!("{} dropped, re-partitioning: {e}", backend.name));
                    excluded.insert(backend.name.clone());
                    continue 'retry;
                }
            }
        }
        return Ok((plan, compiled));
    }
}

/// The configured backend of that name (plans only name configured backends).
pub(crate) fn backend<'e>(engine: &'e Engine, name: &str) -> &'e Backend {
    engine
        .backends
        .iter()
        .find(|b| b.name == name)
        .expect("plans only name configured backends")
}

pub(crate) fn identity(b: &Backend) -> PluginIdentity {
    let lib = &b.ctx.lib;
    PluginIdentity {
        name: lib.name.clone(),
        version: lib.version.clone(),
        build_id: lib.build_id.clone(),
        abi_major: abi::ABI_MAJOR,
        abi_minor: lib.abi_minor,
    }
}

/// The arena layout the session will use for `plan`.
pub(crate) fn layout(graph: &Graph, plan: &PartitionPlan) -> MemoryLayout {
    let (placed, lifetimes) = arena_tensors(graph, plan);
    let p = memory::plan(&lifetimes);
    MemoryLayout {
        arena_size: p.arena_size,
        placed: placed.into_iter().zip(p.offsets).collect(),
    }
}

/// Asks every usable, non-excluded backend and partitions. Returns a backend whose
/// `supports` call failed, so the caller can drop it and retry.
pub(crate) fn partition_with(
    engine: &Engine,
    graph: &Graph,
    excluded: &BTreeSet<String>,
) -> Result<std::result::Result<PartitionPlan, (String, String)>> {
    let mut answers = Vec::new();
    for b in engine.usable().filter(|b| !excluded.contains(&b.name)) {
        // Only nodes the plugin can read, in a graph it can read (see `view`).
        let (view, positions) = super::view::plugin_view(graph, b.ctx.lib.btir_minor());
        match b.ctx.supports(&view) {
            Ok(a) => answers.push(BackendAnswers {
                backend: b.name.clone(),
                answers: positions
                    .into_iter()
                    .map(|p| match p {
                        Ok(v) => a[v].clone(),
                        Err(decline) => Support::No(decline),
                    })
                    .collect(),
            }),
            Err(e) => return Ok(Err((b.name.clone(), e.to_string()))),
        }
    }
    let policy = engine.policy_for(&answers);
    Ok(Ok(partitioner::partition(graph, &answers, &policy)?))
}
