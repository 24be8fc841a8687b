//! ONNX files in: the protobuf layer of ONNX import.
//!
//! This module decodes `.onnx` model files ([`ModelProto`]) and the `.pb` tensor files of
//! the ONNX backend test data ([`TensorProto`]), and turns ONNX tensors into Baton
//! [`Tensor`]s. Building a Baton graph from a decoded model is the importer's job, not this
//! module's.
//!
//! # Why hand-written prost structs
//!
//! The messages in [`proto`] are written by hand with `#[derive(prost::Message)]` and an
//! explicit field number on every field, instead of being generated from `onnx.proto`:
//! - no `protoc` and no build script, so the host builds with `cargo` alone on every
//!   platform it targets;
//! - no generated code to regenerate and keep in step with a vendored `.proto` file;
//! - only the messages and fields Baton reads are declared. The protobuf wire format lets
//!   a reader skip fields it does not know, so models using the rest of the format (model
//!   functions, training info, sparse initializers) still decode.
//!
//! The field numbers are fixed by the ONNX format and cannot change without breaking every
//! model ever written; the tests check them against hand-assembled wire bytes.
//!
//! # Element types
//!
//! Baton has seven dtypes. ONNX FLOAT, FLOAT16, INT8, UINT8, INT32, INT64 and BOOL map onto
//! them one to one; every other ONNX type (DOUBLE, INT16, UINT16, UINT32, UINT64, STRING,
//! BFLOAT16, the complex, 8-, 4- and 2-bit types) is refused with
//! [`OnnxError::UnsupportedDtype`] rather than converted behind the model's back.

#![warn(missing_docs)]

mod import;
pub mod proto;
mod tensor;

use std::path::{Path, PathBuf};

use baton_delegate_api::{DType, Tensor};
use prost::Message;
use thiserror::Error;

pub use import::{import, OPSETS};
use proto::tensor_proto::DataType;
pub use proto::{ModelProto, TensorProto};
pub use tensor::tensor_from_proto;

/// Reads an `.onnx` file and converts it to the Baton IR (external data is looked up next
/// to the file). Errors name the file.
pub fn load(path: &Path) -> Result<baton_delegate_api::Graph, OnnxError> {
    let model = read_model(path)?;
    import(&model, path.parent()).map_err(|e| e.in_file(path))
}

/// Errors of the ONNX layer. Each names the file or the tensor at fault.
#[derive(Debug, Error)]
pub enum OnnxError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is not a valid protobuf encoding of the expected message.
    #[error("{path}: not a valid ONNX {what}: {source}")]
    Decode {
        /// The file.
        path: PathBuf,
        /// What the file should hold (`"model"`, `"tensor"`).
        what: &'static str,
        /// The protobuf decoding error.
        source: prost::DecodeError,
    },
    /// A file decoded as a model but has no graph, so it is not an ONNX model.
    #[error("{path}: the model has no graph; is this an ONNX model file?")]
    NoGraph {
        /// The file.
        path: PathBuf,
    },
    /// An error about the contents of a file, with the file named.
    #[error("{path}: {source}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// The error about its contents.
        source: Box<OnnxError>,
    },
    /// Something in the model the IR cannot represent; the message names the node, its
    /// op, the opset and the attribute at fault.
    #[error("{message}")]
    Unsupported {
        /// What is unsupported, and where.
        message: String,
    },
    /// The tensor's ONNX element type has no Baton dtype.
    #[error("tensor '{tensor}': ONNX type {onnx_type} ({code}) has no Baton dtype; Baton reads FLOAT, FLOAT16, INT8, UINT8, INT32, INT64 and BOOL tensors (convert the tensor in the model)")]
    UnsupportedDtype {
        /// The tensor's name.
        tensor: String,
        /// The ONNX type's name, e.g. `"DOUBLE"` (see [`onnx_type_name`]).
        onnx_type: &'static str,
        /// The ONNX type code.
        code: i32,
    },
    /// The tensor's dims are negative or too large to address.
    #[error("tensor '{tensor}': invalid dims {dims:?}: {reason}")]
    BadDims {
        /// The tensor's name.
        tensor: String,
        /// The dims as stored.
        dims: Vec<i64>,
        /// What is wrong with them.
        reason: &'static str,
    },
    /// The number of stored elements differs from the product of the dims.
    #[error(
        "tensor '{tensor}': dims {dims:?} call for {expected} elements but {storage} holds {found}"
    )]
    ElementCount {
        /// The tensor's name.
        tensor: String,
        /// The dims as stored.
        dims: Vec<i64>,
        /// The product of the dims.
        expected: usize,
        /// The number of elements found.
        found: usize,
        /// Where they were found (`"raw_data"`, `"float_data"`, `"external data"`, ...).
        storage: &'static str,
    },
    /// The tensor's external data cannot be located or read.
    #[error("tensor '{tensor}': external data: {message}")]
    ExternalData {
        /// The tensor's name.
        tensor: String,
        /// What went wrong, naming the file where there is one.
        message: String,
    },
    /// Any other inconsistency in a tensor's encoding.
    #[error("tensor '{tensor}': {message}")]
    Malformed {
        /// The tensor's name.
        tensor: String,
        /// What is wrong.
        message: String,
    },
}

