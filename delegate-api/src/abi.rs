//! The C ABI, version 1.2: `#[repr(C)]` mirrors of `include/baton_delegate.h`.
//!
//! The header is the normative text (it carries the ownership and threading rules); this
//! module must match it field for field. `tests/c_abi/` compiles a C plugin against the
//! header and checks `sizeof`/`offsetof` of every struct against these definitions, so a
//! drift fails CI.
//!
//! Versioning: a plugin built against ABI `M.n` is loadable by a host of the same major `M`.
//! Structs only grow at their end; `struct_size` says how much of a struct the other side
//! filled in, and a reader touches a field only when `struct_size` covers it.

use std::ffi::{c_char, c_void};

/// ABI major version. A different major is refused before any other call.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version of this build. 1.1 appended [`Descriptor::profile`] and
/// [`ProfileEvent`]; 1.2 appended [`Descriptor::btir_minor`],
/// [`Descriptor::init_retained`], [`Descriptor::memory`] and [`MemoryInfo`]; 1.3 gave
/// 1.2's reserved word a meaning, [`Descriptor::capabilities`] ([`CAP_BOUNDED_OUTPUTS`]).
pub const ABI_MINOR: u32 = 3;
/// [`Descriptor::capabilities`] bit (1.3): the plugin runs ops whose output extents depend
/// on operand values (NonMaxSuppression, Unique, Compress) given *bounded* outputs: each
/// such output arrives sized for an upper bound of its extents and the plugin reports the
/// extents it produced (see [`crate::shape::output_bounds`] and the header's section 6).
pub const CAP_BOUNDED_OUTPUTS: u32 = 1;
/// The BTIR minor a plugin without [`Descriptor::btir_minor`] (one built against ABI 1.0
/// or 1.1) is taken to read: the minor those ABI versions carried.
pub const BTIR_MINOR_BEFORE_1_2: u32 = 2;
/// The one symbol a plugin exports.
pub const ENTRY_SYMBOL: &str = "baton_delegate_entry";
/// Size of the message buffer in [`SupportAnswer`].
pub const SUPPORT_MESSAGE_LEN: usize = 256;
/// The most dimensions a tensor view may have.
pub const MAX_RANK: usize = 8;
/// The alignment, in bytes, of every tensor view's data and of an `init_retained` blob.
pub const DATA_ALIGNMENT: usize = 64;

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
    /// Exactly `true` or `false`; `min`, `max` and `choices` are ignored.
    pub const BOOL: u32 = 0;
    /// A decimal integer that must lie within the spec's inclusive `[min, max]`.
    pub const INT: u32 = 1;
    /// A decimal number that must lie within the spec's inclusive `[min, max]`.
    pub const FLOAT: u32 = 2;
    /// Any string; no range or choice applies.
    pub const STRING: u32 = 3;
    /// One of `choices`, a `|`-separated list.
    pub const ENUM: u32 = 4;
}

