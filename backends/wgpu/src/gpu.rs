//! The wgpu instance, adapter enumeration, and the per-device context (device, queue,
//! bind group and pipeline layouts, pipelines) shared by every executable on a device.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use baton_delegate_api::Device as DeviceReport;
use baton_gpu_kernels::devices::Devices;
use baton_gpu_kernels::{catalog, plan, Limits};

use crate::error::WgpuError;

/// The backends this build can use (the crate enables no other), as the `backends`
/// option names them.
const BUILT: &[(&str, &[&str], wgpu::Backends)] = &[
    ("vulkan", &["vulkan", "vk"], wgpu::Backends::VULKAN),
    ("metal", &["metal", "mtl"], wgpu::Backends::METAL),
    ("dx12", &["dx12", "d3d12"], wgpu::Backends::DX12),
];

/// Parses the `backends` option: a comma-separated list of backend names; empty means
/// every backend built. A name this build lacks (e.g. `gl`) is an error, not ignored,
/// so a typo does not silently search nothing.
pub(crate) fn parse_backends(list: &str) -> Result<wgpu::Backends, WgpuError> {
    let mut out = wgpu::Backends::empty();
    for name in list.split(',').map(|s| s.trim().to_lowercase()) {
        if name.is_empty() {
            continue;
        }
        match BUILT
            .iter()
            .find(|(_, names, _)| names.contains(&name.as_str()))
        {
            Some((_, _, b)) => out |= *b,
            None => return Err(WgpuError::BadBackends(list.to_string())),
        }
    }
    if out.is_empty() {
        if list.trim().is_empty() {
            out = BUILT.iter().fold(out, |acc, (_, _, b)| acc | *b);
        } else {
            return Err(WgpuError::BadBackends(list.to_string()));
        }
    }
    Ok(out)
}

/// Runs a wgpu future to completion on this thread. Native wgpu resolves adapter and
/// device requests at once, so this is a plain poll loop (parking between polls), not
/// an async runtime.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// The bindings every kernel's layout has: 0-2 operands, 3 the output, 4 the parameters,
/// 5-6 further outputs (see backends/gpu-kernels/README.md).
const BINDINGS: u32 = plan::SLOTS as u32;

/// A usable adapter: one that runs compute shaders with [`BINDINGS`] storage buffers.
pub(crate) struct Adapter {
    adapter: wgpu::Adapter,
    pub limits: Limits,
    pub report: DeviceReport,
}

/// The instance's usable adapters, each opened on first use.
pub(crate) struct Gpus(Devices<Adapter, Gpu>);

impl Gpus {
    /// Lists the adapters of `backends` whose name contains `filter` (case-insensitive;
    /// empty: all). Fails cleanly when there is none, so the host falls back.
    pub fn enumerate(backends: wgpu::Backends, filter: &str) -> Result<Gpus, WgpuError> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends,
            // No validation layers or debug labels unless the environment asks
            // (WGPU_VALIDATION=1, WGPU_DEBUG=1): they cost time on every call.
            flags: wgpu::InstanceFlags::empty().with_env(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let all = block_on(instance.enumerate_adapters(backends));
        let devices = Devices::select(
            all,
            filter,
            |a| a.get_info().name,
            |a| {
                let i = a.get_info();
                format!("{} ({})", i.name, i.backend)
            },
            adapter,
        )
        .map_err(|e| WgpuError::NoAdapter {
            backends: format!("{backends:?}"),
            filter: e.filter,
            found: e.found,
        })?;
        Ok(Gpus(devices))
    }

    /// The usable adapters.
    pub fn adapters(&self) -> &[Adapter] {
        self.0.adapters()
    }

    /// The adapter at `index`.
    pub fn adapter(&self, index: u32) -> Result<&Adapter, WgpuError> {
        self.0.get(index).ok_or(WgpuError::BadDevice {
            index,
            count: self.0.adapters().len(),
        })
    }

    /// The opened device at `index`, opened on first use and shared afterwards.
    pub fn open(&self, index: u32) -> Result<Arc<Gpu>, WgpuError> {
        self.adapter(index)?;
        self.0
            .open(index, |a| Gpu::open(a).map_err(|e| e.to_string()))
            .expect("the index was checked")
            .map_err(|detail| WgpuError::Call {
                what: "open the device",
                detail,
            })
    }
}

