//! Shape rules of the ops whose output extents depend on operand values
//! (NonMaxSuppression, Unique, Compress). The rules check the operands and fix every
//! extent that follows from shapes alone; the value-dependent extent is a symbol ending in
//! `?` (`{node}_count?`), which only running the node settles. A session runs such a node
//! on the host and plans what follows it for the extents seen (see the host's dynamic
//! regions).

use crate::ir::{DType, Dim, Graph, Node, OpKind, TensorId};
use crate::sdk::Constants;
use crate::shape::normalize_axis;

/// Each output's dtype and shape, value-dependent extents symbolic.
type DimOutputs = Vec<(DType, Vec<Dim>)>;

/// Whether `op`'s output extents depend on its operands' values, not only their shapes.
pub fn has_value_dependent_shape(op: OpKind) -> bool {
    matches!(
        op,
        OpKind::NonMaxSuppression | OpKind::Unique | OpKind::Compress
    )
}

/// One output of a value-dependent node as a caller sizes it (ABI 1.3 bounded outputs):
/// every extent at most `bound`, and exactly it where `exact` says the extent follows
/// from shapes alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundedOutput {
    /// The output's element type.
    pub dtype: DType,
    /// The most each extent can be: what the caller allocates.
    pub bound: Vec<usize>,
    /// Per extent, whether it follows from shapes alone (and so is exactly `bound`).
    pub exact: Vec<bool>,
}

impl BoundedOutput {
    /// Checks the extents a plugin reports against this bound, so that a caller never
    /// reads past the bytes it allocated and never takes a shape the op cannot give.
    pub fn check(&self, actual: &[usize]) -> Result<(), String> {
        let fits = actual.len() == self.bound.len()
            && actual
                .iter()
                .zip(self.bound.iter().zip(&self.exact))
                .all(|(&a, (&b, &exact))| if exact { a == b } else { a <= b });
        if fits {
            Ok(())
        } else {
            Err(format!(
                "extents {actual:?} do not fit the bound {:?} (a value-dependent extent may \
                 only shrink; the others are fixed)",
                self.bound
            ))
        }
    }
}

/// The outputs of a value-dependent `node` bounded from its input shapes: the sizes a
/// caller allocates before the node runs. NonMaxSuppression keeps at most
/// `max_output_boxes_per_class` boxes (every box when that operand is not a constant) of
/// every class, Unique at most every value (or slice), Compress at most one entry per
/// condition element. `constant(i)` is operand `i`'s first value when it is a constant
/// integer (`None` otherwise; only NonMaxSuppression reads one). `Err` when the operands
/// are malformed, `Ok(None)` for any other op.
pub fn output_bounds(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
    constant: &dyn Fn(usize) -> Option<i64>,
) -> Result<Option<Vec<BoundedOutput>>, String> {
    let Some(outputs) = infer(node, inputs) else {
        return Ok(None);
    };
    let outputs = outputs?;
    let count = match node.op {
        OpKind::NonMaxSuppression => {
            // Checked by `infer`: boxes [B, N, 4], scores [B, C, N]. An omitted (or empty)
            // max_output_boxes_per_class is 0: no box is kept.
            let scores = &inputs[1].1;
            let omitted = inputs
                .get(2)
                .is_none_or(|(_, s)| s.iter().product::<usize>() == 0);
            let per_class = match (omitted, constant(2)) {
                (true, _) => 0,
                (false, Some(m)) => scores[2].min(usize::try_from(m.max(0)).unwrap_or(usize::MAX)),
                (false, None) => scores[2],
            };
            (scores[0] * scores[1]).checked_mul(per_class)
        }
        OpKind::Unique => Some(match node.attrs.get("axis") {
            None => inputs[0].1.iter().product(),
            Some(_) => {
                let x = &inputs[0].1;
                x[normalize_axis(node.attr_int("axis", 0), x.len())?]
            }
        }),
        OpKind::Compress => Some(inputs[1].1[0]),
        _ => return Ok(None),
    }
    .ok_or_else(|| format!("{}: the bound of its output overflows", node.op))?;
    Ok(Some(
        outputs
            .into_iter()
            .map(|(dtype, dims)| BoundedOutput {
                dtype,
                exact: dims.iter().map(|d| matches!(d, Dim::Fixed(_))).collect(),
                bound: dims
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(v) => *v,
                        _ => count,
                    })
                    .collect(),
            })
            .collect(),
    ))
}

