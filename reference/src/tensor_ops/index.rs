//! CumSum, Trilu, ReverseSequence, TensorScatter, GatherElements, ScatterElements, GatherND, ScatterND, DepthToSpace and
//! SpaceToDepth.
//!
//! Indices may be negative (counted from the end of their axis); one outside the axis is
//! a [`KernelError::Arithmetic`] naming it. Scatters apply their updates in index order,
//! so with `reduction` none a repeated index keeps the last update (ONNX leaves it
//! undefined; its reference does this). Reductions compute in f64 (floats) or exact
//! integers (wrapping to the dtype), rounding once per output element.

use baton_delegate_api::{DType, Node, OpKind, TensorMut, TensorRef};

use super::{axis_of, move_element, present};
use crate::data::{load, load_f64, load_ints, store_floats, store_ints, strides};
use crate::math::rounding::store_rounded;
use crate::KernelError;

/// An i32 or i64 index tensor's values.
fn index_values(t: &TensorRef<'_>) -> Vec<i64> {
    match t.dtype {
        DType::I32 => load::<i32>(t).into_iter().map(i64::from).collect(),
        _ => load::<i64>(t),
    }
}

/// `i` resolved against an axis of extent `dim`.
fn resolve(node: &Node, i: i64, dim: usize) -> Result<usize, KernelError> {
    let r = if i < 0 { i + dim as i64 } else { i };
    if r < 0 || r >= dim as i64 {
        return Err(KernelError::Arithmetic {
            node: node.label(),
            message: format!("{} index {i} is out of range for extent {dim}", node.op),
        });
    }
    Ok(r as usize)
}

/// Running sums (CumProd: products) along the axis given by input 1; `exclusive` leaves
/// each element out of its own sum, `reverse` runs from the end.
pub(super) fn cumsum(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let raw = index_values(&inputs[1]);
    let axis = axis_of(node, raw.first().copied().unwrap_or(0), x.shape.len())?;
    let (exclusive, reverse) = (
        node.attr_int("exclusive", 0) != 0,
        node.attr_int("reverse", 0) != 0,
    );
    let product = node.op == OpKind::CumProd;
    let n = x.shape[axis];
    let inner: usize = x.shape[axis + 1..].iter().product();
    let outer: usize = x.shape[..axis].iter().product();
    // The positions of each line, in the order the sum runs.
    let lines = |f: &mut dyn FnMut(&[usize])| {
        for o in 0..outer {
            for i in 0..inner {
                let mut at: Vec<usize> = (0..n).map(|k| (o * n + k) * inner + i).collect();
                if reverse {
                    at.reverse();
                }
                f(&at);
            }
        }
    };
    if x.dtype.is_float() {
        let v = load_f64(x);
        let mut r = vec![0.0; v.len()];
        let (start, step): (f64, fn(f64, f64) -> f64) = if product {
            (1.0, |a, b| a * b)
        } else {
            (0.0, |a, b| a + b)
        };
        lines(&mut |at| {
            let mut acc = start;
            for &p in at {
                if exclusive {
                    r[p] = acc;
                    acc = step(acc, v[p]);
                } else {
                    acc = step(acc, v[p]);
                    r[p] = acc;
                }
            }
        });
        store_rounded(out, &r);
    } else {
        let v = load_ints(x);
        let mut r = vec![0i128; v.len()];
        let (start, step): (i64, fn(i64, i64) -> i64) = if product {
            (1, i64::wrapping_mul)
        } else {
            (0, i64::wrapping_add)
        };
        lines(&mut |at| {
            let mut acc = i128::from(start);
            for &p in at {
                let before = acc;
                // Wrapping in 64 bits and truncating to the dtype on store is wrapping in
                // the dtype.
                acc = i128::from(step(acc as i64, v[p] as i64));
                r[p] = if exclusive { before } else { acc };
            }
        });
        store_ints(out, &r);
    }
    Ok(())
}

