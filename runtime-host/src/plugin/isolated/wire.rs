//! The messages between the host and its plugin process: small, versioned and
//! length-prefixed, every length checked before it is trusted.
//!
//! ```text
//! frame   := u32 magic "BTPH", u16 version, u16 kind, u32 len, payload[len]
//! request := u64 shm_len, fields of its kind
//! reply   := i32 status, str message, fields of its kind (when status is 0)
//! view    := u32 dtype, u32 rank, i64 shape[rank], u64 offset, u64 byte_len,
//!            u32 quant_kind, u32 axis, u32 count, f32 scale[count], i32 zero_point[count]
//! ```
//!
//! All integers are little-endian. A reply's kind is its request's with the high bit set.
//! Tensor bytes never travel in a frame: a view's `offset` is where its bytes lie in the
//! shared region (`shm.rs`), whose mapped size the request's `shm_len` gives. A status
//! other than 0 is the plugin's own status code and `message` its error text, passed on
//! unchanged so the host reports it exactly as it would in its own process.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use baton_delegate_api::abi;
use baton_delegate_api::bytes::{ByteReader, ByteWriter};

/// "BTPH" read as a little-endian `u32`.
pub(super) const MAGIC: u32 = u32::from_le_bytes(*b"BTPH");
/// Bumped on any change to a message's fields.
pub(super) const VERSION: u16 = 1;
/// The largest payload either side accepts (a compiled blob is the largest thing sent).
pub(super) const MAX_PAYLOAD: usize = 1 << 30;
const HEADER: usize = 12;

/// Request kinds; a reply is `kind | REPLY`.
pub(super) mod kind {
    pub const LOAD: u16 = 1;
    pub const CREATE: u16 = 2;
    pub const SUPPORTS: u16 = 3;
    pub const COMPILE: u16 = 4;
    pub const BLOB_COMPATIBILITY: u16 = 5;
    pub const INIT: u16 = 6;
    pub const EXECUTE: u16 = 7;
    pub const PROFILE: u16 = 8;
    pub const DESTROY: u16 = 9;
    pub const DESTROY_CONTEXT: u16 = 10;
    pub const MEMORY: u16 = 11;
    pub const REPLY: u16 = 0x8000;
}

/// Why a frame could not be read or written.
#[derive(Debug)]
pub(super) enum FrameError {
    /// The other side closed the connection (or it broke) before a whole frame came.
    Closed,
    /// The deadline passed.
    TimedOut,
    /// The bytes are not a frame of this protocol.
    Malformed(String),
    /// Any other I/O failure.
    Io(io::Error),
}

fn io_error(e: io::Error) -> FrameError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => FrameError::TimedOut,
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe => FrameError::Closed,
        _ => FrameError::Io(e),
    }
}

/// What is left before `deadline`; an error once it has passed.
fn left(deadline: Instant) -> Result<std::time::Duration, FrameError> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(left) if !left.is_zero() => Ok(left),
        _ => Err(FrameError::TimedOut),
    }
}

/// Writes one frame (in one `send` when the socket takes it), finishing before `deadline`.
/// Without a deadline the socket is never given a timeout, so calls of a plugin without
/// `timeout_ms` cost no `setsockopt`.
pub(super) fn send(
    sock: &mut UnixStream,
    kind: u16,
    payload: &[u8],
    deadline: Option<Instant>,
) -> Result<(), FrameError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(FrameError::Malformed(format!(
            "a payload of {} bytes is over the {MAX_PAYLOAD}-byte limit",
            payload.len()
        )));
    }
    let mut frame = Vec::with_capacity(HEADER + payload.len());
    frame.extend_from_slice(&MAGIC.to_le_bytes());
    frame.extend_from_slice(&VERSION.to_le_bytes());
    frame.extend_from_slice(&kind.to_le_bytes());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(payload);
    let mut done = 0;
    while done < frame.len() {
        if let Some(d) = deadline {
            sock.set_write_timeout(Some(left(d)?))
                .map_err(FrameError::Io)?;
        }
        match send_no_signal(sock, &frame[done..]) {
            Ok(0) => return Err(FrameError::Closed),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e)),
        }
    }
    Ok(())
}

