//! The graph a plugin is asked about, and the answers the host gives for it without asking.
//!
//! Two kinds of node never reach a plugin's `supports`:
//!
//! - **control flow** (`If`, `Loop`): it always runs on the host;
//! - **nodes the plugin cannot read**: an op code, or an operand dtype, that a later BTIR
//!   minor than the plugin reads added (`btir_minor` of its descriptor, ABI 1.2; a plugin
//!   built against 1.0 or 1.1 reads `abi::BTIR_MINOR_BEFORE_1_2`). A reader refuses a whole graph for one
//!   unknown code, so sending it would cost the plugin every node; instead the host
//!   declines such a node for it, per node, with the reason, and the graph the plugin
//!   gets holds only codes it knows.
//!
//! The nodes cut out are replaced by their outputs becoming inputs of the view: to the
//! plugin they are values arriving from elsewhere, which they are.

use std::borrow::Cow;

use baton_delegate_api::wire::{dtype_minor, op_minor, WIRE_MAJOR};
use baton_delegate_api::{Decline, DeclineReason, Graph, Node};

/// Why the host answers for `node` itself when the plugin reads BTIR 1.`minor`, if it does.
fn host_answer(graph: &Graph, node: &Node, minor: u32) -> Option<Decline> {
    if node.op.is_control_flow() {
        return Some(Decline::new(
            DeclineReason::Op,
            "control flow runs on the host; plugins are not asked",
        ));
    }
    let needs = |what: String, since: u16| {
        Decline::new(
            DeclineReason::Op,
            format!(
                "{what} needs BTIR {WIRE_MAJOR}.{since}; the plugin reads BTIR {WIRE_MAJOR}.{minor}"
            ),
        )
    };
    if u32::from(op_minor(node.op)) > minor {
        return Some(needs(format!("op {}", node.op), op_minor(node.op)));
    }
    node.inputs
        .iter()
        .chain(&node.outputs)
        .map(|&t| &graph.tensors[t])
        .find(|t| u32::from(dtype_minor(t.dtype)) > minor)
        .map(|t| {
            needs(
                format!("{} of dtype {}", t.name, t.dtype),
                dtype_minor(t.dtype),
            )
        })
}

/// The graph a plugin reading BTIR 1.`minor` is asked about, and for each node of `graph`
/// either its position in that graph or the host's answer for it. (Public so that the
/// conformance kit asks a plugin exactly what a host would.)
pub fn plugin_view(graph: &Graph, minor: u32) -> (Cow<'_, Graph>, Vec<Result<usize, Decline>>) {
    let answers: Vec<Option<Decline>> = graph
        .nodes
        .iter()
        .map(|n| host_answer(graph, n, minor))
        .collect();
    let unreadable_tensor = graph
        .tensors
        .iter()
        .any(|t| u32::from(dtype_minor(t.dtype)) > minor);
    if answers.iter().all(Option::is_none) && !unreadable_tensor {
        let positions = (0..graph.nodes.len()).map(Ok).collect();
        return (Cow::Borrowed(graph), positions);
    }
    // Only the kept nodes and the tensors they touch: a tensor of a dtype the plugin cannot
    // read must not be in the table either.
    let kept: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| answers[i].is_none())
        .collect();
    let (view, _) = graph.extract(&kept);
    let mut next = 0;
    let positions = answers
        .into_iter()
        .map(|a| match a {
            Some(decline) => Err(decline),
            None => {
                next += 1;
                Ok(next - 1)
            }
        })
        .collect();
    (Cow::Owned(view), positions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::wire::{self, ConstMode};
    use baton_delegate_api::{Attr, DType, GraphBuilder, OpKind};

    /// x -> Relu -> Sqrt (1.1) -> Cast to f64 (a 1.2 dtype) -> Cast to f32 -> Relu.
    fn graph() -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[4]);
        let r = b.named_node("relu", OpKind::Relu, &[x], &[]).unwrap();
        let s = b.named_node("sqrt", OpKind::Sqrt, &[r], &[]).unwrap();
        // `to` takes ONNX data type codes: 11 is double, 1 float.
        let to = |onnx: i64| [("to", Attr::Int(onnx))];
        let d = b.named_node("wide", OpKind::Cast, &[s], &to(11)).unwrap();
        let f = b.named_node("narrow", OpKind::Cast, &[d], &to(1)).unwrap();
        let y = b.named_node("relu2", OpKind::Relu, &[f], &[]).unwrap();
        b.output(y);
        b.finish().unwrap()
    }

    #[test]
    fn a_plugin_of_the_current_minor_sees_the_graph_unchanged() {
        let g = graph();
        let (view, positions) = plugin_view(&g, u32::from(wire::WIRE_MINOR));
        assert!(matches!(view, Cow::Borrowed(_)));
        assert!(positions.iter().enumerate().all(|(i, p)| p == &Ok(i)));
    }

    #[test]
    fn nodes_an_older_reader_cannot_read_are_declined_and_cut_out() {
        let g = graph();
        let (view, positions) = plugin_view(&g, 0);
        // Relu and the final Relu are kept; Sqrt (1.1) and both Casts (an f64 operand, 1.2)
        // are answered by the host.
        assert_eq!(view.nodes.len(), 2);
        assert_eq!(positions[0], Ok(0));
        assert_eq!(positions[4], Ok(1));
        let sqrt = positions[1].clone().unwrap_err();
        assert!(sqrt.message.contains("BTIR 1.1"), "{sqrt}");
        assert!(sqrt.message.contains("reads BTIR 1.0"), "{sqrt}");
        assert!(positions[2].is_err() && positions[3].is_err());
        // The view holds no code of a later minor, tensors included, and is valid.
        assert!(view.tensors.iter().all(|t| dtype_minor(t.dtype) == 0));
        assert!(view.nodes.iter().all(|n| op_minor(n.op) == 0));
        let (bytes, _) = wire::encode(&view, ConstMode::External);
        wire::decode(&bytes).expect("the view is a valid graph");
        // A 1.1 reader gets Sqrt but not the casts.
        let (view, positions) = plugin_view(&g, 1);
        assert_eq!(view.nodes.len(), 3);
        assert!(positions[1].is_ok() && positions[2].is_err() && positions[3].is_err());
        let wide = positions[2].clone().unwrap_err();
        assert!(
            wide.message.contains("of dtype f64 needs BTIR 1.2"),
            "{wide}"
        );
    }
}
