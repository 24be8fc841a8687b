//! Loading plugins and calling them through the C ABI.
//!
//! The handshake happens before anything else: the host reads only the three frozen fields
//! (`abi_major`, `abi_minor`, `struct_size`) and refuses a different major or a short
//! descriptor with an error naming the plugin, both versions and the fix. Only then is any
//! function pointer called. Every later call goes through [`PluginContext`], which turns
//! status codes into [`HostError::PluginCall`] with the plugin's own error text.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_delegate_api::abi::{self, Descriptor, EntryFn};
use baton_delegate_api::entry::{builtin_delegate, builtin_delegates};
use baton_delegate_api::ir::TensorData;
use baton_delegate_api::sdk::{
    check_option, BlobCompatibility, DeclineReason, OptionDecl, ProfileEvent, Support,
};
use baton_delegate_api::Graph;

use crate::error::{HostError, OptionProblem, Result};

#[cfg(all(unix, not(target_vendor = "apple")))]
mod elf;
mod file;
use file::hash_file;
#[cfg(target_os = "linux")]
pub mod isolated;
mod placement;
mod views;
pub use views::{
    bounded_output, check_output_shapes, execute_owned, run_once, run_once_profiled, view_of,
    AbiGraph,
};

/// Names of the backends linked into this program (see [`baton_delegate_api::entry`]: each
/// registers itself; the host library links none, the `baton` binary links those its cargo
/// features select).
pub fn builtin_names() -> Vec<&'static str> {
    builtin_delegates().map(|b| b.name()).collect()
}

/// Where a plugin came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginSource {
    File(PathBuf),
    Builtin(&'static str),
}

impl std::fmt::Display for PluginSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginSource::File(p) => write!(f, "{}", p.display()),
            PluginSource::Builtin(n) => write!(f, "builtin:{n}"),
        }
    }
}

/// A loaded plugin library whose descriptor passed the handshake.
pub struct PluginLibrary {
    /// The host's copy of the plugin's descriptor: the bytes its `struct_size` covers,
    /// zeros after them (so a 1.0 plugin's missing 1.1 `profile` reads as NULL, and no
    /// reference ever spans memory the plugin did not declare).
    desc: Descriptor,
    pub source: PluginSource,
    pub name: String,
    pub version: String,
    pub build_id: String,
    pub abi_minor: u32,
    pub concurrency: u32,
    /// The option schema read from the descriptor.
    pub options: Vec<OptionDecl>,
    /// sha256 of the library file (builtins: of the host executable's version string).
    pub file_hash: String,
    /// The plugin process, for a plugin loaded with [`PluginLibrary::load_isolated`]
    /// (`desc` then forwards every call to it).
    #[cfg(target_os = "linux")]
    process: Option<Arc<isolated::PluginProcess>>,
    // Declared last: dropped after everything that may point into the library.
    _lib: Option<libloading::Library>,
}

impl PluginLibrary {
    /// Loads a shared library and performs the ABI handshake.
    pub fn load(path: &Path, expected_sha256: Option<&str>) -> Result<Arc<PluginLibrary>> {
        let (file_hash, head, file_len) = hash_file(path).map_err(|error| HostError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        if let Some(expected) = expected_sha256 {
            if !expected.eq_ignore_ascii_case(&file_hash) {
                return Err(HostError::HashMismatch {
                    plugin: path.display().to_string(),
                    expected: expected.to_lowercase(),
                    found: file_hash,
                });
            }
        }
        // The loader maps the file's segments on trust: a truncated library would end this
        // process with SIGBUS inside dlopen. (Checked on the bytes read above; a file
        // replaced between the two reads is the config owner's doing, as with the pin.)
        #[cfg(all(unix, not(target_vendor = "apple")))]
        elf::check_head(&head, file_len).map_err(|why| HostError::PluginLoad {
            path: path.to_path_buf(),
            message: format!("not loadable on this host: {why}"),
        })?;
        #[cfg(not(all(unix, not(target_vendor = "apple"))))]
        let _ = (head, file_len);
        // SAFETY: loading a library runs its initialisers; that is the trust a user grants
        // by naming a plugin in the config (and may narrow with a sha256 pin).
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| HostError::PluginLoad {
            path: path.to_path_buf(),
            message: without_path_prefix(&e.to_string(), path),
        })?;
        let entry: EntryFn = {
            let symbol = format!("{}\0", abi::ENTRY_SYMBOL);
            // SAFETY: the symbol's type is fixed by the ABI.
            let sym = unsafe { lib.get::<EntryFn>(symbol.as_bytes()) }.map_err(|_| {
                HostError::MissingEntry {
                    path: path.to_path_buf(),
                    symbol: abi::ENTRY_SYMBOL.into(),
                }
            })?;
            *sym
        };
        let source = PluginSource::File(path.to_path_buf());
        Self::handshake(entry, source, file_hash, Some(lib))
    }

