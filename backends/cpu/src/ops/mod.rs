//! Prepared operations: built once at init from a node (and its fused followers), run on
//! every execute without allocating.
//!
//! Each op reads its operands through [`Src`] handles resolved by [`Sources`] (graph
//! inputs borrowed from the caller, or buffers the executable owns: intermediates and
//! the constants it had to copy), and writes one output buffer.

pub(crate) mod affine;
pub(crate) mod affine_grid;
pub(crate) mod attention;
pub(crate) mod bits;
pub(crate) mod bytes;
pub(crate) mod causal_conv;
pub(crate) mod col2im;
pub(crate) mod conv;
pub(crate) mod deconv;
pub(crate) mod deform_conv;
pub(crate) mod depthwise;
pub(crate) mod det;
pub(crate) mod dynamic;
pub(crate) mod einsum;
pub(crate) mod elementwise;
pub(crate) mod fft;
pub(crate) mod generate;
pub(crate) mod grid_sample;
pub(crate) mod gru;
pub(crate) mod index;
pub(crate) mod int;
pub(crate) mod layout;
pub(crate) mod linear_attention;
pub(crate) mod lstm;
pub(crate) mod math;
pub(crate) mod matmul;
pub(crate) mod max_unpool;
pub(crate) mod norm;
pub(crate) mod pad;
pub(crate) mod pool;
pub(crate) mod quant;
pub(crate) mod reduce;
pub(crate) mod resize;
pub(crate) mod rnn;
pub(crate) mod roi_align;
pub(crate) mod scatter;
pub(crate) mod select;
pub(crate) mod sequence;
pub(crate) mod spectral;
pub(crate) mod tensor;
pub(crate) mod window;

use std::borrow::Cow;
use std::marker::PhantomData;

use baton_delegate_api::TensorRef;

use crate::gemm::{Activation, Add, Epilogue, MicroKernel, PackedB};
use crate::pool::Pool;
use crate::prepack::Panel;

/// Where an operand's data lives at execute time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// The `n`-th input of the subgraph.
    Input(usize),
    /// A buffer owned by the executable.
    Slot(usize),
    /// `len` floats from `offset` in a slot: one output of a multi-output op, whose
    /// outputs share one buffer.
    Part {
        slot: usize,
        offset: usize,
        len: usize,
    },
}

/// An operand at build time: constant data to pack or copy, or a run-time source.
#[derive(Clone, Debug)]
pub(crate) enum Operand<'c> {
    /// Borrowed from the constant view, or copied when the view is misaligned.
    Const(Cow<'c, [f32]>),
    Runtime(Src),
}

/// What a slot holds: a constant the executable had to copy (misaligned or 8-bit in the
/// graph), or an intermediate at a planned range of the arena (see `exec/arena.rs`).
#[derive(Debug)]
pub(crate) enum Slot {
    /// A constant kept unpacked (copied, or read in place from a retained view).
    Const(Panel),
    Arena {
        offset: usize,
        len: usize,
    },
}

/// Resolves [`Src`] handles during one step of an execute.
///
/// The arena is reached through a raw pointer because the running step writes one range
/// of it while reading others: the plan guarantees the ranges are disjoint (a step's
/// output is live at that step, as are its operands), which debug builds check on every
/// read.
pub(crate) struct Sources<'a> {
    /// The subgraph inputs, already checked to be aligned f32 data of the right length.
    pub inputs: &'a [TensorRef<'a>],
    slots: &'a [Slot],
    arena: *const f32,
    /// The arena range the running step writes, as (offset, len).
    writing: (usize, usize),
    _arena: PhantomData<&'a [f32]>,
}

// SAFETY: a `Sources` only hands out shared slices of data that no one writes while it
// lives (the inputs, and arena ranges outside the one the step writes, by `new`'s
// contract), so the threads of one step may read through it at once, as they may read
// those slices themselves.
unsafe impl Sync for Sources<'_> {}

