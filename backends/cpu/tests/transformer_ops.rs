//! The ops the transformer and streaming models need (LayerNormalization, Erf, LogSoftmax,
//! ReduceMean, Gather, Slice, Split, Squeeze/Unsqueeze, LSTM and GRU with or without
//! sequence lengths, Einsum), against known answers and naive implementations written
//! here, with SIMD and portable kernels.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorData, TensorId};
use baton_delegate_api::testing::{assert_close_labelled, run, supports, Rng};
use baton_delegate_api::{Support, Tensor};
use common::delegate;

/// Runs `g` with both kernel sets; returns the outputs of the SIMD run after checking
/// the portable run agrees within `tol`.
fn run_both(g: &Graph, inputs: &[Tensor], tol: f64) -> Vec<Tensor> {
    let simd = run(&delegate(true), g, inputs).expect("simd run");
    let portable = run(&delegate(false), g, inputs).expect("portable run");
    for (a, b) in simd.iter().zip(&portable) {
        let wide: Vec<f64> = b.f32s().iter().map(|&v| v as f64).collect();
        assert_close_labelled("simd vs portable", a.f32s(), &wide, tol, tol);
    }
    simd
}

fn graph(build: impl FnOnce(&mut GraphBuilder) -> Vec<TensorId>) -> Graph {
    let mut g = GraphBuilder::new("t");
    for out in build(&mut g) {
        g.output(out);
    }
    g.finish().unwrap()
}

#[test]
fn layer_norm_with_statistics() {
    let x = [1.0f32, 2.0, 3.0, 4.0, -1.0, -1.0, 1.0, 1.0];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[2, 4]);
        let s = g.constant_f32("s", &[4], &[1.0, 2.0, 0.5, 1.0]);
        let b = g.constant_f32("b", &[4], &[0.0, 1.0, 0.0, -1.0]);
        let eps = ("epsilon", Attr::Float(0.0));
        g.named_node_outputs("ln", OpKind::LayerNormalization, &[xt, s, b], &[eps], 3)
            .unwrap()
    });
    let out = run_both(&g, &[Tensor::from_f32(&[2, 4], &x)], 1e-6);
    // Row 0: mean 2.5, var 1.25; row 1: mean 0, var 1.
    let inv0 = 1.0 / 1.25f64.sqrt();
    let want_y: Vec<f64> = vec![
        -1.5 * inv0,
        -0.5 * inv0 * 2.0 + 1.0,
        0.5 * inv0 * 0.5,
        1.5 * inv0 - 1.0,
        -1.0,
        -2.0 + 1.0,
        0.5,
        0.0,
    ];
    assert_close_labelled("Y", out[0].f32s(), &want_y, 1e-6, 1e-6);
    assert_eq!(out[1].shape, vec![2, 1]);
    assert_close_labelled("Mean", out[1].f32s(), &[2.5, 0.0], 0.0, 0.0);
    assert_close_labelled("InvStdDev", out[2].f32s(), &[inv0, 1.0], 0.0, 1e-7);
}

#[test]
fn erf_log_softmax_and_reduce_mean() {
    let mut rng = Rng::new(5);
    let x = rng.vec(2 * 3 * 4);
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[2, 3, 4]);
        let erf = g.node(OpKind::Erf, &[xt], &[]).unwrap();
        let ls = g
            .node(OpKind::LogSoftmax, &[xt], &[("axis", Attr::Int(1))])
            .unwrap();
        let axes = g.constant_i64("axes", &[2], &[1, 2]);
        let mean = g
            .node(
                OpKind::ReduceMean,
                &[xt, axes],
                &[("keepdims", Attr::Int(0))],
            )
            .unwrap();
        let axes0 = g.constant_i64("axes0", &[1], &[1]);
        let mean1 = g.node(OpKind::ReduceMean, &[xt, axes0], &[]).unwrap();
        vec![erf, ls, mean, mean1]
    });
    let out = run_both(&g, &[Tensor::from_f32(&[2, 3, 4], &x)], 1e-6);
    // erf: libm-free check through the series erf(x) = 2/sqrt(pi) sum (-1)^n x^(2n+1)/(n!(2n+1)).
    let erf = |v: f64| {
        let (mut term, mut sum) = (v, 0.0);
        for n in 0..30 {
            sum += term / (2 * n + 1) as f64;
            term *= -v * v / (n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    };
    let want: Vec<f64> = x.iter().map(|&v| erf(v as f64)).collect();
    assert_close_labelled("Erf", out[0].f32s(), &want, 1e-6, 1e-6);
    let at = |o: usize, c: usize, i: usize| x[(o * 3 + c) * 4 + i] as f64;
    let mut want = vec![0.0; 24];
    for o in 0..2 {
        for i in 0..4 {
            let lse = (0..3).map(|c| at(o, c, i).exp()).sum::<f64>().ln();
            for c in 0..3 {
                want[(o * 3 + c) * 4 + i] = at(o, c, i) - lse;
            }
        }
    }
    assert_close_labelled("LogSoftmax", out[1].f32s(), &want, 1e-6, 1e-6);
    let m: Vec<f64> = (0..2)
        .map(|o| (0..12).map(|k| x[o * 12 + k] as f64).sum::<f64>() / 12.0)
        .collect();
    assert_eq!(out[2].shape, vec![2]);
    assert_close_labelled("ReduceMean over 1,2", out[2].f32s(), &m, 1e-7, 1e-6);
    let m1: Vec<f64> = (0..8)
        .map(|k| (0..3).map(|c| at(k / 4, c, k % 4)).sum::<f64>() / 3.0)
        .collect();
    assert_eq!(out[3].shape, vec![2, 1, 4]);
    assert_close_labelled("ReduceMean over 1", out[3].f32s(), &m1, 1e-7, 1e-6);
}

#[test]
fn reductions_over_scattered_axes_are_claimed_and_match_a_naive_loop() {
    let x: Vec<f32> = (0..24).map(|v| (v as f32 - 11.5) * 0.37).collect();
    let kinds = [
        OpKind::ReduceMean,
        OpKind::ReduceMin,
        OpKind::ReduceL2,
        OpKind::ReduceLogSumExp,
    ];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[2, 3, 4]);
        let axes = g.constant_i64("axes", &[2], &[0, 2]);
        kinds
            .iter()
            .map(|&op| g.node(op, &[xt, axes], &[]).unwrap())
            .collect()
    });
    let s = supports(&delegate(true), &g);
    assert!(s.iter().all(|s| matches!(s, Support::Yes)), "{s:?}");
    let out = run_both(&g, &[Tensor::from_f32(&[2, 3, 4], &x)], 1e-6);
    // Output j (kept dims [1, 3, 1]) reduces x[a, j, c] over a and c.
    let set = |j: usize| -> Vec<f64> {
        let mut v = Vec::new();
        for a in 0..2 {
            for c in 0..4 {
                v.push(x[a * 12 + j * 4 + c] as f64);
            }
        }
        v
    };
    for (k, op) in kinds.iter().enumerate() {
        let want: Vec<f64> = (0..3)
            .map(|j| {
                let v = set(j);
                match op {
                    OpKind::ReduceMean => v.iter().sum::<f64>() / v.len() as f64,
                    OpKind::ReduceMin => v.iter().copied().fold(f64::INFINITY, f64::min),
                    OpKind::ReduceL2 => v.iter().map(|e| e * e).sum::<f64>().sqrt(),
                    _ => v.iter().map(|e| e.exp()).sum::<f64>().ln(),
                }
            })
            .collect();
        assert_eq!(out[k].shape, vec![1, 3, 1], "{op}");
        assert_close_labelled(&format!("{op}"), out[k].f32s(), &want, 1e-6, 1e-6);
    }
}

