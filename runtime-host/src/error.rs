//! The host's error type. Every variant names the thing at fault (file, plugin, node,
//! config key) and, where there is one, the fix.
//!
//! # Said once
//!
//! Each variant's message is complete on its own, and a cause it carries (an
//! [`std::io::Error`], an [`OnnxError`], a kernel error) is a typed field that the
//! message includes, not an [`Error::source`](std::error::Error::source) as well. An
//! error reporter that prints the source chain (`anyhow`'s `{:#}`, which the CLI uses)
//! would otherwise print every cause twice ("Is a directory (os error 21): Is a directory
//! (os error 21)"). Callers match on the typed fields instead of walking the chain.
//! Likewise a wrapped cause that names the file or node itself is rendered without that
//! name, so the file or node is named once, first.

use std::fmt;
use std::path::PathBuf;

use baton_delegate_api::{DType, Dim, OpKind, WireError};
use baton_onnx::OnnxError;
use thiserror::Error;

mod kinds;

pub use kinds::{
    ConfigProblem, InputProblem, ModelProblem, NodeProblem, NpyProblem, OptionProblem, PinProblem,
};

/// Errors of the Baton host.
#[derive(Debug, Error)]
pub enum HostError {
    /// A file could not be read (or written).
    #[error("cannot read {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The configuration is malformed; `problem` says where in it.
    #[error("config {path}: {problem}")]
    Config {
        path: PathBuf,
        problem: ConfigProblem,
    },
    /// A plugin refused an option the config gives it.
    #[error("plugin {plugin}: {}", option_text(.key, .problem))]
    PluginOption {
        plugin: String,
        key: String,
        problem: OptionProblem,
    },
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
    /// A plugin the config marks `required = true` could not be used; `reason` says why
    /// (the load, create or device error, or the failed probe).
    #[error("{}", required_text(.plugin, .reason))]
    RequiredPlugin { plugin: String, reason: String },
    #[error("plugin {plugin}: {call} failed: {message}")]
    PluginCall {
        plugin: String,
        call: &'static str,
        status: i32,
        message: String,
    },
    /// A model file that cannot be read as a model.
    #[error("model {path}: {problem}")]
    Model {
        path: PathBuf,
        problem: ModelProblem,
    },
    /// A `.npy` input file that cannot be read as a tensor.
    #[error("{path}: {problem}")]
    Npy { path: PathBuf, problem: NpyProblem },
    /// One input (or stream state) of the model given or declared wrongly.
    #[error("input '{name}': {problem}")]
    Input { name: String, problem: InputProblem },
    /// The number of inputs given differs from what the model takes.
    #[error("{given} inputs given, the model takes {expected}{}", state_note(*.state))]
    InputCount {
        given: usize,
        expected: usize,
        /// State inputs a stream supplies itself (not counted in `expected`).
        state: usize,
    },
    /// An output buffer an embedder lent ([`crate::Session::run_views`]'s sink) too small
    /// for the output.
    #[error("output '{name}': needs {needed} bytes, its buffer holds {capacity}")]
    OutputBuffer {
        name: String,
        needed: usize,
        capacity: usize,
    },
    /// A bound declared for a dimension no input of the model has (most likely a typo).
    #[error("a bound is declared for dimension '{dim}', which no input of the model has (symbolic dimensions: {})", list_or_none(.symbolic))]
    UnusedBound { dim: String, symbolic: Vec<String> },
    /// A tensor whose shape is still symbolic where a session needs it static.
    #[error("tensor '{tensor}': shape {} is still symbolic after binding the inputs: it depends on values only known at run time (an If whose branches differ, a Loop's trip count), and a session needs static shapes", dims(.shape))]
    SymbolicShape { tensor: String, shape: Vec<Dim> },
    /// A bounded session of a model with a dynamic region, whose memory past it cannot be
    /// planned at the bounds.
    #[error("node {node}: its output shapes depend on values (a dynamic region), so the memory after it cannot be planned at the dimension bounds; run the model without bounds")]
    DynamicUnderBounds { node: String },
    /// A node that cannot be prepared or run; `node` is its name, `op` its op.
    #[error("node {node} ({op}): {problem}")]
    Node {
        node: String,
        op: OpKind,
        problem: NodeProblem,
    },
    #[error(transparent)]
    Ir(#[from] baton_delegate_api::IrError),
    // Not `#[from]`: that would make the program error a source too, said twice.
    #[error("program: {0}")]
    Program(crate::program::ProgramError),
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

/// Shorthand for results of the host.
pub type Result<T, E = HostError> = std::result::Result<T, E>;

impl HostError {
    /// A [`HostError::Node`] for `node`.
    pub(crate) fn node(node: &baton_delegate_api::Node, problem: NodeProblem) -> HostError {
        HostError::Node {
            node: node.name.clone(),
            op: node.op,
            problem,
        }
    }

    /// A [`HostError::Input`] for the input called `name`.
    pub(crate) fn input(name: impl Into<String>, problem: InputProblem) -> HostError {
        HostError::Input {
            name: name.into(),
            problem,
        }
    }

    /// A [`HostError::Config`] about the config file `path`.
    pub(crate) fn config(path: impl Into<PathBuf>, problem: ConfigProblem) -> HostError {
        HostError::Config {
            path: path.into(),
            problem,
        }
    }
}

/// A tensor's element type and shape, printed as `f32[1, 8, 64]` (symbolic extents by
/// name: `f32[N, 3]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<Dim>,
}

impl TensorType {
    /// The type of a tensor with concrete extents.
    pub fn of(dtype: DType, shape: &[usize]) -> TensorType {
        TensorType {
            dtype,
            shape: shape.iter().map(|&d| Dim::Fixed(d)).collect(),
        }
    }

