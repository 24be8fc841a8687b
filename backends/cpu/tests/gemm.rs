//! The weight-stationary GEMM against a naive triple loop, over awkward shapes, every
//! epilogue form, dense and indirect rows, on every kernel this CPU runs.

mod common;

use baton_backend_cpu::gemm::{
    gemm, Add, Epilogue, Indirection, MatMut, MatRef, MicroKernel, PackedB, Rows,
};
use baton_delegate_api::testing::Rng;

/// `(m, n, k)` shapes: tiny, empty, not multiples of any tile, and deep.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (0, 5, 7),
    (5, 0, 7),
    (5, 7, 0),
    (0, 0, 0),
    (2, 3, 4),
    (6, 16, 1),
    // A last panel of exactly one vector of columns (8), and of 8 + 4 (12): the kernels
    // store whole vectors and short ones differently.
    (5, 8, 3),
    (9, 24, 10),
    (7, 12, 6),
    (7, 17, 3),
    (17, 33, 65),
    (13, 9, 257),
    (3, 1030, 5),
    (130, 20, 300),
    (100, 70, 200),
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
    Bias,
    Add(AddKind),
    Relu,
    Clip,
    /// Gemm-like: bias, full add with a factor, per-row add, Clip.
    Chain,
}

const CASES: &[Case] = &[
    Case::Plain,
    Case::Bias,
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

    fn add(&self, kind: AddKind, n: usize, scale: f32) -> Add<'_> {
        let (data, rs, cs) = match kind {
            AddKind::PerRow => (&self.row[..], 1, 0),
            AddKind::PerColumn => (&self.col[..], 0, 1),
            AddKind::Scalar => (&self.scalar[..], 0, 0),
            AddKind::Full => (&self.full[..], n, 1),
        };
        Add {
            data,
            rs,
            cs,
            scale,
        }
    }

    /// The epilogue of `case`, and whether the bias is packed.
    fn epilogue(&self, case: Case, n: usize) -> (Epilogue<'_>, bool) {
        let mut e = Epilogue::new();
        let mut bias = false;
        match case {
            Case::Plain => {}
            Case::Bias => bias = true,
            Case::Add(kind) => e.add(self.add(kind, n, 1.0)),
            Case::Relu => e.clamp(0.0, f32::INFINITY),
            Case::Clip => e.clamp(-0.25, 0.5),
            Case::Chain => {
                bias = true;
                e.add(self.add(AddKind::Full, n, -2.0));
                e.add(self.add(AddKind::PerRow, n, 1.0));
                e.clamp(-1.0, 1.0);
            }
        }
        (e, bias)
    }
}

/// The naive reference: f64 sums from the bias, then the epilogue in f64.
fn naive(
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
    bias: Option<&[f32]>,
    ep: &Epilogue<'_>,
) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    let (lo, hi) = ep.bounds();
    for i in 0..m {
        for j in 0..n {
            let mut v: f64 = bias.map_or(0.0, |b| b[j] as f64)
                + (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum::<f64>();
            for add in ep.adds() {
                v += add.scale as f64 * add.data[i * add.rs + j * add.cs] as f64;
            }
            c[i * n + j] = v.max(lo as f64).min(hi as f64);
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
                + 4.0;
            let (g, w) = (got[i * n + j] as f64, want[i * n + j]);
            assert!(
                (g - w).abs() <= 1e-5 * scale,
                "{what}: C[{i},{j}] = {g}, expected {w}"
            );
        }
    }
}

fn packed(
    kernel: &MicroKernel,
    b: &[f32],
    (k, n): (usize, usize),
    bias: Option<&[f32]>,
) -> PackedB {
    let view = MatRef {
        data: b,
        rs: n,
        cs: 1,
    };
    PackedB::from_matrix(kernel, view, k, n, bias)
}

fn run(kernel: &MicroKernel, m: usize, a: Rows<'_>, b: &PackedB, ep: &Epilogue<'_>) -> Vec<f32> {
    let n = b.n();
    let mut c = vec![f32::NAN; m * n];
    gemm(
        kernel,
        m,
        a,
        b,
        MatMut {
            data: &mut c,
            rs: n,
        },
        ep,
    );
    c
}

/// The `m x taps * kc` dense `A` an indirect product over `x` stands for: row `i`'s tap
/// `t` is `kc` values of `x` from offset `tap(i, t)`, or zeros where that is `None`.
fn gathered(
    x: &[f32],
    (m, taps, kc): (usize, usize, usize),
    tap: impl Fn(usize, usize) -> Option<usize>,
) -> Vec<f32> {
    let k = taps * kc;
    let mut a = vec![0f32; m * k];
    for i in 0..m {
        for t in 0..taps {
            if let Some(o) = tap(i, t) {
                a[i * k + t * kc..i * k + (t + 1) * kc].copy_from_slice(&x[o..o + kc]);
            }
        }
    }
    a
}

