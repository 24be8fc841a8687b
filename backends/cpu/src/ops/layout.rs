//! Data movement: strided iteration (shared by broadcasting and Transpose), Transpose,
//! Concat, plain copies (Reshape, Flatten), the NCHW to NHWC interleave of a
//! convolution's or a quantization's input and its inverse for their outputs.

use super::elementwise::split_out;
use super::{Sources, Src};
use crate::gemm::Isa;
use crate::pool::{Disjoint, Pool};

/// The most dimensions a tensor may have here.
pub(crate) const MAX_RANK: usize = 6;

/// NCHW values mapped by `f` into NHWC: `out` holds the output elements `start..`
/// (whole pixels of `c` channels) of images of `plane` pixels, a block of pixels at a
/// time: each channel's run of the block mapped in order into a buffer (that loop
/// vectorizes, a quantization's division included), then the block interleaved into the
/// pixels. Writing straight to stride `c` ran element by element (a model's 3x224x224
/// image: 224 us to quantize, 110 us to copy); `c` is a constant where the caller makes
/// it one (see [`nchw_to_nhwc`]).
#[inline(always)]
fn nchw_to_nhwc_part<T: Copy, U: Copy + Default>(
    x: &[T],
    (c, plane): (usize, usize),
    start: usize,
    out: &mut [U],
    f: impl Fn(T) -> U,
) {
    const BLOCK: usize = 64;
    // Up to this many channels, the whole block's channels are buffered and each pixel
    // written at once; more, channel by channel.
    const WIDE: usize = 4;
    let c = c.max(1);
    let mut tmp = [[U::default(); BLOCK]; WIDE];
    let (first, pixels) = (start / c, out.len() / c);
    let mut px = first;
    while px < first + pixels {
        let (b, p0) = (px / plane, px % plane);
        // Within one image and one block.
        let n = BLOCK.min(plane - p0).min(first + pixels - px);
        let src = &x[b * c * plane..(b + 1) * c * plane];
        let dst = &mut out[(px - first) * c..(px - first + n) * c];
        if c <= WIDE {
            for (ch, t) in tmp.iter_mut().enumerate().take(c) {
                for (t, &v) in t.iter_mut().zip(&src[ch * plane + p0..][..n]) {
                    *t = f(v);
                }
            }
            for (i, d) in dst.chunks_exact_mut(c).enumerate() {
                for (ch, d) in d.iter_mut().enumerate() {
                    *d = tmp[ch][i];
                }
            }
        } else {
            for ch in 0..c {
                let t = &mut tmp[0];
                for (t, &v) in t.iter_mut().zip(&src[ch * plane + p0..][..n]) {
                    *t = f(v);
                }
                for (d, &t) in dst.iter_mut().skip(ch).step_by(c).zip(&t[..n]) {
                    *d = t;
                }
            }
        }
        px += n;
    }
}

/// [`nchw_to_nhwc_part`] with the channel count a constant for 1, 3 and 4 channels (a
/// model's image input), so that the interleave's inner loop is unrolled.
#[inline(always)]
pub(crate) fn nchw_to_nhwc<T: Copy, U: Copy + Default>(
    x: &[T],
    (c, plane): (usize, usize),
    start: usize,
    out: &mut [U],
    f: impl Fn(T) -> U,
) {
    match c {
        1 => nchw_to_nhwc_part(x, (1, plane), start, out, f),
        3 => nchw_to_nhwc_part(x, (3, plane), start, out, f),
        4 => nchw_to_nhwc_part(x, (4, plane), start, out, f),
        c => nchw_to_nhwc_part(x, (c, plane), start, out, f),
    }
}

