//! Cases of the signal and sampling family: GridSample, AffineGrid, DFT, STFT, the window ops,
//! MelWeightMatrix, and Einsum (the forms models use: batched and
//! broadcast matrix products, transposes, reductions, outer and inner products,
//! diagonals, implicit outputs and three operands).

use baton_delegate_api::DType::{F16, F32, I32, I64};
use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::gen::{Fill, Maker};
use super::Case;
use crate::error::Result;

/// Appends the cases of `op` if it belongs to this family.
pub fn cases(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    match op {
        OpKind::Einsum => einsum(out),
        OpKind::GridSample => grid_sample(out),
        OpKind::AffineGrid => affine_grid(out),
        OpKind::DFT => dft(out),
        OpKind::STFT => stft(out),
        OpKind::HannWindow | OpKind::HammingWindow | OpKind::BlackmanWindow => window(op, out),
        OpKind::MelWeightMatrix => mel_weight_matrix(out),
        _ => Ok(()),
    }
}

fn einsum(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::Einsum;
    type Form = (&'static str, &'static str, &'static [&'static [usize]]);
    let forms: &[Form] = &[
        ("batch_matmul", "bij,bjk->bik", &[&[3, 4, 5], &[3, 5, 6]]),
        (
            "attention_scores",
            "bhqd,bhkd->bhqk",
            &[&[2, 3, 4, 8], &[2, 3, 5, 8]],
        ),
        ("transpose", "ij->ji", &[&[5, 7]]),
        ("permute_implicit", "kji", &[&[2, 3, 4]]),
        ("row_sums", "ij->i", &[&[4, 9]]),
        ("total", "ijk->", &[&[3, 4, 5]]),
        ("inner", "i,i", &[&[17], &[17]]),
        ("outer", "i,j->ij", &[&[4], &[6]]),
        ("matvec", "ij,j->i", &[&[5, 8], &[8]]),
        ("trace", "ii", &[&[6, 6]]),
        ("batch_diagonal", "...ii->...i", &[&[2, 3, 4, 4]]),
        (
            "ellipsis_bcast",
            "...ij,...jk->...ik",
            &[&[2, 1, 3, 4], &[5, 4, 2]],
        ),
        ("bilinear", "bn,anm,bm->ba", &[&[2, 3], &[4, 3, 5], &[2, 5]]),
        ("scalar_operand", ",ij->ij", &[&[], &[3, 4]]),
        ("empty_sum", "ij,jk->ik", &[&[3, 0], &[0, 4]]),
    ];
    for &(desc, equation, shapes) in forms {
        let mut m = Maker::new(op, F32, desc);
        for s in shapes {
            m.input(s, &Fill::Range(-1.0, 1.0));
        }
        out.push(m.build(&[("equation", Attr::Str(equation.into()))])?);
    }
    for dtype in [F16, I32, I64] {
        let fill = if dtype.is_float() {
            Fill::Range(-1.0, 1.0)
        } else {
            Fill::Range(-20.0, 20.0)
        };
        let mut m = Maker::new(op, dtype, "batch_matmul");
        m.input(&[2, 3, 4], &fill).input(&[2, 4, 5], &fill);
        out.push(m.build(&[("equation", Attr::Str("bij,bjk->bik".into()))])?);
    }
    Ok(())
}

/// GridSample: every mode, padding mode and corner alignment in 2-D, grids reaching past
/// the image, 3-D volumes, and f16.
fn grid_sample(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::GridSample;
    let beyond = Fill::Range(-1.3, 1.3);
    for mode in ["nearest", "linear", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            for align in [0, 1] {
                let desc = format!("{mode}_{padding}_align{align}");
                let mut m = Maker::new(op, F32, &desc);
                m.input(&[2, 3, 5, 6], &Fill::Range(-1.0, 1.0))
                    .input(&[2, 4, 7, 2], &beyond);
                out.push(m.build(&grid_attrs(mode, padding, align))?);
            }
        }
    }
    for mode in ["nearest", "linear"] {
        let mut m = Maker::new(op, F32, &format!("volumetric_{mode}"));
        m.input(&[1, 2, 3, 4, 5], &Fill::Range(-1.0, 1.0))
            .input(&[1, 2, 3, 4, 3], &beyond);
        out.push(m.build(&grid_attrs(mode, "zeros", 0))?);
    }
    let mut m = Maker::new(op, F32, "one_pixel_reflection_align1");
    m.input(&[1, 2, 1, 1], &Fill::Range(-1.0, 1.0))
        .input(&[1, 3, 3, 2], &beyond);
    out.push(m.build(&grid_attrs("linear", "reflection", 1))?);
    let mut m = Maker::new(op, F16, "linear_border");
    m.input(&[1, 2, 4, 4], &Fill::Range(-1.0, 1.0))
        .input(&[1, 3, 5, 2], &beyond);
    out.push(m.build(&grid_attrs("linear", "border", 0))?);
    Ok(())
}

