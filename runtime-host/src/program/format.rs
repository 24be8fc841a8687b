//! Writing and reading the `.baton` bytes (the layout is documented in [`super`]).
//!
//! The reader trusts nothing: every offset and length is checked arithmetic against the
//! file's length before a byte is read, every count against what the remaining bytes can
//! hold, and with verification on (the default) every byte of the file is covered, either
//! by a checksum or by the rule that padding is zero. A corrupted file is therefore an error
//! naming the section, never a panic and never a silently different model.

use std::collections::BTreeMap;
use std::sync::Arc;

use baton_delegate_api::ir::TensorData;
use baton_delegate_api::wire::{self, ConstMode};
use baton_delegate_api::{Graph, Storage};
use baton_partitioner::{Decision, NodeExplanation, Partition, PartitionPlan};

use super::{
    CompiledPartition, MemoryLayout, PluginIdentity, Program, ProgramError, FORMAT_MAJOR,
    FORMAT_MINOR, HEADER_SIZE, MAGIC, TABLE_ENTRY_SIZE,
};

/// Section kinds, as stored in the table.
pub(crate) mod kind {
    pub const GRAPH: u32 = 1;
    pub const CONSTANTS: u32 = 2;
    pub const PLAN: u32 = 3;
    pub const PARTITION: u32 = 4;
    pub const MEMORY: u32 = 5;
    pub const SHAPES: u32 = 6;
    pub const BRANCH: u32 = 7;
}

/// Sections are placed at multiples of this; so are constants and blobs inside theirs.
const ALIGN: usize = 64;
/// Partitions a program may hold (far above what any partitioner policy produces).
const MAX_PARTITIONS: usize = 1 << 16;
/// Largest arena a program may ask for: refuses a crafted size before allocating it.
const MAX_ARENA: u64 = 1 << 40;
/// Where the header's checksum field lies.
const HEADER_CRC_AT: usize = 32;

/// One row of the section table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SectionEntry {
    pub kind: u32,
    pub index: u32,
    pub offset: u64,
    pub len: u64,
    pub crc: u32,
}

impl SectionEntry {
    /// The section's name in messages, e.g. `partition 2`.
    pub fn name(&self) -> String {
        section_name(self.kind, self.index)
    }
}

pub(crate) fn section_name(kind: u32, index: u32) -> String {
    match kind {
        kind::GRAPH => "graph".into(),
        kind::CONSTANTS => "constants".into(),
        kind::PLAN => "plan".into(),
        kind::PARTITION => format!("partition {index}"),
        kind::MEMORY => "memory".into(),
        kind::SHAPES => "shapes".into(),
        kind::BRANCH => format!("branch {} of node {}", index % 2, index / 2),
        k => format!("unknown kind {k}"),
    }
}