/// NHWC values mapped by `f` into NCHW, the inverse of [`nchw_to_nhwc`]: `out` holds the
/// output elements `start..` (whole channel planes, the unit the threads split) of images
/// of `c` channels of `plane` pixels, a tile of up to 16 channels by 64 pixels at a time:
/// each channel's run is written in order while the tile's pixels stay in L1, whatever the
/// channel count. Inlined, so that `f` is compiled with its caller's target features.
#[inline(always)]
pub(crate) fn nhwc_to_nchw<T: Copy, U: Copy>(
    x: &[T],
    (c, plane): (usize, usize),
    start: usize,
    out: &mut [U],
    f: impl Fn(T) -> U,
) {
    const PIXELS: usize = 64;
    const CHANNELS: usize = 16;
    if c == 0 || plane == 0 {
        return;
    }
    let (first, planes) = (start / plane, out.len() / plane);
    let mut q = first;
    while q < first + planes {
        let (b, ch0) = (q / c, q % c);
        // Within one image.
        let n = CHANNELS.min(c - ch0).min(first + planes - q);
        let src = &x[b * c * plane..(b + 1) * c * plane];
        let dst = &mut out[(q - first) * plane..(q - first + n) * plane];
        for p0 in (0..plane).step_by(PIXELS) {
            let pn = PIXELS.min(plane - p0);
            // The tile's pixels, checked once: each channel reads `pn` values `c` apart.
            let tile = &src[p0 * c + ch0..][..(pn - 1) * c + n];
            for (k, d) in dst.chunks_exact_mut(plane).enumerate() {
                for (i, d) in d[p0..p0 + pn].iter_mut().enumerate() {
                    *d = f(tile[i * c + k]);
                }
            }
        }
        q += n;
    }
}

/// NCHW to NHWC of `batch` images of `c` planes of `plane` values (f32 or stored bytes),
/// split among the threads in whole pixels: a model's image input is the largest tensor
/// it reads, and this copy ran on one thread while the convolution after it ran on all.
pub(crate) fn to_nhwc<T: Copy + Default + Send + Sync>(
    pool: &Pool,
    x: &[T],
    (batch, c, plane): (usize, usize, usize),
    out: &mut [T],
) {
    let n = batch * c * plane;
    split_out(pool, &mut out[..n], c, |start, out| {
        nchw_to_nhwc(&x[..n], (c, plane), start, out, |v| v)
    })
}

/// NHWC to NCHW, the inverse of [`to_nhwc`], split among the threads in whole channel
/// planes.
pub(crate) fn to_nchw<T: Copy + Send + Sync>(
    pool: &Pool,
    x: &[T],
    (batch, c, plane): (usize, usize, usize),
    out: &mut [T],
) {
    let n = batch * c * plane;
    split_out(pool, &mut out[..n], plane, |start, out| {
        nhwc_to_nchw(&x[..n], (c, plane), start, out, |v| v)
    })
}

/// [`to_nhwc`] of f32 values: with AVX2 (or AVX-512) and at least 8 channels, by 8x8
/// tiles transposed in registers; the element-wise interleave gathered one value at a
/// time (a 32x112x112 input took about 200 us, ONNX Runtime's reorder of the same a
/// quarter of that).
pub(crate) fn to_nhwc_f32(
    pool: &Pool,
    isa: Isa,
    x: &[f32],
    (batch, c, plane): (usize, usize, usize),
    out: &mut [f32],
) {
    if !transposes_in_tiles(isa) || c < F32_TILE {
        return to_nhwc(pool, x, (batch, c, plane), out);
    }
    // Each image is a `c x plane` matrix.
    batch_transpose(pool, isa, x, (batch, c, plane), out)
}

/// [`to_nchw`] of f32 values, by 8x8 tiles as [`to_nhwc_f32`].
pub(crate) fn to_nchw_f32(
    pool: &Pool,
    isa: Isa,
    x: &[f32],
    (batch, c, plane): (usize, usize, usize),
    out: &mut [f32],
) {
    if !transposes_in_tiles(isa) || c < F32_TILE {
        return to_nchw(pool, x, (batch, c, plane), out);
    }
    // Each image is a `plane x c` matrix.
    batch_transpose(pool, isa, x, (batch, plane, c), out)
}

