//! The element-wise ops and reductions of BTIR 1.3 through the delegate, against known
//! answers, with SIMD and portable kernels: the edge cases each op's definition names
//! (halves to even, NaN in comparisons and ArgMax, the sign of a remainder, wrapping
//! integer extremes).

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::{run, supports};
use baton_delegate_api::{Support, Tensor};
use common::delegate;

fn graph(build: impl FnOnce(&mut GraphBuilder) -> Vec<TensorId>) -> Graph {
    let mut g = GraphBuilder::new("t");
    for out in build(&mut g) {
        g.output(out);
    }
    g.finish().unwrap()
}

/// Runs `g` on the delegate with both kernel sets, every node claimed; the outputs as
/// f64, which must agree bit for bit between the two runs (NaN with NaN).
fn both(g: &Graph, inputs: &[Tensor]) -> Vec<Vec<f64>> {
    let mut results = Vec::new();
    for simd in [true, false] {
        let d = delegate(simd);
        let claims = supports(&d, g);
        assert!(
            claims.iter().all(|s| matches!(s, Support::Yes)),
            "{claims:?}"
        );
        let out: Vec<Vec<f64>> = run(&d, g, inputs)
            .expect("runs")
            .iter()
            .map(Tensor::to_f64)
            .collect();
        results.push(out);
    }
    let same = |a: &[f64], b: &[f64]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan())
    };
    for (a, b) in results[0].iter().zip(&results[1]) {
        assert!(same(a, b), "simd {a:?} vs portable {b:?}");
    }
    results.swap_remove(0)
}

fn assert_values(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() { g.is_nan() } else { g == w };
        assert!(ok, "{what}[{i}]: got {g}, want {w} (all: {got:?})");
    }
}

#[test]
fn float_maps_round_classify_and_keep_nan() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let x = [
        -2.5f32,
        -1.5,
        -0.5,
        0.5,
        2.5,
        -0.0,
        f32::NAN,
        f32::NEG_INFINITY,
        7.0,
    ];
    let ops = [
        (OpKind::Floor, vec![]),
        (OpKind::Round, vec![]),
        (OpKind::Sign, vec![]),
        (OpKind::Reciprocal, vec![]),
        (OpKind::IsNaN, vec![]),
        (OpKind::IsInf, vec![("detect_positive", Attr::Int(0))]),
    ];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[x.len()]);
        ops.iter()
            .map(|(op, attrs)| g.node(*op, &[xt], attrs).unwrap())
            .collect()
    });
    let out = both(&g, &[Tensor::from_f32(&[x.len()], &x)]);
    let want: [&[f64]; 6] = [
        &[-3.0, -2.0, -1.0, 0.0, 2.0, -0.0, nan, -inf, 7.0],
        &[-2.0, -2.0, -0.0, 0.0, 2.0, -0.0, nan, -inf, 7.0],
        &[-1.0, -1.0, -1.0, 1.0, 1.0, 0.0, nan, -1.0, 1.0],
        &[-0.4, -2.0 / 3.0, -2.0, 2.0, 0.4, -inf, nan, -0.0, 1.0 / 7.0],
        &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
        &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    ];
    for (k, w) in want.iter().enumerate() {
        // The reciprocals as f32 values.
        let w: Vec<f64> = w.iter().map(|&v| v as f32 as f64).collect();
        assert_values(&out[k], &w, &format!("{:?}", ops[k].0));
    }
    // Round's halves go to even and Sign gives +0 for -0.
    assert!(out[1][2].is_sign_negative() && out[2][5].is_sign_positive());
}

