//! Engines: the configured plugins, loaded and proven, and the device rows they report.

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_runtime_host::{Config, Engine};

use crate::{guard, handle, put, text, BatonResult, CapiError, Tag, Tagged};

/// The header's `BatonEngine`. Sessions hold the engine by its `Arc`, so freeing the handle
/// while they live only drops the handle's share.
#[repr(C)]
pub struct BatonEngine {
    tag: Tag,
    pub(crate) engine: Arc<Engine>,
    devices: Vec<HeldDevice>,
}

impl Tagged for BatonEngine {
    const TAG: Tag = Tag::Engine;
    const KIND: &'static str = "BatonEngine";
}

/// The header's `BatonDeviceRow`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatonDeviceRow {
    pub backend: *const c_char,
    pub plugin: *const c_char,
    pub device: *const c_char,
    pub usable: i32,
    pub required: i32,
    pub detail: *const c_char,
}

/// One device row with its strings held by the engine handle.
struct HeldDevice {
    backend: CString,
    plugin: CString,
    device: CString,
    usable: bool,
    required: bool,
    detail: CString,
}

impl BatonEngine {
    fn new(config: Config) -> crate::Result<BatonEngine> {
        let engine = Engine::new(config)?;
        let c = crate::c_string;
        let mut devices: Vec<HeldDevice> = engine
            .backends
            .iter()
            .map(|b| HeldDevice {
                backend: c(&b.name),
                plugin: c(&format!("{} {}", b.ctx.lib.name, b.ctx.lib.version)),
                device: c(&b.device.name),
                usable: b.usable(),
                required: b.required,
                detail: c(&b.verdict.detail),
            })
            .collect();
        devices.extend(engine.failed.iter().map(|f| HeldDevice {
            backend: c(&f.label),
            plugin: c(&f.label),
            device: CString::default(),
            usable: false,
            required: f.required,
            detail: c(&f.error.to_string()),
        }));
        Ok(BatonEngine {
            tag: Tag::Engine,
            engine: Arc::new(engine),
            devices,
        })
    }
}

/// An engine from a config file, or with no plugins when `config_path` is NULL.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_engine_create(
    config_path: *const c_char,
    out: *mut *mut BatonEngine,
) -> BatonResult {
    guard("baton_engine_create", || {
        if out.is_null() {
            return Err(CapiError::Null { arg: "out" });
        }
        let config = if config_path.is_null() {
            Config {
                source: "(no config: the host's portable kernels only)".into(),
                ..Config::default()
            }
        } else {
            Config::load(Path::new(text(config_path, "config_path")?)).map_err(CapiError::Config)?
        };
        let engine = BatonEngine::new(config)?;
        put(out, Box::into_raw(Box::new(engine)), "out")
    })
}

/// An engine from config text, relative paths anchored at `base_dir` (NULL: `.`).
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_engine_create_from_string(
    config_toml: *const c_char,
    base_dir: *const c_char,
    out: *mut *mut BatonEngine,
) -> BatonResult {
    guard("baton_engine_create_from_string", || {
        if out.is_null() {
            return Err(CapiError::Null { arg: "out" });
        }
        let toml = text(config_toml, "config_toml")?;
        let base = if base_dir.is_null() {
            PathBuf::from(".")
        } else {
            PathBuf::from(text(base_dir, "base_dir")?)
        };
        let config =
            Config::parse(toml, Path::new("(config string)"), &base).map_err(CapiError::Config)?;
        let engine = BatonEngine::new(config)?;
        put(out, Box::into_raw(Box::new(engine)), "out")
    })
}

/// Frees an engine handle (its sessions keep the engine itself alive).
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_engine_free(engine: *mut BatonEngine) {
    crate::free(engine, "baton_engine_free");
}

/// How many device rows [`baton_engine_device`] gives.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_engine_device_count(
    engine: *const BatonEngine,
    out: *mut usize,
) -> BatonResult {
    guard("baton_engine_device_count", || {
        let e = handle(engine, "engine")?;
        put(out, e.devices.len(), "out")
    })
}

/// One device row: a backend that came up (priority order), then those that did not.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_engine_device(
    engine: *const BatonEngine,
    index: usize,
    out: *mut BatonDeviceRow,
) -> BatonResult {
    guard("baton_engine_device", || {
        let e = handle(engine, "engine")?;
        let d = e.devices.get(index).ok_or(CapiError::Index {
            what: "device",
            index,
            count: e.devices.len(),
        })?;
        let info = BatonDeviceRow {
            backend: d.backend.as_ptr(),
            plugin: d.plugin.as_ptr(),
            device: d.device.as_ptr(),
            usable: d.usable as i32,
            required: d.required as i32,
            detail: d.detail.as_ptr(),
        };
        put(out, info, "out")
    })
}
