// Resize by a sampling table made at compile time. Each axis has, per output index, a
// header (first tap word, tap count) and its taps (element offset along the input,
// f32 weight bits); a count of 0xffffffff marks an index outside the input
// (tf_crop_and_resize), whose output is the extrapolation value. An interpolated output
// is the sum, over every combination of one tap per axis, of the product of the taps'
// weights times the input element at the sum of their offsets: the separable sum,
// summed at once, with one rounding per multiply-add. Nearest (one tap per axis of
// weight 1) moves the element's words unchanged, so it serves any 32- or 64-bit dtype.
//
// Bindings: 0 x (read, words), 1 table (read, u32), 3 y (read_write, words),
//           4 params (u32).
// Params: [0] n (outputs), [1] words per element to move (1 or 2; 0: interpolate f32),
//         [2] extrapolation value (f32 bits), [3..9] output shape (leading 1s),
//         [9..15] each axis's first header (leading axes: a header of one unit tap).
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read> tab: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

const OUTSIDE: u32 = 0xffffffffu;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    var first: array<u32, 6>;
    var count: array<u32, 6>;
    var rest = i;
    var outside = false;
    var empty = false;
    for (var d = 5i; d >= 0i; d--) {
        let extent = p[3 + d];
        let o = rest % extent;
        rest = rest / extent;
        let h = p[9 + d] + 2u * o;
        first[d] = tab[h];
        count[d] = tab[h + 1u];
        if (count[d] == OUTSIDE) { outside = true; }
        if (count[d] == 0u) { empty = true; }
    }
    let words = p[1];
    if (outside) {
        y[i] = p[2];
        return;
    }
    if (words != 0u) {
        var src = 0u;
        for (var d = 0; d < 6; d++) { src += tab[first[d]]; }
        for (var k = 0u; k < words; k++) { y[i * words + k] = x[src * words + k]; }
        return;
    }
    // An axis whose taps all weigh 0 (exclude_outside past the input) sums nothing.
    var acc = 0.0;
    if (!empty) {
        var t: array<u32, 6>;
        loop {
            var w = 1.0;
            var src = 0u;
            for (var d = 0; d < 6; d++) {
                let e = first[d] + 2u * t[d];
                src += tab[e];
                w *= bitcast<f32>(tab[e + 1u]);
            }
            acc = fma(w, bitcast<f32>(x[src]), acc);
            // The next combination, the last axis fastest.
            var d = 5;
            loop {
                if (d < 0) { break; }
                t[d] += 1u;
                if (t[d] < count[d]) { break; }
                t[d] = 0u;
                d -= 1;
            }
            if (d < 0) { break; }
        }
    }
    y[i] = bitcast<u32>(acc);
}
