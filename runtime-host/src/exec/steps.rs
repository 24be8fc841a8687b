//! Running the steps of a loaded session: delegated partitions through their prepared
//! views (with the fallback to the portable kernels), host nodes on the reference kernels,
//! control flow, and the timed walk behind `--profile` and `--trace`.

use std::collections::HashMap;
use std::time::Instant;

use baton_delegate_api::abi;
use baton_delegate_api::ir::AlignedBytes;
use baton_delegate_api::{DType, NodeId, OpKind, Tensor, TensorId, TensorMut, TensorRef};
use baton_reference as reference;

use super::{byte_len, const_bytes, ExecStep, Session, Slot};
use crate::config::OnExecuteError;
use crate::error::{HostError, NodeProblem, Result, TensorType};
use crate::trace::StepTiming;

impl<'e> Session<'e> {
    /// Runs every step, recording when each started and how long it took.
    pub(super) fn run_steps_timed(&mut self, buf: &mut AlignedBytes) -> Result<()> {
        self.timeline.clear();
        let t0 = Instant::now();
        for i in 0..self.steps.len() {
            let start = t0.elapsed();
            let fallbacks = self.fallbacks;
            self.run_step(i, buf)?;
            let dur = t0.elapsed() - start;
            let mut children = Vec::new();
            let (name, kind, target, events) = match &self.steps[i] {
                ExecStep::Host(n) => {
                    let node = &self.graph.nodes[*n];
                    (
                        node.label(),
                        node.op.name().to_string(),
                        "host".into(),
                        Vec::new(),
                    )
                }
                ExecStep::Control(k) => {
                    let c = &self.controls[*k];
                    if let Some((b, Ok(branch))) = c.taken.map(|b| (b, &c.branches[b])) {
                        let label = ["then_branch", "else_branch"][b];
                        for s in branch.timeline() {
                            let mut s = s.clone();
                            s.shift(start.as_nanos() as u64);
                            s.name = format!("{label}: {}", s.name);
                            children.push(s);
                        }
                    }
                    let node = &self.graph.nodes[c.node];
                    (
                        node.label(),
                        node.op.name().to_string(),
                        "host".into(),
                        Vec::new(),
                    )
                }
                ExecStep::Delegate(d) => {
                    let target = if self.fallbacks > fallbacks {
                        format!("host (fallback from {})", d.backend)
                    } else {
                        d.backend.clone()
                    };
                    let name = format!("partition {}", d.partition);
                    (name, "partition".into(), target, d.events.clone())
                }
            };
            self.timeline.push(StepTiming {
                name,
                kind,
                target,
                start_ns: start.as_nanos() as u64,
                dur_ns: dur.as_nanos() as u64,
                events,
                children,
            });
        }
        Ok(())
    }

    pub(super) fn run_step(&mut self, i: usize, buf: &mut AlignedBytes) -> Result<()> {
        match &mut self.steps[i] {
            ExecStep::Host(n) => {
                let n = *n;
                self.run_host_nodes(&[n], &mut HashMap::new(), buf)
            }
            ExecStep::Control(k) => {
                let k = *k;
                self.run_control(k, buf)
            }
            ExecStep::Delegate(d) => {
                for (s, e) in d.out_shapes.iter_mut().zip(&d.expected_out) {
                    *s = *e;
                }
                for (v, s) in d.out_views.iter_mut().zip(&mut d.out_shapes) {
                    v.shape = s.as_mut_ptr();
                }
                // SAFETY: the views point into the arena (tensors live across this step do not
                // overlap: see `memory::plan`) and into constants of `self.graph`, all alive.
                let result = unsafe { d.exec.execute_raw(&d.in_views, &mut d.out_views) }.and_then(|()| {
                    for (k, (v, e)) in d.out_views.iter().zip(&d.expected_out).enumerate() {
                        let rank = (v.rank as usize).min(abi::MAX_RANK);
                        let want = self.shapes[d.outputs[k]].len();
                        if rank != want || d.out_shapes[k][..rank] != e[..rank] {
                            return Err(HostError::PluginCall {
                                plugin: d.exec.library().label(),
                                call: "execute",
                                status: abi::STATUS_ERROR,
                                message: format!(
                                    "partition {}: output '{}' has shape {:?}, expected {:?}: result refused",
                                    d.partition,
                                    self.graph.tensors[d.outputs[k]].name,
                                    &d.out_shapes[k][..rank],
                                    &e[..want]
                                ),
                            });
                        }
                    }
                    Ok(())
                });
                d.events.clear();
                d.fell_back = false;
                if result.is_ok() && self.profiling {
                    d.events = d.exec.profile();
                }
                match result {
                    Ok(()) => Ok(()),
                    Err(e)
                        if self.engine.config.fallback.on_execute_error == OnExecuteError::Fail =>
                    {
                        Err(e)
                    }
                    Err(e) => {
                        // The portable kernels read the arena.
                        super::copy_lent(&d.in_views, &d.inputs, &self.slots, buf, true);
                        let nodes = d.nodes.clone();
                        let backend = d.backend.clone();
                        d.fell_back = true;
                        self.fallbacks += 1;
                        if self.fallbacks <= 3 {
                            eprintln!("baton: {backend} failed, running its partition on the portable kernels: {e}");
                        }
                        self.run_host_nodes(&nodes, &mut HashMap::new(), buf)?;
                        // The portable kernels wrote the arena; outputs lent for the run
                        // get their bytes from there.
                        if let ExecStep::Delegate(d) = &self.steps[i] {
                            super::copy_lent(&d.out_views, &d.outputs, &self.slots, buf, false);
                        }
                        Ok(())
                    }
                }
            }
        }
    }

