//! The host's side of a delegate call, in-process: the steps the runtime takes across the
//! ABI (encode, decode, `supports`, `compile`, `init`, `execute`), with constants passed
//! as separate views exactly as the host passes them, but without loading a plugin file.
//!
//! Driving the Rust `Delegate` directly keeps a backend's kernel tests fast and debuggable;
//! the ABI path itself is covered by the tests that load the plugin through the host.

use crate::ir::{DType, Graph, Storage};
use crate::wire::{self, ConstMode};
use crate::{
    Constants, Delegate, DelegateError, Executable, Support, Tensor, TensorMut, TensorRef,
};

/// The host's view of a graph: the subgraph as a delegate receives it (serialized with
/// external constants and decoded again), and those constants as tensors of their own.
pub struct Hosted {
    /// The decoded graph; its constants carry no data, as across the ABI.
    pub graph: Graph,
    constants: Vec<Tensor>,
}

impl Hosted {
    /// Serializes `g` with external constants and decodes it, as the host does. The
    /// constants of `g` must hold inline data, as a `GraphBuilder` makes them.
    pub fn new(g: &Graph) -> Hosted {
        let (buf, ids) = wire::encode(g, ConstMode::External);
        let graph = wire::decode(&buf).expect("decode");
        let constants = ids
            .iter()
            .map(|&t| {
                let decl = &g.tensors[t];
                let shape = decl.static_shape().expect("static constant");
                match &decl.data {
                    Some(Storage::Inline(d)) => Tensor::from_bytes(decl.dtype, &shape, d.bytes()),
                    _ => panic!("builder constants are inline"),
                }
            })
            .collect();
        Hosted { graph, constants }
    }

    /// Views of the constants, in the order the host passes them.
    pub fn views(&self) -> Vec<TensorRef<'_>> {
        views(&self.constants)
    }

    /// Fresh copies of the constants, for a test that changes or outlives them.
    pub fn tensors(&self) -> Vec<Tensor> {
        self.constants
            .iter()
            .map(|t| Tensor::from_bytes(t.dtype, &t.shape, t.bytes()))
            .collect()
    }

    /// Compiles the graph on device 0 after asserting that `d` claims every node, as the
    /// partitioner would have made sure.
    pub fn compile<D: Delegate>(&self, d: &D) -> Result<Vec<u8>, DelegateError> {
        let v = self.views();
        let c = Constants::new(&self.graph, &v);
        for (node, s) in self.graph.nodes.iter().zip(d.supports(&self.graph, c)) {
            assert_eq!(s, Support::Yes, "node {} declined", node.label());
        }
        d.compile(0, &self.graph, c)
    }
}

/// Views of owned tensors.
pub fn views(ts: &[Tensor]) -> Vec<TensorRef<'_>> {
    ts.iter().map(|t| t.view()).collect()
}

/// The support answer `d` gives for every node of `g`.
pub fn supports<D: Delegate>(d: &D, g: &Graph) -> Vec<Support> {
    let h = Hosted::new(g);
    let v = h.views();
    d.supports(&h.graph, Constants::new(&h.graph, &v))
}

/// Compiles `g` on device 0; every node must be claimed.
pub fn compile<D: Delegate>(d: &D, g: &Graph) -> Result<Vec<u8>, DelegateError> {
    Hosted::new(g).compile(d)
}

/// Runs `g` through the whole lifecycle (every node must be claimed), executes twice and
/// asserts both runs agree bit for bit: an executable keeps no state between calls that
/// changes its results. Returns the outputs of the first run.
pub fn run<D: Delegate>(d: &D, g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, DelegateError> {
    let h = Hosted::new(g);
    let blob = h.compile(d)?;
    let mut exec = d.init(0, &blob, &h.views())?;
    let first = execute(&mut exec, &h.graph, inputs)?;
    let second = execute(&mut exec, &h.graph, inputs)?;
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(
            a.bytes(),
            b.bytes(),
            "a second execute gave different results"
        );
    }
    Ok(first)
}

/// Executes once, into outputs shaped as `g` declares and poisoned first (f32 with a
/// NaN payload, other dtypes with `0x5a` bytes) so that an element left unwritten shows.
pub fn execute<E: Executable>(
    exec: &mut E,
    g: &Graph,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, DelegateError> {
    let mut outs: Vec<Tensor> = g
        .outputs
        .iter()
        .map(|&t| Tensor::zeros(g.tensors[t].dtype, &g.tensors[t].static_shape().unwrap()))
        .collect();
    for o in &mut outs {
        if o.dtype != DType::F32 {
            o.data.as_mut_slice().fill(0x5a);
            continue;
        }
        for b in o.data.as_mut_slice().chunks_exact_mut(4) {
            b.copy_from_slice(&f32::from_bits(0x7fc0_dead).to_le_bytes());
        }
    }
    let ins = views(inputs);
    let mut out_views: Vec<TensorMut<'_>> = outs.iter_mut().map(|t| t.view_mut()).collect();
    exec.execute(&ins, &mut out_views)?;
    drop(out_views);
    Ok(outs)
}
