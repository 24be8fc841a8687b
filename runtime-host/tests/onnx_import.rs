//! ONNX import on models built in the test from the protobuf messages: opset adaptation,
//! constants, omitted operands, folding, and the errors for what the IR cannot hold.

use baton_delegate_api::{Attr, Dim, OpKind, Storage, Tensor};
use baton_onnx::import;
use baton_onnx::proto::attribute_proto::AttributeType;
use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use baton_onnx::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use baton_reference as reference;
use baton_runtime_host::fold;

fn value(name: &str, elem: DataType, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => dimension::Value::DimValue(*v),
                None => dimension::Value::DimParam("batch".into()),
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

fn f32_tensor(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        float_data: v.to_vec(),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{op}_node"),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn model(opset: i64, graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

#[test]
fn clip_bounds_given_as_constant_inputs_become_attributes() {
    let g = GraphProto {
        name: "clip".into(),
        node: vec![node("Clip", &["x", "lo", "hi"], &["y"], vec![])],
        initializer: vec![f32_tensor("lo", &[], &[0.0]), f32_tensor("hi", &[], &[6.0])],
        input: vec![value("x", DataType::Float, &[Some(4)])],
        output: vec![value("y", DataType::Float, &[Some(4)])],
        ..Default::default()
    };
    let graph = import(&model(13, g), None).unwrap();
    let clip = &graph.nodes[0];
    assert_eq!(clip.op, OpKind::Clip);
    assert_eq!(clip.inputs.len(), 1);
    assert_eq!(clip.attrs.get("max"), Some(&Attr::Float(6.0)));
    let out = reference::run_graph(
        &graph,
        &[Tensor::from_f32(&[4], &[-1.0, 3.0, 7.0, f32::NAN])],
    )
    .unwrap();
    let v = out[0].f32s();
    assert_eq!(&v[..3], &[0.0, 3.0, 6.0]);
    assert!(v[3].is_nan());
}

#[test]
fn initializers_listed_as_inputs_and_constant_nodes_are_constants() {
    let constant = node(
        "Constant",
        &[],
        &["c"],
        vec![AttributeProto {
            name: "value".into(),
            t: Some(f32_tensor("", &[2], &[10.0, 20.0])),
            r#type: AttributeType::Tensor as i32,
            ..Default::default()
        }],
    );
    let g = GraphProto {
        name: "consts".into(),
        node: vec![
            constant,
            node("Add", &["x", "w"], &["s"], vec![]),
            node("Add", &["s", "c"], &["y"], vec![]),
        ],
        initializer: vec![f32_tensor("w", &[2], &[1.0, 2.0])],
        // IR version 3 style: the initializer is also a graph input.
        input: vec![
            value("x", DataType::Float, &[None, Some(2)]),
            value("w", DataType::Float, &[Some(2)]),
        ],
        output: vec![value("y", DataType::Float, &[None, Some(2)])],
        ..Default::default()
    };
    let graph = import(&model(9, g), None).unwrap();
    assert_eq!(graph.inputs.len(), 1, "only x is a run-time input");
    assert_eq!(
        graph.tensors[graph.inputs[0]].shape,
        vec![Dim::Sym("batch".into()), Dim::Fixed(2)]
    );
    let c = graph.tensor_by_name("c").unwrap();
    assert!(matches!(graph.tensors[c].data, Some(Storage::Inline(_))));
    let out = reference::run_graph(&graph, &[Tensor::from_f32(&[3, 2], &[0.0; 6])]).unwrap();
    assert_eq!(out[0].f32s(), &[11.0, 22.0, 11.0, 22.0, 11.0, 22.0]);
}

#[test]
fn what_the_ir_cannot_hold_is_an_error_naming_node_op_and_opset() {
    let unknown = GraphProto {
        name: "u".into(),
        node: vec![node("Frobnicate", &["x"], &["y"], vec![])],
        input: vec![value("x", DataType::Float, &[Some(1)])],
        output: vec![value("y", DataType::Float, &[Some(1)])],
        ..Default::default()
    };
    let e = import(&model(17, unknown), None).unwrap_err().to_string();
    assert!(
        e.contains("Frobnicate_node")
            && e.contains("opset 17")
            && e.contains("not in the Baton IR"),
        "{e}"
    );

    let with_subgraph = GraphProto {
        name: "if".into(),
        node: vec![node(
            "Relu",
            &["x"],
            &["y"],
            vec![AttributeProto {
                name: "then_branch".into(),
                g: Some(GraphProto::default()),
                r#type: AttributeType::Graph as i32,
                ..Default::default()
            }],
        )],
        input: vec![value("x", DataType::Float, &[Some(1)])],
        output: vec![value("y", DataType::Float, &[Some(1)])],
        ..Default::default()
    };
    let e = import(&model(17, with_subgraph), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("then_branch") && e.contains("subgraph"), "{e}");

    let string = GraphProto {
        name: "s".into(),
        input: vec![value("x", DataType::String, &[Some(1)])],
        ..Default::default()
    };
    let e = import(&model(17, string), None).unwrap_err().to_string();
    assert!(e.contains("STRING") && e.contains("'x'"), "{e}");

    let future = GraphProto::default();
    let e = import(&model(28, future), None).unwrap_err().to_string();
    assert!(e.contains("opset 28"), "{e}");
}

#[test]
fn dropout_is_the_identity_and_folding_removes_constant_subgraphs() {
    let g = GraphProto {
        name: "f".into(),
        node: vec![
            node("Add", &["a", "b"], &["ab"], vec![]),
            node("Dropout", &["x"], &["xd"], vec![]),
            node("Add", &["xd", "ab"], &["y"], vec![]),
        ],
        initializer: vec![
            f32_tensor("a", &[2], &[1.0, 2.0]),
            f32_tensor("b", &[2], &[3.0, 4.0]),
        ],
        input: vec![value("x", DataType::Float, &[Some(2)])],
        output: vec![value("y", DataType::Float, &[Some(2)])],
        ..Default::default()
    };
    let mut graph = import(&model(13, g), None).unwrap();
    assert_eq!(graph.nodes[1].op, OpKind::Identity);
    assert_eq!(
        fold::fold_constants(&mut graph),
        1,
        "a + b is computed at load"
    );
    assert_eq!(graph.nodes.len(), 2);
    let ab = graph.tensor_by_name("ab").unwrap();
    assert!(
        graph.tensors[ab].is_const(),
        "the folded value is a constant"
    );
}

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        g: Some(g),
        r#type: AttributeType::Graph as i32,
        ..Default::default()
    }
}

