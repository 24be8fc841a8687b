//! The delegate in-process (its rlib): refusals with reasons, SRAM tiling, the command
//! stream's header checks at `init`, blob compatibility and the absent device.

mod common;

use baton_backend_npu_sim::{checksum, NpuExecutable, NpuSimDelegate, FORMAT_VERSION};
use baton_delegate_api::ir::{Attr, DType, Dim, Graph, OpKind};
use baton_delegate_api::testing::{compile, execute, supports, Hosted};
use baton_delegate_api::{
    BlobCompatibility, DeclineReason, Delegate, DelegateError, Executable, Options, Support, Tensor,
};
use common::Qdq;

/// A delegate with the given options (the rest default).
fn delegate(opts: &[(&str, &str)]) -> NpuSimDelegate {
    let given: Vec<(String, String)> = opts
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let o = Options::validate(&NpuSimDelegate::options(), &given).expect("valid options");
    NpuSimDelegate::create(&o).expect("create")
}

/// The whole lifecycle, executed once; returns the outputs and the executable (for its
/// profile and estimates).
fn run(d: &NpuSimDelegate, g: &Graph, inputs: &[Tensor]) -> (Vec<Tensor>, NpuExecutable) {
    let h = Hosted::new(g);
    let blob = h.compile(d).expect("compile");
    let mut exec = d.init(0, &blob, &h.views()).expect("init");
    let out = execute(&mut exec, g, inputs).expect("execute");
    (out, exec)
}

fn conv_net(h: usize, w: usize) -> (Graph, Vec<Tensor>) {
    let mut q = Qdq::new("tiled", 5);
    let x = q.input("x", &[1, 8, h, w], 0.04, 2);
    let (wt, ws) = q.weights("w", &[16, 8, 3, 3], 0);
    let b = q.bias("b", 0.04, &ws);
    let y = q.op(
        OpKind::Conv,
        &[x, wt, b],
        &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
    );
    let y = q.op(OpKind::Relu, &[y], &[]);
    let out = q.quantize(y, 0.05, -100);
    q.output(out)
}

fn declined(d: &NpuSimDelegate, g: &Graph) -> Vec<(String, DeclineReason, String)> {
    g.nodes
        .iter()
        .zip(supports(d, g))
        .filter_map(|(n, s)| match s {
            Support::Yes => None,
            Support::No(d) => Some((n.label(), d.reason, d.message)),
        })
        .collect()
}

#[test]
fn small_sram_tiles_more_and_gives_the_same_result() {
    let (g, i) = conv_net(24, 20);
    let big = delegate(&[]);
    let small = delegate(&[("sram_kib", "2")]);
    let (a, ea) = run(&big, &g, &i);
    let (b, eb) = run(&small, &g, &i);
    assert_eq!(a[0].bytes(), b[0].bytes(), "tiling changed the result");
    let tiles = |e: &NpuExecutable| e.estimates()[0].2.tiles;
    assert_eq!(tiles(&ea), 1);
    assert!(
        tiles(&eb) > 4,
        "2 KiB should split the conv: {} tiles",
        tiles(&eb)
    );
    // More tiles cost more DMA traffic (the input is re-read per channel block).
    assert!(eb.estimates()[0].2.dma_bytes > ea.estimates()[0].2.dma_bytes);
    let events = eb.profile();
    assert!(events[0].name.contains("tiles"), "{:?}", events[0]);
}

#[test]
fn a_conv_whose_smallest_tile_exceeds_the_sram_is_declined() {
    let (g, _) = conv_net(4, 3000);
    let d = delegate(&[("sram_kib", "4")]);
    let no = declined(&d, &g);
    let conv = no
        .iter()
        .find(|(n, _, _)| n.contains("Conv"))
        .expect("conv declined");
    assert_eq!(conv.1, DeclineReason::Resource, "{conv:?}");
    assert!(conv.2.contains("SRAM"), "{conv:?}");
    // Its DQs and Q go with it, saying why.
    assert!(no.len() >= 5, "{no:?}");
    // The default 384 KiB holds a band of that width.
    assert!(declined(&delegate(&[]), &g).is_empty());
}