/// A dense product `a [m, k] · b [k, n]` with `bias` and the epilogue `ep` against the
/// sequential sum, bit for bit.
fn dense_is_sequential(
    kernel: &MicroKernel,
    (a, b, bias): (&[f32], &[f32], &[f32]),
    (m, n, k): (usize, usize, usize),
    ep: &Epilogue<'_>,
    what: &str,
) {
    let pb = packed(kernel, b, (k, n), Some(bias));
    let got = run(kernel, m, Rows::Dense { data: a, lda: k }, &pb, ep);
    let want = sequential(kernel, a, b, (m, n, k), bias, ep);
    let same = got
        .iter()
        .zip(&want)
        .all(|(x, y)| x.to_bits() == y.to_bits());
    assert!(same, "{what}: not the sequential sum");
}

/// An indirect product (`m x n`, `taps` of `kc` from seeded rows of `x` at `tap(i, t)`, a
/// seeded bias, the epilogue `ep`) against the sequential sum of its gathered dense
/// product, bit for bit.
fn indirect_is_sequential(
    kernel: &MicroKernel,
    rng: &mut Rng,
    (m, n, kc, taps): (usize, usize, usize, usize),
    tap: impl Fn(usize, usize) -> Option<usize> + Copy,
    ep: &Epilogue<'_>,
    what: &str,
) {
    let x = rng.vec((m + taps) * kc);
    let k = taps * kc;
    let a = gathered(&x, (m, taps, kc), tap);
    let (b, bias) = (rng.vec(k * n), rng.vec(n));
    let pb = PackedB::new(kernel, taps, kc, n, Some(&bias), |p, j| b[p * n + j]);
    let ind = Indirection::new(kernel, m, taps, kc, |i, t| tap(i, t).map(|o| o as u32));
    let rows = Rows::Indirect {
        data: &x,
        ind: &ind,
    };
    let got = run(kernel, m, rows, &pb, ep);
    let want = sequential(kernel, &a, &b, (m, n, k), &bias, ep);
    let same = got
        .iter()
        .zip(&want)
        .all(|(x, y)| x.to_bits() == y.to_bits());
    assert!(same, "{what}: not the sequential sum");
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
                let (ep, with_bias) = data.epilogue(case, n);
                let bias = with_bias.then_some(&data.col[..]);
                let want = naive(&a, &b, (m, n, k), bias, &ep);
                let pb = packed(kernel, &b, (k, n), bias);
                let got = run(kernel, m, Rows::Dense { data: &a, lda: k }, &pb, &ep);
                let what = format!("{} {m}x{n}x{k} {case:?}", kernel.name());
                check(&got, &want, &a, &b, (m, n, k), &what);
            }
        }
    }
}

#[test]
fn strided_rows_and_transposed_weights_match_naive() {
    let mut rng = Rng::new(2);
    for kernel in kernels() {
        for &(m, n, k) in SHAPES {
            let (a, b) = (rng.vec(m * k), rng.vec(k * n));
            // A with 3 floats of gap after each row; B stored transposed.
            let lda = k + 3;
            let mut a_gap = vec![f32::NAN; m * lda];
            for i in 0..m {
                a_gap[i * lda..i * lda + k].copy_from_slice(&a[i * k..(i + 1) * k]);
            }
            let bt: Vec<f32> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
            let b_t = MatRef {
                data: &bt,
                rs: 1,
                cs: k,
            };
            let pb = PackedB::from_matrix(kernel, b_t, k, n, None);
            let ep = Epilogue::new();
            let want = naive(&a, &b, (m, n, k), None, &ep);
            let got = run(kernel, m, Rows::Dense { data: &a_gap, lda }, &pb, &ep);
            let what = format!("{} {m}x{n}x{k} strided", kernel.name());
            check(&got, &want, &a, &b, (m, n, k), &what);
        }
    }
}

