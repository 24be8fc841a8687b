//! What every small delegate would otherwise write itself, so that a plugin for a few ops
//! is its support rules and its kernels and nothing else:
//!
//! - **a default blob**: [`graph_blob`] (what [`Delegate::compile`] returns unless a
//!   delegate overrides it) is the subgraph itself, serialized with
//!   [`wire::encode`]. A delegate with no format of its own (no packed
//!   weights, no command stream) needs nothing else: the blob is self-contained, versioned,
//!   checked when read, and the constants stay references to the views `init` receives;
//! - **an executable that runs that blob node by node**: [`GraphExec`] decodes it with
//!   [`wire::decode`], copies the constants it refers to (views are
//!   borrowed for the `init` call only), and on every execute calls the delegate's kernel
//!   ([`NodeKernel`]) once per node, in order, with the node's input values and output
//!   buffers, then copies the graph's outputs to the host's;
//! - **numpy broadcasting** for element-wise kernels: [`broadcast_binary`];
//! - **the common declines**: [`require_operands`] (every operand of one of some dtypes,
//!   with fixed extents) and [`Decline::op`].
//!
//! [`Delegate::compile`]: crate::sdk::Delegate::compile
//! [`Delegate`]: crate::sdk::Delegate
//!
//! A delegate that needs its own blob (packed weights, a device program) or runs a whole
//! partition at once implements [`Delegate::compile`] and its own [`Executable`] instead.

use crate::ir::{DType, Dim, Graph, Node, Storage, TensorId};
use crate::sdk::{
    abi, Decline, DeclineReason, DelegateError, Device, Executable, MemoryUse, PluginInfo,
    TensorMut, TensorRef,
};
use crate::tensor::Tensor;
use crate::wire::{self, ConstMode};

/// The default blob of [`Delegate::compile`](crate::sdk::Delegate::compile): the subgraph
/// in BTIR.
///
/// Encoded with [`ConstMode::Inline`], which keeps every constant the host passed as a
/// view ([`Storage::External`]) a reference to that view: the weights are not copied into
/// the blob, and `init`, which receives the same views in the same order, finds them
/// again. A graph whose constants are inline (built in the delegate's own tests) carries
/// them in the blob.
pub fn graph_blob(graph: &Graph) -> Vec<u8> {
    wire::encode(graph, ConstMode::Inline).0
}

impl PluginInfo {
    /// The usual facts: no feature bits, handles serialized per handle (what the SDK
    /// provides whatever is declared). `build_id` must change whenever blobs or answers may
    /// change; the name and version joined will do for a plugin built from a release.
    pub const fn new(name: &'static str, version: &'static str, build_id: &'static str) -> Self {
        PluginInfo {
            name,
            version,
            build_id,
            features: 0,
            concurrency: abi::concurrency::SERIALIZED_PER_HANDLE,
        }
    }
}

impl Device {
    /// A CPU device named `name`, its memory unknown. `driver_version` is part of the
    /// host's cache keys: change it when results may change.
    pub fn cpu(name: &str, driver_version: &str) -> Device {
        Device {
            name: name.into(),
            kind: 0,
            driver_version: driver_version.into(),
            memory_bytes: 0,
        }
    }
}

impl Decline {
    /// The op is not implemented: "`Conv` not implemented" ([`DeclineReason::Op`]).
    pub fn op(node: &Node) -> Decline {
        Decline::new(
            DeclineReason::Op,
            format!("{} not implemented (node {})", node.op, node.name),
        )
    }
}

/// Declines `node` unless every input and output is of one of `dtypes` and has fixed
/// extents (a supports query may still hold symbolic dimensions; compile never does).
pub fn require_operands(graph: &Graph, node: &Node, dtypes: &[DType]) -> Result<(), Decline> {
    for &t in node.inputs.iter().chain(&node.outputs) {
        let decl = &graph.tensors[t];
        if !dtypes.contains(&decl.dtype) {
            let want: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
            return Err(Decline::new(
                DeclineReason::DType,
                format!("{} is {}; takes {}", decl.name, decl.dtype, want.join(", ")),
            ));
        }
        if decl.shape.iter().any(|d| d.fixed().is_none()) {
            return Err(Decline::new(
                DeclineReason::Shape,
                format!("{} has a symbolic dimension", decl.name),
            ));
        }
    }
    Ok(())
}

