//! Transposes between channels-last and channels-first at the edges of a convolution
//! chain, as models from channels-last frameworks (tf2onnx, Keras) have them: with the
//! chain held NHWC they read and write the same bytes, so they run as views. The same
//! graph with the transposes' neighbours made subgraph outputs (held NCHW, so every
//! transpose runs) must give the same bits, in more steps.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::Rng;
use baton_delegate_api::Tensor;
use common::{constant, delegate, run_counting};

fn perm(p: &[i64]) -> [(&'static str, Attr); 1] {
    [("perm", Attr::Ints(p.to_vec()))]
}

/// `x [1, 6, 5, 3]` (NHWC) -> Transpose to NCHW -> 3x3 conv + Relu -> depthwise 3x3 +
/// Relu -> 1x1 conv -> Transpose to NHWC (an output) and a mean over H and W of it (an
/// output); beside it a 1-D chain `s [1, 7, 4]` -> Transpose -> Conv1d + Relu ->
/// Transpose back. With `expose`, the tensors next to every transpose are outputs too.
fn channels_last_model(expose: bool) -> (Graph, Vec<Tensor>) {
    let mut rng = Rng::new(5);
    let mut b = GraphBuilder::new("tf");
    let xv = rng.vec(6 * 5 * 3);
    let x = b.input_fixed("x", DType::F32, &[1, 6, 5, 3]);
    let pad = || ("pads", Attr::Ints(vec![1; 4]));
    let t0 = b
        .node(OpKind::Transpose, &[x], &perm(&[0, 3, 1, 2]))
        .unwrap();
    let w1 = constant(&mut b, &mut rng, &[8, 3, 3, 3], 0.3);
    let b1 = constant(&mut b, &mut rng, &[8], 1.0);
    let c1 = b.node(OpKind::Conv, &[t0, w1, b1], &[pad()]).unwrap();
    let r1 = b.node(OpKind::Relu, &[c1], &[]).unwrap();
    let wd = constant(&mut b, &mut rng, &[8, 1, 3, 3], 0.3);
    let dw = b
        .node(OpKind::Conv, &[r1, wd], &[pad(), ("group", Attr::Int(8))])
        .unwrap();
    let r2 = b.node(OpKind::Relu, &[dw], &[]).unwrap();
    let w3 = constant(&mut b, &mut rng, &[8, 8, 1, 1], 0.3);
    let c3 = b.node(OpKind::Conv, &[r2, w3], &[]).unwrap();
    let nhwc = b
        .node(OpKind::Transpose, &[c3], &perm(&[0, 2, 3, 1]))
        .unwrap();
    let axes = [("axes", Attr::Ints(vec![1, 2])), ("keepdims", Attr::Int(0))];
    let mean = b.node(OpKind::ReduceMean, &[nhwc], &axes).unwrap();

    let sv = rng.vec(7 * 4);
    let s = b.input_fixed("s", DType::F32, &[1, 7, 4]);
    let u0 = b.node(OpKind::Transpose, &[s], &perm(&[0, 2, 1])).unwrap();
    let wc = constant(&mut b, &mut rng, &[5, 4, 3], 0.3);
    let cc = b
        .node(OpKind::Conv, &[u0, wc], &[("pads", Attr::Ints(vec![1, 1]))])
        .unwrap();
    let rc = b.node(OpKind::Relu, &[cc], &[]).unwrap();
    let u1 = b.node(OpKind::Transpose, &[rc], &perm(&[0, 2, 1])).unwrap();

    let mut outs: Vec<TensorId> = vec![nhwc, mean, u1];
    if expose {
        outs.extend([t0, c3, u0, rc]);
    }
    outs.into_iter().for_each(|t| b.output(t));
    let inputs = vec![
        Tensor::from_f32(&[1, 6, 5, 3], &xv),
        Tensor::from_f32(&[1, 7, 4], &sv),
    ];
    (b.finish().unwrap(), inputs)
}

#[test]
fn transposes_at_channels_last_edges_are_views() {
    let (views, inputs) = channels_last_model(false);
    let (plain, _) = channels_last_model(true);
    for simd in [true, false] {
        let (got, steps) = run_counting(&delegate(simd), &views, &inputs);
        let (want, plain_steps) = run_counting(&delegate(simd), &plain, &inputs);
        common::assert_same_bits(&got, &want, &format!("simd={simd}"));
        // conv+Relu, depthwise+Relu, 1x1 conv, the mean, Conv1d+Relu: no transpose.
        assert_eq!(steps, 5, "simd={simd}");
        // Every transpose runs: two around each chain.
        assert_eq!(plain_steps, 9, "simd={simd}");
    }
}

/// Transposes that are not the channels-last pair (H and W swapped, and the pair's
/// permutation applied to a tensor not held NHWC) are not views: the same graph with
/// every intermediate an output gives the same bits.
#[test]
fn other_transposes_still_move_the_data() {
    let build = |expose: bool| {
        let mut rng = Rng::new(9);
        let mut b = GraphBuilder::new("g");
        let xv = rng.vec(2 * 4 * 3 * 5);
        let x = b.input_fixed("x", DType::F32, &[2, 4, 3, 5]);
        let w = constant(&mut b, &mut rng, &[6, 4, 1, 1], 0.5);
        let c = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let r = b.node(OpKind::Relu, &[c], &[]).unwrap();
        let hw = b
            .node(OpKind::Transpose, &[r], &perm(&[0, 1, 3, 2]))
            .unwrap();
        // The channels-last pair's permutation on the input, which is held as given.
        let last = b
            .node(OpKind::Transpose, &[x], &perm(&[0, 2, 3, 1]))
            .unwrap();
        let first = b
            .node(OpKind::Transpose, &[x], &perm(&[0, 3, 1, 2]))
            .unwrap();
        let flat = b.node(OpKind::Flatten, &[first], &[]).unwrap();
        let mut outs = vec![hw, last, flat];
        if expose {
            outs.extend([c, r, first]);
        }
        outs.into_iter().for_each(|t| b.output(t));
        (
            b.finish().unwrap(),
            vec![Tensor::from_f32(&[2, 4, 3, 5], &xv)],
        )
    };
    let ((g, inputs), (plain, _)) = (build(false), build(true));
    let (got, _) = run_counting(&delegate(true), &g, &inputs);
    let (want, _) = run_counting(&delegate(true), &plain, &inputs);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.shape, w.shape, "output {i}");
        assert_eq!(g.f32s(), w.f32s(), "output {i}");
    }
    // And the input's own transposes are what numpy's would be.
    let x = inputs[0].f32s();
    let at = |n: usize, c: usize, h: usize, w: usize| x[((n * 4 + c) * 3 + h) * 5 + w];
    let mut last = Vec::new();
    for n in 0..2 {
        for h in 0..3 {
            for w in 0..5 {
                for c in 0..4 {
                    last.push(at(n, c, h, w));
                }
            }
        }
    }
    assert_eq!(got[1].f32s(), &last[..]);
}

