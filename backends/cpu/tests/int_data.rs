//! Integer and byte data through the delegate, where the conformance kit cannot reach:
//! an int8 convolution's output (held channels-last inside QDQ chains) read by a Cast
//! or a byte mover, integer division by zero, TopK of 8-bit values and ScatterND of f16
//! (bytes moved) and i8 (wrapping sums), worked out by hand.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::{run, supports};
use baton_delegate_api::{Support, Tensor, TensorData};
use common::delegate;

const X: [usize; 4] = [1, 3, 4, 5];
const M: usize = 4;

/// `x` (i8) → DQ → 1x1 Conv → Q (i8), then `tail` applied to the quantized result.
fn qconv(tail: impl FnOnce(&mut GraphBuilder, TensorId) -> TensorId) -> Graph {
    let mut b = GraphBuilder::new("qconv_tail");
    let x = b.input_fixed("x", DType::I8, &X);
    let i8c = |b: &mut GraphBuilder, name: &str, shape: &[usize], v: &[i8]| {
        b.constant(name, DType::I8, shape, TensorData::from_slice(v))
    };
    let xs = b.constant_f32("xs", &[], &[0.05]);
    let xz = i8c(&mut b, "xz", &[], &[3]);
    let xd = b.node(OpKind::DequantizeLinear, &[x, xs, xz], &[]).unwrap();
    let wv: Vec<i8> = (0..M * X[1]).map(|i| ((i * 37) % 101) as i8 - 50).collect();
    let w = i8c(&mut b, "w", &[M, X[1], 1, 1], &wv);
    let ws = b.constant_f32("ws", &[], &[0.01]);
    let wz = i8c(&mut b, "wz", &[], &[0]);
    let wd = b.node(OpKind::DequantizeLinear, &[w, ws, wz], &[]).unwrap();
    let y = b.node(OpKind::Conv, &[xd, wd], &[]).unwrap();
    let ys = b.constant_f32("ys", &[], &[0.02]);
    let yz = i8c(&mut b, "yz", &[], &[-5]);
    let q = b.node(OpKind::QuantizeLinear, &[y, ys, yz], &[]).unwrap();
    let out = tail(&mut b, q);
    b.output(out);
    b.finish().unwrap()
}

fn input() -> Tensor {
    let n: usize = X.iter().product();
    let bytes: Vec<u8> = (0..n).map(|i| (i * 53 % 256) as u8).collect();
    Tensor::from_bytes(DType::I8, &X, &bytes)
}

/// Runs `g` on the delegate, which must claim every node (the host would run the rest).
fn claimed_run(g: &Graph, simd: bool, inputs: &[Tensor]) -> Vec<Tensor> {
    let d = delegate(simd);
    let claims = supports(&d, g);
    assert!(
        claims.iter().all(|s| matches!(s, Support::Yes)),
        "{claims:?}"
    );
    run(&d, g, inputs).expect("runs")
}

fn values(g: &Graph, simd: bool) -> Vec<f64> {
    claimed_run(g, simd, &[input()])[0].to_f64()
}

#[test]
fn an_int8_convolution_output_read_by_a_cast_or_a_mover_is_read_nchw() {
    for simd in [true, false] {
        let plain = values(&qconv(|_, q| q), simd);
        let levels: std::collections::BTreeSet<i64> = plain.iter().map(|&v| v as i64).collect();
        assert!(levels.len() > 4, "a degenerate convolution: {levels:?}");
        // Cast to i32: the same values in the same order.
        let cast = qconv(|b, q| b.node(OpKind::Cast, &[q], &[("to", Attr::Int(6))]).unwrap());
        assert_eq!(values(&cast, simd), plain, "simd {simd}: Cast");
        // Transpose to NHWC: element (c, h, w) of the plain result at (h, w, c).
        let perm = [("perm", Attr::Ints(vec![0, 2, 3, 1]))];
        let moved = qconv(|b, q| b.node(OpKind::Transpose, &[q], &perm).unwrap());
        let (h, w) = (X[2], X[3]);
        let want: Vec<f64> = (0..h * w * M)
            .map(|i| {
                let (p, c) = (i / M, i % M);
                plain[c * h * w + p]
            })
            .collect();
        assert_eq!(values(&moved, simd), want, "simd {simd}: Transpose");
    }
}

#[test]
fn integer_division_by_zero_fails_the_run_as_in_the_reference() {
    for dtype in [DType::I32, DType::I64] {
        let mut b = GraphBuilder::new("div");
        let a = b.input_fixed("a", dtype, &[3]);
        let d = b.input_fixed("d", dtype, &[3]);
        let q = b.node(OpKind::Div, &[a, d], &[]).unwrap();
        b.output(q);
        let g = b.finish().unwrap();
        let tensor = |v: [i64; 3]| match dtype {
            DType::I32 => {
                Tensor::from_bytes(dtype, &[3], bytemuck::cast_slice(&v.map(|x| x as i32)))
            }
            _ => Tensor::from_bytes(dtype, &[3], bytemuck::cast_slice(&v)),
        };
        let ok = claimed_run(&g, true, &[tensor([-7, 9, 5]), tensor([2, -4, 5])]);
        assert_eq!(
            ok[0].to_f64(),
            vec![-3.0, -2.0, 1.0],
            "{dtype}: truncation toward zero"
        );
        let err = run(&delegate(true), &g, &[tensor([1, 2, 3]), tensor([1, 0, 1])])
            .expect_err("a zero divisor");
        assert!(
            err.to_string().contains("division by zero"),
            "{dtype}: {err}"
        );
    }
}

