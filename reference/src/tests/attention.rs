//! Attention and RotaryEmbedding on operands small enough to work out by hand: keys at
//! scores 0 and ln 2 give softmax weights 1/3 and 2/3, so `Y` is a known mix of `V`.

use baton_delegate_api::TensorMut;

use super::*;

const LN2: f32 = std::f32::consts::LN_2;

/// Runs `n` into its first `outputs` outputs and returns them.
fn run_outputs(n: &Node, inputs: &[Tensor], outputs: usize) -> Result<Vec<Tensor>, KernelError> {
    let n = Node {
        outputs: (0..outputs).map(|k| 100 + k).collect(),
        ..n.clone()
    };
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    let outs = check_operands(&n, &views).and_then(|()| expected_outputs(&n, &views))?;
    let mut tensors: Vec<Tensor> = outs
        .iter()
        .take(outputs)
        .map(|(d, s)| Tensor::zeros(*d, s))
        .collect();
    let mut views_out: Vec<TensorMut<'_>> = tensors.iter_mut().map(Tensor::view_mut).collect();
    run_node(&n, &views, &mut views_out)?;
    Ok(tensors)
}

fn attention(inputs: &[Tensor], attrs: &[(&str, Attr)], outputs: usize) -> Vec<Tensor> {
    let n = node(OpKind::Attention, inputs.len(), attrs);
    run_outputs(&n, inputs, outputs).unwrap_or_else(|e| panic!("{e}"))
}

/// The absent operand of an omitted optional input.
fn absent() -> Tensor {
    f32t(&[0], &[])
}

#[test]
fn attention_weights_values_by_softmax_of_scores() {
    // One query (q = 1, D = 1, scale 1) against keys 0 and ln 2: weights 1/3, 2/3.
    let q = f32t(&[1, 1, 1, 1], &[1.]);
    let k = f32t(&[1, 1, 2, 1], &[0., LN2]);
    let v = f32t(&[1, 1, 2, 1], &[3., 6.]);
    let out = attention(&[q.clone(), k.clone(), v.clone()], &[], 4);
    assert_eq!(out[0].shape, vec![1, 1, 1, 1]);
    assert_close(out[0].f32s(), &[5.], 1e-6);
    // present_key and present_value are K and V; qk_matmul_output the scores.
    assert_bits(out[1].f32s(), k.f32s());
    assert_bits(out[2].f32s(), v.f32s());
    assert_close(out[3].f32s(), &[0., LN2], 1e-7);
    // The default scale is 1/sqrt(D): with D = 4 and q·k = 2 ln 2 the score is ln 2.
    let q = f32t(&[1, 1, 1, 4], &[1., 1., 0., 0.]);
    let k = f32t(&[1, 1, 2, 4], &[0., 0., 0., 0., LN2, LN2, 5., 5.]);
    let out = attention(&[q.clone(), k.clone(), v.clone()], &[], 1);
    assert_close(out[0].f32s(), &[5.], 1e-6);
    // An explicit scale replaces it: scale 0 gives equal weights.
    let out = attention(&[q, k, v], &[("scale", Attr::Float(0.))], 1);
    assert_close(out[0].f32s(), &[4.5], 1e-6);
}

