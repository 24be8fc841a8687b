//! The integrator's configuration: which plugins to load, in what order to prefer them,
//! the partitioning policy and what to do when a plugin fails.
//!
//! ```toml
//! cache_dir = ".baton-cache"          # optional; default $BATON_CACHE_DIR, then ~/.cache/baton
//!
//! [[plugin]]
//! path = "libbaton_backend_cpu.so"     # relative to this file; or `builtin = "cpu"`
//! priority = 1                         # lower runs first
//! sha256 = "…"                         # optional pin of the library file
//! options = { threads = 2 }            # checked against the plugin's option schema
//! required = true                      # optional: not loading it is an error
//! isolation = "in-process"             # or "process": the plugin runs in a child process
//! timeout_ms = 2000                    # optional bound on every call into the plugin
//!
//! [policy]
//! min_partition_size = 1
//! max_partitions = 8
//! pin = [{ op = "Softmax", target = "host" }, { node = "fc", target = "cpu" }]
//!
//! [fallback]
//! on_execute_error = "host"            # or "fail"
//! on_init_error = "next-backend"       # or "fail"
//! ```
//!
//! Two top-level keys bound what the host allocates (see [`crate::limits`]):
//! `max_tensor_bytes` for any one tensor and `max_arena_bytes` for a session's arena. They
//! default to half and all of the machine's memory (`MemTotal` on Linux; 4 GiB and 8 GiB
//! where it cannot be read). A model, input, program or `--dim` that needs more is refused
//! with an error naming the tensor and the key, before anything is allocated.
//!
//! Unknown keys anywhere are errors naming the key: a typo must never silently become a
//! default.
//!
//! Pins are resolved into the partitioner's [`Policy`] once, when the engine is made
//! ([`PolicyConfig::resolve`]): op names are checked when the file is parsed and targets
//! when the plugins' names are known, so a bad pin is an error naming the pin before any
//! model is loaded, and partitioning works from typed pins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_delegate_api::OpKind;
use baton_partitioner::{Pin, Policy, Target};
use serde::Deserialize;

use crate::error::{ConfigProblem, HostError, PinProblem, Result};
use crate::limits::Limits;

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where probe verdicts are cached.
    pub cache_dir: Option<PathBuf>,
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<PluginConfig>,
    #[serde(default)]
    pub policy: PolicyConfig,
    #[serde(default)]
    pub fallback: FallbackConfig,
    /// Threads for every plugin that declares a `threads` option and is not given one in
    /// its own `options` (`baton bench --threads N` sets it).
    pub threads: Option<u32>,
    /// Upper bounds of symbolic dimensions (`seq = 512`): a model with symbolic input
    /// dimensions is then loaded once for every binding up to them (one memory plan, made
    /// at the bounds), and an input above a bound is refused.
    #[serde(default)]
    pub bounds: BTreeMap<String, usize>,
    /// The largest tensor the host allocates, in bytes (default: half the machine's memory).
    pub max_tensor_bytes: Option<usize>,
    /// The largest arena the host allocates, in bytes (default: the machine's memory).
    pub max_arena_bytes: Option<usize>,
    /// The directory relative paths are resolved against (the config file's directory).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// Where this configuration came from, for error messages.
    #[serde(skip)]
    pub source: PathBuf,
}

/// One plugin to load.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// A name to refer to it by in the policy; defaults to the plugin's own name.
    pub name: Option<String>,
    /// Path of the shared library.
    pub path: Option<PathBuf>,
    /// Name of a backend linked into this binary.
    pub builtin: Option<String>,
    /// Lower values are preferred; ties keep file order.
    #[serde(default)]
    pub priority: i64,
    /// Expected sha256 of the library file (hex).
    pub sha256: Option<String>,
    /// Options passed to the plugin after validation against its schema.
    #[serde(default)]
    pub options: BTreeMap<String, toml::Value>,
    /// Which of the plugin's devices to use.
    #[serde(default)]
    pub device: u32,
    /// Whether the engine refuses to start without this plugin. By default a plugin that
    /// cannot be loaded, created or proven by its probe is left out with a note and its
    /// work goes to the other backends; a vendor's CI or a deployment that must run on
    /// the accelerator sets `required = true` so that this is an error instead.
    #[serde(default)]
    pub required: bool,
    /// Where the plugin runs: in the host's process (the default) or in a child process of
    /// its own, where a crash or a hang costs the plugin, not the host.
    #[serde(default)]
    pub isolation: Isolation,
    /// A bound on every call into the plugin, in milliseconds. With process isolation the
    /// child is killed when a call runs over; in the host's process only the probe can be
    /// bounded (it runs on a thread that is abandoned).
    pub timeout_ms: Option<u64>,
}