/// [`output_bounds`] of `node` in `graph`, reading integer operands from `consts`:
/// `Err` when an operand's shape is symbolic or the operands are malformed.
pub fn node_output_bounds(
    graph: &Graph,
    node: &Node,
    consts: &Constants<'_>,
) -> Result<Option<Vec<BoundedOutput>>, String> {
    let inputs: Option<Vec<(DType, Vec<usize>)>> = node
        .inputs
        .iter()
        .map(|&t| {
            let d = &graph.tensors[t];
            d.static_shape().map(|s| (d.dtype, s))
        })
        .collect();
    let inputs = inputs.ok_or("an operand has a symbolic shape")?;
    let constant = |i: usize| -> Option<i64> {
        let t = *node.inputs.get(i)?;
        let bytes = consts.bytes(t).filter(|b| !b.is_empty())?;
        crate::dtype::element_int(graph.tensors[t].dtype, bytes, 0)
            .and_then(|v| i64::try_from(v).ok())
    };
    output_bounds(node, &inputs, &constant)
}

/// `graph` with the outputs of its value-dependent nodes declared at their bounds (see
/// [`output_bounds`], reading the graph's inline integer constants), as a caller hands
/// such a graph to a plugin that takes bounded outputs, and the bound of each graph output
/// so declared (`None` for the others). Only a node whose inputs have static shapes and
/// whose outputs no other node reads is bounded: the extents it produces decide the
/// shapes after it.
pub fn bound_graph(graph: &Graph) -> Result<(Graph, Vec<Option<BoundedOutput>>), String> {
    let mut g = graph.clone();
    let mut bounds: Vec<(TensorId, BoundedOutput)> = Vec::new();
    for node in &graph.nodes {
        if !has_value_dependent_shape(node.op) {
            continue;
        }
        let read_after = graph
            .nodes
            .iter()
            .any(|n| n.inputs.iter().any(|t| node.outputs.contains(t)));
        let symbolic = node
            .inputs
            .iter()
            .any(|&t| graph.tensors[t].static_shape().is_none());
        if symbolic || read_after {
            continue;
        }
        // Inline constants only: a graph built here has no views beside it.
        let outs = node_output_bounds(graph, node, &Constants::new(graph, &[]))
            .map_err(|e| format!("node {}: {e}", node.label()))?
            .unwrap_or_default();
        for (&t, b) in node.outputs.iter().zip(outs) {
            let decl = &mut g.tensors[t];
            decl.dtype = b.dtype;
            decl.shape = b.bound.iter().map(|&d| Dim::Fixed(d)).collect();
            bounds.push((t, b));
        }
    }
    let per_output = graph
        .outputs
        .iter()
        .map(|t| bounds.iter().find(|(b, _)| b == t).map(|(_, b)| b.clone()))
        .collect();
    Ok((g, per_output))
}

/// The outputs of `node` if its op is one of this family's, else `None`.
pub(crate) fn infer(
    node: &Node,
    inputs: &[(DType, Vec<usize>)],
) -> Option<Result<DimOutputs, String>> {
    let count = Dim::Sym(format!("{}_count?", node.name));
    let r = match node.op {
        OpKind::NonMaxSuppression => {
            nms(inputs).map(|()| vec![(DType::I64, vec![count, Dim::Fixed(3)])])
        }
        OpKind::Unique => unique(node, inputs, count),
        OpKind::Compress => compress(node, inputs, count),
        _ => return None,
    };
    Some(r)
}

/// The message of [`crate::shape::infer_outputs`] for these ops, which answers concrete
/// shapes only.
pub(crate) fn not_static(op: OpKind) -> String {
    format!("{op}: an output extent depends on the operand values, known only when the node runs")
}

fn input(
    inputs: &[(DType, Vec<usize>)],
    op: OpKind,
    i: usize,
) -> Result<&(DType, Vec<usize>), String> {
    inputs.get(i).ok_or_else(|| format!("{op} needs input {i}"))
}

