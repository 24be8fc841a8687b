//! The C plugin driven through every entry point, and its ABI-fault build variants.

use baton_delegate_api::abi::{self, Blob, Context, Descriptor};
use baton_delegate_api::ir::{Attr, DType, Dim, Graph, GraphBuilder, OpKind};
use baton_delegate_api::wire::{self, ConstMode};
use baton_delegate_api::Tensor;

use crate::host::{
    blob_bytes, c_string, call_compile, call_execute, call_init, call_supports, constant_views,
    last_error, views, HostTensor, Loaded,
};
use crate::tools::build_plugin;

/// Deterministic test values: multiples of 1/4 in [-2, 2], so every sum is exact.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 * 0.25 - 2.0)
        .collect()
}

fn relu(x: f32) -> f32 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// Input → Relu → Add(with another input) → Conv → Clip → Add(constant) → Relu → ...,
/// plus nodes the plugin must decline for each kind of reason. Between them the nodes
/// carry attributes of all five kinds, which the C reader must parse past.
pub fn test_graph() -> Graph {
    let mut b = GraphBuilder::new("c-plugin-test");
    let x = b.input_fixed("x", DType::F32, &[1, 2, 4, 4]);
    let y = b.input_fixed("y", DType::F32, &[1, 2, 4, 4]);
    let r = b.named_node("relu0", OpKind::Relu, &[x], &[]).unwrap();
    let a = b.named_node("add1", OpKind::Add, &[r, y], &[]).unwrap();
    let w = b.constant_f32("w", &[3, 2, 3, 3], &values(54, 1));
    let bias = b.constant_f32("b", &[3], &[0.25, 0.5, -0.25]);
    let c = b
        .named_node(
            "conv2",
            OpKind::Conv,
            &[a, w, bias],
            &[
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("strides", Attr::Ints(vec![1, 1])),
                ("group", Attr::Int(1)),
                ("auto_pad", Attr::Str("NOTSET".into())),
            ],
        )
        .unwrap();
    let cl = b
        .named_node(
            "clip3",
            OpKind::Clip,
            &[c],
            &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
        )
        .unwrap();
    let k = b.constant_f32("k", &[1, 3, 4, 4], &values(48, 2));
    let s = b.named_node("add4", OpKind::Add, &[cl, k], &[]).unwrap();
    let r2 = b.named_node("relu5", OpKind::Relu, &[s], &[]).unwrap();
    let one = b.constant_f32("one", &[1], &[1.0]);
    let t = b.named_node("add6", OpKind::Add, &[r2, one], &[]).unwrap();
    b.output(t);
    let i = b.input_fixed("i", DType::I32, &[4]);
    let ri = b.named_node("relu7", OpKind::Relu, &[i], &[]).unwrap();
    b.output(ri);
    let z = b.input("z", DType::F32, &[Dim::Sym("batch".into()), Dim::Fixed(4)]);
    let rz = b.named_node("relu8", OpKind::Relu, &[z], &[]).unwrap();
    b.output(rz);
    let sm = b
        .named_node(
            "softmax9",
            OpKind::Softmax,
            &[r2],
            &[
                ("axis", Attr::Int(-1)),
                // not an ONNX attribute: here so that a FLOATS attribute crosses the ABI
                ("test_floats", Attr::Floats(vec![0.5, -1.25, 3.0])),
            ],
        )
        .unwrap();
    b.output(sm);
    b.finish().unwrap()
}

/// (supported, reason, a fragment of the message) for each node of `test_graph`.
fn expected_answers() -> Vec<(bool, u32, &'static str)> {
    use abi::reason::*;
    vec![
        (true, NONE, ""),
        (true, NONE, ""),
        (false, OP, "op Conv not implemented by the C plugin"),
        (false, OP, "op Clip not implemented by the C plugin"),
        (true, NONE, ""),
        (true, NONE, ""),
        (false, SHAPE, "does not broadcast"),
        (false, DTYPE, "is i32"),
        (false, SHAPE, "symbolic"),
        (false, OP, "op Softmax not implemented by the C plugin"),
    ]
}

