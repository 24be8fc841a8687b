//! Error messages as a user of `baton` reads them: each names the file, node or key at
//! fault once, on one line, with dtypes and shapes as users write them (`f32[1, 8, 64]`)
//! and no Rust debug text.

mod support;

use std::process::Output;

use baton_delegate_api::Tensor;
use support::common::{config, plugin, q};
use support::{baton, tinynet};

/// The `baton: error: ...` line of a failed run, checked for the marks of a message said
/// twice or of debug formatting.
fn error_line(o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "expected a failure:\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("baton: error: "))
        .unwrap_or_else(|| panic!("no error line in:\n{stderr}"))
        .to_string();
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("baton: error"))
            .count(),
        1,
        "{stderr}"
    );
    for debug in ["Some(", "Fixed(", "Sym(", "{\"", "\\n"] {
        assert!(!line.contains(debug), "debug text '{debug}' in: {line}");
    }
    line
}

fn once(line: &str, needle: &str) {
    assert_eq!(
        line.matches(needle).count(),
        1,
        "'{needle}' not said once: {line}"
    );
}

#[test]
fn a_directory_as_the_model_names_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("models");
    std::fs::create_dir(&model).unwrap();
    let line = error_line(&baton(&["run", model.to_str().unwrap()], dir.path()));
    once(&line, model.to_str().unwrap());
    once(&line, "os error");
}

#[test]
fn a_missing_model_names_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("missing.onnx");
    let line = error_line(&baton(&["run", model.to_str().unwrap()], dir.path()));
    once(&line, "missing.onnx");
    once(&line, "os error");
}

#[test]
fn a_truncated_onnx_model_names_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("cut.onnx");
    // A graph field (7, length-delimited) claiming 64 bytes where one follows.
    std::fs::write(&model, [0x3a, 0x40, 0x0a]).unwrap();
    let line = error_line(&baton(&["run", model.to_str().unwrap()], dir.path()));
    once(&line, "cut.onnx");
    assert!(
        line.starts_with(&format!("baton: error: model {}: ", model.display())),
        "{line}"
    );
}

#[test]
fn a_config_key_typo_is_one_line_naming_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "[policy]\nmin_size = 1\n");
    let (model, image) = tinynet();
    let line = error_line(&baton(
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            &format!("image={}", image.display()),
            "--config",
            cfg.to_str().unwrap(),
        ],
        dir.path(),
    ));
    once(&line, "baton.toml");
    assert!(line.contains("baton.toml: line 3: "), "{line}");
    assert!(line.contains("min_size"), "{line}");
}

#[test]
fn a_bad_pin_target_is_refused_when_the_config_loads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "[policy]\npin = [{ op = \"Relu\", target = \"gpu\" }]\n",
    );
    let (model, image) = tinynet();
    let line = error_line(&baton(
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            &format!("image={}", image.display()),
            "--config",
            cfg.to_str().unwrap(),
        ],
        dir.path(),
    ));
    assert!(line.contains("policy.pin #1: target 'gpu'"), "{line}");
}

#[test]
fn a_plugin_option_error_names_the_plugin_not_a_config() {
    let dir = tempfile::tempdir().unwrap();
    let lib = plugin("baton_backend_cpu");
    let cfg = config(
        dir.path(),
        &format!(
            "[[plugin]]\npath = {}\noptions = {{ threadz = 2 }}\n",
            q(&lib)
        ),
    );
    let line = error_line(&baton(
        &["devices", "--config", cfg.to_str().unwrap()],
        dir.path(),
    ));
    assert!(line.contains("plugin cpu"), "{line}");
    assert!(line.contains("unknown option 'threadz'"), "{line}");
    assert!(!line.contains("config"), "{line}");
}

#[test]
fn a_non_plugin_file_names_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("libnot_a_plugin.so");
    std::fs::write(&fake, b"not an ELF file").unwrap();
    let cfg = config(dir.path(), &format!("[[plugin]]\npath = {}\n", q(&fake)));
    let o = baton(&["devices", "--config", cfg.to_str().unwrap()], dir.path());
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = stdout
        .lines()
        .find(|l| l.contains("not loaded"))
        .unwrap_or_else(|| panic!("no 'not loaded' line in:\n{stdout}"))
        .to_string();
    once(&line, "libnot_a_plugin.so");
    assert!(!line.contains("config"), "{line}");
}

#[test]
fn an_input_of_the_wrong_shape_prints_types_as_users_write_them() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = tinynet();
    let npy = dir.path().join("small.npy");
    baton_runtime_host::npy::write(&npy, &Tensor::from_f32(&[2, 2], &[0.0; 4])).unwrap();
    let line = error_line(&baton(
        &[
            "run",
            model.to_str().unwrap(),
            "-i",
            &format!("image={}", npy.display()),
        ],
        dir.path(),
    ));
    once(&line, "'image'");
    assert!(line.contains("got f32[2, 2], expected f32["), "{line}");
}
