//! The header against `abi.rs`: layout, constants and field types, compiled as C99 and C++.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::c_char;

use baton_delegate_api::abi;
use baton_delegate_api::ir::{DType, OpKind};
use baton_delegate_api::wire;

use crate::tools::{include_dir, include_flag, must_succeed, output_text, path_str, run_tool};

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
                btir_minor,
                capabilities,
                init_retained,
                memory,
            ]
        ),
        struct_info!(
            abi::MemoryInfo,
            "BatonMemoryInfo",
            [
                struct_size,
                reserved,
                scratch_bytes,
                owned_bytes,
                retained_bytes
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
        (
            "BATON_DESCRIPTOR_V1_2_SIZE",
            abi::DESCRIPTOR_V1_2_SIZE as i64,
        ),
        ("BATON_CAP_BOUNDED_OUTPUTS", abi::CAP_BOUNDED_OUTPUTS as i64),
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
        ("BATON_DATA_ALIGNMENT", abi::DATA_ALIGNMENT as i64),
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
        other => panic!("tests/c_abi/layout.rs has no C spelling for the Rust type `{other}`"),
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
                 (update abi_structs() in tests/c_abi/layout.rs)",
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
