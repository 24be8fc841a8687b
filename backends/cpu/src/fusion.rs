//! Operator fusion, planned at compile time and stored in the blob.
//!
//! A *chain* is an anchor (`Conv`, `Gemm` or `MatMul`), optionally followed by an `Add` of
//! a constant that broadcasts along the anchor's GEMM rows or columns (a bias), then
//! optionally by an `Add` of a tensor of exactly the output's shape (a residual, see
//! [`residual_operand`]), optionally followed by `Relu` or `Clip` with constant bounds.
//! The chain records its last Add only (the blob keeps three nodes per chain): a bias Add
//! before a residual one is the anchor's only reader, found again from the graph. The chain runs as one GEMM whose
//! epilogue does the add and the activation. A link is taken only when the intermediate
//! tensor has no other reader and is not an output of the subgraph, so nothing observable
//! changes.
//!
//! The same link predicates plan the chains (at compile) and check them (at init, since a
//! blob is untrusted input).

use baton_delegate_api::ir::{DType, Graph, Node, NodeId, OpKind, TensorId};
use baton_delegate_api::Constants;

use crate::support::clip_bounds;

/// One fused chain of nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chain {
    pub anchor: NodeId,
    /// The last fused Add (a bias before it is found by [`chain_bias`]).
    pub add: Option<NodeId>,
    pub activation: Option<NodeId>,
}

impl Chain {
    /// The last node of the chain, whose output the fused kernel writes.
    pub fn last(&self) -> NodeId {
        self.activation.or(self.add).unwrap_or(self.anchor)
    }
}

/// What lowering does with a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Runs on its own.
    Plain,
    /// Runs the chain at this index.
    Anchor(usize),
    /// Runs inside another node's chain.
    Absorbed,
}

/// The chains of a subgraph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FusionPlan {
    pub chains: Vec<Chain>,
}

impl FusionPlan {
    /// Finds every chain of `graph` (greedy, in node order).
    pub fn plan(graph: &Graph, consts: &Constants<'_>) -> FusionPlan {
        let links = Links::new(graph, *consts);
        let chains = (0..graph.nodes.len())
            .filter(|&n| is_anchor(&graph.nodes[n]))
            .filter_map(|anchor| {
                let add = links.next_add(anchor);
                let activation = links.next_activation(add.unwrap_or(anchor));
                (add.is_some() || activation.is_some()).then_some(Chain {
                    anchor,
                    add,
                    activation,
                })
            })
            .collect();
        FusionPlan { chains }
    }

    /// Checks that every chain is one [`FusionPlan::plan`] could have made: legal links,
    /// no node in two chains.
    pub fn validate(&self, graph: &Graph, consts: &Constants<'_>) -> Result<(), String> {
        let links = Links::new(graph, *consts);
        let mut seen = vec![false; graph.nodes.len()];
        for (i, c) in self.chains.iter().enumerate() {
            let bad = |why: &str| Err(format!("fusion chain {i} ({c:?}): {why}"));
            let nodes = [Some(c.anchor), c.add, c.activation];
            if nodes.into_iter().flatten().any(|n| n >= graph.nodes.len()) {
                return bad("node index out of range");
            }
            let bias = chain_bias(graph, c);
            for n in nodes.into_iter().chain([bias]).flatten() {
                if std::mem::replace(&mut seen[n], true) {
                    return bad("node already in another chain");
                }
            }
            if !is_anchor(&graph.nodes[c.anchor]) {
                return bad("the first node is not a Conv, Gemm or MatMul");
            }
            // A bias without the residual after it is what an older planner made.
            let first = links.first_add(c.anchor);
            if c.add.is_some() && links.next_add(c.anchor) != c.add && first != c.add {
                return bad("the Add cannot be fused");
            }
            let before = c.add.unwrap_or(c.anchor);
            if c.activation.is_some() && links.next_activation(before) != c.activation {
                return bad("the activation cannot be fused");
            }
            if c.add.is_none() && c.activation.is_none() {
                return bad("the chain fuses nothing");
            }
        }
        Ok(())
    }

