//! `baton-conformance`: prove a Baton delegate plugin against the reference executor.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use baton_conformance::cases::{self, Shard};
use baton_conformance::expectations::Expectations;
use baton_conformance::report::RunMeta;
use baton_conformance::runner::child::{child_main, ChildArgs};
use baton_conformance::runner::{run_isolated_with, Isolation, RunConfig};
use baton_conformance::{suite, Class, Error, Report, Tolerances};
use clap::{Parser, Subcommand};

/// Runs the Baton conformance cases against a delegate plugin in child processes (the
/// kit never loads the plugin itself) and writes report.json, junit.xml and summary.md.
///
/// Results: pass (the plugin ran every node and matched), pass-partial (a model case the
/// plugin ran only part of: it declined some nodes, which the reference ran, and each
/// partition of the nodes it accepted, grouped as a host groups them, matched), unsupported (declined), expected-fail (a
/// failure declared in --expectations), and the failures: mismatch, crash, timeout,
/// reference-fail and load-, create-, supports-, compile-, init- and exec-fail.
///
/// Exit code: 0 when no case failed (pass, pass-partial, unsupported and expected-fail
/// are not failures), 1 when any case failed, 2 for usage errors.
#[derive(Parser)]
#[command(name = "baton-conformance", version, subcommand_negates_reqs = true)]
struct Cli {
    #[command(subcommand)]
    child: Option<Hidden>,

    /// The plugin library (.so / .dylib / .dll) to test.
    #[arg(long, value_name = "PATH", required_unless_present_any = ["list", "suite"])]
    plugin: Option<PathBuf>,

    /// A plugin option, KEY=VALUE; repeat for several. Checked against the plugin's schema.
    #[arg(long = "option", value_name = "KEY=VALUE", value_parser = parse_kv)]
    options: Vec<(String, String)>,

    /// Only these ops, comma-separated (op names as in the IR, plus Model, Quantized and ABI).
    #[arg(long, value_name = "OP,OP,...", value_parser = parse_ops)]
    ops: Option<OpList>,

    /// Directory for report.json, junit.xml and summary.md.
    #[arg(long, value_name = "DIR", default_value = "baton-reports")]
    report_dir: PathBuf,

    /// Run every n-th case starting at the i-th (1-based), for splitting CI jobs.
    #[arg(long, value_name = "i/n", value_parser = parse_shard)]
    shard: Option<Shard>,

    /// `run` (default): one child process runs every case in turn and is replaced only
    /// after a crash or a timeout, so state a case leaves in the plugin is seen by the
    /// next. `case`: a fresh child (plugin loaded, created and unloaded) for every case.
    #[arg(long, value_name = "run|case", default_value = "run", value_parser = parse_isolation)]
    isolate: Isolation,

    /// Per-case time limit in seconds; a case over it is killed and recorded as timeout.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = parse_timeout)]
    timeout: f64,

    /// Directory with f32.toml, f16.toml, int.toml (default: the kit's own).
    #[arg(long, value_name = "DIR")]
    tolerances: Option<PathBuf>,

    /// Also run the ABI behaviour checks (load handshake, create, devices, supports,
    /// garbage blob, determinism), whatever --ops selects.
    #[arg(long)]
    abi_checks: bool,

    /// Expected failures per device (known driver quirks): `case device result reason`
    /// per line; see `baton_conformance::expectations`. Matching failures become
    /// expected-fail; an expected failure that passes is reported.
    #[arg(long, value_name = "FILE")]
    expectations: Option<PathBuf>,

    /// Print the ids of the selected cases and exit.
    #[arg(long)]
    list: bool,

    /// Run an ONNX backend test-data suite on the reference instead: every case directory
    /// (model.onnx + test_data_set_*/) under DIR. Writes suite.json and suite.md to
    /// --report-dir; exit 1 on a failure the manifest does not list.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["plugin", "list", "abi_checks"])]
    suite: Option<PathBuf>,

    /// The suite's expected failures (`case_name  reason` per line).
    #[arg(long, value_name = "FILE", requires = "suite")]
    suite_manifest: Option<PathBuf>,

    /// Write a manifest listing every failing case of this suite run (reasons taken from
    /// the existing manifest, else from the failure message) to FILE.
    #[arg(long, value_name = "FILE", requires = "suite")]
    suite_write_manifest: Option<PathBuf>,

