//! The safe Rust SDK for plugin authors: implement [`Delegate`], call
//! [`export_delegate!`](crate::export_delegate) (and, in the crate built as the plugin,
//! [`export_plugin_entry!`](crate::export_plugin_entry); [`crate::entry`] says why two).
//!
//! # The contract
//!
//! **Lifecycle.** The host loads the library, reads the descriptor and checks the ABI
//! version *before* calling anything. It then validates the user's options against
//! [`Delegate::options`] and calls [`Delegate::create`] once per configuration. For each
//! partition it calls [`Delegate::supports`] (per node), [`Delegate::compile`] (subgraph →
//! blob; may run ahead of time, on another machine), [`Delegate::init`] (blob → executable)
//! and then [`Executable::execute`] any number of times.
//!
//! **Ownership.** Everything the host passes is borrowed for the duration of the call:
//! graphs, constant views, input and output tensors. Keep nothing that borrows from them;
//! copy what must outlive the call (packed weights belong in the blob or the executable).
//! Blobs you return are yours: the SDK allocates and frees them on your side of the ABI.
//!
//! **Threading.** A delegate (`&self`) may be called from several threads at once, hence
//! `Send + Sync`. An executable is `&mut self`: calls on one handle never overlap
//! (`SERIALIZED_PER_HANDLE`); different handles may run concurrently on different threads.
//!
//! **Failure.** Return [`DelegateError`]s; they become status codes and the message becomes
//! the host's `last_error`. A panic in any entry point is caught (`catch_unwind`) and turned
//! into `STATUS_PANIC` with the panic message: it never unwinds into the host. A failed
//! `execute` must not leave the executable unusable; the host may call it again or fall
//! back to its own kernels for that call.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::abi::{self, Blob, Context, DeviceInfo, Handle, OptionSpec, Status, SupportAnswer};
use crate::ir::{DType, Graph, Quant, Storage, TensorId};
use crate::wire;

mod answers;
mod retained;
pub mod simple;
pub use answers::{BlobCompatibility, Decline, DeclineReason};
pub use retained::RetainedBlob;
pub use simple::{broadcast_binary, graph_blob, require_operands, GraphExec, KernelFn, NodeKernel};

/// An error a delegate returns; its message reaches the host verbatim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DelegateError {
    /// One of the `abi::STATUS_*` codes (never `STATUS_OK`).
    pub status: Status,
    /// The explanation the user reads, passed on as the thread's `last_error`. Say what
    /// failed and on what ("init: blob built for device 2, context has 1 device").
    pub message: String,
}

impl DelegateError {
    /// A plain failure.
    pub fn new(message: impl Into<String>) -> DelegateError {
        DelegateError {
            status: abi::STATUS_ERROR,
            message: message.into(),
        }
    }

    /// An invalid argument (corrupt blob, wrong tensor count...).
    pub fn invalid(message: impl Into<String>) -> DelegateError {
        DelegateError {
            status: abi::STATUS_INVALID_ARGUMENT,
            message: message.into(),
        }
    }

    /// A valid request the plugin does not support.
    pub fn unsupported(message: impl Into<String>) -> DelegateError {
        DelegateError {
            status: abi::STATUS_UNSUPPORTED,
            message: message.into(),
        }
    }
}

/// Quantization parameters of a borrowed tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
///
/// The same meaning as [`Quant`] (`real = scale * (q - zero_point)`), but borrowed: from the
/// host's views for the duration of a call, or from an IR [`Quant`].
pub enum QuantRef<'a> {
    /// One scale and zero point for every element.
    PerTensor {
        /// Real-valued step between consecutive stored integers.
        scale: f32,
        /// The stored integer that means real zero.
        zero_point: i32,
    },
    /// One scale and zero point per index along `axis`.
    PerAxis {
        /// The dimension the parameters run along.
        axis: usize,
        /// One scale per index along `axis`.
        scales: &'a [f32],
        /// One zero point per index along `axis`, the same length as `scales`.
        zero_points: &'a [i32],
    },
}

