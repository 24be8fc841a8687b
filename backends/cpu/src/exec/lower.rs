//! Lowering at init: a checked subgraph and its fusion plan become prepared steps, with
//! weights packed and every buffer allocated.

use std::borrow::Cow;

use baton_delegate_api::ir::{Graph, Node, OpKind, TensorId};
use baton_delegate_api::shape::{normalize_axis, transpose_perm, ConvGeometry, PoolGeometry};
use baton_delegate_api::{Constants, DType, DelegateError};

use super::{CpuExecutable, IoDecl, Op, Step};
use crate::fusion::{fused_add_operand, matrix_view, FusionPlan, Role};
use crate::gemm::{GemmScratch, MicroKernel};
use crate::ops::conv::ConvOp;
use crate::ops::elementwise::{Binary, BinaryOp, SoftmaxOp, Unary, UnaryOp};
use crate::ops::layout::{ConcatOp, TransposeOp};
use crate::ops::matmul::MatMulOp;
use crate::ops::pool::{GlobalAveragePoolOp, PoolKind, PoolOp};
use crate::ops::{f32_view, EpOpSpec, EpilogueSpec, Operand, RunCtx, Src};
use crate::support::clip_bounds;

/// Builds the executable of `graph`, whose nodes have all been checked as supported and
/// whose plan has been validated.
pub(crate) fn build(
    graph: &Graph,
    plan: &FusionPlan,
    consts: Constants<'_>,
    kernel: &'static MicroKernel,
) -> Result<CpuExecutable, DelegateError> {
    let mut b = Builder {
        graph,
        consts,
        kernel,
        srcs: vec![None; graph.tensors.len()],
        slots: Vec::new(),
    };
    let mut inputs = Vec::with_capacity(graph.inputs.len());
    for (i, &t) in graph.inputs.iter().enumerate() {
        inputs.push(b.decl(t)?);
        b.srcs[t] = Some(Src::Input(i));
    }
    let roles = plan.roles(graph.nodes.len());
    let mut steps = Vec::with_capacity(graph.nodes.len());
    for (id, node) in graph.nodes.iter().enumerate() {
        let (op, last) = match roles[id] {
            Role::Absorbed => continue,
            Role::Plain => (b.lower(node, Vec::new()), id),
            Role::Anchor(c) => {
                let chain = plan.chains[c];
                let fused = b.fused_ops(node, chain.add, chain.activation);
                (fused.and_then(|f| b.lower(node, f)), chain.last())
            }
        };
        let op = op.map_err(|e| DelegateError::invalid(format!("node {}: {e}", node.label())))?;
        let out = b.output(graph.nodes[last].outputs[0])?;
        steps.push(Step { op, out });
    }
    let mut outputs = Vec::with_capacity(graph.outputs.len());
    for &t in &graph.outputs {
        let decl = b.decl(t)?;
        if decl.dtype != DType::F32 {
            return Err(DelegateError::invalid(format!(
                "output '{}' is {}, not f32",
                decl.name, decl.dtype
            )));
        }
        let src = b.src(t).map_err(DelegateError::invalid)?;
        outputs.push((decl, src));
    }
    let mut ctx = RunCtx {
        kernel,
        gemm: GemmScratch::default(),
        im2col: Vec::new(),
        depthwise: Vec::new(),
    };
    for step in &steps {
        match &step.op {
            Op::MatMul(op) => op.reserve(&mut ctx),
            Op::Conv(op) => op.reserve(&mut ctx),
            _ => {}
        }
    }
    Ok(CpuExecutable {
        inputs,
        outputs,
        steps,
        slots: b.slots,
        ctx,
    })
}

struct Builder<'g> {
    graph: &'g Graph,
    consts: Constants<'g>,
    kernel: &'static MicroKernel,
    /// Where each tensor is found at execute time, once known.
    srcs: Vec<Option<Src>>,
    slots: Vec<Vec<f32>>,
}

impl<'g> Builder<'g> {
    fn shape(&self, t: TensorId) -> Vec<usize> {
        self.graph.tensors[t].static_shape().unwrap_or_default()
    }

