//! The host end to end: real plugins (the dlopen'd CPU plugin, the C plugin, the faulty
//! plugin) through loading, handshake, probe, partitioning, execution and fallback.

mod common;

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, DType, Graph, GraphBuilder, OpKind, Tensor};
use baton_partitioner::Decision;
use baton_reference as reference;
use baton_runtime_host::plugin::PluginLibrary;
use baton_runtime_host::{sample, Config, Engine, HostError, Session};
use common::{c_plugin, config, max_abs_diff, plugin, q};

fn engine(body: &str) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::load(&config(dir.path(), body)).unwrap();
    let e = Engine::new(cfg).unwrap();
    (dir, e)
}

fn cpu_plugin_config(priority: i64) -> String {
    format!(
        "[[plugin]]\npath = {}\npriority = {priority}\n",
        q(&plugin("baton_backend_cpu"))
    )
}

fn faulty_config(fault: &str, priority: i64) -> String {
    format!(
        "[[plugin]]\npath = {}\npriority = {priority}\noptions = {{ fault = \"{fault}\" }}\n",
        q(&plugin("baton_faulty_plugin"))
    )
}

/// x -> Relu -> Add(y) -> Relu -> Add(y): four nodes the faulty and C plugins can run.
fn relu_add_chain() -> (Graph, Vec<Tensor>) {
    let mut b = GraphBuilder::new("chain");
    let x = b.input_fixed("x", DType::F32, &[2, 5]);
    let y = b.input_fixed("y", DType::F32, &[2, 5]);
    let r1 = b.node(OpKind::Relu, &[x], &[]).unwrap();
    let a1 = b.node(OpKind::Add, &[r1, y], &[]).unwrap();
    let r2 = b.node(OpKind::Relu, &[a1], &[]).unwrap();
    let a2 = b.node(OpKind::Add, &[r2, y], &[]).unwrap();
    b.output(a2);
    let xs: Vec<f32> = (0..10).map(|i| i as f32 - 4.5).collect();
    let ys: Vec<f32> = (0..10).map(|i| 1.0 - 0.3 * i as f32).collect();
    (
        b.finish().unwrap(),
        vec![
            Tensor::from_f32(&[2, 5], &xs),
            Tensor::from_f32(&[2, 5], &ys),
        ],
    )
}

fn reference_outputs(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    reference::run_graph(g, inputs).unwrap()
}

#[test]
fn example_runs_on_the_dlopened_cpu_plugin_and_matches_the_reference() {
    let (_d, e) = engine(&cpu_plugin_config(0));
    let cpu = &e.backends[0];
    assert!(cpu.verdict.passed, "probe: {}", cpu.verdict.detail);
    let graph = sample::tinynet();
    let inputs = vec![sample::tinynet_input()];
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    assert!(!s.plan.partitions.is_empty(), "{}", s.plan.render(&s.graph));
    assert_eq!(s.nodes_per_backend().get("cpu"), Some(&graph.nodes.len()));
    let got = s.run(&inputs).unwrap();
    let want = reference_outputs(&graph, &inputs);
    assert!(max_abs_diff(&got[0], &want[0]) < 1e-5);
    // A second run on the same session gives the same answer (state is not carried over).
    let again = s.run(&inputs).unwrap();
    assert_eq!(again[0].bytes(), got[0].bytes());
    assert!(s.arena_plan.arena_size >= s.arena_plan.lower_bound);
    assert!(s.arena_plan.arena_size <= s.arena_plan.naive_size);
}

#[test]
fn the_host_library_links_no_backend_so_a_builtin_is_refused_with_the_fix() {
    // Built-in backends are linked by the `baton` binary's cargo features (cli/tests/builtin.rs
    // runs the built-in CPU backend); the host library, and so this test, links none.
    assert!(baton_runtime_host::plugin::builtin_names().is_empty());
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::load(&config(dir.path(), "[[plugin]]\nbuiltin = \"cpu\"\n")).unwrap();
    let e = Engine::new(cfg).unwrap();
    assert!(e.backends.is_empty());
    let err = e.failed[0].error.to_string();
    assert!(
        err.contains("builtin:cpu") && err.contains("cargo feature"),
        "{err}"
    );
}

