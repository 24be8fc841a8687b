//! ONNX TensorProto to Baton Tensor: every storage form, every supported dtype, and the
//! errors for what Baton refuses (unsupported types, wrong counts, escaping paths).

use std::path::Path;

use baton_delegate_api::{DType, Tensor};
use baton_onnx::proto::tensor_proto::{DataLocation, DataType, Segment};
use baton_onnx::proto::{StringStringEntryProto, TensorProto};
use baton_onnx::{baton_dtype, onnx_data_type, onnx_type_name, tensor_from_proto, OnnxError};

fn proto(name: &str, dims: &[i64], dt: DataType) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: dt as i32,
        ..Default::default()
    }
}

fn convert(t: &TensorProto) -> Tensor {
    tensor_from_proto(t, None).unwrap_or_else(|e| panic!("{e}"))
}

fn f16_bits(values: &[f32]) -> Vec<u16> {
    values
        .iter()
        .map(|&v| half::f16::from_f32(v).to_bits())
        .collect()
}

/// A tensor of one supported dtype: ONNX type, dims, little-endian raw bytes, the values.
type Sample = (DataType, Vec<i64>, Vec<u8>, Vec<f64>);

/// One sample per supported dtype.
fn samples() -> Vec<Sample> {
    fn le<const N: usize, T: Copy>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }
    vec![
        (
            DataType::Float,
            vec![3],
            le(&[1.5f32, -2.0, 3.25], f32::to_le_bytes),
            vec![1.5, -2.0, 3.25],
        ),
        (
            DataType::Float16,
            vec![2],
            le(&f16_bits(&[1.0, -2.5]), u16::to_le_bytes),
            vec![1.0, -2.5],
        ),
        (
            DataType::Int8,
            vec![3],
            vec![0xff, 0x02, 0x80],
            vec![-1.0, 2.0, -128.0],
        ),
        (
            DataType::Uint8,
            vec![3],
            vec![0xff, 0x00, 0x07],
            vec![255.0, 0.0, 7.0],
        ),
        (
            DataType::Int32,
            vec![2],
            le(&[-70000i32, 5], i32::to_le_bytes),
            vec![-70000.0, 5.0],
        ),
        (
            DataType::Int64,
            vec![2, 1],
            le(&[-(1i64 << 40), 3], i64::to_le_bytes),
            vec![-(2f64.powi(40)), 3.0],
        ),
        (DataType::Bool, vec![3], vec![1, 0, 1], vec![1.0, 0.0, 1.0]),
    ]
}

#[test]
fn raw_data_of_every_supported_dtype() {
    for (dt, dims, raw, values) in samples() {
        let t = TensorProto {
            raw_data: raw.clone(),
            ..proto("r", &dims, dt)
        };
        let out = convert(&t);
        let want = baton_dtype(dt as i32).unwrap();
        assert_eq!(out.dtype, want, "{dt:?}");
        let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        assert_eq!(out.shape, shape, "{dt:?}");
        assert_eq!(out.to_f64(), values, "{dt:?}");
        if cfg!(target_endian = "little") {
            assert_eq!(out.bytes(), raw.as_slice(), "{dt:?}");
        }
    }
}

