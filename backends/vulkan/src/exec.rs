//! `init` and `execute`: device buffers, pipelines and descriptor sets are made once at
//! init (weights and parameters uploaded to device-local memory there), and so is the one
//! command buffer that runs the partition: the input copies from staging, every dispatch,
//! the output copies to staging. It is recorded once with `MultipleSubmit`, since nothing
//! in it changes between runs (static shapes, fixed buffers); each `execute` writes the
//! inputs to staging, submits it, waits, and reads the outputs. Re-recording it on every
//! call cost the host about as much as lavapipe's dispatches of a small model.
//!
//! Barriers between dispatches come from vulkano's automatic command buffer: it tracks
//! the byte ranges each dispatch reads and writes (from the kernels' reflected bindings)
//! and inserts a pipeline barrier wherever a later command touches a range an earlier
//! one wrote. Ranges the arena plan keeps apart need none.

use std::sync::Arc;

use baton_delegate_api::{DelegateError, Executable, TensorMut, TensorRef};
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::command_buffer::{
    AutoCommandBufferBuilder, CommandBufferUsage, CopyBufferInfo, PrimaryAutoCommandBuffer,
};
use vulkano::descriptor_set::{DescriptorSet, WriteDescriptorSet};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter};
use vulkano::pipeline::{ComputePipeline, Pipeline, PipelineBindPoint};
use vulkano::sync::{self, GpuFuture};

use crate::error::{CallContext, VulkanError};
use crate::gpu::Gpu;
use baton_gpu_kernels::plan::{Plan, Range, Region};

/// An initialised partition on one device.
pub struct VulkanExecutable {
    gpu: Arc<Gpu>,
    /// Host-visible staging for inputs and outputs, one range per tensor.
    staging_in: Subbuffer<[u8]>,
    staging_out: Subbuffer<[u8]>,
    inputs: Vec<(u64, Range)>,
    outputs: Vec<(u64, Range)>,
    /// The partition's commands, recorded at init and submitted by every `execute`.
    commands: Arc<PrimaryAutoCommandBuffer>,
}

