//! Integer and byte data through the delegate, where the conformance kit cannot reach:
//! an int8 convolution's output (held channels-last inside QDQ chains) read by a Cast
//! or a byte mover, and integer division by zero.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::run;
use baton_delegate_api::{Tensor, TensorData};
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

fn values(g: &Graph, simd: bool) -> Vec<f64> {
    let out = run(&delegate(simd), g, &[input()]).expect("runs");
    out[0].to_f64()
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
        let ok = run(
            &delegate(true),
            &g,
            &[tensor([-7, 9, 5]), tensor([2, -4, 5])],
        )
        .expect("runs");
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
