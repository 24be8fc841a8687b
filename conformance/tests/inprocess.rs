//! The in-process core (`runner::exec`) against the faulty plugin, with a small test
//! oracle that computes Relu, Sigmoid and same-shape Add: pass, mismatch (NaN outputs and
//! a plugin that claims availability but computes wrong numbers), unsupported, the
//! pass-partial rule of model cases, and reference failures. Independent of the
//! host's reference kernels.

mod common;

use baton_conformance::runner::exec::{run_graph_case, Harness, Oracle};
use baton_conformance::{Case, CaseBody, CaseResult, Class, Tolerances};
use baton_delegate_api::{DType, Graph, GraphBuilder, OpKind, Tensor};
use baton_runtime_host::plugin::PluginLibrary;

/// Relu, Sigmoid and same-shape Add in f32.
struct TestOracle;

impl Oracle for TestOracle {
    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let mut values: Vec<Option<Vec<f32>>> = vec![None; graph.tensors.len()];
        for (&t, v) in graph.inputs.iter().zip(inputs) {
            values[t] = Some(v.f32s().to_vec());
        }
        for n in &graph.nodes {
            let a = values[n.inputs[0]].clone().ok_or("missing input")?;
            let out: Vec<f32> = match n.op {
                OpKind::Relu => a.iter().map(|&x| if x < 0.0 { 0.0 } else { x }).collect(),
                OpKind::Sigmoid => a.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect(),
                OpKind::Add => {
                    let b = values[n.inputs[1]].as_ref().ok_or("missing input")?;
                    a.iter().zip(b).map(|(x, y)| x + y).collect()
                }
                op => return Err(format!("test oracle has no {op}")),
            };
            values[n.outputs[0]] = Some(out);
        }
        Ok(graph
            .outputs
            .iter()
            .map(|&o| {
                let shape = graph.tensors[o].static_shape().unwrap();
                Tensor::from_f32(&shape, values[o].as_ref().unwrap())
            })
            .collect())
    }
}

struct PanickingOracle;

impl Oracle for PanickingOracle {
    fn run(&self, _: &Graph, _: &[Tensor]) -> Result<Vec<Tensor>, String> {
        panic!("reference kernel bug")
    }
}

fn run(fault: &str, case: &Case, oracle: &dyn Oracle) -> CaseResult {
    let lib = PluginLibrary::load(&common::faulty_plugin(), None).expect("plugin loads");
    let ctx = lib
        .create(&[("fault".to_string(), fault.to_string())])
        .expect("context");
    let tolerances = Tolerances::builtin().unwrap();
    run_graph_case(
        &Harness {
            ctx: &ctx,
            device: 0,
            tolerances: &tolerances,
            oracle,
        },
        case,
    )
}

fn catalogue_case(id: &str) -> Case {
    common::cases_by_id(&[id]).pop().unwrap()
}

/// x → Relu → Sigmoid → Add(y): the faulty plugin takes Relu and Add, declines Sigmoid.
fn mixed_model() -> Case {
    let mut b = GraphBuilder::new("mixed");
    let x = b.input_fixed("x", DType::F32, &[3, 5]);
    let y = b.input_fixed("y", DType::F32, &[3, 5]);
    let r = b.node(OpKind::Relu, &[x], &[]).unwrap();
    let s = b.node(OpKind::Sigmoid, &[r], &[]).unwrap();
    let a = b.node(OpKind::Add, &[s, y], &[]).unwrap();
    b.output(a);
    let vals: Vec<f32> = (0..15).map(|i| i as f32 * 0.3 - 2.0).collect();
    Case {
        id: "Model/f32/test_mixed".into(),
        op: "Model".into(),
        dtype: Some(DType::F32),
        body: CaseBody::Model {
            graph: b.finish().unwrap(),
            inputs: vec![
                Tensor::from_f32(&[3, 5], &vals),
                Tensor::from_f32(&[3, 5], &vals),
            ],
        },
    }
}

#[test]
fn an_honest_plugin_passes() {
    for id in [
        "Relu/f32/33",
        "Relu/f32/specials",
        "Relu/f32/negzero",
        "Add/f32/same_13",
        "Model/f32/relu_add_chain",
    ] {
        let r = run("none", &catalogue_case(id), &TestOracle);
        assert_eq!(r.result, Class::Pass, "{r:?}");
        assert_eq!(r.max_abs_err, Some(0.0), "{r:?}");
    }
}

