// Test helpers every GPU delegate shares: its plugin loaded through the host's ABI path
// (the cdylib, as a vendor ships it: loading, handshake, `supports`, `compile`, `init`,
// `execute`), and comparison with the host's reference executor. `include!`d by each
// delegate's tests/common/mod.rs after it defines:
// - `PLUGIN`: the plugin file's stem (`baton_backend_vulkan`);
// - `PLUGIN_CRATE`: the package that builds it;
// - `NO_DEVICE`: how the plugin's `create` says it found no device ("no Vulkan device");
// - `EARLY_FAILURE`: a reason the plugin may fail before it looks for a device on a
//   machine without its runtime (Vulkan's loader), tolerated unless BATON_REQUIRE_VULKAN=1.
//
// The tests go through the plugin file rather than the linked rlib, so that they exercise
// what a vendor ships: the exported symbol, the handshake, every call across the ABI.

use std::path::{Path, PathBuf};

use baton_delegate_api::testing::assert_close_labelled;
use baton_delegate_api::{Graph, Support, Tensor};
use baton_reference as reference;
use baton_runtime_host::plugin::{run_once, PluginContext, PluginLibrary};

/// CI installs lavapipe and sets BATON_REQUIRE_VULKAN=1 (wgpu reaches lavapipe through its
/// Vulkan backend): there, having no device fails the test instead of skipping it.
pub fn device_required() -> bool {
    std::env::var("BATON_REQUIRE_VULKAN").as_deref() == Ok("1")
}

/// `target/<profile>/lib<PLUGIN>.so`, built beside the test binaries.
pub fn plugin_path() -> PathBuf {
    sibling_plugin(PLUGIN)
}

/// The plugin file `stem` in the directory of the test binaries' profile.
pub fn sibling_plugin(stem: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let p = dir.join(format!(
        "{}{stem}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        p.is_file(),
        "{} is missing: build it first (`cargo build -p {PLUGIN_CRATE}`, or the workspace, as scripts/test.sh does)",
        p.display()
    );
    p
}

/// A context of the plugin with `options`, or `None` (with the reason printed) when there
/// is no device; a failure instead where [`device_required`].
pub fn plugin_with(options: &[(&str, &str)]) -> Option<PluginContext> {
    let lib = PluginLibrary::load(&plugin_path(), None).expect("the plugin loads");
    let options: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match lib.create(&options) {
        Ok(ctx) => Some(ctx),
        Err(e) if device_required() => panic!("BATON_REQUIRE_VULKAN=1 but {NO_DEVICE}: {e}"),
        Err(e) => {
            eprintln!("skipped: {NO_DEVICE} ({e}); set BATON_REQUIRE_VULKAN=1 to fail instead");
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
/// so) without a device.
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
