//! The `.baton` program: compiled once, loaded many times, bit-identical to the model it
//! came from; any corruption refused cleanly; a file made by this build readable by the
//! next (the golden fixture).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_delegate_api::{Dim, Graph, Tensor};
use baton_runtime_host::program::{self, LoadOptions, Program};
use baton_runtime_host::{model, npy, sample, Engine, HostError, Session};

fn compile_bytes(engine: &Engine, graph: &Graph, bindings: &BTreeMap<String, usize>) -> Vec<u8> {
    let p = program::compile(engine, graph, bindings, &BTreeMap::new()).unwrap();
    program::encode(&p)
}

fn decode(bytes: &[u8]) -> Result<Program, program::ProgramError> {
    program::decode(Arc::new(bytes.to_vec()), true)
}

fn run(session: &mut Session<'_>, inputs: &[Tensor]) -> Vec<Tensor> {
    session.run(inputs).unwrap()
}

fn assert_bit_identical(what: &str, a: &[Tensor], b: &[Tensor]) {
    assert_eq!(a.len(), b.len(), "{what}: output count");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.shape, y.shape, "{what}: output {i} shape");
        assert!(x.bytes() == y.bytes(), "{what}: output {i} differs");
    }
}

#[test]
fn peer_models_from_a_baton_file_are_bit_identical_to_the_onnx_path() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/models");
    assert!(dir.is_dir(), "{} is missing", dir.display());
    let engine = common::plugin_engine(true);
    let tmp = tempfile::tempdir().unwrap();
    for name in ["mobilenet_tiny", "transformer_enc2", "stream_asr"] {
        let d = dir.join(name);
        let graph = model::load(&d.join(format!("{name}.onnx"))).unwrap();
        let mut inputs = Vec::new();
        let mut bindings = BTreeMap::new();
        for &t in &graph.inputs {
            let decl = &graph.tensors[t];
            let x = npy::read(&d.join(format!("input_{}.npy", decl.name))).unwrap();
            for (dim, &v) in decl.shape.iter().zip(&x.shape) {
                if let Dim::Sym(s) = dim {
                    bindings.insert(s.clone(), v);
                }
            }
            inputs.push(x);
        }
        let mut jit = Session::new(&engine, &graph, &bindings).unwrap();
        let want = run(&mut jit, &inputs);

        let path = tmp.path().join(format!("{name}.baton"));
        std::fs::write(&path, compile_bytes(&engine, &graph, &bindings)).unwrap();
        assert!(program::is_program(&path));
        let p = program::read(&path, true).unwrap();
        let strict = LoadOptions {
            recompile: false,
            ..LoadOptions::default()
        };
        let mut aot = program::load(&engine, p, &strict).unwrap();
        assert!(aot.notes.is_empty(), "{name}: {:?}", aot.notes);
        assert_eq!(aot.plan, jit.plan, "{name}: the stored plan");
        assert_eq!(aot.arena_plan, jit.arena_plan, "{name}: the stored layout");
        assert_bit_identical(name, &want, &run(&mut aot, &inputs));
        // ABI 1.2: the CPU delegate was handed the mapped blob for good and reads its
        // packed weights there, so it holds no second copy of them.
        let memory = aot.delegate_memory();
        assert!(!memory.is_empty(), "{name}: no delegated partition");
        for m in memory {
            let info = m
                .memory
                .unwrap_or_else(|| panic!("{name}: {m:?} reports no memory"));
            assert!(
                info.retained_bytes > 0 && info.owned_bytes < info.retained_bytes,
                "{name}: partition {} copied its weights: {info:?}",
                m.partition
            );
            assert!(
                info.scratch_bytes > 0,
                "{name}: no arena reported: {info:?}"
            );
        }
    }
}

#[test]
fn every_flipped_byte_of_a_program_is_refused_with_a_clean_error() {
    let engine = common::plugin_engine(true);
    let bytes = compile_bytes(&engine, &sample::tinynet(), &BTreeMap::new());
    assert!(decode(&bytes).is_ok());
    let mut named = 0;
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0xff;
        let err = match decode(&bad) {
            Ok(_) => panic!(
                "byte {i} of {} flipped, and the program still loads",
                bytes.len()
            ),
            Err(e) => e.to_string(),
        };
        if err.contains("section ") {
            named += 1;
        }
    }
    // Past the header and table, the error names the section.
    assert!(
        named > bytes.len() / 2,
        "{named} of {} errors name a section",
        bytes.len()
    );
    for cut in [0, 7, 63, bytes.len() / 2, bytes.len() - 1] {
        assert!(decode(&bytes[..cut]).is_err(), "truncated to {cut} bytes");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(decode(&longer).is_err(), "one byte appended");
}

