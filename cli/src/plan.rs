//! `baton plan`: how a model is split across the backends, and why.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::config::{engine, ConfigArg};
use crate::dims;
use crate::model_file::{ModelFile, ProgramArgs};

#[derive(Args)]
pub struct PlanArgs {
    /// Model file (.btir or .onnx) or compiled program (.baton).
    model: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    program: ProgramArgs,
    /// Bind a symbolic dimension, NAME=VALUE (inputs given with --input bind theirs).
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    dims: Vec<String>,
}

/// Prints the partition plan of `a.model`, its branches' plans and its memory plan.
pub fn plan(a: PlanArgs) -> Result<()> {
    let mut model = ModelFile::open(&a.model, &a.program)?;
    let bindings = dims::parse(&a.dims, "--dim", "NAME=VALUE", &model.graph)?;
    let engine = engine(&a.config)?;
    let session = model.session(&engine, &bindings)?;
    println!(
        "model {} ({} nodes)",
        a.model.display(),
        session.graph.nodes.len()
    );
    for n in &session.notes {
        println!("note: {n}");
    }
    print!("{}", session.plan.render(&session.graph));
    for (label, branch) in session.branches() {
        match branch {
            Ok(b) => {
                println!("{label} (a session of its own):");
                for line in b.plan.render(&b.graph).lines() {
                    println!("  {line}");
                }
            }
            Err(why) => println!("{label}: cannot run for these input shapes: {why}"),
        }
    }
    let per: Vec<String> = session
        .nodes_per_backend()
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!("nodes per target: {}", per.join(", "));
    let p = &session.arena_plan;
    println!(
        "memory: arena {} bytes; naive (one buffer per tensor) {} bytes; lower bound (peak live) {} bytes",
        p.arena_size, p.naive_size, p.lower_bound
    );
    Ok(())
}