#[test]
fn comparisons_logic_and_remainders() {
    let a = [1.0f32, 2.0, f32::NAN, -7.0, 7.0, -7.5, 5.0];
    let b = [2.0f32, 2.0, 1.0, 3.0, -3.0, f32::INFINITY, 0.0];
    let g = graph(|g| {
        let at = g.input_fixed("a", DType::F32, &[7]);
        let bt = g.input_fixed("b", DType::F32, &[7]);
        let ge = g.node(OpKind::GreaterOrEqual, &[at, bt], &[]).unwrap();
        let le = g.node(OpKind::LessOrEqual, &[at, bt], &[]).unwrap();
        let or = g.node(OpKind::Or, &[ge, le], &[]).unwrap();
        let xor = g.node(OpKind::Xor, &[ge, le], &[]).unwrap();
        let m0 = g.node(OpKind::Mod, &[at, bt], &[]).unwrap();
        let fmod = [("fmod", Attr::Int(1))];
        let m1 = g.node(OpKind::Mod, &[at, bt], &fmod).unwrap();
        vec![ge, le, or, xor, m0, m1]
    });
    let out = both(
        &g,
        &[Tensor::from_f32(&[7], &a), Tensor::from_f32(&[7], &b)],
    );
    let nan = f64::NAN;
    assert_values(
        &out[0],
        &[0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0],
        "GreaterOrEqual",
    );
    assert_values(&out[1], &[1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], "LessOrEqual");
    assert_values(&out[2], &[1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0], "Or");
    assert_values(&out[3], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0], "Xor");
    // numpy's mod: the divisor's sign; an infinite divisor of the other sign gives it.
    assert_values(
        &out[4],
        &[1.0, 0.0, nan, 2.0, -2.0, f64::INFINITY, nan],
        "Mod",
    );
    assert_values(&out[5], &[1.0, 0.0, nan, -1.0, 1.0, -7.5, nan], "fmod");
}

#[test]
fn integer_sign_remainders_and_comparisons_are_exact() {
    let g = graph(|g| {
        let at = g.input_fixed("a", DType::I64, &[5]);
        let bt = g.input_fixed("b", DType::I64, &[5]);
        let sign = g.node(OpKind::Sign, &[at], &[]).unwrap();
        let m0 = g.node(OpKind::Mod, &[at, bt], &[]).unwrap();
        let m1 = g
            .node(OpKind::Mod, &[at, bt], &[("fmod", Attr::Int(1))])
            .unwrap();
        let ge = g.node(OpKind::GreaterOrEqual, &[at, bt], &[]).unwrap();
        vec![sign, m0, m1, ge]
    });
    let a = [i64::MIN, -7, 7, 0, i64::MAX];
    let b = [-1i64, 3, -3, 5, i64::MIN];
    let t = |v: &[i64]| Tensor::from_i64(&[5], v);
    let out = both(&g, &[t(&a), t(&b)]);
    assert_values(&out[0], &[-1.0, -1.0, 1.0, 0.0, 1.0], "Sign");
    // MAX mod MIN: the divisor's sign, so MAX + MIN = -1.
    assert_values(&out[1], &[0.0, 2.0, -2.0, 0.0, -1.0], "Mod");
    assert_values(&out[2], &[0.0, -1.0, 1.0, 0.0, i64::MAX as f64], "fmod");
    assert_values(&out[3], &[0.0, 0.0, 1.0, 0.0, 1.0], "GreaterOrEqual");
}

#[test]
fn arg_extremes_count_nan_as_largest_and_break_ties_either_way() {
    let x = [3.0f32, 1.0, 3.0, f32::NAN, 0.0, f32::NAN, -1.0, -1.0];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[2, 4]);
        let mut outs = Vec::new();
        for op in [OpKind::ArgMax, OpKind::ArgMin] {
            for last in [0, 1] {
                let attrs = [
                    ("axis", Attr::Int(1)),
                    ("select_last_index", Attr::Int(last)),
                ];
                outs.push(g.node(op, &[xt], &attrs).unwrap());
            }
        }
        outs
    });
    let out = both(&g, &[Tensor::from_f32(&[2, 4], &x)]);
    // Row 0: [3, 1, 3, NaN]: the NaN wins both; row 1: [0, NaN, -1, -1].
    assert_values(&out[0], &[3.0, 1.0], "ArgMax first");
    assert_values(&out[1], &[3.0, 1.0], "ArgMax last");
    assert_values(&out[2], &[3.0, 1.0], "ArgMin first");
    assert_values(&out[3], &[3.0, 1.0], "ArgMin last");
    // Without NaN: ties by position.
    let y = [3.0f32, 1.0, 3.0, 1.0, -1.0, 2.0, -1.0, 2.0];
    let out = both(&g, &[Tensor::from_f32(&[2, 4], &y)]);
    assert_values(&out[0], &[0.0, 1.0], "ArgMax first");
    assert_values(&out[1], &[2.0, 3.0], "ArgMax last");
    assert_values(&out[2], &[1.0, 0.0], "ArgMin first");
    assert_values(&out[3], &[3.0, 2.0], "ArgMin last");
}

