//! The BTIR 1.5 ops the CPU delegate runs. MatMulInteger, ConvInteger and ReverseSequence
//! against naive implementations written here (i64 sums wrapped to i32, as ONNX defines
//! them) and ONNX's own example, with the SIMD and portable kernels and several threads,
//! at sizes the conformance kit's small cases do not reach: many weight panels, more taps
//! than one kernel call takes, and sums past i32. AffineGrid, Det, MaxUnpool, Col2Im and
//! TensorScatter against values worked out by hand (TensorScatter of a large cache also
//! against a naive copy, on one thread and three); BitCast against the bit patterns.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorData, TensorId};
use baton_delegate_api::testing::run;
use baton_delegate_api::Tensor;
use common::{delegate, delegate_threads};

fn graph(build: impl FnOnce(&mut GraphBuilder) -> Vec<TensorId>) -> Graph {
    let mut g = GraphBuilder::new("t");
    for out in build(&mut g) {
        g.output(out);
    }
    g.finish().unwrap()
}

/// `n` deterministic bytes, every `step`-th value of a walk through 0..=255, with the
/// range ends often.
fn bytes(n: usize, step: usize) -> Vec<u8> {
    (0..n)
        .map(|i| match i % 11 {
            0 => 0,
            5 => 255,
            _ => (i * step % 256) as u8,
        })
        .collect()
}

/// The value of a stored 8-bit element of `dtype`.
fn value(dtype: DType, b: u8) -> i64 {
    if dtype == DType::I8 {
        b as i8 as i64
    } else {
        b as i64
    }
}

fn i32s(t: &Tensor) -> Vec<i32> {
    t.bytes()
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Runs `g` on the widest kernels (one and three threads) and the portable ones; all
/// must agree exactly. Returns the first output as i32.
fn run_all(g: &Graph, inputs: &[Tensor]) -> Vec<i32> {
    let simd = i32s(&run(&delegate(true), g, inputs).expect("simd run")[0]);
    let portable = i32s(&run(&delegate(false), g, inputs).expect("portable run")[0]);
    let threaded = i32s(&run(&delegate_threads(3), g, inputs).expect("threaded run")[0]);
    assert_eq!(simd, portable, "simd vs portable");
    assert_eq!(simd, threaded, "one thread vs three");
    simd
}

#[test]
fn matmul_integer_matches_naive_sums() {
    // (a dtype, b dtype, batch, m, k, n): k = 70_000 takes u8 x u8 sums past i32.
    let forms = [
        (DType::U8, DType::I8, 2, 37, 300, 45),
        (DType::I8, DType::U8, 1, 5, 70_000, 3),
        (DType::U8, DType::U8, 3, 1, 17, 33),
    ];
    for (i, &(da, db, batch, m, k, n)) in forms.iter().enumerate() {
        let a = bytes(batch * m * k, 37 + i);
        let b = bytes(k * n, 53 + i);
        let az = bytes(m, 91);
        let bz = bytes(n, 29);
        let g = graph(|g| {
            let at = g.input_fixed("a", da, &[batch, m, k]);
            let bt = g.constant("b", db, &[k, n], TensorData::from_bytes(&b));
            let azt = g.constant("az", da, &[m], TensorData::from_bytes(&az));
            let bzt = g.constant("bz", db, &[n], TensorData::from_bytes(&bz));
            vec![g
                .node(OpKind::MatMulInteger, &[at, bt, azt, bzt], &[])
                .unwrap()]
        });
        let got = run_all(&g, &[Tensor::from_bytes(da, &[batch, m, k], &a)]);
        let mut want = Vec::with_capacity(batch * m * n);
        for bi in 0..batch {
            for r in 0..m {
                for j in 0..n {
                    let sum: i64 = (0..k)
                        .map(|p| {
                            (value(da, a[(bi * m + r) * k + p]) - value(da, az[r]))
                                * (value(db, b[p * n + j]) - value(db, bz[j]))
                        })
                        .sum();
                    want.push(sum as i32);
                }
            }
        }
        assert_eq!(got, want, "MatMulInteger form {i}");
    }
}

#[test]
fn matmul_integer_batched_weights_broadcast_a() {
    // A [3, 8] against B [2, 8, 5]: the one A matrix against each weight matrix.
    let (m, k, n) = (3, 8, 5);
    let a = bytes(m * k, 41);
    let b = bytes(2 * k * n, 23);
    let g = graph(|g| {
        let at = g.input_fixed("a", DType::U8, &[m, k]);
        let bt = g.constant("b", DType::I8, &[2, k, n], TensorData::from_bytes(&b));
        vec![g.node(OpKind::MatMulInteger, &[at, bt], &[]).unwrap()]
    });
    let got = run_all(&g, &[Tensor::from_bytes(DType::U8, &[m, k], &a)]);
    let mut want = Vec::new();
    for bi in 0..2 {
        for r in 0..m {
            for j in 0..n {
                let sum: i64 = (0..k)
                    .map(|p| a[r * k + p] as i64 * b[(bi * k + p) * n + j] as i8 as i64)
                    .sum();
                want.push(sum as i32);
            }
        }
    }
    assert_eq!(got, want);
}

/// ConvInteger of `x` `[n, c, h, w]` by `w` `[m, c / group, kh, kw]`, padding with
/// the zero point (0 after it is taken away), as ONNX defines it.
#[allow(clippy::too_many_arguments)]
fn naive_conv(
    (dx, dw): (DType, DType),
    x: &[u8],
    [n, c, h, wd]: [usize; 4],
    w: &[u8],
    [m, kh, kw]: [usize; 3],
    (xz, wz): (u8, &[u8]),
    [stride, pad, dil, group]: [usize; 4],
) -> Vec<i32> {
    let (cg, mg) = (c / group, m / group);
    let oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
    let ow = (wd + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
    let mut y = Vec::with_capacity(n * m * oh * ow);
    for b in 0..n {
        for oc in 0..m {
            let grp = oc / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut sum = 0i64;
                    for ic in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * stride + ky * dil) as i64 - pad as i64;
                                let ix = (ox * stride + kx * dil) as i64 - pad as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                    continue;
                                }
                                let ch = grp * cg + ic;
                                let xv = x[((b * c + ch) * h + iy as usize) * wd + ix as usize];
                                let wv = w[((oc * cg + ic) * kh + ky) * kw + kx];
                                sum += (value(dx, xv) - value(dx, xz))
                                    * (value(dw, wv) - value(dw, wz[oc % wz.len()]));
                            }
                        }
                    }
                    y.push(sum as i32);
                }
            }
        }
    }
    y
}

