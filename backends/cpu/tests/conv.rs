//! Convolution through the whole delegate lifecycle against a naive direct convolution
//! written here: grouped, depthwise, dilated, strided, padded, 1-D, pointwise, auto_pad,
//! run-time weights, fused bias/activation; with SIMD kernels and with portable ones.

mod common;

use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind};
use baton_delegate_api::testing::{assert_close_labelled, run, Rng};
use baton_delegate_api::Tensor;
use common::delegate;

/// One convolution case. `spatial` has 1 or 2 axes; `pads` is `[begin..., end...]`.
#[derive(Clone, Debug)]
struct Case {
    batch: usize,
    c: usize,
    m: usize,
    group: usize,
    spatial: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<usize>,
    auto_pad: Option<&'static str>,
    bias: bool,
    runtime_weights: bool,
}

impl Case {
    fn new(c: usize, m: usize, spatial: &[usize], kernel: &[usize]) -> Case {
        let n = spatial.len();
        Case {
            batch: 1,
            c,
            m,
            group: 1,
            spatial: spatial.to_vec(),
            kernel: kernel.to_vec(),
            strides: vec![1; n],
            dilations: vec![1; n],
            pads: vec![0; 2 * n],
            auto_pad: None,
            bias: true,
            runtime_weights: false,
        }
    }

    fn group(mut self, g: usize) -> Case {
        self.group = g;
        self
    }
    fn strides(mut self, s: &[usize]) -> Case {
        self.strides = s.to_vec();
        self
    }
    fn dilations(mut self, d: &[usize]) -> Case {
        self.dilations = d.to_vec();
        self
    }
    fn pads(mut self, p: &[usize]) -> Case {
        self.pads = p.to_vec();
        self
    }
    fn batch(mut self, n: usize) -> Case {
        self.batch = n;
        self
    }
    fn auto_pad(mut self, mode: &'static str) -> Case {
        self.auto_pad = Some(mode);
        self
    }
    fn no_bias(mut self) -> Case {
        self.bias = false;
        self
    }
    fn runtime_weights(mut self) -> Case {
        self.runtime_weights = true;
        self
    }

    fn x_shape(&self) -> Vec<usize> {
        [vec![self.batch, self.c], self.spatial.clone()].concat()
    }
    fn w_shape(&self) -> Vec<usize> {
        [vec![self.m, self.c / self.group], self.kernel.clone()].concat()
    }

    fn attrs(&self) -> Vec<(&'static str, Attr)> {
        let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
        let mut a = vec![
            ("group", Attr::Int(self.group as i64)),
            ("strides", ints(&self.strides)),
            ("dilations", ints(&self.dilations)),
            ("kernel_shape", ints(&self.kernel)),
        ];
        match self.auto_pad {
            Some(mode) => a.push(("auto_pad", Attr::Str(mode.into()))),
            None => a.push(("pads", ints(&self.pads))),
        }
        a
    }
}

/// Pads `(begin, end)` for axis `i` of `out` outputs, computed here from the ONNX text.
fn pads_of(case: &Case, i: usize, out: usize) -> (usize, usize) {
    let n = case.spatial.len();
    match case.auto_pad {
        None => (case.pads[i], case.pads[n + i]),
        Some("VALID") => (0, 0),
        Some(mode) => {
            let eff = (case.kernel[i] - 1) * case.dilations[i] + 1;
            let total = ((out - 1) * case.strides[i] + eff).saturating_sub(case.spatial[i]);
            if mode == "SAME_UPPER" {
                (total / 2, total - total / 2)
            } else {
                (total - total / 2, total / 2)
            }
        }
    }
}

