//! `execute` allocates nothing: every buffer is made at init. Counted with a global
//! allocator that tallies the allocations of the calling thread while armed. This binary
//! holds one test so that nothing else runs beside it.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind};
use baton_delegate_api::testing::{views, Hosted, Rng};
use baton_delegate_api::{Constants, Delegate, Executable, Tensor, TensorData};
use common::delegate;

struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the bookkeeping touches only const-initialised
// thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn execute_allocates_nothing() {
    let mut rng = Rng::new(9);
    let mut g = GraphBuilder::new("many");
    let x = g.input_fixed("x", DType::F32, &[1, 3, 9, 9]);
    let w = g.constant_f32("w", &[8, 3, 3, 3], &rng.vec(216));
    let b = g.constant_f32("b", &[8], &rng.vec(8));
    let conv = g
        .node(
            OpKind::Conv,
            &[x, w, b],
            &[("pads", Attr::Ints(vec![1; 4]))],
        )
        .unwrap();
    let relu = g.node(OpKind::Relu, &[conv], &[]).unwrap();
    let dw_w = g.constant_f32("dw", &[8, 1, 3, 3], &rng.vec(72));
    let dw = g
        .node(OpKind::Conv, &[relu, dw_w], &[("group", Attr::Int(8))])
        .unwrap();
    let k = ("kernel_shape", Attr::Ints(vec![2, 2]));
    let pool = g
        .node(OpKind::MaxPool, &[dw], std::slice::from_ref(&k))
        .unwrap();
    let avg = g.node(OpKind::AveragePool, &[dw], &[k]).unwrap();
    let cat = g
        .node(OpKind::Concat, &[pool, avg], &[("axis", Attr::Int(1))])
        .unwrap();
    let t = g.node(OpKind::Transpose, &[cat], &[]).unwrap();
    let flat = g.node(OpKind::Flatten, &[t], &[]).unwrap();
    let sm = g.node(OpKind::Softmax, &[flat], &[]).unwrap();
    let flat_t = g.node(OpKind::Transpose, &[flat], &[]).unwrap();
    let mm = g.node(OpKind::MatMul, &[sm, flat_t], &[]).unwrap();
    let y = g.node(OpKind::Sigmoid, &[mm], &[]).unwrap();
    let z = g.node(OpKind::Mul, &[y, y], &[]).unwrap();
    g.output(z);
    // Nearest and linear Resizes between convs (held NHWC), and a Pad of the input.
    let resize = |g: &mut GraphBuilder, mode: &str| {
        let attrs = [
            ("mode", Attr::Str(mode.into())),
            ("scales", Attr::Floats(vec![1.0, 1.0, 2.0, 2.0])),
        ];
        g.node(OpKind::Resize, &[dw], &attrs).unwrap()
    };
    let (up, lin) = (resize(&mut g, "nearest"), resize(&mut g, "linear"));
    let sum = g.node(OpKind::Add, &[up, lin], &[]).unwrap();
    let w1 = g.constant_f32("w1", &[4, 8, 1, 1], &rng.vec(32));
    let c1 = g.node(OpKind::Conv, &[sum, w1], &[]).unwrap();
    g.output(c1);
    let pads = g.constant_i64("pads", &[8], &[0, 0, 1, 2, 0, 0, 2, 1]);
    let padded = g.node(OpKind::Pad, &[x, pads], &[]).unwrap();
    g.output(padded);
    let graph = g.finish().unwrap();
    let input = Tensor::from_f32(&[1, 3, 9, 9], &rng.vec(243));
    let what = "convolutions, pools, resizes or Pad";
    assert_execute_allocates_nothing(&delegate(true), &graph, &[input], what);

    let two = common::delegate_threads(2);

    // RotaryEmbedding, and Attention (its per-thread scratch and run-time packings sized
    // at init) on the rotated queries with a mask, a past and every output; two threads,
    // so that the pool's workers take their own scratch.
    let inputs = [
        Tensor::from_f32(&[1, 4, 3, 8], &rng.vec(96)),
        Tensor::from_f32(&[1, 2, 5, 8], &rng.vec(80)),
        Tensor::from_f32(&[1, 2, 5, 8], &rng.vec(80)),
        Tensor::from_i64(&[1, 3], &[2, 0, 5]),
    ];
    assert_execute_allocates_nothing(&two, &attention_graph(), &inputs, "Attention");

    // MatMulInteger and ConvInteger on the int8 kernels (the convolution's NHWC scratch
    // sized at init), and ReverseSequence with run-time lengths; two threads.
    let bytes = |n: usize| -> Vec<u8> { (0..n).map(|i| (i * 37 % 256) as u8).collect() };
    let inputs = [
        Tensor::from_bytes(DType::U8, &[3, 16], &bytes(48)),
        Tensor::from_bytes(DType::I8, &[1, 4, 6, 6], &bytes(144)),
        Tensor::from_f32(&[4, 3, 2], &rng.vec(24)),
        Tensor::from_i64(&[3], &[4, 0, 2]),
    ];
    let what = "the integer products or ReverseSequence";
    assert_execute_allocates_nothing(&two, &integer_graph(), &inputs, what);

    // A bidirectional RNN with constant sequence lengths, an initial state and an
    // activation computed through the shared f64 definition; LSTM and GRU with their
    // options; a three-operand Einsum; two threads.
    let rnn = rnn_graph(&mut rng);
    let inputs = [
        Tensor::from_f32(&[4, 3, 5], &rng.vec(60)),
        Tensor::from_f32(&[2, 3, 6], &rng.vec(36)),
    ];
    assert_execute_allocates_nothing(&two, &rnn, &inputs, "RNN, LSTM, GRU or Einsum");

    // DFT (a Bluestein length, one-sided) and STFT (a power-of-two frame, a run-time
    // window) on their per-thread scratch, MelWeightMatrix with run-time edges, RoiAlign
    // with run-time boxes and an adaptive grid, LinearAttention (gated delta rule, a past
    // state) and DeformConv (its columns packed into the run-time panels); two threads.
    let inputs = [
        Tensor::from_f32(&[3, 12, 1], &rng.vec(36)),
        Tensor::from_f32(&[2, 40, 1], &rng.vec(80)),
        Tensor::from_f32(&[8], &rng.vec(8)),
        Tensor::from_f32(&[], &[100.0]),
        Tensor::from_f32(&[], &[3000.0]),
        Tensor::from_f32(&[2, 3, 6, 7], &rng.vec(252)),
        Tensor::from_f32(&[2, 4], &[0.0, 0.0, 5.0, 4.0, 1.5, 0.5, 4.25, 3.75]),
        Tensor::from_i64(&[2], &[1, 0]),
        Tensor::from_f32(&[1, 3, 8], &rng.vec(24)),
        Tensor::from_f32(&[1, 3, 4], &rng.vec(12)),
        Tensor::from_f32(&[1, 3, 3], &rng.vec(9)),
        Tensor::from_f32(&[1, 1, 4, 3], &rng.vec(12)),
        Tensor::from_f32(&[1, 3, 1], &rng.vec(3)),
        Tensor::from_f32(&[1, 3, 1], &rng.vec(3)),
        Tensor::from_f32(&[1, 2, 5, 5], &rng.vec(50)),
        Tensor::from_f32(&[1, 8, 4, 4], &rng.vec(128)),
        Tensor::from_f32(&[1, 4, 4, 4], &rng.vec(64)),
        Tensor::from_f32(&[3, 2, 2, 2], &rng.vec(24)),
        Tensor::from_f32(&[3], &rng.vec(3)),
    ];
    let what = "a spectral op, RoiAlign, LinearAttention or DeformConv";
    assert_execute_allocates_nothing(&two, &spectral_graph(), &inputs, what);

    // TensorScatter of a KV cache large enough to be split over the pool's two threads,
    // circular, with write indices given at run time.
    let mut g = GraphBuilder::new("kv");
    let past = g.input_fixed("past", DType::F32, &[2, 8, 1024, 16]);
    let update = g.input_fixed("update", DType::F32, &[2, 8, 3, 16]);
    let write = g.input_fixed("write", DType::I64, &[2]);
    let mode = ("mode", Attr::Str("circular".into()));
    let kv = g
        .node(OpKind::TensorScatter, &[past, update, write], &[mode])
        .unwrap();
    g.output(kv);
    let kv = g.finish().unwrap();
    let inputs = [
        Tensor::from_f32(&[2, 8, 1024, 16], &rng.vec(2 * 8 * 1024 * 16)),
        Tensor::from_f32(&[2, 8, 3, 16], &rng.vec(2 * 8 * 3 * 16)),
        Tensor::from_i64(&[2], &[1022, 5]),
    ];
    assert_execute_allocates_nothing(&two, &kv, &inputs, "TensorScatter");
}

