//! The Baton CPU delegate: f32 inference on a weight-stationary GEMM (weights packed once,
//! activations read in place, epilogues in registers; AVX-512F, AVX2+FMA, NEON or portable
//! micro-kernels chosen at run time), with convolution on channels-last data (pointwise as
//! a plain GEMM, others through an indirection buffer, direct depthwise), pooling, element-wise, Softmax/LogSoftmax, LayerNormalization, ReduceMean,
//! Gather/Slice/Split and layout kernels, and LSTM on the GEMM path; and int8: QDQ groups
//! (`DequantizeLinear → Conv/MatMul/Gemm → [Relu/Clip] → QuantizeLinear`) on an integer
//! GEMM (AVX-512 VNNI, AVX2, NEON `sdot` or `smull`, portable) with requantization in the
//! kernel, standalone QuantizeLinear/DequantizeLinear otherwise (see `quant.rs`); the
//! dynamic-quantization products MatMulInteger and ConvInteger on the same kernels with an
//! exact i32 epilogue (`ops/quant/integer.rs`).
//!
//! It also runs the tail every real model carries (see `support/tail.rs` and
//! `exec/lower/tail.rs`): comparisons, logic and Where, Pow, Cast, Gelu, ReduceSum and
//! ReduceMax, Pad, Resize, Expand, Tile, ConvTranspose (a GEMM and a col2im), GRU, RNN,
//! BatchNormalization (folded at init into the convolution before it, else a per-channel
//! affine pass), Shape/Size/ConstantOfShape as constants, and the BTIR 1.5 ops of
//! streaming and vision models (CausalConvWithState, ReverseSequence, AffineGrid, Det,
//! MaxUnpool, Col2Im); bools held as 0.0/1.0, i32 as
//! its bits and i64 as two slots, carried by the data-movement ops and views. Exporters'
//! multi-node spellings (LeakyRelu as `Max(x, alpha x)`, `x * HardSigmoid(x)`, SiLU as
//! `x * Sigmoid(x)`, the Erf and tanh GELUs) are found at init and run as one pass
//! (`patterns.rs`). An activation that is the only reader of a Conv's, MatMul's or Gemm's
//! result (Sigmoid, SiLU, HardSwish, HardSigmoid and its product, LeakyRelu, the Erf
//! GELUs) is applied by the product's micro-kernel before the store instead, with the
//! same bits (`gemm/activation.rs`, decided at init).
//!
//! # Lifecycle
//!
//! - [`Delegate::supports`] claims a node only when this delegate matches the reference
//!   executor on every input (f32 data, or the bool/i32/i64 the tail ops carry; static
//!   shapes, rank ≤ 6, the attributes implemented);
//!   everything else is declined with a reason code and a message naming the culprit.
//! - [`Delegate::compile`] plans fusions (`Conv`/`Gemm`/`MatMul` + constant bias `Add` +
//!   `Relu`/`Clip`) and writes a small, machine-independent blob: a versioned header, the
//!   subgraph in the wire format with its constants *external*, and the fusion plan
//!   (see `blob.rs`). Weights are never copied into the blob.
//! - [`Delegate::init`] checks the blob and the constant views against each other, packs
//!   the weights for this machine's micro-kernel once, plans which intermediates are held
//!   channels-last (`exec/layout.rs`), builds the convolutions' indirection buffers, and
//!   allocates every intermediate and scratch buffer, so that
//!   [`Executable::execute`](baton_delegate_api::Executable::execute) allocates nothing.
//!
//! # Options
//!
//! - `threads` (1..=256, default: the number of physical cores): the threads an
//!   executable runs on (the caller plus `threads - 1` workers that sleep between calls).
//!   Work is split over 2-D blocks of GEMM tiles and over the output pixels of depthwise
//!   convolutions; results are bit-identical whatever the count.
//! - `isa` (`auto`, `avx512f`, `avx2`, `neon`, `portable`; default `auto`, the widest the
//!   CPU runs): the GEMM kernel family, so tests and CI reach every dispatch path on one
//!   machine. Naming one the CPU lacks fails `create` with that reason.