    /// Runs `nodes` on the reference kernels; tensors without an arena slot (a failed
    /// partition's internals) live in `locals`.
    pub(super) fn run_host_nodes(
        &mut self,
        nodes: &[NodeId],
        locals: &mut HashMap<TensorId, Tensor>,
        buf: &mut AlignedBytes,
    ) -> Result<()> {
        for &n in nodes {
            let node = &self.graph.nodes[n];
            // Outputs without an arena slot (a failed partition's internals) are owned here.
            let mut local_outs: Vec<Tensor> = node
                .outputs
                .iter()
                .filter(|&&o| self.slots[o] == Slot::Internal)
                .map(|&o| Tensor::zeros(self.graph.tensors[o].dtype, &self.shapes[o]))
                .collect();
            let base = buf.as_mut_slice().as_mut_ptr();
            let inputs: Vec<TensorRef<'_>> = node
                .inputs
                .iter()
                .map(|&t| {
                    let decl = &self.graph.tensors[t];
                    let data: &[u8] = match self.slots[t] {
                        Slot::Arena(off) => {
                            let len = byte_len(decl.dtype, &self.shapes[t]);
                            // SAFETY: in bounds (planned); no output of this node overlaps it.
                            unsafe { std::slice::from_raw_parts(base.add(off), len) }
                        }
                        Slot::Const => const_bytes(&self.graph, t),
                        Slot::Internal => locals.get(&t).map_or(&[][..], |x| x.bytes()),
                    };
                    TensorRef {
                        dtype: decl.dtype,
                        shape: &self.shapes[t],
                        data,
                        quant: decl
                            .quant
                            .as_ref()
                            .map(baton_delegate_api::QuantRef::from_quant),
                    }
                })
                .collect();
            let mut outputs: Vec<TensorMut<'_>> = Vec::with_capacity(node.outputs.len());
            let mut local_iter = local_outs.iter_mut();
            for &o in &node.outputs {
                let decl = &self.graph.tensors[o];
                match self.slots[o] {
                    Slot::Arena(off) => {
                        let len = byte_len(decl.dtype, &self.shapes[o]);
                        // SAFETY: in bounds; disjoint from every input (live at this step).
                        let data = unsafe { std::slice::from_raw_parts_mut(base.add(off), len) };
                        outputs.push(TensorMut::new(decl.dtype, &self.shapes[o], data));
                    }
                    _ => outputs.push(
                        local_iter
                            .next()
                            .expect("one local per internal output")
                            .view_mut(),
                    ),
                }
            }
            reference::run_node(node, &inputs, &mut outputs)
                .map_err(|e| HostError::node(node, NodeProblem::Kernel(e)))?;
            drop(outputs);
            drop(inputs);
            let internal = node
                .outputs
                .iter()
                .copied()
                .filter(|&o| self.slots[o] == Slot::Internal);
            locals.extend(internal.zip(local_outs));
        }
        Ok(())
    }

    /// Runs control-flow node `controls[k]`: an If runs the branch session its condition
    /// picks, a Loop runs on the reference interpreter. Results must have the shapes the
    /// session planned.
    pub(super) fn run_control(&mut self, k: usize, buf: &mut AlignedBytes) -> Result<()> {
        let n = self.controls[k].node;
        self.controls[k].taken = None;
        let node = &self.graph.nodes[n];
        let operands: Vec<Tensor> = node
            .inputs
            .iter()
            .map(|&t| {
                Tensor::from_bytes(
                    self.graph.tensors[t].dtype,
                    &self.shapes[t],
                    self.bytes(t, buf),
                )
            })
            .collect();
        let results = if node.op == OpKind::If {
            let cond = &operands[0];
            if cond.dtype != DType::Bool || cond.len() != 1 {
                return Err(HostError::node(
                    node,
                    NodeProblem::BadCondition {
                        got: TensorType::of(cond.dtype, &cond.shape),
                    },
                ));
            }
            let pick = if cond.bytes()[0] != 0 { 0 } else { 1 };
            self.controls[k].taken = Some(pick);
            let name = ["then_branch", "else_branch"][pick];
            let refs: Vec<&Tensor> = operands[1..].iter().collect();
            match &mut self.controls[k].branches[pick] {
                Ok(branch) => branch.run_refs(&refs).map_err(|e| {
                    HostError::node(
                        node,
                        NodeProblem::Branch {
                            branch: name,
                            error: Box::new(e),
                        },
                    )
                })?,
                Err(why) => {
                    return Err(HostError::node(
                        node,
                        NodeProblem::BranchCannotLoad {
                            branch: name,
                            reason: why.clone(),
                        },
                    ))
                }
            }
        } else {
            let refs: Vec<&Tensor> = operands.iter().collect();
            reference::run_control(node, &refs)
                .map_err(|e| HostError::node(node, NodeProblem::Kernel(e)))?
        };
        let node = &self.graph.nodes[n];
        for (&o, t) in node.outputs.iter().zip(&results) {
            let decl = &self.graph.tensors[o];
            if t.dtype != decl.dtype || t.shape != self.shapes[o] {
                return Err(HostError::node(
                    node,
                    NodeProblem::OutputType {
                        output: decl.name.clone(),
                        planned: TensorType::of(decl.dtype, &self.shapes[o]),
                        got: TensorType::of(t.dtype, &t.shape),
                    },
                ));
            }
            if let Slot::Arena(off) = self.slots[o] {
                let len = t.bytes().len();
                buf.as_mut_slice()[off..off + len].copy_from_slice(t.bytes());
            }
        }
        if results.len() < node.outputs.len() {
            return Err(HostError::node(
                node,
                NodeProblem::ResultCount {
                    results: results.len(),
                    outputs: node.outputs.len(),
                },
            ));
        }
        Ok(())
    }
}
