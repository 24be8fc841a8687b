//! The serialized form of the IR ("BTIR"), version 1.5 (1.1 added the op codes 20-43 and
//! 50-67 of the ONNX milestone; 1.2 added the dtype codes 8-23, the ops Ceil (44) and
//! CastLike (70), and the control-flow ops If and Loop (68, 69) with the graph attribute
//! kind 6 that holds their subgraphs; 1.3 added the op codes 71-110, 1.4 the op codes
//! 111-118, 1.5 the op codes 119-120 (Attention, RotaryEmbedding), 121-123 (GridSample,
//! AffineGrid, Col2Im), 125-129 (DFT, STFT, the window ops), 130 (Einsum), 131-133
//! (NonMaxSuppression, Unique, Compress), 134 (LinearAttention), 136-140
//! (CausalConvWithState, DeformConv, MaxUnpool, ConvInteger, MatMulInteger), 141 (RoiAlign),
//! 142 (Det), 143 (ReverseSequence), 144 (TensorScatter), 145 (BitCast), 146 (RNN) and 147
//! (MelWeightMatrix); the layout is otherwise that of 1.0).
//!
//! The same bytes are what `supports`/`compile` receive across the C ABI and what the
//! program file (`.baton`) stores, so they must be readable from C with no generator and
//! no library. That ruled the design:
//!
//! - **Why not FlatBuffers or protobuf.** Both were weighed. Either would make every C
//!   vendor build flatcc or protobuf-c and keep its generated code in step with ours, for a
//!   schema of five record kinds. A C reader that validates as much as [`decode`] needs only `memcpy` and
//!   bounds checks (the public one is `delegate-api/include/btir_reader.h`), and the Rust side has no
//!   generated code to commit or regenerate.
//! - **Constants never travel inside the graph across the ABI.** A tensor's storage is
//!   `inline` (an offset into the data segment: model and program files) or `external`
//!   (the index of a constant view passed beside the graph: plugin calls). Weights are
//!   therefore passed as views, never serialized or copied.
//!
//! The normative specification, with every rule a reader must follow (what `header_size`,
//! `flags` and `data_offset` mean, string padding, optional inputs left out, versions), is
//! `delegate-api/docs/btir.md`; this module implements it. In short
//! (all integers little-endian; readers copy with `memcpy`, fields are 4-aligned):
//!
//! ```text
//! header  := "BTIR" u16 major u16 minor u32 header_size u32 flags u64 data_offset
//! str     := u32 len, len bytes of UTF-8, zero padding to a multiple of 4
//! graph   := str name
//!            u32 n, tensor[n]
//!            u32 n, node[n]
//!            u32 n, u32 input_tensor[n]
//!            u32 n, u32 output_tensor[n]
//! tensor  := str name, u32 dtype, u32 rank, dim[rank], quant, storage
//! dim     := u32 0, u64 extent            (fixed)
//!          | u32 1, str symbol            (symbolic)
//! quant   := u32 0                        (none)
//!          | u32 1, f32 scale, i32 zero_point
//!          | u32 2, u32 axis, u32 n, f32 scale[n], i32 zero_point[n]
//! storage := u32 0                        (computed at run time)
//!          | u32 1, u64 offset, u64 len   (inline: offset from data_offset, 64-aligned)
//!          | u32 2, u32 index             (external: index of a constant view)
//! node    := str name, u32 op, u32 n, u32 input[n], u32 n, u32 output[n], u32 n, attr[n]
//! attr    := str name, u32 kind, value    (1 i64 | 2 f32 | 3 u32 n, i64[n]
//!                                          | 4 u32 n, f32[n] | 5 str
//!                                          | 6 u32 len, graph (exactly len bytes))
//! ```
//!
//! A graph attribute (kind 6, 1.2) is a subgraph of a control-flow node, written as a
//! `graph` record of its own; its length prefix lets a reader that does not care skip it.
//! Its tensor indices are its own (subgraphs are closed: see
//! [`OpKind::is_control_flow`](crate::ir::OpKind::is_control_flow)). Inline constants of
//! every subgraph live in the one data segment of the buffer, and subgraph constants are
//! always inline, even in [`ConstMode::External`]: external views number the constants of
//! the graph a plugin is handed, and plugins never receive control flow. Subgraphs nest at
//! most [`MAX_GRAPH_DEPTH`] deep. A 1.1 reader refuses a 1.2 buffer that uses any of this
//! (unknown op code or attribute kind) with a clear error, and reads one that does not.
//!
//! `header_size` lets a later minor version grow the header; readers skip what they do not
//! know. A new minor version only appends: fields at the end of the graph, new codes that
//! old readers reject with a clear error. A new major version is refused.

