//! Tests that need the host's real reference kernels (and, for the last one, the real CPU
//! backend). On a branch where the `baton-reference` crate is still a stub these fail
//! with `reference-fail`; they are meant to pass once the real kernels are merged.

mod common;

use std::process::Command;

use baton_conformance::runner::exec::{Oracle, Reference};
use baton_conformance::runner::run_isolated;
use baton_conformance::{cases, CaseResult, Class};

fn run(fault: &str, ids: &[&str]) -> Vec<CaseResult> {
    let config = common::config(&common::faulty_plugin(), &[("fault", fault)], 10.0);
    run_isolated(&config, &common::cases_by_id(ids))
        .expect("run")
        .results
}

#[test]
fn the_reference_runs_every_case_of_the_catalogue() {
    let mut failures = Vec::new();
    for case in cases::all().unwrap() {
        let (graph, inputs) = case.graph().unwrap();
        match Reference.run(graph, inputs) {
            Ok(out) => {
                for (&o, t) in graph.outputs.iter().zip(&out) {
                    // A value-dependent extent (NonMaxSuppression's count...) is a symbol
                    // the values settle; every other extent must be as declared.
                    let want = &graph.tensors[o].shape;
                    let agrees = want.len() == t.shape.len()
                        && want
                            .iter()
                            .zip(&t.shape)
                            .all(|(d, &s)| d.fixed().is_none_or(|f| f == s));
                    if !agrees || t.dtype != graph.tensors[o].dtype {
                        failures.push(format!(
                            "{}: output {:?} {}, graph says {want:?}",
                            case.id, t.shape, t.dtype
                        ));
                    }
                }
            }
            Err(e) => failures.push(format!("{}: {e}", case.id)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_honest_faulty_plugin_passes_what_it_takes() {
    let pass = [
        "Relu/f32/33",
        "Relu/f32/specials",
        "Relu/f32/negzero",
        "Relu/f32/rank0",
        "Add/f32/same_2x3x4",
        "Add/f32/rank0_rank0",
        "Add/f32/large_1e30",
        "Model/f32/relu_add_chain",
    ];
    for r in run("none", &pass) {
        assert_eq!(r.result, Class::Pass, "{r:?}");
    }
    for r in run("none", &["Model/f32/mlp", "Model/f32/residual_block"]) {
        assert_eq!(r.result, Class::PassPartial, "{r:?}");
        assert!(r.delegated_nodes.unwrap() > 0);
    }
}

#[test]
fn nan_output_and_lie_available_are_mismatches() {
    for fault in ["nan-output", "lie-available"] {
        for r in run(fault, &["Relu/f32/33", "Add/f32/same_33", "Model/f32/mlp"]) {
            assert_eq!(r.result, Class::Mismatch, "{fault}: {r:?}");
            assert!(r.worst_index.is_some() && r.got.is_some() && r.expected.is_some());
        }
    }
}

/// The kit against the CPU plugin of the workspace: no case may fail. This is the kit
/// doing its job on the real backend, and the test most likely to reveal genuine
/// disagreements between the CPU backend and the reference kernels.
#[test]
fn the_cpu_backend_conforms() {
    let cpu = common::cdylib("baton_backend_cpu");
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(common::kit_exe())
        .arg("--plugin")
        .arg(&cpu)
        .arg("--abi-checks")
        .arg("--report-dir")
        .arg(tmp.path())
        .output()
        .expect("kit runs");
    let summary = std::fs::read_to_string(tmp.path().join("summary.md")).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{summary}",
        String::from_utf8_lossy(&out.stderr)
    );
}
