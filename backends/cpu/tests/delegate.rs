//! The delegate through its trait: a full round trip, blob and view validation, honest
//! declines, argument checks at execute, and the exported descriptor.

mod common;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::abi;
use baton_delegate_api::ir::{Attr, DType, Dim, Graph, GraphBuilder, Node, OpKind, TensorDecl};
use baton_delegate_api::testing::{
    assert_close_labelled, execute, run, supports, views, Hosted, Rng,
};
use baton_delegate_api::{
    BlobCompatibility, Constants, DeclineReason, Delegate, Executable, Options, Support, Tensor,
    TensorRef,
};
use common::delegate;

/// Conv(3x3, pad 1, bias) → Relu → GlobalAveragePool → Flatten → Gemm(transB, C).
struct Net {
    graph: Graph,
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
    fc: Vec<f32>,
    fc_bias: Vec<f32>,
}

const N: usize = 2;
const C: usize = 3;
const H: usize = 6;
const W: usize = 5;
const M: usize = 4;
const CLASSES: usize = 5;

fn net() -> Net {
    let mut rng = Rng::new(7);
    let (x, w, b) = (rng.vec(N * C * H * W), rng.vec(M * C * 9), rng.vec(M));
    let (fc, fc_bias) = (rng.vec(CLASSES * M), rng.vec(CLASSES));
    let mut g = GraphBuilder::new("net");
    let xt = g.input_fixed("x", DType::F32, &[N, C, H, W]);
    let wt = g.constant_f32("w", &[M, C, 3, 3], &w);
    let bt = g.constant_f32("b", &[M], &b);
    let pads = Attr::Ints(vec![1, 1, 1, 1]);
    let conv = g
        .node(OpKind::Conv, &[xt, wt, bt], &[("pads", pads)])
        .unwrap();
    let relu = g.node(OpKind::Relu, &[conv], &[]).unwrap();
    let gap = g.node(OpKind::GlobalAveragePool, &[relu], &[]).unwrap();
    let flat = g.node(OpKind::Flatten, &[gap], &[]).unwrap();
    let fct = g.constant_f32("fc", &[CLASSES, M], &fc);
    let fcb = g.constant_f32("fc_bias", &[CLASSES], &fc_bias);
    let attrs = [("transB", Attr::Int(1)), ("alpha", Attr::Float(0.5))];
    let y = g.node(OpKind::Gemm, &[flat, fct, fcb], &attrs).unwrap();
    g.rename(y, "logits");
    g.output(y);
    Net {
        graph: g.finish().unwrap(),
        x,
        w,
        b,
        fc,
        fc_bias,
    }
}

/// The network computed naively, in f64.
fn expected(n: &Net) -> Vec<f64> {
    let mut logits = vec![0f64; N * CLASSES];
    for b in 0..N {
        let mut pooled = [0f64; M];
        for (m, p) in pooled.iter_mut().enumerate() {
            let mut sum = 0.0;
            for y in 0..H {
                for x in 0..W {
                    let mut acc = n.b[m] as f64;
                    for c in 0..C {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) =
                                    (y as isize + ky as isize - 1, x as isize + kx as isize - 1);
                                if iy < 0 || ix < 0 || iy >= H as isize || ix >= W as isize {
                                    continue;
                                }
                                let xv = n.x[((b * C + c) * H + iy as usize) * W + ix as usize];
                                acc += xv as f64 * n.w[((m * C + c) * 3 + ky) * 3 + kx] as f64;
                            }
                        }
                    }
                    sum += acc.max(0.0);
                }
            }
            *p = sum / (H * W) as f64;
        }
        for k in 0..CLASSES {
            let dot: f64 = (0..M).map(|m| pooled[m] * n.fc[k * M + m] as f64).sum();
            logits[b * CLASSES + k] = 0.5 * dot + n.fc_bias[k] as f64;
        }
    }
    logits
}

#[test]
fn round_trip_matches_naive_network() {
    let n = net();
    let want = expected(&n);
    for simd in [true, false] {
        let out = run(
            &delegate(simd),
            &n.graph,
            &[Tensor::from_f32(&[N, C, H, W], &n.x)],
        )
        .unwrap();
        assert_eq!(out[0].shape, vec![N, CLASSES]);
        assert_close_labelled(
            &format!("net simd={simd}"),
            out[0].f32s(),
            &want,
            1e-6,
            1e-5,
        );
    }
}

