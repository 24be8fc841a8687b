//! Test helpers: the Vulkan plugin loaded through the host's ABI path, and comparison with
//! the host's reference executor (shared by the GPU delegates:
//! `backends/gpu-kernels/delegate-tests/common.rs`).
#![allow(dead_code)]

/// The plugin file's stem and the package that builds it.
pub const PLUGIN: &str = "baton_backend_vulkan";
pub const PLUGIN_CRATE: &str = "baton-backend-vulkan-plugin";
/// The backend's name in the host.
pub const BACKEND: &str = "vulkan";
/// How `create` says it found no device.
pub const NO_DEVICE: &str = "no Vulkan device";
/// Without a Vulkan loader the plugin fails before it looks for a device.
pub const EARLY_FAILURE: Option<&str> = Some("no Vulkan loader");

include!("../../../gpu-kernels/delegate-tests/common.rs");