#[test]
fn gather_slice_split_squeeze() {
    let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[4, 6]);
        let ids = g.input_fixed("ids", DType::I64, &[3]);
        let gather = g.node(OpKind::Gather, &[xt, ids], &[]).unwrap();
        let c = |g: &mut GraphBuilder, n: &str, v: &[i64]| g.constant_i64(n, &[v.len()], v);
        let (st, en, ax, sp) = (
            c(g, "st", &[-1, 1]),
            c(g, "en", &[i64::MIN, 100]),
            c(g, "ax", &[0, 1]),
            c(g, "sp", &[-2, 2]),
        );
        let slice = g.node(OpKind::Slice, &[xt, st, en, ax, sp], &[]).unwrap();
        let sizes = c(g, "sizes", &[1, 3, 2]);
        let mut parts = g
            .named_node_outputs(
                "split",
                OpKind::Split,
                &[xt, sizes],
                &[("axis", Attr::Int(1))],
                3,
            )
            .unwrap();
        let sq_axes = c(g, "sq", &[1]);
        let sq = g.node(OpKind::Squeeze, &[parts[0], sq_axes], &[]).unwrap();
        let mut outs = vec![gather, slice];
        outs.append(&mut parts);
        outs.push(sq);
        outs
    });
    let ids = Tensor::from_i64(&[3], &[2, -1, 0]);
    let out = run_both(&g, &[Tensor::from_f32(&[4, 6], &x), ids], 0.0);
    let row = |r: usize| (0..6).map(move |c| (r * 6 + c) as f64);
    let want: Vec<f64> = row(2).chain(row(3)).chain(row(0)).collect();
    assert_close_labelled("Gather", out[0].f32s(), &want, 0.0, 0.0);
    // Rows 3, 1; columns 1, 3, 5.
    let want: Vec<f64> = [19.0, 21.0, 23.0, 7.0, 9.0, 11.0].to_vec();
    assert_eq!(out[1].shape, vec![2, 3]);
    assert_close_labelled("Slice", out[1].f32s(), &want, 0.0, 0.0);
    let cols = |a: usize, b: usize| -> Vec<f64> {
        (0..4)
            .flat_map(|r| (a..b).map(move |c| (r * 6 + c) as f64))
            .collect()
    };
    assert_close_labelled("Split 0", out[2].f32s(), &cols(0, 1), 0.0, 0.0);
    assert_close_labelled("Split 1", out[3].f32s(), &cols(1, 4), 0.0, 0.0);
    assert_close_labelled("Split 2", out[4].f32s(), &cols(4, 6), 0.0, 0.0);
    assert_eq!(out[5].shape, vec![4]);
    assert_close_labelled("Squeeze", out[5].f32s(), &cols(0, 1), 0.0, 0.0);

    // An index out of range is an execute error naming the node, not a panic.
    let bad = Tensor::from_i64(&[3], &[0, 4, 1]);
    let err = run(&delegate(true), &g, &[Tensor::from_f32(&[4, 6], &x), bad]).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

/// A naive LSTM in f64 (gate order i, o, f, c), one direction.
#[allow(clippy::too_many_arguments)]
fn lstm_naive(
    x: &[f32],
    w: &[f32],
    r: &[f32],
    b: &[f32],
    (seq, batch, input, hidden): (usize, usize, usize, usize),
    reverse: bool,
    h0: &[f32],
    lens: &[usize],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let gh = 4 * hidden;
    let mut y = vec![0.0; seq * batch * hidden];
    let (mut yh, mut yc) = (vec![0.0; batch * hidden], vec![0.0; batch * hidden]);
    for bi in 0..batch {
        let mut h: Vec<f64> = h0[bi * hidden..(bi + 1) * hidden]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let mut c = vec![0.0; hidden];
        // Steps past the entry's length leave its Y rows zero.
        let len = lens[bi];
        for s in 0..len {
            let t = if reverse { len - 1 - s } else { s };
            let pre = |g: usize, j: usize, h: &[f64]| {
                let row = g * hidden + j;
                let xw: f64 = (0..input)
                    .map(|k| x[(t * batch + bi) * input + k] as f64 * w[row * input + k] as f64)
                    .sum();
                let hr: f64 = (0..hidden).map(|k| h[k] * r[row * hidden + k] as f64).sum();
                xw + hr + b[row] as f64 + b[gh + row] as f64
            };
            let mut hn = vec![0.0; hidden];
            for j in 0..hidden {
                let i = sig(pre(0, j, &h));
                let o = sig(pre(1, j, &h));
                let f = sig(pre(2, j, &h));
                let cc = pre(3, j, &h).tanh();
                c[j] = f * c[j] + i * cc;
                hn[j] = o * c[j].tanh();
            }
            h = hn;
            y[(t * batch + bi) * hidden..][..hidden].copy_from_slice(&h);
        }
        yh[bi * hidden..][..hidden].copy_from_slice(&h);
        yc[bi * hidden..][..hidden].copy_from_slice(&c);
    }
    (y, yh, yc)
}

