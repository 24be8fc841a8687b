//! The `extern "C"` functions behind every exported descriptor. Each one catches panics
//! and turns errors into a status plus the thread's last-error text.

use super::*;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).expect("no NUL");
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, mapping `Err` and panics to a status and the last error.
fn guard(what: &str, f: impl FnOnce() -> Result<(), DelegateError>) -> Status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => abi::STATUS_OK,
        Ok(Err(e)) => {
            set_error(&e.message);
            if e.status == abi::STATUS_OK {
                abi::STATUS_ERROR
            } else {
                e.status
            }
        }
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            set_error(&format!("panic in {what}: {msg}"));
            abi::STATUS_PANIC
        }
    }
}

/// Like `guard` for entry points without a status: a panic yields `fallback`.
fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

struct Ctx<D: Delegate> {
    delegate: D,
    devices: Vec<(Device, CString, CString)>,
}

struct Exec<D: Delegate> {
    exec: Mutex<D::Executable>,
    /// The last run's events with their strings, kept alive for the host to read.
    events: Mutex<Vec<(CString, CString, u64, u64)>>,
}

unsafe fn ctx<'a, D: Delegate>(c: Context) -> Result<&'a Ctx<D>, DelegateError> {
    (c as *const Ctx<D>)
        .as_ref()
        .ok_or_else(|| DelegateError::invalid("null context"))
}

unsafe fn bytes<'a>(p: *const u8, len: u64) -> &'a [u8] {
    if len == 0 || p.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p, len as usize)
    }
}

unsafe fn slice<'a, T>(p: *const T, n: u32) -> &'a [T] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p, n as usize)
    }
}

pub unsafe extern "C" fn create<D: Delegate>(
    opts: *const abi::OptionValue,
    n: u32,
    out: *mut Context,
) -> Status {
    guard("create", || {
        if out.is_null() {
            return Err(DelegateError::invalid("create: null result pointer"));
        }
        let mut given = Vec::new();
        for o in slice(opts, n) {
            if o.key.is_null() || o.value.is_null() {
                return Err(DelegateError::invalid("null option key or value"));
            }
            let k = CStr::from_ptr(o.key).to_string_lossy().into_owned();
            let v = CStr::from_ptr(o.value).to_string_lossy().into_owned();
            given.push((k, v));
        }
        let options = Options::validate(&D::options(), &given).map_err(DelegateError::invalid)?;
        let delegate = D::create(&options)?;
        let devices = delegate
            .devices()
            .into_iter()
            .map(|d| {
                let n = CString::new(d.name.replace('\0', " ")).expect("no NUL");
                let v = CString::new(d.driver_version.replace('\0', " ")).expect("no NUL");
                (d, n, v)
            })
            .collect();
        *out = Box::into_raw(Box::new(Ctx { delegate, devices })) as Context;
        Ok(())
    })
}

pub unsafe extern "C" fn destroy_context<D: Delegate>(c: Context) {
    guard_value((), || {
        if !c.is_null() {
            drop(Box::from_raw(c as *mut Ctx<D>));
        }
    })
}

pub unsafe extern "C" fn last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

pub unsafe extern "C" fn available<D: Delegate>(c: Context) -> u32 {
    guard_value(0, || {
        ctx::<D>(c)
            .map(|c| c.delegate.available() as u32)
            .unwrap_or(0)
    })
}

pub unsafe extern "C" fn device_count<D: Delegate>(c: Context) -> u32 {
    guard_value(0, || {
        ctx::<D>(c).map(|c| c.devices.len() as u32).unwrap_or(0)
    })
}

