// requires: rowreduce.wgsl
// ReduceSum, ReduceMean, ReduceMax or ReduceMin over one contiguous block of axes. One
// workgroup per output element ("row"): row r reduces x[outer * L * inner + j * inner + k]
// for j < L, where outer = r / inner and k = r % inner. The output is row-major over the
// kept axes, which keepdims does not change.
//
// Each invocation folds one contiguous chunk of the row in order. A sum then folds the
// chunks in order too (invocation 0, through `chunks`): the whole sum is taken in the
// row's own order, as the reference takes it, so cancellation among large values (a row
// of ±1e30 and small values, which the reference's order absorbs) comes out the same; a
// tree or a subgroup sum adds the small values up first and does not. A maximum does not
// depend on the order, so it combines the chunks through rowreduce.wgsl (shared memory,
// or subgroup operations in the `_sg` variants). A minimum is the negated maximum of the
// negated values: negation is exact, keeps NaN a NaN and maps a tie to a tie (which of
// -0 and +0 comes out is decided as for the maximum).
//
// Bindings: 0 x (read), 3 y (read_write), 4 params (u32).
// Params: [0] rows, [1] L (reduced extent), [2] inner, [3] mode (0 sum, 1 mean, 2 max,
//         3 min).
// Override: WG, the workgroup size. Dispatch: rows workgroups over x, then y.
//
// Max and min are NaN when any reduced element is NaN (tested on the bits, see rowreduce.wgsl).

// Element type: T (f32; the f16 variants have f16, see the README); loads widen to f32,
// sums are taken in f32, the one store rounds.

alias T = f32;

@group(0) @binding(0) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

var<workgroup> chunks: array<f32, WG>;

fn combine(a: f32, b: f32, is_max: bool) -> f32 {
    if (!is_max) { return a + b; }
    if (is_nan(a) || is_nan(b)) { return bitcast<f32>(0x7fc00000u); }
    return select(a, b, b > a);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        lane: Lane) {
    let r = wid.y * nwg.x + wid.x;
    // Uniform across the workgroup, so the barriers below stay in uniform control flow.
    if (r >= p[0]) { return; }
    let L = p[1];
    let inner = p[2];
    let is_min = p[3] == 3u;
    let is_max = p[3] >= 2u;
    let base = (r / inner) * L * inner + r % inner;
    let chunk = (L + WG - 1u) / WG;
    var acc = select(0.0, -bitcast<f32>(0x7f800000u), is_max);
    let stop = min(L, (lane.index + 1u) * chunk);
    for (var j = lane.index * chunk; j < stop; j++) {
        let v = f32(x[base + j * inner]);
        acc = combine(acc, select(v, -v, is_min), is_max);
    }
    // The mode is the same for the whole workgroup: uniform control flow.
    var total = acc;
    if (is_max) {
        total = group_max(lane, acc);
    } else {
        chunks[lane.index] = acc;
        workgroupBarrier();
        if (lane.index == 0u) {
            for (var t = 1u; t < WG; t++) { total += chunks[t]; }
        }
    }
    if (lane.index == 0u) {
        let value = select(total, total / f32(L), p[3] == 1u);
        y[r] = T(select(value, -value, is_min));
    }
}
