//! Element-wise binary ops (Add, Sub, Mul, Div), activations (Relu, Clip, Sigmoid, Tanh)
//! and Softmax.

use baton_delegate_api::{Attr, DType, OpKind};

use super::gen::{dims, Fill, Maker, SPECIALS, SPECIALS_F16};
use super::Case;
use crate::error::Result;

/// Operand shape pairs of the binary ops: same shapes of odd sizes, rank-0, `[1]`-vs-`[n]`,
/// numpy broadcasting in both directions, size-1 dims and empty tensors.
const BINARY_SHAPES: &[(&str, &[usize], &[usize])] = &[
    ("same_7", &[7], &[7]),
    ("same_13", &[13], &[13]),
    ("same_33", &[33], &[33]),
    ("same_2x3x4", &[2, 3, 4], &[2, 3, 4]),
    ("rank0_rank0", &[], &[]),
    ("rank0_5", &[], &[5]),
    ("5_rank0", &[5], &[]),
    ("1_vs_7", &[1], &[7]),
    ("7_vs_1", &[7], &[1]),
    ("bcast_2x1x3_4x1", &[2, 1, 3], &[4, 1]),
    ("bcast_3x1_1x4", &[3, 1], &[1, 4]),
    ("bcast_2x3x4x5_5", &[2, 3, 4, 5], &[5]),
    ("bcast_1x3x1x5_2x1x4x1", &[1, 3, 1, 5], &[2, 1, 4, 1]),
    ("bcast_1x1x7_1x7x1", &[1, 1, 7], &[1, 7, 1]),
    ("bcast_13x33_33", &[13, 33], &[33]),
    ("empty_0_0", &[0], &[0]),
    ("empty_0x3_1x3", &[0, 3], &[1, 3]),
    ("empty_2x0_1", &[2, 0], &[1]),
];

/// The subset of [`BINARY_SHAPES`] run for integer dtypes and f16.
const INT_SHAPES: &[&str] = &[
    "same_33",
    "same_2x3x4",
    "rank0_rank0",
    "rank0_5",
    "1_vs_7",
    "bcast_2x1x3_4x1",
    "bcast_1x3x1x5_2x1x4x1",
    "empty_0x3_1x3",
];
const F16_SHAPES: &[&str] = &["same_33", "rank0_5", "bcast_2x1x3_4x1"];

/// Shapes of the unary ops: odd sizes, rank-0, `[1]`, size-1 dims, empty.
pub(super) const UNARY_SHAPES: &[&[usize]] = &[
    &[7],
    &[13],
    &[33],
    &[2, 3, 4],
    &[],
    &[1],
    &[1, 1, 1, 65],
    &[0],
    &[2, 0, 3],
];
const INT_UNARY_SHAPES: &[&[usize]] = &[&[7], &[33], &[2, 3, 4], &[], &[0]];

/// Values around signed zero.
const NEG_ZERO: [f64; 6] = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5];

/// Cases of one binary op.
pub fn binary(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    for &(name, a, b) in BINARY_SHAPES {
        out.push(binary_case(op, DType::F32, name, a, b, false)?);
    }
    out.push(binary_case(
        op,
        DType::F32,
        "const_rhs_2x3x4_4",
        &[2, 3, 4],
        &[4],
        true,
    )?);
    // Every pair of special values, by broadcasting a column against a row.
    for (dtype, specials) in [(DType::F32, &SPECIALS[..]), (DType::F16, &SPECIALS_F16[..])] {
        let n = specials.len();
        let fill = Fill::Cycle(specials.to_vec());
        let mut m = Maker::new(op, dtype, "special_pairs");
        m.input(&[n, 1], &fill).input(&[1, n], &fill);
        out.push(m.build(&[])?);
    }
    let mut m = Maker::new(op, DType::F32, "large_1e30");
    m.input(&[33], &Fill::Range(-1e30, 1e30))
        .input(&[33], &Fill::Range(-1e30, 1e30));
    out.push(m.build(&[])?);
    let fill = Fill::Cycle(NEG_ZERO.to_vec());
    let mut m = Maker::new(op, DType::F32, "negzero_pairs");
    m.input(&[6, 1], &fill).input(&[1, 6], &fill);
    out.push(m.build(&[])?);

    for dtype in [DType::I32, DType::I64] {
        for &(name, a, b) in BINARY_SHAPES {
            if INT_SHAPES.contains(&name) {
                out.push(binary_case(op, dtype, name, a, b, false)?);
            }
        }
    }
    for &(name, a, b) in BINARY_SHAPES {
        if F16_SHAPES.contains(&name) {
            out.push(binary_case(op, DType::F16, name, a, b, false)?);
        }
    }
    Ok(())
}

