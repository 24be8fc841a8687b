//! Einsum, GridSample, DFT, STFT and the window ops against hand-computed values.

use super::*;

fn einsum(equation: &str, n: usize) -> Node {
    node(
        OpKind::Einsum,
        n,
        &[("equation", Attr::Str(equation.into()))],
    )
}

#[test]
fn einsum_batched_matmul_transpose_and_sums() {
    // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]; batch 2 doubles the second.
    let a = f32t(&[2, 2, 2], &[1., 2., 3., 4., 2., 4., 6., 8.]);
    let b = f32t(&[2, 2, 2], &[5., 6., 7., 8., 5., 6., 7., 8.]);
    let (shape, y) = run_f32(&einsum("bij, bjk -> bik", 2), &[a, b]);
    assert_eq!(shape, vec![2, 2, 2]);
    assert_bits(&y, &[19., 22., 43., 50., 38., 44., 86., 100.]);
    let x = f32t(&[2, 3], &iota(6));
    let (shape, y) = run_f32(&einsum("ij->ji", 1), std::slice::from_ref(&x));
    assert_eq!(shape, vec![3, 2]);
    assert_bits(&y, &[1., 4., 2., 5., 3., 6.]);
    let (_, y) = run_f32(&einsum("ij->i", 1), std::slice::from_ref(&x));
    assert_bits(&y, &[6., 15.]);
    let (shape, y) = run_f32(&einsum("ij->", 1), std::slice::from_ref(&x));
    assert_eq!(shape, Vec::<usize>::new());
    assert_bits(&y, &[21.]);
    // Implicit output: `ji` keeps both labels in ASCII order, a transpose.
    let (_, y) = run_f32(&einsum("ji", 1), &[x]);
    assert_bits(&y, &[1., 4., 2., 5., 3., 6.]);
}

#[test]
fn einsum_inner_outer_and_scalar_operands() {
    let u = f32t(&[3], &[1., 2., 3.]);
    let v = f32t(&[3], &[4., 5., 6.]);
    let (shape, y) = run_f32(&einsum("i,i", 2), &[u.clone(), v.clone()]);
    assert_eq!(shape, Vec::<usize>::new());
    assert_bits(&y, &[32.]);
    let (shape, y) = run_f32(&einsum("i,j->ij", 2), &[u.clone(), v]);
    assert_eq!(shape, vec![3, 3]);
    assert_bits(&y, &[4., 5., 6., 8., 10., 12., 12., 15., 18.]);
    let s = f32t(&[], &[2.5]);
    let (_, y) = run_f32(&einsum(",i->i", 2), &[s, u]);
    assert_bits(&y, &[2.5, 5., 7.5]);
}

#[test]
fn einsum_diagonals_and_broadcast_ellipsis() {
    // Two 3x3 matrices holding 1..=9 and 10..=18.
    let x = f32t(&[2, 3, 3], &iota(18));
    let (shape, y) = run_f32(&einsum("...ii ->...i", 1), std::slice::from_ref(&x));
    assert_eq!(shape, vec![2, 3]);
    assert_bits(&y, &[1., 5., 9., 10., 14., 18.]);
    // The trace of each: 15 and 42.
    let (_, y) = run_f32(&einsum("bii->b", 1), &[x]);
    assert_bits(&y, &[15., 42.]);
    // A [1, 2] batch broadcast against [3, 1]: row r of the result is a[c] * b[r].
    let a = f32t(&[1, 2, 1], &[1., 10.]);
    let b = f32t(&[3, 1, 1], &[1., 2., 3.]);
    let (shape, y) = run_f32(&einsum("...i,...i->...", 2), &[a, b]);
    assert_eq!(shape, vec![3, 2]);
    assert_bits(&y, &[1., 10., 2., 20., 3., 30.]);
}

#[test]
fn einsum_integers_wrap_and_f16_rounds_once() {
    let a = typed(DType::I32, &[2], &[i32::MAX, 1]);
    let b = typed(DType::I32, &[2], &[1, 1]);
    let r = run(&einsum("i,i->", 2), &[a, b]).unwrap();
    assert_eq!(r.values::<i32>(), &[i32::MIN]);
    // 2048 + 1 + 1 is exact in f64 and rounds once to 2050 (adding in f16 would give 2048).
    let x = f16t(&[3], &[2048., 1., 1.]);
    let r = run(&einsum("i->", 1), &[x]).unwrap();
    assert_eq!(f16_values(&r), vec![2050.]);
}

