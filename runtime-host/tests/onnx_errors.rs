//! ONNX import errors as the host reports them: each becomes a `HostError` that still names
//! the model file and the thing at fault.

use baton_onnx::proto::tensor_proto::DataType;
use baton_onnx::proto::TensorProto;
use baton_onnx::{read_model, tensor_from_proto, OnnxError};
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
        HostError::Model { path, message } => {
            assert_eq!(path, no_graph);
            assert!(message.contains("no graph"), "{message}");
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
        HostError::Model { path, message } => {
            assert_eq!(path, model);
            assert!(
                message.contains("COMPLEX64") && message.contains("'c'"),
                "{message}"
            );
        }
        other => panic!("expected HostError::Model, got {other:?}"),
    }
}
