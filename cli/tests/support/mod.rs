//! What the CLI's test binaries share: running `baton` as a user types it, the bundled
//! example, and the host's test helpers (finding the workspace's plugins).

#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../../runtime-host/tests/common/mod.rs"]
pub mod common;

/// Runs the `baton` executable with `args`, its probe cache in `cache`.
pub fn baton(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env("BATON_CACHE_DIR", cache)
        .output()
        .expect("run baton")
}

/// The README's example model and its input.
pub fn tinynet() -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tinynet");
    (root.join("tinynet.btir"), root.join("image.npy"))
}