#[test]
fn typed_fields_of_every_supported_dtype() {
    let cases: Vec<(TensorProto, DType, Vec<f64>)> = vec![
        (
            TensorProto {
                float_data: vec![1.5, -2.0],
                ..proto("f", &[2], DataType::Float)
            },
            DType::F32,
            vec![1.5, -2.0],
        ),
        (
            // FLOAT16 elements are their bit patterns, zero-extended into int32_data.
            TensorProto {
                int32_data: f16_bits(&[1.0, -2.5]).iter().map(|&b| b as i32).collect(),
                ..proto("h", &[2], DataType::Float16)
            },
            DType::F16,
            vec![1.0, -2.5],
        ),
        (
            TensorProto {
                int32_data: vec![-1, 2, -128, 127],
                ..proto("i8", &[2, 2], DataType::Int8)
            },
            DType::I8,
            vec![-1.0, 2.0, -128.0, 127.0],
        ),
        (
            TensorProto {
                int32_data: vec![255, 0, 7],
                ..proto("u8", &[3], DataType::Uint8)
            },
            DType::U8,
            vec![255.0, 0.0, 7.0],
        ),
        (
            TensorProto {
                int32_data: vec![-70000, i32::MAX],
                ..proto("i32", &[2], DataType::Int32)
            },
            DType::I32,
            vec![-70000.0, i32::MAX as f64],
        ),
        (
            TensorProto {
                int64_data: vec![-(1 << 40), 3],
                ..proto("i64", &[1, 2], DataType::Int64)
            },
            DType::I64,
            vec![-(2f64.powi(40)), 3.0],
        ),
        (
            TensorProto {
                int32_data: vec![1, 0, 1],
                ..proto("b", &[3], DataType::Bool)
            },
            DType::Bool,
            vec![1.0, 0.0, 1.0],
        ),
    ];
    for (t, dtype, values) in cases {
        let out = convert(&t);
        assert_eq!(out.dtype, dtype, "{}", t.name);
        assert_eq!(out.len(), values.len(), "{}", t.name);
        assert_eq!(out.to_f64(), values, "{}", t.name);
    }
    // The I8 values land as two's-complement bytes, not truncated or offset.
    let out = convert(&TensorProto {
        int32_data: vec![-1, -128],
        ..proto("i8", &[2], DataType::Int8)
    });
    assert_eq!(out.bytes(), &[0xff, 0x80]);
}

