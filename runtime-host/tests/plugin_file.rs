//! A plugin file is checked before `dlopen`: a truncated or foreign library is refused
//! with the reason, like any plugin that cannot load, and the host goes on without it.
//! (The test cuts a 64-bit little-endian ELF file: it runs on such Linux hosts.)

#![cfg(all(
    target_os = "linux",
    target_pointer_width = "64",
    target_endian = "little"
))]

mod common;

use baton_runtime_host::{Config, Engine};

/// A plugin file cut to half of what the loader maps (its size without the debug info
/// that follows the loaded segments): glibc's dlopen would map its segments and die of
/// SIGBUS. The host refuses it by name and goes on without it.
#[test]
fn a_truncated_plugin_is_refused_before_dlopen() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(common::plugin("baton_backend_cpu")).unwrap();
    let cut = dir.path().join("libbaton_backend_cpu.so");
    std::fs::write(&cut, &whole[..loaded_end(&whole) / 2]).unwrap();
    let cfg = common::config(
        dir.path(),
        &format!("[[plugin]]\npath = {}\n", common::q(&cut)),
    );
    let engine = Engine::new(Config::load(&cfg).unwrap()).unwrap();
    assert!(engine.backends.is_empty());
    let why = engine.failed[0].error.to_string();
    assert!(
        why.contains(&cut.display().to_string()) && why.contains("truncated"),
        "{why}"
    );
}

/// The end of the last `PT_LOAD` segment's bytes in a 64-bit little-endian ELF file.
fn loaded_end(elf: &[u8]) -> usize {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54), u16_at(56));
    (0..phnum)
        .map(|k| phoff + k * phentsize)
        .filter(|&at| elf[at..at + 4] == 1u32.to_le_bytes())
        .map(|at| u64_at(at + 8) + u64_at(at + 32))
        .max()
        .expect("the plugin has PT_LOAD segments")
}