use crate::error::WireError;
use crate::ir::{Attr, DType, Dim, Graph, Node, OpKind, Quant, Storage, TensorData, TensorDecl};

/// Major version of the wire format this build reads and writes.
pub const WIRE_MAJOR: u16 = 1;
/// Minor version this build writes.
pub const WIRE_MINOR: u16 = 5;
/// How deeply subgraphs may nest (a Loop inside an If's branch is depth 2). Deeper buffers
/// are refused, by this reader and the C one alike, so a crafted buffer cannot exhaust the
/// stack.
pub const MAX_GRAPH_DEPTH: usize = 16;
const HEADER_SIZE: u32 = 24;

/// The BTIR minor version that added op `op`: a reader of an earlier minor refuses a graph
/// holding it (see `delegate-api/docs/btir.md`, section 7). A host uses it to keep such
/// nodes away from a plugin that reads an earlier minor.
pub fn op_minor(op: OpKind) -> u16 {
    match op.code() {
        1..=19 => 0,
        20..=43 | 50..=67 => 1,
        44 | 68..=70 => 2,
        71..=110 => 3,
        111..=118 => 4,
        119..=123 | 125..=134 | 136..=147 => 5,
        // A code this table does not list was added by the minor this build writes.
        _ => WIRE_MINOR,
    }
}

/// The BTIR minor version that added dtype `dtype` (see [`op_minor`]).
pub fn dtype_minor(dtype: DType) -> u16 {
    match dtype.code() {
        1..=7 => 0,
        8..=23 => 2,
        _ => WIRE_MINOR,
    }
}

/// How to write constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstMode {
    /// Bytes go into the data segment (model and program files).
    Inline,
    /// Each constant becomes a reference to a view passed beside the graph (ABI calls);
    /// the order of the views is the order of [`encode`]'s returned list.
    External,
}

/// Serializes `graph`. With [`ConstMode::External`], returns the ids of the constant
/// tensors in the order their views must be passed.
pub fn encode(graph: &Graph, mode: ConstMode) -> (Vec<u8>, Vec<usize>) {
    let mut w = Writer::default();
    w.buf.extend_from_slice(b"BTIR");
    w.u16(WIRE_MAJOR);
    w.u16(WIRE_MINOR);
    w.u32(HEADER_SIZE);
    w.u32(0);
    w.u64(0); // data_offset, patched below
    let mut external = Vec::new();
    w.graph(graph, Some((mode, &mut external)));
    if !w.data.is_empty() {
        let offset = w.buf.len().next_multiple_of(64);
        w.buf.resize(offset, 0);
        let data = std::mem::take(&mut w.data);
        w.buf.extend_from_slice(&data);
        w.buf[16..24].copy_from_slice(&(offset as u64).to_le_bytes());
    }
    (w.buf, external)
}

/// Reads a serialized graph and validates it. Inline constants are copied into aligned
/// buffers; external ones stay references ([`Storage::External`]).
pub fn decode(bytes: &[u8]) -> Result<Graph, WireError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let magic: [u8; 4] = r.take(4, "magic")?.try_into().expect("4 bytes");
    if &magic != b"BTIR" {
        return Err(WireError::BadMagic { found: magic });
    }
    let (major, minor) = (r.u16("major")?, r.u16("minor")?);
    if major != WIRE_MAJOR {
        return Err(WireError::Version {
            found_major: major,
            found_minor: minor,
            supported_major: WIRE_MAJOR,
        });
    }
    let header_size = r.u32("header_size")? as usize;
    let _flags = r.u32("flags")?;
    let data_offset = r.u64("data_offset")? as usize;
    if header_size < HEADER_SIZE as usize || header_size > bytes.len() {
        return r.invalid(format!("header_size {header_size}"));
    }
    r.pos = header_size;
    let graph = r.graph(bytes, data_offset, 0)?;
    graph.validate()?;
    Ok(graph)
}

