//! Rounding, Sign, Reciprocal, the trigonometric functions, Mod, IsNaN/IsInf, the
//! inclusive comparisons, ArgMax/ArgMin and the Reduce ops beyond Sum, Mean and Max.
//! Expected values are written out (f32 roundings computed independently).

use super::*;

const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

fn unary(op: OpKind, attrs: &[(&str, Attr)], values: &[f32]) -> Vec<f32> {
    let x = f32t(&[values.len()], values);
    run_f32(&node(op, 1, attrs), &[x]).1
}

fn bools(t: &Tensor) -> Vec<u8> {
    assert_eq!(t.dtype, DType::Bool);
    t.values::<u8>().to_vec()
}

#[test]
fn floor_and_round_halves_to_even() {
    let x = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 2.7, -2.7, INF, NAN];
    assert_bits(
        &unary(OpKind::Round, &[], &x),
        &[-2., -2., -0., 0., 2., 2., -0., 3., -3., INF, NAN],
    );
    assert_bits(
        &unary(OpKind::Floor, &[], &x),
        &[-3., -2., -1., 0., 1., 2., -0., 2., -3., INF, NAN],
    );
}

#[test]
fn sign_reciprocal_and_trig() {
    assert_bits(
        &unary(OpKind::Sign, &[], &[-3., -0., 0., 2., -INF, NAN]),
        &[-1., 0., 0., 1., -1., NAN],
    );
    let i = typed(DType::I32, &[4], &[i32::MIN, -5, 0, 7]);
    let out = run(&node(OpKind::Sign, 1, &[]), &[i]).unwrap();
    assert_eq!(out.values::<i32>(), &[-1, -1, 0, 1]);
    assert_bits(
        &unary(OpKind::Reciprocal, &[], &[4., -0., 0., -INF]),
        &[0.25, -INF, INF, -0.],
    );
    assert_close(
        &unary(OpKind::Sin, &[], &[0., std::f32::consts::FRAC_PI_2]),
        &[0., 1.],
        1e-7,
    );
    assert_bits(&unary(OpKind::Asin, &[], &[1.5, -0.]), &[NAN, -0.]);
    assert_bits(&unary(OpKind::Acosh, &[], &[0.5, 1.]), &[NAN, 0.]);
    assert_bits(
        &unary(OpKind::Atanh, &[], &[1., -1., 2.]),
        &[INF, -INF, NAN],
    );
    assert_close(
        &unary(OpKind::Cosh, &[], &[0., 1.]),
        &[1., 1.543_080_6],
        1e-6,
    );
}

#[test]
fn mod_takes_the_divisor_sign_or_with_fmod_the_dividend_sign() {
    let a = f32t(&[4], &[7., -7., 7., -7.]);
    let b = f32t(&[4], &[3., 3., -3., -3.]);
    let floored = run_f32(&node(OpKind::Mod, 2, &[]), &[a.clone(), b.clone()]).1;
    assert_bits(&floored, &[1., 2., -2., -1.]);
    let fmod = [("fmod", Attr::Int(1))];
    let truncated = run_f32(&node(OpKind::Mod, 2, &fmod), &[a, b]).1;
    assert_bits(&truncated, &[1., -1., 1., -1.]);
    // A zero float divisor is NaN; an infinite one leaves a same-signed dividend.
    let a = f32t(&[3], &[5., 5., -5.]);
    let b = f32t(&[3], &[0., INF, INF]);
    let r = run_f32(&node(OpKind::Mod, 2, &[]), &[a, b]).1;
    assert_bits(&r, &[NAN, 5., INF]);
    let a = typed(DType::I64, &[3], &[-7i64, i64::MIN, 7]);
    let b = typed(DType::I64, &[3], &[3i64, -1, -3]);
    let r = run(&node(OpKind::Mod, 2, &[]), &[a.clone(), b]).unwrap();
    assert_eq!(r.values::<i64>(), &[2, 0, -2]);
    let zero = typed(DType::I64, &[3], &[1i64, 0, 1]);
    let err = run(&node(OpKind::Mod, 2, &[]), &[a, zero]).unwrap_err();
    assert!(matches!(err, KernelError::Arithmetic { .. }), "{err}");
}

