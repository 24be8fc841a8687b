//! Per-run cost of the Rust API and of the C API on one model (a bench, not a test):
//! `cargo run --release -p baton-capi --example overhead -- MODEL [RUNS]`.
//!
//! Every f32 input is filled with a fixed ramp, symbolic dimensions bound to 1, and the
//! model run RUNS times (10 000 by default) after 100 warm-up runs through each of: the
//! Rust API with owned tensors (`Session::run`), the Rust API on borrowed buffers
//! (`Session::run_views`), and the C API (`baton_session_run`, called here through the
//! same extern functions a C program links). Prints one line per path: mean microseconds
//! per run, as scripts/bench-embed.sh reads them.

use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use baton::*;
use baton_delegate_api::sdk::TensorRef;
use baton_delegate_api::{DType, Dim, Tensor};
use baton_runtime_host::{model, Config, Engine, Session};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().context("usage: overhead MODEL [RUNS]")?);
    let runs: usize = args.next().map_or(Ok(10_000), |r| r.parse())?;
    let graph = model::load(&path)?;
    let mut dims = BTreeMap::new();
    for &t in &graph.inputs {
        for d in &graph.tensors[t].shape {
            if let Dim::Sym(s) = d {
                dims.insert(s.clone(), 1);
            }
        }
    }
    let engine = Engine::new(Config::default())?;
    let mut session = Session::new(&engine, &graph, &dims)?;
    let inputs: Vec<Tensor> = session
        .input_shapes()
        .iter()
        .zip(&graph.inputs)
        .map(|(shape, &t)| {
            if graph.tensors[t].dtype != DType::F32 {
                bail!("input '{}' is not f32", graph.tensors[t].name);
            }
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect();
            Ok(Tensor::from_f32(shape, &v))
        })
        .collect::<Result<_>>()?;

    let time = |label: &str, f: &mut dyn FnMut() -> Result<()>| -> Result<()> {
        for _ in 0..100 {
            f()?;
        }
        let start = Instant::now();
        for _ in 0..runs {
            f()?;
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / runs as f64;
        println!("{label}\t{us:.3}");
        Ok(())
    };

    time("rust_run", &mut || {
        std::hint::black_box(session.run(&inputs)?);
        Ok(())
    })?;
    let mut sinks: Vec<Vec<u8>> = Vec::new();
    time("rust_run_views", &mut || {
        let views: Vec<TensorRef<'_>> = inputs.iter().map(|t| t.view()).collect();
        sinks.resize(graph.outputs.len(), Vec::new());
        session.run_views(&views, &mut |pos, _, _, bytes| {
            sinks[pos].clear();
            sinks[pos].extend_from_slice(bytes);
            Ok(())
        })?;
        Ok(())
    })?;
    drop(session);

    // The C API, on buffers this program owns.
    let status = |s: BatonResult| -> Result<()> {
        if s != BATON_OK {
            let msg = unsafe { std::ffi::CStr::from_ptr(baton_last_error()) };
            bail!("C API: {}", msg.to_string_lossy());
        }
        Ok(())
    };
    let (mut e, mut m, mut s) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    let c_path = CString::new(path.to_str().context("a UTF-8 path")?)?;
    let names: Vec<CString> = dims
        .keys()
        .map(|k| CString::new(k.as_str()))
        .collect::<Result<_, _>>()?;
    let c_dims: Vec<BatonDim> = names
        .iter()
        .map(|n| BatonDim {
            name: n.as_ptr(),
            value: 1,
        })
        .collect();
    unsafe {
        status(baton_engine_create(std::ptr::null(), &mut e))?;
        status(baton_model_load(c_path.as_ptr(), &mut m))?;
        status(baton_session_create(
            e,
            m,
            c_dims.as_ptr(),
            c_dims.len(),
            &mut s,
        ))?;
    }
    let c_in: Vec<BatonTensor> = inputs
        .iter()
        .map(|t| {
            let mut b = BatonTensor {
                dtype: t.dtype.code(),
                rank: t.shape.len() as u32,
                shape: [0; MAX_RANK],
                data: t.bytes().as_ptr() as *mut c_void,
                size: t.bytes().len(),
            };
            for (k, &d) in t.shape.iter().enumerate() {
                b.shape[k] = d as i64;
            }
            b
        })
        .collect();
    let mut out_bufs: Vec<Vec<u8>> = Vec::new();
    let mut n_out = 0;
    unsafe { status(baton_session_output_count(s, &mut n_out))? };
    for k in 0..n_out {
        let mut info: BatonTensorInfo = unsafe { std::mem::zeroed() };
        unsafe { status(baton_session_output(s, k, &mut info))? };
        let n: i64 = info.shape[..info.rank as usize].iter().product();
        out_bufs.push(vec![0u8; n as usize * 8]);
    }
    let mut c_out: Vec<BatonTensor> = out_bufs
        .iter_mut()
        .map(|b| BatonTensor {
            dtype: 0,
            rank: 0,
            shape: [0; MAX_RANK],
            data: b.as_mut_ptr() as *mut c_void,
            size: b.len(),
        })
        .collect();
    time("c_api_run", &mut || unsafe {
        for (o, b) in c_out.iter_mut().zip(&out_bufs) {
            o.size = b.len();
        }
        status(baton_session_run(
            s,
            c_in.as_ptr(),
            c_in.len(),
            c_out.as_mut_ptr(),
            c_out.len(),
        ))
    })?;
    unsafe {
        baton_session_free(s);
        baton_model_free(m);
        baton_engine_free(e);
    }
    Ok(())
}
