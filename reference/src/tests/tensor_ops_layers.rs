//! ConvTranspose against a naive scatter loop, Resize against ONNX's documented examples,
//! LSTM and GRU against step-by-step scalar implementations written here, RNN against
//! values worked out by hand and with numpy, and Q/DQ
//! against hand-computed values.

use super::tensor_ops::run_outputs;
use super::*;

/// Deterministic values in [-1.25, 1.25], `n` of them, varying with `seed`.
fn wave(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + seed * 3) % 11) as f32 - 5.0) / 4.0)
        .collect()
}

struct Deconv {
    x: [usize; 4],
    w: [usize; 4],
    group: usize,
    stride: [usize; 2],
    dil: [usize; 2],
    pads: [usize; 4],
    out_pad: [usize; 2],
}

/// ConvTranspose by scattering: every input element adds `x * w` into a full-size
/// output at `i * stride + k * dilation`, which is then cropped by the pads.
fn scatter(c: &Deconv, x: &[f32], w: &[f32], bias: &[f32]) -> (Vec<usize>, Vec<f32>) {
    let [n, ci, ih, iw] = c.x;
    let [_, mg, kh, kw] = c.w;
    let m = mg * c.group;
    let cg = ci / c.group;
    let full =
        |i: usize, a: usize| c.stride[a] * (i - 1) + c.out_pad[a] + (c.w[2 + a] - 1) * c.dil[a] + 1;
    let (fh, fw) = (full(ih, 0), full(iw, 1));
    let mut y = vec![0.0f64; n * m * fh * fw];
    for b in 0..n {
        for ch in 0..ci {
            let g = ch / cg;
            for (iy, ix) in (0..ih).flat_map(|y| (0..iw).map(move |x| (y, x))) {
                let xv = x[((b * ci + ch) * ih + iy) * iw + ix] as f64;
                for mo in 0..mg {
                    for (ky, kx) in (0..kh).flat_map(|y| (0..kw).map(move |x| (y, x))) {
                        let wv = w[((ch * mg + mo) * kh + ky) * kw + kx] as f64;
                        let oy = iy * c.stride[0] + ky * c.dil[0];
                        let ox = ix * c.stride[1] + kx * c.dil[1];
                        y[((b * m + g * mg + mo) * fh + oy) * fw + ox] += xv * wv;
                    }
                }
            }
        }
    }
    let (oh, ow) = (fh - c.pads[0] - c.pads[2], fw - c.pads[1] - c.pads[3]);
    let mut out = Vec::new();
    for b in 0..n {
        for mm in 0..m {
            for oy in 0..oh {
                for ox in 0..ow {
                    let v = y[((b * m + mm) * fh + oy + c.pads[0]) * fw + ox + c.pads[1]];
                    out.push((v + bias.get(mm).map_or(0.0, |&b| b as f64)) as f32);
                }
            }
        }
    }
    (vec![n, m, oh, ow], out)
}

