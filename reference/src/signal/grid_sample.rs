//! GridSample: each output element interpolates `X` at the position its grid entry gives.

use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::data;
use crate::KernelError;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

pub(super) fn grid_sample(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let bad = |m: String| crate::unsupported(node, m);
    let mode = match node.attr_str("mode", "linear") {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        m => return Err(bad(format!("mode '{m}' is not nearest, linear or cubic"))),
    };
    let padding = match node.attr_str("padding_mode", "zeros") {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        m => {
            return Err(bad(format!(
                "padding_mode '{m}' is not zeros, border or reflection"
            )))
        }
    };
    let align = node.attr_int("align_corners", 0) != 0;
    let (x, grid) = (&inputs[0], &inputs[1]);
    let r = x.shape.len() - 2;
    let (batch, channels) = (x.shape[0], x.shape[1]);
    let dims = &x.shape[2..];
    let strides = data::strides(dims);
    let plane: usize = dims.iter().product();
    let points: usize = grid.shape[1..grid.shape.len() - 1].iter().product();
    let xs = data::load_f64(x);
    let gs = data::load_f64(grid);
    let mut y = vec![0.0; batch * channels * points];
    // The valid span of a coordinate: pixel centres with `align_corners`, else their edges.
    let span = |d: usize| {
        if align {
            (0.0, d as f64 - 1.0)
        } else {
            (-0.5, d as f64 - 0.5)
        }
    };
    for b in 0..batch {
        for p in 0..points {
            let g = &gs[(b * points + p) * r..][..r];
            // Per spatial axis, the taps: (offset in the plane or None for a zero, weight).
            let mut taps: Vec<Vec<(Option<usize>, f64)>> = Vec::with_capacity(r);
            let mut nan = false;
            for (i, &d) in dims.iter().enumerate() {
                // The grid lists the innermost axis first (x, then y, ...).
                let v = g[r - 1 - i];
                let mut c = if align {
                    (v + 1.0) / 2.0 * (d as f64 - 1.0)
                } else {
                    ((v + 1.0) * d as f64 - 1.0) / 2.0
                };
                if mode == Mode::Nearest {
                    c = c.round_ties_even();
                }
                let (lo, hi) = span(d);
                if c < lo || c > hi {
                    c = match padding {
                        Padding::Zeros => c,
                        Padding::Border => c.clamp(0.0, d as f64 - 1.0),
                        Padding::Reflection => reflect(c, lo, hi),
                    };
                }
                if !c.is_finite() {
                    // NaN (or a reflection of infinity) has no position; an infinite
                    // coordinate with zero padding reads only zeros.
                    if c.is_nan() || padding != Padding::Zeros {
                        nan = true;
                        break;
                    }
                    taps.push(vec![(None, 1.0)]);
                    continue;
                }
                // Far-out coordinates read zeros (or the clamped edge) whatever their size.
                let c = c.clamp(-4.0 - d as f64, d as f64 + 4.0);
                let at = |k: f64| tap(k, d, padding, lo, hi).map(|k| k * strides[i]);
                let f = c.floor();
                let t = c - f;
                taps.push(match mode {
                    Mode::Nearest => vec![(at(c.trunc()), 1.0)],
                    Mode::Linear => vec![(at(f), 1.0 - t), (at(f + 1.0), t)],
                    Mode::Cubic => cubic_weights(t)
                        .iter()
                        .enumerate()
                        .map(|(k, &w)| (at(f - 1.0 + k as f64), w))
                        .collect(),
                });
            }
            for ch in 0..channels {
                let o = (b * channels + ch) * points + p;
                if nan {
                    y[o] = f64::NAN;
                    continue;
                }
                let base = (b * channels + ch) * plane;
                let mut acc = 0.0;
                let counts: Vec<usize> = taps.iter().map(Vec::len).collect();
                data::for_each_index(&counts, |idx| {
                    let mut w = 1.0;
                    let mut off = Some(0usize);
                    for (axis, &k) in idx.iter().enumerate() {
                        let (t, tw) = taps[axis][k];
                        w *= tw;
                        off = off.zip(t).map(|(a, b)| a + b);
                    }
                    if let Some(off) = off {
                        acc += w * xs[base + off];
                    }
                });
                y[o] = acc;
            }
        }
    }
    data::store_floats(out, &y, false);
    Ok(())
}

/// Where integer position `k` of an axis of extent `d` reads under `padding`.
fn tap(k: f64, d: usize, padding: Padding, lo: f64, hi: f64) -> Option<usize> {
    let last = d as f64 - 1.0;
    let k = match padding {
        Padding::Zeros if k < 0.0 || k > last => return None,
        Padding::Zeros => k,
        Padding::Border => k.clamp(0.0, last),
        Padding::Reflection => reflect(k, lo, hi).trunc().clamp(0.0, last),
    };
    Some(k as usize)
}

/// Reflects `c` off the ends of `[lo, hi]` until it lies within (a span of one point
/// keeps that point).
fn reflect(c: f64, lo: f64, hi: f64) -> f64 {
    let span = hi - lo;
    if span <= 0.0 {
        return lo;
    }
    let (dx, from_lo) = if c < lo {
        (lo - c, true)
    } else if c > hi {
        (c - hi, false)
    } else {
        return c;
    };
    let n = (dx / span).trunc();
    let rest = dx - n * span;
    // An even number of whole spans leaves the direction as it was.
    if (n % 2.0 == 0.0) == from_lo {
        lo + rest
    } else {
        hi - rest
    }
}

/// The cubic convolution weights (a = -0.75) of the taps at -1, 0, 1 and 2 from the floor
/// of a coordinate `t` past it.
fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}
