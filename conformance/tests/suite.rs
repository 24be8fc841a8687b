//! The ONNX test-data suite mode, on tiny case directories built here from the protobuf
//! structs (no network, no onnx wheel).

use std::path::Path;

use baton_conformance::suite::{self, Manifest, SuiteClass, SuiteMode};
use baton_conformance::Tolerances;
use baton_onnx::proto::{
    self, tensor_proto::DataType, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TypeProto, ValueInfoProto,
};
use prost::Message;

fn value_info(name: &str, elem_type: DataType, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| proto::tensor_shape_proto::Dimension {
            value: Some(proto::tensor_shape_proto::dimension::Value::DimValue(d)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem_type as i32,
                shape: Some(proto::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn f32_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        float_data: values.to_vec(),
        ..Default::default()
    }
}

/// A COMPLEX64 tensor (real and imaginary parts interleaved), a type the IR lacks.
fn c64_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Complex64 as i32,
        float_data: values.to_vec(),
        ..Default::default()
    }
}

/// Writes a single-Add case: `z = x + y` over `[2]` of `elem`, with the given test data.
fn write_add_case(
    root: &Path,
    name: &str,
    elem: DataType,
    inputs: [TensorProto; 2],
    output: TensorProto,
) {
    let dir = root.join(name);
    let set = dir.join("test_data_set_0");
    std::fs::create_dir_all(&set).unwrap();
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        producer_name: "suite-test".into(),
        graph: Some(GraphProto {
            name: name.into(),
            node: vec![NodeProto {
                input: vec!["x".into(), "y".into()],
                output: vec!["z".into()],
                op_type: "Add".into(),
                ..Default::default()
            }],
            input: vec![value_info("x", elem, &[2]), value_info("y", elem, &[2])],
            output: vec![value_info("z", elem, &[2])],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(dir.join("model.onnx"), model.encode_to_vec()).unwrap();
    for (i, t) in inputs.iter().enumerate() {
        std::fs::write(set.join(format!("input_{i}.pb")), t.encode_to_vec()).unwrap();
    }
    std::fs::write(set.join("output_0.pb"), output.encode_to_vec()).unwrap();
}

fn build_suite(root: &Path) {
    write_add_case(
        root,
        "test_add_pass",
        DataType::Float,
        [
            f32_tensor("x", &[2], &[1.0, 2.5]),
            f32_tensor("y", &[2], &[3.0, -1.0]),
        ],
        f32_tensor("z", &[2], &[4.0, 1.5]),
    );
    write_add_case(
        root,
        "test_add_mismatch",
        DataType::Float,
        [
            f32_tensor("x", &[2], &[1.0, 2.0]),
            f32_tensor("y", &[2], &[1.0, 2.0]),
        ],
        f32_tensor("z", &[2], &[2.0, 5.0]),
    );
    write_add_case(
        root,
        "test_add_complex",
        DataType::Complex64,
        [
            c64_tensor("x", &[2], &[1.0, 0.0, 2.0, 0.0]),
            c64_tensor("y", &[2], &[1.0, 0.0, 2.0, 0.0]),
        ],
        c64_tensor("z", &[2], &[2.0, 0.0, 4.0, 0.0]),
    );
}

fn tolerances() -> Tolerances {
    Tolerances::builtin().unwrap()
}

#[test]
fn classes_without_a_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    build_suite(tmp.path());
    let mut seen = 0;
    let report = suite::run_suite(
        tmp.path(),
        &Manifest::default(),
        &tolerances(),
        &SuiteMode::Kit,
        &mut |_| seen += 1,
    )
    .unwrap();
    assert_eq!(seen, 3);
    assert_eq!(report.total, 3);

    let pass = report.case("test_add_pass").unwrap();
    assert_eq!(pass.class, SuiteClass::Pass, "{}", pass.message);
    assert_eq!(pass.op, "Add");
    assert!(pass.op_in_ir);

    let mm = report.case("test_add_mismatch").unwrap();
    assert_eq!(mm.class, SuiteClass::Mismatch);
    assert_eq!(mm.max_abs_err, Some(1.0));
    assert!(mm.message.contains("output 'z'"), "{}", mm.message);

    let cplx = report.case("test_add_complex").unwrap();
    assert_eq!(cplx.class, SuiteClass::UnsupportedDtype);
    assert!(cplx.message.contains("COMPLEX64"), "{}", cplx.message);

    assert!(report.failed);
    assert_eq!(report.exit_code(), 1);
    assert_eq!(report.unexpected_failures.len(), 2);
    assert_eq!(report.per_op["Add"]["pass"], 1);
    assert_eq!(report.per_op["Add"]["mismatch"], 1);
    assert_eq!(report.ir_ops.cases, 3);
    assert_eq!(report.ir_ops.passed, 1);

    // The generated manifest lists exactly the two failures, each with a reason, and
    // running with it is green.
    let text = report.manifest_text();
    let generated = Manifest::parse(&text).unwrap();
    assert_eq!(
        generated.entries.keys().collect::<Vec<_>>(),
        ["test_add_complex", "test_add_mismatch"]
    );
    let again = suite::run_suite(
        tmp.path(),
        &generated,
        &tolerances(),
        &SuiteMode::Kit,
        &mut |_| {},
    )
    .unwrap();
    assert!(!again.failed);
    assert_eq!(again.count(SuiteClass::ExpectedFailure), 2);
    assert_eq!(again.count(SuiteClass::Pass), 1);
}

/// Writes `light/light_{name}.onnx` (`y = x + x`, `x` of shape `[2, batch]`) and its
/// expected output `y` = `scale` times the right answer for the runner's inputs
/// `arange(n) / n` with the unknown `batch` taken as 1.
fn write_light_model(root: &Path, name: &str, scale: f32) {
    let dir = root.join("light");
    std::fs::create_dir_all(&dir).unwrap();
    let mut x = value_info("x", DataType::Float, &[2, 1]);
    if let Some(type_proto::Value::TensorType(t)) = x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.shape.as_mut().unwrap().dim[1].value = Some(
            proto::tensor_shape_proto::dimension::Value::DimParam("batch".into()),
        );
    }
    let model = ModelProto {
        ir_version: 4,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 9,
        }],
        graph: Some(GraphProto {
            name: name.into(),
            node: vec![NodeProto {
                input: vec!["x".into(), "x".into()],
                output: vec!["y".into()],
                op_type: "Add".into(),
                ..Default::default()
            }],
            input: vec![x],
            output: vec![value_info("y", DataType::Float, &[2, 1])],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(
        dir.join(format!("light_{name}.onnx")),
        model.encode_to_vec(),
    )
    .unwrap();
    // Inputs 0/2 and 1/2, doubled.
    let y = f32_tensor("y", &[2, 1], &[0.0, scale]);
    std::fs::write(
        dir.join(format!("light_{name}_output_0.pb")),
        y.encode_to_vec(),
    )
    .unwrap();
}

#[test]
fn light_models_get_generated_inputs_and_their_data_json_tolerance() {
    let tmp = tempfile::tempdir().unwrap();
    write_light_model(tmp.path(), "exact", 1.0);
    write_light_model(tmp.path(), "off", 1.01);
    write_light_model(tmp.path(), "off_allowed", 1.01);
    let real = tmp.path().join("real/test_off_allowed");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::write(
        real.join("data.json"),
        r#"{"atol": 1e-07, "model_name": "off_allowed", "rtol": 0.02}"#,
    )
    .unwrap();

    let report = suite::run_suite(
        &tmp.path().join("light"),
        &Manifest::default(),
        &tolerances(),
        &SuiteMode::Kit,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(report.total, 3);
    let exact = report.case("light_exact").unwrap();
    assert_eq!(exact.class, SuiteClass::Pass, "{}", exact.message);
    assert_eq!(exact.op, "Add");
    let off = report.case("light_off").unwrap();
    assert_eq!(
        off.class,
        SuiteClass::Mismatch,
        "a 1% error is over rtol 1e-3"
    );
    let allowed = report.case("light_off_allowed").unwrap();
    assert_eq!(
        allowed.class,
        SuiteClass::Pass,
        "rtol 0.02 from data.json: {}",
        allowed.message
    );
}

#[test]
fn manifest_expected_failures_and_unexpected_passes() {
    let tmp = tempfile::tempdir().unwrap();
    build_suite(tmp.path());
    let manifest = Manifest::parse(
        "# complex tensors have no Baton dtype\n\
         test_add_complex  COMPLEX64 has no Baton dtype\n\
         \n\
         # listed, but it passes\n\
         test_add_pass    was broken once\n\
         test_gone        no such case any more\n",
    )
    .unwrap();
    let report = suite::run_suite(
        tmp.path(),
        &manifest,
        &tolerances(),
        &SuiteMode::Kit,
        &mut |_| {},
    )
    .unwrap();

    let cplx = report.case("test_add_complex").unwrap();
    assert_eq!(cplx.class, SuiteClass::ExpectedFailure);
    assert_eq!(cplx.actual, SuiteClass::UnsupportedDtype);
    assert_eq!(cplx.reason.as_deref(), Some("COMPLEX64 has no Baton dtype"));

    let pass = report.case("test_add_pass").unwrap();
    assert_eq!(pass.class, SuiteClass::UnexpectedPass);
    assert_eq!(report.unexpected_passes, ["test_add_pass"]);
    assert_eq!(report.stale_manifest_entries, ["test_gone"]);

    // The unlisted mismatch still fails the run; the unexpected pass alone would not.
    assert_eq!(report.unexpected_failures, ["test_add_mismatch"]);
    assert_eq!(report.exit_code(), 1);

    let out = tmp.path().join("reports");
    let written = report.write_all(&out).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&written.json).unwrap()).unwrap();
    assert_eq!(json["totals"]["unexpected-pass"], 1);
    assert_eq!(json["totals"]["expected-failure"], 1);
    assert_eq!(json["totals"]["mismatch"], 1);
    let md = std::fs::read_to_string(&written.summary).unwrap();
    assert!(md.contains("| Add | 3 |"), "{md}");
    assert!(md.contains("test_add_mismatch"));

    let only_pass = Manifest::parse(
        "test_add_mismatch  off by design\ntest_add_complex  c64\ntest_add_pass  x\n",
    )
    .unwrap();
    let report = suite::run_suite(
        tmp.path(),
        &only_pass,
        &tolerances(),
        &SuiteMode::Kit,
        &mut |_| {},
    )
    .unwrap();
    assert!(!report.failed, "unexpected passes are warnings");
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn manifest_parse_errors() {
    assert!(Manifest::parse("test_a\n")
        .unwrap_err()
        .contains("no reason"));
    assert!(Manifest::parse("test_a  r\ntest_a  r2\n")
        .unwrap_err()
        .contains("twice"));
    let m = Manifest::parse("  # c\n\ntest_b   two  words \n").unwrap();
    assert_eq!(m.reason("test_b"), Some("two  words"));
}

#[test]
fn cli_suite_mode_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    build_suite(tmp.path());
    let exe = env!("CARGO_BIN_EXE_baton-conformance");
    let reports = tmp.path().join("out");
    let manifest = tmp.path().join("m.txt");
    let run = |manifest: Option<&Path>| {
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("--suite")
            .arg(tmp.path())
            .arg("--report-dir")
            .arg(&reports);
        if let Some(m) = manifest {
            cmd.arg("--suite-manifest").arg(m);
        }
        cmd.output().unwrap()
    };
    let out = run(None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(reports.join("suite.json").is_file());
    assert!(reports.join("suite.md").is_file());

    std::fs::write(
        &manifest,
        "test_add_mismatch  wrong on purpose\ntest_add_complex  c64\n",
    )
    .unwrap();
    let out = run(Some(&manifest));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A FLOAT16 or BFLOAT16 tensor (bit patterns in `int32_data`, as ONNX stores them).
fn half_tensor(name: &str, elem: DataType, values: &[f32]) -> TensorProto {
    let bits = |v: f32| match elem {
        DataType::Float16 => half::f16::from_f32(v).to_bits(),
        _ => half::bf16::from_f32(v).to_bits(),
    };
    TensorProto {
        name: name.into(),
        dims: vec![values.len() as i64],
        data_type: elem as i32,
        int32_data: values.iter().map(|&v| i32::from(bits(v))).collect(),
        ..Default::default()
    }
}

#[test]
fn the_user_path_feeds_npy_files_and_groups_what_numpy_cannot_carry() {
    let tmp = tempfile::tempdir().unwrap();
    build_suite(tmp.path());
    for (name, elem) in [
        ("test_add_f16", DataType::Float16),
        ("test_add_bf16", DataType::Bfloat16),
    ] {
        write_add_case(
            tmp.path(),
            name,
            elem,
            [
                half_tensor("x", elem, &[1.0, 2.5]),
                half_tensor("y", elem, &[0.5, -1.0]),
            ],
            half_tensor("z", elem, &[1.5, 1.5]),
        );
    }
    let engine = baton_runtime_host::Engine::new(baton_runtime_host::Config::default()).unwrap();
    let report = suite::run_suite(
        tmp.path(),
        &Manifest::default(),
        &tolerances(),
        &SuiteMode::User(&engine),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(report.mode, "user path");
    let class = |n: &str| report.case(n).unwrap().actual;
    assert_eq!(class("test_add_pass"), SuiteClass::Pass);
    assert_eq!(class("test_add_f16"), SuiteClass::Pass);
    assert_eq!(class("test_add_mismatch"), SuiteClass::Mismatch);
    assert_eq!(class("test_add_complex"), SuiteClass::UnsupportedDtype);
    // The f32 file holds the bf16 inputs exactly, so it feeds them; the bf16 output is
    // written as f32, which the expected bf16 tensor is not.
    let bf16 = report.case("test_add_bf16").unwrap();
    assert_eq!(bf16.actual, SuiteClass::Mismatch);
    assert!(
        bf16.message.contains("got f32 [2], expected bf16 [2]"),
        "{}",
        bf16.message
    );
    // Plain cases: f32 and f16 ones; not the complex nor the bf16 case.
    assert_eq!(
        (report.plain_inference.passed, report.plain_inference.cases),
        (2, 3)
    );
    let manifest = report.manifest_text();
    let group = manifest
        .split("\n\n")
        .find(|g| g.contains("test_add_bf16"))
        .unwrap();
    assert!(group.starts_with("# a dtype numpy lacks"), "{manifest}");
    assert!(report.markdown().contains("## Failures by reason"));
}
