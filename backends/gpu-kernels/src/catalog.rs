//! The WGSL kernels as shipped: their sources (compiled in with `include_str!`, so every
//! delegate loads the files in `backends/gpu-kernels/wgsl` and none keeps a copy), the
//! override values a plan may choose, which kernels have f16 and subgroup variants, and
//! how a variant's source is assembled.
//!
//! This file is also compiled into the Vulkan delegate's build script (by `#[path]`), which
//! turns every variant into SPIR-V ahead of time; so it uses nothing but `std`. A wgpu
//! host compiles the same assembled source at run time and passes the override as a
//! pipeline constant.

/// Every kernel file: (stem, source).
pub const SOURCES: &[(&str, &str)] = &[
    ("activation", include_str!("../wgsl/activation.wgsl")),
    ("cast", include_str!("../wgsl/cast.wgsl")),
    ("compare", include_str!("../wgsl/compare.wgsl")),
    ("conv2d", include_str!("../wgsl/conv2d.wgsl")),
    (
        "conv_transpose",
        include_str!("../wgsl/conv_transpose.wgsl"),
    ),
    ("copy", include_str!("../wgsl/copy.wgsl")),
    ("elementwise", include_str!("../wgsl/elementwise.wgsl")),
    ("gather", include_str!("../wgsl/gather.wgsl")),
    ("layernorm", include_str!("../wgsl/layernorm.wgsl")),
    ("matmul", include_str!("../wgsl/matmul.wgsl")),
    ("pad", include_str!("../wgsl/pad.wgsl")),
    ("pool2d", include_str!("../wgsl/pool2d.wgsl")),
    ("reduce", include_str!("../wgsl/reduce.wgsl")),
    ("resize", include_str!("../wgsl/resize.wgsl")),
    ("rowreduce", include_str!("../wgsl/rowreduce.wgsl")),
    ("rowreduce_sg", include_str!("../wgsl/rowreduce_sg.wgsl")),
    ("select", include_str!("../wgsl/select.wgsl")),
    ("softmax", include_str!("../wgsl/softmax.wgsl")),
];

/// Kernel file stem, override name, the values a plan may choose (ascending). The Vulkan
/// build makes one SPIR-V module per value, since naga's SPIR-V writer cannot leave an
/// override open; keeping the list here keeps both delegates' plans identical.
pub const VARIANTS: &[(&str, &str, &[u32])] = &[
    ("elementwise", "WG", &[32, 64, 128, 256]),
    ("copy", "WG", &[32, 64, 128, 256]),
    ("conv2d", "WG", &[32, 64, 128, 256]),
    ("pool2d", "WG", &[32, 64, 128, 256]),
    ("softmax", "WG", &[32, 64, 128, 256]),
    ("layernorm", "WG", &[32, 64, 128, 256]),
    ("reduce", "WG", &[32, 64, 128, 256]),
    ("cast", "WG", &[32, 64, 128, 256]),
    ("compare", "WG", &[32, 64, 128, 256]),
    ("select", "WG", &[32, 64, 128, 256]),
    ("gather", "WG", &[32, 64, 128, 256]),
    ("pad", "WG", &[32, 64, 128, 256]),
    ("resize", "WG", &[32, 64, 128, 256]),
    ("conv_transpose", "WG", &[32, 64, 128, 256]),
    ("matmul", "TILE", &[8, 16]),
];

/// Kernels that also have f16 variants, named `{kernel}_f16`: they declare
/// [`ALIAS_F32`] once and keep their arithmetic in f32.
pub const F16: &[&str] = &[
    "elementwise",
    "copy",
    "pool2d",
    "softmax",
    "matmul",
    "conv_transpose",
    "conv2d",
    "layernorm",
    "reduce",
];

/// Kernels that also have subgroup variants, named `{kernel}_sg` (and `{kernel}_sg_f16`
/// for one also in [`F16`]): each requires a library `X.wgsl` that has a counterpart
/// `X_sg.wgsl` defining the same functions with subgroup operations, which the variant
/// requires instead. The kernel's own text is the same in both, so the two cannot drift.
pub const SUBGROUP: &[&str] = &["layernorm", "reduce", "softmax"];

/// The suffix of a subgroup variant (before `_f16`).
pub const SUBGROUP_SUFFIX: &str = "_sg";

/// The line a kernel in [`F16`] must have, and what its f16 variants have instead.
pub const ALIAS_F32: &str = "alias T = f32;";
/// The element type line of an f16 variant.
pub const ALIAS_F16: &str = "alias T = f16;";

/// The file stem of a kernel variant: `kernel` less its `_f16` and `_sg` suffixes.
pub fn stem(kernel: &str) -> &str {
    let k = kernel.strip_suffix("_f16").unwrap_or(kernel);
    k.strip_suffix(SUBGROUP_SUFFIX).unwrap_or(k)
}

/// The override values of `kernel` (a file stem or one of its variants), ascending.
pub fn values(kernel: &str) -> Vec<u32> {
    let stem = stem(kernel);
    VARIANTS
        .iter()
        .find(|(k, _, _)| *k == stem)
        .map_or_else(Vec::new, |(_, _, v)| v.to_vec())
}

/// The override name of `kernel` (`WG` or `TILE`), if it is a kernel.
pub fn override_name(kernel: &str) -> Option<&'static str> {
    let stem = stem(kernel);
    VARIANTS
        .iter()
        .find(|(k, _, _)| *k == stem)
        .map(|(_, n, _)| *n)
}

/// The source of a kernel file by stem.
pub fn file(stem: &str) -> Option<&'static str> {
    SOURCES.iter().find(|(k, _)| *k == stem).map(|(_, s)| *s)
}

