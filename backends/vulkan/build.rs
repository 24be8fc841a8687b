//! Compiles the shared WGSL kernels (`backends/gpu-kernels/wgsl`) to SPIR-V with naga.
//!
//! naga's SPIR-V writer cannot emit `OpSpecConstant` (it rejects unresolved `override`
//! expressions), so each kernel's override constants are resolved here, once per variant
//! listed in [`VARIANTS`], and the plugin picks the variant that fits the device's
//! subgroup size and limits at compile time. A wgpu delegate would instead pass the same
//! overrides as pipeline constants.
//!
//! A kernel may ask for a library file with a first-lines comment `// requires: FILE`;
//! the library is appended after the kernel (WGSL declarations are order-free), so the
//! kernel's own line numbers are unchanged and an error is reported as `FILE:LINE` of
//! whichever file holds it.
//!
//! f16: a kernel listed in [`F16`] names its storage element type through one line,
//! `alias T = f32;`, and converts to f32 on load and back to `T` on store. Its f16
//! variants (`{kernel}_f16`) are the same source with that line replaced by
//! `alias T = f16;` and `enable f16;` put in front of line 1 (on the same line, so line
//! numbers still match the file). Sources stay written once, and the arithmetic stays
//! f32, which is what the host reference does for f16. naga then emits the Float16 and
//! 16-bit storage capabilities; the plugin enables the matching device features and
//! only picks these variants on a device that has them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Kernel file stem, override name, the values built.
const VARIANTS: &[(&str, &str, &[u32])] = &[
    ("elementwise", "WG", &[32, 64, 128, 256]),
    ("copy", "WG", &[32, 64, 128, 256]),
    ("conv2d", "WG", &[32, 64, 128, 256]),
    ("pool2d", "WG", &[32, 64, 128, 256]),
    ("softmax", "WG", &[32, 64, 128, 256]),
    ("layernorm", "WG", &[32, 64, 128, 256]),
    ("reduce", "WG", &[32, 64, 128, 256]),
    ("matmul", "TILE", &[8, 16]),
];

/// Kernels that also get f16 variants (see the module docs): they declare
/// `alias T = f32;` and keep their arithmetic in f32.
const F16: &[&str] = &["elementwise", "copy", "pool2d", "softmax", "matmul"];

/// The line a kernel in [`F16`] must have, and what its f16 variants have instead.
const ALIAS_F32: &str = "alias T = f32;";
const ALIAS_F16: &str = "alias T = f16;";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dir = manifest.join("../gpu-kernels/wgsl");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut table = String::from(
        "/// Every kernel variant built: (kernel, override name, value, SPIR-V words).\n\
         pub(crate) static VARIANTS: &[(&str, &str, u32, &[u8])] = &[\n",
    );
    for &(kernel, name, values) in VARIANTS {
        let mut builds = vec![(kernel.to_string(), parse(&dir, kernel, false))];
        if F16.contains(&kernel) {
            builds.push((format!("{kernel}_f16"), parse(&dir, kernel, true)));
        }
        for (variant, (module, info)) in &builds {
            for &v in values {
                let kernel = variant.as_str();
                let words = specialise(module, info, kernel, name, v);
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
    }
    table.push_str("];\n");
    // The build id changes with the kernels, so the host's caches keyed by it do too.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read the kernel directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    names.sort();
    for path in names {
        for b in read(&path).bytes() {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=BATON_VULKAN_KERNELS={hash:016x}");
    std::fs::write(out.join("kernels.rs"), table).expect("write kernels.rs");
}

/// Reads, parses and validates one kernel (plus the libraries it requires), as its f16
/// variant when `f16`; a failure stops the build with `FILE:LINE: message`.
fn parse(dir: &Path, kernel: &str, f16: bool) -> (naga::Module, naga::valid::ModuleInfo) {
    let path = dir.join(format!("{kernel}.wgsl"));
    let mut source = read(&path);
    // (file name, first line of that file in `source`, 1-based)
    let mut files = vec![(format!("{kernel}.wgsl"), 1u32)];
    let requires: Vec<String> = source
        .lines()
        .take_while(|l| l.starts_with("//"))
        .filter_map(|l| l.strip_prefix("// requires:"))
        .flat_map(|l| l.split_whitespace().map(str::to_string))
        .collect();
    for lib in requires {
        if !source.ends_with('\n') {
            source.push('\n');
        }
        let first = source.lines().count() as u32 + 1;
        source.push_str(&read(&dir.join(&lib)));
        files.push((lib, first));
    }
    let locate = |line: u32| -> String {
        let (name, first) = files
            .iter()
            .rev()
            .find(|(_, first)| *first <= line)
            .expect("line 1 is in the kernel");
        format!("backends/gpu-kernels/wgsl/{name}:{}", line - first + 1)
    };
    let mut capabilities = naga::valid::Capabilities::default();
    if f16 {
        assert!(
            source.lines().filter(|l| l.trim() == ALIAS_F32).count() == 1,
            "{kernel}.wgsl is listed in F16 but has no single `{ALIAS_F32}` line"
        );
        // Same line count, so FILE:LINE in errors stays right.
        source = format!("enable f16; {}", source.replacen(ALIAS_F32, ALIAS_F16, 1));
        capabilities |= naga::valid::Capabilities::SHADER_FLOAT16;
    }
    let module = match naga::front::wgsl::parse_str(&source) {
        Ok(m) => m,
        Err(e) => {
            let at = e
                .location(&source)
                .map_or("?".into(), |l| locate(l.line_number));
            panic!("{at}: {}\n{}", e.message(), e.emit_to_string(&source));
        }
    };
    let mut validator =
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities);
    match validator.validate(&module) {
        Ok(info) => (module, info),
        Err(e) => {
            let at = e
                .location(&source)
                .map_or("?".into(), |l| locate(l.line_number));
            panic!("{at}: {}\n{}", e.as_inner(), e.emit_to_string(&source));
        }
    }
}

fn read(path: &Path) -> String {
    println!("cargo:rerun-if-changed={}", path.display());
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
