//! Prints f32 GEMM throughput of every CPU micro-kernel this machine runs, next to the
//! measured FMA peak of its vector width and the `gemm` crate as a yardstick, one thread,
//! as a Markdown table for the issue notes; then the int8 GEMM (`u8 x i8`, requantized to
//! bytes in the epilogue, activations read in place) of every int8 kernel, in GOP/s (two
//! ops per multiply-add), next to the best f32 kernel at the same shape, and the AVX2 int8
//! kernel against its ceiling (`vpmaddwd` with the `vpaddd` that accumulates it, measured).
//!
//! `cargo run --release -p baton-benches --bin gemm-report [-- --cpu-time]`
//!
//! `--cpu-time` times by the thread's CPU time instead of the wall clock, for a machine
//! shared with other work (Unix; the peak is measured on the same clock).

use baton_backend_cpu::gemm::{Isa, MicroKernel};
use baton_backend_cpu::qgemm::{ARows, PackedWeights, QGemm, QKernel, QKernelId, QOut};
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

/// Extra int8 shapes: the narrow 1x1 convolutions at the top of a mobile CNN (mobilenet's
/// 112x112 expand and project layers), where the epilogue, not the multiply, is the cost.
const NARROW: &[(usize, usize, usize)] = &[(12544, 48, 8), (12544, 8, 16), (3136, 72, 12)];

fn width_of(kernel: &MicroKernel) -> Option<Width> {
    match kernel.isa() {
        Isa::Avx2Fma => Some(Width::Avx2),
        Isa::Avx512F => Some(Width::Avx512),
        Isa::Neon => Some(Width::Neon),
        Isa::Portable => None,
    }
}

fn main() {
    let mut cpu_time = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--cpu-time" => cpu_time = true,
            other => {
                eprintln!("gemm-report: unknown argument {other:?} (takes --cpu-time)");
                std::process::exit(2);
            }
        }
    }
    if cpu_time && !baton_benches::use_thread_cpu_time() {
        eprintln!("gemm-report: this system does not give a thread's CPU time");
        std::process::exit(2);
    }
    println!("CPU: {}", baton_backend_cpu::gemm::simd_description());
    if cpu_time {
        println!("clock: the thread's CPU time");
    }
    let peaks: Vec<(Width, f64)> = Width::available()
        .into_iter()
        .map(|w| (w, peak::peak_gflops(w)))
        .collect();
    for (w, p) in &peaks {
        println!("measured FMA peak, {}: {p:.1} GFLOP/s (1 thread)", w.name());
    }
    let int8_peaks = peak::int8_peaks();
    if let Some(p) = int8_peaks {
        println!(
            "measured int8 peak, vpmaddwd: {:.1} GMAC/s alone, {:.1} GMAC/s with the vpaddd \
             that accumulates it (an exact AVX2 kernel's ceiling; 1 thread)",
            p.madd, p.madd_add
        );
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
    // The AVX2 int8 kernels' ceiling in GOP/s (two ops per multiply-add).
    int8_table(&kernels, int8_peaks.map(|p| 2.0 * p.madd_add));
}

/// The int8 GEMM next to the best f32 kernel, at the same shapes; the AVX2 kernel's rate
/// also as a share of `avx2_ceiling` (GOP/s).
fn int8_table(f32_kernels: &[&'static MicroKernel], avx2_ceiling: Option<f64>) {
    let qkernels = QKernel::available();
    print!("\n| m x n x k |");
    for k in &qkernels {
        print!(" {} |", k.name());
    }
    println!(" best f32 | int8 / f32 |");
    println!("|---|{}---|---|", "---|".repeat(qkernels.len()));
    for &(m, n, k) in SHAPES.iter().chain(NARROW) {
        let ops = 2 * (m * n * k) as u64;
        let a: Vec<u8> = (0..m * k + 4).map(|i| (i * 7919 % 251) as u8).collect();
        let b: Vec<i8> = (0..k * n).map(|i| (i * 104_729 % 255) as i8).collect();
        let w = PackedWeights::pack(1, k, n, |_, kk, j| b[kk * n + j]);
        let out = QOut {
            offset: w.col_sums().iter().map(|&s| 100 - 3 * s).collect(),
            scale: vec![0.0004; n],
            zp: 126,
            lo: 0,
            hi: 255,
            stage2: None,
        };
        let mut y = vec![0u8; m * n];
        let g = QGemm {
            m,
            a: ARows::Strided {
                data: &a,
                stride: k,
            },
            w: &w,
            out: &out,
            ldo: n,
            ints: None,
        };
        print!("| {m}x{n}x{k} |");
        let mut best_q: f64 = 0.0;
        for kernel in &qkernels {
            let rate = gemm_rate(ops, || g.run_on_caller(kernel, &mut y));
            best_q = best_q.max(rate);
            match avx2_ceiling.filter(|_| kernel.id() == QKernelId::Avx2) {
                Some(c) => print!(" {rate:.1} ({:.0}%) |", 100.0 * rate / c),
                None => print!(" {rate:.1} |"),
            }
        }
        let mut p = GemmProblem::new(m, n, k);
        let best_f = f32_kernels
            .iter()
            .map(|kernel| gemm_rate(ops, p.baton(kernel)))
            .fold(0.0, f64::max);
        println!(" {best_f:.1} | {:.2} |", best_q / best_f);
    }
    println!(
        "\nGOP/s (int8) and GFLOP/s (f32), one thread, median of 15 batches; (%) of the AVX2 \
         kernel: of the vpmaddwd + vpaddd ceiling above."
    );
}