#[test]
fn probe_verdicts_are_cached_and_keyed_by_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &cpu_plugin_config(0));
    let first = Engine::new(Config::load(&path).unwrap()).unwrap();
    assert!(!first.backends[0].verdict.from_cache);
    assert!(first.backends[0].verdict.passed);
    let second = Engine::new(Config::load(&path).unwrap()).unwrap();
    assert!(second.backends[0].verdict.from_cache);
    assert_eq!(
        second.backends[0].verdict.detail,
        first.backends[0].verdict.detail
    );
    // Another plugin file is another key: it is probed, not read from the cache.
    let both = format!("{}{}", cpu_plugin_config(0), faulty_config("none", 1));
    std::fs::write(
        &path,
        format!(
            "cache_dir = {:?}\n{both}",
            dir.path().join("cache").display().to_string()
        ),
    )
    .unwrap();
    let third = Engine::new(Config::load(&path).unwrap()).unwrap();
    assert!(third.backends[0].verdict.from_cache);
    assert!(!third.backends[1].verdict.from_cache);
}

#[test]
fn a_cached_verdict_does_not_outlive_a_change_of_options() {
    // Warm the cache with an honest plugin, then change an option that makes it return NaN:
    // the verdict must be measured again (and fail), not read back from the cache.
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &faulty_config("none", 0));
    let honest = Engine::new(Config::load(&path).unwrap()).unwrap();
    assert!(
        honest.backends[0].verdict.passed,
        "{}",
        honest.backends[0].verdict.detail
    );
    let again = Engine::new(Config::load(&path).unwrap()).unwrap();
    assert!(again.backends[0].verdict.from_cache);
    std::fs::write(
        &path,
        format!(
            "cache_dir = {:?}\n{}",
            dir.path().join("cache").display().to_string(),
            faulty_config("nan-output", 0)
        ),
    )
    .unwrap();
    let lying = Engine::new(Config::load(&path).unwrap()).unwrap();
    let v = &lying.backends[0].verdict;
    assert!(!v.from_cache, "the verdict of other options was reused");
    assert!(
        !v.passed,
        "a plugin returning NaN passed its probe: {}",
        v.detail
    );
    assert_eq!(lying.usable().count(), 0);
}

#[test]
fn the_c_plugin_runs_through_the_host_path() {
    let dir = tempfile::tempdir().unwrap();
    let lib = c_plugin(dir.path(), &[], "libc_relu_add.so");
    let (_d, e) = engine(&format!("[[plugin]]\npath = {}\n", q(&lib)));
    let c = &e.backends[0];
    assert_eq!(c.ctx.lib.name, "c-relu-add");
    assert!(c.verdict.passed, "{}", c.verdict.detail);
    // Relu/Add go to the C plugin; the Conv it declines runs on the portable kernels.
    let (g, inputs) = relu_add_chain();
    let mut b = GraphBuilder::new("with_conv");
    let x = b.input_fixed("x", DType::F32, &[1, 1, 4, 4]);
    let w = b.constant_f32("w", &[1, 1, 3, 3], &[0.5; 9]);
    let conv = b
        .node(
            OpKind::Conv,
            &[x, w],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .unwrap();
    let r = b.node(OpKind::Relu, &[conv], &[]).unwrap();
    let a = b.node(OpKind::Add, &[r, r], &[]).unwrap();
    b.output(a);
    let g2 = b.finish().unwrap();
    let x2 = Tensor::from_f32(
        &[1, 1, 4, 4],
        &(0..16).map(|i| i as f32 - 8.0).collect::<Vec<_>>(),
    );

    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert_eq!(s.nodes_per_backend().get(c.name.as_str()), Some(&4));
    let got = s.run(&inputs).unwrap();
    assert_eq!(got[0].f32s(), reference_outputs(&g, &inputs)[0].f32s());

    let mut s2 = Session::new(&e, &g2, &BTreeMap::new()).unwrap();
    let conv_decision = &s2.plan.nodes[0];
    assert!(matches!(conv_decision.decision, Decision::Host));
    assert!(
        conv_decision.reasons.iter().any(|r| r.contains("Conv")),
        "{:?}",
        conv_decision.reasons
    );
    let got = s2.run(std::slice::from_ref(&x2)).unwrap();
    assert!(max_abs_diff(&got[0], &reference_outputs(&g2, &[x2])[0]) < 1e-5);
}

#[test]
fn abi_faults_are_refused_before_any_call_with_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = c_plugin(
        dir.path(),
        &["-DBATON_TEST_WRONG_MAJOR"],
        "libwrong_major.so",
    );
    match PluginLibrary::load(&wrong, None) {
        Err(e @ HostError::AbiMismatch { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("libwrong_major.so")
                    && m.contains("2.")
                    && m.contains(&format!(
                        "{}.{}",
                        baton_delegate_api::abi::ABI_MAJOR,
                        baton_delegate_api::abi::ABI_MINOR
                    )),
                "{m}"
            );
            assert!(m.contains("upgrade the host"), "the fix is named: {m}");
        }
        other => panic!("expected AbiMismatch, got {:?}", other.err()),
    }
    let short = c_plugin(dir.path(), &["-DBATON_TEST_SHORT_STRUCT"], "libshort.so");
    assert!(matches!(
        PluginLibrary::load(&short, None),
        Err(HostError::DescriptorTooShort { .. })
    ));
    let none = c_plugin(dir.path(), &["-DBATON_TEST_NO_ENTRY"], "libnoentry.so");
    match PluginLibrary::load(&none, None) {
        Err(e @ HostError::MissingEntry { .. }) => {
            assert!(e.to_string().contains("baton_delegate_entry"))
        }
        other => panic!("expected MissingEntry, got {:?}", other.err()),
    }
    let not_a_lib = dir.path().join("libjunk.so");
    std::fs::write(&not_a_lib, b"junk").unwrap();
    assert!(matches!(
        PluginLibrary::load(&not_a_lib, None),
        Err(HostError::PluginLoad { .. })
    ));
    // The engine keeps going without them.
    let (_d, e) = engine(&format!(
        "[[plugin]]\npath = {}\n{}",
        q(&wrong),
        cpu_plugin_config(1)
    ));
    assert_eq!(e.failed.len(), 1);
    assert!(e.backends[0].verdict.passed);
}

