//! The ONNX protobuf layer against wire bytes assembled by hand from the protobuf encoding
//! rules, so that a wrong field number or wire type in `onnx::proto` fails here; and the
//! file readers (`read_model`, `read_tensor_pb`) on fixtures written from those bytes.

use std::path::{Path, PathBuf};

use baton_delegate_api::DType;
use baton_onnx::proto::attribute_proto::AttributeType;
use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use baton_onnx::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use baton_onnx::{read_model, read_tensor_pb, OnnxError};
use prost::Message;

/// TensorProto `x`: dims [2], FLOAT, float_data [1.0, 2.0], every byte written out.
const TENSOR_X: &[u8] = &[
    0x08, 0x02, // field 1 (dims), varint: 2
    0x10, 0x01, // field 2 (data_type), varint: 1 = FLOAT
    0x22, 0x08, // field 4 (float_data), length-delimited (packed), 8 bytes:
    0x00, 0x00, 0x80, 0x3f, //   1.0f32, little-endian
    0x00, 0x00, 0x00, 0x40, //   2.0f32
    0x42, 0x01, b'x', // field 8 (name), length-delimited: "x"
];

fn tensor_x() -> TensorProto {
    TensorProto {
        dims: vec![2],
        data_type: DataType::Float as i32,
        float_data: vec![1.0, 2.0],
        name: "x".into(),
        ..Default::default()
    }
}