#[test]
fn integer_reductions_wrap_and_start_from_the_extremes() {
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::I32, &[2, 3]);
        let axes = g.constant_i64("axes", &[1], &[1]);
        [OpKind::ReduceMin, OpKind::ReduceProd, OpKind::ReduceL1]
            .iter()
            .map(|&op| g.node(op, &[xt, axes], &[]).unwrap())
            .collect()
    });
    let x = [i32::MAX, 2, -3, i32::MIN, 1, 5];
    let xt = Tensor::from_bytes(DType::I32, &[2, 3], bytemuck::cast_slice(&x));
    let out = both(&g, &[xt]);
    assert_values(&out[0], &[-3.0, i32::MIN as f64], "ReduceMin");
    let prod = (i32::MAX.wrapping_mul(2)).wrapping_mul(-3);
    let prod1 = i32::MIN.wrapping_mul(5);
    assert_values(&out[1], &[prod as f64, prod1 as f64], "ReduceProd");
    // |MIN| wraps to MIN.
    let l1 = i32::MAX.wrapping_add(5);
    assert_values(&out[2], &[l1 as f64, (i32::MIN + 6) as f64], "ReduceL1");
}

#[test]
fn running_sums_ranks_and_masks() {
    let x = [1.0f32, 2.0, 3.0, 4.0, f32::NAN, 4.0, -1.0, 0.5];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[2, 4]);
        let axis = g.constant_i64("axis", &[], &[1]);
        let attrs = [("exclusive", Attr::Int(1)), ("reverse", Attr::Int(1))];
        let cum = g.node(OpKind::CumSum, &[xt, axis], &attrs).unwrap();
        let k = g.constant_i64("k", &[1], &[2]);
        let mut top = g
            .named_node_outputs("top", OpKind::TopK, &[xt, k], &[], 2)
            .unwrap();
        let hard = g.node(OpKind::Hardmax, &[xt], &[]).unwrap();
        let diag = g.constant_i64("d", &[], &[1]);
        let lower = [("upper", Attr::Int(0))];
        let tri = g.node(OpKind::Trilu, &[xt, diag], &lower).unwrap();
        let mut outs = vec![cum];
        outs.append(&mut top);
        outs.extend([hard, tri]);
        outs
    });
    let out = both(&g, &[Tensor::from_f32(&[2, 4], &x)]);
    let nan = f64::NAN;
    // From the end, each element left out of its own sum.
    assert_values(
        &out[0],
        &[9.0, 7.0, 4.0, 0.0, 3.5, -0.5, 0.5, 0.0],
        "CumSum",
    );
    // NaN counts as the largest; equal values by position.
    assert_values(&out[1], &[4.0, 3.0, nan, 4.0], "TopK values");
    assert_values(&out[2], &[3.0, 2.0, 0.0, 1.0], "TopK positions");
    assert_values(
        &out[3],
        &[0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0],
        "Hardmax",
    );
    assert_values(&out[4], &[1.0, 2.0, 0.0, 0.0, nan, 4.0, -1.0, 0.0], "Trilu");
}

