//! The C side of the ABI, checked from Rust.
//!
//! - The header against `abi.rs`: a generated C program prints the size, alignment and
//!   offset of every field of every struct and the value of every constant, and assigns
//!   the address of every field to a pointer of the C type spelled from the Rust field's
//!   type, so a wrong type (even of a function pointer parameter) fails to compile.
//! - The header as strict C99 and as C++ (including C linkage of the entry symbol).
//! - A real C plugin (`tests/c_plugin/relu_add_plugin.c`) loaded with `libloading` and
//!   driven through every entry point, with numbers compared against values computed here.
//! - The plugin's three ABI-fault build variants.
//! - The C BTIR reader (`include/btir_reader.h`, the public one) against `wire.rs`: the same
//!   content for well-formed graphs, the same accept/reject verdict for thousands of
//!   truncated and corrupted ones, under AddressSanitizer.
//!
//! gcc and g++ are required. If they are missing these tests fail and say so; they never
//! pass without having run.
//!
//! One module per part: `layout` (the header against `abi.rs`), `plugin` (the C plugin,
//! driven through `host`, the host's side of each call), `btir_reader` (the C reader
//! against `wire.rs`); `tools` builds the C side for all three.

mod bcast;
mod btir_reader;
mod host;
mod layout;
mod plugin;
mod tools;
