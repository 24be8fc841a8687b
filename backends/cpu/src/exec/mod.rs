//! The executable: a list of prepared steps over buffers allocated at init.
//!
//! `execute` checks its arguments, runs the steps in order and copies the subgraph outputs
//! into the caller's tensors. It allocates nothing: every intermediate lives in one arena
//! planned at init (`arena.rs`), and every scratch area (run-time weight packing, layout
//! conversion) was sized at init.

mod arena;
mod layout;
mod lower;

pub(crate) use crate::ops::tensor::{reduced_axes, reduced_run};
pub(crate) use lower::{build, grid_sample_modes};

use baton_delegate_api::ir::DType;
use baton_delegate_api::{
    DelegateError, Executable, MemoryUse, ProfileEvent, TensorMut, TensorRef,
};

use crate::ops::affine::AffineOp;
use crate::ops::affine_grid::AffineGridOp;
use crate::ops::attention::{AttentionOp, RotaryOp};
use crate::ops::bits::{BitBinaryOp, BitCastOp, BitNotOp, BitShiftOp};
use crate::ops::bytes::ByteMoveOp;
use crate::ops::causal_conv::CausalConvOp;
use crate::ops::col2im::Col2ImOp;
use crate::ops::conv::ConvOp;
use crate::ops::deconv::DeconvOp;
use crate::ops::deform_conv::DeformConvOp;
use crate::ops::det::DetOp;
use crate::ops::einsum::EinsumOp;
use crate::ops::elementwise::{BinaryOp, PowIntOp, SoftmaxOp, UnaryOp};
use crate::ops::generate::OneHotOp;
use crate::ops::grid_sample::GridSampleOp;
use crate::ops::gru::GruOp;
use crate::ops::index::{CumSumOp, GatherElementsOp, HardmaxOp, TopKOp, TriluOp};
use crate::ops::int::{CastOp, IntBinaryOp, IntReduceOp, IntUnaryOp};
use crate::ops::layout::{ConcatOp, TransposeOp};
use crate::ops::linear_attention::LinearAttentionOp;
use crate::ops::lstm::LstmOp;
use crate::ops::matmul::MatMulOp;
use crate::ops::max_unpool::MaxUnpoolOp;
use crate::ops::norm::LayerNormOp;
use crate::ops::pad::PadOp;
use crate::ops::pool::{GlobalAveragePoolOp, PoolOp};
use crate::ops::quant::integer::IntProductOp;
use crate::ops::quant::linear::QLinearOp;
use crate::ops::quant::{
    ByteInputOp, DequantizeOp, QBinaryOp, QConcatOp, QGatherOp, QLutOp, QMaxPoolOp, QuantizeOp,
};
use crate::ops::reduce::{ArgOp, FloatReduceOp};
use crate::ops::resize::LinearResizeOp;
use crate::ops::rnn::RnnOp;
use crate::ops::roi_align::RoiAlignOp;
use crate::ops::scatter::{GatherNdOp, ScatterOp};
use crate::ops::select::{narrow_bools, BoolInputOp, IntCompareOp, WhereOp};
use crate::ops::sequence::{ReverseSequenceOp, TensorScatterOp};
use crate::ops::spectral::{DftOp, StftOp};
use crate::ops::tensor::{GatherOp, ReduceMeanOp, SliceOp, SplitOp};
use crate::ops::window::MelOp;
use crate::ops::{f32_view_mut, RunCtx, Slot, Sources, Src};

/// An initialised partition of the CPU delegate.
#[derive(Debug)]
pub struct CpuExecutable {
    inputs: Vec<IoDecl>,
    outputs: Vec<(IoDecl, Src)>,
    steps: Vec<Step>,
    /// Intermediate tensors (ranges of `arena`) and the constants kept unpacked, by slot.
    slots: Vec<Slot>,
    /// Every intermediate, placed by lifetime.
    arena: Vec<f32>,
    /// The peak-live size of the intermediates in floats: the least any arena could be.
    arena_lower_bound: usize,
    ctx: RunCtx,
    /// Wall-clock nanoseconds of each step in the last run (for `profile`), sized at init
    /// so that timing allocates nothing.
    step_ns: Vec<u64>,
    /// Bytes of packed weights and unpacked constants this executable allocated, and
    /// bytes it reads in place from a retained blob or constants (see `prepack.rs`).
    panel_bytes: (usize, usize),
    /// A value-dependent node run alone with bounded outputs (then nothing above is used
    /// but `inputs`).
    dynamic: Option<Box<crate::ops::dynamic::DynamicNode>>,
    /// Per output: a step writes it in place (see [`Step::direct`]), so it is not copied.
    written_by_step: Vec<bool>,
}

