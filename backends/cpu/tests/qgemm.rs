//! The int8 GEMM kernels against a scalar reference, at odd shapes, for every kernel this
//! CPU can run (so each dispatch path is exercised where its features exist; under qemu,
//! `QEMU_CPU` picks which Arm paths exist).

use baton_backend_cpu::qgemm::{
    padded_k, qgemm, qgemm_reference, PackedWeights, QEpilogue, QKernel, Requant, MR,
};
use baton_delegate_api::testing::Rng;

fn check(kernel: &QKernel, m: usize, k: usize, n: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let a = rng.i8s(m * k);
    let w = rng.i8s(k * n);
    // Extremes too: -128 x -128 is the product that overflows i16 pair sums.
    let a_at = |r: usize, kk: usize| {
        if (r + kk).is_multiple_of(17) {
            -128
        } else {
            a[r * k + kk]
        }
    };
    let w_at = |kk: usize, j: usize| {
        if (kk + j).is_multiple_of(13) {
            -128
        } else {
            w[kk * n + j]
        }
    };
    let ep = QEpilogue {
        a_zero_point: -7,
        bias: (0..n).map(|j| j as i32 * 37 - 500).collect(),
        requant: (0..n)
            .map(|j| Requant::new(0.0007 + j as f64 * 1e-5))
            .collect(),
        out_zero_point: 3,
        lo: -128,
        hi: 127,
    };
    let packed = PackedWeights::pack(k, n, w_at);
    let mut panel = vec![0i8; padded_k(k) * MR];
    let mut got = vec![0; m * n];
    qgemm(kernel, m, &packed, a_at, &ep, &mut panel, |r, j, y| {
        got[r * n + j] = y
    });
    let want = qgemm_reference(m, k, n, a_at, w_at, &ep);
    assert_eq!(got, want, "{} at {m}x{k}x{n}", kernel.name());
}

#[test]
fn every_available_kernel_matches_the_scalar_reference() {
    let shapes = [
        (1, 1, 1),
        (3, 5, 7),
        (4, 8, 8),
        (5, 37, 19),
        (13, 33, 9),
        (7, 64, 48),
        (2, 300, 17),
        (9, 4, 1),
    ];
    for kernel in QKernel::available() {
        eprintln!("int8 kernel: {}", kernel.name());
        for (i, &(m, k, n)) in shapes.iter().enumerate() {
            check(kernel, m, k, n, 0x9e37_79b9 + i as u64);
        }
    }
}

#[test]
fn the_selected_kernel_is_the_first_available() {
    let best = QKernel::select(true);
    eprintln!("int8 dispatch: {}", best.name());
    assert_eq!(best.id(), QKernel::available()[0].id());
    assert_eq!(QKernel::select(false).name(), "int8 portable 4x8");
}

#[test]
fn long_k_accumulates_without_overflow() {
    // 2048 products of -128 x -128 = 33.5M: far inside i32, far outside i16.
    for kernel in QKernel::available() {
        check(kernel, 5, 2048, 9, 7);
    }
}
