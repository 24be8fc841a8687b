//! The C side of the ABI, checked from Rust.
//!
//! - The header against `abi.rs`: a generated C program prints the size, alignment and
//!   offset of every field of every struct and the value of every constant, and assigns
//!   the address of every field to a pointer of the C type spelled from the Rust field's
//!   type, so a wrong type (even of a function pointer parameter) fails to compile.
//! - The header as strict C99 and as C++ (including C linkage of the entry symbol).
//! - A real C plugin (`tests/c_plugin/relu_add_plugin.c`) loaded with `libloading` and
//!   driven through every entry point, with numbers compared against values computed here.
//! - The plugin's three ABI-fault build variants.
//! - The C BTIR reader (`tests/c_plugin/btir_reader.h`) against `wire.rs`: the same
//!   content for well-formed graphs, the same accept/reject verdict for thousands of
//!   truncated and corrupted ones, under AddressSanitizer.
//!
//! gcc and g++ are required. If they are missing these tests fail and say so; they never
//! pass without having run.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_void, CStr};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use baton_delegate_api::abi::{self, Blob, Context, Descriptor, Handle, SupportAnswer};
use baton_delegate_api::ir::{
    Attr, DType, Dim, Graph, GraphBuilder, OpKind, Quant, Storage, TensorData,
};
use baton_delegate_api::wire::{self, ConstMode};
use baton_delegate_api::Tensor;

// ---------------------------------------------------------------------------------------
// Tools

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn include_dir() -> PathBuf {
    manifest_dir().join("include")
}

