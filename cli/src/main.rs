//! `baton`: run, plan and inspect models on the configured delegates.
//!
//! This file is the command line itself (what `baton --help` shows) and the dispatch; each
//! subcommand lives in the module of its name, with its arguments.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod builtins;
mod compile;
mod config;
mod devices;
mod dims;
mod inputs;
mod model_file;
mod outputs;
mod plan;
mod run;

/// Baton: on-device inference across backend delegates.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model and print or save its outputs.
    Run(run::RunArgs),
    /// Show how a model is split across backends, and why.
    Plan(plan::PlanArgs),
    /// List the configured plugins, their devices and probe verdicts.
    Devices(config::ConfigArg),
    /// Time a model: warm-up runs, then timed runs; median, p90 and min latency.
    Bench(bench::BenchArgs),
    /// Compile a model ahead of time into a .baton program for `run`, `plan` and `bench`.
    Compile(compile::CompileArgs),
}

fn main() -> ExitCode {
    // A reader that goes away (`baton bench ... | head -1`) ends the command as it ends
    // other command-line tools, by SIGPIPE, instead of a panic in `println!` (Rust's
    // runtime ignores the signal, so a write to the closed pipe fails and printing
    // panics). The host's plugin sockets send with MSG_NOSIGNAL: a plugin process that
    // dies is still an error there, not this signal.
    #[cfg(unix)]
    // SAFETY: restores the default disposition of one signal, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Plan(a) => plan::plan(a),
        Command::Devices(a) => devices::devices(a),
        Command::Bench(a) => bench::bench(a),
        Command::Compile(a) => compile::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("baton: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
