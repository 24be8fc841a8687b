use super::*;

fn x4x4() -> Tensor {
    f32t(&[1, 1, 4, 4], &iota(16))
}

fn pool(op: OpKind, attrs: &[(&str, Attr)]) -> Node {
    node(op, 1, attrs)
}

#[test]
fn max_pool_basic_and_dilated() {
    let n = pool(
        OpKind::MaxPool,
        &[("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
    );
    let (shape, got) = run_f32(&n, &[x4x4()]);
    assert_eq!(shape, vec![1, 1, 2, 2]);
    assert_bits(&got, &[6., 8., 14., 16.]);
    // Dilation 2: max of x[i][j], x[i][j+2], x[i+2][j], x[i+2][j+2] = x[i+2][j+2].
    let n = pool(
        OpKind::MaxPool,
        &[
            ("kernel_shape", ints(&[2, 2])),
            ("dilations", ints(&[2, 2])),
        ],
    );
    let (shape, got) = run_f32(&n, &[x4x4()]);
    assert_eq!(shape, vec![1, 1, 2, 2]);
    assert_bits(&got, &[11., 12., 15., 16.]);
}

#[test]
fn max_pool_ignores_padding() {
    // All values negative: a zero from the padding would win if padding counted.
    let neg: Vec<f32> = iota(16).iter().map(|v| -v).collect();
    let n = pool(
        OpKind::MaxPool,
        &[
            ("kernel_shape", ints(&[3, 3])),
            ("pads", ints(&[1, 1, 1, 1])),
            ("strides", ints(&[2, 2])),
        ],
    );
    let (_, got) = run_f32(&n, &[f32t(&[1, 1, 4, 4], &neg)]);
    assert_bits(&got, &[-1., -2., -5., -6.]);
    // A window wholly in the padding gives -inf.
    let n = pool(
        OpKind::MaxPool,
        &[("kernel_shape", ints(&[1])), ("pads", ints(&[1, 0]))],
    );
    let (_, got) = run_f32(&n, &[f32t(&[1, 1, 2], &[-3., 4.])]);
    assert_bits(&got, &[f32::NEG_INFINITY, -3., 4.]);
}

#[test]
fn max_pool_ceil_mode_and_nan() {
    let x = f32t(&[1, 1, 5], &[1., 5., 2., 4., 3.]);
    let floor = pool(
        OpKind::MaxPool,
        &[("kernel_shape", ints(&[2])), ("strides", ints(&[2]))],
    );
    let (shape, got) = run_f32(&floor, std::slice::from_ref(&x));
    assert_eq!(shape, vec![1, 1, 2]);
    assert_bits(&got, &[5., 4.]);
    let ceil = pool(
        OpKind::MaxPool,
        &[
            ("kernel_shape", ints(&[2])),
            ("strides", ints(&[2])),
            ("ceil_mode", Attr::Int(1)),
        ],
    );
    let (shape, got) = run_f32(&ceil, &[x]);
    assert_eq!(shape, vec![1, 1, 3]);
    assert_bits(&got, &[5., 4., 3.]);
    // NaN first in a window wins; NaN later is skipped (`>` comparison).
    let nan = f32::NAN;
    let (_, got) = run_f32(&floor, &[f32t(&[1, 1, 4], &[nan, 1., 1., nan])]);
    assert_bits(&got, &[nan, 1.]);
}

#[test]
fn average_pool_count_include_pad() {
    let attrs = |include: i64| {
        pool(
            OpKind::AveragePool,
            &[
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 1, 1, 1])),
                ("strides", ints(&[2, 2])),
                ("count_include_pad", Attr::Int(include)),
            ],
        )
    };
    // Window sums 14, 30, 57, 99 over 4, 6, 6, 9 in-bounds elements.
    let (shape, got) = run_f32(&attrs(0), &[x4x4()]);
    assert_eq!(shape, vec![1, 1, 2, 2]);
    assert_bits(&got, &[3.5, 5., 9.5, 11.]);
    let (_, got) = run_f32(&attrs(1), &[x4x4()]);
    assert_bits(
        &got,
        &[
            (14.0f64 / 9.) as f32,
            (30.0f64 / 9.) as f32,
            (57.0f64 / 9.) as f32,
            11.,
        ],
    );
}

