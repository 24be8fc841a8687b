//! Sessions: a model compiled for the engine's plugins, run on buffers the caller lends,
//! once or step by step with carried state, and the plan it was compiled to.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, CString};
use std::sync::Arc;

use baton_delegate_api::{Dim, Graph, Tensor};
use baton_partitioner::Decision;
use baton_runtime_host::error::InputProblem;
use baton_runtime_host::program::{self, LoadOptions};
use baton_runtime_host::stream::StreamState;
use baton_runtime_host::{BoundedSession, Engine, HostError, Session};

use crate::model::{pick, BatonModel};
use crate::tensor::{
    dim_list, input_shapes, input_views, write_output, BatonDim, BatonStatePair, BatonTensor,
    BatonTensorInfo, HeldInfo,
};
use crate::{
    guard, handle, handle_mut, put, slice, text, BatonEngine, BatonResult, CapiError, Tag, Tagged,
};

/// The header's `BatonSession`.
///
/// The runtime's sessions borrow their engine; a C handle cannot carry a borrow, so the
/// session holds the engine's `Arc` and the runtime session is made with a `'static`
/// borrow of it. That is sound because the `Arc`'s engine never moves, and `engine` is
/// the last field: it is dropped after `kind` and `stream`, the only users of the borrow.
#[repr(C)]
pub struct BatonSession {
    tag: Tag,
    pub(crate) kind: Kind,
    stream: Option<Stream>,
    /// The rows of the last `baton_session_check`.
    pub(crate) checks: Vec<crate::check::HeldCheck>,
    inputs: Vec<HeldInfo>,
    outputs: Vec<HeldInfo>,
    input_names: Vec<String>,
    output_names: Vec<String>,
    plan: Option<Vec<HeldRow>>,
    engine: Arc<Engine>,
}

impl Tagged for BatonSession {
    const TAG: Tag = Tag::Session;
    const KIND: &'static str = "BatonSession";
}

