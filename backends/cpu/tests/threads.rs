//! Results do not depend on the thread count: every output element is summed in the same
//! order whichever thread computes it, so 1, 2 and 3 threads agree bit for bit.

mod common;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind};
use baton_delegate_api::testing::{run, Rng};
use baton_delegate_api::{Delegate, Options, Tensor};

fn delegate(threads: usize) -> CpuDelegate {
    let opts = Options::validate(
        &CpuDelegate::options(),
        &[("threads".to_string(), threads.to_string())],
    )
    .expect("valid options");
    let d = CpuDelegate::create(&opts).expect("create");
    assert_eq!(d.threads(), threads);
    d
}

#[test]
fn one_and_many_threads_agree_bit_for_bit() {
    let mut rng = Rng::new(21);
    let mut g = GraphBuilder::new("threads");
    let x = g.input_fixed("x", DType::F32, &[2, 8, 30, 33]);
    let pads = ("pads", Attr::Ints(vec![1; 4]));
    // im2col conv, depthwise (stride 2), pointwise, then a batched MatMul and an LSTM.
    let w1 = g.constant_f32("w1", &[24, 8, 3, 3], &rng.vec(24 * 8 * 9));
    let b1 = g.constant_f32("b1", &[24], &rng.vec(24));
    let c1 = g
        .node(OpKind::Conv, &[x, w1, b1], std::slice::from_ref(&pads))
        .unwrap();
    let r1 = g.node(OpKind::Relu, &[c1], &[]).unwrap();
    let wd = g.constant_f32("wd", &[24, 1, 3, 3], &rng.vec(24 * 9));
    let dw = g
        .node(
            OpKind::Conv,
            &[r1, wd],
            &[
                ("group", Attr::Int(24)),
                ("strides", Attr::Ints(vec![2, 2])),
                pads,
            ],
        )
        .unwrap();
    let wp = g.constant_f32("wp", &[40, 24, 1, 1], &rng.vec(40 * 24));
    let pw = g.node(OpKind::Conv, &[dw, wp], &[]).unwrap();
    let shape = g.constant_i64("shape", &[3], &[2, 40, 15 * 17]);
    let flat = g.node(OpKind::Reshape, &[pw, shape], &[]).unwrap();
    let wm = g.constant_f32("wm", &[255, 37], &rng.vec(255 * 37));
    let mm = g.node(OpKind::MatMul, &[flat, wm], &[]).unwrap();
    let perm = ("perm", Attr::Ints(vec![1, 0, 2]));
    let seq = g.node(OpKind::Transpose, &[mm], &[perm]).unwrap();
    let hidden = 16;
    let wl = g.constant_f32("wl", &[1, 4 * hidden, 37], &rng.vec(4 * hidden * 37));
    let rl = g.constant_f32(
        "rl",
        &[1, 4 * hidden, hidden],
        &rng.vec(4 * hidden * hidden),
    );
    let lstm = g
        .named_node_outputs(
            "lstm",
            OpKind::LSTM,
            &[seq, wl, rl],
            &[("hidden_size", Attr::Int(hidden as i64))],
            1,
        )
        .unwrap();
    g.output(pw);
    g.output(lstm[0]);
    let graph = g.finish().unwrap();
    let input = Tensor::from_f32(&[2, 8, 30, 33], &rng.vec(2 * 8 * 30 * 33));

    let one = run(&delegate(1), &graph, std::slice::from_ref(&input)).expect("1 thread");
    for threads in [2, 3] {
        let many = run(&delegate(threads), &graph, std::slice::from_ref(&input)).expect("run");
        for (a, b) in one.iter().zip(&many) {
            let bits = |t: &Tensor| t.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{threads} threads differ from 1");
        }
    }
}

/// Element-wise ops, Softmax and LayerNorm large enough to be shared among the threads
/// (split by whole rows) agree bit for bit with one thread, including uneven splits.
#[test]
fn row_split_ops_agree_bit_for_bit() {
    let mut rng = Rng::new(22);
    let (rows, n) = (301, 257);
    let mut g = GraphBuilder::new("rows");
    let x = g.input_fixed("x", DType::F32, &[rows, n]);
    let sm = g.node(OpKind::Softmax, &[x], &[]).unwrap();
    let scale = g.constant_f32("scale", &[n], &rng.vec(n));
    let bias = g.constant_f32("bias", &[n], &rng.vec(n));
    let ln = g
        .node(OpKind::LayerNormalization, &[x, scale, bias], &[])
        .unwrap();
    let erf = g.node(OpKind::Erf, &[ln], &[]).unwrap();
    let hs = g.node(OpKind::HardSwish, &[x], &[]).unwrap();
    for t in [sm, erf, hs] {
        g.output(t);
    }
    let graph = g.finish().unwrap();
    let input = Tensor::from_f32(&[rows, n], &rng.vec(rows * n));
    let one = run(&delegate(1), &graph, std::slice::from_ref(&input)).expect("1 thread");
    for threads in [2, 3] {
        let many = run(&delegate(threads), &graph, std::slice::from_ref(&input)).expect("run");
        for (a, b) in one.iter().zip(&many) {
            let bits = |t: &Tensor| t.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{threads} threads differ from 1");
        }
    }
}

/// Attention runs one task per (batch, head), each on its worker's scratch: 2 and 3
/// threads (uneven shares of 2 x 6 heads) agree bit for bit with one, on every output.
#[test]
fn attention_heads_agree_bit_for_bit() {
    let mut rng = Rng::new(23);
    let (b, s, l, p, hq, hkv, d) = (2, 5, 7, 3, 6, 2, 16);
    let mut g = GraphBuilder::new("attention");
    let q = g.input_fixed("q", DType::F32, &[b, s, hq * d]);
    let k = g.input_fixed("k", DType::F32, &[b, l, hkv * d]);
    let v = g.input_fixed("v", DType::F32, &[b, l, hkv * d]);
    let mask = g.constant_f32("mask", &[s, p + l], &rng.vec(s * (p + l)));
    let pk = g.input_fixed("pk", DType::F32, &[b, hkv, p, d]);
    let pv = g.input_fixed("pv", DType::F32, &[b, hkv, p, d]);
    let heads = [
        ("q_num_heads", Attr::Int(hq as i64)),
        ("kv_num_heads", Attr::Int(hkv as i64)),
        ("is_causal", Attr::Int(1)),
    ];
    let outs = g
        .named_node_outputs(
            "attn",
            OpKind::Attention,
            &[q, k, v, mask, pk, pv],
            &heads,
            4,
        )
        .unwrap();
    for t in outs {
        g.output(t);
    }
    let graph = g.finish().unwrap();
    let inputs = [
        Tensor::from_f32(&[b, s, hq * d], &rng.vec(b * s * hq * d)),
        Tensor::from_f32(&[b, l, hkv * d], &rng.vec(b * l * hkv * d)),
        Tensor::from_f32(&[b, l, hkv * d], &rng.vec(b * l * hkv * d)),
        Tensor::from_f32(&[b, hkv, p, d], &rng.vec(b * hkv * p * d)),
        Tensor::from_f32(&[b, hkv, p, d], &rng.vec(b * hkv * p * d)),
    ];
    let one = run(&delegate(1), &graph, &inputs).expect("1 thread");
    for threads in [2, 3] {
        let many = run(&delegate(threads), &graph, &inputs).expect("run");
        for (a, b) in one.iter().zip(&many) {
            let bits = |t: &Tensor| t.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{threads} threads differ from 1");
        }
    }
}