#[test]
fn attention_causal_mask_counts_past_keys() {
    // Two queries (q = 1) over keys [0, ln 2]: query 0 sees key 0 only, query 1 both.
    let q = f32t(&[1, 1, 2, 1], &[1., 1.]);
    let k = f32t(&[1, 1, 2, 1], &[0., LN2]);
    let v = f32t(&[1, 1, 2, 1], &[3., 6.]);
    let causal = [("is_causal", Attr::Int(1))];
    let out = attention(&[q, k, v], &causal, 4);
    assert_close(out[0].f32s(), &[3., 5.], 1e-6);
    // The causal -inf is part of the bias (mode 1), not of the raw scores (mode 0).
    assert_close(out[3].f32s(), &[0., LN2, 0., LN2], 1e-7);
    let mode1 = [
        ("is_causal", Attr::Int(1)),
        ("qk_matmul_output_mode", Attr::Int(1)),
    ];
    let q = f32t(&[1, 1, 2, 1], &[1., 1.]);
    let k = f32t(&[1, 1, 2, 1], &[0., LN2]);
    let v = f32t(&[1, 1, 2, 1], &[3., 6.]);
    let out = attention(&[q, k, v], &mode1, 4);
    assert_close(out[3].f32s(), &[0., f32::NEG_INFINITY, 0., LN2], 1e-7);

    // With one past key (0, value 3) and new keys [ln 2, 0] (values 6, 9), query 0 sees
    // the past and the first new key, query 1 all three (weights 1/4, 1/2, 1/4).
    let q = f32t(&[1, 1, 2, 1], &[1., 1.]);
    let k = f32t(&[1, 1, 2, 1], &[LN2, 0.]);
    let v = f32t(&[1, 1, 2, 1], &[6., 9.]);
    let past_k = f32t(&[1, 1, 1, 1], &[0.]);
    let past_v = f32t(&[1, 1, 1, 1], &[3.]);
    let out = attention(&[q, k, v, absent(), past_k, past_v], &causal, 3);
    assert_close(out[0].f32s(), &[5., 6.], 1e-6);
    assert_eq!(out[1].shape, vec![1, 1, 3, 1]);
    assert_bits(out[1].f32s(), &[0., LN2, 0.]);
    assert_bits(out[2].f32s(), &[3., 6., 9.]);
}

#[test]
fn attention_gqa_repeats_each_kv_head_for_its_group() {
    // Four query heads over two key/value heads with one key each: Y is that key's value,
    // so heads 0 and 1 read kv head 0, heads 2 and 3 kv head 1.
    let q = f32t(&[1, 4, 1, 1], &[1., 2., 3., 4.]);
    let k = f32t(&[1, 2, 1, 1], &[1., 1.]);
    let v = f32t(&[1, 2, 1, 1], &[10., 20.]);
    let out = attention(&[q, k, v], &[], 1);
    assert_eq!(out[0].shape, vec![1, 4, 1, 1]);
    assert_bits(out[0].f32s(), &[10., 10., 20., 20.]);
    // Query heads that are not a multiple of the key/value heads are refused.
    let q = f32t(&[1, 3, 1, 1], &[1., 2., 3.]);
    let k = f32t(&[1, 2, 1, 1], &[1., 1.]);
    let v = f32t(&[1, 2, 1, 1], &[10., 20.]);
    let n = node(OpKind::Attention, 3, &[]);
    assert!(matches!(
        run_outputs(&n, &[q, k, v], 1),
        Err(KernelError::Shape { .. })
    ));
}

#[test]
fn attention_softcap_precedes_the_mask() {
    // Scores [2, 0] capped at 1: [tanh 2, 0]; weight of key 0 = sigmoid(tanh 2).
    let q = f32t(&[1, 1, 1, 1], &[2.]);
    let k = f32t(&[1, 1, 2, 1], &[1., 0.]);
    let v = f32t(&[1, 1, 2, 1], &[1., 0.]);
    let cap = [("softcap", Attr::Float(1.))];
    let out = attention(&[q.clone(), k.clone(), v.clone()], &cap, 4);
    assert_close(out[3].f32s(), &[0.964_027_6, 0.], 1e-7);
    assert_close(out[0].f32s(), &[0.723_927_5], 1e-6);
    // A -inf mask entry stays -inf after the cap: key 0 gets all the weight.
    let mask = f32t(&[1, 2], &[0., f32::NEG_INFINITY]);
    let attrs = [
        ("softcap", Attr::Float(1.)),
        ("qk_matmul_output_mode", Attr::Int(3)),
    ];
    let out = attention(&[q.clone(), k.clone(), v.clone(), mask.clone()], &attrs, 4);
    assert_bits(out[0].f32s(), &[1.]);
    assert_bits(out[3].f32s(), &[1., 0.]);
    // Mode 2 is the capped scores plus the bias; mode 1 with a softcap leaves the bias
    // out (ONNX's reference and test data).
    let mode = |m: i64| {
        [
            ("softcap", Attr::Float(1.)),
            ("qk_matmul_output_mode", Attr::Int(m)),
        ]
    };
    let inputs = [q, k, v, mask];
    let out = attention(&inputs, &mode(2), 4);
    assert_close(out[3].f32s(), &[0.964_027_6, f32::NEG_INFINITY], 1e-7);
    let out = attention(&inputs, &mode(1), 4);
    assert_close(out[3].f32s(), &[0.964_027_6, 0.], 1e-7);
}