#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
    /// The data segment, appended after the graph records.
    data: Vec<u8>,
}

impl Writer {
    /// Writes a `graph` record. `external` is `Some` for the top-level graph only: the
    /// constants of subgraphs always go to the data segment, since external views number
    /// the constants of the graph a plugin is handed, and plugins never run control flow.
    fn graph(&mut self, graph: &Graph, external: Option<(ConstMode, &mut Vec<usize>)>) {
        let (mode, mut external) = match external {
            Some((mode, list)) => (mode, Some(list)),
            None => (ConstMode::Inline, None),
        };
        self.str(&graph.name);
        self.u32(graph.tensors.len() as u32);
        for (id, t) in graph.tensors.iter().enumerate() {
            self.tensor(t);
            match (&t.data, mode) {
                (None, _) => self.u32(0),
                (Some(Storage::Inline(bytes)), ConstMode::Inline) => {
                    let offset = self.data.len().next_multiple_of(64);
                    self.data.resize(offset, 0);
                    self.data.extend_from_slice(bytes.bytes());
                    self.u32(1);
                    self.u64(offset as u64);
                    self.u64(bytes.bytes().len() as u64);
                }
                (Some(_), ConstMode::External) => {
                    let list = external.as_deref_mut().expect("external mode has a list");
                    self.u32(2);
                    self.u32(list.len() as u32);
                    list.push(id);
                }
                (Some(Storage::External(i)), ConstMode::Inline) => {
                    // Re-serializing a graph received from the ABI: keep the reference.
                    self.u32(2);
                    self.u32(*i as u32);
                }
            }
        }
        self.u32(graph.nodes.len() as u32);
        for n in &graph.nodes {
            self.str(&n.name);
            self.u32(n.op.code());
            self.ids(&n.inputs);
            self.ids(&n.outputs);
            self.u32(n.attrs.len() as u32);
            for (k, v) in &n.attrs {
                self.str(k);
                self.attr(v);
            }
        }
        self.ids(&graph.inputs);
        self.ids(&graph.outputs);
    }

    /// A tensor record up to (not including) its storage.
    fn tensor(&mut self, t: &TensorDecl) {
        self.str(&t.name);
        self.u32(t.dtype.code());
        self.u32(t.shape.len() as u32);
        for d in &t.shape {
            match d {
                Dim::Fixed(n) => {
                    self.u32(0);
                    self.u64(*n as u64);
                }
                Dim::Sym(s) => {
                    self.u32(1);
                    self.str(s);
                }
            }
        }
        match &t.quant {
            None => self.u32(0),
            Some(Quant::PerTensor { scale, zero_point }) => {
                self.u32(1);
                self.f32(*scale);
                self.u32(*zero_point as u32);
            }
            Some(Quant::PerAxis {
                axis,
                scales,
                zero_points,
            }) => {
                self.u32(2);
                self.u32(*axis as u32);
                self.u32(scales.len() as u32);
                scales.iter().for_each(|s| self.f32(*s));
                zero_points.iter().for_each(|z| self.u32(*z as u32));
            }
        }
    }