/// Indirect rows: output row `i` reads, for tap `t`, input row `(i + t) % rows` or zeros
/// where `(i + t) % 3 == 0`; the same as a dense product over the gathered rows.
#[test]
fn indirect_rows_match_the_gathered_dense_product() {
    let mut rng = Rng::new(3);
    for kernel in kernels() {
        for &(m, n, kc, taps) in &[(1, 1, 1, 1), (7, 19, 5, 3), (13, 40, 16, 9), (30, 33, 3, 4)] {
            let rows = m + 2;
            let x = rng.vec(rows * kc);
            let tap =
                |i: usize, t: usize| (!(i + t).is_multiple_of(3)).then_some(((i + t) % rows) * kc);
            let k = taps * kc;
            let a = gathered(&x, (m, taps, kc), tap);
            let b = rng.vec(k * n);
            let bias = rng.vec(n);
            let pb = PackedB::new(kernel, taps, kc, n, Some(&bias), |p, j| b[p * n + j]);
            let ind = Indirection::new(kernel, m, taps, kc, |i, t| tap(i, t).map(|o| o as u32));
            let mut ep = Epilogue::new();
            ep.clamp(-0.5, 0.5);
            let want = naive(&a, &b, (m, n, k), Some(&bias), &ep);
            let got = run(
                kernel,
                m,
                Rows::Indirect {
                    data: &x,
                    ind: &ind,
                },
                &pb,
                &ep,
            );
            let what = format!("{} indirect {m}x{n}x{kc}x{taps}", kernel.name());
            check(&got, &want, &a, &b, (m, n, k), &what);
        }
    }
}

