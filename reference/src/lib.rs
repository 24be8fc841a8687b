//! Portable reference kernels: the executable definition of every IR op.
//!
//! They run the nodes no plugin takes, and they are the oracle every plugin is judged
//! against, so they are written for clarity and exactness rather than speed: plain loops,
//! f32 storage with f64 accumulation for every long sum (MatMul/Gemm/Conv inner products,
//! pooling averages, softmax denominators), and transcendental functions evaluated in f64
//! and rounded once. f16 tensors are widened to f32 (exactly), computed as f32 would be,
//! and rounded to f16 once at the end.
//!
//! # Conventions where ONNX is silent or implementations differ
//!
//! - **Relu** is `if x < 0 { 0 } else { x }`, the C++ `std::max(x, 0)` convention that
//!   ONNX Runtime's Eigen-based Relu follows: `Relu(NaN) = NaN` and `Relu(-0.0) = -0.0`.
//!   (`f32::max` is not used: it drops NaN and leaves the sign of zero unspecified.)
//! - **Clip** is `y = if x < min { min } else { x }; if y > max { max } else { y }`:
//!   NaN passes through, `-0.0` is kept when `min` is `0.0`, and `min > max` gives `max`
//!   everywhere (as `np.clip`). Bounds come from the optional inputs 1 and 2 (ONNX opset
//!   11+; a 0-element tensor counts as absent) or else the `min`/`max` attributes
//!   (defaults: the lowest and highest finite value of the type, so infinities are
//!   clipped, as ONNX specifies and ONNX Runtime does). For f16 tensors an attribute bound is first rounded to f16. For
//!   integer tensors a float attribute bound `b` acts as `ceil(b)` (min) or `floor(b)`
//!   (max), saturated to the type's range; a NaN bound is no bound.
//! - **MaxPool** starts from the first in-bounds element of the window and replaces it
//!   with each later element `v` for which `v > max` (ONNX Runtime's comparison): a NaN is
//!   therefore skipped unless it is the first element of the window, in which case the
//!   result is NaN. Padding never wins (it is -inf); a window lying wholly in padding
//!   yields -inf.
//! - **AveragePool** divides by the number of in-bounds elements, or with
//!   `count_include_pad` by the number of window taps inside the padded input (taps past
//!   the padded border, which `ceil_mode` can create, never count). A window with a
//!   divisor of 0 yields NaN (0/0), as does **GlobalAveragePool** over an empty spatial
//!   extent.
//! - **Softmax** (opset 13: one axis, default -1) subtracts the row maximum before `exp`,
//!   so large finite values stay finite. Non-finite rows follow ONNX Runtime's arithmetic:
//!   a row of all -inf, or one containing +inf or NaN, becomes all NaN.
//! - **Gemm** with `beta == 0` ignores `C` entirely (BLAS convention), so a NaN or inf in
//!   `C` does not leak into the result.
//! - **Integer arithmetic** wraps on overflow; integer Div truncates toward zero
//!   (`MIN / -1` wraps to `MIN`) and a zero divisor is a [`KernelError::Arithmetic`].
//! - **Quantized operands** (a view with `quant` set) are refused by every op except the
//!   layout ops (Reshape, Transpose, Concat, Flatten), which only move bytes: the
//!   reference kernels do not define quantized arithmetic.
//! - **Sums** start from +0.0, as BLAS and numpy accumulators do, so an inner product of
//!   negative zeros is +0.0.
//! - **Empty tensors** work wherever the output shape is defined: a sum over nothing is
//!   +0.0 (MatMul/Gemm with K = 0 give `beta*C` or 0, Conv with no input channels gives
//!   the bias).

pub mod fold;
pub mod specialize;
pub mod values;

mod activation;
mod control;
mod conv;
mod data;
mod elementwise;
mod graph;
mod linalg;
mod math;
mod pool;
mod shape_ops;
mod signal;
mod spatial;
mod tensor_ops;
#[cfg(test)]
mod tests;

