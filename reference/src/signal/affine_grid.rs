//! AffineGrid: theta applied to the normalized coordinates of every output point.

use baton_delegate_api::{Node, TensorMut, TensorRef};

use crate::data;
use crate::KernelError;

/// The normalized coordinate of pixel `i` of `n` along one axis (see `OpKind::AffineGrid`).
fn coordinate(i: usize, n: usize, align_corners: bool) -> f64 {
    if align_corners {
        if n <= 1 {
            -1.0
        } else {
            -1.0 + 2.0 * i as f64 / (n - 1) as f64
        }
    } else {
        (2 * i + 1) as f64 / n as f64 - 1.0
    }
}

pub(super) fn affine_grid(
    node: &Node,
    inputs: &[TensorRef<'_>],
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let align = node.attr_int("align_corners", 0) != 0;
    let theta = &inputs[0];
    let out_shape = out.shape().to_vec();
    let fits = match theta.shape[..] {
        [b, r, c] if (r == 2 || r == 3) && c == r + 1 => {
            out_shape.len() == r + 2 && out_shape[0] == b && out_shape[r + 1] == r
        }
        _ => false,
    };
    if !fits {
        return Err(KernelError::Shape {
            node: node.label(),
            message: format!(
                "theta {:?} does not fit an output {:?}",
                theta.shape, out_shape
            ),
        });
    }
    let r = theta.shape[1];
    // The spatial extents are the output's, between the batch and the coordinate axis.
    let spatial = out_shape[1..=r].to_vec();
    let t = data::load_f64(theta);
    let points: usize = spatial.iter().product();
    let batch = theta.shape[0];
    let mut y = Vec::with_capacity(batch * points * r);
    let mut homogeneous = vec![1.0; r + 1];
    for n in 0..batch {
        let tn = &t[n * r * (r + 1)..(n + 1) * r * (r + 1)];
        data::for_each_index(&spatial, |idx| {
            // Coordinates list the innermost axis first: x along the last extent.
            for (k, h) in homogeneous[..r].iter_mut().enumerate() {
                let axis = r - 1 - k;
                *h = coordinate(idx[axis], spatial[axis], align);
            }
            for row in tn.chunks_exact(r + 1) {
                y.push(
                    row.iter()
                        .zip(&homogeneous)
                        .map(|(a, b)| a * b)
                        .sum::<f64>(),
                );
            }
        });
    }
    data::store_floats(out, &y, true);
    Ok(())
}
