//! Lowering of the row-wise ops: pooling, Softmax/LogSoftmax, the Reduce ops and
//! LayerNormalization.

use super::*;

pub(super) fn pool(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let x = cx.operand(node.inputs[0], out)?;
    if x.len() != 3 && x.len() != 4 {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{} with {} spatial dimensions (1 or 2 supported)",
                node.op,
                x.len().saturating_sub(2)
            ),
        ));
    }
    let spatial = &x[2..];
    let planes = x[0] * x[1];
    let two = |v: &[usize], one: usize| {
        if v.len() == 1 {
            [one, v[0]]
        } else {
            [v[0], v[1]]
        }
    };
    let [h, w] = two(spatial, 1);
    let p: Vec<usize> = if node.op == OpKind::GlobalAveragePool {
        vec![planes, h, w, 1, 1, h, w, 1, 1, 1, 1, 0, 0, 1, 0]
    } else {
        if node.op == OpKind::AveragePool && node.attr_int("ceil_mode", 0) != 0 {
            return Err(Decline::new(
                DeclineReason::Attribute,
                "AveragePool with ceil_mode = 1",
            ));
        }
        if node.attr_int("storage_order", 0) != 0 {
            return Err(Decline::new(
                DeclineReason::Attribute,
                "MaxPool storage_order = 1",
            ));
        }
        let g =
            PoolGeometry::new(node, &x).map_err(|e| Decline::new(DeclineReason::Attribute, e))?;
        let win = &g.window;
        let [oh, ow] = two(&g.out_spatial, 1);
        let [kh, kw] = two(&win.kernel, 1);
        let [sh, sw] = two(&win.strides, 1);
        let [dh, dw] = two(&win.dilations, 1);
        let [ph, pw] = two(&win.pad_begin, 0);
        let mode = usize::from(node.op == OpKind::AveragePool);
        vec![
            planes * oh * ow,
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            ph,
            pw,
            mode,
            usize::from(g.count_include_pad),
        ]
    };
    let n = p[0];
    let p = p.into_iter().map(|v| v as u32).collect();
    cx.one_dimensional(
        cx.variant("pool2d", "pool2d_f16", out),
        n,
        [Some(node.inputs[0]), None, None, Some(out)],
        p,
    )
}

pub(super) fn softmax(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let x = cx.operand(node.inputs[0], out)?;
    let axis = normalize_axis(node.attr_int("axis", -1), x.len())
        .map_err(|e| Decline::new(DeclineReason::Attribute, e))?;
    let len = x[axis];
    let inner: usize = x[axis + 1..].iter().product();
    let rows = x.iter().product::<usize>() / len;
    let spec = cx.group_size("softmax")?; // the f16 variant has the same sizes
    Ok(Draft {
        kernel: cx.row_variant(
            ["softmax", "softmax_f16", "softmax_sg", "softmax_sg_f16"],
            out,
        ),
        spec,
        bindings: [Some(node.inputs[0]), None, None, Some(out)],
        extra: [None, None],
        made: Vec::new(),
        params: vec![
            rows as u32,
            len as u32,
            inner as u32,
            u32::from(node.op == OpKind::LogSoftmax),
        ],
        groups: cx.spread(rows as u64)?,
    })
}

