//! QDQ groups end to end through the delegate (supports → compile → init → execute), with
//! SIMD kernels and without, against a direct f64 evaluation of the same QDQ graph: every
//! output within one quantization step.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::{run, Rng};
use baton_delegate_api::{Tensor, TensorData};
use common::{delegate, delegate_isa};

/// A QDQ Conv: `x` (NCHW, i8 or u8) → DQ → Conv(w per channel, i32 bias) → [Relu] → Q.
struct ConvCase {
    x_dtype: DType,
    x: [usize; 4],
    m: usize,
    k: usize,
    stride: usize,
    pad: usize,
    group: usize,
    relu: bool,
    /// A 1-D convolution of `x = [n, c, 1, w]` read as `[n, c, w]`, kernel `[k]`.
    one_d: bool,
}

fn scalar(
    b: &mut GraphBuilder,
    dtype: DType,
    name: &str,
    scale: f32,
    zp: i32,
) -> (TensorId, TensorId) {
    let s = b.constant_f32(&format!("{name}_s"), &[], &[scale]);
    let z = b.constant(
        &format!("{name}_z"),
        dtype,
        &[],
        TensorData::from_bytes(&[zp as u8]),
    );
    (s, z)
}

fn check_conv(c: &ConvCase, seed: u64) {
    let mut rng = Rng::new(seed);
    let [n, ch, h, w] = c.x;
    let cg = ch / c.group;
    let mg = c.m / c.group;
    // A 1-D convolution: no kernel rows, no padding or stride along the height of 1.
    let (kh, ph) = if c.one_d { (1, 0) } else { (c.k, c.pad) };
    let (lo, hi, xz) = if c.x_dtype == DType::U8 {
        (0, 255, 131)
    } else {
        (-128, 127, -9)
    };
    let xs = 0.02f32;
    let xq: Vec<i32> = (0..n * ch * h * w)
        .map(|_| lo + (rng.next_u64() % (hi - lo + 1) as u64) as i32)
        .collect();
    let wq: Vec<i8> = (0..c.m * cg * kh * c.k)
        .map(|_| (rng.next_u64() % 255) as i32 as i8)
        .map(|v| v.max(-127))
        .collect();
    let ws: Vec<f32> = (0..c.m).map(|i| 0.003 + 0.0007 * (i % 5) as f32).collect();
    let bias: Vec<i32> = (0..c.m).map(|i| (i as i32 * 911) % 3000 - 1500).collect();
    let fan = (cg * kh * c.k) as f32;
    let ys = 3.0 * xs * 0.005 * 74.0 * 74.0 * fan.sqrt() / 127.0;
    let yz = if c.relu { lo } else { (lo + hi) / 2 };

    let dims = |v: &[usize]| -> Vec<usize> {
        if c.one_d {
            vec![v[0], v[1], v[3]]
        } else {
            v.to_vec()
        }
    };
    let mut b = GraphBuilder::new("qconv");
    let x = b.input_fixed("x", c.x_dtype, &dims(&c.x));
    let (s, z) = scalar(&mut b, c.x_dtype, "x", xs, xz);
    let xd = b.node(OpKind::DequantizeLinear, &[x, s, z], &[]).unwrap();
    let wt = b.constant(
        "w",
        DType::I8,
        &dims(&[c.m, cg, kh, c.k]),
        TensorData::from_slice(&wq),
    );
    let wst = b.constant_f32("w_s", &[c.m], &ws);
    let wzt = b.constant(
        "w_z",
        DType::I8,
        &[c.m],
        TensorData::from_bytes(&vec![0; c.m]),
    );
    let axis = [("axis", Attr::Int(0))];
    let wd = b
        .node(OpKind::DequantizeLinear, &[wt, wst, wzt], &axis)
        .unwrap();
    let bt = b.constant("b", DType::I32, &[c.m], TensorData::from_slice(&bias));
    let bs: Vec<f32> = ws.iter().map(|&v| xs * v).collect();
    let bst = b.constant_f32("b_s", &[c.m], &bs);
    let bzt = b.constant(
        "b_z",
        DType::I32,
        &[c.m],
        TensorData::from_slice(&vec![0i32; c.m]),
    );
    let bd = b
        .node(OpKind::DequantizeLinear, &[bt, bst, bzt], &axis)
        .unwrap();
    let (k, st, p) = (c.k as i64, c.stride as i64, c.pad as i64);
    let spatial = if c.one_d { 1 } else { 2 };
    let attrs = [
        ("kernel_shape", Attr::Ints(vec![k; spatial])),
        ("strides", Attr::Ints(vec![st; spatial])),
        ("pads", Attr::Ints(vec![p; 2 * spatial])),
        ("group", Attr::Int(c.group as i64)),
    ];
    let mut y = b.node(OpKind::Conv, &[xd, wd, bd], &attrs).unwrap();
    if c.relu {
        y = b.node(OpKind::Relu, &[y], &[]).unwrap();
    }
    let (s, z) = scalar(&mut b, c.x_dtype, "y", ys, yz);
    let q = b.node(OpKind::QuantizeLinear, &[y, s, z], &[]).unwrap();
    b.output(q);
    let g = b.finish().unwrap();

    let bytes: Vec<u8> = xq.iter().map(|&v| v as u8).collect();
    let input = Tensor::from_bytes(c.x_dtype, &dims(&c.x), &bytes);
    let oh = (h + 2 * ph - kh) / c.stride + 1;
    let ow = (w + 2 * c.pad - c.k) / c.stride + 1;
    let mut want = Vec::new();
    for bi in 0..n {
        for mo in 0..c.m {
            let grp = mo / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias[mo] as f64 * xs as f64 * ws[mo] as f64;
                    for ci in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..c.k {
                                let iy = (oy * c.stride + ky) as isize - ph as isize;
                                let ix = (ox * c.stride + kx) as isize - c.pad as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xi =
                                    ((bi * ch + grp * cg + ci) * h + iy as usize) * w + ix as usize;
                                let wi = ((mo * cg + ci) * kh + ky) * c.k + kx;
                                acc += (xq[xi] - xz) as f64
                                    * xs as f64
                                    * (wq[wi] as f64 * ws[mo] as f64);
                            }
                        }
                    }
                    if c.relu {
                        acc = acc.max(0.0);
                    }
                    let v = ((acc / ys as f64).round_ties_even() as i64 + yz as i64)
                        .clamp(lo as i64, hi as i64);
                    want.push(v);
                }
            }
        }
    }
    // Every kernel family this machine runs sums in exact integers and requantizes the
    // same way: they must agree byte for byte, and be within a rounding step of the f64
    // reference.
    let mut first: Option<Vec<u8>> = None;
    for isa in common::isas() {
        let out = run(&delegate_isa(isa), &g, std::slice::from_ref(&input)).expect("runs");
        let got: Vec<i64> = out[0].to_f64().iter().map(|&v| v as i64).collect();
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .max()
            .unwrap_or(0);
        assert!(worst <= 1, "isa {isa}: {worst} steps off");
        let saturated = got.iter().filter(|&&v| v == hi as i64).count();
        assert!(saturated * 5 < got.len(), "output mostly saturated");
        let bytes = out[0].bytes().to_vec();
        match &first {
            None => first = Some(bytes),
            Some(f) => assert!(f == &bytes, "isa {isa} differs from isa auto"),
        }
    }
}

