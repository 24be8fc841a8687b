//! ONNX import of old opsets (1 to 10) and of the ops rewritten into IR ops (Sum, LRN,
//! Upsample, PRelu, Elu, Selu, Softplus, Max, Min, InstanceNormalization, Dropout's
//! mask, Softmax flattened to 2-D, OptionalHasElement and OptionalGetElement): each model
//! is built from the protobuf messages, imported and run on the reference, against
//! answers worked out here.

use baton_delegate_api::{DType, Tensor};
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
        .map(|&v| Dimension {
            value: Some(dimension::Value::DimValue(v)),
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

fn attr(name: &str, kind: AttributeType, fill: impl FnOnce(&mut AttributeProto)) -> AttributeProto {
    let mut a = AttributeProto {
        name: name.into(),
        r#type: kind as i32,
        ..Default::default()
    };
    fill(&mut a);
    a
}

fn int(name: &str, v: i64) -> AttributeProto {
    attr(name, AttributeType::Int, |a| a.i = v)
}

fn float(name: &str, v: f32) -> AttributeProto {
    attr(name, AttributeType::Float, |a| a.f = v)
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    attr(name, AttributeType::Ints, |a| a.ints = v.to_vec())
}

fn string(name: &str, v: &str) -> AttributeProto {
    attr(name, AttributeType::String, |a| a.s = v.as_bytes().to_vec())
}

/// A one-node model: `inputs` are graph inputs (name, type, dims), `outputs` likewise.
fn one_node(
    opset: i64,
    op: &str,
    inputs: &[(&str, DataType, &[i64])],
    outputs: &[(&str, DataType, &[i64])],
    attrs: Vec<AttributeProto>,
) -> ModelProto {
    let node = NodeProto {
        op_type: op.into(),
        name: format!("{op}_node"),
        input: inputs.iter().map(|i| i.0.to_string()).collect(),
        output: outputs.iter().map(|o| o.0.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    };
    ModelProto {
        ir_version: 3,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(GraphProto {
            name: op.to_lowercase(),
            node: vec![node],
            input: inputs.iter().map(|i| value(i.0, i.1, i.2)).collect(),
            output: outputs.iter().map(|o| value(o.0, o.1, o.2)).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(model: &ModelProto, inputs: &[Tensor]) -> Vec<Tensor> {
    let graph = import(model, None).unwrap();
    reference::run_graph(&graph, inputs).unwrap()
}

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

const F: DataType = DataType::Float;

#[test]
fn opset_6_binary_ops_broadcast_b_from_axis() {
    // A [2, 3, 2] + B [3] with axis 1: B runs along the middle dimension.
    let m = one_node(
        6,
        "Add",
        &[("a", F, &[2, 3, 2]), ("b", F, &[3])],
        &[("y", F, &[2, 3, 2])],
        vec![int("broadcast", 1), int("axis", 1)],
    );
    let y = run(
        &m,
        &[
            Tensor::from_f32(&[2, 3, 2], &[0.0; 12]),
            Tensor::from_f32(&[3], &[1.0, 2.0, 3.0]),
        ],
    );
    assert_eq!(
        y[0].f32s(),
        &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    );
    // Without `axis` the suffixes line up, as numpy does.
    let m = one_node(
        6,
        "Mul",
        &[("a", F, &[2, 2]), ("b", F, &[2])],
        &[("y", F, &[2, 2])],
        vec![int("broadcast", 1), ints("consumed_inputs", &[0, 0])],
    );
    let y = run(
        &m,
        &[
            Tensor::from_f32(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            Tensor::from_f32(&[2], &[10.0, 100.0]),
        ],
    );
    assert_eq!(y[0].f32s(), &[10.0, 200.0, 30.0, 400.0]);
}

#[test]
fn opset_1_not_and_opset_5_cast_by_type_name() {
    let m = one_node(
        1,
        "Not",
        &[("x", DataType::Bool, &[3])],
        &[("y", DataType::Bool, &[3])],
        vec![],
    );
    let y = run(&m, &[Tensor::from_bytes(DType::Bool, &[3], &[1, 0, 1])]);
    assert_eq!(y[0].bytes(), &[0, 1, 0]);

    let m = one_node(
        5,
        "Cast",
        &[("x", F, &[2])],
        &[("y", DataType::Int32, &[2])],
        vec![string("to", "INT32")],
    );
    let y = run(&m, &[Tensor::from_f32(&[2], &[3.7, -2.2])]);
    assert_eq!(y[0].values::<i32>(), &[3, -2]);
}

#[test]
fn opset_2_pad_value_attribute_fills_and_opset_1_paddings_is_pads() {
    let m = one_node(
        2,
        "Pad",
        &[("x", F, &[2])],
        &[("y", F, &[4])],
        vec![ints("pads", &[1, 1]), float("value", 7.5)],
    );
    let y = run(&m, &[Tensor::from_f32(&[2], &[1.0, 2.0])]);
    assert_eq!(y[0].f32s(), &[7.5, 1.0, 2.0, 7.5]);

    let m = one_node(
        1,
        "Pad",
        &[("x", F, &[2])],
        &[("y", F, &[3])],
        vec![ints("paddings", &[0, 1]), string("mode", "edge")],
    );
    let y = run(&m, &[Tensor::from_f32(&[2], &[1.0, 2.0])]);
    assert_eq!(y[0].f32s(), &[1.0, 2.0, 2.0]);
}

#[test]
fn opset_6_batch_norm_in_training_mode_is_an_error_naming_the_attribute() {
    let inputs: Vec<(&str, DataType, &[i64])> = vec![
        ("x", F, &[1, 1, 2]),
        ("s", F, &[1]),
        ("b", F, &[1]),
        ("m", F, &[1]),
        ("v", F, &[1]),
    ];
    let ok = one_node(
        6,
        "BatchNormalization",
        &inputs,
        &[("y", F, &[1, 1, 2])],
        vec![int("is_test", 1), float("momentum", 0.9), int("spatial", 1)],
    );
    let one = |v: f32| Tensor::from_f32(&[1], &[v]);
    let y = run(
        &ok,
        &[
            Tensor::from_f32(&[1, 1, 2], &[1.0, 3.0]),
            one(2.0),
            one(0.5),
            one(1.0),
            one(4.0 - 1e-5),
        ],
    );
    // (x - 1) / sqrt(4) * 2 + 0.5
    assert_eq!(y[0].f32s(), &[0.5, 2.5]);

    let training = one_node(
        6,
        "BatchNormalization",
        &inputs,
        &[("y", F, &[1, 1, 2])],
        vec![],
    );
    let e = import(&training, None).unwrap_err().to_string();
    assert!(
        e.contains("BatchNormalization_node") && e.contains("opset 6") && e.contains("is_test"),
        "{e}"
    );
}

#[test]
fn softmax_before_opset_13_flattens_to_2d_at_axis() {
    // Axis 0 of [2, 2]: one row of four, so the whole tensor sums to 1.
    let m = one_node(
        11,
        "Softmax",
        &[("x", F, &[2, 2])],
        &[("y", F, &[2, 2])],
        vec![int("axis", 0)],
    );
    let y = run(&m, &[Tensor::from_f32(&[2, 2], &[0.0; 4])]);
    assert_eq!(y[0].shape, vec![2, 2]);
    assert_eq!(y[0].f32s(), &[0.25; 4]);
    // The default axis 1 of a rank-3 input: each of the 2 rows spans 2 * 2 elements.
    let m = one_node(
        6,
        "LogSoftmax",
        &[("x", F, &[2, 2, 2])],
        &[("y", F, &[2, 2, 2])],
        vec![],
    );
    let y = run(&m, &[Tensor::from_f32(&[2, 2, 2], &seq(8))]);
    let row_sum: f64 = y[0].f32s()[4..].iter().map(|&v| (v as f64).exp()).sum();
    assert!((row_sum - 1.0).abs() < 1e-6, "{row_sum}");
}

#[test]
fn sum_is_a_chain_of_adds() {
    let m = one_node(
        8,
        "Sum",
        &[("a", F, &[2]), ("b", F, &[1]), ("c", F, &[2])],
        &[("y", F, &[2])],
        vec![],
    );
    let y = run(
        &m,
        &[
            Tensor::from_f32(&[2], &[1.0, 2.0]),
            Tensor::from_f32(&[1], &[10.0]),
            Tensor::from_f32(&[2], &[100.0, 200.0]),
        ],
    );
    assert_eq!(y[0].f32s(), &[111.0, 212.0]);
}

#[test]
fn lrn_matches_the_formula_over_channel_windows() {
    let (alpha, beta, bias, size) = (0.5f32, 0.75f32, 2.0f32, 3usize);
    let m = one_node(
        9,
        "LRN",
        &[("x", F, &[1, 4, 1, 2])],
        &[("y", F, &[1, 4, 1, 2])],
        vec![
            float("alpha", alpha),
            float("beta", beta),
            float("bias", bias),
            int("size", size as i64),
        ],
    );
    let x: Vec<f32> = (0..8).map(|i| i as f32 * 0.5 - 1.0).collect();
    let y = run(&m, &[Tensor::from_f32(&[1, 4, 1, 2], &x)]);
    for c in 0..4usize {
        for p in 0..2 {
            // Window [c - 1, c + 1], clipped to the channels.
            let sq: f64 = (c.saturating_sub(1)..(c + 2).min(4))
                .map(|k| (x[k * 2 + p] as f64).powi(2))
                .sum();
            let want = x[c * 2 + p] as f64
                / (bias as f64 + alpha as f64 / size as f64 * sq).powf(beta as f64);
            let got = y[0].f32s()[c * 2 + p] as f64;
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "c{c} p{p}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn upsample_is_nearest_resize_with_floor_and_dropout_mask_is_all_true() {
    let m = one_node(
        7,
        "Upsample",
        &[("x", F, &[1, 1, 1, 2])],
        &[("y", F, &[1, 1, 2, 4])],
        vec![attr("scales", AttributeType::Floats, |a| {
            a.floats = vec![1.0, 1.0, 2.0, 2.0]
        })],
    );
    let y = run(&m, &[Tensor::from_f32(&[1, 1, 1, 2], &[1.0, 2.0])]);
    assert_eq!(y[0].f32s(), &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);

    let m = one_node(
        12,
        "Dropout",
        &[("x", F, &[3])],
        &[("y", F, &[3]), ("mask", DataType::Bool, &[3])],
        vec![],
    );
    let y = run(&m, &[Tensor::from_f32(&[3], &[1.0, -2.0, 3.0])]);
    assert_eq!(y[0].f32s(), &[1.0, -2.0, 3.0]);
    assert_eq!(y[1].dtype, DType::Bool);
    assert_eq!(y[1].bytes(), &[1, 1, 1]);
    // A training_mode that is not a constant false drops at random: refused.
    let m = one_node(
        13,
        "Dropout",
        &[("x", F, &[3]), ("r", F, &[]), ("t", DataType::Bool, &[])],
        &[("y", F, &[3])],
        vec![],
    );
    let e = import(&m, None).unwrap_err().to_string();
    assert!(
        e.contains("Dropout_node") && e.contains("training mode"),
        "{e}"
    );
}

#[test]
fn activations_without_an_ir_op_match_their_formulas() {
    let x = [-2.0f32, -0.5, 0.0, 1.5];
    let unary = |op: &str, opset: i64, attrs: Vec<AttributeProto>| {
        let m = one_node(opset, op, &[("x", F, &[4])], &[("y", F, &[4])], attrs);
        run(&m, &[Tensor::from_f32(&[4], &x)])[0].f32s().to_vec()
    };
    let close = |got: &[f32], want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            assert!(
                (*g as f64 - w).abs() <= 1e-6 * w.abs().max(1.0),
                "{got:?} vs {want:?}"
            );
        }
    };
    let elu = |v: f64, a: f64| if v > 0.0 { v } else { a * (v.exp() - 1.0) };
    let want: Vec<f64> = x.iter().map(|&v| elu(v as f64, 2.0)).collect();
    close(&unary("Elu", 6, vec![float("alpha", 2.0)]), &want);
    let (a, g) = (1.673_263_242_354_377_3, 1.050_700_987_355_480_5);
    let want: Vec<f64> = x.iter().map(|&v| g * elu(v as f64, a)).collect();
    close(&unary("Selu", 6, vec![]), &want);
    let want: Vec<f64> = x.iter().map(|&v| (1.0 + (v as f64).exp()).ln()).collect();
    close(&unary("Softplus", 6, vec![]), &want);
    // Softplus of a large input stays finite (no exp overflow).
    let m = one_node(6, "Softplus", &[("x", F, &[1])], &[("y", F, &[1])], vec![]);
    assert_eq!(
        run(&m, &[Tensor::from_f32(&[1], &[200.0])])[0].f32s(),
        &[200.0]
    );
}

#[test]
fn prelu_max_min_and_instance_norm_are_rewritten_exactly() {
    // Opset 6 PRelu with one slope per channel of X [1, 2, 2].
    let m = one_node(
        6,
        "PRelu",
        &[("x", F, &[1, 2, 2]), ("s", F, &[2])],
        &[("y", F, &[1, 2, 2])],
        vec![],
    );
    let y = run(
        &m,
        &[
            Tensor::from_f32(&[1, 2, 2], &[-1.0, 2.0, -3.0, 4.0]),
            Tensor::from_f32(&[2], &[0.5, 0.25]),
        ],
    );
    assert_eq!(y[0].f32s(), &[-0.5, 2.0, -0.75, 4.0]);
    let three = [("a", F, &[3][..]), ("b", F, &[3][..]), ("c", F, &[1][..])];
    let operands = [
        Tensor::from_f32(&[3], &[1.0, 5.0, -2.0]),
        Tensor::from_f32(&[3], &[4.0, 0.0, -3.0]),
        Tensor::from_f32(&[1], &[2.0]),
    ];
    let y = run(
        &one_node(8, "Max", &three, &[("y", F, &[3])], vec![]),
        &operands,
    );
    assert_eq!(y[0].f32s(), &[4.0, 5.0, 2.0]);
    let y = run(
        &one_node(8, "Min", &three, &[("y", F, &[3])], vec![]),
        &operands,
    );
    assert_eq!(y[0].f32s(), &[1.0, 0.0, -3.0]);
    // InstanceNormalization of X [1, 2, 2]: channel 0 holds 1, 3 (mean 2, variance 1),
    // channel 1 holds 2, 6 (mean 4, variance 4).
    let m = one_node(
        6,
        "InstanceNormalization",
        &[("x", F, &[1, 2, 2]), ("s", F, &[2]), ("b", F, &[2])],
        &[("y", F, &[1, 2, 2])],
        vec![float("epsilon", 0.0)],
    );
    let y = run(
        &m,
        &[
            Tensor::from_f32(&[1, 2, 2], &[1.0, 3.0, 2.0, 6.0]),
            Tensor::from_f32(&[2], &[1.0, 3.0]),
            Tensor::from_f32(&[2], &[0.0, 10.0]),
        ],
    );
    assert_eq!(y[0].f32s(), &[-1.0, 1.0, 7.0, 13.0]);
}

#[test]
fn opsets_outside_1_to_27_are_refused() {
    let m = one_node(28, "Relu", &[("x", F, &[1])], &[("y", F, &[1])], vec![]);
    let e = import(&m, None).unwrap_err().to_string();
    assert!(e.contains("opset 28") && e.contains("1 to 27"), "{e}");
    let m = one_node(0, "Relu", &[("x", F, &[1])], &[("y", F, &[1])], vec![]);
    let e = import(&m, None).unwrap_err().to_string();
    assert!(e.contains("opset 0") && e.contains("1 to 27"), "{e}");
}

#[test]
fn optional_ops_on_a_tensor_or_an_absent_operand() {
    // OptionalGetElement of a tensor is the tensor.
    let m = one_node(
        18,
        "OptionalGetElement",
        &[("x", F, &[3])],
        &[("y", F, &[3])],
        vec![],
    );
    let y = run(&m, &[Tensor::from_f32(&[3], &[1.0, -2.0, 3.5])]);
    assert_eq!(y[0].f32s(), &[1.0, -2.0, 3.5]);
    // OptionalHasElement: true for a tensor, false for an operand left out.
    let m = one_node(
        18,
        "OptionalHasElement",
        &[("x", F, &[2])],
        &[("y", DataType::Bool, &[])],
        vec![],
    );
    let y = run(&m, &[Tensor::from_f32(&[2], &[0.0, 0.0])]);
    assert_eq!((y[0].dtype, y[0].bytes()), (DType::Bool, &[1u8][..]));
    let mut m = one_node(
        18,
        "OptionalHasElement",
        &[],
        &[("y", DataType::Bool, &[])],
        vec![],
    );
    m.graph.as_mut().unwrap().node[0].input = vec![String::new()];
    let y = run(&m, &[]);
    assert_eq!((y[0].dtype, y[0].bytes()), (DType::Bool, &[0u8][..]));
    // Getting the element of nothing is refused, naming the node; so is opset 14.
    let m = one_node(18, "OptionalGetElement", &[], &[("y", F, &[1])], vec![]);
    let e = import(&m, None).unwrap_err().to_string();
    assert!(
        e.contains("OptionalGetElement_node") && e.contains("empty optional"),
        "{e}"
    );
    let m = one_node(
        14,
        "OptionalHasElement",
        &[],
        &[("y", DataType::Bool, &[])],
        vec![],
    );
    let e = import(&m, None).unwrap_err().to_string();
    assert!(e.contains("opset 15"), "{e}");
}