/// Compiles and inits `graph` on `d`, then runs `execute` once with the allocator armed
/// and fails, naming `what`, if it allocated (outputs are zero tensors of the declared
/// shapes, made before arming).
fn assert_execute_allocates_nothing(d: &CpuDelegate, graph: &Graph, inputs: &[Tensor], what: &str) {
    let h = Hosted::new(graph);
    let consts = h.tensors();
    let v = views(&consts);
    let blob = d
        .compile(0, &h.graph, Constants::new(&h.graph, &v))
        .unwrap();
    let mut exec = d.init(0, &blob, &v).unwrap();
    let mut outs: Vec<Tensor> = h
        .graph
        .outputs
        .iter()
        .map(|&t| {
            let decl = &h.graph.tensors[t];
            Tensor::zeros(decl.dtype, &decl.static_shape().unwrap())
        })
        .collect();
    let inputs: Vec<_> = inputs.iter().map(Tensor::view).collect();
    let mut outputs: Vec<_> = outs.iter_mut().map(|t| t.view_mut()).collect();
    let before = COUNT.with(Cell::get);
    ARMED.with(|a| a.set(true));
    let result = exec.execute(&inputs, &mut outputs);
    ARMED.with(|a| a.set(false));
    result.unwrap_or_else(|e| panic!("{what}: {e}"));
    let count = COUNT.with(Cell::get) - before;
    assert_eq!(count, 0, "{what}: execute allocated {count} times");
}

