//! Shape inference and the geometry of windowed ops, shared by the host, its reference
//! kernels and every plugin so that all of them agree on what an op's output looks like.

mod attention;
mod control;
mod dynamic;
pub mod einsum;
mod linear_attention;
mod math;
mod recurrent_activation;
mod signal;
mod spatial;
pub use spatial::{
    col2im_geometry, max_unpool_shape, roi_align_params, Col2ImGeometry, RoiAlignParams,
};
pub mod spectral;
mod tensor_ops;

pub use attention::{AttentionGeometry, RotaryGeometry};
pub use control::is_provisional;
pub use dynamic::{
    bound_graph, has_value_dependent_shape, node_output_bounds, output_bounds, BoundedOutput,
};
pub use linear_attention::{LinearAttentionGeometry, UpdateRule};
pub use math::bit_cast_width;
pub use recurrent_activation::{rnn_activations, RecurrentActivation};
pub use tensor_ops::{range_length_f64, range_length_i64, tensor_scatter_axis};

use crate::error::IrError;
use crate::ir::{DType, Dim, Graph, Node, OpKind, Storage, TensorDecl};

/// Infers the output dtype and shape of `node` from its inputs' declarations in `graph`.
///
/// Element-wise ops and Softmax keep symbolic dimensions; every other op needs fixed input
/// shapes. Reshape's target shape is read from its `shape` attribute or from an inline
/// `i64` constant; a target passed as an external constant view is not resolved here (use
/// [`infer_static`] with the views).
///
/// If and Loop read their subgraphs' declared outputs (see the `control` rules): a
/// dimension that depends on values at run time comes back provisional (see
/// [`is_provisional`]).
///
/// Returns one dtype and shape per output the op can produce (an op with optional
/// outputs lists them all; a node may use a prefix).
pub fn infer_node(graph: &Graph, node: &Node) -> Result<Vec<(DType, Vec<Dim>)>, IrError> {
    let err = |msg: String| IrError::Shape {
        node: node.label(),
        message: msg,
    };
    let input = |i: usize| {
        node.inputs
            .get(i)
            .map(|&t| &graph.tensors[t])
            .ok_or_else(|| err(format!("missing input {i}")))
    };
    if node.op.is_control_flow() {
        return control::infer(node).map_err(err);
    }
    let x = input(0)?;
    match node.op {
        OpKind::Relu | OpKind::Clip | OpKind::Sigmoid | OpKind::Tanh | OpKind::Softmax => {
            if node.op == OpKind::Softmax {
                normalize_axis(node.attr_int("axis", -1), x.shape.len()).map_err(err)?;
            }
            Ok(vec![(x.dtype, x.shape.clone())])
        }
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => {
            let y = input(1)?;
            if x.dtype != y.dtype {
                return Err(err(format!(
                    "operand dtypes differ: {} and {}",
                    x.dtype, y.dtype
                )));
            }
            Ok(vec![(
                x.dtype,
                broadcast_dims(&x.shape, &y.shape).map_err(err)?,
            )])
        }
        // Symbolic dims pass through the two ops that only move or contract known axes, so
        // a model with a symbolic batch or sequence keeps its shapes before binding.
        OpKind::MatMul
            if x.static_shape().is_none() && x.shape.len() >= 2 && input(1)?.shape.len() >= 2 =>
        {
            let y = input(1)?;
            let (a, b) = (&x.shape, &y.shape);
            let (k, kb) = (&a[a.len() - 1], &b[b.len() - 2]);
            if x.dtype != y.dtype
                || (k != kb && !matches!((k, kb), (Dim::Sym(_), _) | (_, Dim::Sym(_))))
            {
                return Err(err(format!(
                    "MatMul operands do not chain: {} {} x {} {}",
                    x.dtype,
                    crate::ir::shape_string(a),
                    y.dtype,
                    crate::ir::shape_string(b)
                )));
            }
            let mut out = broadcast_dims(&a[..a.len() - 2], &b[..b.len() - 2]).map_err(err)?;
            out.push(a[a.len() - 2].clone());
            out.push(b[b.len() - 1].clone());
            Ok(vec![(x.dtype, out)])
        }
        OpKind::Transpose if x.static_shape().is_none() => {
            let perm = transpose_perm(node, x.shape.len()).map_err(err)?;
            Ok(vec![(
                x.dtype,
                perm.iter().map(|&p| x.shape[p].clone()).collect(),
            )])
        }
        op if math::elementwise_operands(op).is_some()
            && node
                .inputs
                .iter()
                .any(|&t| graph.tensors[t].static_shape().is_none()) =>
        {
            symbolic_elementwise(graph, node).map_err(err)
        }
        _ => {
            let inputs: Vec<(DType, Vec<usize>)> = node
                .inputs
                .iter()
                .map(|&t| {
                    let shape = graph.tensors[t].static_shape().ok_or_else(|| {
                        err(format!(
                            "input '{}' has a symbolic shape; bind it first",
                            graph.tensors[t].name
                        ))
                    })?;
                    Ok((graph.tensors[t].dtype, shape))
                })
                .collect::<Result<_, IrError>>()?;
            if let Some(r) = dynamic::infer(node, &inputs) {
                return r.map_err(err);
            }
            if node.op == OpKind::Range {
                // Its length comes from constants of any Range dtype, not only i64.
                let constant = |i: usize| match node.inputs.get(i).map(|&t| &graph.tensors[t]) {
                    Some(TensorDecl {
                        data: Some(Storage::Inline(d)),
                        ..
                    }) => Some(d.bytes()),
                    _ => None,
                };
                if let (Some(s), Some(l), Some(d)) = (constant(0), constant(1), constant(2)) {
                    let n = tensor_ops::range_of_constants(&inputs, [s, l, d]).map_err(err)?;
                    return Ok(vec![(x.dtype, vec![Dim::Fixed(n)])]);
                }
            }
            let shape_operand = |i: usize| -> Option<Vec<i64>> {
                let t = &graph.tensors[*node.inputs.get(i)?];
                match (&t.data, t.dtype) {
                    (Some(Storage::Inline(d)), DType::I64) => {
                        Some(bytemuck::pod_collect_to_vec::<u8, i64>(d.bytes()))
                    }
                    _ => None,
                }
            };
            let outs = infer_outputs(node, &inputs, shape_operand).map_err(err)?;
            Ok(outs
                .into_iter()
                .map(|(dtype, shape)| (dtype, shape.into_iter().map(Dim::Fixed).collect()))
                .collect())
        }
    }
}

