//! LinearAttention on operands small enough to follow the recurrence by hand: one- and
//! two-dimensional keys and values, gates of ln 2 (the state doubles) and -ln 2 (it
//! halves). Each test spells out the state after every token.

use baton_delegate_api::TensorMut;

use super::*;

const LN2: f32 = std::f32::consts::LN_2;

/// Runs a LinearAttention node with `attrs` on `inputs`; returns `output` and
/// `present_state`.
fn linear(inputs: &[Tensor], attrs: &[(&str, Attr)]) -> Result<Vec<Tensor>, KernelError> {
    let mut n = node(OpKind::LinearAttention, inputs.len(), attrs);
    n.outputs = vec![100, 101];
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    let outs = check_operands(&n, &views).and_then(|()| expected_outputs(&n, &views))?;
    let mut tensors: Vec<Tensor> = outs.iter().map(|(d, s)| Tensor::zeros(*d, s)).collect();
    let mut views_out: Vec<TensorMut<'_>> = tensors.iter_mut().map(Tensor::view_mut).collect();
    run_node(&n, &views, &mut views_out)?;
    Ok(tensors)
}

fn attrs(q_heads: i64, kv_heads: i64, rule: &str, scale: f32) -> Vec<(&'static str, Attr)> {
    vec![
        ("q_num_heads", Attr::Int(q_heads)),
        ("kv_num_heads", Attr::Int(kv_heads)),
        ("update_rule", Attr::Str(rule.into())),
        ("scale", Attr::Float(scale)),
    ]
}

/// The operand of an omitted optional input.
fn absent() -> Tensor {
    f32t(&[0], &[])
}

#[test]
fn linear_accumulates_outer_products_and_reads_them_scaled() {
    // One head, d_k 2, d_v 1; keys [1, 0] then [0, 1], values 2 then 3.
    // t0: S = [[2], [0]], q [1, 0] reads 2. t1: S = [[2], [3]], q [1, 1] reads 5.
    let q = f32t(&[1, 2, 2], &[1., 0., 1., 1.]);
    let k = f32t(&[1, 2, 2], &[1., 0., 0., 1.]);
    let v = f32t(&[1, 2, 1], &[2., 3.]);
    let out = linear(
        &[q.clone(), k.clone(), v.clone()],
        &attrs(1, 1, "linear", 1.),
    )
    .unwrap();
    assert_eq!(out[0].shape, [1, 2, 1]);
    assert_eq!(out[0].f32s(), [2., 5.]);
    assert_eq!(out[1].shape, [1, 1, 2, 1]);
    assert_eq!(out[1].f32s(), [2., 3.]);
    // Scale 0 (the default) means 1 / sqrt(d_k) = 1 / sqrt(2).
    let out = linear(&[q, k, v], &attrs(1, 1, "linear", 0.)).unwrap();
    let r = std::f32::consts::FRAC_1_SQRT_2;
    assert_close(out[0].f32s(), &[2. * r, 5. * r], 1e-6);
}

#[test]
fn gated_decays_per_head_or_per_key_dimension() {
    // Past state [[1], [1]]; keys [1, 0], [0, 1]; values 2, 3; queries [1, 0], [1, 1].
    let q = f32t(&[1, 2, 2], &[1., 0., 1., 1.]);
    let k = f32t(&[1, 2, 2], &[1., 0., 0., 1.]);
    let v = f32t(&[1, 2, 1], &[2., 3.]);
    let past = f32t(&[1, 1, 2, 1], &[1., 1.]);
    // Per head, gates ln 2 then -ln 2:
    // t0: S = 2 [[1], [1]] + [[2], [0]] = [[4], [2]], read 4.
    // t1: S = [[2], [1]] + [[0], [3]] = [[2], [4]], read 6.
    let decay = f32t(&[1, 2, 1], &[LN2, -LN2]);
    let inputs = [q.clone(), k.clone(), v.clone(), past.clone(), decay];
    let out = linear(&inputs, &attrs(1, 1, "gated", 1.)).unwrap();
    assert_close(out[0].f32s(), &[4., 6.], 1e-6);
    assert_close(out[1].f32s(), &[2., 4.], 1e-6);
    // Per key dimension, t0 gates [ln 2, 0], t1 [0, -ln 2]: row i of S scales by its own.
    // t0: S = [[2], [1]] + [[2], [0]] = [[4], [1]], read 4.
    // t1: S = [[4], [0.5]] + [[0], [3]] = [[4], [3.5]], read 7.5.
    let decay = f32t(&[1, 2, 2], &[LN2, 0., 0., -LN2]);
    let out = linear(&[q, k, v, past, decay], &attrs(1, 1, "gated", 1.)).unwrap();
    assert_close(out[0].f32s(), &[4., 7.5], 1e-6);
    assert_close(out[1].f32s(), &[4., 3.5], 1e-6);
}

