//! CausalConvWithState, Col2Im, DeformConv, MaxUnpool, ConvInteger, MatMulInteger and
//! RoiAlign against hand-computed values.

use super::*;

fn run_all(node: &Node, inputs: &[Tensor], outputs: usize) -> Result<Vec<Tensor>, KernelError> {
    let node = Node {
        outputs: (0..outputs).map(|k| 100 + k).collect(),
        ..node.clone()
    };
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    check_operands(&node, &views)?;
    let expected = expected_outputs(&node, &views)?;
    let mut outs: Vec<Tensor> = expected
        .iter()
        .take(outputs)
        .map(|(d, s)| Tensor::zeros(*d, s))
        .collect();
    let mut muts: Vec<_> = outs.iter_mut().map(Tensor::view_mut).collect();
    run_node(&node, &views, &mut muts)?;
    drop(muts);
    Ok(outs)
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.values::<f32>().to_vec()
}

/// Two channels of three steps; kernels of 3: channel 0 `[0.5, 1, 2]`, channel 1
/// `[1, -1, 1]`.
fn causal_operands() -> (Tensor, Tensor) {
    (
        f32t(&[1, 2, 3], &[1., 2., 3., 4., 5., 6.]),
        f32t(&[2, 1, 3], &[0.5, 1., 2., 1., -1., 1.]),
    )
}

#[test]
fn causal_conv_zero_state_bias_and_past_state() {
    let (x, w) = causal_operands();
    let n = node(OpKind::CausalConvWithState, 2, &[]);
    let outs = run_all(&n, &[x.clone(), w.clone()], 2).unwrap();
    // Channel 0 reads [0, 0, 1, 2, 3]: 2, 1 + 4, 0.5 + 2 + 6; channel 1 [0, 0, 4, 5, 6].
    assert_eq!(outs[0].shape, vec![1, 2, 3]);
    assert_bits(&f32s(&outs[0]), &[2., 5., 8.5, 4., 1., 5.]);
    assert_eq!(outs[1].shape, vec![1, 2, 2]);
    assert_bits(&f32s(&outs[1]), &[2., 3., 5., 6.]);
    // The bias is added per channel; an omitted bias (0 elements) before a past state.
    let b = f32t(&[2], &[1., -1.]);
    let n = node(OpKind::CausalConvWithState, 3, &[]);
    let outs = run_all(&n, &[x.clone(), w.clone(), b], 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[3., 6., 9.5, 3., 0., 4.]);
    let past = f32t(&[1, 2, 2], &[10., 20., 1., 1.]);
    let n = node(OpKind::CausalConvWithState, 4, &[]);
    let outs = run_all(&n, &[x, w, f32t(&[0], &[]), past], 2).unwrap();
    // Channel 0 reads [10, 20, 1, 2, 3]: 5 + 20 + 2, 10 + 1 + 4, 8.5.
    assert_bits(&f32s(&outs[0]), &[27., 15., 8.5, 4., 2., 5.]);
    assert_bits(&f32s(&outs[1]), &[2., 3., 5., 6.]);
}

#[test]
fn causal_conv_silu_and_kernel_of_one() {
    let (x, w) = causal_operands();
    for name in ["silu", "swish"] {
        let n = node(
            OpKind::CausalConvWithState,
            2,
            &[("activation", Attr::Str(name.into()))],
        );
        let outs = run_all(&n, &[x.clone(), w.clone()], 2).unwrap();
        // v / (1 + e^-v) of the plain outputs 2, 5, 8.5, 4, 1, 5.
        let want = [
            1.761_594_2,
            4.966_535_7,
            8.498_271,
            3.928_055_2,
            0.731_058_6,
            4.966_535_7,
        ];
        assert_close(&f32s(&outs[0]), &want, 1e-6);
    }
    let n = node(OpKind::CausalConvWithState, 2, &[]);
    let outs = run_all(&n, &[x.clone(), f32t(&[2, 1, 1], &[2., 3.])], 2).unwrap();
    assert_bits(&f32s(&outs[0]), &[2., 4., 6., 12., 15., 18.]);
    assert_eq!(outs[1].shape, vec![1, 2, 0]);
    let bad = node(
        OpKind::CausalConvWithState,
        2,
        &[("activation", Attr::Str("relu".into()))],
    );
    assert!(run_all(&bad, &[x.clone(), w.clone()], 1).is_err());
    // A weight whose channels differ from the input's is refused, not read out of bounds.
    assert!(run_all(&n, &[x, f32t(&[3, 1, 1], &[1., 1., 1.])], 1).is_err());
}