fn c_plugin_dir() -> PathBuf {
    manifest_dir().join("tests").join("c_plugin")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// Runs a compiler (or a program built by one). A missing gcc/g++ fails the test.
fn run_tool(tool: &str, args: &[&str]) -> Output {
    Command::new(tool).args(args).output().unwrap_or_else(|e| {
        panic!(
            "`{tool}` is required by the C ABI tests (delegate-api/tests/c_abi.rs) but could \
             not be run: {e}. Install gcc and g++ (Debian/Ubuntu: apt-get install gcc g++)."
        )
    })
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn must_succeed(tool: &str, args: &[&str], what: &str) {
    let out = run_tool(tool, args);
    assert!(
        out.status.success(),
        "{what}: `{tool} {}` failed:\n{}",
        args.join(" "),
        output_text(&out)
    );
}

fn include_flag() -> String {
    format!("-I{}", include_dir().display())
}

/// Builds `relu_add_plugin.c` as a shared library, with `-D<variant>` if given.
fn build_plugin(dir: &Path, variant: Option<&str>) -> PathBuf {
    let suffix = variant
        .map(|v| format!("_{}", v.to_lowercase()))
        .unwrap_or_default();
    let out = dir.join(format!(
        "librelu_add{suffix}.{}",
        std::env::consts::DLL_EXTENSION
    ));
    let src = c_plugin_dir().join("relu_add_plugin.c");
    let inc = include_flag();
    let define = variant.map(|v| format!("-D{v}"));
    let mut args = vec![
        "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", &inc,
    ];
    if let Some(d) = &define {
        args.push(d);
    }
    args.extend([path_str(&src), "-o", path_str(&out)]);
    must_succeed("gcc", &args, "building the C plugin");
    out
}

// ---------------------------------------------------------------------------------------
// 1. Layout: the header against abi.rs

struct FieldInfo {
    name: &'static str,
    offset: usize,
    size: usize,
    align: usize,
    rust_type: &'static str,
}

struct StructInfo {
    c_name: &'static str,
    size: usize,
    align: usize,
    fields: Vec<FieldInfo>,
}

fn pointee_size<T>(_: *const T) -> usize {
    std::mem::size_of::<T>()
}

fn pointee_align<T>(_: *const T) -> usize {
    std::mem::align_of::<T>()
}

fn pointee_type<T>(_: *const T) -> &'static str {
    std::any::type_name::<T>()
}

/// Size, alignment, and the offset, size, alignment and type of each listed field.
macro_rules! struct_info {
    ($ty:ty, $c_name:literal, [$($field:ident),* $(,)?]) => {{
        let value = std::mem::MaybeUninit::<$ty>::uninit();
        let p = value.as_ptr();
        StructInfo {
            c_name: $c_name,
            size: std::mem::size_of::<$ty>(),
            align: std::mem::align_of::<$ty>(),
            fields: vec![$({
                // SAFETY: computes the address of a field of an uninitialised value without
                // reading it or creating a reference.
                let f = unsafe { &raw const (*p).$field };
                FieldInfo {
                    name: stringify!($field),
                    offset: std::mem::offset_of!($ty, $field),
                    size: pointee_size(f),
                    align: pointee_align(f),
                    rust_type: pointee_type(f),
                }
            }),*],
        }
    }};
}

/// Every struct of abi.rs with every field, in declaration order.
fn abi_structs() -> Vec<StructInfo> {
    vec![
        struct_info!(
            abi::QuantView,
            "BatonQuantView",
            [kind, axis, count, reserved, scales, zero_points]
        ),
        struct_info!(
            abi::TensorView,
            "BatonTensorView",
            [data, byte_len, dtype, rank, shape, quant]
        ),
        struct_info!(abi::Blob, "BatonBlob", [data, len]),
        struct_info!(
            abi::DeviceInfo,
            "BatonDeviceInfo",
            [struct_size, kind, name, driver_version, memory_bytes]
        ),
        struct_info!(
            abi::SupportAnswer,
            "BatonSupportAnswer",
            [supported, reason_code, message]
        ),
        struct_info!(abi::OptionValue, "BatonOptionValue", [key, value]),
        struct_info!(
            abi::OptionSpec,
            "BatonOptionSpec",
            [name, kind, reserved, default_value, min, max, choices, help]
        ),
        struct_info!(
            abi::Descriptor,
            "BatonDescriptor",
            [
                abi_major,
                abi_minor,
                struct_size,
                concurrency,
                name,
                version,
                build_id,
                features,
                option_count,
                reserved,
                options,
                create,
                destroy_context,
                last_error,
                available,
                device_count,
                device_info,
                supports,
                compile,
                blob_compatibility,
                free_blob,
                init,
                execute,
                destroy,
                profile,
            ]
        ),
        struct_info!(
            abi::ProfileEvent,
            "BatonProfileEvent",
            [struct_size, reserved, name, kind, cycles, wall_ns]
        ),
    ]
}

/// Every constant the header must define, with the value abi.rs, ir.rs or wire.rs gives it.
fn expected_constants() -> Vec<(String, i64)> {
    let mut c: Vec<(String, i64)> = [
        ("BATON_ABI_MAJOR", abi::ABI_MAJOR as i64),
        ("BATON_ABI_MINOR", abi::ABI_MINOR as i64),
        ("BATON_WIRE_MAJOR", wire::WIRE_MAJOR as i64),
        ("BATON_WIRE_MINOR", wire::WIRE_MINOR as i64),
        ("BATON_SUPPORT_MESSAGE_LEN", abi::SUPPORT_MESSAGE_LEN as i64),
        ("BATON_MAX_RANK", abi::MAX_RANK as i64),
        ("BATON_DESCRIPTOR_V1_SIZE", abi::DESCRIPTOR_V1_SIZE as i64),
        (
            "BATON_DESCRIPTOR_V1_1_SIZE",
            abi::DESCRIPTOR_V1_1_SIZE as i64,
        ),
        ("BATON_STATUS_OK", abi::STATUS_OK as i64),
        ("BATON_STATUS_ERROR", abi::STATUS_ERROR as i64),
        ("BATON_STATUS_UNSUPPORTED", abi::STATUS_UNSUPPORTED as i64),
        (
            "BATON_STATUS_INVALID_ARGUMENT",
            abi::STATUS_INVALID_ARGUMENT as i64,
        ),
        ("BATON_STATUS_PANIC", abi::STATUS_PANIC as i64),
        ("BATON_REASON_NONE", abi::reason::NONE as i64),
        ("BATON_REASON_OP", abi::reason::OP as i64),
        ("BATON_REASON_DTYPE", abi::reason::DTYPE as i64),
        ("BATON_REASON_SHAPE", abi::reason::SHAPE as i64),
        ("BATON_REASON_ATTRIBUTE", abi::reason::ATTRIBUTE as i64),
        (
            "BATON_REASON_NOT_CONSTANT",
            abi::reason::NOT_CONSTANT as i64,
        ),
        ("BATON_REASON_RESOURCE", abi::reason::RESOURCE as i64),
        ("BATON_REASON_OTHER", abi::reason::OTHER as i64),
        (
            "BATON_CONCURRENCY_SERIALIZED_PER_HANDLE",
            abi::concurrency::SERIALIZED_PER_HANDLE as i64,
        ),
        (
            "BATON_CONCURRENCY_REENTRANT",
            abi::concurrency::REENTRANT as i64,
        ),
        ("BATON_COMPAT_OPTIMAL", abi::compat::OPTIMAL as i64),
        (
            "BATON_COMPAT_PREFER_RECOMPILE",
            abi::compat::PREFER_RECOMPILE as i64,
        ),
        ("BATON_COMPAT_UNSUPPORTED", abi::compat::UNSUPPORTED as i64),
        ("BATON_OPTION_BOOL", abi::option_kind::BOOL as i64),
        ("BATON_OPTION_INT", abi::option_kind::INT as i64),
        ("BATON_OPTION_FLOAT", abi::option_kind::FLOAT as i64),
        ("BATON_OPTION_STRING", abi::option_kind::STRING as i64),
        ("BATON_OPTION_ENUM", abi::option_kind::ENUM as i64),
        // Values abi.rs and wire.rs document in prose (QuantView, DeviceInfo, the BTIR
        // grammar) rather than as constants; the BTIR ones are also exercised end to end
        // by the reader tests below.
        ("BATON_DATA_ALIGNMENT", 64),
        ("BATON_QUANT_NONE", 0),
        ("BATON_QUANT_PER_TENSOR", 1),
        ("BATON_QUANT_PER_AXIS", 2),
        ("BATON_DEVICE_CPU", 0),
        ("BATON_DEVICE_GPU", 1),
        ("BATON_DEVICE_NPU", 2),
        ("BATON_DEVICE_OTHER", 3),
        ("BATON_BTIR_DIM_FIXED", 0),
        ("BATON_BTIR_DIM_SYMBOLIC", 1),
        ("BATON_BTIR_QUANT_NONE", 0),
        ("BATON_BTIR_QUANT_PER_TENSOR", 1),
        ("BATON_BTIR_QUANT_PER_AXIS", 2),
        ("BATON_BTIR_STORAGE_RUNTIME", 0),
        ("BATON_BTIR_STORAGE_INLINE", 1),
        ("BATON_BTIR_STORAGE_EXTERNAL", 2),
        ("BATON_BTIR_ATTR_INT", 1),
        ("BATON_BTIR_ATTR_FLOAT", 2),
        ("BATON_BTIR_ATTR_INTS", 3),
        ("BATON_BTIR_ATTR_FLOATS", 4),
        ("BATON_BTIR_ATTR_STRING", 5),
        ("BATON_BTIR_ATTR_GRAPH", 6),
        ("BATON_BTIR_MAX_GRAPH_DEPTH", wire::MAX_GRAPH_DEPTH as i64),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    for d in DType::ALL {
        c.push((
            format!("BATON_DTYPE_{}", d.name().to_uppercase()),
            d.code() as i64,
        ));
    }
    for &op in OpKind::ALL {
        c.push((
            format!("BATON_OP_{}", op.name().to_uppercase()),
            op.code() as i64,
        ));
    }
    c
}

fn c_char_is_unsigned() -> bool {
    std::any::type_name::<c_char>() == "u8"
}

/// The C spelling of a Rust scalar or abi.rs struct type, as `type_name` prints it.
fn c_base_type(ty: &str) -> String {
    let last = ty.rsplit("::").next().unwrap_or(ty);
    if last == std::any::type_name::<c_char>() {
        return "char".into();
    }
    match last {
        "()" | "c_void" => "void".into(),
        "u8" => "uint8_t".into(),
        "u16" => "uint16_t".into(),
        "u32" => "uint32_t".into(),
        "u64" => "uint64_t".into(),
        "i32" => "int32_t".into(),
        "i64" => "int64_t".into(),
        "f32" => "float".into(),
        "f64" => "double".into(),
        name if name.starts_with(|c: char| c.is_ascii_uppercase()) => format!("Baton{name}"),
        other => panic!("tests/c_abi.rs has no C spelling for the Rust type `{other}`"),
    }
}

/// Index of the `)` closing a list that starts right after an opening `(`.
fn closing_paren(s: &str) -> usize {
    let mut depth = 1;
    for (i, ch) in s.char_indices() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced type name `{s}`")
}

fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, ch) in s.char_indices() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(s[start..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

/// A C declaration of `declarator` with the Rust type `ty` (as printed by `type_name`).
/// `is_const` qualifies the outermost level of `ty`.
fn c_declaration(ty: &str, declarator: &str, is_const: bool) -> String {
    let ty = ty.trim();
    let q = if is_const { "const " } else { "" };
    // A nullable function pointer (fields added in a later minor may be NULL).
    if let Some(inner) = ty
        .strip_prefix("core::option::Option<")
        .and_then(|t| t.strip_suffix('>'))
    {
        if inner.trim_start().starts_with("unsafe extern \"C\" fn(") {
            return c_declaration(inner, declarator, is_const);
        }
    }
    if let Some(rest) = ty.strip_prefix("*const ") {
        return c_declaration(rest, &format!("*{q}{declarator}"), true);
    }
    if let Some(rest) = ty.strip_prefix("*mut ") {
        return c_declaration(rest, &format!("*{q}{declarator}"), false);
    }
    if let Some(inner) = ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let (elem, n) = inner.rsplit_once(';').expect("array type");
        let d = if declarator.starts_with('*') {
            format!("({declarator})")
        } else {
            declarator.to_string()
        };
        return c_declaration(elem, &format!("{d}[{}]", n.trim()), is_const);
    }
    if let Some(rest) = ty.strip_prefix("unsafe extern \"C\" fn(") {
        let close = closing_paren(rest);
        let params: Vec<String> = split_top_level(&rest[..close])
            .into_iter()
            .map(|p| c_declaration(p, "", false))
            .collect();
        let params = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        let ret = rest[close + 1..]
            .trim()
            .strip_prefix("->")
            .map(str::trim)
            .unwrap_or("()");
        return c_declaration(ret, &format!("(*{q}{declarator})({params})"), false);
    }
    format!("{q}{} {declarator}", c_base_type(ty))
        .trim_end()
        .to_string()
}

#[test]
fn type_spelling_translates_rust_to_c() {
    assert_eq!(c_declaration("u32", "*p", false), "uint32_t *p");
    assert_eq!(
        c_declaration("*const *mut core::ffi::c_void", "*p", false),
        "void *const **p"
    );
    assert_eq!(
        c_declaration("[i8; 256]", "*p", false).replace("char", "C"),
        "C (*p)[256]"
    );
    assert_eq!(
        c_declaration(
            "unsafe extern \"C\" fn(*mut core::ffi::c_void, u32) -> i32",
            "*p",
            false
        ),
        "int32_t (**p)(void *, uint32_t)"
    );
    assert_eq!(
        c_declaration("unsafe extern \"C\" fn()", "", false),
        "void (*)(void)"
    );
}

/// Writes the layout program; returns it with a label for each line that checks something.
fn layout_program(structs: &[StructInfo], constants: &[(String, i64)]) -> (String, Vec<String>) {
    let mut lines: Vec<(String, String)> = Vec::new(); // (code, label)
    let mut push = |code: String, label: &str| lines.push((code, label.to_string()));
    for l in [
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <stdio.h>",
        "#include \"baton_delegate.h\"",
    ] {
        push(l.to_string(), "");
    }
    for s in structs {
        let c = s.c_name;
        push(
            format!("typedef struct {{ char c; {c} x; }} align_{c};"),
            &format!("struct {c}"),
        );
        push(format!("static {c} s_{c};"), &format!("struct {c}"));
    }
    push("static void type_checks(void) {".into(), "");
    for s in structs {
        for f in &s.fields {
            let decl = c_declaration(f.rust_type, "*chk", false);
            push(
                format!("    {{ {decl} = &s_{}.{}; (void)chk; }}", s.c_name, f.name),
                &format!(
                    "{}.{}: the C type differs from abi.rs's `{}` (expected C `{}`)",
                    s.c_name,
                    f.name,
                    f.rust_type,
                    c_declaration(f.rust_type, f.name, false)
                ),
            );
        }
    }
    push("}".into(), "");
    push("int main(void) {".into(), "");
    push("    type_checks();".into(), "");
    for s in structs {
        let c = s.c_name;
        push(
            format!("    printf(\"struct {c} %zu %zu\\n\", sizeof({c}), offsetof(align_{c}, x));"),
            &format!("struct {c}"),
        );
        for f in &s.fields {
            push(
                format!(
                    "    printf(\"field {c} {f} %zu %zu\\n\", offsetof({c}, {f}), sizeof(s_{c}.{f}));",
                    f = f.name
                ),
                &format!("{c}.{}: missing from the header", f.name),
            );
        }
    }
    for (name, _) in constants {
        push(
            format!("    printf(\"const {name} %lld\\n\", (long long)({name}));"),
            &format!("constant {name}: missing from the header"),
        );
    }
    push(
        "    printf(\"string BATON_ENTRY_SYMBOL %s\\n\", BATON_ENTRY_SYMBOL);".into(),
        "constant BATON_ENTRY_SYMBOL: missing from the header",
    );
    push("    return 0;".into(), "");
    push("}".into(), "");
    let code = lines
        .iter()
        .map(|(c, _)| c.as_str())
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    let labels = lines.into_iter().map(|(_, l)| l).collect();
    (code, labels)
}

/// Checks that the listed fields cover the whole struct (only alignment padding between
/// them), so a field added to abi.rs but not to this test cannot go unchecked.
fn check_field_list_complete(s: &StructInfo, problems: &mut Vec<String>) {
    let mut end = 0usize;
    for f in &s.fields {
        if f.offset != end.next_multiple_of(f.align) {
            problems.push(format!(
                "{}: the test's field list is incomplete or out of order before '{}' \
                 (update abi_structs() in tests/c_abi.rs)",
                s.c_name, f.name
            ));
        }
        end = f.offset + f.size;
    }
    if end.next_multiple_of(s.align) != s.size {
        problems.push(format!(
            "{}: the test's field list misses fields at the end",
            s.c_name
        ));
    }
}

#[test]
fn header_layout_and_constants_match_abi_rs() {
    let structs = abi_structs();
    let constants = expected_constants();
    let mut problems = Vec::new();
    for s in &structs {
        check_field_list_complete(s, &mut problems);
    }

    let dir = tempfile::tempdir().unwrap();
    let (code, labels) = layout_program(&structs, &constants);
    let src = dir.path().join("layout.c");
    let exe = dir.path().join("layout");
    std::fs::write(&src, &code).unwrap();
    let inc = include_flag();
    let mut args = vec![
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
        &inc,
        path_str(&src),
        "-o",
        path_str(&exe),
    ];
    if c_char_is_unsigned() {
        // u8 and c_char are then the same Rust type; let `char` stand for both.
        args.insert(0, "-Wno-pointer-sign");
    }
    let out = run_tool("gcc", &args);
    if !out.status.success() {
        let text = output_text(&out);
        let mut named = BTreeSet::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(&format!("{}:", src.display())) else {
                continue;
            };
            let Some(n) = rest.split(':').next().and_then(|n| n.parse::<usize>().ok()) else {
                continue;
            };
            if let Some(label) = labels.get(n - 1).filter(|l| !l.is_empty()) {
                named.insert(label.clone());
            }
        }
        panic!(
            "the header disagrees with abi.rs:\n  {}\n\ncompiler output:\n{text}",
            named.into_iter().collect::<Vec<_>>().join("\n  ")
        );
    }
    let run = run_tool(path_str(&exe), &[]);
    assert!(
        run.status.success(),
        "layout program failed: {}",
        output_text(&run)
    );
    let stdout = String::from_utf8(run.stdout).unwrap();

    let mut c_structs = BTreeMap::new();
    let mut c_fields = BTreeMap::new();
    let mut c_consts = BTreeMap::new();
    let mut entry_symbol = None;
    for line in stdout.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "struct" => {
                c_structs.insert(
                    w[1].to_string(),
                    (w[2].parse().unwrap(), w[3].parse().unwrap()),
                );
            }
            "field" => {
                c_fields.insert(
                    (w[1].to_string(), w[2].to_string()),
                    (
                        w[3].parse::<usize>().unwrap(),
                        w[4].parse::<usize>().unwrap(),
                    ),
                );
            }
            "const" => {
                c_consts.insert(w[1].to_string(), w[2].parse::<i64>().unwrap());
            }
            "string" => entry_symbol = Some(w[2].to_string()),
            other => panic!("unexpected line kind {other}"),
        }
    }

    for s in &structs {
        let (size, align): (usize, usize) = c_structs[s.c_name];
        if size != s.size {
            problems.push(format!(
                "{}: sizeof is {size} in C, {} in abi.rs",
                s.c_name, s.size
            ));
        }
        if align != s.align {
            problems.push(format!(
                "{}: alignment is {align} in C, {} in abi.rs",
                s.c_name, s.align
            ));
        }
        for f in &s.fields {
            let (offset, fsize) = c_fields[&(s.c_name.to_string(), f.name.to_string())];
            if offset != f.offset {
                problems.push(format!(
                    "{}.{}: offset {offset} in C, {} in abi.rs",
                    s.c_name, f.name, f.offset
                ));
            }
            if fsize != f.size {
                problems.push(format!(
                    "{}.{}: size {fsize} in C, {} in abi.rs",
                    s.c_name, f.name, f.size
                ));
            }
        }
    }
    for (name, value) in &constants {
        let c = c_consts[name];
        if c != *value {
            problems.push(format!("{name} is {c} in the header, {value} in Rust"));
        }
    }
    if entry_symbol.as_deref() != Some(abi::ENTRY_SYMBOL) {
        problems.push(format!(
            "BATON_ENTRY_SYMBOL is {entry_symbol:?}, abi.rs says {:?}",
            abi::ENTRY_SYMBOL
        ));
    }

    // No stale codes: each family of #defines in the header is exactly the Rust set.
    let header = std::fs::read_to_string(include_dir().join("baton_delegate.h")).unwrap();
    for family in [
        "BATON_STATUS_",
        "BATON_REASON_",
        "BATON_DTYPE_",
        "BATON_OP_",
        "BATON_CONCURRENCY_",
        "BATON_COMPAT_",
        "BATON_OPTION_",
    ] {
        let in_header: BTreeSet<String> = header
            .lines()
            .filter_map(|l| l.trim().strip_prefix("#define "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with(family))
            .map(str::to_string)
            .collect();
        let in_rust: BTreeSet<String> = constants
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| n.starts_with(family))
            .collect();
        for extra in in_header.difference(&in_rust) {
            problems.push(format!(
                "{extra} is defined by the header but unknown to Rust"
            ));
        }
    }

    assert!(
        problems.is_empty(),
        "the header and abi.rs disagree:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn header_compiles_as_strict_c99_and_as_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let inc = include_flag();

    // C99, twice included (the guard), with every warning an error.
    let c_src = dir.path().join("strict.c");
    std::fs::write(
        &c_src,
        "#include \"baton_delegate.h\"\n#include \"baton_delegate.h\"\n\
         int strict_c99_uses_the_header(const BatonDescriptor* d);\n\
         int strict_c99_uses_the_header(const BatonDescriptor* d) {\n\
             return d->abi_major == BATON_ABI_MAJOR && BATON_DESCRIPTOR_HAS(d, destroy);\n\
         }\n",
    )
    .unwrap();
    must_succeed(
        "gcc",
        &[
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
            &inc,
            path_str(&c_src),
        ],
        "the header as strict C99",
    );

    // C++: syntax, and the entry symbol keeps C linkage when defined in a C++ file.
    let cpp_src = dir.path().join("plugin.cpp");
    std::fs::write(
        &cpp_src,
        "#include \"baton_delegate.h\"\n\
         static_assert(sizeof(BatonDescriptor) >= BATON_DESCRIPTOR_V1_SIZE, \"v1 size\");\n\
         static_assert(BATON_MAX_RANK == 8, \"rank\");\n\
         const BatonDescriptor* baton_delegate_entry(void) { return nullptr; }\n",
    )
    .unwrap();
    let cpp_flags = [
        "-x",
        "c++",
        "-std=c++11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
    ];
    let mut args: Vec<&str> = cpp_flags.to_vec();
    args.extend(["-fsyntax-only", &inc, path_str(&cpp_src)]);
    must_succeed("g++", &args, "the header as C++ (syntax)");

    let lib = dir
        .path()
        .join(format!("libcpp_entry.{}", std::env::consts::DLL_EXTENSION));
    let mut args: Vec<&str> = cpp_flags.to_vec();
    args.extend([
        "-shared",
        "-fPIC",
        &inc,
        path_str(&cpp_src),
        "-o",
        path_str(&lib),
    ]);
    must_succeed("g++", &args, "a C++ plugin stub");
    // SAFETY: the library is our stub; loading it runs no initialisers of note.
    let lib = unsafe { libloading::Library::new(&lib) }.unwrap();
    // SAFETY: the symbol has the entry signature (it is declared by the header).
    let entry = unsafe { lib.get::<abi::EntryFn>(abi::ENTRY_SYMBOL.as_bytes()) }
        .unwrap_or_else(|e| panic!("a C++ plugin's entry symbol is not exported unmangled: {e}"));
    // SAFETY: calls the stub, which returns null.
    assert!(unsafe { entry() }.is_null());
}

