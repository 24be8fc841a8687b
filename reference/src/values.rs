//! Value inputs: graph inputs whose *values* (not only their shapes) decide the shapes of
//! the graph, such as the `axes` of a ReduceSum or the `pads` of a Pad given at run time.
//!
//! Such a graph cannot be specialised from its inputs' extents alone: the shape rules need
//! the operand's values. ONNX Runtime accepts these models, so Baton treats the inputs as
//! part of the specialisation key: [`bind_values`] makes each one a constant holding the
//! run's values, after which [`crate::specialize()`] folds the shape arithmetic that reads
//! them, and Reshape, Reduce, Pad... become ordinary nodes with constant operands. The host
//! caches one specialised session per set of values, as it does per binding of dimensions.
//!
//! Which inputs are value inputs follows from the graph alone ([`value_inputs`]): a graph
//! input from which a *shape operand* (see [`shape_operands`]) is computed, through any
//! nodes except those that read only their operand's shape (Shape, Size). Nothing is
//! stored for it, so a `.btir` or `.baton` file written before value inputs existed reads
//! the same, and a specialised graph (every shape operand constant) has none.
//!
//! A value input is small: its element count is at most [`MAX_VALUE_ELEMENTS`]. A larger
//! tensor feeding a shape operand is data (a shape computed from a whole activation), which
//! a session specialised per value would recompile on every run; it is refused by name.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use baton_delegate_api::ir::TensorData;
use baton_delegate_api::{DType, Dim, Graph, Node, OpKind, Storage, Tensor, TensorId};

use crate::specialize::SpecializeError;

/// The most elements a value input may hold: axes, pads, shapes and sizes are short lists.
pub const MAX_VALUE_ELEMENTS: usize = 64;

/// The operands of `node` whose values decide its output shapes (the ONNX inputs that the
/// importer cannot turn into attributes when they are not constant), and a Loop's trip
/// count and condition when it has scan outputs (stacked once per iteration).
///
/// Ops are matched by name so that ops added to the IR later (Range, OneHot) are covered
/// as soon as they exist.
pub fn shape_operands(node: &Node) -> &'static [usize] {
    if node.op == OpKind::Loop {
        let captures = usize::try_from(node.attr_int("captures", 0)).unwrap_or(0);
        let carried = node.inputs.len().saturating_sub(2 + captures);
        return if node.outputs.len() > carried {
            &[0, 1]
        } else {
            &[]
        };
    }
    match node.op.name() {
        "Reshape" | "Expand" | "Tile" | "Split" | "Squeeze" | "Unsqueeze" | "TopK" | "OneHot" => {
            &[1]
        }
        "ConstantOfShape" => &[0],
        "Pad" => &[1, 3],
        "Slice" => &[1, 2, 3, 4],
        "Resize" => &[2, 3],
        "Range" => &[0, 1, 2],
        "AffineGrid" => &[1],
        "DFT" => &[1, 2],
        "STFT" => &[1, 3],
        "Col2Im" => &[1, 2],
        "MaxUnpool" => &[2],
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => &[0],
        // num_mel_bins and dft_length; sample_rate and the edges only scale values.
        "MelWeightMatrix" => &[0, 1],
        name if name.starts_with("Reduce") => &[1],
        _ => &[],
    }
}

/// The graph inputs whose values decide shapes (see the module docs), in input order.
pub fn value_inputs(graph: &Graph) -> Vec<TensorId> {
    let producer: HashMap<TensorId, usize> = graph
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(n, node)| node.outputs.iter().map(move |&t| (t, n)))
        .collect();
    let mut stack: Vec<TensorId> = Vec::new();
    for node in &graph.nodes {
        for &i in shape_operands(node) {
            if let Some(&t) = node.inputs.get(i) {
                stack.push(t);
            }
        }
    }
    let mut seen = BTreeSet::new();
    let mut found = BTreeSet::new();
    while let Some(t) = stack.pop() {
        if !seen.insert(t) || graph.tensors[t].is_const() {
            continue;
        }
        if graph.inputs.contains(&t) {
            found.insert(t);
            continue;
        }
        let Some(&n) = producer.get(&t) else {
            continue;
        };
        let node = &graph.nodes[n];
        match node.op {
            OpKind::Shape | OpKind::Size => {} // reads its operand's shape only
            // Control flow: only the condition (If) or the trip count and condition
            // (Loop) are followed. A value passed into a subgraph is as often data whose
            // shape the subgraph reads, and a large input is no value input.
            OpKind::If => stack.extend(node.inputs.first().copied()),
            OpKind::Loop => stack.extend(node.inputs.iter().take(2).copied()),
            _ => stack.extend(node.inputs.iter().copied()),
        }
    }
    graph
        .inputs
        .iter()
        .copied()
        .filter(|t| found.contains(t))
        .collect()
}

/// The names of [`value_inputs`], in input order.
pub fn value_input_names(graph: &Graph) -> Vec<String> {
    value_inputs(graph)
        .into_iter()
        .map(|t| graph.tensors[t].name.clone())
        .collect()
}

