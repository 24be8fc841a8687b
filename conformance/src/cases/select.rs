//! Cases of the ops whose output extent depends on operand values (NonMaxSuppression,
//! Unique, Compress). A plugin cannot plan such an output, so the host runs these nodes
//! itself; the cases pin the reference's results (and let a plugin that takes them be
//! judged). Inputs repeat values on purpose (Unique) and overlap boxes (NonMaxSuppression).

use baton_delegate_api::DType::{Bool, F16, F32, I32, I64, U8};
use baton_delegate_api::{Attr, OpKind, Tensor};

use super::gen::{dims, tensor, Draw, Fill, Maker};
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::NonMaxSuppression => nms(out),
        OpKind::Unique => unique(out),
        OpKind::Compress => compress(out),
        _ => Ok(()),
    }
}

fn compress(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Compress;
    // (shape, axis, condition length); None flattens. Shorter conditions drop the tail.
    let layouts: [(&[usize], Option<i64>, usize); 6] = [
        (&[5, 3], Some(0), 5),
        (&[2, 6], Some(1), 4),
        (&[2, 3, 4], Some(-1), 4),
        (&[2, 3, 4], Some(1), 2),
        (&[3, 4], None, 12),
        (&[3, 4], None, 7),
    ];
    for (shape, axis, n) in layouts {
        for dtype in [F32, I64] {
            let axis_id = axis.map_or("flat".to_string(), |a| format!("axis{}", a.rem_euclid(8)));
            let desc = format!("{}_{axis_id}_cond{n}", dims(shape));
            let mut m = Maker::new(op, dtype, &desc);
            m.input(shape, &Fill::Range(-10.0, 10.0));
            let cond = m.rng.tensor(Bool, &[n], &Fill::Range(0.0, 1.0));
            m.operand(cond, false);
            let attrs: Vec<(&str, Attr)> =
                axis.map(|a| ("axis", Attr::Int(a))).into_iter().collect();
            out.push(m.build(&attrs)?);
        }
    }
    // Other dtypes, a constant condition, and one selecting nothing.
    for (dtype, cond, id) in [
        (F16, vec![1.0, 0.0, 1.0], "const_cond"),
        (U8, vec![0.0, 0.0, 0.0], "none_selected"),
        (Bool, vec![1.0, 1.0, 0.0], "const_cond"),
    ] {
        let mut m = Maker::new(op, dtype, &format!("3x2_axis0_{id}"));
        m.input(&[3, 2], &Fill::Range(0.0, 5.0));
        m.operand(tensor(Bool, &[3], &cond), true);
        out.push(m.build(&[("axis", Attr::Int(0))])?);
    }
    Ok(())
}

fn unique(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Unique;
    // Few distinct values, so that they repeat.
    for dtype in [F32, I32, I64, U8] {
        for sorted in [1i64, 0] {
            let desc = format!("4x5_sorted{sorted}");
            let mut m = Maker::new(op, dtype, &desc);
            let v = m.rng.values(20, &Fill::Range(0.0, 6.0), true);
            m.operand(tensor(dtype, &[4, 5], &v), false);
            out.push(m.build(&[("sorted", Attr::Int(sorted))])?);
        }
    }
    // Slices: rows of two bits repeat among eight; columns likewise.
    for (shape, axis) in [(&[8, 2][..], 0i64), (&[2, 8][..], -1), (&[2, 6, 2][..], 1)] {
        for sorted in [1i64, 0] {
            let desc = format!("{}_axis{}_sorted{sorted}", dims(shape), axis.rem_euclid(8));
            let mut m = Maker::new(op, I64, &desc);
            m.input(shape, &Fill::Range(0.0, 1.0));
            let attrs = [("axis", Attr::Int(axis)), ("sorted", Attr::Int(sorted))];
            out.push(m.build(&attrs)?);
        }
    }
    // Floats with signed zeros and repeats given exactly.
    let mut m = Maker::new(op, F32, "signed_zeros");
    m.operand(tensor(F32, &[6], &[0.0, -0.0, 1.5, -2.0, 1.5, 0.0]), false);
    out.push(m.build(&[])?);
    // Every output (indices, inverse indices, counts), flattened and along an axis, with
    // NaNs that compare equal to one another.
    for (shape, axis, sorted) in [
        (&[3, 4][..], None, 1i64),
        (&[3, 4][..], None, 0),
        (&[2, 5, 2][..], Some(1i64), 1),
        (&[2, 5, 2][..], Some(1), 0),
    ] {
        let axis_id = axis.map_or("flat".to_string(), |a| format!("axis{a}"));
        let mut m = Maker::new(
            op,
            F32,
            &format!("{}_{axis_id}_sorted{sorted}_all_outputs", dims(shape)),
        );
        let n: usize = shape.iter().product();
        let mut v = m.rng.values(n, &Fill::Range(0.0, 3.0), true);
        v[1] = f64::NAN;
        v[n - 2] = f64::NAN;
        m.operand(tensor(F32, shape, &v), false);
        m.outputs(4);
        let mut attrs = vec![("sorted", Attr::Int(sorted))];
        if let Some(a) = axis {
            attrs.push(("axis", Attr::Int(a)));
        }
        out.push(m.build(&attrs)?);
    }
    Ok(())
}

