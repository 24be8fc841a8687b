//! Loading a [`Program`] into a [`Session`]: reuse what was compiled, and only that.
//!
//! Each stored blob is offered to the loaded plugin of its backend through the ABI's
//! `blob_compatibility`. An optimal answer means the blob is initialised as it is; a
//! blob the plugin would rather recompile, cannot use, or that another plugin made, is
//! compiled again from the program's own graph (with a note), or refused when recompiling
//! is off. A backend that is missing, failed its probe, or fails to compile or initialise
//! is dropped and the graph partitioned again without it, under the same fallback rules as
//! a model file: the program is a cache of decisions, never a reason to fail where a model
//! file would run.

use std::path::Path;
use std::sync::Arc;

use baton_delegate_api::BlobCompatibility;
use baton_delegate_api::{shape, Graph};

use super::compile::{backend, check_portable, identity, layout};
use super::{
    format, partition_and_compile, usable_backends, CompiledPartition, Pages, Program,
    ProgramError, MAGIC,
};
use crate::bounded::BoundedSession;
use crate::config::OnInitError;
use crate::engine::Engine;
use crate::error::{HostError, Result, TensorType};
use crate::exec::{assemble, load_controls, ArenaChoice, Instantiated, Session};
use crate::memory::arena_tensors;

/// The largest tensor a program may declare, in bytes: refuses a crafted shape before any
/// size arithmetic can overflow.
const MAX_TENSOR_BYTES: usize = 1 << 40;

/// How to load a program.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Check every checksum and the zero padding (on by default; off saves a pass over the
    /// file for a caller that has checked it another way).
    pub verify: bool,
    /// Recompile a blob the plugin does not find optimal (on by default); off, such a
    /// blob is an error (`--no-recompile`).
    pub recompile: bool,
    /// The largest arena to allocate, in bytes (unlimited by default): a caller loading
    /// programs it did not make can refuse one that would take the machine's memory.
    pub max_arena: usize,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            verify: true,
            recompile: true,
            max_arena: usize::MAX,
        }
    }
}

/// Whether the file at `path` is a program (by its magic bytes, whatever its extension).
pub fn is_program(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == MAGIC
}

/// Maps the file at `path` and reads the program in it.
pub fn read(path: &Path, verify: bool) -> Result<Program> {
    let io = |error| {
        HostError::Program(ProgramError::Io {
            path: path.to_path_buf(),
            error,
        })
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        return Ok(format::decode(Arc::new(Vec::<u8>::new()), verify)?);
    }
    let mapping = {
        // Populated up front: verifying reads every page anyway, and one call that maps
        // them all costs less than a fault per page.
        let options = {
            let mut o = memmap2::MmapOptions::new();
            if verify {
                o.populate();
            }
            o
        };
        // SAFETY: the mapping is read-only and private to this process. Another process
        // truncating the file while it is mapped would fault on access; that is the
        // usual contract of mapped model files (ONNX Runtime and ExecuTorch map theirs too).
        Arc::new(unsafe { options.map(&file) }.map_err(io)?)
    };
    let mut program = format::decode(mapping.clone(), verify)?;
    let pages = Pages(mapping);
    // The checksums are verified: what init and the host need, they fault in again.
    pages.release();
    program.pages = Some(pages);
    Ok(program)
}

/// Loads `program` on `engine`'s plugins. A bounded program is loaded with
/// [`load_bounded`] instead.
pub fn load<'e>(
    engine: &'e Engine,
    program: Program,
    options: &LoadOptions,
) -> Result<Session<'e>> {
    load_with(engine, program, options, ArenaChoice::Planned)
}

/// Loads a bounded program: its partitions are compiled per binding at run time.
pub fn load_bounded<'e>(engine: &'e Engine, program: &Program) -> Result<BoundedSession<'e>> {
    BoundedSession::new(engine, &program.graph, &program.bounds)
}

