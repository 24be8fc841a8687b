//! The Baton runtime's C API: `libbaton` (`.so` and `.a`) and its header,
//! `capi/include/baton.h`, which is the normative text of the contract (what each call
//! does, who owns what, the status codes).
//!
//! # Why a crate of its own
//!
//! The C library could have been one more `crate-type` of `baton-runtime-host`. It is not,
//! so that every build of the host (each test binary, the CLI, the conformance kit) does
//! not also link a C shared and static library it never uses, and so that the host's Rust
//! API stays free of `extern "C"` and raw pointers. This crate is the one place where they
//! live: a thin layer of opaque handles over [`baton_runtime_host`], with every entry point
//! behind one guard (`guard`), so that no panic unwinds into C and every failure becomes a status
//! code with a thread-local message ([`baton_last_error`]).
//!
//! Like the host it links no backend: an engine gets its plugins from its config (plugin
//! files), or runs everything on the host's portable kernels when given none.
//!
//! # Safety
//!
//! The entry points take raw pointers from C. Each one checks what can be checked: NULL,
//! the kind of a handle (every handle starts with a tag), UTF-8, indices and
//! buffer sizes. What cannot be checked (a dangling or misaligned pointer, a buffer shorter
//! than the size the caller claims) is the caller's contract, as the header says.

#![allow(clippy::missing_safety_doc)] // the contract is the header's text (see above)

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use baton_runtime_host::HostError;

mod check;
mod engine;
mod model;
mod session;
mod tensor;

pub use check::*;
pub use engine::*;
pub use model::*;
pub use session::*;
pub use tensor::{BatonDim, BatonStatePair, BatonTensor, BatonTensorInfo, MAX_RANK};

/// The header's `BATON_API_MAJOR`.
pub const API_MAJOR: u32 = 1;
/// The header's `BATON_API_MINOR`.
pub const API_MINOR: u32 = 0;

/// A call's outcome, as the header's `BATON_OK` and `BATON_ERROR_*` codes.
pub type BatonResult = i32;

pub const BATON_OK: BatonResult = 0;
pub const BATON_ERROR_INVALID_ARGUMENT: BatonResult = 1;
pub const BATON_ERROR_CONFIG: BatonResult = 2;
pub const BATON_ERROR_MODEL: BatonResult = 3;
pub const BATON_ERROR_INPUT: BatonResult = 4;
pub const BATON_ERROR_BUFFER_TOO_SMALL: BatonResult = 5;
pub const BATON_ERROR_PLUGIN: BatonResult = 6;
pub const BATON_ERROR_RUNTIME: BatonResult = 7;
pub const BATON_ERROR_INTERNAL: BatonResult = 8;

/// Why a call failed, before it becomes a status code and a message.
#[derive(Debug, thiserror::Error)]
pub enum CapiError {
    /// A required pointer was NULL.
    #[error("{arg} is NULL")]
    Null { arg: &'static str },
    /// A handle of another kind, or one already freed (when its memory still says so).
    #[error("{arg} is not a live {kind} handle")]
    WrongHandle {
        arg: &'static str,
        kind: &'static str,
    },
    /// Text that is not UTF-8.
    #[error("{arg} is not UTF-8")]
    Utf8 { arg: &'static str },
    /// An index past a count.
    #[error("{what} index {index} is out of range (there are {count})")]
    Index {
        what: &'static str,
        index: usize,
        count: usize,
    },
    /// Any other argument the caller got wrong (an unknown dtype, a name the model does
    /// not have, a rank over the limit).
    #[error("{0}")]
    Argument(String),
    /// What the runtime said.
    #[error(transparent)]
    Host(#[from] HostError),
    /// What the runtime said while reading a model file (an unreadable file included).
    #[error(transparent)]
    Model(HostError),
    /// What the runtime said while reading a config (an unreadable file included).
    #[error(transparent)]
    Config(HostError),
}

impl CapiError {
    /// The status code of this error.
    pub fn status(&self) -> BatonResult {
        match self {
            CapiError::Null { .. }
            | CapiError::WrongHandle { .. }
            | CapiError::Utf8 { .. }
            | CapiError::Index { .. }
            | CapiError::Argument(_) => BATON_ERROR_INVALID_ARGUMENT,
            CapiError::Host(e) => host_status(e),
            CapiError::Model(e) => match host_status(e) {
                BATON_ERROR_RUNTIME => BATON_ERROR_MODEL,
                other => other,
            },
            CapiError::Config(e) => match host_status(e) {
                BATON_ERROR_RUNTIME => BATON_ERROR_CONFIG,
                other => other,
            },
        }
    }
}

/// The status code of a runtime error: the caller's config, model or inputs, a lent
/// buffer, a plugin, or the rest.
fn host_status(e: &HostError) -> BatonResult {
    match e {
        HostError::Config { .. } | HostError::PluginOption { .. } => BATON_ERROR_CONFIG,
        HostError::RequiredPlugin { .. } => BATON_ERROR_CONFIG,
        HostError::Model { .. } | HostError::Program(_) | HostError::Ir(_) => BATON_ERROR_MODEL,
        HostError::Input { .. }
        | HostError::InputCount { .. }
        | HostError::UnusedBound { .. }
        | HostError::Npy { .. } => BATON_ERROR_INPUT,
        HostError::OutputBuffer { .. } => BATON_ERROR_BUFFER_TOO_SMALL,
        HostError::PluginLoad { .. }
        | HostError::MissingEntry { .. }
        | HostError::AbiMismatch { .. }
        | HostError::DescriptorTooShort { .. }
        | HostError::HashMismatch { .. }
        | HostError::PluginCall { .. } => BATON_ERROR_PLUGIN,
        _ => BATON_ERROR_RUNTIME,
    }
}

pub(crate) type Result<T> = std::result::Result<T, CapiError>;

thread_local! {
    /// The message of this thread's last failed call.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    // A message with a NUL byte (from a model's own strings) is cut there rather than lost.
    let message = match CString::new(message) {
        Ok(c) => c,
        Err(e) => {
            let end = e.nul_position();
            let mut bytes = e.into_vec();
            bytes.truncate(end);
            CString::new(bytes).unwrap_or_default()
        }
    };
    LAST_ERROR.with(|slot| *slot.borrow_mut() = message);
}

/// Runs one entry point's body: its error becomes a status code and this thread's last
/// error, and a panic is caught here, at the boundary, and said as
/// `BATON_ERROR_INTERNAL` (unwinding into C is undefined behaviour).
pub(crate) fn guard(call: &'static str, body: impl FnOnce() -> Result<()>) -> BatonResult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => BATON_OK,
        Ok(Err(e)) => {
            set_last_error(format!("{call}: {e}"));
            e.status()
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            set_last_error(format!("{call}: internal error (a bug in Baton): {what}"));
            BATON_ERROR_INTERNAL
        }
    }
}

/// The text `p` points to.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, arg: &'static str) -> Result<&'a str> {
    if p.is_null() {
        return Err(CapiError::Null { arg });
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| CapiError::Utf8 { arg })
}

/// The slice of `n` elements `p` points to; NULL is accepted for an empty one.
///
/// # Safety
/// `p` is NULL or points to `n` initialised elements that outlive `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: usize, arg: &'static str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(CapiError::Null { arg });
    }
    Ok(std::slice::from_raw_parts(p, n))
}

