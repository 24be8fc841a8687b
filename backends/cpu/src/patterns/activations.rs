//! Activations that tf2onnx, Paddle2ONNX and the ONNX importer's own rewrites spell as
//! several nodes, found at init and run as one element-wise pass with the same bits:
//!
//! - **LeakyRelu** as `Max(x, alpha * x)`, which the importer turns into
//!   `Where(Greater(a, b), a, b)` with `b = Mul(x, alpha)` (or `a`, either order), for
//!   `0 < alpha <= 1`: `x > alpha * x` exactly when `x > 0`, zeros keep their sign and
//!   infinities their value on both sides (alpha 0 would make `0 * inf` a NaN);
//! - **LeakyRelu** as PRelu with one slope, `Where(Less(x, 0), Mul(x, slope), x)`;
//! - **HardSwish-like** `Mul(x, HardSigmoid(x))` (torch's `x * hardsigmoid(x)`), kept as
//!   `x * clamp(alpha * x + beta, 0, 1)` since HardSwish's `x / 6` differs in the last bit
//!   from `x * (1/6)`.

use baton_delegate_api::ir::{NodeId, OpKind, TensorId};

use super::View;
use crate::ops::elementwise::Unary;

/// A multi-node activation: the nodes it absorbs, the one whose output it writes, its
/// input, and the function.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FusedActivation {
    pub nodes: Vec<NodeId>,
    pub last: NodeId,
    pub x: TensorId,
    pub f: Unary,
}

impl View<'_> {
    /// The activation ending at `last` (a Where or a Mul), if it is one of the module's.
    pub(super) fn activation_at(&self, last: NodeId) -> Option<FusedActivation> {
        let found = match self.graph.nodes[last].op {
            OpKind::Where => self.max_leaky(last).or_else(|| self.prelu_leaky(last)),
            OpKind::Mul => self.hard_sigmoid_mul(last),
            _ => None,
        }?;
        let out = self.graph.nodes[found.last].outputs[0];
        let same_shape = self.graph.tensors[found.x].static_shape().is_some()
            && self.graph.tensors[found.x].static_shape() == self.graph.tensors[out].static_shape();
        (self.f32_tensor(found.x) && self.f32_tensor(out) && same_shape).then_some(found)
    }

    /// `Where(Greater(a, b), a, b)` with one of `a`, `b` the other times alpha.
    fn max_leaky(&self, w: NodeId) -> Option<FusedActivation> {
        let nodes = &self.graph.nodes;
        let [c, a, b] = nodes[w].inputs[..] else {
            return None;
        };
        let g = self.producers[c].filter(|&g| nodes[g].op == OpKind::Greater)?;
        (nodes[g].inputs[..] == [a, b] && self.sole_reader(c)? == w).then_some(())?;
        let scaled = |t: TensorId, x: TensorId| -> Option<(NodeId, f32)> {
            let m = self.producers[t].filter(|&m| nodes[m].op == OpKind::Mul)?;
            let (mx, alpha) = self.with_scalar(m)?;
            let readers = self.readers(t)?;
            (mx == x && readers == [g.min(w), g.max(w)]).then_some((m, alpha))
        };
        let (x, m, alpha) = match (scaled(b, a), scaled(a, b)) {
            (Some((m, alpha)), _) => (a, m, alpha),
            (None, Some((m, alpha))) => (b, m, alpha),
            _ => return None,
        };
        (alpha > 0.0 && alpha <= 1.0).then_some(())?;
        let mut group = vec![m, g, w];
        group.sort_unstable();
        Some(FusedActivation {
            nodes: group,
            last: w,
            x,
            f: Unary::LeakyRelu { alpha },
        })
    }

    /// `Where(Less(x, 0), Mul(x, slope), x)`: PRelu with one slope.
    fn prelu_leaky(&self, w: NodeId) -> Option<FusedActivation> {
        let nodes = &self.graph.nodes;
        let [c, s, x] = nodes[w].inputs[..] else {
            return None;
        };
        let l = self.producers[c].filter(|&l| nodes[l].op == OpKind::Less)?;
        let [lx, zero] = nodes[l].inputs[..] else {
            return None;
        };
        (lx == x && self.scalar(zero) == Some(0.0) && self.sole_reader(c)? == w).then_some(())?;
        let m = self.producers[s].filter(|&m| nodes[m].op == OpKind::Mul)?;
        let (mx, slope) = self.with_scalar(m)?;
        (mx == x && self.sole_reader(s)? == w).then_some(())?;
        let mut group = vec![l, m, w];
        group.sort_unstable();
        Some(FusedActivation {
            nodes: group,
            last: w,
            x,
            f: Unary::LeakyRelu { alpha: slope },
        })
    }

    /// `Mul(x, HardSigmoid(x))`, either order.
    fn hard_sigmoid_mul(&self, m: NodeId) -> Option<FusedActivation> {
        let nodes = &self.graph.nodes;
        let [a, b] = nodes[m].inputs[..] else {
            return None;
        };
        let hs_of = |h: TensorId, x: TensorId| {
            let n = self.producers[h].filter(|&n| nodes[n].op == OpKind::HardSigmoid)?;
            (nodes[n].inputs[0] == x && self.sole_reader(h)? == m).then_some(n)
        };
        let (x, n) = match (hs_of(b, a), hs_of(a, b)) {
            (Some(n), _) => (a, n),
            (None, Some(n)) => (b, n),
            _ => return None,
        };
        let node = &nodes[n];
        Some(FusedActivation {
            nodes: vec![n.min(m), n.max(m)],
            last: m,
            x,
            f: Unary::HardSigmoidMul {
                alpha: node.attr_float("alpha", 0.2),
                beta: node.attr_float("beta", 0.5),
            },
        })
    }

    /// The readers of `t` in node order, when `t` is not a subgraph output.
    fn readers(&self, t: TensorId) -> Option<Vec<NodeId>> {
        if self.graph.outputs.contains(&t) {
            return None;
        }
        let mut r = self.consumers[t].clone();
        r.sort_unstable();
        r.dedup();
        Some(r)
    }

    fn f32_tensor(&self, t: TensorId) -> bool {
        self.graph.tensors[t].dtype == baton_delegate_api::ir::DType::F32
    }
}
