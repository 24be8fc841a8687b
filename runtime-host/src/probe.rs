//! Availability by proof: a backend is usable when it runs a known-answer graph through the
//! normal compile → init → execute path and matches the reference kernels. A plugin's own
//! "available" flag is recorded but never trusted alone.
//!
//! Verdicts are cached on disk, keyed by the library file's sha256, the plugin's version,
//! the options it was created with, where it runs (`isolation`), the device and its driver
//! version, and this host's version, so a second start does not probe again but any change
//! to the plugin, its options, the driver or the host does. Options belong in the key
//! because they change what a plugin computes: a verdict earned with one kernel family or
//! precision says nothing about another.
//!
//! A verdict decided by the watchdog (a plugin process killed for a timeout, or one that
//! died) is not cached: a timeout may be the machine's load rather than the plugin's
//! fault, and the next start should look again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use baton_delegate_api::{Attr, DType, Graph, GraphBuilder, OpKind, Support, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::error::{HostError, Result, TensorType};
use crate::plugin::{run_once, DeviceReport, PluginContext};
use baton_reference as reference;

/// The outcome of a probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeVerdict {
    pub passed: bool,
    /// What was run, or why it failed.
    pub detail: String,
    /// The plugin's self-reported availability at probe time.
    pub claimed_available: bool,
    /// True when this verdict was read from the cache rather than measured now.
    #[serde(skip)]
    pub from_cache: bool,
}

/// The probe cache file in `dir`.
pub fn cache_file(dir: &Path) -> PathBuf {
    dir.join("probe-cache.json")
}

/// The default cache directory: `$BATON_CACHE_DIR`, else `$XDG_CACHE_HOME/baton`, else
/// `$HOME/.cache/baton`, else a `baton-cache` folder in the system temp dir.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BATON_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("baton");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("baton");
    }
    std::env::temp_dir().join("baton-cache")
}

/// The cache key of a plugin on a device, with the options its context was created with.
pub fn cache_key(ctx: &PluginContext, device: &DeviceReport) -> String {
    // Keys and values are escaped so that no option text can forge another key's shape.
    let options: Vec<String> = ctx
        .options()
        .iter()
        .map(|(k, v)| format!("{}={}", k.escape_default(), v.escape_default()))
        .collect();
    format!(
        "{}|{}|{}|{}|{}|host-{}|options:{}|isolation:{}",
        ctx.lib.file_hash,
        ctx.lib.name,
        ctx.lib.version,
        device.name,
        device.driver_version,
        env!("CARGO_PKG_VERSION"),
        options.join(","),
        ctx.lib.isolation().as_str()
    )
}

/// Returns the cached verdict for this plugin and device, or probes and caches it.
/// A cache that cannot be read or written only costs a re-probe; it is never an error.
pub fn verdict(ctx: &PluginContext, device: &DeviceReport, cache_dir: &Path) -> ProbeVerdict {
    let key = cache_key(ctx, device);
    if let Some(v) = cached(cache_dir, &key) {
        return v;
    }
    let v = probe(ctx, device.index);
    if ctx.lib.process_failure().is_none() {
        store(cache_dir, key, &v);
    }
    v
}

