//! Which intermediate tensors the executable holds channels-last (NHWC).
//!
//! Convolutions compute channels-last: output pixels are the GEMM's rows and channels
//! its columns, so activations are read in place and the weights stay packed. A chain of
//! convolutions should therefore never go back to NCHW between its links. A tensor is
//! held NHWC when it is a rank-3 or rank-4 f32 (or bool) result of a convolution (or of
//! an op below that follows its input's layout, or of a producer below), is not a
//! subgraph output, and every reader takes it that way:
//!
//! - a convolution (as its data input), which converts NCHW inputs itself otherwise;
//! - a layout-blind op: an element-wise activation, or a binary op, comparison or Where
//!   whose operands have the result's shape or a single element (the same element of
//!   each is combined, whatever the order), an f32 Add, Sub, Mul or Div whose other
//!   operands are broadcast over the channels alone or the pixels alone (their bytes are
//!   the same in either layout: MobileNetV3's and EfficientNet's squeeze-and-excitation
//!   gates, CBAM's spatial attention, per-channel constants), or an inference
//!   BatchNormalization (its kernel takes either layout), provided its own result is held
//!   NHWC too;
//! - a 2-D MaxPool or AveragePool, or a Concat, provided its own result is held NHWC too
//!   (and for a Concat all its inputs): the pools' kernels take either layout, and a
//!   Concat of NHWC tensors is the same concatenation along the axis where the logical
//!   one is held (YOLO's SPPF pools conv results and concatenates them, a ResNet stem
//!   pools one, DenseNet's transitions and Inception's branches average, and detectors
//!   and U-Nets concatenate along the channels);
//! - a Pad, provided its result is held NHWC too (a gather of whole pixels either way;
//!   one that a convolution takes into its own padding, `lower/tail.rs`, does not run),
//!   and a Slice or Split, provided its results are (sliced or split along the axis where
//!   the logical one is held: YOLOv8's C2f blocks split a conv's channels in two);
//! - a nearest or linear Resize of the height and width alone, provided its result is
//!   held NHWC too: whole pixels are gathered or mixed either way (the upsampling in a
//!   YOLO neck or a U-Net decoder sits between convolutions);
//! - a mean over exactly the spatial axes (ReduceMean or GlobalAveragePool), whose result
//!   is the same in both layouts;
//! - a Transpose that moves the channels last (`[0, 2, 3, 1]`, rank 3 `[0, 2, 1]`): its
//!   result, held as usual, has the bytes of its NHWC-held input, so it is a view;
//! - a conv chain's fused residual Add, provided the chain's result is held NHWC too: the
//!   epilogue reads the residual at the output's strides, so the two must share a layout
//!   (and a chain's result is held NHWC only if its residual is).
//!
//! Two more producers. A Transpose that moves the last axis to the channels (`[0, 3, 1,
//! 2]`) of a tensor held as usual has, held NHWC, the bytes of its input, so it too is a
//! view: models exported from channels-last frameworks (tf2onnx, Keras, TFLite
//! converters) wrap their convolutions in this pair of Transposes, and without it each ran
//! as a transpose and the convolutions converted layouts again. And at the edges of an
//! int8 region (`int8`: the 8-bit tensors held NHWC, see `lower/quant.rs`), a
//! DequantizeLinear of an NHWC-held tensor, which dequantizes element by element in the
//! order it reads; its converse, a QuantizeLinear whose 8-bit result is held NHWC, is a
//! reader. Both with one scale for the whole tensor: the Transposes of a channels-last
//! int8 model (Quantize/Dequantize pairs around them, as ONNX Runtime's quantizer writes
//! them) then become views too. A QDQ group that reads such a DequantizeLinear's result
//! reads its 8-bit input instead, so it takes either layout: the float ops ONNX Runtime's
//! quantizer leaves between Q -> DQ pairs (MaxPool, Resize, Split, Concat) stay
//! channels-last where a branch of their input also feeds an int8 convolution or Add.
//!
//! Anything else (reshapes, other transposes and pools, subgraph outputs, other readers
//! in QDQ groups) reads NCHW. The set is found by starting from every candidate and removing those with
//! a reader that does not take NHWC, until nothing changes: each round only removes, so
//! the loop ends. Layout is converted at most once at each boundary, by the convolution.

