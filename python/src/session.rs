//! `baton.Session` and `baton.Stream`: a model compiled for the engine, run on numpy
//! arrays once or step by step with carried state.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_delegate_api::sdk::TensorRef;
use baton_delegate_api::{Dim, Graph, Tensor, TensorDecl};
use baton_partitioner::Decision;
use baton_runtime_host::program::{self, LoadOptions};
use baton_runtime_host::stream::StreamState;
use baton_runtime_host::{model, BoundedSession, Engine, HostError, Session as HostSession};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::arrays::{self, Held, Numpy};
use crate::error;

enum Kind {
    Fixed(Box<HostSession<'static>>),
    Bounded(Box<BoundedSession<'static>>),
}

/// A loaded model: `run({name: array}) -> {name: array}`; `stream({state_in: state_out})`
/// for step-by-step runs; `plan`, `inputs` and `outputs` as rows.
///
/// The runtime's sessions borrow their engine, which a Python object cannot carry: the
/// session holds the engine's `Arc` and the runtime session a `'static` borrow of it. That
/// is sound because the engine never moves inside its `Arc`, and `engine` is the last
/// field, dropped after `kind`, the borrow's only user.
#[pyclass(module = "baton", unsendable)]
pub struct Session {
    kind: Option<Kind>,
    /// Whether runs bind the dims (none were given and the model has symbolic ones).
    by_runs: bool,
    binding: BTreeMap<String, usize>,
    /// Counts compilations, so a stream made before a rebinding refuses to go on.
    generation: u64,
    graph: Graph,
    path: PathBuf,
    np: Numpy,
    engine: Arc<Engine>,
}

fn lend(engine: &Arc<Engine>) -> &'static Engine {
    // SAFETY: see `Session`: the engine does not move, and outlives every borrow's user.
    unsafe { &*Arc::as_ptr(engine) }
}

fn loading(path: &Path) -> impl Fn(HostError) -> PyErr + '_ {
    move |e| error(format!("loading {}: {e}", path.display()))
}

impl Session {
    pub fn open(
        py: Python<'_>,
        engine: Arc<Engine>,
        path: &Path,
        dims: Option<BTreeMap<String, usize>>,
        bounds: Option<BTreeMap<String, usize>>,
    ) -> PyResult<Session> {
        let np = Numpy::new(py)?;
        let e = lend(&engine);
        let (graph, kind, by_runs) = if program::is_program(path) {
            let p = program::read(path, true).map_err(loading(path))?;
            let graph = p.graph.clone();
            let kind = if p.bounds.is_empty() {
                let s = program::load(e, p, &LoadOptions::default()).map_err(loading(path))?;
                Kind::Fixed(Box::new(s))
            } else {
                Kind::Bounded(Box::new(
                    program::load_bounded(e, &p).map_err(loading(path))?,
                ))
            };
            (graph, Some(kind), false)
        } else {
            let graph = model::load(path).map_err(error)?;
            let symbolic = graph.inputs.iter().any(|&t| {
                graph.tensors[t]
                    .shape
                    .iter()
                    .any(|d| matches!(d, Dim::Sym(_)))
            });
            let kind = match (&dims, &bounds) {
                (Some(_), Some(_)) => return Err(error("give dims or bounds, not both")),
                (_, Some(b)) => Some(Kind::Bounded(Box::new(
                    BoundedSession::new(e, &graph, b).map_err(loading(path))?,
                ))),
                (Some(d), None) => Some(Kind::Fixed(Box::new(
                    HostSession::new(e, &graph, d).map_err(loading(path))?,
                ))),
                (None, None) if !symbolic => Some(Kind::Fixed(Box::new(
                    HostSession::new(e, &graph, &BTreeMap::new()).map_err(loading(path))?,
                ))),
                (None, None) => None,
            };
            let by_runs = kind.is_none();
            (graph, kind, by_runs)
        };
        Ok(Session {
            kind,
            by_runs,
            binding: dims.unwrap_or_default(),
            generation: 0,
            graph,
            path: path.to_path_buf(),
            np,
            engine,
        })
    }