#[test]
fn causal_conv_f16() {
    let x = f16t(&[1, 1, 2], &[1.0, 3.0]);
    let w = f16t(&[1, 1, 2], &[0.1, 0.2]);
    let n = node(OpKind::CausalConvWithState, 2, &[]);
    let outs = run_all(&n, &[x, w], 2).unwrap();
    // f16(0.1) = 0.0999755859375, f16(0.2) = 0.199951171875: 0.19995 and
    // 0.09998 + 0.59985 = 0.69983 rounded to f16.
    assert_eq!(outs[0].dtype, DType::F16);
    assert_close(&f16_values(&outs[0]), &[0.199_951_17, 0.699_707_03], 1e-7);
    assert_close(&f16_values(&outs[1]), &[3.0], 0.0);
}

fn i64t(values: &[i64]) -> Tensor {
    typed(DType::I64, &[values.len()], values)
}

#[test]
fn col2im_sums_overlapping_blocks() {
    // A 2x2 block over a 3x3 image: 4 positions; row e, column p holds 10 e + p.
    let x: Vec<f32> = (0..4)
        .flat_map(|e| (0..4).map(move |p| (10 * e + p) as f32))
        .collect();
    let n = node(OpKind::Col2Im, 3, &[]);
    let outs = run_all(&n, &[f32t(&[1, 4, 4], &x), i64t(&[3, 3]), i64t(&[2, 2])], 1).unwrap();
    assert_eq!(outs[0].shape, vec![1, 1, 3, 3]);
    // The centre gets one element of every block: 3 + 12 + 21 + 30.
    assert_bits(
        &f32s(&outs[0]),
        &[0., 11., 11., 22., 66., 44., 22., 55., 33.],
    );
}

#[test]
fn col2im_strides_dilations_pads_and_channels() {
    // 1-D image of 5, a block of 2 dilated by 2, stride 2, one pad each side: the padded
    // 7 hold 3 positions starting at -1, 1 and 3, covering (-1, 1), (1, 3) and (3, 5).
    let x = f32t(
        &[1, 4, 3],
        &[1., 2., 3., 4., 5., 6., 10., 20., 30., 40., 50., 60.],
    );
    let n = node(
        OpKind::Col2Im,
        3,
        &[
            ("strides", ints(&[2])),
            ("dilations", ints(&[2])),
            ("pads", ints(&[1, 1])),
        ],
    );
    let outs = run_all(&n, &[x.clone(), i64t(&[5]), i64t(&[2])], 1).unwrap();
    assert_eq!(outs[0].shape, vec![1, 2, 5]);
    // Element 1: 4 + 2; element 3: 5 + 3; -1 and 5 fall in the padding.
    assert_bits(&f32s(&outs[0]), &[0., 6., 0., 8., 0., 0., 60., 0., 80., 0.]);
    // Integers sum exactly.
    let xi = typed(
        DType::I32,
        &[1, 4, 3],
        &[1i32, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60],
    );
    let outs = run_all(&n, &[xi, i64t(&[5]), i64t(&[2])], 1).unwrap();
    assert_eq!(outs[0].values::<i32>(), &[0, 6, 0, 8, 0, 0, 60, 0, 80, 0]);
    // Columns that do not match the positions the attributes give are refused.
    // An image of 7 would need 4 columns.
    assert!(run_all(&n, &[x, i64t(&[7]), i64t(&[2])], 1).is_err());
}

