//! The fused epilogue: operations applied to each tile of `C` as it is stored.
//!
//! An [`Epilogue`] is a short, fixed-capacity list (no allocation on the execute path) of
//! [`EpOp`]s applied in order. Adds address their operand through row and column strides,
//! so one op covers a per-row bias (conv channels: `rs = 1, cs = 0`), a per-column bias
//! (dense layers: `rs = 0, cs = 1`), a scalar (`0, 0`) and a full residual (`N, 1`).
//!
//! NaN propagates through every op: `Relu(NaN)` and `Clip(NaN)` are NaN, as in numpy.

/// The most ops one epilogue holds (Gemm needs four: scale, C, a fused add, activation).
pub const MAX_EPILOGUE_OPS: usize = 6;

/// One epilogue operation on an element `c` at `(row, col)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EpOp<'a> {
    /// `c * s`.
    Scale(f32),
    /// `c + scale * data[row * rs + col * cs]`.
    Add {
        data: &'a [f32],
        rs: usize,
        cs: usize,
        scale: f32,
    },
    /// `max(c, 0)`, NaN kept.
    Relu,
    /// `min(max(c, min), max)`, NaN kept (so `min > max` gives `max`, as ONNX says).
    Clip { min: f32, max: f32 },
}

/// An ordered list of [`EpOp`]s.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<'a> {
    ops: [EpOp<'a>; MAX_EPILOGUE_OPS],
    len: usize,
}

impl Default for Epilogue<'_> {
    fn default() -> Self {
        Epilogue::new()
    }
}

impl<'a> Epilogue<'a> {
    /// An empty epilogue: `C = A · B`.
    pub fn new() -> Epilogue<'a> {
        Epilogue {
            ops: [EpOp::Scale(1.0); MAX_EPILOGUE_OPS],
            len: 0,
        }
    }

    /// Appends an op. Panics past [`MAX_EPILOGUE_OPS`] (a fixed plan, never input-driven).
    pub fn push(&mut self, op: EpOp<'a>) {
        assert!(
            self.len < MAX_EPILOGUE_OPS,
            "epilogue holds at most {MAX_EPILOGUE_OPS} ops"
        );
        self.ops[self.len] = op;
        self.len += 1;
    }

    /// The ops, in application order.
    pub fn ops(&self) -> &[EpOp<'a>] {
        &self.ops[..self.len]
    }

    /// The same epilogue for a sub-matrix of `C` starting at row `row0`: adds with a row
    /// stride see their operand from that row on.
    pub fn at_row(&self, row0: usize) -> Epilogue<'a> {
        let mut out = *self;
        for op in &mut out.ops[..out.len] {
            if let EpOp::Add { data, rs, .. } = op {
                *data = &data[(row0 * *rs).min(data.len())..];
            }
        }
        out
    }

    /// Applies the ops to `values`, the elements `(row, col0..col0 + values.len())`.
    ///
    /// The values go through all the ops 256 at a time, so a long row (a whole
    /// depthwise output plane) is read and written once, not once per op; each op's loop
    /// over a chunk is branch-free and vectorizes.
    pub fn apply_row(&self, row: usize, col0: usize, values: &mut [f32]) {
        if self.len == 0 {
            return;
        }
        for (c, chunk) in values.chunks_mut(EP_CHUNK).enumerate() {
            let col = col0 + c * EP_CHUNK;
            for op in self.ops() {
                apply_op(op, row, col, chunk);
            }
        }
    }
}

impl Epilogue<'_> {
    /// Applies the ops to a `rows x cols` tile (row `i` at `tile[i * stride..]`) whose
    /// top-left element is `C(row0, col0)`. Each op is matched once per tile, not once per
    /// row, and full 16- and 32-wide rows (the AVX2 and AVX-512 tiles) compile to straight-line vector code:
    /// per-row calls cost more than the arithmetic on small-`K` products.
    pub fn apply_tile(
        &self,
        row0: usize,
        col0: usize,
        tile: &mut [f32],
        stride: usize,
        rows: usize,
        cols: usize,
    ) {
        for op in self.ops() {
            for i in 0..rows {
                let v = &mut tile[i * stride..i * stride + cols];
                match cols {
                    32 => {
                        let v32: &mut [f32; 32] = v.try_into().expect("32 columns");
                        apply_op(op, row0 + i, col0, v32.as_mut_slice())
                    }
                    16 => {
                        let v16: &mut [f32; 16] = v.try_into().expect("16 columns");
                        apply_op(op, row0 + i, col0, v16.as_mut_slice())
                    }
                    _ => apply_op(op, row0 + i, col0, v),
                }
            }
        }
    }
}

/// Values per pass of [`Epilogue::apply_row`]: 1 KiB, well inside L1.
const EP_CHUNK: usize = 256;

#[inline(always)]
fn apply_op(op: &EpOp<'_>, row: usize, col0: usize, values: &mut [f32]) {
    match *op {
        EpOp::Scale(s) => values.iter_mut().for_each(|v| *v *= s),
        EpOp::Add {
            data,
            rs,
            cs,
            scale,
        } => {
            let base = row * rs + col0 * cs;
            match cs {
                0 => {
                    let add = scale * data[base];
                    values.iter_mut().for_each(|v| *v += add);
                }
                1 if scale == 1.0 => {
                    let src = &data[base..base + values.len()];
                    values.iter_mut().zip(src).for_each(|(v, d)| *v += d);
                }
                1 => {
                    let src = &data[base..base + values.len()];
                    values
                        .iter_mut()
                        .zip(src)
                        .for_each(|(v, d)| *v += scale * d);
                }
                _ => values
                    .iter_mut()
                    .enumerate()
                    .for_each(|(j, v)| *v += scale * data[base + j * cs]),
            }
        }
        EpOp::Relu => values.iter_mut().for_each(|v| *v = relu(*v)),
        EpOp::Clip { min, max } => values.iter_mut().for_each(|v| *v = clip(*v, min, max)),
    }
}

/// `max(x, 0)` keeping NaN (and `-0.0`, which equals 0).
#[inline]
pub(crate) fn relu(x: f32) -> f32 {
    if x < 0.0 {
        0.0
    } else {
        x
    }
}

/// `min(max(x, lo), hi)` keeping NaN.
#[inline]
pub(crate) fn clip(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if y > hi {
        hi
    } else {
        y
    }
}