#[test]
fn conv_integer_matches_naive_sums() {
    // (x dtype, w dtype, x shape, m, kernel, [stride, pad, dilation, group]): a 7x7 kernel
    // has more taps than one kernel call takes; a pointwise one is a plain GEMM.
    let forms = [
        (DType::U8, DType::I8, [2, 5, 9, 8], 20, 7, [2, 3, 1, 1]),
        (DType::I8, DType::U8, [1, 6, 7, 7], 18, 3, [1, 2, 2, 3]),
        (DType::U8, DType::U8, [2, 24, 5, 4], 40, 1, [1, 0, 1, 1]),
    ];
    for (i, &(dx, dw, xs, m, kk, conv)) in forms.iter().enumerate() {
        let [n, c, h, wd] = xs;
        let [stride, pad, dil, group] = conv;
        let x = bytes(n * c * h * wd, 67 + i);
        let w = bytes(m * (c / group) * kk * kk, 43 + i);
        let xz = 131u8;
        let wz = bytes(m, 17);
        let g = graph(|g| {
            let xt = g.input_fixed("x", dx, &xs);
            let wt = g.constant("w", dw, &[m, c / group, kk, kk], TensorData::from_bytes(&w));
            let xzt = g.constant("xz", dx, &[1], TensorData::from_bytes(&[xz]));
            let wzt = g.constant("wz", dw, &[m], TensorData::from_bytes(&wz));
            let p = pad as i64;
            let attrs = [
                ("strides", Attr::Ints(vec![stride as i64; 2])),
                ("pads", Attr::Ints(vec![p; 4])),
                ("dilations", Attr::Ints(vec![dil as i64; 2])),
                ("group", Attr::Int(group as i64)),
            ];
            vec![g
                .node(OpKind::ConvInteger, &[xt, wt, xzt, wzt], &attrs)
                .unwrap()]
        });
        let got = run_all(&g, &[Tensor::from_bytes(dx, &xs, &x)]);
        let want = naive_conv((dx, dw), &x, xs, &w, [m, kk, kk], (xz, &wz), conv);
        assert_eq!(got, want, "ConvInteger form {i}");
    }
}

