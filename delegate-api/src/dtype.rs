//! Element types, their storage, and element-wise conversion to and from `f64`.
//!
//! # Storage
//!
//! Every dtype stores each element in a whole number of bytes, little-endian, so that
//! every kernel and the memory planner index elements by `index * size()`. Two families
//! are worth a note:
//!
//! - **Sub-byte integers** (`i4`, `u4`, `i2`, `u2`) take **one byte per element**, the
//!   value sign-extended (`i4`, `i2`) or zero-extended (`u4`, `u2`) to the full byte, so a
//!   byte of an `i4` tensor reads as an ordinary `i8` in `-8..=7`. ONNX packs them two (or
//!   four) to a byte, low bits first; the ONNX importer unpacks. A byte outside the
//!   type's range is invalid, as a bool byte other than 0 or 1 is.
//! - **Float8 and float4** formats take one byte per element holding the format's bit
//!   pattern (`f4e2m1` in the low four bits, the high four zero). `bf16` is two bytes,
//!   the upper half of an f32's bit pattern.
//!
//! The conversions of the narrow float formats live in [`crate::minifloat`].

use std::fmt;

use crate::minifloat;

/// Element types. The numeric codes are part of the wire format and the C ABI: new codes
/// are appended, never renumbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum DType {
    /// IEEE 754 binary32, 4 bytes.
    F32 = 1,
    /// IEEE 754 binary16, 2 bytes, stored as its raw bit pattern (Rust has no native
    /// `f16`; view it as `u16` and convert).
    F16 = 2,
    /// Signed 8-bit integer; the usual stored type of symmetric quantized tensors.
    I8 = 3,
    /// Unsigned 8-bit integer; the usual stored type of asymmetric quantized tensors.
    U8 = 4,
    /// Signed 32-bit integer.
    I32 = 5,
    /// Signed 64-bit integer; the type of shape operands (Reshape's target shape).
    I64 = 6,
    /// One byte per element holding 0 or 1; any other byte value is invalid.
    Bool = 7,
    /// IEEE 754 binary64, 8 bytes.
    F64 = 8,
    /// bfloat16: the upper 16 bits of an f32 (8-bit exponent, 7-bit significand), 2 bytes.
    BF16 = 9,
    /// Signed 16-bit integer.
    I16 = 10,
    /// Unsigned 16-bit integer.
    U16 = 11,
    /// Unsigned 32-bit integer.
    U32 = 12,
    /// Unsigned 64-bit integer.
    U64 = 13,
    /// float8 E4M3FN (bias 7, no infinities, NaN `S.1111.111`, largest 448), 1 byte.
    F8E4M3FN = 14,
    /// float8 E4M3FNUZ (bias 8, no infinities, no -0, NaN `0x80`, largest 240), 1 byte.
    F8E4M3FNUZ = 15,
    /// float8 E5M2 (bias 15, IEEE-like infinities and NaNs, largest 57344), 1 byte.
    F8E5M2 = 16,
    /// float8 E5M2FNUZ (bias 16, no infinities, no -0, NaN `0x80`, largest 57344), 1 byte.
    F8E5M2FNUZ = 17,
    /// float8 E8M0: an unsigned power of two `2^(bits - 127)`, NaN `0xFF`, no zero; the
    /// scale type of microscaling formats. 1 byte.
    F8E8M0 = 18,
    /// float4 E2M1 (bias 1, no infinities or NaN, largest 6), in the low 4 bits of a byte.
    F4E2M1 = 19,
    /// Signed 4-bit integer, one per byte, sign-extended (`-8..=7`).
    I4 = 20,
    /// Unsigned 4-bit integer, one per byte (`0..=15`).
    U4 = 21,
    /// Signed 2-bit integer, one per byte, sign-extended (`-2..=1`).
    I2 = 22,
    /// Unsigned 2-bit integer, one per byte (`0..=3`).
    U2 = 23,
}