#[test]
fn init_failure_repartitions_to_the_next_backend() {
    let (_d, e) = engine(&format!(
        "{}{}",
        faulty_config("error-init-large", 0),
        cpu_plugin_config(1)
    ));
    assert!(
        e.backends[0].verdict.passed,
        "small probe graphs pass: {}",
        e.backends[0].verdict.detail
    );
    let (g, inputs) = relu_add_chain();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("faulty") && n.contains("re-partitioning")),
        "{:?}",
        s.notes
    );
    assert_eq!(s.nodes_per_backend().get("cpu"), Some(&4));
    assert_eq!(
        s.run(&inputs).unwrap()[0].f32s(),
        reference_outputs(&g, &inputs)[0].f32s()
    );
}

#[test]
fn init_failure_with_fail_rule_refuses_the_model() {
    let (_d, e) = engine(&format!(
        "{}[fallback]\non_init_error = \"fail\"\n",
        faulty_config("error-init-large", 0)
    ));
    let (g, _) = relu_add_chain();
    let err = Session::new(&e, &g, &BTreeMap::new())
        .err()
        .expect("must fail")
        .to_string();
    assert!(err.contains("faulty") && err.contains("init"), "{err}");
}

#[test]
fn execute_failure_falls_back_to_the_portable_kernels() {
    let (_d, e) = engine(&faulty_config("error-execute-large", 0));
    let (g, inputs) = relu_add_chain();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert_eq!(s.nodes_per_backend().get("faulty"), Some(&4));
    let got = s.run(&inputs).unwrap();
    assert_eq!(got[0].f32s(), reference_outputs(&g, &inputs)[0].f32s());
    assert_eq!(s.fallbacks, 1);
    // The nodes were run by the host, not by the plugin that failed.
    let per = s.nodes_per_backend();
    assert_eq!((per.get("host"), per.get("faulty")), (Some(&4), None));

    let (_d2, strict) = engine(&format!(
        "{}[fallback]\non_execute_error = \"fail\"\n",
        faulty_config("error-execute-large", 0)
    ));
    let mut s = Session::new(&strict, &g, &BTreeMap::new()).unwrap();
    let err = s.run(&inputs).unwrap_err().to_string();
    assert!(
        err.contains("faulty") && err.contains("deliberate execute error"),
        "{err}"
    );
}