/// Each of the `batch` row-major `rows x cols` matrices of `x` transposed into `out`,
/// split among the threads in whole rows of the result (`rows` values each; a part may
/// span images).
fn batch_transpose(
    pool: &Pool,
    isa: Isa,
    x: &[f32],
    (batch, rows, cols): (usize, usize, usize),
    out: &mut [f32],
) {
    let n = batch * rows * cols;
    if n == 0 {
        return;
    }
    let x = &x[..n];
    split_out(pool, &mut out[..n], rows, |start, out| {
        // Result rows `first..first + count`, numbered across the images.
        let (first, count) = (start / rows, out.len() / rows);
        let mut q = first;
        while q < first + count {
            let (b, j0) = (q / cols, q % cols);
            let m = (cols - j0).min(first + count - q);
            let src = &x[b * rows * cols + j0..][..(rows - 1) * cols + m];
            let dst = &mut out[(q - first) * rows..][..m * rows];
            transpose(isa, src, cols, dst, rows, rows, m);
            q += m;
        }
    })
}

/// The side of the tiles [`transpose`] moves in registers.
const F32_TILE: usize = 8;

/// Whether [`transpose`] has a tiled kernel for `isa`.
fn transposes_in_tiles(isa: Isa) -> bool {
    matches!(isa, Isa::Avx2Fma | Isa::Avx512F)
}

/// `dst[j * ds + i] = src[i * ss + j]` for `rows x cols` values: 8x8 tiles by the AVX2
/// kernel where `isa` has it, the edges one value at a time.
///
/// Panics if a slice is too short for its shape (a bug of the caller).
fn transpose(
    isa: Isa,
    src: &[f32],
    ss: usize,
    dst: &mut [f32],
    ds: usize,
    rows: usize,
    cols: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(
        (cols - 1) * ds + rows <= dst.len(),
        "transpose: a slice too short for its shape"
    );
    // SAFETY: `dst` holds the shape (checked) and is borrowed mutably.
    unsafe { transpose_to(isa, src, ss, dst.as_mut_ptr(), ds, rows, cols) }
}

/// Pixels `first..first + n` of image `image` of an NCHW tensor `(batch, c, plane)` held
/// by `out`, from `src`, the same pixels channels-last (`n` rows of `c`): a convolution
/// writing NCHW moves each block of output rows while it is still in cache, instead of
/// a whole NHWC result through memory and back.
///
/// # Safety
/// No other thread reads or writes those elements of `out` meanwhile.
pub(crate) unsafe fn pixels_to_nchw(
    isa: Isa,
    src: &[f32],
    (c, plane): (usize, usize),
    (image, first, n): (usize, usize, usize),
    out: &Disjoint<'_>,
) {
    if n == 0 || c == 0 {
        return;
    }
    let base = image * c * plane + first;
    assert!(
        first + n <= plane && base + (c - 1) * plane + n <= out.len(),
        "pixels_to_nchw: pixels outside the tensor"
    );
    // SAFETY: in bounds (checked); unshared by the caller's contract.
    unsafe { transpose_to(isa, src, c, out.ptr().add(base), plane, n, c) }
}

/// Pixels `first..first + n` of image `image` of the NCHW tensor `x` (`(c, plane)` per
/// image) channels-last into `dst` (`n` rows of `c`): the converse of [`pixels_to_nchw`],
/// for an op that changes the layout block by block.
pub(crate) fn nchw_pixels(
    isa: Isa,
    x: &[f32],
    (c, plane): (usize, usize),
    (image, first, n): (usize, usize, usize),
    dst: &mut [f32],
) {
    if n == 0 || c == 0 {
        return;
    }
    assert!(first + n <= plane, "nchw_pixels: pixels outside the image");
    let src = &x[image * c * plane + first..];
    transpose(isa, src, plane, dst, c, c, n);
}

