//! Test helpers: the wgpu plugin loaded through the host's ABI path (the cdylib, as a
//! vendor ships it: loading, handshake, `supports`, `compile`, `init`, `execute`), and
//! comparison with the host's reference executor.
//!
//! The tests go through the plugin file rather than the linked rlib, so that they exercise
//! what a vendor ships: the exported symbol, the handshake, every call across the ABI.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use baton_delegate_api::testing::assert_close_labelled;
use baton_delegate_api::{Graph, Support, Tensor};
use baton_reference as reference;
use baton_runtime_host::plugin::{run_once, PluginContext, PluginLibrary};

/// `target/<profile>/libbaton_backend_wgpu.so`, built beside the test binaries.
pub fn plugin_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let p = dir.join(format!(
        "{}baton_backend_wgpu{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        p.is_file(),
        "{} is missing: build the plugin first (`cargo build -p baton-backend-wgpu-plugin`, or the workspace, as scripts/test.sh does)",
        p.display()
    );
    p
}

/// A context of the wgpu plugin with `options`, or `None` (with the reason printed)
/// when there is no wgpu adapter. With `BATON_REQUIRE_VULKAN=1` (CI, which installs
/// lavapipe, a Vulkan adapter for wgpu) having none is a failure instead.
pub fn plugin_with(options: &[(&str, &str)]) -> Option<PluginContext> {
    let lib = PluginLibrary::load(&plugin_path(), None).expect("the wgpu plugin loads");
    let options: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match lib.create(&options) {
        Ok(ctx) => Some(ctx),
        Err(e) if std::env::var("BATON_REQUIRE_VULKAN").as_deref() == Ok("1") => {
            panic!("BATON_REQUIRE_VULKAN=1 but no wgpu adapter: {e}")
        }
        Err(e) => {
            eprintln!("skipped: no wgpu adapter ({e}); set BATON_REQUIRE_VULKAN=1 to fail instead");
            None
        }
    }
}

/// The plugin with default options.
pub fn plugin() -> Option<PluginContext> {
    plugin_with(&[])
}

/// Runs `g` on the device (every node must be claimed; two runs must agree bit for bit)
/// and on the reference executor, and compares every output: NaN where NaN, equal
/// infinities, else `|got - want| <= atol + rtol * |want|`. Does nothing (after saying
/// so) without an adapter.
pub fn check(g: &Graph, inputs: &[Tensor], rtol: f64, atol: f64) {
    let Some(ctx) = plugin() else { return };
    for (node, s) in g.nodes.iter().zip(ctx.supports(g).expect("supports")) {
        assert_eq!(
            s,
            Support::Yes,
            "{}: node {} declined",
            g.name,
            node.label()
        );
    }
    let got = run_once(&ctx, 0, g, inputs).unwrap_or_else(|e| panic!("{}: {e}", g.name));
    let again = run_once(&ctx, 0, g, inputs).unwrap_or_else(|e| panic!("{}: {e}", g.name));
    for (a, b) in got.iter().zip(&again) {
        assert_eq!(
            a.bytes(),
            b.bytes(),
            "{}: a second run gave different results",
            g.name
        );
    }
    let want = reference::run_graph(g, inputs).expect("reference");
    for (o, (g_t, w_t)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g_t.shape, w_t.shape, "output {o} shape");
        assert_eq!(g_t.dtype, w_t.dtype, "output {o} dtype");
        // to_f64 widens f16 outputs exactly, so one comparison serves both dtypes.
        assert_close_labelled(
            &format!("{}: output {o}", g.name),
            &g_t.to_f64(),
            &w_t.to_f64(),
            atol,
            rtol,
        );
    }
}
