//! Lowering of the ops with an inner product: MatMul, Gemm and Conv.

use super::*;

/// MatMul with numpy rules. Batches broadcast only wholesale: each operand's batch is
/// either the output's or all ones (stride 0); a mix would need a second index level.
pub(super) fn matmul(
    cx: &Context<'_>,
    node: &Node,
    act: Activation,
    out: TensorId,
) -> Lowered<Draft> {
    let a = cx.operand(node.inputs[0], out)?;
    let b = cx.operand(node.inputs[1], out)?;
    matmul_shape(&a, &b).map_err(|e| Decline::new(DeclineReason::Shape, e))?;
    let (a2, b2) = (promote(&a, true), promote(&b, false));
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let batch_a = &a2[..a2.len() - 2];
    let batch_b = &b2[..b2.len() - 2];
    let rank = batch_a.len().max(batch_b.len());
    let full = |s: &[usize]| -> Vec<usize> {
        let mut v = vec![1; rank - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (fa, fb) = (full(batch_a), full(batch_b));
    let batch: Vec<usize> = fa.iter().zip(&fb).map(|(&x, &y)| x.max(y)).collect();
    let z: usize = batch.iter().product();
    let stride = |f: &[usize], size: usize, name: &str| -> Lowered<u32> {
        if f == batch.as_slice() {
            Ok(size as u32)
        } else if f.iter().all(|&d| d == 1) {
            Ok(0)
        } else {
            Err(Decline::new(
                DeclineReason::Shape,
                format!("MatMul {name} batch {f:?} broadcasts partially to {batch:?}"),
            ))
        }
    };
    let sa = stride(&fa, m * k, "A")?;
    let sb = stride(&fb, k * n, "B")?;
    let mut p = vec![
        m as u32, n as u32, k as u32, sa, k as u32, 1, sb, n as u32, 1,
    ];
    p.extend([
        0,
        0,
        0,
        0,
        1f32.to_bits(),
        0f32.to_bits(),
        act.code,
        act.a.to_bits(),
        act.b.to_bits(),
    ]);
    gemm_draft(cx, node.inputs[0], node.inputs[1], None, out, m, n, z, p)
}

/// A 1-D operand as a matrix: `[K]` is `[1, K]` on the left, `[K, 1]` on the right.
fn promote(s: &[usize], left: bool) -> Vec<usize> {
    match (s.len(), left) {
        (1, true) => vec![1, s[0]],
        (1, false) => vec![s[0], 1],
        _ => s.to_vec(),
    }
}

pub(super) fn gemm(
    cx: &Context<'_>,
    node: &Node,
    act: Activation,
    out: TensorId,
) -> Lowered<Draft> {
    let a = cx.operand(node.inputs[0], out)?;
    let b = cx.operand(node.inputs[1], out)?;
    if a.len() != 2 || b.len() != 2 {
        return Err(Decline::new(DeclineReason::Shape, "Gemm needs 2-D A and B"));
    }
    let (ta, tb) = (
        node.attr_int("transA", 0) != 0,
        node.attr_int("transB", 0) != 0,
    );
    let (m, k) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
    let n = if tb { b[0] } else { b[1] };
    let (a_rs, a_cs) = if ta { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if tb { (1, k) } else { (n, 1) };
    let alpha = node.attr_float("alpha", 1.0);
    let beta = node.attr_float("beta", 1.0);
    let c = node.inputs.get(2).copied().filter(|_| beta != 0.0);
    let (mut c_rs, mut c_cs) = (0, 0);
    if let Some(t) = c {
        let s = cx.operand(t, out)?;
        if s.len() > 2 {
            return Err(Decline::new(
                DeclineReason::Shape,
                format!("Gemm C has rank {}", s.len()),
            ));
        }
        let mut s2 = vec![1; 2 - s.len()];
        s2.extend_from_slice(&s);
        c_rs = if s2[0] == 1 { 0 } else { s2[1] };
        c_cs = usize::from(s2[1] != 1);
    }
    let mut p = vec![
        m as u32,
        n as u32,
        k as u32,
        0,
        a_rs as u32,
        a_cs as u32,
        0,
        b_rs as u32,
        b_cs as u32,
    ];
    p.extend([
        u32::from(c.is_some()),
        0,
        c_rs as u32,
        c_cs as u32,
        alpha.to_bits(),
        beta.to_bits(),
    ]);
    p.extend([act.code, act.a.to_bits(), act.b.to_bits()]);
    gemm_draft(cx, node.inputs[0], node.inputs[1], c, out, m, n, 1, p)
}

#[allow(clippy::too_many_arguments)]
fn gemm_draft(
    cx: &Context<'_>,
    a: TensorId,
    b: TensorId,
    c: Option<TensorId>,
    out: TensorId,
    m: usize,
    n: usize,
    z: usize,
    params: Vec<u32>,
) -> Lowered<Draft> {
    let tile = cx.tile()?;
    let groups = [
        n.div_ceil(tile as usize) as u64,
        m.div_ceil(tile as usize) as u64,
        z as u64,
    ];
    for (i, g) in groups.iter().enumerate() {
        if *g > u64::from(cx.limits.max_group_count[i]) {
            return Err(Decline::new(
                DeclineReason::Resource,
                format!("matmul needs {g} workgroups on axis {i}, over the device's limit"),
            ));
        }
    }
    Ok(Draft {
        kernel: cx.variant("matmul", "matmul_f16", out),
        spec: tile,
        bindings: [Some(a), Some(b), c, Some(out)],
        extra: [None, None],
        made: Vec::new(),
        params,
        groups: groups.map(|g| g as u32),
    })
}

pub(super) fn conv(
    cx: &Context<'_>,
    node: &Node,
    act: Activation,
    out: TensorId,
) -> Lowered<Draft> {
    conv_with(cx, node, None, act, out)
}

/// A Conv with the BatchNormalization `bn` that alone reads its result folded into its
/// weights and bias: `W'[m] = W[m] s[m]`, `B'[m] = B[m] s[m] + t[m]` with BN's
/// per-channel scale `s` and shift `t` (see `norm.rs`), so the pair is one dispatch; a
/// ConvTranspose likewise (see `resample.rs`, its weights are laid out otherwise).
/// Declines (and the two are then lowered apart) unless the weights, the bias and BN's
/// parameters are constants.
pub fn conv_batch_norm(
    cx: &Context<'_>,
    node: &Node,
    bn: &Node,
    act: Activation,
    out: TensorId,
) -> Lowered<Draft> {
    cx.f32_tensor(out)?;
    if node.op == OpKind::ConvTranspose {
        return super::resample::conv_transpose_batch_norm(cx, node, bn, act, out);
    }
    conv_with(cx, node, Some(bn), act, out)
}

/// The bytes of the constant f32 tensor `t`, which a fold rewrites.
pub(super) fn constant_f32s(cx: &Context<'_>, node: &Node, t: TensorId) -> Lowered<Vec<f32>> {
    let decl = &cx.graph.tensors[t];
    match cx.consts.bytes(t).filter(|_| decl.is_const()) {
        Some(b) if decl.dtype == DType::F32 => Ok(b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()),
        _ => Err(Decline::new(
            DeclineReason::NotConstant,
            format!(
                "{}: '{}' is not a constant f32 tensor, so no BatchNormalization is folded into it",
                node.label(),
                decl.name
            ),
        )),
    }
}

fn conv_with(
    cx: &Context<'_>,
    node: &Node,
    fold: Option<&Node>,
    act: Activation,
    out: TensorId,
) -> Lowered<Draft> {
    // f16 in the f16 variant, every operand like the output; a folded BatchNormalization
    // is f32 only (conv_batch_norm checks).
    let x = cx.operand(node.inputs[0], out)?;
    let w = cx.operand(node.inputs[1], out)?;
    if x.len() != 3 && x.len() != 4 {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "Conv with {} spatial dimensions (1 or 2 supported)",
                x.len().saturating_sub(2)
            ),
        ));
    }
    let bias = node.inputs.get(2).copied();
    if let Some(t) = bias {
        cx.operand(t, out)?;
    }
    let g =
        ConvGeometry::new(node, &x, &w).map_err(|e| Decline::new(DeclineReason::Attribute, e))?;
    let two = |v: &[usize], one: usize| {
        if v.len() == 1 {
            [one, v[0]]
        } else {
            [v[0], v[1]]
        }
    };
    let [h, wd] = two(&g.in_spatial, 1);
    let [oh, ow] = two(&g.out_spatial, 1);
    let [kh, kw] = two(&g.window.kernel, 1);
    let [sh, sw] = two(&g.window.strides, 1);
    let [dh, dw] = two(&g.window.dilations, 1);
    let [ph, pw] = two(&g.window.pad_begin, 0);
    let n = g.batch * g.out_channels * oh * ow;
    let p: Vec<u32> = [
        n,
        g.in_channels,
        h,
        wd,
        g.out_channels,
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
        g.group,
        usize::from(bias.is_some()),
    ]
    .iter()
    .map(|&v| v as u32)
    .chain([act.code, act.a.to_bits(), act.b.to_bits()])
    .collect();
    let Some(bn) = fold else {
        return cx.one_dimensional(
            cx.variant("conv2d", "conv2d_f16", out),
            n,
            [Some(node.inputs[0]), Some(node.inputs[1]), bias, Some(out)],
            p,
        );
    };
    let m = g.out_channels;
    let st = super::norm::batch_norm_affine(cx, bn, m)?;
    let mut weights = constant_f32s(cx, node, node.inputs[1])?;
    let b = match bias {
        Some(t) => constant_f32s(cx, node, t)?,
        None => vec![0.0; m],
    };
    let per = weights.len() / m.max(1);
    for (k, w) in weights.iter_mut().enumerate() {
        *w = (f64::from(*w) * f64::from(st[2 * (k / per)])) as f32;
    }
    let folded_bias: Vec<f32> = (0..m)
        .map(|c| (f64::from(b[c]) * f64::from(st[2 * c]) + f64::from(st[2 * c + 1])) as f32)
        .collect();
    let mut p = p;
    p[16] = 1; // has_bias
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut d = cx.one_dimensional(
        "conv2d",
        n,
        [Some(node.inputs[0]), None, None, Some(out)],
        p,
    )?;
    d.made = vec![(1, bytes(&weights)), (2, bytes(&folded_bias))];
    Ok(d)
}