/// [`transpose`] into `dst`.
///
/// # Safety
/// `dst` is valid for writes of `(cols - 1) * ds + rows` values, none read or written
/// by another thread meanwhile; `rows` and `cols` are not 0.
unsafe fn transpose_to(
    isa: Isa,
    src: &[f32],
    ss: usize,
    dst: *mut f32,
    ds: usize,
    rows: usize,
    cols: usize,
) {
    assert!(
        (rows - 1) * ss + cols <= src.len(),
        "transpose: a slice too short for its shape"
    );
    let (full_r, full_c) = (rows / F32_TILE * F32_TILE, cols / F32_TILE * F32_TILE);
    #[cfg(target_arch = "x86_64")]
    if transposes_in_tiles(isa) && ss >= F32_TILE && ds >= F32_TILE {
        // SAFETY: AVX2 was detected (an Avx2Fma or Avx512F kernel is only selected then);
        // every tile lies inside the shape the caller's contract makes valid.
        unsafe { transpose_tiles(src, ss, dst, ds, full_r, full_c) };
    } else {
        // SAFETY: as the caller's contract.
        unsafe { scalar(src, ss, dst, ds, 0..full_r, 0..full_c) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        // SAFETY: as the caller's contract.
        unsafe { scalar(src, ss, dst, ds, 0..full_r, 0..full_c) };
    }
    // SAFETY: as the caller's contract.
    unsafe {
        scalar(src, ss, dst, ds, full_r..rows, 0..cols);
        scalar(src, ss, dst, ds, 0..full_r, full_c..cols);
    }

    /// # Safety
    /// As `transpose_to`'s, for the rows and columns given.
    unsafe fn scalar(
        src: &[f32],
        ss: usize,
        dst: *mut f32,
        ds: usize,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) {
        for i in rows {
            for j in cols.clone() {
                // SAFETY: inside the shape (the caller's contract).
                unsafe { *dst.add(j * ds + i) = src[i * ss + j] };
            }
        }
    }
}

/// The whole 8x8 tiles of the `rows x cols` block (multiples of 8): eight rows loaded,
/// transposed by unpacks, shuffles and lane permutes, and stored as eight rows.
///
/// # Safety
/// AVX2 is available, and `src` and `dst` hold the block at their strides (8 or more),
/// `dst` for writes no other thread makes meanwhile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_tiles(
    src: &[f32],
    ss: usize,
    d: *mut f32,
    ds: usize,
    rows: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    let s = src.as_ptr();
    for i0 in (0..rows).step_by(F32_TILE) {
        for j0 in (0..cols).step_by(F32_TILE) {
            // SAFETY: rows i0..i0 + 8 and columns j0..j0 + 8 of the block, which the
            // caller's contract makes valid.
            unsafe {
                let r: [__m256; 8] =
                    std::array::from_fn(|i| _mm256_loadu_ps(s.add((i0 + i) * ss + j0)));
                let t0 = _mm256_unpacklo_ps(r[0], r[1]);
                let t1 = _mm256_unpackhi_ps(r[0], r[1]);
                let t2 = _mm256_unpacklo_ps(r[2], r[3]);
                let t3 = _mm256_unpackhi_ps(r[2], r[3]);
                let t4 = _mm256_unpacklo_ps(r[4], r[5]);
                let t5 = _mm256_unpackhi_ps(r[4], r[5]);
                let t6 = _mm256_unpacklo_ps(r[6], r[7]);
                let t7 = _mm256_unpackhi_ps(r[6], r[7]);
                let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                let out = [
                    _mm256_permute2f128_ps::<0x20>(u0, u4),
                    _mm256_permute2f128_ps::<0x20>(u1, u5),
                    _mm256_permute2f128_ps::<0x20>(u2, u6),
                    _mm256_permute2f128_ps::<0x20>(u3, u7),
                    _mm256_permute2f128_ps::<0x31>(u0, u4),
                    _mm256_permute2f128_ps::<0x31>(u1, u5),
                    _mm256_permute2f128_ps::<0x31>(u2, u6),
                    _mm256_permute2f128_ps::<0x31>(u3, u7),
                ];
                for (j, o) in out.iter().enumerate() {
                    _mm256_storeu_ps(d.add((j0 + j) * ds + i0), *o);
                }
            }
        }
    }
}

