//! Dynamic regions: a model whose shapes depend on tensor values (a NonMaxSuppression, a
//! NonZero, a Loop that may stop early, an If whose branches differ) runs in stages.
//!
//! Specialisation walks the graph until the first node whose output extents depend on
//! values ([`baton_reference::split`]). What comes before it is a static *prefix*, a
//! session planned and delegated as any other; the node itself runs on the host (its
//! reference kernel, shapes from its actual operands); what follows is a graph whose
//! inputs now have concrete shapes, specialised for the shapes (and, where they decide
//! shapes further on, the values) seen and loaded as a session of its own. That session
//! may itself be staged, so a chain of dynamic nodes nests. The sessions of the rest are
//! kept per key, the most recently used [`DEFAULT_CACHED_STAGES`], as a
//! [`crate::BoundedSession`] keeps its bindings: a repeated shape reuses its session.
//!
//! The dynamic node itself goes to a plugin when one takes *bounded outputs* (ABI 1.3,
//! `BATON_CAP_BOUNDED_OUTPUTS`): its inputs are static, so it is compiled once, at load,
//! as a graph of its own whose outputs are declared at bounds that follow from the input
//! shapes ([`baton_delegate_api::shape::output_bounds`]); each run the plugin reports the
//! extents it produced, the host checks them against the bounds and keeps those bytes.
//! The partitioner places it as any node (priority, pins, a plugin's decline), and a
//! failed run falls back to the portable kernels under the config's fallback rule.
//!
//! The cost: the prefix's outputs and the dynamic node's are copied out of the arena into
//! owned tensors once a run, and every new shape compiles the rest (partitioning, plugin
//! compile, memory planning).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use baton_delegate_api::shape::{bound_graph, BoundedOutput};
use baton_delegate_api::{Dim, Graph, Node, Storage, Support, Tensor, TensorId, TensorRef};
use baton_partitioner::BackendAnswers;

use super::{PartitionProfile, Session};
use crate::check::PartitionCheck;
use crate::config::{OnExecuteError, OnInitError};
use crate::engine::Engine;
use crate::error::{HostError, NodeProblem, Result};
use crate::plugin::{bounded_output, execute_owned, PluginExecutable};
use crate::trace::StepTiming;

/// Sessions of the rest of a staged model kept per shape (see the module docs).
pub const DEFAULT_CACHED_STAGES: usize = 8;

/// What a staged session has done so far: how often the rest was compiled for a new key
/// and how often a run found its session cached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageCounts {
    pub compiled: usize,
    pub reused: usize,
    /// Runs in which the plugin given the dynamic node failed and the host ran it.
    pub fallbacks: usize,
}

/// One stage of a staged session, for `baton plan` and the like.
#[derive(Clone, Debug)]
pub struct StageInfo {
    /// Nodes of the static prefix (planned and delegated at load).
    pub prefix_nodes: usize,
    /// The value-dependent node.
    pub dynamic_node: String,
    /// Who runs it (a backend's name or `host`) and, for the host, why no plugin does.
    pub dynamic_target: String,
    /// Nodes after it, specialised per shape at run time.
    pub rest_nodes: usize,
    pub counts: StageCounts,
    /// The prefix's partition plan, rendered; `None` when no node precedes the dynamic
    /// one.
    pub prefix_plan: Option<String>,
}

/// The stages of a model split at a value-dependent node.
pub(crate) struct Staged<'e> {
    engine: &'e Engine,
    /// The graph as far as it was specialised (tensor ids of every other field).
    graph: Graph,
    prefix: Option<Prefix<'e>>,
    node: Node,
    /// The dynamic node on a plugin, or why it runs on the host.
    delegated: std::result::Result<DelegatedNode, String>,
    rest: Vec<Node>,
    /// The tensors the rest reads that it does not compute and that are not constants.
    rest_inputs: Vec<TensorId>,
    /// The graph outputs the rest computes, in graph output order.
    rest_outputs: Vec<TensorId>,
    /// The rest's inputs whose values decide its shapes (their bytes are in the key).
    rest_value_inputs: Vec<TensorId>,
    /// Sessions of the rest, least recently used first.
    cache: Vec<(Key, Session<'e>)>,
    counts: StageCounts,
    /// Whether the stages' sessions time their steps (`--profile`, `--trace`).
    profiling: bool,
    /// The last run's steps, every stage's on one clock, when profiling.
    timeline: Vec<StepTiming>,
}

