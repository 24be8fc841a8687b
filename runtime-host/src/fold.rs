//! Constant folding: nodes whose operands are all constants are computed once, with the
//! reference kernels, and replaced by their results.
//!
//! Exported models are full of shape arithmetic (`Shape → Gather → Unsqueeze → Concat →
//! Reshape`) that is static once the input shapes are known. Folding it turns run-time
//! shape operands into constants, which is what the shape rules and the plugins need
//! (a Reshape with a constant target is a plain reshape to them). `Shape` and `Size` of a
//! value with a fixed shape fold too, since they read only the shape. The pass runs after
//! import and again after the host binds symbolic dimensions.

use baton_delegate_api::ir::TensorData;
use baton_delegate_api::{shape, Dim, Graph, Node, OpKind, Storage, Tensor, TensorRef};

use crate::reference;

/// Folds every foldable node of `graph`; returns how many nodes were removed.
pub fn fold_constants(graph: &mut Graph) -> usize {
    let mut kept = Vec::with_capacity(graph.nodes.len());
    let mut folded = 0;
    for node in std::mem::take(&mut graph.nodes) {
        match fold_node(graph, &node) {
            Some(values) => {
                for (&out, t) in node.outputs.iter().zip(values) {
                    let decl = &mut graph.tensors[out];
                    decl.dtype = t.dtype;
                    decl.shape = t.shape.iter().map(|&d| Dim::Fixed(d)).collect();
                    decl.data = Some(Storage::Inline(TensorData::from_bytes(t.bytes())));
                }
                folded += 1;
            }
            None => kept.push(node),
        }
    }
    graph.nodes = kept;
    folded
}

/// The node's output values if it can be computed now.
fn fold_node(graph: &Graph, node: &Node) -> Option<Vec<Tensor>> {
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
    let expected = shape::infer_outputs(node, &typed, operand).ok()?;
    let mut outs: Vec<Tensor> = expected
        .iter()
        .take(node.outputs.len())
        .map(|(d, s)| Tensor::zeros(*d, s))
        .collect();
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