/// Keeps the upper (`upper` 1, the default) or lower triangle of each matrix from the
/// `k`-th diagonal (input 1, default 0) and zeroes the rest.
pub(super) fn trilu(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let k = if present(inputs, 1) {
        load::<i64>(&inputs[1])[0]
    } else {
        0
    };
    let upper = node.attr_int("upper", 1) != 0;
    let r = x.shape.len();
    let (rows, cols) = (x.shape[r - 2], x.shape[r - 1]);
    let size = x.dtype.size();
    out.data.copy_from_slice(x.data);
    for (e, chunk) in out.data.chunks_exact_mut(size).enumerate() {
        let (i, j) = ((e / cols) % rows.max(1), e % cols);
        let d = j as i128 - i as i128;
        let keep = if upper {
            d >= k as i128
        } else {
            d <= k as i128
        };
        if !keep {
            chunk.fill(0);
        }
    }
    Ok(())
}

/// ReverseSequence: along the time axis, entry `t < len` of batch entry `b` comes from
/// `len - 1 - t`, the rest from `t` (`len = sequence_lens[b]`, which must lie in
/// `0..=time`).
pub(super) fn reverse_sequence(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let lens = load::<i64>(&inputs[1]);
    let batch_axis = usize::from(node.attr_int("batch_axis", 1) != 0);
    let time_axis = 1 - batch_axis;
    let time = x.shape[time_axis];
    if let Some(&bad) = lens.iter().find(|&&l| l < 0 || l as usize > time) {
        return Err(KernelError::Arithmetic {
            node: node.label(),
            message: format!("sequence length {bad} is outside 0..={time}"),
        });
    }
    let size = x.dtype.size();
    let inner: usize = x.shape[2..].iter().product::<usize>() * size;
    let (d0, d1) = (x.shape[0], x.shape[1]);
    for i in 0..d0 {
        for j in 0..d1 {
            let (b, t) = if batch_axis == 0 { (i, j) } else { (j, i) };
            let len = lens[b] as usize;
            let src_t = if t < len { len - 1 - t } else { t };
            let (si, sj) = if batch_axis == 0 {
                (i, src_t)
            } else {
                (src_t, j)
            };
            let dst = (i * d1 + j) * inner;
            let src = (si * d1 + sj) * inner;
            out.data[dst..dst + inner].copy_from_slice(&x.data[src..src + inner]);
        }
    }
    Ok(())
}

/// TensorScatter: a copy of the cache, then for each batch entry `b` and every position
/// before the sequence axis, `update`'s step `s` (all positions after the axis at once)
/// lands on step `write_indices[b] + s` of the cache (modulo its length when `circular`;
/// `linear` refuses a step past the end). Omitted write indices are all 0.
pub(super) fn tensor_scatter(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let (past, update) = (&inputs[0], &inputs[1]);
    let axis = baton_delegate_api::shape::tensor_scatter_axis(node, past.shape.len())
        .map_err(|m| crate::shape_err(node, m))?;
    let batch = past.shape[0];
    let starts = if present(inputs, 2) {
        load::<i64>(&inputs[2])
    } else {
        vec![0; batch]
    };
    let circular = node.attr_str("mode", "linear") == "circular";
    let (cache_len, steps) = (past.shape[axis], update.shape[axis]);
    let size = past.dtype.size();
    let inner: usize = past.shape[axis + 1..].iter().product::<usize>() * size;
    let outer: usize = past.shape[1..axis].iter().product();
    out.data.copy_from_slice(past.data);
    for (b, &start) in starts.iter().enumerate() {
        let bad = |message: String| KernelError::Arithmetic {
            node: node.label(),
            message,
        };
        if start < 0 {
            return Err(bad(format!(
                "write_indices[{b}] is {start}; it must be >= 0"
            )));
        }
        let start = start as usize;
        if !circular && start + steps > cache_len {
            return Err(bad(format!(
                "write_indices[{b}] {start} plus {steps} update steps passes the cache's {cache_len} (mode linear)"
            )));
        }
        for o in 0..outer {
            let line = b * outer + o;
            for s in 0..steps {
                let at = if circular {
                    (start + s) % cache_len
                } else {
                    start + s
                };
                let dst = (line * cache_len + at) * inner;
                let src = (line * steps + s) * inner;
                out.data[dst..dst + inner].copy_from_slice(&update.data[src..src + inner]);
            }
        }
    }
    Ok(())
}

