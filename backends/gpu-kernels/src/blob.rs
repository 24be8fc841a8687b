//! The compiled blob: the [`Plan`] in a versioned little-endian format.
//!
//! ```text
//! blob    := "BVKN" u32 version  limits  u64 arena_size u64 weights_size
//!            u32 n weight[n]  u32 n u32 params[n]  u32 n range inputs[n]
//!            u32 n range outputs[n]  u32 n step[n]
//! limits  := u32 subgroup u32 max_invocations u32 group_size[3] u32 group_count[3]
//!            u32 shared_memory u64 max_storage_range u32 features
//! features := bit 0 float16, bit 1 subgroups (a version 1 blob from before subgroups
//!             holds 0 or 1 there, so it still loads, as one for a device without them)
//! weight  := u32 kind (0 view, 1 inline) u64 offset u64 len (view: u32 index | inline: len bytes)
//! range   := u32 region u64 offset u64 len
//! step    := u32 name_len name u32 spec range bindings[7] u32 groups[3]
//! ```
//! It holds no weights from views (they come again at init) and names kernels by name and
//! override value, so a blob from another build is refused if its kernels are missing.

use baton_delegate_api::bytes::{ByteReader, ByteWriter};

use crate::plan::{Plan, Range, Region, Step, Weight, WeightSource};
use crate::Limits;

const MAGIC: &[u8; 4] = b"BVKN";
/// The blob format this build reads and writes. Bump it on any layout change.
pub const FORMAT_VERSION: u32 = 1;

/// The format version of a blob, if it starts with the magic.
pub fn version(blob: &[u8]) -> Option<u32> {
    if blob.len() < 8 || &blob[..4] != MAGIC {
        return None;
    }
    Some(u32::from_le_bytes(blob[4..8].try_into().ok()?))
}

/// Serializes a plan.
pub fn encode(plan: &Plan) -> Vec<u8> {
    let mut w = ByteWriter::new();
    w.bytes(MAGIC);
    w.u32(FORMAT_VERSION);
    limits(&mut w, &plan.limits);
    w.u64(plan.arena_size);
    w.u64(plan.weights_size);
    w.u32(plan.weights.len() as u32);
    for wt in &plan.weights {
        match &wt.source {
            WeightSource::View(i) => {
                w.u32(0);
                w.u64(wt.offset);
                w.u64(wt.len);
                w.u32(*i);
            }
            WeightSource::Inline(bytes) => {
                w.u32(1);
                w.u64(wt.offset);
                w.u64(wt.len);
                w.bytes(bytes);
            }
        }
    }
    w.u32(plan.params.len() as u32);
    for &p in &plan.params {
        w.u32(p);
    }
    for list in [&plan.inputs, &plan.outputs] {
        w.u32(list.len() as u32);
        for r in list {
            range(&mut w, r);
        }
    }
    w.u32(plan.steps.len() as u32);
    for s in &plan.steps {
        w.str(&s.kernel);
        w.u32(s.spec);
        for r in &s.bindings {
            range(&mut w, r);
        }
        for g in s.groups {
            w.u32(g);
        }
    }
    w.finish()
}

fn limits(w: &mut ByteWriter, l: &Limits) {
    w.u32(l.subgroup);
    w.u32(l.max_invocations);
    l.max_group_size.iter().for_each(|&v| w.u32(v));
    l.max_group_count.iter().for_each(|&v| w.u32(v));
    w.u32(l.shared_memory);
    w.u64(l.max_storage_range);
    w.u32(u32::from(l.float16) | u32::from(l.subgroups) << 1);
}

