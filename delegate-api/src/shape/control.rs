//! Shape rules of the control-flow ops: an output's type is read from the subgraphs.
//!
//! The rules see only declarations: the host specializes a subgraph for the shapes of the
//! node's actual inputs before asking, so by then a branch's outputs are as fixed as the
//! model allows. What stays open is value-dependent: an If whose branches produce
//! different extents, a Loop's trip count. Those dimensions become *provisional* symbols
//! (names ending in `?`, the convention of the ONNX importer for shapes that are not known
//! until run time), which the session refuses and the reference interpreter resolves as it
//! runs.

use crate::ir::{DType, Dim, Graph, Node, OpKind};

/// The outputs of an If or Loop node, from its subgraphs' declared outputs.
pub(crate) fn infer(node: &Node) -> Result<Vec<(DType, Vec<Dim>)>, String> {
    match node.op {
        OpKind::If => infer_if(node),
        OpKind::Loop => infer_loop(node),
        op => Err(format!("{op} is not control flow")),
    }
}

/// Whether a shape is the importer's placeholder for "rank unknown": one symbol ending in `?`.
pub fn is_provisional(shape: &[Dim]) -> bool {
    matches!(shape, [Dim::Sym(s)] if s.ends_with('?'))
}

fn subgraph<'a>(node: &'a Node, name: &str) -> Result<&'a Graph, String> {
    node.attr_graph(name)
        .ok_or_else(|| format!("attribute '{name}' (a subgraph) is missing"))
}

fn output_types(g: &Graph) -> Vec<(DType, Vec<Dim>)> {
    g.outputs
        .iter()
        .map(|&t| (g.tensors[t].dtype, g.tensors[t].shape.clone()))
        .collect()
}

fn infer_if(node: &Node) -> Result<Vec<(DType, Vec<Dim>)>, String> {
    let then = subgraph(node, "then_branch")?;
    let other = subgraph(node, "else_branch")?;
    let captures = node.inputs.len().saturating_sub(1);
    for (name, g) in [("then_branch", then), ("else_branch", other)] {
        if g.inputs.len() != captures {
            return Err(format!(
                "{name} takes {} inputs, but the node passes {captures} captured values",
                g.inputs.len()
            ));
        }
    }
    let (a, b) = (output_types(then), output_types(other));
    if a.len() != b.len() {
        return Err(format!(
            "then_branch has {} outputs, else_branch {}",
            a.len(),
            b.len()
        ));
    }
    a.into_iter()
        .zip(b)
        .enumerate()
        .map(|(k, ((da, sa), (db, sb)))| {
            if da != db {
                return Err(format!(
                    "output {k} is {da} in then_branch but {db} in else_branch"
                ));
            }
            Ok((da, merge(&node.name, k, &sa, &sb)))
        })
        .collect()
}

/// The shape of a value that is `a` or `b` depending on run-time values: dimensions that
/// agree are kept, others become provisional symbols; differing ranks leave only the
/// provisional placeholder.
fn merge(node: &str, k: usize, a: &[Dim], b: &[Dim]) -> Vec<Dim> {
    if is_provisional(a) || is_provisional(b) || a.len() != b.len() {
        return vec![Dim::Sym(format!("{node}_out{k}?"))];
    }
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(d, (x, y))| {
            if x == y {
                x.clone()
            } else {
                Dim::Sym(format!("{node}_out{k}_dim{d}?"))
            }
        })
        .collect()
}

