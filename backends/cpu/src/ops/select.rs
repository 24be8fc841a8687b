//! Where, and bool tensors at the subgraph's edges.
//!
//! Bools live in the executable's f32 buffers as 0.0 and 1.0, like every other tensor
//! (the comparisons of `elementwise.rs` write them), so the data-movement ops and views
//! carry them unchanged. A bool subgraph input is widened once on entry, a bool output
//! narrowed on exit (`exec/mod.rs`); a byte counts as true when non-zero, as in the
//! reference.

use super::int::Held;
use super::layout::{broadcast_strides, Strided};
use super::{Sources, Src};
use crate::gemm::Isa;

/// `out = cond ? x : y`, all three broadcast to the output's shape. The chosen value is
/// copied as it is (bit for bit, NaN payloads included).
#[derive(Clone, Debug)]
pub(crate) struct WhereOp {
    cond: Src,
    x: Src,
    y: Src,
    walk: Strided<3>,
}

impl WhereOp {
    pub fn new(operands: [(Src, &[usize]); 3], out_shape: &[usize]) -> WhereOp {
        let rank = out_shape.len();
        let s: Vec<Vec<usize>> = operands
            .iter()
            .map(|(_, shape)| broadcast_strides(shape, rank))
            .collect();
        let strides: Vec<[usize; 3]> = (0..rank).map(|d| [s[0][d], s[1][d], s[2][d]]).collect();
        WhereOp {
            cond: operands[0].0,
            x: operands[1].0,
            y: operands[2].0,
            walk: Strided::new(out_shape, &strides),
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa) {
        let c = sources.get(self.cond);
        let (x, y) = (sources.get(self.x), sources.get(self.y));
        match isa {
            // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512F => unsafe { self.run_avx512(c, x, y, out) },
            // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { self.run_avx2(c, x, y, out) },
            _ => self.run_any(c, x, y, out),
        }
    }

    /// The selection of elements of any size (8-bit and f16 data held as bytes), `get`
    /// giving the data behind a source; the condition is held as 0.0/1.0.
    pub fn run_t<'a, T: Copy + 'a>(
        &self,
        sources: &Sources<'a>,
        get: impl Fn(Src) -> &'a [T],
        out: &mut [T],
    ) {
        let c = sources.get(self.cond);
        let (x, y) = (get(self.x), get(self.y));
        self.walk
            .for_each_row(|o, [ic, ix, iy], len, [sc, sx, sy]| {
                for (j, d) in out[o..o + len].iter_mut().enumerate() {
                    *d = if c[ic + j * sc] != 0.0 {
                        x[ix + j * sx]
                    } else {
                        y[iy + j * sy]
                    };
                }
            });
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn run_avx512(&self, c: &[f32], x: &[f32], y: &[f32], out: &mut [f32]) {
        self.run_any(c, x, y, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self, c: &[f32], x: &[f32], y: &[f32], out: &mut [f32]) {
        self.run_any(c, x, y, out)
    }

    /// The loops, inlined into one function per vector width. The selection works on the
    /// bits, so that it is a blend the compiler vectorizes and copies NaNs exactly.
    #[inline(always)]
    fn run_any(&self, c: &[f32], x: &[f32], y: &[f32], out: &mut [f32]) {
        let pick = |c: f32, x: f32, y: f32| {
            let m = ((c != 0.0) as u32).wrapping_neg();
            f32::from_bits((x.to_bits() & m) | (y.to_bits() & !m))
        };
        self.walk
            .for_each_row(|o, [ic, ix, iy], len, [sc, sx, sy]| {
                let dst = &mut out[o..o + len];
                match (sc, sx, sy) {
                    (1, 1, 1) => dst
                        .iter_mut()
                        .zip(&c[ic..ic + len])
                        .zip(x[ix..ix + len].iter().zip(&y[iy..iy + len]))
                        .for_each(|((d, &c), (&x, &y))| *d = pick(c, x, y)),
                    (1, 1, 0) => {
                        let y = y[iy];
                        dst.iter_mut()
                            .zip(&c[ic..ic + len])
                            .zip(&x[ix..ix + len])
                            .for_each(|((d, &c), &x)| *d = pick(c, x, y));
                    }
                    (1, 0, 1) => {
                        let x = x[ix];
                        dst.iter_mut()
                            .zip(&c[ic..ic + len])
                            .zip(&y[iy..iy + len])
                            .for_each(|((d, &c), &y)| *d = pick(c, x, y));
                    }
                    _ => dst.iter_mut().enumerate().for_each(|(j, d)| {
                        *d = pick(c[ic + j * sc], x[ix + j * sx], y[iy + j * sy]);
                    }),
                }
            });
    }
}

/// A bool subgraph input widened into an f32 buffer: 1.0 for a non-zero byte, else 0.0.
#[derive(Clone, Debug)]
pub(crate) struct BoolInputOp {
    pub input: usize,
}

impl BoolInputOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let bytes = sources.input_bytes(self.input);
        out.iter_mut()
            .zip(bytes)
            .for_each(|(o, &b)| *o = (b != 0) as u8 as f32);
    }
}

/// Writes bools held as floats into bytes (non-zero is true).
pub(crate) fn narrow_bools(values: &[f32], out: &mut [u8]) {
    out.iter_mut()
        .zip(values)
        .for_each(|(o, &v)| *o = (v != 0.0) as u8);
}

/// An integer operand of a comparison, as the executable holds it (a subgraph input's
/// bytes, a constant copied into a slot, or a computed tensor): i32, i64, i8 or u8.
#[derive(Clone, Debug)]
pub(crate) struct IntSrc {
    pub src: Src,
    pub held: Held,
}

impl IntSrc {
    /// Element `i`, as i64.
    fn get(&self, sources: &Sources<'_>, i: usize) -> i64 {
        self.held.int(sources.bytes(self.src), i)
    }
}

/// Equal, Greater, Less, GreaterOrEqual or LessOrEqual of two integer tensors with broadcasting, exactly (as i64),
/// into bools held as 0.0/1.0: the comparisons of shape and sample-rate logic
/// (`sr == 16000` in silero VAD).
#[derive(Clone, Debug)]
pub(crate) struct IntCompareOp {
    pub op: super::elementwise::Binary,
    a: IntSrc,
    b: IntSrc,
    walk: Strided<2>,
}

impl IntCompareOp {
    pub fn new(
        op: super::elementwise::Binary,
        a: (IntSrc, &[usize]),
        b: (IntSrc, &[usize]),
        out_shape: &[usize],
    ) -> IntCompareOp {
        let rank = out_shape.len();
        let (sa, sb) = (broadcast_strides(a.1, rank), broadcast_strides(b.1, rank));
        let strides: Vec<[usize; 2]> = sa.iter().zip(&sb).map(|(&x, &y)| [x, y]).collect();
        IntCompareOp {
            op,
            a: a.0,
            b: b.0,
            walk: Strided::new(out_shape, &strides),
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        use super::elementwise::Binary;
        let (a, b) = (|i| self.a.get(sources, i), |i| self.b.get(sources, i));
        let f = |x: i64, y: i64| match self.op {
            Binary::Greater => x > y,
            Binary::Less => x < y,
            Binary::GreaterOrEqual => x >= y,
            Binary::LessOrEqual => x <= y,
            _ => x == y,
        };
        self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
            for (j, d) in out[o..o + len].iter_mut().enumerate() {
                *d = f(a(ia + j * sa), b(ib + j * sb)) as u8 as f32;
            }
        });
    }
}
