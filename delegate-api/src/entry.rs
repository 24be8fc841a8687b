//! How the host reaches a delegate: one entry function returning the delegate's
//! [`Descriptor`](crate::abi::Descriptor), found either by the dynamic loader (a plugin
//! file) or through a registration linked into the binary (a built-in backend).
//! Everything after the entry, the ABI handshake included, is the same for both.
//!
//! # Two macros, two jobs
//!
//! - [`export_delegate!`](crate::export_delegate)`(MyDelegate)` defines the entry as an
//!   ordinary Rust function, `my_crate::baton_delegate_entry`, whose linker symbol is
//!   mangled and so unique per crate, and registers it as a [`BuiltinDelegate`]. Any number
//!   of backends can be linked into one program; a program finds the ones it links with
//!   [`builtin_delegates`], without the host library naming any of them.
//! - [`export_plugin_entry!`](crate::export_plugin_entry)`(path::to::entry)` exports an
//!   entry under the C symbol [`ENTRY_SYMBOL`](crate::abi::ENTRY_SYMBOL), the one name the
//!   host looks up in a plugin file. It belongs only in a crate built as
//!   `crate-type = ["cdylib"]`.
//!
//! A vendor shipping one plugin from one crate writes both:
//!
//! ```ignore
//! baton_delegate_api::export_delegate!(MyDelegate);
//! baton_delegate_api::export_plugin_entry!(baton_delegate_entry);
//! ```
//!
//! # Why the exported symbol lives in a crate of its own
//!
//! Cargo compiles a `crate-type = ["cdylib", "rlib"]` library once, so an exported
//! (`#[no_mangle]`) symbol lands in its rlib too: two such backends linked into one binary
//! define the same symbol and the link fails, which is why a host used to depend on exactly
//! one backend. Neither a `cfg` nor a cargo feature can keep the symbol out of the rlib:
//! there is no `cfg` for the crate type being built, and features are unified across
//! everything one cargo invocation builds, so `cargo build --workspace` would turn a
//! "plugin" feature on for the very rlib the `baton` binary links.
//!
//! So each in-tree backend (`backends/<name>`) is an rlib that calls `export_delegate!`,
//! and a thin cdylib crate beside it (`backends/<name>/plugin`) holds nothing but
//! `export_plugin_entry!`. The thin crate's library target takes the backend's library
//! name (`baton_backend_cpu`), so the plugin file keeps the name every config, script and
//! test loads (`libbaton_backend_cpu.so`). The two targets do not collide: one writes a
//! `.rlib`, the other a `.so` (cargo gives no output-filename-collision warning; only the
//! informational `target/<profile>/libbaton_backend_cpu.d`, which cargo itself never reads,
//! is written by both), and the cdylib sets `doc = false`, because two documented libraries
//! of one name would write the same `target/doc` directory (cargo refuses that).
//!
//! Also weighed, and not taken:
//! - one exported symbol per backend (`baton_delegate_entry_cpu`): the rlibs would still
//!   export C symbols, and the host would need a name per plugin where the ABI promises one
//!   (plugins built against ABI 1.x export `baton_delegate_entry` and must keep loading);
//! - renaming the backend libraries (`baton_cpu`) so that the cdylib alone owns
//!   `baton_backend_cpu`: every user of a backend's Rust API would change its paths, for
//!   nothing the `doc = false` line does not already give;
//! - building the plugin under another name and copying it: cargo has no post-build step,
//!   and a file `cargo build` does not produce is a file CI forgets.
//!
//! # Why registration, not a dependency list
//!
//! A registration is a static the linker keeps whenever the backend's crate is linked at
//! all (the program says `use baton_backend_cpu as _;` where a cargo feature pulls it in),
//! so the host library iterates what is there and depends on no backend. This is how tract
//! registers its runtimes (`register_runtime!` over `inventory`).

use crate::abi::EntryFn;
use crate::sdk::PluginInfo;

/// Used by [`export_delegate!`](crate::export_delegate); not part of the API.
#[doc(hidden)]
pub use inventory as __inventory;

/// A delegate linked into this program, registered by
/// [`export_delegate!`](crate::export_delegate).
pub struct BuiltinDelegate {
    /// Its entry point: the function a plugin file would export, returning the
    /// [`Descriptor`](crate::abi::Descriptor). The host calls it exactly as it calls a
    /// loaded plugin's entry.
    pub entry: EntryFn,
    /// The delegate's [`PluginInfo`], read without calling the entry, so that a config's
    /// `builtin = "cpu"` is matched before anything of the delegate runs.
    pub info: fn() -> PluginInfo,
}

impl BuiltinDelegate {
    /// The name a config gives as `builtin = "…"`: the delegate's [`PluginInfo::name`].
    pub fn name(&self) -> &'static str {
        (self.info)().name
    }
}

inventory::collect!(BuiltinDelegate);

/// The delegates linked into this program, in no particular order.
pub fn builtin_delegates() -> impl Iterator<Item = &'static BuiltinDelegate> {
    inventory::iter::<BuiltinDelegate>.into_iter()
}

/// The delegate linked into this program under `name`, if any.
pub fn builtin_delegate(name: &str) -> Option<&'static BuiltinDelegate> {
    builtin_delegates().find(|b| b.name() == name)
}

/// Defines this crate's entry point, `baton_delegate_entry`, for the [`Delegate`] type
/// given, and registers it as a [`BuiltinDelegate`](crate::entry::BuiltinDelegate).
///
/// The function is plain Rust with a mangled symbol, so any number of crates may call this
/// macro and be linked together. A plugin file also needs
/// [`export_plugin_entry!`](crate::export_plugin_entry); [`crate::entry`] explains why the
/// two are separate.
///
/// [`Delegate`]: crate::sdk::Delegate
#[macro_export]
macro_rules! export_delegate {
    ($ty:ty) => {
        /// The Baton entry point of this crate's delegate: returns its descriptor, built on
        /// the first call. Exported to the loader only by `export_plugin_entry!`.
        pub extern "C" fn baton_delegate_entry() -> *const $crate::abi::Descriptor {
            static DESCRIPTOR: ::std::sync::OnceLock<$crate::sdk::StaticDescriptor> =
                ::std::sync::OnceLock::new();
            DESCRIPTOR
                .get_or_init($crate::sdk::StaticDescriptor::new::<$ty>)
                .as_ptr()
        }

        $crate::entry::__inventory::submit! {
            $crate::entry::BuiltinDelegate {
                entry: baton_delegate_entry,
                info: <$ty as $crate::sdk::Delegate>::info,
            }
        }
    };
}

/// Exports `entry` (a function defined by [`export_delegate!`](crate::export_delegate))
/// under the C symbol `baton_delegate_entry`, the one the host looks up in a plugin file.
///
/// Call it only in a crate built as `crate-type = ["cdylib"]`: in an rlib the symbol would
/// clash with every other plugin's linked into the same program.
#[macro_export]
macro_rules! export_plugin_entry {
    ($entry:path) => {
        /// The Baton plugin entry point, as the host's loader looks it up.
        #[export_name = "baton_delegate_entry"]
        pub extern "C" fn __baton_plugin_entry() -> *const $crate::abi::Descriptor {
            $entry()
        }
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exported_symbol_is_the_abi_entry_symbol() {
        // `export_plugin_entry!` spells the symbol as a literal (attributes take no
        // constants); this keeps the literal and the ABI constant together.
        let source = include_str!("entry.rs");
        let literal = format!("#[export_name = \"{}\"]", crate::abi::ENTRY_SYMBOL);
        assert!(source.contains(&literal));
    }
}
