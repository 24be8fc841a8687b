//! The model inputs given on the command line.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use baton_delegate_api::{Graph, Tensor};
use baton_runtime_host::inputs;

/// The tensors given as `--input NAME=FILE.npy`, by name; each name must be an input of
/// `graph`, and each file is fitted to that input's dtype
/// ([`baton_runtime_host::inputs::read`]).
pub fn given_inputs(graph: &Graph, specs: &[String]) -> Result<BTreeMap<String, Tensor>> {
    let mut given: BTreeMap<String, Tensor> = BTreeMap::new();
    for spec in specs {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("--input '{spec}': expected NAME=FILE.npy"))?;
        let Some(tensor) = inputs::read_for(graph, name, Path::new(file)) else {
            bail!(
                "--input '{name}': the model has no such input (inputs: {})",
                input_list(graph)
            );
        };
        given.insert(name.to_string(), tensor?);
    }
    Ok(given)
}

/// The names of `g`'s inputs, for error messages.
pub fn input_list(g: &Graph) -> String {
    g.inputs
        .iter()
        .map(|&t| g.tensors[t].name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
