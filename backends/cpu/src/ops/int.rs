//! Integer arithmetic and casts over tensors as the executable holds them: the shape and
//! index logic every exporter emits (`Shape -> Gather -> Mul -> Cast -> Concat`).
//!
//! Each dtype keeps its held form (see `ops/select.rs` and `crate::qgemm`): f32 in a
//! 4-byte word, bool as 0.0/1.0 in one, i32 as its bits in one, i64 as its 8 bytes in two
//! words, i8/u8 as stored bytes (an i8 biased by 128, `v ^ 0x80`). The ops here read and
//! write those forms exactly; arithmetic wraps as ONNX and numpy do, and Div truncates
//! toward zero. A zero divisor is a run-time error, as in the reference, which refuses
//! it rather than make up a value.

use baton_delegate_api::dtype::element_f64;
use baton_delegate_api::ir::DType;
use baton_delegate_api::minifloat::encode16;

use super::bits::row;
use super::layout::{broadcast_strides, Strided};
use super::{Sources, Src};
use crate::gemm::Isa;

/// The dtypes held here, as far as the integer ops read and write them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    F32,
    /// Its two bytes (Cast only).
    F16,
    Bool,
    I32,
    I64,
    I8,
    U8,
    /// Its bits in a word, as an i32 (Cast, the bitwise ops and BitShift).
    U32,
    /// Its 8 bytes in two words, as an i64 (Cast, the bitwise ops and BitShift).
    U64,
    /// Its two stored bytes, as an f16 (Cast, the bitwise ops and BitShift).
    I16,
    U16,
}

impl Held {
    /// The held form of `dtype`, `None` for those the executable does not hold.
    pub fn of(dtype: DType) -> Option<Held> {
        Some(match dtype {
            DType::F32 => Held::F32,
            DType::F16 => Held::F16,
            DType::Bool => Held::Bool,
            DType::I32 => Held::I32,
            DType::I64 => Held::I64,
            DType::I8 => Held::I8,
            DType::U8 => Held::U8,
            DType::U32 => Held::U32,
            DType::U64 => Held::U64,
            DType::I16 => Held::I16,
            DType::U16 => Held::U16,
            _ => return None,
        })
    }

    /// Element `i` of the integer tensor held in `bytes` (a bool as 0 or 1; a u64 as the
    /// i64 of its bits).
    #[inline(always)]
    pub fn int(self, bytes: &[u8], i: usize) -> i64 {
        let word =
            |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap_or([0; 4]));
        let half = |i: usize| u16::from_le_bytes([bytes[i * 2], bytes[i * 2 + 1]]);
        match self {
            Held::Bool => (f32::from_bits(word(i)) != 0.0) as i64,
            Held::I32 => word(i) as i32 as i64,
            Held::U32 => word(i) as i64,
            Held::I16 => half(i) as i16 as i64,
            Held::U16 => half(i) as i64,
            Held::I64 | Held::U64 => {
                i64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
            }
            Held::I8 => (bytes[i] ^ 0x80) as i8 as i64,
            Held::U8 => bytes[i] as i64,
            // Truncated toward zero, saturated, NaN as 0 (Rust's `as`, the reference's
            // f64-to-i128 conversion clamped to the target's range).
            Held::F32 | Held::F16 => self.float(bytes, i) as i64,
        }
    }

    /// Element `i` of a float tensor (f32 or f16) held in `bytes`, exactly, as f64.
    #[inline(always)]
    pub(crate) fn float(self, bytes: &[u8], i: usize) -> f64 {
        match self {
            Held::F16 => element_f64(DType::F16, bytes, i),
            _ => f32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap_or([0; 4])) as f64,
        }
    }

    /// Writes `v` as element `i` of a tensor of this dtype held in `out` (integers wrap
    /// into the narrower types; a bool is `v != 0`).
    #[inline(always)]
    pub fn put_int(self, out: &mut [u8], i: usize, v: i64) {
        match self {
            Held::F32 => out[i * 4..i * 4 + 4].copy_from_slice(&(v as f32).to_le_bytes()),
            // Through f64, as the reference converts integers to the narrow floats.
            Held::F16 => self.put_float(out, i, v as f64),
            Held::Bool => {
                out[i * 4..i * 4 + 4].copy_from_slice(&((v != 0) as u8 as f32).to_le_bytes())
            }
            Held::I32 | Held::U32 => {
                out[i * 4..i * 4 + 4].copy_from_slice(&(v as i32).to_le_bytes())
            }
            Held::I64 | Held::U64 => out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes()),
            Held::I16 | Held::U16 => {
                out[i * 2..i * 2 + 2].copy_from_slice(&(v as i16).to_le_bytes())
            }
            Held::I8 => out[i] = (v as i8 as u8) ^ 0x80,
            Held::U8 => out[i] = v as u8,
        }
    }
}