/// The slots of an executable and the arena behind them, as planned by `lower.rs`.
#[derive(Debug)]
struct Memory {
    slots: Vec<Slot>,
    arena: Vec<f32>,
    lower_bound: usize,
}

/// A subgraph input or output as declared.
#[derive(Clone, Debug)]
struct IoDecl {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
}

/// One prepared op, the slot it writes (all its outputs, for a multi-output op) and the
/// node it came from, for errors.
#[derive(Debug)]
struct Step {
    op: Op,
    out: usize,
    node: String,
    /// The subgraph output (an f32 one) this step writes straight into the caller's
    /// buffer instead of its slot, when no later step reads the slot: a large output
    /// (a segmentation map, a detector's features) was otherwise written to the arena and
    /// copied once more.
    direct: Option<usize>,
}

/// The prepared ops.
#[derive(Debug)]
enum Op {
    MatMul(MatMulOp),
    Conv(ConvOp),
    Pool(PoolOp),
    GlobalAveragePool(GlobalAveragePoolOp),
    Unary(UnaryOp),
    Binary(BinaryOp),
    Softmax(SoftmaxOp),
    Transpose(TransposeOp),
    Concat(ConcatOp),
    ReduceMean(ReduceMeanOp),
    LayerNorm(LayerNormOp),
    Gather(GatherOp),
    Slice(SliceOp),
    Split(SplitOp),
    Lstm(LstmOp),
    Quantize(QuantizeOp),
    Dequantize(DequantizeOp),
    /// An 8-bit subgraph input copied into the arena as stored bytes.
    ByteInput(ByteInputOp),
    /// The integer op of a QDQ group.
    QLinear(QLinearOp),
    /// A QDQ Add or Mul of two int8 tensors.
    QBinary(QBinaryOp),
    QLut(QLutOp),
    QMaxPool(QMaxPoolOp),
    QConcat(QConcatOp),
    QGather(QGatherOp),
    /// MatMulInteger or ConvInteger: exact i32 on the int8 kernels.
    IntProduct(IntProductOp),
    Where(WhereOp),
    IntCompare(IntCompareOp),
    /// Integer Add, Sub, Mul or Div (i32 or i64).
    IntBinary(IntBinaryOp),
    /// A Cast that changes what is held (the others are views).
    Cast(CastOp),
    /// Relu, Clip, Neg or Abs of an integer tensor.
    IntUnary(IntUnaryOp),
    /// A reduction of an i32 or i64 tensor.
    IntReduce(IntReduceOp),
    /// A float reduction other than the fast contiguous Mean, Sum and Max.
    FloatReduce(FloatReduceOp),
    /// ArgMax or ArgMin.
    Arg(ArgOp),
    Trilu(TriluOp),
    CumSum(CumSumOp),
    Hardmax(HardmaxOp),
    /// TopK's values and positions, in one buffer.
    TopK(TopKOp),
    GatherElements(GatherElementsOp),
    GatherNd(GatherNdOp),
    /// Pow of an f32 base by an integer exponent.
    PowInt(PowIntOp),
    /// ScatterElements or ScatterND.
    Scatter(ScatterOp),
    /// Data movement of an 8-bit tensor (stored bytes).
    ByteMove(ByteMoveOp),
    /// A bool subgraph input widened to 0.0/1.0.
    BoolInput(BoolInputOp),
    /// BatchNormalization not folded into a convolution.
    Affine(AffineOp),
    /// Pad, and nearest Resize (both gathers with one index map per axis).
    Pad(PadOp),
    LinearResize(LinearResizeOp),
    Deconv(DeconvOp),
    Gru(GruOp),
    Rnn(RnnOp),
    /// BitwiseAnd, BitwiseOr or BitwiseXor.
    BitBinary(BitBinaryOp),
    BitNot(BitNotOp),
    BitShift(BitShiftOp),
    /// A BitCast that changes what is held (the others are views).
    BitCast(BitCastOp),
    OneHot(OneHotOp),
    /// Attention's outputs (`Y`, the present keys and values, the scores) in one buffer.
    Attention(AttentionOp),
    Rotary(RotaryOp),
    Einsum(EinsumOp),
    GridSample(GridSampleOp),
    ReverseSequence(ReverseSequenceOp),
    TensorScatter(TensorScatterOp),
    /// CausalConvWithState's output and present state, in one buffer.
    CausalConv(CausalConvOp),
    AffineGrid(AffineGridOp),
    Det(DetOp),
    MaxUnpool(MaxUnpoolOp),
    Col2Im(Col2ImOp),
    Dft(DftOp),
    Stft(StftOp),
    MelWeightMatrix(MelOp),
    RoiAlign(RoiAlignOp),
    /// LinearAttention's output and present state, in one buffer.
    LinearAttention(LinearAttentionOp),
    DeformConv(DeformConvOp),
    /// A ReduceMean over no axis: the data is unchanged. (Reshape, Flatten, Squeeze and
    /// Unsqueeze need no step at all: their output is a view of their input.)
    Copy(Src),
}