/// The adapter's limits and report, or `None` when it cannot run the kernels at all.
fn adapter(a: wgpu::Adapter) -> Option<Adapter> {
    let l = a.limits();
    let down = a.get_downlevel_capabilities();
    if !down.flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
        || l.max_storage_buffers_per_shader_stage < BINDINGS
        || l.max_bindings_per_bind_group < BINDINGS
        || u64::from(l.min_storage_buffer_offset_alignment) > plan::ALIGN
    {
        return None;
    }
    let info = a.get_info();
    let limits = Limits {
        // The largest subgroup the adapter may use: the group sizes chosen are multiples
        // of it. wgpu reports its widest possible range when the driver says nothing.
        subgroup: if info.subgroup_max_size >= info.subgroup_min_size
            && info.subgroup_max_size <= 128
        {
            info.subgroup_max_size.max(1)
        } else {
            1
        },
        max_invocations: l.max_compute_invocations_per_workgroup,
        max_group_size: [
            l.max_compute_workgroup_size_x,
            l.max_compute_workgroup_size_y,
            l.max_compute_workgroup_size_z,
        ],
        max_group_count: [l.max_compute_workgroups_per_dimension; 3],
        shared_memory: l.max_compute_workgroup_storage_size,
        max_storage_range: l.max_storage_buffer_binding_size.min(l.max_buffer_size),
        float16: a.features().contains(wgpu::Features::SHADER_F16),
        // wgpu grants SUBGROUP only with subgroup arithmetic in compute shaders (on Vulkan
        // with VK_EXT_subgroup_size_control), and keeps subgroup_min_size at 4 or more;
        // the check restates what the `_sg` kernels' cross-subgroup array needs.
        subgroups: a.features().contains(wgpu::Features::SUBGROUP) && info.subgroup_min_size >= 4,
    };
    let kind = match info.device_type {
        wgpu::DeviceType::Cpu => 0,
        wgpu::DeviceType::DiscreteGpu
        | wgpu::DeviceType::IntegratedGpu
        | wgpu::DeviceType::VirtualGpu => 1,
        wgpu::DeviceType::Other => 3,
    };
    // Backend, driver name and driver info (Mesa: "Mesa 22.3.6 (LLVM 15.0.6)"), and the
    // PCI ids: all of it goes into the host's cache keys, so a driver update or the same
    // GPU through another backend is probed afresh.
    let driver_version = format!(
        "{} {} ({} through wgpu, vendor {:#x}, device {:#x})",
        if info.driver.is_empty() {
            "unknown driver"
        } else {
            &info.driver
        },
        info.driver_info,
        info.backend,
        info.vendor,
        info.device,
    );
    let report = DeviceReport {
        name: info.name.clone(),
        kind,
        driver_version,
        // wgpu does not say how much memory a device has.
        memory_bytes: 0,
    };
    Some(Adapter {
        adapter: a,
        limits,
        report,
    })
}

/// An opened device: what every executable on it shares.
pub(crate) struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub bind_layout: wgpu::BindGroupLayout,
    layout: wgpu::PipelineLayout,
    /// Shader modules by kernel variant, and pipelines by (variant, override value).
    modules: Mutex<HashMap<String, wgpu::ShaderModule>>,
    pipelines: Mutex<HashMap<(String, u32), wgpu::ComputePipeline>>,
}

