// Library (a kernel pulls it in with `// requires: rowreduce.wgsl`): a sum or a maximum
// over one workgroup, for the row kernels (Softmax, LayerNormalization, the Reduce ops)
// that give one row to each workgroup. This is the version for any device: a tree in
// workgroup shared memory (WG must be a power of two). Subgroup variants of those kernels
// require rowreduce_sg.wgsl instead, which defines the same names with subgroup
// operations; a kernel only ever uses `Lane`, `group_sum`, `group_max` and `is_nan`, so
// its text is the same in both.
//
// The kernel declares `override WG` and its entry point takes a `Lane` argument. Every
// invocation of the workgroup must call these functions (they hold barriers), and every
// invocation gets the result.

struct Lane {
    @builtin(local_invocation_index) index: u32,
}

var<workgroup> red: array<f32, WG>;

// NaN is tested on the bits: a driver may fold float compares as if there were none (no
// SignedZeroInfNanPreserve in naga's SPIR-V).
fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// The larger of a and b; NaN if either is.
fn max_nan(a: f32, b: f32) -> f32 {
    if (is_nan(a) || is_nan(b)) { return bitcast<f32>(0x7fc00000u); }
    return select(a, b, b > a);
}

fn group_sum(lane: Lane, v: f32) -> f32 {
    red[lane.index] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lane.index < s) { red[lane.index] += red[lane.index + s]; }
        workgroupBarrier();
    }
    let total = red[0];
    // Every invocation has read red[0] before anyone writes red again.
    workgroupBarrier();
    return total;
}

fn group_max(lane: Lane, v: f32) -> f32 {
    red[lane.index] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lane.index < s) { red[lane.index] = max_nan(red[lane.index], red[lane.index + s]); }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}
