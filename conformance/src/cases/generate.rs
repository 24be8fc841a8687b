//! Cases of the ops whose output extent comes from operand values: Range (its length from
//! `start`, `limit` and `delta`) and OneHot (its new axis from `depth`). Those operands are
//! constants, as a plugin needs them to know the output's shape at compile time.

use baton_delegate_api::DType::{Bool, F16, F32, F64, I16, I32, I64, I8, U8};
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::gen::{dims, tensor, Draw, Fill, Maker};
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::Range => range(out),
        OpKind::OneHot => one_hot(out),
        _ => Ok(()),
    }
}

/// A case id's number: `-` and `.` are not allowed in ids.
fn id_num(v: f64) -> String {
    let s = format!("{}", v.abs()).replace('.', "p");
    if v < 0.0 {
        format!("neg{s}")
    } else {
        s
    }
}

fn range(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Range;
    // (start, limit, delta): whole and partial last steps, descending, empty both ways,
    // one element.
    let ints: [(f64, f64, f64); 6] = [
        (0.0, 10.0, 1.0),
        (-3.0, 8.0, 3.0),
        (10.0, -4.0, -3.0),
        (5.0, 5.0, 1.0),
        (7.0, 2.0, 2.0),
        (4.0, 5.0, 7.0),
    ];
    let floats: [(f64, f64, f64); 3] = [(1.0, 5.0, 0.5), (-2.5, 7.25, 1.75), (3.0, -1.0, -0.3)];
    for dtype in [F32, F16, F64, I64, I32, I16] {
        let extra: &[(f64, f64, f64)] = if dtype.is_float() { &floats } else { &[] };
        for &(s, l, d) in ints.iter().chain(extra) {
            let desc = format!("{}_to_{}_by_{}", id_num(s), id_num(l), id_num(d));
            let mut m = Maker::new(op, dtype, &desc);
            for v in [s, l, d] {
                m.operand(tensor(dtype, &[], &[v]), true);
            }
            out.push(m.build(&[])?);
        }
    }
    Ok(())
}

fn one_hot(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::OneHot;
    let onoff = |dtype: DType, off: f64, on: f64| tensor(dtype, &[2], &[off, on]);
    // Indices inside `[-depth, depth)`, and outside it on both sides.
    let fill = Fill::Range(-7.0, 6.0);
    for (shape, depth, axis) in [
        (&[6][..], 5i64, -1i64),
        (&[2, 3][..], 4, 0),
        (&[2, 3][..], 4, 1),
        (&[2, 3][..], 4, -1),
        (&[2, 3][..], 6, -3),
        (&[][..], 3, 0),
    ] {
        let desc = format!("{}_depth{depth}_axis{}", dims(shape), id_num(axis as f64));
        let mut m = Maker::new(op, F32, &desc);
        let indices = m.rng.tensor(I64, shape, &fill);
        m.operand(indices, false);
        m.operand(Tensor::from_i64(&[], &[depth]), true);
        m.operand(onoff(F32, -1.5, 2.0), true);
        out.push(m.build(&[("axis", Attr::Int(axis))])?);
    }
    // Values of other dtypes (the output's), indices of other dtypes (floats truncate).
    for (vd, id) in [
        (F16, I32),
        (I64, I64),
        (I8, U8),
        (Bool, I64),
        (F32, F32),
        (U8, F16),
    ] {
        let desc = format!("indices_{}_4x2_depth3", id.name());
        let mut m = Maker::new(op, vd, &desc);
        let fill = if id == U8 {
            Fill::Range(0.0, 4.0)
        } else {
            Fill::Range(-4.5, 3.5)
        };
        let indices = m.rng.tensor(id, &[4, 2], &fill);
        m.operand(indices, false);
        m.operand(Tensor::from_i64(&[1], &[3]), true);
        m.operand(onoff(vd, 0.0, 1.0), true);
        out.push(m.build(&[])?);
    }
    Ok(())
}
