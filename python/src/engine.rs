//! `baton.Engine`: the configured plugins, loaded and proven by probe.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use baton_runtime_host::{Config, Engine as HostEngine};

use crate::error;
use crate::session::Session;

/// An engine: `Engine()` runs everything on the host's portable kernels;
/// `Engine(config="file.toml")` loads the plugins a config file names;
/// `Engine(config_text="...", base_dir=".")` the same from TOML text.
#[pyclass(module = "baton", unsendable)]
pub struct Engine {
    pub(crate) inner: Arc<HostEngine>,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (config=None, *, config_text=None, base_dir=None))]
    fn new(
        config: Option<PathBuf>,
        config_text: Option<&str>,
        base_dir: Option<PathBuf>,
    ) -> PyResult<Engine> {
        let cfg = match (config, config_text) {
            (Some(_), Some(_)) => {
                return Err(error("give config (a file) or config_text, not both"))
            }
            (Some(path), None) => Config::load(&path).map_err(error)?,
            (None, Some(text)) => {
                let base = base_dir.unwrap_or_else(|| PathBuf::from("."));
                Config::parse(text, Path::new("(config_text)"), &base).map_err(error)?
            }
            (None, None) => Config {
                source: "(no config: the host's portable kernels only)".into(),
                ..Config::default()
            },
        };
        let inner = HostEngine::new(cfg).map_err(error)?;
        Ok(Engine {
            inner: Arc::new(inner),
        })
    }

    /// Loads a model (`.baton`, `.btir` or `.onnx`) as a session. `dims` binds symbolic
    /// dimensions now; without it they are bound by the first run's inputs (and bound
    /// again, recompiling, when a later run's differ). `bounds` instead plans once for
    /// every binding up to the bounds.
    #[pyo3(signature = (path, dims=None, bounds=None))]
    fn load(
        &self,
        py: Python<'_>,
        path: PathBuf,
        dims: Option<BTreeMap<String, usize>>,
        bounds: Option<BTreeMap<String, usize>>,
    ) -> PyResult<Session> {
        Session::open(py, self.inner.clone(), &path, dims, bounds)
    }

    /// The configured plugins as rows (dicts): backend, plugin, device, usable, required,
    /// detail; those that did not come up last, with `usable` False and the reason.
    #[getter]
    fn devices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = PyList::empty(py);
        for b in &self.inner.backends {
            let d = PyDict::new(py);
            d.set_item("backend", &b.name)?;
            d.set_item(
                "plugin",
                format!("{} {}", b.ctx.lib.name, b.ctx.lib.version),
            )?;
            d.set_item("device", &b.device.name)?;
            d.set_item("usable", b.usable())?;
            d.set_item("required", b.required)?;
            d.set_item("detail", &b.verdict.detail)?;
            rows.append(d)?;
        }
        for f in &self.inner.failed {
            let d = PyDict::new(py);
            d.set_item("backend", &f.label)?;
            d.set_item("plugin", &f.label)?;
            d.set_item("device", "")?;
            d.set_item("usable", false)?;
            d.set_item("required", f.required)?;
            d.set_item("detail", f.error.to_string())?;
            rows.append(d)?;
        }
        Ok(rows)
    }
}
