//! Cases of the signal and sampling family: GridSample, and Einsum (the forms models use: batched and
//! broadcast matrix products, transposes, reductions, outer and inner products,
//! diagonals, implicit outputs and three operands).

use baton_delegate_api::DType::{F16, F32, I32, I64};
use baton_delegate_api::{Attr, OpKind};

use super::gen::{Fill, Maker};
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::Einsum => einsum(out),
        OpKind::GridSample => grid_sample(out),
        _ => Ok(()),
    }
}

fn einsum(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Einsum;
    type Form = (&'static str, &'static str, &'static [&'static [usize]]);
    let forms: &[Form] = &[
        ("batch_matmul", "bij,bjk->bik", &[&[3, 4, 5], &[3, 5, 6]]),
        (
            "attention_scores",
            "bhqd,bhkd->bhqk",
            &[&[2, 3, 4, 8], &[2, 3, 5, 8]],
        ),
        ("transpose", "ij->ji", &[&[5, 7]]),
        ("permute_implicit", "kji", &[&[2, 3, 4]]),
        ("row_sums", "ij->i", &[&[4, 9]]),
        ("total", "ijk->", &[&[3, 4, 5]]),
        ("inner", "i,i", &[&[17], &[17]]),
        ("outer", "i,j->ij", &[&[4], &[6]]),
        ("matvec", "ij,j->i", &[&[5, 8], &[8]]),
        ("trace", "ii", &[&[6, 6]]),
        ("batch_diagonal", "...ii->...i", &[&[2, 3, 4, 4]]),
        (
            "ellipsis_bcast",
            "...ij,...jk->...ik",
            &[&[2, 1, 3, 4], &[5, 4, 2]],
        ),
        ("bilinear", "bn,anm,bm->ba", &[&[2, 3], &[4, 3, 5], &[2, 5]]),
        ("scalar_operand", ",ij->ij", &[&[], &[3, 4]]),
        ("empty_sum", "ij,jk->ik", &[&[3, 0], &[0, 4]]),
    ];
    for &(desc, equation, shapes) in forms {
        let mut m = Maker::new(op, F32, desc);
        for s in shapes {
            m.input(s, &Fill::Range(-1.0, 1.0));
        }
        out.push(m.build(&[("equation", Attr::Str(equation.into()))])?);
    }
    for dtype in [F16, I32, I64] {
        let fill = if dtype.is_float() {
            Fill::Range(-1.0, 1.0)
        } else {
            Fill::Range(-20.0, 20.0)
        };
        let mut m = Maker::new(op, dtype, "batch_matmul");
        m.input(&[2, 3, 4], &fill).input(&[2, 4, 5], &fill);
        out.push(m.build(&[("equation", Attr::Str("bij,bjk->bik".into()))])?);
    }
    Ok(())
}

/// GridSample: every mode, padding mode and corner alignment in 2-D, grids reaching past
/// the image, 3-D volumes, and f16.
fn grid_sample(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::GridSample;
    let beyond = Fill::Range(-1.3, 1.3);
    for mode in ["nearest", "linear", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            for align in [0, 1] {
                let desc = format!("{mode}_{padding}_align{align}");
                let mut m = Maker::new(op, F32, &desc);
                m.input(&[2, 3, 5, 6], &Fill::Range(-1.0, 1.0))
                    .input(&[2, 4, 7, 2], &beyond);
                out.push(m.build(&grid_attrs(mode, padding, align))?);
            }
        }
    }
    for mode in ["nearest", "linear"] {
        let mut m = Maker::new(op, F32, &format!("volumetric_{mode}"));
        m.input(&[1, 2, 3, 4, 5], &Fill::Range(-1.0, 1.0))
            .input(&[1, 2, 3, 4, 3], &beyond);
        out.push(m.build(&grid_attrs(mode, "zeros", 0))?);
    }
    let mut m = Maker::new(op, F32, "one_pixel_reflection_align1");
    m.input(&[1, 2, 1, 1], &Fill::Range(-1.0, 1.0))
        .input(&[1, 3, 3, 2], &beyond);
    out.push(m.build(&grid_attrs("linear", "reflection", 1))?);
    let mut m = Maker::new(op, F16, "linear_border");
    m.input(&[1, 2, 4, 4], &Fill::Range(-1.0, 1.0))
        .input(&[1, 3, 5, 2], &beyond);
    out.push(m.build(&grid_attrs("linear", "border", 0))?);
    Ok(())
}

fn grid_attrs(mode: &str, padding: &str, align: i64) -> Vec<(&'static str, Attr)> {
    vec![
        ("mode", Attr::Str(mode.into())),
        ("padding_mode", Attr::Str(padding.into())),
        ("align_corners", Attr::Int(align)),
    ]
}
