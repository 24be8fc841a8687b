//! Element-wise subgraphs that exporters emit for one activation, run as one pass (the
//! Erf GELU here, LeakyRelu, HardSigmoid and Sigmoid products in `activations.rs`), or
//! inside the product before them (`act_folds` in `exec/lower/tail.rs`).
//!
//! torch exports `nn.GELU()` as five nodes, `x * 0.5 * (1 + erf(x / sqrt(2)))`, and each
//! would read and write the whole tensor. Found at init (from the graph alone, like the
//! QDQ groups, so the blob format does not change), the group runs as one vectorized
//! pass that performs the same operations on the same constants in the same order, so
//! its results are bit-identical to running the five nodes.

use baton_delegate_api::ir::{DType, Graph, NodeId, OpKind, TensorId};
use baton_delegate_api::Constants;

mod activations;

pub(crate) use activations::FusedActivation;

/// A GELU written with Erf: the nodes it absorbs, the one whose output it writes, its
/// input, and how `x` is scaled before the Erf (`x / c` or `x * c`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Gelu {
    pub nodes: Vec<NodeId>,
    pub last: NodeId,
    pub x: TensorId,
    pub divide: bool,
    pub c: f32,
}

/// Every Erf GELU of `graph`, in any of the three places exporters put the halving:
/// `(x * (erf(x/c) + 1)) * 0.5`, `(x * 0.5) * (erf(x/c) + 1)` or
/// `x * ((erf(x/c) + 1) * 0.5)`. Multiplying by 0.5 is exact, so all three give the same
/// bits, as do the operand orders of each Add and Mul. Intermediates must have one reader
/// and not be subgraph outputs.
pub(crate) fn find_gelus(graph: &Graph, consts: &Constants<'_>) -> Vec<Gelu> {
    let g = View::new(graph, consts);
    (0..graph.nodes.len())
        .filter(|&n| graph.nodes[n].op == OpKind::Erf)
        .filter_map(|erf| g.gelu_at(erf))
        .collect()
}

/// Every multi-node activation of `graph` spelled as `activations.rs` describes; a node
/// belongs to at most one.
pub(crate) fn find_activations(graph: &Graph, consts: &Constants<'_>) -> Vec<FusedActivation> {
    let g = View::new(graph, consts);
    let mut taken = vec![false; graph.nodes.len()];
    let mut found = Vec::new();
    for n in 0..graph.nodes.len() {
        if let Some(a) = g.activation_at(n) {
            if a.nodes.iter().all(|&m| !taken[m]) {
                a.nodes.iter().for_each(|&m| taken[m] = true);
                found.push(a);
            }
        }
    }
    found
}

struct View<'g> {
    graph: &'g Graph,
    consts: &'g Constants<'g>,
    consumers: Vec<Vec<NodeId>>,
    producers: Vec<Option<NodeId>>,
}

