//! The compiled blob: what `compile` returns and `init` reads.
//!
//! It holds no weights (those arrive again as constant views at init, where they are
//! packed for the machine's kernel) and nothing machine-specific, so a blob compiled on one
//! machine runs on any machine with the same format version.
//!
//! ```text
//! blob   := "BCPU" u32 format_version u32 flags(0) u32 reserved(0)
//!           u64 graph_len, graph_len bytes of BTIR (constants external), zero padding to 4
//!           u32 n, chain[n]
//! chain  := u32 anchor, u32 add, u32 activation     (u32::MAX: none)
//! ```
//! All integers little-endian.

use baton_delegate_api::ir::Graph;
use baton_delegate_api::wire::{self, ConstMode};

use crate::fusion::{Chain, FusionPlan};

/// The blob's magic bytes.
pub(crate) const MAGIC: &[u8; 4] = b"BCPU";
/// The blob format this build reads and writes. Bump it on any layout change.
pub(crate) const FORMAT_VERSION: u32 = 1;

const HEADER_LEN: usize = 16;
const NONE: u32 = u32::MAX;

/// Serializes a subgraph and its fusion plan. Returns the blob and, as
/// [`wire::encode`] does, the tensor ids of the constants in the order their views must
/// be passed to `init`.
pub(crate) fn encode(graph: &Graph, plan: &FusionPlan) -> (Vec<u8>, Vec<usize>) {
    let (ir, constants) = wire::encode(graph, ConstMode::External);
    let mut out = Vec::with_capacity(HEADER_LEN + 8 + ir.len() + 4 + 12 * plan.chains.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(ir.len() as u64).to_le_bytes());
    out.extend_from_slice(&ir);
    out.resize(out.len().next_multiple_of(4), 0);
    out.extend_from_slice(&(plan.chains.len() as u32).to_le_bytes());
    let id = |n: Option<usize>| n.map_or(NONE, |n| n as u32);
    for c in &plan.chains {
        for v in [c.anchor as u32, id(c.add), id(c.activation)] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    (out, constants)
}

/// The format version of a blob, if it starts with the magic.
pub(crate) fn version(blob: &[u8]) -> Option<u32> {
    if blob.len() < 8 || &blob[..4] != MAGIC {
        return None;
    }
    Some(u32::from_le_bytes(blob[4..8].try_into().ok()?))
}

/// Reads a blob. Every malformation is an error naming what is wrong, never a panic.
pub(crate) fn decode(blob: &[u8]) -> Result<(Graph, FusionPlan), String> {
    match version(blob) {
        None => return Err("not a CPU delegate blob (bad magic)".into()),
        Some(FORMAT_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "blob format version {v}, this build reads {FORMAT_VERSION}; recompile the model"
            ))
        }
    }
    let mut r = Reader { buf: blob, pos: 8 };
    let _flags = r.u32("flags")?;
    let _reserved = r.u32("reserved")?;
    let ir_len = usize::try_from(r.u64("graph length")?).map_err(|_| "graph length overflows")?;
    let ir = r.take(ir_len, "graph")?;
    let graph = wire::decode(ir).map_err(|e| format!("blob graph: {e}"))?;
    r.take(r.pos.next_multiple_of(4) - r.pos, "padding")?;
    let n = r.u32("chain count")? as usize;
    if n.saturating_mul(12) != blob.len() - r.pos {
        return Err(format!(
            "blob holds {} bytes of fusion chains, {n} chains need {}",
            blob.len() - r.pos,
            n.saturating_mul(12)
        ));
    }
    let mut chains = Vec::with_capacity(n);
    for _ in 0..n {
        let opt = |v: u32| (v != NONE).then_some(v as usize);
        chains.push(Chain {
            anchor: r.u32("chain anchor")? as usize,
            add: opt(r.u32("chain add")?),
            activation: opt(r.u32("chain activation")?),
        });
    }
    Ok((graph, FusionPlan { chains }))
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("blob truncated at byte {} reading the {what}", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let (blob, order) = encode(&g, &plan);
        assert_eq!(order, vec![1]);
        assert_eq!(version(&blob), Some(FORMAT_VERSION));
        let (back, back_plan) = decode(&blob).unwrap();
        assert_eq!(back_plan, plan);
        assert_eq!(back.nodes, g.nodes);
        assert_eq!(back.tensors[1].data, Some(Storage::External(0)));
    }

    #[test]
    fn malformed_blobs_are_errors() {
        let (g, plan) = sample();
        let (blob, _) = encode(&g, &plan);
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
