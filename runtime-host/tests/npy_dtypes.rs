//! `.npy` files of every numpy dtype Baton has: read in either byte order, written in the
//! tensor's own dtype, fitted to a model input's dtype only when exact, and bad files
//! refused with the file named.

use baton_delegate_api::{DType, Tensor};
use baton_runtime_host::{inputs, npy};

/// A `.npy` file (format 1.0) with type string `descr`, `shape` and raw `data`, built
/// by hand so that files numpy writes on other machines (big-endian) can be tested.
fn npy_bytes(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

fn read_bytes(bytes: &[u8]) -> baton_runtime_host::Result<Tensor> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npy");
    std::fs::write(&p, bytes).unwrap();
    npy::read(&p)
}

/// One tensor of each numpy dtype, with the edge values of its type.
fn every_dtype() -> Vec<(Tensor, &'static str)> {
    fn t<T: bytemuck::Pod>(d: DType, shape: &[usize], v: &[T]) -> Tensor {
        Tensor::from_bytes(d, shape, bytemuck::cast_slice(v))
    }
    let f16 = |x: f32| half::f16::from_f32(x).to_bits();
    vec![
        (
            t(
                DType::F16,
                &[2, 2],
                &[f16(1.5), f16(-0.0), f16(65504.0), 0x7e00u16],
            ),
            "<f2",
        ),
        (
            Tensor::from_f32(&[3], &[f32::MIN_POSITIVE, f32::NEG_INFINITY, 3.25]),
            "<f4",
        ),
        (t(DType::F64, &[2], &[0.1f64, -1e300]), "<f8"),
        (t(DType::I8, &[3], &[i8::MIN, 0i8, i8::MAX]), "|i1"),
        (t(DType::U8, &[2], &[0u8, 255]), "|u1"),
        (t(DType::I16, &[2], &[i16::MIN, i16::MAX]), "<i2"),
        (t(DType::U16, &[2], &[0u16, u16::MAX]), "<u2"),
        (t(DType::I32, &[2], &[i32::MIN, 7i32]), "<i4"),
        (t(DType::U32, &[1], &[u32::MAX]), "<u4"),
        (Tensor::from_i64(&[2], &[i64::MIN, i64::MAX]), "<i8"),
        (t(DType::U64, &[1, 1], &[u64::MAX]), "<u8"),
        (t(DType::Bool, &[3], &[1u8, 0, 1]), "|b1"),
        (Tensor::from_f32(&[], &[42.0]), "<f4"),
        (t(DType::I32, &[0, 3], &[0i32; 0]), "<i4"),
    ]
}

#[test]
fn every_dtype_round_trips_in_its_own_type_string() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.npy");
    for (t, descr) in every_dtype() {
        npy::write(&p, &t).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let header = String::from_utf8_lossy(&bytes[10..64]);
        assert!(
            header.contains(&format!("'descr': '{descr}'")),
            "{}: {header}",
            t.dtype
        );
        let back = npy::read(&p).unwrap();
        assert_eq!(
            (back.dtype, &back.shape, back.bytes()),
            (t.dtype, &t.shape, t.bytes())
        );
    }
}

#[test]
fn big_endian_files_read_as_their_values() {
    for (t, descr) in every_dtype() {
        let size = t.dtype.size();
        let mut data = t.bytes().to_vec();
        for c in data.chunks_exact_mut(size) {
            c.reverse();
        }
        let big = descr.replace('<', ">");
        let back = read_bytes(&npy_bytes(&big, &t.shape, &data)).unwrap();
        assert_eq!((back.dtype, back.bytes()), (t.dtype, t.bytes()), "{big}");
    }
}

#[test]
fn a_float16_file_is_f16() {
    // 1.0, -2.0 and the smallest subnormal as numpy writes them.
    let data = [0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00];
    let t = read_bytes(&npy_bytes("<f2", &[3], &data)).unwrap();
    assert_eq!(t.dtype, DType::F16);
    assert_eq!(t.to_f64(), vec![1.0, -2.0, 2f64.powi(-24)]);
}