/// GatherElements: each output element is the data element at its own position with the
/// `axis` coordinate replaced by its index.
pub(super) fn gather_elements(
    node: &Node,
    x: &TensorRef<'_>,
    indices: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let axis = axis_of(node, node.attr_int("axis", 0), x.shape.len())?;
    let sources = element_targets(node, x.shape, indices, axis)?;
    let size = x.dtype.size();
    for (k, &src) in sources.iter().enumerate() {
        move_element(out.data, k, x.data, src, size);
    }
    Ok(())
}

/// For each index element, the flat data position it names (its own coordinates with
/// the `axis` one replaced). Other coordinates must lie inside the data.
fn element_targets(
    node: &Node,
    data_shape: &[usize],
    indices: &TensorRef<'_>,
    axis: usize,
) -> Result<Vec<usize>, KernelError> {
    let idx = index_values(indices);
    let ds = strides(data_shape);
    let is = strides(indices.shape);
    let mut r = Vec::with_capacity(idx.len());
    for (e, &i) in idx.iter().enumerate() {
        let mut flat = 0;
        for d in 0..data_shape.len() {
            let c = (e / is[d]) % indices.shape[d];
            let c = if d == axis {
                resolve(node, i, data_shape[d])?
            } else if c < data_shape[d] {
                c
            } else {
                return Err(crate::shape_err(
                    node,
                    format!(
                        "indices {:?} exceed data {data_shape:?} off the axis",
                        indices.shape
                    ),
                ));
            };
            flat += c * ds[d];
        }
        r.push(flat);
    }
    Ok(r)
}

/// ScatterElements: the data with each update combined into the element its index names.
pub(super) fn scatter_elements(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let axis = axis_of(node, node.attr_int("axis", 0), x.shape.len())?;
    let targets = element_targets(node, x.shape, &inputs[1], axis)?;
    let pairs: Vec<(usize, usize)> = targets
        .into_iter()
        .enumerate()
        .map(|(k, t)| (t, k))
        .collect();
    scatter(node, x, &inputs[2], &pairs, 1, out)
}

/// Writes `x` to `out`, then for each `(target, source)` pair combines the `width`
/// elements of `updates` from `source * width` into `out` from `target * width`.
fn scatter(
    node: &Node,
    x: &TensorRef<'_>,
    updates: &TensorRef<'_>,
    pairs: &[(usize, usize)],
    width: usize,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let reduction = node.attr_str("reduction", "none");
    if reduction == "none" {
        out.data.copy_from_slice(x.data);
        let size = x.dtype.size();
        for &(t, s) in pairs {
            for w in 0..width {
                move_element(out.data, t * width + w, updates.data, s * width + w, size);
            }
        }
        return Ok(());
    }
    if x.dtype.is_float() {
        let (mut acc, upd) = (load_f64(x), load_f64(updates));
        // NaN propagates through max and min, as numpy's maximum and minimum do.
        let f = match reduction {
            "add" => |a: f64, u: f64| a + u,
            "mul" => |a: f64, u: f64| a * u,
            "max" => |a: f64, u: f64| if u > a || u.is_nan() { u } else { a },
            _ => |a: f64, u: f64| if u < a || u.is_nan() { u } else { a },
        };
        combine(&mut acc, &upd, pairs, width, f);
        store_floats(out, &acc, false);
    } else {
        let (mut acc, upd) = (load_ints(x), load_ints(updates));
        // Wrapping in 64 bits, then truncating to the dtype on store, wraps in the dtype.
        let f = match reduction {
            "add" => |a: i128, u: i128| i128::from((a as i64).wrapping_add(u as i64)),
            "mul" => |a: i128, u: i128| i128::from((a as i64).wrapping_mul(u as i64)),
            "max" => |a: i128, u: i128| a.max(u),
            _ => |a: i128, u: i128| a.min(u),
        };
        combine(&mut acc, &upd, pairs, width, f);
        store_ints(out, &acc);
    }
    Ok(())
}

