//! Cast, the comparisons and Where: the kernels that hold dtypes besides the floats
//! (`cast.wgsl`, `compare.wgsl`, `select.wgsl`). Their element codes are shared with
//! those files.

use baton_delegate_api::ir::{DType, Node, OpKind, TensorId};
use baton_delegate_api::{Decline, DeclineReason};

use super::{broadcast_strides, normalize_axis, pad6, Context, Draft, Lowered};

/// The element code the word kernels switch on: 0 f32, 1 i32, 2 i64, 3 bool.
fn code(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 0,
        DType::I32 => 1,
        DType::I64 => 2,
        _ => 3,
    }
}

/// Invocations of a kernel writing `n` elements of `dtype`: a bool output is written a
/// word (four elements) per invocation.
fn invocations(dtype: DType, n: usize) -> usize {
    if dtype == DType::Bool {
        n.div_ceil(4)
    } else {
        n
    }
}

/// Cast between f32, i32, i64 and bool.
pub fn cast(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let x = node.inputs[0];
    let shape = cx.word_tensor(x, node.op)?;
    let y = cx.word_tensor(out, node.op)?;
    if shape != y {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{}: declared output {y:?}, the input is {shape:?}",
                node.label()
            ),
        ));
    }
    let (from, to) = (cx.graph.tensors[x].dtype, cx.graph.tensors[out].dtype);
    let n: usize = y.iter().product();
    cx.one_dimensional(
        "cast",
        invocations(to, n),
        [Some(x), None, None, Some(out)],
        vec![n as u32, code(from), code(to)],
    )
}

/// Equal, Less, Greater, LessOrEqual and GreaterOrEqual, with broadcasting, into bool.
pub fn compare(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let (a, b) = (node.inputs[0], node.inputs[1]);
    let a_shape = cx.word_tensor(a, node.op)?;
    let b_shape = cx.word_tensor(b, node.op)?;
    let y = cx.word_tensor(out, node.op)?;
    let (da, db) = (cx.graph.tensors[a].dtype, cx.graph.tensors[b].dtype);
    if da != db || cx.graph.tensors[out].dtype != DType::Bool {
        return Err(Decline::new(
            DeclineReason::DType,
            format!(
                "{}: operands {da} and {db} into {} (expected one dtype into bool)",
                node.label(),
                cx.graph.tensors[out].dtype
            ),
        ));
    }
    if da == DType::Bool && node.op != OpKind::Equal {
        return Err(Decline::new(
            DeclineReason::DType,
            format!("{}: bool operands are ordered by Equal only", node.label()),
        ));
    }
    check_shape(cx, node, &y)?;
    let op = match node.op {
        OpKind::Equal => 1,
        OpKind::Less => 2,
        OpKind::Greater => 3,
        OpKind::LessOrEqual => 4,
        _ => 5,
    };
    let n: usize = y.iter().product();
    let mut p = vec![n as u32, op, code(da)];
    p.extend(pad6(&y, 1));
    p.extend(pad6(&broadcast_strides(&a_shape, &y), 0));
    p.extend(pad6(&broadcast_strides(&b_shape, &y), 0));
    cx.one_dimensional(
        "compare",
        invocations(DType::Bool, n),
        [Some(a), Some(b), None, Some(out)],
        p,
    )
}

/// Where(condition, X, Y) with broadcasting, for f32, i32 and i64 X and Y.
pub fn where_(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let (c, x, z) = (node.inputs[0], node.inputs[1], node.inputs[2]);
    let c_shape = cx.word_tensor(c, node.op)?;
    let x_shape = cx.word_tensor(x, node.op)?;
    let z_shape = cx.word_tensor(z, node.op)?;
    let y = cx.word_tensor(out, node.op)?;
    let t = |i: TensorId| cx.graph.tensors[i].dtype;
    if t(c) != DType::Bool || t(x) != t(out) || t(z) != t(out) || t(out) == DType::Bool {
        return Err(Decline::new(
            DeclineReason::DType,
            format!(
                "{}: condition {}, X {}, Y {} into {} (expected a bool condition and \
                 f32, i32 or i64 values of the output's dtype; bool values are not \
                 selected here)",
                node.label(),
                t(c),
                t(x),
                t(z),
                t(out)
            ),
        ));
    }
    check_shape(cx, node, &y)?;
    let n: usize = y.iter().product();
    let words = (t(out).size() / 4) as u32;
    let mut p = vec![n as u32, words];
    p.extend(pad6(&y, 1));
    for s in [&c_shape, &x_shape, &z_shape] {
        p.extend(pad6(&broadcast_strides(s, &y), 0));
    }
    cx.one_dimensional("select", n, [Some(c), Some(x), Some(z), Some(out)], p)
}

/// Gather along any axis with constant or run-time i32/i64 indices, of f32, i32 or i64
/// data.
pub fn gather(cx: &Context<'_>, node: &Node, out: TensorId) -> Lowered<Draft> {
    let (x, idx) = (node.inputs[0], node.inputs[1]);
    let xs = cx.word_tensor(x, node.op)?;
    let is = cx.word_tensor(idx, node.op)?;
    let y = cx.word_tensor(out, node.op)?;
    let t = |i: TensorId| cx.graph.tensors[i].dtype;
    if t(x) == DType::Bool || t(out) != t(x) || !matches!(t(idx), DType::I32 | DType::I64) {
        return Err(Decline::new(
            DeclineReason::DType,
            format!(
                "{}: data {} into {} with {} indices (expected f32, i32 or i64 data and \
                 i32 or i64 indices; bool data is not gathered here)",
                node.label(),
                t(x),
                t(out),
                t(idx)
            ),
        ));
    }
    check_shape(cx, node, &y)?;
    let axis = normalize_axis(node.attr_int("axis", 0), xs.len())
        .map_err(|e| Decline::new(DeclineReason::Attribute, format!("{}: {e}", node.label())))?;
    let n: usize = y.iter().product();
    let inner: usize = xs[axis + 1..].iter().product();
    let count: usize = is.iter().product();
    let p = vec![
        n as u32,
        inner as u32,
        count as u32,
        xs[axis] as u32,
        (t(x).size() / 4) as u32,
        (t(idx).size() / 4) as u32,
    ];
    cx.one_dimensional("gather", n, [Some(x), Some(idx), None, Some(out)], p)
}

/// The declared output shape must be the one the IR's rules give.
fn check_shape(cx: &Context<'_>, node: &Node, y: &[usize]) -> Lowered<()> {
    let expected = super::infer(cx, node)?;
    if expected != y {
        return Err(Decline::new(
            DeclineReason::Shape,
            format!(
                "{}: declared output {y:?}, the op gives {expected:?}",
                node.label()
            ),
        ));
    }
    Ok(())
}