/// A length-delimited field: the tag byte as written by the caller (field number << 3 | 2),
/// then the payload length as a base-128 varint, then the payload.
fn ld(tag: u8, payload: &[u8]) -> Vec<u8> {
    assert_eq!(tag & 7, 2, "tag {tag:#x} is not length-delimited");
    let mut v = vec![tag];
    let mut n = payload.len();
    while n >= 0x80 {
        v.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    v.push(n as u8);
    v.extend_from_slice(payload);
    v
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn hand_assembled_tensor_decodes_field_by_field() {
    let t = TensorProto::decode(TENSOR_X).unwrap();
    assert_eq!(t, tensor_x());
}

#[test]
fn tensor_encodes_to_the_same_bytes_as_onnx_writes() {
    // Fields in tag order, dims unpacked, float_data packed: the form ONNX tools write.
    assert_eq!(tensor_x().encode_to_vec(), TENSOR_X);
}

#[test]
fn typed_fields_raw_data_and_external_data_use_their_field_numbers() {
    // INT64 `n`, dims [3], int64_data packed [1, -1, 300].
    let mut int64_data = vec![0x01];
    int64_data.extend([0xff; 9]);
    int64_data.extend([0x01, 0xac, 0x02]);
    let n = cat(&[
        &[0x08, 0x03, 0x10, 0x07],
        &ld(0x3a, &int64_data),
        &[0x42, 0x01, b'n'],
    ]);
    let t = TensorProto::decode(n.as_slice()).unwrap();
    assert_eq!((t.data_type, t.int64_data), (7, vec![1, -1, 300]));

    // INT32 int32_data (field 5) [7, -2]; negative int32 varints are sign-extended to 10 bytes.
    let mut int32_data = vec![0x07, 0xfe];
    int32_data.extend([0xff; 8]);
    int32_data.push(0x01);
    let t = TensorProto::decode(cat(&[&[0x10, 0x06], &ld(0x2a, &int32_data)]).as_slice()).unwrap();
    assert_eq!((t.data_type, t.int32_data), (6, vec![7, -2]));

    // FLOAT16 raw_data (field 9): 1.0 = 0x3c00, -2.0 = 0xc000, little-endian.
    let t = TensorProto::decode(&[0x08, 0x02, 0x10, 0x0a, 0x4a, 0x04, 0x00, 0x3c, 0x00, 0xc0][..])
        .unwrap();
    assert_eq!(
        (t.data_type, t.raw_data),
        (10, vec![0x00, 0x3c, 0x00, 0xc0])
    );

    // double_data (field 10, packed fixed64) and uint64_data (field 11, packed varint).
    let t = TensorProto::decode(
        cat(&[
            &ld(0x52, &1.5f64.to_le_bytes()),
            &ld(0x5a, &[0x05, 0x80, 0x01]),
            &ld(0x32, b"ab"), // field 6 (string_data)
        ])
        .as_slice(),
    )
    .unwrap();
    assert_eq!(t.double_data, vec![1.5]);
    assert_eq!(t.uint64_data, vec![5, 128]);
    assert_eq!(t.string_data, vec![b"ab".to_vec()]);

    // external_data (field 13) entries and data_location (field 14) = EXTERNAL, segment (3).
    let entry = cat(&[&ld(0x0a, b"location"), &ld(0x12, b"w.bin")]);
    let t = TensorProto::decode(
        cat(&[
            &ld(0x1a, &[0x08, 0x02, 0x10, 0x04]),
            &ld(0x6a, &entry),
            &[0x70, 0x01],
        ])
        .as_slice(),
    )
    .unwrap();
    assert_eq!(t.segment.as_ref().map(|s| (s.begin, s.end)), Some((2, 4)));
    assert_eq!(
        t.external_data,
        vec![StringStringEntryProto {
            key: "location".into(),
            value: "w.bin".into()
        }]
    );
    assert_eq!(t.data_location, 1);
}

#[test]
fn packed_and_unpacked_repeated_fields_both_decode() {
    // dims packed (field 1, length-delimited) and float_data unpacked (field 4, fixed32).
    let bytes = [
        0x0a, 0x02, 0x01, 0x02, // dims [1, 2], packed
        0x10, 0x01, // FLOAT
        0x25, 0x00, 0x00, 0x80, 0x3f, // float_data 1.0, unpacked
        0x25, 0x00, 0x00, 0x00, 0x40, // float_data 2.0, unpacked
    ];
    let t = TensorProto::decode(&bytes[..]).unwrap();
    assert_eq!(t.dims, vec![1, 2]);
    assert_eq!(t.float_data, vec![1.0, 2.0]);
}

/// One attribute of every value kind, in tag order, with the structs they must decode to.
fn attributes() -> (Vec<u8>, Vec<AttributeProto>) {
    let attr = |name: &str, t: AttributeType| AttributeProto {
        name: name.into(),
        r#type: t as i32,
        ..Default::default()
    };
    let ty = |t: u8| [0xa0, 0x01, t]; // field 20 (type): tag 160 is two varint bytes
    let mut bytes = Vec::new();
    let mut expected = Vec::new();

    let body = cat(&[&ld(0x0a, b"alpha"), &[0x15, 0xcd, 0xcc, 0xcc, 0x3d], &ty(1)]);
    bytes.extend(ld(0x2a, &body)); // f (field 2, fixed32) = 0.1
    expected.push(AttributeProto {
        f: 0.1,
        ..attr("alpha", AttributeType::Float)
    });

    let body = cat(&[&ld(0x0a, b"axis"), &[0x18, 0x03], &ty(2)]);
    bytes.extend(ld(0x2a, &body)); // i (field 3, varint) = 3
    expected.push(AttributeProto {
        i: 3,
        ..attr("axis", AttributeType::Int)
    });

    let body = cat(&[&ld(0x0a, b"mode"), &ld(0x22, b"edge"), &ty(3)]);
    bytes.extend(ld(0x2a, &body)); // s (field 4)
    expected.push(AttributeProto {
        s: b"edge".to_vec(),
        ..attr("mode", AttributeType::String)
    });

    let body = cat(&[&ld(0x0a, b"value"), &ld(0x2a, TENSOR_X), &ty(4)]);
    bytes.extend(ld(0x2a, &body)); // t (field 5)
    expected.push(AttributeProto {
        t: Some(tensor_x()),
        ..attr("value", AttributeType::Tensor)
    });

    let body = cat(&[&ld(0x0a, b"body"), &ld(0x32, &ld(0x12, b"b")), &ty(5)]);
    bytes.extend(ld(0x2a, &body)); // g (field 6): a graph named "b"
    let graph_b = GraphProto {
        name: "b".into(),
        ..Default::default()
    };
    expected.push(AttributeProto {
        g: Some(graph_b.clone()),
        ..attr("body", AttributeType::Graph)
    });

    let floats = [0x3d, 0x00, 0x00, 0x80, 0x3f, 0x3d, 0x00, 0x00, 0x00, 0xc0];
    let body = cat(&[&ld(0x0a, b"scales"), &floats, &ty(6)]);
    bytes.extend(ld(0x2a, &body)); // floats (field 7, unpacked fixed32) = [1, -2]
    expected.push(AttributeProto {
        floats: vec![1.0, -2.0],
        ..attr("scales", AttributeType::Floats)
    });

    let body = cat(&[&ld(0x0a, b"pads"), &[0x40, 0x01, 0x40, 0x02], &ty(7)]);
    bytes.extend(ld(0x2a, &body)); // ints (field 8, unpacked varint) = [1, 2]
    expected.push(AttributeProto {
        ints: vec![1, 2],
        ..attr("pads", AttributeType::Ints)
    });

    let body = cat(&[
        &ld(0x0a, b"names"),
        &ld(0x4a, b"a"),
        &ld(0x4a, b"bc"),
        &ty(8),
    ]);
    bytes.extend(ld(0x2a, &body)); // strings (field 9)
    expected.push(AttributeProto {
        strings: vec![b"a".to_vec(), b"bc".to_vec()],
        ..attr("names", AttributeType::Strings)
    });

    let body = cat(&[&ld(0x0a, b"ts"), &ld(0x52, TENSOR_X), &ty(9)]);
    bytes.extend(ld(0x2a, &body)); // tensors (field 10)
    expected.push(AttributeProto {
        tensors: vec![tensor_x()],
        ..attr("ts", AttributeType::Tensors)
    });

    let body = cat(&[&ld(0x0a, b"gs"), &ld(0x5a, &ld(0x12, b"b")), &ty(10)]);
    bytes.extend(ld(0x2a, &body)); // graphs (field 11)
    expected.push(AttributeProto {
        graphs: vec![graph_b],
        ..attr("gs", AttributeType::Graphs)
    });

    // ref_attr_name (field 21): tag 170 is two varint bytes.
    let body = cat(&[&ld(0x0a, b"ref"), &ty(2), &[0xaa, 0x01, 0x05], b"outer"]);
    bytes.extend(ld(0x2a, &body));
    expected.push(AttributeProto {
        ref_attr_name: "outer".into(),
        ..attr("ref", AttributeType::Int)
    });
    (bytes, expected)
}

/// A one-node model, hand-assembled: `y = Op(x, w)` with every attribute kind, an
/// initializer, typed input with a fixed and a symbolic dimension, an output, value_info.
fn model_fixture() -> (Vec<u8>, ModelProto) {
    let (attr_bytes, attrs) = attributes();
    let node = cat(&[
        &ld(0x0a, b"x"),           // input (field 1)
        &ld(0x0a, b"w"),           // input
        &ld(0x12, b"y"),           // output (field 2)
        &ld(0x1a, b"n0"),          // name (field 3)
        &ld(0x22, b"Op"),          // op_type (field 4)
        &attr_bytes,               // attribute (field 5) each
        &ld(0x3a, b"com.example"), // domain (field 7)
    ]);
    let w = [
        0x08, 0x01, 0x10, 0x01, 0x22, 0x04, 0x00, 0x00, 0x80, 0x3f, 0x42, 0x01, b'w',
    ];
    let shape = cat(&[
        &ld(0x0a, &[0x08, 0x03]),   // dim { dim_value (field 1) = 3 }
        &ld(0x0a, &ld(0x12, b"N")), // dim { dim_param (field 2) = "N" }
    ]);
    let tensor_type = cat(&[&[0x08, 0x01], &ld(0x12, &shape)]); // elem_type FLOAT, shape
    let x_type = ld(0x0a, &tensor_type); // TypeProto.tensor_type (field 1)
    let x_info = cat(&[&ld(0x0a, b"x"), &ld(0x12, &x_type)]); // name, type (field 2)
    let graph = cat(&[
        &ld(0x0a, &node),           // node (field 1)
        &ld(0x12, b"g"),            // name (field 2)
        &ld(0x2a, &w),              // initializer (field 5)
        &ld(0x52, b"doc"),          // doc_string (field 10)
        &ld(0x5a, &x_info),         // input (field 11)
        &ld(0x62, &ld(0x0a, b"y")), // output (field 12)
        &ld(0x6a, &ld(0x0a, b"z")), // value_info (field 13)
    ]);
    let bytes = cat(&[
        &[0x08, 0x08],            // ir_version (field 1) = 8
        &ld(0x12, b"baton"),      // producer_name (field 2)
        &ld(0x1a, b"0.1"),        // producer_version (field 3)
        &ld(0x22, b"org.baton"),  // domain (field 4)
        &[0x28, 0x02],            // model_version (field 5) = 2
        &ld(0x32, b"a model"),    // doc_string (field 6)
        &ld(0x3a, &graph),        // graph (field 7)
        &ld(0x42, &[0x10, 0x0d]), // opset_import (field 8): version (field 2) = 13
        &ld(0x42, &cat(&[&ld(0x0a, b"com.example"), &[0x10, 0x01]])),
        &ld(0x72, &cat(&[&ld(0x0a, b"k"), &ld(0x12, b"v")])), // metadata_props (field 14)
    ]);

    let dim = |v: dimension::Value| Dimension {
        value: Some(v),
        ..Default::default()
    };
    let info = |name: &str| ValueInfoProto {
        name: name.into(),
        ..Default::default()
    };
    let expected = ModelProto {
        ir_version: 8,
        producer_name: "baton".into(),
        producer_version: "0.1".into(),
        domain: "org.baton".into(),
        model_version: 2,
        doc_string: "a model".into(),
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into(), "w".into()],
                output: vec!["y".into()],
                name: "n0".into(),
                op_type: "Op".into(),
                attribute: attrs,
                domain: "com.example".into(),
                ..Default::default()
            }],
            name: "g".into(),
            initializer: vec![TensorProto {
                dims: vec![1],
                data_type: DataType::Float as i32,
                float_data: vec![1.0],
                name: "w".into(),
                ..Default::default()
            }],
            doc_string: "doc".into(),
            input: vec![ValueInfoProto {
                r#type: Some(TypeProto {
                    value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                        elem_type: DataType::Float as i32,
                        shape: Some(TensorShapeProto {
                            dim: vec![
                                dim(dimension::Value::DimValue(3)),
                                dim(dimension::Value::DimParam("N".into())),
                            ],
                        }),
                    })),
                    ..Default::default()
                }),
                ..info("x")
            }],
            output: vec![info("y")],
            value_info: vec![info("z")],
        }),
        opset_import: vec![
            OperatorSetIdProto {
                domain: String::new(),
                version: 13,
            },
            OperatorSetIdProto {
                domain: "com.example".into(),
                version: 1,
            },
        ],
        metadata_props: vec![StringStringEntryProto {
            key: "k".into(),
            value: "v".into(),
        }],
    };
    (bytes, expected)
}

