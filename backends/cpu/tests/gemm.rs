//! The packed GEMM against a naive triple loop, over awkward shapes and every epilogue op,
//! and the SIMD kernel against the portable one.

mod common;

use baton_backend_cpu::gemm::{
    gemm, EpOp, Epilogue, GemmScratch, Lhs, MatMut, MatRef, MicroKernel, PackedLhs, PackedRhs, Rhs,
};
use common::Rng;

/// `(m, n, k)` shapes: tiny, empty, not multiples of any tile, and larger than each
/// cache block (MC ≈ 128 rows, NC ≈ 1024 columns, KC = 256 deep).
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (0, 5, 7),
    (5, 0, 7),
    (5, 7, 0),
    (0, 0, 0),
    (2, 3, 4),
    (6, 16, 1),
    (7, 17, 3),
    (17, 33, 65),
    (13, 9, 257),
    (3, 1030, 5),
    (130, 20, 300),
    (256, 300, 200),
];

/// The epilogue operand layouts an add can take.
#[derive(Clone, Copy, Debug)]
enum AddKind {
    PerRow,
    PerColumn,
    Scalar,
    Full,
}

/// One epilogue case: ops described independently of their data.
#[derive(Clone, Copy, Debug)]
enum Case {
    Plain,
    Scale,
    Add(AddKind),
    Relu,
    Clip,
    /// Gemm-like: scale, full add with a factor, fused per-column bias, Clip.
    Chain,
}

const CASES: &[Case] = &[
    Case::Plain,
    Case::Scale,
    Case::Add(AddKind::PerRow),
    Case::Add(AddKind::PerColumn),
    Case::Add(AddKind::Scalar),
    Case::Add(AddKind::Full),
    Case::Relu,
    Case::Clip,
    Case::Chain,
];

/// Data for the epilogue of an `m x n` output.
struct EpData {
    row: Vec<f32>,
    col: Vec<f32>,
    scalar: Vec<f32>,
    full: Vec<f32>,
}

impl EpData {
    fn new(rng: &mut Rng, m: usize, n: usize) -> EpData {
        EpData {
            row: rng.vec(m),
            col: rng.vec(n),
            scalar: rng.vec(1),
            full: rng.vec(m * n),
        }
    }

    fn add(&self, kind: AddKind, n: usize, scale: f32) -> EpOp<'_> {
        let (data, rs, cs) = match kind {
            AddKind::PerRow => (&self.row[..], 1, 0),
            AddKind::PerColumn => (&self.col[..], 0, 1),
            AddKind::Scalar => (&self.scalar[..], 0, 0),
            AddKind::Full => (&self.full[..], n, 1),
        };
        EpOp::Add {
            data,
            rs,
            cs,
            scale,
        }
    }

    fn epilogue(&self, case: Case, n: usize) -> Epilogue<'_> {
        let mut e = Epilogue::new();
        match case {
            Case::Plain => {}
            Case::Scale => e.push(EpOp::Scale(-1.5)),
            Case::Add(kind) => e.push(self.add(kind, n, 1.0)),
            Case::Relu => e.push(EpOp::Relu),
            Case::Clip => e.push(EpOp::Clip {
                min: -0.25,
                max: 0.5,
            }),
            Case::Chain => {
                e.push(EpOp::Scale(0.75));
                e.push(self.add(AddKind::Full, n, -2.0));
                e.push(self.add(AddKind::PerColumn, n, 1.0));
                e.push(EpOp::Clip {
                    min: -1.0,
                    max: 1.0,
                });
            }
        }
        e
    }
}

/// The naive reference: f64 sums, then the epilogue in f64, element by element.
fn naive(a: &[f32], b: &[f32], m: usize, n: usize, k: usize, ep: &Epilogue<'_>) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut v: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
            for op in ep.ops() {
                v = match *op {
                    EpOp::Scale(s) => v * s as f64,
                    EpOp::Add {
                        data,
                        rs,
                        cs,
                        scale,
                    } => v + scale as f64 * data[i * rs + j * cs] as f64,
                    EpOp::Relu => v.max(0.0),
                    EpOp::Clip { min, max } => v.clamp(min as f64, max as f64),
                };
            }
            c[i * n + j] = v;
        }
    }
    c
}

/// Error bound of an f32 dot product of length `k` relative to `sum |a||b|`.
fn check(
    got: &[f32],
    want: &[f64],
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
    what: &str,
) {
    assert_eq!(got.len(), want.len());
    for i in 0..m {
        for j in 0..n {
            let scale: f64 = (0..k)
                .map(|p| (a[i * k + p] as f64 * b[p * n + j] as f64).abs())
                .sum::<f64>()
                + 1.0;
            let (g, w) = (got[i * n + j] as f64, want[i * n + j]);
            assert!(
                (g - w).abs() <= 1e-5 * scale,
                "{what}: C[{i},{j}] = {g}, expected {w}"
            );
        }
    }
}