/// DFT of `x` `[3, 12, 1]` (one-sided), STFT of `sig` `[2, 40, 1]` by a run-time window of
/// 8 every 5 samples, MelWeightMatrix (4 mel bins, DFT length 33) between run-time edges,
/// RoiAlign (avg, adaptive) of `img` `[2, 3, 6, 7]`, LinearAttention (2 query heads on 1
/// key/value head, d_k 4, d_v 3, 3 tokens, a past state) and DeformConv (`[1, 2, 5, 5]`
/// by 3 filters of 2 x 2, a mask and a bias; constant, then run-time weights and bias).
fn spectral_graph() -> Graph {
    let mut g = GraphBuilder::new("spectral");
    let x = g.input_fixed("x", DType::F32, &[3, 12, 1]);
    let sig = g.input_fixed("sig", DType::F32, &[2, 40, 1]);
    let win = g.input_fixed("win", DType::F32, &[8]);
    let low = g.input_fixed("low", DType::F32, &[]);
    let high = g.input_fixed("high", DType::F32, &[]);
    let img = g.input_fixed("img", DType::F32, &[2, 3, 6, 7]);
    let rois = g.input_fixed("rois", DType::F32, &[2, 4]);
    let batch = g.input_fixed("batch", DType::I64, &[2]);
    let none = g.constant_f32("none", &[0], &[]);
    let axis = g.constant_i64("axis", &[], &[1]);
    let dft = g
        .node(OpKind::DFT, &[x, none, axis], &[("onesided", Attr::Int(1))])
        .unwrap();
    let step = g.constant_i64("step", &[], &[5]);
    let stft = g.node(OpKind::STFT, &[sig, step, win], &[]).unwrap();
    let ints =
        [("bins", 4), ("dft", 33), ("rate", 8000)].map(|(name, v)| g.constant_i64(name, &[], &[v]));
    let mel = g
        .node(
            OpKind::MelWeightMatrix,
            &[ints[0], ints[1], ints[2], low, high],
            &[],
        )
        .unwrap();
    let roi = g
        .node(
            OpKind::RoiAlign,
            &[img, rois, batch],
            &[
                ("output_height", Attr::Int(3)),
                ("output_width", Attr::Int(2)),
            ],
        )
        .unwrap();
    let names = ["q", "k", "v", "past", "decay", "beta"];
    let shapes: [&[usize]; 6] = [
        &[1, 3, 8],
        &[1, 3, 4],
        &[1, 3, 3],
        &[1, 1, 4, 3],
        &[1, 3, 1],
        &[1, 3, 1],
    ];
    let la_in: Vec<_> = names
        .iter()
        .zip(shapes)
        .map(|(n, s)| g.input_fixed(n, DType::F32, s))
        .collect();
    let la = g
        .named_node_outputs(
            "la",
            OpKind::LinearAttention,
            &la_in,
            &[
                ("q_num_heads", Attr::Int(2)),
                ("kv_num_heads", Attr::Int(1)),
            ],
            2,
        )
        .unwrap();
    let dx = g.input_fixed("dx", DType::F32, &[1, 2, 5, 5]);
    let offsets = g.input_fixed("offsets", DType::F32, &[1, 8, 4, 4]);
    let mask = g.input_fixed("mask", DType::F32, &[1, 4, 4, 4]);
    let dw = g.constant_f32(
        "dw",
        &[3, 2, 2, 2],
        &(0..24).map(|i| i as f32 / 24.0).collect::<Vec<_>>(),
    );
    let db = g.constant_f32("db", &[3], &[0.5, -0.25, 1.0]);
    let deform = g
        .node(OpKind::DeformConv, &[dx, dw, offsets, db, mask], &[])
        .unwrap();
    // Run-time weights and bias: reordered into the work space on every execute.
    let rw = g.input_fixed("rw", DType::F32, &[3, 2, 2, 2]);
    let rb = g.input_fixed("rb", DType::F32, &[3]);
    let deform_rt = g
        .node(OpKind::DeformConv, &[dx, rw, offsets, rb, mask], &[])
        .unwrap();
    for t in [dft, stft, mel, roi, la[0], la[1], deform, deform_rt] {
        g.output(t);
    }
    g.finish().unwrap()
}