use baton_delegate_api::ir::{DType, Graph, Node, NodeId, OpKind, TensorId};
use baton_delegate_api::Constants;

use super::{reduced_axes, reduced_run};
use crate::fusion::{chain_residual, FusionPlan, Role};

/// One flag per tensor of `graph`: held channels-last. `skip` marks the nodes lowered
/// elsewhere (QDQ groups), which read and write NCHW; `int8` the 8-bit tensors the int8
/// region holds NHWC.
pub(crate) fn channels_last(
    graph: &Graph,
    plan: &FusionPlan,
    roles: &[Role],
    skip: &[bool],
    int8: &[bool],
    consts: &Constants<'_>,
) -> Vec<bool> {
    // A standalone QuantizeLinear or DequantizeLinear of one scale, whose 8-bit side is
    // held NHWC.
    let edge = |id: NodeId, op: OpKind| -> bool {
        let node = &graph.nodes[id];
        let bytes = if op == OpKind::QuantizeLinear {
            node.outputs[0]
        } else {
            node.inputs[0]
        };
        node.op == op
            && !skip[id]
            && int8.get(bytes).copied().unwrap_or(false)
            && crate::quant::QParams::of(graph, node, consts)
                .is_ok_and(|p| p.per_tensor().is_some())
    };
    let consumers = graph.consumers();
    let shape = |t: TensorId| graph.tensors[t].static_shape().unwrap_or_default();
    // The results an op holds in one layout: a Split writes all its outputs so (its
    // input is read NHWC only if they all are held so), the others their first (a
    // BatchNormalization's running statistics are not images).
    fn results(node: &Node) -> &[TensorId] {
        match node.op {
            OpKind::Split => &node.outputs[..],
            _ => &node.outputs[..1],
        }
    }
    // The node computing each materialized tensor, if it is a candidate.
    let mut producer: Vec<Option<NodeId>> = vec![None; graph.tensors.len()];
    for (id, node) in graph.nodes.iter().enumerate() {
        if skip[id] {
            continue;
        }
        let outs = match roles[id] {
            Role::Absorbed => continue,
            Role::Anchor(c) if node.op == OpKind::Conv => {
                &graph.nodes[plan.chains[c].last()].outputs[..1]
            }
            Role::Plain if data_inputs(graph, id).is_some() => results(node),
            Role::Plain
                if node.op == OpKind::Conv
                    || moves_channels(graph, id, false)
                    || edge(id, OpKind::DequantizeLinear) =>
            {
                &node.outputs[..1]
            }
            _ => continue,
        };
        for &out in outs {
            let decl = &graph.tensors[out];
            let rank = shape(out).len();
            // Bools too: they are held as 0.0/1.0 floats.
            let held = matches!(decl.dtype, DType::F32 | DType::Bool);
            if held && (rank == 3 || rank == 4) && !graph.outputs.contains(&out) {
                producer[out] = Some(id);
            }
        }
    }
    // Conv chains with a residual: (the Add, the residual, the chain's result).
    let residuals: Vec<(NodeId, TensorId, TensorId)> = plan
        .chains
        .iter()
        .filter(|c| graph.nodes[c.anchor].op == OpKind::Conv && !skip[c.anchor])
        .filter_map(|c| {
            let r = chain_residual(graph, c, consts)?;
            Some((c.add?, r, graph.nodes[c.last()].outputs[0]))
        })
        .collect();
    let mut nhwc: Vec<bool> = producer.iter().map(Option::is_some).collect();
    let accepts = |nhwc: &[bool], reader: NodeId, t: TensorId| -> bool {
        let node = &graph.nodes[reader];
        if roles[reader] == Role::Absorbed && !skip[reader] {
            return residuals
                .iter()
                .any(|&(add, r, out)| add == reader && r == t && nhwc[out]);
        }
        if skip[reader] {
            // A QDQ group reads a standalone DequantizeLinear's result through it: its
            // integer op reads the 8-bit input (a C2f's Split half feeds a convolution,
            // the residual Add and the Concat).
            return producer[t].is_some_and(|p| graph.nodes[p].op == OpKind::DequantizeLinear);
        }
        match node.op {
            OpKind::Conv => node.inputs[0] == t && !node.inputs[1..].contains(&t),
            OpKind::GlobalAveragePool => true,
            OpKind::QuantizeLinear => node.inputs[0] == t && edge(reader, OpKind::QuantizeLinear),
            OpKind::Transpose => moves_channels(graph, reader, true) && !nhwc[node.outputs[0]],
            OpKind::ReduceMean => {
                let x = shape(t);
                let values = |c| consts.bytes(c).and_then(|_| consts.i64s(c));
                match reduced_axes(node, &x, values) {
                    Ok(Some(flags)) => {
                        reduced_run(&x, &flags) == Some((2, x.len() - 1)) && !flags[0] && !flags[1]
                    }
                    _ => false,
                }
            }
            _ => {
                data_inputs(graph, reader).is_some_and(|d| d.contains(&t))
                    && results(node).iter().all(|&o| nhwc[o])
            }
        }
    };
    loop {
        let mut changed = false;
        for t in 0..graph.tensors.len() {
            if !nhwc[t] {
                continue;
            }
            let producer = producer[t].expect("candidates have a producer");
            let inputs_ok = match data_inputs(graph, producer) {
                Some(data) => data.iter().all(|&i| nhwc[i]),
                // A Transpose to channels first is a view of an input held as usual.
                None => {
                    graph.nodes[producer].op != OpKind::Transpose
                        || !nhwc[graph.nodes[producer].inputs[0]]
                }
            } && residuals.iter().all(|&(_, r, out)| out != t || nhwc[r]);
            let readers_ok = consumers[t].iter().all(|&r| accepts(&nhwc, r, t));
            if !(inputs_ok && readers_ok) {
                nhwc[t] = false;
                changed = true;
            }
        }
        if !changed {
            return nhwc;
        }
    }
}