/// f32 tensors with `f` applied to every value.
fn mapped(tensors: &[Tensor], f: impl Fn(f32) -> f32) -> Vec<Tensor> {
    let map = |t: &Tensor| {
        Tensor::from_f32(
            &t.shape,
            &t.f32s().iter().map(|&x| f(x)).collect::<Vec<_>>(),
        )
    };
    tensors.iter().map(map).collect()
}

/// Inputs only a delegate reads are lent to its views for the run instead of copied into
/// the arena: each run must see its own inputs (not the last run's, not the arena's
/// stale bytes), and an input that is not 64-byte aligned, which cannot be lent, is
/// copied. The fallback above checks the other edge: a failed partition's portable
/// kernels read the arena, so a lent input is copied there first.
#[test]
fn inputs_lent_to_a_delegate_are_the_run_s_own() {
    let (_d, e) = engine(&cpu_plugin_config(0));
    let (g, first) = relu_add_chain();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert_eq!(s.nodes_per_backend().get("cpu"), Some(&4));
    let second = mapped(&first, |x| 2.0 - 1.5 * x);
    for inputs in [&first, &second, &first, &second] {
        let got = s.run(inputs).unwrap();
        assert_eq!(got[0].f32s(), reference_outputs(&g, inputs)[0].f32s());
    }
    // The first inputs one byte past an alignment: copied (the views lent the second
    // ones last run must not still read them), and the results the same.
    let mut shifted: Vec<Vec<u8>> = first
        .iter()
        .map(|t| {
            let mut b = vec![0u8; t.bytes().len() + 1];
            b[1..].copy_from_slice(t.bytes());
            b
        })
        .collect();
    let views: Vec<_> = first
        .iter()
        .zip(&mut shifted)
        .map(|(t, b)| {
            let mut v = t.view();
            v.data = &b[1..];
            v
        })
        .collect();
    assert!(views
        .iter()
        .all(|v| !(v.data.as_ptr() as usize).is_multiple_of(64)));
    let mut got = Vec::new();
    s.run_views(&views, &mut |_, dtype, shape, bytes| {
        got.push(Tensor::from_bytes(dtype, shape, bytes));
        Ok(())
    })
    .unwrap();
    assert_eq!(got[0].f32s(), reference_outputs(&g, &first)[0].f32s());
    let again = s.run(&second).unwrap();
    assert_eq!(again[0].f32s(), reference_outputs(&g, &second)[0].f32s());
}

/// An output only a delegate writes is written by it into the `Tensor` the run returns:
/// each run's tensors are its own (a later run writes new ones, not those handed out
/// before), and the sink path that copies out of the arena still sees the values, as the
/// views are pointed back at the arena after every run. The fallback test checks the
/// other edge: a failed partition's portable kernels write the arena, and the output is
/// copied from there into the lent tensor.
#[test]
fn outputs_a_delegate_alone_writes_are_the_tensors_returned() {
    let (_d, e) = engine(&cpu_plugin_config(0));
    let (g, first) = relu_add_chain();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    let second = mapped(&first, |x| 0.5 - 3.0 * x);
    let (want1, want2) = (
        reference_outputs(&g, &first),
        reference_outputs(&g, &second),
    );
    assert_ne!(want1[0].f32s(), want2[0].f32s());
    let got1 = s.run(&first).unwrap();
    let got2 = s.run(&second).unwrap();
    assert_eq!(
        got1[0].f32s(),
        want1[0].f32s(),
        "the first run's output was overwritten"
    );
    assert_eq!(got2[0].f32s(), want2[0].f32s());
    let mut copied = Vec::new();
    s.run_views(
        &first.iter().map(Tensor::view).collect::<Vec<_>>(),
        &mut |_, dtype, shape, bytes| {
            copied.push(Tensor::from_bytes(dtype, shape, bytes));
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(copied[0].f32s(), want1[0].f32s());
    assert_eq!(
        got2[0].f32s(),
        want2[0].f32s(),
        "a later run wrote a tensor handed out"
    );
    let again = s.run(&second).unwrap();
    assert_eq!(again[0].f32s(), want2[0].f32s());
}

#[test]
fn a_plugin_that_lies_about_availability_is_skipped_by_its_probe() {
    let (_d, e) = engine(&format!(
        "{}{}",
        faulty_config("lie-available", 0),
        cpu_plugin_config(1)
    ));
    let liar = &e.backends[0];
    assert!(liar.verdict.claimed_available);
    assert!(!liar.verdict.passed);
    assert!(
        liar.verdict.detail.contains("expected"),
        "{}",
        liar.verdict.detail
    );
    let (g, inputs) = relu_add_chain();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("faulty skipped: probe failed")),
        "{:?}",
        s.notes
    );
    assert_eq!(s.nodes_per_backend().get("cpu"), Some(&4));
    assert_eq!(
        s.run(&inputs).unwrap()[0].f32s(),
        reference_outputs(&g, &inputs)[0].f32s()
    );
}

