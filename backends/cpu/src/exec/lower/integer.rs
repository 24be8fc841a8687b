//! Lowering of MatMulInteger and ConvInteger (`crate::ops::quant::integer`): the constant
//! weights packed once as i8 (a `u8` weight less 128), the zero points read as stored
//! values, and the per-column corrections computed here.

use baton_delegate_api::ir::{DType, Node, OpKind};
use baton_delegate_api::shape::{broadcast_shapes, ConvGeometry};

use super::Builder;
use crate::exec::Op;
use crate::ops::conv::Geom;
use crate::ops::quant::integer::{IntBatch, IntPath, IntProductOp};
use crate::ops::quant::linear::{indirection, zero_row};
use crate::ops::quant::stored_bias;
use crate::quant::ints;

/// XOR that turns an 8-bit value's byte into its stored i8 weight: a `u8` weight is
/// biased by -128 (its zero point with it) so that every weight is an i8, as the kernels
/// take them.
fn weight_flip(dtype: DType) -> u8 {
    if dtype == DType::U8 {
        0x80
    } else {
        0
    }
}

/// What is added to a weight of `dtype` to store it as i8.
fn weight_bias(dtype: DType) -> i32 {
    if dtype == DType::U8 {
        -128
    } else {
        0
    }
}

impl Builder<'_> {
    /// The zero point at input `i` as stored values (`bias` added), one per line of
    /// `lines` or a single one; an absent or empty input is 0.
    fn int_zero_points(
        &self,
        node: &Node,
        i: usize,
        lines: usize,
        bias: i32,
    ) -> Result<Vec<i32>, String> {
        let Some(&t) = node.inputs.get(i) else {
            return Ok(vec![bias]);
        };
        let decl = &self.graph.tensors[t];
        let bytes = self
            .consts
            .bytes(t)
            .ok_or_else(|| format!("zero point '{}' is not a readable constant", decl.name))?;
        let v = ints(decl.dtype, bytes)
            .ok_or_else(|| format!("zero point '{}' is {}", decl.name, decl.dtype))?;
        match v.len() {
            0 => Ok(vec![bias]),
            1 => Ok(vec![v[0] + bias]),
            n if n == lines => Ok(v.into_iter().map(|z| z + bias).collect()),
            n => Err(format!(
                "zero point '{}' holds {n} values, not 1 or {lines}",
                decl.name
            )),
        }
    }

    /// A prepared MatMulInteger or ConvInteger.
    pub(super) fn int_product(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let (xt, wt) = (node.inputs[0], node.inputs[1]);
        let (xd, wd) = (self.graph.tensors[xt].dtype, self.graph.tensors[wt].dtype);
        let w_bytes = self
            .consts
            .bytes(wt)
            .filter(|_| self.graph.tensors[wt].is_const())
            .ok_or_else(|| {
                format!(
                    "weights '{}' are computed at run time",
                    self.graph.tensors[wt].name
                )
            })?;
        let flip = weight_flip(wd);
        let x = self.src(xt)?;
        let x_len: usize = shapes[0].iter().product();
        let kernel = self.qkernel;
        if node.op == OpKind::MatMulInteger {
            let a: Vec<usize> = match &shapes[0][..] {
                [k] => vec![1, *k],
                s => s.to_vec(),
            };
            let b: Vec<usize> = match &shapes[1][..] {
                [k] => vec![*k, 1],
                s => s.to_vec(),
            };
            if a.len() < 2 || b.len() < 2 {
                return Err("a rank-0 operand".into());
            }
            let (m, k, n) = (a[a.len() - 2], a[a.len() - 1], b[b.len() - 1]);
            if b[b.len() - 2] != k {
                return Err(format!("A {a:?} and B {b:?} do not multiply"));
            }
            let za = self.int_zero_points(node, 2, m, stored_bias(xd))?;
            let mut zw = self.int_zero_points(node, 3, n, weight_bias(wd))?;
            if zw.len() == 1 {
                zw = vec![zw[0]; n];
            }
            let (a_batch, b_batch) = (&a[..a.len() - 2], &b[..b.len() - 2]);
            let mats: usize = b_batch.iter().product();
            let weights: Vec<_> = (0..mats)
                .map(|bi| {
                    let w = &w_bytes[bi * k * n..(bi + 1) * k * n];
                    self.pack_q(1, k, n, |_, kk, j| (w[kk * n + j] ^ flip) as i8)
                })
                .collect();
            let ccol = IntProductOp::corrections(&weights, &zw, false);
            let (rows, batches) = if mats == 1 {
                // One weight matrix: every row of A in one GEMM.
                let rows = a_batch.iter().product::<usize>() * m;
                let whole = IntBatch {
                    a_row: 0,
                    w: 0,
                    out: 0,
                };
                (rows, vec![whole])
            } else {
                let batch = broadcast_shapes(a_batch, b_batch)?;
                let a_of = broadcast_index(a_batch, &batch);
                let b_of = broadcast_index(b_batch, &batch);
                let batches = a_of
                    .iter()
                    .zip(&b_of)
                    .enumerate()
                    .map(|(i, (&ai, &bi))| IntBatch {
                        a_row: ai * m,
                        w: bi,
                        out: i * m * n,
                    })
                    .collect();
                (m, batches)
            };
            return Ok(Op::IntProduct(IntProductOp {
                x,
                x_len,
                path: IntPath::MatMul {
                    m: rows,
                    k,
                    batches,
                },
                weights,
                za,
                zw,
                ccol,
                kernel,
            }));
        }
        let (x_shape, w_shape) = (&shapes[0], &shapes[1]);
        if x_shape.len() > 4 {
            return Err("only 1-D and 2-D convolutions are implemented".into());
        }
        let geom = Geom::new(&ConvGeometry::new(node, x_shape, w_shape)?);
        let (cg, mg, taps) = (geom.cg(), geom.mg(), geom.kh * geom.kw);
        let za = self.int_zero_points(node, 2, 1, stored_bias(xd))?;
        let mut zw = self.int_zero_points(node, 3, geom.m, weight_bias(wd))?;
        if zw.len() == 1 {
            zw = vec![zw[0]; geom.m];
        }
        // ONNX weights: [M, C/group, kh, kw].
        let weights: Vec<_> = (0..geom.group)
            .map(|grp| {
                self.pack_q(taps, cg, mg, |t, ch, j| {
                    (w_bytes[((grp * mg + j) * cg + ch) * taps + t] ^ flip) as i8
                })
            })
            .collect();
        let ccol = IntProductOp::corrections(&weights, &zw, true);
        let pointwise = taps == 1
            && (geom.sh, geom.sw, geom.ph, geom.pw) == (1, 1, 0, 0)
            && (geom.oh, geom.ow) == (geom.h, geom.w);
        let path = if pointwise {
            IntPath::ConvGemm { geom }
        } else {
            IntPath::ConvIgemm {
                geom,
                table: indirection(&geom)?,
                zero: zero_row(za[0], cg),
            }
        };
        Ok(Op::IntProduct(IntProductOp {
            x,
            x_len,
            path,
            weights,
            za,
            zw,
            ccol,
            kernel,
        }))
    }
}

