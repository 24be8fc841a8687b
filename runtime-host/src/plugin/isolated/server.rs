//! The plugin process's side: the helper binary (`baton-plugin-host`) runs [`serve`], which
//! loads the plugin with the host's own loader ([`PluginLibrary::load`]: ELF check, sha256
//! pin, descriptor handshake, ABI checks) and then answers one request at a time by
//! calling the plugin's descriptor, with tensor views that point into the shared region.
//!
//! A request this side cannot read ends the process with a message on stderr: the host
//! then sees a closed connection and treats the plugin as failed, which is the safe answer
//! to a peer that does not speak the protocol.

use std::ffi::{c_char, CStr, CString};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use baton_delegate_api::abi;
use baton_delegate_api::bytes::{ByteReader, ByteWriter};

use super::process::{SERVE_ARG, SHM_FD, SOCKET_FD};
use super::shm::Region;
use super::wire::{self, kind, read_views, ViewDesc};
use crate::plugin::{PluginContext, PluginExecutable, PluginLibrary};

/// The helper's `main`: serves the host on descriptors 3 and 4 until it closes the
/// connection; returns the process exit code.
pub fn serve() -> i32 {
    if std::env::args().nth(1).as_deref() != Some(SERVE_ARG) {
        eprintln!(
            "baton-plugin-host: the Baton host starts this helper for plugins configured with \
             isolation = \"process\"; it is not a command to run by hand"
        );
        return 2;
    }
    // SAFETY: F_GETFD only inspects the descriptor table.
    let open = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
    if !open(SOCKET_FD) || !open(SHM_FD) {
        eprintln!("baton-plugin-host: descriptors {SOCKET_FD} and {SHM_FD} are not open: not started by the Baton host");
        return 2;
    }
    // SAFETY: the host placed our ends on these descriptors, and nothing else owns them.
    let sock = unsafe { UnixStream::from_raw_fd(SOCKET_FD) };
    // SAFETY: as above.
    let shm_fd = unsafe { OwnedFd::from_raw_fd(SHM_FD) };
    let mut server = Server {
        sock,
        shm_fd: Some(shm_fd),
        shm: None,
        lib: None,
        contexts: Vec::new(),
        execs: Vec::new(),
    };
    match server.run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("baton-plugin-host: {e}");
            3
        }
    }
}

struct Server {
    sock: UnixStream,
    shm_fd: Option<OwnedFd>,
    shm: Option<Region>,
    lib: Option<Arc<PluginLibrary>>,
    contexts: Vec<Option<PluginContext>>,
    execs: Vec<Option<PluginExecutable>>,
}

/// A reply: the plugin's status, its error text, and the fields of the kind.
struct Reply {
    status: i32,
    message: String,
    body: ByteWriter,
}

impl Reply {
    fn ok(body: ByteWriter) -> Reply {
        Reply {
            status: abi::STATUS_OK,
            message: String::new(),
            body,
        }
    }

    fn failed(status: i32, message: String) -> Reply {
        Reply {
            status,
            message,
            body: ByteWriter::new(),
        }
    }
}

/// Tensor views over the shared region, with the storage their pointers borrow.
struct Views {
    _descs: Vec<ViewDesc>,
    shapes: Vec<[i64; abi::MAX_RANK]>,
    views: Vec<abi::TensorView>,
}

impl Views {
    fn new(descs: Vec<ViewDesc>, base: *mut u8) -> Views {
        let mut shapes: Vec<[i64; abi::MAX_RANK]> = descs
            .iter()
            .map(|d| {
                let mut s = [0i64; abi::MAX_RANK];
                s[..d.shape.len()].copy_from_slice(&d.shape);
                s
            })
            .collect();
        let views = descs
            .iter()
            .zip(&mut shapes)
            .map(|(d, shape)| abi::TensorView {
                // SAFETY (of the offset): `ViewDesc::read` checked it against the mapping.
                data: unsafe { base.add(d.offset as usize) }.cast(),
                byte_len: d.byte_len,
                dtype: d.dtype,
                rank: d.shape.len() as u32,
                shape: shape.as_mut_ptr(),
                quant: abi::QuantView {
                    kind: d.quant_kind,
                    axis: d.axis,
                    count: d.scales.len() as u32,
                    reserved: 0,
                    scales: if d.scales.is_empty() {
                        std::ptr::null()
                    } else {
                        d.scales.as_ptr()
                    },
                    zero_points: if d.zero_points.is_empty() {
                        std::ptr::null()
                    } else {
                        d.zero_points.as_ptr()
                    },
                },
            })
            .collect();
        Views {
            _descs: descs,
            shapes,
            views,
        }
    }
}