impl Held {
    /// Writes the float `v` as element `i` of a float tensor (f32 or f16) held in
    /// `out`, rounded once to nearest-even.
    #[inline(always)]
    fn put_float(self, out: &mut [u8], i: usize, v: f64) {
        match self {
            Held::F16 => {
                let bits = encode16(DType::F16, v).unwrap_or(0);
                out[i * 2..i * 2 + 2].copy_from_slice(&bits.to_le_bytes());
            }
            _ => out[i * 4..i * 4 + 4].copy_from_slice(&(v as f32).to_le_bytes()),
        }
    }
}

/// Cast (or CastLike) between held dtypes, element by element, as the reference casts:
/// float to integer truncates toward zero and saturates (NaN gives 0), float to bool is
/// `x != 0` (NaN is true), between floats and from integers to f32 rounds once to
/// nearest-even (to f16 through f64, as the reference), integer to integer keeps the
/// low bits.
#[derive(Clone, Debug)]
pub(crate) struct CastOp {
    pub x: Src,
    pub from: Held,
    pub to: Held,
    pub len: usize,
}

impl CastOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.bytes(self.x);
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        match (self.from, self.to) {
            (Held::F32, Held::F32) => out[..self.len * 4].copy_from_slice(&x[..self.len * 4]),
            // The widening and narrowing of f16 compute (`exec/lower/half.rs`), and Casts
            // between the two: branch-free, so that the loops vectorize.
            (Held::F16, Held::F32) => {
                let (x, out) = (&x[..self.len * 2], &mut out[..self.len * 4]);
                for (h, o) in x.chunks_exact(2).zip(out.chunks_exact_mut(4)) {
                    let v = f16_to_f32(u16::from_le_bytes([h[0], h[1]]));
                    o.copy_from_slice(&v.to_le_bytes());
                }
            }
            (Held::F32, Held::F16) => {
                let (x, out) = (&x[..self.len * 4], &mut out[..self.len * 2]);
                for (f, o) in x.chunks_exact(4).zip(out.chunks_exact_mut(2)) {
                    let v = f32::from_le_bytes([f[0], f[1], f[2], f[3]]);
                    o.copy_from_slice(&f32_to_f16(v).to_le_bytes());
                }
            }
            (from @ (Held::F32 | Held::F16), to) => {
                for i in 0..self.len {
                    let v = from.float(x, i);
                    // Saturation is per target: an f32 beyond i32's range gives
                    // i32::MAX, not the low bits of an i64.
                    match to {
                        Held::F32 | Held::F16 => to.put_float(out, i, v),
                        Held::Bool => to.put_int(out, i, (v != 0.0) as i64),
                        Held::I32 => to.put_int(out, i, v as i32 as i64),
                        Held::I8 => to.put_int(out, i, v as i8 as i64),
                        Held::U8 => to.put_int(out, i, v as u8 as i64),
                        Held::I64 => to.put_int(out, i, v as i64),
                        Held::U32 => to.put_int(out, i, v as u32 as i64),
                        Held::U64 => to.put_int(out, i, v as u64 as i64),
                        Held::I16 => to.put_int(out, i, v as i16 as i64),
                        Held::U16 => to.put_int(out, i, v as u16 as i64),
                    }
                }
            }
            // A u64 beyond i64's range is no i64: its value is converted directly.
            (Held::U64, to @ (Held::F32 | Held::F16)) => {
                for i in 0..self.len {
                    let v = from_u64(Held::U64.int(x, i) as u64);
                    match to {
                        Held::F32 => out[i * 4..i * 4 + 4].copy_from_slice(&v.0.to_le_bytes()),
                        _ => to.put_float(out, i, v.1),
                    }
                }
            }
            (from, to) => {
                for i in 0..self.len {
                    to.put_int(out, i, from.int(x, i));
                }
            }
        }
    }
}

