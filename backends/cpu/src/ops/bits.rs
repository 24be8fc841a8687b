//! The bitwise ops of BTIR 1.4 (BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot and
//! BitShift) over integer tensors, and BitCast, as the executable holds them (see `crate::ops::int`).
//!
//! And, Or, Xor and Not act on each bit alone, so they run on the held units directly:
//! 4-byte words for i32 and u32, the two words of an i64 or u64 as two words (a last
//! held axis of 2 broadcasts like any other), the stored 2-byte halves of i16 and u16,
//! and the stored bytes of i8 and u8 (an i8 is
//! held biased, `v ^ 0x80`, so its operands are unbiased and the result rebiased; Not
//! needs neither). The inner loops read both operands at unit stride or one of them
//! broadcast, which the compiler vectorizes; the rows come from the same strided walk as
//! the f32 element-wise ops. BitShift shifts unsigned values, logically; a shift by the
//! width or more gives 0, as in the reference.

use super::layout::{broadcast_strides, Strided};
use super::{Sources, Src};

/// And, Or or Xor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitLogic {
    And,
    Or,
    Xor,
}

impl BitLogic {
    #[inline(always)]
    fn apply<T>(self, x: T, y: T) -> T
    where
        T: std::ops::BitAnd<Output = T>
            + std::ops::BitOr<Output = T>
            + std::ops::BitXor<Output = T>,
    {
        match self {
            BitLogic::And => x & y,
            BitLogic::Or => x | y,
            BitLogic::Xor => x ^ y,
        }
    }
}

/// The unit a bitwise op reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitUnit {
    /// A 4-byte word (i32, u32, or half of an i64 or u64).
    Word,
    /// A stored 2-byte element (i16, u16).
    Half,
    /// A stored byte, biased by `flip` (0x80 for an i8, 0 for a u8).
    Byte { flip: u8 },
}

/// `out = a (op) b` with numpy broadcasting, over held units; the shapes given are the
/// held ones (an i64 or u64 tensor with its last axis of 2 words).
#[derive(Clone, Debug)]
pub(crate) struct BitBinaryOp {
    op: BitLogic,
    unit: BitUnit,
    a: Src,
    b: Src,
    walk: Strided<2>,
}

impl BitBinaryOp {
    pub fn new(
        op: BitLogic,
        unit: BitUnit,
        (a, a_shape): (Src, &[usize]),
        (b, b_shape): (Src, &[usize]),
        out_shape: &[usize],
    ) -> BitBinaryOp {
        let rank = out_shape.len();
        let (sa, sb) = (
            broadcast_strides(a_shape, rank),
            broadcast_strides(b_shape, rank),
        );
        let strides: Vec<[usize; 2]> = sa.iter().zip(&sb).map(|(&x, &y)| [x, y]).collect();
        BitBinaryOp {
            op,
            unit,
            a,
            b,
            walk: Strided::new(out_shape, &strides),
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let op = self.op;
        match self.unit {
            BitUnit::Word => {
                let a: &[u32] = bytemuck::cast_slice(sources.get(self.a));
                let b: &[u32] = bytemuck::cast_slice(sources.get(self.b));
                let out: &mut [u32] = bytemuck::cast_slice_mut(out);
                self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
                    row(&mut out[o..o + len], (a, ia, sa), (b, ib, sb), |x, y| {
                        op.apply(x, y)
                    });
                });
            }
            BitUnit::Half => {
                let a: &[u16] = bytemuck::cast_slice(sources.bytes(self.a));
                let b: &[u16] = bytemuck::cast_slice(sources.bytes(self.b));
                let out: &mut [u16] = bytemuck::cast_slice_mut(out);
                self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
                    row(&mut out[o..o + len], (a, ia, sa), (b, ib, sb), |x, y| {
                        op.apply(x, y)
                    });
                });
            }
            BitUnit::Byte { flip } => {
                let (a, b) = (sources.bytes(self.a), sources.bytes(self.b));
                let out: &mut [u8] = bytemuck::cast_slice_mut(out);
                self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
                    row(&mut out[o..o + len], (a, ia, sa), (b, ib, sb), |x, y| {
                        op.apply(x ^ flip, y ^ flip) ^ flip
                    });
                });
            }
        }
    }
}

/// BitwiseNot of `len` held units (complementing a biased byte complements the value).
#[derive(Clone, Debug)]
pub(crate) struct BitNotOp {
    pub x: Src,
    pub unit: BitUnit,
    /// Held units: words, or bytes.
    pub len: usize,
}

