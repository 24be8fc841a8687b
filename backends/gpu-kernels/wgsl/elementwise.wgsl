// requires: activation.wgsl
//
// y[i] = activate(op(a[ia], b[ib])) over a row-major output of up to 6 dimensions, with
// numpy broadcasting expressed as strides (0 on a broadcast dimension).
//
// Bindings: 0 a (read), 1 b (read; unused when op = 0), 3 y (read_write), 4 params (u32).
// Params: [0] n, [1] op (0 a only, 1 add, 2 sub, 3 mul, 4 div), [2] activation code,
//         [3] activation a (f32 bits), [4] activation b (f32 bits),
//         [5..11] output shape (leading 1s), [11..17] a strides, [17..23] b strides.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.
// Element type: T (f32; the f16 variant has f16, see the README). The arithmetic is f32
// either way: each element is widened on load and rounded once on store.

alias T = f32;

@group(0) @binding(0) var<storage, read> a: array<T>;
@group(0) @binding(1) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    var rest = i;
    var ia = 0u;
    var ib = 0u;
    for (var d = 5i; d >= 0i; d--) {
        let extent = p[5 + d];
        let idx = rest % extent;
        rest = rest / extent;
        ia += idx * p[11 + d];
        ib += idx * p[17 + d];
    }
    let x = f32(a[ia]);
    var v = x;
    switch p[1] {
        case 1u: { v = x + f32(b[ib]); }
        case 2u: { v = x - f32(b[ib]); }
        case 3u: { v = x * f32(b[ib]); }
        case 4u: { v = x / f32(b[ib]); }
        default: {}
    }
    y[i] = T(activate(v, p[2], bitcast<f32>(p[3]), bitcast<f32>(p[4])));
}