fn combine<T: Copy>(
    acc: &mut [T],
    upd: &[T],
    pairs: &[(usize, usize)],
    width: usize,
    f: fn(T, T) -> T,
) {
    for &(t, s) in pairs {
        for w in 0..width {
            let a = &mut acc[t * width + w];
            *a = f(*a, upd[s * width + w]);
        }
    }
}

/// For GatherND and ScatterND: the flat slice number of `data` each index tuple names
/// (slices of `data.shape[b + k..]`), in order, for `b` batch dimensions.
fn nd_targets(
    node: &Node,
    data_shape: &[usize],
    indices: &TensorRef<'_>,
    batch: usize,
) -> Result<Vec<usize>, KernelError> {
    let idx = load::<i64>(indices);
    let k = *indices.shape.last().unwrap_or(&1);
    let batches: usize = data_shape[..batch].iter().product();
    let per_batch_tuples: usize = indices.shape[batch..indices.shape.len() - 1]
        .iter()
        .product();
    let addressed = &data_shape[batch..batch + k];
    let slices_per_batch: usize = addressed.iter().product();
    let astr = strides(addressed);
    let mut r = Vec::with_capacity(idx.len() / k.max(1));
    for b in 0..batches {
        for t in 0..per_batch_tuples {
            let tuple = &idx[(b * per_batch_tuples + t) * k..][..k];
            let mut flat = 0;
            for (d, &i) in tuple.iter().enumerate() {
                flat += resolve(node, i, addressed[d])? * astr[d];
            }
            r.push(b * slices_per_batch + flat);
        }
    }
    Ok(r)
}

pub(super) fn gather_nd(
    node: &Node,
    x: &TensorRef<'_>,
    indices: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let batch = node.attr_int("batch_dims", 0) as usize;
    let k = *indices.shape.last().unwrap_or(&1);
    let width: usize = x.shape[batch + k..].iter().product();
    let size = x.dtype.size();
    for (n, src) in nd_targets(node, x.shape, indices, batch)?
        .into_iter()
        .enumerate()
    {
        for w in 0..width {
            move_element(out.data, n * width + w, x.data, src * width + w, size);
        }
    }
    Ok(())
}

pub(super) fn scatter_nd(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let x = &inputs[0];
    let k = *inputs[1].shape.last().unwrap_or(&1);
    let width: usize = x.shape[k..].iter().product();
    let targets = nd_targets(node, x.shape, &inputs[1], 0)?;
    let pairs: Vec<(usize, usize)> = targets
        .into_iter()
        .enumerate()
        .map(|(s, t)| (t, s))
        .collect();
    scatter(node, x, &inputs[2], &pairs, width, out)
}

/// DepthToSpace (`DCR`: depth, column, row order of the channel split, the default; or
/// `CRD`) and SpaceToDepth, as element moves: each output element's source position.
pub(super) fn depth_space(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let b = node.attr_int("blocksize", 1) as usize;
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let size = x.dtype.size();
    let src_at = |nn: usize, cc: usize, hh: usize, ww: usize| ((nn * c + cc) * h + hh) * w + ww;
    let mut k = 0;
    if node.op == OpKind::DepthToSpace {
        let crd = node.attr_str("mode", "DCR") == "CRD";
        let oc = c / (b * b);
        for nn in 0..n {
            for o in 0..oc {
                for y in 0..h * b {
                    for xx in 0..w * b {
                        let (bi, bj) = (y % b, xx % b);
                        let cc = if crd {
                            (o * b + bi) * b + bj
                        } else {
                            (bi * b + bj) * oc + o
                        };
                        move_element(out.data, k, x.data, src_at(nn, cc, y / b, xx / b), size);
                        k += 1;
                    }
                }
            }
        }
    } else {
        for nn in 0..n {
            for oc in 0..c * b * b {
                let (blk, cc) = (oc / c, oc % c);
                let (bi, bj) = (blk / b, blk % b);
                for y in 0..h / b {
                    for xx in 0..w / b {
                        move_element(
                            out.data,
                            k,
                            x.data,
                            src_at(nn, cc, y * b + bi, xx * b + bj),
                            size,
                        );
                        k += 1;
                    }
                }
            }
        }
    }
    Ok(())
}
