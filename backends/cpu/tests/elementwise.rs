//! Element-wise ops and Softmax against naive implementations written here, through the
//! delegate lifecycle: numpy broadcasting, empty tensors, signed zeros, NaN, infinities
//! and large values.

mod common;

use baton_delegate_api::ir::{Attr, OpKind, TensorId};
use baton_delegate_api::testing::Rng;
use common::case::{indices, offset, Case};

fn binary_naive(
    op: OpKind,
    a: &[f32],
    sa: &[usize],
    b: &[f32],
    sb: &[usize],
    out: &[usize],
) -> Vec<f64> {
    indices(out)
        .iter()
        .map(|idx| {
            let (x, y) = (a[offset(sa, idx)], b[offset(sb, idx)]);
            (match op {
                OpKind::Add => x + y,
                OpKind::Sub => x - y,
                OpKind::Mul => x * y,
                _ => x / y,
            }) as f64
        })
        .collect()
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    let shapes: &[(&[usize], &[usize])] = &[
        (&[2, 3], &[2, 3]),
        (&[2, 3, 4], &[4]),
        (&[4], &[2, 3, 4]),
        (&[2, 1, 4], &[3, 1]),
        (&[1], &[5, 1, 1]),
        (&[], &[2, 2]),
        (&[3, 1, 5, 1], &[1, 4, 1, 2]),
        (&[0, 3], &[1, 3]),
        (&[2, 1, 1, 1, 1, 3], &[2, 2, 2, 2, 1]),
    ];
    for (i, &(sa, sb)) in shapes.iter().enumerate() {
        for op in [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div] {
            let mut c = Case::new(i as u64);
            let (a, av) = c.input(sa, 3.0);
            let (b, bv) = c.input(sb, 3.0);
            let y = c.node(op, &[a, b], &[]);
            let done = c.finish(&[y]);
            let want = binary_naive(op, &av, sa, &bv, sb, &done.shape(y));
            done.check(&[want], 1e-6, &format!("{op} {sa:?} {sb:?}"));
        }
    }
}

#[test]
fn binary_ops_with_a_constant_operand_and_special_values() {
    let mut c = Case::new(1);
    let v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e38,
        -1e38,
        3.0,
    ];
    let (a, av) = c.input_values(&[2, 4], v);
    let bv = vec![0.0, -0.0, f32::INFINITY, 1e38];
    let b = c.g.constant_f32("b", &[4], &bv);
    let ys: Vec<TensorId> = [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div]
        .iter()
        .map(|&op| c.node(op, &[a, b], &[]))
        .collect();
    let want: Vec<Vec<f64>> = [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div]
        .iter()
        .map(|&op| binary_naive(op, &av, &[2, 4], &bv, &[4], &[2, 4]))
        .collect();
    c.check(&ys, &want, 1e-6, "special values");
}