#[test]
fn einsum_refuses_bad_equations_and_mixed_dtypes() {
    let x = f32t(&[2, 3], &iota(6));
    for eq in ["ij,jk", "ijk", "ij->k", "i.j", ""] {
        assert!(
            run(&einsum(eq, 1), std::slice::from_ref(&x)).is_err(),
            "{eq}"
        );
    }
    let i = typed(DType::I32, &[3], &[1, 2, 3]);
    assert!(run(&einsum("i,i", 2), &[f32t(&[3], &[1., 2., 3.]), i]).is_err());
}

fn grid_sample(mode: &str, padding: &str, align: i64) -> Node {
    node(
        OpKind::GridSample,
        2,
        &[
            ("mode", Attr::Str(mode.into())),
            ("padding_mode", Attr::Str(padding.into())),
            ("align_corners", Attr::Int(align)),
        ],
    )
}

#[test]
fn grid_sample_linear_paddings_and_corners() {
    let x = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    // (x, y) pairs: the centre, then the top-left corner of the image.
    let grid = f32t(&[1, 1, 2, 2], &[0., 0., -1., -1.]);
    let sample = |padding: &str, align: i64| {
        let (shape, y) = run_f32(
            &grid_sample("linear", padding, align),
            &[x.clone(), grid.clone()],
        );
        assert_eq!(shape, vec![1, 1, 1, 2]);
        y
    };
    // Without align_corners -1 is the outer edge, half a pixel before the first centre:
    // zeros pad three of the four taps, border and reflection read pixel (0, 0).
    assert_bits(&sample("zeros", 0), &[2.5, 0.25]);
    assert_bits(&sample("border", 0), &[2.5, 1.]);
    assert_bits(&sample("reflection", 0), &[2.5, 1.]);
    // With align_corners -1 is the first centre itself.
    assert_bits(&sample("zeros", 1), &[2.5, 1.]);
    // x = 1, y = -1 is column 2, row 0 of a 2x3 image: the grid lists x first.
    let x = f32t(&[1, 1, 2, 3], &iota(6));
    let grid = f32t(&[1, 1, 1, 2], &[1., -1.]);
    let (_, y) = run_f32(&grid_sample("linear", "zeros", 1), &[x, grid]);
    assert_bits(&y, &[3.]);
}

#[test]
fn grid_sample_nearest_rounds_half_to_even() {
    let x = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    // (0.1, -0.6) lands at (0.6, -0.1): column 1, row 0. (0, 0) lands at (0.5, 0.5),
    // which rounds to (0, 0).
    let grid = f32t(&[1, 2, 1, 2], &[0.1, -0.6, 0., 0.]);
    let (shape, y) = run_f32(&grid_sample("nearest", "zeros", 0), &[x, grid]);
    assert_eq!(shape, vec![1, 1, 2, 1]);
    assert_bits(&y, &[2., 1.]);
}

#[test]
fn grid_sample_cubic_weights() {
    // A 1x4 row with align_corners: x = -1/3 is column 1 exactly, x = 0 is column 1.5,
    // where the taps weigh -0.09375, 0.59375, 0.59375, -0.09375.
    let x = f32t(&[1, 1, 1, 4], &[1., 2., 4., 8.]);
    let grid = f32t(&[1, 1, 2, 2], &[-1. / 3., 0., 0., 0.]);
    let (_, y) = run_f32(&grid_sample("cubic", "border", 1), &[x, grid]);
    assert_close(&y, &[2., 2.71875], 1e-6);
    // The weights sum to 1: a constant image stays constant, anywhere.
    let x = f32t(&[1, 2, 3, 3], &[3.; 18]);
    let grid = f32t(&[1, 1, 2, 2], &[0.3, -0.7, 1.4, 0.2]);
    let (_, y) = run_f32(&grid_sample("bicubic", "border", 0), &[x, grid]);
    assert_close(&y, &[3.; 4], 1e-6);
}