#[test]
fn qdq_convolutions_run_in_integers_within_one_step() {
    let cases = [
        ConvCase {
            x_dtype: DType::I8,
            x: [1, 5, 9, 7],
            m: 7,
            k: 3,
            stride: 1,
            pad: 1,
            group: 1,
            relu: false,
            one_d: false,
        },
        ConvCase {
            x_dtype: DType::I8,
            x: [2, 6, 8, 8],
            m: 4,
            k: 3,
            stride: 2,
            pad: 1,
            group: 2,
            relu: true,
            one_d: false,
        },
        ConvCase {
            x_dtype: DType::I8,
            x: [1, 12, 6, 6],
            m: 12,
            k: 3,
            stride: 1,
            pad: 1,
            group: 12,
            relu: true,
            one_d: false,
        },
        ConvCase {
            x_dtype: DType::U8,
            x: [1, 9, 5, 5],
            m: 11,
            k: 1,
            stride: 1,
            pad: 0,
            group: 1,
            relu: false,
            one_d: false,
        },
        ConvCase {
            x_dtype: DType::U8,
            x: [1, 3, 11, 11],
            m: 5,
            k: 3,
            stride: 2,
            pad: 0,
            group: 1,
            relu: true,
            one_d: false,
        },
        // Depthwise with a 5x5 window over a map wide enough for groups of interior
        // pixels and a remainder, and 20 channels (a full register block and a short one).
        ConvCase {
            x_dtype: DType::U8,
            x: [1, 20, 13, 17],
            m: 20,
            k: 5,
            stride: 1,
            pad: 2,
            group: 20,
            relu: false,
            one_d: false,
        },
        // No padding: every pixel interior.
        ConvCase {
            x_dtype: DType::I8,
            x: [2, 33, 10, 12],
            m: 33,
            k: 3,
            stride: 1,
            pad: 0,
            group: 33,
            relu: true,
            one_d: false,
        },
        // Stride 2 over two images: the rows a window spans move by two per output row,
        // and the second image's rows replace the first's in the kernel's row ring.
        ConvCase {
            x_dtype: DType::U8,
            x: [2, 24, 15, 15],
            m: 24,
            k: 3,
            stride: 2,
            pad: 1,
            group: 24,
            relu: false,
            one_d: false,
        },
        // Few channels, computed over im2col rows: one channel (3 blocks of four bytes
        // a window instead of 9), a 7x7 stem of 3 channels over two images (window rows
        // of 21 bytes: two pieces each), and 5 channels with stride 1.
        ConvCase {
            x_dtype: DType::U8,
            x: [1, 1, 10, 9],
            m: 6,
            k: 3,
            stride: 1,
            pad: 1,
            group: 1,
            relu: false,
            one_d: false,
        },
        ConvCase {
            x_dtype: DType::I8,
            x: [2, 3, 19, 17],
            m: 18,
            k: 7,
            stride: 2,
            pad: 3,
            group: 1,
            relu: true,
            one_d: false,
        },
        ConvCase {
            x_dtype: DType::U8,
            x: [1, 5, 8, 12],
            m: 9,
            k: 3,
            stride: 1,
            pad: 2,
            group: 1,
            relu: false,
            one_d: false,
        },
        // 1-D over one channel (an audio model's first convolution on raw samples: 3
        // blocks a window of 10 instead of 10) and over 3 channels.
        ConvCase {
            x_dtype: DType::U8,
            x: [1, 1, 1, 203],
            m: 12,
            k: 10,
            stride: 5,
            pad: 0,
            group: 1,
            relu: false,
            one_d: true,
        },
        ConvCase {
            x_dtype: DType::I8,
            x: [2, 3, 1, 40],
            m: 7,
            k: 5,
            stride: 2,
            pad: 2,
            group: 1,
            relu: true,
            one_d: true,
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        check_conv(c, 77 + i as u64);
    }
}

/// ONNX Runtime's quantizer writes a 1-D bias's scale as `[1]` with `axis = 1`, which is
/// out of range for the bias: one scale is per tensor whatever the axis says (the
/// reference and ONNX Runtime read it so). The delegate declined these DequantizeLinears,
/// which left five nodes of the QDQ transformer on the host.
#[test]
fn a_single_scale_is_per_tensor_whatever_the_axis() {
    let mut b = GraphBuilder::new("bias_dq");
    let x = b.input_fixed("x", DType::F32, &[2, 4]);
    let q: Vec<i8> = vec![-128, -3, 0, 127];
    let bias = b.constant("b", DType::I8, &[4], TensorData::from_slice(&q));
    let s = b.constant_f32("b_s", &[1], &[0.25]);
    let z = b.constant("b_z", DType::I8, &[1], TensorData::from_bytes(&[2]));
    let d = b
        .node(
            OpKind::DequantizeLinear,
            &[bias, s, z],
            &[("axis", Attr::Int(1))],
        )
        .unwrap();
    let y = b.node(OpKind::Add, &[x, d], &[]).unwrap();
    b.output(y);
    let g = b.finish().unwrap();
    let xs: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let input = Tensor::from_f32(&[2, 4], &xs);
    for simd in [true, false] {
        // `run` asserts that every node is claimed before it compiles.
        let out = run(&delegate(simd), &g, std::slice::from_ref(&input)).expect("runs");
        let want: Vec<f32> = (0..8)
            .map(|i| i as f32 + (q[i % 4] as f32 - 2.0) * 0.25)
            .collect();
        assert_eq!(out[0].f32s(), &want[..], "simd {simd}");
    }
}

/// QuantizeLinear of i32 and of f16 (with an f16 scale), DequantizeLinear of an i32
/// tensor computed at run time, by hand:
/// - i32 [-300, -3, 5, 7, 1000] / 2 = [-150, -1.5, 2.5, 3.5, 500], rounded half to even
///   [-150, -2, 2, 4, 500], + 1 and clamped to i8: [-128, -1, 3, 5, 127];
/// - f16 [0.5, 1.5, 2.5, -1, 300] / 0.5 + 10 clamped to u8: [11, 13, 15, 8, 255];
/// - i32 [100000, -7, 16777217, 0] * 0.5 = [50000, -3.5, 8388608.5, 0], the third rounded
///   once to f32's 8388608 (ties to even), as the reference's f64 product is.
#[test]
fn quantize_i32_and_f16_and_dequantize_run_time_i32_by_hand() {
    use baton_delegate_api::minifloat::encode16;
    use baton_delegate_api::testing::supports;
    use baton_delegate_api::Support;
    let halves = |v: &[f64]| -> Vec<u8> {
        v.iter()
            .flat_map(|&x| encode16(DType::F16, x).unwrap().to_le_bytes())
            .collect()
    };
    let i32_bytes = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let mut b = GraphBuilder::new("quant_dtypes");
    let xi = b.input_fixed("xi", DType::I32, &[5]);
    let (s2, z1) = scalar(&mut b, DType::I8, "qi", 2.0, 1);
    let qi = b.node(OpKind::QuantizeLinear, &[xi, s2, z1], &[]).unwrap();
    let xh = b.input_fixed("xh", DType::F16, &[5]);
    let sh = b.constant(
        "qh_s",
        DType::F16,
        &[],
        TensorData::from_bytes(&halves(&[0.5])),
    );
    let zh = b.constant("qh_z", DType::U8, &[], TensorData::from_bytes(&[10]));
    let qh = b.node(OpKind::QuantizeLinear, &[xh, sh, zh], &[]).unwrap();
    let xd = b.input_fixed("xd", DType::I32, &[4]);
    let sd = b.constant_f32("dq_s", &[], &[0.5]);
    let dq = b.node(OpKind::DequantizeLinear, &[xd, sd], &[]).unwrap();
    for t in [qi, qh, dq] {
        b.output(t);
    }
    let g = b.finish().unwrap();
    for simd in [true, false] {
        let d = delegate(simd);
        let claims = supports(&d, &g);
        assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
        let inputs = [
            Tensor::from_bytes(DType::I32, &[5], &i32_bytes(&[-300, -3, 5, 7, 1000])),
            Tensor::from_bytes(DType::F16, &[5], &halves(&[0.5, 1.5, 2.5, -1.0, 300.0])),
            Tensor::from_bytes(DType::I32, &[4], &i32_bytes(&[100_000, -7, 16_777_217, 0])),
        ];
        let out = run(&d, &g, &inputs).unwrap();
        let q: Vec<i8> = out[0].bytes().iter().map(|&b| b as i8).collect();
        assert_eq!(q, [-128, -1, 3, 5, 127]);
        assert_eq!(out[1].bytes(), [11, 13, 15, 8, 255]);
        assert_eq!(out[2].f32s(), [50_000.0, -3.5, 8_388_608.0, 0.0]);
    }
}

/// BatchNormalization of a rank-1 X, one channel (ONNX's shape rule): with scale 2, bias
/// 1, mean 2, var 4 and epsilon 0, y = (x - 2) / 2 * 2 + 1 = x - 1; constant statistics
/// (folded at init) and statistics given at run time.
#[test]
fn batch_norm_of_rank_1_is_one_channel() {
    use baton_delegate_api::testing::supports;
    use baton_delegate_api::Support;
    let mut b = GraphBuilder::new("bn1");
    let x = b.input_fixed("x", DType::F32, &[4]);
    let stats: Vec<TensorId> = [("scale", 2.0), ("bias", 1.0), ("mean", 2.0), ("var", 4.0)]
        .iter()
        .map(|&(n, v)| b.constant_f32(n, &[1], &[v]))
        .collect();
    let eps = [("epsilon", Attr::Float(0.0))];
    let folded = b
        .node(
            OpKind::BatchNormalization,
            &[x, stats[0], stats[1], stats[2], stats[3]],
            &eps,
        )
        .unwrap();
    let var = b.input_fixed("var", DType::F32, &[1]);
    let run_time = b
        .node(
            OpKind::BatchNormalization,
            &[x, stats[0], stats[1], stats[2], var],
            &eps,
        )
        .unwrap();
    b.output(folded);
    b.output(run_time);
    let g = b.finish().unwrap();
    let d = delegate(true);
    let claims = supports(&d, &g);
    assert!(claims.iter().all(|s| *s == Support::Yes), "{claims:?}");
    let inputs = [
        Tensor::from_f32(&[4], &[1.0, 2.0, 3.0, 4.0]),
        Tensor::from_f32(&[1], &[4.0]),
    ];
    let out = run(&d, &g, &inputs).unwrap();
    assert_eq!(out[0].f32s(), [0.0, 1.0, 2.0, 3.0]);
    assert_eq!(out[1].f32s(), [0.0, 1.0, 2.0, 3.0]);
}

/// Depthwise geometries the row kernels' padded rings must get right, each kernel against
/// the portable one byte for byte: the padding of TF exporters (none before, one after,
/// for stride 2), padding wider than the window reaches, dilation, a 3x1 and a 1x5
/// window, maps narrower than a group of pixels, and short channel blocks of 1, 4, 5 and 7;
/// every other case clipped inside the output's range.
#[test]
fn depthwise_geometries_store_the_portable_bytes() {
    // (x [n, c, h, w], kernel [kh, kw], strides, pads [top, left, bottom, right], dilations)
    type Case = ([usize; 4], [usize; 2], [usize; 2], [usize; 4], [usize; 2]);
    let cases: [Case; 10] = [
        ([1, 16, 9, 10], [3, 3], [2, 2], [0, 0, 1, 1], [1, 1]),
        ([1, 9, 8, 7], [3, 3], [2, 2], [1, 0, 0, 1], [1, 1]),
        ([1, 7, 7, 9], [3, 3], [1, 1], [3, 2, 1, 3], [1, 1]),
        ([2, 12, 11, 13], [3, 3], [1, 1], [2, 2, 2, 2], [2, 2]),
        ([1, 20, 6, 8], [3, 1], [1, 2], [1, 0, 1, 0], [1, 1]),
        ([1, 5, 7, 12], [1, 5], [1, 1], [0, 2, 0, 2], [1, 2]),
        ([1, 24, 3, 3], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1]),
        ([1, 40, 2, 1], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1]),
        // An even kernel width (every pair of taps real) and a dilation wider than the
        // image (the AVX2 kernel's pairs then come from the padding alone).
        ([1, 11, 6, 9], [2, 4], [1, 2], [1, 2, 0, 1], [1, 1]),
        ([1, 8, 5, 2], [3, 3], [1, 1], [2, 3, 2, 3], [2, 3]),
    ];
    for (i, &(x, k, s, p, d)) in cases.iter().enumerate() {
        let mut rng = Rng::new(300 + i as u64);
        let c = x[1];
        let mut b = GraphBuilder::new("qdw");
        let xt = b.input_fixed("x", DType::U8, &x);
        let (xs, xz) = scalar(&mut b, DType::U8, "x", 0.02, 119);
        let xd = b
            .node(OpKind::DequantizeLinear, &[xt, xs, xz], &[])
            .unwrap();
        let wq: Vec<i8> = (0..c * k[0] * k[1])
            .map(|_| ((rng.next_u64() % 255) as i32 - 127) as i8)
            .collect();
        let wt = b.constant(
            "w",
            DType::I8,
            &[c, 1, k[0], k[1]],
            TensorData::from_slice(&wq),
        );
        let ws: Vec<f32> = (0..c).map(|j| 0.004 + 0.0005 * (j % 7) as f32).collect();
        let wst = b.constant_f32("w_s", &[c], &ws);
        let wzt = b.constant("w_z", DType::I8, &[c], TensorData::from_bytes(&vec![0; c]));
        let axis = [("axis", Attr::Int(0))];
        let wd = b
            .node(OpKind::DequantizeLinear, &[wt, wst, wzt], &axis)
            .unwrap();
        let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&v| v as i64).collect());
        let attrs = [
            ("kernel_shape", ints(&k)),
            ("strides", ints(&s)),
            ("pads", ints(&p)),
            ("dilations", ints(&d)),
            ("group", Attr::Int(c as i64)),
        ];
        let mut y = b.node(OpKind::Conv, &[xd, wd], &attrs).unwrap();
        if i % 2 == 1 {
            // A Clip inside the output's range: stored bounds 108 and 158, which the
            // kernels apply themselves (the saturation to [0, 255] does not).
            let lo = b.constant_f32("lo", &[], &[-1.0]);
            let hi = b.constant_f32("hi", &[], &[1.5]);
            y = b.node(OpKind::Clip, &[y, lo, hi], &[]).unwrap();
        }
        let (ys, yz) = scalar(&mut b, DType::U8, "y", 0.05, 128);
        let q = b.node(OpKind::QuantizeLinear, &[y, ys, yz], &[]).unwrap();
        b.output(q);
        let g = b.finish().unwrap();
        let bytes: Vec<u8> = (0..x.iter().product::<usize>())
            .map(|j| {
                if j % 11 == 0 {
                    255
                } else {
                    rng.next_u64() as u8
                }
            })
            .collect();
        let input = Tensor::from_bytes(DType::U8, &x, &bytes);
        let want = run(&delegate(false), &g, std::slice::from_ref(&input)).expect("portable");
        for isa in common::isas() {
            let got = run(&delegate_isa(isa), &g, std::slice::from_ref(&input)).expect("runs");
            assert_eq!(got[0].bytes(), want[0].bytes(), "case {i}, isa {isa}");
        }
    }
}

