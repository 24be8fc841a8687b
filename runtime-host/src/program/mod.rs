//! The Program stage: a model compiled ahead of time, and the `.baton` file that holds it.
//!
//! A [`Program`] is everything loading a model decides once: the graph specialised to its
//! input shapes, the partition plan with its reasons, one compiled blob per partition with
//! the identity of the plugin that made it, and the arena layout. [`compile`] makes one
//! (partitioning, asking each plugin to compile its partitions); [`load`] turns one into a
//! running [`Session`](crate::Session) (asking each plugin whether its stored blob is still
//! good, initialising, falling back). The just-in-time path, `baton run model.onnx`, is the
//! same two calls with the program kept in memory, so a `.baton` and its source model run
//! the very same blobs and layout and give bit-identical outputs.
//!
//! # The `.baton` file, version 1.0
//!
//! Little-endian throughout; every structure is readable with `memcpy` and bounds checks,
//! like BTIR (`baton_delegate_api::wire`), which it embeds. The file is a header, a
//! section table and the sections, each starting at a multiple of 64 bytes; the bytes
//! between sections are zero.
//!
//! ```text
//! header  (64 bytes)
//!   0  [u8; 8] magic "BATONPRG"
//!   8  u16     format major (1: a reader refuses any other)
//!  10  u16     format minor (0: a later minor only adds section kinds or header bytes)
//!  12  u32     header_size (64; the table starts here)
//!  16  u64     file_len (the whole file: a truncated or extended file is refused)
//!  24  u32     section_count
//!  28  u32     flags (0)
//!  32  u32     crc32c of bytes [0, header_size + 32 * section_count) with these 4 bytes zero
//!  36  [u8;28] reserved, zero
//! table   section_count entries of 32 bytes, in file order:
//!          u32 kind, u32 index, u64 offset, u64 len, u32 crc32c of the section, u32 zero
//! str     u32 len, len bytes of UTF-8, zero padding to a multiple of 4
//! ```
//!
//! Sections (offsets inside a section are from its start):
//!
//! | kind | name | contents |
//! | --- | --- | --- |
//! | 1 | graph | the specialised graph in BTIR, every constant *external*: constant `i` of the BTIR is entry `i` of the constants section |
//! | 2 | constants | `u32 count, u32 0, (u64 offset, u64 len)[count]`, then the bytes, each constant at a multiple of 64 |
//! | 3 | plan | `u32 node_count`, per node: `u32 partition` (`u32::MAX`: the host), `u32 n, str reason[n]` |
//! | 4 | partition `index` | `str backend, str plugin name, str plugin version, str build id, u32 ABI major, u32 ABI minor, u64 blob offset (a multiple of 64), u64 blob len`, zeros, the blob to the end of the section |
//! | 5 | memory | `u32 0` (no layout: the program is bounded), or `u32 1, u32 n, u64 arena_size, (u32 tensor, u32 0, u64 offset)[n]` |
//! | 6 | shapes | `u32 n, (str name, u64 value)[n]` the dimensions bound at compile time, then the same for the declared bounds |
//! | 7 | branch `2 * node + k` | branch `k` (0: then, 1: else) of If node `node`, compiled: a whole program in this format, nested (at most 16 deep) |
//!
//! The graph, constants, plan, memory and shapes sections appear once each, partitions
//! `0..n` once each, branches at most once each. Constants and blobs are 64-byte aligned in the file, which is mapped
//! into memory at load, so weights reach plugins as views into the mapping, not copies.
//!
//! Every section has a CRC-32C (hardware-accelerated on x86-64 and AArch64, so checking a
//! whole file costs little next to mapping it); the header's covers itself and the table.
//! With the zero-padding rule and `file_len`, every byte of the file is checked at load
//! unless the caller opts out.
//!
//! A bounded program (compiled with `--bound`) holds the graph unspecialised, the bounds,
//! and no partitions or layout: its partitions are compiled per binding at run time, as
//! [`crate::BoundedSession`] does for a model file.
//!
//! So does a program whose graph has *value inputs* (inputs whose values decide shapes,
//! see [`baton_reference::values`]): its plan section holds no decisions, its memory
//! section no layout, and it is specialised per value when run
//! ([`crate::Session::with_values`], [`crate::SpecializingSession`]). A reader tells it
//! from the graph itself (a value input is an input a shape operand is computed from), so
//! the format is unchanged and files written before value inputs existed read as before:
//! a specialised graph has none.

mod compile;
mod format;
mod load;
mod view;

pub use view::plugin_view;

use std::collections::BTreeMap;
use std::path::PathBuf;

use baton_delegate_api::ir::TensorData;
use baton_delegate_api::{Graph, TensorId, WireError};
use baton_partitioner::PartitionPlan;
use thiserror::Error;

pub use compile::compile;
pub(crate) use compile::{compile_specialised, partition_and_compile, usable_backends};
pub use format::{decode, encode, reseal, Bytes};
pub(crate) use load::load_with;
pub use load::{is_program, load, load_bounded, read, LoadOptions};

/// The magic bytes a `.baton` file starts with.
pub const MAGIC: &[u8; 8] = b"BATONPRG";
/// The format major version this build reads and writes.
pub const FORMAT_MAJOR: u16 = 1;
/// The format minor version this build writes.
pub const FORMAT_MINOR: u16 = 0;
const HEADER_SIZE: usize = 64;
const TABLE_ENTRY_SIZE: usize = 32;