/// The direct convolution, in f64, skipping taps that fall in the padding.
fn naive(case: &Case, x: &[f32], w: &[f32], b: Option<&[f32]>, out_spatial: &[usize]) -> Vec<f64> {
    // Treat 1-D as 2-D of height 1.
    let two = |v: &[usize], fill| {
        if v.len() == 2 {
            (v[0], v[1])
        } else {
            (fill, v[0])
        }
    };
    let (h, wd) = two(&case.spatial, 1);
    let (kh, kw) = two(&case.kernel, 1);
    let (sh, sw) = two(&case.strides, 1);
    let (dh, dw) = two(&case.dilations, 1);
    let (oh, ow) = two(out_spatial, 1);
    let n_sp = case.spatial.len();
    let (ph, pw) = if n_sp == 2 {
        (pads_of(case, 0, oh).0, pads_of(case, 1, ow).0)
    } else {
        (0, pads_of(case, 0, ow).0)
    };
    let (cg, mg) = (case.c / case.group, case.m / case.group);
    let mut y = vec![0f64; case.batch * case.m * oh * ow];
    for n in 0..case.batch {
        for oc in 0..case.m {
            let g = oc / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b[oc] as f64);
                    for ci in 0..cg {
                        let ic = g * cg + ci;
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let iy = (oy * sh + ki * dh) as isize - ph as isize;
                                let ix = (ox * sw + kj * dw) as isize - pw as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv =
                                    x[((n * case.c + ic) * h + iy as usize) * wd + ix as usize];
                                let wv = w[((oc * cg + ci) * kh + ki) * kw + kj];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    y[((n * case.m + oc) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    y
}

fn check(case: &Case, seed: u64) {
    let mut rng = Rng::new(seed);
    let xs = case.x_shape();
    let ws = case.w_shape();
    let x = rng.vec(xs.iter().product());
    let w = rng.vec(ws.iter().product());
    let bias = rng.vec(case.m);

    let mut g = GraphBuilder::new("conv");
    let xt = g.input_fixed("x", DType::F32, &xs);
    let mut inputs = vec![Tensor::from_f32(&xs, &x)];
    let wt = if case.runtime_weights {
        inputs.push(Tensor::from_f32(&ws, &w));
        g.input_fixed("w", DType::F32, &ws)
    } else {
        g.constant_f32("w", &ws, &w)
    };
    let mut ins = vec![xt, wt];
    if case.bias {
        ins.push(g.constant_f32("b", &[case.m], &bias));
    }
    let y = g
        .node(OpKind::Conv, &ins, &case.attrs())
        .expect("conv shape");
    g.output(y);
    let graph = g.finish().unwrap();
    let out_shape = graph.tensors[y].static_shape().unwrap();
    let want = naive(
        case,
        &x,
        &w,
        case.bias.then_some(&bias[..]),
        &out_shape[2..],
    );
    for simd in [true, false] {
        let got = run(&delegate(simd), &graph, &inputs).expect("run");
        assert_eq!(got[0].shape, out_shape);
        assert_close_labelled(
            &format!("{case:?} simd={simd}"),
            got[0].f32s(),
            &want,
            1e-5,
            1e-5,
        );
    }
}

#[test]
fn plain_2d() {
    check(&Case::new(3, 4, &[5, 6], &[3, 3]), 1);
    check(&Case::new(1, 1, &[1, 1], &[1, 1]), 2);
    check(&Case::new(3, 5, &[7, 9], &[3, 2]).batch(2).no_bias(), 3);
}

#[test]
fn pointwise() {
    check(&Case::new(16, 24, &[7, 5], &[1, 1]), 4);
    check(&Case::new(5, 3, &[3, 3], &[1, 1]).batch(3), 5);
}

#[test]
fn padded_strided_dilated() {
    check(&Case::new(3, 4, &[9, 8], &[3, 3]).pads(&[1, 1, 1, 1]), 6);
    check(
        &Case::new(2, 3, &[9, 10], &[3, 3])
            .pads(&[2, 0, 1, 3])
            .strides(&[2, 3]),
        7,
    );
    check(
        &Case::new(2, 3, &[11, 12], &[3, 2])
            .dilations(&[2, 3])
            .pads(&[2, 1, 0, 2]),
        8,
    );
    check(
        &Case::new(4, 2, &[8, 8], &[5, 5])
            .pads(&[4, 4, 4, 4])
            .strides(&[3, 3]),
        9,
    );
    // A pointwise kernel with stride or padding goes through im2col.
    check(&Case::new(3, 2, &[5, 5], &[1, 1]).strides(&[2, 2]), 10);
    check(&Case::new(3, 2, &[4, 4], &[1, 1]).pads(&[1, 0, 0, 1]), 11);
}

#[test]
fn grouped() {
    check(
        &Case::new(4, 6, &[6, 5], &[3, 3])
            .group(2)
            .pads(&[1, 1, 1, 1]),
        12,
    );
    check(&Case::new(6, 3, &[5, 5], &[1, 1]).group(3).batch(2), 13);
    check(
        &Case::new(9, 6, &[7, 4], &[2, 3]).group(3).strides(&[2, 1]),
        14,
    );
}

#[test]
fn depthwise() {
    check(
        &Case::new(8, 8, &[7, 7], &[3, 3])
            .group(8)
            .pads(&[1, 1, 1, 1]),
        15,
    );
    check(
        &Case::new(4, 8, &[6, 9], &[3, 3]).group(4).strides(&[2, 2]),
        16,
    );
    check(
        &Case::new(5, 5, &[9, 9], &[3, 3])
            .group(5)
            .dilations(&[2, 2])
            .pads(&[2, 2, 2, 2]),
        17,
    );
    check(
        &Case::new(3, 3, &[5, 5], &[3, 3])
            .group(3)
            .runtime_weights()
            .batch(2),
        18,
    );
}

/// The direct depthwise kernel: rows wider than its 16-column chunk with ragged tails,
/// output heights not a multiple of its 4-row block, strides 2 and 3 (phase planes),
/// asymmetric padding, dilation, a channel multiplier and 1-D.
#[test]
fn depthwise_wide_and_strided() {
    check(
        &Case::new(3, 3, &[13, 37], &[3, 3])
            .group(3)
            .pads(&[1, 1, 1, 1]),
        40,
    );
    check(
        &Case::new(2, 2, &[15, 40], &[3, 3])
            .group(2)
            .strides(&[2, 2])
            .pads(&[1, 1, 1, 1]),
        41,
    );
    check(
        &Case::new(2, 6, &[11, 50], &[5, 4])
            .group(2)
            .strides(&[3, 3])
            .pads(&[2, 0, 1, 3]),
        42,
    );
    check(
        &Case::new(3, 3, &[10, 33], &[3, 3])
            .group(3)
            .dilations(&[2, 3])
            .strides(&[1, 2])
            .pads(&[0, 4, 2, 1]),
        43,
    );
    check(&Case::new(4, 4, &[70], &[7]).group(4).pads(&[3, 3]), 44);
    check(
        &Case::new(2, 2, &[6, 18], &[3, 3])
            .group(2)
            .pads(&[5, 5, 5, 5])
            .no_bias(),
        45,
    );
}

#[test]
fn one_dimensional() {
    check(&Case::new(3, 4, &[17], &[3]), 19);
    check(
        &Case::new(4, 6, &[20], &[5])
            .pads(&[2, 1])
            .strides(&[2])
            .dilations(&[2]),
        20,
    );
    check(&Case::new(4, 4, &[9], &[3]).group(4).pads(&[1, 1]), 21);
    check(&Case::new(4, 2, &[9], &[1]).group(2), 22);
}

#[test]
fn auto_pad() {
    for mode in ["SAME_UPPER", "SAME_LOWER", "VALID"] {
        check(
            &Case::new(2, 3, &[7, 8], &[3, 2])
                .auto_pad(mode)
                .strides(&[2, 3]),
            23,
        );
        check(
            &Case::new(3, 3, &[6, 6], &[4, 4]).auto_pad(mode).group(3),
            24,
        );
        check(&Case::new(2, 2, &[10], &[4]).auto_pad(mode), 25);
    }
}

#[test]
fn runtime_weights() {
    check(
        &Case::new(3, 4, &[5, 6], &[3, 3])
            .runtime_weights()
            .pads(&[1, 1, 1, 1]),
        26,
    );
    check(
        &Case::new(4, 4, &[5, 6], &[1, 1]).runtime_weights().group(2),
        27,
    );
}

#[test]
fn empty_and_degenerate() {
    // No batch, no output channels, and empty input channels (the bias alone).
    check(&Case::new(3, 4, &[5, 5], &[3, 3]).batch(0), 28);
    check(&Case::new(3, 0, &[5, 5], &[3, 3]), 29);
    check(&Case::new(0, 3, &[4, 4], &[3, 3]), 30);
    // The input lies entirely in the padding: zeros plus bias.
    check(&Case::new(2, 2, &[0, 3], &[2, 2]).pads(&[1, 1, 1, 1]), 31);
    // A window larger than the image with enough padding.
    check(&Case::new(2, 3, &[2, 2], &[5, 5]).pads(&[2, 2, 2, 2]), 32);
}

#[test]
fn large_tile_counts() {
    // Enough output channels and pixels for several GEMM blocks.
    check(
        &Case::new(32, 140, &[12, 11], &[3, 3]).pads(&[1, 1, 1, 1]),
        33,
    );
}