#[test]
fn panics_and_bad_outputs_in_plugins_are_contained() {
    let (_d, e) = engine(&faulty_config("panic-create", 0));
    assert!(
        e.failed[0].error.to_string().contains("panic in create"),
        "{}",
        e.failed[0].error
    );
    for (fault, fragment) in [
        ("panic-supports", "panic in supports"),
        ("panic-compile", "panic in compile"),
        ("panic-init", "panic in init"),
        ("panic-execute", "panic in execute"),
        ("wrong-shape", "shape"),
        ("nan-output", "NaN"),
    ] {
        let (_d, e) = engine(&faulty_config(fault, 0));
        let v = &e.backends[0].verdict;
        assert!(!v.passed, "{fault} passed its probe");
        assert!(v.detail.contains(fragment), "{fault}: {}", v.detail);
    }
}

#[test]
fn a_sha256_pin_that_does_not_match_is_refused() {
    let p = plugin("baton_backend_cpu");
    let (_d, e) = engine(&format!(
        "[[plugin]]\npath = {}\nsha256 = \"{}\"\n",
        q(&p),
        "0".repeat(64)
    ));
    assert!(matches!(e.failed[0].error, HostError::HashMismatch { .. }));
    let good = baton_runtime_host::plugin::sha256_hex(&std::fs::read(&p).unwrap());
    let (_d, e) = engine(&format!(
        "[[plugin]]\npath = {}\nsha256 = \"{good}\"\n",
        q(&p)
    ));
    assert!(e.failed.is_empty() && e.backends[0].verdict.passed);
}

#[test]
fn options_are_checked_against_the_plugin_schema() {
    let dir = tempfile::tempdir().unwrap();
    let p = q(&plugin("baton_backend_cpu"));
    for (opts, fragment) in [
        ("thread = 2", "'thread'"),
        ("threads = 0", "threads"),
        ("threads = \"many\"", "threads"),
    ] {
        let cfg = Config::load(&config(
            dir.path(),
            &format!("[[plugin]]\npath = {p}\noptions = {{ {opts} }}\n"),
        ))
        .unwrap();
        let err = Engine::new(cfg).err().expect("must be refused").to_string();
        assert!(err.contains(fragment), "{opts}: {err}");
    }
}

#[test]
fn pins_and_policy_reach_the_partitioner() {
    let (_d, e) = engine(&format!(
        "{}[policy]\npin = [{{ op = \"Softmax\", target = \"host\" }}]\n",
        cpu_plugin_config(0)
    ));
    let graph = sample::tinynet();
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let softmax = graph
        .nodes
        .iter()
        .position(|n| n.op == OpKind::Softmax)
        .unwrap();
    assert!(matches!(s.plan.nodes[softmax].decision, Decision::Host));
    assert_eq!(s.nodes_per_backend().get("host"), Some(&1));
    let got = s.run(&[sample::tinynet_input()]).unwrap();
    assert!(
        max_abs_diff(
            &got[0],
            &reference_outputs(&graph, &[sample::tinynet_input()])[0]
        ) < 1e-5
    );
}

#[test]
fn the_bundled_example_matches_its_generator() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tinynet");
    let (bytes, _) = baton_delegate_api::wire::encode(
        &sample::tinynet(),
        baton_delegate_api::wire::ConstMode::Inline,
    );
    assert!(
        std::fs::read(root.join("tinynet.btir")).unwrap() == bytes,
        "examples/tinynet/tinynet.btir is stale: run `cargo run -p baton-runtime-host --example make_tinynet`"
    );
    let input = baton_runtime_host::npy::read(&root.join("image.npy")).unwrap();
    assert_eq!(input.bytes(), sample::tinynet_input().bytes());
}