mod blob;
mod exec;
mod fusion;
pub mod gemm;
mod ops;
mod patterns;
mod pool;
mod prepack;
pub mod qgemm;
mod quant;
mod support;

use baton_delegate_api::abi::{concurrency, option_kind};
use baton_delegate_api::ir::{Graph, Storage};
use baton_delegate_api::{
    BlobCompatibility, Constants, Delegate, DelegateError, Device, OptionDecl, Options, PluginInfo,
    RetainedBlob, Support, TensorRef,
};

pub use exec::CpuExecutable;

use crate::fusion::FusionPlan;
use crate::gemm::{Isa, MicroKernel};
use crate::prepack::Packs;

baton_delegate_api::export_delegate!(CpuDelegate);

/// The CPU delegate, configured by its options.
#[derive(Debug)]
pub struct CpuDelegate {
    threads: usize,
    kernel: &'static MicroKernel,
    qkernel: &'static qgemm::QKernel,
}

impl CpuDelegate {
    /// The number of threads each executable runs on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The GEMM micro-kernel this delegate packs for and runs.
    pub fn kernel(&self) -> &'static MicroKernel {
        self.kernel
    }

    /// The int8 GEMM micro-kernel of the QDQ groups.
    pub fn qkernel(&self) -> &'static qgemm::QKernel {
        self.qkernel
    }
}

/// The number of physical cores (hyper-threads share one core's FMA units, so counting
/// them would only add contention), as a decimal string; the logical CPU count where the
/// topology cannot be read.
fn default_threads() -> &'static str {
    static DEFAULT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(|| physical_cores().clamp(1, 256).to_string())
}

fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cores = std::collections::BTreeSet::new();
    for cpu in 0..logical.max(1) * 4 {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        if let (Some(pkg), Some(core)) = (read("physical_package_id"), read("core_id")) {
            cores.insert((pkg.trim().to_string(), core.trim().to_string()));
        }
    }
    // The affinity mask may allow fewer CPUs than the machine has.
    match cores.len() {
        0 => logical,
        n => n.min(logical),
    }
}

/// `<version>-<arch>`: a build of another version or for another architecture differs.
fn build_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| format!("{}-{}", env!("CARGO_PKG_VERSION"), std::env::consts::ARCH))
}

impl Delegate for CpuDelegate {
    type Executable = CpuExecutable;

    /// NonMaxSuppression, Unique and Compress run as partitions of their own, their
    /// outputs sized for a bound (see `ops/dynamic.rs`).
    const BOUNDED_OUTPUTS: bool = true;

    fn info() -> PluginInfo {
        PluginInfo {
            name: "cpu",
            version: env!("CARGO_PKG_VERSION"),
            build_id: build_id(),
            features: 0,
            concurrency: concurrency::SERIALIZED_PER_HANDLE,
        }
    }

    fn options() -> Vec<OptionDecl> {
        vec![
            OptionDecl {
                name: "threads",
                kind: option_kind::INT,
                default: default_threads(),
                min: 1.0,
                max: 256.0,
                choices: "",
                help: "Threads an executable runs on (the calling thread included). \
                       Default: the number of physical cores.",
            },
            OptionDecl {
                name: "isa",
                kind: option_kind::ENUM,
                default: "auto",
                min: 0.0,
                max: 0.0,
                choices: "auto|avx512f|avx2|neon|portable",
                help: "The GEMM kernel family: `auto` takes the widest this CPU runs; naming \
                       one this CPU lacks is an error. Lets tests and benches reach every \
                       dispatch path on one machine.",
            },
        ]
    }