/// Numpy broadcasting of an element-wise binary op: `out[i] = f(a[ia], b[ib])`, where `ia`
/// and `ib` are `i` with every dimension `a` (or `b`) lacks or has of extent 1 held at 0.
/// The output's shape is the broadcast of the two; anything else is an error, as is an
/// element type other than `T`'s size.
pub fn broadcast_binary<T: bytemuck::Pod>(
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    f: impl Fn(T, T) -> T,
) -> Result<(), DelegateError> {
    let shape = out.shape().to_vec();
    let fits = crate::shape::broadcast_shapes(a.shape, b.shape).map_err(DelegateError::invalid)?;
    if fits != shape {
        return Err(DelegateError::invalid(format!(
            "output shape {shape:?} is not the broadcast {fits:?} of {:?} and {:?}",
            a.shape, b.shape
        )));
    }
    let size = std::mem::size_of::<T>();
    for (what, dtype) in [("a", a.dtype), ("b", b.dtype), ("output", out.dtype)] {
        if dtype.size() != size {
            return Err(DelegateError::invalid(format!(
                "{what} is {dtype}, not {size}-byte elements"
            )));
        }
    }
    let (av, bv) = (a.values::<T>(), b.values::<T>());
    let (sa, sb) = (strides(a.shape, &shape), strides(b.shape, &shape));
    let out = out.values_mut::<T>();
    if out.is_empty() {
        return Ok(());
    }
    // An odometer over the output index: the offsets into a and b move by their strides,
    // and step back when a dimension wraps.
    let mut index = vec![0usize; shape.len()];
    let (mut ia, mut ib) = (0usize, 0usize);
    for o in out.iter_mut() {
        *o = f(av[ia], bv[ib]);
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            ia += sa[d];
            ib += sb[d];
            if index[d] < shape[d] {
                break;
            }
            ia -= sa[d] * shape[d];
            ib -= sb[d] * shape[d];
            index[d] = 0;
        }
    }
    Ok(())
}

/// The element strides of `shape` read as `out` (right-aligned), 0 where it broadcasts.
fn strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let pad = out.len() - shape.len();
    let mut s = vec![0; out.len()];
    let mut step = 1;
    for d in (0..shape.len()).rev() {
        s[pad + d] = if shape[d] == 1 { 0 } else { step };
        step *= shape[d];
    }
    s
}

/// A kernel as a plain function, the usual [`NodeKernel`]: `type Executable =
/// GraphExec<KernelFn>` and `GraphExec::new(blob, constants, my_kernel)`.
pub type KernelFn = fn(&Node, &[TensorRef<'_>], &mut [TensorMut<'_>]) -> Result<(), DelegateError>;

/// A delegate's kernel for one node of a [`GraphExec`]: fill `outputs` (zeroed, with the
/// shapes the graph declares) from `inputs`. Any `Fn` with this signature is one.
pub trait NodeKernel: Send + 'static {
    /// Runs `node`.
    fn run(
        &self,
        node: &Node,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError>;
}

impl<F> NodeKernel for F
where
    F: Fn(&Node, &[TensorRef<'_>], &mut [TensorMut<'_>]) -> Result<(), DelegateError>
        + Send
        + 'static,
{
    fn run(
        &self,
        node: &Node,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        self(node, inputs, outputs)
    }
}

/// A subgraph from [`graph_blob`], run node by node by a [`NodeKernel`]. Every value
/// between nodes is a fresh 64-byte aligned buffer and the outputs are copied once more:
/// simple and safe, not fast.
pub struct GraphExec<K> {
    graph: Graph,
    /// The fixed shape of every tensor, by id.
    shapes: Vec<Vec<usize>>,
    /// A copy of every constant, by tensor id.
    constants: Vec<Option<Tensor>>,
    kernel: K,
}

