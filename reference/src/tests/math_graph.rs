//! The math family's shape rules (through `infer_outputs` and `GraphBuilder`), its
//! `supports` answers, and a small graph mixing its ops on `run_graph`.

use baton_delegate_api::ir::{GraphBuilder, Node};
use baton_delegate_api::shape::infer_outputs;
use baton_delegate_api::TensorData;

use super::super::{run_graph, supports};
use super::*;

fn infer(
    op: OpKind,
    attrs: &[(&str, Attr)],
    inputs: &[(DType, &[usize])],
    operand: Option<Vec<i64>>,
) -> Result<Vec<(DType, Vec<usize>)>, String> {
    let n: Node = node(op, inputs.len(), attrs);
    let typed: Vec<(DType, Vec<usize>)> = inputs.iter().map(|(d, s)| (*d, s.to_vec())).collect();
    infer_outputs(&n, &typed, |i| if i == 1 { operand.clone() } else { None })
}

#[test]
fn shape_rules_give_dtypes_and_shapes() {
    use DType::*;
    let f = |d: DType, s: &[usize]| (d, s.to_vec());
    assert_eq!(
        infer(OpKind::Greater, &[], &[(F16, &[2, 1]), (F16, &[3])], None),
        Ok(vec![f(Bool, &[2, 3])])
    );
    assert_eq!(
        infer(OpKind::Pow, &[], &[(F32, &[4]), (I64, &[])], None),
        Ok(vec![f(F32, &[4])])
    );
    assert_eq!(
        infer(
            OpKind::Where,
            &[],
            &[(Bool, &[2, 1, 1]), (I8, &[3, 1]), (I8, &[4])],
            None
        ),
        Ok(vec![f(I8, &[2, 3, 4])])
    );
    for (code, dtype) in [
        (1, F32),
        (10, F16),
        (3, I8),
        (2, U8),
        (6, I32),
        (7, I64),
        (9, Bool),
    ] {
        let to = [("to", Attr::Int(code))];
        assert_eq!(
            infer(OpKind::Cast, &to, &[(F32, &[2])], None),
            Ok(vec![f(dtype, &[2])])
        );
    }
    // LayerNormalization: Y, then f32 Mean and InvStdDev with the normalized axes as 1.
    assert_eq!(
        infer(
            OpKind::LayerNormalization,
            &[("axis", Attr::Int(1))],
            &[(F16, &[2, 3, 4]), (F16, &[3, 4])],
            None
        ),
        Ok(vec![
            f(F16, &[2, 3, 4]),
            f(F32, &[2, 1, 1]),
            f(F32, &[2, 1, 1])
        ])
    );
    assert_eq!(
        infer(
            OpKind::BatchNormalization,
            &[],
            &[
                (F32, &[2, 3, 5]),
                (F32, &[3]),
                (F32, &[3]),
                (F32, &[3]),
                (F32, &[3])
            ],
            None
        ),
        Ok(vec![f(F32, &[2, 3, 5])])
    );
    let keep0 = [("keepdims", Attr::Int(0))];
    assert_eq!(
        infer(
            OpKind::ReduceMean,
            &keep0,
            &[(I32, &[2, 3, 4]), (I64, &[2])],
            Some(vec![-1, 0])
        ),
        Ok(vec![f(I32, &[3])])
    );
}

#[test]
fn shape_rules_reject_what_they_cannot_type() {
    use DType::*;
    let err = |r: Result<Vec<(DType, Vec<usize>)>, String>| r.unwrap_err();
    // Axes given as a run-time input, not a constant (what the host sees).
    let e = err(infer(
        OpKind::ReduceSum,
        &[],
        &[(F32, &[2, 3]), (I64, &[1])],
        None,
    ));
    assert!(e.contains("constant"), "{e}");
    let e = err(infer(
        OpKind::Cast,
        &[("to", Attr::Int(14))],
        &[(F32, &[2])],
        None,
    ));
    // 14 is COMPLEX64, which the IR does not have.
    assert!(e.contains("data type 14"), "{e}");
    let e = err(infer(OpKind::Equal, &[], &[(F32, &[2]), (I32, &[2])], None));
    assert!(e.contains("differ"), "{e}");
    let e = err(infer(OpKind::And, &[], &[(Bool, &[2]), (U8, &[2])], None));
    assert!(e.contains("bool"), "{e}");
    let e = err(infer(
        OpKind::Where,
        &[],
        &[(Bool, &[2]), (F32, &[2]), (F32, &[3])],
        None,
    ));
    assert!(e.contains("broadcast"), "{e}");
    let e = err(infer(
        OpKind::LogSoftmax,
        &[("axis", Attr::Int(1))],
        &[(F32, &[3])],
        None,
    ));
    assert!(e.contains("axis"), "{e}");
}

