//! Every NPU operation against the host's reference executor on QDQ graphs: outputs
//! within one quantization step.

mod common;

use std::path::PathBuf;

use baton_delegate_api::ir::{Attr, DType, Graph, OpKind};
use baton_delegate_api::{ProfileEvent, Support, Tensor};
use baton_reference as reference;
use baton_runtime_host::plugin::{run_once_profiled, PluginContext, PluginLibrary};
use common::Qdq;

/// The plugin library cargo built with this test binary (in the same `deps` folder: the
/// copy in `target/<profile>` is refreshed only by `cargo build`, so it may be stale).
fn plugin_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().expect("target/<profile>/deps");
    let p = dir.join(format!(
        "{}baton_backend_npu_sim{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        p.is_file(),
        "{} is missing: build the plugin first (`cargo build -p baton-backend-npu-sim-plugin`, or the workspace, as scripts/test.sh does)",
        p.display()
    );
    p
}

/// A context of the dlopen'd plugin with default options.
fn context() -> PluginContext {
    let lib = PluginLibrary::load(&plugin_path(), None).expect("load npu-sim");
    lib.create(&[]).expect("create")
}

/// Runs `g` through the plugin's C ABI and on the reference; asserts every node is
/// claimed and every output element is within one step. Returns how many elements
/// differ at all, and the profile events.
fn check(g: &Graph, inputs: &[Tensor]) -> (usize, Vec<ProfileEvent>) {
    let ctx = context();
    for (node, a) in g.nodes.iter().zip(ctx.supports(g).expect("supports")) {
        assert_eq!(
            a,
            Support::Yes,
            "{}: node {} declined",
            g.name,
            node.label()
        );
    }
    let (got, events) = run_once_profiled(&ctx, 0, g, inputs).expect("run on npu-sim");
    let want = reference::run_graph(g, inputs).expect("reference");
    let mut differ = 0;
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!((a.dtype, &a.shape), (DType::I8, &b.shape));
        for (k, (&x, &y)) in a.values::<i8>().iter().zip(b.values::<i8>()).enumerate() {
            let diff = (x as i32 - y as i32).abs();
            assert!(
                diff <= 1,
                "{}: output {i} element {k}: npu {x}, reference {y}",
                g.name
            );
            differ += (diff != 0) as usize;
        }
        // Not a degenerate case: the output is not one value throughout.
        let v = a.values::<i8>();
        assert!(
            v.len() < 4 || v.iter().any(|&q| q != v[0]),
            "{}: constant output",
            g.name
        );
    }
    assert!(!events.is_empty(), "{}: no profile events", g.name);
    (differ, events)
}

fn conv_graph(
    name: &str,
    attrs: &[(&str, Attr)],
    act: Option<OpKind>,
    dw: bool,
) -> (baton_delegate_api::Graph, Vec<baton_delegate_api::Tensor>) {
    let mut q = Qdq::new(name, 7);
    let (c, m) = if dw { (6, 6) } else { (5, 7) };
    let x = q.input("x", &[1, c, 9, 8], 0.05, 3);
    let (w, ws) = q.weights("w", &[m, if dw { 1 } else { c }, 3, 3], 0);
    let b = q.bias("b", 0.05, &ws);
    let y = q.op(OpKind::Conv, &[x, w, b], attrs);
    let y = match act {
        Some(OpKind::Clip) => q.op(
            OpKind::Clip,
            &[y],
            &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
        ),
        Some(op) => q.op(op, &[y], &[]),
        None => y,
    };
    let out = q.quantize(y, 0.04, -5);
    q.output(out)
}

#[test]
fn conv_3x3_pad_1_stride_1_with_relu() {
    let (g, i) = conv_graph(
        "conv_s1",
        &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        Some(OpKind::Relu),
        false,
    );
    check(&g, &i);
}