/// Reads a blob. Every malformation is an error naming what is wrong, never a panic.
pub fn decode(blob: &[u8]) -> Result<Plan, String> {
    match version(blob) {
        None => return Err("not a Vulkan delegate blob (bad magic)".into()),
        Some(FORMAT_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "blob format version {v}, this build reads {FORMAT_VERSION}; recompile the model"
            ))
        }
    }
    let mut r = ByteReader::new(blob);
    r.take(8, "magic and version")?;
    let limits = Limits {
        subgroup: r.u32("limits")?,
        max_invocations: r.u32("limits")?,
        max_group_size: [r.u32("limits")?, r.u32("limits")?, r.u32("limits")?],
        max_group_count: [r.u32("limits")?, r.u32("limits")?, r.u32("limits")?],
        shared_memory: r.u32("limits")?,
        max_storage_range: r.u64("limits")?,
        float16: false,
        subgroups: false,
    };
    let features = r.u32("limits")?;
    if features > 0b11 {
        return Err(format!(
            "limits: unknown device features {features:#x} (a newer build's blob?); recompile the model"
        ));
    }
    let limits = Limits {
        float16: features & 1 != 0,
        subgroups: features & 2 != 0,
        ..limits
    };
    let arena_size = r.u64("arena size")?;
    let weights_size = r.u64("weights size")?;
    let n = r.count_u32(1, "weight count")?;
    let mut weights = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = r.u32("weight kind")?;
        let offset = r.u64("weight offset")?;
        let len = r.u64("weight length")?;
        let source = match kind {
            0 => WeightSource::View(r.u32("weight view")?),
            1 => {
                let len = usize::try_from(len).map_err(|_| "weight length overflows")?;
                WeightSource::Inline(r.take(len, "inline weight")?.to_vec())
            }
            k => return Err(format!("weight kind {k} is unknown")),
        };
        if offset.checked_add(len).is_none_or(|e| e > weights_size) {
            return Err(format!(
                "weight at {offset}+{len} lies outside the weights buffer"
            ));
        }
        weights.push(Weight {
            source,
            offset,
            len,
        });
    }
    let n = r.count_u32(4, "parameter count")?;
    let params = (0..n)
        .map(|_| r.u32("parameters"))
        .collect::<Result<_, _>>()?;
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        let n = r.count_u32(1, "tensor count")?;
        for _ in 0..n {
            list.push(read_range(&mut r)?);
        }
    }
    let [inputs, outputs] = lists;
    let n = r.count_u32(1, "step count")?;
    let mut steps = Vec::with_capacity(n);
    for _ in 0..n {
        let kernel = r.str("kernel name")?.to_owned();
        let spec = r.u32("override value")?;
        let mut bindings = [crate::plan::dummy(0); crate::plan::SLOTS];
        for b in &mut bindings {
            *b = read_range(&mut r)?;
        }
        let groups = [r.u32("groups")?, r.u32("groups")?, r.u32("groups")?];
        steps.push(Step {
            kernel,
            spec,
            bindings,
            groups,
        });
    }
    if r.left() != 0 {
        return Err(format!("{} trailing bytes", r.left()));
    }
    let plan = Plan {
        limits,
        arena_size,
        weights_size,
        weights,
        params,
        inputs,
        outputs,
        steps,
    };
    check_ranges(&plan)?;
    Ok(plan)
}

/// Every range must lie inside its region, so a corrupt blob cannot bind past a buffer.
fn check_ranges(plan: &Plan) -> Result<(), String> {
    let size = |r: Region| match r {
        Region::Arena => plan.arena_size,
        Region::Weights => plan.weights_size,
        Region::Params => plan.params.len() as u64 * 4,
        Region::Dummy => crate::plan::DUMMY_SIZE,
    };
    let all = plan
        .inputs
        .iter()
        .chain(&plan.outputs)
        .chain(plan.steps.iter().flat_map(|s| s.bindings.iter()));
    for r in all {
        if r.len == 0
            || r.offset
                .checked_add(r.len)
                .is_none_or(|e| e > size(r.region))
        {
            return Err(format!("range {r:?} lies outside its buffer"));
        }
    }
    Ok(())
}

/// `range := u32 region u64 offset u64 len`.
fn range(w: &mut ByteWriter, r: &Range) {
    w.u32(r.region as u32);
    w.u64(r.offset);
    w.u64(r.len);
}