#[test]
fn a_graph_output_folded_to_a_constant_is_still_returned() {
    let mut b = GraphBuilder::new("folded_output");
    let x = b.input_fixed("x", DType::F32, &[2]);
    let a = b.constant_f32("a", &[2], &[1.0, 2.0]);
    let c = b.constant_f32("c", &[2], &[10.0, 20.0]);
    let k = b.node(OpKind::Add, &[a, c], &[]).unwrap();
    let y = b.node(OpKind::Add, &[x, k], &[]).unwrap();
    b.rename(k, "k");
    b.output(k);
    b.output(y);
    let mut g = b.finish().unwrap();
    assert_eq!(baton_runtime_host::fold::fold_constants(&mut g), 1);
    let e = Engine::new(Config::default()).unwrap();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    let out = s.run(&[Tensor::from_f32(&[2], &[0.5, 0.5])]).unwrap();
    assert_eq!(out[0].f32s(), &[11.0, 22.0]);
    assert_eq!(out[1].f32s(), &[11.5, 22.5]);
    assert_eq!(s.graph.tensors[s.graph.outputs[0]].name, "k");
}

/// `If(c, then: relu(x + k), else: x * k)` over a captured `x` [1, 4], then `+ 1`.
fn branching() -> Graph {
    let branch = |then: bool| {
        let mut b = GraphBuilder::new(if then { "then" } else { "else" });
        let x = b.input_fixed("x", DType::F32, &[1, 4]);
        let k = b.constant_f32("k", &[1, 4], &[1.0, -2.0, 3.0, -4.0]);
        let y = if then {
            let s = b.node(OpKind::Add, &[x, k], &[]).unwrap();
            b.node(OpKind::Relu, &[s], &[]).unwrap()
        } else {
            b.node(OpKind::Mul, &[x, k], &[]).unwrap()
        };
        b.output(y);
        Attr::Graph(Box::new(b.finish().unwrap()))
    };
    let mut b = GraphBuilder::new("branching");
    let c = b.input_fixed("c", DType::Bool, &[]);
    let x = b.input_fixed("x", DType::F32, &[1, 4]);
    let y = b
        .named_node(
            "choose",
            OpKind::If,
            &[c, x],
            &[
                ("then_branch", branch(true)),
                ("else_branch", branch(false)),
            ],
        )
        .unwrap();
    let one = b.constant_f32("one", &[1], &[1.0]);
    let z = b.node(OpKind::Add, &[y, one], &[]).unwrap();
    b.output(z);
    b.finish().unwrap()
}

#[test]
fn an_if_runs_its_branch_sessions_with_the_plugins_and_stays_on_the_host() {
    let (_d, e) = engine(&cpu_plugin_config(0));
    let graph = branching();
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let x = Tensor::from_f32(&[1, 4], &[0.5, 0.5, 0.5, 0.5]);
    let cond = |v: u8| Tensor::from_bytes(DType::Bool, &[], &[v]);
    let then = s.run(&[cond(1), x.clone()]).unwrap();
    assert_eq!(then[0].f32s(), &[2.5, 1.0, 4.5, 1.0]);
    let other = s.run(&[cond(0), x]).unwrap();
    assert_eq!(other[0].f32s(), &[1.5, 0.0, 2.5, -1.0]);
    // The If itself is on the host, with the reason; its branches went to the plugin.
    let if_node = s
        .graph
        .nodes
        .iter()
        .position(|n| n.name == "choose")
        .unwrap();
    assert_eq!(s.plan.nodes[if_node].decision, Decision::Host);
    assert!(s.plan.nodes[if_node].reasons[0].contains("control flow"));
    let branches = s.branches();
    assert_eq!(branches.len(), 2);
    for (label, b) in branches {
        let b = b.unwrap();
        assert!(b.nodes_per_backend().contains_key("cpu"), "{label}");
    }
    assert_eq!(s.nodes_per_backend()["cpu"], 1 + 2 + 1);
}

