// requires: activation.wgsl
//
// Transposed convolution with 1 to 3 spatial axes (fewer run with leading extents of 1),
// groups, strides, dilations and padding, as a gather: one invocation per output
// element sums, over the taps and then the input channels of its group, the input
// elements that tap carries onto it, with i * stride + tap * dilation - pad == o:
// y[n, m, o] = activate(bias[m] + sum over taps t, c of x[n, c, i] * w[c, m', t]),
// m' being m's index within its group. No atomics: the sum's order is fixed.
//
// Bindings: 0 x (read), 1 w (read, [C, M/group, KD, KH, KW]), 2 bias (read; unused when
//           has_bias = 0), 3 y (read_write), 4 params (u32).
// Params: [0] n (outputs), [1] C, [2] M, [3] group, [4..7] input D, H, W,
//         [7..10] output D, H, W, [10..13] kernel D, H, W, [13..16] strides,
//         [16..19] dilations, [19..22] padding before (i32 bits), [22] has_bias,
//         [23] activation code, [24] activation a, [25] activation b.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.

// Element type: T (f32; the f16 variant has f16, see the README); loads widen to f32,
// the sum is f32 and the one store rounds.

alias T = f32;

@group(0) @binding(0) var<storage, read> x: array<T>;
@group(0) @binding(1) var<storage, read> w: array<T>;
@group(0) @binding(2) var<storage, read> bias: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

// The input index that tap k carries onto output index o along axis a (0 D, 1 H, 2 W),
// or -1 when none does (not on the stride's grid, or outside the input).
fn source(o: u32, k: u32, a: u32) -> i32 {
    let v = i32(o) + bitcast<i32>(p[19u + a]) - i32(k * p[16u + a]);
    let s = i32(p[13u + a]);
    if (v < 0i || v % s != 0i) { return -1i; }
    let i = v / s;
    if (i >= i32(p[4u + a])) { return -1i; }
    return i;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    let C = p[1]; let M = p[2];
    let ID = p[4]; let IH = p[5]; let IW = p[6];
    let OD = p[7]; let OH = p[8]; let OW = p[9];
    let KD = p[10]; let KH = p[11]; let KW = p[12];
    let ow = i % OW;
    let oh = (i / OW) % OH;
    let od = (i / (OW * OH)) % OD;
    let m = (i / (OW * OH * OD)) % M;
    let n = i / (OW * OH * OD * M);
    let cpg = C / p[3];
    let mpg = M / p[3];
    let c0 = (m / mpg) * cpg;
    let ml = m % mpg;
    let in_size = ID * IH * IW;
    let taps = KD * KH * KW;
    var acc = 0.0;
    for (var kd = 0u; kd < KD; kd++) {
        let id = source(od, kd, 0u);
        if (id < 0i) { continue; }
        for (var kh = 0u; kh < KH; kh++) {
            let ih = source(oh, kh, 1u);
            if (ih < 0i) { continue; }
            for (var kw = 0u; kw < KW; kw++) {
                let iw = source(ow, kw, 2u);
                if (iw < 0i) { continue; }
                let at = (u32(id) * IH + u32(ih)) * IW + u32(iw);
                let tap = (kd * KH + kh) * KW + kw;
                for (var c = 0u; c < cpg; c++) {
                    let ci = c0 + c;
                    acc += f32(x[(n * C + ci) * in_size + at]) * f32(w[(ci * mpg + ml) * taps + tap]);
                }
            }
        }
    }
    if (p[22] != 0u) { acc += f32(bias[m]); }
    y[i] = T(activate(acc, p[23], bitcast<f32>(p[24]), bitcast<f32>(p[25])));
}