    /// The inputs of a run in graph order, from a dict by name (`skip`: the names a
    /// stream supplies itself).
    fn gather<'py>(
        &self,
        inputs: &Bound<'py, PyDict>,
        skip: &[String],
    ) -> PyResult<Vec<Held<'py>>> {
        let mut held = Vec::new();
        let mut used = 0;
        for &t in &self.graph.inputs {
            let name = &self.graph.tensors[t].name;
            if skip.contains(name) {
                continue;
            }
            let value = inputs.get_item(name)?.ok_or_else(|| {
                error(format!(
                    "missing input '{name}' ({}); the inputs are: {}",
                    describe(&self.graph.tensors[t]),
                    self.names(&self.graph.inputs, skip).join(", ")
                ))
            })?;
            held.push(arrays::held(&self.np, name, &value)?);
            used += 1;
        }
        if used != inputs.len() {
            let known = self.names(&self.graph.inputs, skip);
            for key in inputs.keys() {
                let key: String = key.extract()?;
                if !known.contains(&key) {
                    return Err(error(format!(
                        "'{key}' is not an input{}; the inputs are: {}",
                        if skip.contains(&key) {
                            " a step takes (it is a carried state)"
                        } else {
                            " of the model"
                        },
                        known.join(", ")
                    )));
                }
            }
        }
        Ok(held)
    }

    fn names(&self, list: &[usize], skip: &[String]) -> Vec<String> {
        list.iter()
            .map(|&t| self.graph.tensors[t].name.clone())
            .filter(|n| !skip.contains(n))
            .collect()
    }

    /// With dims bound by runs: compiles for the binding the shapes give (one per graph
    /// input, `None` for an input that binds nothing), when it changed.
    fn bind(&mut self, shapes: &[Option<&[usize]>]) -> PyResult<()> {
        if !self.by_runs {
            return Ok(());
        }
        let mut binding = BTreeMap::new();
        for (&t, shape) in self.graph.inputs.iter().zip(shapes) {
            let Some(shape) = shape else { continue };
            for (d, &n) in self.graph.tensors[t].shape.iter().zip(shape.iter()) {
                if let Dim::Sym(s) = d {
                    binding.entry(s.clone()).or_insert(n);
                }
            }
        }
        if self.kind.is_some() && binding == self.binding {
            return Ok(());
        }
        self.kind = None;
        let s = HostSession::new(lend(&self.engine), &self.graph, &binding)
            .map_err(loading(&self.path))?;
        self.kind = Some(Kind::Fixed(Box::new(s)));
        self.binding = binding;
        self.generation += 1;
        Ok(())
    }

    fn fixed(&mut self, what: &str) -> PyResult<&mut HostSession<'static>> {
        fixed_of(&mut self.kind, what)
    }
}

/// The compiled session of `kind`, or why there is none to use for `what`.
fn fixed_of<'a>(kind: &'a mut Option<Kind>, what: &str) -> PyResult<&'a mut HostSession<'static>> {
    {
        match kind {
            Some(Kind::Fixed(s)) => Ok(s),
            Some(Kind::Bounded(_)) => Err(error(format!(
                "{what}: a session loaded with bounds is compiled per binding at run time; load with dims= for this"
            ))),
            None => Err(error(format!(
                "{what}: the model's dims are not bound yet: load it with dims={{...}} or run it once"
            ))),
        }
    }
}

/// `f32[1, n]`, a declared type as errors say it.
fn describe(decl: &TensorDecl) -> String {
    baton_runtime_host::error::TensorType::declared(decl.dtype, &decl.shape).to_string()
}

fn views<'a>(held: &'a [Held<'_>]) -> Vec<TensorRef<'a>> {
    held.iter()
        .map(|h| TensorRef {
            dtype: h.dtype,
            shape: &h.shape,
            data: h.bytes(),
            quant: None,
        })
        .collect()
}

/// The rows of `list` (inputs or outputs): name, dtype, shape (an int per fixed axis, the
/// name of a symbolic one).
fn tensor_rows<'py>(
    py: Python<'py>,
    graph: &Graph,
    list: &[usize],
) -> PyResult<Bound<'py, PyList>> {
    let rows = PyList::empty(py);
    for &t in list {
        let decl = &graph.tensors[t];
        let d = PyDict::new(py);
        d.set_item("name", &decl.name)?;
        d.set_item(
            "dtype",
            arrays::numpy_name(decl.dtype).unwrap_or(decl.dtype.name()),
        )?;
        let shape = PyList::empty(py);
        for dim in &decl.shape {
            match dim {
                Dim::Fixed(n) => shape.append(*n)?,
                Dim::Sym(s) => shape.append(s)?,
            }
        }
        d.set_item("shape", shape)?;
        rows.append(d)?;
    }
    Ok(rows)
}