/// QDQ chains of float ops of one int8 tensor run as a table of 256 bytes: a quantized
/// GELU's `x / c → Erf`, `+ 1` with a dequantized constant then Sigmoid and a product by
/// a constant written first, `c - x` then Clip, and a bare requantization `Q(DQ(x))`.
/// Every output within one step of the chain evaluated in f64, on every isa.
#[test]
fn qdq_chains_of_one_tensor_run_as_tables() {
    let shape = [2, 3, 20, 25];
    let n: usize = shape.iter().product();
    let mut b = GraphBuilder::new("qlut");
    let x = b.input_fixed("x", DType::I8, &shape);
    let (xs, xz) = (0.03f32, -5);
    let (s, z) = scalar(&mut b, DType::I8, "x", xs, xz);
    let xd = b.node(OpKind::DequantizeLinear, &[x, s, z], &[]).unwrap();
    let c = |b: &mut GraphBuilder, name: &str, v: f32| b.constant_f32(name, &[], &[v]);
    let quant = |b: &mut GraphBuilder, t, name: &str, dt, ys, yz| {
        let (s, z) = scalar(b, dt, name, ys, yz);
        b.node(OpKind::QuantizeLinear, &[t, s, z], &[]).unwrap()
    };
    // x / 1.4142 -> Erf
    let root2 = c(&mut b, "root2", std::f32::consts::SQRT_2);
    let div = b.node(OpKind::Div, &[xd, root2], &[]).unwrap();
    let erf = b.node(OpKind::Erf, &[div], &[]).unwrap();
    let qa = quant(&mut b, erf, "a", DType::I8, 1.0 / 127.0, 0);
    // x + DQ(20) -> Sigmoid -> 0.5 * y
    let (ks, kz) = scalar(&mut b, DType::I8, "k", 0.05, 0);
    let kq = b.constant("kq", DType::I8, &[], TensorData::from_bytes(&[20u8]));
    let k = b
        .node(OpKind::DequantizeLinear, &[kq, ks, kz], &[])
        .unwrap();
    let add = b.node(OpKind::Add, &[xd, k], &[]).unwrap();
    let sig = b.node(OpKind::Sigmoid, &[add], &[]).unwrap();
    let half = c(&mut b, "half", 0.5);
    let mul = b.node(OpKind::Mul, &[half, sig], &[]).unwrap();
    let qb = quant(&mut b, mul, "b", DType::U8, 0.5 / 255.0, 0);
    // 1.5 - x -> Clip(0, 2)
    let one5 = c(&mut b, "one5", 1.5);
    let sub = b.node(OpKind::Sub, &[one5, xd], &[]).unwrap();
    let (lo, hi) = (c(&mut b, "lo", 0.0), c(&mut b, "hi", 2.0));
    let clip = b.node(OpKind::Clip, &[sub, lo, hi], &[]).unwrap();
    let qc = quant(&mut b, clip, "c", DType::U8, 0.01, 3);
    // Requantization
    let qd = quant(&mut b, xd, "d", DType::I8, 0.07, 9);
    for t in [qa, qb, qc, qd] {
        b.output(t);
    }
    let g = b.finish().unwrap();

    let mut rng = Rng::new(41);
    let xq: Vec<i8> = (0..n)
        .map(|i| {
            if i < 256 {
                i as u8 as i8
            } else {
                rng.next_u64() as i8
            }
        })
        .collect();
    let bytes: Vec<u8> = xq.iter().map(|&v| v as u8).collect();
    let input = Tensor::from_bytes(DType::I8, &shape, &bytes);
    let erf = |v: f64| {
        // Abramowitz and Stegun 7.1.26 (error below 1.5e-7): ample for a step of 1/127.
        let t = 1.0 / (1.0 + 0.327_591_1 * v.abs());
        let p = ((((1.061_405_429 * t - 1.453_152_027) * t + 1.421_413_741) * t - 0.284_496_736)
            * t
            + 0.254_829_592)
            * t;
        (1.0 - p * (-v * v).exp()).copysign(v)
    };
    let q = |v: f64, s: f64, z: i32, lo: i32, hi: i32| {
        ((v / s).round_ties_even() as i32 + z).clamp(lo, hi)
    };
    let want: [Vec<i32>; 4] = [
        xq.iter()
            .map(|&v| {
                let x = (v as i32 - xz) as f64 * xs as f64;
                q(
                    erf(x / std::f32::consts::SQRT_2 as f64),
                    1.0 / 127.0,
                    0,
                    -128,
                    127,
                )
            })
            .collect(),
        xq.iter()
            .map(|&v| {
                let x = (v as i32 - xz) as f64 * xs as f64 + 1.0;
                q(0.5 / (1.0 + (-x).exp()), 0.5 / 255.0, 0, 0, 255)
            })
            .collect(),
        xq.iter()
            .map(|&v| {
                let x = 1.5 - (v as i32 - xz) as f64 * xs as f64;
                q(x.clamp(0.0, 2.0), 0.01, 3, 0, 255)
            })
            .collect(),
        xq.iter()
            .map(|&v| q((v as i32 - xz) as f64 * xs as f64, 0.07, 9, -128, 127))
            .collect(),
    ];
    for isa in common::isas() {
        let got = run(&delegate_isa(isa), &g, std::slice::from_ref(&input)).expect("runs");
        for (o, (t, want)) in got.iter().zip(&want).enumerate() {
            let signed = t.dtype == DType::I8;
            for (i, (&b, &w)) in t.bytes().iter().zip(want).enumerate() {
                let v = if signed { b as i8 as i32 } else { b as i32 };
                assert!(
                    (v - w).abs() <= 1,
                    "isa {isa} output {o} element {i}: {v} against {w}"
                );
            }
        }
    }
}

