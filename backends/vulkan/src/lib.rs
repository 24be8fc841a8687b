//! The Baton Vulkan delegate: f32 (and, for some ops, f16) inference on Vulkan compute
//! through vulkano, with kernels written once in WGSL (`backends/gpu-kernels/wgsl`,
//! shared with the wgpu delegate) and compiled to SPIR-V by naga at build time.
//!
//! # Lifecycle
//!
//! - [`Delegate::create`] loads Vulkan and lists the devices with a compute queue. With
//!   no loader, no driver or no device passing `device_filter`, it fails with an error
//!   that says so, and the host falls back to its next backend.
//! - [`Delegate::supports`] claims a node exactly when it can be lowered to kernels for
//!   device 0 (the same code `compile` runs): f32, static shapes, rank ≤ 6, no empty
//!   tensor, every tensor within the device's `maxStorageBufferRange`, and the attributes
//!   implemented. f16 is claimed for element-wise ops (Add/Sub/Mul/Div, Expand, the
//!   unary activations, with fused activation chains), the layout copies (Reshape,
//!   Flatten, Squeeze, Unsqueeze, Identity, Transpose, Concat), pools,
//!   Softmax/LogSoftmax and MatMul/Gemm, on a device with shaderFloat16 +
//!   storageBuffer16BitAccess + uniformAndStorageBuffer16BitAccess (enabled when the
//!   device is opened). Those kernels compute and accumulate in f32 and round once to
//!   f16 on store, as the host reference does. Every other f16 node (Conv,
//!   LayerNormalization, the reductions) is declined with a reason saying that the op
//!   has f32 kernels only, or that the device lacks the features.
//! - [`Delegate::compile`] fuses activations into MatMul/Gemm/Conv/element-wise
//!   producers, chooses each kernel's variant from the device's subgroup size and limits,
//!   plans an arena for run-time tensors and writes a versioned blob (`blob.rs`).
//! - [`Delegate::init`] builds the pipelines (through a pipeline cache shared by every
//!   executable on the device) and uploads weights and kernel parameters once to
//!   device-local memory.
//! - [`Executable::execute`](baton_delegate_api::Executable::execute) copies the inputs
//!   in, runs the whole partition as one command buffer, and copies the outputs out.
//!
//! # Options
//!
//! - `device_filter` (default empty): use only devices whose name contains this text
//!   (case-insensitive), e.g. `llvmpipe` for Mesa's software driver. Matching nothing
//!   makes `create` fail cleanly, which is also how tests force "no device".

#![warn(missing_docs)]

mod error;
mod exec;
mod gpu;
mod kernels;
mod spirv;

use baton_delegate_api::abi::{concurrency, option_kind};
use baton_delegate_api::ir::Graph;
use baton_delegate_api::{
    BlobCompatibility, Constants, Delegate, DelegateError, Device, OptionDecl, Options, PluginInfo,
    Support, TensorRef,
};

pub use error::VulkanError;
pub use exec::VulkanExecutable;

use baton_gpu_kernels::CompileError;
use baton_gpu_kernels::{blob, plan, Limits};

use crate::gpu::Gpus;

baton_delegate_api::export_delegate!(VulkanDelegate);

/// The Vulkan delegate: the usable devices of one Vulkan instance.
pub struct VulkanDelegate {
    gpus: Gpus,
}

impl std::fmt::Debug for VulkanDelegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanDelegate")
            .field("devices", &self.devices())
            .finish()
    }
}

impl VulkanDelegate {
    /// The subgroup size of device `index` as the driver reports it (for tests and
    /// diagnostics: kernels never assume one).
    pub fn subgroup_size(&self, index: u32) -> Option<u32> {
        self.gpus.adapter(index).ok().map(|a| a.limits.subgroup)
    }
}

/// `<version>-<hash of the WGSL kernels>`: a build with other kernels has another id.
fn build_id() -> &'static str {
    concat!(env!("CARGO_PKG_VERSION"), "-", env!("BATON_VULKAN_KERNELS"))
}

impl Delegate for VulkanDelegate {
    type Executable = VulkanExecutable;

    fn info() -> PluginInfo {
        PluginInfo {
            name: "vulkan",
            version: env!("CARGO_PKG_VERSION"),
            build_id: build_id(),
            features: 0,
            concurrency: concurrency::SERIALIZED_PER_HANDLE,
        }
    }

    fn options() -> Vec<OptionDecl> {
        vec![OptionDecl {
            name: "device_filter",
            kind: option_kind::STRING,
            default: "",
            min: 0.0,
            max: 0.0,
            choices: "",
            help: "Use only Vulkan devices whose name contains this text (case-insensitive); \
                   empty: all devices.",
        }]
    }

    fn create(options: &Options) -> Result<VulkanDelegate, DelegateError> {
        let filter = options.get("device_filter").unwrap_or("");
        Ok(VulkanDelegate {
            gpus: Gpus::enumerate(filter)?,
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
            CompileError::Unsupported(m) => VulkanError::Unsupported(m).into(),
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
    ) -> Result<VulkanExecutable, DelegateError> {
        let plan = blob::decode(blob).map_err(VulkanError::Blob)?;
        let limits = self.gpus.adapter(device)?.limits;
        check_fits(&plan, &limits)?;
        let gpu = self.gpus.open(device)?;
        Ok(exec::build(gpu, &plan, constants)?)
    }
}

/// A blob compiled for other limits still runs if every dispatch fits this device.
fn check_fits(plan: &plan::Plan, limits: &Limits) -> Result<(), VulkanError> {
    baton_gpu_kernels::check_fits(plan, limits).map_err(VulkanError::Blob)
}
