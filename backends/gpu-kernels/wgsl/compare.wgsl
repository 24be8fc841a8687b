// y[i] = op(a[ia], b[ib]) as a bool over a row-major output of up to 6 dimensions, with
// numpy broadcasting expressed as strides (0 on a broadcast dimension), as in
// elementwise.wgsl. Equal, Less, Greater, LessOrEqual and GreaterOrEqual.
//
// Bool tensors are held one byte an element, and WGSL has no byte stores: each
// invocation computes the four elements of one output word and stores the word whole
// (storing bytes into a shared word would race with the neighbouring invocations). The
// bytes past n in the last word are written as 0; they lie in the tensor's padding.
//
// Operands are read as 32-bit words: f32 by its bits, i32 as is, i64 as (low word, high
// word), bool as a byte of a word. f32 is compared on the bits, so NaN is unordered
// (every comparison false) and -0 equals +0 even where a driver folds float compares
// as if no NaN existed or flushes subnormals (see backends/vulkan/conformance-expectations.txt).
//
// Bindings: 0 a (read), 1 b (read), 3 y (read_write), 4 params (u32).
// Params: [0] n, [1] op (1 Equal, 2 Less, 3 Greater, 4 LessOrEqual, 5 GreaterOrEqual),
//         [2] operand type (0 f32, 1 i32, 2 i64, 3 bool),
//         [3..9] output shape (leading 1s), [9..15] a strides, [15..21] b strides, in
//         elements.
// Override: WG, the workgroup size. Dispatch: ceil(ceil(n / 4) / WG) workgroups over x,
// then y.

@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

fn is_nan(bits: u32) -> bool {
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

// An f32's bits as a u32 whose unsigned order is the floats' order, with -0 = +0.
fn key(bits: u32) -> u32 {
    if ((bits & 0x7fffffffu) == 0u) {
        return 0x80000000u;
    }
    if ((bits & 0x80000000u) != 0u) {
        return ~bits;
    }
    return bits | 0x80000000u;
}

fn order_u32(x: u32, z: u32) -> i32 {
    return select(select(0i, 1i, x > z), -1i, x < z);
}

// -1, 0 or 1 as a[ia] is below, equal to or above b[ib]; 2 when unordered (a NaN).
fn order(ia: u32, ib: u32) -> i32 {
    let t = p[2];
    var o = 0i;
    if (t == 0u) {
        let x = a[ia];
        let z = b[ib];
        if (is_nan(x) || is_nan(z)) {
            o = 2i;
        } else {
            o = order_u32(key(x), key(z));
        }
    } else if (t == 1u) {
        // Flipping the sign bit maps i32 order onto u32 order.
        o = order_u32(a[ia] ^ 0x80000000u, b[ib] ^ 0x80000000u);
    } else if (t == 2u) {
        // The high words compare signed; equal high words leave it to the low words.
        o = order_u32(a[2u * ia + 1u] ^ 0x80000000u, b[2u * ib + 1u] ^ 0x80000000u);
        if (o == 0i) {
            o = order_u32(a[2u * ia], b[2u * ib]);
        }
    } else {
        let x = (a[ia >> 2u] >> (8u * (ia & 3u))) & 0xffu;
        let z = (b[ib >> 2u] >> (8u * (ib & 3u))) & 0xffu;
        o = order_u32(min(x, 1u), min(z, 1u));
    }
    return o;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let w = (wid.y * nwg.x + wid.x) * WG + lid.x;
    let n = p[0];
    if (w >= (n + 3u) / 4u) { return; }
    var word = 0u;
    for (var k = 0u; k < 4u; k++) {
        let i = 4u * w + k;
        if (i >= n) { break; }
        var rest = i;
        var ia = 0u;
        var ib = 0u;
        for (var d = 5i; d >= 0i; d--) {
            let extent = p[3 + d];
            let idx = rest % extent;
            rest = rest / extent;
            ia += idx * p[9 + d];
            ib += idx * p[15 + d];
        }
        let o = order(ia, ib);
        var r = false;
        switch p[1] {
            case 1u: { r = o == 0i; }
            case 2u: { r = o == -1i; }
            case 3u: { r = o == 1i; }
            case 4u: { r = o == -1i || o == 0i; }
            default: { r = o == 1i || o == 0i; }
        }
        if (r) {
            word |= 1u << (8u * k);
        }
    }
    y[w] = word;
}
