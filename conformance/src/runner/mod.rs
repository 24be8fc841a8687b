//! The isolating runner. The parent process never loads the plugin: it starts a child
//! (this same executable, `__child`), hands it the case ids, and reads one protocol line
//! per event (see [`protocol`]) on a reader thread, waiting with a timeout.
//!
//! How many children, [`Isolation`] says. By default ([`Isolation::Run`]) one child runs
//! every case in turn, with the plugin loaded and its context created once, and is
//! replaced only after a crash or a hang: fast, but a case can see state an earlier case
//! left in the plugin (a cache, a global, a corrupted heap that only fails later).
//! [`Isolation::Case`] starts a fresh child for every case (the plugin loaded, created
//! and unloaded each time), so each verdict depends on that case alone, at the cost of a
//! process start and a plugin load per case.
//!
//! - If the child dies (a signal or a non-zero exit) while a case is running, that case is
//!   `crash`, with the signal name and the tail of the child's stderr, and a new child
//!   resumes from the next case.
//! - If a case runs longer than the timeout, the child is killed, the case is `timeout`,
//!   and a new child resumes from the next case.
//! - If the child dies or stalls between cases, the next case takes the blame (it is the
//!   one that could not run), so every restart consumes a case and the run always ends.

pub mod abi;
pub mod child;
pub mod exec;
pub mod protocol;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cases::Case;
use crate::error::{Error, Result};
use crate::outcome::{CaseResult, Class};
use protocol::{Message, PluginInfo};

/// How to run a plugin's cases.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The `baton-conformance` executable to start as the child.
    pub child_exe: PathBuf,
    /// The plugin library.
    pub plugin: PathBuf,
    /// Plugin options, `(key, value)`, validated by the host against the plugin's schema.
    pub options: Vec<(String, String)>,
    /// Per-case time limit.
    pub timeout: Duration,
    /// `--tolerances DIR`, passed on to the child.
    pub tolerances_dir: Option<PathBuf>,
    /// One child for the run, or one per case.
    pub isolation: Isolation,
}

/// How the cases of a run are spread over child processes (`--isolate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// One child runs the cases in turn; a new one resumes after a crash or a timeout.
    #[default]
    Run,
    /// A new child for every case.
    Case,
}

impl Isolation {
    /// `run` or `case`, as `--isolate` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Run => "run",
            Isolation::Case => "case",
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = Error;

    fn from_str(s: &str) -> Result<Isolation> {
        match s {
            "run" => Ok(Isolation::Run),
            "case" => Ok(Isolation::Case),
            _ => Err(Error::Usage(format!(
                "--isolate '{s}': expected run (one child for the run) or case (one child per case)"
            ))),
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// The plugin as the child saw it (the latest description any child sent).
    pub plugin: Option<PluginInfo>,
    /// One result per case, in case order.
    pub results: Vec<CaseResult>,
    /// Child processes started.
    pub children: usize,
    /// Things worth knowing that are not case results (a child dying after its last case).
    pub notes: Vec<String>,
}

/// Runs `cases` in isolated child processes.
pub fn run_isolated(config: &RunConfig, cases: &[Case]) -> Result<RunOutcome> {
    run_isolated_with(config, cases, &mut |_| {})
}

/// As [`run_isolated`], calling `progress` with each result as it arrives.
pub fn run_isolated_with(
    config: &RunConfig,
    cases: &[Case],
    progress: &mut dyn FnMut(&CaseResult),
) -> Result<RunOutcome> {
    let index: HashMap<&str, usize> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let mut results: Vec<Option<CaseResult>> = vec![None; cases.len()];
    let mut outcome = RunOutcome::default();
    let mut next = 0;
    while next < cases.len() {
        // The cases this child is given: the rest of the run, or the next case alone.
        let batch_end = match config.isolation {
            Isolation::Run => cases.len(),
            Isolation::Case => next + 1,
        };
        let ids: Vec<&str> = cases[next..batch_end]
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        let mut child = ChildProc::spawn(config, &ids)?;
        outcome.children += 1;
        let mut running: Option<(usize, Instant)> = None;
        let mut idle_since = Instant::now();
        loop {
            let since = running.map_or(idle_since, |(_, t)| t);
            let left = config.timeout.saturating_sub(since.elapsed());
            match child.lines.recv_timeout(left) {
                Ok(Some(line)) => match Message::parse(&line) {
                    None => {}
                    Some(Err(e)) => outcome.notes.push(e),
                    Some(Ok(Message::Plugin { info })) => outcome.plugin = Some(info),
                    Some(Ok(Message::Start { id })) => {
                        if let Some(&pos) = index.get(id.as_str()) {
                            running = Some((pos, Instant::now()));
                            child.clear_stderr();
                        }
                    }
                    Some(Ok(Message::Done { result })) => {
                        if let Some(&pos) = index.get(result.id.as_str()) {
                            progress(&result);
                            results[pos] = Some(*result);
                            next = next.max(pos + 1);
                        }
                        running = None;
                        idle_since = Instant::now();
                    }
                },
                Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                    let status = child.wait();
                    let tail = child.stderr_tail();
                    match running {
                        Some((pos, t0)) => {
                            let r = died(&cases[pos], status, &tail, t0, "while running the case");
                            progress(&r);
                            results[pos] = Some(r);
                            next = pos + 1;
                        }
                        None if next < batch_end => {
                            let r = died(
                                &cases[next],
                                status,
                                &tail,
                                idle_since,
                                "before it could start the case",
                            );
                            progress(&r);
                            results[next] = Some(r);
                            next += 1;
                        }
                        None if !status.success() => outcome.notes.push(format!(
                            "the child {} after its last case (while unloading the plugin); stderr: {}",
                            describe_status(status).0,
                            last_line(&tail)
                        )),
                        None => {}
                    }
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {
                    child.kill();
                    let tail = child.stderr_tail();
                    if running.is_none() && next >= batch_end {
                        outcome.notes.push(format!(
                            "the child did not exit within {} s of its last case (hung unloading the plugin?) and was killed; stderr: {}",
                            config.timeout.as_secs_f64(),
                            last_line(&tail)
                        ));
                        break;
                    }
                    let (pos, t0, when) = match running {
                        Some((pos, t0)) => (pos, t0, "the case"),
                        None => (next, idle_since, "starting the case (loading the plugin?)"),
                    };
                    let mut r = base(&cases[pos]);
                    r.result = Class::Timeout;
                    r.message = format!(
                        "{when} did not finish within {} s; the child process was killed",
                        config.timeout.as_secs_f64()
                    );
                    r.stderr_tail = non_empty(tail);
                    r.duration_ms = crate::outcome::millis(t0.elapsed());
                    progress(&r);
                    results[pos] = Some(r);
                    next = pos + 1;
                    break;
                }
            }
        }
    }
    outcome.results = results
        .into_iter()
        .zip(cases)
        .map(|(r, c)| {
            r.unwrap_or_else(|| {
                let mut r = base(c);
                r.result = Class::Crash;
                r.message = "the case never reported a result".into();
                r
            })
        })
        .collect();
    Ok(outcome)
}

/// A result with the case's identity and nothing else.
fn base(case: &Case) -> CaseResult {
    exec::blank(case)
}

/// A `crash` result from the child's exit status.
fn died(case: &Case, status: ExitStatus, tail: &str, t0: Instant, when: &str) -> CaseResult {
    let (what, signal, code) = describe_status(status);
    let mut r = base(case);
    r.result = Class::Crash;
    r.message = format!("the child process {what} {when}");
    let last = last_line(tail);
    if !last.is_empty() {
        r.message.push_str(&format!("; stderr: {last}"));
    }
    r.signal = signal;
    r.exit_code = code;
    r.stderr_tail = non_empty(tail.to_string());
    r.duration_ms = crate::outcome::millis(t0.elapsed());
    r
}

/// `("died of SIGSEGV", Some("SIGSEGV"), None)` or `("exited with code 3", None, Some(3))`.
fn describe_status(status: ExitStatus) -> (String, Option<String>, Option<i32>) {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = signal_name(sig);
            return (format!("died of {name}"), Some(name), None);
        }
    }
    match status.code() {
        Some(c) => (format!("exited with code {c}"), None, Some(c)),
        None => ("ended abnormally".into(), None, None),
    }
}