#[test]
fn graph_builder_takes_all_three_layer_norm_outputs() {
    let mut g = GraphBuilder::new("ln");
    let x = g.input_fixed("x", DType::F32, &[2, 5]);
    let s = g.constant_f32("s", &[5], &[1.; 5]);
    let outs = g
        .named_node_outputs("ln", OpKind::LayerNormalization, &[x, s], &[], 3)
        .unwrap();
    let graph = g.finish().unwrap();
    let t = |i: usize| &graph.tensors[outs[i]];
    assert_eq!(t(1).dtype, DType::F32);
    assert_eq!(t(2).static_shape(), Some(vec![2, 1]));
    assert_eq!(t(2).name, "ln_out2");
}

#[test]
fn supports_answers_per_operand() {
    use DType::*;
    let ok = |op, d: &[DType]| supports(op, d).is_ok();
    assert!(ok(OpKind::Pow, &[F32, I64]) && ok(OpKind::Pow, &[F16, U8]));
    assert!(ok(OpKind::Pow, &[I32, F32]) && ok(OpKind::Pow, &[I64, U64]));
    assert!(!ok(OpKind::Pow, &[U8, U8]) && !ok(OpKind::Pow, &[F32, Bool]));
    assert!(ok(OpKind::Abs, &[U8]) && !ok(OpKind::Neg, &[U8]));
    assert!(ok(OpKind::Abs, &[U64]) && !ok(OpKind::Neg, &[U16]));
    assert!(ok(OpKind::Neg, &[I16]) && ok(OpKind::Neg, &[F64]) && ok(OpKind::Sqrt, &[BF16]));
    assert!(ok(OpKind::Equal, &[Bool, Bool]) && !ok(OpKind::Greater, &[Bool, Bool]));
    assert!(ok(OpKind::Greater, &[U32, U32]) && ok(OpKind::Less, &[F8E5M2, F8E5M2]));
    assert!(!ok(OpKind::Less, &[F32, F16]));
    assert!(ok(OpKind::Where, &[Bool, U8, U8]) && !ok(OpKind::Where, &[U8, U8, U8]));
    for &d in &DType::ALL {
        assert!(ok(OpKind::Cast, &[d]), "{d}");
        assert!(ok(OpKind::Where, &[Bool, d, d]), "{d}");
        assert!(
            ok(OpKind::CastLike, &[F32, d]) && ok(OpKind::CastLike, &[d, F16]),
            "{d}"
        );
    }
    assert!(ok(OpKind::BatchNormalization, &[F16, F32, F32, F16, F16]));
    assert!(!ok(OpKind::BatchNormalization, &[F32; 4]));
    assert!(ok(OpKind::LayerNormalization, &[F16, F16]));
    assert!(!ok(OpKind::LayerNormalization, &[F32, F32, F16]));
    assert!(ok(OpKind::ReduceMax, &[I32, I64]) && !ok(OpKind::ReduceMax, &[I32, I32]));
    assert!(ok(OpKind::ReduceMax, &[Bool]) && !ok(OpKind::ReduceSum, &[Bool]));
    assert!(!ok(OpKind::ReduceSum, &[U8]) && !ok(OpKind::ReduceSum, &[F32, I64, I64]));
    assert!(!ok(OpKind::Not, &[]) && !ok(OpKind::Sqrt, &[F32, F32]));
    let msg = supports(OpKind::Gelu, &[I8]).unwrap_err();
    assert!(msg.contains("Gelu on i8"), "{msg}");
    let msg = supports(OpKind::Equal, &[I32, I64]).unwrap_err();
    assert!(msg.contains("operand 1 is i64"), "{msg}");
}

