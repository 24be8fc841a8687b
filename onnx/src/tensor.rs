//! ONNX [`TensorProto`] to Baton [`Tensor`], from every storage form the format has:
//! `raw_data`, the typed repeated fields, and external files. 4- and 2-bit types, which
//! ONNX packs two or four to a byte, are unpacked to one element per byte.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use baton_delegate_api::{DType, Tensor};

use super::proto::tensor_proto::DataLocation;
use super::proto::TensorProto;
use super::{baton_dtype, onnx_type_name, OnnxError};

/// Converts an ONNX tensor to a Baton tensor.
///
/// The elements may be in `raw_data` (dense, little-endian), in the typed field the ONNX
/// type calls for (`float_data` for FLOAT, `double_data` for DOUBLE, `int64_data` for
/// INT64, `uint64_data` for UINT32 and UINT64, `int32_data` for INT32 and, widened, for
/// the other integers of up to 16 bits, BOOL, the bit patterns of the 16- and 8-bit
/// floats and the packed bytes of the 4- and 2-bit types), or in an external file
/// (`data_location = EXTERNAL`). An external `location` is resolved against `base_dir` (the
/// directory of the model file); absolute locations and locations with `..` are refused.
/// Symbolic links inside `base_dir` are followed.
///
/// The element count must match the dims (empty dims make a rank-0 tensor with one
/// element), and element types without a Baton dtype are an
/// [`OnnxError::UnsupportedDtype`] error.
pub fn tensor_from_proto(t: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor, OnnxError> {
    let name = t.name.as_str();
    let dtype = baton_dtype(t.data_type).ok_or_else(|| OnnxError::UnsupportedDtype {
        tensor: name.to_string(),
        onnx_type: onnx_type_name(t.data_type),
        code: t.data_type,
    })?;
    let shape = shape_of(t)?;
    if let Some(seg) = &t.segment {
        return Err(malformed(
            t,
            format!(
                "holds only elements {}..{} of a tensor split into segments, which Baton does not read",
                seg.begin, seg.end
            ),
        ));
    }
    let typed = typed_fields_set(t);
    match DataLocation::try_from(t.data_location) {
        Ok(DataLocation::Default) => {}
        Ok(DataLocation::External) => {
            if let Some(field) = typed.first().copied().or(nonempty(&t.raw_data, "raw_data")) {
                return Err(malformed(
                    t,
                    format!("data_location is EXTERNAL but {field} is set too"),
                ));
            }
            return read_external(t, dtype, &shape, base_dir);
        }
        Err(_) => {
            return Err(malformed(
                t,
                format!("unknown data_location {}", t.data_location),
            ))
        }
    }
    if !t.raw_data.is_empty() {
        if let Some(field) = typed.first() {
            return Err(malformed(
                t,
                format!("holds elements both in raw_data and in {field}"),
            ));
        }
        return dense(t, dtype, &shape, &t.raw_data, "raw_data");
    }
    let expected = typed_field_for(dtype);
    if let Some(field) = typed.iter().find(|&&f| f != expected) {
        return Err(malformed(
            t,
            format!(
                "an ONNX {} tensor keeps its elements in {expected}, but {field} is set",
                onnx_type_name(t.data_type)
            ),
        ));
    }
    from_typed(t, dtype, &shape)
}

/// The dims as Baton extents, checked to be non-negative and their product addressable.
fn shape_of(t: &TensorProto) -> Result<Vec<usize>, OnnxError> {
    let bad = |reason| OnnxError::BadDims {
        tensor: t.name.clone(),
        dims: t.dims.clone(),
        reason,
    };
    let mut shape = Vec::with_capacity(t.dims.len());
    let mut count: usize = 1;
    for &d in &t.dims {
        if d < 0 {
            return Err(bad("an extent is negative"));
        }
        let d = usize::try_from(d).map_err(|_| bad("an extent does not fit in memory"))?;
        count = count
            .checked_mul(d)
            .ok_or_else(|| bad("the element count overflows"))?;
        shape.push(d);
    }
    // The byte size must be addressable too; 8 bytes is the widest element.
    count
        .checked_mul(8)
        .ok_or_else(|| bad("the byte size overflows"))?;
    Ok(shape)
}

fn element_count(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn malformed(t: &TensorProto, message: String) -> OnnxError {
    OnnxError::Malformed {
        tensor: t.name.clone(),
        message,
    }
}

fn count_error(t: &TensorProto, shape: &[usize], found: usize, storage: &'static str) -> OnnxError {
    OnnxError::ElementCount {
        tensor: t.name.clone(),
        dims: t.dims.clone(),
        expected: element_count(shape),
        found,
        storage,
    }
}

fn nonempty<T>(v: &[T], field: &'static str) -> Option<&'static str> {
    (!v.is_empty()).then_some(field)
}

/// The typed element fields that hold anything, in field-number order.
fn typed_fields_set(t: &TensorProto) -> Vec<&'static str> {
    [
        nonempty(&t.float_data, "float_data"),
        nonempty(&t.int32_data, "int32_data"),
        nonempty(&t.string_data, "string_data"),
        nonempty(&t.int64_data, "int64_data"),
        nonempty(&t.double_data, "double_data"),
        nonempty(&t.uint64_data, "uint64_data"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The typed field ONNX stores elements of a dtype in when `raw_data` is not used.
fn typed_field_for(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float_data",
        DType::F64 => "double_data",
        DType::I64 => "int64_data",
        DType::U32 | DType::U64 => "uint64_data",
        // The rest: integers of up to 32 bits, bool, and the bit patterns of the 16-, 8-
        // and 4-bit floats, one per entry; 4- and 2-bit types packed, one byte per entry.
        _ => "int32_data",
    }
}

/// How many elements of a sub-byte dtype ONNX packs into a byte (low bits first); 1 for
/// the others.
fn per_byte(dtype: DType) -> usize {
    match dtype {
        DType::I4 | DType::U4 | DType::F4E2M1 => 2,
        DType::I2 | DType::U2 => 4,
        _ => 1,
    }
}

/// A tensor from dense little-endian storage (`raw_data` or an external file), unpacking
/// sub-byte types to one element per byte (see [`baton_delegate_api::dtype`]).
fn dense(
    t: &TensorProto,
    dtype: DType,
    shape: &[usize],
    bytes: &[u8],
    storage: &'static str,
) -> Result<Tensor, OnnxError> {
    if per_byte(dtype) > 1 {
        return unpack(t, dtype, shape, bytes, storage);
    }
    check_byte_len(t, dtype, shape, bytes.len(), storage)?;
    let mut out = Tensor::zeros(dtype, shape);
    out.data.as_mut_slice().copy_from_slice(bytes);
    finish_le(t, out, storage)
}

/// Unpacks 4-bit (two per byte) or 2-bit (four per byte) elements, low bits first, into
/// one byte each, sign-extending the signed types. The last byte may be partly padding.
fn unpack(
    t: &TensorProto,
    dtype: DType,
    shape: &[usize],
    packed: &[u8],
    storage: &'static str,
) -> Result<Tensor, OnnxError> {
    let n = element_count(shape);
    let k = per_byte(dtype);
    if packed.len() != n.div_ceil(k) {
        return Err(malformed(
            t,
            format!(
                "{storage} has {} bytes; {n} {} elements packed {k} to a byte take {}",
                packed.len(),
                onnx_type_name(t.data_type),
                n.div_ceil(k)
            ),
        ));
    }
    let bits = 8 / k;
    let mask = (1u8 << bits) - 1;
    let signed = matches!(dtype, DType::I4 | DType::I2);
    let values: Vec<u8> = (0..n)
        .map(|i| {
            let v = (packed[i / k] >> ((i % k) * bits)) & mask;
            match signed {
                // Shift the sign bit to bit 7 and back, arithmetically.
                true => (((v << (8 - bits)) as i8) >> (8 - bits)) as u8,
                false => v,
            }
        })
        .collect();
    Ok(Tensor::from_bytes(dtype, shape, &values))
}

/// Checks that `len` bytes of dense storage are exactly the tensor's elements.
fn check_byte_len(
    t: &TensorProto,
    dtype: DType,
    shape: &[usize],
    len: usize,
    storage: &'static str,
) -> Result<(), OnnxError> {
    let size = dtype.size();
    if !len.is_multiple_of(size) {
        return Err(malformed(
            t,
            format!(
                "{storage} has {len} bytes, not a whole number of {size}-byte {} elements",
                onnx_type_name(t.data_type)
            ),
        ));
    }
    if len / size != element_count(shape) {
        return Err(count_error(t, shape, len / size, storage));
    }
    Ok(())
}

/// Turns little-endian element bytes into native order and checks BOOL bytes are 0 or 1.
fn finish_le(t: &TensorProto, mut out: Tensor, storage: &str) -> Result<Tensor, OnnxError> {
    let size = out.dtype.size();
    if cfg!(target_endian = "big") && size > 1 {
        for element in out.data.as_mut_slice().chunks_exact_mut(size) {
            element.reverse();
        }
    }
    if out.dtype == DType::Bool {
        if let Some((i, b)) = out.bytes().iter().enumerate().find(|(_, &b)| b > 1) {
            return Err(malformed(
                t,
                format!("{storage} byte {i} is {b}; BOOL elements must be 0 or 1"),
            ));
        }
    }
    Ok(out)
}

/// Elements from the typed field for `dtype`.
fn from_typed(t: &TensorProto, dtype: DType, shape: &[usize]) -> Result<Tensor, OnnxError> {
    let count = element_count(shape);
    let field = typed_field_for(dtype);
    if per_byte(dtype) > 1 {
        // int32_data holds the packed bytes, one per entry.
        let packed: Vec<u8> = narrow(t, |x| u8::try_from(x).ok())?;
        return unpack(t, dtype, shape, &packed, "int32_data");
    }
    let found = match dtype {
        DType::F32 => t.float_data.len(),
        DType::F64 => t.double_data.len(),
        DType::I64 => t.int64_data.len(),
        DType::U32 | DType::U64 => t.uint64_data.len(),
        _ => t.int32_data.len(),
    };
    if found != count {
        return Err(count_error(t, shape, found, field));
    }
    fn le<T: bytemuck::Pod>(dtype: DType, shape: &[usize], v: &[T]) -> Tensor {
        Tensor::from_bytes(dtype, shape, bytemuck::cast_slice(v))
    }
    let tensor = match dtype {
        DType::F32 => Tensor::from_f32(shape, &t.float_data),
        DType::F64 => le(dtype, shape, &t.double_data),
        DType::I64 => Tensor::from_i64(shape, &t.int64_data),
        DType::U64 => le(dtype, shape, &t.uint64_data),
        DType::U32 => {
            let v: Vec<u32> = t
                .uint64_data
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    u32::try_from(x).map_err(|_| {
                        malformed(
                            t,
                            format!("uint64_data[{i}] = {x} is not a valid UINT32 element"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            le(dtype, shape, &v)
        }
        DType::I32 => le(dtype, shape, &t.int32_data),
        DType::I8 => le(dtype, shape, &narrow(t, |x| i8::try_from(x).ok())?),
        DType::I16 => le(dtype, shape, &narrow(t, |x| i16::try_from(x).ok())?),
        DType::U16 | DType::F16 | DType::BF16 => {
            le(dtype, shape, &narrow(t, |x| u16::try_from(x).ok())?)
        }
        DType::Bool => le(
            dtype,
            shape,
            &narrow(t, |x| matches!(x, 0 | 1).then_some(x as u8))?,
        ),
        // u8 and the one-byte float bit patterns.
        _ => le(dtype, shape, &narrow(t, |x| u8::try_from(x).ok())?),
    };
    Ok(tensor)
}

/// Narrows every `int32_data` element, refusing values the ONNX type cannot hold.
fn narrow<T>(t: &TensorProto, f: impl Fn(i32) -> Option<T>) -> Result<Vec<T>, OnnxError> {
    t.int32_data
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            f(x).ok_or_else(|| {
                malformed(
                    t,
                    format!(
                        "int32_data[{i}] = {x} is not a valid {} element",
                        onnx_type_name(t.data_type)
                    ),
                )
            })
        })
        .collect()
}

/// Where an external tensor's bytes are, from its `external_data` entries.
#[derive(Debug)]
struct ExternalLocation<'a> {
    location: &'a str,
    offset: u64,
    length: Option<u64>,
}

fn external_location(t: &TensorProto) -> Result<ExternalLocation<'_>, String> {
    let number = |key: &str, value: &str| {
        value
            .parse::<u64>()
            .map_err(|_| format!("{key} '{value}' is not a non-negative integer"))
    };
    let mut location = None;
    let mut offset = 0;
    let mut length = None;
    for entry in &t.external_data {
        match entry.key.as_str() {
            "location" => location = Some(entry.value.as_str()),
            "offset" => offset = number("offset", &entry.value)?,
            "length" => length = Some(number("length", &entry.value)?),
            // `checksum` and any future keys are not needed to read the bytes.
            _ => {}
        }
    }
    let location = location.ok_or("no 'location' entry in external_data")?;
    Ok(ExternalLocation {
        location,
        offset,
        length,
    })
}

/// `location` as a path that stays inside the directory it is relative to.
fn contained_relative_path(location: &str) -> Result<PathBuf, String> {
    if location.is_empty() {
        return Err("the location is empty".into());
    }
    let path = Path::new(location);
    for component in path.components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "location '{location}' contains '..'; external data must stay inside the model's directory"
                ))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "location '{location}' is absolute; external data must be given relative to the model's directory"
                ))
            }
        }
    }
    Ok(path.to_path_buf())
}