/// A u64 as the reference converts it: to f32 rounded once, and to f64 (for f16, rounded
/// again from there, as the reference converts every integer to the narrow floats).
#[inline(always)]
fn from_u64(v: u64) -> (f32, f64) {
    (v as f32, v as f64)
}

/// The f32 value of the f16 with bits `h`, exactly: a normal number's exponent rebiased
/// (15 to 127) and its significand moved up 13 bits; a subnormal is its significand
/// times 2^-24 (exact in f32); infinities and NaN keep their significand.
#[inline(always)]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let (exp, mant) = ((h >> 10) & 0x1f, h & 0x3ff);
    let normal = ((exp + 112) << 23) | (mant << 13);
    let special = 0x7f80_0000 | (mant << 13);
    let tiny = (mant as f32 * (1.0 / 16_777_216.0)).to_bits();
    let bits = match exp {
        0 => tiny,
        0x1f => special,
        _ => normal,
    };
    f32::from_bits(bits | sign)
}

/// The bits of the f16 nearest to `v` (ties to even; from 65520 up, infinity; NaN a
/// quiet NaN of its sign), as the reference rounds.
#[inline(always)]
pub(crate) fn f32_to_f16(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = b & 0x7fff_ffff;
    // Below 2^-14 the result is a multiple of 2^-24: scaling by 2^24 is exact, and adding
    // and subtracting 2^23 rounds it to an integer (to even) in the FPU.
    let scaled = f32::from_bits(a) * 16_777_216.0;
    let tiny = ((scaled + 8_388_608.0) - 8_388_608.0) as u16;
    // Above, the 13 dropped significand bits round to even: add just under half, plus
    // the kept bit's parity; a carry moves into the exponent as it should.
    let rounded = (a + 0xfff + ((a >> 13) & 1)) >> 13;
    let normal = rounded.wrapping_sub((127 - 15) << 10) as u16;
    let magnitude = if a > 0x7f80_0000 {
        0x7e00
    } else if a >= 0x477f_f000 {
        // 65520, the midpoint between the largest f16 (65504) and 2^16.
        0x7c00
    } else if a < 0x3880_0000 {
        tiny
    } else {
        normal
    };
    sign | magnitude
}

/// Integer Add, Sub, Mul, Div or Mod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntArith {
    Add,
    Sub,
    Mul,
    Div,
    /// The remainder with the divisor's sign when `floored` (Mod's `fmod = 0`), else the
    /// dividend's. Its magnitude is below the divisor's, so it is exact in every width.
    Mod {
        floored: bool,
    },
}

/// `out = a (op) b` on integer tensors with numpy broadcasting, wrapping: Add, Sub, Mul
/// and Div of i32 or i64, Mod of every held integer dtype.
#[derive(Clone, Debug)]
pub(crate) struct IntBinaryOp {
    op: IntArith,
    a: Src,
    b: Src,
    held: Held,
    walk: Strided<2>,
}

impl IntBinaryOp {
    pub fn new(
        op: IntArith,
        held: Held,
        (a, a_shape): (Src, &[usize]),
        (b, b_shape): (Src, &[usize]),
        out_shape: &[usize],
    ) -> IntBinaryOp {
        let rank = out_shape.len();
        let (sa, sb) = (
            broadcast_strides(a_shape, rank),
            broadcast_strides(b_shape, rank),
        );
        let strides: Vec<[usize; 2]> = sa.iter().zip(&sb).map(|(&x, &y)| [x, y]).collect();
        IntBinaryOp {
            op,
            a,
            b,
            held,
            walk: Strided::new(out_shape, &strides),
        }
    }