/// Serializes `program`.
pub fn encode(program: &Program) -> Vec<u8> {
    let (graph_bytes, const_ids) = wire::encode(&program.graph, ConstMode::External);
    let mut sections: Vec<(u32, u32, Vec<u8>)> = vec![
        (kind::GRAPH, 0, graph_bytes),
        (kind::CONSTANTS, 0, constants(&program.graph, &const_ids)),
        (kind::PLAN, 0, plan(&program.plan)),
    ];
    for (i, p) in program.partitions.iter().enumerate() {
        sections.push((kind::PARTITION, i as u32, partition(p)));
    }
    sections.push((kind::MEMORY, 0, memory(program.memory.as_ref())));
    sections.push((kind::SHAPES, 0, shapes(&program.bindings, &program.bounds)));
    for (&(node, k), branch) in &program.branches {
        sections.push((kind::BRANCH, (2 * node + k) as u32, encode(branch)));
    }

    let table_end = HEADER_SIZE + sections.len() * TABLE_ENTRY_SIZE;
    let mut out = vec![0u8; table_end.next_multiple_of(ALIGN)];
    let mut entries = Vec::new();
    for (k, index, bytes) in &sections {
        let offset = out.len().next_multiple_of(ALIGN);
        out.resize(offset, 0);
        out.extend_from_slice(bytes);
        entries.push(SectionEntry {
            kind: *k,
            index: *index,
            offset: offset as u64,
            len: bytes.len() as u64,
            crc: crc32c::crc32c(bytes),
        });
    }
    let file_len = out.len() as u64;
    let mut head = Writer::default();
    head.buf.extend_from_slice(MAGIC);
    head.u16(FORMAT_MAJOR);
    head.u16(FORMAT_MINOR);
    head.u32(HEADER_SIZE as u32);
    head.u64(file_len);
    head.u32(entries.len() as u32);
    head.u32(0); // flags
    head.u32(0); // checksum, patched below
    head.buf.resize(HEADER_SIZE, 0);
    for e in &entries {
        head.u32(e.kind);
        head.u32(e.index);
        head.u64(e.offset);
        head.u64(e.len);
        head.u32(e.crc);
        head.u32(0);
    }
    let crc = crc32c::crc32c(&head.buf);
    head.buf[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    out[..head.buf.len()].copy_from_slice(&head.buf);
    out
}

/// Recomputes the checksums of a program edited in place (tests and tools that corrupt
/// or patch one on purpose), trusting its table as it stands; a table that does not fit
/// the bytes is left alone, for the reader to refuse.
pub fn reseal(bytes: &mut [u8]) {
    let Ok(entries) = read_table(bytes, false) else {
        return;
    };
    let header_size = u32::from_le_bytes(bytes[12..16].try_into().expect("4")) as usize;
    for (i, e) in entries.iter().enumerate() {
        let crc = crc32c::crc32c(&bytes[e.offset as usize..(e.offset + e.len) as usize]);
        let at = header_size + i * TABLE_ENTRY_SIZE + 24;
        bytes[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
    let table_end = header_size + entries.len() * TABLE_ENTRY_SIZE;
    bytes[HEADER_CRC_AT..HEADER_CRC_AT + 4].fill(0);
    let crc = crc32c::crc32c(&bytes[..table_end]);
    bytes[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

fn constants(graph: &Graph, ids: &[usize]) -> Vec<u8> {
    let table = 8 + 16 * ids.len();
    let mut w = Writer::default();
    w.u32(ids.len() as u32);
    w.u32(0);
    let mut data: Vec<u8> = vec![0; table.next_multiple_of(ALIGN) - table];
    for &t in ids {
        let bytes = match &graph.tensors[t].data {
            Some(Storage::Inline(d)) => d.bytes(),
            _ => &[],
        };
        let offset = (table + data.len()).next_multiple_of(ALIGN);
        data.resize(offset - table, 0);
        w.u64(offset as u64);
        w.u64(bytes.len() as u64);
        data.extend_from_slice(bytes);
    }
    w.buf.extend_from_slice(&data);
    w.buf
}

fn plan(plan: &PartitionPlan) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(plan.nodes.len() as u32);
    for e in &plan.nodes {
        w.u32(match e.decision {
            Decision::Delegated { partition, .. } => partition as u32,
            Decision::Host => u32::MAX,
        });
        w.u32(e.reasons.len() as u32);
        for r in &e.reasons {
            w.str(r);
        }
    }
    w.buf
}

fn partition(p: &CompiledPartition) -> Vec<u8> {
    let mut w = Writer::default();
    w.str(&p.backend);
    w.str(&p.plugin.name);
    w.str(&p.plugin.version);
    w.str(&p.plugin.build_id);
    w.u32(p.plugin.abi_major);
    w.u32(p.plugin.abi_minor);
    let blob_at = (w.buf.len() + 16).next_multiple_of(ALIGN);
    w.u64(blob_at as u64);
    w.u64(p.blob.bytes().len() as u64);
    w.buf.resize(blob_at, 0);
    w.buf.extend_from_slice(p.blob.bytes());
    w.buf
}

fn memory(m: Option<&MemoryLayout>) -> Vec<u8> {
    let mut w = Writer::default();
    let Some(m) = m else {
        w.u32(0);
        return w.buf;
    };
    w.u32(1);
    w.u32(m.placed.len() as u32);
    w.u64(m.arena_size as u64);
    for &(t, off) in &m.placed {
        w.u32(t as u32);
        w.u32(0);
        w.u64(off as u64);
    }
    w.buf
}

fn shapes(bindings: &BTreeMap<String, usize>, bounds: &BTreeMap<String, usize>) -> Vec<u8> {
    let mut w = Writer::default();
    for map in [bindings, bounds] {
        w.u32(map.len() as u32);
        for (k, &v) in map {
            w.str(k);
            w.u64(v as u64);
        }
    }
    w.buf
}

#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.resize(self.buf.len().next_multiple_of(4), 0);
    }
}

/// The file's bytes, owned by whatever keeps them alive (a mapping or a buffer).
pub type Bytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Reads a program from `bytes`. With `verify`, every checksum is checked and padding
/// must be zero; without, only the structure is validated.
pub fn decode(bytes: Bytes, verify: bool) -> Result<Program, ProgramError> {
    decode_nested(bytes, verify, 0)
}

/// A section of a program's bytes, itself a program (a compiled If branch).
struct Nested {
    owner: Bytes,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for Nested {
    fn as_ref(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.range.clone()]
    }
}

fn decode_nested(bytes: Bytes, verify: bool, depth: usize) -> Result<Program, ProgramError> {
    let all: &[u8] = (*bytes).as_ref();
    let entries = read_table(all, verify)?;
    let one = |k: u32| -> Result<&SectionEntry, ProgramError> {
        let mut it = entries.iter().filter(|e| e.kind == k);
        match (it.next(), it.next()) {
            (Some(e), None) => Ok(e),
            (None, _) => Err(ProgramError::MissingSection {
                section: section_name(k, 0),
            }),
            (Some(_), Some(e)) => Err(malformed(e, 0, "appears twice".into())),
        }
    };
    let body = |e: &SectionEntry| &all[e.offset as usize..(e.offset + e.len) as usize];

    let g = one(kind::GRAPH)?;
    let mut graph = wire::decode(body(g)).map_err(|error| ProgramError::Graph {
        offset: g.offset,
        error,
    })?;
    attach_constants(&mut graph, &bytes, one(kind::CONSTANTS)?)?;

    let s = one(kind::SHAPES)?;
    let mut r = Reader::new(s, body(s));
    let bindings = r.map()?;
    let bounds = r.map()?;
    r.end()?;

    let mut parts: Vec<&SectionEntry> = entries
        .iter()
        .filter(|e| e.kind == kind::PARTITION)
        .collect();
    parts.sort_by_key(|e| e.index);
    if parts.len() > MAX_PARTITIONS {
        return Err(malformed(
            parts[0],
            0,
            format!("{} partitions", parts.len()),
        ));
    }
    let mut partitions = Vec::new();
    for (i, e) in parts.iter().enumerate() {
        if e.index as usize != i {
            return Err(malformed(e, 0, format!("expected partition {i} here")));
        }
        partitions.push(read_partition(e, &bytes)?);
    }

    let p = one(kind::PLAN)?;
    // A program with value inputs is specialised per value at run time, like a bounded
    // one per binding: neither stores partition decisions.
    let deferred = !bounds.is_empty() || !baton_reference::values::value_inputs(&graph).is_empty();
    let plan = read_plan(p, body(p), &graph, &partitions, deferred)?;
    let m = one(kind::MEMORY)?;
    let memory = read_memory(m, body(m), &graph)?;
    let mut branches = BTreeMap::new();
    for e in entries.iter().filter(|e| e.kind == kind::BRANCH) {
        let (node, k) = (e.index as usize / 2, e.index as usize % 2);
        let is_if = graph
            .nodes
            .get(node)
            .is_some_and(|n| n.op == baton_delegate_api::OpKind::If);
        if !is_if || depth >= wire::MAX_GRAPH_DEPTH {
            return Err(malformed(
                e,
                0,
                "no If node of that index at this depth".into(),
            ));
        }
        let range = e.offset as usize..(e.offset + e.len) as usize;
        let nested: Bytes = Arc::new(Nested {
            owner: bytes.clone(),
            range,
        });
        let branch = decode_nested(nested, verify, depth + 1)
            .map_err(|inner| malformed(e, 0, format!("the nested program: {inner}")))?;
        if branches.insert((node, k), branch).is_some() {
            return Err(malformed(e, 0, "appears twice".into()));
        }
    }
    Ok(Program {
        graph,
        bindings,
        bounds,
        plan,
        partitions,
        memory,
        branches,
        notes: Vec::new(),
        pages: None,
    })
}

/// Reads the header and the section table, checking that the sections lie in order
/// inside the file and, with `verify`, their checksums and the zero padding between them.
pub(crate) fn read_table(all: &[u8], verify: bool) -> Result<Vec<SectionEntry>, ProgramError> {
    if all.len() < HEADER_SIZE {
        if all.len() >= 8 && &all[..8] != MAGIC {
            return Err(ProgramError::BadMagic {
                found: all[..8].try_into().expect("8 bytes"),
            });
        }
        return Err(ProgramError::Truncated {
            what: "header".into(),
            end: HEADER_SIZE as u64,
            len: all.len() as u64,
        });
    }
    if &all[..8] != MAGIC {
        return Err(ProgramError::BadMagic {
            found: all[..8].try_into().expect("8 bytes"),
        });
    }
    let u16_at = |o: usize| u16::from_le_bytes(all[o..o + 2].try_into().expect("2"));
    let u32_at = |o: usize| u32::from_le_bytes(all[o..o + 4].try_into().expect("4"));
    let u64_at = |o: usize| u64::from_le_bytes(all[o..o + 8].try_into().expect("8"));
    let (major, minor) = (u16_at(8), u16_at(10));
    if major != FORMAT_MAJOR {
        return Err(ProgramError::Version {
            found_major: major,
            found_minor: minor,
        });
    }
    let header_size = u32_at(12) as usize;
    let file_len = u64_at(16);
    let count = u32_at(24) as usize;
    if file_len != all.len() as u64 {
        return Err(ProgramError::Length {
            recorded: file_len,
            actual: all.len() as u64,
        });
    }
    if header_size < HEADER_SIZE || !header_size.is_multiple_of(8) {
        return Err(ProgramError::Header {
            message: format!("header_size {header_size}"),
        });
    }
    let table_end = count
        .checked_mul(TABLE_ENTRY_SIZE)
        .and_then(|n| n.checked_add(header_size))
        .filter(|&end| end <= all.len())
        .ok_or(ProgramError::Truncated {
            what: format!("section table of {count} entries"),
            end: header_size as u64 + count as u64 * TABLE_ENTRY_SIZE as u64,
            len: all.len() as u64,
        })?;
    if verify {
        let stored = u32_at(HEADER_CRC_AT);
        let mut digest = crc32c::crc32c(&all[..HEADER_CRC_AT]);
        digest = crc32c::crc32c_append(digest, &[0; 4]);
        let computed = crc32c::crc32c_append(digest, &all[HEADER_CRC_AT + 4..table_end]);
        if stored != computed {
            return Err(ProgramError::HeaderChecksum { stored, computed });
        }
    }
    let mut entries = Vec::with_capacity(count);
    let mut end_of_last = table_end as u64;
    for i in 0..count {
        let at = header_size + i * TABLE_ENTRY_SIZE;
        let e = SectionEntry {
            kind: u32_at(at),
            index: u32_at(at + 4),
            offset: u64_at(at + 8),
            len: u64_at(at + 16),
            crc: u32_at(at + 24),
        };
        let end = e.offset.checked_add(e.len);
        if e.offset < end_of_last || !e.offset.is_multiple_of(ALIGN as u64) {
            return Err(malformed(
                &e,
                0,
                format!("offset {} overlaps or is misaligned", e.offset),
            ));
        }
        let Some(end) = end.filter(|&end| end <= all.len() as u64) else {
            return Err(ProgramError::Truncated {
                what: e.name(),
                end: e.offset.saturating_add(e.len),
                len: all.len() as u64,
            });
        };
        if verify {
            let gap = &all[end_of_last as usize..e.offset as usize];
            if let Some(k) = gap.iter().position(|&b| b != 0) {
                return Err(ProgramError::Padding {
                    offset: end_of_last + k as u64,
                    before: e.name(),
                });
            }
            let computed = crc32c::crc32c(&all[e.offset as usize..end as usize]);
            if computed != e.crc {
                return Err(ProgramError::Checksum {
                    section: e.name(),
                    offset: e.offset,
                    stored: e.crc,
                    computed,
                });
            }
        }
        end_of_last = end;
        entries.push(e);
    }
    if end_of_last != all.len() as u64 {
        return Err(ProgramError::Length {
            recorded: end_of_last,
            actual: all.len() as u64,
        });
    }
    Ok(entries)
}

/// Replaces each external constant of `graph` by its bytes in the constants section, shared
/// with the file (no copy) where they are 64-byte aligned in memory, copied otherwise.
fn attach_constants(
    graph: &mut Graph,
    bytes: &Bytes,
    e: &SectionEntry,
) -> Result<(), ProgramError> {
    let all: &[u8] = (**bytes).as_ref();
    let body = &all[e.offset as usize..(e.offset + e.len) as usize];
    let mut r = Reader::new(e, body);
    let count = r.u32()? as usize;
    r.u32()?;
    if count > body.len() / 16 {
        return Err(malformed(e, 0, format!("{count} constants")));
    }
    let mut ranges = Vec::with_capacity(count);
    for i in 0..count {
        let (off, len) = (r.u64()?, r.u64()?);
        let range = off
            .checked_add(len)
            .filter(|&end| end <= e.len && off.is_multiple_of(ALIGN as u64))
            .map(|end| (e.offset + off) as usize..(e.offset + end) as usize)
            .ok_or_else(|| {
                malformed(
                    e,
                    8 + 16 * i as u64,
                    format!("constant {i} at [{off}, +{len})"),
                )
            })?;
        ranges.push(range);
    }
    let mut used = vec![false; count];
    for decl in &mut graph.tensors {
        let Some(Storage::External(i)) = decl.data else {
            continue;
        };
        let range = ranges.get(i).cloned().ok_or_else(|| {
            malformed(
                e,
                0,
                format!("tensor '{}' names constant {i} of {count}", decl.name),
            )
        })?;
        let want = decl.static_shape().and_then(|s| {
            s.iter()
                .try_fold(decl.dtype.size(), |a, &n| a.checked_mul(n))
        });
        if want != Some(range.len()) {
            return Err(malformed(
                e,
                0,
                format!(
                    "constant {i} has {} bytes; tensor '{}' ({}) needs {}",
                    range.len(),
                    decl.name,
                    crate::error::TensorType::declared(decl.dtype, &decl.shape),
                    match want {
                        Some(n) => format!("{n}"),
                        None => "a static shape".into(),
                    }
                ),
            ));
        }
        used[i] = true;
        let data = TensorData::from_shared(bytes.clone(), range.clone())
            .unwrap_or_else(|| TensorData::from_bytes(&all[range]));
        decl.data = Some(Storage::Inline(data));
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(malformed(
            e,
            0,
            format!("constant {i} belongs to no tensor"),
        ));
    }
    Ok(())
}

fn read_partition(e: &SectionEntry, bytes: &Bytes) -> Result<CompiledPartition, ProgramError> {
    let all: &[u8] = (**bytes).as_ref();
    let body = &all[e.offset as usize..(e.offset + e.len) as usize];
    let mut r = Reader::new(e, body);
    let backend = r.str()?;
    let plugin = PluginIdentity {
        name: r.str()?,
        version: r.str()?,
        build_id: r.str()?,
        abi_major: r.u32()?,
        abi_minor: r.u32()?,
    };
    let at = r.pos as u64;
    let (off, len) = (r.u64()?, r.u64()?);
    let range = off
        .checked_add(len)
        .filter(|&end| off >= r.pos as u64 && end == e.len && off.is_multiple_of(ALIGN as u64))
        .map(|_| (e.offset + off) as usize..(e.offset + e.len) as usize)
        .ok_or_else(|| malformed(e, at, format!("blob at [{off}, +{len})")))?;
    if body[r.pos..off as usize].iter().any(|&b| b != 0) {
        return Err(malformed(
            e,
            r.pos as u64,
            "nonzero padding before the blob".into(),
        ));
    }
    let blob = TensorData::from_shared(bytes.clone(), range.clone())
        .unwrap_or_else(|| TensorData::from_bytes(&all[range]));
    Ok(CompiledPartition {
        backend,
        plugin,
        blob,
        from_file: true,
    })
}

/// Reads the per-node decisions and rebuilds the partition plan from them. Every node must
/// be decided (none, in a bounded program), every partition non-empty.
fn read_plan(
    e: &SectionEntry,
    body: &[u8],
    graph: &Graph,
    partitions: &[CompiledPartition],
    bounded: bool,
) -> Result<PartitionPlan, ProgramError> {
    let mut r = Reader::new(e, body);
    let n = r.u32()? as usize;
    // A bounded program is partitioned per binding at run time: it stores no decisions.
    let expected = if bounded { 0 } else { graph.nodes.len() };
    if n != expected {
        return Err(malformed(
            e,
            0,
            format!("{n} decisions, expected {expected}"),
        ));
    }
    let mut nodes = Vec::with_capacity(n);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); partitions.len()];
    for node in 0..n {
        let at = r.pos as u64;
        let target = r.u32()?;
        let count = r.u32()? as usize;
        if count > body.len() / 4 {
            return Err(malformed(e, at, format!("node {node}: {count} reasons")));
        }
        let reasons = (0..count).map(|_| r.str()).collect::<Result<Vec<_>, _>>()?;
        let decision = if target == u32::MAX {
            Decision::Host
        } else {
            let p = target as usize;
            let list = members.get_mut(p).ok_or_else(|| {
                malformed(
                    e,
                    at,
                    format!("node {node} in partition {p} of {}", partitions.len()),
                )
            })?;
            list.push(node);
            Decision::Delegated {
                backend: partitions[p].backend.clone(),
                partition: p,
            }
        };
        nodes.push(NodeExplanation {
            node,
            decision,
            reasons,
        });
    }
    r.end()?;
    if let Some(p) = members.iter().position(|m| m.is_empty()) {
        return Err(malformed(e, 0, format!("partition {p} has no nodes")));
    }
    Ok(PartitionPlan {
        partitions: partitions
            .iter()
            .zip(members)
            .map(|(p, nodes)| Partition {
                backend: p.backend.clone(),
                nodes,
            })
            .collect(),
        nodes,
    })
}

