//! The C plugin's entry points called as the host calls them: a loaded library, host-owned
//! tensors and one wrapper per call.

use std::ffi::{c_char, c_void, CStr};
use std::path::Path;

use baton_delegate_api::abi::{self, Blob, Context, Descriptor, Handle, SupportAnswer};
use baton_delegate_api::ir::{Graph, Storage};
use baton_delegate_api::wire::{self, ConstMode};
use baton_delegate_api::Tensor;

/// A loaded plugin library and its descriptor.
pub struct Loaded {
    desc: *const Descriptor,
    _lib: libloading::Library,
}

impl Loaded {
    /// Loads a library and calls its entry function (the descriptor is not read yet).
    pub fn open(path: &Path) -> Loaded {
        // SAFETY: the library is the test plugin built above.
        let lib = unsafe { libloading::Library::new(path) }.unwrap();
        // SAFETY: the entry symbol has this signature by contract.
        let desc = unsafe {
            let entry = lib
                .get::<abi::EntryFn>(abi::ENTRY_SYMBOL.as_bytes())
                .unwrap();
            entry()
        };
        assert!(!desc.is_null(), "the entry function returned NULL");
        Loaded { desc, _lib: lib }
    }

    /// The frozen prefix: (abi_major, abi_minor, struct_size). Reads nothing else.
    pub fn prefix(&self) -> (u32, u32, u32) {
        let p = self.desc.cast::<u32>();
        // SAFETY: every descriptor starts with these three u32 fields.
        unsafe { (p.read(), p.add(1).read(), p.add(2).read()) }
    }

    /// The descriptor, once the handshake has accepted it.
    pub fn descriptor(&self) -> &Descriptor {
        let (major, _, size) = self.prefix();
        assert_eq!(major, abi::ABI_MAJOR);
        assert!(size as usize >= abi::DESCRIPTOR_V1_SIZE);
        // SAFETY: the handshake says the whole v1 descriptor is there; it lives as long
        // as the library, which `self` owns.
        unsafe { &*self.desc }
    }
}