#[test]
fn a_corrupted_section_is_named_in_the_error() {
    let engine = common::plugin_engine(true);
    let bytes = compile_bytes(&engine, &sample::tinynet(), &BTreeMap::new());
    let last = bytes.len() - 1; // the shapes section ends the file
    let mut bad = bytes.clone();
    bad[last] ^= 1;
    let e = decode(&bad).err().expect("refused").to_string();
    assert!(
        e.contains("section shapes") && e.contains("checksum"),
        "{e}"
    );
}

/// Where the golden program lives; `BATON_BLESS=1` writes it anew (only when the format
/// changes on purpose, with a new major version).
fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tinynet-v1.0.baton")
}

#[test]
fn the_golden_program_of_an_earlier_build_still_loads_and_runs() {
    let engine = common::plugin_engine(true);
    if std::env::var_os("BATON_BLESS").is_some() {
        let bytes = compile_bytes(&engine, &sample::tinynet(), &BTreeMap::new());
        std::fs::create_dir_all(golden_path().parent().unwrap()).unwrap();
        std::fs::write(golden_path(), bytes).unwrap();
    }
    let p = program::read(&golden_path(), true).unwrap();
    assert_eq!(p.partitions.len(), 1);
    assert_eq!(p.partitions[0].plugin.name, "cpu");
    // The program's own graph, loaded the just-in-time way, is the yardstick: the test
    // does not depend on how `sample::tinynet` may change later.
    let own = p.graph.clone();
    let mut aot = program::load(&engine, p, &LoadOptions::default()).unwrap();
    let mut jit = Session::new(&engine, &own, &BTreeMap::new()).unwrap();
    let input = [sample::tinynet_input()];
    let got = run(&mut aot, &input);
    assert_bit_identical("golden", &run(&mut jit, &input), &got);
    let want = baton_reference::run_graph(&own, &input).unwrap();
    let worst = want[0]
        .f32s()
        .iter()
        .zip(got[0].f32s())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "golden program vs the reference: {worst}");
}

