//! Compiles the shared WGSL kernels (`backends/gpu-kernels/wgsl`) to SPIR-V with naga.
//!
//! naga's SPIR-V writer cannot emit `OpSpecConstant` (it rejects unresolved `override`
//! expressions), so each kernel's override constant is resolved here, once per value
//! listed in the shared catalog's `VARIANTS`, and the plugin picks the variant that fits
//! the device's subgroup size and limits at compile time. The wgpu delegate instead
//! passes the same overrides as pipeline constants.
//!
//! The catalog (`backends/gpu-kernels/src/catalog.rs`, compiled in here by `#[path]`)
//! assembles each variant's source: a kernel's `// requires:` libraries are appended,
//! and an f16 variant (`{kernel}_f16`) has its `alias T = f32;` line made f16 with
//! `enable f16;` in front of line 1, so errors still point at `FILE:LINE` of the file
//! that holds them. naga then emits the Float16 and 16-bit storage capabilities for the
//! f16 variants; the plugin enables the matching device features and only picks those
//! variants on a device that has them. A subgroup variant (`{kernel}_sg`) requires the
//! `_sg` counterpart of its library and is validated with naga's SUBGROUP capability;
//! the plugin only picks those on a device with subgroup arithmetic in compute shaders.

use std::fmt::Write as _;
use std::path::PathBuf;

#[path = "../gpu-kernels/src/catalog.rs"]
#[allow(dead_code)] // the build uses part of it; the delegates use the rest
mod catalog;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dir = manifest.join("../gpu-kernels");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    // The catalog include_str!s the kernels, so any change to them or to it reruns this.
    println!("cargo:rerun-if-changed={}", dir.join("wgsl").display());
    for (stem, _) in catalog::SOURCES {
        println!(
            "cargo:rerun-if-changed={}",
            dir.join(format!("wgsl/{stem}.wgsl")).display()
        );
    }
    println!(
        "cargo:rerun-if-changed={}",
        dir.join("src/catalog.rs").display()
    );
    let mut table = String::from(
        "/// Every kernel variant built: (kernel, override name, value, SPIR-V words).\n\
         pub(crate) static VARIANTS: &[(&str, &str, u32, &[u8])] = &[\n",
    );
    for variant in catalog::kernels() {
        let kernel = variant.as_str();
        let name = catalog::override_name(kernel).expect("a catalog kernel");
        let (module, info) = parse(kernel);
        for v in catalog::values(kernel) {
            let words = specialise(&module, &info, kernel, name, v);
            let file = out.join(format!("{kernel}_{name}{v}.spv"));
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            std::fs::write(&file, bytes).expect("write SPIR-V to OUT_DIR");
            writeln!(
                table,
                "    ({kernel:?}, {name:?}, {v}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{kernel}_{name}{v}.spv\"))),"
            )
            .expect("write to a String");
        }
    }
    table.push_str("];\n");
    // The build id changes with the kernels, so the host's caches keyed by it do too.
    println!(
        "cargo:rustc-env=BATON_VULKAN_KERNELS={:016x}",
        catalog::hash()
    );
    std::fs::write(out.join("kernels.rs"), table).expect("write kernels.rs");
}

/// Assembles, parses and validates one kernel variant; a failure stops the build with
/// `FILE:LINE: message`.
fn parse(kernel: &str) -> (naga::Module, naga::valid::ModuleInfo) {
    let assembled = catalog::assemble(kernel).unwrap_or_else(|e| panic!("{e}"));
    let source = &assembled.source;
    let mut capabilities = naga::valid::Capabilities::default();
    if kernel.ends_with("_f16") {
        capabilities |= naga::valid::Capabilities::SHADER_FLOAT16;
    }
    if catalog::stem(kernel) != kernel.trim_end_matches("_f16") {
        // A `_sg` variant: naga then emits the GroupNonUniform capabilities, which need
        // no device feature on Vulkan 1.1+, only the subgroup properties the plugin
        // checks before it picks these variants.
        capabilities |= naga::valid::Capabilities::SUBGROUP;
    }
    let module = match naga::front::wgsl::parse_str(source) {
        Ok(m) => m,
        Err(e) => {
            let at = e
                .location(source)
                .map_or("?".into(), |l| assembled.locate(l.line_number));
            panic!("{at}: {}\n{}", e.message(), e.emit_to_string(source));
        }
    };
    let mut validator =
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities);
    match validator.validate(&module) {
        Ok(info) => (module, info),
        Err(e) => {
            let at = e
                .location(source)
                .map_or("?".into(), |l| assembled.locate(l.line_number));
            panic!("{at}: {}\n{}", e.as_inner(), e.emit_to_string(source));
        }
    }
}

/// Resolves the override `name` to `value` and writes SPIR-V 1.3 (Vulkan 1.1).
fn specialise(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    kernel: &str,
    name: &str,
    value: u32,
) -> Vec<u32> {
    let mut constants = naga::back::PipelineConstants::default();
    constants.insert(name.to_string(), f64::from(value));
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        module,
        info,
        Some((naga::ShaderStage::Compute, "main")),
        &constants,
    )
    .unwrap_or_else(|e| panic!("{kernel}.wgsl with {name} = {value}: {e}"));
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        // Else naga declares StorageInputOutput16 for any f16 type, a device feature
        // (storageInputOutput16) compute kernels never need and many devices lack.
        use_storage_input_output_16: false,
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".into(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .unwrap_or_else(|e| panic!("{kernel}.wgsl with {name} = {value}: SPIR-V: {e}"))
}
