//! The host's error type. Every variant names the thing at fault (file, plugin, node,
//! config key) and, where there is one, the fix.

use std::path::PathBuf;

use baton_onnx::OnnxError;
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
    #[error("plugin {path}: no entry symbol `{symbol}` (is this a Baton plugin built with export_plugin_entry! or the C header?)")]
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
    /// A size taken from a model, an input, a program or a flag is over a limit of
    /// [`crate::limits::Limits`] (`needed` is `None` when computing it overflowed).
    #[error("{what}: needs {}, over {key} = {limit} bytes (raise `{key}` in the config if this size is meant)", crate::limits::describe(*.needed))]
    TooLarge {
        what: String,
        needed: Option<usize>,
        limit: usize,
        key: &'static str,
    },
}

/// Shorthand for host results.
pub type Result<T, E = HostError> = std::result::Result<T, E>;

/// ONNX errors become [`HostError::Model`] (or [`HostError::Io`] for unreadable files). An
/// error that names no file gets an empty path; use [`OnnxError::in_file`] first where the
/// file is known.
impl From<OnnxError> for HostError {
    fn from(e: OnnxError) -> HostError {
        match e {
            OnnxError::Io { path, source } => HostError::Io { path, source },
            OnnxError::Decode { path, what, source } => HostError::Model {
                path,
                message: format!("not a valid ONNX {what}: {source}"),
            },
            OnnxError::NoGraph { path } => HostError::Model {
                path,
                message: "the model has no graph; is this an ONNX model file?".into(),
            },
            OnnxError::InFile { path, source } => HostError::Model {
                path,
                message: source.to_string(),
            },
            other => HostError::Model {
                path: PathBuf::new(),
                message: other.to_string(),
            },
        }
    }
}
