//! The host's error type. Every variant names the thing at fault (file, plugin, node,
//! config key) and, where there is one, the fix.

use std::path::PathBuf;

use thiserror::Error;

/// Errors of the Baton host.
#[derive(Debug, Error)]
pub enum HostError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("plugin {path}: cannot load the library: {message}")]
    PluginLoad { path: PathBuf, message: String },
    #[error("plugin {path}: no entry symbol `{symbol}` (is this a Baton plugin built with export_delegate! or the C header?)")]
    MissingEntry { path: PathBuf, symbol: String },
    #[error("plugin {plugin}: ABI {plugin_major}.{plugin_minor} is not compatible with this host's ABI {host_major}.{host_minor}; {fix}")]
    AbiMismatch {
        plugin: String,
        plugin_major: u32,
        plugin_minor: u32,
        host_major: u32,
        host_minor: u32,
        fix: String,
    },
    #[error("plugin {plugin}: descriptor struct_size {found} is smaller than the {needed} bytes of an ABI {major}.0 descriptor; the plugin was built against a broken or foreign header")]
    DescriptorTooShort {
        plugin: String,
        found: u32,
        needed: usize,
        major: u32,
    },
    #[error("plugin {plugin}: file sha256 {found} does not match the pinned {expected}")]
    HashMismatch {
        plugin: String,
        expected: String,
        found: String,
    },
    #[error("plugin {plugin}: {call} failed: {message}")]
    PluginCall {
        plugin: String,
        call: &'static str,
        status: i32,
        message: String,
    },
    #[error("model {path}: {message}")]
    Model { path: PathBuf, message: String },
    #[error("input '{name}': {message}")]
    Input { name: String, message: String },
    #[error("node {node}: {message}")]
    Node { node: String, message: String },
    #[error(transparent)]
    Ir(#[from] baton_delegate_api::IrError),
    #[error("program: {0}")]
    Program(#[from] crate::program::ProgramError),
    #[error(transparent)]
    Partition(#[from] baton_partitioner::PartitionError),
}

/// Shorthand for host results.
pub type Result<T, E = HostError> = std::result::Result<T, E>;
