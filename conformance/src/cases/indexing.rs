//! Cases of the indexing ops (GatherElements, ScatterElements, GatherND, ScatterND), the
//! running and masking ops (CumSum, Trilu, ReverseSequence), TensorScatter and the block rearrangements (DepthToSpace,
//! SpaceToDepth). Indices are constants drawn inside their axes, negative ones included;
//! scatter indices with a reduction repeat on purpose. CumSum's axis and Trilu's `k` are
//! constants too (a plugin may read them at compile time).

use baton_delegate_api::DType::{Bool, F16, F32, I32, I64, I8, U8};
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::gen::{dims, Fill, Maker, Rng, SPECIALS};
use super::Case;
use crate::error::Result;

/// An integer for a case id, which allows no `-`.
fn id_int(v: i64) -> String {
    if v < 0 {
        format!("neg{}", -v)
    } else {
        v.to_string()
    }
}

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::CumSum | OpKind::CumProd => cumsum(op, out),
        OpKind::Trilu => trilu(out),
        OpKind::ReverseSequence => reverse_sequence(out),
        OpKind::TensorScatter => tensor_scatter(out),
        OpKind::GatherElements | OpKind::ScatterElements => elements(op, out),
        OpKind::GatherND | OpKind::ScatterND => nd(op, out).and_then(|()| nd_dtypes(op, out)),
        OpKind::DepthToSpace | OpKind::SpaceToDepth => depth_space(op, out),
        _ => Ok(()),
    }
}

