//! Building the C side: the compilers, the plugin library and where their sources live.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn include_dir() -> PathBuf {
    manifest_dir().join("include")
}

pub fn c_plugin_dir() -> PathBuf {
    manifest_dir().join("tests").join("c_plugin")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// Runs a compiler (or a program built by one). A missing gcc/g++ fails the test.
pub fn run_tool(tool: &str, args: &[&str]) -> Output {
    Command::new(tool).args(args).output().unwrap_or_else(|e| {
        panic!(
            "`{tool}` is required by the C ABI tests (delegate-api/tests/c_abi/) but could \
             not be run: {e}. Install gcc and g++ (Debian/Ubuntu: apt-get install gcc g++)."
        )
    })
}

pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn must_succeed(tool: &str, args: &[&str], what: &str) {
    let out = run_tool(tool, args);
    assert!(
        out.status.success(),
        "{what}: `{tool} {}` failed:\n{}",
        args.join(" "),
        output_text(&out)
    );
}

pub fn include_flag() -> String {
    format!("-I{}", include_dir().display())
}

/// Builds `relu_add_plugin.c` as a shared library, with `-D<variant>` if given.
pub fn build_plugin(dir: &Path, variant: Option<&str>) -> PathBuf {
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