#[test]
fn grid_sample_volumetric_and_refusals() {
    // The centre of a 2x2x2 cube is the mean of its eight values.
    let x = f32t(&[1, 1, 2, 2, 2], &iota(8));
    let grid = f32t(&[1, 1, 1, 1, 3], &[0., 0., 0.]);
    let (shape, y) = run_f32(&grid_sample("linear", "zeros", 0), &[x.clone(), grid]);
    assert_eq!(shape, vec![1, 1, 1, 1, 1]);
    assert_bits(&y, &[4.5]);
    // A NaN coordinate gives NaN.
    let grid = f32t(&[1, 1, 1, 1, 3], &[0., f32::NAN, 0.]);
    let (_, y) = run_f32(&grid_sample("linear", "zeros", 0), &[x.clone(), grid]);
    assert!(y[0].is_nan());
    // A grid whose last extent is not X's spatial rank, or an unknown mode.
    let grid = f32t(&[1, 1, 1, 1, 2], &[0., 0.]);
    assert!(run(&grid_sample("linear", "zeros", 0), &[x.clone(), grid]).is_err());
    let grid = f32t(&[1, 1, 1, 1, 3], &[0., 0., 0.]);
    assert!(run(&grid_sample("area", "zeros", 0), &[x.clone(), grid.clone()]).is_err());
    assert!(run(&grid_sample("linear", "wrap", 0), &[x, grid]).is_err());
}

fn i64t(shape: &[usize], values: &[i64]) -> Tensor {
    Tensor::from_i64(shape, values)
}

fn dft(inverse: i64, onesided: i64) -> Node {
    node(
        OpKind::DFT,
        3,
        &[
            ("inverse", Attr::Int(inverse)),
            ("onesided", Attr::Int(onesided)),
        ],
    )
}

#[test]
fn dft_forward_inverse_and_one_sided() {
    // The DFT of 1, 2, 3, 4 is 10, -2+2i, -2, -2-2i.
    let x = f32t(&[1, 4, 1], &[1., 2., 3., 4.]);
    let none = f32t(&[0], &[]);
    let axis = i64t(&[], &[-2]);
    let (shape, y) = run_f32(&dft(0, 0), &[x.clone(), none.clone(), axis.clone()]);
    assert_eq!(shape, vec![1, 4, 2]);
    assert_close(&y, &[10., 0., -2., 2., -2., 0., -2., -2.], 1e-6);
    let (shape, y) = run_f32(&dft(0, 1), &[x.clone(), none.clone(), axis.clone()]);
    assert_eq!(shape, vec![1, 3, 2]);
    assert_close(&y, &[10., 0., -2., 2., -2., 0.], 1e-6);
    // A dft_length of 2 cuts the signal to 1, 2: 3 and -1.
    let (_, y) = run_f32(&dft(0, 0), &[x, i64t(&[], &[2]), axis.clone()]);
    assert_close(&y, &[3., 0., -1., 0.], 1e-6);
    // The inverse of the full spectrum, and of its first half (a real signal of 4).
    let full = f32t(&[1, 4, 2], &[10., 0., -2., 2., -2., 0., -2., -2.]);
    let (_, y) = run_f32(&dft(1, 0), &[full, none.clone(), axis.clone()]);
    assert_close(&y, &[1., 0., 2., 0., 3., 0., 4., 0.], 1e-6);
    let half = f32t(&[1, 3, 2], &[10., 0., -2., 2., -2., 0.]);
    let (shape, y) = run_f32(&dft(1, 1), &[half, none, axis]);
    assert_eq!(shape, vec![1, 4, 1]);
    assert_close(&y, &[1., 2., 3., 4.], 1e-6);
}

#[test]
fn dft_along_an_outer_axis_and_refusals() {
    // Two length-2 signals down axis 0 of a [2, 2, 1] input: columns (1, 3) and (2, 4).
    let x = f32t(&[2, 2, 1], &[1., 2., 3., 4.]);
    let none = f32t(&[0], &[]);
    let (_, y) = run_f32(&dft(0, 0), &[x.clone(), none.clone(), i64t(&[], &[0])]);
    assert_close(&y, &[4., 0., 6., 0., -2., 0., -2., 0.], 1e-6);
    // The last axis holds the parts, so it cannot be transformed.
    assert!(run(&dft(0, 0), &[x.clone(), none.clone(), i64t(&[], &[2])]).is_err());
    assert!(run(&dft(0, 0), &[x.clone(), i64t(&[], &[0]), i64t(&[], &[0])]).is_err());
    assert!(run(&dft(0, 0), &[f32t(&[2, 3], &[0.; 6]), none]).is_err());
}