/// Compiles the network; returns the blob and the host-side constants.
fn compiled(d: &CpuDelegate) -> (Vec<u8>, Vec<Tensor>, Hosted) {
    let h = Hosted::new(&net().graph);
    let consts = h.tensors();
    let v = views(&consts);
    let blob = d
        .compile(0, &h.graph, Constants::new(&h.graph, &v))
        .unwrap();
    (blob, consts, h)
}

#[test]
fn blobs_hold_packed_weights_and_report_their_compatibility() {
    let d = delegate(true);
    let (blob, consts, _) = compiled(&d);
    let weight_bytes: usize = consts.iter().map(|t| t.bytes().len()).sum();
    // The packings (bias-led panels, padded to the panel width) are at least the weights.
    assert!(blob.len() > weight_bytes, "blob of {} bytes", blob.len());
    assert_eq!(&blob[..4], b"BCPU");
    assert_eq!(d.blob_compatibility(&blob), BlobCompatibility::Optimal);
    let mut newer = blob.clone();
    newer[4] = newer[4].wrapping_add(1);
    assert_eq!(d.blob_compatibility(&newer), BlobCompatibility::Unsupported);
    assert_eq!(
        d.blob_compatibility(b"junk"),
        BlobCompatibility::Unsupported
    );
    assert_eq!(d.blob_compatibility(&[]), BlobCompatibility::Unsupported);
    let e = d.init(0, &newer, &views(&consts)).unwrap_err();
    assert!(e.message.contains("version"), "{}", e.message);
}

#[test]
fn packed_blobs_run_like_packing_at_init_on_any_kernel() {
    let n = net();
    let x = Tensor::from_f32(&[N, C, H, W], &n.x);
    let want = expected(&n);
    let (simd, portable) = (delegate(true), delegate(false));
    let (blob, consts, h) = compiled(&simd);
    let v = views(&consts);
    let inputs = [x];
    let run_blob = |d: &CpuDelegate, blob: &[u8]| {
        let mut exec = d.init(0, blob, &v).unwrap();
        execute(&mut exec, &h.graph, &inputs).unwrap()
    };
    // Replayed packings give what packing at init gives, bit for bit: a blob that says
    // its packings are for another panel width is packed at init.
    let replayed = run_blob(&simd, &blob);
    let mut unpacked = blob.clone();
    let graph_len = u64::from_le_bytes(blob[16..24].try_into().unwrap()) as usize;
    let chains_at = (24 + graph_len).next_multiple_of(4);
    let chains = u32::from_le_bytes(blob[chains_at..chains_at + 4].try_into().unwrap());
    let nr_at = chains_at + 4 + 12 * chains as usize;
    unpacked[nr_at..nr_at + 4].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(
        simd.blob_compatibility(&unpacked),
        BlobCompatibility::PreferRecompile
    );
    let fresh = run_blob(&simd, &unpacked);
    assert_eq!(replayed[0].f32s(), fresh[0].f32s());
    assert_close_labelled("replayed", replayed[0].f32s(), &want, 1e-6, 1e-5);
    // A kernel of another panel width packs from the constants instead, and says a
    // recompile would load faster.
    if simd.kernel().nr() != portable.kernel().nr() {
        assert_eq!(
            portable.blob_compatibility(&blob),
            BlobCompatibility::PreferRecompile
        );
        let other = run_blob(&portable, &blob);
        assert_close_labelled("other width", other[0].f32s(), &want, 1e-6, 1e-5);
    }
}

#[test]
fn corrupt_blobs_are_refused_not_panicked_on() {
    let d = delegate(true);
    let (blob, consts, _) = compiled(&d);
    let v = views(&consts);
    for len in 0..blob.len() {
        let e = d
            .init(0, &blob[..len], &v)
            .err()
            .unwrap_or_else(|| panic!("prefix {len} accepted"));
        assert_eq!(e.status, abi::STATUS_INVALID_ARGUMENT, "{}", e.message);
    }
    let mut longer = blob.clone();
    longer.extend_from_slice(&[0; 12]);
    assert!(d.init(0, &longer, &v).is_err());
    // Flipped bytes: an error or a working executable, never a panic.
    let mut rng = Rng::new(11);
    for _ in 0..2000 {
        let mut bad = blob.clone();
        let pos = (rng.next_u64() as usize) % bad.len();
        bad[pos] ^= 1 << (rng.next_u64() % 8);
        let _ = d.init(0, &bad, &v);
    }
}

