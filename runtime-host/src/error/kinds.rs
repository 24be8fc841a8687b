//! What exactly is wrong, for the [`HostError`](super::HostError) variants that name a
//! thing (a config file, a model, an input, a node) and then say what is wrong with it.
//! Each is an enum a caller can match on; its message never repeats the thing's name,
//! which the enclosing variant has already printed.

use baton_delegate_api::{DType, WireError};
use baton_onnx::OnnxError;
use baton_reference::KernelError;
use thiserror::Error;

use super::{HostError, TensorType};

/// What is wrong in a config file.
#[derive(Debug, Error)]
pub enum ConfigProblem {
    /// Not valid TOML, or a key or value the schema does not have. `line` is 1-based.
    #[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Toml {
        line: Option<usize>,
        /// The parser's one-line message (it names the key).
        message: String,
    },
    /// A `[[plugin]]` entry (1-based) with both or neither of `path` and `builtin`.
    #[error("plugin #{index}: give exactly one of `path` or `builtin`")]
    PluginSource { index: usize },
    /// A `[[plugin]]` entry (1-based) whose `sha256` is not 64 hex digits.
    #[error("plugin #{index}: sha256 must be 64 hex digits")]
    Sha256 { index: usize },
    /// A `[[plugin]]` entry (1-based) asking a built-in backend for process isolation: a
    /// built-in is linked into the host, so there is no library for a child to load.
    #[error("plugin #{index}: isolation = \"process\" needs a plugin file (`path`); a built-in backend runs in the host's process")]
    IsolatedBuiltin { index: usize },
    /// A `[[plugin]]` entry (1-based) with `timeout_ms = 0`, which no call could meet.
    #[error("plugin #{index}: timeout_ms must be at least 1 (leave it out for no bound)")]
    ZeroTimeout { index: usize },
    /// Two loaded plugins end up with the same name.
    #[error("two plugins are named '{name}'; give one a `name`")]
    DuplicateName { name: String },
    /// A `policy.pin` entry (1-based) that cannot be resolved.
    #[error("policy.pin #{index}: {problem}")]
    Pin { index: usize, problem: PinProblem },
}

/// Why a `policy.pin` entry cannot be resolved.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PinProblem {
    /// Neither `op` nor `node`: it would match every node.
    #[error("give `op` or `node` (a pin with neither would match every node)")]
    MatchesEverything,
    /// `op` is not an op name Baton knows.
    #[error("unknown op '{0}'")]
    UnknownOp(String),
    /// `target` is neither `host` nor the name of a configured plugin.
    #[error("target '{target}' is neither 'host' nor a configured plugin (plugins: {})", super::list_or_none(.plugins))]
    UnknownTarget {
        target: String,
        plugins: Vec<String>,
    },
}

/// Why a plugin refuses an option the config gives it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OptionProblem {
    /// The plugin declares no option of that name.
    #[error("the plugin has no such option (it accepts: {})", super::list_or_none(.accepted))]
    Unknown { accepted: Vec<String> },
    /// The value does not fit the option's declared type or range.
    #[error("value '{value}': {reason}")]
    Invalid { value: String, reason: String },
}

/// Why a model file cannot be read as a model.
#[derive(Debug, Error)]
pub enum ModelProblem {
    /// A BTIR file that does not decode.
    #[error("{0}")]
    Wire(WireError),
    /// An ONNX file that does not decode or import (rendered without its file name,
    /// which [`HostError::Model`] prints).
    #[error("{}", onnx_without_file(.0))]
    Onnx(OnnxError),
    /// Neither BTIR (by its magic) nor ONNX (by its extension).
    #[error("not a Baton IR file (magic \"BTIR\") nor an .onnx model")]
    UnknownFormat,
}