fn read_memory(
    e: &SectionEntry,
    body: &[u8],
    graph: &Graph,
) -> Result<Option<MemoryLayout>, ProgramError> {
    let mut r = Reader::new(e, body);
    if r.u32()? == 0 {
        r.end()?;
        return Ok(None);
    }
    let n = r.u32()? as usize;
    let arena_size = r.u64()?;
    if arena_size > MAX_ARENA {
        return Err(malformed(e, 8, format!("arena of {arena_size} bytes")));
    }
    if n > body.len() / 16 {
        return Err(malformed(e, 4, format!("{n} placed tensors")));
    }
    let mut placed = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.pos as u64;
        let t = r.u32()? as usize;
        r.u32()?;
        let off = r.u64()?;
        if t >= graph.tensors.len() || off > arena_size {
            return Err(malformed(e, at, format!("tensor {t} at offset {off}")));
        }
        placed.push((t, off as usize));
    }
    r.end()?;
    Ok(Some(MemoryLayout {
        arena_size: arena_size as usize,
        placed,
    }))
}

fn malformed(e: &SectionEntry, at: u64, message: String) -> ProgramError {
    ProgramError::Malformed {
        section: e.name(),
        offset: e.offset.saturating_add(at),
        message,
    }
}

/// A bounds-checked cursor over one section.
struct Reader<'a> {
    entry: &'a SectionEntry,
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(entry: &'a SectionEntry, buf: &'a [u8]) -> Reader<'a> {
        Reader { entry, buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProgramError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(malformed(
                self.entry,
                self.pos as u64,
                format!("{n} bytes needed, {} left", self.buf.len() - self.pos),
            ));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, ProgramError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    fn u64(&mut self) -> Result<u64, ProgramError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    fn str(&mut self) -> Result<String, ProgramError> {
        let at = self.pos as u64;
        let n = self.u32()? as usize;
        let bytes = self.take(n)?;
        let text = std::str::from_utf8(bytes)
            .map_err(|_| malformed(self.entry, at, "a string is not UTF-8".into()))?
            .to_string();
        let pad = n.next_multiple_of(4) - n;
        if self.take(pad)?.iter().any(|&b| b != 0) {
            return Err(malformed(self.entry, at, "nonzero string padding".into()));
        }
        Ok(text)
    }

    fn map(&mut self) -> Result<BTreeMap<String, usize>, ProgramError> {
        let n = self.u32()? as usize;
        if n > self.buf.len() / 12 {
            return Err(malformed(
                self.entry,
                self.pos as u64,
                format!("{n} entries"),
            ));
        }
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let k = self.str()?;
            let at = self.pos as u64;
            let v = usize::try_from(self.u64()?)
                .map_err(|_| malformed(self.entry, at, format!("'{k}' out of range")))?;
            m.insert(k, v);
        }
        Ok(m)
    }

    fn end(&self) -> Result<(), ProgramError> {
        if self.pos != self.buf.len() {
            return Err(malformed(
                self.entry,
                self.pos as u64,
                format!("{} unread bytes at the end", self.buf.len() - self.pos),
            ));
        }
        Ok(())
    }
}
