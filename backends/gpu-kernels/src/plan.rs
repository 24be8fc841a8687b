//! `compile`: fuse activations into their producers, lower every node to dispatches, and
//! lay out the device buffers — an arena for run-time tensors (offsets from lifetimes),
//! a weights buffer for constants, and one parameters buffer for every dispatch.

use baton_delegate_api::ir::{Graph, Storage, TensorId};
use baton_delegate_api::{Constants, Decline, DeclineReason, TensorRef};

use crate::lower::{activation_of, conv_batch_norm, lower, Activation, Context, Draft};
use crate::Limits;

/// Every buffer offset is a multiple of this: the largest minStorageBufferOffsetAlignment
/// Vulkan allows, so a plan is valid on any device.
pub const ALIGN: u64 = 256;

/// Which device buffer a range lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// Run-time tensors: inputs, intermediates, outputs.
    Arena = 0,
    /// Constants, uploaded once at init.
    Weights = 1,
    /// The kernels' parameter words, uploaded once at init.
    Params = 2,
    /// A small buffer bound where a kernel reads nothing.
    Dummy = 3,
}

impl Region {
    pub fn from_code(c: u32) -> Option<Region> {
        [
            Region::Arena,
            Region::Weights,
            Region::Params,
            Region::Dummy,
        ]
        .into_iter()
        .find(|r| *r as u32 == c)
    }
}

/// A byte range of one region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub region: Region,
    pub offset: u64,
    pub len: u64,
}

/// Bindings per dispatch: 0-2 operands, 3 output, 4 parameters, 5-6 further outputs.
pub const SLOTS: usize = 7;

/// Bytes of the dummy buffer: one range per binding slot, so that no two unused bindings
/// of a dispatch alias (a shared range bound read_write twice would be a hazard).
pub const DUMMY_SIZE: u64 = ALIGN * SLOTS as u64;

/// The unused-binding range of slot `b`.
pub fn dummy(b: usize) -> Range {
    Range {
        region: Region::Dummy,
        offset: ALIGN * b as u64,
        len: 16,
    }
}

/// One dispatch, ready to record.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub kernel: String,
    /// The value of the kernel's override constant (workgroup size or tile edge).
    pub spec: u32,
    /// Bindings 0 to 6 (4 is the step's parameters).
    pub bindings: [Range; SLOTS],
    pub groups: [u32; 3],
}

/// Where a constant's bytes come from at init.
#[derive(Clone, Debug, PartialEq)]
pub enum WeightSource {
    /// The n-th constant view passed to init.
    View(u32),
    /// Carried in the blob (constants inline in the compiled graph).
    Inline(Vec<u8>),
}

/// A constant and its place in the weights buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Weight {
    pub source: WeightSource,
    pub offset: u64,
    pub len: u64,
}

/// The compiled partition.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The device limits the kernels were chosen for.
    pub limits: Limits,
    pub arena_size: u64,
    pub weights_size: u64,
    pub weights: Vec<Weight>,
    /// All steps' parameter words, each step's at an ALIGN-ed offset.
    pub params: Vec<u32>,
    pub inputs: Vec<Range>,
    pub outputs: Vec<Range>,
    pub steps: Vec<Step>,
}