// ---------------------------------------------------------------------------------------
// 2. The C plugin, driven like a host drives it

/// A loaded plugin library and its descriptor.
struct Loaded {
    desc: *const Descriptor,
    _lib: libloading::Library,
}

impl Loaded {
    /// Loads a library and calls its entry function (the descriptor is not read yet).
    fn open(path: &Path) -> Loaded {
        // SAFETY: the library is the test plugin built above.
        let lib = unsafe { libloading::Library::new(path) }.unwrap();
        // SAFETY: the entry symbol has this signature by contract.
        let desc = unsafe {
            let entry = lib
                .get::<abi::EntryFn>(abi::ENTRY_SYMBOL.as_bytes())
                .unwrap();
            entry()
        };
        assert!(!desc.is_null(), "the entry function returned NULL");
        Loaded { desc, _lib: lib }
    }

    /// The frozen prefix: (abi_major, abi_minor, struct_size). Reads nothing else.
    fn prefix(&self) -> (u32, u32, u32) {
        let p = self.desc.cast::<u32>();
        // SAFETY: every descriptor starts with these three u32 fields.
        unsafe { (p.read(), p.add(1).read(), p.add(2).read()) }
    }

    /// The descriptor, once the handshake has accepted it.
    fn descriptor(&self) -> &Descriptor {
        let (major, _, size) = self.prefix();
        assert_eq!(major, abi::ABI_MAJOR);
        assert!(size as usize >= abi::DESCRIPTOR_V1_SIZE);
        // SAFETY: the handshake says the whole v1 descriptor is there; it lives as long
        // as the library, which `self` owns.
        unsafe { &*self.desc }
    }
}

