//! Reading model files: a serialized IR graph (`.btir`, the same schema as the program
//! format) or an ONNX model (`.onnx`), accepted by the same commands.

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
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        let mut graph = baton_onnx::load(path).map_err(|e| HostError::Model {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        crate::fold::fold_constants(&mut graph);
        return Ok(graph);
    }
    Err(HostError::Model {
        path: path.to_path_buf(),
        message: "not a Baton IR file (magic \"BTIR\") nor an .onnx model".into(),
    })
}