pub unsafe extern "C" fn device_info<D: Delegate>(
    c: Context,
    index: u32,
    out: *mut DeviceInfo,
) -> Status {
    guard("device_info", || {
        let c = ctx::<D>(c)?;
        let (d, name, ver) = c
            .devices
            .get(index as usize)
            .ok_or_else(|| DelegateError::invalid(format!("no device {index}")))?;
        if out.is_null() {
            return Err(DelegateError::invalid("null device info"));
        }
        let ours = std::mem::size_of::<DeviceInfo>();
        let info = DeviceInfo {
            struct_size: ours as u32,
            kind: d.kind,
            name: name.as_ptr(),
            driver_version: ver.as_ptr(),
            memory_bytes: d.memory_bytes,
        };
        // Write no more than the host's struct holds (an older host has a shorter one),
        // and report how much was filled.
        let theirs = (*out).struct_size as usize;
        if theirs < std::mem::size_of::<u32>() {
            return Err(DelegateError::invalid(format!(
                "device info struct_size {theirs} is too small; set it to sizeof(BatonDeviceInfo)"
            )));
        }
        let n = theirs.min(ours);
        let info = DeviceInfo {
            struct_size: n as u32,
            ..info
        };
        std::ptr::copy_nonoverlapping(&info as *const DeviceInfo as *const u8, out as *mut u8, n);
        Ok(())
    })
}

fn decode(graph: &[u8]) -> Result<Graph, DelegateError> {
    wire::decode(graph).map_err(|e| DelegateError::invalid(format!("graph: {e}")))
}

pub unsafe extern "C" fn supports<D: Delegate>(
    c: Context,
    graph: *const u8,
    len: u64,
    consts: *const abi::TensorView,
    n_consts: u32,
    answers: *mut SupportAnswer,
    n_answers: u32,
) -> Status {
    guard("supports", || {
        let c = ctx::<D>(c)?;
        let g = decode(bytes(graph, len))?;
        if n_answers as usize != g.nodes.len() {
            return Err(DelegateError::invalid(format!(
                "{} answer slots for {} nodes",
                n_answers,
                g.nodes.len()
            )));
        }
        let views = views_from_abi(slice(consts, n_consts)).map_err(DelegateError::invalid)?;
        let result = c.delegate.supports(&g, Constants::new(&g, &views));
        if result.len() != g.nodes.len() {
            return Err(DelegateError::new(format!(
                "plugin answered {} of {} nodes",
                result.len(),
                g.nodes.len()
            )));
        }
        if answers.is_null() && n_answers > 0 {
            return Err(DelegateError::invalid("null answers array"));
        }
        let out = std::slice::from_raw_parts_mut(answers, n_answers as usize);
        for (slot, s) in out.iter_mut().zip(result) {
            slot.message = [0; abi::SUPPORT_MESSAGE_LEN];
            match s {
                Support::Yes => {
                    slot.supported = 1;
                    slot.reason_code = abi::reason::NONE;
                }
                Support::No(Decline { reason, message }) => {
                    slot.supported = 0;
                    slot.reason_code = reason.code();
                    let bytes = message.as_bytes();
                    // Cut at a character boundary: the header promises UTF-8.
                    let mut n = bytes.len().min(abi::SUPPORT_MESSAGE_LEN - 1);
                    while !message.is_char_boundary(n) {
                        n -= 1;
                    }
                    for (d, &s) in slot.message.iter_mut().zip(&bytes[..n]) {
                        *d = s as c_char;
                    }
                }
            }
        }
        Ok(())
    })
}

pub unsafe extern "C" fn compile<D: Delegate>(
    c: Context,
    device: u32,
    graph: *const u8,
    len: u64,
    consts: *const abi::TensorView,
    n_consts: u32,
    out: *mut Blob,
) -> Status {
    guard("compile", || {
        if out.is_null() {
            return Err(DelegateError::invalid("compile: null result pointer"));
        }
        let c = ctx::<D>(c)?;
        let g = decode(bytes(graph, len))?;
        let views = views_from_abi(slice(consts, n_consts)).map_err(DelegateError::invalid)?;
        let blob = c.delegate.compile(device, &g, Constants::new(&g, &views))?;
        let boxed = blob.into_boxed_slice();
        let len = boxed.len() as u64;
        *out = Blob {
            data: Box::into_raw(boxed) as *mut u8,
            len,
        };
        Ok(())
    })
}

pub unsafe extern "C" fn blob_compatibility<D: Delegate>(
    c: Context,
    blob: *const u8,
    len: u64,
) -> u32 {
    guard_value(abi::compat::UNSUPPORTED, || match ctx::<D>(c) {
        Ok(c) => c.delegate.blob_compatibility(bytes(blob, len)).code(),
        Err(_) => abi::compat::UNSUPPORTED,
    })
}

