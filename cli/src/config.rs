//! The `--config` every subcommand takes, and the engine it configures.

use std::path::PathBuf;

use anyhow::Result;
use baton_runtime_host::{default_config, Config, Engine};
use clap::Args;

#[derive(Args)]
pub struct ConfigArg {
    /// Config file (TOML). Default: the CPU plugin next to this executable.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
}

/// The engine of the config file given, or of the default config (said on stderr). An
/// unusable plugin the config marks `required` is an error.
pub fn engine(arg: &ConfigArg) -> Result<Engine> {
    Ok(Engine::new(config(arg)?)?)
}

/// The config file given, or the default config (said on stderr).
pub fn config(arg: &ConfigArg) -> Result<Config> {
    Ok(match &arg.config {
        Some(p) => Config::load(p)?,
        None => {
            let (cfg, note) = default_config();
            if let Some(n) = note {
                eprintln!("baton: note: {n}");
            }
            cfg
        }
    })
}
