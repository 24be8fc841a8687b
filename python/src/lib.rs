//! `baton`, the Python package: an engine from a config, sessions that run a model on
//! numpy arrays, streams that carry state between steps, and the plan as rows.
//!
//! ```python
//! import baton, numpy as np
//! engine = baton.Engine(config="examples/configs/cpu.toml")   # or Engine(): host only
//! session = engine.load("model.onnx")          # dims bound by the first run, or dims={...}
//! outputs = session.run({"x": np.zeros((1, 3), np.float32)})  # {"y": array, ...}
//! stream = session.stream({"state": "stateN"})  # state input <- output of the last step
//! probs = stream.step({"input": chunk, "sr": sr})
//! ```
//!
//! Arrays cross without copies of their own: an input that is C-contiguous and
//! little-endian is read in place (once, into the session's arena), and each output is a
//! fresh numpy array written once, from the arena. Only an input that is not contiguous is
//! first made so (`numpy.ascontiguousarray`). The arrays are reached through numpy's array
//! interface (`__array_struct__`, its C form), which keeps this module on the stable ABI (abi3)
//! without linking numpy's C API.

use pyo3::prelude::*;

mod arrays;
mod engine;
mod session;

pyo3::create_exception!(
    baton,
    BatonError,
    pyo3::exceptions::PyException,
    "An error of the Baton runtime: its message names the file, input, node or plugin."
);

/// The runtime's error as a Python exception.
pub(crate) fn error(e: impl std::fmt::Display) -> PyErr {
    BatonError::new_err(e.to_string())
}

#[pymodule]
fn baton(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BatonError", m.py().get_type::<BatonError>())?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<session::Session>()?;
    m.add_class::<session::Stream>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
