//! numpy arrays in and out, through the array interface: dtypes, contiguity, the data
//! pointer, and output arrays made by `numpy.empty` and filled in place.

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

/// The dtype of a numpy type string of the array interface (`<f4`, `|b1`).
fn from_typestr(s: &str) -> Option<DType> {
    let (order, kind) = s.split_at(1);
    // A big-endian array would be read byte-swapped: refused (the caller converts).
    if order == ">" {
        return None;
    }
    Some(match kind {
        "f4" => DType::F32,
        "f2" => DType::F16,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "i2" => DType::I16,
        "u2" => DType::U16,
        "i4" => DType::I32,
        "u4" => DType::U32,
        "i8" => DType::I64,
        "u8" => DType::U64,
        "b1" => DType::Bool,
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

/// An input array held for a run: the object (kept alive while its bytes are read) and
/// what the run needs of it.
pub struct Held<'py> {
    _array: Bound<'py, PyAny>,
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
        // SAFETY: the array interface's data pointer of a C-contiguous array addresses
        // `nbytes` bytes, alive while `_array` holds a reference (numpy does not move an
        // array's data while it lives; this module does not resize it).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

/// `value` (an array or anything numpy turns into one) as an input for `name`.
pub fn held<'py>(np: &Numpy, name: &str, value: &Bound<'py, PyAny>) -> PyResult<Held<'py>> {
    let py = value.py();
    // One attribute lookup on the common path (numpy builds the interface dict on each
    // access): `strides` is None exactly when the array is C-contiguous.
    let mut array = value.clone();
    let mut interface = match array.getattr("__array_interface__") {
        Ok(i) => i,
        Err(_) => {
            array = np.asarray.bind(py).call1((value,))?;
            array.getattr("__array_interface__")?
        }
    };
    if !interface.get_item("strides")?.is_none() {
        array = np.ascontiguousarray.bind(py).call1((array,))?;
        interface = array.getattr("__array_interface__")?;
    }
    let typestr: String = interface.get_item("typestr")?.extract()?;
    let dtype = from_typestr(&typestr).ok_or_else(|| {
        error(format!(
            "input '{name}': numpy dtype '{typestr}' has no Baton dtype (little-endian \
             float16/32/64, int8-64, uint8-64 and bool do)"
        ))
    })?;
    let shape: Vec<usize> = interface.get_item("shape")?.extract()?;
    let (ptr, _readonly): (usize, bool) = interface.get_item("data")?.extract()?;
    let len = shape.iter().product::<usize>() * dtype.size();
    Ok(Held {
        _array: array,
        dtype,
        shape,
        ptr,
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
    let interface = array.getattr("__array_interface__")?;
    let (ptr, _readonly): (usize, bool) = interface.get_item("data")?.extract()?;
    if !bytes.is_empty() {
        // SAFETY: a fresh C-contiguous array of this shape and dtype has exactly
        // `bytes.len()` bytes at `ptr`, and nothing else refers to it yet.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr as *mut u8, bytes.len()) };
    }
    Ok(array)
}