    fn create(options: &Options) -> Result<CpuDelegate, DelegateError> {
        let threads = options
            .int("threads")
            .unwrap_or_else(|| default_threads().parse().unwrap_or(1));
        let threads = usize::try_from(threads)
            .ok()
            .filter(|t| (1..=256).contains(t))
            .ok_or_else(|| DelegateError::invalid(format!("threads = {threads}: out of range")))?;
        let kernel = match options.get("isa").unwrap_or("auto") {
            "auto" => MicroKernel::best(),
            name => {
                let isa = match name {
                    "avx512f" => Isa::Avx512F,
                    "avx2" => Isa::Avx2Fma,
                    "neon" => Isa::Neon,
                    "portable" => Isa::Portable,
                    other => {
                        return Err(DelegateError::invalid(format!(
                            "isa = {other}: not one of auto, avx512f, avx2, neon, portable"
                        )))
                    }
                };
                MicroKernel::for_isa(isa).ok_or_else(|| {
                    DelegateError::unsupported(format!(
                        "isa = {name}: this CPU ({}) does not run it",
                        gemm::simd_description()
                    ))
                })?
            }
        };
        // The int8 kernels follow the f32 choice: `portable` pins both to plain Rust,
        // `avx2` both to AVX2; `avx512f` takes VNNI where the CPU has it, `neon` takes `sdot`
        // where it has `dotprod`.
        Ok(CpuDelegate {
            threads,
            kernel,
            qkernel: qgemm::QKernel::for_isa(kernel.isa()),
        })
    }

    fn devices(&self) -> Vec<Device> {
        vec![Device {
            name: format!("cpu:{}", std::env::consts::ARCH),
            kind: 0,
            driver_version: gemm::simd_description(),
            memory_bytes: 0,
        }]
    }

    fn supports(&self, graph: &Graph, constants: Constants<'_>) -> Vec<Support> {
        graph
            .nodes
            .iter()
            .map(|node| support::check_node(graph, node, &constants))
            .collect()
    }

    fn compile(
        &self,
        device: u32,
        graph: &Graph,
        constants: Constants<'_>,
    ) -> Result<Vec<u8>, DelegateError> {
        check_device(device)?;
        graph
            .validate()
            .map_err(|e| DelegateError::invalid(format!("subgraph: {e}")))?;
        require_supported(graph, &constants, DelegateError::unsupported)?;
        let plan = FusionPlan::plan(graph, &constants);
        // Lowering once here packs the weights for the blob; the executable is dropped
        // (one thread: no pool is started).
        let (_, packs) = exec::build(
            graph,
            &plan,
            constants,
            Packs::record(),
            self.kernel,
            self.qkernel,
            1,
        )?;
        let (blob, order) = blob::encode(graph, &plan, self.kernel.nr(), &packs.into_recorded());
        // The blob numbers constants in tensor order; views already passed in another
        // order would not line up at init.
        for (index, &t) in order.iter().enumerate() {
            if let Some(Storage::External(i)) = graph.tensors[t].data {
                if i != index {
                    return Err(DelegateError::invalid(format!(
                        "constant '{}' is view {i}, expected view {index}: pass constant \
                         views in tensor order (as wire::encode does)",
                        graph.tensors[t].name
                    )));
                }
            }
        }
        Ok(blob)
    }

    /// A blob of this format packed for this kernel's panel width is optimal; an older
    /// format, or packings for another width, still run (packing at init) but load slower.
    fn blob_compatibility(&self, blob: &[u8]) -> BlobCompatibility {
        match blob::version(blob) {
            Some(blob::FORMAT_VERSION) if blob::packed_width(blob) == Some(self.kernel.nr()) => {
                BlobCompatibility::Optimal
            }
            Some(v) if (blob::OLDEST_VERSION..=blob::FORMAT_VERSION).contains(&v) => {
                BlobCompatibility::PreferRecompile
            }
            _ => BlobCompatibility::Unsupported,
        }
    }

