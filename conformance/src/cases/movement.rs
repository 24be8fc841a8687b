//! Data movement: Reshape, Transpose, Concat, Flatten, in f32, i32 and i64. Float inputs
//! mix in NaN, infinities and -0.0: moving data must preserve every bit.

use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::gen::{dims, ints, Fill, Maker, SPECIALS};
use super::Case;
use crate::error::Result;

const DTYPES: [DType; 3] = [DType::F32, DType::I32, DType::I64];

/// (description, input shape, target shape, target as a constant input, allowzero)
type ReshapeCase = (&'static str, &'static [usize], &'static [i64], bool, bool);

/// Reshape with the target as an attribute or a constant i64 input; 0, -1, rank-0,
/// size-1 dims, empty tensors and allowzero.
pub fn reshape(out: &mut Vec<Case>) -> Result<()> {
    let cases: &[ReshapeCase] = &[
        ("attr_0_neg1", &[2, 3, 4], &[0, -1], false, false),
        ("const_neg1_4", &[2, 3, 4], &[-1, 4], true, false),
        ("const_flat_neg1", &[2, 3, 4], &[-1], true, false),
        ("attr_rank0_to_1", &[], &[1], false, false),
        ("attr_1_to_rank0", &[1], &[], false, false),
        ("const_expand_1x2x1x3", &[2, 3], &[1, 2, 1, 3], true, false),
        ("attr_empty_0x3_to_3_neg1", &[0, 3], &[3, -1], false, false),
        ("attr_allowzero_0x3", &[0, 3], &[0, 3], false, true),
        ("const_odd_33_to_3x11", &[33], &[3, 11], true, false),
    ];
    for dtype in DTYPES {
        for &(name, shape, target, as_input, allowzero) in cases {
            let mut m = Maker::new(OpKind::Reshape, dtype, name);
            m.input(shape, &fill(dtype));
            let mut attrs = Vec::new();
            if as_input {
                m.operand(Tensor::from_i64(&[target.len()], target), true);
            } else {
                attrs.push(("shape", ints(target)));
            }
            if allowzero {
                attrs.push(("allowzero", Attr::Int(1)));
            }
            out.push(m.build(&attrs)?);
        }
    }
    Ok(())
}

/// Transpose: the default (reversed) order and explicit perms of rank 2 to 4, layouts
/// (NCHW <-> NHWC), size-1 dims and empty tensors.
pub fn transpose(out: &mut Vec<Case>) -> Result<()> {
    let cases: &[(&[usize], Option<&[i64]>)] = &[
        (&[3, 5], None),
        (&[7, 13], Some(&[1, 0])),
        (&[2, 3, 4], Some(&[0, 2, 1])),
        (&[2, 3, 4], Some(&[2, 0, 1])),
        (&[2, 3, 4], Some(&[1, 2, 0])),
        (&[1, 3, 5, 7], Some(&[0, 2, 3, 1])),
        (&[1, 5, 7, 3], Some(&[0, 3, 1, 2])),
        (&[2, 3, 4, 5], None),
        (&[1, 7, 1], Some(&[2, 0, 1])),
        (&[0, 3], Some(&[1, 0])),
    ];
    for dtype in DTYPES {
        for &(shape, perm) in cases {
            let name = match perm {
                None => format!("{}_default", dims(shape)),
                Some(p) => {
                    let p: Vec<String> = p.iter().map(|v| v.to_string()).collect();
                    format!("{}_perm{}", dims(shape), p.join(""))
                }
            };
            let mut m = Maker::new(OpKind::Transpose, dtype, &name);
            m.input(shape, &fill(dtype));
            let attrs: Vec<(&str, Attr)> = perm.map(|p| ("perm", ints(p))).into_iter().collect();
            out.push(m.build(&attrs)?);
        }
    }
    Ok(())
}

/// Concat along positive and negative axes, of 1 to 3 operands, with size-1 and empty
/// operands and a constant operand.
pub fn concat(out: &mut Vec<Case>) -> Result<()> {
    let cases: &[(&str, &[&[usize]], i64, bool)] = &[
        ("axis0_2x3_4x3", &[&[2, 3], &[4, 3]], 0, false),
        ("axis1_2x3_2x5", &[&[2, 3], &[2, 5]], 1, false),
        (
            "axis_neg1_2x3x4_2x3x1",
            &[&[2, 3, 4], &[2, 3, 1]],
            -1,
            false,
        ),
        (
            "axis_neg2_three",
            &[&[2, 1, 4], &[2, 3, 4], &[2, 2, 4]],
            -2,
            false,
        ),
        ("rank1_7_13_1", &[&[7], &[13], &[1]], 0, false),
        ("empty_operand_2x0_2x3", &[&[2, 0], &[2, 3]], 1, false),
        ("single_operand", &[&[3, 4]], 0, false),
        ("const_operand_2x3_1x3", &[&[2, 3], &[1, 3]], 0, true),
    ];
    for dtype in DTYPES {
        for &(name, shapes, axis, last_const) in cases {
            let mut m = Maker::new(OpKind::Concat, dtype, name);
            for (i, shape) in shapes.iter().enumerate() {
                if last_const && i + 1 == shapes.len() {
                    m.constant(shape, &fill(dtype));
                } else {
                    m.input(shape, &fill(dtype));
                }
            }
            out.push(m.build(&[("axis", Attr::Int(axis))])?);
        }
    }
    Ok(())
}

/// Flatten at every axis 0..=rank of a rank-3 input, negative axes, rank 1 and 4, empty.
pub fn flatten(out: &mut Vec<Case>) -> Result<()> {
    let cases: &[(&[usize], i64)] = &[
        (&[2, 3, 4], 0),
        (&[2, 3, 4], 1),
        (&[2, 3, 4], 2),
        (&[2, 3, 4], 3),
        (&[2, 3, 4], -1),
        (&[2, 3, 4], -3),
        (&[7], 0),
        (&[7], 1),
        (&[2, 3, 4, 5], 2),
        (&[2, 0, 3], 1),
    ];
    for dtype in DTYPES {
        for &(shape, axis) in cases {
            let name = format!("{}_axis{}", dims(shape), axis).replace('-', "neg");
            let mut m = Maker::new(OpKind::Flatten, dtype, &name);
            m.input(shape, &fill(dtype));
            out.push(m.build(&[("axis", Attr::Int(axis))])?);
        }
    }
    Ok(())
}

fn fill(dtype: DType) -> Fill {
    match dtype {
        DType::F32 => Fill::Mixed(SPECIALS.to_vec(), -10.0, 10.0),
        DType::I64 => Fill::Range(-1e15, 1e15),
        _ => Fill::Range(-1e6, 1e6),
    }
}
