//! The host's half of an isolated plugin: a descriptor whose entry points forward each
//! call to the plugin process. The host's [`PluginLibrary`](crate::plugin::PluginLibrary)
//! holds this descriptor in place of the plugin's own, so every path that calls a plugin
//! (probe, partitioning, compile, init, execute, profile, streaming, the conformance kit's
//! helpers) runs unchanged through it.
//!
//! Contexts and handles are boxes on this side that name their counterparts in the
//! process. Bulk bytes (graphs, constants, blobs going in, tensors both ways) are staged in
//! the shared region; only descriptions travel in the messages. A failure is reported the
//! ABI's way: a status, and the text [`last_error`] returns on this thread.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use baton_delegate_api::abi::{self, Descriptor};
use baton_delegate_api::bytes::{ByteReader, ByteWriter};

use super::process::{Failure, PluginProcess, State};
use super::shm::layout;
use super::wire::{kind, write_views, ViewDesc};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).expect("no NUL after replace");
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// The status for a failure, its text left for [`last_error`].
fn report(f: Failure) -> abi::Status {
    match f {
        Failure::Plugin { status, message } => {
            set_last_error(&message);
            status
        }
        Failure::Process(reason) => {
            set_last_error(&reason);
            abi::STATUS_ERROR
        }
    }
}

/// Runs a forwarding body; a panic in it (a bug on this side) becomes a status, never an
/// unwind across the C ABI.
fn guard(body: impl FnOnce() -> Result<(), Failure>) -> abi::Status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => abi::STATUS_OK,
        Ok(Err(f)) => report(f),
        Err(_) => {
            set_last_error("the host's forwarding to the plugin process panicked");
            abi::STATUS_PANIC
        }
    }
}

/// A device as the process described it when the context was created.
enum DeviceEntry {
    Ready {
        kind: u32,
        name: CString,
        driver: CString,
        memory: u64,
    },
    Failed {
        status: i32,
        message: String,
    },
}

/// This side of a context.
struct ProxyContext {
    process: Arc<PluginProcess>,
    remote: u64,
    available: u32,
    devices: Vec<DeviceEntry>,
}

/// This side of a handle.
struct ProxyHandle {
    process: Arc<PluginProcess>,
    remote: u64,
    /// The last run's profile events, fetched on the counting call.
    events: Option<Vec<(CString, CString, u64, u64)>>,
}

/// Reads `n` views of the host's, as the ABI passes them.
///
/// # Safety
/// `ptr` must point at `n` views when `n > 0`.
unsafe fn views<'a>(ptr: *const abi::TensorView, n: u32) -> &'a [abi::TensorView] {
    if n == 0 || ptr.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, n as usize)
    }
}

/// Where one call's bytes went in the shared region.
struct Staged {
    bulk: (u64, u64),
    inputs: Vec<ViewDesc>,
    outputs: Vec<ViewDesc>,
}

/// Lays out `bulk`, then the inputs, then room for the outputs, in the shared region, and
/// copies the bulk bytes and the inputs' data in.
///
/// # Safety
/// Every input view must point at `byte_len` readable bytes, and its shape and quant
/// arrays at their declared lengths.
unsafe fn stage(
    st: &mut State,
    call: &'static str,
    bulk: &[u8],
    inputs: &[abi::TensorView],
    outputs: &[abi::TensorView],
) -> Result<Staged, Failure> {
    let lens = std::iter::once(bulk.len())
        .chain(inputs.iter().map(|v| v.byte_len as usize))
        .chain(outputs.iter().map(|v| v.byte_len as usize));
    let Some((offsets, total)) = layout(lens) else {
        return Err(st.fail(format!("{call}: the tensors' sizes overflow")));
    };
    if let Err(e) = st.shm.ensure(total) {
        return Err(st.fail(format!(
            "{call}: cannot grow the shared region to {total} bytes: {e}"
        )));
    }
    let base = st.shm.base();
    std::ptr::copy_nonoverlapping(bulk.as_ptr(), base.add(offsets[0]), bulk.len());
    let mut descs = Vec::with_capacity(inputs.len());
    for (v, &at) in inputs.iter().zip(&offsets[1..]) {
        if v.byte_len > 0 && !v.data.is_null() {
            std::ptr::copy_nonoverlapping(v.data as *const u8, base.add(at), v.byte_len as usize);
        }
        descs.push(ViewDesc::of(v, at));
    }
    let outs = outputs
        .iter()
        .zip(&offsets[1 + inputs.len()..])
        .map(|(v, &at)| ViewDesc::of(v, at))
        .collect();
    Ok(Staged {
        bulk: (offsets[0] as u64, bulk.len() as u64),
        inputs: descs,
        outputs: outs,
    })
}

