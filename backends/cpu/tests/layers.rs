//! Pooling, layout ops, MatMul, Gemm and fused chains against naive implementations
//! written here, through the delegate lifecycle, with SIMD and portable kernels.

mod common;

use baton_delegate_api::ir::{Attr, OpKind};
use common::case::{indices, offset, Case};
use common::wide;

/// A pooling case: kernel, strides, dilations (empty: all 1), pads (begin..., end...),
/// ceil mode, include pad.
struct Pool<'a> {
    kernel: &'a [usize],
    strides: &'a [usize],
    dilations: &'a [usize],
    pads: &'a [usize],
    ceil: bool,
    include_pad: bool,
}

/// Taps on the input are pooled; with `include_pad` the divisor counts the taps inside the
/// padded input (a `ceil_mode` window may reach past it: those taps never count).
fn pool_naive(max: bool, x: &[f32], shape: &[usize], p: &Pool<'_>, out: &[usize]) -> Vec<f64> {
    let sp = shape.len() - 2;
    let dil = |d: usize| p.dilations.get(d).copied().unwrap_or(1);
    indices(out)
        .iter()
        .map(|o| {
            let (mut best, mut sum, mut count, mut padded) =
                (f64::NEG_INFINITY, 0f64, 0usize, 0usize);
            for k in indices(p.kernel) {
                let pos: Vec<isize> = (0..sp)
                    .map(|d| {
                        (o[2 + d] * p.strides[d] + k[d] * dil(d)) as isize - p.pads[d] as isize
                    })
                    .collect();
                let beyond = (0..sp).any(|d| {
                    pos[d] < -(p.pads[d] as isize)
                        || pos[d] >= (shape[2 + d] + p.pads[sp + d]) as isize
                });
                if !beyond {
                    padded += 1;
                }
                if pos
                    .iter()
                    .zip(&shape[2..])
                    .any(|(&q, &n)| q < 0 || q >= n as isize)
                {
                    continue;
                }
                let mut idx = vec![o[0], o[1]];
                idx.extend(pos.iter().map(|&q| q as usize));
                let v = x[offset(shape, &idx)] as f64;
                best = if best.is_nan() || v.is_nan() {
                    f64::NAN
                } else {
                    best.max(v)
                };
                sum += v;
                count += 1;
            }
            if max {
                best
            } else if p.include_pad {
                sum / padded as f64
            } else {
                sum / count as f64
            }
        })
        .collect()
}