type Attrs<'a> = &'a [(&'a str, Attr)];

fn push(
    out: &mut Vec<Case>,
    op: OpKind,
    dtype: DType,
    desc: &str,
    attrs: Attrs,
    add: impl FnOnce(&mut Maker),
) -> Result<()> {
    let mut m = Maker::new(op, dtype, desc);
    add(&mut m);
    out.push(m.build(attrs)?);
    Ok(())
}

fn values(dtype: DType) -> Fill {
    match dtype {
        F32 | F16 => Fill::Range(-10.0, 10.0),
        U8 => Fill::Range(0.0, 255.0),
        Bool => Fill::Range(0.0, 1.0),
        _ => Fill::Range(-100.0, 100.0),
    }
}

/// `n` indices in `[-dim, dim)`.
fn indices(rng: &mut Rng, n: usize, dim: usize) -> Vec<i64> {
    (0..n)
        .map(|_| rng.int(-(dim as i64), dim as i64 - 1))
        .collect()
}

/// CumSum and CumProd cases (products of values in [-2, 2], which stay in range).
fn cumsum(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let fill = |dtype: DType| match op {
        OpKind::CumProd if dtype.is_float() => Fill::Range(-2.0, 2.0),
        OpKind::CumProd => Fill::Range(-3.0, 3.0),
        _ => values(dtype),
    };
    for (shape, axis) in [
        (&[10][..], 0i64),
        (&[3, 4, 5][..], 1),
        (&[3, 4, 5][..], -1),
        (&[2, 3][..], 0),
    ] {
        for (exclusive, reverse) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let desc = format!(
                "{}_axis{}_ex{exclusive}_rev{reverse}",
                dims(shape),
                id_int(axis)
            );
            let attrs = [
                ("exclusive", Attr::Int(exclusive)),
                ("reverse", Attr::Int(reverse)),
            ];
            push(out, op, F32, &desc, &attrs, |m| {
                m.input(shape, &fill(F32));
                m.operand(Tensor::from_i64(&[], &[axis]), true);
            })?;
        }
    }
    push(out, op, F32, "specials", &[], |m| {
        m.input(&[12], &Fill::Cycle(SPECIALS.to_vec()));
        m.operand(Tensor::from_i64(&[1], &[0]), true);
    })?;
    for dtype in [F16, I32, I64] {
        push(out, op, dtype, "3x4_axis1", &[], |m| {
            m.input(&[3, 4], &fill(dtype));
            m.operand(Tensor::from_bytes(I32, &[], &1i32.to_le_bytes()), true);
        })?;
    }
    Ok(())
}

/// ReverseSequence: time-major and batch-major, lengths from 0 to the whole sequence,
/// other dtypes, and a trailing extent of 0.
fn reverse_sequence(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::ReverseSequence;
    type Form = (&'static str, &'static [usize], i64, &'static [i64]);
    let forms: &[Form] = &[
        ("time_major", &[4, 4], 1, &[4, 3, 2, 1]),
        ("batch_major", &[4, 4], 0, &[1, 2, 3, 4]),
        ("features", &[5, 3, 2, 3], 1, &[0, 5, 3]),
        ("batch_major_3d", &[2, 6, 3], 0, &[6, 2]),
        ("empty_features", &[3, 2, 0], 1, &[3, 1]),
    ];
    for &(desc, shape, batch_axis, lens) in forms {
        let attrs = [
            ("batch_axis", Attr::Int(batch_axis)),
            ("time_axis", Attr::Int(1 - batch_axis)),
        ];
        for dtype in [F32, F16, I64, Bool] {
            push(out, op, dtype, desc, &attrs, |m| {
                m.input(shape, &values(dtype));
                m.operand(Tensor::from_i64(&[lens.len()], lens), false);
            })?;
        }
    }
    Ok(())
}

/// TensorScatter: the default axis (-2) of a 4-D KV cache, a 3-D cache, an explicit
/// positive axis with a trailing extent, omitted write indices, writes that fill the cache
/// from 0 and that end on its last step, circular writes that wrap, and other dtypes.
fn tensor_scatter(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::TensorScatter;
    // (desc, cache shape, update steps, axis, mode, write indices)
    type Form = (
        &'static str,
        &'static [usize],
        usize,
        Option<i64>,
        &'static str,
        Option<&'static [i64]>,
    );
    let forms: &[Form] = &[
        ("kv_linear", &[2, 3, 6, 4], 2, None, "linear", Some(&[0, 4])),
        (
            "kv_one_step",
            &[3, 2, 5, 2],
            1,
            None,
            "linear",
            Some(&[4, 0, 2]),
        ),
        (
            "kv_whole_cache",
            &[2, 1, 4, 3],
            4,
            None,
            "linear",
            Some(&[0, 0]),
        ),
        ("kv_no_indices", &[2, 2, 5, 3], 3, None, "linear", None),
        (
            "kv_circular_wrap",
            &[2, 2, 5, 3],
            3,
            None,
            "circular",
            Some(&[4, 3]),
        ),
        (
            "kv_circular_past_end",
            &[2, 1, 4, 2],
            2,
            None,
            "circular",
            Some(&[7, 1]),
        ),
        ("seq_3d", &[3, 6, 4], 2, None, "linear", Some(&[1, 4, 0])),
        (
            "axis1_trailing",
            &[2, 5, 3, 2],
            2,
            Some(1),
            "linear",
            Some(&[3, 0]),
        ),
        (
            "axis_last",
            &[2, 3, 6],
            4,
            Some(-1),
            "circular",
            Some(&[5, 2]),
        ),
    ];
    for &(desc, shape, steps, axis, mode, starts) in forms {
        let rank = shape.len() as i64;
        let ax = axis.map_or(rank - 2, |a| if a < 0 { a + rank } else { a }) as usize;
        let mut update = shape.to_vec();
        update[ax] = steps;
        let mut attrs = vec![("mode", Attr::Str(mode.into()))];
        if let Some(a) = axis {
            attrs.push(("axis", Attr::Int(a)));
        }
        let dtypes: &[DType] = if desc == "kv_linear" || desc == "kv_circular_wrap" {
            &[F32, F16, I64, Bool, U8]
        } else {
            &[F32]
        };
        for &dtype in dtypes {
            push(out, op, dtype, desc, &attrs, |m| {
                m.input(shape, &values(dtype));
                m.input(&update, &values(dtype));
                if let Some(w) = starts {
                    m.operand(Tensor::from_i64(&[w.len()], w), false);
                }
            })?;
        }
    }
    Ok(())
}

fn trilu(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Trilu;
    for shape in [&[4, 5][..], &[2, 3, 3][..], &[5, 2][..]] {
        for upper in [1, 0] {
            for k in [None, Some(0i64), Some(1), Some(-2), Some(7)] {
                let kd = k.map_or("none".to_string(), id_int);
                let desc = format!("{}_upper{upper}_k{kd}", dims(shape));
                push(out, op, F32, &desc, &[("upper", Attr::Int(upper))], |m| {
                    m.input(shape, &Fill::Cycle(SPECIALS.to_vec()));
                    if let Some(k) = k {
                        m.operand(Tensor::from_i64(&[], &[k]), true);
                    }
                })?;
            }
        }
    }
    for dtype in [F16, I8, I64, Bool] {
        push(
            out,
            op,
            dtype,
            "3x4_lower",
            &[("upper", Attr::Int(0))],
            |m| {
                m.input(&[3, 4], &values(dtype));
            },
        )?;
    }
    Ok(())
}

fn elements(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let gather = op == OpKind::GatherElements;
    let reductions: &[&str] = if gather {
        &["none"]
    } else {
        &["none", "add", "mul", "max", "min"]
    };
    // (data shape, index shape, axis)
    let rows: [(&[usize], &[usize], i64); 4] = [
        (&[3, 4], &[2, 4], 0),
        (&[3, 4], &[3, 2], 1),
        (&[2, 3, 4], &[2, 3, 3], -1),
        (&[5], &[7], 0),
    ];
    for (data, idx, axis) in rows {
        for &red in reductions {
            let desc = format!("{}_idx{}_axis{}_{red}", dims(data), dims(idx), id_int(axis));
            let mut attrs = vec![("axis", Attr::Int(axis))];
            if !gather {
                attrs.push(("reduction", Attr::Str(red.into())));
            }
            let a = usize::try_from(if axis < 0 {
                axis + data.len() as i64
            } else {
                axis
            })
            .unwrap_or(0);
            // Scatter without a reduction must not repeat a target: it needs at most as
            // many indices along the axis as the axis has positions.
            if !gather && red == "none" && idx[a] > data[a] {
                continue;
            }
            for dtype in [F32, I32] {
                if dtype == I32 && red != "add" && red != "none" {
                    continue;
                }
                push(out, op, dtype, &desc, &attrs, |m| {
                    m.input(data, &values(dtype));
                    let n = idx.iter().product();
                    // Scatter without a reduction must not repeat a target: a permutation.
                    let v: Vec<i64> = if !gather && red == "none" {
                        permuted(&mut m.rng, idx, data[a], a)
                    } else {
                        indices(&mut m.rng, n, data[a])
                    };
                    m.operand(Tensor::from_i64(idx, &v), true);
                    if !gather {
                        m.input(idx, &values(dtype));
                    }
                })?;
            }
        }
    }
    Ok(())
}

/// Indices of `shape` whose lines along `axis` are distinct positions of an axis of
/// extent `dim` (each line a shuffled prefix of `0..dim`), so no two updates collide.
fn permuted(rng: &mut Rng, shape: &[usize], dim: usize, axis: usize) -> Vec<i64> {
    let n: usize = shape.iter().product();
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut v = vec![0i64; n];
    for o in 0..n / (len * inner).max(1) {
        for i in 0..inner {
            let mut pool: Vec<i64> = (0..dim as i64).collect();
            for k in 0..len {
                let pick = rng.int(k as i64, dim as i64 - 1) as usize;
                pool.swap(k, pick);
                v[(o * len + k) * inner + i] = pool[k];
            }
        }
    }
    v
}

fn nd(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let gather = op == OpKind::GatherND;
    // (data shape, index tuples, tuple length, batch_dims)
    let rows: [(&[usize], usize, usize, i64); 4] = [
        (&[4, 5], 3, 2, 0),
        (&[4, 5], 3, 1, 0),
        (&[2, 3, 4], 2, 3, 0),
        (&[2, 3, 4], 2, 1, 1),
    ];
    let reductions: &[&str] = if gather {
        &["none"]
    } else {
        &["none", "add", "mul", "max", "min"]
    };
    for (data, tuples, k, batch) in rows {
        if !gather && batch != 0 {
            continue; // ScatterND has no batch dimensions
        }
        for &red in reductions {
            let desc = format!("{}_{tuples}x{k}_b{batch}_{red}", dims(data));
            let mut attrs = vec![];
            if gather {
                attrs.push(("batch_dims", Attr::Int(batch)));
            } else {
                attrs.push(("reduction", Attr::Str(red.into())));
            }
            let b = batch as usize;
            push(out, op, F32, &desc, &attrs, |m| {
                m.input(data, &values(F32));
                let mut idx_shape = data[..b].to_vec();
                idx_shape.extend([tuples, k]);
                let count = idx_shape.iter().product::<usize>() / k;
                let mut v = Vec::new();
                for t in 0..count {
                    for d in 0..k {
                        let dim = data[b + d];
                        // Without a reduction, distinct tuples: the first coordinate is
                        // the tuple number (each row has more than `tuples` entries).
                        v.push(if !gather && red == "none" && d == 0 {
                            t as i64
                        } else {
                            indices(&mut m.rng, 1, dim)[0]
                        });
                    }
                }
                m.operand(Tensor::from_i64(&idx_shape, &v), true);
                if !gather {
                    let mut upd = idx_shape[..idx_shape.len() - 1].to_vec();
                    upd.extend(&data[b + k..]);
                    m.input(&upd, &values(F32));
                }
            })?;
        }
    }
    Ok(())
}

/// GatherND and ScatterND on the other kit dtypes: whole rows of a `[3, 4]` table.
fn nd_dtypes(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    for dtype in [F16, I8, I64, Bool] {
        push(out, op, dtype, "3x4_rows", &[], |m| {
            m.input(&[3, 4], &values(dtype));
            m.operand(Tensor::from_i64(&[2, 1], &[2, -3]), true);
            if op == OpKind::ScatterND {
                m.input(&[2, 4], &values(dtype));
            }
        })?;
    }
    Ok(())
}

fn depth_space(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    let to_space = op == OpKind::DepthToSpace;
    let rows: [(&[usize], i64); 3] = [(&[1, 8, 2, 3], 2), (&[2, 9, 3, 3], 3), (&[1, 4, 4, 4], 2)];
    for (shape, b) in rows {
        let shape: Vec<usize> = if to_space {
            shape.to_vec()
        } else {
            // The same data the other way round: [N, C / b², H b, W b].
            let bb = (b * b) as usize;
            vec![
                shape[0],
                shape[1] / bb,
                shape[2] * b as usize,
                shape[3] * b as usize,
            ]
        };
        let modes: &[&str] = if to_space { &["DCR", "CRD"] } else { &["-"] };
        for &mode in modes {
            let mut attrs = vec![("blocksize", Attr::Int(b))];
            if to_space {
                attrs.push(("mode", Attr::Str(mode.into())));
            }
            let desc = format!("{}_b{b}_{}", dims(&shape), mode.replace('-', "dcr"));
            push(out, op, F32, &desc, &attrs, |m| {
                m.input(&shape, &Fill::Cycle(SPECIALS.to_vec()));
            })?;
        }
    }
    for dtype in [F16, U8, I64] {
        let shape: &[usize] = if to_space {
            &[1, 4, 2, 2]
        } else {
            &[1, 1, 4, 4]
        };
        push(out, op, dtype, "b2", &[("blocksize", Attr::Int(2))], |m| {
            m.input(shape, &values(dtype));
        })?;
    }
    Ok(())
}