/// Where a plugin's code runs (`isolation` in a `[[plugin]]`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// Loaded into the host with `dlopen`: no overhead, no protection from crashes.
    #[default]
    InProcess,
    /// Loaded by a helper process (`baton-plugin-host`); calls cross a socket, tensors a
    /// shared-memory region.
    Process,
}

impl Isolation {
    /// The config spelling, for messages and the probe cache key.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::InProcess => "in-process",
            Isolation::Process => "process",
        }
    }
}

/// Partitioning policy.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    #[serde(default)]
    pub min_partition_size: usize,
    pub max_partitions: Option<usize>,
    #[serde(default)]
    pub pin: Vec<PinConfig>,
}

impl PolicyConfig {
    /// The partitioner's policy, with every pin resolved: its op name to an [`OpKind`], its
    /// target to the host or one of `plugins` (the names the policy may use). The
    /// priority list is left empty: which backends are asked is decided per model.
    pub fn resolve(&self, plugins: &[&str]) -> std::result::Result<Policy, ConfigProblem> {
        let pins = self
            .pin
            .iter()
            .enumerate()
            .map(|(i, p)| {
                p.resolve(Some(plugins))
                    .map_err(|problem| pin_problem(i, problem))
            })
            .collect::<std::result::Result<_, _>>()?;
        Ok(Policy {
            priority: Vec::new(),
            min_partition_size: self.min_partition_size,
            max_partitions: self.max_partitions,
            pins,
        })
    }
}

fn pin_problem(index: usize, problem: PinProblem) -> ConfigProblem {
    ConfigProblem::Pin {
        index: index + 1,
        problem,
    }
}

/// Pins an op or a node to a backend or to the host.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PinConfig {
    pub op: Option<String>,
    pub node: Option<String>,
    /// A plugin name or `host`.
    pub target: String,
}

impl PinConfig {
    /// The typed pin. Targets are checked against `plugins` when given (when the config
    /// is parsed, the plugins' own names are not known yet).
    fn resolve(&self, plugins: Option<&[&str]>) -> std::result::Result<Pin, PinProblem> {
        if self.op.is_none() && self.node.is_none() {
            return Err(PinProblem::MatchesEverything);
        }
        let op = match &self.op {
            Some(name) => {
                Some(OpKind::from_name(name).ok_or_else(|| PinProblem::UnknownOp(name.clone()))?)
            }
            None => None,
        };
        let target = if self.target == "host" {
            Target::Host
        } else {
            if let Some(known) = plugins {
                if !known.contains(&self.target.as_str()) {
                    return Err(PinProblem::UnknownTarget {
                        target: self.target.clone(),
                        plugins: known.iter().map(|s| s.to_string()).collect(),
                    });
                }
            }
            Target::Backend(self.target.clone())
        };
        Ok(Pin {
            op,
            node: self.node.clone(),
            target,
        })
    }
}

/// What to do when a plugin fails after partitioning.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FallbackConfig {
    #[serde(default = "default_on_execute")]
    pub on_execute_error: OnExecuteError,
    #[serde(default = "default_on_init")]
    pub on_init_error: OnInitError,
}

impl Default for FallbackConfig {
    fn default() -> Self {
        FallbackConfig {
            on_execute_error: default_on_execute(),
            on_init_error: default_on_init(),
        }
    }
}

/// Rule for a failed `execute`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum OnExecuteError {
    /// Run the partition on the portable kernels for that call.
    Host,
    /// Return the error.
    Fail,
}

/// Rule for a failed `compile` or `init`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum OnInitError {
    /// Re-partition without that backend.
    NextBackend,
    /// Refuse to load the model.
    Fail,
}

fn default_on_execute() -> OnExecuteError {
    OnExecuteError::Host
}