impl DType {
    /// All dtypes, in code order.
    pub const ALL: [DType; 23] = [
        DType::F32,
        DType::F16,
        DType::I8,
        DType::U8,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::F64,
        DType::BF16,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
        DType::F4E2M1,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// Bytes per element (sub-byte types take a whole byte each; see the module docs).
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8
            | DType::U8
            | DType::Bool
            | DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => 1,
        }
    }

    /// The wire/ABI code.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// Inverse of [`DType::code`].
    pub fn from_code(code: u32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.code() == code)
    }

    /// Lower-case name as used in configs and reports (`f32`, `i64`, `f8e4m3fn`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::F64 => "f64",
            DType::BF16 => "bf16",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F8E8M0 => "f8e8m0",
            DType::F4E2M1 => "f4e2m1",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I2 => "i2",
            DType::U2 => "u2",
        }
    }

    /// Inverse of [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The dtype of an ONNX `TensorProto.DataType` code; `None` for the ONNX types the IR
    /// lacks (STRING, the complex types) and unknown codes.
    pub fn from_onnx(code: i64) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.onnx_code() == code)
    }

    /// The ONNX `TensorProto.DataType` code of this dtype (`1` FLOAT, `11` DOUBLE, ...).
    pub fn onnx_code(self) -> i64 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3FN => 17,
            DType::F8E4M3FNUZ => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FNUZ => 20,
            DType::U4 => 21,
            DType::I4 => 22,
            DType::F4E2M1 => 23,
            DType::F8E8M0 => 24,
            DType::U2 => 25,
            DType::I2 => 26,
        }
    }

    /// Whether the type is a floating-point type (the float8, float4 and E8M0 formats
    /// included).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::F16
                | DType::F64
                | DType::BF16
                | DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// Whether the type is an integer type (bool is not).
    pub fn is_int(self) -> bool {
        self.int_range().is_some()
    }

    /// The smallest and largest value of an integer type; `None` for floats and bool.
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            DType::I8 => (i8::MIN.into(), i8::MAX.into()),
            DType::U8 => (0, u8::MAX.into()),
            DType::I16 => (i16::MIN.into(), i16::MAX.into()),
            DType::U16 => (0, u16::MAX.into()),
            DType::I32 => (i32::MIN.into(), i32::MAX.into()),
            DType::U32 => (0, u32::MAX.into()),
            DType::I64 => (i64::MIN.into(), i64::MAX.into()),
            DType::U64 => (0, u64::MAX.into()),
            DType::I4 => (-8, 7),
            DType::U4 => (0, 15),
            DType::I2 => (-2, 1),
            DType::U2 => (0, 3),
            _ => return None,
        })
    }

    /// The bit width of the values (not of the storage): 4 for `i4`, 8 for `u8`, 1 for
    /// bool.
    pub fn bits(self) -> u32 {
        match self {
            DType::Bool => 1,
            DType::I2 | DType::U2 => 2,
            DType::I4 | DType::U4 | DType::F4E2M1 => 4,
            d => 8 * d.size() as u32,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The value of element `index` of `bytes` (dense little-endian elements of `dtype`) as
/// an `f64`: exact for every float type and for integers up to 2^53 in magnitude (larger
/// 64-bit integers round to nearest); bool as 0 or 1.
pub fn element_f64(dtype: DType, bytes: &[u8], index: usize) -> f64 {
    if let Some(v) = element_int(dtype, bytes, index) {
        return v as f64;
    }
    let at = index * dtype.size();
    let b = &bytes[at..at + dtype.size()];
    match dtype {
        DType::F32 => f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64,
        DType::F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")),
        DType::F16 => half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        DType::BF16 => half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        d => minifloat::decode(d, b[0]).expect("a one-byte float dtype"),
    }
}

/// The value of element `index` as an integer, exactly, for integer dtypes and bool (a
/// non-zero bool byte is 1); `None` for float dtypes.
pub fn element_int(dtype: DType, bytes: &[u8], index: usize) -> Option<i128> {
    let at = index * dtype.size();
    let b = &bytes[at..at + dtype.size()];
    let arr = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    Some(match dtype {
        DType::Bool => (b[0] != 0) as i128,
        // Sub-byte signed values are stored sign-extended, so the byte is the value.
        DType::I8 | DType::I4 | DType::I2 => b[0] as i8 as i128,
        DType::U8 | DType::U4 | DType::U2 => b[0] as i128,
        DType::I16 => i16::from_le_bytes([b[0], b[1]]) as i128,
        DType::U16 => u16::from_le_bytes([b[0], b[1]]) as i128,
        DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i128,
        DType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i128,
        DType::I64 => i64::from_le_bytes(arr(8)) as i128,
        DType::U64 => u64::from_le_bytes(arr(8)) as i128,
        _ => return None,
    })
}

/// Appends integer `v` as one element of integer (or bool) `dtype`, keeping its low bits
/// (two's complement wrap, as ONNX's integer casts; sub-byte values are then sign- or
/// zero-extended to the byte; bool is `v != 0`). Panics on a float dtype.
pub fn push_int(dtype: DType, v: i128, out: &mut Vec<u8>) {
    let n = dtype.size();
    match dtype {
        DType::Bool => out.push((v != 0) as u8),
        DType::I4 => out.push((((v as u8) << 4) as i8 >> 4) as u8),
        DType::U4 => out.push(v as u8 & 0x0f),
        DType::I2 => out.push((((v as u8) << 6) as i8 >> 6) as u8),
        DType::U2 => out.push(v as u8 & 0x03),
        d if d.is_int() => out.extend_from_slice(&v.to_le_bytes()[..n]),
        d => panic!("push_int on float dtype {d}"),
    }
}

/// Appends `v` as one element of float `dtype`, rounded once to nearest-even. Out of
/// range, f64/f32/f16/bf16 give ±inf (IEEE); the float8 formats follow ONNX Cast's
/// `saturate`: with it, the largest finite value of the sign, without it ±inf where the
/// format has infinities and NaN where it has not. float4 (no NaN) always saturates and
/// E8M0 rounds up (see [`minifloat`]). Panics on a non-float dtype.
pub fn push_float(dtype: DType, v: f64, saturate: bool, out: &mut Vec<u8>) {
    match dtype {
        DType::F64 => out.extend_from_slice(&v.to_le_bytes()),
        // `as` from f64 to f32 rounds to nearest-even, overflow to ±inf.
        DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        DType::F16 | DType::BF16 => {
            let bits = minifloat::encode16(dtype, v).expect("a 16-bit float");
            out.extend_from_slice(&bits.to_le_bytes())
        }
        DType::F8E8M0 => out.push(minifloat::encode_e8m0(
            v,
            saturate,
            minifloat::E8M0Rounding::Up,
        )),
        d => out.push(minifloat::encode(d, v, saturate).expect("a one-byte float dtype")),
    }
}