/// YOLO's SPPF, a ResNet stem and averaging pools, held NHWC through their pools and
/// concatenations: conv -> three 5x5 stride-1 MaxPools in a row -> Concat of the four
/// along the channels -> conv; beside it a 3x3 stride-2 MaxPool of the first conv
/// concatenated along the height with itself, and two AveragePools of it before convs.
/// The same bits as the graph with the pools' results made outputs (held NCHW, so the
/// pools and concatenations run on NCHW planes) in the same number of steps, on 1 and 2
/// threads.
#[test]
fn pools_and_concats_keep_a_conv_chain_channels_last() {
    let build = |expose: bool| {
        let mut rng = Rng::new(8);
        let mut b = GraphBuilder::new("sppf");
        let xv = rng.vec(2 * 4 * 13 * 11);
        let x = b.input_fixed("x", DType::F32, &[2, 4, 13, 11]);
        let w1 = constant(&mut b, &mut rng, &[8, 4, 1, 1], 0.5);
        let c1 = b.node(OpKind::Conv, &[x, w1], &[]).unwrap();
        let pool = |b: &mut GraphBuilder, t: TensorId, k: i64, s: i64| {
            let attrs = [
                ("kernel_shape", Attr::Ints(vec![k, k])),
                ("pads", Attr::Ints(vec![k / 2; 4])),
                ("strides", Attr::Ints(vec![s, s])),
            ];
            b.node(OpKind::MaxPool, &[t], &attrs).unwrap()
        };
        let p1 = pool(&mut b, c1, 5, 1);
        let p2 = pool(&mut b, p1, 5, 1);
        let p3 = pool(&mut b, p2, 5, 1);
        let axis = |a: i64| [("axis", Attr::Int(a))];
        let cat = b.node(OpKind::Concat, &[c1, p1, p2, p3], &axis(1)).unwrap();
        let w2 = constant(&mut b, &mut rng, &[6, 32, 1, 1], 0.3);
        let c2 = b.node(OpKind::Conv, &[cat, w2], &[]).unwrap();
        let stem = pool(&mut b, c1, 3, 2);
        let tall = b.node(OpKind::Concat, &[stem, stem], &axis(2)).unwrap();
        let w3 = constant(&mut b, &mut rng, &[5, 8, 1, 1], 0.3);
        let c3 = b.node(OpKind::Conv, &[tall, w3], &[]).unwrap();
        // A ResNet-vd shortcut's 2x2 stride-2 average (ceil_mode: windows past the end),
        // and an Inception branch's 3x3 one counting its pads, joined to the conv.
        let vd = [
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("strides", Attr::Ints(vec![2, 2])),
            ("ceil_mode", Attr::Int(1)),
        ];
        let a2 = b.node(OpKind::AveragePool, &[c1], &vd).unwrap();
        let branch = [
            ("kernel_shape", Attr::Ints(vec![3, 3])),
            ("pads", Attr::Ints(vec![1; 4])),
            ("count_include_pad", Attr::Int(1)),
        ];
        let a3 = b.node(OpKind::AveragePool, &[c1], &branch).unwrap();
        let join = b.node(OpKind::Concat, &[a3, c1], &axis(1)).unwrap();
        let w4 = constant(&mut b, &mut rng, &[5, 16, 1, 1], 0.3);
        let c4 = b.node(OpKind::Conv, &[join, w4], &[]).unwrap();
        let c5 = b.node(OpKind::Conv, &[a2, w3], &[]).unwrap();
        let mut outs = vec![c2, c3, c4, c5];
        if expose {
            outs.extend([p1, p2, p3, stem, a2, a3]);
        }
        outs.into_iter().for_each(|t| b.output(t));
        (
            b.finish().unwrap(),
            vec![Tensor::from_f32(&[2, 4, 13, 11], &xv)],
        )
    };
    // Five convs, six pools, three concatenations either way.
    matches_exposed(build, (14, 14));
}

