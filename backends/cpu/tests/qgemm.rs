//! The int8 GEMM kernels against a scalar reference, at odd shapes, strided and indirect
//! rows, for every kernel this CPU can run (so each dispatch path is exercised where its
//! features exist).

use baton_backend_cpu::gemm::Isa;
use baton_backend_cpu::qgemm::{
    qgemm_reference, ARows, Indirection, IntLayout, IntOut, PackedWeights, QGemm, QKernel,
    QKernelId, QOut, Stage2, PAD, SLACK,
};
use baton_delegate_api::testing::Rng;

/// A requantization with per-column scales, offsets and a narrowed clamp.
fn requant(n: usize, za: i32, w: &PackedWeights, stage2: bool) -> QOut {
    QOut {
        offset: (0..n)
            .map(|j| (j as i32 * 37 - 500) - za * w.col_sums()[j])
            .collect(),
        scale: (0..n).map(|j| 0.0007 + j as f32 * 1e-5).collect(),
        zp: 131,
        lo: 3,
        hi: 250,
        stage2: stage2.then(|| Stage2 {
            s1: 0.02,
            z1: 120,
            bias: (0..n).map(|j| j as f32 * 0.01 - 0.3).collect(),
            s2: 0.025,
            z2: 128,
            lo: 0,
            hi: 255,
        }),
    }
}

fn check(kernel: &QKernel, m: usize, taps: usize, c: usize, n: usize, seed: u64, stage2: bool) {
    let mut rng = Rng::new(seed);
    let w = rng.i8s(taps * c * n);
    // Extremes too: 255 x -128 is the pair sum that saturates i16 arithmetic.
    let w_at = |t: usize, ch: usize, j: usize| {
        if (t + ch + j).is_multiple_of(13) {
            -128
        } else {
            w[(t * c + ch) * n + j]
        }
    };
    let packed = PackedWeights::pack(taps, c, n, w_at);
    let za = 77;
    let out = requant(n, za, &packed, stage2);
    // `pixels` input rows of `c` bytes; row `r`, tap `t` reads pixel `(r * 3 + t) %
    // pixels`, or the zero row on every fifth entry.
    let pixels = m + taps + 1;
    let data: Vec<u8> = rng
        .i8s(pixels * c + SLACK)
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % 19 == 0 { 255 } else { v as u8 })
        .collect();
    let zero = vec![za as u8; c + SLACK];
    let table: Vec<u32> = (0..m * taps)
        .map(|i| {
            if i % 5 == 4 {
                PAD
            } else {
                (((i / taps) * 3 + i % taps) % pixels * c) as u32
            }
        })
        .collect();
    let table = Indirection::new(table);
    let pixel = |r: usize, t: usize| table.offsets()[r * taps + t];
    let a_at = |r: usize, t: usize, ch: usize| match pixel(r, t) {
        PAD => za as u8,
        o => data[o as usize + ch],
    };
    let mut got = vec![0u8; m * n];
    let g = QGemm {
        m,
        a: ARows::Indirect {
            data: &data,
            table: &table,
            zero: &zero,
        },
        w: &packed,
        out: &out,
        ldo: n,
        ints: None,
    };
    g.run_on_caller(kernel, &mut got);
    let want = qgemm_reference(m, &packed, w_at, a_at, za, &out);
    assert_eq!(
        got,
        want,
        "{} indirect at {m}x{taps}x{c}x{n}",
        kernel.name()
    );
    if taps == 1 {
        let g = QGemm {
            a: ARows::Strided {
                data: &data,
                stride: c,
            },
            ..g
        };
        g.run_on_caller(kernel, &mut got);
        let want = qgemm_reference(m, &packed, w_at, |r, _, ch| data[r * c + ch], za, &out);
        assert_eq!(got, want, "{} strided at {m}x{c}x{n}", kernel.name());
    }
}

#[test]
fn every_available_kernel_matches_the_scalar_reference() {
    let shapes = [
        (1, 1, 1, 1),
        (3, 1, 5, 7),
        (4, 9, 8, 16),
        (5, 1, 37, 19),
        (13, 9, 3, 33),
        (7, 1, 64, 48),
        (2, 1, 300, 17),
        (9, 4, 4, 1),
        (17, 40, 6, 20),
        (6, 1, 20, 29),
        // One call's row at the most a kernel widens ahead (2048 values) and past it.
        (5, 1, 2048, 18),
        (3, 9, 240, 21),
        // One row past the short products (AVX2, VNNI: tiles of one row), strided and
        // indirect, widened ahead and not, with a short last panel.
        (1, 1, 640, 37),
        (1, 9, 20, 16),
        (1, 1, 3000, 9),
    ];
    for kernel in QKernel::available() {
        eprintln!("int8 kernel: {}", kernel.name());
        for (i, &(m, taps, c, n)) in shapes.iter().enumerate() {
            check(kernel, m, taps, c, n, 0x9e37_79b9 + i as u64, i % 2 == 1);
        }
    }
}