/// An element-wise op over operands with symbolic dims: the dtype rule is the static
/// one (run with every symbolic extent taken as 1, which broadcasts with anything), the
/// shape is the operands' broadcast with the symbols kept. An operand of unknown rank
/// (the importer's provisional `[name?]`) leaves the output unknown too.
fn symbolic_elementwise(graph: &Graph, node: &Node) -> Result<Vec<(DType, Vec<Dim>)>, String> {
    let arity = math::elementwise_operands(node.op).unwrap_or(1);
    let decls: Vec<&TensorDecl> = node.inputs.iter().map(|&t| &graph.tensors[t]).collect();
    let mut shape: Vec<Dim> = Vec::new();
    for (i, t) in decls.iter().take(arity).enumerate() {
        if matches!(&t.shape[..], [Dim::Sym(s)] if s.ends_with('?')) {
            return Err(format!(
                "input '{}' has an unknown rank; bind it first",
                t.name
            ));
        }
        shape = if i == 0 {
            t.shape.clone()
        } else {
            broadcast_dims(&shape, &t.shape)?
        };
    }
    let inputs: Vec<(DType, Vec<usize>)> = decls
        .iter()
        .map(|t| {
            let dims = t.shape.iter().map(|d| match d {
                Dim::Fixed(n) => *n,
                Dim::Sym(_) => 1,
            });
            (t.dtype, dims.collect())
        })
        .collect();
    let outs = infer_outputs(node, &inputs, |_| None)?;
    Ok(outs
        .into_iter()
        .map(|(dtype, _)| (dtype, shape.clone()))
        .collect())
}