impl<'a> Sources<'a> {
    /// Sources for a step writing `writing` of the arena at `arena`.
    ///
    /// # Safety
    /// `arena` must point to a live buffer holding every `Slot::Arena` range of `slots`,
    /// not otherwise accessed for `'a` except through the one mutable slice of the
    /// `writing` range, which no range read during `'a` overlaps.
    pub unsafe fn new(
        inputs: &'a [TensorRef<'a>],
        slots: &'a [Slot],
        arena: *const f32,
        writing: (usize, usize),
    ) -> Sources<'a> {
        Sources {
            inputs,
            slots,
            arena,
            writing,
            _arena: PhantomData,
        }
    }

    /// The data behind `src`.
    pub fn get(&self, src: Src) -> &'a [f32] {
        match src {
            Src::Input(i) => f32_view(self.inputs[i].data).unwrap_or(&[]),
            Src::Slot(s) => self.slot(s, 0, None),
            Src::Part { slot, offset, len } => self.slot(slot, offset, Some(len)),
        }
    }

    fn slot(&self, s: usize, skip: usize, take: Option<usize>) -> &'a [f32] {
        match &self.slots[s] {
            Slot::Const(data) => {
                let data: &'a [f32] = data;
                &data[skip..take.map_or(data.len(), |n| skip + n)]
            }
            &Slot::Arena { offset, len } => {
                let take = take.unwrap_or(len - skip);
                assert!(skip + take <= len, "a part beyond its slot");
                let start = offset + skip;
                let (w, wl) = self.writing;
                debug_assert!(
                    take == 0 || wl == 0 || start + take <= w || w + wl <= start,
                    "a step reads the arena range it writes"
                );
                // SAFETY: within the slot's range of the arena (`new`'s contract), and
                // disjoint from the one range being written.
                unsafe { std::slice::from_raw_parts(self.arena.add(start), take) }
            }
        }
    }

    /// The stored bytes behind `src` (an 8-bit tensor): a slot's whole range, slack
    /// included, or a subgraph input's data.
    pub fn bytes(&self, src: Src) -> &'a [u8] {
        match src {
            Src::Input(i) => self.inputs[i].data,
            _ => bytemuck::cast_slice(self.get(src)),
        }
    }

    /// The raw bytes of subgraph input `i` (integer operands: Gather indices).
    pub fn input_bytes(&self, i: usize) -> &'a [u8] {
        self.inputs[i].data
    }
}

/// Views bytes as f32 when aligned (an empty view is always fine, whatever its pointer).
pub(crate) fn f32_view(bytes: &[u8]) -> Option<&[f32]> {
    if bytes.is_empty() {
        return Some(&[]);
    }
    bytemuck::try_cast_slice(bytes).ok()
}

/// Mutable counterpart of [`f32_view`].
pub(crate) fn f32_view_mut(bytes: &mut [u8]) -> Option<&mut [f32]> {
    if bytes.is_empty() {
        return Some(&mut []);
    }
    bytemuck::try_cast_slice_mut(bytes).ok()
}

/// Bytes `v` allocated: its capacity, not its length (what the memory report counts).
#[allow(clippy::ptr_arg)] // the capacity is the `Vec`'s, not the slice's
pub(crate) fn vec_bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * size_of::<T>()
}

/// Mutable state shared by the ops of one executable: the kernel and scratch buffers,
/// sized at init for the largest op.
#[derive(Debug)]
pub(crate) struct RunCtx {
    pub kernel: &'static MicroKernel,
    pub pool: Pool,
    /// The packing of weights that arrive at run time (MatMul of two activations).
    pub rhs: PackedB,
    /// The same, one per pool thread, for batched products whose batches run in parallel
    /// (see `matmul.rs`): the batch packed last (`usize::MAX` for none) and its packing.
    pub rhs_workers: Vec<std::sync::Mutex<(usize, PackedB)>>,
    /// A convolution's input and output converted to or from NCHW at a layout
    /// boundary, and run-time depthwise weights in their packed layout.
    pub nhwc_in: Vec<f32>,
    pub nhwc_out: Vec<f32>,
    pub dw_weights: Vec<f32>,
    /// f64 accumulators (ReduceMean) and f32 work space (LSTM gates), sized at init.
    pub acc: Vec<f64>,
    pub work: Vec<f32>,
    /// An int8 convolution's input converted to NHWC and its output before conversion
    /// to NCHW, at the int8 region's layout edges; sized at init.
    pub qin: Vec<u8>,
    pub qout: Vec<u8>,
    /// An int8 convolution's im2col rows (see `quant/linear.rs`); sized at init.
    pub qcol: Vec<u8>,
    /// An int8 depthwise convolution's input rows as f32, one ring per pool thread (see
    /// `quant/linear.rs`); sized at init.
    pub qdw: Vec<std::sync::Mutex<Vec<f32>>>,
    /// Attention's scratch, one per pool thread (see `attention.rs`); sized at init.
    pub attn: attention::AttnWorkers,
    /// DFT and STFT scratch, one per pool thread (see `spectral.rs`); sized at init.
    pub fft: spectral::FftWorkers,
    /// LinearAttention's f64 states, one per pool thread (see `linear_attention.rs`).
    pub lin_attn: linear_attention::LinAttnWorkers,
}