impl<'a> QuantRef<'a> {
    /// Borrows IR quantization parameters.
    pub fn from_quant(q: &'a Quant) -> QuantRef<'a> {
        match q {
            Quant::PerTensor { scale, zero_point } => QuantRef::PerTensor {
                scale: *scale,
                zero_point: *zero_point,
            },
            Quant::PerAxis {
                axis,
                scales,
                zero_points,
            } => QuantRef::PerAxis {
                axis: *axis,
                scales,
                zero_points,
            },
        }
    }
}

/// A borrowed, read-only tensor. `data` is 64-byte aligned when it comes from the host.
#[derive(Clone, Copy, Debug)]
///
/// Views the SDK builds from the host's arguments have been checked: `data` holds exactly
/// the product of `shape` times the element size, in bytes.
pub struct TensorRef<'a> {
    /// The element type.
    pub dtype: DType,
    /// Extents in elements, outermost first; empty for a scalar.
    pub shape: &'a [usize],
    /// The elements, dense and row-major, as bytes; [`TensorRef::values`] views them typed.
    pub data: &'a [u8],
    /// Quantization parameters, `None` for a plain tensor.
    pub quant: Option<QuantRef<'a>>,
}

impl<'a> TensorRef<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data as f32 (panics if the dtype or alignment is wrong: a host bug, not input).
    pub fn f32s(&self) -> &'a [f32] {
        assert_eq!(self.dtype, DType::F32, "tensor is {} not f32", self.dtype);
        self.values()
    }

    /// The data viewed as `T` (panics on a size or alignment mismatch).
    pub fn values<T: bytemuck::Pod>(&self) -> &'a [T] {
        // An empty view may carry any dangling pointer; never judge its alignment.
        if self.data.is_empty() {
            return &[];
        }
        bytemuck::cast_slice(self.data)
    }
}

/// A borrowed, writable output tensor with the shape the host expects.
#[derive(Debug)]
///
/// The host allocated it for the shape its own inference expects; read that shape with
/// [`TensorMut::shape`]. Write every byte of `data`.
pub struct TensorMut<'a> {
    /// The element type the host expects.
    pub dtype: DType,
    shape: [usize; abi::MAX_RANK],
    rank: usize,
    /// The output's bytes, dense and row-major, sized for the expected shape. Their prior
    /// contents are unspecified: every byte must be written.
    pub data: &'a mut [u8],
}

impl<'a> TensorMut<'a> {
    /// A writable view over `data` of the given shape (`shape.len() <= MAX_RANK`).
    pub fn new(dtype: DType, shape: &[usize], data: &'a mut [u8]) -> TensorMut<'a> {
        let mut s = [0; abi::MAX_RANK];
        s[..shape.len()].copy_from_slice(shape);
        TensorMut {
            dtype,
            shape: s,
            rank: shape.len(),
            data,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.rank]
    }

    /// Reports a different output shape. The host checks it against the expected one and
    /// rejects the result if they differ: this exists so a plugin can say what it did
    /// rather than silently write a differently-shaped result.
    pub fn set_shape(&mut self, shape: &[usize]) {
        let rank = shape.len().min(abi::MAX_RANK);
        self.shape[..rank].copy_from_slice(&shape[..rank]);
        self.rank = rank;
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data as f32, mutably.
    pub fn f32s_mut(&mut self) -> &mut [f32] {
        assert_eq!(self.dtype, DType::F32, "tensor is {} not f32", self.dtype);
        self.values_mut()
    }

    /// The data viewed as `T`, mutably.
    pub fn values_mut<T: bytemuck::Pod>(&mut self) -> &mut [T] {
        if self.data.is_empty() {
            return &mut [];
        }
        bytemuck::cast_slice_mut(self.data)
    }
}

/// The constant tensors passed beside a graph, resolved from [`Storage`].
#[derive(Clone, Copy)]
pub struct Constants<'a> {
    graph: &'a Graph,
    views: &'a [TensorRef<'a>],
}

impl<'a> Constants<'a> {
    /// Constants of `graph`, the external ones found in `views`.
    pub fn new(graph: &'a Graph, views: &'a [TensorRef<'a>]) -> Constants<'a> {
        Constants { graph, views }
    }

    /// The bytes of tensor `t` if it is a constant (inline or passed as a view).
    pub fn bytes(&self, t: TensorId) -> Option<&'a [u8]> {
        match self.graph.tensors.get(t)?.data.as_ref()? {
            Storage::Inline(d) => Some(d.bytes()),
            Storage::External(i) => self.views.get(*i).map(|v| v.data),
        }
    }

    /// The values of constant `t` as f32.
    pub fn f32s(&self, t: TensorId) -> Option<&'a [f32]> {
        let decl = self.graph.tensors.get(t)?;
        if decl.dtype != DType::F32 {
            return None;
        }
        let bytes = self.bytes(t)?;
        if bytes.is_empty() {
            return Some(&[]);
        }
        bytemuck::try_cast_slice(bytes).ok()
    }