/// Reduce ops over one contiguous block of axes (any block: the rows kernel addresses the
/// axes after it by stride). Scattered axes would need a transpose first: declined.
pub(super) fn reduce(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let x = cx.operand(node.inputs[0], out)?;
    let axes: Vec<i64> = match (node.attr_ints("axes"), node.inputs.get(1)) {
        (Some(a), _) => a.to_vec(),
        (None, Some(&t)) => cx
            .consts
            .i64s(t)
            .filter(|_| cx.graph.tensors[t].is_const())
            .ok_or_else(|| {
                Decline::new(
                    DeclineReason::NotConstant,
                    format!("{} axes are computed at run time", node.op),
                )
            })?,
        (None, None) => Vec::new(),
    };
    let mut axes: Vec<usize> = if axes.is_empty() {
        if node.attr_int("noop_with_empty_axes", 0) != 0 {
            return Err(Decline::new(
                DeclineReason::Attribute,
                format!("{} with noop_with_empty_axes", node.op),
            ));
        }
        (0..x.len()).collect()
    } else {
        axes.iter()
            .map(|&a| normalize_axis(a, x.len()))
            .collect::<Result<_, _>>()
            .map_err(|e| Decline::new(DeclineReason::Attribute, e))?
    };
    axes.sort_unstable();
    axes.dedup();
    let (Some(&first), Some(&last)) = (axes.first(), axes.last()) else {
        // A scalar: reducing it over nothing is the value itself.
        return Ok(Draft {
            kernel: reduce_kernel(cx, out),
            spec: cx.group_size("reduce")?,
            bindings: [Some(node.inputs[0]), None, None, Some(out)],
            extra: [None, None],
            made: Vec::new(),
            params: vec![1, 1, 1, reduce_mode(node.op)],
            groups: [1, 1, 1],
        });
    };
    if last - first + 1 != axes.len() {
        return Err(Decline::new(
            DeclineReason::Attribute,
            format!(
                "{} over scattered axes {axes:?} (one contiguous block supported)",
                node.op
            ),
        ));
    }
    let len: usize = x[first..=last].iter().product();
    let inner: usize = x[last + 1..].iter().product();
    let rows = x.iter().product::<usize>() / len;
    let mode = reduce_mode(node.op);
    Ok(Draft {
        kernel: reduce_kernel(cx, out),
        spec: cx.group_size("reduce")?,
        bindings: [Some(node.inputs[0]), None, None, Some(out)],
        extra: [None, None],
        made: Vec::new(),
        params: vec![rows as u32, len as u32, inner as u32, mode],
        groups: cx.spread(rows as u64)?,
    })
}

fn reduce_kernel(cx: &Context<'_>, out: TensorId) -> &'static str {
    cx.row_variant(["reduce", "reduce_f16", "reduce_sg", "reduce_sg_f16"], out)
}

fn reduce_mode(op: OpKind) -> u32 {
    match op {
        OpKind::ReduceSum => 0,
        OpKind::ReduceMean => 1,
        OpKind::ReduceMin => 3,
        _ => 2,
    }
}

pub(super) fn layer_norm(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    // X, Scale, B and Y share one element type (f32, or f16 in the f16 variant); Mean and
    // InvStdDev are f32 either way.
    let x = cx.operand(node.inputs[0], out)?;
    let axis = normalize_axis(node.attr_int("axis", -1), x.len())
        .map_err(|e| Decline::new(DeclineReason::Attribute, e))?;
    let d: usize = x[axis..].iter().product();
    let rows = x.iter().product::<usize>() / d;
    let operand = |i: usize| -> Lowered<Option<TensorId>> {
        let Some(&t) = node.inputs.get(i) else {
            return Ok(None);
        };
        let s = cx.operand(t, out)?;
        if s.as_slice() != &x[axis..] {
            return Err(Decline::new(
                DeclineReason::Shape,
                format!(
                    "LayerNormalization {} '{}' is {s:?}; only the normalized shape {:?} is supported",
                    if i == 1 { "scale" } else { "bias" },
                    cx.graph.tensors[t].name,
                    &x[axis..]
                ),
            ));
        }
        Ok(Some(t))
    };
    let scale = operand(1)?
        .ok_or_else(|| Decline::new(DeclineReason::Shape, "LayerNormalization without scale"))?;
    let bias = operand(2)?;
    let eps = node.attr_float("epsilon", 1e-5);
    // The optional Mean and InvStdDev outputs: one value per row.
    let mut extra = [None, None];
    for (k, slot) in extra.iter_mut().enumerate() {
        if let Some(&t) = node.outputs.get(k + 1) {
            if cx.f32_tensor(t)?.iter().product::<usize>() != rows {
                return Err(Decline::new(
                    DeclineReason::Shape,
                    format!(
                        "LayerNormalization output '{}' does not hold one value per row",
                        cx.graph.tensors[t].name
                    ),
                ));
            }
            *slot = Some(t);
        }
    }
    let spec = cx.group_size("layernorm")?;
    Ok(Draft {
        kernel: cx.row_variant(
            [
                "layernorm",
                "layernorm_f16",
                "layernorm_sg",
                "layernorm_sg_f16",
            ],
            out,
        ),
        spec,
        bindings: [Some(node.inputs[0]), Some(scale), bias, Some(out)],
        extra,
        made: Vec::new(),
        params: vec![
            rows as u32,
            d as u32,
            eps.to_bits(),
            u32::from(bias.is_some()),
            u32::from(extra[0].is_some()),
            u32::from(extra[1].is_some()),
        ],
        groups: cx.spread(rows as u64)?,
    })
}
