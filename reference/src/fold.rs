//! Constant folding: nodes whose operands are all constants are computed once, with the
//! reference kernels, and replaced by their results.
//!
//! Exported models are full of shape arithmetic (`Shape → Gather → Unsqueeze → Concat →
//! Reshape`) that is static once the input shapes are known. Folding it turns run-time
//! shape operands into constants, which is what the shape rules and the plugins need
//! (a Reshape with a constant target is a plain reshape to them). `Shape` and `Size` of a
//! value with a fixed shape fold too, since they read only the shape. The pass runs after
//! import and again after the host binds symbolic dimensions.
//!
//! DequantizeLinear is never folded, even of a constant: in a QDQ model the int8 weight
//! and its scales *are* the information an integer backend (the CPU delegate's int8
//! groups, an NPU) needs, and folding them into an f32 constant would break up the
//! quantized groups it claims and quadruple the weights (ONNX Runtime keeps these nodes
//! for the same reason). Where no backend takes them, the portable kernels dequantize at
//! run time.
//!
//! An If whose condition is constant is replaced by the nodes of the branch it would take
//! ([`inline_if`]); they are folded in turn. (A model's If on a run-time input, such as
//! silero VAD's sample rate, stays.)

use std::collections::VecDeque;

use baton_delegate_api::ir::TensorData;
use baton_delegate_api::{
    shape, DType, Dim, Graph, Node, OpKind, Storage, Tensor, TensorDecl, TensorId, TensorRef,
};

use crate as reference;

/// The largest result folded into a constant. Shape arithmetic is tiny; a larger result
/// (a ConstantOfShape, Expand or Tile of constants) would only grow the weights, and one
/// sized by a typo or a hostile model must not be allocated at load.
pub const FOLD_MAX_BYTES: usize = 256 << 20;

/// Folds every foldable node of `graph`; returns how many nodes were removed.
pub fn fold_constants(graph: &mut Graph) -> usize {
    let mut queue: VecDeque<Node> = std::mem::take(&mut graph.nodes).into();
    let mut kept = Vec::with_capacity(queue.len());
    let mut folded = 0;
    while let Some(node) = queue.pop_front() {
        if let Some(inlined) = inline_if(graph, &node) {
            folded += 1;
            for n in inlined.into_iter().rev() {
                queue.push_front(n);
            }
            continue;
        }
        match fold_node(graph, &node) {
            Some(values) => {
                set_constants(graph, &node, values);
                folded += 1;
            }
            None => kept.push(node),
        }
    }
    graph.nodes = kept;
    folded
}

/// Makes the outputs of `node` the constants `values`.
pub fn set_constants(graph: &mut Graph, node: &Node, values: Vec<Tensor>) {
    for (&out, t) in node.outputs.iter().zip(values) {
        let decl = &mut graph.tensors[out];
        decl.dtype = t.dtype;
        decl.shape = t.shape.iter().map(|&d| Dim::Fixed(d)).collect();
        decl.data = Some(Storage::Inline(TensorData::from_bytes(t.bytes())));
    }
}

/// If `node` is an If with a constant condition: adds the tensors of the branch it takes to
/// `graph` and returns that branch's nodes (renamed `node/...`, reading the node's captured
/// inputs), followed by one Identity per output, which defines the node's outputs. The
/// caller puts them where `node` was.
pub fn inline_if(graph: &mut Graph, node: &Node) -> Option<Vec<Node>> {
    if node.op != OpKind::If {
        return None;
    }
    let cond = &graph.tensors[*node.inputs.first()?];
    let Some(Storage::Inline(data)) = &cond.data else {
        return None;
    };
    if cond.dtype != DType::Bool || data.bytes().len() != 1 {
        return None;
    }
    let name = if data.bytes()[0] != 0 {
        "then_branch"
    } else {
        "else_branch"
    };
    let branch = node.attr_graph(name)?;
    if branch.inputs.len() + 1 != node.inputs.len() || branch.outputs.len() < node.outputs.len() {
        return None;
    }
    // Branch tensor -> graph tensor: inputs are the node's captures, the rest are new.
    let mut map: Vec<Option<TensorId>> = vec![None; branch.tensors.len()];
    for (&b, &outer) in branch.inputs.iter().zip(&node.inputs[1..]) {
        map[b] = Some(outer);
    }
    for (b, decl) in branch.tensors.iter().enumerate() {
        if map[b].is_none() {
            graph.tensors.push(TensorDecl {
                name: format!("{}/{}", node.name, decl.name),
                ..decl.clone()
            });
            map[b] = Some(graph.tensors.len() - 1);
        }
    }
    let id = |b: TensorId| map[b].expect("every branch tensor is mapped");
    let mut nodes: Vec<Node> = branch
        .nodes
        .iter()
        .map(|n| Node {
            name: format!("{}/{}", node.name, n.name),
            inputs: n.inputs.iter().map(|&t| id(t)).collect(),
            outputs: n.outputs.iter().map(|&t| id(t)).collect(),
            ..n.clone()
        })
        .collect();
    for (k, (&out, &b)) in node.outputs.iter().zip(&branch.outputs).enumerate() {
        nodes.push(Node {
            name: format!("{}/{name}_out{k}", node.name),
            op: OpKind::Identity,
            inputs: vec![id(b)],
            outputs: vec![out],
            attrs: Default::default(),
        });
    }
    Some(nodes)
}