impl OnnxError {
    /// Names `path` as the file the error is about, unless the error already names a file.
    pub fn in_file(self, path: &Path) -> OnnxError {
        match self {
            OnnxError::Io { .. }
            | OnnxError::Decode { .. }
            | OnnxError::NoGraph { .. }
            | OnnxError::InFile { .. } => self,
            other => OnnxError::InFile {
                path: path.to_path_buf(),
                source: Box::new(other),
            },
        }
    }
}

/// Reads and decodes an `.onnx` model file. The model must have a graph; nothing else is
/// checked here.
pub fn read_model(path: &Path) -> Result<ModelProto, OnnxError> {
    let bytes = read_file(path)?;
    let model = ModelProto::decode(bytes.as_slice()).map_err(|source| OnnxError::Decode {
        path: path.to_path_buf(),
        what: "model",
        source,
    })?;
    if model.graph.is_none() {
        return Err(OnnxError::NoGraph {
            path: path.to_path_buf(),
        });
    }
    Ok(model)
}

/// Reads a serialized [`TensorProto`] (the `input_N.pb` / `output_N.pb` files of the ONNX
/// backend test data) and returns its name and value. External data, if any, is looked up
/// relative to the file's directory.
pub fn read_tensor_pb(path: &Path) -> Result<(String, Tensor), OnnxError> {
    let bytes = read_file(path)?;
    let proto = TensorProto::decode(bytes.as_slice()).map_err(|source| OnnxError::Decode {
        path: path.to_path_buf(),
        what: "tensor",
        source,
    })?;
    let tensor = tensor_from_proto(&proto, path.parent()).map_err(|e| e.in_file(path))?;
    Ok((proto.name, tensor))
}

fn read_file(path: &Path) -> Result<Vec<u8>, OnnxError> {
    std::fs::read(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The Baton dtype of an ONNX element type code, if it has one.
pub fn baton_dtype(data_type: i32) -> Option<DType> {
    DType::from_onnx(data_type.into())
}

/// The ONNX element type of a Baton dtype (the inverse of [`baton_dtype`]).
pub fn onnx_data_type(dtype: DType) -> DataType {
    DataType::try_from(dtype.onnx_code() as i32).expect("every dtype has an ONNX type")
}

/// The name ONNX gives an element type code (`1` is `"FLOAT"`, `11` is `"DOUBLE"`);
/// `"UNKNOWN"` for a code the format does not define.
pub fn onnx_type_name(data_type: i32) -> &'static str {
    let Ok(t) = DataType::try_from(data_type) else {
        return "UNKNOWN";
    };
    match t {
        DataType::Undefined => "UNDEFINED",
        DataType::Float => "FLOAT",
        DataType::Uint8 => "UINT8",
        DataType::Int8 => "INT8",
        DataType::Uint16 => "UINT16",
        DataType::Int16 => "INT16",
        DataType::Int32 => "INT32",
        DataType::Int64 => "INT64",
        DataType::String => "STRING",
        DataType::Bool => "BOOL",
        DataType::Float16 => "FLOAT16",
        DataType::Double => "DOUBLE",
        DataType::Uint32 => "UINT32",
        DataType::Uint64 => "UINT64",
        DataType::Complex64 => "COMPLEX64",
        DataType::Complex128 => "COMPLEX128",
        DataType::Bfloat16 => "BFLOAT16",
        DataType::Float8e4m3fn => "FLOAT8E4M3FN",
        DataType::Float8e4m3fnuz => "FLOAT8E4M3FNUZ",
        DataType::Float8e5m2 => "FLOAT8E5M2",
        DataType::Float8e5m2fnuz => "FLOAT8E5M2FNUZ",
        DataType::Uint4 => "UINT4",
        DataType::Int4 => "INT4",
        DataType::Float4e2m1 => "FLOAT4E2M1",
        DataType::Float8e8m0 => "FLOAT8E8M0",
        DataType::Uint2 => "UINT2",
        DataType::Int2 => "INT2",
    }
}