/// Creates a context in the process (the hook [`PluginLibrary::create`] calls in place of
/// the descriptor's `create`, which has no way to say which process), with its devices.
///
/// [`PluginLibrary::create`]: crate::plugin::PluginLibrary::create
pub(crate) fn create(
    process: &Arc<PluginProcess>,
    options: &[(String, String)],
    out: &mut abi::Context,
) -> abi::Status {
    guard(|| {
        let mut w = ByteWriter::new();
        w.u32(options.len() as u32);
        for (k, v) in options {
            w.str(k);
            w.str(v);
        }
        let mut st = process.lock();
        let body = st.call(process.timeout(), "create", kind::CREATE, &w.finish())?;
        let parsed = (|| -> Result<ProxyContext, String> {
            let mut r = ByteReader::new(&body);
            let remote = r.u64("context id")?;
            let available = r.u32("availability")?;
            let n = r.count_u32(4, "device count")?;
            let mut devices = Vec::with_capacity(n);
            for _ in 0..n {
                let status = r.i32("device status")?;
                if status != abi::STATUS_OK {
                    let message = r.str("device error")?.to_string();
                    devices.push(DeviceEntry::Failed { status, message });
                    continue;
                }
                let kind = r.u32("device kind")?;
                let name = crate::plugin::cstring(r.str("device name")?);
                let driver = crate::plugin::cstring(r.str("driver version")?);
                let memory = r.u64("device memory")?;
                devices.push(DeviceEntry::Ready {
                    kind,
                    name,
                    driver,
                    memory,
                });
            }
            Ok(ProxyContext {
                process: process.clone(),
                remote,
                available,
                devices,
            })
        })();
        match parsed {
            Ok(ctx) => {
                *out = Box::into_raw(Box::new(ctx)).cast();
                Ok(())
            }
            Err(e) => Err(st.protocol_error("create", e)),
        }
    })
}

/// The descriptor an isolated plugin is called through.
pub(super) fn descriptor(loaded: &super::Loaded) -> Descriptor {
    Descriptor {
        abi_major: abi::ABI_MAJOR,
        abi_minor: loaded.abi_minor,
        struct_size: std::mem::size_of::<Descriptor>() as u32,
        concurrency: loaded.concurrency,
        // The host reads the plugin's strings and options once, from the process's reply.
        name: std::ptr::null(),
        version: std::ptr::null(),
        build_id: std::ptr::null(),
        features: 0,
        option_count: 0,
        reserved: 0,
        options: std::ptr::null(),
        create: create_unreachable,
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
        profile: if loaded.has_profile {
            Some(profile)
        } else {
            None
        },
        btir_minor: loaded.btir_minor,
        capabilities: loaded.capabilities,
        // The shared region holds a call's bytes only for the call: nothing can be kept.
        init_retained: None,
        memory: if loaded.has_memory {
            Some(memory)
        } else {
            None
        },
    }
}

unsafe extern "C" fn create_unreachable(
    _: *const abi::OptionValue,
    _: u32,
    _: *mut abi::Context,
) -> abi::Status {
    set_last_error("an isolated plugin's contexts are created through PluginLibrary::create");
    abi::STATUS_ERROR
}

unsafe extern "C" fn last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `ctx` must be a context [`create`] made and not yet destroyed.
unsafe fn context<'a>(ctx: abi::Context) -> &'a ProxyContext {
    &*(ctx as *const ProxyContext)
}

unsafe extern "C" fn destroy_context(ctx: abi::Context) {
    if ctx.is_null() {
        return;
    }
    let ctx = Box::from_raw(ctx as *mut ProxyContext);
    let mut w = ByteWriter::new();
    w.u64(ctx.remote);
    let mut st = ctx.process.lock();
    // A process that already failed has nothing left to release.
    let _ = st.call(
        ctx.process.timeout(),
        "destroy_context",
        kind::DESTROY_CONTEXT,
        &w.finish(),
    );
}