pub(crate) enum Kind {
    Fixed(Box<Session<'static>>),
    Bounded(Box<BoundedSession<'static>>),
}

/// A stream's state and the names of the outputs a step gives the caller.
struct Stream {
    state: StreamState,
    outputs: Vec<String>,
}

/// The header's `BatonPlanRow`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatonPlanRow {
    pub node: *const c_char,
    pub op: *const c_char,
    pub target: *const c_char,
    pub partition: i64,
    pub reason: *const c_char,
}

struct HeldRow {
    node: CString,
    op: CString,
    target: CString,
    partition: i64,
    reason: CString,
}

fn plan_rows(session: &Session<'_>) -> Vec<HeldRow> {
    let c = crate::c_string;
    session
        .plan
        .nodes
        .iter()
        .map(|e| {
            let node = &session.graph.nodes[e.node];
            let (target, partition) = match &e.decision {
                Decision::Delegated { backend, partition } => (backend.as_str(), *partition as i64),
                Decision::Host => ("host", -1),
            };
            HeldRow {
                node: c(&node.name),
                op: c(&node.op.to_string()),
                target: c(target),
                partition,
                reason: c(&e.reasons.join("; ")),
            }
        })
        .collect()
}

/// The names of the symbolic dimensions of `graph`'s inputs.
fn symbolic_dims(graph: &Graph) -> BTreeSet<String> {
    graph
        .inputs
        .iter()
        .flat_map(|&t| &graph.tensors[t].shape)
        .filter_map(|d| match d {
            Dim::Sym(s) => Some(s.clone()),
            Dim::Fixed(_) => None,
        })
        .collect()
}

/// `dims` as a map, each name checked against the model's symbolic dimensions (a typo
/// would otherwise bind nothing).
unsafe fn dim_map(
    graph: &Graph,
    dims: *const BatonDim,
    n: usize,
    arg: &'static str,
) -> crate::Result<BTreeMap<String, usize>> {
    let known = symbolic_dims(graph);
    let mut map = BTreeMap::new();
    for (name, value) in dim_list(slice(dims, n, arg)?, arg)? {
        if !known.contains(&name) {
            let list: Vec<&str> = known.iter().map(String::as_str).collect();
            return Err(CapiError::Argument(format!(
                "{arg}: the model has no symbolic dimension '{name}' (its symbolic dimensions: {})",
                if list.is_empty() {
                    "none".to_string()
                } else {
                    list.join(", ")
                }
            )));
        }
        map.insert(name, value);
    }
    Ok(map)
}

impl BatonSession {
    fn new(engine: Arc<Engine>, kind: Kind, graph: &Graph) -> BatonSession {
        let (inputs, outputs, plan) = match &kind {
            Kind::Fixed(s) => {
                let bound = |list: &[usize]| -> Vec<HeldInfo> {
                    list.iter()
                        .map(|&t| {
                            let shape = s.graph.tensors[t].static_shape();
                            HeldInfo::new(&s.graph.tensors[t], shape.as_deref())
                        })
                        .collect()
                };
                (
                    bound(&s.graph.inputs),
                    bound(&s.graph.outputs),
                    Some(plan_rows(s)),
                )
            }
            Kind::Bounded(_) => {
                let declared = |list: &[usize]| -> Vec<HeldInfo> {
                    list.iter()
                        .map(|&t| HeldInfo::new(&graph.tensors[t], None))
                        .collect()
                };
                (declared(&graph.inputs), declared(&graph.outputs), None)
            }
        };
        let names = |list: &[usize]| -> Vec<String> {
            list.iter()
                .map(|&t| graph.tensors[t].name.clone())
                .collect()
        };
        BatonSession {
            tag: Tag::Session,
            kind,
            stream: None,
            checks: Vec::new(),
            inputs,
            outputs,
            input_names: names(&graph.inputs),
            output_names: names(&graph.outputs),
            plan,
            engine,
        }
    }
}

/// The engine behind `engine`'s `Arc`, borrowed for as long as a session holding that
/// `Arc` lives (see [`BatonSession`]).
fn lend(engine: &Arc<Engine>) -> &'static Engine {
    // SAFETY: the engine lives in the Arc's allocation, which does not move; the session
    // this borrow goes into holds a clone of the Arc and drops it after the borrow's users.
    unsafe { &*Arc::as_ptr(engine) }
}

/// A session with every symbolic dimension bound.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_create(
    engine: *mut BatonEngine,
    model: *mut BatonModel,
    dims: *const BatonDim,
    n_dims: usize,
    out: *mut *mut BatonSession,
) -> BatonResult {
    guard("baton_session_create", || {
        if out.is_null() {
            return Err(CapiError::Null { arg: "out" });
        }
        let arc = handle(engine, "engine")?.engine.clone();
        let m = handle_mut(model, "model")?;
        let bindings = dim_map(&m.graph, dims, n_dims, "dims")?;
        let kind = if m.is_program {
            let p = m.take_program()?;
            if !p.bounds.is_empty() {
                let s = program::load_bounded(lend(&arc), &p)?;
                Kind::Bounded(Box::new(s))
            } else {
                if let Some((k, v)) = bindings.iter().find(|(k, v)| p.bindings.get(*k) != Some(v)) {
                    return Err(CapiError::Argument(format!(
                        "dims: {k} = {v}, but the program {} was compiled with {k} = {}",
                        m.path.display(),
                        p.bindings
                            .get(k)
                            .map_or("nothing".into(), |b| b.to_string())
                    )));
                }
                Kind::Fixed(Box::new(program::load(
                    lend(&arc),
                    p,
                    &LoadOptions::default(),
                )?))
            }
        } else {
            Kind::Fixed(Box::new(Session::new(lend(&arc), &m.graph, &bindings)?))
        };
        let session = BatonSession::new(arc, kind, &m.graph);
        put(out, Box::into_raw(Box::new(session)), "out")
    })
}