fn c_string(p: *const c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the plugin returns NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn last_error(d: &Descriptor) -> String {
    // SAFETY: last_error takes no arguments and returns a NUL-terminated string.
    c_string(unsafe { (d.last_error)() })
}

/// A host-owned tensor and the shape array its views point at.
struct HostTensor {
    t: Tensor,
    shape: Box<[i64; abi::MAX_RANK]>,
}

impl HostTensor {
    fn new(t: Tensor) -> HostTensor {
        let mut shape = Box::new([0i64; abi::MAX_RANK]);
        for (s, &d) in shape.iter_mut().zip(&t.shape) {
            *s = d as i64;
        }
        HostTensor { t, shape }
    }

    fn f32s(shape: &[usize], values: &[f32]) -> HostTensor {
        HostTensor::new(Tensor::from_f32(shape, values))
    }

    /// A view of the tensor, valid while `self` is neither moved out of nor dropped.
    fn view(&mut self) -> abi::TensorView {
        abi::TensorView {
            data: self.t.data.as_mut_slice().as_mut_ptr().cast::<c_void>(),
            byte_len: self.t.data.len() as u64,
            dtype: self.t.dtype.code(),
            rank: self.t.shape.len() as u32,
            shape: self.shape.as_mut_ptr(),
            quant: abi::QuantView {
                kind: 0,
                axis: 0,
                count: 0,
                reserved: 0,
                scales: std::ptr::null(),
                zero_points: std::ptr::null(),
            },
        }
    }
}

/// Host copies of the constants `ext` names (the order `wire::encode` returned).
fn constant_views(g: &Graph, ext: &[usize]) -> Vec<HostTensor> {
    ext.iter()
        .map(|&id| {
            let t = &g.tensors[id];
            let Some(Storage::Inline(data)) = &t.data else {
                panic!("tensor {} is not an inline constant", t.name)
            };
            HostTensor::new(Tensor::from_bytes(
                t.dtype,
                &t.static_shape().unwrap(),
                data.bytes(),
            ))
        })
        .collect()
}

fn views(ts: &mut [HostTensor]) -> Vec<abi::TensorView> {
    ts.iter_mut().map(HostTensor::view).collect()
}

/// Answers as (supported, reason, message); panics if a slot was left unwritten.
fn call_supports(
    d: &Descriptor,
    ctx: Context,
    bytes: &[u8],
    consts: &mut [HostTensor],
    slots: usize,
) -> (abi::Status, Vec<(bool, u32, String)>) {
    let cv = views(consts);
    let junk = SupportAnswer {
        supported: 77,
        reason_code: 77,
        message: [b'#' as c_char; abi::SUPPORT_MESSAGE_LEN],
    };
    let mut answers = vec![junk; slots];
    // SAFETY: every pointer is valid for the call; the counts match the arrays.
    let status = unsafe {
        (d.supports)(
            ctx,
            bytes.as_ptr(),
            bytes.len() as u64,
            cv.as_ptr(),
            cv.len() as u32,
            answers.as_mut_ptr(),
            slots as u32,
        )
    };
    if status != abi::STATUS_OK {
        return (status, Vec::new());
    }
    let answers = answers
        .iter()
        .enumerate()
        .map(|(i, a)| {
            assert!(a.supported <= 1, "answer slot {i} was not written");
            let end = a
                .message
                .iter()
                .position(|&c| c == 0)
                .unwrap_or_else(|| panic!("answer {i}: message is not NUL-terminated"));
            let msg: Vec<u8> = a.message[..end].iter().map(|&c| c as u8).collect();
            (
                a.supported == 1,
                a.reason_code,
                String::from_utf8(msg).unwrap(),
            )
        })
        .collect();
    (status, answers)
}

fn call_compile(
    d: &Descriptor,
    ctx: Context,
    g: &Graph,
    consts: &mut [HostTensor],
) -> Result<Blob, (abi::Status, String)> {
    let (bytes, _) = wire::encode(g, ConstMode::External);
    let cv = views(consts);
    let mut blob = Blob {
        data: std::ptr::null_mut(),
        len: 0,
    };
    // SAFETY: every pointer is valid for the call.
    let status = unsafe {
        (d.compile)(
            ctx,
            0,
            bytes.as_ptr(),
            bytes.len() as u64,
            cv.as_ptr(),
            cv.len() as u32,
            &mut blob,
        )
    };
    if status == abi::STATUS_OK {
        assert!(!blob.data.is_null() && blob.len > 0);
        Ok(blob)
    } else {
        Err((status, last_error(d)))
    }
}

fn blob_bytes(b: &Blob) -> Vec<u8> {
    // SAFETY: the plugin allocated `len` bytes at `data` and has not freed them.
    unsafe { std::slice::from_raw_parts(b.data, b.len as usize) }.to_vec()
}

fn call_init(
    d: &Descriptor,
    ctx: Context,
    blob: &[u8],
    consts: &mut [HostTensor],
) -> Result<Handle, (abi::Status, String)> {
    let cv = views(consts);
    let mut handle: Handle = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call.
    let status = unsafe {
        (d.init)(
            ctx,
            0,
            blob.as_ptr(),
            blob.len() as u64,
            cv.as_ptr(),
            cv.len() as u32,
            &mut handle,
        )
    };
    if status == abi::STATUS_OK {
        assert!(!handle.is_null());
        Ok(handle)
    } else {
        Err((status, last_error(d)))
    }
}

/// Runs execute; returns the status and the output views as the plugin left them.
fn call_execute(
    d: &Descriptor,
    h: Handle,
    inputs: &mut [HostTensor],
    outputs: &mut [HostTensor],
) -> (abi::Status, Vec<abi::TensorView>) {
    let ins = views(inputs);
    let mut outs = views(outputs);
    // SAFETY: the views point into `inputs`/`outputs`, alive for the call.
    let status = unsafe {
        (d.execute)(
            h,
            ins.as_ptr(),
            ins.len() as u32,
            outs.as_mut_ptr(),
            outs.len() as u32,
        )
    };
    (status, outs)
}

/// Deterministic test values: multiples of 1/4 in [-2, 2], so every sum is exact.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 * 0.25 - 2.0)
        .collect()
}

