//! Where the time of one run went: a timeline of the session's steps (each host node, each
//! delegated partition with the events its plugin reported, each control-flow node), shown
//! by `baton run --profile` as a table and written by `baton run --trace FILE.json` in the
//! Chrome trace event format, which Perfetto and `chrome://tracing` open.
//!
//! The host measures every step itself, so a plugin that reports nothing still shows up
//! with its partition's wall time. A plugin's own events carry durations but no start
//! times (the ABI's `BatonProfileEvent` has none), so the trace lays them end to end from
//! the start of their partition on a track of their own; the gap between their sum and
//! the partition's span is the cost of the call itself (views, checks, the copy-free
//! handoff) plus whatever the plugin did not report.

use std::io::Write;
use std::path::Path;

use baton_delegate_api::sdk::ProfileEvent;
use serde_json::{json, Value};

/// One step of a run, timed by the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepTiming {
    /// What ran: the node's label for a host or control-flow step, `partition N` for a
    /// delegated one.
    pub name: String,
    /// The op (`Conv`, `If`) of a host or control step; `partition` for a delegated one.
    pub kind: String,
    /// Who ran it: a backend's name, or `host` for the portable kernels.
    pub target: String,
    /// Nanoseconds from the start of the run to the start of the step.
    pub start_ns: u64,
    /// The step's wall time in nanoseconds.
    pub dur_ns: u64,
    /// The plugin's own events for a delegated step (empty for host steps, for a plugin
    /// that reports none, and when the partition fell back to the host).
    pub events: Vec<ProfileEvent>,
    /// The steps run inside this one, on the same clock: the taken branch's steps for an
    /// If (named `then_branch: ...` or `else_branch: ...`), so that a model whose work sits
    /// in a branch (torch exports wrap whole models in one) shows where that work went.
    /// Empty for every other step.
    pub children: Vec<StepTiming>,
}

impl StepTiming {
    /// Moves the step and the steps inside it `ns` later: from the clock of the run that
    /// timed them (a branch's, a stage's) onto the clock of the run that holds it.
    pub fn shift(&mut self, ns: u64) {
        self.start_ns += ns;
        for c in &mut self.children {
            c.shift(ns);
        }
    }
}

/// The process id used in the trace: one process, the run.
const PID: u32 = 1;
/// Track of the host's steps.
const STEPS_TID: u32 = 1;
/// Track of the plugins' own events.
const PLUGIN_TID: u32 = 2;

/// The Chrome trace event document of one run's timeline (`traceEvents` of complete
/// events, times in microseconds as the format requires).
pub fn chrome_trace(model: &str, steps: &[StepTiming]) -> Value {
    let mut events = vec![
        meta(
            "process_name",
            STEPS_TID,
            json!({ "name": format!("baton run {model}") }),
        ),
        meta("thread_name", STEPS_TID, json!({ "name": "session steps" })),
        meta(
            "thread_name",
            PLUGIN_TID,
            json!({ "name": "plugin events (laid end to end)" }),
        ),
    ];
    push_steps(&mut events, steps);
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

/// Complete events for `steps` on the steps track, their plugins' events on their own,
/// then the steps inside each (nested in time, so the viewer stacks them under it).
fn push_steps(events: &mut Vec<Value>, steps: &[StepTiming]) {
    let us = |ns: u64| ns as f64 / 1e3;
    for s in steps {
        events.push(json!({
            "name": s.name,
            "cat": s.target,
            "ph": "X",
            "ts": us(s.start_ns),
            "dur": us(s.dur_ns),
            "pid": PID,
            "tid": STEPS_TID,
            "args": { "op": s.kind, "target": s.target, "plugin_events": s.events.len() },
        }));
        let mut at = s.start_ns;
        for e in &s.events {
            events.push(json!({
                "name": e.name,
                "cat": s.target,
                "ph": "X",
                "ts": us(at),
                "dur": us(e.wall_ns),
                "pid": PID,
                "tid": PLUGIN_TID,
                "args": { "kind": e.kind, "cycles": e.cycles, "partition": s.name },
            }));
            at += e.wall_ns;
        }
        push_steps(events, &s.children);
    }
}

/// Writes [`chrome_trace`] to `path`.
pub fn write_chrome_trace(path: &Path, model: &str, steps: &[StepTiming]) -> std::io::Result<()> {
    let doc = chrome_trace(model, steps);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    serde_json::to_writer(&mut f, &doc)?;
    f.flush()
}

fn meta(name: &str, tid: u32, args: Value) -> Value {
    json!({ "name": name, "ph": "M", "pid": PID, "tid": tid, "args": args })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, wall_ns: u64) -> ProfileEvent {
        ProfileEvent {
            name: name.into(),
            kind: "op".into(),
            cycles: 0,
            wall_ns,
        }
    }

    #[test]
    fn steps_and_plugin_events_become_complete_events_in_microseconds() {
        let steps = vec![
            StepTiming {
                name: "partition 0".into(),
                kind: "partition".into(),
                target: "cpu".into(),
                start_ns: 1_000,
                dur_ns: 9_000,
                events: vec![event("conv_0 (Conv)", 5_000), event("relu_1 (Relu)", 2_000)],
                children: Vec::new(),
            },
            StepTiming {
                name: "gather_2 (Gather)".into(),
                kind: "Gather".into(),
                target: "host".into(),
                start_ns: 10_500,
                dur_ns: 1_500,
                events: Vec::new(),
                children: Vec::new(),
            },
        ];
        let doc = chrome_trace("m.onnx", &steps);
        let evs = doc["traceEvents"].as_array().unwrap();
        let complete: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(complete.len(), 4);
        // The partition on the steps track, its plugin's events end to end on their own.
        assert_eq!(complete[0]["name"], "partition 0");
        assert_eq!(complete[0]["ts"], 1.0);
        assert_eq!(complete[0]["dur"], 9.0);
        assert_eq!(complete[0]["tid"], STEPS_TID);
        assert_eq!(complete[1]["name"], "conv_0 (Conv)");
        assert_eq!(complete[1]["ts"], 1.0);
        assert_eq!(complete[1]["tid"], PLUGIN_TID);
        assert_eq!(complete[2]["ts"], 6.0);
        assert_eq!(complete[2]["dur"], 2.0);
        assert_eq!(complete[3]["cat"], "host");
        assert_eq!(complete[3]["ts"], 10.5);
        // Metadata names the tracks, so Perfetto shows them labelled.
        assert!(evs
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == "thread_name"));
    }
}