#[test]
fn a_bad_fusion_plan_is_refused() {
    let d = delegate(true);
    let (blob, consts, _) = compiled(&d);
    let v = views(&consts);
    // The plan follows the graph (padded to 4): one chain (Conv → Relu), its three u32s.
    let graph_len = u64::from_le_bytes(blob[16..24].try_into().unwrap()) as usize;
    let tail = (24 + graph_len).next_multiple_of(4) + 4;
    assert_eq!(
        u32::from_le_bytes(blob[tail - 4..tail].try_into().unwrap()),
        1
    );
    let chain = |anchor: u32, add: u32, act: u32| {
        let mut b = blob.clone();
        for (i, x) in [anchor, add, act].into_iter().enumerate() {
            b[tail + 4 * i..tail + 4 * i + 4].copy_from_slice(&x.to_le_bytes());
        }
        b
    };
    assert!(d.init(0, &chain(0, u32::MAX, 1), &v).is_ok());
    for (bad, why) in [
        (chain(0, u32::MAX, 2), "activation is not a Relu"),
        (chain(2, u32::MAX, 1), "anchor is not a Conv"),
        (chain(0, 1, u32::MAX), "Relu is not an Add"),
        (chain(0, u32::MAX, 99), "index out of range"),
        (chain(4, u32::MAX, u32::MAX), "nothing fused"),
    ] {
        let e = d
            .init(0, &bad, &v)
            .err()
            .unwrap_or_else(|| panic!("accepted: {why}"));
        assert!(e.message.contains("fusion chain"), "{why}: {}", e.message);
    }
}

#[test]
fn mismatched_constant_views_are_refused() {
    let d = delegate(true);
    let (blob, consts, _) = compiled(&d);
    let fine = views(&consts);
    assert!(d.init(0, &blob, &fine).is_ok());

    let fewer = &fine[..fine.len() - 1];
    let mut extra = fine.clone();
    extra.push(fine[0]);
    let mut wrong_dtype = fine.clone();
    wrong_dtype[1].dtype = DType::I32;
    let mut short = fine.clone();
    short[0].data = &short[0].data[..8];
    let mut wrong_shape = fine.clone();
    let transposed = [3usize, 3, 3, 4];
    wrong_shape[0].shape = &transposed;
    for (v, what) in [
        (fewer, "fewer"),
        (&extra[..], "extra"),
        (&wrong_dtype[..], "dtype"),
        (&short[..], "length"),
        (&wrong_shape[..], "shape"),
    ] {
        let e = d
            .init(0, &blob, v)
            .err()
            .unwrap_or_else(|| panic!("{what} accepted"));
        assert_eq!(
            e.status,
            abi::STATUS_INVALID_ARGUMENT,
            "{what}: {}",
            e.message
        );
        assert!(
            e.message.contains("constant") || e.message.contains("view"),
            "{what}: {}",
            e.message
        );
    }
}

#[test]
fn execute_checks_its_arguments_and_survives_errors() {
    let d = delegate(true);
    let n = net();
    let (blob, consts, h) = compiled(&d);
    let mut exec = d.init(0, &blob, &views(&consts)).unwrap();
    let good = Tensor::from_f32(&[N, C, H, W], &n.x);
    let wrong_shape = Tensor::from_f32(&[N, C, W, H], &n.x);
    let wrong_dtype = Tensor::from_bytes(DType::I32, &[N, C, H, W], good.bytes());
    for (inputs, what) in [
        (vec![], "count"),
        (vec![good.clone(), good.clone()], "count"),
        (vec![wrong_shape], "shape"),
        (vec![wrong_dtype], "dtype"),
    ] {
        let e = execute(&mut exec, &h.graph, &inputs)
            .err()
            .unwrap_or_else(|| panic!("{what} accepted"));
        assert_eq!(e.status, abi::STATUS_INVALID_ARGUMENT);
        if what != "count" {
            assert!(e.message.contains("'x'"), "{what}: {}", e.message);
        }
    }
    // Wrong outputs.
    let mut bad_out = Tensor::zeros(DType::F32, &[N, CLASSES + 1]);
    let e = exec
        .execute(&[good.view()], &mut [bad_out.view_mut()])
        .unwrap_err();
    assert!(e.message.contains("logits"), "{}", e.message);
    // Still usable after the errors.
    let out = execute(&mut exec, &h.graph, &[good]).unwrap();
    assert_close_labelled("after errors", out[0].f32s(), &expected(&n), 1e-6, 1e-5);
}

