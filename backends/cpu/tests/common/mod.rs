//! Test helpers: a host emulation (encode → decode → supports → compile → init → execute,
//! with constants passed as views exactly as the host passes them), data and comparisons.
#![allow(dead_code)]

pub mod case;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::ir::{DType, Graph, Storage};
use baton_delegate_api::wire::{self, ConstMode};
use baton_delegate_api::{
    Constants, Delegate, DelegateError, Executable, Options, Support, Tensor, TensorMut, TensorRef,
};

/// A delegate with SIMD kernels allowed or not.
pub fn delegate(simd: bool) -> CpuDelegate {
    let opts = Options::validate(
        &CpuDelegate::options(),
        &[("disable_simd".to_string(), (!simd).to_string())],
    )
    .expect("valid options");
    CpuDelegate::create(&opts).expect("create")
}

/// The host's view of a graph: the decoded subgraph plus its constants' shapes and bytes.
pub struct Hosted {
    pub graph: Graph,
    shapes: Vec<Vec<usize>>,
    dtypes: Vec<DType>,
    bytes: Vec<Vec<u8>>,
}

impl Hosted {
    /// Serializes `g` with external constants and decodes it, as the host does.
    pub fn new(g: &Graph) -> Hosted {
        let (buf, ids) = wire::encode(g, ConstMode::External);
        let graph = wire::decode(&buf).expect("decode");
        let mut shapes = Vec::new();
        let mut dtypes = Vec::new();
        let mut bytes = Vec::new();
        for &t in &ids {
            let decl = &g.tensors[t];
            shapes.push(decl.static_shape().expect("static constant"));
            dtypes.push(decl.dtype);
            match &decl.data {
                Some(Storage::Inline(d)) => bytes.push(d.bytes().to_vec()),
                _ => panic!("builder constants are inline"),
            }
        }
        Hosted {
            graph,
            shapes,
            dtypes,
            bytes,
        }
    }

    /// The constant views (aligned copies are made by the caller through `Tensor`).
    pub fn tensors(&self) -> Vec<Tensor> {
        (0..self.shapes.len())
            .map(|i| Tensor::from_bytes(self.dtypes[i], &self.shapes[i], &self.bytes[i]))
            .collect()
    }
}

/// Views of owned tensors.
pub fn views(ts: &[Tensor]) -> Vec<TensorRef<'_>> {
    ts.iter().map(|t| t.view()).collect()
}

/// The support answers of every node.
pub fn supports(d: &CpuDelegate, g: &Graph) -> Vec<Support> {
    let h = Hosted::new(g);
    let consts = h.tensors();
    let v = views(&consts);
    d.supports(&h.graph, Constants::new(&h.graph, &v))
}

/// Runs `g` through the whole delegate lifecycle; asserts every node is claimed, executes
/// twice and checks both runs agree bit for bit.
pub fn run(d: &CpuDelegate, g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, DelegateError> {
    let h = Hosted::new(g);
    let consts = h.tensors();
    let v = views(&consts);
    let c = Constants::new(&h.graph, &v);
    for (node, s) in h.graph.nodes.iter().zip(d.supports(&h.graph, c)) {
        assert_eq!(s, Support::Yes, "node {} declined", node.label());
    }
    let blob = d.compile(0, &h.graph, c)?;
    let mut exec = d.init(0, &blob, &v)?;
    let first = execute(&mut exec, &h.graph, inputs)?;
    let second = execute(&mut exec, &h.graph, inputs)?;
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(
            a.bytes(),
            b.bytes(),
            "a second execute gave different results"
        );
    }
    Ok(first)
}

/// Executes once, with outputs shaped as the graph declares.
pub fn execute<E: Executable>(
    exec: &mut E,
    g: &Graph,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, DelegateError> {
    let mut outs: Vec<Tensor> = g
        .outputs
        .iter()
        .map(|&t| Tensor::zeros(g.tensors[t].dtype, &g.tensors[t].static_shape().unwrap()))
        .collect();
    // Poison the outputs so that an element left unwritten shows.
    for o in &mut outs {
        if o.dtype != DType::F32 {
            o.data.as_mut_slice().fill(0x5a);
            continue;
        }
        for b in o.data.as_mut_slice().chunks_exact_mut(4) {
            b.copy_from_slice(&f32::from_bits(0x7fc0_dead).to_le_bytes());
        }
    }
    let ins = views(inputs);
    let mut out_views: Vec<TensorMut<'_>> = outs.iter_mut().map(|t| t.view_mut()).collect();
    exec.execute(&ins, &mut out_views)?;
    drop(out_views);
    Ok(outs)
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

/// Asserts `got` matches `want` elementwise: NaN where NaN, equal infinities, else
/// `|got - want| <= atol + rtol * |want|`.
pub fn assert_close(got: &[f32], want: &[f64], rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = g as f64;
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(ok, "{what}: element {i}: got {g}, expected {w}");
    }
}

/// f32 values widened.
pub fn wide(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}