#[test]
fn lstm_forward_and_reverse_match_naive() {
    let (seq, batch, input, hidden) = (5, 2, 7, 9);
    let mut rng = Rng::new(11);
    let x = rng.vec(seq * batch * input);
    let w = rng.vec(4 * hidden * input);
    let r = rng.vec(4 * hidden * hidden);
    let b = rng.vec(8 * hidden);
    let h0 = rng.vec(batch * hidden);
    for direction in ["forward", "reverse"] {
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[seq, batch, input]);
            let wt = g.constant_f32("w", &[1, 4 * hidden, input], &w);
            let rt = g.constant_f32("r", &[1, 4 * hidden, hidden], &r);
            let bt = g.constant_f32("b", &[1, 8 * hidden], &b);
            let lens = g.constant("lens", DType::I32, &[0], TensorData::from_bytes(&[]));
            let h = g.input_fixed("h0", DType::F32, &[1, batch, hidden]);
            let attrs = [
                ("hidden_size", Attr::Int(hidden as i64)),
                ("direction", Attr::Str(direction.into())),
            ];
            g.named_node_outputs("lstm", OpKind::LSTM, &[xt, wt, rt, bt, lens, h], &attrs, 3)
                .unwrap()
        });
        let inputs = [
            Tensor::from_f32(&[seq, batch, input], &x),
            Tensor::from_f32(&[1, batch, hidden], &h0),
        ];
        let out = run_both(&g, &inputs, 1e-5);
        let dims = (seq, batch, input, hidden);
        let full = vec![seq; batch];
        let (y, yh, yc) = lstm_naive(&x, &w, &r, &b, dims, direction == "reverse", &h0, &full);
        assert_close_labelled(&format!("Y {direction}"), out[0].f32s(), &y, 1e-6, 1e-5);
        assert_close_labelled(&format!("Y_h {direction}"), out[1].f32s(), &yh, 1e-6, 1e-5);
        assert_close_labelled(&format!("Y_c {direction}"), out[2].f32s(), &yc, 1e-6, 1e-5);
    }
}

#[test]
fn lstm_with_sequence_lens_matches_naive() {
    // Entries of 5, 2 and 4 steps of 5, the lengths given at run time; then a length past
    // the sequence is an error naming the entry.
    let (seq, batch, input, hidden) = (5, 3, 4, 6);
    let mut rng = Rng::new(12);
    let x = rng.vec(seq * batch * input);
    let w = rng.vec(4 * hidden * input);
    let r = rng.vec(4 * hidden * hidden);
    let b = rng.vec(8 * hidden);
    let h0 = rng.vec(batch * hidden);
    for direction in ["forward", "reverse"] {
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[seq, batch, input]);
            let wt = g.constant_f32("w", &[1, 4 * hidden, input], &w);
            let rt = g.constant_f32("r", &[1, 4 * hidden, hidden], &r);
            let bt = g.constant_f32("b", &[1, 8 * hidden], &b);
            let lens = g.input_fixed("lens", DType::I32, &[batch]);
            let h = g.input_fixed("h0", DType::F32, &[1, batch, hidden]);
            let attrs = [
                ("hidden_size", Attr::Int(hidden as i64)),
                ("direction", Attr::Str(direction.into())),
            ];
            g.named_node_outputs("lstm", OpKind::LSTM, &[xt, wt, rt, bt, lens, h], &attrs, 3)
                .unwrap()
        });
        let claims = supports(&delegate(true), &g);
        assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
        let lens_of = |v: &[i32]| {
            let bytes: Vec<u8> = v.iter().flat_map(|l| l.to_le_bytes()).collect();
            Tensor::from_bytes(DType::I32, &[batch], &bytes)
        };
        let inputs = [
            Tensor::from_f32(&[seq, batch, input], &x),
            lens_of(&[5, 2, 4]),
            Tensor::from_f32(&[1, batch, hidden], &h0),
        ];
        let out = run_both(&g, &inputs, 1e-5);
        let dims = (seq, batch, input, hidden);
        let reverse = direction == "reverse";
        let (y, yh, yc) = lstm_naive(&x, &w, &r, &b, dims, reverse, &h0, &[5, 2, 4]);
        assert_close_labelled(&format!("Y {direction}"), out[0].f32s(), &y, 1e-6, 1e-5);
        assert_close_labelled(&format!("Y_h {direction}"), out[1].f32s(), &yh, 1e-6, 1e-5);
        assert_close_labelled(&format!("Y_c {direction}"), out[2].f32s(), &yc, 1e-6, 1e-5);
        let bad = [
            Tensor::from_f32(&[seq, batch, input], &x),
            lens_of(&[5, 6, 4]),
            Tensor::from_f32(&[1, batch, hidden], &h0),
        ];
        let err = run(&delegate(true), &g, &bad).unwrap_err().to_string();
        assert!(err.contains("sequence_lens[1] = 6"), "{err}");
    }
}

#[test]
fn gru_with_sequence_lens_ends_each_entry_at_its_length() {
    // An entry of length `len` computes what a GRU over the first `len` steps alone
    // computes: its Y_h is that run's, its Y rows past `len` are zero. Entries of 4 and 2
    // of 4 steps, both directions, against runs over 4 and over 2 steps.
    let (seq, batch, input, hidden) = (4, 2, 3, 5);
    let mut rng = Rng::new(13);
    let x = rng.vec(seq * batch * input);
    let w = rng.vec(2 * 3 * hidden * input);
    let r = rng.vec(2 * 3 * hidden * hidden);
    let b = rng.vec(2 * 6 * hidden);
    let gru = |steps: usize, lens: Option<[i32; 2]>| {
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[steps, batch, input]);
            let wt = g.constant_f32("w", &[2, 3 * hidden, input], &w);
            let rt = g.constant_f32("r", &[2, 3 * hidden, hidden], &r);
            let bt = g.constant_f32("b", &[2, 6 * hidden], &b);
            let bytes: Vec<u8> = lens
                .iter()
                .flatten()
                .flat_map(|l| l.to_le_bytes())
                .collect();
            let n = bytes.len() / 4;
            let lt = g.constant("lens", DType::I32, &[n], TensorData::from_bytes(&bytes));
            let attrs = [
                ("hidden_size", Attr::Int(hidden as i64)),
                ("direction", Attr::Str("bidirectional".into())),
            ];
            g.named_node_outputs("gru", OpKind::GRU, &[xt, wt, rt, bt, lt], &attrs, 2)
                .unwrap()
        });
        let claims = supports(&delegate(true), &g);
        assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
        let xs = Tensor::from_f32(&[steps, batch, input], &x[..steps * batch * input]);
        run_both(&g, &[xs], 1e-5)
    };
    let with_lens = gru(seq, Some([4, 2]));
    let (full, short) = (gru(seq, None), gru(2, None));
    let y_h =
        |t: &Tensor, d: usize, b: usize| t.f32s()[(d * batch + b) * hidden..][..hidden].to_vec();
    for d in 0..2 {
        assert_eq!(
            y_h(&with_lens[1], d, 0),
            y_h(&full[1], d, 0),
            "entry 0, direction {d}"
        );
        assert_eq!(
            y_h(&with_lens[1], d, 1),
            y_h(&short[1], d, 1),
            "entry 1, direction {d}"
        );
        for t in 0..seq {
            let row = &with_lens[0].f32s()[((t * 2 + d) * batch + 1) * hidden..][..hidden];
            if t >= 2 {
                assert!(
                    row.iter().all(|&v| v == 0.0),
                    "step {t}, direction {d}: {row:?}"
                );
            } else {
                let want = &short[0].f32s()[((t * 2 + d) * batch + 1) * hidden..][..hidden];
                assert_eq!(row, want, "step {t}, direction {d}");
            }
        }
    }
}