#[test]
fn max_and_average_pooling() {
    let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
    let cases: &[(&[usize], Pool<'_>)] = &[
        (
            &[1, 2, 6, 7],
            Pool {
                kernel: &[2, 2],
                dilations: &[],
                strides: &[2, 2],
                pads: &[0, 0, 0, 0],
                ceil: false,
                include_pad: false,
            },
        ),
        (
            &[2, 3, 7, 5],
            Pool {
                kernel: &[3, 3],
                dilations: &[],
                strides: &[2, 1],
                pads: &[1, 1, 1, 1],
                ceil: false,
                include_pad: false,
            },
        ),
        (
            &[2, 3, 7, 5],
            Pool {
                kernel: &[3, 3],
                dilations: &[],
                strides: &[2, 1],
                pads: &[1, 2, 2, 0],
                ceil: false,
                include_pad: true,
            },
        ),
        (
            &[1, 2, 7, 8],
            Pool {
                kernel: &[2, 3],
                dilations: &[],
                strides: &[2, 2],
                pads: &[0, 1, 0, 0],
                ceil: true,
                include_pad: false,
            },
        ),
        (
            &[1, 3, 11],
            Pool {
                kernel: &[4],
                dilations: &[],
                strides: &[3],
                pads: &[1, 2],
                ceil: true,
                include_pad: false,
            },
        ),
        (
            &[1, 2, 4, 5, 6],
            Pool {
                kernel: &[2, 2, 3],
                dilations: &[],
                strides: &[1, 2, 2],
                pads: &[1, 0, 1, 0, 1, 1],
                ceil: false,
                include_pad: false,
            },
        ),
        (
            &[0, 2, 4, 4],
            Pool {
                kernel: &[2, 2],
                dilations: &[],
                strides: &[1, 1],
                pads: &[0, 0, 0, 0],
                ceil: false,
                include_pad: false,
            },
        ),
        (
            &[1, 1, 1, 1],
            Pool {
                kernel: &[1, 1],
                dilations: &[],
                strides: &[1, 1],
                pads: &[0, 0, 0, 0],
                ceil: false,
                include_pad: false,
            },
        ),
        // Dilated windows (1-D to 3-D), and ceil_mode with count_include_pad: the last
        // window reaches past the padded input, whose taps do not count.
        (
            &[1, 2, 9, 8],
            Pool {
                kernel: &[3, 2],
                dilations: &[2, 3],
                strides: &[2, 1],
                pads: &[1, 0, 2, 1],
                ceil: false,
                include_pad: true,
            },
        ),
        (
            &[2, 1, 10],
            Pool {
                kernel: &[3],
                dilations: &[3],
                strides: &[2],
                pads: &[2, 1],
                ceil: true,
                include_pad: false,
            },
        ),
        (
            &[1, 1, 5, 6, 7],
            Pool {
                kernel: &[2, 2, 2],
                dilations: &[2, 1, 3],
                strides: &[1, 2, 2],
                pads: &[0, 1, 1, 1, 0, 2],
                ceil: true,
                include_pad: true,
            },
        ),
        (
            &[1, 3, 7, 6],
            Pool {
                kernel: &[3, 3],
                dilations: &[],
                strides: &[2, 2],
                pads: &[1, 1, 1, 1],
                ceil: true,
                include_pad: true,
            },
        ),
    ];
    for (i, (shape, p)) in cases.iter().enumerate() {
        for max in [true, false] {
            let mut c = Case::new(i as u64);
            let n: usize = shape.iter().product();
            let mut v: Vec<f32> = c.rng.vec(n).into_iter().map(|x| x * 1e30).collect();
            if max && n > 5 {
                v[n / 2] = f32::NAN;
            }
            let (x, xv) = c.input_values(shape, v);
            let mut attrs = vec![
                ("kernel_shape", ints(p.kernel)),
                ("strides", ints(p.strides)),
                ("pads", ints(p.pads)),
                ("ceil_mode", Attr::Int(p.ceil as i64)),
            ];
            if !p.dilations.is_empty() {
                attrs.push(("dilations", ints(p.dilations)));
            }
            let op = if max {
                OpKind::MaxPool
            } else {
                attrs.push(("count_include_pad", Attr::Int(p.include_pad as i64)));
                OpKind::AveragePool
            };
            let y = c.node(op, &[x], &attrs);
            let done = c.finish(&[y]);
            let want = pool_naive(max, &xv, shape, p, &done.shape(y));
            done.check(&[want], 1e-5, &format!("{op} case {i}"));
        }
    }
}

#[test]
fn global_average_pool_reshape_flatten() {
    let mut c = Case::new(5);
    let shape = [2, 3, 4, 5];
    let mut v = c.rng.vec(120);
    v[7] = 3e38;
    v[8] = 3e38;
    let (x, xv) = c.input_values(&shape, v);
    let gap = c.node(OpKind::GlobalAveragePool, &[x], &[]);
    let want_gap: Vec<f64> = (0..6)
        .map(|p| {
            xv[p * 20..(p + 1) * 20]
                .iter()
                .map(|&v| v as f64)
                .sum::<f64>()
                / 20.0
        })
        .collect();
    let shape_t = c.g.constant_i64("target", &[3], &[0, -1, 2]);
    let r = c.node(OpKind::Reshape, &[x, shape_t], &[]);
    let r2 = c.node(OpKind::Reshape, &[x], &[("shape", Attr::Ints(vec![4, 30]))]);
    let f = c.node(OpKind::Flatten, &[x], &[("axis", Attr::Int(2))]);
    let f0 = c.node(OpKind::Flatten, &[x], &[("axis", Attr::Int(0))]);
    let all = wide(&xv);
    c.check(
        &[gap, r, r2, f, f0],
        &[want_gap, all.clone(), all.clone(), all.clone(), all],
        1e-5,
        "gap/reshape/flatten",
    );
}

#[test]
fn transpose_and_concat() {
    let shape = [2, 3, 4, 5];
    let perms: &[Option<&[i64]>] = &[
        None,
        Some(&[0, 2, 3, 1]),
        Some(&[3, 1, 0, 2]),
        Some(&[0, 1, 3, 2]),
        Some(&[0, 1, 2, 3]),
    ];
    for (i, perm) in perms.iter().enumerate() {
        let mut c = Case::new(i as u64);
        let (x, xv) = c.input(&shape, 1.0);
        let attrs: Vec<(&str, Attr)> = perm
            .iter()
            .map(|p| ("perm", Attr::Ints(p.to_vec())))
            .collect();
        let y = c.node(OpKind::Transpose, &[x], &attrs);
        let p: Vec<usize> = match perm {
            Some(p) => p.iter().map(|&a| a as usize).collect(),
            None => vec![3, 2, 1, 0],
        };
        let out: Vec<usize> = p.iter().map(|&a| shape[a]).collect();
        let want: Vec<f64> = indices(&out)
            .iter()
            .map(|o| {
                let mut idx = vec![0; 4];
                for (d, &a) in p.iter().enumerate() {
                    idx[a] = o[d];
                }
                xv[offset(&shape, &idx)] as f64
            })
            .collect();
        c.check(&[y], &[want], 0.0, &format!("perm {perm:?}"));
    }
    for axis in [-3i64, 0, 1, 2] {
        let a = if axis < 0 { axis + 3 } else { axis } as usize;
        let shapes: Vec<Vec<usize>> = (0..3)
            .map(|i| {
                let mut s = vec![2, 3, 4];
                s[a] = [1, 0, 3][i];
                s
            })
            .collect();
        let mut c = Case::new(a as u64);
        let (x0, v0) = c.input(&shapes[0], 1.0);
        let (x1, v1) = c.input(&shapes[1], 1.0);
        let (x2, v2) = c.constant(&shapes[2]);
        let y = c.node(
            OpKind::Concat,
            &[x0, x1, x2, x0],
            &[("axis", Attr::Int(axis))],
        );
        let done = c.finish(&[y]);
        let out = done.shape(y);
        let parts = [
            (&shapes[0], &v0),
            (&shapes[1], &v1),
            (&shapes[2], &v2),
            (&shapes[0], &v0),
        ];
        let want: Vec<f64> = indices(&out)
            .iter()
            .map(|o| {
                let mut pos = o[a];
                for (s, v) in parts {
                    if pos < s[a] {
                        let mut idx = o.clone();
                        idx[a] = pos;
                        return v[offset(s, &idx)] as f64;
                    }
                    pos -= s[a];
                }
                unreachable!("index inside the output")
            })
            .collect();
        done.check(&[want], 0.0, &format!("concat axis {axis}"));
    }
}

/// numpy matmul, in f64.
fn matmul_naive(a: &[f32], sa: &[usize], b: &[f32], sb: &[usize]) -> Vec<f64> {
    let a2: Vec<usize> = if sa.len() == 1 {
        vec![1, sa[0]]
    } else {
        sa.to_vec()
    };
    let b2: Vec<usize> = if sb.len() == 1 {
        vec![sb[0], 1]
    } else {
        sb.to_vec()
    };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let (ab, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let rank = ab.len().max(bb.len());
    let batch: Vec<usize> = (0..rank)
        .map(|i| {
            let get = |s: &[usize]| {
                if i + s.len() >= rank {
                    s[i + s.len() - rank]
                } else {
                    1
                }
            };
            get(ab).max(get(bb))
        })
        .collect();
    let mut out = Vec::new();
    for bi in indices(&batch) {
        let (oa, ob) = (offset(ab, &bi) * m * k, offset(bb, &bi) * k * n);
        for i in 0..m {
            for j in 0..n {
                out.push(
                    (0..k)
                        .map(|p| a[oa + i * k + p] as f64 * b[ob + p * n + j] as f64)
                        .sum(),
                );
            }
        }
    }
    out
}

#[test]
fn matmul_batched_broadcast_and_vectors() {
    let shapes: &[(&[usize], &[usize])] = &[
        (&[3, 4], &[4, 5]),
        (&[2, 3, 4], &[4, 5]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[2, 1, 3, 4], &[3, 4, 5]),
        (&[3, 4], &[2, 4, 5]),
        (&[4], &[4, 5]),
        (&[2, 3, 4], &[4]),
        (&[4], &[4]),
        (&[2, 0, 4], &[4, 3]),
        (&[2, 3, 0], &[0, 3]),
        (&[17, 33], &[33, 65]),
    ];
    for (i, &(sa, sb)) in shapes.iter().enumerate() {
        for const_b in [true, false] {
            let mut c = Case::new(i as u64);
            let (a, av) = c.input(sa, 1.0);
            let (b, bv) = if const_b {
                c.constant(sb)
            } else {
                c.input(sb, 1.0)
            };
            let y = c.node(OpKind::MatMul, &[a, b], &[]);
            let want = matmul_naive(&av, sa, &bv, sb);
            c.check(
                &[y],
                &[want],
                1e-5,
                &format!("{sa:?} x {sb:?} const_b={const_b}"),
            );
        }
    }
}

#[test]
fn gemm_attributes() {
    for (i, (ta, tb, alpha, beta, c_shape)) in [
        (0, 0, 1.0, 1.0, Some(vec![5])),
        (1, 0, 0.5, 2.0, Some(vec![3, 5])),
        (0, 1, -1.0, 0.0, Some(vec![3, 1])),
        (1, 1, 2.0, -1.0, Some(vec![1, 5])),
        (1, 1, 1.0, 1.0, Some(vec![])),
        (0, 0, 1.5, 1.0, None),
    ]
    .into_iter()
    .enumerate()
    {
        for const_b in [true, false] {
            let (m, k, n) = (3, 4, 5);
            let mut c = Case::new(i as u64);
            let sa = if ta == 1 { vec![k, m] } else { vec![m, k] };
            let sb = if tb == 1 { vec![n, k] } else { vec![k, n] };
            let (a, av) = c.input(&sa, 1.0);
            let (b, bv) = if const_b {
                c.constant(&sb)
            } else {
                c.input(&sb, 1.0)
            };
            let mut ins = vec![a, b];
            let mut cv = vec![];
            if let Some(s) = &c_shape {
                let (ct, v) = c.input(s, 1.0);
                ins.push(ct);
                cv = v;
            }
            let attrs = [
                ("transA", Attr::Int(ta)),
                ("transB", Attr::Int(tb)),
                ("alpha", Attr::Float(alpha)),
                ("beta", Attr::Float(beta)),
            ];
            let y = c.node(OpKind::Gemm, &ins, &attrs);
            let mut want = vec![0f64; m * n];
            for r in 0..m {
                for col in 0..n {
                    let dot: f64 = (0..k)
                        .map(|p| {
                            let x = if ta == 1 {
                                av[p * m + r]
                            } else {
                                av[r * k + p]
                            };
                            let w = if tb == 1 {
                                bv[col * k + p]
                            } else {
                                bv[p * n + col]
                            };
                            x as f64 * w as f64
                        })
                        .sum();
                    let cval = c_shape
                        .as_ref()
                        .map_or(0.0, |s| cv[offset(s, &[r, col])] as f64);
                    want[r * n + col] = alpha as f64 * dot + beta as f64 * cval;
                }
            }
            c.check(
                &[y],
                &[want],
                1e-5,
                &format!("gemm case {i} const_b={const_b}"),
            );
        }
    }
}

#[test]
fn fused_chains_match_unfused_semantics() {
    // MatMul → Add(const [N]) → Clip, batched (folded into one GEMM).
    let mut c = Case::new(1);
    let (a, av) = c.input(&[2, 3, 4], 1.0);
    let (b, bv) = c.constant(&[4, 5]);
    let (bias, biasv) = c.constant(&[5]);
    let mm = c.node(OpKind::MatMul, &[a, b], &[]);
    let add = c.node(OpKind::Add, &[bias, mm], &[]);
    let clip = c.node(
        OpKind::Clip,
        &[add],
        &[("min", Attr::Float(-0.5)), ("max", Attr::Float(0.5))],
    );
    let want: Vec<f64> = matmul_naive(&av, &[2, 3, 4], &bv, &[4, 5])
        .iter()
        .enumerate()
        .map(|(i, v)| (v + biasv[i % 5] as f64).clamp(-0.5, 0.5))
        .collect();
    c.check(&[clip], &[want], 1e-5, "matmul+add+clip");

    // MatMul → Add(const [M, N]) → Relu, batched (per-row operand: not folded).
    let mut c = Case::new(2);
    let (a, av) = c.input(&[2, 3, 4], 1.0);
    let (b, bv) = c.input(&[4, 5], 1.0);
    let (res, resv) = c.constant(&[3, 5]);
    let mm = c.node(OpKind::MatMul, &[a, b], &[]);
    let add = c.node(OpKind::Add, &[mm, res], &[]);
    let relu = c.node(OpKind::Relu, &[add], &[]);
    let want: Vec<f64> = matmul_naive(&av, &[2, 3, 4], &bv, &[4, 5])
        .iter()
        .enumerate()
        .map(|(i, v)| (v + resv[i % 15] as f64).max(0.0))
        .collect();
    c.check(&[relu], &[want], 1e-5, "matmul+residual+relu");

    // Conv → Add(const [C, 1, 1]) → Clip; the Add's output is also a subgraph output, so
    // only Conv+Add fuse and the Clip runs alone.
    let mut c = Case::new(3);
    let (x, xv) = c.input(&[1, 2, 3, 3], 1.0);
    let (w, wv) = c.constant(&[4, 2, 1, 1]);
    let (cb, cbv) = c.constant(&[4, 1, 1]);
    let conv = c.node(OpKind::Conv, &[x, w], &[]);
    let add = c.node(OpKind::Add, &[conv, cb], &[]);
    let clip = c.node(
        OpKind::Clip,
        &[add],
        &[("min", Attr::Float(0.0)), ("max", Attr::Float(0.3))],
    );
    let added: Vec<f64> = (0..36)
        .map(|i| {
            let (oc, p) = (i / 9, i % 9);
            (0..2)
                .map(|ci| xv[ci * 9 + p] as f64 * wv[oc * 2 + ci] as f64)
                .sum::<f64>()
                + cbv[oc] as f64
        })
        .collect();
    let clipped = added.iter().map(|v| v.clamp(0.0, 0.3)).collect();
    c.check(&[clip, add], &[clipped, added], 1e-5, "conv+add, clip");

    // Gemm → Relu where the Gemm output is read twice: nothing fuses.
    let mut c = Case::new(4);
    let (a, av) = c.input(&[2, 3], 1.0);
    let (b, bv) = c.constant(&[3, 2]);
    let g = c.node(OpKind::Gemm, &[a, b], &[]);
    let relu = c.node(OpKind::Relu, &[g], &[]);
    let sum = c.node(OpKind::Add, &[g, relu], &[]);
    let mm = matmul_naive(&av, &[2, 3], &bv, &[3, 2]);
    let want = mm.iter().map(|v| v + v.max(0.0)).collect();
    c.check(&[sum], &[want], 1e-5, "shared intermediate");
}

/// A direct NCHW convolution in f64 (square stride and padding), for the chain test.
#[allow(clippy::too_many_arguments)]
fn conv_naive(
    x: &[f64],
    [c, h, w]: [usize; 3],
    wt: &[f32],
    bias: Option<&[f32]>,
    (m, k, group): (usize, usize, usize),
    (stride, pad): (usize, usize),
) -> (Vec<f64>, [usize; 3]) {
    let (oh, ow) = (
        (h + 2 * pad - k) / stride + 1,
        (w + 2 * pad - k) / stride + 1,
    );
    let (cg, mg) = (c / group, m / group);
    let mut out = vec![0f64; m * oh * ow];
    for oc in 0..m {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut acc = bias.map_or(0.0, |b| b[oc] as f64);
                for ci in 0..cg {
                    let ic = (oc / mg) * cg + ci;
                    for ky in 0..k {
                        for kx in 0..k {
                            let (iy, ix) = (oy * stride + ky, ox * stride + kx);
                            if iy < pad || ix < pad || iy - pad >= h || ix - pad >= w {
                                continue;
                            }
                            let v = x[(ic * h + iy - pad) * w + ix - pad];
                            acc += v * wt[((oc * cg + ci) * k + ky) * k + kx] as f64;
                        }
                    }
                }
                out[(oc * oh + oy) * ow + ox] = acc;
            }
        }
    }
    (out, [m, oh, ow])
}

