//! ABI behaviour checks: how the plugin behaves at the boundary, independent of numerics.
//! They run in the child like any case, so a plugin that crashes or hangs in one of them
//! is contained the same way.
//!
//! | check | passes when | otherwise |
//! |---|---|---|
//! | `ABI/load_handshake` | the library loads and its descriptor passes the handshake | `load-fail` with the host's typed error (it names the plugin, and for an ABI mismatch both versions) |
//! | `ABI/create_context` | `create` succeeds with the given options | `create-fail` |
//! | `ABI/devices` | at least one device, each named | `create-fail` |
//! | `ABI/supports_every_op` | `supports` answers for a sample graph of every op | `supports-fail` |
//! | `ABI/init_rejects_garbage_blob` | `init` refuses a garbage blob with an error status | `init-fail` |
//! | `ABI/deterministic_rerun` | every accepted sample run twice gives identical bits | `mismatch` (or the failing call's class); `unsupported` when no sample is accepted |

use std::time::Instant;

use baton_delegate_api::{Graph, Support, Tensor};
use baton_runtime_host::plugin::run_once;

use super::child::PluginState;
use super::exec::{blank, call_class};
use super::{run_isolated, RunConfig};
use crate::cases::{self, AbiCheck, Case};
use crate::error::Result;
use crate::outcome::{CaseResult, Class};

/// Runs every ABI check against `config`'s plugin, isolated in child processes.
pub fn check_plugin(config: &RunConfig) -> Result<Vec<CaseResult>> {
    let checks = cases::abi_checks()?;
    Ok(run_isolated(config, &checks)?.results)
}

/// Runs one check in this process (the child calls this).
pub fn run_check(
    state: &mut PluginState,
    check: AbiCheck,
    case: &Case,
    samples: &[(Graph, Vec<Tensor>)],
) -> CaseResult {
    let start = Instant::now();
    let mut r = blank(case);
    let (class, message) = match check {
        AbiCheck::LoadHandshake => load(state),
        AbiCheck::CreateContext => create(state),
        AbiCheck::Devices => devices(state),
        AbiCheck::SupportsEveryOp => supports(state, samples),
        AbiCheck::InitRejectsGarbage => garbage_blob(state, samples),
        AbiCheck::DeterministicRerun => rerun(state, samples),
    };
    r.result = class;
    r.message = message;
    r.duration_ms = crate::outcome::millis(start.elapsed());
    r
}

type Verdict = (Class, String);

fn load(state: &mut PluginState) -> Verdict {
    match state.library() {
        Ok(lib) => (
            Class::Pass,
            format!(
                "{} (build {}), ABI {}.{}, {} option(s){}",
                lib.label(),
                lib.build_id,
                baton_delegate_api::abi::ABI_MAJOR,
                lib.abi_minor,
                lib.options.len(),
                if lib.options.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = lib.options.iter().map(|o| o.name).collect();
                    format!(": {}", names.join(", "))
                }
            ),
        ),
        Err(e) => e,
    }
}

fn create(state: &mut PluginState) -> Verdict {
    let options = state.options.clone();
    match state.context() {
        Ok(_) if options.is_empty() => (Class::Pass, "created with default options".into()),
        Ok(_) => {
            let o: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            (Class::Pass, format!("created with {}", o.join(", ")))
        }
        Err(e) => e,
    }
}

fn devices(state: &mut PluginState) -> Verdict {
    let ctx = match state.context() {
        Ok(c) => c,
        Err(e) => return e,
    };
    match ctx.devices() {
        Err(e) => (Class::CreateFail, format!("device query failed: {e}")),
        Ok(d) if d.is_empty() => (Class::CreateFail, "the plugin reports no devices".into()),
        Ok(d) if d.iter().any(|d| d.name.is_empty()) => {
            (Class::CreateFail, "a device has an empty name".into())
        }
        Ok(d) => {
            let names: Vec<String> = d
                .iter()
                .map(|d| format!("{} (kind {}, driver {})", d.name, d.kind, d.driver_version))
                .collect();
            (
                Class::Pass,
                format!("{} device(s): {}", d.len(), names.join(", ")),
            )
        }
    }
}

fn supports(state: &mut PluginState, samples: &[(Graph, Vec<Tensor>)]) -> Verdict {
    let ctx = match state.context() {
        Ok(c) => c,
        Err(e) => return e,
    };
    let mut accepted = Vec::new();
    for (graph, _) in samples {
        match super::exec::host_supports(ctx, graph) {
            Ok(a) if a.len() != graph.nodes.len() => {
                return (
                    Class::SupportsFail,
                    format!(
                        "{}: {} answers for {} nodes",
                        graph.name,
                        a.len(),
                        graph.nodes.len()
                    ),
                )
            }
            Ok(a) => {
                if a.iter().all(|s| *s == Support::Yes) {
                    accepted.push(graph.name.clone());
                }
            }
            Err(e) => return (call_class(&e), format!("{}: {e}", graph.name)),
        }
    }
    (
        Class::Pass,
        format!(
            "answered for {} sample graphs; accepts {}: {}",
            samples.len(),
            accepted.len(),
            if accepted.is_empty() {
                "none".into()
            } else {
                accepted.join(", ")
            }
        ),
    )
}

fn garbage_blob(state: &mut PluginState, samples: &[(Graph, Vec<Tensor>)]) -> Verdict {
    let ctx = match state.context() {
        Ok(c) => c,
        Err(e) => return e,
    };
    let Some((graph, _)) = samples.first() else {
        return (Class::Unsupported, "no sample graph".into());
    };
    let garbage: Vec<u8> = (0u32..64)
        .map(|i| (i.wrapping_mul(151) ^ 0x5a) as u8)
        .collect();
    // The host calls init_retained where the plugin has it (ABI 1.2), else init: the
    // check covers the entry point the plugin really gets.
    let garbage = baton_delegate_api::ir::TensorData::from_bytes(&garbage);
    match ctx.init(0, &garbage, graph) {
        Err(e) => (Class::Pass, format!("refused: {e}")),
        Ok(_) => (
            Class::InitFail,
            "init accepted a 64-byte garbage blob; it must return an error status".into(),
        ),
    }
}

fn rerun(state: &mut PluginState, samples: &[(Graph, Vec<Tensor>)]) -> Verdict {
    let ctx = match state.context() {
        Ok(c) => c,
        Err(e) => return e,
    };
    let mut ran = 0;
    for (graph, inputs) in samples {
        match super::exec::host_supports(ctx, graph) {
            Ok(a) if a.iter().all(|s| *s == Support::Yes) => {}
            Ok(_) => continue,
            Err(e) => return (call_class(&e), format!("{}: {e}", graph.name)),
        }
        let first = run_once(ctx, 0, graph, inputs);
        let second = run_once(ctx, 0, graph, inputs);
        match (first, second) {
            (Ok(a), Ok(b)) => {
                let same = a.len() == b.len()
                    && a.iter()
                        .zip(&b)
                        .all(|(x, y)| x.shape == y.shape && x.bytes() == y.bytes());
                if !same {
                    return (
                        Class::Mismatch,
                        format!(
                            "{}: two runs of the same graph gave different bits",
                            graph.name
                        ),
                    );
                }
            }
            (Err(e), _) | (_, Err(e)) => return (call_class(&e), format!("{}: {e}", graph.name)),
        }
        ran += 1;
    }
    if ran == 0 {
        return (
            Class::Unsupported,
            "the plugin accepts none of the sample graphs".into(),
        );
    }
    (
        Class::Pass,
        format!("{ran} sample graph(s) gave identical bits on a second run"),
    )
}