impl Plan {
    /// Writes every weight into `dst` (at least `weights_size` bytes) at its offset, from
    /// the blob or from the constant views `init` was given; an error names the view that
    /// is missing or of the wrong size.
    pub fn write_weights(&self, views: &[TensorRef<'_>], dst: &mut [u8]) -> Result<(), String> {
        for w in &self.weights {
            let src: &[u8] = match &w.source {
                WeightSource::Inline(b) => b,
                WeightSource::View(i) => {
                    views
                        .get(*i as usize)
                        .ok_or_else(|| {
                            format!(
                                "constant view {i} was not passed to init ({} were)",
                                views.len()
                            )
                        })?
                        .data
                }
            };
            if src.len() as u64 != w.len {
                return Err(format!(
                    "a constant of {} bytes was compiled, {} bytes were passed",
                    w.len,
                    src.len()
                ));
            }
            dst[w.offset as usize..(w.offset + w.len) as usize].copy_from_slice(src);
        }
        Ok(())
    }

    /// Writes the parameter words, little-endian, into `dst` (at least `4 * params.len()`
    /// bytes).
    pub fn write_params(&self, dst: &mut [u8]) {
        for (word, d) in self.params.iter().zip(dst.chunks_exact_mut(4)) {
            d.copy_from_slice(&word.to_le_bytes());
        }
    }
}

/// Compiles a subgraph for a device with `limits`.
pub fn compile(graph: &Graph, consts: &Constants<'_>, limits: Limits) -> Result<Plan, String> {
    let cx = Context {
        graph,
        consts,
        limits,
    };
    let decline = |node: usize, d: Decline| {
        format!(
            "node {} is not supported ({}): {}",
            graph.nodes[node].label(),
            d.reason.name(),
            d.message
        )
    };
    let fused = fusion(&cx).map_err(|(n, d)| decline(n, d))?;
    let mut drafts: Vec<Draft> = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        match fused[i] {
            Fused::Into => continue,
            Fused::Takes(j, act) => {
                // Fusion only pairs nodes with exactly one output each.
                let out = graph.nodes[j]
                    .outputs
                    .first()
                    .copied()
                    .ok_or_else(|| format!("{} has no output", graph.nodes[j].label()))?;
                drafts.extend(lower(&cx, node, act, out).map_err(|d| decline(i, d))?);
            }
            Fused::Folds(bn, store, act) => {
                let out = graph.nodes[store]
                    .outputs
                    .first()
                    .copied()
                    .ok_or_else(|| format!("{} has no output", graph.nodes[store].label()))?;
                drafts.push(
                    conv_batch_norm(&cx, node, &graph.nodes[bn], act, out)
                        .map_err(|d| decline(i, d))?,
                );
            }
            Fused::No => {
                let out = node
                    .outputs
                    .first()
                    .copied()
                    .ok_or_else(|| format!("{} has no output", node.label()))?;
                drafts.extend(
                    lower(&cx, node, Activation::default(), out).map_err(|d| decline(i, d))?,
                );
            }
        }
    }
    layout(graph, consts, limits, &drafts)
}

#[derive(Clone, Copy)]
enum Fused {
    No,
    /// This node stores through the activation of node `.0`.
    Takes(usize, Activation),
    /// This Conv has the BatchNormalization node `.0` folded into its weights and
    /// stores into the output of node `.1` (the BN, or an activation after it) through
    /// the activation `.2`.
    Folds(usize, usize, Activation),
    /// This activation (or folded BatchNormalization) node runs inside its producer.
    Into,
}

/// The node that alone reads node `i`'s single output, as its first input and once,
/// when that output is no graph output and the reader is not fused yet.
fn sole_user(g: &Graph, consumers: &[Vec<usize>], fused: &[Fused], i: usize) -> Option<usize> {
    let node = &g.nodes[i];
    if node.outputs.len() != 1 {
        return None;
    }
    let t = node.outputs[0];
    if g.outputs.contains(&t) || consumers[t].len() != 1 {
        return None;
    }
    let j = consumers[t][0];
    let user = &g.nodes[j];
    if user.outputs.len() != 1
        || !matches!(fused[j], Fused::No)
        || user.inputs.iter().filter(|&&u| u == t).count() != 1
        || user.inputs[0] != t
    {
        return None;
    }
    Some(j)
}

