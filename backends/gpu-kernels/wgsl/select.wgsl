// Where: out[i] = cond[ic] ? x[ix] : y[iy] over a row-major output of up to 6
// dimensions, with numpy broadcasting expressed as strides (0 on a broadcast dimension).
//
// The condition is bool, held one byte an element and read as a byte of a word. X, Y
// and the output are moved as 32-bit words, never computed on: `W` words an element
// (1 for f32 and i32, 2 for i64 held as low word, high word), so one kernel selects
// every dtype of those sizes bit for bit.
//
// Bindings: 0 cond (read), 1 x (read), 2 y (read), 3 out (read_write), 4 params (u32).
// Params: [0] n, [1] W, [2..8] output shape (leading 1s), [8..14] cond strides,
//         [14..20] x strides, [20..26] y strides, in elements.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.

@group(0) @binding(0) var<storage, read> cnd: array<u32>;
@group(0) @binding(1) var<storage, read> xs: array<u32>;
@group(0) @binding(2) var<storage, read> ys: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    var rest = i;
    var ic = 0u;
    var ix = 0u;
    var iy = 0u;
    for (var d = 5i; d >= 0i; d--) {
        let extent = p[2 + d];
        let idx = rest % extent;
        rest = rest / extent;
        ic += idx * p[8 + d];
        ix += idx * p[14 + d];
        iy += idx * p[20 + d];
    }
    let c = ((cnd[ic >> 2u] >> (8u * (ic & 3u))) & 0xffu) != 0u;
    let words = p[1];
    for (var k = 0u; k < words; k++) {
        dst[i * words + k] = select(ys[iy * words + k], xs[ix * words + k], c);
    }
}