    fn attr(&mut self, v: &Attr) {
        match v {
            Attr::Int(i) => {
                self.u32(1);
                self.u64(*i as u64);
            }
            Attr::Float(f) => {
                self.u32(2);
                self.f32(*f);
            }
            Attr::Ints(v) => {
                self.u32(3);
                self.u32(v.len() as u32);
                v.iter().for_each(|i| self.u64(*i as u64));
            }
            Attr::Floats(v) => {
                self.u32(4);
                self.u32(v.len() as u32);
                v.iter().for_each(|f| self.f32(*f));
            }
            Attr::Str(s) => {
                self.u32(5);
                self.str(s);
            }
            Attr::Graph(g) => {
                self.u32(6);
                let len_at = self.buf.len();
                self.u32(0); // patched below
                let start = self.buf.len();
                self.graph(g, None);
                let len = (self.buf.len() - start) as u32;
                self.buf[len_at..start].copy_from_slice(&len.to_le_bytes());
            }
        }
    }

    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn f32(&mut self, v: f32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.resize(self.buf.len().next_multiple_of(4), 0);
    }
    fn ids(&mut self, ids: &[usize]) {
        self.u32(ids.len() as u32);
        ids.iter().for_each(|&i| self.u32(i as u32));
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(WireError::Truncated {
                offset: self.pos,
                what,
            }),
        }
    }
    fn invalid<T>(&self, message: String) -> Result<T, WireError> {
        Err(WireError::Invalid {
            offset: self.pos,
            message,
        })
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(
            self.take(2, what)?.try_into().expect("2"),
        ))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }
    fn f32(&mut self, what: &'static str) -> Result<f32, WireError> {
        Ok(f32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }
    /// A count whose elements take at least `min_size` bytes each: refuses counts the
    /// remaining buffer cannot hold, so a corrupt count cannot make us allocate gigabytes.
    fn count(&mut self, what: &'static str, min_size: usize) -> Result<usize, WireError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_size) > self.buf.len() - self.pos {
            return self.invalid(format!("{what} {n} exceeds the buffer"));
        }
        Ok(n)
    }
    fn str(&mut self, what: &'static str) -> Result<String, WireError> {
        let n = self.count(what, 1)?;
        let bytes = self.take(n, what)?;
        let s = match std::str::from_utf8(bytes) {
            Ok(s) => s.to_string(),
            Err(_) => return self.invalid(format!("{what} is not UTF-8")),
        };
        self.take(n.next_multiple_of(4) - n, what)?;
        Ok(s)
    }
    fn ids(&mut self, what: &'static str) -> Result<Vec<usize>, WireError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.u32(what).map(|v| v as usize)).collect()
    }
    /// Reads a `graph` record at nesting `depth` (0 for the top level).
    fn graph(&mut self, all: &[u8], data_offset: usize, depth: usize) -> Result<Graph, WireError> {
        let name = self.str("graph name")?;
        let nt = self.count("tensor count", 8)?;
        let mut tensors = Vec::with_capacity(nt);
        for _ in 0..nt {
            tensors.push(self.tensor(all, data_offset)?);
        }
        let nn = self.count("node count", 20)?;
        let mut nodes = Vec::with_capacity(nn);
        for _ in 0..nn {
            let name = self.str("node name")?;
            let code = self.u32("op")?;
            let op = match OpKind::from_code(code) {
                Some(op) => op,
                None => return self.invalid(format!("node '{name}': unknown op code {code}")),
            };
            let inputs = self.ids("node inputs")?;
            let outputs = self.ids("node outputs")?;
            let na = self.count("attribute count", 8)?;
            let mut attrs = std::collections::BTreeMap::new();
            for _ in 0..na {
                let k = self.str("attribute name")?;
                let v = self.attr(&name, &k, all, data_offset, depth)?;
                attrs.insert(k, v);
            }
            nodes.push(Node {
                name,
                op,
                inputs,
                outputs,
                attrs,
            });
        }
        let inputs = self.ids("graph inputs")?;
        let outputs = self.ids("graph outputs")?;
        Ok(Graph {
            name,
            tensors,
            nodes,
            inputs,
            outputs,
        })
    }

    fn attr(
        &mut self,
        node: &str,
        k: &str,
        all: &[u8],
        data_offset: usize,
        depth: usize,
    ) -> Result<Attr, WireError> {
        Ok(match self.u32("attribute kind")? {
            1 => Attr::Int(self.u64("int attribute")? as i64),
            2 => Attr::Float(self.f32("float attribute")?),
            3 => {
                let n = self.count("ints length", 8)?;
                Attr::Ints(
                    (0..n)
                        .map(|_| self.u64("ints").map(|v| v as i64))
                        .collect::<Result<_, _>>()?,
                )
            }
            4 => {
                let n = self.count("floats length", 4)?;
                Attr::Floats(
                    (0..n)
                        .map(|_| self.f32("floats"))
                        .collect::<Result<_, _>>()?,
                )
            }
            5 => Attr::Str(self.str("string attribute")?),
            6 => {
                if depth >= MAX_GRAPH_DEPTH {
                    return self.invalid(format!(
                        "node '{node}': subgraph '{k}' is nested deeper than {MAX_GRAPH_DEPTH} levels"
                    ));
                }
                let len = self.count("graph length", 1)?;
                let end = self.pos + len;
                let mut sub = Reader {
                    buf: &self.buf[..end],
                    pos: self.pos,
                };
                let g = sub.graph(all, data_offset, depth + 1)?;
                if sub.pos != end {
                    return sub.invalid(format!(
                        "node '{node}': subgraph '{k}' ends {} bytes before its length",
                        end - sub.pos
                    ));
                }
                self.pos = end;
                Attr::Graph(Box::new(g))
            }
            kind => {
                return self.invalid(format!(
                    "node '{node}': attribute '{k}' has unknown kind {kind}"
                ))
            }
        })
    }

    fn tensor(&mut self, all: &[u8], data_offset: usize) -> Result<TensorDecl, WireError> {
        let name = self.str("tensor name")?;
        let code = self.u32("dtype")?;
        let Some(dtype) = DType::from_code(code) else {
            return self.invalid(format!("tensor '{name}': unknown dtype code {code}"));
        };
        let rank = self.count("rank", 8)?;
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(match self.u32("dim kind")? {
                0 => Dim::Fixed(self.u64("dim")? as usize),
                1 => Dim::Sym(self.str("dim symbol")?),
                k => return self.invalid(format!("tensor '{name}': dim kind {k}")),
            });
        }
        let quant = match self.u32("quant kind")? {
            0 => None,
            1 => Some(Quant::PerTensor {
                scale: self.f32("scale")?,
                zero_point: self.u32("zero point")? as i32,
            }),
            2 => {
                let axis = self.u32("quant axis")? as usize;
                let n = self.count("quant count", 8)?;
                let scales = (0..n)
                    .map(|_| self.f32("scales"))
                    .collect::<Result<_, _>>()?;
                let zero_points = (0..n)
                    .map(|_| self.u32("zero points").map(|v| v as i32))
                    .collect::<Result<_, _>>()?;
                Some(Quant::PerAxis {
                    axis,
                    scales,
                    zero_points,
                })
            }
            k => return self.invalid(format!("tensor '{name}': quant kind {k}")),
        };
        let data = match self.u32("storage kind")? {
            0 => None,
            1 => {
                let (off, len) = (
                    self.u64("data offset")? as usize,
                    self.u64("data len")? as usize,
                );
                let start = data_offset.checked_add(off);
                let range = start.and_then(|s| Some(s..s.checked_add(len)?));
                match range.filter(|r| data_offset > 0 && r.end <= all.len()) {
                    Some(r) => Some(Storage::Inline(TensorData::from_bytes(&all[r]))),
                    None => {
                        return self.invalid(format!(
                            "tensor '{name}': data [{off}, +{len}) lies outside the data segment"
                        ))
                    }
                }
            }
            2 => Some(Storage::External(self.u32("external index")? as usize)),
            k => return self.invalid(format!("tensor '{name}': storage kind {k}")),
        };
        let fixed: Option<Vec<usize>> = shape.iter().map(Dim::fixed).collect();
        if let (Some(Storage::Inline(d)), Some(dims)) = (&data, &fixed) {
            let want = dims.iter().try_fold(dtype.size(), |a, &n| a.checked_mul(n));
            if want != Some(d.bytes().len()) {
                return self.invalid(format!(
                    "tensor '{name}': {} data bytes do not fit shape {dims:?} of {dtype}",
                    d.bytes().len()
                ));
            }
        }
        if let Some(Quant::PerAxis { axis, scales, .. }) = &quant {
            let extent = shape.get(*axis).map(Dim::fixed);
            match extent {
                None => {
                    return self.invalid(format!(
                        "tensor '{name}': quantization axis {axis} beyond rank {}",
                        shape.len()
                    ))
                }
                Some(Some(n)) if n != scales.len() => {
                    return self.invalid(format!(
                        "tensor '{name}': {} per-axis scales for an axis of extent {n}",
                        scales.len()
                    ))
                }
                _ => {}
            }
        }
        Ok(TensorDecl {
            name,
            dtype,
            shape,
            quant,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::GraphBuilder;

    #[test]
    fn every_code_has_the_minor_that_added_it() {
        assert_eq!(op_minor(OpKind::Relu), 0);
        assert_eq!(op_minor(OpKind::Sqrt), 1);
        assert_eq!(op_minor(OpKind::DequantizeLinear), 1);
        assert_eq!(op_minor(OpKind::Ceil), 2);
        assert_eq!(op_minor(OpKind::CastLike), 2);
        assert_eq!(op_minor(OpKind::GreaterOrEqual), 3);
        assert_eq!(op_minor(OpKind::Hardmax), 3);
        assert_eq!(op_minor(OpKind::Range), 4);
        assert_eq!(op_minor(OpKind::CumProd), 4);
        assert_eq!(op_minor(OpKind::GridSample), 5);
        assert_eq!(op_minor(OpKind::Einsum), 5);
        assert_eq!(op_minor(OpKind::DFT), 5);
        assert_eq!(op_minor(OpKind::BlackmanWindow), 5);
        assert_eq!(op_minor(OpKind::NonMaxSuppression), 5);
        assert_eq!(op_minor(OpKind::Compress), 5);
        assert_eq!(op_minor(OpKind::Det), 5);
        assert_eq!(op_minor(OpKind::RoiAlign), 5);
        assert_eq!(op_minor(OpKind::TensorScatter), 5);
        assert_eq!(op_minor(OpKind::MelWeightMatrix), 5);
        assert_eq!(op_minor(OpKind::ReverseSequence), 5);
        assert_eq!(op_minor(OpKind::AffineGrid), 5);
        assert_eq!(op_minor(OpKind::BitCast), 5);
        assert_eq!(op_minor(OpKind::RNN), 5);
        assert_eq!(op_minor(OpKind::LinearAttention), 5);
        assert_eq!(op_minor(OpKind::Attention), 5);
        assert_eq!(op_minor(OpKind::RotaryEmbedding), 5);
        assert_eq!(op_minor(OpKind::DeformConv), 5);
        assert_eq!(op_minor(OpKind::MatMulInteger), 5);
        assert_eq!(op_minor(OpKind::ConvInteger), 5);
        assert_eq!(op_minor(OpKind::MaxUnpool), 5);
        assert_eq!(op_minor(OpKind::Col2Im), 5);
        assert_eq!(op_minor(OpKind::CausalConvWithState), 5);
        assert_eq!(dtype_minor(DType::Bool), 0);
        assert_eq!(dtype_minor(DType::F64), 2);
        for &op in OpKind::ALL {
            assert!(op_minor(op) <= WIRE_MINOR, "{op}");
        }
    }

    fn sample() -> Graph {
        let mut b = GraphBuilder::new("sample");
        let x = b.input("x", DType::F32, &[Dim::Sym("batch".into()), Dim::Fixed(4)]);
        let w = b.constant_f32("w", &[4], &[1.0, -2.0, 3.5, 0.0]);
        b.set_quant(
            w,
            Quant::PerAxis {
                axis: 0,
                scales: vec![0.5; 4],
                zero_points: vec![0, 1, 2, 3],
            },
        );
        let y = b.node(OpKind::Add, &[x, w], &[]).unwrap();
        let z = b
            .node(
                OpKind::Clip,
                &[y],
                &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
            )
            .unwrap();
        b.output(z);
        b.finish().unwrap()
    }

    #[test]
    fn inline_round_trip_is_exact() {
        let g = sample();
        let (bytes, ext) = encode(&g, ConstMode::Inline);
        assert!(ext.is_empty());
        assert_eq!(decode(&bytes).unwrap(), g);
    }

    #[test]
    fn external_constants_become_references() {
        let g = sample();
        let (bytes, ext) = encode(&g, ConstMode::External);
        assert_eq!(ext, vec![1]);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.tensors[1].data, Some(Storage::External(0)));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let (bytes, _) = encode(&sample(), ConstMode::Inline);
        for n in 0..bytes.len() - 1 {
            assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes decoded");
        }
    }

    #[test]
    fn newer_major_is_refused_with_versions() {
        let (mut bytes, _) = encode(&sample(), ConstMode::Inline);
        bytes[4] = 2;
        let e = decode(&bytes).unwrap_err();
        assert!(e.to_string().contains(&format!("2.{WIRE_MINOR}")), "{e}");
    }

    #[test]
    fn every_dtype_round_trips_and_an_unknown_code_is_refused() {
        let mut b = crate::ir::GraphBuilder::new("dtypes");
        for d in DType::ALL {
            let x = b.input_fixed(&format!("x_{d}"), d, &[2]);
            let y = b.node(OpKind::Identity, &[x], &[]).unwrap();
            b.output(y);
        }
        let g = b.finish().unwrap();
        let (bytes, _) = encode(&g, ConstMode::Inline);
        assert_eq!(decode(&bytes).unwrap(), g);
        // The first tensor's dtype code follows its name: header, graph name, tensor
        // count, then the name "x_f32" (u32 length + 8 padded bytes).
        let at = HEADER_SIZE as usize + 4 + 8 + 4 + 4 + 8;
        assert_eq!(bytes[at], DType::F32.code() as u8);
        let mut bad = bytes.clone();
        bad[at] = DType::ALL.len() as u8 + 1;
        let e = decode(&bad).unwrap_err().to_string();
        assert!(e.contains("unknown dtype code 24"), "{e}");
    }

    /// Two levels of If per `depth`: the then-branches nest, the else-branches are leaves;
    /// every leaf holds a constant.
    fn nested(depth: usize) -> Graph {
        let mut b = GraphBuilder::new(&format!("level{depth}"));
        let c = b.input_fixed("c", DType::Bool, &[]);
        let x = b.input_fixed("x", DType::F32, &[2]);
        let y = if depth == 0 {
            let k = b.constant_f32("k", &[2], &[0.5, -4.0]);
            b.node(OpKind::Add, &[x, k], &[]).unwrap()
        } else {
            let branch = || {
                let mut s = GraphBuilder::new("branch");
                let c = s.input_fixed("c", DType::Bool, &[]);
                let x = s.input_fixed("x", DType::F32, &[2]);
                let y = s
                    .node(
                        OpKind::If,
                        &[c, c, x],
                        &[
                            ("then_branch", Attr::Graph(Box::new(nested(depth - 1)))),
                            ("else_branch", Attr::Graph(Box::new(nested(0)))),
                        ],
                    )
                    .unwrap();
                s.output(y);
                Attr::Graph(Box::new(s.finish().unwrap()))
            };
            let leaf = Attr::Graph(Box::new(nested(0)));
            b.node(
                OpKind::If,
                &[c, c, x],
                &[("then_branch", branch()), ("else_branch", leaf)],
            )
            .unwrap()
        };
        b.output(y);
        b.finish().unwrap()
    }

    #[test]
    fn subgraphs_round_trip_with_their_constants_inline() {
        let g = nested(3);
        let (bytes, ext) = encode(&g, ConstMode::Inline);
        assert!(ext.is_empty());
        assert_eq!(decode(&bytes).unwrap(), g);
        // Across the ABI only the top level's constants become views; this graph has none
        // there, so every constant (all inside subgraphs) stays inline.
        let (bytes, ext) = encode(&g, ConstMode::External);
        assert!(ext.is_empty());
        assert_eq!(decode(&bytes).unwrap(), g);
    }

    #[test]
    fn nesting_beyond_the_limit_is_refused() {
        // nested(d) holds If levels 1..=2d; the innermost subgraph sits at depth 2d.
        let ok = nested(MAX_GRAPH_DEPTH / 2);
        assert!(decode(&encode(&ok, ConstMode::Inline).0).is_ok());
        let deep = nested(MAX_GRAPH_DEPTH / 2 + 1);
        let e = decode(&encode(&deep, ConstMode::Inline).0).unwrap_err();
        assert!(e.to_string().contains("nested deeper"), "{e}");
    }

    #[test]
    fn a_subgraph_shorter_than_its_length_is_refused() {
        let g = nested(1);
        let (mut bytes, _) = encode(&g, ConstMode::Inline);
        // The first graph attribute: its kind (6) follows the name "else_branch".
        let name = b"else_branch";
        let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
        let len_at = at + name.len().next_multiple_of(4) + 4;
        let len = u32::from_le_bytes(bytes[len_at..len_at + 4].try_into().unwrap());
        bytes[len_at..len_at + 4].copy_from_slice(&(len + 4).to_le_bytes());
        let e = decode(&bytes).unwrap_err();
        assert!(e.to_string().contains("before its length"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn flipped_bytes_never_panic(pos in 0usize..400, val in proptest::num::u8::ANY) {
            let (mut bytes, _) = encode(&sample(), ConstMode::Inline);
            let p = pos % bytes.len();
            bytes[p] = val;
            let _ = decode(&bytes);
        }
    }
}