/// Fuses an activation into a MatMul, Gemm, Conv, ConvTranspose, BatchNormalization or
/// binary element-wise producer whose result nothing else reads: the epilogue is applied
/// as the result is stored. A BatchNormalization that alone reads a Conv's or a
/// ConvTranspose's result is folded into its weights and bias first (with the
/// activation after it, if any).
fn fusion(cx: &Context<'_>) -> Result<Vec<Fused>, (usize, Decline)> {
    use baton_delegate_api::ir::OpKind::*;
    let g = cx.graph;
    let consumers = g.consumers();
    let mut fused = vec![Fused::No; g.nodes.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        if !matches!(fused[i], Fused::No)
            || !matches!(
                node.op,
                MatMul
                    | Gemm
                    | Conv
                    | ConvTranspose
                    | Add
                    | Sub
                    | Mul
                    | Div
                    | Pow
                    | BatchNormalization
            )
        {
            continue;
        }
        let Some(j) = sole_user(g, &consumers, &fused, i) else {
            continue;
        };
        let user = &g.nodes[j];
        if matches!(node.op, Conv | ConvTranspose) && user.op == BatchNormalization {
            // Fold the BN (and an activation after it) into the Conv where its weights
            // and the BN's parameters are constants; else they are lowered apart.
            let mut store = (j, Activation::default());
            if let Some(k) = sole_user(g, &consumers, &fused, j) {
                if let Some(act) = activation_of(cx, &g.nodes[k]).map_err(|d| (k, d))? {
                    store = (k, act);
                }
            }
            let (k, act) = store;
            if conv_batch_norm(cx, node, user, act, g.nodes[k].outputs[0]).is_ok() {
                fused[i] = Fused::Folds(j, k, act);
                fused[j] = Fused::Into;
                fused[k] = Fused::Into;
                continue;
            }
        }
        if let Some(act) = activation_of(cx, user).map_err(|d| (j, d))? {
            fused[i] = Fused::Takes(j, act);
            fused[j] = Fused::Into;
        }
    }
    Ok(fused)
}