#[test]
fn reverse_sequence_follows_the_onnx_example() {
    // ONNX's example: time-major [4, 4], lengths 4, 3, 2, 1 (the reference's test has the
    // same data and answer, checked there with numpy).
    let x: Vec<f32> = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]
        .iter()
        .map(|&v| v as f32)
        .collect();
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[4, 4]);
        let lt = g.input_fixed("lens", DType::I64, &[4]);
        let attrs = [("batch_axis", Attr::Int(1)), ("time_axis", Attr::Int(0))];
        vec![g.node(OpKind::ReverseSequence, &[xt, lt], &attrs).unwrap()]
    });
    let inputs = [
        Tensor::from_f32(&[4, 4], &x),
        Tensor::from_i64(&[4], &[4, 3, 2, 1]),
    ];
    let out = run(&delegate(true), &g, &inputs).unwrap();
    let want = [3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15].map(|v| v as f32);
    assert_eq!(out[0].f32s(), want);
    // A length past the time extent is a run-time error naming it.
    let bad = [
        Tensor::from_f32(&[4, 4], &x),
        Tensor::from_i64(&[4], &[4, 5, 0, 1]),
    ];
    let err = run(&delegate(true), &g, &bad).unwrap_err().to_string();
    assert!(err.contains("sequence length 5"), "{err}");
}

#[test]
fn reverse_sequence_moves_i8_rows_batch_major() {
    // Batch-major [2, 3, 2] of i8: entry 0 reverses all 3 steps, entry 1 its first 2.
    let x: Vec<u8> = (0..12).map(|v| (v as i8 - 6) as u8).collect();
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::I8, &[2, 3, 2]);
        let lt = g.input_fixed("lens", DType::I64, &[2]);
        let attrs = [("batch_axis", Attr::Int(0)), ("time_axis", Attr::Int(1))];
        vec![g.node(OpKind::ReverseSequence, &[xt, lt], &attrs).unwrap()]
    });
    let inputs = [
        Tensor::from_bytes(DType::I8, &[2, 3, 2], &x),
        Tensor::from_i64(&[2], &[3, 2]),
    ];
    let out = run(&delegate(true), &g, &inputs).unwrap();
    // Rows (pairs) of entry 0: [-6,-5] [-4,-3] [-2,-1] -> reversed; entry 1: [0,1] [2,3]
    // swapped, [4,5] kept.
    let want: Vec<u8> = [-2i8, -1, -4, -3, -6, -5, 2, 3, 0, 1, 4, 5]
        .iter()
        .map(|&v| v as u8)
        .collect();
    assert_eq!(out[0].bytes(), &want[..]);
}

#[test]
fn affine_grid_by_hand() {
    // Size [1, 1, 2, 2]: x and y are -0.5 and 0.5 without corner alignment, -1 and 1
    // with it. theta [[2, 0, 1], [0, 1, -1]] maps (x, y) to (2x + 1, y - 1).
    for (align, c) in [(0, 0.5f32), (1, 1.0)] {
        let g = graph(|g| {
            let theta = g.input_fixed("theta", DType::F32, &[1, 2, 3]);
            let size = g.constant_i64("size", &[4], &[1, 1, 2, 2]);
            let attrs = [("align_corners", Attr::Int(align))];
            vec![g.node(OpKind::AffineGrid, &[theta, size], &attrs).unwrap()]
        });
        let theta = Tensor::from_f32(&[1, 2, 3], &[2., 0., 1., 0., 1., -1.]);
        let out = run(&delegate(true), &g, &[theta]).unwrap();
        // Points in order (y, x) = (-c, -c), (-c, c), (c, -c), (c, c).
        let want = [
            -2. * c + 1.,
            -c - 1.,
            2. * c + 1.,
            -c - 1.,
            -2. * c + 1.,
            c - 1.,
            2. * c + 1.,
            c - 1.,
        ];
        assert_eq!(out[0].f32s(), want, "align_corners {align}");
    }
}