/// Quantization parameters of a tensor view. `kind`: 0 none, 1 per-tensor, 2 per-axis.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QuantView {
    /// `BATON_QUANT_*`: 0 none (a plain tensor), 1 per-tensor, 2 per-axis. The same
    /// values as the quant kinds of BTIR.
    pub kind: u32,
    /// For per-axis parameters, the dimension they run along (an index into `shape`).
    /// Meaningless for the other kinds.
    pub axis: u32,
    /// Number of entries in `scales` and in `zero_points`: 0 for none, 1 per-tensor, and
    /// for per-axis the extent of dimension `axis`.
    pub count: u32,
    /// Always zero: the padding before the pointers, made explicit. Readers ignore it.
    pub reserved: u32,
    /// `count` scales, the `scale` of `real = scale * (q - zero_point)`. NULL when `count`
    /// is 0. Owned by the host and valid for the call only: copy what you keep.
    pub scales: *const f32,
    /// `count` zero points, in the integer domain of the tensor's stored values, one per
    /// scale. NULL when `count` is 0. Owned by the host and valid for the call only.
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
    /// The first element. Aligned to 64 bytes (`BATON_DATA_ALIGNMENT`) in every view the
    /// host passes, so kernels may use aligned vector loads; NULL only when `byte_len` is 0.
    /// The pointer is `mut` because the same struct describes outputs: inputs and constants
    /// are read-only to the plugin. Of an output, the plugin writes every byte and nothing
    /// past `byte_len`.
    pub data: *mut c_void,
    /// Size of the data in bytes (not elements): exactly the product of `shape` times the
    /// element size of `dtype`. Views are dense and row-major, with no padding or strides.
    pub byte_len: u64,
    /// The element type, a `BATON_DTYPE_*` code (see [`DType::code`](crate::ir::DType::code)).
    pub dtype: u32,
    /// Number of dimensions, `0..=MAX_RANK`; rank 0 is a scalar holding one element.
    pub rank: u32,
    /// `rank` extents, each `>= 0`, borrowed from the host for the call. For outputs of
    /// `execute` it points at [`MAX_RANK`] writable slots whose first `rank` hold the
    /// expected extents; the plugin overwrites `rank` and these slots only to report the
    /// shape it actually produced.
    pub shape: *mut i64,
    /// Quantization parameters; `kind` 0 for a plain tensor.
    pub quant: QuantView,
}

/// A byte buffer allocated by the plugin; only the plugin's `free_blob` may release it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Blob {
    /// Start of the compiled bytes, allocated by the plugin. The host may read, copy and
    /// store them, but releases the allocation only by handing this same `Blob` back to
    /// `free_blob` on the context that compiled it, never with its own allocator. The bytes
    /// must be self-contained (no pointers), since they may be reused in another process.
    /// `free_blob` ignores a blob whose `data` is NULL.
    pub data: *mut u8,
    /// Length of the blob in bytes. Passed back unchanged to `free_blob`.
    pub len: u64,
}

/// One device a plugin can run on.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceInfo {
    /// In and out. Before the call the host sets it to the size of the struct as its build
    /// declares it. The plugin fills every v1.0 field, fills a field added by a later minor
    /// only when the host's size covers it, and on return sets `struct_size` to the number
    /// of bytes it filled in; the host reads no field beyond that.
    pub struct_size: u32,
    /// `BATON_DEVICE_*`: 0 CPU, 1 GPU, 2 NPU, 3 other.
    pub kind: u32,
    /// Null-terminated, owned by the plugin, valid while the context lives.
    pub name: *const c_char,
    /// Driver or firmware version, NUL-terminated, owned by the plugin, valid while the
    /// context lives. Part of the host's cache keys: blobs and probe results recorded under
    /// one driver version are not trusted under another, so report it faithfully.
    pub driver_version: *const c_char,
    /// Memory available to this device, in bytes; 0 if unknown.
    pub memory_bytes: u64,
}

/// The answer for one node of a `supports` query.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SupportAnswer {
    /// 1 if the plugin will run this node, 0 if it declines. Declining is an answer, not
    /// an error.
    pub supported: u32,
    /// One of [`reason`]'s codes; `reason::NONE` when supported.
    pub reason_code: u32,
    /// NUL-terminated UTF-8 explanation written by the plugin, cut to fit the buffer
    /// (terminator included); empty when supported. Users read it in partition reports, so
    /// it should name what is missing ("dtype f16", "op Conv not implemented").
    pub message: [c_char; SUPPORT_MESSAGE_LEN],
}

/// A configuration option as passed to `create`: both strings null-terminated and
/// owned by the host for the duration of the call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptionValue {
    /// The option's name, as declared in an [`OptionSpec`]'s `name`.
    pub key: *const c_char,
    /// The value as text (`"true"`, `"4"`, `"0.5"`, an enum choice), already checked by
    /// the host against the option's declaration.
    pub value: *const c_char,
}