#[test]
fn stft_frames_windows_and_transforms() {
    let x = f32t(&[1, 4, 1], &[1., 2., 3., 4.]);
    let step = i64t(&[], &[2]);
    let stft = node(OpKind::STFT, 4, &[]);
    // Frames (1, 2) and (3, 4): their two-point transforms 3, -1 and 7, -1.
    let none = f32t(&[0], &[]);
    let (shape, y) = run_f32(&stft, &[x.clone(), step.clone(), none, i64t(&[], &[2])]);
    assert_eq!(shape, vec![1, 2, 2, 2]);
    assert_close(&y, &[3., 0., -1., 0., 7., 0., -1., 0.], 1e-6);
    // A window (1, 0.5) makes the frames (1, 1) and (3, 2).
    let window = f32t(&[2], &[1., 0.5]);
    let (_, y) = run_f32(
        &node(OpKind::STFT, 3, &[]),
        &[x.clone(), step.clone(), window],
    );
    assert_close(&y, &[2., 0., 0., 0., 5., 0., 1., 0.], 1e-6);
    // A frame longer than the signal.
    let long = f32t(&[0], &[]);
    assert!(run(&stft, &[x, step, long, i64t(&[], &[5])]).is_err());
}

#[test]
fn windows_over_one_period_or_symmetric() {
    let window = |op: OpKind, size: i64, periodic: i64| {
        let n = node(op, 1, &[("periodic", Attr::Int(periodic))]);
        run_f32(&n, &[i64t(&[], &[size])])
    };
    let (shape, y) = window(OpKind::HannWindow, 4, 1);
    assert_eq!(shape, vec![4]);
    assert_close(&y, &[0., 0.5, 1., 0.5], 1e-7);
    assert_close(&window(OpKind::HannWindow, 3, 0).1, &[0., 1., 0.], 1e-7);
    assert_close(
        &window(OpKind::HammingWindow, 2, 1).1,
        &[4. / 46., 1.],
        1e-7,
    );
    assert_close(&window(OpKind::BlackmanWindow, 3, 0).1, &[0., 1., 0.], 1e-7);
    assert_close(&window(OpKind::HannWindow, 1, 0).1, &[1.], 0.);
    // output_datatype 11 is f64.
    let n = node(OpKind::HannWindow, 1, &[("output_datatype", Attr::Int(11))]);
    let r = run(&n, &[i64t(&[], &[2])]).unwrap();
    assert_eq!(r.dtype, DType::F64);
    assert_eq!(r.values::<f64>(), &[0., 1.]);
    assert!(run(&n, &[i64t(&[], &[-1])]).is_err());
}

fn affine_grid(theta: Tensor, size: &[i64], align: i64) -> Result<Tensor, KernelError> {
    let n = node(
        OpKind::AffineGrid,
        2,
        &[("align_corners", Attr::Int(align))],
    );
    let size_t = typed(DType::I64, &[size.len()], size);
    // The shape rule needs the size as a constant: give it the value the way a graph would.
    let shape = baton_delegate_api::shape::infer_outputs(
        &n,
        &[
            (theta.dtype, theta.shape.clone()),
            (DType::I64, vec![size.len()]),
        ],
        |i| (i == 1).then(|| size.to_vec()),
    )
    .map_err(|m| KernelError::Shape {
        node: "affine_grid".into(),
        message: m,
    })?;
    let mut out = Tensor::zeros(shape[0].0, &shape[0].1);
    run_node(&n, &[theta.view(), size_t.view()], &mut [out.view_mut()])?;
    Ok(out)
}

#[test]
fn affine_grid_2d_in_both_corner_alignments() {
    // Values from numpy: meshgrid of the normalized x (along W) and y coordinates, times
    // theta. Unaligned, W = 3 gives x = -2/3, 0, 2/3 and H = 2 gives y = -1/2, 1/2.
    let theta = f32t(&[1, 2, 3], &[2., 0., 1., 0., -1., 0.5]);
    let out = affine_grid(theta.clone(), &[1, 5, 2, 3], 0).unwrap();
    assert_eq!(out.shape, vec![1, 2, 3, 2]);
    let want = [
        -1. / 3.,
        1.,
        1.,
        1.,
        7. / 3.,
        1.,
        -1. / 3.,
        0.,
        1.,
        0.,
        7. / 3.,
        0.,
    ];
    assert_close(out.f32s(), &want, 1e-6);
    let out = affine_grid(theta, &[1, 5, 2, 3], 1).unwrap();
    let want = [-1., 1.5, 1., 1.5, 3., 1.5, -1., -0.5, 1., -0.5, 3., -0.5];
    assert_close(out.f32s(), &want, 1e-6);
}