#[test]
fn the_isa_option_picks_the_int8_kernel() {
    let best = QKernel::for_isa(Isa::Avx512F);
    eprintln!("int8 dispatch: {}", best.name());
    assert_eq!(QKernel::for_isa(Isa::Portable).id(), QKernelId::Portable);
    #[cfg(not(target_arch = "aarch64"))]
    assert_eq!(QKernel::for_isa(Isa::Neon).id(), QKernelId::Portable);
    if QKernel::available()
        .iter()
        .any(|k| k.id() == QKernelId::Avx2)
    {
        assert_eq!(QKernel::for_isa(Isa::Avx2Fma).id(), QKernelId::Avx2);
    }
}

#[test]
fn long_k_accumulates_without_overflow() {
    // 2048 products of 255 x -128: far inside i32, far outside i16.
    for kernel in QKernel::available() {
        check(kernel, 5, 1, 2048, 9, 7, false);
    }
}

#[cfg(target_arch = "aarch64")]
#[test]
fn aarch64_runs_neon_and_takes_sdot_where_the_cpu_has_dotprod() {
    let ids: Vec<QKernelId> = QKernel::available().iter().map(|k| k.id()).collect();
    let dot = std::arch::is_aarch64_feature_detected!("dotprod");
    eprintln!("int8 kernels: {ids:?} (dotprod: {dot})");
    assert!(ids.contains(&QKernelId::Neon));
    assert_eq!(ids.contains(&QKernelId::NeonDot), dot);
    let want = if dot {
        QKernelId::NeonDot
    } else {
        QKernelId::Neon
    };
    assert_eq!(QKernel::for_isa(Isa::Neon).id(), want);
}

/// One random product: every shape dimension through its tails (rows past a tile,
/// columns past a panel, channels past a 4-byte block and past a group of four blocks,
/// taps past one kernel call), random zero points, per-column scales and offsets, a
/// clamp, sometimes a second stage, and scales large enough to reach the pre-rounding
/// bound.
fn random_case(rng: &mut Rng) -> (QGemmCase, PackedWeights, QOut) {
    let m = 1 + rng.below(19);
    let taps = if rng.below(3) == 0 {
        1
    } else {
        1 + rng.below(45)
    };
    let c = 1 + rng.below(if taps > 8 { 24 } else { 80 });
    let n = 1 + rng.below(50);
    let w = rng.i8s(taps * c * n);
    let packed = PackedWeights::pack(taps, c, n, |t, ch, j| w[(t * c + ch) * n + j]);
    let za = rng.int(0, 255) as i32;
    let zp = rng.int(0, 255) as i32;
    let lo = rng.int(0, 120) as i32;
    let hi = rng.int(lo as i64, 255) as i32;
    let big = rng.below(4) == 0;
    let out = QOut {
        offset: (0..n)
            .map(|j| rng.int(-40_000, 40_000) as i32 - za * packed.col_sums()[j])
            .collect(),
        scale: (0..n)
            .map(|_| {
                if big {
                    rng.f32_in(1.0, 5_000.0)
                } else {
                    rng.f32_in(1e-5, 0.02)
                }
            })
            .collect(),
        zp,
        lo,
        hi,
        stage2: (rng.below(3) == 0).then(|| Stage2 {
            s1: rng.f32_in(0.001, 0.1),
            z1: zp,
            bias: rng.vec_in(n, -2.0, 2.0),
            s2: rng.f32_in(0.001, 0.1),
            z2: rng.int(0, 255) as i32,
            lo: 0,
            hi: 255,
        }),
    };
    let stride = c + rng.below(5);
    let pixels = m + taps + 3;
    // Both ends of the byte range often: 0 flips to -128, the sign the NEON kernels meet
    // against a -128 weight.
    let data: Vec<u8> = (0..pixels * stride + SLACK)
        .map(|_| match rng.below(8) {
            0 => 0,
            1 => 255,
            _ => rng.int(0, 255) as u8,
        })
        .collect();
    let table = (0..m * taps)
        .map(|_| {
            if rng.below(6) == 0 {
                PAD
            } else {
                (rng.below(pixels) * stride) as u32
            }
        })
        .collect();
    let case = QGemmCase {
        m,
        taps,
        stride,
        data,
        zero: vec![za as u8; c + SLACK],
        table: Indirection::new(table),
    };
    (case, packed, out)
}

/// The inputs of one random product.
struct QGemmCase {
    m: usize,
    taps: usize,
    stride: usize,
    data: Vec<u8>,
    zero: Vec<u8>,
    table: Indirection,
}