/// A unary op, its attributes and a scalar reference function.
type UnaryCase = (OpKind, Vec<(&'static str, Attr)>, Box<dyn Fn(f64) -> f64>);

#[test]
fn unary_ops_including_nan_and_infinities() {
    let mut rng = Rng::new(3);
    let mut v: Vec<f32> = rng.vec(40).into_iter().map(|x| x * 20.0).collect();
    v.extend([
        0.0,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e30,
        -1e30,
        88.8,
        -104.0,
    ]);
    let shape = [v.len()];
    let cases: Vec<UnaryCase> = vec![
        (
            OpKind::Relu,
            vec![],
            Box::new(|x| if x < 0.0 { 0.0 } else { x }),
        ),
        (
            OpKind::Sigmoid,
            vec![],
            Box::new(|x| 1.0 / (1.0 + (-x).exp())),
        ),
        (OpKind::Tanh, vec![], Box::new(f64::tanh)),
        (
            OpKind::Clip,
            vec![("min", Attr::Float(-1.5)), ("max", Attr::Float(2.0))],
            Box::new(|x| if x.is_nan() { x } else { x.clamp(-1.5, 2.0) }),
        ),
        (
            OpKind::Clip,
            vec![("min", Attr::Float(3.0)), ("max", Attr::Float(1.0))],
            Box::new(|x| if x.is_nan() { x } else { 1.0 }),
        ),
        (
            OpKind::Clip,
            vec![],
            Box::new(|x| {
                if x.is_nan() {
                    x
                } else {
                    x.clamp(f32::MIN as f64, f32::MAX as f64)
                }
            }),
        ),
    ];
    for (op, attrs, f) in cases {
        let mut c = Case::new(0);
        let (x, _) = c.input_values(&shape, v.clone());
        let y = c.node(op, &[x], &attrs);
        let want: Vec<f64> = v.iter().map(|&x| f(x as f64) as f32 as f64).collect();
        c.check(&[y], &[want], 1e-6, &format!("{op} {attrs:?}"));
    }
    // Clip with constant bound inputs.
    let mut c = Case::new(0);
    let (x, _) = c.input_values(&shape, v.clone());
    let lo = c.g.constant_f32("lo", &[], &[-0.5]);
    let hi = c.g.constant_f32("hi", &[1], &[0.25]);
    let y = c.node(OpKind::Clip, &[x, lo, hi], &[]);
    let want: Vec<f64> = v
        .iter()
        .map(|&x| {
            if x.is_nan() {
                f64::NAN
            } else {
                (x as f64).clamp(-0.5, 0.25)
            }
        })
        .collect();
    c.check(&[y], &[want], 1e-6, "Clip with bound inputs");
}

fn softmax_naive(x: &[f32], shape: &[usize], axis: usize) -> Vec<f64> {
    let (outer, n) = (shape[..axis].iter().product::<usize>(), shape[axis]);
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = vec![0f64; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let max = (0..n)
                .map(|j| x[at(j)] as f64)
                .fold(f64::NEG_INFINITY, |a, b| {
                    if a.is_nan() || b.is_nan() {
                        f64::NAN
                    } else {
                        a.max(b)
                    }
                });
            let sum: f64 = (0..n).map(|j| (x[at(j)] as f64 - max).exp()).sum();
            for j in 0..n {
                out[at(j)] = (x[at(j)] as f64 - max).exp() / sum;
            }
        }
    }
    out
}

#[test]
fn softmax_on_any_axis() {
    let shape = [2, 3, 4, 5];
    for axis in -4..4i64 {
        let mut c = Case::new((axis + 10) as u64);
        let (x, xv) = c.input(&shape, 10.0);
        let y = c.node(OpKind::Softmax, &[x], &[("axis", Attr::Int(axis))]);
        let a = if axis < 0 { axis + 4 } else { axis } as usize;
        c.check(
            &[y],
            &[softmax_naive(&xv, &shape, a)],
            1e-5,
            &format!("axis {axis}"),
        );
    }
    // Large values, -Inf and NaN in some rows, and a default axis.
    let mut c = Case::new(0);
    let v = vec![
        1e30,
        1e30,
        -1e30,
        0.0,
        f32::NEG_INFINITY,
        1.0,
        2.0,
        f32::NAN,
        3.0,
        4.0,
        5.0,
        6.0,
    ];
    let (x, xv) = c.input_values(&[3, 4], v);
    let y = c.node(OpKind::Softmax, &[x], &[]);
    c.check(&[y], &[softmax_naive(&xv, &[3, 4], 1)], 1e-5, "special");
    // Empty tensors.
    let mut c = Case::new(0);
    let (x, _) = c.input(&[0, 3], 1.0);
    let y = c.node(OpKind::Softmax, &[x], &[("axis", Attr::Int(1))]);
    let (x2, _) = c.input(&[3, 0], 1.0);
    let y2 = c.node(OpKind::Softmax, &[x2], &[("axis", Attr::Int(1))]);
    c.check(&[y, y2], &[vec![], vec![]], 1e-5, "empty");
}