/// The dtype and concrete shape of each output of a node.
pub type Outputs = Vec<(DType, Vec<usize>)>;

/// Every output's dtype and shape given the inputs' dtypes and concrete shapes.
///
/// This is the general rule: ops whose outputs change dtype (comparisons, casts) or that
/// have several outputs are answered here; every other op has one output of its first
/// input's dtype, shaped by [`infer_static`]. `shape_operand(i)` returns the values of
/// input `i` when it is a constant i64 tensor.
pub fn infer_outputs(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    shape_operand: impl Fn(usize) -> Option<Vec<i64>>,
) -> Result<Outputs, String> {
    if node.op.is_control_flow() {
        return Err(format!(
            "{}: the outputs of control flow come from its subgraphs (see infer_node)",
            node.op
        ));
    }
    if dynamic::has_value_dependent_shape(node.op) {
        return Err(dynamic::not_static(node.op));
    }
    if let Some(r) = math::infer(node, inputs, &shape_operand) {
        return r;
    }
    if let Some(r) = tensor_ops::infer(node, inputs, &shape_operand) {
        return r;
    }
    if let Some(r) = signal::infer(node, inputs, &shape_operand) {
        return r;
    }
    if let Some(r) = spatial::infer(node, inputs, &shape_operand) {
        return r;
    }
    if let Some(r) = attention::infer(node, inputs) {
        return r;
    }
    if let Some(r) = linear_attention::infer(node, inputs) {
        return r;
    }
    let (dtype, _) = inputs
        .first()
        .ok_or_else(|| format!("{} needs at least one input", node.op))?;
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|(_, s)| s.clone()).collect();
    let y = infer_static(node, &shapes, shape_operand)?;
    if node.op == OpKind::MaxPool {
        // The optional `Indices` output: i64, shaped like `Y`.
        return Ok(vec![(*dtype, y.clone()), (DType::I64, y)]);
    }
    Ok(vec![(*dtype, y)])
}