#[test]
fn average_pool_ceil_mode_clips_at_padded_border() {
    // Length 4, kernel 3, stride 2, pads [1,1], ceil_mode: windows start at -1, 1, 3.
    // The last covers x[3], the end padding (position 4) and position 5, past the padded
    // border, which never counts.
    let x = f32t(&[1, 1, 4], &[1., 2., 3., 4.]);
    let n = |include: i64| {
        pool(
            OpKind::AveragePool,
            &[
                ("kernel_shape", ints(&[3])),
                ("strides", ints(&[2])),
                ("pads", ints(&[1, 1])),
                ("ceil_mode", Attr::Int(1)),
                ("count_include_pad", Attr::Int(include)),
            ],
        )
    };
    let (shape, got) = run_f32(&n(1), std::slice::from_ref(&x));
    assert_eq!(shape, vec![1, 1, 3]);
    // Sums 3, 9, 4 over padded-window sizes 3, 3, 2.
    assert_bits(&got, &[1., 3., 2.]);
    let (_, got) = run_f32(&n(0), &[x]);
    // Over in-bounds counts 2, 3, 1.
    assert_bits(&got, &[1.5, 3., 4.]);

    // Without padding, ceil_mode's partial last window averages what it covers.
    let n = pool(
        OpKind::AveragePool,
        &[
            ("kernel_shape", ints(&[2])),
            ("strides", ints(&[2])),
            ("ceil_mode", Attr::Int(1)),
            ("count_include_pad", Attr::Int(1)),
        ],
    );
    let (_, got) = run_f32(&n, &[f32t(&[1, 1, 5], &[1., 2., 3., 4., 5.])]);
    assert_bits(&got, &[1.5, 3.5, 5.]);
}

#[test]
fn average_pool_default_excludes_padding_and_f16() {
    let n = pool(
        OpKind::AveragePool,
        &[("kernel_shape", ints(&[2])), ("pads", ints(&[1, 0]))],
    );
    let (_, got) = run_f32(&n, &[f32t(&[1, 1, 3], &[2., 4., 8.])]);
    assert_bits(&got, &[2., 3., 6.]);
    let out = run(&n, &[f16t(&[1, 1, 3], &[2., 4., 8.])]).unwrap();
    assert_eq!(f16_values(&out), vec![2., 3., 6.]);
}

#[test]
fn global_average_pool() {
    let x = f32t(&[1, 2, 2, 2], &[1., 2., 3., 4., 10., 20., 30., 41.]);
    let (shape, got) = run_f32(&node(OpKind::GlobalAveragePool, 1, &[]), &[x]);
    assert_eq!(shape, vec![1, 2, 1, 1]);
    assert_bits(&got, &[2.5, 25.25]);
    // f64 accumulation: 1e8 + 1 - 1e8 is 0 in f32.
    let x = f32t(&[1, 1, 4], &[1e8, 1., -1e8, 0.]);
    let (shape, got) = run_f32(&node(OpKind::GlobalAveragePool, 1, &[]), &[x]);
    assert_eq!(shape, vec![1, 1, 1]);
    assert_bits(&got, &[0.25]);
    let (shape, got) = run_f32(
        &node(OpKind::GlobalAveragePool, 1, &[]),
        &[f32t(&[0, 3, 2, 2], &[])],
    );
    assert_eq!(shape, vec![0, 3, 1, 1]);
    assert!(got.is_empty());
}

#[test]
fn pools_on_empty_batches_and_3d() {
    let n = pool(OpKind::MaxPool, &[("kernel_shape", ints(&[2, 2]))]);
    let (shape, got) = run_f32(&n, &[f32t(&[0, 2, 3, 3], &[])]);
    assert_eq!(shape, vec![0, 2, 2, 2]);
    assert!(got.is_empty());
    // Three spatial axes: a 2x2x2 average over a 2x2x2 cube.
    let n = pool(OpKind::AveragePool, &[("kernel_shape", ints(&[2, 2, 2]))]);
    let (shape, got) = run_f32(&n, &[f32t(&[1, 1, 2, 2, 2], &iota(8))]);
    assert_eq!(shape, vec![1, 1, 1, 1, 1]);
    assert_bits(&got, &[4.5]);
}
