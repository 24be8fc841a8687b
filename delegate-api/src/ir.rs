//! The Baton intermediate representation: a graph of nodes over typed tensors.
//!
//! The IR is deliberately close to ONNX (op names, attribute names and input order follow
//! the ONNX operator set) so that importing a model is a translation, not a reinterpretation.
//! Two differences matter to plugin authors:
//! - operands that ONNX lets be run-time inputs but that real models always give as
//!   constants (Clip's bounds, Reshape's target shape) may be attributes here;
//! - every tensor a plugin sees in `compile` has a concrete shape: symbolic dimensions
//!   exist in models and are bound by the host before partitioning.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub use crate::builder::GraphBuilder;
pub use crate::dtype::DType;
use crate::error::IrError;

/// Index of a tensor in [`Graph::tensors`].
pub type TensorId = usize;
/// Index of a node in [`Graph::nodes`].
pub type NodeId = usize;

/// One dimension of a shape: a fixed extent or a named symbol bound at run time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A known extent, in elements. 0 is allowed and makes the tensor empty.
    Fixed(usize),
    /// A named extent (`"N"`, `"batch"`) fixed only when the model runs. Every dimension
    /// carrying the same name has the same extent. The host binds symbols from the actual
    /// inputs before partitioning, so `compile` never sees one.
    Sym(String),
}