impl Op {
    /// Bytes the op allocated at init beyond the packings and constants `Packs` tallies.
    /// The ops not listed hold only shape-sized vectors (dims, strides, axes).
    fn owned_bytes(&self) -> usize {
        match self {
            Op::Conv(op) => op.owned_bytes(),
            Op::QLinear(op) => op.owned_bytes(),
            Op::IntProduct(op) => op.owned_bytes(),
            Op::AffineGrid(op) => op.owned_bytes(),
            Op::Col2Im(op) => op.owned_bytes(),
            Op::Dft(op) => op.owned_bytes(),
            Op::Stft(op) => op.owned_bytes(),
            Op::DeformConv(op) => op.owned_bytes(),
            Op::Lstm(op) => op.owned_bytes(),
            Op::Gru(op) => op.owned_bytes(),
            Op::Rnn(op) => op.owned_bytes(),
            Op::Deconv(op) => op.owned_bytes(),
            Op::Affine(op) => op.owned_bytes(),
            Op::Pad(op) => op.owned_bytes(),
            Op::LinearResize(op) => op.owned_bytes(),
            Op::LayerNorm(op) => op.owned_bytes(),
            Op::FloatReduce(op) => op.layout.owned_bytes(),
            Op::IntReduce(op) => op.layout.owned_bytes(),
            _ => 0,
        }
    }

