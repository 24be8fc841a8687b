//! ABI behaviour checks against broken C plugins: a wrong ABI major, a short descriptor
//! and a missing entry symbol must each be refused at load with a precise message, and
//! the runner must survive all of them. Also the checks against the faulty plugin.
//!
//! The C source is `delegate-api/tests/c_plugin/relu_add_plugin.c` (built with
//! `gcc -std=c99 -O2 -shared -fPIC -I delegate-api/include -D<variant>`); while that file
//! is absent from the checkout, `tests/c_plugin/bad_descriptor.c` stands in for the three
//! broken variants.

mod common;

use std::path::{Path, PathBuf};

use baton_conformance::runner::abi::check_plugin;
use baton_conformance::{CaseResult, Class};

fn source() -> PathBuf {
    common::c_plugin_source().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c_plugin/bad_descriptor.c")
    })
}

fn checks_of(plugin: &Path) -> Vec<CaseResult> {
    let results = check_plugin(&common::config(plugin, &[], 10.0)).expect("the checks run");
    assert_eq!(results.len(), 6, "every check has a result: {results:?}");
    results
}

/// Every check of a plugin that cannot load is `load-fail` with the same message.
fn refused(variant: &str) -> (PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let lib = common::build_c_plugin(
        &source(),
        Some(variant),
        tmp.path(),
        &variant.to_lowercase(),
    );
    let results = checks_of(&lib);
    for r in &results {
        assert_eq!(r.result, Class::LoadFail, "{variant}: {r:?}");
        assert!(
            r.message.contains(lib.to_str().unwrap()),
            "{variant}: the message names the plugin: {}",
            r.message
        );
    }
    (lib, results[0].message.clone())
}

#[test]
fn a_wrong_abi_major_is_refused_naming_both_versions() {
    let (lib, msg) = refused("BATON_TEST_WRONG_MAJOR");
    let host = format!(
        "this host's ABI {}.{}",
        baton_delegate_api::abi::ABI_MAJOR,
        baton_delegate_api::abi::ABI_MINOR
    );
    assert!(msg.contains(&host), "{msg}");
    // "plugin <path>: ABI <major>.<minor> is not compatible ..."
    let after = msg
        .split_once(&format!("{}: ABI ", lib.display()))
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no plugin version in {msg}"));
    let plugin_major: u32 = after
        .split('.')
        .next()
        .unwrap()
        .parse()
        .expect("a major version");
    assert_ne!(plugin_major, baton_delegate_api::abi::ABI_MAJOR, "{msg}");
    assert!(msg.contains("is not compatible"), "{msg}");
}

#[test]
fn a_short_descriptor_is_refused() {
    let (_, msg) = refused("BATON_TEST_SHORT_STRUCT");
    assert!(msg.contains("descriptor struct_size"), "{msg}");
    assert!(msg.contains("is smaller than"), "{msg}");
}

#[test]
fn a_missing_entry_symbol_is_refused() {
    let (_, msg) = refused("BATON_TEST_NO_ENTRY");
    assert!(
        msg.contains("no entry symbol `baton_delegate_entry`"),
        "{msg}"
    );
}

#[test]
fn the_real_c_plugin_passes_the_handshake_when_present() {
    // Until delegate-api's C plugin is merged, only the stand-in exists and it has no
    // valid variant; then this test checks the stand-in is still refused as a whole.
    match common::c_plugin_source() {
        Some(src) => {
            let tmp = tempfile::tempdir().unwrap();
            let lib = common::build_c_plugin(&src, None, tmp.path(), "relu_add_plugin");
            let results = checks_of(&lib);
            assert_eq!(results[0].id, "ABI/load_handshake");
            assert_eq!(results[0].result, Class::Pass, "{:?}", results[0]);
            assert!(
                results.iter().all(|r| !r.result.is_failure()),
                "{results:?}"
            );
        }
        None => {
            let out = std::process::Command::new("gcc")
                .args(["-std=c99", "-fsyntax-only"])
                .arg(source())
                .output()
                .expect("gcc runs");
            assert!(!out.status.success(), "the stand-in has no valid variant");
        }
    }
}

#[test]
fn the_honest_faulty_plugin_passes_every_check() {
    let results = checks_of(&common::faulty_plugin());
    for r in &results {
        assert_eq!(r.result, Class::Pass, "{r:?}");
    }
    assert!(
        results[0].message.contains("faulty"),
        "{}",
        results[0].message
    );
    assert!(
        results[2].message.contains("faulty-device"),
        "{}",
        results[2].message
    );
    assert!(
        results[3].message.contains("Relu"),
        "{}",
        results[3].message
    );
}

#[test]
fn checks_are_contained_when_the_plugin_crashes_or_refuses() {
    let plugin = common::faulty_plugin();
    let crash = check_plugin(&common::config(
        &plugin,
        &[("fault", "crash-execute")],
        10.0,
    ))
    .unwrap();
    let last = crash.last().unwrap();
    assert_eq!(last.id, "ABI/deterministic_rerun");
    assert_eq!(last.result, Class::Crash, "{last:?}");
    assert_eq!(crash[0].result, Class::Pass);
    let create =
        check_plugin(&common::config(&plugin, &[("fault", "panic-create")], 10.0)).unwrap();
    assert_eq!(create[0].result, Class::Pass);
    for r in &create[1..] {
        assert_eq!(r.result, Class::CreateFail, "{r:?}");
        assert!(r.message.contains("panic in create"), "{}", r.message);
    }
}
