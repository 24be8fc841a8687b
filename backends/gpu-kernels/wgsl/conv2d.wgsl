// requires: activation.wgsl
//
// Direct 2-D convolution (cross-correlation) with groups, so depthwise (group = C) is the
// same kernel; 1-D convolution runs with H = KH = 1. One invocation per output element:
// y[n, m, oh, ow] = activate(bias[m] + sum over c in m's group, kh, kw of
//                   x[n, c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] * w[m, c', kh, kw]).
//
// Bindings: 0 x (read), 1 w (read, [M, C/group, KH, KW]), 2 bias (read; unused when
//           has_bias = 0), 3 y (read_write), 4 params (u32).
// Params: [0] n (outputs), [1] C, [2] H, [3] W, [4] M, [5] OH, [6] OW, [7] KH, [8] KW,
//         [9] stride h, [10] stride w, [11] dilation h, [12] dilation w, [13] pad top,
//         [14] pad left, [15] group, [16] has_bias, [17] activation code,
//         [18] activation a, [19] activation b.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.

// Element type: T (f32; the f16 variant has f16 for x, w, bias and y, see the README);
// loads widen to f32, the sum and the epilogue stay in f32, the one store rounds.

alias T = f32;

@group(0) @binding(0) var<storage, read> x: array<T>;
@group(0) @binding(1) var<storage, read> w: array<T>;
@group(0) @binding(2) var<storage, read> bias: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    let C = p[1]; let H = p[2]; let W = p[3]; let M = p[4];
    let OH = p[5]; let OW = p[6]; let KH = p[7]; let KW = p[8];
    let ow = i % OW;
    let oh = (i / OW) % OH;
    let m = (i / (OW * OH)) % M;
    let n = i / (OW * OH * M);
    let cpg = C / p[15];
    let mpg = M / p[15];
    let c0 = (m / mpg) * cpg;
    var acc = 0.0;
    for (var c = 0u; c < cpg; c++) {
        let x_base = (n * C + c0 + c) * H * W;
        let w_base = (m * cpg + c) * KH * KW;
        for (var kh = 0u; kh < KH; kh++) {
            // Unsigned wrap-around makes rows above the input (negative) fail ih < H.
            let ih = oh * p[9] + kh * p[11] - p[13];
            if (oh * p[9] + kh * p[11] < p[13] || ih >= H) { continue; }
            for (var kw = 0u; kw < KW; kw++) {
                let iw = ow * p[10] + kw * p[12] - p[14];
                if (ow * p[10] + kw * p[12] < p[14] || iw >= W) { continue; }
                acc += f32(x[x_base + ih * W + iw]) * f32(w[w_base + kh * KW + kw]);
            }
        }
    }
    if (p[16] != 0u) { acc += f32(bias[m]); }
    y[i] = T(activate(acc, p[17], bitcast<f32>(p[18]), bitcast<f32>(p[19])));
}
