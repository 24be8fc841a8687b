// ReduceSum, ReduceMean or ReduceMax over one contiguous block of axes. One workgroup per
// output element ("row"): row r reduces x[outer * L * inner + j * inner + k] for j < L,
// where outer = r / inner and k = r % inner, in workgroup shared memory. The output is row-major over the kept axes, which keepdims does not
// change.
//
// Bindings: 0 x (read), 3 y (read_write), 4 params (u32).
// Params: [0] rows, [1] L (reduced extent), [2] inner, [3] mode (0 sum, 1 mean, 2 max).
// Override: WG, the workgroup size. Dispatch: rows workgroups over x, then y.
//
// Max is NaN when any reduced element is NaN; NaN is tested on the bits, since a driver
// may fold float compares as if there were none (no SignedZeroInfNanPreserve in naga's
// SPIR-V).

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

var<workgroup> red: array<f32, WG>;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

fn combine(a: f32, b: f32, is_max: bool) -> f32 {
    if (!is_max) { return a + b; }
    if (is_nan(a) || is_nan(b)) { return bitcast<f32>(0x7fc00000u); }
    return select(a, b, b > a);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wid.y * nwg.x + wid.x;
    // Uniform across the workgroup, so the barriers below stay in uniform control flow.
    if (r >= p[0]) { return; }
    let L = p[1];
    let inner = p[2];
    let is_max = p[3] == 2u;
    let base = (r / inner) * L * inner + r % inner;
    // Each invocation folds one contiguous chunk in order, and invocation 0 folds the
    // chunks in order: the sum is taken in the row's own order, as the reference takes it,
    // so cancellation (1e30 - 1e30 among small values) comes out the same.
    let chunk = (L + WG - 1u) / WG;
    var acc = select(0.0, -bitcast<f32>(0x7f800000u), is_max);
    let stop = min(L, (lid.x + 1u) * chunk);
    for (var j = lid.x * chunk; j < stop; j++) {
        acc = combine(acc, x[base + j * inner], is_max);
    }
    red[lid.x] = acc;
    workgroupBarrier();
    if (lid.x == 0u) {
        var total = red[0];
        for (var t = 1u; t < WG; t++) { total = combine(total, red[t], is_max); }
        y[r] = select(total, total / f32(L), p[3] == 1u);
    }
}
