//! Opsets before 7 (and the attribute forms some ops kept until opset 10): rewritten into
//! the IR's form, following the operator changelog.
//!
//! What changed, and what the rewrite does:
//! - `consumed_inputs` (opsets 1-5, an in-place hint) carries no meaning and is dropped;
//! - binary ops before opset 7 broadcast only with `broadcast=1`, aligning `B` with `A`
//!   from `axis` on: `B` gets trailing 1-extents so that numpy broadcasting lines it up
//!   the same way (without `broadcast` both shapes are equal, where numpy agrees);
//! - Gemm's `broadcast` (before 7) only allowed what numpy broadcasting of `C` allows;
//! - BatchNormalization's `is_test` and `spatial` (before 7; `spatial` until 9) and
//!   `momentum`: inference with per-channel statistics is the only form taken;
//! - Pad's `paddings` (opset 1) is `pads` (its `pads`, `mode` and `value` attributes,
//!   used until opset 11, are the IR's own);
//! - Concat's `axis` defaulted to 1 before opset 4; Cast's `to` was a type name before 6;
//! - Reshape's `shape`, Slice's `starts`/`ends`/`axes`, Split's `split` and the axes of
//!   Squeeze/Unsqueeze/Reduce* are attributes the IR takes as they are.
//!
//! A form the IR cannot express (training-mode BatchNormalization, Tile before opset 6)
//! is an error naming the node, op, opset and attribute.

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, OpKind};

use super::super::proto::NodeProto;
use super::super::OnnxError;
use super::Importer;

impl Importer<'_> {
    /// Rewrites a node of opset 10 or older into the form of later opsets. `inputs` and
    /// `attrs` are the node's, edited in place; helper nodes and constants are added to
    /// the graph under names starting with `name`.
    pub(super) fn adapt_legacy(
        &mut self,
        name: &str,
        op: OpKind,
        inputs: &mut [String],
        attrs: &mut BTreeMap<String, Attr>,
        n: &NodeProto,
    ) -> Result<(), OnnxError> {
        let opset = self.opset;
        let at = |message: String| self.node_error(name, n, message);
        attrs.remove("consumed_inputs");
        match op {
            OpKind::Add
            | OpKind::Sub
            | OpKind::Mul
            | OpKind::Div
            | OpKind::Pow
            | OpKind::Equal
            | OpKind::Greater
            | OpKind::Less
            | OpKind::And
                if opset < 7 =>
            {
                let broadcast = attrs.remove("broadcast");
                let axis = attrs.remove("axis");
                if let (Some(Attr::Int(1)), Some(Attr::Int(axis))) = (broadcast, axis) {
                    let b = self.align_operand(name, inputs, axis, n)?;
                    inputs[1] = b;
                }
            }
            OpKind::Gemm if opset < 7 => {
                attrs.remove("broadcast");
            }
            OpKind::BatchNormalization if opset < 9 => {
                attrs.remove("momentum");
                let is_test = match attrs.remove("is_test") {
                    Some(Attr::Int(v)) => v,
                    _ if opset < 7 => 0,
                    _ => 1,
                };
                if is_test == 0 {
                    return Err(at(
                        "attribute 'is_test' is 0 (training mode); only inference (is_test=1) is supported".into(),
                    ));
                }
                if let Some(Attr::Int(spatial)) = attrs.remove("spatial") {
                    if spatial != 1 {
                        return Err(at(format!(
                            "attribute 'spatial' is {spatial}; only per-channel statistics (spatial=1) are supported"
                        )));
                    }
                }
            }
            // Opset 1 named `pads` `paddings`; `mode` and `value` stay attributes, which
            // the IR's Pad reads.
            OpKind::Pad => {
                if let Some(p) = attrs.remove("paddings") {
                    attrs.insert("pads".into(), p);
                }
            }
            OpKind::Concat if opset < 4 && !attrs.contains_key("axis") => {
                attrs.insert("axis".into(), Attr::Int(1));
            }
            OpKind::Cast if opset < 6 => {
                let code = match attrs.get("to") {
                    Some(Attr::Str(s)) => type_code(s)
                        .ok_or_else(|| at(format!("attribute 'to' names an unknown type '{s}'")))?,
                    _ => {
                        return Err(at(
                            "attribute 'to' must be a type name before opset 6".into()
                        ))
                    }
                };
                attrs.insert("to".into(), Attr::Int(code));
            }
            OpKind::Tile if opset < 6 => {
                return Err(at(
                    "Tile before opset 6 (inputs 'tiles' and 'axis') is not supported".into(),
                ))
            }
            _ => {}
        }
        Ok(())
    }

    /// Before opset 7, `B` lines up with `A` from dimension `axis` on; returns the name
    /// of `B` with trailing 1-extents added so that numpy broadcasting aligns it the same.
    fn align_operand(
        &mut self,
        name: &str,
        inputs: &[String],
        axis: i64,
        n: &NodeProto,
    ) -> Result<String, OnnxError> {
        let ranks = (self.rank_of(&inputs[0]), self.rank_of(&inputs[1]));
        let (Some(ra), Some(rb)) = ranks else {
            return Err(self.node_error(
                name,
                n,
                "attribute 'axis' with broadcast=1 needs operands of known rank".into(),
            ));
        };
        let axis = if axis < 0 { axis + ra as i64 } else { axis };
        let trailing = ra as i64 - axis - rb as i64;
        if axis < 0 || trailing < 0 {
            return Err(self.node_error(
                name,
                n,
                format!("attribute 'axis' {axis} does not fit a rank-{rb} B into a rank-{ra} A"),
            ));
        }
        if trailing == 0 {
            return Ok(inputs[1].clone());
        }
        let axes = (rb as i64..rb as i64 + trailing).collect();
        self.emit(
            name,
            "aligned_b",
            OpKind::Unsqueeze,
            &[inputs[1].clone()],
            &[("axes", Attr::Ints(axes))],
            n,
        )
    }
}

/// The ONNX type code of a type name as Cast before opset 6 wrote it (`"FLOAT"`).
fn type_code(name: &str) -> Option<i64> {
    (1..=16).find(|&code| super::super::onnx_type_name(code as i32) == name.to_uppercase())
}