/// Declaration of an option the plugin accepts. The host validates config against these
/// before calling `create`, so a typo is an error that names the key, not a silent default.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    /// The key users write in their configuration. Every string of a spec is
    /// NUL-terminated, owned by the plugin and valid as long as the descriptor.
    pub name: *const c_char,
    /// One of the [`option_kind`] codes.
    pub kind: u32,
    /// Always zero.
    pub reserved: u32,
    /// The value applied when the user gives none, written as a user would write it.
    pub default_value: *const c_char,
    /// Inclusive lower bound for INT and FLOAT; ignored for the other kinds.
    pub min: f64,
    /// Inclusive upper bound for INT and FLOAT; ignored for the other kinds.
    pub max: f64,
    /// `|`-separated values for ENUM, else null.
    pub choices: *const c_char,
    /// One line of help for the user.
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
    /// The [`ABI_MAJOR`] the plugin was built against. Frozen at offset 0: a host with
    /// another major refuses the plugin without reading any further field.
    pub abi_major: u32,
    /// The [`ABI_MINOR`] the plugin was built against. Frozen at offset 4; any minor of
    /// the host's major is accepted, in either direction.
    pub abi_minor: u32,
    /// The size in bytes of the descriptor as the plugin's build declares it. Frozen at
    /// offset 8. Below [`DESCRIPTOR_V1_SIZE`] the plugin is refused; a field a later minor
    /// appends is read only when `struct_size` covers it.
    pub struct_size: u32,
    /// A [`concurrency`] code: whether `execute` may overlap on one handle.
    pub concurrency: u32,
    /// The plugin's name, unique among the installed plugins. Every string of the
    /// descriptor is NUL-terminated and lives, unchanged, until the library is unloaded.
    pub name: *const c_char,
    /// The plugin's own version (for example `"0.1.0"`), shown to users.
    pub version: *const c_char,
    /// Identifies this build of the plugin. Part of the host's cache keys: change it
    /// whenever compiled blobs or support answers could change.
    pub build_id: *const c_char,
    /// Feature bits. None are defined in version 1.0, so it is 0.
    pub features: u64,
    /// Number of entries in `options`.
    pub option_count: u32,
    /// Always zero.
    pub reserved: u32,
    /// The options the plugin accepts, `option_count` entries; may be NULL when
    /// `option_count` is 0. Owned by the plugin, valid as long as the descriptor.
    pub options: *const OptionSpec,

    /// Creates a context from `option_count` key/value pairs, which the host has already
    /// validated against `options` (a careful plugin still refuses an unknown key with
    /// [`STATUS_INVALID_ARGUMENT`]). The pairs are borrowed for the call. On success the
    /// context is stored in the out-parameter; on failure nothing is stored and nothing is
    /// left for the host to release.
    pub create: unsafe extern "C" fn(*const OptionValue, u32, *mut Context) -> Status,
    /// Releases a context and everything it owns. The host has already destroyed its
    /// handles and freed its blobs, and nothing else runs on the context meanwhile. NULL
    /// is ignored.
    pub destroy_context: unsafe extern "C" fn(Context),
    /// The calling thread's last error text: NUL-terminated UTF-8, never NULL, valid until
    /// this thread's next call into the plugin. Meaningful only after a non-OK status.
    pub last_error: unsafe extern "C" fn() -> *const c_char,
    /// 1 if the context can run anything at all on this machine, else 0. Only a hint: the
    /// host proves availability by compiling and running a small probe graph.
    pub available: unsafe extern "C" fn(Context) -> u32,
    /// Number of devices of the context; valid device indices are `0..count`.
    pub device_count: unsafe extern "C" fn(Context) -> u32,
    /// Fills the host-allocated [`DeviceInfo`] for the device at the given index,
    /// following its `struct_size` rule.
    pub device_info: unsafe extern "C" fn(Context, u32, *mut DeviceInfo) -> Status,
    /// Answers, for each node of a BTIR graph (`graph`, `graph_len` bytes), whether the
    /// plugin runs it. The constant views (`consts`, `const_count`) are those the graph's
    /// external tensors index. The answer array has `answer_count` slots, which must
    /// equal the number of nodes; slot `i` is for node `i`, and the plugin writes every
    /// one. Declining every node is still [`STATUS_OK`]; a non-OK status means the
    /// question could not be answered, and the host then treats every node as declined.
    pub supports: unsafe extern "C" fn(
        Context,
        *const u8,
        u64,
        *const TensorView,
        u32,
        *mut SupportAnswer,
        u32,
    ) -> Status,
    /// Compiles a BTIR subgraph, every node of which `supports` accepted, for the device
    /// at the given index, into a blob stored in the out-parameter (released later with
    /// `free_blob`). Every shape is fixed. May run ahead of time on another machine with
    /// the same plugin build. [`STATUS_UNSUPPORTED`] makes the host run the subgraph
    /// elsewhere.
    pub compile: unsafe extern "C" fn(
        Context,
        u32,
        *const u8,
        u64,
        *const TensorView,
        u32,
        *mut Blob,
    ) -> Status,
    /// Whether stored blob bytes can be used by this build: a [`compat`] code. The bytes
    /// may be stale or corrupt; they are examined, never trusted.
    pub blob_compatibility: unsafe extern "C" fn(Context, *const u8, u64) -> u32,
    /// Releases a blob that `compile` returned on this context. A blob whose `data` is
    /// NULL is ignored.
    pub free_blob: unsafe extern "C" fn(Context, Blob),
    /// Prepares blob bytes (from `compile`, possibly loaded from disk) for execution on
    /// the device at the given index and stores the handle in the out-parameter. The blob
    /// bytes are borrowed for the call only; the constant views have the same order and
    /// contents as at compile time, though possibly other addresses. A corrupt or foreign
    /// blob is refused with [`STATUS_INVALID_ARGUMENT`].
    pub init: unsafe extern "C" fn(
        Context,
        u32,
        *const u8,
        u64,
        *const TensorView,
        u32,
        *mut Handle,
    ) -> Status,
    /// Runs a partition: the inputs follow the subgraph's input list and the outputs its
    /// output list. The plugin checks both counts ([`STATUS_INVALID_ARGUMENT`] on a
    /// mismatch) and each view's dtype, shape and `byte_len`, and writes every output in
    /// full. A failed call leaves the handle usable.
    pub execute:
        unsafe extern "C" fn(Handle, *const TensorView, u32, *mut TensorView, u32) -> Status,
    /// Releases a handle; it never overlaps another call on that handle. NULL is ignored.
    pub destroy: unsafe extern "C" fn(Handle),

    /// Added in 1.1; may be NULL (no profiling), and a host reads it only when
    /// `struct_size` is at least [`DESCRIPTOR_V1_1_SIZE`]. After a successful `execute`
    /// on the handle, writes up to `capacity` events of that run into the host's array
    /// (each following the [`ProfileEvent::struct_size`] rule) and returns how many
    /// events the run has in all, so a host with too small an array can ask again. A
    /// NULL array with capacity 0 only counts. Never fails; a handle that has not run,
    /// or whose last run failed, has 0 events. Calls on one handle never overlap, as for
    /// `execute`.
    pub profile: Option<unsafe extern "C" fn(Handle, *mut ProfileEvent, u32) -> u32>,

    /// Added in 1.2: the highest BTIR minor version (of [`crate::wire::WIRE_MAJOR`]) the
    /// plugin reads. The host sends it no graph holding a code of a later minor; a node
    /// that needs one is declined for this plugin before `supports` is asked. A plugin
    /// whose `struct_size` does not cover it reads [`BTIR_MINOR_BEFORE_1_2`].
    pub btir_minor: u32,
    /// Added in 1.2 as a reserved zero word; since 1.3 the `CAP_*` bits of what the
    /// plugin can do beyond the base contract. A host reads it only from a plugin whose
    /// `abi_minor` is at least 3 (a 1.2 plugin's zero means no capability either way).
    pub capabilities: u32,
    /// Added in 1.2; may be NULL (the host then calls `init`). `init` with one difference:
    /// the blob bytes, and the bytes each constant view's `data` points at, stay valid,
    /// readable and unchanged until `destroy` on the handle made (the view structs and
    /// their arrays are still borrowed for the call). The blob is [`DATA_ALIGNMENT`]-
    /// aligned like every view, so the plugin may keep pointers into them (packed weights,
    /// an embedding table) instead of copying. A host calls it only when it can keep that
    /// promise (it maps a program file, or keeps a compiled blob and the graph's constants
    /// for the handle's life).
    pub init_retained: Option<
        unsafe extern "C" fn(
            Context,
            u32,
            *const u8,
            u64,
            *const TensorView,
            u32,
            *mut Handle,
        ) -> Status,
    >,
    /// Added in 1.2; may be NULL. Fills the host's [`MemoryInfo`] (following its
    /// `struct_size` rule) with the host memory the handle holds; [`STATUS_UNSUPPORTED`]
    /// when the plugin does not know. Never overlaps another call on the handle.
    pub memory: Option<unsafe extern "C" fn(Handle, *mut MemoryInfo) -> Status>,
}