/// `graph` with every value input made a constant holding its entry of `values` (by input
/// name; entries for other inputs are ignored, so a run's whole input set can be passed).
/// A value input with no entry is left as it is: [`crate::specialize()`] then fails on the
/// shape it decides with [`SpecializeError::MissingValue`], naming it.
///
/// The value inputs stay inputs of the graph, now constant: a session built from the
/// result takes the same inputs as the model and checks that each run gives these values
/// (a run with others needs its own specialisation). Each value must have the input's
/// dtype, its rank, its fixed extents, and at most [`MAX_VALUE_ELEMENTS`] elements.
pub fn bind_values(
    graph: &Graph,
    values: &BTreeMap<String, Tensor>,
) -> Result<Graph, SpecializeError> {
    let mut g = graph.clone();
    for t in value_inputs(graph) {
        let decl = &mut g.tensors[t];
        let Some(value) = values.get(&decl.name) else {
            continue;
        };
        let fits = value.dtype == decl.dtype
            && value.shape.len() == decl.shape.len()
            && decl
                .shape
                .iter()
                .zip(&value.shape)
                .all(|(d, &v)| d.fixed().is_none_or(|f| f == v));
        if !fits {
            return Err(SpecializeError::ValueType {
                input: decl.name.clone(),
                expected: (decl.dtype, decl.shape.clone()),
                got: (value.dtype, value.shape.clone()),
            });
        }
        if value.len() > MAX_VALUE_ELEMENTS {
            return Err(SpecializeError::ValueTooLarge {
                input: decl.name.clone(),
                elements: value.len(),
            });
        }
        decl.shape = value.shape.iter().map(|&d| Dim::Fixed(d)).collect();
        decl.data = Some(Storage::Inline(TensorData::from_bytes(value.bytes())));
    }
    Ok(g)
}

/// Moves a constant f32 `scales` operand of a Resize into its `scales` attribute, the form
/// the shape rule and the kernels read (the importer does this for constant scales; a
/// value input's become constant only at specialisation). Returns whether it did.
pub(crate) fn resize_scales_to_attr(g: &mut Graph, node: &mut baton_delegate_api::Node) -> bool {
    if node.op != OpKind::Resize || node.attrs.contains_key("scales") {
        return false;
    }
    let Some(&t) = node.inputs.get(2) else {
        return false;
    };
    let decl = &g.tensors[t];
    let (DType::F32, Some(Storage::Inline(d))) = (decl.dtype, &decl.data) else {
        return false;
    };
    let scales: Vec<f32> = bytemuck::pod_collect_to_vec(d.bytes());
    if scales.is_empty() {
        return false;
    }
    node.attrs
        .insert("scales".into(), baton_delegate_api::Attr::Floats(scales));
    g.tensors.push(baton_delegate_api::TensorDecl {
        name: format!("{}/scales_absent", node.name),
        dtype: DType::F32,
        shape: vec![Dim::Fixed(0)],
        quant: None,
        data: Some(Storage::Inline(TensorData::from_bytes(&[]))),
    });
    node.inputs[2] = g.tensors.len() - 1;
    true
}