/// An Erf GELU as torch exports it runs as one fused pass (see `patterns.rs`): its
/// results are bit-identical to the five nodes run one by one (forced here by making the
/// Erf's output a graph output too, which stops the fusion), in each halving order.
#[test]
fn erf_gelu_fused_matches_its_nodes_bit_for_bit() {
    let mut rng = Rng::new(23);
    let x: Vec<f32> = rng.vec(4 * 37).iter().map(|v| v * 4.0).collect();
    for halve in 0..3 {
        let build = |also_erf: bool| {
            graph(|g| {
                let xt = g.input_fixed("x", DType::F32, &[4, 37]);
                let sqrt2 = g.constant_f32("sqrt2", &[], &[std::f32::consts::SQRT_2]);
                let one = g.constant_f32("one", &[], &[1.0]);
                let half = g.constant_f32("half", &[], &[0.5]);
                let h = (halve == 1).then(|| g.node(OpKind::Mul, &[xt, half], &[]).unwrap());
                let d = g.node(OpKind::Div, &[xt, sqrt2], &[]).unwrap();
                let e = g.node(OpKind::Erf, &[d], &[]).unwrap();
                let a = g.node(OpKind::Add, &[e, one], &[]).unwrap();
                let y = match (h, halve) {
                    (Some(h), _) => g.node(OpKind::Mul, &[h, a], &[]).unwrap(),
                    (None, 2) => {
                        let m = g.node(OpKind::Mul, &[half, a], &[]).unwrap();
                        g.node(OpKind::Mul, &[xt, m], &[]).unwrap()
                    }
                    (None, _) => {
                        let m = g.node(OpKind::Mul, &[xt, a], &[]).unwrap();
                        g.node(OpKind::Mul, &[m, half], &[]).unwrap()
                    }
                };
                if also_erf {
                    vec![y, e]
                } else {
                    vec![y]
                }
            })
        };
        let input = [Tensor::from_f32(&[4, 37], &x)];
        let fused = run_both(&build(false), &input, 1e-6);
        let nodes = run_both(&build(true), &input, 1e-6);
        assert_eq!(fused[0].f32s(), nodes[0].f32s(), "halving order {halve}");
        let want: Vec<f64> = x
            .iter()
            .map(|&v| {
                let v = v as f64;
                let (mut term, mut sum, z) = (v / 2f64.sqrt(), 0.0, v / 2f64.sqrt());
                for n in 0..60 {
                    sum += term / (2 * n + 1) as f64;
                    term *= -z * z / (n + 1) as f64;
                }
                0.5 * v * (1.0 + sum * 2.0 / std::f64::consts::PI.sqrt())
            })
            .collect();
        assert_close_labelled("GELU", fused[0].f32s(), &want, 2e-6, 1e-5);
    }
}

/// Attention's `nonpad_kv_seqlen` masks each batch's keys from its length on: batch 0
/// sees keys 0 and 1 of 3, batch 1 none (its weights, and so its output, are NaN, as in
/// ONNX's reference). Scores `q·k` with `scale` 1: `[0, 1]`, so `Y = (10 + 20e) / (1 + e)`.
#[test]
fn attention_nonpad_kv_seqlen() {
    let g = graph(|g| {
        let q = g.input_fixed("q", DType::F32, &[2, 1, 1, 1]);
        let k = g.input_fixed("k", DType::F32, &[2, 1, 3, 1]);
        let v = g.input_fixed("v", DType::F32, &[2, 1, 3, 1]);
        let none = g.constant_f32("none", &[0], &[]);
        let lens = g.input_fixed("lens", DType::I64, &[2]);
        let scale = ("scale", Attr::Float(1.0));
        vec![g
            .node(
                OpKind::Attention,
                &[q, k, v, none, none, none, lens],
                &[scale],
            )
            .unwrap()]
    });
    let inputs = [
        Tensor::from_f32(&[2, 1, 1, 1], &[1.0, 1.0]),
        Tensor::from_f32(&[2, 1, 3, 1], &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0]),
        Tensor::from_f32(&[2, 1, 3, 1], &[10.0, 20.0, 30.0, 10.0, 20.0, 30.0]),
        Tensor::from_i64(&[2], &[2, 0]),
    ];
    let out = run_both_nan(&g, &inputs);
    let e = std::f64::consts::E;
    let y = out[0].f32s();
    assert!(
        (y[0] as f64 - (10.0 + 20.0 * e) / (1.0 + e)).abs() < 1e-5,
        "{y:?}"
    );
    assert!(y[1].is_nan(), "{y:?}");
}

/// Runs `g` with both kernel sets, which must agree bit for bit (NaN included).
fn run_both_nan(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    let simd = run(&delegate(true), g, inputs).expect("simd run");
    let portable = run(&delegate(false), g, inputs).expect("portable run");
    for (a, b) in simd.iter().zip(&portable) {
        let close = a
            .f32s()
            .iter()
            .zip(b.f32s())
            .all(|(x, y)| x.is_nan() && y.is_nan() || (x - y).abs() <= 1e-6 * x.abs().max(1.0));
        assert!(close, "simd {:?} vs portable {:?}", a.f32s(), b.f32s());
    }
    simd
}