impl<'g> View<'g> {
    fn new(graph: &'g Graph, consts: &'g Constants<'g>) -> View<'g> {
        let mut producers = vec![None; graph.tensors.len()];
        for (id, node) in graph.nodes.iter().enumerate() {
            for &t in &node.outputs {
                producers[t] = Some(id);
            }
        }
        View {
            graph,
            consts,
            consumers: graph.consumers(),
            producers,
        }
    }

    fn gelu_at(&self, erf: NodeId) -> Option<Gelu> {
        let nodes = &self.graph.nodes;
        let d = nodes[erf].inputs[0];
        let scale = self.producers[d]?;
        (self.sole_reader(d)? == erf).then_some(())?;
        let (x, divide, c) = match nodes[scale].op {
            OpKind::Div => (
                nodes[scale].inputs[0],
                true,
                self.scalar(nodes[scale].inputs[1])?,
            ),
            OpKind::Mul => {
                let (x, c) = self.with_scalar(scale)?;
                (x, false, c)
            }
            _ => return None,
        };
        let add = self.sole_reader(nodes[erf].outputs[0])?;
        let (e, one) = self
            .with_scalar(add)
            .filter(|_| nodes[add].op == OpKind::Add)?;
        (e == nodes[erf].outputs[0] && one == 1.0).then_some(())?;
        let a = nodes[add].outputs[0];
        let mul = self
            .sole_reader(a)
            .filter(|&m| nodes[m].op == OpKind::Mul)?;
        let other = other_input(&nodes[mul].inputs, a)?;
        let (mut group, last) = if other == x {
            // (x * (erf + 1)) * 0.5
            let half = self.sole_reader(nodes[mul].outputs[0])?;
            let (m, h) = self
                .with_scalar(half)
                .filter(|_| nodes[half].op == OpKind::Mul)?;
            (m == nodes[mul].outputs[0] && h == 0.5).then_some(())?;
            (vec![scale, erf, add, mul, half], half)
        } else if self.scalar(other) == Some(0.5) {
            // x * ((erf + 1) * 0.5)
            let outer = self.sole_reader(nodes[mul].outputs[0])?;
            let xo = other_input(&nodes[outer].inputs, nodes[mul].outputs[0])?;
            (nodes[outer].op == OpKind::Mul && xo == x).then_some(())?;
            (vec![scale, erf, add, mul, outer], outer)
        } else {
            // (x * 0.5) * (erf + 1)
            let halver = self.producers[other].filter(|&h| nodes[h].op == OpKind::Mul)?;
            (self.sole_reader(other)? == mul).then_some(())?;
            let (hx, h) = self.with_scalar(halver)?;
            (hx == x && h == 0.5).then_some(())?;
            (vec![halver, scale, erf, add, mul], mul)
        };
        group.sort_unstable();
        let out = nodes[last].outputs[0];
        let f32_tensor = |t: TensorId| self.graph.tensors[t].dtype == DType::F32;
        let same_shape = self.graph.tensors[x].static_shape().is_some()
            && self.graph.tensors[x].static_shape() == self.graph.tensors[out].static_shape();
        (f32_tensor(x) && f32_tensor(out) && same_shape).then_some(Gelu {
            nodes: group,
            last,
            x,
            divide,
            c,
        })
    }

    /// The only node reading `t`, when `t` is not a subgraph output.
    fn sole_reader(&self, t: TensorId) -> Option<NodeId> {
        if self.graph.outputs.contains(&t) {
            return None;
        }
        match self.consumers[t][..] {
            [only] => Some(only),
            _ => None,
        }
    }

    /// A binary node's non-constant input and its f32 scalar constant, either order.
    fn with_scalar(&self, node: NodeId) -> Option<(TensorId, f32)> {
        match self.graph.nodes[node].inputs[..] {
            [a, b] => match (self.scalar(a), self.scalar(b)) {
                (None, Some(c)) => Some((a, c)),
                (Some(c), None) => Some((b, c)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The value of a one-element f32 constant.
    fn scalar(&self, t: TensorId) -> Option<f32> {
        let decl = &self.graph.tensors[t];
        if !decl.is_const() || decl.dtype != DType::F32 {
            return None;
        }
        match self.consts.bytes(t)? {
            [a, b, c, d] => Some(f32::from_le_bytes([*a, *b, *c, *d])),
            _ => None,
        }
    }
}

fn other_input(inputs: &[TensorId], t: TensorId) -> Option<TensorId> {
    match inputs {
        [a, b] if *a == t => Some(*b),
        [a, b] if *b == t => Some(*a),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::ir::GraphBuilder;

    /// x -> Div(√2) -> Erf -> Add(1) -> Mul(x, ·) -> Mul(·, 0.5), or the other halving.
    fn gelu_graph(halve: usize, extra_reader: bool) -> Graph {
        let mut g = GraphBuilder::new("gelu");
        let x = g.input_fixed("x", DType::F32, &[2, 3]);
        let sqrt2 = g.constant_f32("sqrt2", &[], &[std::f32::consts::SQRT_2]);
        let one = g.constant_f32("one", &[], &[1.0]);
        let half = g.constant_f32("half", &[], &[0.5]);
        let h = (halve == 1).then(|| g.node(OpKind::Mul, &[x, half], &[]).unwrap());
        let d = g.node(OpKind::Div, &[x, sqrt2], &[]).unwrap();
        let e = g.node(OpKind::Erf, &[d], &[]).unwrap();
        let a = g.node(OpKind::Add, &[one, e], &[]).unwrap();
        let y = match (h, halve) {
            (Some(h), _) => g.node(OpKind::Mul, &[h, a], &[]).unwrap(),
            (None, 2) => {
                let m = g.node(OpKind::Mul, &[half, a], &[]).unwrap();
                g.node(OpKind::Mul, &[x, m], &[]).unwrap()
            }
            (None, _) => {
                let m = g.node(OpKind::Mul, &[a, x], &[]).unwrap();
                g.node(OpKind::Mul, &[m, half], &[]).unwrap()
            }
        };
        g.output(y);
        if extra_reader {
            g.output(e);
        }
        g.finish().unwrap()
    }

    #[test]
    fn every_halving_order_is_found_and_shared_intermediates_are_not() {
        for halve in 0..3 {
            let graph = gelu_graph(halve, false);
            let found = find_gelus(&graph, &Constants::new(&graph, &[]));
            assert_eq!(found.len(), 1, "halving order {halve}");
            assert_eq!(found[0].nodes, (0..5).collect::<Vec<_>>());
            assert!(found[0].divide);
            assert_eq!(found[0].c, std::f32::consts::SQRT_2);
            let graph = gelu_graph(halve, true);
            assert!(find_gelus(&graph, &Constants::new(&graph, &[])).is_empty());
        }
    }
}