impl RunCtx {
    /// A context running on `threads` threads.
    pub fn new(kernel: &'static MicroKernel, threads: usize) -> RunCtx {
        let pool = Pool::new(threads);
        RunCtx {
            kernel,
            pool,
            rhs: PackedB::default(),
            rhs_workers: Vec::new(),
            nhwc_in: Vec::new(),
            nhwc_out: Vec::new(),
            dw_weights: Vec::new(),
            acc: Vec::new(),
            work: Vec::new(),
            qin: Vec::new(),
            qout: Vec::new(),
            qcol: Vec::new(),
            qdw: Vec::new(),
            attn: Vec::new(),
            fft: Vec::new(),
            lin_attn: Vec::new(),
        }
    }

    /// Bytes of the work buffers, for the executable's memory report.
    pub fn scratch_bytes(&self) -> usize {
        let f = std::mem::size_of::<f32>();
        self.rhs.capacity_bytes()
            + self
                .rhs_workers
                .iter()
                .map(|m| m.lock().map_or(0, |s| s.1.capacity_bytes()))
                .sum::<usize>()
            + (self.nhwc_in.capacity() + self.nhwc_out.capacity() + self.dw_weights.capacity()) * f
            + self.acc.capacity() * std::mem::size_of::<f64>()
            + self.work.capacity() * f
            + self.qin.capacity()
            + self.qout.capacity()
            + self.qcol.capacity()
            + self
                .qdw
                .iter()
                .map(|m| m.lock().map_or(0, |s| vec_bytes(&*s)))
                .sum::<usize>()
            + self
                .attn
                .iter()
                .map(|m| m.lock().map_or(0, |s| s.bytes()))
                .sum::<usize>()
            + self
                .fft
                .iter()
                .map(|m| m.lock().map_or(0, |s| vec_bytes(&*s)))
                .sum::<usize>()
            + self
                .lin_attn
                .iter()
                .map(|m| m.lock().map_or(0, |s| vec_bytes(&*s)))
                .sum::<usize>()
    }

    /// Grows the f64 accumulators to at least `len`.
    pub fn reserve_acc(&mut self, len: usize) {
        if self.acc.len() < len {
            self.acc.resize(len, 0.0);
        }
    }

    /// Grows the f32 work space to at least `len`.
    pub fn reserve_work(&mut self, len: usize) {
        if self.work.len() < len {
            self.work.resize(len, 0.0);
        }
    }
}

/// An epilogue op whose operand is resolved at execute time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum EpOpSpec {
    Add {
        src: Src,
        rs: usize,
        cs: usize,
        scale: f32,
    },
    /// A tensor of the result's shape: row `i` of the (batch-folded) result reads its
    /// elements from `i * rs`. Unlike a broadcast add it never repeats across batches.
    Residual {
        src: Src,
        rs: usize,
    },
    Relu,
    Clip {
        min: f32,
        max: f32,
    },
    /// An activation after the clamp (the op's only reader, found at init).
    Act(Activation),
}

/// The epilogue of a GEMM-based op, as planned at init.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct EpilogueSpec {
    pub ops: Vec<EpOpSpec>,
}

impl EpilogueSpec {
    /// The epilogue with operands resolved for this execute.
    pub fn resolve<'a>(&self, sources: &Sources<'a>) -> Epilogue<'a> {
        let mut e = Epilogue::new();
        for op in &self.ops {
            match *op {
                EpOpSpec::Add { src, rs, cs, scale } => e.add(Add {
                    data: sources.get(src),
                    rs,
                    cs,
                    scale,
                }),
                EpOpSpec::Residual { src, rs } => e.add(Add {
                    data: sources.get(src),
                    rs,
                    cs: 1,
                    scale: 1.0,
                }),
                EpOpSpec::Relu => e.clamp(0.0, f32::INFINITY),
                EpOpSpec::Clip { min, max } => e.clamp(min, max),
                EpOpSpec::Act(f) => e.activate(Some(f)),
            }
        }
        e
    }

    /// Whether every broadcast add reads the same operand row for all rows of the output
    /// (a residual covers the whole output, so batches may fold with it).
    pub fn rows_uniform(&self) -> bool {
        self.ops
            .iter()
            .all(|op| !matches!(op, EpOpSpec::Add { rs, .. } if *rs != 0))
    }
}
