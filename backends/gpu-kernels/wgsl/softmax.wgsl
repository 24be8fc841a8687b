// requires: rowreduce.wgsl
// Softmax or LogSoftmax along one axis. One workgroup per row: the row's maximum and the
// sum of exponentials are reduced across the workgroup (rowreduce.wgsl: in shared memory,
// WG a power of two; or with subgroup operations in the `_sg` variants).
// Row r covers x[outer * L * inner + j * inner + k] for j < L, where outer = r / inner and
// k = r % inner, so no transpose is needed for an inner axis.
//
// Bindings: 0 x (read), 3 y (read_write), 4 params (u32).
// Params: [0] rows, [1] L (axis extent), [2] inner, [3] log (0 Softmax, 1 LogSoftmax).
// Override: WG, the workgroup size. Dispatch: rows workgroups over x, then y.

// Element type: T (f32; the f16 variant has f16, see the README); loads widen to f32,
// the one store rounds.

alias T = f32;

@group(0) @binding(0) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        lane: Lane) {
    let r = wid.y * nwg.x + wid.x;
    // Uniform across the workgroup, so the barriers below stay in uniform control flow.
    if (r >= p[0]) { return; }
    let L = p[1];
    let inner = p[2];
    let base = (r / inner) * L * inner + r % inner;
    var m = -bitcast<f32>(0x7f800000u);
    for (var j = lane.index; j < L; j += WG) {
        let v = f32(x[base + j * inner]);
        if (v > m || is_nan(v)) { m = v; }
    }
    let mx = group_max(lane, m);
    var sum = 0.0;
    for (var j = lane.index; j < L; j += WG) {
        sum += exp(f32(x[base + j * inner]) - mx);
    }
    let total = group_sum(lane, sum);
    let log_total = log(total);
    for (var j = lane.index; j < L; j += WG) {
        let d = f32(x[base + j * inner]) - mx;
        y[base + j * inner] = T(select(exp(d) / total, d - log_total, p[3] != 0u));
    }
}