fn single(op: OpKind, dtype: DType, shapes: &[&[usize]], attrs: &[(&str, Attr)]) -> Graph {
    let mut g = GraphBuilder::new("one");
    let ins: Vec<usize> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| g.input_fixed(&format!("in{i}"), dtype, s))
        .collect();
    let y = g.node(op, &ins, attrs).unwrap();
    g.output(y);
    g.finish().unwrap()
}

fn declined(g: &Graph) -> (DeclineReason, String) {
    match &supports(&delegate(true), g)[..] {
        [Support::No(d)] => (d.reason, d.message.clone()),
        other => panic!("expected one refusal, got {other:?}"),
    }
}

#[test]
fn declines_are_honest() {
    // (f16 Add is computed in f32; f64 is not held at all.)
    let (r, m) = declined(&single(OpKind::Add, DType::F64, &[&[2, 3], &[3]], &[]));
    assert_eq!(r, DeclineReason::DType, "{m}");
    assert!(m.contains("f64"), "{m}");

    let (r, m) = declined(&single(OpKind::Relu, DType::F32, &[&[1; 7]], &[]));
    assert_eq!(r, DeclineReason::Shape, "{m}");

    let (r, m) = declined(&single(
        OpKind::Relu,
        DType::F32,
        &[&[2]],
        &[("alpha", Attr::Float(0.1))],
    ));
    assert_eq!(r, DeclineReason::Attribute, "{m}");
    assert!(m.contains("alpha"), "{m}");

    let pool = |extra: (&'static str, Attr)| {
        let k = ("kernel_shape", Attr::Ints(vec![2, 2]));
        single(OpKind::MaxPool, DType::F32, &[&[1, 1, 6, 6]], &[k, extra])
    };
    // Dilated windows, and windows wholly in the padding, are claimed (`layers.rs` checks
    // their values); an out-of-range stride is not.
    let claimed = |g: &Graph| {
        let answers = supports(&delegate(true), g);
        assert!(matches!(answers[..], [Support::Yes]), "{answers:?}");
    };
    claimed(&pool(("dilations", Attr::Ints(vec![2, 2]))));
    claimed(&pool(("pads", Attr::Ints(vec![2, 0, 0, 0]))));
    let (r, m) = declined(&pool(("strides", Attr::Ints(vec![1 << 40, 1]))));
    assert_eq!(r, DeclineReason::Attribute, "{m}");

    let (r, m) = declined(&single(
        OpKind::GlobalAveragePool,
        DType::F32,
        &[&[1, 2, 0, 3]],
        &[],
    ));
    assert_eq!(r, DeclineReason::Shape, "{m}");

    let (r, m) = declined(&single(OpKind::Clip, DType::F32, &[&[4], &[]], &[]));
    assert_eq!(r, DeclineReason::NotConstant, "{m}");
}

#[test]
fn symbolic_dimensions_are_declined() {
    let mut g = GraphBuilder::new("sym");
    let x = g.input("x", DType::F32, &[Dim::Sym("batch".into()), Dim::Fixed(3)]);
    let y = g.node(OpKind::Relu, &[x], &[]).unwrap();
    g.output(y);
    let (r, m) = declined(&g.finish().unwrap());
    assert_eq!(r, DeclineReason::Shape);
    assert!(m.contains("batch"), "{m}");
}

#[test]
fn run_time_reshape_targets_are_declined() {
    let mut g = GraphBuilder::new("reshape").finish().unwrap();
    let decl = |name: &str, dtype, shape: &[usize]| TensorDecl {
        name: name.into(),
        dtype,
        shape: shape.iter().map(|&d| Dim::Fixed(d)).collect(),
        quant: None,
        data: None,
    };
    g.tensors = vec![
        decl("x", DType::F32, &[2, 3]),
        decl("shape", DType::I64, &[1]),
        decl("y", DType::F32, &[6]),
    ];
    g.inputs = vec![0, 1];
    g.outputs = vec![2];
    g.nodes.push(Node {
        name: "reshape".into(),
        op: OpKind::Reshape,
        inputs: vec![0, 1],
        outputs: vec![2],
        attrs: Default::default(),
    });
    let (r, m) = declined(&g);
    assert_eq!(r, DeclineReason::NotConstant, "{m}");
    let d = delegate(true);
    let e = d.compile(0, &g, Constants::new(&g, &[])).unwrap_err();
    assert_eq!(e.status, abi::STATUS_UNSUPPORTED, "{}", e.message);
    assert!(e.message.contains("reshape"), "{}", e.message);
}

