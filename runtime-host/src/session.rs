//! A model loaded for execution: partitioned, compiled, initialised, memory-planned.
//!
//! Loading does all the work that can be done once: bind symbolic dimensions, ask every
//! usable backend what it supports, partition, compile and init each partition (on a
//! failure, re-partition without that backend), place every tensor that crosses a step
//! boundary in one arena, and prepare the ABI views of every delegate call. A run then
//! copies the inputs in, walks the steps and copies the outputs out; it allocates no tensor
//! memory, and delegate calls reuse their prepared views.
//!
//! Control flow runs on the host. An If's branches are sessions of their own, loaded once
//! (partitioned across the plugins like any model) and run when the condition picks them;
//! plugins never see an If, a Loop or a subgraph: they are asked about the graph with the
//! control-flow nodes cut out. A Loop's body runs on the reference interpreter.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use baton_delegate_api::abi;
use baton_delegate_api::ir::AlignedBytes;
use baton_delegate_api::sdk::ProfileEvent;
use baton_delegate_api::{
    DType, Graph, NodeId, OpKind, Storage, Support, Tensor, TensorId, TensorMut, TensorRef,
};
use baton_partitioner::{
    self as partitioner, BackendAnswers, PartitionPlan, Pin, Policy, Step, Target,
};
use baton_reference as reference;

use crate::config::{OnExecuteError, OnInitError};
use crate::engine::Engine;
use crate::error::{HostError, Result};
use crate::memory::{self, ArenaPlan, Lifetime};
use crate::plugin::{view_of, PluginExecutable};
pub use crate::specialize::specialize;

/// A loaded model, ready to run.
pub struct Session<'e> {
    engine: &'e Engine,
    /// The graph with every dimension bound.
    pub graph: Graph,
    /// How the nodes were split across backends, with reasons.
    pub plan: PartitionPlan,
    /// Backend name of each partition of `plan`.
    pub partition_backends: Vec<String>,
    /// Where the arena tensors live and what that costs.
    pub arena_plan: ArenaPlan,
    /// What happened while loading (backends dropped, re-partitions), for the user.
    pub notes: Vec<String>,
    /// How many delegate calls failed and were run on the portable kernels instead.
    pub fallbacks: usize,
    /// Whether each run asks the plugins for their profile events (off by default: it
    /// costs two calls and some copies per partition per run).
    profiling: bool,
    steps: Vec<ExecStep>,
    /// The control-flow nodes' runners, indexed by [`ExecStep::Control`].
    controls: Vec<Control<'e>>,
    slots: Vec<Slot>,
    shapes: Vec<Vec<usize>>,
    arena: AlignedBytes,
    /// Whether `arena` is a buffer lent by a [`crate::bounded::BoundedSession`], laid out by
    /// its plan at the bound; the session then owns it only while it runs.
    borrowed_arena: bool,
}

/// An arena planned once (at a dimension bound) for sessions specialised to smaller
/// bindings to reuse: its buffer and each arena tensor's offset, by tensor name.
pub(crate) struct ArenaReuse {
    pub layout: HashMap<String, usize>,
    pub arena: AlignedBytes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Bytes at this arena offset.
    Arena(usize),
    /// A constant of the graph.
    Const,
    /// Lives only inside a delegate partition.
    Internal,
}

enum ExecStep {
    Host(NodeId),
    Delegate(Box<DelegateStep>),
    /// An index into `Session::controls`.
    Control(usize),
}

/// How a control-flow node runs.
struct Control<'e> {
    node: NodeId,
    /// An If's then and else branches as sessions, or why a branch cannot run for these
    /// input shapes (taking it is then an error); empty for a Loop, whose body runs on the
    /// reference interpreter.
    branches: Vec<std::result::Result<Session<'e>, String>>,
}

struct DelegateStep {
    partition: usize,
    backend: String,
    nodes: Vec<NodeId>,
    outputs: Vec<TensorId>,
    exec: PluginExecutable,
    in_views: Vec<abi::TensorView>,
    out_views: Vec<abi::TensorView>,
    // The views point into these; they are never resized after construction.
    _in_shapes: Vec<Vec<i64>>,
    out_shapes: Vec<[i64; abi::MAX_RANK]>,
    expected_out: Vec<[i64; abi::MAX_RANK]>,
    /// The plugin's events of the last run, when profiling.
    events: Vec<ProfileEvent>,
}

