//! Helpers shared by the host's integration tests: finding the workspace's plugins and
//! building the C test plugin.

#![allow(dead_code)]

pub mod fuzz;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cargo target profile directory these tests were built into (`target/debug`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test-binary>
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// Path of a workspace cdylib, e.g. `plugin("baton_backend_cpu")`.
pub fn plugin(crate_name: &str) -> PathBuf {
    let p = profile_dir().join(format!(
        "{}{crate_name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace`), as scripts/test.sh does",
        p.display()
    );
    p
}

/// Compiles the C test plugin (with extra `-D` flags) into `dir`; returns the library path.
pub fn c_plugin(dir: &Path, defines: &[&str], out_name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let src = root.join("delegate-api/tests/c_plugin/relu_add_plugin.c");
    let include = root.join("delegate-api/include");
    let out = dir.join(out_name);
    let mut cmd = Command::new("gcc");
    cmd.args(["-std=c99", "-O2", "-shared", "-fPIC", "-I"])
        .arg(&include)
        .arg("-I")
        .arg(src.parent().expect("c_plugin dir"))
        .args(defines)
        .arg("-o")
        .arg(&out)
        .arg(&src);
    let status = cmd
        .status()
        .expect("gcc is required to build the C test plugin (apt-get install gcc)");
    assert!(status.success(), "gcc failed on {}", src.display());
    out
}

/// A config file in `dir` with the given TOML body; returns its path.
pub fn config(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("baton.toml");
    let cache = dir.join("cache");
    std::fs::write(
        &p,
        format!("cache_dir = {:?}\n{body}", cache.display().to_string()),
    )
    .expect("write config");
    p
}

/// TOML-quoted path.
pub fn q(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// Largest absolute difference between two f32 tensors of equal shape.
pub fn max_abs_diff(a: &baton_delegate_api::Tensor, b: &baton_delegate_api::Tensor) -> f32 {
    assert_eq!(a.shape, b.shape);
    a.f32s()
        .iter()
        .zip(b.f32s())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// An engine with a shared probe cache in the temp dir: the CPU plugin file of this build
/// when `with_cpu`, else no plugin (every node on the host's portable kernels).
pub fn plugin_engine(with_cpu: bool) -> baton_runtime_host::Engine {
    let mut cfg = baton_runtime_host::Config {
        cache_dir: Some(std::env::temp_dir().join("baton-test-cache")),
        ..Default::default()
    };
    if with_cpu {
        cfg.plugins.push(baton_runtime_host::config::PluginConfig {
            path: Some(plugin("baton_backend_cpu")),
            ..Default::default()
        });
    }
    baton_runtime_host::Engine::new(cfg).unwrap()
}