/// A profiled run shows the steps of the branch an If took under the If's own step, on
/// the run's clock and inside its span, with the plugin's events for the branch's nodes:
/// a model whose whole body sits in a branch (torch exports wrap some in one) otherwise
/// shows one opaque If.
#[test]
fn a_profiled_if_shows_the_steps_of_the_branch_it_took() {
    let (_d, e) = engine(&cpu_plugin_config(0));
    let graph = branching();
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let x = Tensor::from_f32(&[1, 4], &[0.5, 0.5, 0.5, 0.5]);
    let cond = |v: u8| Tensor::from_bytes(DType::Bool, &[], &[v]);
    s.run(&[cond(1), x.clone()]).unwrap();
    assert!(s.timeline().is_empty());
    s.set_profiling(true);
    for (v, label, op) in [(1, "then_branch", "Relu"), (0, "else_branch", "Mul")] {
        s.run(&[cond(v), x.clone()]).unwrap();
        let steps = s.timeline();
        let choose = steps
            .iter()
            .find(|t| t.name.contains("choose"))
            .expect("the If's step");
        assert_eq!(choose.kind, "If");
        assert_eq!(choose.children.len(), 1, "{choose:?}");
        let branch = &choose.children[0];
        assert_eq!(branch.name, format!("{label}: partition 0"));
        assert_eq!(
            (branch.kind.as_str(), branch.target.as_str()),
            ("partition", "cpu")
        );
        assert!(
            branch.start_ns >= choose.start_ns
                && branch.start_ns + branch.dur_ns <= choose.start_ns + choose.dur_ns,
            "{branch:?} outside {choose:?}"
        );
        assert!(
            branch.events.iter().any(|e| e.name.contains(op)),
            "{label}: no event for its {op}: {:?}",
            branch.events
        );
    }
    // Only the If holds steps inside it.
    assert!(s
        .timeline()
        .iter()
        .filter(|t| t.kind != "If")
        .all(|t| t.children.is_empty()));
}

#[test]
fn a_loop_runs_in_a_session_and_an_if_of_differing_branch_shapes_runs_in_stages() {
    // v <- v + k, three times.
    let mut body = GraphBuilder::new("body");
    body.input_fixed("i", DType::I64, &[]);
    let c = body.input_fixed("cond", DType::Bool, &[]);
    let v = body.input_fixed("v", DType::F32, &[2]);
    let k = body.constant_f32("k", &[2], &[1.0, 10.0]);
    let next = body.node(OpKind::Add, &[v, k], &[]).unwrap();
    body.output(c);
    body.output(next);
    let mut b = GraphBuilder::new("looping");
    let v0 = b.input_fixed("v0", DType::F32, &[2]);
    let m = b.constant_i64("m", &[], &[3]);
    let none = b.constant(
        "none",
        DType::Bool,
        &[0],
        baton_delegate_api::ir::TensorData::from_bytes(&[]),
    );
    let out = b
        .named_node(
            "loop",
            OpKind::Loop,
            &[m, none, v0],
            &[("body", Attr::Graph(Box::new(body.finish().unwrap())))],
        )
        .unwrap();
    b.output(out);
    let graph = b.finish().unwrap();
    let (_d, e) = engine(&cpu_plugin_config(0));
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    let got = s.run(&[Tensor::from_f32(&[2], &[0.5, 0.0])]).unwrap();
    assert_eq!(got[0].f32s(), &[3.5, 30.0]);

    // An If on an input whose branches give [2] and [3]: a dynamic region, run on the
    // host with the shape the branch taken gives.
    let branch = |n: usize| {
        let mut g = GraphBuilder::new("b");
        let x = g.input_fixed("x", DType::F32, &[1]);
        let t = g.constant_i64("t", &[1], &[n as i64]);
        let y = g.node(OpKind::Expand, &[x, t], &[]).unwrap();
        g.output(y);
        Attr::Graph(Box::new(g.finish().unwrap()))
    };
    let mut b = GraphBuilder::new("ragged");
    let c = b.input_fixed("c", DType::Bool, &[]);
    let x = b.input_fixed("x", DType::F32, &[1]);
    let y = b
        .named_node(
            "ragged",
            OpKind::If,
            &[c, x],
            &[("then_branch", branch(2)), ("else_branch", branch(3))],
        )
        .unwrap();
    b.output(y);
    let mut s = Session::new(&e, &b.finish().unwrap(), &BTreeMap::new()).unwrap();
    assert_eq!(s.stages().len(), 1);
    let x = Tensor::from_f32(&[1], &[1.5]);
    for (cond, n) in [(true, 2), (false, 3)] {
        let c = Tensor::from_bytes(DType::Bool, &[], &[u8::from(cond)]);
        let got = s.run(&[c, x.clone()]).unwrap();
        assert_eq!(got[0].f32s(), vec![1.5; n]);
    }
}

