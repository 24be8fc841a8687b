//! NonMaxSuppression, Unique and Compress, whose output extents depend on the values,
//! against hand-computed values.

use super::*;

/// Runs `node` with every output it declares, shaped as the values give.
fn run_all(node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    check_operands(node, &views)?;
    let expected = expected_outputs(node, &views)?;
    let mut outs: Vec<Tensor> = expected
        .iter()
        .take(node.outputs.len())
        .map(|(d, s)| Tensor::zeros(*d, s))
        .collect();
    let mut muts: Vec<_> = outs.iter_mut().map(Tensor::view_mut).collect();
    run_node(node, &views, &mut muts)?;
    drop(muts);
    Ok(outs)
}

fn with_outputs(mut n: Node, count: usize) -> Node {
    let first = n.outputs[0];
    n.outputs = (first..first + count).collect();
    n
}

fn i64s(t: &Tensor) -> Vec<i64> {
    t.values::<i64>().to_vec()
}

fn nms_inputs(max: i64, iou: f32, score: Option<f32>) -> Vec<Tensor> {
    // Box 1 overlaps box 0 by IoU 0.81 (0.9 / 1.1); box 2 is apart; box 3 has no area.
    let boxes = f32t(
        &[1, 4, 4],
        &[
            0., 0., 1., 1., //
            0., 0.1, 1., 1.1, //
            0., 10., 1., 11., //
            5., 5., 5., 6.,
        ],
    );
    let scores = f32t(&[1, 2, 4], &[0.9, 0.95, 0.3, 0.5, 0.1, 0.2, 0.8, 0.7]);
    let mut v = vec![
        boxes,
        scores,
        Tensor::from_i64(&[1], &[max]),
        f32t(&[1], &[iou]),
    ];
    if let Some(s) = score {
        v.push(f32t(&[1], &[s]));
    }
    v
}

#[test]
fn nms_keeps_the_best_of_overlapping_boxes_per_class() {
    let n = node(OpKind::NonMaxSuppression, 5, &[]);
    let r = run_all(&n, &nms_inputs(10, 0.5, Some(0.0))).unwrap();
    // Class 0 in score order 1, 0, 3, 2: box 1 drops box 0 (IoU 0.82); box 3 has no area.
    // Class 1 in order 2, 3, 1, 0: box 1 drops box 0.
    assert_eq!(r[0].shape, [6, 3]);
    assert_eq!(
        i64s(&r[0]),
        [0, 0, 1, 0, 0, 3, 0, 0, 2, 0, 1, 2, 0, 1, 3, 0, 1, 1]
    );
    // At most two per class.
    let r = run_all(&n, &nms_inputs(2, 0.5, Some(0.0))).unwrap();
    assert_eq!(i64s(&r[0]), [0, 0, 1, 0, 0, 3, 0, 1, 2, 0, 1, 3]);
    // Scores must exceed the threshold (0.5 itself does not).
    let r = run_all(&n, &nms_inputs(10, 0.5, Some(0.5))).unwrap();
    assert_eq!(i64s(&r[0]), [0, 0, 1, 0, 1, 2, 0, 1, 3]);
    // An overlap of 0.82 is kept under a threshold of 0.9.
    let n4 = node(OpKind::NonMaxSuppression, 4, &[]);
    let r = run_all(&n4, &nms_inputs(10, 0.9, None)).unwrap();
    assert_eq!(r[0].shape, [8, 3]);
    assert_eq!(&i64s(&r[0])[..12], [0, 0, 1, 0, 0, 0, 0, 0, 3, 0, 0, 2]);
}

#[test]
fn nms_without_a_maximum_selects_nothing_and_reads_center_boxes() {
    let inputs = nms_inputs(10, 0.5, None);
    let n = node(OpKind::NonMaxSuppression, 2, &[]);
    let r = run_all(&n, &inputs[..2]).unwrap();
    assert_eq!(r[0].shape, [0, 3]);
    // Centre form: the second box is the first moved 0.1 down (IoU 0.82).
    let boxes = f32t(&[1, 2, 4], &[0.5, 0.5, 1., 1., 0.5, 0.6, 1., 1.]);
    let scores = f32t(&[1, 1, 2], &[0.8, 0.9]);
    let attrs = [("center_point_box", Attr::Int(1))];
    let n = node(OpKind::NonMaxSuppression, 4, &attrs);
    let ins = [
        boxes,
        scores,
        Tensor::from_i64(&[], &[5]),
        f32t(&[], &[0.5]),
    ];
    let r = run_all(&n, &ins).unwrap();
    assert_eq!(i64s(&r[0]), [0, 0, 1]);
    let bad = node(
        OpKind::NonMaxSuppression,
        4,
        &[("center_point_box", Attr::Int(2))],
    );
    assert!(run_all(&bad, &ins).is_err());
    // Scores of another box count are refused, not read out of bounds.
    let short = [ins[0].clone(), f32t(&[1, 1, 3], &[0.1, 0.2, 0.3])];
    assert!(run_all(&node(OpKind::NonMaxSuppression, 2, &[]), &short).is_err());
}