#[test]
fn max_unpool_places_values_at_their_indices() {
    let x = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let i = typed(DType::I64, &[1, 1, 2, 2], &[5i64, 7, 13, 15]);
    let attrs = [("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))];
    let n = node(OpKind::MaxUnpool, 2, &attrs);
    let outs = run_all(&n, &[x.clone(), i.clone()], 1).unwrap();
    // (2 - 1) * 2 + 2 = 4 per axis; indices 5, 7, 13, 15 are (1, 1), (1, 3), (3, 1), (3, 3).
    assert_eq!(outs[0].shape, vec![1, 1, 4, 4]);
    let mut want = [0f32; 16];
    (want[5], want[7], want[13], want[15]) = (1., 2., 3., 4.);
    assert_bits(&f32s(&outs[0]), &want);
    // A 5x5 output_shape keeps the 4x4 result at the start of each axis.
    let n = node(OpKind::MaxUnpool, 3, &attrs);
    let outs = run_all(&n, &[x.clone(), i, i64t(&[1, 1, 5, 5])], 1).unwrap();
    assert_eq!(outs[0].shape, vec![1, 1, 5, 5]);
    let mut want = [0f32; 25];
    (want[6], want[8], want[16], want[18]) = (1., 2., 3., 4.);
    assert_bits(&f32s(&outs[0]), &want);
    // An output_shape that would cut the unpooled tensor is refused.
    let i = typed(DType::I64, &[1, 1, 2, 2], &[5i64, 7, 13, 15]);
    assert!(run_all(&n, &[x, i, i64t(&[1, 1, 3, 4])], 1).is_err());
}

#[test]
fn max_unpool_pads_batches_and_bad_indices() {
    // One spatial axis: kernel 3, stride 2, one pad each side: (2 - 1) * 2 - 2 + 3 = 3.
    // Indices count through the whole tensor: batch 1 starts at 3.
    let attrs = [
        ("kernel_shape", ints(&[3])),
        ("strides", ints(&[2])),
        ("pads", ints(&[1, 1])),
    ];
    let n = node(OpKind::MaxUnpool, 2, &attrs);
    let x = f32t(&[2, 1, 2], &[1., 2., 3., 4.]);
    let i = typed(DType::I64, &[2, 1, 2], &[0i64, 2, 3, 5]);
    let outs = run_all(&n, &[x.clone(), i], 1).unwrap();
    assert_eq!(outs[0].shape, vec![2, 1, 3]);
    assert_bits(&f32s(&outs[0]), &[1., 0., 2., 3., 0., 4.]);
    let bad = typed(DType::I64, &[2, 1, 2], &[0i64, 2, 3, 6]);
    assert!(run_all(&n, &[x.clone(), bad], 1).is_err());
    let negative = typed(DType::I64, &[2, 1, 2], &[-1i64, 2, 3, 5]);
    assert!(run_all(&n, &[x, negative], 1).is_err());
}

#[test]
fn conv_integer_takes_zero_points_away() {
    // x - 1 is 0..=8 in a 3x3 image; w less its per-channel zero points [1, 5] is
    // [[0, 1], [2, 3]] for channel 0 and all 0 for channel 1.
    let x = typed(DType::U8, &[1, 1, 3, 3], &[1u8, 2, 3, 4, 5, 6, 7, 8, 9]);
    let w = typed(DType::U8, &[2, 1, 2, 2], &[1u8, 2, 3, 4, 5, 5, 5, 5]);
    let xz = typed(DType::U8, &[], &[1u8]);
    let wz = typed(DType::U8, &[2], &[1u8, 5]);
    let n = node(OpKind::ConvInteger, 4, &[]);
    let outs = run_all(&n, &[x.clone(), w.clone(), xz.clone(), wz.clone()], 1).unwrap();
    assert_eq!(outs[0].dtype, DType::I32);
    assert_eq!(outs[0].shape, vec![1, 2, 2, 2]);
    // (0, 0): 1 + 3 * 2 + 4 * 3 = 19.
    assert_eq!(outs[0].values::<i32>(), &[19, 25, 37, 43, 0, 0, 0, 0]);
    // Padding reads 0 once the zero point is away.
    let n = node(OpKind::ConvInteger, 4, &[("pads", ints(&[1, 1, 1, 1]))]);
    let outs = run_all(&n, &[x, w, xz, wz], 1).unwrap();
    assert_eq!(
        &outs[0].values::<i32>()[..16],
        &[0, 3, 8, 4, 9, 19, 25, 10, 21, 37, 43, 16, 6, 7, 8, 0]
    );
}

#[test]
fn matmul_integer_per_row_and_per_column_zero_points() {
    let a = typed(DType::U8, &[2, 3], &[11u8, 7, 3, 10, 6, 2]);
    let b = typed(DType::I8, &[3, 2], &[1i8, -4, 2, -5, 3, -6]);
    let bz = typed(DType::I8, &[2], &[1i8, -4]);
    let n = node(OpKind::MatMulInteger, 4, &[]);
    // A - 12 = [[-1, -5, -9], [-2, -6, -10]], B less [1, -4] = [[0, 0], [1, -1], [2, -2]].
    let az = typed(DType::U8, &[1], &[12u8]);
    let outs = run_all(&n, &[a.clone(), b.clone(), az, bz.clone()], 1).unwrap();
    assert_eq!(outs[0].values::<i32>(), &[-23, 23, -26, 26]);
    // One zero point per row of A: 12 and 10.
    let az = typed(DType::U8, &[2], &[12u8, 10]);
    let outs = run_all(&n, &[a.clone(), b.clone(), az, bz], 1).unwrap();
    assert_eq!(outs[0].values::<i32>(), &[-23, 23, -20, 20]);
    // Without zero points: [[11*1 + 7*2 + 3*3, ...]].
    let n = node(OpKind::MatMulInteger, 2, &[]);
    let outs = run_all(&n, &[a, b.clone()], 1).unwrap();
    assert_eq!(outs[0].values::<i32>(), &[34, -97, 28, -82]);
    // A zero point of the wrong dtype is refused.
    let n = node(OpKind::MatMulInteger, 4, &[]);
    let x = typed(DType::U8, &[2, 3], &[1u8; 6]);
    let bad = typed(DType::I8, &[1], &[0i8]);
    assert!(run_all(&n, &[x, b.clone(), bad.clone(), bad], 1).is_err());
}

#[test]
fn deform_conv_samples_at_offsets() {
    // X holds 0..=8 in a 3x3 image; a 2x2 kernel of ones sums each window: 8, 12, 20, 24.
    let x = f32t(
        &[1, 1, 3, 3],
        &iota(9).iter().map(|v| v - 1.).collect::<Vec<_>>(),
    );
    let w = f32t(&[1, 1, 2, 2], &[1.; 4]);
    let n = node(OpKind::DeformConv, 3, &[]);
    let zero = vec![0f32; 32];
    let outs = run_all(&n, &[x.clone(), w.clone(), f32t(&[1, 8, 2, 2], &zero)], 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[8., 12., 20., 24.]);
    // Offset channel (tap * 2 + axis) * 4 + output. Every tap of output (0, 0) moved down
    // half a row reads 1.5, 2.5, 4.5, 5.5; also right by half: 2, 3, 5, 6.
    let mut o = zero.clone();
    for tap in 0..4 {
        o[tap * 2 * 4] = 0.5;
    }
    let outs = run_all(&n, &[x.clone(), w.clone(), f32t(&[1, 8, 2, 2], &o)], 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[14., 12., 20., 24.]);
    for tap in 0..4 {
        o[(tap * 2 + 1) * 4] = 0.5;
    }
    let outs = run_all(&n, &[x.clone(), w.clone(), f32t(&[1, 8, 2, 2], &o)], 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[16., 12., 20., 24.]);
    // Tap (1, 1) up a row reads 1 for 4; tap (0, 1) up a row leaves the image: 0 for 1.
    let mut o = zero.clone();
    o[6 * 4] = -1.;
    o[2 * 4] = -1.;
    let outs = run_all(&n, &[x.clone(), w.clone(), f32t(&[1, 8, 2, 2], &o)], 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[4., 12., 20., 24.]);
    // A mask of 0.5 halves every tap; the bias comes after.
    let n5 = node(OpKind::DeformConv, 5, &[]);
    let ins = [
        x.clone(),
        w.clone(),
        f32t(&[1, 8, 2, 2], &zero),
        f32t(&[1], &[1.]),
        f32t(&[1, 4, 2, 2], &[0.5; 16]),
    ];
    let outs = run_all(&n5, &ins, 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[5., 7., 11., 13.]);
}

#[test]
fn deform_conv_padding_and_offset_groups() {
    let x = f32t(
        &[1, 1, 3, 3],
        &iota(9).iter().map(|v| v - 1.).collect::<Vec<_>>(),
    );
    let w = f32t(&[1, 1, 2, 2], &[1.; 4]);
    let n = node(OpKind::DeformConv, 3, &[("pads", ints(&[1, 1, 1, 1]))]);
    let outs = run_all(&n, &[x.clone(), w, f32t(&[1, 8, 4, 4], &[0.; 128])], 1).unwrap();
    assert_eq!(outs[0].shape, vec![1, 1, 4, 4]);
    assert_bits(
        &f32s(&outs[0]),
        &[
            0., 1., 3., 2., 3., 8., 12., 7., 9., 20., 24., 13., 6., 13., 15., 8.,
        ],
    );
    // Two channels, two offset groups: the second channel's taps move right by one, so
    // its windows sum 12, 7 (half outside), 24 and 13, added to the first's 8, 12, 20, 24.
    let x2 = f32t(
        &[1, 2, 3, 3],
        &[iota(9), iota(9)]
            .concat()
            .iter()
            .map(|v| v - 1.)
            .collect::<Vec<_>>(),
    );
    let mut o = vec![0f32; 64];
    for tap in 0..4 {
        for out in 0..4 {
            o[((4 + tap) * 2 + 1) * 4 + out] = 1.;
        }
    }
    let n = node(OpKind::DeformConv, 3, &[("offset_group", Attr::Int(2))]);
    let w2 = f32t(&[1, 2, 2, 2], &[1.; 8]);
    let outs = run_all(&n, &[x2, w2, f32t(&[1, 16, 2, 2], &o)], 1).unwrap();
    assert_bits(&f32s(&outs[0]), &[20., 19., 44., 37.]);
}

/// RoiAlign's operands: one image of two channels `[1, 2, 3, 4]` (channel 0 `0.5 * i -
/// 3`, channel 1 its square), a box inside it, one reaching past its right and bottom
/// edges, and one wholly outside its top-left corner.
fn roi_operands() -> [Tensor; 3] {
    let mut x: Vec<f32> = (0..12).map(|i| 0.5 * i as f32 - 3.).collect();
    x.extend((12..24).map(|i| (0.5 * i as f32 - 3.).powi(2)));
    let rois = [0., 0., 4., 3., 1., 0.5, 7., 5., -3., -3., -1.5, -2.];
    [
        f32t(&[1, 2, 3, 4], &x),
        f32t(&[3, 4], &rois),
        typed(DType::I64, &[3], &[0i64, 0, 0]),
    ]
}

fn roi_node(attrs: &[(&str, Attr)]) -> Node {
    node(OpKind::RoiAlign, 3, attrs)
}

fn str_attr(v: &str) -> Attr {
    Attr::Str(v.into())
}

// The expected values below come from a plain-Python transcription of ONNX's
// definition (per-sample bilinear corner terms in f64), run separately and rounded to f32.

#[test]
fn roi_align_half_pixel_avg_with_a_fixed_grid() {
    let attrs = [
        ("output_height", Attr::Int(2)),
        ("output_width", Attr::Int(2)),
        ("sampling_ratio", Attr::Int(2)),
        ("spatial_scale", Attr::Float(0.5)),
    ];
    let outs = run_all(&roi_node(&attrs), &roi_operands(), 1).unwrap();
    assert_eq!(outs[0].shape, vec![3, 2, 2, 2]);
    #[rustfmt::skip]
    let want = [
        -2.875, -2.4375, -1.6875, -1.25, 9.914_062_5, 12.875, 19.5625, 23.5625,
        -2.0, -1.25, 0.25, 1.0, 16.9375, 23.5, 40.125, 50.0625,
        // Every sample of the third box lies more than a pixel outside: all 0.
        0., 0., 0., 0., 0., 0., 0., 0.,
    ];
    assert_close(&f32s(&outs[0]), &want, 1e-6);
}

#[test]
fn roi_align_output_half_pixel_max_and_adaptive_grids() {
    let attrs = [
        (
            "coordinate_transformation_mode",
            str_attr("output_half_pixel"),
        ),
        ("mode", str_attr("max")),
        ("output_height", Attr::Int(2)),
        ("output_width", Attr::Int(2)),
        ("spatial_scale", Attr::Float(0.5)),
    ];
    let outs = run_all(&roi_node(&attrs), &roi_operands(), 1).unwrap();
    #[rustfmt::skip]
    let want = [
        -0.09375, 0.0, 0.09375, 0.125, 5.671875, 6.75, 13.234375, 15.75,
        0.123_046_875, 0.453125, 1.3125, 2.5, 23.987_305, 38.289_063, 49.21875, 72.25,
        // The third box grows to 1 x 1; its last bin's one sample reads pixel (0, 0)
        // with weight 1 and three zero-weighted corners, so the largest term of channel
        // 0 (-3) is a zero term, as in ONNX's reference.
        0., 0., 0., 0., 0., 0., 0., 9.,
    ];
    assert_close(&f32s(&outs[0]), &want, 1e-6);
    // avg, one row of two bins, adaptive grids of 5 x 3 (second box) samples.
    let attrs = [
        (
            "coordinate_transformation_mode",
            str_attr("output_half_pixel"),
        ),
        ("output_width", Attr::Int(2)),
    ];
    let outs = run_all(&roi_node(&attrs), &roi_operands(), 1).unwrap();
    assert_eq!(outs[0].shape, vec![3, 2, 1, 2]);
    #[rustfmt::skip]
    let want = [
        0.166_666_67, 1.041_666_6, 40.375, 51.854_168,
        0.82, 0., 33.3, 0.,
        0., 0., 0., 0.,
    ];
    assert_close(&f32s(&outs[0]), &want, 1e-5);
}

#[test]
fn roi_align_refuses_bad_batch_indices_and_attributes() {
    let [x, rois, _] = roi_operands();
    let n = roi_node(&[]);
    let bad = typed(DType::I64, &[3], &[0i64, 1, 0]);
    assert!(run_all(&n, &[x.clone(), rois.clone(), bad], 1).is_err());
    let negative = typed(DType::I64, &[3], &[0i64, -1, 0]);
    assert!(run_all(&n, &[x.clone(), rois.clone(), negative], 1).is_err());
    let idx = typed(DType::I64, &[3], &[0i64, 0, 0]);
    for attrs in [
        [("mode", str_attr("median"))],
        [("coordinate_transformation_mode", str_attr("asymmetric"))],
        [("output_height", Attr::Int(0))],
        [("sampling_ratio", Attr::Int(-1))],
    ] {
        let n = roi_node(&attrs);
        assert!(run_all(&n, &[x.clone(), rois.clone(), idx.clone()], 1).is_err());
    }
    // rois of another dtype than X, and batch_indices of the wrong length.
    let r16 = f16t(&[3, 4], &[0.; 12]);
    assert!(run_all(&n, &[x.clone(), r16, idx], 1).is_err());
    let short = typed(DType::I64, &[2], &[0i64, 0]);
    assert!(run_all(&n, &[x, rois, short], 1).is_err());
}
