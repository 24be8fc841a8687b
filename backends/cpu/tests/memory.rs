//! The ABI 1.2 memory report counts what init built beside the weights: the offset
//! tables of f32 and int8 convolutions grow with the output plane while the weights stay
//! the same, so a larger plane must report at least the larger table as owned.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::{execute, Hosted, Rng};
use baton_delegate_api::{Delegate, Executable, Tensor, TensorData};
use common::delegate;

/// Channels of every case.
const C: usize = 8;
/// Bytes of one table entry: a `u32` offset per output pixel and tap.
const ENTRY: u64 = 4;

/// The owned bytes the delegate reports for `g` once initialised, and the kernel family
/// of each step it ran (to know which path a case took).
fn owned_bytes_and_kinds(g: &Graph, input: &Tensor) -> (u64, Vec<String>) {
    let d = delegate(true);
    let h = Hosted::new(g);
    let blob = h.compile(&d).expect("compiles");
    let mut exec = d.init(0, &blob, &h.views()).expect("initialises");
    execute(&mut exec, &h.graph, std::slice::from_ref(input)).expect("runs");
    let kinds = exec.profile().into_iter().map(|e| e.kind).collect();
    let memory = exec.memory().expect("the CPU delegate reports its memory");
    (memory.owned_bytes, kinds)
}

/// A 3x3 convolution padded by `dilation` on `[1, C, side, side]`, with `group` groups and
/// the window's taps `dilation` pixels apart.
fn f32_conv(side: usize, group: usize, dilation: usize) -> (Graph, Tensor) {
    let mut rng = Rng::new(5);
    let mut g = GraphBuilder::new("conv");
    let shape = [1, C, side, side];
    let x = g.input_fixed("x", DType::F32, &shape);
    let w = g.constant_f32("w", &[C, C / group, 3, 3], &rng.vec(C * C / group * 9));
    let attrs = [
        ("pads", Attr::Ints(vec![dilation as i64; 4])),
        ("group", Attr::Int(group as i64)),
        ("dilations", Attr::Ints(vec![dilation as i64; 2])),
    ];
    let y = g.node(OpKind::Conv, &[x, w], &attrs).unwrap();
    g.output(y);
    let input = Tensor::from_f32(&shape, &rng.vec(C * side * side));
    (g.finish().unwrap(), input)
}

/// `scale` and a zero point of 0 of `dtype`, as constants.
fn qparams(g: &mut GraphBuilder, dtype: DType, name: &str, scale: f32) -> [TensorId; 2] {
    let s = g.constant_f32(&format!("{name}_s"), &[], &[scale]);
    let z = g.constant(
        &format!("{name}_z"),
        dtype,
        &[],
        TensorData::from_bytes(&[0]),
    );
    [s, z]
}

/// The QDQ form of a 3x3 convolution padded by 1 on a `u8` `[1, C, side, side]`.
fn qdq_conv(side: usize) -> (Graph, Tensor) {
    let mut g = GraphBuilder::new("qconv");
    let shape = [1, C, side, side];
    let x = g.input_fixed("x", DType::U8, &shape);
    let [s, z] = qparams(&mut g, DType::U8, "x", 0.02);
    let xd = g.node(OpKind::DequantizeLinear, &[x, s, z], &[]).unwrap();
    let wq: Vec<i8> = (0..C * C * 9).map(|i| (i * 37 % 255) as u8 as i8).collect();
    let w = g.constant("w", DType::I8, &[C, C, 3, 3], TensorData::from_slice(&wq));
    let [s, z] = qparams(&mut g, DType::I8, "w", 0.004);
    let wd = g.node(OpKind::DequantizeLinear, &[w, s, z], &[]).unwrap();
    let y = g
        .node(OpKind::Conv, &[xd, wd], &[("pads", Attr::Ints(vec![1; 4]))])
        .unwrap();
    let [s, z] = qparams(&mut g, DType::U8, "y", 0.5);
    let q = g.node(OpKind::QuantizeLinear, &[y, s, z], &[]).unwrap();
    g.output(q);
    let bytes: Vec<u8> = (0..C * side * side).map(|i| (i * 13 % 256) as u8).collect();
    let input = Tensor::from_bytes(DType::U8, &shape, &bytes);
    (g.finish().unwrap(), input)
}

/// The growth of the owned bytes from an 8x8 to a 16x16 plane, which must cover the
/// growth of one 9-tap table (the weights are the same size in both).
fn check_growth(build: impl Fn(usize) -> (Graph, Tensor), kind: &str, what: &str) {
    check_growth_by(build, kind, what, (16 * 16 - 8 * 8) * 9 * ENTRY);
}

/// The growth of the owned bytes from an 8x8 to a 16x16 plane, which must be at least
/// `table_growth`.
fn check_growth_by(
    build: impl Fn(usize) -> (Graph, Tensor),
    kind: &str,
    what: &str,
    table_growth: u64,
) {
    let [(small, kinds), (large, _)] = [8, 16].map(|side| {
        let (g, x) = build(side);
        owned_bytes_and_kinds(&g, &x)
    });
    assert!(
        kinds.iter().any(|k| k == kind),
        "{what}: no {kind} step in {kinds:?}"
    );
    assert!(
        large >= small + table_growth,
        "{what}: owned {small} B at 8x8, {large} B at 16x16; the table alone grows by \
         {table_growth} B"
    );
}

#[test]
fn f32_convolution_tables_are_reported_as_owned() {
    check_growth(|side| f32_conv(side, 1, 1), "CONV", "indirect f32 conv");
    // A dilated window takes the depthwise kernel with an offset table.
    check_growth(
        |side| f32_conv(side, C, 2),
        "CONV",
        "indirect depthwise f32 conv",
    );
    // A plain 3x3 takes the direct kernel: no table, but a row of zeros for the padding
    // rows, one input row (`side x C` floats) long.
    check_growth_by(
        |side| f32_conv(side, C, 1),
        "CONV",
        "direct depthwise f32 conv",
        (16 - 8) * C as u64 * 4,
    );
}

#[test]
fn int8_convolution_tables_are_reported_as_owned() {
    check_growth(qdq_conv, "QGEMM", "int8 conv");
}