/// A QDQ SiLU as ONNX Runtime's quantizer writes it (`Mul(DQ(x), DQ(Q(Sigmoid(DQ(x)))))`
/// then a QuantizeLinear), and a QDQ Add of a tensor and a table of it with the table
/// first: every output byte is a function of the input byte, so each runs as one table
/// (one step where the gate's table and the binary op took two), storing the bytes of the
/// two steps: the same graph with the gates also outputs (so they must be stored, and no
/// table composes) gives the same output bytes, on every ISA, for all 256 input bytes.
#[test]
fn a_qdq_silu_runs_as_one_table() {
    let build = |expose: bool| {
        let shape = [2, 3, 20, 25];
        let mut b = GraphBuilder::new("qsilu");
        let x = b.input_fixed("x", DType::I8, &shape);
        let (s, z) = scalar(&mut b, DType::I8, "x", 0.05, -7);
        let xd = b.node(OpKind::DequantizeLinear, &[x, s, z], &[]).unwrap();
        let quant = |b: &mut GraphBuilder, t, name: &str, ys, yz| {
            let (s, z) = scalar(b, DType::I8, name, ys, yz);
            let q = b.node(OpKind::QuantizeLinear, &[t, s, z], &[]).unwrap();
            (
                q,
                b.node(OpKind::DequantizeLinear, &[q, s, z], &[]).unwrap(),
            )
        };
        let sig = b.node(OpKind::Sigmoid, &[xd], &[]).unwrap();
        let (gate, gd) = quant(&mut b, sig, "g", 1.0 / 255.0, -128);
        let mul = b.node(OpKind::Mul, &[xd, gd], &[]).unwrap();
        let (silu, _) = quant(&mut b, mul, "y", 0.03, -20);
        let tanh = b.node(OpKind::Tanh, &[xd], &[]).unwrap();
        let (gate2, td) = quant(&mut b, tanh, "t", 1.0 / 127.0, 0);
        let add = b.node(OpKind::Add, &[td, xd], &[]).unwrap();
        let (sum, _) = quant(&mut b, add, "a", 0.06, 3);
        b.output(silu);
        b.output(sum);
        if expose {
            b.output(gate);
            b.output(gate2);
        }
        b.finish().unwrap()
    };
    let (g, plain) = (build(false), build(true));
    let n = 2 * 3 * 20 * 25;
    let bytes: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
    let input = Tensor::from_bytes(DType::I8, &[2, 3, 20, 25], &bytes);
    for isa in common::isas() {
        let d = delegate_isa(isa);
        let (got, steps) = common::run_counting(&d, &g, std::slice::from_ref(&input));
        let (want, plain_steps) = common::run_counting(&d, &plain, std::slice::from_ref(&input));
        // The input's and the two outputs' byte steps beside one table per product; the
        // gates' two tables and two binary ops in their place.
        assert_eq!((steps, plain_steps), (5, 7), "isa {isa}: steps");
        for k in 0..2 {
            assert!(got[k].bytes() == want[k].bytes(), "isa {isa}, output {k}");
        }
        let distinct = |t: &Tensor| {
            t.bytes()
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        assert!(
            distinct(&got[0]) > 50 && distinct(&got[1]) > 50,
            "isa {isa}: tables too flat"
        );
    }
}

/// A table between two int8 convolutions takes their channels-last layout: the same bytes
/// as the graph whose chain is left to the float steps (its Sigmoid's result is also an
/// output, so no table forms).
#[test]
fn a_table_between_int8_convolutions_keeps_their_layout() {
    let build = |expose: bool| {
        let mut b = GraphBuilder::new("qlut_conv");
        let x = b.input_fixed("x", DType::U8, &[1, 6, 7, 9]);
        let (s, z) = scalar(&mut b, DType::U8, "x", 0.02, 120);
        let mut t = b.node(OpKind::DequantizeLinear, &[x, s, z], &[]).unwrap();
        let mut rng = Rng::new(5);
        let mut sigmoid = None;
        for layer in 0..2 {
            let (m, c) = (
                if layer == 0 { 10 } else { 4 },
                if layer == 0 { 6 } else { 10 },
            );
            let wq: Vec<i8> = (0..m * c * 9)
                .map(|_| (rng.next_u64() % 200) as i8)
                .collect();
            let w = b.constant(
                &format!("w{layer}"),
                DType::I8,
                &[m, c, 3, 3],
                TensorData::from_slice(&wq),
            );
            let (ws, wz) = scalar(&mut b, DType::I8, &format!("w{layer}"), 0.01, 0);
            let wd = b.node(OpKind::DequantizeLinear, &[w, ws, wz], &[]).unwrap();
            let pads = [("pads", Attr::Ints(vec![1; 4]))];
            let y = b.node(OpKind::Conv, &[t, wd], &pads).unwrap();
            let (ys, yz) = scalar(&mut b, DType::U8, &format!("y{layer}"), 0.2, 128);
            let q = b.node(OpKind::QuantizeLinear, &[y, ys, yz], &[]).unwrap();
            t = b.node(OpKind::DequantizeLinear, &[q, ys, yz], &[]).unwrap();
            if layer == 0 {
                let sig = b.node(OpKind::Sigmoid, &[t], &[]).unwrap();
                sigmoid = Some(sig);
                let (ss, sz) = scalar(&mut b, DType::U8, "s", 1.0 / 255.0, 0);
                let q = b.node(OpKind::QuantizeLinear, &[sig, ss, sz], &[]).unwrap();
                t = b.node(OpKind::DequantizeLinear, &[q, ss, sz], &[]).unwrap();
            } else {
                b.output(q);
            }
        }
        if expose {
            b.output(sigmoid.unwrap());
        }
        b.finish().unwrap()
    };
    let mut rng = Rng::new(6);
    let bytes: Vec<u8> = (0..6 * 7 * 9).map(|_| rng.next_u64() as u8).collect();
    let input = Tensor::from_bytes(DType::U8, &[1, 6, 7, 9], &bytes);
    for isa in common::isas() {
        let table = run(
            &delegate_isa(isa),
            &build(false),
            std::slice::from_ref(&input),
        )
        .expect("runs");
        let steps = run(
            &delegate_isa(isa),
            &build(true),
            std::slice::from_ref(&input),
        )
        .expect("runs");
        assert_eq!(table[0].bytes(), steps[0].bytes(), "isa {isa}");
    }
}

/// A float input quantized straight into the channels-last layout of the int8
/// convolution that reads it (a model's image input), split among threads in whole
/// pixels, and the convolution's channels-last bytes dequantized back into an NCHW float
/// output: with an identity 1x1 convolution at the same scale, the output is the input's
/// QuantizeLinear, dequantized, in NCHW order, for channel counts with and without their
/// own interleave (1, 3, 4 and 6) and with the 8x8 tiles of the blocked forms (8, 37, 64:
/// whole tiles, ragged ones, blocks of a few pixels), in batches of 3 (so that a thread's
/// part and a block cross from one image into the next) of maps whose pixels do not split
/// evenly, each large enough to be split.
#[test]
fn a_float_input_quantizes_into_the_convolutions_layout() {
    for (ch, h, w) in [
        (3, 77, 61),
        (1, 99, 151),
        (4, 61, 57),
        (6, 47, 51),
        (8, 41, 43),
        (37, 13, 17),
        (64, 9, 11),
    ] {
        let shape = [3, ch, h, w];
        let mut rng = Rng::new(ch as u64);
        let xs: Vec<f32> = (0..3 * ch * h * w)
            .map(|_| (rng.next_u64() % 4000) as f32 / 1000.0 - 2.0)
            .collect();
        let (s, zp) = (0.015f32, 3);
        let mut b = GraphBuilder::new("image");
        let x = b.input_fixed("x", DType::F32, &shape);
        let (qs, qz) = scalar(&mut b, DType::I8, "x", s, zp);
        let q = b.node(OpKind::QuantizeLinear, &[x, qs, qz], &[]).unwrap();
        let xd = b.node(OpKind::DequantizeLinear, &[q, qs, qz], &[]).unwrap();
        let eye: Vec<i8> = (0..ch * ch).map(|i| (i % (ch + 1) == 0) as i8).collect();
        let wt = b.constant(
            "w",
            DType::I8,
            &[ch, ch, 1, 1],
            TensorData::from_slice(&eye),
        );
        let (ws, wz) = scalar(&mut b, DType::I8, "w", 1.0, 0);
        let wd = b
            .node(OpKind::DequantizeLinear, &[wt, ws, wz], &[])
            .unwrap();
        let y = b.node(OpKind::Conv, &[xd, wd], &[]).unwrap();
        let (ys, yz) = scalar(&mut b, DType::I8, "y", s, zp);
        let yq = b.node(OpKind::QuantizeLinear, &[y, ys, yz], &[]).unwrap();
        let out = b
            .node(OpKind::DequantizeLinear, &[yq, ys, yz], &[])
            .unwrap();
        b.output(out);
        let g = b.finish().unwrap();
        let want: Vec<f32> = xs
            .iter()
            .map(|&v| ((v / s).round_ties_even() as i32 + zp).clamp(-128, 127))
            .map(|q| (q - zp) as f32 * s)
            .collect();
        let input = Tensor::from_f32(&shape, &xs);
        for threads in [1, 2] {
            let d = common::delegate_threads(threads);
            let got = run(&d, &g, std::slice::from_ref(&input)).expect("runs");
            let same = got[0]
                .f32s()
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{ch} channels, {threads} threads");
        }
    }
}

/// A residual branch point of a QDQ model: one DequantizeLinear read by an int8 1x1
/// convolution and by the QDQ Add of the branch's two ends. Both read its input bytes,
/// so the f32 copy is not made (no QUANT step runs); with a float reader too (a Relu,
/// also an output), it is, and that reader gets it. Outputs within one step of an f64
/// evaluation either way.
#[test]
fn a_dequantize_read_only_by_integer_ops_does_not_run() {
    use baton_delegate_api::testing::{execute, Hosted};
    use baton_delegate_api::{Delegate, Executable};
    let (shape, c) = ([1, 8, 12, 12], 8);
    let n = shape.iter().product::<usize>();
    let plane = n / c;
    let mut rng = Rng::new(9);
    let xq: Vec<u8> = (0..n).map(|_| (rng.next_u64() % 256) as u8).collect();
    let wq: Vec<i8> = (0..c * c)
        .map(|_| (rng.next_u64() % 255) as i32 as i8)
        .collect();
    let (xs, ws, cs, ys) = (0.02f32, 0.01f32, 0.05f32, 0.06f32);
    for float_reader in [false, true] {
        let mut b = GraphBuilder::new("branch");
        let x = b.input_fixed("x", DType::U8, &shape);
        let (s, z) = scalar(&mut b, DType::U8, "x", xs, 128);
        let xd = b.node(OpKind::DequantizeLinear, &[x, s, z], &[]).unwrap();
        let wt = b.constant("w", DType::I8, &[c, c, 1, 1], TensorData::from_slice(&wq));
        let (s, z) = scalar(&mut b, DType::I8, "w", ws, 0);
        let wd = b.node(OpKind::DequantizeLinear, &[wt, s, z], &[]).unwrap();
        let conv = b.node(OpKind::Conv, &[xd, wd], &[]).unwrap();
        let (s, z) = scalar(&mut b, DType::U8, "c", cs, 128);
        let cq = b.node(OpKind::QuantizeLinear, &[conv, s, z], &[]).unwrap();
        let cd = b.node(OpKind::DequantizeLinear, &[cq, s, z], &[]).unwrap();
        let sum = b.node(OpKind::Add, &[xd, cd], &[]).unwrap();
        let (s, z) = scalar(&mut b, DType::U8, "y", ys, 128);
        let y = b.node(OpKind::QuantizeLinear, &[sum, s, z], &[]).unwrap();
        b.output(y);
        if float_reader {
            let r = b.node(OpKind::Relu, &[xd], &[]).unwrap();
            b.output(r);
        }
        let g = b.finish().unwrap();

        let q = |v: f64, s: f32| ((v / s as f64).round_ties_even() + 128.0).clamp(0.0, 255.0);
        let xv: Vec<f64> = xq.iter().map(|&v| (v as f64 - 128.0) * xs as f64).collect();
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let (co, p) = (i / plane, i % plane);
                let conv: f64 = (0..c)
                    .map(|ci| wq[co * c + ci] as f64 * ws as f64 * xv[ci * plane + p])
                    .sum();
                q(xv[i] + (q(conv, cs) - 128.0) * cs as f64, ys)
            })
            .collect();

        let d = delegate(true);
        let h = Hosted::new(&g);
        let blob = h.compile(&d).expect("compiles");
        let mut exec = d.init(0, &blob, &h.views()).expect("initialises");
        let input = Tensor::from_bytes(DType::U8, &shape, &xq);
        let out = execute(&mut exec, &h.graph, std::slice::from_ref(&input)).expect("runs");
        let worst = out[0]
            .bytes()
            .iter()
            .zip(&want)
            .map(|(&a, &b)| (a as f64 - b).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 1.0,
            "{worst} steps off (float reader: {float_reader})"
        );
        if float_reader {
            for (&a, &v) in out[1].f32s().iter().zip(&xq) {
                let b = ((v as i32 - 128) as f32 * xs).max(0.0);
                assert_eq!(a, b, "the float reader's Relu");
            }
        }
        let names: Vec<String> = exec.profile().into_iter().map(|e| e.name).collect();
        let dq = names
            .iter()
            .filter(|n| n.contains("DequantizeLinear"))
            .count();
        assert_eq!(
            dq, float_reader as usize,
            "DequantizeLinear steps in {names:?}"
        );
    }
}