/// Whether node `id` is a Transpose of a rank-3 or rank-4 tensor that moves the channels
/// (axis 1) last (`last`: `[0, 2, 3, 1]`) or the last axis to the channels (`[0, 3, 1,
/// 2]`); rank 3 has one such permutation, `[0, 2, 1]`, both ways.
fn moves_channels(graph: &Graph, id: NodeId, last: bool) -> bool {
    let node = &graph.nodes[id];
    if node.op != OpKind::Transpose {
        return false;
    }
    let rank = match graph.tensors[node.inputs[0]].static_shape() {
        Some(s) if s.len() == 3 || s.len() == 4 => s.len(),
        _ => return false,
    };
    let want: Vec<usize> = match last {
        true => std::iter::once(0).chain(2..rank).chain([1]).collect(),
        false => [0, rank - 1].into_iter().chain(1..rank - 1).collect(),
    };
    baton_delegate_api::shape::transpose_perm(node, rank).is_ok_and(|p| p == want)
}

/// Whether Transpose `id` reads and writes the same bytes under the layouts `nhwc`
/// chose: channels moved last out of an NHWC-held tensor into one held as usual, or the
/// last axis moved to the channels of a tensor held as usual into one held NHWC. Its
/// result is then a view of its input.
pub(crate) fn transpose_is_view(graph: &Graph, id: NodeId, nhwc: &[bool]) -> bool {
    let node = &graph.nodes[id];
    let (x, y) = (node.inputs[0], node.outputs[0]);
    (nhwc[x] && !nhwc[y] && moves_channels(graph, id, true))
        || (!nhwc[x] && nhwc[y] && moves_channels(graph, id, false))
}