/// As [`verdict`], with the probe bounded by `limit`, for a plugin in the host's process.
/// The probe runs on a thread of its own that owns the context while it runs; one that
/// has not finished in time is abandoned (a thread cannot be stopped safely: it keeps
/// running, and keeps the library loaded, until the process ends) and the plugin fails
/// with an error saying so. What it cannot bound: a probe that crashes the process, and
/// every call after the probe; `isolation = "process"` bounds those.
pub fn verdict_within(
    ctx: PluginContext,
    device: &DeviceReport,
    cache_dir: &Path,
    limit: Duration,
) -> Result<(PluginContext, ProbeVerdict)> {
    let key = cache_key(&ctx, device);
    if let Some(v) = cached(cache_dir, &key) {
        return Ok((ctx, v));
    }
    let plugin = ctx.lib.label();
    let failed = |message: String| HostError::PluginCall {
        plugin: plugin.clone(),
        call: "probe",
        status: baton_delegate_api::abi::STATUS_ERROR,
        message,
    };
    let (tx, rx) = mpsc::channel();
    let index = device.index;
    std::thread::Builder::new()
        .name("baton-probe".into())
        .spawn(move || {
            let v = probe(&ctx, index);
            let _ = tx.send((ctx, v));
        })
        .map_err(|e| failed(format!("cannot start the probe thread: {e}")))?;
    match rx.recv_timeout(limit) {
        Ok((ctx, v)) => {
            store(cache_dir, key, &v);
            Ok((ctx, v))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Err(failed(format!(
            "did not finish within {} ms (timeout_ms); the probe thread was abandoned, still \
             running (in the host's process it cannot be stopped; isolation = \"process\" \
             kills a plugin that hangs)",
            limit.as_millis()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(failed("the probe thread ended without a verdict".into()))
        }
    }
}

/// The cached verdict under `key`, if any.
fn cached(cache_dir: &Path, key: &str) -> Option<ProbeVerdict> {
    read_cache(&cache_file(cache_dir))
        .get(key)
        .map(|v| ProbeVerdict {
            from_cache: true,
            ..v.clone()
        })
}

fn read_cache(file: &Path) -> BTreeMap<String, ProbeVerdict> {
    std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Records `v` under `key`. A cache that cannot be written only costs a re-probe.
fn store(cache_dir: &Path, key: String, v: &ProbeVerdict) {
    let file = cache_file(cache_dir);
    let mut cache = read_cache(&file);
    cache.insert(key, v.clone());
    if std::fs::create_dir_all(cache_dir).is_ok() {
        // Write to a temporary file and rename, so concurrent hosts never read half a file.
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        if let Ok(text) = serde_json::to_vec_pretty(&cache) {
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, &file);
            }
        }
    }
}

/// Runs the probe graphs the plugin claims to support and compares with the reference.
pub fn probe(ctx: &PluginContext, device: u32) -> ProbeVerdict {
    let claimed_available = ctx.available_hint();
    let fail = |detail: String| ProbeVerdict {
        passed: false,
        detail,
        claimed_available,
        from_cache: false,
    };
    let mut ran = Vec::new();
    for (name, graph, inputs) in probe_graphs() {
        let answers = match ctx.supports(&graph) {
            Ok(a) => a,
            Err(e) => return fail(format!("probe '{name}': {e}")),
        };
        if answers.len() != graph.nodes.len() || answers.iter().any(|a| *a != Support::Yes) {
            continue;
        }
        let expected = match reference::run_graph(&graph, &inputs) {
            Ok(e) => e,
            Err(e) => return fail(format!("probe '{name}': reference failed: {e}")),
        };
        let got = match run_once(ctx, device, &graph, &inputs) {
            Ok(g) => g,
            Err(e) => return fail(format!("probe '{name}': {e}")),
        };
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            if let Some(msg) = mismatch(g, e) {
                return fail(format!("probe '{name}' output {i}: {msg}"));
            }
        }
        ran.push(name);
    }
    if ran.is_empty() {
        return fail("declined every probe graph (Relu, Add, MatMul+Add+Relu, Conv+Relu, int8 QDQ Conv): nothing proves it runs".into());
    }
    ProbeVerdict {
        passed: true,
        detail: format!("matched the reference on {}", ran.join(", ")),
        claimed_available,
        from_cache: false,
    }
}

fn mismatch(got: &Tensor, want: &Tensor) -> Option<String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Some(format!(
            "got {}, expected {}",
            TensorType::of(got.dtype, &got.shape),
            TensorType::of(want.dtype, &want.shape)
        ));
    }
    // Quantized outputs may differ by one step: integer requantization rounds differently
    // from the reference's float arithmetic (ties, fixed-point multipliers).
    let quantized = matches!(want.dtype, DType::I8 | DType::U8);
    for (i, (&g, &w)) in got.to_f64().iter().zip(&want.to_f64()).enumerate() {
        let within = if quantized {
            (g - w).abs() <= 1.0
        } else {
            (g - w).abs() <= 1e-4 * (1.0 + w.abs())
        };
        if !within {
            return Some(format!("element {i} is {g}, expected {w}"));
        }
    }
    None
}

