//! Results do not depend on the thread count: every output element is summed in the same
//! order whichever thread computes it, so 1, 2 and 3 threads agree bit for bit.

mod common;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind, TensorData};
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

/// Sums down columns split among the threads by blocks of columns: ReduceMean and
/// ReduceSum over the middle axes (a channels-last model's mean over H and W: 77 columns,
/// so blocks of 16 and a short last one, and two outer blocks) and a GlobalAveragePool of
/// a convolution's channels-last result agree bit for bit with one thread. Each mean is
/// the f64 sum in the order of a contiguous run's (four running sums by pixel index
/// modulo 4, the pixels past the last four apart), whichever way the image is held: the
/// pool of the conv's NHWC result (a 1x1 conv that copies 48 of the channels) has the
/// bits of a pool of the NCHW planes. A column whose sum depends on that order (`1e20, 1,
/// -1e20, 1` first: 0 in that order, the rest's sum in line order) tells the orders apart.
#[test]
fn column_sums_agree_bit_for_bit() {
    let mut rng = Rng::new(24);
    let (n, h, w, c) = (2, 23, 31, 77);
    let mut g = GraphBuilder::new("columns");
    let x = g.input_fixed("x", DType::F32, &[n, h, w, c]);
    let axes = [("axes", Attr::Ints(vec![1, 2]))];
    let mean = g.node(OpKind::ReduceMean, &[x], &axes).unwrap();
    let sum = g.node(OpKind::ReduceSum, &[x], &[]).unwrap();
    let perm = [("perm", Attr::Ints(vec![0, 3, 1, 2]))];
    let nchw = g.node(OpKind::Transpose, &[x], &perm).unwrap();
    let copy: Vec<f32> = (0..48 * c)
        .map(|i| f32::from(u8::from(i / c == i % c)))
        .collect();
    let wt = g.constant_f32("w", &[48, c, 1, 1], &copy);
    let conv = g.node(OpKind::Conv, &[nchw, wt], &[]).unwrap();
    let gap = g.node(OpKind::GlobalAveragePool, &[conv], &[]).unwrap();
    let planes = g.node(OpKind::GlobalAveragePool, &[nchw], &[]).unwrap();
    for t in [mean, sum, gap, planes, nchw] {
        g.output(t);
    }
    let graph = g.finish().unwrap();
    let mut xv = rng.vec(n * h * w * c);
    for (p, v) in [1e20, 1.0, -1e20, 1.0].into_iter().enumerate() {
        xv[p * c + 5] = v;
    }
    let input = Tensor::from_f32(&[n, h, w, c], &xv);
    let one = run(&delegate(1), &graph, std::slice::from_ref(&input)).expect("1 thread");
    for threads in [2, 3] {
        let many = run(&delegate(threads), &graph, std::slice::from_ref(&input)).expect("run");
        for (k, (a, b)) in one.iter().zip(&many).enumerate() {
            let bits = |t: &Tensor| t.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(a),
                bits(b),
                "output {k}: {threads} threads differ from 1"
            );
        }
    }
    let count = h * w;
    let whole = count - count % 4;
    let run_mean = |b: usize, ch: usize| {
        let (mut acc, mut rest) = ([0f64; 4], 0f64);
        for p in 0..count {
            let v = xv[(b * count + p) * c + ch] as f64;
            match p < whole {
                true => acc[p % 4] += v,
                false => rest += v,
            }
        }
        (((acc[0] + acc[1]) + (acc[2] + acc[3]) + rest) / count as f64) as f32
    };
    let in_order = (0..count).map(|p| xv[p * c + 5] as f64).sum::<f64>() / count as f64;
    assert_ne!(
        run_mean(0, 5),
        in_order as f32,
        "the orders differ on channel 5"
    );
    for (i, &got) in one[0].f32s().iter().enumerate() {
        let (b, ch) = (i / c, i % c);
        assert_eq!(
            got.to_bits(),
            run_mean(b, ch).to_bits(),
            "mean of image {b}, channel {ch}"
        );
    }
    for (i, &held) in one[2].f32s().iter().enumerate() {
        let (b, ch) = (i / 48, i % 48);
        let plane = one[3].f32s()[b * c + ch];
        assert_eq!(
            held.to_bits(),
            run_mean(b, ch).to_bits(),
            "pool of image {b}, channel {ch}"
        );
        assert_eq!(
            held.to_bits(),
            plane.to_bits(),
            "NHWC and NCHW pools, {b}, {ch}"
        );
    }
}