/// A chain the executable holds channels-last from the first convolution to the mean:
/// conv+bias+Relu, a pointwise conv, a residual Add of the two (layout-blind), a strided
/// depthwise conv+Clip and a spatial ReduceMean; a pointwise conv of the residual sum is
/// also a subgraph output, so it converts back to NCHW.
#[test]
fn channels_last_chains_match_naive() {
    let pads = |p: i64| ("pads", Attr::Ints(vec![p; 4]));
    let mut c = Case::new(11);
    let (x, xv) = c.input(&[1, 3, 9, 9], 1.0);
    let (w1, w1v) = c.constant(&[8, 3, 3, 3]);
    let (b1, b1v) = c.constant(&[8]);
    let (w2, w2v) = c.constant(&[8, 8, 1, 1]);
    let (wd, wdv) = c.constant(&[8, 1, 3, 3]);
    let (w3, w3v) = c.constant(&[4, 8, 1, 1]);
    let c1 = c.node(OpKind::Conv, &[x, w1, b1], &[pads(1)]);
    let r1 = c.node(OpKind::Relu, &[c1], &[]);
    let c2 = c.node(OpKind::Conv, &[r1, w2], &[]);
    let sum = c.node(OpKind::Add, &[c2, r1], &[]);
    let strides = ("strides", Attr::Ints(vec![2, 2]));
    let dw = c.node(
        OpKind::Conv,
        &[sum, wd],
        &[pads(1), strides, ("group", Attr::Int(8))],
    );
    let clip = c.node(
        OpKind::Clip,
        &[dw],
        &[("min", Attr::Float(0.0)), ("max", Attr::Float(0.5))],
    );
    let mean = c.node(
        OpKind::ReduceMean,
        &[clip],
        &[("axes", Attr::Ints(vec![2, 3]))],
    );
    let side = c.node(OpKind::Conv, &[sum, w3], &[]);

    let xv = wide(&xv);
    let (c1v, s1) = conv_naive(&xv, [3, 9, 9], &w1v, Some(&b1v), (8, 3, 1), (1, 1));
    let r1v: Vec<f64> = c1v.iter().map(|v| v.max(0.0)).collect();
    let (c2v, _) = conv_naive(&r1v, s1, &w2v, None, (8, 1, 1), (1, 0));
    let sumv: Vec<f64> = c2v.iter().zip(&r1v).map(|(a, b)| a + b).collect();
    let (dwv, s2) = conv_naive(&sumv, s1, &wdv, None, (8, 3, 8), (2, 1));
    let plane = s2[1] * s2[2];
    let meanv: Vec<f64> = dwv
        .chunks_exact(plane)
        .map(|p| p.iter().map(|v| v.clamp(0.0, 0.5)).sum::<f64>() / plane as f64)
        .collect();
    let (sidev, _) = conv_naive(&sumv, s1, &w3v, None, (4, 1, 1), (1, 0));
    c.check(&[mean, side], &[meanv, sidev], 1e-5, "channels-last chain");
}

