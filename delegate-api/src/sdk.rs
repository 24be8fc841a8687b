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
pub use answers::{BlobCompatibility, Decline, DeclineReason};

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
    /// Declined, with a [`abi::reason`] code and an explanation for the user.
    No {
        /// An [`abi::reason`] code other than `NONE`, so reports can group refusals.
        reason: u32,
        /// What is missing, for the user ("dtype f16", "auto_pad SAME_LOWER"); cut to
        /// [`abi::SUPPORT_MESSAGE_LEN`] minus one bytes at a character boundary.
        message: String,
    },
}

impl Support {
    /// A refusal: `reason` is a [`DeclineReason`] (or, as C plugins give it, an
    /// [`abi::reason`] code).
    pub fn no(reason: impl Into<u32>, message: impl Into<String>) -> Support {
        Support::No {
            reason: reason.into(),
            message: message.into(),
        }
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

    /// Compiles a subgraph (every node of which you said you support) into a blob.
    fn compile(
        &self,
        device: u32,
        graph: &Graph,
        constants: Constants<'_>,
    ) -> Result<Vec<u8>, DelegateError>;

    /// Whether an existing blob can be used by this build: a [`BlobCompatibility`] code
    /// (`BlobCompatibility::Optimal.code()`; the `abi::compat` constants are the same).
    fn blob_compatibility(&self, blob: &[u8]) -> u32 {
        let _ = blob;
        BlobCompatibility::Optimal.code()
    }

    /// Prepares a blob for execution. The constant views are those passed at compile time.
    fn init(
        &self,
        device: u32,
        blob: &[u8],
        constants: &[TensorRef<'_>],
    ) -> Result<Self::Executable, DelegateError>;
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
mod glue {
    use super::*;

    thread_local! {
        static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    }

    fn set_error(msg: &str) {
        let c = CString::new(msg.replace('\0', " ")).expect("no NUL");
        LAST_ERROR.with(|e| *e.borrow_mut() = c);
    }

    /// Runs `f`, mapping `Err` and panics to a status and the last error.
    fn guard(what: &str, f: impl FnOnce() -> Result<(), DelegateError>) -> Status {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Ok(())) => abi::STATUS_OK,
            Ok(Err(e)) => {
                set_error(&e.message);
                if e.status == abi::STATUS_OK {
                    abi::STATUS_ERROR
                } else {
                    e.status
                }
            }
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".into());
                set_error(&format!("panic in {what}: {msg}"));
                abi::STATUS_PANIC
            }
        }
    }

