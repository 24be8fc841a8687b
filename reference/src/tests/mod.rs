//! Tests of the reference kernels against hand-computed values (or, for the larger Conv
//! case, an independent naive formula written differently from the kernel).

mod activation;
mod attention;
mod control;
mod conv;
mod dtypes;
mod elementwise;
mod generate;
mod graph;
mod index_ops;
mod linalg;
mod linear_attention;
mod math_extra;
mod math_graph;
mod math_logic;
mod math_norm;
mod math_reduce;
mod math_unary;
mod pool;
mod robustness;
mod select;
mod shape_ops;
mod signal;
mod spatial;
mod tensor_ops;
mod tensor_ops_layers;

use baton_delegate_api::ir::{Attr, DType, Node, OpKind};
use baton_delegate_api::{Tensor, TensorRef};
use half::f16;

use super::{check_operands, expected_outputs, run_node, KernelError};

/// A node reading tensors `0..n_inputs` and writing tensor `n_inputs`.
fn node(op: OpKind, n_inputs: usize, attrs: &[(&str, Attr)]) -> Node {
    Node {
        name: format!("test_{}", op.name().to_lowercase()),
        op,
        inputs: (0..n_inputs).collect(),
        outputs: vec![n_inputs],
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// Runs `node` on `inputs` into an output of the shape the op produces (or, when there
/// is none, an empty `[0]` output, which the kernel must refuse without panicking).
///
/// The shape comes from `infer_outputs` behind the kernels' own operand checks, which also
/// keep it from the operand shapes it cannot take (see `guard_geometry`); the tests assert
/// the shapes they expect literally.
fn run(node: &Node, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
    let first = check_operands(node, &views)
        .and_then(|()| expected_outputs(node, &views))
        .ok()
        .and_then(|outs| outs.into_iter().next());
    let (dtype, shape) = first.unwrap_or((inputs.first().map_or(DType::F32, |t| t.dtype), vec![0]));
    let mut out = Tensor::zeros(dtype, &shape);
    run_node(node, &views, &mut [out.view_mut()])?;
    Ok(out)
}

/// Runs a node that must succeed and returns the f32 output with its shape.
fn run_f32(node: &Node, inputs: &[Tensor]) -> (Vec<usize>, Vec<f32>) {
    let out = run(node, inputs).unwrap_or_else(|e| panic!("{e}"));
    (out.shape.clone(), out.f32s().to_vec())
}

fn f32t(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f32(shape, values)
}

fn typed<T: bytemuck::Pod>(dtype: DType, shape: &[usize], values: &[T]) -> Tensor {
    Tensor::from_bytes(dtype, shape, bytemuck::cast_slice(values))
}

fn f16t(shape: &[usize], values: &[f32]) -> Tensor {
    let bits: Vec<u16> = values.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
    typed(DType::F16, shape, &bits)
}

fn f16_values(t: &Tensor) -> Vec<f32> {
    assert_eq!(t.dtype, DType::F16);
    t.values::<u16>()
        .iter()
        .map(|&b| f16::from_bits(b).to_f32())
        .collect()
}

/// `1, 2, ..., n` as f32.
fn iota(n: usize) -> Vec<f32> {
    (1..=n).map(|v| v as f32).collect()
}

/// Element-wise comparison within `tol` (absolute); NaN must match NaN.
#[track_caller]
fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length: got {got:?}, want {want:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol
        };
        assert!(
            ok,
            "element {i}: got {g}, want {w} (tol {tol})\n got {got:?}\nwant {want:?}"
        );
    }
}

/// Exact comparison including the sign of zero and NaN-ness.
#[track_caller]
fn assert_bits(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "length: got {got:?}, want {want:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        assert!(
            ok,
            "element {i}: got {g:?}, want {w:?}\n got {got:?}\nwant {want:?}"
        );
    }
}