pub fn c_string(p: *const c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the plugin returns NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub fn last_error(d: &Descriptor) -> String {
    // SAFETY: last_error takes no arguments and returns a NUL-terminated string.
    c_string(unsafe { (d.last_error)() })
}

/// A host-owned tensor and the shape array its views point at.
pub struct HostTensor {
    pub t: Tensor,
    pub shape: Box<[i64; abi::MAX_RANK]>,
}

impl HostTensor {
    pub fn new(t: Tensor) -> HostTensor {
        let mut shape = Box::new([0i64; abi::MAX_RANK]);
        for (s, &d) in shape.iter_mut().zip(&t.shape) {
            *s = d as i64;
        }
        HostTensor { t, shape }
    }

    pub fn f32s(shape: &[usize], values: &[f32]) -> HostTensor {
        HostTensor::new(Tensor::from_f32(shape, values))
    }

    /// A view of the tensor, valid while `self` is neither moved out of nor dropped.
    pub fn view(&mut self) -> abi::TensorView {
        abi::TensorView {
            data: self.t.data.as_mut_slice().as_mut_ptr().cast::<c_void>(),
            byte_len: self.t.data.len() as u64,
            dtype: self.t.dtype.code(),
            rank: self.t.shape.len() as u32,
            shape: self.shape.as_mut_ptr(),
            quant: abi::QuantView {
                kind: 0,
                axis: 0,
                count: 0,
                reserved: 0,
                scales: std::ptr::null(),
                zero_points: std::ptr::null(),
            },
        }
    }
}

/// Host copies of the constants `ext` names (the order `wire::encode` returned).
pub fn constant_views(g: &Graph, ext: &[usize]) -> Vec<HostTensor> {
    ext.iter()
        .map(|&id| {
            let t = &g.tensors[id];
            let Some(Storage::Inline(data)) = &t.data else {
                panic!("tensor {} is not an inline constant", t.name)
            };
            HostTensor::new(Tensor::from_bytes(
                t.dtype,
                &t.static_shape().unwrap(),
                data.bytes(),
            ))
        })
        .collect()
}

pub fn views(ts: &mut [HostTensor]) -> Vec<abi::TensorView> {
    ts.iter_mut().map(HostTensor::view).collect()
}

/// Answers as (supported, reason, message); panics if a slot was left unwritten.
pub fn call_supports(
    d: &Descriptor,
    ctx: Context,
    bytes: &[u8],
    consts: &mut [HostTensor],
    slots: usize,
) -> (abi::Status, Vec<(bool, u32, String)>) {
    let cv = views(consts);
    let junk = SupportAnswer {
        supported: 77,
        reason_code: 77,
        message: [b'#' as c_char; abi::SUPPORT_MESSAGE_LEN],
    };
    let mut answers = vec![junk; slots];
    // SAFETY: every pointer is valid for the call; the counts match the arrays.
    let status = unsafe {
        (d.supports)(
            ctx,
            bytes.as_ptr(),
            bytes.len() as u64,
            cv.as_ptr(),
            cv.len() as u32,
            answers.as_mut_ptr(),
            slots as u32,
        )
    };
    if status != abi::STATUS_OK {
        return (status, Vec::new());
    }
    let answers = answers
        .iter()
        .enumerate()
        .map(|(i, a)| {
            assert!(a.supported <= 1, "answer slot {i} was not written");
            let end = a
                .message
                .iter()
                .position(|&c| c == 0)
                .unwrap_or_else(|| panic!("answer {i}: message is not NUL-terminated"));
            let msg: Vec<u8> = a.message[..end].iter().map(|&c| c as u8).collect();
            (
                a.supported == 1,
                a.reason_code,
                String::from_utf8(msg).unwrap(),
            )
        })
        .collect();
    (status, answers)
}

pub fn call_compile(
    d: &Descriptor,
    ctx: Context,
    g: &Graph,
    consts: &mut [HostTensor],
) -> Result<Blob, (abi::Status, String)> {
    let (bytes, _) = wire::encode(g, ConstMode::External);
    let cv = views(consts);
    let mut blob = Blob {
        data: std::ptr::null_mut(),
        len: 0,
    };
    // SAFETY: every pointer is valid for the call.
    let status = unsafe {
        (d.compile)(
            ctx,
            0,
            bytes.as_ptr(),
            bytes.len() as u64,
            cv.as_ptr(),
            cv.len() as u32,
            &mut blob,
        )
    };
    if status == abi::STATUS_OK {
        assert!(!blob.data.is_null() && blob.len > 0);
        Ok(blob)
    } else {
        Err((status, last_error(d)))
    }
}

pub fn blob_bytes(b: &Blob) -> Vec<u8> {
    // SAFETY: the plugin allocated `len` bytes at `data` and has not freed them.
    unsafe { std::slice::from_raw_parts(b.data, b.len as usize) }.to_vec()
}

pub fn call_init(
    d: &Descriptor,
    ctx: Context,
    blob: &[u8],
    consts: &mut [HostTensor],
) -> Result<Handle, (abi::Status, String)> {
    let cv = views(consts);
    let mut handle: Handle = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call.
    let status = unsafe {
        (d.init)(
            ctx,
            0,
            blob.as_ptr(),
            blob.len() as u64,
            cv.as_ptr(),
            cv.len() as u32,
            &mut handle,
        )
    };
    if status == abi::STATUS_OK {
        assert!(!handle.is_null());
        Ok(handle)
    } else {
        Err((status, last_error(d)))
    }
}

/// Runs execute; returns the status and the output views as the plugin left them.
pub fn call_execute(
    d: &Descriptor,
    h: Handle,
    inputs: &mut [HostTensor],
    outputs: &mut [HostTensor],
) -> (abi::Status, Vec<abi::TensorView>) {
    let ins = views(inputs);
    let mut outs = views(outputs);
    // SAFETY: the views point into `inputs`/`outputs`, alive for the call.
    let status = unsafe {
        (d.execute)(
            h,
            ins.as_ptr(),
            ins.len() as u32,
            outs.as_mut_ptr(),
            outs.len() as u32,
        )
    };
    (status, outs)
}
