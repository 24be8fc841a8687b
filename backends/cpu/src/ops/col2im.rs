//! Col2Im: the blocks of `[N, C * prod(block), L]` summed back into `[N, C, image...]`.
//!
//! Where each (block element, block position) pair lands in an image plane depends only
//! on the geometry, so that map is built once at init (one `u32` per pair, or a marker for
//! a pair in the padding). At run time each `(n, c)` plane is a scatter-add over it. Float
//! sums are formed in f64 in the reference's order (block elements, then positions) and
//! rounded once, so the result is the reference's to the bit; i32 sums wrap.

use super::{RunCtx, Sources, Src};

/// A pair in the padding.
const OUTSIDE: u32 = u32::MAX;

/// A prepared Col2Im.
#[derive(Clone, Debug)]
pub(crate) struct Col2ImOp {
    pub x: Src,
    /// `batch * channels` planes.
    pub planes: usize,
    /// Elements of one image plane.
    pub plane: usize,
    /// Per (block element, position), row-major: the offset in the plane, or `OUTSIDE`.
    pub map: Vec<u32>,
    /// The data is i32 (held as its bits), else f32.
    pub ints: bool,
}

impl Col2ImOp {
    /// The map of a geometry: image extents `image`, block `block`, block positions and
    /// their strides, dilations and leading pads per axis.
    pub fn new(
        x: Src,
        planes: usize,
        image: &[usize],
        block: &[usize],
        g: &baton_delegate_api::shape::Col2ImGeometry,
        ints: bool,
    ) -> Result<Col2ImOp, String> {
        let plane: usize = image.iter().product();
        if plane >= OUTSIDE as usize {
            return Err(format!(
                "Col2Im image {image:?} is too large for 32-bit offsets"
            ));
        }
        let r = image.len();
        let block_len: usize = block.iter().product();
        let positions: usize = g.positions.iter().product();
        let mut map = Vec::with_capacity(block_len * positions);
        let (mut be, mut bp) = (vec![0usize; r], vec![0usize; r]);
        for _ in 0..block_len {
            bp.fill(0);
            for _ in 0..positions {
                let mut off = 0usize;
                let mut inside = true;
                for d in 0..r {
                    let at = (bp[d] * g.strides[d] + be[d] * g.dilations[d]) as i64
                        - g.pad_begin[d] as i64;
                    if at < 0 || at >= image[d] as i64 {
                        inside = false;
                        break;
                    }
                    off = off * image[d] + at as usize;
                }
                map.push(if inside { off as u32 } else { OUTSIDE });
                step(&mut bp, &g.positions);
            }
            step(&mut be, block);
        }
        Ok(Col2ImOp {
            x,
            planes,
            plane,
            map,
            ints,
        })
    }

    /// Bytes of the map (for the delegate's memory report).
    pub fn owned_bytes(&self) -> usize {
        super::vec_bytes(&self.map)
    }

    pub fn reserve(&self, ctx: &mut RunCtx) {
        if !self.ints {
            ctx.reserve_acc(self.plane);
        }
    }

    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], ctx: &mut RunCtx) {
        let x = sources.get(self.x);
        let (plane, per_plane) = (self.plane, self.map.len());
        for k in 0..self.planes {
            let xs = &x[k * per_plane..(k + 1) * per_plane];
            let dst = &mut out[k * plane..(k + 1) * plane];
            if self.ints {
                let dst: &mut [i32] = bytemuck::cast_slice_mut(dst);
                let xs: &[i32] = bytemuck::cast_slice(xs);
                dst.fill(0);
                for (&o, &v) in self.map.iter().zip(xs) {
                    if o != OUTSIDE {
                        dst[o as usize] = dst[o as usize].wrapping_add(v);
                    }
                }
            } else {
                let acc = &mut ctx.acc[..plane];
                acc.fill(0.0);
                for (&o, &v) in self.map.iter().zip(xs) {
                    if o != OUTSIDE {
                        acc[o as usize] += v as f64;
                    }
                }
                for (d, &a) in dst.iter_mut().zip(acc.iter()) {
                    *d = a as f32;
                }
            }
        }
    }
}

/// Advances the row-major multi-index `idx` over `extents` by one (wrapping to zeros).
fn step(idx: &mut [usize], extents: &[usize]) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < extents[d] {
            return;
        }
        idx[d] = 0;
    }
}