    /// The kernel family, for profile events.
    fn kind(&self) -> &'static str {
        match self {
            Op::MatMul(_) => "GEMM",
            Op::Conv(_) => "CONV",
            Op::Pool(_) | Op::GlobalAveragePool(_) | Op::QMaxPool(_) => "POOL",
            Op::Unary(_) | Op::Binary(_) | Op::PowInt(_) => "ELEMENTWISE",
            Op::Softmax(_) => "SOFTMAX",
            Op::Transpose(_) | Op::Concat(_) | Op::QConcat(_) | Op::Copy(_) => "LAYOUT",
            Op::QGather(_) => "RESIZE",
            Op::ReduceMean(_) => "REDUCE",
            Op::LayerNorm(_) => "NORM",
            Op::Gather(_) | Op::Slice(_) | Op::Split(_) => "INDEX",
            Op::Lstm(_) => "LSTM",
            Op::Quantize(_) | Op::Dequantize(_) | Op::ByteInput(_) => "QUANT",
            Op::QLinear(_) | Op::IntProduct(_) => "QGEMM",
            Op::QBinary(_) | Op::QLut(_) => "ELEMENTWISE",
            Op::Where(_) | Op::BoolInput(_) | Op::Affine(_) | Op::IntCompare(_) => "ELEMENTWISE",
            Op::IntBinary(_) | Op::Cast(_) | Op::IntUnary(_) => "ELEMENTWISE",
            Op::IntReduce(_) | Op::FloatReduce(_) | Op::Arg(_) => "REDUCE",
            Op::CumSum(_) | Op::Hardmax(_) | Op::TopK(_) => "REDUCE",
            Op::Trilu(_) | Op::GatherElements(_) | Op::GatherNd(_) | Op::Scatter(_) => "INDEX",
            Op::Pad(_) | Op::ByteMove(_) => "LAYOUT",
            Op::LinearResize(_) => "RESIZE",
            Op::Deconv(_) => "CONV",
            Op::Gru(_) | Op::Rnn(_) => "LSTM",
            Op::BitBinary(_) | Op::BitNot(_) | Op::BitShift(_) | Op::BitCast(_) => "ELEMENTWISE",
            Op::OneHot(_) => "INDEX",
            Op::Attention(_) => "ATTENTION",
            Op::Rotary(_) => "ELEMENTWISE",
            Op::Einsum(_) => "GEMM",
            Op::GridSample(_) => "RESIZE",
            Op::ReverseSequence(_) | Op::TensorScatter(_) => "LAYOUT",
            Op::CausalConv(_) => "CONV",
            Op::AffineGrid(_) => "RESIZE",
            Op::Det(_) => "GEMM",
            Op::MaxUnpool(_) => "INDEX",
            Op::Col2Im(_) => "CONV",
            Op::Dft(_) | Op::Stft(_) => "FFT",
            Op::MelWeightMatrix(_) => "ELEMENTWISE",
            Op::RoiAlign(_) => "RESIZE",
            Op::LinearAttention(_) => "ATTENTION",
            Op::DeformConv(_) => "CONV",
        }
    }

    /// Runs the op. Only data-dependent failures (a Gather index out of range) are errors.
    fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) -> Result<(), String> {
        match self {
            Op::Gather(op) => return op.run(sources, out),
            Op::MatMul(op) => op.run(sources, out, ctx),
            Op::Conv(op) => op.run(sources, out, ctx),
            Op::Pool(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::GlobalAveragePool(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::Unary(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::Binary(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::Softmax(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::Transpose(op) => op.run(sources, out, &ctx.pool),
            Op::Concat(op) => op.run(sources, out, &ctx.pool),
            Op::ReduceMean(op) => op.run(sources, out, ctx),
            Op::LayerNorm(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::Slice(op) => op.run(sources, out),
            Op::Split(op) => op.run(sources, out),
            Op::Lstm(op) => return op.run(sources, out, ctx),
            Op::Quantize(op) => op.run(
                sources,
                bytemuck::cast_slice_mut(out),
                ctx.kernel.isa(),
                &ctx.pool,
            ),
            Op::Dequantize(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::ByteInput(op) => op.run(sources, bytemuck::cast_slice_mut(out)),
            Op::QLinear(op) => op.run(sources, bytemuck::cast_slice_mut(out), ctx),
            Op::IntProduct(op) => op.run(sources, bytemuck::cast_slice_mut(out), ctx),
            Op::QBinary(op) => op.run(
                sources,
                bytemuck::cast_slice_mut(out),
                ctx.kernel.isa(),
                &ctx.pool,
            ),
            Op::QLut(op) => op.run(
                sources,
                bytemuck::cast_slice_mut(out),
                ctx.kernel.isa(),
                &ctx.pool,
            ),
            Op::QGather(op) => op.run(sources, bytemuck::cast_slice_mut(out)),
            Op::QConcat(op) => op.run(
                sources,
                bytemuck::cast_slice_mut(out),
                ctx.kernel.isa(),
                &ctx.pool,
            ),
            Op::QMaxPool(op) => op.run(
                sources,
                bytemuck::cast_slice_mut(out),
                ctx.kernel.isa(),
                &ctx.pool,
            ),
            Op::Copy(src) => out.copy_from_slice(sources.get(*src)),
            Op::Where(op) => op.run(sources, out, ctx.kernel.isa()),
            Op::IntCompare(op) => op.run(sources, out),
            Op::IntBinary(op) => return op.run(sources, out, ctx.kernel.isa()),
            Op::Cast(op) => op.run(sources, out),
            Op::IntUnary(op) => op.run(sources, out),
            Op::IntReduce(op) => return op.run(sources, out),
            Op::FloatReduce(op) => op.run(sources, out, ctx),
            Op::Arg(op) => op.run(sources, out),
            Op::Trilu(op) => op.run(sources, out),
            Op::CumSum(op) => op.run(sources, out, ctx),
            Op::Hardmax(op) => op.run(sources, out),
            Op::TopK(op) => op.run(sources, out, ctx),
            Op::GatherElements(op) => return op.run(sources, out),
            Op::GatherNd(op) => return op.run(sources, out),
            Op::PowInt(op) => op.run(sources, out),
            Op::Scatter(op) => return op.run(sources, out, ctx),
            Op::ByteMove(op) => return op.run(sources, out),
            Op::BoolInput(op) => op.run(sources, out),
            Op::Affine(op) => op.run(sources, out, ctx),
            Op::Pad(op) => op.run(sources, out),
            Op::LinearResize(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::Deconv(op) => op.run(sources, out, ctx),
            Op::Gru(op) => return op.run(sources, out, ctx),
            Op::Rnn(op) => return op.run(sources, out, ctx),
            Op::BitBinary(op) => op.run(sources, out),
            Op::BitNot(op) => op.run(sources, out),
            Op::BitShift(op) => op.run(sources, out),
            Op::BitCast(op) => return op.run(sources, out),
            Op::OneHot(op) => op.run(sources, out),
            Op::Attention(op) => return op.run(sources, out, ctx),
            Op::Rotary(op) => return op.run(sources, out),
            Op::Einsum(op) => op.run(sources, out, ctx),
            Op::GridSample(op) => op.run(sources, out),
            Op::ReverseSequence(op) => return op.run(sources, out),
            Op::TensorScatter(op) => return op.run(sources, out, &ctx.pool),
            Op::CausalConv(op) => op.run(sources, out, ctx.kernel.isa(), &ctx.pool),
            Op::AffineGrid(op) => op.run(sources, out),
            Op::Det(op) => op.run(sources, out, ctx),
            Op::MaxUnpool(op) => return op.run(sources, out),
            Op::Col2Im(op) => op.run(sources, out, ctx),
            Op::Dft(op) => op.run(sources, out, ctx),
            Op::Stft(op) => op.run(sources, out, ctx),
            Op::MelWeightMatrix(op) => return op.run(sources, out),
            Op::RoiAlign(op) => return op.run(sources, out, &ctx.pool),
            Op::LinearAttention(op) => op.run(sources, out, ctx),
            Op::DeformConv(op) => op.run(sources, out, ctx),
        }
        Ok(())
    }
}

impl Executable for CpuExecutable {
    fn execute(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        self.check_inputs(inputs)?;
        if let Some(node) = &self.dynamic {
            return node.execute(inputs, outputs);
        }
        self.check_outputs(outputs)?;
        let base = self.arena.as_mut_ptr();
        for (step, ns) in self.steps.iter().zip(&mut self.step_ns) {
            let t0 = std::time::Instant::now();
            let Slot::Arena { offset, len } = self.slots[step.out] else {
                unreachable!("a step writes a constant slot");
            };
            // SAFETY: the plan put the step's output and every range it reads in the arena,
            // disjoint from each other (see `arena.rs`); nothing else touches the arena
            // until the step returns.
            let (slot, sources) = unsafe {
                (
                    std::slice::from_raw_parts_mut(base.add(offset), len),
                    Sources::new(inputs, &self.slots, base, (offset, len)),
                )
            };
            let out = match step.direct {
                // `check_outputs` made sure the buffer is aligned and of the slot's size.
                Some(k) => f32_view_mut(&mut outputs[k].data[..])
                    .filter(|d| d.len() == len)
                    .ok_or_else(|| DelegateError::new(format!("output {k}: buffer size")))?,
                None => slot,
            };
            let result = step.op.run(&sources, out, &mut self.ctx);
            *ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            result.map_err(|e| DelegateError::new(format!("node {}: {e}", step.node)))?;
        }
        // SAFETY: no step runs; the arena is only read.
        let sources = unsafe { Sources::new(inputs, &self.slots, base, (0, 0)) };
        for ((tensor, (decl, src)), &done) in outputs
            .iter_mut()
            .zip(&self.outputs)
            .zip(&self.written_by_step)
        {
            if done {
                continue;
            }
            match decl.dtype {
                // 8-bit outputs are stored bytes, NCHW; an i8 one is biased by 128.
                DType::I8 | DType::U8 => {
                    let flip = if decl.dtype == DType::I8 { 0x80 } else { 0 };
                    for (d, &v) in tensor.data.iter_mut().zip(sources.bytes(*src)) {
                        *d = v ^ flip;
                    }
                }
                DType::Bool => narrow_bools(sources.get(*src), tensor.data),
                // Held as its 2-byte elements, then slack.
                DType::F16 | DType::I16 | DType::U16 => {
                    let n = tensor.data.len();
                    tensor.data.copy_from_slice(&sources.bytes(*src)[..n]);
                }
                _ => {
                    if let Some(dst) = f32_view_mut(&mut tensor.data[..]) {
                        dst.copy_from_slice(sources.get(*src));
                    }
                }
            }
        }
        Ok(())
    }

    /// One event per step of the last run: the node (the first of a fused chain or QDQ
    /// group), the kind of kernel that ran, and its wall-clock time. Layout conversions
    /// at partition boundaries are inside their convolution's time.
    fn profile(&self) -> Vec<ProfileEvent> {
        self.steps
            .iter()
            .zip(&self.step_ns)
            .map(|(step, &ns)| ProfileEvent {
                name: step.node.clone(),
                kind: step.op.kind().to_string(),
                cycles: 0,
                wall_ns: ns,
            })
            .collect()
    }

    /// The arena and the run context's work buffers as scratch; packed panels and the
    /// constants kept unpacked as owned or retained, and as owned too every table an op
    /// built at init (convolution indirection and offset tables, int8 requantization
    /// columns, recurrent weights kept unpacked): a mobilenet's indirection tables alone
    /// are a quarter of its weights.
    fn memory(&self) -> Option<MemoryUse> {
        let f = std::mem::size_of::<f32>();
        // Constant slots are counted by the tally, like the packed panels.
        let (owned, retained) = self.panel_bytes;
        let tables: usize = self.steps.iter().map(|s| s.op.owned_bytes()).sum();
        Some(MemoryUse {
            scratch_bytes: (self.arena.capacity() * f + self.ctx.scratch_bytes()) as u64,
            owned_bytes: (owned + tables) as u64,
            retained_bytes: retained as u64,
        })
    }
}

impl CpuExecutable {
    /// Assembles the executable; one timing slot per step.
    fn new(
        inputs: Vec<IoDecl>,
        outputs: Vec<(IoDecl, Src)>,
        steps: Vec<Step>,
        memory: Memory,
        ctx: RunCtx,
    ) -> CpuExecutable {
        let step_ns = vec![0; steps.len()];
        let mut written_by_step = vec![false; outputs.len()];
        for k in steps.iter().filter_map(|s| s.direct) {
            written_by_step[k] = true;
        }
        CpuExecutable {
            inputs,
            outputs,
            steps,
            slots: memory.slots,
            arena: memory.arena,
            arena_lower_bound: memory.lower_bound,
            ctx,
            step_ns,
            panel_bytes: (0, 0),
            dynamic: None,
            written_by_step,
        }
    }

    /// Records what `Packs::tally` counted while lowering (for `memory`).
    pub(crate) fn set_panel_bytes(&mut self, owned: usize, retained: usize) {
        self.panel_bytes = (owned, retained);
    }

    /// The arena's size in bytes, and the least any placement of the same intermediates
    /// could take (their peak-live size).
    pub fn arena_bytes(&self) -> (usize, usize) {
        let f = std::mem::size_of::<f32>();
        (self.arena.len() * f, self.arena_lower_bound * f)
    }

    fn check_inputs(&self, inputs: &[TensorRef<'_>]) -> Result<(), DelegateError> {
        if inputs.len() != self.inputs.len() {
            return Err(DelegateError::invalid(format!(
                "expected {} inputs ({}), got {}",
                self.inputs.len(),
                names(&self.inputs),
                inputs.len()
            )));
        }
        for (t, decl) in inputs.iter().zip(&self.inputs) {
            check_tensor("input", decl, t.dtype, t.shape, t.data.len())?;
            // Held in words (f32, i32, i64) or read as 2-byte units (f16).
            let align = match decl.dtype {
                DType::F32 | DType::I32 | DType::I64 | DType::U32 | DType::U64 => 4,
                DType::F16 | DType::I16 | DType::U16 => 2,
                _ => 1,
            };
            if !t.data.is_empty() && t.data.as_ptr().align_offset(align) != 0 {
                return Err(DelegateError::invalid(format!(
                    "input '{}': data is not {align}-byte aligned",
                    decl.name
                )));
            }
        }
        Ok(())
    }

    fn check_outputs(&self, outputs: &mut [TensorMut<'_>]) -> Result<(), DelegateError> {
        if outputs.len() != self.outputs.len() {
            return Err(DelegateError::invalid(format!(
                "expected {} outputs, got {}",
                self.outputs.len(),
                outputs.len()
            )));
        }
        for (t, (decl, _)) in outputs.iter_mut().zip(&self.outputs) {
            let len = t.data.len();
            check_tensor("output", decl, t.dtype, t.shape(), len)?;
            if decl.dtype == DType::F32 && f32_view_mut(&mut t.data[..]).is_none() {
                return Err(DelegateError::invalid(format!(
                    "output '{}': data is not 4-byte aligned",
                    decl.name
                )));
            }
        }
        Ok(())
    }
}

fn names(decls: &[IoDecl]) -> String {
    let n: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
    n.join(", ")
}

/// Checks one caller tensor against its declaration.
fn check_tensor(
    what: &str,
    decl: &IoDecl,
    dtype: DType,
    shape: &[usize],
    byte_len: usize,
) -> Result<(), DelegateError> {
    if dtype != decl.dtype {
        return Err(DelegateError::invalid(format!(
            "{what} '{}' is {dtype}, expected {}",
            decl.name, decl.dtype
        )));
    }
    if shape != decl.shape {
        return Err(DelegateError::invalid(format!(
            "{what} '{}' has shape {shape:?}, expected {:?}",
            decl.name, decl.shape
        )));
    }
    let expected = decl.shape.iter().product::<usize>() * dtype.size();
    if byte_len != expected {
        return Err(DelegateError::invalid(format!(
            "{what} '{}' holds {byte_len} bytes, expected {expected}",
            decl.name
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind};
    use baton_delegate_api::testing::{execute, Hosted, Rng};
    use baton_delegate_api::{Delegate, Options, Tensor};

    use crate::CpuDelegate;

    /// Outputs that are views of the last step's result (a Reshape, a Transpose out of a
    /// channels-last conv chain) are written by that step straight into the caller's
    /// buffer, as a plain result is; a view whose data a later step reads is copied.
    #[test]
    fn an_output_viewing_a_result_nothing_else_reads_is_written_in_place() {
        let mut rng = Rng::new(4);
        let mut b = GraphBuilder::new("views");
        let x = b.input_fixed("x", DType::F32, &[1, 4, 3, 5]);
        let wv = rng.vec(24);
        let w = b.constant_f32("w", &[6, 4, 1, 1], &wv);
        let c = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let r = b.node(OpKind::Relu, &[c], &[]).unwrap();
        let perm = [("perm", Attr::Ints(vec![0, 2, 3, 1]))];
        let nhwc = b.node(OpKind::Transpose, &[r], &perm).unwrap();
        let n = b.node(OpKind::Neg, &[x], &[]).unwrap();
        let shape = b.constant_i64("shape", &[2], &[4, 15]);
        let flat = b.node(OpKind::Reshape, &[n, shape], &[]).unwrap();
        let s = b.node(OpKind::Sigmoid, &[x], &[]).unwrap();
        let a = b.node(OpKind::Abs, &[x], &[]).unwrap();
        let read = b.node(OpKind::Reshape, &[a, shape], &[]).unwrap();
        let later = b.node(OpKind::Neg, &[read], &[]).unwrap();
        for t in [nhwc, flat, s, read, later] {
            b.output(t);
        }
        let g = b.finish().unwrap();
        let h = Hosted::new(&g);
        let opts = Options::validate(&CpuDelegate::options(), &[]).expect("options");
        let d = CpuDelegate::create(&opts).expect("create");
        let blob = h.compile(&d).expect("compiles");
        let mut exec = d.init(0, &blob, &h.views()).expect("initialises");
        assert_eq!(exec.written_by_step, [true, true, true, false, true]);
        let xv = rng.vec(60);
        let outs =
            execute(&mut exec, &h.graph, &[Tensor::from_f32(&[1, 4, 3, 5], &xv)]).expect("runs");
        let neg: Vec<f32> = xv.iter().map(|v| -v).collect();
        assert_eq!(outs[1].f32s(), &neg[..]);
        let abs: Vec<f32> = xv.iter().map(|v| v.abs()).collect();
        assert_eq!(outs[3].f32s(), &abs[..]);
        // The conv's result channels-last: element (h, w, m) of a 1x1 conv and Relu.
        assert_eq!(outs[0].shape, vec![1, 3, 5, 6]);
        for (i, &got) in outs[0].f32s().iter().enumerate() {
            let (p, m) = (i / 6, i % 6);
            let sum: f32 = (0..4).map(|c| xv[c * 15 + p] * wv[m * 4 + c]).sum();
            assert!((got - sum.max(0.0)).abs() < 1e-5, "pixel {p}, channel {m}");
        }
    }
}