fn run(
    kernel: &MicroKernel,
    (m, n, k): (usize, usize, usize),
    a: Lhs<'_>,
    b: Rhs<'_>,
    ep: &Epilogue<'_>,
) -> Vec<f32> {
    let mut c = vec![f32::NAN; m * n];
    let mut scratch = GemmScratch::default();
    gemm(
        kernel,
        m,
        n,
        k,
        a,
        b,
        MatMut {
            data: &mut c,
            rs: n,
        },
        ep,
        &mut scratch,
    );
    c
}

fn kernels() -> Vec<&'static MicroKernel> {
    MicroKernel::available()
}

#[test]
fn matches_naive_for_every_shape_and_epilogue() {
    let mut rng = Rng::new(1);
    for kernel in kernels() {
        for &(m, n, k) in SHAPES {
            let (a, b) = (rng.vec(m * k), rng.vec(k * n));
            let data = EpData::new(&mut rng, m, n);
            for &case in CASES {
                let ep = data.epilogue(case, n);
                let want = naive(&a, &b, m, n, k, &ep);
                let lhs = Lhs::Strided(MatRef {
                    data: &a,
                    rs: k,
                    cs: 1,
                });
                let rhs = Rhs::Strided(MatRef {
                    data: &b,
                    rs: n,
                    cs: 1,
                });
                let got = run(kernel, (m, n, k), lhs, rhs, &ep);
                let what = format!("{} {m}x{n}x{k} {case:?}", kernel.name());
                check(&got, &want, &a, &b, (m, n, k), &what);
            }
        }
    }
}

#[test]
fn packed_and_transposed_operands_match_naive() {
    let mut rng = Rng::new(2);
    for kernel in kernels() {
        for &(m, n, k) in SHAPES {
            let (a, b) = (rng.vec(m * k), rng.vec(k * n));
            // Transposed copies, read back through strides.
            let at: Vec<f32> = (0..k * m).map(|x| a[(x % m) * k + x / m]).collect();
            let bt: Vec<f32> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
            let ep = Epilogue::new();
            let want = naive(&a, &b, m, n, k, &ep);
            let a_t = MatRef {
                data: &at,
                rs: 1,
                cs: m,
            };
            let b_t = MatRef {
                data: &bt,
                rs: 1,
                cs: k,
            };
            let pa = PackedLhs::new(kernel, a_t, m, k);
            let pb = PackedRhs::new(kernel, b_t, k, n);
            let what = format!("{} {m}x{n}x{k}", kernel.name());
            let got = run(kernel, (m, n, k), Lhs::Packed(&pa), Rhs::Packed(&pb), &ep);
            check(&got, &want, &a, &b, (m, n, k), &format!("{what} packed"));
            let got = run(kernel, (m, n, k), Lhs::Strided(a_t), Rhs::Strided(b_t), &ep);
            check(
                &got,
                &want,
                &a,
                &b,
                (m, n, k),
                &format!("{what} transposed"),
            );
        }
    }
}

#[test]
fn zero_depth_gives_the_epilogue_of_zeros() {
    let data = EpData {
        row: vec![1.0, -2.0],
        col: vec![0.5, 0.25, -4.0],
        scalar: vec![0.0],
        full: vec![0.0; 6],
    };
    let mut ep = Epilogue::new();
    ep.push(data.add(AddKind::PerRow, 3, 1.0));
    ep.push(data.add(AddKind::PerColumn, 3, 2.0));
    ep.push(EpOp::Relu);
    let empty: [f32; 0] = [];
    let lhs = Lhs::Strided(MatRef {
        data: &empty,
        rs: 0,
        cs: 1,
    });
    let rhs = Rhs::Strided(MatRef {
        data: &empty,
        rs: 3,
        cs: 1,
    });
    for kernel in kernels() {
        let got = run(kernel, (2, 3, 0), lhs, rhs, &ep);
        assert_eq!(got, vec![2.0, 1.5, 0.0, 0.0, 0.0, 0.0], "{}", kernel.name());
    }
}

#[test]
fn the_best_kernel_is_the_simd_one_where_the_cpu_has_it() {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") {
        assert!(MicroKernel::best().name().starts_with("avx512f"));
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        assert!(MicroKernel::best().name().starts_with("avx2"));
    }
    #[cfg(target_arch = "aarch64")]
    assert!(MicroKernel::best().name().starts_with("neon"));
    assert!(MicroKernel::portable().name().starts_with("portable"));
    assert!(std::ptr::eq(
        MicroKernel::select(false),
        MicroKernel::portable()
    ));
}