fn read_external(
    t: &TensorProto,
    dtype: DType,
    shape: &[usize],
    base_dir: Option<&Path>,
) -> Result<Tensor, OnnxError> {
    let err = |message: String| OnnxError::ExternalData {
        tensor: t.name.clone(),
        message,
    };
    let loc = external_location(t).map_err(err)?;
    let relative = contained_relative_path(loc.location).map_err(err)?;
    let base = base_dir.ok_or_else(|| {
        err(format!(
            "location '{}' is relative to the model's directory, which was not given",
            loc.location
        ))
    })?;
    let path = base.join(relative);
    let shown = path.display();
    let mut file = File::open(&path).map_err(|e| err(format!("cannot open {shown}: {e}")))?;
    let file_len = file
        .metadata()
        .map_err(|e| err(format!("cannot read {shown}: {e}")))?
        .len();
    let end = match loc.length {
        Some(length) => loc.offset.checked_add(length),
        None => Some(file_len),
    };
    let end = end
        .filter(|&end| loc.offset <= end && end <= file_len)
        .ok_or_else(|| {
            err(format!(
                "{shown} has {file_len} bytes; offset {} with length {} runs past its end",
                loc.offset,
                loc.length
                    .map_or("(rest of file)".to_string(), |l| l.to_string())
            ))
        })?;
    let len = usize::try_from(end - loc.offset)
        .map_err(|_| err(format!("{} bytes do not fit in memory", end - loc.offset)))?;
    // The range must be the tensor's bytes exactly before anything is allocated for it:
    // a reference to a huge (or sparse) file ends in an error, not an allocator abort.
    let packed = per_byte(dtype);
    if packed > 1 && len != element_count(shape).div_ceil(packed) {
        return Err(malformed(
            t,
            format!(
                "external data has {len} bytes; {} {} elements packed {packed} to a byte take {}",
                element_count(shape),
                onnx_type_name(t.data_type),
                element_count(shape).div_ceil(packed)
            ),
        ));
    }
    if packed == 1 {
        check_byte_len(t, dtype, shape, len, "external data")?;
    }
    let cannot_allocate = || err(format!("{len} bytes from {shown} cannot be allocated"));
    let mut read = |buf: &mut [u8]| {
        file.seek(SeekFrom::Start(loc.offset))
            .and_then(|_| file.read_exact(buf))
            .map_err(|e| err(format!("reading {shown}: {e}")))
    };
    if packed == 1 {
        // Read straight into the tensor: one allocation of the checked size.
        let mut out = Tensor::try_zeros(dtype, shape).ok_or_else(cannot_allocate)?;
        read(out.data.as_mut_slice())?;
        return finish_le(t, out, "external data");
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| cannot_allocate())?;
    bytes.resize(len, 0);
    read(&mut bytes)?;
    dense(t, dtype, shape, &bytes, "external data")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(data_type: i32, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: "t".into(),
            data_type,
            dims: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn four_and_two_bit_types_unpack_low_bits_first() {
        // INT4 (22): 0x87 is 7 then -8; 0xf0 is 0 then -1; the high half of the last byte
        // is padding.
        let mut t = proto(22, &[5]);
        t.raw_data = vec![0x87, 0xf0, 0x05];
        let x = tensor_from_proto(&t, None).unwrap();
        assert_eq!(
            (x.dtype, x.values::<i8>()),
            (DType::I4, &[7, -8, 0, -1, 5][..])
        );
        // UINT2 (25) from int32_data, one packed byte per entry: 0b11_10_01_00.
        let mut t = proto(25, &[2, 3]);
        t.int32_data = vec![0xe4, 0x01];
        let x = tensor_from_proto(&t, None).unwrap();
        assert_eq!(x.values::<u8>(), &[0, 1, 2, 3, 1, 0]);
        // A wrong packed length is an error naming the tensor.
        t.int32_data = vec![0xe4];
        let e = tensor_from_proto(&t, None).unwrap_err().to_string();
        assert!(e.starts_with("tensor 't'"), "{e}");
        assert!(e.contains("packed 4 to a byte take 2"), "{e}");
    }

    #[test]
    fn wide_types_come_from_their_typed_fields() {
        let mut t = proto(11, &[2]); // DOUBLE
        t.double_data = vec![0.1, -2.5];
        let x = tensor_from_proto(&t, None).unwrap();
        assert_eq!(x.values::<f64>(), &[0.1, -2.5]);
        let mut t = proto(12, &[2]); // UINT32
        t.uint64_data = vec![u32::MAX as u64, 7];
        assert_eq!(
            tensor_from_proto(&t, None).unwrap().values::<u32>(),
            &[u32::MAX, 7]
        );
        t.uint64_data = vec![1 << 32, 7];
        assert!(tensor_from_proto(&t, None).is_err());
        let mut t = proto(16, &[1]); // BFLOAT16, bits in int32_data
        t.int32_data = vec![0x3f80];
        let x = tensor_from_proto(&t, None).unwrap();
        assert_eq!((x.dtype, x.to_f64()), (DType::BF16, vec![1.0]));
        let mut t = proto(5, &[1]); // INT16 out of range
        t.int32_data = vec![40000];
        assert!(tensor_from_proto(&t, None).is_err());
    }

    #[test]
    fn relative_paths_inside_the_directory_are_accepted() {
        assert_eq!(
            contained_relative_path("w.bin").unwrap(),
            PathBuf::from("w.bin")
        );
        assert!(contained_relative_path("./sub/w.bin").is_ok());
    }

    #[test]
    fn escaping_and_absolute_paths_are_refused() {
        for bad in ["../w.bin", "sub/../../w.bin", "/etc/passwd", ""] {
            assert!(contained_relative_path(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn external_numbers_are_parsed_and_checked() {
        let entry = |k: &str, v: &str| super::super::proto::StringStringEntryProto {
            key: k.into(),
            value: v.into(),
        };
        let mut t = TensorProto {
            external_data: vec![
                entry("location", "w.bin"),
                entry("offset", "16"),
                entry("length", "8"),
                entry("checksum", "abc"),
            ],
            ..Default::default()
        };
        let loc = external_location(&t).unwrap();
        assert_eq!(
            (loc.location, loc.offset, loc.length),
            ("w.bin", 16, Some(8))
        );
        t.external_data[1].value = "-1".into();
        assert!(external_location(&t).unwrap_err().contains("offset '-1'"));
        t.external_data[1].value = "0".into();
        t.external_data.remove(0);
        assert!(external_location(&t).unwrap_err().contains("location"));
    }
}