/// The static prefix: its session and which tensor each of its outputs is.
struct Prefix<'e> {
    session: Box<Session<'e>>,
    outputs: Vec<TensorId>,
}

/// The dynamic node compiled for a plugin that takes bounded outputs.
struct DelegatedNode {
    backend: String,
    /// The node's operands computed at run time, in the order of the compiled graph's
    /// inputs (ids of the staged graph).
    inputs: Vec<TensorId>,
    /// Each output's bound, in the node's output order.
    bounds: Vec<BoundedOutput>,
    exec: PluginExecutable,
}

impl DelegatedNode {
    /// Runs the node on the plugin: outputs allocated at their bounds, then cut to the
    /// extents the plugin reports (checked against the bounds).
    fn run(&mut self, operands: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut outputs: Vec<Tensor> = self
            .bounds
            .iter()
            .map(|b| Tensor::zeros(b.dtype, &b.bound))
            .collect();
        let reported = execute_owned(&mut self.exec, operands, &mut outputs)?;
        let lib = self.exec.library();
        self.bounds
            .iter()
            .zip(reported.iter().zip(&outputs))
            .enumerate()
            .map(|(i, (b, (shape, t)))| bounded_output(lib, i, shape, b, t))
            .collect()
    }
}

/// Compiles the dynamic `node` of `graph` for the plugin the partitioner gives it among
/// those that take bounded outputs; `Err` says why it stays on the host.
fn delegate_node(
    engine: &Engine,
    graph: &Graph,
    node: &Node,
) -> Result<std::result::Result<DelegatedNode, String>> {
    let mut inputs: Vec<TensorId> = Vec::new();
    for &t in &node.inputs {
        if graph.tensors[t].data.is_none() && !inputs.contains(&t) {
            inputs.push(t);
        }
    }
    let g = compact(graph, std::slice::from_ref(node), &inputs, &node.outputs);
    let (g, bounds) = match bound_graph(&g) {
        Ok(b) => b,
        Err(e) => return Ok(Err(e)),
    };
    let Some(bounds) = bounds.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(Err("its outputs have no bound".into()));
    };
    let mut answers = Vec::new();
    let mut why = Vec::new();
    for b in engine.usable() {
        if !b.ctx.lib.bounded_outputs() {
            why.push(format!(
                "{}: does not take bounded outputs (ABI 1.3)",
                b.name
            ));
            continue;
        }
        let (view, positions) = crate::program::plugin_view(&g, b.ctx.lib.btir_minor());
        let answer = match &positions[0] {
            Err(decline) => Support::No(decline.clone()),
            Ok(_) => match b.ctx.supports(&view) {
                Ok(a) => a[0].clone(),
                Err(e) => {
                    why.push(format!("{}: {e}", b.name));
                    continue;
                }
            },
        };
        if let Support::No(d) = &answer {
            why.push(format!("{}: {}", b.name, d.message));
        }
        answers.push(BackendAnswers {
            backend: b.name.clone(),
            answers: vec![answer],
        });
    }
    let policy = engine.policy_for(&answers);
    let plan = baton_partitioner::partition(&g, &answers, &policy)?;
    let Some(p) = plan.partitions.first() else {
        if why.is_empty() {
            why.push("no plugin is configured, or the policy keeps it on the host".into());
        }
        return Ok(Err(why.join("; ")));
    };
    let backend = engine
        .backends
        .iter()
        .find(|b| b.name == p.backend)
        .expect("plans only name configured backends");
    let made = backend
        .ctx
        .compile(backend.device.index, &g)
        .and_then(|blob| backend.ctx.init(backend.device.index, &blob, &g));
    match made {
        Ok(exec) => Ok(Ok(DelegatedNode {
            backend: backend.name.clone(),
            inputs,
            bounds,
            exec,
        })),
        Err(e) if engine.config.fallback.on_init_error == OnInitError::Fail => Err(e),
        Err(e) => Ok(Err(format!("{}: {e}", backend.name))),
    }
}