/// A session for every binding within `bounds`.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_create_bounded(
    engine: *mut BatonEngine,
    model: *mut BatonModel,
    bounds: *const BatonDim,
    n_bounds: usize,
    out: *mut *mut BatonSession,
) -> BatonResult {
    guard("baton_session_create_bounded", || {
        if out.is_null() {
            return Err(CapiError::Null { arg: "out" });
        }
        let arc = handle(engine, "engine")?.engine.clone();
        let m = handle(model, "model")?;
        let bounds = dim_map(&m.graph, bounds, n_bounds, "bounds")?;
        let s = BoundedSession::new(lend(&arc), &m.graph, &bounds)?;
        let session = BatonSession::new(arc, Kind::Bounded(Box::new(s)), &m.graph);
        put(out, Box::into_raw(Box::new(session)), "out")
    })
}

/// Frees a session handle.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_free(session: *mut BatonSession) {
    crate::free(session, "baton_session_free");
}

/// How many inputs the session takes.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_input_count(
    session: *const BatonSession,
    out: *mut usize,
) -> BatonResult {
    guard("baton_session_input_count", || {
        put(out, handle(session, "session")?.inputs.len(), "out")
    })
}

/// How many outputs the session gives.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_output_count(
    session: *const BatonSession,
    out: *mut usize,
) -> BatonResult {
    guard("baton_session_output_count", || {
        put(out, handle(session, "session")?.outputs.len(), "out")
    })
}

/// One input, with its bound extents.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_input(
    session: *const BatonSession,
    index: usize,
    out: *mut BatonTensorInfo,
) -> BatonResult {
    guard("baton_session_input", || {
        let s = handle(session, "session")?;
        put(out, pick(&s.inputs, index, "input")?.info()?, "out")
    })
}

/// One output, with its bound extents.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_output(
    session: *const BatonSession,
    index: usize,
    out: *mut BatonTensorInfo,
) -> BatonResult {
    guard("baton_session_output", || {
        let s = handle(session, "session")?;
        put(out, pick(&s.outputs, index, "output")?.info()?, "out")
    })
}

/// The caller's output buffers, their count checked against what the run gives.
unsafe fn output_slots<'a>(
    outputs: *mut BatonTensor,
    n: usize,
    expected: usize,
) -> crate::Result<&'a mut [BatonTensor]> {
    if n != expected {
        return Err(CapiError::Argument(format!(
            "{n} outputs given, the run gives {expected}"
        )));
    }
    if n == 0 {
        return Ok(&mut []);
    }
    if outputs.is_null() {
        return Err(CapiError::Null { arg: "outputs" });
    }
    Ok(std::slice::from_raw_parts_mut(outputs, n))
}

/// Runs the model once on the caller's buffers.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_run(
    session: *mut BatonSession,
    inputs: *const BatonTensor,
    n_inputs: usize,
    outputs: *mut BatonTensor,
    n_outputs: usize,
) -> BatonResult {
    guard("baton_session_run", || {
        let s = handle_mut(session, "session")?;
        let inputs = slice(inputs, n_inputs, "inputs")?;
        let outs = output_slots(outputs, n_outputs, s.output_names.len())?;
        let shapes = input_shapes(inputs)?;
        let views = input_views(inputs, &shapes)?;
        let (names, input_names) = (&s.output_names, &s.input_names);
        match &mut s.kind {
            Kind::Fixed(session) => {
                session.run_views(&views, &mut |pos, dtype, shape, bytes| {
                    write_output(&mut outs[pos], &names[pos], dtype, shape, bytes)
                })?
            }
            Kind::Bounded(session) => {
                // The bounded session picks its specialised session by the inputs' extents
                // and takes owned tensors: one more copy of each input.
                let mut owned = Vec::with_capacity(views.len());
                for (v, name) in views.iter().zip(input_names) {
                    let len = v.shape.iter().product::<usize>() * v.dtype.size();
                    if v.data.len() != len {
                        return Err(HostError::Input {
                            name: name.clone(),
                            problem: InputProblem::BufferSize {
                                expected: len,
                                got: v.data.len(),
                            },
                        }
                        .into());
                    }
                    owned.push(Tensor::from_bytes(v.dtype, v.shape, v.data));
                }
                let results = session.run(&owned)?;
                for (pos, t) in results.iter().enumerate() {
                    write_output(&mut outs[pos], &names[pos], t.dtype, &t.shape, t.bytes())?;
                }
            }
        }
        Ok(())
    })
}

