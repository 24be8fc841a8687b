//! Tolerance files load, and special values are judged as documented.

use baton_conformance::tolerance::{compare, ulp_distance, Tolerances};
use baton_delegate_api::{DType, OpKind, Tensor};

fn next_up(v: f32) -> f32 {
    f32::from_bits(v.to_bits() + 1)
}

#[test]
fn the_kit_files_and_the_builtin_copies_load_and_agree() {
    let dir = Tolerances::load(None).expect("default tolerances load");
    assert!(dir.sources[0].ends_with("f32.toml"), "{:?}", dir.sources);
    let builtin = Tolerances::builtin().expect("built-in tolerances parse");
    for dtype in [DType::F32, DType::F16, DType::I32, DType::I64] {
        for &op in OpKind::ALL {
            assert_eq!(dir.rule(dtype, Some(op)), builtin.rule(dtype, Some(op)));
        }
        assert_eq!(dir.rule(dtype, None), builtin.rule(dtype, None));
    }
}

#[test]
fn nan_matches_only_nan() {
    let t = Tolerances::builtin().unwrap();
    for op in [
        OpKind::Add,
        OpKind::Relu,
        OpKind::Softmax,
        OpKind::Conv,
        OpKind::Reshape,
    ] {
        let r = t.rule(DType::F32, Some(op));
        assert!(r.accepts(DType::F32, f64::NAN, f64::NAN), "{op}");
        assert!(!r.accepts(DType::F32, 0.0, f64::NAN), "{op}");
        assert!(!r.accepts(DType::F32, f64::NAN, 1.0), "{op}");
        assert!(!r.accepts(DType::F32, f64::INFINITY, f64::NAN), "{op}");
    }
}

#[test]
fn infinities_must_match_exactly() {
    let t = Tolerances::builtin().unwrap();
    let r = t.rule(DType::F32, Some(OpKind::MatMul));
    assert!(r.accepts(DType::F32, f64::INFINITY, f64::INFINITY));
    assert!(!r.accepts(DType::F32, f64::NEG_INFINITY, f64::INFINITY));
    assert!(!r.accepts(DType::F32, f32::MAX as f64, f64::INFINITY));
    assert!(!r.accepts(DType::F32, f64::INFINITY, f32::MAX as f64));
}

#[test]
fn negative_zero_equals_zero_unless_the_family_says_signed_zero() {
    let t = Tolerances::builtin().unwrap();
    let add = t.rule(DType::F32, Some(OpKind::Add));
    assert!(!add.signed_zero);
    assert!(add.accepts(DType::F32, -0.0, 0.0));
    assert!(add.accepts(DType::F32, 0.0, -0.0));
    let mv = t.rule(DType::F32, Some(OpKind::Transpose));
    assert!(mv.signed_zero, "data movement preserves the sign of zero");
    assert!(!mv.accepts(DType::F32, -0.0, 0.0));
    assert!(mv.accepts(DType::F32, -0.0, -0.0));
}

#[test]
fn one_ulp_is_judged_by_the_family_rule() {
    let t = Tolerances::builtin().unwrap();
    let x = 1.2345678f32;
    let (got, exp) = (next_up(x) as f64, x as f64);
    assert_eq!(ulp_distance(DType::F32, got, exp), 1);
    assert_eq!(ulp_distance(DType::F32, -0.0, 0.0), 0);
    assert_eq!(
        ulp_distance(
            DType::F32,
            f32::from_bits(1) as f64,
            -(f32::from_bits(1) as f64)
        ),
        2
    );
    // Elementwise allows 2 ulp, Relu and data movement none.
    assert!(t
        .rule(DType::F32, Some(OpKind::Add))
        .accepts(DType::F32, got, exp));
    assert!(!t
        .rule(DType::F32, Some(OpKind::Relu))
        .accepts(DType::F32, got, exp));
    assert!(!t
        .rule(DType::F32, Some(OpKind::Concat))
        .accepts(DType::F32, got, exp));
    let three = f32::from_bits(x.to_bits() + 3) as f64;
    assert!(!t
        .rule(DType::F32, Some(OpKind::Add))
        .accepts(DType::F32, three, exp));
    // f16: one f16 ulp, measured in f16.
    let h = half::f16::from_f32(1.5);
    let h_up = half::f16::from_bits(h.to_bits() + 1);
    assert_eq!(ulp_distance(DType::F16, h_up.to_f64(), h.to_f64()), 1);
    assert!(t
        .rule(DType::F16, Some(OpKind::Add))
        .accepts(DType::F16, h_up.to_f64(), h.to_f64()));
    // Integers are exact.
    let int = t.rule(DType::I32, Some(OpKind::Add));
    assert!(int.accepts(DType::I32, 7.0, 7.0));
    assert!(!int.accepts(DType::I32, 8.0, 7.0));
}

