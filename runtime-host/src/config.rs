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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{HostError, Result};
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

/// Pins an op or a node to a backend or to the host.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PinConfig {
    pub op: Option<String>,
    pub node: Option<String>,
    /// A plugin name or `host`.
    pub target: String,
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
        let text = std::fs::read_to_string(path).map_err(|source| HostError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        Config::parse(&text, path, &base)
    }

    /// Parses config text; `source` names it in errors, `base_dir` anchors relative paths.
    pub fn parse(text: &str, source: &Path, base_dir: &Path) -> Result<Config> {
        let err = |message: String| HostError::Config {
            path: source.to_path_buf(),
            message,
        };
        let mut cfg: Config = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        cfg.base_dir = base_dir.to_path_buf();
        cfg.source = source.to_path_buf();
        for (i, p) in cfg.plugins.iter().enumerate() {
            match (&p.path, &p.builtin) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(err(format!(
                        "plugin #{}: give exactly one of `path` or `builtin`",
                        i + 1
                    )))
                }
            }
            if let Some(h) = &p.sha256 {
                if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(err(format!(
                        "plugin #{}: sha256 must be 64 hex digits",
                        i + 1
                    )));
                }
            }
        }
        for pin in &cfg.policy.pin {
            if pin.op.is_none() && pin.node.is_none() {
                return Err(err("policy.pin: each pin needs `op` or `node`".into()));
            }
            if let Some(op) = &pin.op {
                if baton_delegate_api::OpKind::from_name(op).is_none() {
                    return Err(err(format!("policy.pin: unknown op '{op}'")));
                }
            }
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

    /// Resolves a plugin path against the config's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
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
    }

    #[test]
    fn size_limits_are_config_keys() {
        let c = parse("max_tensor_bytes = 1024\nmax_arena_bytes = 4096\n").unwrap();
        let l = c.limits();
        assert_eq!((l.max_tensor_bytes, l.max_arena_bytes), (1024, 4096));
    }
}
