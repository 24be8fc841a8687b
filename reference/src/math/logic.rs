//! Comparisons (Equal, Greater, Less), logic (Not, And), the bit ops and Where. Bool results are
//! stored as bytes 0 and 1; a bool operand byte counts as true when non-zero.

use std::cmp::Ordering;

use baton_delegate_api::ir::{Node, OpKind};
use baton_delegate_api::{TensorMut, TensorRef};

use crate::data::{broadcast_offsets, load, load_f64, load_ints, store, store_ints};
use crate::{unsupported, KernelError};

/// `a == b`, `a > b` or `a < b` with broadcasting, into a bool output. Floats compare as
/// IEEE values (widened to f64 exactly); integers exactly; bools as truth values.
pub(crate) fn compare(
    node: &Node,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let want: fn(Option<Ordering>) -> bool = match node.op {
        OpKind::Equal => |o| o == Some(Ordering::Equal),
        OpKind::Greater => |o| o == Some(Ordering::Greater),
        OpKind::Less => |o| o == Some(Ordering::Less),
        OpKind::GreaterOrEqual => |o| matches!(o, Some(Ordering::Greater | Ordering::Equal)),
        OpKind::LessOrEqual => |o| matches!(o, Some(Ordering::Less | Ordering::Equal)),
        op => return Err(unsupported(node, format!("{op} is not a comparison"))),
    };
    let shape = out.shape().to_vec();
    let ia = broadcast_offsets(a.shape, &shape);
    let ib = broadcast_offsets(b.shape, &shape);
    // `partial_cmp` is `None` exactly when a NaN is involved, which no comparison accepts.
    let r: Vec<u8> = if a.dtype.is_float() {
        let (x, y) = (load_f64(a), load_f64(b));
        zip_map(&ia, &ib, |i, j| want(x[i].partial_cmp(&y[j])))
    } else {
        let (x, y) = (load_ints(a), load_ints(b));
        zip_map(&ia, &ib, |i, j| want(x[i].partial_cmp(&y[j])))
    };
    store(out, &r);
    Ok(())
}

/// BitwiseAnd, BitwiseOr, BitwiseXor or BitShift of two integer tensors of one dtype, with
/// broadcasting. Values are handled as their two's-complement bits (exact in i128) and
/// wrapped back to the dtype.
pub(crate) fn bitwise(
    node: &Node,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let shape = out.shape().to_vec();
    let (ia, ib) = (
        broadcast_offsets(a.shape, &shape),
        broadcast_offsets(b.shape, &shape),
    );
    let (x, y) = (load_ints(a), load_ints(b));
    let bits = 8 * a.dtype.size() as i128;
    let left = match node.attr_str("direction", "") {
        "LEFT" => true,
        "RIGHT" => false,
        other if node.op == OpKind::BitShift => {
            let m = format!("BitShift direction must be LEFT or RIGHT, got '{other}'");
            return Err(unsupported(node, m));
        }
        _ => false,
    };
    let f = |p: i128, q: i128| match node.op {
        OpKind::BitwiseAnd => p & q,
        OpKind::BitwiseOr => p | q,
        OpKind::BitwiseXor => p ^ q,
        // Unsigned operands: `p` and `q` are not negative.
        _ if q >= bits => 0,
        _ if left => p << q,
        _ => p >> q,
    };
    let r: Vec<i128> = ia.iter().zip(&ib).map(|(&i, &j)| f(x[i], y[j])).collect();
    store_ints(out, &r);
    Ok(())
}

/// The bitwise complement of an integer tensor.
pub(crate) fn bitwise_not(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let r: Vec<i128> = load_ints(x).into_iter().map(|v| !v).collect();
    store_ints(out, &r);
    Ok(())
}

/// Logical not of a bool tensor.
pub(crate) fn not(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let r: Vec<u8> = load::<u8>(x).into_iter().map(|b| (b == 0) as u8).collect();
    store(out, &r);
    Ok(())
}

/// Logical and, or or xor of two bool tensors with broadcasting.
pub(crate) fn and(
    op: OpKind,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<(), KernelError> {
    let shape = out.shape().to_vec();
    let (ia, ib) = (
        broadcast_offsets(a.shape, &shape),
        broadcast_offsets(b.shape, &shape),
    );
    let (x, y) = (load::<u8>(a), load::<u8>(b));
    let f = match op {
        OpKind::Or => |p: bool, q: bool| p || q,
        OpKind::Xor => |p: bool, q: bool| p != q,
        _ => |p: bool, q: bool| p && q,
    };
    store(out, &zip_map(&ia, &ib, |i, j| f(x[i] != 0, y[j] != 0)));
    Ok(())
}

/// Where: each output element is copied bit for bit from `X` where the condition is true,
/// else from `Y`, all three broadcast to the output's shape.
pub(crate) fn select(inputs: &[TensorRef<'_>], out: &mut TensorMut<'_>) -> Result<(), KernelError> {
    let (cond, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
    let shape = out.shape().to_vec();
    let ic = broadcast_offsets(cond.shape, &shape);
    let ix = broadcast_offsets(x.shape, &shape);
    let iy = broadcast_offsets(y.shape, &shape);
    let size = x.dtype.size();
    let c = load::<u8>(cond);
    for (k, chunk) in out.data.chunks_exact_mut(size).enumerate() {
        let (src, at) = if c[ic[k]] != 0 {
            (x.data, ix[k])
        } else {
            (y.data, iy[k])
        };
        chunk.copy_from_slice(&src[at * size..(at + 1) * size]);
    }
    Ok(())
}

/// `f(i, j)` as a bool byte for each pair of broadcast offsets.
fn zip_map(ia: &[usize], ib: &[usize], f: impl Fn(usize, usize) -> bool) -> Vec<u8> {
    ia.iter().zip(ib).map(|(&i, &j)| f(i, j) as u8).collect()
}