    /// Run each suite case as `baton run MODEL --input NAME=FILE.npy ...` does: inputs
    /// written as .npy files and read back for the model's inputs, the model loaded and
    /// run in a host session, outputs written as .npy files and read back before they are
    /// compared. Without it the importer and the reference are checked alone.
    #[arg(long, requires = "suite")]
    user_path: bool,

    /// With --user-path: the host's config (TOML, as `baton run --config`); default: no
    /// plugin, the host's reference kernels run every node.
    #[arg(long, value_name = "FILE", requires = "user_path")]
    suite_config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Hidden {
    /// Internal: runs the cases named on stdin and streams results on stdout.
    #[command(name = "__child", hide = true)]
    Child {
        #[arg(long)]
        plugin: PathBuf,
        #[arg(long = "option", value_parser = parse_kv)]
        options: Vec<(String, String)>,
        #[arg(long)]
        tolerances: Option<PathBuf>,
    },
}

#[derive(Clone)]
struct OpList(Vec<String>);

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Hidden::Child {
        plugin,
        options,
        tolerances,
    }) = cli.child
    {
        let code = child_main(&ChildArgs {
            plugin,
            options,
            tolerances,
        });
        return ExitCode::from(code as u8);
    }
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("baton-conformance: error: {e:#}");
            let usage = matches!(
                e.downcast_ref::<Error>(),
                Some(Error::Usage(_) | Error::Tolerance { .. })
            );
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

fn run(cli: Cli) -> Result<u8> {
    let tolerances = Tolerances::load(cli.tolerances.as_deref())?;
    if let Some(dir) = &cli.suite {
        return run_suite(&cli, dir, &tolerances);
    }
    let ops = cli.ops.map(|o| o.0);
    let selected = cases::selection(ops.as_deref(), cli.abi_checks, cli.shard)?;
    if cli.list {
        for c in &selected {
            println!("{}", c.id);
        }
        return Ok(0);
    }
    if selected.is_empty() {
        return Err(Error::Usage("no cases selected by --ops and --shard".into()).into());
    }
    let plugin = cli
        .plugin
        .ok_or_else(|| Error::Usage("--plugin is required".into()))?;
    if !plugin.is_file() {
        return Err(Error::Usage(format!("--plugin {}: no such file", plugin.display())).into());
    }
    let config = RunConfig {
        child_exe: std::env::current_exe().context("locating this executable")?,
        plugin,
        options: cli.options,
        timeout: Duration::from_secs_f64(cli.timeout),
        tolerances_dir: cli.tolerances,
        isolation: cli.isolate,
    };
    let total = selected.len();
    let mut done = 0;
    eprintln!(
        "baton-conformance: {total} cases against {} ({})",
        config.plugin.display(),
        match config.isolation {
            Isolation::Run => "one child process for the run",
            Isolation::Case => "one child process per case",
        }
    );
    // A plugin that does not load (or create) fails every case that needs it with the
    // same message: said once, then counted.
    let mut said: Vec<(Class, String)> = Vec::new();
    let mut repeats = 0usize;
    let outcome = run_isolated_with(&config, &selected, &mut |r| {
        done += 1;
        if !r.result.is_failure() {
            return;
        }
        let once = matches!(r.result, Class::LoadFail | Class::CreateFail);
        if once {
            let key = (r.result, r.message.clone());
            if said.contains(&key) {
                repeats += 1;
                return;
            }
            said.push(key);
        }
        eprintln!(
            "[{done}/{total}] {} {}: {}{}",
            r.result,
            r.id,
            first_line(&r.message),
            if once {
                " (said once: every case that needs the plugin fails the same way)"
            } else {
                ""
            }
        );
    })?;
    if repeats > 0 {
        eprintln!("baton-conformance: {repeats} more cases failed with the same message");
    }
    let meta = RunMeta {
        tolerances: tolerances.sources.clone(),
        shard: cli.shard.map(|s| s.to_string()),
        ops,
    };
    let mut report = Report::new(&config, meta, outcome);
    if let Some(path) = &cli.expectations {
        let expectations = Expectations::load(path)?;
        let applied = expectations.apply(&mut report);
        eprintln!(
            "baton-conformance: {} expected failures declared in {}",
            applied.expected.len(),
            path.display()
        );
        for (id, reason) in &applied.unexpected_passes {
            eprintln!(
                "warning: unexpected pass {id} (expected to fail: {reason}); remove its entry"
            );
        }
        for (id, want, got) in &applied.other_failures {
            eprintln!("{id}: expected {want}, got {got}");
        }
        for id in &applied.unused {
            eprintln!("warning: expectation {id} matched no case of this run");
        }
    }
    let written = report
        .write_all(&cli.report_dir)
        .context("writing the reports")?;
    let counts: Vec<String> = Class::ALL
        .iter()
        .filter_map(|c| {
            let n = report.totals.get(c.name()).copied().unwrap_or(0);
            (n > 0).then(|| format!("{n} {c}"))
        })
        .collect();
    eprintln!(
        "baton-conformance: {} — {}",
        if report.failed { "FAILED" } else { "passed" },
        counts.join(", ")
    );
    eprintln!(
        "reports: {}, {}, {}",
        written.json.display(),
        written.junit.display(),
        written.summary.display()
    );
    Ok(report.exit_code() as u8)
}

