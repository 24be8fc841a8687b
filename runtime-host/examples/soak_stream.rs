//! A soak run (not a timed test): silero VAD streamed for many steps in one session,
//! sampling the resident set, then the last replay of the chunks compared with a fresh
//! session's outputs on the same chunks.
//!
//! ```sh
//! scripts/fetch-silero.sh && scripts/silero-expected.sh
//! cargo build --release -p baton-backend-cpu-plugin
//! cargo run --release -p baton-runtime-host --example soak_stream -- \
//!     .cache/silero [--steps 100000] [--config cpu.toml]
//! ```
//!
//! The 125 chunks of `expected/chunks.npy` are replayed in a loop, the state reset to
//! `state0` at the start of each replay, so every replay must give the same outputs. The
//! resident set (`VmRSS`) is read after each replay; the report gives it after the first
//! replay, at the end and at its highest, and the growth in between. Without `--config`
//! every node runs on the host's portable kernels.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use baton_delegate_api::{Dim, Tensor};
use baton_runtime_host::{model, npy, Config, Engine, Session};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut dir = None;
    let mut steps = 100_000usize;
    let mut config = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--steps" => steps = args.next().context("--steps N")?.parse()?,
            "--config" => config = Some(PathBuf::from(args.next().context("--config FILE")?)),
            _ => dir = Some(PathBuf::from(a)),
        }
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(".cache/silero"));
    let read = |f: &str| {
        let p = dir.join("expected").join(f);
        npy::read(&p).with_context(|| format!("{} (run scripts/silero-expected.sh)", p.display()))
    };
    let (chunks, sr, state0) = (read("chunks.npy")?, read("sr.npy")?, read("state0.npy")?);
    let engine = Engine::new(match &config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    })?;
    let graph = model::load(&dir.join("silero_vad.onnx"))?;
    let per_replay = chunks.shape[0];
    let first = chunk(&chunks, 0);
    let mut bindings = std::collections::BTreeMap::new();
    for &t in &graph.inputs {
        let decl = &graph.tensors[t];
        let given = match decl.name.as_str() {
            "input" => &first,
            "state" => &state0,
            _ => &sr,
        };
        for (d, &v) in decl.shape.iter().zip(&given.shape) {
            if let Dim::Sym(s) = d {
                bindings.insert(s.clone(), v);
            }
        }
    }

    let mut session = Session::new(&engine, &graph, &bindings)?;
    println!(
        "soak: {steps} steps of silero VAD, {per_replay} chunks per replay, nodes run by {:?}",
        session.nodes_per_backend()
    );
    let mut stream = session.stream(&[("state", "stateN")])?;
    let mut rss = Vec::new();
    let mut last_replay: Vec<Tensor> = Vec::with_capacity(per_replay);
    let start = Instant::now();
    for step in 0..steps {
        let c = step % per_replay;
        if c == 0 {
            stream.set_state("state", state0.clone())?;
            last_replay.clear();
        }
        let out = stream
            .step(&[chunk(&chunks, c), sr.clone()])
            .with_context(|| format!("step {step}"))?;
        last_replay.push(out.into_iter().next().context("no output")?);
        if c + 1 == per_replay {
            rss.push(rss_kib()?);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(stream);

    let mut fresh = Session::new(&engine, &graph, &bindings)?;
    let mut fresh_stream = fresh.stream(&[("state", "stateN")])?;
    fresh_stream.set_state("state", state0.clone())?;
    let mut differing = 0;
    for (c, got) in last_replay.iter().enumerate() {
        let want = fresh_stream.step(&[chunk(&chunks, c), sr.clone()])?;
        if got.bytes() != want[0].bytes() {
            differing += 1;
        }
    }

    println!(
        "time: {elapsed:.1} s, {:.0} steps/s",
        steps as f64 / elapsed
    );
    if let (Some(&after_first), Some(&end)) = (rss.first(), rss.last()) {
        let max = rss.iter().copied().max().unwrap_or(end);
        println!(
            "rss: {after_first} KiB after the first replay, {end} KiB at the end, {max} KiB at most; growth {} KiB over {} steps ({:.3} KiB per 1000 steps)",
            end as i64 - after_first as i64,
            steps - per_replay,
            (end as f64 - after_first as f64) / ((steps - per_replay).max(1) as f64 / 1000.0)
        );
    }
    println!(
        "replay: the last {} outputs against a fresh session's: {} differ (bit for bit)",
        last_replay.len(),
        differing
    );
    if differing > 0 {
        bail!("{differing} outputs of the long-running session differ from a fresh session's");
    }
    Ok(())
}

/// Chunk `c` of a stack `[C, rest...]`.
fn chunk(stack: &Tensor, c: usize) -> Tensor {
    let shape = &stack.shape[1..];
    let n = shape.iter().product::<usize>() * stack.dtype.size();
    Tensor::from_bytes(stack.dtype, shape, &stack.bytes()[c * n..(c + 1) * n])
}

/// This process's resident set in KiB (`VmRSS` of /proc/self/status; Linux only).
fn rss_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("reading /proc/self/status (the soak run samples memory on Linux only)")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS in /proc/self/status")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .context("VmRSS value")?
        .parse()?)
}