/// Row-major strides of `shape`, with 0 for size-1 dimensions, right-aligned to `rank`
/// dimensions: the strides that read `shape` broadcast to a shape of that rank.
pub(crate) fn broadcast_strides(shape: &[usize], rank: usize) -> Vec<usize> {
    let mut strides = vec![0; rank];
    let mut step = 1;
    for (i, &d) in shape.iter().enumerate().rev() {
        let pos = rank - shape.len() + i;
        strides[pos] = if d == 1 { 0 } else { step };
        step *= d;
    }
    strides
}

/// An iteration over a contiguous output of shape `dims` reading `N` operands with their
/// own strides. Dimensions are coalesced at build time, so a broadcast add of a bias
/// row is one outer loop and one contiguous inner loop.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Strided<const N: usize> {
    /// Outer dimensions then the innermost one; never empty unless the output is empty.
    dims: Vec<usize>,
    strides: Vec<[usize; N]>,
}

impl<const N: usize> Strided<N> {
    /// An iteration over `dims` (rank at most [`MAX_RANK`]) with the operands' strides.
    pub fn new(dims: &[usize], strides: &[[usize; N]]) -> Strided<N> {
        if dims.contains(&0) {
            return Strided {
                dims: Vec::new(),
                strides: Vec::new(),
            };
        }
        let mut d: Vec<usize> = Vec::new();
        let mut s: Vec<[usize; N]> = Vec::new();
        for (&dim, &st) in dims.iter().zip(strides) {
            if dim == 1 {
                continue;
            }
            match (d.last_mut(), s.last()) {
                (Some(ld), Some(ls)) if (0..N).all(|o| ls[o] == st[o] * dim) => {
                    *ld *= dim;
                    *s.last_mut().expect("same length") = st;
                }
                _ => {
                    d.push(dim);
                    s.push(st);
                }
            }
        }
        if d.is_empty() {
            d.push(1);
            s.push([0; N]);
        }
        Strided {
            dims: d,
            strides: s,
        }
    }

    /// Elements of the output.
    pub fn len(&self) -> usize {
        if self.dims.is_empty() {
            0
        } else {
            self.dims.iter().product()
        }
    }

    /// Calls `f(out_offset, operand_offsets, inner_len, inner_strides)` for each run of the
    /// innermost dimension, in output order. Always inlined, so that the caller's loops are
    /// compiled for the caller's vector width.
    #[inline(always)]
    pub fn for_each_row(&self, f: impl FnMut(usize, [usize; N], usize, [usize; N])) {
        self.for_each_row_in(0..self.len(), f)
    }

    /// [`Self::for_each_row`] over the output elements `range` only (a part of the output
    /// for one thread): its first and last runs may be parts of rows.
    #[inline(always)]
    pub fn for_each_row_in(
        &self,
        range: std::ops::Range<usize>,
        mut f: impl FnMut(usize, [usize; N], usize, [usize; N]),
    ) {
        let Some((&inner, outer)) = self.dims.split_last() else {
            return;
        };
        let end = range.end.min(self.len());
        if range.start >= end {
            return;
        }
        let inner_strides = self.strides[outer.len()];
        // The odometer over the outer dimensions, set to the first run's row.
        let mut index = [0usize; MAX_RANK];
        let mut offsets = [0usize; N];
        let mut rest = range.start / inner;
        for d in (0..outer.len()).rev() {
            index[d] = rest % outer[d];
            rest /= outer[d];
            for (o, off) in offsets.iter_mut().enumerate() {
                *off += index[d] * self.strides[d][o];
            }
        }
        let (mut at, mut skip) = (range.start, range.start % inner);
        while at < end {
            let len = (inner - skip).min(end - at);
            let mut first = offsets;
            for (o, off) in first.iter_mut().enumerate() {
                *off += skip * inner_strides[o];
            }
            f(at, first, len, inner_strides);
            (at, skip) = (at + len, 0);
            // Advance the odometer over the outer dimensions.
            for d in (0..outer.len()).rev() {
                index[d] += 1;
                for (o, off) in offsets.iter_mut().enumerate() {
                    *off += self.strides[d][o];
                }
                if index[d] < outer[d] {
                    break;
                }
                for (o, off) in offsets.iter_mut().enumerate() {
                    *off -= self.strides[d][o] * outer[d];
                }
                index[d] = 0;
            }
        }
    }
}

