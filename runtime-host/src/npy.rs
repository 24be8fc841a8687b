//! `.npy` files in and out (through `npyz`), mapped to Baton dtypes.
//!
//! Every numpy dtype Baton has is read in either byte order (`<f2`, `>i4`, `|b1`, ...) and
//! written little-endian, as numpy writes on every machine Baton runs on. numpy has no
//! bf16, float8, float4 or E8M0 type: tensors of those are written as `<f4` (which holds
//! every one of their values exactly) and so read back as f32. The 4- and 2-bit integers
//! are written as `|i1`/`|u1`, one value per byte.
//!
//! A file is read as the dtype it declares; [`crate::inputs`] fits it to the dtype of the
//! model input it feeds.

use std::path::Path;

use baton_delegate_api::{DType, Tensor};
use half::f16;
use npyz::{TypeChar, TypeStr};

use crate::error::{HostError, NpyProblem, Result};

/// Reads a C-order `.npy` file into a tensor of the dtype the file declares.
pub fn read(path: &Path) -> Result<Tensor> {
    let err = |problem: NpyProblem| HostError::Npy {
        path: path.to_path_buf(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|error| HostError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| err(NpyProblem::NotNpy(e)))?;
    if npy.order() != npyz::Order::C {
        return Err(err(NpyProblem::FortranOrder));
    }
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect();
    // Every element takes at least a byte of the file: a header claiming more elements
    // than that (a dimension of 2^40 in a small file) is refused before anything is
    // allocated for it.
    match baton_delegate_api::shape::checked_product(&shape) {
        Some(n) if n <= bytes.len() => {}
        _ => {
            return Err(err(NpyProblem::ShapeTooLarge {
                shape: shape.clone(),
                file_bytes: bytes.len(),
            }))
        }
    }
    let ts = match npy.dtype() {
        npyz::DType::Plain(ts) => ts,
        other => return Err(err(NpyProblem::UnsupportedDtype(other.descr()))),
    };
    let Some(dtype) = baton_dtype(&ts) else {
        return Err(err(NpyProblem::UnsupportedDtype(ts.to_string())));
    };
    // npyz reads either byte order into native values, and refuses a bool byte other
    // than 0 or 1 (which the IR's Bool forbids too).
    let read_err = |e: std::io::Error| err(NpyProblem::Data(e));
    let tensor = match dtype {
        DType::F16 => {
            let v: Vec<u16> = npy
                .into_vec::<f16>()
                .map_err(read_err)?
                .into_iter()
                .map(f16::to_bits)
                .collect();
            typed(dtype, &shape, &v)
        }
        DType::F32 => typed(dtype, &shape, &npy.into_vec::<f32>().map_err(read_err)?),
        DType::F64 => typed(dtype, &shape, &npy.into_vec::<f64>().map_err(read_err)?),
        DType::I8 => typed(dtype, &shape, &npy.into_vec::<i8>().map_err(read_err)?),
        DType::I16 => typed(dtype, &shape, &npy.into_vec::<i16>().map_err(read_err)?),
        DType::I32 => typed(dtype, &shape, &npy.into_vec::<i32>().map_err(read_err)?),
        DType::I64 => typed(dtype, &shape, &npy.into_vec::<i64>().map_err(read_err)?),
        DType::U8 => typed(dtype, &shape, &npy.into_vec::<u8>().map_err(read_err)?),
        DType::U16 => typed(dtype, &shape, &npy.into_vec::<u16>().map_err(read_err)?),
        DType::U32 => typed(dtype, &shape, &npy.into_vec::<u32>().map_err(read_err)?),
        DType::U64 => typed(dtype, &shape, &npy.into_vec::<u64>().map_err(read_err)?),
        DType::Bool => {
            let v: Vec<u8> = npy
                .into_vec::<bool>()
                .map_err(read_err)?
                .into_iter()
                .map(u8::from)
                .collect();
            typed(dtype, &shape, &v)
        }
        other => unreachable!("baton_dtype gives no {other}"),
    };
    Ok(tensor)
}

/// The Baton dtype of a numpy type string, in either byte order (`None`: complex,
/// datetime, strings, objects, 128-bit floats, ...).
pub fn baton_dtype(ts: &TypeStr) -> Option<DType> {
    Some(match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 8) => DType::F64,
        (TypeChar::Int, 1) => DType::I8,
        (TypeChar::Int, 2) => DType::I16,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Uint, 2) => DType::U16,
        (TypeChar::Uint, 4) => DType::U32,
        (TypeChar::Uint, 8) => DType::U64,
        (TypeChar::Bool, 1) => DType::Bool,
        _ => return None,
    })
}