#[test]
fn conv_3x3_stride_2_asymmetric_pads_with_clip() {
    let attrs = [
        ("pads", Attr::Ints(vec![1, 0, 1, 1])),
        ("strides", Attr::Ints(vec![2, 2])),
    ];
    let (g, i) = conv_graph("conv_s2", &attrs, Some(OpKind::Clip), false);
    check(&g, &i);
}

#[test]
fn conv_dilated_same_upper_without_activation() {
    let attrs = [
        ("auto_pad", Attr::Str("SAME_UPPER".into())),
        ("dilations", Attr::Ints(vec![2, 2])),
    ];
    let (g, i) = conv_graph("conv_dil", &attrs, None, false);
    check(&g, &i);
}

#[test]
fn depthwise_3x3() {
    let attrs = [
        ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ("group", Attr::Int(6)),
    ];
    let (g, i) = conv_graph("dw", &attrs, Some(OpKind::Relu), true);
    check(&g, &i);
}

#[test]
fn depthwise_with_channel_multiplier_2() {
    let mut q = Qdq::new("dw_mult", 3);
    let x = q.input("x", &[1, 3, 6, 6], 0.03, 0);
    let (w, ws) = q.weights("w", &[6, 1, 3, 3], 0);
    let b = q.bias("b", 0.03, &ws);
    let y = q.op(
        OpKind::Conv,
        &[x, w, b],
        &[("group", Attr::Int(3)), ("strides", Attr::Ints(vec![2, 2]))],
    );
    let out = q.quantize(y, 0.02, 1);
    let (g, i) = q.output(out);
    check(&g, &i);
}

#[test]
fn matmul_with_bias_add_is_one_fc() {
    let mut q = Qdq::new("fc", 11);
    let x = q.input("x", &[4, 48], 0.06, -2);
    let (w, ws) = q.weights("w", &[48, 10], 1);
    let mm = q.op(OpKind::MatMul, &[x, w], &[]);
    let b = q.bias("b", 0.06, &ws);
    let y = q.op(OpKind::Add, &[mm, b], &[]);
    let out = q.quantize(y, 0.1, 4);
    let (g, i) = q.output(out);
    check(&g, &i);
}

#[test]
fn gemm_trans_b_with_bias_and_relu() {
    let mut q = Qdq::new("gemm", 12);
    let x = q.input("x", &[3, 20], 0.05, 0);
    let (w, ws) = q.weights("w", &[8, 20], 0);
    let b = q.bias("b", 0.05, &ws);
    let y = q.op(OpKind::Gemm, &[x, w, b], &[("transB", Attr::Int(1))]);
    let r = q.op(OpKind::Relu, &[y], &[]);
    let out = q.quantize(r, 0.05, -128);
    let (g, i) = q.output(out);
    check(&g, &i);
}

#[test]
fn add_of_two_different_scales() {
    let mut q = Qdq::new("add", 13);
    let a = q.input("a", &[2, 3, 5, 5], 0.02, 5);
    let b = q.input("b", &[2, 3, 5, 5], 0.07, -9);
    let y = q.op(OpKind::Add, &[a, b], &[]);
    let out = q.quantize(y, 0.05, 2);
    let (g, i) = q.output(out);
    check(&g, &i);
}

fn pool(op: OpKind, attrs: &[(&str, Attr)], name: &str) {
    let mut q = Qdq::new(name, 14);
    let x = q.input("x", &[1, 4, 7, 9], 0.05, 1);
    let y = q.op(op, &[x], attrs);
    let out = q.quantize(y, 0.03, -3);
    let (g, i) = q.output(out);
    check(&g, &i);
}

#[test]
fn max_pool_2x2_stride_2() {
    pool(
        OpKind::MaxPool,
        &[
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("strides", Attr::Ints(vec![2, 2])),
        ],
        "maxpool",
    );
}