/// Transpose: a strided gather into a contiguous output.
#[derive(Clone, Debug)]
pub(crate) struct TransposeOp {
    pub x: Src,
    walk: Strided<1>,
}

impl TransposeOp {
    pub fn new(x: Src, in_shape: &[usize], perm: &[usize]) -> TransposeOp {
        let mut in_strides = vec![0; in_shape.len()];
        let mut step = 1;
        for (s, &d) in in_strides.iter_mut().zip(in_shape).rev() {
            *s = step;
            step *= d;
        }
        let dims: Vec<usize> = perm.iter().map(|&p| in_shape[p]).collect();
        let strides: Vec<[usize; 1]> = perm.iter().map(|&p| [in_strides[p]]).collect();
        TransposeOp {
            x,
            walk: Strided::new(&dims, &strides),
        }
    }

    /// Split among the threads (by output elements, cutting through rows) when large.
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], pool: &Pool) {
        let x = sources.get(self.x);
        let n = self.walk.len().min(out.len());
        split_out(pool, &mut out[..n], 1, |start, part| {
            self.run_part(x, start, part)
        });
    }

    /// The transpose of elements of any size: `x` is the data behind `self.x`.
    pub fn run_t<T: Copy>(&self, x: &[T], out: &mut [T]) {
        self.run_part(x, 0, out)
    }

    /// The output elements `start..start + out.len()`.
    fn run_part<T: Copy>(&self, x: &[T], start: usize, out: &mut [T]) {
        let range = start..start + out.len();
        // Gathered rows go in groups, copied a tile of columns at a time (see `tiles`);
        // every row of the walk has the same stride.
        let mut group = [(0usize, 0usize, 0usize); TILE];
        let (mut held, mut stride) = (0, 0);
        self.walk.for_each_row_in(range, |o, [i], len, [s]| {
            if s == 1 {
                out[o - start..o - start + len].copy_from_slice(&x[i..i + len]);
                return;
            }
            if held == TILE {
                tiles(x, &group, s, start, out);
                held = 0;
            }
            group[held] = (o, i, len);
            (held, stride) = (held + 1, s);
        });
        tiles(x, &group[..held], stride, start, out);
    }
}

/// Rows and columns of a transpose's tile.
const TILE: usize = 16;

/// Gathers rows `(out_offset, in_offset, len)` with input stride `s`, a tile of `TILE`
/// columns of every row at a time. Row by row, a row of a transpose with a power-of-two
/// stride read one value from each of as many cache lines as it was long, and those lines
/// fall into a few sets of the L1: they were evicted before the next row read their next
/// values ([128, 256] -> [256, 128]: 45 us). A tile reads `TILE` lines, each for up to
/// `TILE` rows. Each row's reach is checked once, so the copies have no bounds check per
/// element.
fn tiles<T: Copy>(x: &[T], rows: &[(usize, usize, usize)], s: usize, start: usize, out: &mut [T]) {
    let mut width = 0;
    for &(o, i, len) in rows {
        let Some(last) = len.checked_sub(1) else {
            continue;
        };
        assert!(i + last * s < x.len(), "transpose reads past its input");
        assert!(
            o >= start && o - start + len <= out.len(),
            "transpose writes past its output"
        );
        width = width.max(len);
    }
    for j0 in (0..width).step_by(TILE) {
        for &(o, i, len) in rows {
            let (src, dst) = (x[i..].as_ptr(), out[o - start..].as_mut_ptr());
            for j in j0..(j0 + TILE).min(len) {
                // SAFETY: `j < len`: inside the input and the output (checked above).
                unsafe { *dst.add(j) = *src.add(j * s) };
            }
        }
    }
}