#[test]
fn zero_depth_gives_the_epilogue_of_the_bias() {
    let data = EpData {
        row: vec![1.0, -2.0],
        col: vec![0.5, 0.25, -4.0],
        scalar: vec![0.0],
        full: vec![0.0; 6],
    };
    let mut ep = Epilogue::new();
    ep.add(data.add(AddKind::PerRow, 3, 1.0));
    ep.add(data.add(AddKind::PerColumn, 3, 2.0));
    ep.clamp(0.0, f32::INFINITY);
    let empty: [f32; 0] = [];
    let bias = [1.0, 0.0, 0.0];
    for kernel in kernels() {
        let pb = packed(kernel, &empty, (0, 3), Some(&bias));
        let got = run(
            kernel,
            2,
            Rows::Dense {
                data: &empty,
                lda: 0,
            },
            &pb,
            &ep,
        );
        assert_eq!(got, vec![3.0, 1.5, 0.0, 0.0, 0.0, 0.0], "{}", kernel.name());
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
    let mut rng = Rng::new(4);
    for (&(m, n, k), simd) in SHAPES.iter().flat_map(|s| {
        MicroKernel::available()
            .into_iter()
            .skip(1)
            .map(move |k| (s, k))
    }) {
        let (a, b) = (rng.vec(m * k), rng.vec(k * n));
        let data = EpData::new(&mut rng, m, n);
        let (ep, _) = data.epilogue(Case::Chain, n);
        let rows = Rows::Dense { data: &a, lda: k };
        let x = run(
            simd,
            m,
            rows,
            &packed(simd, &b, (k, n), Some(&data.col)),
            &ep,
        );
        let y = run(
            portable,
            m,
            rows,
            &packed(portable, &b, (k, n), Some(&data.col)),
            &ep,
        );
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
    let mut rng = Rng::new(5);
    let mut a = rng.vec(m * k);
    let mut b = rng.vec(k * n);
    a[3 * k + 2] = f32::NAN;
    b[4 * n + 11] = f32::INFINITY;
    for kernel in kernels() {
        let mut ep = Epilogue::new();
        ep.clamp(0.0, f32::INFINITY);
        let pb = packed(kernel, &b, (k, n), None);
        let c = run(kernel, m, Rows::Dense { data: &a, lda: k }, &pb, &ep);
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
    let mut rng = Rng::new(6);
    let (a, b) = (rng.vec(m * k), rng.vec(k * n));
    let rs = n + 3;
    for kernel in kernels() {
        let mut c = vec![7.0f32; m * rs];
        let ep = Epilogue::new();
        let pb = packed(kernel, &b, (k, n), None);
        let rows = Rows::Dense { data: &a, lda: k };
        gemm(kernel, m, rows, &pb, MatMut { data: &mut c, rs }, &ep);
        let want = naive(&a, &b, (m, n, k), None, &ep);
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

/// Products of 1 to 9 rows, so that every kernel runs a tile of each row count it has
/// (the kernels compile one per count below their `MR`): dense and deep enough for depth
/// blocks (the partial sums reloaded from `C`), and indirect over several taps with
/// padding, each against the sequential sum, bit for bit.
#[test]
fn tiles_of_every_row_count_keep_the_bits_of_one_sequential_sum() {
    let mut rng = Rng::new(12);
    for kernel in kernels() {
        for m in 1..=9 {
            let what = format!("{} {m} rows", kernel.name());
            let (n, k) = (37, 1100);
            let (a, b, bias) = (rng.vec(m * k), rng.vec(k * n), rng.vec(n));
            let data = EpData::new(&mut rng, m, n);
            let mut ep = Epilogue::new();
            ep.add(data.add(AddKind::Full, n, 0.5));
            ep.clamp(-3.0, 3.0);
            let what = format!("{what}, dense");
            dense_is_sequential(kernel, (&a, &b, &bias), (m, n, k), &ep, &what);

            let kc = 40;
            let tap = |i: usize, t: usize| (!(i + 2 * t).is_multiple_of(5)).then_some((i + t) * kc);
            let what = format!("{what}, indirect");
            indirect_is_sequential(
                kernel,
                &mut rng,
                (m, 21, kc, 3),
                tap,
                &Epilogue::new(),
                &what,
            );
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// Random shapes (edges of every tile) and epilogues against the naive loop.
    #[test]
    fn random_problems_match_naive(
        m in 0usize..40,
        n in 0usize..70,
        k in 0usize..300,
        seed in proptest::prelude::any::<u64>(),
        which in 0usize..8,
        case in 0usize..CASES.len(),
    ) {
        let all = MicroKernel::available();
        let kernel = all[which % all.len()];
        let mut rng = Rng::new(seed);
        let (a, b) = (rng.vec(m * k), rng.vec(k * n));
        let data = EpData::new(&mut rng, m, n);
        let (ep, with_bias) = data.epilogue(CASES[case], n);
        let bias = with_bias.then_some(&data.col[..]);
        let want = naive(&a, &b, (m, n, k), bias, &ep);
        let pb = packed(kernel, &b, (k, n), bias);
        let got = run(kernel, m, Rows::Dense { data: &a, lda: k }, &pb, &ep);
        check(&got, &want, &a, &b, (m, n, k), &format!("{} {m}x{n}x{k}", kernel.name()));
    }
}

/// Element `(i, j)` summed in the micro-kernels' order, one product at a time from the
/// bias, then the adds and the clamp: with a fused multiply-add on the SIMD kernels
/// (which use FMA instructions) and a rounded product then sum on the portable one.
fn sequential(
    kernel: &MicroKernel,
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
    bias: &[f32],
    ep: &Epilogue<'_>,
) -> Vec<f32> {
    let fused = kernel.name() != MicroKernel::portable().name();
    let madd = |x: f32, y: f32, acc: f32| {
        if fused {
            x.mul_add(y, acc)
        } else {
            acc + x * y
        }
    };
    let (lo, hi) = ep.bounds();
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut v = bias[j];
            for p in 0..k {
                v = madd(a[i * k + p], b[p * n + j], v);
            }
            for add in ep.adds() {
                v = madd(add.scale, add.data[i * add.rs + j * add.cs], v);
            }
            let v = if v < lo { lo } else { v };
            c[i * n + j] = if v > hi { hi } else { v };
        }
    }
    c
}

/// Products deep enough to be cut into depth blocks (and, for the tallest, into row
/// blocks), dense and indirect (blocks of whole taps): the partial sums stored in `C`
/// between blocks and the epilogue applied once at the end give the bits of one
/// sequential sum per element, on every kernel, partial tiles included.
#[test]
fn depth_blocked_products_keep_the_bits_of_one_sequential_sum() {
    let mut rng = Rng::new(11);
    for kernel in kernels() {
        for &(m, n, k) in &[(13, 37, 1100), (601, 35, 530), (7, 70, 2049)] {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let bias = rng.vec(n);
            let data = EpData::new(&mut rng, m, n);
            let mut ep = Epilogue::new();
            ep.add(data.add(AddKind::Full, n, -0.5));
            ep.add(data.add(AddKind::PerRow, n, 1.0));
            ep.clamp(-2.0, 2.0);
            let what = format!("{} {m}x{n}x{k}", kernel.name());
            dense_is_sequential(kernel, (&a, &b, &bias), (m, n, k), &ep, &what);
        }
        // A convolution-like product: 9 taps of 150, each row's taps read from `x`.
        let (m, n, kc, taps) = (20, 33, 150, 9);
        let tap = |i: usize, t: usize| (!(i + t).is_multiple_of(4)).then_some((i + t) * kc);
        let mut ep = Epilogue::new();
        ep.clamp(0.0, f32::INFINITY);
        let what = format!("{} indirect", kernel.name());
        indirect_is_sequential(kernel, &mut rng, (m, n, kc, taps), tap, &ep, &what);
    }
}