/// RNN with `sequence_lens` as a run-time input: an entry's steps past its length are
/// zero in `Y`, `Y_h` is its last step, and a length outside `1..=seq` is an error naming
/// the node, not a panic. Worked by hand: W 0.5, R 1, no bias, Relu, X = 1, 2; with length
/// 1 only `H1 = relu(0.5) = 0.5` runs.
#[test]
fn rnn_run_time_sequence_lengths() {
    use baton_delegate_api::testing::{views, Hosted};
    use baton_delegate_api::{Constants, DType, Delegate, Executable, GraphBuilder, Tensor};
    let mut g = GraphBuilder::new("rnn_lens");
    let x = g.input_fixed("x", DType::F32, &[2, 1, 1]);
    let lens = g.input_fixed("lens", DType::I32, &[1]);
    let w = g.constant_f32("w", &[1, 1, 1], &[0.5]);
    let r = g.constant_f32("r", &[1, 1, 1], &[1.0]);
    let b = g.constant_f32("b", &[0], &[]);
    let relu = ("activations", Attr::Str("Relu".into()));
    let outs = g
        .named_node_outputs("rnn", OpKind::RNN, &[x, w, r, b, lens], &[relu], 2)
        .unwrap();
    for &t in &outs {
        g.output(t);
    }
    let graph = g.finish().unwrap();
    let d = common::delegate(true);
    let h = Hosted::new(&graph);
    let consts = h.tensors();
    let v = views(&consts);
    let blob = d
        .compile(0, &h.graph, Constants::new(&h.graph, &v))
        .unwrap();
    let mut exec = d.init(0, &blob, &v).unwrap();
    let xv = Tensor::from_f32(&[2, 1, 1], &[1.0, 2.0]);
    let mut run = |len: i32| {
        let lv = Tensor::from_bytes(DType::I32, &[1], &len.to_le_bytes());
        let mut y = Tensor::zeros(DType::F32, &[2, 1, 1, 1]);
        let mut y_h = Tensor::zeros(DType::F32, &[1, 1, 1]);
        let r = exec.execute(&[xv.view(), lv.view()], &mut [y.view_mut(), y_h.view_mut()]);
        r.map(|_| (y.values::<f32>().to_vec(), y_h.values::<f32>().to_vec()))
    };
    // Full length: H2 = relu(1.0 + 0.5) = 1.5.
    assert_eq!(run(2).unwrap(), (vec![0.5, 1.5], vec![1.5]));
    assert_eq!(run(1).unwrap(), (vec![0.5, 0.0], vec![0.5]));
    let err = run(3).unwrap_err().to_string();
    assert!(
        err.contains("rnn") && err.contains("sequence_lens"),
        "{err}"
    );
}