/// Concat: for each outer index, each input's contiguous chunk in turn.
#[derive(Clone, Debug)]
pub(crate) struct ConcatOp {
    outer: usize,
    /// Each input and the length of its chunk (its extent along the axis times the inner size).
    parts: Vec<(Src, usize)>,
}

impl ConcatOp {
    pub fn new(inputs: &[(Src, Vec<usize>)], axis: usize) -> ConcatOp {
        let outer = inputs
            .first()
            .map_or(0, |(_, s)| s[..axis].iter().product());
        let parts = inputs
            .iter()
            .map(|(src, s)| (*src, s[axis..].iter().product()))
            .collect();
        ConcatOp { outer, parts }
    }

    /// The f32 concatenation, split among the threads by outer rows (a channels-last
    /// Concat has a row per pixel: YOLO's joins move megabytes).
    pub fn run(&self, sources: &Sources<'_>, out: &mut [f32], pool: &Pool) {
        let row = self.row();
        let n = (self.outer * row).min(out.len());
        split_out(pool, &mut out[..n], row, |start, part| {
            self.rows(|s| sources.get(s), start / row.max(1), part)
        });
    }

    /// The number of outer rows, and each input with the length of its chunk in a row.
    pub fn parts(&self) -> (usize, &[(Src, usize)]) {
        (self.outer, &self.parts)
    }

    /// One outer row of the result: every part's chunk.
    pub fn row(&self) -> usize {
        self.parts.iter().map(|&(_, chunk)| chunk).sum()
    }

    /// The concatenation of elements of any size, `get` giving the data behind a source.
    pub fn run_t<'a, T: Copy + 'a>(&self, get: impl Fn(Src) -> &'a [T], out: &mut [T]) {
        self.rows(get, 0, out)
    }