fn nms(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::NonMaxSuppression;
    // (batches, classes, boxes, max per class, iou threshold, score threshold, centre form)
    type Setup = (usize, usize, usize, i64, f64, Option<f64>, i64);
    let setups: [Setup; 6] = [
        (1, 1, 8, 8, 0.5, None, 0),
        (1, 2, 10, 3, 0.4, Some(0.3), 0),
        (2, 3, 12, 5, 0.6, Some(0.1), 0),
        (1, 1, 16, 16, 0.0, None, 0),
        (2, 1, 10, 4, 0.5, Some(0.5), 1),
        (1, 2, 6, 0, 0.5, None, 0),
    ];
    for (b, c, n, max, iou, score, center) in setups {
        let desc = format!(
            "b{b}_c{c}_n{n}_max{max}_iou{}{}_center{center}",
            (iou * 10.0) as i64,
            score.map_or(String::new(), |s| format!("_score{}", (s * 10.0) as i64))
        );
        let mut m = Maker::new(op, F32, &desc);
        // Boxes on a small field, so that many overlap; corners drawn in either order.
        let boxes: Vec<f64> = (0..b * n)
            .flat_map(|_| {
                let [y, x, h, w] = [0.0, 0.0, 1.0, 1.0].map(|lo: f64| m.rng.uniform(lo, lo + 3.0));
                if center == 1 {
                    vec![x, y, w, h]
                } else if m.rng.uniform(0.0, 1.0) < 0.5 {
                    vec![y, x, y + h, x + w]
                } else {
                    vec![y + h, x + w, y, x]
                }
            })
            .collect();
        m.operand(tensor(F32, &[b, n, 4], &boxes), false);
        let scores = m.rng.tensor(F32, &[b, c, n], &Fill::Range(0.0, 1.0));
        m.operand(scores, false);
        m.operand(Tensor::from_i64(&[1], &[max]), true);
        m.operand(tensor(F32, &[1], &[iou]), true);
        if let Some(s) = score {
            m.operand(tensor(F32, &[1], &[s]), true);
        }
        out.push(m.build(&[("center_point_box", Attr::Int(center))])?);
    }
    // Scalars for the optional operands, as some exporters write them.
    let mut m = Maker::new(op, F32, "scalar_operands");
    let boxes = m.rng.tensor(F32, &[1, 6, 4], &Fill::Range(0.0, 4.0));
    m.operand(boxes, false);
    let scores = m.rng.tensor(F32, &[1, 1, 6], &Fill::Range(0.0, 1.0));
    m.operand(scores, false);
    m.operand(Tensor::from_i64(&[], &[3]), true);
    m.operand(tensor(F32, &[], &[0.3]), true);
    out.push(m.build(&[])?);
    Ok(())
}
