//! A rough count of each node's floating-point work, so that `baton plan` can say what
//! share of a model the host would run on its portable kernels.
//!
//! Multiply-adds count two: MatMul and Gemm `2 M N K`, Conv `2 x outputs x C/group x
//! kernel`, ConvTranspose `2 x inputs x M/group x kernel`, LSTM, GRU and RNN the products of
//! their gates with the input and the hidden state at every step. Every other op counts
//! one per output element (element-wise, data movement, normalisation: all small next to
//! the products). Nodes with a symbolic shape count 0; If and Loop count 0 (their
//! branches are planned, and counted, on their own).

use baton_delegate_api::ir::{Graph, Node, OpKind};

/// The estimated floating-point operations of `node` in `graph`.
pub fn node_flops(graph: &Graph, node: &Node) -> u64 {
    let shape = |i: usize| -> Option<Vec<u64>> {
        let t = *node.inputs.get(i)?;
        let s = graph.tensors[t].static_shape()?;
        Some(s.into_iter().map(|d| d as u64).collect())
    };
    let out = node
        .outputs
        .first()
        .and_then(|&t| graph.tensors[t].static_shape())
        .map(|s| s.into_iter().map(|d| d as u64).collect::<Vec<u64>>());
    let count = |s: &[u64]| s.iter().product::<u64>();
    let estimate = || -> Option<u64> {
        let out = out.clone()?;
        Some(match node.op {
            OpKind::If | OpKind::Loop => 0,
            OpKind::MatMul | OpKind::Gemm => {
                let a = shape(0)?;
                let k = match (node.op, node.attr_int("transA", 0)) {
                    (OpKind::Gemm, t) if t != 0 => *a.first()?,
                    _ => *a.last()?,
                };
                2 * count(&out) * k
            }
            OpKind::Conv => {
                let w = shape(1)?;
                2 * count(&out) * count(w.get(1..)?)
            }
            OpKind::ConvTranspose => {
                let (x, w) = (shape(0)?, shape(1)?);
                2 * count(&x) * count(w.get(1..)?)
            }
            OpKind::LSTM | OpKind::GRU | OpKind::RNN => {
                let (x, w, r) = (shape(0)?, shape(1)?, shape(2)?);
                let (steps, batch) = (*x.first()?, *x.get(1)?);
                2 * steps * batch * (count(&w) + count(&r))
            }
            _ => count(&out),
        })
    };
    estimate().unwrap_or(0)
}

/// The estimated floating-point operations of every node of `graph` (not of its branches).
pub fn graph_flops(graph: &Graph) -> u64 {
    graph.nodes.iter().map(|n| node_flops(graph, n)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::ir::{DType, GraphBuilder};

    #[test]
    fn products_count_their_multiply_adds() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 3, 8, 8]);
        let w = b.constant_f32("w", &[4, 3, 3, 3], &[0.0; 108]);
        let c = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let r = b.node(OpKind::Relu, &[c], &[]).unwrap();
        b.output(r);
        let g = b.finish().unwrap();
        // Conv: 2 x (2*4*6*6 outputs) x (3*3*3 taps); Relu: one per element.
        assert_eq!(node_flops(&g, &g.nodes[0]), 2 * 288 * 27);
        assert_eq!(node_flops(&g, &g.nodes[1]), 288);
        assert_eq!(graph_flops(&g), 2 * 288 * 27 + 288);
    }
}
