//! An owned tensor, for tests, probes, reference runs and I/O. Execution itself works on
//! borrowed views ([`crate::TensorRef`], [`crate::TensorMut`]) into the host's arena.

use crate::ir::{AlignedBytes, DType};
use crate::sdk::{TensorMut, TensorRef};

/// An owned, 64-byte aligned tensor.
pub struct Tensor {
    /// The element type.
    pub dtype: DType,
    /// Extents in elements, outermost first; empty for a scalar.
    pub shape: Vec<usize>,
    /// The elements, dense and row-major. Its length in bytes is the product of `shape`
    /// times the element size; code that changes `shape` or `data` keeps them in step.
    pub data: AlignedBytes,
}

impl Tensor {
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor {
            dtype,
            shape: shape.to_vec(),
            data: AlignedBytes::zeroed(n * dtype.size()),
        }
    }

    /// A zero-filled tensor, or `None` if its byte size overflows or cannot be allocated
    /// (for shapes that come from files, flags or models).
    pub fn try_zeros(dtype: DType, shape: &[usize]) -> Option<Tensor> {
        let bytes = crate::shape::checked_product(shape)?.checked_mul(dtype.size())?;
        Some(Tensor {
            dtype,
            shape: shape.to_vec(),
            data: AlignedBytes::try_zeroed(bytes)?,
        })
    }

    /// A tensor from raw little-endian bytes (panics if the length does not fit the shape).
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Tensor {
        let n: usize = shape.iter().product();
        assert_eq!(
            n * dtype.size(),
            bytes.len(),
            "byte length does not fit shape {shape:?} of {dtype}"
        );
        Tensor {
            dtype,
            shape: shape.to_vec(),
            data: AlignedBytes::copy_of(bytes),
        }
    }

    /// An f32 tensor.
    pub fn from_f32(shape: &[usize], values: &[f32]) -> Tensor {
        Tensor::from_bytes(DType::F32, shape, bytemuck::cast_slice(values))
    }

    /// An i64 tensor.
    pub fn from_i64(shape: &[usize], values: &[i64]) -> Tensor {
        Tensor::from_bytes(DType::I64, shape, bytemuck::cast_slice(values))
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The data as f32 (panics on another dtype).
    pub fn f32s(&self) -> &[f32] {
        assert_eq!(self.dtype, DType::F32, "tensor is {} not f32", self.dtype);
        bytemuck::cast_slice(self.data.as_slice())
    }

    /// The data viewed as `T`.
    pub fn values<T: bytemuck::Pod>(&self) -> &[T] {
        bytemuck::cast_slice(self.data.as_slice())
    }

    /// Every element converted to f64 (bool as 0/1, narrow floats widened exactly, 64-bit
    /// integers beyond 2^53 rounded), for comparisons.
    pub fn to_f64(&self) -> Vec<f64> {
        let b = self.data.as_slice();
        (0..self.len())
            .map(|i| crate::dtype::element_f64(self.dtype, b, i))
            .collect()
    }

    /// A read-only view.
    pub fn view(&self) -> TensorRef<'_> {
        TensorRef {
            dtype: self.dtype,
            shape: &self.shape,
            data: self.data.as_slice(),
            quant: None,
        }
    }

    /// A writable view.
    pub fn view_mut(&mut self) -> TensorMut<'_> {
        TensorMut::new(self.dtype, &self.shape, self.data.as_mut_slice())
    }
}

impl Clone for Tensor {
    fn clone(&self) -> Tensor {
        Tensor::from_bytes(self.dtype, &self.shape, self.data.as_slice())
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({} {:?})", self.dtype, self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `from_bytes` copies without zero-filling first: its bytes are the caller's, at
    /// every length around the 64-byte words, and the buffer stays aligned.
    #[test]
    fn from_bytes_holds_the_bytes_given() {
        for len in [0usize, 1, 3, 63, 64, 65, 127, 128, 1000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let t = Tensor::from_bytes(DType::U8, &[len], &bytes);
            assert_eq!(t.bytes(), &bytes[..], "length {len}");
            assert_eq!(t.bytes().as_ptr() as usize % 64, 0, "length {len}");
        }
        let f = Tensor::from_f32(&[2, 3], &[1.0, -2.0, 3.5, 0.0, f32::MAX, -0.0]);
        assert_eq!(f.shape, [2, 3]);
        assert_eq!(f.to_f64()[4], f64::from(f32::MAX));
    }

    #[test]
    #[should_panic(expected = "byte length does not fit")]
    fn from_bytes_refuses_a_length_that_does_not_fit() {
        Tensor::from_bytes(DType::F32, &[2], &[0u8; 7]);
    }
}
