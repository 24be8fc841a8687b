//! Lowering of Einsum (`crate::ops::einsum`).

use baton_delegate_api::shape::einsum;

use super::*;
use crate::ops::einsum::EinsumOp;

impl Builder<'_> {
    pub(super) fn einsum(&mut self, node: &Node, shapes: &[Vec<usize>]) -> Result<Op, String> {
        let e = einsum::parse(node.attr_str("equation", ""), shapes)?;
        let srcs = node
            .inputs
            .iter()
            .map(|&t| self.src(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Op::Einsum(EinsumOp::new(
            &srcs, &e.inputs, shapes, &e.output, &e.extents,
        )?))
    }
}