#[test]
fn isnan_isinf_and_inclusive_comparisons_give_bools() {
    let x = f32t(&[4], &[NAN, INF, -INF, 1.]);
    let nan = run(&node(OpKind::IsNaN, 1, &[]), std::slice::from_ref(&x)).unwrap();
    assert_eq!(bools(&nan), [1, 0, 0, 0]);
    let inf = run(&node(OpKind::IsInf, 1, &[]), std::slice::from_ref(&x)).unwrap();
    assert_eq!(bools(&inf), [0, 1, 1, 0]);
    let neg_only = [("detect_positive", Attr::Int(0))];
    let inf = run(&node(OpKind::IsInf, 1, &neg_only), &[x]).unwrap();
    assert_eq!(bools(&inf), [0, 0, 1, 0]);
    let a = f32t(&[4], &[1., 2., NAN, -0.]);
    let b = f32t(&[4], &[2., 2., 1., 0.]);
    let ge = run(
        &node(OpKind::GreaterOrEqual, 2, &[]),
        &[a.clone(), b.clone()],
    )
    .unwrap();
    assert_eq!(bools(&ge), [0, 1, 0, 1]);
    let le = run(&node(OpKind::LessOrEqual, 2, &[]), &[a, b]).unwrap();
    assert_eq!(bools(&le), [1, 1, 0, 1]);
}

