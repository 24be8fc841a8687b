//! Test helpers of the CPU backend: the delegate with or without SIMD, and widening. What
//! every backend's tests share (the host emulation, seeded data, comparisons) is in
//! `baton_delegate_api::testing`.
#![allow(dead_code)]

pub mod case;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::{Delegate, Options};

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

/// f32 values widened.
pub fn wide(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}