fn default_on_init() -> OnInitError {
    OnInitError::NextBackend
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|error| HostError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        // A bare file name has the empty parent; "." keeps a relative plugin path a path
        // (the dynamic loader searches its library path for a name without a slash).
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Config::parse(&text, path, &base)
    }

    /// Parses config text; `source` names it in errors, `base_dir` anchors relative paths.
    pub fn parse(text: &str, source: &Path, base_dir: &Path) -> Result<Config> {
        let err = |problem: ConfigProblem| HostError::config(source, problem);
        let mut cfg: Config = toml::from_str(text).map_err(|e| err(toml_problem(text, &e)))?;
        cfg.base_dir = base_dir.to_path_buf();
        cfg.source = source.to_path_buf();
        for (i, p) in cfg.plugins.iter().enumerate() {
            match (&p.path, &p.builtin) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => return Err(err(ConfigProblem::PluginSource { index: i + 1 })),
            }
            if let Some(h) = &p.sha256 {
                if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(err(ConfigProblem::Sha256 { index: i + 1 }));
                }
            }
            if p.isolation == Isolation::Process && p.builtin.is_some() {
                return Err(err(ConfigProblem::IsolatedBuiltin { index: i + 1 }));
            }
            if p.timeout_ms == Some(0) {
                return Err(err(ConfigProblem::ZeroTimeout { index: i + 1 }));
            }
        }
        // Targets wait for the engine (plugins' own names); everything else is checked now.
        for (i, pin) in cfg.policy.pin.iter().enumerate() {
            pin.resolve(None)
                .map_err(|problem| err(pin_problem(i, problem)))?;
        }
        Ok(cfg)
    }

    /// The size limits: the config's keys, else the machine's defaults.
    pub fn limits(&self) -> Limits {
        let default = Limits::default();
        Limits {
            max_tensor_bytes: self.max_tensor_bytes.unwrap_or(default.max_tensor_bytes),
            max_arena_bytes: self.max_arena_bytes.unwrap_or(default.max_arena_bytes),
        }
    }

    /// Resolves a plugin path against the config's directory. The result always has a
    /// directory part: a bare name (`libx.so`) handed to the dynamic loader would be
    /// searched for on its library path instead of beside the config, so an empty base
    /// directory (a config parsed from text, or named without a directory) counts as `.`.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else if self.base_dir.as_os_str().is_empty() {
            Path::new(".").join(p)
        } else {
            self.base_dir.join(p)
        }
    }
}

/// A TOML error as one line that starts with where it is: the parser's own text spreads
/// over several lines with the key's message last, after a source excerpt.
fn toml_problem(text: &str, e: &toml::de::Error) -> ConfigProblem {
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    ConfigProblem::Toml {
        line,
        message: e.message().trim().replace('\n', "; "),
    }
}

