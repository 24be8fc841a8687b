//! The C ABI, version 1.0: `#[repr(C)]` mirrors of `include/baton_delegate.h`.
//!
//! The header is the normative text (it carries the ownership and threading rules); this
//! module must match it field for field. `tests/c_abi.rs` compiles a C plugin against the
//! header and checks `sizeof`/`offsetof` of every struct against these definitions, so a
//! drift fails CI.
//!
//! Versioning: a plugin built against ABI `M.n` is loadable by a host of the same major `M`.
//! Structs only grow at their end; `struct_size` says how much of a struct the other side
//! filled in, and a reader touches a field only when `struct_size` covers it.

use std::ffi::{c_char, c_void};

/// ABI major version. A different major is refused before any other call.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version of this build.
pub const ABI_MINOR: u32 = 0;
/// The one symbol a plugin exports.
pub const ENTRY_SYMBOL: &str = "baton_delegate_entry";
/// Size of the message buffer in [`SupportAnswer`].
pub const SUPPORT_MESSAGE_LEN: usize = 256;
/// The most dimensions a tensor view may have.
pub const MAX_RANK: usize = 8;

/// Status codes returned by every fallible entry point.
pub type Status = i32;
/// Success.
pub const STATUS_OK: Status = 0;
/// A plain failure; `last_error` says why.
pub const STATUS_ERROR: Status = 1;
/// The request is valid but not supported by this plugin.
pub const STATUS_UNSUPPORTED: Status = 2;
/// An argument is invalid (bad blob, wrong tensor count, ...).
pub const STATUS_INVALID_ARGUMENT: Status = 3;
/// The plugin panicked (Rust) or threw (C++); the call had no effect the host can rely on.
pub const STATUS_PANIC: Status = 4;

/// Reason codes of a declined node, so hosts and reports can group refusals.
pub mod reason {
    /// Supported.
    pub const NONE: u32 = 0;
    /// The op is not implemented by this plugin.
    pub const OP: u32 = 1;
    /// An operand dtype is not supported.
    pub const DTYPE: u32 = 2;
    /// A shape (rank, size, dynamic dimension) is outside what the plugin handles.
    pub const SHAPE: u32 = 3;
    /// An attribute value is not supported.
    pub const ATTRIBUTE: u32 = 4;
    /// An operand the plugin needs constant is computed at run time.
    pub const NOT_CONSTANT: u32 = 5;
    /// A resource limit (memory, buffer size) would be exceeded.
    pub const RESOURCE: u32 = 6;
    /// Anything else; the message explains.
    pub const OTHER: u32 = 7;

    /// A short name of a reason code.
    pub fn name(code: u32) -> &'static str {
        match code {
            NONE => "supported",
            OP => "op",
            DTYPE => "dtype",
            SHAPE => "shape",
            ATTRIBUTE => "attribute",
            NOT_CONSTANT => "not-constant",
            RESOURCE => "resource",
            _ => "other",
        }
    }
}

/// Concurrency of an executable handle.
pub mod concurrency {
    /// Calls on one handle must not overlap; different handles may run concurrently.
    pub const SERIALIZED_PER_HANDLE: u32 = 0;
    /// `execute` may be called on one handle from several threads at once.
    pub const REENTRANT: u32 = 1;
}

/// Answers of `blob_compatibility`.
pub mod compat {
    /// The blob runs as well as a fresh compile would.
    pub const OPTIMAL: u32 = 0;
    /// The blob runs, but recompiling would do better (e.g. a newer kernel set).
    pub const PREFER_RECOMPILE: u32 = 1;
    /// The blob cannot be used; recompile.
    pub const UNSUPPORTED: u32 = 2;
}

/// Option value kinds of an [`OptionSpec`].
pub mod option_kind {
    pub const BOOL: u32 = 0;
    pub const INT: u32 = 1;
    pub const FLOAT: u32 = 2;
    pub const STRING: u32 = 3;
    /// One of `choices`, a `|`-separated list.
    pub const ENUM: u32 = 4;
}

/// Quantization parameters of a tensor view. `kind`: 0 none, 1 per-tensor, 2 per-axis.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QuantView {
    pub kind: u32,
    pub axis: u32,
    pub count: u32,
    pub reserved: u32,
    pub scales: *const f32,
    pub zero_points: *const i32,
}

/// A tensor passed across the ABI. The host owns the memory; views are valid for the
/// duration of the call only. `data` is 64-byte aligned (or null when `byte_len` is 0).
///
/// For outputs of `execute` the host fills every field (`shape` holds the expected shape
/// in `MAX_RANK` writable slots); a plugin that produces a different shape writes it into
/// `rank`/`shape`, and the host refuses the result.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TensorView {
    pub data: *mut c_void,
    pub byte_len: u64,
    pub dtype: u32,
    pub rank: u32,
    pub shape: *mut i64,
    pub quant: QuantView,
}