fn relu(x: f32) -> f32 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// Input → Relu → Add(with another input) → Conv → Clip → Add(constant) → Relu → ...,
/// plus nodes the plugin must decline for each kind of reason. Between them the nodes
/// carry attributes of all five kinds, which the C reader must parse past.
fn test_graph() -> Graph {
    let mut b = GraphBuilder::new("c-plugin-test");
    let x = b.input_fixed("x", DType::F32, &[1, 2, 4, 4]);
    let y = b.input_fixed("y", DType::F32, &[1, 2, 4, 4]);
    let r = b.named_node("relu0", OpKind::Relu, &[x], &[]).unwrap();
    let a = b.named_node("add1", OpKind::Add, &[r, y], &[]).unwrap();
    let w = b.constant_f32("w", &[3, 2, 3, 3], &values(54, 1));
    let bias = b.constant_f32("b", &[3], &[0.25, 0.5, -0.25]);
    let c = b
        .named_node(
            "conv2",
            OpKind::Conv,
            &[a, w, bias],
            &[
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("strides", Attr::Ints(vec![1, 1])),
                ("group", Attr::Int(1)),
                ("auto_pad", Attr::Str("NOTSET".into())),
            ],
        )
        .unwrap();
    let cl = b
        .named_node(
            "clip3",
            OpKind::Clip,
            &[c],
            &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
        )
        .unwrap();
    let k = b.constant_f32("k", &[1, 3, 4, 4], &values(48, 2));
    let s = b.named_node("add4", OpKind::Add, &[cl, k], &[]).unwrap();
    let r2 = b.named_node("relu5", OpKind::Relu, &[s], &[]).unwrap();
    let one = b.constant_f32("one", &[1], &[1.0]);
    let t = b.named_node("add6", OpKind::Add, &[r2, one], &[]).unwrap();
    b.output(t);
    let i = b.input_fixed("i", DType::I32, &[4]);
    let ri = b.named_node("relu7", OpKind::Relu, &[i], &[]).unwrap();
    b.output(ri);
    let z = b.input("z", DType::F32, &[Dim::Sym("batch".into()), Dim::Fixed(4)]);
    let rz = b.named_node("relu8", OpKind::Relu, &[z], &[]).unwrap();
    b.output(rz);
    let sm = b
        .named_node(
            "softmax9",
            OpKind::Softmax,
            &[r2],
            &[
                ("axis", Attr::Int(-1)),
                // not an ONNX attribute: here so that a FLOATS attribute crosses the ABI
                ("test_floats", Attr::Floats(vec![0.5, -1.25, 3.0])),
            ],
        )
        .unwrap();
    b.output(sm);
    b.finish().unwrap()
}

/// (supported, reason, a fragment of the message) for each node of `test_graph`.
fn expected_answers() -> Vec<(bool, u32, &'static str)> {
    use abi::reason::*;
    vec![
        (true, NONE, ""),
        (true, NONE, ""),
        (false, OP, "op Conv not implemented by the C plugin"),
        (false, OP, "op Clip not implemented by the C plugin"),
        (true, NONE, ""),
        (true, NONE, ""),
        (false, SHAPE, "does not broadcast"),
        (false, DTYPE, "is i32"),
        (false, SHAPE, "symbolic"),
        (false, OP, "op Softmax not implemented by the C plugin"),
    ]
}

fn check_answers(answers: &[(bool, u32, String)]) {
    let expected = expected_answers();
    assert_eq!(answers.len(), expected.len());
    for (i, ((ok, reason, msg), (want_ok, want_reason, fragment))) in
        answers.iter().zip(&expected).enumerate()
    {
        assert_eq!(
            (ok, reason),
            (want_ok, want_reason),
            "node {i}: answer {ok} {} '{msg}'",
            abi::reason::name(*reason)
        );
        if *want_ok {
            assert!(msg.is_empty(), "node {i}: supported, yet message '{msg}'");
        } else {
            assert!(msg.contains(fragment), "node {i}: message '{msg}'");
        }
    }
}