#[test]
fn max_pool_3x3_padded() {
    pool(
        OpKind::MaxPool,
        &[
            ("kernel_shape", Attr::Ints(vec![3, 3])),
            ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ],
        "maxpool_pad",
    );
}

#[test]
fn average_pool_excluding_and_including_padding() {
    let base = [
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ("strides", Attr::Ints(vec![2, 2])),
    ];
    pool(OpKind::AveragePool, &base, "avgpool");
    let mut with = base.to_vec();
    with.push(("count_include_pad", Attr::Int(1)));
    pool(OpKind::AveragePool, &with, "avgpool_incl");
}

#[test]
fn global_average_pool() {
    pool(OpKind::GlobalAveragePool, &[], "gap");
}

#[test]
fn standalone_relu_and_clip() {
    for (op, attrs) in [
        (OpKind::Relu, vec![]),
        (
            OpKind::Clip,
            vec![("min", Attr::Float(-0.5)), ("max", Attr::Float(1.5))],
        ),
    ] {
        let mut q = Qdq::new("act", 15);
        let x = q.input("x", &[2, 50], 0.03, 10);
        let y = q.op(op, &[x], &attrs);
        let out = q.quantize(y, 0.02, -20);
        let (g, i) = q.output(out);
        check(&g, &i);
    }
}

#[test]
fn reshape_with_requantization() {
    let mut q = Qdq::new("reshape", 16);
    let x = q.input("x", &[2, 3, 4], 0.05, 0);
    let y = q.op(OpKind::Reshape, &[x], &[("shape", Attr::Ints(vec![6, 4]))]);
    let out = q.quantize(y, 0.06, 3);
    let (g, i) = q.output(out);
    check(&g, &i);
}

#[test]
fn concat_of_inputs_with_different_scales() {
    let mut q = Qdq::new("concat", 17);
    let a = q.input("a", &[1, 2, 4, 4], 0.02, 0);
    let b = q.input("b", &[1, 3, 4, 4], 0.05, 7);
    let y = q.op(OpKind::Concat, &[a, b], &[("axis", Attr::Int(1))]);
    let out = q.quantize(y, 0.04, -1);
    let (g, i) = q.output(out);
    check(&g, &i);
}

#[test]
fn softmax_last_axis_and_middle_axis() {
    for axis in [-1i64, 1] {
        let mut q = Qdq::new("softmax", 18);
        let x = q.input("x", &[2, 10, 3], 0.1, 0);
        let y = q.op(OpKind::Softmax, &[x], &[("axis", Attr::Int(axis))]);
        let out = q.quantize(y, 1.0 / 256.0, -128);
        let (g, i) = q.output(out);
        check(&g, &i);
    }
}

#[test]
fn a_small_conv_net_runs_as_one_stream() {
    let (g, i) = common::small_net();
    let (differ, events) = check(&g, &i);
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "CONV2D",
            "DEPTHWISE",
            "CONV2D",
            "AVGPOOL",
            "RESHAPE",
            "FC",
            "SOFTMAX"
        ]
    );
    for e in &events {
        assert!(e.cycles > 0, "{e:?}");
        eprintln!("{:<10} {:<40} {:>8} cycles", e.kind, e.name, e.cycles);
    }
    eprintln!("elements differing by one step: {differ}");
}

#[test]
fn a_reshape_between_dequantize_and_gemm_folds_into_the_fc() {
    let mut q = Qdq::new("flatten_fc", 19);
    let x = q.input("x", &[1, 8, 1, 1], 0.03, -4);
    let flat = q.op(OpKind::Flatten, &[x], &[]);
    let (w, ws) = q.weights("w", &[5, 8], 0);
    let b = q.bias("b", 0.03, &ws);
    let y = q.op(OpKind::Gemm, &[flat, w, b], &[("transB", Attr::Int(1))]);
    let out = q.quantize(y, 0.02, 3);
    let (g, i) = q.output(out);
    let (_, events) = check(&g, &i);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, "FC");
}