/// The host memory an executable handle holds (added in 1.2), as `memory` reports it, so
/// a host can show a whole model's memory with its delegates' share. Device memory is
/// not counted here.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryInfo {
    /// In and out, as in [`DeviceInfo`]: the host sets it to the size its build declares,
    /// the plugin fills the fields that size covers and sets it to the bytes it filled.
    pub struct_size: u32,
    /// Always zero.
    pub reserved: u32,
    /// Working memory for a run: an arena of intermediates, scratch buffers.
    pub scratch_bytes: u64,
    /// Everything else the handle allocated: weights it copied or packed, tables, state.
    pub owned_bytes: u64,
    /// Bytes of an `init_retained` blob the handle points into instead of copying (the
    /// host counts them once, as the blob).
    pub retained_bytes: u64,
}

/// One event of a run, as `profile` reports it (added in 1.1): a unit of work the plugin
/// chose to time (a command of an NPU command stream, a kernel launch, an operator).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProfileEvent {
    /// In and out, as in [`DeviceInfo`]: the host sets it to the size its build declares,
    /// the plugin fills the fields that size covers and sets it to the bytes it filled.
    pub struct_size: u32,
    /// Always zero.
    pub reserved: u32,
    /// What ran, for people ("conv_3 rows 0-7"): NUL-terminated UTF-8 owned by the plugin,
    /// valid until the next `execute` or `destroy` on the handle.
    pub name: *const c_char,
    /// The kind of work ("CONV2D", "kernel"), with the same ownership as `name`.
    pub kind: *const c_char,
    /// The device's estimated or measured cycle count; 0 if unknown.
    pub cycles: u64,
    /// Wall-clock time the plugin spent on it, in nanoseconds; 0 if unknown.
    pub wall_ns: u64,
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

/// Size of the complete v1.0 descriptor (up to and including `destroy`): a plugin whose
/// `struct_size` is smaller cannot be used (it lacks fields every v1 host calls).
pub const DESCRIPTOR_V1_SIZE: usize = std::mem::offset_of!(Descriptor, profile);

/// Size of the v1.1 descriptor, which ends with `profile`: a plugin whose `struct_size` is
/// smaller was built against 1.0 and has no profiling.
pub const DESCRIPTOR_V1_1_SIZE: usize = std::mem::offset_of!(Descriptor, btir_minor);

/// Size of the v1.2 descriptor, which ends with `memory`.
pub const DESCRIPTOR_V1_2_SIZE: usize = std::mem::size_of::<Descriptor>();
