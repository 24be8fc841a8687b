//! Lowering: each IR node becomes one or more kernel dispatches ([`Draft`]s) over tensors.
//!
//! `supports` and `compile` share this code, so a node is claimed exactly when it can be
//! lowered: there is no second list of conditions to drift out of step. Every refusal is a
//! [`Decline`] with an ABI reason code and a message naming the culprit.

use baton_delegate_api::ir::{DType, Graph, Node, OpKind, TensorId};
use baton_delegate_api::shape::{
    infer_outputs, matmul_shape, normalize_axis, transpose_perm, ConvGeometry, PoolGeometry,
};
use baton_delegate_api::{Constants, Decline, DeclineReason};

use crate::catalog;
use crate::Limits;

mod linalg;
mod logic;
pub(crate) mod norm;
mod resample;
mod rows;

pub use linalg::conv_batch_norm;
use linalg::{conv, gemm, matmul};
use logic::{cast, compare, gather, where_};
use rows::{layer_norm, pool, reduce, softmax};

/// Kernels address at most this many dimensions (padded with leading 1s).
pub const MAX_RANK: usize = 6;

type Lowered<T> = Result<T, Decline>;

/// An activation applied to a kernel's result before it is stored (the "epilogue"),
/// either a standalone activation node or one fused into its producer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Activation {
    /// The code `activate()` in activation.wgsl switches on; 0 is the identity.
    pub code: u32,
    pub a: f32,
    pub b: f32,
}

/// One dispatch, its buffers still named by tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    pub kernel: &'static str,
    pub spec: u32,
    /// Bindings 0-3 (2 is unused by most kernels; 3 is the output).
    pub bindings: [Option<TensorId>; 4],
    /// Bindings 5 and 6: further outputs (LayerNormalization's Mean and InvStdDev).
    pub extra: [Option<TensorId>; 2],
    /// Constants made at compile time, each bound at its slot from the weights buffer:
    /// BatchNormalization's per-channel scale and shift, or a Conv's weights and bias
    /// with a BatchNormalization folded in, which no graph tensor holds.
    pub made: Vec<(usize, Vec<u8>)>,
    pub params: Vec<u32>,
    pub groups: [u32; 3],
}

/// What lowering needs to know about the graph and the device.
pub struct Context<'a> {
    pub graph: &'a Graph,
    pub consts: &'a Constants<'a>,
    pub limits: Limits,
}