impl Dim {
    /// The extent if fixed.
    pub fn fixed(&self) -> Option<usize> {
        match self {
            Dim::Fixed(n) => Some(*n),
            Dim::Sym(_) => None,
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

/// Formats a shape as `[1,3,224,224]`.
pub fn shape_string(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// Quantization parameters: `real = scale * (q - zero_point)`.
#[derive(Clone, Debug, PartialEq)]
///
/// The semantics are those of ONNX `QuantizeLinear`/`DequantizeLinear`: a stored integer `q`
/// (the tensor's `dtype`, usually `i8` or `u8`) stands for the real value above, and
/// `zero_point` is the stored value that represents real zero exactly.
pub enum Quant {
    /// One scale and zero point for every element.
    PerTensor {
        /// Real-valued step between consecutive stored integers; positive.
        scale: f32,
        /// The stored integer that means real zero; within the range of the dtype.
        zero_point: i32,
    },
    /// One scale and zero point per index along `axis` (typically output channels of weights).
    PerAxis {
        /// The dimension the parameters run along, an index into the tensor's shape.
        axis: usize,
        /// One scale per index along `axis`: as many entries as that dimension's extent.
        scales: Vec<f32>,
        /// One zero point per index along `axis`, the same length as `scales`.
        zero_points: Vec<i32>,
    },
}

/// Constant bytes, 64-byte aligned so kernels may view them as any element type.
///
/// Cloning shares the buffer: constants are never copied once loaded. The bytes either
/// live in a buffer of their own or inside a larger one shared by many constants (a
/// program file mapped into memory), so that loading a program hands its weights to
/// plugins without a copy.
#[derive(Clone)]
pub struct TensorData {
    backing: Backing,
}

#[derive(Clone)]
enum Backing {
    Owned(Arc<AlignedBytes>),
    Shared {
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    },
}

impl TensorData {
    /// Copies `bytes` into a new aligned buffer.
    pub fn from_bytes(bytes: &[u8]) -> TensorData {
        TensorData {
            backing: Backing::Owned(Arc::new(AlignedBytes::copy_of(bytes))),
        }
    }

    /// Builds constant data from plain-old-data elements.
    pub fn from_slice<T: bytemuck::Pod>(values: &[T]) -> TensorData {
        TensorData::from_bytes(bytemuck::cast_slice(values))
    }

    /// The bytes `range` of `owner`, kept alive by it and not copied; `None` when the range
    /// is outside `owner` or does not start 64-byte aligned in memory (the promise every
    /// `TensorData` makes to kernels).
    pub fn from_shared(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        range: std::ops::Range<usize>,
    ) -> Option<TensorData> {
        let all = (*owner).as_ref();
        let bytes = all.get(range.clone())?;
        if !(bytes.as_ptr() as usize).is_multiple_of(64) && !bytes.is_empty() {
            return None;
        }
        Some(TensorData {
            backing: Backing::Shared {
                start: range.start,
                len: bytes.len(),
                owner,
            },
        })
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.backing {
            Backing::Owned(buf) => buf.as_slice(),
            Backing::Shared { owner, start, len } => &(**owner).as_ref()[*start..*start + *len],
        }
    }
}

impl fmt::Debug for TensorData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorData({} bytes)", self.bytes().len())
    }
}

impl PartialEq for TensorData {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

/// A heap buffer whose start is aligned to 64 bytes (a cache line and the widest SIMD load).
pub struct AlignedBytes {
    words: Vec<Align64>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Align64([u8; 64]);

impl AlignedBytes {
    /// A zero-filled buffer of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBytes {
        AlignedBytes {
            words: vec![Align64([0; 64]); len.div_ceil(64)],
            len,
        }
    }

    /// A zero-filled buffer of `len` bytes, or `None` where the allocator cannot provide
    /// it: for sizes that come from files or flags, where running out of memory must be an
    /// error and not an abort.
    pub fn try_zeroed(len: usize) -> Option<AlignedBytes> {
        let mut words = Vec::new();
        words.try_reserve_exact(len.div_ceil(64)).ok()?;
        words.resize(len.div_ceil(64), Align64([0; 64]));
        Some(AlignedBytes { words, len })
    }

    /// A buffer holding a copy of `bytes`. One pass over the buffer, where [`zeroed`]
    /// and a copy write it twice: outputs handed to a caller are made this way on every
    /// run, and at several MiB the zero fill cost a third of the copy.
    ///
    /// [`zeroed`]: AlignedBytes::zeroed
    pub fn copy_of(bytes: &[u8]) -> AlignedBytes {
        let n = bytes.len().div_ceil(64);
        let mut words: Vec<Align64> = Vec::with_capacity(n);
        // SAFETY: the allocation holds `n * 64 >= bytes.len()` bytes; the first
        // `bytes.len()` are copied from `bytes` (a distinct allocation) and the rest of the
        // last word is zeroed, so all `n` words are initialised before `set_len`.
        unsafe {
            let p = words.as_mut_ptr().cast::<u8>();
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
            std::ptr::write_bytes(p.add(bytes.len()), 0, n * 64 - bytes.len());
            words.set_len(n);
        }
        AlignedBytes {
            words,
            len: bytes.len(),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes, and u8 has no alignment needs.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where a constant's bytes live.
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    /// In this graph (a model or program file).
    Inline(TensorData),
    /// Passed beside the graph, as the `n`-th constant view of an ABI call. This is how
    /// weights cross the plugin boundary without being copied.
    External(usize),
}

/// A tensor declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDecl {
    /// The tensor's name in the model. Graph inputs and outputs are bound by it
    /// ([`Graph::tensor_by_name`]), and errors and reports use it.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The extents, outermost first (row-major); empty for a scalar. May hold symbolic
    /// dimensions until the host binds them.
    pub shape: Vec<Dim>,
    /// `Some` when the stored values are quantized integers; `None` for plain tensors.
    pub quant: Option<Quant>,
    /// `Some` for constants (weights, biases, shape operands).
    pub data: Option<Storage>,
}

impl TensorDecl {
    /// The shape if every dimension is fixed.
    pub fn static_shape(&self) -> Option<Vec<usize>> {
        self.shape.iter().map(Dim::fixed).collect()
    }

    /// Whether this tensor is a constant.
    pub fn is_const(&self) -> bool {
        self.data.is_some()
    }
}

mod ops;
pub use ops::OpKind;

impl OpKind {
    /// The wire/ABI code.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// Inverse of [`OpKind::code`].
    pub fn from_code(code: u32) -> Option<OpKind> {
        OpKind::ALL.iter().copied().find(|o| o.code() == code)
    }

    /// Whether the op is an element-wise binary op with numpy-style broadcasting.
    pub fn is_binary_elementwise(self) -> bool {
        matches!(self, OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div)
    }

    /// Whether the op is control flow ([`OpKind::If`], [`OpKind::Loop`]): its work is done by
    /// subgraphs held in [`Attr::Graph`] attributes.
    ///
    /// Control flow always runs on the host; plugins never receive it. Its subgraphs are
    /// *closed*: every value of an enclosing graph that a subgraph reads is passed to the
    /// node as an explicit extra input (a "capture") and declared as an input of the
    /// subgraph, rather than referenced by name across scopes as ONNX does. The partitioner,
    /// the memory planner and the scheduler therefore see every real data dependency on the
    /// node itself, and a subgraph can be planned, run or serialized on its own. Outer
    /// constants are copied into the subgraph (sharing their bytes) instead of captured, so
    /// the shape rules and constant folding see them.
    pub fn is_control_flow(self) -> bool {
        matches!(self, OpKind::If | OpKind::Loop)
    }

    /// Whether the op is an element-wise unary op.
    pub fn is_unary_elementwise(self) -> bool {
        matches!(
            self,
            OpKind::Relu | OpKind::Clip | OpKind::Sigmoid | OpKind::Tanh
        )
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
///
/// The kinds are ONNX's attribute kinds, minus tensors and lists of graphs; BTIR stores
/// them under the codes 1 to 6 in the order listed here.
pub enum Attr {
    /// A single integer; flags such as `transA` or `ceil_mode` are 0 or 1.
    Int(i64),
    /// A single float (`alpha`, Clip's `min`). Readers that expect a float accept an
    /// `Int` too ([`Node::attr_float`]).
    Float(f32),
    /// A list of integers: `pads`, `strides`, `perm`, Reshape's `shape`.
    Ints(Vec<i64>),
    /// A list of floats. No op of the current set reads one.
    Floats(Vec<f32>),
    /// A UTF-8 string, such as `auto_pad`.
    Str(String),
    /// A subgraph: the branches of [`OpKind::If`], the body of [`OpKind::Loop`]. It is
    /// closed (see [`OpKind::is_control_flow`]): it names no tensor of the graph around it.
    Graph(Box<Graph>),
}

/// A node: one op applied to input tensors, producing output tensors.
///
/// Optional inputs (Gemm's `C`, Conv's bias) may only be omitted from the end.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Names the node in errors and partition reports (see [`Node::label`]). Nothing is
    /// looked up by it, and uniqueness is not checked.
    pub name: String,
    /// The operator.
    pub op: OpKind,
    /// The operands, in the ONNX input order of `op`.
    pub inputs: Vec<TensorId>,
    /// The tensors this node defines; no other node and no graph input defines them.
    pub outputs: Vec<TensorId>,
    /// Attributes by ONNX name. An absent attribute takes the op's default.
    pub attrs: BTreeMap<String, Attr>,
}

impl Node {
    /// An integer attribute or its default.
    pub fn attr_int(&self, name: &str, default: i64) -> i64 {
        match self.attrs.get(name) {
            Some(Attr::Int(v)) => *v,
            _ => default,
        }
    }

    /// A float attribute or its default.
    pub fn attr_float(&self, name: &str, default: f32) -> f32 {
        match self.attrs.get(name) {
            Some(Attr::Float(v)) => *v,
            Some(Attr::Int(v)) => *v as f32,
            _ => default,
        }
    }

    /// An integer-list attribute, if present.
    pub fn attr_ints(&self, name: &str) -> Option<&[i64]> {
        match self.attrs.get(name) {
            Some(Attr::Ints(v)) => Some(v),
            _ => None,
        }
    }

    /// A subgraph attribute, if present.
    pub fn attr_graph(&self, name: &str) -> Option<&Graph> {
        match self.attrs.get(name) {
            Some(Attr::Graph(g)) => Some(g),
            _ => None,
        }
    }

    /// A string attribute or its default.
    pub fn attr_str<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        match self.attrs.get(name) {
            Some(Attr::Str(v)) => v,
            _ => default,
        }
    }

    /// `name (Op)`, the way errors and reports name a node.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.op)
    }
}

/// A dataflow graph. Nodes are stored in a topological order (checked by [`Graph::validate`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// The model's name; subgraphs cut out of it keep it.
    pub name: String,
    /// Every tensor of the graph: inputs, constants and intermediate values. A
    /// [`TensorId`] is an index into this list.
    pub tensors: Vec<TensorDecl>,
    /// The nodes, producers before consumers. A [`NodeId`] is an index into this list,
    /// and `supports` answers in this order.
    pub nodes: Vec<Node>,
    /// The run-time inputs (never constants, except in a graph the host specialised for
    /// the values of its value inputs: `baton_reference::values`). Their order is the
    /// order of the input views of `execute`.
    pub inputs: Vec<TensorId>,
    /// The results. Their order is the order of the output views of `execute`.
    pub outputs: Vec<TensorId>,
}

impl Graph {
    /// Finds a tensor by name.
    pub fn tensor_by_name(&self, name: &str) -> Option<TensorId> {
        self.tensors.iter().position(|t| t.name == name)
    }

    /// For each tensor, the node producing it (`None` for inputs and constants).
    pub fn producers(&self) -> Vec<Option<NodeId>> {
        let mut p = vec![None; self.tensors.len()];
        for (n, node) in self.nodes.iter().enumerate() {
            for &o in &node.outputs {
                p[o] = Some(n);
            }
        }
        p
    }

    /// For each tensor, the nodes reading it.
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut c = vec![Vec::new(); self.tensors.len()];
        for (n, node) in self.nodes.iter().enumerate() {
            for &i in &node.inputs {
                if !c[i].contains(&n) {
                    c[i].push(n);
                }
            }
        }
        c
    }

    /// Checks structural soundness: indices in range, every tensor defined once, nodes in
    /// topological order, outputs defined, and the same of every subgraph. Errors name the
    /// node at fault.
    pub fn validate(&self) -> Result<(), IrError> {
        for node in &self.nodes {
            for (k, v) in &node.attrs {
                if let Attr::Graph(g) = v {
                    g.validate().map_err(|e| {
                        IrError::Malformed(format!("subgraph '{k}' of node {}: {e}", node.label()))
                    })?;
                }
            }
        }
        let nt = self.tensors.len();
        let mut defined = vec![false; nt];
        for &i in &self.inputs {
            if i >= nt {
                return Err(IrError::BadIndex(format!("graph input index {i}")));
            }
            defined[i] = true;
        }
        for (t, decl) in self.tensors.iter().enumerate() {
            if decl.data.is_some() {
                defined[t] = true;
            }
        }
        for node in &self.nodes {
            for &i in &node.inputs {
                if i >= nt {
                    return Err(IrError::BadIndex(format!(
                        "node {}: input index {i}",
                        node.label()
                    )));
                }
                if !defined[i] {
                    return Err(IrError::Malformed(format!(
                        "node {} reads tensor '{}' before it is produced (nodes must be in topological order)",
                        node.label(),
                        self.tensors[i].name
                    )));
                }
            }
            for &o in &node.outputs {
                if o >= nt {
                    return Err(IrError::BadIndex(format!(
                        "node {}: output index {o}",
                        node.label()
                    )));
                }
                if defined[o] {
                    return Err(IrError::Malformed(format!(
                        "node {} writes tensor '{}', which is already defined",
                        node.label(),
                        self.tensors[o].name
                    )));
                }
                defined[o] = true;
            }
        }
        for &o in &self.outputs {
            if o >= nt || !defined[o] {
                return Err(IrError::Malformed(format!(
                    "graph output index {o} is never produced"
                )));
            }
        }
        Ok(())
    }

    /// Cuts the nodes `nodes` (any order) out as a graph of their own.
    ///
    /// Its inputs are the non-constant tensors read but not produced inside; its outputs are
    /// the tensors produced inside that are read outside or are outputs of `self`. Constants
    /// are kept, sharing their bytes. The map returned gives, for each tensor of the
    /// subgraph, its id in `self`.
    pub fn extract(&self, nodes: &[NodeId]) -> (Graph, Vec<TensorId>) {
        let mut sorted: Vec<NodeId> = nodes.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let inside = |n: NodeId| sorted.binary_search(&n).is_ok();
        let producers = self.producers();
        let consumers = self.consumers();

        let mut map_back: Vec<TensorId> = Vec::new();
        let mut local: BTreeMap<TensorId, TensorId> = BTreeMap::new();
        let mut sub = Graph {
            name: self.name.clone(),
            ..Graph::default()
        };
        let mut intern = |t: TensorId, sub: &mut Graph, map_back: &mut Vec<TensorId>| -> TensorId {
            *local.entry(t).or_insert_with(|| {
                sub.tensors.push(self.tensors[t].clone());
                map_back.push(t);
                sub.tensors.len() - 1
            })
        };
        for &n in &sorted {
            let node = &self.nodes[n];
            for &i in &node.inputs {
                let is_external = producers[i].is_none_or(|p| !inside(p));
                let id = intern(i, &mut sub, &mut map_back);
                if is_external && !self.tensors[i].is_const() && !sub.inputs.contains(&id) {
                    sub.inputs.push(id);
                }
            }
            let inputs = node
                .inputs
                .iter()
                .map(|&i| intern(i, &mut sub, &mut map_back))
                .collect();
            let outputs: Vec<TensorId> = node
                .outputs
                .iter()
                .map(|&o| intern(o, &mut sub, &mut map_back))
                .collect();
            for (&o, &lo) in node.outputs.iter().zip(&outputs) {
                let read_outside = consumers[o].iter().any(|&c| !inside(c));
                if read_outside || self.outputs.contains(&o) {
                    sub.outputs.push(lo);
                }
            }
            sub.nodes.push(Node {
                inputs,
                outputs,
                ..node.clone()
            });
        }
        (sub, map_back)
    }
}