unsafe extern "C" fn available(ctx: abi::Context) -> u32 {
    context(ctx).available
}

unsafe extern "C" fn device_count(ctx: abi::Context) -> u32 {
    context(ctx).devices.len() as u32
}

unsafe extern "C" fn device_info(
    ctx: abi::Context,
    index: u32,
    info: *mut abi::DeviceInfo,
) -> abi::Status {
    let Some(entry) = context(ctx).devices.get(index as usize) else {
        set_last_error(&format!("no device {index}"));
        return abi::STATUS_INVALID_ARGUMENT;
    };
    match entry {
        DeviceEntry::Failed { status, message } => {
            set_last_error(message);
            *status
        }
        DeviceEntry::Ready {
            kind,
            name,
            driver,
            memory,
        } => {
            let info = &mut *info;
            info.struct_size = info
                .struct_size
                .min(std::mem::size_of::<abi::DeviceInfo>() as u32);
            info.kind = *kind;
            info.name = name.as_ptr();
            info.driver_version = driver.as_ptr();
            info.memory_bytes = *memory;
            abi::STATUS_OK
        }
    }
}

/// # Safety
/// As the ABI's `supports`.
unsafe extern "C" fn supports(
    ctx: abi::Context,
    graph: *const u8,
    graph_len: u64,
    consts: *const abi::TensorView,
    const_count: u32,
    answers: *mut abi::SupportAnswer,
    answer_count: u32,
) -> abi::Status {
    guard(|| {
        let c = context(ctx);
        let graph = std::slice::from_raw_parts(graph, graph_len as usize);
        let mut st = c.process.lock();
        let staged = stage(&mut st, "supports", graph, views(consts, const_count), &[])?;
        let mut w = ByteWriter::new();
        w.u64(c.remote);
        w.u64(staged.bulk.0);
        w.u64(staged.bulk.1);
        write_views(&mut w, &staged.inputs);
        w.u32(answer_count);
        let body = st.call(c.process.timeout(), "supports", kind::SUPPORTS, &w.finish())?;
        let slots = std::slice::from_raw_parts_mut(answers, answer_count as usize);
        let parsed = (|| -> Result<(), String> {
            let mut r = ByteReader::new(&body);
            let n = r.u32("answer count")?;
            if n != answer_count {
                return Err(format!("{n} answers for {answer_count} nodes"));
            }
            for slot in slots.iter_mut() {
                slot.supported = r.u32("supported")?;
                slot.reason_code = r.u32("reason")?;
                let text = r.str("decline message")?.as_bytes();
                let n = text.len().min(abi::SUPPORT_MESSAGE_LEN - 1);
                slot.message = [0; abi::SUPPORT_MESSAGE_LEN];
                for (d, &s) in slot.message.iter_mut().zip(&text[..n]) {
                    *d = s as c_char;
                }
            }
            Ok(())
        })();
        parsed.map_err(|e| st.protocol_error("supports", e))
    })
}

/// # Safety
/// As the ABI's `compile`.
unsafe extern "C" fn compile(
    ctx: abi::Context,
    device: u32,
    graph: *const u8,
    graph_len: u64,
    consts: *const abi::TensorView,
    const_count: u32,
    out: *mut abi::Blob,
) -> abi::Status {
    guard(|| {
        let c = context(ctx);
        let graph = std::slice::from_raw_parts(graph, graph_len as usize);
        let mut st = c.process.lock();
        let staged = stage(&mut st, "compile", graph, views(consts, const_count), &[])?;
        let mut w = ByteWriter::new();
        w.u64(c.remote);
        w.u32(device);
        w.u64(staged.bulk.0);
        w.u64(staged.bulk.1);
        write_views(&mut w, &staged.inputs);
        let body = st.call(c.process.timeout(), "compile", kind::COMPILE, &w.finish())?;
        let mut r = ByteReader::new(&body);
        let blob = r
            .count(1, "blob length")
            .and_then(|n| r.take(n, "blob"))
            .map_err(|e| st.protocol_error("compile", e.to_string()))?;
        let boxed: Box<[u8]> = blob.into();
        let len = boxed.len() as u64;
        *out = abi::Blob {
            data: Box::into_raw(boxed).cast(),
            len,
        };
        Ok(())
    })
}

