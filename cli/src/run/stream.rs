//! `baton run --stream`: a model driven step by step, its state carried between steps.
//!
//! The files say what is streamed: an `--input` whose array has one more dimension than
//! the model's input is a stack of chunks, fed one per step along its leading axis (all
//! streamed inputs must hold the same number); any other `--input` is fed unchanged at
//! every step. States pair an input with an output (`--state IN=OUT`, or found: an input
//! given no file, paired with the one output of its dtype and shape). Each non-state
//! output is stacked along a new leading axis; each state output is written once, with its
//! final value.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Context, Result};
use baton_delegate_api::{Dim, Graph, Tensor};

use super::RunArgs;
use crate::config::engine;
use crate::inputs::input_list;
use crate::model_file::ModelFile;
use crate::outputs::{report_targets, write_outputs};

/// Runs `model` as a stream over the inputs in `given` (by name).
pub fn run(a: &RunArgs, model: &mut ModelFile, mut given: BTreeMap<String, Tensor>) -> Result<()> {
    let graph = &model.graph.clone();
    let provided: BTreeSet<String> = given.keys().cloned().collect();
    let mut streamed: Vec<(String, Tensor)> = Vec::new();
    let mut bindings = BTreeMap::new();
    // The inputs named as states by --state: their files are initial values.
    let state_inputs: BTreeSet<&str> = a
        .states
        .iter()
        .filter_map(|s| s.split_once('=').map(|(i, _)| i))
        .collect();
    for &t in &graph.inputs {
        let decl = &graph.tensors[t];
        let shape = match given.get(&decl.name) {
            Some(x) if x.shape.len() == decl.shape.len() + 1 => {
                // A stack of initial states has no one meaning (the first? the last?):
                // refused rather than guessed, or ignored as it was.
                if state_inputs.contains(decl.name.as_str()) {
                    bail!(
                        "--input '{}': a stack of {} chunks, but '{}' is a state (--state): its file is the initial state and must have the input's own {} dimensions",
                        decl.name,
                        x.shape[0],
                        decl.name,
                        decl.shape.len()
                    );
                }
                if x.shape[0] == 0 {
                    bail!(
                        "--input '{}' is a stack of no chunks (its leading dimension is 0): there is nothing to stream",
                        decl.name
                    );
                }
                let x = given.remove(&decl.name).expect("present");
                let shape = x.shape[1..].to_vec();
                streamed.push((decl.name.clone(), x));
                shape
            }
            Some(x) if x.shape.len() == decl.shape.len() => x.shape.clone(),
            Some(x) => bail!(
                "--input '{}': {} dimensions, the input has {} (or one more for a stack of chunks)",
                decl.name,
                x.shape.len(),
                decl.shape.len()
            ),
            None => continue, // a state starting at zeros: its shape must be fixed
        };
        for (d, &v) in decl.shape.iter().zip(&shape) {
            if let Dim::Sym(s) = d {
                bindings.insert(s.clone(), v);
            }
        }
    }
    let Some(steps) = streamed.first().map(|(_, x)| x.shape[0]) else {
        bail!("--stream: no --input has a leading chunk axis (one dimension more than the model's input)");
    };
    if let Some((name, x)) = streamed.iter().find(|(_, x)| x.shape[0] != steps) {
        bail!(
            "--input '{name}' holds {} chunks, '{}' {steps}",
            x.shape[0],
            streamed[0].0
        );
    }

    let engine = engine(&a.config)?;
    let values = baton_runtime_host::inputs::values_by_name(graph, &given);
    let mut session = model.session(&engine, &bindings, &values)?;
    for n in &session.notes {
        eprintln!("baton: note: {n}");
    }
    // Found on the loaded graph, whose shapes are all fixed.
    let pairs = state_pairs(&session.graph, &a.states, &provided)?;
    let names = |list: &[usize]| -> Vec<String> {
        list.iter()
            .map(|&t| session.graph.tensors[t].name.clone())
            .collect()
    };
    let (input_names, output_names) = (names(&session.graph.inputs), names(&session.graph.outputs));
    let pair_refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(i, o)| (i.as_str(), o.as_str()))
        .collect();
    let mut stacks: Vec<Vec<Tensor>> = Vec::new();
    let finals = {
        let mut stream = session.stream(&pair_refs)?;
        for (input, _) in &pairs {
            if let Some(init) = given.remove(input) {
                stream
                    .set_state(input, init)
                    .with_context(|| format!("--input '{input}' as the initial state"))?;
            }
        }
        for step in 0..steps {
            let mut feed = Vec::new();
            for name in input_names
                .iter()
                .filter(|n| !pairs.iter().any(|(i, _)| i == *n))
            {
                match streamed.iter().find(|(s, _)| s == name) {
                    Some((_, x)) => feed.push(chunk(x, step)),
                    None => feed.push(given.get(name).cloned().ok_or_else(|| {
                        anyhow!("missing input '{name}': pass --input {name}=FILE.npy")
                    })?),
                }
            }
            let outs = stream
                .step(&feed)
                .with_context(|| format!("step {step} of {steps}"))?;
            if stacks.is_empty() {
                stacks = outs.iter().map(|_| Vec::with_capacity(steps)).collect();
            }
            for (s, t) in stacks.iter_mut().zip(outs) {
                s.push(t);
            }
        }
        pairs
            .iter()
            .map(|(i, o)| Ok((o.clone(), stream.state(i)?.clone())))
            .collect::<Result<Vec<_>>>()?
    };
    let free: Vec<&String> = output_names
        .iter()
        .filter(|o| !pairs.iter().any(|(_, p)| p == *o))
        .collect();
    let mut outputs: Vec<(String, Tensor)> = free
        .into_iter()
        .cloned()
        .zip(stacks.iter().map(|s| stack(s)))
        .collect();
    outputs.extend(finals);
    eprintln!("baton: {steps} steps, states carried: {}", describe(&pairs));
    write_outputs(a.output_dir.as_deref(), &outputs)?;
    report_targets(&session);
    Ok(())
}