    /// The values of constant `t` as i64.
    pub fn i64s(&self, t: TensorId) -> Option<Vec<i64>> {
        let decl = self.graph.tensors.get(t)?;
        if decl.dtype != DType::I64 {
            return None;
        }
        Some(bytemuck::pod_collect_to_vec(self.bytes(t)?))
    }
}

/// A node's support answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// The plugin runs this node, and runs it correctly: conformance judges every claimed
    /// node against the reference kernels.
    Yes,
    /// Declined, with a typed reason (so reports can group refusals) and what is missing,
    /// for the user ("dtype f16", "auto_pad SAME_LOWER"). The glue turns the reason into
    /// its [`abi::reason`] code and cuts the message to [`abi::SUPPORT_MESSAGE_LEN`] minus
    /// one bytes at a character boundary. Typed, so a Rust delegate cannot hand the host
    /// a code that does not exist; a host reading a C plugin's answer maps a code it does
    /// not know (a newer plugin's) to [`DeclineReason::Other`].
    No(Decline),
}

impl Support {
    /// A refusal for `reason`, explained by `message`.
    pub fn no(reason: DeclineReason, message: impl Into<String>) -> Support {
        Support::No(Decline::new(reason, message))
    }
}

/// A device a delegate can run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// A name for users and reports ("cpu", a GPU's product name).
    pub name: String,
    /// 0 CPU, 1 GPU, 2 NPU, 3 other.
    pub kind: u32,
    /// Driver or firmware version. Part of the host's cache keys: blobs and probe results
    /// recorded under one version are not reused under another.
    pub driver_version: String,
    /// Memory available to the device, in bytes; 0 if unknown.
    pub memory_bytes: u64,
}

/// Static facts about a plugin, copied into its descriptor.
#[derive(Clone, Copy, Debug)]
pub struct PluginInfo {
    /// The plugin's name, unique among the installed plugins.
    pub name: &'static str,
    /// The plugin's own version, e.g. `"0.1.0"`, shown to users.
    pub version: &'static str,
    /// Identifies this build. Part of the host's cache keys, so it must change whenever
    /// compiled blobs or support answers may change (a version plus a commit hash will do).
    pub build_id: &'static str,
    /// Feature bits; none are defined in ABI 1.0, so 0.
    pub features: u64,
    /// An [`abi::concurrency`] code. The SDK runs [`Executable::execute`] under a lock per
    /// handle whatever this says, so `SERIALIZED_PER_HANDLE` is the honest value;
    /// `REENTRANT` would only make the host's threads wait on that lock.
    pub concurrency: u32,
}

/// One option a delegate accepts.
#[derive(Clone, Debug, PartialEq)]
pub struct OptionDecl {
    /// The key users write in their configuration.
    pub name: &'static str,
    /// An [`abi::option_kind`] code.
    pub kind: u32,
    /// The value applied when the user gives none, written as a user would write it.
    pub default: &'static str,
    /// Inclusive lower bound for INT and FLOAT options; ignored for the other kinds.
    pub min: f64,
    /// Inclusive upper bound for INT and FLOAT options; ignored for the other kinds.
    pub max: f64,
    /// The allowed values of an ENUM option, separated by `|`; empty for the other kinds
    /// (it then crosses the ABI as NULL).
    pub choices: &'static str,
    /// One line of help for the user.
    pub help: &'static str,
}

/// Validated option values, defaults applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    values: BTreeMap<String, String>,
}

impl Options {
    /// Checks `given` against `decls` and fills in defaults. Errors name the key.
    pub fn validate(decls: &[OptionDecl], given: &[(String, String)]) -> Result<Options, String> {
        let mut values = BTreeMap::new();
        for (k, v) in given {
            let Some(d) = decls.iter().find(|d| d.name == k) else {
                let known: Vec<&str> = decls.iter().map(|d| d.name).collect();
                return Err(format!(
                    "unknown option '{k}' (known: {})",
                    known.join(", ")
                ));
            };
            check_option(d, v).map_err(|e| format!("option '{k}' = '{v}': {e}"))?;
            values.insert(k.clone(), v.clone());
        }
        for d in decls {
            values
                .entry(d.name.to_string())
                .or_insert_with(|| d.default.to_string());
        }
        Ok(Options { values })
    }