/// RNN over `x` `[4, 3, 5]` (hidden 6, both directions, Softplus then Tanh, clip 2) with
/// lengths 4, 2 and 3 and the initial state `h0` as inputs; `Y` and `Y_h` are outputs.
fn rnn_graph(rng: &mut Rng) -> Graph {
    let mut g = GraphBuilder::new("rnn");
    let x = g.input_fixed("x", DType::F32, &[4, 3, 5]);
    let h0 = g.input_fixed("h0", DType::F32, &[2, 3, 6]);
    let w = g.constant_f32("w", &[2, 6, 5], &rng.vec(60));
    let r = g.constant_f32("r", &[2, 6, 6], &rng.vec(72));
    let b = g.constant_f32("b", &[2, 12], &rng.vec(24));
    let lens = g.constant(
        "lens",
        DType::I32,
        &[3],
        TensorData::from_slice(&[4i32, 2, 3]),
    );
    let outs = g
        .named_node_outputs(
            "rnn",
            OpKind::RNN,
            &[x, w, r, b, lens, h0],
            &[
                ("direction", Attr::Str("bidirectional".into())),
                ("activations", Attr::Str("Softplus,Tanh".into())),
                ("clip", Attr::Float(2.0)),
            ],
            2,
        )
        .unwrap();
    // An LSTM with clip, constant peepholes and input_forget, and a GRU with clip, on the
    // same input; an Einsum of three operands (two intermediates in the work space).
    let lw = g.constant_f32("lw", &[1, 24, 5], &rng.vec(120));
    let lr = g.constant_f32("lr", &[1, 24, 6], &rng.vec(144));
    let lp = g.constant_f32("lp", &[1, 18], &rng.vec(18));
    let none = g.constant("none", DType::F32, &[0], TensorData::from_bytes(&[]));
    let lstm = g
        .named_node_outputs(
            "lstm",
            OpKind::LSTM,
            &[x, lw, lr, none, lens, none, none, lp],
            &[("clip", Attr::Float(1.5)), ("input_forget", Attr::Int(1))],
            3,
        )
        .unwrap();
    let gw = g.constant_f32("gw", &[1, 18, 5], &rng.vec(90));
    let gr = g.constant_f32("gr", &[1, 18, 6], &rng.vec(108));
    let gru = g
        .named_node_outputs(
            "gru",
            OpKind::GRU,
            &[x, gw, gr],
            &[("clip", Attr::Float(0.5))],
            2,
        )
        .unwrap();
    let eq = ("equation", Attr::Str("tdbh,tebh,tebh->bh".into()));
    let chain = g
        .node(OpKind::Einsum, &[outs[0], lstm[0], gru[0]], &[eq])
        .unwrap();
    for t in outs.into_iter().chain(lstm).chain(gru).chain([chain]) {
        g.output(t);
    }
    g.finish().unwrap()
}