/// RotaryEmbedding by hand: one head of 4 (halves `[x0, x1]`, `[x2, x3]`) at positions 1
/// and 0 of a 2-row cache; position 0 is the identity rotation, position 1 a quarter turn
/// for the first pair (`(x0, x2) -> (-x2, x0)`) and a half turn for the second.
#[test]
fn rotary_embedding_by_position() {
    let g = graph(|g| {
        let x = g.input_fixed("x", DType::F32, &[1, 1, 2, 4]);
        let cos = g.constant_f32("cos", &[2, 2], &[1.0, 1.0, 0.0, -1.0]);
        let sin = g.constant_f32("sin", &[2, 2], &[0.0, 0.0, 1.0, 0.0]);
        let pos = g.input_fixed("pos", DType::I64, &[1, 2]);
        vec![g
            .node(OpKind::RotaryEmbedding, &[x, cos, sin, pos], &[])
            .unwrap()]
    });
    let inputs = [
        Tensor::from_f32(&[1, 1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
        Tensor::from_i64(&[1, 2], &[1, 0]),
    ];
    let out = run_both(&g, &inputs, 0.0);
    assert_eq!(
        out[0].f32s(),
        &[-3.0, -2.0, 1.0, -4.0, 5.0, 6.0, 7.0, 8.0][..]
    );
    // A position past the caches is an error naming it, not a panic.
    let bad = [inputs[0].clone(), Tensor::from_i64(&[1, 2], &[2, 0])];
    let err = run(&delegate(true), &g, &bad).unwrap_err();
    assert!(format!("{err}").contains("position id 2"), "{err}");
}

/// Einsum against naive sums: a batched product with its output permuted
/// (`bij,bjk->kbi`), a summed label found in one operand only (`ij,jk->k`), a transpose
/// with a sum (`ijk->ki`), and a broadcast batch (`...ij,...jk->...ik`).
#[test]
fn einsum_matches_naive_sums() {
    let mut rng = Rng::new(31);
    let (b, i, j, k) = (2, 3, 4, 5);
    let x = rng.vec(b * i * j);
    let y = rng.vec(b * j * k);
    let eq = |e: &str| ("equation", Attr::Str(e.into()));
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[b, i, j]);
        let yt = g.input_fixed("y", DType::F32, &[b, j, k]);
        let x2 = g.input_fixed("x2", DType::F32, &[i, j]);
        let y2 = g.input_fixed("y2", DType::F32, &[j, k]);
        let y3 = g.input_fixed("y3", DType::F32, &[1, j, k]);
        vec![
            g.node(OpKind::Einsum, &[xt, yt], &[eq("bij,bjk->kbi")])
                .unwrap(),
            g.node(OpKind::Einsum, &[x2, y2], &[eq("ij,jk->k")])
                .unwrap(),
            g.node(OpKind::Einsum, &[xt], &[eq("bij->jb")]).unwrap(),
            g.node(OpKind::Einsum, &[xt, y3], &[eq("...ij,...jk->...ik")])
                .unwrap(),
        ]
    });
    let inputs = [
        Tensor::from_f32(&[b, i, j], &x),
        Tensor::from_f32(&[b, j, k], &y),
        Tensor::from_f32(&[i, j], &x[..i * j]),
        Tensor::from_f32(&[j, k], &y[..j * k]),
        Tensor::from_f32(&[1, j, k], &y[..j * k]),
    ];
    let out = run_both(&g, &inputs, 1e-5);
    let xs = |bb: usize, ii: usize, jj: usize| x[(bb * i + ii) * j + jj] as f64;
    let ys = |bb: usize, jj: usize, kk: usize| y[(bb * j + jj) * k + kk] as f64;
    let mut want = [vec![], vec![0.0; k], vec![], vec![]];
    for kk in 0..k {
        for bb in 0..b {
            for ii in 0..i {
                want[0].push((0..j).map(|jj| xs(bb, ii, jj) * ys(bb, jj, kk)).sum());
            }
        }
        want[1][kk] = (0..i)
            .flat_map(|ii| (0..j).map(move |jj| (ii, jj)))
            .map(|(ii, jj)| xs(0, ii, jj) * ys(0, jj, kk))
            .sum();
    }
    for jj in 0..j {
        for bb in 0..b {
            want[2].push((0..i).map(|ii| xs(bb, ii, jj)).sum());
        }
    }
    for bb in 0..b {
        for ii in 0..i {
            for kk in 0..k {
                want[3].push((0..j).map(|jj| xs(bb, ii, jj) * ys(0, jj, kk)).sum());
            }
        }
    }
    for (got, want) in out.iter().zip(&want) {
        assert_close_labelled("einsum", got.f32s(), want, 1e-5, 1e-5);
    }
}

#[test]
fn einsum_diagonals_by_hand() {
    // The trace of [[1, 2], [3, 4]] is 5; the batch diagonals of [[1, 2], [3, 4]] and
    // [[5, 6], [7, 8]] are [1, 4] and [5, 8]; "ii,i->i" scales the diagonal [1, 4] by
    // [10, 20]: [10, 80]; "iij->j" sums the diagonal rows of a [2, 2, 3] tensor.
    let eq = |e: &str| ("equation", Attr::Str(e.into()));
    let g = graph(|g| {
        let m = g.input_fixed("m", DType::F32, &[2, 2]);
        let bm = g.input_fixed("bm", DType::F32, &[2, 2, 2]);
        let v = g.input_fixed("v", DType::F32, &[2]);
        let t = g.input_fixed("t", DType::F32, &[2, 2, 3]);
        vec![
            g.node(OpKind::Einsum, &[m], &[eq("ii->")]).unwrap(),
            g.node(OpKind::Einsum, &[bm], &[eq("bii->bi")]).unwrap(),
            g.node(OpKind::Einsum, &[m, v], &[eq("ii,i->i")]).unwrap(),
            g.node(OpKind::Einsum, &[t], &[eq("iij->j")]).unwrap(),
        ]
    });
    let t: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let inputs = [
        Tensor::from_f32(&[2, 2], &[1., 2., 3., 4.]),
        Tensor::from_f32(&[2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]),
        Tensor::from_f32(&[2], &[10., 20.]),
        Tensor::from_f32(&[2, 2, 3], &t),
    ];
    let claims = supports(&delegate(true), &g);
    assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
    let out = run_both(&g, &inputs, 0.0);
    assert_eq!(out[0].f32s(), [5.0]);
    assert_eq!(out[1].f32s(), [1., 4., 5., 8.]);
    assert_eq!(out[2].f32s(), [10., 80.]);
    // Rows t[0][0] = 0 1 2 and t[1][1] = 9 10 11.
    assert_eq!(out[3].f32s(), [9., 11., 13.]);
}