/// A YOLO neck's nearest 2x upsampling (asymmetric, floor, as torch exports it) and
/// linear resizes up (half_pixel) and down (align_corners) between convs, held NHWC:
/// the same bits as the graph with the resizes' results made outputs (held NCHW), in the
/// same number of steps, on 1 and 2 threads.
#[test]
fn resizes_keep_a_conv_chain_channels_last() {
    let build = |expose: bool| {
        let mut rng = Rng::new(9);
        let mut b = GraphBuilder::new("neck");
        let xv = rng.vec(2 * 4 * 7 * 9);
        let x = b.input_fixed("x", DType::F32, &[2, 4, 7, 9]);
        let w1 = constant(&mut b, &mut rng, &[24, 4, 1, 1], 0.5);
        let c1 = b.node(OpKind::Conv, &[x, w1], &[]).unwrap();
        let resize = |b: &mut GraphBuilder, mode: &str, coord: &str, s: f32| {
            let attrs = [
                ("mode", Attr::Str(mode.into())),
                ("coordinate_transformation_mode", Attr::Str(coord.into())),
                ("nearest_mode", Attr::Str("floor".into())),
                ("scales", Attr::Floats(vec![1.0, 1.0, s, s])),
            ];
            b.node(OpKind::Resize, &[c1], &attrs).unwrap()
        };
        let up = resize(&mut b, "nearest", "asymmetric", 2.0);
        let lin = resize(&mut b, "linear", "half_pixel", 2.0);
        let down = resize(&mut b, "linear", "align_corners", 0.5);
        let w2 = constant(&mut b, &mut rng, &[5, 24, 1, 1], 0.3);
        let mut outs: Vec<TensorId> = [up, lin, down]
            .iter()
            .map(|&t| b.node(OpKind::Conv, &[t, w2], &[]).unwrap())
            .collect();
        if expose {
            outs.extend([up, lin, down]);
        }
        outs.into_iter().for_each(|t| b.output(t));
        (
            b.finish().unwrap(),
            vec![Tensor::from_f32(&[2, 4, 7, 9], &xv)],
        )
    };
    // Four convs and three resizes either way.
    matches_exposed(build, (7, 7));
}