#[test]
fn every_kernel_stores_the_portable_kernels_bytes_on_random_shapes() {
    let portable = QKernel::for_isa(Isa::Portable);
    let simd: Vec<&QKernel> = QKernel::available()
        .into_iter()
        .filter(|k| k.id() != QKernelId::Portable)
        .collect();
    let mut rng = Rng::new(0x5eed_0a8c);
    for case_no in 0..120 {
        let (case, packed, out) = random_case(&mut rng);
        let n = packed.n();
        let mut runs = vec![(
            "indirect",
            ARows::Indirect {
                data: &case.data,
                table: &case.table,
                zero: &case.zero,
            },
        )];
        if case.taps == 1 {
            runs.push((
                "strided",
                ARows::Strided {
                    data: &case.data,
                    stride: case.stride,
                },
            ));
        }
        for (how, a) in runs {
            // Written at a row stride wider than `n`: the bytes between rows stay put.
            let ldo = n + 3;
            let g = QGemm {
                m: case.m,
                a,
                w: &packed,
                out: &out,
                ldo,
                ints: None,
            };
            let mut want = vec![0xa5u8; case.m * ldo];
            g.run_on_caller(portable, &mut want);
            for kernel in &simd {
                let mut got = vec![0xa5u8; case.m * ldo];
                g.run_on_caller(kernel, &mut got);
                assert_eq!(
                    got,
                    want,
                    "case {case_no}: {} {how} at m {} taps {} c {} n {n} (stage2: {})",
                    kernel.name(),
                    case.m,
                    case.taps,
                    packed.c(),
                    out.stage2.is_some(),
                );
            }
        }
    }
}

/// The exact i32 product (MatMulInteger, ConvInteger) of `m` rows through an indirection
/// with padding, per-row activation and per-column weight zero points, written NCHW-like
/// (column stride `m`), against `sum (a - za) * (w - zw)` in i64 wrapped to i32. With
/// `c` large the sum leaves i32: the kernels must wrap, never saturate.
fn check_ints(kernel: &QKernel, m: usize, taps: usize, c: usize, n: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let w = rng.i8s(taps * c * n);
    let w_at = |t: usize, ch: usize, j: usize| {
        if (t + ch + j).is_multiple_of(7) {
            -128
        } else {
            w[(t * c + ch) * n + j]
        }
    };
    let packed = PackedWeights::pack(taps, c, n, w_at);
    let za: Vec<i32> = (0..m).map(|r| (r as i32 * 41) % 256).collect();
    let zw: Vec<i32> = (0..n).map(|j| (j as i32 * 29) % 256 - 128).collect();
    let k = (taps * c) as i32;
    let ccol: Vec<i32> = (0..n)
        .map(|j| packed.col_sums()[j].wrapping_sub(k.wrapping_mul(zw[j])))
        .collect();
    let pixels = m + taps + 1;
    let data: Vec<u8> = rng
        .i8s(pixels * c + SLACK)
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % 3 == 0 { 255 } else { v as u8 })
        .collect();
    // One zero row serves every row here, so one activation zero point for the padded
    // rows: rows with padding use row 0's.
    let zero = vec![za[0] as u8; c + SLACK];
    let table: Vec<u32> = (0..m * taps)
        .map(|i| {
            if i % 5 == 4 && i / taps == 0 {
                PAD
            } else {
                (((i / taps) * 3 + i % taps) % pixels * c) as u32
            }
        })
        .collect();
    let table = Indirection::new(table);
    let a_at = |r: usize, t: usize, ch: usize| match table.offsets()[r * taps + t] {
        PAD => za[0] as u8,
        o => data[o as usize + ch],
    };
    let io = IntOut {
        za: &za,
        ccol: &ccol,
        zw: &zw,
        row_sums: true,
        layout: IntLayout {
            block: m,
            block_stride: m * n,
            row_stride: 1,
            col_stride: m,
        },
    };
    let unused = requant(n, 0, &packed, false);
    let g = QGemm {
        m,
        a: ARows::Indirect {
            data: &data,
            table: &table,
            zero: &zero,
        },
        w: &packed,
        out: &unused,
        ldo: 0,
        ints: Some(&io),
    };
    let mut got = vec![0xa5u8; m * n * 4];
    g.run_on_caller(kernel, &mut got);
    for (r, &zr) in za.iter().enumerate() {
        for (j, &zj) in zw.iter().enumerate() {
            let mut sum = 0i64;
            for t in 0..taps {
                for ch in 0..c {
                    sum +=
                        (a_at(r, t, ch) as i64 - zr as i64) * (w_at(t, ch, j) as i64 - zj as i64);
                }
            }
            let at = (j * m + r) * 4;
            let v = i32::from_ne_bytes(got[at..at + 4].try_into().unwrap());
            assert_eq!(
                v,
                sum as i32,
                "{} i32 at ({r}, {j}) of {m}x{taps}x{c}x{n}",
                kernel.name()
            );
        }
    }
}

#[test]
fn every_kernel_computes_exact_wrapping_i32_products() {
    // Every kernel this CPU runs, the NEON ones (signed activation bytes, corrected in the
    // i32 stage) included under qemu.
    let kernels = QKernel::available();
    assert!(kernels.iter().any(|k| k.id() == QKernelId::Portable));
    for kernel in kernels {
        for (i, &(m, taps, c, n)) in [
            (1, 1, 1, 1),
            (5, 3, 7, 19),
            (9, 9, 5, 33),
            (3, 1, 70_001, 2),
            (1, 1, 300, 21),
        ]
        .iter()
        .enumerate()
        {
            check_ints(kernel, m, taps, c, n, 900 + i as u64);
        }
    }
}