/// A range whose region code is known; whether it lies inside that region is checked by
/// [`check_ranges`] once every region's size has been read.
fn read_range(r: &mut ByteReader<'_>) -> Result<Range, String> {
    let code = r.u32("range region")?;
    let region = Region::from_code(code).ok_or_else(|| format!("region {code} is unknown"))?;
    Ok(Range {
        region,
        offset: r.u64("range offset")?,
        len: r.u64("range length")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::dummy;

    fn range(region: Region, offset: u64, len: u64) -> Range {
        Range {
            region,
            offset,
            len,
        }
    }

    /// A plan with both weight sources, parameters, several steps and every region.
    fn sample() -> Plan {
        let arena = |o, l| range(Region::Arena, o, l);
        Plan {
            limits: Limits {
                subgroup: 32,
                max_invocations: 1024,
                max_group_size: [1024, 1024, 64],
                max_group_count: [65535, 65535, 65535],
                shared_memory: 49152,
                max_storage_range: 1 << 31,
                float16: true,
                subgroups: false,
            },
            arena_size: 1024,
            weights_size: 512,
            weights: vec![
                Weight {
                    source: WeightSource::View(0),
                    offset: 0,
                    len: 256,
                },
                Weight {
                    source: WeightSource::Inline((1..=12).collect()),
                    offset: 256,
                    len: 12,
                },
            ],
            params: vec![7, 8, 9, 10],
            inputs: vec![arena(0, 256)],
            outputs: vec![arena(512, 256)],
            steps: vec![
                Step {
                    kernel: "matmul_f32".into(),
                    spec: 64,
                    bindings: [
                        arena(0, 256),
                        range(Region::Weights, 0, 256),
                        dummy(2),
                        arena(256, 256),
                        range(Region::Params, 0, 8),
                        dummy(5),
                        dummy(6),
                    ],
                    groups: [4, 1, 1],
                },
                Step {
                    kernel: "add_f16".into(),
                    spec: 256,
                    bindings: [
                        arena(256, 256),
                        range(Region::Weights, 256, 12),
                        dummy(2),
                        arena(512, 256),
                        range(Region::Params, 8, 8),
                        dummy(5),
                        dummy(6),
                    ],
                    groups: [1, 2, 3],
                },
            ],
        }
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The encoding is the format: these bytes were produced by the blob writer before it
    /// moved onto the SDK's `ByteWriter`, and a blob compiled then must still load.
    #[test]
    fn a_plan_encodes_to_the_format_version_1_bytes() {
        let plan = sample();
        let blob = encode(&plan);
        assert_eq!(
            hex(&blob),
            "\
             42564b4e010000002000000000040000000400000004000040000000ffff0000ffff0000ffff0000\
             00c00000000000800000000001000000000400000000000000020000000000000200000000000000\
             00000000000000000001000000000000000000000100000000010000000000000c00000000000000\
             0102030405060708090a0b0c040000000700000008000000090000000a0000000100000000000000\
             00000000000000000001000000000000010000000000000000020000000000000001000000000000\
             020000000a0000006d61746d756c5f66333240000000000000000000000000000000000100000000\
             00000100000000000000000000000001000000000000030000000002000000000000100000000000\
             00000000000000010000000000000001000000000000020000000000000000000000080000000000\
             00000300000000050000000000001000000000000000030000000006000000000000100000000000\
             0000040000000100000001000000070000006164645f663136000100000000000000010000000000\
             0000010000000000000100000000010000000000000c000000000000000300000000020000000000\
             00100000000000000000000000000200000000000000010000000000000200000008000000000000\
             00080000000000000003000000000500000000000010000000000000000300000000060000000000\
             001000000000000000010000000200000003000000\
             "
        );
        assert_eq!(decode(&blob).unwrap(), plan);
    }

    /// Subgroups are bit 1 of the features word, beside f16's bit 0; unknown bits are
    /// refused.
    #[test]
    fn subgroups_travel_in_the_features_word() {
        let mut plan = sample();
        plan.limits.subgroups = true;
        let blob = encode(&plan);
        // magic, version, subgroup, invocations, 3 + 3 sizes, shared memory, u64 range.
        let at = 4 + 4 + 4 + 4 + 12 + 12 + 4 + 8;
        assert_eq!(blob[at..at + 4], [3, 0, 0, 0]);
        assert_eq!(decode(&blob).unwrap(), plan);
        let mut bad = blob.clone();
        bad[at] = 4;
        let e = decode(&bad).unwrap_err();
        assert!(e.contains("unknown device features 0x4"), "{e}");
    }

    /// Every prefix of a valid blob is refused with an error, never a panic.
    #[test]
    fn truncation_anywhere_is_an_error() {
        let blob = encode(&sample());
        for n in 0..blob.len() {
            assert!(decode(&blob[..n]).is_err(), "{n} bytes decoded");
        }
        let mut long = blob.clone();
        long.push(0);
        assert_eq!(decode(&long).unwrap_err(), "1 trailing bytes");
    }
}