impl Context<'_> {
    /// The concrete shape of a tensor.
    pub fn shape(&self, t: TensorId) -> Lowered<Vec<usize>> {
        let decl = &self.graph.tensors[t];
        decl.static_shape().ok_or_else(|| {
            Decline::new(
                DeclineReason::Shape,
                format!("tensor '{}' has a symbolic shape", decl.name),
            )
        })
    }

    /// The shape of an f32 tensor that a kernel with no f16 variant reads or writes;
    /// anything else is declined, an f16 tensor with the reason why.
    fn f32_tensor(&self, t: TensorId) -> Lowered<Vec<usize>> {
        self.checked_tensor(t, false)
    }

    /// The shape of an f32 tensor, or of an f16 one where the device runs the `_f16`
    /// kernel variants: for the kernels that have them (element-wise, copy, pools,
    /// softmax, matmul, conv, layernorm, reduce).
    fn float_tensor(&self, t: TensorId) -> Lowered<Vec<usize>> {
        self.checked_tensor(t, self.limits.float16)
    }

    /// The shape of an operand of an f16-capable kernel, which must have the dtype of
    /// that kernel's output `out`.
    fn operand(&self, t: TensorId, out: TensorId) -> Lowered<Vec<usize>> {
        let shape = self.float_tensor(t)?;
        let (x, y) = (&self.graph.tensors[t], &self.graph.tensors[out]);
        if x.dtype != y.dtype {
            return Err(Decline::new(
                DeclineReason::DType,
                format!(
                    "tensor '{}' is {} but the output '{}' is {}",
                    x.name, x.dtype, y.name, y.dtype
                ),
            ));
        }
        Ok(shape)
    }

    /// The kernel `name` or its f16 variant `name_f16`, by the dtype of `out`.
    fn variant(&self, f32: &'static str, f16: &'static str, out: TensorId) -> &'static str {
        if self.graph.tensors[out].dtype == DType::F16 {
            f16
        } else {
            f32
        }
    }

    /// A row kernel of [`catalog::SUBGROUP`] (`names`: its f32, f16, subgroup and
    /// subgroup f16 variants): the subgroup ones where the device has subgroup
    /// arithmetic ([`Limits::subgroups`]), the f16 ones by the dtype of `out`.
    fn row_variant(&self, names: [&'static str; 4], out: TensorId) -> &'static str {
        let [f32, f16, sg, sg_f16] = names;
        if self.limits.subgroups {
            self.variant(sg, sg_f16, out)
        } else {
            self.variant(f32, f16, out)
        }
    }

    fn checked_tensor(&self, t: TensorId, f16: bool) -> Lowered<Vec<usize>> {
        let decl = &self.graph.tensors[t];
        if decl.dtype != DType::F32 && !(f16 && decl.dtype == DType::F16) {
            let why = if self.limits.float16 {
                "; the device has f16 shaders with 16-bit storage, but this op has f32 kernels only \
                 (f16: element-wise ops, activations, copies, pools, Softmax, MatMul/Gemm, Conv, \
                 ConvTranspose, LayerNormalization, ReduceSum/Mean/Max/Min)"
            } else {
                "; the device lacks f16 shaders with 16-bit storage (Vulkan: shaderFloat16 + \
                 storageBuffer16BitAccess; wgpu: Features::SHADER_F16), which the f16 kernels need"
            };
            return Err(Decline::new(
                DeclineReason::DType,
                format!(
                    "tensor '{}' is {}: only f32{} is supported here{}",
                    decl.name,
                    decl.dtype,
                    if f16 { " and f16" } else { "" },
                    if decl.dtype == DType::F16 { why } else { "" }
                ),
            ));
        }
        self.fits(t)
    }

    /// The shape of a tensor of a dtype the word kernels (Cast, the comparisons, Where)
    /// hold: f32, i32, i64 as two 32-bit words (low first) and bool as one byte an
    /// element (packed four to a word, since WGSL storage has no byte access). Other
    /// dtypes (f16, the 8- and 16-bit integers, f64) have no loads or stores in those
    /// kernels and are declined with that reason.
    fn word_tensor(&self, t: TensorId, op: OpKind) -> Lowered<Vec<usize>> {
        let decl = &self.graph.tensors[t];
        if !matches!(
            decl.dtype,
            DType::F32 | DType::I32 | DType::I64 | DType::Bool
        ) {
            return Err(Decline::new(
                DeclineReason::DType,
                format!(
                    "tensor '{}' is {}: {op} here holds f32, i32, i64 and bool only",
                    decl.name, decl.dtype
                ),
            ));
        }
        self.fits(t)
    }

    /// The shape of a tensor a storage binding can hold: not quantized, of a concrete
    /// shape of at most [`MAX_RANK`] dimensions, not empty, within the device's range.
    fn fits(&self, t: TensorId) -> Lowered<Vec<usize>> {
        let decl = &self.graph.tensors[t];
        if decl.quant.is_some() {
            return Err(Decline::new(
                DeclineReason::DType,
                format!("tensor '{}' is quantized", decl.name),
            ));
        }
        let shape = self.shape(t)?;
        if shape.len() > MAX_RANK {
            return Err(Decline::new(
                DeclineReason::Shape,
                format!(
                    "tensor '{}' has rank {} (at most {MAX_RANK})",
                    decl.name,
                    shape.len()
                ),
            ));
        }
        let elements: usize = shape.iter().product();
        if elements == 0 {
            return Err(Decline::new(
                DeclineReason::Shape,
                format!(
                    "tensor '{}' is empty (a storage binding cannot be)",
                    decl.name
                ),
            ));
        }
        let bytes = (elements * decl.dtype.size()) as u64;
        if bytes > self.limits.max_storage_range {
            return Err(Decline::new(
                DeclineReason::Resource,
                format!(
                    "tensor '{}' is {bytes} bytes, over the device's maxStorageBufferRange of {} bytes",
                    decl.name, self.limits.max_storage_range
                ),
            ));
        }
        Ok(shape)
    }

    /// The workgroup size of the 1-D and row kernels: four subgroups, at least 64
    /// invocations, within the device's limits, a power of two among those built.
    pub fn group_size(&self, kernel: &str) -> Lowered<u32> {
        let l = &self.limits;
        let target = (4 * l.subgroup).max(64);
        let cap = l
            .max_invocations
            .min(l.max_group_size[0])
            .min(l.shared_memory / 4);
        catalog::values(kernel)
            .into_iter()
            .filter(|&v| v <= target.min(cap))
            .filter(|&v| v % l.subgroup == 0 || l.subgroup > v)
            .max()
            .ok_or_else(|| {
                Decline::new(
                    DeclineReason::Resource,
                    format!("no {kernel} variant fits the device's workgroup limits"),
                )
            })
    }

    /// The matmul tile edge: 16 where a 16x16 workgroup and two 16x16 f32 tiles fit.
    pub fn tile(&self) -> Lowered<u32> {
        let l = &self.limits;
        catalog::values("matmul")
            .into_iter()
            .filter(|&t| {
                t * t <= l.max_invocations
                    && t <= l.max_group_size[0]
                    && t <= l.max_group_size[1]
                    && 2 * t * t * 4 <= l.shared_memory
            })
            .max()
            .ok_or_else(|| Decline::new(DeclineReason::Resource, "no matmul tile fits the device"))
    }

    /// Workgroup counts for `n` groups over x, spilling into y past the device's limit.
    pub fn spread(&self, n: u64) -> Lowered<[u32; 3]> {
        let maxx = u64::from(self.limits.max_group_count[0]);
        let x = n.clamp(1, maxx);
        let y = n.div_ceil(x);
        if y > u64::from(self.limits.max_group_count[1]) {
            return Err(Decline::new(
                DeclineReason::Resource,
                format!("{n} workgroups exceed the device's dispatch limits"),
            ));
        }
        Ok([x as u32, y as u32, 1])
    }

    fn one_dimensional(
        &self,
        kernel: &'static str,
        n: usize,
        bindings: [Option<TensorId>; 4],
        params: Vec<u32>,
    ) -> Lowered<Draft> {
        let spec = self.group_size(kernel)?;
        Ok(Draft {
            kernel,
            spec,
            bindings,
            extra: [None, None],
            made: Vec::new(),
            params,
            groups: self.spread((n as u64).div_ceil(u64::from(spec)))?,
        })
    }
}

/// The activation a unary node computes, or `None` when `node` is not one.
pub fn activation_of(cx: &Context<'_>, node: &Node) -> Lowered<Option<Activation>> {
    let act = |code: u32| {
        Ok(Some(Activation {
            code,
            a: 0.0,
            b: 0.0,
        }))
    };
    match node.op {
        OpKind::Relu => act(1),
        OpKind::Clip => {
            let (a, b) = clip_bounds(cx, node)?;
            Ok(Some(Activation { code: 2, a, b }))
        }
        OpKind::Sigmoid => act(3),
        OpKind::Tanh => act(4),
        OpKind::Gelu => match node.attr_str("approximate", "none") {
            "none" => act(5),
            "tanh" => act(6),
            other => Err(Decline::new(
                DeclineReason::Attribute,
                format!("Gelu approximate = '{other}'"),
            )),
        },
        OpKind::LeakyRelu => Ok(Some(Activation {
            code: 7,
            a: node.attr_float("alpha", 0.01),
            b: 0.0,
        })),
        OpKind::HardSigmoid => Ok(Some(Activation {
            code: 8,
            a: node.attr_float("alpha", 0.2),
            b: node.attr_float("beta", 0.5),
        })),
        OpKind::HardSwish => act(9),
        OpKind::Exp => act(10),
        OpKind::Log => act(11),
        OpKind::Sqrt => act(12),
        OpKind::Neg => act(13),
        OpKind::Abs => act(14),
        OpKind::Erf => act(15),
        OpKind::Ceil => act(16),
        _ => Ok(None),
    }
}

/// Clip's bounds from its attributes or constant one-element inputs.
fn clip_bounds(cx: &Context<'_>, node: &Node) -> Lowered<(f32, f32)> {
    let bound = |i: usize, attr: &str, default: f32| -> Lowered<f32> {
        let v = match node.inputs.get(i) {
            None => node.attr_float(attr, default),
            Some(&t) => {
                let decl = &cx.graph.tensors[t];
                let bytes = cx.consts.bytes(t).filter(|_| decl.is_const());
                let Some(bytes) = bytes else {
                    return Err(Decline::new(
                        DeclineReason::NotConstant,
                        format!("Clip {attr} '{}' is computed at run time", decl.name),
                    ));
                };
                let float = matches!(decl.dtype, DType::F32 | DType::F16);
                if !float || bytes.len() != decl.dtype.size() {
                    return Err(Decline::new(
                        DeclineReason::Shape,
                        format!("Clip {attr} '{}' must be one f32 or f16", decl.name),
                    ));
                }
                // Exact: an f16 widens to f32 without rounding.
                baton_delegate_api::dtype::element_f64(decl.dtype, bytes, 0) as f32
            }
        };
        if v.is_nan() {
            return Err(Decline::new(
                DeclineReason::Attribute,
                format!("Clip {attr} is NaN"),
            ));
        }
        Ok(v)
    };
    if (node.attrs.contains_key("min") || node.attrs.contains_key("max")) && node.inputs.len() > 1 {
        return Err(Decline::new(
            DeclineReason::Attribute,
            "Clip bounds given both as attributes and as inputs",
        ));
    }
    Ok((bound(1, "min", f32::MIN)?, bound(2, "max", f32::MAX)?))
}

/// The ops [`lower`] knows; anything else is declined as an op before its dtypes are
/// looked at, so the reason says what is really missing.
const IMPLEMENTED: &[OpKind] = &[
    OpKind::Relu,
    OpKind::Clip,
    OpKind::Sigmoid,
    OpKind::Tanh,
    OpKind::Gelu,
    OpKind::LeakyRelu,
    OpKind::HardSigmoid,
    OpKind::HardSwish,
    OpKind::Exp,
    OpKind::Log,
    OpKind::Sqrt,
    OpKind::Neg,
    OpKind::Abs,
    OpKind::Erf,
    OpKind::Ceil,
    OpKind::Add,
    OpKind::Sub,
    OpKind::Mul,
    OpKind::Div,
    OpKind::Pow,
    OpKind::MatMul,
    OpKind::Gemm,
    OpKind::Conv,
    OpKind::MaxPool,
    OpKind::AveragePool,
    OpKind::GlobalAveragePool,
    OpKind::Softmax,
    OpKind::LogSoftmax,
    OpKind::LayerNormalization,
    OpKind::BatchNormalization,
    OpKind::Reshape,
    OpKind::Flatten,
    OpKind::Squeeze,
    OpKind::Unsqueeze,
    OpKind::Identity,
    OpKind::Transpose,
    OpKind::Concat,
    OpKind::Expand,
    OpKind::Slice,
    OpKind::Split,
    OpKind::Pad,
    OpKind::ReduceSum,
    OpKind::ReduceMean,
    OpKind::ReduceMax,
    OpKind::ReduceMin,
    OpKind::Cast,
    OpKind::Equal,
    OpKind::Less,
    OpKind::Greater,
    OpKind::LessOrEqual,
    OpKind::GreaterOrEqual,
    OpKind::Where,
    OpKind::Gather,
    OpKind::Resize,
    OpKind::ConvTranspose,
];

/// Lowers `node`, storing into `out` (its own output, or the output of the activation
/// fused into it) with `act` applied.
pub fn lower(cx: &Context<'_>, node: &Node, act: Activation, out: TensorId) -> Lowered<Vec<Draft>> {
    let ins = &node.inputs;
    if !IMPLEMENTED.contains(&node.op) {
        return Err(Decline::new(
            DeclineReason::Op,
            format!("{} is not implemented by the Vulkan delegate", node.op),
        ));
    }
    let needs = match node.op {
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div | OpKind::Pow => 2,
        OpKind::MatMul | OpKind::Gemm => 2,
        OpKind::Conv | OpKind::ConvTranspose | OpKind::LayerNormalization => 2,
        OpKind::Equal
        | OpKind::Less
        | OpKind::Greater
        | OpKind::LessOrEqual
        | OpKind::GreaterOrEqual => 2,
        OpKind::Where => 3,
        OpKind::Gather => 2,
        _ => 1,
    };
    if ins.len() < needs || node.outputs.is_empty() {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{} has {} inputs and {} outputs",
                node.label(),
                ins.len(),
                node.outputs.len()
            ),
        ));
    }
    check_outputs(cx, node)?;
    // The word kernels hold dtypes besides the floats and take no epilogue (fusion
    // gives one to arithmetic producers only).
    match node.op {
        OpKind::Cast => return cast(cx, node, out).map(|d| vec![d]),
        OpKind::Equal
        | OpKind::Less
        | OpKind::Greater
        | OpKind::LessOrEqual
        | OpKind::GreaterOrEqual => return compare(cx, node, out).map(|d| vec![d]),
        OpKind::Where => return where_(cx, node, out).map(|d| vec![d]),
        OpKind::Gather => return gather(cx, node, out).map(|d| vec![d]),
        // Resize's nearest moves the bits of any dtype of 1, 2, 4 or 8 bytes.
        OpKind::Resize => return resample::resize(cx, node, out).map(|d| vec![d]),
        _ => {}
    }
    let activation = activation_of(cx, node)?;
    // The ops whose kernels have f16 variants; every operand of theirs must then have
    // the output's dtype (the kernels have one element type).
    let f16_kernels = activation.is_some()
        || matches!(
            node.op,
            OpKind::Add
                | OpKind::Sub
                | OpKind::Mul
                | OpKind::Div
                | OpKind::Pow
                | OpKind::Expand
                | OpKind::Reshape
                | OpKind::Flatten
                | OpKind::Squeeze
                | OpKind::Unsqueeze
                | OpKind::Identity
                | OpKind::Transpose
                | OpKind::Concat
                | OpKind::Slice
                | OpKind::Split
                | OpKind::MaxPool
                | OpKind::AveragePool
                | OpKind::GlobalAveragePool
                | OpKind::Softmax
                | OpKind::LogSoftmax
                | OpKind::MatMul
                | OpKind::Gemm
                | OpKind::ConvTranspose
                | OpKind::Conv
                | OpKind::LayerNormalization
                | OpKind::ReduceSum
                | OpKind::ReduceMean
                | OpKind::ReduceMax
                | OpKind::ReduceMin
        );
    let y = if f16_kernels {
        cx.float_tensor(out)?
    } else {
        cx.f32_tensor(out)?
    };
    // The output shape the IR's own rules give must be the declared one.
    let expected = infer(cx, node)?;
    if expected != y {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{}: declared output {y:?}, the op gives {expected:?}",
                node.label()
            ),
        ));
    }
    if let Some(a) = activation {
        let x = cx.operand(ins[0], out)?;
        return Ok(vec![elementwise(cx, 0, ins[0], None, &x, &x, &y, a, out)?]);
    }
    match node.op {
        OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div | OpKind::Pow => {
            let a = cx.operand(ins[0], out)?;
            let b = cx.operand(ins[1], out)?;
            let op = match node.op {
                OpKind::Add => 1,
                OpKind::Sub => 2,
                OpKind::Mul => 3,
                OpKind::Div => 4,
                _ => 5,
            };
            Ok(vec![elementwise(
                cx,
                op,
                ins[0],
                Some(ins[1]),
                &a,
                &b,
                &y,
                act,
                out,
            )?])
        }
        OpKind::MatMul => matmul(cx, node, act, out).map(|d| vec![d]),
        OpKind::Gemm => gemm(cx, node, act, out).map(|d| vec![d]),
        OpKind::Conv => conv(cx, node, act, out).map(|d| vec![d]),
        OpKind::ConvTranspose => resample::conv_transpose(cx, node, act, out, &y).map(|d| vec![d]),
        OpKind::MaxPool | OpKind::AveragePool | OpKind::GlobalAveragePool => {
            pool(cx, node, out).map(|d| vec![d])
        }
        OpKind::Softmax | OpKind::LogSoftmax => softmax(cx, node, out).map(|d| vec![d]),
        OpKind::LayerNormalization => layer_norm(cx, node, out).map(|d| vec![d]),
        OpKind::BatchNormalization => norm::batch_norm(cx, node, act, out, &y).map(|d| vec![d]),
        OpKind::Reshape
        | OpKind::Flatten
        | OpKind::Squeeze
        | OpKind::Unsqueeze
        | OpKind::Identity => {
            let x = cx.operand(ins[0], out)?;
            let n = x.iter().product::<usize>();
            Ok(vec![copy(cx, ins[0], out, &[n], &[1], &[1], 0, 0)?])
        }
        OpKind::Expand => {
            let x = cx.operand(ins[0], out)?;
            Ok(vec![elementwise(
                cx, 0, ins[0], None, &x, &x, &y, act, out,
            )?])
        }
        OpKind::ReduceSum | OpKind::ReduceMean | OpKind::ReduceMax | OpKind::ReduceMin => {
            reduce(cx, node, out).map(|d| vec![d])
        }
        OpKind::Transpose => {
            let x = cx.operand(ins[0], out)?;
            let perm = transpose_perm(node, x.len())
                .map_err(|e| Decline::new(DeclineReason::Attribute, e))?;
            let xs = strides(&x);
            let src: Vec<usize> = perm.iter().map(|&p| xs[p]).collect();
            Ok(vec![copy(cx, ins[0], out, &y, &src, &strides(&y), 0, 0)?])
        }
        OpKind::Slice => {
            let x = cx.operand(ins[0], out)?;
            let (offset, src) = slice_copy(cx, node, &x)?;
            Ok(vec![copy(
                cx,
                ins[0],
                out,
                &y,
                &src,
                &strides(&y),
                offset,
                0,
            )?])
        }
        OpKind::Split => split(cx, node, out),
        OpKind::Pad => pad(cx, node, out, &y).map(|d| vec![d]),
        OpKind::Concat => {
            let axis = normalize_axis(node.attr_int("axis", 0), y.len())
                .map_err(|e| Decline::new(DeclineReason::Attribute, e))?;
            let ys = strides(&y);
            let mut at = 0;
            let mut drafts = Vec::new();
            for &t in ins {
                let x = cx.operand(t, out)?;
                drafts.push(copy(cx, t, out, &x, &strides(&x), &ys, 0, at * ys[axis])?);
                at += x[axis];
            }
            Ok(drafts)
        }
        op => Err(Decline::new(
            DeclineReason::Op,
            format!("{op} is not implemented by the Vulkan delegate"),
        )),
    }
}