/// The data inputs of an op whose result may be held in either layout, the layout of
/// these inputs: an element-wise op whose result does not depend on the memory order of
/// its operands (an activation; a binary op, a comparison or Where whose operands all
/// have the result's shape, or a single element, broadcast alike in either layout, or
/// for float arithmetic a broadcast whose bytes are the same in both (`same_bytes`); an
/// inference BatchNormalization, which knows where the channels are), a 2-D MaxPool
/// (without the indices output) or AveragePool of f32, whose kernels take both, an f32
/// Pad, Slice or Split, a nearest or linear f32 Resize of the height and width, or a Concat of f32
/// tensors of rank 3 or 4 (all its inputs); `None` for every other op.
fn data_inputs(graph: &Graph, id: NodeId) -> Option<Vec<TensorId>> {
    let node = &graph.nodes[id];
    let shape = |t: TensorId| graph.tensors[t].static_shape();
    match node.op {
        OpKind::Relu
        | OpKind::Sigmoid
        | OpKind::Tanh
        | OpKind::Erf
        | OpKind::Clip
        | OpKind::Sqrt
        | OpKind::Exp
        | OpKind::Log
        | OpKind::Neg
        | OpKind::Abs
        | OpKind::LeakyRelu
        | OpKind::HardSigmoid
        | OpKind::HardSwish
        | OpKind::Gelu
        | OpKind::Ceil
        | OpKind::Not
        | OpKind::BatchNormalization => Some(node.inputs[..1].to_vec()),
        OpKind::Concat => {
            let ok = |t: TensorId| {
                graph.tensors[t].dtype == DType::F32
                    && shape(t).is_some_and(|s| s.len() == 3 || s.len() == 4)
            };
            (ok(node.outputs[0]) && node.inputs.iter().all(|&t| ok(t))).then(|| node.inputs.clone())
        }
        // Any Pad, Slice or Split of f32: the same gather of whole pixels, or slice or
        // split along the axis where the logical one lies, in either layout.
        OpKind::Pad | OpKind::Slice | OpKind::Split => {
            let f32 = graph.tensors[node.inputs[0]].dtype == DType::F32;
            let rank = shape(node.inputs[0])?.len();
            (f32 && (rank == 3 || rank == 4)).then(|| node.inputs[..1].to_vec())
        }
        OpKind::Resize => {
            // Nearest or linear over the height and width alone (the batch and the
            // channels kept): the same gather or mix of whole pixels in either layout.
            let (x, y) = (shape(node.inputs[0])?, shape(node.outputs[0])?);
            let f32 = graph.tensors[node.inputs[0]].dtype == DType::F32;
            let mode = node.attr_str("mode", "nearest");
            let coord = node.attr_str("coordinate_transformation_mode", "half_pixel");
            let ok = x.len() == 4
                && y.len() == 4
                && x[..2] == y[..2]
                && f32
                && matches!(mode, "nearest" | "linear")
                && coord != "tf_crop_and_resize";
            ok.then(|| node.inputs[..1].to_vec())
        }
        OpKind::MaxPool | OpKind::AveragePool => {
            let x = shape(node.inputs[0])?;
            let f32 = graph.tensors[node.inputs[0]].dtype == DType::F32;
            (x.len() == 4 && f32 && node.outputs.len() == 1).then(|| node.inputs[..1].to_vec())
        }
        OpKind::Add
        | OpKind::Sub
        | OpKind::Mul
        | OpKind::Div
        | OpKind::Pow
        | OpKind::Greater
        | OpKind::Less
        | OpKind::Equal
        | OpKind::And
        | OpKind::Where => {
            let out = shape(node.outputs[0]);
            // Add, Sub, Mul and Div of floats also take an operand broadcast over the
            // channels alone or the pixels alone (a squeeze-and-excitation gate
            // `[N, C, 1, 1]`, a per-channel `[C, 1, 1]`, a spatial attention map `[N, 1,
            // H, W]`): its bytes are the same in either layout, and the lowering walks it
            // at the strides of the layout the result is held in (`nhwc_shape`).
            let arith = matches!(
                node.op,
                OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div
            ) && graph.tensors[node.outputs[0]].dtype == DType::F32;
            let mut full = Vec::new();
            for &i in &node.inputs {
                let s = shape(i)?;
                if Some(&s) == out.as_ref() {
                    full.push(i);
                } else if s.iter().product::<usize>() != 1
                    && !(arith && out.as_ref().is_some_and(|o| same_bytes(&s, o.len())))
                {
                    return None;
                }
            }
            (!full.is_empty()).then_some(full)
        }
        _ => None,
    }
}

