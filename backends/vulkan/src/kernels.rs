//! The SPIR-V kernels build.rs compiled from `backends/gpu-kernels/wgsl`, one variant per
//! value of each kernel's override constant (naga resolves overrides at build time; see
//! build.rs for why).

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

/// The SPIR-V bytes of `kernel` with its override set to `value`.
pub(crate) fn spirv(kernel: &str, value: u32) -> Option<&'static [u8]> {
    VARIANTS
        .iter()
        .find(|(k, _, v, _)| *k == kernel && *v == value)
        .map(|(_, _, _, words)| *words)
}
