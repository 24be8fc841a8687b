// Gather along one axis: y[outer, j, inner] = x[outer, indices[j], inner], where the
// output is viewed as (outer, the indices' elements flattened, inner) and x as (outer,
// dim, inner).
//
// Elements are moved as 32-bit words, never computed on: `W` words an element (1 for
// f32 and i32, 2 for i64 held as low word, high word), so one kernel gathers each of
// those dtypes bit for bit. Indices are i32 or i64 (`IW` words); a negative one counts
// from the end. ONNX makes an index outside [-dim, dim) an error, which a kernel cannot
// raise: it is clamped into the axis, so a read never leaves the tensor.
//
// Bindings: 0 x (read), 1 indices (read), 3 y (read_write), 4 params (u32).
// Params: [0] n (output elements), [1] inner, [2] index count, [3] dim, [4] W, [5] IW.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read> indices: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    let inner = p[1];
    let count = p[2];
    let dim = i32(p[3]);
    let words = p[4];
    let within = i % inner;
    let rest = i / inner;
    let j = rest % count;
    let outer = rest / count;
    var k = 0i;
    if (p[5] == 1u) {
        k = bitcast<i32>(indices[j]);
    } else {
        // An i64 index: the low word, unless the high word says it is beyond i32.
        let lo = indices[2u * j];
        let hi = bitcast<i32>(indices[2u * j + 1u]);
        let fits = hi == (bitcast<i32>(lo) >> 31u);
        k = select(select(2147483647i, -2147483647i - 1i, hi < 0i), bitcast<i32>(lo), fits);
    }
    if (k < 0i) {
        k += dim;
    }
    let at = u32(clamp(k, 0i, dim - 1i));
    let src = (outer * u32(dim) + at) * inner + within;
    for (var w = 0u; w < words; w++) {
        y[i * words + w] = x[src * words + w];
    }
}
