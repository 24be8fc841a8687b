//! Writes the quantized-front, float-head example model (`sample::mixed`) and its input to
//! `examples/mixed/` at the repo root.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/mixed");
    std::fs::create_dir_all(&dir)?;
    let graph = baton_runtime_host::sample::mixed();
    let (bytes, _) =
        baton_delegate_api::wire::encode(&graph, baton_delegate_api::wire::ConstMode::Inline);
    std::fs::write(dir.join("mixed.btir"), bytes)?;
    baton_runtime_host::npy::write(
        &dir.join("image.npy"),
        &baton_runtime_host::sample::mixed_input(),
    )?;
    println!("wrote {}", dir.display());
    Ok(())
}