/// A model compiled for the configured plugins, in memory or read from a `.baton` file.
pub struct Program {
    /// The graph, specialised to `bindings` (unspecialised when `bounds` are given).
    pub graph: Graph,
    /// The symbolic dimensions bound at compile time.
    pub bindings: BTreeMap<String, usize>,
    /// Upper bounds of symbolic dimensions; non-empty only for a bounded program.
    pub bounds: BTreeMap<String, usize>,
    /// Where every node runs, and why.
    pub plan: PartitionPlan,
    /// One compiled blob per partition of `plan`, in order.
    pub partitions: Vec<CompiledPartition>,
    /// The arena layout, `None` for a bounded program.
    pub memory: Option<MemoryLayout>,
    /// The compiled branches of the graph's If nodes, by `(node, 0 for then / 1 for else)`;
    /// a branch missing here (it cannot run for these shapes) is left to the load, which
    /// says why if the condition ever picks it.
    pub branches: BTreeMap<(usize, usize), Program>,
    /// What happened while compiling (backends dropped), for the user; not stored.
    pub notes: Vec<String>,
    /// The mapped file the program was read from, if any (see [`Pages`]).
    pub pages: Option<Pages>,
}

/// The pages of a mapped program file, handed back to the kernel once read.
///
/// Checking the checksums reads every page of the file, and `init` reads a blob once to
/// copy what it keeps, after which the mapping is not read again except for the constants
/// that host kernels use. Left resident, those pages would count twice in the process's
/// memory (once mapped, once in the plugins' copies); released, they are dropped from the
/// process (the kernel keeps them in its page cache) and read back from the file only if
/// touched again. The mapping is private and read-only, so a released page reads back
/// exactly as it was.
#[derive(Clone)]
pub struct Pages(pub(crate) std::sync::Arc<memmap2::Mmap>);

impl Pages {
    /// Drops the file's pages from this process's resident memory; advice only, so a
    /// failure changes nothing but the memory figure.
    pub fn release(&self) {
        #[cfg(unix)]
        // SAFETY: DONTNEED on a private read-only file mapping discards no data: the
        // pages were never written, so later reads fault in the file's unchanged bytes.
        unsafe {
            let _ = self.0.unchecked_advise(memmap2::UncheckedAdvice::DontNeed);
        }
    }
}

/// A partition's blob and the plugin that compiled it.
pub struct CompiledPartition {
    /// The backend name the plan uses (the config's name for the plugin).
    pub backend: String,
    pub plugin: PluginIdentity,
    /// What the plugin's `compile` returned; shared with the mapped file when loaded.
    pub blob: TensorData,
    /// Whether the blob was read from a file rather than just compiled: a stored blob
    /// that fails `init` is compiled again before its backend is given up.
    pub from_file: bool,
}

/// Which build of a plugin made a blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginIdentity {
    pub name: String,
    pub version: String,
    pub build_id: String,
    pub abi_major: u32,
    pub abi_minor: u32,
}

/// The arena: its size and the offset of every tensor placed in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLayout {
    pub arena_size: usize,
    /// `(tensor, offset)`, in the order the session places tensors.
    pub placed: Vec<(TensorId, usize)>,
}

impl Program {
    /// Total bytes of the graph's constants (the weights a load maps).
    pub fn constant_bytes(&self) -> usize {
        self.graph
            .tensors
            .iter()
            .filter_map(|t| match &t.data {
                Some(baton_delegate_api::Storage::Inline(d)) => Some(d.bytes().len()),
                _ => None,
            })
            .sum()
    }
}

/// What can be wrong with a program file, each naming the section (and offset) at fault.
#[derive(Debug, Error)]
pub enum ProgramError {
    // The cause is in the message, so it is a plain field, not also an error source
    // (a reporter printing the chain would say it twice).
    #[error("cannot read {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("not a Baton program: magic {found:?}, expected \"BATONPRG\"")]
    BadMagic { found: [u8; 8] },
    #[error("program format {found_major}.{found_minor} is not readable by this build (it reads {FORMAT_MAJOR}.x); compile the model again with `baton compile`")]
    Version { found_major: u16, found_minor: u16 },
    #[error("truncated: {what} ends at byte {end}, the file has {len}")]
    Truncated { what: String, end: u64, len: u64 },
    #[error("the file is {actual} bytes, its header says {recorded}: truncated or extended")]
    Length { recorded: u64, actual: u64 },
    #[error("header: {message}")]
    Header { message: String },
    #[error("header and section table: checksum {computed:#010x}, stored {stored:#010x}: the file is corrupted")]
    HeaderChecksum { stored: u32, computed: u32 },
    #[error("section {section} at offset {offset}: checksum {computed:#010x}, stored {stored:#010x}: the file is corrupted")]
    Checksum {
        section: String,
        offset: u64,
        stored: u32,
        computed: u32,
    },
    #[error("byte {offset} (padding before section {before}) is not zero: the file is corrupted")]
    Padding { offset: u64, before: String },
    #[error("section {section} is missing")]
    MissingSection { section: String },
    #[error("section {section} at offset {offset}: {message}")]
    Malformed {
        section: String,
        offset: u64,
        message: String,
    },
    #[error("section graph at offset {offset}: {error}")]
    Graph { offset: u64, error: WireError },
    #[error("the arena may need up to {needed} bytes, over the limit of {limit}")]
    ArenaLimit { needed: usize, limit: usize },
    #[error("partition {partition}: the blob of {plugin} is {answer} for the loaded plugin {loaded}, and recompiling is off (--no-recompile)")]
    StaleBlob {
        partition: usize,
        plugin: String,
        loaded: String,
        answer: &'static str,
    },
}