    fn decl(&self, t: TensorId) -> Result<IoDecl, DelegateError> {
        let d = &self.graph.tensors[t];
        let shape = d.static_shape().ok_or_else(|| {
            DelegateError::invalid(format!("tensor '{}' has a symbolic shape", d.name))
        })?;
        Ok(IoDecl {
            name: d.name.clone(),
            dtype: d.dtype,
            shape,
        })
    }

    /// A constant's values (borrowed when aligned, else copied).
    fn const_f32(&self, t: TensorId) -> Option<Cow<'g, [f32]>> {
        if !self.graph.tensors[t].is_const() {
            return None;
        }
        let bytes = self.consts.bytes(t)?;
        Some(match f32_view(bytes) {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(bytemuck::pod_collect_to_vec(bytes)),
        })
    }

    /// `t` as an operand an op may pack: its constant values, or where to read it.
    fn operand(&mut self, t: TensorId) -> Result<Operand<'g>, String> {
        match self.const_f32(t) {
            Some(data) => Ok(Operand::Const(data)),
            None => Ok(Operand::Runtime(self.src(t)?)),
        }
    }

    /// Where `t` is read from at execute time; a constant is copied into a slot the first
    /// time it is asked for.
    fn src(&mut self, t: TensorId) -> Result<Src, String> {
        if let Some(s) = self.srcs[t] {
            return Ok(s);
        }
        let name = &self.graph.tensors[t].name;
        let data = self
            .const_f32(t)
            .ok_or_else(|| format!("tensor '{name}' is read before it is written"))?;
        let slot = self.slots.len();
        self.slots.push(data.into_owned());
        self.srcs[t] = Some(Src::Slot(slot));
        Ok(Src::Slot(slot))
    }

    /// A new zeroed buffer for the output tensor `t`.
    fn output(&mut self, t: TensorId) -> Result<usize, DelegateError> {
        let len: usize = self.shape(t).iter().product();
        let mut buf = Vec::new();
        buf.try_reserve_exact(len).map_err(|_| {
            DelegateError::new(format!(
                "cannot allocate {len} floats for tensor '{}'",
                self.graph.tensors[t].name
            ))
        })?;
        buf.resize(len, 0.0);
        let slot = self.slots.len();
        self.slots.push(buf);
        self.srcs[t] = Some(Src::Slot(slot));
        Ok(slot)
    }

    /// The epilogue ops of a chain's fused Add and activation.
    fn fused_ops(
        &mut self,
        anchor: &Node,
        add: Option<usize>,
        activation: Option<usize>,
    ) -> Result<Vec<EpOpSpec>, String> {
        let mut ops = Vec::new();
        if let Some(add) = add {
            let add = &self.graph.nodes[add];
            let (c, rs, cs) = fused_add_operand(self.graph, anchor, add, &self.consts)
                .ok_or("the fused Add does not fit")?;
            let src = self.src(c)?;
            ops.push(EpOpSpec::Add {
                src,
                rs,
                cs,
                scale: 1.0,
            });
        }
        if let Some(act) = activation {
            ops.push(match self.activation(&self.graph.nodes[act])? {
                Unary::Relu => EpOpSpec::Relu,
                Unary::Clip { min, max } => EpOpSpec::Clip { min, max },
                other => return Err(format!("{other:?} cannot be fused")),
            });
        }
        Ok(ops)
    }

    fn activation(&self, node: &Node) -> Result<Unary, String> {
        Ok(match node.op {
            OpKind::Relu => Unary::Relu,
            OpKind::Sigmoid => Unary::Sigmoid,
            OpKind::Tanh => Unary::Tanh,
            _ => {
                let (min, max) = clip_bounds(self.graph, node, &self.consts)
                    .map_err(|_| "Clip bounds are not constant".to_string())?;
                Unary::Clip { min, max }
            }
        })
    }

    /// Prepares one node, with `fused` ops appended to its epilogue.
    fn lower(&mut self, node: &Node, fused: Vec<EpOpSpec>) -> Result<Op, String> {
        let shapes: Vec<Vec<usize>> = node.inputs.iter().map(|&t| self.shape(t)).collect();
        let out_shape = self.shape(node.outputs[0]);
        let input = |i: usize| node.inputs[i];
        Ok(match node.op {
            OpKind::MatMul => {
                let a = self.src(input(0))?;
                let b = self.operand(input(1))?;
                let epilogue = EpilogueSpec { ops: fused };
                Op::MatMul(MatMulOp::matmul(
                    self.kernel,
                    a,
                    &shapes[0],
                    b,
                    &shapes[1],
                    epilogue,
                ))
            }
            OpKind::Gemm => {
                let a = self.src(input(0))?;
                let b = self.operand(input(1))?;
                // With beta = 0, C is not read at all (as the reference and ONNX Runtime do),
                // so a NaN or Inf in C cannot leak into the result.
                let beta = node.attr_float("beta", 1.0);
                let c = match node.inputs.get(2) {
                    Some(&t) if beta != 0.0 => {
                        let (rs, cs) = matrix_view(&out_shape, &shapes[2])
                            .ok_or("C does not broadcast to [M, N]")?;
                        Some((self.src(t)?, rs, cs, beta))
                    }
                    _ => None,
                };
                Op::MatMul(MatMulOp::gemm(
                    self.kernel,
                    a,
                    &shapes[0],
                    node.attr_int("transA", 0) != 0,
                    b,
                    &shapes[1],
                    node.attr_int("transB", 0) != 0,
                    node.attr_float("alpha", 1.0),
                    c,
                    &fused,
                ))
            }
            OpKind::Conv => {
                let geometry = ConvGeometry::new(node, &shapes[0], &shapes[1])?;
                let x = self.src(input(0))?;
                let w = self.operand(input(1))?;
                let mut epilogue = EpilogueSpec::default();
                if let Some(&bias) = node.inputs.get(2) {
                    let src = self.src(bias)?;
                    epilogue.ops.push(EpOpSpec::Add {
                        src,
                        rs: 1,
                        cs: 0,
                        scale: 1.0,
                    });
                }
                epilogue.ops.extend(fused);
                Op::Conv(ConvOp::new(self.kernel, &geometry, x, w, epilogue))
            }
            OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => {
                let op = match node.op {
                    OpKind::Add => Binary::Add,
                    OpKind::Sub => Binary::Sub,
                    OpKind::Mul => Binary::Mul,
                    _ => Binary::Div,
                };
                let (a, b) = (self.src(input(0))?, self.src(input(1))?);
                Op::Binary(BinaryOp::new(op, a, &shapes[0], b, &shapes[1], &out_shape))
            }
            OpKind::Relu | OpKind::Clip | OpKind::Sigmoid | OpKind::Tanh => Op::Unary(UnaryOp {
                x: self.src(input(0))?,
                f: self.activation(node)?,
            }),
            OpKind::Softmax => {
                let axis = normalize_axis(node.attr_int("axis", -1), shapes[0].len())?;
                Op::Softmax(SoftmaxOp::new(self.src(input(0))?, &shapes[0], axis))
            }
            OpKind::MaxPool | OpKind::AveragePool => {
                let geometry = PoolGeometry::new(node, &shapes[0])?;
                let kind = if node.op == OpKind::MaxPool {
                    PoolKind::Max
                } else {
                    PoolKind::Average {
                        include_pad: geometry.count_include_pad,
                    }
                };
                Op::Pool(PoolOp::new(
                    self.src(input(0))?,
                    kind,
                    &shapes[0],
                    &geometry,
                ))
            }
            OpKind::GlobalAveragePool => Op::GlobalAveragePool(GlobalAveragePoolOp {
                x: self.src(input(0))?,
                planes: shapes[0][..2].iter().product(),
                plane_len: shapes[0][2..].iter().product(),
            }),
            OpKind::Reshape | OpKind::Flatten => Op::Copy(self.src(input(0))?),
            OpKind::Transpose => {
                let perm = transpose_perm(node, shapes[0].len())?;
                Op::Transpose(TransposeOp::new(self.src(input(0))?, &shapes[0], &perm))
            }
            OpKind::Concat => {
                let axis = normalize_axis(node.attr_int("axis", 0), shapes[0].len())?;
                let parts = node
                    .inputs
                    .iter()
                    .zip(&shapes)
                    .map(|(&t, s)| Ok((self.src(t)?, s.clone())))
                    .collect::<Result<Vec<_>, String>>()?;
                Op::Concat(ConcatOp::new(&parts, axis))
            }
            op => return Err(format!("{op} is not implemented by the CPU delegate")),
        })
    }
}