#[test]
fn hand_assembled_model_decodes_field_by_field() {
    let (bytes, expected) = model_fixture();
    let model = ModelProto::decode(bytes.as_slice()).unwrap();
    let (graph, expected_graph) = (
        model.graph.as_ref().unwrap(),
        expected.graph.as_ref().unwrap(),
    );
    // Piecewise first, for a readable failure; then the whole.
    for (got, want) in graph.node[0]
        .attribute
        .iter()
        .zip(&expected_graph.node[0].attribute)
    {
        assert_eq!(got, want);
    }
    assert_eq!(graph.input, expected_graph.input);
    assert_eq!(model, expected);
}

#[test]
fn model_encodes_to_the_hand_assembled_bytes() {
    let (bytes, expected) = model_fixture();
    assert_eq!(expected.encode_to_vec(), bytes);
}

#[test]
fn unknown_fields_are_skipped() {
    let (mut bytes, expected) = model_fixture();
    // training_info (field 20), functions (field 25): messages Baton does not declare.
    bytes.extend([0xa2, 0x01, 0x02, 0x08, 0x01]);
    bytes.extend([0xca, 0x01, 0x03, 0x0a, 0x01, b'f']);
    assert_eq!(ModelProto::decode(bytes.as_slice()).unwrap(), expected);
    // sparse_initializer (field 15) inside a graph.
    let graph = GraphProto::decode(&[0x12, 0x01, b'g', 0x7a, 0x02, 0x18, 0x01][..]).unwrap();
    assert_eq!(graph.name, "g");
}