#[test]
fn bad_files_are_refused_naming_the_file() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("complex", npy_bytes("<c8", &[1], &[0; 8]), "<c8"),
        ("float128", npy_bytes("<f16", &[1], &[0; 16]), "f16"),
        ("string", npy_bytes("|S3", &[1], b"abc"), "S3"),
        ("bool byte 2", npy_bytes("|b1", &[2], &[1, 2]), "bool"),
        ("short data", npy_bytes("<i4", &[4], &[0; 12]), "data"),
        ("no magic", b"\x93NUMPX\x01\x00".to_vec(), "not a .npy"),
    ];
    for (what, bytes, needle) in cases {
        let e = read_bytes(&bytes).unwrap_err().to_string();
        assert!(e.contains("x.npy") && e.contains(needle), "{what}: {e}");
    }
}

fn write_read_for(t: &Tensor, want: DType) -> baton_runtime_host::Result<Tensor> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("in.npy");
    npy::write(&p, t).unwrap();
    inputs::read(&p, "x", want)
}

#[test]
fn exact_conversions_feed_the_input() {
    let i64s = Tensor::from_i64(&[3], &[-5, 0, 1 << 20]);
    let as_i32 = write_read_for(&i64s, DType::I32).unwrap();
    assert_eq!(as_i32.values::<i32>(), &[-5, 0, 1 << 20]);
    let as_f32 = write_read_for(&i64s, DType::F32).unwrap();
    assert_eq!(as_f32.f32s(), &[-5.0, 0.0, 1048576.0]);
    let u8s = Tensor::from_bytes(DType::U8, &[2], &[0, 255]);
    assert_eq!(
        write_read_for(&u8s, DType::I16).unwrap().values::<i16>(),
        &[0, 255]
    );
    let f16 = Tensor::from_bytes(DType::F16, &[2], &[0x00, 0x3c, 0x00, 0x7c]);
    let widened = write_read_for(&f16, DType::F32).unwrap();
    assert_eq!(widened.f32s(), &[1.0, f32::INFINITY]);
    let f64s = Tensor::from_bytes(DType::F64, &[2], bytemuck::cast_slice(&[0.5f64, f64::NAN]));
    let narrowed = write_read_for(&f64s, DType::F32).unwrap();
    assert_eq!(narrowed.f32s()[0], 0.5);
    assert!(narrowed.f32s()[1].is_nan());
    let f32s = Tensor::from_f32(&[2], &[0.25, -3.0]);
    let as_f16 = write_read_for(&f32s, DType::F16).unwrap();
    assert_eq!(as_f16.to_f64(), vec![0.25, -3.0]);
}

#[test]
fn inexact_conversions_name_the_input_the_file_and_both_dtypes() {
    let f64s = Tensor::from_bytes(DType::F64, &[2], bytemuck::cast_slice(&[0.5f64, 0.1]));
    let cases = [
        (f64s, DType::F32, "element 1"),
        (Tensor::from_i64(&[2], &[1, 1 << 40]), DType::I32, "range"),
        (Tensor::from_i64(&[1], &[-1]), DType::U8, "range"),
        (
            Tensor::from_i64(&[1], &[(1 << 24) + 1]),
            DType::F32,
            "not exact",
        ),
        (Tensor::from_f32(&[1], &[1.0]), DType::I64, "does not feed"),
        (
            Tensor::from_bytes(DType::Bool, &[1], &[1]),
            DType::F32,
            "does not feed",
        ),
        (Tensor::from_f32(&[1], &[1e-10]), DType::F16, "not exact"),
    ];
    for (t, want, needle) in cases {
        let e = write_read_for(&t, want).unwrap_err().to_string();
        for part in ["in.npy", "input 'x'", want.name(), t.dtype.name(), needle] {
            assert!(
                e.contains(part),
                "{} -> {want}: '{part}' not in: {e}",
                t.dtype
            );
        }
    }
}