/// The node's output values if it can be computed now.
pub fn fold_node(graph: &Graph, node: &Node) -> Option<Vec<Tensor>> {
    if node.op.is_control_flow() || node.op == OpKind::DequantizeLinear {
        return None;
    }
    if matches!(node.op, OpKind::Shape | OpKind::Size) {
        let x = graph.tensors.get(*node.inputs.first()?)?;
        let dims = x.static_shape()?;
        return Some(vec![shape_value(node, &dims)]);
    }
    let mut inputs = Vec::with_capacity(node.inputs.len());
    for &i in &node.inputs {
        let decl = &graph.tensors[i];
        let Some(Storage::Inline(data)) = &decl.data else {
            return None;
        };
        let dims = decl.static_shape()?;
        inputs.push((decl.dtype, dims, data.bytes(), decl.quant.as_ref()));
    }
    let dtypes: Vec<_> = inputs.iter().map(|(d, ..)| *d).collect();
    reference::supports(node.op, &dtypes).ok()?;
    let views: Vec<TensorRef<'_>> = inputs
        .iter()
        .map(|(dtype, dims, data, quant)| TensorRef {
            dtype: *dtype,
            shape: dims,
            data,
            quant: quant.map(baton_delegate_api::QuantRef::from_quant),
        })
        .collect();
    let typed: Vec<_> = inputs.iter().map(|(d, s, ..)| (*d, s.clone())).collect();
    let operand = |i: usize| -> Option<Vec<i64>> {
        let v = views.get(i)?;
        (v.dtype == baton_delegate_api::DType::I64).then(|| bytemuck::pod_collect_to_vec(v.data))
    };
    // A Range's length comes from its values, which the shared rule reads only as i64.
    let expected = if node.op == OpKind::Range {
        reference::expected_outputs(node, &views).ok()?
    } else {
        shape::infer_outputs(node, &typed, operand).ok()?
    };
    // A result too large to fold (a ConstantOfShape of 2^40 elements) is left to run time,
    // where the session's size limits refuse it by name instead of aborting here.
    let mut outs: Vec<Tensor> = expected
        .iter()
        .take(node.outputs.len())
        .map(|(d, s)| {
            s.iter()
                .try_fold(d.size(), |bytes, &n| bytes.checked_mul(n))
                .filter(|&b| b <= FOLD_MAX_BYTES)
                .and_then(|_| Tensor::try_zeros(*d, s))
        })
        .collect::<Option<_>>()?;
    let mut out_views: Vec<_> = outs.iter_mut().map(Tensor::view_mut).collect();
    reference::run_node(node, &views, &mut out_views).ok()?;
    drop(out_views);
    Some(outs)
}

/// ONNX `Shape` (with `start`/`end`) or `Size` of a fixed shape.
fn shape_value(node: &Node, dims: &[usize]) -> Tensor {
    if node.op == OpKind::Size {
        return Tensor::from_i64(&[], &[dims.iter().product::<usize>() as i64]);
    }
    let rank = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let start = clamp(node.attr_int("start", 0));
    let end = clamp(node.attr_int("end", rank));
    let v: Vec<i64> = dims[start..end.max(start)]
        .iter()
        .map(|&d| d as i64)
        .collect();
    Tensor::from_i64(&[v.len()], &v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::{DType, GraphBuilder};

    #[test]
    fn constant_arithmetic_and_shapes_fold() {
        let mut b = GraphBuilder::new("f");
        let x = b.input_fixed("x", DType::F32, &[2, 3]);
        let a = b.constant_f32("a", &[3], &[1.0, 2.0, 3.0]);
        let c = b.constant_f32("c", &[3], &[0.5, 0.5, 0.5]);
        let s = b.node(OpKind::Add, &[a, c], &[]).unwrap();
        let y = b.node(OpKind::Add, &[x, s], &[]).unwrap();
        b.output(y);
        let mut g = b.finish().unwrap();
        assert_eq!(fold_constants(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        match &g.tensors[s].data {
            Some(Storage::Inline(d)) => {
                assert_eq!(
                    bytemuck::pod_collect_to_vec::<u8, f32>(d.bytes()),
                    vec![1.5, 2.5, 3.5]
                )
            }
            other => panic!("not folded: {other:?}"),
        }
    }
}
