//! Scan imported as a Loop, on models built here from the protobuf messages: scan axes and
//! directions of the inputs and outputs, outer values read by the body (through a nested
//! If too), and opset 8's batch axis with `sequence_lens`. Expected values are worked out
//! by hand in the comments.

use baton_delegate_api::{DType, OpKind, Tensor};
use baton_onnx::import;
use baton_onnx::proto::attribute_proto::AttributeType;
use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use baton_onnx::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use baton_reference as reference;

fn value(name: &str, elem: DataType, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(dimension::Value::DimValue(d)),
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

/// A subgraph input or output that leaves its type to inference.
fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{}_{op}", outputs[0]),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: AttributeType::Ints as i32,
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: v,
        r#type: AttributeType::Int as i32,
        ..Default::default()
    }
}

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        g: Some(g),
        r#type: AttributeType::Graph as i32,
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

/// Opset 16: state `s` (f32 [2]), scan inputs `x` [3, 2] along axis 0 forwards and `y`
/// [2, 3] along axis -1 backwards. The body computes `p = x_t * y_t`, `s' = s + p` and
/// scan outputs `o1 = If(c, s' + k, s' - k)` (appended along axis 0; `k` and `c` are
/// outer inputs, read through the nested If) and `o2 = p` (prepended, along axis -1).
fn axes_and_directions() -> GraphProto {
    let then = GraphProto {
        name: "plus_k".into(),
        node: vec![node("Add", &["s_next", "k"], &["plus"], vec![])],
        output: vec![untyped("plus")],
        ..Default::default()
    };
    let other = GraphProto {
        name: "minus_k".into(),
        node: vec![node("Sub", &["s_next", "k"], &["minus"], vec![])],
        output: vec![untyped("minus")],
        ..Default::default()
    };
    let body = GraphProto {
        name: "step".into(),
        node: vec![
            node("Mul", &["x_t", "y_t"], &["p"], vec![]),
            node("Add", &["s", "p"], &["s_next"], vec![]),
            node(
                "If",
                &["c"],
                &["o1"],
                vec![
                    graph_attr("then_branch", then),
                    graph_attr("else_branch", other),
                ],
            ),
        ],
        input: vec![
            value("s", DataType::Float, &[2]),
            untyped("x_t"),
            untyped("y_t"),
        ],
        output: vec![untyped("s_next"), untyped("o1"), untyped("p")],
        ..Default::default()
    };
    let scan = node(
        "Scan",
        &["s0", "x", "y"],
        &["s_final", "out1", "out2"],
        vec![
            graph_attr("body", body),
            int("num_scan_inputs", 2),
            ints("scan_input_axes", &[0, -1]),
            ints("scan_input_directions", &[0, 1]),
            ints("scan_output_axes", &[0, -1]),
            ints("scan_output_directions", &[0, 1]),
        ],
    );
    GraphProto {
        name: "scan".into(),
        node: vec![scan],
        input: vec![
            value("s0", DataType::Float, &[2]),
            value("x", DataType::Float, &[3, 2]),
            value("y", DataType::Float, &[2, 3]),
            value("k", DataType::Float, &[2]),
            value("c", DataType::Bool, &[]),
        ],
        output: vec![
            value("s_final", DataType::Float, &[2]),
            value("out1", DataType::Float, &[3, 2]),
            value("out2", DataType::Float, &[2, 3]),
        ],
        ..Default::default()
    }
}