/// `send` without SIGPIPE: a plugin process that died must be an error here, not a signal
/// that ends the host (a program embedding the host may not ignore SIGPIPE as Rust's
/// runtime does).
fn send_no_signal(sock: &UnixStream, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes; the descriptor is the socket's own.
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Reads one frame into `payload`, returning its kind. A small frame arrives in one
/// `read`; a large one grows as its bytes arrive, so a length that lies costs no
/// allocation beyond what was really sent. Calls alternate strictly, so bytes after the
/// frame are a protocol error, not the next frame.
pub(super) fn recv(
    sock: &mut UnixStream,
    payload: &mut Vec<u8>,
    deadline: Option<Instant>,
) -> Result<u16, FrameError> {
    let mut frame: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut head: Option<(u16, usize)> = None;
    loop {
        if head.is_none() && frame.len() >= HEADER {
            head = Some(read_header(&frame[..HEADER])?);
        }
        if let Some((kind, len)) = head {
            let end = HEADER + len;
            if frame.len() > end {
                return Err(FrameError::Malformed(format!(
                    "{} bytes after a frame of {end}",
                    frame.len() - end
                )));
            }
            if frame.len() == end {
                payload.clear();
                payload.extend_from_slice(&frame[HEADER..]);
                return Ok(kind);
            }
        }
        if let Some(d) = deadline {
            sock.set_read_timeout(Some(left(d)?))
                .map_err(FrameError::Io)?;
        }
        match sock.read(&mut chunk) {
            Ok(0) => return Err(FrameError::Closed),
            Ok(n) => frame.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e)),
        }
    }
}

/// The kind and payload length of a frame header, checked.
fn read_header(header: &[u8]) -> Result<(u16, usize), FrameError> {
    let field = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let magic = field(0);
    let version = u16::from_le_bytes([header[4], header[5]]);
    let kind = u16::from_le_bytes([header[6], header[7]]);
    let len = field(8) as usize;
    if magic != MAGIC {
        return Err(FrameError::Malformed(format!(
            "bad magic {magic:#010x} (expected {MAGIC:#010x})"
        )));
    }
    if version != VERSION {
        return Err(FrameError::Malformed(format!(
            "protocol version {version}, this build speaks {VERSION} (a helper binary from another Baton build?)"
        )));
    }
    if len > MAX_PAYLOAD {
        return Err(FrameError::Malformed(format!(
            "a payload of {len} bytes is over the {MAX_PAYLOAD}-byte limit"
        )));
    }
    Ok((kind, len))
}

/// A tensor described for the other side: its bytes lie at `offset` in the shared region.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct ViewDesc {
    pub dtype: u32,
    pub shape: Vec<i64>,
    pub offset: u64,
    pub byte_len: u64,
    pub quant_kind: u32,
    pub axis: u32,
    pub scales: Vec<f32>,
    pub zero_points: Vec<i32>,
}

impl ViewDesc {
    /// The description of a host view whose bytes are (or will be) at `offset`.
    ///
    /// # Safety
    /// `v.shape` must point at `v.rank` values and its quant arrays at `count` entries
    /// (as the ABI requires of every view the host makes).
    pub(super) unsafe fn of(v: &abi::TensorView, offset: usize) -> ViewDesc {
        let rank = (v.rank as usize).min(abi::MAX_RANK);
        let shape = if rank == 0 || v.shape.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(v.shape, rank).to_vec()
        };
        let q = &v.quant;
        let count = q.count as usize;
        let (scales, zero_points) = if q.kind == 0 || count == 0 {
            (Vec::new(), Vec::new())
        } else {
            let scales = if q.scales.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(q.scales, count).to_vec()
            };
            let zps = if q.zero_points.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(q.zero_points, count).to_vec()
            };
            (scales, zps)
        };
        ViewDesc {
            dtype: v.dtype,
            shape,
            offset: offset as u64,
            byte_len: v.byte_len,
            quant_kind: q.kind,
            axis: q.axis,
            scales,
            zero_points,
        }
    }

    pub(super) fn write(&self, w: &mut ByteWriter) {
        w.u32(self.dtype);
        w.u32(self.shape.len() as u32);
        for &d in &self.shape {
            w.u64(d as u64);
        }
        w.u64(self.offset);
        w.u64(self.byte_len);
        w.u32(self.quant_kind);
        w.u32(self.axis);
        w.u32(self.scales.len().min(self.zero_points.len()) as u32);
        let n = self.scales.len().min(self.zero_points.len());
        for &s in &self.scales[..n] {
            w.u32(s.to_bits());
        }
        for &z in &self.zero_points[..n] {
            w.i32(z);
        }
    }

    /// Reads a view and checks it against a shared region of `shm_len` bytes.
    pub(super) fn read(r: &mut ByteReader<'_>, shm_len: usize) -> Result<ViewDesc, String> {
        let dtype = r.u32("view dtype")?;
        let rank = r.u32("view rank")? as usize;
        if rank > abi::MAX_RANK {
            return Err(format!("view rank {rank} is over {}", abi::MAX_RANK));
        }
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(r.u64("view shape")? as i64);
        }
        let offset = r.u64("view offset")?;
        let byte_len = r.u64("view byte length")?;
        let inside = offset
            .checked_add(byte_len)
            .is_some_and(|end| end <= shm_len as u64);
        if !inside {
            return Err(format!(
                "view [{offset}, +{byte_len}) lies outside the shared region of {shm_len} bytes"
            ));
        }
        let quant_kind = r.u32("quant kind")?;
        let axis = r.u32("quant axis")?;
        let count = r.count_u32(8, "quant count")?;
        let mut scales = Vec::with_capacity(count);
        for _ in 0..count {
            scales.push(f32::from_bits(r.u32("quant scale")?));
        }
        let mut zero_points = Vec::with_capacity(count);
        for _ in 0..count {
            zero_points.push(r.i32("quant zero point")?);
        }
        Ok(ViewDesc {
            dtype,
            shape,
            offset,
            byte_len,
            quant_kind,
            axis,
            scales,
            zero_points,
        })
    }
}