    /// Fails on a zero divisor of Div or Mod (nothing is defined for it; the reference
    /// refuses it too).
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa) -> Result<(), String> {
        if self.typed(sources, out, isa) {
            return Ok(());
        }
        self.run_held(sources, out)
    }

    /// i32 and i64 as typed rows (an i64 as its two words, which are 4-byte aligned),
    /// compiled for the vector width of `isa`; `false` (nothing written) for the other
    /// dtypes, and where a divisor is zero (the element-wise path names the element).
    fn typed(&self, sources: &Sources<'_>, out: &mut [f32], isa: Isa) -> bool {
        let divides = matches!(self.op, IntArith::Div | IntArith::Mod { .. });
        let (a, b) = (sources.get(self.a), sources.get(self.b));
        match self.held {
            Held::I32 => {
                let (a, b): (&[i32], &[i32]) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
                if divides && b.contains(&0) {
                    return false;
                }
                let out: &mut [i32] = bytemuck::cast_slice_mut(out);
                match isa {
                    // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512F => unsafe { self.i32_avx512(a, b, out) },
                    // SAFETY: an Avx2Fma kernel is only selected after AVX2 was detected.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2Fma => unsafe { self.i32_avx2(a, b, out) },
                    _ => self.i32_rows(a, b, out),
                }
            }
            Held::I64 => {
                let (a, b): (&[[u32; 2]], &[[u32; 2]]) =
                    (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
                if divides && b.contains(&[0, 0]) {
                    return false;
                }
                let out: &mut [[u32; 2]] = bytemuck::cast_slice_mut(out);
                match isa {
                    // SAFETY: as above.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512F => unsafe { self.i64_avx512(a, b, out) },
                    // SAFETY: as above.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2Fma => unsafe { self.i64_avx2(a, b, out) },
                    _ => self.i64_rows(a, b, out),
                }
            }
            _ => return false,
        }
        true
    }

    /// The i32 loops (no zero divisor), inlined into one function per vector width.
    #[inline(always)]
    fn i32_rows(&self, a: &[i32], b: &[i32], out: &mut [i32]) {
        let w = &self.walk;
        match self.op {
            IntArith::Add => rows(w, out, a, b, i32::wrapping_add),
            IntArith::Sub => rows(w, out, a, b, i32::wrapping_sub),
            IntArith::Mul => rows(w, out, a, b, i32::wrapping_mul),
            IntArith::Div => rows(w, out, a, b, i32::wrapping_div),
            IntArith::Mod { floored } => rows(w, out, a, b, |x: i32, y: i32| {
                rem(x as i64, y as i64, floored) as i32
            }),
        }
    }

    /// The i64 loops (no zero divisor) over element word pairs.
    #[inline(always)]
    fn i64_rows(&self, a: &[[u32; 2]], b: &[[u32; 2]], out: &mut [[u32; 2]]) {
        type W = [u32; 2];
        let w = &self.walk;
        match self.op {
            IntArith::Add => rows(w, out, a, b, |x: W, y: W| {
                split(join(x).wrapping_add(join(y)))
            }),
            IntArith::Sub => rows(w, out, a, b, |x: W, y: W| {
                split(join(x).wrapping_sub(join(y)))
            }),
            IntArith::Mul => rows(w, out, a, b, |x: W, y: W| {
                split(join(x).wrapping_mul(join(y)))
            }),
            IntArith::Div => rows(w, out, a, b, |x: W, y: W| {
                split(join(x).wrapping_div(join(y)))
            }),
            IntArith::Mod { floored } => rows(w, out, a, b, |x: W, y: W| {
                split(rem(join(x), join(y), floored))
            }),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
    unsafe fn i32_avx512(&self, a: &[i32], b: &[i32], out: &mut [i32]) {
        self.i32_rows(a, b, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn i32_avx2(&self, a: &[i32], b: &[i32], out: &mut [i32]) {
        self.i32_rows(a, b, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
    unsafe fn i64_avx512(&self, a: &[[u32; 2]], b: &[[u32; 2]], out: &mut [[u32; 2]]) {
        self.i64_rows(a, b, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn i64_avx2(&self, a: &[[u32; 2]], b: &[[u32; 2]], out: &mut [[u32; 2]]) {
        self.i64_rows(a, b, out)
    }

    /// Element by element through the held forms, for every held integer dtype.
    fn run_held(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        let (a, b) = (sources.bytes(self.a), sources.bytes(self.b));
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let held = self.held;
        // A remainder is exact in i64 whatever the width (its operands are read exactly,
        // its result is smaller than them); the other ops wrap at their own width.
        let wide = held == Held::I64 || matches!(self.op, IntArith::Mod { .. });
        let mut zero = None;
        self.walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
            for j in 0..len {
                let (x, y) = (held.int(a, ia + j * sa), held.int(b, ib + j * sb));
                let v = if wide {
                    arith(self.op, x, y)
                } else {
                    arith32(self.op, x as i32, y as i32).map(i64::from)
                };
                let v = v.unwrap_or_else(|| {
                    zero.get_or_insert(o + j);
                    0
                });
                held.put_int(out, o + j, v);
            }
        });
        match zero {
            Some(k) => {
                let what = match self.op {
                    IntArith::Mod { .. } => "remainder",
                    _ => "division",
                };
                Err(format!("integer {what} by zero (output element {k})"))
            }
            None => Ok(()),
        }
    }
}

/// `out[i] = f(x[i])`, a plain zipped loop.
#[inline(always)]
fn map<T: Copy>(out: &mut [T], x: &[T], f: impl Fn(T) -> T) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

/// `out = f(a, b)` along `walk`'s rows (see [`row`]).
#[inline(always)]
fn rows<T: Copy>(walk: &Strided<2>, out: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T + Copy) {
    walk.for_each_row(|o, [ia, ib], len, [sa, sb]| {
        row(&mut out[o..o + len], (a, ia, sa), (b, ib, sb), f)
    });
}

/// The i64 of a held element's two words (little-endian, low word first).
#[inline(always)]
fn join(w: [u32; 2]) -> i64 {
    (w[0] as u64 | (w[1] as u64) << 32) as i64
}

/// The two words of an i64 as held.
#[inline(always)]
fn split(v: i64) -> [u32; 2] {
    [v as u32, (v as u64 >> 32) as u32]
}

/// The remainder of `x` by a non-zero `y` (see [`IntArith::Mod`]).
#[inline(always)]
fn rem(x: i64, y: i64, floored: bool) -> i64 {
    // `wrapping_rem` gives 0 for MIN % -1, the exact remainder.
    let r = x.wrapping_rem(y);
    if floored && r != 0 && (r < 0) != (y < 0) {
        r + y
    } else {
        r
    }
}

/// `x (op) y` wrapping; `None` for a zero divisor.
#[inline(always)]
fn arith(op: IntArith, x: i64, y: i64) -> Option<i64> {
    Some(match op {
        IntArith::Add => x.wrapping_add(y),
        IntArith::Sub => x.wrapping_sub(y),
        IntArith::Mul => x.wrapping_mul(y),
        IntArith::Div if y == 0 => return None,
        IntArith::Div => x.wrapping_div(y),
        IntArith::Mod { .. } if y == 0 => return None,
        IntArith::Mod { floored } => rem(x, y, floored),
    })
}

/// [`arith`] in i32 (Add, Sub, Mul and Div; Mod is computed by [`arith`]), wrapping at 32 bits.
#[inline(always)]
fn arith32(op: IntArith, x: i32, y: i32) -> Option<i32> {
    Some(match op {
        IntArith::Add => x.wrapping_add(y),
        IntArith::Sub => x.wrapping_sub(y),
        IntArith::Mul => x.wrapping_mul(y),
        IntArith::Div if y == 0 => return None,
        IntArith::Div | IntArith::Mod { .. } => x.wrapping_div(y),
    })
}

/// An integer map: Relu, Neg and Abs wrap as the reference does (`Neg(MIN) = Abs(MIN) =
/// MIN`); Clip takes bounds already in the dtype's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntMap {
    Relu,
    Neg,
    Abs,
    Clip {
        lo: i64,
        hi: i64,
    },
    /// -1, 0 or 1.
    Sign,
}

/// An element-wise [`IntMap`] over `len` elements of an integer dtype as held.
#[derive(Clone, Debug)]
pub(crate) struct IntUnaryOp {
    pub x: Src,
    pub f: IntMap,
    pub held: Held,
    pub len: usize,
}

impl IntUnaryOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        // i32 and i64 as typed loops (which vectorize), the others through the held forms.
        let n = self.len;
        match self.held {
            Held::I32 => {
                let x: &[i32] = &bytemuck::cast_slice(sources.get(self.x))[..n];
                let out: &mut [i32] = &mut bytemuck::cast_slice_mut(out)[..n];
                let (lo, hi) = match self.f {
                    IntMap::Clip { lo, hi } => (lo as i32, hi as i32),
                    _ => (0, 0),
                };
                match self.f {
                    IntMap::Relu => map(out, x, |v: i32| v.max(0)),
                    IntMap::Neg => map(out, x, i32::wrapping_neg),
                    IntMap::Abs => map(out, x, i32::wrapping_abs),
                    IntMap::Sign => map(out, x, i32::signum),
                    IntMap::Clip { .. } => map(out, x, |v: i32| v.max(lo).min(hi)),
                }
            }
            Held::I64 => {
                type W = [u32; 2];
                let x: &[W] = &bytemuck::cast_slice(sources.get(self.x))[..n];
                let out: &mut [W] = &mut bytemuck::cast_slice_mut(out)[..n];
                let lift = |f: fn(i64) -> i64| move |v: W| split(f(join(v)));
                match self.f {
                    IntMap::Relu => map(out, x, lift(|v| v.max(0))),
                    IntMap::Neg => map(out, x, lift(i64::wrapping_neg)),
                    IntMap::Abs => map(out, x, lift(i64::wrapping_abs)),
                    IntMap::Sign => map(out, x, lift(i64::signum)),
                    IntMap::Clip { lo, hi } => {
                        map(out, x, move |v: W| split(join(v).max(lo).min(hi)))
                    }
                }
            }
            _ => self.run_held(sources, out),
        }
    }

    fn run_held(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let x = sources.bytes(self.x);
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        // Widened to i64 and wrapped back on the store: exact for every held width.
        let f = |v: i64| match self.f {
            IntMap::Relu => v.max(0),
            IntMap::Neg => v.wrapping_neg(),
            IntMap::Abs => v.wrapping_abs(),
            IntMap::Sign => v.signum(),
            IntMap::Clip { lo, hi } => {
                let v = if v < lo { lo } else { v };
                if v > hi {
                    hi
                } else {
                    v
                }
            }
        };
        for i in 0..self.len {
            self.held.put_int(out, i, f(self.held.int(x, i)));
        }
    }
}

/// An integer reduction of an i32 or i64 tensor over any set of axes, as the reference:
/// Sum, Prod, L1 and SumSquare wrap, Mean is the exact mean truncated toward zero, Max and
/// Min start from the dtype's extremes.
#[derive(Clone, Debug)]
pub(crate) struct IntReduceOp {
    pub x: Src,
    pub held: Held,
    pub layout: super::reduce::ReduceLayout,
    pub kind: super::tensor::Reduce,
}

impl IntReduceOp {
    /// Fails on the mean of no element (undefined for integers; the reference refuses
    /// it too).
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) -> Result<(), String> {
        use super::tensor::Reduce;
        let x = sources.bytes(self.x);
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let (count, outputs) = (self.layout.count(), self.layout.outputs());
        if self.kind == Reduce::Mean && count == 0 && outputs > 0 {
            return Err("integer ReduceMean over an empty set is undefined".into());
        }
        let (lowest, highest) = match self.held {
            Held::I32 => (i32::MIN as i64, i32::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        };
        for o in 0..outputs {
            let set = self.layout.set(o).map(|i| self.held.int(x, i));
            let v = match self.kind {
                Reduce::Max => set.fold(lowest, i64::max),
                Reduce::Min => set.fold(highest, i64::min),
                Reduce::Sum => set.fold(0, i64::wrapping_add),
                Reduce::Prod => set.fold(1, i64::wrapping_mul),
                Reduce::L1 => set.fold(0i64, |a, v| a.wrapping_add(v.wrapping_abs())),
                Reduce::SumSquare => set.fold(0i64, |a, v| a.wrapping_add(v.wrapping_mul(v))),
                Reduce::Mean => {
                    let sum: i128 = set.map(i128::from).sum();
                    (sum / count as i128) as i64
                }
                // Float-only kinds (`supports` declines them for integers).
                Reduce::L2 | Reduce::LogSumExp => {
                    return Err(format!("integer {:?} reduction", self.kind))
                }
            };
            self.held.put_int(out, o, v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_and_truncating_division_per_width() {
        assert_eq!(arith32(IntArith::Add, i32::MAX, 1), Some(i32::MIN));
        assert_eq!(arith32(IntArith::Div, i32::MIN, -1), Some(i32::MIN));
        assert_eq!(arith32(IntArith::Div, -7, 2), Some(-3));
        assert_eq!(arith(IntArith::Mul, i64::MAX, 2), Some(-2));
        assert_eq!(arith(IntArith::Div, 7, -2), Some(-3));
        assert_eq!(arith(IntArith::Div, 1, 0), None);
        let (m, f) = (
            IntArith::Mod { floored: true },
            IntArith::Mod { floored: false },
        );
        assert_eq!(arith(m, -7, 3), Some(2));
        assert_eq!(arith(f, -7, 3), Some(-1));
        assert_eq!(arith(m, 7, -3), Some(-2));
        assert_eq!(arith(f, 7, -3), Some(1));
        assert_eq!(arith(m, i64::MIN, -1), Some(0));
        assert_eq!(arith(m, i64::MIN, i64::MAX), Some(i64::MAX - 1));
        assert_eq!(arith(m, 5, 0), None);
    }

    #[test]
    fn word_pairs_hold_every_i64() {
        for v in [i64::MIN, -1, 0, 1, 0x1234_5678_9abc_def0, i64::MAX] {
            assert_eq!(join(split(v)), v);
            let mut held = [0u8; 8];
            Held::I64.put_int(&mut held, 0, v);
            let words: [u32; 2] = bytemuck::pod_read_unaligned(&held);
            assert_eq!(words, split(v), "{v:#x}");
        }
    }

    #[test]
    fn integer_maps_wrap_at_the_least_value() {
        let f = |f: IntMap, held: Held, v: i64| {
            let mut x = [0u8; 8];
            held.put_int(&mut x, 0, v);
            let words: Vec<f32> = bytemuck::pod_collect_to_vec(&x[..]);
            let op = IntUnaryOp {
                x: Src::Slot(0),
                f,
                held,
                len: 1,
            };
            let mut out = [0f32; 2];
            let slots = [super::super::Slot::Const(crate::prepack::Panel::Owned(
                words,
            ))];
            // SAFETY: the arena is empty and never read.
            let sources = unsafe { Sources::new(&[], &slots, std::ptr::null(), (0, 0)) };
            op.run(&sources, &mut out);
            held.int(bytemuck::cast_slice(&out), 0)
        };
        assert_eq!(f(IntMap::Neg, Held::I32, i32::MIN as i64), i32::MIN as i64);
        assert_eq!(f(IntMap::Abs, Held::I8, -128), -128);
        assert_eq!(f(IntMap::Abs, Held::I64, i64::MIN + 1), i64::MAX);
        assert_eq!(f(IntMap::Relu, Held::I8, -3), 0);
        // Bounds crossed: the upper one wins, as in the reference's clamp.
        assert_eq!(f(IntMap::Clip { lo: 5, hi: 2 }, Held::I32, 0), 2);
    }

    #[test]
    fn f16_conversions_match_the_exact_ones() {
        use baton_delegate_api::dtype::element_f64;
        for h in 0..=u16::MAX {
            let want = element_f64(DType::F16, &h.to_le_bytes(), 0);
            let got = f16_to_f32(h) as f64;
            assert!(
                got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                "{h:#06x}: {got} vs {want}"
            );
            // Every f16 survives the round trip (NaN as a NaN).
            let back = f32_to_f16(f16_to_f32(h));
            assert!(
                back == h || want.is_nan() && back & 0x7fff > 0x7c00,
                "{h:#06x}"
            );
        }
        // Rounding: a spread of f32 bit patterns against the f64 encoder.
        for b in (0..=u32::MAX).step_by(4099) {
            let v = f32::from_bits(b);
            let want = encode16(DType::F16, v as f64).unwrap_or(0);
            let got = f32_to_f16(v);
            assert!(
                got == want || v.is_nan() && got & 0x7fff > 0x7c00,
                "{v:e} ({b:#010x}): {got:#06x} vs {want:#06x}"
            );
        }
        // Ties to even at both ends of the range.
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(2.0f32.powi(-25)), 0);
        assert_eq!(f32_to_f16(3.0 * 2.0f32.powi(-25)), 2);
    }

    #[test]
    fn held_forms_round_trip() {
        let mut buf = [0u8; 16];
        for (h, v, back) in [
            (Held::I64, -5i64, -5i64),
            (Held::I32, 1 << 33 | 7, 7),
            (Held::I8, -128, -128),
            (Held::I8, 200, -56),
            (Held::U8, -1, 255),
            (Held::Bool, -3, 1),
            (Held::F32, 16_777_217, 16_777_216),
        ] {
            h.put_int(&mut buf, 1, v);
            assert_eq!(h.int(&buf, 1), back, "{h:?} {v}");
        }
        // An i8 is held biased: -128 is the byte 0.
        Held::I8.put_int(&mut buf, 0, -128);
        assert_eq!(buf[0], 0);
    }
}