impl<K: NodeKernel> GraphExec<K> {
    /// Reads a blob made by [`graph_blob`] (refusing anything else as an invalid argument),
    /// with the constant views `init` received, which it copies.
    pub fn new(
        blob: &[u8],
        constants: &[TensorRef<'_>],
        kernel: K,
    ) -> Result<GraphExec<K>, DelegateError> {
        let graph = wire::decode(blob)
            .map_err(|e| DelegateError::invalid(format!("init: the blob is not BTIR: {e}")))?;
        let mut shapes = Vec::with_capacity(graph.tensors.len());
        let mut copies = Vec::with_capacity(graph.tensors.len());
        for t in &graph.tensors {
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(Dim::fixed)
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    DelegateError::invalid(format!("init: tensor {} has a symbolic shape", t.name))
                })?;
            let bytes = match &t.data {
                None => None,
                Some(Storage::Inline(d)) => Some(d.bytes()),
                Some(Storage::External(i)) => {
                    Some(constants.get(*i).map(|v| v.data).ok_or_else(|| {
                        DelegateError::invalid(format!("init: no constant view {i} for {}", t.name))
                    })?)
                }
            };
            let copy = match bytes {
                Some(b) if b.len() == t.dtype.size() * shape.iter().product::<usize>() => {
                    Some(Tensor::from_bytes(t.dtype, &shape, b))
                }
                Some(b) => {
                    return Err(DelegateError::invalid(format!(
                        "init: constant {} has {} bytes, not {shape:?} of {}",
                        t.name,
                        b.len(),
                        t.dtype
                    )))
                }
                None => None,
            };
            shapes.push(shape);
            copies.push(copy);
        }
        Ok(GraphExec {
            graph,
            shapes,
            constants: copies,
            kernel,
        })
    }

    /// The subgraph the blob holds.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
}

impl<K: NodeKernel> Executable for GraphExec<K> {
    fn execute(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        let g = &self.graph;
        if inputs.len() != g.inputs.len() || outputs.len() != g.outputs.len() {
            return Err(DelegateError::invalid(format!(
                "execute: {} inputs and {} outputs given, the subgraph has {} and {}",
                inputs.len(),
                outputs.len(),
                g.inputs.len(),
                g.outputs.len()
            )));
        }
        let mut computed: Vec<Option<Tensor>> = (0..g.tensors.len()).map(|_| None).collect();
        for node in &g.nodes {
            let mut outs: Vec<Tensor> = node
                .outputs
                .iter()
                .map(|&t| Tensor::zeros(g.tensors[t].dtype, &self.shapes[t]))
                .collect();
            {
                let ins = node
                    .inputs
                    .iter()
                    .map(|&t| self.value(t, inputs, &computed))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut views: Vec<TensorMut<'_>> = outs.iter_mut().map(|t| t.view_mut()).collect();
                self.kernel.run(node, &ins, &mut views)?;
            }
            for (&t, value) in node.outputs.iter().zip(outs) {
                computed[t] = Some(value);
            }
        }
        for (out, &t) in outputs.iter_mut().zip(&g.outputs) {
            let value = self.value(t, inputs, &computed)?;
            if value.data.len() != out.data.len() {
                return Err(DelegateError::invalid(format!(
                    "execute: output {} is {} bytes, the host's view {}",
                    g.tensors[t].name,
                    value.data.len(),
                    out.data.len()
                )));
            }
            out.data.copy_from_slice(value.data);
        }
        Ok(())
    }

    /// The constants' copies it owns, and the buffers a run allocates (every node output).
    fn memory(&self) -> Option<MemoryUse> {
        let bytes = |t: usize| {
            (self.graph.tensors[t].dtype.size() * self.shapes[t].iter().product::<usize>()) as u64
        };
        let owned_bytes = self
            .constants
            .iter()
            .flatten()
            .map(|c| c.data.len() as u64)
            .sum();
        let scratch_bytes = self
            .graph
            .nodes
            .iter()
            .flat_map(|n| &n.outputs)
            .map(|&t| bytes(t))
            .sum();
        Some(MemoryUse {
            scratch_bytes,
            owned_bytes,
            retained_bytes: 0,
        })
    }
}

