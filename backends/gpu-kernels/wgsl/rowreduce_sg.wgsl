// Library: rowreduce.wgsl's `Lane`, `group_sum`, `group_max` and `is_nan` with subgroup
// operations, for the `_sg` kernel variants, which the delegates pick on a device with
// subgroup arithmetic in compute shaders (see `Limits::subgroups`). Each subgroup
// reduces its values with one subgroupAdd/subgroupMax, its first invocation stores the
// result in `part`, and after one barrier every invocation folds the subgroups' results
// in subgroup order: two barriers in all instead of log2(WG) + 2.
//
// The subgroup size is read at run time (the `subgroup_id` and `num_subgroups`
// builtins), never assumed. WebGPU's smallest subgroup is 4, so a workgroup of WG has at
// most WG / 4 subgroups: `part` holds that many (the delegates only pick these variants
// on a device whose smallest subgroup is at least 4). The result is the same run to run
// on one device: the subgroup operation and the fold order are both fixed.

struct Lane {
    @builtin(local_invocation_index) index: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_id) group: u32,
    @builtin(num_subgroups) groups: u32,
}

override PARTS: u32 = WG / 4u;

var<workgroup> part: array<f32, PARTS>;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

fn group_sum(lane: Lane, v: f32) -> f32 {
    let s = subgroupAdd(v);
    if (lane.lane == 0u) { part[lane.group] = s; }
    workgroupBarrier();
    var total = part[0];
    for (var g = 1u; g < lane.groups; g++) { total += part[g]; }
    // Every invocation has read `part` before anyone writes it again.
    workgroupBarrier();
    return total;
}

fn group_max(lane: Lane, v: f32) -> f32 {
    // subgroupMax leaves NaN undefined (SPIR-V's FMax), so NaN is counted apart (an
    // integer maximum of flags) and left out of the float maximum.
    let nan = subgroupMax(select(0u, 1u, is_nan(v)));
    let m = subgroupMax(select(v, -bitcast<f32>(0x7f800000u), is_nan(v)));
    if (lane.lane == 0u) { part[lane.group] = select(m, bitcast<f32>(0x7fc00000u), nan != 0u); }
    workgroupBarrier();
    var total = part[0];
    for (var g = 1u; g < lane.groups; g++) {
        let o = part[g];
        if (is_nan(o) || is_nan(total)) {
            total = bitcast<f32>(0x7fc00000u);
        } else if (o > total) {
            total = o;
        }
    }
    workgroupBarrier();
    return total;
}