    /// The raw value of an option.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// An integer option (already validated).
    pub fn int(&self, key: &str) -> Option<i64> {
        self.get(key)?.parse().ok()
    }

    /// A boolean option.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.parse().ok()
    }
}

/// Checks one option value against its declaration.
pub fn check_option(d: &OptionDecl, v: &str) -> Result<(), String> {
    match d.kind {
        abi::option_kind::BOOL => v
            .parse::<bool>()
            .map(|_| ())
            .map_err(|_| "expected true or false".into()),
        abi::option_kind::INT => match v.parse::<i64>() {
            Ok(i) if (i as f64) >= d.min && (i as f64) <= d.max => Ok(()),
            Ok(_) => Err(format!("out of range [{}, {}]", d.min, d.max)),
            Err(_) => Err("expected an integer".into()),
        },
        abi::option_kind::FLOAT => match v.parse::<f64>() {
            Ok(f) if f >= d.min && f <= d.max => Ok(()),
            Ok(_) => Err(format!("out of range [{}, {}]", d.min, d.max)),
            Err(_) => Err("expected a number".into()),
        },
        abi::option_kind::ENUM => {
            if d.choices.split('|').any(|c| c == v) {
                Ok(())
            } else {
                Err(format!("expected one of {}", d.choices.replace('|', ", ")))
            }
        }
        _ => Ok(()),
    }
}

