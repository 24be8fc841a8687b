//! Reduce cases: axes as attribute or input, `keepdims`, `noop_with_empty_axes`, empty
//! reductions, special values and integer extremes, for every Reduce op.

use baton_delegate_api::DType::{F16, F32, I32, I64};
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::super::gen::{dims, ints, Fill, SPECIALS, SPECIALS_F16};
use super::{int_limits, int_tensor, Sink, NEG_ZERO};
use crate::error::Result;

/// How a Reduce case gives its axes.
#[derive(Clone, Copy)]
enum Axes {
    /// No axes at all.
    None,
    /// The `axes` attribute (opset 13-17 style).
    Attr(&'static [i64]),
    /// A constant i64 input 1 (opset 18 style); may be empty.
    Input(&'static [i64]),
}

/// A Reduce case: axes, `keepdims` and `noop_with_empty_axes`.
#[derive(Clone, Copy)]
struct ReduceSpec(Axes, i64, i64);

pub(super) fn reduce(s: &mut Sink) -> Result<()> {
    use Axes::{Attr as A, Input as In};
    // (X shape, description suffix, spec); the id is `{shape}_{suffix}`.
    let variants: &[(&[usize], &str, ReduceSpec)] = &[
        (&[3, 4, 5], "attr_axis1", ReduceSpec(A(&[1]), 1, 0)),
        (&[3, 4, 5], "input_axis1_keep0", ReduceSpec(In(&[1]), 0, 0)),
        (&[3, 4, 5], "input_axes0_2", ReduceSpec(In(&[0, 2]), 1, 0)),
        (
            &[3, 4, 5],
            "attr_axisneg1_keep0",
            ReduceSpec(A(&[-1]), 0, 0),
        ),
        (
            &[3, 4, 5],
            "input_axesneg3_neg1_keep0",
            ReduceSpec(In(&[-3, -1]), 0, 0),
        ),
        (&[3, 4, 5], "all", ReduceSpec(Axes::None, 1, 0)),
        (&[3, 4, 5], "all_keep0", ReduceSpec(Axes::None, 0, 0)),
        (&[3, 4, 5], "empty_axes_input", ReduceSpec(In(&[]), 1, 0)),
        (&[3, 4, 5], "noop_empty_input", ReduceSpec(In(&[]), 1, 1)),
        (&[3, 4, 5], "noop_no_axes", ReduceSpec(Axes::None, 0, 1)),
        (&[7], "axis0", ReduceSpec(A(&[0]), 1, 0)),
        (&[1, 33], "axis1", ReduceSpec(In(&[1]), 1, 0)),
        (&[2, 1, 3], "size1_axis", ReduceSpec(In(&[1]), 0, 0)),
        (&[], "all", ReduceSpec(Axes::None, 1, 0)),
        (&[2, 0, 3], "axis0_empty_out", ReduceSpec(In(&[0]), 1, 0)),
        (&[2, 0, 3], "axis1_empty_set", ReduceSpec(In(&[1]), 1, 0)),
    ];
    let f16_cases = ["3x4x5_attr_axis1", "1x33_axis1", "3x4x5_all"];
    let int_cases = ["3x4x5_attr_axis1", "3x4x5_input_axes0_2", "3x4x5_all_keep0"];
    // L2 and LogSumExp are float-only.
    let float_only = matches!(s.op, OpKind::ReduceL2 | OpKind::ReduceLogSumExp);
    let dtypes: &[DType] = if float_only {
        &[F32, F16]
    } else {
        &[F32, F16, I32, I64]
    };
    for &dtype in dtypes {
        for (shape, suffix, spec) in variants {
            let desc = format!("{}_{suffix}", dims(shape));
            // An integer mean over an empty set is undefined (an error in the reference).
            let empty_ok = s.op != OpKind::ReduceMean && suffix == &"axis1_empty_set";
            let wanted = match dtype {
                F32 => true,
                F16 => f16_cases.contains(&desc.as_str()),
                _ => int_cases.contains(&desc.as_str()) || *suffix == "noop_no_axes" || empty_ok,
            };
            let fill = match dtype {
                I32 => Fill::Range(-1e6, 1e6),
                I64 => Fill::Range(-1e15, 1e15),
                _ => Fill::Range(-10.0, 10.0),
            };
            if wanted {
                let x = rng_input(shape, fill);
                reduce_case(s, dtype, &desc, x, spec)?;
            }
        }
    }
    let special_fills: [(&str, DType, Fill); 4] = [
        ("specials", F32, Fill::Mixed(SPECIALS.to_vec(), -1.0, 1.0)),
        ("negzero", F32, Fill::Cycle(NEG_ZERO.to_vec())),
        ("large_1e30", F32, Fill::Range(-1e30, 1e30)),
        (
            "specials",
            F16,
            Fill::Mixed(SPECIALS_F16.to_vec(), -1.0, 1.0),
        ),
    ];
    for (desc, dtype, fill) in special_fills {
        reduce_case(
            s,
            dtype,
            desc,
            rng_input(&[4, 12], fill),
            &ReduceSpec(In(&[1]), 1, 0),
        )?;
    }
    // Integer sums wrap; means and maxima stay exact near the limits.
    for &dtype in &dtypes[2..] {
        let (lo, hi) = int_limits(dtype);
        let x = int_tensor(dtype, &[4, 2], &[hi, hi, lo, 1, hi, -1, lo, lo]);
        reduce_case(
            s,
            dtype,
            "extremes",
            ReduceInput::Given(x),
            &ReduceSpec(A(&[1]), 1, 0),
        )?;
    }
    Ok(())
}

/// The data operand of a Reduce case: generated, or given values.
enum ReduceInput<'a> {
    Generated(&'a [usize], Fill),
    Given(Tensor),
}

fn rng_input(shape: &[usize], fill: Fill) -> ReduceInput<'_> {
    ReduceInput::Generated(shape, fill)
}

fn reduce_case(
    s: &mut Sink,
    dtype: DType,
    desc: &str,
    x: ReduceInput,
    spec: &ReduceSpec,
) -> Result<()> {
    let ReduceSpec(axes, keepdims, noop) = *spec;
    let mut attrs = vec![("keepdims", Attr::Int(keepdims))];
    if noop != 0 {
        attrs.push(("noop_with_empty_axes", Attr::Int(noop)));
    }
    if let Axes::Attr(a) = axes {
        attrs.push(("axes", ints(a)));
    }
    s.with(dtype, desc, &attrs, |m| {
        match x {
            ReduceInput::Generated(shape, fill) => m.input(shape, &fill),
            ReduceInput::Given(t) => m.operand(t, false),
        };
        if let Axes::Input(a) = axes {
            m.operand(Tensor::from_i64(&[a.len()], a), true);
        }
    })
}