/// Shape of the first output of `node` given concrete input shapes. `shape_operand(i)`
/// returns the values of input `i` when it is a constant i64 tensor (Reshape's target
/// shape). See [`infer_outputs`] for dtypes and further outputs.
pub fn infer_static(
    node: &Node,
    shapes: &[Vec<usize>],
    shape_operand: impl Fn(usize) -> Option<Vec<i64>>,
) -> Result<Vec<usize>, String> {
    let x = shapes
        .first()
        .ok_or_else(|| format!("{} needs at least one input", node.op))?;
    let rank = x.len();
    match node.op {
        OpKind::Relu | OpKind::Clip | OpKind::Sigmoid | OpKind::Tanh | OpKind::Softmax => {
            Ok(x.clone())
        }
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => {
            broadcast_shapes(x, shapes.get(1).ok_or("missing second operand")?)
        }
        OpKind::MatMul => matmul_shape(x, shapes.get(1).ok_or("MatMul needs two inputs")?),
        OpKind::Gemm => {
            let b = shapes.get(1).ok_or("Gemm needs B")?;
            if rank != 2 || b.len() != 2 {
                return Err(format!("Gemm needs 2-D A and B, got {x:?} and {b:?}"));
            }
            let (m, ka) = if node.attr_int("transA", 0) != 0 {
                (x[1], x[0])
            } else {
                (x[0], x[1])
            };
            let (kb, n) = if node.attr_int("transB", 0) != 0 {
                (b[1], b[0])
            } else {
                (b[0], b[1])
            };
            if ka != kb {
                return Err(format!("Gemm inner dimensions differ: {ka} and {kb}"));
            }
            if let Some(c) = shapes.get(2) {
                broadcast_shapes(c, &[m, n])
                    .ok()
                    .filter(|s| s == &[m, n])
                    .ok_or_else(|| format!("Gemm C {c:?} does not broadcast to [{m},{n}]"))?;
            }
            Ok(vec![m, n])
        }
        OpKind::Conv => {
            let g = ConvGeometry::new(node, x, shapes.get(1).ok_or("Conv needs weights")?)?;
            if let Some(b) = shapes.get(2) {
                if b != &[g.out_channels] {
                    return Err(format!(
                        "Conv bias shape {b:?}, expected [{}]",
                        g.out_channels
                    ));
                }
            }
            let mut out = vec![g.batch, g.out_channels];
            out.extend(&g.out_spatial);
            Ok(out)
        }
        OpKind::MaxPool | OpKind::AveragePool => {
            let g = PoolGeometry::new(node, x)?;
            let mut out = vec![x[0], x[1]];
            out.extend(&g.out_spatial);
            Ok(out)
        }
        OpKind::GlobalAveragePool => {
            if rank < 3 {
                return Err(format!("GlobalAveragePool needs rank >= 3, got {x:?}"));
            }
            let mut out = vec![x[0], x[1]];
            out.extend(std::iter::repeat_n(1, rank - 2));
            Ok(out)
        }
        OpKind::Reshape => {
            let target = match node.attr_ints("shape") {
                Some(s) => s.to_vec(),
                None => shape_operand(1).ok_or("Reshape needs a constant i64 shape")?,
            };
            reshape_shape(x, &target, node.attr_int("allowzero", 0) != 0)
        }
        OpKind::Transpose => {
            let perm = transpose_perm(node, rank)?;
            Ok(perm.iter().map(|&p| x[p]).collect())
        }
        OpKind::Concat => {
            let axis = normalize_axis(node.attr_int("axis", 0), rank)?;
            let mut out = x.clone();
            for s in &shapes[1..] {
                if s.len() != rank
                    || s.iter()
                        .zip(x)
                        .enumerate()
                        .any(|(d, (a, b))| d != axis && a != b)
                {
                    return Err(format!(
                        "Concat operands {x:?} and {s:?} disagree off axis {axis}"
                    ));
                }
                out[axis] += s[axis];
            }
            Ok(out)
        }
        OpKind::Flatten => {
            let axis = normalize_axis_inclusive(node.attr_int("axis", 1), rank)?;
            Ok(vec![x[..axis].iter().product(), x[axis..].iter().product()])
        }
        op => Err(format!("no shape rule for {op} in this build")),
    }
}

/// Maps a possibly negative axis into `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} out of range for rank {rank}"));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

fn normalize_axis_inclusive(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis > r {
        return Err(format!("axis {axis} out of range for rank {rank}"));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// The permutation of a Transpose node (default: reverse the axes).
pub fn transpose_perm(node: &Node, rank: usize) -> Result<Vec<usize>, String> {
    let perm: Vec<usize> = match node.attr_ints("perm") {
        Some(p) => p
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).rev().collect(),
    };
    let mut seen = vec![false; rank];
    if perm.len() != rank || perm.iter().any(|&p| std::mem::replace(&mut seen[p], true)) {
        return Err(format!("perm {perm:?} is not a permutation of {rank} axes"));
    }
    Ok(perm)
}

/// Numpy broadcasting of two concrete shapes.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        };
    }
    Ok(out)
}

fn broadcast_dims(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let n = a.len().max(b.len());
    let one = Dim::Fixed(1);
    (0..n)
        .map(|i| {
            let da = if i + a.len() >= n {
                &a[i + a.len() - n]
            } else {
                &one
            };
            let db = if i + b.len() >= n {
                &b[i + b.len() - n]
            } else {
                &one
            };
            if da == db || *db == one {
                Ok(da.clone())
            } else if *da == one {
                Ok(db.clone())
            } else {
                Err(format!("dimensions {da} and {db} do not broadcast"))
            }
        })
        .collect()
}

