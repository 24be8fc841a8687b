//! MaxPool (float and integer), AveragePool and GlobalAveragePool (float) over any number
//! of spatial axes.

use baton_delegate_api::ir::Node;
use baton_delegate_api::shape::{PoolGeometry, Window};
use baton_delegate_api::{TensorMut, TensorRef};

use super::data::{
    all_indices, load_f32, load_ints, store, store_f32, store_f64, store_ints, strides, sum_f64,
    tap_position,
};
use super::{shape_err, KernelError};

/// MaxPool: padding is ignored (-inf). Starts from the first in-bounds element and takes
/// every later `v > max`, so NaN wins only as the first element (ONNX Runtime's
/// comparison). A window wholly in the padding gives -inf.
///
/// The optional second output, `Indices` (i64), is the flat index of each maximum in
/// `X`: row-major, or with `storage_order` 1 with the spatial axes in column-major order
/// (batch and channel still outermost), as ONNX defines it; -1 for a window wholly in
/// the padding.
pub(crate) fn max_pool(
    node: &Node,
    x: &TensorRef<'_>,
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let g = PoolGeometry::new(node, x.shape).map_err(|m| shape_err(node, m))?;
    if let Some((lowest, _)) = x.dtype.int_range() {
        if outputs.len() > 1 {
            return Err(shape_err(
                node,
                format!(
                    "MaxPool's Indices output is implemented for float inputs, not {}",
                    x.dtype
                ),
            ));
        }
        return int_max_pool(x, &g, lowest, &mut outputs[0]);
    }
    let v = load_f32(x);
    let spatial = &x.shape[2..];
    let column_major = node.attr_int("storage_order", 0) != 0;
    let row_strides = strides(spatial);
    // Column-major strides of the spatial axes: the first axis varies fastest.
    let col_strides: Vec<usize> = (0..spatial.len())
        .map(|d| spatial[..d].iter().product())
        .collect();
    let mut r = Vec::with_capacity(outputs[0].len());
    let mut indices = Vec::with_capacity(outputs[0].len());
    for_each_window(x.shape, &g, |plane, taps| {
        let mut best: Option<(f32, usize)> = None;
        for tap in taps {
            if let Tap::Inside(i) = tap {
                let e = v[plane + i];
                best = match best {
                    Some((m, _)) if e > m => Some((e, *i)),
                    None => Some((e, *i)),
                    kept => kept,
                };
            }
        }
        r.push(best.map_or(f32::NEG_INFINITY, |b| b.0));
        indices.push(best.map_or(-1, |(_, i)| {
            let within = match column_major {
                false => i,
                true => (0..spatial.len())
                    .map(|d| (i / row_strides[d]) % spatial[d] * col_strides[d])
                    .sum(),
            };
            (plane + within) as i64
        }));
    });
    store_f32(&mut outputs[0], &r);
    if let Some(out) = outputs.get_mut(1) {
        store(out, &indices);
    }
    Ok(())
}

/// MaxPool of an integer tensor: exact comparisons; a window wholly in the padding gives
/// the type's minimum.
fn int_max_pool(
    x: &TensorRef<'_>,
    g: &PoolGeometry,
    lowest: i128,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let v = load_ints(x);
    let mut r = Vec::with_capacity(out.len());
    for_each_window(x.shape, g, |plane, taps| {
        let inside = taps.iter().filter_map(|tap| match tap {
            Tap::Inside(i) => Some(v[plane + i]),
            _ => None,
        });
        r.push(inside.max().unwrap_or(lowest));
    });
    store_ints(out, &r);
    Ok(())
}

/// AveragePool: the f64 sum of in-bounds elements divided by their count, or with
/// `count_include_pad` by the number of taps inside the padded input (taps past the
/// padded border, created by `ceil_mode`, never count). A zero divisor gives NaN.
pub(crate) fn average_pool(
    node: &Node,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let g = PoolGeometry::new(node, x.shape).map_err(|m| shape_err(node, m))?;
    let v = load_f32(x);
    let mut r = Vec::with_capacity(out.len());
    for_each_window(x.shape, &g, |plane, taps| {
        let (mut sum, mut inside, mut padded) = (0.0f64, 0usize, 0usize);
        for tap in taps {
            match tap {
                Tap::Inside(i) => {
                    sum += v[plane + i] as f64;
                    inside += 1;
                }
                Tap::Padding => padded += 1,
                Tap::Beyond => {}
            }
        }
        let divisor = if g.count_include_pad {
            inside + padded
        } else {
            inside
        };
        r.push(sum / divisor as f64);
    });
    store_f64(out, &r);
    Ok(())
}

/// The mean over all spatial positions of each `(n, c)` plane, summed in f64 (NaN for an
/// empty spatial extent).
pub(crate) fn global_average_pool(
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let planes = x.shape[0] * x.shape[1];
    let size: usize = x.shape[2..].iter().product();
    let v = load_f32(x);
    let r: Vec<f64> = (0..planes)
        .map(|p| {
            let sum = sum_f64(v[p * size..(p + 1) * size].iter().map(|&e| e as f64));
            sum / size as f64
        })
        .collect();
    store_f64(out, &r);
    Ok(())
}

/// Where one window tap falls.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tap {
    /// On the input, at this flat offset within the `(n, c)` plane.
    Inside(usize),
    /// In the explicit (or auto) padding.
    Padding,
    /// Past the padded border (only `ceil_mode` windows reach there).
    Beyond,
}

/// Calls `f(plane_start, taps)` for every output element in row-major order: for each
/// `(n, c)` plane, for each output position, the classification of each window tap.
fn for_each_window(x: &[usize], g: &PoolGeometry, mut f: impl FnMut(usize, &[Tap])) {
    let spatial = &x[2..];
    let plane_size: usize = spatial.iter().product();
    let positions = all_indices(&g.out_spatial);
    let kernel = all_indices(&g.window.kernel);
    // The taps of every output position, the same for every plane.
    let windows: Vec<Vec<Tap>> = positions
        .iter()
        .map(|o| {
            kernel
                .iter()
                .map(|t| classify(&g.window, spatial, o, t))
                .collect()
        })
        .collect();
    for plane in 0..x[0] * x[1] {
        for taps in &windows {
            f(plane * plane_size, taps);
        }
    }
}

fn classify(win: &Window, spatial: &[usize], o: &[usize], t: &[usize]) -> Tap {
    let sp_strides = strides(spatial);
    let mut offset = 0;
    let mut tap = Tap::Inside(0);
    for d in 0..spatial.len() {
        let p = tap_position(
            o[d],
            t[d],
            win.strides[d],
            win.dilations[d],
            win.pad_begin[d],
        );
        let len = spatial[d] as i64;
        if p < -(win.pad_begin[d] as i64) || p >= len + win.pad_end[d] as i64 {
            return Tap::Beyond;
        }
        if p < 0 || p >= len {
            tap = Tap::Padding;
        } else {
            offset += p as usize * sp_strides[d];
        }
    }
    match tap {
        Tap::Inside(_) => Tap::Inside(offset),
        other => other,
    }
}