#[test]
fn read_model_reads_a_model_file() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, expected) = model_fixture();
    let path = write(dir.path(), "m.onnx", &bytes);
    assert_eq!(read_model(&path).unwrap(), expected);
}

#[test]
fn read_model_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.onnx");
    let e = read_model(&missing).unwrap_err();
    assert!(matches!(e, OnnxError::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("missing.onnx"), "{e}");

    // Wire type 7 does not exist: not a protobuf message at all.
    let garbage = write(dir.path(), "garbage.onnx", &[0x0f, 0x01]);
    let e = read_model(&garbage).unwrap_err();
    assert!(matches!(e, OnnxError::Decode { .. }), "{e:?}");
    assert!(e.to_string().contains("garbage.onnx"), "{e}");

    let no_graph = write(dir.path(), "nograph.onnx", &[0x08, 0x08]);
    let e = read_model(&no_graph).unwrap_err();
    assert!(matches!(e, OnnxError::NoGraph { .. }), "{e:?}");
    assert!(e.to_string().contains("nograph.onnx"), "{e}");
}

#[test]
fn read_tensor_pb_reads_backend_test_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "input_0.pb", TENSOR_X);
    let (name, t) = read_tensor_pb(&path).unwrap();
    assert_eq!(name, "x");
    assert_eq!((t.dtype, t.shape.clone()), (DType::F32, vec![2]));
    assert_eq!(t.f32s(), &[1.0, 2.0]);
}