/// The state pairs: from `--state IN=OUT`, else every input given no file, paired with the
/// one output of its dtype and shape. (An input given no file must have a fixed shape for
/// the model to load: a state with a symbolic extent needs its initial value as a file.)
fn state_pairs(
    graph: &Graph,
    specs: &[String],
    provided: &BTreeSet<String>,
) -> Result<Vec<(String, String)>> {
    if !specs.is_empty() {
        return specs
            .iter()
            .map(|s| {
                s.split_once('=')
                    .map(|(i, o)| (i.to_string(), o.to_string()))
                    .ok_or_else(|| anyhow!("--state '{s}': expected INPUT=OUTPUT"))
            })
            .collect();
    }
    let mut pairs: Vec<(String, String)> = Vec::new();
    for &t in &graph.inputs {
        let decl = &graph.tensors[t];
        if provided.contains(&decl.name) {
            continue;
        }
        let matches: Vec<&str> = graph
            .outputs
            .iter()
            .map(|&o| &graph.tensors[o])
            .filter(|o| o.dtype == decl.dtype && o.shape == decl.shape)
            .map(|o| o.name.as_str())
            .filter(|o| !pairs.iter().any(|(_, p)| p == o))
            .collect();
        match matches[..] {
            [one] => pairs.push((decl.name.clone(), one.to_string())),
            [] => bail!(
                "input '{}' has no file and no output to carry it from: pass --input {}=FILE.npy (inputs: {})",
                decl.name,
                decl.name,
                input_list(graph)
            ),
            _ => bail!(
                "input '{}' could be the state of outputs {}: say which with --state {}=OUTPUT",
                decl.name,
                matches.join(", "),
                decl.name
            ),
        }
    }
    Ok(pairs)
}

fn describe(pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return "none".into();
    }
    pairs
        .iter()
        .map(|(i, o)| format!("{o} -> {i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Chunk `c` of a stack `[C, rest...]`.
fn chunk(stack: &Tensor, c: usize) -> Tensor {
    let shape = &stack.shape[1..];
    let n = shape.iter().product::<usize>() * stack.dtype.size();
    Tensor::from_bytes(stack.dtype, shape, &stack.bytes()[c * n..(c + 1) * n])
}

/// Tensors of one shape along a new leading axis.
fn stack(parts: &[Tensor]) -> Tensor {
    let first = &parts[0];
    let mut shape = vec![parts.len()];
    shape.extend(&first.shape);
    let mut bytes = Vec::with_capacity(first.bytes().len() * parts.len());
    for p in parts {
        bytes.extend_from_slice(p.bytes());
    }
    Tensor::from_bytes(first.dtype, &shape, &bytes)
}
