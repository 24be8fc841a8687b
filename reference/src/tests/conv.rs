use super::*;

/// x[h][w] = 4h + w + 1 on a 1x1x4x4 input.
fn x4x4() -> Tensor {
    f32t(&[1, 1, 4, 4], &iota(16))
}

#[test]
fn conv_pads_and_stride() {
    let w = f32t(&[1, 1, 3, 3], &[1.; 9]);
    let n = node(
        OpKind::Conv,
        2,
        &[("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
    );
    let (shape, got) = run_f32(&n, &[x4x4(), w]);
    assert_eq!(shape, vec![1, 1, 2, 2]);
    // Window sums over rows/cols -1..1 and 1..3, padding reading 0:
    // 1+2+5+6, 2+3+4+6+7+8, 5+6+9+10+13+14, 6+7+8+10+11+12+14+15+16.
    assert_bits(&got, &[14., 30., 57., 99.]);
}

#[test]
fn conv_dilation_and_bias() {
    let w = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let b = f32t(&[1], &[0.5]);
    let n = node(OpKind::Conv, 3, &[("dilations", ints(&[2, 2]))]);
    let (shape, got) = run_f32(&n, &[x4x4(), w, b]);
    assert_eq!(shape, vec![1, 1, 2, 2]);
    // y[i][j] = x[i][j] + 2x[i][j+2] + 3x[i+2][j] + 4x[i+2][j+2] + 0.5
    //         = 10(4i+j+1) + 68 + 0.5
    assert_bits(&got, &[78.5, 88.5, 118.5, 128.5]);
}

#[test]
fn conv_1d_with_stride_and_asymmetric_pads() {
    let x = f32t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
    let w = f32t(&[1, 1, 2], &[1., 2.]);
    let n = node(
        OpKind::Conv,
        2,
        &[("pads", ints(&[1, 0])), ("strides", ints(&[2]))],
    );
    let (shape, got) = run_f32(&n, &[x, w]);
    assert_eq!(shape, vec![1, 1, 3]);
    // Taps at 2o-1 and 2o: 0*1 + 1*2, 2 + 2*3, 4 + 2*5.
    assert_bits(&got, &[2., 8., 14.]);
}

#[test]
fn conv_groups() {
    // Two groups of two input channels and two output channels each.
    let x = f32t(&[1, 4, 1, 1], &[1., 2., 3., 4.]);
    let w = f32t(&[4, 2, 1, 1], &[1., 1., 1., -1., 1., 1., 2., 0.]);
    let n = node(OpKind::Conv, 2, &[("group", Attr::Int(2))]);
    let (shape, got) = run_f32(&n, &[x, w]);
    assert_eq!(shape, vec![1, 4, 1, 1]);
    // group 0 sees [1,2]: 1+2, 1-2; group 1 sees [3,4]: 3+4, 2*3.
    assert_bits(&got, &[3., -1., 7., 6.]);
}

#[test]
fn conv_depthwise_same_upper() {
    let x = f32t(&[1, 3, 1, 3], &iota(9));
    let w = f32t(&[3, 1, 1, 2], &[1., 1., 1., -1., 0., 2.]);
    let n = node(
        OpKind::Conv,
        2,
        &[
            ("group", Attr::Int(3)),
            ("auto_pad", Attr::Str("SAME_UPPER".into())),
        ],
    );
    let (shape, got) = run_f32(&n, &[x, w]);
    assert_eq!(shape, vec![1, 3, 1, 3]);
    // SAME_UPPER pads the end by 1: [1+2, 2+3, 3+0], [4-5, 5-6, 6-0], [2*8, 2*9, 0].
    assert_bits(&got, &[3., 5., 3., -1., -1., 6., 16., 18., 0.]);
    // SAME_LOWER pads the start instead: [0+1, 1+2, 2+3] for channel 0.
    let n = node(
        OpKind::Conv,
        2,
        &[
            ("group", Attr::Int(3)),
            ("auto_pad", Attr::Str("SAME_LOWER".into())),
        ],
    );
    let w = f32t(&[3, 1, 1, 2], &[1., 1., 0., 0., 0., 0.]);
    let (_, got) = run_f32(&n, &[f32t(&[1, 3, 1, 3], &iota(9)), w]);
    assert_bits(&got, &[1., 3., 5., 0., 0., 0., 0., 0., 0.]);
}

/// An independent naive Conv: pad the input into an explicit zero-filled array first,
/// then slide the dilated kernel over it (no bounds tests in the inner loop).
#[allow(clippy::too_many_arguments)]
fn naive_conv2d(
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    wt: &[f32],
    [m, kh, kw]: [usize; 3],
    group: usize,
    [sh, sw]: [usize; 2],
    [dh, dw]: [usize; 2],
    [pt, pl, pb, pr]: [usize; 4],
    bias: &[f32],
) -> (Vec<usize>, Vec<f32>) {
    let (ph, pw) = (h + pt + pb, w + pl + pr);
    let mut padded = vec![0f64; n * c * ph * pw];
    for b in 0..n {
        for ch in 0..c {
            for i in 0..h {
                for j in 0..w {
                    padded[((b * c + ch) * ph + i + pt) * pw + j + pl] =
                        x[((b * c + ch) * h + i) * w + j] as f64;
                }
            }
        }
    }
    let oh = (ph - (dh * (kh - 1) + 1)) / sh + 1;
    let ow = (pw - (dw * (kw - 1) + 1)) / sw + 1;
    let cg = c / group;
    let mg = m / group;
    let mut y = Vec::new();
    for b in 0..n {
        for oc in 0..m {
            let g = oc / mg;
            for i in 0..oh {
                for j in 0..ow {
                    let mut s = bias[oc] as f64;
                    for ic in 0..cg {
                        for u in 0..kh {
                            for v in 0..kw {
                                let xi = padded[((b * c + g * cg + ic) * ph + i * sh + u * dh)
                                    * pw
                                    + j * sw
                                    + v * dw];
                                s += xi * wt[((oc * cg + ic) * kh + u) * kw + v] as f64;
                            }
                        }
                    }
                    y.push(s as f32);
                }
            }
        }
    }
    (vec![n, m, oh, ow], y)
}

/// Deterministic pseudo-random values in [-1, 1).
fn lcg(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn conv_matches_naive_formula_with_everything() {
    let (n, c, h, w) = (2, 4, 5, 6);
    let (m, kh, kw, group) = (6, 3, 2, 2);
    let x = lcg(n * c * h * w, 1);
    let wt = lcg(m * (c / group) * kh * kw, 2);
    let bias = lcg(m, 3);
    let attrs = [
        ("group", Attr::Int(group as i64)),
        ("strides", ints(&[2, 1])),
        ("dilations", ints(&[1, 2])),
        ("pads", ints(&[1, 0, 2, 1])),
    ];
    let (shape, got) = run_f32(
        &node(OpKind::Conv, 3, &attrs),
        &[
            f32t(&[n, c, h, w], &x),
            f32t(&[m, c / group, kh, kw], &wt),
            f32t(&[m], &bias),
        ],
    );
    let (want_shape, want) = naive_conv2d(
        &x,
        [n, c, h, w],
        &wt,
        [m, kh, kw],
        group,
        [2, 1],
        [1, 2],
        [1, 0, 2, 1],
        &bias,
    );
    assert_eq!(shape, want_shape);
    assert_eq!(shape, vec![2, 6, 3, 5]);
    assert_close(&got, &want, 1e-6);
}

#[test]
fn conv_empty_operands() {
    // Batch 0.
    let (shape, got) = run_f32(
        &node(OpKind::Conv, 2, &[]),
        &[f32t(&[0, 1, 3, 3], &[]), f32t(&[2, 1, 2, 2], &[1.; 8])],
    );
    assert_eq!(shape, vec![0, 2, 2, 2]);
    assert!(got.is_empty());
    // No input channels: every output is its bias.
    let (shape, got) = run_f32(
        &node(OpKind::Conv, 3, &[]),
        &[
            f32t(&[1, 0, 2, 2], &[]),
            f32t(&[2, 0, 1, 1], &[]),
            f32t(&[2], &[5., 6.]),
        ],
    );
    assert_eq!(shape, vec![1, 2, 2, 2]);
    assert_bits(&got, &[5., 5., 5., 5., 6., 6., 6., 6.]);
    // An empty spatial axis made non-empty by padding reads only zeros.
    let n = node(OpKind::Conv, 3, &[("pads", ints(&[1, 1]))]);
    let (shape, got) = run_f32(
        &n,
        &[
            f32t(&[1, 1, 0], &[]),
            f32t(&[1, 1, 1], &[3.]),
            f32t(&[1], &[-1.]),
        ],
    );
    assert_eq!(shape, vec![1, 1, 2]);
    assert_bits(&got, &[-1., -1.]);
}

#[test]
fn conv_f16() {
    let x = f16t(&[1, 1, 3], &[1., 2., 3.]);
    let w = f16t(&[1, 1, 2], &[0.5, 0.25]);
    let out = run(&node(OpKind::Conv, 2, &[]), &[x, w]).unwrap();
    assert_eq!(out.shape, vec![1, 1, 2]);
    assert_eq!(f16_values(&out), vec![1., 1.75]);
}