/// Numpy `matmul` shape rule (1-D operands promoted, batch dims broadcast).
pub fn matmul_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul operands must have rank >= 1".into());
    }
    let a2: Vec<usize> = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Vec<usize> = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return Err(format!("MatMul inner dimensions differ: {a:?} x {b:?}"));
    }
    let mut out = broadcast_shapes(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

/// ONNX Reshape semantics: `0` copies the input dim (unless `allowzero`), `-1` is inferred.
pub fn reshape_shape(x: &[usize], target: &[i64], allowzero: bool) -> Result<Vec<usize>, String> {
    let total = checked_product(x).ok_or_else(|| format!("Reshape: input {x:?} is too large"))?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(*x.get(i).ok_or_else(|| {
                format!("Reshape: 0 at position {i} but input has rank {}", x.len())
            })?),
            t if t >= 0 => out.push(t as usize),
            _ => return Err(format!("Reshape: invalid target {target:?}")),
        }
    }
    let known =
        checked_product(&out).ok_or_else(|| format!("Reshape: target {target:?} is too large"))?;
    if let Some(i) = infer {
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!("Reshape: cannot infer -1 of {target:?} from {x:?}"));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!(
            "Reshape: {x:?} has {total} elements, target {target:?} has {known}"
        ));
    }
    Ok(out)
}

/// Padding, stride and dilation of a Conv or pooling window, per spatial axis.
#[derive(Clone, Debug, PartialEq)]
///
/// Every list has one entry per spatial axis, in the order of the input's spatial
/// dimensions; all values are in elements.
pub struct Window {
    /// Window extent along each spatial axis, before dilation; never 0.
    pub kernel: Vec<usize>,
    /// Step between the starts of neighbouring windows (ONNX `strides`, default 1).
    pub strides: Vec<usize>,
    /// Distance between neighbouring taps of a window (ONNX `dilations`, default 1): a
    /// window covers `(kernel - 1) * dilation + 1` input elements.
    pub dilations: Vec<usize>,
    /// Padding before each spatial axis.
    pub pad_begin: Vec<usize>,
    /// Padding after each spatial axis.
    pub pad_end: Vec<usize>,
}