    /// Like `guard` for entry points without a status: a panic yields `fallback`.
    fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
        catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
    }

    struct Ctx<D: Delegate> {
        delegate: D,
        devices: Vec<(Device, CString, CString)>,
    }

    struct Exec<D: Delegate> {
        exec: Mutex<D::Executable>,
        /// The last run's events with their strings, kept alive for the host to read.
        events: Mutex<Vec<(CString, CString, u64, u64)>>,
    }

    unsafe fn ctx<'a, D: Delegate>(c: Context) -> Result<&'a Ctx<D>, DelegateError> {
        (c as *const Ctx<D>)
            .as_ref()
            .ok_or_else(|| DelegateError::invalid("null context"))
    }

    unsafe fn bytes<'a>(p: *const u8, len: u64) -> &'a [u8] {
        if len == 0 || p.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p, len as usize)
        }
    }

    unsafe fn slice<'a, T>(p: *const T, n: u32) -> &'a [T] {
        if n == 0 || p.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p, n as usize)
        }
    }

    pub unsafe extern "C" fn create<D: Delegate>(
        opts: *const abi::OptionValue,
        n: u32,
        out: *mut Context,
    ) -> Status {
        guard("create", || {
            if out.is_null() {
                return Err(DelegateError::invalid("create: null result pointer"));
            }
            let mut given = Vec::new();
            for o in slice(opts, n) {
                if o.key.is_null() || o.value.is_null() {
                    return Err(DelegateError::invalid("null option key or value"));
                }
                let k = CStr::from_ptr(o.key).to_string_lossy().into_owned();
                let v = CStr::from_ptr(o.value).to_string_lossy().into_owned();
                given.push((k, v));
            }
            let options =
                Options::validate(&D::options(), &given).map_err(DelegateError::invalid)?;
            let delegate = D::create(&options)?;
            let devices = delegate
                .devices()
                .into_iter()
                .map(|d| {
                    let n = CString::new(d.name.replace('\0', " ")).expect("no NUL");
                    let v = CString::new(d.driver_version.replace('\0', " ")).expect("no NUL");
                    (d, n, v)
                })
                .collect();
            *out = Box::into_raw(Box::new(Ctx { delegate, devices })) as Context;
            Ok(())
        })
    }

    pub unsafe extern "C" fn destroy_context<D: Delegate>(c: Context) {
        guard_value((), || {
            if !c.is_null() {
                drop(Box::from_raw(c as *mut Ctx<D>));
            }
        })
    }

    pub unsafe extern "C" fn last_error() -> *const c_char {
        LAST_ERROR.with(|e| e.borrow().as_ptr())
    }

    pub unsafe extern "C" fn available<D: Delegate>(c: Context) -> u32 {
        guard_value(0, || {
            ctx::<D>(c)
                .map(|c| c.delegate.available() as u32)
                .unwrap_or(0)
        })
    }

    pub unsafe extern "C" fn device_count<D: Delegate>(c: Context) -> u32 {
        guard_value(0, || {
            ctx::<D>(c).map(|c| c.devices.len() as u32).unwrap_or(0)
        })
    }

    pub unsafe extern "C" fn device_info<D: Delegate>(
        c: Context,
        index: u32,
        out: *mut DeviceInfo,
    ) -> Status {
        guard("device_info", || {
            let c = ctx::<D>(c)?;
            let (d, name, ver) = c
                .devices
                .get(index as usize)
                .ok_or_else(|| DelegateError::invalid(format!("no device {index}")))?;
            if out.is_null() {
                return Err(DelegateError::invalid("null device info"));
            }
            let ours = std::mem::size_of::<DeviceInfo>();
            let info = DeviceInfo {
                struct_size: ours as u32,
                kind: d.kind,
                name: name.as_ptr(),
                driver_version: ver.as_ptr(),
                memory_bytes: d.memory_bytes,
            };
            // Write no more than the host's struct holds (an older host has a shorter one),
            // and report how much was filled.
            let theirs = (*out).struct_size as usize;
            if theirs < std::mem::size_of::<u32>() {
                return Err(DelegateError::invalid(format!(
                    "device info struct_size {theirs} is too small; set it to sizeof(BatonDeviceInfo)"
                )));
            }
            let n = theirs.min(ours);
            let info = DeviceInfo {
                struct_size: n as u32,
                ..info
            };
            std::ptr::copy_nonoverlapping(
                &info as *const DeviceInfo as *const u8,
                out as *mut u8,
                n,
            );
            Ok(())
        })
    }

    fn decode(graph: &[u8]) -> Result<Graph, DelegateError> {
        wire::decode(graph).map_err(|e| DelegateError::invalid(format!("graph: {e}")))
    }

    pub unsafe extern "C" fn supports<D: Delegate>(
        c: Context,
        graph: *const u8,
        len: u64,
        consts: *const abi::TensorView,
        n_consts: u32,
        answers: *mut SupportAnswer,
        n_answers: u32,
    ) -> Status {
        guard("supports", || {
            let c = ctx::<D>(c)?;
            let g = decode(bytes(graph, len))?;
            if n_answers as usize != g.nodes.len() {
                return Err(DelegateError::invalid(format!(
                    "{} answer slots for {} nodes",
                    n_answers,
                    g.nodes.len()
                )));
            }
            let views = views_from_abi(slice(consts, n_consts)).map_err(DelegateError::invalid)?;
            let result = c.delegate.supports(&g, Constants::new(&g, &views));
            if result.len() != g.nodes.len() {
                return Err(DelegateError::new(format!(
                    "plugin answered {} of {} nodes",
                    result.len(),
                    g.nodes.len()
                )));
            }
            if answers.is_null() && n_answers > 0 {
                return Err(DelegateError::invalid("null answers array"));
            }
            let out = std::slice::from_raw_parts_mut(answers, n_answers as usize);
            for (slot, s) in out.iter_mut().zip(result) {
                slot.message = [0; abi::SUPPORT_MESSAGE_LEN];
                match s {
                    Support::Yes => {
                        slot.supported = 1;
                        slot.reason_code = abi::reason::NONE;
                    }
                    Support::No { reason, message } => {
                        slot.supported = 0;
                        slot.reason_code = reason;
                        let bytes = message.as_bytes();
                        // Cut at a character boundary: the header promises UTF-8.
                        let mut n = bytes.len().min(abi::SUPPORT_MESSAGE_LEN - 1);
                        while !message.is_char_boundary(n) {
                            n -= 1;
                        }
                        for (d, &s) in slot.message.iter_mut().zip(&bytes[..n]) {
                            *d = s as c_char;
                        }
                    }
                }
            }
            Ok(())
        })
    }

    pub unsafe extern "C" fn compile<D: Delegate>(
        c: Context,
        device: u32,
        graph: *const u8,
        len: u64,
        consts: *const abi::TensorView,
        n_consts: u32,
        out: *mut Blob,
    ) -> Status {
        guard("compile", || {
            if out.is_null() {
                return Err(DelegateError::invalid("compile: null result pointer"));
            }
            let c = ctx::<D>(c)?;
            let g = decode(bytes(graph, len))?;
            let views = views_from_abi(slice(consts, n_consts)).map_err(DelegateError::invalid)?;
            let blob = c.delegate.compile(device, &g, Constants::new(&g, &views))?;
            let boxed = blob.into_boxed_slice();
            let len = boxed.len() as u64;
            *out = Blob {
                data: Box::into_raw(boxed) as *mut u8,
                len,
            };
            Ok(())
        })
    }

    pub unsafe extern "C" fn blob_compatibility<D: Delegate>(
        c: Context,
        blob: *const u8,
        len: u64,
    ) -> u32 {
        guard_value(abi::compat::UNSUPPORTED, || match ctx::<D>(c) {
            Ok(c) => c.delegate.blob_compatibility(bytes(blob, len)),
            Err(_) => abi::compat::UNSUPPORTED,
        })
    }

    pub unsafe extern "C" fn free_blob(_c: Context, blob: Blob) {
        guard_value((), || {
            if !blob.data.is_null() {
                let s = std::ptr::slice_from_raw_parts_mut(blob.data, blob.len as usize);
                drop(Box::from_raw(s));
            }
        })
    }

    pub unsafe extern "C" fn init<D: Delegate>(
        c: Context,
        device: u32,
        blob: *const u8,
        len: u64,
        consts: *const abi::TensorView,
        n_consts: u32,
        out: *mut Handle,
    ) -> Status {
        guard("init", || {
            if out.is_null() {
                return Err(DelegateError::invalid("init: null result pointer"));
            }
            let c = ctx::<D>(c)?;
            let views = views_from_abi(slice(consts, n_consts)).map_err(DelegateError::invalid)?;
            let exec = c.delegate.init(device, bytes(blob, len), &views)?;
            *out = Box::into_raw(Box::new(Exec::<D> {
                exec: Mutex::new(exec),
                events: Mutex::new(Vec::new()),
            })) as Handle;
            Ok(())
        })
    }

    pub unsafe extern "C" fn execute<D: Delegate>(
        h: Handle,
        inputs: *const abi::TensorView,
        n_in: u32,
        outputs: *mut abi::TensorView,
        n_out: u32,
    ) -> Status {
        guard("execute", || {
            let h = (h as *const Exec<D>)
                .as_ref()
                .ok_or_else(|| DelegateError::invalid("null handle"))?;
            let ins = views_from_abi(slice(inputs, n_in)).map_err(DelegateError::invalid)?;
            if outputs.is_null() && n_out > 0 {
                return Err(DelegateError::invalid("null output list"));
            }
            let out_views: &mut [abi::TensorView] = if n_out == 0 {
                &mut []
            } else {
                std::slice::from_raw_parts_mut(outputs, n_out as usize)
            };
            let mut outs = Vec::with_capacity(out_views.len());
            for (i, v) in out_views.iter().enumerate() {
                let dtype = DType::from_code(v.dtype).ok_or_else(|| {
                    DelegateError::invalid(format!("output {i}: dtype {}", v.dtype))
                })?;
                // Outputs always carry MAX_RANK writable shape slots (see the header).
                if v.shape.is_null()
                    || v.rank as usize > abi::MAX_RANK
                    || (v.byte_len > 0 && v.data.is_null())
                {
                    return Err(DelegateError::invalid(format!(
                        "output {i}: null pointer or rank above {}",
                        abi::MAX_RANK
                    )));
                }
                let dims = std::slice::from_raw_parts(v.shape as *const i64, v.rank as usize);
                if dims.iter().any(|&d| d < 0) {
                    return Err(DelegateError::invalid(format!(
                        "output {i}: negative extent in {dims:?}"
                    )));
                }
                let shape: &[usize] = bytemuck::cast_slice(dims);
                let elems = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
                if elems.and_then(|e| e.checked_mul(dtype.size())) != Some(v.byte_len as usize) {
                    return Err(DelegateError::invalid(format!(
                        "output {i}: {} bytes do not fit shape {shape:?} of {dtype}",
                        v.byte_len
                    )));
                }
                let data: &mut [u8] = if v.byte_len == 0 {
                    &mut []
                } else {
                    std::slice::from_raw_parts_mut(v.data as *mut u8, v.byte_len as usize)
                };
                outs.push(TensorMut::new(dtype, shape, data));
            }
            let mut exec = h.exec.lock().unwrap_or_else(|p| p.into_inner());
            let mut events = h.events.lock().unwrap_or_else(|p| p.into_inner());
            events.clear();
            exec.execute(&ins, &mut outs)?;
            let text = |s: &str| CString::new(s.replace('\0', " ")).expect("no NUL");
            *events = exec
                .profile()
                .iter()
                .map(|e| (text(&e.name), text(&e.kind), e.cycles, e.wall_ns))
                .collect();
            for (v, o) in out_views.iter_mut().zip(&outs) {
                let shape = o.shape();
                v.rank = shape.len() as u32;
                let dst = std::slice::from_raw_parts_mut(v.shape, shape.len());
                for (d, &s) in dst.iter_mut().zip(shape) {
                    *d = s as i64;
                }
            }
            Ok(())
        })
    }

    pub unsafe extern "C" fn profile<D: Delegate>(
        h: Handle,
        out: *mut abi::ProfileEvent,
        capacity: u32,
    ) -> u32 {
        guard_value(0, || {
            let Some(h) = (h as *const Exec<D>).as_ref() else {
                return 0;
            };
            let events = h.events.lock().unwrap_or_else(|p| p.into_inner());
            if !out.is_null() {
                let ours = std::mem::size_of::<abi::ProfileEvent>();
                for (i, (name, kind, cycles, wall_ns)) in
                    events.iter().take(capacity as usize).enumerate()
                {
                    let slot = out.add(i);
                    // Write no more than the host's struct holds, as for DeviceInfo.
                    let theirs = (*slot).struct_size as usize;
                    let n = theirs.min(ours);
                    if n < std::mem::size_of::<u32>() {
                        continue;
                    }
                    let e = abi::ProfileEvent {
                        struct_size: n as u32,
                        reserved: 0,
                        name: name.as_ptr(),
                        kind: kind.as_ptr(),
                        cycles: *cycles,
                        wall_ns: *wall_ns,
                    };
                    std::ptr::copy_nonoverlapping(
                        &e as *const abi::ProfileEvent as *const u8,
                        slot as *mut u8,
                        n,
                    );
                }
            }
            events.len() as u32
        })
    }

    pub unsafe extern "C" fn destroy<D: Delegate>(h: Handle) {
        guard_value((), || {
            if !h.is_null() {
                drop(Box::from_raw(h as *mut Exec<D>));
            }
        })
    }
}