#[test]
fn attention_masks_broadcast_and_pad() {
    // q = 0: every score is 0, so Y is the mean of the keys the mask lets through.
    let q = f32t(&[2, 1, 1, 1], &[0., 0.]);
    let k = f32t(&[2, 1, 2, 1], &[0.; 4]);
    let v = f32t(&[2, 1, 2, 1], &[3., 6., 3., 6.]);
    // A bool mask per batch: batch 0 keeps key 0, batch 1 key 1.
    let bool_mask = typed(DType::Bool, &[2, 1, 1, 2], &[1u8, 0, 0, 1]);
    let out = attention(&[q.clone(), k.clone(), v.clone(), bool_mask], &[], 1);
    assert_bits(out[0].f32s(), &[3., 6.]);
    // A 2-D float mask broadcasts over batch and heads: weights 1/3, 2/3 in both.
    let float_mask = f32t(&[1, 2], &[0., LN2]);
    let out = attention(&[q.clone(), k.clone(), v.clone(), float_mask], &[], 1);
    assert_close(out[0].f32s(), &[5., 5.], 1e-6);
    // A mask shorter than the keys masks the rest.
    let short = f32t(&[1, 1], &[0.]);
    let out = attention(&[q.clone(), k.clone(), v.clone(), short], &[], 1);
    assert_bits(out[0].f32s(), &[3., 3.]);
    // A query whose keys are all masked gets NaN, as ONNX's reference computes.
    let none = typed(DType::Bool, &[1, 2], &[0u8, 0]);
    let out = attention(&[q.clone(), k.clone(), v.clone(), none], &[], 1);
    assert!(out[0].f32s().iter().all(|y| y.is_nan()));
    // nonpad_kv_seqlen keeps the first 1 and 2 keys of the two batches.
    let nonpad = typed(DType::I64, &[2], &[1i64, 2]);
    let (pk, pv) = (absent(), absent());
    let out = attention(&[q, k, v, absent(), pk, pv, nonpad], &[], 1);
    assert_close(out[0].f32s(), &[3., 4.5], 1e-6);
}

#[test]
fn attention_3d_operands_split_and_merge_heads() {
    // [B=1, S=2, Hq*D = 2] with two heads of size 1, two keys of score 0 per head: Y is
    // the mean of each head's values, written back head-minor.
    let q = f32t(&[1, 2, 2], &[0.; 4]);
    let k = f32t(&[1, 2, 2], &[0.; 4]);
    // V rows are (key, head): key 0 [1, 10], key 1 [3, 30].
    let v = f32t(&[1, 2, 2], &[1., 10., 3., 30.]);
    let heads = [
        ("q_num_heads", Attr::Int(2)),
        ("kv_num_heads", Attr::Int(2)),
    ];
    let out = attention(&[q.clone(), k.clone(), v.clone()], &heads, 3);
    assert_eq!(out[0].shape, vec![1, 2, 2]);
    assert_close(out[0].f32s(), &[2., 20., 2., 20.], 1e-6);
    // present_value is 4-D [B, H, T, Dv]: head 0's values, then head 1's.
    assert_eq!(out[2].shape, vec![1, 2, 2, 1]);
    assert_bits(out[2].f32s(), &[1., 3., 10., 30.]);
    // 3-D operands need both head counts.
    let n = node(OpKind::Attention, 3, &heads[..1]);
    assert!(run_outputs(&n, &[q, k, v], 1).is_err());
}