/// The usual name of a POSIX signal number (Linux numbering).
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

fn last_line(tail: &str) -> &str {
    tail.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

fn non_empty(s: String) -> Option<String> {
    (!s.trim().is_empty()).then_some(s)
}

/// Bytes of child stderr kept for a crash report.
const STDERR_TAIL: usize = 4096;

/// A running child with its reader threads.
struct ChildProc {
    child: Child,
    /// Protocol and noise lines; `None` at end of stream.
    lines: Receiver<Option<String>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_done: Receiver<()>,
}

impl ChildProc {
    fn spawn(config: &RunConfig, ids: &[&str]) -> Result<ChildProc> {
        // `BATON_CHILD_RUNNER` prefixes the child with a launcher, as cargo's target
        // runner does: under qemu-user without binfmt_misc an aarch64 child must be
        // started through `qemu-aarch64-static`.
        let mut cmd = match std::env::var_os("BATON_CHILD_RUNNER").filter(|r| !r.is_empty()) {
            Some(runner) => {
                let mut c = Command::new(runner);
                c.arg(&config.child_exe);
                c
            }
            None => Command::new(&config.child_exe),
        };
        cmd.arg("__child").arg("--plugin").arg(&config.plugin);
        for (k, v) in &config.options {
            cmd.arg("--option").arg(format!("{k}={v}"));
        }
        if let Some(d) = &config.tolerances_dir {
            cmd.arg("--tolerances").arg(d);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                Error::Child(format!("cannot start {}: {e}", config.child_exe.display()))
            })?;
        let missing = || Error::Child("child pipes missing".into());
        let mut stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let mut stderr_pipe = child.stderr.take().ok_or_else(missing)?;
        let list: String = ids.iter().map(|id| format!("{id}\n")).collect();
        // A child that dies early closes its stdin; the write error is then expected.
        std::thread::spawn(move || {
            let _ = stdin.write_all(list.as_bytes());
        });
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(Some(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(None);
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let (done_tx, stderr_done) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.extend_from_slice(&buf[..n]);
                    let excess = s.len().saturating_sub(STDERR_TAIL);
                    s.drain(..excess);
                }
            }
            let _ = done_tx.send(());
        });
        Ok(ChildProc {
            child,
            lines,
            stderr,
            stderr_done,
        })
    }

    fn clear_stderr(&self) {
        if let Ok(mut s) = self.stderr.lock() {
            s.clear();
        }
    }

    /// The last bytes the child wrote to stderr (waits briefly for the pipe to drain).
    fn stderr_tail(&self) -> String {
        let _ = self.stderr_done.recv_timeout(Duration::from_millis(500));
        let bytes = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn wait(&mut self) -> ExitStatus {
        match self.child.wait() {
            Ok(s) => s,
            Err(_) => {
                self.kill();
                self.child.wait().unwrap_or_default()
            }
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}