/// Writes `value` where an out-pointer points.
///
/// # Safety
/// `out` is NULL or valid for a write of a `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T, arg: &'static str) -> Result<()> {
    if out.is_null() {
        return Err(CapiError::Null { arg });
    }
    out.write(value);
    Ok(())
}

/// The first field of every handle: says what kind of handle a pointer is, so a session
/// passed where an engine is expected (or a handle already freed, while its memory still
/// holds the cleared tag) is refused instead of misread.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tag {
    Engine = 0x4241_544f_4e45_4e47,
    Model = 0x4241_544f_4e4d_4f44,
    Session = 0x4241_544f_4e53_4553,
}

/// The handle `p` points to, checked for NULL and for its tag.
///
/// # Safety
/// `p` is NULL or points to at least 8 readable bytes; when its tag matches, to a live `T`.
pub(crate) unsafe fn handle<'a, T: Tagged>(p: *const T, arg: &'static str) -> Result<&'a T> {
    if p.is_null() {
        return Err(CapiError::Null { arg });
    }
    // Every handle is `#[repr(C)]` with its tag first.
    let tag = (p as *const u64).read();
    if tag != T::TAG as u64 {
        return Err(CapiError::WrongHandle { arg, kind: T::KIND });
    }
    Ok(&*p)
}

/// [`handle`], mutable.
///
/// # Safety
/// As [`handle`], and no other reference to the handle is live.
pub(crate) unsafe fn handle_mut<'a, T: Tagged>(p: *mut T, arg: &'static str) -> Result<&'a mut T> {
    handle(p as *const T, arg)?;
    Ok(&mut *p)
}

/// Frees a handle made by `Box::into_raw`, clearing its tag first so a second free or a
/// later use is refused while the memory still holds it.
///
/// # Safety
/// `p` is NULL or a live handle of this kind, not used again.
pub(crate) unsafe fn free<T: Tagged>(p: *mut T, call: &'static str) {
    if p.is_null() {
        return;
    }
    guard(call, || {
        handle(p as *const T, "the handle")?;
        (p as *mut u64).write(0);
        drop(Box::from_raw(p));
        Ok(())
    });
}

/// A handle type: `#[repr(C)]` with a [`Tag`] as its first field.
pub(crate) trait Tagged {
    const TAG: Tag;
    const KIND: &'static str;
}

/// `(BATON_API_MAJOR << 16) | BATON_API_MINOR` of this library.
#[no_mangle]
pub extern "C" fn baton_api_version() -> u32 {
    (API_MAJOR << 16) | API_MINOR
}

/// The message of this thread's last failed call, valid until its next failing call.
#[no_mangle]
pub extern "C" fn baton_last_error() -> *const c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

/// A C string of `s`, NUL bytes cut (names come from model files).
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}
