//! The host's side against a peer that does not keep to the protocol: every bad reply to
//! `execute` is a failed call with the reason, the process is killed and later calls fail
//! at once; nothing panics and nothing is read from the host's memory beyond its views.

use std::os::unix::net::UnixStream;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use baton_delegate_api::abi;
use baton_delegate_api::bytes::ByteWriter;

use super::{execute, last_error, ProxyHandle};
use crate::plugin::isolated::process::PluginProcess;
use crate::plugin::isolated::wire::{self, kind};

/// What the fake peer does with the one request it reads.
enum Peer {
    /// Sends these bytes as the whole reply frame's payload, with this kind.
    Reply(u16, Vec<u8>),
    /// Sends these raw bytes (not a frame).
    Raw(Vec<u8>),
    /// Says nothing and keeps the connection open.
    Silent,
    /// Closes the connection.
    Hangup,
}

/// A reply payload: status, message, body.
fn reply(status: i32, message: &str, body: &[u8]) -> Vec<u8> {
    let mut w = ByteWriter::new();
    w.i32(status);
    w.str(message);
    w.bytes(body);
    w.finish()
}

/// Runs one `execute` of a 4-float output against `peer`; returns the status, the error
/// text and the process (to look at its failure).
fn execute_against(peer: Peer, timeout: Option<Duration>) -> (i32, String, Arc<PluginProcess>) {
    let (host, mut theirs) = UnixStream::pair().unwrap();
    // A real process for the watchdog to kill; the fake peer is a thread.
    let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let process = Arc::new(PluginProcess::from_parts(sleeper, host, timeout));
    let server = std::thread::spawn(move || {
        let mut request = Vec::new();
        let k = wire::recv(&mut theirs, &mut request, None).unwrap();
        assert_eq!(k, kind::EXECUTE);
        match peer {
            Peer::Reply(k, payload) => wire::send(&mut theirs, k, &payload, None).unwrap(),
            Peer::Raw(bytes) => std::io::Write::write_all(&mut theirs, &bytes).unwrap(),
            Peer::Silent => std::thread::sleep(Duration::from_millis(500)),
            Peer::Hangup => return None,
        }
        // Kept open until the call is over, so the host sees only the reply.
        Some(theirs)
    });
    let handle = Box::into_raw(Box::new(ProxyHandle {
        process: process.clone(),
        remote: 0,
        events: None,
    }));
    let input = [1.0f32, -2.0, 3.0, -4.0];
    let mut output = [0f32; 4];
    let in_shape = [4i64];
    let mut out_shape = [0i64; abi::MAX_RANK];
    out_shape[0] = 4;
    let view = |data: *mut f32, shape: *mut i64| abi::TensorView {
        data: data.cast(),
        byte_len: 16,
        dtype: baton_delegate_api::DType::F32.code(),
        rank: 1,
        shape,
        quant: abi::QuantView {
            kind: 0,
            axis: 0,
            count: 0,
            reserved: 0,
            scales: std::ptr::null(),
            zero_points: std::ptr::null(),
        },
    };
    let inputs = [view(
        input.as_ptr() as *mut f32,
        in_shape.as_ptr() as *mut i64,
    )];
    let mut outputs = [view(output.as_mut_ptr(), out_shape.as_mut_ptr())];
    // SAFETY: the views point at live arrays of their declared sizes; the handle is ours.
    let status = unsafe { execute(handle.cast(), inputs.as_ptr(), 1, outputs.as_mut_ptr(), 1) };
    // SAFETY: the proxy's text is a NUL-terminated string valid until the next call.
    let text = unsafe { std::ffi::CStr::from_ptr(last_error()) }
        .to_string_lossy()
        .into_owned();
    drop(server.join().unwrap());
    // SAFETY: made above, freed once; its process is failed, so nothing is sent.
    drop(unsafe { Box::from_raw(handle) });
    (status, text, process)
}

#[test]
fn a_reply_that_is_not_the_protocol_fails_the_call_and_the_process() {
    let shape = |rank: u32, n: u32| {
        let mut w = ByteWriter::new();
        w.u32(n);
        for _ in 0..n {
            w.u32(rank);
            for _ in 0..rank {
                w.u64(4);
            }
        }
        w.finish()
    };
    let cases = [
        (
            Peer::Reply(kind::INIT | kind::REPLY, reply(0, "", &shape(1, 1))),
            "a reply of kind",
        ),
        (
            Peer::Reply(kind::EXECUTE | kind::REPLY, reply(0, "", &shape(1, 2))),
            "2 output shapes for 1 outputs",
        ),
        (
            Peer::Reply(kind::EXECUTE | kind::REPLY, reply(0, "", &shape(9, 1))),
            "output rank 9 is over 8",
        ),
        (
            Peer::Reply(kind::EXECUTE | kind::REPLY, 0i32.to_le_bytes().to_vec()),
            "reply message",
        ),
        (Peer::Raw(b"not a frame at all".to_vec()), "bad magic"),
        (Peer::Hangup, "the plugin process died during execute"),
        (
            Peer::Silent,
            "execute did not return within 50 ms (timeout_ms); the plugin process was killed",
        ),
    ];
    for (peer, expect) in cases {
        let (status, text, process) = execute_against(peer, Some(Duration::from_millis(50)));
        assert_eq!(status, abi::STATUS_ERROR, "{expect}: {text}");
        assert!(text.contains(expect), "{expect}: {text}");
        let failure = process.failure().expect("the process is given up");
        assert!(failure.contains(expect), "{failure}");
        // Every later call fails at once with the first reason.
        let mut st = process.lock();
        match st.call(None, "execute", kind::EXECUTE, &[]) {
            Err(super::Failure::Process(why)) => {
                assert!(
                    why.contains("stopped earlier") && why.contains(expect),
                    "{why}"
                )
            }
            other => panic!("expected a failed process, got {other:?}"),
        }
    }
}

#[test]
fn a_plugin_error_passes_through_and_leaves_the_process_running() {
    let payload = reply(abi::STATUS_INVALID_ARGUMENT, "wrong input count", &[]);
    let (status, text, process) =
        execute_against(Peer::Reply(kind::EXECUTE | kind::REPLY, payload), None);
    assert_eq!(status, abi::STATUS_INVALID_ARGUMENT);
    assert_eq!(text, "wrong input count");
    assert_eq!(process.failure(), None);
}