pub unsafe extern "C" fn free_blob(_c: Context, blob: Blob) {
    guard_value((), || {
        if !blob.data.is_null() {
            let s = std::ptr::slice_from_raw_parts_mut(blob.data, blob.len as usize);
            drop(Box::from_raw(s));
        }
    })
}

pub unsafe extern "C" fn init<D: Delegate>(
    c: Context,
    device: u32,
    blob: *const u8,
    len: u64,
    consts: *const abi::TensorView,
    n_consts: u32,
    out: *mut Handle,
) -> Status {
    init_with::<D>("init", c, consts, n_consts, out, |d, views| {
        d.init(device, bytes(blob, len), views)
    })
}

/// ABI 1.2: `init` for a blob the host keeps until `destroy`.
pub unsafe extern "C" fn init_retained<D: Delegate>(
    c: Context,
    device: u32,
    blob: *const u8,
    len: u64,
    consts: *const abi::TensorView,
    n_consts: u32,
    out: *mut Handle,
) -> Status {
    init_with::<D>("init_retained", c, consts, n_consts, out, |d, views| {
        if blob.is_null() && len > 0 {
            return Err(DelegateError::invalid("init_retained: null blob"));
        }
        // SAFETY: the ABI's promise for init_retained: the blob and the constants' bytes
        // outlive the handle, which owns the executable that may keep these.
        let retained = RetainedBlob::new(blob, len as usize);
        let kept: Vec<RetainedBlob> = views
            .iter()
            .map(|v| RetainedBlob::new(v.data.as_ptr(), v.data.len()))
            .collect();
        d.init_retained(device, retained, views, &kept)
    })
}