/// Small graphs with known answers, from the most to the least widely supported. Values
/// are fixed (not random) so a verdict never depends on luck.
fn probe_graphs() -> Vec<(&'static str, Graph, Vec<Tensor>)> {
    let vals =
        |n: usize| -> Vec<f32> { (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.25).collect() };
    let mut out = Vec::new();

    let mut b = GraphBuilder::new("probe_relu");
    let x = b.input_fixed("x", DType::F32, &[2, 8]);
    let y = b.node(OpKind::Relu, &[x], &[]).expect("static probe graph");
    b.output(y);
    out.push((
        "Relu",
        b.finish().expect("valid"),
        vec![Tensor::from_f32(&[2, 8], &vals(16))],
    ));

    let mut b = GraphBuilder::new("probe_add");
    let x = b.input_fixed("x", DType::F32, &[3, 5]);
    let y = b.input_fixed("y", DType::F32, &[3, 5]);
    let z = b
        .node(OpKind::Add, &[x, y], &[])
        .expect("static probe graph");
    b.output(z);
    let v = vals(15);
    let w: Vec<f32> = v.iter().rev().copied().collect();
    out.push((
        "Add",
        b.finish().expect("valid"),
        vec![Tensor::from_f32(&[3, 5], &v), Tensor::from_f32(&[3, 5], &w)],
    ));

    let mut b = GraphBuilder::new("probe_mlp");
    let x = b.input_fixed("x", DType::F32, &[4, 6]);
    let w = b.constant_f32("w", &[6, 5], &vals(30));
    let bias = b.constant_f32("b", &[5], &vals(5));
    let m = b
        .node(OpKind::MatMul, &[x, w], &[])
        .expect("static probe graph");
    let a = b
        .node(OpKind::Add, &[m, bias], &[])
        .expect("static probe graph");
    let r = b.node(OpKind::Relu, &[a], &[]).expect("static probe graph");
    b.output(r);
    out.push((
        "MatMul+Add+Relu",
        b.finish().expect("valid"),
        vec![Tensor::from_f32(&[4, 6], &vals(24))],
    ));

    let mut b = GraphBuilder::new("probe_conv");
    let x = b.input_fixed("x", DType::F32, &[1, 2, 5, 5]);
    let w = b.constant_f32("w", &[3, 2, 3, 3], &vals(54));
    let c = b
        .node(
            OpKind::Conv,
            &[x, w],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .expect("static probe graph");
    let r = b.node(OpKind::Relu, &[c], &[]).expect("static probe graph");
    b.output(r);
    out.push((
        "Conv+Relu",
        b.finish().expect("valid"),
        vec![Tensor::from_f32(&[1, 2, 5, 5], &vals(50))],
    ));
    out.push(quantized_conv_probe());
    out
}

/// An int8 QDQ convolution, so that a backend that runs only quantized work (an NPU) can
/// prove itself: int8 in → DequantizeLinear → Conv (int8 weights with per-channel scales,
/// int32 bias at `x_scale * w_scale`) → QuantizeLinear → int8 out. Compared within one
/// quantization step.
fn quantized_conv_probe() -> (&'static str, Graph, Vec<Tensor>) {
    let scalar = |b: &mut GraphBuilder, name: &str, dtype: DType, bytes: &[u8]| {
        b.constant(name, dtype, &[], TensorData::from_bytes(bytes))
    };
    let mut b = GraphBuilder::new("probe_qconv");
    let x = b.input_fixed("x", DType::I8, &[1, 2, 5, 5]);
    let xs = scalar(&mut b, "x_scale", DType::F32, &0.05f32.to_le_bytes());
    let xz = scalar(&mut b, "x_zp", DType::I8, &[3]);
    let xf = b
        .node(OpKind::DequantizeLinear, &[x, xs, xz], &[])
        .expect("static probe graph");
    let w: Vec<i8> = (0..54).map(|i: i32| (i * 37 % 101 - 50) as i8).collect();
    let w = b.constant("w", DType::I8, &[3, 2, 3, 3], TensorData::from_slice(&w));
    let w_scales = [0.01f32, 0.02, 0.015];
    let ws = b.constant(
        "w_scale",
        DType::F32,
        &[3],
        TensorData::from_slice(&w_scales),
    );
    let wz = b.constant("w_zp", DType::I8, &[3], TensorData::from_slice(&[0i8; 3]));
    let axis = [("axis", Attr::Int(0))];
    let wf = b
        .node(OpKind::DequantizeLinear, &[w, ws, wz], &axis)
        .expect("static probe graph");
    let bias = b.constant(
        "b",
        DType::I32,
        &[3],
        TensorData::from_slice(&[120i32, -340, 55]),
    );
    let b_scales: Vec<f32> = w_scales.iter().map(|s| s * 0.05).collect();
    let bs = b.constant(
        "b_scale",
        DType::F32,
        &[3],
        TensorData::from_slice(&b_scales),
    );
    let bz = b.constant("b_zp", DType::I32, &[3], TensorData::from_slice(&[0i32; 3]));
    let bf = b
        .node(OpKind::DequantizeLinear, &[bias, bs, bz], &axis)
        .expect("static probe graph");
    let y = b
        .node(
            OpKind::Conv,
            &[xf, wf, bf],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .expect("static probe graph");
    let ys = scalar(&mut b, "y_scale", DType::F32, &0.04f32.to_le_bytes());
    let yz = scalar(&mut b, "y_zp", DType::I8, &[(-6i8) as u8]);
    let q = b
        .node(OpKind::QuantizeLinear, &[y, ys, yz], &[])
        .expect("static probe graph");
    b.output(q);
    let input: Vec<i8> = (0..50).map(|i: i32| (i * 53 % 97 - 48) as i8).collect();
    (
        "int8 QDQ Conv",
        b.finish().expect("valid"),
        vec![Tensor::from_bytes(
            DType::I8,
            &[1, 2, 5, 5],
            bytemuck::cast_slice(&input),
        )],
    )
}