/// Writes a list of views.
pub(super) fn write_views(w: &mut ByteWriter, views: &[ViewDesc]) {
    w.u32(views.len() as u32);
    for v in views {
        v.write(w);
    }
}

/// Reads a list of views (each at least 40 bytes on the wire).
pub(super) fn read_views(r: &mut ByteReader<'_>, shm_len: usize) -> Result<Vec<ViewDesc>, String> {
    let n = r.count_u32(40, "view count")?;
    (0..n).map(|_| ViewDesc::read(r, shm_len)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn views_round_trip_and_are_checked_against_the_region() {
        let v = ViewDesc {
            dtype: 1,
            shape: vec![2, 3],
            offset: 64,
            byte_len: 24,
            quant_kind: 2,
            axis: 1,
            scales: vec![0.5, 0.25, 2.0],
            zero_points: vec![0, -1, 3],
        };
        let mut w = ByteWriter::new();
        write_views(&mut w, std::slice::from_ref(&v));
        let bytes = w.finish();
        let back = read_views(&mut ByteReader::new(&bytes), 88).unwrap();
        assert_eq!(back, vec![v]);
        // One byte short of the region: refused, with the range.
        let e = read_views(&mut ByteReader::new(&bytes), 87).unwrap_err();
        assert!(e.contains("[64, +24)"), "{e}");
        // Every truncation is an error, never a panic.
        for cut in 0..bytes.len() {
            assert!(read_views(&mut ByteReader::new(&bytes[..cut]), 88).is_err());
        }
    }

    #[test]
    fn frames_are_checked_before_their_payload_is_read() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        send(&mut a, kind::EXECUTE, b"hello", None).unwrap();
        let mut buf = Vec::new();
        assert_eq!(recv(&mut b, &mut buf, None).unwrap(), kind::EXECUTE);
        assert_eq!(buf, b"hello");
        // A frame of another version is refused, naming both.
        let mut bad = Vec::new();
        bad.extend_from_slice(&MAGIC.to_le_bytes());
        bad.extend_from_slice(&(VERSION + 1).to_le_bytes());
        bad.extend_from_slice(&kind::LOAD.to_le_bytes());
        bad.extend_from_slice(&0u32.to_le_bytes());
        a.write_all(&bad).unwrap();
        match recv(&mut b, &mut buf, None) {
            Err(FrameError::Malformed(m)) => assert!(m.contains("version"), "{m}"),
            other => panic!("expected a malformed frame, got {other:?}"),
        }
        // A length over the limit is refused before anything is allocated for it.
        let mut huge = Vec::new();
        huge.extend_from_slice(&MAGIC.to_le_bytes());
        huge.extend_from_slice(&VERSION.to_le_bytes());
        huge.extend_from_slice(&kind::LOAD.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        a.write_all(&huge).unwrap();
        assert!(matches!(
            recv(&mut b, &mut buf, None),
            Err(FrameError::Malformed(_))
        ));
        // A peer that sends more than one frame at a time does not speak the protocol.
        let mut two = Vec::new();
        for _ in 0..2 {
            two.extend_from_slice(&MAGIC.to_le_bytes());
            two.extend_from_slice(&VERSION.to_le_bytes());
            two.extend_from_slice(&kind::LOAD.to_le_bytes());
            two.extend_from_slice(&0u32.to_le_bytes());
        }
        a.write_all(&two).unwrap();
        match recv(&mut b, &mut buf, None) {
            Err(FrameError::Malformed(m)) => assert!(m.contains("after a frame"), "{m}"),
            other => panic!("expected a malformed frame, got {other:?}"),
        }
        // A peer that goes away mid-frame is `Closed`.
        a.write_all(&MAGIC.to_le_bytes()).unwrap();
        drop(a);
        assert!(matches!(
            recv(&mut b, &mut buf, None),
            Err(FrameError::Closed)
        ));
        // A deadline already past is a timeout.
        let (_c, mut d) = UnixStream::pair().unwrap();
        assert!(matches!(
            recv(&mut d, &mut buf, Some(Instant::now())),
            Err(FrameError::TimedOut)
        ));
    }
}
