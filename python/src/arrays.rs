//! numpy arrays in and out, through the array interface: dtypes, contiguity, the data
//! pointer, and output arrays made by `numpy.empty` and filled in place.

use std::ffi::{c_char, c_int, c_void};

use baton_delegate_api::DType;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error;

/// The numpy dtype name of `d`, where numpy has one.
pub fn numpy_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::F64 => "float64",
        DType::I8 => "int8",
        DType::U8 => "uint8",
        DType::I16 => "int16",
        DType::U16 => "uint16",
        DType::I32 => "int32",
        DType::U32 => "uint32",
        DType::I64 => "int64",
        DType::U64 => "uint64",
        DType::Bool => "bool",
        _ => return None,
    })
}

/// numpy's functions this module calls, looked up once per session.
pub struct Numpy {
    empty: Py<PyAny>,
    ascontiguousarray: Py<PyAny>,
    asarray: Py<PyAny>,
    /// `numpy.dtype` objects by Baton dtype code, made once rather than parsed from a name
    /// on every output of every run.
    dtypes: Vec<Option<Py<PyAny>>>,
}

impl Numpy {
    pub fn new(py: Python<'_>) -> PyResult<Numpy> {
        let np = py.import("numpy")?;
        let dtype = np.getattr("dtype")?;
        let mut dtypes = Vec::new();
        for d in DType::ALL {
            let code = d.code() as usize;
            if dtypes.len() <= code {
                dtypes.resize_with(code + 1, || None);
            }
            if let Some(name) = numpy_name(d) {
                dtypes[code] = Some(dtype.call1((name,))?.unbind());
            }
        }
        Ok(Numpy {
            empty: np.getattr("empty")?.unbind(),
            ascontiguousarray: np.getattr("ascontiguousarray")?.unbind(),
            asarray: np.getattr("asarray")?.unbind(),
            dtypes,
        })
    }
}

/// numpy's array interface as a C struct (`__array_struct__`, a capsule holding a pointer
/// to this): the layout numpy documents for the protocol.
#[repr(C)]
struct ArrayStruct {
    two: c_int,
    nd: c_int,
    typekind: c_char,
    itemsize: c_int,
    flags: c_int,
    shape: *const isize,
    strides: *const isize,
    data: *mut c_void,
    descr: *mut pyo3::ffi::PyObject,
}

/// `flags` of [`ArrayStruct`]: C-contiguous, and in the machine's byte order.
const C_CONTIGUOUS: c_int = 0x0001;
const NOTSWAPPED: c_int = 0x0200;

/// The array struct `array` exports (its capsule, which keeps the struct and the array
/// alive, and a pointer into it), or `None` when it exports none.
fn array_struct<'py>(
    array: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyAny>, *const ArrayStruct)>> {
    let Ok(capsule) = array.getattr("__array_struct__") else {
        return Ok(None);
    };
    // SAFETY: a capsule of the array-struct protocol holds a PyArrayInterface (numpy makes
    // it unnamed); its `two` field is checked before anything else is read.
    let p = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null()) };
    if p.is_null() {
        return Err(PyErr::fetch(array.py()));
    }
    let p = p as *const ArrayStruct;
    if unsafe { (*p).two } != 2 {
        return Ok(None);
    }
    Ok(Some((capsule, p)))
}

/// The dtype of an array struct's kind and item size.
fn from_kind(kind: u8, itemsize: c_int) -> Option<DType> {
    Some(match (kind, itemsize) {
        (b'f', 4) => DType::F32,
        (b'f', 2) => DType::F16,
        (b'f', 8) => DType::F64,
        (b'i', 1) => DType::I8,
        (b'u', 1) => DType::U8,
        (b'i', 2) => DType::I16,
        (b'u', 2) => DType::U16,
        (b'i', 4) => DType::I32,
        (b'u', 4) => DType::U32,
        (b'i', 8) => DType::I64,
        (b'u', 8) => DType::U64,
        (b'b', 1) => DType::Bool,
        _ => return None,
    })
}