/// The plugin's last error, for a non-OK status.
fn last_error(lib: &PluginLibrary) -> String {
    lib.last_error()
}

impl Server {
    fn run(&mut self) -> Result<(), String> {
        let mut request = Vec::new();
        loop {
            let k = match wire::recv(&mut self.sock, &mut request, None) {
                Ok(k) => k,
                // The host is done (or gone): unload and exit quietly.
                Err(wire::FrameError::Closed) => return Ok(()),
                Err(e) => return Err(format!("cannot read a request: {e:?}")),
            };
            let mut r = ByteReader::new(&request);
            let shm_len = usize::try_from(r.u64("region size")?).map_err(|e| e.to_string())?;
            self.map(shm_len)?;
            let reply = self.handle(k, &mut r, shm_len)?;
            let mut w = ByteWriter::new();
            w.i32(reply.status);
            w.str(&reply.message);
            let mut payload = w.finish();
            payload.extend_from_slice(&reply.body.finish());
            if wire::send(&mut self.sock, k | kind::REPLY, &payload, None).is_err() {
                return Ok(());
            }
        }
    }

    /// Maps the shared region at the size the host says it has now.
    fn map(&mut self, len: usize) -> Result<(), String> {
        match (&mut self.shm, self.shm_fd.take()) {
            (Some(region), _) => region.remap(len),
            (None, Some(fd)) => Region::adopt(fd, len).map(|r| self.shm = Some(r)),
            (None, None) => unreachable!("the descriptor is taken only when mapped"),
        }
        .map_err(|e| format!("cannot map the shared region: {e}"))
    }

    fn base(&mut self) -> *mut u8 {
        self.shm.as_mut().map_or(std::ptr::null_mut(), Region::base)
    }

    fn lib(&self) -> Result<Arc<PluginLibrary>, String> {
        self.lib
            .clone()
            .ok_or_else(|| "a request before the plugin was loaded".to_string())
    }

    fn context(&self, r: &mut ByteReader<'_>) -> Result<&PluginContext, String> {
        let id = r.u64("context id")? as usize;
        self.contexts
            .get(id)
            .and_then(Option::as_ref)
            .ok_or_else(|| format!("no context {id}"))
    }

    fn exec(&mut self, r: &mut ByteReader<'_>) -> Result<&mut PluginExecutable, String> {
        let id = r.u64("handle id")? as usize;
        self.execs
            .get_mut(id)
            .and_then(Option::as_mut)
            .ok_or_else(|| format!("no handle {id}"))
    }

    /// A range of the region named by offset and length.
    fn range(
        &mut self,
        r: &mut ByteReader<'_>,
        shm_len: usize,
    ) -> Result<(*const u8, u64), String> {
        let offset = r.u64("range offset")?;
        let len = r.u64("range length")?;
        if offset
            .checked_add(len)
            .is_none_or(|end| end > shm_len as u64)
        {
            return Err(format!(
                "range [{offset}, +{len}) lies outside the shared region of {shm_len} bytes"
            ));
        }
        // SAFETY: inside the mapping (checked above).
        Ok((unsafe { self.base().add(offset as usize) }, len))
    }