/// The number of iterations of `node`, a Loop, when it is fixed before it runs: a constant
/// trip count, an initial condition absent or constant true, and a body whose condition
/// output is constant true or its condition input passed through (Identity). Its scan
/// outputs then stack exactly that many slices.
pub(crate) fn loop_trips(g: &Graph, node: &Node) -> Option<usize> {
    let bytes = |g: &Graph, t: TensorId| match (&g.tensors[t].data, g.tensors[t].dtype) {
        (Some(Storage::Inline(d)), dtype) => Some((dtype, d.bytes().to_vec())),
        _ => None,
    };
    let is_true =
        |g: &Graph, t: TensorId| matches!(bytes(g, t), Some((DType::Bool, b)) if b == [1]);
    let trips = match bytes(g, *node.inputs.first()?)? {
        (DType::I64, b) if b.len() == 8 => i64::from_le_bytes(b.try_into().ok()?),
        _ => return None,
    };
    if let Some(&c) = node.inputs.get(1) {
        let absent = matches!(bytes(g, c), Some((_, b)) if b.is_empty());
        if !absent && !is_true(g, c) {
            return None;
        }
    }
    let body = node.attr_graph("body")?;
    let mut t = *body.outputs.first()?;
    while body.inputs.get(1) != Some(&t) && !is_true(body, t) {
        let producer = body.nodes.iter().find(|n| n.outputs.contains(&t))?;
        if producer.op != OpKind::Identity {
            return None;
        }
        t = *producer.inputs.first()?;
    }
    usize::try_from(trips).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use baton_delegate_api::{Attr, DType, Dim, Graph, GraphBuilder, OpKind, Tensor};

    use super::{bind_values, value_input_names};
    use crate::{specialize, SpecializeError};

    /// A Loop of trip count `m` and initial condition `c` (both inputs) whose body passes
    /// its condition through and stacks `v` [4] as a scan output.
    fn loop_graph() -> baton_delegate_api::Graph {
        let mut body = GraphBuilder::new("body");
        body.input_fixed("i", DType::I64, &[]);
        let cond = body.input_fixed("cond", DType::Bool, &[]);
        let v = body.input_fixed("v", DType::F32, &[4]);
        let same = body.node(OpKind::Identity, &[cond], &[]).unwrap();
        body.output(same);
        body.output(v);
        body.output(v);
        let body = body.finish().unwrap();
        let mut b = GraphBuilder::new("g");
        let m = b.input_fixed("m", DType::I64, &[]);
        let c = b.input_fixed("c", DType::Bool, &[]);
        let v0 = b.input_fixed("v0", DType::F32, &[4]);
        let attrs = [("body", Attr::Graph(Box::new(body)))];
        let outs = b
            .named_node_outputs("lp", OpKind::Loop, &[m, c, v0], &attrs, 2)
            .unwrap();
        b.output(outs[1]);
        b.finish().unwrap()
    }

    #[test]
    fn a_loop_of_a_constant_trip_count_stacks_that_many() {
        let g = loop_graph();
        assert_eq!(value_input_names(&g), ["m", "c"]);
        let values = |m: i64, c: bool| {
            BTreeMap::from([
                ("m".to_string(), Tensor::from_i64(&[], &[m])),
                (
                    "c".to_string(),
                    Tensor::from_bytes(DType::Bool, &[], &[c as u8]),
                ),
            ])
        };
        let s = specialize(
            &bind_values(&g, &values(3, true)).unwrap(),
            &BTreeMap::new(),
        )
        .unwrap();
        let out = &s.tensors[s.outputs[0]];
        assert_eq!(out.shape, [Dim::Fixed(3), Dim::Fixed(4)]);
        // A loop that may not start runs a number of times known only when it runs.
        let stopped = specialize(
            &bind_values(&g, &values(3, false)).unwrap(),
            &BTreeMap::new(),
        );
        assert!(matches!(
            stopped,
            Err(SpecializeError::SymbolicShape { .. })
        ));
        // Without the values, the error names the first value input.
        match specialize(&g, &BTreeMap::new()) {
            Err(SpecializeError::MissingValue { input, .. }) => assert_eq!(input, "m"),
            other => panic!("expected MissingValue, got {other:?}"),
        }
    }

    /// Appends `op(inputs)` to `g` without inferring its shape (the builder would, and
    /// the shape may need values); returns its output.
    fn push(g: &mut Graph, op: OpKind, inputs: &[usize]) -> usize {
        let out = g.tensors.len();
        g.tensors.push(baton_delegate_api::TensorDecl {
            name: format!("{op}_out"),
            dtype: DType::F32,
            shape: vec![Dim::Sym(format!("{op}_out?"))],
            quant: None,
            data: None,
        });
        g.nodes.push(baton_delegate_api::Node {
            name: format!("{op}_node"),
            op,
            inputs: inputs.to_vec(),
            outputs: vec![out],
            attrs: BTreeMap::new(),
        });
        out
    }

    #[test]
    fn an_input_whose_shape_only_is_read_is_no_value_input() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 3]);
        let y = b.input_fixed("y", DType::F32, &[6]);
        let shape = b.node(OpKind::Shape, &[y], &[]).unwrap();
        let mut g = b.finish().unwrap();
        let r = push(&mut g, OpKind::Reshape, &[x, shape]);
        g.outputs.push(r);
        // The Reshape's shape is computed from `y`'s shape, not its values.
        assert!(value_input_names(&g).is_empty());
        let s = specialize(&g, &BTreeMap::new()).unwrap();
        assert_eq!(s.tensors[s.outputs[0]].shape, [Dim::Fixed(6)]);
    }

    #[test]
    fn a_value_of_another_type_or_too_many_elements_is_refused() {
        let g = loop_graph();
        let wrong = BTreeMap::from([("m".to_string(), Tensor::from_i64(&[1], &[3]))]);
        assert!(matches!(
            bind_values(&g, &wrong),
            Err(SpecializeError::ValueType { input, .. }) if input == "m"
        ));
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[2, 3]);
        let s = b.input("s", DType::I64, &[Dim::Sym("k".into())]);
        let mut g = b.finish().unwrap();
        let out = push(&mut g, OpKind::Reshape, &[x, s]);
        g.outputs.push(out);
        let big = BTreeMap::from([("s".to_string(), Tensor::from_i64(&[65], &[1; 65]))]);
        assert!(matches!(
            bind_values(&g, &big),
            Err(SpecializeError::ValueTooLarge { input, elements: 65 }) if input == "s"
        ));
        let ok = BTreeMap::from([("s".to_string(), Tensor::from_i64(&[2], &[3, 2]))]);
        let s = specialize(&bind_values(&g, &ok).unwrap(), &BTreeMap::new()).unwrap();
        assert_eq!(
            s.tensors[s.outputs[0]].shape,
            [Dim::Fixed(3), Dim::Fixed(2)]
        );
    }
}