/// [`load`] with the arena taken from `arena`: a program's stored layout is used unless
/// `arena` lends one.
pub(crate) fn load_with<'e>(
    engine: &'e Engine,
    program: Program,
    options: &LoadOptions,
    arena: ArenaChoice,
) -> Result<Session<'e>> {
    if !program.bounds.is_empty() {
        return Err(HostError::Program(ProgramError::Malformed {
            section: "shapes".into(),
            offset: 0,
            message: "a bounded program runs through a bounded session (load_bounded)".into(),
        }));
    }
    if let Some(input) = baton_reference::values::value_input_names(&program.graph).first() {
        return Err(HostError::Program(ProgramError::Malformed {
            section: "graph".into(),
            offset: 0,
            message: format!(
                "input '{input}' decides shapes by its values, so the program is specialised per value when run (Session::with_values or SpecializingSession on its graph)"
            ),
        }));
    }
    let Program {
        graph,
        mut plan,
        partitions,
        memory,
        branches,
        notes: compile_notes,
        pages,
        ..
    } = program;
    engine.config.limits().check_graph(&graph)?;
    check_graph(&graph)?;
    check_schedule(&graph, &plan)?;
    check_portable(&graph)?;
    let mut arena = match (arena, memory) {
        (ArenaChoice::Planned, Some(m)) => ArenaChoice::Stored(m),
        (a, _) => a,
    };
    let (mut excluded, mut notes) = usable_backends(engine);
    notes.extend(compile_notes);
    let mut parts = partitions;
    loop {
        let unavailable = parts.iter().find(|p| {
            excluded.contains(&p.backend) || !engine.backends.iter().any(|b| b.name == p.backend)
        });
        if let Some(p) = unavailable {
            notes.push(format!(
                "{} is not available; its partitions are re-partitioned",
                p.backend
            ));
            excluded.insert(p.backend.clone());
            (plan, parts) = partition_and_compile(engine, &graph, excluded.clone(), &mut notes)?;
            arena = refreshed(arena, &graph, &plan);
            continue;
        }
        let mut delegates = Vec::new();
        let mut failure = None;
        for (i, (p, cp)) in plan.partitions.iter().zip(&mut parts).enumerate() {
            match instantiate(engine, &graph, &p.nodes, i, cp, options, &mut notes)? {
                Ok(d) => delegates.push(d),
                Err(f) => {
                    failure = Some(f);
                    break;
                }
            }
        }
        let Some((name, err)) = failure else {
            check_arena(&graph, &plan, &arena, options.max_arena)?;
            let controls = load_controls(engine, &graph, branches, options)?;
            // Plugins that copied what they keep of their blobs are done with the file's
            // pages; one that retained its blob reads it in place from now on.
            if let Some(pages) = &pages {
                if !delegates.iter().any(|d| d.exec.retains_blob()) {
                    pages.release();
                }
            }
            return assemble(engine, graph, plan, delegates, controls, notes, arena);
        };
        if engine.config.fallback.on_init_error == OnInitError::Fail {
            return Err(err);
        }
        notes.push(format!("{name} dropped, re-partitioning: {err}"));
        excluded.insert(name);
        drop(delegates);
        (plan, parts) = partition_and_compile(engine, &graph, excluded.clone(), &mut notes)?;
        arena = refreshed(arena, &graph, &plan);
    }
}