/// An input array held for a run: the array and its struct's capsule (kept alive while
/// its bytes are read) and what the run needs of it.
pub struct Held<'py> {
    _array: Bound<'py, PyAny>,
    _capsule: Bound<'py, PyAny>,
    pub dtype: DType,
    pub shape: Vec<usize>,
    ptr: usize,
    len: usize,
}

impl Held<'_> {
    /// The array's bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the data pointer of a C-contiguous array's struct addresses `len` bytes
        // (its shape's elements times the item size), alive while `_array` and `_capsule`
        // hold references (numpy does not move an array's data while it lives; this
        // module does not resize it).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

/// `value` (an array or anything numpy turns into one) as an input for `name`.
pub fn held<'py>(np: &Numpy, name: &str, value: &Bound<'py, PyAny>) -> PyResult<Held<'py>> {
    let py = value.py();
    // One attribute lookup on the common path: the array-struct protocol, a capsule, where
    // `__array_interface__` would build a dict on every access.
    let mut array = value.clone();
    let mut found = array_struct(&array)?;
    if found.is_none() {
        array = np.asarray.bind(py).call1((value,))?;
        found = array_struct(&array)?;
    }
    let contiguous = |s: *const ArrayStruct| unsafe { (*s).flags & C_CONTIGUOUS != 0 };
    if found.as_ref().is_none_or(|(_, s)| !contiguous(*s)) {
        array = np.ascontiguousarray.bind(py).call1((array,))?;
        found = array_struct(&array)?;
    }
    let (capsule, s) =
        found.ok_or_else(|| error(format!("input '{name}': not an array numpy can read")))?;
    // SAFETY: `s` points into the capsule's struct, alive while `capsule` is; `shape`
    // has `nd` entries.
    let (kind, itemsize, flags, shape, data) = unsafe {
        let s = &*s;
        let shape: Vec<usize> = (0..s.nd.max(0) as usize)
            .map(|k| *s.shape.add(k) as usize)
            .collect();
        (
            s.typekind as u8,
            s.itemsize,
            s.flags,
            shape,
            s.data as usize,
        )
    };
    let dtype =
        from_kind(kind, itemsize)
            .filter(|_| flags & NOTSWAPPED != 0)
            .ok_or_else(|| {
                error(format!(
                "input '{name}': numpy dtype (kind '{}', {itemsize} bytes{}) has no Baton dtype \
                 (float16/32/64, int8-64, uint8-64 and bool in the machine's byte order do)",
                kind as char,
                if flags & NOTSWAPPED == 0 { ", byte-swapped" } else { "" }
            ))
            })?;
    let len = shape.iter().product::<usize>() * dtype.size();
    Ok(Held {
        _array: array,
        _capsule: capsule,
        dtype,
        shape,
        ptr: data,
        len,
    })
}

/// A new numpy array holding `bytes` as `dtype` of `shape`: made by `numpy.empty` and
/// written once.
pub fn output<'py>(
    py: Python<'py>,
    np: &Numpy,
    name: &str,
    dtype: DType,
    shape: &[usize],
    bytes: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let np_dtype = np
        .dtypes
        .get(dtype.code() as usize)
        .and_then(Option::as_ref)
        .ok_or_else(|| {
            error(format!(
                "output '{name}': its dtype {} has no numpy equivalent",
                dtype.name()
            ))
        })?;
    let dims = PyTuple::new(py, shape)?;
    let array = np.empty.bind(py).call1((dims, np_dtype.bind(py)))?;
    let (_capsule, s) = array_struct(&array)?
        .ok_or_else(|| error(format!("output '{name}': numpy.empty gave no array struct")))?;
    if !bytes.is_empty() {
        // SAFETY: a fresh C-contiguous array of this shape and dtype has exactly
        // `bytes.len()` bytes at its data pointer, and nothing else refers to it yet.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (*s).data as *mut u8, bytes.len()) };
    }
    Ok(array)
}