/// What one partition's plugin reported about the last run (`baton run --profile`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionProfile {
    /// The partition's index in the plan.
    pub partition: usize,
    /// The backend that ran it.
    pub backend: String,
    /// The plugin's events, in the order it ran them; empty when it reports none (a 1.0
    /// plugin, or one without profiling) or the run fell back to the portable kernels.
    pub events: Vec<ProfileEvent>,
}

impl<'e> Session<'e> {
    /// Turns collecting the plugins' profile events on or off for the following runs.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
    }

    /// The profile of the last run, one entry per delegated partition in execution order
    /// (empty unless [`Session::set_profiling`] is on).
    pub fn profile(&self) -> Vec<PartitionProfile> {
        if !self.profiling {
            return Vec::new();
        }
        self.steps
            .iter()
            .filter_map(|s| match s {
                ExecStep::Delegate(d) => Some(PartitionProfile {
                    partition: d.partition,
                    backend: d.backend.clone(),
                    events: d.events.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// Loads `graph` on `engine`. `bindings` gives values to symbolic dimensions.
    pub fn new(
        engine: &'e Engine,
        graph: &Graph,
        bindings: &BTreeMap<String, usize>,
    ) -> Result<Session<'e>> {
        Session::new_reusing(engine, graph, bindings, None)
    }

    /// [`Session::new`], placing the arena tensors at the offsets of `reuse` inside its
    /// buffer when that layout is valid for this binding (every tensor found, fitting, and
    /// no two tensors live at the same step sharing bytes); otherwise the session plans and
    /// owns its own arena and gives the buffer back through [`Session::take_arena`].
    pub(crate) fn new_reusing(
        engine: &'e Engine,
        graph: &Graph,
        bindings: &BTreeMap<String, usize>,
        mut reuse: Option<ArenaReuse>,
    ) -> Result<Session<'e>> {
        let graph = specialize(graph, bindings)?;
        for node in &graph.nodes {
            let dtypes: Vec<_> = node
                .inputs
                .iter()
                .map(|&t| graph.tensors[t].dtype)
                .collect();
            reference::supports(node.op, &dtypes).map_err(|message| HostError::Node {
                node: node.label(),
                message: format!("no portable kernel: {message}"),
            })?;
        }
        let mut notes = Vec::new();
        let mut excluded: BTreeSet<String> = BTreeSet::new();
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
        loop {
            let plan = match partition_with(engine, &graph, &excluded)? {
                Ok(plan) => plan,
                Err((name, why)) => {
                    notes.push(format!("{name} dropped: {why}"));
                    excluded.insert(name);
                    continue;
                }
            };
            match instantiate(engine, &graph, &plan) {
                Ok(delegates) => {
                    let controls = load_controls(engine, &graph)?;
                    return Ok(assemble(
                        engine,
                        graph,
                        plan,
                        delegates,
                        controls,
                        notes,
                        reuse.take(),
                    ));
                }
                Err((backend, err)) => {
                    if engine.config.fallback.on_init_error == OnInitError::Fail {
                        return Err(err);
                    }
                    notes.push(format!("{backend} dropped, re-partitioning: {err}"));
                    excluded.insert(backend);
                }
            }
        }
    }

    /// Shape of each graph input, in order.
    pub fn input_shapes(&self) -> Vec<&[usize]> {
        self.graph
            .inputs
            .iter()
            .map(|&t| self.shapes[t].as_slice())
            .collect()
    }

    /// Runs the model. `inputs` follow the graph's input order.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        self.run_refs(&refs)
    }

    /// [`Session::run`] over borrowed inputs (streams pass their state without copying it).
    pub fn run_refs(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.graph.inputs.len() {
            return Err(HostError::Input {
                name: "(all)".into(),
                message: format!(
                    "{} inputs given, the model takes {}",
                    inputs.len(),
                    self.graph.inputs.len()
                ),
            });
        }
        for (&t, given) in self.graph.inputs.iter().zip(inputs) {
            let decl = &self.graph.tensors[t];
            if given.dtype != decl.dtype || given.shape != self.shapes[t] {
                return Err(HostError::Input {
                    name: decl.name.clone(),
                    message: format!(
                        "got {} {:?}, expected {} {:?}",
                        given.dtype, given.shape, decl.dtype, self.shapes[t]
                    ),
                });
            }
            if let Slot::Arena(off) = self.slots[t] {
                let n = given.bytes().len();
                self.arena.as_mut_slice()[off..off + n].copy_from_slice(given.bytes());
            }
        }
        for i in 0..self.steps.len() {
            self.run_step(i)?;
        }
        Ok(self
            .graph
            .outputs
            .iter()
            .map(|&t| {
                let decl = &self.graph.tensors[t];
                Tensor::from_bytes(decl.dtype, &self.shapes[t], self.bytes(t))
            })
            .collect())
    }

    /// Offset of every arena tensor, by name: the layout other bindings can reuse.
    pub(crate) fn arena_layout(&self) -> HashMap<String, usize> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(t, s)| match s {
                Slot::Arena(off) => Some((self.graph.tensors[t].name.clone(), *off)),
                _ => None,
            })
            .collect()
    }

    /// Whether the arena is a lent buffer (see [`Session::new_reusing`]).
    pub(crate) fn borrows_arena(&self) -> bool {
        self.borrowed_arena
    }

    /// Takes the arena buffer out, leaving an empty one; the session must get it back
    /// ([`Session::put_arena`]) before it runs again. The delegate views keep pointing
    /// into the buffer's heap block, which moving the `AlignedBytes` does not move.
    pub(crate) fn take_arena(&mut self) -> AlignedBytes {
        std::mem::replace(&mut self.arena, AlignedBytes::zeroed(0))
    }

    /// Gives back the buffer taken by [`Session::take_arena`].
    pub(crate) fn put_arena(&mut self, arena: AlignedBytes) {
        debug_assert_eq!(self.arena.len(), 0, "the session already has its arena");
        self.arena = arena;
    }

    /// Number of nodes each target runs ("host" for the portable kernels), the nodes of
    /// every If branch included.
    pub fn nodes_per_backend(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for e in &self.plan.nodes {
            let k = match &e.decision {
                partitioner::Decision::Delegated { backend, .. } => backend.clone(),
                partitioner::Decision::Host => "host".to_string(),
            };
            *m.entry(k).or_insert(0) += 1;
        }
        for (_, branch) in self.branches() {
            let Ok(branch) = branch else {
                continue;
            };
            for (k, v) in branch.nodes_per_backend() {
                *m.entry(k).or_insert(0) += v;
            }
        }
        m
    }

    /// The sessions of the If branches, each with a label (`node If_0 (If), then_branch`),
    /// or why a branch cannot run for these input shapes.
    pub fn branches(&self) -> Vec<(String, std::result::Result<&Session<'e>, &str>)> {
        let mut out = Vec::new();
        for c in &self.controls {
            let node = &self.graph.nodes[c.node];
            for (name, b) in ["then_branch", "else_branch"].iter().zip(&c.branches) {
                let b = b.as_ref().map_err(String::as_str);
                out.push((format!("node {}, {name}", node.label()), b));
            }
        }
        out
    }

    fn run_step(&mut self, i: usize) -> Result<()> {
        match &mut self.steps[i] {
            ExecStep::Host(n) => {
                let n = *n;
                self.run_host_nodes(&[n], &mut HashMap::new())
            }
            ExecStep::Control(k) => {
                let k = *k;
                self.run_control(k)
            }
            ExecStep::Delegate(d) => {
                for (s, e) in d.out_shapes.iter_mut().zip(&d.expected_out) {
                    *s = *e;
                }
                for (v, s) in d.out_views.iter_mut().zip(&mut d.out_shapes) {
                    v.shape = s.as_mut_ptr();
                }
                // SAFETY: the views point into the arena (tensors live across this step do not
                // overlap: see `memory::plan`) and into constants of `self.graph`, all alive.
                let result = unsafe { d.exec.execute_raw(&d.in_views, &mut d.out_views) }.and_then(|()| {
                    for (k, (v, e)) in d.out_views.iter().zip(&d.expected_out).enumerate() {
                        let rank = (v.rank as usize).min(abi::MAX_RANK);
                        let want = self.shapes[d.outputs[k]].len();
                        if rank != want || d.out_shapes[k][..rank] != e[..rank] {
                            return Err(HostError::PluginCall {
                                plugin: d.exec.library().label(),
                                call: "execute",
                                status: abi::STATUS_ERROR,
                                message: format!(
                                    "partition {}: output '{}' has shape {:?}, expected {:?}: result refused",
                                    d.partition,
                                    self.graph.tensors[d.outputs[k]].name,
                                    &d.out_shapes[k][..rank],
                                    &e[..want]
                                ),
                            });
                        }
                    }
                    Ok(())
                });
                d.events.clear();
                if result.is_ok() && self.profiling {
                    d.events = d.exec.profile();
                }
                match result {
                    Ok(()) => Ok(()),
                    Err(e)
                        if self.engine.config.fallback.on_execute_error == OnExecuteError::Fail =>
                    {
                        Err(e)
                    }
                    Err(e) => {
                        let nodes = d.nodes.clone();
                        let backend = d.backend.clone();
                        self.fallbacks += 1;
                        if self.fallbacks <= 3 {
                            eprintln!("baton: {backend} failed, running its partition on the portable kernels: {e}");
                        }
                        self.run_host_nodes(&nodes, &mut HashMap::new())
                    }
                }
            }
        }
    }

    /// Runs `nodes` on the reference kernels; tensors without an arena slot (a failed
    /// partition's internals) live in `locals`.
    fn run_host_nodes(
        &mut self,
        nodes: &[NodeId],
        locals: &mut HashMap<TensorId, Tensor>,
    ) -> Result<()> {
        for &n in nodes {
            let node = &self.graph.nodes[n];
            // Outputs without an arena slot (a failed partition's internals) are owned here.
            let mut local_outs: Vec<Tensor> = node
                .outputs
                .iter()
                .filter(|&&o| self.slots[o] == Slot::Internal)
                .map(|&o| Tensor::zeros(self.graph.tensors[o].dtype, &self.shapes[o]))
                .collect();
            let base = self.arena.as_mut_slice().as_mut_ptr();
            let inputs: Vec<TensorRef<'_>> = node
                .inputs
                .iter()
                .map(|&t| {
                    let decl = &self.graph.tensors[t];
                    let data: &[u8] = match self.slots[t] {
                        Slot::Arena(off) => {
                            let len = byte_len(decl.dtype, &self.shapes[t]);
                            // SAFETY: in bounds (planned); no output of this node overlaps it.
                            unsafe { std::slice::from_raw_parts(base.add(off), len) }
                        }
                        Slot::Const => const_bytes(&self.graph, t),
                        Slot::Internal => locals.get(&t).map_or(&[][..], |x| x.bytes()),
                    };
                    TensorRef {
                        dtype: decl.dtype,
                        shape: &self.shapes[t],
                        data,
                        quant: decl
                            .quant
                            .as_ref()
                            .map(baton_delegate_api::QuantRef::from_quant),
                    }
                })
                .collect();
            let mut outputs: Vec<TensorMut<'_>> = Vec::with_capacity(node.outputs.len());
            let mut local_iter = local_outs.iter_mut();
            for &o in &node.outputs {
                let decl = &self.graph.tensors[o];
                match self.slots[o] {
                    Slot::Arena(off) => {
                        let len = byte_len(decl.dtype, &self.shapes[o]);
                        // SAFETY: in bounds; disjoint from every input (live at this step).
                        let data = unsafe { std::slice::from_raw_parts_mut(base.add(off), len) };
                        outputs.push(TensorMut::new(decl.dtype, &self.shapes[o], data));
                    }
                    _ => outputs.push(
                        local_iter
                            .next()
                            .expect("one local per internal output")
                            .view_mut(),
                    ),
                }
            }
            reference::run_node(node, &inputs, &mut outputs).map_err(|e| HostError::Node {
                node: node.label(),
                message: e.to_string(),
            })?;
            drop(outputs);
            drop(inputs);
            let internal = node
                .outputs
                .iter()
                .copied()
                .filter(|&o| self.slots[o] == Slot::Internal);
            locals.extend(internal.zip(local_outs));
        }
        Ok(())
    }

    /// Runs control-flow node `controls[k]`: an If runs the branch session its condition
    /// picks, a Loop runs on the reference interpreter. Results must have the shapes the
    /// session planned.
    fn run_control(&mut self, k: usize) -> Result<()> {
        let n = self.controls[k].node;
        let node = &self.graph.nodes[n];
        let operands: Vec<Tensor> = node
            .inputs
            .iter()
            .map(|&t| {
                Tensor::from_bytes(self.graph.tensors[t].dtype, &self.shapes[t], self.bytes(t))
            })
            .collect();
        let results = if node.op == OpKind::If {
            let cond = &operands[0];
            if cond.dtype != DType::Bool || cond.len() != 1 {
                return Err(HostError::Node {
                    node: node.label(),
                    message: format!(
                        "the condition must be one bool, got {} {:?}",
                        cond.dtype, cond.shape
                    ),
                });
            }
            let pick = if cond.bytes()[0] != 0 { 0 } else { 1 };
            let name = ["then_branch", "else_branch"][pick];
            let refs: Vec<&Tensor> = operands[1..].iter().collect();
            match &mut self.controls[k].branches[pick] {
                Ok(branch) => branch.run_refs(&refs).map_err(|e| HostError::Node {
                    node: node.label(),
                    message: format!("in {name}: {e}"),
                })?,
                Err(why) => {
                    return Err(HostError::Node {
                        node: node.label(),
                        message: format!(
                            "the condition picks {name}, which cannot run for these input shapes: {why}"
                        ),
                    })
                }
            }
        } else {
            let refs: Vec<&Tensor> = operands.iter().collect();
            reference::run_control(node, &refs).map_err(|e| HostError::Node {
                node: node.label(),
                message: e.to_string(),
            })?
        };
        let node = &self.graph.nodes[n];
        for (&o, t) in node.outputs.iter().zip(&results) {
            let decl = &self.graph.tensors[o];
            if t.dtype != decl.dtype || t.shape != self.shapes[o] {
                return Err(HostError::Node {
                    node: node.label(),
                    message: format!(
                        "output '{}' is {} {:?} at run time, but the session planned {} {:?}",
                        decl.name, t.dtype, t.shape, decl.dtype, self.shapes[o]
                    ),
                });
            }
            if let Slot::Arena(off) = self.slots[o] {
                let len = t.bytes().len();
                self.arena.as_mut_slice()[off..off + len].copy_from_slice(t.bytes());
            }
        }
        if results.len() < node.outputs.len() {
            return Err(HostError::Node {
                node: node.label(),
                message: format!(
                    "{} results for {} outputs",
                    results.len(),
                    node.outputs.len()
                ),
            });
        }
        Ok(())
    }

    fn bytes(&self, t: TensorId) -> &[u8] {
        let len = byte_len(self.graph.tensors[t].dtype, &self.shapes[t]);
        match self.slots[t] {
            Slot::Arena(off) => &self.arena.as_slice()[off..off + len],
            Slot::Const => const_bytes(&self.graph, t),
            Slot::Internal => &[],
        }
    }
}