/// Places tensors, gathers parameters and resolves every binding to a range.
fn layout(
    graph: &Graph,
    consts: &Constants<'_>,
    limits: Limits,
    drafts: &[Draft],
) -> Result<Plan, String> {
    // f16 tensors take 2 bytes an element; a range may then end off a 4-byte boundary,
    // which storage bindings and buffer copies allow (offsets stay ALIGNed).
    let bytes_of = |t: TensorId| -> u64 {
        let decl = &graph.tensors[t];
        decl.static_shape().map_or(0, |s| {
            (s.iter().product::<usize>() * decl.dtype.size()) as u64
        })
    };
    // Lifetimes in step units: graph inputs are live from 0, step s runs at s + 1, graph
    // outputs stay live to the end.
    let end = drafts.len() as u64 + 1;
    let mut life: Vec<Option<(u64, u64)>> = vec![None; graph.tensors.len()];
    let mut touch = |t: TensorId, at: u64| {
        let e = life[t].get_or_insert((at, at));
        e.0 = e.0.min(at);
        e.1 = e.1.max(at);
    };
    for &t in &graph.inputs {
        touch(t, 0);
    }
    for (s, d) in drafts.iter().enumerate() {
        for t in d.bindings.iter().chain(&d.extra).flatten() {
            touch(*t, s as u64 + 1);
        }
    }
    for &t in &graph.outputs {
        touch(t, end);
    }
    let mut weights = Vec::new();
    let mut weights_size = 0;
    let mut placed: Vec<Option<Range>> = vec![None; graph.tensors.len()];
    // Constants go to the weights buffer in tensor order.
    for (t, decl) in graph.tensors.iter().enumerate() {
        let Some(storage) = &decl.data else { continue };
        if life[t].is_none() {
            continue; // a shape operand or a Clip bound: read at compile time
        }
        if graph.outputs.contains(&t) {
            return Err(format!("graph output '{}' is a constant", decl.name));
        }
        let len = bytes_of(t);
        let source = match storage {
            Storage::External(i) => WeightSource::View(*i as u32),
            Storage::Inline(_) => WeightSource::Inline(
                consts
                    .bytes(t)
                    .ok_or_else(|| format!("constant '{}' has no bytes", decl.name))?
                    .to_vec(),
            ),
        };
        weights.push(Weight {
            source,
            offset: weights_size,
            len,
        });
        placed[t] = Some(Range {
            region: Region::Weights,
            offset: weights_size,
            len,
        });
        weights_size = (weights_size + len).next_multiple_of(ALIGN);
    }
    // Run-time tensors: greedy by size, first fit among tensors whose lifetimes overlap.
    let mut order: Vec<TensorId> = (0..graph.tensors.len())
        .filter(|&t| life[t].is_some() && placed[t].is_none())
        .collect();
    order.sort_by_key(|&t| (std::cmp::Reverse(bytes_of(t)), t));
    let mut arena: Vec<(u64, u64, u64, u64)> = Vec::new(); // offset, len, start, end
    let mut arena_size = 0;
    for t in order {
        let (start, stop) = life[t].expect("filtered");
        let len = bytes_of(t);
        let mut busy: Vec<(u64, u64)> = arena
            .iter()
            .filter(|a| a.2 <= stop && start <= a.3)
            .map(|a| (a.0, a.0 + a.1))
            .collect();
        busy.sort_unstable();
        let mut offset = 0;
        for (b0, b1) in busy {
            if offset + len <= b0 {
                break;
            }
            offset = offset.max(b1.next_multiple_of(ALIGN));
        }
        arena.push((offset, len, start, stop));
        arena_size = arena_size.max(offset + len);
        placed[t] = Some(Range {
            region: Region::Arena,
            offset,
            len,
        });
    }
    // A kernel binds its tensors as arrays of 32-bit words (f16 ones as halves): a
    // bool tensor of 33 bytes is bound as 36, so that its last word is inside the
    // binding (an array's length is the binding's size in whole elements). The bytes
    // past the tensor are padding up to the next ALIGN-ed offset, or past the arena's
    // end, which is rounded up for them.
    let words = |r: Range| Range {
        len: r.len.next_multiple_of(4),
        ..r
    };
    let arena_size = arena_size.next_multiple_of(4);
    let range = |t: TensorId| {
        placed[t].ok_or_else(|| format!("tensor '{}' was not placed", graph.tensors[t].name))
    };
    let mut params = Vec::new();
    let mut steps = Vec::new();
    for d in drafts {
        let offset = (params.len() as u64 * 4).next_multiple_of(ALIGN);
        params.resize(offset as usize / 4, 0);
        params.extend_from_slice(&d.params);
        let mut bindings: [Range; SLOTS] = std::array::from_fn(dummy);
        for (b, t) in d.bindings.iter().enumerate() {
            if let Some(t) = t {
                bindings[b] = words(range(*t)?);
            }
        }
        for (b, t) in d.extra.iter().enumerate() {
            if let Some(t) = t {
                bindings[5 + b] = words(range(*t)?);
            }
        }
        for (slot, bytes) in &d.made {
            let len = bytes.len() as u64;
            weights.push(Weight {
                source: WeightSource::Inline(bytes.clone()),
                offset: weights_size,
                len,
            });
            bindings[*slot] = words(Range {
                region: Region::Weights,
                offset: weights_size,
                len,
            });
            weights_size = (weights_size + len).next_multiple_of(ALIGN);
        }
        bindings[4] = Range {
            region: Region::Params,
            offset,
            len: d.params.len() as u64 * 4,
        };
        steps.push(Step {
            kernel: d.kernel.to_string(),
            spec: d.spec,
            bindings,
            groups: d.groups,
        });
    }
    if arena_size > limits.max_storage_range.max(1) * 64 {
        return Err(format!(
            "the arena needs {arena_size} bytes ({})",
            DeclineReason::Resource.name()
        ));
    }
    Ok(Plan {
        limits,
        arena_size,
        weights_size,
        weights,
        params,
        inputs: graph
            .inputs
            .iter()
            .map(|&t| range(t))
            .collect::<Result<_, _>>()?,
        outputs: graph
            .outputs
            .iter()
            .map(|&t| range(t))
            .collect::<Result<_, _>>()?,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind};

    #[test]
    fn a_batch_norm_after_a_grouped_conv_transpose_scales_each_output_channel() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 1, 1]);
        // C = 2, group 2, one output channel per group: W [2, 1, 1, 1].
        let w = b.constant_f32("w", &[2, 1, 1, 1], &[3.0, 5.0]);
        let attrs = [("group", Attr::Int(2))];
        let y = b.node(OpKind::ConvTranspose, &[x, w], &attrs).unwrap();
        // Channel 0: s = 4 / sqrt(3 + 1) = 2, t = 1 - 0.5 * 2 = 0; channel 1: s = 1 /
        // sqrt(0 + 1) = 1, t = 2 - 1 * 1 = 1. W' = [6, 5], B' = [0, 1].
        let scale = b.constant_f32("scale", &[2], &[4.0, 1.0]);
        let bias = b.constant_f32("bias", &[2], &[1.0, 2.0]);
        let mean = b.constant_f32("mean", &[2], &[0.5, 1.0]);
        let var = b.constant_f32("var", &[2], &[3.0, 0.0]);
        let z = b
            .node(
                OpKind::BatchNormalization,
                &[y, scale, bias, mean, var],
                &[("epsilon", Attr::Float(1.0))],
            )
            .unwrap();
        b.output(z);
        let g = b.finish().unwrap();
        let consts = Constants::new(&g, &[]);
        let limits = Limits::for_tests();
        let plan = compile(&g, &consts, limits).unwrap();
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].kernel, "conv_transpose");
        let inline: Vec<Vec<f32>> = plan
            .weights
            .iter()
            .filter_map(|w| match &w.source {
                WeightSource::Inline(b) => Some(
                    b.chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                        .collect(),
                ),
                WeightSource::View(_) => None,
            })
            .collect();
        assert!(inline.contains(&vec![6.0, 5.0]), "{inline:?}");
        assert!(inline.contains(&vec![0.0, 1.0]), "{inline:?}");
    }

    #[test]
    fn a_batch_norm_and_relu_after_a_conv_fold_into_one_conv_dispatch() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 1, 2, 2]);
        let w = b.constant_f32("w", &[1, 1, 1, 1], &[3.0]);
        let y = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        // s = 4 / sqrt(3 + 1) = 2, t = 1 - 0.5 * 2 = 0: W' = 3 * 2 = 6, B' = 0 * 2 + 0.
        let scale = b.constant_f32("scale", &[1], &[4.0]);
        let bias = b.constant_f32("bias", &[1], &[1.0]);
        let mean = b.constant_f32("mean", &[1], &[0.5]);
        let var = b.constant_f32("var", &[1], &[3.0]);
        let z = b
            .node(
                OpKind::BatchNormalization,
                &[y, scale, bias, mean, var],
                &[("epsilon", Attr::Float(1.0))],
            )
            .unwrap();
        let r = b.node(OpKind::Relu, &[z], &[]).unwrap();
        b.output(r);
        let g = b.finish().unwrap();
        let consts = Constants::new(&g, &[]);
        let limits = Limits::for_tests();
        let plan = compile(&g, &consts, limits).unwrap();
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].kernel, "conv2d");
        let params = plan.steps[0].bindings[4].offset as usize / 4;
        // has_bias, then the activation code of Relu.
        assert_eq!(plan.params[params + 16..params + 18], [1, 1]);
        let inline: Vec<Vec<u8>> = plan
            .weights
            .iter()
            .filter_map(|w| match &w.source {
                WeightSource::Inline(b) => Some(b.clone()),
                WeightSource::View(_) => None,
            })
            .collect();
        assert!(
            inline.contains(&6.0f32.to_le_bytes().to_vec()),
            "{inline:?}"
        );
        assert!(
            inline.contains(&0.0f32.to_le_bytes().to_vec()),
            "{inline:?}"
        );
    }
}