/// A zero Pad of the spatial axes before a convolution (Keras' ZeroPadding2D before a
/// stride-2 conv, full or depthwise: one row and column after; and one on top of the
/// conv's own pads) joins the convolution's padding and does not run; Pads that cannot
/// (a value of 1, a reflection, one of the channels, one two convolutions read) run, held
/// NHWC between convs. The same bits as the graph with every Pad's result made an output
/// (so none folds, and all run on NCHW), on 1 and 2 threads.
#[test]
fn zero_pads_join_the_convolution_and_other_pads_run_channels_last() {
    let build = |expose: bool| {
        let mut rng = Rng::new(10);
        let mut b = GraphBuilder::new("pads");
        let xv = rng.vec(2 * 4 * 9 * 10);
        let x = b.input_fixed("x", DType::F32, &[2, 4, 9, 10]);
        let w1 = constant(&mut b, &mut rng, &[8, 4, 1, 1], 0.5);
        let c1 = b.node(OpKind::Conv, &[x, w1], &[]).unwrap();
        // A Pad of `c1` by `p`, filling with `value` (the operand) or as `attrs` say.
        let pad = |b: &mut GraphBuilder, p: &[i64], value: Option<f32>, attrs: &[(&str, Attr)]| {
            let mut inputs = vec![c1, b.constant_i64("pads", &[8], p)];
            if let Some(v) = value {
                inputs.push(b.constant_f32("value", &[], &[v]));
            }
            b.node(OpKind::Pad, &inputs, attrs).unwrap()
        };
        let w3 = constant(&mut b, &mut rng, &[6, 8, 3, 3], 0.3);
        let stride2 = [("strides", Attr::Ints(vec![2, 2]))];
        let keras = pad(&mut b, &[0, 0, 0, 0, 0, 0, 1, 1], None, &[]);
        let k1 = b.node(OpKind::Conv, &[keras, w3], &stride2).unwrap();
        let more = pad(&mut b, &[0, 0, 2, 0, 0, 0, 1, 3], Some(0.0), &[]);
        let own = [("pads", Attr::Ints(vec![1, 1, 1, 1]))];
        let k2 = b.node(OpKind::Conv, &[more, w3], &own).unwrap();
        let ones = pad(&mut b, &[0, 0, 1, 1, 0, 0, 1, 1], Some(1.0), &[]);
        let k3 = b.node(OpKind::Conv, &[ones, w3], &[]).unwrap();
        let reflect = [("mode", Attr::Str("reflect".into()))];
        let mirror = pad(&mut b, &[0, 0, 1, 2, 0, 0, 2, 1], None, &reflect);
        let k4 = b.node(OpKind::Conv, &[mirror, w3], &[]).unwrap();
        let w8 = constant(&mut b, &mut rng, &[6, 10, 3, 3], 0.3);
        let chans = pad(&mut b, &[0, 1, 1, 1, 0, 1, 1, 1], None, &[]);
        let k5 = b.node(OpKind::Conv, &[chans, w8], &[]).unwrap();
        let shared = pad(&mut b, &[0, 0, 1, 1, 0, 0, 1, 1], None, &[]);
        let k6 = b.node(OpKind::Conv, &[shared, w3], &[]).unwrap();
        let k7 = b.node(OpKind::Conv, &[shared, w3], &stride2).unwrap();
        // MobileNetV2 from Keras: the pad before each stride-2 depthwise conv.
        let dw_pad = pad(&mut b, &[0, 0, 0, 0, 0, 0, 1, 1], None, &[]);
        let wd = constant(&mut b, &mut rng, &[8, 1, 3, 3], 0.3);
        let dw = [("group", Attr::Int(8)), ("strides", Attr::Ints(vec![2, 2]))];
        let k8 = b.node(OpKind::Conv, &[dw_pad, wd], &dw).unwrap();
        let mut outs = vec![k1, k2, k3, k4, k5, k6, k7, k8];
        if expose {
            outs.extend([keras, more, ones, mirror, chans, shared, dw_pad]);
        }
        outs.into_iter().for_each(|t| b.output(t));
        (
            b.finish().unwrap(),
            vec![Tensor::from_f32(&[2, 4, 9, 10], &xv)],
        )
    };
    // Nine convs; seven Pads exposed, four when three fold.
    matches_exposed(build, (13, 16));
}