/// Initialises partition `i` from its stored blob: as it is when its plugin finds it
/// optimal, else compiled again (with a note) unless recompiling is off. A blob read from
/// a file that fails `init` is compiled again too, once (a blob corrupted past its
/// checksum, or one the plugin misjudged). The inner error names the backend to drop.
fn instantiate(
    engine: &Engine,
    graph: &Graph,
    nodes: &[usize],
    i: usize,
    cp: &mut CompiledPartition,
    options: &LoadOptions,
    notes: &mut Vec<String>,
) -> Result<std::result::Result<Instantiated, (String, HostError)>> {
    let b = backend(engine, &cp.backend);
    let (sub, map) = graph.extract(nodes);
    let loaded = identity(b);
    let answer = if loaded.name != cp.plugin.name {
        BlobCompatibility::Unsupported
    } else {
        b.ctx.blob_compatibility(cp.blob.bytes())
    };
    let mut fresh = false;
    if answer != BlobCompatibility::Optimal {
        let said = if answer == BlobCompatibility::PreferRecompile {
            "better recompiled"
        } else {
            "unsupported"
        };
        let made_by = format!(
            "{} {} (build {})",
            cp.plugin.name, cp.plugin.version, cp.plugin.build_id
        );
        let now = format!(
            "{} {} (build {})",
            loaded.name, loaded.version, loaded.build_id
        );
        if !options.recompile {
            return Err(HostError::Program(ProgramError::StaleBlob {
                partition: i,
                plugin: made_by,
                loaded: now,
                answer: said,
            }));
        }
        notes.push(format!(
            "partition {i}: the blob made by {made_by} is {said} for {now}; recompiled"
        ));
        match b.ctx.compile(b.device.index, &sub) {
            Ok(blob) => cp.blob = blob,
            Err(e) => return Ok(Err((b.name.clone(), e))),
        }
        fresh = true;
    }
    let mut result = b.ctx.init(b.device.index, &cp.blob, &sub);
    let retry = cp.from_file && options.recompile && !fresh;
    if let (Err(e), true) = (&result, retry) {
        notes.push(format!(
            "partition {i}: init from the stored blob failed ({e}); recompiled"
        ));
        result = b
            .ctx
            .compile(b.device.index, &sub)
            .and_then(|blob| b.ctx.init(b.device.index, &blob, &sub));
    }
    Ok(match result {
        Ok(exec) => {
            cp.plugin = loaded;
            Ok(Instantiated {
                exec,
                sub_inputs: sub.inputs.iter().map(|&t| map[t]).collect(),
                sub_outputs: sub.outputs.iter().map(|&t| map[t]).collect(),
            })
        }
        Err(e) => Err((b.name.clone(), e)),
    })
}

/// The arena `assemble` will allocate must fit `limit`: checked against the sum of the
/// placed tensors (no plan is larger), and a stored size must not exceed that sum.
fn check_arena(
    graph: &Graph,
    plan: &baton_partitioner::PartitionPlan,
    arena: &ArenaChoice,
    limit: usize,
) -> Result<()> {
    let (_, lifetimes) = arena_tensors(graph, plan);
    let naive = lifetimes.iter().try_fold(0usize, |sum, t| {
        sum.checked_add(t.bytes.checked_next_multiple_of(crate::memory::ALIGN)?)
    });
    let memory_error = |message: String| {
        HostError::Program(ProgramError::Malformed {
            section: "memory".into(),
            offset: 0,
            message,
        })
    };
    let Some(naive) = naive else {
        return Err(memory_error("the arena tensors' sizes overflow".into()));
    };
    if let ArenaChoice::Stored(m) = arena {
        if m.arena_size > naive {
            return Err(memory_error(format!(
                "an arena of {} bytes is larger than its tensors together ({naive})",
                m.arena_size
            )));
        }
    }
    if naive > limit && !matches!(arena, ArenaChoice::Lent(_)) {
        return Err(HostError::Program(ProgramError::ArenaLimit {
            needed: naive,
            limit,
        }));
    }
    Ok(())
}

/// After a re-partition the stored layout no longer matches: plan one for the new plan.
fn refreshed(
    arena: ArenaChoice,
    graph: &Graph,
    plan: &baton_partitioner::PartitionPlan,
) -> ArenaChoice {
    match arena {
        ArenaChoice::Stored(_) => ArenaChoice::Stored(layout(graph, plan)),
        other => other,
    }
}

fn graph_error(message: String) -> HostError {
    HostError::Program(ProgramError::Malformed {
        section: "graph".into(),
        offset: 0,
        message,
    })
}