#[test]
fn float_ops_are_declined_as_dtype() {
    let mut b = baton_delegate_api::GraphBuilder::new("float");
    let x = b.input_fixed("x", DType::F32, &[1, 2, 4, 4]);
    let w = b.constant_f32("w", &[3, 2, 3, 3], &[0.1; 54]);
    let y = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
    let r = b.node(OpKind::Relu, &[y], &[]).unwrap();
    let s = b.node(OpKind::Sigmoid, &[r], &[]).unwrap();
    b.output(s);
    let g = b.finish().unwrap();
    let no = declined(&delegate(&[]), &g);
    assert_eq!(no.len(), 3);
    assert_eq!(no[0].1, DeclineReason::DType, "{no:?}");
    assert!(no[0].2.contains("int8"), "{no:?}");
    assert_eq!(no[2].1, DeclineReason::Op, "{no:?}");
}

#[test]
fn a_quantized_op_the_npu_lacks_is_declined_with_its_qdq() {
    let mut q = Qdq::new("sigmoid", 1);
    let x = q.input("x", &[1, 16], 0.05, 0);
    let y = q.op(OpKind::Sigmoid, &[x], &[]);
    let out = q.quantize(y, 1.0 / 256.0, -128);
    let (g, _) = q.output(out);
    let no = declined(&delegate(&[]), &g);
    assert_eq!(no.len(), g.nodes.len(), "{no:?}");
    assert!(
        no.iter()
            .any(|(n, r, _)| n.contains("Sigmoid") && *r == DeclineReason::Op),
        "{no:?}"
    );
}

#[test]
fn dynamic_shapes_are_declined_as_shape() {
    let mut q = Qdq::new("dynamic", 2);
    let x = q.input("x", &[3, 8], 0.1, 0);
    let y = q.op(OpKind::Relu, &[x], &[]);
    let out = q.quantize(y, 0.1, 0);
    let (mut g, _) = q.output(out);
    // The batch becomes symbolic (the builder's shape inference needs it fixed).
    let input = g.inputs[0];
    g.tensors[input].shape[0] = Dim::Sym("N".into());
    let no = declined(&delegate(&[]), &g);
    let relu = no
        .iter()
        .find(|(n, _, _)| n.contains("Relu"))
        .expect("relu declined");
    assert_eq!(relu.1, DeclineReason::Shape, "{relu:?}");
    assert!(relu.2.contains("dynamic"), "{relu:?}");
}

#[test]
fn oversize_extents_and_strides_are_declined() {
    let mut q = Qdq::new("huge", 3);
    let x = q.input("x", &[1, 70_000], 0.1, 0);
    let y = q.op(OpKind::Relu, &[x], &[]);
    let out = q.quantize(y, 0.1, 0);
    let (g, _) = q.output(out);
    let no = declined(&delegate(&[]), &g);
    assert!(
        no.iter()
            .any(|(_, r, m)| *r == DeclineReason::Shape && m.contains("65536")),
        "{no:?}"
    );

    let (g, _) = {
        let mut q = Qdq::new("stride4", 4);
        let x = q.input("x", &[1, 2, 9, 9], 0.1, 0);
        let (w, ws) = q.weights("w", &[2, 2, 3, 3], 0);
        let b = q.bias("b", 0.1, &ws);
        let y = q.op(
            OpKind::Conv,
            &[x, w, b],
            &[("strides", Attr::Ints(vec![4, 4]))],
        );
        let out = q.quantize(y, 0.1, 0);
        q.output(out)
    };
    let no = declined(&delegate(&[]), &g);
    assert!(
        no.iter()
            .any(|(_, r, m)| *r == DeclineReason::Attribute && m.contains("strides")),
        "{no:?}"
    );
}

/// Rewrites the header's CRC after an edit, as a well-meaning but wrong tool would.
fn reseal(blob: &mut [u8]) {
    blob[24..28].fill(0);
    let crc = checksum(blob);
    blob[24..28].copy_from_slice(&crc.to_le_bytes());
}

fn init_error(d: &NpuSimDelegate, blob: &[u8]) -> DelegateError {
    match d.init(0, blob, &[]) {
        Ok(_) => panic!("init accepted a bad blob"),
        Err(e) => e,
    }
}

