//! What crosses the ABI with a call: a graph serialized with its constants as views, tensor
//! views over host memory, and the one-shot compile → init → execute path that the probe and
//! the conformance kit use.

use baton_delegate_api::abi;
use baton_delegate_api::ir::TensorData;
use baton_delegate_api::sdk::ProfileEvent;
use baton_delegate_api::{Graph, Tensor};

use super::{PluginContext, PluginExecutable, PluginLibrary};
use crate::error::{HostError, Result};

/// A graph serialized for an ABI call, with its constants as views.
pub struct AbiGraph<'g> {
    pub bytes: Vec<u8>,
    pub views: Vec<abi::TensorView>,
    /// The constants the views point into, in view order: shared handles, so that an
    /// executable can keep them alive for `init_retained` without copying.
    pub data: Vec<TensorData>,
    _shapes: Vec<Vec<i64>>,
    _graph: std::marker::PhantomData<&'g Graph>,
}

impl<'g> AbiGraph<'g> {
    /// Serializes `graph` with external constants and builds their views.
    pub fn new(graph: &'g Graph) -> AbiGraph<'g> {
        let (bytes, consts) =
            baton_delegate_api::wire::encode(graph, baton_delegate_api::wire::ConstMode::External);
        let shapes: Vec<Vec<i64>> = consts
            .iter()
            .map(|&t| {
                graph.tensors[t]
                    .shape
                    .iter()
                    .map(|d| d.fixed().map_or(-1, |v| v as i64))
                    .collect()
            })
            .collect();
        let views = consts
            .iter()
            .zip(&shapes)
            .map(|(&t, shape)| {
                let decl = &graph.tensors[t];
                let data = match &decl.data {
                    Some(baton_delegate_api::Storage::Inline(d)) => d.bytes(),
                    _ => &[],
                };
                view_of(
                    decl.dtype.code(),
                    data.as_ptr() as *mut u8,
                    data.len(),
                    shape,
                    decl.quant.as_ref(),
                )
            })
            .collect();
        let data = consts
            .iter()
            .map(|&t| match &graph.tensors[t].data {
                Some(baton_delegate_api::Storage::Inline(d)) => d.clone(),
                _ => TensorData::from_bytes(&[]),
            })
            .collect();
        AbiGraph {
            bytes,
            views,
            data,
            _shapes: shapes,
            _graph: std::marker::PhantomData,
        }
    }
}

/// Builds an ABI tensor view. Quantization arrays must outlive the view.
pub fn view_of(
    dtype: u32,
    data: *mut u8,
    len: usize,
    shape: &[i64],
    quant: Option<&baton_delegate_api::Quant>,
) -> abi::TensorView {
    let quant = match quant {
        None => abi::QuantView {
            kind: 0,
            axis: 0,
            count: 0,
            reserved: 0,
            scales: std::ptr::null(),
            zero_points: std::ptr::null(),
        },
        Some(baton_delegate_api::Quant::PerTensor { scale, zero_point }) => abi::QuantView {
            kind: 1,
            axis: 0,
            count: 1,
            reserved: 0,
            scales: scale,
            zero_points: zero_point,
        },
        Some(baton_delegate_api::Quant::PerAxis {
            axis,
            scales,
            zero_points,
        }) => abi::QuantView {
            kind: 2,
            axis: *axis as u32,
            count: scales.len().min(zero_points.len()) as u32,
            reserved: 0,
            scales: scales.as_ptr(),
            zero_points: zero_points.as_ptr(),
        },
    };
    abi::TensorView {
        data: data.cast(),
        byte_len: len as u64,
        dtype,
        rank: shape.len() as u32,
        shape: shape.as_ptr() as *mut i64,
        quant,
    }
}

/// Runs a whole graph on a plugin once, outside any plan: compile, init, execute with
/// owned buffers. Used by probes and the conformance kit.
pub fn run_once(
    ctx: &PluginContext,
    device: u32,
    graph: &Graph,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>> {
    run_once_profiled(ctx, device, graph, inputs).map(|(out, _)| out)
}

/// [`run_once`], also returning the plugin's profile events of the run.
pub fn run_once_profiled(
    ctx: &PluginContext,
    device: u32,
    graph: &Graph,
    inputs: &[Tensor],
) -> Result<(Vec<Tensor>, Vec<ProfileEvent>)> {
    // A plugin that takes bounded outputs (ABI 1.3) gets the value-dependent nodes'
    // outputs declared at their bounds; any other sees them symbolic (and is refused below).
    let (bounded, bounds) = if ctx.lib.bounded_outputs() {
        baton_delegate_api::shape::bound_graph(graph).map_err(|message| HostError::PluginCall {
            plugin: ctx.lib.label(),
            call: "compile",
            status: abi::STATUS_INVALID_ARGUMENT,
            message,
        })?
    } else {
        (graph.clone(), vec![None; graph.outputs.len()])
    };
    let graph = &bounded;
    let blob = ctx.compile(device, graph)?;
    let mut exec = ctx.init(device, &blob, graph)?;
    let mut outputs: Vec<Tensor> = graph
        .outputs
        .iter()
        .map(|&o| {
            let decl = &graph.tensors[o];
            let shape = decl
                .static_shape()
                .ok_or_else(|| HostError::SymbolicShape {
                    tensor: decl.name.clone(),
                    shape: decl.shape.clone(),
                })?;
            Ok(Tensor::zeros(decl.dtype, &shape))
        })
        .collect::<Result<_>>()?;
    let reported = execute_owned(&mut exec, inputs, &mut outputs)?;
    for (i, ((t, bound), shape)) in outputs.iter_mut().zip(&bounds).zip(&reported).enumerate() {
        match bound {
            Some(b) => *t = bounded_output(&exec.lib, i, shape, b, t)?,
            None => check_reported_shape(&exec.lib, i, shape, &t.shape)?,
        }
    }
    Ok((outputs, exec.profile()))
}

/// Executes `exec` once on owned tensors: `outputs` preallocated at the shapes the
/// caller expects (or their bounds). Returns the shape the plugin reported for each
/// output, for the caller to check.
pub fn execute_owned(
    exec: &mut PluginExecutable,
    inputs: &[Tensor],
    outputs: &mut [Tensor],
) -> Result<Vec<Vec<i64>>> {
    let mut in_shapes: Vec<Vec<i64>> = inputs
        .iter()
        .map(|t| t.shape.iter().map(|&d| d as i64).collect())
        .collect();
    let in_views: Vec<abi::TensorView> = inputs
        .iter()
        .zip(&mut in_shapes)
        .map(|(t, s)| {
            view_of(
                t.dtype.code(),
                t.bytes().as_ptr() as *mut u8,
                t.bytes().len(),
                s,
                None,
            )
        })
        .collect();
    let mut out_shapes: Vec<[i64; abi::MAX_RANK]> = outputs
        .iter()
        .map(|t| {
            let mut s = [0i64; abi::MAX_RANK];
            for (d, &v) in s.iter_mut().zip(&t.shape) {
                *d = v as i64;
            }
            s
        })
        .collect();
    let mut out_views: Vec<abi::TensorView> = outputs
        .iter_mut()
        .zip(&mut out_shapes)
        .map(|(t, s)| {
            let rank = t.shape.len();
            let bytes = t.data.as_mut_slice();
            let mut v = view_of(
                t.dtype.code(),
                bytes.as_mut_ptr(),
                bytes.len(),
                &s[..rank],
                None,
            );
            v.shape = s.as_mut_ptr();
            v
        })
        .collect();
    // SAFETY: every view points into buffers owned above or by the caller, alive and
    // unaliased for the call; output shapes point at MAX_RANK slots.
    unsafe { exec.execute_raw(&in_views, &mut out_views)? };
    Ok(out_views
        .iter()
        .zip(&out_shapes)
        .map(|(v, s)| s[..(v.rank as usize).min(abi::MAX_RANK)].to_vec())
        .collect())
}

/// Refuses output `i` when the plugin reported another shape than `expected`.
fn check_reported_shape(
    lib: &PluginLibrary,
    i: usize,
    reported: &[i64],
    expected: &[usize],
) -> Result<()> {
    if reported.len() != expected.len()
        || reported.iter().zip(expected).any(|(&a, &b)| a != b as i64)
    {
        return Err(lib.call_error(
            "execute",
            abi::STATUS_ERROR,
            format!(
                "output {i} has shape {reported:?}, expected {expected:?}: the result is refused"
            ),
        ));
    }
    Ok(())
}

/// The result in a bounded output (ABI 1.3): the extents the plugin `reported`, checked
/// against the bound, and the bytes it wrote for them, from the start of `t`'s buffer.
pub fn bounded_output(
    lib: &PluginLibrary,
    i: usize,
    reported: &[i64],
    bound: &baton_delegate_api::shape::BoundedOutput,
    t: &Tensor,
) -> Result<Tensor> {
    let refuse = |why: String| {
        lib.call_error(
            "execute",
            abi::STATUS_ERROR,
            format!("bounded output {i}: {why}: the result is refused"),
        )
    };
    if reported.iter().any(|&d| d < 0) {
        return Err(refuse(format!("reported extents {reported:?}")));
    }
    let actual: Vec<usize> = reported.iter().map(|&d| d as usize).collect();
    bound.check(&actual).map_err(refuse)?;
    // Within the bound, so within the buffer.
    let n = actual.iter().product::<usize>() * t.dtype.size();
    Ok(Tensor::from_bytes(t.dtype, &actual, &t.bytes()[..n]))
}

/// Refuses outputs whose reported shape differs from the expected one.
pub fn check_output_shapes(
    lib: &PluginLibrary,
    views: &[abi::TensorView],
    expected: &[Tensor],
) -> Result<()> {
    for (i, (v, t)) in views.iter().zip(expected).enumerate() {
        // SAFETY: `shape` points at MAX_RANK slots owned by the caller.
        let reported =
            unsafe { std::slice::from_raw_parts(v.shape, (v.rank as usize).min(abi::MAX_RANK)) };
        if v.rank as usize != t.shape.len()
            || reported.iter().zip(&t.shape).any(|(&a, &b)| a != b as i64)
        {
            return Err(lib.call_error(
                "execute",
                abi::STATUS_ERROR,
                format!(
                    "output {i} has shape {:?}, expected {:?}: the result is refused",
                    &reported[..(v.rank as usize).min(abi::MAX_RANK)],
                    t.shape
                ),
            ));
        }
    }
    Ok(())
}
