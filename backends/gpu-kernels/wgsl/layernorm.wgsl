// requires: rowreduce.wgsl
// LayerNormalization over the trailing D elements of each row:
// y = (x - mean) / sqrt(var + eps) * scale + bias, with scale and bias of D elements.
// One workgroup per row; mean and variance (two passes, for accuracy) are reduced across
// the workgroup (rowreduce.wgsl: in shared memory, WG a power of two; or with subgroup
// operations in the `_sg` variants).
//
// Bindings: 0 x (read), 1 scale (read), 2 bias (read; unused when has_bias = 0),
//           3 y (read_write), 4 params (u32), 5 mean (read_write; one per row),
//           6 inv_std_dev (read_write; one per row).
// Params: [0] rows, [1] D, [2] epsilon (f32 bits), [3] has_bias, [4] has_mean,
//         [5] has_inv_std_dev.
// Override: WG, the workgroup size. Dispatch: rows workgroups over x, then y.

// Element type: T (f32; the f16 variants have f16 for X, Scale, B and Y, see the
// README); loads widen to f32, the statistics and the arithmetic stay in f32, Y's store
// rounds.

alias T = f32;

@group(0) @binding(0) var<storage, read> x: array<T>;
@group(0) @binding(1) var<storage, read> scale: array<T>;
@group(0) @binding(2) var<storage, read> bias: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;
// Mean and InvStdDev are f32 whatever X is (the IR's shape rule, ONNX's stash_type).
@group(0) @binding(5) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> inv_out: array<f32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        lane: Lane) {
    let r = wid.y * nwg.x + wid.x;
    // Uniform across the workgroup, so the barriers below stay in uniform control flow.
    if (r >= p[0]) { return; }
    let D = p[1];
    let base = r * D;
    // Sums are taken relative to the row's first element: for a row like 100 + small
    // values, x - shift is exact and the small deviations keep their f32 precision.
    let shift = f32(x[base]);
    var s = 0.0;
    for (var j = lane.index; j < D; j += WG) { s += f32(x[base + j]) - shift; }
    let centre = group_sum(lane, s) / f32(D);
    var q = 0.0;
    for (var j = lane.index; j < D; j += WG) {
        let d = (f32(x[base + j]) - shift) - centre;
        q += d * d;
    }
    let variance = group_sum(lane, q) / f32(D);
    let mean = shift + centre;
    let inv = 1.0 / sqrt(variance + bitcast<f32>(p[2]));
    if (lane.index == 0u && p[4] != 0u) { mean_out[r] = mean; }
    if (lane.index == 0u && p[5] != 0u) { inv_out[r] = inv; }
    for (var j = lane.index; j < D; j += WG) {
        var v = ((f32(x[base + j]) - shift) - centre) * inv * f32(scale[j]);
        if (p[3] != 0u) { v += f32(bias[j]); }
        y[base + j] = T(v);
    }
}