    /// The role of each node.
    pub fn roles(&self, graph: &Graph) -> Vec<Role> {
        let mut roles = vec![Role::Plain; graph.nodes.len()];
        for (i, c) in self.chains.iter().enumerate() {
            roles[c.anchor] = Role::Anchor(i);
            for n in [chain_bias(graph, c), c.add, c.activation]
                .into_iter()
                .flatten()
            {
                roles[n] = Role::Absorbed;
            }
        }
        roles
    }
}

fn is_anchor(node: &Node) -> bool {
    matches!(node.op, OpKind::Conv | OpKind::Gemm | OpKind::MatMul)
}

/// The constant operand of `add` (which reads `anchor`'s output) and its `(rs, cs)`
/// strides on the anchor's output seen as a GEMM result (rows: Conv output channels or
/// MatMul/Gemm rows; columns: pixels or MatMul/Gemm columns). `None` if it does not fit.
pub(crate) fn fused_add_operand(
    graph: &Graph,
    anchor: &Node,
    add: &Node,
    consts: &Constants<'_>,
) -> Option<(TensorId, usize, usize)> {
    let out = anchor.outputs[0];
    if add.op != OpKind::Add || add.inputs.len() != 2 {
        return None;
    }
    let other = match add.inputs[..] {
        [a, b] if a == out && b != out => b,
        [a, b] if b == out && a != out => a,
        _ => None?,
    };
    consts.f32s(other)?;
    let out_shape = graph.tensors[out].static_shape()?;
    let c_shape = graph.tensors[other].static_shape()?;
    if graph.tensors[add.outputs[0]].static_shape()? != out_shape {
        return None;
    }
    let (rs, cs) = match anchor.op {
        OpKind::Conv => channel_view(&out_shape, &c_shape)?,
        _ => matrix_view(&out_shape, &c_shape)?,
    };
    Some((other, rs, cs))
}

/// What a chain's fused `Add` adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FusedAdd {
    /// A constant broadcast along the GEMM result at strides `(rs, cs)`.
    Bias(TensorId, usize, usize),
    /// A tensor of the anchor's output shape, read element for element in the output's
    /// own layout.
    Residual(TensorId),
}

/// The operand of `add` after `anchor`: a bias if it fits one (folded at init), else a
/// residual.
pub(crate) fn fused_add(
    graph: &Graph,
    anchor: &Node,
    add: &Node,
    consts: &Constants<'_>,
) -> Option<FusedAdd> {
    match fused_add_operand(graph, anchor, add, consts) {
        Some((t, rs, cs)) => Some(FusedAdd::Bias(t, rs, cs)),
        None => residual_operand(graph, anchor, anchor.outputs[0], add).map(FusedAdd::Residual),
    }
}

/// The bias Add of a chain whose last Add is a residual: the anchor's (only) reader.
pub(crate) fn chain_bias(graph: &Graph, chain: &Chain) -> Option<NodeId> {
    let out = *graph.nodes[chain.anchor].outputs.first()?;
    let reader = graph.nodes.iter().position(|n| n.inputs.contains(&out))?;
    (chain.add? != reader).then_some(reader)
}

/// The adds of a chain, in the order they apply: a bias, a residual, or both.
pub(crate) fn chain_adds(
    graph: &Graph,
    chain: &Chain,
    consts: &Constants<'_>,
) -> Option<Vec<FusedAdd>> {
    let Some(last) = chain.add else {
        return Some(Vec::new());
    };
    let anchor = &graph.nodes[chain.anchor];
    match chain_bias(graph, chain) {
        Some(b) => {
            let bias = &graph.nodes[b];
            let (t, rs, cs) = fused_add_operand(graph, anchor, bias, consts)?;
            let r = residual_operand(graph, anchor, bias.outputs[0], &graph.nodes[last])?;
            Some(vec![FusedAdd::Bias(t, rs, cs), FusedAdd::Residual(r)])
        }
        None => Some(vec![fused_add(graph, anchor, &graph.nodes[last], consts)?]),
    }
}

