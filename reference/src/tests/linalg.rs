use super::*;

fn a23() -> Tensor {
    f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.])
}

fn b32() -> Tensor {
    f32t(&[3, 2], &[7., 8., 9., 10., 11., 12.])
}

#[test]
fn matmul_2x3_by_3x2() {
    let (shape, got) = run_f32(&node(OpKind::MatMul, 2, &[]), &[a23(), b32()]);
    assert_eq!(shape, vec![2, 2]);
    // [1*7+2*9+3*11, 1*8+2*10+3*12; 4*7+5*9+6*11, 4*8+5*10+6*12]
    assert_bits(&got, &[58., 64., 139., 154.]);
}

#[test]
fn matmul_promotes_1d_operands() {
    let v = f32t(&[3], &[1., 2., 3.]);
    let (shape, got) = run_f32(&node(OpKind::MatMul, 2, &[]), &[v.clone(), b32()]);
    assert_eq!(shape, vec![2]);
    assert_bits(&got, &[58., 64.]);
    let ones = f32t(&[3], &[1., 1., 1.]);
    let (shape, got) = run_f32(&node(OpKind::MatMul, 2, &[]), &[a23(), ones]);
    assert_eq!(shape, vec![2]);
    assert_bits(&got, &[6., 15.]);
    let w = f32t(&[3], &[4., 5., 6.]);
    let (shape, got) = run_f32(&node(OpKind::MatMul, 2, &[]), &[v, w]);
    assert_eq!(shape, Vec::<usize>::new());
    assert_bits(&got, &[32.]);
}

#[test]
fn matmul_broadcasts_batches() {
    // a: batches [2,1] of 1x2 rows; b: batch [3] of 2x1 columns.
    let a = f32t(&[2, 1, 1, 2], &[1., 2., 3., 4.]);
    let b = f32t(&[3, 2, 1], &[1., 0., 0., 1., 1., 1.]);
    let (shape, got) = run_f32(&node(OpKind::MatMul, 2, &[]), &[a, b]);
    assert_eq!(shape, vec![2, 3, 1, 1]);
    // a_i . b_j: [1,2].[1,0]=1, [1,2].[0,1]=2, [1,2].[1,1]=3, then 3, 4, 7.
    assert_bits(&got, &[1., 2., 3., 3., 4., 7.]);
    // A 3-D batch times a shared 2-D matrix, and a 1-D vector against a batch.
    let a = f32t(&[2, 1, 2], &[1., 2., 3., 4.]);
    let b = f32t(&[2, 2], &[1., 1., 0., 1.]);
    let (shape, got) = run_f32(&node(OpKind::MatMul, 2, &[]), &[a.clone(), b]);
    assert_eq!(shape, vec![2, 1, 2]);
    assert_bits(&got, &[1., 3., 3., 7.]);
    let v = f32t(&[1], &[10.]);
    let (shape, got) = run_f32(
        &node(OpKind::MatMul, 2, &[]),
        &[f32t(&[2, 3, 1], &iota(6)), v],
    );
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&got, &[10., 20., 30., 40., 50., 60.]);
}

#[test]
fn matmul_empty_dims() {
    // K = 0: every entry is an empty sum.
    let (shape, got) = run_f32(
        &node(OpKind::MatMul, 2, &[]),
        &[f32t(&[2, 0], &[]), f32t(&[0, 3], &[])],
    );
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&got, &[0.; 6]);
    let (shape, got) = run_f32(
        &node(OpKind::MatMul, 2, &[]),
        &[f32t(&[0, 2, 2], &[]), f32t(&[2, 2], &[1.; 4])],
    );
    assert_eq!(shape, vec![0, 2, 2]);
    assert!(got.is_empty());
}

#[test]
fn matmul_accumulates_in_f64() {
    // In f32, 1e8 + 1 == 1e8, so an f32 accumulator returns 0.
    let a = f32t(&[1, 3], &[1e8, 1., -1e8]);
    let b = f32t(&[3, 1], &[1., 1., 1.]);
    let (_, got) = run_f32(&node(OpKind::MatMul, 2, &[]), &[a, b]);
    assert_bits(&got, &[1.]);
}

