//! Test helpers: the wgpu plugin loaded through the host's ABI path, and comparison with
//! the host's reference executor (shared by the GPU delegates:
//! `backends/gpu-kernels/delegate-tests/common.rs`).
#![allow(dead_code)]

/// The plugin file's stem and the package that builds it.
pub const PLUGIN: &str = "baton_backend_wgpu";
pub const PLUGIN_CRATE: &str = "baton-backend-wgpu-plugin";
/// The backend's name in the host.
pub const BACKEND: &str = "wgpu";
/// How `create` says it found no adapter.
pub const NO_DEVICE: &str = "no wgpu adapter";
/// wgpu loads its backends' runtimes itself and reports their absence as no adapter.
pub const EARLY_FAILURE: Option<&str> = None;

include!("../../../gpu-kernels/delegate-tests/common.rs");
