//! The suite through the user's path: each case driven as
//! `baton run model.onnx --input NAME=FILE.npy ... --output-dir DIR` drives a model.
//!
//! The case's input tensors are written as `.npy` files and read back for the model's
//! inputs with [`baton_runtime_host::inputs`] (fitted to each input's dtype as the CLI
//! does), the model is loaded with [`baton_runtime_host::model::load`] and run in a
//! [`Session`] built for the dimensions the inputs bind and the values of its value
//! inputs (inputs whose values decide shapes), and each output is written as
//! a `.npy` file and read back before it is compared: every step between the user's
//! files and theirs, the host included, is the one `baton run` takes. The
//! [`Engine`] is the one given (no plugin: the host's reference kernels).

use std::path::Path;

use baton_delegate_api::Tensor;
use baton_runtime_host::{inputs, model, npy, Engine, Session};

use super::{
    import_failure, OutputCheck, Prepared, RawOutcome, SuiteCaseSource, SuiteClass, Worst,
};
use crate::tolerance::Tolerances;

/// Runs one case through the user's path, its files in `scratch` (overwritten).
pub fn run_case(
    source: &SuiteCaseSource,
    tolerances: &Tolerances,
    engine: &Engine,
    scratch: &Path,
) -> RawOutcome {
    let prepared = match Prepared::read(source) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let op = prepared.op.as_str();
    let graph = match model::load(&source.model_path()) {
        Ok(g) => g,
        Err(e) => return import_failure(op, e.to_string()),
    };
    let sets = match prepared.data_sets(source) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut worst = Worst::default();
    for (set_name, given, expected) in sets {
        let fail =
            |class: SuiteClass, m: String| RawOutcome::new(op, class, format!("{set_name}: {m}"));
        let given = match prepared.bind(&graph, given, false) {
            Ok(b) => b,
            Err(m) => return fail(SuiteClass::FailRun, m),
        };
        let mut fed = Vec::with_capacity(given.len());
        for (k, (&id, t)) in graph.inputs.iter().zip(&given).enumerate() {
            let name = &graph.tensors[id].name;
            let file = scratch.join(format!("input_{k}.npy"));
            let read = npy::write(&file, t).and_then(|()| {
                inputs::read_for(&graph, name, &file).expect("a graph input's own name")
            });
            remove(&file);
            match read {
                Ok(x) => fed.push(x),
                Err(e) => return fail(SuiteClass::FailRun, in_scratch(e.to_string(), scratch)),
            }
        }
        let got = match run(engine, &graph, &fed, scratch) {
            Ok(o) => o,
            Err(m) => return fail(SuiteClass::FailRun, m),
        };
        let expected = match prepared.bind(&graph, expected, true) {
            Ok(b) => b,
            Err(m) => return fail(SuiteClass::Mismatch, m),
        };
        let check = OutputCheck {
            graph: &graph,
            op,
            source,
            tolerances,
            set_name: &set_name,
        };
        if let Some(r) = check.compare(&got, &expected, &mut worst) {
            return r;
        }
    }
    RawOutcome::new(op, SuiteClass::Pass, "")
}

/// A session for `inputs`' dimensions, run once; its outputs written as `.npy` files
/// and read back, as the user would read them.
fn run(
    engine: &Engine,
    graph: &baton_delegate_api::Graph,
    inputs: &[Tensor],
    scratch: &Path,
) -> Result<Vec<Tensor>, String> {
    let bindings = inputs::bindings(graph, inputs);
    let values = inputs::values(graph, inputs);
    let mut session =
        Session::with_values(engine, graph, &bindings, &values).map_err(|e| e.to_string())?;
    let outputs = session.run(inputs).map_err(|e| e.to_string())?;
    outputs
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let file = scratch.join(format!("output_{k}.npy"));
            let back = npy::write(&file, t).and_then(|()| npy::read(&file));
            remove(&file);
            back.map_err(|e| in_scratch(e.to_string(), scratch))
        })
        .collect()
}

/// Removes a file once read: the next case writes a new file rather than truncating
/// this one, which ext4 makes wait for the old blocks (its `auto_da_alloc`), a few
/// milliseconds a file.
fn remove(file: &Path) {
    // A file left behind is overwritten by the next case and removed with the scratch
    // directory; nothing depends on this succeeding.
    let _ = std::fs::remove_file(file);
}

/// `msg` with the scratch directory left out of the file names it gives (`input_0.npy`),
/// so that a manifest's reasons are the same from run to run.
fn in_scratch(msg: String, scratch: &Path) -> String {
    msg.replace(&format!("{}/", scratch.display()), "")
}