#[test]
fn unique_flattened_sorted_and_in_first_occurrence_order() {
    let x = f32t(&[2, 3], &[2., 1., 1., 3., 4., 3.]);
    let sorted = with_outputs(node(OpKind::Unique, 1, &[]), 4);
    let r = run_all(&sorted, std::slice::from_ref(&x)).unwrap();
    assert_eq!(r[0].shape, [4]);
    assert_eq!(r[0].f32s(), [1., 2., 3., 4.]);
    assert_eq!(i64s(&r[1]), [1, 0, 3, 4]);
    assert_eq!(i64s(&r[2]), [1, 0, 0, 2, 3, 2]);
    assert_eq!(i64s(&r[3]), [2, 1, 2, 1]);
    let first = with_outputs(node(OpKind::Unique, 1, &[("sorted", Attr::Int(0))]), 4);
    let r = run_all(&first, &[x]).unwrap();
    assert_eq!(r[0].f32s(), [2., 1., 3., 4.]);
    assert_eq!(i64s(&r[1]), [0, 1, 3, 4]);
    assert_eq!(i64s(&r[2]), [0, 1, 1, 2, 3, 2]);
    assert_eq!(i64s(&r[3]), [1, 2, 2, 1]);
    // Integers compare exactly beyond 2^53.
    let big = Tensor::from_i64(&[3], &[(1 << 60) + 1, 1 << 60, (1 << 60) + 1]);
    let r = run_all(&sorted, &[big]).unwrap();
    assert_eq!(i64s(&r[0]), [1 << 60, (1 << 60) + 1]);
}

#[test]
fn unique_slices_along_an_axis() {
    // Rows [1 0], [1 0], [0 1] of a 3x2 matrix, compared lexicographically.
    let x = Tensor::from_i64(&[3, 2], &[1, 0, 1, 0, 0, 1]);
    let n = with_outputs(node(OpKind::Unique, 1, &[("axis", Attr::Int(0))]), 4);
    let r = run_all(&n, std::slice::from_ref(&x)).unwrap();
    assert_eq!(r[0].shape, [2, 2]);
    assert_eq!(i64s(&r[0]), [0, 1, 1, 0]);
    assert_eq!(i64s(&r[1]), [2, 0]);
    assert_eq!(i64s(&r[2]), [1, 1, 0]);
    assert_eq!(i64s(&r[3]), [1, 2]);
    // Columns (axis -1): [1 1 0] and [0 0 1].
    let n = with_outputs(node(OpKind::Unique, 1, &[("axis", Attr::Int(-1))]), 1);
    let r = run_all(&n, &[x]).unwrap();
    assert_eq!(r[0].shape, [3, 2]);
    assert_eq!(i64s(&r[0]), [0, 1, 0, 1, 1, 0]);
}

#[test]
fn compress_along_an_axis_and_flattened() {
    let x = f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let cond = typed(DType::Bool, &[2], &[0u8, 1]);
    let n = node(OpKind::Compress, 2, &[("axis", Attr::Int(0))]);
    let (shape, v) = run_f32(&n, &[x.clone(), cond.clone()]);
    assert_eq!((shape, v), (vec![1, 2], vec![3., 4.]));
    let n = node(OpKind::Compress, 2, &[("axis", Attr::Int(-1))]);
    let (shape, v) = run_f32(&n, &[x.clone(), cond.clone()]);
    assert_eq!((shape, v), (vec![3, 1], vec![2., 4., 6.]));
    let flat = typed(DType::Bool, &[5], &[1u8, 0, 0, 1, 1]);
    let (shape, v) = run_f32(&node(OpKind::Compress, 2, &[]), &[x.clone(), flat]);
    assert_eq!((shape, v), (vec![3], vec![1., 4., 5.]));
    // A condition longer than the axis is an error.
    let long = typed(DType::Bool, &[4], &[1u8, 1, 1, 1]);
    let n = node(OpKind::Compress, 2, &[("axis", Attr::Int(0))]);
    assert!(run(&n, &[x, long]).is_err());
}