#[test]
fn scalars_are_rank_0_with_one_element() {
    let t = convert(&TensorProto {
        float_data: vec![4.5],
        ..proto("s", &[], DataType::Float)
    });
    assert!(t.shape.is_empty());
    assert_eq!(t.f32s(), &[4.5]);

    let t = convert(&TensorProto {
        raw_data: 7i64.to_le_bytes().to_vec(),
        ..proto("s", &[], DataType::Int64)
    });
    assert!(t.shape.is_empty());
    assert_eq!(t.values::<i64>(), &[7]);

    let e = tensor_from_proto(
        &TensorProto {
            float_data: vec![1.0, 2.0],
            ..proto("s", &[], DataType::Float)
        },
        None,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            OnnxError::ElementCount {
                expected: 1,
                found: 2,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn empty_tensors_need_no_data() {
    let t = convert(&proto("e", &[0, 3], DataType::Float));
    assert_eq!((t.shape.clone(), t.len()), (vec![0, 3], 0));
}

#[test]
fn element_count_mismatch_names_the_tensor() {
    let e = tensor_from_proto(
        &TensorProto {
            float_data: vec![0.0; 5],
            ..proto("weights", &[2, 3], DataType::Float)
        },
        None,
    )
    .unwrap_err();
    match &e {
        OnnxError::ElementCount {
            tensor,
            expected,
            found,
            storage,
            ..
        } => assert_eq!(
            (tensor.as_str(), *expected, *found, *storage),
            ("weights", 6, 5, "float_data")
        ),
        other => panic!("expected ElementCount, got {other:?}"),
    }
    assert!(e.to_string().contains("'weights'"), "{e}");

    // Raw bytes that are whole elements, but too few; and bytes that are not whole elements.
    let raw = |n: usize| TensorProto {
        raw_data: vec![0; n],
        ..proto("r", &[3], DataType::Float)
    };
    let e = tensor_from_proto(&raw(8), None).unwrap_err();
    assert!(
        matches!(
            e,
            OnnxError::ElementCount {
                expected: 3,
                found: 2,
                storage: "raw_data",
                ..
            }
        ),
        "{e:?}"
    );
    let e = tensor_from_proto(&raw(7), None).unwrap_err();
    assert!(matches!(e, OnnxError::Malformed { .. }), "{e:?}");
    assert!(e.to_string().contains("7 bytes"), "{e}");

    // No data at all for a non-empty tensor.
    let e = tensor_from_proto(&proto("none", &[2], DataType::Int64), None).unwrap_err();
    assert!(
        matches!(
            e,
            OnnxError::ElementCount {
                found: 0,
                storage: "int64_data",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn unsupported_dtypes_are_refused_by_name() {
    let e = tensor_from_proto(
        &TensorProto {
            string_data: vec![b"a".to_vec(), b"b".to_vec()],
            ..proto("s", &[2], DataType::String)
        },
        None,
    )
    .unwrap_err();
    match &e {
        OnnxError::UnsupportedDtype {
            tensor, onnx_type, ..
        } => assert_eq!((tensor.as_str(), *onnx_type), ("s", "STRING")),
        other => panic!("expected UnsupportedDtype, got {other:?}"),
    }
    let text = e.to_string();
    assert!(text.contains("STRING") && text.contains("'s'"), "{text}");

    for (dt, name) in [
        (DataType::Undefined, "UNDEFINED"),
        (DataType::String, "STRING"),
        (DataType::Complex64, "COMPLEX64"),
        (DataType::Complex128, "COMPLEX128"),
    ] {
        let t = TensorProto {
            raw_data: vec![0; 16],
            ..proto("u", &[1], dt)
        };
        match tensor_from_proto(&t, None) {
            Err(OnnxError::UnsupportedDtype {
                onnx_type, code, ..
            }) => {
                assert_eq!((onnx_type, code), (name, dt as i32))
            }
            other => panic!("{name}: expected UnsupportedDtype, got {other:?}"),
        }
    }
}

#[test]
fn narrowed_int32_values_out_of_range_are_refused() {
    for (dt, bad) in [
        (DataType::Int8, 128),
        (DataType::Int8, -129),
        (DataType::Uint8, -1),
        (DataType::Uint8, 256),
        (DataType::Bool, 2),
        (DataType::Float16, 65536),
        (DataType::Float16, -1),
    ] {
        let t = TensorProto {
            int32_data: vec![0, bad],
            ..proto("n", &[2], dt)
        };
        let e = tensor_from_proto(&t, None).unwrap_err();
        assert!(
            matches!(e, OnnxError::Malformed { .. }),
            "{dt:?} {bad}: {e:?}"
        );
        assert!(
            e.to_string().contains(&format!("int32_data[1] = {bad}")),
            "{e}"
        );
    }
    let e = tensor_from_proto(
        &TensorProto {
            raw_data: vec![1, 2],
            ..proto("b", &[2], DataType::Bool)
        },
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("byte 1 is 2"), "{e}");
}

#[test]
fn inconsistent_storage_is_refused() {
    // FLOAT elements belong in float_data.
    let e = tensor_from_proto(
        &TensorProto {
            int64_data: vec![1],
            ..proto("w", &[1], DataType::Float)
        },
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("float_data") && e.to_string().contains("int64_data"),
        "{e}"
    );
    // raw_data excludes the typed fields.
    let e = tensor_from_proto(
        &TensorProto {
            raw_data: vec![0; 4],
            float_data: vec![1.0],
            ..proto("w", &[1], DataType::Float)
        },
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("raw_data"), "{e}");
    // Negative dims, segments, unknown data locations.
    let e = tensor_from_proto(&proto("w", &[2, -1], DataType::Float), None).unwrap_err();
    assert!(matches!(e, OnnxError::BadDims { .. }), "{e:?}");
    let e = tensor_from_proto(&proto("w", &[i64::MAX, 4], DataType::Float), None).unwrap_err();
    assert!(matches!(e, OnnxError::BadDims { .. }), "{e:?}");
    let e = tensor_from_proto(
        &TensorProto {
            segment: Some(Segment { begin: 0, end: 1 }),
            float_data: vec![1.0],
            ..proto("w", &[1], DataType::Float)
        },
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("segments"), "{e}");
    let e = tensor_from_proto(
        &TensorProto {
            data_location: 7,
            float_data: vec![1.0],
            ..proto("w", &[1], DataType::Float)
        },
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("data_location 7"), "{e}");
}

fn external(name: &str, dims: &[i64], dt: DataType, entries: &[(&str, &str)]) -> TensorProto {
    TensorProto {
        data_location: DataLocation::External as i32,
        external_data: entries
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..proto(name, dims, dt)
    }
}

/// A weights file: 16 bytes of junk, three f32 [1, 2, 3], two i64 [-5, 6], trailing junk.
fn weights_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = vec![0xab; 16];
    for v in [1.0f32, 2.0, 3.0] {
        bytes.extend(v.to_le_bytes());
    }
    for v in [-5i64, 6] {
        bytes.extend(v.to_le_bytes());
    }
    bytes.extend([0xcd; 5]);
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/weights.bin"), &bytes).unwrap();
    dir
}

#[test]
fn external_data_with_offset_and_length() {
    let dir = weights_dir();
    let base = Some(dir.path());
    let loc = ("location", "sub/weights.bin");
    let t = external(
        "w",
        &[3],
        DataType::Float,
        &[loc, ("offset", "16"), ("length", "12")],
    );
    assert_eq!(
        tensor_from_proto(&t, base).unwrap().f32s(),
        &[1.0, 2.0, 3.0]
    );

    let t = external(
        "i",
        &[2],
        DataType::Int64,
        &[("offset", "28"), ("length", "16"), loc],
    );
    assert_eq!(
        tensor_from_proto(&t, base).unwrap().values::<i64>(),
        &[-5, 6]
    );

    // Without a length, the data runs to the end of the file.
    let t = external("tail", &[5], DataType::Uint8, &[loc, ("offset", "44")]);
    assert_eq!(tensor_from_proto(&t, base).unwrap().bytes(), &[0xcd; 5]);

    // A length that is not the tensor's byte size.
    let t = external(
        "w",
        &[3],
        DataType::Float,
        &[loc, ("offset", "16"), ("length", "8")],
    );
    let e = tensor_from_proto(&t, base).unwrap_err();
    assert!(
        matches!(
            e,
            OnnxError::ElementCount {
                found: 2,
                storage: "external data",
                ..
            }
        ),
        "{e:?}"
    );

    // Past the end of the file.
    let t = external(
        "w",
        &[3],
        DataType::Float,
        &[loc, ("offset", "40"), ("length", "12")],
    );
    let e = tensor_from_proto(&t, base).unwrap_err();
    assert!(e.to_string().contains("runs past its end"), "{e}");
}

#[test]
fn external_paths_must_stay_in_the_model_directory() {
    let dir = weights_dir();
    let sub = dir.path().join("sub");
    // The file exists one level up from `sub`: only the path check stops the read.
    std::fs::copy(sub.join("weights.bin"), dir.path().join("up.bin")).unwrap();
    let t = external(
        "w",
        &[3],
        DataType::Float,
        &[
            ("location", "../up.bin"),
            ("offset", "16"),
            ("length", "12"),
        ],
    );
    let e = tensor_from_proto(&t, Some(&sub)).unwrap_err();
    match &e {
        OnnxError::ExternalData { tensor, message } => {
            assert_eq!(tensor, "w");
            assert!(message.contains(".."), "{message}");
        }
        other => panic!("expected ExternalData, got {other:?}"),
    }
    // The same file through a path that stays inside is read.
    let ok = external(
        "w",
        &[3],
        DataType::Float,
        &[("location", "up.bin"), ("offset", "16"), ("length", "12")],
    );
    assert_eq!(
        tensor_from_proto(&ok, Some(dir.path())).unwrap().f32s(),
        &[1.0, 2.0, 3.0]
    );

    let absolute = dir.path().join("up.bin");
    let absolute = absolute.to_str().unwrap();
    let t = external(
        "w",
        &[3],
        DataType::Float,
        &[("location", absolute), ("offset", "16"), ("length", "12")],
    );
    let e = tensor_from_proto(&t, Some(&sub)).unwrap_err();
    assert!(e.to_string().contains("absolute"), "{e}");
}

#[test]
fn external_data_errors_are_clear() {
    let dir = weights_dir();
    let t = external(
        "w",
        &[3],
        DataType::Float,
        &[("location", "sub/weights.bin")],
    );
    let e = tensor_from_proto(&t, None).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");

    let t = external("w", &[3], DataType::Float, &[("offset", "0")]);
    let e = tensor_from_proto(&t, Some(dir.path())).unwrap_err();
    assert!(e.to_string().contains("location"), "{e}");

    let t = external("w", &[3], DataType::Float, &[("location", "nope.bin")]);
    let e = tensor_from_proto(&t, Some(dir.path())).unwrap_err();
    assert!(
        e.to_string()
            .contains(&Path::new("nope.bin").display().to_string()),
        "{e}"
    );

    let t = external(
        "w",
        &[3],
        DataType::Float,
        &[("location", "sub/weights.bin"), ("offset", "x")],
    );
    let e = tensor_from_proto(&t, Some(dir.path())).unwrap_err();
    assert!(e.to_string().contains("offset 'x'"), "{e}");

    let mut t = external(
        "w",
        &[1],
        DataType::Float,
        &[("location", "sub/weights.bin")],
    );
    t.raw_data = vec![0; 4];
    let e = tensor_from_proto(&t, Some(dir.path())).unwrap_err();
    assert!(
        e.to_string().contains("EXTERNAL") && e.to_string().contains("raw_data"),
        "{e}"
    );
}

#[test]
fn type_names_and_dtype_mapping() {
    let names: Vec<&str> = (0..=26).map(onnx_type_name).collect();
    assert_eq!(
        &names[..12],
        &[
            "UNDEFINED",
            "FLOAT",
            "UINT8",
            "INT8",
            "UINT16",
            "INT16",
            "INT32",
            "INT64",
            "STRING",
            "BOOL",
            "FLOAT16",
            "DOUBLE",
        ]
    );
    assert_eq!(names[16], "BFLOAT16");
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert_eq!(onnx_type_name(27), "UNKNOWN");
    assert_eq!(onnx_type_name(-1), "UNKNOWN");

    for dtype in DType::ALL {
        assert_eq!(baton_dtype(onnx_data_type(dtype) as i32), Some(dtype));
    }
    let mapped = (0..=26).filter(|&c| baton_dtype(c).is_some()).count();
    assert_eq!(mapped, DType::ALL.len());
}

/// A sparse file of 4 TiB referenced as external data: refused before any allocation,
/// whether the dims agree with it (too large to allocate) or not (a length mismatch).
#[test]
fn a_huge_external_data_reference_is_an_error_not_an_abort() {
    // Under `overcommit_memory = 1` the allocator promises 4 TiB and reading it fills
    // the memory: only run where an impossible allocation is refused.
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory");
    if overcommit.is_ok_and(|s| s.trim() == "1") {
        eprintln!("skipped: vm.overcommit_memory = 1 grants any allocation");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let huge: u64 = 1 << 42;
    let file = std::fs::File::create(dir.path().join("huge.bin")).unwrap();
    if file.set_len(huge).is_err() {
        eprintln!("skipped: this filesystem cannot hold a sparse file of {huge} bytes");
        return;
    }
    let loc = ("location", "huge.bin");
    let t = external("big", &[1 << 40], DataType::Float, &[loc]);
    let e = tensor_from_proto(&t, Some(dir.path())).unwrap_err();
    assert!(
        e.to_string().contains("'big'") && e.to_string().contains("cannot be allocated"),
        "{e}"
    );
    let t = external("small", &[4], DataType::Float, &[loc]);
    let e = tensor_from_proto(&t, Some(dir.path())).unwrap_err();
    assert!(matches!(e, OnnxError::ElementCount { .. }), "{e:?}");
}
