//! The Baton host runtime: loads plugins through the C ABI (or built in), proves them by
//! probe, partitions models across them, plans memory and executes, falling back to its
//! portable reference kernels wherever a plugin declines or fails.
//!
//! No telemetry, no network access: the host reads the files it is given and writes only
//! its probe cache and the outputs asked for.

pub mod bench;
pub mod bounded;
pub mod check;
pub mod config;
pub mod engine;
pub mod error;
pub mod exec;
pub mod flops;
pub mod inputs;
pub mod limits;
pub mod memory;
pub mod model;
pub mod npy;
pub mod plugin;
pub mod probe;
pub mod program;
pub mod sample;
pub mod specialize;
pub mod stream;
pub mod trace;
pub mod values;

pub use baton_reference::fold;
pub use bounded::BoundedSession;
pub use config::Config;
pub use engine::Engine;
pub use error::{HostError, Result};
pub use exec::Session;
pub use values::SpecializingSession;

/// The configuration used when none is given: the CPU plugin, loaded dynamically from the
/// directory of the running executable (where `cargo build` puts it), else the built-in CPU
/// backend with a note saying so. This library links no backend: "built in" means linked by
/// the program (the `baton` binary does so with its default `cpu` feature); a program that
/// links none gets an error naming the fix when the engine starts.
pub fn default_config() -> (Config, Option<String>) {
    let lib_name = format!(
        "{}baton_backend_cpu{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.to_path_buf()));
    let found = dir.iter().map(|d| d.join(&lib_name)).find(|p| p.is_file());
    let mut cfg = Config::default();
    let note = match found {
        Some(p) => {
            cfg.plugins.push(config::PluginConfig {
                path: Some(p),
                ..Default::default()
            });
            None
        }
        None => {
            cfg.plugins.push(config::PluginConfig {
                builtin: Some("cpu".into()),
                ..Default::default()
            });
            Some(format!(
                "{lib_name} not found next to the executable; using the built-in CPU backend (build the workspace to get the plugin)"
            ))
        }
    };
    cfg.source = "(default config)".into();
    (cfg, note)
}
