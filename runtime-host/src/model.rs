//! Reading model files: a serialized IR graph (`.btir`, the same schema as the program
//! format) or an ONNX model (`.onnx`), accepted by the same commands.

use std::path::Path;

use baton_delegate_api::{wire, Graph};

use crate::error::{HostError, ModelProblem, Result};

/// Loads a model file, choosing the reader by content.
pub fn load(path: &Path) -> Result<Graph> {
    let bytes = std::fs::read(path).map_err(|error| HostError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    if bytes.starts_with(b"BTIR") {
        return wire::decode(&bytes).map_err(|e| HostError::from((path.to_path_buf(), e)));
    }
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        // The ONNX reader names the file in its errors; `HostError::from` keeps it once.
        let mut graph = baton_onnx::load(path).map_err(|e| HostError::from(e.in_file(path)))?;
        baton_reference::fold::fold_constants(&mut graph);
        return Ok(graph);
    }
    Err(HostError::Model {
        path: path.to_path_buf(),
        problem: ModelProblem::UnknownFormat,
    })
}
