//! Vulkan instance, device enumeration and the per-device context (queue, allocators,
//! pipeline layout, pipeline cache) shared by every executable on that device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use baton_delegate_api::Device as DeviceReport;
use baton_gpu_kernels::devices::Devices;
use vulkano::command_buffer::allocator::StandardCommandBufferAllocator;
use vulkano::descriptor_set::allocator::StandardDescriptorSetAllocator;
use vulkano::descriptor_set::layout::{
    DescriptorSetLayout, DescriptorSetLayoutBinding, DescriptorSetLayoutCreateInfo, DescriptorType,
};
use vulkano::device::physical::{PhysicalDevice, PhysicalDeviceType, SubgroupFeatures};
use vulkano::device::{
    Device, DeviceCreateInfo, DeviceExtensions, DeviceFeatures, Queue, QueueCreateInfo, QueueFlags,
};
use vulkano::instance::{Instance, InstanceCreateFlags, InstanceCreateInfo};
use vulkano::memory::allocator::StandardMemoryAllocator;
use vulkano::memory::MemoryHeapFlags;
use vulkano::pipeline::cache::{PipelineCache, PipelineCacheCreateInfo};
use vulkano::pipeline::compute::ComputePipelineCreateInfo;
use vulkano::pipeline::layout::PipelineLayoutCreateInfo;
use vulkano::pipeline::{ComputePipeline, PipelineLayout, PipelineShaderStageCreateInfo};
use vulkano::shader::{ShaderModule, ShaderModuleCreateInfo, ShaderStages};
use vulkano::VulkanLibrary;

use crate::error::{CallContext, VulkanError};
use crate::kernels;
use crate::spirv::{self, FloatControls};

/// The bindings every kernel's pipeline layout has: 0-2 read-only operands, 3 the output,
/// 4 the parameters, 5-6 further outputs (see backends/gpu-kernels/README.md). One layout serves every kernel,
/// so a kernel that ignores a binding still gets a (dummy) buffer there.
pub(crate) const BINDINGS: u32 = 7;

pub(crate) use baton_gpu_kernels::Limits;

/// A physical device that has a compute queue.
pub(crate) struct Adapter {
    physical: Arc<PhysicalDevice>,
    queue_family: u32,
    pub limits: Limits,
    pub report: DeviceReport,
    /// The float-controls execution modes the device honours, asked of every kernel
    /// (see `spirv.rs`): without them a driver may flush subnormals and fold NaN away.
    /// Not part of [`Limits`], which a compiled blob records: a plan does not depend on
    /// them, only the pipelines built on this device do.
    float_controls: FloatControls,
}

/// The loaded Vulkan instance's usable devices, each opened on first use.
pub(crate) struct Gpus(Devices<Adapter, Gpu>);

impl Gpus {
    /// Loads Vulkan and lists the devices with a compute queue whose name contains
    /// `filter` (case-insensitive; empty: all). Fails cleanly when there is no loader, no
    /// driver or no such device.
    pub fn enumerate(filter: &str) -> Result<Gpus, VulkanError> {
        let library = VulkanLibrary::new().map_err(|e| VulkanError::NoLoader(e.to_string()))?;
        let instance = Instance::new(
            library,
            InstanceCreateInfo {
                flags: InstanceCreateFlags::ENUMERATE_PORTABILITY,
                application_name: Some("baton-backend-vulkan".into()),
                ..Default::default()
            },
        )
        .map_err(|e| VulkanError::NoLoader(e.to_string()))?;
        let physical: Vec<Arc<PhysicalDevice>> = instance
            .enumerate_physical_devices()
            .map_err(|e| VulkanError::NoLoader(e.to_string()))?
            .collect();
        let name = |p: &Arc<PhysicalDevice>| p.properties().device_name.clone();
        let devices = Devices::select(physical, filter, name, name, adapter).map_err(|e| {
            VulkanError::NoDevice {
                filter: e.filter,
                found: e.found,
            }
        })?;
        Ok(Gpus(devices))
    }

    /// The usable devices.
    pub fn adapters(&self) -> &[Adapter] {
        self.0.adapters()
    }

    /// The adapter at `index`.
    pub fn adapter(&self, index: u32) -> Result<&Adapter, VulkanError> {
        self.0.get(index).ok_or(VulkanError::BadDevice {
            index,
            count: self.0.adapters().len(),
        })
    }

    /// The opened device at `index`, opened on first use and shared afterwards.
    pub fn open(&self, index: u32) -> Result<Arc<Gpu>, VulkanError> {
        self.adapter(index)?;
        self.0
            .open(index, |a| Gpu::open(a).map_err(|e| e.to_string()))
            .expect("the index was checked")
            .map_err(|detail| VulkanError::Call {
                what: "open the device",
                detail,
            })
    }
}