/// MatMulInteger of a u8 input by constant i8 weights with per-row and per-column zero
/// points; ConvInteger of an i8 input with padding, two groups and per-channel u8 weight
/// zero points; ReverseSequence of an f32 input by i64 lengths given at run time.
fn integer_graph() -> Graph {
    let mut g = GraphBuilder::new("integer");
    let a = g.input_fixed("a", DType::U8, &[3, 16]);
    let x = g.input_fixed("x", DType::I8, &[1, 4, 6, 6]);
    let seq = g.input_fixed("seq", DType::F32, &[4, 3, 2]);
    let lens = g.input_fixed("lens", DType::I64, &[3]);
    let bytes =
        |n: usize, step: usize| -> Vec<u8> { (0..n).map(|i| (i * step % 256) as u8).collect() };
    let constant = |g: &mut GraphBuilder, name: &str, dtype: DType, shape: &[usize], v: Vec<u8>| {
        g.constant(name, dtype, shape, TensorData::from_bytes(&v))
    };
    let b = constant(&mut g, "b", DType::I8, &[16, 20], bytes(320, 53));
    let az = constant(&mut g, "az", DType::U8, &[3], vec![3, 200, 128]);
    let bz = constant(&mut g, "bz", DType::I8, &[20], bytes(20, 91));
    let mm = g.node(OpKind::MatMulInteger, &[a, b, az, bz], &[]).unwrap();
    let w = constant(&mut g, "w", DType::U8, &[6, 2, 3, 3], bytes(108, 71));
    let xz = constant(&mut g, "xz", DType::I8, &[1], vec![250]);
    let wz = constant(&mut g, "wz", DType::U8, &[6], vec![0, 128, 255, 7, 64, 3]);
    let pads = ("pads", Attr::Ints(vec![1, 1, 1, 1]));
    let conv = g
        .node(
            OpKind::ConvInteger,
            &[x, w, xz, wz],
            &[pads, ("group", Attr::Int(2))],
        )
        .unwrap();
    let rev = g.node(OpKind::ReverseSequence, &[seq, lens], &[]).unwrap();
    g.output(mm);
    g.output(conv);
    g.output(rev);
    g.finish().unwrap()
}

/// RotaryEmbedding of Q by position ids, then grouped-query Attention with a float
/// mask, a constant past and all four outputs; an Einsum of its result.
fn attention_graph() -> Graph {
    let mut rng = Rng::new(3);
    let mut g = GraphBuilder::new("attention");
    let q = g.input_fixed("q", DType::F32, &[1, 4, 3, 8]);
    let k = g.input_fixed("k", DType::F32, &[1, 2, 5, 8]);
    let v = g.input_fixed("v", DType::F32, &[1, 2, 5, 8]);
    let pos = g.input_fixed("pos", DType::I64, &[1, 3]);
    let cos = g.constant_f32("cos", &[6, 4], &rng.vec(24));
    let sin = g.constant_f32("sin", &[6, 4], &rng.vec(24));
    let rq = g
        .node(OpKind::RotaryEmbedding, &[q, cos, sin, pos], &[])
        .unwrap();
    let mask = g.constant_f32("mask", &[3, 7], &rng.vec(21));
    let pk = g.constant_f32("pk", &[1, 2, 2, 8], &rng.vec(32));
    let pv = g.constant_f32("pv", &[1, 2, 2, 8], &rng.vec(32));
    let outs = g
        .named_node_outputs(
            "attn",
            OpKind::Attention,
            &[rq, k, v, mask, pk, pv],
            &[("is_causal", Attr::Int(1)), ("softcap", Attr::Float(3.0))],
            4,
        )
        .unwrap();
    // Einsum of Y with itself: per (batch, head, query) a dot product, then permuted.
    let eq = ("equation", Attr::Str("bhsd,bhsd->bsh".into()));
    let dots = g.node(OpKind::Einsum, &[outs[0], outs[0]], &[eq]).unwrap();
    for t in outs {
        g.output(t);
    }
    g.output(dots);
    g.finish().unwrap()
}