/// GridSample by hand on the 2 x 2 image `[[1, 2], [3, 4]]` with `align_corners`: the
/// centre is the mean 2.5, the corners their pixels, x = 1 and y = -1 the top right 2; a
/// point past the corner reads 0 with zero padding and the corner 4 with border padding;
/// a NaN coordinate gives NaN; nearest rounds the centre (0.5, 0.5) half to even, to
/// pixel (0, 0), and (0.1, 0.1), at 0.55, to pixel (1, 1).
#[test]
fn grid_sample_by_hand() {
    let attrs = |mode: &str, padding: &str| {
        vec![
            ("mode", Attr::Str(mode.into())),
            ("padding_mode", Attr::Str(padding.into())),
            ("align_corners", Attr::Int(1)),
        ]
    };
    let g = graph(|g| {
        let x = g.input_fixed("x", DType::F32, &[1, 1, 2, 2]);
        let grid = g.input_fixed("grid", DType::F32, &[1, 1, 6, 2]);
        vec![
            g.node(OpKind::GridSample, &[x, grid], &attrs("linear", "zeros"))
                .unwrap(),
            g.node(OpKind::GridSample, &[x, grid], &attrs("linear", "border"))
                .unwrap(),
            g.node(OpKind::GridSample, &[x, grid], &attrs("nearest", "zeros"))
                .unwrap(),
        ]
    });
    let points = [
        0.0,
        0.0,
        -1.0,
        -1.0,
        1.0,
        -1.0,
        3.0,
        3.0,
        f32::NAN,
        0.0,
        0.1,
        0.1,
    ];
    let inputs = [
        Tensor::from_f32(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
        Tensor::from_f32(&[1, 1, 6, 2], &points),
    ];
    let out = run_both_nan(&g, &inputs);
    let want = [
        [2.5, 1.0, 2.0, 0.0, f32::NAN, 1.0 + 0.55 + 2.0 * 0.55],
        [2.5, 1.0, 2.0, 4.0, f32::NAN, 1.0 + 0.55 + 2.0 * 0.55],
        [1.0, 1.0, 2.0, 0.0, f32::NAN, 4.0],
    ];
    for (got, want) in out.iter().zip(&want) {
        for (&a, &b) in got.f32s().iter().zip(want) {
            assert!(
                a.is_nan() && b.is_nan() || (a - b).abs() < 1e-5,
                "{:?} vs {want:?}",
                got.f32s()
            );
        }
    }
}

#[test]
fn causal_conv_with_state_by_hand() {
    // x [1, 2, 3] and w [2, 1, 3]: channel 0 reads P = [0, 0, 1, 2, 3] (no past) against
    // [0.5, 1, 2], giving 2, 5, 8.5; channel 1 reads [0, 0, 4, 5, 6] against [1, -1, 1],
    // giving 4, 1, 5. The next state is P's last two positions. With a past state
    // [[10, 20], [1, 1]] and a bias [1, -1]: 28, 16, 9.5 and 3, 1, 4.
    let x = [1.0f32, 2., 3., 4., 5., 6.];
    let w = [0.5f32, 1., 2., 1., -1., 1.];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[1, 2, 3]);
        let wt = g.constant_f32("w", &[2, 1, 3], &w);
        let plain = g
            .named_node_outputs("plain", OpKind::CausalConvWithState, &[xt, wt], &[], 2)
            .unwrap();
        let b = g.constant_f32("b", &[2], &[1., -1.]);
        let past = g.input_fixed("past", DType::F32, &[1, 2, 2]);
        let stateful = g
            .named_node_outputs(
                "stateful",
                OpKind::CausalConvWithState,
                &[xt, wt, b, past],
                &[],
                2,
            )
            .unwrap();
        let silu = g
            .node(
                OpKind::CausalConvWithState,
                &[xt, wt],
                &[("activation", Attr::Str("silu".into()))],
            )
            .unwrap();
        vec![plain[0], plain[1], stateful[0], stateful[1], silu]
    });
    let inputs = [
        Tensor::from_f32(&[1, 2, 3], &x),
        Tensor::from_f32(&[1, 2, 2], &[10., 20., 1., 1.]),
    ];
    let out = run_both(&g, &inputs, 1e-6);
    assert_eq!(out[0].f32s(), [2., 5., 8.5, 4., 1., 5.]);
    assert_eq!(out[1].f32s(), [2., 3., 5., 6.]);
    assert_eq!(out[2].f32s(), [28., 16., 9.5, 3., 1., 4.]);
    assert_eq!(out[3].f32s(), [2., 3., 5., 6.]);
    // v / (1 + e^-v) of 2, 5, 8.5, 4, 1, 5.
    let want = [2.0f64, 5., 8.5, 4., 1., 5.].map(|v| v / (1.0 + (-v).exp()));
    assert_close_labelled("silu", out[4].f32s(), &want, 1e-6, 1e-6);
}

#[test]
fn causal_conv_with_state_matches_naive_sums_on_threads() {
    // Enough lines to split over threads; a decode step (L = 1) with a long kernel whose
    // taps read mostly the past state.
    let mut rng = Rng::new(77);
    for (b, c, l, k) in [(2, 64, 200, 4), (3, 5, 1, 6)] {
        let x = rng.vec(b * c * l);
        let w = rng.vec(c * k);
        let bias = rng.vec(c);
        let past = rng.vec(b * c * (k - 1));
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[b, c, l]);
            let wt = g.constant_f32("w", &[c, 1, k], &w);
            let bt = g.constant_f32("b", &[c], &bias);
            let pt = g.input_fixed("past", DType::F32, &[b, c, k - 1]);
            let act = [("activation", Attr::Str("swish".into()))];
            g.named_node_outputs(
                "cc",
                OpKind::CausalConvWithState,
                &[xt, wt, bt, pt],
                &act,
                2,
            )
            .unwrap()
        });
        let inputs = [
            Tensor::from_f32(&[b, c, l], &x),
            Tensor::from_f32(&[b, c, k - 1], &past),
        ];
        let out = run(&common::delegate_threads(3), &g, &inputs).unwrap();
        let (mut want_y, mut want_s) = (Vec::new(), Vec::new());
        for line in 0..b * c {
            let ch = line % c;
            let p: Vec<f64> = past[line * (k - 1)..(line + 1) * (k - 1)]
                .iter()
                .chain(&x[line * l..(line + 1) * l])
                .map(|&v| v as f64)
                .collect();
            for t in 0..l {
                let v =
                    bias[ch] as f64 + (0..k).map(|j| p[t + j] * w[ch * k + j] as f64).sum::<f64>();
                want_y.push(v / (1.0 + (-v).exp()));
            }
            want_s.extend_from_slice(&p[l..]);
        }
        assert_close_labelled("causal conv y", out[0].f32s(), &want_y, 1e-5, 1e-5);
        assert_close_labelled("causal conv state", out[1].f32s(), &want_s, 0.0, 0.0);
    }
}

