//! The delegate's typed error, turned into a [`DelegateError`] at the SDK boundary.

use baton_delegate_api::DelegateError;

/// Everything that can go wrong in the Vulkan delegate. Each variant names the thing at
/// fault and, where there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum VulkanError {
    /// The Vulkan loader (libvulkan) could not be opened or an instance not be created.
    #[error("no Vulkan loader or instance: {0} (install a driver, e.g. `apt-get install mesa-vulkan-drivers`)")]
    NoLoader(String),
    /// The loader works but offers no device with a compute queue that passes the filter.
    #[error("no Vulkan device with a compute queue{filter} (found: {found})")]
    NoDevice {
        /// ` matching device_filter '...'` or empty.
        filter: String,
        /// The devices the loader listed, or `none`.
        found: String,
    },
    /// A device index that does not exist.
    #[error("device {index} does not exist ({count} Vulkan devices are usable)")]
    BadDevice {
        /// The index asked for.
        index: u32,
        /// How many there are.
        count: usize,
    },
    /// A Vulkan call failed.
    #[error("Vulkan {what}: {detail}")]
    Call {
        /// The operation, e.g. `create the device`.
        what: &'static str,
        /// The driver's or vulkano's message.
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

impl From<VulkanError> for DelegateError {
    fn from(e: VulkanError) -> DelegateError {
        match e {
            VulkanError::Unsupported(_) => DelegateError::unsupported(e.to_string()),
            VulkanError::Blob(_) | VulkanError::Mismatch(_) | VulkanError::BadDevice { .. } => {
                DelegateError::invalid(e.to_string())
            }
            _ => DelegateError::new(e.to_string()),
        }
    }
}

/// Attaches what was being done to any vulkano error.
pub(crate) trait CallContext<T> {
    /// Maps the error to [`VulkanError::Call`].
    fn call(self, what: &'static str) -> Result<T, VulkanError>;
}

impl<T, E: std::fmt::Display + std::fmt::Debug> CallContext<T> for Result<T, E> {
    fn call(self, what: &'static str) -> Result<T, VulkanError> {
        // Debug, on one line: vulkano's Display of a validation error is only "a
        // validation error occurred"; its Debug names the rule and the missing feature.
        self.map_err(|e| VulkanError::Call {
            what,
            detail: format!("{e:?}").replace('\n', " "),
        })
    }
}
