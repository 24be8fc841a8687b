//! The model a command was given: a model file (`.onnx`, `.btir`), or a compiled program,
//! told apart by its magic bytes rather than its extension.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use baton_delegate_api::{Graph, Tensor};
use baton_runtime_host::program::{self, LoadOptions, Program};
use baton_runtime_host::{model, Engine, Session};
use clap::Args;

/// Options for a `.baton` program given as the model.
#[derive(Args, Clone, Copy)]
pub struct ProgramArgs {
    /// With a .baton program: fail instead of recompiling a blob its plugin finds stale
    /// or foreign.
    #[arg(long)]
    no_recompile: bool,
    /// With a .baton program: skip checking its checksums.
    #[arg(long)]
    no_verify: bool,
}

impl ProgramArgs {
    fn options(&self) -> LoadOptions {
        LoadOptions {
            verify: !self.no_verify,
            recompile: !self.no_recompile,
            ..LoadOptions::default()
        }
    }
}

/// An opened model.
pub struct ModelFile {
    path: PathBuf,
    /// The model's graph (a program's: specialised unless bounded).
    pub graph: Graph,
    program: Option<Program>,
    options: LoadOptions,
}

impl ModelFile {
    /// Opens `path` as a program if it is one, else as a model file.
    pub fn open(path: &Path, args: &ProgramArgs) -> Result<ModelFile> {
        let options = args.options();
        if program::is_program(path) {
            let p = program::read(path, options.verify)
                .with_context(|| format!("loading {}", path.display()))?;
            return Ok(ModelFile {
                path: path.to_path_buf(),
                graph: p.graph.clone(),
                program: Some(p),
                options,
            });
        }
        Ok(ModelFile {
            path: path.to_path_buf(),
            graph: model::load(path)?,
            program: None,
            options,
        })
    }

    /// The bounds a bounded program was compiled with (empty otherwise).
    pub fn bounds(&self) -> BTreeMap<String, usize> {
        self.program
            .as_ref()
            .map(|p| p.bounds.clone())
            .unwrap_or_default()
    }

    /// A session: the program loaded (read again if an earlier session took it), or the
    /// model compiled for `bindings` and the values of its value inputs among `values`
    /// (inputs whose values decide shapes), and loaded. A bounded program, or one whose
    /// value inputs were kept for run time, gives a session for them, compiled now.
    pub fn session<'e>(
        &mut self,
        engine: &'e Engine,
        bindings: &BTreeMap<String, usize>,
        values: &BTreeMap<String, Tensor>,
    ) -> Result<Session<'e>> {
        let loading = || format!("loading {}", self.path.display());
        let is_program = self.program.is_some() || program::is_program(&self.path);
        let deferred = !self.bounds().is_empty()
            || !baton_runtime_host::values::value_inputs(&self.graph).is_empty();
        if !is_program || deferred {
            return Session::with_values(engine, &self.graph, bindings, values)
                .with_context(loading);
        }
        let p = match self.program.take() {
            Some(p) => p,
            None => program::read(&self.path, self.options.verify).with_context(loading)?,
        };
        program::load(engine, p, &self.options).with_context(loading)
    }

    /// Milliseconds from opening the file to a session ready to run, the median of `runs`
    /// loads (the engine, and so the probe cache, already warm).
    pub fn load_ms(
        &self,
        engine: &Engine,
        bindings: &BTreeMap<String, usize>,
        values: &BTreeMap<String, Tensor>,
        runs: usize,
    ) -> Result<f64> {
        let mut samples = Vec::new();
        for _ in 0..runs.max(1) {
            let start = Instant::now();
            let mut fresh = ModelFile::open_like(self)?;
            let session = fresh.session(engine, bindings, values)?;
            samples.push(start.elapsed().as_secs_f64() * 1e3);
            drop(session);
        }
        samples.sort_by(f64::total_cmp);
        Ok(samples[samples.len() / 2])
    }

    fn open_like(other: &ModelFile) -> Result<ModelFile> {
        let args = ProgramArgs {
            no_recompile: !other.options.recompile,
            no_verify: !other.options.verify,
        };
        ModelFile::open(&other.path, &args)
    }
}
