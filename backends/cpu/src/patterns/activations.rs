//! Activations that tf2onnx, Paddle2ONNX and the ONNX importer's own rewrites spell as
//! several nodes, found at init and run as one element-wise pass with the same bits:
//!
//! - **LeakyRelu** as `Max(x, alpha * x)`, which the importer turns into
//!   `Where(Greater(a, b), a, b)` with `b = Mul(x, alpha)` (or `a`, either order), for
//!   `0 < alpha <= 1`: `x > alpha * x` exactly when `x > 0`, zeros keep their sign and
//!   infinities their value on both sides (alpha 0 would make `0 * inf` a NaN);
//! - **LeakyRelu** as PRelu with one slope, `Where(Less(x, 0), Mul(x, slope), x)`;
//! - **GELU, tanh form**, `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` with the cube
//!   as `Pow(x, 3)` (tf2onnx, Paddle2ONNX) or `x * x * x`, and the halving in any of the
//!   places the Erf form allows: run as Gelu's tanh form, within the activation
//!   tolerance of the nodes (not bit for bit: the nodes round after every step);
//! - **HardSwish-like** `Mul(x, HardSigmoid(x))` (torch's `x * hardsigmoid(x)`), kept as
//!   `x * clamp(alpha * x + beta, 0, 1)` since HardSwish's `x / 6` differs in the last bit
//!   from `x * (1/6)`;
//! - **SiLU** (Swish) `Mul(x, Sigmoid(x))`, as torch exports `nn.SiLU` (YOLOv5 and later,
//!   EfficientNet): the Sigmoid rounded, then the product, as the two nodes compute it.

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
            OpKind::Mul => self
                .hard_sigmoid_mul(last)
                .or_else(|| self.sigmoid_mul(last)),
            OpKind::Tanh => self.tanh_gelu(last),
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
        let (x, n) = self.times_function_of(m, OpKind::HardSigmoid)?;
        let node = &self.graph.nodes[n];
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

    /// `Mul(x, Sigmoid(x))`, either order.
    fn sigmoid_mul(&self, m: NodeId) -> Option<FusedActivation> {
        let (x, n) = self.times_function_of(m, OpKind::Sigmoid)?;
        Some(FusedActivation {
            nodes: vec![n.min(m), n.max(m)],
            last: m,
            x,
            f: Unary::Silu,
        })
    }

    /// For the Mul `m` of `x` by `op(x)` (either order, `op(x)` read by `m` alone): `x`
    /// and the `op` node.
    fn times_function_of(&self, m: NodeId, op: OpKind) -> Option<(TensorId, NodeId)> {
        let nodes = &self.graph.nodes;
        let [a, b] = nodes[m].inputs[..] else {
            return None;
        };
        let of = |h: TensorId, x: TensorId| {
            let n = self.producers[h].filter(|&n| nodes[n].op == op)?;
            (nodes[n].inputs[0] == x && self.sole_reader(h)? == m).then_some(n)
        };
        match (of(b, a), of(a, b)) {
            (Some(n), _) => Some((a, n)),
            (None, Some(n)) => Some((b, n)),
            _ => None,
        }
    }

    /// The tanh GELU whose Tanh is `t` (found from the Tanh, which it has one of).
    fn tanh_gelu(&self, t: NodeId) -> Option<FusedActivation> {
        let nodes = &self.graph.nodes;
        let c = nodes[t].inputs[0];
        let scale = self.producers[c].filter(|&n| nodes[n].op == OpKind::Mul)?;
        (self.sole_reader(c)? == t).then_some(())?;
        let (b, k) = self.with_scalar(scale)?;
        ((k - 0.797_884_6).abs() < 1e-6).then_some(())?;
        let add = self.producers[b].filter(|&n| nodes[n].op == OpKind::Add)?;
        (self.sole_reader(b)? == scale).then_some(())?;
        // x + 0.044715 x^3, either order.
        let [p, q] = nodes[add].inputs[..] else {
            return None;
        };
        let cubic = |x: TensorId, a: TensorId| -> Option<Vec<NodeId>> {
            let m = self.producers[a].filter(|&n| nodes[n].op == OpKind::Mul)?;
            (self.sole_reader(a)? == add).then_some(())?;
            let (cube, k3) = self.with_scalar(m)?;
            ((k3 - 0.044_715).abs() < 1e-7).then_some(())?;
            let mut found = vec![m];
            found.extend(self.cube_of(x, cube, m)?);
            Some(found)
        };
        let (x, inner) = match (cubic(p, q), cubic(q, p)) {
            (Some(n), _) => (p, n),
            (None, Some(n)) => (q, n),
            _ => return None,
        };
        let (tail, last) = self.halved_product(x, t)?;
        let mut group: Vec<NodeId> = [scale, add, t]
            .into_iter()
            .chain(inner)
            .chain(tail)
            .collect();
        group.sort_unstable();
        group.dedup();
        Some(FusedActivation {
            nodes: group,
            last,
            x,
            f: Unary::GeluTanh,
        })
    }

    /// The nodes computing `x^3` into `cube` (`Pow(x, 3)`, or `x * x * x` in either
    /// grouping), each read only inside the pattern.
    fn cube_of(&self, x: TensorId, cube: TensorId, reader: NodeId) -> Option<Vec<NodeId>> {
        let nodes = &self.graph.nodes;
        let n = self.producers[cube]?;
        (self.sole_reader(cube)? == reader).then_some(())?;
        match nodes[n].op {
            OpKind::Pow => (nodes[n].inputs[0] == x
                && self.scalar(nodes[n].inputs[1]) == Some(3.0))
            .then(|| vec![n]),
            OpKind::Mul => {
                let [a, b] = nodes[n].inputs[..] else {
                    return None;
                };
                let sq = if a == x {
                    b
                } else if b == x {
                    a
                } else {
                    return None;
                };
                let s = self.producers[sq].filter(|&m| nodes[m].op == OpKind::Mul)?;
                (nodes[s].inputs[..] == [x, x] && self.sole_reader(sq)? == n).then(|| vec![n, s])
            }
            _ => None,
        }
    }

    /// From an activation node `f` (Erf or Tanh), the `+ 1`, the product with `x` and the
    /// halving, in any of `(x * (f + 1)) * 0.5`, `x * ((f + 1) * 0.5)` and
    /// `(x * 0.5) * (f + 1)`: the nodes and the last one.
    fn halved_product(&self, x: TensorId, f: NodeId) -> Option<(Vec<NodeId>, NodeId)> {
        let nodes = &self.graph.nodes;
        let add = self.sole_reader(nodes[f].outputs[0])?;
        let (e, one) = self
            .with_scalar(add)
            .filter(|_| nodes[add].op == OpKind::Add)?;
        (e == nodes[f].outputs[0] && one == 1.0).then_some(())?;
        let a = nodes[add].outputs[0];
        let mul = self
            .sole_reader(a)
            .filter(|&m| nodes[m].op == OpKind::Mul)?;
        let [i0, i1] = nodes[mul].inputs[..] else {
            return None;
        };
        let other = if i0 == a { i1 } else { i0 };
        if other == x {
            let half = self.sole_reader(nodes[mul].outputs[0])?;
            let (m, h) = self
                .with_scalar(half)
                .filter(|_| nodes[half].op == OpKind::Mul)?;
            (m == nodes[mul].outputs[0] && h == 0.5).then(|| (vec![add, mul, half], half))
        } else if self.scalar(other) == Some(0.5) {
            let outer = self.sole_reader(nodes[mul].outputs[0])?;
            let [o0, o1] = nodes[outer].inputs[..] else {
                return None;
            };
            let xo = if o0 == nodes[mul].outputs[0] { o1 } else { o0 };
            (nodes[outer].op == OpKind::Mul && xo == x).then(|| (vec![add, mul, outer], outer))
        } else {
            let halver = self.producers[other].filter(|&h| nodes[h].op == OpKind::Mul)?;
            (self.sole_reader(other)? == mul).then_some(())?;
            let (hx, h) = self.with_scalar(halver)?;
            (hx == x && h == 0.5).then(|| (vec![halver, add, mul], mul))
        }
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

#[cfg(test)]
mod tests {
    use super::super::find_activations;
    use super::*;
    use baton_delegate_api::ir::{DType, GraphBuilder};
    use baton_delegate_api::Constants;

    /// tf2onnx's tanh GELU, the cube as Pow(x, 3) or x * x * x.
    fn tanh_gelu(pow: bool) -> baton_delegate_api::ir::Graph {
        let mut g = GraphBuilder::new("gelu");
        let x = g.input_fixed("x", DType::F32, &[2, 3]);
        let c = |g: &mut GraphBuilder, n: &str, v: f32| g.constant_f32(n, &[], &[v]);
        let cube = if pow {
            let three = c(&mut g, "three", 3.0);
            g.node(OpKind::Pow, &[x, three], &[]).unwrap()
        } else {
            let sq = g.node(OpKind::Mul, &[x, x], &[]).unwrap();
            g.node(OpKind::Mul, &[sq, x], &[]).unwrap()
        };
        let k3 = c(&mut g, "k3", 0.044_715);
        let a = g.node(OpKind::Mul, &[cube, k3], &[]).unwrap();
        let b = g.node(OpKind::Add, &[x, a], &[]).unwrap();
        let k = c(&mut g, "k", 0.797_884_6);
        let s = g.node(OpKind::Mul, &[b, k], &[]).unwrap();
        let t = g.node(OpKind::Tanh, &[s], &[]).unwrap();
        let one = c(&mut g, "one", 1.0);
        let d = g.node(OpKind::Add, &[t, one], &[]).unwrap();
        let half = c(&mut g, "half", 0.5);
        let h = g.node(OpKind::Mul, &[x, half], &[]).unwrap();
        let y = g.node(OpKind::Mul, &[h, d], &[]).unwrap();
        g.output(y);
        g.finish().unwrap()
    }

    #[test]
    fn the_tanh_gelu_is_found_with_either_cube() {
        for pow in [true, false] {
            let graph = tanh_gelu(pow);
            let found = find_activations(&graph, &Constants::new(&graph, &[]));
            assert_eq!(found.len(), 1, "pow {pow}");
            assert_eq!(found[0].nodes.len(), graph.nodes.len());
            assert_eq!(found[0].f, Unary::GeluTanh);
            assert_eq!(found[0].last, graph.nodes.len() - 1);
        }
    }

    /// SiLU in either operand order; not when the Sigmoid has another reader (its value
    /// is needed on its own) or multiplies something else.
    #[test]
    fn silu_is_found_in_either_order_and_only_when_whole() {
        for (swap, extra, other) in [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (false, false, true),
        ] {
            let mut g = GraphBuilder::new("silu");
            let x = g.input_fixed("x", DType::F32, &[2, 3]);
            let z = g.input_fixed("z", DType::F32, &[2, 3]);
            let s = g.node(OpKind::Sigmoid, &[x], &[]).unwrap();
            let lhs = if other { z } else { x };
            let ins = if swap { [s, lhs] } else { [lhs, s] };
            let y = g.node(OpKind::Mul, &ins, &[]).unwrap();
            g.output(y);
            if extra {
                g.output(s);
            }
            let graph = g.finish().unwrap();
            let found = find_activations(&graph, &Constants::new(&graph, &[]));
            if extra || other {
                assert!(found.is_empty(), "extra {extra}, other {other}");
                continue;
            }
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].f, Unary::Silu);
            assert_eq!(
                (found[0].nodes.clone(), found[0].last, found[0].x),
                (vec![0, 1], 1, x)
            );
        }
    }
}