/// The other operand of `add` (which reads `out`: the anchor's output or its bias Add's)
/// when it has exactly the shape of `anchor`'s output and of the Add's result (no
/// broadcasting), so the epilogue reads it at the output's strides.
///
/// A MatMul qualifies only with matrix operands (no 1-D promotion, so the output's last
/// axis is `N`) and a single `B` matrix: the op then folds its batches into
/// one GEMM whose rows run over the whole output, so one row stride covers the residual
/// too (per-batch GEMMs would need a per-batch offset the epilogue does not have). The
/// caller checks that the operand is computed before the anchor runs.
pub(crate) fn residual_operand(
    graph: &Graph,
    anchor: &Node,
    out: TensorId,
    add: &Node,
) -> Option<TensorId> {
    let other = match add.inputs[..] {
        [a, b] if add.op == OpKind::Add && a == out && b != out => b,
        [a, b] if add.op == OpKind::Add && b == out && a != out => a,
        _ => None?,
    };
    let shape = graph.tensors[anchor.outputs[0]].static_shape()?;
    let same = |t: TensorId| graph.tensors[t].static_shape().as_ref() == Some(&shape);
    let f32s = graph.tensors[other].dtype == DType::F32;
    let single_b = match anchor.op {
        OpKind::MatMul => {
            let a = graph.tensors[*anchor.inputs.first()?].static_shape()?;
            let b = graph.tensors[*anchor.inputs.get(1)?].static_shape()?;
            a.len() >= 2 && b.len() >= 2 && b[..b.len() - 2].iter().all(|&d| d == 1)
        }
        _ => true,
    };
    (f32s && single_b && shape.len() >= 2 && same(other) && same(add.outputs[0])).then_some(other)
}

/// The residual a chain adds, if any.
pub(crate) fn chain_residual(
    graph: &Graph,
    chain: &Chain,
    consts: &Constants<'_>,
) -> Option<TensorId> {
    chain_adds(graph, chain, consts)?
        .into_iter()
        .find_map(|a| match a {
            FusedAdd::Residual(t) => Some(t),
            FusedAdd::Bias(..) => None,
        })
}

/// Strides of `c` broadcast onto the last two axes of `out` (`[.., M, N]`), or `None` if
/// `c` varies along a batch axis.
pub(crate) fn matrix_view(out: &[usize], c: &[usize]) -> Option<(usize, usize)> {
    if out.len() < 2 || c.len() > out.len() {
        return None;
    }
    let lead = c.len().saturating_sub(2);
    if c[..lead].iter().any(|&d| d != 1) {
        return None;
    }
    let cn = c.last().copied().unwrap_or(1);
    let cm = if c.len() >= 2 { c[c.len() - 2] } else { 1 };
    Some((if cm > 1 { cn } else { 0 }, usize::from(cn > 1)))
}

/// Strides of `c` broadcast onto a Conv output `[N, M, spatial...]` seen as `M` rows, or
/// `None` if `c` varies along anything but the channel axis.
fn channel_view(out: &[usize], c: &[usize]) -> Option<(usize, usize)> {
    if c.len() > out.len() {
        return None;
    }
    let shift = out.len() - c.len();
    let mut channels = 1;
    for (i, &d) in c.iter().enumerate() {
        if shift + i == 1 {
            channels = d;
        } else if d != 1 {
            return None;
        }
    }
    Some((usize::from(channels > 1), 0))
}

/// The link predicates over one graph.
struct Links<'g> {
    graph: &'g Graph,
    consts: Constants<'g>,
    consumers: Vec<Vec<NodeId>>,
    /// The node writing each tensor (`None` for inputs and constants).
    producers: Vec<Option<NodeId>>,
}

