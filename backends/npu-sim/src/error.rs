//! The typed errors of the NPU simulator.

use baton_delegate_api::DelegateError;

/// Why a stream could not be loaded or run, or the device could not be used.
#[derive(Debug, thiserror::Error)]
pub enum NpuError {
    /// The bytes do not start with the stream magic: not an NPU command stream at all.
    #[error("not an npu-sim command stream (no \"BNPU\" magic); recompile the model")]
    NotAStream,
    /// A stream of another format version.
    #[error("command stream format version {found}, this build reads version {supported}; recompile the model with this plugin")]
    Version {
        /// The version in the blob.
        found: u32,
        /// The one this build reads.
        supported: u32,
    },
    /// The checksum does not match: the blob was damaged in storage or transit.
    #[error("command stream checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the blob is corrupt; recompile the model")]
    Checksum {
        /// The CRC in the header.
        stored: u32,
        /// The CRC of the bytes received.
        computed: u32,
    },
    /// A well-formed header around a payload that does not decode or does not fit.
    #[error("malformed command stream: {0}")]
    Malformed(String),
    /// The stream was tiled for more SRAM than this NPU has.
    #[error("the command stream was tiled for {blob_kib} KiB of SRAM, this NPU has {ours_kib} KiB; recompile for this configuration")]
    Sram {
        /// SRAM the blob's tiles need.
        blob_kib: u32,
        /// SRAM of this context.
        ours_kib: u32,
    },
    /// The device is switched off (`present = false` or `BATON_NPU_SIM_ABSENT=1`).
    #[error("npu-sim: no NPU present (option present=false or BATON_NPU_SIM_ABSENT=1)")]
    Absent,
    /// A device index other than 0.
    #[error("npu-sim has one device (0), not device {0}")]
    NoSuchDevice(u32),
    /// Inputs or outputs that do not match the compiled partition.
    #[error("execute: {0}")]
    Io(String),
    /// A subgraph `compile` cannot lower (a node `supports` would have declined).
    #[error("compile: {0}")]
    Unsupported(String),
}

impl From<NpuError> for DelegateError {
    fn from(e: NpuError) -> DelegateError {
        match e {
            NpuError::Unsupported(_) => DelegateError::unsupported(e.to_string()),
            NpuError::Absent | NpuError::Sram { .. } => DelegateError::new(e.to_string()),
            _ => DelegateError::invalid(e.to_string()),
        }
    }
}
