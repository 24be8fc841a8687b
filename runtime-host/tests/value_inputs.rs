//! Value inputs: a model whose shape-determining operand (a ReduceSum's axes, a Reshape's
//! shape) is a graph input, written as an `.onnx` file and loaded as a user's model is.
//! The session is specialised for the values given, one session per set of values.

use std::collections::BTreeMap;
use std::path::Path;

use baton_delegate_api::{DType, Graph, Tensor};
use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use baton_onnx::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use baton_runtime_host::error::InputProblem;
use baton_runtime_host::{inputs, model, program, HostError, Session, SpecializingSession};
use prost::Message;

mod common;

/// A tensor type; `None` dims are symbolic, named `{name}_len`.
fn value(name: &str, elem: DataType, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => dimension::Value::DimValue(*v),
                None => dimension::Value::DimParam(format!("{name}_len")),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem as i32,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = ReduceSum(x [2,3,4], axes [n], keepdims=1)`, then `z = Reshape(y, shape [2])`:
/// two value inputs, `axes` and `shape`, written to `dir/reduce.onnx`.
fn write_model(dir: &Path) -> std::path::PathBuf {
    let keepdims = AttributeProto {
        name: "keepdims".into(),
        r#type: 2, // INT
        i: 1,
        ..Default::default()
    };
    let node = |op: &str, inputs: &[&str], out: &str, attrs: Vec<AttributeProto>| NodeProto {
        op_type: op.into(),
        name: format!("{op}_0"),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        attribute: attrs,
        ..Default::default()
    };
    let graph = GraphProto {
        name: "value_inputs".into(),
        node: vec![
            node("ReduceSum", &["x", "axes"], "y", vec![keepdims]),
            node("Reshape", &["y", "shape"], "z", vec![]),
        ],
        input: vec![
            value("x", DataType::Float, &[Some(2), Some(3), Some(4)]),
            value("axes", DataType::Int64, &[None]),
            value("shape", DataType::Int64, &[Some(2)]),
        ],
        output: vec![value("z", DataType::Float, &[None, None])],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 18,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    let path = dir.join("reduce.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn x() -> Tensor {
    let v: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
    Tensor::from_f32(&[2, 3, 4], &v)
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_i64(&[v.len()], v)
}

/// ReduceSum of `x()` over `axes` with keepdims, computed here: `(shape, values)`.
fn expected_sum(axes: &[usize]) -> (Vec<usize>, Vec<f32>) {
    let x = x();
    let v = x.f32s();
    let dims = [2usize, 3, 4];
    let mut out_dims = dims;
    for &a in axes {
        out_dims[a] = 1;
    }
    let mut out = vec![0.0f32; out_dims.iter().product()];
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                let mut o = [i, j, k];
                for &a in axes {
                    o[a] = 0;
                }
                let at = (o[0] * out_dims[1] + o[1]) * out_dims[2] + o[2];
                out[at] += v[(i * 3 + j) * 4 + k];
            }
        }
    }
    (out_dims.to_vec(), out)
}

fn load() -> (tempfile::TempDir, Graph) {
    let dir = tempfile::tempdir().unwrap();
    let graph = model::load(&write_model(dir.path())).unwrap();
    (dir, graph)
}

#[test]
fn the_value_inputs_are_found_from_the_graph() {
    let (_dir, graph) = load();
    assert_eq!(
        baton_reference::values::value_input_names(&graph),
        ["axes", "shape"]
    );
}

#[test]
fn two_axes_values_give_two_specialisations_both_correct() {
    let (_dir, graph) = load();
    for with_cpu in [false, true] {
        let engine = common::plugin_engine(with_cpu);
        let mut s = SpecializingSession::new(&engine, &graph);
        let cases: [(&[i64], &[usize], [i64; 2]); 3] = [
            (&[1], &[1], [2, 4]),
            (&[0, -1], &[0, 2], [3, 1]),
            (&[1], &[1], [4, 2]),
        ];
        for (axes, norm, shape) in cases {
            let out = s.run(&[x(), i64s(axes), i64s(&shape)]).unwrap();
            let (_, want) = expected_sum(norm);
            assert_eq!(out[0].shape, [shape[0] as usize, shape[1] as usize]);
            assert_eq!(out[0].f32s(), want, "axes {axes:?}");
        }
        // The first and third runs differ in `shape`'s values: three keys.
        assert_eq!(s.specializations(), 3);
        s.run(&[x(), i64s(&[0, -1]), i64s(&[3, 1])]).unwrap();
        assert_eq!(
            s.specializations(),
            3,
            "a key seen before is served from the cache"
        );
    }
}

#[test]
fn a_session_refuses_values_other_than_its_own() {
    let (_dir, graph) = load();
    let engine = common::plugin_engine(false);
    let given = [x(), i64s(&[1]), i64s(&[2, 4])];
    let mut s = Session::with_values(
        &engine,
        &graph,
        &inputs::bindings(&graph, &given),
        &inputs::values(&graph, &given),
    )
    .unwrap();
    assert_eq!(s.run(&given).unwrap()[0].f32s(), expected_sum(&[1]).1);
    let other = [x(), i64s(&[2]), i64s(&[2, 4])];
    // Same shapes, other values: refused, not run with the shapes of axis 1.
    match s.run(&other) {
        Err(HostError::Input {
            name,
            problem: InputProblem::ValueChanged { expected, got },
        }) => {
            assert_eq!(name, "axes");
            assert_eq!((expected.as_str(), got.as_str()), ("[1]", "[2]"));
        }
        other => panic!("expected ValueChanged, got {other:?}"),
    }
}

#[test]
fn a_missing_value_names_the_input() {
    let (_dir, graph) = load();
    let engine = common::plugin_engine(false);
    let bindings = BTreeMap::from([("axes_len".to_string(), 1)]);
    let err = Session::new(&engine, &graph, &bindings).err().unwrap();
    let msg = err.to_string();
    assert!(
        matches!(&err, HostError::Input { name, problem: InputProblem::MissingValue { .. } } if name == "axes"),
        "{msg}"
    );
    assert!(msg.contains("input 'axes'"), "{msg}");
}

#[test]
fn a_value_input_too_large_is_refused_by_name() {
    let (_dir, graph) = load();
    let engine = common::plugin_engine(false);
    let axes = i64s(&[0; 65]);
    let given = [x(), axes, i64s(&[2, 4])];
    let err = Session::with_values(
        &engine,
        &graph,
        &inputs::bindings(&graph, &given),
        &inputs::values(&graph, &given),
    )
    .err()
    .unwrap();
    assert!(
        matches!(&err, HostError::Input { name, problem: InputProblem::ValueTooLarge { elements: 65, max: 64 } } if name == "axes"),
        "{err}"
    );
}

#[test]
fn a_program_keeps_its_value_inputs_for_run_time() {
    let (_dir, graph) = load();
    let engine = common::plugin_engine(false);
    let bindings = BTreeMap::from([("axes_len".to_string(), 1)]);
    let compiled = program::compile(&engine, &graph, &bindings, &BTreeMap::new()).unwrap();
    assert!(compiled.partitions.is_empty() && compiled.memory.is_none());
    let bytes = program::encode(&compiled);
    let back = program::decode(std::sync::Arc::new(bytes), true).unwrap();
    assert_eq!(
        baton_reference::values::value_input_names(&back.graph),
        ["axes", "shape"]
    );
    let mut s = SpecializingSession::new(&engine, &back.graph);
    let out = s.run(&[x(), i64s(&[2]), i64s(&[6, 1])]).unwrap();
    assert_eq!(out[0].f32s(), expected_sum(&[2]).1);
    // Loading it as a specialised program is refused, naming the input.
    let err = program::load(&engine, back, &program::LoadOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("input 'axes'"), "{err}");
    assert_eq!(DType::I64, graph.tensors[graph.inputs[1]].dtype);
}

/// `y = op(Reshape(x [24], shape [3]))` at opset 11 (Softmax with axis 1): the op's input
/// has a rank known only once `shape`'s values are.
fn write_reshape_then(dir: &Path, op: &str) -> std::path::PathBuf {
    let attrs = match op {
        "Softmax" => vec![AttributeProto {
            name: "axis".into(),
            r#type: 2, // INT
            i: 1,
            ..Default::default()
        }],
        _ => vec![],
    };
    let node = |op: &str, inputs: &[&str], out: &str, attrs: Vec<AttributeProto>| NodeProto {
        op_type: op.into(),
        name: format!("{op}_0"),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        attribute: attrs,
        ..Default::default()
    };
    let graph = GraphProto {
        name: "softmax_unknown_rank".into(),
        node: vec![
            node("Reshape", &["x", "shape"], "r", vec![]),
            node(op, &["r"], "y", attrs),
        ],
        input: vec![
            value("x", DataType::Float, &[Some(24)]),
            value("shape", DataType::Int64, &[Some(3)]),
        ],
        output: vec![value("y", DataType::Float, &[None, None, None])],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: 6,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 11,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    let path = dir.join(format!("{op}.onnx"));
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
fn a_legacy_softmax_on_an_input_of_unknown_rank_is_specialised_per_shape() {
    let dir = tempfile::tempdir().unwrap();
    // Opset 11 flattens the Softmax's input to 2-D at axis 1.
    let graph = model::load(&write_reshape_then(dir.path(), "Softmax")).unwrap();
    let engine = common::plugin_engine(false);
    let mut s = SpecializingSession::new(&engine, &graph);
    let v: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
    for shape in [[2i64, 3, 4], [4, 6, 1]] {
        let out = s.run(&[Tensor::from_f32(&[24], &v), i64s(&shape)]).unwrap();
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        assert_eq!(out[0].shape, dims);
        // Opset 11: the softmax runs over each row of the [shape[0], 24 / shape[0]] view.
        let row = 24 / dims[0];
        let got = out[0].f32s();
        for r in 0..dims[0] {
            let xs = &v[r * row..(r + 1) * row];
            let max = xs.iter().cloned().fold(f32::MIN, f32::max);
            let sum: f32 = xs.iter().map(|&x| (x - max).exp()).sum();
            for (k, &x) in xs.iter().enumerate() {
                let want = (x - max).exp() / sum;
                assert!((got[r * row + k] - want).abs() < 1e-6, "shape {shape:?}");
            }
        }
    }
    assert_eq!(s.specializations(), 2);
}

#[test]
fn a_bounded_session_refuses_a_model_with_value_inputs_by_name() {
    let (_dir, graph) = load();
    let engine = common::plugin_engine(false);
    let bounds = BTreeMap::from([("axes_len".to_string(), 3)]);
    let err = baton_runtime_host::BoundedSession::new(&engine, &graph, &bounds)
        .err()
        .unwrap();
    assert!(
        matches!(&err, HostError::Input { name, problem: InputProblem::ValueInputBounded } if name == "axes"),
        "{err}"
    );
}

#[test]
fn an_elementwise_rewrite_on_an_input_of_unknown_rank_imports_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let graph = model::load(&write_reshape_then(dir.path(), "Elu")).unwrap();
    let engine = common::plugin_engine(false);
    let mut s = SpecializingSession::new(&engine, &graph);
    let v: Vec<f32> = (0..24).map(|i| i as f32 * 0.25 - 3.0).collect();
    let out = s
        .run(&[Tensor::from_f32(&[24], &v), i64s(&[2, 3, 4])])
        .unwrap();
    assert_eq!(out[0].shape, [2, 3, 4]);
    for (&got, &x) in out[0].f32s().iter().zip(&v) {
        let want = if x > 0.0 { x } else { x.exp() - 1.0 };
        assert!(
            (got - want).abs() < 1e-6,
            "elu({x}) = {got}, expected {want}"
        );
    }
}