    /// Opens a built-in backend through the same handshake.
    pub fn builtin(name: &str) -> Result<Arc<PluginLibrary>> {
        let b = builtin_delegate(name).ok_or_else(|| {
            let linked = builtin_names();
            let linked = if linked.is_empty() {
                "none: this program links no backend; the `baton` binary links them by cargo \
                 feature (`cpu`, the default, `vulkan`, `npu-sim`), or name the plugin file \
                 with `path = ...`"
                    .to_string()
            } else {
                linked.join(", ")
            };
            HostError::PluginLoad {
                path: PathBuf::from(format!("builtin:{name}")),
                message: format!("no built-in backend '{name}' (built in: {linked})"),
            }
        })?;
        let name = b.name();
        let hash = sha256_hex(format!("builtin:{name}:{}", env!("CARGO_PKG_VERSION")).as_bytes());
        Self::handshake(b.entry, PluginSource::Builtin(name), hash, None)
    }

    fn handshake(
        entry: EntryFn,
        source: PluginSource,
        file_hash: String,
        lib: Option<libloading::Library>,
    ) -> Result<Arc<PluginLibrary>> {
        let label = source.to_string();
        // SAFETY: calling the entry point is the first act of the ABI; it takes no arguments.
        let ptr = unsafe { entry() };
        if ptr.is_null() {
            return Err(HostError::PluginLoad {
                path: PathBuf::from(&label),
                message: "entry point returned a null descriptor".into(),
            });
        }
        // Read only the frozen prefix until the versions are known to match.
        // SAFETY: every ABI version starts with these three u32 fields.
        let (major, minor, size) = unsafe {
            let p = ptr as *const u32;
            (p.read(), p.add(1).read(), p.add(2).read())
        };
        if major != abi::ABI_MAJOR {
            let fix = if major > abi::ABI_MAJOR {
                format!("upgrade the host to a Baton release with ABI {major}.x, or use a build of the plugin for ABI {}.x", abi::ABI_MAJOR)
            } else {
                format!(
                    "rebuild the plugin against baton-delegate-api / baton_delegate.h ABI {}.x",
                    abi::ABI_MAJOR
                )
            };
            return Err(HostError::AbiMismatch {
                plugin: label,
                plugin_major: major,
                plugin_minor: minor,
                host_major: abi::ABI_MAJOR,
                host_minor: abi::ABI_MINOR,
                fix,
            });
        }
        if (size as usize) < abi::DESCRIPTOR_V1_SIZE {
            return Err(HostError::DescriptorTooShort {
                plugin: label,
                found: size,
                needed: abi::DESCRIPTOR_V1_SIZE,
                major,
            });
        }
        // Every function pointer must be set before a reference to the descriptor may exist
        // (a NULL in a non-nullable field would be undefined behaviour on our side).
        let fn_count =
            (abi::DESCRIPTOR_V1_SIZE - abi::DESCRIPTOR_FN_OFFSET) / std::mem::size_of::<usize>();
        for i in 0..fn_count {
            // SAFETY: struct_size covers the whole v1 descriptor, checked above.
            let word = unsafe {
                (ptr as *const u8)
                    .add(abi::DESCRIPTOR_FN_OFFSET)
                    .cast::<usize>()
                    .add(i)
                    .read_unaligned()
            };
            if word == 0 {
                return Err(HostError::PluginLoad {
                    path: PathBuf::from(&label),
                    message: format!("descriptor function pointer #{i} is NULL; every v1 entry point must be set"),
                });
            }
        }
        // Copy what the plugin declared into a zeroed host-side descriptor: fields a later
        // minor appended that this plugin lacks stay zero (NULL), and fields a newer plugin
        // has beyond our struct are not read.
        let declared = (size as usize).min(std::mem::size_of::<Descriptor>());
        let mut desc: Descriptor = unsafe {
            let mut copy = std::mem::MaybeUninit::<Descriptor>::zeroed();
            // SAFETY: the plugin declared `size` readable bytes at `ptr`, at least the whole
            // v1 descriptor (checked above) with every v1 function pointer non-NULL.
            std::ptr::copy_nonoverlapping(ptr as *const u8, copy.as_mut_ptr() as *mut u8, declared);
            // SAFETY: every v1 field is a copied valid value; the rest are zeroed nullable
            // function pointers (`Option<fn>`), for which zero is `None`.
            copy.assume_init()
        };
        // A size that ends inside an appended field leaves that field unfilled: a pointer
        // cut in half is not a function, and a missing BTIR minor is the one 1.1 carried.
        let covers = |end: usize| declared >= end;
        macro_rules! end_of {
            ($field:ident) => {
                std::mem::offset_of!(Descriptor, $field) + std::mem::size_of_val(&desc.$field)
            };
        }
        if !covers(end_of!(profile)) {
            desc.profile = None;
        }
        if !covers(end_of!(btir_minor)) {
            desc.btir_minor = abi::BTIR_MINOR_BEFORE_1_2;
        }
        if !covers(end_of!(init_retained)) {
            desc.init_retained = None;
        }
        if !covers(end_of!(memory)) {
            desc.memory = None;
        }
        let text = |p: *const c_char| -> String {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: descriptor strings are null-terminated and static.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        let mut options = Vec::new();
        if desc.option_count > 0 && !desc.options.is_null() {
            // SAFETY: the descriptor declares `option_count` specs at `options`.
            let specs =
                unsafe { std::slice::from_raw_parts(desc.options, desc.option_count as usize) };
            for s in specs {
                options.push(OptionDecl {
                    name: leak(text(s.name)),
                    kind: s.kind,
                    default: leak(text(s.default_value)),
                    min: s.min,
                    max: s.max,
                    choices: leak(text(s.choices)),
                    help: leak(text(s.help)),
                });
            }
        }
        Ok(Arc::new(PluginLibrary {
            name: text(desc.name),
            version: text(desc.version),
            build_id: text(desc.build_id),
            abi_minor: minor,
            concurrency: desc.concurrency,
            desc,
            options,
            file_hash,
            source,
            #[cfg(target_os = "linux")]
            process: None,
            _lib: lib,
        }))
    }

    /// Validates `options` against the schema (errors name the key) and creates a context.
    pub fn create(self: &Arc<Self>, options: &[(String, String)]) -> Result<PluginContext> {
        for (k, v) in options {
            let decl = self.options.iter().find(|d| d.name == k).ok_or_else(|| {
                HostError::PluginOption {
                    plugin: self.label(),
                    key: k.clone(),
                    problem: OptionProblem::Unknown {
                        accepted: self.options.iter().map(|d| d.name.to_string()).collect(),
                    },
                }
            })?;
            check_option(decl, v).map_err(|reason| HostError::PluginOption {
                plugin: self.label(),
                key: k.clone(),
                problem: OptionProblem::Invalid {
                    value: v.clone(),
                    reason,
                },
            })?;
        }
        let cstrings: Vec<(CString, CString)> = options
            .iter()
            .map(|(k, v)| (cstring(k), cstring(v)))
            .collect();
        let raw: Vec<abi::OptionValue> = cstrings
            .iter()
            .map(|(k, v)| abi::OptionValue {
                key: k.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let mut ctx: abi::Context = std::ptr::null_mut();
        // An isolated plugin's context is made in its process (the C `create` cannot say
        // which process it is for).
        #[cfg(target_os = "linux")]
        let isolated = self
            .process
            .as_ref()
            .map(|p| isolated::create(p, options, &mut ctx));
        #[cfg(not(target_os = "linux"))]
        let isolated = None;
        // SAFETY: the option array and its strings outlive the call.
        let status = isolated.unwrap_or_else(|| unsafe {
            (self.desc.create)(raw.as_ptr(), raw.len() as u32, &mut ctx)
        });
        self.check("create", status)?;
        if ctx.is_null() {
            return Err(self.call_error(
                "create",
                abi::STATUS_ERROR,
                "returned a null context".into(),
            ));
        }
        let mut options = options.to_vec();
        options.sort();
        Ok(PluginContext {
            lib: self.clone(),
            ctx,
            options,
        })
    }

    /// The highest BTIR minor the plugin reads (ABI 1.2 `btir_minor`; the minor ABI 1.1
    /// carried for an older plugin).
    pub fn btir_minor(&self) -> u32 {
        self.desc.btir_minor
    }

    /// The plugin's ABI 1.3 `capabilities` bits; 0 for an older plugin (its word was
    /// reserved, or not there).
    pub fn capabilities(&self) -> u32 {
        if self.abi_minor >= 3 {
            self.desc.capabilities
        } else {
            0
        }
    }

    /// Whether the plugin takes the value-dependent ops with bounded outputs (ABI 1.3
    /// `BATON_CAP_BOUNDED_OUTPUTS`): only such a plugin is given one of those nodes.
    pub fn bounded_outputs(&self) -> bool {
        self.capabilities() & abi::CAP_BOUNDED_OUTPUTS != 0
    }

    /// `name version` for messages.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }

    fn last_error(&self) -> String {
        // SAFETY: last_error returns a thread-local string valid until our next call.
        let p = unsafe { (self.desc.last_error)() };
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    }

    fn call_error(&self, call: &'static str, status: i32, message: String) -> HostError {
        HostError::PluginCall {
            plugin: self.label(),
            call,
            status,
            message,
        }
    }

    fn check(&self, call: &'static str, status: i32) -> Result<()> {
        if status == abi::STATUS_OK {
            return Ok(());
        }
        let kind = match status {
            abi::STATUS_UNSUPPORTED => "unsupported",
            abi::STATUS_INVALID_ARGUMENT => "invalid argument",
            abi::STATUS_PANIC => "panicked",
            _ => "error",
        };
        let text = self.last_error();
        let message = if text.is_empty() {
            format!("{kind} (status {status}, no message)")
        } else {
            format!("{kind}: {text}")
        };
        Err(self.call_error(call, status, message))
    }
}

/// A device as reported by a plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceReport {
    pub index: u32,
    pub name: String,
    pub kind: u32,
    pub driver_version: String,
    pub memory_bytes: u64,
}

/// A created plugin context (one per configured plugin).
pub struct PluginContext {
    pub lib: Arc<PluginLibrary>,
    ctx: abi::Context,
    /// The options the context was created with, sorted by key: they change what the
    /// plugin computes, so they are part of the probe cache key.
    options: Vec<(String, String)>,
}

// SAFETY: the ABI requires contexts to be callable from any thread.
unsafe impl Send for PluginContext {}
// SAFETY: as above; concurrent calls on a context are allowed by the contract.
unsafe impl Sync for PluginContext {}

impl Drop for PluginContext {
    fn drop(&mut self) {
        // SAFETY: the context came from this library's `create` and is destroyed once.
        unsafe { (self.lib.desc.destroy_context)(self.ctx) }
    }
}

impl PluginContext {
    /// The options this context was created with, sorted by key.
    pub fn options(&self) -> &[(String, String)] {
        &self.options
    }

    /// The plugin's own availability hint (never trusted alone: see `probe`).
    pub fn available_hint(&self) -> bool {
        // SAFETY: valid context.
        unsafe { (self.lib.desc.available)(self.ctx) != 0 }
    }

    /// The devices the plugin reports.
    pub fn devices(&self) -> Result<Vec<DeviceReport>> {
        // SAFETY: valid context.
        let n = unsafe { (self.lib.desc.device_count)(self.ctx) };
        let mut out = Vec::new();
        for i in 0..n.min(64) {
            let mut info = abi::DeviceInfo {
                struct_size: std::mem::size_of::<abi::DeviceInfo>() as u32,
                kind: 0,
                name: std::ptr::null(),
                driver_version: std::ptr::null(),
                memory_bytes: 0,
            };
            // SAFETY: `info` is a valid out-pointer.
            let status = unsafe { (self.lib.desc.device_info)(self.ctx, i, &mut info) };
            self.lib.check("device_info", status)?;
            let text = |p: *const c_char| {
                if p.is_null() {
                    String::new()
                } else {
                    // SAFETY: device strings live as long as the context.
                    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
                }
            };
            out.push(DeviceReport {
                index: i,
                name: text(info.name),
                kind: info.kind,
                driver_version: text(info.driver_version),
                memory_bytes: info.memory_bytes,
            });
        }
        Ok(out)
    }

    /// Asks which nodes of `graph` the plugin supports.
    pub fn supports(&self, graph: &Graph) -> Result<Vec<Support>> {
        let call = AbiGraph::new(graph);
        let mut answers = vec![
            abi::SupportAnswer {
                supported: 0,
                reason_code: 0,
                message: [0; abi::SUPPORT_MESSAGE_LEN],
            };
            graph.nodes.len()
        ];
        // SAFETY: buffers outlive the call; answers has one slot per node.
        let status = unsafe {
            (self.lib.desc.supports)(
                self.ctx,
                call.bytes.as_ptr(),
                call.bytes.len() as u64,
                call.views.as_ptr(),
                call.views.len() as u32,
                answers.as_mut_ptr(),
                answers.len() as u32,
            )
        };
        self.lib.check("supports", status)?;
        Ok(answers
            .iter()
            .map(|a| {
                if a.supported != 0 {
                    Support::Yes
                } else {
                    let msg = &a.message;
                    let end = msg.iter().position(|&c| c == 0).unwrap_or(msg.len());
                    let bytes: Vec<u8> = msg[..end].iter().map(|&c| c as u8).collect();
                    let reason =
                        DeclineReason::from_code(a.reason_code).unwrap_or(DeclineReason::Other);
                    Support::no(reason, String::from_utf8_lossy(&bytes))
                }
            })
            .collect())
    }

    /// Compiles a subgraph into a blob (copied into aligned host memory, so that it can be
    /// retained by `init`; the plugin's copy is freed).
    pub fn compile(&self, device: u32, graph: &Graph) -> Result<TensorData> {
        let call = AbiGraph::new(graph);
        let mut blob = abi::Blob {
            data: std::ptr::null_mut(),
            len: 0,
        };
        // SAFETY: buffers outlive the call.
        let status = unsafe {
            (self.lib.desc.compile)(
                self.ctx,
                device,
                call.bytes.as_ptr(),
                call.bytes.len() as u64,
                call.views.as_ptr(),
                call.views.len() as u32,
                &mut blob,
            )
        };
        self.lib.check("compile", status)?;
        let out = if blob.data.is_null() || blob.len == 0 {
            TensorData::from_bytes(&[])
        } else {
            // SAFETY: the plugin returned `len` bytes at `data`.
            TensorData::from_bytes(unsafe {
                std::slice::from_raw_parts(blob.data, blob.len as usize)
            })
        };
        // SAFETY: the blob came from this plugin and is freed once, by it.
        unsafe { (self.lib.desc.free_blob)(self.ctx, blob) };
        Ok(out)
    }

    /// Whether a stored blob can be used by this build of the plugin; an [`abi::compat`]
    /// code that is none of the known ones reads as unsupported (recompile).
    pub fn blob_compatibility(&self, blob: &[u8]) -> BlobCompatibility {
        // SAFETY: valid context; the blob outlives the call.
        let answer = unsafe {
            (self.lib.desc.blob_compatibility)(self.ctx, blob.as_ptr(), blob.len() as u64)
        };
        BlobCompatibility::from_code(answer).unwrap_or(BlobCompatibility::Unsupported)
    }

    /// Initialises an executable from a blob; `graph` is the subgraph it was compiled from
    /// (its constants are passed again as views).
    ///
    /// A plugin with ABI 1.2's `init_retained` gets the blob and the constants for the
    /// executable's whole life: the executable keeps `blob` and the constants' data
    /// (shared handles: a mapped program's sections or buffers the graph owns, never
    /// copied here) until the plugin has destroyed the handle, so the plugin may read its
    /// weights in place instead of copying them.
    pub fn init(&self, device: u32, blob: &TensorData, graph: &Graph) -> Result<PluginExecutable> {
        let call = AbiGraph::new(graph);
        let mut handle: abi::Handle = std::ptr::null_mut();
        let bytes = blob.bytes();
        // The promise init_retained makes: the bytes stay put and 64-byte aligned. Every
        // TensorData is (owned buffers are allocated so, mapped sections are placed so);
        // anything else goes through plain init.
        let retained = self
            .lib
            .desc
            .init_retained
            .filter(|_| bytes.as_ptr().align_offset(abi::DATA_ALIGNMENT) == 0);
        // Both entry points take the same arguments; only the lifetime promise differs.
        let (call_name, f) = match retained {
            Some(f) => ("init_retained", f),
            None => ("init", self.lib.desc.init),
        };
        // SAFETY: buffers outlive the call; a retained blob outlives the handle (kept below).
        let status = unsafe {
            f(
                self.ctx,
                device,
                bytes.as_ptr(),
                bytes.len() as u64,
                call.views.as_ptr(),
                call.views.len() as u32,
                &mut handle,
            )
        };
        self.lib.check(call_name, status)?;
        if handle.is_null() {
            return Err(self.lib.call_error(
                "init",
                abi::STATUS_ERROR,
                "returned a null handle".into(),
            ));
        }
        Ok(PluginExecutable {
            lib: self.lib.clone(),
            handle,
            retained: retained.map(|_| (blob.clone(), call.data)),
        })
    }
}

/// An initialised partition inside a plugin.
pub struct PluginExecutable {
    lib: Arc<PluginLibrary>,
    handle: abi::Handle,
    /// The blob and constants an `init_retained` handle may point into. `Drop` destroys
    /// the handle before the fields drop, so the bytes outlive every use the plugin makes
    /// of them.
    retained: Option<(TensorData, Vec<TensorData>)>,
}

// SAFETY: handles may move between threads; the host never executes one concurrently
// (it holds `&mut self` for `execute`).
unsafe impl Send for PluginExecutable {}

impl Drop for PluginExecutable {
    fn drop(&mut self) {
        // SAFETY: the handle came from this library's `init` and is destroyed once.
        unsafe { (self.lib.desc.destroy)(self.handle) }
    }
}

impl PluginExecutable {
    /// Runs with prepared ABI views. After a successful call the output views' `rank`
    /// and `shape` hold what the plugin reports; the caller checks them.
    ///
    /// # Safety
    /// Every view must point at valid memory of its declared size for the call, output
    /// `shape` pointers at `MAX_RANK` writable slots, and outputs must not alias inputs.
    pub unsafe fn execute_raw(
        &mut self,
        inputs: &[abi::TensorView],
        outputs: &mut [abi::TensorView],
    ) -> Result<()> {
        let status = (self.lib.desc.execute)(
            self.handle,
            inputs.as_ptr(),
            inputs.len() as u32,
            outputs.as_mut_ptr(),
            outputs.len() as u32,
        );
        self.lib.check("execute", status)
    }

    /// The library this executable belongs to.
    pub fn library(&self) -> &PluginLibrary {
        &self.lib
    }

    /// Whether the plugin was given the blob for the handle's life (`init_retained`).
    pub fn retains_blob(&self) -> bool {
        self.retained.is_some()
    }

    /// Bytes of the blob the host keeps for this handle (0 when the plugin copied what it
    /// needed at `init`): memory of the model's that no plugin report counts.
    pub fn kept_blob_bytes(&self) -> usize {
        self.retained
            .as_ref()
            .map_or(0, |(blob, _)| blob.bytes().len())
    }

    /// The host memory the handle holds, as the plugin reports it (ABI 1.2 `memory`);
    /// `None` for an older plugin or one that does not know.
    pub fn memory(&self) -> Option<abi::MemoryInfo> {
        let f = self.lib.desc.memory?;
        let mut info = abi::MemoryInfo {
            struct_size: std::mem::size_of::<abi::MemoryInfo>() as u32,
            ..Default::default()
        };
        // SAFETY: a valid handle and a host-owned struct of the declared size.
        let status = unsafe { f(self.handle, &mut info) };
        if status != abi::STATUS_OK {
            return None;
        }
        // Fields beyond what the plugin says it filled are unknown: zero them.
        let filled = (info.struct_size as usize).min(std::mem::size_of::<abi::MemoryInfo>());
        let end = |offset: usize| offset + std::mem::size_of::<u64>() <= filled;
        if !end(std::mem::offset_of!(abi::MemoryInfo, scratch_bytes)) {
            return None;
        }
        if !end(std::mem::offset_of!(abi::MemoryInfo, owned_bytes)) {
            info.owned_bytes = 0;
        }
        if !end(std::mem::offset_of!(abi::MemoryInfo, retained_bytes)) {
            info.retained_bytes = 0;
        }
        Some(info)
    }

    /// The events of the last successful execute, if the plugin reports any (ABI 1.1
    /// `profile`); empty for a 1.0 plugin or one without profiling.
    pub fn profile(&self) -> Vec<ProfileEvent> {
        // NULL for a 1.0 plugin: its descriptor copy is zero past `destroy`.
        let Some(f) = self.lib.desc.profile else {
            return Vec::new();
        };
        // SAFETY: counting only: a NULL array with capacity 0.
        let n = unsafe { f(self.handle, std::ptr::null_mut(), 0) };
        let blank = abi::ProfileEvent {
            struct_size: std::mem::size_of::<abi::ProfileEvent>() as u32,
            reserved: 0,
            name: std::ptr::null(),
            kind: std::ptr::null(),
            cycles: 0,
            wall_ns: 0,
        };
        // A plugin answering with an absurd count gets a bounded array, not an allocation.
        let mut events = vec![blank; (n as usize).min(1 << 16)];
        // SAFETY: `events` has the capacity we pass, each slot's struct_size set.
        let filled = unsafe { f(self.handle, events.as_mut_ptr(), events.len() as u32) };
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: the plugin's strings live until the next execute on this handle.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        events
            .iter()
            .take(filled as usize)
            .map(|e| {
                // Fields beyond the plugin's struct_size keep our zero defaults.
                let has = |end: usize| e.struct_size as usize >= end;
                ProfileEvent {
                    name: if has(24) { text(e.name) } else { String::new() },
                    kind: if has(24) { text(e.kind) } else { String::new() },
                    cycles: if has(32) { e.cycles } else { 0 },
                    wall_ns: if has(40) { e.wall_ns } else { 0 },
                }
            })
            .collect()
    }
}

/// Hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).expect("no NUL after replace")
}

/// Option specs are read once per library load and live for the process: libraries are
/// few and loaded once, so leaking a few strings buys `&'static str` in the shared type.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The dynamic loader's message without the leading `PATH: ` it puts there (dlerror
/// does), since [`HostError::PluginLoad`] names the file already.
fn without_path_prefix(message: &str, path: &Path) -> String {
    message
        .strip_prefix(&format!("{}: ", path.display()))
        .unwrap_or(message)
        .to_string()
}