/// A channels-last int8 model as ONNX Runtime's quantizer writes one from a tf2onnx
/// export: an NHWC image transposed to NCHW, quantized, an int8 3x3 convolution and an
/// int8 1x1 convolution (held NHWC), then dequantized, transposed back to NHWC and
/// quantized and dequantized again (the Transpose's own QDQ pair). The dequantize and
/// quantize at the int8 region's edges work in NHWC order, so both transposes are
/// views: the same bits as the graph with the transposes' neighbours made outputs (held
/// NCHW, so that each transpose and conversion runs), in fewer steps.
#[test]
fn transposes_at_int8_channels_last_edges_are_views() {
    use common::run_counting;
    let build = |expose: bool| {
        let mut rng = Rng::new(12);
        let (h, w, c, m) = (9, 11, 3, 16);
        let xs: Vec<f32> = (0..h * w * c)
            .map(|_| (rng.next_u64() % 4000) as f32 / 1000.0 - 2.0)
            .collect();
        let mut b = GraphBuilder::new("tf_int8");
        let x = b.input_fixed("x", DType::F32, &[1, h, w, c]);
        let perm = |p: &[i64]| [("perm", Attr::Ints(p.to_vec()))];
        let t = b
            .node(OpKind::Transpose, &[x], &perm(&[0, 3, 1, 2]))
            .unwrap();
        let (s, z) = scalar(&mut b, DType::I8, "x", 0.016, -3);
        let q = b.node(OpKind::QuantizeLinear, &[t, s, z], &[]).unwrap();
        let qd = b.node(OpKind::DequantizeLinear, &[q, s, z], &[]).unwrap();
        let mut conv = |b: &mut GraphBuilder, x: TensorId, cin: usize, k: usize, name: &str| {
            let wq: Vec<i8> = (0..m * cin * k * k)
                .map(|_| (rng.next_u64() % 255) as i32 as i8)
                .collect();
            let wt = b.constant(
                name,
                DType::I8,
                &[m, cin, k, k],
                TensorData::from_slice(&wq),
            );
            let (ws, wz) = scalar(b, DType::I8, &format!("{name}w"), 0.004, 0);
            let wd = b
                .node(OpKind::DequantizeLinear, &[wt, ws, wz], &[])
                .unwrap();
            let pads = [("pads", Attr::Ints(vec![(k / 2) as i64; 4]))];
            let y = b.node(OpKind::Conv, &[x, wd], &pads).unwrap();
            let (ys, yz) = scalar(b, DType::I8, &format!("{name}y"), 0.03, 5);
            let yq = b.node(OpKind::QuantizeLinear, &[y, ys, yz], &[]).unwrap();
            (
                yq,
                b.node(OpKind::DequantizeLinear, &[yq, ys, yz], &[])
                    .unwrap(),
            )
        };
        let (_, c1) = conv(&mut b, qd, c, 3, "c1");
        let (c2q, c2) = conv(&mut b, c1, m, 1, "c2");
        let back = b
            .node(OpKind::Transpose, &[c2], &perm(&[0, 2, 3, 1]))
            .unwrap();
        let (s, z) = scalar(&mut b, DType::I8, "c2y", 0.03, 5);
        let bq = b.node(OpKind::QuantizeLinear, &[back, s, z], &[]).unwrap();
        let y = b.node(OpKind::DequantizeLinear, &[bq, s, z], &[]).unwrap();
        b.output(y);
        if expose {
            b.output(t);
            b.output(c2q);
        }
        let g = b.finish().unwrap();
        (g, vec![Tensor::from_f32(&[1, h, w, c], &xs)])
    };
    let ((g, inputs), (plain, _)) = (build(false), build(true));
    for simd in [true, false] {
        let (got, steps) = run_counting(&delegate(simd), &g, &inputs);
        let (want, plain_steps) = run_counting(&delegate(simd), &plain, &inputs);
        assert_eq!(got[0].shape, vec![1, 9, 11, 16]);
        assert!(got[0].bytes() == want[0].bytes(), "simd={simd}");
        // Quantize, two int8 convs, dequantize, the output's quantize and dequantize.
        assert_eq!(steps, 6, "simd={simd}");
        // And the two transposes.
        assert_eq!(plain_steps, 8, "simd={simd}");
    }
}

