//! `init` and `execute`. At init: the device buffers, the pipelines and one bind group
//! per dispatch are made, and the weights and kernel parameters written once. Each
//! `execute` writes the inputs with `queue.write_buffer`, records every dispatch of the
//! partition into one command encoder (one compute pass) followed by the copies of the
//! outputs into a mapped staging buffer, submits it once, waits, and reads the outputs.
//!
//! wgpu command buffers cannot be submitted twice, so the encoder is recorded per run;
//! everything it refers to (pipelines, bind groups) is built once. wgpu puts a barrier
//! between dispatches wherever a buffer is used read-write (see `gpu::writable_storage`).

use std::sync::{mpsc, Arc};

use baton_delegate_api::{DelegateError, Executable, TensorMut, TensorRef};
use baton_gpu_kernels::plan::{Plan, Range, Region, ALIGN, DUMMY_SIZE};

use crate::error::WgpuError;
use crate::gpu::{scoped, Gpu};

/// wgpu's alignment for buffer copies, writes and storage binding sizes.
const COPY: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// An initialised partition on one device.
pub struct WgpuExecutable {
    gpu: Arc<Gpu>,
    arena: wgpu::Buffer,
    /// Host-readable staging for the outputs, one range per output.
    readback: wgpu::Buffer,
    inputs: Vec<Range>,
    /// (offset in `readback`, the output's arena range).
    outputs: Vec<(u64, Range)>,
    steps: Vec<(wgpu::ComputePipeline, wgpu::BindGroup, [u32; 3])>,
    /// Reused for inputs whose byte length is not a multiple of 4 (odd f16 counts).
    pad: Vec<u8>,
}

/// `len` rounded up so a buffer of it can hold whole ALIGN-ed ranges and be copied.
fn buffer_len(len: u64) -> u64 {
    len.max(COPY).next_multiple_of(ALIGN)
}

/// Builds the executable of a decoded plan. `views` are the constant views of init.
pub(crate) fn build(
    gpu: Arc<Gpu>,
    plan: &Plan,
    views: &[TensorRef<'_>],
) -> Result<WgpuExecutable, WgpuError> {
    let device = &gpu.device;
    let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
    let make = |label: &str, len: u64, usage: wgpu::BufferUsages| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: buffer_len(len),
            usage,
            mapped_at_creation: false,
        })
    };
    // Weights and parameters, gathered into one image each and written once.
    let mut weights = vec![0u8; buffer_len(plan.weights_size) as usize];
    plan.write_weights(views, &mut weights)
        .map_err(WgpuError::Mismatch)?;
    let mut params = vec![0u8; buffer_len(plan.params.len() as u64 * 4) as usize];
    plan.write_params(&mut params);
    let (arena, weights_buf, params_buf, dummy) =
        scoped(device, "upload weights and build the dispatches", || {
            let arena = make(
                "arena",
                plan.arena_size,
                storage | wgpu::BufferUsages::COPY_SRC,
            );
            let weights_buf = make("weights", weights.len() as u64, storage);
            let params_buf = make("params", params.len() as u64, storage);
            let dummy = make("dummy", DUMMY_SIZE, storage);
            gpu.queue.write_buffer(&weights_buf, 0, &weights);
            gpu.queue.write_buffer(&params_buf, 0, &params);
            (arena, weights_buf, params_buf, dummy)
        })?;
    let mut steps = Vec::with_capacity(plan.steps.len());
    let buffer_of = |r: &Range| match r.region {
        Region::Arena => &arena,
        Region::Weights => &weights_buf,
        Region::Params => &params_buf,
        Region::Dummy => &dummy,
    };
    for s in &plan.steps {
        let pipeline = gpu.pipeline(&s.kernel, s.spec)?;
        let mut entries = Vec::with_capacity(s.bindings.len());
        for (b, r) in s.bindings.iter().enumerate() {
            let buffer = buffer_of(r);
            // Storage bindings are whole words: an f16 range of an odd count is bound
            // two bytes longer, into the padding before the next ALIGN-ed range.
            let size = r.len.max(COPY).next_multiple_of(COPY);
            if r.offset + size > buffer.size() {
                return Err(WgpuError::Blob(format!(
                    "kernel {} binding {b} reaches byte {} of a {}-byte buffer",
                    s.kernel,
                    r.offset + size,
                    buffer.size()
                )));
            }
            entries.push(wgpu::BindGroupEntry {
                binding: b as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset: r.offset,
                    size: wgpu::BufferSize::new(size),
                }),
            });
        }
        let group = scoped(device, "create a bind group", || {
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&s.kernel),
                layout: &gpu.bind_layout,
                entries: &entries,
            })
        })?;
        steps.push((pipeline, group, s.groups));
    }
    let mut at = 0;
    let outputs: Vec<(u64, Range)> = plan
        .outputs
        .iter()
        .map(|r| {
            let p = (at, *r);
            at = (at + r.len).next_multiple_of(ALIGN);
            p
        })
        .collect();
    let readback = make(
        "readback",
        at,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    Ok(WgpuExecutable {
        gpu,
        arena,
        readback,
        inputs: plan.inputs.clone(),
        outputs,
        steps,
        pad: Vec::new(),
    })
}