impl Window {
    /// Reads `strides`, `dilations`, `pads` and `auto_pad` of `node` for a window of size
    /// `kernel` over the spatial extents `spatial`. `auto_pad` other than `NOTSET`
    /// overrides `pads`; `SAME_UPPER` puts the odd padding element at the end and
    /// `SAME_LOWER` at the beginning.
    pub fn new(node: &Node, kernel: Vec<usize>, spatial: &[usize]) -> Result<Window, String> {
        let n = kernel.len();
        if kernel.contains(&0) || spatial.len() != n {
            return Err(format!(
                "kernel {kernel:?} does not fit spatial extents {spatial:?}"
            ));
        }
        let list = |name: &str, default: usize| -> Result<Vec<usize>, String> {
            match node.attr_ints(name) {
                Some(v) if v.len() == n && v.iter().all(|&x| x >= 1) => {
                    Ok(v.iter().map(|&x| x as usize).collect())
                }
                Some(v) => Err(format!("{name} {v:?} must be {n} positive values")),
                None => Ok(vec![default; n]),
            }
        };
        let strides = list("strides", 1)?;
        let dilations = list("dilations", 1)?;
        let (mut pad_begin, mut pad_end) = match node.attr_ints("pads") {
            Some(p) if p.len() == 2 * n && p.iter().all(|&x| x >= 0) => (
                p[..n].iter().map(|&x| x as usize).collect(),
                p[n..].iter().map(|&x| x as usize).collect(),
            ),
            Some(p) => return Err(format!("pads {p:?} must be {} non-negative values", 2 * n)),
            None => (vec![0; n], vec![0; n]),
        };
        match node.attr_str("auto_pad", "NOTSET") {
            "NOTSET" | "" => {}
            "VALID" => {
                pad_begin = vec![0; n];
                pad_end = vec![0; n];
            }
            mode @ ("SAME_UPPER" | "SAME_LOWER") => {
                for i in 0..n {
                    let out = spatial[i].div_ceil(strides[i]);
                    let eff = (kernel[i] - 1) * dilations[i] + 1;
                    let total = match out {
                        0 => 0,
                        out => ((out - 1) * strides[i] + eff).saturating_sub(spatial[i]),
                    };
                    let small = total / 2;
                    let (b, e) = if mode == "SAME_UPPER" {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                    pad_begin[i] = b;
                    pad_end[i] = e;
                }
            }
            other => return Err(format!("unknown auto_pad '{other}'")),
        }
        Ok(Window {
            kernel,
            strides,
            dilations,
            pad_begin,
            pad_end,
        })
    }

    /// Output extent along spatial axis `i` of input extent `len`. With `ceil_mode` the
    /// count rounds up, but a window that would start past the input and the leading
    /// padding is not counted.
    pub fn out_len(&self, i: usize, len: usize, ceil_mode: bool) -> Result<usize, String> {
        let too_large =
            || format!("spatial axis {i}: the padded input or the dilated window overflows");
        let eff = (self.kernel[i] - 1)
            .checked_mul(self.dilations[i])
            .and_then(|e| e.checked_add(1))
            .ok_or_else(too_large)?;
        let padded = len
            .checked_add(self.pad_begin[i])
            .and_then(|p| p.checked_add(self.pad_end[i]))
            .ok_or_else(too_large)?;
        if padded < eff {
            return Err(format!(
                "window {eff} larger than padded input {padded} on spatial axis {i}"
            ));
        }
        let span = padded - eff;
        let mut out = if ceil_mode {
            span.div_ceil(self.strides[i]) + 1
        } else {
            span / self.strides[i] + 1
        };
        // With ceil_mode the last window must start inside the input or left padding.
        if ceil_mode && (out - 1) * self.strides[i] >= len + self.pad_begin[i] {
            out -= 1;
        }
        Ok(out)
    }
}

/// Everything a Conv kernel needs to know about its operands.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvGeometry {
    /// `N`, the first dimension of the input and of the output.
    pub batch: usize,
    /// `C`, the input's channels, all groups together.
    pub in_channels: usize,
    /// `M`, the output's channels (the weights' first dimension), all groups together.
    pub out_channels: usize,
    /// Number of groups (ONNX `group`, default 1). Input and output channels are split
    /// evenly into this many groups, and each output channel sees only its own group's
    /// `in_channels / group` input channels.
    pub group: usize,
    /// The input's spatial extents.
    pub in_spatial: Vec<usize>,
    /// The output's spatial extents.
    pub out_spatial: Vec<usize>,
    /// Kernel, strides, dilations and resolved padding.
    pub window: Window,
}

impl ConvGeometry {
    /// From a Conv node, its input shape `[N, C, spatial...]` and weight shape
    /// `[M, C/group, kernel...]`.
    pub fn new(node: &Node, x: &[usize], w: &[usize]) -> Result<ConvGeometry, String> {
        if x.len() < 3 {
            return Err(format!(
                "Conv needs an input [N, C, spatial...] with a spatial axis, got shape {x:?}"
            ));
        }
        if w.len() != x.len() {
            return Err(format!(
                "Conv weight rank {} differs from input rank {}",
                w.len(),
                x.len()
            ));
        }
        let group = node.attr_int("group", 1);
        if group < 1 {
            return Err(format!("group {group} must be >= 1"));
        }
        let group = group as usize;
        let (c, m) = (x[1], w[0]);
        if c % group != 0 || m % group != 0 || w[1] * group != c {
            return Err(format!(
                "Conv channels do not fit group {group}: input {x:?}, weight {w:?}"
            ));
        }
        let kernel = w[2..].to_vec();
        if let Some(k) = node.attr_ints("kernel_shape") {
            if k.iter().map(|&v| v as usize).ne(kernel.iter().copied()) {
                return Err(format!("kernel_shape {k:?} disagrees with weight {w:?}"));
            }
        }
        let window = Window::new(node, kernel, &x[2..])?;
        let out_spatial = (0..x.len() - 2)
            .map(|i| window.out_len(i, x[2 + i], false))
            .collect::<Result<_, _>>()?;
        Ok(ConvGeometry {
            batch: x[0],
            in_channels: c,
            out_channels: m,
            group,
            in_spatial: x[2..].to_vec(),
            out_spatial,
            window,
        })
    }
}