#[test]
fn det_by_hand() {
    // det [[2, 1], [4, 3]] = 2; det [[0, 1], [1, 0]] = -1; det [[1, 2], [2, 4]] = 0.
    let g = graph(|g| {
        let x = g.input_fixed("x", DType::F32, &[3, 2, 2]);
        vec![g.node(OpKind::Det, &[x], &[]).unwrap()]
    });
    let x = [2., 1., 4., 3., 0., 1., 1., 0., 1., 2., 2., 4.];
    let out = run(&delegate(true), &g, &[Tensor::from_f32(&[3, 2, 2], &x)]).unwrap();
    assert_eq!(out[0].f32s(), [2., -1., 0.]);
}

#[test]
fn max_unpool_by_hand() {
    // X [1, 1, 2, 2] = 1..4 with MaxPool indices 5, 7, 13, 15 (kernel 2, stride 2): a 4x4
    // result holding them at (1, 1), (1, 3), (3, 1), (3, 3); an output_shape of 5x5 keeps
    // that 4x4 at the start of each axis, so the values move to 6, 8, 16 and 18.
    for enlarged in [false, true] {
        let g = graph(|g| {
            let x = g.input_fixed("x", DType::F32, &[1, 1, 2, 2]);
            let i = g.input_fixed("i", DType::I64, &[1, 1, 2, 2]);
            let mut ins = vec![x, i];
            if enlarged {
                ins.push(g.constant_i64("shape", &[4], &[1, 1, 5, 5]));
            }
            let attrs = [
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
            ];
            vec![g.node(OpKind::MaxUnpool, &ins, &attrs).unwrap()]
        });
        let inputs = [
            Tensor::from_f32(&[1, 1, 2, 2], &[1., 2., 3., 4.]),
            Tensor::from_i64(&[1, 1, 2, 2], &[5, 7, 13, 15]),
        ];
        let out = run(&delegate(true), &g, &inputs).unwrap();
        let (n, at) = if enlarged {
            (25, [6, 8, 16, 18])
        } else {
            (16, [5, 7, 13, 15])
        };
        let mut want = vec![0f32; n];
        for (k, &a) in at.iter().enumerate() {
            want[a] = (k + 1) as f32;
        }
        assert_eq!(out[0].f32s(), &want[..], "output_shape given: {enlarged}");
        // An index outside the unpooled tensor is a run-time error naming it.
        let bad = [
            Tensor::from_f32(&[1, 1, 2, 2], &[1., 2., 3., 4.]),
            Tensor::from_i64(&[1, 1, 2, 2], &[5, 7, 16, 15]),
        ];
        let err = run(&delegate(true), &g, &bad).unwrap_err().to_string();
        assert!(err.contains("index 16"), "{err}");
    }
}

#[test]
fn col2im_by_hand() {
    // A 2x2 block over a 3x3 image: 4 positions; column p of block element e holds
    // 10 e + p, as an f32 and as an i32. Pixel (y, x) sums every (e, p) whose position
    // plus offset lands on it: the centre gets 3 + 12 + 21 + 30 = 66.
    let values: Vec<i32> = (0..4)
        .flat_map(|e| (0..4).map(move |p| 10 * e + p))
        .collect();
    let want = [0, 11, 11, 22, 66, 44, 22, 55, 33];
    for dtype in [DType::F32, DType::I32] {
        let g = graph(|g| {
            let x = g.input_fixed("x", dtype, &[1, 4, 4]);
            let image = g.constant_i64("image", &[2], &[3, 3]);
            let block = g.constant_i64("block", &[2], &[2, 2]);
            vec![g.node(OpKind::Col2Im, &[x, image, block], &[]).unwrap()]
        });
        let x = if dtype == DType::F32 {
            let v: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            Tensor::from_f32(&[1, 4, 4], &v)
        } else {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            Tensor::from_bytes(DType::I32, &[1, 4, 4], &bytes)
        };
        let out = run(&delegate(true), &g, &[x]).unwrap();
        let got: Vec<i32> = if dtype == DType::F32 {
            out[0].f32s().iter().map(|&v| v as i32).collect()
        } else {
            i32s(&out[0])
        };
        assert_eq!(got, want, "{dtype}");
    }
}

