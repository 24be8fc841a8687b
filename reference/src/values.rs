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