impl WgpuExecutable {
    fn run(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), WgpuError> {
        if inputs.len() != self.inputs.len() || outputs.len() != self.outputs.len() {
            return Err(WgpuError::Mismatch(format!(
                "expected {} inputs and {} outputs, got {} and {}",
                self.inputs.len(),
                self.outputs.len(),
                inputs.len(),
                outputs.len()
            )));
        }
        for (i, (view, r)) in inputs.iter().zip(&self.inputs).enumerate() {
            if view.data.len() as u64 != r.len {
                return Err(WgpuError::Mismatch(format!(
                    "input {i} has {} bytes, the partition was compiled for {}",
                    view.data.len(),
                    r.len
                )));
            }
        }
        for (i, out) in outputs.iter().enumerate() {
            let r = &self.outputs[i].1;
            if out.data.len() as u64 != r.len {
                return Err(WgpuError::Mismatch(format!(
                    "output {i} has {} bytes, the partition was compiled for {}",
                    out.data.len(),
                    r.len
                )));
            }
        }
        let gpu = Arc::clone(&self.gpu);
        let device = &gpu.device;
        scoped(device, "run the partition", || {
            for (view, r) in inputs.iter().zip(&self.inputs) {
                if r.len.is_multiple_of(COPY) {
                    gpu.queue.write_buffer(&self.arena, r.offset, view.data);
                } else {
                    // Writes are whole words; the extra bytes land in the padding
                    // before the next ALIGN-ed range.
                    self.pad.clear();
                    self.pad.extend_from_slice(view.data);
                    self.pad.resize(r.len.next_multiple_of(COPY) as usize, 0);
                    gpu.queue.write_buffer(&self.arena, r.offset, &self.pad);
                }
            }
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("partition"),
            });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("partition"),
                    timestamp_writes: None,
                });
                for (pipeline, group, [x, y, z]) in &self.steps {
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, group, &[]);
                    pass.dispatch_workgroups(*x, *y, *z);
                }
            }
            for (at, r) in &self.outputs {
                encoder.copy_buffer_to_buffer(
                    &self.arena,
                    r.offset,
                    &self.readback,
                    *at,
                    r.len.next_multiple_of(COPY),
                );
            }
            gpu.queue.submit([encoder.finish()]);
        })?;
        let (sent, received) = mpsc::channel();
        let slice = self.readback.slice(..);
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = sent.send(r);
        });
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::Call {
                what: "wait for the device",
                detail: e.to_string(),
            })?;
        match received.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(WgpuError::Call {
                    what: "map the output staging buffer",
                    detail: e.to_string(),
                })
            }
            Err(_) => {
                return Err(WgpuError::Call {
                    what: "map the output staging buffer",
                    detail: "the mapping callback never ran".into(),
                })
            }
        }
        {
            let staged = slice.get_mapped_range().map_err(|e| WgpuError::Call {
                what: "read the output staging buffer",
                detail: e.to_string(),
            })?;
            for (out, (at, r)) in outputs.iter_mut().zip(&self.outputs) {
                out.data
                    .copy_from_slice(&staged[*at as usize..(*at + r.len) as usize]);
            }
        }
        self.readback.unmap();
        Ok(())
    }
}

impl Executable for WgpuExecutable {
    fn execute(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        self.run(inputs, outputs).map_err(DelegateError::from)
    }
}
