//! The BTIR 1.4 ops through the delegate (bitwise ops, BitShift, CumProd, Range, OneHot),
//! with SIMD and portable kernels, where the conformance kit's single-node cases do not
//! reach: chains that read held forms (a biased i8, an i64's two words broadcast), a
//! Range folded at init feeding run-time ops, the declines for operands that are not
//! constant, and an f16 ConvTranspose, BatchNormalization and Clip chain (computed in f32
//! between conversions, its constants widened at init, the normalization not folded).

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::{run, supports};
use baton_delegate_api::{DeclineReason, Support, Tensor, TensorData};
use common::delegate;

fn graph(build: impl FnOnce(&mut GraphBuilder) -> Vec<TensorId>) -> Graph {
    let mut g = GraphBuilder::new("t");
    for out in build(&mut g) {
        g.output(out);
    }
    g.finish().unwrap()
}

/// Runs `g` with both kernel sets, every node claimed; the outputs, which must agree
/// byte for byte between the two runs.
fn both(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    let mut results: Vec<Vec<Tensor>> = Vec::new();
    for simd in [true, false] {
        let d = delegate(simd);
        let claims = supports(&d, g);
        assert!(
            claims.iter().all(|s| matches!(s, Support::Yes)),
            "{claims:?}"
        );
        results.push(run(&d, g, inputs).expect("runs"));
    }
    for (a, b) in results[0].iter().zip(&results[1]) {
        assert_eq!(a.bytes(), b.bytes(), "simd vs portable");
    }
    results.swap_remove(0)
}

#[test]
fn bitwise_ops_of_i8_and_broadcast_i64_match_rust() {
    let a8: Vec<i8> = vec![-128, -1, 0, 1, 127, -77, 85, -86];
    let b8: Vec<i8> = vec![-1, 15, -16, 127];
    let a64: Vec<i64> = vec![i64::MIN, -1, 0x0123_4567_89ab_cdef, -0x5555_5555_5555_5556];
    let b64: Vec<i64> = vec![0x00ff_00ff_00ff_00ff, i64::MAX];
    let g = graph(|g| {
        let x = g.input_fixed("x", DType::I8, &[2, 4]);
        let y = g.input_fixed("y", DType::I8, &[4]);
        let p = g.input_fixed("p", DType::I64, &[2, 2]);
        let q = g.input_fixed("q", DType::I64, &[2, 1]);
        let mut outs = Vec::new();
        for op in [OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor] {
            outs.push(g.node(op, &[x, y], &[]).unwrap());
            outs.push(g.node(op, &[p, q], &[]).unwrap());
        }
        // A held i8 read by another integer op after the bitwise one.
        let not = g.node(OpKind::BitwiseNot, &[x], &[]).unwrap();
        outs.push(g.node(OpKind::Neg, &[not], &[]).unwrap());
        outs.push(g.node(OpKind::BitwiseNot, &[p], &[]).unwrap());
        outs
    });
    let out = both(
        &g,
        &[
            Tensor::from_bytes(DType::I8, &[2, 4], bytemuck::cast_slice(&a8)),
            Tensor::from_bytes(DType::I8, &[4], bytemuck::cast_slice(&b8)),
            Tensor::from_i64(&[2, 2], &a64),
            Tensor::from_i64(&[2, 1], &b64),
        ],
    );
    let fs: [fn(i64, i64) -> i64; 3] = [|x, y| x & y, |x, y| x | y, |x, y| x ^ y];
    for (k, f) in fs.iter().enumerate() {
        let want8: Vec<i8> = (0..8)
            .map(|i| f(a8[i] as i64, b8[i % 4] as i64) as i8)
            .collect();
        assert_eq!(out[2 * k].values::<i8>(), &want8[..], "i8 op {k}");
        let want64: Vec<i64> = (0..4).map(|i| f(a64[i], b64[i / 2])).collect();
        assert_eq!(out[2 * k + 1].values::<i64>(), &want64[..], "i64 op {k}");
    }
    let neg_not: Vec<i8> = a8.iter().map(|&v| (!v).wrapping_neg()).collect();
    assert_eq!(out[6].values::<i8>(), &neg_not[..]);
    let not64: Vec<i64> = a64.iter().map(|&v| !v).collect();
    assert_eq!(out[7].values::<i64>(), &not64[..]);
}

