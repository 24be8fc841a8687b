//! An ONNX model whose shapes depend on values: `coords = NonZero(x)` for `x` `[16, 16]`
//! (256 elements, too many for a value input: the count is data), and
//! `y = 2 * Gather(flatten(x), NonZero(flatten(x))[0])`, the non-zero values in order.
//! Shared by the host's and the CLI's tests of dynamic regions.

use std::path::Path;

use baton_onnx::proto::attribute_proto::AttributeType;
use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use baton_onnx::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use prost::Message;

/// Extent of each of `x`'s two axes.
pub const SIDE: usize = 16;

fn value(name: &str, elem: DataType, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .enumerate()
        .map(|(k, d)| Dimension {
            value: Some(match d {
                Some(v) => dimension::Value::DimValue(*v),
                None => dimension::Value::DimParam(format!("{name}_n{k}")),
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

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{}_node", outputs[0]),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn i64_tensor(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Int64 as i32,
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

/// Writes the model to `path` (opset 13).
pub fn write(path: &Path) {
    let axis = |v: i64| AttributeProto {
        name: "axis".into(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    };
    let two = TensorProto {
        name: "two".into(),
        data_type: DataType::Float as i32,
        float_data: vec![2.0],
        ..Default::default()
    };
    let g = GraphProto {
        name: "nonzero".into(),
        node: vec![
            node("NonZero", &["x"], &["coords"], vec![]),
            node("Reshape", &["x", "flat_shape"], &["flat"], vec![]),
            node("NonZero", &["flat"], &["flat_nz"], vec![]),
            node("Squeeze", &["flat_nz", "zero_axis"], &["positions"], vec![]),
            node("Gather", &["flat", "positions"], &["picked"], vec![axis(0)]),
            node("Mul", &["picked", "two"], &["y"], vec![]),
        ],
        initializer: vec![
            i64_tensor("flat_shape", &[1], &[-1]),
            i64_tensor("zero_axis", &[1], &[0]),
            two,
        ],
        input: vec![value(
            "x",
            DataType::Float,
            &[Some(SIDE as i64), Some(SIDE as i64)],
        )],
        output: vec![
            value("coords", DataType::Int64, &[Some(2), None]),
            value("y", DataType::Float, &[None]),
        ],
        ..Default::default()
    };
    save(path, g);
}

/// Writes `coords = NonZero(x > 0)` for `x` `[x_n0, SIDE]`, its rows a symbolic dim (opset
/// 13): the importer composes NonZero from the input's run-time shape.
pub fn write_symbolic_rows(path: &Path) {
    let zero = TensorProto {
        name: "zero".into(),
        data_type: DataType::Float as i32,
        float_data: vec![0.0],
        ..Default::default()
    };
    let g = GraphProto {
        name: "nonzero_rows".into(),
        node: vec![
            node("Greater", &["x", "zero"], &["positive"], vec![]),
            node("NonZero", &["positive"], &["coords"], vec![]),
        ],
        initializer: vec![zero],
        input: vec![value("x", DataType::Float, &[None, Some(SIDE as i64)])],
        output: vec![value("coords", DataType::Int64, &[Some(2), None])],
        ..Default::default()
    };
    save(path, g);
}

/// Writes `g` as an opset-13 model.
fn save(path: &Path, g: GraphProto) {
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(g),
        ..Default::default()
    };
    std::fs::write(path, model.encode_to_vec()).expect("write the model");
}

/// `x` with a non-zero at every `stride`-th position (from `offset`), the value its
/// position plus 0.5 (negative every third one), zero elsewhere.
pub fn input(stride: usize, offset: usize) -> Vec<f32> {
    (0..SIDE * SIDE)
        .map(|i| {
            if i >= offset && (i - offset).is_multiple_of(stride) {
                let v = i as f32 + 0.5;
                if i % 3 == 0 {
                    -v
                } else {
                    v
                }
            } else {
                0.0
            }
        })
        .collect()
}

/// What the model of [`write_symbolic_rows`] gives for `x` (`[rows, SIDE]`): the
/// coordinates `[2, n]` of its positive elements.
pub fn positive_coords(x: &[f32]) -> Vec<i64> {
    let hits: Vec<usize> = (0..x.len()).filter(|&i| x[i] > 0.0).collect();
    let mut coords: Vec<i64> = hits.iter().map(|&i| (i / SIDE) as i64).collect();
    coords.extend(hits.iter().map(|&i| (i % SIDE) as i64));
    coords
}

/// What the model gives for `x`, computed here: the coordinates `[2, n]` and the doubled
/// non-zero values.
pub fn expected(x: &[f32]) -> (Vec<i64>, Vec<f32>) {
    let nz: Vec<usize> = (0..x.len()).filter(|&i| x[i] != 0.0).collect();
    let mut coords: Vec<i64> = nz.iter().map(|&i| (i / SIDE) as i64).collect();
    coords.extend(nz.iter().map(|&i| (i % SIDE) as i64));
    (coords, nz.iter().map(|&i| 2.0 * x[i]).collect())
}
