// Resize by a sampling table made at compile time. Each axis has, per output index, a
// header (first tap word, tap count) and its taps (element offset along the input,
// f32 weight bits); a count of 0xffffffff marks an index outside the input
// (tf_crop_and_resize), whose output is the extrapolation value. An interpolated output
// is the sum, over every combination of one tap per axis, of the product of the taps'
// weights times the input element at the sum of their offsets: the separable sum,
// summed at once, with one rounding per multiply-add (f16 elements are widened to f32
// and the sum rounded once). Nearest (one tap per axis of weight 1) moves the element's
// bits unchanged, so it serves every dtype of 1, 2, 4 or 8 bytes.
//
// Elements of 1 or 2 bytes are packed into words (low bytes first); WGSL has no
// narrower stores, so such an output is written a whole word (2 or 4 elements) per
// invocation, past its last element with zeros (the binding is rounded up to words).
//
// Bindings: 0 x (read, words), 1 table (read, u32), 3 y (read_write, words),
//           4 params (u32).
// Params: [0] n (invocations: elements, or words of packed ones), [1] kind (0
//         interpolate f32, 1 move one word, 2 move two words, 3 move packed elements,
//         4 interpolate packed f16), [2] extrapolation value (f32 bits, or f16 bits in
//         the low half for kind 4), [3..9] output shape (leading 1s), [9..15] each
//         axis's first header (leading axes: a header of one unit tap), [15] element
//         bytes (1 or 2, kinds 3 and 4), [16] output elements.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read> tab: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

const OUTSIDE: u32 = 0xffffffffu;

// Each axis's taps for output element `e`, in `first` and `count`; returns 1 when `e`
// lies outside the input on some axis, 2 when an axis has no taps (all weighed 0 by
// exclude_outside), else 0.
fn locate(e: u32, first: ptr<function, array<u32, 6>>,
          count: ptr<function, array<u32, 6>>) -> u32 {
    var rest = e;
    var what = 0u;
    for (var d = 5i; d >= 0i; d--) {
        let extent = p[3 + d];
        let o = rest % extent;
        rest = rest / extent;
        let h = p[9 + d] + 2u * o;
        (*first)[d] = tab[h];
        (*count)[d] = tab[h + 1u];
        if ((*count)[d] == OUTSIDE) {
            what = 1u;
        } else if ((*count)[d] == 0u && what == 0u) {
            what = 2u;
        }
    }
    return what;
}

// Input element `k` as f32: a word's bits (kind 0) or a packed f16.
fn load(k: u32, half: bool) -> f32 {
    if (half) {
        return widen((x[k / 2u] >> (16u * (k % 2u))) & 0xffffu);
    }
    return bitcast<f32>(x[k]);
}

// The f16 with bits `h` as f32, exactly. Written on the bits, since WGSL's
// unpack2x16float needs a capability naga's SPIR-V validation does not grant here.
fn widen(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        // Subnormal: m * 2^-24, exact in f32.
        let v = f32(m) * 5.9604645e-8;
        return bitcast<f32>(bitcast<u32>(v) | s);
    }
    if (e == 31u) {
        return bitcast<f32>(s | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}

// `f` rounded to the nearest f16 (ties to even), as its bits; overflow gives infinity,
// NaN a quiet NaN. On the bits, so the rounding is the same on every driver.
fn narrow(f: f32) -> u32 {
    let b = bitcast<u32>(f);
    let s = (b >> 16u) & 0x8000u;
    let e = i32((b >> 23u) & 0xffu);
    let m = b & 0x7fffffu;
    if (e == 255i) {
        return s | 0x7c00u | select(0u, 0x200u | (m >> 13u), m != 0u);
    }
    let he = e - 112i;
    if (he >= 31i) { return s | 0x7c00u; }
    if (he <= 0i) {
        // Subnormal (or zero): (m | 2^23) * 2^(e - 150) in units of 2^-24.
        if (he < -10i) { return s; }
        let full = m | 0x800000u;
        let shift = u32(14i - he);
        let r = full >> shift;
        let rem = full & ((1u << shift) - 1u);
        let halfway = 1u << (shift - 1u);
        var out = r;
        if (rem > halfway || (rem == halfway && (r & 1u) == 1u)) { out += 1u; }
        return s | out;
    }
    // A carry out of the mantissa steps the exponent, up to infinity: both right.
    var out = (u32(he) << 10u) | (m >> 13u);
    let rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (out & 1u) == 1u)) { out += 1u; }
    return s | out;
}

// The interpolated value of the output whose taps are `first` and `count`.
fn interpolate(first: array<u32, 6>, count: array<u32, 6>, half: bool) -> f32 {
    var acc = 0.0;
    var t: array<u32, 6>;
    loop {
        var w = 1.0;
        var src = 0u;
        for (var d = 0; d < 6; d++) {
            let e = first[d] + 2u * t[d];
            src += tab[e];
            w *= bitcast<f32>(tab[e + 1u]);
        }
        acc = fma(w, load(src, half), acc);
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
    return acc;
}

// The input element nearest uses: the sum of each axis's one tap.
fn nearest(first: array<u32, 6>) -> u32 {
    var src = 0u;
    for (var d = 0; d < 6; d++) { src += tab[first[d]]; }
    return src;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    let kind = p[1];
    var first: array<u32, 6>;
    var count: array<u32, 6>;
    if (kind <= 2u) {
        let what = locate(i, &first, &count);
        if (what == 1u) {
            y[i] = p[2];
        } else if (kind == 0u) {
            var v = 0.0;
            if (what == 0u) { v = interpolate(first, count, false); }
            y[i] = bitcast<u32>(v);
        } else {
            let src = nearest(first);
            for (var k = 0u; k < kind; k++) { y[i * kind + k] = x[src * kind + k]; }
        }
        return;
    }
    // Packed elements: this invocation writes word i, elements i * per .. i * per + per.
    let size = p[15];
    let per = 4u / size;
    let bits = 8u * size;
    let mask = (1u << bits) - 1u;
    var word = 0u;
    for (var j = 0u; j < per; j++) {
        let e = i * per + j;
        if (e >= p[16]) { break; }
        let what = locate(e, &first, &count);
        var v = 0u;
        if (what == 1u) {
            v = p[2] & mask;
        } else if (kind == 4u) {
            var f = 0.0;
            if (what == 0u) { f = interpolate(first, count, true); }
            v = narrow(f);
        } else {
            let src = nearest(first);
            v = (x[src / per] >> (bits * (src % per))) & mask;
        }
        word |= v << (bits * j);
    }
    y[i] = word;
}
