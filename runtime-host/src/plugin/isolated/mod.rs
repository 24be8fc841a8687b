//! Process isolation (`isolation = "process"` in a `[[plugin]]`): the plugin is loaded by a
//! helper process of ours, `baton-plugin-host`, and every call crosses to it.
//!
//! - **Loading** happens in the helper with the host's own loader (ELF check, sha256 pin,
//!   handshake, ABI checks): a library that crashes its loader or its initialisers takes
//!   the helper down, not the host.
//! - **Calls** travel as small versioned messages over a socket pair (`wire.rs`); tensor
//!   bytes cross in a shared memory file both processes map (`shm.rs`), written in place
//!   by the plugin.
//! - **The watchdog**: with `timeout_ms`, every call has a deadline; a call that runs over,
//!   a process that dies, or a reply that does not parse kills the process and fails the
//!   call and every later one (`process.rs`). The host's fallback rules then apply as for
//!   any failing plugin: at load, probe, `supports`, `compile` or `init` the work goes to
//!   the next backend or the host; at `execute` the host runs that partition itself.
//! - **The interface is unchanged**: the host holds a [`PluginLibrary`] whose descriptor
//!   forwards to the process (`proxy.rs`), so nothing above this module knows.
//!
//! The helper is found beside the running executable (or one directory up, where cargo
//! puts test and example binaries), or at `$BATON_PLUGIN_HOST`.

mod process;
mod proxy;
mod server;
mod shm;
mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_delegate_api::bytes::{ByteReader, ByteWriter};
use baton_delegate_api::sdk::OptionDecl;

pub use process::PluginProcess;
pub(crate) use proxy::create;
pub use server::serve;

use super::{leak, PluginLibrary, PluginSource};
use crate::error::{HostError, Result};
use process::Failure;
use wire::kind;

/// The environment variable naming the helper binary, when it is not beside the program.
pub const HELPER_ENV: &str = "BATON_PLUGIN_HOST";
/// The helper binary's file name.
pub const HELPER_NAME: &str = "baton-plugin-host";

/// Where the helper binary is: `$BATON_PLUGIN_HOST` when set, else beside the running
/// executable, else one directory up from it (cargo's `deps/` and `examples/`). The error
/// names every place looked at.
pub fn helper_path() -> std::result::Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(HELPER_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "the plugin host helper ${HELPER_ENV} = {} is not a file",
                p.display()
            ))
        };
    }
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the plugin host helper: the running executable's path is unknown ({e}); set ${HELPER_ENV}"))?;
    let mut looked = Vec::new();
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join(HELPER_NAME);
        if candidate.is_file() {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    Err(format!(
        "the plugin host helper `{HELPER_NAME}` was not found (looked at {}); build it with \
         `cargo build -p baton-runtime-host`, or set ${HELPER_ENV} to its path",
        looked.join(" and ")
    ))
}

impl PluginLibrary {
    /// Starts a plugin process for the library at `path` and loads it there (the same
    /// checks as [`PluginLibrary::load`], made in the process). With `timeout`, each call
    /// into the process, this load included, is bounded by it.
    pub fn load_isolated(
        path: &Path,
        expected_sha256: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Arc<PluginLibrary>> {
        let load_error = |message: String| HostError::PluginLoad {
            path: path.to_path_buf(),
            message,
        };
        let helper = helper_path().map_err(load_error)?;
        let process = PluginProcess::spawn(&helper, timeout).map_err(|e| {
            load_error(format!(
                "cannot start the plugin host helper {}: {e}",
                helper.display()
            ))
        })?;
        let mut w = ByteWriter::new();
        w.str(&path.to_string_lossy());
        match expected_sha256 {
            Some(pin) => {
                w.u8(1);
                w.str(pin);
            }
            None => w.u8(0),
        }
        let mut st = process.lock();
        let body = match st.call(timeout, "load", kind::LOAD, &w.finish()) {
            Ok(body) => body,
            // The process's loader said no: its message already names the plugin.
            Err(Failure::Plugin { message, .. }) => {
                return Err(load_error(without_load_prefix(&message, path)))
            }
            Err(Failure::Process(reason)) => {
                return Err(load_error(format!(
                    "{reason} (plugin host helper {})",
                    helper.display()
                )))
            }
        };
        let loaded = match Loaded::read(&body) {
            Ok(l) => l,
            Err(e) => {
                return Err(load_error(match st.protocol_error("load", e) {
                    Failure::Process(reason)
                    | Failure::Plugin {
                        message: reason, ..
                    } => reason,
                }))
            }
        };
        drop(st);
        Ok(Arc::new(PluginLibrary {
            desc: proxy::descriptor(&loaded),
            source: PluginSource::File(path.to_path_buf()),
            name: loaded.name,
            version: loaded.version,
            build_id: loaded.build_id,
            abi_minor: loaded.abi_minor,
            concurrency: loaded.concurrency,
            options: loaded.options,
            file_hash: loaded.file_hash,
            process: Some(Arc::new(process)),
            _lib: None,
        }))
    }
}

/// What the process reports of the library it loaded.
struct Loaded {
    file_hash: String,
    name: String,
    version: String,
    build_id: String,
    abi_minor: u32,
    concurrency: u32,
    has_profile: bool,
    btir_minor: u32,
    has_memory: bool,
    /// The plugin's ABI 1.3 `capabilities` as the host reads them.
    capabilities: u32,
    options: Vec<OptionDecl>,
}

impl Loaded {
    fn read(body: &[u8]) -> std::result::Result<Loaded, String> {
        let mut r = ByteReader::new(body);
        let file_hash = r.str("file hash")?.to_string();
        let name = r.str("name")?.to_string();
        let version = r.str("version")?.to_string();
        let build_id = r.str("build id")?.to_string();
        let abi_minor = r.u32("abi minor")?;
        let concurrency = r.u32("concurrency")?;
        let has_profile = r.u8("profile flag")? != 0;
        let btir_minor = r.u32("btir minor")?;
        let has_memory = r.u8("memory flag")? != 0;
        let capabilities = r.u32("capabilities")?;
        let n = r.count_u32(40, "option count")?;
        let mut options = Vec::with_capacity(n);
        for _ in 0..n {
            let name = leak(r.str("option name")?.to_string());
            let kind = r.u32("option kind")?;
            let default = leak(r.str("option default")?.to_string());
            let min = f64::from_bits(r.u64("option min")?);
            let max = f64::from_bits(r.u64("option max")?);
            let choices = leak(r.str("option choices")?.to_string());
            let help = leak(r.str("option help")?.to_string());
            options.push(OptionDecl {
                name,
                kind,
                default,
                min,
                max,
                choices,
                help,
            });
        }
        Ok(Loaded {
            file_hash,
            name,
            version,
            build_id,
            abi_minor,
            concurrency,
            has_profile,
            btir_minor,
            has_memory,
            capabilities,
            options,
        })
    }
}

/// A load error from the process without the `plugin PATH: ` (and `cannot load the
/// library: `) it starts with, since the host's own error says both.
fn without_load_prefix(message: &str, path: &Path) -> String {
    let rest = message
        .strip_prefix(&format!("plugin {}: ", path.display()))
        .unwrap_or(message);
    rest.strip_prefix("cannot load the library: ")
        .unwrap_or(rest)
        .to_string()
}
