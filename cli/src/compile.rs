//! `baton compile`: a model compiled ahead of time into a `.baton` program.
//!
//! The program is made by the same code as a `baton run` of the model (partition, have
//! each plugin compile its partitions, plan the arena), for the plugins of the config given
//! here; `baton run OUT.baton` then only maps the file and initialises the blobs.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use baton_delegate_api::Dim;
use baton_runtime_host::{model, program};
use clap::Args;

use crate::config::{engine, ConfigArg};
use crate::dims;

#[derive(Args)]
pub struct CompileArgs {
    /// Model file (.onnx or .btir).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    /// Bind a symbolic input dimension, NAME=VALUE: the program runs inputs of that size.
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    dims: Vec<String>,
    /// Declare the upper bound of a symbolic dimension, NAME=MAX: the program runs every
    /// size up to it, its partitions compiled per size at run time.
    #[arg(long = "bound", value_name = "NAME=MAX")]
    bounds: Vec<String>,
    /// Where to write the program.
    #[arg(long, short)]
    output: PathBuf,
}

/// Compiles `a.model` and writes the program to `a.output`.
pub fn run(a: CompileArgs) -> Result<()> {
    if program::is_program(&a.model) {
        bail!(
            "{} is already a compiled program; compile its source model",
            a.model.display()
        );
    }
    let graph = model::load(&a.model)?;
    let dims = dims::parse(&a.dims, "--dim", "NAME=VALUE", &graph)?;
    let bounds = dims::parse(&a.bounds, "--bound", "NAME=MAX", &graph)?;
    // Every symbolic dimension is fixed (--dim) or, in a bounded program, bounded (--bound):
    // a bounded program keeps the graph as given and is compiled per size at run time, so
    // it cannot also fix some dimensions (it would fail only when loaded).
    if let (false, Some(name)) = (bounds.is_empty(), dims.keys().next()) {
        bail!(
            "--dim {name} with --bound: a bounded program takes every symbolic dimension as \
             a bound; give --bound {name}=MAX instead"
        );
    }
    // A model with value inputs is specialised per value when run, for the dimensions the
    // run's inputs bind: it needs no --dim.
    let per_value = !baton_runtime_host::values::value_inputs(&graph).is_empty();
    for &t in graph.inputs.iter().filter(|_| !per_value) {
        let decl = &graph.tensors[t];
        for d in &decl.shape {
            if let Dim::Sym(s) = d {
                if bounds.is_empty() && !dims.contains_key(s) {
                    bail!(
                        "input '{}' has symbolic dimension '{s}': pass --dim {s}=VALUE (or --bound {s}=MAX)",
                        decl.name
                    );
                }
                if !bounds.is_empty() && !bounds.contains_key(s) {
                    bail!(
                        "input '{}' has symbolic dimension '{s}' and no bound: a bounded program \
                         needs one for every symbolic dimension (--bound {s}=MAX)",
                        decl.name
                    );
                }
            }
        }
    }
    let engine = engine(&a.config)?;
    let compiled = program::compile(&engine, &graph, &dims, &bounds)
        .with_context(|| format!("compiling {}", a.model.display()))?;
    for n in &compiled.notes {
        eprintln!("baton: note: {n}");
    }
    let bytes = program::encode(&compiled);
    write(&a.output, &bytes)?;
    let parts: Vec<String> = compiled
        .partitions
        .iter()
        .zip(&compiled.plan.partitions)
        .map(|(c, p)| {
            format!(
                "{} ({} nodes, blob {} B)",
                c.backend,
                p.nodes.len(),
                c.blob.bytes().len()
            )
        })
        .collect();
    println!(
        "{} -> {}: {} B; {} nodes; weights {} B; partitions: {}{}",
        a.model.display(),
        a.output.display(),
        bytes.len(),
        compiled.graph.nodes.len(),
        compiled.constant_bytes(),
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        },
        match &compiled.memory {
            Some(m) => format!("; arena {} B", m.arena_size),
            None if compiled.bounds.is_empty() => format!(
                "; value inputs {}: specialised and compiled per value at run time",
                baton_runtime_host::values::value_input_names(&compiled.graph).join(", ")
            ),
            None => format!(
                "; bounded by {}, compiled per size at run time",
                crate::dims::bound_list(&compiled.bounds)
            ),
        }
    );
    Ok(())
}

/// Writes through a temporary file beside `path`, so a failed write never leaves a
/// truncated program under the final name.
fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