/// A YOLO neck's int8 twin as ONNX Runtime's quantizer writes it: an int8 3x3
/// convolution's result dequantized once for a second int8 convolution and for a nearest
/// Resize, the Resize in its own Q -> DQ pair, a Concat of that with a MaxPool of it (in
/// its pair too), and an int8 convolution of the Concat. The pairs' bytes are held NHWC
/// and the float ops between them run channels-last (`lower/quant.rs`): the same bytes,
/// on every ISA and at 1 and 2 threads, as the graph with the Resize's and the Concat's
/// results made outputs (held NCHW, so that the pairs convert layouts).
#[test]
fn float_ops_between_pass_through_pairs_keep_the_bytes() {
    let (c, h, w) = (16, 10, 13);
    let build = |expose: bool| {
        let mut rng = Rng::new(21);
        let mut b = GraphBuilder::new("neck");
        let x = b.input_fixed("x", DType::F32, &[1, c, h, w]);
        let qdq = |b: &mut GraphBuilder, t: TensorId, name: &str, s: f32, z: i32| {
            let (s, z) = scalar(b, DType::U8, name, s, z);
            let q = b.node(OpKind::QuantizeLinear, &[t, s, z], &[]).unwrap();
            b.node(OpKind::DequantizeLinear, &[q, s, z], &[]).unwrap()
        };
        let dx = qdq(&mut b, x, "x", 0.02, 128);
        let mut conv = |b: &mut GraphBuilder, x: TensorId, cin: usize, k: usize, name: &str| {
            let wq: Vec<i8> = (0..c * cin * k * k)
                .map(|_| (rng.next_u64() % 255) as i32 as i8)
                .collect();
            let wt = b.constant(
                name,
                DType::I8,
                &[c, cin, k, k],
                TensorData::from_slice(&wq),
            );
            let (ws, wz) = scalar(b, DType::I8, &format!("{name}w"), 0.002, 0);
            let wd = b
                .node(OpKind::DequantizeLinear, &[wt, ws, wz], &[])
                .unwrap();
            let pads = [("pads", Attr::Ints(vec![(k / 2) as i64; 4]))];
            b.node(OpKind::Conv, &[x, wd], &pads).unwrap()
        };
        let a = conv(&mut b, dx, c, 3, "a");
        let da = qdq(&mut b, a, "a", 0.04, 120);
        let side = conv(&mut b, da, c, 1, "side");
        let scales = Attr::Floats(vec![1.0, 1.0, 2.0, 2.0]);
        let up = b
            .node(OpKind::Resize, &[da], &[("scales", scales)])
            .unwrap();
        let du = qdq(&mut b, up, "a", 0.04, 120);
        let pool_attrs = [
            ("kernel_shape", Attr::Ints(vec![5, 5])),
            ("pads", Attr::Ints(vec![2; 4])),
        ];
        let pool = b.node(OpKind::MaxPool, &[du], &pool_attrs).unwrap();
        let dp = qdq(&mut b, pool, "a", 0.04, 120);
        let cat = b
            .node(OpKind::Concat, &[du, dp], &[("axis", Attr::Int(1))])
            .unwrap();
        let dc = qdq(&mut b, cat, "a", 0.04, 120);
        let y = conv(&mut b, dc, 2 * c, 1, "y");
        let dy = qdq(&mut b, y, "y", 0.05, 100);
        let ds = qdq(&mut b, side, "s", 0.05, 100);
        b.output(dy);
        b.output(ds);
        if expose {
            b.output(up);
            b.output(cat);
        }
        b.finish().unwrap()
    };
    let (g, exposed) = (build(false), build(true));
    let mut rng = Rng::new(22);
    let xs: Vec<f32> = (0..c * h * w)
        .map(|_| (rng.next_u64() % 5000) as f32 / 1000.0 - 2.5)
        .collect();
    let input = [Tensor::from_f32(&[1, c, h, w], &xs)];
    for isa in common::isas() {
        for threads in [1, 2] {
            let d = common::delegate_with(isa, threads);
            let got = run(&d, &g, &input).expect("runs");
            let want = run(&d, &exposed, &input).expect("runs");
            let what = format!("isa {isa}, {threads} threads");
            common::assert_same_bits(&got[..2], &want[..2], &what);
            let distinct = got[0]
                .f32s()
                .iter()
                .map(|v| v.to_bits())
                .collect::<std::collections::HashSet<_>>();
            assert!(distinct.len() > 50, "{what}: output too flat");
        }
    }
}