#[test]
fn describes_itself() {
    let info = CpuDelegate::info();
    assert_eq!(info.name, "cpu");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    assert!(info.build_id.contains(std::env::consts::ARCH));
    assert_eq!(info.concurrency, abi::concurrency::SERIALIZED_PER_HANDLE);
    let d = delegate(true);
    let devices = d.devices();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].name, format!("cpu:{}", std::env::consts::ARCH));
    assert!(devices[0]
        .driver_version
        .starts_with(std::env::consts::ARCH));
    assert_eq!(
        devices[0].driver_version,
        delegate(false).devices()[0].driver_version
    );
    assert!(d
        .compile(1, &net().graph, Constants::new(&net().graph, &[]))
        .is_err());

    let opts = CpuDelegate::options();
    let threads = |v: &str| Options::validate(&opts, &[("threads".into(), v.into())]);
    assert!(threads("0").is_err());
    assert!(threads("257").is_err());
    let d = CpuDelegate::create(&threads("8").unwrap()).unwrap();
    assert_eq!(d.threads(), 8);
    assert_eq!(
        CpuDelegate::create(&threads("1").unwrap())
            .unwrap()
            .threads(),
        1
    );
}

#[test]
fn exports_a_descriptor() {
    let desc = baton_backend_cpu::baton_delegate_entry();
    // SAFETY: the entry returns a pointer to a static descriptor.
    let desc = unsafe { &*desc };
    assert_eq!(desc.abi_major, abi::ABI_MAJOR);
    assert_eq!(desc.option_count, 2); // threads, isa
                                      // SAFETY: the name is a NUL-terminated string owned by the static descriptor.
    let name = unsafe { std::ffi::CStr::from_ptr(desc.name) };
    assert_eq!(name.to_str().unwrap(), "cpu");
}

#[test]
fn constants_passed_out_of_order_are_refused_at_compile() {
    let h = Hosted::new(&net().graph);
    let consts = h.tensors();
    let mut g = h.graph.clone();
    // Swap the view indices of the first two constants.
    let ids: Vec<usize> = (0..g.tensors.len())
        .filter(|&t| g.tensors[t].is_const())
        .collect();
    g.tensors[ids[0]].data = Some(baton_delegate_api::Storage::External(1));
    g.tensors[ids[1]].data = Some(baton_delegate_api::Storage::External(0));
    let mut v: Vec<TensorRef<'_>> = views(&consts);
    v.swap(0, 1);
    let e = delegate(true)
        .compile(0, &g, Constants::new(&g, &v))
        .unwrap_err();
    assert!(e.message.contains("tensor order"), "{}", e.message);
}

/// `profile` reports one event per step of the last run, named after the first node of
/// each fused chain, with the kernel kind and a measured time.
#[test]
fn profile_has_one_timed_event_per_step() {
    let mut b = GraphBuilder::new("g");
    let x = b.input_fixed("x", DType::F32, &[1, 4, 6, 6]);
    let w = b.constant_f32("w", &[8, 4, 3, 3], &[0.01; 288]);
    let conv = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
    let relu = b.node(OpKind::Relu, &[conv], &[]).unwrap();
    let flat = b.node(OpKind::Flatten, &[relu], &[]).unwrap();
    let m = b.constant_f32("m", &[128, 3], &[0.5; 384]);
    let mm = b.node(OpKind::MatMul, &[flat, m], &[]).unwrap();
    b.output(mm);
    let g = b.finish().unwrap();
    let d = delegate(true);
    let h = Hosted::new(&g);
    let consts = h.tensors();
    let v = views(&consts);
    let blob = d
        .compile(0, &h.graph, Constants::new(&h.graph, &v))
        .unwrap();
    let mut exec = d.init(0, &blob, &v).unwrap();
    assert!(
        exec.profile().iter().all(|e| e.wall_ns == 0),
        "nothing ran yet"
    );
    let input = Tensor::from_f32(&[1, 4, 6, 6], &[1.0; 144]);
    execute(&mut exec, &h.graph, &[input]).unwrap();
    let events = exec.profile();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    // Conv+Relu fuse into one step; Flatten is a view, not a step.
    assert_eq!(kinds, ["CONV", "GEMM"]);
    assert!(events[0].name.contains("Conv") && events[1].name.contains("MatMul"));
    assert!(events.iter().all(|e| e.wall_ns > 0), "{events:?}");
}