/// Builds the executable of a decoded plan. `views` are the constant views of init.
pub(crate) fn build(
    gpu: Arc<Gpu>,
    plan: &Plan,
    views: &[TensorRef<'_>],
) -> Result<VulkanExecutable, VulkanError> {
    let device_local = |len: u64, usage: BufferUsage| {
        Buffer::new_slice::<u8>(
            gpu.memory.clone(),
            BufferCreateInfo {
                usage,
                ..Default::default()
            },
            AllocationCreateInfo {
                memory_type_filter: MemoryTypeFilter::PREFER_DEVICE,
                ..Default::default()
            },
            len.max(16),
        )
        .call("allocate a device buffer")
    };
    let host = |len: u64, usage: BufferUsage, filter: MemoryTypeFilter| {
        Buffer::new_slice::<u8>(
            gpu.memory.clone(),
            BufferCreateInfo {
                usage,
                ..Default::default()
            },
            AllocationCreateInfo {
                memory_type_filter: MemoryTypeFilter::PREFER_HOST | filter,
                ..Default::default()
            },
            len.max(16),
        )
        .call("allocate a staging buffer")
    };
    let storage =
        BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_DST | BufferUsage::TRANSFER_SRC;
    let arena = device_local(plan.arena_size, storage)?;
    let weights = device_local(plan.weights_size, storage)?;
    let params = device_local(plan.params.len() as u64 * 4, storage)?;
    let dummy = device_local(baton_gpu_kernels::plan::DUMMY_SIZE, storage)?;

    // Weights and parameters go up once, through one staging buffer and one submission.
    let upload_len = plan.weights_size + plan.params.len() as u64 * 4;
    let upload = host(
        upload_len,
        BufferUsage::TRANSFER_SRC,
        MemoryTypeFilter::HOST_SEQUENTIAL_WRITE,
    )?;
    {
        let mut bytes = upload.write().call("map the upload buffer")?;
        let p = plan.weights_size as usize;
        plan.write_weights(views, &mut bytes[..p])
            .map_err(VulkanError::Mismatch)?;
        plan.write_params(&mut bytes[p..]);
    }
    let mut cb = AutoCommandBufferBuilder::primary(
        gpu.commands.clone(),
        gpu.queue.queue_family_index(),
        CommandBufferUsage::OneTimeSubmit,
    )
    .call("begin the upload")?;
    if plan.weights_size > 0 {
        cb.copy_buffer(CopyBufferInfo::buffers(
            upload.clone().slice(0..plan.weights_size),
            weights.clone().slice(0..plan.weights_size),
        ))
        .call("record the weight upload")?;
    }
    if !plan.params.is_empty() {
        let len = plan.params.len() as u64 * 4;
        cb.copy_buffer(CopyBufferInfo::buffers(
            upload
                .clone()
                .slice(plan.weights_size..plan.weights_size + len),
            params.clone().slice(0..len),
        ))
        .call("record the parameter upload")?;
    }
    submit(&gpu, cb.build().call("finish the upload")?)?;

    let region = |r: &Range| -> Subbuffer<[u8]> {
        let buffer = match r.region {
            Region::Arena => &arena,
            Region::Weights => &weights,
            Region::Params => &params,
            Region::Dummy => &dummy,
        };
        buffer.clone().slice(r.offset..r.offset + r.len)
    };
    let mut steps: Vec<Step> = Vec::with_capacity(plan.steps.len());
    for s in &plan.steps {
        let pipeline = gpu.pipeline(&s.kernel, s.spec)?;
        let writes = s
            .bindings
            .iter()
            .enumerate()
            .map(|(b, r)| WriteDescriptorSet::buffer(b as u32, region(r)));
        let set = DescriptorSet::new(gpu.descriptors.clone(), gpu.set_layout.clone(), writes, [])
            .call("create a descriptor set")?;
        steps.push((pipeline, set, s.groups));
    }
    let stage = |list: &[Range]| {
        let mut at = 0;
        let placed: Vec<(u64, Range)> = list
            .iter()
            .map(|r| {
                let p = (at, *r);
                at = (at + r.len).next_multiple_of(16);
                p
            })
            .collect();
        (placed, at)
    };
    let (inputs, in_len) = stage(&plan.inputs);
    let (outputs, out_len) = stage(&plan.outputs);
    let staging_in = host(
        in_len,
        BufferUsage::TRANSFER_SRC,
        MemoryTypeFilter::HOST_SEQUENTIAL_WRITE,
    )?;
    let staging_out = host(
        out_len,
        BufferUsage::TRANSFER_DST,
        MemoryTypeFilter::HOST_RANDOM_ACCESS,
    )?;
    let commands = record(
        &gpu,
        (&staging_in, &inputs),
        &arena,
        &steps,
        (&staging_out, &outputs),
    )?;
    Ok(VulkanExecutable {
        gpu,
        staging_in,
        staging_out,
        inputs,
        outputs,
        commands,
    })
}

/// One dispatch: its pipeline, its descriptor set and its workgroup counts.
type Step = (Arc<ComputePipeline>, Arc<DescriptorSet>, [u32; 3]);

/// Records the partition's command buffer: inputs copied from staging into the arena,
/// every dispatch, outputs copied from the arena to staging.
fn record(
    gpu: &Gpu,
    (staging_in, inputs): (&Subbuffer<[u8]>, &[(u64, Range)]),
    arena: &Subbuffer<[u8]>,
    steps: &[Step],
    (staging_out, outputs): (&Subbuffer<[u8]>, &[(u64, Range)]),
) -> Result<Arc<PrimaryAutoCommandBuffer>, VulkanError> {
    let mut cb = AutoCommandBufferBuilder::primary(
        gpu.commands.clone(),
        gpu.queue.queue_family_index(),
        CommandBufferUsage::MultipleSubmit,
    )
    .call("begin the command buffer")?;
    for (at, r) in inputs {
        cb.copy_buffer(CopyBufferInfo::buffers(
            staging_in.clone().slice(*at..at + r.len),
            arena.clone().slice(r.offset..r.offset + r.len),
        ))
        .call("record an input copy")?;
    }
    for (pipeline, set, groups) in steps {
        cb.bind_pipeline_compute(pipeline.clone())
            .call("bind a pipeline")?
            .bind_descriptor_sets(
                PipelineBindPoint::Compute,
                pipeline.layout().clone(),
                0,
                set.clone(),
            )
            .call("bind descriptors")?;
        // SAFETY: every binding's range was checked against its buffer when the blob
        // was decoded, and each kernel bounds its indices by the sizes in its
        // parameters, which lowering derived from those same ranges.
        unsafe { cb.dispatch(*groups) }.call("record a dispatch")?;
    }
    for (at, r) in outputs {
        cb.copy_buffer(CopyBufferInfo::buffers(
            arena.clone().slice(r.offset..r.offset + r.len),
            staging_out.clone().slice(*at..at + r.len),
        ))
        .call("record an output copy")?;
    }
    cb.build().call("finish the command buffer")
}

fn submit(gpu: &Gpu, cb: Arc<PrimaryAutoCommandBuffer>) -> Result<(), VulkanError> {
    sync::now(gpu.device.clone())
        .then_execute(gpu.queue.clone(), cb)
        .call("submit")?
        .then_signal_fence_and_flush()
        .call("flush")?
        .wait(None)
        .call("wait for the device")
}

impl VulkanExecutable {
    fn run(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), VulkanError> {
        if inputs.len() != self.inputs.len() || outputs.len() != self.outputs.len() {
            return Err(VulkanError::Mismatch(format!(
                "expected {} inputs and {} outputs, got {} and {}",
                self.inputs.len(),
                self.outputs.len(),
                inputs.len(),
                outputs.len()
            )));
        }
        {
            let mut staged = self
                .staging_in
                .write()
                .call("map the input staging buffer")?;
            for (i, (view, (at, r))) in inputs.iter().zip(&self.inputs).enumerate() {
                if view.data.len() as u64 != r.len {
                    return Err(VulkanError::Mismatch(format!(
                        "input {i} has {} bytes, the partition was compiled for {}",
                        view.data.len(),
                        r.len
                    )));
                }
                staged[*at as usize..(*at + r.len) as usize].copy_from_slice(view.data);
            }
        }
        submit(&self.gpu, self.commands.clone())?;
        let staged = self
            .staging_out
            .read()
            .call("map the output staging buffer")?;
        for (i, (out, (at, r))) in outputs.iter_mut().zip(&self.outputs).enumerate() {
            if out.data.len() as u64 != r.len {
                return Err(VulkanError::Mismatch(format!(
                    "output {i} has {} bytes, the partition was compiled for {}",
                    out.data.len(),
                    r.len
                )));
            }
            out.data
                .copy_from_slice(&staged[*at as usize..(*at + r.len) as usize]);
        }
        Ok(())
    }
}

impl Executable for VulkanExecutable {
    fn execute(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        self.run(inputs, outputs).map_err(DelegateError::from)
    }
}
