// Pad (and crop, with negative amounts) in the modes constant, reflect, edge and wrap.
// Negative amounts crop first; the padding then extends the kept part: for every output
// index, the index into the kept part along each dimension is the output index less the
// (non-negative) padding before it, and outside the kept part it becomes the constant
// (constant), the mirror image without repeating the edge (reflect, folded as often as
// the pad needs), the nearest edge (edge) or the index modulo the extent (wrap).
//
// Bindings: 0 x (read), 3 y (read_write), 4 params (u32).
// Params: [0] n, [1] mode (0 constant, 1 reflect, 2 edge, 3 wrap), [2] constant (f32
//         bits), [3..9] output shape (leading 1s), [9..15] kept extents (leading 1s),
//         [15..21] padding before (leading 0s), [21..27] input strides, [27] the offset
//         of the first kept element.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    let mode = p[1];
    var rest = i;
    var src = p[27];
    var outside = false;
    for (var d = 5i; d >= 0i; d--) {
        let extent = p[3 + d];
        let idx = rest % extent;
        rest = rest / extent;
        let dim = i32(p[9 + d]);
        var c = i32(idx) - i32(p[15 + d]);
        if (c < 0i || c >= dim) {
            if (mode == 0u) {
                outside = true;
            } else if (mode == 1u) {
                // Reflection has period 2 (dim - 1); an extent of 1 reflects onto itself.
                if (dim == 1i) {
                    c = 0i;
                } else {
                    let period = 2i * (dim - 1i);
                    c = c % period;
                    if (c < 0i) { c += period; }
                    if (c >= dim) { c = period - c; }
                }
            } else if (mode == 2u) {
                c = clamp(c, 0i, dim - 1i);
            } else {
                c = c % dim;
                if (c < 0i) { c += dim; }
            }
        }
        src += u32(max(c, 0i)) * p[21 + d];
    }
    if (outside) {
        y[i] = bitcast<f32>(p[2]);
    } else {
        y[i] = x[src];
    }
}