#[test]
fn a_plugin_built_against_abi_1_0_still_runs_and_reports_no_profile() {
    let dir = tempfile::tempdir().unwrap();
    let lib = c_plugin(dir.path(), &["-DBATON_TEST_V1_0"], "libv1_0.so");
    let (_d, e) = engine(&format!("[[plugin]]\npath = {}\n", q(&lib)));
    let c = &e.backends[0];
    assert_eq!(c.ctx.lib.abi_minor, 0);
    assert!(c.verdict.passed, "{}", c.verdict.detail);
    let (g, inputs) = relu_add_chain();
    let mut s = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    s.set_profiling(true);
    let got = s.run(&inputs).unwrap();
    assert_eq!(got[0].f32s(), reference_outputs(&g, &inputs)[0].f32s());
    let profile = s.profile();
    assert_eq!(profile.len(), 1);
    assert!(profile[0].events.is_empty(), "{profile:?}");
}

#[test]
fn profiling_is_off_unless_asked_and_a_1_1_plugin_without_events_reports_none() {
    let (_d, e) = engine(&cpu_plugin_config(0));
    let graph = sample::tinynet();
    let inputs = vec![sample::tinynet_input()];
    let mut s = Session::new(&e, &graph, &BTreeMap::new()).unwrap();
    s.run(&inputs).unwrap();
    assert!(s.profile().is_empty());
    assert!(s.timeline().is_empty());
    s.set_profiling(true);
    s.run(&inputs).unwrap();
    // The CPU plugin reports one timed event per step it ran, named after its node.
    let profile = s.profile();
    assert!(!profile.is_empty());
    let events: Vec<_> = profile.iter().flat_map(|p| &p.events).collect();
    assert!(!events.is_empty(), "{profile:?}");
    assert!(
        events.iter().map(|e| e.wall_ns).sum::<u64>() > 0,
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e.name.contains("stem")),
        "no event names the stem conv: {events:?}"
    );
    // The host times every step itself, whatever the plugin reports.
    assert_eq!(s.timeline().len(), profile.len());

    // The faulty plugin has the 1.1 entry point (the SDK provides it) but reports nothing.
    let (_d2, e2) = engine(&faulty_config("none", 0));
    let (g, inputs) = relu_add_chain();
    let mut s = Session::new(&e2, &g, &BTreeMap::new()).unwrap();
    s.set_profiling(true);
    s.run(&inputs).unwrap();
    assert!(!s.profile().is_empty());
    assert!(s.profile().iter().all(|p| p.events.is_empty()));
}

#[test]
fn the_mixed_example_matches_its_generator_and_is_really_quantized() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mixed");
    let graph = sample::mixed();
    let (bytes, _) =
        baton_delegate_api::wire::encode(&graph, baton_delegate_api::wire::ConstMode::Inline);
    assert!(
        std::fs::read(root.join("mixed.btir")).unwrap() == bytes,
        "examples/mixed/mixed.btir is stale: run `cargo run -p baton-runtime-host --example make_mixed`"
    );
    let count = |op: OpKind| graph.nodes.iter().filter(|n| n.op == op).count();
    assert_eq!(count(OpKind::Conv), 3);
    assert_eq!(count(OpKind::QuantizeLinear), 4);
    // Input, three weights, three biases, three activations.
    assert_eq!(count(OpKind::DequantizeLinear), 10);
    // A distribution, not saturated garbage from a mis-scaled quantization.
    let got = reference_outputs(&graph, &[sample::mixed_input()]);
    let p = got[0].f32s();
    assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    assert!(p.iter().all(|v| v.is_finite() && *v > 0.0));
    assert!(p.iter().cloned().fold(0f32, f32::max) < 0.9);
}
