//! MatMul, Gemm and Conv. Weights are constants scaled by 1/sqrt(fan-in), as in real
//! models, so accumulated errors stay comparable across sizes.

use baton_delegate_api::{Attr, DType, OpKind};

use super::gen::{ints, Fill, Maker};
use super::Case;
use crate::error::Result;

const UNIT: Fill = Fill::Range(-1.0, 1.0);

/// MatMul: 2-D, 1-D on either side, batched, broadcast batch, constant B, K = 1, empty.
pub fn matmul(out: &mut Vec<Case>) -> Result<()> {
    let shapes: &[(&str, &[usize], &[usize], bool)] = &[
        ("3x4_4x5", &[3, 4], &[4, 5], false),
        ("odd_13x33_33x7", &[13, 33], &[33, 7], false),
        ("vec_vec_7", &[7], &[7], false),
        ("vec_mat_7_7x3", &[7], &[7, 3], false),
        ("mat_vec_5x7_7", &[5, 7], &[7], false),
        ("batch_vec_2x5x3_3", &[2, 5, 3], &[3], false),
        ("batched_2x3x4_2x4x5", &[2, 3, 4], &[2, 4, 5], false),
        (
            "bcast_batch_2x1x5x3_4x3x6",
            &[2, 1, 5, 3],
            &[4, 3, 6],
            false,
        ),
        ("bcast_rank_3x2x4_4x5", &[3, 2, 4], &[4, 5], false),
        ("const_b_4x6_6x5", &[4, 6], &[6, 5], true),
        ("k1_5x1_1x5", &[5, 1], &[1, 5], false),
        ("1x1_1x1", &[1, 1], &[1, 1], false),
        ("long_k_2x129_129x3", &[2, 129], &[129, 3], false),
        ("empty_k_3x0_0x4", &[3, 0], &[0, 4], false),
        ("empty_m_0x4_4x3", &[0, 4], &[4, 3], false),
    ];
    for &(name, a, b, const_b) in shapes {
        let mut m = Maker::new(OpKind::MatMul, DType::F32, name);
        m.input(a, &UNIT);
        if const_b {
            m.constant(b, &UNIT);
        } else {
            m.input(b, &UNIT);
        }
        out.push(m.build(&[])?);
    }
    Ok(())
}