/// A QDQ MaxPool or nearest Resize (`DQ -> op -> Q`, as ONNX Runtime's quantizer writes
/// them) runs over the stored bytes: the same bytes as the float op between its Q/DQ pair
/// (the graph with the op's float result also an output, so that no byte op forms), in
/// two steps fewer, on every ISA and at 1 and 2 threads. Pools: YOLO's SPPF 5x5 at
/// stride 1 (whole runs of columns), a stem's 3x3 at stride 2, dilation, `ceil_mode`,
/// windows with no tap on the input (padding as wide as the window: the float pool's
/// -inf, quantized to the lowest value, or through a Relu after the pool to the zero
/// point), rows too wide for one pass over all channels, and a Q of other parameters
/// than the DQ (a table after the max). Resizes: a neck's
/// 2x upsampling (asymmetric, floor), 1.5x with half-pixel rounding, a 0.5x downsampling,
/// and one with a table. Each held NCHW (of a quantized input) and channels-last (between
/// two int8 convolutions).
#[test]
fn qdq_pools_and_nearest_resizes_run_over_bytes() {
    let floor = |scale| resize_attrs("asymmetric", "floor", scale);
    let half_pixel = |scale| resize_attrs("half_pixel", "round_prefer_floor", scale);
    let pools: [PoolCase; 14] = [
        ("sppf", [2, 32, 20, 20], pool_attrs(5, 1, 2, 1, 0), 0.03),
        ("stem", [1, 16, 23, 17], pool_attrs(3, 2, 1, 1, 0), 0.03),
        ("dilated", [1, 8, 15, 14], pool_attrs(3, 1, 2, 2, 0), 0.03),
        ("ceil", [1, 8, 10, 11], pool_attrs(2, 2, 0, 1, 1), 0.03),
        // Padding as wide as the window: the corner windows have no tap on the input
        // (and with a Relu after the pool, their -inf stores the zero point).
        ("padded", [1, 8, 6, 7], pool_attrs(2, 1, 2, 1, 0), 0.03),
        ("padded_relu", [1, 8, 6, 7], pool_attrs(2, 1, 2, 1, 0), 0.03),
        // Windows wider than the map (an SPP's 13x13 on a small one), and dilated past
        // it: no column reaches every output, some reach none (with a table, whose byte
        // 0 is not the empty window's lowest byte).
        ("tiny", [1, 8, 3, 4], pool_attrs(5, 1, 2, 1, 0), 0.03),
        (
            "tiny_dilated",
            [1, 8, 2, 2],
            pool_attrs(2, 1, 3, 4, 0),
            0.05,
        ),
        ("wide", [1, 100, 3, 200], pool_attrs(3, 1, 1, 1, 0), 0.03),
        ("table", [1, 8, 12, 12], pool_attrs(3, 1, 1, 1, 0), 0.05),
        ("up", [1, 16, 9, 7], floor(2.0), 0.03),
        ("up1.5", [1, 8, 9, 10], half_pixel(1.5), 0.03),
        ("down", [1, 8, 12, 10], floor(0.5), 0.03),
        ("up_table", [1, 8, 6, 5], floor(2.0), 0.05),
    ];
    for (name, shape, attrs, y_scale) in pools {
        for between_convs in [false, true] {
            let c = shape[1];
            let build = |expose: bool| {
                let mut rng = Rng::new(31);
                let mut b = GraphBuilder::new(name);
                let x = b.input_fixed("x", DType::F32, &shape);
                let qdq = |b: &mut GraphBuilder, t: TensorId, tag: &str, s: f32| {
                    let (s, z) = scalar(b, DType::I8, tag, s, -7);
                    let q = b.node(OpKind::QuantizeLinear, &[t, s, z], &[]).unwrap();
                    b.node(OpKind::DequantizeLinear, &[q, s, z], &[]).unwrap()
                };
                let mut conv = |b: &mut GraphBuilder, x: TensorId, tag: &str| {
                    if !between_convs {
                        return x;
                    }
                    let wq: Vec<i8> = (0..c * c).map(|_| rng.next_u64() as i8 / 8).collect();
                    let wt = b.constant(tag, DType::I8, &[c, c, 1, 1], TensorData::from_slice(&wq));
                    let (ws, wz) = scalar(b, DType::I8, &format!("{tag}w"), 0.02, 0);
                    let wd = b
                        .node(OpKind::DequantizeLinear, &[wt, ws, wz], &[])
                        .unwrap();
                    let y = b.node(OpKind::Conv, &[x, wd], &[]).unwrap();
                    qdq(b, y, &format!("{tag}y"), 0.03)
                };
                let dx = qdq(&mut b, x, "x", 0.03);
                let a = conv(&mut b, dx, "a");
                let op = match attrs.iter().any(|(k, _)| *k == "mode") {
                    true => OpKind::Resize,
                    false => OpKind::MaxPool,
                };
                let pooled = b.node(op, &[a], &attrs).unwrap();
                let after = match name.ends_with("_relu") {
                    true => b.node(OpKind::Relu, &[pooled], &[]).unwrap(),
                    false => pooled,
                };
                let dp = qdq(&mut b, after, "p", y_scale);
                let y = conv(&mut b, dp, "b");
                b.output(y);
                if expose {
                    b.output(pooled);
                }
                b.finish().unwrap()
            };
            let (g, exposed) = (build(false), build(true));
            let mut rng = Rng::new(32);
            let xs: Vec<f32> = (0..shape.iter().product::<usize>())
                .map(|_| (rng.next_u64() % 8000) as f32 / 1000.0 - 4.0)
                .collect();
            let input = [Tensor::from_f32(&shape, &xs)];
            let what = format!("{name}, convs {between_convs}");
            // The op's Q and DQ, and a Relu after it, run in the byte op.
            let fewer = 2 + name.ends_with("_relu") as usize;
            same_as_exposed(&g, &exposed, &input, fewer, &what);
        }
    }
}