#[test]
fn batch_normalization_with_statistics_given_at_run_time() {
    // x [1, 2, 2] = [[1, 2], [3, 4]], epsilon 1. Channel 0: scale 2, var 3, so
    // a = 2 / sqrt(4) = 1, and bias 0, mean 1: b = -1, giving [0, 1]. Channel 1: scale 1,
    // var 0: a = 1, bias 1, mean 3: b = -2, giving [1, 2].
    use baton_delegate_api::ir::{DType, GraphBuilder};
    use baton_delegate_api::testing::{run, supports};
    use baton_delegate_api::{Support, Tensor};
    let mut g = GraphBuilder::new("bn");
    let x = g.input_fixed("x", DType::F32, &[1, 2, 2]);
    let stats: Vec<_> = ["scale", "bias", "mean", "var"]
        .iter()
        .map(|n| g.input_fixed(n, DType::F32, &[2]))
        .collect();
    let y = g
        .node(
            OpKind::BatchNormalization,
            &[x, stats[0], stats[1], stats[2], stats[3]],
            &[("epsilon", Attr::Float(1.0))],
        )
        .unwrap();
    g.output(y);
    let g = g.finish().unwrap();
    for simd in [true, false] {
        let d = common::delegate(simd);
        assert!(supports(&d, &g).iter().all(|s| *s == Support::Yes));
        let inputs = [
            Tensor::from_f32(&[1, 2, 2], &[1., 2., 3., 4.]),
            Tensor::from_f32(&[2], &[2., 1.]),
            Tensor::from_f32(&[2], &[0., 1.]),
            Tensor::from_f32(&[2], &[1., 3.]),
            Tensor::from_f32(&[2], &[3., 0.]),
        ];
        let out = run(&d, &g, &inputs).unwrap();
        assert_eq!(out[0].f32s(), [0., 1., 1., 2.], "simd {simd}");
    }
}