    fn handle(&mut self, k: u16, r: &mut ByteReader<'_>, shm_len: usize) -> Result<Reply, String> {
        match k {
            kind::LOAD => self.load(r),
            kind::CREATE => self.create(r),
            kind::SUPPORTS => self.supports(r, shm_len),
            kind::COMPILE => self.compile(r, shm_len),
            kind::BLOB_COMPATIBILITY => {
                let lib = self.lib()?;
                let ctx = self.context(r)?.ctx;
                let (blob, len) = self.range(r, shm_len)?;
                // SAFETY: a live context; the blob lies in the mapping for the call.
                let code = unsafe { (lib.desc.blob_compatibility)(ctx, blob, len) };
                let mut w = ByteWriter::new();
                w.u32(code);
                Ok(Reply::ok(w))
            }
            kind::INIT => self.init(r, shm_len),
            kind::EXECUTE => self.execute(r, shm_len),
            kind::PROFILE => {
                let events = self.exec(r)?.profile();
                let mut w = ByteWriter::new();
                w.u32(events.len() as u32);
                for e in events {
                    w.str(&e.name);
                    w.str(&e.kind);
                    w.u64(e.cycles);
                    w.u64(e.wall_ns);
                }
                Ok(Reply::ok(w))
            }
            kind::MEMORY => {
                let info = self.exec(r)?.memory();
                let mut w = ByteWriter::new();
                w.u8(info.is_some() as u8);
                if let Some(m) = info {
                    w.u64(m.scratch_bytes);
                    w.u64(m.owned_bytes);
                    w.u64(m.retained_bytes);
                }
                Ok(Reply::ok(w))
            }
            kind::DESTROY => {
                let id = r.u64("handle id")? as usize;
                if let Some(slot) = self.execs.get_mut(id) {
                    *slot = None;
                }
                Ok(Reply::ok(ByteWriter::new()))
            }
            kind::DESTROY_CONTEXT => {
                let id = r.u64("context id")? as usize;
                if let Some(slot) = self.contexts.get_mut(id) {
                    *slot = None;
                }
                Ok(Reply::ok(ByteWriter::new()))
            }
            other => Err(format!("unknown request kind {other:#06x}")),
        }
    }

    fn load(&mut self, r: &mut ByteReader<'_>) -> Result<Reply, String> {
        let path = r.str("plugin path")?.to_string();
        let pin = match r.u8("pin flag")? {
            0 => None,
            _ => Some(r.str("sha256 pin")?.to_string()),
        };
        let lib = match PluginLibrary::load(std::path::Path::new(&path), pin.as_deref()) {
            Ok(lib) => lib,
            Err(e) => return Ok(Reply::failed(abi::STATUS_ERROR, e.to_string())),
        };
        let mut w = ByteWriter::new();
        w.str(&lib.file_hash);
        w.str(&lib.name);
        w.str(&lib.version);
        w.str(&lib.build_id);
        w.u32(lib.abi_minor);
        w.u32(lib.concurrency);
        w.u8(lib.desc.profile.is_some() as u8);
        w.u32(lib.btir_minor());
        w.u8(lib.desc.memory.is_some() as u8);
        w.u32(lib.capabilities());
        w.u32(lib.options.len() as u32);
        for o in &lib.options {
            w.str(o.name);
            w.u32(o.kind);
            w.str(o.default);
            w.u64(o.min.to_bits());
            w.u64(o.max.to_bits());
            w.str(o.choices);
            w.str(o.help);
        }
        self.lib = Some(lib);
        Ok(Reply::ok(w))
    }

