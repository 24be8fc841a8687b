//! The delegate's typed error, turned into a [`DelegateError`] at the SDK boundary.

use baton_delegate_api::DelegateError;

/// Everything that can go wrong in the wgpu delegate. Each variant names the thing at
/// fault and, where there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    /// The `backends` option names nothing this build can use.
    #[error("option backends = '{0}': name one or more of vulkan, metal, dx12 (comma-separated)")]
    BadBackends(String),
    /// No adapter on the enabled backends passes the filter.
    #[error("no wgpu adapter on backends {backends}{filter} (found: {found})")]
    NoAdapter {
        /// The backends searched, e.g. `vulkan | metal | dx12`.
        backends: String,
        /// ` matching device_filter '...'` or empty.
        filter: String,
        /// The adapters listed, or `none`.
        found: String,
    },
    /// A device index that does not exist.
    #[error("device {index} does not exist ({count} wgpu adapters are usable)")]
    BadDevice {
        /// The index asked for.
        index: u32,
        /// How many there are.
        count: usize,
    },
    /// A wgpu call failed (a validation error, an out-of-memory, a lost device).
    #[error("wgpu {what}: {detail}")]
    Call {
        /// The operation, e.g. `create the device`.
        what: &'static str,
        /// wgpu's message.
        detail: String,
    },
    /// A malformed or foreign blob.
    #[error("blob: {0}")]
    Blob(String),
    /// A graph or node this delegate does not run (compile/init of a node it declines).
    #[error("{0}")]
    Unsupported(String),
    /// Inputs, outputs or constant views that do not match the compiled partition.
    #[error("{0}")]
    Mismatch(String),
}

impl From<WgpuError> for DelegateError {
    fn from(e: WgpuError) -> DelegateError {
        match e {
            WgpuError::Unsupported(_) => DelegateError::unsupported(e.to_string()),
            WgpuError::Blob(_)
            | WgpuError::Mismatch(_)
            | WgpuError::BadDevice { .. }
            | WgpuError::BadBackends(_) => DelegateError::invalid(e.to_string()),
            _ => DelegateError::new(e.to_string()),
        }
    }
}
