//! If and Loop: their subgraphs are imported by child importers and closed over.
//!
//! ONNX subgraphs read values of the enclosing graphs by name. The IR's subgraphs are
//! closed instead (see [`OpKind::is_control_flow`]): before a subgraph is imported, its
//! free names (read inside, at any depth, but defined outside) are resolved here; outer
//! constants are copied into it, and every other outer value becomes an input of the
//! subgraph and an extra input of the node, so the node carries its real dependencies.
//! A nested subgraph's free names are free names of its parent too, so each level only
//! ever looks one level up.

use std::collections::{BTreeMap, HashMap, HashSet};

use baton_delegate_api::{Attr, DType, Dim, Graph, OpKind, TensorDecl};

use super::super::proto::{GraphProto, NodeProto};
use super::{unsupported, Importer, OnnxError};

impl Importer<'_> {
    /// Imports an If or Loop node.
    pub(super) fn control_node(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let opset = self.opset;
        let at = |message: String| {
            unsupported(format!(
                "node '{name}' ({}, opset {opset}): {message}",
                n.op_type
            ))
        };
        let graph_attr = |key: &str| {
            n.attribute
                .iter()
                .find(|a| a.name == key)
                .and_then(|a| a.g.as_ref())
                .ok_or_else(|| at(format!("attribute '{key}' (a graph) is missing")))
        };
        if let Some(a) = n
            .attribute
            .iter()
            .find(|a| !matches!(a.name.as_str(), "then_branch" | "else_branch" | "body"))
        {
            return Err(at(format!("unexpected attribute '{}'", a.name)));
        }
        let mut attrs = BTreeMap::new();
        let mut inputs: Vec<String>;
        let op = if n.op_type == "If" {
            let cond = n
                .input
                .first()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| at("the condition input is missing".into()))?;
            let (mut then, then_caps) =
                self.subgraph(graph_attr("then_branch")?, 0, HashMap::new())?;
            let (mut other, other_caps) =
                self.subgraph(graph_attr("else_branch")?, 0, HashMap::new())?;
            let mut all = then_caps.clone();
            all.extend(
                other_caps
                    .iter()
                    .filter(|c| !then_caps.contains(c))
                    .cloned(),
            );
            self.take_all(&mut then, &then_caps, &all);
            self.take_all(&mut other, &other_caps, &all);
            attrs.insert("then_branch".into(), Attr::Graph(Box::new(then)));
            attrs.insert("else_branch".into(), Attr::Graph(Box::new(other)));
            inputs = vec![cond.clone()];
            inputs.extend(all);
            OpKind::If
        } else {
            let body = graph_attr("body")?;
            if n.input.len() < 2 || body.input.len() != n.input.len() {
                return Err(at(format!(
                    "the body takes {} inputs; the node passes {} (M, cond and the carried values)",
                    body.input.len(),
                    n.input.len()
                )));
            }
            // What a body that leaves its inputs untyped takes: the iteration number, the
            // condition, and each carried value with its initial value's dtype.
            let mut types = vec![(DType::I64, vec![]), (DType::Bool, vec![])];
            for (k, name) in n.input.iter().enumerate().skip(2) {
                let &id = self
                    .names
                    .get(name)
                    .ok_or_else(|| at(format!("input '{name}' is not defined before use")))?;
                let formal = &body.input[k].name;
                types.push((
                    self.g.tensors[id].dtype,
                    vec![Dim::Sym(format!("{formal}?"))],
                ));
            }
            let hints = body
                .input
                .iter()
                .map(|v| v.name.clone())
                .zip(types)
                .collect();
            let (body, caps) = self.subgraph(body, n.input.len(), hints)?;
            attrs.insert("body".into(), Attr::Graph(Box::new(body)));
            attrs.insert("captures".into(), Attr::Int(caps.len() as i64));
            inputs = n.input.clone();
            inputs.extend(caps);
            OpKind::Loop
        };
        self.add(name, op, &inputs, &n.output, attrs, n)
    }

    /// Imports subgraph `g`, whose first `formal` inputs are its own (a Loop body's, typed
    /// by `input_types` where it leaves them untyped); returns it and the outer names it
    /// captured, in the order of its extra inputs.
    fn subgraph(
        &self,
        g: &GraphProto,
        formal: usize,
        input_types: HashMap<String, (DType, Vec<Dim>)>,
    ) -> Result<(Graph, Vec<String>), OnnxError> {
        if g.input.len() != formal {
            return Err(unsupported(format!(
                "subgraph '{}' declares {} inputs, expected {formal}",
                g.name,
                g.input.len()
            )));
        }
        let outer = free_names(g)
            .into_iter()
            .map(|name| match self.names.get(&name) {
                Some(&id) => Ok((name, self.g.tensors[id].clone())),
                None => Err(unsupported(format!(
                    "subgraph '{}' reads '{name}', which no enclosing graph defines before it",
                    g.name
                ))),
            })
            .collect::<Result<Vec<(String, TensorDecl)>, _>>()?;
        let mut child = Importer::new(g, self.opset, self.base_dir);
        child.subgraph = true;
        child.input_types = input_types;
        let captured = child.graph(g, &outer)?;
        Ok((child.g, captured))
    }

    /// Makes a branch that captured `own` take `all` (both branches of an If take the same
    /// inputs): inputs it does not read are added, unused.
    fn take_all(&self, branch: &mut Graph, own: &[String], all: &[String]) {
        let mut inputs = Vec::with_capacity(all.len());
        for name in all {
            match own.iter().position(|c| c == name) {
                Some(k) => inputs.push(branch.inputs[k]),
                None => {
                    let outer = &self.g.tensors[self.names[name]];
                    branch.tensors.push(TensorDecl {
                        data: None,
                        ..outer.clone()
                    });
                    inputs.push(branch.tensors.len() - 1);
                }
            }
        }
        branch.inputs = inputs;
    }
}

/// The names `g` reads (in its nodes, its nested subgraphs and its outputs) without
/// defining them, in first-use order.
fn free_names(g: &GraphProto) -> Vec<String> {
    let mut defined: HashSet<&str> = g
        .input
        .iter()
        .map(|v| v.name.as_str())
        .chain(g.initializer.iter().map(|t| t.name.as_str()))
        .collect();
    let mut free: Vec<String> = Vec::new();
    let note = |name: &str, defined: &HashSet<&str>, free: &mut Vec<String>| {
        if !name.is_empty() && !defined.contains(name) && !free.iter().any(|f| f == name) {
            free.push(name.to_string());
        }
    };
    for node in &g.node {
        for i in &node.input {
            note(i, &defined, &mut free);
        }
        for a in &node.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                for name in free_names(sub) {
                    note(&name, &defined, &mut free);
                }
            }
        }
        defined.extend(node.output.iter().map(String::as_str));
    }
    for o in &g.output {
        note(&o.name, &defined, &mut free);
    }
    free
}
