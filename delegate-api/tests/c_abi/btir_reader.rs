//! The C BTIR reader (`include/btir_reader.h`, the public one) against `wire.rs`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use baton_delegate_api::abi;
use baton_delegate_api::ir::{
    Attr, DType, Dim, Graph, GraphBuilder, OpKind, Quant, Storage, TensorData,
};
use baton_delegate_api::wire::{self, ConstMode};

use crate::plugin::test_graph;
use crate::tools::{c_plugin_dir, include_flag, must_succeed, output_text, path_str, run_tool};

/// Builds `btir_dump.c`, with AddressSanitizer and UBSan where the toolchain has them.
fn build_dump(dir: &Path) -> PathBuf {
    let exe = dir.join("btir_dump");
    let src = c_plugin_dir().join("btir_dump.c");
    let inc = include_flag();
    let common = [
        "-std=c99",
        "-g",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
        &inc,
        path_str(&src),
        "-o",
        path_str(&exe),
    ];
    let mut sanitized = vec![
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ];
    sanitized.extend(common);
    let out = run_tool("gcc", &sanitized);
    if !out.status.success() {
        eprintln!(
            "warning: building btir_dump with sanitizers failed; testing it without them:\n{}",
            output_text(&out)
        );
        must_succeed("gcc", &common, "building btir_dump");
    }
    exe
}