fn typed<T: bytemuck::Pod>(dtype: DType, shape: &[usize], v: &[T]) -> Tensor {
    Tensor::from_bytes(dtype, shape, bytemuck::cast_slice(v))
}

/// The type string a tensor of `dtype` is written with (see the module docs for the
/// dtypes numpy lacks).
pub fn type_str(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I8 | DType::I4 | DType::I2 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 | DType::U4 | DType::U2 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1 => "<f4",
    }
}

/// Writes a tensor as a `.npy` file, in its own dtype where numpy has it (see
/// [`type_str`]).
pub fn write(path: &Path, t: &Tensor) -> Result<()> {
    let io = |error: std::io::Error| HostError::Io {
        path: path.to_path_buf(),
        error,
    };
    use npyz::WriterBuilder;
    let file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    let ts: TypeStr = type_str(t.dtype).parse().expect("valid type string");
    macro_rules! emit {
        ($ty:ty, $vals:expr) => {{
            let mut w = npyz::WriteOptions::<$ty>::new()
                .dtype(npyz::DType::Plain(ts))
                .shape(&shape)
                .writer(file)
                .begin_nd()
                .map_err(io)?;
            w.extend($vals).map_err(io)?;
            w.finish().map_err(io)
        }};
    }
    match t.dtype {
        DType::F32 => emit!(f32, t.values::<f32>().iter().copied()),
        DType::F16 => emit!(f16, t.values::<u16>().iter().map(|&b| f16::from_bits(b))),
        DType::F64 => emit!(f64, t.values::<f64>().iter().copied()),
        DType::I64 => emit!(i64, t.values::<i64>().iter().copied()),
        DType::I32 => emit!(i32, t.values::<i32>().iter().copied()),
        DType::I16 => emit!(i16, t.values::<i16>().iter().copied()),
        DType::U16 => emit!(u16, t.values::<u16>().iter().copied()),
        DType::U32 => emit!(u32, t.values::<u32>().iter().copied()),
        DType::U64 => emit!(u64, t.values::<u64>().iter().copied()),
        DType::Bool => emit!(bool, t.bytes().iter().map(|&b| b != 0)),
        // One byte per element already holds the value (sign-extended for i4, i2).
        DType::I8 | DType::I4 | DType::I2 => emit!(i8, t.values::<i8>().iter().copied()),
        DType::U8 | DType::U4 | DType::U2 => emit!(u8, t.values::<u8>().iter().copied()),
        // f32 holds each value of these exactly.
        DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1 => emit!(f32, t.to_f64().into_iter().map(|v| v as f32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_dtype_shape_and_values() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let t = Tensor::from_f32(&[2, 3], &[1.0, -2.0, 3.5, 0.0, f32::INFINITY, -0.0]);
        write(&p, &t).unwrap();
        let back = read(&p).unwrap();
        assert_eq!(back.shape, vec![2, 3]);
        assert_eq!(back.bytes(), t.bytes());
        let i = Tensor::from_i64(&[4], &[1, -2, 3, i64::MAX]);
        write(&p, &i).unwrap();
        assert_eq!(read(&p).unwrap().bytes(), i.bytes());
    }

    #[test]
    fn garbage_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.npy");
        std::fs::write(&p, b"not numpy").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("bad.npy"), "{e}");
    }

    #[test]
    fn a_header_claiming_more_elements_than_the_file_holds_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("huge.npy");
        // A valid header for a [2^40] f32 array, followed by 16 bytes of data.
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
        let mut h = header.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
        bytes.extend_from_slice(h.as_bytes());
        bytes.extend_from_slice(&[0u8; 16]);
        std::fs::write(&p, &bytes).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("huge.npy") && e.contains("1099511627776"), "{e}");
    }
}
