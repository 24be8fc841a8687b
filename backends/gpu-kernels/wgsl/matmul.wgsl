// requires: activation.wgsl
//
// Batched, tiled GEMM: y[z, m, n] = activate(alpha * sum_k A[z, m, k] B[z, k, n]
//                                             + beta * C[z, m, n]).
// Each workgroup computes a TILE x TILE block of y, staging TILE x TILE blocks of A and B
// in workgroup shared memory. Operands are addressed by strides, so transposed operands
// (Gemm's transA/transB) and broadcast batches (stride 0) need no copies.
//
// Bindings: 0 A (read), 1 B (read), 2 C (read; unused when has_c = 0), 3 y (read_write),
//           4 params (u32).
// Params: [0] M, [1] N, [2] K, [3..6] A batch/row/col strides, [6..9] B batch/row/col
//         strides, [9] has_c, [10..13] C batch/row/col strides, [13] alpha (f32 bits),
//         [14] beta (f32 bits), [15] activation code, [16] activation a, [17] activation b.
// Override: TILE (the workgroup is TILE x TILE). Dispatch: (ceil(N / TILE),
//           ceil(M / TILE), batch).

// Element type: T (f32; the f16 variant has f16, see the README). Tiles and the
// accumulator stay f32: each element is widened on load, the result rounded once.

alias T = f32;

@group(0) @binding(0) var<storage, read> A: array<T>;
@group(0) @binding(1) var<storage, read> B: array<T>;
@group(0) @binding(2) var<storage, read> C: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override TILE: u32 = 16u;

var<workgroup> ta: array<f32, TILE * TILE>;
var<workgroup> tb: array<f32, TILE * TILE>;

@compute @workgroup_size(TILE, TILE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let M = p[0];
    let N = p[1];
    let K = p[2];
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    let z = wid.z;
    let a_base = z * p[3];
    let b_base = z * p[6];
    var acc = 0.0;
    let tiles = (K + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t++) {
        let ka = t * TILE + lid.x;
        var va = 0.0;
        if (row < M && ka < K) { va = f32(A[a_base + row * p[4] + ka * p[5]]); }
        ta[lid.y * TILE + lid.x] = va;
        let kb = t * TILE + lid.y;
        var vb = 0.0;
        if (kb < K && col < N) { vb = f32(B[b_base + kb * p[7] + col * p[8]]); }
        tb[lid.y * TILE + lid.x] = vb;
        workgroupBarrier();
        for (var k = 0u; k < TILE; k++) {
            acc += ta[lid.y * TILE + k] * tb[k * TILE + lid.x];
        }
        workgroupBarrier();
    }
    if (row >= M || col >= N) { return; }
    var v = bitcast<f32>(p[13]) * acc;
    if (p[9] != 0u) {
        v += bitcast<f32>(p[14]) * f32(C[z * p[10] + row * p[11] + col * p[12]]);
    }
    y[(z * M + row) * N + col] = T(activate(v, p[15], bitcast<f32>(p[16]), bitcast<f32>(p[17])));
}