#[test]
fn trilinear_resize_of_a_linear_volume_is_exact() {
    // x[z][y][x] = 4z + 2y + x over a 2 x 2 x 2 volume, upsampled x2 on all three axes
    // (asymmetric): output index k samples input coordinate k / 2, clamped to the last
    // element, so coordinate c(k) = 0, 0.5, 1, 1; a linear function is interpolated
    // exactly, giving 4 c(z) + 2 c(y) + c(x).
    use baton_delegate_api::ir::{DType, GraphBuilder};
    use baton_delegate_api::testing::{run, supports};
    use baton_delegate_api::{Support, Tensor};
    let mut g = GraphBuilder::new("trilinear");
    let x = g.input_fixed("x", DType::F32, &[1, 1, 2, 2, 2]);
    let attrs = [
        ("scales", Attr::Floats(vec![1., 1., 2., 2., 2.])),
        ("mode", Attr::Str("linear".into())),
        (
            "coordinate_transformation_mode",
            Attr::Str("asymmetric".into()),
        ),
    ];
    let y = g.node(OpKind::Resize, &[x], &attrs).unwrap();
    g.output(y);
    let g = g.finish().unwrap();
    let d = common::delegate(true);
    assert!(supports(&d, &g).iter().all(|s| *s == Support::Yes));
    let xv: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let out = run(&d, &g, &[Tensor::from_f32(&[1, 1, 2, 2, 2], &xv)]).unwrap();
    let c = [0.0f32, 0.5, 1.0, 1.0];
    let mut want = Vec::new();
    for z in c {
        for y in c {
            for x in c {
                want.push(4.0 * z + 2.0 * y + x);
            }
        }
    }
    assert_eq!(out[0].f32s(), &want[..]);
}