/// AffineGrid: 2-D and 3-D, both corner alignments, a one-pixel axis (its coordinate is
/// a special case with corners aligned), f16 theta, and an empty grid. The size is a
/// constant, as it decides the output's shape.
fn affine_grid(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::AffineGrid;
    type Form = (&'static str, DType, &'static [usize], &'static [i64]);
    let forms: &[Form] = &[
        ("2d", F32, &[2, 2, 3], &[2, 3, 5, 6]),
        ("3d", F32, &[2, 3, 4], &[2, 1, 3, 4, 5]),
        ("one_pixel_axis", F32, &[1, 2, 3], &[1, 1, 1, 4]),
        ("f16", F16, &[3, 2, 3], &[3, 2, 4, 4]),
        ("empty", F32, &[1, 2, 3], &[1, 1, 0, 3]),
    ];
    for &(desc, dtype, theta, size) in forms {
        for align in [0, 1] {
            let mut m = Maker::new(op, dtype, &format!("{desc}_align{align}"));
            m.input(theta, &Fill::Range(-2.0, 2.0))
                .operand(Tensor::from_i64(&[size.len()], size), true);
            out.push(m.build(&[("align_corners", Attr::Int(align))])?);
        }
    }
    Ok(())
}

fn grid_attrs(mode: &str, padding: &str, align: i64) -> Vec<(&'static str, Attr)> {
    vec![
        ("mode", Attr::Str(mode.into())),
        ("padding_mode", Attr::Str(padding.into())),
        ("align_corners", Attr::Int(align)),
    ]
}

/// DFT: real and complex input, forward and inverse, one-sided both ways, a padded and a
/// cut length, an outer axis and a negative one. Length and axis are constants.
fn dft(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::DFT;
    // (desc, input shape, dft_length, axis, inverse, onesided)
    type Form = (&'static str, &'static [usize], Option<i64>, i64, i64, i64);
    let forms: &[Form] = &[
        ("real", &[2, 12, 1], None, 1, 0, 0),
        ("complex", &[2, 12, 2], None, 1, 0, 0),
        ("real_onesided", &[3, 10, 1], None, -2, 0, 1),
        ("odd_onesided", &[2, 9, 1], None, 1, 0, 1),
        ("padded_16", &[2, 12, 2], Some(16), 1, 0, 0),
        ("cut_5", &[2, 12, 2], Some(5), 1, 0, 0),
        ("outer_axis", &[6, 3, 4, 2], None, 0, 0, 0),
        ("middle_axis", &[2, 7, 3, 2], None, -3, 0, 0),
        ("inverse", &[2, 12, 2], None, 1, 1, 0),
        ("inverse_onesided", &[2, 7, 2], None, 1, 1, 1),
        ("inverse_onesided_odd_9", &[2, 5, 2], Some(9), 1, 1, 1),
    ];
    for &(desc, shape, length, axis, inverse, onesided) in forms {
        let mut m = Maker::new(op, F32, desc);
        m.input(shape, &Fill::Range(-1.0, 1.0));
        match length {
            Some(n) => m.operand(Tensor::from_i64(&[], &[n]), true),
            None => m.operand(Tensor::from_f32(&[0], &[]), true),
        };
        m.operand(Tensor::from_i64(&[], &[axis]), true);
        let attrs = [
            ("inverse", Attr::Int(inverse)),
            ("onesided", Attr::Int(onesided)),
        ];
        out.push(m.build(&attrs)?);
    }
    Ok(())
}

/// STFT: with and without a window, two-sided, complex signal, hop longer than a frame.
fn stft(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::STFT;
    // (desc, signal shape, step, window length, frame_length, onesided)
    type Form = (
        &'static str,
        &'static [usize],
        i64,
        Option<usize>,
        Option<i64>,
        i64,
    );
    let forms: &[Form] = &[
        ("frames_16_step_8", &[2, 64, 1], 8, None, Some(16), 1),
        ("window_16_step_4", &[1, 64, 1], 4, Some(16), None, 1),
        ("window_and_length", &[1, 40, 1], 5, Some(10), Some(10), 1),
        ("twosided", &[1, 32, 1], 6, Some(8), None, 0),
        ("complex_signal", &[2, 30, 2], 7, Some(9), None, 0),
        ("hop_past_frame", &[1, 50, 1], 12, None, Some(7), 1),
    ];
    for &(desc, shape, step, window, frame_length, onesided) in forms {
        let mut m = Maker::new(op, F32, desc);
        m.input(shape, &Fill::Range(-1.0, 1.0));
        m.operand(Tensor::from_i64(&[], &[step]), true);
        match window {
            Some(w) => m.input(&[w], &Fill::Range(0.0, 1.0)),
            None => m.operand(Tensor::from_f32(&[0], &[]), true),
        };
        if let Some(f) = frame_length {
            m.operand(Tensor::from_i64(&[], &[f]), true);
        }
        out.push(m.build(&[("onesided", Attr::Int(onesided))])?);
    }
    Ok(())
}

/// The window ops: periodic and symmetric, even and odd sizes, one point, f16 and f64.
fn window(op: OpKind, out: &mut Vec<Case>) -> Result<()> {
    for (size, periodic) in [(16, 1), (16, 0), (15, 1), (15, 0), (1, 1), (1, 0)] {
        let desc = format!("size{size}_periodic{periodic}");
        let mut m = Maker::new(op, F32, &desc);
        m.operand(Tensor::from_i64(&[], &[size]), true);
        out.push(m.build(&[("periodic", Attr::Int(periodic))])?);
    }
    for (dtype, code) in [(F16, 10), (baton_delegate_api::DType::F64, 11)] {
        let mut m = Maker::new(op, dtype, "size10");
        m.operand(Tensor::from_i64(&[], &[10]), true);
        out.push(m.build(&[("output_datatype", Attr::Int(code))])?);
    }
    Ok(())
}

/// MelWeightMatrix: the backend test's speech-like sizes, wide filters of fractional
/// weights, a lower edge above 0, one mel bin, an odd DFT length, edges of f16 and f64,
/// and f16, f64 and i32 outputs. The three integer scalars are constants (two of them
/// give the output's shape); the edges are graph inputs.
fn mel_weight_matrix(out: &mut Vec<Case>) -> Result<()> {
    let op = OpKind::MelWeightMatrix;
    // (desc, out dtype, ONNX output_datatype, bins, dft, rate, edge dtype, low, high)
    type Form = (&'static str, DType, i64, i64, i64, i64, DType, f64, f64);
    let forms: &[Form] = &[
        ("bins8_dft16", F32, 1, 8, 16, 8192, F32, 0.0, 4096.0),
        ("bins3_dft64_wide", F32, 1, 3, 64, 16000, F32, 300.0, 8000.0),
        ("bins10_dft256", F32, 1, 10, 256, 16000, F32, 20.0, 7600.0),
        ("bins1_dft33_odd", F32, 1, 1, 33, 8000, F32, 100.0, 3000.0),
        ("bins4_f16_edges", F32, 1, 4, 64, 16000, F16, 125.0, 6000.0),
        (
            "bins4_f64_edges",
            F32,
            1,
            4,
            64,
            16000,
            DType::F64,
            125.0,
            6000.0,
        ),
        ("bins5_dft128", F16, 10, 5, 128, 22050, F32, 0.0, 11025.0),
        (
            "bins5_dft128",
            DType::F64,
            11,
            5,
            128,
            22050,
            F32,
            0.0,
            11025.0,
        ),
        ("bins5_dft128", I32, 6, 5, 128, 22050, F32, 0.0, 11025.0),
    ];
    for &(desc, dtype, code, bins, dft, rate, edges, low, high) in forms {
        let mut m = Maker::new(op, dtype, desc);
        for v in [bins, dft, rate] {
            m.operand(Tensor::from_i64(&[], &[v]), true);
        }
        for v in [low, high] {
            m.operand(super::gen::tensor(edges, &[], &[v]), false);
        }
        out.push(m.build(&[("output_datatype", Attr::Int(code))])?);
    }
    Ok(())
}