impl<'g> Links<'g> {
    fn new(graph: &'g Graph, consts: Constants<'g>) -> Links<'g> {
        let mut producers = vec![None; graph.tensors.len()];
        for (id, node) in graph.nodes.iter().enumerate() {
            for &t in &node.outputs {
                producers[t] = Some(id);
            }
        }
        Links {
            graph,
            consts,
            consumers: graph.consumers(),
            producers,
        }
    }

    /// The only node reading `node`'s output, if that output is not a subgraph output.
    fn sole_consumer(&self, node: NodeId) -> Option<NodeId> {
        let out = *self.graph.nodes[node].outputs.first()?;
        if self.graph.outputs.contains(&out) {
            return None;
        }
        match self.consumers[out][..] {
            [only] => Some(only),
            _ => None,
        }
    }

    /// The fusable bias or residual Add after `anchor`. The fused op runs at the anchor's
    /// place, so a residual must be written by a node before it (nodes are in topological
    /// order, but the Add's operand may come from a node between the anchor and the Add).
    fn first_add(&self, anchor: NodeId) -> Option<NodeId> {
        let next = self.sole_consumer(anchor)?;
        let (a, n) = (&self.graph.nodes[anchor], &self.graph.nodes[next]);
        match fused_add(self.graph, a, n, &self.consts)? {
            FusedAdd::Bias(..) => Some(next),
            FusedAdd::Residual(t) => self.before(t, anchor).then_some(next),
        }
    }

    /// The last fusable Add after `anchor`: a residual Add after its bias Add if there is
    /// one, else [`Links::first_add`]. A Gemm's own `C` is an epilogue add already, and the
    /// epilogue holds two, so a Gemm with `C` takes no residual after a bias. Nor does a
    /// MatMul whose bias varies by row: its batches stay separate GEMMs, and the residual
    /// has no per-batch offset.
    fn next_add(&self, anchor: NodeId) -> Option<NodeId> {
        let first = self.first_add(anchor)?;
        let a = &self.graph.nodes[anchor];
        let fb = &self.graph.nodes[first];
        let row_bias = match fused_add(self.graph, a, fb, &self.consts) {
            Some(FusedAdd::Bias(_, rs, _)) => a.op == OpKind::MatMul && rs != 0,
            _ => return Some(first),
        };
        let has_c = a.op == OpKind::Gemm && a.inputs.len() > 2 && a.attr_float("beta", 1.0) != 0.0;
        let residual = self.sole_consumer(first).filter(|&next| {
            let r = residual_operand(self.graph, a, fb.outputs[0], &self.graph.nodes[next]);
            !has_c && !row_bias && r.is_some_and(|t| self.before(t, anchor))
        });
        Some(residual.unwrap_or(first))
    }

    /// Whether `t` is written before `node` runs (or is an input or a constant).
    fn before(&self, t: TensorId, node: NodeId) -> bool {
        self.producers[t].is_none_or(|p| p < node)
    }

    /// The fusable Relu or Clip after `node`.
    fn next_activation(&self, node: NodeId) -> Option<NodeId> {
        let next = self.sole_consumer(node)?;
        let n = &self.graph.nodes[next];
        let reads_first = n.inputs.first() == self.graph.nodes[node].outputs.first();
        let ok = match n.op {
            OpKind::Relu => n.inputs.len() == 1,
            OpKind::Clip => reads_first && clip_bounds(self.graph, n, &self.consts).is_ok(),
            _ => false,
        };
        (ok && reads_first).then_some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::ir::{Attr, DType, GraphBuilder};

    fn plan(g: &Graph) -> Vec<Chain> {
        FusionPlan::plan(g, &Constants::new(g, &[])).chains
    }

    #[test]
    fn matmul_bias_clip_fuse_into_one_chain() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 3, 4]);
        let w = b.constant_f32("w", &[4, 5], &[0.5; 20]);
        let bias = b.constant_f32("bias", &[1, 5], &[1.0; 5]);
        let mm = b.node(OpKind::MatMul, &[x, w], &[]).unwrap();
        let add = b.node(OpKind::Add, &[bias, mm], &[]).unwrap();
        let clip = b
            .node(OpKind::Clip, &[add], &[("max", Attr::Float(6.0))])
            .unwrap();
        b.output(clip);
        let g = b.finish().unwrap();
        let chains = plan(&g);
        assert_eq!(
            chains,
            vec![Chain {
                anchor: 0,
                add: Some(1),
                activation: Some(2)
            }]
        );
        let p = FusionPlan { chains };
        assert!(p.validate(&g, &Constants::new(&g, &[])).is_ok());
        assert_eq!(
            p.roles(&g),
            vec![Role::Anchor(0), Role::Absorbed, Role::Absorbed]
        );
    }

    #[test]
    fn observable_or_shared_intermediates_are_not_fused() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 4, 4]);
        let w = b.constant_f32("w", &[3, 2, 1, 1], &[0.5; 6]);
        let cb = b.constant_f32("cb", &[3, 1, 1], &[1.0; 3]);
        let conv = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let add = b.node(OpKind::Add, &[conv, cb], &[]).unwrap();
        let relu = b.node(OpKind::Relu, &[add], &[]).unwrap();
        // A second conv read twice; a third whose Add's other operand is computed after
        // it; a fourth added to a tensor that broadcasts; a fifth added to an earlier
        // tensor of its shape (a residual: fused).
        let conv2 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let r2 = b.node(OpKind::Relu, &[conv2], &[]).unwrap();
        let twice = b.node(OpKind::Add, &[conv2, r2], &[]).unwrap();
        let conv3 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let late = b.node(OpKind::Relu, &[twice], &[]).unwrap();
        let late_add = b.node(OpKind::Add, &[conv3, late], &[]).unwrap();
        let row = b.input_fixed("row", DType::F32, &[1, 3, 4, 1]);
        let conv4 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let broadcast = b.node(OpKind::Add, &[conv4, row], &[]).unwrap();
        let conv5 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let residual = b.node(OpKind::Add, &[relu, conv5], &[]).unwrap();
        let r5 = b.node(OpKind::Relu, &[residual], &[]).unwrap();
        for t in [add, relu, twice, late_add, broadcast, r5] {
            b.output(t);
        }
        let g = b.finish().unwrap();
        assert_eq!(
            plan(&g),
            vec![
                Chain {
                    anchor: 0,
                    add: Some(1),
                    activation: None
                },
                Chain {
                    anchor: 11,
                    add: Some(12),
                    activation: Some(13)
                }
            ]
        );
        let anchor = &g.nodes[11];
        let out = anchor.outputs[0];
        assert_eq!(residual_operand(&g, anchor, out, &g.nodes[12]), Some(relu));
        let p = FusionPlan { chains: plan(&g) };
        assert!(p.validate(&g, &Constants::new(&g, &[])).is_ok());
        // Fusing the late Add would read `late` before it is computed.
        let bad = FusionPlan {
            chains: vec![Chain {
                anchor: 6,
                add: Some(8),
                activation: None,
            }],
        };
        assert!(bad.validate(&g, &Constants::new(&g, &[])).is_err());
    }

    #[test]
    fn conv_adds_must_be_per_channel() {
        let (rows, cols) = (
            channel_view(&[1, 3, 4, 4], &[3, 1, 1]),
            channel_view(&[1, 3, 4, 4], &[4]),
        );
        assert_eq!((rows, cols), (Some((1, 0)), None));
        assert_eq!(channel_view(&[1, 3, 4, 4], &[1]), Some((0, 0)));
        assert_eq!(channel_view(&[2, 3, 4], &[2, 3, 1]), None);
        assert_eq!(matrix_view(&[2, 3, 5], &[5]), Some((0, 1)));
        assert_eq!(matrix_view(&[2, 3, 5], &[3, 1]), Some((1, 0)));
        assert_eq!(matrix_view(&[2, 3, 5], &[1, 3, 5]), Some((5, 1)));
        assert_eq!(matrix_view(&[2, 3, 5], &[2, 1, 5]), None);
        assert_eq!(matrix_view(&[5], &[5]), None);
    }

    #[test]
    fn matmul_residuals_need_one_b_matrix() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 3, 4]);
        let w = b.constant_f32("w", &[4, 4], &[0.5; 16]);
        let wb = b.input_fixed("wb", DType::F32, &[2, 4, 4]);
        let mm = b.node(OpKind::MatMul, &[x, w], &[]).unwrap();
        let sum = b.node(OpKind::Add, &[mm, x], &[]).unwrap();
        let batched = b.node(OpKind::MatMul, &[x, wb], &[]).unwrap();
        let sum2 = b.node(OpKind::Add, &[x, batched], &[]).unwrap();
        b.output(sum);
        b.output(sum2);
        let g = b.finish().unwrap();
        let chains = plan(&g);
        assert_eq!(chains.len(), 1);
        assert_eq!((chains[0].anchor, chains[0].add), (0, Some(1)));
        let consts = Constants::new(&g, &[]);
        assert_eq!(chain_residual(&g, &chains[0], &consts), Some(x));
    }

    /// MatMul, bias, residual and Relu make one chain that records the residual Add; a
    /// Gemm with `C` already has two epilogue adds with its bias, so it stops there.
    #[test]
    fn a_residual_after_a_bias_joins_the_chain_unless_the_epilogue_is_full() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[3, 4]);
        let w = b.constant_f32("w", &[4, 4], &[0.5; 16]);
        let bias = b.constant_f32("bias", &[4], &[1.0; 4]);
        let mm = b.node(OpKind::MatMul, &[x, w], &[]).unwrap();
        let mb = b.node(OpKind::Add, &[mm, bias], &[]).unwrap();
        let sum = b.node(OpKind::Add, &[x, mb], &[]).unwrap();
        let relu = b.node(OpKind::Relu, &[sum], &[]).unwrap();
        let gm = b.node(OpKind::Gemm, &[relu, w, bias], &[]).unwrap();
        let gb = b.node(OpKind::Add, &[gm, bias], &[]).unwrap();
        let gsum = b.node(OpKind::Add, &[gb, relu], &[]).unwrap();
        // A bias that varies by row: the batches of x2 stay separate GEMMs.
        let x2 = b.input_fixed("x2", DType::F32, &[2, 3, 4]);
        let rows = b.constant_f32("rows", &[3, 4], &[1.0; 12]);
        let mm2 = b.node(OpKind::MatMul, &[x2, w], &[]).unwrap();
        let rb = b.node(OpKind::Add, &[mm2, rows], &[]).unwrap();
        let rsum = b.node(OpKind::Add, &[rb, x2], &[]).unwrap();
        b.output(gsum);
        b.output(rsum);
        let g = b.finish().unwrap();
        let consts = Constants::new(&g, &[]);
        let p = FusionPlan::plan(&g, &consts);
        let want = [
            (0, Some(2), Some(3)),
            (4, Some(5), None),
            (7, Some(8), None),
        ];
        let got: Vec<_> = p
            .chains
            .iter()
            .map(|c| (c.anchor, c.add, c.activation))
            .collect();
        assert_eq!(got, want);
        assert_eq!(chain_bias(&g, &p.chains[0]), Some(1));
        assert_eq!(chain_residual(&g, &p.chains[0], &consts), Some(x));
        assert!(p.validate(&g, &consts).is_ok());
        let roles = p.roles(&g);
        assert_eq!(
            roles[..4],
            [
                Role::Anchor(0),
                Role::Absorbed,
                Role::Absorbed,
                Role::Absorbed
            ]
        );
        assert_eq!(roles[6], Role::Plain);
        // An older plan (the bias only) still validates.
        let old = FusionPlan {
            chains: vec![Chain {
                anchor: 0,
                add: Some(1),
                activation: None,
            }],
        };
        assert!(old.validate(&g, &consts).is_ok());
    }
}