#[pymethods]
impl Session {
    /// Runs the model once: `inputs` maps each input's name to an array (or anything
    /// numpy makes one of); returns each output's name mapped to a new array.
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let held = self.gather(inputs, &[])?;
        let shapes: Vec<Option<&[usize]>> = held.iter().map(|h| Some(h.shape.as_slice())).collect();
        self.bind(&shapes)?;
        let names = self.names(&self.graph.outputs, &[]);
        let out = PyDict::new(py);
        let np = &self.np;
        match self.kind.as_mut().expect("bound above") {
            Kind::Fixed(s) => {
                let mut failed: Option<PyErr> = None;
                let result = s.run_views(&views(&held), &mut |pos, dtype, shape, bytes| {
                    let made = arrays::output(py, np, &names[pos], dtype, shape, bytes)
                        .and_then(|a| out.set_item(&names[pos], a));
                    made.map_err(|e| {
                        failed = Some(e);
                        HostError::OutputBuffer {
                            name: names[pos].clone(),
                            needed: bytes.len(),
                            capacity: 0,
                        }
                    })
                });
                if let Some(e) = failed {
                    return Err(e);
                }
                result.map_err(error)?;
            }
            Kind::Bounded(s) => {
                // A bounded session takes owned tensors: one more copy of each input.
                let owned: Vec<Tensor> = views(&held)
                    .iter()
                    .map(|v| Tensor::from_bytes(v.dtype, v.shape, v.data))
                    .collect();
                let results = s.run(&owned).map_err(error)?;
                for (name, t) in names.iter().zip(&results) {
                    out.set_item(
                        name,
                        arrays::output(py, np, name, t.dtype, &t.shape, t.bytes())?,
                    )?;
                }
            }
        }
        Ok(out)
    }

    /// A stream over this session: `states` maps each state input to the output that
    /// feeds it on the next step. The states start at zeros, or at the arrays `initial`
    /// gives by state input. With dims bound by runs, the first step binds them (from its
    /// inputs and the initial states).
    #[pyo3(signature = (states, initial=None))]
    fn stream(
        slf: Bound<'_, Session>,
        states: BTreeMap<String, String>,
        initial: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Stream> {
        let me = slf.borrow();
        let mut init = BTreeMap::new();
        if let Some(initial) = initial {
            for (k, v) in initial.iter() {
                let name: String = k.extract()?;
                if !states.contains_key(&name) {
                    return Err(error(format!(
                        "initial '{name}' is not a state input of this stream (states: {})",
                        states.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
                let h = arrays::held(&me.np, &name, &v)?;
                init.insert(name, Tensor::from_bytes(h.dtype, &h.shape, h.bytes()));
            }
        }
        let outputs = me
            .names(&me.graph.outputs, &[])
            .into_iter()
            .filter(|n| !states.values().any(|o| o == n))
            .collect();
        drop(me);
        let mut stream = Stream {
            session: slf.clone().unbind(),
            pairs: states,
            initial: init,
            state: None,
            outputs,
            generation: 0,
        };
        // A session already compiled starts the stream now, so a wrong pair is said here.
        if !slf.borrow().by_runs || slf.borrow().kind.is_some() {
            stream.start(&mut slf.borrow_mut())?;
        }
        Ok(stream)
    }

    /// Where each node runs and why, one dict per node: node, op, target ("host" or a
    /// backend), partition (None on the host), reason.
    #[getter]
    fn plan<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let s = self.fixed("plan")?;
        let rows = PyList::empty(py);
        for e in &s.plan.nodes {
            let node = &s.graph.nodes[e.node];
            let d = PyDict::new(py);
            d.set_item("node", &node.name)?;
            d.set_item("op", node.op.to_string())?;
            match &e.decision {
                Decision::Delegated { backend, partition } => {
                    d.set_item("target", backend)?;
                    d.set_item("partition", *partition)?;
                }
                Decision::Host => {
                    d.set_item("target", "host")?;
                    d.set_item("partition", py.None())?;
                }
            }
            d.set_item("reason", e.reasons.join("; "))?;
            rows.append(d)?;
        }
        Ok(rows)
    }

    /// `baton run --check`: runs each delegated partition also on the reference with the
    /// same inputs; returns one row (dict) per partition and output: partition, backend,
    /// nodes, output, dtype, max_abs, max_rel, max_ulp, past, elements, tolerance (abs,
    /// rel, ulp), passed, and first_node_past (node, op, position; None when within
    /// tolerance or not found).
    fn check<'py>(
        &mut self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyList>> {
        let held = self.gather(inputs, &[])?;
        let shapes: Vec<Option<&[usize]>> = held.iter().map(|h| Some(h.shape.as_slice())).collect();
        self.bind(&shapes)?;
        let owned: Vec<Tensor> = held
            .iter()
            .map(|h| Tensor::from_bytes(h.dtype, &h.shape, h.bytes()))
            .collect();
        let report = self.fixed("check")?.check(&owned).map_err(error)?;
        let rows = PyList::empty(py);
        for p in &report {
            let first = match &p.first_node_past {
                Some(f) => {
                    let d = PyDict::new(py);
                    d.set_item("node", &f.node)?;
                    d.set_item("op", &f.op)?;
                    d.set_item("position", f.position)?;
                    d.into_any()
                }
                None => py.None().into_bound(py),
            };
            for e in &p.outputs {
                let d = PyDict::new(py);
                d.set_item("partition", p.partition)?;
                d.set_item("backend", &p.backend)?;
                d.set_item("nodes", p.nodes)?;
                d.set_item("output", &e.tensor)?;
                d.set_item("dtype", &e.dtype)?;
                d.set_item("max_abs", e.max_abs)?;
                d.set_item("max_rel", e.max_rel)?;
                d.set_item("max_ulp", e.max_ulp)?;
                d.set_item("past", e.past)?;
                d.set_item("elements", e.elements)?;
                d.set_item(
                    "tolerance",
                    (e.tolerance.abs, e.tolerance.rel, e.tolerance.ulp),
                )?;
                d.set_item("passed", e.passed())?;
                d.set_item("first_node_past", &first)?;
                rows.append(d)?;
            }
        }
        Ok(rows)
    }

    /// The model's inputs as rows: name, dtype, shape.
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        tensor_rows(py, &self.graph, &self.graph.inputs)
    }

    /// The model's outputs as rows: name, dtype, shape.
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        tensor_rows(py, &self.graph, &self.graph.outputs)
    }

    /// The symbolic dimensions as bound now (by `dims=` or by the last run).
    #[getter]
    fn dims(&self) -> BTreeMap<String, usize> {
        self.binding.clone()
    }
}

/// A session run step by step: `step({name: array})` takes the inputs that are not state
/// and returns the outputs that are not state; the states are carried. A failed step
/// leaves them as they were.
#[pyclass(module = "baton", unsendable)]
pub struct Stream {
    session: Py<Session>,
    /// State input -> the output that feeds it.
    pairs: BTreeMap<String, String>,
    initial: BTreeMap<String, Tensor>,
    /// `None` until the session is compiled (the first step, with dims bound by runs).
    state: Option<StreamState>,
    outputs: Vec<String>,
    /// The session's compilation this state belongs to.
    generation: u64,
}

impl Stream {
    /// Makes the state over the session as compiled now, from the initial values.
    fn start(&mut self, session: &mut Session) -> PyResult<()> {
        let pairs: Vec<(&str, &str)> = self
            .pairs
            .iter()
            .map(|(i, o)| (i.as_str(), o.as_str()))
            .collect();
        let mut state = session
            .fixed("stream")?
            .stream_state(&pairs)
            .map_err(error)?;
        for (name, t) in &self.initial {
            state.set_state(name, t.clone()).map_err(error)?;
        }
        self.state = Some(state);
        self.generation = session.generation;
        Ok(())
    }
}

#[pymethods]
impl Stream {
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut session = self.session.bind(py).borrow_mut();
        let skip: Vec<String> = self.pairs.keys().cloned().collect();
        let held = session.gather(inputs, &skip)?;
        if self.state.is_none() {
            // Dims bound by runs: this step's inputs and the initial states bind them.
            let mut free = held.iter();
            let shapes: Vec<Option<&[usize]>> = session
                .names(&session.graph.inputs, &[])
                .iter()
                .map(|n| match self.initial.get(n) {
                    Some(t) => Some(t.shape.as_slice()),
                    None if skip.contains(n) => None,
                    None => free.next().map(|h| h.shape.as_slice()),
                })
                .collect();
            session.bind(&shapes)?;
            self.start(&mut session)?;
        }
        if session.generation != self.generation {
            return Err(error(
                "the session was compiled again for other dims since this stream began; start a new stream",
            ));
        }
        let out = PyDict::new(py);
        let session = &mut *session;
        let (names, np) = (&self.outputs, &session.np);
        let s = fixed_of(&mut session.kind, "step")?;
        let state = self.state.as_mut().expect("started above");
        let mut failed: Option<PyErr> = None;
        let result = state.step_views(s, &views(&held), &mut |pos, dtype, shape, bytes| {
            let made = arrays::output(py, np, &names[pos], dtype, shape, bytes)
                .and_then(|a| out.set_item(&names[pos], a));
            made.map_err(|e| {
                failed = Some(e);
                HostError::OutputBuffer {
                    name: names[pos].clone(),
                    needed: bytes.len(),
                    capacity: 0,
                }
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        result.map_err(error)?;
        Ok(out)
    }

    /// The current value of the state held for input `name`, as a new array.
    fn state<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let state = self
            .state
            .as_ref()
            .ok_or_else(|| error("the stream has not taken a step yet"))?;
        let t = state.state(name).map_err(error)?;
        arrays::output(py, &Numpy::new(py)?, name, t.dtype, &t.shape, t.bytes())
    }

    /// Puts every state back to its initial value (zeros where none was given).
    fn reset(&mut self) -> PyResult<()> {
        if let Some(state) = &mut self.state {
            state.reset();
            for (name, t) in &self.initial {
                state.set_state(name, t.clone()).map_err(error)?;
            }
        }
        Ok(())
    }
}