/// A branch with no inputs (as ONNX writes them) computing `node` into its one output.
fn branch(name: &str, nodes: Vec<NodeProto>, out: &str) -> GraphProto {
    GraphProto {
        name: name.into(),
        node: nodes,
        output: vec![value(out, DataType::Float, &[Some(2)])],
        ..Default::default()
    }
}

#[test]
fn subgraphs_are_closed_outer_values_become_inputs_and_constants_are_copied() {
    // y = Relu(x); z = If(c, then: x + k, else: If(c2, then: x * y, else: -y)).
    let inner = node(
        "If",
        &["c2"],
        &["w"],
        vec![
            graph_attr(
                "then_branch",
                branch("mul", vec![node("Mul", &["x", "y"], &["m"], vec![])], "m"),
            ),
            graph_attr(
                "else_branch",
                branch("neg", vec![node("Neg", &["y"], &["n"], vec![])], "n"),
            ),
        ],
    );
    let outer_if = node(
        "If",
        &["c"],
        &["z"],
        vec![
            graph_attr(
                "then_branch",
                branch("add", vec![node("Add", &["x", "k"], &["s"], vec![])], "s"),
            ),
            graph_attr("else_branch", branch("nested", vec![inner], "w")),
        ],
    );
    let g = GraphProto {
        name: "control".into(),
        node: vec![node("Relu", &["x"], &["y"], vec![]), outer_if],
        initializer: vec![f32_tensor("k", &[2], &[10.0, 20.0])],
        input: vec![
            value("x", DataType::Float, &[Some(2)]),
            value("c", DataType::Bool, &[]),
            value("c2", DataType::Bool, &[]),
        ],
        output: vec![value("z", DataType::Float, &[Some(2)])],
        ..Default::default()
    };
    let graph = import(&model(13, g), None).unwrap();
    let node_if = &graph.nodes[1];
    assert_eq!(node_if.op, OpKind::If);
    let names: Vec<&str> = node_if
        .inputs
        .iter()
        .map(|&t| graph.tensors[t].name.as_str())
        .collect();
    // The condition, then every captured value once; `k` is a constant, so it is copied
    // into the branch instead.
    assert_eq!(names, ["c", "x", "c2", "y"]);
    let then = node_if.attr_graph("then_branch").unwrap();
    let other = node_if.attr_graph("else_branch").unwrap();
    assert_eq!(then.inputs.len(), 3);
    assert_eq!(other.inputs.len(), 3);
    let k = then.tensor_by_name("k").unwrap();
    assert!(then.tensors[k].is_const() && !then.inputs.contains(&k));
    // The nested If captured x and y from the else branch, which captured them from the
    // top level.
    assert_eq!(other.nodes[0].inputs.len(), 3);
    assert_eq!(graph.tensors[node_if.outputs[0]].shape, vec![Dim::Fixed(2)]);

    let x = Tensor::from_f32(&[2], &[-1.0, 3.0]);
    let b = |v: bool| Tensor::from_bytes(baton_delegate_api::DType::Bool, &[], &[v as u8]);
    let run = |c, c2| {
        let out = reference::run_graph(&graph, &[x.clone(), b(c), b(c2)]).unwrap();
        out[0].f32s().to_vec()
    };
    assert_eq!(run(true, false), [9.0, 23.0]);
    assert_eq!(run(false, true), [-0.0, 9.0]);
    assert_eq!(run(false, false), [-0.0, -3.0]);
    // The serialized form keeps the subgraphs.
    let (bytes, _) =
        baton_delegate_api::wire::encode(&graph, baton_delegate_api::wire::ConstMode::Inline);
    assert_eq!(baton_delegate_api::wire::decode(&bytes).unwrap(), graph);
}