use baton_delegate_api::ir::{DType, Node, OpKind};
use baton_delegate_api::shape::infer_outputs;
use baton_delegate_api::{TensorMut, TensorRef};

pub use graph::run_graph;
pub use specialize::{specialize, split, SpecializeError, Split};

/// Why a reference kernel could not run. Node-level messages name the node with
/// [`Node::label`].
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The op, an operand dtype or count, quantized operands or an attribute value the
    /// reference kernels do not implement.
    #[error("node {node}: not supported by the reference kernels: {message}")]
    Unsupported { node: String, message: String },
    /// Operand shapes, byte lengths, output views or attributes that do not fit together.
    #[error("node {node}: {message}")]
    Shape { node: String, message: String },
    /// A value the op is undefined for (integer division by zero).
    #[error("node {node}: {message}")]
    Arithmetic { node: String, message: String },
    /// [`run_graph`]: inputs that do not match the graph, external constants, an invalid
    /// graph.
    #[error("graph '{graph}': {message}")]
    Graph { graph: String, message: String },
}

/// Runs one node. `inputs` follow `node.inputs` (constants included, as views); `outputs`
/// have the dtypes and shapes given by [`infer_outputs`] (a node may use a prefix of the
/// outputs its op can produce) and are fully overwritten.
///
/// Never panics on operands of any shape or value: operands or outputs that do not fit
/// the node are reported as a [`KernelError`].
pub fn run_node(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    if node.op.is_control_flow() {
        return Err(unsupported(
            node,
            "control flow runs whole subgraphs: use run_graph (or a session), not run_node",
        ));
    }
    check_operands(node, inputs)?;
    let expected = expected_outputs(node, inputs)?;
    if outputs.is_empty() || outputs.len() > expected.len() {
        return Err(unsupported(
            node,
            format!(
                "{} output views given; {} produces 1 to {}",
                outputs.len(),
                node.op,
                expected.len()
            ),
        ));
    }
    for (k, (out, (dtype, shape))) in outputs.iter().zip(&expected).enumerate() {
        if out.dtype != *dtype || out.shape() != shape.as_slice() {
            return Err(shape_err(
                node,
                format!(
                    "output view {k} is {} {:?}, the op produces {dtype} {shape:?}",
                    out.dtype,
                    out.shape()
                ),
            ));
        }
        let want_bytes = byte_len(shape, out.dtype);
        if want_bytes != Some(out.data.len()) {
            return Err(shape_err(
                node,
                format!(
                    "output view {k} holds {} bytes, shape {shape:?} of {} needs {}",
                    out.data.len(),
                    out.dtype,
                    want_bytes.map_or("more than usize::MAX".to_string(), |b| b.to_string())
                ),
            ));
        }
    }
    if let Some(r) = math::run(node, inputs, outputs) {
        return r;
    }
    if let Some(r) = tensor_ops::run(node, inputs, outputs) {
        return r;
    }
    if let Some(r) = signal::run(node, inputs, outputs) {
        return r;
    }
    if let Some(r) = spatial::run(node, inputs, outputs) {
        return r;
    }
    if node.op == OpKind::MaxPool {
        return pool::max_pool(node, &inputs[0], outputs);
    }
    let out = &mut outputs[0];
    match node.op {
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => {
            elementwise::binary(node, &inputs[0], &inputs[1], out)
        }
        OpKind::Relu => elementwise::relu(node, &inputs[0], out),
        OpKind::Clip => elementwise::clip(node, inputs, out),
        OpKind::Sigmoid => activation::sigmoid(&inputs[0], out),
        OpKind::Tanh => activation::tanh(&inputs[0], out),
        OpKind::Softmax => activation::softmax(node, &inputs[0], out),
        OpKind::MatMul => linalg::matmul(node, &inputs[0], &inputs[1], out),
        OpKind::Gemm => linalg::gemm(node, inputs, out),
        OpKind::Conv => conv::conv(node, inputs, out),
        OpKind::AveragePool => pool::average_pool(node, &inputs[0], out),
        OpKind::GlobalAveragePool => pool::global_average_pool(&inputs[0], out),
        OpKind::Reshape | OpKind::Flatten => shape_ops::copy(&inputs[0], out),
        OpKind::Transpose => shape_ops::transpose(node, &inputs[0], out),
        OpKind::Concat => shape_ops::concat(node, inputs, out),
        op => Err(KernelError::Unsupported {
            node: node.label(),
            message: format!("{op} has no reference kernel in this build"),
        }),
    }
}

