//! The backends linked into `baton`, one per cargo feature (`cpu`, the default, `vulkan`,
//! `npu-sim`).
//!
//! Each backend registers its entry point when linked (`export_delegate!`, see
//! `baton_delegate_api::entry`), and the host finds it by name (`builtin = "cpu"`). Nothing
//! here calls a backend, so each is named with `as _`: that is what makes rustc link a crate
//! the program never calls, and with it the registration.

#[cfg(feature = "cpu")]
use baton_backend_cpu as _;
#[cfg(feature = "npu-sim")]
use baton_backend_npu_sim as _;
#[cfg(feature = "vulkan")]
use baton_backend_vulkan as _;
