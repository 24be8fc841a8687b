//! What Baton's GPU delegates share, whatever API runs the kernels: the WGSL kernels
//! ([`catalog`]), the lowering of IR nodes to kernel dispatches ([`lower`]), the plan of
//! a partition's buffers and dispatches ([`plan`]), its blob format ([`blob`]), and the
//! device [`Limits`] that shape all three.
//!
//! None of it touches a device: the Vulkan delegate (vulkano, SPIR-V compiled at build
//! time) and the wgpu delegate (WGSL compiled by wgpu at run time) each read their
//! device's limits into a [`Limits`], plan with this code, and record the plan's steps
//! with their own API. One lowering means both claim exactly the same nodes for the same
//! limits, and a fix to a kernel or a shape rule reaches both.

use baton_delegate_api::ir::Graph;
use baton_delegate_api::{BlobCompatibility, Constants, DeclineReason, Support};

pub mod blob;
pub mod catalog;
pub mod devices;
pub mod lower;
pub mod plan;

/// The device facts that shape kernels and decide what is declined. Read from the
/// device, never assumed: lavapipe has subgroups of 8, real GPUs of 32 or 64. A plan
/// records the limits it was made for (see [`blob`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The subgroup (wave, warp) size; 1 when the device does not say.
    pub subgroup: u32,
    /// The most invocations in one workgroup (maxComputeWorkGroupInvocations).
    pub max_invocations: u32,
    /// The largest workgroup in each dimension (maxComputeWorkGroupSize).
    pub max_group_size: [u32; 3],
    /// The most workgroups in one dispatch, per dimension (maxComputeWorkGroupCount).
    pub max_group_count: [u32; 3],
    /// Workgroup shared memory in bytes (maxComputeSharedMemorySize).
    pub shared_memory: u32,
    /// The largest range one storage binding may cover (maxStorageBufferRange).
    pub max_storage_range: u64,
    /// Whether the `_f16` kernels can run: on Vulkan shaderFloat16,
    /// storageBuffer16BitAccess and uniformAndStorageBuffer16BitAccess together (naga
    /// declares both 16-bit storage capabilities for any f16 type); on wgpu
    /// `Features::SHADER_F16`.
    pub float16: bool,
    /// Whether the `_sg` kernels can run: subgroup arithmetic in compute shaders, with
    /// subgroups of at least 4 (those kernels size their cross-subgroup array for 4, the
    /// smallest WebGPU allows). On Vulkan 1.1+: ARITHMETIC (and BASIC) in
    /// subgroupSupportedOperations, COMPUTE in subgroupSupportedStages and a minimum
    /// subgroup size of 4; on wgpu `Features::SUBGROUP` (wgpu then guarantees
    /// subgroup_min_size >= 4). A plan records it with the other limits, so a blob
    /// compiled with subgroup kernels is recompiled for a device without them.
    pub subgroups: bool,
}

/// The build-id suffix of a delegate running these kernels: 16 hex digits of
/// [`catalog::hash`].
pub fn kernels_hash() -> &'static str {
    // The digits are ASCII by construction.
    std::str::from_utf8(&catalog::HASH_HEX).unwrap_or("0000000000000000")
}

/// `Delegate::supports` of a GPU delegate whose device 0 has `limits` (or none, with the
/// reason): a node is claimed exactly when it lowers, the code `compile` runs.
pub fn supports(
    graph: &Graph,
    constants: &Constants<'_>,
    limits: Result<Limits, String>,
) -> Vec<Support> {
    let limits = match limits {
        Ok(l) => l,
        Err(e) => {
            return graph
                .nodes
                .iter()
                .map(|_| Support::no(DeclineReason::Other, e.clone()))
                .collect()
        }
    };
    let cx = lower::Context {
        graph,
        consts: constants,
        limits,
    };
    graph
        .nodes
        .iter()
        .map(
            |node| match lower::lower(&cx, node, lower::Activation::default(), node.outputs[0]) {
                Ok(_) => Support::Yes,
                Err(d) => d.into_support(),
            },
        )
        .collect()
}

/// `Delegate::compile`: the blob of `graph` planned for `limits`. The error is the
/// decline that stopped the plan, or an invalid subgraph.
pub fn compile(
    graph: &Graph,
    constants: &Constants<'_>,
    limits: Limits,
) -> Result<Vec<u8>, CompileError> {
    graph
        .validate()
        .map_err(|e| CompileError::Invalid(format!("subgraph: {e}")))?;
    let plan = plan::compile(graph, constants, limits).map_err(CompileError::Unsupported)?;
    Ok(blob::encode(&plan))
}

/// Why [`compile`] failed.
#[derive(Debug)]
pub enum CompileError {
    /// The subgraph does not validate.
    Invalid(String),
    /// A node cannot be lowered for these limits (the decline, in words).
    Unsupported(String),
}

/// `Delegate::blob_compatibility` for a device with `limits` (none: no device).
pub fn blob_compatibility(blob: &[u8], limits: Option<Limits>) -> BlobCompatibility {
    match blob::decode(blob) {
        Ok(plan) if limits == Some(plan.limits) => BlobCompatibility::Optimal,
        Ok(_) => BlobCompatibility::PreferRecompile,
        Err(_) => BlobCompatibility::Unsupported,
    }
}

