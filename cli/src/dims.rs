//! `--dim NAME=VALUE` (and `--bound NAME=MAX`) as every subcommand parses them: each name
//! must be a symbolic dimension of the model's inputs, so a typo is refused instead of
//! silently binding nothing.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Context, Result};
use baton_delegate_api::{Dim, Graph};

/// Parses `specs` (`NAME=VALUE`, `form` in messages) given with `flag`, refusing a name
/// that is not a symbolic dimension of `graph`'s inputs.
pub fn parse(
    specs: &[String],
    flag: &str,
    form: &str,
    graph: &Graph,
) -> Result<BTreeMap<String, usize>> {
    let known = symbolic_dims(graph);
    let mut m = BTreeMap::new();
    for spec in specs {
        let (k, v) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("{flag} '{spec}': expected {form}"))?;
        if !known.contains(k) {
            bail!(
                "{flag} '{spec}': the model has no symbolic dimension '{k}' ({})",
                if known.is_empty() {
                    "its inputs have fixed shapes".to_string()
                } else {
                    format!(
                        "its symbolic dimensions: {}",
                        known.iter().cloned().collect::<Vec<_>>().join(", ")
                    )
                }
            );
        }
        m.insert(
            k.to_string(),
            v.parse().with_context(|| format!("{flag} '{spec}'"))?,
        );
    }
    Ok(m)
}

/// The names of the symbolic dimensions of `graph`'s inputs.
pub fn symbolic_dims(graph: &Graph) -> BTreeSet<String> {
    graph
        .inputs
        .iter()
        .flat_map(|&t| &graph.tensors[t].shape)
        .filter_map(|d| match d {
            Dim::Sym(s) => Some(s.clone()),
            Dim::Fixed(_) => None,
        })
        .collect()
}

/// `seq=512, batch=4`: bounds as they are given on the command line.
pub fn bound_list(bounds: &BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = bounds.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(", ")
}