    /// Outer rows `first..` into `out`, each the rows of the parts one after another; the
    /// parts' data looked up once, not once a row (a per-pixel lookup showed in profiles),
    /// when they are few enough to list on the stack.
    fn rows<'a, T: Copy + 'a>(&self, get: impl Fn(Src) -> &'a [T], first: usize, out: &mut [T]) {
        const LISTED: usize = 8;
        let row = self.row();
        if row == 0 {
            return;
        }
        let mut listed: [&[T]; LISTED] = [&[]; LISTED];
        let few = self.parts.len() <= LISTED;
        if few {
            for (l, &(src, _)) in listed.iter_mut().zip(&self.parts) {
                *l = get(src);
            }
        }
        let rows = self.outer.saturating_sub(first);
        for (r, dst) in out.chunks_exact_mut(row).take(rows).enumerate() {
            let o = first + r;
            let mut pos = 0;
            for (k, &(src, chunk)) in self.parts.iter().enumerate() {
                let x = if few { listed[k] } else { get(src) };
                dst[pos..pos + chunk].copy_from_slice(&x[o * chunk..(o + 1) * chunk]);
                pos += chunk;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{nchw_to_nhwc, nhwc_to_nchw, to_nchw, to_nchw_f32, to_nhwc, to_nhwc_f32, Strided};
    use crate::gemm::MicroKernel;
    use crate::pool::Pool;

    /// The tiled f32 conversions against the element-wise ones, on every kernel family
    /// and at 1 and 3 threads: channel counts below, at and past a tile, planes that
    /// leave every edge, batches (a part then spans images).
    #[test]
    fn tiled_f32_conversions_match_the_element_walk() {
        let pools = [Pool::new(1), Pool::new(3)];
        for kernel in MicroKernel::available() {
            for &(batch, c, plane) in &[
                (1, 8, 8),
                (2, 13, 70),
                (1, 64, 12544),
                (3, 17, 129),
                (2, 40, 1),
            ] {
                let n = batch * c * plane;
                let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
                for pool in &pools {
                    let (mut want, mut got) = (vec![0f32; n], vec![f32::NAN; n]);
                    to_nhwc(pool, &x, (batch, c, plane), &mut want);
                    to_nhwc_f32(pool, kernel.isa(), &x, (batch, c, plane), &mut got);
                    assert_eq!(got, want, "to NHWC {batch}x{c}x{plane} {}", kernel.name());
                    let mut got = vec![f32::NAN; n];
                    to_nchw(pool, &x, (batch, c, plane), &mut want);
                    to_nchw_f32(pool, kernel.isa(), &x, (batch, c, plane), &mut got);
                    assert_eq!(got, want, "to NCHW {batch}x{c}x{plane} {}", kernel.name());
                }
            }
        }
    }

    #[test]
    fn nhwc_to_nchw_in_parts_is_the_index_walk_and_undoes_nchw_to_nhwc() {
        // Channel counts below, at and past a tile, planes below and past one, batches.
        for &(batch, c, plane) in &[(1, 1, 5), (2, 3, 70), (1, 16, 64), (3, 17, 129), (2, 40, 1)] {
            let n = batch * c * plane;
            let nhwc: Vec<u16> = (0..n).map(|i| (i * 7 + 3) as u16).collect();
            let want: Vec<u32> = (0..n)
                .map(|k| {
                    let (b, ch, p) = (k / (c * plane), k / plane % c, k % plane);
                    nhwc[(b * plane + p) * c + ch] as u32 * 2
                })
                .collect();
            // Whole, and in parts cut at every channel plane (as the threads split it).
            for cut in 0..=batch * c {
                let mut got = vec![0u32; n];
                let (a, rest) = got.split_at_mut(cut * plane);
                nhwc_to_nchw(&nhwc, (c, plane), 0, a, |v| v as u32 * 2);
                nhwc_to_nchw(&nhwc, (c, plane), cut * plane, rest, |v| v as u32 * 2);
                assert_eq!(got, want, "{batch}x{c}x{plane} cut at plane {cut}");
            }
            let mut back = vec![0u16; n];
            let nchw: Vec<u16> = want.iter().map(|&v| (v / 2) as u16).collect();
            nchw_to_nhwc(&nchw, (c, plane), 0, &mut back, |v| v);
            assert_eq!(back, nhwc);
        }
    }

    /// Every run `for_each_row` visits, as (output offset, operand offsets) per element.
    fn elements(walk: &Strided<2>, range: std::ops::Range<usize>) -> Vec<(usize, [usize; 2])> {
        let mut got = Vec::new();
        walk.for_each_row_in(range, |o, [a, b], len, [sa, sb]| {
            got.extend((0..len).map(|j| (o + j, [a + j * sa, b + j * sb])));
        });
        got
    }

    #[test]
    fn a_part_of_the_output_walks_the_same_elements_as_the_whole() {
        // A broadcast over three dimensions (one operand a row, the other a column), a
        // plain contiguous walk, and a scalar.
        let walks = [
            Strided::new(&[2, 3, 5], &[[15, 0], [5, 1], [1, 0]]),
            Strided::new(&[4, 6], &[[6, 6], [1, 1]]),
            Strided::new(&[1], &[[0, 0]]),
        ];
        for walk in &walks {
            let n = walk.len();
            let whole = elements(walk, 0..n);
            assert_eq!(whole.len(), n);
            assert!(whole.iter().enumerate().all(|(i, e)| e.0 == i));
            for cut in 0..=n {
                let mut parts = elements(walk, 0..cut);
                parts.extend(elements(walk, cut..n));
                assert_eq!(parts, whole, "cut at {cut}");
            }
            for start in 0..n {
                for end in start..=n {
                    assert_eq!(elements(walk, start..end), whole[start..end]);
                }
            }
        }
    }
}