#[test]
fn attention_f16_computes_in_wider_precision() {
    let q = f16t(&[1, 1, 1, 1], &[1.]);
    let k = f16t(&[1, 1, 2, 1], &[0., LN2]);
    let v = f16t(&[1, 1, 2, 1], &[3., 6.]);
    let out = attention(&[q, k, v], &[], 1);
    assert_eq!(out[0].dtype, DType::F16);
    // ln 2 rounds to f16 (0.69287...), so the weights move slightly off 1/3, 2/3.
    assert_close(&f16_values(&out[0]), &[5.], 3e-3);
}

fn rotary(inputs: &[Tensor], attrs: &[(&str, Attr)]) -> Result<Tensor, KernelError> {
    run(&node(OpKind::RotaryEmbedding, inputs.len(), attrs), inputs)
}

#[test]
fn rotary_embedding_rotates_halves_or_pairs() {
    // Angle π/2 for the first pair (cos 0, sin 1), 0 for the second (cos 1, sin 0).
    let x = f32t(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
    let cos = f32t(&[1, 1, 2], &[0., 1.]);
    let sin = f32t(&[1, 1, 2], &[1., 0.]);
    // Halves: pairs (x0, x2) and (x1, x3); (1, 3) turns to (-3, 1).
    let y = rotary(&[x.clone(), cos.clone(), sin.clone()], &[]).unwrap();
    assert_bits(y.f32s(), &[-3., 2., 1., 4.]);
    // Interleaved: pairs (x0, x1) and (x2, x3); (1, 2) turns to (-2, 1).
    let inter = [("interleaved", Attr::Int(1))];
    let y = rotary(&[x.clone(), cos, sin], &inter).unwrap();
    assert_bits(y.f32s(), &[-2., 1., 3., 4.]);
    // position_ids pick cache rows: row 2 holds the quarter turn, row 0 the identity.
    let cos = f32t(&[3, 1], &[1., 1., 0.]);
    let sin = f32t(&[3, 1], &[0., 0., 1.]);
    let partial = [("rotary_embedding_dim", Attr::Int(2))];
    let pos = typed(DType::I64, &[1, 1], &[2i64]);
    let y = rotary(&[x.clone(), cos.clone(), sin.clone(), pos], &partial).unwrap();
    // Only the first two elements rotate; the rest are copied.
    assert_bits(y.f32s(), &[-2., 1., 3., 4.]);
    let pos = typed(DType::I64, &[1, 1], &[0i64]);
    let y = rotary(&[x.clone(), cos.clone(), sin.clone(), pos], &partial).unwrap();
    assert_bits(y.f32s(), &[1., 2., 3., 4.]);
    // A position outside the cache is an error, not a read out of bounds.
    let pos = typed(DType::I64, &[1, 1], &[3i64]);
    assert!(matches!(
        rotary(&[x, cos, sin, pos], &partial),
        Err(KernelError::Arithmetic { .. })
    ));
}

#[test]
fn rotary_embedding_3d_splits_heads() {
    // Two heads of size 2 in [B=1, S=1, 4], both turned a quarter.
    let x = f32t(&[1, 1, 4], &[1., 2., 3., 4.]);
    let cos = f32t(&[1, 1, 1], &[0.]);
    let sin = f32t(&[1, 1, 1], &[1.]);
    let y = rotary(
        &[x.clone(), cos.clone(), sin.clone()],
        &[("num_heads", Attr::Int(2))],
    )
    .unwrap();
    assert_eq!(y.shape, vec![1, 1, 4]);
    assert_bits(y.f32s(), &[-2., 1., -4., 3.]);
    // Without num_heads a 3-D X cannot be split.
    assert!(matches!(
        rotary(&[x, cos, sin], &[]),
        Err(KernelError::Shape { .. })
    ));
    // f16 in, f16 out.
    let x = f16t(&[1, 1, 1, 2], &[1., 2.]);
    let y = rotary(&[x, f16t(&[1, 1, 1], &[0.]), f16t(&[1, 1, 1], &[1.])], &[]).unwrap();
    assert_eq!(f16_values(&y), vec![-2., 1.]);
}
