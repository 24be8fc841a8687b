//! `baton run --check`: each delegated partition against the reference executor, printed
//! as a table (or `--json`), with the first node past tolerance where one is.

use anyhow::Result;
use baton_runtime_host::check::{PartitionCheck, TensorError};

/// Prints `report` as a table, or as one JSON document with `json`.
pub fn print(report: &[PartitionCheck], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    if report.is_empty() {
        println!("check: no delegated partitions: every node ran on the reference kernels");
        return Ok(());
    }
    println!(
        "{:<9} {:<10} {:>5}  {:<28} {:<5} {:>10} {:>10} {:>8} {:>14}  {:<28} verdict",
        "partition",
        "backend",
        "nodes",
        "output",
        "dtype",
        "max_abs",
        "max_rel",
        "max_ulp",
        "past/elements",
        "tolerance (abs, rel, ulp)"
    );
    for p in report {
        for (k, e) in p.outputs.iter().enumerate() {
            let (part, backend, nodes) = if k == 0 {
                (
                    p.partition.to_string(),
                    p.backend.as_str(),
                    p.nodes.to_string(),
                )
            } else {
                (String::new(), "", String::new())
            };
            println!("{:<9} {:<10} {:>5}  {}", part, backend, nodes, row(e));
        }
    }
    for p in report {
        if let Some(f) = &p.first_node_past {
            println!(
                "partition {} ({}): first node past tolerance: {} ({}), node {} of the partition's {}",
                p.partition,
                p.backend,
                f.node,
                f.op,
                f.position + 1,
                p.nodes
            );
            for e in &f.outputs {
                println!("{:<9} {:<10} {:>5}  {}", "", "", "", row(e));
            }
        } else if !p.passed() {
            println!(
                "partition {} ({}): past tolerance, but no prefix of it on its own was: the error builds up across nodes",
                p.partition, p.backend
            );
        }
        for n in &p.notes {
            println!("partition {} ({}): note: {n}", p.partition, p.backend);
        }
    }
    Ok(())
}

fn row(e: &TensorError) -> String {
    format!(
        "{:<28} {:<5} {:>10.3e} {:>10.3e} {:>8} {:>14}  {:<28} {}",
        e.tensor,
        e.dtype,
        e.max_abs,
        e.max_rel,
        e.max_ulp,
        format!("{}/{}", e.past, e.elements),
        format!(
            "{:e}, {:e}, {}",
            e.tolerance.abs, e.tolerance.rel, e.tolerance.ulp
        ),
        if e.passed() { "ok" } else { "PAST" }
    )
}
