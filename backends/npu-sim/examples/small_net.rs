//! Writes a small quantized conv net, an input and a config that lists npu-sim then the
//! CPU plugin, so that `baton run --profile` shows the NPU's per-command cycle estimates:
//!
//! ```text
//! cargo build -p baton-backend-npu-sim-plugin -p baton-backend-cpu-plugin -p baton-cli
//! cargo run -p baton-backend-npu-sim --example small_net -- /tmp/npu-demo
//! target/debug/baton run /tmp/npu-demo/small_net.btir --input image=/tmp/npu-demo/image.npy \
//!     --config /tmp/npu-demo/baton.toml --profile
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use baton_delegate_api::wire::{self, ConstMode};

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "npu-demo".into()));
    std::fs::create_dir_all(&dir)?;
    let (graph, inputs) = common::small_net();
    let (bytes, _) = wire::encode(&graph, ConstMode::Inline);
    std::fs::write(dir.join("small_net.btir"), bytes)?;
    baton_runtime_host::npy::write(&dir.join("image.npy"), &inputs[0])?;
    // The plugin next to this example's build (target/<profile>/examples/..).
    let exe = std::env::current_exe()?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let plugin = target.join(format!(
        "{}baton_backend_npu_sim{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let cpu_plugin = target.join(format!(
        "{}baton_backend_cpu{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let config = format!(
        "[[plugin]]\npath = {:?}\npriority = 0\noptions = {{ macs = 256, sram_kib = 384, clock_mhz = 500 }}\n\n[[plugin]]\npath = {:?}\npriority = 1\n",
        plugin.display().to_string(),
        cpu_plugin.display().to_string()
    );
    std::fs::write(dir.join("baton.toml"), config)?;
    println!(
        "wrote {}/small_net.btir, image.npy and baton.toml",
        dir.display()
    );
    Ok(())
}