/// Slice as a strided copy: the source offset of the first element taken and the
/// source stride of each output dimension, by ONNX's rules (negative starts and ends
/// count from the end; for a positive step both clamp to `[0, dim]`, for a negative one
/// `start` to `[0, dim - 1]` and `end` to `[-1, dim - 1]`). A negative step is a negative
/// stride, passed as its 32-bit two's complement: the copy kernel's u32 index arithmetic
/// wraps, so the sum comes out right.
fn slice_copy(cx: &Context<'_>, node: &Node, x: &[usize]) -> Lowered<(usize, Vec<usize>)> {
    let operand = |i: usize, what: &str| -> Lowered<Option<Vec<i64>>> {
        // Opset 1 has them as attributes, later ones as inputs.
        let Some(&t) = node.inputs.get(i) else {
            return Ok(node.attr_ints(what).map(<[i64]>::to_vec));
        };
        match cx.consts.i64s(t) {
            Some(v) => Ok(Some(v)),
            None => Err(Decline::new(
                DeclineReason::NotConstant,
                format!(
                    "{}: {what} '{}' is computed at run time",
                    node.label(),
                    cx.graph.tensors[t].name
                ),
            )),
        }
    };
    let attr = |e: String| Decline::new(DeclineReason::Attribute, format!("{}: {e}", node.label()));
    let starts = operand(1, "starts")?.unwrap_or_default();
    let ends = operand(2, "ends")?.unwrap_or_default();
    let n = starts.len();
    let axes = match operand(3, "axes")? {
        Some(a) => a
            .iter()
            .map(|&v| normalize_axis(v, x.len()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(attr)?,
        None => (0..n.min(x.len())).collect(),
    };
    let steps = operand(4, "steps")?.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(attr("starts, ends, axes and steps differ in length".into()));
    }
    let xs = strides(x);
    let mut src: Vec<i64> = xs.iter().map(|&s| s as i64).collect();
    let mut offset = 0i64;
    for k in 0..n {
        let (axis, step) = (axes[k], steps[k]);
        let dim = x[axis] as i64;
        let from_end = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let start = match step {
            0 => return Err(attr("step 0".into())),
            s if s > 0 => from_end(starts[k]).clamp(0, dim),
            _ => from_end(starts[k]).clamp(0, dim - 1),
        };
        let step32 = i32::try_from(step.saturating_mul(xs[axis] as i64)).unwrap_or(if step > 0 {
            i32::MAX
        } else {
            i32::MIN
        });
        offset += start * xs[axis] as i64;
        src[axis] = i64::from(step32);
    }
    // Strides as u32 bit patterns (a negative one wraps); a step past the extent takes
    // one element, so a clamped stride never leaves the tensor.
    Ok((
        offset as usize,
        src.iter().map(|&s| s as i32 as u32 as usize).collect(),
    ))
}

/// Pad with constant amounts (as inputs, or opset 2's attributes), in any mode.
fn pad(cx: &Context<'_>, node: &Node, out: TensorId, y: &[usize]) -> Lowered<Draft> {
    let x = cx.f32_tensor(node.inputs[0])?;
    let what = |e: String| Decline::new(DeclineReason::Attribute, format!("{}: {e}", node.label()));
    let constant = |i: usize, name: &str| -> Lowered<Option<Vec<i64>>> {
        match node.inputs.get(i) {
            None => Ok(node.attr_ints(name).map(<[i64]>::to_vec)),
            Some(&t) => cx.consts.i64s(t).map(Some).ok_or_else(|| {
                Decline::new(
                    DeclineReason::NotConstant,
                    format!(
                        "{}: {name} '{}' is computed at run time",
                        node.label(),
                        cx.graph.tensors[t].name
                    ),
                )
            }),
        }
    };
    let pads = constant(1, "pads")?.ok_or_else(|| what("no pads".into()))?;
    let axes = match constant(3, "axes")? {
        Some(a) => a
            .iter()
            .map(|&v| normalize_axis(v, x.len()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(what)?,
        None => (0..x.len()).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(what(format!("pads {pads:?} for axes {axes:?}")));
    }
    // As ONNX: negative amounts crop first, the padding extends the kept part.
    let mut kept: Vec<i64> = x.iter().map(|&d| d as i64).collect();
    let mut before = vec![0usize; x.len()];
    let mut offset = 0i64;
    let xs = strides(&x);
    for (k, &a) in axes.iter().enumerate() {
        let (b, e) = (pads[k], pads[k + axes.len()]);
        kept[a] = kept[a].saturating_add(b.min(0)).saturating_add(e.min(0));
        before[a] = usize::try_from(b.max(0)).map_err(|_| what(format!("pads {pads:?}")))?;
        offset += b.min(0).saturating_neg() * xs[a] as i64;
    }
    if kept.iter().any(|&k| k <= 0) {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!("{}: pads {pads:?} crop a dimension away", node.label()),
        ));
    }
    let kept: Vec<usize> = kept.iter().map(|&k| k as usize).collect();
    let mode = match node.attr_str("mode", "constant") {
        "constant" => 0,
        "reflect" => 1,
        "edge" => 2,
        "wrap" => 3,
        other => return Err(what(format!("mode '{other}'"))),
    };
    // The constant: input 2 (one f32; absent or empty is 0), or opset 2's `value`.
    let value = match node.inputs.get(2) {
        None => node.attr_float("value", 0.0),
        Some(&t) => {
            let decl = &cx.graph.tensors[t];
            match cx.consts.bytes(t).filter(|_| decl.is_const()) {
                Some([]) => 0.0,
                Some(b) if decl.dtype == DType::F32 && b.len() == 4 => {
                    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                }
                _ => {
                    return Err(Decline::new(
                        DeclineReason::NotConstant,
                        format!(
                            "{}: constant_value '{}' must be one constant f32",
                            node.label(),
                            decl.name
                        ),
                    ))
                }
            }
        }
    };
    let n: usize = y.iter().product();
    let mut p = vec![n as u32, mode, value.to_bits()];
    p.extend(pad6(y, 1));
    p.extend(pad6(&kept, 1));
    p.extend(pad6(&before, 0));
    p.extend(pad6(&xs, 0));
    p.push(offset as u32);
    cx.one_dimensional("pad", n, [Some(node.inputs[0]), None, None, Some(out)], p)
}

/// Split: one copy per output, each from its offset along the axis.
fn split(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Vec<Draft>> {
    let x = cx.operand(node.inputs[0], out)?;
    let axis = normalize_axis(node.attr_int("axis", 0), x.len())
        .map_err(|e| Decline::new(DeclineReason::Attribute, e))?;
    let shapes = infer_all(cx, node)?;
    let xs = strides(&x);
    let mut at = 0;
    let mut drafts = Vec::new();
    for (k, &t) in node.outputs.iter().enumerate() {
        let want = &shapes
            .get(k)
            .ok_or_else(|| {
                Decline::new(
                    DeclineReason::Shape,
                    format!("{} has more outputs than parts", node.label()),
                )
            })?
            .1;
        let y = cx.operand(t, out)?;
        if &y != want {
            return Err(Decline::new(
                DeclineReason::Shape,
                format!(
                    "{}: output {k} is declared {y:?}, the op gives {want:?}",
                    node.label()
                ),
            ));
        }
        drafts.push(copy(
            cx,
            node.inputs[0],
            t,
            &y,
            &xs,
            &strides(&y),
            at * xs[axis],
            0,
        )?);
        at += y[axis];
    }
    Ok(drafts)
}

/// Declines nodes whose extra outputs (MaxPool's Indices, LayerNorm's Mean) are used.
fn check_outputs(cx: &Context<'_>, node: &Node) -> Lowered<()> {
    let allowed = match node.op {
        OpKind::LayerNormalization => 3,
        OpKind::Split => usize::MAX,
        _ => 1,
    };
    if node.outputs.len() > allowed {
        return Err(Decline::new(
            DeclineReason::Attribute,
            format!(
                "{} with {} outputs (only the first is computed)",
                node.label(),
                node.outputs.len()
            ),
        ));
    }
    let _ = cx;
    Ok(())
}

/// The first output's shape by the IR's rules.
fn infer(cx: &Context<'_>, node: &Node) -> Lowered<Vec<usize>> {
    let outs = infer_all(cx, node)?;
    Ok(outs.into_iter().next().map(|(_, s)| s).unwrap_or_default())
}

/// Every output's dtype and shape by the IR's rules (constant operands read from the
/// constants).
fn infer_all(cx: &Context<'_>, node: &Node) -> Lowered<Vec<(DType, Vec<usize>)>> {
    let mut inputs = Vec::new();
    for &t in &node.inputs {
        inputs.push((cx.graph.tensors[t].dtype, cx.shape(t)?));
    }
    infer_outputs(node, &inputs, |i| {
        node.inputs.get(i).and_then(|&t| cx.consts.i64s(t))
    })
    .map_err(|e| Decline::new(DeclineReason::Shape, format!("{}: {e}", node.label())))
}

/// Row-major strides of a shape, in elements.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// `v` right-aligned into MAX_RANK slots, `fill` in front.
fn pad6(v: &[usize], fill: usize) -> Vec<u32> {
    let mut out = vec![fill as u32; MAX_RANK - v.len()];
    out.extend(v.iter().map(|&x| x as u32));
    out
}

/// Strides of `shape` broadcast to `out` (0 on broadcast dimensions), right-aligned.
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let s = strides(shape);
    let lead = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < lead || shape[i - lead] == 1 {
                0
            } else {
                s[i - lead]
            }
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn elementwise(
    cx: &Context<'_>,
    op: u32,
    a: TensorId,
    b: Option<TensorId>,
    a_shape: &[usize],
    b_shape: &[usize],
    y: &[usize],
    act: Activation,
    out: TensorId,
) -> Lowered<Draft> {
    let n: usize = y.iter().product();
    let mut p = vec![n as u32, op, act.code, act.a.to_bits(), act.b.to_bits()];
    p.extend(pad6(y, 1));
    p.extend(pad6(&broadcast_strides(a_shape, y), 0));
    p.extend(pad6(&broadcast_strides(b_shape, y), 0));
    let kernel = cx.variant("elementwise", "elementwise_f16", out);
    cx.one_dimensional(kernel, n, [Some(a), b, None, Some(out)], p)
}

#[allow(clippy::too_many_arguments)]
fn copy(
    cx: &Context<'_>,
    src: TensorId,
    dst: TensorId,
    shape: &[usize],
    src_strides: &[usize],
    dst_strides: &[usize],
    src_off: usize,
    dst_off: usize,
) -> Lowered<Draft> {
    let n: usize = shape.iter().product();
    let mut p = vec![n as u32, src_off as u32, dst_off as u32];
    p.extend(pad6(shape, 1));
    p.extend(pad6(src_strides, 0));
    p.extend(pad6(dst_strides, 0));
    let kernel = cx.variant("copy", "copy_f16", dst);
    cx.one_dimensional(kernel, n, [Some(src), None, None, Some(dst)], p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::ir::GraphBuilder;

    fn limits(subgroup: u32, max_invocations: u32) -> Limits {
        Limits {
            subgroup,
            max_invocations,
            float16: true,
            ..Limits::for_tests()
        }
    }

    fn with<T>(l: Limits, f: impl FnOnce(&Context<'_>) -> T) -> T {
        let g = Graph::default();
        let consts = Constants::new(&g, &[]);
        f(&Context {
            graph: &g,
            consts: &consts,
            limits: l,
        })
    }

    #[test]
    fn workgroups_follow_the_device_subgroup_size_and_limits() {
        // lavapipe 8, NVIDIA 32, AMD 64: four subgroups, at least 64 invocations.
        for (sg, want) in [(8, 64), (32, 128), (64, 256)] {
            assert_eq!(
                with(limits(sg, 1024), |cx| cx.group_size("elementwise")),
                Ok(want)
            );
        }
        assert_eq!(
            with(limits(64, 128), |cx| cx.group_size("softmax")),
            Ok(128)
        );
        assert_eq!(with(limits(32, 1024), |cx| cx.tile()), Ok(16));
        assert_eq!(with(limits(32, 128), |cx| cx.tile()), Ok(8));
        assert_eq!(
            with(limits(32, 16), |cx| cx.group_size("copy")).map_err(|d| d.reason),
            Err(DeclineReason::Resource)
        );
    }

    #[test]
    fn dispatches_spill_into_y_past_the_x_limit() {
        let l = Limits {
            max_group_count: [100, 100, 1],
            ..limits(8, 1024)
        };
        assert_eq!(with(l, |cx| cx.spread(250)), Ok([100, 3, 1]));
        assert!(with(l, |cx| cx.spread(100 * 100 + 1)).is_err());
    }

    fn lower_one(op: OpKind, dtype: DType, shape: &[usize], l: Limits) -> Lowered<Vec<Draft>> {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", dtype, shape);
        let y = b.node(op, &[x], &[]).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        let consts = Constants::new(&g, &[]);
        let cx = Context {
            graph: &g,
            consts: &consts,
            limits: l,
        };
        lower(&cx, &g.nodes[0], Activation::default(), y)
    }

    fn decline_of(dtype: DType, shape: &[usize], l: Limits) -> Decline {
        lower_one(OpKind::Relu, dtype, shape, l).unwrap_err()
    }

    #[test]
    fn conv_layer_norm_and_reductions_take_their_f16_variants() {
        for (op, kernel) in [
            (OpKind::ReduceSum, "reduce_f16"),
            (OpKind::ReduceMean, "reduce_f16"),
            (OpKind::ReduceMax, "reduce_f16"),
            (OpKind::ReduceMin, "reduce_f16"),
        ] {
            let d = lower_one(op, DType::F16, &[3, 40], limits(8, 1024)).unwrap();
            assert_eq!(d[0].kernel, kernel, "{op}");
            let sg = Limits {
                subgroups: true,
                ..limits(8, 1024)
            };
            let d = lower_one(op, DType::F16, &[3, 40], sg).unwrap();
            assert_eq!(d[0].kernel, "reduce_sg_f16", "{op}");
        }
        let d = lower_graph(
            OpKind::Conv,
            &[(DType::F16, &[1, 2, 5, 5]), (DType::F16, &[3, 2, 3, 3])],
            &[],
        )
        .unwrap();
        assert_eq!(d[0].kernel, "conv2d_f16");
        let d = lower_graph(
            OpKind::LayerNormalization,
            &[(DType::F16, &[2, 8]), (DType::F16, &[8])],
            &[],
        )
        .unwrap();
        assert_eq!(d[0].kernel, "layernorm_f16");
        // Operands of another dtype than the output are declined, naming the tensor.
        let d = lower_graph(
            OpKind::LayerNormalization,
            &[(DType::F16, &[2, 8]), (DType::F32, &[8])],
            &[],
        );
        assert!(d.is_err());
        // Without f16 shaders they are declined with the device's reason.
        let no_f16 = Limits {
            float16: false,
            ..limits(8, 1024)
        };
        let d = lower_one(OpKind::ReduceSum, DType::F16, &[3, 40], no_f16).unwrap_err();
        assert!(d.message.contains("lacks f16 shaders"), "{}", d.message);
    }

    #[test]
    fn row_kernels_take_their_subgroup_variants_only_where_the_device_has_them() {
        let sg = Limits {
            subgroups: true,
            ..limits(8, 1024)
        };
        for (op, kernel) in [
            (OpKind::Softmax, "softmax"),
            (OpKind::ReduceSum, "reduce"),
            (OpKind::ReduceMax, "reduce"),
            (OpKind::ReduceMin, "reduce"),
        ] {
            let plain = lower_one(op, DType::F32, &[3, 40], limits(8, 1024)).unwrap();
            assert_eq!(plain[0].kernel, kernel, "{op}");
            let with = lower_one(op, DType::F32, &[3, 40], sg).unwrap();
            assert_eq!(with[0].kernel, format!("{kernel}_sg"), "{op}");
            // The same workgroup size either way: the subgroup size is read at run time.
            assert_eq!(with[0].spec, plain[0].spec, "{op}");
        }
        // Kernels with no subgroup variant are unchanged.
        assert_eq!(
            lower_one(OpKind::Relu, DType::F32, &[5], sg).unwrap()[0].kernel,
            "elementwise"
        );
    }

    #[test]
    fn buffers_over_max_storage_buffer_range_are_declined_with_that_reason() {
        let d = decline_of(DType::F32, &[(128 << 20) / 4 + 1], limits(8, 1024));
        assert_eq!(d.reason, DeclineReason::Resource);
        assert!(d.message.contains("maxStorageBufferRange"), "{}", d.message);
    }

    #[test]
    fn f16_is_declined_naming_the_device_feature() {
        // Pad has no f16 kernel: the reason says the device could, the op cannot.
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F16, &[4]);
        let pads = b.constant_i64("pads", &[2], &[1, 1]);
        let y = b.node(OpKind::Pad, &[x, pads], &[]).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        let consts = Constants::new(&g, &[]);
        let cx = Context {
            graph: &g,
            consts: &consts,
            limits: limits(8, 1024),
        };
        let d = lower(&cx, &g.nodes[0], Activation::default(), y).unwrap_err();
        assert_eq!(d.reason, DeclineReason::DType);
        assert!(d.message.contains("f32 kernels only"), "{}", d.message);
        let no_f16 = Limits {
            float16: false,
            ..limits(8, 1024)
        };
        let d = decline_of(DType::F16, &[4], no_f16);
        assert_eq!(d.reason, DeclineReason::DType);
        assert!(d.message.contains("lacks f16 shaders"), "{}", d.message);
        assert!(d.message.contains("shaderFloat16"), "{}", d.message);
        assert!(d.message.contains("SHADER_F16"), "{}", d.message);
    }

    /// Lowers the one node of a graph over inputs of the given dtypes and shapes.
    fn lower_graph(
        op: OpKind,
        ins: &[(DType, &[usize])],
        attrs: &[(&str, baton_delegate_api::Attr)],
    ) -> Lowered<Vec<Draft>> {
        let mut b = GraphBuilder::new("g");
        let xs: Vec<TensorId> = ins
            .iter()
            .enumerate()
            .map(|(i, (d, s))| b.input_fixed(&format!("x{i}"), *d, s))
            .collect();
        let y = b.node(op, &xs, attrs).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        let consts = Constants::new(&g, &[]);
        let cx = Context {
            graph: &g,
            consts: &consts,
            limits: limits(8, 1024),
        };
        lower(&cx, &g.nodes[0], Activation::default(), y)
    }

    fn to(d: DType) -> [(&'static str, baton_delegate_api::Attr); 1] {
        [("to", baton_delegate_api::Attr::Int(d.onnx_code()))]
    }

    #[test]
    fn casts_name_both_element_codes_and_write_bool_a_word_at_a_time() {
        let d = lower_graph(OpKind::Cast, &[(DType::F32, &[3, 11])], &to(DType::I64)).unwrap();
        assert_eq!(d[0].kernel, "cast");
        assert_eq!(d[0].params, vec![33, 0, 2]);
        // 33 bools are 9 words: one workgroup of 64 invocations covers them.
        let d = lower_graph(OpKind::Cast, &[(DType::I64, &[33])], &to(DType::Bool)).unwrap();
        assert_eq!(d[0].params, vec![33, 2, 3]);
        assert_eq!(d[0].groups, [1, 1, 1]);
        let d = lower_graph(OpKind::Cast, &[(DType::I32, &[130])], &to(DType::F32)).unwrap();
        assert_eq!(d[0].groups, [3, 1, 1]);
        let d = lower_graph(OpKind::Cast, &[(DType::F16, &[4])], &to(DType::F32)).unwrap_err();
        assert_eq!(d.reason, DeclineReason::DType);
        assert!(d.message.contains("'x0' is f16"), "{}", d.message);
        let d = lower_graph(OpKind::Cast, &[(DType::F32, &[4])], &to(DType::U8)).unwrap_err();
        assert_eq!(d.reason, DeclineReason::DType);
    }

    #[test]
    fn comparisons_broadcast_by_strides_into_bool() {
        let d = lower_graph(
            OpKind::LessOrEqual,
            &[(DType::I64, &[2, 1]), (DType::I64, &[1, 3])],
            &[],
        )
        .unwrap();
        assert_eq!(d[0].kernel, "compare");
        let p = &d[0].params;
        assert_eq!(p[..3], [6, 4, 2]);
        assert_eq!(p[3..9], [1, 1, 1, 1, 2, 3]);
        assert_eq!(p[9..15], [0, 0, 0, 0, 1, 0]);
        assert_eq!(p[15..21], [0, 0, 0, 0, 0, 1]);
        let bools = [(DType::Bool, &[4][..]), (DType::Bool, &[4][..])];
        assert!(lower_graph(OpKind::Equal, &bools, &[]).is_ok());
        let d = lower_graph(OpKind::Less, &bools, &[]).unwrap_err();
        assert_eq!(d.reason, DeclineReason::DType);
        let d = lower_graph(
            OpKind::Greater,
            &[(DType::I8, &[4]), (DType::I8, &[4])],
            &[],
        )
        .unwrap_err();
        assert!(d.message.contains("is i8"), "{}", d.message);
    }

    #[test]
    fn where_selects_words_of_its_values_dtype() {
        let ins = [
            (DType::Bool, &[2, 1, 3][..]),
            (DType::I64, &[4, 1][..]),
            (DType::I64, &[3][..]),
        ];
        let d = lower_graph(OpKind::Where, &ins, &[]).unwrap();
        assert_eq!(d[0].kernel, "select");
        let p = &d[0].params;
        assert_eq!(p[..2], [24, 2]);
        assert_eq!(p[2..8], [1, 1, 1, 2, 4, 3]);
        assert_eq!(p[8..14], [0, 0, 0, 3, 0, 1]);
        assert_eq!(p[14..20], [0, 0, 0, 0, 1, 0]);
        assert_eq!(p[20..26], [0, 0, 0, 0, 0, 1]);
        let f32s = [
            (DType::Bool, &[5][..]),
            (DType::F32, &[5][..]),
            (DType::F32, &[][..]),
        ];
        assert_eq!(
            lower_graph(OpKind::Where, &f32s, &[]).unwrap()[0].params[1],
            1
        );
        let bools = [
            (DType::Bool, &[5][..]),
            (DType::Bool, &[5][..]),
            (DType::Bool, &[5][..]),
        ];
        let d = lower_graph(OpKind::Where, &bools, &[]).unwrap_err();
        assert_eq!(d.reason, DeclineReason::DType);
    }

    #[test]
    fn gather_views_its_output_as_outer_indices_inner() {
        let axis = [("axis", baton_delegate_api::Attr::Int(1))];
        let ins = [(DType::F32, &[3, 4, 5][..]), (DType::I64, &[2, 2][..])];
        let d = lower_graph(OpKind::Gather, &ins, &axis).unwrap();
        assert_eq!(d[0].kernel, "gather");
        assert_eq!(d[0].params, vec![60, 5, 4, 4, 1, 2]);
        let ins = [(DType::I64, &[3, 4][..]), (DType::I32, &[2][..])];
        assert_eq!(
            lower_graph(OpKind::Gather, &ins, &[]).unwrap()[0].params,
            vec![8, 4, 2, 3, 2, 1]
        );
        let ins = [(DType::Bool, &[3, 4][..]), (DType::I32, &[2][..])];
        let d = lower_graph(OpKind::Gather, &ins, &[]).unwrap_err();
        assert_eq!(d.reason, DeclineReason::DType);
    }

    #[test]
    fn batch_norm_folds_its_constants_into_a_scale_and_shift_per_channel() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 2, 3]);
        // Channel 0: s = 2 / sqrt(3 + 1) = 1, t = 1 - 0.5 * 1 = 0.5; channel 1:
        // s = -1 / sqrt(0 + 1) = -1, t = 0 - 2 * -1 = 2.
        let scale = b.constant_f32("scale", &[2], &[2.0, -1.0]);
        let bias = b.constant_f32("bias", &[2], &[1.0, 0.0]);
        let mean = b.constant_f32("mean", &[2], &[0.5, 2.0]);
        let var = b.constant_f32("var", &[2], &[3.0, 0.0]);
        let eps = [("epsilon", baton_delegate_api::Attr::Float(1.0))];
        let y = b
            .node(
                OpKind::BatchNormalization,
                &[x, scale, bias, mean, var],
                &eps,
            )
            .unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        let consts = Constants::new(&g, &[]);
        let cx = Context {
            graph: &g,
            consts: &consts,
            limits: limits(8, 1024),
        };
        let d = lower(&cx, &g.nodes[0], Activation::default(), y).unwrap();
        let (slot, bytes) = d[0].made[0].clone();
        assert_eq!(slot, 1);
        let st: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(st, [1.0, 0.5, -1.0, 2.0]);
        // (s, t) of channel c at 2c: stride 2 on dimension 1 of [2, 2, 3].
        assert_eq!(d[0].params[1], 6);
        assert_eq!(d[0].params[17..23], [0, 0, 0, 0, 2, 0]);
    }

    #[test]
    fn f16_elementwise_picks_the_f16_variant_and_sizes_by_two_bytes() {
        let drafts = lower_one(OpKind::Relu, DType::F16, &[5], limits(8, 1024)).unwrap();
        assert_eq!(drafts[0].kernel, "elementwise_f16");
        // Just under maxStorageBufferRange in f16 bytes, though over it in f32 bytes.
        let n = (128 << 20) / 2;
        assert!(lower_one(OpKind::Relu, DType::F16, &[n], limits(8, 1024)).is_ok());
    }
}