fn check_answers(answers: &[(bool, u32, String)]) {
    let expected = expected_answers();
    assert_eq!(answers.len(), expected.len());
    for (i, ((ok, reason, msg), (want_ok, want_reason, fragment))) in
        answers.iter().zip(&expected).enumerate()
    {
        assert_eq!(
            (ok, reason),
            (want_ok, want_reason),
            "node {i}: answer {ok} {} '{msg}'",
            abi::reason::name(*reason)
        );
        if *want_ok {
            assert!(msg.is_empty(), "node {i}: supported, yet message '{msg}'");
        } else {
            assert!(msg.contains(fragment), "node {i}: message '{msg}'");
        }
    }
}

#[test]
fn c_plugin_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = Loaded::open(&build_plugin(dir.path(), None));

    // The handshake, reading only the frozen prefix first.
    let (major, minor, size) = plugin.prefix();
    assert_eq!((major, minor), (abi::ABI_MAJOR, abi::ABI_MINOR));
    assert_eq!(size as usize, std::mem::size_of::<Descriptor>());
    let d = plugin.descriptor();
    assert_eq!(c_string(d.name), "c-relu-add");
    assert_eq!(c_string(d.version), "0.1.0");
    assert!(!c_string(d.build_id).is_empty());
    assert_eq!(d.option_count, 0);
    assert_eq!(d.features, 0);
    assert_eq!(d.concurrency, abi::concurrency::SERIALIZED_PER_HANDLE);

    // create: no options; an option is refused by name.
    let (key, value) = (c"threads", c"4");
    let opt = abi::OptionValue {
        key: key.as_ptr(),
        value: value.as_ptr(),
    };
    let mut ctx: Context = std::ptr::null_mut();
    // SAFETY: valid pointers for the call.
    let st = unsafe { (d.create)(&opt, 1, &mut ctx) };
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("'threads'"), "{}", last_error(d));
    // SAFETY: as above.
    let st = unsafe { (d.create)(std::ptr::null(), 0, &mut ctx) };
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    assert!(!ctx.is_null());

    // Devices.
    // SAFETY: ctx is live.
    unsafe {
        assert_eq!((d.available)(ctx), 1);
        assert_eq!((d.device_count)(ctx), 1);
    }
    let mut info = abi::DeviceInfo {
        struct_size: std::mem::size_of::<abi::DeviceInfo>() as u32,
        kind: 99,
        name: std::ptr::null(),
        driver_version: std::ptr::null(),
        memory_bytes: 99,
    };
    // SAFETY: ctx is live, info is writable.
    assert_eq!(
        unsafe { (d.device_info)(ctx, 0, &mut info) },
        abi::STATUS_OK
    );
    assert_eq!(
        info.struct_size as usize,
        std::mem::size_of::<abi::DeviceInfo>()
    );
    assert_eq!(info.kind, 0, "CPU");
    assert!(!c_string(info.name).is_empty());
    assert!(!c_string(info.driver_version).is_empty());
    // SAFETY: as above.
    assert_eq!(
        unsafe { (d.device_info)(ctx, 1, &mut info) },
        abi::STATUS_INVALID_ARGUMENT
    );
    assert!(last_error(d).contains("no device 1"), "{}", last_error(d));

    // supports on the whole graph, constants passed as views.
    let g = test_graph();
    let (bytes, ext) = wire::encode(&g, ConstMode::External);
    let mut consts = constant_views(&g, &ext);
    let (st, answers) = call_supports(d, ctx, &bytes, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    check_answers(&answers);

    // A corrupt graph is an error with an explanation, never a crash.
    let half = &bytes[..bytes.len() / 2];
    let (st, _) = call_supports(d, ctx, half, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    let e = last_error(d);
    assert!(
        e.starts_with("graph: ") && e.contains("BTIR truncated"),
        "{e}"
    );
    let mut bad_magic = bytes.clone();
    bad_magic[0] = b'X';
    let (st, _) = call_supports(d, ctx, &bad_magic, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("magic"), "{}", last_error(d));
    let mut bad_op = bytes.clone();
    let conv_op = find_u32_after(&bytes, b"conv2", OpKind::Conv.code());
    bad_op[conv_op..conv_op + 4].copy_from_slice(&999u32.to_le_bytes());
    let (st, _) = call_supports(d, ctx, &bad_op, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(
        last_error(d).contains("unknown op code 999"),
        "{}",
        last_error(d)
    );
    // Wrong number of answer slots; missing constant views.
    let (st, _) = call_supports(d, ctx, &bytes, &mut consts, 3);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("3 answer slots for 10 nodes"));
    let (st, _) = call_supports(d, ctx, &bytes, &mut [], g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("constant 'w'"), "{}", last_error(d));

    // Messages stay valid UTF-8 when a long non-ASCII name is truncated to fit the slot
    // (call_supports checks every message is UTF-8).
    let mut long = GraphBuilder::new("long-name");
    let wide = long.input_fixed(&"ä".repeat(200), DType::I32, &[4]);
    let out = long.node(OpKind::Relu, &[wide], &[]).unwrap();
    long.output(out);
    let long = long.finish().unwrap();
    let (long_bytes, _) = wire::encode(&long, ConstMode::External);
    let (st, answers) = call_supports(d, ctx, &long_bytes, &mut [], 1);
    assert_eq!(st, abi::STATUS_OK);
    assert_eq!(answers[0].1, abi::reason::DTYPE);
    assert!(
        answers[0].2.len() >= abi::SUPPORT_MESSAGE_LEN - 4,
        "{}",
        answers[0].2
    );

    // Compiling a declined node is refused with the reason.
    let (conv_only, _) = g.extract(&[2]);
    let mut conv_consts =
        constant_views(&conv_only, &wire::encode(&conv_only, ConstMode::External).1);
    let err = call_compile(d, ctx, &conv_only, &mut conv_consts).unwrap_err();
    assert_eq!(err.0, abi::STATUS_UNSUPPORTED);
    assert!(err.1.contains("op Conv not implemented"), "{}", err.1);

    // Partition A: relu0 + add1 (two runtime inputs, one output, one intermediate).
    let (sub_a, _) = g.extract(&[0, 1]);
    assert_eq!((sub_a.inputs.len(), sub_a.outputs.len()), (2, 1));
    let blob_a = call_compile(d, ctx, &sub_a, &mut []).unwrap();
    let blob_a_bytes = blob_bytes(&blob_a);
    // SAFETY: the blob bytes are valid for the calls.
    unsafe {
        assert_eq!(
            (d.blob_compatibility)(ctx, blob_a_bytes.as_ptr(), blob_a_bytes.len() as u64),
            abi::compat::OPTIMAL
        );
        assert_eq!(
            (d.blob_compatibility)(ctx, bytes.as_ptr(), bytes.len() as u64),
            abi::compat::UNSUPPORTED
        );
        assert_eq!(
            (d.blob_compatibility)(ctx, blob_a_bytes.as_ptr(), 7),
            abi::compat::UNSUPPORTED
        );
    }
    // init reads a copy: the host may free the plugin's blob right after.
    // SAFETY: the blob came from this context's compile.
    unsafe { (d.free_blob)(ctx, blob_a) };
    let err = call_init(d, ctx, &blob_a_bytes[..blob_a_bytes.len() - 4], &mut []).unwrap_err();
    assert_eq!(err.0, abi::STATUS_INVALID_ARGUMENT, "{}", err.1);
    let h_a = call_init(d, ctx, &blob_a_bytes, &mut []).unwrap();

    // Blobs may come from disk: corrupt ones are refused (or, if still consistent,
    // accepted), never trusted into a crash; blob_compatibility gives the same verdict.
    let mut corrupt: Vec<Vec<u8>> = (0..blob_a_bytes.len())
        .map(|n| blob_a_bytes[..n].to_vec())
        .collect();
    for pos in 0..blob_a_bytes.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut b = blob_a_bytes.clone();
            b[pos] ^= flip;
            corrupt.push(b);
        }
    }
    let mut refused = 0;
    for b in &corrupt {
        // SAFETY: the bytes are valid for the call.
        let compat = unsafe { (d.blob_compatibility)(ctx, b.as_ptr(), b.len() as u64) };
        match call_init(d, ctx, b, &mut []) {
            Ok(h) => {
                assert_eq!(compat, abi::compat::OPTIMAL);
                // SAFETY: a handle of this plugin.
                unsafe { (d.destroy)(h) };
            }
            Err((st, msg)) => {
                assert_eq!(st, abi::STATUS_INVALID_ARGUMENT, "{msg}");
                assert!(msg.starts_with("blob: "), "{msg}");
                assert_eq!(compat, abi::compat::UNSUPPORTED);
                refused += 1;
            }
        }
    }
    assert!(
        refused > corrupt.len() / 2,
        "{refused} of {} refused",
        corrupt.len()
    );

    let (xv, yv) = (values(32, 3), values(32, 4));
    let mut inputs = vec![
        HostTensor::f32s(&[1, 2, 4, 4], &xv),
        HostTensor::f32s(&[1, 2, 4, 4], &yv),
    ];
    let mut outputs = vec![HostTensor::f32s(&[1, 2, 4, 4], &[f32::NAN; 32])];
    for view in views(&mut inputs).iter().chain(&views(&mut outputs)) {
        assert_eq!(
            view.data as usize % 64,
            0,
            "host buffers are 64-byte aligned"
        );
    }
    let (st, outs) = call_execute(d, h_a, &mut inputs, &mut outputs);
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    let want: Vec<f32> = xv.iter().zip(&yv).map(|(&x, &y)| relu(x) + y).collect();
    assert_eq!(outputs[0].t.f32s(), &want[..]);
    assert_eq!(outs[0].rank, 4);
    assert_eq!(&outputs[0].shape[..4], &[1, 2, 4, 4]);

    // Wrong input count, wrong output size: INVALID_ARGUMENT, and the handle still works.
    let (st, _) = call_execute(d, h_a, &mut inputs[..1], &mut outputs);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    let count_error = last_error(d);
    assert!(count_error.contains("1 inputs passed"), "{count_error}");
    let mut small = vec![HostTensor::f32s(&[1, 2, 4, 2], &[0.0; 16])];
    small[0].shape[..4].copy_from_slice(&[1, 2, 4, 4]); // claims the right shape
    let (st, _) = call_execute(d, h_a, &mut inputs, &mut small);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("byte_len 64"), "{}", last_error(d));
    let mut f16_input = vec![
        HostTensor::new(Tensor::zeros(DType::F16, &[1, 2, 4, 4])),
        HostTensor::f32s(&[1, 2, 4, 4], &yv),
    ];
    let (st, _) = call_execute(d, h_a, &mut f16_input, &mut outputs);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("dtype"), "{}", last_error(d));

    // last_error is per thread: another thread neither sees nor overwrites this one's.
    let (st, _) = call_execute(d, h_a, &mut inputs[..1], &mut outputs);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    let ctx_addr = ctx as usize;
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(last_error(d), "", "a fresh thread starts with no error");
            let mut info = abi::DeviceInfo {
                struct_size: std::mem::size_of::<abi::DeviceInfo>() as u32,
                kind: 0,
                name: std::ptr::null(),
                driver_version: std::ptr::null(),
                memory_bytes: 0,
            };
            // SAFETY: the context is live and may be used from any thread.
            let st = unsafe { (d.device_info)(ctx_addr as Context, 7, &mut info) };
            assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
            assert!(last_error(d).contains("no device 7"));
        });
    });
    assert_eq!(last_error(d), count_error);

    let (st, _) = call_execute(d, h_a, &mut inputs, &mut outputs);
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    assert_eq!(outputs[0].t.f32s(), &want[..]);

    // Partition B: add4 (with the constant k, passed as a view) + relu5.
    let (sub_b, map_b) = g.extract(&[4, 5]);
    let (_, ext_b) = wire::encode(&sub_b, ConstMode::External);
    assert_eq!(ext_b.len(), 1, "k crosses as a constant view");
    let mut consts_b = constant_views(&sub_b, &ext_b);
    let blob_b = call_compile(d, ctx, &sub_b, &mut consts_b).unwrap();
    let blob_b_bytes = blob_bytes(&blob_b);
    // SAFETY: as above.
    unsafe { (d.free_blob)(ctx, blob_b) };
    let err = call_init(d, ctx, &blob_b_bytes, &mut []).unwrap_err();
    assert_eq!(err.0, abi::STATUS_INVALID_ARGUMENT);
    assert!(err.1.contains("constant view 0"), "{}", err.1);
    let h_b = call_init(d, ctx, &blob_b_bytes, &mut consts_b).unwrap();
    // The views were only borrowed for init: the plugin kept its own copy.
    let k_values = consts_b[0].t.f32s().to_vec();
    consts_b[0]
        .t
        .data
        .as_mut_slice()
        .copy_from_slice(&[0xFFu8; 48 * 4]);
    drop(consts_b);
    let clip_out = values(48, 5);
    let mut in_b = vec![HostTensor::f32s(&[1, 3, 4, 4], &clip_out)];
    let mut out_b = vec![HostTensor::f32s(&[1, 3, 4, 4], &[0.0; 48])];
    let (st, _) = call_execute(d, h_b, &mut in_b, &mut out_b);
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    let want_b: Vec<f32> = clip_out
        .iter()
        .zip(&k_values)
        .map(|(&c, &k)| relu(c + k))
        .collect();
    assert_eq!(out_b[0].t.f32s(), &want_b[..]);
    assert_eq!(g.tensors[map_b[sub_b.outputs[0]]].name, "relu5_out");

    // The context may be used from several threads at once.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut consts = constant_views(&g, &ext);
                for _ in 0..25 {
                    let (st, answers) =
                        call_supports(d, ctx_addr as Context, &bytes, &mut consts, g.nodes.len());
                    assert_eq!(st, abi::STATUS_OK);
                    check_answers(&answers);
                    let blob = call_compile(d, ctx_addr as Context, &sub_a, &mut []).unwrap();
                    assert_eq!(blob_bytes(&blob), blob_a_bytes);
                    // SAFETY: the blob came from this context.
                    unsafe { (d.free_blob)(ctx_addr as Context, blob) };
                }
            });
        }
    });

    // Release in the documented order: handles and blobs, then the context.
    // SAFETY: each object is released once, by the plugin that made it.
    unsafe {
        (d.destroy)(h_a);
        (d.destroy)(h_b);
        (d.destroy)(std::ptr::null_mut());
        (d.free_blob)(
            ctx,
            Blob {
                data: std::ptr::null_mut(),
                len: 0,
            },
        );
        (d.destroy_context)(ctx);
    }
}

