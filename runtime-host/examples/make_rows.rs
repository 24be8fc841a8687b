//! Writes the dynamic-region example to `examples/dynamic/` at the repo root: `y =
//! Relu(Compress(2x, x[:, 0] > 0, axis 0) · w)` over `x` `[100, 4]`. How many rows reach
//! the MatMul depends on the values of `x`, so a session runs it in stages (see the
//! README's "Dynamic regions").

use std::path::PathBuf;

use baton_delegate_api::{Attr, DType, GraphBuilder, OpKind, Tensor};

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/dynamic");
    std::fs::create_dir_all(&dir)?;
    let mut b = GraphBuilder::new("rows");
    let x = b.input_fixed("x", DType::F32, &[100, 4]);
    let two = b.constant_f32("two", &[], &[2.0]);
    let scaled = b.node(OpKind::Mul, &[x, two], &[])?;
    let first = b.constant_i64("first_column", &[], &[0]);
    let col = b.node(OpKind::Gather, &[scaled, first], &[("axis", Attr::Int(1))])?;
    let zero = b.constant_f32("zero", &[], &[0.0]);
    let mask = b.node(OpKind::Greater, &[col, zero], &[])?;
    let rows = b.named_node(
        "keep_rows",
        OpKind::Compress,
        &[scaled, mask],
        &[("axis", Attr::Int(0))],
    )?;
    let w: Vec<f32> = (0..12).map(|i| ((i * 5) % 12) as f32 * 0.2 - 0.6).collect();
    let w = b.constant_f32("w", &[4, 3], &w);
    let prod = b.node(OpKind::MatMul, &[rows, w], &[])?;
    let y = b.node(OpKind::Relu, &[prod], &[])?;
    b.rename(y, "y");
    b.output(y);
    let graph = b.finish()?;
    let (bytes, _) =
        baton_delegate_api::wire::encode(&graph, baton_delegate_api::wire::ConstMode::Inline);
    std::fs::write(dir.join("rows.btir"), bytes)?;
    // About a third of the rows start positive.
    let x: Vec<f32> = (0..400)
        .map(|i| ((i * 7) % 13) as f32 / 6.0 - 1.4)
        .collect();
    baton_runtime_host::npy::write(&dir.join("x.npy"), &Tensor::from_f32(&[100, 4], &x))?;
    println!("wrote {}", dir.display());
    Ok(())
}