#[test]
fn shifts_of_u8_clear_past_the_width() {
    let x: Vec<u8> = vec![0xff, 0x81, 1, 0x80];
    let s: Vec<u8> = vec![0, 1, 7, 8, 9, 255];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::U8, &[4, 1]);
        let st = g.constant("s", DType::U8, &[6], TensorData::from_slice(&s));
        ["LEFT", "RIGHT"]
            .map(|d| {
                let attrs = [("direction", Attr::Str(d.into()))];
                g.node(OpKind::BitShift, &[xt, st], &attrs).unwrap()
            })
            .to_vec()
    });
    let out = both(&g, &[Tensor::from_bytes(DType::U8, &[4, 1], &x)]);
    let shift = |v: u8, by: u8, left: bool| match (by >= 8, left) {
        (true, _) => 0,
        (false, true) => v << by,
        (false, false) => v >> by,
    };
    for (k, left) in [true, false].into_iter().enumerate() {
        let want: Vec<u8> = (0..24).map(|i| shift(x[i / 6], s[i % 6], left)).collect();
        assert_eq!(out[k].values::<u8>(), &want[..], "left {left}");
    }
}

#[test]
fn cumprod_runs_both_ways_and_wraps_integers() {
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[2, 3]);
        let it = g.input_fixed("i", DType::I64, &[3]);
        let axis = g.constant_i64("axis", &[], &[1]);
        let zero = g.constant_i64("zero", &[], &[0]);
        let attrs = [("exclusive", Attr::Int(1)), ("reverse", Attr::Int(1))];
        vec![
            g.node(OpKind::CumProd, &[xt, axis], &[]).unwrap(),
            g.node(OpKind::CumProd, &[xt, axis], &attrs).unwrap(),
            g.node(OpKind::CumProd, &[it, zero], &[]).unwrap(),
        ]
    });
    let x = Tensor::from_f32(&[2, 3], &[2.0, -0.5, 3.0, f32::INFINITY, 0.0, 1.0]);
    let big = 1i64 << 40;
    let out = both(&g, &[x, Tensor::from_i64(&[3], &[big, big, -3])]);
    let f = |t: &Tensor| t.values::<f32>().to_vec();
    assert_eq!(f(&out[0])[..3], [2.0, -1.0, -3.0]);
    // inf * 0 is NaN, as the reference computes it.
    assert_eq!(f(&out[0])[3], f32::INFINITY);
    assert!(f(&out[0])[4].is_nan() && f(&out[0])[5].is_nan());
    assert_eq!(f(&out[1]), [-1.5, 3.0, 1.0, 0.0, 1.0, 1.0]);
    let p = big.wrapping_mul(big);
    assert_eq!(out[2].values::<i64>(), &[big, p, p.wrapping_mul(-3)]);
}

#[test]
fn range_is_folded_at_init_and_one_hot_reads_any_index() {
    let g = graph(|g| {
        let s = g.constant_f32("s", &[], &[-2.5]);
        let l = g.constant_f32("l", &[], &[7.25]);
        let d = g.constant_f32("d", &[], &[1.75]);
        let r = g.node(OpKind::Range, &[s, l, d], &[]).unwrap();
        let xt = g.input_fixed("x", DType::F32, &[6]);
        let sum = g.node(OpKind::Add, &[r, xt], &[]).unwrap();
        let idx = g.input_fixed("i", DType::F32, &[2, 3]);
        let depth = g.constant_i64("depth", &[1], &[4]);
        let values = g.constant_i64("v", &[2], &[-7, 9]);
        let axis = [("axis", Attr::Int(0))];
        let hot = g
            .node(OpKind::OneHot, &[idx, depth, values], &axis)
            .unwrap();
        vec![sum, hot]
    });
    let idx = [3.9, -1.0, f32::NAN, -4.5, 4.0, f32::NEG_INFINITY];
    let out = both(
        &g,
        &[
            Tensor::from_f32(&[6], &[1.0; 6]),
            Tensor::from_f32(&[2, 3], &idx),
        ],
    );
    let range: Vec<f32> = (0..6)
        .map(|i| (-2.5 + 1.75 * i as f64) as f32 + 1.0)
        .collect();
    assert_eq!(out[0].values::<f32>(), &range[..]);
    // Axis 0 of [4, 2, 3]: 3.9 -> 3, -1 -> 3, -4.5 -> -4 -> 0; NaN, 4 and -inf nowhere.
    let mut want = [-7i64; 24];
    for (pos, hot) in [(0usize, 3usize), (1, 3), (3, 0)] {
        want[hot * 6 + pos] = 9;
    }
    assert_eq!(out[1].values::<i64>(), &want[..]);
}

#[test]
fn value_dependent_shapes_need_constants() {
    // Built with constants, then Range's start and OneHot's depth made graph inputs (as
    // an exporter writes a length computed at run time), their outputs as declared.
    let mut ids = Vec::new();
    let mut g = graph(|g| {
        let s = g.constant_i64("s", &[], &[0]);
        let l = g.constant_i64("l", &[], &[5]);
        let d = g.constant_i64("d", &[], &[1]);
        let idx = g.input_fixed("i", DType::I64, &[3]);
        let depth = g.constant_i64("depth", &[1], &[4]);
        let v = g.constant_f32("v", &[2], &[0.0, 1.0]);
        ids = vec![s, depth];
        vec![
            g.node(OpKind::Range, &[s, l, d], &[]).unwrap(),
            g.node(OpKind::OneHot, &[idx, depth, v], &[]).unwrap(),
        ]
    });
    for t in ids {
        g.tensors[t].data = None;
        g.inputs.push(t);
    }
    let claims = supports(&delegate(true), &g);
    assert_eq!(claims.len(), 2);
    for claim in claims {
        match claim {
            Support::No(d) => assert_eq!(d.reason, DeclineReason::NotConstant, "{}", d.message),
            other => panic!("claimed {other:?}"),
        }
    }
}

