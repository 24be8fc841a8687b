//! The compiled blob: what `compile` returns and `init` reads.
//!
//! It holds the subgraph, its fusion plan and the weights packed for the GEMM kernel the
//! compiling delegate runs (see `prepack.rs`), so that `init` copies panels instead of
//! packing them. The packings depend on the kernel's panel width (`NR`) only: a blob made
//! for another width still runs (its packings are ignored and the weights packed from the
//! constant views, as a version 1 blob's are), but recompiling would load faster, which
//! `blob_compatibility` says.
//!
//! ```text
//! blob    := "BCPU" u32 format_version u32 flags(0) u32 reserved(0)
//!            u64 graph_len, graph_len bytes of BTIR (constants external), zero padding to 4
//!            u32 n, chain[n]
//!            -- from version 2:
//!            u32 nr                       (the panel width the packings were made for)
//!            u32 count, u64 floats[count] (each packing's length)
//!            zero padding to 64 from the blob's start, then each packing: floats x f32,
//!            zero padding to 64
//! chain   := u32 anchor, u32 add, u32 activation     (u32::MAX: none)
//! ```
//! All integers and floats little-endian.

use baton_delegate_api::bytes::{ByteReader, ByteWriter};
use baton_delegate_api::ir::Graph;
use baton_delegate_api::wire::{self, ConstMode};

use crate::fusion::{Chain, FusionPlan};

/// The blob's magic bytes.
pub(crate) const MAGIC: &[u8; 4] = b"BCPU";
/// The blob format this build writes. Bump it on any layout change.
pub(crate) const FORMAT_VERSION: u32 = 2;
/// The oldest format this build reads (version 1: no packings).
pub(crate) const OLDEST_VERSION: u32 = 1;

const NONE: u32 = u32::MAX;
/// Packings start on a cache line, as the kernels' loads prefer.
const PACK_ALIGN: usize = 64;

/// A decoded blob: the graph, its fusion plan and its packings.
#[derive(Debug)]
pub(crate) struct Decoded<'b> {
    pub graph: Graph,
    pub plan: FusionPlan,
    /// The panel width the packings were made for; `None` in a version 1 blob.
    pub nr: Option<usize>,
    /// The packings, as little-endian f32 bytes, in lowering's request order.
    pub packs: Vec<&'b [u8]>,
}

/// Serializes a subgraph, its fusion plan and the packings lowering made for a kernel of
/// panel width `nr`. Returns the blob and, as [`wire::encode`] does, the tensor ids of the
/// constants in the order their views must be passed to `init`.
pub(crate) fn encode(
    graph: &Graph,
    plan: &FusionPlan,
    nr: usize,
    packs: &[Vec<f32>],
) -> (Vec<u8>, Vec<usize>) {
    let (ir, constants) = wire::encode(graph, ConstMode::External);
    let mut w = ByteWriter::new();
    w.bytes(MAGIC);
    w.u32(FORMAT_VERSION);
    w.u32(0);
    w.u32(0);
    w.u64(ir.len() as u64);
    w.bytes(&ir);
    w.pad_to(4);
    w.u32(plan.chains.len() as u32);
    let id = |n: Option<usize>| n.map_or(NONE, |n| n as u32);
    for c in &plan.chains {
        for v in [c.anchor as u32, id(c.add), id(c.activation)] {
            w.u32(v);
        }
    }
    w.u32(nr as u32);
    w.u32(packs.len() as u32);
    for p in packs {
        w.u64(p.len() as u64);
    }
    w.pad_to(PACK_ALIGN);
    for p in packs {
        w.f32s(p);
        w.pad_to(PACK_ALIGN);
    }
    (w.finish(), constants)
}

/// The format version of a blob, if it starts with the magic.
pub(crate) fn version(blob: &[u8]) -> Option<u32> {
    if blob.len() < 8 || &blob[..4] != MAGIC {
        return None;
    }
    Some(u32::from_le_bytes(blob[4..8].try_into().ok()?))
}

/// The panel width a blob's packings were made for, read from its header without
/// decoding the graph; `None` when it holds no packings or is not a blob this build reads.
pub(crate) fn packed_width(blob: &[u8]) -> Option<usize> {
    if version(blob)? < 2 {
        return None;
    }
    let mut r = ByteReader::new(blob);
    r.take(16, "header").ok()?;
    let ir_len = r.count(1, "graph length").ok()?;
    r.take(ir_len, "graph").ok()?;
    r.align(4, "padding").ok()?;
    let n = r.u32("chain count").ok()? as usize;
    r.take_items(n, 12, "fusion chains").ok()?;
    Some(r.u32("panel width").ok()? as usize)
}

