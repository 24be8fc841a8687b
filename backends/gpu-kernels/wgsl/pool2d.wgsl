// 2-D max or average pooling over [N*C, H, W] planes (1-D pooling runs with H = KH = 1;
// GlobalAveragePool is a window the size of the plane). One invocation per output.
//
// Bindings: 0 x (read), 3 y (read_write), 4 params (u32).
// Params: [0] n (outputs), [1] H, [2] W, [3] OH, [4] OW, [5] KH, [6] KW, [7] stride h,
//         [8] stride w, [9] dilation h, [10] dilation w, [11] pad top, [12] pad left,
//         [13] mode (0 max, 1 average), [14] count_include_pad.
// Override: WG, the workgroup size. Dispatch: ceil(n / WG) workgroups over x, then y.
//
// Max: starts from the window's first in-bounds element and takes each greater one, so
// a NaN counts only when it comes first; a window wholly in padding gives -inf. Average: the divisor counts the window
// positions inside the input, or all KH*KW with count_include_pad.

// Element type: T (f32; the f16 variant has f16, see the README); loads widen to f32,
// the one store rounds.

alias T = f32;

@group(0) @binding(0) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    if (i >= p[0]) { return; }
    let H = p[1]; let W = p[2]; let OH = p[3]; let OW = p[4];
    let ow = i % OW;
    let oh = (i / OW) % OH;
    let plane = i / (OW * OH);
    let base = plane * H * W;
    let is_max = p[13] == 0u;
    var acc = select(0.0, -bitcast<f32>(0x7f800000u), is_max);
    var count = 0u;
    for (var kh = 0u; kh < p[5]; kh++) {
        let ih = oh * p[7] + kh * p[9] - p[11];
        if (oh * p[7] + kh * p[9] < p[11] || ih >= H) { continue; }
        for (var kw = 0u; kw < p[6]; kw++) {
            let iw = ow * p[8] + kw * p[10] - p[12];
            if (ow * p[8] + kw * p[10] < p[12] || iw >= W) { continue; }
            let v = f32(x[base + ih * W + iw]);
            if (is_max) {
                // The first in-bounds element, then any greater one: a NaN wins only
                // as the first element (the reference's and ONNX Runtime's rule).
                // NaN is tested on the bits: without SignedZeroInfNanPreserve (which
                // naga does not emit) a driver may assume no NaN in float compares, and
                // lavapipe's did here.
                if (count == 0u || (!is_nan(v) && !is_nan(acc) && v > acc)) { acc = v; }
            } else {
                acc += v;
            }
            count += 1u;
        }
    }
    if (!is_max) {
        let divisor = select(count, p[5] * p[6], p[14] != 0u);
        acc = acc / f32(divisor);
    }
    y[i] = T(acc);
}

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}