/// A blob compiled for other limits still runs if every dispatch fits this device's and
/// the device has the shader features its kernels need: an `_f16` kernel f16 shaders, an
/// `_sg` one subgroup arithmetic (a driver would refuse the pipeline, or worse, so the
/// blob is refused first, naming what to do). A blob from an f16 or subgroup device
/// whose kernels use neither still runs anywhere.
pub fn check_fits(plan: &plan::Plan, limits: &Limits) -> Result<(), String> {
    for s in &plan.steps {
        let f16 = s.kernel.ends_with("_f16");
        let subgroup = catalog::stem(&s.kernel) != s.kernel.trim_end_matches("_f16");
        let missing = if f16 && !limits.float16 {
            "f16 shaders"
        } else if subgroup && !limits.subgroups {
            "subgroup arithmetic in compute shaders"
        } else {
            continue;
        };
        return Err(format!(
            "kernel {} needs {missing}, which this device lacks; recompile for it",
            s.kernel
        ));
    }
    for s in &plan.steps {
        let invocations = if s.kernel.starts_with("matmul") {
            s.spec * s.spec
        } else {
            s.spec
        };
        let too_big = invocations > limits.max_invocations
            || s.groups
                .iter()
                .zip(limits.max_group_count)
                .any(|(&g, m)| g > m)
            || s.bindings.iter().any(|r| r.len > limits.max_storage_range);
        if too_big {
            return Err(format!(
                "kernel {} ({} = {}) does not fit this device's limits; recompile for it",
                s.kernel,
                if s.kernel.starts_with("matmul") {
                    "TILE"
                } else {
                    "WG"
                },
                s.spec
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
impl Limits {
    /// A device like lavapipe for the unit tests: subgroups of 8, no f16 shaders, no
    /// subgroup arithmetic, common workgroup and buffer limits.
    pub(crate) fn for_tests() -> Limits {
        Limits {
            subgroup: 8,
            max_invocations: 1024,
            max_group_size: [1024, 1024, 64],
            max_group_count: [65535; 3],
            shared_memory: 32 * 1024,
            max_storage_range: 128 << 20,
            float16: false,
            subgroups: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{catalog, check_fits, plan, Limits};

    #[test]
    fn a_blob_with_subgroup_or_f16_kernels_is_refused_on_a_device_without_them() {
        let device = Limits::for_tests();
        let step = |kernel: &str| plan::Step {
            kernel: kernel.into(),
            spec: 64,
            bindings: std::array::from_fn(|_| plan::Range {
                region: plan::Region::Arena,
                offset: 0,
                len: 4,
            }),
            groups: [1, 1, 1],
        };
        let mut p = plan::Plan {
            limits: Limits {
                float16: true,
                subgroups: true,
                ..device
            },
            arena_size: 4,
            weights_size: 0,
            weights: Vec::new(),
            params: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            steps: vec![step("softmax"), step("reduce")],
        };
        // Compiled on a device with both, but using neither: it runs here.
        assert!(check_fits(&p, &device).is_ok());
        p.steps.push(step("softmax_sg"));
        let e = check_fits(&p, &device).unwrap_err();
        assert!(e.contains("softmax_sg needs subgroup arithmetic"), "{e}");
        let with_sg = Limits {
            subgroups: true,
            ..device
        };
        assert!(check_fits(&p, &with_sg).is_ok());
        p.steps.push(step("layernorm_sg_f16"));
        let e = check_fits(&p, &with_sg).unwrap_err();
        assert!(e.contains("layernorm_sg_f16 needs f16 shaders"), "{e}");
    }

    #[test]
    fn sources_are_sorted_and_every_variant_assembles() {
        let names: Vec<&str> = catalog::SOURCES.iter().map(|(k, _)| *k).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "the hash reads SOURCES in name order");
        for k in catalog::kernels() {
            let a = catalog::assemble(&k).unwrap();
            assert!(a.source.contains("fn main"), "{k}");
            if k.ends_with("_f16") {
                assert!(a.source.starts_with("enable f16; "), "{k}");
                assert!(a.source.contains(catalog::ALIAS_F16), "{k}");
            }
            let subgroup = k
                .trim_end_matches("_f16")
                .ends_with(catalog::SUBGROUP_SUFFIX);
            if subgroup {
                // The subgroup library replaces the shared-memory one.
                let libs: Vec<&str> = a.files.iter().map(|(f, _)| f.as_str()).collect();
                assert!(libs.contains(&"rowreduce_sg.wgsl"), "{k}: {libs:?}");
                assert!(!libs.contains(&"rowreduce.wgsl"), "{k}: {libs:?}");
                assert!(a.source.contains("subgroupAdd"), "{k}");
            }
            // Same line numbers: the kernel file's lines are where they were.
            let stem = catalog::stem(&k);
            let lines = catalog::file(stem).unwrap().lines().count() as u32;
            assert_eq!(
                a.locate(lines),
                format!("backends/gpu-kernels/wgsl/{stem}.wgsl:{lines}")
            );
        }
        assert!(catalog::assemble("cast_f16").is_err());
        assert!(catalog::assemble("softmax_sg_f16").is_ok());
        assert!(catalog::assemble("matmul_sg").is_err());
        assert!(catalog::assemble("nope").is_err());
    }

    #[test]
    fn the_hash_is_fnv1a_over_the_files_in_order() {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (_, text) in catalog::SOURCES {
            for b in text.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x100_0000_01b3);
            }
        }
        assert_eq!(super::kernels_hash(), format!("{h:016x}"));
        assert_eq!(catalog::values("matmul_f16"), vec![8, 16]);
        assert_eq!(catalog::override_name("softmax_f16"), Some("WG"));
    }
}