/// Renders a TOML option value the way plugins receive it (a string).
pub fn option_string(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("test.toml"), Path::new("."))
    }

    #[test]
    fn full_config_parses() {
        let c = parse(
            r#"
            [[plugin]]
            path = "libx.so"
            priority = 2
            options = { threads = 2 }
            [policy]
            min_partition_size = 2
            pin = [{ op = "Softmax", target = "host" }]
            [fallback]
            on_execute_error = "fail"
            [bounds]
            seq = 512
            "#,
        )
        .unwrap();
        assert_eq!(c.limits(), Limits::default());
        assert_eq!(c.bounds.get("seq"), Some(&512));
        assert_eq!(c.plugins[0].priority, 2);
        assert_eq!(c.fallback.on_execute_error, OnExecuteError::Fail);
        assert_eq!(c.policy.pin[0].target, "host");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse("[[plugin]]\npath = \"a.so\"\nprioritty = 1\n").unwrap_err();
        assert!(e.to_string().contains("prioritty"), "{e}");
        let e = parse("[policy]\nmin_size = 1\n").unwrap_err();
        assert!(e.to_string().contains("min_size"), "{e}");
    }

    #[test]
    fn path_xor_builtin() {
        assert!(parse("[[plugin]]\npriority = 1\n").is_err());
        assert!(parse("[[plugin]]\npath = \"a\"\nbuiltin = \"cpu\"\n").is_err());
    }

    #[test]
    fn bad_pins_are_refused() {
        let e =
            parse("[policy]\npin = [{ op = \"Frobnicate\", target = \"host\" }]\n").unwrap_err();
        assert!(e.to_string().contains("Frobnicate"), "{e}");
        match e {
            HostError::Config {
                problem:
                    ConfigProblem::Pin {
                        index: 1,
                        problem: PinProblem::UnknownOp(op),
                    },
                ..
            } => assert_eq!(op, "Frobnicate"),
            other => panic!("expected an unknown-op pin error, got {other:?}"),
        }
        let e = parse("[policy]\npin = [{ target = \"host\" }]\n").unwrap_err();
        assert!(
            matches!(
                e,
                HostError::Config {
                    problem: ConfigProblem::Pin {
                        problem: PinProblem::MatchesEverything,
                        ..
                    },
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn pins_resolve_to_typed_targets() {
        let c = parse(
            "[policy]\npin = [{ op = \"Softmax\", target = \"host\" }, { node = \"fc\", target = \"cpu\" }]\n",
        )
        .unwrap();
        let policy = c.policy.resolve(&["cpu"]).unwrap();
        assert_eq!(policy.pins[0].op, Some(OpKind::Softmax));
        assert_eq!(policy.pins[0].target, Target::Host);
        assert_eq!(policy.pins[1].target, Target::Backend("cpu".into()));
        let e = c.policy.resolve(&["vulkan"]).unwrap_err();
        assert!(
            matches!(
                &e,
                ConfigProblem::Pin {
                    index: 2,
                    problem: PinProblem::UnknownTarget { target, .. },
                } if target == "cpu"
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("policy.pin #2"), "{e}");
    }

    #[test]
    fn toml_errors_are_one_line_starting_with_the_line() {
        let e = parse("[[plugin]]\npath = \"a.so\"\nprioritty = 1\n").unwrap_err();
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.starts_with("config test.toml: line 3: "), "{text}");
        assert!(text.contains("prioritty"), "{text}");
    }

    #[test]
    fn a_bare_plugin_name_resolves_beside_the_config_never_on_the_loader_path() {
        let text = "[[plugin]]\npath = \"libx.so\"\nrequired = true\n";
        for base in ["", ".", "conf"] {
            let c = Config::parse(text, Path::new("c.toml"), Path::new(base)).unwrap();
            assert!(c.plugins[0].required);
            let p = c.resolve(c.plugins[0].path.as_deref().unwrap());
            // A path with a directory part is opened as a file, not searched for.
            assert!(
                p.parent().is_some_and(|d| !d.as_os_str().is_empty()),
                "base {base:?}: {}",
                p.display()
            );
            assert_eq!(p.file_name(), Some(std::ffi::OsStr::new("libx.so")));
        }
        assert!(!parse("[[plugin]]\npath = \"a.so\"\n").unwrap().plugins[0].required);
    }

    #[test]
    fn isolation_and_timeout_are_plugin_keys() {
        let c = parse("[[plugin]]\npath = \"a.so\"\nisolation = \"process\"\ntimeout_ms = 250\n")
            .unwrap();
        assert_eq!(c.plugins[0].isolation, Isolation::Process);
        assert_eq!(c.plugins[0].timeout_ms, Some(250));
        assert_eq!(
            parse("[[plugin]]\npath = \"a.so\"\n").unwrap().plugins[0].isolation,
            Isolation::InProcess
        );
        let e = parse("[[plugin]]\npath = \"a.so\"\nisolation = \"thread\"\n").unwrap_err();
        assert!(e.to_string().contains("thread"), "{e}");
        let e = parse("[[plugin]]\nbuiltin = \"cpu\"\nisolation = \"process\"\n").unwrap_err();
        assert!(e.to_string().contains("plugin #1: isolation"), "{e}");
        let e = parse("[[plugin]]\npath = \"a.so\"\ntimeout_ms = 0\n").unwrap_err();
        assert!(e.to_string().contains("plugin #1: timeout_ms"), "{e}");
    }

    #[test]
    fn size_limits_are_config_keys() {
        let c = parse("max_tensor_bytes = 1024\nmax_arena_bytes = 4096\n").unwrap();
        let l = c.limits();
        assert_eq!((l.max_tensor_bytes, l.max_arena_bytes), (1024, 4096));
    }
}