/// Everything a pooling kernel needs to know.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolGeometry {
    /// Kernel, strides, dilations and resolved padding.
    pub window: Window,
    /// The output's spatial extents (`ceil_mode` already applied); batch and channels are
    /// the input's.
    pub out_spatial: Vec<usize>,
    /// AveragePool: whether padding counts in the divisor.
    pub count_include_pad: bool,
}

impl PoolGeometry {
    /// From a MaxPool/AveragePool node and its input shape `[N, C, spatial...]`.
    pub fn new(node: &Node, x: &[usize]) -> Result<PoolGeometry, String> {
        if x.len() < 3 {
            return Err(format!("pooling needs rank >= 3, got {x:?}"));
        }
        let kernel: Vec<usize> = node
            .attr_ints("kernel_shape")
            .ok_or("pooling needs kernel_shape")?
            .iter()
            .map(|&k| {
                if k >= 1 {
                    Ok(k as usize)
                } else {
                    Err(format!("kernel_shape value {k}"))
                }
            })
            .collect::<Result<_, _>>()?;
        if kernel.len() != x.len() - 2 {
            return Err(format!("kernel_shape {kernel:?} does not fit input {x:?}"));
        }
        let window = Window::new(node, kernel, &x[2..])?;
        let ceil = node.attr_int("ceil_mode", 0) != 0;
        let out_spatial = (0..x.len() - 2)
            .map(|i| window.out_len(i, x[2 + i], ceil))
            .collect::<Result<_, _>>()?;
        Ok(PoolGeometry {
            window,
            out_spatial,
            count_include_pad: node.attr_int("count_include_pad", 0) != 0,
        })
    }
}