/// The shapes of the rest's inputs and the bytes of those that decide shapes.
type Key = (Vec<Vec<usize>>, Vec<Vec<u8>>);

impl<'e> Staged<'e> {
    /// Stages for `graph` (specialised up to `node`, see [`baton_reference::Split`]).
    pub(crate) fn new(
        engine: &'e Engine,
        graph: Graph,
        node: Node,
        rest: Vec<Node>,
    ) -> Result<Staged<'e>> {
        let produced_by = |nodes: &[Node]| -> HashSet<TensorId> {
            nodes
                .iter()
                .flat_map(|n| n.outputs.iter().copied())
                .collect()
        };
        let rest_made = produced_by(&rest);
        let is_const = |t: TensorId| graph.tensors[t].data.is_some();
        let mut rest_inputs = Vec::new();
        for n in &rest {
            for &t in &n.inputs {
                if !rest_made.contains(&t) && !is_const(t) && !rest_inputs.contains(&t) {
                    rest_inputs.push(t);
                }
            }
        }
        let rest_outputs: Vec<TensorId> = graph
            .outputs
            .iter()
            .copied()
            .filter(|t| rest_made.contains(t))
            .collect();
        // What the prefix must hand on: what it computes that the node, the rest or the
        // graph's outputs read.
        let prefix_made = produced_by(&graph.nodes);
        let mut wanted: Vec<TensorId> = Vec::new();
        for &t in node.inputs.iter().chain(&rest_inputs).chain(&graph.outputs) {
            if prefix_made.contains(&t) && !wanted.contains(&t) {
                wanted.push(t);
            }
        }
        let prefix = if wanted.is_empty() {
            None
        } else {
            let g = compact(&graph, &graph.nodes, &graph.inputs, &wanted);
            let session = Session::new(engine, &g, &BTreeMap::new())?;
            Some(Prefix {
                session: Box::new(session),
                outputs: wanted,
            })
        };
        let delegated = delegate_node(engine, &graph, &node)?;
        let template = compact(&graph, &rest, &rest_inputs, &rest_outputs);
        let value_names = baton_reference::values::value_input_names(&template);
        let rest_value_inputs = rest_inputs
            .iter()
            .copied()
            .filter(|&t| value_names.contains(&graph.tensors[t].name))
            .collect();
        Ok(Staged {
            engine,
            graph,
            prefix,
            node,
            delegated,
            rest,
            rest_inputs,
            rest_outputs,
            rest_value_inputs,
            cache: Vec::new(),
            counts: StageCounts::default(),
            profiling: false,
            timeline: Vec::new(),
        })
    }

    /// The sessions this stage holds: the static prefix's and the rest's as compiled for
    /// the last run's shapes, each with a label (what `baton plan` and the memory and
    /// FLOP counts add up).
    pub(crate) fn sessions(&self) -> Vec<(String, &Session<'e>)> {
        let mut all = Vec::new();
        if let Some(p) = &self.prefix {
            all.push(("static prefix".to_string(), &*p.session));
        }
        if let Some((_, s)) = self.cache.last() {
            let label = format!(
                "the rest after {} ({}), as compiled for the last run's shapes",
                self.node.name, self.node.op
            );
            all.push((label, s));
        }
        all
    }

    /// The dynamic node's estimated FLOPs, which the host runs.
    pub(crate) fn node_flops(&self) -> u64 {
        crate::flops::node_flops(&self.graph, &self.node)
    }

    /// Who runs the dynamic node: its plugin's name, or `host`.
    pub(crate) fn node_target(&self) -> &str {
        self.delegated.as_ref().map_or("host", |d| &d.backend)
    }

    /// Turns step timing on or off in every stage's session, those compiled later too.
    pub(crate) fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
        if let Some(p) = &mut self.prefix {
            p.session.set_profiling(on);
        }
        for (_, s) in &mut self.cache {
            s.set_profiling(on);
        }
    }

    /// The last run's timeline (see [`Session::timeline`]): the prefix's steps, the
    /// dynamic node's, then the rest's, with each partition named by its stage.
    pub(crate) fn timeline(&self) -> &[StepTiming] {
        &self.timeline
    }

    /// The plugins' events of the last run, the prefix's partitions first, then the
    /// rest's, numbered after the prefix's.
    pub(crate) fn profile(&self) -> Vec<PartitionProfile> {
        let mut all = Vec::new();
        let mut offset = 0;
        for (_, s) in self.sessions() {
            for mut p in s.profile() {
                p.partition += offset;
                all.push(p);
            }
            offset += s.plan.partitions.len();
        }
        all
    }

    /// `--check` over the stages (see [`Session::check`]): the prefix's partitions on the
    /// model's inputs, then the rest's on the values this run hands it (the prefix's
    /// outputs and the dynamic node's as the reference computes them), numbered after the
    /// prefix's.
    pub(crate) fn check(&mut self, inputs: &[Tensor]) -> Result<Vec<PartitionCheck>> {
        let mut report = Vec::new();
        let mut env: HashMap<TensorId, Tensor> = HashMap::new();
        for (&t, v) in self.graph.inputs.iter().zip(inputs) {
            env.insert(t, v.clone());
        }
        let mut offset = 0;
        if let Some(p) = &mut self.prefix {
            report.extend(p.session.check(inputs)?);
            offset = p.session.plan.partitions.len();
            let g = compact(
                &self.graph,
                &self.graph.nodes,
                &self.graph.inputs,
                &p.outputs,
            );
            let outs =
                baton_reference::run_graph(&g, inputs).map_err(|e| HostError::PluginCall {
                    plugin: "reference".into(),
                    call: "check",
                    status: 0,
                    message: format!("the reference could not run the static prefix: {e}"),
                })?;
            for (&t, v) in p.outputs.iter().zip(outs) {
                env.insert(t, v);
            }
        }
        let operands = self.gather(&env, &self.node.inputs)?;
        let refs: Vec<&Tensor> = operands.iter().collect();
        let results = baton_reference::run_owned(&self.node, &refs)
            .map_err(|e| HostError::node(&self.node, NodeProblem::Kernel(e)))?;
        for (&t, v) in self.node.outputs.iter().zip(results) {
            env.insert(t, v);
        }
        if !self.rest.is_empty() {
            let given = self.gather(&env, &self.rest_inputs)?;
            let (node, op) = (self.node.name.clone(), self.node.op);
            let session = self.rest_session(&given)?;
            for mut c in session.check(&given)? {
                c.partition += offset;
                c.notes.push(format!(
                    "in the rest of the model after the dynamic node {node} ({op}), compiled for this run's shapes"
                ));
                report.push(c);
            }
        }
        Ok(report)
    }

    /// This stage and those nested in the rest's most recent session.
    pub(crate) fn info(&self) -> Vec<StageInfo> {
        let mut all = vec![StageInfo {
            prefix_nodes: self.graph.nodes.len(),
            dynamic_node: format!("{} ({})", self.node.name, self.node.op),
            dynamic_target: match &self.delegated {
                Ok(d) => d.backend.clone(),
                Err(why) => format!("host ({why})"),
            },
            rest_nodes: self.rest.len(),
            counts: self.counts,
            prefix_plan: self
                .prefix
                .as_ref()
                .map(|p| p.session.plan.render(&p.session.graph)),
        }];
        if let Some((_, s)) = self.cache.last() {
            all.extend(s.stages());
        }
        all
    }

    /// Nodes per backend of the last run: the prefix's, the dynamic node on the host, and
    /// the rest's most recent session.
    pub(crate) fn nodes_per_backend(&self) -> BTreeMap<String, usize> {
        let mut all = BTreeMap::new();
        let mut add = |m: BTreeMap<String, usize>| {
            for (k, v) in m {
                *all.entry(k).or_insert(0) += v;
            }
        };
        if let Some(p) = &self.prefix {
            add(p.session.nodes_per_backend());
        }
        add(BTreeMap::from([(self.node_target().to_string(), 1)]));
        if let Some((_, s)) = self.cache.last() {
            add(s.nodes_per_backend());
        }
        all
    }

    /// Runs the stages on `inputs` (graph input order); returns the graph outputs.
    pub(crate) fn run(&mut self, inputs: &[TensorRef<'_>]) -> Result<Vec<Tensor>> {
        let t0 = Instant::now();
        let mut timeline = Vec::new();
        let mut env: HashMap<TensorId, Tensor> = HashMap::new();
        for (&t, v) in self.graph.inputs.iter().zip(inputs) {
            env.insert(t, Tensor::from_bytes(v.dtype, v.shape, v.data));
        }
        let mut prefix_partitions = 0;
        if let Some(p) = &mut self.prefix {
            let given: Vec<&Tensor> = self.graph.inputs.iter().map(|t| &env[t]).collect();
            let start = t0.elapsed().as_nanos() as u64;
            let outs = p.session.run_refs(&given)?;
            for (&t, v) in p.outputs.iter().zip(outs) {
                env.insert(t, v);
            }
            if self.profiling {
                shift_into(&mut timeline, p.session.timeline(), start, 0);
            }
            prefix_partitions = p.session.plan.partitions.len();
        }
        let start = t0.elapsed();
        let (results, target) = self.run_node(&env)?;
        if self.profiling {
            timeline.push(StepTiming {
                name: self.node.label(),
                kind: self.node.op.name().to_string(),
                target,
                start_ns: start.as_nanos() as u64,
                dur_ns: (t0.elapsed() - start).as_nanos() as u64,
                events: Vec::new(),
                children: Vec::new(),
            });
        }
        for (&t, v) in self.node.outputs.iter().zip(results) {
            env.insert(t, v);
        }
        if !self.rest.is_empty() {
            let given = self.gather(&env, &self.rest_inputs)?;
            // Compiling the rest for a new shape is part of this run's time: its own step.
            let start = t0.elapsed();
            let compiled = self.counts.compiled;
            let profiling = self.profiling;
            let session = self.rest_session(&given)?;
            session.set_profiling(profiling);
            let compile = t0.elapsed() - start;
            let refs: Vec<&Tensor> = given.iter().collect();
            let run_start = t0.elapsed().as_nanos() as u64;
            let outs = session.run_refs(&refs)?;
            if profiling {
                if self.counts.compiled > compiled {
                    timeline.push(StepTiming {
                        name: format!("compile the rest after {}", self.node.name),
                        kind: "compile".into(),
                        target: "host".into(),
                        start_ns: start.as_nanos() as u64,
                        dur_ns: compile.as_nanos() as u64,
                        events: Vec::new(),
                        children: Vec::new(),
                    });
                }
                let session = &self.cache.last().expect("the rest's session").1;
                shift_into(
                    &mut timeline,
                    session.timeline(),
                    run_start,
                    prefix_partitions,
                );
            }
            for (&t, v) in self.rest_outputs.iter().zip(outs) {
                env.insert(t, v);
            }
        }
        self.timeline = timeline;
        let outputs = self.graph.outputs.clone();
        self.gather(&env, &outputs)
    }

    /// Runs the dynamic node: on its plugin when it has one (on the host for this run if
    /// the plugin fails and the config allows); returns its outputs and who ran it.
    fn run_node(&mut self, env: &HashMap<TensorId, Tensor>) -> Result<(Vec<Tensor>, String)> {
        if let Ok(d) = &self.delegated {
            let operands = self.gather(env, &d.inputs)?;
            let d = self.delegated.as_mut().expect("checked above");
            match d.run(&operands) {
                Ok(out) => return Ok((out, d.backend.clone())),
                Err(e) if self.engine.config.fallback.on_execute_error == OnExecuteError::Fail => {
                    return Err(e)
                }
                Err(e) => {
                    self.counts.fallbacks += 1;
                    if self.counts.fallbacks <= 3 {
                        eprintln!(
                            "baton: {} failed on {} ({}), running it on the portable kernels: {e}",
                            d.backend, self.node.name, self.node.op
                        );
                    }
                }
            }
        }
        let operands = self.gather(env, &self.node.inputs)?;
        let refs: Vec<&Tensor> = operands.iter().collect();
        let results = baton_reference::run_owned(&self.node, &refs)
            .map_err(|e| HostError::node(&self.node, NodeProblem::Kernel(e)))?;
        Ok((results, "host (dynamic)".into()))
    }

    /// The values of `ids`: computed ones from `env`, constants from the graph.
    fn gather(&self, env: &HashMap<TensorId, Tensor>, ids: &[TensorId]) -> Result<Vec<Tensor>> {
        ids.iter()
            .map(|&t| {
                if let Some(v) = env.get(&t) {
                    return Ok(v.clone());
                }
                let decl = &self.graph.tensors[t];
                match (&decl.data, decl.static_shape()) {
                    (Some(Storage::Inline(d)), Some(shape)) => {
                        Ok(Tensor::from_bytes(decl.dtype, &shape, d.bytes()))
                    }
                    _ => Err(HostError::SymbolicShape {
                        tensor: decl.name.clone(),
                        shape: decl.shape.clone(),
                    }),
                }
            })
            .collect()
    }

    /// The rest's session for these inputs (in `rest_inputs` order), compiled on a miss.
    fn rest_session(&mut self, given: &[Tensor]) -> Result<&mut Session<'e>> {
        let shapes: Vec<Vec<usize>> = given.iter().map(|t| t.shape.clone()).collect();
        let values: Vec<Vec<u8>> = self
            .rest_inputs
            .iter()
            .zip(given)
            .filter(|(t, _)| self.rest_value_inputs.contains(t))
            .map(|(_, v)| v.bytes().to_vec())
            .collect();
        let key = (shapes, values);
        if let Some(k) = self.cache.iter().position(|(c, _)| *c == key) {
            let entry = self.cache.remove(k);
            self.cache.push(entry);
            self.counts.reused += 1;
        } else {
            let mut g = compact(
                &self.graph,
                &self.rest,
                &self.rest_inputs,
                &self.rest_outputs,
            );
            for (&t, v) in g.inputs.clone().iter().zip(given) {
                g.tensors[t].dtype = v.dtype;
                g.tensors[t].shape = v.shape.iter().map(|&d| Dim::Fixed(d)).collect();
            }
            let named: BTreeMap<String, Tensor> = self
                .rest_inputs
                .iter()
                .zip(given)
                .filter(|(t, _)| self.rest_value_inputs.contains(t))
                .map(|(&t, v)| (self.graph.tensors[t].name.clone(), v.clone()))
                .collect();
            let session = Session::with_values(self.engine, &g, &BTreeMap::new(), &named)?;
            self.counts.compiled += 1;
            if self.cache.len() == DEFAULT_CACHED_STAGES {
                self.cache.remove(0);
            }
            self.cache.push((key, session));
        }
        Ok(&mut self.cache.last_mut().expect("just pushed or moved last").1)
    }
}

