//! Reading model files. A model is a serialized IR graph (`.btir`, the same schema as the
//! program format); ONNX import plugs in here and is accepted by the same commands.

use std::path::Path;

use baton_delegate_api::{wire, Graph};

use crate::error::{HostError, Result};

/// Loads a model file, choosing the reader by content.
pub fn load(path: &Path) -> Result<Graph> {
    let bytes = std::fs::read(path).map_err(|source| HostError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.starts_with(b"BTIR") {
        return wire::decode(&bytes).map_err(|e| HostError::Model {
            path: path.to_path_buf(),
            message: e.to_string(),
        });
    }
    let is_onnx = path.extension().is_some_and(|e| e == "onnx");
    Err(HostError::Model {
        path: path.to_path_buf(),
        message: if is_onnx {
            "ONNX import is not in this build yet; convert the model to .btir".into()
        } else {
            "not a Baton IR file (expected the magic \"BTIR\")".into()
        },
    })
}