#[test]
fn resize_keeping_the_aspect_ratio_by_hand() {
    // x = [[1, 2, 4], [8, 16, 32]] resized (linear, half_pixel) on its last two axes with
    // sizes and keep_aspect_ratio_policy: not_larger to sizes [5, 7] takes the one scale
    // min(5/2, 7/3) = 7/3 on both axes, extents round(2 * 7/3) = 5 and round(3 * 7/3) = 7;
    // not_smaller to [3, 4] takes max(3/2, 4/3) = 3/2, extents [3, 5]. The rows sample
    // with that scale, not out / in (5/2 would give the second row 1.4 where 7/3 gives
    // 1.142857...). Expected values from a numpy model of ONNX's linear resize.
    use baton_delegate_api::ir::{DType, GraphBuilder, TensorData};
    use baton_delegate_api::testing::{assert_close_labelled, run, supports};
    use baton_delegate_api::{Support, Tensor};
    let not_larger: [f64; 35] = [
        1.0,
        1.1428571428571428,
        1.5714285714285714,
        2.0,
        2.8571428571428568,
        3.7142857142857144,
        4.0,
        1.9999999999999996,
        2.285714285714285,
        3.1428571428571423,
        3.999999999999999,
        5.714285714285713,
        7.428571428571427,
        7.999999999999998,
        5.0,
        5.7142857142857135,
        7.857142857142856,
        10.0,
        14.285714285714283,
        18.571428571428573,
        20.0,
        8.0,
        9.142857142857142,
        12.571428571428571,
        16.0,
        22.857142857142854,
        29.714285714285715,
        32.0,
        8.0,
        9.142857142857142,
        12.571428571428571,
        16.0,
        22.857142857142854,
        29.714285714285715,
        32.0,
    ];
    let not_smaller: [f64; 15] = [
        1.0,
        1.5,
        2.3333333333333335,
        3.666666666666667,
        4.0,
        4.5,
        6.75,
        10.5,
        16.5,
        18.0,
        8.0,
        12.0,
        18.666666666666668,
        29.333333333333336,
        32.0,
    ];
    let mut g = GraphBuilder::new("keep_aspect");
    let x = g.input_fixed("x", DType::F32, &[1, 1, 2, 3]);
    let linear = [
        ("mode", Attr::Str("linear".into())),
        ("axes", Attr::Ints(vec![2, 3])),
    ];
    // not_larger with the sizes attribute.
    let mut attrs = linear.to_vec();
    attrs.push(("sizes", Attr::Ints(vec![5, 7])));
    attrs.push(("keep_aspect_ratio_policy", Attr::Str("not_larger".into())));
    let a = g.node(OpKind::Resize, &[x], &attrs).unwrap();
    // not_smaller with a constant sizes operand (roi and scales empty).
    let empty = |g: &mut GraphBuilder, name: &str| {
        g.constant(name, DType::F32, &[0], TensorData::from_bytes(&[]))
    };
    let (roi, scales) = (empty(&mut g, "roi"), empty(&mut g, "scales"));
    let sizes = g.constant(
        "sizes",
        DType::I64,
        &[2],
        TensorData::from_slice(&[3i64, 4]),
    );
    let mut attrs = linear.to_vec();
    attrs.push(("keep_aspect_ratio_policy", Attr::Str("not_smaller".into())));
    let b = g
        .node(OpKind::Resize, &[x, roi, scales, sizes], &attrs)
        .unwrap();
    g.output(a);
    g.output(b);
    let g = g.finish().unwrap();
    let d = common::delegate(true);
    assert!(supports(&d, &g).iter().all(|s| *s == Support::Yes));
    let xv = [1.0f32, 2.0, 4.0, 8.0, 16.0, 32.0];
    let out = run(&d, &g, &[Tensor::from_f32(&[1, 1, 2, 3], &xv)]).unwrap();
    assert_eq!(out[0].shape, [1, 1, 5, 7]);
    assert_eq!(out[1].shape, [1, 1, 3, 5]);
    assert_close_labelled("not_larger", out[0].f32s(), &not_larger, 1e-6, 1e-6);
    assert_close_labelled("not_smaller", out[1].f32s(), &not_smaller, 1e-6, 1e-6);
}

