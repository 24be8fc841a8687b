//! Building graphs in Rust (tests, examples, the host's probes), with each node's output
//! shapes inferred as it is added.
//!
//! It lives apart from [`crate::ir`] because it is the one part of the IR that needs shape
//! inference: keeping it here leaves `ir` free of any dependency on `shape`, which itself
//! depends on `ir`.

use crate::error::IrError;
use crate::ir::{
    Attr, DType, Dim, Graph, Node, OpKind, Quant, Storage, TensorData, TensorDecl, TensorId,
};

/// Builds graphs in Rust for tests, examples and probes. Shapes of node outputs are
/// inferred as nodes are added (see [`crate::shape::infer_node`]).
#[derive(Default)]
pub struct GraphBuilder {
    graph: Graph,
}

impl GraphBuilder {
    /// A builder for a graph called `name`.
    pub fn new(name: &str) -> GraphBuilder {
        GraphBuilder {
            graph: Graph {
                name: name.to_string(),
                ..Graph::default()
            },
        }
    }

    /// Declares a graph input.
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[Dim]) -> TensorId {
        let id = self.push(name, dtype, shape.to_vec(), None);
        self.graph.inputs.push(id);
        id
    }

    /// Declares a graph input of fixed shape.
    pub fn input_fixed(&mut self, name: &str, dtype: DType, shape: &[usize]) -> TensorId {
        let dims: Vec<Dim> = shape.iter().map(|&d| Dim::Fixed(d)).collect();
        self.input(name, dtype, &dims)
    }

    /// Declares an f32 constant.
    pub fn constant_f32(&mut self, name: &str, shape: &[usize], values: &[f32]) -> TensorId {
        assert_eq!(
            shape.iter().product::<usize>(),
            values.len(),
            "constant {name}: shape and value count disagree"
        );
        self.constant(name, DType::F32, shape, TensorData::from_slice(values))
    }

    /// Declares an i64 constant.
    pub fn constant_i64(&mut self, name: &str, shape: &[usize], values: &[i64]) -> TensorId {
        self.constant(name, DType::I64, shape, TensorData::from_slice(values))
    }

    /// Declares a constant of any dtype from raw little-endian bytes.
    pub fn constant(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: TensorData,
    ) -> TensorId {
        let dims = shape.iter().map(|&d| Dim::Fixed(d)).collect();
        self.push(name, dtype, dims, Some(Storage::Inline(data)))
    }

    /// Sets the quantization parameters of a tensor.
    pub fn set_quant(&mut self, t: TensorId, quant: Quant) {
        self.graph.tensors[t].quant = Some(quant);
    }

    /// Adds a node with one output; returns the output tensor.
    pub fn node(
        &mut self,
        op: OpKind,
        inputs: &[TensorId],
        attrs: &[(&str, Attr)],
    ) -> Result<TensorId, IrError> {
        let name = format!("{}_{}", op.name().to_lowercase(), self.graph.nodes.len());
        self.named_node(&name, op, inputs, attrs)
    }

    /// Adds a named node with one output; returns the output tensor.
    pub fn named_node(
        &mut self,
        name: &str,
        op: OpKind,
        inputs: &[TensorId],
        attrs: &[(&str, Attr)],
    ) -> Result<TensorId, IrError> {
        Ok(self.named_node_outputs(name, op, inputs, attrs, 1)?[0])
    }

    /// Adds a named node using the first `outputs` of the outputs its op can produce
    /// (Split, LSTM...); returns them. Output tensors are named `{name}_out{i}`, the first
    /// `{name}_out`.
    pub fn named_node_outputs(
        &mut self,
        name: &str,
        op: OpKind,
        inputs: &[TensorId],
        attrs: &[(&str, Attr)],
        outputs: usize,
    ) -> Result<Vec<TensorId>, IrError> {
        let mut node = Node {
            name: name.to_string(),
            op,
            inputs: inputs.to_vec(),
            outputs: Vec::new(),
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        };
        let inferred = crate::shape::infer_node(&self.graph, &node)?;
        if outputs == 0 || outputs > inferred.len() {
            return Err(IrError::Shape {
                node: node.label(),
                message: format!("{outputs} outputs asked, the op has {}", inferred.len()),
            });
        }
        for (i, (dtype, shape)) in inferred.into_iter().take(outputs).enumerate() {
            let tname = if i == 0 {
                format!("{name}_out")
            } else {
                format!("{name}_out{i}")
            };
            node.outputs.push(self.push(&tname, dtype, shape, None));
        }
        let outs = node.outputs.clone();
        self.graph.nodes.push(node);
        Ok(outs)
    }

    /// Marks a tensor as a graph output.
    pub fn output(&mut self, t: TensorId) {
        self.graph.outputs.push(t);
    }

    /// Renames a tensor (useful for outputs).
    pub fn rename(&mut self, t: TensorId, name: &str) {
        self.graph.tensors[t].name = name.to_string();
    }

    /// Finishes and validates the graph.
    pub fn finish(self) -> Result<Graph, IrError> {
        self.graph.validate()?;
        Ok(self.graph)
    }

    fn push(
        &mut self,
        name: &str,
        dtype: DType,
        shape: Vec<Dim>,
        data: Option<Storage>,
    ) -> TensorId {
        self.graph.tensors.push(TensorDecl {
            name: name.to_string(),
            dtype,
            shape,
            quant: None,
            data,
        });
        self.graph.tensors.len() - 1
    }
}
