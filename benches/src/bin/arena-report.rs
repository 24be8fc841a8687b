//! The CPU delegate's arena next to its lower bound, on the peer models.
//!
//! Each model is imported and specialised as `baton run` does, then compiled and
//! initialised on the CPU delegate in this process (every node of these models runs on
//! it). The arena holds every intermediate of the partition, placed by lifetime; the
//! lower bound is the most bytes live at any one step, which no placement can beat.
//!
//!     cargo run --release -p baton-benches --bin arena-report
//!
//! Target (issue 10): arena <= 1.05 x the lower bound.

use std::collections::BTreeMap;
use std::path::Path;

use baton_backend_cpu::CpuDelegate;
use baton_delegate_api::testing::Hosted;
use baton_delegate_api::{Delegate, Options};
use baton_runtime_host::{model, specialize};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/models");
    let d = CpuDelegate::create(&Options::validate(&CpuDelegate::options(), &[])?)?;
    println!("| model | arena | lower bound | arena / bound |");
    println!("|---|---:|---:|---:|");
    for name in ["mobilenet_tiny", "transformer_enc2", "stream_asr"] {
        let path = root.join(name).join(format!("{name}.onnx"));
        if !path.is_file() {
            eprintln!("note: {} missing; skipped", path.display());
            continue;
        }
        let graph = specialize::specialize(&model::load(&path)?, &BTreeMap::new())?;
        let hosted = Hosted::new(&graph);
        let blob = hosted.compile(&d)?;
        let exec = d.init(0, &blob, &hosted.views())?;
        let (arena, bound) = exec.arena_bytes();
        println!(
            "| {name} | {arena} B | {bound} B | {:.3} |",
            arena as f64 / bound.max(1) as f64
        );
    }
    Ok(())
}
