// LayerNormalization over the trailing D elements of each row:
// y = (x - mean) / sqrt(var + eps) * scale + bias, with scale and bias of D elements.
// One workgroup per row; mean and variance (two passes, for accuracy) are reduced in
// workgroup shared memory (WG must be a power of two).
//
// Bindings: 0 x (read), 1 scale (read), 2 bias (read; unused when has_bias = 0),
//           3 y (read_write), 4 params (u32), 5 mean (read_write; one per row),
//           6 inv_std_dev (read_write; one per row).
// Params: [0] rows, [1] D, [2] epsilon (f32 bits), [3] has_bias, [4] has_mean,
//         [5] has_inv_std_dev.
// Override: WG, the workgroup size. Dispatch: rows workgroups over x, then y.

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> scale: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;
@group(0) @binding(5) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> inv_out: array<f32>;

override WG: u32 = 64u;

var<workgroup> red: array<f32, WG>;

fn reduce_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) { red[lid] += red[lid + s]; }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wid.y * nwg.x + wid.x;
    if (r >= p[0]) { return; }
    let D = p[1];
    let base = r * D;
    // Sums are taken relative to the row's first element: for a row like 100 + small
    // values, x - shift is exact and the small deviations keep their f32 precision.
    let shift = x[base];
    var s = 0.0;
    for (var j = lid.x; j < D; j += WG) { s += x[base + j] - shift; }
    let centre = reduce_sum(lid.x, s) / f32(D);
    var q = 0.0;
    for (var j = lid.x; j < D; j += WG) {
        let d = (x[base + j] - shift) - centre;
        q += d * d;
    }
    let variance = reduce_sum(lid.x, q) / f32(D);
    let mean = shift + centre;
    let inv = 1.0 / sqrt(variance + bitcast<f32>(p[2]));
    if (lid.x == 0u && p[4] != 0u) { mean_out[r] = mean; }
    if (lid.x == 0u && p[5] != 0u) { inv_out[r] = inv; }
    for (var j = lid.x; j < D; j += WG) {
        var v = ((x[base + j] - shift) - centre) * inv * scale[j];
        if (p[3] != 0u) { v += bias[j]; }
        y[base + j] = v;
    }
}