/// For each entry of the broadcast batch shape `batch` (row-major), the flat index of the
/// entry of an operand whose batch shape is `of` (right-aligned, size-1 axes repeated).
fn broadcast_index(of: &[usize], batch: &[usize]) -> Vec<usize> {
    let total: usize = batch.iter().product();
    let lead = batch.len() - of.len();
    (0..total)
        .map(|mut flat| {
            let (mut index, mut stride) = (0, 1);
            for d in (0..batch.len()).rev() {
                let coord = flat % batch[d];
                flat /= batch[d];
                if d >= lead {
                    let e = of[d - lead];
                    if e != 1 {
                        index += coord * stride;
                    }
                    stride *= e;
                }
            }
            index
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::broadcast_index;

    #[test]
    fn broadcast_index_repeats_size_one_axes() {
        // Batch [2, 3] from an operand of batch [3]: each row of entries repeats it.
        assert_eq!(broadcast_index(&[3], &[2, 3]), vec![0, 1, 2, 0, 1, 2]);
        // From [2, 1]: each entry of the first axis repeated over the second.
        assert_eq!(broadcast_index(&[2, 1], &[2, 3]), vec![0, 0, 0, 1, 1, 1]);
        // No batch axes at all: the one matrix.
        assert_eq!(broadcast_index(&[], &[2]), vec![0, 0]);
    }
}
