//! Sizes from models, inputs and bindings are checked before anything is allocated: each
//! too-large or overflowing size is an error naming the tensor (or node, or plugin file),
//! never an allocator abort, a `capacity overflow` panic or a size that wrapped to zero.
//! The models are built here from the protobuf messages, small on disk however large the
//! tensors they describe.

use std::collections::BTreeMap;
use std::path::Path;

use baton_onnx::proto::attribute_proto::AttributeType;
use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use baton_onnx::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use baton_runtime_host::{model, Config, Engine, HostError, Session};
use prost::Message;

/// A value declaration; `None` dims are the symbolic `seq`.
fn value(name: &str, elem: DataType, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => dimension::Value::DimValue(*v),
                None => dimension::Value::DimParam("seq".into()),
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

fn i64_tensor(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![v.len() as i64],
        data_type: DataType::Int64 as i32,
        int64_data: v.to_vec(),
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

fn node(op: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{op}_big"),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
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

/// Writes a one-graph model with these parts to `dir/name.onnx`.
fn write_model(
    dir: &Path,
    name: &str,
    nodes: Vec<NodeProto>,
    initializer: Vec<TensorProto>,
    input: Vec<ValueInfoProto>,
    output: ValueInfoProto,
) -> std::path::PathBuf {
    let m = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            name: name.into(),
            node: nodes,
            initializer,
            input,
            output: vec![output],
            ..Default::default()
        }),
        ..Default::default()
    };
    let path = dir.join(format!("{name}.onnx"));
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

fn host_engine() -> Engine {
    Engine::new(Config {
        cache_dir: Some(std::env::temp_dir().join("baton-test-cache")),
        ..Default::default()
    })
    .unwrap()
}

/// Loads `path` and a session for `bindings`; the error, as text.
fn load_error(engine: &Engine, path: &Path, bindings: &[(&str, usize)]) -> String {
    let graph = match model::load(path) {
        Ok(g) => g,
        Err(e) => return e.to_string(),
    };
    let bindings: BTreeMap<String, usize> =
        bindings.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    match Session::new(engine, &graph, &bindings) {
        Ok(s) => panic!(
            "{} loaded, arena {} bytes",
            path.display(),
            s.arena_plan.arena_size
        ),
        Err(e) => e.to_string(),
    }
}

const BIG: i64 = 1 << 40;

#[test]
fn constant_of_shape_expand_and_tile_of_2_40_elements_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let engine = host_engine();
    let out = |name| value(name, DataType::Float, &[None]);
    let cases = [
        write_model(
            dir.path(),
            "cos",
            vec![node("ConstantOfShape", &["shape"], "y", vec![])],
            vec![i64_tensor("shape", &[BIG])],
            vec![],
            out("y"),
        ),
        write_model(
            dir.path(),
            "expand",
            vec![node("Expand", &["one", "shape"], "y", vec![])],
            vec![f32_tensor("one", &[1], &[1.0]), i64_tensor("shape", &[BIG])],
            vec![],
            out("y"),
        ),
        write_model(
            dir.path(),
            "tile",
            vec![node("Tile", &["one", "reps"], "y", vec![])],
            vec![f32_tensor("one", &[1], &[1.0]), i64_tensor("reps", &[BIG])],
            vec![],
            out("y"),
        ),
    ];
    for (path, op) in cases.iter().zip(["ConstantOfShape", "Expand", "Tile"]) {
        let e = load_error(&engine, path, &[]);
        assert!(
            e.contains("'y'") && e.contains(op) && e.contains("max_tensor_bytes"),
            "{}: {e}",
            path.display()
        );
    }
}

#[test]
fn an_input_dim_of_2_40_and_huge_bindings_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let engine = host_engine();
    let fixed = write_model(
        dir.path(),
        "fixed",
        vec![node("Relu", &["x"], "y", vec![])],
        vec![],
        vec![value("x", DataType::Float, &[Some(1), Some(BIG)])],
        value("y", DataType::Float, &[Some(1), Some(BIG)]),
    );
    let e = load_error(&engine, &fixed, &[]);
    assert!(e.contains("'x'") && e.contains("max_tensor_bytes"), "{e}");

    let symbolic = write_model(
        dir.path(),
        "symbolic",
        vec![node("Relu", &["x"], "y", vec![])],
        vec![],
        vec![value("x", DataType::Float, &[Some(1), None])],
        value("y", DataType::Float, &[Some(1), None]),
    );
    // Too large; wrapping to 0 bytes (2^62 * 4); overflowing the element count.
    for seq in [1_000_000_000_000, 1 << 62, usize::MAX] {
        let e = load_error(&engine, &symbolic, &[("seq", seq)]);
        assert!(
            e.contains("'x'") && e.contains("max_tensor_bytes"),
            "seq={seq}: {e}"
        );
    }
}

#[test]
fn a_small_arena_limit_from_the_config_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(
        dir.path(),
        "relu",
        vec![node("Relu", &["x"], "y", vec![])],
        vec![],
        vec![value("x", DataType::Float, &[Some(1), None])],
        value("y", DataType::Float, &[Some(1), None]),
    );
    let cfg = Config::parse(
        "max_arena_bytes = 4096\n",
        Path::new("limits.toml"),
        dir.path(),
    )
    .unwrap();
    let engine = Engine::new(cfg).unwrap();
    let graph = model::load(&model).unwrap();
    let at = |seq: usize| {
        Session::new(&engine, &graph, &BTreeMap::from([("seq".to_string(), seq)]))
            .map(|s| s.arena_plan.arena_size)
    };
    assert!(at(64).unwrap() <= 4096);
    match at(4096) {
        Err(HostError::TooLarge { key, limit, .. }) => {
            assert_eq!((key, limit), ("max_arena_bytes", 4096));
        }
        other => panic!("expected TooLarge, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn conv_pads_of_2_32_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let engine = host_engine();
    let p = 1i64 << 32;
    let conv = write_model(
        dir.path(),
        "conv",
        vec![node(
            "Conv",
            &["x", "w"],
            "y",
            vec![ints("pads", &[p, p, p, p])],
        )],
        vec![f32_tensor("w", &[1, 1, 3, 3], &[0.5; 9])],
        vec![value(
            "x",
            DataType::Float,
            &[Some(1), Some(1), Some(4), Some(4)],
        )],
        value("y", DataType::Float, &[Some(1), Some(1), None, None]),
    );
    let e = load_error(&engine, &conv, &[]);
    assert!(e.contains("Conv"), "{e}");
}