/// A kernel variant's WGSL, ready to compile, and where each file starts in it.
pub struct Assembled {
    /// The whole source: the kernel, then each library it requires.
    pub source: String,
    /// (file name, 1-based first line of that file in `source`), in order.
    pub files: Vec<(String, u32)>,
}

impl Assembled {
    /// `backends/gpu-kernels/wgsl/FILE:LINE` for a 1-based line of [`Assembled::source`],
    /// so an error points at the file a person edits.
    pub fn locate(&self, line: u32) -> String {
        match self.files.iter().rev().find(|(_, first)| *first <= line) {
            Some((name, first)) => {
                format!("backends/gpu-kernels/wgsl/{name}:{}", line - first + 1)
            }
            None => format!("line {line}"),
        }
    }
}

/// Assembles `kernel` (a stem from [`VARIANTS`], `{stem}_f16` for one in [`F16`],
/// `{stem}_sg` for one in [`SUBGROUP`], `{stem}_sg_f16` for one in both): the libraries
/// named by a first-lines comment `// requires: FILE.wgsl` are appended (WGSL
/// declarations are order-free, so the kernel's line numbers are unchanged). A subgroup
/// variant requires `X_sg.wgsl` in place of each `X.wgsl` that has one; an f16 variant
/// has [`ALIAS_F32`] replaced by [`ALIAS_F16`] with `enable f16;` in front of line 1, so
/// line numbers still match the files.
pub fn assemble(kernel: &str) -> Result<Assembled, String> {
    let (rest, f16) = match kernel.strip_suffix("_f16") {
        Some(rest) if F16.contains(&stem(rest)) => (rest, true),
        Some(_) => return Err(format!("kernel {kernel} has no f16 variant")),
        None => (kernel, false),
    };
    let (stem, subgroup) = match rest.strip_suffix(SUBGROUP_SUFFIX) {
        Some(stem) if SUBGROUP.contains(&stem) => (stem, true),
        Some(_) => return Err(format!("kernel {kernel} has no subgroup variant")),
        None => (rest, false),
    };
    let mut source = file(stem)
        .ok_or_else(|| format!("no kernel file {stem}.wgsl"))?
        .to_string();
    let mut files = vec![(format!("{stem}.wgsl"), 1u32)];
    let requires: Vec<String> = source
        .lines()
        .take_while(|l| l.starts_with("//"))
        .filter_map(|l| l.strip_prefix("// requires:"))
        .flat_map(|l| l.split_whitespace().map(str::to_string))
        .collect();
    let mut swapped = false;
    for lib in requires {
        let mut lib_stem = lib.strip_suffix(".wgsl").unwrap_or(&lib).to_string();
        if subgroup {
            let sg = format!("{lib_stem}{SUBGROUP_SUFFIX}");
            if file(&sg).is_some() {
                lib_stem = sg;
                swapped = true;
            }
        }
        let text = file(&lib_stem)
            .ok_or_else(|| format!("{stem}.wgsl requires {lib}, which is not a kernel file"))?;
        if !source.ends_with('\n') {
            source.push('\n');
        }
        let first = source.lines().count() as u32 + 1;
        source.push_str(text);
        files.push((format!("{lib_stem}.wgsl"), first));
    }
    // No `enable subgroups;`: naga 30 refuses that directive as not yet implemented and
    // takes the subgroup builtins without it (the validator's SUBGROUP capability, which
    // the Vulkan build and a wgpu device with `Features::SUBGROUP` grant, is the gate).
    if subgroup && !swapped {
        return Err(format!(
            "{stem}.wgsl is listed in SUBGROUP but requires no library with a `_sg` counterpart"
        ));
    }
    if f16 {
        if source.lines().filter(|l| l.trim() == ALIAS_F32).count() != 1 {
            return Err(format!(
                "{stem}.wgsl is listed in F16 but has no single `{ALIAS_F32}` line"
            ));
        }
        source = format!("enable f16; {}", source.replacen(ALIAS_F32, ALIAS_F16, 1));
    }
    Ok(Assembled { source, files })
}

/// Every kernel variant name: each stem of [`VARIANTS`], and its `_f16`, `_sg` and
/// `_sg_f16` variants where it has them.
pub fn kernels() -> Vec<String> {
    let mut all = Vec::new();
    for (k, _, _) in VARIANTS {
        let mut names = vec![k.to_string()];
        if SUBGROUP.contains(k) {
            names.push(format!("{k}{SUBGROUP_SUFFIX}"));
        }
        for name in names {
            let f16 = format!("{name}_f16");
            all.push(name);
            if F16.contains(k) {
                all.push(f16);
            }
        }
    }
    all
}

/// FNV-1a over every kernel file in name order ([`SOURCES`] is kept sorted): part of
/// each delegate's build id, so a build with other kernels has another id and the host's
/// caches keyed by it miss.
pub const fn hash() -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut f = 0;
    while f < SOURCES.len() {
        let bytes = SOURCES[f].1.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            hash = (hash ^ bytes[i] as u64).wrapping_mul(0x100_0000_01b3);
            i += 1;
        }
        f += 1;
    }
    hash
}

/// [`hash`] as 16 lower-case hex digits.
pub const HASH_HEX: [u8; 16] = {
    let h = hash();
    let mut out = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        let nibble = ((h >> (60 - 4 * i)) & 0xf) as u8;
        out[i] = if nibble < 10 {
            b'0' + nibble
        } else {
            b'a' + nibble - 10
        };
        i += 1;
    }
    out
};