/// What `init` and `init_retained` share: the checks, the constant views, the handle.
unsafe fn init_with<D: Delegate>(
    call: &'static str,
    c: Context,
    consts: *const abi::TensorView,
    n_consts: u32,
    out: *mut Handle,
    make: impl FnOnce(&D, &[TensorRef<'_>]) -> Result<D::Executable, DelegateError>,
) -> Status {
    guard(call, || {
        if out.is_null() {
            return Err(DelegateError::invalid(format!(
                "{call}: null result pointer"
            )));
        }
        let c = ctx::<D>(c)?;
        let views = views_from_abi(slice(consts, n_consts)).map_err(DelegateError::invalid)?;
        *out = new_handle::<D>(make(&c.delegate, &views)?);
        Ok(())
    })
}

fn new_handle<D: Delegate>(exec: D::Executable) -> Handle {
    Box::into_raw(Box::new(Exec::<D> {
        exec: Mutex::new(exec),
        events: Mutex::new(Vec::new()),
    })) as Handle
}

/// ABI 1.2: the host memory a handle holds.
pub unsafe extern "C" fn memory<D: Delegate>(h: Handle, out: *mut abi::MemoryInfo) -> Status {
    guard("memory", || {
        let h = (h as *const Exec<D>)
            .as_ref()
            .ok_or_else(|| DelegateError::invalid("null handle"))?;
        if out.is_null() {
            return Err(DelegateError::invalid("memory: null result pointer"));
        }
        let used = h.exec.lock().unwrap_or_else(|p| p.into_inner()).memory();
        let Some(used) = used else {
            return Err(DelegateError::unsupported(
                "this delegate does not report memory",
            ));
        };
        let ours = std::mem::size_of::<abi::MemoryInfo>();
        // Write no more than the host's struct holds, as for DeviceInfo.
        let n = ((*out).struct_size as usize).min(ours);
        let info = abi::MemoryInfo {
            struct_size: n as u32,
            reserved: 0,
            scratch_bytes: used.scratch_bytes,
            owned_bytes: used.owned_bytes,
            retained_bytes: used.retained_bytes,
        };
        std::ptr::copy_nonoverlapping(
            &info as *const abi::MemoryInfo as *const u8,
            out as *mut u8,
            n,
        );
        Ok(())
    })
}

pub unsafe extern "C" fn execute<D: Delegate>(
    h: Handle,
    inputs: *const abi::TensorView,
    n_in: u32,
    outputs: *mut abi::TensorView,
    n_out: u32,
) -> Status {
    guard("execute", || {
        let h = (h as *const Exec<D>)
            .as_ref()
            .ok_or_else(|| DelegateError::invalid("null handle"))?;
        let ins = views_from_abi(slice(inputs, n_in)).map_err(DelegateError::invalid)?;
        if outputs.is_null() && n_out > 0 {
            return Err(DelegateError::invalid("null output list"));
        }
        let out_views: &mut [abi::TensorView] = if n_out == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(outputs, n_out as usize)
        };
        let mut outs = Vec::with_capacity(out_views.len());
        for (i, v) in out_views.iter().enumerate() {
            let dtype = DType::from_code(v.dtype)
                .ok_or_else(|| DelegateError::invalid(format!("output {i}: dtype {}", v.dtype)))?;
            // Outputs always carry MAX_RANK writable shape slots (see the header).
            if v.shape.is_null()
                || v.rank as usize > abi::MAX_RANK
                || (v.byte_len > 0 && v.data.is_null())
            {
                return Err(DelegateError::invalid(format!(
                    "output {i}: null pointer or rank above {}",
                    abi::MAX_RANK
                )));
            }
            let dims = std::slice::from_raw_parts(v.shape as *const i64, v.rank as usize);
            if dims.iter().any(|&d| d < 0) {
                return Err(DelegateError::invalid(format!(
                    "output {i}: negative extent in {dims:?}"
                )));
            }
            let shape: &[usize] = bytemuck::cast_slice(dims);
            let elems = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            if elems.and_then(|e| e.checked_mul(dtype.size())) != Some(v.byte_len as usize) {
                return Err(DelegateError::invalid(format!(
                    "output {i}: {} bytes do not fit shape {shape:?} of {dtype}",
                    v.byte_len
                )));
            }
            let data: &mut [u8] = if v.byte_len == 0 {
                &mut []
            } else {
                std::slice::from_raw_parts_mut(v.data as *mut u8, v.byte_len as usize)
            };
            outs.push(TensorMut::new(dtype, shape, data));
        }
        let mut exec = h.exec.lock().unwrap_or_else(|p| p.into_inner());
        let mut events = h.events.lock().unwrap_or_else(|p| p.into_inner());
        events.clear();
        exec.execute(&ins, &mut outs)?;
        let text = |s: &str| CString::new(s.replace('\0', " ")).expect("no NUL");
        *events = exec
            .profile()
            .iter()
            .map(|e| (text(&e.name), text(&e.kind), e.cycles, e.wall_ns))
            .collect();
        for (v, o) in out_views.iter_mut().zip(&outs) {
            let shape = o.shape();
            v.rank = shape.len() as u32;
            let dst = std::slice::from_raw_parts_mut(v.shape, shape.len());
            for (d, &s) in dst.iter_mut().zip(shape) {
                *d = s as i64;
            }
        }
        Ok(())
    })
}

pub unsafe extern "C" fn profile<D: Delegate>(
    h: Handle,
    out: *mut abi::ProfileEvent,
    capacity: u32,
) -> u32 {
    guard_value(0, || {
        let Some(h) = (h as *const Exec<D>).as_ref() else {
            return 0;
        };
        let events = h.events.lock().unwrap_or_else(|p| p.into_inner());
        if !out.is_null() {
            let ours = std::mem::size_of::<abi::ProfileEvent>();
            for (i, (name, kind, cycles, wall_ns)) in
                events.iter().take(capacity as usize).enumerate()
            {
                let slot = out.add(i);
                // Write no more than the host's struct holds, as for DeviceInfo.
                let theirs = (*slot).struct_size as usize;
                let n = theirs.min(ours);
                if n < std::mem::size_of::<u32>() {
                    continue;
                }
                let e = abi::ProfileEvent {
                    struct_size: n as u32,
                    reserved: 0,
                    name: name.as_ptr(),
                    kind: kind.as_ptr(),
                    cycles: *cycles,
                    wall_ns: *wall_ns,
                };
                std::ptr::copy_nonoverlapping(
                    &e as *const abi::ProfileEvent as *const u8,
                    slot as *mut u8,
                    n,
                );
            }
        }
        events.len() as u32
    })
}

pub unsafe extern "C" fn destroy<D: Delegate>(h: Handle) {
    guard_value((), || {
        if !h.is_null() {
            drop(Box::from_raw(h as *mut Exec<D>));
        }
    })
}