/// Appends `steps` (timed from their own run's start) to `into`, shifted to start at
/// `start_ns` on the staged run's clock, with their partitions numbered from `offset`.
fn shift_into(into: &mut Vec<StepTiming>, steps: &[StepTiming], start_ns: u64, offset: usize) {
    for s in steps {
        let mut s = s.clone();
        s.shift(start_ns);
        if s.kind == "partition" {
            if let Some(k) = s
                .name
                .strip_prefix("partition ")
                .and_then(|k| k.parse::<usize>().ok())
            {
                s.name = format!("partition {}", k + offset);
            }
        }
        into.push(s);
    }
}

/// The graph of `nodes` over the tensors of `g` they, `inputs` and `outputs` use, with
/// tensor ids renumbered (tensors of other stages, whose shapes may still be symbolic,
/// are left out).
fn compact(g: &Graph, nodes: &[Node], inputs: &[TensorId], outputs: &[TensorId]) -> Graph {
    let mut map: HashMap<TensorId, TensorId> = HashMap::new();
    let mut tensors = Vec::new();
    let mut id = |t: TensorId| -> TensorId {
        *map.entry(t).or_insert_with(|| {
            tensors.push(g.tensors[t].clone());
            tensors.len() - 1
        })
    };
    let inputs: Vec<TensorId> = inputs.iter().map(|&t| id(t)).collect();
    let nodes: Vec<Node> = nodes
        .iter()
        .map(|n| Node {
            inputs: n.inputs.iter().map(|&t| id(t)).collect(),
            outputs: n.outputs.iter().map(|&t| id(t)).collect(),
            ..n.clone()
        })
        .collect();
    let outputs: Vec<TensorId> = outputs.iter().map(|&t| id(t)).collect();
    Graph {
        name: g.name.clone(),
        tensors,
        nodes,
        inputs,
        outputs,
    }
}
