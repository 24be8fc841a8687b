//! The ops of BTIR 1.4 whose output extent comes from operand values: OneHot here, run
//! on every execute; Range, whose operands must be constants for its length to be known,
//! is computed once at init ([`range_bytes`]) and held as a constant.

use baton_delegate_api::dtype::{element_f64, element_int, push_float, push_int};
use baton_delegate_api::ir::DType;

use super::int::Held;
use super::{Sources, Src};

/// The `n` stored elements of Range in `dtype` from its three scalar operands (stored
/// bytes): integers exactly, wrapping to the dtype; floats in f64, rounded once, as the
/// reference computes them.
pub(crate) fn range_bytes(dtype: DType, start: &[u8], delta: &[u8], n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    match (element_int(dtype, start, 0), element_int(dtype, delta, 0)) {
        (Some(s), Some(d)) => {
            for i in 0..n as i128 {
                push_int(dtype, s.wrapping_add(i.wrapping_mul(d)), &mut out);
            }
        }
        _ => {
            let (s, d) = (element_f64(dtype, start, 0), element_f64(dtype, delta, 0));
            for i in 0..n {
                push_float(dtype, s + i as f64 * d, false, &mut out);
            }
        }
    }
    out
}

/// OneHot over a `[outer, depth, inner]` output: every line along the new axis is
/// `values[0]` but at the position its index names (negative ones counted from `depth`;
/// float indices truncated, NaN and infinities matching nothing), which is `values[1]`.
/// Elements are moved as held, `size` bytes each (see `crate::ops::int`).
#[derive(Clone, Debug)]
pub(crate) struct OneHotOp {
    pub indices: Src,
    pub index: Held,
    pub values: Src,
    pub size: usize,
    pub outer: usize,
    pub depth: usize,
    pub inner: usize,
}

impl OneHotOp {
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32]) {
        let (idx, values) = (sources.bytes(self.indices), sources.bytes(self.values));
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let size = self.size;
        let (off, on) = (&values[..size], &values[size..2 * size]);
        let n = self.outer * self.depth * self.inner * size;
        for element in out[..n].chunks_exact_mut(size) {
            element.copy_from_slice(off);
        }
        let depth = self.depth as i64;
        for k in 0..self.outer * self.inner {
            let (o, i) = (k / self.inner, k % self.inner);
            let Some(raw) = self.index_at(idx, k) else {
                continue;
            };
            let hot = if raw < 0 {
                raw.saturating_add(depth)
            } else {
                raw
            };
            if (0..depth).contains(&hot) {
                let at = ((o * self.depth + hot as usize) * self.inner + i) * size;
                out[at..at + size].copy_from_slice(on);
            }
        }
    }

    /// Index `k`, `None` for a NaN or infinite float (saturated beyond i64, which is
    /// outside any axis either way).
    #[inline(always)]
    fn index_at(&self, idx: &[u8], k: usize) -> Option<i64> {
        match self.index {
            Held::F32 | Held::F16 => {
                let v = self.index.float(idx, k);
                v.is_finite().then(|| v.trunc() as i64)
            }
            held => Some(held.int(idx, k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_rounds_once_and_wraps() {
        let one = |dtype: DType, v: f64| {
            let mut b = Vec::new();
            match dtype.is_int() {
                true => push_int(dtype, v as i128, &mut b),
                false => push_float(dtype, v, false, &mut b),
            }
            b
        };
        let r = range_bytes(
            DType::I32,
            &one(DType::I32, 10.0),
            &one(DType::I32, -3.0),
            5,
        );
        let v: Vec<i32> = bytemuck::pod_collect_to_vec(&r);
        assert_eq!(v, [10, 7, 4, 1, -2]);
        let r = range_bytes(
            DType::I32,
            &one(DType::I32, i32::MAX as f64),
            &one(DType::I32, 1.0),
            2,
        );
        let v: Vec<i32> = bytemuck::pod_collect_to_vec(&r);
        assert_eq!(v, [i32::MAX, i32::MIN]);
        // 0.1 * 3 in f64, rounded once to f32.
        let r = range_bytes(DType::F32, &one(DType::F32, 0.0), &0.1f32.to_le_bytes(), 4);
        let v: Vec<f32> = bytemuck::pod_collect_to_vec(&r);
        assert_eq!(v[3], (3.0 * 0.1f32 as f64) as f32);
    }
}