unsafe extern "C" fn free_blob(_ctx: abi::Context, blob: abi::Blob) {
    if !blob.data.is_null() {
        // SAFETY: `compile` made it from a boxed slice of exactly `len` bytes.
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            blob.data,
            blob.len as usize,
        )));
    }
}

unsafe extern "C" fn blob_compatibility(ctx: abi::Context, blob: *const u8, len: u64) -> u32 {
    let mut code = abi::compat::UNSUPPORTED;
    // A process that cannot answer cannot use the blob either: UNSUPPORTED (recompile).
    guard(|| {
        let c = context(ctx);
        let blob = std::slice::from_raw_parts(blob, len as usize);
        let mut st = c.process.lock();
        let staged = stage(&mut st, "blob_compatibility", blob, &[], &[])?;
        let mut w = ByteWriter::new();
        w.u64(c.remote);
        w.u64(staged.bulk.0);
        w.u64(staged.bulk.1);
        let body = st.call(
            c.process.timeout(),
            "blob_compatibility",
            kind::BLOB_COMPATIBILITY,
            &w.finish(),
        )?;
        code = ByteReader::new(&body)
            .u32("compatibility")
            .map_err(|e| st.protocol_error("blob_compatibility", e.to_string()))?;
        Ok(())
    });
    code
}

/// # Safety
/// As the ABI's `init`.
unsafe extern "C" fn init(
    ctx: abi::Context,
    device: u32,
    blob: *const u8,
    blob_len: u64,
    consts: *const abi::TensorView,
    const_count: u32,
    out: *mut abi::Handle,
) -> abi::Status {
    guard(|| {
        let c = context(ctx);
        let blob = if blob_len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(blob, blob_len as usize)
        };
        let mut st = c.process.lock();
        let staged = stage(&mut st, "init", blob, views(consts, const_count), &[])?;
        let mut w = ByteWriter::new();
        w.u64(c.remote);
        w.u32(device);
        w.u64(staged.bulk.0);
        w.u64(staged.bulk.1);
        write_views(&mut w, &staged.inputs);
        let body = st.call(c.process.timeout(), "init", kind::INIT, &w.finish())?;
        let remote = ByteReader::new(&body)
            .u64("handle id")
            .map_err(|e| st.protocol_error("init", e.to_string()))?;
        let handle = ProxyHandle {
            process: c.process.clone(),
            remote,
            events: None,
        };
        *out = Box::into_raw(Box::new(handle)).cast();
        Ok(())
    })
}

