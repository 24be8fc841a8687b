//! CumSum, CumProd, Trilu, GatherElements, ScatterElements, GatherND, ScatterND,
//! DepthToSpace and SpaceToDepth against hand-computed values.

use super::*;

fn i64t(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_i64(shape, v)
}

#[test]
fn cumsum_exclusive_and_reverse() {
    let x = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let axis = i64t(&[], &[1]);
    let run_with = |ex: i64, rev: i64| {
        let attrs = [("exclusive", Attr::Int(ex)), ("reverse", Attr::Int(rev))];
        run_f32(&node(OpKind::CumSum, 2, &attrs), &[x.clone(), axis.clone()]).1
    };
    assert_bits(&run_with(0, 0), &[1., 3., 6., 4., 9., 15.]);
    assert_bits(&run_with(1, 0), &[0., 1., 3., 0., 4., 9.]);
    assert_bits(&run_with(0, 1), &[6., 5., 3., 15., 11., 6.]);
    assert_bits(&run_with(1, 1), &[5., 3., 0., 11., 6., 0.]);
    let i = typed(DType::I32, &[3], &[i32::MAX, 1, 1]);
    let r = run(&node(OpKind::CumSum, 2, &[]), &[i, i64t(&[1], &[0])]).unwrap();
    assert_eq!(r.values::<i32>(), &[i32::MAX, i32::MIN, i32::MIN + 1]);
}

#[test]
fn cumprod_multiplies_with_the_cumsum_attributes() {
    let x = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let axis = i64t(&[], &[1]);
    let run_with = |ex: i64, rev: i64| {
        let attrs = [("exclusive", Attr::Int(ex)), ("reverse", Attr::Int(rev))];
        run_f32(
            &node(OpKind::CumProd, 2, &attrs),
            &[x.clone(), axis.clone()],
        )
        .1
    };
    assert_bits(&run_with(0, 0), &[1., 2., 6., 4., 20., 120.]);
    assert_bits(&run_with(1, 0), &[1., 1., 2., 1., 4., 20.]);
    assert_bits(&run_with(0, 1), &[6., 6., 3., 120., 30., 6.]);
    let i = typed(DType::I32, &[3], &[65536i32, 65536, 3]);
    let r = run(&node(OpKind::CumProd, 2, &[]), &[i, i64t(&[1], &[0])]).unwrap();
    assert_eq!(r.values::<i32>(), &[65536, 0, 0]);
}

#[test]
fn trilu_keeps_a_triangle_from_the_kth_diagonal() {
    let x = f32t(&[3, 3], &iota(9));
    let upper = run_f32(&node(OpKind::Trilu, 1, &[]), std::slice::from_ref(&x)).1;
    assert_bits(&upper, &[1., 2., 3., 0., 5., 6., 0., 0., 9.]);
    let lower = [("upper", Attr::Int(0))];
    let r = run_f32(&node(OpKind::Trilu, 2, &lower), &[x, i64t(&[], &[-1])]).1;
    assert_bits(&r, &[0., 0., 0., 4., 0., 0., 7., 8., 0.]);
}

#[test]
fn gather_and_scatter_elements() {
    let data = f32t(&[2, 2], &[1., 2., 3., 4.]);
    let idx = i64t(&[2, 2], &[0, 0, 1, -2]);
    let axis1 = [("axis", Attr::Int(1))];
    let g = run_f32(
        &node(OpKind::GatherElements, 2, &axis1),
        &[data.clone(), idx.clone()],
    );
    assert_eq!(g.0, [2, 2]);
    assert_bits(&g.1, &[1., 1., 4., 3.]);
    let upd = f32t(&[2, 2], &[10., 20., 30., 40.]);
    let add = [
        ("axis", Attr::Int(1)),
        ("reduction", Attr::Str("add".into())),
    ];
    let s = run_f32(
        &node(OpKind::ScatterElements, 3, &add),
        &[data.clone(), idx.clone(), upd.clone()],
    )
    .1;
    assert_bits(&s, &[31., 2., 43., 34.]);
    let none = run_f32(
        &node(OpKind::ScatterElements, 3, &axis1),
        &[data.clone(), idx, upd.clone()],
    )
    .1;
    // Without a reduction a repeated index keeps the last update.
    assert_bits(&none, &[20., 2., 40., 30.]);
    let bad = i64t(&[2, 2], &[0, 2, 0, 0]);
    let err = run(&node(OpKind::GatherElements, 2, &axis1), &[data, bad]).unwrap_err();
    assert!(matches!(err, KernelError::Arithmetic { .. }), "{err}");
}

#[test]
fn gather_and_scatter_nd() {
    let data = f32t(&[2, 2], &[1., 2., 3., 4.]);
    let tuples = i64t(&[2, 2], &[0, 1, 1, 0]);
    let g = run_f32(
        &node(OpKind::GatherND, 2, &[]),
        &[data.clone(), tuples.clone()],
    );
    assert_eq!(g.0, [2]);
    assert_bits(&g.1, &[2., 3.]);
    let rows = i64t(&[1, 1], &[1]);
    let g = run_f32(&node(OpKind::GatherND, 2, &[]), &[data.clone(), rows]);
    assert_eq!(g.0, [1, 2]);
    assert_bits(&g.1, &[3., 4.]);
    // batch_dims 1: each batch row picks its own element.
    let per_row = i64t(&[2, 1], &[1, 0]);
    let b1 = [("batch_dims", Attr::Int(1))];
    let g = run_f32(&node(OpKind::GatherND, 2, &b1), &[data.clone(), per_row]);
    assert_bits(&g.1, &[2., 3.]);
    let upd = f32t(&[2], &[10., 20.]);
    let mul = [("reduction", Attr::Str("mul".into()))];
    let s = run_f32(&node(OpKind::ScatterND, 3, &mul), &[data, tuples, upd]).1;
    assert_bits(&s, &[1., 20., 60., 4.]);
}

#[test]
fn depth_to_space_modes_and_its_inverse() {
    // [1, 4, 1, 2]: channel c, column w holds 10 c + w.
    let x = f32t(&[1, 4, 1, 2], &[0., 1., 10., 11., 20., 21., 30., 31.]);
    let dcr = [("blocksize", Attr::Int(2))];
    let d = run_f32(
        &node(OpKind::DepthToSpace, 1, &dcr),
        std::slice::from_ref(&x),
    );
    assert_eq!(d.0, [1, 1, 2, 4]);
    assert_bits(&d.1, &[0., 10., 1., 11., 20., 30., 21., 31.]);
    let crd = [
        ("blocksize", Attr::Int(2)),
        ("mode", Attr::Str("CRD".into())),
    ];
    let c = run_f32(
        &node(OpKind::DepthToSpace, 1, &crd),
        std::slice::from_ref(&x),
    );
    assert_bits(&c.1, &[0., 10., 1., 11., 20., 30., 21., 31.]);
    let back = f32t(&[1, 1, 2, 4], &d.1);
    let s = run_f32(&node(OpKind::SpaceToDepth, 1, &dcr), &[back]);
    assert_eq!(s.0, [1, 4, 1, 2]);
    assert_bits(&s.1, x.f32s());
}