/// A backend delegate. See the module docs for the lifecycle, ownership and threading rules.
pub trait Delegate: Sized + Send + Sync + 'static {
    /// What `init` produces.
    type Executable: Executable;

    /// Name, version, build id, feature bits, concurrency.
    fn info() -> PluginInfo;

    /// The highest BTIR minor version this delegate reads (ABI 1.2 `btir_minor`). The SDK
    /// decodes graphs with its own reader, so the default, the minor this SDK reads, is
    /// right unless the delegate parses graph bytes itself.
    const BTIR_MINOR: u16 = wire::WIRE_MINOR;

    /// Whether this delegate takes the value-dependent ops with bounded outputs (ABI 1.3
    /// `BATON_CAP_BOUNDED_OUTPUTS`): such an output arrives sized for
    /// [`crate::shape::output_bounds`] and the executable reports the extents it produced
    /// with [`TensorMut::set_shape`], its data dense in that shape from the start.
    const BOUNDED_OUTPUTS: bool = false;

    /// The options this delegate accepts.
    fn options() -> Vec<OptionDecl> {
        Vec::new()
    }

    /// Creates a delegate from validated options.
    fn create(options: &Options) -> Result<Self, DelegateError>;

    /// A hint only: the host proves availability by running a probe graph.
    fn available(&self) -> bool {
        true
    }

    /// The devices this delegate can run on.
    fn devices(&self) -> Vec<Device>;

    /// One answer per node of `graph`. Be honest: declining is always safe, claiming a node
    /// you then get wrong fails conformance.
    fn supports(&self, graph: &Graph, constants: Constants<'_>) -> Vec<Support>;

    /// Compiles a subgraph (every node of which you said you support) into a blob: bytes
    /// the host may store (in a `.baton` program), copy to another machine and hand back
    /// to [`Delegate::init`], so they must hold no pointer and be checked when read.
    ///
    /// The default returns the subgraph itself, [`graph_blob`]: BTIR written by
    /// [`wire::encode`] in [`wire::ConstMode::Inline`], which keeps each constant that came
    /// as a view a reference to it ([`Storage::External`]) rather than copying the
    /// weights. `init` reads it back with [`wire::decode`] (or [`GraphExec::new`], which
    /// also copies the constants and runs the graph node by node with your kernel). A
    /// delegate with a format of its own (packed weights, a command stream) overrides
    /// this; [`crate::bytes`] is a checked reader for such formats. ([`wire::encode`] in
    /// [`wire::ConstMode::External`] is what the host sends: every constant a view.)
    fn compile(
        &self,
        device: u32,
        graph: &Graph,
        constants: Constants<'_>,
    ) -> Result<Vec<u8>, DelegateError> {
        let _ = (device, constants);
        Ok(graph_blob(graph))
    }

    /// Whether an existing blob can be used by this build (the glue passes the host its
    /// [`abi::compat`] code). Answer [`BlobCompatibility::Unsupported`] for bytes you do
    /// not recognise: the host then recompiles instead of handing you a foreign blob.
    fn blob_compatibility(&self, blob: &[u8]) -> BlobCompatibility {
        let _ = blob;
        BlobCompatibility::Optimal
    }

    /// Prepares a blob for execution. The constant views have the contents, order and
    /// shapes of those `compile` saw (the external indices of the graph), but are borrowed
    /// for this call only and may sit at other addresses: copy what `execute` needs. The
    /// blob may come from disk, another build or another machine: refuse bytes you do not
    /// recognise with [`DelegateError::invalid`]. With the default blob, read it with
    /// [`wire::decode`] or hand it to [`GraphExec::new`].
    fn init(
        &self,
        device: u32,
        blob: &[u8],
        constants: &[TensorRef<'_>],
    ) -> Result<Self::Executable, DelegateError>;

    /// [`Delegate::init`] for blob bytes and constant data the host keeps alive until the
    /// executable is dropped (ABI 1.2 `init_retained`): an executable may point into
    /// `blob`, and into `retained_constants[i]` (the bytes of `constants[i]`), instead of
    /// copying what it keeps (see [`RetainedBlob`]). The default calls `init`, which is
    /// always correct; override it when the blob or the constants hold weights worth not
    /// copying.
    fn init_retained(
        &self,
        device: u32,
        blob: RetainedBlob,
        constants: &[TensorRef<'_>],
        retained_constants: &[RetainedBlob],
    ) -> Result<Self::Executable, DelegateError> {
        let _ = retained_constants;
        self.init(device, blob.bytes(), constants)
    }
}

/// An initialised partition.
pub trait Executable: Send + 'static {
    /// Runs the partition: `inputs` and `outputs` follow the subgraph's input and output
    /// order. Write every output in full.
    fn execute(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError>;

    /// The events of the last successful [`Executable::execute`], in the order they ran.
    ///
    /// The SDK asks right after each successful run and hands the answer to the host
    /// through the descriptor's `profile` entry point (ABI 1.1); a host built against 1.0
    /// never asks. The default reports nothing, which is always honest.
    fn profile(&self) -> Vec<ProfileEvent> {
        Vec::new()
    }

    /// The host memory this executable holds (ABI 1.2 `memory`), so that a host can show
    /// a whole model's memory, delegates included. `None`, the default, says "unknown".
    fn memory(&self) -> Option<MemoryUse> {
        None
    }
}

/// The host memory an executable holds, in bytes (see [`abi::MemoryInfo`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Working memory for a run: an arena of intermediates, scratch buffers.
    pub scratch_bytes: u64,
    /// Everything else it allocated: weights it copied or packed, tables, state.
    pub owned_bytes: u64,
    /// Bytes of a [`RetainedBlob`] it reads in place instead of copying.
    pub retained_bytes: u64,
}

/// One timed unit of work of a run (a command, a kernel launch), for `baton run --profile`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileEvent {
    /// What ran, for people ("conv_3 (Conv)").
    pub name: String,
    /// The kind of work ("CONV2D", "kernel").
    pub kind: String,
    /// The device's estimated or measured cycles; 0 if unknown.
    pub cycles: u64,
    /// Wall-clock nanoseconds spent on it; 0 if unknown.
    pub wall_ns: u64,
}

/// A descriptor and the strings it points to, built once per plugin.
pub struct StaticDescriptor {
    descriptor: abi::Descriptor,
    _strings: Vec<CString>,
    _specs: Vec<OptionSpec>,
}

// SAFETY: immutable after construction; the raw pointers point into the owned strings.
unsafe impl Sync for StaticDescriptor {}
// SAFETY: as above.
unsafe impl Send for StaticDescriptor {}

