//! Test helpers of the CPU backend: the delegate with or without SIMD, and widening. What
//! every backend's tests share (the host emulation, seeded data, comparisons) is in
//! `baton_delegate_api::testing`.
#![allow(dead_code)]

pub mod case;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::ir::{Graph, GraphBuilder, TensorId};
use baton_delegate_api::testing::{execute, views, Hosted, Rng};
use baton_delegate_api::{Constants, Delegate, Executable, Options, Tensor};

/// A delegate with SIMD kernels allowed or not.
/// The delegate with kernel family `isa` (an `isa` option value).
pub fn delegate_isa(isa: &str) -> CpuDelegate {
    let opts = Options::validate(
        &CpuDelegate::options(),
        &[("isa".to_string(), isa.to_string())],
    )
    .expect("valid options");
    CpuDelegate::create(&opts).expect("create")
}

/// Every `isa` option value this machine runs: `auto` (the widest) first.
pub fn isas() -> Vec<&'static str> {
    let mut isas = vec!["auto"];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        isas.push("avx2");
    }
    isas.push("portable");
    isas
}

pub fn delegate(simd: bool) -> CpuDelegate {
    let opts = Options::validate(
        &CpuDelegate::options(),
        &[(
            "isa".to_string(),
            if simd { "auto" } else { "portable" }.to_string(),
        )],
    )
    .expect("valid options");
    CpuDelegate::create(&opts).expect("create")
}

/// A delegate of the widest kernels running on `threads` threads.
pub fn delegate_threads(threads: usize) -> CpuDelegate {
    let opts = Options::validate(
        &CpuDelegate::options(),
        &[("threads".to_string(), threads.to_string())],
    )
    .expect("valid options");
    CpuDelegate::create(&opts).expect("create")
}

/// The delegate with kernel family `isa` on `threads` threads.
pub fn delegate_with(isa: &str, threads: usize) -> CpuDelegate {
    let opts = Options::validate(
        &CpuDelegate::options(),
        &[
            ("isa".to_string(), isa.to_string()),
            ("threads".to_string(), threads.to_string()),
        ],
    )
    .expect("valid options");
    CpuDelegate::create(&opts).expect("create")
}

/// The outputs of one execute of `g` on `d` and the number of steps the executable ran.
pub fn run_counting(d: &CpuDelegate, g: &Graph, inputs: &[Tensor]) -> (Vec<Tensor>, usize) {
    let h = Hosted::new(g);
    let consts = h.tensors();
    let v = views(&consts);
    let blob = d
        .compile(0, &h.graph, Constants::new(&h.graph, &v))
        .unwrap();
    let mut exec = d.init(0, &blob, &v).unwrap();
    let outs = execute(&mut exec, &h.graph, inputs).unwrap();
    (outs, exec.profile().len())
}

/// A constant of `shape` holding seeded values times `scale`.
pub fn constant(b: &mut GraphBuilder, rng: &mut Rng, shape: &[usize], scale: f32) -> TensorId {
    let v: Vec<f32> = rng
        .vec(shape.iter().product())
        .into_iter()
        .map(|x| x * scale)
        .collect();
    b.constant_f32("w", shape, &v)
}

/// f32 values widened.
pub fn wide(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// `got` and `want` have the same shapes and the same f32 bits, output by output (the
/// outputs `want` has past `got`'s are not compared: a graph's intermediates exposed).
pub fn assert_same_bits(got: &[Tensor], want: &[Tensor], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape, w.shape, "output {i}, {what}");
        let same = g
            .f32s()
            .iter()
            .zip(w.f32s())
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "output {i}, {what}: {:?} vs {:?}", g.f32s(), w.f32s());
    }
}
