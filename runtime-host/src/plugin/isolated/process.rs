//! The plugin process as the host sees it: started from the helper binary with the socket
//! and the shared region as descriptors 3 and 4, called one request at a time, watched.
//!
//! Every call has a deadline when the plugin has a `timeout_ms`. Whatever ends a call
//! other than a reply (the deadline, the process dying, bytes that are not a reply) kills
//! the process and marks it failed: from then on every call fails at once with the first
//! reason, and the host's fallback rules take over as for any failing plugin.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use baton_delegate_api::bytes::{ByteReader, ByteWriter};

use super::shm::Region;
use super::wire::{self, kind, FrameError};

/// The argument the helper is started with, so that running it by hand says what it is.
pub(crate) const SERVE_ARG: &str = "--serve-plugin";
/// Descriptors the child finds its ends on.
pub(super) const SOCKET_FD: i32 = 3;
pub(super) const SHM_FD: i32 = 4;
/// The shared region's first size; it grows with the largest call.
const FIRST_REGION: usize = 1 << 20;

/// Why a call did not succeed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The plugin answered with a status other than OK, and its error text.
    Plugin { status: i32, message: String },
    /// The process is gone (died, killed by the watchdog, or spoke garbage).
    Process(String),
}

/// A running plugin process.
pub struct PluginProcess {
    timeout: Option<Duration>,
    state: Mutex<State>,
}

/// What a call holds while it runs: the connection and the shared region.
pub(super) struct State {
    proc: std::process::Child,
    sock: UnixStream,
    pub(super) shm: Region,
    failed: Option<String>,
}

impl PluginProcess {
    /// Starts `helper` for one plugin.
    pub(super) fn spawn(
        helper: &Path,
        timeout: Option<Duration>,
    ) -> std::io::Result<PluginProcess> {
        let (sock, theirs) = UnixStream::pair()?;
        let shm = Region::create(FIRST_REGION)?;
        let (their_fd, shm_fd) = (theirs.as_raw_fd(), shm.fd());
        let mut cmd = Command::new(helper);
        cmd.arg(SERVE_ARG).stdin(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec. Both
        // ends are first duplicated above 10 so that placing one on 3 or 4 cannot
        // overwrite the other; the duplicates are close-on-exec, the placed ones are not.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(their_fd, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(shm_fd, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, SOCKET_FD) < 0 || libc::dup2(b, SHM_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let proc = cmd.spawn()?;
        drop(theirs);
        Ok(PluginProcess {
            timeout,
            state: Mutex::new(State {
                proc,
                sock,
                shm,
                failed: None,
            }),
        })
    }

    /// A process already started and connected by the caller (tests: a fake peer).
    #[cfg(test)]
    pub(super) fn from_parts(
        proc: std::process::Child,
        sock: UnixStream,
        timeout: Option<Duration>,
    ) -> PluginProcess {
        PluginProcess {
            timeout,
            state: Mutex::new(State {
                proc,
                sock,
                shm: Region::create(FIRST_REGION).expect("a shared region"),
                failed: None,
            }),
        }
    }

    /// The bound on each call, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Why the process was given up, once it has been.
    pub fn failure(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    /// The connection, for one call at a time. A panic while it was held cannot leave it
    /// half-written in a way that matters: the next call's reply check catches that.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        // End of input tells the helper to unload the plugin and exit.
        let _ = st.sock.shutdown(std::net::Shutdown::Both);
        if reap(&mut st.proc, Duration::from_millis(500)).is_none() {
            let _ = st.proc.kill();
            let _ = st.proc.wait();
        }
    }
}

/// Waits up to `limit` for the process to end.
fn reap(proc: &mut std::process::Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        match proc.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(1)),
            _ => return None,
        }
    }
}

/// "killed by signal 11 (SIGSEGV)", "exited with status 3".
pub(super) fn describe_exit(status: ExitStatus) -> String {
    if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGABRT => " (SIGABRT)",
            libc::SIGBUS => " (SIGBUS)",
            libc::SIGILL => " (SIGILL)",
            libc::SIGFPE => " (SIGFPE)",
            libc::SIGKILL => " (SIGKILL)",
            libc::SIGTERM => " (SIGTERM)",
            _ => "",
        };
        format!("killed by signal {sig}{name}")
    } else {
        format!("exited with status {}", status.code().unwrap_or(-1))
    }
}

impl State {
    /// Sends one request (`payload` after the region's size) and returns the body of its
    /// reply when the plugin's status is OK.
    pub(super) fn call(
        &mut self,
        timeout: Option<Duration>,
        call: &'static str,
        request: u16,
        payload: &[u8],
    ) -> Result<Vec<u8>, Failure> {
        if let Some(reason) = &self.failed {
            return Err(Failure::Process(format!(
                "the plugin process stopped earlier ({reason}); {call} was not sent"
            )));
        }
        let mut framed = ByteWriter::new();
        framed.u64(self.shm.len() as u64);
        framed.bytes(payload);
        let framed = framed.finish();
        // A bound too far to represent is no bound.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut reply = Vec::new();
        let got = wire::send(&mut self.sock, request, &framed, deadline)
            .and_then(|()| wire::recv(&mut self.sock, &mut reply, deadline));
        match got {
            Ok(k) if k == request | kind::REPLY => {}
            Ok(k) => {
                return Err(self.protocol_error(call, format!("a reply of kind {k:#06x}")));
            }
            Err(FrameError::TimedOut) => {
                let ms = timeout.map_or(0, |t| t.as_millis());
                return Err(self.fail(format!(
                    "{call} did not return within {ms} ms (timeout_ms); the plugin process was killed"
                )));
            }
            Err(FrameError::Closed) => {
                let how = reap(&mut self.proc, Duration::from_secs(2))
                    .map_or("closed its connection".to_string(), describe_exit);
                return Err(self.fail(format!("the plugin process died during {call}: {how}")));
            }
            Err(FrameError::Malformed(m)) => return Err(self.protocol_error(call, m)),
            Err(FrameError::Io(e)) => {
                return Err(self.fail(format!(
                    "the connection to the plugin process failed during {call}: {e}; the process was killed"
                )))
            }
        }
        let mut r = ByteReader::new(&reply);
        let head = r
            .i32("reply status")
            .map_err(String::from)
            .and_then(|s| Ok((s, r.str("reply message")?.to_string())));
        let (status, message) = match head {
            Ok(h) => h,
            Err(e) => return Err(self.protocol_error(call, e)),
        };
        if status != baton_delegate_api::abi::STATUS_OK {
            return Err(Failure::Plugin { status, message });
        }
        let at = r.pos();
        reply.drain(..at);
        Ok(reply)
    }

    /// A reply that is not what the protocol says: the process is not trusted further.
    pub(super) fn protocol_error(&mut self, call: &'static str, detail: String) -> Failure {
        self.fail(format!(
            "the plugin process sent a malformed reply to {call} ({detail}); it was killed"
        ))
    }

    /// Kills the process and records why; every later call fails with this reason.
    pub(super) fn fail(&mut self, reason: String) -> Failure {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
        self.failed = Some(reason.clone());
        Failure::Process(reason)
    }
}