/// Nearest Resize attributes: coordinate mode, rounding, the scale of H and W.
fn resize_attrs(coord: &str, rounding: &str, scale: f32) -> Vec<(&'static str, Attr)> {
    vec![
        ("mode", Attr::Str("nearest".into())),
        ("coordinate_transformation_mode", Attr::Str(coord.into())),
        ("nearest_mode", Attr::Str(rounding.into())),
        ("scales", Attr::Floats(vec![1.0, 1.0, scale, scale])),
    ]
}

/// A pool or resize test: name, input shape, attributes, the scale of its
/// QuantizeLinear.
type PoolCase = (&'static str, [usize; 4], Vec<(&'static str, Attr)>, f32);

/// MaxPool attributes: a square `k` window, stride, padding, dilation, `ceil_mode`.
fn pool_attrs(k: i64, s: i64, p: i64, d: i64, ceil: i64) -> Vec<(&'static str, Attr)> {
    vec![
        ("kernel_shape", Attr::Ints(vec![k, k])),
        ("strides", Attr::Ints(vec![s, s])),
        ("pads", Attr::Ints(vec![p; 4])),
        ("dilations", Attr::Ints(vec![d, d])),
        ("ceil_mode", Attr::Int(ceil)),
    ]
}

/// A QDQ Concat (`DQ`s -> Concat -> Q, as ONNX Runtime's quantizer writes YOLO's joins)
/// runs over the stored bytes, each input through a table where its parameters differ
/// from the Q's: the same bytes as the float join between the pairs (the graph with the
/// Concat's float result also an output, so that no byte join forms), in one step where
/// the float join takes its DequantizeLinears, itself and the Q, on every ISA and at 1
/// and 2 threads. Joined along the channels and along the height, held NCHW (quantized
/// inputs) and channels-last (int8 convolutions' results), with enough rows that a
/// table's part goes in several blocks of the stack and the threads split them.
#[test]
fn qdq_concats_run_over_bytes() {
    for axis in [1i64, 2] {
        // Along the channels: [1, size, 20, 31]; along the height: [1, 8, size, 31].
        let shape = |size: usize| match axis {
            1 => [1, size, 20, 31],
            _ => [1, 8, size, 31],
        };
        for between_convs in [false, true] {
            // An empty part too where no convolution reads it.
            let sizes: &[usize] = match between_convs {
                true => &[8, 24, 5],
                false => &[8, 0, 24, 5],
            };
            let build = |expose: bool| {
                let mut rng = Rng::new(41);
                let mut b = GraphBuilder::new("join");
                let mut parts = Vec::new();
                let mut inputs = Vec::new();
                for (i, &size) in sizes.iter().enumerate() {
                    let c = shape(size)[1];
                    let x = b.input_fixed(&format!("x{i}"), DType::F32, &shape(size));
                    inputs.push(x);
                    // The first input shares the join's parameters; the others do not.
                    let s = if i == 0 { 0.04 } else { 0.013 * (i + 1) as f32 };
                    let (qs, qz) = scalar(&mut b, DType::U8, &format!("x{i}"), 0.03, 128);
                    let q = b.node(OpKind::QuantizeLinear, &[x, qs, qz], &[]).unwrap();
                    let mut t = b.node(OpKind::DequantizeLinear, &[q, qs, qz], &[]).unwrap();
                    if between_convs {
                        let wq: Vec<i8> = (0..c * c).map(|_| rng.next_u64() as i8 / 4).collect();
                        let wt = b.constant(
                            &format!("w{i}"),
                            DType::I8,
                            &[c, c, 1, 1],
                            TensorData::from_slice(&wq),
                        );
                        let (ws, wz) = scalar(&mut b, DType::I8, &format!("w{i}"), 0.01, 0);
                        let wd = b
                            .node(OpKind::DequantizeLinear, &[wt, ws, wz], &[])
                            .unwrap();
                        t = b.node(OpKind::Conv, &[t, wd], &[]).unwrap();
                    }
                    let (ps, pz) = scalar(&mut b, DType::U8, &format!("p{i}"), s, 120 + i as i32);
                    let q = b.node(OpKind::QuantizeLinear, &[t, ps, pz], &[]).unwrap();
                    parts.push(b.node(OpKind::DequantizeLinear, &[q, ps, pz], &[]).unwrap());
                }
                let cat = b
                    .node(OpKind::Concat, &parts, &[("axis", Attr::Int(axis))])
                    .unwrap();
                let (ys, yz) = scalar(&mut b, DType::U8, "y", 0.04, 120);
                let q = b.node(OpKind::QuantizeLinear, &[cat, ys, yz], &[]).unwrap();
                let mut y = b.node(OpKind::DequantizeLinear, &[q, ys, yz], &[]).unwrap();
                if between_convs && axis == 1 {
                    let c: usize = sizes.iter().sum();
                    let wq: Vec<i8> = (0..c * 4).map(|_| rng.next_u64() as i8 / 4).collect();
                    let wt =
                        b.constant("wy", DType::I8, &[4, c, 1, 1], TensorData::from_slice(&wq));
                    let (ws, wz) = scalar(&mut b, DType::I8, "wy", 0.01, 0);
                    let wd = b
                        .node(OpKind::DequantizeLinear, &[wt, ws, wz], &[])
                        .unwrap();
                    let c = b.node(OpKind::Conv, &[y, wd], &[]).unwrap();
                    let (cs, cz) = scalar(&mut b, DType::U8, "c", 0.05, 128);
                    let q = b.node(OpKind::QuantizeLinear, &[c, cs, cz], &[]).unwrap();
                    y = b.node(OpKind::DequantizeLinear, &[q, cs, cz], &[]).unwrap();
                }
                b.output(y);
                if expose {
                    b.output(cat);
                }
                (b.finish().unwrap(), inputs.len())
            };
            let ((g, k), (exposed, _)) = (build(false), build(true));
            let mut rng = Rng::new(42);
            let input: Vec<Tensor> = sizes
                .iter()
                .map(|&size| {
                    let xs: Vec<f32> = (0..shape(size).iter().product())
                        .map(|_| (rng.next_u64() % 7000) as f32 / 1000.0 - 3.5)
                        .collect();
                    Tensor::from_f32(&shape(size), &xs)
                })
                .collect();
            let what = format!("axis {axis}, convs {between_convs}");
            same_as_exposed(&g, &exposed, &input, k + 1, &what);
        }
    }
}

/// Graph `g`'s first output has the bits of `exposed`'s (its twin with an intermediate
/// also an output, so that a byte op cannot form) in `fewer` steps fewer, on every ISA
/// at 1 and 2 threads.
fn same_as_exposed(g: &Graph, exposed: &Graph, input: &[Tensor], fewer: usize, what: &str) {
    for isa in common::isas() {
        for threads in [1, 2] {
            let d = common::delegate_with(isa, threads);
            let (got, steps) = common::run_counting(&d, g, input);
            let (want, exposed_steps) = common::run_counting(&d, exposed, input);
            let what = format!("{what}, isa {isa}, {threads} threads");
            common::assert_same_bits(&got[..1], &want[..1], &what);
            assert_eq!(steps + fewer, exposed_steps, "{what}: no byte op");
        }
    }
}