/// A byte buffer allocated by the plugin; only the plugin's `free_blob` may release it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Blob {
    pub data: *mut u8,
    pub len: u64,
}

/// One device a plugin can run on.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceInfo {
    pub struct_size: u32,
    /// 0 CPU, 1 GPU, 2 NPU, 3 other.
    pub kind: u32,
    /// Null-terminated, owned by the plugin, valid while the context lives.
    pub name: *const c_char,
    /// Driver or firmware version; part of the probe cache key.
    pub driver_version: *const c_char,
    pub memory_bytes: u64,
}

/// The answer for one node of a `supports` query.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SupportAnswer {
    pub supported: u32,
    /// One of [`reason`]'s codes; `reason::NONE` when supported.
    pub reason_code: u32,
    /// Null-terminated explanation written by the plugin (empty when supported).
    pub message: [c_char; SUPPORT_MESSAGE_LEN],
}

/// A configuration option as passed to `create`: both strings null-terminated and
/// owned by the host for the duration of the call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptionValue {
    pub key: *const c_char,
    pub value: *const c_char,
}

/// Declaration of an option the plugin accepts. The host validates config against these
/// before calling `create`, so a typo is an error that names the key, not a silent default.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    pub name: *const c_char,
    pub kind: u32,
    pub reserved: u32,
    pub default_value: *const c_char,
    /// Inclusive range for INT and FLOAT.
    pub min: f64,
    pub max: f64,
    /// `|`-separated values for ENUM, else null.
    pub choices: *const c_char,
    pub help: *const c_char,
}

/// Opaque plugin context (one per loaded configuration).
pub type Context = *mut c_void;
/// Opaque executable handle (one per initialised partition).
pub type Handle = *mut c_void;

/// The descriptor returned by the entry symbol. Its address must stay valid until the
/// library is unloaded. The first three fields are frozen forever.
#[repr(C)]
pub struct Descriptor {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub struct_size: u32,
    pub concurrency: u32,
    pub name: *const c_char,
    pub version: *const c_char,
    pub build_id: *const c_char,
    pub features: u64,
    pub option_count: u32,
    pub reserved: u32,
    pub options: *const OptionSpec,

    pub create: unsafe extern "C" fn(*const OptionValue, u32, *mut Context) -> Status,
    pub destroy_context: unsafe extern "C" fn(Context),
    pub last_error: unsafe extern "C" fn() -> *const c_char,
    pub available: unsafe extern "C" fn(Context) -> u32,
    pub device_count: unsafe extern "C" fn(Context) -> u32,
    pub device_info: unsafe extern "C" fn(Context, u32, *mut DeviceInfo) -> Status,
    pub supports: unsafe extern "C" fn(
        Context,
        *const u8,
        u64,
        *const TensorView,
        u32,
        *mut SupportAnswer,
        u32,
    ) -> Status,
    pub compile: unsafe extern "C" fn(
        Context,
        u32,
        *const u8,
        u64,
        *const TensorView,
        u32,
        *mut Blob,
    ) -> Status,
    pub blob_compatibility: unsafe extern "C" fn(Context, *const u8, u64) -> u32,
    pub free_blob: unsafe extern "C" fn(Context, Blob),
    pub init: unsafe extern "C" fn(
        Context,
        u32,
        *const u8,
        u64,
        *const TensorView,
        u32,
        *mut Handle,
    ) -> Status,
    pub execute:
        unsafe extern "C" fn(Handle, *const TensorView, u32, *mut TensorView, u32) -> Status,
    pub destroy: unsafe extern "C" fn(Handle),
}

// SAFETY: the descriptor is immutable static data (strings and function pointers).
unsafe impl Sync for Descriptor {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl Send for Descriptor {}
// SAFETY: option specs are immutable static data.
unsafe impl Sync for OptionSpec {}
// SAFETY: as above.
unsafe impl Send for OptionSpec {}

/// Byte offset of the first function pointer; from here to the end of the v1 struct every
/// pointer-sized field is a function the host calls and must not be NULL.
pub const DESCRIPTOR_FN_OFFSET: usize = std::mem::offset_of!(Descriptor, create);

// Every TensorView shape is `i64` on the wire and `usize` in the SDK's views; they are the
// same type only on 64-bit targets, which is all Baton builds for today.
const _: () = assert!(
    std::mem::size_of::<usize>() == 8,
    "baton-delegate-api assumes a 64-bit target (shapes cross the ABI as i64 and are viewed as usize)"
);

/// The entry symbol's type.
pub type EntryFn = unsafe extern "C" fn() -> *const Descriptor;

/// Size of the complete v1 descriptor: a plugin whose `struct_size` is smaller cannot be
/// used (it lacks fields every v1 host calls).
pub const DESCRIPTOR_V1_SIZE: usize = std::mem::size_of::<Descriptor>();