fn adapter(physical: Arc<PhysicalDevice>) -> Option<Adapter> {
    let queue_family = physical
        .queue_family_properties()
        .iter()
        .position(|q| q.queue_flags.intersects(QueueFlags::COMPUTE))? as u32;
    let p = physical.properties();
    let f = physical.supported_features();
    let limits = Limits {
        subgroup: p.subgroup_size.unwrap_or(1).max(1),
        max_invocations: p.max_compute_work_group_invocations,
        max_group_size: p.max_compute_work_group_size,
        max_group_count: p.max_compute_work_group_count,
        shared_memory: p.max_compute_shared_memory_size,
        max_storage_range: u64::from(p.max_storage_buffer_range),
        float16: f.shader_float16
            && f.storage_buffer16_bit_access
            && f.uniform_and_storage_buffer16_bit_access,
        subgroups: subgroup_arithmetic(&physical),
    };
    let float_controls = if physical.api_version() >= vulkano::Version::V1_2
        || physical.supported_extensions().khr_shader_float_controls
    {
        FloatControls {
            denorm_preserve: p.shader_denorm_preserve_float32 == Some(true),
            nan_preserve: p.shader_signed_zero_inf_nan_preserve_float32 == Some(true),
        }
    } else {
        FloatControls::default()
    };
    let kind = match p.device_type {
        PhysicalDeviceType::Cpu => 0,
        PhysicalDeviceType::DiscreteGpu
        | PhysicalDeviceType::IntegratedGpu
        | PhysicalDeviceType::VirtualGpu => 1,
        _ => 3,
    };
    let memory_bytes = physical
        .memory_properties()
        .memory_heaps
        .iter()
        .filter(|h| h.flags.intersects(MemoryHeapFlags::DEVICE_LOCAL))
        .map(|h| h.size)
        .sum();
    // The driver's own words (Mesa: "Mesa 22.3.6 (LLVM 15.0.6)") plus the raw version
    // number, whose encoding is vendor-specific: both go into the host's cache keys.
    let driver_version = format!(
        "{} {} (driver {:#x}, Vulkan {})",
        p.driver_name.as_deref().unwrap_or("unknown driver"),
        p.driver_info.as_deref().unwrap_or(""),
        p.driver_version,
        physical.api_version()
    );
    let report = DeviceReport {
        name: p.device_name.clone(),
        kind,
        driver_version,
        memory_bytes,
    };
    Some(Adapter {
        physical,
        queue_family,
        limits,
        report,
        float_controls,
    })
}

/// Whether the `_sg` kernels run on `physical`: Vulkan 1.1 (the subgroup properties and
/// SPIR-V 1.3), subgroup arithmetic in compute shaders, and no subgroup smaller than the
/// 4 those kernels size their cross-subgroup array for (the smallest size the driver may
/// pick, where VK_EXT_subgroup_size_control says; else the one size it uses).
fn subgroup_arithmetic(physical: &PhysicalDevice) -> bool {
    let p = physical.properties();
    let ops = p.subgroup_supported_operations.unwrap_or_default();
    let stages = p.subgroup_supported_stages.unwrap_or_default();
    let smallest = p.min_subgroup_size.or(p.subgroup_size).unwrap_or(0);
    physical.api_version() >= vulkano::Version::V1_1
        && ops.contains(SubgroupFeatures::BASIC | SubgroupFeatures::ARITHMETIC)
        && stages.intersects(ShaderStages::COMPUTE)
        && smallest >= 4
}

/// An opened device: what every executable on it shares.
pub(crate) struct Gpu {
    pub device: Arc<Device>,
    pub queue: Arc<Queue>,
    pub memory: Arc<StandardMemoryAllocator>,
    pub descriptors: Arc<StandardDescriptorSetAllocator>,
    pub commands: Arc<StandardCommandBufferAllocator>,
    pub set_layout: Arc<DescriptorSetLayout>,
    pub layout: Arc<PipelineLayout>,
    /// The driver's pipeline cache: a second executable (or a re-init) with the same
    /// kernels skips the driver's shader compilation.
    cache: Arc<PipelineCache>,
    /// What `spirv::with_float_controls` adds to every kernel on this device.
    float_controls: FloatControls,
    /// Pipelines already built, by (kernel, override value).
    pipelines: Mutex<HashMap<(String, u32), Arc<ComputePipeline>>>,
}