/// Starts (or restarts, from zeros) carrying state between steps.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_stream(
    session: *mut BatonSession,
    pairs: *const BatonStatePair,
    n_pairs: usize,
) -> BatonResult {
    guard("baton_session_stream", || {
        let s = handle_mut(session, "session")?;
        let mut named = Vec::with_capacity(n_pairs);
        for p in slice(pairs, n_pairs, "pairs")? {
            named.push((
                text(p.input, "pairs[].input")?,
                text(p.output, "pairs[].output")?,
            ));
        }
        let Kind::Fixed(fixed) = &s.kind else {
            return Err(CapiError::Argument(
                "a bounded session cannot stream: make a session with its dims bound".into(),
            ));
        };
        let state = fixed.stream_state(&named)?;
        let carried: BTreeSet<&str> = named.iter().map(|&(_, o)| o).collect();
        let outputs = s
            .output_names
            .iter()
            .filter(|n| !carried.contains(n.as_str()))
            .cloned()
            .collect();
        s.stream = Some(Stream { state, outputs });
        Ok(())
    })
}

/// One step of the stream on the caller's buffers.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_step(
    session: *mut BatonSession,
    inputs: *const BatonTensor,
    n_inputs: usize,
    outputs: *mut BatonTensor,
    n_outputs: usize,
) -> BatonResult {
    guard("baton_session_step", || {
        let s = handle_mut(session, "session")?;
        let (Kind::Fixed(fixed), Some(stream)) = (&mut s.kind, &mut s.stream) else {
            return Err(CapiError::Argument(
                "no stream started on this session: call baton_session_stream first".into(),
            ));
        };
        let inputs = slice(inputs, n_inputs, "inputs")?;
        let outs = output_slots(outputs, n_outputs, stream.outputs.len())?;
        let shapes = input_shapes(inputs)?;
        let views = input_views(inputs, &shapes)?;
        let names = &stream.outputs;
        stream
            .state
            .step_views(fixed, &views, &mut |pos, dtype, shape, bytes| {
                write_output(&mut outs[pos], &names[pos], dtype, shape, bytes)
            })?;
        Ok(())
    })
}

/// Puts every state back to zeros.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_reset_state(session: *mut BatonSession) -> BatonResult {
    guard("baton_session_reset_state", || {
        let s = handle_mut(session, "session")?;
        let stream = s
            .stream
            .as_mut()
            .ok_or_else(|| CapiError::Argument("no stream started on this session".into()))?;
        stream.state.reset();
        Ok(())
    })
}

fn plan_of(s: &BatonSession) -> crate::Result<&[HeldRow]> {
    s.plan.as_deref().ok_or_else(|| {
        CapiError::Argument(
            "a bounded session is planned per binding at run time: it has no one plan".into(),
        )
    })
}

/// How many plan rows (one per node).
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_plan_size(
    session: *const BatonSession,
    out: *mut usize,
) -> BatonResult {
    guard("baton_session_plan_size", || {
        put(out, plan_of(handle(session, "session")?)?.len(), "out")
    })
}

/// One plan row.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_plan_row(
    session: *const BatonSession,
    index: usize,
    out: *mut BatonPlanRow,
) -> BatonResult {
    guard("baton_session_plan_row", || {
        let rows = plan_of(handle(session, "session")?)?;
        let r = pick(rows, index, "plan row")?;
        let row = BatonPlanRow {
            node: r.node.as_ptr(),
            op: r.op.as_ptr(),
            target: r.target.as_ptr(),
            partition: r.partition,
            reason: r.reason.as_ptr(),
        };
        put(out, row, "out")
    })
}
