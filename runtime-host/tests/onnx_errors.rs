//! ONNX import errors as the host reports them: each becomes a `HostError` that still names
//! the model file and the thing at fault.

use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::TensorProto;
use baton_onnx::{read_model, tensor_from_proto, OnnxError};
use baton_runtime_host::error::ModelProblem;
use baton_runtime_host::HostError;

#[test]
fn a_model_without_a_graph_is_a_model_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let no_graph = dir.path().join("nograph.onnx");
    // Field 1 (ir_version) = 8, and nothing else: a valid message with no graph.
    std::fs::write(&no_graph, [0x08, 0x08]).unwrap();
    let e = read_model(&no_graph).unwrap_err();
    assert!(matches!(e, OnnxError::NoGraph { .. }), "{e:?}");
    match HostError::from(e) {
        HostError::Model {
            path,
            problem: problem @ ModelProblem::Onnx(OnnxError::NoGraph { .. }),
        } => {
            assert_eq!(path, no_graph);
            let message = problem.to_string();
            assert!(message.contains("no graph"), "{message}");
            // The file is named once, by the host error, not again by the ONNX one.
            assert!(!message.contains("nograph.onnx"), "{message}");
        }
        other => panic!("expected HostError::Model, got {other:?}"),
    }
}

#[test]
fn a_tensor_error_in_a_file_is_a_model_error_naming_file_and_tensor() {
    let complex = TensorProto {
        name: "c".into(),
        dims: vec![1],
        data_type: DataType::Complex64 as i32,
        ..Default::default()
    };
    let e = tensor_from_proto(&complex, None).unwrap_err();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    match HostError::from(e.in_file(&model)) {
        e @ HostError::Model { .. } => {
            let text = e.to_string();
            let HostError::Model { path, problem } = e else {
                unreachable!()
            };
            assert_eq!(path, model);
            assert!(
                matches!(
                    problem,
                    ModelProblem::Onnx(OnnxError::UnsupportedDtype { .. })
                ),
                "{problem:?}"
            );
            assert!(text.contains("COMPLEX64") && text.contains("'c'"), "{text}");
            assert_eq!(text.matches("m.onnx").count(), 1, "{text}");
        }
        other => panic!("expected HostError::Model, got {other:?}"),
    }
}

#[test]
fn a_truncated_model_file_names_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("cut.onnx");
    // A length-delimited field (graph, 7) that claims more bytes than follow.
    std::fs::write(&model, [0x3a, 0x40, 0x0a]).unwrap();
    let e = baton_runtime_host::model::load(&model).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(
            e,
            HostError::Model {
                problem: ModelProblem::Onnx(OnnxError::Decode { .. }),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(text.matches("cut.onnx").count(), 1, "{text}");
}