    /// The type of a declared tensor (extents may be symbolic).
    pub fn declared(dtype: DType, shape: &[Dim]) -> TensorType {
        TensorType {
            dtype,
            shape: shape.to_vec(),
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, dims(&self.shape))
    }
}

/// `[1, 8, 64]`: a shape as users write it (not Rust's debug text).
pub(crate) fn dims(shape: &[Dim]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// `unknown option 'k' (it accepts: ...)`, `option 'k' = 'v': reason`.
fn option_text(key: &str, problem: &OptionProblem) -> String {
    match problem {
        OptionProblem::Unknown { accepted } => format!(
            "unknown option '{key}' (it accepts: {})",
            list_or_none(accepted)
        ),
        OptionProblem::Invalid { value, reason } => format!("option '{key}' = '{value}': {reason}"),
    }
}

/// A required plugin's failure, naming the plugin once: a load error names it already.
fn required_text(plugin: &str, reason: &str) -> String {
    if reason.contains(plugin) {
        format!("a required plugin is unusable (`required = true`): {reason}")
    } else {
        format!("required plugin {plugin} is unusable (`required = true`): {reason}")
    }
}

fn state_note(state: usize) -> String {
    if state == 0 {
        String::new()
    } else {
        format!(" besides its {state} state inputs")
    }
}

pub(crate) fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// ONNX errors become [`HostError::Model`] (or [`HostError::Io`] for unreadable files). An
/// error that names no file gets an empty path; use [`OnnxError::in_file`] first where the
/// file is known.
impl From<OnnxError> for HostError {
    fn from(e: OnnxError) -> HostError {
        match e {
            OnnxError::Io { path, source } => HostError::Io {
                path,
                error: source,
            },
            OnnxError::Decode { ref path, .. } | OnnxError::NoGraph { ref path } => {
                HostError::Model {
                    path: path.clone(),
                    problem: ModelProblem::Onnx(e),
                }
            }
            OnnxError::InFile { path, source } => match HostError::from(*source) {
                // The inner error named no file: this one does.
                HostError::Model { problem, .. } => HostError::Model { path, problem },
                other => other,
            },
            other => HostError::Model {
                path: PathBuf::new(),
                problem: ModelProblem::Onnx(other),
            },
        }
    }
}

impl From<crate::program::ProgramError> for HostError {
    fn from(e: crate::program::ProgramError) -> HostError {
        HostError::Program(e)
    }
}

/// A model error about the file at `path` whose cause is a BTIR decoding error.
impl From<(PathBuf, WireError)> for HostError {
    fn from((path, e): (PathBuf, WireError)) -> HostError {
        HostError::Model {
            path,
            problem: ModelProblem::Wire(e),
        }
    }
}
