//! `baton devices`: the configured plugins, their devices and probe verdicts.

use anyhow::Result;
use baton_runtime_host::config::Isolation;

use anyhow::bail;
use baton_runtime_host::Engine;

use crate::config::{config, ConfigArg};

/// Prints every configured plugin with its device and probe verdict, and those that failed
/// to load; fails (after the listing) when a plugin marked `required` is unusable.
pub fn devices(a: ConfigArg) -> Result<()> {
    let engine = Engine::survey(config(&a)?)?;
    println!(
        "probe cache: {}",
        baton_runtime_host::probe::cache_file(&engine.cache_dir).display()
    );
    for b in &engine.backends {
        let lib = &b.ctx.lib;
        let place = match lib.isolation() {
            Isolation::Process => " (isolation: process)",
            Isolation::InProcess => "",
        };
        println!(
            "{} (plugin {} {}, ABI 1.{}, build {}) from {}{place}",
            b.name, lib.name, lib.version, lib.abi_minor, lib.build_id, lib.source
        );
        println!(
            "  device {}: {} [driver {}]",
            b.device.index, b.device.name, b.device.driver_version
        );
        println!(
            "  probe: {} ({}) - {}; plugin claims available: {}",
            if b.verdict.passed { "passed" } else { "FAILED" },
            if b.verdict.from_cache {
                "from cache"
            } else {
                "measured now"
            },
            b.verdict.detail,
            b.verdict.claimed_available
        );
    }
    for f in &engine.failed {
        // Plugin errors name the file or plugin; the label is said only when they do not.
        let error = f.error.to_string();
        if error.contains(&f.label) {
            println!("not loaded: {error}");
        } else {
            println!("{}: not loaded: {error}", f.label);
        }
    }
    if engine.backends.is_empty() && engine.failed.is_empty() {
        println!("no plugins configured: everything runs on the portable kernels");
    }
    let unusable = engine.unusable_required();
    if !unusable.is_empty() {
        let names: Vec<&str> = unusable.iter().map(|(name, _)| name.as_str()).collect();
        bail!(
            "{} required plugin(s) unusable (`required = true` in the config): {}",
            unusable.len(),
            names.join(", ")
        );
    }
    Ok(())
}
