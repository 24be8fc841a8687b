//! A plugin marked `required = true` that cannot be used fails `run`, `plan`, `bench` and
//! `devices` with a message naming it and why; without the mark it is a note and the work
//! goes elsewhere. And a bare `path = "libx.so"` is found beside the config, not on the
//! dynamic loader's search path.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::common::{config, plugin, q};
use support::{baton, tinynet};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `baton run` of the example model under the config `body`.
fn run_tinynet(dir: &Path, body: &str) -> Output {
    let cfg = config(dir, body);
    let (model, image) = tinynet();
    let input = format!("image={}", image.display());
    baton(
        &[
            "run",
            model.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
            "--input",
            &input,
        ],
        dir,
    )
}

fn missing_plugin(required: bool) -> String {
    format!("[[plugin]]\npath = \"libnot_there.so\"\nrequired = {required}\n")
}

#[test]
fn a_required_plugin_that_does_not_load_fails_run_plan_and_bench() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_tinynet(dir.path(), &missing_plugin(true));
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("required"), "{err}");
    assert!(err.contains("libnot_there.so"), "{err}");
    assert_eq!(err.matches("libnot_there.so").count(), 1, "{err}");

    let cfg = config(dir.path(), &missing_plugin(true));
    let (model, _) = tinynet();
    for cmd in [&["plan"][..], &["bench", "--runs", "1", "--warmup", "0"]] {
        let mut args: Vec<&str> = cmd.to_vec();
        args.extend(["--config", cfg.to_str().unwrap(), model.to_str().unwrap()]);
        let o = baton(&args, dir.path());
        assert!(!o.status.success(), "{cmd:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("libnot_there.so"), "{}", stderr(&o));
    }
}

#[test]
fn an_optional_plugin_that_does_not_load_is_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_tinynet(dir.path(), &missing_plugin(false));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_required_plugin_whose_create_or_probe_fails_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for (fault, why) in [("panic-create", "create"), ("nan-output", "probe")] {
        let body = format!(
            "[[plugin]]\nname = \"vendor\"\npath = {}\nrequired = true\noptions = {{ fault = \"{fault}\" }}\n",
            q(&plugin("baton_faulty_plugin"))
        );
        let o = run_tinynet(dir.path(), &body);
        let err = stderr(&o);
        assert!(!o.status.success(), "{fault}: {err}");
        let line = err
            .lines()
            .find(|l| l.starts_with("baton: error:"))
            .unwrap_or_else(|| panic!("{fault}: no error line in {err}"));
        assert!(line.contains("required"), "{line}");
        assert!(line.contains(why), "{fault}: {line}");
        assert!(
            line.contains("vendor") || line.contains("faulty"),
            "{fault}: {line}"
        );
    }
}

#[test]
fn devices_lists_everything_then_fails_on_an_unusable_required_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "[[plugin]]\npath = {}\n{}",
        q(&plugin("baton_backend_cpu")),
        missing_plugin(true)
    );
    let cfg = config(dir.path(), &body);
    let o = baton(&["devices", "--config", cfg.to_str().unwrap()], dir.path());
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(stdout(&o).contains("probe: passed"), "{}", stdout(&o));
    assert!(stdout(&o).contains("libnot_there.so"), "{}", stdout(&o));
    assert!(stderr(&o).contains("required"), "{}", stderr(&o));

    let cfg = config(dir.path(), &missing_plugin(false));
    let o = baton(&["devices", "--config", cfg.to_str().unwrap()], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_bare_plugin_path_is_found_beside_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(plugin("baton_backend_cpu"), dir.path().join("libmine.so")).unwrap();
    config(
        dir.path(),
        "[[plugin]]\npath = \"libmine.so\"\nrequired = true\n",
    );
    // Named without a directory, from the config's own directory: the loader would search
    // its library path for "libmine.so" and not find it.
    let o = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["devices", "--config", "baton.toml"])
        .current_dir(dir.path())
        .env("BATON_CACHE_DIR", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("probe: passed"), "{}", stdout(&o));
}