#[test]
fn nan_outputs_are_a_mismatch() {
    let r = run("nan-output", &catalogue_case("Relu/f32/33"), &TestOracle);
    assert_eq!(r.result, Class::Mismatch, "{r:?}");
    assert_eq!(r.got.as_deref(), Some("NaN"));
    assert!(r.worst_index.is_some());
    assert!(
        r.message.contains("33 of 33 elements outside tolerance"),
        "{}",
        r.message
    );
}

#[test]
fn a_plugin_that_lies_about_its_numbers_is_a_mismatch() {
    let r = run(
        "lie-available",
        &catalogue_case("Add/f32/same_33"),
        &TestOracle,
    );
    assert_eq!(r.result, Class::Mismatch, "{r:?}");
    let err = r.max_abs_err.unwrap();
    assert!((err - 1.0).abs() < 1e-5, "{r:?}");
    let (got, exp): (f64, f64) = (
        r.got.unwrap().parse().unwrap(),
        r.expected.unwrap().parse().unwrap(),
    );
    assert!((got - exp - 1.0).abs() < 1e-5);
    let m = run(
        "lie-available",
        &catalogue_case("Model/f32/relu_add_chain"),
        &TestOracle,
    );
    assert_eq!(m.result, Class::Mismatch, "{m:?}");
}

#[test]
fn declined_single_nodes_are_unsupported() {
    let r = run("none", &catalogue_case("Conv/f32/2d_basic"), &TestOracle);
    assert_eq!(r.result, Class::Unsupported, "{r:?}");
    assert!(r.message.contains("declined (op)"), "{}", r.message);
    let r = run("none", &catalogue_case("Add/i32/same_33"), &TestOracle);
    assert_eq!(r.result, Class::Unsupported, "{r:?}");
    assert!(r.message.contains("declined (dtype)"), "{}", r.message);
    let r = run(
        "none",
        &catalogue_case("Model/f32/transpose_reshape_concat_chain"),
        &TestOracle,
    );
    assert_eq!(r.result, Class::Unsupported, "{r:?}");
    assert_eq!(r.delegated_nodes, Some(0));
}

#[test]
fn a_partly_delegated_model_passes_partial_when_every_taken_node_matches() {
    let r = run("none", &mixed_model(), &TestOracle);
    assert_eq!(r.result, Class::PassPartial, "{r:?}");
    assert_eq!((r.delegated_nodes, r.total_nodes), (Some(2), Some(3)));
    assert!(r.message.contains("Sigmoid"), "{}", r.message);
}

#[test]
fn a_partly_delegated_model_reports_the_first_failing_node() {
    let r = run("lie-available", &mixed_model(), &TestOracle);
    assert_eq!(r.result, Class::Mismatch, "{r:?}");
    assert_eq!(r.failing_node.as_deref(), Some("relu_0 (Relu)"));
    let r = run("error-execute", &mixed_model(), &TestOracle);
    assert_eq!(r.result, Class::ExecFail, "{r:?}");
    assert_eq!(r.failing_node.as_deref(), Some("relu_0 (Relu)"));
}

#[test]
fn a_failing_reference_is_reported_as_such() {
    let r = run("none", &catalogue_case("Relu/f32/7"), &PanickingOracle);
    assert_eq!(r.result, Class::ReferenceFail, "{r:?}");
    assert!(r.message.contains("reference kernel bug"), "{}", r.message);
}

/// A plugin that claims only whole groups (the NPU simulator: a QDQ MatMul with its
/// DequantizeLinears and QuantizeLinear, not the float Add after it) is judged on the
/// partition a host hands it. Run node by node, as the kit once did, its first
/// DequantizeLinear alone was a compile failure that no host would ever cause.
#[test]
fn a_partly_delegated_model_runs_its_partitions_as_a_host_forms_them() {
    use baton_conformance::runner::exec::Reference;
    let lib =
        PluginLibrary::load(&common::cdylib("baton_backend_npu_sim"), None).expect("plugin loads");
    let ctx = lib.create(&[]).expect("context");
    let tolerances = Tolerances::builtin().unwrap();
    let r = run_graph_case(
        &Harness {
            ctx: &ctx,
            device: 0,
            tolerances: &tolerances,
            oracle: &Reference,
        },
        &catalogue_case("Quantized/i8/MatMul_2x3x32_32x24_qdq_bias_add"),
    );
    assert_eq!(r.result, Class::PassPartial, "{r:?}");
    assert_eq!((r.delegated_nodes, r.total_nodes), (Some(4), Some(8)));
    assert!(r.message.contains("matmul_2"), "{}", r.message);
}