fn byte_len(dtype: baton_delegate_api::DType, shape: &[usize]) -> usize {
    shape.iter().product::<usize>() * dtype.size()
}

fn const_bytes(graph: &Graph, t: TensorId) -> &[u8] {
    match &graph.tensors[t].data {
        Some(Storage::Inline(d)) => d.bytes(),
        _ => &[],
    }
}

/// Asks every usable, non-excluded backend and partitions. Returns a backend whose
/// `supports` call failed, so the caller can drop it and retry.
fn partition_with(
    engine: &Engine,
    graph: &Graph,
    excluded: &BTreeSet<String>,
) -> Result<std::result::Result<PartitionPlan, (String, String)>> {
    let mut answers = Vec::new();
    let (view, positions) = without_control_flow(graph);
    for b in engine.usable().filter(|b| !excluded.contains(&b.name)) {
        match b.ctx.supports(&view) {
            Ok(a) => answers.push(BackendAnswers {
                backend: b.name.clone(),
                answers: positions
                    .iter()
                    .map(|p| match p {
                        Some(v) => a[*v].clone(),
                        None => Support::no(
                            abi::reason::OP,
                            "control flow runs on the host; plugins are not asked",
                        ),
                    })
                    .collect(),
            }),
            Err(e) => return Ok(Err((b.name.clone(), e.to_string()))),
        }
    }
    let cfg = &engine.config.policy;
    let known: BTreeSet<&str> = engine.backends.iter().map(|b| b.name.as_str()).collect();
    let mut pins = Vec::new();
    for p in &cfg.pin {
        let target = if p.target == "host" {
            Target::Host
        } else if known.contains(p.target.as_str()) {
            if excluded.contains(&p.target) || !answers.iter().any(|a| a.backend == p.target) {
                // The pinned backend is not available: its nodes fall to the host.
                Target::Host
            } else {
                Target::Backend(p.target.clone())
            }
        } else {
            return Err(HostError::Config {
                path: engine.config.source.clone(),
                message: format!(
                    "policy.pin: target '{}' is neither 'host' nor a configured plugin",
                    p.target
                ),
            });
        };
        pins.push(Pin {
            op: p
                .op
                .as_deref()
                .and_then(baton_delegate_api::OpKind::from_name),
            node: p.node.clone(),
            target,
        });
    }
    let policy = Policy {
        priority: answers.iter().map(|a| a.backend.clone()).collect(),
        min_partition_size: cfg.min_partition_size,
        max_partitions: cfg.max_partitions,
        pins,
    };
    Ok(Ok(partitioner::partition(graph, &answers, &policy)?))
}