#[test]
fn gather_elements_checks_its_indices_and_blocks_move_as_transposes() {
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::F32, &[2, 3]);
        let it = g.input_fixed("i", DType::I64, &[2, 2]);
        vec![g
            .node(OpKind::GatherElements, &[xt, it], &[("axis", Attr::Int(1))])
            .unwrap()]
    });
    let x = Tensor::from_f32(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = both(&g, &[x.clone(), Tensor::from_i64(&[2, 2], &[2, -3, 0, -1])]);
    assert_values(&out[0], &[3.0, 1.0, 4.0, 6.0], "GatherElements");
    let err = run(
        &delegate(true),
        &g,
        &[x, Tensor::from_i64(&[2, 2], &[0, 3, 0, 0])],
    )
    .expect_err("an index past the axis");
    assert!(err.to_string().contains("index 3"), "{err}");
    // DepthToSpace (DCR) then SpaceToDepth gives the input back.
    let b = [("blocksize", Attr::Int(2))];
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::I64, &[2, 8, 2, 3]);
        let d = g.node(OpKind::DepthToSpace, &[xt], &b).unwrap();
        let s = g.node(OpKind::SpaceToDepth, &[d], &b).unwrap();
        vec![d, s]
    });
    let v: Vec<i64> = (0..96).map(|i| i * 1_000_000_007).collect();
    let out = both(&g, &[Tensor::from_i64(&[2, 8, 2, 3], &v)]);
    let back: Vec<f64> = v.iter().map(|&i| i as f64).collect();
    assert_values(&out[1], &back, "round trip");
    // Output (n, c, y, x) of DepthToSpace reads channel (y % 2 * 2 + x % 2) * 2 + c.
    let at = |n: usize, c: usize, y: usize, x: usize| {
        let ch = ((y % 2) * 2 + x % 2) * 2 + c;
        v[((n * 8 + ch) * 2 + y / 2) * 3 + x / 2] as f64
    };
    let flat = |n: usize, c: usize, y: usize, x: usize| ((n * 2 + c) * 4 + y) * 6 + x;
    assert_eq!(out[0][flat(1, 1, 3, 5)], at(1, 1, 3, 5));
    assert_eq!(out[0][flat(0, 0, 2, 1)], at(0, 0, 2, 1));
}

#[test]
fn scatters_combine_in_index_order_and_gather_nd_reads_slices() {
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    for reduction in ["none", "add", "mul", "max"] {
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[2, 3]);
            let i = g.constant_i64("i", &[2, 2], &[2, 1, -2, 1]);
            let u = g.constant_f32("u", &[2, 2], &[10.0, 10.0, 30.0, 20.0]);
            let attrs = [
                ("axis", Attr::Int(1)),
                ("reduction", Attr::Str(reduction.into())),
            ];
            vec![g
                .node(OpKind::ScatterElements, &[xt, i, u], &attrs)
                .unwrap()]
        });
        // Targets: (0,2) <- 10, (0,1) <- 10, (1,1) <- 30, (1,1) <- 20.
        let want: [f64; 6] = match reduction {
            "none" => [1.0, 10.0, 10.0, 4.0, 20.0, 6.0],
            "add" => [1.0, 12.0, 13.0, 4.0, 55.0, 6.0],
            "mul" => [1.0, 20.0, 30.0, 4.0, 3000.0, 6.0],
            _ => [1.0, 10.0, 10.0, 4.0, 30.0, 6.0],
        };
        let out = both(&g, &[Tensor::from_f32(&[2, 3], &x)]);
        assert_values(&out[0], &want, reduction);
    }
    // GatherND with one batch dimension: row t of batch b.
    let g = graph(|g| {
        let xt = g.input_fixed("x", DType::I64, &[2, 3, 2]);
        let i = g.constant_i64("i", &[2, 1, 1], &[2, -3]);
        vec![g
            .node(OpKind::GatherND, &[xt, i], &[("batch_dims", Attr::Int(1))])
            .unwrap()]
    });
    let v: Vec<i64> = (0..12).map(|i| i - 6).collect();
    let out = both(&g, &[Tensor::from_i64(&[2, 3, 2], &v)]);
    assert_values(&out[0], &[-2.0, -1.0, 0.0, 1.0], "GatherND");
}

