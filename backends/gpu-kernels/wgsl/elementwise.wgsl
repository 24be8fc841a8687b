// requires: activation.wgsl
//
// y[i] = activate(op(a[ia], b[ib])) over a row-major output of up to 6 dimensions, with
// numpy broadcasting expressed as strides (0 on a broadcast dimension).
//
// Bindings: 0 a (read), 1 b (read; unused when op = 0), 3 y (read_write), 4 params (u32).
// Params: [0] n, [1] op (0 a only, 1 add, 2 sub, 3 mul, 4 div, 5 pow, 6 a * b[ib] +
//         b[ib + 1]), [2] activation code,
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
        case 5u: { v = pow_onnx(x, f32(b[ib])); }
        // BatchNormalization folded to x * s + t, b holding (s, t) pairs.
        case 6u: { v = x * f32(b[ib]) + f32(b[ib + 1u]); }
        default: {}
    }
    y[i] = T(activate(v, p[2], bitcast<f32>(p[3]), bitcast<f32>(p[4])));
}

// Pow as C's pow (the reference's): the special cases are decided on the bits, so that a
// driver folding float compares as if no NaN or infinity existed, or flushing
// subnormals, cannot change them; a negative base takes an integral exponent's parity
// for its sign, and a finite negative base gives NaN for any other exponent (-0 and
// -inf give a zero or an infinity, as +0 and +inf do). The magnitude is
// exp2(y log2|x|), log2 of a subnormal |x| from its bits (see activation.wgsl): its
// error grows with |y log2|x||, about 2^-24 relative for each unit of it.
fn pow_onnx(x: f32, y: f32) -> f32 {
    let xb = bitcast<u32>(x);
    let yb = bitcast<u32>(y);
    let xa = xb & 0x7fffffffu;
    let ya = yb & 0x7fffffffu;
    let one = bitcast<f32>(0x3f800000u | (xb & 0u));
    let infinity = bitcast<f32>(0x7f800000u | (xb & 0u));
    if (ya == 0u || xb == 0x3f800000u) {
        return one; // x^0 = 1 and 1^y = 1, NaN or not
    }
    if (xa > 0x7f800000u) {
        return x;
    }
    if (ya > 0x7f800000u) {
        return y;
    }
    let y_neg = yb != ya;
    if (ya == 0x7f800000u) {
        // y = +-infinity: 1 at |x| = 1, else 0 or infinity as |x| and y make it.
        if (xa == 0x3f800000u) {
            return one;
        }
        return select(0.0, infinity, (xa > 0x3f800000u) != y_neg);
    }
    // Whether y is an integer, and an odd one: |y| >= 2^24 is even, below 1 not one.
    let e = ya >> 23u;
    var integral = e >= 150u;
    var odd = false;
    if (e >= 127u && e < 150u) {
        let m = (ya & 0x7fffffu) | 0x800000u;
        let frac = 150u - e;
        integral = (m & ((1u << frac) - 1u)) == 0u;
        odd = integral && ((m >> frac) & 1u) == 1u;
    } else if (e == 150u) {
        odd = (ya & 1u) == 1u;
    }
    let x_neg = xb != xa;
    if (x_neg && !integral && xa != 0u && xa != 0x7f800000u) {
        return bitcast<f32>(xb | 0x7fc00000u); // NaN: a finite negative base
    }
    var r = 0.0;
    if (xa == 0u) {
        r = select(0.0, infinity, y_neg);
    } else if (xa == 0x7f800000u) {
        r = select(infinity, 0.0, y_neg);
    } else {
        var l = 0.0;
        if (xa < 0x00800000u) {
            l = log2(f32(xa)) - 149.0;
        } else {
            l = log2(bitcast<f32>(xa));
        }
        let t = y * l;
        if (t >= 128.0) {
            r = infinity;
        } else if (t > -150.0) {
            r = exp2(t);
        }
    }
    return select(r, -r, x_neg && odd);
}