#[test]
fn c_plugin_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = Loaded::open(&build_plugin(dir.path(), None));

    // The handshake, reading only the frozen prefix first.
    let (major, minor, size) = plugin.prefix();
    assert_eq!((major, minor), (abi::ABI_MAJOR, abi::ABI_MINOR));
    assert_eq!(size as usize, std::mem::size_of::<Descriptor>());
    let d = plugin.descriptor();
    assert_eq!(c_string(d.name), "c-relu-add");
    assert_eq!(c_string(d.version), "0.1.0");
    assert!(!c_string(d.build_id).is_empty());
    assert_eq!(d.option_count, 0);
    assert_eq!(d.features, 0);
    assert_eq!(d.concurrency, abi::concurrency::SERIALIZED_PER_HANDLE);

    // create: no options; an option is refused by name.
    let (key, value) = (c"threads", c"4");
    let opt = abi::OptionValue {
        key: key.as_ptr(),
        value: value.as_ptr(),
    };
    let mut ctx: Context = std::ptr::null_mut();
    // SAFETY: valid pointers for the call.
    let st = unsafe { (d.create)(&opt, 1, &mut ctx) };
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("'threads'"), "{}", last_error(d));
    // SAFETY: as above.
    let st = unsafe { (d.create)(std::ptr::null(), 0, &mut ctx) };
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    assert!(!ctx.is_null());

    // Devices.
    // SAFETY: ctx is live.
    unsafe {
        assert_eq!((d.available)(ctx), 1);
        assert_eq!((d.device_count)(ctx), 1);
    }
    let mut info = abi::DeviceInfo {
        struct_size: std::mem::size_of::<abi::DeviceInfo>() as u32,
        kind: 99,
        name: std::ptr::null(),
        driver_version: std::ptr::null(),
        memory_bytes: 99,
    };
    // SAFETY: ctx is live, info is writable.
    assert_eq!(
        unsafe { (d.device_info)(ctx, 0, &mut info) },
        abi::STATUS_OK
    );
    assert_eq!(
        info.struct_size as usize,
        std::mem::size_of::<abi::DeviceInfo>()
    );
    assert_eq!(info.kind, 0, "CPU");
    assert!(!c_string(info.name).is_empty());
    assert!(!c_string(info.driver_version).is_empty());
    // SAFETY: as above.
    assert_eq!(
        unsafe { (d.device_info)(ctx, 1, &mut info) },
        abi::STATUS_INVALID_ARGUMENT
    );
    assert!(last_error(d).contains("no device 1"), "{}", last_error(d));

    // supports on the whole graph, constants passed as views.
    let g = test_graph();
    let (bytes, ext) = wire::encode(&g, ConstMode::External);
    let mut consts = constant_views(&g, &ext);
    let (st, answers) = call_supports(d, ctx, &bytes, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    check_answers(&answers);

    // A corrupt graph is an error with an explanation, never a crash.
    let half = &bytes[..bytes.len() / 2];
    let (st, _) = call_supports(d, ctx, half, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    let e = last_error(d);
    assert!(
        e.starts_with("graph: ") && e.contains("BTIR truncated"),
        "{e}"
    );
    let mut bad_magic = bytes.clone();
    bad_magic[0] = b'X';
    let (st, _) = call_supports(d, ctx, &bad_magic, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("magic"), "{}", last_error(d));
    let mut bad_op = bytes.clone();
    let conv_op = find_u32_after(&bytes, b"conv2", OpKind::Conv.code());
    bad_op[conv_op..conv_op + 4].copy_from_slice(&999u32.to_le_bytes());
    let (st, _) = call_supports(d, ctx, &bad_op, &mut consts, g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(
        last_error(d).contains("unknown op code 999"),
        "{}",
        last_error(d)
    );
    // Wrong number of answer slots; missing constant views.
    let (st, _) = call_supports(d, ctx, &bytes, &mut consts, 3);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("3 answer slots for 10 nodes"));
    let (st, _) = call_supports(d, ctx, &bytes, &mut [], g.nodes.len());
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("constant 'w'"), "{}", last_error(d));

    // Messages stay valid UTF-8 when a long non-ASCII name is truncated to fit the slot
    // (call_supports checks every message is UTF-8).
    let mut long = GraphBuilder::new("long-name");
    let wide = long.input_fixed(&"ä".repeat(200), DType::I32, &[4]);
    let out = long.node(OpKind::Relu, &[wide], &[]).unwrap();
    long.output(out);
    let long = long.finish().unwrap();
    let (long_bytes, _) = wire::encode(&long, ConstMode::External);
    let (st, answers) = call_supports(d, ctx, &long_bytes, &mut [], 1);
    assert_eq!(st, abi::STATUS_OK);
    assert_eq!(answers[0].1, abi::reason::DTYPE);
    assert!(
        answers[0].2.len() >= abi::SUPPORT_MESSAGE_LEN - 4,
        "{}",
        answers[0].2
    );

    // Compiling a declined node is refused with the reason.
    let (conv_only, _) = g.extract(&[2]);
    let mut conv_consts =
        constant_views(&conv_only, &wire::encode(&conv_only, ConstMode::External).1);
    let err = call_compile(d, ctx, &conv_only, &mut conv_consts).unwrap_err();
    assert_eq!(err.0, abi::STATUS_UNSUPPORTED);
    assert!(err.1.contains("op Conv not implemented"), "{}", err.1);

    // Partition A: relu0 + add1 (two runtime inputs, one output, one intermediate).
    let (sub_a, _) = g.extract(&[0, 1]);
    assert_eq!((sub_a.inputs.len(), sub_a.outputs.len()), (2, 1));
    let blob_a = call_compile(d, ctx, &sub_a, &mut []).unwrap();
    let blob_a_bytes = blob_bytes(&blob_a);
    // SAFETY: the blob bytes are valid for the calls.
    unsafe {
        assert_eq!(
            (d.blob_compatibility)(ctx, blob_a_bytes.as_ptr(), blob_a_bytes.len() as u64),
            abi::compat::OPTIMAL
        );
        assert_eq!(
            (d.blob_compatibility)(ctx, bytes.as_ptr(), bytes.len() as u64),
            abi::compat::UNSUPPORTED
        );
        assert_eq!(
            (d.blob_compatibility)(ctx, blob_a_bytes.as_ptr(), 7),
            abi::compat::UNSUPPORTED
        );
    }
    // init reads a copy: the host may free the plugin's blob right after.
    // SAFETY: the blob came from this context's compile.
    unsafe { (d.free_blob)(ctx, blob_a) };
    let err = call_init(d, ctx, &blob_a_bytes[..blob_a_bytes.len() - 4], &mut []).unwrap_err();
    assert_eq!(err.0, abi::STATUS_INVALID_ARGUMENT, "{}", err.1);
    let h_a = call_init(d, ctx, &blob_a_bytes, &mut []).unwrap();

    // Blobs may come from disk: corrupt ones are refused (or, if still consistent,
    // accepted), never trusted into a crash; blob_compatibility gives the same verdict.
    let mut corrupt: Vec<Vec<u8>> = (0..blob_a_bytes.len())
        .map(|n| blob_a_bytes[..n].to_vec())
        .collect();
    for pos in 0..blob_a_bytes.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut b = blob_a_bytes.clone();
            b[pos] ^= flip;
            corrupt.push(b);
        }
    }
    let mut refused = 0;
    for b in &corrupt {
        // SAFETY: the bytes are valid for the call.
        let compat = unsafe { (d.blob_compatibility)(ctx, b.as_ptr(), b.len() as u64) };
        match call_init(d, ctx, b, &mut []) {
            Ok(h) => {
                assert_eq!(compat, abi::compat::OPTIMAL);
                // SAFETY: a handle of this plugin.
                unsafe { (d.destroy)(h) };
            }
            Err((st, msg)) => {
                assert_eq!(st, abi::STATUS_INVALID_ARGUMENT, "{msg}");
                assert!(msg.starts_with("blob: "), "{msg}");
                assert_eq!(compat, abi::compat::UNSUPPORTED);
                refused += 1;
            }
        }
    }
    assert!(
        refused > corrupt.len() / 2,
        "{refused} of {} refused",
        corrupt.len()
    );

    let (xv, yv) = (values(32, 3), values(32, 4));
    let mut inputs = vec![
        HostTensor::f32s(&[1, 2, 4, 4], &xv),
        HostTensor::f32s(&[1, 2, 4, 4], &yv),
    ];
    let mut outputs = vec![HostTensor::f32s(&[1, 2, 4, 4], &[f32::NAN; 32])];
    for view in views(&mut inputs).iter().chain(&views(&mut outputs)) {
        assert_eq!(
            view.data as usize % 64,
            0,
            "host buffers are 64-byte aligned"
        );
    }
    let (st, outs) = call_execute(d, h_a, &mut inputs, &mut outputs);
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    let want: Vec<f32> = xv.iter().zip(&yv).map(|(&x, &y)| relu(x) + y).collect();
    assert_eq!(outputs[0].t.f32s(), &want[..]);
    assert_eq!(outs[0].rank, 4);
    assert_eq!(&outputs[0].shape[..4], &[1, 2, 4, 4]);

    // Wrong input count, wrong output size: INVALID_ARGUMENT, and the handle still works.
    let (st, _) = call_execute(d, h_a, &mut inputs[..1], &mut outputs);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    let count_error = last_error(d);
    assert!(count_error.contains("1 inputs passed"), "{count_error}");
    let mut small = vec![HostTensor::f32s(&[1, 2, 4, 2], &[0.0; 16])];
    small[0].shape[..4].copy_from_slice(&[1, 2, 4, 4]); // claims the right shape
    let (st, _) = call_execute(d, h_a, &mut inputs, &mut small);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("byte_len 64"), "{}", last_error(d));
    let mut f16_input = vec![
        HostTensor::new(Tensor::zeros(DType::F16, &[1, 2, 4, 4])),
        HostTensor::f32s(&[1, 2, 4, 4], &yv),
    ];
    let (st, _) = call_execute(d, h_a, &mut f16_input, &mut outputs);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    assert!(last_error(d).contains("dtype"), "{}", last_error(d));

    // last_error is per thread: another thread neither sees nor overwrites this one's.
    let (st, _) = call_execute(d, h_a, &mut inputs[..1], &mut outputs);
    assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
    let ctx_addr = ctx as usize;
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(last_error(d), "", "a fresh thread starts with no error");
            let mut info = abi::DeviceInfo {
                struct_size: std::mem::size_of::<abi::DeviceInfo>() as u32,
                kind: 0,
                name: std::ptr::null(),
                driver_version: std::ptr::null(),
                memory_bytes: 0,
            };
            // SAFETY: the context is live and may be used from any thread.
            let st = unsafe { (d.device_info)(ctx_addr as Context, 7, &mut info) };
            assert_eq!(st, abi::STATUS_INVALID_ARGUMENT);
            assert!(last_error(d).contains("no device 7"));
        });
    });
    assert_eq!(last_error(d), count_error);

    let (st, _) = call_execute(d, h_a, &mut inputs, &mut outputs);
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    assert_eq!(outputs[0].t.f32s(), &want[..]);

    // Partition B: add4 (with the constant k, passed as a view) + relu5.
    let (sub_b, map_b) = g.extract(&[4, 5]);
    let (_, ext_b) = wire::encode(&sub_b, ConstMode::External);
    assert_eq!(ext_b.len(), 1, "k crosses as a constant view");
    let mut consts_b = constant_views(&sub_b, &ext_b);
    let blob_b = call_compile(d, ctx, &sub_b, &mut consts_b).unwrap();
    let blob_b_bytes = blob_bytes(&blob_b);
    // SAFETY: as above.
    unsafe { (d.free_blob)(ctx, blob_b) };
    let err = call_init(d, ctx, &blob_b_bytes, &mut []).unwrap_err();
    assert_eq!(err.0, abi::STATUS_INVALID_ARGUMENT);
    assert!(err.1.contains("constant view 0"), "{}", err.1);
    let h_b = call_init(d, ctx, &blob_b_bytes, &mut consts_b).unwrap();
    // The views were only borrowed for init: the plugin kept its own copy.
    let k_values = consts_b[0].t.f32s().to_vec();
    consts_b[0]
        .t
        .data
        .as_mut_slice()
        .copy_from_slice(&[0xFFu8; 48 * 4]);
    drop(consts_b);
    let clip_out = values(48, 5);
    let mut in_b = vec![HostTensor::f32s(&[1, 3, 4, 4], &clip_out)];
    let mut out_b = vec![HostTensor::f32s(&[1, 3, 4, 4], &[0.0; 48])];
    let (st, _) = call_execute(d, h_b, &mut in_b, &mut out_b);
    assert_eq!(st, abi::STATUS_OK, "{}", last_error(d));
    let want_b: Vec<f32> = clip_out
        .iter()
        .zip(&k_values)
        .map(|(&c, &k)| relu(c + k))
        .collect();
    assert_eq!(out_b[0].t.f32s(), &want_b[..]);
    assert_eq!(g.tensors[map_b[sub_b.outputs[0]]].name, "relu5_out");

    // The context may be used from several threads at once.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut consts = constant_views(&g, &ext);
                for _ in 0..25 {
                    let (st, answers) =
                        call_supports(d, ctx_addr as Context, &bytes, &mut consts, g.nodes.len());
                    assert_eq!(st, abi::STATUS_OK);
                    check_answers(&answers);
                    let blob = call_compile(d, ctx_addr as Context, &sub_a, &mut []).unwrap();
                    assert_eq!(blob_bytes(&blob), blob_a_bytes);
                    // SAFETY: the blob came from this context.
                    unsafe { (d.free_blob)(ctx_addr as Context, blob) };
                }
            });
        }
    });

    // Release in the documented order: handles and blobs, then the context.
    // SAFETY: each object is released once, by the plugin that made it.
    unsafe {
        (d.destroy)(h_a);
        (d.destroy)(h_b);
        (d.destroy)(std::ptr::null_mut());
        (d.free_blob)(
            ctx,
            Blob {
                data: std::ptr::null_mut(),
                len: 0,
            },
        );
        (d.destroy_context)(ctx);
    }
}