/// The weights of the hand-checked LSTM and GRU cases below: 3 steps, batch 1, input 2,
/// hidden 2; `W` and `R` rows in gate order, `[Wb, Rb]`.
const RNN_X: [f32; 6] = [0.5, -1.0, 2.0, 0.3, -1.5, 1.0];
const RNN_W: [f32; 16] = [
    1.0, 2.0, -2.0, 0.5, 0.7, -0.3, 1.5, 1.5, -1.0, 2.5, 0.2, 0.4, 3.0, -1.0, -0.5, 2.0,
];
const RNN_R: [f32; 16] = [
    0.5, -0.5, 1.0, 0.2, -0.3, 0.8, 0.6, -1.2, 0.9, 0.1, -0.7, 0.5, 1.1, 0.4, 0.3, -0.9,
];
const RNN_B: [f32; 16] = [
    0.1, -0.2, 0.3, 0.0, 0.5, -0.1, 0.2, 0.4, 0.0, 0.1, -0.1, 0.2, 0.0, 0.3, -0.2, 0.1,
];

/// LSTM with `clip`, peepholes (constant, or given at run time) and `input_forget`, from an
/// initial cell state of [0.8, -0.5]; the expected `Y` and `Y_c` were computed in f64 with
/// numpy from ONNX's equations (`i = σ(clip(gi + Pi C))`, `f = 1 - i` when coupled,
/// `o = σ(clip(go + Po C'))`).
#[test]
fn lstm_clip_peepholes_and_input_forget_by_hand() {
    let p = [0.5f32, -0.4, 0.3, 0.9, -0.6, 0.2];
    type Case = (Option<f32>, bool, Option<bool>, [f64; 6], [f64; 2]);
    let cases: [Case; 3] = [
        (
            Some(1.5),
            false,
            Some(true),
            [
                0.26865222441169795,
                -0.10976747154561982,
                0.5712185460323068,
                -0.15499775748994243,
                -0.0035083636189280143,
                0.36673374930947755,
            ],
            [-0.018480609121635183, 0.654384145089064],
        ),
        (
            None,
            true,
            Some(false),
            [
                0.5192096617202705,
                -0.13398270813281307,
                0.6261709051905116,
                -0.48829453833508357,
                -0.07479874172689185,
                0.5887305246827345,
            ],
            [-0.6797762689925125, 0.9750590813009886],
        ),
        // A negative clip bounds by its absolute value.
        (
            Some(-0.7),
            true,
            None,
            [
                0.4183975095571811,
                -0.17887575956377724,
                0.3809658589472418,
                -0.15420365393826993,
                -0.061945072831145295,
                0.14667824176363536,
            ],
            [-0.18890245596633562, 0.32585128625297277],
        ),
    ];
    for (clip, coupled, peep_const, y, yc) in cases {
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[3, 1, 2]);
            let wt = g.constant_f32("w", &[1, 8, 2], &RNN_W);
            let rt = g.constant_f32("r", &[1, 8, 2], &RNN_R);
            let bt = g.constant_f32("b", &[1, 16], &RNN_B);
            let none = |g: &mut GraphBuilder, name: &str, dtype| {
                g.constant(name, dtype, &[0], TensorData::from_bytes(&[]))
            };
            let lens = none(g, "lens", DType::I32);
            let h0 = none(g, "h0", DType::F32);
            let c0 = g.input_fixed("c0", DType::F32, &[1, 1, 2]);
            let pt = match peep_const {
                Some(true) => g.constant_f32("p", &[1, 6], &p),
                Some(false) => g.input_fixed("p", DType::F32, &[1, 6]),
                None => none(g, "p", DType::F32),
            };
            let mut attrs = vec![
                ("hidden_size", Attr::Int(2)),
                ("input_forget", Attr::Int(i64::from(coupled))),
            ];
            if let Some(c) = clip {
                attrs.push(("clip", Attr::Float(c)));
            }
            let ins = [xt, wt, rt, bt, lens, h0, c0, pt];
            g.named_node_outputs("lstm", OpKind::LSTM, &ins, &attrs, 3)
                .unwrap()
        });
        let claims = supports(&delegate(true), &g);
        assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
        let mut inputs = vec![
            Tensor::from_f32(&[3, 1, 2], &RNN_X),
            Tensor::from_f32(&[1, 1, 2], &[0.8, -0.5]),
        ];
        if peep_const == Some(false) {
            inputs.push(Tensor::from_f32(&[1, 6], &p));
        }
        let out = run_both(&g, &inputs, 1e-5);
        let label = format!("clip {clip:?}, input_forget {coupled}, P {peep_const:?}");
        assert_close_labelled(&format!("Y, {label}"), out[0].f32s(), &y, 1e-6, 1e-5);
        assert_close_labelled(&format!("Y_h, {label}"), out[1].f32s(), &y[4..], 1e-6, 1e-5);
        assert_close_labelled(&format!("Y_c, {label}"), out[2].f32s(), &yc, 1e-6, 1e-5);
    }
}