/// The graph plugins are asked about: `graph` without its control-flow nodes, whose
/// outputs become inputs (to a plugin they are values arriving from elsewhere, which they
/// are). Also gives, for each node of `graph`, its position in that view.
fn without_control_flow(graph: &Graph) -> (std::borrow::Cow<'_, Graph>, Vec<Option<usize>>) {
    if !graph.nodes.iter().any(|n| n.op.is_control_flow()) {
        return (
            std::borrow::Cow::Borrowed(graph),
            (0..graph.nodes.len()).map(Some).collect(),
        );
    }
    let mut view = Graph {
        nodes: Vec::new(),
        ..graph.clone()
    };
    let mut positions = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        if node.op.is_control_flow() {
            view.inputs.extend(&node.outputs);
            positions.push(None);
        } else {
            positions.push(Some(view.nodes.len()));
            view.nodes.push(node.clone());
        }
    }
    (std::borrow::Cow::Owned(view), positions)
}

/// Loads the branches of every If as sessions of their own (a Loop needs nothing).
fn load_controls<'e>(engine: &'e Engine, graph: &Graph) -> Result<Vec<Control<'e>>> {
    let mut controls = Vec::new();
    for (n, node) in graph.nodes.iter().enumerate() {
        if !node.op.is_control_flow() {
            continue;
        }
        let mut branches = Vec::new();
        if node.op == OpKind::If {
            for name in ["then_branch", "else_branch"] {
                let branch = node.attr_graph(name).ok_or_else(|| HostError::Node {
                    node: node.label(),
                    message: format!("subgraph '{name}' is missing"),
                })?;
                branches.push(
                    Session::new(engine, branch, &BTreeMap::new()).map_err(|e| e.to_string()),
                );
            }
            if branches.iter().all(|b| b.is_err()) {
                let why: Vec<String> = branches.into_iter().filter_map(|b| b.err()).collect();
                return Err(HostError::Node {
                    node: node.label(),
                    message: format!(
                        "neither branch can run for these input shapes: {}",
                        why.join("; ")
                    ),
                });
            }
        }
        controls.push(Control { node: n, branches });
    }
    Ok(controls)
}

