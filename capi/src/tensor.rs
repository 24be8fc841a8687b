//! The plain structs of the header (tensors, tensor descriptions, dims, state pairs) and
//! their conversions to and from the runtime's types.

use std::ffi::{c_char, c_void, CString};
use std::ptr;

use baton_delegate_api::sdk::TensorRef;
use baton_delegate_api::{DType, Dim, TensorDecl};
use baton_runtime_host::HostError;

use crate::{text, CapiError, Result};

/// The header's `BATON_MAX_RANK`.
pub const MAX_RANK: usize = 8;

/// The header's `BatonTensorInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatonTensorInfo {
    pub name: *const c_char,
    pub dtype: u32,
    pub rank: u32,
    pub shape: [i64; MAX_RANK],
    pub dim_names: [*const c_char; MAX_RANK],
}

/// The header's `BatonTensor`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatonTensor {
    pub dtype: u32,
    pub rank: u32,
    pub shape: [i64; MAX_RANK],
    pub data: *mut c_void,
    pub size: usize,
}

/// The header's `BatonDim`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatonDim {
    pub name: *const c_char,
    pub value: i64,
}

/// The header's `BatonStatePair`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatonStatePair {
    pub input: *const c_char,
    pub output: *const c_char,
}

/// A tensor's description with its strings held, for the handle that hands it out.
pub(crate) struct HeldInfo {
    name: CString,
    dim_names: Vec<Option<CString>>,
    dtype: DType,
    /// Extents, -1 where symbolic.
    shape: Vec<i64>,
}

impl HeldInfo {
    /// `decl` as declared, or with `bound` extents where given.
    pub fn new(decl: &TensorDecl, bound: Option<&[usize]>) -> HeldInfo {
        let (shape, dim_names) = match bound {
            Some(b) => (b.iter().map(|&d| d as i64).collect(), vec![None; b.len()]),
            None => decl
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => (*n as i64, None),
                    Dim::Sym(s) => (-1, Some(crate::c_string(s))),
                })
                .unzip(),
        };
        HeldInfo {
            name: crate::c_string(&decl.name),
            dim_names,
            dtype: decl.dtype,
            shape,
        }
    }

    /// The header's struct, pointing into `self`.
    pub fn info(&self) -> Result<BatonTensorInfo> {
        if self.shape.len() > MAX_RANK {
            return Err(CapiError::Argument(format!(
                "tensor '{}' has rank {}, over BATON_MAX_RANK ({MAX_RANK})",
                self.name.to_string_lossy(),
                self.shape.len()
            )));
        }
        let mut info = BatonTensorInfo {
            name: self.name.as_ptr(),
            dtype: self.dtype.code(),
            rank: self.shape.len() as u32,
            shape: [0; MAX_RANK],
            dim_names: [ptr::null(); MAX_RANK],
        };
        for (k, &d) in self.shape.iter().enumerate() {
            info.shape[k] = d;
            info.dim_names[k] = self.dim_names[k]
                .as_ref()
                .map_or(ptr::null(), |c| c.as_ptr());
        }
        Ok(info)
    }
}

/// The shapes of the input tensors `inputs` lends, for [`input_views`] to borrow.
pub(crate) fn input_shapes(inputs: &[BatonTensor]) -> Result<Vec<Vec<usize>>> {
    inputs
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let rank = t.rank as usize;
            if rank > MAX_RANK {
                return Err(CapiError::Argument(format!(
                    "input {k}: rank {rank} is over BATON_MAX_RANK ({MAX_RANK})"
                )));
            }
            t.shape[..rank]
                .iter()
                .map(|&d| {
                    usize::try_from(d)
                        .map_err(|_| CapiError::Argument(format!("input {k}: negative extent {d}")))
                })
                .collect()
        })
        .collect()
}

/// Views of the buffers `inputs` lends (no copy), over `shapes` (from [`input_shapes`]).
///
/// # Safety
/// Each tensor's `data` points to `size` readable bytes that outlive `'a`.
pub(crate) unsafe fn input_views<'a>(
    inputs: &'a [BatonTensor],
    shapes: &'a [Vec<usize>],
) -> Result<Vec<TensorRef<'a>>> {
    inputs
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(k, (t, shape))| {
            let dtype = DType::from_code(t.dtype).ok_or_else(|| {
                CapiError::Argument(format!("input {k}: unknown dtype code {}", t.dtype))
            })?;
            let data: &[u8] = if t.size == 0 {
                &[]
            } else if t.data.is_null() {
                return Err(CapiError::Argument(format!(
                    "input {k}: data is NULL with size {}",
                    t.size
                )));
            } else {
                std::slice::from_raw_parts(t.data as *const u8, t.size)
            };
            Ok(TensorRef {
                dtype,
                shape,
                data,
                quant: None,
            })
        })
        .collect()
}

/// Writes one output into the buffer `out` lends: checks its capacity (setting `size` to
/// the bytes needed when short), copies, and fills in dtype, rank, shape and size.
///
/// # Safety
/// `out.data` points to `out.size` writable bytes.
pub(crate) unsafe fn write_output(
    out: &mut BatonTensor,
    name: &str,
    dtype: DType,
    shape: &[usize],
    bytes: &[u8],
) -> std::result::Result<(), HostError> {
    if shape.len() > MAX_RANK {
        return Err(HostError::OutputBuffer {
            name: format!("{name} (rank {} over BATON_MAX_RANK)", shape.len()),
            needed: bytes.len(),
            capacity: out.size,
        });
    }
    if out.size < bytes.len() || (out.data.is_null() && !bytes.is_empty()) {
        let capacity = if out.data.is_null() { 0 } else { out.size };
        out.size = bytes.len();
        return Err(HostError::OutputBuffer {
            name: name.to_string(),
            needed: bytes.len(),
            capacity,
        });
    }
    if !bytes.is_empty() {
        ptr::copy_nonoverlapping(bytes.as_ptr(), out.data as *mut u8, bytes.len());
    }
    out.dtype = dtype.code();
    out.rank = shape.len() as u32;
    out.shape = [0; MAX_RANK];
    for (k, &d) in shape.iter().enumerate() {
        out.shape[k] = d as i64;
    }
    out.size = bytes.len();
    Ok(())
}

/// `(name, value)` of each of `dims`, values checked non-negative.
///
/// # Safety
/// Each name is NULL or a NUL-terminated string.
pub(crate) unsafe fn dim_list(
    dims: &[BatonDim],
    arg: &'static str,
) -> Result<Vec<(String, usize)>> {
    dims.iter()
        .map(|d| {
            let name = text(d.name, arg)?;
            let value = usize::try_from(d.value).map_err(|_| {
                CapiError::Argument(format!("{arg}: '{name}' = {} is negative", d.value))
            })?;
            Ok((name.to_string(), value))
        })
        .collect()
}