impl<K> GraphExec<K> {
    /// The value of tensor `t`: a graph input, a constant or a node's result.
    fn value<'v>(
        &'v self,
        t: TensorId,
        inputs: &'v [TensorRef<'v>],
        computed: &'v [Option<Tensor>],
    ) -> Result<TensorRef<'v>, DelegateError> {
        if let Some(pos) = self.graph.inputs.iter().position(|&i| i == t) {
            return Ok(inputs[pos]);
        }
        self.constants[t]
            .as_ref()
            .or(computed[t].as_ref())
            .map(Tensor::view)
            .ok_or_else(|| {
                DelegateError::invalid(format!(
                    "execute: tensor {} is read before it is computed",
                    self.graph.tensors[t].name
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::GraphBuilder;
    use crate::OpKind;

    fn add(n: &Node, i: &[TensorRef<'_>], o: &mut [TensorMut<'_>]) -> Result<(), DelegateError> {
        assert_eq!(n.op, OpKind::Add);
        broadcast_binary(&i[0], &i[1], &mut o[0], |a: f32, b: f32| a + b)
    }

    #[test]
    fn broadcasting_follows_numpy() {
        let a = Tensor::from_f32(&[2, 1, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = Tensor::from_f32(&[2, 1], &[10., 20.]);
        let mut out = Tensor::zeros(DType::F32, &[2, 2, 3]);
        broadcast_binary(
            &a.view(),
            &b.view(),
            &mut out.view_mut(),
            |x: f32, y: f32| x + y,
        )
        .unwrap();
        assert_eq!(
            out.f32s(),
            [11., 12., 13., 21., 22., 23., 14., 15., 16., 24., 25., 26.]
        );
        let scalar = Tensor::from_f32(&[], &[2.]);
        let mut out = Tensor::zeros(DType::F32, &[2, 1, 3]);
        broadcast_binary(
            &a.view(),
            &scalar.view(),
            &mut out.view_mut(),
            |x: f32, y: f32| x * y,
        )
        .unwrap();
        assert_eq!(out.f32s(), [2., 4., 6., 8., 10., 12.]);
        let mut wrong = Tensor::zeros(DType::F32, &[2, 3]);
        assert!(
            broadcast_binary(&a.view(), &b.view(), &mut wrong.view_mut(), |x: f32, _| x).is_err()
        );
    }

    #[test]
    fn the_default_blob_runs_node_by_node_with_constants_copied() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 2]);
        let c = b.constant_f32("c", &[2], &[1., -1.]);
        let y = b.named_node("add1", OpKind::Add, &[x, c], &[]).unwrap();
        let z = b.named_node("add2", OpKind::Add, &[y, y], &[]).unwrap();
        b.output(z);
        let g = b.finish().unwrap();
        // The host's view of the graph: the constant as view 0.
        let (bytes, consts) = wire::encode(&g, ConstMode::External);
        let host = wire::decode(&bytes).unwrap();
        let views: Vec<TensorRef<'_>> = consts
            .iter()
            .map(|&t| match &g.tensors[t].data {
                Some(Storage::Inline(d)) => TensorRef {
                    dtype: DType::F32,
                    shape: &[2],
                    data: d.bytes(),
                    quant: None,
                },
                _ => unreachable!(),
            })
            .collect();
        let blob = graph_blob(&host);
        let mut exec = GraphExec::new(&blob, &views, add).unwrap();
        drop(views);
        let input = Tensor::from_f32(&[2, 2], &[1., 2., 3., 4.]);
        let mut out = Tensor::zeros(DType::F32, &[2, 2]);
        exec.execute(&[input.view()], &mut [out.view_mut()])
            .unwrap();
        assert_eq!(out.f32s(), [4., 2., 8., 6.]);
        let memory = exec.memory().unwrap();
        assert_eq!((memory.owned_bytes, memory.scratch_bytes), (8, 32));
        assert!(GraphExec::new(b"not btir", &[], add).is_err());
        assert!(
            GraphExec::new(&blob, &[], add).is_err(),
            "its constant view is missing"
        );
    }
}