/// The offset of the u32 `value` that follows the BTIR string `name` (a node's name).
fn find_u32_after(bytes: &[u8], name: &[u8], value: u32) -> usize {
    let mut encoded = (name.len() as u32).to_le_bytes().to_vec();
    encoded.extend_from_slice(name);
    encoded.resize(encoded.len().next_multiple_of(4), 0);
    encoded.extend_from_slice(&value.to_le_bytes());
    let at = bytes
        .windows(encoded.len())
        .position(|w| w == encoded)
        .expect("name in buffer");
    let start = at + encoded.len() - 4;
    assert_eq!(bytes[start..start + 4], value.to_le_bytes());
    start
}

#[test]
fn c_plugin_fault_variants() {
    let dir = tempfile::tempdir().unwrap();

    let wrong_major = Loaded::open(&build_plugin(dir.path(), Some("BATON_TEST_WRONG_MAJOR")));
    let (major, minor, size) = wrong_major.prefix();
    assert_eq!(major, 2);
    assert_ne!(major, abi::ABI_MAJOR, "a host must refuse this plugin");
    assert_eq!(minor, abi::ABI_MINOR);
    assert_eq!(size as usize, abi::DESCRIPTOR_V1_1_SIZE);

    let short = Loaded::open(&build_plugin(dir.path(), Some("BATON_TEST_SHORT_STRUCT")));
    let (major, _, size) = short.prefix();
    assert_eq!(major, abi::ABI_MAJOR);
    assert_eq!(size, 24);
    assert!(
        (size as usize) < abi::DESCRIPTOR_V1_SIZE,
        "a host must refuse this plugin"
    );

    let path = build_plugin(dir.path(), Some("BATON_TEST_NO_ENTRY"));
    // SAFETY: our test library.
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: looked up only; never called when missing.
    let missing = unsafe { lib.get::<abi::EntryFn>(abi::ENTRY_SYMBOL.as_bytes()) };
    let err = missing.expect_err("the entry symbol must be missing");
    assert!(
        err.to_string().contains(abi::ENTRY_SYMBOL),
        "libloading's error names the symbol: {err}"
    );
    // The library is otherwise intact: the same descriptor under another name.
    // SAFETY: the renamed entry has the entry signature.
    let desc = unsafe {
        let renamed = lib
            .get::<abi::EntryFn>(b"baton_test_renamed_entry")
            .unwrap();
        renamed()
    };
    // SAFETY: the first field of a descriptor is abi_major.
    assert_eq!(unsafe { desc.cast::<u32>().read() }, abi::ABI_MAJOR);
}

// ---------------------------------------------------------------------------------------
// 3. The C BTIR reader against wire.rs

/// Builds `btir_dump.c`, with AddressSanitizer and UBSan where the toolchain has them.
fn build_dump(dir: &Path) -> PathBuf {
    let exe = dir.join("btir_dump");
    let src = c_plugin_dir().join("btir_dump.c");
    let inc = include_flag();
    let common = [
        "-std=c99",
        "-g",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
        &inc,
        path_str(&src),
        "-o",
        path_str(&exe),
    ];
    let mut sanitized = vec![
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ];
    sanitized.extend(common);
    let out = run_tool("gcc", &sanitized);
    if !out.status.success() {
        eprintln!(
            "warning: building btir_dump with sanitizers failed; testing it without them:\n{}",
            output_text(&out)
        );
        must_succeed("gcc", &common, "building btir_dump");
    }
    exe
}