impl BitNotOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        match self.unit {
            BitUnit::Word => {
                let x: &[u32] = bytemuck::cast_slice(sources.get(self.x));
                let out: &mut [u32] = bytemuck::cast_slice_mut(out);
                for (o, &v) in out[..self.len].iter_mut().zip(&x[..self.len]) {
                    *o = !v;
                }
            }
            BitUnit::Half => {
                let x: &[u16] = bytemuck::cast_slice(sources.bytes(self.x));
                let out: &mut [u16] = bytemuck::cast_slice_mut(out);
                for (o, &v) in out[..self.len].iter_mut().zip(&x[..self.len]) {
                    *o = !v;
                }
            }
            BitUnit::Byte { .. } => {
                let x = sources.bytes(self.x);
                let out: &mut [u8] = bytemuck::cast_slice_mut(out);
                for (o, &v) in out[..self.len].iter_mut().zip(&x[..self.len]) {
                    *o = !v;
                }
            }
        }
    }
}

/// The width of a BitShift's unsigned elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShiftWidth {
    U8,
    U16,
    U32,
    U64,
}

/// `out = a << b` (or `>>`, logical) with numpy broadcasting, over element indices.
#[derive(Clone, Debug)]
pub(crate) struct BitShiftOp {
    left: bool,
    width: ShiftWidth,
    a: Src,
    b: Src,
    walk: Strided<2>,
}

impl BitShiftOp {
    pub fn new(
        left: bool,
        width: ShiftWidth,
        (a, a_shape): (Src, &[usize]),
        (b, b_shape): (Src, &[usize]),
        out_shape: &[usize],
    ) -> BitShiftOp {
        let rank = out_shape.len();
        let (sa, sb) = (
            broadcast_strides(a_shape, rank),
            broadcast_strides(b_shape, rank),
        );
        let strides: Vec<[usize; 2]> = sa.iter().zip(&sb).map(|(&x, &y)| [x, y]).collect();
        BitShiftOp {
            left,
            width,
            a,
            b,
            walk: Strided::new(out_shape, &strides),
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let left = self.left;
        match self.width {
            ShiftWidth::U8 => {
                let (a, b) = (sources.bytes(self.a), sources.bytes(self.b));
                let out: &mut [u8] = bytemuck::cast_slice_mut(out);
                self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
                    row(&mut out[o..o + len], (a, ia, sa), (b, ib, sb), |x, y| {
                        shift(left, x as u64, y as u64, 8) as u8
                    });
                });
            }
            ShiftWidth::U16 => {
                let a: &[u16] = bytemuck::cast_slice(sources.bytes(self.a));
                let b: &[u16] = bytemuck::cast_slice(sources.bytes(self.b));
                let out: &mut [u16] = bytemuck::cast_slice_mut(out);
                self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
                    row(&mut out[o..o + len], (a, ia, sa), (b, ib, sb), |x, y| {
                        shift(left, x as u64, y as u64, 16) as u16
                    });
                });
            }
            ShiftWidth::U32 => {
                let a: &[u32] = bytemuck::cast_slice(sources.get(self.a));
                let b: &[u32] = bytemuck::cast_slice(sources.get(self.b));
                let out: &mut [u32] = bytemuck::cast_slice_mut(out);
                self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
                    row(&mut out[o..o + len], (a, ia, sa), (b, ib, sb), |x, y| {
                        shift(left, x as u64, y as u64, 32) as u32
                    });
                });
            }
            ShiftWidth::U64 => {
                // Held as two words each, 4-byte aligned: read and written by bytes.
                let (a, b) = (sources.bytes(self.a), sources.bytes(self.b));
                let out: &mut [u8] = bytemuck::cast_slice_mut(out);
                let at = |s: &[u8], i: usize| {
                    u64::from_le_bytes(s[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
                };
                self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
                    for j in 0..len {
                        let v = shift(left, at(a, ia + j * sa), at(b, ib + j * sb), 64);
                        let k = (o + j) * 8;
                        out[k..k + 8].copy_from_slice(&v.to_le_bytes());
                    }
                });
            }
        }
    }
}

/// `x << y` or `x >> y` in `width` bits (`x` below `2^width`), 0 from a shift of `width`.
#[inline(always)]
fn shift(left: bool, x: u64, y: u64, width: u64) -> u64 {
    if y >= width {
        0
    } else if left {
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1 << width) - 1
        };
        (x << y) & mask
    } else {
        x >> y
    }
}

