//! The Baton wgpu delegate: the GPU delegate for every platform wgpu reaches (Vulkan,
//! Metal on every Apple device, DirectX 12), running the same WGSL kernels as the
//! Vulkan delegate (`backends/gpu-kernels/wgsl`, loaded as they are and compiled by wgpu
//! at run time) with the same lowering, plan and blob (`baton-gpu-kernels`), so both
//! claim the same nodes and decline the rest with the same reasons.
//!
//! # Lifecycle
//!
//! - [`Delegate::create`] makes a wgpu instance (no surface) on the backends asked for
//!   and lists the adapters that run compute shaders with the 7 storage bindings every
//!   kernel has. With none (no driver, nothing passing `device_filter`), it fails with an
//!   error that says so, and the host falls back to its next backend.
//! - [`Delegate::devices`] reports each adapter's name, and as its driver version the
//!   driver, driver info, backend and PCI ids: they feed the host's probe cache key.
//! - [`Delegate::supports`] and [`Delegate::compile`] run the shared lowering with the
//!   adapter's limits (workgroup sizes and counts, shared memory, the storage binding
//!   size). f16 is claimed where the shared kernels have f16 variants and the adapter
//!   has `Features::SHADER_F16`; otherwise f16 nodes are declined with that reason.
//! - [`Delegate::init`] compiles each kernel once per device (the workgroup size passed
//!   as the WGSL `override`'s pipeline constant), builds one bind group per dispatch, and
//!   writes the weights and parameters once.
//! - [`Executable::execute`](baton_delegate_api::Executable::execute) writes the inputs,
//!   records the partition into one command encoder, submits it, and reads the outputs
//!   back through a mapped staging buffer.
//!
//! # Options
//!
//! - `device_filter` (default empty): use only adapters whose name contains this text
//!   (case-insensitive), e.g. `llvmpipe` for Mesa's software Vulkan driver.
//! - `backends` (default empty: all built): a comma-separated list of `vulkan`, `metal`,
//!   `dx12`.

#![warn(missing_docs)]

mod error;
mod exec;
mod gpu;

use std::sync::OnceLock;

use baton_delegate_api::abi::{concurrency, option_kind};
use baton_delegate_api::ir::Graph;
use baton_delegate_api::{
    BlobCompatibility, Constants, Delegate, DelegateError, Device, OptionDecl, Options, PluginInfo,
    Support, TensorRef,
};
use baton_gpu_kernels::blob;
use baton_gpu_kernels::CompileError;

pub use error::WgpuError;
pub use exec::WgpuExecutable;

use crate::gpu::Gpus;

baton_delegate_api::export_delegate!(WgpuDelegate);

/// The wgpu delegate: the usable adapters of one wgpu instance.
pub struct WgpuDelegate {
    gpus: Gpus,
}

impl std::fmt::Debug for WgpuDelegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuDelegate")
            .field("devices", &self.devices())
            .finish()
    }
}

impl WgpuDelegate {
    /// The subgroup size the plans of adapter `index` are made for (for tests and
    /// diagnostics: kernels never assume one).
    pub fn subgroup_size(&self, index: u32) -> Option<u32> {
        self.gpus.adapter(index).ok().map(|a| a.limits.subgroup)
    }
}

/// `<version>-<hash of the WGSL kernels>`: a build with other kernels has another id.
fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        format!(
            "{}-{}",
            env!("CARGO_PKG_VERSION"),
            baton_gpu_kernels::kernels_hash()
        )
    })
}

impl Delegate for WgpuDelegate {
    type Executable = WgpuExecutable;

    fn info() -> PluginInfo {
        PluginInfo {
            name: "wgpu",
            version: env!("CARGO_PKG_VERSION"),
            build_id: build_id(),
            features: 0,
            // As the Vulkan delegate: an executable owns its arena and staging buffer,
            // so calls on one handle are serialized; wgpu itself is Send + Sync, so
            // handles run concurrently.
            concurrency: concurrency::SERIALIZED_PER_HANDLE,
        }
    }

    fn options() -> Vec<OptionDecl> {
        vec![
            OptionDecl {
                name: "device_filter",
                kind: option_kind::STRING,
                default: "",
                min: 0.0,
                max: 0.0,
                choices: "",
                help: "Use only adapters whose name contains this text (case-insensitive); \
                       empty: all adapters.",
            },
            OptionDecl {
                name: "backends",
                kind: option_kind::STRING,
                default: "",
                min: 0.0,
                max: 0.0,
                choices: "",
                help: "Comma-separated wgpu backends to search: vulkan, metal, dx12; \
                       empty: all of them.",
            },
        ]
    }

    fn create(options: &Options) -> Result<WgpuDelegate, DelegateError> {
        let backends = gpu::parse_backends(options.get("backends").unwrap_or(""))?;
        let filter = options.get("device_filter").unwrap_or("");
        Ok(WgpuDelegate {
            gpus: Gpus::enumerate(backends, filter)?,
        })
    }

    fn devices(&self) -> Vec<Device> {
        self.gpus
            .adapters()
            .iter()
            .map(|a| a.report.clone())
            .collect()
    }

    fn supports(&self, graph: &Graph, constants: Constants<'_>) -> Vec<Support> {
        let limits = self.gpus.adapter(0).map(|a| a.limits);
        baton_gpu_kernels::supports(graph, &constants, limits.map_err(|e| e.to_string()))
    }

    fn compile(
        &self,
        device: u32,
        graph: &Graph,
        constants: Constants<'_>,
    ) -> Result<Vec<u8>, DelegateError> {
        let limits = self.gpus.adapter(device)?.limits;
        baton_gpu_kernels::compile(graph, &constants, limits).map_err(|e| match e {
            CompileError::Invalid(m) => DelegateError::invalid(m),
            CompileError::Unsupported(m) => WgpuError::Unsupported(m).into(),
        })
    }

    fn blob_compatibility(&self, blob: &[u8]) -> BlobCompatibility {
        let limits = self.gpus.adapter(0).ok().map(|a| a.limits);
        baton_gpu_kernels::blob_compatibility(blob, limits)
    }

    fn init(
        &self,
        device: u32,
        blob: &[u8],
        constants: &[TensorRef<'_>],
    ) -> Result<WgpuExecutable, DelegateError> {
        let plan = blob::decode(blob).map_err(WgpuError::Blob)?;
        let limits = self.gpus.adapter(device)?.limits;
        baton_gpu_kernels::check_fits(&plan, &limits).map_err(WgpuError::Blob)?;
        let gpu = self.gpus.open(device)?;
        Ok(exec::build(gpu, &plan, constants)?)
    }
}