#[test]
fn pow_by_integer_exponents_takes_the_sign_from_their_parity() {
    for dtype in [DType::I32, DType::I64, DType::I8] {
        let g = graph(|g| {
            let xt = g.input_fixed("x", DType::F32, &[5]);
            let nt = g.input_fixed("n", dtype, &[5]);
            vec![g.node(OpKind::Pow, &[xt, nt], &[]).unwrap()]
        });
        let n: [i64; 5] = [3, 2, -1, 0, 3];
        let bytes: Vec<u8> = match dtype {
            DType::I32 => n.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
            DType::I8 => n.iter().map(|&v| v as i8 as u8).collect(),
            _ => n.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        };
        let x = Tensor::from_f32(&[5], &[-2.0, -3.0, -0.0, f32::NAN, -0.5]);
        let out = both(&g, &[x, Tensor::from_bytes(dtype, &[5], &bytes)]);
        // pow(NaN, 0) is 1, pow(-0, -1) is -inf.
        assert_values(&out[0], &[-8.0, 9.0, f64::NEG_INFINITY, 1.0, -0.125], "Pow");
    }
}

#[test]
fn f16_nodes_compute_in_f32_and_round_once() {
    use baton_delegate_api::minifloat::encode16;
    let half = |v: &[f64]| -> Vec<u8> {
        v.iter()
            .flat_map(|&x| encode16(DType::F16, x).unwrap_or(0).to_le_bytes())
            .collect()
    };
    let g = graph(|g| {
        let at = g.input_fixed("a", DType::F16, &[2, 3]);
        let bt = g.input_fixed("b", DType::F16, &[3]);
        let sum = g.node(OpKind::Add, &[at, bt], &[]).unwrap();
        let sig = g.node(OpKind::Sigmoid, &[sum], &[]).unwrap();
        let axes = g.constant_i64("axes", &[1], &[1]);
        let red = g.node(OpKind::ReduceSum, &[sum, axes], &[]).unwrap();
        let arg = g
            .node(OpKind::ArgMax, &[sum], &[("axis", Attr::Int(1))])
            .unwrap();
        let ge = g.node(OpKind::GreaterOrEqual, &[at, bt], &[]).unwrap();
        vec![sum, sig, red, arg, ge]
    });
    // 2049 is not an f16: 2048 + 1 rounds to even, 2048.
    let a = [2048.0, 0.5, -1.0, 1.0, 3.0, f64::NAN];
    let b = [1.0, 0.25, 0.0];
    let out = both(
        &g,
        &[
            Tensor::from_bytes(DType::F16, &[2, 3], &half(&a)),
            Tensor::from_bytes(DType::F16, &[3], &half(&b)),
        ],
    );
    let nan = f64::NAN;
    assert_values(&out[0], &[2048.0, 0.75, -1.0, 2.0, 3.25, nan], "Add");
    let sig = |v: f64| encode16(DType::F16, 1.0 / (1.0 + (-v).exp())).unwrap();
    let bits: Vec<u16> = out[1]
        .iter()
        .map(|&v| encode16(DType::F16, v).unwrap())
        .collect();
    for (k, &v) in [2048.0, 0.75, -1.0, 2.0, 3.25].iter().enumerate() {
        assert!(bits[k].abs_diff(sig(v)) <= 1, "Sigmoid({v})");
    }
    assert!(out[1][5].is_nan());
    // 2048 + 0.75 - 1 = 2047.75, whose nearest f16 is 2048.
    assert_values(&out[2], &[2048.0, nan], "ReduceSum");
    assert_values(&out[3], &[0.0, 2.0], "ArgMax");
    assert_values(&out[4], &[1.0, 1.0, 0.0, 1.0, 1.0, 0.0], "GreaterOrEqual");
}