fn run_dump(exe: &Path, mode: &str, input: &Path) -> String {
    let out = run_tool(path_str(exe), &[mode, path_str(input)]);
    assert!(
        out.status.success(),
        "btir_dump {mode} crashed or failed (a sanitizer report means the reader read out \
         of bounds):\n{}",
        output_text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

fn join<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// What `btir_dump dump` must print for `g` encoded with `mode`.
fn expected_dump(g: &Graph, mode: ConstMode, ext: &[usize]) -> String {
    let mut s = String::new();
    writeln!(
        s,
        "graph name={} major={} minor={} tensors={} nodes={}",
        g.name,
        wire::WIRE_MAJOR,
        wire::WIRE_MINOR,
        g.tensors.len(),
        g.nodes.len()
    )
    .unwrap();
    for (i, t) in g.tensors.iter().enumerate() {
        let dims = join(t.shape.iter().take(abi::MAX_RANK).map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Sym(name) => format!("sym:{name}"),
        }));
        let fixed = t.shape.iter().all(|d| d.fixed().is_some()) as u8;
        write!(
            s,
            "tensor {i} name={} dtype={} rank={} dims=[{dims}] fixed={fixed}",
            t.name,
            t.dtype.code(),
            t.shape.len()
        )
        .unwrap();
        match &t.quant {
            None => write!(s, " quant=0").unwrap(),
            Some(Quant::PerTensor { scale, zero_point }) => write!(
                s,
                " quant=1 axis=0 scales=[{:08x}] zero_points=[{zero_point}]",
                scale.to_bits()
            )
            .unwrap(),
            Some(Quant::PerAxis {
                axis,
                scales,
                zero_points,
            }) => write!(
                s,
                " quant=2 axis={axis} scales=[{}] zero_points=[{}]",
                join(scales.iter().map(|f| format!("{:08x}", f.to_bits()))),
                join(zero_points)
            )
            .unwrap(),
        }
        match (&t.data, mode) {
            (None, _) => writeln!(s, " storage=0").unwrap(),
            (Some(Storage::Inline(d)), ConstMode::Inline) => writeln!(
                s,
                " storage=1 inline_len={} inline_fnv={:016x}",
                d.bytes().len(),
                fnv1a(d.bytes())
            )
            .unwrap(),
            (Some(_), ConstMode::External) => writeln!(
                s,
                " storage=2 external={}",
                ext.iter().position(|&e| e == i).unwrap()
            )
            .unwrap(),
            (Some(Storage::External(e)), ConstMode::Inline) => {
                writeln!(s, " storage=2 external={e}").unwrap()
            }
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        writeln!(
            s,
            "node {i} name={} op={} in=[{}] out=[{}] attrs={}",
            n.name,
            n.op.code(),
            join(&n.inputs),
            join(&n.outputs),
            n.attrs.len()
        )
        .unwrap();
        for (k, v) in &n.attrs {
            let value = match v {
                Attr::Int(i) => format!("int={i}"),
                Attr::Float(f) => format!("float={:08x}", f.to_bits()),
                Attr::Ints(v) => format!("ints=[{}]", join(v)),
                Attr::Floats(v) => format!(
                    "floats=[{}]",
                    join(v.iter().map(|f| format!("{:08x}", f.to_bits())))
                ),
                Attr::Str(t) => format!("str={t}"),
                // The C reader validates subgraphs and skips them; their bytes are their
                // own record, so only the kind is compared.
                Attr::Graph(_) => "graph".to_string(),
            };
            writeln!(s, "attr {k} {value}").unwrap();
        }
    }
    writeln!(s, "inputs=[{}]", join(&g.inputs)).unwrap();
    writeln!(s, "outputs=[{}]", join(&g.outputs)).unwrap();
    s
}

/// Quantization of both kinds, inline data of several dtypes, a symbolic dimension and a
/// non-ASCII name: the parts of BTIR that `test_graph` does not use.
fn quant_graph() -> Graph {
    let mut b = GraphBuilder::new("quantized-größe");
    let x = b.input("x", DType::F32, &[Dim::Sym("batch".into()), Dim::Fixed(4)]);
    let w = b.constant_f32("w", &[4], &[1.0, -2.0, 3.5, 0.0]);
    b.set_quant(
        w,
        Quant::PerAxis {
            axis: 0,
            scales: vec![0.5, 0.25, 0.125, 1.0],
            zero_points: vec![0, 1, -2, 3],
        },
    );
    let q = b.constant("q", DType::I8, &[3], TensorData::from_slice(&[1i8, -1, 7]));
    b.set_quant(
        q,
        Quant::PerTensor {
            scale: 0.1,
            zero_point: -3,
        },
    );
    let shape = b.constant_i64("shape", &[2], &[-1, 2]);
    let y = b.node(OpKind::Add, &[x, w], &[]).unwrap();
    let z = b
        .node(
            OpKind::Clip,
            &[y],
            &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
        )
        .unwrap();
    b.rename(z, "ausgabe-größe");
    b.output(z);
    let v = b.input_fixed("v", DType::F32, &[2, 3, 2]);
    let r = b
        .node(OpKind::Reshape, &[v, shape], &[("allowzero", Attr::Int(0))])
        .unwrap();
    b.output(r);
    b.finish().unwrap()
}

/// Control flow (BTIR 1.2): an If at the top level and inside a Loop's body, subgraphs
/// with inline constants of their own, two levels of nesting.
fn control_graph() -> Graph {
    let branch = |name: &str, add: Option<f32>| {
        let mut b = GraphBuilder::new(name);
        let x = b.input_fixed("x", DType::F32, &[2]);
        let y = match add {
            Some(v) => {
                let c = b.constant_f32("c", &[2], &[v, -v]);
                b.node(OpKind::Add, &[x, c], &[]).unwrap()
            }
            None => b.node(OpKind::Relu, &[x], &[]).unwrap(),
        };
        b.output(y);
        b.finish().unwrap()
    };
    let branches = |b: &mut GraphBuilder, cond, x| {
        b.named_node(
            "if",
            OpKind::If,
            &[cond, x],
            &[
                (
                    "then_branch",
                    Attr::Graph(Box::new(branch("then", Some(1.5)))),
                ),
                ("else_branch", Attr::Graph(Box::new(branch("else", None)))),
            ],
        )
        .unwrap()
    };
    let mut body = GraphBuilder::new("body");
    let _iteration = body.input_fixed("i", DType::I64, &[]);
    let cond = body.input_fixed("cond", DType::Bool, &[]);
    let v = body.input_fixed("v", DType::F32, &[2]);
    let keep = body.node(OpKind::Identity, &[cond], &[]).unwrap();
    let next = branches(&mut body, cond, v);
    body.output(keep);
    body.output(next);
    let body = body.finish().unwrap();

    let mut b = GraphBuilder::new("control");
    let cond = b.input_fixed("cond", DType::Bool, &[]);
    let x = b.input_fixed("x", DType::F32, &[2]);
    let y = branches(&mut b, cond, x);
    b.output(y);
    let trips = b.constant_i64("trips", &[], &[3]);
    let looped = b
        .named_node(
            "loop",
            OpKind::Loop,
            &[trips, cond, x],
            &[("body", Attr::Graph(Box::new(body)))],
        )
        .unwrap();
    b.output(looped);
    b.finish().unwrap()
}

fn corpus() -> Vec<(&'static str, Graph, ConstMode)> {
    vec![
        ("control graph, inline", control_graph(), ConstMode::Inline),
        ("test graph, external", test_graph(), ConstMode::External),
        ("test graph, inline", test_graph(), ConstMode::Inline),
        ("quant graph, external", quant_graph(), ConstMode::External),
        ("quant graph, inline", quant_graph(), ConstMode::Inline),
    ]
}

#[test]
fn btir_reader_reads_what_wire_rs_writes() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_dump(dir.path());
    for (label, g, mode) in corpus() {
        let (bytes, ext) = wire::encode(&g, mode);
        let file = dir.path().join("graph.btir");
        std::fs::write(&file, &bytes).unwrap();
        let got = run_dump(&exe, "dump", &file);
        let want = expected_dump(&g, mode, &ext);
        for (n, (a, b)) in got.lines().zip(want.lines()).enumerate() {
            assert_eq!(
                a,
                b,
                "{label}: line {} of the C reader's dump differs",
                n + 1
            );
        }
        assert_eq!(got.lines().count(), want.lines().count(), "{label}:\n{got}");
    }
}