/// A program's graph is specialised: every shape fixed, every size within limits, and
/// every node's outputs what its op makes of its inputs (the session sizes buffers from
/// the declared shapes, so they must not be taken on trust).
fn check_graph(graph: &Graph) -> Result<()> {
    for t in &graph.tensors {
        let bytes = t
            .static_shape()
            .and_then(|s| s.iter().try_fold(t.dtype.size(), |a, &n| a.checked_mul(n)));
        match bytes {
            Some(b) if b <= MAX_TENSOR_BYTES => {}
            Some(b) => {
                return Err(graph_error(format!(
                    "tensor '{}' would take {b} bytes",
                    t.name
                )))
            }
            None => {
                return Err(graph_error(format!(
                    "tensor '{}' has shape {}: not specialised, or too large",
                    t.name,
                    crate::error::dims(&t.shape)
                )))
            }
        }
    }
    for node in graph.nodes.iter().filter(|n| !n.op.is_control_flow()) {
        let inferred = shape::infer_node(graph, node).map_err(|e| match e {
            // Shape inference's errors name the node already.
            e @ baton_delegate_api::IrError::Shape { .. } => graph_error(e.to_string()),
            e => graph_error(format!("node {}: {e}", node.label())),
        })?;
        if node.outputs.len() > inferred.len() {
            return Err(graph_error(format!(
                "node {}: {} outputs, the op makes {}",
                node.label(),
                node.outputs.len(),
                inferred.len()
            )));
        }
        for (&o, (dtype, dims)) in node.outputs.iter().zip(inferred) {
            let decl = &graph.tensors[o];
            if decl.dtype != dtype || decl.shape != dims {
                return Err(graph_error(format!(
                    "node {}: output '{}' is declared {}, the op makes {}",
                    node.label(),
                    decl.name,
                    TensorType::declared(decl.dtype, &decl.shape),
                    TensorType::declared(dtype, &dims)
                )));
            }
        }
    }
    Ok(())
}

/// The plan must schedule every node once: partitions convex, control flow on the host.
fn check_schedule(graph: &Graph, plan: &baton_partitioner::PartitionPlan) -> Result<()> {
    let plan_error = |message: String| {
        HostError::Program(ProgramError::Malformed {
            section: "plan".into(),
            offset: 0,
            message,
        })
    };
    if plan.nodes.len() != graph.nodes.len() {
        return Err(plan_error(format!(
            "{} decisions for {} nodes",
            plan.nodes.len(),
            graph.nodes.len()
        )));
    }
    let mut seen = vec![false; graph.nodes.len()];
    for (i, p) in plan.partitions.iter().enumerate() {
        for &n in &p.nodes {
            if n >= seen.len() || std::mem::replace(&mut seen[n], true) {
                return Err(plan_error(format!(
                    "partition {i}: node {n} out of range or repeated"
                )));
            }
            if graph.nodes[n].op.is_control_flow() {
                return Err(plan_error(format!(
                    "partition {i}: control-flow node {} runs on the host",
                    graph.nodes[n].label()
                )));
            }
        }
    }
    // Steps: partition `i` is `i`, host node `v` is `partitions + v`. The partitioner's
    // scheduler asserts its input is acyclic, so a stored plan is checked here first.
    let parts = plan.partitions.len();
    let mut step_of: Vec<usize> = (0..graph.nodes.len()).map(|v| parts + v).collect();
    for (i, p) in plan.partitions.iter().enumerate() {
        for &n in &p.nodes {
            step_of[n] = i;
        }
    }
    let producers = graph.producers();
    let steps = parts + graph.nodes.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); steps];
    let mut waiting = vec![0usize; steps];
    for (v, node) in graph.nodes.iter().enumerate() {
        for u in node.inputs.iter().filter_map(|&t| producers[t]) {
            let (a, b) = (step_of[u], step_of[v]);
            if a != b && !succ[a].contains(&b) {
                succ[a].push(b);
                waiting[b] += 1;
            }
        }
    }
    let in_use = |s: usize| s < parts || step_of[s - parts] == s;
    let mut ready: Vec<usize> = (0..steps)
        .filter(|&s| in_use(s) && waiting[s] == 0)
        .collect();
    let mut done = 0;
    while let Some(s) = ready.pop() {
        done += 1;
        for &n in &succ[s] {
            waiting[n] -= 1;
            if waiting[n] == 0 {
                ready.push(n);
            }
        }
    }
    if done != (0..steps).filter(|&s| in_use(s)).count() {
        return Err(plan_error(
            "the partitions cannot be scheduled (one depends on itself through another step)"
                .into(),
        ));
    }
    Ok(())
}