/// Reads a blob. Every malformation is an error naming what is wrong, never a panic.
pub(crate) fn decode(blob: &[u8]) -> Result<Decoded<'_>, String> {
    let version = match version(blob) {
        None => return Err("not a CPU delegate blob (bad magic)".into()),
        Some(v) if (OLDEST_VERSION..=FORMAT_VERSION).contains(&v) => v,
        Some(v) => {
            return Err(format!(
                "blob format version {v}, this build reads {OLDEST_VERSION} to \
                 {FORMAT_VERSION}; recompile the model"
            ))
        }
    };
    let e = |e: baton_delegate_api::bytes::Truncated| format!("blob {e}");
    let mut r = ByteReader::new(blob);
    r.take(8, "magic and version").map_err(e)?;
    let _flags = r.u32("flags").map_err(e)?;
    let _reserved = r.u32("reserved").map_err(e)?;
    let ir_len = r.count(1, "graph length").map_err(e)?;
    let ir = r.take(ir_len, "graph").map_err(e)?;
    let graph = wire::decode(ir).map_err(|e| format!("blob graph: {e}"))?;
    r.align(4, "padding").map_err(e)?;
    let n = r.u32("chain count").map_err(e)? as usize;
    let chain_bytes = r.take_items(n, 12, "fusion chains").map_err(e)?;
    let mut chains = Vec::with_capacity(n);
    let mut c = ByteReader::new(chain_bytes);
    for _ in 0..n {
        let opt = |v: u32| (v != NONE).then_some(v as usize);
        chains.push(Chain {
            anchor: c.u32("chain anchor").map_err(e)? as usize,
            add: opt(c.u32("chain add").map_err(e)?),
            activation: opt(c.u32("chain activation").map_err(e)?),
        });
    }
    let (nr, packs) = if version >= 2 {
        let nr = r.u32("panel width").map_err(e)? as usize;
        let count = r.u32("packing count").map_err(e)? as usize;
        let mut lens = Vec::with_capacity(count.min(r.left() / 8));
        for _ in 0..count {
            lens.push(r.count(4, "packing length").map_err(e)?);
        }
        r.align(PACK_ALIGN, "padding").map_err(e)?;
        let mut packs = Vec::with_capacity(count);
        for len in lens {
            packs.push(r.take_items(len, 4, "packing").map_err(e)?);
            r.align(PACK_ALIGN, "padding").map_err(e)?;
        }
        (Some(nr), packs)
    } else {
        (None, Vec::new())
    };
    if r.left() != 0 {
        return Err(format!(
            "blob has {} bytes past its end (at byte {})",
            r.left(),
            r.pos()
        ));
    }
    Ok(Decoded {
        graph,
        plan: FusionPlan { chains },
        nr,
        packs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::bytes;
    use baton_delegate_api::ir::{DType, GraphBuilder, OpKind, Storage};

    fn sample() -> (Graph, FusionPlan) {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 3]);
        let w = b.constant_f32("w", &[3, 4], &[1.0; 12]);
        let y = b.node(OpKind::MatMul, &[x, w], &[]).unwrap();
        let z = b.node(OpKind::Relu, &[y], &[]).unwrap();
        b.output(z);
        let plan = FusionPlan {
            chains: vec![Chain {
                anchor: 0,
                add: None,
                activation: Some(1),
            }],
        };
        (b.finish().unwrap(), plan)
    }

    #[test]
    fn round_trip_keeps_graph_and_plan_and_externalizes_weights() {
        let (g, plan) = sample();
        let packs = vec![vec![1.0, 2.0, 3.0], vec![], vec![4.0; 17]];
        let (blob, order) = encode(&g, &plan, 8, &packs);
        assert_eq!(order, vec![1]);
        assert_eq!(version(&blob), Some(FORMAT_VERSION));
        let back = decode(&blob).unwrap();
        assert_eq!(back.plan, plan);
        assert_eq!(back.graph.nodes, g.nodes);
        assert_eq!(back.graph.tensors[1].data, Some(Storage::External(0)));
        assert_eq!(back.nr, Some(8));
        let floats: Vec<Vec<f32>> = back.packs.iter().map(|b| bytes::f32s(b)).collect();
        assert_eq!(floats, packs);
    }

    #[test]
    fn malformed_blobs_are_errors() {
        let (g, plan) = sample();
        let (blob, _) = encode(&g, &plan, 8, &[vec![1.0; 5]]);
        for n in 0..blob.len() {
            assert!(decode(&blob[..n]).is_err(), "prefix of {n} bytes decoded");
        }
        let mut wrong = blob.clone();
        wrong[4..8].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        assert!(decode(&wrong).unwrap_err().contains("version"));
        let mut huge = blob.clone();
        huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge).is_err());
    }
}