/// The CPU blob's format version sits at bytes 4..8 of the blob; bumping it makes the
/// plugin answer "unsupported".
fn with_stale_blob(bytes: &[u8]) -> Vec<u8> {
    let mut bad = bytes.to_vec();
    let at = find(&bad, b"BCPU").expect("a CPU blob");
    bad[at + 4] = bad[at + 4].wrapping_add(1);
    program::reseal(&mut bad);
    bad
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn a_stale_blob_is_recompiled_with_a_note_or_refused_under_no_recompile() {
    let engine = common::plugin_engine(true);
    let graph = sample::tinynet();
    let stale = with_stale_blob(&compile_bytes(&engine, &graph, &BTreeMap::new()));
    let strict = LoadOptions {
        recompile: false,
        ..LoadOptions::default()
    };
    match program::load(&engine, decode(&stale).unwrap(), &strict) {
        Err(HostError::Program(e @ program::ProgramError::StaleBlob { .. })) => {
            assert!(e.to_string().contains("partition 0"), "{e}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a stale blob loaded under --no-recompile"),
    }
    let mut aot = program::load(&engine, decode(&stale).unwrap(), &LoadOptions::default()).unwrap();
    assert!(
        aot.notes.iter().any(|n| n.contains("recompiled")),
        "{:?}",
        aot.notes
    );
    let mut jit = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
    let input = [sample::tinynet_input()];
    assert_bit_identical("recompiled", &run(&mut jit, &input), &run(&mut aot, &input));
}

#[test]
fn a_stored_blob_that_fails_init_is_recompiled_once() {
    let engine = common::plugin_engine(true);
    let graph = sample::tinynet();
    let mut bad = compile_bytes(&engine, &graph, &BTreeMap::new());
    // The blob's version stays (the plugin calls it optimal); its inner graph is broken.
    let blob = find(&bad, b"BCPU").expect("a CPU blob");
    let inner = blob + find(&bad[blob..], b"BTIR").expect("the blob's graph");
    bad[inner..inner + 4].copy_from_slice(b"XXXX");
    program::reseal(&mut bad);
    let mut aot = program::load(&engine, decode(&bad).unwrap(), &LoadOptions::default()).unwrap();
    assert!(
        aot.notes
            .iter()
            .any(|n| n.contains("init from the stored blob failed")),
        "{:?}",
        aot.notes
    );
    assert_eq!(aot.nodes_per_backend().get("cpu"), Some(&graph.nodes.len()));
    let mut jit = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
    let input = [sample::tinynet_input()];
    assert_bit_identical("retried", &run(&mut jit, &input), &run(&mut aot, &input));
}

#[test]
fn a_program_whose_plugin_is_missing_runs_on_the_host() {
    let graph = sample::tinynet();
    let bytes = compile_bytes(&common::plugin_engine(true), &graph, &BTreeMap::new());
    let bare = common::plugin_engine(false);
    let mut s = program::load(&bare, decode(&bytes).unwrap(), &LoadOptions::default()).unwrap();
    assert!(
        s.notes.iter().any(|n| n.contains("cpu is not available")),
        "{:?}",
        s.notes
    );
    assert_eq!(s.nodes_per_backend().get("host"), Some(&graph.nodes.len()));
    let input = [sample::tinynet_input()];
    let want = baton_reference::run_graph(&graph, &input).unwrap();
    assert_bit_identical("host fallback", &want, &run(&mut s, &input));
}

#[test]
fn a_bounded_program_keeps_its_bounds_and_refuses_a_plain_load() {
    let engine = common::plugin_engine(true);
    let mut b = baton_delegate_api::ir::GraphBuilder::new("bounded");
    let x = b.input(
        "x",
        baton_delegate_api::DType::F32,
        &[Dim::Fixed(1), Dim::Sym("n".into())],
    );
    let r = b.node(baton_delegate_api::OpKind::Relu, &[x], &[]).unwrap();
    b.output(r);
    let graph = b.finish().unwrap();
    let bounds = BTreeMap::from([("n".to_string(), 16)]);
    let p = program::compile(&engine, &graph, &BTreeMap::new(), &bounds).unwrap();
    let back = decode(&program::encode(&p)).unwrap();
    assert_eq!(back.bounds, bounds);
    assert!(back.memory.is_none() && back.partitions.is_empty());
    let mut bounded = program::load_bounded(&engine, &back).unwrap();
    let x = Tensor::from_f32(&[1, 3], &[-1.0, 0.5, 2.0]);
    let out = bounded.run(&[x]).unwrap();
    assert_eq!(out[0].f32s(), &[0.0, 0.5, 2.0]);
    assert!(program::load(&engine, back, &LoadOptions::default()).is_err());
}

/// The file's bytes, 64-byte aligned as a mapping is.
struct Mapped(baton_delegate_api::ir::AlignedBytes);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

#[test]
fn constants_and_blobs_are_views_into_the_file_not_copies() {
    let engine = common::plugin_engine(true);
    let bytes = compile_bytes(&engine, &sample::tinynet(), &BTreeMap::new());
    let buf = baton_delegate_api::ir::AlignedBytes::copy_of(&bytes);
    let owner = Arc::new(Mapped(buf));
    let file = (*owner).as_ref().as_ptr_range();
    let p = program::decode(owner.clone(), true).unwrap();
    let inside = |s: &[u8]| file.contains(&s.as_ptr()) && (s.as_ptr() as usize).is_multiple_of(64);
    let mut constants = 0;
    for t in &p.graph.tensors {
        if let Some(baton_delegate_api::Storage::Inline(d)) = &t.data {
            assert!(inside(d.bytes()), "constant '{}' was copied", t.name);
            constants += 1;
        }
    }
    assert!(constants >= 6, "{constants} constants");
    assert!(inside(p.partitions[0].blob.bytes()), "the blob was copied");
}

#[test]
fn the_branches_of_an_if_are_compiled_into_the_program() {
    use baton_delegate_api::DType;
    let graph = sample::branchy();
    let engine = common::plugin_engine(true);
    let bytes = compile_bytes(&engine, &graph, &BTreeMap::new());
    let p = decode(&bytes).unwrap();
    assert_eq!(p.branches.len(), 2, "both branches stored");
    assert!(p.branches.values().all(|b| b.partitions.len() == 1));
    let mut aot = program::load(&engine, p, &LoadOptions::default()).unwrap();
    let mut jit = Session::new(&engine, &graph, &BTreeMap::new()).unwrap();
    let xs = Tensor::from_f32(&[2, 3], &[-1.0, 2.0, -3.0, 4.0, 0.5, -0.5]);
    for cond in [true, false] {
        let c = Tensor::from_bytes(DType::Bool, &[], &[cond as u8]);
        let inputs = [c, xs.clone()];
        assert_bit_identical("branch", &run(&mut jit, &inputs), &run(&mut aot, &inputs));
    }
    let got = run(
        &mut aot,
        &[Tensor::from_bytes(DType::Bool, &[], &[0]), xs.clone()],
    );
    assert_eq!(got[0].f32s(), &[0.5, 0.0, -2.5, 7.0, -0.5, 2.0]);
    // A corrupted byte inside a branch is refused, naming the branch.
    let branch_at = find(&bytes[64..], b"BATONPRG").expect("a nested program") + 64;
    let mut bad = bytes.clone();
    bad[branch_at + 100] ^= 1;
    program::reseal(&mut bad);
    let e = decode(&bad).err().expect("refused").to_string();
    assert!(e.contains("branch") && e.contains("nested program"), "{e}");
}