impl Gpu {
    fn open(adapter: &Adapter) -> Result<Gpu, WgpuError> {
        let mut required_features = wgpu::Features::empty();
        if adapter.limits.float16 {
            required_features |= wgpu::Features::SHADER_F16;
        }
        if adapter.limits.subgroups {
            required_features |= wgpu::Features::SUBGROUP;
        }
        let (device, queue) = block_on(adapter.adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("baton-backend-wgpu"),
            required_features,
            // Everything the adapter offers: the plan was sized by these limits.
            required_limits: adapter.adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| WgpuError::Call {
            what: "create the device",
            detail: e.to_string(),
        })?;
        // Errors are caught by the error scopes around each call (see `scoped`); one
        // that escapes them must not panic the host's thread, which wgpu's default
        // handler would.
        device.on_uncaptured_error(Arc::new(|e| {
            eprintln!("baton-backend-wgpu: uncaptured wgpu error: {e}");
        }));
        let entries: Vec<wgpu::BindGroupLayoutEntry> = (0..BINDINGS)
            .map(|binding| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: false },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let bind_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("kernel bindings"),
            entries: &entries,
        });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("kernel layout"),
            bind_group_layouts: &[Some(&bind_layout)],
            immediate_size: 0,
        });
        Ok(Gpu {
            device,
            queue,
            bind_layout,
            layout,
            modules: Mutex::new(HashMap::new()),
            pipelines: Mutex::new(HashMap::new()),
        })
    }

    /// The pipeline of `kernel` with its override constant set to `value`.
    pub fn pipeline(&self, kernel: &str, value: u32) -> Result<wgpu::ComputePipeline, WgpuError> {
        let key = (kernel.to_string(), value);
        if let Some(p) = lock(&self.pipelines).get(&key) {
            return Ok(p.clone());
        }
        let name = catalog::override_name(kernel).ok_or_else(|| {
            WgpuError::Blob(format!("kernel {kernel} is not in this build; recompile"))
        })?;
        let module = self.module(kernel)?;
        let constants = [(name, f64::from(value))];
        let pipeline = scoped(&self.device, "create a compute pipeline", || {
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(kernel),
                    layout: Some(&self.layout),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &constants,
                        ..Default::default()
                    },
                    cache: None,
                })
        })
        .map_err(|e| match e {
            WgpuError::Call { what, detail } => WgpuError::Call {
                what,
                detail: format!("{kernel} with {name} = {value}: {detail}"),
            },
            e => e,
        })?;
        lock(&self.pipelines).insert(key, pipeline.clone());
        Ok(pipeline)
    }

    /// The shader module of a kernel variant, compiled from the shared WGSL on first use.
    fn module(&self, kernel: &str) -> Result<wgpu::ShaderModule, WgpuError> {
        if let Some(m) = lock(&self.modules).get(kernel) {
            return Ok(m.clone());
        }
        let assembled = catalog::assemble(kernel).map_err(WgpuError::Blob)?;
        let source = writable_storage(&assembled.source);
        let module = scoped(&self.device, "compile a kernel", || {
            self.device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(kernel),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                })
        })
        .map_err(|e| match e {
            WgpuError::Call { what, detail } => WgpuError::Call {
                what,
                detail: format!("{} ({kernel}): {detail}", assembled.locate(1)),
            },
            e => e,
        })?;
        lock(&self.modules).insert(kernel.to_string(), module.clone());
        Ok(module)
    }
}

/// The kernel source with every storage binding declared `read_write`.
///
/// Why: the arena holds a dispatch's operands and its output, so one buffer is bound
/// read-only at binding 0 and read-write at binding 3 of the same dispatch. wgpu's usage
/// tracker refuses that combination within one dispatch (read-only storage is an
/// inclusive use, read-write an exclusive one), and its layout check wants the shader's
/// access mode to equal the layout's. Declaring every binding read-write makes the whole
/// buffer one use; the kernels still only read their operands. Ranges the plan keeps
/// apart never overlap, and wgpu puts a barrier between dispatches for read-write use.
fn writable_storage(source: &str) -> String {
    source.replace("var<storage, read>", "var<storage, read_write>")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` inside validation and out-of-memory error scopes, so that a wgpu error
/// becomes a [`WgpuError::Call`] naming `what` instead of a panic or a silent failure.
pub(crate) fn scoped<T>(
    device: &wgpu::Device,
    what: &'static str,
    f: impl FnOnce() -> T,
) -> Result<T, WgpuError> {
    let memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let value = f();
    let invalid = block_on(validation.pop());
    let oom = block_on(memory.pop());
    match invalid.or(oom) {
        None => Ok(value),
        Some(e) => Err(WgpuError::Call {
            what,
            detail: e.to_string().replace('\n', " "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_option_parses_names_and_refuses_others() {
        assert_eq!(
            parse_backends("vulkan, Metal").unwrap(),
            wgpu::Backends::VULKAN | wgpu::Backends::METAL
        );
        assert_eq!(parse_backends("dx12").unwrap(), wgpu::Backends::DX12);
        let all = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        assert_eq!(parse_backends("").unwrap(), all);
        let e = parse_backends("vulkan,gl").unwrap_err().to_string();
        assert!(e.contains("vulkan,gl"), "{e}");
        assert!(parse_backends(",").is_err());
    }

    #[test]
    fn every_storage_binding_becomes_read_write_and_nothing_else_changes() {
        for k in catalog::kernels() {
            let src = catalog::assemble(&k).unwrap().source;
            let out = writable_storage(&src);
            assert!(!out.contains("var<storage, read>"), "{k}");
            assert_eq!(out.lines().count(), src.lines().count(), "{k}");
        }
    }
}