impl Gpu {
    fn open(adapter: &Adapter) -> Result<Gpu, VulkanError> {
        // The f16 kernels' features; before Vulkan 1.2 (1.1 for 16-bit storage) they
        // come from extensions, which are then enabled too.
        let (enabled_features, enabled_extensions) = if adapter.limits.float16 {
            let api = adapter.physical.api_version();
            let supported = adapter.physical.supported_extensions();
            (
                DeviceFeatures {
                    shader_float16: true,
                    storage_buffer16_bit_access: true,
                    uniform_and_storage_buffer16_bit_access: true,
                    ..DeviceFeatures::empty()
                },
                DeviceExtensions {
                    khr_shader_float16_int8: api < vulkano::Version::V1_2
                        && supported.khr_shader_float16_int8,
                    khr_16bit_storage: api < vulkano::Version::V1_1 && supported.khr_16bit_storage,
                    khr_storage_buffer_storage_class: api < vulkano::Version::V1_1
                        && supported.khr_storage_buffer_storage_class,
                    ..DeviceExtensions::empty()
                },
            )
        } else {
            (DeviceFeatures::empty(), DeviceExtensions::empty())
        };
        // Float controls are core from Vulkan 1.2; before it the extension carries them.
        let enabled_extensions = DeviceExtensions {
            khr_shader_float_controls: adapter.float_controls.any()
                && adapter.physical.api_version() < vulkano::Version::V1_2,
            ..enabled_extensions
        };
        let (device, mut queues) = Device::new(
            adapter.physical.clone(),
            DeviceCreateInfo {
                queue_create_infos: vec![QueueCreateInfo {
                    queue_family_index: adapter.queue_family,
                    ..Default::default()
                }],
                enabled_features,
                enabled_extensions,
                ..Default::default()
            },
        )
        .call("create the device")?;
        let queue = queues.next().ok_or(VulkanError::Call {
            what: "create the device",
            detail: "no queue returned".into(),
        })?;
        let memory = Arc::new(StandardMemoryAllocator::new_default(device.clone()));
        let descriptors = Arc::new(StandardDescriptorSetAllocator::new(
            device.clone(),
            Default::default(),
        ));
        let commands = Arc::new(StandardCommandBufferAllocator::new(
            device.clone(),
            Default::default(),
        ));
        let bindings = (0..BINDINGS)
            .map(|b| {
                let mut d =
                    DescriptorSetLayoutBinding::descriptor_type(DescriptorType::StorageBuffer);
                d.stages = ShaderStages::COMPUTE;
                (b, d)
            })
            .collect();
        let set_layout = DescriptorSetLayout::new(
            device.clone(),
            DescriptorSetLayoutCreateInfo {
                bindings,
                ..Default::default()
            },
        )
        .call("create the descriptor set layout")?;
        let layout = PipelineLayout::new(
            device.clone(),
            PipelineLayoutCreateInfo {
                set_layouts: vec![set_layout.clone()],
                ..Default::default()
            },
        )
        .call("create the pipeline layout")?;
        // SAFETY: no initial data is passed, so there is nothing unverified to trust.
        let cache =
            unsafe { PipelineCache::new(device.clone(), PipelineCacheCreateInfo::default()) }
                .call("create the pipeline cache")?;
        Ok(Gpu {
            device,
            queue,
            memory,
            descriptors,
            commands,
            set_layout,
            layout,
            cache,
            float_controls: adapter.float_controls,
            pipelines: Mutex::new(HashMap::new()),
        })
    }

    /// The pipeline of `kernel` built with its override set to `value`.
    pub fn pipeline(&self, kernel: &str, value: u32) -> Result<Arc<ComputePipeline>, VulkanError> {
        let key = (kernel.to_string(), value);
        let mut built = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = built.get(&key) {
            return Ok(p.clone());
        }
        let bytes = kernels::spirv(kernel, value).ok_or_else(|| {
            VulkanError::Blob(format!(
                "kernel {kernel} with override {value} is not in this build; recompile"
            ))
        })?;
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let words = spirv::with_float_controls(&words, self.float_controls);
        // SAFETY: the words are naga's SPIR-V output for a validated WGSL module.
        let module =
            unsafe { ShaderModule::new(self.device.clone(), ShaderModuleCreateInfo::new(&words)) }
                .call("create a shader module")?;
        let entry = module.entry_point("main").ok_or(VulkanError::Call {
            what: "find the kernel entry point",
            detail: format!("{kernel} has no `main`"),
        })?;
        let pipeline = ComputePipeline::new(
            self.device.clone(),
            Some(self.cache.clone()),
            ComputePipelineCreateInfo::stage_layout(
                PipelineShaderStageCreateInfo::new(entry),
                self.layout.clone(),
            ),
        )
        .call("create a compute pipeline")?;
        built.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}