impl StaticDescriptor {
    /// Builds the descriptor of `D`.
    pub fn new<D: Delegate>() -> StaticDescriptor {
        let info = D::info();
        let mut strings = Vec::new();
        let mut cstr = |s: &str| -> *const c_char {
            let c = CString::new(s.replace('\0', " ")).expect("no interior NUL");
            let p = c.as_ptr();
            strings.push(c);
            p
        };
        let name = cstr(info.name);
        let version = cstr(info.version);
        let build_id = cstr(info.build_id);
        let specs: Vec<OptionSpec> = D::options()
            .iter()
            .map(|o| OptionSpec {
                name: cstr(o.name),
                kind: o.kind,
                reserved: 0,
                default_value: cstr(o.default),
                min: o.min,
                max: o.max,
                choices: if o.choices.is_empty() {
                    std::ptr::null()
                } else {
                    cstr(o.choices)
                },
                help: cstr(o.help),
            })
            .collect();
        let descriptor = abi::Descriptor {
            abi_major: abi::ABI_MAJOR,
            abi_minor: abi::ABI_MINOR,
            struct_size: std::mem::size_of::<abi::Descriptor>() as u32,
            concurrency: info.concurrency,
            name,
            version,
            build_id,
            features: info.features,
            option_count: specs.len() as u32,
            reserved: 0,
            options: specs.as_ptr(),
            create: glue::create::<D>,
            destroy_context: glue::destroy_context::<D>,
            last_error: glue::last_error,
            available: glue::available::<D>,
            device_count: glue::device_count::<D>,
            device_info: glue::device_info::<D>,
            supports: glue::supports::<D>,
            compile: glue::compile::<D>,
            blob_compatibility: glue::blob_compatibility::<D>,
            free_blob: glue::free_blob,
            init: glue::init::<D>,
            execute: glue::execute::<D>,
            destroy: glue::destroy::<D>,
            profile: Some(glue::profile::<D>),
            btir_minor: u32::from(D::BTIR_MINOR),
            capabilities: if D::BOUNDED_OUTPUTS {
                abi::CAP_BOUNDED_OUTPUTS
            } else {
                0
            },
            init_retained: Some(glue::init_retained::<D>),
            memory: Some(glue::memory::<D>),
        };
        StaticDescriptor {
            descriptor,
            _strings: strings,
            _specs: specs,
        }
    }

    /// The descriptor's address (stable: the value lives in a static).
    pub fn as_ptr(&self) -> *const abi::Descriptor {
        &self.descriptor
    }
}

/// Converts ABI tensor views into SDK views.
///
/// # Safety
/// Each view's `data`/`byte_len` and `shape`/`rank` must describe valid memory for `'a`.
pub unsafe fn views_from_abi<'a>(
    views: &'a [abi::TensorView],
) -> Result<Vec<TensorRef<'a>>, String> {
    views
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let dtype = DType::from_code(v.dtype)
                .ok_or_else(|| format!("view {i}: dtype code {}", v.dtype))?;
            if v.rank as usize > abi::MAX_RANK {
                return Err(format!("view {i}: rank {} above {}", v.rank, abi::MAX_RANK));
            }
            let dims: &[i64] = if v.rank == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(v.shape as *const i64, v.rank as usize)
            };
            if dims.iter().any(|&d| d < 0) {
                return Err(format!("view {i}: negative extent in {dims:?}"));
            }
            let shape: &[usize] = bytemuck::cast_slice(dims);
            let data: &[u8] = if v.byte_len == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(v.data as *const u8, v.byte_len as usize)
            };
            let elems = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            if elems.and_then(|e| e.checked_mul(dtype.size())) != Some(data.len()) {
                return Err(format!(
                    "view {i}: {} bytes do not fit shape {shape:?} of {dtype}",
                    data.len()
                ));
            }
            let quant_ptrs_ok = !v.quant.scales.is_null() && !v.quant.zero_points.is_null();
            if v.quant.kind != 0 && v.quant.count > 0 && !quant_ptrs_ok {
                return Err(format!("view {i}: null quantization arrays"));
            }
            let quant = match v.quant.kind {
                1 if v.quant.count >= 1 => Some(QuantRef::PerTensor {
                    scale: *v.quant.scales,
                    zero_point: *v.quant.zero_points,
                }),
                2 if v.quant.count >= 1 => Some(QuantRef::PerAxis {
                    axis: v.quant.axis as usize,
                    scales: std::slice::from_raw_parts(v.quant.scales, v.quant.count as usize),
                    zero_points: std::slice::from_raw_parts(
                        v.quant.zero_points,
                        v.quant.count as usize,
                    ),
                }),
                _ => None,
            };
            Ok(TensorRef {
                dtype,
                shape,
                data,
                quant,
            })
        })
        .collect()
}

/// The `extern "C"` functions behind every exported descriptor. Each one catches panics
/// and turns errors into a status plus the thread's last-error text.
mod glue;
