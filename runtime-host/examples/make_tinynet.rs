//! Writes the bundled example model and input to `examples/tinynet/` at the repo root.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/tinynet");
    std::fs::create_dir_all(&dir)?;
    let graph = baton_runtime_host::sample::tinynet();
    let (bytes, _) =
        baton_delegate_api::wire::encode(&graph, baton_delegate_api::wire::ConstMode::Inline);
    std::fs::write(dir.join("tinynet.btir"), bytes)?;
    baton_runtime_host::npy::write(
        &dir.join("image.npy"),
        &baton_runtime_host::sample::tinynet_input(),
    )?;
    println!("wrote {}", dir.display());
    Ok(())
}