fn run_suite(cli: &Cli, dir: &std::path::Path, tolerances: &Tolerances) -> Result<u8> {
    let manifest = match &cli.suite_manifest {
        Some(p) => suite::Manifest::load(p)?,
        None => suite::Manifest::default(),
    };
    let engine = match (cli.user_path, &cli.suite_config) {
        (false, _) => None,
        (true, Some(p)) => Some(baton_runtime_host::Engine::new(
            baton_runtime_host::Config::load(p)?,
        )?),
        (true, None) => Some(baton_runtime_host::Engine::new(
            baton_runtime_host::Config::default(),
        )?),
    };
    let mode = match &engine {
        Some(e) => suite::SuiteMode::User(e),
        None => suite::SuiteMode::Kit,
    };
    let report = suite::run_suite(dir, &manifest, tolerances, &mode, &mut |c| {
        if c.class.is_unexpected_failure() {
            eprintln!(
                "{} {} [{}]: {}",
                c.class,
                c.name,
                c.op,
                first_line(&c.message)
            );
        } else if c.class == suite::SuiteClass::UnexpectedPass {
            eprintln!(
                "warning: unexpected-pass {} [{}] (listed in the manifest)",
                c.name, c.op
            );
        }
    })?;
    if let Some(p) = &cli.suite_write_manifest {
        std::fs::write(p, report.manifest_text())
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let written = report
        .write_all(&cli.report_dir)
        .context("writing the suite reports")?;
    let counts: Vec<String> = suite::SuiteClass::ALL
        .iter()
        .filter_map(|c| {
            let n = report.count(*c);
            (n > 0).then(|| format!("{n} {c}"))
        })
        .collect();
    eprintln!(
        "baton-conformance: suite {} ({}): {} — {} cases in {:.1} s: {}; IR ops: {}/{} pass; ops of exported models: {}/{} pass; inference cases on plain tensors: {}/{} pass",
        dir.display(),
        report.mode,
        if report.failed { "FAILED" } else { "passed" },
        report.total,
        report.wall_s,
        counts.join(", "),
        report.ir_ops.passed,
        report.ir_ops.cases,
        report.model_ops.passed,
        report.model_ops.cases,
        report.plain_inference.passed,
        report.plain_inference.cases
    );
    if !report.unexpected_passes.is_empty() {
        eprintln!(
            "warning: {} unexpected passes; remove them from the manifest",
            report.unexpected_passes.len()
        );
    }
    if !report.stale_manifest_entries.is_empty() {
        eprintln!(
            "warning: {} manifest entries name no case",
            report.stale_manifest_entries.len()
        );
    }
    eprintln!(
        "reports: {}, {}",
        written.json.display(),
        written.summary.display()
    );
    Ok(report.exit_code() as u8)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("'{s}': expected KEY=VALUE")),
    }
}

fn parse_ops(s: &str) -> Result<OpList, String> {
    cases::parse_ops(s).map(OpList).map_err(|e| e.to_string())
}

fn parse_shard(s: &str) -> Result<Shard, String> {
    s.parse::<Shard>().map_err(|e| e.to_string())
}

fn parse_isolation(s: &str) -> Result<Isolation, String> {
    s.parse::<Isolation>().map_err(|e| e.to_string())
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("'{s}': expected a positive number of seconds")),
    }
}