/// GRU with `clip` = 0.6 on every gate's pre-activation, both candidate forms, from an
/// initial state of [0.4, -0.6]; the expected `Y` was computed in f64 with numpy
/// (`z = σ(clip(.))`, `r = σ(clip(.))`, `h~ = tanh(clip(.))`).
#[test]
fn gru_clip_by_hand() {
    for (lbr, y) in [0, 1].into_iter().zip(GRU_CLIP_Y) {
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[3, 1, 2]);
            let wt = g.constant_f32("w", &[1, 6, 2], &RNN_W[..12]);
            let rt = g.constant_f32("r", &[1, 6, 2], &RNN_R[..12]);
            let b: Vec<f32> = RNN_B[..6].iter().chain(&RNN_B[8..14]).copied().collect();
            let bt = g.constant_f32("b", &[1, 12], &b);
            let lens = g.constant("lens", DType::I32, &[0], TensorData::from_bytes(&[]));
            let h0 = g.input_fixed("h0", DType::F32, &[1, 1, 2]);
            let attrs = [
                ("hidden_size", Attr::Int(2)),
                ("clip", Attr::Float(0.6)),
                ("linear_before_reset", Attr::Int(lbr)),
            ];
            g.named_node_outputs("gru", OpKind::GRU, &[xt, wt, rt, bt, lens, h0], &attrs, 2)
                .unwrap()
        });
        let claims = supports(&delegate(true), &g);
        assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
        let inputs = [
            Tensor::from_f32(&[3, 1, 2], &RNN_X),
            Tensor::from_f32(&[1, 1, 2], &[0.4, -0.6]),
        ];
        let out = run_both(&g, &inputs, 1e-5);
        assert_close_labelled(&format!("Y, lbr {lbr}"), out[0].f32s(), &y, 1e-6, 1e-5);
        assert_close_labelled(
            &format!("Y_h, lbr {lbr}"),
            out[1].f32s(),
            &y[4..],
            1e-6,
            1e-5,
        );
    }
}

/// [`gru_clip_by_hand`]'s expected `Y` without and with `linear_before_reset`.
const GRU_CLIP_Y: [[f64; 6]; 2] = [
    [
        -0.2050119621784324,
        -0.478465454121199,
        -0.3226673935421501,
        0.17720822333145636,
        0.03271151947905673,
        0.252498731046195,
    ],
    [
        -0.2050119621784324,
        -0.5445465716415655,
        -0.3226673935421501,
        0.12070854115235641,
        0.02683684894386984,
        0.15050115878365505,
    ],
];

/// Einsum of three operands, contracted a pair at a time, and of integers, exact and
/// wrapping as numpy does (expected values from `numpy.einsum`): `ij,jk,kl->il` of small
/// i32 matrices; `i,i,i->` of [65536, 3], [65536, 4], [1, 5], whose sum 2^32 + 60 wraps
/// to 60 in i32 and stays whole in i64; `ij,jk,kl->li` of i64 past the i32 range; the
/// bilinear form `bn,anm,bm->ba` in f32 (and i32 matrix products of two operands).
#[test]
fn einsum_three_operands_and_integers_by_hand() {
    let eq = |e: &str| ("equation", Attr::Str(e.into()));
    let i32s = |shape: &[usize], v: &[i32]| {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        Tensor::from_bytes(DType::I32, shape, &bytes)
    };
    let as_i32 = |t: &Tensor| -> Vec<i32> {
        t.bytes()
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    let as_i64 = |t: &Tensor| -> Vec<i64> {
        t.bytes()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    let g = graph(|g| {
        let a = g.input_fixed("a", DType::I32, &[2, 3]);
        let b = g.input_fixed("b", DType::I32, &[3, 2]);
        let c = g.input_fixed("c", DType::I32, &[2, 2]);
        let u: Vec<TensorId> = ["u0", "u1", "u2"]
            .iter()
            .map(|n| g.input_fixed(n, DType::I32, &[2]))
            .collect();
        let v: Vec<TensorId> = ["v0", "v1", "v2"]
            .iter()
            .map(|n| g.input_fixed(n, DType::I64, &[2]))
            .collect();
        let p = g.input_fixed("p", DType::I64, &[2, 2]);
        let q = g.input_fixed("q", DType::I64, &[2, 2]);
        let r = g.input_fixed("r", DType::I64, &[2, 2]);
        let x = g.input_fixed("x", DType::F32, &[2, 3]);
        let w = g.input_fixed("w", DType::F32, &[2, 3, 4]);
        let y = g.input_fixed("y", DType::F32, &[2, 4]);
        vec![
            g.node(OpKind::Einsum, &[a, b, c], &[eq("ij,jk,kl->il")])
                .unwrap(),
            g.node(OpKind::Einsum, &u, &[eq("i,i,i->")]).unwrap(),
            g.node(OpKind::Einsum, &v, &[eq("i,i,i->")]).unwrap(),
            g.node(OpKind::Einsum, &[p, q, r], &[eq("ij,jk,kl->li")])
                .unwrap(),
            g.node(OpKind::Einsum, &[x, w, y], &[eq("bn,anm,bm->ba")])
                .unwrap(),
            g.node(OpKind::Einsum, &[a, b], &[eq("ij,jk->ki")]).unwrap(),
        ]
    });
    let claims = supports(&delegate(true), &g);
    assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
    let w: Vec<f32> = (0..24).map(|v| v as f32 / 8.0 - 1.0).collect();
    let inputs = [
        i32s(&[2, 3], &[1, 2, 3, 4, 5, 6]),
        i32s(&[3, 2], &[7, 8, 9, 10, 11, 12]),
        i32s(&[2, 2], &[1, -1, 2, 0]),
        i32s(&[2], &[65536, 3]),
        i32s(&[2], &[65536, 4]),
        i32s(&[2], &[1, 5]),
        Tensor::from_i64(&[2], &[65536, 3]),
        Tensor::from_i64(&[2], &[65536, 4]),
        Tensor::from_i64(&[2], &[1, 5]),
        Tensor::from_i64(&[2, 2], &[3_000_000_000, -2, 1, 7]),
        Tensor::from_i64(&[2, 2], &[2, 1, 0, 3]),
        Tensor::from_i64(&[2, 2], &[1, 0, 4, -1]),
        Tensor::from_f32(&[2, 3], &[1., 2., 3., -1., 0., 2.]),
        Tensor::from_f32(&[2, 3, 4], &w),
        Tensor::from_f32(&[2, 4], &[0.5, -1., 2., 1., 1., 1., -0.5, 0.]),
    ];
    for simd in [true, false] {
        let out = run(&delegate(simd), &g, &inputs).expect("einsum run");
        assert_eq!(as_i32(&out[0]), [186, -58, 447, -139]);
        assert_eq!(as_i32(&out[1]), [60]);
        assert_eq!(as_i64(&out[2]), [4_294_967_356]);
        assert_eq!(as_i64(&out[3]), [17_999_999_976, 90, -2_999_999_994, -22]);
        assert_close_labelled(
            "bilinear",
            out[4].f32s(),
            &[-0.5, 22.0, 1.5, 3.75],
            1e-6,
            1e-6,
        );
        // [[1, 2, 3], [4, 5, 6]] · [[7, 8], [9, 10], [11, 12]] = [[58, 64], [139, 154]].
        assert_eq!(as_i32(&out[5]), [58, 139, 64, 154]);
    }
}