/// Gemm: transA/transB, alpha/beta, every broadcast form of C, no C, B as an input.
pub fn gemm(out: &mut Vec<Case>) -> Result<()> {
    let (m_, k, n) = (7usize, 13usize, 5usize);
    struct G {
        name: &'static str,
        trans_a: bool,
        trans_b: bool,
        c: Option<&'static [usize]>,
        alpha: Option<f32>,
        beta: Option<f32>,
        b_input: bool,
    }
    let g = |name| G {
        name,
        trans_a: false,
        trans_b: false,
        c: Some(&[5]),
        alpha: None,
        beta: None,
        b_input: false,
    };
    let cases = [
        g("basic_c_n"),
        G {
            trans_a: true,
            ..g("trans_a")
        },
        G {
            trans_b: true,
            ..g("trans_b")
        },
        G {
            trans_a: true,
            trans_b: true,
            ..g("trans_a_trans_b")
        },
        G {
            alpha: Some(0.5),
            beta: Some(2.0),
            ..g("alpha0.5_beta2")
        },
        G {
            beta: Some(0.0),
            ..g("beta0")
        },
        G {
            c: None,
            ..g("no_c")
        },
        G {
            c: Some(&[1, 5]),
            ..g("c_1xn")
        },
        G {
            c: Some(&[7, 1]),
            ..g("c_mx1")
        },
        G {
            c: Some(&[7, 5]),
            ..g("c_mxn")
        },
        G {
            c: Some(&[]),
            ..g("c_rank0")
        },
        G {
            c: Some(&[1]),
            ..g("c_1")
        },
        G {
            b_input: true,
            trans_b: true,
            ..g("b_input_trans_b")
        },
    ];
    let scale = 1.0 / (k as f64).sqrt();
    for c in &cases {
        let mut mk = Maker::new(OpKind::Gemm, DType::F32, c.name);
        let a_shape = if c.trans_a { [k, m_] } else { [m_, k] };
        mk.input(&a_shape, &UNIT);
        let b_shape = if c.trans_b { [n, k] } else { [k, n] };
        if c.b_input {
            mk.input(&b_shape, &Fill::Range(-scale, scale));
        } else {
            mk.constant(&b_shape, &Fill::Range(-scale, scale));
        }
        if let Some(cs) = c.c {
            mk.constant(cs, &UNIT);
        }
        let mut attrs = Vec::new();
        if c.trans_a {
            attrs.push(("transA", Attr::Int(1)));
        }
        if c.trans_b {
            attrs.push(("transB", Attr::Int(1)));
        }
        if let Some(a) = c.alpha {
            attrs.push(("alpha", Attr::Float(a)));
        }
        if let Some(b) = c.beta {
            attrs.push(("beta", Attr::Float(b)));
        }
        out.push(mk.build(&attrs)?);
    }
    for (name, a, b, c) in [
        (
            "k1_33x1_1x33",
            [33usize, 1usize],
            [1usize, 33usize],
            33usize,
        ),
        ("empty_m_0x4", [0, 4], [4, 3], 3),
    ] {
        let mut mk = Maker::new(OpKind::Gemm, DType::F32, name);
        mk.input(&a, &UNIT)
            .constant(&b, &UNIT)
            .constant(&[c], &UNIT);
        out.push(mk.build(&[])?);
    }
    // beta = 0 means C is not read: a NaN or an infinity in C must not reach the result.
    let mut mk = Maker::new(OpKind::Gemm, DType::F32, "beta0_nonfinite_c");
    mk.input(&[m_, k], &UNIT)
        .constant(&[k, n], &Fill::Range(-scale, scale))
        .constant(&[n], &Fill::Cycle(vec![f64::NAN, f64::INFINITY, 1.0]));
    out.push(mk.build(&[("beta", Attr::Float(0.0))])?);
    Ok(())
}