fn infer_loop(node: &Node) -> Result<Vec<(DType, Vec<Dim>)>, String> {
    let body = subgraph(node, "body")?;
    let captures = usize::try_from(node.attr_int("captures", 0))
        .map_err(|_| "attribute 'captures' is negative".to_string())?;
    let carried = node.inputs.len().checked_sub(2 + captures).ok_or_else(|| {
        format!(
            "{} inputs cannot hold M, cond and {captures} captured values",
            node.inputs.len()
        )
    })?;
    if body.inputs.len() != node.inputs.len() {
        return Err(format!(
            "body takes {} inputs; the node passes {} (iteration, cond, {carried} carried, {captures} captured)",
            body.inputs.len(),
            node.inputs.len()
        ));
    }
    let outs = output_types(body);
    if outs.len() < 1 + carried {
        return Err(format!(
            "body returns {} values; it must return cond and the {carried} carried values",
            outs.len()
        ));
    }
    let trips = Dim::Sym(format!("{}_trips?", node.name));
    let mut result = Vec::with_capacity(outs.len() - 1);
    for (k, (dtype, shape)) in outs.into_iter().enumerate().skip(1) {
        if k <= carried {
            // The final value has the body's shape, or the initial one after no iteration.
            let initial = &body.tensors[body.inputs[1 + k]].shape;
            result.push((dtype, merge(&node.name, k - 1, &shape, initial)));
        } else if is_provisional(&shape) {
            result.push((
                dtype,
                vec![Dim::Sym(format!("{}_out{}?", node.name, k - 1))],
            ));
        } else {
            let mut stacked = vec![trips.clone()];
            stacked.extend(shape);
            result.push((dtype, stacked));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use crate::ir::{Attr, DType, Dim, Graph, GraphBuilder, OpKind};
    use crate::shape::infer_node;

    fn identity_of(shape: &[usize]) -> Graph {
        let mut b = GraphBuilder::new("branch");
        let x = b.input_fixed("x", DType::F32, shape);
        let y = b.node(OpKind::Identity, &[x], &[]).unwrap();
        b.output(y);
        b.finish().unwrap()
    }

    fn if_node(then: Graph, other: Graph, captured: &[usize]) -> Vec<(DType, Vec<Dim>)> {
        let mut b = GraphBuilder::new("g");
        let c = b.input_fixed("c", DType::Bool, &[]);
        let x = b.input_fixed("x", DType::F32, captured);
        let attrs = [
            ("then_branch", Attr::Graph(Box::new(then))),
            ("else_branch", Attr::Graph(Box::new(other))),
        ];
        b.named_node("sel", OpKind::If, &[c, x], &attrs).unwrap();
        let g = b.finish().unwrap();
        infer_node(&g, &g.nodes[0]).unwrap()
    }

    #[test]
    fn if_keeps_agreeing_dims_and_makes_the_others_provisional() {
        let same = if_node(identity_of(&[2, 3]), identity_of(&[2, 3]), &[2, 3]);
        assert_eq!(same, vec![(DType::F32, vec![Dim::Fixed(2), Dim::Fixed(3)])]);
        let differ = if_node(identity_of(&[2, 3]), identity_of(&[2, 4]), &[2, 3]);
        assert_eq!(
            differ[0].1,
            vec![Dim::Fixed(2), Dim::Sym("sel_out0_dim1?".into())]
        );
        let rank = if_node(identity_of(&[2, 3]), identity_of(&[6]), &[2, 3]);
        assert_eq!(rank[0].1, vec![Dim::Sym("sel_out0?".into())]);
        assert!(super::is_provisional(&rank[0].1));
    }

    #[test]
    fn loop_stacks_scan_outputs_on_a_trip_dimension() {
        let mut body = GraphBuilder::new("body");
        body.input_fixed("i", DType::I64, &[]);
        let cond = body.input_fixed("cond", DType::Bool, &[]);
        let v = body.input_fixed("v", DType::F32, &[4]);
        let k = body.input_fixed("k", DType::F32, &[4]);
        let next = body.node(OpKind::Add, &[v, k], &[]).unwrap();
        body.output(cond);
        body.output(next);
        body.output(v);
        let body = body.finish().unwrap();

        let mut b = GraphBuilder::new("g");
        let m = b.constant_i64("m", &[], &[3]);
        let c = b.input_fixed("c", DType::Bool, &[]);
        let v0 = b.input_fixed("v0", DType::F32, &[4]);
        let k = b.input_fixed("k", DType::F32, &[4]);
        let attrs = [
            ("body", Attr::Graph(Box::new(body))),
            ("captures", Attr::Int(1)),
        ];
        let outs = b
            .named_node_outputs("lp", OpKind::Loop, &[m, c, v0, k], &attrs, 2)
            .unwrap();
        let g = b.finish().unwrap();
        assert_eq!(g.tensors[outs[0]].shape, vec![Dim::Fixed(4)]);
        assert_eq!(
            g.tensors[outs[1]].shape,
            vec![Dim::Sym("lp_trips?".into()), Dim::Fixed(4)]
        );
        // Without the captures attribute, `k` would be a second carried value, and the
        // second output its final value rather than a scan.
        let mut carried = g.nodes[0].clone();
        carried.attrs.remove("captures");
        assert_eq!(infer_node(&g, &carried).unwrap()[1].1, vec![Dim::Fixed(4)]);
        // A body that does not take every input the node passes is refused.
        let mut short = g.nodes[0].clone();
        short.inputs.pop();
        assert!(infer_node(&g, &short).is_err());
    }
}
