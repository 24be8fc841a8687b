//! The engine: the configured plugins, loaded, handshaken and proven by probe.
//!
//! Loading never stops at the first bad plugin: a plugin that cannot be loaded, refuses the
//! handshake or fails its probe is recorded with its reason and left out, and the work goes
//! to the remaining backends and the portable kernels. Only errors in the user's own
//! config (an unknown key, an option the plugin's schema rejects) stop the engine: those
//! are typos to fix, not conditions to tolerate. And a plugin marked `required = true`:
//! [`Engine::new`] refuses to start without it (a vendor's CI must not pass on the
//! portable kernels because its plugin silently did not load), naming the plugin and why.
//! [`Engine::survey`] brings everything up without that check, for `baton devices`,
//! which lists every plugin before it reports the required ones that are unusable.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_partitioner::{BackendAnswers, Policy, Target};

use crate::config::{option_string, Config, Isolation, PluginConfig};
use crate::error::{ConfigProblem, HostError, Result};
use crate::plugin::{DeviceReport, PluginContext, PluginLibrary};
use crate::probe::{self, ProbeVerdict};

/// A backend ready for work (or known not to be, with the reason).
pub struct Backend {
    /// The name the policy uses.
    pub name: String,
    pub priority: i64,
    pub ctx: PluginContext,
    pub device: DeviceReport,
    pub verdict: ProbeVerdict,
    /// The config's `required = true`.
    pub required: bool,
}

impl Backend {
    /// Whether partitions may be given to this backend.
    pub fn usable(&self) -> bool {
        self.verdict.passed
    }
}

/// A plugin that could not be brought up at all.
#[derive(Debug)]
pub struct FailedPlugin {
    /// The configured name or path.
    pub label: String,
    pub error: HostError,
    /// The config's `required = true`.
    pub required: bool,
}

/// Every configured plugin, in priority order.
pub struct Engine {
    pub config: Config,
    pub backends: Vec<Backend>,
    pub failed: Vec<FailedPlugin>,
    pub cache_dir: PathBuf,
    /// The config's `[policy]`, resolved: typed pins whose targets are `host` or a
    /// configured plugin. The priority list is filled in per model, from the backends
    /// that answer.
    pub policy: Policy,
}

impl Engine {
    /// Loads, handshakes and probes every plugin of `config`, and refuses to start when a
    /// plugin the config marks `required` is unusable ([`HostError::RequiredPlugin`]).
    pub fn new(config: Config) -> Result<Engine> {
        let engine = Engine::survey(config)?;
        engine.check_required()?;
        Ok(engine)
    }

    /// Loads, handshakes and probes every plugin of `config`, leaving out (with the
    /// reason) every plugin that cannot be used, required or not.
    pub fn survey(config: Config) -> Result<Engine> {
        let cache_dir = config
            .cache_dir
            .as_ref()
            .map(|d| config.resolve(d))
            .unwrap_or_else(probe::default_cache_dir);
        let mut order: Vec<&PluginConfig> = config.plugins.iter().collect();
        order.sort_by_key(|p| p.priority);
        let mut backends: Vec<Backend> = Vec::new();
        let mut failed = Vec::new();
        for pc in order {
            let label = pc
                .name
                .clone()
                .or_else(|| pc.builtin.clone())
                .unwrap_or_else(|| {
                    pc.path
                        .as_deref()
                        .unwrap_or(Path::new("?"))
                        .display()
                        .to_string()
                });
            match bring_up(&config, pc, &cache_dir) {
                Ok(b) => {
                    if backends.iter().any(|o| o.name == b.name) {
                        return Err(HostError::config(
                            &config.source,
                            ConfigProblem::DuplicateName { name: b.name },
                        ));
                    }
                    backends.push(b)
                }
                Err(e @ (HostError::Config { .. } | HostError::PluginOption { .. })) => {
                    return Err(e)
                }
                Err(error) => failed.push(FailedPlugin {
                    label,
                    error,
                    required: pc.required,
                }),
            }
        }
        // A pin may name a plugin that failed to come up: its nodes then run on the host,
        // as they do when the plugin declines them; only a name nothing in the config has
        // is a typo.
        let names: Vec<&str> = backends
            .iter()
            .map(|b| b.name.as_str())
            .chain(failed.iter().map(|f| f.label.as_str()))
            .collect();
        let policy = config
            .policy
            .resolve(&names)
            .map_err(|problem| HostError::config(&config.source, problem))?;
        Ok(Engine {
            config,
            backends,
            failed,
            cache_dir,
            policy,
        })
    }