/// YOLOv8's C2f (a conv's channels split in two, the second half through a conv, the
/// three concatenated), a Split along the height, and Slices of the channels and of
/// every other row and column (YOLOv5's Focus) between convs, held NHWC: the same bits
/// as the graph with the parts exposed (held NCHW), in the same number of steps.
#[test]
fn slices_and_splits_keep_a_conv_chain_channels_last() {
    let build = |expose: bool| {
        let mut rng = Rng::new(11);
        let mut b = GraphBuilder::new("c2f");
        let xv = rng.vec(2 * 4 * 8 * 10);
        let x = b.input_fixed("x", DType::F32, &[2, 4, 8, 10]);
        let w1 = constant(&mut b, &mut rng, &[16, 4, 1, 1], 0.5);
        let c1 = b.node(OpKind::Conv, &[x, w1], &[]).unwrap();
        let halves = b.constant_i64("halves", &[2], &[8, 8]);
        let axis = |a: i64| [("axis", Attr::Int(a))];
        let parts = b
            .named_node_outputs("halves", OpKind::Split, &[c1, halves], &axis(1), 2)
            .unwrap();
        let w2 = constant(&mut b, &mut rng, &[8, 8, 3, 3], 0.3);
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let c2 = b.node(OpKind::Conv, &[parts[1], w2], &pads).unwrap();
        let cat = b
            .node(OpKind::Concat, &[parts[0], parts[1], c2], &axis(1))
            .unwrap();
        let w3 = constant(&mut b, &mut rng, &[6, 24, 1, 1], 0.3);
        let c3 = b.node(OpKind::Conv, &[cat, w3], &[]).unwrap();
        let rows = b.constant_i64("rows", &[2], &[3, 5]);
        let tall = b
            .named_node_outputs("rows", OpKind::Split, &[c1, rows], &axis(2), 2)
            .unwrap();
        let w4 = constant(&mut b, &mut rng, &[5, 16, 1, 1], 0.3);
        let c4 = b.node(OpKind::Conv, &[tall[1], w4], &[]).unwrap();
        let slice = |b: &mut GraphBuilder, s: &[i64], e: &[i64], a: &[i64], st: &[i64]| {
            let n = s.len();
            let ins = [
                c1,
                b.constant_i64("starts", &[n], s),
                b.constant_i64("ends", &[n], e),
                b.constant_i64("axes", &[n], a),
                b.constant_i64("steps", &[n], st),
            ];
            b.node(OpKind::Slice, &ins, &[]).unwrap()
        };
        let chans = slice(&mut b, &[2], &[11], &[1], &[1]);
        let focus = slice(&mut b, &[1, 0], &[i64::MAX, i64::MAX], &[2, 3], &[2, 2]);
        let w5 = constant(&mut b, &mut rng, &[5, 9, 1, 1], 0.3);
        let c5 = b.node(OpKind::Conv, &[chans, w5], &[]).unwrap();
        let c6 = b.node(OpKind::Conv, &[focus, w4], &[]).unwrap();
        let mut outs = vec![c3, c4, c5, c6];
        if expose {
            outs.extend([parts[0], parts[1], tall[0], tall[1], chans, focus]);
        }
        outs.into_iter().for_each(|t| b.output(t));
        (
            b.finish().unwrap(),
            vec![Tensor::from_f32(&[2, 4, 8, 10], &xv)],
        )
    };
    // Six convs, two Splits, a Concat and two Slices either way.
    matches_exposed(build, (11, 11));
}