#[test]
fn argmax_argmin_break_ties_by_select_last_index_and_find_nan() {
    // [[1, 3, 3], [2, 2, 0]] along axis 1.
    let x = f32t(&[2, 3], &[1., 3., 3., 2., 2., 0.]);
    let axis1 = ("axis", Attr::Int(1));
    let first = run(
        &node(OpKind::ArgMax, 1, std::slice::from_ref(&axis1)),
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_eq!(first.shape, [2, 1]);
    assert_eq!(first.values::<i64>(), &[1, 0]);
    let last = [
        axis1.clone(),
        ("select_last_index", Attr::Int(1)),
        ("keepdims", Attr::Int(0)),
    ];
    let r = run(&node(OpKind::ArgMax, 1, &last), std::slice::from_ref(&x)).unwrap();
    assert_eq!(r.shape, [2]);
    assert_eq!(r.values::<i64>(), &[2, 1]);
    let r = run(&node(OpKind::ArgMin, 1, &[("axis", Attr::Int(0))]), &[x]).unwrap();
    assert_eq!(r.values::<i64>(), &[0, 1, 1]);
    let nan = f32t(&[4], &[1., NAN, 5., NAN]);
    let r = run(&node(OpKind::ArgMin, 1, &[]), &[nan]).unwrap();
    assert_eq!(r.values::<i64>(), &[1]);
    // An empty axis has no position: refused, not a panic.
    let empty = f32t(&[2, 0], &[]);
    assert!(run(&node(OpKind::ArgMax, 1, &[axis1]), &[empty]).is_err());
}

#[test]
fn further_reductions_and_their_empty_sets() {
    let x = f32t(&[2, 3], &[1., -2., 3., -4., 5., -6.]);
    let axis1 = [("axes", ints(&[1])), ("keepdims", Attr::Int(0))];
    let get = |op, x: &Tensor| run_f32(&node(op, 1, &axis1), std::slice::from_ref(x)).1;
    assert_bits(&get(OpKind::ReduceMin, &x), &[-2., -6.]);
    assert_bits(&get(OpKind::ReduceProd, &x), &[-6., 120.]);
    assert_bits(&get(OpKind::ReduceL1, &x), &[6., 15.]);
    assert_bits(&get(OpKind::ReduceSumSquare, &x), &[14., 77.]);
    assert_close(
        &get(OpKind::ReduceL2, &x),
        &[14f32.sqrt(), 77f32.sqrt()],
        1e-6,
    );
    // LogSumExp does not overflow: log(e^1000 + e^1000) = 1000 + ln 2.
    let big = f32t(&[1, 3], &[1000., 1000., -INF]);
    assert_close(&get(OpKind::ReduceLogSumExp, &big), &[1_000.693_2], 1e-3);
    let empty = f32t(&[2, 0], &[]);
    assert_bits(&get(OpKind::ReduceMin, &empty), &[INF, INF]);
    assert_bits(&get(OpKind::ReduceProd, &empty), &[1., 1.]);
    assert_bits(&get(OpKind::ReduceL2, &empty), &[0., 0.]);
    assert_bits(&get(OpKind::ReduceLogSumExp, &empty), &[-INF, -INF]);
    // Integer products wrap; bool ReduceMin is "all".
    let i = typed(DType::I32, &[1, 2], &[65536, 65536]);
    let r = run(&node(OpKind::ReduceProd, 1, &axis1), &[i]).unwrap();
    assert_eq!(r.values::<i32>(), &[0]);
    let b = typed(DType::Bool, &[2, 2], &[1u8, 1, 1, 0]);
    let r = run(&node(OpKind::ReduceMin, 1, &axis1), &[b]).unwrap();
    assert_eq!(bools(&r), [1, 0]);
}

#[test]
fn or_xor_hardmax_and_top_k() {
    let a = typed(DType::Bool, &[4], &[0u8, 0, 1, 1]);
    let b = typed(DType::Bool, &[4], &[0u8, 1, 0, 1]);
    let or = run(&node(OpKind::Or, 2, &[]), &[a.clone(), b.clone()]).unwrap();
    assert_eq!(bools(&or), [0, 1, 1, 1]);
    let xor = run(&node(OpKind::Xor, 2, &[]), &[a, b]).unwrap();
    assert_eq!(bools(&xor), [0, 1, 1, 0]);
    // The first of equal maxima, and NaN before any number.
    let x = f32t(&[2, 3], &[1., 3., 3., 2., NAN, 5.]);
    let h = run_f32(&node(OpKind::Hardmax, 1, &[]), std::slice::from_ref(&x)).1;
    assert_bits(&h, &[0., 1., 0., 0., 1., 0.]);
    let k2 = Tensor::from_i64(&[1], &[2]);
    let n = Node {
        outputs: vec![2, 3],
        ..node(OpKind::TopK, 2, &[])
    };
    let views = [x.view(), k2.view()];
    let (mut v, mut i) = (
        Tensor::zeros(DType::F32, &[2, 2]),
        Tensor::zeros(DType::I64, &[2, 2]),
    );
    run_node(&n, &views, &mut [v.view_mut(), i.view_mut()]).unwrap();
    assert_bits(v.f32s(), &[3., 3., NAN, 5.]);
    assert_eq!(i.values::<i64>(), &[1, 2, 1, 2]);
    let smallest = Node {
        outputs: vec![2, 3],
        ..node(
            OpKind::TopK,
            2,
            &[("largest", Attr::Int(0)), ("axis", Attr::Int(0))],
        )
    };
    run_node(&smallest, &views, &mut [v.view_mut(), i.view_mut()]).unwrap_err();
    let (mut v, mut i) = (
        Tensor::zeros(DType::F32, &[2, 3]),
        Tensor::zeros(DType::I64, &[2, 3]),
    );
    run_node(&smallest, &views, &mut [v.view_mut(), i.view_mut()]).unwrap();
    // Smallest first, NaN (the largest value) last.
    assert_bits(v.f32s(), &[1., 3., 3., 2., NAN, 5.]);
    assert_eq!(i.values::<i64>(), &[0, 0, 0, 1, 1, 1]);
}