#[test]
fn compare_reports_the_worst_element() {
    let t = Tolerances::builtin().unwrap();
    let rule = t.rule(DType::F32, Some(OpKind::Add));
    let exp = Tensor::from_f32(&[2, 3], &[1.0, 2.0, f32::NAN, -0.0, 5.0, 6.0]);
    let got = Tensor::from_f32(&[2, 3], &[1.0, 2.5, f32::NAN, 0.0, 5.0, 9.0]);
    let c = compare(&got, &exp, &rule);
    assert!(!c.ok);
    assert_eq!(c.failures, 2);
    assert_eq!(c.max_abs_err, 3.0);
    assert_eq!(c.max_rel_err, 0.5);
    let w = c.worst.unwrap();
    assert_eq!(w.index, vec![1, 2]);
    assert_eq!((w.got, w.expected), (9.0, 6.0));
    let nan = Tensor::from_f32(&[2, 3], &[1.0, 2.0, 3.0, -0.0, 5.0, 6.0]);
    let c = compare(&nan, &exp, &rule);
    assert_eq!(
        c.worst.unwrap().index,
        vec![0, 2],
        "a lost NaN is the worst element"
    );
    let other_shape = Tensor::from_f32(&[3, 2], &[0.0; 6]);
    assert!(compare(&other_shape, &exp, &rule).structural.is_some());
}

#[test]
fn a_directory_overrides_and_falls_back_per_file() {
    let tmp = tempfile::tempdir().unwrap();
    let f32_text = std::fs::read_to_string(Tolerances::default_dir().join("f32.toml")).unwrap();
    let loose = f32_text.replacen("[linalg]\nabs = 1e-5", "[linalg]\nabs = 0.5", 1);
    assert_ne!(loose, f32_text, "the edit applied");
    std::fs::write(tmp.path().join("f32.toml"), loose).unwrap();
    let t = Tolerances::load(Some(tmp.path())).unwrap();
    assert_eq!(t.rule(DType::F32, Some(OpKind::Conv)).abs, 0.5);
    assert!(t.sources[0].starts_with(tmp.path().to_str().unwrap()));
    assert_eq!(t.sources[1], "built-in:f16.toml");
    assert_eq!(t.sources[2], "built-in:int.toml");

    std::fs::write(tmp.path().join("int.toml"), "[elementwise]\nabs = 0.0\n").unwrap();
    let err = Tolerances::load(Some(tmp.path())).unwrap_err().to_string();
    assert!(err.contains("int.toml"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    assert!(
        Tolerances::load(Some(empty.path())).is_err(),
        "a dir with no files is refused"
    );
    let bad_op = f32_text.clone() + "\n[ops.NoSuchOp]\nabs = 0.0\nrel = 0.0\nulp = 0\n";
    std::fs::write(tmp.path().join("int.toml"), bad_op).unwrap();
    let err = Tolerances::load(Some(tmp.path())).unwrap_err().to_string();
    assert!(err.contains("NoSuchOp"), "{err}");
}