/// Binary element-wise ops (broadcasting a row, a column and a scalar) and the int8
/// element-wise steps (QuantizeLinear, DequantizeLinear, a QDQ Add of two int8 tensors),
/// split among the threads in contiguous parts of the output that cut through rows,
/// agree bit for bit with one thread.
#[test]
fn element_parts_agree_bit_for_bit() {
    let mut rng = Rng::new(23);
    let (rows, n) = (301, 257);
    let mut g = GraphBuilder::new("parts");
    let x = g.input_fixed("x", DType::F32, &[rows, n]);
    let row = g.constant_f32("row", &[n], &rng.vec(n));
    let col = g.constant_f32("col", &[rows, 1], &rng.vec(rows));
    let two = g.constant_f32("two", &[], &[2.5]);
    let add = g.node(OpKind::Add, &[x, row], &[]).unwrap();
    let mul = g.node(OpKind::Mul, &[add, col], &[]).unwrap();
    let div = g.node(OpKind::Div, &[mul, two], &[]).unwrap();
    let sub = g.node(OpKind::Sub, &[two, x], &[]).unwrap();
    let q = |g: &mut GraphBuilder, t, name: &str, scale: f32, zp: u8| {
        let s = g.constant_f32(&format!("{name}_s"), &[], &[scale]);
        let z = g.constant(
            &format!("{name}_z"),
            DType::U8,
            &[],
            TensorData::from_bytes(&[zp]),
        );
        let q = g.node(OpKind::QuantizeLinear, &[t, s, z], &[]).unwrap();
        (
            g.node(OpKind::DequantizeLinear, &[q, s, z], &[]).unwrap(),
            q,
        )
    };
    let (da, qa) = q(&mut g, x, "a", 0.02, 128);
    let (db, _) = q(&mut g, div, "b", 0.05, 120);
    let sum = g.node(OpKind::Add, &[da, db], &[]).unwrap();
    let (ds, _) = q(&mut g, sum, "y", 0.04, 131);
    for t in [div, sub, qa, ds] {
        g.output(t);
    }
    let graph = g.finish().unwrap();
    let input = Tensor::from_f32(&[rows, n], &rng.vec(rows * n));
    let one = run(&delegate(1), &graph, std::slice::from_ref(&input)).expect("1 thread");
    for threads in [2, 3] {
        let many = run(&delegate(threads), &graph, std::slice::from_ref(&input)).expect("run");
        for (i, (a, b)) in one.iter().zip(&many).enumerate() {
            assert_eq!(
                a.bytes(),
                b.bytes(),
                "output {i}: {threads} threads differ from 1"
            );
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

/// Batched MatMuls of two run-time operands (attention's products) run their batches in
/// parallel, each task packing its own `B` and computing whole row blocks: 2 and 3
/// threads agree bit for bit with one, with a per-row epilogue operand (cut at each
/// block's first row), a `B` broadcast over a batch axis, and row counts off the tile.
#[test]
fn batched_run_time_matmuls_agree_bit_for_bit() {
    let mut rng = Rng::new(23);
    let mut g = GraphBuilder::new("batched");
    let a = g.input_fixed("a", DType::F32, &[3, 5, 70, 48]);
    let b = g.input_fixed("b", DType::F32, &[3, 5, 48, 90]);
    let c = g.constant_f32("c", &[70, 90], &rng.vec(70 * 90));
    let mm = g.node(OpKind::MatMul, &[a, b], &[]).unwrap();
    let added = g.node(OpKind::Add, &[mm, c], &[]).unwrap();
    let relu = g.node(OpKind::Relu, &[added], &[]).unwrap();
    // Two large batches (each cut into row blocks), and B broadcast over A's first axis.
    let a2 = g.input_fixed("a2", DType::F32, &[2, 201, 64]);
    let b2 = g.input_fixed("b2", DType::F32, &[2, 64, 100]);
    let mm2 = g.node(OpKind::MatMul, &[a2, b2], &[]).unwrap();
    let c2 = g.constant_f32("c2", &[201, 100], &rng.vec(201 * 100));
    let mm2 = g.node(OpKind::Add, &[mm2, c2], &[]).unwrap();
    let a3 = g.input_fixed("a3", DType::F32, &[2, 3, 40, 64]);
    let b3 = g.input_fixed("b3", DType::F32, &[3, 64, 50]);
    let mm3 = g.node(OpKind::MatMul, &[a3, b3], &[]).unwrap();
    for t in [relu, mm2, mm3] {
        g.output(t);
    }
    let graph = g.finish().unwrap();
    let shapes: [&[usize]; 6] = [
        &[3, 5, 70, 48],
        &[3, 5, 48, 90],
        &[2, 201, 64],
        &[2, 64, 100],
        &[2, 3, 40, 64],
        &[3, 64, 50],
    ];
    let inputs: Vec<Tensor> = shapes
        .iter()
        .map(|s| Tensor::from_f32(s, &rng.vec(s.iter().product())))
        .collect();
    let one = run(&delegate(1), &graph, &inputs).expect("1 thread");
    // One thread against plain sums, on the broadcast product (mm3[i, j] = a3[i, j] · b3[j]).
    let (a3v, b3v, got) = (inputs[4].f32s(), inputs[5].f32s(), one[2].f32s());
    assert_eq!(one[2].shape, [2, 3, 40, 50]);
    for i in 0..2 {
        for j in 0..3 {
            for r in 0..40 {
                for col in 0..50 {
                    let want: f64 = (0..64)
                        .map(|p| {
                            a3v[((i * 3 + j) * 40 + r) * 64 + p] as f64
                                * b3v[(j * 64 + p) * 50 + col] as f64
                        })
                        .sum();
                    let x = got[((i * 3 + j) * 40 + r) * 50 + col] as f64;
                    assert!(
                        (x - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{x} vs {want}"
                    );
                }
            }
        }
    }
    for threads in [2, 3] {
        let many = run(&delegate(threads), &graph, &inputs).expect("run");
        for (a, b) in one.iter().zip(&many) {
            let bits = |t: &Tensor| t.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{threads} threads differ from 1");
        }
    }
}

/// LSTMs large enough that their steps are shared among the threads (each thread its
/// panels of Rᵀ and its hidden units, meeting twice a step): bidirectional, two batch
/// entries, a hidden size off the panel width, and a second node with clip and
/// peepholes; 2 and 3 threads agree bit for bit with one on Y, Y_h and Y_c.
#[test]
fn shared_lstm_steps_agree_bit_for_bit() {
    let mut rng = Rng::new(24);
    let (seq, batch, input, hidden) = (7, 2, 48, 100);
    let gh = 4 * hidden;
    let mut g = GraphBuilder::new("lstm");
    let x = g.input_fixed("x", DType::F32, &[seq, batch, input]);
    let mut outs = Vec::new();
    for (k, options) in [false, true].into_iter().enumerate() {
        let w = g.constant_f32(&format!("w{k}"), &[2, gh, input], &rng.vec(2 * gh * input));
        let r = g.constant_f32(
            &format!("r{k}"),
            &[2, gh, hidden],
            &rng.vec(2 * gh * hidden),
        );
        let b = g.constant_f32(&format!("b{k}"), &[2, 2 * gh], &rng.vec(2 * 2 * gh));
        let mut inputs = vec![x, w, r, b];
        let mut attrs = vec![
            ("hidden_size", Attr::Int(hidden as i64)),
            ("direction", Attr::Str("bidirectional".into())),
        ];
        if options {
            let lens_v: [i32; 2] = [seq as i32, 4];
            let lens = g.constant(
                &format!("lens{k}"),
                DType::I32,
                &[batch],
                TensorData::from_bytes(bytemuck::cast_slice(&lens_v)),
            );
            let h0 = g.constant_f32(
                &format!("h0{k}"),
                &[2, batch, hidden],
                &rng.vec(2 * batch * hidden),
            );
            let c0 = g.constant_f32(
                &format!("c0{k}"),
                &[2, batch, hidden],
                &rng.vec(2 * batch * hidden),
            );
            let p = g.constant_f32(&format!("p{k}"), &[2, 3 * hidden], &rng.vec(2 * 3 * hidden));
            inputs.extend([lens, h0, c0, p]);
            attrs.push(("clip", Attr::Float(0.8)));
        }
        let o = g
            .named_node_outputs(&format!("lstm{k}"), OpKind::LSTM, &inputs, &attrs, 3)
            .unwrap();
        outs.extend(o);
    }
    for t in outs {
        g.output(t);
    }
    let graph = g.finish().unwrap();
    let input = Tensor::from_f32(&[seq, batch, input], &rng.vec(seq * batch * input));
    let one = run(&delegate(1), &graph, std::slice::from_ref(&input)).expect("1 thread");
    for threads in [2, 3] {
        let many = run(&delegate(threads), &graph, std::slice::from_ref(&input)).expect("run");
        for (a, b) in one.iter().zip(&many) {
            let bits = |t: &Tensor| t.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{threads} threads differ from 1");
        }
    }
}

/// An NCHW input large enough that its conversion to the delegate's channels-last layout
/// is shared among the threads (in whole pixels; with 3 images, a thread's part crosses
/// from one into the next): through an identity 1x1 convolution, the output is the input
/// bit for bit on 1, 2 and 3 threads, for channel counts with and without their own
/// interleave.
#[test]
fn a_split_layout_change_keeps_every_value() {
    let mut rng = Rng::new(23);
    for (c, h, w) in [(3, 61, 67), (1, 107, 113), (4, 53, 59), (5, 41, 57)] {
        let shape = [3, c, h, w];
        let mut g = GraphBuilder::new("layout");
        let x = g.input_fixed("x", DType::F32, &shape);
        let eye: Vec<f32> = (0..c * c)
            .map(|i| (i % (c + 1) == 0) as u8 as f32)
            .collect();
        let wt = g.constant_f32("w", &[c, c, 1, 1], &eye);
        let y = g.node(OpKind::Conv, &[x, wt], &[]).unwrap();
        g.output(y);
        let graph = g.finish().unwrap();
        let xs = rng.vec(3 * c * h * w);
        let input = Tensor::from_f32(&shape, &xs);
        for threads in [1, 2, 3] {
            let out = run(&delegate(threads), &graph, std::slice::from_ref(&input)).expect("run");
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(out[0].f32s()) == bits(&xs),
                "{c} channels, {threads} threads"
            );
        }
    }
}

/// Transposes large enough to be shared among the threads (cutting through rows), of f32
/// and of bytes, against a direct index walk on 1, 2 and 3 threads: rows gathered with a
/// power-of-two stride (the attention's [s, h, d] -> [h, d, s]), a permutation that
/// keeps the last axis, one that reverses every axis, and rows shorter than a tile.
#[test]
fn split_transposes_move_every_value() {
    let shape = [3, 43, 4, 64];
    let n: usize = shape.iter().product();
    let perms: [[usize; 4]; 4] = [[0, 2, 3, 1], [0, 2, 1, 3], [3, 2, 1, 0], [1, 3, 0, 2]];
    let mut rng = Rng::new(24);
    let xs = rng.vec(n);
    let bytes: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
    for perm in perms {
        let out_shape: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
        // The input index of each output element, in output order.
        let mut from = Vec::with_capacity(n);
        for o in 0..n {
            let (mut rest, mut idx) = (o, [0usize; 4]);
            for d in (0..4).rev() {
                idx[perm[d]] = rest % out_shape[d];
                rest /= out_shape[d];
            }
            from.push(((idx[0] * shape[1] + idx[1]) * shape[2] + idx[2]) * shape[3] + idx[3]);
        }
        for dtype in [DType::F32, DType::U8] {
            let mut g = GraphBuilder::new("transpose");
            let x = g.input_fixed("x", dtype, &shape);
            let p = perm.iter().map(|&a| a as i64).collect();
            let y = g
                .node(OpKind::Transpose, &[x], &[("perm", Attr::Ints(p))])
                .unwrap();
            g.output(y);
            let graph = g.finish().unwrap();
            let input = match dtype {
                DType::F32 => Tensor::from_f32(&shape, &xs),
                _ => Tensor::from_bytes(dtype, &shape, &bytes),
            };
            let want: Vec<u8> = match dtype {
                DType::F32 => from.iter().flat_map(|&i| xs[i].to_le_bytes()).collect(),
                _ => from.iter().map(|&i| bytes[i]).collect(),
            };
            for threads in [1, 2, 3] {
                let out = run(&delegate(threads), &graph, std::slice::from_ref(&input)).unwrap();
                assert!(
                    out[0].bytes() == want.as_slice(),
                    "perm {perm:?}, {dtype:?}, {threads} threads"
                );
            }
        }
    }
}

/// Concat split among the threads by outer rows: along the channels of images (two
/// parts) and along the last axis of rows (eleven parts, past the ones listed on the
/// stack), at 1, 2 and 3 threads, gives the concatenation the test builds itself.
#[test]
fn concatenations_split_among_threads_are_the_concatenation() {
    let mut rng = Rng::new(25);
    for (shapes, axis) in [
        (vec![[2, 24, 30, 33], [2, 40, 30, 33]], 1usize),
        (vec![[3, 5, 7, 90]; 11], 3),
    ] {
        let mut g = GraphBuilder::new("cat");
        let inputs: Vec<_> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| g.input_fixed(&format!("x{i}"), DType::F32, s))
            .collect();
        let cat = g
            .node(OpKind::Concat, &inputs, &[("axis", Attr::Int(axis as i64))])
            .unwrap();
        g.output(cat);
        let graph = g.finish().unwrap();
        let values: Vec<Vec<f32>> = shapes.iter().map(|s| rng.vec(s.iter().product())).collect();
        let tensors: Vec<Tensor> = shapes
            .iter()
            .zip(&values)
            .map(|(s, v)| Tensor::from_f32(s, v))
            .collect();
        let outer: usize = shapes[0][..axis].iter().product();
        let mut want = Vec::new();
        for o in 0..outer {
            for (s, v) in shapes.iter().zip(&values) {
                let chunk: usize = s[axis..].iter().product();
                want.extend_from_slice(&v[o * chunk..(o + 1) * chunk]);
            }
        }
        for threads in [1, 2, 3] {
            let got = run(&delegate(threads), &graph, &tensors).expect("run");
            assert_eq!(got[0].f32s(), &want[..], "axis {axis}, {threads} threads");
        }
    }
}