/// The number of elements of `dims`, or `None` when it does not fit a `usize`: shapes come
/// from files, so their products are checked before anything is sized by them.
pub fn checked_product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_sizes_that_overflow_are_errors_not_panics() {
        // Found by the ONNX importer's fuzzer: a mutated Reshape target whose product
        // overflowed usize panicked in debug builds and wrapped in release ones.
        let big = 1usize << 40;
        assert!(reshape_shape(&[big, big], &[-1], false).is_err());
        assert!(reshape_shape(&[4], &[1 << 62, 4, -1], false).is_err());
        assert!(reshape_shape(&[4], &[i64::MAX, i64::MAX], false).is_err());
        assert_eq!(reshape_shape(&[2, 3], &[3, -1], false), Ok(vec![3, 2]));
        assert_eq!(checked_product(&[]), Some(1));
        assert_eq!(checked_product(&[usize::MAX, 2]), None);
    }

    #[test]
    fn element_wise_ops_carry_symbolic_dims() {
        use crate::builder::GraphBuilder;
        use crate::ir::{Attr, TensorId};
        use std::collections::BTreeMap;
        let n = Dim::Sym("N".into());
        let mut b = GraphBuilder::new("sym");
        let x = b.input("x", DType::F32, &[n.clone(), Dim::Fixed(4)]);
        let row = b.input("row", DType::F32, &[Dim::Fixed(1), Dim::Fixed(4)]);
        let i = b.input("i", DType::I32, &[n.clone(), Dim::Fixed(1)]);
        let zero = b.constant_f32("zero", &[], &[0.0]);
        let mask = b.node(OpKind::Greater, &[x, zero], &[]).unwrap();
        let picked = b.node(OpKind::Where, &[mask, x, row], &[]).unwrap();
        let to_i64 = [("to", Attr::Int(DType::I64.onnx_code()))];
        let cast = b.node(OpKind::Cast, &[picked], &to_i64).unwrap();
        b.output(cast);
        let g = &b.finish().unwrap();
        let decl = |t: TensorId| (g.tensors[t].dtype, g.tensors[t].shape.clone());
        let n4 = vec![n.clone(), Dim::Fixed(4)];
        assert_eq!(decl(mask), (DType::Bool, n4.clone()));
        assert_eq!(decl(picked), (DType::F32, n4.clone()));
        assert_eq!(decl(cast), (DType::I64, n4));
        // The static dtype rule still applies: an f32 and an i32 do not compare.
        let bad = Node {
            name: "bad".into(),
            op: OpKind::Less,
            inputs: vec![x, i],
            outputs: Vec::new(),
            attrs: BTreeMap::new(),
        };
        let e = infer_node(g, &bad).unwrap_err().to_string();
        assert!(e.contains("dtypes differ"), "{e}");
        // An operand of unknown rank (the importer's provisional shape) stays unknown.
        let mut b = GraphBuilder::new("unknown");
        let u = b.input("u", DType::F32, &[Dim::Sym("u?".into())]);
        b.output(u);
        let g = &b.finish().unwrap();
        let neg = Node {
            name: "neg".into(),
            op: OpKind::Neg,
            inputs: vec![u],
            outputs: Vec::new(),
            attrs: BTreeMap::new(),
        };
        assert!(infer_node(g, &neg).is_err());
    }

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(
            broadcast_shapes(&[2, 1, 3], &[4, 1]).unwrap(),
            vec![2, 4, 3]
        );
        assert_eq!(broadcast_shapes(&[0, 3], &[1, 3]).unwrap(), vec![0, 3]);
        assert!(broadcast_shapes(&[2, 3], &[4, 3]).is_err());
    }

    #[test]
    fn matmul_promotes_vectors() {
        assert_eq!(matmul_shape(&[3], &[3, 4]).unwrap(), vec![4]);
        assert_eq!(matmul_shape(&[2, 5, 3], &[3]).unwrap(), vec![2, 5]);
        assert_eq!(
            matmul_shape(&[2, 1, 5, 3], &[4, 3, 6]).unwrap(),
            vec![2, 4, 5, 6]
        );
    }

    #[test]
    fn symbolic_dims_pass_through_matmul_and_transpose() {
        use crate::ir::{Attr, GraphBuilder};
        let mut b = GraphBuilder::new("sym");
        let n = Dim::Sym("n".into());
        let x = b.input("x", DType::F32, &[Dim::Fixed(2), n.clone(), Dim::Fixed(8)]);
        let w = b.constant_f32("w", &[8, 3], &[0.0; 24]);
        let h = b.node(OpKind::MatMul, &[x, w], &[]).unwrap();
        let t = b
            .node(
                OpKind::Transpose,
                &[h],
                &[("perm", Attr::Ints(vec![2, 0, 1]))],
            )
            .unwrap();
        let wrong = b.constant_f32("v", &[7, 3], &[0.0; 21]);
        assert!(b.node(OpKind::MatMul, &[x, wrong], &[]).is_err());
        let g = b.finish().unwrap();
        assert_eq!(
            g.tensors[h].shape,
            vec![Dim::Fixed(2), n.clone(), Dim::Fixed(3)]
        );
        assert_eq!(g.tensors[t].shape, vec![Dim::Fixed(3), Dim::Fixed(2), n]);
    }

    #[test]
    fn degenerate_windows_are_errors_not_panics() {
        let mut node = crate::ir::Node {
            name: "c".into(),
            op: OpKind::Conv,
            inputs: vec![],
            outputs: vec![],
            attrs: Default::default(),
        };
        assert!(ConvGeometry::new(&node, &[1, 1, 4, 4], &[1, 1, 0, 3]).is_err());
        node.attrs
            .insert("auto_pad".into(), crate::ir::Attr::Str("SAME_UPPER".into()));
        let g = ConvGeometry::new(&node, &[1, 1, 0, 4], &[1, 1, 3, 3]);
        assert!(g.is_err() || g.unwrap().out_spatial[0] == 0);
    }

    #[test]
    fn reshape_infers_and_copies() {
        assert_eq!(
            reshape_shape(&[2, 3, 4], &[0, -1], false).unwrap(),
            vec![2, 12]
        );
        assert!(reshape_shape(&[2, 3], &[4, -1], false).is_err());
    }
}