    /// Every plugin the config marks `required` that cannot be used, as `(plugin, why)`:
    /// it failed to load, to create a context or to find its device, or its probe failed.
    pub fn unusable_required(&self) -> Vec<(String, String)> {
        let failed = self
            .failed
            .iter()
            .filter(|f| f.required)
            .map(|f| (f.label.clone(), f.error.to_string()));
        let unproven = self
            .backends
            .iter()
            .filter(|b| b.required && !b.usable())
            .map(|b| {
                let cached = if b.verdict.from_cache {
                    " (verdict from the probe cache)"
                } else {
                    ""
                };
                (
                    b.name.clone(),
                    format!("its probe failed{cached}: {}", b.verdict.detail),
                )
            });
        failed.chain(unproven).collect()
    }

    /// An error for the first unusable required plugin (see [`Engine::unusable_required`]).
    pub fn check_required(&self) -> Result<()> {
        match self.unusable_required().into_iter().next() {
            Some((plugin, reason)) => Err(HostError::RequiredPlugin { plugin, reason }),
            None => Ok(()),
        }
    }

    /// The config's policy for a graph the backends of `answers` were asked about: they
    /// are the priority list, in their order, and a pin to a backend that did not answer
    /// sends its nodes to the host.
    pub(crate) fn policy_for(&self, answers: &[BackendAnswers]) -> Policy {
        let mut policy = self.policy.clone();
        policy.priority = answers.iter().map(|a| a.backend.clone()).collect();
        for pin in &mut policy.pins {
            if let Target::Backend(b) = &pin.target {
                if !policy.priority.contains(b) {
                    pin.target = Target::Host;
                }
            }
        }
        policy
    }

    /// The backends whose probe passed, in priority order.
    pub fn usable(&self) -> impl Iterator<Item = &Backend> {
        self.backends.iter().filter(|b| b.usable())
    }
}

fn bring_up(config: &Config, pc: &PluginConfig, cache_dir: &Path) -> Result<Backend> {
    let timeout = pc.timeout_ms.map(Duration::from_millis);
    let lib: Arc<PluginLibrary> = match (&pc.path, &pc.builtin) {
        (Some(p), _) => load_library(&config.resolve(p), pc, timeout)?,
        (None, Some(b)) => PluginLibrary::builtin(b)?,
        (None, None) => unreachable!("config validation requires path or builtin"),
    };
    let mut options: Vec<(String, String)> = pc
        .options
        .iter()
        .map(|(k, v)| (k.clone(), option_string(v)))
        .collect();
    // The config-wide thread count goes to every plugin that declares a `threads` option
    // and was not given one of its own.
    if let Some(n) = config.threads {
        if lib.options.iter().any(|d| d.name == "threads") && !pc.options.contains_key("threads") {
            options.push(("threads".into(), n.to_string()));
        }
    }
    let ctx = lib.create(&options)?;
    let devices = ctx.devices()?;
    let device = devices
        .into_iter()
        .find(|d| d.index == pc.device)
        .ok_or_else(|| HostError::PluginCall {
            plugin: lib.label(),
            call: "device_info",
            status: 0,
            message: format!("no device {} (see `baton devices`)", pc.device),
        })?;
    // With process isolation the watchdog bounds each call of the probe; in the host's
    // process only the probe as a whole can be bounded, on a thread of its own.
    let (ctx, verdict) = match (pc.isolation, timeout) {
        (Isolation::InProcess, Some(limit)) => {
            probe::verdict_within(ctx, &device, cache_dir, limit)?
        }
        _ => {
            let v = probe::verdict(&ctx, &device, cache_dir);
            (ctx, v)
        }
    };
    Ok(Backend {
        name: pc.name.clone().unwrap_or_else(|| lib.name.clone()),
        priority: pc.priority,
        ctx,
        device,
        verdict,
        required: pc.required,
    })
}

/// Loads a plugin file where the config says it runs.
fn load_library(
    path: &Path,
    pc: &PluginConfig,
    timeout: Option<Duration>,
) -> Result<Arc<PluginLibrary>> {
    match pc.isolation {
        Isolation::InProcess => PluginLibrary::load(path, pc.sha256.as_deref()),
        #[cfg(target_os = "linux")]
        Isolation::Process => PluginLibrary::load_isolated(path, pc.sha256.as_deref(), timeout),
        #[cfg(not(target_os = "linux"))]
        Isolation::Process => Err(HostError::PluginLoad {
            path: path.to_path_buf(),
            message: format!(
                "isolation = \"process\" needs Linux (memfd_create); {timeout:?} unused"
            ),
        }),
    }
}