/// The offset of the u32 `value` that follows the BTIR string `name` (a node's name).
fn find_u32_after(bytes: &[u8], name: &[u8], value: u32) -> usize {
    let mut encoded = (name.len() as u32).to_le_bytes().to_vec();
    encoded.extend_from_slice(name);
    encoded.resize(encoded.len().next_multiple_of(4), 0);
    encoded.extend_from_slice(&value.to_le_bytes());
    let at = bytes
        .windows(encoded.len())
        .position(|w| w == encoded)
        .expect("name in buffer");
    let start = at + encoded.len() - 4;
    assert_eq!(bytes[start..start + 4], value.to_le_bytes());
    start
}

#[test]
fn c_plugin_fault_variants() {
    let dir = tempfile::tempdir().unwrap();

    let wrong_major = Loaded::open(&build_plugin(dir.path(), Some("BATON_TEST_WRONG_MAJOR")));
    let (major, minor, size) = wrong_major.prefix();
    assert_eq!(major, 2);
    assert_ne!(major, abi::ABI_MAJOR, "a host must refuse this plugin");
    assert_eq!(minor, abi::ABI_MINOR);
    assert_eq!(size as usize, abi::DESCRIPTOR_V1_2_SIZE);

    let short = Loaded::open(&build_plugin(dir.path(), Some("BATON_TEST_SHORT_STRUCT")));
    let (major, _, size) = short.prefix();
    assert_eq!(major, abi::ABI_MAJOR);
    assert_eq!(size, 24);
    assert!(
        (size as usize) < abi::DESCRIPTOR_V1_SIZE,
        "a host must refuse this plugin"
    );

    let path = build_plugin(dir.path(), Some("BATON_TEST_NO_ENTRY"));
    // SAFETY: our test library.
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: looked up only; never called when missing.
    let missing = unsafe { lib.get::<abi::EntryFn>(abi::ENTRY_SYMBOL.as_bytes()) };
    let err = missing.expect_err("the entry symbol must be missing");
    assert!(
        err.to_string().contains(abi::ENTRY_SYMBOL),
        "libloading's error names the symbol: {err}"
    );
    // The library is otherwise intact: the same descriptor under another name.
    // SAFETY: the renamed entry has the entry signature.
    let desc = unsafe {
        let renamed = lib
            .get::<abi::EntryFn>(b"baton_test_renamed_entry")
            .unwrap();
        renamed()
    };
    // SAFETY: the first field of a descriptor is abi_major.
    assert_eq!(unsafe { desc.cast::<u32>().read() }, abi::ABI_MAJOR);
}
