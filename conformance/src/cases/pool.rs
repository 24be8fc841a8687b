//! MaxPool, AveragePool and GlobalAveragePool.

use baton_delegate_api::{Attr, DType, OpKind};

use super::gen::{ints, Fill, Maker, SPECIALS};
use super::Case;
use crate::error::Result;

type P = (
    &'static str,
    &'static [usize],
    Vec<(&'static str, Attr)>,
    Fill,
);

/// MaxPool: 1-D and 2-D, strides, pads, ceil_mode, dilations, auto_pad, special values,
/// and all-negative inputs with padding (padding must never win the max).
pub fn max_pool(out: &mut Vec<Case>) -> Result<()> {
    let unit = || Fill::Range(-1.0, 1.0);
    let mut cases: Vec<P> = common(&unit);
    cases.extend([
        (
            "2d_k3_s2_dil2",
            &[1, 2, 13, 13][..],
            vec![k(&[3, 3]), s(&[2, 2]), ("dilations", ints(&[2, 2]))],
            unit(),
        ),
        (
            "2d_all_negative_pad1",
            &[1, 2, 7, 7],
            vec![k(&[3, 3]), p(&[1, 1, 1, 1])],
            Fill::Range(-10.0, -1.0),
        ),
        (
            "2d_specials",
            &[1, 2, 6, 6],
            vec![k(&[2, 2]), s(&[2, 2])],
            Fill::Mixed(SPECIALS.to_vec(), -1.0, 1.0),
        ),
        (
            "2d_large_1e30",
            &[1, 2, 6, 6],
            vec![k(&[3, 3])],
            Fill::Range(-1e30, 1e30),
        ),
    ]);
    push_all(OpKind::MaxPool, cases, out)
}

/// AveragePool: as MaxPool plus count_include_pad with symmetric and asymmetric pads and
/// with ceil_mode.
pub fn average_pool(out: &mut Vec<Case>) -> Result<()> {
    let unit = || Fill::Range(-1.0, 1.0);
    let include = || ("count_include_pad", Attr::Int(1));
    let mut cases: Vec<P> = common(&unit);
    cases.extend([
        (
            "2d_k3_pad1_include_pad",
            &[1, 2, 7, 7][..],
            vec![k(&[3, 3]), p(&[1, 1, 1, 1]), include()],
            unit(),
        ),
        (
            "2d_k3_asym_pads_include_pad",
            &[1, 2, 7, 7],
            vec![k(&[3, 3]), p(&[0, 1, 2, 1]), include()],
            unit(),
        ),
        (
            "2d_k3_s2_ceil_include_pad",
            &[1, 2, 8, 8],
            vec![k(&[3, 3]), s(&[2, 2]), p(&[1, 1, 1, 1]), c(), include()],
            unit(),
        ),
        (
            "2d_large_1e30",
            &[1, 2, 6, 6],
            vec![k(&[3, 3])],
            Fill::Range(-1e30, 1e30),
        ),
    ]);
    push_all(OpKind::AveragePool, cases, out)
}

/// GlobalAveragePool over 1-D, 2-D and 3-D spatial extents, size-1 dims, large values.
pub fn global_average_pool(out: &mut Vec<Case>) -> Result<()> {
    let shapes: &[(&str, &[usize], Fill)] = &[
        ("1x3x7x7", &[1, 3, 7, 7], Fill::Range(-1.0, 1.0)),
        ("2x5x13", &[2, 5, 13], Fill::Range(-1.0, 1.0)),
        ("2x4x3x5", &[2, 4, 3, 5], Fill::Range(-1.0, 1.0)),
        ("1x1x1x1", &[1, 1, 1, 1], Fill::Range(-1.0, 1.0)),
        ("1x2x33x1", &[1, 2, 33, 1], Fill::Range(-1.0, 1.0)),
        ("1x2x3x4x5", &[1, 2, 3, 4, 5], Fill::Range(-1.0, 1.0)),
        ("large_1x2x5x5", &[1, 2, 5, 5], Fill::Range(-1e30, 1e30)),
        ("empty_batch_0x3x4x4", &[0, 3, 4, 4], Fill::Range(-1.0, 1.0)),
    ];
    for (name, shape, fill) in shapes {
        let mut m = Maker::new(OpKind::GlobalAveragePool, DType::F32, name);
        m.input(shape, fill);
        out.push(m.build(&[])?);
    }
    Ok(())
}

/// Cases both pools share.
fn common(unit: &dyn Fn() -> Fill) -> Vec<P> {
    let same = ("auto_pad", Attr::Str("SAME_UPPER".into()));
    let valid = ("auto_pad", Attr::Str("VALID".into()));
    vec![
        ("1d_k3", &[1, 2, 13], vec![k(&[3])], unit()),
        ("1d_k2_s2", &[1, 3, 13], vec![k(&[2]), s(&[2])], unit()),
        (
            "2d_k2_s2",
            &[1, 3, 8, 8],
            vec![k(&[2, 2]), s(&[2, 2])],
            unit(),
        ),
        (
            "2d_k3_s1_pad1",
            &[1, 2, 7, 7],
            vec![k(&[3, 3]), p(&[1, 1, 1, 1])],
            unit(),
        ),
        (
            "2d_k3_s2_ceil",
            &[1, 2, 8, 8],
            vec![k(&[3, 3]), s(&[2, 2]), c()],
            unit(),
        ),
        (
            "2d_k2_s2_ceil_odd13",
            &[1, 2, 13, 13],
            vec![k(&[2, 2]), s(&[2, 2]), c()],
            unit(),
        ),
        (
            "2d_k3_asym_pads",
            &[1, 2, 7, 7],
            vec![k(&[3, 3]), p(&[0, 1, 1, 0])],
            unit(),
        ),
        (
            "2d_same_upper_s2",
            &[1, 2, 7, 7],
            vec![k(&[3, 3]), s(&[2, 2]), same],
            unit(),
        ),
        (
            "2d_valid_s2",
            &[1, 2, 7, 7],
            vec![k(&[3, 3]), s(&[2, 2]), valid],
            unit(),
        ),
        (
            "2d_k1_s2",
            &[1, 2, 7, 7],
            vec![k(&[1, 1]), s(&[2, 2])],
            unit(),
        ),
        ("2d_rect_1x3", &[1, 2, 5, 7], vec![k(&[1, 3])], unit()),
        ("2d_size1", &[1, 1, 1, 1], vec![k(&[1, 1])], unit()),
        ("2d_batch2_odd", &[2, 3, 13, 7], vec![k(&[3, 3])], unit()),
        ("2d_empty_batch", &[0, 2, 5, 5], vec![k(&[2, 2])], unit()),
    ]
}

fn push_all(op: OpKind, cases: Vec<P>, out: &mut Vec<Case>) -> Result<()> {
    for (name, shape, attrs, fill) in cases {
        let mut m = Maker::new(op, DType::F32, name);
        m.input(shape, &fill);
        out.push(m.build(&attrs)?);
    }
    Ok(())
}

fn k(v: &[i64]) -> (&'static str, Attr) {
    ("kernel_shape", ints(v))
}

fn s(v: &[i64]) -> (&'static str, Attr) {
    ("strides", ints(v))
}

fn p(v: &[i64]) -> (&'static str, Attr) {
    ("pads", ints(v))
}

fn c() -> (&'static str, Attr) {
    ("ceil_mode", Attr::Int(1))
}