    fn init(
        &self,
        device: u32,
        blob: &[u8],
        constants: &[TensorRef<'_>],
    ) -> Result<CpuExecutable, DelegateError> {
        self.init_from(device, blob, None, constants)
    }

    /// The packed panels are read from the blob in place: the host keeps it (a program
    /// file's mapping) for the executable's life, so nothing is copied.
    fn init_retained(
        &self,
        device: u32,
        blob: RetainedBlob,
        constants: &[TensorRef<'_>],
        retained_constants: &[RetainedBlob],
    ) -> Result<CpuExecutable, DelegateError> {
        let kept = Some((blob, retained_constants));
        self.init_from(device, blob.bytes(), kept, constants)
    }
}

impl CpuDelegate {
    /// `init`, with the panels and constants read in place when `retained` carries the
    /// host's promise to keep the blob and the constants' bytes.
    fn init_from(
        &self,
        device: u32,
        blob: &[u8],
        retained: Option<(RetainedBlob, &[RetainedBlob])>,
        constants: &[TensorRef<'_>],
    ) -> Result<CpuExecutable, DelegateError> {
        check_device(device)?;
        let blob::Decoded {
            graph,
            plan,
            nr,
            packs,
        } = blob::decode(blob).map_err(DelegateError::invalid)?;
        check_constant_views(&graph, constants)?;
        let consts = Constants::new(&graph, constants);
        require_supported(&graph, &consts, DelegateError::invalid)?;
        plan.validate(&graph, &consts)
            .map_err(|e| DelegateError::invalid(format!("blob: {e}")))?;
        // Packings made for another panel width are of no use: pack from the constants.
        let packs = match nr {
            Some(nr) if nr == self.kernel.nr() => Packs::replay(packs, retained.map(|r| r.0)),
            _ => Packs::fresh(),
        };
        let packs = packs.retaining_constants(retained.map_or(&[], |r| r.1));
        let (mut exec, packs) = exec::build(
            &graph,
            &plan,
            consts,
            packs,
            self.kernel,
            self.qkernel,
            self.threads,
        )?;
        packs.finish().map_err(DelegateError::invalid)?;
        let (owned, retained) = packs.tally();
        exec.set_panel_bytes(owned, retained);
        Ok(exec)
    }
}

fn check_device(device: u32) -> Result<(), DelegateError> {
    if device != 0 {
        return Err(DelegateError::invalid(format!(
            "device {device} does not exist (the CPU delegate has device 0 only)"
        )));
    }
    Ok(())
}

/// Fails with the first node `supports` declines.
fn require_supported(
    graph: &Graph,
    consts: &Constants<'_>,
    error: fn(String) -> DelegateError,
) -> Result<(), DelegateError> {
    for node in &graph.nodes {
        if let Support::No(d) = support::check_node(graph, node, consts) {
            return Err(error(format!(
                "node {} is not supported ({}): {}",
                node.label(),
                d.reason.name(),
                d.message
            )));
        }
    }
    Ok(())
}

/// Checks the views passed to `init` against the constants the blob declares.
fn check_constant_views(graph: &Graph, views: &[TensorRef<'_>]) -> Result<(), DelegateError> {
    let mut expected = 0;
    for decl in &graph.tensors {
        let Some(storage) = &decl.data else { continue };
        let shape = decl.static_shape().ok_or_else(|| {
            DelegateError::invalid(format!("constant '{}' has a symbolic shape", decl.name))
        })?;
        let bytes = shape
            .iter()
            .try_fold(decl.dtype.size(), |a, &d| a.checked_mul(d));
        let (dtype, view_shape, len) = match storage {
            Storage::Inline(data) => (decl.dtype, &shape[..], data.bytes().len()),
            Storage::External(i) => {
                expected += 1;
                let v = views.get(*i).ok_or_else(|| {
                    DelegateError::invalid(format!(
                        "constant '{}' is view {i}, but {} views were passed",
                        decl.name,
                        views.len()
                    ))
                })?;
                (v.dtype, v.shape, v.data.len())
            }
        };
        if dtype != decl.dtype || view_shape != shape || Some(len) != bytes {
            return Err(DelegateError::invalid(format!(
                "constant '{}': expected {} {shape:?} ({} bytes), got {dtype} {view_shape:?} \
                 ({len} bytes)",
                decl.name,
                decl.dtype,
                bytes.unwrap_or(usize::MAX)
            )));
        }
    }
    if views.len() != expected {
        return Err(DelegateError::invalid(format!(
            "the blob declares {expected} constant views, {} were passed",
            views.len()
        )));
    }
    Ok(())
}