/// Conv, 1-D and 2-D: strides, pads (symmetric and not), dilations, groups (including
/// depthwise and channel multipliers), auto_pad SAME_UPPER and VALID, with and without
/// bias, odd sizes, size-1 spatial dims and an empty batch.
pub fn conv(out: &mut Vec<Case>) -> Result<()> {
    type C = (
        &'static str,
        &'static [usize],
        &'static [usize],
        Vec<(&'static str, Attr)>,
        bool,
    );
    let same = || ("auto_pad", Attr::Str("SAME_UPPER".into()));
    let valid = || ("auto_pad", Attr::Str("VALID".into()));
    let cases: Vec<C> = vec![
        ("1d_basic", &[1, 2, 13], &[3, 2, 3], vec![], true),
        ("1d_nobias", &[1, 2, 13], &[3, 2, 3], vec![], false),
        (
            "1d_stride2",
            &[1, 2, 13],
            &[3, 2, 3],
            vec![("strides", ints(&[2]))],
            true,
        ),
        (
            "1d_pad1",
            &[1, 2, 13],
            &[3, 2, 3],
            vec![("pads", ints(&[1, 1]))],
            true,
        ),
        (
            "1d_dil2",
            &[1, 2, 13],
            &[3, 2, 3],
            vec![("dilations", ints(&[2]))],
            true,
        ),
        (
            "1d_group2",
            &[1, 4, 13],
            &[6, 2, 3],
            vec![("group", Attr::Int(2))],
            true,
        ),
        (
            "1d_depthwise",
            &[1, 4, 13],
            &[4, 1, 3],
            vec![("group", Attr::Int(4))],
            true,
        ),
        (
            "1d_same_upper_stride2",
            &[1, 2, 13],
            &[3, 2, 3],
            vec![same(), ("strides", ints(&[2]))],
            true,
        ),
        ("1d_valid", &[1, 2, 13], &[3, 2, 4], vec![valid()], true),
        ("1d_k1", &[1, 2, 7], &[5, 2, 1], vec![], true),
        ("2d_basic", &[1, 3, 7, 7], &[4, 3, 3, 3], vec![], true),
        ("2d_nobias", &[1, 3, 7, 7], &[4, 3, 3, 3], vec![], false),
        (
            "2d_pad1",
            &[1, 3, 7, 7],
            &[4, 3, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1]))],
            true,
        ),
        (
            "2d_stride2_pad1",
            &[1, 3, 13, 13],
            &[4, 3, 3, 3],
            vec![("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))],
            true,
        ),
        (
            "2d_dil2",
            &[1, 3, 13, 13],
            &[4, 3, 3, 3],
            vec![("dilations", ints(&[2, 2]))],
            true,
        ),
        (
            "2d_group2",
            &[1, 4, 7, 7],
            &[6, 2, 3, 3],
            vec![("group", Attr::Int(2))],
            true,
        ),
        (
            "2d_group2_dil2_pad1",
            &[1, 4, 13, 13],
            &[6, 2, 3, 3],
            vec![
                ("group", Attr::Int(2)),
                ("dilations", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
            true,
        ),
        (
            "2d_depthwise",
            &[1, 8, 7, 7],
            &[8, 1, 3, 3],
            vec![("group", Attr::Int(8)), ("pads", ints(&[1, 1, 1, 1]))],
            true,
        ),
        (
            "2d_depthwise_mult2",
            &[1, 8, 7, 7],
            &[16, 1, 3, 3],
            vec![("group", Attr::Int(8))],
            false,
        ),
        (
            "2d_same_upper",
            &[1, 3, 7, 7],
            &[4, 3, 3, 3],
            vec![same()],
            true,
        ),
        (
            "2d_same_upper_stride2",
            &[1, 3, 13, 13],
            &[4, 3, 4, 4],
            vec![same(), ("strides", ints(&[2, 2]))],
            true,
        ),
        (
            "2d_valid_stride2",
            &[1, 3, 13, 13],
            &[4, 3, 3, 3],
            vec![valid(), ("strides", ints(&[2, 2]))],
            true,
        ),
        (
            "2d_asym_pads",
            &[1, 3, 7, 7],
            &[4, 3, 3, 3],
            vec![("pads", ints(&[0, 1, 2, 1]))],
            true,
        ),
        ("2d_1x1", &[1, 3, 7, 7], &[5, 3, 1, 1], vec![], true),
        (
            "2d_rect_kernel_1x5",
            &[1, 3, 7, 7],
            &[4, 3, 1, 5],
            vec![
                ("pads", ints(&[0, 2, 0, 2])),
                ("kernel_shape", ints(&[1, 5])),
            ],
            true,
        ),
        ("2d_batch2_odd", &[2, 3, 13, 7], &[4, 3, 3, 3], vec![], true),
        (
            "2d_stride2x1_dil1x2",
            &[1, 3, 13, 13],
            &[4, 3, 3, 3],
            vec![("strides", ints(&[2, 1])), ("dilations", ints(&[1, 2]))],
            true,
        ),
        (
            "2d_kernel_eq_input",
            &[1, 2, 5, 5],
            &[3, 2, 5, 5],
            vec![],
            true,
        ),
        (
            "2d_size1_spatial",
            &[1, 3, 1, 1],
            &[2, 3, 1, 1],
            vec![],
            true,
        ),
        (
            "2d_33_channels",
            &[1, 33, 5, 5],
            &[7, 33, 3, 3],
            vec![],
            true,
        ),
        ("2d_empty_batch", &[0, 3, 5, 5], &[4, 3, 3, 3], vec![], true),
    ];
    for (name, x, w, attrs, bias) in cases {
        let fan_in: usize = w[1..].iter().product();
        let scale = 1.0 / (fan_in.max(1) as f64).sqrt();
        let mut m = Maker::new(OpKind::Conv, DType::F32, name);
        m.input(x, &UNIT).constant(w, &Fill::Range(-scale, scale));
        if bias {
            m.constant(&[w[0]], &Fill::Range(-0.5, 0.5));
        }
        out.push(m.build(&attrs)?);
    }
    Ok(())
}