/// Runs a control-flow node (If, Loop) on owned operands in `node.inputs` order, its
/// subgraphs on [`run_graph`]; returns its outputs.
pub fn run_control(
    node: &Node,
    inputs: &[&baton_delegate_api::Tensor],
) -> Result<Vec<baton_delegate_api::Tensor>, KernelError> {
    control::run(node, inputs)
}

/// Runs any node, control flow included, on owned operands in `node.inputs` order and
/// returns its outputs shaped as the operands' values give: what a host runs for a node
/// whose output extents depend on values (a dynamic region's first node).
pub fn run_owned(
    node: &Node,
    inputs: &[&baton_delegate_api::Tensor],
) -> Result<Vec<baton_delegate_api::Tensor>, KernelError> {
    if node.op.is_control_flow() {
        return control::run(node, inputs);
    }
    let refs: Vec<TensorRef<'_>> = inputs.iter().map(|t| t.view()).collect();
    check_operands(node, &refs)?;
    let expected = expected_outputs(node, &refs)?;
    if node.outputs.is_empty() || node.outputs.len() > expected.len() {
        return Err(unsupported(
            node,
            format!(
                "{} outputs; {} produces 1 to {}",
                node.outputs.len(),
                node.op,
                expected.len()
            ),
        ));
    }
    let mut outs = Vec::with_capacity(node.outputs.len());
    for (dtype, shape) in expected.iter().take(node.outputs.len()) {
        let t = baton_delegate_api::Tensor::try_zeros(*dtype, shape).ok_or_else(|| {
            shape_err(
                node,
                format!("an output of {dtype} {shape:?} is too large to allocate"),
            )
        })?;
        outs.push(t);
    }
    let mut views: Vec<TensorMut<'_>> = outs.iter_mut().map(|t| t.view_mut()).collect();
    run_node(node, &refs, &mut views)?;
    drop(views);
    Ok(outs)
}

/// Whether [`run_node`] implements `op` for these input dtypes (in `node.inputs` order).
/// The error says what is missing, for the host to show when it refuses a model.
pub fn supports(op: OpKind, input_dtypes: &[DType]) -> Result<(), String> {
    if let Some(r) = control::supports(op, input_dtypes) {
        return r;
    }
    if let Some(r) = math::supports(op, input_dtypes) {
        return r;
    }
    if let Some(r) = tensor_ops::supports(op, input_dtypes) {
        return r;
    }
    if let Some(r) = signal::supports(op, input_dtypes) {
        return r;
    }
    if let Some(r) = spatial::supports(op, input_dtypes) {
        return r;
    }
    let (min, max) = arity(op);
    if input_dtypes.len() < min || input_dtypes.len() > max {
        let want = match (min, max) {
            (a, b) if a == b => format!("{a}"),
            (a, usize::MAX) => format!("at least {a}"),
            (a, b) => format!("{a} to {b}"),
        };
        return Err(format!(
            "{op} takes {want} inputs, got {}",
            input_dtypes.len()
        ));
    }
    let x = input_dtypes[0];
    let allowed = dtypes_of(op);
    if !allowed.contains(&x) {
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        return Err(format!(
            "{op} on {x} is not implemented (reference kernels: {})",
            names.join(", ")
        ));
    }
    for (i, &d) in input_dtypes.iter().enumerate().skip(1) {
        if op == OpKind::Reshape {
            if d != DType::I64 {
                return Err(format!("Reshape's shape operand must be i64, got {d}"));
            }
        } else if d != x {
            return Err(format!(
                "{op} operand {i} is {d} but operand 0 is {x}; operands must share a dtype"
            ));
        }
    }
    Ok(())
}