#[test]
fn matmul_and_softmax_of_f64_keep_f64() {
    // 1 + 2^-40 is not an f32; the product [1 + 2^-40, 1] · [1, 1] is 2 + 2^-40 exactly.
    let tiny = 2f64.powi(-40);
    let a = typed(DType::F64, &[1, 2], &[1.0 + tiny, 1.0]);
    let b = typed(DType::F64, &[2, 1], &[1.0f64, 1.0]);
    let out = run(&node(OpKind::MatMul, 2, &[]), &[a, b]).unwrap();
    assert_eq!(out.dtype, DType::F64);
    assert_eq!(out.values::<f64>(), [2.0 + tiny]);
    // Softmax of [0, ln 3] is [1/4, 3/4], within f64 rounding.
    let x = typed(DType::F64, &[2], &[0.0f64, 3f64.ln()]);
    let out = run(&node(OpKind::Softmax, 1, &[]), &[x]).unwrap();
    let got = out.values::<f64>();
    assert!(
        (got[0] - 0.25).abs() < 1e-15 && (got[1] - 0.75).abs() < 1e-15,
        "{got:?}"
    );
}

#[test]
fn matmul_f16() {
    let a = f16t(&[1, 2], &[1.5, 2.]);
    let b = f16t(&[2, 1], &[2., 0.25]);
    let out = run(&node(OpKind::MatMul, 2, &[]), &[a, b]).unwrap();
    assert_eq!(f16_values(&out), vec![3.5]);
}

#[test]
fn gemm_alpha_beta_and_broadcast_c() {
    let n = node(
        OpKind::Gemm,
        3,
        &[("alpha", Attr::Float(2.)), ("beta", Attr::Float(3.))],
    );
    let c = f32t(&[2], &[1., -1.]);
    let (shape, got) = run_f32(&n, &[a23(), b32(), c]);
    assert_eq!(shape, vec![2, 2]);
    // 2*[58,64;139,154] + 3*[1,-1]
    assert_bits(&got, &[119., 125., 281., 305.]);

    let plain = node(OpKind::Gemm, 3, &[]);
    let (_, got) = run_f32(&plain, &[a23(), b32(), f32t(&[], &[10.])]);
    assert_bits(&got, &[68., 74., 149., 164.]);
    let (_, got) = run_f32(&plain, &[a23(), b32(), f32t(&[2, 1], &[1., 2.])]);
    assert_bits(&got, &[59., 65., 141., 156.]);
    let (_, got) = run_f32(&plain, &[a23(), b32(), f32t(&[2, 2], &[1., 2., 3., 4.])]);
    assert_bits(&got, &[59., 66., 142., 158.]);
}

#[test]
fn gemm_transposes() {
    let at = f32t(&[3, 2], &[1., 4., 2., 5., 3., 6.]);
    let bt = f32t(&[2, 3], &[7., 9., 11., 8., 10., 12.]);
    let n = node(
        OpKind::Gemm,
        2,
        &[("transA", Attr::Int(1)), ("transB", Attr::Int(1))],
    );
    let (shape, got) = run_f32(&n, &[at.clone(), bt.clone()]);
    assert_eq!(shape, vec![2, 2]);
    assert_bits(&got, &[58., 64., 139., 154.]);
    let n = node(OpKind::Gemm, 2, &[("transA", Attr::Int(1))]);
    let (_, got) = run_f32(&n, &[at, b32()]);
    assert_bits(&got, &[58., 64., 139., 154.]);
    let n = node(OpKind::Gemm, 2, &[("transB", Attr::Int(1))]);
    let (_, got) = run_f32(&n, &[a23(), bt]);
    assert_bits(&got, &[58., 64., 139., 154.]);
}

#[test]
fn gemm_beta_zero_ignores_c_and_empty_k() {
    let n = node(OpKind::Gemm, 3, &[("beta", Attr::Float(0.))]);
    let c = f32t(&[2, 2], &[f32::NAN, f32::INFINITY, 1., 1.]);
    let (_, got) = run_f32(&n, &[a23(), b32(), c]);
    assert_bits(&got, &[58., 64., 139., 154.]);
    // K = 0: Y = beta * C.
    let n = node(OpKind::Gemm, 3, &[("beta", Attr::Float(0.5))]);
    let (shape, got) = run_f32(
        &n,
        &[
            f32t(&[2, 0], &[]),
            f32t(&[0, 2], &[]),
            f32t(&[2], &[4., 6.]),
        ],
    );
    assert_eq!(shape, vec![2, 2]);
    assert_bits(&got, &[2., 3., 2., 3.]);
    // M = 0.
    let (shape, _) = run_f32(&node(OpKind::Gemm, 2, &[]), &[f32t(&[0, 3], &[]), b32()]);
    assert_eq!(shape, vec![0, 2]);
}