#[test]
fn read_tensor_pb_follows_external_data_next_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let location = cat(&[&ld(0x0a, b"location"), &ld(0x12, b"w.bin")]);
    let offset = cat(&[&ld(0x0a, b"offset"), &ld(0x12, b"4")]);
    let pb = cat(&[
        &[0x08, 0x02, 0x10, 0x01, 0x42, 0x01, b'w'],
        &ld(0x6a, &location),
        &ld(0x6a, &offset),
        &[0x70, 0x01],
    ]);
    let path = write(dir.path(), "w.pb", &pb);
    let mut data = vec![0xee; 4];
    data.extend(
        bytemuck::cast_slice::<f32, u8>(&[3.0, -4.0])
            .iter()
            .copied(),
    );
    write(dir.path(), "w.bin", &data);
    let (name, t) = read_tensor_pb(&path).unwrap();
    assert_eq!(name, "w");
    assert_eq!(t.f32s(), &[3.0, -4.0]);
}

#[test]
fn read_tensor_pb_errors_name_file_and_tensor() {
    let dir = tempfile::tempdir().unwrap();
    // dims [3] but two floats.
    let mut bytes = TENSOR_X.to_vec();
    bytes[1] = 0x03;
    let path = write(dir.path(), "output_0.pb", &bytes);
    let e = read_tensor_pb(&path).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("output_0.pb") && text.contains("'x'"),
        "{text}"
    );
    match e {
        OnnxError::InFile { source, .. } => {
            assert!(matches!(
                *source,
                OnnxError::ElementCount {
                    expected: 3,
                    found: 2,
                    ..
                }
            ))
        }
        other => panic!("expected InFile, got {other:?}"),
    }
}