/// Whether a tensor of `shape`, broadcast to an `NC...` result of `rank` (3 or 4), has
/// the same bytes held NHWC as held as usual: its channels or all its pixels are one.
fn same_bytes(shape: &[usize], rank: usize) -> bool {
    if shape.len() > rank || !(rank == 3 || rank == 4) {
        return false;
    }
    let full: Vec<usize> = std::iter::repeat_n(1, rank - shape.len())
        .chain(shape.iter().copied())
        .collect();
    full[1] == 1 || full[2..].iter().all(|&d| d == 1)
}

/// `shape`, broadcast to a result of `rank` held NHWC, in the order that result is held:
/// the channels last. For an operand of a result held so (`same_bytes` or the result's
/// own shape), whose bytes are walked at these dimensions.
pub(crate) fn nhwc_shape(shape: &[usize], rank: usize) -> Vec<usize> {
    let full: Vec<usize> = std::iter::repeat_n(1, rank.saturating_sub(shape.len()))
        .chain(shape.iter().copied())
        .collect();
    match full.len() {
        3 | 4 => [full[0]]
            .into_iter()
            .chain(full[2..].iter().copied())
            .chain([full[1]])
            .collect(),
        _ => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_delegate_api::ir::{Attr, GraphBuilder};

    fn plan_of(g: &Graph) -> Vec<bool> {
        let consts = Constants::new(g, &[]);
        let plan = FusionPlan::plan(g, &consts);
        let roles = plan.roles(g);
        let skip = vec![false; g.nodes.len()];
        channels_last(
            g,
            &plan,
            &roles,
            &skip,
            &vec![false; g.tensors.len()],
            &consts,
        )
    }

    #[test]
    fn conv_chains_stay_channels_last_up_to_their_boundaries() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 5, 5]);
        let w = b.constant_f32("w", &[2, 2, 1, 1], &[0.5; 4]);
        let c1 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let r1 = b.node(OpKind::Relu, &[c1], &[]).unwrap();
        let c2 = b.node(OpKind::Conv, &[r1, w], &[]).unwrap();
        let sum = b.node(OpKind::Add, &[c2, r1], &[]).unwrap();
        let axes = [("axes", Attr::Ints(vec![2, 3]))];
        let mean = b.node(OpKind::ReduceMean, &[sum], &axes).unwrap();
        // A conv read by a Flatten, and one that is a subgraph output.
        let c3 = b.node(OpKind::Conv, &[sum, w], &[]).unwrap();
        let flat = b.node(OpKind::Flatten, &[c3], &[]).unwrap();
        let c4 = b.node(OpKind::Conv, &[sum, w], &[]).unwrap();
        b.output(mean);
        b.output(flat);
        b.output(c4);
        let g = b.finish().unwrap();
        let nhwc = plan_of(&g);
        // Conv+Relu fuse: r1 is the chain's output; so do c2 and its residual Add of r1.
        assert!(nhwc[r1] && nhwc[sum] && !nhwc[c2]);
        assert!(!nhwc[x] && !nhwc[mean] && !nhwc[c3] && !nhwc[flat] && !nhwc[c4]);
    }

    #[test]
    fn a_fused_residual_shares_its_chains_layout() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 3, 3]);
        let w = b.constant_f32("w", &[2, 2, 1, 1], &[0.5; 4]);
        let c1 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let r1 = b.node(OpKind::Relu, &[c1], &[]).unwrap();
        let c2 = b.node(OpKind::Conv, &[r1, w], &[]).unwrap();
        // Fused into c2's chain, whose result is a subgraph output (NCHW).
        let sum = b.node(OpKind::Add, &[c2, r1], &[]).unwrap();
        let c3 = b.node(OpKind::Conv, &[sum, w], &[]).unwrap();
        let r3 = b.node(OpKind::Relu, &[c3], &[]).unwrap();
        let c4 = b.node(OpKind::Conv, &[r3, w], &[]).unwrap();
        // Fused into c4's chain, read by a mean only (NHWC).
        let sum2 = b.node(OpKind::Add, &[r3, c4], &[]).unwrap();
        let gap = b.node(OpKind::GlobalAveragePool, &[sum2], &[]).unwrap();
        b.output(sum);
        b.output(gap);
        let g = b.finish().unwrap();
        let nhwc = plan_of(&g);
        assert!(
            !nhwc[sum] && !nhwc[r1],
            "the residual follows the NCHW output"
        );
        assert!(nhwc[r3] && nhwc[sum2]);
    }

    #[test]
    fn products_with_channel_or_pixel_broadcasts_stay_channels_last() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 6, 6]);
        let w = b.constant_f32("w", &[2, 2, 1, 1], &[0.5; 4]);
        let c1 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let gap = b.node(OpKind::GlobalAveragePool, &[c1], &[]).unwrap();
        let gate = b.node(OpKind::Conv, &[gap, w], &[]).unwrap();
        let se = b.node(OpKind::Mul, &[c1, gate], &[]).unwrap();
        let w1 = b.constant_f32("w1", &[1, 2, 1, 1], &[0.5; 2]);
        let map = b.node(OpKind::Conv, &[c1, w1], &[]).unwrap();
        let spatial = b.node(OpKind::Mul, &[map, c1], &[]).unwrap();
        // A per-row constant `[H, 1]` is one over the channels: the same bytes too.
        let rows = b.constant_f32("rows", &[6, 1], &[0.5; 6]);
        let by_row = b.node(OpKind::Add, &[c1, rows], &[]).unwrap();
        // Other convs' results, read by products whose broadcasts do not keep bytes
        // (each would demote its conv, and with it every other reader).
        let (o1, o2) = (
            b.node(OpKind::Conv, &[x, w], &[]).unwrap(),
            b.node(OpKind::Conv, &[x, w], &[]).unwrap(),
        );
        let cols = b.constant_f32("cols", &[2, 1, 6], &[0.5; 12]);
        let by_col = b.node(OpKind::Add, &[o1, cols], &[]).unwrap();
        let planes = b.constant_f32("planes", &[2, 6, 6], &[0.5; 72]);
        let positional = b.node(OpKind::Add, &[o2, planes], &[]).unwrap();
        let c2 = b.node(OpKind::Conv, &[se, w], &[]).unwrap();
        let c3 = b.node(OpKind::Conv, &[spatial, w], &[]).unwrap();
        let c4 = b.node(OpKind::Conv, &[by_row, w], &[]).unwrap();
        let c5 = b.node(OpKind::Conv, &[positional, w], &[]).unwrap();
        let c6 = b.node(OpKind::Conv, &[by_col, w], &[]).unwrap();
        let greater = b.node(OpKind::Greater, &[c5, gate], &[]).unwrap();
        [c2, c3, c4, c6, greater]
            .into_iter()
            .for_each(|t| b.output(t));
        let g = b.finish().unwrap();
        let nhwc = plan_of(&g);
        // A gate over the channels, a map over the pixels: the same bytes either way.
        assert!(nhwc[c1] && nhwc[se] && nhwc[spatial] && nhwc[by_row]);
        // Per channel and column, or per channel and pixel, the bytes differ; and
        // comparisons keep to full operands.
        assert!(!nhwc[o1] && !nhwc[by_col] && !nhwc[o2] && !nhwc[positional] && !nhwc[c5]);
    }

    #[test]
    fn pools_and_concats_between_convs_stay_channels_last() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 6, 6]);
        let w = b.constant_f32("w", &[2, 2, 1, 1], &[0.5; 4]);
        let c1 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let k = [("kernel_shape", Attr::Ints(vec![3, 3]))];
        let p = b.node(OpKind::MaxPool, &[c1], &k).unwrap();
        let c2 = b.node(OpKind::Conv, &[p, w], &[]).unwrap();
        let cat = b
            .node(OpKind::Concat, &[c2, c2], &[("axis", Attr::Int(1))])
            .unwrap();
        let w4 = b.constant_f32("w4", &[2, 4, 1, 1], &[0.5; 8]);
        let c3 = b.node(OpKind::Conv, &[cat, w4], &[]).unwrap();
        let avg = b.node(OpKind::AveragePool, &[c3], &k).unwrap();
        let c4 = b.node(OpKind::Conv, &[avg, w], &[]).unwrap();
        // A Flatten reads NCHW: its conv is converted.
        let flat = b.node(OpKind::Flatten, &[c4], &[]).unwrap();
        b.output(flat);
        let g = b.finish().unwrap();
        let nhwc = plan_of(&g);
        assert!(nhwc[c1] && nhwc[p] && nhwc[c2] && nhwc[cat] && nhwc[c3] && nhwc[avg]);
        assert!(!nhwc[c4] && !nhwc[flat]);
    }

    #[test]
    fn resizes_of_height_and_width_between_convs_stay_channels_last() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 4, 4]);
        let w = b.constant_f32("w", &[2, 2, 1, 1], &[0.5; 4]);
        let c1 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let c0 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let resize = |b: &mut GraphBuilder, t, mode: &str, scales: Vec<f32>| {
            let attrs = [
                ("mode", Attr::Str(mode.into())),
                ("scales", Attr::Floats(scales)),
            ];
            b.node(OpKind::Resize, &[t], &attrs).unwrap()
        };
        let up = resize(&mut b, c1, "nearest", vec![1.0, 1.0, 2.0, 2.0]);
        let lin = resize(&mut b, c1, "linear", vec![1.0, 1.0, 0.5, 0.5]);
        // Resampling the channels is not a resize of whole pixels: its conv is converted.
        let chans = resize(&mut b, c0, "nearest", vec![1.0, 2.0, 1.0, 1.0]);
        let mut convs = vec![];
        for t in [up, lin] {
            convs.push(b.node(OpKind::Conv, &[t, w], &[]).unwrap());
        }
        let w4 = b.constant_f32("w4", &[2, 4, 1, 1], &[0.5; 8]);
        convs.push(b.node(OpKind::Conv, &[chans, w4], &[]).unwrap());
        convs.into_iter().for_each(|t| b.output(t));
        let g = b.finish().unwrap();
        let nhwc = plan_of(&g);
        assert!(nhwc[c1] && nhwc[up] && nhwc[lin]);
        assert!(!nhwc[c0] && !nhwc[chans]);
    }

    #[test]
    fn a_split_holds_all_its_parts_in_one_layout() {
        let split = |exposed: bool| {
            let mut b = GraphBuilder::new("g");
            let x = b.input_fixed("x", DType::F32, &[1, 2, 4, 4]);
            let w = b.constant_f32("w", &[4, 2, 1, 1], &[0.5; 8]);
            let c = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
            let axis = [("axis", Attr::Int(1))];
            let sizes = b.constant_i64("sizes", &[2], &[2, 2]);
            let parts = b
                .named_node_outputs("s", OpKind::Split, &[c, sizes], &axis, 2)
                .unwrap();
            let w2 = b.constant_f32("w2", &[2, 2, 1, 1], &[0.5; 4]);
            let c0 = b.node(OpKind::Conv, &[parts[0], w2], &[]).unwrap();
            b.output(c0);
            // A graph output is NCHW: its sibling must be too.
            let last = if exposed {
                parts[1]
            } else {
                b.node(OpKind::Conv, &[parts[1], w2], &[]).unwrap()
            };
            b.output(last);
            let g = b.finish().unwrap();
            (plan_of(&g), c, parts)
        };
        let (nhwc, c, parts) = split(false);
        assert!(nhwc[c] && nhwc[parts[0]] && nhwc[parts[1]]);
        let (nhwc, c, parts) = split(true);
        assert!(!nhwc[c] && !nhwc[parts[0]] && !nhwc[parts[1]]);
    }

    #[test]
    fn a_layout_blind_op_with_an_nchw_reader_demotes_its_inputs() {
        let mut b = GraphBuilder::new("g");
        let x = b.input_fixed("x", DType::F32, &[1, 2, 3, 3]);
        let w = b.constant_f32("w", &[2, 2, 1, 1], &[0.5; 4]);
        let c1 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let c2 = b.node(OpKind::Conv, &[x, w], &[]).unwrap();
        let sum = b.node(OpKind::Add, &[c1, c2], &[]).unwrap();
        let flat = b.node(OpKind::Flatten, &[sum], &[]).unwrap();
        b.output(flat);
        let g = b.finish().unwrap();
        let nhwc = plan_of(&g);
        assert!(!nhwc[c1] && !nhwc[c2] && !nhwc[sum]);
    }
}
