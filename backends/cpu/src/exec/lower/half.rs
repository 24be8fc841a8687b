//! f16 compute: a node of f16 tensors that an f32 kernel computes (element-wise math,
//! comparisons, reductions, normalizations) runs as three kinds of steps: each f16 input
//! widened to f32 (exactly), the f32 kernel, and its f32 result rounded once to f16.
//!
//! f16 data is held as its stored bytes (see `crate::ops::int`), so the f32 kernels
//! cannot read it in place; the conversions cost two passes over the data, which for the
//! element-wise ops is about what the kernel itself costs. The reference computes in f64
//! and rounds once to f16; rounding the f32 result instead differs from it by at most an
//! f16 ulp where the f32 kernel is correctly rounded (Add, Sub, Mul, Div, Sqrt: f32 has
//! more than twice f16's precision, so the double rounding is innocuous), which the kit's
//! f16 tolerances allow for ("a plugin may compute in f32 and round once").

use super::index::output_parts;
use super::*;
use crate::ops::int::{CastOp, Held};
use crate::support::{half_computed_node, half_multi_output, read_at_init};

impl Builder<'_> {
    /// Lowers `node` into `steps` as described above when it is an f16 node of an op
    /// [`half_computed_node`] names (one output, or the outputs of a multi-output op);
    /// `false` (nothing done) otherwise.
    pub(super) fn half_node(
        &mut self,
        node: &Node,
        steps: &mut Vec<Step>,
    ) -> Result<bool, DelegateError> {
        let half = |t: &TensorId| self.graph.tensors[*t].dtype == DType::F16;
        let wanted = half_computed_node(node)
            && (node.outputs.len() == 1 || half_multi_output(node.op))
            && (node.inputs.iter().any(half) || node.outputs.iter().any(half));
        if !wanted {
            return Ok(false);
        }
        let err = |e: String| DelegateError::invalid(format!("node {}: {e}", node.label()));
        let mut saved: Vec<(TensorId, Option<Src>)> = Vec::new();
        for (i, &t) in node.inputs.iter().enumerate() {
            let at_init = read_at_init(node.op, i) && self.graph.tensors[t].is_const();
            if !half(&t) || at_init || saved.iter().any(|&(s, _)| s == t) {
                continue;
            }
            self.step = steps.len();
            let x = self.src(t).map_err(err)?;
            let len = self.shape(t).iter().product();
            let slot = self.intermediate(len);
            steps.push(Step {
                op: Op::Cast(CastOp {
                    x,
                    from: Held::F16,
                    to: Held::F32,
                    len,
                }),
                out: slot,
                node: node.label(),
                direct: None,
            });
            saved.push((t, Some(x)));
            self.srcs[t] = Some(Src::Slot(slot));
        }
        self.step = steps.len();
        let op = self.lower(node, Vec::new(), node.outputs[0]);
        // The f16 tensors are f16 again for the other nodes that read them.
        for &(t, src) in &saved {
            self.srcs[t] = src;
        }
        let op = op.map_err(err)?;
        if let Some(parts) = output_parts(&op) {
            // One f32 buffer of every output, then each f16 one rounded from its part
            // (the others, f32 statistics or i64 positions, are read in place).
            let wide = self.multi_output(&node.outputs, &parts)?;
            steps.push(Step {
                op,
                out: wide,
                node: node.label(),
                direct: None,
            });
            for &t in &node.outputs {
                let Some(part) = self.srcs[t].filter(|_| half(&t)) else {
                    continue;
                };
                self.step = steps.len();
                self.read(part);
                let len = self.shape(t).iter().product();
                let out = self.output(t)?;
                steps.push(Step {
                    op: Op::Cast(CastOp {
                        x: part,
                        from: Held::F32,
                        to: Held::F16,
                        len,
                    }),
                    out,
                    node: node.label(),
                    direct: None,
                });
            }
            return Ok(true);
        }
        let t = node.outputs[0];
        if !half(&t) {
            // A bool or i64 result (comparisons, ArgMax) is written as it is held.
            let out = self.output(t)?;
            steps.push(Step {
                op,
                out,
                node: node.label(),
                direct: None,
            });
            return Ok(true);
        }
        let len: usize = self.shape(t).iter().product();
        let wide = self.intermediate(len);
        steps.push(Step {
            op,
            out: wide,
            node: node.label(),
            direct: None,
        });
        self.step = steps.len();
        self.read(Src::Slot(wide));
        let out = self.output(t)?;
        steps.push(Step {
            op: Op::Cast(CastOp {
                x: Src::Slot(wide),
                from: Held::F32,
                to: Held::F16,
                len,
            }),
            out,
            node: node.label(),
            direct: None,
        });
        Ok(true)
    }
}
