//! The portable micro-kernel: plain Rust over fixed-size arrays, which LLVM keeps in
//! registers and vectorizes for the baseline target (SSE2 on x86-64).

pub(super) const MR: usize = 4;
pub(super) const NR: usize = 8;

/// # Safety
/// `a` must point to `kc * MR` readable floats, `b` to `kc * NR`, `tile` to `MR * NR`
/// writable ones.
pub(super) unsafe fn kernel(kc: usize, a: *const f32, b: *const f32, tile: *mut f32) {
    // SAFETY: the caller guarantees these lengths (see above).
    let (a, b, tile) = unsafe {
        (
            std::slice::from_raw_parts(a, kc * MR),
            std::slice::from_raw_parts(b, kc * NR),
            std::slice::from_raw_parts_mut(tile, MR * NR),
        )
    };
    let mut acc = [[0f32; NR]; MR];
    for (ak, bk) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for (row, &ai) in acc.iter_mut().zip(ak) {
            for (c, &bj) in row.iter_mut().zip(bk) {
                *c += ai * bj;
            }
        }
    }
    for (dst, row) in tile.chunks_exact_mut(NR).zip(&acc) {
        dst.copy_from_slice(row);
    }
}