/// A recurrent node whose `clip` is NaN is declined at `supports`, naming the node: the
/// kernels clamp with the bound, which would panic on NaN at run time.
#[test]
fn a_nan_clip_is_declined_naming_the_node() {
    use baton_delegate_api::testing::supports;
    use baton_delegate_api::{DType, GraphBuilder, Support};
    for op in [OpKind::RNN, OpKind::GRU, OpKind::LSTM] {
        let gates = match op {
            OpKind::RNN => 1,
            OpKind::GRU => 3,
            _ => 4,
        };
        let mut g = GraphBuilder::new("nan_clip");
        let x = g.input_fixed("x", DType::F32, &[2, 1, 1]);
        let w = g.constant_f32("w", &[1, gates, 1], &vec![0.5; gates]);
        let r = g.constant_f32("r", &[1, gates, 1], &vec![1.0; gates]);
        let clip = ("clip", Attr::Float(f32::NAN));
        let outs = g
            .named_node_outputs("rec", op, &[x, w, r], &[clip], 2)
            .unwrap();
        for &t in &outs {
            g.output(t);
        }
        let graph = g.finish().unwrap();
        let answers = supports(&common::delegate(true), &graph);
        match &answers[0] {
            Support::No(why) => {
                let why = &why.message;
                assert!(why.contains("rec") && why.contains("clip"), "{why}");
            }
            other => panic!("{op:?} with a NaN clip: {other:?}"),
        }
    }
}