/// NonMaxSuppression: boxes `[B, N, 4]` and scores `[B, C, N]` of f32; the optional
/// scalars (a 0-element operand stands for an omitted one) hold one value each.
fn nms(inputs: &[(DType, Vec<usize>)]) -> Result<(), String> {
    let op = OpKind::NonMaxSuppression;
    let (bd, boxes) = input(inputs, op, 0)?;
    let (sd, scores) = input(inputs, op, 1)?;
    if *bd != DType::F32 || *sd != DType::F32 {
        return Err(format!(
            "{op} boxes and scores must be f32, got {bd} and {sd}"
        ));
    }
    if boxes.len() != 3 || boxes[2] != 4 {
        return Err(format!(
            "{op} boxes must be [batch, boxes, 4], got {boxes:?}"
        ));
    }
    if scores.len() != 3 || scores[0] != boxes[0] || scores[2] != boxes[1] {
        return Err(format!(
            "{op} scores must be [batch, classes, boxes] = [{}, _, {}], got {scores:?}",
            boxes[0], boxes[1]
        ));
    }
    let wants = [
        (2, "max_output_boxes_per_class", DType::I64),
        (3, "iou_threshold", DType::F32),
        (4, "score_threshold", DType::F32),
    ];
    for (i, what, dtype) in wants {
        let Some((d, s)) = inputs.get(i) else { break };
        let n: usize = s.iter().product();
        if n == 0 {
            continue;
        }
        if *d != dtype || n != 1 || s.len() > 1 {
            return Err(format!(
                "{op} {what} must be one {dtype} value, got {d} {s:?}"
            ));
        }
    }
    if inputs.len() > 5 {
        return Err(format!("{op} takes 2 to 5 inputs, got {}", inputs.len()));
    }
    Ok(())
}

/// Unique: `Y` (flattened, or `x`'s shape with the count along `axis`), then the i64
/// `indices`, `inverse_indices` and `counts`.
fn unique(node: &Node, inputs: &[(DType, Vec<usize>)], count: Dim) -> Result<DimOutputs, String> {
    let (dtype, x) = input(inputs, node.op, 0)?;
    if inputs.len() != 1 {
        return Err(format!("Unique takes one input, got {}", inputs.len()));
    }
    let (y, inverse) = match node.attrs.get("axis") {
        None => (vec![count.clone()], x.iter().product::<usize>()),
        Some(_) => {
            let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
            let mut y: Vec<Dim> = x.iter().map(|&d| Dim::Fixed(d)).collect();
            y[axis] = count.clone();
            (y, x[axis])
        }
    };
    Ok(vec![
        (*dtype, y),
        (DType::I64, vec![count.clone()]),
        (DType::I64, vec![Dim::Fixed(inverse)]),
        (DType::I64, vec![count]),
    ])
}

