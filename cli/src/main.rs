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
