// Strided copy: for every index of a row-major "copy shape" of up to 6 dimensions,
// dst[dst_off + idx . dst_strides] = src[src_off + idx . src_strides]. Transpose, Concat
// (one dispatch per input), Split (one per output), Slice, Reshape and Flatten are all this
// kernel. A stride may be negative (Slice's negative steps), as its u32 two's complement:
// u32 arithmetic wraps, so the sum still lands on the element.
//
// Bindings: 0 src (read), 3 dst (read_write), 4 params (u32).
// Params: [0] n, [1] src offset, [2] dst offset, [3..9] copy shape (leading 1s),
//         [9..15] src strides, [15..21] dst strides (all in elements).
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.
// Element type: T (f32; the f16 variant has f16, see the README). Elements are moved,
// never computed on, so any 4- or 2-byte type copies bit for bit.

alias T = f32;

@group(0) @binding(0) var<storage, read> src: array<T>;
@group(0) @binding(3) var<storage, read_write> dst: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    var rest = i;
    var s = p[1];
    var t = p[2];
    for (var d = 5i; d >= 0i; d--) {
        let extent = p[3 + d];
        let idx = rest % extent;
        rest = rest / extent;
        s += idx * p[9 + d];
        t += idx * p[15 + d];
    }
    dst[t] = src[s];
}
