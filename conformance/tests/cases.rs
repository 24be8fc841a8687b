//! The catalogue: coverage, stable ids, determinism, selection and sharding.

use baton_conformance::cases::{self, parse_ops, select, CaseBody, Shard};
use baton_delegate_api::{DType, OpKind};

#[test]
fn every_op_has_cases_and_the_catalogue_is_large() {
    let all = cases::all().expect("catalogue builds");
    assert!(all.len() >= 400, "only {} cases", all.len());
    for &op in OpKind::ALL {
        if op.is_control_flow() {
            // Never sent to a plugin, so nothing for the kit to judge: the host runs it
            // (the ONNX node suite and the host's tests cover it).
            assert_eq!(all.iter().filter(|c| c.op == op.name()).count(), 0);
            continue;
        }
        let n = all.iter().filter(|c| c.op == op.name()).count();
        assert!(n >= 5, "{op}: only {n} cases");
        assert!(
            all.iter()
                .any(|c| c.op == op.name() && c.dtype == Some(DType::F32)),
            "{op} has no f32 case"
        );
    }
    for op in [
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Relu",
        "Clip",
        "Reshape",
        "Transpose",
        "Concat",
        "Flatten",
    ] {
        for dtype in [DType::I32, DType::I64] {
            assert!(
                all.iter().any(|c| c.op == op && c.dtype == Some(dtype)),
                "{op} has no {dtype} case"
            );
        }
    }
    assert!(all.iter().filter(|c| c.dtype == Some(DType::F16)).count() >= 8);
    let models: Vec<&str> = all
        .iter()
        .filter(|c| c.op == "Model")
        .map(|c| c.id.as_str())
        .collect();
    for m in [
        "small_cnn",
        "mlp",
        "residual_block",
        "transpose_reshape_concat_chain",
    ] {
        assert!(
            models.iter().any(|id| id.ends_with(m)),
            "no model {m}: {models:?}"
        );
    }
}

#[test]
fn ids_are_unique_and_well_formed() {
    let all = cases::catalogue(true).unwrap();
    let mut ids: Vec<&str> = all.iter().map(|c| c.id.as_str()).collect();
    for c in &all {
        let parts: Vec<&str> = c.id.split('/').collect();
        assert_eq!(parts[0], c.op, "{}", c.id);
        match c.dtype {
            Some(_) => assert_eq!(parts.len(), 3, "{}", c.id),
            None => assert_eq!(parts.len(), 2, "{}", c.id),
        }
        if let Some(d) = c.dtype {
            assert_eq!(parts[1], d.name(), "{}", c.id);
        }
        assert!(
            c.id.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "/_.".contains(ch)),
            "{} has characters that do not diff or filter well",
            c.id
        );
    }
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate ids");
}

#[test]
fn generation_is_deterministic() {
    let a = cases::all().unwrap();
    let b = cases::all().unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.id, y.id);
        let (gx, ix) = x.graph().unwrap();
        let (gy, iy) = y.graph().unwrap();
        assert_eq!(gx, gy, "{}", x.id);
        for (tx, ty) in ix.iter().zip(iy) {
            assert_eq!(tx.bytes(), ty.bytes(), "{}", x.id);
        }
    }
}

#[test]
fn inputs_fit_the_graph_and_special_values_are_present() {
    let all = cases::all().unwrap();
    let mut saw_nan = false;
    let mut saw_neg_zero = false;
    let mut saw_empty = false;
    let mut saw_rank0 = false;
    for c in &all {
        let (g, inputs) = c.graph().unwrap();
        assert_eq!(g.inputs.len(), inputs.len(), "{}", c.id);
        for (&t, v) in g.inputs.iter().zip(inputs) {
            assert_eq!(g.tensors[t].static_shape().unwrap(), v.shape, "{}", c.id);
            assert_eq!(g.tensors[t].dtype, v.dtype, "{}", c.id);
            saw_empty |= v.is_empty();
            saw_rank0 |= v.shape.is_empty();
            if v.dtype == DType::F32 {
                saw_nan |= v.f32s().iter().any(|x| x.is_nan());
                saw_neg_zero |= v.f32s().iter().any(|x| *x == 0.0 && x.is_sign_negative());
            }
        }
        if let CaseBody::Op { graph, .. } = &c.body {
            assert_eq!(graph.nodes.len(), 1, "{}", c.id);
        }
    }
    assert!(saw_nan && saw_neg_zero && saw_empty && saw_rank0);
}

#[test]
fn shards_partition_the_selection_exactly() {
    let n_all = cases::catalogue(true).unwrap().len();
    for n in [1, 2, 3, 7, 16] {
        let mut seen: Vec<String> = Vec::new();
        for i in 1..=n {
            let shard = Shard { index: i, count: n };
            let part = select(cases::catalogue(true).unwrap(), None, Some(shard));
            assert!(part.len() >= n_all / n && part.len() <= n_all.div_ceil(n));
            seen.extend(part.into_iter().map(|c| c.id));
        }
        assert_eq!(seen.len(), n_all, "n = {n}: shards overlap or miss cases");
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n_all, "n = {n}: a case is in two shards");
    }
}

#[test]
fn ops_filter_and_shard_parsing() {
    let ops = parse_ops("Conv, Add,Model").unwrap();
    let sel = select(cases::all().unwrap(), Some(&ops), None);
    assert!(sel
        .iter()
        .all(|c| ["Conv", "Add", "Model"].contains(&c.op.as_str())));
    assert!(sel.iter().any(|c| c.op == "Model"));
    assert!(parse_ops("Conv,Nope").is_err());
    assert!(parse_ops("").is_err());
    assert_eq!(
        "2/5".parse::<Shard>().unwrap(),
        Shard { index: 2, count: 5 }
    );
    for bad in ["0/5", "6/5", "1/0", "x/2", "3"] {
        assert!(bad.parse::<Shard>().is_err(), "{bad}");
    }
}