#[test]
fn scan_axes_directions_and_outer_values() {
    let graph = import(&model(16, axes_and_directions()), None).unwrap();
    assert!(graph.nodes.iter().any(|n| n.op == OpKind::Loop));
    assert!(!graph.nodes.iter().any(|n| n.op.name() == "Scan"));
    let x = Tensor::from_f32(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = Tensor::from_f32(&[2, 3], &[1.0, 0.0, 2.0, 0.0, 1.0, 1.0]);
    let k = Tensor::from_f32(&[2], &[10.0, 100.0]);
    let s0 = Tensor::from_f32(&[2], &[0.0, 0.0]);
    let run = |c: bool| {
        let c = Tensor::from_bytes(DType::Bool, &[], &[u8::from(c)]);
        let inputs = [s0.clone(), x.clone(), y.clone(), k.clone(), c];
        reference::run_graph(&graph, &inputs).unwrap()
    };
    // y backwards along its last axis gives columns 2, 1, 0: [2, 1], [0, 1], [1, 0].
    // t = 0: p = [1, 2] * [2, 1] = [2, 2], s = [2, 2]
    // t = 1: p = [3, 4] * [0, 1] = [0, 4], s = [2, 6]
    // t = 2: p = [5, 6] * [1, 0] = [5, 0], s = [7, 6]
    let out = run(true);
    assert_eq!(out[0].shape, [2]);
    assert_eq!(out[0].f32s(), [7.0, 6.0]);
    // o1 = s + k, appended along axis 0.
    assert_eq!(out[1].shape, [3, 2]);
    assert_eq!(out[1].f32s(), [12.0, 102.0, 12.0, 106.0, 17.0, 106.0]);
    // o2 prepended: [p2, p1, p0] = [[5, 0], [0, 4], [2, 2]], moved to the last axis.
    assert_eq!(out[2].shape, [2, 3]);
    assert_eq!(out[2].f32s(), [5.0, 0.0, 2.0, 0.0, 4.0, 2.0]);
    // The else branch: o1 = s - k.
    let out = run(false);
    assert_eq!(out[1].f32s(), [-8.0, -98.0, -8.0, -94.0, -3.0, -94.0]);
    assert_eq!(out[0].f32s(), [7.0, 6.0]);
}

/// Opset 8: batch 2, state `s0` [2, 1], scan input `x` [2, 3, 1] scanned backwards, body
/// `s' = s + x_t` with scan output `s'`; `lens` the optional sequence_lens.
fn batched(with_lens: bool) -> GraphProto {
    let body = GraphProto {
        name: "accumulate".into(),
        node: vec![
            node("Add", &["s", "x_t"], &["s_next"], vec![]),
            node("Identity", &["s_next"], &["o"], vec![]),
        ],
        input: vec![
            value("s", DataType::Float, &[1]),
            value("x_t", DataType::Float, &[1]),
        ],
        output: vec![
            value("s_next", DataType::Float, &[1]),
            value("o", DataType::Float, &[1]),
        ],
        ..Default::default()
    };
    let lens = if with_lens { "lens" } else { "" };
    let scan = node(
        "Scan",
        &[lens, "s0", "x"],
        &["s_final", "out"],
        vec![
            graph_attr("body", body),
            int("num_scan_inputs", 1),
            ints("directions", &[1]),
        ],
    );
    let mut input = vec![
        value("s0", DataType::Float, &[2, 1]),
        value("x", DataType::Float, &[2, 3, 1]),
    ];
    if with_lens {
        input.push(value("lens", DataType::Int64, &[2]));
    }
    GraphProto {
        name: "scan8".into(),
        node: vec![scan],
        input,
        output: vec![
            value("s_final", DataType::Float, &[2, 1]),
            value("out", DataType::Float, &[2, 3, 1]),
        ],
        ..Default::default()
    }
}

#[test]
fn opset_8_scans_each_batch_element_and_honours_sequence_lens() {
    let s0 = Tensor::from_f32(&[2, 1], &[0.0, 100.0]);
    let x = Tensor::from_f32(&[2, 3, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    // Without sequence_lens: batch 0 adds 3, 2, 1 to 0; batch 1 adds 6, 5, 4 to 100.
    let graph = import(&model(8, batched(false)), None).unwrap();
    let out = reference::run_graph(&graph, &[s0.clone(), x.clone()]).unwrap();
    assert_eq!(out[0].shape, [2, 1]);
    assert_eq!(out[0].f32s(), [6.0, 115.0]);
    assert_eq!(out[1].shape, [2, 3, 1]);
    assert_eq!(out[1].f32s(), [3.0, 5.0, 6.0, 106.0, 111.0, 115.0]);

    // Lengths 3 and 2: batch 1 reads positions 1, 0 (5, then 4) and its state stays at
    // 109 after that; its third scan output is padding, which ONNX leaves undefined.
    let graph = import(&model(8, batched(true)), None).unwrap();
    let lens = Tensor::from_i64(&[2], &[3, 2]);
    let out = reference::run_graph(&graph, &[s0, x, lens]).unwrap();
    assert_eq!(out[0].f32s(), [6.0, 109.0]);
    assert_eq!(out[1].shape, [2, 3, 1]);
    assert_eq!(out[1].f32s()[..5], [3.0, 5.0, 6.0, 105.0, 109.0]);
}

#[test]
fn scan_errors_name_the_node() {
    // num_scan_inputs larger than the inputs the node passes.
    let mut g = axes_and_directions();
    g.node[0].attribute[1] = int("num_scan_inputs", 4);
    let e = import(&model(16, g), None).unwrap_err().to_string();
    assert!(
        e.contains("s_final_Scan") && e.contains("num_scan_inputs"),
        "{e}"
    );
    // A direction that is neither 0 nor 1.
    let mut g = axes_and_directions();
    g.node[0].attribute[3] = ints("scan_input_directions", &[0, 2]);
    let e = import(&model(16, g), None).unwrap_err().to_string();
    assert!(e.contains("scan_input_directions holds 2"), "{e}");
    // Output axes that do not match the scan outputs in number.
    let mut g = axes_and_directions();
    g.node[0].attribute[4] = ints("scan_output_axes", &[0]);
    let e = import(&model(16, g), None).unwrap_err().to_string();
    assert!(
        e.contains("scan_output_axes has 1 entries for 2 values"),
        "{e}"
    );
}