fn run_dump(exe: &Path, mode: &str, input: &Path) -> String {
    let out = run_tool(path_str(exe), &[mode, path_str(input)]);
    assert!(
        out.status.success(),
        "btir_dump {mode} crashed or failed (a sanitizer report means the reader read out \
         of bounds):\n{}",
        output_text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

fn join<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// What `btir_dump dump` must print for `g` encoded with `mode`.
fn expected_dump(g: &Graph, mode: ConstMode, ext: &[usize]) -> String {
    let mut s = String::new();
    writeln!(
        s,
        "graph name={} major={} minor={} tensors={} nodes={}",
        g.name,
        wire::WIRE_MAJOR,
        wire::WIRE_MINOR,
        g.tensors.len(),
        g.nodes.len()
    )
    .unwrap();
    for (i, t) in g.tensors.iter().enumerate() {
        let dims = join(t.shape.iter().take(abi::MAX_RANK).map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Sym(name) => format!("sym:{name}"),
        }));
        let fixed = t.shape.iter().all(|d| d.fixed().is_some()) as u8;
        write!(
            s,
            "tensor {i} name={} dtype={} rank={} dims=[{dims}] fixed={fixed}",
            t.name,
            t.dtype.code(),
            t.shape.len()
        )
        .unwrap();
        match &t.quant {
            None => write!(s, " quant=0").unwrap(),
            Some(Quant::PerTensor { scale, zero_point }) => write!(
                s,
                " quant=1 axis=0 scales=[{:08x}] zero_points=[{zero_point}]",
                scale.to_bits()
            )
            .unwrap(),
            Some(Quant::PerAxis {
                axis,
                scales,
                zero_points,
            }) => write!(
                s,
                " quant=2 axis={axis} scales=[{}] zero_points=[{}]",
                join(scales.iter().map(|f| format!("{:08x}", f.to_bits()))),
                join(zero_points)
            )
            .unwrap(),
        }
        match (&t.data, mode) {
            (None, _) => writeln!(s, " storage=0").unwrap(),
            (Some(Storage::Inline(d)), ConstMode::Inline) => writeln!(
                s,
                " storage=1 inline_len={} inline_fnv={:016x}",
                d.bytes().len(),
                fnv1a(d.bytes())
            )
            .unwrap(),
            (Some(_), ConstMode::External) => writeln!(
                s,
                " storage=2 external={}",
                ext.iter().position(|&e| e == i).unwrap()
            )
            .unwrap(),
            (Some(Storage::External(e)), ConstMode::Inline) => {
                writeln!(s, " storage=2 external={e}").unwrap()
            }
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        writeln!(
            s,
            "node {i} name={} op={} in=[{}] out=[{}] attrs={}",
            n.name,
            n.op.code(),
            join(&n.inputs),
            join(&n.outputs),
            n.attrs.len()
        )
        .unwrap();
        for (k, v) in &n.attrs {
            let value = match v {
                Attr::Int(i) => format!("int={i}"),
                Attr::Float(f) => format!("float={:08x}", f.to_bits()),
                Attr::Ints(v) => format!("ints=[{}]", join(v)),
                Attr::Floats(v) => format!(
                    "floats=[{}]",
                    join(v.iter().map(|f| format!("{:08x}", f.to_bits())))
                ),
                Attr::Str(t) => format!("str={t}"),
                // The C reader validates subgraphs and skips them; their bytes are their
                // own record, so only the kind is compared.
                Attr::Graph(_) => "graph".to_string(),
            };
            writeln!(s, "attr {k} {value}").unwrap();
        }
    }
    writeln!(s, "inputs=[{}]", join(&g.inputs)).unwrap();
    writeln!(s, "outputs=[{}]", join(&g.outputs)).unwrap();
    s
}

/// Quantization of both kinds, inline data of several dtypes, a symbolic dimension and a
/// non-ASCII name: the parts of BTIR that `test_graph` does not use.
fn quant_graph() -> Graph {
    let mut b = GraphBuilder::new("quantized-größe");
    let x = b.input("x", DType::F32, &[Dim::Sym("batch".into()), Dim::Fixed(4)]);
    let w = b.constant_f32("w", &[4], &[1.0, -2.0, 3.5, 0.0]);
    b.set_quant(
        w,
        Quant::PerAxis {
            axis: 0,
            scales: vec![0.5, 0.25, 0.125, 1.0],
            zero_points: vec![0, 1, -2, 3],
        },
    );
    let q = b.constant("q", DType::I8, &[3], TensorData::from_slice(&[1i8, -1, 7]));
    b.set_quant(
        q,
        Quant::PerTensor {
            scale: 0.1,
            zero_point: -3,
        },
    );
    let shape = b.constant_i64("shape", &[2], &[-1, 2]);
    let y = b.node(OpKind::Add, &[x, w], &[]).unwrap();
    let z = b
        .node(
            OpKind::Clip,
            &[y],
            &[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
        )
        .unwrap();
    b.rename(z, "ausgabe-größe");
    b.output(z);
    let v = b.input_fixed("v", DType::F32, &[2, 3, 2]);
    let r = b
        .node(OpKind::Reshape, &[v, shape], &[("allowzero", Attr::Int(0))])
        .unwrap();
    b.output(r);
    b.finish().unwrap()
}

/// Control flow (BTIR 1.2): an If at the top level and inside a Loop's body, subgraphs
/// with inline constants of their own, two levels of nesting.
fn control_graph() -> Graph {
    let branch = |name: &str, add: Option<f32>| {
        let mut b = GraphBuilder::new(name);
        let x = b.input_fixed("x", DType::F32, &[2]);
        let y = match add {
            Some(v) => {
                let c = b.constant_f32("c", &[2], &[v, -v]);
                b.node(OpKind::Add, &[x, c], &[]).unwrap()
            }
            None => b.node(OpKind::Relu, &[x], &[]).unwrap(),
        };
        b.output(y);
        b.finish().unwrap()
    };
    let branches = |b: &mut GraphBuilder, cond, x| {
        b.named_node(
            "if",
            OpKind::If,
            &[cond, x],
            &[
                (
                    "then_branch",
                    Attr::Graph(Box::new(branch("then", Some(1.5)))),
                ),
                ("else_branch", Attr::Graph(Box::new(branch("else", None)))),
            ],
        )
        .unwrap()
    };
    let mut body = GraphBuilder::new("body");
    let _iteration = body.input_fixed("i", DType::I64, &[]);
    let cond = body.input_fixed("cond", DType::Bool, &[]);
    let v = body.input_fixed("v", DType::F32, &[2]);
    let keep = body.node(OpKind::Identity, &[cond], &[]).unwrap();
    let next = branches(&mut body, cond, v);
    body.output(keep);
    body.output(next);
    let body = body.finish().unwrap();

    let mut b = GraphBuilder::new("control");
    let cond = b.input_fixed("cond", DType::Bool, &[]);
    let x = b.input_fixed("x", DType::F32, &[2]);
    let y = branches(&mut b, cond, x);
    b.output(y);
    let trips = b.constant_i64("trips", &[], &[3]);
    let looped = b
        .named_node(
            "loop",
            OpKind::Loop,
            &[trips, cond, x],
            &[("body", Attr::Graph(Box::new(body)))],
        )
        .unwrap();
    b.output(looped);
    b.finish().unwrap()
}

fn corpus() -> Vec<(&'static str, Graph, ConstMode)> {
    vec![
        ("control graph, inline", control_graph(), ConstMode::Inline),
        ("test graph, external", test_graph(), ConstMode::External),
        ("test graph, inline", test_graph(), ConstMode::Inline),
        ("quant graph, external", quant_graph(), ConstMode::External),
        ("quant graph, inline", quant_graph(), ConstMode::Inline),
    ]
}

#[test]
fn btir_reader_reads_what_wire_rs_writes() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_dump(dir.path());
    for (label, g, mode) in corpus() {
        let (bytes, ext) = wire::encode(&g, mode);
        let file = dir.path().join("graph.btir");
        std::fs::write(&file, &bytes).unwrap();
        let got = run_dump(&exe, "dump", &file);
        let want = expected_dump(&g, mode, &ext);
        for (n, (a, b)) in got.lines().zip(want.lines()).enumerate() {
            assert_eq!(
                a,
                b,
                "{label}: line {} of the C reader's dump differs",
                n + 1
            );
        }
        assert_eq!(got.lines().count(), want.lines().count(), "{label}:\n{got}");
    }
}

#[test]
fn btir_reader_and_wire_rs_agree_on_corrupt_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_dump(dir.path());
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for (label, g, mode) in corpus() {
        let (bytes, _) = wire::encode(&g, mode);
        for n in 0..=bytes.len() {
            cases.push((format!("{label}: first {n} bytes"), bytes[..n].to_vec()));
        }
        for pos in 0..bytes.len() {
            let old = bytes[pos];
            for new in [old ^ 0x01, old ^ 0x80, 0x00, 0xFF, old.wrapping_add(4)] {
                if new != old {
                    let mut b = bytes.clone();
                    b[pos] = new;
                    cases.push((format!("{label}: byte {pos} {old:#04x} -> {new:#04x}"), b));
                }
            }
        }
    }
    // Strict UTF-8 at the edges (overlong forms, surrogates, the top of the code space),
    // which random corruption seldom reaches: patched over the 4-byte graph name "abcd".
    let mut named = GraphBuilder::new("abcd");
    let x = named.input_fixed("x", DType::F32, &[2]);
    let y = named.node(OpKind::Relu, &[x], &[]).unwrap();
    named.output(y);
    let (named, _) = wire::encode(&named.finish().unwrap(), ConstMode::External);
    let name_at = named.windows(4).position(|w| w == b"abcd").unwrap();
    for seq in [
        [0xC0, 0x80, b'a', b'a'], // overlong NUL
        [0xC1, 0xBF, b'a', b'a'], // overlong
        [0xC2, 0x80, b'a', b'a'], // U+0080
        [0xC3, 0xA4, b'a', b'a'], // ä
        [0xC3, b'a', b'a', b'a'], // missing continuation
        [0x80, b'a', b'a', b'a'], // stray continuation
        [0xE0, 0x80, 0x80, b'a'], // overlong
        [0xE0, 0xA0, 0x80, b'a'], // U+0800
        [0xED, 0x9F, 0xBF, b'a'], // U+D7FF
        [0xED, 0xA0, 0x80, b'a'], // surrogate
        [0xEE, 0x80, 0x80, b'a'], // U+E000
        [0xF0, 0x80, 0x80, 0x80], // overlong
        [0xF0, 0x90, 0x80, 0x80], // U+10000
        [0xF4, 0x8F, 0xBF, 0xBF], // U+10FFFF
        [0xF4, 0x90, 0x80, 0x80], // above U+10FFFF
        [0xF5, 0x80, 0x80, 0x80], // invalid lead
        [0xFF, b'a', b'a', b'a'], // invalid lead
    ] {
        let mut b = named.clone();
        b[name_at..name_at + 4].copy_from_slice(&seq);
        cases.push((format!("graph name bytes {seq:02x?}"), b));
    }

    let mut records = Vec::new();
    for (_, b) in &cases {
        records.extend_from_slice(&(b.len() as u64).to_le_bytes());
        records.extend_from_slice(b);
    }
    let file = dir.path().join("cases.bin");
    std::fs::write(&file, &records).unwrap();
    let verdicts = run_dump(&exe, "verdicts", &file);
    let verdicts: Vec<&str> = verdicts.lines().collect();
    assert_eq!(verdicts.len(), cases.len());

    let mut disagreements = Vec::new();
    let mut rejected = 0;
    for ((label, bytes), c) in cases.iter().zip(&verdicts) {
        let rust = wire::decode(bytes);
        let c_ok = *c == "ok";
        rejected += !c_ok as usize;
        if rust.is_ok() != c_ok {
            disagreements.push(format!(
                "{label}: wire.rs {}, C reader {c}",
                match &rust {
                    Ok(_) => "accepts".to_string(),
                    Err(e) => format!("rejects ({e})"),
                }
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} buffers get different verdicts:\n  {}",
        disagreements.len(),
        cases.len(),
        disagreements[..disagreements.len().min(20)].join("\n  ")
    );
    assert!(
        rejected > cases.len() / 2,
        "most corruptions must be rejected ({rejected} of {})",
        cases.len()
    );
}