/// Operands broadcast over the channels or the pixels alone, between convs held NHWC:
/// MobileNetV3's squeeze-and-excitation (a GlobalAveragePool, a 1x1 conv and a gate
/// `[N, C, 1, 1]` multiplied in), the same with a ReduceMean and the gate on the left, a
/// spatial attention map `[N, 1, H, W]` (CBAM), and per-channel constants `[C, 1, 1]`
/// added and subtracted from; beside them operands `[1, C, H, W]` (broadcast over the
/// batch alone) and `[C, 1, W]`, whose bytes differ between the layouts, held NCHW. The same bits as the
/// graph with the products exposed (held NCHW), in the same number of steps.
#[test]
fn channel_and_pixel_broadcasts_keep_a_conv_chain_channels_last() {
    let build = |expose: bool| {
        let mut rng = Rng::new(17);
        let mut b = GraphBuilder::new("se");
        let xv = rng.vec(2 * 6 * 7 * 9);
        let x = b.input_fixed("x", DType::F32, &[2, 6, 7, 9]);
        let w1 = constant(&mut b, &mut rng, &[8, 6, 1, 1], 0.5);
        let c1 = b.node(OpKind::Conv, &[x, w1], &[]).unwrap();
        let wf = constant(&mut b, &mut rng, &[8, 8, 1, 1], 0.5);
        let gap = b.node(OpKind::GlobalAveragePool, &[c1], &[]).unwrap();
        let f = b.node(OpKind::Conv, &[gap, wf], &[]).unwrap();
        let gate = b.node(OpKind::Sigmoid, &[f], &[]).unwrap();
        let se = b.node(OpKind::Mul, &[c1, gate], &[]).unwrap();
        let axes = [("axes", Attr::Ints(vec![2, 3]))];
        let mean = b.node(OpKind::ReduceMean, &[c1], &axes).unwrap();
        let f2 = b.node(OpKind::Conv, &[mean, wf], &[]).unwrap();
        let se2 = b.node(OpKind::Mul, &[f2, c1], &[]).unwrap();
        let ws = constant(&mut b, &mut rng, &[1, 8, 3, 3], 0.3);
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let map = b.node(OpKind::Conv, &[c1, ws], &pads).unwrap();
        let att = b.node(OpKind::Sigmoid, &[map], &[]).unwrap();
        let spatial = b.node(OpKind::Div, &[c1, att], &[]).unwrap();
        let bias = constant(&mut b, &mut rng, &[8, 1, 1], 1.0);
        let shifted = b.node(OpKind::Add, &[c1, bias], &[]).unwrap();
        let from = b.node(OpKind::Sub, &[bias, c1], &[]).unwrap();
        // Other convs' results (the first would be demoted with them).
        let other = b.node(OpKind::Conv, &[x, w1], &[]).unwrap();
        let planes = constant(&mut b, &mut rng, &[1, 8, 7, 9], 1.0);
        let positional = b.node(OpKind::Mul, &[other, planes], &[]).unwrap();
        let third = b.node(OpKind::Conv, &[x, w1], &[]).unwrap();
        let cols = constant(&mut b, &mut rng, &[8, 1, 9], 1.0);
        let by_col = b.node(OpKind::Add, &[third, cols], &[]).unwrap();
        let w2 = constant(&mut b, &mut rng, &[5, 8, 1, 1], 0.3);
        let products = [se, se2, spatial, shifted, from, positional, by_col];
        let mut outs: Vec<TensorId> = products
            .iter()
            .map(|&p| b.node(OpKind::Conv, &[p, w2], &[]).unwrap())
            .collect();
        if expose {
            outs.extend(products);
            outs.extend([c1, other, third]);
        }
        outs.into_iter().for_each(|t| b.output(t));
        (
            b.finish().unwrap(),
            vec![Tensor::from_f32(&[2, 6, 7, 9], &xv)],
        )
    };
    // Thirteen convs (the Sigmoids join theirs), a pool, a mean and seven products
    // either way.
    matches_exposed(build, (22, 22));
}

/// `build(false)` gives the bits of `build(true)` (the same graph with intermediates made
/// outputs, which holds them NCHW and keeps them from folding) at 1 and 2 threads, in
/// `steps.0` and `steps.1` steps.
fn matches_exposed(build: impl Fn(bool) -> (Graph, Vec<Tensor>), steps: (usize, usize)) {
    let ((g, inputs), (plain, _)) = (build(false), build(true));
    for threads in [1, 2] {
        let d = common::delegate_threads(threads);
        let (got, n) = run_counting(&d, &g, &inputs);
        let (want, plain_n) = run_counting(&d, &plain, &inputs);
        common::assert_same_bits(&got, &want, &format!("{threads} threads"));
        assert_eq!((n, plain_n), steps, "steps, {threads} threads");
    }
}