#[test]
fn affine_grid_3d_lists_x_first_and_puts_a_lone_aligned_pixel_at_minus_one() {
    // theta = arange(12) / 4 - 1; D = 2, H = 1, W = 2 with corners aligned: x, z in
    // {-1, 1}, y = -1 (one pixel).
    let t: Vec<f32> = (0..12).map(|i| i as f32 / 4. - 1.).collect();
    let out = affine_grid(f32t(&[1, 3, 4], &t), &[1, 1, 2, 1, 2], 1).unwrap();
    assert_eq!(out.shape, vec![1, 2, 1, 2, 3]);
    let want = [2., 0., -2., 0., 0., 0., 1., 1., 1., -1., 1., 3.];
    assert_close(out.f32s(), &want, 1e-6);
}

#[test]
fn affine_grid_refuses_mismatched_operands() {
    let theta = f32t(&[2, 2, 3], &[0.; 12]);
    let err = affine_grid(theta.clone(), &[1, 1, 2, 2], 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch 1"), "{err}");
    let err = affine_grid(theta.clone(), &[2, 1, 2, 2, 2], 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("size must be i64 [4]"), "{err}");
    let err = affine_grid(f32t(&[2, 2, 2], &[0.; 8]), &[2, 1, 2, 2], 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("[N, 2, 3] or [N, 3, 4]"), "{err}");
    // A kernel handed an output that does not fit refuses it rather than panicking.
    let n = node(OpKind::AffineGrid, 2, &[]);
    let size = typed(DType::I64, &[4], &[2i64, 1, 2, 2]);
    let mut out = Tensor::zeros(DType::F32, &[0]);
    assert!(run_node(&n, &[theta.view(), size.view()], &mut [out.view_mut()]).is_err());
}

/// MelWeightMatrix's five operands: three i64 scalars and two f32 edges.
fn mel_operands(bins: i64, dft: i64, rate: i64, low: f32, high: f32) -> Vec<Tensor> {
    vec![
        i64t(&[], &[bins]),
        i64t(&[], &[dft]),
        i64t(&[], &[rate]),
        f32t(&[], &[low]),
        f32t(&[], &[high]),
    ]
}

// Expected values from ONNX's reference implementation, run separately; the bins of the
// mel points were also recomputed in f64 with numpy.
#[test]
fn mel_weight_matrix_triangles_and_output_dtypes() {
    let n = node(OpKind::MelWeightMatrix, 5, &[]);
    // The five points fall on FFT bins 1, 3, 6, 12 and 20 of 33.
    let out = run(&n, &mel_operands(3, 64, 16000, 300., 8000.)).unwrap();
    assert_eq!(out.shape, vec![33, 3]);
    let mut want = vec![0f32; 33 * 3];
    let mut set = |row: usize, col: usize, v: f32| want[row * 3 + col] = v;
    for (row, v) in [(2, 0.5), (3, 1.), (4, 2. / 3.), (5, 1. / 3.)] {
        set(row, 0, v);
    }
    for row in 4..=11 {
        let v = if row <= 6 {
            (row - 3) as f32 / 3.
        } else {
            (12 - row) as f32 / 6.
        };
        set(row, 1, v);
    }
    for row in 7..=19 {
        let v = if row <= 12 {
            (row - 6) as f32 / 6.
        } else {
            (20 - row) as f32 / 8.
        };
        set(row, 2, v);
    }
    assert_close(out.values::<f32>(), &want, 1e-7);
    // Points on bins 1, 3, 5 and 7; an i64 output truncates every fraction to 0.
    let n = node(
        OpKind::MelWeightMatrix,
        5,
        &[("output_datatype", Attr::Int(7))],
    );
    let out = run(&n, &mel_operands(2, 20, 1000, 50., 500.)).unwrap();
    assert_eq!(out.shape, vec![11, 2]);
    let mut want = vec![0i64; 22];
    (want[3 * 2], want[5 * 2 + 1]) = (1, 1);
    assert_eq!(out.values::<i64>(), want);
}

#[test]
fn mel_weight_matrix_refuses_bad_scalars() {
    let n = node(OpKind::MelWeightMatrix, 5, &[]);
    // No sample rate, an upper edge past the spectrum, no mel bins, a bad output type.
    assert!(run(&n, &mel_operands(3, 64, 0, 300., 8000.)).is_err());
    let err = run(&n, &mel_operands(3, 64, 16000, 300., 40000.))
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside the spectrum's 33 bins"), "{err}");
    assert!(run(&n, &mel_operands(0, 64, 16000, 300., 8000.)).is_err());
    let bad = node(
        OpKind::MelWeightMatrix,
        5,
        &[("output_datatype", Attr::Int(8))],
    );
    assert!(run(&bad, &mel_operands(3, 64, 16000, 300., 8000.)).is_err());
}