#[test]
fn eight_bit_relu_and_clip_keep_the_stored_bytes_exact() {
    let v: Vec<u8> = (0..=255u8).collect();
    for dtype in [DType::I8, DType::U8] {
        let value = |b: u8| {
            if dtype == DType::I8 {
                b as i8 as i64
            } else {
                b as i64
            }
        };
        let (lo, hi) = if dtype == DType::I8 {
            (-100i64, 90i64)
        } else {
            (3, 200)
        };
        let mut b = GraphBuilder::new("clip8");
        let x = b.input_fixed("x", dtype, &[256]);
        let bound = |b: &mut GraphBuilder, name: &str, v: i64| {
            b.constant(name, dtype, &[], TensorData::from_bytes(&[v as u8]))
        };
        let (l, h) = (bound(&mut b, "lo", lo), bound(&mut b, "hi", hi));
        let c = b.node(OpKind::Clip, &[x, l, h], &[]).unwrap();
        let r = b.node(OpKind::Relu, &[x], &[]).unwrap();
        b.output(c);
        b.output(r);
        let g = b.finish().unwrap();
        let input = Tensor::from_bytes(dtype, &[256], &v);
        for simd in [true, false] {
            let out = claimed_run(&g, simd, std::slice::from_ref(&input));
            let clip: Vec<f64> = v.iter().map(|&b| value(b).clamp(lo, hi) as f64).collect();
            let relu: Vec<f64> = v.iter().map(|&b| value(b).max(0) as f64).collect();
            assert_eq!(out[0].to_f64(), clip, "{dtype} Clip");
            assert_eq!(out[1].to_f64(), relu, "{dtype} Relu");
        }
    }
}

#[test]
fn top_k_of_eight_bit_values_compares_them_as_integers() {
    // i8 3, -128, 127, 3, -1: the largest 3 are 127 (at 2), then the tie 3 at 0 and 3;
    // as u8 the same bytes are 3, 128, 127, 3, 255, whose smallest 3 are 3 (at 0 and 3)
    // and 127 (at 2).
    let bytes = [3u8, 128, 127, 3, 255];
    for (dtype, largest, want_values, want_positions) in [
        (DType::I8, 1, [127u8, 3, 3], [2i64, 0, 3]),
        (DType::U8, 0, [3, 3, 127], [0, 3, 2]),
    ] {
        let mut b = GraphBuilder::new("topk8");
        let x = b.input_fixed("x", dtype, &[5]);
        let k = b.constant_i64("k", &[1], &[3]);
        let outs = b
            .named_node_outputs(
                "top",
                OpKind::TopK,
                &[x, k],
                &[("largest", Attr::Int(largest))],
                2,
            )
            .unwrap();
        for t in outs {
            b.output(t);
        }
        let g = b.finish().unwrap();
        let out = claimed_run(&g, true, &[Tensor::from_bytes(dtype, &[5], &bytes)]);
        assert_eq!(out[0].bytes(), want_values, "{dtype} values");
        let positions: Vec<i64> = out[1].to_f64().iter().map(|&v| v as i64).collect();
        assert_eq!(positions, want_positions, "{dtype} positions");
    }
}

#[test]
fn scatter_nd_of_f16_moves_bytes_and_of_i8_wraps() {
    // f16 rows [3, 2]: row 2 takes the update's first row, row 0 its second; the halves
    // (NaN and -0 among them) are moved, not converted.
    let halves: [u16; 6] = [0x3C00, 0x7E01, 0x8000, 0x0001, 0xC000, 0x7BFF];
    let updates: [u16; 4] = [0xFC00, 0x7C00, 0x0400, 0x7E55];
    let le = |v: &[u16]| -> Vec<u8> { v.iter().flat_map(|h| h.to_le_bytes()).collect() };
    let mut b = GraphBuilder::new("scatter_f16");
    let x = b.input_fixed("x", DType::F16, &[3, 2]);
    let i = b.constant_i64("i", &[2, 1], &[2, 0]);
    let u = b.input_fixed("u", DType::F16, &[2, 2]);
    let y = b.node(OpKind::ScatterND, &[x, i, u], &[]).unwrap();
    b.output(y);
    let g = b.finish().unwrap();
    let out = claimed_run(
        &g,
        true,
        &[
            Tensor::from_bytes(DType::F16, &[3, 2], &le(&halves)),
            Tensor::from_bytes(DType::F16, &[2, 2], &le(&updates)),
        ],
    );
    let want = le(&[0x0400, 0x7E55, 0x8000, 0x0001, 0xFC00, 0x7C00]);
    assert_eq!(out[0].bytes(), &want[..]);
    // i8 [100, -100] with reduction add of 100 and 1 at 0, -100 at 1: 201 wraps to -55,
    // -200 to 56.
    let mut b = GraphBuilder::new("scatter_i8");
    let x = b.input_fixed("x", DType::I8, &[2]);
    let i = b.constant_i64("i", &[3, 1], &[0, 1, 0]);
    let u = b.input_fixed("u", DType::I8, &[3]);
    let add = [("reduction", Attr::Str("add".into()))];
    let y = b.node(OpKind::ScatterND, &[x, i, u], &add).unwrap();
    b.output(y);
    let g = b.finish().unwrap();
    let bytes = |v: &[i8]| -> Vec<u8> { v.iter().map(|&x| x as u8).collect() };
    let out = claimed_run(
        &g,
        true,
        &[
            Tensor::from_bytes(DType::I8, &[2], &bytes(&[100, -100])),
            Tensor::from_bytes(DType::I8, &[3], &bytes(&[100, -100, 1])),
        ],
    );
    assert_eq!(out[0].bytes(), &bytes(&[-55, 56])[..]);
}