/// The message of an ONNX error without the file name it may carry.
fn onnx_without_file(e: &OnnxError) -> String {
    match e {
        OnnxError::Decode { what, source, .. } => format!("not a valid ONNX {what}: {source}"),
        OnnxError::NoGraph { .. } => "the model has no graph; is this an ONNX model file?".into(),
        OnnxError::InFile { source, .. } => onnx_without_file(source),
        OnnxError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// Why a `.npy` file cannot be read as a tensor.
#[derive(Debug, Error)]
pub enum NpyProblem {
    /// The header is not that of a `.npy` file.
    #[error("not a .npy file: {0}")]
    NotNpy(std::io::Error),
    #[error("Fortran-order arrays are not supported; save with C order")]
    FortranOrder,
    /// A header whose shape holds more elements than the file has bytes (refused before
    /// anything is allocated for it).
    #[error("the header's shape {shape:?} holds more elements than the file's {file_bytes} bytes")]
    ShapeTooLarge {
        shape: Vec<usize>,
        file_bytes: usize,
    },
    /// A numpy dtype with no Baton dtype (as numpy writes it, e.g. `<c8`).
    #[error("unsupported array dtype '{0}'")]
    UnsupportedDtype(String),
    /// The data after the header is short or unreadable.
    #[error("reading data: {0}")]
    Data(std::io::Error),
    /// The file's dtype is not the input's, and its values do not all convert exactly
    /// (see [`crate::inputs`]).
    #[error("input '{input}' is {expected}, the file holds {got}: {reason}")]
    DtypeMismatch {
        input: String,
        expected: DType,
        got: DType,
        reason: String,
    },
}

/// What is wrong with one input (or stream state) of a model.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum InputProblem {
    /// The tensor given has another dtype or shape than the model declares.
    #[error("got {got}, expected {expected}")]
    WrongType {
        expected: TensorType,
        got: TensorType,
    },
    /// An axis the model fixes has another extent.
    #[error("axis {axis} is {got}, the model fixes it at {fixed}")]
    FixedExtent {
        axis: usize,
        got: usize,
        fixed: usize,
    },
    /// A symbolic dimension above its declared bound.
    #[error("dimension '{dim}' (axis {axis}) is {got}, above its declared bound {bound}")]
    AboveBound {
        dim: String,
        axis: usize,
        got: usize,
        bound: usize,
    },
    /// A symbolic dimension another input bound to a different extent.
    #[error("dimension '{dim}' (axis {axis}) is {got}, but another input bound it to {bound_to}")]
    Inconsistent {
        dim: String,
        axis: usize,
        got: usize,
        bound_to: usize,
    },
    /// A symbolic dimension with no declared bound.
    #[error("dimension '{dim}' is symbolic and has no declared bound (give one, e.g. --bound {dim}=MAX)")]
    Unbounded { dim: String },
    /// A symbolic dimension bound to 0.
    #[error("the bound of dimension '{dim}' is 0")]
    ZeroBound { dim: String },
    /// A symbolic dimension no input binds.
    #[error("dimension '{dim}' is symbolic; give an input to bind it")]
    Unbound { dim: String },
    /// A subgraph given another number of inputs than it takes.
    #[error("subgraph takes {expected} inputs, {given} given")]
    SubgraphArity { expected: usize, given: usize },
    /// A borrowed input buffer (C or Python API) whose length is not its shape's.
    #[error("its buffer holds {got} bytes; its dtype and shape take {expected}")]
    BufferSize { expected: usize, got: usize },
    /// The model has no input of that name.
    #[error("the model has no input of that name")]
    NoSuchInput,
    /// A stream state names an output the model does not have.
    #[error("the model has no output '{output}'")]
    NoSuchOutput { output: String },
    /// A stream state whose input and output types differ, so steps cannot be chained.
    #[error(
        "state input is {input}, but output '{output}' is {output_type}: they cannot be chained"
    )]
    StateMismatch {
        output: String,
        input: TensorType,
        output_type: TensorType,
    },
    /// A value input (its values decide shapes) with no value to specialise the model for.
    #[error("its values decide shapes in the model, so a session needs them to specialise it; give the input (a Session built with Session::with_values, or --input NAME=FILE.npy) ({because})")]
    MissingValue { because: String },
    /// A value input larger than a value input may be.
    #[error("its values decide shapes in the model, but it has {elements} elements; a value input holds at most {max}")]
    ValueTooLarge { elements: usize, max: usize },
    /// A value input in a model loaded with dimension bounds, whose memory is planned at
    /// the bounds before any value is known.
    #[error("its values decide shapes in the model, so its memory cannot be planned at the dimension bounds before a run gives them; run it without bounds (a session is specialised per set of values: SpecializingSession)")]
    ValueInputBounded,
    /// A run gives a value input other values than the session was specialised for.
    #[error("the session was specialised for the values {expected} of this value input, the run gives {got}; a run with other values needs a session built for them (SpecializingSession builds and caches one per set of values)")]
    ValueChanged { expected: String, got: String },
    /// The name is an input of the model, but not a state of this stream.
    #[error("not a state input of this stream")]
    NotState,
    /// A stream output already carried into another state.
    #[error("output '{output}' already carries state '{state}'; an output can be carried into one state only")]
    OutputCarriedTwice { output: String, state: String },
    /// A state input named by two pairs.
    #[error("is given as a state twice; each state input takes one output")]
    StateTwice,
}

/// Why a node cannot be prepared or run.
#[derive(Debug, Error)]
pub enum NodeProblem {
    /// The reference kernels cannot run the node, so there is nowhere to fall back to.
    #[error("no portable kernel: {reason}")]
    NoPortableKernel { reason: String },
    /// A reference kernel refused the operands or failed while running.
    #[error("{}", kernel_without_node(.0))]
    Kernel(KernelError),
    /// More outputs than the op produces (or none).
    #[error("{outputs} outputs, the op produces {produced}")]
    OutputCount { outputs: usize, produced: usize },
    /// A control-flow node without the subgraph attribute it needs.
    #[error("subgraph '{attr}' is missing")]
    MissingSubgraph { attr: &'static str },
    /// An If neither of whose branches can be loaded for these input shapes.
    #[error("neither branch can run for these input shapes: {}", .reasons.join("; "))]
    NoBranchLoads { reasons: Vec<String> },
    /// An If's condition is not one bool.
    #[error("the condition must be one bool, got {got}")]
    BadCondition { got: TensorType },
    /// The branch the condition picks could not be loaded.
    #[error("the condition picks {branch}, which cannot run for these input shapes: {reason}")]
    BranchCannotLoad {
        branch: &'static str,
        reason: String,
    },
    /// The branch the condition picks failed while running.
    #[error("in {branch}: {error}")]
    Branch {
        branch: &'static str,
        error: Box<HostError>,
    },
    /// A control-flow result of another type than the session planned.
    #[error("output '{output}' is {got} at run time, but the session planned {planned}")]
    OutputType {
        output: String,
        planned: TensorType,
        got: TensorType,
    },
    /// Fewer control-flow results than the node has outputs.
    #[error("{results} results for {outputs} outputs")]
    ResultCount { results: usize, outputs: usize },
}

/// A kernel error's message without the node label, which [`HostError::Node`] prints.
fn kernel_without_node(e: &KernelError) -> String {
    match e {
        KernelError::Unsupported { message, .. } => {
            format!("not supported by the reference kernels: {message}")
        }
        KernelError::Shape { message, .. } | KernelError::Arithmetic { message, .. } => {
            message.clone()
        }
        KernelError::Graph { .. } => e.to_string(),
    }
}
