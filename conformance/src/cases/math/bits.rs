//! BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot and BitShift cases: every integer dtype
//! over its whole range (the sign bit included), broadcasting, and shifts from 0 to past
//! the width (which give 0).

use baton_delegate_api::DType::{F32, I16, I32, I64, I8, U16, U32, U64, U8};
use baton_delegate_api::{Attr, GraphBuilder, IrError, OpKind};

use super::super::gen::{case_id, tensor, Draw, Fill, Rng};
use super::super::{Case, CaseBody};
use super::{Sink, BINARY_SHAPES};
use crate::error::{Error, Result};

/// The largest magnitude drawn: the generator's span `hi - lo` must fit an i64.
const LIMIT: f64 = (1u64 << 61) as f64;

pub(super) fn bits(s: &mut Sink) -> Result<()> {
    for (desc, shape) in [("33", &[33][..]), ("2x3x4", &[2, 3, 4])] {
        s.out.push(bit_model(s.op, desc, shape)?);
    }
    if s.op == OpKind::BitShift {
        for dtype in [U8, U16, U32, U64] {
            let width = 8.0 * dtype.size() as f64;
            for dir in ["LEFT", "RIGHT"] {
                let attrs = [("direction", Attr::Str(dir.into()))];
                let hi = dtype
                    .int_range()
                    .map_or(255.0, |(_, hi)| (hi as f64).min(LIMIT));
                s.with(
                    dtype,
                    &format!("{}_by_0_to_past_width", dir.to_lowercase()),
                    &attrs,
                    |m| {
                        m.input(&[3, 6], &Fill::Range(0.0, hi)).input(
                            &[6],
                            &Fill::Cycle(vec![0.0, 1.0, 3.0, width - 1.0, width, width + 5.0]),
                        );
                    },
                )?;
                s.with(
                    dtype,
                    &format!("{}_bcast_2x1x3_4x1", dir.to_lowercase()),
                    &attrs,
                    |m| {
                        m.input(&[2, 1, 3], &Fill::Range(0.0, hi))
                            .input(&[4, 1], &Fill::Range(0.0, width - 1.0));
                    },
                )?;
            }
        }
        return Ok(());
    }
    for dtype in [I8, U8, I16, U16, I32, U32, I64, U64] {
        let (lo, hi) = dtype
            .int_range()
            .map_or((0.0, 255.0), |(l, h)| (l as f64, h as f64));
        // 64-bit dtypes keep below [`LIMIT`] in size.
        let full = Fill::Range(lo.max(-LIMIT), hi.min(LIMIT));
        if s.op == OpKind::BitwiseNot {
            s.one(dtype, "full_range_17", &[17], &full)?;
            s.one(
                dtype,
                "extremes",
                &[4],
                &Fill::Cycle(vec![lo, hi, 0.0, -1.0_f64.max(lo)]),
            )?;
            continue;
        }
        for &(name, a, b) in &BINARY_SHAPES[..4] {
            s.with(dtype, name, &[], |m| {
                m.input(a, &full).input(b, &full);
            })?;
        }
    }
    Ok(())
}

/// The f32 case of an integer-only op: `Cast(op(Cast(x), c))` with `x` f32 whole numbers
/// in the integer's range, cast to i32 (u32 for BitShift) and back, and `c` a constant
/// (shifts of 0 to 33). A `Model` case carrying the op's name, as op cases hold one node.
fn bit_model(op: OpKind, desc: &str, shape: &[usize]) -> Result<Case> {
    let id = case_id(op, F32, desc);
    let err = |e: IrError| Error::Case {
        id: id.clone(),
        message: e.to_string(),
    };
    let mut rng = Rng::for_id(&id);
    let (dtype, lo) = if op == OpKind::BitShift {
        (U32, 0.0)
    } else {
        (I32, -1000.0)
    };
    let x = rng.tensor(F32, shape, &Fill::Range(lo, 1000.0)).to_f64();
    let x = tensor(F32, shape, &x.iter().map(|v| v.trunc()).collect::<Vec<_>>());
    let mut b = GraphBuilder::new(&id);
    let xi = b.input_fixed("x", F32, shape);
    let to = |d: baton_delegate_api::DType| [("to", Attr::Int(d.onnx_code()))];
    let xc = b.node(OpKind::Cast, &[xi], &to(dtype)).map_err(err)?;
    let y = if op == OpKind::BitwiseNot {
        b.node(op, &[xc], &[]).map_err(err)?
    } else {
        let c: Vec<f64> = (0..shape[shape.len() - 1])
            .map(|i| (i % 34) as f64)
            .collect();
        let c = tensor(dtype, &[c.len()], &c);
        let ci = b.constant(
            "c",
            dtype,
            &c.shape,
            baton_delegate_api::TensorData::from_bytes(c.bytes()),
        );
        let attrs = [("direction", Attr::Str("LEFT".into()))];
        let attrs: &[(&str, Attr)] = if op == OpKind::BitShift { &attrs } else { &[] };
        b.node(op, &[xc, ci], attrs).map_err(err)?
    };
    let y = b.node(OpKind::Cast, &[y], &to(F32)).map_err(err)?;
    b.rename(y, "out");
    b.output(y);
    let graph = b.finish().map_err(err)?;
    Ok(Case {
        id: id.clone(),
        op: op.name().to_string(),
        dtype: Some(F32),
        body: CaseBody::Model {
            graph,
            inputs: vec![x],
        },
    })
}
