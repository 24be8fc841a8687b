//! Pad: constant, edge, reflect and wrap modes, negative pads cropping; and every other
//! gather with one index map per axis (nearest Resize, Expand, Tile).
//!
//! At init each axis gets a map from output index to input index (or "padding"), so
//! that the mode's arithmetic is done once; at run time the output is walked row by row
//! (the innermost axis), each row copied from its source row with the kept middle as one
//! contiguous copy and only the padded ends element by element.

use super::{vec_bytes, Sources, Src};

/// A prepared Pad.
#[derive(Clone, Debug)]
pub(crate) struct PadOp {
    pub x: Src,
    value: f32,
    /// The output's extents.
    out_shape: Vec<usize>,
    /// The input's row-major strides.
    in_strides: Vec<usize>,
    /// Per axis, per output index: the input index, or `None` for the pad value.
    maps: Vec<Vec<Option<usize>>>,
    /// The innermost axis's run of output indices `[start, end)` whose inputs are
    /// consecutive from `maps[last][start]`.
    middle: (usize, usize),
}

/// The padding mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PadMode {
    Constant,
    Edge,
    Reflect,
    Wrap,
}

impl PadMode {
    pub fn parse(s: &str) -> Option<PadMode> {
        Some(match s {
            "constant" => PadMode::Constant,
            "edge" => PadMode::Edge,
            "reflect" => PadMode::Reflect,
            "wrap" => PadMode::Wrap,
            _ => return None,
        })
    }
}

/// The input index that output index `o` of an axis reads: `begin` is the axis's begin
/// pad (negative crops), `len` the input's extent and `end` its end pad. `Err` when the
/// mode cannot fill the pads (reflect wider than the input, edge or wrap of nothing).
pub(crate) fn axis_map(
    mode: PadMode,
    len: usize,
    begin: i64,
    end: i64,
) -> Result<Vec<Option<usize>>, String> {
    let crop = begin.min(0).unsigned_abs() as i64;
    let kept = len as i64 + begin.min(0) + end.min(0);
    let before = begin.max(0);
    let out_len = len as i64 + begin + end;
    if out_len < 0 || kept < 0 {
        return Err(format!(
            "pads {begin}/{end} crop more than the extent {len}"
        ));
    }
    (0..out_len)
        .map(|o| {
            let c = o - before;
            let n = kept;
            let c = match mode {
                _ if (0..n).contains(&c) => c,
                PadMode::Constant => return Ok(None),
                PadMode::Edge if n > 0 => c.clamp(0, n - 1),
                PadMode::Reflect if c < 0 => -c,
                PadMode::Reflect => 2 * (n - 1) - c,
                PadMode::Wrap if n > 0 => c.rem_euclid(n),
                _ => -1,
            };
            if !(0..n).contains(&c) {
                return Err(format!(
                    "Pad mode {mode:?} cannot fill pads {begin}/{end} of an extent of {len}"
                ));
            }
            Ok(Some((crop + c) as usize))
        })
        .collect()
}

impl PadOp {
    /// Bytes this op allocated at init beyond the packings `Packs` tallies (for the
    /// delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        let maps = self.maps.iter().map(vec_bytes).sum::<usize>() + vec_bytes(&self.maps);
        maps + vec_bytes(&self.out_shape) + vec_bytes(&self.in_strides)
    }

    /// `maps` from [`axis_map`], one per axis of `in_shape`.
    pub fn new(x: Src, in_shape: &[usize], maps: Vec<Vec<Option<usize>>>, value: f32) -> PadOp {
        let mut in_strides = vec![1usize; in_shape.len()];
        for d in (0..in_shape.len().saturating_sub(1)).rev() {
            in_strides[d] = in_strides[d + 1] * in_shape[d + 1];
        }
        let out_shape: Vec<usize> = maps.iter().map(Vec::len).collect();
        let middle = match maps.last() {
            Some(last) => longest_run(last),
            None => (0, 0),
        };
        PadOp {
            x,
            value,
            out_shape,
            in_strides,
            maps,
            middle,
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        self.run_t(sources.get(self.x), out, self.value);
    }

    /// The gather of elements of any size, padding with `value`: `x` is the data behind
    /// `self.x`.
    pub fn run_t<T: Copy>(&self, x: &[T], out: &mut [T], value: T) {
        let rank = self.out_shape.len();
        if rank == 0 {
            out.copy_from_slice(&x[..out.len()]);
            return;
        }
        let inner = self.out_shape[rank - 1];
        if out.is_empty() || inner == 0 {
            return;
        }
        let last = &self.maps[rank - 1];
        let (m0, m1) = self.middle;
        // The row's index along the outer axes, on the stack up to rank 9 (execute
        // allocates nothing; a higher rank, which no model seen has, takes the heap).
        let mut stack = [0usize; 8];
        let mut heap = Vec::new();
        let index: &mut [usize] = match rank - 1 {
            n if n <= stack.len() => &mut stack[..n],
            n => {
                heap.resize(n, 0);
                &mut heap
            }
        };
        for row in out.chunks_exact_mut(inner) {
            // The source row, unless an outer axis is in its padding.
            let base = index.iter().enumerate().try_fold(0usize, |acc, (d, &i)| {
                self.maps[d][i].map(|s| acc + s * self.in_strides[d])
            });
            match base {
                None => row.fill(value),
                Some(base) => {
                    if m1 > m0 {
                        let s = base + last[m0].unwrap_or(0);
                        row[m0..m1].copy_from_slice(&x[s..s + (m1 - m0)]);
                    }
                    for j in (0..m0).chain(m1..inner) {
                        row[j] = last[j].map_or(value, |s| x[base + s]);
                    }
                }
            }
            for d in (0..rank - 1).rev() {
                index[d] += 1;
                if index[d] < self.out_shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
}

/// The longest run of output indices reading consecutive input indices.
fn longest_run(map: &[Option<usize>]) -> (usize, usize) {
    let mut best = (0, 0);
    let mut j = 0;
    while j < map.len() {
        let Some(first) = map[j] else {
            j += 1;
            continue;
        };
        let mut k = j + 1;
        while k < map.len() && map[k] == Some(first + (k - j)) {
            k += 1;
        }
        if k - j > best.1 - best.0 {
            best = (j, k);
        }
        j = k;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_follow_each_mode() {
        let m = |mode, b, e| axis_map(mode, 3, b, e).unwrap();
        assert_eq!(
            m(PadMode::Constant, 1, 1),
            [None, Some(0), Some(1), Some(2), None]
        );
        assert_eq!(
            m(PadMode::Edge, 2, 1),
            [Some(0), Some(0), Some(0), Some(1), Some(2), Some(2)]
        );
        assert_eq!(
            m(PadMode::Reflect, 2, 2),
            [
                Some(2),
                Some(1),
                Some(0),
                Some(1),
                Some(2),
                Some(1),
                Some(0)
            ]
        );
        assert_eq!(
            m(PadMode::Wrap, 1, 1),
            [Some(2), Some(0), Some(1), Some(2), Some(0)]
        );
        // Negative pads crop.
        assert_eq!(m(PadMode::Constant, -1, 1), [Some(1), Some(2), None]);
        assert!(axis_map(PadMode::Reflect, 3, 3, 0).is_err());
        assert_eq!(longest_run(&m(PadMode::Edge, 2, 1)), (2, 5));
    }
}
