//! Bounded fuzzers for the readers of every file a user hands the host besides a program
//! (`program_fuzz.rs` covers those): BTIR models, ONNX models and `.npy` inputs. A mutated
//! file must be refused with an error or read; never a panic, a hang or an abort.
//!
//! Each test also requires that some mutants are read and some refused: a fuzzer whose
//! every input is refused by the first check tests only that check.

mod common;

use std::time::Instant;

use baton_delegate_api::testing::Rng;
use baton_delegate_api::wire::{self, ConstMode};
use baton_delegate_api::{DType, Tensor};
use baton_onnx::proto::attribute_proto::AttributeType;
use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use baton_onnx::proto::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use baton_runtime_host::{npy, sample};
use common::fuzz;
use prost::Message;

/// Mutates copies of `corpus` until the budget is spent; `read` says whether a mutant was
/// accepted. Returns (cases, accepted).
fn run(name: &str, corpus: &[Vec<u8>], read: &mut dyn FnMut(&[u8]) -> bool) -> (u64, u64) {
    let (budget, seed) = fuzz::budget(name);
    for good in corpus {
        assert!(read(good), "{name}: an unmutated corpus file was refused");
    }
    let mut rng = Rng::from_state(seed | 1);
    let deadline = Instant::now() + budget;
    let (mut cases, mut accepted) = (0u64, 0u64);
    while Instant::now() < deadline {
        let mut bytes = corpus[rng.below(corpus.len())].clone();
        for _ in 0..1 + rng.below(3) {
            if !bytes.is_empty() {
                fuzz::mutate(&mut rng, &mut bytes, &fuzz::anywhere);
            }
        }
        accepted += u64::from(read(&bytes));
        cases += 1;
    }
    eprintln!("{name} fuzzer: {cases} cases, {accepted} read, seed {seed}");
    assert!(
        cases > 0 && accepted > 0 && accepted < cases,
        "{name}: {accepted}/{cases} read"
    );
    (cases, accepted)
}

#[test]
fn fuzz_the_btir_reader() {
    let corpus: Vec<Vec<u8>> = [sample::tinynet(), sample::mixed(), sample::branchy()]
        .iter()
        .map(|g| wire::encode(g, ConstMode::Inline).0)
        .collect();
    run("btir", &corpus, &mut |bytes| match wire::decode(bytes) {
        // A graph that decodes is validated as the host would before using it.
        Ok(g) => g.validate().is_ok(),
        Err(_) => false,
    });
}

#[test]
fn fuzz_the_npy_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    let tensors = [
        Tensor::from_f32(&[2, 3], &[1.0, -2.0, 3.5, f32::NAN, 0.0, 7.0]),
        Tensor::from_bytes(DType::I64, &[3], &[1u8; 24]),
        Tensor::from_bytes(DType::U8, &[4, 1], &[1, 2, 3, 4]),
        Tensor::from_f32(&[], &[42.0]),
        Tensor::from_bytes(DType::F16, &[2], &[0x00, 0x3c, 0x00, 0xfc]),
        Tensor::from_bytes(DType::Bool, &[3], &[1, 0, 1]),
        Tensor::from_bytes(DType::U16, &[2], &[0xff, 0x00, 0x01, 0x80]),
    ];
    let corpus: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| {
            npy::write(&path, t).unwrap();
            std::fs::read(&path).unwrap()
        })
        .collect();
    run("npy", &corpus, &mut |bytes| {
        std::fs::write(&path, bytes).unwrap();
        npy::read(&path).is_ok()
    });
}

#[test]
fn fuzz_the_onnx_importer() {
    let corpus = vec![small_cnn().encode_to_vec()];
    run("onnx", &corpus, &mut |bytes| {
        let Ok(model) = ModelProto::decode(bytes) else {
            return false;
        };
        match baton_onnx::import(&model, None) {
            Ok(g) => g.validate().is_ok(),
            Err(_) => false,
        }
    });
}

/// Conv (pads, strides, bias) → Relu → Reshape → Gemm (transB) → Softmax, with every kind
/// of operand: initializers, a Constant node, attributes of several types.
fn small_cnn() -> ModelProto {
    let f32s = |name: &str, dims: &[i64]| TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        float_data: (0..dims.iter().product::<i64>())
            .map(|i| (i % 7) as f32 * 0.1 - 0.3)
            .collect(),
        ..Default::default()
    };
    let ints = |name: &str, v: &[i64]| AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: AttributeType::Ints as i32,
        ..Default::default()
    };
    let int = |name: &str, v: i64| AttributeProto {
        name: name.into(),
        i: v,
        r#type: AttributeType::Int as i32,
        ..Default::default()
    };
    let node = |op: &str, i: &[&str], o: &str, attribute: Vec<AttributeProto>| NodeProto {
        op_type: op.into(),
        name: format!("{op}_{o}"),
        input: i.iter().map(|s| s.to_string()).collect(),
        output: vec![o.into()],
        attribute,
        ..Default::default()
    };
    let shape = AttributeProto {
        name: "value".into(),
        t: Some(TensorProto {
            dims: vec![2],
            data_type: DataType::Int64 as i32,
            int64_data: vec![1, -1],
            ..Default::default()
        }),
        r#type: AttributeType::Tensor as i32,
        ..Default::default()
    };
    let value = |name: &str, dims: &[i64]| ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let graph = GraphProto {
        name: "small_cnn".into(),
        node: vec![
            node(
                "Conv",
                &["x", "w", "b"],
                "c",
                vec![ints("pads", &[1, 1, 1, 1]), ints("strides", &[2, 2])],
            ),
            node("Relu", &["c"], "r", vec![]),
            node("Constant", &[], "shape", vec![shape]),
            node("Reshape", &["r", "shape"], "flat", vec![]),
            node(
                "Gemm",
                &["flat", "fc", "fb"],
                "logits",
                vec![int("transB", 1)],
            ),
            node("Softmax", &["logits"], "y", vec![int("axis", -1)]),
        ],
        initializer: vec![
            f32s("w", &[4, 3, 3, 3]),
            f32s("b", &[4]),
            f32s("fc", &[5, 64]),
            f32s("fb", &[5]),
        ],
        input: vec![value("x", &[1, 3, 8, 8])],
        output: vec![value("y", &[1, 5])],
        ..Default::default()
    };
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}