#[test]
fn wide_unsigned_and_16_bit_integers_are_held_exactly() {
    let x: Vec<u64> = vec![u64::MAX, 1 << 63, 12_345];
    let h: Vec<i16> = vec![i16::MIN, -1, 0x1234, 7];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::U64, &[3]);
        let by = g.constant("by", DType::U64, &[1], TensorData::from_slice(&[63u64]));
        let right = [("direction", Attr::Str("RIGHT".into()))];
        let ht = g.input_fixed("h", DType::I16, &[2, 2]);
        let m = g.constant(
            "m",
            DType::I16,
            &[2],
            TensorData::from_slice(&[-256i16, 0x0f0f]),
        );
        let to_f32 = [("to", Attr::Int(DType::F32.onnx_code()))];
        let to_u16 = [("to", Attr::Int(DType::U16.onnx_code()))];
        let xor = g.node(OpKind::BitwiseXor, &[ht, m], &[]).unwrap();
        vec![
            g.node(OpKind::BitShift, &[xt, by], &right).unwrap(),
            g.node(OpKind::Cast, &[xt], &to_f32).unwrap(),
            xor,
            g.node(OpKind::Cast, &[xor], &to_u16).unwrap(),
        ]
    });
    let out = both(
        &g,
        &[
            Tensor::from_bytes(DType::U64, &[3], bytemuck::cast_slice(&x)),
            Tensor::from_bytes(DType::I16, &[2, 2], bytemuck::cast_slice(&h)),
        ],
    );
    assert_eq!(out[0].values::<u64>(), &[1, 1, 0]);
    let f: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    assert_eq!(out[1].values::<f32>(), &f[..]);
    let m = [-256i16, 0x0f0f];
    let xor: Vec<i16> = (0..4).map(|i| h[i] ^ m[i % 2]).collect();
    assert_eq!(out[2].values::<i16>(), &xor[..]);
    let wrapped: Vec<u16> = xor.iter().map(|&v| v as u16).collect();
    assert_eq!(out[3].values::<u16>(), &wrapped[..]);
}

/// `values` as an f16 tensor (exact for the small whole numbers used here).
fn f16s(shape: &[usize], values: &[f64]) -> (Vec<u8>, Tensor) {
    use baton_delegate_api::minifloat::encode16;
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| encode16(DType::F16, v).unwrap().to_le_bytes())
        .collect();
    let t = Tensor::from_bytes(DType::F16, shape, &bytes);
    (bytes, t)
}

#[test]
fn f16_transposed_convolution_normalization_and_clip_compute_in_f32() {
    let g = graph(|g| {
        let x = g.input_fixed("x", DType::F16, &[1, 1, 2, 2]);
        let c = |g: &mut GraphBuilder, name: &str, shape: &[usize], v: &[f64]| {
            let (bytes, _) = f16s(shape, v);
            g.constant(name, DType::F16, shape, TensorData::from_slice(&bytes))
        };
        let w = c(g, "w", &[1, 1, 2, 2], &[1.0, 0.0, 0.0, 1.0]);
        let y = g.node(OpKind::ConvTranspose, &[x, w], &[]).unwrap();
        let (s, b, m, v) = (
            c(g, "s", &[1], &[2.0]),
            c(g, "b", &[1], &[-1.0]),
            c(g, "m", &[1], &[0.0]),
            c(g, "v", &[1], &[1.0]),
        );
        let eps = [("epsilon", Attr::Float(0.0))];
        let n = g
            .node(OpKind::BatchNormalization, &[y, s, b, m, v], &eps)
            .unwrap();
        let (lo, hi) = (c(g, "lo", &[], &[0.0]), c(g, "hi", &[], &[6.0]));
        vec![g.node(OpKind::Clip, &[n, lo, hi], &[]).unwrap()]
    });
    let (_, x) = f16s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let out = both(&g, &[x]);
    // x at (0, 0) plus x at (1, 1), then 2y - 1 clipped to [0, 6].
    assert_eq!(out[0].dtype, DType::F16);
    assert_eq!(
        out[0].to_f64(),
        [1.0, 3.0, 0.0, 5.0, 6.0, 3.0, 0.0, 5.0, 6.0]
    );
}