/// Compress: `x` (flattened without `axis`) with the count of trues along the axis; the
/// condition is a 1-D bool no longer than that axis.
fn compress(node: &Node, inputs: &[(DType, Vec<usize>)], count: Dim) -> Result<DimOutputs, String> {
    let (dtype, x) = input(inputs, node.op, 0)?;
    let (cd, cond) = input(inputs, node.op, 1)?;
    if inputs.len() != 2 {
        return Err(format!("Compress takes two inputs, got {}", inputs.len()));
    }
    if *cd != DType::Bool || cond.len() != 1 {
        return Err(format!(
            "Compress condition must be a 1-D bool, got {cd} {cond:?}"
        ));
    }
    let (out, extent) = match node.attrs.get("axis") {
        None => (vec![count], x.iter().product::<usize>()),
        Some(_) => {
            let axis = normalize_axis(node.attr_int("axis", 0), x.len())?;
            let mut y: Vec<Dim> = x.iter().map(|&d| Dim::Fixed(d)).collect();
            y[axis] = count;
            (y, x[axis])
        }
    };
    if cond[0] > extent {
        return Err(format!(
            "Compress condition has {} entries, more than the {extent} it selects from",
            cond[0]
        ));
    }
    Ok(vec![(*dtype, out)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Attr, GraphBuilder};

    /// x -> op -> (outputs), optionally read by a Relu.
    fn graph(
        op: OpKind,
        inputs: &[(DType, &[usize])],
        attrs: &[(&str, Attr)],
        read: bool,
    ) -> Graph {
        let mut b = GraphBuilder::new("g");
        let ids: Vec<TensorId> = inputs
            .iter()
            .enumerate()
            .map(|(i, (d, s))| b.input_fixed(&format!("in{i}"), *d, s))
            .collect();
        let out = b.node(op, &ids, attrs).unwrap();
        if read {
            let r = b.node(OpKind::Relu, &[out], &[]).unwrap();
            b.output(r);
        } else {
            b.output(out);
        }
        b.finish().unwrap()
    }

    #[test]
    fn bounds_follow_from_shapes_and_mark_the_fixed_extents() {
        let g = graph(
            OpKind::Compress,
            &[(DType::F32, &[2, 6, 3]), (DType::Bool, &[4])],
            &[("axis", Attr::Int(1))],
            false,
        );
        let (bounded, per_output) = bound_graph(&g).unwrap();
        let b = per_output[0].clone().expect("a bounded output");
        assert_eq!(b.bound, vec![2, 4, 3]);
        assert_eq!(b.exact, vec![true, false, true]);
        assert_eq!(
            bounded.tensors[bounded.outputs[0]].static_shape(),
            Some(vec![2, 4, 3])
        );
        assert!(b.check(&[2, 0, 3]).is_ok());
        assert!(b.check(&[2, 4, 3]).is_ok());
        assert!(b.check(&[2, 5, 3]).is_err(), "past the bound");
        assert!(b.check(&[1, 2, 3]).is_err(), "a fixed extent changed");
        assert!(b.check(&[2, 2]).is_err(), "another rank");

        let g = graph(
            OpKind::NonMaxSuppression,
            &[(DType::F32, &[2, 5, 4]), (DType::F32, &[2, 3, 5])],
            &[],
            false,
        );
        let (_, per_output) = bound_graph(&g).unwrap();
        assert_eq!(
            per_output[0].as_ref().unwrap().bound,
            vec![0, 3],
            "no max: no box"
        );
        let nms = &g.nodes[0];
        let shapes = [
            (DType::F32, vec![2, 5, 4]),
            (DType::F32, vec![2, 3, 5]),
            (DType::I64, vec![1]),
        ];
        let bound = |c: Option<i64>| {
            output_bounds(nms, &shapes, &|_| c).unwrap().unwrap()[0]
                .bound
                .clone()
        };
        assert_eq!(bound(None), vec![30, 3], "a run-time max: every box");
        assert_eq!(bound(Some(2)), vec![12, 3]);
        assert_eq!(bound(Some(9)), vec![30, 3]);
        assert_eq!(bound(Some(-1)), vec![0, 3]);

        let g = graph(OpKind::Unique, &[(DType::I64, &[4, 5])], &[], false);
        let node = &g.nodes[0];
        let outs = output_bounds(node, &[(DType::I64, vec![4, 5])], &|_| None)
            .unwrap()
            .unwrap();
        let shapes: Vec<_> = outs
            .iter()
            .map(|o| (o.bound.clone(), o.exact.clone()))
            .collect();
        assert_eq!(
            shapes,
            vec![
                (vec![20], vec![false]),
                (vec![20], vec![false]),
                (vec![20], vec![true]),
                (vec![20], vec![false]),
            ]
        );
    }

    #[test]
    fn an_output_read_inside_the_graph_is_not_bounded() {
        let g = graph(
            OpKind::Compress,
            &[(DType::F32, &[6]), (DType::Bool, &[6])],
            &[("axis", Attr::Int(0))],
            true,
        );
        let (bounded, per_output) = bound_graph(&g).unwrap();
        assert_eq!(per_output, vec![None]);
        assert_eq!(bounded.tensors, g.tensors);
        let relu = graph(OpKind::Relu, &[(DType::F32, &[3])], &[], false);
        assert_eq!(
            output_bounds(&relu.nodes[0], &[(DType::F32, vec![3])], &|_| None),
            Ok(None)
        );
    }
}