#[test]
fn delta_writes_the_correction_and_query_heads_share_a_state() {
    // GQA: 2 query heads read 1 key/value head; d_k 1, d_v 2; beta 0.5 then 0.25.
    // t0: S = [0, 0], Sᵀk = [0, 0], write 0.5 ([1, 2] - 0) = [0.5, 1], S = 1 [0.5, 1].
    //     Heads read 1 S = [0.5, 1] and -1 S = [-0.5, -1].
    // t1: Sᵀk = 2 [0.5, 1] = [1, 2], write 0.25 ([3, 4] - [1, 2]) = [0.5, 0.5],
    //     S = [0.5, 1] + 2 [0.5, 0.5] = [1.5, 2]. Heads read 2 S = [3, 4] and 1 S.
    let q = f32t(&[1, 2, 2], &[1., -1., 2., 1.]);
    let k = f32t(&[1, 2, 1], &[1., 2.]);
    let v = f32t(&[1, 2, 2], &[1., 2., 3., 4.]);
    let beta = f32t(&[1, 2, 1], &[0.5, 0.25]);
    let inputs = [q, k, v, absent(), absent(), beta];
    let out = linear(&inputs, &attrs(2, 1, "delta", 1.)).unwrap();
    assert_eq!(out[0].shape, [1, 2, 4]);
    assert_eq!(out[0].f32s(), [0.5, 1., -0.5, -1., 3., 4., 1.5, 2.]);
    assert_eq!(out[1].shape, [1, 1, 1, 2]);
    assert_eq!(out[1].f32s(), [1.5, 2.]);
}

#[test]
fn gated_delta_corrects_against_the_decayed_state() {
    // Two heads, d_k = d_v = 1, one token; past [2, 0], gates -ln 2 and 0, beta per head
    // 0.5 and 1; keys 1, 1; values 4, 2; queries 1, 3.
    // Head 0: S' = 1, Sᵀk = 1, write 0.5 (4 - 1) = 1.5, S = 2.5, read 2.5.
    // Head 1: S' = 0, write 1 (2 - 0) = 2, S = 2, read 6.
    let q = f32t(&[1, 1, 2], &[1., 3.]);
    let k = f32t(&[1, 1, 2], &[1., 1.]);
    let v = f32t(&[1, 1, 2], &[4., 2.]);
    let past = f32t(&[1, 2, 1, 1], &[2., 0.]);
    let decay = f32t(&[1, 1, 2], &[-LN2, 0.]);
    let beta = f32t(&[1, 1, 2], &[0.5, 1.]);
    let inputs = [q, k, v, past, decay, beta];
    let out = linear(&inputs, &attrs(2, 2, "gated_delta", 1.)).unwrap();
    assert_close(out[0].f32s(), &[2.5, 6.], 1e-6);
    assert_close(out[1].f32s(), &[2.5, 2.], 1e-6);
}

#[test]
fn f16_operands_with_an_f32_state() {
    // The linear case above in f16 with an f32 past state of zeros: output f16, state f32.
    let h = |shape: &[usize], v: &[f32]| {
        let bits: Vec<u16> = v.iter().map(|&x| f16::from_f32(x).to_bits()).collect();
        typed(DType::F16, shape, &bits)
    };
    let q = h(&[1, 2, 2], &[1., 0., 1., 1.]);
    let k = h(&[1, 2, 2], &[1., 0., 0., 1.]);
    let v = h(&[1, 2, 1], &[2., 3.]);
    let past = f32t(&[1, 1, 2, 1], &[0., 0.]);
    let out = linear(&[q, k, v, past], &attrs(1, 1, "linear", 1.)).unwrap();
    assert_eq!(out[0].dtype, DType::F16);
    let read: Vec<f32> = bytemuck::pod_collect_to_vec::<u8, u16>(out[0].bytes())
        .into_iter()
        .map(|b| f16::from_bits(b).to_f32())
        .collect();
    assert_eq!(read, [2., 5.]);
    assert_eq!(out[1].dtype, DType::F32);
    assert_eq!(out[1].f32s(), [2., 3.]);
}

#[test]
fn operands_that_do_not_fit_the_rule_are_errors() {
    let q = f32t(&[1, 1, 2], &[1., 1.]);
    let k = f32t(&[1, 1, 2], &[1., 1.]);
    let v = f32t(&[1, 1, 2], &[1., 1.]);
    // The default rule, gated_delta, needs decay and beta.
    let e = linear(
        &[q.clone(), k.clone(), v.clone()],
        &attrs(2, 2, "gated_delta", 0.),
    );
    assert!(e.unwrap_err().to_string().contains("decay"));
    // beta given to the linear rule.
    let beta = f32t(&[1, 1, 2], &[1., 1.]);
    let inputs = [q.clone(), k.clone(), v.clone(), absent(), absent(), beta];
    assert!(linear(&inputs, &attrs(2, 2, "linear", 0.)).is_err());
    // A value that does not split into the key/value heads.
    let v3 = f32t(&[1, 1, 3], &[1., 1., 1.]);
    assert!(linear(&[q, k, v3], &attrs(2, 2, "linear", 0.)).is_err());
}