struct Instantiated {
    exec: PluginExecutable,
    sub_inputs: Vec<TensorId>,
    sub_outputs: Vec<TensorId>,
}

/// Compiles and initialises every partition; on failure names the backend at fault.
fn instantiate(
    engine: &Engine,
    graph: &Graph,
    plan: &PartitionPlan,
) -> std::result::Result<Vec<Instantiated>, (String, HostError)> {
    let mut out = Vec::new();
    for p in &plan.partitions {
        let backend = engine
            .backends
            .iter()
            .find(|b| b.name == p.backend)
            .expect("plans only name configured backends");
        let (sub, map) = graph.extract(&p.nodes);
        let res = backend
            .ctx
            .compile(backend.device.index, &sub)
            .and_then(|blob| backend.ctx.init(backend.device.index, &blob, &sub));
        match res {
            Ok(exec) => out.push(Instantiated {
                exec,
                sub_inputs: sub.inputs.iter().map(|&t| map[t]).collect(),
                sub_outputs: sub.outputs.iter().map(|&t| map[t]).collect(),
            }),
            Err(e) => return Err((backend.name.clone(), e)),
        }
    }
    Ok(out)
}

fn assemble<'e>(
    engine: &'e Engine,
    graph: Graph,
    plan: PartitionPlan,
    delegates: Vec<Instantiated>,
    controls: Vec<Control<'e>>,
    mut notes: Vec<String>,
    reuse: Option<ArenaReuse>,
) -> Session<'e> {
    let partition_backends = plan.partitions.iter().map(|p| p.backend.clone()).collect();
    let shapes: Vec<Vec<usize>> = graph
        .tensors
        .iter()
        .map(|t| t.static_shape().expect("specialized"))
        .collect();
    let schedule = plan.schedule(&graph);

    // Which step reads and writes each tensor.
    let nt = graph.tensors.len();
    let mut first: Vec<Option<usize>> = vec![None; nt];
    let mut last: Vec<Option<usize>> = vec![None; nt];
    let mut in_partition: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for (pi, p) in plan.partitions.iter().enumerate() {
        for &n in &p.nodes {
            in_partition[n] = Some(pi);
        }
    }
    let step_nodes = |s: &Step| -> Vec<NodeId> {
        match s {
            Step::Partition(p) => plan.partitions[*p].nodes.clone(),
            Step::Node(n) => vec![*n],
        }
    };
    for &i in &graph.inputs {
        first[i] = Some(0);
        last[i] = Some(0);
    }
    for (si, s) in schedule.iter().enumerate() {
        for n in step_nodes(s) {
            for &o in &graph.nodes[n].outputs {
                first[o] = Some(si);
                last[o] = Some(last[o].unwrap_or(si).max(si));
            }
            for &i in &graph.nodes[n].inputs {
                last[i] = Some(last[i].unwrap_or(si).max(si));
            }
        }
    }
    let end = schedule.len().saturating_sub(1);
    for &o in &graph.outputs {
        last[o] = Some(end);
    }
    // A tensor needs an arena slot unless it is constant or lives inside one partition.
    let consumers = graph.consumers();
    let producers = graph.producers();
    let mut slots = vec![Slot::Internal; nt];
    let mut lifetimes = Vec::new();
    let mut placed = Vec::new();
    for t in 0..nt {
        if graph.tensors[t].is_const() {
            slots[t] = Slot::Const;
            continue;
        }
        let home = producers[t].and_then(|p| in_partition[p]);
        let internal = home.is_some()
            && !graph.outputs.contains(&t)
            && consumers[t].iter().all(|&c| in_partition[c] == home);
        if internal || first[t].is_none() {
            continue;
        }
        lifetimes.push(Lifetime {
            bytes: byte_len(graph.tensors[t].dtype, &shapes[t]),
            first: first[t].unwrap_or(0),
            last: last[t].unwrap_or(0),
        });
        placed.push(t);
    }
    // A lent layout is used only if it is valid for these lifetimes and sizes.
    let lent = reuse.and_then(|r| {
        let offsets: Option<Vec<usize>> = placed
            .iter()
            .map(|&t| r.layout.get(&graph.tensors[t].name).copied())
            .collect();
        match offsets {
            Some(o) if memory::is_valid(&lifetimes, &o, r.arena.len()) => {
                Some((memory::evaluate(&lifetimes, o, r.arena.len()), r.arena))
            }
            _ => {
                notes.push(
                    "the arena layout planned at the dimension bounds does not fit this binding; planned anew"
                        .into(),
                );
                None
            }
        }
    });
    let borrowed_arena = lent.is_some();
    let (arena_plan, mut arena) = match lent {
        Some(l) => l,
        None => {
            let p = memory::plan(&lifetimes);
            let a = AlignedBytes::zeroed(p.arena_size);
            (p, a)
        }
    };
    for (&t, &off) in placed.iter().zip(&arena_plan.offsets) {
        slots[t] = Slot::Arena(off);
    }

    let base = arena.as_mut_slice().as_mut_ptr();
    let mut delegates: Vec<Option<Instantiated>> = delegates.into_iter().map(Some).collect();
    let steps = schedule
        .iter()
        .map(|s| match s {
            Step::Node(n) if graph.nodes[*n].op.is_control_flow() => ExecStep::Control(
                controls
                    .iter()
                    .position(|c| c.node == *n)
                    .expect("every control-flow node has a runner"),
            ),
            Step::Node(n) => ExecStep::Host(*n),
            Step::Partition(p) => {
                let inst = delegates[*p].take().expect("each partition scheduled once");
                let view = |t: TensorId, shape: &[i64]| {
                    let decl = &graph.tensors[t];
                    let len = byte_len(decl.dtype, &shapes[t]);
                    let ptr = match slots[t] {
                        // SAFETY: in bounds of the arena by construction of the plan.
                        Slot::Arena(off) => unsafe { base.add(off) },
                        Slot::Const => const_bytes(&graph, t).as_ptr() as *mut u8,
                        Slot::Internal => std::ptr::null_mut(),
                    };
                    view_of(decl.dtype.code(), ptr, len, shape, decl.quant.as_ref())
                };
                let in_shapes: Vec<Vec<i64>> = inst
                    .sub_inputs
                    .iter()
                    .map(|&t| shapes[t].iter().map(|&d| d as i64).collect())
                    .collect();
                let in_views = inst
                    .sub_inputs
                    .iter()
                    .zip(&in_shapes)
                    .map(|(&t, s)| view(t, s))
                    .collect();
                let expected_out: Vec<[i64; abi::MAX_RANK]> = inst
                    .sub_outputs
                    .iter()
                    .map(|&t| {
                        let mut a = [0i64; abi::MAX_RANK];
                        for (d, &v) in a.iter_mut().zip(&shapes[t]) {
                            *d = v as i64;
                        }
                        a
                    })
                    .collect();
                let out_shapes = expected_out.clone();
                let out_views = inst
                    .sub_outputs
                    .iter()
                    .zip(&out_shapes)
                    .map(|(&t, s)| view(t, &s[..shapes[t].len()]))
                    .collect();
                ExecStep::Delegate(Box::new(DelegateStep {
                    partition: *p,
                    backend: plan.partitions[*p].backend.clone(),
                    nodes: plan.partitions[*p].nodes.clone(),
                    outputs: inst.sub_outputs,
                    exec: inst.exec,
                    in_views,
                    out_views,
                    _in_shapes: in_shapes,
                    out_shapes,
                    expected_out,
                    events: Vec::new(),
                }))
            }
        })
        .collect();
    Session {
        engine,
        graph,
        plan,
        partition_backends,
        arena_plan,
        notes,
        fallbacks: 0,
        profiling: false,
        steps,
        controls,
        slots,
        shapes,
        arena,
        borrowed_arena,
    }
}