#[test]
fn conv_transpose_matches_a_scatter_loop() {
    let cases = [
        Deconv {
            x: [1, 1, 2, 3],
            w: [1, 1, 2, 2],
            group: 1,
            stride: [1, 1],
            dil: [1, 1],
            pads: [0; 4],
            out_pad: [0, 0],
        },
        Deconv {
            x: [2, 4, 3, 2],
            w: [4, 3, 3, 2],
            group: 2,
            stride: [2, 3],
            dil: [1, 2],
            pads: [1, 0, 2, 1],
            out_pad: [1, 2],
        },
        Deconv {
            x: [1, 2, 1, 5],
            w: [2, 2, 1, 3],
            group: 1,
            stride: [1, 2],
            dil: [1, 1],
            pads: [0, 1, 0, 1],
            out_pad: [0, 1],
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        let x = wave(c.x.iter().product(), i);
        let w = wave(c.w.iter().product(), i + 5);
        let m = c.w[1] * c.group;
        let bias = wave(m, i + 9);
        let (want_shape, want) = scatter(c, &x, &w, if i == 1 { &bias } else { &[] });
        let mut attrs = vec![
            ("strides", ints(&c.stride.map(|v| v as i64))),
            ("pads", ints(&c.pads.map(|v| v as i64))),
            ("output_padding", ints(&c.out_pad.map(|v| v as i64))),
            ("group", Attr::Int(c.group as i64)),
        ];
        if c.dil != [1, 1] {
            attrs.push(("dilations", ints(&c.dil.map(|v| v as i64))));
        }
        let mut inputs = vec![f32t(&c.x, &x), f32t(&c.w, &w)];
        if i == 1 {
            inputs.push(f32t(&[m], &bias));
        }
        let (shape, got) = run_f32(&node(OpKind::ConvTranspose, inputs.len(), &attrs), &inputs);
        assert_eq!(shape, want_shape, "case {i}");
        assert_close(&got, &want, 1e-5);
    }
}

#[test]
fn conv_transpose_1d_literal_output_shape_and_same() {
    // [1, 2] with kernel [1, 10], stride 2: y = [1, 10, 2, 20] at 2i + k.
    let x = f32t(&[1, 1, 2], &[1., 2.]);
    let w = f32t(&[1, 1, 2], &[1., 10.]);
    let n = node(OpKind::ConvTranspose, 2, &[("strides", ints(&[2]))]);
    let (shape, got) = run_f32(&n, &[x.clone(), w.clone()]);
    assert_eq!(shape, vec![1, 1, 4]);
    assert_bits(&got, &[1., 10., 2., 20.]);
    // output_shape 3 of the full 4: total padding 1, the larger half (1) first.
    let n = node(
        OpKind::ConvTranspose,
        2,
        &[("strides", ints(&[2])), ("output_shape", ints(&[3]))],
    );
    assert_bits(&run_f32(&n, &[x.clone(), w.clone()]).1, &[10., 2., 20.]);
    // SAME_UPPER: extent in * stride = 4 from the full 4 (no padding); with kernel 3
    // the full 5 pads 1, smaller half (0) first, so the end is cut.
    let w3 = f32t(&[1, 1, 3], &[1., 10., 100.]);
    let n = node(
        OpKind::ConvTranspose,
        2,
        &[
            ("strides", ints(&[2])),
            ("auto_pad", Attr::Str("SAME_UPPER".into())),
        ],
    );
    assert_bits(
        &run_f32(&n, &[x.clone(), w3.clone()]).1,
        &[1., 10., 102., 20.],
    );
    let n = node(
        OpKind::ConvTranspose,
        2,
        &[
            ("strides", ints(&[2])),
            ("auto_pad", Attr::Str("SAME_LOWER".into())),
        ],
    );
    assert_bits(&run_f32(&n, &[x, w3]).1, &[10., 102., 20., 200.]);
}

fn resize(x: Tensor, attrs: &[(&str, Attr)], sizes: Option<&[i64]>) -> (Vec<usize>, Vec<f32>) {
    let mut inputs = vec![x];
    if let Some(s) = sizes {
        inputs.push(f32t(&[0], &[]));
        inputs.push(f32t(&[0], &[]));
        inputs.push(Tensor::from_i64(&[s.len()], s));
    }
    run_f32(&node(OpKind::Resize, inputs.len(), attrs), &inputs)
}

fn s(v: &str) -> Attr {
    Attr::Str(v.into())
}

#[test]
fn resize_nearest_examples() {
    let x = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let sc = ("scales", Attr::Floats(vec![1., 1., 2., 3.]));
    let (shape, got) = resize(x, &[sc], None);
    assert_eq!(shape, vec![1, 1, 4, 6]);
    let row = |a: f32, b: f32| [a, a, a, b, b, b];
    let want: Vec<f32> = [row(1., 2.), row(1., 2.), row(3., 4.), row(3., 4.)].concat();
    assert_bits(&got, &want);
    // Downsampling by 0.6: floor(2 * 0.6) = 1 row, floor(4 * 0.6) = 2 columns.
    let x = f32t(&[1, 1, 2, 4], &iota(8));
    let (shape, got) = resize(x, &[("scales", Attr::Floats(vec![1., 1., 0.6, 0.6]))], None);
    assert_eq!(shape, vec![1, 1, 1, 2]);
    assert_bits(&got, &[1., 3.]);
    // 4x4 to 8x8 by sizes, one row of each: ceil/half_pixel, floor/align_corners,
    // round_prefer_ceil/asymmetric.
    let x = f32t(&[1, 1, 1, 4], &iota(4));
    for (nearest, coord, want) in [
        ("ceil", "half_pixel", [1., 2., 2., 3., 3., 4., 4., 4.]),
        ("floor", "align_corners", [1., 1., 1., 2., 2., 3., 3., 4.]),
        (
            "round_prefer_ceil",
            "asymmetric",
            [1., 2., 2., 3., 3., 4., 4., 4.],
        ),
        (
            "round_prefer_floor",
            "asymmetric",
            [1., 1., 2., 2., 3., 3., 4., 4.],
        ),
    ] {
        let attrs = [
            ("nearest_mode", s(nearest)),
            ("coordinate_transformation_mode", s(coord)),
        ];
        let (shape, got) = resize(x.clone(), &attrs, Some(&[1, 1, 1, 8]));
        assert_eq!(shape, vec![1, 1, 1, 8]);
        assert_bits(&got, &want);
    }
    // Nearest moves bytes of any dtype; axes (opset 18) name the resized axes.
    let x = typed(DType::I64, &[2, 2], &[1i64, 2, 3, 4]);
    let attrs = [("axes", ints(&[-1])), ("scales", Attr::Floats(vec![2.]))];
    let out = run(&node(OpKind::Resize, 1, &attrs), &[x]).unwrap();
    assert_eq!(out.values::<i64>(), &[1, 1, 2, 2, 3, 3, 4, 4]);
}

#[test]
fn resize_linear_examples() {
    let x = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let up = ("scales", Attr::Floats(vec![1., 1., 2., 2.]));
    let lin = ("mode", s("linear"));
    let (_, got) = resize(x.clone(), &[up.clone(), lin.clone()], None);
    #[rustfmt::skip]
    let want = [
        1.0, 1.25, 1.75, 2.0,
        1.5, 1.75, 2.25, 2.5,
        2.5, 2.75, 3.25, 3.5,
        3.0, 3.25, 3.75, 4.0,
    ];
    assert_close(&got, &want, 1e-6);
    let ac = ("coordinate_transformation_mode", s("align_corners"));
    let (_, got) = resize(x.clone(), &[up, lin.clone(), ac.clone()], None);
    let t = 1.0 / 3.0;
    #[rustfmt::skip]
    let want = [
        1.0, 1.0 + t, 1.0 + 2.0 * t, 2.0,
        1.0 + 2.0 * t, 2.0, 2.0 + t, 2.0 + 2.0 * t,
        2.0 + t, 2.0 + 2.0 * t, 3.0, 3.0 + t,
        3.0, 3.0 + t, 3.0 + 2.0 * t, 4.0,
    ];
    assert_close(&got, &want, 1e-6);
    // Downsampling 2x4 by 0.6 to 1x2.
    let x = f32t(&[1, 1, 2, 4], &iota(8));
    let down = ("scales", Attr::Floats(vec![1., 1., 0.6, 0.6]));
    let (_, got) = resize(x.clone(), &[down.clone(), lin.clone()], None);
    assert_close(&got, &[2.666_666_5, 4.333_333], 1e-5);
    // align_corners divides by the fractional extent 4 * 0.6 minus 1, as ONNX's reference
    // and backend test data do (ONNX Runtime's integer extent would read x[3] = 4).
    let (_, got) = resize(x, &[down, lin.clone(), ac], None);
    assert_close(&got, &[1.0, 3.142_857], 1e-5);
    // pytorch_half_pixel to an extent of 1 reads coordinate 0.
    let x = f32t(&[1, 3], &[1., 2., 3.]);
    let attrs = [
        lin,
        ("coordinate_transformation_mode", s("pytorch_half_pixel")),
    ];
    assert_bits(&resize(x, &attrs, Some(&[1, 1])).1, &[1.]);
}

// The expected values of the next test are those of ONNX's reference implementation
// (onnx 1.22 `ReferenceEvaluator`), which generated the backend test data.
#[test]
fn resize_cubic_antialias_crop_and_operand_scales() {
    let x = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let up = ("scales", Attr::Floats(vec![1., 1., 2., 2.]));
    let (_, got) = resize(x.clone(), &[up.clone(), ("mode", s("cubic"))], None);
    #[rustfmt::skip]
    let want = [
        0.683_593_75, 1.015_625, 1.562_5, 1.894_531_3,
        1.347_656_3, 1.679_687_5, 2.226_562_5, 2.558_593_8,
        2.441_406_3, 2.773_437_5, 3.320_312_5, 3.652_343_8,
        3.105_468_8, 3.437_5, 3.984_375, 4.316_406_3,
    ];
    assert_close(&got, &want, 1e-6);
    let x4 = f32t(&[1, 1, 4, 4], &iota(16));
    let down = ("scales", Attr::Floats(vec![1., 1., 0.6, 0.6]));
    let attrs = [
        down.clone(),
        ("mode", s("cubic")),
        ("exclude_outside", Attr::Int(1)),
        ("cubic_coeff_a", Attr::Float(-0.5)),
    ];
    let (_, got) = resize(x4.clone(), &attrs, None);
    assert_close(&got, &[2.206_898, 3.965_518_5, 9.241_382, 11.000_003], 1e-5);
    // Antialiased linear halving averages 4 taps with weights 1/8, 3/8, 3/8, 1/8.
    let half = ("scales", Attr::Floats(vec![1., 1., 0.5, 0.5]));
    let attrs = [half, ("mode", s("linear")), ("antialias", Attr::Int(1))];
    let (_, got) = resize(x4.clone(), &attrs, None);
    assert_close(&got, &[4.125, 5.875, 11.125, 12.875], 1e-6);
    let attrs = [
        down,
        ("mode", s("linear")),
        ("coordinate_transformation_mode", s("half_pixel_symmetric")),
    ];
    let (_, got) = resize(x4.clone(), &attrs, None);
    assert_close(&got, &[4.333_333_5, 6.0, 11.0, 12.666_666], 1e-6);
    // tf_crop_and_resize: the roi (operand 1) picks the region; outside the input is the
    // extrapolation value. Sizes as operand 3, scales omitted.
    let n = node(
        OpKind::Resize,
        4,
        &[
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("tf_crop_and_resize")),
            ("extrapolation_value", Attr::Float(10.)),
        ],
    );
    let roi = f32t(&[8], &[0., 0., 0.4, 0.6, 1., 1., 1.2, 1.7]);
    let inputs = [
        x4,
        roi,
        f32t(&[0], &[]),
        Tensor::from_i64(&[4], &[1, 1, 3, 3]),
    ];
    let out = run(&n, &inputs).unwrap();
    assert_eq!(out.shape, vec![1, 1, 3, 3]);
    #[rustfmt::skip]
    assert_close(out.f32s(), &[7.6, 10., 10., 12.4, 10., 10., 10., 10., 10.], 1e-5);
    // Scales as a run-time float operand 2 size the output like the attribute.
    let inputs = [x.clone(), f32t(&[0], &[]), f32t(&[4], &[1., 1., 2., 2.])];
    let out = run(&node(OpKind::Resize, 3, &[]), &inputs).unwrap();
    assert_eq!(out.shape, vec![1, 1, 4, 4]);
    assert_eq!(&out.f32s()[..4], &[1., 1., 2., 2.]);
    // Unknown modes and linear on integers are refused.
    for attrs in [
        [up.clone(), ("mode", s("bicubic"))],
        [up.clone(), ("coordinate_transformation_mode", s("bogus"))],
    ] {
        let err = run(&node(OpKind::Resize, 1, &attrs), std::slice::from_ref(&x)).unwrap_err();
        assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    }
    let ints = typed(DType::I32, &[1, 1, 2, 2], &[1i32, 2, 3, 4]);
    let err = run(
        &node(OpKind::Resize, 1, &[up, ("mode", s("linear"))]),
        &[ints],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

/// LSTM, one batch entry, written out gate by gate: `(Y, Y_h, Y_c)`.
#[allow(clippy::too_many_arguments)]
fn lstm_scalar(
    x: &[Vec<f64>],
    w: &[f32],
    r: &[f32],
    b: &[f32],
    h0: &[f32],
    c0: &[f32],
    p: &[f32],
    hs: usize,
    dirs: usize,
    clip: f64,
    input_forget: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let cl = |v: f64| v.max(-clip).min(clip);
    let n_in = x[0].len();
    let seq = x.len();
    let mut y = vec![0.0; seq * dirs * hs];
    let (mut yh, mut yc) = (Vec::new(), Vec::new());
    for d in 0..dirs {
        let mut h: Vec<f64> = h0[d * hs..(d + 1) * hs].iter().map(|&v| v as f64).collect();
        let mut c: Vec<f64> = c0[d * hs..(d + 1) * hs].iter().map(|&v| v as f64).collect();
        let order: Vec<usize> = if d == 0 {
            (0..seq).collect()
        } else {
            (0..seq).rev().collect()
        };
        for t in order {
            // Pre-activation of gate row `row` (gate * hs + unit) of direction d.
            let lin = |row: usize| {
                let mut acc = 0.0;
                for k in 0..n_in {
                    acc += x[t][k] * w[(d * 4 * hs + row) * n_in + k] as f64;
                }
                for k in 0..hs {
                    acc += h[k] * r[(d * 4 * hs + row) * hs + k] as f64;
                }
                acc + b[d * 8 * hs + row] as f64 + b[d * 8 * hs + 4 * hs + row] as f64
            };
            let peep = |g: usize, j: usize| p[d * 3 * hs + g * hs + j] as f64;
            let (mut h_new, mut c_new) = (vec![0.0; hs], vec![0.0; hs]);
            for j in 0..hs {
                let i_gate = sig(cl(lin(j) + peep(0, j) * c[j]));
                let f_gate = if input_forget {
                    1.0 - i_gate
                } else {
                    sig(cl(lin(2 * hs + j) + peep(2, j) * c[j]))
                };
                let cell = cl(lin(3 * hs + j)).tanh();
                c_new[j] = f_gate * c[j] + i_gate * cell;
                let o_gate = sig(cl(lin(hs + j) + peep(1, j) * c_new[j]));
                h_new[j] = o_gate * c_new[j].tanh();
            }
            h = h_new;
            c = c_new;
            for j in 0..hs {
                y[(t * dirs + d) * hs + j] = h[j];
            }
        }
        yh.extend(&h);
        yc.extend(&c);
    }
    (y, yh, yc)
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

#[test]
fn lstm_all_zero_weights_by_hand() {
    // i = f = o = 0.5 and c~ = 0: C1 = 0.5 * C0, H1 = 0.5 * tanh(C1); then C2 = 0.25.
    let (hs, n_in) = (2, 1);
    let inputs = [
        f32t(&[2, 1, n_in], &[3., -4.]),
        f32t(&[1, 4 * hs, n_in], &[0.; 8]),
        f32t(&[1, 4 * hs, hs], &[0.; 16]),
        f32t(&[1, 8 * hs], &[0.; 16]),
        typed(DType::I32, &[1], &[2i32]),
        f32t(&[1, 1, hs], &[0.3, -0.3]),
        f32t(&[1, 1, hs], &[1., -2.]),
    ];
    let outs = run_outputs(&node(OpKind::LSTM, 7, &[]), &inputs, 3).unwrap();
    let h = |c: f32| 0.5 * c.tanh();
    assert_eq!(outs[0].shape, vec![2, 1, 1, 2]);
    assert_close(outs[0].f32s(), &[h(0.5), h(-1.), h(0.25), h(-0.5)], 1e-6);
    assert_close(outs[1].f32s(), &[h(0.25), h(-0.5)], 1e-6);
    assert_close(outs[2].f32s(), &[0.25, -0.5], 1e-6);
}

#[test]
fn lstm_matches_a_scalar_implementation() {
    let (seq, n_in, hs) = (2, 3, 2);
    let xv = wave(seq * n_in, 1);
    let x_rows: Vec<Vec<f64>> = xv
        .chunks(n_in)
        .map(|c| c.iter().map(|&v| v as f64).collect())
        .collect();
    for (dirs, direction, peephole, clip, input_forget) in [
        (2, "bidirectional", false, f64::INFINITY, false),
        (1, "forward", true, 0.5, false),
        (1, "forward", true, f64::INFINITY, true),
    ] {
        let w = wave(dirs * 4 * hs * n_in, 2);
        let r = wave(dirs * 4 * hs * hs, 3);
        let b = wave(dirs * 8 * hs, 4);
        let h0 = wave(dirs * hs, 5);
        let c0 = wave(dirs * hs, 6);
        let p = if peephole {
            wave(dirs * 3 * hs, 7)
        } else {
            vec![0.; dirs * 3 * hs]
        };
        let (y, yh, yc) = lstm_scalar(
            &x_rows,
            &w,
            &r,
            &b,
            &h0,
            &c0,
            &p,
            hs,
            dirs,
            clip,
            input_forget,
        );
        let mut inputs = vec![
            f32t(&[seq, 1, n_in], &xv),
            f32t(&[dirs, 4 * hs, n_in], &w),
            f32t(&[dirs, 4 * hs, hs], &r),
            f32t(&[dirs, 8 * hs], &b),
            typed(DType::I32, &[0], &[0i32; 0]),
            f32t(&[dirs, 1, hs], &h0),
            f32t(&[dirs, 1, hs], &c0),
        ];
        if peephole {
            inputs.push(f32t(&[dirs, 3 * hs], &p));
        }
        let mut attrs = vec![
            ("direction", s(direction)),
            ("hidden_size", Attr::Int(hs as i64)),
            ("input_forget", Attr::Int(input_forget as i64)),
        ];
        if clip.is_finite() {
            attrs.push(("clip", Attr::Float(clip as f32)));
        }
        let outs = run_outputs(&node(OpKind::LSTM, inputs.len(), &attrs), &inputs, 3).unwrap();
        assert_eq!(outs[0].shape, vec![seq, dirs, 1, hs]);
        assert_close(outs[0].f32s(), &f32s(&y), 1e-6);
        assert_close(outs[1].f32s(), &f32s(&yh), 1e-6);
        assert_close(outs[2].f32s(), &f32s(&yc), 1e-6);
    }
}

#[test]
fn lstm_sequence_lengths_and_refusals() {
    // Batch 2, lengths 2 and 1, reverse: entry 1 starts at t = 0 and leaves Y[1] at 0.
    let (hs, n_in) = (1, 1);
    let x = f32t(&[2, 2, n_in], &[1., 2., 3., 4.]);
    let w = f32t(&[1, 4, n_in], &[0.5, -0.5, 0.25, 1.]);
    let r = f32t(&[1, 4, hs], &[0.1, 0.2, 0.3, 0.4]);
    let b = f32t(&[1, 8], &[0.; 8]);
    let lens = typed(DType::I32, &[2], &[2i32, 1]);
    let n = node(OpKind::LSTM, 5, &[("direction", s("reverse"))]);
    let outs = run_outputs(&n, &[x, w.clone(), r.clone(), b.clone(), lens], 2).unwrap();
    let y = outs[0].f32s();
    assert_eq!(y[3], 0.0); // t = 1, entry 1: past its length
                           // Entry 1 ran one step on x = 2 from zero state: its Y_h is that step's H.
    let single = run_outputs(
        &node(OpKind::LSTM, 3, &[]),
        &[f32t(&[1, 1, 1], &[2.]), w.clone(), r.clone()],
        2,
    )
    .unwrap();
    assert_bits(&[y[1], outs[1].f32s()[1]], &[single[1].f32s()[0]; 2]);
    // Lengths past the sequence, layout 1, other activations.
    let x = f32t(&[1, 1, 1], &[1.]);
    let bad = typed(DType::I32, &[1], &[2i32]);
    assert!(run(
        &node(OpKind::LSTM, 5, &[]),
        &[x.clone(), w.clone(), r.clone(), b, bad]
    )
    .is_err());
    let n = node(OpKind::LSTM, 3, &[("layout", Attr::Int(1))]);
    assert!(run(&n, &[x.clone(), w.clone(), r.clone()]).is_err());
    let n = node(OpKind::LSTM, 3, &[("activations", s("Relu,Tanh,Tanh"))]);
    let err = run(&n, &[x.clone(), w.clone(), r.clone()]).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let n = node(OpKind::LSTM, 3, &[("activations", s("Sigmoid,Tanh,Tanh"))]);
    assert!(run(&n, &[x, w, r]).is_ok());
}

/// GRU, one batch entry, one direction, written out gate by gate: `(Y, Y_h)`.
fn gru_scalar(
    x: &[Vec<f64>],
    w: &[f32],
    r: &[f32],
    b: &[f32],
    h0: &[f32],
    hs: usize,
    lbr: bool,
) -> (Vec<f64>, Vec<f64>) {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let n_in = x[0].len();
    let mut h: Vec<f64> = h0.iter().map(|&v| v as f64).collect();
    let mut y = Vec::new();
    for xt in x {
        let xw = |row: usize| {
            (0..n_in)
                .map(|k| xt[k] * w[row * n_in + k] as f64)
                .sum::<f64>()
        };
        let hr =
            |row: usize, hv: &[f64]| (0..hs).map(|k| hv[k] * r[row * hs + k] as f64).sum::<f64>();
        let (wb, rb) = (
            |row: usize| b[row] as f64,
            |row: usize| b[3 * hs + row] as f64,
        );
        let z: Vec<f64> = (0..hs)
            .map(|j| sig(xw(j) + hr(j, &h) + wb(j) + rb(j)))
            .collect();
        let rg: Vec<f64> = (0..hs)
            .map(|j| sig(xw(hs + j) + hr(hs + j, &h) + wb(hs + j) + rb(hs + j)))
            .collect();
        let reset: Vec<f64> = (0..hs).map(|j| rg[j] * h[j]).collect();
        let h_new: Vec<f64> = (0..hs)
            .map(|j| {
                let row = 2 * hs + j;
                let cand = if lbr {
                    (xw(row) + rg[j] * (hr(row, &h) + rb(row)) + wb(row)).tanh()
                } else {
                    (xw(row) + hr(row, &reset) + rb(row) + wb(row)).tanh()
                };
                (1.0 - z[j]) * cand + z[j] * h[j]
            })
            .collect();
        h = h_new;
        y.extend(&h);
    }
    (y, h)
}

#[test]
fn gru_by_hand_and_against_a_scalar_implementation() {
    // Zero weights: z = r = 0.5, h~ = 0, so H halves every step.
    let inputs = [
        f32t(&[2, 1, 1], &[5., 6.]),
        f32t(&[1, 6, 1], &[0.; 6]),
        f32t(&[1, 6, 2], &[0.; 12]),
        f32t(&[1, 12], &[0.; 12]),
        typed(DType::I32, &[1], &[2i32]),
        f32t(&[1, 1, 2], &[1., -4.]),
    ];
    let outs = run_outputs(&node(OpKind::GRU, 6, &[]), &inputs, 2).unwrap();
    assert_bits(outs[0].f32s(), &[0.5, -2., 0.25, -1.]);
    assert_bits(outs[1].f32s(), &[0.25, -1.]);

    let (seq, n_in, hs) = (2, 2, 2);
    let xv = wave(seq * n_in, 3);
    let rows: Vec<Vec<f64>> = xv
        .chunks(n_in)
        .map(|c| c.iter().map(|&v| v as f64).collect())
        .collect();
    let (w, r, b, h0) = (
        wave(3 * hs * n_in, 1),
        wave(3 * hs * hs, 2),
        wave(6 * hs, 4),
        wave(hs, 8),
    );
    for lbr in [0, 1] {
        let (y, yh) = gru_scalar(&rows, &w, &r, &b, &h0, hs, lbr == 1);
        let inputs = [
            f32t(&[seq, 1, n_in], &xv),
            f32t(&[1, 3 * hs, n_in], &w),
            f32t(&[1, 3 * hs, hs], &r),
            f32t(&[1, 6 * hs], &b),
            typed(DType::I32, &[1], &[2i32]),
            f32t(&[1, 1, hs], &h0),
        ];
        let n = node(OpKind::GRU, 6, &[("linear_before_reset", Attr::Int(lbr))]);
        let outs = run_outputs(&n, &inputs, 2).unwrap();
        assert_close(outs[0].f32s(), &f32s(&y), 1e-6);
        assert_close(outs[1].f32s(), &f32s(&yh), 1e-6);
    }
}

#[test]
fn rnn_by_hand() {
    // X [2, 1, 1] = 1, 2; W 0.5, R 1, Wb 0.1, Rb 0.2, Relu:
    // H1 = relu(0.5 + 0 + 0.3) = 0.8, H2 = relu(1.0 + 0.8 + 0.3) = 2.1.
    let inputs = [
        f32t(&[2, 1, 1], &[1., 2.]),
        f32t(&[1, 1, 1], &[0.5]),
        f32t(&[1, 1, 1], &[1.]),
        f32t(&[1, 2], &[0.1, 0.2]),
    ];
    let n = node(OpKind::RNN, 4, &[("activations", s("Relu"))]);
    let outs = run_outputs(&n, &inputs, 2).unwrap();
    assert_close(outs[0].f32s(), &[0.8, 2.1], 1e-6);
    assert_close(outs[1].f32s(), &[2.1], 1e-6);
    // Reverse: H(t=1) = relu(1.0 + 0.3) = 1.3, H(t=0) = relu(0.5 + 1.3 + 0.3) = 2.1.
    let n = node(
        OpKind::RNN,
        4,
        &[("activations", s("relu")), ("direction", s("reverse"))],
    );
    let outs = run_outputs(&n, &inputs, 2).unwrap();
    assert_close(outs[0].f32s(), &[2.1, 1.3], 1e-6);
    assert_close(outs[1].f32s(), &[2.1], 1e-6);
    // Default Tanh, clip 0.25: every pre-activation above is clipped, H = tanh(0.25).
    let n = node(OpKind::RNN, 4, &[("clip", Attr::Float(0.25))]);
    let outs = run_outputs(&n, &inputs, 2).unwrap();
    let t = 0.25f64.tanh() as f32;
    assert_close(outs[0].f32s(), &[t, t], 1e-7);
}

#[test]
fn rnn_bidirectional_against_numpy() {
    // Sequence 3, batch 2 (lengths 3 and 2), input 2, hidden 2, both directions, initial
    // state and bias; the expected values come from a numpy implementation of the ONNX
    // definition run on the same inputs.
    let (seq, batch, n_in, hs) = (3, 2, 2, 2);
    let inputs = [
        f32t(&[seq, batch, n_in], &wave(seq * batch * n_in, 3)),
        f32t(&[2, hs, n_in], &wave(2 * hs * n_in, 1)),
        f32t(&[2, hs, hs], &wave(2 * hs * hs, 2)),
        f32t(&[2, 2 * hs], &wave(4 * hs, 4)),
        typed(DType::I32, &[2], &[3i32, 2]),
        f32t(&[2, batch, hs], &wave(2 * batch * hs, 8)),
    ];
    // Forward Tanh, reverse ScaledTanh(alpha 1.5, beta 0.5).
    let n = node(
        OpKind::RNN,
        6,
        &[
            ("direction", s("bidirectional")),
            ("activations", s("Tanh,ScaledTanh")),
            ("activation_alpha", Attr::Floats(vec![1.5])),
            ("activation_beta", Attr::Floats(vec![0.5])),
        ],
    );
    let outs = run_outputs(&n, &inputs, 2).unwrap();
    #[rustfmt::skip]
    let y = [
        -0.99078083, -0.7615942, 0.7340715, -0.8649066,
        1.3306125, -0.6856902, -0.89801025, 1.1750354,
        -0.98246676, -0.54818356, -0.8598587, 0.62555,
        -0.19448, -0.17122711, 1.439003, -0.92420167,
        -0.8846969, -0.87580425, 0.0, 0.0,
        1.1616138, -0.79888093, 0.0, 0.0,
    ];
    #[rustfmt::skip]
    let y_h = [
        -0.8846969, -0.87580425, -0.8598587, 0.62555,
        1.3306125, -0.6856902, -0.89801025, 1.1750354,
    ];
    assert_close(outs[0].f32s(), &y, 1e-6);
    assert_close(outs[1].f32s(), &y_h, 1e-6);
    // Forward HardSigmoid(0.3, 0.4), reverse LeakyRelu(0.05), clip 0.5.
    let n = node(
        OpKind::RNN,
        6,
        &[
            ("direction", s("bidirectional")),
            ("activations", s("HardSigmoid,LeakyRelu")),
            ("activation_alpha", Attr::Floats(vec![0.3, 0.05])),
            ("activation_beta", Attr::Floats(vec![0.4])),
            ("clip", Attr::Float(0.5)),
        ],
    );
    let outs = run_outputs(&n, &inputs, 2).unwrap();
    #[rustfmt::skip]
    let y = [
        0.25, 0.25, 0.55, 0.25, 0.5, -0.025, 0.23125, 0.5,
        0.25, 0.55, 0.25, 0.55, 0.5, -0.025, 0.5, -0.025,
        0.25, 0.3625, 0.0, 0.0, 0.5, -0.025, 0.0, 0.0,
    ];
    let y_h = [0.25, 0.3625, 0.25, 0.55, 0.5, -0.025, 0.23125, 0.5];
    assert_close(outs[0].f32s(), &y, 1e-6);
    assert_close(outs[1].f32s(), &y_h, 1e-6);
    // Only Y asked for.
    let outs = run_outputs(&n, &inputs, 1).unwrap();
    assert_eq!(outs.len(), 1);
    assert_close(outs[0].f32s(), &y, 1e-6);
}

#[test]
fn rnn_refuses_bad_activations_and_lengths() {
    let inputs = [
        f32t(&[2, 1, 1], &[1., 2.]),
        f32t(&[1, 1, 1], &[0.5]),
        f32t(&[1, 1, 1], &[1.]),
    ];
    let n = node(OpKind::RNN, 3, &[("activations", s("Gelu"))]);
    assert!(run_outputs(&n, &inputs, 2).is_err());
    let n = node(OpKind::RNN, 3, &[("activations", s("Tanh,Tanh"))]);
    assert!(run_outputs(&n, &inputs, 2).is_err());
    let mut with_lens = inputs.to_vec();
    with_lens.push(f32t(&[0], &[]));
    with_lens.push(typed(DType::I32, &[1], &[3i32]));
    assert!(run_outputs(&node(OpKind::RNN, 5, &[]), &with_lens, 2).is_err());
}

#[test]
fn quantize_rounds_half_even_and_saturates() {
    let x = f32t(&[8], &[-1.5, -0.5, 0.5, 1.5, 2.5, 300., -300., f32::NAN]);
    let n = node(OpKind::QuantizeLinear, 3, &[]);
    let zp = typed(DType::U8, &[], &[128u8]);
    let out = run(&n, &[x.clone(), f32t(&[], &[1.]), zp]).unwrap();
    assert_eq!(out.dtype, DType::U8);
    assert_eq!(out.values::<u8>(), &[126, 128, 128, 130, 130, 255, 0, 128]);
    // No zero point: u8 around 0.
    let out = run(
        &node(OpKind::QuantizeLinear, 2, &[]),
        &[x, f32t(&[1], &[2.])],
    )
    .unwrap();
    assert_eq!(out.values::<u8>(), &[0, 0, 0, 1, 1, 150, 0, 0]);
    // Per axis 1 into i8: column scales 1 and 0.5, zero points 0 and -10.
    let x = f32t(&[2, 2], &[1., 1., -3., 2.25]);
    let zp = typed(DType::I8, &[2], &[0i8, -10]);
    let out = run(&n, &[x, f32t(&[2], &[1., 0.5]), zp]).unwrap();
    assert_eq!(out.values::<i8>(), &[1, -8, -3, -6]);
    // A scale that fits neither form.
    let x = f32t(&[2, 3], &[0.; 6]);
    assert!(run(
        &node(OpKind::QuantizeLinear, 2, &[]),
        &[x, f32t(&[2], &[1., 1.])]
    )
    .is_err());
}

#[test]
fn dequantize_per_tensor_and_per_axis() {
    let n = node(OpKind::DequantizeLinear, 3, &[]);
    let x = typed(DType::U8, &[3], &[0u8, 128, 255]);
    let out = run(&n, &[x, f32t(&[], &[0.5]), typed(DType::U8, &[], &[128u8])]).unwrap();
    assert_bits(out.f32s(), &[-64., 0., 63.5]);
    let x = typed(DType::I8, &[2, 2], &[-128i8, 127, 5, -5]);
    let n = node(OpKind::DequantizeLinear, 3, &[("axis", Attr::Int(0))]);
    let zp = typed(DType::I8, &[2], &[0i8, 5]);
    let out = run(&n, &[x, f32t(&[2], &[0.25, 2.]), zp]).unwrap();
    assert_bits(out.f32s(), &[-32., 31.75, 0., -20.]);
    let x = typed(DType::I32, &[1], &[1i32 << 30]);
    let out = run(
        &node(OpKind::DequantizeLinear, 2, &[]),
        &[x, f32t(&[], &[2.])],
    )
    .unwrap();
    assert_bits(out.f32s(), &[2147483648.]);
}