#[test]
fn run_graph_mixes_the_math_ops() {
    let mut g = GraphBuilder::new("math_mix");
    let x = g.input_fixed("x", DType::F32, &[2, 3]);
    let ones = g.constant_f32("ones", &[3], &[1.; 3]);
    let eps0 = [("epsilon", Attr::Float(0.))];
    let ln = g
        .named_node_outputs("ln", OpKind::LayerNormalization, &[x, ones], &eps0, 3)
        .unwrap();
    let (y, mean, inv) = (ln[0], ln[1], ln[2]);
    let below = g.node(OpKind::Less, &[x, mean], &[]).unwrap();
    let neg = g.node(OpKind::Neg, &[x], &[]).unwrap();
    let w = g.node(OpKind::Where, &[below, neg, y], &[]).unwrap();
    let axes = g.constant_i64("axes", &[1], &[1]);
    let r = g
        .node(OpKind::ReduceSum, &[w, axes], &[("keepdims", Attr::Int(0))])
        .unwrap();
    let zero = g.constant_f32("zero", &[], &[0.]);
    let pos = g.node(OpKind::Greater, &[r, zero], &[]).unwrap();
    let as_i64 = g
        .node(OpKind::Cast, &[pos], &[("to", Attr::Int(7))])
        .unwrap();
    let two = g.constant("two", DType::I64, &[], TensorData::from_slice(&[2i64]));
    let var = g.node(OpKind::Pow, &[inv, two], &[]).unwrap();
    let not_pos = g.node(OpKind::Not, &[pos], &[]).unwrap();
    let neg_r = g.node(OpKind::Less, &[r, zero], &[]).unwrap();
    let both = g.node(OpKind::And, &[not_pos, neg_r], &[]).unwrap();
    for t in [r, as_i64, var, both] {
        g.output(t);
    }
    let graph = g.finish().unwrap();

    let x = f32t(&[2, 3], &[1., 2., 3., 2., 4., 6.]);
    let outs = run_graph(&graph, &[x]).unwrap();
    // Rows normalize to [-a, 0, a] (a = sqrt 1.5, stored as the f32 1.2247449) with means
    // 2 and 4; only the first element of each row is below its mean, so it is replaced by
    // -x: the row sums are -1 + a and -2 + a, exact in f64 and then rounded.
    assert_eq!(outs[0].shape, vec![2]);
    assert_bits(outs[0].f32s(), &[0.224_744_92, -0.775_255_1]);
    assert_eq!(outs[1].values::<i64>(), &[1, 0]);
    // InvStdDev squared: 1 / var = 1.5 and 0.375, but from the f32 values 1.2247449 and
    // 0.61237246 the squares round to 1.5000001 and 0.37500003.
    assert_eq!(outs[2].shape, vec![2, 1]);
    assert_bits(outs[2].f32s(), &[1.500_000_1, 0.375_000_03]);
    assert_eq!(outs[3].dtype, DType::Bool);
    assert_eq!(outs[3].values::<u8>(), &[0, 1]);
}

/// The family's ops with attribute values valid and not, on operands of many shapes and
/// dtypes (the i64 axes operand of the Reduce ops included): errors, never panics.
#[test]
fn math_ops_never_panic() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let attr_sets: Vec<Vec<(&str, Attr)>> = vec![
        vec![],
        vec![("axis", Attr::Int(-1)), ("keepdims", Attr::Int(0))],
        vec![("axis", Attr::Int(7)), ("epsilon", Attr::Float(-1.))],
        vec![
            ("axes", ints(&[0, -1])),
            ("noop_with_empty_axes", Attr::Int(1)),
        ],
        vec![("axes", ints(&[5]))],
        vec![("to", Attr::Int(7))],
        vec![("to", Attr::Int(-3))],
        vec![
            ("approximate", Attr::Str("tanh".into())),
            ("alpha", Attr::Str("x".into())),
        ],
        vec![("training_mode", Attr::Int(1))],
    ];
    let shapes: [&[usize]; 7] = [&[], &[0], &[1], &[3], &[2, 3], &[2, 0, 3], &[1, 3, 1]];
    let ops = OpKind::ALL.iter().copied().filter(|op| {
        let code = op.code();
        (20..=43).contains(&code)
    });
    let (mut ran, mut succeeded) = (0, 0);
    for op in ops {
        for attrs in &attr_sets {
            for n_inputs in 1..=5 {
                for (k, dtype) in DType::ALL.into_iter().enumerate() {
                    for (s, &shape) in shapes.iter().enumerate() {
                        let inputs: Vec<Tensor> = (0..n_inputs)
                            .map(|i| {
                                // Operand 1 of a Reduce op as i64 axes; others vary shape
                                // and (for Where's condition) dtype.
                                let reduce = matches!(
                                    op,
                                    OpKind::ReduceMean | OpKind::ReduceSum | OpKind::ReduceMax
                                );
                                if reduce && i == 1 {
                                    return Tensor::from_i64(&[s % 3], &[1, -1, 0][..s % 3]);
                                }
                                let d = if op == OpKind::Where && i == 0 {
                                    DType::Bool
                                } else {
                                    dtype
                                };
                                let sh = shapes[(s + i * k) % shapes.len()];
                                let mut t = Tensor::zeros(d, if i == 0 { shape } else { sh });
                                for b in t.data.as_mut_slice().iter_mut().step_by(d.size()) {
                                    *b = 1;
                                }
                                t
                            })
                            .collect();
                        let n = node(op, n_inputs, attrs);
                        match catch_unwind(AssertUnwindSafe(|| run(&n, &inputs))) {
                            Ok(r) => succeeded += r.is_ok() as usize,
                            Err(_) => panic!("{op} {attrs:?} {inputs:?} panicked"),
                        }
                        ran += 1;
                    }
                }
            }
        }
    }
    assert!(
        ran > 30_000 && succeeded > 2_000,
        "ran {ran}, succeeded {succeeded}"
    );
}