#[test]
fn btir_reader_and_wire_rs_agree_on_corrupt_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_dump(dir.path());
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for (label, g, mode) in corpus() {
        let (bytes, _) = wire::encode(&g, mode);
        for n in 0..=bytes.len() {
            cases.push((format!("{label}: first {n} bytes"), bytes[..n].to_vec()));
        }
        for pos in 0..bytes.len() {
            let old = bytes[pos];
            for new in [old ^ 0x01, old ^ 0x80, 0x00, 0xFF, old.wrapping_add(4)] {
                if new != old {
                    let mut b = bytes.clone();
                    b[pos] = new;
                    cases.push((format!("{label}: byte {pos} {old:#04x} -> {new:#04x}"), b));
                }
            }
        }
    }
    // Strict UTF-8 at the edges (overlong forms, surrogates, the top of the code space),
    // which random corruption seldom reaches: patched over the 4-byte graph name "abcd".
    let mut named = GraphBuilder::new("abcd");
    let x = named.input_fixed("x", DType::F32, &[2]);
    let y = named.node(OpKind::Relu, &[x], &[]).unwrap();
    named.output(y);
    let (named, _) = wire::encode(&named.finish().unwrap(), ConstMode::External);
    let name_at = named.windows(4).position(|w| w == b"abcd").unwrap();
    for seq in [
        [0xC0, 0x80, b'a', b'a'], // overlong NUL
        [0xC1, 0xBF, b'a', b'a'], // overlong
        [0xC2, 0x80, b'a', b'a'], // U+0080
        [0xC3, 0xA4, b'a', b'a'], // ä
        [0xC3, b'a', b'a', b'a'], // missing continuation
        [0x80, b'a', b'a', b'a'], // stray continuation
        [0xE0, 0x80, 0x80, b'a'], // overlong
        [0xE0, 0xA0, 0x80, b'a'], // U+0800
        [0xED, 0x9F, 0xBF, b'a'], // U+D7FF
        [0xED, 0xA0, 0x80, b'a'], // surrogate
        [0xEE, 0x80, 0x80, b'a'], // U+E000
        [0xF0, 0x80, 0x80, 0x80], // overlong
        [0xF0, 0x90, 0x80, 0x80], // U+10000
        [0xF4, 0x8F, 0xBF, 0xBF], // U+10FFFF
        [0xF4, 0x90, 0x80, 0x80], // above U+10FFFF
        [0xF5, 0x80, 0x80, 0x80], // invalid lead
        [0xFF, b'a', b'a', b'a'], // invalid lead
    ] {
        let mut b = named.clone();
        b[name_at..name_at + 4].copy_from_slice(&seq);
        cases.push((format!("graph name bytes {seq:02x?}"), b));
    }

    let mut records = Vec::new();
    for (_, b) in &cases {
        records.extend_from_slice(&(b.len() as u64).to_le_bytes());
        records.extend_from_slice(b);
    }
    let file = dir.path().join("cases.bin");
    std::fs::write(&file, &records).unwrap();
    let verdicts = run_dump(&exe, "verdicts", &file);
    let verdicts: Vec<&str> = verdicts.lines().collect();
    assert_eq!(verdicts.len(), cases.len());

    let mut disagreements = Vec::new();
    let mut rejected = 0;
    for ((label, bytes), c) in cases.iter().zip(&verdicts) {
        let rust = wire::decode(bytes);
        let c_ok = *c == "ok";
        rejected += !c_ok as usize;
        if rust.is_ok() != c_ok {
            disagreements.push(format!(
                "{label}: wire.rs {}, C reader {c}",
                match &rust {
                    Ok(_) => "accepts".to_string(),
                    Err(e) => format!("rejects ({e})"),
                }
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} buffers get different verdicts:\n  {}",
        disagreements.len(),
        cases.len(),
        disagreements[..disagreements.len().min(20)].join("\n  ")
    );
    assert!(
        rejected > cases.len() / 2,
        "most corruptions must be rejected ({rejected} of {})",
        cases.len()
    );
}