#[test]
fn tensor_scatter_by_hand() {
    // Cache [2, 1, 4, 1] holding 0..8, update [2, 1, 2, 1] holding 10, 11 | 12, 13.
    // Linear, write indices 1 and 2: entry 0 becomes 0 10 11 3, entry 1 4 5 12 13.
    // Circular, write indices 3 and 6 (6 mod 4 = 2): entry 0 takes 10 at step 3 and 11
    // at step 0 (11 1 2 10); entry 1 takes 12 at step 2 and 13 at step 3 (4 5 12 13).
    let past: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let update = [10., 11., 12., 13.];
    for (mode, starts, want) in [
        ("linear", [1, 2], [0., 10., 11., 3., 4., 5., 12., 13.]),
        ("circular", [3, 6], [11., 1., 2., 10., 4., 5., 12., 13.]),
    ] {
        let g = graph(|g| {
            let p = g.input_fixed("past", DType::F32, &[2, 1, 4, 1]);
            let u = g.input_fixed("update", DType::F32, &[2, 1, 2, 1]);
            let w = g.input_fixed("write", DType::I64, &[2]);
            let attrs = [("mode", Attr::Str(mode.into()))];
            vec![g.node(OpKind::TensorScatter, &[p, u, w], &attrs).unwrap()]
        });
        let inputs = [
            Tensor::from_f32(&[2, 1, 4, 1], &past),
            Tensor::from_f32(&[2, 1, 2, 1], &update),
            Tensor::from_i64(&[2], &starts),
        ];
        let out = run(&delegate(true), &g, &inputs).unwrap();
        assert_eq!(out[0].f32s(), want, "mode {mode}");
    }
    // Linear: an update running past the end, or a negative index, is a run-time error
    // naming the entry.
    let g = graph(|g| {
        let p = g.input_fixed("past", DType::F32, &[2, 1, 4, 1]);
        let u = g.input_fixed("update", DType::F32, &[2, 1, 2, 1]);
        let w = g.input_fixed("write", DType::I64, &[2]);
        vec![g.node(OpKind::TensorScatter, &[p, u, w], &[]).unwrap()]
    });
    for (starts, says) in [
        ([0, 3], "write_indices[1] 3"),
        ([-1, 0], "write_indices[0] is -1"),
    ] {
        let inputs = [
            Tensor::from_f32(&[2, 1, 4, 1], &past),
            Tensor::from_f32(&[2, 1, 2, 1], &update),
            Tensor::from_i64(&[2], &starts),
        ];
        let err = run(&delegate(true), &g, &inputs).unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn tensor_scatter_threads_over_heads_of_a_large_u8_cache() {
    // [batch 2, heads 4, steps 512, width 96] u8 (384 KiB, split over the pool): entry
    // 0's 5 update steps land on 510, 511, 0, 1 and 2 (circular), entry 1's on 7 to 11.
    let (b, h, s, w, n) = (2, 4, 512, 96, 5);
    let past = bytes(b * h * s * w, 7);
    let update = bytes(b * h * n * w, 13);
    let starts = [510i64, 7];
    let g = graph(|g| {
        let p = g.input_fixed("past", DType::U8, &[b, h, s, w]);
        let u = g.input_fixed("update", DType::U8, &[b, h, n, w]);
        let wt = g.input_fixed("write", DType::I64, &[b]);
        let attrs = [("mode", Attr::Str("circular".into()))];
        vec![g.node(OpKind::TensorScatter, &[p, u, wt], &attrs).unwrap()]
    });
    let inputs = [
        Tensor::from_bytes(DType::U8, &[b, h, s, w], &past),
        Tensor::from_bytes(DType::U8, &[b, h, n, w], &update),
        Tensor::from_i64(&[b], &starts),
    ];
    let mut want = past.clone();
    for (bi, &start) in starts.iter().enumerate() {
        for hi in 0..h {
            for j in 0..n {
                let at = (start as usize + j) % s;
                let dst = ((bi * h + hi) * s + at) * w;
                let src = ((bi * h + hi) * n + j) * w;
                want[dst..dst + w].copy_from_slice(&update[src..src + w]);
            }
        }
    }
    let one = run(&delegate(true), &g, &inputs).unwrap();
    let three = run(&delegate_threads(3), &g, &inputs).unwrap();
    assert_eq!(one[0].bytes(), &want[..]);
    assert_eq!(three[0].bytes(), &want[..]);
}

/// One BitCast node from a `from` input of `n` elements to ONNX dtype `to`.
fn bit_cast_graph(from: DType, to: DType, n: usize) -> Graph {
    graph(|g| {
        let x = g.input_fixed("x", from, &[n]);
        let attrs = [("to", Attr::Int(to.onnx_code()))];
        vec![g.node(OpKind::BitCast, &[x], &attrs).unwrap()]
    })
}

#[test]
fn bit_cast_by_hand() {
    let cast = |from: DType, to: DType, bytes: &[u8]| {
        let n = bytes.len() / from.size();
        let g = bit_cast_graph(from, to, n);
        let x = Tensor::from_bytes(from, &[n], bytes);
        run(&delegate(true), &g, &[x]).map(|out| out[0].bytes().to_vec())
    };
    // 1.0f32 is 0x3F800000 and -2.0 0xC0000000: the i32 1065353216 and -1073741824, the
    // same four bytes.
    let f = [1.0f32, -2.0];
    let fb: Vec<u8> = f.iter().flat_map(|v| v.to_le_bytes()).collect();
    let want: Vec<u8> = [1_065_353_216i32, -1_073_741_824]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(cast(DType::F32, DType::I32, &fb).unwrap(), want);
    // i8 -1, 0, 127, -128 are the bytes 255, 0, 127, 128, u8 values as they are; and
    // back (the executable holds an i8 biased, so these two are not views).
    let bytes = [255u8, 0, 127, 128];
    assert_eq!(cast(DType::I8, DType::U8, &bytes).unwrap(), bytes);
    assert_eq!(cast(DType::U8, DType::I8, &bytes).unwrap(), bytes);
    // Bools are the bytes 0 and 1 (held as 0.0/1.0 words); a byte of 2 is no bool.
    assert_eq!(cast(DType::Bool, DType::I8, &[1, 0, 1]).unwrap(), [1, 0, 1]);
    assert_eq!(cast(DType::U8, DType::Bool, &[0, 1, 1]).unwrap(), [0, 1, 1]);
    assert_eq!(cast(DType::I8, DType::Bool, &[1, 0]).unwrap(), [1, 0]);
    let err = cast(DType::U8, DType::Bool, &[0, 2, 1])
        .unwrap_err()
        .to_string();
    assert!(err.contains("the byte 2, which is no bool"), "{err}");
    // f16 1.0 (0x3C00) as u16 is 15360; i64 -1 as u64 is 2^64 - 1: the bytes unchanged.
    assert_eq!(
        cast(DType::F16, DType::U16, &[0x00, 0x3C]).unwrap(),
        [0x00, 0x3C]
    );
    assert_eq!(cast(DType::I64, DType::U64, &[0xFF; 8]).unwrap(), [0xFF; 8]);
}

#[test]
fn bit_cast_of_an_intermediate_feeds_the_next_op() {
    // Not(BitCast(x as u8 -> bool)): the bool step's output is read by another op, not
    // only copied out; bytes 1, 0, 0, 1 give false, true, true, false.
    let g = graph(|g| {
        let x = g.input_fixed("x", DType::U8, &[4]);
        let to = [("to", Attr::Int(DType::Bool.onnx_code()))];
        let b = g.node(OpKind::BitCast, &[x], &to).unwrap();
        vec![g.node(OpKind::Not, &[b], &[]).unwrap()]
    });
    let x = Tensor::from_bytes(DType::U8, &[4], &[1, 0, 0, 1]);
    let out = run(&delegate(true), &g, &[x]).unwrap();
    assert_eq!(out[0].bytes(), [0, 1, 1, 0]);
}