/// Relu: every unary shape, special values, integers and f16.
pub fn relu(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Relu;
    unary_family(op, &Fill::Range(-10.0, 10.0), &[], out)?;
    for (dtype, range) in [(DType::I32, 1e6), (DType::I64, 1e15)] {
        for &shape in INT_UNARY_SHAPES {
            let mut m = Maker::new(op, dtype, &dims(shape));
            m.input(shape, &Fill::Range(-range, range));
            out.push(m.build(&[])?);
        }
    }
    f16_cases(op, &[], out)
}

/// Sigmoid or Tanh: every unary shape, special values, saturation, f16.
pub fn smooth(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    unary_family(op, &Fill::Range(-8.0, 8.0), &[], out)?;
    let sat = [
        -100.0, -88.0, -50.0, -20.0, -10.0, 10.0, 20.0, 50.0, 88.0, 100.0,
    ];
    let mut m = Maker::new(op, DType::F32, "saturation");
    m.input(&[10], &Fill::Cycle(sat.to_vec()));
    out.push(m.build(&[])?);
    let mut m = Maker::new(op, DType::F32, "tiny");
    m.input(&[33], &Fill::Range(-1e-3, 1e-3));
    out.push(m.build(&[])?);
    f16_cases(op, &[], out)
}

/// Clip: both bounds, only min, only max, none, equal bounds; integers and f16.
pub fn clip(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Clip;
    let min_max = [("min", Attr::Float(-0.5)), ("max", Attr::Float(0.5))];
    unary_family(op, &Fill::Range(-2.0, 2.0), &min_max, out)?;
    let variants: [(&str, Vec<(&str, Attr)>); 5] = [
        ("only_min_0", vec![("min", Attr::Float(0.0))]),
        ("only_max_6", vec![("max", Attr::Float(6.0))]),
        ("no_bounds", vec![]),
        (
            "relu6",
            vec![("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
        ),
        (
            "min_eq_max",
            vec![("min", Attr::Float(1.0)), ("max", Attr::Float(1.0))],
        ),
    ];
    for (name, attrs) in &variants {
        let mut m = Maker::new(op, DType::F32, name);
        m.input(&[33], &Fill::Range(-10.0, 10.0));
        out.push(m.build(attrs)?);
    }
    let mut m = Maker::new(op, DType::F32, "large_bounds_1e20");
    m.input(&[33], &Fill::Range(-1e30, 1e30));
    out.push(m.build(&[("min", Attr::Float(-1e20)), ("max", Attr::Float(1e20))])?);
    let int_bounds = [("min", Attr::Float(-5.0)), ("max", Attr::Float(5.0))];
    for dtype in [DType::I32, DType::I64] {
        for &shape in &[&[33][..], &[], &[0]] {
            let mut m = Maker::new(op, dtype, &format!("min_max_{}", dims(shape)));
            m.input(shape, &Fill::Range(-20.0, 20.0));
            out.push(m.build(&int_bounds)?);
        }
        for (name, attrs) in &variants[..3] {
            let mut m = Maker::new(op, dtype, name);
            m.input(&[33], &Fill::Range(-20.0, 20.0));
            out.push(m.build(attrs)?);
        }
    }
    f16_cases(op, &min_max, out)
}

/// Softmax over every axis of rank 1..3, size-1 axes, large logits, infinities, NaN and
/// empty tensors.
pub fn softmax(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Softmax;
    let plain: &[(&[usize], Option<i64>)] = &[
        (&[7], None),
        (&[2, 13], Some(-1)),
        (&[2, 13], Some(0)),
        (&[3, 4, 5], Some(0)),
        (&[3, 4, 5], Some(1)),
        (&[3, 4, 5], Some(2)),
        (&[3, 4, 5], Some(-2)),
        (&[2, 33], Some(1)),
        (&[4, 1], Some(-1)),
        (&[1, 1], Some(0)),
        (&[0, 5], Some(-1)),
        (&[3, 0], Some(-1)),
    ];
    for &(shape, axis) in plain {
        let desc = match axis {
            None => format!("{}_default_axis", dims(shape)),
            Some(a) => format!("{}_axis{a}", dims(shape)),
        };
        let attrs: Vec<(&str, Attr)> = axis.map(|a| ("axis", Attr::Int(a))).into_iter().collect();
        let mut m = Maker::new(op, DType::F32, &desc.replace('-', "neg"));
        m.input(shape, &Fill::Range(-5.0, 5.0));
        out.push(m.build(&attrs)?);
    }
    let mut m = Maker::new(op, DType::F32, "large_logits");
    m.input(&[2, 13], &Fill::Range(-1000.0, 1000.0));
    out.push(m.build(&[])?);
    let inf = f64::INFINITY;
    let special: [(&str, &[usize], Vec<f64>); 3] = [
        (
            "neg_inf",
            &[3, 5],
            vec![
                -inf, 1.0, 2.0, -inf, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, -inf, -inf, -inf, -inf,
            ],
        ),
        (
            "pos_inf",
            &[2, 4],
            vec![inf, 1.0, 2.0, 3.0, 1.0, inf, inf, 0.0],
        ),
        (
            "nan",
            &[2, 4],
            vec![f64::NAN, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0],
        ),
    ];
    for (name, shape, values) in special {
        let mut m = Maker::new(op, DType::F32, name);
        m.input(shape, &Fill::Cycle(values));
        out.push(m.build(&[])?);
    }
    Ok(())
}

fn binary_case(
    op: OpKind,
    dtype: DType,
    name: &str,
    a: &[usize],
    b: &[usize],
    const_rhs: bool,
) -> Result<Case> {
    let (lhs, rhs) = binary_fills(op, dtype);
    let mut m = Maker::new(op, dtype, name);
    m.input(a, &lhs);
    if const_rhs {
        m.constant(b, &rhs);
    } else {
        m.input(b, &rhs);
    }
    m.build(&[])
}

/// Operand ranges: integer results stay in range, divisors stay away from zero.
fn binary_fills(op: OpKind, dtype: DType) -> (Fill, Fill) {
    let big = match dtype {
        DType::I64 => 1e12,
        DType::I32 => 1e6,
        _ => 10.0,
    };
    let small = match dtype {
        DType::I64 => 1e6,
        DType::I32 => 1e3,
        _ => 10.0,
    };
    let min_div = if dtype.is_float() { 0.5 } else { 1.0 };
    match op {
        OpKind::Mul => (Fill::Range(-small, small), Fill::Range(-small, small)),
        OpKind::Div => (Fill::Range(-big, big), Fill::Away(-100.0, 100.0, min_div)),
        _ => (Fill::Range(-big, big), Fill::Range(-big, big)),
    }
}

/// f32 cases every unary op shares: each unary shape, special values, ±1e30, ±0.
fn unary_family(
    op: OpKind,
    fill: &Fill,
    attrs: &[(&str, Attr)],
    out: &mut Vec<Case>,
) -> Result<()> {
    for &shape in UNARY_SHAPES {
        let mut m = Maker::new(op, DType::F32, &dims(shape));
        m.input(shape, fill);
        out.push(m.build(attrs)?);
    }
    let mut m = Maker::new(op, DType::F32, "specials");
    m.input(&[SPECIALS.len()], &Fill::Cycle(SPECIALS.to_vec()));
    out.push(m.build(attrs)?);
    let mut m = Maker::new(op, DType::F32, "large_1e30");
    m.input(&[33], &Fill::Range(-1e30, 1e30));
    out.push(m.build(attrs)?);
    let mut m = Maker::new(op, DType::F32, "negzero");
    m.input(
        &[6],
        &Fill::Cycle(vec![-0.0, 0.0, -1e-40, 1e-40, -0.0, 1.0]),
    );
    out.push(m.build(attrs)?);
    Ok(())
}

/// f16 cases of a unary op: a plain vector and the f16 special values.
fn f16_cases(op: OpKind, attrs: &[(&str, Attr)], out: &mut Vec<Case>) -> Result<()> {
    let mut m = Maker::new(op, DType::F16, "33");
    m.input(&[33], &Fill::Range(-4.0, 4.0));
    out.push(m.build(attrs)?);
    let mut m = Maker::new(op, DType::F16, "specials");
    m.input(&[SPECIALS_F16.len()], &Fill::Cycle(SPECIALS_F16.to_vec()));
    out.push(m.build(attrs)?);
    Ok(())
}