const FLOATS: &[DType] = &[DType::F32, DType::F16];
/// MatMul and Softmax compute in f64 throughout, so they take f64 operands too.
const FLOATS_WITH_F64: &[DType] = &[DType::F32, DType::F16, DType::F64];
/// MaxPool compares without arithmetic, so it takes every standard integer too.
const MAX_POOLABLE: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
];
const ARITH: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::U32,
    DType::U64,
];
/// Clip's float path is f32/f16 only.
const CLIPPABLE: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::I32,
    DType::I64,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::U32,
    DType::U64,
];
const SIGNED: &[DType] = &[DType::F32, DType::F16, DType::I32, DType::I64, DType::I8];

/// The dtypes of operand 0 each op is implemented for.
fn dtypes_of(op: OpKind) -> &'static [DType] {
    match op {
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => ARITH,
        OpKind::Clip => CLIPPABLE,
        OpKind::MaxPool => MAX_POOLABLE,
        OpKind::Relu => SIGNED,
        OpKind::Softmax | OpKind::MatMul => FLOATS_WITH_F64,
        OpKind::Sigmoid
        | OpKind::Tanh
        | OpKind::Gemm
        | OpKind::Conv
        | OpKind::AveragePool
        | OpKind::GlobalAveragePool => FLOATS,
        OpKind::Reshape | OpKind::Transpose | OpKind::Concat | OpKind::Flatten => &DType::ALL,
        _ => &[],
    }
}

/// Smallest and largest operand count of each op.
fn arity(op: OpKind) -> (usize, usize) {
    match op {
        OpKind::MatMul | OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => (2, 2),
        OpKind::Gemm | OpKind::Conv => (2, 3),
        OpKind::Clip => (1, 3),
        OpKind::Reshape => (1, 2),
        OpKind::Concat => (1, usize::MAX),
        OpKind::Relu
        | OpKind::Sigmoid
        | OpKind::Tanh
        | OpKind::Softmax
        | OpKind::MaxPool
        | OpKind::AveragePool
        | OpKind::GlobalAveragePool
        | OpKind::Transpose
        | OpKind::Flatten => (1, 1),
        _ => (1, usize::MAX),
    }
}

/// Whether an op only moves bytes (and so may carry quantized operands through).
fn is_layout_op(op: OpKind) -> bool {
    // Ops that only move bytes: quantized operands pass through them unchanged.
    matches!(
        op,
        OpKind::Reshape
            | OpKind::Transpose
            | OpKind::Concat
            | OpKind::Flatten
            | OpKind::Squeeze
            | OpKind::Unsqueeze
            | OpKind::Split
            | OpKind::Slice
            | OpKind::Gather
            | OpKind::Expand
            | OpKind::Tile
            | OpKind::Identity
    )
}

