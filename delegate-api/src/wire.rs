//! The serialized form of the IR ("BTIR"), version 1.2 (1.1 added the op codes 20-43 and
//! 50-67 of the ONNX milestone, 1.2 the dtype codes 8-23 and op code 70; the layout is
//! that of 1.0).
//!
//! The same bytes are what `supports`/`compile` receive across the C ABI and what the
//! program file (`.baton`) stores, so they must be readable from C with no generator and
//! no library. That ruled the design:
//!
//! - **Why not FlatBuffers or protobuf.** Both were weighed. Either would make every C
//!   vendor build flatcc or protobuf-c and keep its generated code in step with ours, for a
//!   schema of five record kinds. A C reader that validates as much as [`decode`] needs only `memcpy` and
//!   bounds checks (see `delegate-api/tests/c_plugin/btir_reader.h`), and the Rust side has no
//!   generated code to commit or regenerate.
//! - **Constants never travel inside the graph across the ABI.** A tensor's storage is
//!   `inline` (an offset into the data segment: model and program files) or `external`
//!   (the index of a constant view passed beside the graph: plugin calls). Weights are
//!   therefore passed as views, never serialized or copied.
//!
//! Layout (all integers little-endian; readers copy with `memcpy`, fields are 4-aligned):
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
//!                                          | 4 u32 n, f32[n] | 5 str)
//! ```
//!
//! `header_size` lets a later minor version grow the header; readers skip what they do not
//! know. A new minor version only appends: fields at the end of the graph, new codes that
//! old readers reject with a clear error. A new major version is refused.

use crate::error::WireError;
use crate::ir::{Attr, DType, Dim, Graph, Node, OpKind, Quant, Storage, TensorData, TensorDecl};

/// Major version of the wire format this build reads and writes.
pub const WIRE_MAJOR: u16 = 1;
/// Minor version this build writes.
pub const WIRE_MINOR: u16 = 2;
const HEADER_SIZE: u32 = 24;

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
    let mut data: Vec<u8> = Vec::new();
    let mut external = Vec::new();
    w.str(&graph.name);
    w.u32(graph.tensors.len() as u32);
    for (id, t) in graph.tensors.iter().enumerate() {
        w.str(&t.name);
        w.u32(t.dtype.code());
        w.u32(t.shape.len() as u32);
        for d in &t.shape {
            match d {
                Dim::Fixed(n) => {
                    w.u32(0);
                    w.u64(*n as u64);
                }
                Dim::Sym(s) => {
                    w.u32(1);
                    w.str(s);
                }
            }
        }
        match &t.quant {
            None => w.u32(0),
            Some(Quant::PerTensor { scale, zero_point }) => {
                w.u32(1);
                w.f32(*scale);
                w.u32(*zero_point as u32);
            }
            Some(Quant::PerAxis {
                axis,
                scales,
                zero_points,
            }) => {
                w.u32(2);
                w.u32(*axis as u32);
                w.u32(scales.len() as u32);
                scales.iter().for_each(|s| w.f32(*s));
                zero_points.iter().for_each(|z| w.u32(*z as u32));
            }
        }
        match (&t.data, mode) {
            (None, _) => w.u32(0),
            (Some(Storage::Inline(bytes)), ConstMode::Inline) => {
                let offset = data.len().next_multiple_of(64);
                data.resize(offset, 0);
                data.extend_from_slice(bytes.bytes());
                w.u32(1);
                w.u64(offset as u64);
                w.u64(bytes.bytes().len() as u64);
            }
            (Some(_), ConstMode::External) => {
                w.u32(2);
                w.u32(external.len() as u32);
                external.push(id);
            }
            (Some(Storage::External(i)), ConstMode::Inline) => {
                // Re-serializing a graph received from the ABI: keep the reference.
                w.u32(2);
                w.u32(*i as u32);
            }
        }
    }
    w.u32(graph.nodes.len() as u32);
    for n in &graph.nodes {
        w.str(&n.name);
        w.u32(n.op.code());
        w.ids(&n.inputs);
        w.ids(&n.outputs);
        w.u32(n.attrs.len() as u32);
        for (k, v) in &n.attrs {
            w.str(k);
            match v {
                Attr::Int(i) => {
                    w.u32(1);
                    w.u64(*i as u64);
                }
                Attr::Float(f) => {
                    w.u32(2);
                    w.f32(*f);
                }
                Attr::Ints(v) => {
                    w.u32(3);
                    w.u32(v.len() as u32);
                    v.iter().for_each(|i| w.u64(*i as u64));
                }
                Attr::Floats(v) => {
                    w.u32(4);
                    w.u32(v.len() as u32);
                    v.iter().for_each(|f| w.f32(*f));
                }
                Attr::Str(s) => {
                    w.u32(5);
                    w.str(s);
                }
            }
        }
    }
    w.ids(&graph.inputs);
    w.ids(&graph.outputs);
    if !data.is_empty() {
        let offset = w.buf.len().next_multiple_of(64);
        w.buf.resize(offset, 0);
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

    let name = r.str("graph name")?;
    let nt = r.count("tensor count", 8)?;
    let mut tensors = Vec::with_capacity(nt);
    for _ in 0..nt {
        tensors.push(r.tensor(bytes, data_offset)?);
    }
    let nn = r.count("node count", 20)?;
    let mut nodes = Vec::with_capacity(nn);
    for _ in 0..nn {
        let name = r.str("node name")?;
        let code = r.u32("op")?;
        let op = match OpKind::from_code(code) {
            Some(op) => op,
            None => return r.invalid(format!("node '{name}': unknown op code {code}")),
        };
        let inputs = r.ids("node inputs")?;
        let outputs = r.ids("node outputs")?;
        let na = r.count("attribute count", 8)?;
        let mut attrs = std::collections::BTreeMap::new();
        for _ in 0..na {
            let k = r.str("attribute name")?;
            let v = match r.u32("attribute kind")? {
                1 => Attr::Int(r.u64("int attribute")? as i64),
                2 => Attr::Float(r.f32("float attribute")?),
                3 => {
                    let n = r.count("ints length", 8)?;
                    Attr::Ints(
                        (0..n)
                            .map(|_| r.u64("ints").map(|v| v as i64))
                            .collect::<Result<_, _>>()?,
                    )
                }
                4 => {
                    let n = r.count("floats length", 4)?;
                    Attr::Floats((0..n).map(|_| r.f32("floats")).collect::<Result<_, _>>()?)
                }
                5 => Attr::Str(r.str("string attribute")?),
                kind => {
                    return r.invalid(format!(
                        "node '{name}': attribute '{k}' has unknown kind {kind}"
                    ))
                }
            };
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
    let inputs = r.ids("graph inputs")?;
    let outputs = r.ids("graph outputs")?;
    let graph = Graph {
        name,
        tensors,
        nodes,
        inputs,
        outputs,
    };
    graph.validate()?;
    Ok(graph)
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