    /// Creates a context and describes it (availability and devices) in the same reply:
    /// what a host asks right after creating one.
    fn create(&mut self, r: &mut ByteReader<'_>) -> Result<Reply, String> {
        let lib = self.lib()?;
        let n = r.count_u32(8, "option count")?;
        let mut options = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.str("option key")?.to_string();
            let v = r.str("option value")?.to_string();
            options.push((k, v));
        }
        let cstrings: Vec<(CString, CString)> = options
            .iter()
            .map(|(k, v)| (crate::plugin::cstring(k), crate::plugin::cstring(v)))
            .collect();
        let raw: Vec<abi::OptionValue> = cstrings
            .iter()
            .map(|(k, v)| abi::OptionValue {
                key: k.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let mut ctx: abi::Context = std::ptr::null_mut();
        // SAFETY: the option array and its strings outlive the call.
        let status = unsafe { (lib.desc.create)(raw.as_ptr(), raw.len() as u32, &mut ctx) };
        if status != abi::STATUS_OK {
            return Ok(Reply::failed(status, last_error(&lib)));
        }
        if ctx.is_null() {
            return Ok(Reply::failed(
                abi::STATUS_ERROR,
                "returned a null context".into(),
            ));
        }
        options.sort();
        let context = PluginContext {
            lib: lib.clone(),
            ctx,
            options,
        };
        let mut w = ByteWriter::new();
        w.u64(self.contexts.len() as u64);
        // SAFETY: a live context.
        w.u32(unsafe { (lib.desc.available)(ctx) });
        // SAFETY: as above.
        let count = unsafe { (lib.desc.device_count)(ctx) }.min(64);
        w.u32(count);
        for i in 0..count {
            let mut info = abi::DeviceInfo {
                struct_size: std::mem::size_of::<abi::DeviceInfo>() as u32,
                kind: 0,
                name: std::ptr::null(),
                driver_version: std::ptr::null(),
                memory_bytes: 0,
            };
            // SAFETY: `info` is a valid out-pointer.
            let status = unsafe { (lib.desc.device_info)(ctx, i, &mut info) };
            w.i32(status);
            if status != abi::STATUS_OK {
                w.str(&last_error(&lib));
                continue;
            }
            let text = |p: *const c_char| {
                if p.is_null() {
                    String::new()
                } else {
                    // SAFETY: device strings live as long as the context.
                    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
                }
            };
            w.u32(info.kind);
            w.str(&text(info.name));
            w.str(&text(info.driver_version));
            w.u64(info.memory_bytes);
        }
        self.contexts.push(Some(context));
        Ok(Reply::ok(w))
    }

    fn graph_call_args(
        &mut self,
        r: &mut ByteReader<'_>,
        shm_len: usize,
    ) -> Result<((*const u8, u64), Views), String> {
        let graph = self.range(r, shm_len)?;
        let consts = read_views(r, shm_len)?;
        Ok((graph, Views::new(consts, self.base())))
    }

    fn supports(&mut self, r: &mut ByteReader<'_>, shm_len: usize) -> Result<Reply, String> {
        let lib = self.lib()?;
        let ctx = self.context(r)?.ctx;
        let ((graph, len), consts) = self.graph_call_args(r, shm_len)?;
        let n = r.u32("answer count")? as usize;
        // Every node takes well over 8 bytes of BTIR: a count beyond that is not a graph's.
        if n as u64 > len / 8 + 1 {
            return Err(format!("{n} answers asked for a graph of {len} bytes"));
        }
        let mut answers = vec![
            abi::SupportAnswer {
                supported: 0,
                reason_code: 0,
                message: [0; abi::SUPPORT_MESSAGE_LEN],
            };
            n
        ];
        // SAFETY: the graph and views lie in the mapping; one answer slot per node.
        let status = unsafe {
            (lib.desc.supports)(
                ctx,
                graph,
                len,
                consts.views.as_ptr(),
                consts.views.len() as u32,
                answers.as_mut_ptr(),
                n as u32,
            )
        };
        if status != abi::STATUS_OK {
            return Ok(Reply::failed(status, last_error(&lib)));
        }
        let mut w = ByteWriter::new();
        w.u32(n as u32);
        for a in &answers {
            w.u32(a.supported);
            w.u32(a.reason_code);
            let end = a
                .message
                .iter()
                .position(|&c| c == 0)
                .unwrap_or(a.message.len());
            let bytes: Vec<u8> = a.message[..end].iter().map(|&c| c as u8).collect();
            w.str(&String::from_utf8_lossy(&bytes));
        }
        Ok(Reply::ok(w))
    }

    fn compile(&mut self, r: &mut ByteReader<'_>, shm_len: usize) -> Result<Reply, String> {
        let lib = self.lib()?;
        let ctx = self.context(r)?.ctx;
        let device = r.u32("device")?;
        let ((graph, len), consts) = self.graph_call_args(r, shm_len)?;
        let mut blob = abi::Blob {
            data: std::ptr::null_mut(),
            len: 0,
        };
        // SAFETY: the graph and views lie in the mapping for the call.
        let status = unsafe {
            (lib.desc.compile)(
                ctx,
                device,
                graph,
                len,
                consts.views.as_ptr(),
                consts.views.len() as u32,
                &mut blob,
            )
        };
        if status != abi::STATUS_OK {
            return Ok(Reply::failed(status, last_error(&lib)));
        }
        let mut w = ByteWriter::new();
        if blob.data.is_null() || blob.len == 0 {
            w.u64(0);
        } else {
            // SAFETY: the plugin returned `len` bytes at `data`.
            let bytes = unsafe { std::slice::from_raw_parts(blob.data, blob.len as usize) };
            w.u64(bytes.len() as u64);
            w.bytes(bytes);
        }
        // SAFETY: the blob came from this context and is freed once, by the plugin.
        unsafe { (lib.desc.free_blob)(ctx, blob) };
        Ok(Reply::ok(w))
    }

    fn init(&mut self, r: &mut ByteReader<'_>, shm_len: usize) -> Result<Reply, String> {
        let lib = self.lib()?;
        let ctx = self.context(r)?.ctx;
        let device = r.u32("device")?;
        let ((blob, len), consts) = self.graph_call_args(r, shm_len)?;
        let mut handle: abi::Handle = std::ptr::null_mut();
        // SAFETY: the blob and views lie in the mapping for the call.
        let status = unsafe {
            (lib.desc.init)(
                ctx,
                device,
                blob,
                len,
                consts.views.as_ptr(),
                consts.views.len() as u32,
                &mut handle,
            )
        };
        if status != abi::STATUS_OK {
            return Ok(Reply::failed(status, last_error(&lib)));
        }
        if handle.is_null() {
            return Ok(Reply::failed(
                abi::STATUS_ERROR,
                "returned a null handle".into(),
            ));
        }
        let mut w = ByteWriter::new();
        w.u64(self.execs.len() as u64);
        // Plain `init`: the blob and constants lie in the shared region only for this
        // call, so the plugin may not keep pointers into them (`init_retained`).
        self.execs.push(Some(PluginExecutable {
            lib,
            handle,
            retained: None,
        }));
        Ok(Reply::ok(w))
    }

    fn execute(&mut self, r: &mut ByteReader<'_>, shm_len: usize) -> Result<Reply, String> {
        let id = r.u64("handle id")? as usize;
        let inputs = read_views(r, shm_len)?;
        let outputs = read_views(r, shm_len)?;
        let base = self.base();
        let inputs = Views::new(inputs, base);
        let mut outputs = Views::new(outputs, base);
        let exec = self
            .execs
            .get_mut(id)
            .and_then(Option::as_mut)
            .ok_or_else(|| format!("no handle {id}"))?;
        // SAFETY: every view lies in the mapping (checked when read), output shapes point
        // at MAX_RANK slots, and the host laid outputs out apart from inputs.
        let status = unsafe {
            (exec.lib.desc.execute)(
                exec.handle,
                inputs.views.as_ptr(),
                inputs.views.len() as u32,
                outputs.views.as_mut_ptr(),
                outputs.views.len() as u32,
            )
        };
        if status != abi::STATUS_OK {
            return Ok(Reply::failed(status, last_error(&exec.lib)));
        }
        let mut w = ByteWriter::new();
        w.u32(outputs.views.len() as u32);
        for (v, shape) in outputs.views.iter().zip(&outputs.shapes) {
            let rank = (v.rank as usize).min(abi::MAX_RANK);
            w.u32(rank as u32);
            for &d in &shape[..rank] {
                w.u64(d as u64);
            }
        }
        Ok(Reply::ok(w))
    }
}
