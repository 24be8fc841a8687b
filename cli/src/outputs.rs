//! What a run reports: its outputs, written or summarised, and which backend ran what.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use baton_delegate_api::Tensor;
use baton_runtime_host::{npy, Session};

/// Writes each output as `DIR/NAME.npy`, or prints a summary of it without a directory.
pub fn write_outputs(dir: Option<&Path>, outputs: &[(String, Tensor)]) -> Result<()> {
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for (name, out) in outputs {
        match dir {
            Some(dir) => {
                let path = dir.join(format!("{}.npy", file_safe(name)));
                npy::write(&path, out)?;
                println!(
                    "{name}: {} {:?} -> {}",
                    out.dtype,
                    out.shape,
                    path.display()
                );
            }
            None => println!("{}", summary(name, out)),
        }
    }
    Ok(())
}

/// Says on stderr how many nodes each backend ran in `session`.
pub fn report_targets(session: &Session<'_>) {
    report_per_backend(&session.nodes_per_backend());
}

/// Says on stderr how many nodes each backend ran.
pub fn report_per_backend(per: &BTreeMap<String, usize>) {
    let per: Vec<String> = per.iter().map(|(k, v)| format!("{k} {v}")).collect();
    eprintln!("baton: nodes run by: {}", per.join(", "));
}

/// Output file names: every character outside `[A-Za-z0-9_.-]` becomes `_`.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One line about a tensor: dtype, shape, range, mean, argmax and its first values.
fn summary(name: &str, t: &Tensor) -> String {
    let v = t.to_f64();
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let (min, max) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let mean = if finite.is_empty() {
        f64::NAN
    } else {
        finite.iter().sum::<f64>() / finite.len() as f64
    };
    let head: Vec<String> = v.iter().take(6).map(|x| format!("{x:.5}")).collect();
    let argmax = v
        .iter()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |(bi, bv), (i, &x)| {
            if x > bv {
                (i, x)
            } else {
                (bi, bv)
            }
        })
        .0;
    format!(
        "{name}: {} {:?} min {min:.5} max {max:.5} mean {mean:.5} argmax {argmax} first [{}{}]",
        t.dtype,
        t.shape,
        head.join(", "),
        if v.len() > 6 { ", ..." } else { "" }
    )
}