#[test]
fn init_refuses_a_corrupt_stream_by_its_checksum() {
    let (g, _) = conv_net(6, 6);
    let d = delegate(&[]);
    let mut blob = compile(&d, &g).unwrap();
    assert!(d.init(0, &blob, &[]).is_ok());
    let last = blob.len() - 7;
    blob[last] ^= 0x40;
    let e = init_error(&d, &blob);
    assert_eq!(e.status, baton_delegate_api::abi::STATUS_INVALID_ARGUMENT);
    assert!(e.message.contains("checksum mismatch"), "{}", e.message);
    assert_eq!(d.blob_compatibility(&blob), BlobCompatibility::Unsupported);
}

#[test]
fn init_refuses_a_stream_of_another_version() {
    let (g, _) = conv_net(6, 6);
    let d = delegate(&[]);
    let mut blob = compile(&d, &g).unwrap();
    blob[4..8].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    reseal(&mut blob);
    let e = init_error(&d, &blob);
    assert!(
        e.message.contains("format version 2") && e.message.contains("recompile"),
        "{}",
        e.message
    );
    assert_eq!(d.blob_compatibility(&blob), BlobCompatibility::Unsupported);
    // Not a stream at all.
    let e = init_error(&d, b"ONNX not a stream at all, really");
    assert!(e.message.contains("magic"), "{}", e.message);
}

#[test]
fn init_refuses_a_resealed_stream_whose_geometry_lies() {
    let (g, _) = conv_net(6, 6);
    let d = delegate(&[]);
    let blob = compile(&d, &g).unwrap();
    // Every single-byte change to the payload, resealed, is refused or runs safely.
    for at in (32..blob.len()).step_by(7) {
        let mut b = blob.clone();
        b[at] = b[at].wrapping_add(0x55);
        reseal(&mut b);
        if let Ok(mut exec) = d.init(0, &b, &[]) {
            let x = Tensor::zeros(DType::I8, &[1, 8, 6, 6]);
            let mut y = Tensor::zeros(DType::I8, &[1, 16, 6, 6]);
            let _ = exec.execute(&[x.view()], &mut [y.view_mut()]);
        }
    }
}

#[test]
fn blob_compatibility_is_honest() {
    let (g, _) = conv_net(6, 6);
    let d = delegate(&[]);
    let blob = compile(&d, &g).unwrap();
    assert_eq!(d.blob_compatibility(&blob), BlobCompatibility::Optimal);
    assert_eq!(
        delegate(&[("macs", "512")]).blob_compatibility(&blob),
        BlobCompatibility::PreferRecompile
    );
    assert_eq!(
        delegate(&[("sram_kib", "1024")]).blob_compatibility(&blob),
        BlobCompatibility::PreferRecompile
    );
    let smaller = delegate(&[("sram_kib", "64")]);
    assert_eq!(
        smaller.blob_compatibility(&blob),
        BlobCompatibility::Unsupported
    );
    let e = init_error(&smaller, &blob);
    assert!(
        e.message.contains("384 KiB") && e.message.contains("64 KiB"),
        "{}",
        e.message
    );
}

#[test]
fn an_absent_device_has_no_devices_and_refuses_work() {
    let d = delegate(&[("present", "false")]);
    assert!(!d.available());
    assert!(d.devices().is_empty());
    let (g, _) = conv_net(6, 6);
    let e = compile(&d, &g).unwrap_err();
    assert!(e.message.contains("no NPU present"), "{}", e.message);
    let blob = compile(&delegate(&[]), &g).unwrap();
    assert!(init_error(&d, &blob).message.contains("no NPU present"));
    let present = delegate(&[]);
    assert!(present.available());
    assert_eq!(present.devices()[0].kind, 2);
}

#[test]
fn options_are_validated_by_the_schema() {
    let decls = NpuSimDelegate::options();
    let bad = |k: &str, v: &str| Options::validate(&decls, &[(k.into(), v.into())]).unwrap_err();
    assert!(bad("macs", "7").contains("out of range"));
    assert!(bad("sram_kib", "lots").contains("integer"));
    assert!(bad("present", "maybe").contains("true or false"));
    assert!(bad("mac", "256").contains("unknown option"));
}
