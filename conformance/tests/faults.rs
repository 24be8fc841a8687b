//! Every `fault` of the faulty test plugin maps to the expected class, with a precise
//! message, through the isolated runner. (`nan-output` and `lie-available` are judged
//! against reference values: see `inprocess.rs` for them now and
//! `reference_dependent.rs` for the end-to-end run.)

mod common;

use baton_conformance::runner::run_isolated;
use baton_conformance::{CaseResult, Class};
use baton_runtime_host::plugin::PluginLibrary;

/// (fault, expected class of `Relu/f32/33`, fragment its message must contain)
const TABLE: &[(&str, Class, &str)] = &[
    ("panic-create", Class::CreateFail, "panic in create"),
    ("panic-supports", Class::SupportsFail, "panic in supports"),
    ("panic-compile", Class::CompileFail, "panic in compile"),
    ("panic-init", Class::InitFail, "panic in init"),
    ("panic-execute", Class::ExecFail, "panic in execute"),
    (
        "error-compile",
        Class::CompileFail,
        "deliberate compile error",
    ),
    ("error-init", Class::InitFail, "deliberate init error"),
    ("error-execute", Class::ExecFail, "deliberate execute error"),
    (
        "wrong-shape",
        Class::ExecFail,
        "has shape [33, 1], expected [33]",
    ),
    ("hang-execute", Class::Timeout, "did not finish within 2 s"),
    ("crash-execute", Class::Crash, "died of SIGSEGV"),
];

/// Faults judged by comparing numbers (covered elsewhere) and the honest mode.
const NUMERIC: &[&str] = &["none", "nan-output", "lie-available"];

/// Faults that strike only subgraphs of more than two nodes (single-op cases never see
/// them); the host's re-partition and fallback tests in `runtime-host/tests/host.rs`
/// cover them.
const LARGE_ONLY: &[&str] = &["error-init-large", "error-execute-large"];

fn run_fault(fault: &str) -> Vec<CaseResult> {
    let plugin = common::faulty_plugin();
    let config = common::config(&plugin, &[("fault", fault)], 2.0);
    // The hang would cost a timeout per case; one case proves the point.
    let ids: &[&str] = if fault == "hang-execute" {
        &["Relu/f32/33"]
    } else {
        &[
            "ABI/load_handshake",
            "ABI/create_context",
            "Relu/f32/33",
            "Relu/f32/7",
        ]
    };
    let cases = common::cases_by_id(ids);
    let outcome = run_isolated(&config, &cases).expect("the run completes");
    assert_eq!(outcome.results.len(), ids.len(), "one result per case");
    for (r, id) in outcome.results.iter().zip(ids) {
        assert_eq!(r.id, *id, "results come back in case order");
    }
    outcome.results
}

fn check(fault: &str) {
    let (_, class, fragment) = TABLE
        .iter()
        .find(|(f, _, _)| *f == fault)
        .expect("fault in table");
    let results = run_fault(fault);
    let relu = results
        .iter()
        .find(|r| r.id == "Relu/f32/33")
        .expect("relu result");
    assert_eq!(relu.result, *class, "{fault}: {relu:?}");
    assert!(
        relu.message.contains(fragment),
        "{fault}: message {:?} lacks {fragment:?}",
        relu.message
    );
    if let Some(load) = results.iter().find(|r| r.id == "ABI/load_handshake") {
        assert_eq!(load.result, Class::Pass, "{fault}: {load:?}");
        assert!(load.message.contains("faulty"), "{}", load.message);
    }
    if let Some(create) = results.iter().find(|r| r.id == "ABI/create_context") {
        let expected = if fault == "panic-create" {
            Class::CreateFail
        } else {
            Class::Pass
        };
        assert_eq!(create.result, expected, "{fault}: {create:?}");
    }
    match *class {
        Class::Crash => {
            assert_eq!(relu.signal.as_deref(), Some("SIGSEGV"), "{relu:?}");
            // The next case ran in a fresh child and crashed on its own account.
            let next = results
                .iter()
                .find(|r| r.id == "Relu/f32/7")
                .expect("next case");
            assert_eq!(next.result, Class::Crash, "{next:?}");
        }
        Class::Timeout => assert!(relu.duration_ms >= 1900.0, "{relu:?}"),
        _ => {}
    }
}

#[test]
fn the_table_covers_every_fault_the_plugin_offers() {
    let lib = PluginLibrary::load(&common::faulty_plugin(), None).expect("faulty plugin loads");
    let decl = lib
        .options
        .iter()
        .find(|o| o.name == "fault")
        .expect("fault option");
    for choice in decl.choices.split('|') {
        assert!(
            TABLE.iter().any(|(f, _, _)| *f == choice)
                || NUMERIC.contains(&choice)
                || LARGE_ONLY.contains(&choice),
            "fault '{choice}' has no expectation in this test"
        );
    }
}

#[test]
fn panic_create() {
    check("panic-create");
}

#[test]
fn panic_supports() {
    check("panic-supports");
}

#[test]
fn panic_compile() {
    check("panic-compile");
}

#[test]
fn panic_init() {
    check("panic-init");
}

#[test]
fn panic_execute() {
    check("panic-execute");
}

#[test]
fn error_compile() {
    check("error-compile");
}

#[test]
fn error_init() {
    check("error-init");
}

#[test]
fn error_execute() {
    check("error-execute");
}

#[test]
fn wrong_shape() {
    check("wrong-shape");
}

#[test]
fn hang_execute() {
    check("hang-execute");
}

#[test]
fn crash_execute() {
    check("crash-execute");
}

#[test]
fn an_unknown_option_is_a_create_failure_naming_the_key() {
    let plugin = common::faulty_plugin();
    let config = common::config(&plugin, &[("no_such_option", "1")], 5.0);
    let cases = common::cases_by_id(&["ABI/create_context", "Relu/f32/33"]);
    let out = run_isolated(&config, &cases).expect("run");
    for r in &out.results {
        assert_eq!(r.result, Class::CreateFail, "{r:?}");
        assert!(
            r.message.contains("unknown option 'no_such_option'"),
            "{}",
            r.message
        );
    }
}
