//! Prints f32 GEMM throughput of every CPU micro-kernel this machine runs, next to the
//! measured FMA peak of its vector width and the `gemm` crate as a yardstick, one thread,
//! as a Markdown table for the issue notes.
//!
//! `cargo run --release -p baton-benches --bin gemm-report`

use baton_backend_cpu::gemm::{Isa, MicroKernel};
use baton_benches::peak::{self, Width};
use baton_benches::{gemm_rate, GemmProblem};

const SHAPES: &[(usize, usize, usize)] = &[
    (64, 64, 64),
    (49, 576, 192),
    (196, 128, 1152),
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
];

fn width_of(kernel: &MicroKernel) -> Option<Width> {
    match kernel.isa() {
        Isa::Avx2Fma => Some(Width::Avx2),
        Isa::Avx512F => Some(Width::Avx512),
        Isa::Neon => Some(Width::Neon),
        Isa::Portable => None,
    }
}

fn main() {
    println!("CPU: {}", baton_backend_cpu::gemm::simd_description());
    let peaks: Vec<(Width, f64)> = Width::available()
        .into_iter()
        .map(|w| (w, peak::peak_gflops(w)))
        .collect();
    for (w, p) in &peaks {
        println!("measured FMA peak, {}: {p:.1} GFLOP/s (1 thread)", w.name());
    }
    let peak_of = |w: Width| peaks.iter().find(|(x, _)| *x == w).map(|(_, p)| *p);
    let kernels = MicroKernel::available();
    print!("\n| m x n x k |");
    for k in &kernels {
        print!(" {} |", k.name());
    }
    println!(" gemm crate |");
    println!("|---|{}---|", "---|".repeat(kernels.len()));
    for &(m, n, k) in SHAPES {
        let mut p = GemmProblem::new(m, n, k);
        let flops = p.flops();
        print!("| {m}x{n}x{k} |");
        for kernel in &kernels {
            let rate = gemm_rate(flops, p.baton(kernel));
            match width_of(kernel).and_then(peak_of) {
                Some(pk) => print!(" {rate:.1} ({:.0}%) |", 100.0 * rate / pk),
                None => print!(" {rate:.1} |"),
            }
        }
        let rate = gemm_rate(flops, p.yardstick());
        println!(" {rate:.1} |");
    }
    println!("\nGFLOP/s, median of 15 batches; (%) of the measured peak of the kernel's width.");
}