/// One output row of an element-wise binary op, `out[j] = f(a[ia + j*sa], b[ib + j*sb])`,
/// with the unit-stride and broadcast cases written as plain zipped loops (which
/// vectorize).
#[inline(always)]
pub(crate) fn row<T: Copy>(
    out: &mut [T],
    (a, ia, sa): (&[T], usize, usize),
    (b, ib, sb): (&[T], usize, usize),
    f: impl Fn(T, T) -> T,
) {
    let len = out.len();
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in out.iter_mut().zip(&a[ia..ia + len]).zip(&b[ib..ib + len]) {
                *o = f(x, y);
            }
        }
        (1, 0) => {
            let y = b[ib];
            for (o, &x) in out.iter_mut().zip(&a[ia..ia + len]) {
                *o = f(x, y);
            }
        }
        (0, 1) => {
            let x = a[ia];
            for (o, &y) in out.iter_mut().zip(&b[ib..ib + len]) {
                *o = f(x, y);
            }
        }
        _ => {
            for (j, o) in out.iter_mut().enumerate() {
                *o = f(a[ia + j * sa], b[ib + j * sb]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_past_the_width_give_zero() {
        assert_eq!(shift(true, 0xff, 1, 8), 0xfe);
        assert_eq!(shift(true, 1, 7, 8), 0x80);
        assert_eq!(shift(true, 1, 8, 8), 0);
        assert_eq!(shift(false, 0x80, 7, 8), 1);
        assert_eq!(shift(false, u64::MAX, 63, 64), 1);
        assert_eq!(shift(true, u64::MAX, 63, 64), 1 << 63);
        assert_eq!(shift(true, 5, 64, 64), 0);
        assert_eq!(shift(true, 0xffff_ffff, 4, 32), 0xffff_fff0);
        assert_eq!(shift(false, 7, u64::MAX, 32), 0);
    }

    #[test]
    fn biased_bytes_combine_as_their_values() {
        // An i8 v is held as v ^ 0x80.
        let flip = 0x80u8;
        for (x, y) in [(-1i8, 5i8), (-128, 127), (-7, -9), (0, -1)] {
            let (hx, hy) = ((x as u8) ^ flip, (y as u8) ^ flip);
            for (op, want) in [
                (BitLogic::And, x & y),
                (BitLogic::Or, x | y),
                (BitLogic::Xor, x ^ y),
            ] {
                let held = op.apply(hx ^ flip, hy ^ flip) ^ flip;
                assert_eq!((held ^ flip) as i8, want, "{op:?} {x} {y}");
            }
            assert_eq!((!hx ^ flip) as i8, !x);
        }
    }

    #[test]
    fn rows_broadcast_either_operand() {
        let a = [1u32, 2, 3, 4];
        let b = [0xf0u32, 0x0f];
        let mut out = [0u32; 4];
        row(&mut out, (&a, 0, 1), (&b, 1, 0), |x, y| x | y);
        assert_eq!(out, [0x0f, 0x0f, 0x0f, 0x0f]);
        row(&mut out, (&b, 0, 0), (&a, 0, 1), |x, y| x ^ y);
        assert_eq!(out, [0xf1, 0xf2, 0xf3, 0xf4]);
        row(&mut out[..2], (&a, 1, 2), (&b, 0, 1), |x, y| x & y);
        assert_eq!(out[..2], [0, 4 & 0x0f]);
    }
}

/// How BitCast turns the held form of its input into that of its output. Same-width
/// dtypes share their stored bits, but not always their held form: an i8 is held biased
/// by 128 and a bool as a 0.0/1.0 word, so those pairs convert; the others are a copy of
/// the held bytes (and usually no step at all, see `exec::lower::tail::is_view_cast`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitCastKind {
    /// The held bytes unchanged: f32, i32 and u32 words; i64 and u64 pairs of words; the
    /// stored halves of f16, i16 and u16.
    Copy { size: usize },
    /// Between i8 and u8: the stored byte is the same, the held one differs by the bias.
    FlipBias,
    /// A bool's word (0.0 or 1.0) to the byte 0 or 1, biased by `flip` (an i8 target).
    FromBool { flip: u8 },
    /// A byte, unbiased by `flip` (an i8 source), to a bool's word; a byte other than 0
    /// or 1 is no bool, a run-time error as in the reference.
    ToBool { flip: u8 },
}

/// BitCast: each element's stored bits read as another dtype of the same width.
#[derive(Clone, Debug)]
pub(crate) struct BitCastOp {
    pub x: Src,
    pub kind: BitCastKind,
    /// Elements.
    pub len: usize,
}

impl BitCastOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let x = sources.bytes(self.x);
        let n = self.len;
        match self.kind {
            BitCastKind::Copy { size } => {
                let out: &mut [u8] = bytemuck::cast_slice_mut(out);
                out[..n * size].copy_from_slice(&x[..n * size]);
            }
            BitCastKind::FlipBias => {
                let out: &mut [u8] = bytemuck::cast_slice_mut(out);
                for (o, &b) in out[..n].iter_mut().zip(&x[..n]) {
                    *o = b ^ 0x80;
                }
            }
            BitCastKind::FromBool { flip } => {
                let words = sources.get(self.x);
                let out: &mut [u8] = bytemuck::cast_slice_mut(out);
                for (o, &w) in out[..n].iter_mut().zip(&words[..n]) {
                    *o = u8::from(w != 0.0) ^ flip;
                }
            }
            BitCastKind::ToBool { flip } => {
                // Checked first, so that a bad byte leaves nothing half written.
                if let Some(&b) = x[..n].iter().find(|&&b| b ^ flip > 1) {
                    return Err(format!(
                        "BitCast gives the byte {}, which is no bool (only 0 and 1 are)",
                        b ^ flip
                    ));
                }
                for (o, &b) in out[..n].iter_mut().zip(&x[..n]) {
                    *o = f32::from(b ^ flip);
                }
            }
        }
        Ok(())
    }
}