/// # Safety
/// As the ABI's `execute`.
unsafe extern "C" fn execute(
    handle: abi::Handle,
    inputs: *const abi::TensorView,
    input_count: u32,
    outputs: *mut abi::TensorView,
    output_count: u32,
) -> abi::Status {
    guard(|| {
        let h = &mut *(handle as *mut ProxyHandle);
        h.events = None;
        let outs: &mut [abi::TensorView] = if output_count == 0 || outputs.is_null() {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(outputs, output_count as usize)
        };
        let mut st = h.process.lock();
        let staged = stage(&mut st, "execute", &[], views(inputs, input_count), outs)?;
        let mut w = ByteWriter::new();
        w.u64(h.remote);
        write_views(&mut w, &staged.inputs);
        write_views(&mut w, &staged.outputs);
        let body = st.call(h.process.timeout(), "execute", kind::EXECUTE, &w.finish())?;
        let parsed = (|| -> Result<Vec<Vec<i64>>, String> {
            let mut r = ByteReader::new(&body);
            let n = r.u32("output count")?;
            if n != output_count {
                return Err(format!("{n} output shapes for {output_count} outputs"));
            }
            (0..n)
                .map(|_| {
                    let rank = r.u32("output rank")? as usize;
                    if rank > abi::MAX_RANK {
                        return Err(format!("output rank {rank} is over {}", abi::MAX_RANK));
                    }
                    (0..rank)
                        .map(|_| r.u64("output dim").map(|d| d as i64).map_err(String::from))
                        .collect()
                })
                .collect()
        })();
        let shapes = parsed.map_err(|e| st.protocol_error("execute", e))?;
        let base = st.shm.base();
        for ((v, d), shape) in outs.iter_mut().zip(&staged.outputs).zip(shapes) {
            if v.byte_len > 0 && !v.data.is_null() {
                // SAFETY: the output was laid out at `d.offset` with `byte_len` bytes, and
                // the host's view points at as many writable bytes.
                std::ptr::copy_nonoverlapping(
                    base.add(d.offset as usize),
                    v.data as *mut u8,
                    v.byte_len as usize,
                );
            }
            v.rank = shape.len() as u32;
            if !v.shape.is_null() {
                // SAFETY: output shapes point at MAX_RANK slots (the ABI's rule).
                std::slice::from_raw_parts_mut(v.shape, abi::MAX_RANK)[..shape.len()]
                    .copy_from_slice(&shape);
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn destroy(handle: abi::Handle) {
    if handle.is_null() {
        return;
    }
    let h = Box::from_raw(handle as *mut ProxyHandle);
    let mut w = ByteWriter::new();
    w.u64(h.remote);
    let mut st = h.process.lock();
    let _ = st.call(h.process.timeout(), "destroy", kind::DESTROY, &w.finish());
}

/// Fetches the last run's events from the process.
fn fetch_events(h: &mut ProxyHandle) -> Result<(), Failure> {
    let mut w = ByteWriter::new();
    w.u64(h.remote);
    let mut st = h.process.lock();
    let body = st.call(h.process.timeout(), "profile", kind::PROFILE, &w.finish())?;
    let parsed = (|| -> Result<Vec<(CString, CString, u64, u64)>, String> {
        let mut r = ByteReader::new(&body);
        let n = r.count_u32(24, "event count")?;
        (0..n)
            .map(|_| {
                let name = crate::plugin::cstring(r.str("event name")?);
                let kind = crate::plugin::cstring(r.str("event kind")?);
                Ok((name, kind, r.u64("cycles")?, r.u64("wall time")?))
            })
            .collect()
    })();
    h.events = Some(parsed.map_err(|e| st.protocol_error("profile", e))?);
    Ok(())
}

/// The memory the handle holds in the plugin process, as the plugin reports it there.
unsafe extern "C" fn memory(handle: abi::Handle, info: *mut abi::MemoryInfo) -> abi::Status {
    let h = &*(handle as *const ProxyHandle);
    let mut known = None;
    let status = guard(|| {
        let mut w = ByteWriter::new();
        w.u64(h.remote);
        let mut st = h.process.lock();
        let body = st.call(h.process.timeout(), "memory", kind::MEMORY, &w.finish())?;
        let parsed = (|| -> Result<Option<[u64; 3]>, String> {
            let mut r = ByteReader::new(&body);
            if r.u8("memory flag")? == 0 {
                return Ok(None);
            }
            Ok(Some([
                r.u64("scratch bytes")?,
                r.u64("owned bytes")?,
                r.u64("retained bytes")?,
            ]))
        })();
        known = parsed.map_err(|e| st.protocol_error("memory", e))?;
        Ok(())
    });
    if status != abi::STATUS_OK {
        return status;
    }
    let Some([scratch, owned, retained]) = known else {
        set_last_error("the plugin does not know its memory");
        return abi::STATUS_UNSUPPORTED;
    };
    let info = &mut *info;
    info.struct_size = info
        .struct_size
        .min(std::mem::size_of::<abi::MemoryInfo>() as u32);
    info.scratch_bytes = scratch;
    info.owned_bytes = owned;
    info.retained_bytes = retained;
    abi::STATUS_OK
}

unsafe extern "C" fn profile(
    handle: abi::Handle,
    events: *mut abi::ProfileEvent,
    capacity: u32,
) -> u32 {
    let h = &mut *(handle as *mut ProxyHandle);
    // The host counts first (NULL, 0), then fills: one fetch serves both.
    if (capacity == 0 || h.events.is_none()) && guard(|| fetch_events(h)) != abi::STATUS_OK {
        return 0;
    }
    let list = h.events.as_deref().unwrap_or(&[]);
    if !events.is_null() {
        let slots = std::slice::from_raw_parts_mut(events, capacity as usize);
        for (slot, (name, kind, cycles, wall)) in slots.iter_mut().zip(list) {
            slot.struct_size = slot
                .struct_size
                .min(std::mem::size_of::<abi::ProfileEvent>() as u32);
            slot.name = name.as_ptr();
            slot.kind = kind.as_ptr();
            slot.cycles = *cycles;
            slot.wall_ns = *wall;
        }
    }
    list.len() as u32
}

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;