#[test]
fn simd_and_portable_kernels_agree() {
    let portable = MicroKernel::portable();
    let mut rng = Rng::new(3);
    for (&(m, n, k), simd) in SHAPES.iter().flat_map(|s| {
        MicroKernel::available()
            .into_iter()
            .skip(1)
            .map(move |k| (s, k))
    }) {
        let (a, b) = (rng.vec(m * k), rng.vec(k * n));
        let data = EpData::new(&mut rng, m, n);
        let ep = data.epilogue(Case::Chain, n);
        let lhs = Lhs::Strided(MatRef {
            data: &a,
            rs: k,
            cs: 1,
        });
        let rhs = Rhs::Strided(MatRef {
            data: &b,
            rs: n,
            cs: 1,
        });
        let x = run(simd, (m, n, k), lhs, rhs, &ep);
        let y = run(portable, (m, n, k), lhs, rhs, &ep);
        let want: Vec<f64> = y.iter().map(|&v| v as f64).collect();
        check(
            &x,
            &want,
            &a,
            &b,
            (m, n, k),
            &format!("{} vs portable", simd.name()),
        );
    }
}

#[test]
fn nan_and_inf_stay_in_their_row_and_column() {
    // Padding lanes of partial tiles must never leak into stored elements.
    let (m, n, k) = (7, 19, 5);
    let mut rng = Rng::new(4);
    let mut a = rng.vec(m * k);
    let mut b = rng.vec(k * n);
    a[3 * k + 2] = f32::NAN;
    b[4 * n + 11] = f32::INFINITY;
    for kernel in kernels() {
        let lhs = Lhs::Strided(MatRef {
            data: &a,
            rs: k,
            cs: 1,
        });
        let rhs = Rhs::Strided(MatRef {
            data: &b,
            rs: n,
            cs: 1,
        });
        let mut ep = Epilogue::new();
        ep.push(EpOp::Relu);
        let c = run(kernel, (m, n, k), lhs, rhs, &ep);
        for i in 0..m {
            for j in 0..n {
                let v = c[i * n + j];
                if i == 3 {
                    assert!(v.is_nan(), "{}: NaN lost at [{i},{j}]", kernel.name());
                } else if j == 11 {
                    assert!(v.is_infinite() || v == 0.0 || v.is_nan(), "[{i},{j}] = {v}");
                } else {
                    assert!(v.is_finite(), "{}: [{i},{j}] = {v} polluted", kernel.name());
                }
            }
        }
    }
}

#[test]
fn output_row_stride_leaves_gaps_untouched() {
    let (m, n, k) = (5, 9, 4);
    let mut rng = Rng::new(5);
    let (a, b) = (rng.vec(m * k), rng.vec(k * n));
    let rs = n + 3;
    for kernel in kernels() {
        let mut c = vec![7.0f32; m * rs];
        let mut scratch = GemmScratch::default();
        let lhs = Lhs::Strided(MatRef {
            data: &a,
            rs: k,
            cs: 1,
        });
        let rhs = Rhs::Strided(MatRef {
            data: &b,
            rs: n,
            cs: 1,
        });
        let ep = Epilogue::new();
        gemm(
            kernel,
            m,
            n,
            k,
            lhs,
            rhs,
            MatMut { data: &mut c, rs },
            &ep,
            &mut scratch,
        );
        let want = naive(&a, &b, m, n, k, &ep);
        for i in 0..m {
            check(
                &c[i * rs..i * rs + n],
                &want[i * n..(i + 1) * n],
                &a[i * k..],
                &b,
                (1, n, k),
                "strided C",
            );
            assert!(
                c[i * rs + n..(i + 1) * rs].iter().all(|&v| v == 7.0),
                "gap written"
            );
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// Random shapes (edges of every tile and the K-block boundary), operand forms and
    /// epilogues against the naive loop.
    #[test]
    fn random_problems_match_naive(
        m in 0usize..40,
        n in 0usize..40,
        k in 0usize..300,
        seed in proptest::prelude::any::<u64>(),
        packed in proptest::prelude::any::<bool>(),
        which in 0usize..8,
        case in 0usize..CASES.len(),
    ) {
        let all = MicroKernel::available();
        let kernel = all[which % all.len()];
        let mut rng = Rng::new(seed);
        let (a, b) = (rng.vec(m * k), rng.vec(k * n));
        let data = EpData::new(&mut rng, m, n);
        let ep = data.epilogue(CASES[case], n);
        let want = naive(&a, &b, m, n, k, &ep);
        let (sa, sb) = (MatRef { data: &a, rs: k, cs: 1 }, MatRef { data: &b, rs: n, cs: 1 });
        let (pa, pb) = (PackedLhs::new(kernel, sa, m, k), PackedRhs::new(kernel, sb, k, n));
        let (lhs, rhs) = if packed {
            (Lhs::Packed(&pa), Rhs::Packed(&pb))
        } else {
            (Lhs::Strided(sa), Rhs::Strided(sb))
        };
        let got = run(kernel, (m, n, k), lhs, rhs, &ep);
        check(&got, &want, &a, &b, (m, n, k), &format!("{} {m}x{n}x{k}", kernel.name()));
    }
}