/// Checks operand count, dtypes, quantization and that each view's bytes fit its shape.
pub(crate) fn check_operands(node: &Node, inputs: &[TensorRef<'_>]) -> Result<(), KernelError> {
    let dtypes: Vec<DType> = inputs.iter().map(|t| t.dtype).collect();
    supports(node.op, &dtypes).map_err(|m| unsupported(node, m))?;
    for (i, t) in inputs.iter().enumerate() {
        let want = byte_len(t.shape, t.dtype);
        if want != Some(t.data.len()) {
            return Err(shape_err(
                node,
                format!(
                    "input {i} holds {} bytes, which does not fit shape {:?} of {}",
                    t.data.len(),
                    t.shape,
                    t.dtype
                ),
            ));
        }
        if t.quant.is_some() && !is_layout_op(node.op) {
            return Err(unsupported(
                node,
                format!("input {i} is quantized; quantized arithmetic is not defined here"),
            ));
        }
    }
    Ok(())
}

/// Every output's dtype and shape for these operands (after [`check_operands`]). The
/// reference has every operand's values, so data-dependent shapes are resolved here.
pub(crate) fn expected_outputs(
    node: &Node,
    inputs: &[TensorRef<'_>],
) -> Result<Vec<(DType, Vec<usize>)>, KernelError> {
    // Run-time Resize scales are floats, which the shape rule does not read as operands.
    let with_scales = tensor_ops::with_operand_scales(node, inputs);
    let node = with_scales.as_ref().unwrap_or(node);
    let typed: Vec<(DType, Vec<usize>)> =
        inputs.iter().map(|t| (t.dtype, t.shape.to_vec())).collect();
    let shapes: Vec<Vec<usize>> = typed.iter().map(|(_, s)| s.clone()).collect();
    guard_geometry(node, &shapes)?;
    if let Some(r) = tensor_ops::compute_value_dependent(node, inputs) {
        // Extents that depend on values: the reference computes the node to know them.
        return r.map(|outs| outs.into_iter().map(|t| (t.dtype, t.shape)).collect());
    }
    if node.op == OpKind::Range {
        // Its length comes from values of any dtype; the shared rule reads only i64 ones.
        if let Some(t) = inputs.iter().find(|t| t.len() != 1) {
            let m = format!(
                "Range operands must be one value each, got shape {:?}",
                t.shape
            );
            return Err(shape_err(node, m));
        }
        let n = tensor_ops::range_length(node, inputs)?;
        if n.checked_mul(inputs[0].dtype.size())
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(shape_err(
                node,
                format!("a Range of {n} elements is too large"),
            ));
        }
        return Ok(vec![(inputs[0].dtype, vec![n])]);
    }
    let operand = |i: usize| -> Option<Vec<i64>> {
        let t = inputs.get(i)?;
        (t.dtype == DType::I64).then(|| data::load::<i64>(t))
    };
    infer_outputs(node, &typed, operand).map_err(|m| shape_err(node, m))
}

/// Rejects the operand shapes for which the shared geometry code would overflow (a Conv
/// kernel extent of 0, SAME auto-padding of an empty spatial axis, an absurd `group`)
/// before it is called.
fn guard_geometry(node: &Node, shapes: &[Vec<usize>]) -> Result<(), KernelError> {
    if !matches!(
        node.op,
        OpKind::Conv | OpKind::MaxPool | OpKind::AveragePool
    ) {
        return Ok(());
    }
    let x = &shapes[0];
    let same = node.attr_str("auto_pad", "NOTSET").starts_with("SAME");
    if same && x.len() >= 3 && x[2..].contains(&0) {
        return Err(shape_err(
            node,
            format!("auto_pad SAME_* is undefined for the empty spatial extent of {x:?}"),
        ));
    }
    if node.op == OpKind::Conv {
        if let Some(w) = shapes.get(1) {
            if w.len() >= 3 && w[2..].contains(&0) {
                return Err(shape_err(
                    node,
                    format!("Conv weight {w:?} has an empty kernel"),
                ));
            }
            let group = node.attr_int("group", 1);
            if w.len() >= 2 && group > 0 && w[1].checked_mul(group as usize).is_none() {
                return Err(shape_err(node, format!("group {group} is out of range")));
            }
        }
    }
    Ok(())
}

/// Bytes needed by `shape` elements of `dtype`, `None` on overflow.
fn byte_len(shape: &[usize], dtype: DType) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))?
        .checked_mul(dtype.size())
}

pub(crate) fn shape_err(node: &Node, message: impl Into<String>) -> KernelError {
    KernelError::Shape {
        node: node.label(),
        message: message.into(),
    }
}

pub(crate) fn unsupported(node: &Node, message: impl Into<String>) -> KernelError {
    KernelError::Unsupported {
        node: node.label(),
        message: message.into(),
    }
}
